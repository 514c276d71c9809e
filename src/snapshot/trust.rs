//! cordon's own on-disk state (the snapshot cache, session directories) as the unconfined
//! parent may trust it.
//!
//! The parent runs with the user's full rights, so every file it sources, deletes or chmods
//! on the strength of a path is an escape if a confined command could have put something
//! there. A [`PrivateDir`] is therefore reached from `/` one component at a time with
//! `O_NOFOLLOW` (a symlink anywhere on the way is refused, never followed), must be a
//! directory owned by the effective uid, and is used only through its descriptor afterwards:
//! `openat`, `unlinkat`, `renameat`, `fchmod`, never a path. A file in it is believed only when
//! it is a regular file with one link, owned by the effective uid and writable by nobody else;
//! anything else is deleted (in the cache) or ignored (in a session's `env/`), never followed.
//!
//! None of this can tell a file the user wrote from one a confined command wrote: both run as
//! the same uid. That is what [`writable_root_covering`] is for: a directory that a command's
//! policy makes writable is not trusted for that command at all.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use cordon_sandbox::SandboxPolicy;
use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fchmod, fstat, fstatat, mkdirat, FileStat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// How deep [`PrivateDir::purge`] descends into planted subdirectories before giving up on one.
const MAX_PURGE_DEPTH: usize = 32;

/// Why a directory or file of cordon's state is not trusted.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The path is relative or contains `..`, so where it leads depends on more than its text.
    #[error(
        "{path:?} is not a plain absolute path (no `..`), so cordon does not keep state there"
    )]
    NotPlain {
        /// The path.
        path: PathBuf,
    },
    /// A component is a symbolic link.
    #[error("{path:?} is a symbolic link; cordon never follows one to its own state (remove it)")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A component is not a directory.
    #[error("{path:?} is not a directory")]
    NotDirectory {
        /// The path.
        path: PathBuf,
    },
    /// The directory belongs to another user.
    #[error(
        "{path:?} is owned by uid {owner}, not by cordon's uid {euid}; cordon does not use it"
    )]
    Owner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Ours.
        euid: u32,
    },
    /// The directory lies in (or contains) a writable root of the command's policy.
    #[error("{path:?} overlaps the writable root {root:?} of the sandbox policy, so a confined command could plant state in it")]
    InsideWritableRoot {
        /// The directory.
        path: PathBuf,
        /// The writable root.
        root: PathBuf,
    },
    /// A system call failed.
    #[error("{path:?}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// A directory of cordon's state, held open; see the module docs.
#[derive(Debug)]
pub struct PrivateDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// What to do with an entry that fails the checks of [`PrivateDir::read_file`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untrusted {
    /// Unlink it (cache entries: cordon made them and can make them again).
    Delete,
    /// Leave it (a session's `env/` belongs to the embedder).
    Ignore,
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn io_at(path: &Path) -> impl Fn(Errno) -> TrustError + '_ {
    move |e| TrustError::Io {
        path: path.to_path_buf(),
        source: io::Error::from(e),
    }
}

fn is_kind(stat: &FileStat, kind: SFlag) -> bool {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == kind
}

impl PrivateDir {
    /// Opens `path` (creating missing components 0700 when `create`) without following any
    /// symlink, and checks that the last component is a directory owned by the effective uid.
    /// A directory whose mode lets the group or others write is emptied (someone else may
    /// have planted files in it) and set to 0700 through its descriptor; one readable by
    /// others is tightened to 0700 (snapshots hold the user's exports).
    pub fn open(path: &Path, create: bool) -> Result<PrivateDir, TrustError> {
        let plain = path.is_absolute()
            && path
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !plain {
            return Err(TrustError::NotPlain {
                path: path.to_path_buf(),
            });
        }
        let root = nix::fcntl::open(
            "/",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io_at(Path::new("/")))?;
        // SAFETY: open just returned this descriptor and nothing else owns it.
        let mut fd = unsafe { OwnedFd::from_raw_fd(root) };
        let mut walked = PathBuf::from("/");
        let names: Vec<&OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        for (i, name) in names.iter().enumerate() {
            walked.push(name);
            let last = i + 1 == names.len();
            fd = open_component(&fd, name, &walked, create, last)?;
        }
        let dir = PrivateDir {
            fd,
            path: path.to_path_buf(),
        };
        dir.check_and_tighten()?;
        Ok(dir)
    }

    /// The subdirectory `name` (created 0700 when `create`), held to the same rules.
    pub fn subdir(&self, name: &str, create: bool) -> Result<PrivateDir, TrustError> {
        let path = self.path.join(name);
        let fd = open_component(&self.fd, OsStr::new(name), &path, create, true)?;
        let dir = PrivateDir { fd, path };
        dir.check_and_tighten()?;
        Ok(dir)
    }

    fn check_and_tighten(&self) -> Result<(), TrustError> {
        let stat = fstat(self.fd.as_raw_fd()).map_err(io_at(&self.path))?;
        if !is_kind(&stat, SFlag::S_IFDIR) {
            return Err(TrustError::NotDirectory {
                path: self.path.clone(),
            });
        }
        if stat.st_uid != euid() {
            return Err(TrustError::Owner {
                path: self.path.clone(),
                owner: stat.st_uid,
                euid: euid(),
            });
        }
        if stat.st_mode & 0o022 != 0 {
            // Anyone could have written here: nothing in it is believed.
            self.purge();
        }
        if stat.st_mode & 0o7777 != 0o700 {
            fchmod(self.fd.as_raw_fd(), Mode::from_bits_truncate(0o700))
                .map_err(io_at(&self.path))?;
        }
        Ok(())
    }

    /// The directory's path (for messages; never used to reach it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory descriptor.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The names in the directory, sorted by bytes, without `.` and `..`.
    pub fn names(&self) -> Result<Vec<OsString>, TrustError> {
        list(&self.fd, &self.path)
    }

    /// The content of the regular file `name` when it can be believed: one link, owned by the
    /// effective uid, writable by nobody else, at most `limit` bytes. `Ok(None)` when missing
    /// or untrusted (then handled as `untrusted` says).
    pub fn read_file(
        &self,
        name: &OsStr,
        limit: usize,
        untrusted: Untrusted,
    ) -> Result<Option<Vec<u8>>, TrustError> {
        let path = self.path.join(name);
        let stat = match fstatat(Some(self.raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(s) => s,
            Err(Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(io_at(&path)(e)),
        };
        if !believable(&stat) {
            if untrusted == Untrusted::Delete && !is_kind(&stat, SFlag::S_IFDIR) {
                tracing::info!("removing untrusted entry {path:?} (wrong type, owner or mode)");
                let _ = unlinkat(Some(self.raw_fd()), name, UnlinkatFlags::NoRemoveDir);
            }
            return Ok(None);
        }
        let fd = match openat(
            Some(self.raw_fd()),
            name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            // Replaced between the stat and the open: treat as missing.
            Err(Errno::ENOENT) | Err(Errno::ELOOP) => return Ok(None),
            Err(e) => return Err(io_at(&path)(e)),
        };
        // SAFETY: openat just returned this descriptor and nothing else owns it.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let opened = fstat(file.as_raw_fd()).map_err(io_at(&path))?;
        if opened.st_ino != stat.st_ino || opened.st_dev != stat.st_dev || !believable(&opened) {
            return Ok(None);
        }
        let mut content = Vec::new();
        let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
        file.take(cap)
            .read_to_end(&mut content)
            .map_err(|source| TrustError::Io {
                path: path.clone(),
                source,
            })?;
        if content.len() > limit {
            return Ok(None);
        }
        Ok(Some(content))
    }

    /// Creates `name` (which must not exist) 0600 and writes `content` into it.
    pub fn write_new(&self, name: &str, content: &[u8]) -> io::Result<()> {
        let fd = openat(
            Some(self.raw_fd()),
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        // SAFETY: openat just returned this descriptor and nothing else owns it.
        let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        // The umask may have taken bits away, never added; make the mode exact anyway.
        fchmod(file.as_raw_fd(), Mode::from_bits_truncate(0o600))?;
        file.write_all(content)
    }

    /// Renames `from` to `to` inside the directory.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        nix::fcntl::renameat(Some(self.raw_fd()), from, Some(self.raw_fd()), to)?;
        Ok(())
    }

    /// Removes the non-directory entry `name` (a symlink is removed as a link).
    pub fn unlink(&self, name: &str) -> io::Result<()> {
        match unlinkat(Some(self.raw_fd()), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Sets the mtime of `name` to now without following a symlink (retention counts from it).
    pub fn touch(&self, name: &str) -> io::Result<()> {
        let now = nix::sys::time::TimeSpec::UTIME_NOW;
        nix::sys::stat::utimensat(
            Some(self.raw_fd()),
            name,
            &now,
            &now,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )?;
        Ok(())
    }

    /// Deletes everything in the directory, subdirectories included, through descriptors only:
    /// a planted symlink is removed as a link, never followed. Returns the number of entries
    /// that could not be removed.
    pub fn purge(&self) -> usize {
        purge_dir(&self.fd, &self.path, 0)
    }

    /// Removes the subdirectory `name` and everything in it, as [`PrivateDir::purge`] does.
    pub fn remove_tree(&self, name: &str) -> usize {
        let path = self.path.join(name);
        let failed = match open_for_purge(&self.fd, OsStr::new(name)) {
            Ok(fd) => purge_dir(&fd, &path, 1),
            Err(Errno::ENOENT) => return 0,
            Err(_) => return 1,
        };
        match unlinkat(Some(self.raw_fd()), name, UnlinkatFlags::RemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => failed,
            Err(_) => failed + 1,
        }
    }
}

/// Whether a stat describes a file cordon may believe: a regular file with one link, owned by
/// the effective uid, writable by nobody else. A second link would be a name outside this
/// directory through which the same inode can be changed.
fn believable(stat: &FileStat) -> bool {
    is_kind(stat, SFlag::S_IFREG)
        && stat.st_nlink == 1
        && stat.st_uid == euid()
        && stat.st_mode & 0o022 == 0
}

/// Opens one component beneath `parent` as a directory, refusing a symlink. Intermediate
/// components are opened `O_PATH` (search permission is all a walk needs); the last one for
/// reading, so that it can be listed and `fchmod`ed.
fn open_component(
    parent: &OwnedFd,
    name: &OsStr,
    path: &Path,
    create: bool,
    last: bool,
) -> Result<OwnedFd, TrustError> {
    let flags = OFlag::O_DIRECTORY
        | OFlag::O_NOFOLLOW
        | OFlag::O_CLOEXEC
        | if last { OFlag::O_RDONLY } else { OFlag::O_PATH };
    for attempt in 0..2 {
        match openat(Some(parent.as_raw_fd()), name, flags, Mode::empty()) {
            // SAFETY: openat just returned this descriptor and nothing else owns it.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(Errno::ENOENT) if create && attempt == 0 => {
                match mkdirat(
                    Some(parent.as_raw_fd()),
                    name,
                    Mode::from_bits_truncate(0o700),
                ) {
                    Ok(()) | Err(Errno::EEXIST) => continue,
                    Err(e) => return Err(io_at(path)(e)),
                }
            }
            // O_NOFOLLOW on a symlink: ELOOP; O_PATH|O_NOFOLLOW|O_DIRECTORY on one: ENOTDIR.
            Err(e @ (Errno::ELOOP | Errno::ENOTDIR)) => {
                let link = fstatat(Some(parent.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW)
                    .is_ok_and(|s| is_kind(&s, SFlag::S_IFLNK));
                return Err(if link {
                    TrustError::Symlink {
                        path: path.to_path_buf(),
                    }
                } else if e == Errno::ENOTDIR {
                    TrustError::NotDirectory {
                        path: path.to_path_buf(),
                    }
                } else {
                    io_at(path)(e)
                });
            }
            Err(e) => return Err(io_at(path)(e)),
        }
    }
    Err(io_at(path)(Errno::ENOENT))
}

fn list(fd: &OwnedFd, path: &Path) -> Result<Vec<OsString>, TrustError> {
    // A second descriptor: `Dir` takes ownership of the one it reads.
    let copy = fd
        .as_fd()
        .try_clone_to_owned()
        .map_err(|source| TrustError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    // Re-open "." through the copy so that the listing has its own file position.
    let own = openat(
        Some(copy.as_raw_fd()),
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io_at(path))?;
    let mut dir = nix::dir::Dir::from_fd(own).map_err(io_at(path))?;
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(io_at(path))?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name != "." && name != ".." {
            names.push(name.to_os_string());
        }
    }
    names.sort();
    Ok(names)
}

/// Opens the subdirectory `name` of `parent` for purging without following a symlink, after
/// giving it back to its owner (0700): whoever planted it may have made it unreadable or
/// unwritable to stop the purge (chmod is not mediated by Landlock). The mode is changed
/// through the `O_PATH` descriptor's `/proc/self/fd` link, which names exactly the opened
/// inode, never through the path.
fn open_for_purge(parent: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    let path_fd = openat(
        Some(parent.as_raw_fd()),
        name,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: openat just returned this descriptor and nothing else owns it.
    let path_fd = unsafe { OwnedFd::from_raw_fd(path_fd) };
    let link = format!("/proc/self/fd/{}", path_fd.as_raw_fd());
    // A failure (not ours) leaves the mode; opening below then decides.
    let _ = nix::sys::stat::fchmodat(
        None,
        link.as_str(),
        Mode::from_bits_truncate(0o700),
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    );
    let fd = openat(
        Some(path_fd.as_raw_fd()),
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: openat just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn purge_dir(fd: &OwnedFd, path: &Path, depth: usize) -> usize {
    // Entries can only be unlinked from a directory we may write: restore that first.
    let _ = fchmod(fd.as_raw_fd(), Mode::from_bits_truncate(0o700));
    let names = match list(fd, path) {
        Ok(names) => names,
        Err(e) => {
            tracing::info!("cannot list {path:?} to purge it: {e}");
            return 1;
        }
    };
    let mut failed = 0;
    for name in names {
        let child = path.join(&name);
        let is_dir = fstatat(
            Some(fd.as_raw_fd()),
            name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .is_ok_and(|s| is_kind(&s, SFlag::S_IFDIR));
        if is_dir {
            if depth >= MAX_PURGE_DEPTH {
                failed += 1;
                continue;
            }
            match open_for_purge(fd, name.as_os_str()) {
                Ok(sub) => failed += purge_dir(&sub, &child, depth + 1),
                Err(_) => failed += 1,
            }
        }
        let flags = if is_dir {
            UnlinkatFlags::RemoveDir
        } else {
            UnlinkatFlags::NoRemoveDir
        };
        match unlinkat(Some(fd.as_raw_fd()), name.as_os_str(), flags) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => {
                tracing::info!("cannot remove {child:?} while purging: {e}");
                failed += 1;
            }
        }
    }
    failed
}

/// The writable root of `policy` that contains `path` or lies inside it, if any. A command
/// with such a root can plant files in `path` (or beneath it), so the parent must not trust
/// anything there for, or after, that command. Both the path as given and its canonical form
/// (of the deepest part that exists) are compared, since policy roots are canonical.
pub fn writable_root_covering(policy: Option<&SandboxPolicy>, path: &Path) -> Option<PathBuf> {
    let policy = policy?;
    let forms = [path.to_path_buf(), canonical_prefix(path)];
    policy
        .filesystem
        .write
        .iter()
        .find(|root| {
            forms
                .iter()
                .any(|form| form.starts_with(root) || root.starts_with(form))
        })
        .cloned()
}

/// `path` with its deepest existing ancestor canonicalised and the rest appended.
pub fn canonical_prefix(path: &Path) -> PathBuf {
    let mut rest: Vec<&OsStr> = Vec::new();
    let mut cursor = path;
    loop {
        if let Ok(canonical) = std::fs::canonicalize(cursor) {
            let mut out = canonical;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (cursor.parent(), cursor.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                cursor = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// A memfd holding `content`, sealed against every change (write, grow, shrink, and further
/// seal changes), for the helper's `--pass-fd`: the command can read it (as
/// `/proc/self/fd/N`) but nothing can alter it after this call.
pub fn sealed_memfd(name: &str, content: &[u8]) -> io::Result<OwnedFd> {
    let cname =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: memfd_create reads the NUL-terminated name and returns a new descriptor.
    let raw =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create just returned this descriptor and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut file = File::from(fd);
    file.write_all(content)?;
    let seals = libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
    // SAFETY: F_ADD_SEALS takes an integer argument and touches no memory of ours.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(OwnedFd::from(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_trust_refuses_symlinks_and_dotdot() {
        let base = tempfile::tempdir().unwrap();
        let real = base.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            PrivateDir::open(&link.join("sub"), true),
            Err(TrustError::Symlink { .. })
        ));
        assert!(!real.join("sub").exists());
        assert!(matches!(
            PrivateDir::open(&real.join("..").join("x"), true),
            Err(TrustError::NotPlain { .. })
        ));
        let dir = PrivateDir::open(&real.join("a/b"), true).unwrap();
        dir.write_new("f", b"x").unwrap();
        assert_eq!(
            dir.read_file(OsStr::new("f"), 10, Untrusted::Delete)
                .unwrap(),
            Some(b"x".to_vec())
        );
    }

    #[test]
    fn snapshot_trust_purge_removes_locked_down_subdirectories_and_links_only() {
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let dir = PrivateDir::open(&base.path().join("cache"), true).unwrap();
        let sub = dir.path().join("planted/deeper");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("f"), "x").unwrap();
        std::os::unix::fs::symlink(&victim, sub.join("link")).unwrap();
        std::os::unix::fs::symlink(base.path(), dir.path().join("dirlink")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o500)).unwrap();
        std::fs::set_permissions(
            dir.path().join("planted"),
            std::fs::Permissions::from_mode(0o000),
        )
        .unwrap();
        assert_eq!(dir.purge(), 0);
        assert_eq!(dir.names().unwrap(), Vec::<OsString>::new());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(base.path().join("cache").is_dir());
    }

    #[test]
    fn snapshot_trust_sealed_memfd_is_immutable() {
        let fd = sealed_memfd("t", b"abc").unwrap();
        let mut f = File::from(fd);
        assert_eq!(f.write(b"z").unwrap_err().raw_os_error(), Some(libc::EPERM));
        // SAFETY: F_GET_SEALS reads the seal set only.
        let seals = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GET_SEALS) };
        assert_eq!(seals & libc::F_SEAL_SEAL, libc::F_SEAL_SEAL);
    }

    #[test]
    fn snapshot_trust_writable_root_overlap() {
        let policy = SandboxPolicy::from_json(
            r#"{"version":1,"filesystem":{"read":["/"],"write":["/w","/h/.cache/cordon/snapshots/sub"]},
                "network":{"mode":"denied"},
                "enforcement":{"missing_layer":"refuse","carve_outs":"report"}}"#,
        )
        .unwrap();
        let p = Some(&policy);
        assert_eq!(
            writable_root_covering(p, Path::new("/w/x/cordon")),
            Some(PathBuf::from("/w"))
        );
        assert!(writable_root_covering(p, Path::new("/h/.cache/cordon/snapshots")).is_some());
        assert_eq!(writable_root_covering(p, Path::new("/ww/x")), None);
        assert_eq!(writable_root_covering(None, Path::new("/w")), None);
    }
}
