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
        let base = tempfile::tempdir_in(tree_parent()).expect("temp dir");
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
        self.py_command(pre, script).output().expect("spawn cordon")
    }

    /// The command [`Tree::py`] runs, to run it another way (see [`without_userns`]).
    pub fn py_command(&self, pre: &[&str], script: &str) -> Command {
        let code = format!("{PROBE}\n{script}");
        let mut cmd = self.cordon();
        cmd.arg("run")
            .args(pre)
            .arg("--")
            .arg(python())
            .arg("-c")
            .arg(code);
        cmd
    }

    /// [`Tree::py`] where no user namespace can be created (Landlock and seccomp only).
    pub fn py_without_userns(&self, pre: &[&str], script: &str) -> Output {
        without_userns(&self.py_command(pre, script))
            .output()
            .expect("spawn unshare")
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

/// Where private trees are made: inside the project's target directory, unless the clone
/// itself lies under /tmp, which the default profile makes writable (and whose symlinks cordon
/// does not trust); then /var/tmp, which no preset makes writable.
fn tree_parent() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let real = std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
    if real.starts_with("/tmp") {
        PathBuf::from("/var/tmp")
    } else {
        real
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

/// Compiles a small C program with gcc, as some tests need exact system calls.
pub fn compile_c(dir: &Path, name: &str, source: &str) -> std::path::PathBuf {
    let src = dir.join(format!("{name}.c"));
    let bin = dir.join(name);
    std::fs::write(&src, source).unwrap();
    let status = Command::new("gcc")
        .arg("-O0")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("gcc is required by the tests that compile C probes");
    assert!(status.success());
    bin
}

/// Runs `script` in a fresh network namespace with only loopback up, so the test never
/// touches the machine's own network.
pub fn in_private_netns(tree: &Tree, script: &str) -> std::process::Output {
    Command::new("unshare")
        .args(["--net", "--", "sh", "-c"])
        .arg(format!("ip link set lo up && {script}"))
        .current_dir(&tree.cwd)
        .env("HOME", &tree.home)
        .env("CORDON_HELPER", "self")
        .env_remove("TMPDIR")
        .output()
        .expect("unshare is required by the private-network tests")
}

/// True when a network namespace can be created; says loudly when it cannot.
pub fn private_netns_available() -> bool {
    let works = Command::new("unshare")
        .args(["--net", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        eprintln!("SKIPPED: cannot create a network namespace (needs root or user namespaces)");
    }
    works
}

/// Whether this kernel lets the helper build the namespace layer.
pub fn userns_available() -> bool {
    cordon::sandbox::namespaces::userns::probe().is_ok()
}

/// The layers the namespace layer adds at the front of a receipt (denied network).
pub const NAMESPACE_LAYERS: [&str; 5] = [
    "user_namespace",
    "pid_namespace",
    "mount_namespace",
    "ipc_namespace",
    "private_proc",
];

/// A shell prefix that runs what follows inside a user namespace (root mapped to the caller)
/// in which no further user namespace can be created: `user.max_user_namespaces` is 0 there.
/// This is the real "no user namespaces" condition, not a knob.
pub const WITHOUT_USERNS: &str =
    "unshare --user --map-root-user -- sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"'";

/// `cmd` run under [`WITHOUT_USERNS`], with the same program, arguments, cwd and environment.
pub fn without_userns(cmd: &Command) -> Command {
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--user", "--map-root-user", "--", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => wrapped.env(key, v),
            None => wrapped.env_remove(key),
        };
    }
    wrapped
}

/// Skips (loudly) when the namespace layer is unavailable.
#[macro_export]
macro_rules! require_userns {
    () => {
        if !common::userns_available() {
            eprintln!("SKIPPED: needs unprivileged user namespaces");
            return;
        }
    };
}

/// The library's sandbox with the `cordon` binary under test as its helper.
pub fn lib_sandbox() -> cordon::exec::Sandbox {
    cordon::exec::Sandbox::new(cordon::helper::Helper::cordon_binary(env!(
        "CARGO_BIN_EXE_cordon"
    )))
}

/// A policy reading everything and writing only `writable`, network and unix sockets denied.
pub fn lib_policy(writable: &Path) -> cordon::sandbox::SandboxPolicy {
    let json = format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{:?}]}},
            "network":{{"mode":"denied","unix_sockets":"deny"}},
            "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#,
        writable.to_str().unwrap()
    );
    cordon::sandbox::SandboxPolicy::from_json(&json).unwrap()
}

/// A private canonical directory, removed on drop.
pub struct WorkDir {
    _tmp: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn workdir() -> WorkDir {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().canonicalize().unwrap();
    WorkDir { _tmp: tmp, path }
}
