//! Classifying a finished run from the runtime: the bridge between [`crate::exec`] and
//! [`find_denials`].

use super::{find_denials, merge, Denial, Evidence, EvidenceKind};
use crate::exec::ExecResult;

/// Turns the runtime's unclassified result into one whose outcome is `denied` when, and only
/// when, the evidence shows the sandbox refused something. Unsandboxed runs are never denied.
pub fn classify_result(result: ExecResult) -> ExecResult<Denial> {
    result.classify(|r| match &r.policy {
        None => Vec::new(),
        Some(policy) => {
            let mut found = find_denials(&Evidence {
                policy,
                cwd: &r.cwd,
                argv: &r.argv,
                exit_code: r.exit_code,
                signal: r.signal,
                records: &r.records,
                stdout: &r.stdout.bytes,
                stderr: &r.stderr.bytes,
                kernel: r.kernel_denials.as_deref(),
                kernel_light: r.light_kernel_denials.as_deref(),
                audit: r.audit_denials.as_deref(),
            });
            // The proxy's own refusals first-hand: what the command asked for, not what it said.
            // A run that succeeded anyway is not denied (`classify` keeps its outcome).
            if r.exit_code != Some(0) {
                found.extend(r.network_denials.iter().cloned());
            }
            merge(found)
        }
    })
}

impl std::fmt::Display for Denial {
    /// One line for people: `denied write to /etc/hosts (not under any writable root; allow
    /// with --writable /etc) (from the command's output)`; the last part says what the denial
    /// is known from, so that a person approving it knows a command could have made it up.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::Operation::*;
        let what = match self.operation {
            FileWrite => "write to",
            FileRead => "read of",
            FileExecute => "execution of",
            Network => "network access to",
            TcpPort => "TCP port",
            UnixSocket => "connection to unix socket",
            Syscall => "system call",
        };
        let target = self.target.as_deref().unwrap_or("(unknown target)");
        let known_from = match self.evidence {
            EvidenceKind::Text => "from the command's output",
            EvidenceKind::HelperRecord => "from the helper's exec record",
            EvidenceKind::Proxy => "from cordon's proxy",
            EvidenceKind::SeccompObserver => "seen by the seccomp observer",
            EvidenceKind::LandlockAudit => "from Landlock's audit record",
        };
        let times = match self.count {
            0 | 1 => String::new(),
            n => format!(", {n} times"),
        };
        write!(
            f,
            "denied {what} {target} ({}; allow with {}) ({known_from}{times})",
            self.rule, self.allow_with
        )
    }
}
