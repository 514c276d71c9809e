//! Which symlinks the parent may follow when it turns a profile entry into a granted root.
//!
//! The parent runs unconfined. If it followed a symlink that a confined command of an earlier
//! run planted (`work/frontend -> /`), the next run would be granted whatever the link points
//! at. So every root is resolved component by component (`lstat`, `readlink`), and each link
//! is judged by the directory that holds it: a link lying at or under a *plantable place* (a
//! directory some run could have been allowed to write) is not trusted. Links elsewhere
//! (`/bin -> usr/bin`, `~/ws -> /data/ws`) are followed as the kernel would.
//!
//! Plantable places are those a confined command of a previous run could have written under
//! the same invocation: the invoking directory, the working directory, `/tmp`, `$TMPDIR` and
//! every writable root the profile and the command line name, each both as written (before any
//! link is followed) and at its canonical location.

use std::io;
use std::path::{Path, PathBuf};

use crate::path_walk::Mode;
pub(crate) use crate::path_walk::Walk;

/// Resolves an absolute `path` the way `realpath` does (every component must exist), but
/// records each link followed so that the caller can judge where it lies.
pub(crate) fn walk(path: &Path) -> io::Result<Walk> {
    crate::path_walk::walk(path, Mode::Strict, true)
}

/// Directories in which a confined command of an earlier run could have planted a link.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlantablePlaces {
    places: Vec<PathBuf>,
}

/// A link that lies inside a plantable place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlantedLink {
    /// The link.
    pub link: PathBuf,
    /// What it points at, as stored.
    pub points_to: PathBuf,
    /// The plantable place that holds it.
    pub place: PathBuf,
}

impl PlantablePlaces {
    /// Adds `path` as written and, when it exists, at its canonical location.
    pub fn add(&mut self, path: &Path) {
        let lexical: PathBuf = path.components().collect();
        if let Ok(walk) = walk(&lexical) {
            self.push(walk.canonical);
        }
        self.push(lexical);
    }

    fn push(&mut self, path: PathBuf) {
        if !self.places.contains(&path) {
            self.places.push(path);
        }
    }

    /// The first link of `walk` whose directory lies at or under a plantable place.
    pub fn first_planted(&self, walk: &Walk) -> Option<PlantedLink> {
        walk.hops.iter().find_map(|hop| {
            let dir = hop.link.parent()?;
            // The nearest place is the one a person recognises (the workspace, not `/`).
            let place = self
                .places
                .iter()
                .filter(|p| dir.starts_with(p))
                .max_by_key(|p| p.components().count())?;
            Some(PlantedLink {
                link: hop.link.clone(),
                points_to: hop.points_to.clone(),
                place: place.clone(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn walk_matches_canonicalize_and_records_every_link() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("real/sub")).unwrap();
        symlink("real", base.join("rel")).unwrap();
        symlink(base.join("rel/sub"), base.join("abs")).unwrap();
        let w = walk(&base.join("abs/../sub/.")).unwrap();
        assert_eq!(w.canonical, base.join("real/sub"));
        assert_eq!(
            w.canonical,
            std::fs::canonicalize(base.join("abs/../sub")).unwrap()
        );
        let links: Vec<_> = w.hops.iter().map(|h| h.link.clone()).collect();
        assert_eq!(links, vec![base.join("abs"), base.join("rel")]);
    }

    #[test]
    fn walk_fails_like_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        symlink(base.join("loop"), base.join("loop")).unwrap();
        std::fs::write(base.join("file"), "").unwrap();
        let errno = |p: &str| walk(&base.join(p)).unwrap_err().raw_os_error();
        assert_eq!(errno("loop"), Some(libc::ELOOP));
        assert_eq!(errno("missing/x"), Some(libc::ENOENT));
        assert_eq!(errno("file/x"), Some(libc::ENOTDIR));
    }

    #[test]
    fn a_link_is_planted_only_when_its_directory_is_a_place() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("ws/deep")).unwrap();
        std::fs::create_dir_all(base.join("data")).unwrap();
        symlink("/", base.join("ws/deep/up")).unwrap();
        symlink(base.join("data"), base.join("outer")).unwrap();
        let mut places = PlantablePlaces::default();
        places.add(&base.join("ws"));
        let planted = places
            .first_planted(&walk(&base.join("ws/deep/up/etc")).unwrap())
            .unwrap();
        assert_eq!(planted.link, base.join("ws/deep/up"));
        assert_eq!(planted.place, base.join("ws"));
        assert_eq!(
            places.first_planted(&walk(&base.join("outer")).unwrap()),
            None
        );
    }
}
