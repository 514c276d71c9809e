//! Denial classification: did the sandbox stop this command, and what would let it through?
//!
//! [`find_denials`] looks at everything known about one finished command (its policy, working
//! directory, argv, exit status, the helper's status records and its output) and returns the
//! operations the *sandbox* refused, each with the rule that refused it and the smallest profile
//! change that would allow it. It is synchronous, does no I/O except resolving symlinks and
//! reading file metadata on the paths it is asked about, and never fails: when the evidence is
//! not conclusive the answer is "no denial", because a false denial sends an agent to ask a
//! person for a permission that would not help.
//!
//! A message is evidence only together with the policy:
//!
//! * a command that exited 0 is never denied, and a `setup_error` record means the sandbox
//!   failed, not the command;
//! * a message naming a path is a denial only if the policy forbids that access to that path
//!   (relative paths are resolved against the cwd, symlinks as the kernel would);
//! * network failures count only when `network.mode` is `denied`, unix-socket failures only when
//!   `unix_sockets` is `deny`; an `EPERM` from a socket call or a resolver failure is what tools
//!   print when seccomp refuses `socket`/`connect`;
//! * a layer that the helper's `confined` record does not list (Landlock, seccomp) cannot have
//!   denied anything, and a carve-out it lists as downgraded was not enforced.
//!
//! ```
//! use std::ffi::OsString;
//! use std::path::Path;
//! use cordon::classify::{find_denials, Evidence, Operation};
//! use cordon_sandbox::SandboxPolicy;
//!
//! let policy = SandboxPolicy::from_json(r#"{"version":1,
//!   "filesystem":{"read":["/"],"write":["/w","/tmp"]},
//!   "network":{"mode":"denied","unix_sockets":"deny"},
//!   "enforcement":{"missing_layer":"refuse","carve_outs":"report"}}"#).unwrap();
//! let argv: Vec<OsString> = vec!["touch".into(), "/etc/motd.new".into()];
//! let evidence = Evidence {
//!     policy: &policy,
//!     cwd: Path::new("/w"),
//!     argv: &argv,
//!     exit_code: Some(1),
//!     signal: None,
//!     records: &[],
//!     stdout: b"",
//!     stderr: b"touch: cannot touch '/etc/motd.new': Permission denied\n",
//!     kernel: None,
//!     kernel_light: None,
//!     audit: None,
//! };
//! let denials = find_denials(&evidence);
//! assert_eq!(denials.len(), 1);
//! assert_eq!(denials[0].operation, Operation::FileWrite);
//! assert_eq!(denials[0].target.as_deref(), Some("/etc/motd.new"));
//! assert_eq!(denials[0].allow_with, "--writable /etc");
//!
//! // The same message about a path the policy allows is an ordinary permission error.
//! let evidence = Evidence {
//!     stderr: b"touch: cannot touch '/w/locked': Permission denied\n",
//!     ..evidence
//! };
//! assert!(find_denials(&evidence).is_empty());
//! ```
//!
//! # What `allow_with` suggests
//!
//! * writes: `--writable DIR`, where DIR is the path itself when it is an existing directory
//!   and otherwise its parent directory. Creating, renaming and removing a file are rights on
//!   the directory that holds it, so granting the file alone would not be enough for the tools
//!   that write through a temporary file and rename it (`sed -i`, editors, package managers);
//! * reads and executes: `--readable PATH`, the path itself (Landlock can grant a single file);
//! * carve-outs: removing the path from `filesystem.read_only` / `filesystem.deny_read`;
//! * network: `--network enabled` (profile `network.mode = "enabled"`);
//! * unix sockets: `--allow-unix-sockets` (profile `network.unix_sockets = "allow"`);
//! * hardening system calls (`ptrace`, `unshare` of a user namespace, io_uring, ...): no
//!   profile allows them, and `allow_with` says so.

pub(crate) mod access;
mod files;
mod network;
mod result;
mod text;

use std::ffi::OsString;
use std::path::Path;

pub use result::classify_result;

use cordon_sandbox::policy::SandboxPolicy;
use cordon_sandbox::status::{Layer, StatusRecord};
use serde::{Deserialize, Serialize};

/// The kind of operation the sandbox refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Creating, modifying, renaming or removing a file or directory.
    FileWrite,
    /// Reading a file or listing a directory.
    FileRead,
    /// Executing a program.
    FileExecute,
    /// Creating a non-unix socket, resolving a name or connecting over the network.
    Network,
    /// Connecting to or binding a TCP port outside the profile's port lists.
    TcpPort,
    /// Reaching a named unix socket (docker, ssh-agent, D-Bus, ...).
    UnixSocket,
    /// A system call that the sandbox's hardening refuses whatever the profile says.
    Syscall,
}

/// One operation the sandbox refused.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Denial {
    /// What was refused.
    pub operation: Operation,
    /// The canonical path, `host:port` (or `host` when the port is unknown), socket path or
    /// system call name, when the evidence names it.
    pub target: Option<String>,
    /// The rule that refused it, e.g. "not under any writable root".
    pub rule: String,
    /// The smallest CLI flag or profile change that would allow it.
    pub allow_with: String,
    /// What the denial is known from. An approver should weigh a denial known only from the
    /// command's own output accordingly: the command could have printed it to ask for more.
    #[serde(default)]
    pub evidence: EvidenceKind,
    /// How many attempts on this target were refused (denials of one operation and target are
    /// merged). At least 1.
    #[serde(default = "one")]
    pub count: u32,
}

fn one() -> u32 {
    1
}

impl Denial {
    /// A denial seen once.
    pub fn new(
        operation: Operation,
        target: Option<String>,
        rule: impl Into<String>,
        allow_with: impl Into<String>,
        evidence: EvidenceKind,
    ) -> Denial {
        Denial {
            operation,
            target,
            rule: rule.into(),
            allow_with: allow_with.into(),
            evidence,
            count: 1,
        }
    }
}

/// Where a denial was learnt, weakest first.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// A message in the command's own output ("Permission denied" naming a path the policy
    /// forbids). The command wrote it, so it proves nothing by itself.
    #[default]
    Text,
    /// The helper's `exec_error` status record: the kernel refused the helper's own `execve`
    /// of the program, before any of the command's code ran.
    HelperRecord,
    /// cordon's network proxy refused the connection itself (`network.mode = "proxy"`): the
    /// command asked for that host and port, whatever it printed.
    Proxy,
    /// The seccomp observer saw the command attempt the call, with this target, and the
    /// policy refuses it (the kernel's answer, not the command's words).
    SeccompObserver,
    /// Landlock's own audit record of the refusal (`AUDIT_LANDLOCK_ACCESS`).
    LandlockAudit,
}

/// Everything known about one finished command.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The policy the command ran under.
    pub policy: &'a SandboxPolicy,
    /// Its working directory (absolute).
    pub cwd: &'a Path,
    /// The program and its arguments, as given to the helper.
    pub argv: &'a [OsString],
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did. A killed command is not a success, so its
    /// output is examined like any failure's.
    pub signal: Option<i32>,
    /// The helper's status records.
    pub records: &'a [StatusRecord],
    /// What it printed on stdout. Not used as evidence today: stdout is the command's data
    /// (a `cat` of a log full of "Permission denied"), and tools report errors on stderr. It is
    /// part of the evidence so that callers need not change when a rule learns to use it.
    pub stdout: &'a [u8],
    /// What it printed on stderr.
    pub stderr: &'a [u8],
    /// What a kernel source (the seccomp observer, Landlock's audit records) saw refused, when
    /// one ran: then it is the evidence, and the command's text is not consulted at all.
    pub kernel: Option<&'a [Denial]>,
    /// What the observer saw refused when it watched only the calls made rarely (its light
    /// scope): the evidence for network, unix-socket, port and system-call denials (the text is
    /// not consulted for those) and for the directory, node and symlink creations it saw
    /// refused; the other file denials still come from the text.
    pub kernel_light: Option<&'a [Denial]>,
    /// Landlock's audit records of this run, when they could be read. They see only what
    /// Landlock refused (not seccomp's refusals, not the mount layer's), so they confirm and
    /// add to the other evidence but never rule a denial out.
    pub audit: Option<&'a [Denial]>,
}

/// The layers that were in force: those of the `confined` record, or all of them when the
/// caller has no record (it then vouches that the helper ran with its full configuration).
fn layer_in_force(records: &[StatusRecord], layer: Layer) -> bool {
    records
        .iter()
        .find_map(|r| match r {
            StatusRecord::Confined(receipt) => Some(receipt.layers.contains(&layer)),
            _ => None,
        })
        .unwrap_or(true)
}

/// The operations the sandbox refused to the command described by `e`, deduplicated and in a
/// stable order. Empty when the command succeeded, when the sandbox itself failed, and whenever
/// the failure has another cause (a missing file, a mode bit, a network that is down).
pub fn find_denials(e: &Evidence) -> Vec<Denial> {
    if e.exit_code == Some(0) {
        return Vec::new();
    }
    if e.records
        .iter()
        .any(|r| matches!(r, StatusRecord::SetupError { .. }))
    {
        return Vec::new();
    }
    let access = access::Access::new(e.policy, e.cwd, e.records);
    if let Some(kernel) = e.kernel {
        // The kernel said what it refused; a message can add nothing but a forgery.
        let (weak, mut found): (Vec<Denial>, Vec<Denial>) =
            kernel.iter().cloned().partition(is_probe_like);
        if layer_in_force(e.records, Layer::LandlockFs) {
            found.extend(files::exec_record_denials(e.records, &access));
        }
        // As in the light scope: quiet probes (the JVM's socket, every name lookup's) are
        // no denial unless the text says so.
        if !weak.is_empty() {
            found.extend(confirmed_probes(&weak, e, &text::Context::new(e), &access));
        }
        return merge(with_audit(found, e.audit));
    }
    let mut ctx = text::Context::new(e);
    // A tool named for a call the kernel saw refused reports that refusal ("mount: /mnt:
    // permission denied."): its lines say nothing about the files they name.
    let refused_calls: Vec<String> = e
        .kernel_light
        .into_iter()
        .flatten()
        .filter(|d| d.operation == Operation::Syscall)
        .filter_map(|d| d.target.as_deref())
        .map(|call| format!("{call}: "))
        .collect();
    ctx.lines
        .retain(|l| !refused_calls.iter().any(|c| l.starts_with(c.as_str())));
    let mut found = Vec::new();
    match e.kernel_light {
        // The observer saw every refused call and every connection: what the text says about
        // the network or a system call can add nothing but a mistake or a forgery. First, so
        // that a directory creation it saw refused is the kernel's, not the text's, when the
        // text names it too.
        Some(kernel) => {
            let (weak, strong): (Vec<Denial>, Vec<Denial>) =
                kernel.iter().cloned().partition(is_probe_like);
            found.extend(strong);
            found.extend(confirmed_probes(&weak, e, &ctx, &access));
        }
        None if layer_in_force(e.records, Layer::Seccomp) => {
            found.extend(network::denials(e.policy, e.cwd, &ctx));
            found.extend(network::syscall_denials(e.policy, &ctx));
        }
        None => {}
    }
    if layer_in_force(e.records, Layer::LandlockFs) {
        found.extend(files::exec_record_denials(e.records, &access));
        // A message naming the directory of an entry whose creation the kernel saw refused
        // ("cannot create directory in /etc"), or a path below that entry (`mkdir -p`'s
        // deepest, ccache's "Failed to create directory ~/.cache/ccache/tmp" where
        // `~/.cache/ccache` was refused), is about that refusal: the kernel's is exact.
        let seen: Vec<&str> = found
            .iter()
            .filter(|d| d.operation == Operation::FileWrite)
            .filter_map(|d| d.target.as_deref())
            .collect();
        let said = files::message_denials(&ctx, &access);
        let said: Vec<Denial> = said
            .into_iter()
            .filter(|d| {
                !(d.operation == Operation::FileWrite
                    && d.target.as_deref().is_some_and(|t| {
                        seen.iter().any(|s| {
                            Path::new(s).parent() == Some(Path::new(t))
                                || (Path::new(t).starts_with(s) && t != *s)
                        })
                    }))
            })
            .collect();
        found.extend(said);
    }
    merge(with_audit(dedupe(found), e.audit))
}

/// The text's network denials of the kinds of `weak` (the probe-like kernel refusals): a
/// refusal without a target (a socket refused at creation, before any address) is what every
/// name lookup's quiet probe looks like (glibc's nscd socket, a DNS socket, the JVM's), so it
/// counts only where the command's text names the same kind of failure, and the text then
/// adds nothing the kernel did not see. Marked as the kernel's.
fn confirmed_probes(
    weak: &[Denial],
    e: &Evidence,
    ctx: &text::Context,
    access: &access::Access,
) -> Vec<Denial> {
    // A check for write access that the kernel saw answered no counts where the command's
    // output names the path it checked (pyenv's "/root/.pyenv/shims isn't writable"): the text
    // only confirms a check that happened, it cannot name a path that was not checked.
    let mut out: Vec<Denial> = weak
        .iter()
        .filter(|d| d.rule.starts_with(WRITE_CHECK_RULE))
        .filter(|d| {
            d.target
                .as_deref()
                .is_some_and(|t| ctx.lines.iter().any(|l| names_path(l, t)))
        })
        .cloned()
        .collect();
    // A refused connect to a unix socket that does not exist counts where the output says
    // that path was not permitted (tmux's "error connecting to /tmp/tmux-0/default (Operation
    // not permitted)": it would have started its server on ENOENT), and only where a server
    // the command started could have made the socket: in a writable root. A client that just
    // fails (psql's "connection to server on socket "/var/run/postgresql/..." failed") would
    // have failed anyway. The path may be printed as given, relative to the working directory.
    out.extend(
        weak.iter()
            .filter(|d| d.operation == Operation::UnixSocket)
            .filter(|d| {
                d.target.as_deref().is_some_and(|t| {
                    if access.write_verdict(Path::new(t)).is_some() {
                        return false;
                    }
                    let relative = Path::new(t)
                        .strip_prefix(e.cwd)
                        .ok()
                        .map(|r| r.display().to_string());
                    ctx.lines.iter().any(|l| {
                        text::says_eperm(l)
                            && (names_path(l, t)
                                || relative.as_deref().is_some_and(|r| names_relative(l, r)))
                    })
                })
            })
            .cloned(),
    );
    // A refused socket of another family counts where the output says a socket was not
    // permitted (`ip`'s "Cannot open netlink socket: Operation not permitted").
    // Where an inet socket was refused too, the line must be about the other one: openssl's
    // "socket: Operation not permitted" is about its TCP socket, not the netlink socket
    // glibc opened to list the interfaces.
    // The audit socket counts where the output speaks of audit (useradd's "Cannot open audit
    // interface - aborting.").
    let speaks_of_audit = ctx.lines.iter().any(|l| l.to_lowercase().contains("audit"));
    out.extend(
        weak.iter()
            .filter(|d| d.target.as_deref() == Some(AUDIT_SOCKET) && speaks_of_audit)
            .cloned(),
    );
    let inet_refused_too = weak.iter().any(|d| d.operation == Operation::Network);
    let socket_refused = ctx.lines.iter().any(|l| {
        let lower = l.to_lowercase();
        text::says_eperm(l)
            && lower.contains("socket")
            && (!inet_refused_too || lower.contains("netlink"))
    });
    // `ip` changing links, addresses or routes needs CAP_NET_ADMIN, which the sandbox drops:
    // the network would let its socket through and the change still fail.
    let changes_the_network = ctx.commands.iter().any(|c| {
        c.program() == "ip"
            && c.0.iter().skip(1).any(|w| {
                matches!(
                    w.as_str(),
                    "add" | "del" | "delete" | "set" | "change" | "replace" | "flush" | "append"
                )
            })
    });
    out.extend(
        weak.iter()
            .filter(|d| {
                d.operation == Operation::Syscall
                    && d.target.as_deref() == Some("socket")
                    && socket_refused
            })
            .cloned()
            .map(|mut d| {
                if changes_the_network {
                    d.allow_with = "none: no profile allows it (changing the host's links, addresses and routes needs CAP_NET_ADMIN, which the sandbox drops)".into();
                }
                d
            }),
    );
    if weak.is_empty() || !layer_in_force(e.records, Layer::Seccomp) {
        return out;
    }
    out.extend(
        network::denials(e.policy, e.cwd, ctx)
            .into_iter()
            // A refused connect to an absent socket is confirmed above, by its own path; the
            // text may name a unix socket only for one refused before any path was known.
            .filter(|d| {
                weak.iter().any(|w| {
                    w.operation == d.operation
                        && (d.operation != Operation::UnixSocket || w.target.is_none())
                })
            })
            .map(|mut d| {
                d.evidence = EvidenceKind::SeccompObserver;
                d
            }),
    );
    // An inet socket refused at creation, and the command saying nothing but that an operation
    // was not permitted ("nc: Operation not permitted", Python's "PermissionError: [Errno 1]
    // Operation not permitted" from a server's socket()): that refusal, though no address was
    // known yet. Target-less: a listener's port is not in the call.
    let bare_eperm = ctx.lines.iter().any(|l| says_only_eperm(l));
    if bare_eperm && !out.iter().any(|d| d.operation == Operation::Network) {
        out.extend(
            weak.iter()
                .filter(|w| w.operation == Operation::Network && w.target.is_none())
                .take(1)
                .cloned(),
        );
    }
    out
}

/// A line that says "Operation not permitted" and nothing else but who speaks: `nc:`,
/// `PermissionError: [Errno 1]`.
fn says_only_eperm(line: &str) -> bool {
    static BARE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^(?:[\w.-]+: |PermissionError: \[Errno 1\] )?Operation not permitted\.?$",
        )
        .expect("static regex")
    });
    BARE.is_match(line.trim())
}

/// Whether `line` names the relative path `relative` as a whole word: `./app.sock` or
/// `app.sock`, not the end of a longer path or name.
fn names_relative(line: &str, relative: &str) -> bool {
    if relative.is_empty() {
        return false;
    }
    line.match_indices(relative).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let clean_start = match before {
            None => true,
            Some('/') => line[..at].ends_with("./") && !line[..at].ends_with("../"),
            Some(c) => !c.is_alphanumeric() && !matches!(c, '.' | '_' | '-'),
        };
        clean_start && ends_a_path(&line[at + relative.len()..])
    })
}

/// Whether `line` names `path` as a whole path: not as the start of a longer one.
fn names_path(line: &str, path: &str) -> bool {
    line.match_indices(path)
        .any(|(at, _)| ends_a_path(&line[at + path.len()..]))
}

/// Whether what follows a path in a line, `after`, ends it there.
fn ends_a_path(after: &str) -> bool {
    let mut after = after.chars();
    match after.next() {
        Some('/' | '_' | '-') => false,
        // A sentence's full stop, not an extension.
        Some('.') => !after.next().is_some_and(char::is_alphanumeric),
        Some(c) => !c.is_alphanumeric(),
        None => true,
    }
}

/// How the rule of a denial seen only as a check for write access (`access(W_OK)`,
/// `test -w`) begins: the command asked, and did not try.
pub const WRITE_CHECK_RULE: &str = "checked for write access only: ";

/// The target of a refused audit socket (see `evidence::observer`).
pub(crate) const AUDIT_SOCKET: &str = "socket(AF_NETLINK, NETLINK_AUDIT)";

/// A refused network or unix-socket call with nothing to show for it: no target (refused at
/// `socket()`), or a unix socket path that does not exist (the connection would have failed
/// with `ENOENT` anyway). Quiet probes look like this, so alone it is no denial. So is a
/// check for write access: programs ask it of many places (a writable site-packages, a cache
/// directory) and take another when the answer is no.
fn is_probe_like(d: &Denial) -> bool {
    if d.rule.starts_with(WRITE_CHECK_RULE) {
        return true;
    }
    match (d.operation, d.target.as_deref()) {
        // A socket of another family refused at creation (a netlink socket: how Node, Go and
        // glibc list the network interfaces, every `npm` run) is a probe too, and so is the
        // audit socket, which PAM's modules try and do without.
        (Operation::Syscall, Some("socket")) => true,
        (Operation::Syscall, Some(AUDIT_SOCKET)) => true,
        (Operation::Network | Operation::UnixSocket, None) => true,
        // A refused bind was to make the socket: its path is absent after it, as it should be.
        (Operation::UnixSocket, Some(path)) if path.starts_with('/') => {
            !d.rule.contains(crate::evidence::observer::UNIX_BIND_MARK)
                && std::fs::symlink_metadata(path).is_err()
        }
        _ => false,
    }
}

/// `found`, with each denial that an audit record confirms marked as known from it, and the
/// audit's other denials added. A record of a creation names the directory; a denial of a
/// file in it is the same refusal, and keeps its exact target.
fn with_audit(mut found: Vec<Denial>, audit: Option<&[Denial]>) -> Vec<Denial> {
    for a in audit.into_iter().flatten() {
        let same = |d: &Denial| {
            d.operation == a.operation
                && match (&d.target, &a.target) {
                    (Some(t), Some(at)) => t == at || Path::new(t).parent() == Some(Path::new(at)),
                    (None, None) => true,
                    _ => false,
                }
        };
        match found.iter_mut().find(|d| same(d)) {
            Some(d) => d.evidence = EvidenceKind::LandlockAudit,
            None => found.push(a.clone()),
        }
    }
    found
}

/// Denials of the same operation and target as one, their counts added, in a stable order.
pub fn merge(found: Vec<Denial>) -> Vec<Denial> {
    let mut out: Vec<Denial> = Vec::new();
    for d in found {
        match out
            .iter_mut()
            .find(|o| o.operation == d.operation && o.target == d.target)
        {
            Some(o) => o.count = o.count.saturating_add(d.count),
            None => out.push(d),
        }
    }
    out.sort();
    out
}

/// Keeps the first denial of each (operation, target), and drops a target-less denial when a
/// denial of the same operation names its target: they describe the same refusal.
fn dedupe(found: Vec<Denial>) -> Vec<Denial> {
    let mut out: Vec<Denial> = Vec::new();
    for d in found {
        if out
            .iter()
            .any(|o| o.operation == d.operation && (o.target == d.target || d.target.is_none()))
        {
            continue;
        }
        if d.target.is_some() {
            out.retain(|o| !(o.operation == d.operation && o.target.is_none()));
        }
        out.push(d);
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests;
