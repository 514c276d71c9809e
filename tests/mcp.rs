//! `cordon mcp` against an MCP client's side of the protocol over the real binary's stdio:
//! initialize, the initialized notification, tools/list with the tools' JSON schemas, and
//! tools/call of both tools on real confined commands (a denial reported, a process left
//! running and written to).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::Tree;
use serde_json::{json, Value};

struct Client {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<Value>,
    next_id: u64,
}

impl Client {
    fn start(tree: &Tree) -> Client {
        let mut child = tree
            .cordon()
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn cordon mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Client {
            child,
            stdin,
            lines,
            next_id: 0,
        }
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .expect("an answer within 30 s");
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    fn call_tool(&mut self, name: &str, arguments: Value) -> (bool, String) {
        let r = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        let result = &r["result"];
        assert!(result.is_object(), "{r}");
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (result["isError"] == json!(true), text)
    }
}

#[test]
fn an_mcp_client_initialises_lists_the_tools_and_calls_them() {
    let tree = Tree::new();
    let mut client = Client::start(&tree);
    let init = client.request(
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "cordon-test", "version": "0"},
        }),
    );
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        json!("cordon"),
        "{init}"
    );
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let tools = client.request("tools/list", json!({}));
    let list = tools["result"]["tools"].as_array().expect("tools").clone();
    let names: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["exec_command", "write_stdin"]);
    let exec = &list[0];
    assert_eq!(exec["inputSchema"]["required"], json!(["cmd"]));
    assert_eq!(exec["inputSchema"]["additionalProperties"], json!(false));
    assert_eq!(
        exec["inputSchema"]["properties"]["cmd"]["type"],
        json!("string")
    );
    let description = exec["description"].as_str().unwrap();
    for promise in [
        "working directory persists",
        "login shell",
        "Denied by the sandbox",
        "process_id",
    ] {
        assert!(
            description.contains(promise),
            "{promise:?} not in {description:?}"
        );
    }
    assert_eq!(list[1]["inputSchema"]["required"], json!(["process_id"]));

    // A command, and the cwd it leaves for the next one.
    std::fs::create_dir(tree.cwd.join("sub")).unwrap();
    let (error, text) = client.call_tool(
        "exec_command",
        json!({"cmd": "cd sub && echo made > f && echo ok"}),
    );
    assert!(!error, "{text}");
    assert!(text.starts_with("Exit code: 0 (success)\n"), "{text}");
    assert!(text.ends_with("Output:\nok\n"), "{text}");
    assert_eq!(
        std::fs::read_to_string(tree.cwd.join("sub/f")).unwrap(),
        "made\n"
    );
    let (_, text) = client.call_tool("exec_command", json!({"cmd": "pwd"}));
    assert!(
        text.ends_with(&format!("Output:\n{}\n", tree.cwd.join("sub").display())),
        "{text}"
    );

    // A denial is reported with its grant, and nothing is written outside.
    let target = tree.outside.join("nope");
    let (_, text) = client.call_tool(
        "exec_command",
        json!({"cmd": format!("echo x > {}", target.display())}),
    );
    assert!(
        text.contains("(denied)\nDenied by the sandbox:\n- "),
        "{text}"
    );
    assert!(
        text.contains(&format!("--writable {}", tree.outside.display())),
        "{text}"
    );
    assert!(!target.exists());

    // A REPL left running, then written to.
    let (_, text) = client.call_tool(
        "exec_command",
        json!({"cmd": "python3 -i -q -u", "keep_stdin_open": true, "yield_time_ms": 500}),
    );
    let id: u64 = text
        .strip_prefix("Process running with process_id ")
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    let (_, mut text) = client.call_tool(
        "write_stdin",
        json!({"process_id": id, "chars": "print(6*7)\n", "yield_time_ms": 1500}),
    );
    // A loaded machine may be slow to start the interpreter: poll (empty writes) a while.
    for _ in 0..40 {
        if text.contains("42\n") {
            break;
        }
        let (_, more) = client.call_tool(
            "write_stdin",
            json!({"process_id": id, "yield_time_ms": 500}),
        );
        text.push_str(&more);
    }
    assert!(text.contains("42\n"), "{text}");
    let (_, text) = client.call_tool(
        "write_stdin",
        json!({"process_id": id, "chars": "exit(3)\n", "yield_time_ms": 5000}),
    );
    assert!(text.starts_with("Exit code: 3 (failed)\n"), "{text}");
    let (error, text) = client.call_tool("write_stdin", json!({"process_id": id}));
    assert!(error, "{text}");
    assert!(text.contains(&format!("no process {id}")), "{text}");

    // Unknown arguments are refused by the schema's rules, not run.
    let r = client.request(
        "tools/call",
        json!({"name": "exec_command", "arguments": {"cmd": "touch bad", "colour": 1}}),
    );
    assert!(
        r["error"].is_object() || r["result"]["isError"] == json!(true),
        "{r}"
    );
    assert!(!tree.cwd.join("sub/bad").exists());

    drop(client.stdin);
    let status = client.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn a_denial_is_put_to_the_user_by_elicitation_and_retried_with_exactly_that_grant() {
    let tree = Tree::new();
    let mut client = Client::start(&tree);
    let init = client.request(
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "cordon-test", "version": "0"},
        }),
    );
    assert!(init["result"].is_object(), "{init}");
    client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let call = |client: &mut Client, cmd: String, approve: bool| -> (Value, String) {
        client.next_id += 1;
        let id = client.next_id;
        client.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "exec_command", "arguments": {"cmd": cmd}}}));
        let mut asked = Value::Null;
        loop {
            let message = client
                .lines
                .recv_timeout(Duration::from_secs(30))
                .expect("a message within 30 s");
            if message["method"] == json!("elicitation/create") {
                asked = message["params"].clone();
                client.send(json!({"jsonrpc": "2.0", "id": message["id"],
                    "result": {"action": "accept", "content": {"approve": approve}}}));
                continue;
            }
            if message["id"] == json!(id) {
                let text = message["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                return (asked, text);
            }
        }
    };

    // Approved: run once more with exactly the directory shown.
    let target = tree.outside.join("granted");
    let (asked, text) = call(
        &mut client,
        format!("echo yes > {}", target.display()),
        true,
    );
    let message = asked["message"]
        .as_str()
        .unwrap_or_else(|| panic!("never asked: {text}"));
    assert!(
        message.contains(&format!("--writable {}", tree.outside.display())),
        "{message}"
    );
    assert_eq!(
        asked["requestedSchema"]["properties"]["approve"]["type"],
        json!("boolean")
    );
    assert!(text.starts_with("Exit code: 0 (success)\n"), "{text}");
    assert!(text.contains("approval: approved"), "{text}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "yes\n");

    // Declined: reported as denied, nothing written.
    let other = tree.root.join("declined");
    std::fs::create_dir(&other).unwrap();
    let (asked, text) = call(
        &mut client,
        format!("echo no > {}/f", other.display()),
        false,
    );
    assert!(asked.is_object(), "{text}");
    assert!(text.contains("(denied)\nDenied by the sandbox:"), "{text}");
    assert!(text.contains("approval: denied"), "{text}");
    assert!(!other.join("f").exists());

    drop(client.stdin);
    assert!(client.child.wait().unwrap().success());
}
