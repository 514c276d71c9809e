//! Sessions: one-shot commands that carry state from one to the next the way a terminal does.
//!
//! Agents run every command as a fresh `<shell> -lc '<script>'`. A [`Session`] makes that feel
//! like one long-lived shell without keeping a shell alive:
//!
//! - **Startup state, fast.** The first `-lc` command for a shell makes a snapshot of what the
//!   user's login shell sets up (outside the sandbox, see [`crate::snapshot`]); every command
//!   is then rewritten to `<shell> -c <wrapper>` that sources it. The session holds its
//!   [`SessionLock`] for its whole life, so another process's stale cleanup never deletes a
//!   snapshot in use.
//! - **The working directory follows `cd`.** The wrapper reports `pwd -P` on a pipe passed
//!   through the helper ([`ExecRequest::pass_fds`], the helper's `--pass-fd`), so it works under
//!   a read-only profile too. The session adopts it for the next command when it is a directory
//!   that still exists, written in the lexical form of the workspace root it lies under (a root
//!   `/home/u/ws -> /data/ws` turns a reported `/data/ws/sub` into `/home/u/ws/sub`). A request
//!   with an explicit cwd neither uses nor changes the session's.
//! - **Environment scripts.** Files in [`Session::env_dir`] are sourced in byte order of their
//!   names after the snapshot and before the request's explicit variables, so a virtualenv
//!   activated there stays active; `$CORDON_ENV_FILE`, when set, is sourced last.
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
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cordon_sandbox::SandboxPolicy;
use tokio_util::sync::CancellationToken;

use crate::exec::{EnvPolicy, ExecRequest, ExecResult, Sandbox, StdinSource};
use crate::orchestrator::{Approver, OrchestratedRun, Orchestrator};
use crate::snapshot::{
    create_snapshot, detect_shell, readable_root_needed, rewrite_argv, spawn_cleanup,
    InvalidSessionId, ReportFd, RewriteOptions, SessionId, SessionLock, Shell, ShellKind,
    SnapshotFile, SnapshotOptions, DEFAULT_RETENTION,
};

/// The descriptor the wrapper reports the final working directory on. High in dash's 3..=9
/// range, because scripts that open descriptors of their own usually start at 3.
pub const REPORT_FD: u8 = 9;

/// Why a session could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The snapshot directory could not be created or resolved.
    #[error("session: cannot prepare directory {path:?}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The session lock could not be taken.
    #[error("session: cannot lock {path:?}: {source}")]
    Lock {
        /// The lock file's directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The session id is not usable as a file name.
    #[error(transparent)]
    Id(#[from] InvalidSessionId),
}

/// How a session is set up.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Directory for snapshots, the session lock and the `env/` directory (created 0700).
    /// Sessions and stale cleanup may share it.
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

/// What the session knows about the snapshot of one shell binary.
#[derive(Debug)]
enum SnapshotState {
    Ready(SnapshotFile),
    /// Making it failed once; the session runs that shell's commands unchanged from then on
    /// rather than paying for a failing capture on every command.
    Failed,
}

/// A session: see the module docs.
#[derive(Debug)]
pub struct Session {
    sandbox: Sandbox,
    opts: SessionOptions,
    /// `opts.dir`, canonical, for comparing with the policy's roots.
    dir: PathBuf,
    env_dir: PathBuf,
    cwd: PathBuf,
    /// (lexical, canonical) pairs, longest canonical first.
    roots: Vec<(PathBuf, PathBuf)>,
    snapshots: HashMap<PathBuf, SnapshotState>,
    generation: u64,
    // Declared last: dropped after the snapshot files, so cleanup cannot race their deletion.
    _lock: SessionLock,
}

impl Session {
    /// Creates the directory (0700) and the session's `env/` directory, and takes the session
    /// lock. Snapshots are made later, on first use.
    pub fn new(sandbox: Sandbox, opts: SessionOptions) -> Result<Session, SessionError> {
        let dir_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SessionError::Dir { path, source }
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&opts.dir)
            .map_err(dir_error(&opts.dir))?;
        let dir = std::fs::canonicalize(&opts.dir).map_err(dir_error(&opts.dir))?;
        let lock = SessionLock::acquire(&dir, &opts.id).map_err(|source| SessionError::Lock {
            path: dir.clone(),
            source,
        })?;
        // A directory: stale cleanup never removes directories, so this one is removed on
        // drop (a crashed session leaves it behind).
        let env_dir = dir.join(format!("{}.env", opts.id.as_str()));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&env_dir)
            .map_err(dir_error(&env_dir))?;
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
            env_dir,
            roots,
            snapshots: HashMap::new(),
            generation: 0,
            _lock: lock,
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

    /// The policy commands run under (before the snapshot directory is added to it).
    pub fn policy(&self) -> Option<&SandboxPolicy> {
        self.opts.policy.as_ref()
    }

    /// Replaces the policy for later commands.
    pub fn set_policy(&mut self, policy: Option<SandboxPolicy>) {
        self.opts.policy = policy;
    }

    /// The snapshot in use for `shell`, if one was made.
    pub fn snapshot_path(&self, shell: &Path) -> Option<&Path> {
        match self.snapshots.get(shell) {
            Some(SnapshotState::Ready(file)) => Some(file.path()),
            _ => None,
        }
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
        let mut report = None;
        if let Some(snapshot) = snapshot {
            let mut rw = RewriteOptions::new(snapshot);
            rw.keep_overrides(request.env.set.keys());
            rw.env_dir = Some(self.env_dir.clone());
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
            if wrap_with_snapshot(&mut exec, &rw, &self.dir) {
                if let Some((read, write)) = pipe {
                    exec = exec.pass_fd(write, i32::from(REPORT_FD));
                    report = Some(read);
                }
            }
        }
        Prepared {
            request: exec,
            report: CwdReport(report),
        }
    }

    /// Adopts the working directory a prepared command reported, when it is a directory that
    /// still exists. Call after the command finished.
    pub fn finish(&mut self, report: CwdReport) {
        let Some(mut report) = report.0 else {
            return;
        };
        let mut bytes = Vec::new();
        // Non-blocking: the report was written before the command exited, and a background
        // process that inherited the write end must not make us wait.
        if let Err(e) = read_available(&mut report, &mut bytes) {
            tracing::info!("session: cannot read the cwd report: {e}");
            return;
        }
        let Some(reported) = last_line(&bytes) else {
            return;
        };
        let reported = PathBuf::from(OsString::from_vec(reported.to_vec()));
        if reported.is_absolute() && reported.is_dir() {
            self.cwd = self.lexical(&reported);
        }
    }

    /// `path` (physical, from `pwd -P`) under the lexical form of the deepest workspace root
    /// whose target contains it.
    fn lexical(&self, path: &Path) -> PathBuf {
        for (lexical, canonical) in &self.roots {
            if let Ok(rest) = path.strip_prefix(canonical) {
                return if rest.as_os_str().is_empty() {
                    lexical.clone()
                } else {
                    lexical.join(rest)
                };
            }
        }
        path.to_path_buf()
    }

    /// The snapshot to wrap `argv` with: made on first use of each shell binary, outside the
    /// sandbox, on a blocking thread (it runs the user's login shell, up to two timeouts).
    async fn snapshot_for(&mut self, argv: &[OsString]) -> Option<crate::snapshot::SnapshotRef> {
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
        if !self.snapshots.contains_key(&shell.path) {
            self.generation += 1;
            let state = match self.make_snapshot(&shell).await {
                Ok(file) => SnapshotState::Ready(file),
                Err(message) => {
                    tracing::info!("running without a shell snapshot: {message}");
                    SnapshotState::Failed
                }
            };
            self.snapshots.insert(shell.path.clone(), state);
        }
        match self.snapshots.get(&shell.path) {
            Some(SnapshotState::Ready(file)) => {
                // Last use, for other processes' retention-based cleanup.
                let _ = file.touch();
                Some(file.to_ref())
            }
            _ => None,
        }
    }

    async fn make_snapshot(&self, shell: &Shell) -> Result<SnapshotFile, String> {
        let mut options = SnapshotOptions::new(&self.dir, self.opts.id.clone(), self.generation)
            .timeout(self.opts.snapshot_timeout);
        options.env = capture_env(&self.opts.snapshot_env).map_err(|e| e.to_string())?;
        let shell = shell.clone();
        let file = tokio::task::spawn_blocking(move || create_snapshot(&shell, &options))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        // Whatever earlier sessions left behind; never this one (it holds its lock).
        if let Err(e) = spawn_cleanup(self.dir.clone(), DEFAULT_RETENTION) {
            tracing::info!("snapshot cleanup not started: {e}");
        }
        Ok(file)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Nothing useful can be done about a failure here; the directory is private debris.
        let _ = std::fs::remove_dir_all(&self.env_dir);
    }
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

/// Adds `dir` (canonical) to `policy`'s readable roots unless a readable or writable root
/// already covers it, so that the wrapper can source the snapshot inside the sandbox.
/// Replaces `exec.argv` with the wrapper `rw` makes of it, keeping the original as
/// `reported_argv` (all that classification and approvals see) and making `snapshot_dir`
/// readable under the policy. Returns false, changing nothing, when `rw` does not wrap this
/// argv (not `SHELL -lc`, or a snapshot of another shell).
pub fn wrap_with_snapshot(
    exec: &mut ExecRequest,
    rw: &RewriteOptions,
    snapshot_dir: &Path,
) -> bool {
    let wrapped = rewrite_argv(&exec.argv, rw);
    if wrapped == exec.argv {
        return false;
    }
    if let Some(policy) = exec.policy.as_mut() {
        add_readable_root(policy, snapshot_dir);
    }
    exec.reported_argv = Some(std::mem::replace(&mut exec.argv, wrapped));
    true
}

pub fn add_readable_root(policy: &mut SandboxPolicy, dir: &Path) {
    let fs = &policy.filesystem;
    let covered: Vec<PathBuf> = fs.read.iter().chain(&fs.write).cloned().collect();
    if let Some(root) = readable_root_needed(&covered, dir) {
        policy.filesystem.read.push(root);
    }
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
    fn session_readable_root_added_once() {
        let mut policy = SandboxPolicy::from_json(
            r#"{"version":1,"filesystem":{"read":["/usr"],"write":["/w"]},
                "network":{"mode":"denied"},
                "enforcement":{"missing_layer":"refuse","carve_outs":"report"}}"#,
        )
        .unwrap();
        add_readable_root(&mut policy, Path::new("/w/snaps"));
        assert_eq!(policy.filesystem.read, [PathBuf::from("/usr")]);
        add_readable_root(&mut policy, Path::new("/h/.cache/s"));
        assert_eq!(
            policy.filesystem.read,
            [PathBuf::from("/usr"), PathBuf::from("/h/.cache/s")]
        );
    }
}
