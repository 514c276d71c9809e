//! Shell snapshots: run the user's login shell once, confined read-only without network, and
//! replay what its startup files set up in front of every command, instead of paying 100+ ms
//! for `<shell> -lc` each time.
//!
//! # Lifecycle
//!
//! 1. [`detect_shell`] picks the shell (request, `$SHELL`, passwd entry).
//! 2. [`create_snapshot`] runs `<shell> -lc <capture script>` through the helper under
//!    [`capture_policy`] (read-only, network denied: the startup files may source a file a
//!    confined command wrote), in its own session with a timeout. The script sources the
//!    interactive startup file (bash: `~/.bashrc` unless `BASH_ENV` is set; zsh:
//!    `${ZDOTDIR:-$HOME}/.zshrc`; sh: `$ENV`), prints the marker line `# Snapshot file`, then
//!    functions, option states, aliases and exports (only the options that differ from a fresh
//!    `<shell> -c` and the exports the startup files set or changed, because the file is
//!    sourced before every command). The result is checked by sourcing it with `set -e` from a
//!    sealed memfd in a confined non-login shell of the same kind, written to
//!    `<dir>/<session>.tmp-<unique>` (0600, in a 0700 directory reached without following
//!    symlinks, see [`PrivateDir`]) and renamed to `<dir>/<session>.<generation>.sh`. Any
//!    failure reports the step in a [`SnapshotError`]; the caller then simply runs commands
//!    without a snapshot.
//! 3. [`rewrite_argv`] turns `[shell, "-lc", script, args...]` into `[shell, "-c", wrapper]`.
//!    The wrapper saves the variables that must win (the sandbox markers, explicit overrides,
//!    and [`PROXY_VARS`] when the caller runs a proxy), sources the snapshot from
//!    `/proc/self/fd/`[`SNAPSHOT_FD`] and a session's `env/` scripts from [`ENV_FD`] (sealed
//!    memfds the caller passes, see [`crate::session::wrap_with_snapshot`]; never a file a
//!    command could write), then `$CORDON_ENV_FILE`, restores the saved variables, prepends
//!    the runtime's `PATH` entries and runs the script with `eval` in the same shell, so
//!    functions, aliases and options stay in effect. [`cached_snapshot`] is the command
//!    line's cache of such files, keyed on the shell and its startup files;
//!    [`crate::session::Session`] makes one per session and keeps it in memory.
//! 4. [`cleanup_stale`] (or [`spawn_cleanup`]) removes debris, entries cordon never makes
//!    (symlinks, files of another owner or mode), and old snapshots of sessions that no
//!    longer hold their [`SessionLock`].
//!
//! A run whose policy could write the cache ([`CacheUse::Bypass`]) or one of the startup files
//! ([`startup_files_under_writable_root`]) gets no snapshot, and after the former the cache is
//! purged ([`purge_cache`]): see the README's *What a confined command cannot plant*.
//!
//! What is not captured: dash has no way to list functions, so a snapshot made with dash has
//! none (bash or ksh running as `sh` do list theirs). In bash, restored aliases are expanded
//! only if the startup files turned `expand_aliases` on or the caller sets
//! [`RewriteOptions::bash_expand_aliases`]; zsh and dash expand them as they always do.
//!
//! # Example
//!
//! ```no_run
//! use std::ffi::OsString;
//! use std::time::Duration;
//! use cordon::snapshot::{
//!     create_snapshot, detect_shell, rewrite_argv, spawn_cleanup, RewriteOptions, SessionId,
//!     SessionLock, SnapshotOptions, DEFAULT_RETENTION,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::path::PathBuf::from("/home/me/.cache/cordon/snapshots");
//! let session = SessionId::new("7f3a")?;
//! std::fs::create_dir_all(&dir)?;
//! let _live = SessionLock::acquire(&dir, &session)?; // held for the whole session
//!
//! let shell = detect_shell(None)?;
//! let opts = SnapshotOptions::new(&dir, session, 1).timeout(Duration::from_secs(5));
//! let snapshot = create_snapshot(&shell, &opts)?;
//! let _cleanup = spawn_cleanup(dir.clone(), DEFAULT_RETENTION)?;
//!
//! let mut rw = RewriteOptions::new(snapshot.to_ref());
//! rw.keep_vars.push("GIT_PAGER".into()); // an explicit override from the request
//! let argv: Vec<OsString> = ["/bin/bash", "-lc", "ll && echo \"$FOO\""]
//!     .map(OsString::from)
//!     .to_vec();
//! let wrapped = rewrite_argv(&argv, &rw); // ["/bin/bash", "-c", "<wrapper>"]
//! // The command must find the content on SNAPSHOT_FD as a sealed memfd;
//! // cordon::session::wrap_with_snapshot does the rewrite and the passing in one step.
//! let memfd = cordon::snapshot::sealed_memfd("snapshot", snapshot.content())?;
//! # let _ = (wrapped, memfd);
//! # Ok(()) }
//! ```

mod cache;
mod cache_key;
mod capture;
#[cfg(fuzzing)]
#[doc(hidden)]
pub use capture::fuzzing;
mod cleanup;
mod quote;
mod rewrite;
mod run;
mod shell;
mod summary;
mod trust;

use std::path::PathBuf;

pub use cache::{
    bypass_in_progress, cache_dir, cache_session, cached_snapshot, changed_env, purge_cache,
    startup_files_under_writable_root, BypassMarker, CacheError, CacheUse, CachedSnapshot,
};
pub use cache_key::{cache_key, startup_files};
pub use capture::{
    capture_policy, create_snapshot, SnapshotError, SnapshotFile, SnapshotOptions,
    DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT, EXCLUDED_EXPORTS,
};
pub use cleanup::{
    cleanup_stale, spawn_cleanup, CleanupError, CleanupReport, EntryName, SessionLock,
    DEFAULT_RETENTION, TEMP_GRACE,
};
pub use quote::{is_identifier, push_quoted, quoted};
pub use rewrite::{rewrite_argv, ReportFd, RewriteOptions, ALWAYS_KEEP, ENV_FILE_VAR, PROXY_VARS};
pub use run::RunError;
pub use shell::{detect_shell, detect_shell_from, Shell, ShellError, ShellKind};
pub use summary::SnapshotSummary;
pub use trust::{
    canonical_prefix, sealed_memfd, writable_root_covering, PrivateDir, TrustError, Untrusted,
};

/// The descriptor a wrapped command finds its snapshot on (a sealed memfd, sourced as
/// `/proc/self/fd/8`). Single digit, so that every shell can close it again.
pub const SNAPSHOT_FD: i32 = 8;

/// The descriptor a wrapped session command finds its `env/` scripts on (a sealed memfd).
pub const ENV_FD: i32 = 7;

/// The line that separates startup noise from the snapshot proper; it is also the first line
/// of every snapshot file.
pub const MARKER_LINE: &str = "# Snapshot file";

/// A session identifier, restricted to `[A-Za-z0-9_-]{1,128}` so that it is a safe file-name
/// component and the `<session>.<generation>.sh` names parse back unambiguously.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

/// A session id that is empty, too long, or contains other characters.
#[derive(Debug, thiserror::Error)]
#[error("invalid session id {0:?}: use 1 to 128 characters from A-Z a-z 0-9 _ -")]
pub struct InvalidSessionId(pub String);

impl SessionId {
    /// Validates `id`.
    pub fn new(id: impl Into<String>) -> Result<SessionId, InvalidSessionId> {
        let id = id.into();
        let ok = !id.is_empty()
            && id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(SessionId(id))
        } else {
            Err(InvalidSessionId(id))
        }
    }

    /// A fresh id unique among the ids this machine makes at the same time: `s` and 16 hex
    /// digits.
    pub fn unique() -> SessionId {
        SessionId(format!("s{}", capture::unique_token()))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where a snapshot is and which kind of shell it is for; all [`rewrite_argv`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRef {
    /// The snapshot file.
    pub path: PathBuf,
    /// The shell kind it was made with; only commands for that kind are rewritten.
    pub kind: ShellKind,
}
