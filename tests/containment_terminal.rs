//! Terminals and device nodes: a confined command uses the terminal it was given and no other
//! device beyond the allow-list, and cordon puts the terminal's settings back when it returns.
//! Every refusal is checked from outside (the bytes the command must not consume are still
//! there; the unconfined control opens the same node), next to a harmless counterpart.

mod common;

use std::fs;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{lines, python, stderr, stdout, Tree, PROBE};

/// A pseudo-terminal pair made by the test process, outside any sandbox.
struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
    path: PathBuf,
}

impl Pty {
    fn open() -> Pty {
        let (mut master, mut slave) = (-1, -1);
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: openpty writes two descriptors and at most the name of a pts device (well
        // under 128 bytes) into the buffers; termios and winsize pointers may be NULL.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                name.as_mut_ptr(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: openpty NUL-terminated the name.
        let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: openpty just returned these descriptors and nothing else owns them.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        Pty {
            master,
            slave,
            path: PathBuf::from(path),
        }
    }

    fn slave_stdio(&self) -> Stdio {
        Stdio::from(self.slave.try_clone().expect("dup slave"))
    }

    fn termios(&self) -> libc::termios {
        // SAFETY: termios is plain data; tcgetattr fills it in.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: as above, on a descriptor this struct owns.
        assert_eq!(
            unsafe { libc::tcgetattr(self.slave.as_raw_fd(), &mut t) },
            0
        );
        t
    }

    fn echo(&self) -> bool {
        self.termios().c_lflag & libc::ECHO != 0
    }

    fn set_echo(&self, on: bool) {
        let mut t = self.termios();
        if on {
            t.c_lflag |= libc::ECHO;
        } else {
            t.c_lflag &= !libc::ECHO;
        }
        // SAFETY: sets a termios read from the same terminal.
        assert_eq!(
            unsafe { libc::tcsetattr(self.slave.as_raw_fd(), libc::TCSANOW, &t) },
            0
        );
    }

    fn window(&self) -> (u16, u16) {
        // SAFETY: winsize is plain data; TIOCGWINSZ fills it in.
        let mut w: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        assert_eq!(
            unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCGWINSZ, &mut w) },
            0
        );
        (w.ws_row, w.ws_col)
    }

    fn set_window(&self, rows: u16, cols: u16) {
        let w = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize.
        assert_eq!(
            unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &w) },
            0
        );
    }

    /// Types `text` into the terminal, as a person at its keyboard would.
    fn type_keys(&self, text: &str) {
        let mut master = fs::File::from(self.master.try_clone().expect("dup master"));
        master.write_all(text.as_bytes()).expect("write to master");
    }
}

/// Whatever can be read from `fd` right now, without blocking.
fn read_available(fd: &OwnedFd) -> String {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, setting a status flag only.
    unsafe {
        libc::fcntl(
            raw,
            libc::F_SETFL,
            libc::fcntl(raw, libc::F_GETFL) | libc::O_NONBLOCK,
        )
    };
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reads into a buffer valid for its length.
        let n = unsafe { libc::read(raw, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    String::from_utf8_lossy(&out).replace("\r\n", "\n")
}

/// `cordon run [pre...] -- python3 -c PROBE+script` with the pty as stdin and stdout.
fn py_on_terminal(tree: &Tree, pty: &Pty, pre: &[&str], script: &str) -> std::process::Output {
    tree.cordon()
        .arg("run")
        .args(pre)
        .arg("--")
        .arg(python())
        .arg("-c")
        .arg(format!("{PROBE}\n{script}"))
        .stdin(pty.slave_stdio())
        .stdout(pty.slave_stdio())
        .stderr(Stdio::piped())
        .output()
        .expect("spawn cordon")
}

/// Opens `path` for reading (and reads) inside the sandbox and outside it.
fn open_script(path: &Path) -> String {
    format!(
        "print(attempt(lambda: os.read(os.open({path:?}, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY), 1)))",
        path = path.display().to_string()
    )
}

fn open_only_script(path: &Path) -> String {
    format!(
        "print(attempt(lambda: os.close(os.open({path:?}, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY))))",
        path = path.display().to_string()
    )
}

#[test]
fn another_terminal_is_refused_and_its_keystrokes_stay_unread() {
    require_landlock!(1);
    let tree = Tree::new();
    let victim = Pty::open();
    victim.type_keys("secret\n");
    // Control: outside the sandbox the same open works (only opened, so nothing is consumed).
    let control = tree.py_unconfined(&open_only_script(&victim.path));
    assert_eq!(lines(&control), ["OK"], "{}", stderr(&control));
    // The victim's descriptor as the test process holds it, through /proc: another route to
    // the same terminal.
    let via_proc = format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        victim.slave.as_raw_fd()
    );
    for profile in [&[][..], &["-p", "read-only"][..]] {
        let script = format!(
            "{}\n{}",
            open_script(&victim.path),
            open_script(Path::new(&via_proc))
        );
        // With the namespace layer the host's terminals are not even there; Landlock alone
        // refuses them by name.
        if common::userns_available() {
            let out = tree.py(profile, &script);
            assert_eq!(
                lines(&out),
                ["ENOENT", "ENOENT"],
                "{profile:?}: {}",
                stderr(&out)
            );
        }
        let out = tree.py_without_userns(profile, &script);
        assert_eq!(
            lines(&out),
            ["EACCES", "EACCES"],
            "{profile:?}: {}",
            stderr(&out)
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    // Checked from outside: the line typed into the victim terminal is still there, unread.
    assert_eq!(read_available(&victim.slave), "secret\n");
}

/// The first block device this process can open, preferring real disks over loop devices (a
/// container's device cgroup may refuse some even to root).
fn a_block_device() -> Option<PathBuf> {
    let mut names: Vec<String> = fs::read_dir("/sys/block")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by_key(|n| (n.starts_with("loop") || n.starts_with("ram"), n.clone()));
    names
        .into_iter()
        .map(|n| PathBuf::from("/dev").join(n))
        .find(|p| fs::File::open(p).is_ok())
}

#[test]
fn consoles_disks_input_devices_and_others_shm_are_refused() {
    require_landlock!(1);
    let tree = Tree::new();
    let mut targets: Vec<PathBuf> = [
        "/dev/console",
        "/dev/tty1",
        "/dev/vcs",
        "/dev/ttyS0",
        "/dev/kmsg",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.exists())
    .collect();
    if targets.is_empty() {
        eprintln!("SKIPPED part: no console, virtual terminal, vcs, serial tty or kmsg node here");
    }
    match a_block_device() {
        Some(disk) => targets.push(disk),
        None => eprintln!("SKIPPED part: no block device under /sys/block that root can open here"),
    }
    let inputs: Vec<PathBuf> = fs::read_dir("/dev/input")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| !p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    match inputs.first() {
        Some(input) => targets.push(input.clone()),
        None => eprintln!("SKIPPED part: no /dev/input devices on this machine"),
    }
    // Another process's POSIX shared memory.
    let shm = PathBuf::from(format!("/dev/shm/cordon-test-{}", std::process::id()));
    fs::write(&shm, "other process's memory\n").expect("write /dev/shm");
    targets.push(shm.clone());

    let script: Vec<String> = targets.iter().map(|p| open_only_script(p)).collect();
    let script = script.join("\n");
    let control = tree.py_unconfined(&script);
    // Landlock alone refuses them by name (EACCES); the namespace layer's /dev does not have
    // them at all (ENOENT), and its /dev/shm is the sandbox's own.
    let inside = tree.py_without_userns(&[], &script);
    let read_only = tree.py_without_userns(&["-p", "read-only"], &script);
    let with_namespaces = common::userns_available().then(|| tree.py(&[], &script));
    let _ = fs::remove_file(&shm);
    if let Some(out) = with_namespaces {
        assert_eq!(
            lines(&out),
            vec!["ENOENT"; targets.len()],
            "{targets:?} {}",
            stderr(&out)
        );
    }
    // Control: root outside the sandbox opens every one of them.
    assert_eq!(
        lines(&control),
        vec!["OK"; targets.len()],
        "{targets:?} {}",
        stderr(&control)
    );
    assert_eq!(
        lines(&inside),
        vec!["EACCES"; targets.len()],
        "{targets:?} {}",
        stderr(&inside)
    );
    assert_eq!(
        lines(&read_only),
        vec!["EACCES"; targets.len()],
        "{targets:?} {}",
        stderr(&read_only)
    );
}

#[test]
fn the_device_allow_list_and_listing_dev_keep_working() {
    require_landlock!(1);
    let tree = Tree::new();
    let out = tree.run(&[
        "--",
        "sh",
        "-c",
        "echo gone > /dev/null && head -c 8 /dev/urandom | wc -c && head -c 3 /dev/zero | od -An -tx1 \
         && ls /dev | grep -cx -e null -e pts -e shm && ls /dev/pts | grep -cx ptmx",
    ]);
    // A limit, pinned: a new pseudo-terminal would need all of /dev/pts (Landlock checks the
    // slave's path even for TIOCGPTPEER), so /dev/ptmx is not on the allow-list either.
    // Without the namespace layer, that is; with it /dev/pts is the sandbox's own instance.
    let new_pty = tree.py_without_userns(&[], "print(attempt(os.openpty))");
    assert_eq!(lines(&new_pty), ["EACCES"], "{}", stderr(&new_pty));
    if common::userns_available() {
        let new_pty = tree.py(&[], "print(attempt(os.openpty))");
        assert_eq!(lines(&new_pty), ["OK"], "{}", stderr(&new_pty));
    }
    assert_eq!(
        stdout(&out).split_whitespace().collect::<Vec<_>>(),
        ["8", "00", "00", "00", "3", "1"],
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn the_given_terminal_can_be_written_reopened_and_configured() {
    require_landlock!(5);
    let tree = Tree::new();
    let given = Pty::open();
    let other = Pty::open();
    let script = format!(
        r#"
import termios, fcntl, struct
def reopen(path):
    fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
    os.write(fd, ("via " + path + "\n").encode())
    os.close(fd)
os.write(1, b"direct\n")
results = [attempt(lambda: reopen(p)) for p in ("/dev/stdout", "/proc/self/fd/1", {given:?})]
def configure():
    attrs = termios.tcgetattr(0)
    termios.tcsetattr(0, termios.TCSANOW, attrs)
    fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8)
def configure_reopened():
    fd = os.open("/dev/stdin", os.O_RDWR | os.O_NOCTTY)
    termios.tcsetattr(fd, termios.TCSANOW, termios.tcgetattr(fd))
results.append(attempt(configure))
results.append(attempt(configure_reopened))
results.append(attempt(lambda: reopen({other:?})))
results.append(attempt(lambda: os.close(os.open({other:?}, os.O_RDONLY | os.O_NOCTTY))))
print(" ".join(results))
"#,
        given = given.path.display().to_string(),
        other = other.path.display().to_string(),
    );
    for profile in [&[][..], &["-p", "read-only"][..]] {
        let out = py_on_terminal(&tree, &given, profile, &script);
        assert_eq!(out.status.code(), Some(0), "{profile:?}: {}", stderr(&out));
        let seen = read_available(&given.master);
        assert_eq!(
            seen,
            format!(
                "direct\nvia /dev/stdout\nvia /proc/self/fd/1\nvia {}\nOK OK OK OK OK EACCES EACCES\n",
                given.path.display()
            ),
            "{profile:?}"
        );
    }
    // From outside: nothing reached the other terminal.
    assert_eq!(read_available(&other.master), "");
}

#[test]
fn devices_the_profile_names_are_granted_as_named() {
    require_landlock!(1);
    let tree = Tree::new();
    let named = Pty::open();
    named.type_keys("typed\n");
    let name = named.path.display().to_string();
    let out = tree.py(
        &["-r", &name],
        &format!(
            "fd = os.open({name:?}, os.O_RDONLY | os.O_NOCTTY)\nprint(os.read(fd, 100).decode().strip())"
        ),
    );
    assert_eq!(lines(&out), ["typed"], "{}", stderr(&out));
    // The line was consumed inside: outside there is nothing left.
    assert_eq!(read_available(&named.slave), "");

    let shm_name = format!("cordon-test-w-{}", std::process::id());
    let shm = Path::new("/dev/shm").join(&shm_name);
    let script = format!(
        "open({:?}, 'w').write('made inside')",
        shm.display().to_string()
    );
    // Landlock alone refuses the host's /dev/shm; under the namespace layer the write lands in
    // the sandbox's own /dev/shm. The host's stays untouched either way.
    let denied = tree.py_without_userns(&[], &format!("print(attempt(lambda: {script}))"));
    assert_eq!(lines(&denied), ["EACCES"], "{}", stderr(&denied));
    assert!(!shm.exists());
    if common::userns_available() {
        let private = tree.py(&[], &format!("print(attempt(lambda: {script}))"));
        assert_eq!(lines(&private), ["OK"], "{}", stderr(&private));
        assert!(!shm.exists());
    }
    let allowed = tree.py(
        &["-w", "/dev/shm"],
        &format!("print(attempt(lambda: {script}))"),
    );
    let content = fs::read_to_string(&shm);
    let _ = fs::remove_file(&shm);
    assert_eq!(lines(&allowed), ["OK"], "{}", stderr(&allowed));
    assert_eq!(content.expect("file made inside"), "made inside");
}

const CHANGE_TERMINAL: &str = r#"
import termios, fcntl, struct
attrs = termios.tcgetattr(0)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, attrs)
fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0, 0))
rows, cols = struct.unpack("HHHH", fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8))[:2]
echo = bool(termios.tcgetattr(0)[3] & termios.ECHO)
os.write(2, f"inside: echo={echo} {rows}x{cols}\n".encode())
"#;

#[test]
fn echo_and_window_size_are_restored_when_cordon_returns() {
    require_landlock!(1);
    let tree = Tree::new();
    let pty = Pty::open();
    pty.set_window(24, 80);
    assert!(pty.echo());

    // Control: the same program run directly leaves the terminal changed.
    let control = Command::new(python())
        .arg("-c")
        .arg(format!("{PROBE}\n{CHANGE_TERMINAL}"))
        .stdin(pty.slave_stdio())
        .stdout(pty.slave_stdio())
        .output()
        .expect("spawn python");
    assert_eq!(stderr(&control), "inside: echo=False 50x132\n");
    assert_eq!((pty.echo(), pty.window()), (false, (50, 132)));
    pty.set_echo(true);
    pty.set_window(24, 80);

    let out = py_on_terminal(&tree, &pty, &[], CHANGE_TERMINAL);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("inside: echo=False 50x132\n"),
        "{}",
        stderr(&out)
    );
    assert_eq!((pty.echo(), pty.window()), (true, (24, 80)));

    // A timeout kills the command mid-way; the terminal still comes back.
    let script = format!("{CHANGE_TERMINAL}\nimport time\ntime.sleep(30)");
    let start = std::time::Instant::now();
    let out = py_on_terminal(&tree, &pty, &["--timeout", "2s"], &script);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    assert!(
        stderr(&out).starts_with("inside: echo=False 50x132\n"),
        "{}",
        stderr(&out)
    );
    assert_eq!((pty.echo(), pty.window()), (true, (24, 80)));
}

#[test]
fn the_receipt_says_which_roots_were_narrowed() {
    require_landlock!(1);
    let tree = Tree::new();
    let json = |args: &[&str], namespaces: bool| -> serde_json::Value {
        let mut cmd = tree.cordon();
        cmd.arg("run").args(args).args(["--", "true"]);
        let out = if namespaces {
            cmd.output()
        } else {
            common::without_userns(&cmd).output()
        }
        .expect("spawn cordon");
        serde_json::from_str(&stdout(&out)).expect("one JSON object")
    };
    // On the Landlock + seccomp path, `/` is granted around the host's /dev.
    let v = json(&["--json"], false);
    let approximations = v["sandbox"]["approximations"].as_array().expect("a list");
    assert_eq!(approximations.len(), 1, "{approximations:?}");
    assert_eq!(approximations[0]["rule"], "read:/");
    let effect = approximations[0]["effect"].as_str().unwrap_or_default();
    // `/dev`, and (as root) the hidden /etc/shadow and /etc/gshadow, which are left out the
    // same way when no mount layer hides them.
    assert!(effect.contains("leave out /dev"), "{effect}");
    assert!(
        effect.contains("entries created later directly in /"),
        "{effect}"
    );
    assert!(
        effect.contains("names beneath what is left out stay listable"),
        "{effect}"
    );
    // A root the exclusion does not touch is not narrowed.
    let v = json(&["--json", "-p", "read-only", "-w", "/dev/shm"], false);
    let rules: Vec<&str> = v["sandbox"]["approximations"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["rule"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(rules, ["read:/"]);
    // Under the namespace layer the command's /dev is its own (no host terminal is bound here:
    // stdio are pipes), so `/` is granted whole and nothing is approximated.
    if common::userns_available() {
        let v = json(&["--json"], true);
        assert_eq!(v["sandbox"]["approximations"], serde_json::json!([]), "{v}");
        assert!(v["sandbox"]["layers"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x == "mount_namespace")));
    }
}

#[test]
fn a_refused_device_is_reported_as_a_denial_with_its_fix() {
    require_landlock!(1);
    let tree = Tree::new();
    let victim = Pty::open();
    let name = victim.path.display().to_string();
    // Landlock's EACCES is what a denial report is made from; under the namespace layer the
    // terminal does not exist in the sandbox at all.
    let mut cmd = tree.cordon();
    cmd.args([
        "run",
        "--timeout",
        "10s",
        "--",
        "sh",
        "-c",
        &format!("cat {name}"),
    ]);
    let out = common::without_userns(&cmd).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out)
            .lines()
            .filter(|l| l.starts_with("cordon: denied"))
            .collect::<Vec<_>>(),
        [format!(
            "cordon: denied read of {name} (under /dev, which the roots above it leave out: \
             only the device allow-list and the terminal the command was given are granted; \
             allow with --readable {name}) (from the command's output)"
        )],
        "{}",
        stderr(&out)
    );
    // Its counterpart: a device on the allow-list fails for its own reasons only.
    let out = tree.run(&["--", "sh", "-c", "cat /dev/null"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("cordon: denied"), "{}", stderr(&out));
}

#[test]
fn the_terminal_comes_back_when_the_run_is_cancelled() {
    use std::io::BufRead;
    require_landlock!(1);
    let tree = Tree::new();
    let pty = Pty::open();
    pty.set_window(24, 80);
    let script = format!(
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n{CHANGE_TERMINAL}\ntime.sleep(30)"
    );
    let mut child = tree
        .cordon()
        .args(["run", "--"])
        .arg(python())
        .arg("-c")
        .arg(format!("{PROBE}\n{script}"))
        .stdin(pty.slave_stdio())
        .stdout(pty.slave_stdio())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cordon");
    let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first).expect("read stderr");
    assert_eq!(first, "inside: echo=False 50x132\n");
    assert_eq!((pty.echo(), pty.window()), (false, (50, 132)));
    // The first SIGINT goes to the command (which ignores it), the second cancels the run.
    let pid = child.id() as libc::pid_t;
    for _ in 0..2 {
        // SAFETY: kill with our own child's pid and a plain signal number.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let status = child.wait().expect("wait cordon");
    assert_eq!(status.code(), Some(130));
    assert_eq!((pty.echo(), pty.window()), (true, (24, 80)));
}
