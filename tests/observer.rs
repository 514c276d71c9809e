//! The seccomp observer against the real kernel: denials with exact targets from what the
//! command attempted, `allow_with` suggestions that work when the command is run again with
//! them, refusals that stay refusals when the observer is gone, no listener in the command's
//! hands, and no denial from forged text.
//!
//! Every run forces the observer on (`CORDON_OBSERVER=on`), except the text control.

mod common;

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{python, Tree, PROBE};
use serde_json::Value;

/// `cordon run --json [PRE...] -- python3 -c PROBE+SCRIPT` with the observer forced to `observer`.
fn py_json(tree: &Tree, observer: &str, pre: &[&str], script: &str) -> Value {
    let out = tree
        .py_command(&[&["--json"][..], pre].concat(), script)
        .env("CORDON_OBSERVER", observer)
        .output()
        .expect("spawn cordon");
    parse(&out)
}

fn parse(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): stdout {:?} stderr {:?}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The (operation, target, evidence) of each denial.
fn denials(v: &Value) -> Vec<(String, String, String)> {
    v["denials"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|d| {
                    (
                        d["operation"].as_str().unwrap_or("").to_owned(),
                        d["target"].as_str().unwrap_or("").to_owned(),
                        d["evidence"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn allow_with(v: &Value, target: &str) -> String {
    v["denials"]
        .as_array()
        .and_then(|l| l.iter().find(|d| d["target"] == target))
        .and_then(|d| d["allow_with"].as_str())
        .unwrap_or_else(|| panic!("no denial of {target} in {v}"))
        .to_owned()
}

fn seen(op: &str, target: &Path) -> (String, String, String) {
    (
        op.to_owned(),
        target.display().to_string(),
        "seccomp_observer".to_owned(),
    )
}

/// `--writable DIR` or `--readable PATH` as the two arguments it is.
fn flag(allow: &str) -> Vec<String> {
    allow.split_once(' ').map_or_else(
        || vec![allow.to_owned()],
        |(f, v)| vec![f.to_owned(), v.to_owned()],
    )
}

fn with_flag<'a>(flags: &'a [String], pre: &[&'a str]) -> Vec<&'a str> {
    flags
        .iter()
        .map(String::as_str)
        .chain(pre.iter().copied())
        .collect()
}

#[test]
fn the_command_never_holds_a_seccomp_listener() {
    let tree = Tree::new();
    let target = tree.outside.join("x");
    let script = format!(
        r#"
fds = os.listdir("/proc/self/fd")
links = [os.readlink("/proc/self/fd/" + f) for f in fds if os.path.exists("/proc/self/fd/" + f)]
print("listener" if any("seccomp" in l for l in links) else "none", len(links))
print(attempt(lambda: open({target:?}, "w")))
sys.exit(1)
"#
    );
    let v = py_json(&tree, "on", &[], &script);
    let out = v["stdout"].as_str().unwrap_or("");
    assert!(out.starts_with("none "), "{v}");
    assert!(out.contains("\nEACCES") || out.contains("\nEROFS"), "{v}");
    // The same run was observed: the refusal is known from the kernel, not the text.
    assert_eq!(denials(&v), vec![seen("file_write", &target)], "{v}");
    assert!(!target.exists());
}

#[test]
fn the_helper_closes_the_listener_in_every_layer_combination() {
    // Without the namespace layer the command is the helper's own process, not init's child.
    let tree = Tree::new();
    let script = r#"
links = [os.readlink("/proc/self/fd/" + f) for f in os.listdir("/proc/self/fd")
         if os.path.exists("/proc/self/fd/" + f)]
print([l for l in links if "seccomp" in l or "anon_inode" in l])
"#;
    let cmd = tree.py_command(&["--json"], script);
    let mut cmd = common::without_userns(&cmd);
    let v = parse(&cmd.env("CORDON_OBSERVER", "on").output().unwrap());
    assert_eq!(v["outcome"], "success", "{v}");
    assert_eq!(v["stdout"], "[]\n", "{v}");
}

#[test]
fn a_refused_call_gets_the_refusal_errno_and_its_harmless_counterpart_works() {
    let tree = Tree::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        r#"
r = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", {port})))
print(r)
print(attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()))
if r != "OK": sys.stderr.write("ssh: connect to host 127.0.0.1 port {port}: Operation not permitted\n")
sys.exit(1)
"#
    );
    // Silent, a socket refused at creation is no denial (that is what quiet probes look
    // like); said about, it is one, known from the kernel's refusal.
    let silent = py_json(&tree, "on", &[], &script.replace("sys.stderr.write", "str"));
    assert_eq!(silent["stdout"], "EPERM\nOK\n", "{silent}");
    assert!(denials(&silent).is_empty(), "{silent}");
    let said = script.replace(
        "print(attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()))",
        "print('OK')",
    );
    let v = py_json(&tree, "on", &[], &said);
    assert_eq!(v["stdout"], "EPERM\nOK\n", "{v}");
    let found = denials(&v);
    assert_eq!(found.len(), 1, "{v}");
    assert_eq!(found[0].0, "network");
    assert_eq!(found[0].2, "seccomp_observer");
    // From outside: nothing connected.
    std::thread::sleep(Duration::from_millis(100));
    assert!(listener.accept().is_err());
    // allow_with, taken at its word, lets the connection through.
    let allow = v["denials"][0]["allow_with"].as_str().unwrap().to_owned();
    assert_eq!(allow, "--network enabled");
    let flags = flag(&allow);
    let again = py_json(
        &tree,
        "on",
        &with_flag(&flags, &[]),
        &script.replace("sys.exit(1)", ""),
    );
    assert_eq!(again["outcome"], "success", "{again}");
    // With the network enabled unix sockets cannot be created at all (see the README).
    assert_eq!(again["stdout"], "OK\nEPERM\n", "{again}");
    listener.set_nonblocking(false).unwrap();
    assert!(listener.accept().is_ok());
}

#[test]
fn each_write_kind_is_denied_with_its_exact_target_and_allow_with_works() {
    let tree = Tree::new();
    let outside = &tree.outside;
    std::fs::write(outside.join("old"), "old").unwrap();
    std::fs::write(outside.join("doomed"), "x").unwrap();
    std::fs::create_dir(outside.join("gone")).unwrap();
    let cases: Vec<(&str, String, std::path::PathBuf)> = vec![
        (
            "create",
            format!("open({:?}, 'w').write('new')", outside.join("new")),
            outside.join("new"),
        ),
        (
            "mkdir",
            format!("os.mkdir({:?})", outside.join("dir")),
            outside.join("dir"),
        ),
        (
            "unlink",
            format!("os.unlink({:?})", outside.join("doomed")),
            outside.join("doomed"),
        ),
        (
            "rmdir",
            format!("os.rmdir({:?})", outside.join("gone")),
            outside.join("gone"),
        ),
        (
            "truncate",
            format!("os.truncate({:?}, 0)", outside.join("old")),
            outside.join("old"),
        ),
        (
            "rename",
            format!(
                "os.rename({:?}, {:?})",
                outside.join("old"),
                outside.join("renamed")
            ),
            outside.join("old"),
        ),
        (
            "symlink",
            format!("os.symlink('/etc/hostname', {:?})", outside.join("link")),
            outside.join("link"),
        ),
        (
            "relative",
            "open(os.chdir('../outside') or 'rel', 'w')".to_owned(),
            outside.join("rel"),
        ),
    ];
    for (name, call, target) in cases {
        let script =
            format!("r = attempt(lambda: {call})\nprint(r)\nsys.exit(0 if r == 'OK' else 1)");
        let v = py_json(&tree, "on", &[], &script);
        assert_eq!(v["outcome"], "denied", "{name}: {v}");
        let mut expected = vec![seen("file_write", &target)];
        if name == "rename" {
            // Both ends of a rename are writes: the source's directory and the destination's.
            expected.push(seen("file_write", &outside.join("renamed")));
        }
        assert_eq!(denials(&v), expected, "{name}: {v}");
        let flags = flag(&allow_with(&v, &target.display().to_string()));
        assert_eq!(flags[0], "--writable", "{name}");
        let again = py_json(&tree, "on", &with_flag(&flags, &[]), &script);
        assert_eq!(again["outcome"], "success", "{name}: {again}");
        assert!(denials(&again).is_empty(), "{name}: {again}");
    }
    // From outside: each change happened only in the allowed rerun.
    assert_eq!(std::fs::read_to_string(outside.join("new")).unwrap(), "new");
    assert!(!outside.join("doomed").exists() && !outside.join("gone").exists());
    assert!(outside.join("renamed").exists() && !outside.join("old").exists());
}

#[test]
fn reads_and_executes_outside_restricted_read_roots() {
    let tree = Tree::new();
    let secret = tree.outside.join("secret");
    std::fs::write(&secret, "s3cret").unwrap();
    let tool = tree.outside.join("true");
    std::fs::copy("/bin/true", &tool).unwrap();
    // The interpreter's prefix (its bin/ and lib/), wherever it is installed.
    let python_dir = python()
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .display()
        .to_string();
    let profile = tree.root.join("narrow.toml");
    std::fs::write(
        &profile,
        format!(
            "[filesystem]\nread = [\"/usr\", \"/lib\", \"/lib64\", \"/bin\", \"/etc\", \"/proc\", {python_dir:?}]\nwrite = [\":cwd\"]\n"
        ),
    )
    .unwrap();
    let p = profile.display().to_string();
    let script = format!(
        r#"
r = attempt(lambda: open({secret:?}).read())
print(r)
sys.exit(0 if r == "OK" else 1)
"#
    );
    let v = py_json(&tree, "on", &["-p", &p], &script);
    assert_eq!(v["stdout"], "EACCES\n", "{v}");
    assert_eq!(denials(&v), vec![seen("file_read", &secret)], "{v}");
    let flags = flag(&allow_with(&v, &secret.display().to_string()));
    assert_eq!(flags, ["--readable", &secret.display().to_string()]);
    let again = py_json(&tree, "on", &with_flag(&flags, &["-p", &p]), &script);
    assert_eq!(again["outcome"], "success", "{again}");

    let exec = format!(
        r#"
import subprocess
r = attempt(lambda: subprocess.run([{tool:?}], check=True))
print(r)
sys.exit(0 if r == "OK" else 1)
"#
    );
    let v = py_json(&tree, "on", &["-p", &p], &exec);
    assert_eq!(v["stdout"], "EACCES\n", "{v}");
    assert_eq!(denials(&v), vec![seen("file_execute", &tool)], "{v}");
    let flags = flag(&allow_with(&v, &tool.display().to_string()));
    let again = py_json(&tree, "on", &with_flag(&flags, &["-p", &p]), &exec);
    assert_eq!(again["outcome"], "success", "{again}");
}

#[test]
fn a_unix_socket_outside_is_named_exactly_and_allow_with_reaches_it() {
    let tree = Tree::new();
    let path = tree.outside.join("agent.sock");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        r#"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
r = attempt(lambda: s.connect({path:?}))
if r == "OK": s.sendall(b"hello")
print(r)
sys.exit(0 if r == "OK" else 1)
"#
    );
    let v = py_json(&tree, "on", &[], &script);
    assert_eq!(v["stdout"], "EPERM\n", "{v}");
    assert_eq!(denials(&v), vec![seen("unix_socket", &path)], "{v}");
    assert!(listener.accept().is_err(), "nothing may have connected");
    let allow = allow_with(&v, &path.display().to_string());
    assert_eq!(allow, "--allow-unix-sockets");
    let again = py_json(&tree, "on", &[&allow], &script);
    assert_eq!(again["outcome"], "success", "{again}");
    listener.set_nonblocking(false).unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    let mut got = String::new();
    conn.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hello");
}

#[test]
fn a_tcp_port_outside_the_list_is_named_and_the_port_rule_allows_it() {
    if common::landlock_abi().is_none_or(|abi| abi < 4) {
        eprintln!("SKIPPED: TCP port rules need Landlock ABI 4");
        return;
    }
    let tree = Tree::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let profile = |ports: &str| {
        let path = tree.root.join(format!("ports-{}.toml", ports.len()));
        std::fs::write(
            &path,
            format!("extends = \"workspace-write\"\n[network]\nmode = \"enabled\"\ntcp_connect = [{ports}]\n"),
        )
        .unwrap();
        path.display().to_string()
    };
    let script = format!(
        r#"
r = attempt(lambda: socket.create_connection(("127.0.0.1", {port})))
print(r)
sys.exit(0 if r == "OK" else 1)
"#
    );
    let narrow = profile("1");
    let v = py_json(&tree, "on", &["-p", &narrow], &script);
    assert_eq!(v["stdout"], "EACCES\n", "{v}");
    let target = format!("127.0.0.1:{port}");
    assert_eq!(
        denials(&v),
        vec![(
            "tcp_port".to_owned(),
            target.clone(),
            "seccomp_observer".to_owned()
        )],
        "{v}"
    );
    assert_eq!(
        allow_with(&v, &target),
        format!("add {port} to network.tcp_connect")
    );
    let wide = profile(&format!("1, {port}"));
    let again = py_json(&tree, "on", &["-p", &wide], &script);
    assert_eq!(again["outcome"], "success", "{again}");
    assert!(listener.accept().is_ok());
}

#[test]
fn a_hardening_refusal_is_a_syscall_denial_that_no_profile_allows() {
    let tree = Tree::new();
    let script = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, os.getppid(), 0, 0)
print(r, errno.errorcode.get(ctypes.get_errno()))
sys.exit(1)
"#;
    let v = py_json(&tree, "on", &[], script);
    assert_eq!(v["stdout"], "-1 EPERM\n", "{v}");
    assert_eq!(
        denials(&v),
        vec![(
            "syscall".to_owned(),
            "ptrace".to_owned(),
            "seccomp_observer".to_owned()
        )],
        "{v}"
    );
    assert!(allow_with(&v, "ptrace").starts_with("none: no profile allows it"));
}

#[test]
fn forged_text_is_no_denial_when_the_observer_runs() {
    let tree = Tree::new();
    let forged = "touch: cannot touch '/etc/forged': Permission denied";
    let script = format!("sys.stderr.write({forged:?} + '\\n')\nsys.exit(1)");
    let v = py_json(&tree, "on", &[], &script);
    assert_eq!(v["outcome"], "failed", "{v}");
    assert!(denials(&v).is_empty(), "{v}");
    // Control: without kernel evidence the same text is believed (marked as text), so the
    // assertion above can fail.
    let v = py_json(&tree, "off", &[], &script);
    assert_eq!(v["outcome"], "denied", "{v}");
    assert_eq!(
        denials(&v),
        vec![(
            "file_write".to_owned(),
            "/etc/forged".to_owned(),
            "text".to_owned()
        )]
    );
}

/// A check for write access (`access(W_OK)`, `test -w`) is how some tools give up without
/// trying. The kernel's answer counts where the output names the checked path; a check that
/// the tool moves on from (no word about it) is no denial, and a check followed by a real
/// attempt is an ordinary one.
#[test]
fn a_write_check_counts_where_the_output_names_its_path() {
    let tree = Tree::new();
    let outside = &tree.outside;
    let named = format!(
        "ok = os.access({outside:?}, os.W_OK)\nprint({outside:?} + \" isn't writable\", file=sys.stderr)\nsys.exit(0 if ok else 1)"
    );
    let v = py_json(&tree, "on", &[], &named);
    assert_eq!(v["exit_code"], 1, "{v}");
    assert_eq!(denials(&v), vec![seen("file_write", outside)], "{v}");
    assert_eq!(
        allow_with(&v, &outside.display().to_string()),
        format!("--writable {}", outside.display())
    );
    let again = py_json(
        &tree,
        "on",
        &["--writable", &outside.display().to_string()],
        &named,
    );
    assert_eq!(again["outcome"], "success", "{again}");

    // Checked, not named, and the run fails for its own reason: no denial.
    let quiet = format!("os.access({outside:?}, os.W_OK)\nsys.exit(3)");
    let v = py_json(&tree, "on", &[], &quiet);
    assert_eq!(v["exit_code"], 3, "{v}");
    assert!(denials(&v).is_empty(), "{v}");

    // Checked, then tried: the attempt is the denial, with its plain rule.
    let file = outside.join("tried");
    let tried = format!(
        "os.access({outside:?}, os.W_OK)\nr = attempt(lambda: open({file:?}, 'w'))\nsys.exit(0 if r == 'OK' else 1)"
    );
    let v = py_json(&tree, "on", &[], &tried);
    assert_eq!(denials(&v), vec![seen("file_write", &file)], "{v}");
    assert!(!file.exists());
}

/// A netlink socket refused at creation is how Node (every `npm` run), Go and glibc list the
/// network interfaces, and they carry on without it: no denial unless the output says a socket
/// was not permitted (as `ip` does), in either scope.
#[test]
fn a_refused_netlink_socket_counts_only_where_the_output_says_so() {
    let tree = Tree::new();
    let quiet = "r = attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))\nprint(r)\nsys.exit(3)";
    let said = "r = attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))\nprint('Cannot open netlink socket: Operation not permitted', file=sys.stderr)\nsys.exit(1)";
    for scope in ["on", "network"] {
        let v = py_json(&tree, scope, &[], quiet);
        assert_eq!(v["stdout"], "EPERM\n", "{scope}: {v}");
        assert_eq!(v["exit_code"], 3, "{scope}: {v}");
        assert!(denials(&v).is_empty(), "{scope}: {v}");
        let v = py_json(&tree, scope, &[], said);
        assert_eq!(
            denials(&v),
            vec![(
                "syscall".to_owned(),
                "socket".to_owned(),
                "seccomp_observer".to_owned()
            )],
            "{scope}: {v}"
        );
        // With an inet socket refused too, a line about "the socket" is about that one
        // (openssl's "socket: Operation not permitted"): the network denial, and no other.
        let both = "r = attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))\nr = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))\nprint('s_client: socket: Operation not permitted', file=sys.stderr)\nsys.exit(1)";
        let v = py_json(&tree, scope, &[], both);
        assert_eq!(
            denials(&v),
            vec![(
                "network".to_owned(),
                String::new(),
                "seccomp_observer".to_owned()
            )],
            "{scope}: {v}"
        );
    }
}

/// The observer remembers directories it found not to be links; a directory the command then
/// replaces with a link to somewhere outside (by a rename or a removal) must be seen afresh.
#[test]
fn a_directory_replaced_by_a_link_to_outside_is_seen_afresh() {
    let tree = Tree::new();
    for (name, replace) in [
        ("rename", "os.rename('d', 'd.old')"),
        (
            "removal",
            "[os.unlink(f'd/{f}') for f in os.listdir('d')]; os.rmdir('d')",
        ),
    ] {
        let target = tree.outside.join(format!("via-{name}"));
        let script = format!(
            r#"
os.mkdir("d")
for i in range(3):
    open(f"d/warm{{i}}", "w").write("in")
first = attempt(lambda: open("d/a", "w").write("a"))
{replace}
os.symlink({outside:?}, "d")
second = attempt(lambda: open("d/via-{name}", "w"))
print(first, second)
sys.exit(0 if second == "OK" else 1)
"#,
            outside = tree.outside
        );
        let v = py_json(&tree, "on", &[], &script);
        // EACCES from Landlock, or EROFS where the namespace layer mounts the outside read-only.
        let stdout = v["stdout"].as_str().unwrap_or_default();
        assert!(
            stdout == "OK EACCES\n" || stdout == "OK EROFS\n",
            "{name}: {v}"
        );
        assert_eq!(
            denials(&v),
            vec![seen("file_write", &target)],
            "{name}: {v}"
        );
        // From outside: the write through the link never happened.
        assert!(!target.exists(), "{name}");
        for leftover in ["d", "d.old"] {
            let path = tree.cwd.join(leftover);
            if path.is_symlink() {
                std::fs::remove_file(&path).unwrap();
            } else if path.exists() {
                std::fs::remove_dir_all(&path).unwrap();
            }
        }
    }
}

#[test]
fn a_success_is_never_denied_and_repeated_attempts_are_merged_with_a_count() {
    let tree = Tree::new();
    let target = tree.outside.join("again");
    let script = format!(
        "for _ in range(3): print(attempt(lambda: open({target:?}, 'w')))\nsys.exit(SYS_EXIT)"
    );
    let v = py_json(&tree, "on", &[], &script.replace("SYS_EXIT", "0"));
    assert_eq!(v["outcome"], "success", "{v}");
    assert!(denials(&v).is_empty());
    let v = py_json(&tree, "on", &[], &script.replace("SYS_EXIT", "3"));
    assert_eq!(v["outcome"], "denied", "{v}");
    assert_eq!(v["denials"][0]["count"], 3, "{v}");
    assert_eq!(v["exit_code"], 3);
}

#[test]
fn plain_run_prints_each_denial_once_after_the_output() {
    let tree = Tree::new();
    let target = tree.outside.join("twice");
    let out = tree
        .cordon()
        .env("CORDON_OBSERVER", "on")
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "echo start; touch {0}; touch {0}; echo end >&2; exit 1",
            target.display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("cordon: denied"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(&format!("write to {}", target.display())),
        "{err}"
    );
    assert!(
        lines[0].contains("seen by the seccomp observer, 2 times"),
        "{err}"
    );
    let end = err.find("end").unwrap();
    assert!(err.find("cordon: denied").unwrap() > end, "{err}");
    let _ = PROBE;
}

/// With the observer gone (its listener dropped after the command started), every refused
/// call still fails, and so does every watched one: the kernel answers ENOSYS for a filter
/// whose listener is closed. Nothing the policy refuses is ever let through.
#[test]
fn a_dead_observer_leaves_every_refusal_refused() {
    use cordon::helper::{Helper, LaunchOptions};
    use cordon_sandbox::status::{read_records_with_fds, StatusRecord, TAG_SECCOMP_LISTENER};

    let tree = Tree::new();
    let sock_path = tree.outside.join("outside.sock");
    let outside = UnixListener::bind(&sock_path).unwrap();
    outside.set_nonblocking(true).unwrap();
    let readable = tree.cwd.join("readable");
    std::fs::write(&readable, "still readable").unwrap();
    let policy = cordon_sandbox::SandboxPolicy::from_json(&format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{:?}]}},
           "network":{{"mode":"denied","unix_sockets":"deny"}},
           "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#,
        tree.cwd
    ))
    .unwrap();
    let script = format!(
        r#"{PROBE}
print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)))
print(attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect({sock_path:?})))
print(attempt(lambda: open("written", "w")))
print(open({readable:?}).read())
"#
    );
    let argv = [
        python().into(),
        "-I".into(),
        "-S".into(),
        "-c".into(),
        script.into(),
    ];
    let helper = Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon"));
    let options = LaunchOptions {
        held: false,
        observe: Some(cordon::evidence::ObserveScope::Full),
    };
    let mut launch = helper
        .command_with_options(&policy, &tree.cwd, &argv, &[], options)
        .unwrap();
    launch.command.stdout(std::process::Stdio::piped());
    let mut child = launch.command.spawn().unwrap();
    let (status, _) = launch.status.into_read_end_and_hold();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        read_records_with_fds(status.into(), |record, mut fds| {
            if matches!(record, StatusRecord::Fds { tag, .. } if tag == TAG_SECCOMP_LISTENER) {
                let _ = tx.send(fds.pop());
            }
        })
    });
    let listener = rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .expect("the helper hands over its listener");
    // Die at once. Under "read everything" the helper's execve of python is not watched, so
    // nothing waits for an answer; every call the command makes from here on finds no listener.
    drop(listener);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap().unwrap();
    assert_eq!(out, "ENOSYS\nENOSYS\nENOSYS\nstill readable\n");
    assert!(status.success());
    // From outside: nothing connected, nothing was written.
    assert!(outside.accept().is_err());
    assert!(!tree.cwd.join("written").exists());
}

#[test]
fn exec_streaming_yields_a_denied_event_as_it_happens() {
    use cordon::exec::{ExecEvent, ExecRequest, Sandbox};
    use cordon::helper::Helper;

    let tree = Tree::new();
    let target = tree.outside.join("live");
    let policy = cordon_sandbox::SandboxPolicy::from_json(&format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{:?}]}},
           "network":{{"mode":"denied","unix_sockets":"deny"}},
           "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#,
        tree.cwd
    ))
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let events = runtime.block_on(async {
        let sandbox = Sandbox::new(Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon")));
        // The observer sends the event before it answers the call, so before the command can
        // write what follows the attempt.
        let script = format!(
            "touch {0}; echo tried; sleep 0.3; touch {0}; exit 1",
            target.display()
        );
        let request =
            ExecRequest::sandboxed(["sh", "-c", &script], &tree.cwd, policy).observe(true);
        let mut rx = sandbox.exec_streaming(request);
        let mut events = Vec::new();
        while let Some(event) = rx.recv().await {
            events.push(event);
        }
        events
    });
    let denied: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, ExecEvent::Denied(d) if d.target.as_deref() == Some(&*target.to_string_lossy())))
        .map(|(i, _)| i)
        .collect();
    // Once, not once per attempt, and before the output that follows the attempt.
    assert_eq!(denied.len(), 1, "{events:?}");
    let tried = events
        .iter()
        .position(|e| matches!(e, ExecEvent::Output { bytes, .. } if bytes.starts_with(b"tried")))
        .unwrap();
    assert!(denied[0] < tried, "{events:?}");
    let Some(ExecEvent::Finished(result)) = events.last() else {
        panic!("no result");
    };
    let kernel = result.kernel_denials.as_ref().expect("the observer ran");
    assert_eq!(kernel.len(), 1);
    assert_eq!(kernel[0].count, 2);
}

/// `cordon run --json -- python3 -c PROBE+SCRIPT` with the environment's default observer
/// (no `CORDON_OBSERVER`): the light scope.
fn py_json_default(tree: &Tree, pre: &[&str], script: &str) -> Value {
    let out = tree
        .py_command(&[&["--json"][..], pre].concat(), script)
        .env_remove("CORDON_OBSERVER")
        .output()
        .expect("spawn cordon");
    parse(&out)
}

/// By default the observer watches only the calls made rarely (no writing open waits for it): a refused connection and a refused unix socket are known from the kernel with
/// their exact targets, forged network text is no denial, a refused directory creation is the
/// kernel's too, and a writing open's denial still comes from the text and says so.
#[test]
fn the_default_scope_knows_network_refusals_and_directory_creations_from_the_kernel_and_files_from_the_text(
) {
    let tree = Tree::new();
    let outside = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    outside.set_nonblocking(true).unwrap();
    let port = outside.local_addr().unwrap().port();
    let sock = tree.outside.join("daemon.sock");
    let unix = UnixListener::bind(&sock).unwrap();
    unix.set_nonblocking(true).unwrap();
    // With the network denied an inet socket is refused at creation (no address yet), a unix
    // socket at its connection (with the path).
    let script = format!(
        r#"
print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", {port}))))
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: u.connect({sock:?})))
sys.exit(1)
"#
    );
    let v = py_json_default(&tree, &[], &script);
    assert_eq!(v["stdout"], "EPERM\nEPERM\n", "{v}");
    // The inet socket refused at creation has no target and the command said nothing about
    // it: that is what a quiet name-lookup probe looks like, so it is no denial on its own.
    assert_eq!(denials(&v), vec![seen("unix_socket", &sock)], "{v}");
    // Said about, it is one, known from the kernel's refusal.
    let said = format!(
        "print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)))\n\
         sys.stderr.write('ssh: connect to host 127.0.0.1 port {port}: Operation not permitted\\n')\n\
         sys.exit(1)"
    );
    let v = py_json_default(&tree, &[], &said);
    assert_eq!(
        denials(&v),
        vec![(
            "network".to_owned(),
            format!("127.0.0.1:{port}"),
            "seccomp_observer".to_owned()
        )],
        "{v}"
    );
    // A unix socket path that does not exist would have failed with ENOENT anyway: no denial.
    let v = py_json_default(
        &tree,
        &[],
        &format!(
            "u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\nprint(attempt(lambda: u.connect({:?})))\nsys.exit(1)",
            tree.outside.join("no-such.sock")
        ),
    );
    assert_eq!(v["stdout"], "EPERM\n", "{v}");
    assert!(denials(&v).is_empty(), "{v}");
    assert!(outside.accept().is_err(), "nothing may have connected");
    assert!(unix.accept().is_err(), "nothing may have connected");

    // Forged network text: no denial by default; believed (as text) with the observer off.
    let forged = "ssh: connect to host github.com port 22: Operation not permitted";
    let script = format!("sys.stderr.write({forged:?} + '\\n')\nsys.exit(255)");
    let v = py_json_default(&tree, &[], &script);
    assert_eq!(v["outcome"], "failed", "{v}");
    assert!(denials(&v).is_empty(), "{v}");
    let v = py_json(&tree, "off", &[], &script);
    assert_eq!(v["outcome"], "denied", "{v}");

    // A file denial: not watched in this scope, so known from the text, marked as such.
    let v = py_json_default(
        &tree,
        &[],
        r#"
r = attempt(lambda: open("/etc/cordon-default-scope", "w"))
print(r)
if r != "OK": sys.stderr.write("touch: cannot touch '/etc/cordon-default-scope': Read-only file system\n")
sys.exit(1)
"#,
    );
    assert_eq!(
        denials(&v),
        vec![(
            "file_write".to_owned(),
            "/etc/cordon-default-scope".to_owned(),
            "text".to_owned()
        )],
        "{v}"
    );
    assert!(!Path::new("/etc/cordon-default-scope").exists());

    // A directory creation is watched in this scope: a refused one is known from the kernel,
    // with its exact path, though the command printed no path at all.
    let v = py_json_default(
        &tree,
        &[],
        r#"
print(attempt(lambda: os.makedirs("/etc/cordon-light-scope/sub")))
sys.exit(1)
"#,
    );
    assert_ne!(v["stdout"], "OK\n", "{v}");
    assert_eq!(
        denials(&v),
        vec![seen("file_write", Path::new("/etc/cordon-light-scope"))],
        "{v}"
    );
    assert_eq!(v["denials"][0]["allow_with"], "--writable /etc", "{v}");
    assert!(!Path::new("/etc/cordon-light-scope").exists());
}

/// A server binding a unix socket (a database, an agent, a multiplexer) under "unix sockets
/// denied" is refused at the bind, before the socket file exists: a denial of that exact
/// path, relative paths resolved against the process's cwd, in both scopes; the suggested
/// flag makes the bind work. The socket file is checked from outside.
#[test]
fn a_refused_unix_bind_is_a_denial_of_the_socket_it_would_have_made() {
    let tree = Tree::new();
    let script = r#"
import os
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
os.mkdir("run")
os.chdir("run")
r = attempt(lambda: s.bind("./app.sock"))
print(r)
sys.exit(0 if r == "OK" else 1)
"#;
    let sock = tree.cwd.join("run/app.sock");
    for scope in ["on", "network"] {
        let _ = std::fs::remove_dir_all(tree.cwd.join("run"));
        let v = py_json(&tree, scope, &[], script);
        assert_eq!(v["stdout"], "EPERM\n", "{scope}: {v}");
        assert_eq!(
            denials(&v),
            vec![seen("unix_socket", &sock)],
            "{scope}: {v}"
        );
        assert!(!sock.exists(), "{scope}: no socket file may have been made");
        let allow = allow_with(&v, &sock.display().to_string());
        assert_eq!(allow, "--allow-unix-sockets");
        let _ = std::fs::remove_dir_all(tree.cwd.join("run"));
        let again = py_json(&tree, scope, &[&allow], script);
        assert_eq!(again["outcome"], "success", "{scope}: {again}");
        use std::os::unix::fs::FileTypeExt;
        assert!(
            std::fs::symlink_metadata(&sock)
                .unwrap()
                .file_type()
                .is_socket(),
            "{scope}: the rerun made the socket"
        );
    }
}

/// Connecting to a unix socket that does not exist would fail anyway, except for programs
/// that take ENOENT as "no server yet, start one" and stop on EPERM (tmux, gpg, screen): such
/// a refusal counts where the output names that path as not permitted, and only where the
/// command could have started that server (a writable root); a client of a socket outside
/// (psql's `/var/run/postgresql/...`) would have failed anyway.
#[test]
fn a_refused_connect_to_an_absent_socket_counts_where_the_output_names_it() {
    let tree = Tree::new();
    let absent = tree.cwd.join("tmux-0/default");
    std::fs::create_dir_all(absent.parent().unwrap()).unwrap();
    let elsewhere = tree.outside.join("postgresql/.s.PGSQL.5432");
    std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    let client = format!(
        "r = attempt(lambda: socket.socket(socket.AF_UNIX).connect({elsewhere:?}))\nprint(r)\nprint('connection to server on socket \"{}\" failed: Operation not permitted', file=sys.stderr)\nsys.exit(2)",
        elsewhere.display()
    );
    let quiet = format!(
        "r = attempt(lambda: socket.socket(socket.AF_UNIX).connect({absent:?}))\nprint(r)\nsys.exit(1)"
    );
    let said = format!(
        "r = attempt(lambda: socket.socket(socket.AF_UNIX).connect({absent:?}))\nprint('error connecting to {} (Operation not permitted)', file=sys.stderr)\nsys.exit(1)",
        absent.display()
    );
    // Named, but as missing: the program's own ENOENT-like message is no denial.
    let missing = format!(
        "r = attempt(lambda: socket.socket(socket.AF_UNIX).connect({absent:?}))\nprint('no server running on {}', file=sys.stderr)\nsys.exit(1)",
        absent.display()
    );
    for scope in ["on", "network"] {
        let v = py_json(&tree, scope, &[], &quiet);
        assert_eq!(v["stdout"], "EPERM\n", "{scope}: {v}");
        assert!(denials(&v).is_empty(), "{scope}: {v}");
        let v = py_json(&tree, scope, &[], &missing);
        assert!(denials(&v).is_empty(), "{scope}: {v}");
        let v = py_json(&tree, scope, &[], &client);
        assert_eq!(v["stdout"], "EPERM\n", "{scope}: {v}");
        assert!(denials(&v).is_empty(), "{scope}: {v}");
        let v = py_json(&tree, scope, &[], &said);
        assert_eq!(
            denials(&v),
            vec![seen("unix_socket", &absent)],
            "{scope}: {v}"
        );
        assert_eq!(
            allow_with(&v, &absent.display().to_string()),
            "--allow-unix-sockets"
        );
    }
}

/// A refused socket that administers or observes the host (audit netlink, a packet socket, a
/// raw one) is a denial by the kernel's word alone, in the default scope, though the command
/// says nothing about it: no library opens one quietly the way glibc's resolver opens its
/// route-netlink socket. A refused route-netlink socket stays a probe until the text names it,
/// and then its suggestion, `--network enabled`, makes the same socket work.
#[test]
fn administrative_sockets_are_denials_without_text_and_route_netlink_suggests_the_network() {
    let tree = Tree::new();
    for (family, kind, protocol, target) in [
        (
            "socket.AF_NETLINK",
            "socket.SOCK_RAW",
            "12",
            "socket(AF_NETLINK, NETLINK_NETFILTER)",
        ),
        (
            "socket.AF_PACKET",
            "socket.SOCK_RAW",
            "0",
            "socket(AF_PACKET)",
        ),
        (
            "socket.AF_INET",
            "socket.SOCK_RAW",
            "socket.IPPROTO_ICMP",
            "socket(AF_INET, SOCK_RAW)",
        ),
    ] {
        let script = format!(
            "print(attempt(lambda: socket.socket({family}, {kind}, {protocol})))\nsys.exit(1)"
        );
        let v = py_json_default(&tree, &[], &script);
        assert_eq!(v["stdout"], "EPERM\n", "{v}");
        assert_eq!(
            denials(&v),
            vec![(
                "syscall".to_owned(),
                target.to_owned(),
                "seccomp_observer".to_owned()
            )],
            "{v}"
        );
        assert!(
            allow_with(&v, target).starts_with("none: no profile allows it"),
            "{v}"
        );
    }
    // The audit socket, which PAM's modules try and do without: a denial only where the
    // output speaks of audit (useradd's words).
    let audit = "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)";
    let v = py_json_default(
        &tree,
        &[],
        &format!("print(attempt(lambda: {audit}))\nsys.exit(1)"),
    );
    assert_eq!(v["stdout"], "EPERM\n", "{v}");
    assert!(denials(&v).is_empty(), "{v}");
    let said = format!(
        "print(attempt(lambda: {audit}))\nsys.stderr.write('Cannot open audit interface - aborting.\\n')\nsys.exit(10)"
    );
    let v = py_json_default(&tree, &[], &said);
    assert_eq!(
        denials(&v),
        vec![(
            "syscall".to_owned(),
            "socket(AF_NETLINK, NETLINK_AUDIT)".to_owned(),
            "seccomp_observer".to_owned()
        )],
        "{v}"
    );
    // A unix datagram pair (socat's own channel) is refused with unix sockets denied, and the
    // unix-socket setting lifts it.
    let pair =
        "print(attempt(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)))\nsys.exit(1)";
    let v = py_json_default(&tree, &[], pair);
    assert_eq!(v["stdout"], "EPERM\n", "{v}");
    assert_eq!(allow_with(&v, "socketpair"), "--allow-unix-sockets", "{v}");
    let v = py_json_default(&tree, &["--allow-unix-sockets"], pair);
    assert_eq!(v["stdout"], "OK\n", "{v}");
    // Route netlink with nothing said: a probe, no denial.
    let route = "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)";
    let quiet = format!("print(attempt(lambda: {route}))\nsys.exit(1)");
    let v = py_json_default(&tree, &[], &quiet);
    assert_eq!(v["stdout"], "EPERM\n", "{v}");
    assert!(denials(&v).is_empty(), "{v}");
    // Said about (ip's words), a denial, and the suggestion makes it work.
    let said = format!(
        "r = attempt(lambda: {route})\nprint(r)\n\
         if r != 'OK': sys.stderr.write('Cannot open netlink socket: Operation not permitted\\n'); sys.exit(1)"
    );
    let v = py_json_default(&tree, &[], &said);
    assert_eq!(allow_with(&v, "socket"), "--network enabled", "{v}");
    let v = py_json_default(&tree, &["--network", "enabled"], &said);
    assert_eq!(v["stdout"], "OK\n", "{v}");
    assert_eq!(v["outcome"], "success", "{v}");
}

/// Root's privileged calls (changing the root directory, the host name, the clock) fail in the
/// sandbox, which drops the capabilities they need: a denial by the kernel's word, in the
/// default scope, though the command prints nothing; the host's name and clock are untouched.
/// (An ordinary user lacks those capabilities outside too, and gets no denial: the parent
/// checks its own effective set.)
#[test]
fn roots_privileged_calls_are_denials_of_the_call() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root, whose capabilities the sandbox drops");
        return;
    }
    let tree = Tree::new();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for (call, script) in [
        ("chroot", "print(attempt(lambda: os.chroot('/')))"),
        ("sethostname", "print(attempt(lambda: socket.sethostname('cordon-test')))"),
        (
            "clock_settime",
            "import time\nprint(attempt(lambda: time.clock_settime(time.CLOCK_REALTIME, time.time())))",
        ),
    ] {
        let v = py_json_default(&tree, &[], &format!("{script}\nsys.exit(1)"));
        assert_eq!(v["stdout"], "EPERM\n", "{call}: {v}");
        assert_eq!(
            denials(&v),
            vec![(
                "syscall".to_owned(),
                call.to_owned(),
                "seccomp_observer".to_owned()
            )],
            "{v}"
        );
        assert!(
            allow_with(&v, call).starts_with("none: no profile allows it"),
            "{v}"
        );
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap(),
        host
    );
}
