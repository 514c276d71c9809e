//! The agent-facing requests of `cordon serve`, as a client sees them over the real binary's
//! stdin/stdout: `user_shell` (the person's own command, unconfined on purpose, its events as
//! notifications), `apply_patch` (the applier confined by the session's policy, denials through
//! the approval round-trip), and network hosts put to the client while a command runs
//! (`approve_network`, proxy mode). Every effect is checked outside the sandbox.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::Tree;
use serde_json::{json, Value};

struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
}

impl Server {
    fn start(tree: &Tree, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = tree.cordon();
        cmd.arg("serve").args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn cordon serve");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("server wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Server {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").expect("write to the server");
        self.stdin.flush().expect("flush");
    }

    fn request(&mut self, id: u64, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a message from the server within 60 s")
    }

    /// Every message up to and including the reply to `id`; the server's own requests are
    /// answered with `answer(method, params)` (a decision) on the way.
    fn until_reply(
        &mut self,
        id: u64,
        mut answer: impl FnMut(&str, &Value) -> &'static str,
    ) -> (Vec<Value>, Value) {
        let mut seen = Vec::new();
        loop {
            let message = self.next();
            if message["id"] == json!(id) && message.get("method").is_none() {
                return (seen, message);
            }
            if let (Some(method), Some(ask_id)) = (message["method"].as_str(), message.get("id")) {
                let decision = answer(method, &message["params"]);
                let reply =
                    json!({"jsonrpc": "2.0", "id": ask_id, "result": {"decision": decision}});
                self.send(reply);
            }
            seen.push(message);
        }
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.request(id, method, params);
        let (seen, reply) = self.until_reply(id, |method, _| panic!("unexpected {method}"));
        assert!(seen.is_empty(), "{seen:?}");
        reply
    }

    fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin);
        self.child.wait().expect("wait for the server")
    }
}

fn pid_alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
}

#[test]
fn user_shell_runs_unconfined_beside_a_running_sandboxed_command_with_its_events_in_order() {
    let tree = Tree::new();
    let mut server = Server::start(
        &tree,
        &["--shell", "/bin/bash"],
        // A managed network's variables never reach the person's command.
        &[
            ("SHELL", "/bin/bash"),
            ("HTTP_PROXY", "http://127.0.0.1:9/"),
        ],
    );
    // A sandboxed command of the same session, left running.
    let r = server.call(
        1,
        "exec",
        json!({"argv": ["sh", "-c", "echo started; sleep 60"], "yield_time_ms": 1000}),
    );
    assert_eq!(r["result"]["running"], json!(true), "{r}");
    let sandboxed = r["result"]["process_id"].clone();

    // The person's command writes where the model's may not: outside the workspace.
    let mine = tree.outside.join("mine");
    let command = format!(
        "echo out; echo err >&2; echo person > {}; echo \"proxy=${{HTTP_PROXY-unset}}\"; exit 3",
        mine.display()
    );
    server.request(
        2,
        "user_shell",
        json!({"call_id": "u1", "command": command}),
    );
    let (events, reply) = server.until_reply(2, |m, _| panic!("unexpected {m}"));
    let events: Vec<&Value> = events
        .iter()
        .map(|e| {
            assert_eq!(e["method"], json!("user_shell_event"), "{e}");
            &e["params"]
        })
        .collect();
    assert_eq!(
        *events[0],
        json!({"event": "begin", "call_id": "u1", "argv": ["/bin/bash", "-lc", command],
               "cwd": tree.cwd, "source": "user_shell"})
    );
    let last = events.last().expect("events");
    assert_eq!(last["event"], json!("end"));
    assert_eq!(last["exit_code"], json!(3));
    let mut stdout = String::new();
    let mut stderr = String::new();
    for delta in &events[1..events.len() - 1] {
        assert_eq!(delta["event"], json!("output_delta"), "{delta}");
        assert_eq!(delta["call_id"], json!("u1"));
        let chunk = delta["chunk"].as_str().expect("chunk");
        match delta["stream"].as_str() {
            Some("stdout") => stdout.push_str(chunk),
            Some("stderr") => stderr.push_str(chunk),
            other => panic!("stream {other:?}"),
        }
    }
    assert_eq!(stdout, "out\nproxy=unset\n");
    assert_eq!(stderr, "err\n");
    let result = &reply["result"];
    assert_eq!(result["call_id"], json!("u1"), "{reply}");
    assert_eq!(result["exit_code"], json!(3));
    assert_eq!(result["stdout"], json!("out\nproxy=unset\n"));
    assert_eq!(result["stderr"], json!("err\n"));
    let history = result["history"].as_str().expect("history");
    assert!(
        history.starts_with(&format!(
            "<user_shell_command>\n<command>\n{command}\n</command>"
        )),
        "{history}"
    );
    assert!(history.contains("Exit code: 3\n"), "{history}");
    assert_eq!(std::fs::read_to_string(&mine).expect("written"), "person\n");

    // The sandboxed command was not disturbed, and is still confined: the same write from it
    // is denied (the client refuses the grant) and leaves nothing outside.
    let r = server.call(
        3,
        "write_stdin",
        json!({"process_id": sandboxed, "yield_time_ms": 100}),
    );
    assert_eq!(r["result"]["running"], json!(true), "{r}");
    let theirs = tree.outside.join("theirs");
    server.request(
        4,
        "exec",
        json!({"cmd": format!("echo model > {}", theirs.display())}),
    );
    let (asked, r) = server.until_reply(4, |method, _| {
        assert_eq!(method, "approve");
        "deny"
    });
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(r["result"]["outcome"]["kind"], json!("denied"), "{r}");
    assert!(!theirs.exists());
    let r = server.call(5, "kill", json!({"process_id": sandboxed}));
    assert_eq!(r["result"]["outcome"], json!({"kind": "cancelled"}), "{r}");
    assert!(server.close().success());
}

#[test]
fn user_shell_cancellation_kills_the_process_group_and_bad_requests_run_nothing() {
    let tree = Tree::new();
    let mut server = Server::start(&tree, &[], &[("SHELL", "/bin/bash")]);
    let pidfile = tree.outside.join("pid");
    let command = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
    server.request(
        1,
        "user_shell",
        json!({"call_id": "long", "command": command}),
    );
    // Wait until the background child exists, then cancel from a second request.
    let mut pid = None;
    for _ in 0..200 {
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            pid = Some(p);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = pid.expect("the command started its child");
    assert!(pid_alive(pid));
    // A second command with the same id is refused while the first runs.
    server.request(
        2,
        "user_shell",
        json!({"call_id": "long", "command": "touch dup"}),
    );
    server.request(3, "user_shell_cancel", json!({"call_id": "long"}));
    let mut replies = std::collections::HashMap::new();
    while replies.len() < 3 {
        let m = server.next();
        if m.get("method").is_none() {
            replies.insert(m["id"].as_u64().expect("id"), m);
        }
    }
    assert_eq!(
        replies[&2]["error"]["code"],
        json!(-32602),
        "{:?}",
        replies[&2]
    );
    assert!(!tree.cwd.join("dup").exists());
    assert_eq!(replies[&3]["result"], json!({"cancelled": true}));
    let end = &replies[&1]["result"];
    assert_eq!(end["exit_code"], json!(-1), "{end}");
    assert!(
        end["stderr"]
            .as_str()
            .expect("stderr")
            .ends_with("command aborted by user"),
        "{end}"
    );
    // The whole group, the background child included, is gone.
    let mut alive = true;
    for _ in 0..100 {
        alive = pid_alive(pid);
        if !alive {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive, "process {pid} survived the cancellation");

    let r = server.call(4, "user_shell_cancel", json!({"call_id": "long"}));
    assert_eq!(r["error"]["code"], json!(-32001), "{r}");
    let missing = tree.root.join("missing");
    let r = server.call(
        5,
        "user_shell",
        json!({"call_id": "c", "command": "touch ran", "cwd": missing}),
    );
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .expect("message")
            .contains("not an existing local directory"),
        "{r}"
    );
    let r = server.call(
        6,
        "user_shell",
        json!({"call_id": "c", "command": "touch ran", "colour": "red"}),
    );
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    let r = server.call(7, "user_shell", json!({"command": "touch ran"}));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert!(!tree.cwd.join("ran").exists());
    // A harmless one still runs, in the session's directory.
    server.request(
        8,
        "user_shell",
        json!({"call_id": "ok", "command": "touch ran && pwd"}),
    );
    let (_, r) = server.until_reply(8, |m, _| panic!("unexpected {m}"));
    assert_eq!(r["result"]["exit_code"], json!(0), "{r}");
    assert_eq!(
        r["result"]["stdout"],
        json!(format!("{}\n", tree.cwd.display()))
    );
    assert!(tree.cwd.join("ran").exists());
    assert!(server.close().success());
}

#[test]
fn apply_patch_applies_inside_the_roots_and_a_write_outside_goes_through_the_approval() {
    let tree = Tree::new();
    let w = &tree.cwd;
    std::fs::write(w.join("a.txt"), "one\ntwo\nthree\n").expect("write");
    let mut server = Server::start(&tree, &[], &[]);

    // A normal patch, relative paths from the session's directory.
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n three\n*** Add File: sub/new.txt\n+hello\n*** End Patch\n";
    let r = server.call(1, "apply_patch", json!({"patch": patch}));
    let result = &r["result"];
    assert_eq!(result["applied"], json!(true), "{r}");
    assert_eq!(result["failure"], Value::Null);
    assert_eq!(result["approval"], Value::Null);
    assert_eq!(result["changes"][0]["kind"], json!("modified"));
    assert_eq!(
        result["changes"][0]["path"],
        json!(w.join("a.txt").to_string_lossy())
    );
    let diff = result["changes"][0]["diff"].as_str().expect("diff");
    assert!(diff.contains("-two\n+TWO\n"), "{diff}");
    assert_eq!(result["changes"][1]["kind"], json!("added"));
    assert_eq!(
        std::fs::read_to_string(w.join("a.txt")).expect("a"),
        "one\nTWO\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("sub/new.txt")).expect("new"),
        "hello\n"
    );

    // Outside the roots: the client is asked with exactly the directory, says no; the file
    // changed before the refusal is reported, nothing is written outside.
    let refused = tree.root.join("refused");
    std::fs::create_dir(&refused).expect("mkdir");
    let patch = format!(
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** Add File: {}\n+planted\n*** End Patch\n",
        refused.join("f").display()
    );
    server.request(2, "apply_patch", json!({"patch": patch}));
    let mut asked = Vec::new();
    let (_, r) = server.until_reply(2, |method, params| {
        asked.push((method.to_owned(), params.clone()));
        "deny"
    });
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].0, "approve");
    assert_eq!(asked[0].1["command"], json!(["apply_patch"]));
    assert_eq!(
        asked[0].1["grant"],
        json!([format!("--writable {}", refused.display())])
    );
    let result = &r["result"];
    assert_eq!(result["applied"], json!(false), "{r}");
    assert_eq!(result["approval"]["decision"], json!("denied"));
    assert_eq!(result["denials"][0]["operation"], json!("file_write"));
    assert_eq!(
        result["failure"]["path"],
        json!(refused.join("f").to_string_lossy())
    );
    assert_eq!(result["changes"].as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(result["changes"][0]["kind"], json!("modified"));
    assert!(!refused.join("f").exists());
    assert_eq!(
        std::fs::read_to_string(w.join("a.txt")).expect("a"),
        "ONE\nTWO\nthree\n"
    );

    // Approved: the rest of the patch runs again with exactly that directory; the report
    // holds both attempts' changes, and the first file is not patched twice.
    let granted = tree.root.join("granted");
    std::fs::create_dir(&granted).expect("mkdir");
    let patch = format!(
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-ONE\n+1\n*** Add File: {}\n+approved\n*** End Patch\n",
        granted.join("f").display()
    );
    server.request(3, "apply_patch", json!({"patch": patch}));
    let (_, r) = server.until_reply(3, |method, _| {
        assert_eq!(method, "approve");
        "approve"
    });
    let result = &r["result"];
    assert_eq!(result["applied"], json!(true), "{r}");
    assert_eq!(result["approval"]["decision"], json!("approved"));
    let kinds: Vec<&Value> = result["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| &c["kind"])
        .collect();
    assert_eq!(kinds, [&json!("modified"), &json!("added")], "{r}");
    assert_eq!(
        std::fs::read_to_string(granted.join("f")).expect("granted"),
        "approved\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("a.txt")).expect("a"),
        "1\nTWO\nthree\n"
    );
    // The grant was for that patch only: the refused directory is still refused, from the
    // remembered answer (no second question).
    let patch = format!(
        "*** Begin Patch\n*** Add File: {}\n+planted\n*** End Patch\n",
        refused.join("f").display()
    );
    let r = server.call(4, "apply_patch", json!({"patch": patch}));
    assert_eq!(r["result"]["approval"]["cached"], json!(true), "{r}");
    assert!(!refused.join("f").exists());

    // Malformed: refused with the line, nothing touched.
    let r = server.call(
        5,
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Add File: x.txt\nno plus\n*** End Patch\n"}),
    );
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .expect("message")
            .contains("line 3"),
        "{r}"
    );
    assert!(!w.join("x.txt").exists());
    let r = server.call(6, "apply_patch", json!({"patch": "", "policy": {}}));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert!(server.close().success());
}

/// A one-answer-per-connection HTTP server on the host's loopback, counting connections.
fn upstream() -> (u16, Arc<Mutex<usize>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let count = Arc::new(Mutex::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            *seen.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n",
            );
        }
    });
    (port, count)
}

#[test]
fn network_hosts_are_put_to_the_client_while_the_command_runs_once_per_session() {
    if !common::userns_available() {
        eprintln!("SKIPPED: proxy mode needs user namespaces");
        return;
    }
    let tree = Tree::new();
    let (port, connections) = upstream();
    let hosts = tree.root.join("hosts");
    std::fs::write(&hosts, "127.0.0.1 granted.test refused.test\n").expect("hosts");
    let mut server = Server::start(
        &tree,
        &["--network", "proxy"],
        &[("CORDON_PROXY_HOSTS", hosts.to_str().expect("utf-8"))],
    );
    let script = format!(
        r#"
import urllib.request, urllib.error
def get(host):
    try:
        return urllib.request.urlopen(f"http://{{host}}:{port}/", timeout=30).read().decode().strip()
    except urllib.error.HTTPError as e:
        return str(e.code)
print("granted.test", get("granted.test"))
print("granted.test again", get("granted.test"))
print("refused.test", get("refused.test"))
"#
    );
    let python = common::python().to_string_lossy().into_owned();
    let exec = json!({"argv": [python, "-c", script], "timeout_ms": 60000, "yield_time_ms": 60000});
    server.request(1, "exec", exec.clone());
    let mut asked = Vec::new();
    let (_, r) = server.until_reply(1, |method, params| {
        asked.push((method.to_owned(), params.clone()));
        assert_eq!(method, "approve_network", "{params}");
        // While the question is open, the command waits on its connection.
        std::thread::sleep(Duration::from_millis(300));
        if params["host"] == json!("granted.test") {
            "approve"
        } else {
            "deny"
        }
    });
    assert_eq!(
        asked,
        vec![
            (
                "approve_network".to_owned(),
                json!({"host": "granted.test", "port": port})
            ),
            (
                "approve_network".to_owned(),
                json!({"host": "refused.test", "port": port})
            ),
        ]
    );
    let result = &r["result"];
    assert_eq!(result["outcome"]["kind"], json!("success"), "{r}");
    assert_eq!(
        result["output"],
        json!("granted.test ok\ngranted.test again ok\nrefused.test 403\n")
    );
    assert_eq!(
        *connections.lock().unwrap_or_else(|e| e.into_inner()),
        2,
        "the refused host never reached the server"
    );

    // The session remembers both answers: nobody is asked again.
    let r = server.call(2, "exec", exec);
    assert_eq!(
        r["result"]["output"],
        json!("granted.test ok\ngranted.test again ok\nrefused.test 403\n"),
        "{r}"
    );
    assert_eq!(*connections.lock().unwrap_or_else(|e| e.into_inner()), 4);

    // A command that fails on the refused host is denied, and the refusal is not put to the
    // client a second time as an `approve` after the run.
    let url = format!("http://refused.test:{port}/");
    let r = server.call(
        3,
        "exec",
        json!({"argv": ["curl", "-sS", "-f", "-m", "20", url]}),
    );
    assert_eq!(r["result"]["outcome"]["kind"], json!("denied"), "{r}");
    assert_eq!(
        r["result"]["outcome"]["denials"][0]["target"],
        json!(format!("refused.test:{port}"))
    );
    assert_eq!(r["result"]["approval"]["decision"], json!("denied"));
    assert_eq!(r["result"]["approval"]["cached"], json!(true));
    assert_eq!(*connections.lock().unwrap_or_else(|e| e.into_inner()), 4);
    assert!(server.close().success());
}

#[test]
fn end_of_input_denies_an_open_question_and_stops_the_persons_commands() {
    let tree = Tree::new();
    let mut server = Server::start(&tree, &[], &[("SHELL", "/bin/bash")]);
    let pidfile = tree.outside.join("pid");
    server.request(
        1,
        "user_shell",
        json!({"call_id": "long", "command": format!("sleep 60 & echo $! > {}; wait", pidfile.display())}),
    );
    let target = tree.outside.join("never");
    server.request(
        2,
        "exec",
        json!({"cmd": format!("echo x > {}", target.display())}),
    );
    // The question comes; the client goes away without answering it.
    loop {
        let m = server.next();
        if m["method"] == json!("approve") {
            break;
        }
    }
    let pid = (0..200)
        .find_map(|_| {
            let pid = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|t| t.trim().parse::<i32>().ok());
            if pid.is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
            pid
        })
        .expect("the person's command started its child");
    let started = std::time::Instant::now();
    drop(server.stdin);
    let mut replies = std::collections::HashMap::new();
    while let Ok(m) = server.lines.recv_timeout(Duration::from_secs(30)) {
        if let Some(id) = m["id"].as_u64() {
            replies.insert(id, m);
        }
    }
    let status = server.child.wait().expect("wait");
    assert!(status.success(), "{status}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the server took {:?} to end",
        started.elapsed()
    );
    // Unanswered is a deny: no retry, nothing written outside.
    assert_eq!(
        replies[&2]["result"]["approval"]["decision"],
        json!("denied"),
        "{:?}",
        replies[&2]
    );
    assert!(!target.exists());
    assert_eq!(
        replies[&1]["result"]["exit_code"],
        json!(-1),
        "{:?}",
        replies[&1]
    );
    assert!(!pid_alive(pid), "process {pid} outlived the server");
}

#[test]
fn a_server_started_with_no_user_shell_refuses_it_and_still_runs_sandboxed_commands() {
    let tree = Tree::new();
    let mut server = Server::start(&tree, &["--no-user-shell"], &[]);
    let target = tree.outside.join("full-access");
    let r = server.call(
        1,
        "user_shell",
        json!({"call_id": "u", "command": format!("touch {}", target.display())}),
    );
    assert_eq!(r["error"]["code"], json!(-32002), "{r}");
    assert!(!target.exists());
    let r = server.call(2, "exec", json!({"cmd": "touch inside && echo ok"}));
    assert_eq!(r["result"]["outcome"]["kind"], json!("success"), "{r}");
    assert!(tree.cwd.join("inside").exists());
    assert!(server.close().success());
}
