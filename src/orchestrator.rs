//! The retrying orchestrator: run once with the requested policy; when, and only when, the
//! sandbox denied something, ask an [`Approver`] and run a second attempt with what it allows.
//!
//! ```no_run
//! use cordon::orchestrator::{widen, ApprovalRequest, Approver, Decision, Orchestrator};
//! # async fn demo(sandbox: cordon::exec::Sandbox, request: cordon::exec::ExecRequest) {
//! struct Widen;
//! impl Approver for Widen {
//!     async fn decide(&self, ask: &ApprovalRequest) -> Decision {
//!         Decision::RetryWith(widen(&ask.policy, &ask.denials))
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

use cordon_sandbox::policy::{NetworkMode, SandboxPolicy, UnixSockets};

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
        }
    }

    /// Runs `request`; on `Denied` asks `approver` (or the cache) and runs a second attempt if
    /// allowed.
    pub async fn run<A: Approver>(&self, request: ExecRequest, approver: &A) -> OrchestratedRun {
        let retry_template = request.clone();
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

    async fn attempt(&self, request: ExecRequest) -> ExecResult {
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

/// The smallest widening of `policy` that allows what `denials` name: the denied path's
/// directory as a writable or readable root, the network, or unix sockets. Denials without a
/// usable target (a refused system call) widen nothing.
pub fn widen(policy: &SandboxPolicy, denials: &[Denial]) -> SandboxPolicy {
    let mut wider = policy.clone();
    for denial in denials {
        let path = denial.target.as_deref().map(Path::new);
        match (denial.operation, path) {
            (Operation::FileWrite, Some(path)) if path.is_absolute() => {
                add_root(&mut wider.filesystem.write, root_for(path));
            }
            (Operation::FileRead | Operation::FileExecute, Some(path)) if path.is_absolute() => {
                add_root(&mut wider.filesystem.read, root_for(path));
            }
            (Operation::Network, _) => wider.network.mode = NetworkMode::Enabled,
            (Operation::UnixSocket, _) => wider.network.unix_sockets = UnixSockets::Allow,
            _ => {}
        }
    }
    wider
}

/// A directory stays itself; a file (or a path not yet created) is granted through its
/// nearest existing ancestor directory, so that creating it works.
fn root_for(path: &Path) -> PathBuf {
    if path.is_dir() {
        return path.to_path_buf();
    }
    let mut dir = path.parent().unwrap_or(Path::new("/"));
    while !dir.is_dir() {
        dir = dir.parent().unwrap_or(Path::new("/"));
    }
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

fn add_root(roots: &mut Vec<PathBuf>, root: PathBuf) {
    if !roots.iter().any(|r| root.starts_with(r)) {
        roots.push(root);
    }
}
