//! A key that changes whenever what a login shell would set up may have changed.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::shell::ShellKind;

/// The startup files a login shell of `kind` reads, plus the interactive file the capture
/// script sources, given a way to read environment variables (`HOME`, `ZDOTDIR`, `ENV`,
/// `BASH_ENV`). Alternatives such as bash's `~/.bash_profile | ~/.bash_login | ~/.profile` are
/// all listed: creating the first one changes which is read, so each must be part of the key.
/// The scripts `/etc/profile` sources on Debian, Ubuntu, Fedora and Arch (`/etc/profile.d/*.sh`)
/// are listed too, so that adding or editing one makes a new key; what those scripts source in
/// turn is not followed.
pub fn startup_files(kind: ShellKind, env: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let in_home = |name: &str| home.as_ref().map(|h| h.join(name));
    let from_env = |var: &str| env(var).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut files: Vec<Option<PathBuf>> = Vec::new();
    match kind {
        ShellKind::Bash => {
            files.push(Some("/etc/profile".into()));
            files.extend(profile_d().into_iter().map(Some));
            files.push(in_home(".bash_profile"));
            files.push(in_home(".bash_login"));
            files.push(in_home(".profile"));
            files.push(Some("/etc/bash.bashrc".into()));
            files.push(in_home(".bashrc"));
            files.push(from_env("BASH_ENV"));
        }
        ShellKind::Zsh => {
            let zdot = from_env("ZDOTDIR").or_else(|| home.clone());
            let in_zdot = |name: &str| zdot.as_ref().map(|d| d.join(name));
            for (global, user) in [
                ("zshenv", ".zshenv"),
                ("zprofile", ".zprofile"),
                ("zshrc", ".zshrc"),
                ("zlogin", ".zlogin"),
            ] {
                // Debian builds use /etc/zsh/, upstream and most others /etc/.
                files.push(Some(Path::new("/etc/zsh").join(global)));
                files.push(Some(Path::new("/etc").join(global)));
                files.push(in_zdot(user));
            }
        }
        ShellKind::Sh => {
            files.push(Some("/etc/profile".into()));
            files.extend(profile_d().into_iter().map(Some));
            files.push(in_home(".profile"));
            files.push(from_env("ENV"));
        }
    }
    files.into_iter().flatten().collect()
}

/// `/etc/profile.d/*.sh`, sorted (the order `/etc/profile`'s glob sources them in).
fn profile_d() -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir("/etc/profile.d") else {
        return Vec::new();
    };
    let mut scripts: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|ext| ext == "sh"))
        .collect();
    scripts.sort();
    scripts
}

/// A hex SHA-256 over the shell's path, size and mtime, and each startup file's path, size,
/// mtime and content (or the fact that it is missing or unreadable). Editing `.bashrc`,
/// creating `.bash_profile` or upgrading the shell all produce a new key.
pub fn cache_key(shell_path: &Path, startup_files: &[PathBuf]) -> String {
    let mut h = Sha256::new();
    h.update(b"cordon-snapshot-key-v1\0");
    field(&mut h, shell_path.as_os_str().as_bytes());
    match fs::metadata(shell_path) {
        Ok(m) => stat_fields(&mut h, &m),
        Err(_) => h.update(b"missing\0"),
    }
    for file in startup_files {
        field(&mut h, file.as_os_str().as_bytes());
        match read_with_meta(file) {
            Ok((meta, content)) => {
                stat_fields(&mut h, &meta);
                h.update(b"content\0");
                h.update(Sha256::digest(&content));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => h.update(b"missing\0"),
            // Unreadable now may be readable later; keep the two states apart.
            Err(_) => h.update(b"unreadable\0"),
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Length-prefixed, so that no two different lists of fields hash the same bytes.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

fn stat_fields(h: &mut Sha256, m: &fs::Metadata) {
    h.update(m.size().to_le_bytes());
    h.update(m.mtime().to_le_bytes());
    h.update(m.mtime_nsec().to_le_bytes());
}

/// The most of a startup file the key reads; beyond it, size and mtime alone tell edits apart.
const MAX_KEYED_CONTENT: u64 = 16 * 1024 * 1024;

/// A startup file's metadata and content, read so that nothing placed at its name can stall
/// or exhaust the (unconfined) caller: `O_NONBLOCK` so that a FIFO never waits for a writer,
/// only regular files are read (a symlink to `/dev/zero` is not), and at most
/// [`MAX_KEYED_CONTENT`] bytes.
fn read_with_meta(path: &Path) -> io::Result<(fs::Metadata, Vec<u8>)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut content = Vec::new();
    file.take(MAX_KEYED_CONTENT).read_to_end(&mut content)?;
    Ok((meta, content))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_startup_file_lists() {
        let env = |k: &str| match k {
            "HOME" => Some(OsString::from("/h")),
            "ZDOTDIR" => Some(OsString::from("/z")),
            "ENV" => Some(OsString::from("/h/.shrc")),
            _ => None,
        };
        let bash = startup_files(ShellKind::Bash, env);
        // This machine's /etc/profile.d scripts come right after /etc/profile.
        let with_profile_d = |rest: &[&str]| -> Vec<PathBuf> {
            std::iter::once(PathBuf::from("/etc/profile"))
                .chain(profile_d())
                .chain(rest.iter().map(PathBuf::from))
                .collect()
        };
        assert_eq!(
            bash,
            with_profile_d(&[
                "/h/.bash_profile",
                "/h/.bash_login",
                "/h/.profile",
                "/etc/bash.bashrc",
                "/h/.bashrc"
            ])
        );
        assert!(profile_d()
            .iter()
            .all(|p| p.starts_with("/etc/profile.d") && p.extension().is_some_and(|e| e == "sh")));
        let zsh = startup_files(ShellKind::Zsh, env);
        assert!(zsh.contains(&PathBuf::from("/z/.zshrc")));
        assert!(zsh.contains(&PathBuf::from("/etc/zsh/zlogin")));
        assert!(!zsh.iter().any(|p| p.starts_with("/h")));
        assert_eq!(
            startup_files(ShellKind::Sh, env),
            with_profile_d(&["/h/.profile", "/h/.shrc"])
        );
    }

    #[test]
    fn snapshot_cache_key_tracks_edits() {
        let home = tempfile::tempdir().unwrap();
        let rc = home.path().join(".bashrc");
        let files = vec![rc.clone(), home.path().join(".bash_profile")];
        let shell = Path::new("/bin/sh");
        let k0 = cache_key(shell, &files);
        fs::write(&rc, "alias a=b\n").unwrap();
        let k1 = cache_key(shell, &files);
        assert_ne!(k0, k1);
        assert_eq!(k1, cache_key(shell, &files));
        // Same size and (possibly) the same mtime second: the content hash still differs.
        fs::write(&rc, "alias a=c\n").unwrap();
        let k2 = cache_key(shell, &files);
        assert_ne!(k1, k2);
        fs::write(home.path().join(".bash_profile"), "").unwrap();
        assert_ne!(k2, cache_key(shell, &files));
        assert_ne!(k2, cache_key(Path::new("/bin/bash"), &files));
        assert_eq!(k2.len(), 64);
    }

    #[test]
    fn snapshot_cache_key_never_waits_on_a_fifo_or_reads_a_device() {
        let home = tempfile::tempdir().unwrap();
        let fifo = home.path().join(".bash_login");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let zero = home.path().join(".profile");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        // Returns at once (a blocking open of the FIFO or a read of /dev/zero would not).
        let key = cache_key(Path::new("/bin/sh"), &[fifo, zero]);
        assert_eq!(key.len(), 64);
    }
}
