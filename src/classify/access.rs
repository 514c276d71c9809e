//! What the policy says about one path, after resolving it the way the kernel would.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cordon_sandbox::landlock_rules::{excluded_from_roots, DEVICE_FILES};
use cordon_sandbox::policy::SandboxPolicy;
use cordon_sandbox::status::StatusRecord;

/// [`ResolveContext::protection_once_granted`](crate::profile::ResolveContext) in this
/// process's environment (`HOME`, the XDG directories): what resolution would protect.
fn protection_once_granted(target: &Path, granted: &Path) -> Option<&'static str> {
    crate::profile::ResolveContext::new(granted).protection_once_granted(target, granted)
}

/// A refused access: the rule and the smallest change that allows it.
pub(crate) struct Verdict {
    pub rule: String,
    pub allow_with: String,
}

pub(crate) struct Access<'a> {
    policy: &'a SandboxPolicy,
    cwd: &'a Path,
    /// `restriction` names of the carve-outs the helper reported as not enforced.
    downgraded: Vec<String>,
}

impl<'a> Access<'a> {
    pub fn new(policy: &'a SandboxPolicy, cwd: &'a Path, records: &[StatusRecord]) -> Self {
        let downgraded = records
            .iter()
            .filter_map(|r| match r {
                StatusRecord::Confined(receipt) => Some(&receipt.downgrades),
                _ => None,
            })
            .flatten()
            .map(|d| d.restriction.clone())
            .collect();
        Access {
            policy,
            cwd,
            downgraded,
        }
    }

    /// `path` made absolute against the cwd, with every symlink resolved; when `follow_last`
    /// is false the last component is kept as is (unlink and rename act on the link itself).
    /// Components that do not exist are kept lexically, which is what `open(O_CREAT)` creates.
    pub fn resolve(&self, path: &str, follow_last: bool) -> PathBuf {
        resolve(self.cwd, Path::new(path), follow_last)
    }

    fn enforced(&self, kind: &str, carve_out: &Path) -> bool {
        let name = format!("{kind}:{}", carve_out.display());
        !self.downgraded.contains(&name)
    }

    /// Why a write to the resolved `path` is refused, or None when the policy allows it. The
    /// suggestion grants `path` itself when it is a directory, else the one that holds it.
    pub fn write_verdict(&self, path: &Path) -> Option<Verdict> {
        let dir = if path.is_dir() {
            path
        } else {
            path.parent().unwrap_or(path)
        };
        self.change_verdict(path, dir)
    }

    /// [`write_verdict`](Self::write_verdict) for removing or renaming `path`: a right on the
    /// directory that holds it, even when it is a directory itself (a grant of the directory
    /// alone would make it a mount point that cannot be removed at all).
    pub fn removal_verdict(&self, path: &Path) -> Option<Verdict> {
        self.change_verdict(path, path.parent().unwrap_or(path))
    }

    /// Why changing `path` is refused, suggesting `dir` as the root to grant.
    fn change_verdict(&self, path: &Path, dir: &Path) -> Option<Verdict> {
        if DEVICE_FILES.iter().any(|d| path == Path::new(d)) {
            return None;
        }
        let fs = &self.policy.filesystem;
        if let Some(ro) = fs
            .read_only
            .iter()
            .find(|ro| path.starts_with(ro) && self.enforced("read_only", ro))
        {
            // A carve-out of the preset's protected paths is lifted by its name.
            let granted = fs.write.iter().find(|w| ro.starts_with(w));
            let allow_with = match granted.and_then(|w| protection_once_granted(path, w)) {
                Some(name) => format!("--unprotect {name}"),
                None => format!("remove {} from filesystem.read_only", ro.display()),
            };
            return Some(Verdict {
                rule: format!("under the read-only carve-out {}", ro.display()),
                allow_with,
            });
        }
        let writable = fs.write.iter().any(|w| path.starts_with(w));
        if let Some(denied) = self.read_carve_out(path, (!writable).then_some(dir)) {
            return Some(denied);
        }
        if writable {
            if excluded_from_roots(self.policy, path) {
                return Some(device_verdict(&format!("--writable {}", dir.display())));
            }
            return None;
        }
        // A directory whose grant would protect the target (`~` and `~/.gitconfig`) needs
        // that protection lifted too, or the rerun fails the same way.
        let allow_with = match protection_once_granted(path, dir) {
            Some(name) => format!("--unprotect {name} --writable {}", dir.display()),
            None => format!("--writable {}", dir.display()),
        };
        Some(Verdict {
            rule: "not under any writable root".into(),
            allow_with,
        })
    }

    /// Why reading (or executing) the resolved `path` is refused, or None when it is allowed.
    pub fn read_verdict(&self, path: &Path) -> Option<Verdict> {
        if DEVICE_FILES.iter().any(|d| path == Path::new(d)) {
            return None;
        }
        if let Some(denied) = self.read_carve_out(path, None) {
            return Some(denied);
        }
        let fs = &self.policy.filesystem;
        // Writable roots carry every right, reading and executing included.
        if fs.read.iter().chain(&fs.write).any(|r| path.starts_with(r)) {
            if excluded_from_roots(self.policy, path) {
                return Some(device_verdict(&format!("--readable {}", path.display())));
            }
            return None;
        }
        Some(Verdict {
            rule: "not under any readable root".into(),
            allow_with: format!("--readable {}", path.display()),
        })
    }

    /// The deny-read carve-out over `path`, if any. A preset's protected entry (`~/.gnupg`)
    /// is lifted by its name, together with `--writable write_dir` for a change outside every
    /// writable root (gpg-agent making `~/.gnupg/private-keys-v1.d` needs both).
    fn read_carve_out(&self, path: &Path, write_dir: Option<&Path>) -> Option<Verdict> {
        let denied = self
            .policy
            .filesystem
            .deny_read
            .iter()
            .find(|d| path.starts_with(d) && self.enforced("deny_read", d))?;
        let preset = crate::profile::ResolveContext::new(denied).protected_entry_at(denied);
        let allow_with = match (preset, write_dir) {
            (Some(name), Some(dir)) => format!("--unprotect {name} --writable {}", dir.display()),
            (Some(name), None) => format!("--unprotect {name}"),
            (None, _) => format!("remove {} from filesystem.deny_read", denied.display()),
        };
        Some(Verdict {
            rule: format!("under the deny-read carve-out {}", denied.display()),
            allow_with,
        })
    }
}

/// Resolves like the kernel's path walk: `..` after a symlink applies to the link's target.
fn resolve(cwd: &Path, path: &Path, follow_last: bool) -> PathBuf {
    let joined = cwd.join(path);
    // A lenient walk takes what it cannot inspect as it is, so it does not fail.
    crate::path_walk::walk(&joined, crate::path_walk::Mode::Lenient, follow_last)
        .map(|w| w.canonical)
        .unwrap_or(joined)
}

/// Whether the file's mode bits alone would refuse a read by this process once capabilities
/// are dropped (the helper drops them all, so root gets no override). None when the path
/// cannot be examined.
pub(crate) fn mode_refuses_read(path: &Path) -> Option<bool> {
    let meta = std::fs::metadata(path).ok()?;
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let groups = nix::unistd::getgroups().unwrap_or_default();
    let mode = meta.mode();
    let bits = if meta.uid() == uid {
        mode >> 6
    } else if meta.gid() == gid || groups.iter().any(|g| g.as_raw() == meta.gid()) {
        mode >> 3
    } else {
        mode
    };
    Some(bits & 0o4 == 0)
}

/// A device node (or other path under `/dev`) that a root above `/dev` does not grant.
fn device_verdict(allow_with: &str) -> Verdict {
    Verdict {
        rule: "under /dev, which the roots above it leave out: only the device allow-list and \
               the terminal the command was given are granted"
            .into(),
        allow_with: allow_with.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_dotdot_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let cwd = base.join("cwd");
        let out = base.join("out");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::os::unix::fs::symlink(&out, cwd.join("link")).unwrap();
        std::os::unix::fs::symlink(out.join("dangling"), cwd.join("file")).unwrap();

        assert_eq!(resolve(&cwd, Path::new("x"), true), cwd.join("x"));
        assert_eq!(resolve(&cwd, Path::new("../out/x"), true), out.join("x"));
        assert_eq!(resolve(&cwd, Path::new("link/new"), true), out.join("new"));
        assert_eq!(resolve(&cwd, Path::new("link/../cwd"), true), cwd);
        // A dangling link is followed to where O_CREAT would create the file...
        assert_eq!(resolve(&cwd, Path::new("file"), true), out.join("dangling"));
        // ...but unlink acts on the link itself.
        assert_eq!(resolve(&cwd, Path::new("file"), false), cwd.join("file"));
    }

    #[test]
    fn symlink_loops_end() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::os::unix::fs::symlink(&a, &a).unwrap();
        let resolved = resolve(dir.path(), Path::new("a/x"), true);
        assert!(resolved.ends_with("x"));
    }
}
