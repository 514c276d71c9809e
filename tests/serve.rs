//! `cordon serve` as a client sees it: JSON-RPC lines over the real binary's stdin/stdout,
//! real confined commands, the approval round-trip, and input that must never crash it.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::Tree;
use serde_json::{json, Value};

struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
}

impl Server {
    fn start(tree: &Tree, extra: &[&str]) -> Server {
        let mut cmd = tree.cordon();
        cmd.arg("serve").args(extra);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn cordon serve");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
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

    fn send_raw(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string());
    }

    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .expect("a message from the server within 30 s")
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let reply = self.next();
        assert_eq!(reply["id"], json!(id), "{reply}");
        reply
    }

    fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin);
        self.child.wait().unwrap()
    }
}

#[test]
fn malformed_input_gets_errors_and_the_server_carries_on() {
    let tree = Tree::new();
    let mut server = Server::start(&tree, &[]);
    server.send_raw("this is not json");
    assert_eq!(server.next()["error"]["code"], json!(-32700));
    server.send_raw("[1, 2]");
    assert_eq!(server.next()["error"]["code"], json!(-32600));
    server.send_raw(r#"{"jsonrpc":"1.0","id":1,"method":"list"}"#);
    let r = server.next();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(1), json!(-32600))
    );
    server.send_raw(r#"{"jsonrpc":"2.0","id":2,"method":"list","extra":true}"#);
    assert_eq!(server.next()["error"]["code"], json!(-32600));
    let r = server.call(3, "frobnicate", json!({}));
    assert_eq!(r["error"]["code"], json!(-32601));
    let r = server.call(4, "exec", json!({"cmd": "touch ran", "colour": "blue"}));
    assert_eq!(r["error"]["code"], json!(-32602));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `colour`"),
        "{r}"
    );
    let r = server.call(
        5,
        "exec",
        json!({"cmd": "touch ran", "argv": ["touch", "ran"]}),
    );
    assert_eq!(r["error"]["code"], json!(-32602));
    let r = server.call(6, "write_stdin", json!({"process_id": 999}));
    assert_eq!(r["error"]["code"], json!(-32001));
    let r = server.call(7, "exec", json!("not an object"));
    assert_eq!(r["error"]["code"], json!(-32602));
    // Nothing above ran anything.
    assert!(!tree.cwd.join("ran").exists());

    // A command that dies does not take the server with it.
    let r = server.call(8, "exec", json!({"cmd": "kill -9 $$"}));
    assert_eq!(
        r["result"]["outcome"],
        json!({"kind": "signaled", "signal": 9}),
        "{r}"
    );
    let r = server.call(
        9,
        "exec",
        json!({"argv": ["sh", "-c", "echo alive > ran; echo ok"]}),
    );
    assert_eq!(r["result"]["outcome"]["kind"], json!("success"), "{r}");
    assert_eq!(r["result"]["output"], json!("ok\n"));
    assert_eq!(
        std::fs::read_to_string(tree.cwd.join("ran")).unwrap(),
        "alive\n"
    );
    assert!(server.close().success());
}

#[test]
fn processes_are_started_polled_written_to_and_killed() {
    let tree = Tree::new();
    let mut server = Server::start(&tree, &[]);
    let r = server.call(
        1,
        "exec",
        json!({"argv": ["python3", "-i", "-q", "-u"], "stdin": true, "yield_time_ms": 500}),
    );
    let id = r["result"]["process_id"].clone();
    assert_eq!(r["result"]["running"], json!(true), "{r}");
    let r = server.call(
        2,
        "write_stdin",
        json!({"process_id": id, "chars": "print(6*7)\n", "yield_time_ms": 1500}),
    );
    let mut output = r["result"]["output"].as_str().unwrap().to_owned();
    // A loaded machine may be slow to start the interpreter: poll (empty writes) a while.
    for poll in 0..40 {
        if output.contains("42") {
            break;
        }
        let r = server.call(
            100 + poll,
            "write_stdin",
            json!({"process_id": id, "yield_time_ms": 500}),
        );
        output.push_str(r["result"]["output"].as_str().unwrap());
    }
    assert!(output.contains("42"), "{output:?}");
    let r = server.call(3, "list", json!({}));
    assert_eq!(r["result"]["processes"][0]["process_id"], id);
    assert_eq!(
        r["result"]["processes"][0]["argv"],
        json!(["python3", "-i", "-q", "-u"])
    );
    let r = server.call(4, "kill", json!({"process_id": id}));
    assert_eq!(r["result"]["outcome"], json!({"kind": "cancelled"}), "{r}");
    assert_eq!(r["result"]["running"], json!(false));
    let r = server.call(5, "list", json!({}));
    assert_eq!(r["result"]["processes"], json!([]));

    // The session's cwd follows cd inside the workspace.
    std::fs::create_dir(tree.cwd.join("sub")).unwrap();
    let r = server.call(6, "exec", json!({"cmd": "cd sub && pwd"}));
    assert_eq!(r["result"]["cwd"], json!(tree.cwd.join("sub")), "{r}");
    let r = server.call(7, "exec", json!({"cmd": "pwd"}));
    assert_eq!(
        r["result"]["output"],
        json!(format!("{}\n", tree.cwd.join("sub").display()))
    );

    // Limits come through, with their receipt.
    let r = server.call(
        8,
        "exec",
        json!({"cmd": "head -c 2097152 /dev/zero > big", "limits": {"file_size": "1M"}}),
    );
    assert_eq!(
        r["result"]["outcome"]["kind"],
        json!("limit_exceeded"),
        "{r}"
    );
    assert_eq!(r["result"]["outcome"]["limit"], json!("file_size"));
    assert_eq!(r["result"]["limits"][0]["mechanism"], json!("rlimit"));
    assert_eq!(
        std::fs::metadata(tree.cwd.join("sub/big")).unwrap().len(),
        1 << 20
    );
    assert!(server.close().success());
}

#[test]
fn a_denial_is_approved_by_the_client_and_retried_with_exactly_that_grant() {
    let tree = Tree::new();
    let mut server = Server::start(&tree, &[]);
    let target = tree.outside.join("f");
    let cmd = format!("echo granted > {}", target.display());
    server.send(json!({"jsonrpc": "2.0", "id": 1, "method": "exec", "params": {"cmd": cmd}}));
    let ask = server.next();
    assert_eq!(ask["method"], json!("approve"), "{ask}");
    assert_eq!(
        ask["params"]["grant"],
        json!([format!("--writable {}", tree.outside.display())])
    );
    assert_eq!(ask["params"]["command"][2], json!(cmd));
    assert!(!target.exists(), "the first attempt was denied");
    server.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"decision": "approve"}}));
    let r = server.next();
    assert_eq!(r["id"], json!(1));
    assert_eq!(r["result"]["outcome"]["kind"], json!("success"), "{r}");
    assert_eq!(r["result"]["approval"]["decision"], json!("approved"));
    assert_eq!(
        r["result"]["approval"]["first_outcome"]["kind"],
        json!("denied")
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "granted\n");

    // The grant was for that run only: a write elsewhere outside is denied, and the client
    // says no this time; nothing is written.
    let other = tree.root.join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    let cmd = format!("echo no > {}/g", other.display());
    server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "exec", "params": {"cmd": cmd}}));
    let ask = server.next();
    assert_eq!(ask["method"], json!("approve"), "{ask}");
    server.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"decision": "deny"}}));
    let r = server.next();
    assert_eq!(r["result"]["outcome"]["kind"], json!("denied"), "{r}");
    assert_eq!(r["result"]["approval"]["decision"], json!("denied"));
    assert!(!other.join("g").exists());

    // The same denial again: the remembered answer, no second question.
    let r = server.call(3, "exec", json!({"cmd": cmd}));
    assert_eq!(r["result"]["approval"]["cached"], json!(true), "{r}");
    assert_eq!(r["result"]["outcome"]["kind"], json!("denied"));
    assert!(!other.join("g").exists());
    assert!(server.close().success());
}

#[test]
fn the_python_agent_example_runs_against_the_server() {
    let tree = Tree::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/python_agent.py");
    let out = std::process::Command::new(common::python())
        .arg(example)
        .current_dir(&tree.cwd)
        .env("HOME", &tree.home)
        .env("CORDON", env!("CARGO_BIN_EXE_cordon"))
        .env("CORDON_HELPER", "self")
        .env("AGENT_OUTSIDE_DIR", &tree.outside)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in [
        "build: success",
        "patch: applied (modified main.py)",
        "denied write, asking: --writable",
        "retry after approval: success",
        "repl answered: 42",
        "server: still running a watcher, killed: cancelled",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("report.txt")).unwrap(),
        "report\n"
    );
    assert_eq!(
        std::fs::read_to_string(tree.cwd.join("main.py")).unwrap(),
        "print('built and patched')\n"
    );
}
