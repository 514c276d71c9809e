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
        Client::start_with(tree, &[], &[])
    }

    fn start_with(tree: &Tree, extra: &[&str], env: &[(&str, &str)]) -> Client {
        let mut command = tree.cordon();
        command.arg("mcp").args(extra);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
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
    assert_eq!(names, ["apply_patch", "exec_command", "write_stdin"]);
    let exec = &list[1];
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
    assert_eq!(list[2]["inputSchema"]["required"], json!(["process_id"]));

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
        if text.contains("42") {
            break;
        }
        let (_, more) = client.call_tool(
            "write_stdin",
            json!({"process_id": id, "yield_time_ms": 500}),
        );
        text.push_str(&more);
    }
    assert!(text.contains("42"), "{text}");
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

impl Client {
    /// initialize with elicitation offered, then initialized.
    fn initialise_with_elicitation(&mut self) {
        let init = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "cordon-test", "version": "0"},
            }),
        );
        assert!(init["result"].is_object(), "{init}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// Calls `tool`, answering every elicitation with `answer(message)`; returns the messages
    /// asked and the result's text.
    fn call_answering(
        &mut self,
        tool: &str,
        arguments: Value,
        mut answer: impl FnMut(&str) -> bool,
    ) -> (Vec<String>, String) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
        let mut asked = Vec::new();
        loop {
            let message = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("a message within 60 s");
            if message["method"] == json!("elicitation/create") {
                let text = message["params"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let approve = answer(&text);
                asked.push(text);
                self.send(json!({"jsonrpc": "2.0", "id": message["id"],
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
    }
}

#[test]
fn apply_patch_through_mcp_applies_and_a_denied_write_is_elicited_and_retried() {
    let tree = Tree::new();
    let w = &tree.cwd;
    std::fs::write(w.join("a.txt"), "one\ntwo\n").expect("write");
    let mut client = Client::start(&tree);
    client.initialise_with_elicitation();

    let tools = client.request("tools/list", json!({}));
    let list = tools["result"]["tools"].as_array().expect("tools").clone();
    let patch_tool = list
        .iter()
        .find(|t| t["name"] == json!("apply_patch"))
        .expect("an apply_patch tool");
    assert_eq!(patch_tool["inputSchema"]["required"], json!(["patch"]));
    assert_eq!(
        patch_tool["inputSchema"]["additionalProperties"],
        json!(false)
    );
    let description = patch_tool["description"].as_str().expect("description");
    for promise in [
        "*** Begin Patch",
        "*** Update File:",
        "@@",
        "Denied by the sandbox",
    ] {
        assert!(
            description.contains(promise),
            "{promise:?} not in {description:?}"
        );
    }

    // A normal patch: the diff in the result, the file changed on disk.
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+2\n*** End Patch\n";
    let (asked, text) = client.call_answering("apply_patch", json!({"patch": patch}), |_| {
        panic!("nothing to approve")
    });
    assert!(asked.is_empty());
    assert!(
        text.starts_with("Patch applied.\nFiles changed:\nM "),
        "{text}"
    );
    assert!(text.contains("-two\n+2\n"), "{text}");
    assert_eq!(
        std::fs::read_to_string(w.join("a.txt")).expect("a"),
        "one\n2\n"
    );

    // Outside the roots, declined: reported with the grant, nothing written outside.
    let declined = tree.root.join("declined");
    std::fs::create_dir(&declined).expect("mkdir");
    let patch = format!(
        "*** Begin Patch\n*** Add File: {}\n+x\n*** End Patch\n",
        declined.join("f").display()
    );
    let (asked, text) = client.call_answering("apply_patch", json!({"patch": patch}), |_| false);
    assert_eq!(asked.len(), 1, "{text}");
    assert!(
        asked[0].contains(&format!("--writable {}", declined.display())),
        "{asked:?}"
    );
    assert!(text.starts_with("Patch not fully applied.\n"), "{text}");
    assert!(text.contains("Denied by the sandbox:\n- "), "{text}");
    assert!(text.contains("approval: denied"), "{text}");
    assert!(text.contains("No file was changed."), "{text}");
    assert!(!declined.join("f").exists());

    // Approved: applied with exactly that directory.
    let granted = tree.root.join("granted");
    std::fs::create_dir(&granted).expect("mkdir");
    let patch = format!(
        "*** Begin Patch\n*** Add File: {}\n+yes\n*** End Patch\n",
        granted.join("f").display()
    );
    let (asked, text) = client.call_answering("apply_patch", json!({"patch": patch}), |_| true);
    assert_eq!(asked.len(), 1, "{text}");
    assert!(text.starts_with("Patch applied.\n"), "{text}");
    assert!(text.contains("approval: approved"), "{text}");
    assert!(
        text.contains(&format!("A {}\n", granted.join("f").display())),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(granted.join("f")).expect("granted"),
        "yes\n"
    );
    assert!(!declined.join("f").exists());

    // Malformed: a tool error naming the line, nothing touched.
    let (error, text) = client.call_tool(
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Add File: y.txt\nno plus\n*** End Patch\n"}),
    );
    assert!(error, "{text}");
    assert!(text.contains("line 3"), "{text}");
    assert!(!w.join("y.txt").exists());
    drop(client.stdin);
    assert!(client.child.wait().expect("wait").success());
}

/// A one-answer-per-connection HTTP server on the host's loopback, counting connections.
fn upstream() -> (u16, std::sync::Arc<std::sync::Mutex<usize>>) {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let count = std::sync::Arc::new(std::sync::Mutex::new(0));
    let seen = std::sync::Arc::clone(&count);
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
fn network_hosts_are_put_to_the_user_by_elicitation_while_the_command_runs() {
    if !common::userns_available() {
        eprintln!("SKIPPED: proxy mode needs user namespaces");
        return;
    }
    let tree = Tree::new();
    let (port, connections) = upstream();
    let hosts = tree.root.join("hosts");
    std::fs::write(&hosts, "127.0.0.1 granted.test refused.test\n").expect("hosts");
    let mut client = Client::start_with(
        &tree,
        &["--network", "proxy"],
        &[("CORDON_PROXY_HOSTS", hosts.to_str().expect("utf-8"))],
    );
    client.initialise_with_elicitation();
    let cmd = format!(
        "for h in granted.test granted.test refused.test; do echo \"$h $(curl -s -m 30 -o /dev/null -w '%{{http_code}}' http://$h:{port}/)\"; done"
    );
    let (asked, text) = client.call_answering("exec_command", json!({"cmd": cmd}), |message| {
        message.contains(&format!("granted.test:{port}"))
    });
    assert_eq!(asked.len(), 2, "{asked:?}\n{text}");
    assert!(
        asked[0].contains(&format!("granted.test:{port}")),
        "{asked:?}"
    );
    assert!(
        asked[1].contains(&format!("refused.test:{port}")),
        "{asked:?}"
    );
    assert!(
        text.ends_with("Output:\ngranted.test 200\ngranted.test 200\nrefused.test 403\n"),
        "{text}"
    );
    assert_eq!(*connections.lock().unwrap_or_else(|e| e.into_inner()), 2);

    // Remembered for the session: asked by nobody the second time.
    let (asked, text) = client.call_answering("exec_command", json!({"cmd": cmd}), |_| {
        panic!("asked twice")
    });
    assert!(asked.is_empty());
    assert!(
        text.ends_with("Output:\ngranted.test 200\ngranted.test 200\nrefused.test 403\n"),
        "{text}"
    );
    assert_eq!(*connections.lock().unwrap_or_else(|e| e.into_inner()), 4);

    // A command that fails on the refused host is denied, and the user is not asked about
    // the same host again after the run.
    let (asked, text) = client.call_answering(
        "exec_command",
        json!({"cmd": format!("curl -sS -f -m 20 http://refused.test:{port}/")}),
        |q| panic!("asked twice: {q}"),
    );
    assert!(asked.is_empty());
    assert!(
        text.contains("(denied)\nDenied by the sandbox:\n- "),
        "{text}"
    );
    assert!(
        text.contains("approval: denied (the client refused these hosts while the command ran)"),
        "{text}"
    );
    assert_eq!(*connections.lock().unwrap_or_else(|e| e.into_inner()), 4);
    drop(client.stdin);
    assert!(client.child.wait().expect("wait").success());
}
