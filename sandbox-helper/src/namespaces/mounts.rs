//! The mount view. It is the one bubblewrap builds (the whole tree bound read-only, writable
//! roots and carve-outs bound over it, a private `/dev` and `/proc`, nothing else reachable),
//! built without bubblewrap's second copy of the tree: every source is cloned from the
//! untouched tree first, then the namespace's own copy of the tree, private since the first
//! step, is made read-only in place and the clones are attached over it.
//!
//! Why no `pivot_root`: bubblewrap assembles a new root beside the old one and detaches the old
//! one because its new root holds only what was bound into it, and the old root everything
//! else. Here the new root would be a recursive clone of the whole old one: the same mounts,
//! with the same attributes set on every one of them, so detaching the old root would remove
//! a duplicate and reach nothing less. Making that clone, detaching the old root (which waits
//! for an RCU grace period) and tearing both down again was the largest single cost of the
//! layer. What stays true: every mount reachable in the namespace is one of the namespace's
//! own copies, read-only (and `nosuid,nodev`) unless it is a writable root, and the mounts the
//! private `/dev` and `/proc` cover stay covered (the copies the kernel made for a user
//! namespace are locked to their parents: nobody can unmount them to reveal what is under).
//!
//! The view keeps every path where it was (Landlock rules and the working directory need no
//! translation) and changes what the mounts allow:
//! - the whole tree read-only at the mount level, which also stops chmod, chown, utime and
//!   xattr changes, even for uid 0;
//! - writable roots bound writable on top, `nosuid,nodev`;
//! - `read_only` carve-outs bound read-only inside them (a file or a directory);
//! - `deny_read` paths covered: a directory by an empty read-only tmpfs, a file by an empty
//!   read-only file; a writable root below a hidden directory is bound again inside it, and
//!   a readable one read-only (the more specific rule wins);
//! - a minimal `/dev` and a fresh `/proc`.
//!
//! Every path is opened with `RESOLVE_NO_SYMLINKS` and mounted through its descriptor (the new
//! mount API: `open_tree`, `mount_setattr`, `move_mount`, `fsopen`), so a symbolic link planted
//! in a writable root can neither redirect a mount nor be skipped: it fails the run.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::SetupError;
use crate::status::Downgrade;

/// What the view is built from, precomputed from the policy.
#[derive(Debug, Clone, Default)]
pub struct ViewPlan {
    /// Writable roots.
    pub write: Vec<PathBuf>,
    /// Read-only carve-outs inside writable roots.
    pub read_only: Vec<PathBuf>,
    /// Hidden paths.
    pub deny_read: Vec<PathBuf>,
    /// Readable roots below a hidden directory: the more specific rule wins, so each is bound
    /// back, read-only, into the empty directory that hides its parent (`deny_read = ["~"]`
    /// with `read = ["~/.cache/pip"]`).
    pub reallowed: Vec<PathBuf>,
    /// Device nodes or directories the policy adds to the minimal `/dev`.
    pub devices: Vec<PathBuf>,
    /// The host's `/dev/pts` instead of a private one: the command was given a terminal, or
    /// the policy names one, and a terminal can only be reopened by name where it lives.
    pub host_terminals: bool,
}

/// Where the tmpfs holding the empty file for hidden files is attached while it is cloned: a
/// directory every Linux system has (a /tmp may not), covered by the private /dev anyway.
const STAGING: &str = "/dev";

/// Devices every command gets, bound from the host (those the host lacks are left out).
const BASE_DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Symbolic links every `/dev` has, and what they point to.
const DEV_LINKS: [(&str, &str); 5] = [
    ("ptmx", "pts/ptmx"),
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Parts of a fresh `/proc` that configure the kernel rather than describe processes; bound
/// read-only over themselves as bubblewrap does (writes there need privileges in the initial
/// namespace anyway, this keeps them out of reach if a kernel gets that wrong).
const PROC_READ_ONLY: [&str; 4] = ["sys", "sysrq-trigger", "irq", "bus"];

/// The downgrade recorded when a fresh `/proc` cannot be mounted.
pub const PRIVATE_PROC: &str = "private_proc";

/// The mode a placeholder is made with (a directory also searchable, so that a lookup below it
/// finds nothing rather than being refused), and how a later run tells one (left by a run that
/// was killed, or shared with a run still going) from an entry of the person's: an empty file
/// or directory of the caller's with exactly this mode. Nobody but root can write it outside.
const PLACEHOLDER_FILE_MODE: libc::mode_t = 0o444;
const PLACEHOLDER_DIR_MODE: libc::mode_t = 0o555;

/// How often a placeholder is made again when another run removed it between this run's
/// creating it and its lock (each retry needs a full removal by another run in that window).
const PLACEHOLDER_ATTEMPTS: usize = 16;

/// What a placeholder is. An empty file, because that costs an inode and nothing else: a
/// directory costs a block, and on a file system mounted with `discard` freeing it again
/// makes `rmdir` wait for the device (1.5 ms here, on ext4 over a virtual disk). A directory
/// only for `.git`: git takes an empty directory for no repository and looks further up, while
/// an empty `.git` file is an invalid gitfile that stops every git command there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PlaceholderKind {
    File,
    Directory,
}

impl PlaceholderKind {
    fn mode(self) -> libc::mode_t {
        match self {
            PlaceholderKind::File => PLACEHOLDER_FILE_MODE,
            PlaceholderKind::Directory => PLACEHOLDER_DIR_MODE,
        }
    }

    fn for_name(name: &CString) -> PlaceholderKind {
        if name.as_bytes() == b".git" {
            PlaceholderKind::Directory
        } else {
            PlaceholderKind::File
        }
    }
}

/// An empty file (or directory) at a `read_only` path that did not exist, so that the command
/// cannot create it; removed again by the monitor once the sandbox is gone.
///
/// Runs in one workspace share placeholders: each holds a shared `flock` on it for as long as
/// its sandbox lives, and the last one (the one whose exclusive lock succeeds) removes it. A
/// run killed before it could remove its placeholder leaves an empty entry with
/// the placeholder's mode, which the next run there takes over and removes.
#[derive(Debug)]
pub struct Placeholder {
    /// Where it is.
    pub path: PathBuf,
    parent: OwnedFd,
    name: CString,
    kind: PlaceholderKind,
    /// The placeholder itself, holding the shared lock.
    held: OwnedFd,
}

impl Placeholder {
    /// Removes the placeholder when no other run holds it and it is still the empty one this
    /// run locked. Best effort: it runs after the command, when there is nobody left to report
    /// to, and an entry that is not empty (or was replaced) was not ours to remove. Through the
    /// parent's descriptor, so a rename of the parent cannot point it elsewhere.
    pub fn remove(&self) {
        // SAFETY: flock on a descriptor this struct owns.
        if unsafe { libc::flock(self.held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return; // another run's sandbox still stands on it: that run removes it
        }
        let Some(st) = same_inode(&self.parent, &self.name, &self.held) else {
            return;
        };
        let flags = match self.kind {
            // rmdir itself refuses a directory that is not empty.
            PlaceholderKind::Directory => libc::AT_REMOVEDIR,
            PlaceholderKind::File if st.st_size == 0 => 0,
            PlaceholderKind::File => return, // someone (root) wrote to it: theirs now
        };
        // SAFETY: unlinkat on a directory descriptor this struct owns and a NUL-terminated name.
        unsafe { libc::unlinkat(self.parent.as_raw_fd(), self.name.as_ptr(), flags) };
    }

    /// The descriptors the monitor keeps open until [`Placeholder::remove`].
    pub fn fds(&self) -> [RawFd; 2] {
        [self.parent.as_raw_fd(), self.held.as_raw_fd()]
    }
}

/// Removes the placeholder at `path` that a run's monitor could not remove: inside the user
/// namespace, an entry of a directory whose owner is not mapped there cannot be unlinked, so
/// root's run in another user's directory left every placeholder behind. Called by the parent,
/// outside, once the run is over; the monitor's checks hold (still a placeholder: the
/// caller's, with exactly the placeholder's mode, a file also empty; no other run standing on
/// it; reached without following a link), so it removes nothing else.
pub fn remove_leftover_placeholder(path: &Path) {
    let Ok(fd) = open_beneath(None, path) else {
        return;
    };
    if let Some(placeholder) = adopt_placeholder(path, &fd) {
        placeholder.remove();
    }
}

/// The status of `held` when `name` in `parent` still leads to it.
fn same_inode(parent: &OwnedFd, name: &CString, held: &OwnedFd) -> Option<libc::stat> {
    // SAFETY: `stat` is plain data for which all-zero is a valid value.
    let (mut named, mut st): (libc::stat, libc::stat) = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat and fstat into valid buffers, on descriptors borrowed for the call and a
    // NUL-terminated name.
    let same = unsafe {
        libc::fstatat(
            parent.as_raw_fd(),
            name.as_ptr(),
            &mut named,
            libc::AT_SYMLINK_NOFOLLOW,
        ) == 0
            && libc::fstat(held.as_raw_fd(), &mut st) == 0
    } && named.st_dev == st.st_dev
        && named.st_ino == st.st_ino;
    same.then_some(st)
}

/// Whether `st` is a placeholder of `kind`: the caller's, with exactly its kind's mode (a
/// file also empty; a directory's emptiness `rmdir` checks).
fn is_placeholder(st: &libc::stat, kind: PlaceholderKind) -> bool {
    let type_matches = match kind {
        PlaceholderKind::File => st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_size == 0,
        PlaceholderKind::Directory => st.st_mode & libc::S_IFMT == libc::S_IFDIR,
    };
    // SAFETY: geteuid cannot fail.
    type_matches && st.st_mode & 0o7777 == kind.mode() && st.st_uid == unsafe { libc::geteuid() }
}

/// Makes sure every `read_only` path exists, so that it can be covered: a missing one gets a
/// placeholder at its first missing component (which then is the carve-out: nothing can be
/// created beneath it), a path blocked by a file protects that file. Runs as the caller, before
/// any namespace, in the host's view. Returns the paths to bind read-only.
pub fn prepare_read_only(plan: &ViewPlan) -> Result<(Vec<PathBuf>, Vec<Placeholder>), SetupError> {
    let mut targets = Vec::new();
    let mut placeholders: Vec<Placeholder> = Vec::new();
    let release = |placeholders: &[Placeholder]| {
        for placeholder in placeholders.iter().rev() {
            placeholder.remove();
        }
    };
    for path in &plan.read_only {
        match open_beneath(None, path) {
            Ok(fd) => {
                // An empty directory with the placeholder's mode is one: shared with a run
                // still going, or left by one that was killed. Taken over like a new one.
                if let Some(placeholder) = adopt_placeholder(path, &fd) {
                    placeholders.push(placeholder);
                }
                targets.push(path.clone());
                continue;
            }
            Err(e)
                if e.raw_os_error() == Some(libc::ENOENT)
                    || e.raw_os_error() == Some(libc::ENOTDIR) => {}
            Err(e) => {
                release(&placeholders);
                return Err(view_error("open carve-out", path, e));
            }
        }
        // Below a placeholder made for an earlier entry: already covered by it.
        if placeholders.iter().any(|p| path.starts_with(&p.path)) {
            continue;
        }
        match first_missing(plan, path) {
            Ok((target, placeholder)) => {
                targets.push(target);
                placeholders.extend(placeholder);
            }
            Err(e) => {
                release(&placeholders);
                return Err(e);
            }
        }
    }
    Ok((targets, placeholders))
}

/// The placeholder `path` (open as `fd`) is, when it is one (see [`is_placeholder`]), locked
/// shared like a new one.
fn adopt_placeholder(path: &Path, fd: &OwnedFd) -> Option<Placeholder> {
    let name = CString::new(path.file_name()?.as_bytes()).ok()?;
    let kind = PlaceholderKind::for_name(&name);
    // SAFETY: `stat` is plain data for which all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat into a valid buffer on a borrowed descriptor.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || !is_placeholder(&st, kind) {
        return None;
    }
    let parent = open_beneath(None, path.parent()?).ok()?;
    let held = lock_placeholder(&parent, &name, kind).ok().flatten()?;
    Some(Placeholder {
        path: path.to_path_buf(),
        parent,
        name,
        kind,
        held,
    })
}

/// Opens `name` in `parent` as a `kind` and takes the shared lock on it, then checks that the
/// name still leads to it (a run that was removing it has not removed it meanwhile). `None`
/// when it is gone or is not a `kind` (a link, a FIFO, the other kind); an error for anything
/// else.
fn lock_placeholder(
    parent: &OwnedFd,
    name: &CString,
    kind: PlaceholderKind,
) -> io::Result<Option<OwnedFd>> {
    // Never blocks on a FIFO planted there, never follows a link.
    let mut flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    if kind == PlaceholderKind::Directory {
        flags |= libc::O_DIRECTORY;
    }
    // SAFETY: openat on a directory descriptor and a NUL-terminated name; the result is owned
    // below.
    let raw = unsafe { libc::openat(parent.as_raw_fd(), name.as_ptr(), flags) };
    if raw < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP) => Ok(None),
            _ => Err(err),
        };
    }
    // SAFETY: `raw` is a descriptor just returned to this function.
    let held = unsafe { OwnedFd::from_raw_fd(raw) };
    // Blocking: a run holding it exclusively only checks and removes it.
    // SAFETY: flock on the descriptor owned above.
    if unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_SH) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let Some(st) = same_inode(parent, name, &held) else {
        return Ok(None);
    };
    let type_matches = match kind {
        PlaceholderKind::File => st.st_mode & libc::S_IFMT == libc::S_IFREG,
        PlaceholderKind::Directory => st.st_mode & libc::S_IFMT == libc::S_IFDIR,
    };
    Ok(type_matches.then_some(held))
}

/// Walks `path` from its writable root down to the first component that does not exist and
/// makes it a placeholder; a non-directory on the way is protected instead.
fn first_missing(
    plan: &ViewPlan,
    path: &Path,
) -> Result<(PathBuf, Option<Placeholder>), SetupError> {
    let root = plan
        .write
        .iter()
        .filter(|w| path.starts_with(w))
        .max_by_key(|w| w.as_os_str().len())
        .ok_or_else(|| {
            view_error(
                "find the writable root of",
                path,
                io::Error::from_raw_os_error(libc::EINVAL),
            )
        })?;
    let mut existing = root.clone();
    for component in path
        .strip_prefix(root)
        .unwrap_or(Path::new(""))
        .components()
    {
        let next = existing.join(component);
        match open_beneath(None, &next) {
            Ok(fd) => {
                if !is_dir(&fd) {
                    return Ok((next, None)); // a file where a directory should be: keep it
                }
                existing = next;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                let parent =
                    open_beneath(None, &existing).map_err(|e| view_error("open", &existing, e))?;
                let name = cstring(component.as_os_str().as_bytes(), &next)?;
                return make_placeholder(parent, name, next);
            }
            Err(e) => return Err(view_error("open carve-out", &next, e)),
        }
    }
    Ok((existing, None))
}

/// Makes `name` in `parent` a placeholder, or shares the one another run made a moment ago.
fn make_placeholder(
    parent: OwnedFd,
    name: CString,
    path: PathBuf,
) -> Result<(PathBuf, Option<Placeholder>), SetupError> {
    let kind = PlaceholderKind::for_name(&name);
    for _ in 0..PLACEHOLDER_ATTEMPTS {
        let made = create_exclusive(&parent, &name, kind);
        if let Err(err) = &made {
            if err.raw_os_error() != Some(libc::EEXIST) {
                return Err(view_error(
                    "create a placeholder for the carve-out",
                    &path,
                    io::Error::from_raw_os_error(err.raw_os_error().unwrap_or(libc::EIO)),
                ));
            }
        }
        let held = match lock_placeholder(&parent, &name, kind) {
            Ok(Some(held)) => held,
            // Removed by the run that held it, between the creation and the lock: again.
            Ok(None) if !exists_at(&parent, &name) => continue,
            // Something else took the name (a file where a directory was made, a link): it
            // exists now and is covered like any existing path, opened without following links.
            Ok(None) => return Ok((path, None)),
            Err(e) => return Err(view_error("lock the placeholder", &path, e)),
        };
        if made.is_ok() {
            // The umask may have taken bits off; the mode is how later runs recognise it.
            // SAFETY: fchmod on the descriptor just opened.
            unsafe { libc::fchmod(held.as_raw_fd(), kind.mode()) };
        } else {
            // Made by someone else: shared only if it is a placeholder too; an entry of the
            // person's is an existing path, covered and never removed.
            // SAFETY: `stat` is plain data for which all-zero is a valid value.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: fstat into a valid buffer on the descriptor locked above.
            let ours =
                unsafe { libc::fstat(held.as_raw_fd(), &mut st) } == 0 && is_placeholder(&st, kind);
            if !ours {
                return Ok((path, None));
            }
        }
        return Ok((
            path.clone(),
            Some(Placeholder {
                path,
                parent,
                name,
                kind,
                held,
            }),
        ));
    }
    Err(view_error(
        "create a placeholder for the carve-out (other runs kept removing it)",
        &path,
        io::Error::from_raw_os_error(libc::EAGAIN),
    ))
}

/// Creates `name` in `parent` as an empty `kind`, failing with `EEXIST` when anything is there.
fn create_exclusive(parent: &OwnedFd, name: &CString, kind: PlaceholderKind) -> io::Result<()> {
    match kind {
        PlaceholderKind::Directory => {
            // SAFETY: mkdirat on a directory descriptor and a NUL-terminated name.
            if unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), PLACEHOLDER_DIR_MODE) }
                != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        PlaceholderKind::File => {
            // SAFETY: openat with O_CREAT|O_EXCL on a directory descriptor and a NUL-terminated
            // name; the descriptor is closed right away (the lock is taken on a fresh open).
            let fd = unsafe {
                libc::openat(
                    parent.as_raw_fd(),
                    name.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    PLACEHOLDER_FILE_MODE as libc::c_uint,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: close of the descriptor just returned.
            unsafe { libc::close(fd) };
        }
    }
    Ok(())
}

/// Whether `name` exists in `parent` (as anything, links not followed).
fn exists_at(parent: &OwnedFd, name: &CString) -> bool {
    // SAFETY: `stat` is plain data for which all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat into a valid buffer with a borrowed descriptor and a NUL-terminated name.
    unsafe {
        libc::fstatat(
            parent.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ) == 0
    }
}

/// One mount of the view, in the order they are made.
enum Entry {
    /// A clone of a host tree, with its mount attributes already set.
    Tree(OwnedFd),
    /// An empty read-only directory over a hidden one.
    HideDir,
    /// An empty read-only file over a hidden one.
    HideFile,
}

/// Builds the view in place. Runs in the init, in its new mount namespace, holding
/// the capabilities of the new user namespace. Returns what it had to leave out.
pub fn build(plan: &ViewPlan, read_only: &[PathBuf]) -> Result<Vec<Downgrade>, SetupError> {
    // Before any mount: nothing done here may propagate back to the host's namespace.
    mount_private_root()?;

    // The namespace's own copy of the host's tree, changed in place into the view (see the
    // module documentation for why this is bubblewrap's view without a second copy).
    let root =
        open_beneath(None, Path::new("/")).map_err(|e| view_error("open", Path::new("/"), e))?;
    // Clone every source before anything covers it or makes it read-only (a hidden directory
    // covers what is below it, the private /dev the host's devices).
    let mut entries: Vec<(PathBuf, Entry)> = Vec::new();
    for path in &plan.write {
        entries.push((
            path.clone(),
            Entry::Tree(clone(path, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)?),
        ));
    }
    for path in read_only {
        entries.push((path.clone(), Entry::Tree(clone(path, MOUNT_ATTR_RDONLY)?)));
    }
    for path in &plan.reallowed {
        let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        entries.push((path.clone(), Entry::Tree(clone(path, attrs)?)));
    }
    // A carve-out's directories between its writable root and itself become mount points
    // (bound writable onto themselves): a mount point cannot be renamed, so the command cannot
    // move `sub/` (and the protected `sub/.git` with it) aside and put its own `sub/.git` in
    // place. The carve-out itself and the writable root are mount points already.
    let mut pinned: Vec<PathBuf> = Vec::new();
    for path in read_only {
        let Some(root) = plan
            .write
            .iter()
            .filter(|w| path.starts_with(w))
            .max_by_key(|w| w.as_os_str().len())
        else {
            continue;
        };
        for ancestor in path
            .ancestors()
            .skip(1)
            .take_while(|a| *a != root.as_path())
        {
            if !pinned.iter().any(|p| p == ancestor) && !read_only.iter().any(|r| r == ancestor) {
                pinned.push(ancestor.to_path_buf());
            }
        }
    }
    for path in pinned {
        let tree = clone(&path, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)?;
        entries.push((path, Entry::Tree(tree)));
    }
    for path in &plan.deny_read {
        // Inside a directory already hidden, with nothing bound back between the two, there is
        // nothing left to hide; covering it would only spend the hiding tmpfs's few inodes.
        let bound_back = |hidden: &Path| {
            plan.write
                .iter()
                .chain(read_only)
                .chain(&plan.reallowed)
                .any(|b| path.starts_with(b) && b.starts_with(hidden) && b != hidden)
        };
        if plan
            .deny_read
            .iter()
            .any(|h| path.starts_with(h) && path != h && !bound_back(h))
        {
            continue;
        }
        match open_beneath(None, path) {
            Ok(fd) if is_dir(&fd) => entries.push((path.clone(), Entry::HideDir)),
            Ok(_) => entries.push((path.clone(), Entry::HideFile)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {} // nothing to hide
            Err(e) => return Err(view_error("open hidden path", path, e)),
        }
    }
    // Device nodes must not be nodev; read-only at the mount level still lets them be written.
    let device_attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
    let mut devices: Vec<(PathBuf, OwnedFd)> = Vec::new();
    for name in BASE_DEVICES {
        let path = Path::new("/dev").join(name);
        match clone(&path, device_attrs) {
            Ok(fd) => devices.push((path, fd)),
            Err(SetupError::Mount { source, .. })
                if source.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
    }
    for path in &plan.devices {
        devices.push((path.clone(), clone(path, device_attrs)?));
    }
    let terminals = if plan.host_terminals {
        Terminals::Host(clone(
            Path::new("/dev/pts"),
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        )?)
    } else {
        Terminals::Private
    };
    let hidden_files = entries
        .iter()
        .filter(|(_, e)| matches!(e, Entry::HideFile))
        .count();
    // Parents before children, so that a deeper mount lands on top; entries under /dev and
    // /proc come after the private /dev and /proc, which would otherwise cover them.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let (late, early): (Vec<_>, Vec<_>) = entries
        .into_iter()
        .partition(|(p, _)| p.starts_with("/dev") || p.starts_with("/proc"));

    let mut empty_files = empty_files(hidden_files)?;
    // Everything read-only, and no device node or setuid bit of the host's tree takes effect
    // (the devices the command gets are bound into its own /dev below). Recursive: every
    // mount of the tree, those the private /dev and /proc cover included.
    set_attrs(
        &root,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID,
        true,
        Path::new("/"),
    )?;

    let mut hidden: Vec<PathBuf> = Vec::new();
    for (path, entry) in early {
        mount_entry(&root, &path, entry, &mut empty_files, &mut hidden)?;
    }
    build_dev(&root, devices, terminals)?;
    let downgrades = build_proc(&root)?;
    // Roots the policy names below /dev get their mount points in the new /dev tmpfs, which
    // then becomes read-only with the hidden directories.
    hidden.push(PathBuf::from("/dev"));
    for (path, entry) in late {
        mount_entry(&root, &path, entry, &mut empty_files, &mut hidden)?;
    }
    // Hidden directories (and /dev) become read-only last, once the mount points of writable
    // roots below them exist.
    for path in &hidden {
        let fd = resolve(&root, Path::new("/"), path, false, true)?;
        set_attrs(&fd, MOUNT_ATTR_RDONLY, false, path)?;
    }
    Ok(downgrades)
}

/// `count` detached read-only mounts of one empty file, to cover hidden files with. The file
/// lives on a small tmpfs that is attached at [`STAGING`] only while it is cloned and then
/// detached again, so nothing of it but the clones is left in the view. None when `count` is 0,
/// and then no tmpfs either.
fn empty_files(count: usize) -> Result<Vec<OwnedFd>, SetupError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let staging_path = Path::new(STAGING);
    let staging = new_fs("tmpfs", &[("mode", "0700")], 0, staging_path)?;
    let staging_point =
        open_beneath(None, staging_path).map_err(|e| view_error("open", staging_path, e))?;
    attach(&staging, &staging_point, staging_path)?;
    make_file(&staging, "empty", staging_path)?;
    let empty = open_at(&staging, "empty", staging_path)?;
    let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    // Cloned while attached: older kernels clone only from mounts of this namespace.
    let clones = (0..count)
        .map(|_| clone_fd(&empty, attrs, staging_path))
        .collect::<Result<Vec<_>, _>>()?;
    drop((empty, staging_point, staging));
    let c_path = cstring(staging_path.as_os_str().as_bytes(), staging_path)?;
    // SAFETY: umount2 of the tmpfs just attached there, the top mount at that path.
    if unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) } != 0 {
        return Err(view_error(
            "detach the staging tmpfs from",
            staging_path,
            io::Error::last_os_error(),
        ));
    }
    Ok(clones)
}

/// Whether `path` lies strictly below one of the hidden directories, whose tmpfs may get the
/// mount points of what is bound beneath it.
fn below(hidden: &[PathBuf], path: &Path) -> bool {
    hidden.iter().any(|h| path.starts_with(h) && path != h)
}

fn mount_entry(
    root: &OwnedFd,
    path: &Path,
    entry: Entry,
    empty_files: &mut Vec<OwnedFd>,
    hidden: &mut Vec<PathBuf>,
) -> Result<(), SetupError> {
    match entry {
        Entry::Tree(tree) => {
            let target = resolve(
                root,
                Path::new("/"),
                path,
                below(hidden, path),
                is_dir(&tree),
            )?;
            attach(&tree, &target, path)
        }
        Entry::HideDir => {
            let target = resolve(root, Path::new("/"), path, below(hidden, path), true)?;
            let fs = new_fs(
                "tmpfs",
                &[("mode", "0755"), ("size", "16k"), ("nr_inodes", "64")],
                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                path,
            )?;
            attach(&fs, &target, path)?;
            hidden.push(path.to_path_buf());
            Ok(())
        }
        Entry::HideFile => {
            let target = resolve(root, Path::new("/"), path, below(hidden, path), false)?;
            // `build` makes one empty file for each HideFile entry.
            let file = empty_files.pop().ok_or_else(|| {
                view_error(
                    "cover hidden file",
                    path,
                    io::Error::from_raw_os_error(libc::ENOENT),
                )
            })?;
            attach(&file, &target, path)
        }
    }
}

/// A tmpfs `/dev` with the base devices, the policy's devices, a private `/dev/shm` and a
/// private `devpts`, read-only itself.
/// Where `/dev/pts` comes from.
enum Terminals {
    /// A new devpts instance: the command's own terminals only.
    Private,
    /// The host's, cloned: Landlock then grants only the terminal the command was given and
    /// those the policy names.
    Host(OwnedFd),
}

fn build_dev(
    root: &OwnedFd,
    devices: Vec<(PathBuf, OwnedFd)>,
    terminals: Terminals,
) -> Result<(), SetupError> {
    let dev_path = Path::new("/dev");
    let target = resolve(root, Path::new("/"), dev_path, false, true)?;
    let dev = new_fs(
        "tmpfs",
        &[("mode", "0755"), ("size", "64k")],
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        dev_path,
    )?;
    attach(&dev, &target, dev_path)?;
    for (path, tree) in devices {
        let is_dir = is_dir(&tree);
        // The tmpfs is new and empty: a name directly below it is created without looking.
        let node = match path.strip_prefix(dev_path) {
            Ok(name) if name.components().count() == 1 => {
                if is_dir {
                    make_dir(&dev, name, &path)?;
                    open_at(&dev, name, &path)?
                } else {
                    create_file(&dev, name, &path)?
                }
            }
            _ => resolve(&dev, dev_path, &path, true, is_dir)?,
        };
        attach(&tree, &node, &path)?;
    }
    let shm = new_fs(
        "tmpfs",
        &[("mode", "1777")],
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        Path::new("/dev/shm"),
    )?;
    make_dir(&dev, "shm", Path::new("/dev/shm"))?;
    attach(
        &shm,
        &open_at(&dev, "shm", Path::new("/dev/shm"))?,
        Path::new("/dev/shm"),
    )?;
    let pts = match terminals {
        Terminals::Private => new_devpts()?,
        Terminals::Host(tree) => tree,
    };
    make_dir(&dev, "pts", Path::new("/dev/pts"))?;
    attach(
        &pts,
        &open_at(&dev, "pts", Path::new("/dev/pts"))?,
        Path::new("/dev/pts"),
    )?;
    for (name, to) in DEV_LINKS {
        let path = dev_path.join(name);
        let (c_to, c_name) = (
            cstring(to.as_bytes(), &path)?,
            cstring(name.as_bytes(), &path)?,
        );
        // SAFETY: symlinkat with NUL-terminated strings and a directory descriptor.
        if unsafe { libc::symlinkat(c_to.as_ptr(), dev.as_raw_fd(), c_name.as_ptr()) } != 0 {
            return Err(view_error("create link", &path, io::Error::last_os_error()));
        }
    }
    // Read-only once the roots the policy names below it have their mount points (`build`).
    Ok(())
}

/// A fresh `/proc` for the pid namespace. Where the kernel refuses it (EPERM: a container whose
/// own `/proc` is partly covered), the command gets an empty `/proc` rather than the host's,
/// which would show every other process's command line; the receipt says so.
fn build_proc(root: &OwnedFd) -> Result<Vec<Downgrade>, SetupError> {
    let proc_path = Path::new("/proc");
    let target = resolve(root, Path::new("/"), proc_path, false, true)?;
    let attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    match new_fs("proc", &[], attrs, proc_path) {
        Ok(proc) => {
            attach(&proc, &target, proc_path)?;
            for name in PROC_READ_ONLY {
                let path = proc_path.join(name);
                let fd = match open_at(&proc, name, &path) {
                    Ok(fd) => fd,
                    Err(SetupError::Mount { source, .. })
                        if source.raw_os_error() == Some(libc::ENOENT) =>
                    {
                        continue
                    }
                    Err(e) => return Err(e),
                };
                let ro = clone_fd(&fd, MOUNT_ATTR_RDONLY | attrs, &path)?;
                attach(&ro, &fd, &path)?;
            }
            Ok(Vec::new())
        }
        Err(SetupError::Mount { source, .. })
            if matches!(
                source.raw_os_error(),
                Some(libc::EPERM) | Some(libc::EACCES)
            ) =>
        {
            let empty = new_fs(
                "tmpfs",
                &[("mode", "0555"), ("size", "4k"), ("nr_inodes", "4")],
                attrs | MOUNT_ATTR_RDONLY,
                proc_path,
            )?;
            attach(&empty, &target, proc_path)?;
            Ok(vec![Downgrade {
                restriction: PRIVATE_PROC.into(),
                reason: format!(
                    "the kernel refused to mount a fresh /proc ({source}; usually a container whose /proc is partly covered), so the command has an empty /proc instead of one showing its own processes"
                ),
            }])
        }
        Err(e) => Err(e),
    }
}

fn mount_private_root() -> Result<(), SetupError> {
    // SAFETY: mount with a NUL-terminated target and NULL source, type and data: only changes
    // propagation.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(view_error(
            "make mount propagation private on",
            Path::new("/"),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

// The new mount API, by number (libc has no wrappers).
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
const MOUNT_ATTR_RDONLY: u64 = 0x01;
const MOUNT_ATTR_NOSUID: u64 = 0x02;
const MOUNT_ATTR_NODEV: u64 = 0x04;
const MOUNT_ATTR_NOEXEC: u64 = 0x08;
const FSCONFIG_SET_FLAG: libc::c_uint = 0;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;

/// `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// A detached recursive copy of the mount tree at `path` (host view), with `attrs` set on
/// every mount in it. Recursive because a copy of a mount without its locked submounts would
/// reveal what they cover, which the kernel refuses.
fn clone(path: &Path, attrs: u64) -> Result<OwnedFd, SetupError> {
    let fd = open_beneath(None, path).map_err(|e| view_error("open", path, e))?;
    clone_fd(&fd, attrs, path)
}

fn clone_fd(fd: &OwnedFd, attrs: u64, path: &Path) -> Result<OwnedFd, SetupError> {
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as libc::c_uint
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_EMPTY_PATH as libc::c_uint;
    // SAFETY: open_tree on a descriptor with an empty path; returns a new descriptor or -1.
    let tree = unsafe { libc::syscall(libc::SYS_open_tree, fd.as_raw_fd(), c"".as_ptr(), flags) };
    if tree < 0 {
        return Err(view_error(
            "clone the mount tree at",
            path,
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as RawFd) };
    set_attrs(&tree, attrs, true, path)?;
    Ok(tree)
}

/// Sets mount attributes (only sets: locked flags such as a host mount's `nosuid` are never
/// cleared, which the kernel would refuse inside a user namespace).
fn set_attrs(fd: &OwnedFd, attrs: u64, recursive: bool, path: &Path) -> Result<(), SetupError> {
    if attrs == 0 {
        return Ok(());
    }
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: mount_setattr on a descriptor with an empty path and a mount_attr of the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(view_error(
            "set mount attributes (read-only, nosuid, nodev) on",
            path,
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Attaches a detached mount onto the directory or file `target` refers to.
fn attach(tree: &OwnedFd, target: &OwnedFd, path: &Path) -> Result<(), SetupError> {
    // SAFETY: move_mount between two descriptors with empty paths.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc != 0 {
        return Err(view_error("mount over", path, io::Error::last_os_error()));
    }
    Ok(())
}

/// A new detached filesystem mount of `fstype` with string `options` and mount `attrs`.
fn new_fs(
    fstype: &str,
    options: &[(&str, &str)],
    attrs: u64,
    path: &Path,
) -> Result<OwnedFd, SetupError> {
    let fs = fs_open(fstype, path)?;
    for (key, value) in options {
        fs_config(&fs, FSCONFIG_SET_STRING, key, Some(value), path)?;
    }
    fs_mount(fs, attrs, path)
}

/// A private devpts instance: the command's own terminals, none of the host's.
fn new_devpts() -> Result<OwnedFd, SetupError> {
    let path = Path::new("/dev/pts");
    let fs = fs_open("devpts", path)?;
    fs_config(&fs, FSCONFIG_SET_FLAG, "newinstance", None, path)?;
    fs_config(&fs, FSCONFIG_SET_STRING, "ptmxmode", Some("0666"), path)?;
    fs_config(&fs, FSCONFIG_SET_STRING, "mode", Some("620"), path)?;
    fs_mount(fs, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, path)
}

fn fs_open(fstype: &str, path: &Path) -> Result<OwnedFd, SetupError> {
    let name = cstring(fstype.as_bytes(), path)?;
    // SAFETY: fsopen with a NUL-terminated filesystem name.
    let fd = unsafe { libc::syscall(libc::SYS_fsopen, name.as_ptr(), FSOPEN_CLOEXEC) };
    if fd < 0 {
        return Err(view_error(
            "create a filesystem for",
            path,
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn fs_config(
    fs: &OwnedFd,
    cmd: libc::c_uint,
    key: &str,
    value: Option<&str>,
    path: &Path,
) -> Result<(), SetupError> {
    let key = cstring(key.as_bytes(), path)?;
    let value = value.map(|v| cstring(v.as_bytes(), path)).transpose()?;
    let value_ptr = value.as_ref().map_or(std::ptr::null(), |v| v.as_ptr());
    // SAFETY: fsconfig with NUL-terminated key and value (or NULL for a flag).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            cmd,
            key.as_ptr(),
            value_ptr,
            0,
        )
    };
    if rc != 0 {
        return Err(view_error(
            "configure the filesystem for",
            path,
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn fs_mount(fs: OwnedFd, attrs: u64, path: &Path) -> Result<OwnedFd, SetupError> {
    // SAFETY: fsconfig CREATE with no key or value.
    if unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_char>(),
            0,
        )
    } != 0
    {
        return Err(view_error(
            "create the filesystem for",
            path,
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: fsmount on a configured filesystem context.
    let fd = unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) };
    if fd < 0 {
        return Err(view_error(
            "mount the filesystem for",
            path,
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Opens `path` (absolute in the view) below `root`, which is mounted at `root_path`, without
/// following any symbolic link. A missing component is created only when `may_create` (the
/// place is a tmpfs built here, so nothing of the host is touched): directories on the way,
/// and the last component as a directory or an empty file per `last_is_dir`.
fn resolve(
    root: &OwnedFd,
    root_path: &Path,
    path: &Path,
    may_create: bool,
    last_is_dir: bool,
) -> Result<OwnedFd, SetupError> {
    let relative = path.strip_prefix(root_path).unwrap_or(path);
    if relative.as_os_str().is_empty() {
        return open_at(root, ".", path);
    }
    match open_beneath(Some(root), relative) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) && may_create => {}
        Err(e) => return Err(view_error("open", path, e)),
    }
    let components: Vec<_> = relative.components().collect();
    let mut dir = open_at(root, ".", path)?;
    for (i, component) in components.iter().enumerate() {
        let name = component.as_os_str();
        match open_beneath(Some(&dir), Path::new(name)) {
            Ok(fd) => dir = fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                if i + 1 == components.len() && !last_is_dir {
                    make_file(&dir, name, path)?;
                } else {
                    make_dir(&dir, name, path)?;
                }
                dir = open_at(&dir, name, path)?;
            }
            Err(e) => return Err(view_error("open", path, e)),
        }
    }
    Ok(dir)
}

fn make_dir(dir: &OwnedFd, name: impl AsRef<OsStr>, path: &Path) -> Result<(), SetupError> {
    let c_name = cstring(name.as_ref().as_bytes(), path)?;
    // SAFETY: mkdirat on a directory descriptor and a NUL-terminated name.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), c_name.as_ptr(), 0o755) } != 0 {
        return Err(view_error(
            "create mount point",
            path,
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn make_file(dir: &OwnedFd, name: impl AsRef<OsStr>, path: &Path) -> Result<(), SetupError> {
    create_file(dir, name, path).map(drop)
}

/// Creates an empty file and returns its descriptor, which serves as a mount point as well as
/// a path descriptor would (one `openat` instead of a create, a close and an open).
fn create_file(dir: &OwnedFd, name: impl AsRef<OsStr>, path: &Path) -> Result<OwnedFd, SetupError> {
    let c_name = cstring(name.as_ref().as_bytes(), path)?;
    // SAFETY: openat creating a new file relative to a directory descriptor.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c_name.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o444,
        )
    };
    if fd < 0 {
        return Err(view_error(
            "create mount point",
            path,
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn open_at(dir: &OwnedFd, name: impl AsRef<OsStr>, path: &Path) -> Result<OwnedFd, SetupError> {
    open_beneath(Some(dir), Path::new(name.as_ref())).map_err(|e| view_error("open", path, e))
}

/// `openat2(O_PATH, RESOLVE_NO_SYMLINKS)`, relative to `dir` (and beneath it) or absolute.
fn open_beneath(dir: Option<&OwnedFd>, path: &Path) -> io::Result<OwnedFd> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut resolve = RESOLVE_NO_SYMLINKS;
    if dir.is_some() {
        resolve |= RESOLVE_BENEATH;
    }
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve,
    };
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `c_path` is NUL-terminated and `how` has the layout of `struct open_how`, whose
    // size is passed; both outlive the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            c_path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `struct open_how`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

fn is_dir(fd: &OwnedFd) -> bool {
    // SAFETY: `stat` is plain data for which all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat into a valid buffer on a descriptor this function borrows.
    unsafe {
        libc::fstat(fd.as_raw_fd(), &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR
    }
}

fn cstring(bytes: &[u8], path: &Path) -> Result<CString, SetupError> {
    CString::new(bytes)
        .map_err(|_| view_error("name", path, io::Error::from_raw_os_error(libc::EINVAL)))
}

fn view_error(what: &'static str, path: &Path, source: io::Error) -> SetupError {
    if source.raw_os_error() == Some(libc::ELOOP) {
        return SetupError::SymlinkInView {
            path: path.to_path_buf(),
        };
    }
    SetupError::Mount {
        what,
        path: path.to_path_buf(),
        source,
    }
}
