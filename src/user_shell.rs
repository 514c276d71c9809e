//! The user-shell path: a command the person typed (a `!ls` in an agent's UI), run on purpose
//! with their full access, and the record of it that goes into the model's history.
//!
//! Not the model's command, so nothing confines it: no helper, no policy, no network marker.
//! It is still an ordinary caller of the one supervisor ([`Sandbox::exec_streaming`]), so it
//! gets the same process-group kill, output caps, timeout and cancellation, and it can run
//! beside a sandboxed command of the same session without touching it (each run has its own
//! process group and pipes).
//!
//! - Always the person's login shell: `<shell> -lc <command>`, rewritten through the shell
//!   snapshot wrapper when one is given ([`UserShell::with_snapshot`]), with the runtime's own
//!   `PATH` entries ahead of the snapshot's.
//! - The environment is the caller's (credentials included: it is the person's own command)
//!   minus the `CORDON_SANDBOX*` markers and minus every proxy variable ([`PROXY_VARS`]): a
//!   managed network points confined commands at cordon's proxy, which does not apply here.
//!   The person's own proxy, exported by their startup files, comes back through the login
//!   shell or the snapshot.
//! - No usable shell, or a cwd that is not an existing local directory: an error before any
//!   event is sent and anything starts.
//! - Events, in order: [`UserShellEvent::Begin`], [`UserShellEvent::OutputDelta`] per read,
//!   [`UserShellEvent::End`]. A non-zero exit is a normal end with that code; a spawn failure
//!   ends with exit code -1 and the error text; cancellation kills the process group and ends
//!   with -1 and [`ABORTED_BY_USER`].
//!
//! ```no_run
//! use cordon::user_shell::{history_record, UserShell, UserShellRequest};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let (tx, mut rx) = tokio::sync::mpsc::channel(64);
//! let request = UserShellRequest::new("call-1", "ls -la", "/home/me/project");
//! let end = UserShell::new().run(request, tx).await?;
//! while let Ok(event) = rx.try_recv() { /* show it */ }
//! let record = history_record("ls -la", &end, 10_000);
//! # Ok(()) }
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::exec::{
    EnvPolicy, ExecEvent, ExecRequest, ExecResult, Outcome, Sandbox, StdinSource, StreamKind,
};
use crate::session::wrap_with_snapshot;
use crate::snapshot::{detect_shell, RewriteOptions, ShellError, SnapshotRef, PROXY_VARS};

/// The text a cancelled run ends with.
pub const ABORTED_BY_USER: &str = "command aborted by user";

/// The exit code of a run that did not end by itself (spawn failure, cancellation).
pub const EXIT_NOT_RUN: i32 = -1;

/// Who asked for a command: reported in [`UserShellEvent::Begin`] so that a UI and the model's
/// history keep the person's commands apart from the model's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandSource {
    /// The person typed it; it ran with full access.
    UserShell,
}

/// Why a user-shell command could not start. Nothing ran, and no event was sent.
#[derive(Debug, thiserror::Error)]
pub enum UserShellError {
    /// No shell to run the command with.
    #[error("user shell: no usable local shell: {0}")]
    NoShell(#[from] ShellError),
    /// The shell named does not exist or cannot be executed.
    #[error("user shell: {0:?} is not an executable file")]
    ShellNotExecutable(PathBuf),
    /// The cwd is not an absolute path to an existing local directory.
    #[error("user shell: working directory {0:?} is not an existing local directory (give an absolute path on this machine)")]
    Cwd(PathBuf),
    /// The command contains a NUL byte, which no shell can be given.
    #[error("user shell: the command contains a NUL byte")]
    Nul,
}

/// One command the person typed.
#[derive(Debug, Clone)]
pub struct UserShellRequest {
    /// The caller's id for this command, repeated in every event.
    pub call_id: String,
    /// The command as typed; it is what the history records.
    pub command: String,
    /// Where it runs (absolute, an existing directory).
    pub cwd: PathBuf,
    /// The shell; `None` for the person's (`$SHELL`, then the passwd entry).
    pub shell: Option<PathBuf>,
    /// Extra variables (proxy variables among them are dropped, see the module docs).
    pub env: EnvPolicy,
    /// Overrides the runtime's default timeout.
    pub timeout: Option<Duration>,
    /// Overrides the runtime's default per-stream output cap.
    pub output_limit: Option<usize>,
    /// Cancels the run: the process group is killed.
    pub cancel: CancellationToken,
    /// Standard input (`/dev/null` unless set: an agent's UI has no terminal to give).
    pub stdin: StdinSource,
}

impl UserShellRequest {
    /// `command` in `cwd` with the person's shell and environment.
    pub fn new(
        call_id: impl Into<String>,
        command: impl Into<String>,
        cwd: impl Into<PathBuf>,
    ) -> UserShellRequest {
        UserShellRequest {
            call_id: call_id.into(),
            command: command.into(),
            cwd: cwd.into(),
            shell: None,
            env: EnvPolicy {
                drop_secrets: false,
                ..EnvPolicy::default()
            },
            timeout: None,
            output_limit: None,
            cancel: CancellationToken::new(),
            stdin: StdinSource::Null,
        }
    }

    /// Runs it with this shell.
    pub fn shell(mut self, shell: impl Into<PathBuf>) -> UserShellRequest {
        self.shell = Some(shell.into());
        self
    }

    /// Uses `token` to cancel it.
    pub fn cancel_token(mut self, token: CancellationToken) -> UserShellRequest {
        self.cancel = token;
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> UserShellRequest {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the per-stream output cap.
    pub fn output_limit(mut self, bytes: usize) -> UserShellRequest {
        self.output_limit = Some(bytes);
        self
    }
}

/// The parameters of a `user_shell` request as a server receives them (JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserShellParams {
    /// The caller's id for the command.
    pub call_id: String,
    /// The command as the person typed it.
    pub command: String,
    /// Where it runs: absent for the server's working directory, relative to it when relative.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The shell; absent for the person's own.
    #[serde(default)]
    pub shell: Option<PathBuf>,
    /// Timeout in milliseconds; absent for the runtime's default.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl UserShellParams {
    /// The request these parameters describe, with `cwd` taken from `base` when absent or
    /// relative (the cancellation token is the server's to keep).
    pub fn into_request(self, base: &Path) -> UserShellRequest {
        let cwd = match self.cwd {
            Some(dir) => base.join(dir),
            None => base.to_path_buf(),
        };
        let mut request = UserShellRequest::new(self.call_id, self.command, cwd);
        request.shell = self.shell;
        request.timeout = self.timeout_ms.map(Duration::from_millis);
        request
    }
}

/// How a user-shell command ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserShellEnd {
    /// The caller's id.
    pub call_id: String,
    /// The command's exit code (`128+N` for signal N, 124 for a timeout), or
    /// [`EXIT_NOT_RUN`] when it could not be spawned or was cancelled.
    pub exit_code: i32,
    /// Standard output (capped, head and tail).
    pub stdout: String,
    /// Standard error (capped), or the spawn error, or [`ABORTED_BY_USER`] at its end.
    pub stderr: String,
    /// Both streams in the order they were read (capped), with the same additions as `stderr`.
    pub aggregated: String,
    /// How long it ran.
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
}

fn lossy_text<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(bytes))
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// What a user-shell run reports, in this order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum UserShellEvent {
    /// Before the process is spawned.
    Begin {
        /// The caller's id.
        call_id: String,
        /// The command line derived from the typed command (`<shell> -lc <command>`), never
        /// the snapshot wrapper.
        argv: Vec<String>,
        /// Where it runs.
        cwd: PathBuf,
        /// Always [`CommandSource::UserShell`].
        source: CommandSource,
    },
    /// Output as it was read.
    OutputDelta {
        /// The caller's id.
        call_id: String,
        /// Which stream.
        stream: StreamKind,
        /// The bytes of one read (as text, invalid UTF-8 replaced, when serialised).
        #[serde(serialize_with = "lossy_text")]
        chunk: Vec<u8>,
    },
    /// The run is over; always the last event.
    End(UserShellEnd),
}

/// Runs user-shell commands; cheap to clone, one per agent session.
#[derive(Debug, Clone)]
pub struct UserShell {
    runtime: Sandbox,
    snapshot: Option<(SnapshotRef, Arc<Vec<u8>>)>,
    path_prepend: Vec<PathBuf>,
}

impl Default for UserShell {
    fn default() -> UserShell {
        UserShell::new()
    }
}

impl UserShell {
    /// A runner with no helper (it can only run unconfined) and no snapshot.
    pub fn new() -> UserShell {
        UserShell::with_runtime(Sandbox::without_helper())
    }

    /// A runner using `runtime`'s timeout, output cap and grace (its helper is never used).
    pub fn with_runtime(runtime: Sandbox) -> UserShell {
        UserShell {
            runtime,
            snapshot: None,
            path_prepend: Vec::new(),
        }
    }

    /// Wraps commands of the snapshot's shell kind with it (content as made by
    /// [`crate::snapshot::create_snapshot`] or [`crate::snapshot::cached_snapshot`]).
    pub fn with_snapshot(mut self, snapshot: SnapshotRef, content: Arc<Vec<u8>>) -> UserShell {
        self.snapshot = Some((snapshot, content));
        self
    }

    /// The runtime's own `PATH` entries, put ahead of the snapshot's.
    pub fn with_path_prepend(mut self, entries: Vec<PathBuf>) -> UserShell {
        self.path_prepend = entries;
        self
    }

    /// The request the supervisor runs, and the derived argv: everything that can refuse the
    /// command is checked here, before anything starts.
    pub fn prepare(
        &self,
        request: &UserShellRequest,
    ) -> Result<(ExecRequest, Vec<OsString>), UserShellError> {
        if request.command.contains('\0') {
            return Err(UserShellError::Nul);
        }
        let shell = detect_shell(request.shell.as_deref())?;
        if !is_executable_file(&shell.path) {
            return Err(UserShellError::ShellNotExecutable(shell.path));
        }
        if !request.cwd.is_absolute() || !request.cwd.is_dir() {
            return Err(UserShellError::Cwd(request.cwd.clone()));
        }
        let argv: Vec<OsString> = vec![
            shell.path.clone().into(),
            "-lc".into(),
            request.command.clone().into(),
        ];
        let mut exec = ExecRequest::unsandboxed(argv.clone(), &request.cwd)
            .env(full_access_env(&request.env))
            .lossless_events(true)
            .cancel_token(request.cancel.clone());
        exec.timeout = request.timeout;
        exec.output_limit = request.output_limit;
        exec.stdin = request.stdin.clone();
        if let Some((snapshot, content)) = &self.snapshot {
            let mut rw = RewriteOptions::new(snapshot.clone());
            rw.keep_overrides(exec.env.set.keys());
            rw.path_prepend = self.path_prepend.clone();
            if let Err(e) = wrap_with_snapshot(&mut exec, &rw, content, None) {
                // The login shell reads its startup files itself: slower, same result.
                tracing::info!("user shell: running without the snapshot: {e}");
            }
        }
        Ok((exec, argv))
    }

    /// Runs `request`, sending its events to `events` (a receiver that is gone loses them,
    /// the run goes on) and returning how it ended. `Err` only when it could not start.
    pub async fn run(
        &self,
        request: UserShellRequest,
        events: mpsc::Sender<UserShellEvent>,
    ) -> Result<UserShellEnd, UserShellError> {
        let (exec, argv) = self.prepare(&request)?;
        let call_id = request.call_id.clone();
        let _ = events
            .send(UserShellEvent::Begin {
                call_id: call_id.clone(),
                argv: argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                cwd: request.cwd.clone(),
                source: CommandSource::UserShell,
            })
            .await;
        let mut stream = self.runtime.exec_streaming(exec);
        let mut result = None;
        while let Some(event) = stream.recv().await {
            match event {
                ExecEvent::Started { .. } => {}
                ExecEvent::Output { stream, bytes } => {
                    let _ = events
                        .send(UserShellEvent::OutputDelta {
                            call_id: call_id.clone(),
                            stream,
                            chunk: bytes,
                        })
                        .await;
                }
                ExecEvent::Finished(finished) => result = Some(*finished),
                // Unsandboxed: nothing is denied.
                ExecEvent::Denied(_) => {}
            }
        }
        let end = match result {
            Some(result) => end_of(call_id, &result),
            None => UserShellEnd {
                call_id,
                exit_code: EXIT_NOT_RUN,
                stdout: String::new(),
                stderr: "the runtime ended without a result".into(),
                aggregated: "the runtime ended without a result".into(),
                duration: Duration::ZERO,
            },
        };
        let _ = events.send(UserShellEvent::End(end.clone())).await;
        Ok(end)
    }
}

/// The environment of a person's own command: theirs, without cordon's markers (dropped by
/// [`EnvPolicy`] itself) and without proxy variables (see the module docs).
fn full_access_env(requested: &EnvPolicy) -> EnvPolicy {
    let mut env = requested.clone();
    env.set.retain(|name, _| !is_proxy_var(name));
    let inherited = match requested.base {
        crate::exec::EnvBase::Inherit => std::env::vars_os()
            .filter(|(name, _)| is_proxy_var(name))
            .map(|(name, _)| name)
            .collect::<Vec<_>>(),
        crate::exec::EnvBase::Empty => Vec::new(),
    };
    if inherited.is_empty() {
        return env;
    }
    // EnvPolicy has no removal list: start empty and set what the caller's environment holds
    // minus the proxy variables, filtered as an inherited environment would be.
    let base = EnvPolicy {
        set: Default::default(),
        ..requested.clone()
    };
    let kept = base
        .prepare_from_process()
        .map(|p| p.vars)
        .unwrap_or_default();
    let mut set: std::collections::BTreeMap<OsString, OsString> = kept
        .into_iter()
        .filter(|(name, _)| !is_proxy_var(name))
        .collect();
    set.extend(env.set);
    EnvPolicy {
        base: crate::exec::EnvBase::Empty,
        set,
        ..env
    }
}

fn is_proxy_var(name: &std::ffi::OsStr) -> bool {
    PROXY_VARS.iter().any(|v| name == *v)
}

fn is_executable_file(path: &Path) -> bool {
    path.is_file() && nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// The end event of a finished run.
fn end_of(call_id: String, result: &ExecResult) -> UserShellEnd {
    let stdout = result.stdout.text();
    let mut stderr = result.stderr.text();
    let mut aggregated = result.output.text();
    let not_run = |text: String| (EXIT_NOT_RUN, text);
    let (exit_code, extra) = match &result.outcome {
        Outcome::Cancelled => not_run(ABORTED_BY_USER.to_owned()),
        Outcome::ExecError { message, .. } => not_run(format!(
            "cannot execute {}: {message}",
            result
                .argv
                .first()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
        )),
        Outcome::SetupError { message, .. } => not_run(message.clone()),
        Outcome::Rejected { reason } => not_run(reason.clone()),
        other => (other.exit_code(), String::new()),
    };
    if !extra.is_empty() {
        // After whatever the command printed before it was stopped.
        for text in [&mut stderr, &mut aggregated] {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&extra);
        }
    }
    UserShellEnd {
        call_id,
        exit_code,
        stdout,
        stderr,
        aggregated,
        duration: result.duration,
    }
}

/// The record of a user-shell command for the model's history: the command as typed (not the
/// derived argv), its exit code, its duration in seconds with four decimals, and its
/// aggregated output cut to `budget` bytes, head and tail, with one elision marker.
pub fn history_record(command: &str, end: &UserShellEnd, budget: usize) -> String {
    let output = truncate_middle(&end.aggregated, budget);
    // The record's own line break closes the output; a final newline of the output is it.
    let output = output.strip_suffix('\n').unwrap_or(&output);
    format!(
        "<user_shell_command>\n<command>\n{command}\n</command>\n<result>\nExit code: {}\nDuration: {:.4} seconds\nOutput:\n{output}\n</result>\n</user_shell_command>",
        end.exit_code,
        end.duration.as_secs_f64(),
    )
}

/// `text` cut to at most `budget` bytes of content, keeping the head and the tail around one
/// elision marker ([`crate::exec::capture::elision_marker`], the one capture uses). Text that
/// already holds a marker is cut around it and the marker's count grows: truncating again,
/// or truncating output the capture already capped, never adds a second marker.
pub fn truncate_middle(text: &str, budget: usize) -> String {
    // Without a marker the text is split in the middle, so that both cases keep the start
    // of a head and the end of a tail.
    let (head, prior, tail) = match find_marker(text) {
        Some((start, end, dropped)) => (&text[..start], dropped, &text[end..]),
        None => {
            let middle = floor_boundary(text, text.len() / 2);
            (&text[..middle], 0, &text[middle..])
        }
    };
    if head.len() + tail.len() <= budget {
        return text.to_owned();
    }
    // Half each, and what one side cannot use goes to the other.
    let keep_tail = (budget - (budget / 2).min(head.len())).min(tail.len());
    let keep_head = (budget - keep_tail).min(head.len());
    let kept_head = &head[..floor_boundary(head, keep_head)];
    let kept_tail = &tail[ceil_boundary(tail, tail.len() - keep_tail)..];
    let newly_dropped = head.len() + tail.len() - kept_head.len() - kept_tail.len();
    format!(
        "{kept_head}{}{kept_tail}",
        crate::exec::capture::elision_marker(prior + newly_dropped as u64)
    )
}

/// The first elision marker in `text`: its byte range and the count it states.
fn find_marker(text: &str) -> Option<(usize, usize, u64)> {
    const OPEN: &str = "\n[... cordon: ";
    const CLOSE: &str = " bytes elided ...]\n";
    let start = text.find(OPEN)?;
    let digits_start = start + OPEN.len();
    let digits_len = text[digits_start..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    let rest = &text[digits_start + digits_len..];
    if digits_len == 0 || !rest.starts_with(CLOSE) {
        return None;
    }
    let dropped = text[digits_start..digits_start + digits_len].parse().ok()?;
    Some((start, digits_start + digits_len + CLOSE.len(), dropped))
}

fn floor_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    fn markers(text: &str) -> usize {
        text.matches(" bytes elided ...]").count()
    }

    #[test]
    fn user_shell_truncate_keeps_head_and_tail_once() {
        let text = "0123456789abcdefghij";
        assert_eq!(truncate_middle(text, 20), text);
        let once = truncate_middle(text, 8);
        assert_eq!(once, "0123\n[... cordon: 12 bytes elided ...]\nghij");
        // Again, smaller: one marker, and it counts everything dropped so far.
        let twice = truncate_middle(&once, 4);
        assert_eq!(twice, "01\n[... cordon: 16 bytes elided ...]\nij");
        assert_eq!(markers(&twice), 1);
        // Again, larger than what is left: unchanged.
        assert_eq!(truncate_middle(&twice, 100), twice);
    }

    #[test]
    fn user_shell_truncate_of_capped_output_moves_room_to_the_longer_side() {
        // A capture marker right after a short head.
        let capped = "ab\n[... cordon: 100 bytes elided ...]\n0123456789";
        assert_eq!(
            truncate_middle(capped, 6),
            "ab\n[... cordon: 106 bytes elided ...]\n6789"
        );
    }

    #[test]
    fn user_shell_truncate_respects_utf8() {
        let text = "ééééé"; // 10 bytes
        let cut = truncate_middle(text, 5);
        assert_eq!(cut, "é\n[... cordon: 6 bytes elided ...]\né");
    }

    #[test]
    fn user_shell_params_from_json() {
        let params: UserShellParams = serde_json::from_str(
            r#"{"call_id":"c","command":"ls","cwd":"/w","shell":"/bin/zsh","timeout_ms":1500}"#,
        )
        .expect("params");
        let request = params.into_request(Path::new("/base"));
        assert_eq!(
            (
                request.call_id.as_str(),
                request.command.as_str(),
                request.cwd.as_path()
            ),
            ("c", "ls", Path::new("/w"))
        );
        assert_eq!(request.shell.as_deref(), Some(Path::new("/bin/zsh")));
        assert_eq!(request.timeout, Some(Duration::from_millis(1500)));
        assert!(!request.env.drop_secrets);
        // Absent or relative: from the server's working directory.
        let params: UserShellParams =
            serde_json::from_str(r#"{"call_id":"c","command":"ls"}"#).expect("params");
        assert_eq!(
            params.into_request(Path::new("/base")).cwd,
            Path::new("/base")
        );
        let params: UserShellParams =
            serde_json::from_str(r#"{"call_id":"c","command":"ls","cwd":"sub"}"#).expect("params");
        assert_eq!(
            params.into_request(Path::new("/base")).cwd,
            Path::new("/base/sub")
        );
        assert!(serde_json::from_str::<UserShellParams>(
            r#"{"call_id":"c","command":"ls","cwd":"/w","x":1}"#
        )
        .is_err());
    }

    #[test]
    fn user_shell_history_record_layout() {
        let end = UserShellEnd {
            call_id: "c1".into(),
            exit_code: 3,
            stdout: String::new(),
            stderr: String::new(),
            aggregated: "0123456789abcdefghij".into(),
            duration: Duration::from_micros(1_234_567),
        };
        assert_eq!(
            history_record("ls | wc -l", &end, 8),
            "<user_shell_command>\n<command>\nls | wc -l\n</command>\n<result>\nExit code: 3\nDuration: 1.2346 seconds\nOutput:\n0123\n[... cordon: 12 bytes elided ...]\nghij\n</result>\n</user_shell_command>"
        );
    }
}
