//! `cordon mcp` driven by the official SDK's own client (`rmcp`, client side) over the real
//! binary's stdio: the handshake, the tool list, and calls running real confined commands.

mod common;

use std::process::Stdio;

use common::Tree;
use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use serde_json::{json, Value};

fn text(result: &rmcp::model::CallToolResult) -> String {
    let value = serde_json::to_value(result).unwrap();
    value["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn args(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_client_handshakes_lists_and_calls_the_tools() {
    let tree = Tree::new();
    let mut command = tokio::process::Command::from(tree.cordon());
    command
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("spawn cordon mcp");
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let client = ().serve((stdout, stdin)).await.expect("MCP handshake");
    let info = client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("cordon")
    );

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["apply_patch", "exec_command", "write_stdin"]);
    let schema = Value::Object((*tools[1].input_schema).clone());
    assert_eq!(schema["required"], json!(["cmd"]));
    assert_eq!(
        schema["properties"]["yield_time_ms"]["type"],
        json!(["integer", "null"])
    );

    let result = client
        .call_tool(
            CallToolRequestParams::new("exec_command").with_arguments(args(json!({
                "cmd": "echo from-mcp > made.txt && cat made.txt"
            }))),
        )
        .await
        .expect("tools/call");
    let out = text(&result);
    assert_eq!(result.is_error, Some(false), "{out}");
    assert!(out.starts_with("Exit code: 0 (success)\n"), "{out}");
    assert!(out.ends_with("Output:\nfrom-mcp\n"), "{out}");
    assert_eq!(
        std::fs::read_to_string(tree.cwd.join("made.txt")).unwrap(),
        "from-mcp\n"
    );

    // Outside the workspace: denied, reported with its grant, nothing written.
    let target = tree.outside.join("x");
    let result = client
        .call_tool(
            CallToolRequestParams::new("exec_command").with_arguments(args(json!({
                "cmd": format!("echo x > {}", target.display())
            }))),
        )
        .await
        .expect("tools/call");
    let out = text(&result);
    assert!(out.contains("Denied by the sandbox:"), "{out}");
    assert!(
        out.contains(&format!("--writable {}", tree.outside.display())),
        "{out}"
    );
    assert!(!target.exists());

    // A process left running and polled, on a terminal.
    let result = client
        .call_tool(
            CallToolRequestParams::new("exec_command").with_arguments(args(json!({
                "cmd": "read line; echo got:$line", "tty": true, "yield_time_ms": 300
            }))),
        )
        .await
        .expect("tools/call");
    let out = text(&result);
    let id: u64 = out
        .strip_prefix("Process running with process_id ")
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    let result = client
        .call_tool(
            CallToolRequestParams::new("write_stdin").with_arguments(args(json!({
                "process_id": id, "chars": "hello\n", "yield_time_ms": 3000
            }))),
        )
        .await
        .expect("tools/call");
    let out = text(&result);
    assert!(out.starts_with("Exit code: 0 (success)\n"), "{out}");
    assert!(out.contains("got:hello\r\n"), "{out}");

    client.cancel().await.expect("close");
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status}");
}
