//! Sessions: one-shot commands that carry state from one to the next the way a terminal does.
//!
//! Agents run every command as a fresh `<shell> -lc '<script>'`. A [`Session`] makes that feel
//! like one long-lived shell without keeping a shell alive:
//!
//! - **Startup state, fast.** The first `-lc` command for a shell makes a snapshot of what the
//!   user's login shell sets up (confined read-only without network, see [`crate::snapshot`]);
//!   the session keeps its content in memory (the file is deleted at once) and every command
//!   is rewritten to `<shell> -c <wrapper>` that sources it from a sealed memfd.
//! - **Nothing a command writes becomes session state.** The session directory must lie
//!   outside every writable root of the session's policy ([`SessionError::InsideWritableRoot`],
//!   checked by [`Session::new`] and [`Session::set_policy`]); it is reached without following
//!   symlinks and used through its descriptor only ([`PrivateDir`]).
//! - **The working directory follows `cd`, inside the workspace.** The wrapper reports
//!   `pwd -P` on a pipe passed through the helper ([`ExecRequest::pass_fds`], the helper's
//!   `--pass-fd`), so it works under a read-only profile too. The report is the command's own
//!   text, so the session canonicalises it and adopts it only when it is a directory inside
//!   one of the workspace roots (canonical comparison), written in the lexical form of that
//!   root (a root `/home/u/ws -> /data/ws` turns a reported `/data/ws/sub` into
//!   `/home/u/ws/sub`). Anything else leaves the previous cwd, and [`Session::finish`] (and
//!   [`Session::last_cwd_update`]) says so with a [`CwdUpdate::Rejected`]. A request with an
//!   explicit cwd neither uses nor changes the session's.
//! - **Environment scripts.** Files in [`Session::env_dir`] are read by the session before each
//!   command (regular files of the user's, writable by nobody else; anything else is
//!   ignored), passed as one sealed memfd and evaluated in byte order of their names after the
//!   snapshot and before the request's explicit variables, so a virtualenv activated there
//!   stays active; `$CORDON_ENV_FILE`, when set, is sourced last (inside the sandbox).
//! - **The user's command, not the wrapper, is what anyone judges.** The wrapped request carries
//!   the original argv in [`ExecRequest::reported_argv`]: [`ExecResult::argv`], streaming
//!   events, classification and the orchestrator's approver see only that.
//!
//! [`Session::exec`] runs through the session's [`Sandbox`]; to stream output or use another
//! runner, call [`Session::prepare`], run its `request` (e.g. with
//! [`Sandbox::exec_streaming`](crate::exec::Sandbox::exec_streaming)), then hand its `report` to
//! [`Session::finish`]. The wrapper reports on descriptor [`REPORT_FD`] (9); a script that
//! redirects that descriptor itself redirects the report too.
//!
//! Commands that are not `[shell, "-lc", script, ...]` for bash, zsh or sh, and every command
//! when no snapshot could be made (logged at `info`), run unchanged: correct, just without the
//! speed-up and without `cd` tracking.
//!
//! ```no_run
//! use cordon::exec::Sandbox;
//! use cordon::session::{Session, SessionOptions, SessionRequest};
//!
//! # async fn demo(policy: cordon::sandbox::SandboxPolicy) -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::path::PathBuf::from("/home/me/.cache/cordon/sessions");
//! let opts = SessionOptions::new(&dir, "/home/me/project").policy(Some(policy));
//! let mut session = Session::new(Sandbox::locate()?, opts)?;
//! std::fs::write(session.env_dir().join("10-venv.sh"), ". .venv/bin/activate\n")?;
//!
//! session.exec(SessionRequest::new(["bash", "-lc", "cd src && ls"])).await;
//! let r = session.exec(SessionRequest::new(["bash", "-lc", "pwd; which python"])).await;
//! assert_eq!(r.stdout.bytes.split(|b| *b == b'\n').next(), Some(&b"/home/me/project/src"[..]));
//! assert_eq!(r.argv, ["bash", "-lc", "pwd; which python"]); // never the wrapper
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cordon_sandbox::SandboxPolicy;
use tokio_util::sync::CancellationToken;

use crate::exec::{EnvPolicy, ExecRequest, ExecResult, Sandbox, StdinSource};
use crate::orchestrator::{Approver, OrchestratedRun, Orchestrator};
use crate::snapshot::{
    create_snapshot, detect_shell, push_quoted, rewrite_argv, sealed_memfd, spawn_cleanup,
    startup_files_under_writable_root, writable_root_covering, InvalidSessionId, PrivateDir,
    ReportFd, RewriteOptions, SessionId, Shell, ShellKind, SnapshotOptions, SnapshotRef,
    TrustError, Untrusted, DEFAULT_RETENTION, ENV_FD, SNAPSHOT_FD,
};

/// The most an `env/` script may hold; a bigger one is ignored.
const MAX_ENV_SCRIPT: usize = 1024 * 1024;

/// The descriptor the wrapper reports the final working directory on. High in dash's 3..=9
/// range, because scripts that open descriptors of their own usually start at 3.
pub const REPORT_FD: u8 = 9;

/// Why a session could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The session directory could not be created, or cannot be trusted (reached through a
    /// symlink, not the user's, ...).
    #[error("session: cannot prepare directory {path:?}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: TrustError,
    },
    /// The session directory lies inside (or contains) a writable root of the session's
    /// policy: a command could plant the scripts the next command sources.
    #[error("session: directory {dir:?} overlaps the writable root {root:?} of the session's policy, so a sandboxed command could write the session's state; put the session directory outside every writable root")]
    InsideWritableRoot {
        /// The session directory.
        dir: PathBuf,
        /// The writable root.
        root: PathBuf,
    },
    /// The session id is not usable as a file name.
    #[error(transparent)]
    Id(#[from] InvalidSessionId),
}

/// How a session is set up.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Directory for the session's `env/` directory and the snapshot while it is being made
    /// (created 0700, reached without following symlinks). It must lie outside every writable
    /// root of [`SessionOptions::policy`]. Sessions and stale cleanup may share it.
    pub dir: PathBuf,
    /// The session id (a file-name component). [`SessionOptions::new`] makes a unique one.
    pub id: SessionId,
    /// The working directory of the first command.
    pub cwd: PathBuf,
    /// The sandbox policy for every command; `None` runs them unsandboxed.
    pub policy: Option<SandboxPolicy>,
    /// Roots whose lexical form the session keeps for a cwd beneath them (see the module
    /// docs). Empty means just `cwd`.
    pub workspace_roots: Vec<PathBuf>,
    /// Make and use shell snapshots (on by default).
    pub snapshots: bool,
    /// Limit for each shell run while making a snapshot.
    pub snapshot_timeout: Duration,
    /// The environment the snapshot is captured in. By default the process's own minus the
    /// secret filter: a snapshot replays every export it sees, so it must not see a credential
    /// the command itself would not get.
    pub snapshot_env: EnvPolicy,
    /// The runtime's own `PATH` entries, put in front of the snapshot's.
    pub path_prepend: Vec<PathBuf>,
    /// The managed network's approver and resolver for every command (`network.mode =
    /// "proxy"`); its approvals are remembered for the whole session.
    pub network: crate::network::NetworkOptions,
}

impl SessionOptions {
    /// Options for a session in `dir` starting in `cwd`, with a fresh unique id, no sandbox
    /// policy (set one with [`SessionOptions::policy`]) and snapshots on.
    pub fn new(dir: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> SessionOptions {
        let id = SessionId::unique();
        SessionOptions {
            dir: dir.into(),
            id,
            cwd: cwd.into(),
            policy: None,
            workspace_roots: Vec::new(),
            snapshots: true,
            snapshot_timeout: crate::snapshot::DEFAULT_TIMEOUT,
            snapshot_env: EnvPolicy::default(),
            path_prepend: Vec::new(),
            network: crate::network::NetworkOptions::default(),
        }
    }

    /// Sets the sandbox policy.
    pub fn policy(mut self, policy: Option<SandboxPolicy>) -> SessionOptions {
        self.policy = policy;
        self
    }

    /// Sets the session id.
    pub fn id(mut self, id: &str) -> Result<SessionOptions, InvalidSessionId> {
        self.id = SessionId::new(id)?;
        Ok(self)
    }

    /// Adds a workspace root (kept in its lexical form).
    pub fn workspace_root(mut self, root: impl Into<PathBuf>) -> SessionOptions {
        self.workspace_roots.push(root.into());
        self
    }

    /// Turns snapshots on or off.
    pub fn snapshots(mut self, on: bool) -> SessionOptions {
        self.snapshots = on;
        self
    }

    /// Sets the environment snapshots are captured in.
    pub fn snapshot_env(mut self, env: EnvPolicy) -> SessionOptions {
        self.snapshot_env = env;
        self
    }
}

/// One command run in a session.
#[derive(Debug, Clone)]
pub struct SessionRequest {
    /// The command, e.g. `["bash", "-lc", "cd src && make"]`.
    pub argv: Vec<OsString>,
    /// An explicit working directory: used instead of the session's, and a `cd` in the command
    /// does not change the session's.
    pub cwd: Option<PathBuf>,
    /// The environment; its `set` entries win over the snapshot and the `env/` scripts.
    pub env: EnvPolicy,
    /// Overrides the runtime's default timeout.
    pub timeout: Option<Duration>,
    /// Overrides the runtime's default per-stream output cap.
    pub output_limit: Option<usize>,
    /// Standard input.
    pub stdin: StdinSource,
    /// Cancels the run.
    pub cancel: CancellationToken,
}

impl SessionRequest {
    /// A request in the session's working directory with the default environment.
    pub fn new<I, S>(argv: I) -> SessionRequest
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        SessionRequest {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: EnvPolicy::default(),
            timeout: None,
            output_limit: None,
            stdin: StdinSource::Null,
            cancel: CancellationToken::new(),
        }
    }

    /// Runs in `cwd` without touching the session's working directory.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> SessionRequest {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets the environment policy.
    pub fn env(mut self, env: EnvPolicy) -> SessionRequest {
        self.env = env;
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> SessionRequest {
        self.timeout = Some(timeout);
        self
    }
}

/// A prepared command: the request to run and where its working-directory report arrives.
#[derive(Debug)]
pub struct Prepared {
    /// The (possibly wrapped) request; its `reported_argv` is the original command.
    pub request: ExecRequest,
    /// Give this to [`Session::finish`] once the request has run.
    pub report: CwdReport,
}

/// The read end of a command's working-directory report (empty when the session's cwd does not
/// follow that command).
#[derive(Debug)]
pub struct CwdReport(Option<File>);

impl CwdReport {
    /// No report: the session's cwd does not follow the command.
    pub fn none() -> CwdReport {
        CwdReport(None)
    }
}

/// What became of the working directory a command reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CwdUpdate {
    /// Nothing was reported (explicit cwd, an unwrapped command, or the command replaced the
    /// report); the session's cwd is unchanged.
    NotReported,
    /// The session moved to this directory (lexical form).
    Adopted(PathBuf),
    /// The report was not believed; the session's cwd is unchanged.
    Rejected {
        /// What the command reported.
        reported: PathBuf,
        /// Why it was not adopted.
        reason: CwdRejection,
    },
}

/// Why a reported working directory was not adopted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CwdRejection {
    /// Not an absolute path to an existing directory.
    NotADirectory,
    /// Its canonical form lies outside every workspace root.
    OutsideWorkspace,
}

impl std::fmt::Display for CwdRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CwdRejection::NotADirectory => "not an existing directory",
            CwdRejection::OutsideWorkspace => "outside the session's workspace roots",
        })
    }
}

/// What the session knows about the snapshot of one shell binary.
#[derive(Debug)]
enum SnapshotState {
    /// The content (kept in memory; the file was deleted once read) and its shell kind.
    Ready {
        content: Arc<Vec<u8>>,
        snapshot: SnapshotRef,
    },
    /// Making it failed once; the session runs that shell's commands unchanged from then on
    /// rather than paying for a failing capture on every command.
    Failed,
}

/// A session: see the module docs.
#[derive(Debug)]
pub struct Session {
    sandbox: Sandbox,
    opts: SessionOptions,
    /// `opts.dir`, held open; never reached by path again.
    dir: PrivateDir,
    env_name: String,
    env_dir: PathBuf,
    cwd: PathBuf,
    /// (lexical, canonical) pairs, longest canonical first.
    roots: Vec<(PathBuf, PathBuf)>,
    snapshots: HashMap<PathBuf, SnapshotState>,
    generation: u64,
    last_cwd: CwdUpdate,
}

impl Session {
    /// Creates the directory (0700, reached without following symlinks) and the session's
    /// `env/` directory. Snapshots are made later, on first use. Fails with
    /// [`SessionError::InsideWritableRoot`] when the policy could let a command write there.
    pub fn new(sandbox: Sandbox, opts: SessionOptions) -> Result<Session, SessionError> {
        let absolute = if opts.dir.is_absolute() {
            opts.dir.clone()
        } else {
            let cwd = std::env::current_dir().map_err(|source| SessionError::Dir {
                path: opts.dir.clone(),
                source: TrustError::Io {
                    path: opts.dir.clone(),
                    source,
                },
            })?;
            cwd.join(&opts.dir)
        };
        check_outside_writable(opts.policy.as_ref(), &absolute)?;
        let dir_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SessionError::Dir { path, source }
        };
        let dir = PrivateDir::open(&absolute, true).map_err(dir_error(&absolute))?;
        // A directory: stale cleanup never removes directories, so this one is removed on
        // drop (a crashed session leaves it behind).
        let env_name = format!("{}.env", opts.id.as_str());
        let env_dir = absolute.join(&env_name);
        dir.subdir(&env_name, true).map_err(dir_error(&env_dir))?;
        let lexical_roots = if opts.workspace_roots.is_empty() {
            vec![opts.cwd.clone()]
        } else {
            opts.workspace_roots.clone()
        };
        let mut roots: Vec<(PathBuf, PathBuf)> = lexical_roots
            .into_iter()
            .filter_map(|lexical| {
                let canonical = std::fs::canonicalize(&lexical).ok()?;
                Some((lexical, canonical))
            })
            .collect();
        roots.sort_by_key(|(_, c)| std::cmp::Reverse(c.as_os_str().len()));
        Ok(Session {
            sandbox,
            cwd: opts.cwd.clone(),
            opts,
            dir,
            env_name,
            env_dir,
            roots,
            snapshots: HashMap::new(),
            generation: 0,
            last_cwd: CwdUpdate::NotReported,
        })
    }

    /// The session id.
    pub fn id(&self) -> &SessionId {
        &self.opts.id
    }

    /// The working directory the next command without an explicit cwd runs in.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Moves the session to `cwd`.
    pub fn set_cwd(&mut self, cwd: impl Into<PathBuf>) {
        self.cwd = cwd.into();
    }

    /// The directory whose files every wrapped command sources, in byte order of their names.
    pub fn env_dir(&self) -> &Path {
        &self.env_dir
    }

    /// The policy commands run under.
    pub fn policy(&self) -> Option<&SandboxPolicy> {
        self.opts.policy.as_ref()
    }

    /// Replaces the policy for later commands; refused (the old one stays) when it would make
    /// the session directory writable.
    pub fn set_policy(&mut self, policy: Option<SandboxPolicy>) -> Result<(), SessionError> {
        check_outside_writable(policy.as_ref(), self.dir.path())?;
        self.opts.policy = policy;
        Ok(())
    }

    /// Where the snapshot in use for `shell` was written when it was made, if one was made.
    /// The session keeps the content in memory and has already deleted the file.
    pub fn snapshot_path(&self, shell: &Path) -> Option<&Path> {
        match self.snapshots.get(shell) {
            Some(SnapshotState::Ready { snapshot, .. }) => Some(&snapshot.path),
            _ => None,
        }
    }

    /// What the last finished command did to the session's working directory.
    pub fn last_cwd_update(&self) -> &CwdUpdate {
        &self.last_cwd
    }

    /// Runs one command and, unless it had an explicit cwd, adopts the directory it ended in.
    pub async fn exec(&mut self, request: SessionRequest) -> ExecResult {
        let Prepared { request, report } = self.prepare(request).await;
        let result = self.sandbox.exec(request).await;
        self.finish(report);
        result
    }

    /// [`Session::exec`] through an orchestrator: on a denial the approver (which sees the
    /// original command only) may allow a second attempt; the cwd is taken from the last one.
    pub async fn exec_orchestrated<A: Approver>(
        &mut self,
        orchestrator: &Orchestrator,
        request: SessionRequest,
        approver: &A,
    ) -> OrchestratedRun {
        let Prepared { request, report } = self.prepare(request).await;
        let run = orchestrator.run(request, approver).await;
        // Each attempt reports; the last line written is the last attempt's.
        self.finish(report);
        run
    }

    /// Builds the request for `request` (making the snapshot on first use), for callers that
    /// run it themselves; hand the result to [`Session::finish`] afterwards.
    pub async fn prepare(&mut self, request: SessionRequest) -> Prepared {
        let explicit_cwd = request.cwd.is_some();
        let cwd = request.cwd.clone().unwrap_or_else(|| self.cwd.clone());
        let snapshot = self.snapshot_for(&request.argv).await;
        let mut exec = ExecRequest::new(request.argv.clone(), cwd, self.opts.policy.clone());
        exec.env = request.env.clone();
        exec.timeout = request.timeout;
        exec.output_limit = request.output_limit;
        exec.stdin = request.stdin.clone();
        exec.cancel = request.cancel.clone();
        exec.network = self.opts.network.clone();
        let mut report = None;
        if let Some((snapshot, content)) = snapshot {
            let snapshot_kind = snapshot.kind;
            let mut rw = RewriteOptions::new(snapshot);
            rw.keep_overrides(request.env.set.keys());
            // The proxy's variables win over a startup file's too (see `crate::network`).
            if let Some(policy) = &self.opts.policy {
                rw.keep_overrides(&crate::network::env_names(policy));
            }
            rw.env_scripts = true;
            rw.path_prepend = self.opts.path_prepend.clone();
            let pipe = if explicit_cwd {
                None
            } else {
                match report_pipe() {
                    Ok(pipe) => Some(pipe),
                    Err(e) => {
                        tracing::info!("session: no cwd report for this command: {e}");
                        None
                    }
                }
            };
            rw.report_cwd_fd = pipe.as_ref().and_then(|_| ReportFd::new(REPORT_FD));
            let env_scripts = env_bundle(snapshot_kind, &self.read_env_scripts());
            match wrap_with_snapshot(&mut exec, &rw, &content, Some(&env_scripts)) {
                Ok(true) => {
                    if let Some((read, write)) = pipe {
                        exec = exec.pass_fd(write, i32::from(REPORT_FD));
                        report = Some(read);
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::info!("session: running without the snapshot: {e}"),
            }
        }
        Prepared {
            request: exec,
            report: CwdReport(report),
        }
    }

    /// Adopts the working directory a prepared command reported when it is an existing
    /// directory inside the workspace roots (canonical comparison); otherwise the cwd stays and
    /// the returned value says why. Call after the command finished.
    pub fn finish(&mut self, report: CwdReport) -> CwdUpdate {
        let update = self.judge_report(report);
        if let CwdUpdate::Adopted(dir) = &update {
            self.cwd = dir.clone();
        }
        if let CwdUpdate::Rejected { reported, reason } = &update {
            tracing::info!("session: reported cwd {reported:?} not adopted: {reason}");
        }
        self.last_cwd = update.clone();
        update
    }

    fn judge_report(&self, report: CwdReport) -> CwdUpdate {
        let Some(mut report) = report.0 else {
            return CwdUpdate::NotReported;
        };
        let mut bytes = Vec::new();
        // Non-blocking: the report was written before the command exited, and a background
        // process that inherited the write end must not make us wait.
        if let Err(e) = read_available(&mut report, &mut bytes) {
            tracing::info!("session: cannot read the cwd report: {e}");
            return CwdUpdate::NotReported;
        }
        let Some(reported) = last_line(&bytes) else {
            return CwdUpdate::NotReported;
        };
        let reported = PathBuf::from(OsString::from_vec(reported.to_vec()));
        let rejected = |reason| CwdUpdate::Rejected {
            reported: reported.clone(),
            reason,
        };
        // The command wrote this text: resolve every symlink in it before judging it.
        let canonical = match std::fs::canonicalize(&reported) {
            Ok(c) if reported.is_absolute() && c.is_dir() => c,
            _ => return rejected(CwdRejection::NotADirectory),
        };
        match self.lexical(&canonical) {
            Some(lexical) => CwdUpdate::Adopted(lexical),
            None => rejected(CwdRejection::OutsideWorkspace),
        }
    }

    /// `path` (canonical) under the lexical form of the deepest workspace root whose target
    /// contains it; `None` outside every root.
    fn lexical(&self, path: &Path) -> Option<PathBuf> {
        for (lexical, canonical) in &self.roots {
            if let Ok(rest) = path.strip_prefix(canonical) {
                return Some(if rest.as_os_str().is_empty() {
                    lexical.clone()
                } else {
                    lexical.join(rest)
                });
            }
        }
        None
    }

    /// The `env/` scripts as the session believes them: regular files of the user's, writable
    /// by nobody else, in byte order of their names. Anything else (a symlink, a directory, a
    /// file with another owner) is ignored and left alone, since the directory is the
    /// embedder's.
    fn read_env_scripts(&self) -> Vec<Vec<u8>> {
        let env = match self.dir.subdir(&self.env_name, false) {
            Ok(env) => env,
            Err(e) => {
                tracing::info!("session: env/ scripts not used: {e}");
                return Vec::new();
            }
        };
        let names = env.names().unwrap_or_default();
        names
            .iter()
            .filter_map(
                |name| match env.read_file(name, MAX_ENV_SCRIPT, Untrusted::Ignore) {
                    Ok(Some(content)) => Some(content),
                    Ok(None) => {
                        tracing::info!(
                            "session: ignoring env/ entry {name:?} (not a private regular file)"
                        );
                        None
                    }
                    Err(e) => {
                        tracing::info!("session: ignoring env/ entry {name:?}: {e}");
                        None
                    }
                },
            )
            .collect()
    }

    /// The snapshot to wrap `argv` with: made on first use of each shell binary, outside the
    /// sandbox, on a blocking thread (it runs the user's login shell, up to two timeouts).
    /// The session's snapshot of `shell` (made on first use, with the same trust checks as for
    /// the session's own commands), for a caller that runs that shell itself: the user-shell
    /// path of a server replays the same login environment.
    pub async fn shell_snapshot(&mut self, shell: &Path) -> Option<(SnapshotRef, Arc<Vec<u8>>)> {
        let argv = [
            shell.as_os_str().to_os_string(),
            "-lc".into(),
            OsString::new(),
        ];
        self.snapshot_for(&argv).await
    }

    async fn snapshot_for(&mut self, argv: &[OsString]) -> Option<(SnapshotRef, Arc<Vec<u8>>)> {
        if !self.opts.snapshots {
            return None;
        }
        let program = match argv {
            [shell, flag, _, ..] if flag.as_bytes() == b"-lc" => Path::new(shell),
            _ => return None,
        };
        ShellKind::from_path(program)?;
        let shell = match detect_shell(Some(program)) {
            Ok(shell) => shell,
            Err(e) => {
                tracing::info!("session: no snapshot: {e}");
                return None;
            }
        };
        if let Some(overlap) = writable_root_covering(self.opts.policy.as_ref(), self.dir.path()) {
            tracing::info!("session: no snapshot: the policy's writable root {overlap:?} covers the session directory");
            return None;
        }
        let capture_env = capture_env(&self.opts.snapshot_env).ok()?;
        let lookup = |k: &str| crate::snapshot::changed_env(&capture_env, k);
        if let Some((file, root)) =
            startup_files_under_writable_root(self.opts.policy.as_ref(), shell.kind, lookup)
        {
            tracing::info!("session: no snapshot for this command: startup file {file:?} lies in the writable root {root:?}");
            return None;
        }
        if !self.snapshots.contains_key(&shell.path) {
            self.generation += 1;
            let state = match self.make_snapshot(&shell).await {
                Ok((content, snapshot)) => SnapshotState::Ready { content, snapshot },
                Err(message) => {
                    tracing::info!("running without a shell snapshot: {message}");
                    SnapshotState::Failed
                }
            };
            self.snapshots.insert(shell.path.clone(), state);
        }
        match self.snapshots.get(&shell.path) {
            Some(SnapshotState::Ready { content, snapshot }) => {
                Some((snapshot.clone(), Arc::clone(content)))
            }
            _ => None,
        }
    }

    /// Makes the snapshot (confined by the session's helper, or the one [`Helper::locate`]
    /// finds) and keeps only its content: the file is deleted when `file` drops here, so
    /// nothing on disk is ever sourced again.
    async fn make_snapshot(&self, shell: &Shell) -> Result<(Arc<Vec<u8>>, SnapshotRef), String> {
        let mut options =
            SnapshotOptions::new(self.dir.path(), self.opts.id.clone(), self.generation)
                .timeout(self.opts.snapshot_timeout);
        if let Some(helper) = self.sandbox.helper() {
            options.helper = Some(helper.clone());
        }
        options.env = capture_env(&self.opts.snapshot_env).map_err(|e| e.to_string())?;
        let shell = shell.clone();
        let file = tokio::task::spawn_blocking(move || create_snapshot(&shell, &options))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        // Whatever earlier sessions left behind.
        if let Err(e) = spawn_cleanup(self.dir.path().to_path_buf(), DEFAULT_RETENTION) {
            tracing::info!("snapshot cleanup not started: {e}");
        }
        Ok((Arc::clone(file.content()), file.to_ref()))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Nothing useful can be done about a failure here; the directory is private debris.
        let _ = self.dir.remove_tree(&self.env_name);
    }
}

fn check_outside_writable(policy: Option<&SandboxPolicy>, dir: &Path) -> Result<(), SessionError> {
    match writable_root_covering(policy, dir) {
        Some(root) => Err(SessionError::InsideWritableRoot {
            dir: dir.to_path_buf(),
            root,
        }),
        None => Ok(()),
    }
}

/// One script for shells of `kind` that evaluates each of `scripts` in turn, each as its own
/// `eval` so that a syntax error in one spares the others, and a failing one does not stop the
/// rest. dash needs `command eval` for that (a syntax error in the special builtin would end
/// the sourced file); zsh has no such rule and no `command eval`, so it gets `builtin eval`.
pub fn env_bundle(kind: ShellKind, scripts: &[Vec<u8>]) -> Vec<u8> {
    let eval: &[u8] = match kind {
        ShellKind::Bash | ShellKind::Zsh => b"\\builtin eval ",
        ShellKind::Sh => b"\\command eval ",
    };
    let mut out = Vec::new();
    for script in scripts {
        out.extend_from_slice(eval);
        push_quoted(&mut out, script);
        out.extend_from_slice(b" || :\n");
    }
    out
}

/// The environment changes that make the capture shell see what `env` gives a command: every
/// variable it removes is removed, every one it sets is set.
pub fn capture_env(
    env: &EnvPolicy,
) -> Result<Vec<(OsString, Option<OsString>)>, crate::exec::env::EnvError> {
    let prepared = env.prepare_from_process()?;
    let mut changes: Vec<(OsString, Option<OsString>)> = Vec::new();
    if env.base == crate::exec::EnvBase::Empty {
        changes.extend(std::env::vars_os().map(|(k, _)| (k, None)));
    }
    changes.extend(prepared.dropped.into_iter().map(|n| (n.into(), None)));
    changes.extend(prepared.vars.into_iter().map(|(k, v)| (k, Some(v))));
    Ok(changes)
}

/// Replaces `exec.argv` with the wrapper `rw` makes of it, keeping the original as
/// `reported_argv` (all that classification and approvals see), and passes `snapshot` (and
/// `env_scripts`, see [`env_bundle`]) to the command as sealed memfds at [`SNAPSHOT_FD`] and
/// [`ENV_FD`]: the command reads exactly these bytes, and no file it could write. Returns
/// `Ok(false)`, changing nothing, when `rw` does not wrap this argv (not `SHELL -lc`, or a
/// snapshot of another shell).
pub fn wrap_with_snapshot(
    exec: &mut ExecRequest,
    rw: &RewriteOptions,
    snapshot: &[u8],
    env_scripts: Option<&[u8]>,
) -> io::Result<bool> {
    let mut rw = rw.clone();
    rw.env_scripts = env_scripts.is_some();
    let wrapped = rewrite_argv(&exec.argv, &rw);
    if wrapped == exec.argv {
        return Ok(false);
    }
    let snapshot_fd = sealed_memfd("cordon-snapshot", snapshot)?;
    let env_fd = env_scripts
        .map(|content| sealed_memfd("cordon-env", content))
        .transpose()?;
    exec.pass_fds.push(crate::exec::PassFd {
        fd: Arc::new(snapshot_fd),
        target: SNAPSHOT_FD,
    });
    if let Some(fd) = env_fd {
        exec.pass_fds.push(crate::exec::PassFd {
            fd: Arc::new(fd),
            target: ENV_FD,
        });
    }
    exec.reported_argv = Some(std::mem::replace(&mut exec.argv, wrapped));
    Ok(true)
}

/// A pipe for the cwd report: the parent's read end (non-blocking) and the shared write end.
fn report_pipe() -> io::Result<(File, Arc<OwnedFd>)> {
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    // Only our end is non-blocking: the flag lives on the open file description, and the
    // command's end must behave like any pipe.
    let flags = nix::fcntl::fcntl(read.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map_err(io::Error::from)?;
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(read.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))
        .map_err(io::Error::from)?;
    Ok((File::from(read), Arc::new(write)))
}

/// Reads what is in the pipe now, up to end of file or "would block".
fn read_available(file: &mut File, into: &mut Vec<u8>) -> io::Result<()> {
    let mut buf = [0u8; 4096];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => into.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The last complete, non-empty line (a report always ends with a newline; an unterminated
/// tail is a report cut short by a kill).
fn last_line(bytes: &[u8]) -> Option<&[u8]> {
    let complete = &bytes[..bytes.iter().rposition(|b| *b == b'\n')?];
    let line = match complete.iter().rposition(|b| *b == b'\n') {
        Some(i) => &complete[i + 1..],
        None => complete,
    };
    (!line.is_empty()).then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_last_line() {
        assert_eq!(last_line(b"/a\n/b\n"), Some(&b"/b"[..]));
        assert_eq!(last_line(b"/a\n"), Some(&b"/a"[..]));
        assert_eq!(last_line(b"/a\n/b"), Some(&b"/a"[..]));
        assert_eq!(last_line(b""), None);
        assert_eq!(last_line(b"\n"), None);
    }

    #[test]
    fn session_env_bundle_evaluates_each_script_alone() {
        let scripts = [b"export A='x'\n".to_vec(), b"if\n".to_vec()];
        assert_eq!(
            env_bundle(ShellKind::Bash, &scripts),
            b"\\builtin eval 'export A='\\''x'\\''\n' || :\n\\builtin eval 'if\n' || :\n".to_vec()
        );
        assert!(env_bundle(ShellKind::Sh, &scripts).starts_with(b"\\command eval "));
    }
}
