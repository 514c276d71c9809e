//! The command line's snapshot cache: one snapshot per shell and state of its startup files,
//! shared by every `cordon run` of the user.
//!
//! The name is `<kind>-<first 16 hex digits of cache_key>.0.sh` (`bash-4846466ef5378a40.0.sh`):
//! the key covers the shell binary (by its canonical path, so `/bin/bash` and `/usr/bin/bash`
//! share a snapshot on a merged-`/usr` system) and the size, mtime and content of every startup
//! file it reads, so an edited `.bashrc` gets a new name (and the old file ages out), and the
//! same state always finds the same file. The kind is part of the name because one binary can
//! be two kinds (bash started as `sh` behaves as a POSIX shell and gets a POSIX wrapper). The
//! "session" of such a file is its key, which makes it fit [`cleanup_stale`](super::cleanup_stale)
//! unchanged:
//!
//! - while a `cordon run` uses it, that run holds the key's [`SessionLock`], so a concurrent
//!   cleanup never deletes it mid-use;
//! - every use touches the file, so cleanup deletes it only after `retention` without any use.
//!
//! ```no_run
//! use cordon::snapshot::{cache_dir, cached_snapshot, detect_shell};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = cache_dir(|k| std::env::var_os(k)).ok_or("no cache directory")?;
//! let shell = detect_shell(Some("bash".as_ref()))?;
//! let cached = cached_snapshot(&dir, &shell, Vec::new(), cordon::snapshot::DEFAULT_TIMEOUT)?;
//! println!("{} ({})", cached.path.display(), if cached.created { "new" } else { "reused" });
//! # Ok(()) }
//! ```

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    cache_key, create_snapshot, spawn_cleanup, startup_files, SessionId, SessionLock, Shell,
    SnapshotError, SnapshotOptions, SnapshotRef, DEFAULT_RETENTION,
};

/// `$XDG_CACHE_HOME/cordon/snapshots`, else `$HOME/.cache/cordon/snapshots`; `None` when
/// neither names an absolute directory.
pub fn cache_dir(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let absolute = |v: OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let base = env("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| env("HOME").and_then(absolute).map(|h| h.join(".cache")))?;
    Some(base.join("cordon").join("snapshots"))
}

/// The cache's name for a snapshot of `shell` in the current state of its startup files.
pub fn cache_session(shell: &Shell, env: impl Fn(&str) -> Option<OsString>) -> SessionId {
    let binary = fs::canonicalize(&shell.path).unwrap_or_else(|_| shell.path.clone());
    let key = cache_key(&binary, &startup_files(shell.kind, env));
    // 16 hex digits of SHA-256: collisions between one user's shells are not a concern.
    SessionId(format!("{}-{}", shell.kind.name(), &key[..16]))
}

/// A cached snapshot in use: the lock keeps cleanup away until the value is dropped.
#[derive(Debug)]
pub struct CachedSnapshot {
    /// The snapshot file.
    pub path: PathBuf,
    /// What `rewrite_argv` needs.
    pub snapshot: SnapshotRef,
    /// True when this call made it.
    pub created: bool,
    /// Held while the snapshot is in use.
    pub lock: SessionLock,
}

/// Why the cache could not provide a snapshot (the caller then runs without one).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The directory or the lock could not be set up.
    #[error("snapshot cache {path:?}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Making the snapshot failed.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

/// The cached snapshot of `shell` in `dir`, made (with the environment changes `env` for the
/// capture shells) when missing. A new snapshot starts a background cleanup of the directory.
pub fn cached_snapshot(
    dir: &Path,
    shell: &Shell,
    env: Vec<(OsString, Option<OsString>)>,
    timeout: Duration,
) -> Result<CachedSnapshot, CacheError> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CacheError::Io { path, source }
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir))?;
    // The key is computed with the same variables the capture shell sees, so that a HOME set
    // for the capture names the startup files it will read.
    let lookup = |k: &str| match env.iter().rev().find(|(name, _)| name == k) {
        Some((_, value)) => value.clone(),
        None => std::env::var_os(k),
    };
    let session = cache_session(shell, lookup);
    let lock = SessionLock::acquire(dir, &session).map_err(io_err(dir))?;
    let path = dir.join(format!("{}.0.sh", session.as_str()));
    let snapshot = SnapshotRef {
        path: path.clone(),
        kind: shell.kind,
    };
    // A regular file only: never a symlink planted at the name.
    if fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        // Last use, for retention; a failure only makes it age sooner.
        let _ = touch(&path);
        return Ok(CachedSnapshot {
            path,
            snapshot,
            created: false,
            lock,
        });
    }
    let mut options = SnapshotOptions::new(dir, session, 0).timeout(timeout);
    options.env = env;
    let file = create_snapshot(shell, &options)?;
    let path = file.keep();
    if let Err(e) = spawn_cleanup(dir.to_path_buf(), DEFAULT_RETENTION) {
        tracing::info!("snapshot cleanup not started: {e}");
    }
    Ok(CachedSnapshot {
        path,
        snapshot,
        created: true,
        lock,
    })
}

fn touch(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    f.set_modified(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_cache_dir_prefers_xdg() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            cache_dir(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/cordon/snapshots"))
        );
        assert_eq!(
            cache_dir(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/cordon/snapshots"))
        );
        assert_eq!(cache_dir(env(&[("HOME", "")])), None);
    }
}
