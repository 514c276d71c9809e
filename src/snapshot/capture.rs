//! Making a snapshot: run the login shell once, keep what it set up, check it, install it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cordon_sandbox::policy::{
    EnforcementPolicy, FilesystemPolicy, NetworkMode, NetworkPolicy, UnixSockets, POLICY_VERSION,
};
use cordon_sandbox::SandboxPolicy;

use super::quote::{is_identifier, push_quoted};
use super::run::{run, RunError};
use super::shell::{Shell, ShellKind};
use super::trust::{sealed_memfd, PrivateDir, TrustError};
use super::{SessionId, SnapshotRef, MARKER_LINE, SNAPSHOT_FD};
use crate::helper::{Helper, PassFd, StatusPipe};

/// Default limit for each shell the snapshot runs (capture, then validation).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default cap on what the capture shell may print. Real snapshots with bash-completion loaded
/// are a few MiB; anything far beyond that is a runaway startup file.
pub const DEFAULT_MAX_OUTPUT: usize = 64 * 1024 * 1024;

/// Exported variables that are never written to a snapshot: the shell maintains them itself
/// (`PWD`, `SHLVL`, ...) or the sandbox sets them per command (the markers), so a frozen copy
/// would be wrong. `BASHOPTS`/`SHELLOPTS` are read-only in bash. `CORDON_ENV_FILE` is read
/// by the wrapper after the snapshot is sourced, so a frozen copy would shadow the run-time one.
pub const EXCLUDED_EXPORTS: &[&str] = &[
    "CORDON_ENV_FILE",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    cordon_sandbox::policy::MARKER_SANDBOX,
    cordon_sandbox::policy::MARKER_NETWORK_DISABLED,
    "BASHOPTS",
    "SHELLOPTS",
];

/// Options that describe how this particular shell was started (or that cannot be changed
/// after start-up), so replaying them would be wrong or fail.
const EXCLUDED_OPTIONS: &[&str] = &[
    // bash `set -o` / dash
    "interactive",
    "stdin",
    "monitor",
    "history",
    "noexec",
    "onecmd",
    "privileged",
    "emacs",
    "vi",
    // bash `shopt`
    "login_shell",
    "restricted_shell",
    // zsh
    "login",
    "shinstdin",
    "zle",
    "restricted",
    "singlecommand",
];

/// How a snapshot is made.
#[derive(Debug, Clone)]
pub struct SnapshotOptions {
    /// Directory that holds snapshots (created 0700 if missing).
    pub dir: PathBuf,
    /// The session the snapshot belongs to.
    pub session: SessionId,
    /// Distinguishes successive snapshots of one session (e.g. after a `.bashrc` edit).
    pub generation: u64,
    /// Limit for each shell run; at the limit its process group is killed.
    pub timeout: Duration,
    /// Cap on the capture shell's output.
    pub max_output: usize,
    /// Environment changes for the shells only (`None` removes the variable); the calling
    /// process's environment is never modified.
    pub env: Vec<(OsString, Option<OsString>)>,
    /// The helper that confines every shell the snapshot runs: read-only everywhere, network
    /// denied ([`capture_policy`]). The startup files may source anything, including a file a
    /// confined command wrote, so they never run with more than that. Set by
    /// [`SnapshotOptions::new`] from [`Helper::locate`]; without a helper no snapshot is made
    /// unless [`SnapshotOptions::unconfined_capture`] says otherwise.
    pub helper: Option<Helper>,
    /// Run the shells unconfined when there is no helper. Only for a caller that trusts every
    /// file the startup files read (and everything those source).
    pub unconfined_capture: bool,
}

impl SnapshotOptions {
    /// Options with the default timeout and output cap and the inherited environment.
    pub fn new(dir: impl Into<PathBuf>, session: SessionId, generation: u64) -> Self {
        SnapshotOptions {
            dir: dir.into(),
            session,
            generation,
            timeout: DEFAULT_TIMEOUT,
            max_output: DEFAULT_MAX_OUTPUT,
            env: Vec::new(),
            helper: Helper::locate().ok(),
            unconfined_capture: false,
        }
    }

    /// Sets the helper that confines the capture.
    pub fn helper(mut self, helper: Option<Helper>) -> Self {
        self.helper = helper;
        self
    }

    /// Sets a variable for the shells.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    /// Removes a variable for the shells.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env.push((key.into(), None));
        self
    }

    /// Sets the per-shell timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// Which step of making a snapshot failed. The caller then runs commands without a snapshot;
/// the temporary file, if any, has already been removed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The snapshot directory could not be created, or cannot be trusted.
    #[error("shell snapshot: could not prepare directory {path:?}: {source}")]
    PrepareDir {
        /// The snapshot directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: TrustError,
    },
    /// No helper was found to confine the capture, and unconfined capture was not allowed.
    #[error("shell snapshot: no sandbox helper to confine the capture shell (the startup files would run unconfined); set CORDON_HELPER")]
    NoHelper,
    /// The snapshot could not be handed to the checking shell.
    #[error("shell snapshot: could not pass the snapshot to the checking shell: {0}")]
    Memfd(#[source] io::Error),
    /// The login shell could not be run, timed out or printed too much.
    #[error("shell snapshot: capturing with {shell:?} failed: {source}")]
    Capture {
        /// The shell binary.
        shell: PathBuf,
        /// What went wrong.
        #[source]
        source: RunError,
    },
    /// The login shell ran but exited unsuccessfully.
    #[error("shell snapshot: capture shell {shell:?} exited with {status}; stderr: {stderr}")]
    CaptureStatus {
        /// The shell binary.
        shell: PathBuf,
        /// Its exit status.
        status: ExitStatus,
        /// The start of its stderr.
        stderr: String,
    },
    /// The output had no `# Snapshot file` marker, or was cut short after it (a startup file
    /// probably called `exit` or `exec`).
    #[error(
        "shell snapshot: output of {shell:?} lacks the `# Snapshot file` marker or its {section} \
         section (does a startup file exit or exec?); stderr: {stderr}"
    )]
    MissingMarker {
        /// The shell binary.
        shell: PathBuf,
        /// The missing part.
        section: &'static str,
        /// The start of its stderr.
        stderr: String,
    },
    /// The temporary file could not be written.
    #[error("shell snapshot: could not write temporary file {path:?}: {source}")]
    WriteTemp {
        /// The temporary file.
        path: PathBuf,
        /// The file-system error.
        #[source]
        source: io::Error,
    },
    /// The checking shell could not be run or timed out.
    #[error("shell snapshot: validating {path:?} failed: {source}")]
    Validate {
        /// The temporary file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: RunError,
    },
    /// Sourcing the snapshot with `set -e` failed.
    #[error(
        "shell snapshot: sourcing {path:?} with `set -e` exited with {status}; stderr: {stderr}"
    )]
    ValidateStatus {
        /// The temporary file.
        path: PathBuf,
        /// The checking shell's exit status.
        status: ExitStatus,
        /// The start of its stderr.
        stderr: String,
    },
    /// The checked file could not be renamed into place.
    #[error("shell snapshot: could not rename {from:?} to {to:?}: {source}")]
    Install {
        /// The temporary file.
        from: PathBuf,
        /// The final name.
        to: PathBuf,
        /// The file-system error.
        #[source]
        source: io::Error,
    },
}

impl SnapshotError {
    /// True when a shell was killed at the timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            SnapshotError::Capture {
                source: RunError::Timeout(_),
                ..
            } | SnapshotError::Validate {
                source: RunError::Timeout(_),
                ..
            }
        )
    }
}

/// A snapshot on disk, with the content that was written. It owns the file: dropping the
/// value deletes it (use [`SnapshotFile::keep`] to let it outlive the value).
#[derive(Debug)]
pub struct SnapshotFile {
    path: PathBuf,
    dir: Arc<PrivateDir>,
    name: String,
    content: Arc<Vec<u8>>,
    shell: Shell,
    session: SessionId,
    generation: u64,
    armed: bool,
}

impl SnapshotFile {
    /// The snapshot file, `<dir>/<session>.<generation>.sh`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was written to it, which is what commands source (from a sealed memfd, never
    /// from the file).
    pub fn content(&self) -> &Arc<Vec<u8>> {
        &self.content
    }

    /// The shell it was made with.
    pub fn shell(&self) -> &Shell {
        &self.shell
    }

    /// Its session.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// Its generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// What [`rewrite_argv`](super::rewrite_argv) needs to use this snapshot.
    pub fn to_ref(&self) -> SnapshotRef {
        SnapshotRef {
            path: self.path.clone(),
            kind: self.shell.kind,
        }
    }

    /// Records a use: stale cleanup measures "last use" by the file's mtime.
    pub fn touch(&self) -> io::Result<()> {
        self.dir.touch(&self.name)
    }

    /// Gives up ownership: the file stays on disk and its path is returned.
    pub fn keep(mut self) -> PathBuf {
        self.armed = false;
        std::mem::take(&mut self.path)
    }
}

impl Drop for SnapshotFile {
    fn drop(&mut self) {
        if self.armed {
            // Nothing useful can be done about a failure in Drop; stale cleanup will retry.
            let _ = self.dir.unlink(&self.name);
        }
    }
}

/// The policy every shell of a capture runs under: everything readable, nothing writable but
/// the helper's device allow-list, no network, no unix sockets outside, and a refusal rather
/// than a weaker run on a kernel that cannot enforce it.
pub fn capture_policy() -> SandboxPolicy {
    SandboxPolicy {
        version: POLICY_VERSION,
        filesystem: FilesystemPolicy {
            read: vec![PathBuf::from("/")],
            ..FilesystemPolicy::default()
        },
        network: NetworkPolicy {
            mode: NetworkMode::Denied,
            unix_sockets: UnixSockets::Deny,
            tcp_connect: None,
            tcp_bind: None,
            ..NetworkPolicy::default()
        },
        enforcement: EnforcementPolicy::STRICT,
        markers: None,
    }
}

/// What must stay open until a capture shell has been spawned: the helper's status pipe, or
/// (unconfined) the copies of passed descriptors. Dropped after the run.
#[derive(Debug)]
enum SpawnGuard {
    Helper { _status: StatusPipe },
    Copies { _copies: Vec<OwnedFd> },
}

/// A shell command for the capture, confined by `opts.helper` under [`capture_policy`], with
/// `pass` at their target numbers.
fn shell_command(
    shell: &Shell,
    opts: &SnapshotOptions,
    args: &[OsString],
    pass: &[PassFd],
) -> Result<(Command, SpawnGuard), SnapshotError> {
    let spawn_error = |e: String| SnapshotError::Capture {
        shell: shell.path.clone(),
        source: RunError::Spawn(io::Error::other(e)),
    };
    let (mut cmd, guard) = match &opts.helper {
        Some(helper) => {
            let mut argv = vec![shell.path.clone().into_os_string()];
            argv.extend(args.iter().cloned());
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
            let launch = helper
                .command_with_fds(&capture_policy(), &cwd, &argv, pass)
                .map_err(|e| spawn_error(e.to_string()))?;
            (
                launch.command,
                SpawnGuard::Helper {
                    _status: launch.status,
                },
            )
        }
        None if opts.unconfined_capture => {
            let mut cmd = Command::new(&shell.path);
            cmd.args(args);
            let floor = crate::helper::fd_floor(pass).map_err(|e| spawn_error(e.to_string()))?;
            let copies = crate::helper::install_passed_fds(&mut cmd, pass, floor)
                .map_err(|e| spawn_error(e.to_string()))?;
            (cmd, SpawnGuard::Copies { _copies: copies })
        }
        None => return Err(SnapshotError::NoHelper),
    };
    apply_env(&mut cmd, &opts.env);
    Ok((cmd, guard))
}

/// Runs `shell` as a login shell, confined read-only without network (see
/// [`SnapshotOptions::helper`]), and installs what its startup files set up as
/// `<dir>/<session>.<generation>.sh`.
///
/// Steps: capture (`<shell> -lc <script>`, own session, stdin `/dev/null`, killed at
/// `opts.timeout`), keep what follows the marker, check it by sourcing it with `set -e` from a
/// sealed memfd in a non-login shell of the same kind, write it 0600 under a temporary name
/// in the directory (reached without following symlinks, see [`PrivateDir`]), rename it into
/// place.
pub fn create_snapshot(
    shell: &Shell,
    opts: &SnapshotOptions,
) -> Result<SnapshotFile, SnapshotError> {
    let dir = PrivateDir::open(&opts.dir, true).map_err(|source| SnapshotError::PrepareDir {
        path: opts.dir.clone(),
        source,
    })?;

    let nonce = unique_token();
    let separator = format!("#cordon-section-{nonce}");
    let args = [
        OsString::from("-lc"),
        OsString::from(capture_script(shell.kind, &separator)),
    ];
    let (mut cmd, guard) = shell_command(shell, opts, &args, &[])?;
    let out = run(&mut cmd, opts.timeout, opts.max_output);
    drop(guard);
    let out = out.map_err(|source| SnapshotError::Capture {
        shell: shell.path.clone(),
        source,
    })?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(SnapshotError::CaptureStatus {
            shell: shell.path.clone(),
            status: out.status,
            stderr,
        });
    }
    let sections = split_sections(&out.stdout, &separator).map_err(|section| {
        SnapshotError::MissingMarker {
            shell: shell.path.clone(),
            section,
            stderr: stderr.clone(),
        }
    })?;
    let defaults = default_options(shell, opts);
    let body = render(shell, &sections, defaults.as_deref(), &start_env(&opts.env));

    let tmp_name = format!("{}.tmp-{}", opts.session.as_str(), unique_token());
    let tmp = opts.dir.join(&tmp_name);
    validate(shell, &body, &tmp, opts)?;
    // No fsync: a snapshot is a cache that is rebuilt when missing, and the rename only needs
    // to be atomic with respect to other processes, not to a crash.
    dir.write_new(&tmp_name, &body).map_err(|source| {
        let _ = dir.unlink(&tmp_name);
        SnapshotError::WriteTemp {
            path: tmp.clone(),
            source,
        }
    })?;
    let name = format!("{}.{}.sh", opts.session.as_str(), opts.generation);
    let dest = opts.dir.join(&name);
    dir.rename(&tmp_name, &name).map_err(|source| {
        let _ = dir.unlink(&tmp_name);
        SnapshotError::Install {
            from: tmp.clone(),
            to: dest.clone(),
            source,
        }
    })?;
    Ok(SnapshotFile {
        path: dest,
        dir: Arc::new(dir),
        name,
        content: Arc::new(body),
        shell: shell.clone(),
        session: opts.session.clone(),
        generation: opts.generation,
        armed: true,
    })
}

/// The environment the capture shell starts with: ours, changed as `apply_env` changes it.
fn start_env(changes: &[(OsString, Option<OsString>)]) -> HashMap<Vec<u8>, Vec<u8>> {
    let mut env: HashMap<Vec<u8>, Vec<u8>> = std::env::vars_os()
        .map(|(k, v)| (k.into_vec(), v.into_vec()))
        .collect();
    for (k, v) in changes {
        match v {
            Some(v) => env.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec()),
            None => env.remove(k.as_bytes()),
        };
    }
    env
}

fn apply_env(cmd: &mut Command, env: &[(OsString, Option<OsString>)]) {
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
}

/// Sources `body` with `set -e` in a non-login shell of the same kind, confined like the
/// capture, from a sealed memfd (the way commands will source it). `tmp` names the file the
/// body is about to be written to, for messages.
fn validate(
    shell: &Shell,
    body: &[u8],
    tmp: &Path,
    opts: &SnapshotOptions,
) -> Result<(), SnapshotError> {
    let memfd = sealed_memfd("cordon-snapshot-check", body).map_err(SnapshotError::Memfd)?;
    let pass = [PassFd {
        fd: Arc::new(memfd),
        target: SNAPSHOT_FD,
    }];
    let mut args: Vec<OsString> = match shell.kind {
        // --norc/--noprofile only matter for interactive shells; BASH_ENV is removed below.
        ShellKind::Bash => vec!["--norc".into(), "--noprofile".into()],
        // -f skips the user's .zshenv, which a non-interactive zsh would otherwise read.
        ShellKind::Zsh => vec!["-f".into()],
        ShellKind::Sh => Vec::new(),
    };
    args.push("-c".into());
    args.push(format!("set -e; . /proc/self/fd/{SNAPSHOT_FD}").into());
    let (mut cmd, guard) = shell_command(shell, opts, &args, &pass)?;
    // The check is about the file alone; startup hooks of a non-login shell must not run.
    cmd.env_remove("BASH_ENV").env_remove("ENV");
    let out = run(&mut cmd, opts.timeout, 1024 * 1024);
    drop(guard);
    let out = out.map_err(|source| SnapshotError::Validate {
        path: tmp.to_path_buf(),
        source,
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(SnapshotError::ValidateStatus {
            path: tmp.to_path_buf(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// A token unique among all snapshots this machine makes at the same time: pid, a process-wide
/// counter and the clock, hashed so that it has a fixed shape.
pub(crate) fn unique_token() -> String {
    use sha2::{Digest, Sha256};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = Sha256::new();
    h.update(std::process::id().to_le_bytes());
    h.update(n.to_le_bytes());
    h.update(t.to_le_bytes());
    let digest = h.finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The script the login shell runs. It prints the marker on a line of its own (after a
/// newline, in case the startup files left a line unfinished), then one section per kind of state,
/// each introduced by a separator line carrying a fresh nonce so that nothing a function body
/// contains can be mistaken for a section boundary. Every builtin is called through
/// `builtin`/`command` because the startup files may have replaced it with a function or alias.
fn capture_script(kind: ShellKind, sep: &str) -> String {
    let options = options_command(kind);
    let (b, load, functions, aliases) = match kind {
        ShellKind::Bash => (
            "\\builtin",
            // A non-interactive bash has already sourced $BASH_ENV itself.
            "if [ -z \"${BASH_ENV:-}\" ] && [ -r \"${HOME:-}/.bashrc\" ]; then . \"${HOME:-}/.bashrc\"; fi",
            "\\builtin declare -f",
            "\\builtin alias -p",
        ),
        ShellKind::Zsh => (
            "\\builtin",
            "if [ -r \"${ZDOTDIR:-${HOME:-}}/.zshrc\" ]; then . \"${ZDOTDIR:-${HOME:-}}/.zshrc\"; fi",
            "\\builtin typeset -f",
            "\\builtin alias -L; \\builtin alias -sL",
        ),
        ShellKind::Sh => (
            "\\command",
            "if [ -n \"${ENV:-}\" ] && [ -r \"$ENV\" ]; then . \"$ENV\"; fi",
            // dash cannot list functions at all; a bash or ksh running as sh can.
            "if \\command -v typeset >/dev/null 2>&1; then typeset -f; fi",
            "\\command alias",
        ),
    };
    format!(
        "{load}\n\
         {b} printf '\\n%s\\n' '{MARKER_LINE}'\n\
         {b} printf '%s\\n' '{sep} functions'\n\
         {functions}\n\
         {b} printf '%s\\n' '{sep} options'\n\
         {options}\n\
         {b} printf '%s\\n' '{sep} aliases'\n\
         {aliases}\n\
         {b} printf '%s\\n' '{sep} env'\n\
         \\command -p env -0\n"
    )
}

/// The shell command that lists every option with its state.
fn options_command(kind: ShellKind) -> &'static str {
    match kind {
        ShellKind::Bash => "\\builtin set +o; \\builtin shopt -p",
        ShellKind::Zsh => "for __cordon_o in ${(k)options}; do \\builtin print -r -- \"$__cordon_o ${options[$__cordon_o]}\"; done",
        ShellKind::Sh => "\\command set +o",
    }
}

/// The option states a fresh non-login `<shell> -c`, like the wrapper's, starts with in the
/// capture's environment; `None` when they cannot be listed (then every option is written).
fn default_options(shell: &Shell, opts: &SnapshotOptions) -> Option<Vec<u8>> {
    let args = [
        OsString::from("-c"),
        OsString::from(options_command(shell.kind)),
    ];
    let (mut cmd, guard) = shell_command(shell, opts, &args, &[]).ok()?;
    // Exported option lists would hand the capture's own state to the baseline.
    cmd.env_remove("SHELLOPTS").env_remove("BASHOPTS");
    let out = run(&mut cmd, opts.timeout, 1024 * 1024);
    drop(guard);
    let out = out.ok()?;
    out.status.success().then_some(out.stdout)
}

/// The captured state, split by section.
#[derive(Debug)]
struct Sections<'a> {
    functions: &'a [u8],
    options: &'a [u8],
    aliases: &'a [u8],
    env: &'a [u8],
}

/// Finds the marker (anything before it is startup noise) and the sections after it. The error
/// names the first part that is missing.
fn split_sections<'a>(out: &'a [u8], sep: &str) -> Result<Sections<'a>, &'static str> {
    let head = format!("{MARKER_LINE}\n{sep} functions\n");
    let start = match find(out, head.as_bytes()) {
        // The marker must start a line: noise without a trailing newline would otherwise glue
        // itself to it.
        Some(i) if i == 0 || out[i - 1] == b'\n' => i + head.len(),
        _ => return Err("marker"),
    };
    let rest = &out[start..];
    let mut parts = [&b""[..]; 3];
    let mut cursor = rest;
    for (i, name) in ["options", "aliases", "env"].into_iter().enumerate() {
        let line = format!("{sep} {name}\n");
        let at = find(cursor, line.as_bytes()).ok_or(name)?;
        parts[i] = &cursor[..at];
        cursor = &cursor[at + line.len()..];
    }
    Ok(Sections {
        functions: parts[0],
        options: parts[1],
        aliases: parts[2],
        env: cursor,
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The snapshot file: marker, `unalias -a`, functions, options, aliases, exports.
///
/// Options are written as on/off commands for every option whose state differs from
/// `default_options` (all of them when the defaults are unknown), not only the ones that are
/// on: an option turned *off* by a startup file (zsh's `setopt noclobber` clears `clobber`)
/// must be replayed too. Exports are written when the startup files set or changed them, i.e.
/// when they differ from `inherited`, the environment the capture shell started with; the
/// rest are left to whatever environment the command itself inherits, as `<shell> -lc` would.
/// Both keep the file short, which matters because it is sourced before every command.
fn render(
    shell: &Shell,
    s: &Sections<'_>,
    default_options: Option<&[u8]>,
    inherited: &HashMap<Vec<u8>, Vec<u8>>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.functions.len() + s.aliases.len() + s.env.len() + 1024);
    out.extend_from_slice(MARKER_LINE.as_bytes());
    out.extend_from_slice(b"\n# cordon shell snapshot (");
    out.extend_from_slice(shell.kind.name().as_bytes());
    out.extend_from_slice(b", ");
    out.extend_from_slice(shell.path.as_os_str().as_bytes());
    out.extend_from_slice(b"); generated, do not edit\n");
    // `|| :` because some shells complain when there is nothing to remove.
    out.extend_from_slice(b"unalias -a 2>/dev/null || :\n");

    out.extend_from_slice(s.functions);
    if !s.functions.is_empty() && !s.functions.ends_with(b"\n") {
        out.push(b'\n');
    }
    render_options(shell.kind, s.options, default_options, &mut out);
    render_aliases(shell.kind, s.aliases, &mut out);
    render_exports(s.env, inherited, &mut out);
    out
}

/// Writes the option commands, leaving out those that only restate `defaults` (the states a
/// fresh `<shell> -c` starts with, when known): sourcing costs bash about 20 µs per command,
/// and a full list is a hundred of them.
fn render_options(kind: ShellKind, raw: &[u8], defaults: Option<&[u8]>, out: &mut Vec<u8>) {
    let defaults: std::collections::HashSet<Vec<u8>> = defaults
        .map(|d| option_commands(kind, d).into_iter().collect())
        .unwrap_or_default();
    for command in option_commands(kind, raw) {
        if !defaults.contains(&command) {
            out.extend_from_slice(&command);
            out.push(b'\n');
        }
    }
}

/// One command per option line of the shell's listing (`set -o x`, `shopt -u y`,
/// `setopt z`), minus invalid names and [`EXCLUDED_OPTIONS`].
fn option_commands(kind: ShellKind, raw: &[u8]) -> Vec<Vec<u8>> {
    let mut commands = Vec::new();
    for line in raw.split(|b| *b == b'\n') {
        let line = trim_cr(line);
        let (prefix, name): (&[u8], &[u8]) = match kind {
            ShellKind::Zsh => {
                if let Some(n) = line.strip_suffix(b" on") {
                    (b"setopt ", n)
                } else if let Some(n) = line.strip_suffix(b" off") {
                    (b"unsetopt ", n)
                } else {
                    continue;
                }
            }
            ShellKind::Bash | ShellKind::Sh => {
                let Some(prefix) = [&b"set -o "[..], b"set +o ", b"shopt -s ", b"shopt -u "]
                    .into_iter()
                    .find(|p| line.starts_with(p))
                else {
                    continue;
                };
                (prefix, &line[prefix.len()..])
            }
        };
        let valid = !name.is_empty()
            && name
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
        if !valid || EXCLUDED_OPTIONS.iter().any(|x| x.as_bytes() == name) {
            continue;
        }
        commands.push([prefix, name].concat());
    }
    commands
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// bash and zsh print aliases as reusable `alias ...` commands. dash prints bare `name=value`
/// entries, one per line except that a quoted value may contain newlines, so entries are split
/// at unquoted newlines and given the `alias` command.
fn render_aliases(kind: ShellKind, raw: &[u8], out: &mut Vec<u8>) {
    if kind != ShellKind::Sh {
        out.extend_from_slice(raw);
        if !raw.is_empty() && !raw.ends_with(b"\n") {
            out.push(b'\n');
        }
        return;
    }
    for entry in split_unquoted_lines(raw) {
        if entry.is_empty() {
            continue;
        }
        if !entry.starts_with(b"alias ") {
            out.extend_from_slice(b"alias ");
        }
        out.extend_from_slice(entry);
        out.push(b'\n');
    }
}

/// Splits at newlines outside single and double quotes (dash quotes alias values with `'...'`
/// and `"'"` only; backslashes are honoured outside single quotes for other shells' forms).
fn split_unquoted_lines(raw: &[u8]) -> Vec<&[u8]> {
    let mut entries = Vec::new();
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut start = 0;
    for (i, &c) in raw.iter().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            b'\\' if !single => escaped = true,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'\n' if !single && !double => {
                entries.push(&raw[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < raw.len() {
        entries.push(&raw[start..]);
    }
    entries
}

/// Exports from `env -0`, minus names a shell cannot assign and the excluded names, each
/// quoted exactly (values keep newlines, quotes and non-UTF-8 bytes).
fn render_exports(env: &[u8], inherited: &HashMap<Vec<u8>, Vec<u8>>, out: &mut Vec<u8>) {
    for entry in env.split(|b| *b == 0) {
        let Some(eq) = entry.iter().position(|b| *b == b'=') else {
            continue;
        };
        let (name, value) = (&entry[..eq], &entry[eq + 1..]);
        if !is_identifier(name)
            || EXCLUDED_EXPORTS.iter().any(|x| x.as_bytes() == name)
            || inherited.get(name).is_some_and(|v| v == value)
        {
            continue;
        }
        out.extend_from_slice(b"export ");
        out.extend_from_slice(name);
        out.push(b'=');
        push_quoted(out, value);
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_sections_need_marker_and_all_parts() {
        let sep = "#cordon-section-x";
        let good = format!(
            "noise\n# Snapshot file\n{sep} functions\nf() {{ :; }}\n{sep} options\nset -o a\n\
             {sep} aliases\nalias x=y\n{sep} env\nA=1\0"
        );
        let s = split_sections(good.as_bytes(), sep).unwrap();
        assert_eq!(s.functions, b"f() { :; }\n");
        assert_eq!(s.options, b"set -o a\n");
        assert_eq!(s.aliases, b"alias x=y\n");
        assert_eq!(s.env, b"A=1\0");
        assert_eq!(split_sections(b"noise only\n", sep).unwrap_err(), "marker");
        let cut = format!("# Snapshot file\n{sep} functions\n{sep} options\n");
        assert_eq!(split_sections(cut.as_bytes(), sep).unwrap_err(), "aliases");
        let glued = format!("noise# Snapshot file\n{sep} functions\n");
        assert_eq!(split_sections(glued.as_bytes(), sep).unwrap_err(), "marker");
    }

    #[test]
    fn snapshot_dash_alias_entries() {
        let raw = b"q='it'\"'\"'s'\nnl='a\nb'\nll='ls -l'\n";
        let mut out = Vec::new();
        render_aliases(ShellKind::Sh, raw, &mut out);
        assert_eq!(
            out,
            b"alias q='it'\"'\"'s'\nalias nl='a\nb'\nalias ll='ls -l'\n".to_vec()
        );
    }

    #[test]
    fn snapshot_export_filtering() {
        let env = b"A=1\0PWD=/x\0BAD-NAME=2\0B=it's\nok\0CORDON_SANDBOX=1\0NOEQ\0C=same\0D=new\0";
        let mut out = Vec::new();
        // C is exactly as the capture shell inherited it; D was changed by a startup file.
        let inherited = HashMap::from([
            (b"C".to_vec(), b"same".to_vec()),
            (b"D".to_vec(), b"old".to_vec()),
        ]);
        render_exports(env, &inherited, &mut out);
        assert_eq!(
            out,
            b"export A='1'\nexport B='it'\\''s\nok'\nexport D='new'\n".to_vec()
        );
    }
}

/// Entry points for the fuzz targets (`fuzz/`), compiled only under `cargo fuzz`.
#[cfg(fuzzing)]
pub mod fuzzing {
    use super::*;

    /// What the capture shell's output becomes: the sections after the marker, rendered as a
    /// snapshot file with the exports filtered against `inherited`. `None` when the output has
    /// no complete set of sections.
    pub fn render_capture(
        kind: ShellKind,
        output: &[u8],
        sep: &str,
        inherited: &HashMap<Vec<u8>, Vec<u8>>,
    ) -> Option<Vec<u8>> {
        let sections = split_sections(output, sep).ok()?;
        let shell = Shell {
            path: PathBuf::from(kind.name()),
            kind,
        };
        Some(render(&shell, &sections, None, inherited))
    }

    /// The capture output of a shell whose startup files defined nothing but the environment
    /// `env` (NUL-separated `NAME=VALUE` entries, as `env -0` prints them).
    pub fn output_with_env(sep: &str, env: &[u8]) -> Vec<u8> {
        let mut out =
            format!("{MARKER_LINE}\n{sep} functions\n{sep} options\n{sep} aliases\n{sep} env\n")
                .into_bytes();
        out.extend_from_slice(env);
        out
    }
}
