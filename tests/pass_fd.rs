//! `--pass-fd`: the helper's one deliberate exception to closing inherited descriptors. A pipe
//! or socket end reaches the command; a file or directory descriptor (which would let the
//! command bypass Landlock) is refused before anything runs.

mod common;

use std::fs::{self, File};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use common::{stderr, Tree};

/// The default profile's policy, resolved in the tree.
fn policy(tree: &Tree) -> String {
    let out = tree.run(&["--print-policy"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    common::stdout(&out).trim().to_owned()
}

/// Runs `cordon __sandbox [helper_args] -- sh -c script` with `fds` (source, target) installed
/// in the child with `dup2`, so the helper sees them open and inheritable at `target`.
fn helper(policy: &str, helper_args: &[&str], script: &str, fds: &[(RawFd, RawFd)]) -> Output {
    // Sources are first copied above every target, so that one dup2 can never overwrite the
    // source of the next (and dup2 onto the same number, which keeps close-on-exec, never
    // happens).
    let high: Vec<OwnedFd> = fds
        .iter()
        .map(|&(src, _)| {
            // SAFETY: fcntl duplicates an open descriptor; the result is owned below.
            let fd = unsafe { libc::fcntl(src, libc::F_DUPFD_CLOEXEC, 100) };
            assert!(fd >= 100);
            // SAFETY: `fd` was just returned by fcntl and is owned by nothing else.
            unsafe { OwnedFd::from_raw_fd(fd) }
        })
        .collect();
    let fds: Vec<(RawFd, RawFd)> = high
        .iter()
        .zip(fds)
        .map(|(h, &(_, target))| (h.as_raw_fd(), target))
        .collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordon"));
    cmd.args(["__sandbox", "--policy", policy])
        .args(helper_args)
        .args(["--", "sh", "-c", script]);
    // SAFETY: dup2 is async-signal-safe; the sources are open in the parent across the spawn.
    unsafe {
        cmd.pre_exec(move || {
            for &(src, target) in &fds {
                if libc::dup2(src, target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    drop(high);
    out
}

fn pipe() -> (File, OwnedFd) {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    (File::from(r), w)
}

#[test]
fn pass_fd_refuses_a_regular_file_with_125() {
    let tree = Tree::new();
    let policy = policy(&tree);
    // A file outside every writable root: if its descriptor reached the command, the command
    // could write it although Landlock forbids opening it for writing.
    let outside = tree.outside.join("secret");
    fs::write(&outside, "untouched\n").unwrap();
    let file = fs::OpenOptions::new().append(true).open(&outside).unwrap();
    let marker = tree.cwd.join("ran");
    let script = format!("echo leaked >&5; touch {}", marker.display());
    let out = helper(
        &policy,
        &["--pass-fd", "5"],
        &script,
        &[(file.as_raw_fd(), 5)],
    );
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        "cordon-sandbox: --pass-fd 5 is a regular file: only pipe and socket ends and fully sealed \
         memfds may be passed into the sandbox, because a file or directory descriptor would bypass Landlock"
    );
    assert!(!marker.exists());
    assert_eq!(fs::read_to_string(&outside).unwrap(), "untouched\n");

    let dir = File::open(&tree.outside).unwrap();
    let out = helper(
        &policy,
        &["--pass-fd", "5"],
        "true",
        &[(dir.as_raw_fd(), 5)],
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("--pass-fd 5 is a directory"));

    // Not open at all.
    let out = helper(&policy, &["--pass-fd", "7"], "true", &[]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("--pass-fd 7 is not an open descriptor"));
}

#[test]
fn pass_fd_bad_arguments_exit_125() {
    let tree = Tree::new();
    let policy = policy(&tree);
    for (args, expected) in [
        (
            vec!["--pass-fd", "2"],
            "--pass-fd \"2\" is not a descriptor number above 2",
        ),
        (
            vec!["--pass-fd", "x"],
            "--pass-fd \"x\" is not a descriptor number above 2",
        ),
        (
            vec!["--pass-fd", "5", "--pass-fd", "5"],
            "--pass-fd 5 given twice",
        ),
        (
            vec!["--status-fd", "5", "--pass-fd", "5"],
            "--pass-fd 5 is also the --status-fd",
        ),
    ] {
        let out = helper(&policy, &args, "true", &[]);
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn pass_fd_pipe_reaches_the_command_and_others_are_closed() {
    let tree = Tree::new();
    let policy = policy(&tree);
    let (mut passed_r, passed_w) = pipe();
    let (mut other_r, other_w) = pipe();
    // fd 5 is passed, fd 6 is inherited by the helper but not listed: it must be closed.
    let out = helper(
        &policy,
        &["--pass-fd", "5"],
        "echo through >&5; if { echo leaked >&6; } 2>/dev/null; then echo 6-open; else echo 6-closed; fi",
        &[(passed_w.as_raw_fd(), 5), (other_w.as_raw_fd(), 6)],
    );
    drop((passed_w, other_w));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(common::stdout(&out), "6-closed\n");
    let mut got = String::new();
    passed_r.read_to_string(&mut got).unwrap();
    assert_eq!(got, "through\n");
    let mut leaked = String::new();
    other_r.read_to_string(&mut leaked).unwrap();
    assert_eq!(leaked, "");

    // A socket end works the same way.
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let out = helper(
        &policy,
        &["--pass-fd", "4"],
        "echo sock >&4",
        &[(b.as_raw_fd(), 4)],
    );
    drop(b);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut got = String::new();
    (&a).read_to_string(&mut got).unwrap();
    assert_eq!(got, "sock\n");
}

#[tokio::test]
async fn pass_fd_through_the_runtime_sandboxed_and_not() {
    use cordon::exec::{ExecRequest, Outcome, Sandbox};
    use std::sync::Arc;
    let tree = Tree::new();
    let policy = cordon::sandbox::SandboxPolicy::from_json(&policy(&tree)).unwrap();
    let sandbox = Sandbox::new(cordon::helper::Helper::cordon_binary(env!(
        "CARGO_BIN_EXE_cordon"
    )));
    for confined in [true, false] {
        let (mut read, write) = pipe();
        let argv = ["sh", "-c", "echo via-9 >&9; echo via-3 >&3"];
        let mut request = ExecRequest::new(argv, &tree.cwd, confined.then(|| policy.clone()))
            .pass_fd(Arc::new(write), 9);
        request.reported_argv = Some(vec!["shown".into()]);
        let result = sandbox.exec(request).await;
        // fd 3 was never passed: the shell cannot write to it.
        assert_eq!(result.outcome, Outcome::Failed { code: 2 }, "{confined}");
        assert_eq!(result.argv, ["shown"]);
        // Every copy of the write end is closed once the run is over: end of file arrives.
        let mut got = String::new();
        read.read_to_string(&mut got).unwrap();
        assert_eq!(got, "via-9\n", "{confined}");
    }
    // Target numbers are checked before anything runs.
    let (_read, write) = pipe();
    let result = sandbox
        .exec(ExecRequest::unsandboxed(["true"], &tree.cwd).pass_fd(Arc::new(write), 2))
        .await;
    assert!(matches!(result.outcome, Outcome::Rejected { .. }));
}

/// A sealed memfd: the one regular file the helper lets through, because nothing can change
/// it any more. `seals` are added after writing `content`.
fn memfd(content: &[u8], seals: libc::c_int) -> File {
    use std::io::Write;
    let name = std::ffi::CString::new("test").unwrap();
    // SAFETY: memfd_create reads the NUL-terminated name and returns a new descriptor.
    let raw =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    assert!(raw >= 0);
    // SAFETY: memfd_create just returned this descriptor, owned by nothing else.
    let mut file = File::from(unsafe { OwnedFd::from_raw_fd(raw) });
    file.write_all(content).unwrap();
    if seals != 0 {
        // SAFETY: F_ADD_SEALS takes an integer argument only.
        assert_eq!(
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) },
            0
        );
    }
    file
}

#[test]
fn pass_fd_accepts_a_sealed_memfd_and_refuses_unsealed_ones_and_files() {
    use std::io::{Seek, SeekFrom};
    let tree = Tree::new();
    let policy = policy(&tree);
    let all = libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
    let marker = tree.cwd.join("ran");
    let script = format!(
        ". /proc/self/fd/5; greet; \
         if {{ echo more >> /proc/self/fd/5; }} 2>/dev/null; then echo wrote; else echo write-refused; fi; \
         touch {}",
        marker.display()
    );

    // Sealed: readable by path inside the sandbox, never writable.
    let mut sealed = memfd(b"greet() { echo from-memfd; }\n", all);
    let out = helper(
        &policy,
        &["--pass-fd", "5"],
        &script,
        &[(sealed.as_raw_fd(), 5)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(common::stdout(&out), "from-memfd\nwrite-refused\n");
    assert!(marker.exists());
    fs::remove_file(&marker).unwrap();
    let mut content = String::new();
    sealed.seek(SeekFrom::Start(0)).unwrap();
    sealed.read_to_string(&mut content).unwrap();
    assert_eq!(content, "greet() { echo from-memfd; }\n");

    // Also under the read-only preset, and under a policy that hides $HOME and /proc: the
    // process opens its own memfd, which lives on no path a rule could cover.
    for narrow in [
        r#"{"version":1,"filesystem":{"read":["/"]},"network":{"mode":"denied"},"enforcement":{"missing_layer":"refuse","carve_outs":"refuse"}}"#,
        r#"{"version":1,"filesystem":{"read":["/usr"]},"network":{"mode":"denied"},"enforcement":{"missing_layer":"refuse","carve_outs":"refuse"}}"#,
    ] {
        let sealed = memfd(b"greet() { echo from-memfd; }\n", all);
        let out = helper(
            narrow,
            &["--pass-fd", "5", "--cwd", "/usr"],
            ". /proc/self/fd/5; greet",
            &[(sealed.as_raw_fd(), 5)],
        );
        assert_eq!(out.status.code(), Some(0), "{narrow}: {}", stderr(&out));
        assert_eq!(common::stdout(&out), "from-memfd\n");
    }

    // Unsealed, or sealed against writes but still open to new seals or growth: refused.
    for seals in [
        0,
        libc::F_SEAL_WRITE,
        all & !libc::F_SEAL_SEAL,
        all & !libc::F_SEAL_GROW,
    ] {
        let open = memfd(b"greet() { echo from-memfd; }\n", seals);
        let out = helper(
            &policy,
            &["--pass-fd", "5"],
            &script,
            &[(open.as_raw_fd(), 5)],
        );
        assert_eq!(out.status.code(), Some(125), "seals {seals:#x}");
        assert!(
            stderr(&out).contains("--pass-fd 5 is a memfd (or tmpfs file) without the write, grow, shrink and seal seals"),
            "{}",
            stderr(&out)
        );
        assert!(!marker.exists(), "seals {seals:#x}");
    }

    // A file on tmpfs answers F_GET_SEALS too (with F_SEAL_SEAL alone): refused.
    if let Ok(shm) = tempfile::tempfile_in("/dev/shm") {
        let out = helper(
            &policy,
            &["--pass-fd", "5"],
            "touch ran",
            &[(shm.as_raw_fd(), 5)],
        );
        assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
        assert!(!marker.exists());
    } else {
        eprintln!("SKIPPED (tmpfs part): /dev/shm is not available");
    }
}
