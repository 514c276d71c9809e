//! The command line's snapshot cache: one snapshot per shell and state of its startup files,
//! shared by every `cordon run` of the user.
//!
//! The name is `<kind>-<first 16 hex digits of cache_key>.0.sh` (`bash-4846466ef5378a40.0.sh`):
//! the key covers the shell binary (by its canonical path, so `/bin/bash` and `/usr/bin/bash`
//! share a snapshot on a merged-`/usr` system) and the size, mtime and content of every startup
//! file it reads, so an edited `.bashrc` gets a new name (and the old file ages out), and the
//! same state always finds the same file. The kind is part of the name because one binary can
//! be two kinds (bash started as `sh` behaves as a POSIX shell and gets a POSIX wrapper).
//!
//! The file is read once, by the parent, through a [`PrivateDir`] (no symlink followed, owner
//! and mode checked), and handed to the command as a sealed memfd; the command never opens the
//! cache. So no lock is held while a command runs (a cleanup deleting the file after it was
//! read changes nothing), and nothing can make a later run wait. Every use touches the file,
//! so cleanup deletes it only after `retention` without any use.
//!
//! A run whose policy makes the cache directory writable ([`CacheUse::Bypass`]) must not
//! read it (its own or an earlier command could have planted a snapshot) and must not leave
//! anything for later runs: it runs without a snapshot and the caller purges the directory
//! afterwards with [`purge_cache`].
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

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cordon_sandbox::SandboxPolicy;

use super::trust::{writable_root_covering, PrivateDir, TrustError, Untrusted};
use super::{
    cache_key, create_snapshot, spawn_cleanup, startup_files, SessionId, Shell, ShellKind,
    SnapshotError, SnapshotOptions, SnapshotRef, DEFAULT_MAX_OUTPUT, DEFAULT_RETENTION,
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

/// The value `key` has for a shell started with the environment `changes` applied to this
/// process's (the last change wins; `None` also when a change removes it).
pub fn changed_env(changes: &[(OsString, Option<OsString>)], key: &str) -> Option<OsString> {
    match changes.iter().rev().find(|(name, _)| name == key) {
        Some((_, value)) => value.clone(),
        None => std::env::var_os(key),
    }
}

/// The cache's name for a snapshot of `shell` in the current state of its startup files.
pub fn cache_session(shell: &Shell, env: impl Fn(&str) -> Option<OsString>) -> SessionId {
    let binary = fs::canonicalize(&shell.path).unwrap_or_else(|_| shell.path.clone());
    let key = cache_key(&binary, &startup_files(shell.kind, env));
    // 16 hex digits of SHA-256: collisions between one user's shells are not a concern.
    SessionId(format!("{}-{}", shell.kind.name(), &key[..16]))
}

/// A cached snapshot, read into memory.
#[derive(Debug)]
pub struct CachedSnapshot {
    /// The snapshot file.
    pub path: PathBuf,
    /// What `rewrite_argv` needs.
    pub snapshot: SnapshotRef,
    /// The content, as read (or written) by this process; what the command sources.
    pub content: Arc<Vec<u8>>,
    /// True when this call made it.
    pub created: bool,
}

/// Why the cache could not provide a snapshot (the caller then runs without one).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The directory cannot be trusted or set up.
    #[error(transparent)]
    Trust(#[from] TrustError),
    /// Making the snapshot failed.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

/// Whether a run may use the snapshot cache at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheUse {
    /// No writable root of the run's policy overlaps the cache: read it and fill it.
    Use,
    /// The writable root `root` of the run's policy contains the cache directory (or lies
    /// inside it): the run neither reads nor writes the cache, and the caller purges it after
    /// the run, because the command could have planted files there for later runs.
    Bypass {
        /// The writable root.
        root: PathBuf,
    },
}

impl CacheUse {
    /// The decision for a run under `policy` (`None`: unconfined, which plants nothing on a
    /// confined command's behalf).
    pub fn for_policy(policy: Option<&SandboxPolicy>, dir: &Path) -> CacheUse {
        match writable_root_covering(policy, dir) {
            Some(root) => CacheUse::Bypass { root },
            None => CacheUse::Use,
        }
    }
}

/// The first startup file of `kind` (as [`startup_files`] lists them, with the variables
/// `env` gives) that a writable root of `policy` covers, with that root. A snapshot made now
/// would run what a confined command may just have written, and one made earlier may no longer
/// be what the file says; either way such a run gets no snapshot.
pub fn startup_files_under_writable_root(
    policy: Option<&SandboxPolicy>,
    kind: ShellKind,
    env: impl Fn(&str) -> Option<OsString>,
) -> Option<(PathBuf, PathBuf)> {
    startup_files(kind, env)
        .into_iter()
        .find_map(|file| writable_root_covering(policy, &file).map(|root| (file, root)))
}

/// Tells every other cordon process of this user, for as long as the value lives, that a run
/// whose command can write the cache directory is in progress, so that none of them reads the
/// cache meanwhile ([`bypass_in_progress`]): the purge after the run comes too late for a run
/// that starts while the command is still planting.
///
/// The mark is an abstract unix socket with a name unique to this holder, under a prefix
/// derived from the user and the cache directory. It lives in no file system a command could
/// reach, vanishes with the process however it ends, and a command can neither remove nor hide
/// it; binding look-alike names only makes other runs skip the cache.
#[derive(Debug)]
pub struct BypassMarker {
    _socket: std::os::unix::net::UnixDatagram,
}

impl BypassMarker {
    /// Marks `dir` as being written by a confined command.
    pub fn hold(dir: &Path) -> io::Result<BypassMarker> {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("{}{}", marker_prefix(dir), super::capture::unique_token());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        let socket = std::os::unix::net::UnixDatagram::bind_addr(&addr)?;
        Ok(BypassMarker { _socket: socket })
    }
}

/// True while some process holds a [`BypassMarker`] for `dir` (or when that cannot be told:
/// then the cache is not trusted either).
pub fn bypass_in_progress(dir: &Path) -> bool {
    let prefix = format!("@{}", marker_prefix(dir));
    match fs::read_to_string("/proc/net/unix") {
        Ok(table) => table.lines().any(|line| {
            line.split_whitespace()
                .nth(7)
                .is_some_and(|p| p.starts_with(&prefix))
        }),
        Err(e) => {
            tracing::info!("cannot tell whether the snapshot cache is being written: {e}");
            true
        }
    }
}

/// `cordon-snapshot-bypass/<uid>/<16 hex digits of the cache directory's canonical path>/`.
fn marker_prefix(dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    use std::os::unix::ffi::OsStrExt;
    let canonical = super::trust::canonical_prefix(dir);
    let digest = Sha256::digest(canonical.as_os_str().as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "cordon-snapshot-bypass/{}/{hex}/",
        nix::unistd::geteuid().as_raw()
    )
}

/// Empties the cache directory after a [`CacheUse::Bypass`] run, through descriptors only
/// (a planted symlink is removed, never followed). A directory that is missing, a symlink, or
/// not the user's is left alone: later runs refuse it anyway. Returns how many entries could
/// not be removed.
pub fn purge_cache(dir: &Path) -> Result<usize, TrustError> {
    match PrivateDir::open(dir, false) {
        Ok(handle) => Ok(handle.purge()),
        Err(TrustError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// The cached snapshot of `shell` in `dir`, made (with the environment changes `env` for the
/// capture shells, confined as [`create_snapshot`] confines them) when missing or untrusted. A
/// new snapshot starts a background cleanup of the directory. The caller must already have
/// checked [`CacheUse::for_policy`] and [`startup_files_under_writable_root`].
pub fn cached_snapshot(
    dir: &Path,
    shell: &Shell,
    env: Vec<(OsString, Option<OsString>)>,
    timeout: Duration,
) -> Result<CachedSnapshot, CacheError> {
    let handle = PrivateDir::open(dir, true)?;
    // The key is computed with the same variables the capture shell sees, so that a HOME set
    // for the capture names the startup files it will read.
    let session = cache_session(shell, |k| changed_env(&env, k));
    let name = format!("{}.0.sh", session.as_str());
    let path = dir.join(&name);
    let snapshot = SnapshotRef {
        path: path.clone(),
        kind: shell.kind,
    };
    // Anything but a regular file of ours, writable by nobody else, is removed and remade.
    let limit = DEFAULT_MAX_OUTPUT + 1024 * 1024;
    if let Some(content) = handle.read_file(OsStr::new(&name), limit, Untrusted::Delete)? {
        // Last use, for retention; a failure only makes it age sooner.
        let _ = handle.touch(&name);
        return Ok(CachedSnapshot {
            path,
            snapshot,
            content: Arc::new(content),
            created: false,
        });
    }
    let mut options = SnapshotOptions::new(dir, session, 0).timeout(timeout);
    options.env = env;
    let file = create_snapshot(shell, &options)?;
    let content = Arc::clone(file.content());
    let path = file.keep();
    if let Err(e) = spawn_cleanup(dir.to_path_buf(), DEFAULT_RETENTION) {
        tracing::info!("snapshot cleanup not started: {e}");
    }
    Ok(CachedSnapshot {
        path,
        snapshot,
        content,
        created: true,
    })
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
