//! A unix-socket allow-list (`network.unix_sockets = [...]`, `--allow-unix-socket PATH`): the
//! command reaches exactly the listed sockets, brokered by the observer (seccomp refuses every
//! `connect` with the network denied, and the observer connects the command's own socket to
//! the socket it opened before the command ran), and nothing else. Every effect is checked on
//! the listeners outside the sandbox.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use common::{stderr, Tree};
use serde_json::Value;

/// A listener at `path` that answers each connection with `greeting` and reports what the
/// client sent.
fn listener(path: &Path, greeting: &'static str) -> mpsc::Receiver<String> {
    let socket = UnixListener::bind(path).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in socket.incoming() {
            let Ok(mut conn) = conn else { return };
            let _ = conn.write_all(greeting.as_bytes());
            let _ = conn.shutdown(std::net::Shutdown::Write);
            let mut got = String::new();
            let _ = conn.read_to_string(&mut got);
            let _ = tx.send(got);
        }
    });
    rx
}

/// A python script that connects to each path, sends a line, and prints what it got or the
/// errno name; it exits 1 when any connection failed.
fn client(paths: &[&Path]) -> String {
    let list: Vec<String> = paths
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    format!(
        r#"
failed = False
for p in [{}]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    r = attempt(lambda: s.connect(p))
    if r == "OK":
        s.sendall(b"from the sandbox")
        s.shutdown(socket.SHUT_WR)
        print(s.recv(100).decode())
    else:
        print(r)
        failed = True
sys.exit(1 if failed else 0)
"#,
        list.join(", ")
    )
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stderr(out)))
}

#[test]
fn only_the_listed_socket_is_reached_and_the_other_is_named_with_its_grant() {
    let tree = Tree::new();
    let listed = tree.outside.join("agent.sock");
    let other = tree.outside.join("docker.sock");
    let listed_rx = listener(&listed, "agent says hi");
    let other_rx = listener(&other, "docker says hi");
    let script = client(&[&listed, &other]);
    let listed_arg = listed.display().to_string();
    for without_userns in [false, true] {
        let mut cmd = tree.py_command(&["--json", "--allow-unix-socket", &listed_arg], &script);
        let out = if without_userns {
            common::without_userns(&cmd).output().unwrap()
        } else {
            cmd.output().unwrap()
        };
        let v = json(&out);
        assert_eq!(v["stdout"], "agent says hi\nEPERM\n", "{v}");
        assert_eq!(
            listed_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            "from the sandbox"
        );
        assert!(
            other_rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the unlisted socket was reached"
        );
        let denials = v["denials"].as_array().unwrap();
        assert_eq!(denials.len(), 1, "{v}");
        assert_eq!(denials[0]["operation"], "unix_socket");
        assert_eq!(denials[0]["target"], other.display().to_string());
        assert_eq!(denials[0]["evidence"], "seccomp_observer");
        assert_eq!(
            denials[0]["allow_with"],
            format!("--allow-unix-socket {}", other.display())
        );
    }
    // The grant shown works: both are reached.
    let other_arg = other.display().to_string();
    let out = tree
        .py_command(
            &[
                "--json",
                "--allow-unix-socket",
                &listed_arg,
                "--allow-unix-socket",
                &other_arg,
            ],
            &script,
        )
        .output()
        .unwrap();
    let v = json(&out);
    assert_eq!(v["outcome"], "success", "{v}");
    assert_eq!(v["stdout"], "agent says hi\ndocker says hi\n", "{v}");
    assert_eq!(
        other_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        "from the sandbox"
    );
}

#[test]
fn a_profile_lists_sockets_by_environment_variable() {
    let tree = Tree::new();
    let agent = tree.outside.join("ssh-agent.sock");
    let rx = listener(&agent, "ssh-agent");
    let profile = tree.root.join("agent.toml");
    std::fs::write(
        &profile,
        "extends = \"workspace-write\"\n[network]\nunix_sockets = [\"$SSH_AUTH_SOCK\"]\n",
    )
    .unwrap();
    let profile = profile.display().to_string();
    let out = tree
        .py_command(&["-p", &profile], &client(&[&agent]))
        .env("SSH_AUTH_SOCK", &agent)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ssh-agent\n");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        "from the sandbox"
    );
    // The variable unset: nothing is listed, and the connection is refused.
    let out = tree
        .py_command(&["-p", &profile], &client(&[&agent]))
        .env_remove("SSH_AUTH_SOCK")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "EPERM\n",
        "{}",
        stderr(&out)
    );
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
}

/// The listed socket lives where the command can write (the working directory): replacing it
/// with a link to another socket, or moving it away and binding its own, reaches only the
/// socket the observer opened before the command ran.
#[test]
fn a_listed_path_the_command_rewrites_still_reaches_only_the_listed_socket() {
    let tree = Tree::new();
    let listed: PathBuf = tree.cwd.join("service.sock");
    let other = tree.outside.join("other.sock");
    let listed_rx = listener(&listed, "the listed one");
    let other_rx = listener(&other, "the other one");
    let script = format!(
        r#"
os.rename({listed:?}, {listed:?} + ".moved")
os.symlink({other:?}, {listed:?})
{client}
"#,
        listed = listed.display().to_string(),
        other = other.display().to_string(),
        client = client(&[&listed]),
    );
    let listed_arg = listed.display().to_string();
    let out = tree
        .py_command(&["--allow-unix-socket", &listed_arg], &script)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "the listed one\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(
        listed_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        "from the sandbox"
    );
    assert!(
        other_rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "the link's target was reached"
    );
}

#[test]
fn a_socket_list_outside_the_denied_network_mode_is_refused_and_nothing_runs() {
    let tree = Tree::new();
    let listed = tree.outside.join("x.sock");
    let _rx = listener(&listed, "x");
    let marker = tree.outside.join("ran");
    let listed_arg = listed.display().to_string();
    let script = format!("touch {}", marker.display());
    let out = tree.run(&[
        "--network",
        "enabled",
        "--allow-unix-socket",
        &listed_arg,
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("network.unix_sockets as a list needs network.mode = \"denied\""),
        "{}",
        stderr(&out)
    );
    assert!(!marker.exists());
    // A listed path that is not a socket is an error naming it.
    let file = tree.outside.join("plain-file");
    std::fs::write(&file, "").unwrap();
    let file_arg = file.display().to_string();
    let out = tree.run(&["--allow-unix-socket", &file_arg, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("not a unix socket"),
        "{}",
        stderr(&out)
    );
}
