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

use std::cell::RefCell;
use std::collections::HashMap;
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

/// The answers of one [`memoized`] scope: a resolution asks about the same few directories
/// (the working directory's components, `/tmp`, `$HOME`) once per root, protected entry and
/// plantable place; within one resolution their answers are taken as fixed, as each single
/// walk already takes them between its own steps.
#[derive(Default)]
struct Memo {
    /// What one `lstat` (or `stat`, when following) told: the mode, or the errno.
    stats: HashMap<(PathBuf, bool), Result<u32, i32>>,
    links: HashMap<PathBuf, Result<PathBuf, i32>>,
}

thread_local! {
    static MEMO: RefCell<Option<Memo>> = const { RefCell::new(None) };
}

/// Runs `f` with the file system's answers to [`stat_mode`] and link reads remembered until it
/// returns (nested scopes share the outer one). Only for work that reads and does not write:
/// an answer is not asked again, so a change made inside the scope would go unseen.
pub(crate) fn memoized<T>(f: impl FnOnce() -> T) -> T {
    struct EndScope;
    impl Drop for EndScope {
        fn drop(&mut self) {
            MEMO.with(|m| *m.borrow_mut() = None);
        }
    }
    let outermost = MEMO.with(|m| {
        let mut memo = m.borrow_mut();
        if memo.is_some() {
            return false;
        }
        *memo = Some(Memo::default());
        true
    });
    // Not `then_some`: its argument is made, and dropped, either way, which would end the
    // outer scope from inside a nested one.
    let _end = if outermost { Some(EndScope) } else { None };
    f()
}

/// The mode of `path` (`follow`: of what a final link points at), remembered within a
/// [`memoized`] scope.
pub(crate) fn stat_mode(path: &Path, follow: bool) -> io::Result<u32> {
    use std::os::unix::fs::MetadataExt;
    remembered(
        |m| &mut m.stats,
        (path.to_path_buf(), follow),
        || {
            let meta = if follow {
                std::fs::metadata(path)
            } else {
                std::fs::symlink_metadata(path)
            };
            meta.map(|m| m.mode())
        },
    )
}

/// What the link at `path` holds, remembered within a [`memoized`] scope.
fn read_link(path: &Path) -> io::Result<PathBuf> {
    remembered(
        |m| &mut m.links,
        path.to_path_buf(),
        || std::fs::read_link(path),
    )
}

/// The scope's answer for `key` in its `table`, else `ask`'s, remembered there. An error
/// without an errno is not remembered: asking again gives it again.
fn remembered<K: std::hash::Hash + Eq, V: Clone>(
    table: fn(&mut Memo) -> &mut HashMap<K, Result<V, i32>>,
    key: K,
    ask: impl FnOnce() -> io::Result<V>,
) -> io::Result<V> {
    let known = MEMO.with(|m| {
        m.borrow_mut()
            .as_mut()
            .and_then(|memo| table(memo).get(&key).cloned())
    });
    if let Some(answer) = known {
        return answer.map_err(io::Error::from_raw_os_error);
    }
    let asked = ask();
    let answer = match &asked {
        Ok(value) => Ok(value.clone()),
        Err(e) => match e.raw_os_error() {
            Some(errno) => Err(errno),
            None => return asked,
        },
    };
    MEMO.with(|m| {
        if let Some(memo) = m.borrow_mut().as_mut() {
            table(memo).insert(key, answer);
        }
    });
    asked
}

/// Whether a mode from [`stat_mode`] is a symbolic link's.
pub(crate) fn is_symlink_mode(mode: u32) -> bool {
    mode & libc::S_IFMT == libc::S_IFLNK
}

/// Whether a mode from [`stat_mode`] is a directory's.
pub(crate) fn is_dir_mode(mode: u32) -> bool {
    mode & libc::S_IFMT == libc::S_IFDIR
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
        let file_mode = match stat_mode(&next, false) {
            Ok(file_mode) => file_mode,
            Err(e) if mode == Mode::Strict => return Err(e),
            Err(e) => {
                missing = matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR));
                exists = false;
                out = next;
                continue;
            }
        };
        exists = true;
        let follow = is_symlink_mode(file_mode) && (follow_last || !is_last);
        if !follow {
            if mode == Mode::Strict && !is_last && !is_dir_mode(file_mode) {
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
        let points_to = match read_link(&next) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memoized_scope_asks_once_and_forgets_when_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let file = base.join("f");
        std::fs::write(&file, "x").unwrap();
        std::os::unix::fs::symlink("f", base.join("link")).unwrap();
        let seen_inside = memoized(|| {
            let first = walk(&base.join("link"), Mode::Strict, true).unwrap();
            // Changed behind the scope's back: the scope keeps its first answers.
            std::fs::remove_file(base.join("link")).unwrap();
            std::fs::remove_file(&file).unwrap();
            let again = walk(&base.join("link"), Mode::Strict, true).unwrap();
            assert_eq!(first.canonical, again.canonical);
            assert_eq!(again.hops.len(), 1);
            // Nested scopes share the outer one's answers.
            memoized(|| stat_mode(&file, false).is_ok())
        });
        assert!(seen_inside);
        // Outside the scope the file system is asked again.
        let err = walk(&base.join("link"), Mode::Strict, true).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(
            stat_mode(&file, false).unwrap_err().raw_os_error(),
            Some(libc::ENOENT)
        );
        // A missing path's errno is remembered as such.
        memoized(|| {
            let missing = stat_mode(&base.join("none"), true).unwrap_err();
            assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
            std::fs::write(base.join("none"), "").unwrap();
            let still = stat_mode(&base.join("none"), true).unwrap_err();
            assert_eq!(still.raw_os_error(), Some(libc::ENOENT));
        });
        assert!(stat_mode(&base.join("none"), true).is_ok_and(|m| !is_dir_mode(m)));
    }
}
