//! The retrying orchestrator: run once with the requested policy; when, and only when, the
//! sandbox denied something, ask an [`Approver`] and run a second attempt with what it allows.
//!
//! ```no_run
//! use cordon::orchestrator::{widen, ApprovalRequest, Approver, Decision, Orchestrator};
//! # async fn demo(sandbox: cordon::exec::Sandbox, request: cordon::exec::ExecRequest) {
//! struct Widen;
//! impl Approver for Widen {
//!     async fn decide(&self, ask: &ApprovalRequest) -> Decision {
//!         // Each denial says what it is known from (`ask.denials[i].evidence`): one known
//!         // only from the command's output could have been printed to ask for more.
//!         match widen(&ask.policy, &ask.denials) {
//!             Ok(wider) => Decision::RetryWith(wider),
//!             // Nothing the denials name can be granted exactly as shown.
//!             Err(_) => Decision::Deny,
//!         }
//!     }
//! }
//! let orchestrator = Orchestrator::new(sandbox);
//! let run = orchestrator.run(request, &Widen).await;
//! let last = run.second.as_ref().unwrap_or(&run.first);
//! # }
//! ```
//!
//! Side effects of the first attempt are not undone: whatever it wrote, deleted or sent before
//! it was denied stays written, deleted or sent when the second attempt runs. Approvals are
//! cached per orchestrator (a session), keyed by the set of denials approved, so the same
//! denials are not asked about twice. Timeouts, cancellations, setup errors, exec errors,
//! rejections and failures without a denial are never retried.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cordon_sandbox::policy::{split_host_pattern, NetworkMode, SandboxPolicy, UnixSockets};

use crate::classify::{classify_result, Denial, Operation};
use crate::exec::{ExecRequest, ExecResult, Outcome, Sandbox};

/// What the approver is asked about.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// The command, as the caller gave it (never a snapshot wrapper).
    pub argv: Vec<std::ffi::OsString>,
    /// The policy the first attempt ran under.
    pub policy: SandboxPolicy,
    /// What the sandbox denied.
    pub denials: Vec<Denial>,
}

/// The approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
// A decision is made once per denied run and moved, never stored in bulk: boxing the policy
// would only add an allocation and change the variant's type for every caller.
#[allow(clippy::large_enum_variant)]
pub enum Decision {
    /// Do not retry.
    Deny,
    /// Retry under this (wider) policy.
    RetryWith(SandboxPolicy),
    /// Retry with no sandbox at all.
    RetryUnsandboxed,
}

/// Decides whether a denied command may run again with more access (a person at a prompt, a
/// policy engine, a test double).
pub trait Approver {
    /// Answers one request.
    fn decide(&self, request: &ApprovalRequest) -> impl Future<Output = Decision> + Send;
}

/// Both attempts of one orchestrated run.
#[derive(Debug, Clone)]
pub struct OrchestratedRun {
    /// The first attempt, classified.
    pub first: ExecResult<Denial>,
    /// The decision, when one was needed (first attempt denied).
    pub decision: Option<Decision>,
    /// True when the decision came from the session's cache instead of the approver.
    pub decision_cached: bool,
    /// The second attempt, when the decision allowed one.
    pub second: Option<ExecResult<Denial>>,
}

impl OrchestratedRun {
    /// The attempt whose result counts: the second when there was one.
    pub fn last(&self) -> &ExecResult<Denial> {
        self.second.as_ref().unwrap_or(&self.first)
    }
}

/// Runs requests with approval and retry; one per agent session (it holds the approval cache).
#[derive(Debug)]
pub struct Orchestrator {
    sandbox: Sandbox,
    unsandboxed: Sandbox,
    approvals: Mutex<HashMap<ApprovalKey, Decision>>,
    /// Where the proxy routes unlisted hosts while a command runs (`network.mode = "proxy"`),
    /// for every attempt whose request has no approver of its own.
    network_approvals: Option<crate::network::NetworkApprovals>,
}

/// What an approval covers: the exact set of denials (operation, target, rule).
type ApprovalKey = BTreeSet<(Operation, Option<String>, String)>;

impl Orchestrator {
    /// An orchestrator running confined attempts through `sandbox`.
    pub fn new(sandbox: Sandbox) -> Orchestrator {
        Orchestrator {
            sandbox,
            unsandboxed: Sandbox::without_helper(),
            approvals: Mutex::new(HashMap::new()),
            network_approvals: None,
        }
    }

    /// Routes hosts that no `network.allow` entry covers to `approvals` while the command runs,
    /// instead of refusing them and asking after the run (deferred network approvals; see
    /// [`crate::network::NetworkApprovals`]). The answers are the session's: this orchestrator's.
    pub fn with_network_approvals(
        mut self,
        approvals: crate::network::NetworkApprovals,
    ) -> Orchestrator {
        self.network_approvals = Some(approvals);
        self
    }

    /// Runs `request`; on `Denied` asks `approver` (or the cache) and runs a second attempt if
    /// allowed.
    pub async fn run<A: Approver>(&self, request: ExecRequest, approver: &A) -> OrchestratedRun {
        self.run_adjusting(request, approver, |_, _| {}).await
    }

    /// [`Orchestrator::run`], with `adjust` given the first attempt and the retry request
    /// before the retry runs: a caller whose first attempt had effects the retry must not
    /// repeat (the patch runtime skips the files already changed) changes the request there.
    /// The approver still decides on the first attempt's denials alone.
    pub async fn run_adjusting<A: Approver>(
        &self,
        request: ExecRequest,
        approver: &A,
        adjust: impl FnOnce(&ExecResult<Denial>, &mut ExecRequest),
    ) -> OrchestratedRun {
        let mut retry_template = request.clone();
        let first = classify_result(self.attempt(request).await);
        let (Outcome::Denied { denials, .. }, Some(policy)) = (&first.outcome, &first.policy)
        else {
            return OrchestratedRun {
                first,
                decision: None,
                decision_cached: false,
                second: None,
            };
        };
        let key: ApprovalKey = denials
            .iter()
            .map(|d| (d.operation, d.target.clone(), d.rule.clone()))
            .collect();
        let cached = self.cached(&key);
        let decision_cached = cached.is_some();
        let decision = match cached {
            Some(decision) => decision,
            None => {
                let ask = ApprovalRequest {
                    argv: first.argv.clone(),
                    policy: policy.clone(),
                    denials: denials.clone(),
                };
                let decision = approver.decide(&ask).await;
                self.remember(key, decision.clone());
                decision
            }
        };
        if decision != Decision::Deny {
            adjust(&first, &mut retry_template);
        }
        let second = match &decision {
            Decision::Deny => None,
            Decision::RetryWith(wider) => {
                let mut retry = retry_template;
                retry.policy = Some(wider.clone());
                Some(classify_result(self.attempt(retry).await))
            }
            Decision::RetryUnsandboxed => {
                let mut retry = retry_template;
                retry.policy = None;
                Some(classify_result(self.attempt(retry).await))
            }
        };
        OrchestratedRun {
            first,
            decision: Some(decision),
            decision_cached,
            second,
        }
    }

    async fn attempt(&self, mut request: ExecRequest) -> ExecResult {
        if request.network.approvals.is_none() {
            request.network.approvals = self.network_approvals.clone();
        }
        match request.policy {
            Some(_) => self.sandbox.exec(request).await,
            None => self.unsandboxed.exec(request).await,
        }
    }

    fn cached(&self, key: &ApprovalKey) -> Option<Decision> {
        // A poisoned lock only means another task panicked mid-insert; the map is still valid.
        let approvals = self.approvals.lock().unwrap_or_else(|e| e.into_inner());
        approvals.get(key).cloned()
    }

    fn remember(&self, key: ApprovalKey, decision: Decision) {
        let mut approvals = self.approvals.lock().unwrap_or_else(|e| e.into_inner());
        approvals.insert(key, decision);
    }
}

/// Why [`widen`] grants nothing: one of the denials cannot be allowed by granting exactly what
/// its `allow_with` shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WidenError {
    /// The path shown does not exist. Landlock grants existing inodes only, and granting an
    /// existing ancestor instead would be more than was shown.
    #[error("{allow_with}: {path:?} does not exist, and granting an existing parent instead would be more than was approved")]
    Missing {
        /// The change shown.
        allow_with: String,
        /// The path in it.
        path: PathBuf,
    },
    /// The path shown is `/`, which would grant the whole file system.
    #[error("{allow_with}: widen never grants \"/\"")]
    FileSystemRoot {
        /// The change shown.
        allow_with: String,
    },
    /// The path shown is not canonical (relative, or through a symlink), so granting it would
    /// grant something else: where it leads.
    #[error("{allow_with}: {path:?} is not the canonical path of what it names ({resolved:?}); widen grants only exactly what was shown")]
    NotExact {
        /// The change shown.
        allow_with: String,
        /// The path in it.
        path: PathBuf,
        /// Where it leads, when it resolves.
        resolved: Option<PathBuf>,
    },
    /// The denial's fix is not a grant widen makes (a carve-out to remove, a system call no
    /// profile allows).
    #[error("{allow_with}: not a grant widen can make")]
    NotGrantable {
        /// The change shown.
        allow_with: String,
    },
}

/// The widening of `policy` that `denials` show in their `allow_with`, and nothing more: the
/// exact path of `--writable PATH` / `--readable PATH` as a root, the network, one exact host
/// of `--allow-domain HOST[:PORT]` (proxy mode), or unix sockets.
/// All or nothing: when any denial cannot be granted exactly as shown, the error says which and
/// why, and no retry should be made with something else. An existing ancestor of a missing
/// path is never granted in its place, and `/` never at all, whatever the denial says (denials
/// known from the command's text are as easy to fake as the text).
pub fn widen(policy: &SandboxPolicy, denials: &[Denial]) -> Result<SandboxPolicy, WidenError> {
    let mut wider = policy.clone();
    for denial in denials {
        let shown = denial.allow_with.as_str();
        match denial.operation {
            Operation::FileWrite => match shown.strip_prefix("--writable ") {
                Some(path) => add_root(&mut wider.filesystem.write, exact_root(shown, path)?),
                None => return Err(not_grantable(shown)),
            },
            Operation::FileRead | Operation::FileExecute => {
                match shown.strip_prefix("--readable ") {
                    Some(path) => add_root(&mut wider.filesystem.read, exact_root(shown, path)?),
                    None => return Err(not_grantable(shown)),
                }
            }
            Operation::Network if shown == "--network enabled" => {
                wider.network.mode = NetworkMode::Enabled;
            }
            // The proxy's own denials: one exact host (with the port when one is shown) in
            // `network.allow`, never a wildcard, and only where the proxy is what runs.
            Operation::Network if shown.starts_with("--allow-domain ") => {
                let entry = &shown["--allow-domain ".len()..];
                let exact = matches!(split_host_pattern(entry), Ok((_, false, _)));
                if policy.network.mode != NetworkMode::Proxy || !exact {
                    return Err(not_grantable(shown));
                }
                if !wider.network.allow.iter().any(|e| e == entry) {
                    wider.network.allow.push(entry.to_owned());
                }
            }
            Operation::UnixSocket if shown == "--allow-unix-sockets" => {
                wider.network.unix_sockets = UnixSockets::Allow;
                wider.network.unix_socket_allow.clear();
            }
            // Exactly the socket shown, added to the list (never all of them); anything else
            // shown for a unix socket is not a grant this knows.
            Operation::UnixSocket => {
                let path = shown
                    .strip_prefix("--allow-unix-socket ")
                    .filter(|p| Some(*p) == denial.target.as_deref())
                    .ok_or_else(|| not_grantable(shown))?;
                let canonical = std::fs::canonicalize(path).map_err(|_| not_grantable(shown))?;
                if wider.network.unix_socket_allow.is_empty()
                    || wider.network.unix_sockets != UnixSockets::Deny
                {
                    return Err(not_grantable(shown));
                }
                if !wider.network.unix_socket_allow.contains(&canonical) {
                    wider.network.unix_socket_allow.push(canonical);
                }
            }
            Operation::TcpPort => {
                let (port, list) = port_grant(shown).ok_or_else(|| not_grantable(shown))?;
                let list = match list {
                    "tcp_connect" => wider.network.tcp_connect.as_mut(),
                    _ => wider.network.tcp_bind.as_mut(),
                };
                match list {
                    Some(ports) if !ports.contains(&port) => ports.push(port),
                    Some(_) => {}
                    // No list means every port: nothing to add.
                    None => return Err(not_grantable(shown)),
                }
            }
            Operation::Network | Operation::Syscall => return Err(not_grantable(shown)),
        }
    }
    Ok(wider)
}

/// `add PORT to network.tcp_connect` (or `tcp_bind`): the port and the list's name.
fn port_grant(allow_with: &str) -> Option<(u16, &str)> {
    let rest = allow_with.strip_prefix("add ")?;
    let (port, list) = rest.split_once(" to network.")?;
    let list = match list {
        "tcp_connect" | "tcp_bind" => list,
        _ => return None,
    };
    Some((port.parse().ok()?, list))
}

fn not_grantable(allow_with: &str) -> WidenError {
    WidenError::NotGrantable {
        allow_with: allow_with.to_owned(),
    }
}

/// `path` itself, when it exists, is not `/` and is already canonical.
fn exact_root(allow_with: &str, path: &str) -> Result<PathBuf, WidenError> {
    let path = PathBuf::from(path);
    if path == Path::new("/") {
        return Err(WidenError::FileSystemRoot {
            allow_with: allow_with.to_owned(),
        });
    }
    let not_exact = |resolved| WidenError::NotExact {
        allow_with: allow_with.to_owned(),
        path: path.clone(),
        resolved,
    };
    if !path.is_absolute() {
        return Err(not_exact(None));
    }
    match std::fs::canonicalize(&path) {
        Ok(resolved) if resolved == path => Ok(path),
        Ok(resolved) => Err(not_exact(Some(resolved))),
        // A dangling link exists but leads nowhere grantable; only a real absence is "missing".
        Err(_) if std::fs::symlink_metadata(&path).is_ok() => Err(not_exact(None)),
        Err(_) => Err(WidenError::Missing {
            allow_with: allow_with.to_owned(),
            path,
        }),
    }
}

fn add_root(roots: &mut Vec<PathBuf>, root: PathBuf) {
    if !roots.iter().any(|r| root.starts_with(r)) {
        roots.push(root);
    }
}
