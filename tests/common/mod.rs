//! Shared fixtures for integration tests: a private directory tree per test (never under /tmp,
//! which the default profile makes writable), and runners for the real `cordon` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// A private tree: `work/` is the command's cwd, `home/` its HOME, `outside/` neither.
pub struct Tree {
    _base: tempfile::TempDir,
    pub root: PathBuf,
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub outside: PathBuf,
}

impl Tree {
    pub fn new() -> Tree {
        let base = tempfile::tempdir_in(private_base()).expect("temp dir");
        let root = std::fs::canonicalize(base.path()).expect("canonical temp dir");
        let (cwd, home, outside) = (root.join("work"), root.join("home"), root.join("outside"));
        for dir in [&cwd, &home, &outside] {
            std::fs::create_dir(dir).expect("mkdir");
        }
        Tree {
            _base: base,
            root,
            cwd,
            home,
            outside,
        }
    }

    /// `cordon` with cwd, HOME and a clean TMPDIR/knob environment.
    pub fn cordon(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordon"));
        cmd.current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env_remove("TMPDIR")
            .env_remove("CORDON_LANDLOCK_ABI_MAX")
            // The `cordon` binary under test confines too; a standalone helper in the build
            // directory may be stale (cargo builds it only when its own package is tested).
            .env("CORDON_HELPER", "self");
        cmd
    }

    /// `cordon run ARGS...`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cordon()
            .arg("run")
            .args(args)
            .output()
            .expect("spawn cordon")
    }

    /// `cordon run [PRE...] -- python3 -c PROBE+SCRIPT`.
    pub fn py(&self, pre: &[&str], script: &str) -> Output {
        let code = format!("{PROBE}\n{script}");
        self.cordon()
            .arg("run")
            .args(pre)
            .arg("--")
            .arg(python())
            .arg("-c")
            .arg(code)
            .output()
            .expect("spawn cordon")
    }

    /// Runs the same probe without any sandbox, as a control.
    pub fn py_unconfined(&self, script: &str) -> Output {
        Command::new(python())
            .arg("-c")
            .arg(format!("{PROBE}\n{script}"))
            .current_dir(&self.cwd)
            .output()
            .expect("spawn python")
    }
}

/// Where trees are made: CARGO_TARGET_TMPDIR (inside the project's target directory), unless
/// the clone itself lies under /tmp, which the default profile makes writable; then /var/tmp,
/// so that `outside/` and `home/` stay outside every writable root wherever the clone is.
fn private_base() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let canonical = std::fs::canonicalize(&target).unwrap_or_else(|_| target.clone());
    if canonical.starts_with("/tmp") {
        PathBuf::from("/var/tmp")
    } else {
        target
    }
}

/// `attempt(f)` prints "OK" or the errno name, so tests assert exact errnos.
pub const PROBE: &str = r#"
import errno, os, socket, sys
def attempt(f):
    try:
        f()
        return "OK"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
"#;

/// The real python interpreter (not a version-manager shim), found once.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 is required by these tests");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Lines of stdout, trimmed.
pub fn lines(out: &Output) -> Vec<String> {
    stdout(out).lines().map(|l| l.trim().to_owned()).collect()
}

/// The running kernel's Landlock ABI, or `None`.
pub fn landlock_abi() -> Option<u32> {
    let abi = cordon::sandbox::landlock_rules::kernel_abi();
    (abi > 0).then_some(abi)
}

/// Skips (loudly) when the kernel lacks Landlock ABI `min`.
#[macro_export]
macro_rules! require_landlock {
    ($min:expr) => {
        match common::landlock_abi() {
            Some(abi) if abi >= $min => {}
            found => {
                eprintln!(
                    "SKIPPED: needs Landlock ABI {}, kernel offers {:?}",
                    $min, found
                );
                return;
            }
        }
    };
}
