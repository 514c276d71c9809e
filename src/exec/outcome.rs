//! What happened to a command: [`Outcome`], and the full record, [`ExecResult`].
//!
//! The runtime never decides whether a failure was a sandbox denial; it produces an
//! [`ExecResult<Unclassified>`] holding every piece of evidence (policy, exit status, status
//! records, output), and a classifier turns it into an [`ExecResult<D>`] with
//! [`ExecResult::classify`]. `Unclassified` has no values, so an unclassified result provably
//! has no `Denied` outcome.
//!
//! ```
//! use cordon::exec::{Outcome, Unclassified};
//!
//! let outcome: Outcome<Unclassified> = Outcome::Signaled { signal: 9 };
//! assert_eq!(outcome.exit_code(), 137);
//! assert_eq!(serde_json::to_string(&outcome).unwrap(), r#"{"kind":"signaled","signal":9}"#);
//! ```

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use cordon_sandbox::status::{ConfinementReceipt, StatusRecord, Step};
use cordon_sandbox::SandboxPolicy;
use serde::{Deserialize, Serialize, Serializer};

use super::capture::Captured;

/// Exit code for a timeout.
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code when cordon itself failed: setup error, rejected request.
pub const EXIT_CORDON: i32 = 125;
/// Exit code when the program could not be executed.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit code when the program was not found.
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit code after cancellation, as a shell reports SIGINT.
pub const EXIT_CANCELLED: i32 = 130;

/// The denial type of a result nobody has classified yet. It has no values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unclassified {}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome<D = Unclassified> {
    /// Exit status 0.
    Success,
    /// A non-zero exit status not attributed to the sandbox.
    Failed {
        /// The command's exit status.
        code: i32,
    },
    /// The command failed because the sandbox denied something (set only by a classifier).
    Denied {
        /// What was denied.
        denials: Vec<D>,
        /// The exit code of the outcome this replaced (the command's status, `128+N`, 126...).
        code: i32,
    },
    /// The timeout expired; the process group was killed.
    TimedOut,
    /// The command was killed by a signal cordon did not send.
    Signaled {
        /// The signal number.
        signal: i32,
    },
    /// The request's cancellation token fired; the process group was killed.
    Cancelled,
    /// The sandbox could not be built; the command never ran.
    SetupError {
        /// The step that failed.
        step: SetupStep,
        /// The errno, when a system call failed.
        errno: Option<i32>,
        /// What failed and how to fix it.
        message: String,
    },
    /// The sandbox was built but the program could not be executed.
    ExecError {
        /// The errno of `execve`.
        errno: i32,
        /// The system's description of it.
        message: String,
    },
    /// The request was invalid; nothing was spawned.
    Rejected {
        /// Why.
        reason: String,
    },
    /// The command hit one of its resource limits and failed or was killed for it.
    LimitExceeded {
        /// Which limit.
        limit: super::limits::LimitKind,
        /// The exit code of the outcome this replaced (the command's status or `128+N`).
        code: i32,
    },
}

impl<D> Outcome<D> {
    /// The exit code a wrapper should exit with: the command's own; 124 timeout; `128+N`
    /// signal; 125 setup error or rejected; 126/127 exec error; 130 cancelled.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Success => 0,
            Outcome::Failed { code }
            | Outcome::Denied { code, .. }
            | Outcome::LimitExceeded { code, .. } => *code,
            Outcome::TimedOut => EXIT_TIMEOUT,
            Outcome::Signaled { signal } => 128 + signal,
            Outcome::Cancelled => EXIT_CANCELLED,
            Outcome::SetupError { .. } | Outcome::Rejected { .. } => EXIT_CORDON,
            Outcome::ExecError { errno, .. } => exec_error_code(*errno),
        }
    }

    /// The snake_case tag, as serialised (`"timed_out"`).
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failed { .. } => "failed",
            Outcome::Denied { .. } => "denied",
            Outcome::TimedOut => "timed_out",
            Outcome::Signaled { .. } => "signaled",
            Outcome::Cancelled => "cancelled",
            Outcome::SetupError { .. } => "setup_error",
            Outcome::ExecError { .. } => "exec_error",
            Outcome::Rejected { .. } => "rejected",
            Outcome::LimitExceeded { .. } => "limit_exceeded",
        }
    }
}

/// 127 when the program was not found, 126 otherwise, as shells do.
pub fn exec_error_code(errno: i32) -> i32 {
    if errno == libc::ENOENT || errno == libc::ENOTDIR {
        EXIT_NOT_FOUND
    } else {
        EXIT_NOT_EXECUTABLE
    }
}

impl Outcome<Unclassified> {
    /// The same outcome with another denial type (an unclassified outcome has no denials).
    pub fn widen<D>(self) -> Outcome<D> {
        match self {
            Outcome::Success => Outcome::Success,
            Outcome::Failed { code } => Outcome::Failed { code },
            Outcome::Denied { code, .. } => Outcome::Denied {
                denials: Vec::new(),
                code,
            },
            Outcome::TimedOut => Outcome::TimedOut,
            Outcome::Signaled { signal } => Outcome::Signaled { signal },
            Outcome::Cancelled => Outcome::Cancelled,
            Outcome::SetupError {
                step,
                errno,
                message,
            } => Outcome::SetupError {
                step,
                errno,
                message,
            },
            Outcome::ExecError { errno, message } => Outcome::ExecError { errno, message },
            Outcome::Rejected { reason } => Outcome::Rejected { reason },
            Outcome::LimitExceeded { limit, code } => Outcome::LimitExceeded { limit, code },
        }
    }
}

/// Where a setup error happened: a step of the helper, or the parent's own launch.
/// Serialised as the bare step name (`"landlock"`, `"spawn_helper"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SetupStep {
    /// A step the helper reported in a `setup_error` record.
    Helper(Step),
    /// A step of the parent.
    Parent(ParentStep),
}

impl std::fmt::Display for SetupStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(name)) => f.write_str(&name),
            _ => write!(f, "{self:?}"),
        }
    }
}

/// Steps of the parent's launch that can fail before the command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParentStep {
    /// Creating the status pipe or spawning the helper (or, unsandboxed, forking).
    SpawnHelper,
    /// The status pipe held something that is not a status record.
    StatusPipe,
    /// The helper ended without reporting either confinement or an error.
    HelperSilent,
    /// Waiting for the child failed.
    Wait,
}

/// Whether the command ran confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Run directly, with the caller's full access.
    None,
    /// Run through the confining helper.
    Helper,
}

/// Which output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamKind {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Everything known about one run: the outcome and all the evidence behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecResult<D = Unclassified> {
    /// How it ended.
    pub outcome: Outcome<D>,
    /// Whether it was confined.
    pub sandbox: SandboxMode,
    /// The command as requested.
    #[serde(serialize_with = "lossy_list")]
    pub argv: Vec<OsString>,
    /// The working directory as requested.
    #[serde(serialize_with = "lossy_path")]
    pub cwd: PathBuf,
    /// The policy it ran under (`None` when unsandboxed).
    pub policy: Option<SandboxPolicy>,
    /// The process id (the helper's, which `execve` keeps for the command).
    pub pid: Option<u32>,
    /// The raw exit status, when the process exited.
    pub exit_code: Option<i32>,
    /// The raw terminating signal, when it was killed (including by cordon).
    pub signal: Option<i32>,
    /// Every status record the helper wrote, in order.
    pub records: Vec<StatusRecord>,
    /// What the helper enforced, from its `confined` record.
    pub receipt: Option<ConfinementReceipt>,
    /// Standard output, capped.
    pub stdout: Captured,
    /// Standard error, capped.
    pub stderr: Captured,
    /// Both streams interleaved in the order they were read, capped.
    pub output: Captured,
    /// From just before spawning to the end of supervision.
    pub duration: Duration,
    /// Environment variable names removed by the environment policy.
    pub dropped_env: Vec<String>,
    /// Output bytes not delivered as streaming events because the receiver lagged (they are
    /// still in `stdout`/`stderr`, subject to the cap).
    pub events_dropped_bytes: u64,
    /// Connections cordon's proxy refused (`network.mode = "proxy"`), sorted, each once.
    /// Classification counts them as denials of a failed run; they are here even when the
    /// command succeeded anyway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_denials: Vec<crate::classify::Denial>,
    /// Which mechanism enforced each requested resource limit.
    pub limits: Vec<super::limits::LimitReceipt>,
    /// What the seccomp observer saw refused, merged by target, when it ran (`None` when no
    /// kernel source of evidence was in force: the classifier then falls back to the text).
    /// Raw evidence: whether these are the outcome's denials is the classifier's decision
    /// (a command that succeeded was denied nothing it needed).
    pub kernel_denials: Option<Vec<crate::classify::Denial>>,
    /// What the observer saw refused when it watched only the calls made rarely (the default
    /// scope, [`cordon_sandbox::observe::ObserveScope::Light`]): exact for network,
    /// unix-socket, port and system-call denials and for refused directory, node and symlink
    /// creations; writing opens and removals are then not covered (`None` when that scope did
    /// not run).
    pub light_kernel_denials: Option<Vec<crate::classify::Denial>>,
    /// What Landlock's audit records say it refused in this run, when they could be read
    /// (`CAP_AUDIT_READ` and audit enabled; see [`crate::evidence`]).
    pub audit_denials: Option<Vec<crate::classify::Denial>>,
}

impl<D> ExecResult<D> {
    /// The exit code a wrapper should use; see [`Outcome::exit_code`].
    pub fn cordon_exit_code(&self) -> i32 {
        self.outcome.exit_code()
    }
}

impl ExecResult<Unclassified> {
    /// Runs a classifier over the evidence. When it finds denials and the outcome is one the
    /// sandbox can cause (`failed`, `signaled`, `exec_error`), the outcome becomes `denied`,
    /// keeping the exit code. A success is never a denial; timeouts, cancellations, setup
    /// errors and rejections are kept as they are.
    pub fn classify<D>(self, find: impl FnOnce(&ExecResult) -> Vec<D>) -> ExecResult<D> {
        let can_be_denial = matches!(
            self.outcome,
            Outcome::Failed { .. } | Outcome::Signaled { .. } | Outcome::ExecError { .. }
        );
        let denials = if can_be_denial {
            find(&self)
        } else {
            Vec::new()
        };
        let outcome = if denials.is_empty() {
            self.outcome.widen()
        } else {
            Outcome::Denied {
                code: self.outcome.exit_code(),
                denials,
            }
        };
        ExecResult {
            outcome,
            sandbox: self.sandbox,
            argv: self.argv,
            cwd: self.cwd,
            policy: self.policy,
            pid: self.pid,
            exit_code: self.exit_code,
            signal: self.signal,
            records: self.records,
            receipt: self.receipt,
            stdout: self.stdout,
            stderr: self.stderr,
            output: self.output,
            duration: self.duration,
            dropped_env: self.dropped_env,
            events_dropped_bytes: self.events_dropped_bytes,
            network_denials: self.network_denials,
            limits: self.limits,
            kernel_denials: self.kernel_denials,
            light_kernel_denials: self.light_kernel_denials,
            audit_denials: self.audit_denials,
        }
    }
}

fn lossy_list<S: Serializer>(list: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|a| a.to_string_lossy()))
}

fn lossy_path<S: Serializer>(path: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        let cases: [(Outcome, i32); 9] = [
            (Outcome::Success, 0),
            (Outcome::Failed { code: 3 }, 3),
            (Outcome::TimedOut, 124),
            (Outcome::Signaled { signal: 15 }, 143),
            (Outcome::Cancelled, 130),
            (
                Outcome::SetupError {
                    step: SetupStep::Helper(Step::Landlock),
                    errno: Some(2),
                    message: String::new(),
                },
                125,
            ),
            (
                Outcome::ExecError {
                    errno: libc::ENOENT,
                    message: String::new(),
                },
                127,
            ),
            (
                Outcome::ExecError {
                    errno: libc::EACCES,
                    message: String::new(),
                },
                126,
            ),
            (
                Outcome::Rejected {
                    reason: String::new(),
                },
                125,
            ),
        ];
        for (outcome, code) in cases {
            assert_eq!(outcome.exit_code(), code, "{outcome:?}");
        }
    }

    #[test]
    fn tags_are_snake_case_and_steps_bare() {
        let o: Outcome = Outcome::SetupError {
            step: SetupStep::Helper(Step::CloseFds),
            errno: None,
            message: "m".into(),
        };
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"setup_error","step":"close_fds","errno":null,"message":"m"}"#
        );
        assert_eq!(serde_json::from_str::<Outcome>(&json).unwrap(), o);
        let step = SetupStep::Parent(ParentStep::SpawnHelper);
        let json = serde_json::to_string(&step).unwrap();
        assert_eq!(json, r#""spawn_helper""#);
        assert_eq!(serde_json::from_str::<SetupStep>(&json).unwrap(), step);
        let o: Outcome = Outcome::TimedOut;
        assert_eq!(
            serde_json::to_string(&o).unwrap(),
            r#"{"kind":"timed_out"}"#
        );
        assert_eq!(o.kind(), "timed_out");
    }
}
