//! `cordon learn` against the real kernel: it writes the smallest profile that allows what was
//! refused, grants nothing itself, and a rerun with the written profile succeeds.

mod common;

use common::Tree;

#[test]
fn learn_then_rerun_with_the_written_profile_succeeds() {
    let tree = Tree::new();
    let out_dir = tree.outside.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let script = format!(
        "echo built > {0}/artifact && echo cached > {0}/cache",
        out_dir.display()
    );
    let profile = tree.root.join("learnt.toml");
    let learn = tree
        .cordon()
        .args(["learn", "-p", "workspace-write", "-o"])
        .arg(&profile)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    // The command itself was refused: learn ran it confined, granting nothing.
    assert_ne!(learn.status.code(), Some(0), "{learn:?}");
    assert!(!out_dir.join("artifact").exists());
    let text = std::fs::read_to_string(&profile).unwrap();
    assert!(text.contains("extends = \"workspace-write\""), "{text}");
    let entry = format!(
        "  \"{}\",  # file_write {}/artifact",
        out_dir.display(),
        out_dir.display()
    );
    assert!(text.contains(&entry), "{text}");
    // The smallest: exactly one added root.
    assert_eq!(text.matches("# file_write").count(), 1, "{text}");

    let rerun = tree
        .cordon()
        .args(["run", "-p"])
        .arg(&profile)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(rerun.status.code(), Some(0), "{rerun:?}");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("artifact")).unwrap(),
        "built\n"
    );

    // Learning again from the written profile finds nothing more to add.
    let again = tree
        .cordon()
        .args(["learn", "-p"])
        .arg(&profile)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    let text = String::from_utf8_lossy(&again.stdout);
    let kept = format!("write = [\"{}\"]", out_dir.display());
    assert!(text.contains(&kept), "the base's entries are kept: {text}");
    assert_eq!(
        text.matches("# file_write").count(),
        0,
        "nothing new: {text}"
    );
}

#[test]
fn learn_adds_network_and_unix_socket_entries_and_never_a_syscall() {
    let tree = Tree::new();
    let sock = tree.outside.join("s.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let script = format!(
        r#"
import socket, ctypes, sys
ctypes.CDLL(None).ptrace(16, 1, 0, 0)
try: socket.socket(socket.AF_UNIX).connect({sock:?})
except OSError: pass
try: socket.create_connection(("127.0.0.1", 9), timeout=1)
except OSError: pass
sys.exit(1)
"#
    );
    let out = tree
        .cordon()
        .args(["learn", "--"])
        .arg(common::python())
        .args(["-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("unix_sockets = \"allow\"  # unix_socket"),
        "{text}"
    );
    assert!(text.contains("mode = \"enabled\"  # network"), "{text}");
    assert!(
        text.contains("# syscall ptrace: seccomp: ptrace refused"),
        "{text}"
    );
    assert!(
        text.contains("not granted (none: no profile allows it"),
        "{text}"
    );
    // Nothing reached the socket while learning.
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err());
}
