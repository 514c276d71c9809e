//! The file operations of the applier, run inside the sandbox: every path is walked from `/`
//! one component at a time through directory descriptors opened with `O_NOFOLLOW`, so no
//! symlink is ever followed (a planted link is refused with `ELOOP`, wherever it points), a
//! component swapped after it was opened changes nothing, and a file is replaced by renaming a
//! new one over its name, so a hard link to a file elsewhere is never written through.
//!
//! `openat2(RESOLVE_NO_SYMLINKS)` would say the same in one call, but the sandbox's seccomp
//! filter answers it with `ENOSYS` (its mode cannot be inspected), so the walk is explicit.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fstat, fstatat, mkdirat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// The largest file the applier reads; patches are for source files.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// What the applier was doing when a file operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsStep {
    /// Reading the current content.
    Read,
    /// Creating or replacing the file (or a directory on its way).
    Create,
    /// Removing it.
    Remove,
}

/// A failed file operation: the step, the path, and the kernel's errno. The message uses the
/// wording of coreutils (`cannot create '...': Permission denied`), which denial
/// classification reads as it reads any tool's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} '{}': {}", step_phrase(*.step), .path.display(), describe(*.errno, .detail))]
pub struct FsError {
    /// What was being done.
    pub step: FsStep,
    /// The file (absolute).
    pub path: PathBuf,
    /// The errno.
    pub errno: Errno,
    /// Why, when the errno alone misleads (a symlink refused on purpose).
    pub detail: Option<&'static str>,
}

fn step_phrase(step: FsStep) -> &'static str {
    match step {
        FsStep::Read => "cannot open",
        FsStep::Create => "cannot create",
        FsStep::Remove => "cannot remove",
    }
}

fn describe(errno: Errno, detail: &Option<&'static str>) -> String {
    match detail {
        Some(detail) => format!("{detail} ({})", errno_name(errno)),
        None => errno.desc().to_owned(),
    }
}

/// The errno's symbolic name (`EACCES`).
pub fn errno_name(errno: Errno) -> String {
    format!("{errno:?}")
}

const SYMLINK: Option<&str> =
    Some("the path passes through a symbolic link, which the patch applier never follows");
const NOT_REGULAR: Option<&str> = Some("not a regular file");

fn fail(step: FsStep, path: &Path, errno: Errno, detail: Option<&'static str>) -> FsError {
    FsError {
        step,
        path: path.to_path_buf(),
        errno,
        detail,
    }
}

/// `path` made absolute against `cwd`, with `.` and `..` resolved lexically. Since no
/// symlink is followed on the way, this is the path the kernel would resolve too.
pub fn normalize(cwd: &Path, path: &str) -> PathBuf {
    let joined = cwd.join(path);
    let mut out = PathBuf::from("/");
    for component in joined.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

fn owned(fd: std::os::fd::RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful open and is owned by no one else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The parent directory of `path` (absolute, normalised) as a descriptor, walked without
/// following any symlink; missing directories are made when `create`. Returns it and the
/// final component.
fn parent_dir(path: &Path, step: FsStep, create: bool) -> Result<(OwnedFd, OsString), FsError> {
    let name = path
        .file_name()
        .ok_or_else(|| {
            fail(
                step,
                path,
                Errno::EISDIR,
                Some("names a directory, not a file"),
            )
        })?
        .to_os_string();
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let root =
        openat(None, "/", dir_flags, Mode::empty()).map_err(|e| fail(step, path, e, None))?;
    let mut dir = owned(root);
    let parent = path.parent().unwrap_or(Path::new("/"));
    for component in parent.components() {
        let Component::Normal(part) = component else {
            continue;
        };
        let next = match openat(Some(dir.as_raw_fd()), part, dir_flags, Mode::empty()) {
            Ok(fd) => owned(fd),
            Err(Errno::ENOENT) if create => {
                match mkdirat(Some(dir.as_raw_fd()), part, Mode::from_bits_truncate(0o755)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(fail(FsStep::Create, path, e, None)),
                }
                owned(
                    openat(Some(dir.as_raw_fd()), part, dir_flags, Mode::empty())
                        .map_err(|e| fail(step, path, e, None))?,
                )
            }
            Err(Errno::ENOTDIR) if is_symlink(&dir, part) => {
                return Err(fail(step, path, Errno::ELOOP, SYMLINK))
            }
            Err(e) => return Err(fail(step, path, e, None)),
        };
        // O_PATH with O_NOFOLLOW may hand back the link itself instead of failing.
        let kind = fstat(next.as_raw_fd())
            .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT)
            .map_err(|e| fail(step, path, e, None))?;
        if kind != SFlag::S_IFDIR {
            let (errno, detail) = if kind == SFlag::S_IFLNK {
                (Errno::ELOOP, SYMLINK)
            } else {
                (Errno::ENOTDIR, None)
            };
            return Err(fail(step, path, errno, detail));
        }
        dir = next;
    }
    Ok((dir, name))
}

fn is_symlink(dir: &OwnedFd, name: &OsStr) -> bool {
    fstatat(
        Some(dir.as_raw_fd()),
        name,
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

/// The content of the regular file at `path` and its permission bits, or `None` when there is
/// nothing at `path`. A symlink, a directory, a device or a FIFO is an error.
pub fn read_file(path: &Path) -> Result<Option<(Vec<u8>, u32)>, FsError> {
    let step = FsStep::Read;
    let (dir, name) = match parent_dir(path, step, false) {
        Ok(found) => found,
        Err(e) if e.errno == Errno::ENOENT => return Ok(None),
        Err(e) => return Err(e),
    };
    // Opening a device or a FIFO can have effects of its own (a terminal becomes the
    // controlling one, a tape rewinds), so the type is checked before the open, and again on
    // the descriptor in case the name was swapped in between.
    let before = fstatat(
        Some(dir.as_raw_fd()),
        name.as_os_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    );
    match before.map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT) {
        Ok(SFlag::S_IFREG) => {}
        Ok(SFlag::S_IFLNK) => return Err(fail(step, path, Errno::ELOOP, SYMLINK)),
        Ok(_) => return Err(fail(step, path, Errno::EINVAL, NOT_REGULAR)),
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(fail(step, path, e, None)),
    }
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd = match openat(
        Some(dir.as_raw_fd()),
        name.as_os_str(),
        flags,
        Mode::empty(),
    ) {
        Ok(fd) => owned(fd),
        Err(Errno::ENOENT) => return Ok(None),
        Err(Errno::ELOOP) => return Err(fail(step, path, Errno::ELOOP, SYMLINK)),
        Err(e) => return Err(fail(step, path, e, None)),
    };
    let stat = fstat(fd.as_raw_fd()).map_err(|e| fail(step, path, e, None))?;
    if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(fail(step, path, Errno::EINVAL, NOT_REGULAR));
    }
    let mut content = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut content)
        .map_err(|e| fail(step, path, io_errno(&e), None))?;
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(fail(
            step,
            path,
            Errno::EFBIG,
            Some("larger than the applier reads"),
        ));
    }
    Ok(Some((content, stat.st_mode & 0o7777)))
}

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// Creates the file at `path`, which must not exist, with `content` (parents made as needed).
pub fn create_file(path: &Path, content: &[u8]) -> Result<(), FsError> {
    let step = FsStep::Create;
    let (dir, name) = parent_dir(path, step, true)?;
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(
        Some(dir.as_raw_fd()),
        name.as_os_str(),
        flags,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(|e| fail(step, path, e, None))?;
    let mut file = std::fs::File::from(owned(fd));
    if let Err(e) = file.write_all(content) {
        // A half-written new file is worse than none.
        let _ = unlinkat(
            Some(dir.as_raw_fd()),
            name.as_os_str(),
            UnlinkatFlags::NoRemoveDir,
        );
        return Err(fail(step, path, io_errno(&e), None));
    }
    Ok(())
}

/// Replaces the file at `path` (or creates it) with `content` and permission bits `mode`: a
/// new file written beside it is renamed over its name, so readers see the old content or the
/// new, never a mix, and a hard link elsewhere keeps its content.
pub fn replace_file(path: &Path, content: &[u8], mode: u32) -> Result<(), FsError> {
    let step = FsStep::Create;
    let (dir, name) = parent_dir(path, step, true)?;
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    // The set-id bits are never carried over: the sandbox refuses them, and an edited
    // set-id program should not stay one silently.
    let mode = Mode::from_bits_truncate(mode & 0o1777);
    // O_EXCL: a name planted beside the file (a symlink, a FIFO) is never opened; a few
    // other names are tried before giving up.
    let mut attempt = 0u32;
    let (temp, fd) = loop {
        let mut temp = OsString::from(".");
        temp.push(&name);
        temp.push(format!(".cordon-patch-{}-{attempt}", std::process::id()));
        let mode_new = Mode::from_bits_truncate(0o600);
        match openat(Some(dir.as_raw_fd()), temp.as_os_str(), flags, mode_new) {
            Ok(fd) => break (temp, fd),
            Err(Errno::EEXIST) if attempt < 16 => attempt += 1,
            Err(e) => return Err(fail(step, path, e, None)),
        }
    };
    let mut file = std::fs::File::from(owned(fd));
    let written = file
        .write_all(content)
        .map_err(|e| io_errno(&e))
        .and_then(|()| nix::sys::stat::fchmod(file.as_raw_fd(), mode))
        .and_then(|()| {
            renameat(
                Some(dir.as_raw_fd()),
                temp.as_os_str(),
                Some(dir.as_raw_fd()),
                name.as_os_str(),
            )
        });
    if let Err(e) = written {
        let _ = unlinkat(
            Some(dir.as_raw_fd()),
            temp.as_os_str(),
            UnlinkatFlags::NoRemoveDir,
        );
        return Err(fail(step, path, e, None));
    }
    Ok(())
}

/// Removes the regular file at `path` (never what a symlink there points to).
pub fn remove_file(path: &Path) -> Result<(), FsError> {
    let step = FsStep::Remove;
    let (dir, name) = parent_dir(path, step, false)?;
    let stat = fstatat(
        Some(dir.as_raw_fd()),
        name.as_os_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(|e| fail(step, path, e, None))?;
    match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => {}
        SFlag::S_IFLNK => return Err(fail(step, path, Errno::ELOOP, SYMLINK)),
        _ => return Err(fail(step, path, Errno::EINVAL, NOT_REGULAR)),
    }
    unlinkat(
        Some(dir.as_raw_fd()),
        name.as_os_str(),
        UnlinkatFlags::NoRemoveDir,
    )
    .map_err(|e| fail(step, path, e, None))
}

/// `path` as bytes, for messages that must survive non-UTF-8 names.
pub fn display(path: &Path) -> String {
    String::from_utf8_lossy(path.as_os_str().as_bytes()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_normalize_is_lexical_and_absolute() {
        let cwd = Path::new("/w/sub");
        assert_eq!(normalize(cwd, "a/./b.txt"), PathBuf::from("/w/sub/a/b.txt"));
        assert_eq!(normalize(cwd, "../x"), PathBuf::from("/w/x"));
        assert_eq!(normalize(cwd, "/etc/../tmp/y"), PathBuf::from("/tmp/y"));
        assert_eq!(normalize(cwd, "../../../../z"), PathBuf::from("/z"));
    }

    #[test]
    fn patch_fs_error_reads_like_coreutils() {
        let e = fail(FsStep::Create, Path::new("/etc/x"), Errno::EACCES, None);
        assert_eq!(e.to_string(), "cannot create '/etc/x': Permission denied");
        let e = fail(FsStep::Read, Path::new("/w/l"), Errno::ELOOP, SYMLINK);
        assert_eq!(
            e.to_string(),
            "cannot open '/w/l': the path passes through a symbolic link, which the patch applier never follows (ELOOP)"
        );
    }
}
