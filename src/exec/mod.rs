//! The supervised runtime: run one command (confined by the helper, or directly), with a
//! timeout, bounded output capture, cancellation and a sanitised environment, and report
//! everything that happened as an [`ExecResult`].
//!
//! ```no_run
//! use cordon::exec::{ExecRequest, Outcome, Sandbox};
//! use cordon::sandbox::SandboxPolicy;
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let policy = SandboxPolicy::from_json(
//!     r#"{"version":1,"filesystem":{"read":["/"],"write":["/tmp"]},
//!         "network":{"mode":"denied"},
//!         "enforcement":{"missing_layer":"refuse","carve_outs":"report"}}"#,
//! )?;
//! let sandbox = Sandbox::locate()?.with_timeout(Duration::from_secs(30));
//! let request = ExecRequest::sandboxed(["sh", "-c", "echo hi; touch /etc/x"], "/tmp", policy);
//! let result = sandbox.exec(request).await;
//! assert_eq!(result.outcome, Outcome::Failed { code: 1 });
//! assert_eq!(result.stdout.bytes, b"hi\n");
//! # Ok(()) }
//! ```
//!
//! # Supervision
//!
//! The child (the helper, or the command itself when unsandboxed) starts a new session, so
//! it leads a process group that holds the whole tree unless a descendant leaves it. When
//! the run ends, for whatever reason, that group is sent `SIGKILL`: nothing the command put in
//! the background outlives [`Sandbox::exec`]. Output readers get a short grace period after
//! the child exits (or is killed) and are then abandoned, so a descendant holding the pipes
//! open cannot hang the call; a timed-out call returns within `timeout + 3 × grace` (kill and
//! reap, readers, status pipe), in practice `timeout + grace`.
//!
//! Limits of this:
//! - a descendant that calls `setsid`/`setpgid` itself leaves the group and escapes the kill
//!   (the namespace layer's PID namespace will close this); its pipes are still abandoned;
//! - the helper's `PR_SET_PDEATHSIG` (and ours, unsandboxed) fires when the *thread* that
//!   forked exits, not the process. `tokio::process` forks on the thread polling the future:
//!   a runtime worker, which lives as long as the runtime. Do not drive [`Sandbox::exec`] from
//!   a thread that may exit first (a `spawn_blocking` thread is reaped after 10 s idle; a
//!   `block_on` on a short-lived thread) or the command is killed when it exits;
//! - the group id is the child's pid. After the child is reaped and every member is gone the
//!   id could in principle be reused before the final kill; pids are handed out cyclically, so
//!   that needs the pid space to wrap within the grace period.
//!
//! Dropping the future returned by [`Sandbox::exec`] also kills the group.
//!
//! Before each spawn the calling process makes itself not dumpable and lowers its own
//! `RLIMIT_CORE` soft limit to 0, for the rest of its life: it holds what the command must not
//! see (the withheld environment), and a core dump or a `/proc/PID/mem` read would show it. The
//! command still starts with the caller's soft limit.

pub mod capture;
pub mod env;
pub mod limits;
pub mod outcome;
pub mod process_manager;
pub mod pty;
mod supervise;
pub(crate) mod supervisor_guard;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cordon_sandbox::status::ConfinementReceipt;
use cordon_sandbox::SandboxPolicy;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use crate::helper::PassFd;
use crate::helper::{Helper, HelperError};

pub use capture::Captured;
pub use env::{EnvBase, EnvPolicy};
pub use outcome::{
    ExecResult, Outcome, ParentStep, SandboxMode, SetupStep, StreamKind, Unclassified,
};
pub use pty::{Pty, StdinPipe, WindowSize};

/// Default timeout: ten minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Default cap per stream: 1 MiB.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1 << 20;
/// Default time output readers get after the child exits or is killed.
pub const DEFAULT_GRACE: Duration = Duration::from_millis(200);
/// Capacity of the streaming event channel. When the receiver falls this far behind, output
/// events are dropped (and counted in [`ExecResult::events_dropped_bytes`]) rather than
/// stalling the drain and with it the command.
pub const EVENT_CAPACITY: usize = 256;

/// The runtime, configured once and shared (cheap to clone).
#[derive(Debug, Clone)]
pub struct Sandbox {
    inner: Arc<Config>,
}

#[derive(Debug, Clone)]
struct Config {
    helper: Option<Helper>,
    timeout: Duration,
    output_limit: usize,
    grace: Duration,
}

impl Sandbox {
    /// A runtime that confines through `helper`.
    pub fn new(helper: Helper) -> Sandbox {
        Sandbox::with_config(Some(helper))
    }

    /// A runtime using [`Helper::locate`].
    pub fn locate() -> Result<Sandbox, HelperError> {
        Helper::locate().map(Sandbox::new)
    }

    /// A runtime with no helper: it runs unsandboxed requests and rejects the others.
    pub fn without_helper() -> Sandbox {
        Sandbox::with_config(None)
    }

    fn with_config(helper: Option<Helper>) -> Sandbox {
        Sandbox {
            inner: Arc::new(Config {
                helper,
                timeout: DEFAULT_TIMEOUT,
                output_limit: DEFAULT_OUTPUT_LIMIT,
                grace: DEFAULT_GRACE,
            }),
        }
    }

    /// Default timeout for requests that set none.
    pub fn with_timeout(mut self, timeout: Duration) -> Sandbox {
        Arc::make_mut(&mut self.inner).timeout = timeout;
        self
    }

    /// Default per-stream output cap for requests that set none.
    pub fn with_output_limit(mut self, bytes: usize) -> Sandbox {
        Arc::make_mut(&mut self.inner).output_limit = bytes;
        self
    }

    /// How long output readers may run on after the child exits or is killed.
    pub fn with_grace(mut self, grace: Duration) -> Sandbox {
        Arc::make_mut(&mut self.inner).grace = grace;
        self
    }

    /// The helper, if any.
    pub fn helper(&self) -> Option<&Helper> {
        self.inner.helper.as_ref()
    }

    /// Runs one request to completion. Never fails: every failure is an [`Outcome`].
    pub async fn exec(&self, request: ExecRequest) -> ExecResult {
        supervise::run(&self.inner, request, None).await
    }

    /// Runs one request on a new task and streams its events: [`ExecEvent::Started`] first
    /// (absent when nothing was spawned), [`ExecEvent::Output`] as output arrives, and
    /// [`ExecEvent::Finished`] last. Dropping the receiver does not stop the command; cancel
    /// the request's token for that.
    ///
    /// Must be called within a Tokio runtime (it uses `tokio::spawn`).
    pub fn exec_streaming(&self, request: ExecRequest) -> mpsc::Receiver<ExecEvent> {
        let (tx, rx) = mpsc::channel(EVENT_CAPACITY);
        let config = Arc::clone(&self.inner);
        tokio::spawn(async move {
            let result = supervise::run(&config, request, Some(tx.clone())).await;
            // A receiver that is gone wanted no result.
            let _ = tx.send(ExecEvent::Finished(Box::new(result))).await;
        });
        rx
    }
}

/// What to feed the command on standard input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StdinSource {
    /// `/dev/null`.
    #[default]
    Null,
    /// These bytes, then end of file.
    Bytes(Vec<u8>),
    /// The caller's own stdin (the CLI passes its terminal or pipe through).
    Inherit,
    /// The read end of a pipe whose write end the caller keeps: input written while the
    /// command runs (the process manager's `write_stdin`).
    Pipe(StdinPipe),
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// Program and arguments; the program is looked up in `PATH` of the command's environment.
    pub argv: Vec<OsString>,
    /// Working directory; must exist.
    pub cwd: PathBuf,
    /// The resolved policy, or `None` to run unsandboxed with full access.
    pub policy: Option<SandboxPolicy>,
    /// How to build the environment.
    pub env: EnvPolicy,
    /// Overrides the runtime's default timeout.
    pub timeout: Option<Duration>,
    /// Overrides the runtime's default per-stream output cap.
    pub output_limit: Option<usize>,
    /// Standard input.
    pub stdin: StdinSource,
    /// Cancels the run: the process group is killed and the outcome is `cancelled`.
    pub cancel: CancellationToken,
    /// Streaming only: wait for the receiver instead of dropping output events when it falls
    /// behind. The command then blocks on a full pipe, as it would writing to a slow terminal;
    /// the CLI uses this to pass output through without losing any.
    pub lossless_events: bool,
    /// Descriptors the command inherits on purpose, at fixed numbers (pipe or socket ends
    /// only when sandboxed; see [`PassFd`]). Empty by default: the command gets only stdio.
    pub pass_fds: Vec<PassFd>,
    /// When `argv` is a wrapper the caller built around the user's command (a shell snapshot
    /// wrapper, see [`crate::session`]), the command as the user gave it. It is what
    /// [`ExecResult::argv`] and [`ExecEvent::Started`] report, and so all that classification
    /// and approvals ever see.
    pub reported_argv: Option<Vec<OsString>>,
    /// Give the command the caller's own stdout instead of capturing it (the CLI's
    /// pass-through, so a terminal stays a terminal). The result's `stdout` is then empty.
    pub inherit_stdout: bool,
    /// Called with the helper's receipt as soon as it arrives, before the command is
    /// executed: see [`ExecRequest::on_confined`].
    pub on_confined: Option<ConfinedHook>,
    /// The caller's side of the managed network (`network.mode = "proxy"`): the approver for
    /// unlisted hosts and the resolver. See [`crate::network`].
    pub network: crate::network::NetworkOptions,
    /// Run on this pseudo-terminal instead of pipes: its slave is the command's stdin, stdout
    /// and stderr and its controlling terminal; everything the command writes arrives as
    /// [`StreamKind::Stdout`] (a terminal has one stream), and the result's `stdout` and
    /// `stderr` both hold that stream, so that a denial message on it is classified as one on
    /// stderr would be. Overrides `stdin` and `inherit_stdout`.
    pub tty: Option<Pty>,
    /// Memory, process, CPU-time and file-size bounds (see [`limits`]); the result's
    /// `limits` says what enforced each.
    pub limits: limits::Limits,
    /// Run the seccomp observer (`Some(true)`), or not (`Some(false)`); `None` follows
    /// [`crate::evidence::OBSERVER_ENV`] and then [`crate::evidence::OBSERVER_DEFAULT`].
    pub observe: Option<bool>,
}

/// A function the supervisor calls with the receipt before the command runs.
#[derive(Clone)]
pub struct ConfinedHook(Arc<dyn Fn(&ConfinementReceipt) + Send + Sync>);

impl std::fmt::Debug for ConfinedHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConfinedHook")
    }
}

impl ConfinedHook {
    pub(crate) fn call(&self, receipt: &ConfinementReceipt) {
        (self.0)(receipt)
    }
}

impl ExecRequest {
    /// A request confined by `policy`.
    pub fn sandboxed<I, S>(argv: I, cwd: impl Into<PathBuf>, policy: SandboxPolicy) -> ExecRequest
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        ExecRequest::new(argv, cwd, Some(policy))
    }

    /// A request run directly, with the caller's full access.
    pub fn unsandboxed<I, S>(argv: I, cwd: impl Into<PathBuf>) -> ExecRequest
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        ExecRequest::new(argv, cwd, None)
    }

    /// A request with defaults for everything but the command, cwd and policy.
    pub fn new<I, S>(argv: I, cwd: impl Into<PathBuf>, policy: Option<SandboxPolicy>) -> ExecRequest
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        ExecRequest {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: cwd.into(),
            policy,
            env: EnvPolicy::default(),
            timeout: None,
            output_limit: None,
            stdin: StdinSource::Null,
            cancel: CancellationToken::new(),
            lossless_events: false,
            pass_fds: Vec::new(),
            reported_argv: None,
            inherit_stdout: false,
            on_confined: None,
            network: crate::network::NetworkOptions::default(),
            tty: None,
            limits: limits::Limits::default(),
            observe: None,
        }
    }

    /// The command as it is reported: [`ExecRequest::reported_argv`] when set, else `argv`.
    pub fn display_argv(&self) -> &[OsString] {
        self.reported_argv.as_deref().unwrap_or(&self.argv)
    }

    /// Passes `fd` to the command as descriptor `target`.
    pub fn pass_fd(mut self, fd: std::sync::Arc<std::os::fd::OwnedFd>, target: i32) -> ExecRequest {
        self.pass_fds.push(PassFd { fd, target });
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> ExecRequest {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the per-stream output cap.
    pub fn output_limit(mut self, bytes: usize) -> ExecRequest {
        self.output_limit = Some(bytes);
        self
    }

    /// Feeds these bytes on standard input.
    pub fn stdin_bytes(mut self, bytes: impl Into<Vec<u8>>) -> ExecRequest {
        self.stdin = StdinSource::Bytes(bytes.into());
        self
    }

    /// Sets the environment policy.
    pub fn env(mut self, env: EnvPolicy) -> ExecRequest {
        self.env = env;
        self
    }

    /// Streaming: wait for a slow receiver instead of dropping output events.
    pub fn lossless_events(mut self, lossless: bool) -> ExecRequest {
        self.lossless_events = lossless;
        self
    }

    /// Calls `hook` with the helper's receipt (what is in force, what is not) as soon as it
    /// arrives. When the receipt lists downgrades the helper waits for `hook` to return before
    /// it executes the command, so whatever `hook` prints comes before the command's first
    /// output, even on a stdout the command writes to directly. It runs on a blocking thread;
    /// keep it short. Never called for an unsandboxed request or when confinement failed.
    pub fn on_confined(
        mut self,
        hook: impl Fn(&ConfinementReceipt) + Send + Sync + 'static,
    ) -> ExecRequest {
        self.on_confined = Some(ConfinedHook(Arc::new(hook)));
        self
    }

    /// Routes hosts that no `network.allow` entry covers to `approvals` while the command
    /// runs (proxy mode); share one value across a session to ask once per host.
    pub fn network_approvals(mut self, approvals: crate::network::NetworkApprovals) -> ExecRequest {
        self.network.approvals = Some(approvals);
        self
    }

    /// Resolves names for the proxy with `resolver`.
    pub fn network_resolver(mut self, resolver: crate::network::Resolver) -> ExecRequest {
        self.network.resolver = resolver;
        self
    }

    /// Forces the seccomp observer on or off for this request (see [`ExecRequest::observe`]).
    pub fn observe(mut self, on: bool) -> ExecRequest {
        self.observe = Some(on);
        self
    }

    /// Uses `token` to cancel the run.
    pub fn cancel_token(mut self, token: CancellationToken) -> ExecRequest {
        self.cancel = token;
        self
    }
}

/// A streaming event from [`Sandbox::exec_streaming`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecEvent {
    /// The child was spawned.
    Started {
        /// Its pid (the helper's, which the command keeps).
        pid: u32,
        /// The command as requested.
        argv: Vec<OsString>,
    },
    /// The seccomp observer saw the command attempt something the policy refuses, as it
    /// happened (once per operation and target; [`ExecResult::kernel_denials`] has the counts).
    /// Whether it cost the command anything is known only at the end: the classified result
    /// lists it as a denial only if the command failed.
    Denied(crate::classify::Denial),
    /// Output as it was read.
    Output {
        /// Which stream.
        stream: StreamKind,
        /// The bytes of one read.
        bytes: Vec<u8>,
    },
    /// The run is over; always the last event.
    Finished(Box<ExecResult>),
}
