//! Granting a root "except" some paths beneath it, with Landlock's additive rules only.
//!
//! Landlock cannot subtract rights beneath a granted directory. So when a granted root is a
//! strict ancestor of an excluded path, the root itself is not granted; instead every entry of
//! each directory along the way to the excluded path is granted whole, except the one that
//! leads on towards it ("siblings along the path"). The directories along the way (the root
//! included) get only the listing rights the caller chooses, so `ls /` still works.
//!
//! The price is real and is reported in the receipt: an entry created later directly in one of
//! those directories is not covered, because no rule names it.
//!
//! ```
//! use std::path::{Path, PathBuf};
//! use cordon_sandbox::path_expansion::{expand, Entry, EntryKind, Grant};
//!
//! // A tiny `/` with `/dev` excluded: `usr` is granted whole, `/` itself only for listing,
//! // the `bin -> usr/bin` link needs no rule (Landlock checks the resolved target).
//! let mut list = |dir: &Path| {
//!     assert_eq!(dir, Path::new("/"));
//!     Ok(vec![
//!         Entry::new("usr", EntryKind::Directory),
//!         Entry::new("dev", EntryKind::Directory),
//!         Entry::new("bin", EntryKind::Symlink),
//!     ])
//! };
//! let expansion = expand(Path::new("/"), &[Path::new("/dev")], &mut list).unwrap();
//! assert_eq!(expansion.grants, [
//!     Grant::ListingOnly(PathBuf::from("/")),
//!     Grant::Whole { path: PathBuf::from("/usr"), is_dir: Some(true) },
//! ]);
//! assert_eq!(expansion.narrowed, [PathBuf::from("/")]);
//! ```

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// What kind of entry a directory holds, as far as expansion cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory: granted whole, or expanded further if an excluded path lies beneath it.
    Directory,
    /// A symbolic link: needs no rule, since Landlock checks the object it resolves to.
    Symlink,
    /// A character or block device node: never granted by expansion, because device nodes are
    /// exactly what a "read everything" root must not hand out (see `landlock_rules`).
    Device,
    /// Anything else (regular file, socket, fifo): granted whole.
    Other,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name within its directory.
    pub name: OsString,
    /// Its kind.
    pub kind: EntryKind,
}

impl Entry {
    /// An entry named `name` of kind `kind`.
    pub fn new(name: impl Into<OsString>, kind: EntryKind) -> Entry {
        Entry {
            name: name.into(),
            kind,
        }
    }
}

/// One rule the expansion asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The root's full rights on this path and everything beneath it. `is_dir` is known when
    /// the path came from a listing, which saves a `stat` when the rule is built.
    Whole {
        /// The path.
        path: PathBuf,
        /// Whether it is a directory, when known.
        is_dir: Option<bool>,
    },
    /// Only the listing rights on this directory (they are inherited beneath it, so the
    /// excluded subtree can still be listed, never read).
    ListingOnly(PathBuf),
}

/// The rules that stand in for one root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expansion {
    /// The rules, in walk order.
    pub grants: Vec<Grant>,
    /// Directories granted entry by entry: whatever appears in them later is not covered.
    pub narrowed: Vec<PathBuf>,
}

/// Expands `root` so that none of `excluded` is covered, using `list` to read directories.
///
/// An excluded path equal to `root`, or above it, does not narrow it: a root the policy names
/// is granted as named. Excluded paths outside `root` are ignored. Only directories that are
/// strict ancestors of an excluded path are listed, so the cost is a few `readdir`s.
/// A directory that `list` reports missing (`NotFound`, `NotADirectory`) has nothing beneath it
/// to exclude and is granted whole; any other listing error is returned.
pub fn expand(
    root: &Path,
    excluded: &[&Path],
    list: &mut impl FnMut(&Path) -> io::Result<Vec<Entry>>,
) -> io::Result<Expansion> {
    let mut expansion = Expansion::default();
    walk(root, None, excluded, list, &mut expansion)?;
    Ok(expansion)
}

fn walk(
    dir: &Path,
    is_dir: Option<bool>,
    excluded: &[&Path],
    list: &mut impl FnMut(&Path) -> io::Result<Vec<Entry>>,
    out: &mut Expansion,
) -> io::Result<()> {
    let beneath: Vec<&Path> = excluded
        .iter()
        .copied()
        .filter(|e| e.starts_with(dir) && *e != dir)
        .collect();
    let whole = Grant::Whole {
        path: dir.to_path_buf(),
        is_dir,
    };
    if beneath.is_empty() {
        out.grants.push(whole);
        return Ok(());
    }
    let entries = match list(dir) {
        Ok(entries) => entries,
        Err(e) if is_missing(&e) => {
            out.grants.push(whole);
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    out.grants.push(Grant::ListingOnly(dir.to_path_buf()));
    out.narrowed.push(dir.to_path_buf());
    for entry in entries {
        let child = dir.join(&entry.name);
        if beneath.contains(&child.as_path()) {
            continue;
        }
        match entry.kind {
            EntryKind::Symlink | EntryKind::Device => {}
            EntryKind::Directory => walk(&child, Some(true), &beneath, list, out)?,
            EntryKind::Other => out.grants.push(Grant::Whole {
                path: child,
                is_dir: Some(false),
            }),
        }
    }
    Ok(())
}

fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// The real listing: `readdir` of `dir`, with each entry's kind from `d_type` (or `lstat` on
/// file systems that do not fill it in).
pub fn list_directory(dir: &Path) -> io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = match entry.file_type() {
            Ok(t) => kind_of(t),
            // Gone between readdir and lstat: nothing to grant.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        entries.push(Entry {
            name: entry.file_name(),
            kind,
        });
    }
    Ok(entries)
}

fn kind_of(t: std::fs::FileType) -> EntryKind {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        EntryKind::Directory
    } else if t.is_symlink() {
        EntryKind::Symlink
    } else if t.is_char_device() || t.is_block_device() {
        EntryKind::Device
    } else {
        EntryKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A fake tree: directory path -> entries. Directories not in the map do not exist.
    fn fake(tree: &[(&str, &[(&str, EntryKind)])]) -> BTreeMap<PathBuf, Vec<Entry>> {
        tree.iter()
            .map(|(dir, entries)| {
                let entries = entries.iter().map(|(n, k)| Entry::new(*n, *k)).collect();
                (PathBuf::from(dir), entries)
            })
            .collect()
    }

    fn run(
        tree: &BTreeMap<PathBuf, Vec<Entry>>,
        root: &str,
        excluded: &[&str],
    ) -> (Vec<String>, Vec<PathBuf>, Vec<PathBuf>) {
        let excluded: Vec<&Path> = excluded.iter().map(Path::new).collect();
        let mut listed = Vec::new();
        let mut list = |dir: &Path| {
            listed.push(dir.to_path_buf());
            tree.get(dir)
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        };
        let expansion = expand(Path::new(root), &excluded, &mut list).unwrap();
        let grants = expansion
            .grants
            .iter()
            .map(|g| match g {
                Grant::Whole { path, .. } => format!("whole {}", path.display()),
                Grant::ListingOnly(path) => format!("list {}", path.display()),
            })
            .collect();
        (grants, expansion.narrowed, listed)
    }

    use EntryKind::{Device, Directory, Other, Symlink};

    fn root_fs() -> BTreeMap<PathBuf, Vec<Entry>> {
        fake(&[
            (
                "/",
                &[
                    ("usr", Directory),
                    ("dev", Directory),
                    ("bin", Symlink),
                    ("etc", Directory),
                    ("vmlinuz", Other),
                    ("console", Device),
                    ("home", Directory),
                ],
            ),
            (
                "/dev",
                &[("null", Device), ("pts", Directory), ("shm", Directory)],
            ),
            ("/home", &[("a", Directory), ("b", Directory)]),
            ("/home/a", &[("src", Directory), (".ssh", Directory)]),
        ])
    }

    #[test]
    fn one_exclusion_grants_the_siblings_and_lists_only_the_ancestor() {
        let (grants, narrowed, listed) = run(&root_fs(), "/", &["/dev"]);
        assert_eq!(
            grants,
            [
                "list /",
                "whole /usr",
                "whole /etc",
                "whole /vmlinuz",
                "whole /home"
            ]
        );
        assert_eq!(narrowed, [PathBuf::from("/")]);
        // Only the directory along the path is read.
        assert_eq!(listed, [PathBuf::from("/")]);
    }

    #[test]
    fn nested_exclusions_descend_only_along_their_paths() {
        let (grants, narrowed, listed) =
            run(&root_fs(), "/", &["/dev", "/dev/pts", "/home/a/.ssh"]);
        assert_eq!(
            grants,
            [
                "list /",
                "whole /usr",
                "whole /etc",
                "whole /vmlinuz",
                "list /home",
                "list /home/a",
                "whole /home/a/src",
                "whole /home/b",
            ]
        );
        assert_eq!(
            narrowed,
            ["/", "/home", "/home/a"].map(PathBuf::from).to_vec()
        );
        // /dev is excluded whole, so /dev/pts beneath it costs nothing more.
        assert_eq!(
            listed,
            ["/", "/home", "/home/a"].map(PathBuf::from).to_vec()
        );
    }

    #[test]
    fn an_excluded_path_equal_to_or_above_the_root_leaves_it_as_named() {
        let tree = root_fs();
        assert_eq!(run(&tree, "/dev", &["/dev"]).0, ["whole /dev"]);
        assert_eq!(run(&tree, "/dev/shm", &["/dev"]).0, ["whole /dev/shm"]);
        assert_eq!(run(&tree, "/dev", &["/dev"]).2, Vec::<PathBuf>::new());
    }

    #[test]
    fn an_excluded_path_outside_every_root_changes_nothing() {
        let tree = root_fs();
        let (grants, narrowed, listed) = run(&tree, "/home", &["/dev", "/homework"]);
        assert_eq!(grants, ["whole /home"]);
        assert!(narrowed.is_empty());
        assert!(listed.is_empty());
    }

    #[test]
    fn several_roots_expand_independently() {
        let tree = root_fs();
        let excluded = ["/dev", "/home/a/.ssh"];
        let all: Vec<Vec<String>> = ["/", "/home/a", "/usr"]
            .iter()
            .map(|root| run(&tree, root, &excluded).0)
            .collect();
        assert_eq!(all[0][0], "list /");
        assert!(all[0].contains(&"list /home/a".to_owned()));
        assert_eq!(all[1], ["list /home/a", "whole /home/a/src"]);
        assert_eq!(all[2], ["whole /usr"]);
    }

    #[test]
    fn a_missing_directory_along_the_path_is_granted_whole() {
        // /opt is not in the fake tree: nothing beneath it exists to exclude.
        let tree = root_fs();
        assert_eq!(run(&tree, "/opt", &["/opt/x/y"]).0, ["whole /opt"]);
        // /srv is not listed by / either: the walk never goes there.
        let (grants, _, listed) = run(&tree, "/", &["/srv/x"]);
        assert!(!grants.iter().any(|g| g.contains("srv")));
        assert_eq!(grants[0], "list /");
        assert_eq!(listed, [PathBuf::from("/")]);
    }

    #[test]
    fn listing_errors_other_than_missing_are_returned() {
        let mut list = |_: &Path| Err(io::Error::from_raw_os_error(libc::EACCES));
        let err = expand(Path::new("/"), &[Path::new("/dev")], &mut list).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    }

    #[test]
    fn the_real_listing_reports_kinds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("f"), "").unwrap();
        std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
        let mut entries = list_directory(dir.path()).unwrap();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(
            entries,
            [
                Entry::new("d", Directory),
                Entry::new("f", Other),
                Entry::new("l", Symlink)
            ]
        );
        let devices = list_directory(Path::new("/dev")).unwrap();
        let null = devices.iter().find(|e| e.name == "null");
        assert_eq!(null.map(|e| e.kind), Some(Device));
    }
}
