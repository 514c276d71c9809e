//! What `cordon serve` (JSON-RPC) and `cordon mcp` (MCP) offer, independent of the wire: one
//! [`Session`] (cwd that follows `cd`, the login shell's environment replayed from its
//! snapshot) and one [`ProcessManager`] (long-lived processes, stdin, PTYs), with the
//! orchestrator's approval rule on top: a command that exits denied within its first call is
//! shown to an [`Approver`] and, when approved, run once more with exactly what the denials
//! name ([`widen`]); the answer is remembered for the same denials.
//!
//! Every command runs through the one supervisor; this module only translates requests and
//! results and keeps what a process needs until it exits (its cwd report, the request to
//! retry).
//!
//! Beside sandboxed commands the service runs the person's own commands ([`ExecService::user_shell`],
//! unconfined on purpose, see [`crate::user_shell`]), patches ([`ExecService::apply_patch`], the
//! applier confined by the session's policy, its denials through the same approval rule), and,
//! with `network.mode = "proxy"`, routes hosts outside `network.allow` to the client while the
//! command runs ([`ExecService::route_network_approvals`]), once per host and port per session.

pub mod jsonrpc;
pub mod mcp;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use cordon_sandbox::SandboxPolicy;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::classify::{classify_result, Denial, Operation};
use crate::exec::limits::Limits;
use crate::exec::process_manager::{
    ManagerError, ProcessId, ProcessInfo, ProcessIo, ProcessManager, ProcessStatus, Response,
};
use crate::exec::{EnvPolicy, ExecRequest, ExecResult, Outcome, Sandbox, StdinSource, WindowSize};
use crate::network::NetworkApprovals;
use crate::orchestrator::{widen, ApprovalRequest, Approver, Decision, Orchestrator};
use crate::patch::{ApplyPatchParams, PatchError, PatchReport, PatchRuntime};
use crate::session::{CwdReport, Session, SessionRequest};
use crate::user_shell::{history_record, UserShell, UserShellEnd, UserShellEvent, UserShellParams};

/// What the history record of a user-shell command keeps of its output (head and tail).
pub const USER_SHELL_HISTORY_BUDGET: usize = 10 * 1024;

/// The longest a single call may wait for output.
pub const MAX_YIELD: Duration = Duration::from_secs(300);
/// The yield time of `exec` when the request gives none.
pub const DEFAULT_EXEC_YIELD: Duration = Duration::from_secs(10);
/// The yield time of `write_stdin` when the request gives none.
pub const DEFAULT_WRITE_YIELD: Duration = Duration::from_millis(250);

/// `exec`: start a command.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecParams {
    /// A shell command line, run as `$SHELL -lc CMD` (the session's snapshot makes that
    /// fast and replays the login environment). Exactly one of `cmd` and `argv`.
    #[serde(default)]
    pub cmd: Option<String>,
    /// A program and its arguments, run as given.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Working directory; by default the session's (which follows `cd` in `cmd`).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How long to wait for the command before returning with it still running.
    #[serde(default)]
    pub yield_time_ms: Option<u64>,
    /// Kill the command after this long (default: the server's).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Run on a pseudo-terminal (raw terminal output; stdin writable).
    #[serde(default)]
    pub tty: bool,
    /// Keep stdin open as a pipe for `write_stdin` (implied by `tty`).
    #[serde(default)]
    pub stdin: bool,
    /// Terminal size with `tty`.
    #[serde(default)]
    pub rows: Option<u16>,
    /// Terminal size with `tty`.
    #[serde(default)]
    pub cols: Option<u16>,
    /// Resource limits, on top of the server's.
    #[serde(default)]
    pub limits: Option<Limits>,
}

/// `write_stdin`: write to a running process and collect more output.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    /// The process, from `exec`.
    pub process_id: ProcessId,
    /// Bytes to write (UTF-8 text); empty or absent only polls.
    #[serde(default)]
    pub chars: String,
    /// How long to wait for output.
    #[serde(default)]
    pub yield_time_ms: Option<u64>,
    /// Close stdin after writing (end of file on a pipe).
    #[serde(default)]
    pub close_stdin: bool,
    /// New terminal size (with `tty`), applied before writing.
    #[serde(default)]
    pub rows: Option<u16>,
    /// New terminal size (with `tty`).
    #[serde(default)]
    pub cols: Option<u16>,
}

/// `kill`: end a running process.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillParams {
    /// The process, from `exec`.
    pub process_id: ProcessId,
}

/// `list`: no parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {}

/// What every `exec`, `write_stdin` and `kill` returns.
#[derive(Debug, Clone, Serialize)]
pub struct ExecReply {
    /// The process id while it runs; `null` once it has exited.
    pub process_id: Option<ProcessId>,
    /// True while the command is still running (call `write_stdin` with `process_id`).
    pub running: bool,
    /// Output since the previous call (stdout and stderr interleaved; with a tty, the raw
    /// terminal stream), head and tail kept.
    pub output: String,
    /// Bytes of output dropped from the middle of `output`.
    pub output_dropped_bytes: u64,
    /// How the command ended, once it has (`success`, `failed`, `denied` with the denials and
    /// the flag that would allow each, `timed_out`, `limit_exceeded`, ...).
    pub outcome: Option<Outcome<Denial>>,
    /// The exit code a shell would report, once it has ended.
    pub exit_code: Option<i32>,
    /// The session's working directory after this call.
    pub cwd: PathBuf,
    /// Restrictions the sandbox could not enforce on this machine (from the receipt).
    pub not_enforced: Vec<String>,
    /// Which mechanism enforced each resource limit.
    pub limits: Vec<crate::exec::limits::LimitReceipt>,
    /// When the first attempt was denied: what was decided, and the first attempt's end.
    pub approval: Option<ApprovalReport>,
    /// Processes killed to make room for this one.
    pub evicted: Vec<ProcessInfo>,
    /// Milliseconds spent in this call.
    pub wall_time_ms: u64,
}

/// What happened to a denied first attempt.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalReport {
    /// `approved` (a second attempt ran, its result is the reply's), `denied`, or
    /// `not_grantable` (approved, but the denials name nothing that can be granted exactly).
    pub decision: &'static str,
    /// True when the decision came from an earlier answer for the same denials.
    pub cached: bool,
    /// Why nothing was granted, for `not_grantable`.
    pub reason: Option<String>,
    /// The first attempt's output.
    pub first_output: String,
    /// The first attempt's outcome.
    pub first_outcome: Outcome<Denial>,
}

/// Why a call failed (JSON-RPC error data; MCP tool error text).
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Bad parameters.
    #[error("{0}")]
    InvalidParams(String),
    /// The process manager refused.
    #[error(transparent)]
    Manager(#[from] ManagerError),
    /// The request names a user-shell command that is not running.
    #[error("no running user_shell command has call_id {0:?}")]
    UnknownCall(String),
    /// This server cannot do what was asked (no patch applier was found).
    #[error("{0}")]
    Unavailable(String),
}

/// `user_shell_cancel`: stop a running user-shell command.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    /// The `call_id` the `user_shell` request gave.
    pub call_id: String,
}

/// How a user-shell command ended, and the record of it for the model's history.
#[derive(Debug, Clone, Serialize)]
pub struct UserShellReply {
    /// The end, as the last event carried it.
    #[serde(flatten)]
    pub end: UserShellEnd,
    /// The `<user_shell_command>` record: the command as typed, exit code, duration and the
    /// output truncated head and tail to [`USER_SHELL_HISTORY_BUDGET`].
    pub history: String,
}

/// What happened to a patch whose first attempt was denied.
#[derive(Debug, Clone, Serialize)]
pub struct PatchApproval {
    /// `approved` (the rest of the patch ran again with exactly the grant), `denied`, or
    /// `not_grantable`.
    pub decision: &'static str,
    /// True when the decision came from an earlier answer for the same denials.
    pub cached: bool,
    /// Why nothing was granted.
    pub reason: Option<String>,
}

/// What `apply_patch` returns.
#[derive(Debug, Clone)]
pub struct PatchReply {
    /// Every change over both attempts, the failure, the last attempt's run.
    pub report: PatchReport,
    /// When the first attempt was denied: what was decided.
    pub approval: Option<PatchApproval>,
}

impl PatchReply {
    /// The wire form: [`PatchReport::to_json`] with `approval` and `not_enforced` added.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = self.report.to_json();
        if let Some(object) = value.as_object_mut() {
            object.insert(
                "approval".into(),
                serde_json::to_value(&self.approval).unwrap_or_default(),
            );
            object.insert(
                "not_enforced".into(),
                serde_json::json!(not_enforced(self.report.run.last())),
            );
        }
        value
    }
}

/// What an answer covers: the exact set of denials (operation, target, rule).
type ApprovalKey = BTreeSet<(Operation, Option<String>, String)>;

/// The per-process state the service keeps until the process has exited.
struct Pending {
    report: CwdReport,
}

/// One agent's session behind a server.
pub struct ExecService {
    session: tokio::sync::Mutex<Session>,
    manager: ProcessManager,
    shell: PathBuf,
    limits: Limits,
    pending: Mutex<HashMap<ProcessId, Pending>>,
    /// Whether each set of denials was approved.
    approvals: Mutex<HashMap<ApprovalKey, bool>>,
    /// Runs the person's own commands, when the server offers them (off unless set: full
    /// access is for a client that keeps the person's commands apart from the model's);
    /// `user_shell_snapshots` says whether the session's shell snapshot wraps them.
    user_shell: Option<UserShell>,
    user_shell_snapshots: bool,
    /// The user-shell commands running now, by call id, to cancel them.
    user_shell_calls: Mutex<HashMap<String, CancellationToken>>,
    /// The patch applier and the runtime it runs through (one-shot, not the process manager:
    /// a patch never waits for input).
    patches: Option<(PatchRuntime, Sandbox)>,
    /// Where the proxy sends unlisted hosts while a command runs: set once per session by the
    /// server that has a client to ask, so its answers are the session's.
    network_approvals: std::sync::OnceLock<NetworkApprovals>,
}

impl std::fmt::Debug for ExecService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecService").finish_non_exhaustive()
    }
}

/// The approver's answer, as the wire carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// Run again with exactly what the denials name.
    Approve,
    /// Do not run again.
    Deny,
}

/// Whoever answers approval requests: the JSON-RPC client, or (MCP) a fixed answer.
pub trait ApprovalClient {
    /// Asks about one denied run; any failure to get an answer must come back as `Deny`.
    fn ask(
        &self,
        ask: &ApprovalRequest,
    ) -> impl std::future::Future<Output = ApprovalAnswer> + Send;
}

/// Denies every approval request: the denial goes back to the caller in the reply.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

impl ApprovalClient for DenyAll {
    async fn ask(&self, _: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Deny
    }
}

/// Turns a wire answer into the orchestrator's decision: `Approve` grants exactly what
/// [`widen`] derives from the denials, nothing else.
fn decide(answer: ApprovalAnswer, ask: &ApprovalRequest) -> Result<Decision, String> {
    match answer {
        ApprovalAnswer::Deny => Ok(Decision::Deny),
        ApprovalAnswer::Approve => widen(&ask.policy, &ask.denials)
            .map(Decision::RetryWith)
            .map_err(|e| e.to_string()),
    }
}

/// What the approval rule concluded for one denied run.
enum Verdict {
    /// Run again under exactly this policy.
    Grant(Box<SandboxPolicy>),
    /// Do not run again; the reason when it is not simply the client's answer.
    Deny(Option<String>),
    /// Approved, but nothing can be granted exactly as shown.
    NotGrantable(String),
}

/// The approval rule as the orchestrator's [`Approver`], for the patch runtime: the same
/// client, the same remembered answers and the same checks as `exec`.
struct ServiceApprover<'a, A> {
    service: &'a ExecService,
    client: &'a A,
    reached: Mutex<Option<PatchApproval>>,
}

impl<A: ApprovalClient + Sync> Approver for ServiceApprover<'_, A> {
    async fn decide(&self, ask: &ApprovalRequest) -> Decision {
        let (verdict, cached) = self.service.judge(ask, self.client).await;
        let (decision, reason, answer) = match verdict {
            Verdict::Grant(wider) => ("approved", None, Decision::RetryWith(*wider)),
            Verdict::Deny(reason) => ("denied", reason, Decision::Deny),
            Verdict::NotGrantable(reason) => ("not_grantable", Some(reason), Decision::Deny),
        };
        *self.reached.lock().unwrap_or_else(|e| e.into_inner()) = Some(PatchApproval {
            decision,
            cached,
            reason,
        });
        answer
    }
}

/// `host:port` as the proxy writes a denial's target (an IPv6 address in brackets).
fn proxy_target(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn yield_of(ms: Option<u64>, default: Duration) -> Duration {
    ms.map(Duration::from_millis)
        .unwrap_or(default)
        .min(MAX_YIELD)
}

impl ExecService {
    /// A service over `session`, running processes with `manager`; `shell` runs `cmd`
    /// strings; `limits` apply to every command (a request may lower them).
    pub fn new(
        session: Session,
        manager: ProcessManager,
        shell: PathBuf,
        limits: Limits,
    ) -> ExecService {
        ExecService {
            session: tokio::sync::Mutex::new(session),
            manager,
            shell,
            limits,
            pending: Mutex::new(HashMap::new()),
            approvals: Mutex::new(HashMap::new()),
            user_shell: None,
            user_shell_snapshots: false,
            user_shell_calls: Mutex::new(HashMap::new()),
            patches: None,
            network_approvals: std::sync::OnceLock::new(),
        }
    }

    /// Offers `user_shell` requests, run with `runner` (its runtime's timeout and output cap),
    /// wrapped in the session's snapshot of the person's shell when `snapshots` is true.
    /// Without this call they are refused: they run with full access.
    pub fn with_user_shell(mut self, runner: UserShell, snapshots: bool) -> ExecService {
        self.user_shell = Some(runner);
        self.user_shell_snapshots = snapshots;
        self
    }

    /// Applies `apply_patch` requests with `runtime`'s applier, run through `sandbox` (the
    /// same runtime the session's commands use).
    pub fn with_patches(mut self, runtime: PatchRuntime, sandbox: Sandbox) -> ExecService {
        self.patches = Some((runtime, sandbox));
        self
    }

    /// Sends hosts that no `network.allow` entry covers to `make()`'s approver while commands
    /// run (proxy mode). The first call wins: one approver, and one set of answers, for the
    /// whole session.
    pub fn route_network_approvals(&self, make: impl FnOnce() -> NetworkApprovals) {
        let _ = self.network_approvals.get_or_init(make);
    }

    /// The network answers given so far in this session (host, port, granted).
    pub fn network_answers(&self) -> Vec<(String, u16, bool)> {
        self.network_approvals
            .get()
            .map(NetworkApprovals::answered)
            .unwrap_or_default()
    }

    /// The session's working directory now.
    pub async fn cwd(&self) -> PathBuf {
        self.session.lock().await.cwd().to_path_buf()
    }

    fn argv_of(&self, params: &ExecParams) -> Result<Vec<OsString>, ServiceError> {
        match (&params.cmd, &params.argv) {
            (Some(cmd), None) => Ok(vec![
                self.shell.clone().into_os_string(),
                "-lc".into(),
                cmd.into(),
            ]),
            (None, Some(argv)) if !argv.is_empty() => Ok(argv.iter().map(OsString::from).collect()),
            (None, Some(_)) => Err(ServiceError::InvalidParams("argv is empty".into())),
            (Some(_), Some(_)) => Err(ServiceError::InvalidParams(
                "give either cmd or argv, not both".into(),
            )),
            (None, None) => Err(ServiceError::InvalidParams("give cmd or argv".into())),
        }
    }

    /// `exec`. `approver` is asked when the command exits denied within this call.
    pub async fn exec<A: ApprovalClient>(
        &self,
        params: ExecParams,
        approver: &A,
    ) -> Result<ExecReply, ServiceError> {
        let argv = self.argv_of(&params)?;
        let limits = self
            .limits
            .tightened_by(params.limits.as_ref())
            .map_err(|e| ServiceError::InvalidParams(e.to_string()))?;
        let io = if params.tty {
            let default = WindowSize::default();
            ProcessIo::Pty(WindowSize {
                rows: params.rows.unwrap_or(default.rows),
                cols: params.cols.unwrap_or(default.cols),
            })
        } else if params.stdin {
            ProcessIo::Pipe
        } else {
            ProcessIo::Request
        };
        let mut env = EnvPolicy::default();
        for (k, v) in &params.env {
            env.set.insert(k.into(), v.into());
        }
        let mut request = SessionRequest::new(argv).env(env);
        // A relative directory is taken from the session's, as a shell would.
        request.cwd = match &params.cwd {
            Some(dir) if dir.is_relative() => Some(self.cwd().await.join(dir)),
            other => other.clone(),
        };
        request.timeout = params.timeout_ms.map(Duration::from_millis);
        request.stdin = StdinSource::Null;
        let yield_time = yield_of(params.yield_time_ms, DEFAULT_EXEC_YIELD);
        let prepared = self.session.lock().await.prepare(request).await;
        let mut template = prepared.request;
        template.limits = limits;
        if template.network.approvals.is_none() {
            template.network.approvals = self.network_approvals.get().cloned();
        }
        let first = self.manager.start(template.clone(), io, yield_time).await?;
        let first = match self.settle(first, prepared.report).await {
            Settled::Running(reply) => return Ok(reply),
            Settled::Exited(reply, result, report) => (reply, result, report),
        };
        let (mut reply, result, report) = first;
        let (Outcome::Denied { denials, .. }, Some(policy)) = (&result.outcome, &result.policy)
        else {
            self.finish(report).await;
            reply.cwd = self.cwd().await;
            return Ok(reply);
        };
        let ask = ApprovalRequest {
            argv: result.argv.clone(),
            policy: policy.clone(),
            denials: denials.clone(),
        };
        let (verdict, cached) = self.judge(&ask, approver).await;
        let mut approval = ApprovalReport {
            decision: "denied",
            cached,
            reason: None,
            first_output: reply.output.clone(),
            first_outcome: result.outcome.clone(),
        };
        let wider = match verdict {
            Verdict::Grant(wider) => *wider,
            Verdict::Deny(reason) => {
                approval.reason = reason;
                self.finish(report).await;
                reply.approval = Some(approval);
                reply.cwd = self.cwd().await;
                return Ok(reply);
            }
            Verdict::NotGrantable(reason) => {
                approval.decision = "not_grantable";
                approval.reason = Some(reason);
                self.finish(report).await;
                reply.approval = Some(approval);
                reply.cwd = self.cwd().await;
                return Ok(reply);
            }
        };
        approval.decision = "approved";
        let mut retry: ExecRequest = template;
        retry.policy = Some(wider);
        retry.cancel = tokio_util::sync::CancellationToken::new();
        let second = self.manager.start(retry, io, yield_time).await?;
        let mut reply = match self.settle(second, report).await {
            Settled::Running(reply) => reply,
            Settled::Exited(reply, _, report) => {
                self.finish(report).await;
                ExecReply {
                    cwd: self.cwd().await,
                    ..reply
                }
            }
        };
        reply.approval = Some(approval);
        Ok(reply)
    }

    /// The approval rule for one denied run: the answer remembered for the same denials, else
    /// `approver`'s; an approval grants exactly what [`widen`] derives and never a policy
    /// whose writable roots would cover the session's own directory. The flag is true when no
    /// one was asked now.
    async fn judge<A: ApprovalClient>(
        &self,
        ask: &ApprovalRequest,
        approver: &A,
    ) -> (Verdict, bool) {
        // Hosts the client already refused while the command ran: asking again after the run
        // would put the same question twice.
        if self.refused_while_running(&ask.denials) {
            let reason = "the client refused these hosts while the command ran".to_owned();
            return (Verdict::Deny(Some(reason)), true);
        }
        let key: ApprovalKey = ask
            .denials
            .iter()
            .map(|d| (d.operation, d.target.clone(), d.rule.clone()))
            .collect();
        let cached = self
            .approvals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        let decision = match cached {
            Some(true) => decide(ApprovalAnswer::Approve, ask),
            Some(false) => Ok(Decision::Deny),
            None => {
                let answer = approver.ask(ask).await;
                self.approvals
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, answer == ApprovalAnswer::Approve);
                decide(answer, ask)
            }
        };
        let verdict = match decision {
            Ok(Decision::RetryWith(wider)) => {
                // The session directory must stay outside every writable root, approved or not.
                let mut session = self.session.lock().await;
                let old = session.policy().cloned();
                match session.set_policy(Some(wider.clone())) {
                    Ok(()) => {
                        // The grant covers this retry only.
                        let _ = session.set_policy(old);
                        Verdict::Grant(Box::new(wider))
                    }
                    Err(e) => Verdict::NotGrantable(e.to_string()),
                }
            }
            Ok(Decision::Deny) => Verdict::Deny(None),
            // Never offered on the wire: running unconfined is not something a denial can ask for.
            Ok(Decision::RetryUnsandboxed) => Verdict::NotGrantable(
                "running without the sandbox is never granted by an approval".into(),
            ),
            Err(reason) => Verdict::NotGrantable(reason),
        };
        (verdict, cached.is_some())
    }

    /// True when every denial is the proxy's refusal of a host the network approver was asked
    /// about, and refused, in this session.
    fn refused_while_running(&self, denials: &[Denial]) -> bool {
        let refused: BTreeSet<String> = self
            .network_answers()
            .into_iter()
            .filter(|(_, _, granted)| !granted)
            .map(|(host, port, _)| proxy_target(&host, port))
            .collect();
        !denials.is_empty()
            && denials.iter().all(|d| {
                d.operation == Operation::Network
                    && d.target.as_ref().is_some_and(|t| refused.contains(t))
            })
    }

    /// `user_shell`: the person's own command, unconfined on purpose, in their login shell.
    /// Its events go to `events` as they happen (the last is the end); the reply is the end
    /// with the history record. It does not touch the session's cwd, policy or processes, so
    /// it may run while a sandboxed command runs.
    pub async fn user_shell(
        &self,
        params: UserShellParams,
        events: mpsc::Sender<UserShellEvent>,
    ) -> Result<UserShellReply, ServiceError> {
        let Some(runner) = &self.user_shell else {
            return Err(ServiceError::Unavailable(
                "user_shell is not offered by this server (started with --no-user-shell)".into(),
            ));
        };
        let base = self.cwd().await;
        let mut request = params.into_request(&base);
        let call_id = request.call_id.clone();
        let cancel = CancellationToken::new();
        request.cancel = cancel.clone();
        let mut runner = runner.clone();
        if self.user_shell_snapshots {
            if let Ok(shell) = crate::snapshot::detect_shell(request.shell.as_deref()) {
                let snapshot = self.session.lock().await.shell_snapshot(&shell.path).await;
                if let Some((snapshot, content)) = snapshot {
                    runner = runner.with_snapshot(snapshot, content);
                }
            }
        }
        // Everything that refuses the command does so before it is registered or started.
        runner
            .prepare(&request)
            .map_err(|e| ServiceError::InvalidParams(e.to_string()))?;
        {
            let mut calls = self
                .user_shell_calls
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if calls.contains_key(&call_id) {
                return Err(ServiceError::InvalidParams(format!(
                    "a user_shell command with call_id {call_id:?} is already running"
                )));
            }
            calls.insert(call_id.clone(), cancel);
        }
        let command = request.command.clone();
        let ended = runner.run(request, events).await;
        self.user_shell_calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&call_id);
        let end = ended.map_err(|e| ServiceError::InvalidParams(e.to_string()))?;
        let history = history_record(&command, &end, USER_SHELL_HISTORY_BUDGET);
        Ok(UserShellReply { end, history })
    }

    /// `user_shell_cancel`: kills the command's process group; its `user_shell` request then
    /// ends with exit code -1 and "command aborted by user".
    pub fn cancel_user_shell(&self, params: CancelParams) -> Result<(), ServiceError> {
        let calls = self
            .user_shell_calls
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match calls.get(&params.call_id) {
            Some(token) => {
                token.cancel();
                Ok(())
            }
            None => Err(ServiceError::UnknownCall(params.call_id)),
        }
    }

    /// Cancels every user-shell command still running (the server is ending: nobody is left
    /// to see them end).
    pub fn cancel_all_user_shells(&self) {
        let calls = self
            .user_shell_calls
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for token in calls.values() {
            token.cancel();
        }
    }

    /// `apply_patch`: parsed first (a malformed patch is refused with the line that is wrong,
    /// nothing touched), then applied by the applier under the session's policy. A denial goes
    /// to `approver` as an `exec` denial does; approved, the rest of the patch runs again with
    /// exactly the grant, and the reply holds the changes of both attempts.
    pub async fn apply_patch<A: ApprovalClient + Sync>(
        &self,
        params: ApplyPatchParams,
        approver: &A,
    ) -> Result<PatchReply, ServiceError> {
        let Some((runtime, sandbox)) = &self.patches else {
            return Err(ServiceError::Unavailable(
                "apply_patch is not available: this server has no patch applier".into(),
            ));
        };
        let (base, policy) = {
            let session = self.session.lock().await;
            (session.cwd().to_path_buf(), session.policy().cloned())
        };
        let request = params.into_request(policy, &base);
        let orchestrator = Orchestrator::new(sandbox.clone());
        let judge = ServiceApprover {
            service: self,
            client: approver,
            reached: Mutex::new(None),
        };
        let report = runtime
            .apply(&orchestrator, &request, &judge)
            .await
            .map_err(|e| match e {
                PatchError::Parse(_) | PatchError::TooLarge(_) => {
                    ServiceError::InvalidParams(e.to_string())
                }
                PatchError::NoApplier => ServiceError::Unavailable(e.to_string()),
            })?;
        let approval = judge
            .reached
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        Ok(PatchReply { report, approval })
    }

    /// `write_stdin`.
    pub async fn write_stdin(&self, params: WriteParams) -> Result<ExecReply, ServiceError> {
        if params.rows.is_some() || params.cols.is_some() {
            let default = WindowSize::default();
            self.manager.resize(
                params.process_id,
                WindowSize {
                    rows: params.rows.unwrap_or(default.rows),
                    cols: params.cols.unwrap_or(default.cols),
                },
            )?;
        }
        let yield_time = yield_of(params.yield_time_ms, DEFAULT_WRITE_YIELD);
        let response = if params.close_stdin {
            let r = self
                .manager
                .write_stdin(params.process_id, params.chars.as_bytes(), Duration::ZERO)
                .await?;
            self.manager.close_stdin(params.process_id).await?;
            if matches!(r.status, ProcessStatus::Running) {
                let more = self
                    .manager
                    .write_stdin(params.process_id, b"", yield_time)
                    .await;
                merge(r, more)
            } else {
                r
            }
        } else {
            self.manager
                .write_stdin(params.process_id, params.chars.as_bytes(), yield_time)
                .await?
        };
        Ok(self.later(response).await)
    }

    /// `kill`.
    pub async fn kill(&self, params: KillParams) -> Result<ExecReply, ServiceError> {
        let response = self.manager.kill(params.process_id).await?;
        Ok(self.later(response).await)
    }

    /// `list`.
    pub fn list(&self) -> Vec<ProcessInfo> {
        self.manager.list()
    }

    /// A reply for a call after `exec`: when the process has exited, its cwd report is read.
    async fn later(&self, response: Response) -> ExecReply {
        let id = response.process_id;
        let report = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .map(|p| p.report);
        match self
            .settle(response, report.unwrap_or_else(CwdReport::none))
            .await
        {
            Settled::Running(reply) => reply,
            Settled::Exited(reply, _, report) => {
                self.finish(report).await;
                ExecReply {
                    cwd: self.cwd().await,
                    ..reply
                }
            }
        }
    }

    async fn finish(&self, report: CwdReport) {
        self.session.lock().await.finish(report);
    }

    /// The reply for `response`; a running process keeps its report until it exits.
    async fn settle(&self, response: Response, report: CwdReport) -> Settled {
        let cwd = self.cwd().await;
        let mut reply = ExecReply {
            process_id: Some(response.process_id),
            running: true,
            output: response.output.text(),
            output_dropped_bytes: response.output.dropped,
            outcome: None,
            exit_code: None,
            cwd,
            not_enforced: Vec::new(),
            limits: Vec::new(),
            approval: None,
            evicted: response.evicted,
            wall_time_ms: u64::try_from(response.wall_time.as_millis()).unwrap_or(u64::MAX),
        };
        match response.status {
            ProcessStatus::Running => {
                self.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(response.process_id, Pending { report });
                Settled::Running(reply)
            }
            ProcessStatus::Exited { result } => {
                let result = classify_result(*result);
                reply.process_id = None;
                reply.running = false;
                reply.exit_code = Some(result.cordon_exit_code());
                reply.outcome = Some(result.outcome.clone());
                reply.not_enforced = not_enforced(&result);
                reply.limits = result.limits.clone();
                Settled::Exited(reply, Box::new(result), report)
            }
        }
    }
}

enum Settled {
    Running(ExecReply),
    Exited(ExecReply, Box<ExecResult<Denial>>, CwdReport),
}

/// Two collections in a row, as one reply.
fn merge(first: Response, second: Result<Response, ManagerError>) -> Response {
    match second {
        Ok(mut second) => {
            let mut bytes = first.output.bytes;
            bytes.extend_from_slice(&second.output.bytes);
            second.output.total += first.output.total;
            second.output.dropped += first.output.dropped;
            second.output.bytes = bytes;
            second.wall_time += first.wall_time;
            second
        }
        Err(_) => first,
    }
}

/// What the receipt says was not enforced, one line each.
fn not_enforced<D>(result: &ExecResult<D>) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(receipt) = &result.receipt {
        for d in &receipt.downgrades {
            lines.push(format!("{} not enforced: {}", d.restriction, d.reason));
        }
    }
    lines
}
