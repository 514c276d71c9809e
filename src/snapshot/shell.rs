//! Which shell the agent's commands run in, and what kind of shell it is.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The shell families a snapshot can be made for. The kind decides the capture script, the
/// validation command and the wrapper syntax, so it is derived from the binary's file name
/// (`/bin/sh` is `Sh` even where it is bash in POSIX mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShellKind {
    /// GNU bash.
    Bash,
    /// zsh.
    Zsh,
    /// A POSIX `sh`, typically dash.
    Sh,
}

impl ShellKind {
    /// The kind named by a shell binary's path, e.g. `/usr/bin/zsh` or `bash5.2`; `None` for
    /// shells a snapshot cannot be made for (fish, csh, ...).
    pub fn from_path(path: &Path) -> Option<ShellKind> {
        let name = path.file_name()?.as_bytes();
        // Versioned installs (`bash5.2`, `zsh-5.9`) are the same shell; strip the suffix.
        let end = name
            .iter()
            .rposition(|b| !(b.is_ascii_digit() || *b == b'.' || *b == b'-'))
            .map_or(0, |i| i + 1);
        match &name[..end] {
            b"bash" => Some(ShellKind::Bash),
            b"zsh" => Some(ShellKind::Zsh),
            b"sh" | b"dash" | b"ash" => Some(ShellKind::Sh),
            _ => None,
        }
    }

    /// A short lowercase name, used in file headers and messages.
    pub fn name(self) -> &'static str {
        match self {
            ShellKind::Bash => "bash",
            ShellKind::Zsh => "zsh",
            ShellKind::Sh => "sh",
        }
    }
}

/// A shell binary and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shell {
    /// The binary, absolute when it came from `detect_shell`.
    pub path: PathBuf,
    /// Its kind.
    pub kind: ShellKind,
}

impl Shell {
    /// A shell from a path, if its kind is supported. The path is not checked for existence.
    pub fn new(path: impl Into<PathBuf>) -> Result<Shell, ShellError> {
        let path = path.into();
        match ShellKind::from_path(&path) {
            Some(kind) => Ok(Shell { path, kind }),
            None => Err(ShellError::Unsupported { path }),
        }
    }
}

/// Why no usable shell was found.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The shell is not bash, zsh or sh.
    #[error("shell {path:?} is not supported for snapshots (supported: bash, zsh, sh/dash)")]
    Unsupported {
        /// The shell that was found.
        path: PathBuf,
    },
    /// A shell named without a slash was not found on `PATH`.
    #[error("shell {name:?} was not found on PATH")]
    NotFound {
        /// The requested name.
        name: OsString,
    },
    /// Neither a request, `$SHELL` nor the passwd entry named a shell.
    #[error("no shell requested, $SHELL is unset and the passwd entry for uid {uid} has no shell")]
    NoneConfigured {
        /// The current user id.
        uid: u32,
    },
    /// `getpwuid` failed.
    #[error("could not read the passwd entry for uid {uid}: {source}")]
    Passwd {
        /// The current user id.
        uid: u32,
        /// The lookup error.
        #[source]
        source: nix::Error,
    },
}

/// Finds the shell to snapshot: `requested` if given, else `$SHELL`, else the login shell from
/// the passwd entry. The first source that names a shell decides; an unsupported shell there is
/// an error rather than a reason to look further, because the agent's commands would run in
/// that shell and a snapshot of another one would not apply to them.
pub fn detect_shell(requested: Option<&Path>) -> Result<Shell, ShellError> {
    detect_shell_from(
        requested,
        std::env::var_os("SHELL"),
        std::env::var_os("PATH"),
    )
}

/// [`detect_shell`] with the environment passed in, so that it can be tested without touching
/// the process environment.
pub fn detect_shell_from(
    requested: Option<&Path>,
    env_shell: Option<OsString>,
    env_path: Option<OsString>,
) -> Result<Shell, ShellError> {
    let chosen: PathBuf = if let Some(p) = requested.filter(|p| !p.as_os_str().is_empty()) {
        p.to_path_buf()
    } else if let Some(s) = env_shell.filter(|s| !s.is_empty()) {
        PathBuf::from(s)
    } else {
        passwd_shell()?
    };
    let resolved = resolve_on_path(&chosen, env_path.as_deref())?;
    Shell::new(resolved)
}

fn passwd_shell() -> Result<PathBuf, ShellError> {
    let uid = nix::unistd::getuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(user)) if !user.shell.as_os_str().is_empty() => Ok(user.shell),
        Ok(_) => Err(ShellError::NoneConfigured { uid: uid.as_raw() }),
        Err(source) => Err(ShellError::Passwd {
            uid: uid.as_raw(),
            source,
        }),
    }
}

/// A bare name (`zsh`) is looked up on `PATH` the way `execvp` would; anything with a slash is
/// taken as given.
fn resolve_on_path(name: &Path, env_path: Option<&OsStr>) -> Result<PathBuf, ShellError> {
    if name.as_os_str().as_bytes().contains(&b'/') {
        return Ok(name.to_path_buf());
    }
    let search = env_path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    for dir in search.as_bytes().split(|b| *b == b':') {
        if dir.is_empty() {
            continue;
        }
        let candidate = Path::new(OsStr::from_bytes(dir)).join(name);
        if nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK).is_ok() {
            return Ok(candidate);
        }
    }
    Err(ShellError::NotFound {
        name: name.as_os_str().to_os_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_kind_from_names() {
        let k = |p: &str| ShellKind::from_path(Path::new(p));
        assert_eq!(k("/bin/bash"), Some(ShellKind::Bash));
        assert_eq!(k("bash5.2"), Some(ShellKind::Bash));
        assert_eq!(k("/usr/bin/zsh-5.9"), Some(ShellKind::Zsh));
        assert_eq!(k("/bin/sh"), Some(ShellKind::Sh));
        assert_eq!(k("/usr/bin/dash"), Some(ShellKind::Sh));
        assert_eq!(k("/usr/bin/fish"), None);
        assert_eq!(k("/"), None);
    }

    #[test]
    fn snapshot_detect_prefers_request_then_env() {
        let s =
            detect_shell_from(Some(Path::new("/bin/zsh")), Some("/bin/bash".into()), None).unwrap();
        assert_eq!(s.kind, ShellKind::Zsh);
        let s = detect_shell_from(None, Some("/bin/bash".into()), None).unwrap();
        assert_eq!(s.path, PathBuf::from("/bin/bash"));
        let s =
            detect_shell_from(Some(Path::new("dash")), None, Some("/usr/bin:/bin".into())).unwrap();
        assert_eq!(s.path, PathBuf::from("/usr/bin/dash"));
        assert!(matches!(
            detect_shell_from(Some(Path::new("/usr/bin/fish")), None, None),
            Err(ShellError::Unsupported { .. })
        ));
        // The passwd entry is the last resort; whatever it names must at least parse.
        match detect_shell_from(None, None, None) {
            Ok(s) => assert!(s.path.is_absolute()),
            Err(e) => assert!(matches!(
                e,
                ShellError::Unsupported { .. } | ShellError::NoneConfigured { .. }
            )),
        }
    }
}
