//! Stale snapshot cleanup and the session locks that protect live sessions from it.
//!
//! A caller that keeps using a snapshot file on disk holds a shared `flock` on
//! `<dir>/<session>.lock` for as long as it does ([`SessionLock`]; cordon's own runs and
//! sessions read their snapshot into memory and need none). Cleanup, possibly in another
//! process, tries an exclusive non-blocking
//! `flock` on that file: if it cannot get it, the session is live and its files are left
//! alone. The directory is reached without following any symlink and must be the user's
//! ([`PrivateDir`]); every call after that is relative to its descriptor and never follows a
//! symlink, so cleanup cannot be steered outside the directory. Nobody waits on these locks:
//! a lock someone else holds exclusively (a confined command can `flock` any file it can
//! read) makes [`SessionLock::acquire`] give up after a short while instead of hanging.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{openat, Flock, FlockArg, OFlag};
use nix::sys::stat::{fstatat, FileStat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::trust::{PrivateDir, TrustError};
use super::SessionId;

/// How long [`SessionLock::acquire`] retries while another process holds the lock
/// exclusively. Cleanup holds it for the time of a few `unlinkat` calls; anything longer is
/// someone else, and waiting for them would hand them a denial of service.
const LOCK_PATIENCE: Duration = Duration::from_secs(2);

/// How long snapshots of finished sessions are kept after their last use.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(3 * 24 * 60 * 60);

/// Temporary files younger than this may belong to a snapshot being made right now (two
/// shell runs of at most the timeout each); older ones are debris of a crashed process.
pub const TEMP_GRACE: Duration = Duration::from_secs(10 * 60);

/// What a file name in the snapshot directory says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryName {
    /// `<session>.<generation>.sh`
    Snapshot {
        /// Its session.
        session: SessionId,
        /// Its generation.
        generation: u64,
    },
    /// `<session>.tmp-<unique>`
    Temporary {
        /// Its session.
        session: SessionId,
    },
    /// `<session>.lock`
    Lock {
        /// Its session.
        session: SessionId,
    },
}

impl EntryName {
    /// Parses a directory entry's name; `None` for names cordon never creates.
    pub fn parse(name: &OsStr) -> Option<EntryName> {
        let name = std::str::from_utf8(name.as_bytes()).ok()?;
        let (session, rest) = name.split_once('.')?;
        let session = SessionId::new(session).ok()?;
        if rest == "lock" {
            return Some(EntryName::Lock { session });
        }
        if let Some(unique) = rest.strip_prefix("tmp-") {
            let ok = !unique.is_empty() && unique.bytes().all(|b| b.is_ascii_alphanumeric());
            return ok.then_some(EntryName::Temporary { session });
        }
        let generation = rest.strip_suffix(".sh")?;
        // Only the canonical decimal form, so that one generation has exactly one name.
        if generation.is_empty()
            || !generation.bytes().all(|b| b.is_ascii_digit())
            || (generation.len() > 1 && generation.starts_with('0'))
        {
            return None;
        }
        Some(EntryName::Snapshot {
            session,
            generation: generation.parse().ok()?,
        })
    }
}

/// What a cleanup run did.
#[derive(Debug, Default)]
pub struct CleanupReport {
    /// Entries that were deleted.
    pub deleted: Vec<PathBuf>,
    /// Entries that should have been deleted but could not be, with the reason.
    pub failed: Vec<(PathBuf, io::Error)>,
    /// Sessions whose files were kept because the session is live.
    pub live_sessions: Vec<SessionId>,
}

/// Why cleanup could not run at all (per-entry failures go to [`CleanupReport::failed`]).
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    /// The directory could not be opened or is not trusted (missing, reached through a
    /// symlink, not a directory, not the user's, ...).
    #[error("snapshot cleanup: could not open directory {path:?}")]
    OpenDir {
        /// The snapshot directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: TrustError,
    },
}

/// Deletes, in `dir`: entries whose names cordon never creates, temporaries older than
/// [`TEMP_GRACE`], and snapshots (and lock files) of sessions that are not live and were last
/// used more than `retention` ago. Entries cordon would never have made (symlinks, fifos,
/// devices, files with another owner, a second link or a mode others may write) are deleted at
/// once, symlinks as links; their targets are never touched. Subdirectories are never removed.
pub fn cleanup_stale(dir: &Path, retention: Duration) -> Result<CleanupReport, CleanupError> {
    let handle = PrivateDir::open(dir, false).map_err(|source| CleanupError::OpenDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let dirfd = handle.raw_fd();
    let now = SystemTime::now();
    let mut report = CleanupReport::default();

    // Read the whole listing first: deleting while iterating a directory stream may skip
    // entries.
    let names: Vec<OsString> = match handle.names() {
        Ok(names) => names,
        Err(e) => {
            report
                .failed
                .push((dir.to_path_buf(), io::Error::other(e.to_string())));
            Vec::new()
        }
    };

    // Exclusive locks of sessions found dead, held until the end so that such a session cannot
    // come back to life halfway through the deletion of its files.
    let mut sessions: HashMap<SessionId, Liveness> = HashMap::new();
    for name in &names {
        let path = dir.join(name);
        let parsed = EntryName::parse(name);
        let stat = match fstatat(
            Some(dirfd),
            name.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(s) => s,
            Err(Errno::ENOENT) => continue,
            Err(e) => {
                report.failed.push((path, io::Error::from(e)));
                continue;
            }
        };
        let is_dir = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR;
        if is_dir {
            continue;
        }
        let planted = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG
            || stat.st_nlink != 1
            || stat.st_uid != nix::unistd::geteuid().as_raw()
            || stat.st_mode & 0o022 != 0;
        let delete = match parsed {
            _ if planted => true,
            None => true,
            Some(EntryName::Temporary { .. }) => age(&stat, now) > TEMP_GRACE,
            Some(EntryName::Snapshot { session, .. }) | Some(EntryName::Lock { session }) => {
                if age(&stat, now) <= retention {
                    false
                } else {
                    let live = sessions
                        .entry(session.clone())
                        .or_insert_with(|| probe(dirfd, &session));
                    match live {
                        Liveness::Live => false,
                        Liveness::Dead { .. } => true,
                        Liveness::Unknown(e) => {
                            report.failed.push((
                                path.clone(),
                                io::Error::new(
                                    e.kind(),
                                    format!("could not test session lock: {e}"),
                                ),
                            ));
                            false
                        }
                    }
                }
            }
        };
        if delete {
            match unlinkat(Some(dirfd), name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => report.deleted.push(path),
                Err(e) => report.failed.push((path, io::Error::from(e))),
            }
        }
    }
    let mut live: Vec<SessionId> = sessions
        .into_iter()
        .filter_map(|(s, l)| matches!(l, Liveness::Live).then_some(s))
        .collect();
    live.sort();
    report.live_sessions = live;
    Ok(report)
}

/// Starts [`cleanup_stale`] on a background thread, e.g. right after a snapshot was made, so
/// that the caller does not wait for it.
pub fn spawn_cleanup(
    dir: PathBuf,
    retention: Duration,
) -> io::Result<JoinHandle<Result<CleanupReport, CleanupError>>> {
    std::thread::Builder::new()
        .name("cordon-snapshot-cleanup".into())
        .spawn(move || cleanup_stale(&dir, retention))
}

fn age(stat: &FileStat, now: SystemTime) -> Duration {
    let mtime = UNIX_EPOCH
        + Duration::from_secs(u64::try_from(stat.st_mtime).unwrap_or(0))
        + Duration::from_nanos(u64::try_from(stat.st_mtime_nsec).unwrap_or(0));
    now.duration_since(mtime).unwrap_or(Duration::ZERO)
}

enum Liveness {
    Live,
    /// Holds the exclusive lock (or nothing, when there is no lock file).
    Dead {
        // Only held, never read: dropping it releases the session.
        _held: Option<Flock<File>>,
    },
    Unknown(io::Error),
}

fn probe(dirfd: RawFd, session: &SessionId) -> Liveness {
    let name = format!("{}.lock", session.as_str());
    let fd = match openat(
        Some(dirfd),
        name.as_str(),
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        // No lock file, or a symlink where it should be (which no session can have locked,
        // since sessions open it with O_NOFOLLOW too): nobody holds it.
        Err(Errno::ENOENT) | Err(Errno::ELOOP) => return Liveness::Dead { _held: None },
        Err(e) => return Liveness::Unknown(io::Error::from(e)),
    };
    // SAFETY: openat just returned this descriptor and nothing else owns it.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Liveness::Dead { _held: Some(lock) },
        Err((_, Errno::EWOULDBLOCK)) => Liveness::Live,
        Err((_, e)) => Liveness::Unknown(io::Error::from(e)),
    }
}

/// Marks a session as live for other processes' cleanup runs, for as long as the value lives.
///
/// Several holders of one session may coexist (the lock is shared); cleanup's exclusive probe
/// fails while any of them is alive. The lock file itself is left behind on drop and removed
/// by a later cleanup once stale.
#[derive(Debug)]
pub struct SessionLock {
    _lock: Flock<File>,
    path: PathBuf,
}

impl SessionLock {
    /// Creates (if needed) and locks `<dir>/<session>.lock`. Retries for up to
    /// [`LOCK_PATIENCE`] while someone holds the file exclusively (a cleanup run does so
    /// briefly), then fails with `WouldBlock` rather than wait on whoever it is.
    pub fn acquire(dir: &Path, session: &SessionId) -> io::Result<SessionLock> {
        let deadline = Instant::now() + LOCK_PATIENCE;
        let path = dir.join(format!("{}.lock", session.as_str()));
        // Cleanup may delete a dead session's lock file between our open and our flock, which
        // would leave us locking an orphaned inode nobody else can see. Re-check that the name
        // still refers to what we locked, and start over if not.
        for _ in 0..(16 + LOCK_PATIENCE.as_millis() / 20) {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                // Never follow a symlink planted at the lock's name.
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)?;
            let lock = match Flock::lock(file, FlockArg::LockSharedNonblock) {
                Ok(lock) => lock,
                Err((_, Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Err((_, e)) => return Err(io::Error::from(e)),
            };
            let held = lock.metadata()?;
            match std::fs::symlink_metadata(&path) {
                Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => {
                    return Ok(SessionLock { _lock: lock, path });
                }
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(format!(
            "lock file {path:?} kept being replaced"
        )))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<EntryName> {
        EntryName::parse(OsStr::new(s))
    }

    #[test]
    fn snapshot_entry_names() {
        let s = SessionId::new("abc-1_2").unwrap();
        assert_eq!(
            p("abc-1_2.7.sh"),
            Some(EntryName::Snapshot {
                session: s.clone(),
                generation: 7
            })
        );
        assert_eq!(
            p("abc-1_2.lock"),
            Some(EntryName::Lock { session: s.clone() })
        );
        assert_eq!(
            p("abc-1_2.tmp-0af3"),
            Some(EntryName::Temporary { session: s })
        );
        for junk in [
            "x.07.sh",
            "x..sh",
            "x.1.sh~",
            "x.tmp-",
            "x.tmp-a.b",
            "x.lock2",
            ".1.sh",
            "noext",
            "x.1.zsh",
            "a b.1.sh",
        ] {
            assert_eq!(p(junk), None, "{junk}");
        }
    }
}
