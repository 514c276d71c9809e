//! Resolving a path one component at a time, the way the kernel's path walk does (`..` after a
//! symlink applies to the link's target), while recording every link followed.
//!
//! Two callers need this and differ only in how strict they are: profile resolution must know
//! each link a root went through and fails on anything missing ([`Mode::Strict`]); denial
//! classification names what a command most likely touched, which may not exist
//! ([`Mode::Lenient`]).
//!
//! ```ignore
//! let w = walk(Path::new("/usr/bin/../lib"), Mode::Strict, true)?;
//! assert!(w.canonical.is_absolute());
//! ```

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// The kernel's `MAXSYMLINKS`: past it a path walk fails with `ELOOP`.
const MAX_SYMLINK_HOPS: usize = 40;

/// How a walk treats what it cannot resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Every component must exist, every non-final one be a directory, and links be followed
    /// at most [`MAX_SYMLINK_HOPS`] times (`ENOENT`, `ENOTDIR`, `ELOOP` otherwise), as
    /// `realpath` requires.
    Strict,
    /// A component that cannot be inspected is taken as it is, and a walk past the link limit
    /// stops following links.
    Lenient,
}

/// One symlink followed during a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinkHop {
    /// The link itself (its directory is canonical).
    pub link: PathBuf,
    /// What it points at, as stored in the link.
    pub points_to: PathBuf,
}

/// A path resolved component by component, with every symlink it went through.
#[derive(Debug, Clone)]
pub(crate) struct Walk {
    /// The resolved path: no symlink (but a final one when not followed), `.` or `..` left.
    pub canonical: PathBuf,
    /// The links followed, in order.
    pub hops: Vec<LinkHop>,
    /// Whether the last component was found (a lenient walk goes on past a missing one).
    pub exists: bool,
}

/// Resolves the absolute `path`; `follow_last` says whether a link in the last component is
/// followed too.
pub(crate) fn walk(path: &Path, mode: Mode, follow_last: bool) -> io::Result<Walk> {
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, path);
    walk_pending(PathBuf::from("/"), Vec::new(), pending, mode, follow_last)
}

/// Resolves `rest` (relative) below a directory already walked, as [`walk`] of the joined path
/// would, without inspecting the base's components again: what a caller resolving many
/// entries below one anchor (`$HOME`, a writable root) pays once instead of per entry.
pub(crate) fn walk_below(
    base: &Walk,
    rest: &Path,
    mode: Mode,
    follow_last: bool,
) -> io::Result<Walk> {
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, rest);
    walk_pending(
        base.canonical.clone(),
        base.hops.clone(),
        pending,
        mode,
        follow_last,
    )
}

fn walk_pending(
    mut out: PathBuf,
    mut hops: Vec<LinkHop>,
    mut pending: Vec<OsString>,
    mode: Mode,
    follow_last: bool,
) -> io::Result<Walk> {
    // Lenient: once a component does not exist, nothing below it does either, so the rest is
    // taken as written without asking the file system again.
    let mut missing = false;
    // The root, or a base a caller walked, exists.
    let mut exists = true;
    while let Some(part) = pending.pop() {
        if part == "/" {
            out = PathBuf::from("/");
            missing = false;
            exists = true;
            continue;
        }
        if part == ".." {
            // `out` holds no link, so its lexical parent is its real parent (which exists
            // again when what it left did not).
            out.pop();
            missing = false;
            exists = true;
            continue;
        }
        let next = out.join(&part);
        let is_last = pending.is_empty();
        if missing {
            out = next;
            continue;
        }
        let meta = match std::fs::symlink_metadata(&next) {
            Ok(meta) => meta,
            Err(e) if mode == Mode::Strict => return Err(e),
            Err(e) => {
                missing = matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR));
                exists = false;
                out = next;
                continue;
            }
        };
        exists = true;
        let follow = meta.file_type().is_symlink() && (follow_last || !is_last);
        if !follow {
            if mode == Mode::Strict && !is_last && !meta.is_dir() {
                return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
            }
            out = next;
            continue;
        }
        if hops.len() >= MAX_SYMLINK_HOPS {
            match mode {
                Mode::Strict => return Err(io::Error::from_raw_os_error(libc::ELOOP)),
                Mode::Lenient => {
                    out = next;
                    continue;
                }
            }
        }
        let points_to = match std::fs::read_link(&next) {
            Ok(target) => target,
            Err(e) if mode == Mode::Strict => return Err(e),
            Err(_) => {
                out = next;
                continue;
            }
        };
        push_components(&mut pending, &points_to);
        hops.push(LinkHop {
            link: next,
            points_to,
        });
    }
    Ok(Walk {
        canonical: out,
        hops,
        exists: exists && !missing,
    })
}

fn push_components(pending: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir => Some(OsString::from("/")),
            Component::ParentDir => Some(OsString::from("..")),
            Component::Normal(n) => Some(n.to_os_string()),
            Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    // Consumed from the end, so kept reversed; a relative link target continues from the
    // link's directory, which is where the walk stands.
    pending.extend(parts.into_iter().rev());
}
