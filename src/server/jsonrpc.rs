//! `cordon serve`: JSON-RPC 2.0 over a byte stream (stdin/stdout), one message per line.
//!
//! Requests from the client: `exec`, `write_stdin`, `kill`, `list`, `user_shell`,
//! `user_shell_cancel`, `apply_patch` (see [`super`] for their parameters and results).
//! Requests from the server, answered by the client with `{"decision": "approve" | "deny"}`:
//! - `approve`, sent while an `exec` or `apply_patch` whose first attempt was denied waits;
//!   approved, the server runs it once more with exactly what the denials name;
//! - `approve_network {host, port}`, sent while a command in proxy mode waits on a connection
//!   to a host outside `network.allow` (asked once per host and port per session).
//!
//! A notification from the server: `user_shell_event`, each event of a running `user_shell`
//! command (`begin`, `output_delta`, `end`), all sent before its reply.
//!
//! Robustness: every line is handled on its own; a line that is not JSON, not a JSON-RPC 2.0
//! request, names an unknown method, or carries unknown fields gets a JSON-RPC error and
//! nothing runs; requests run concurrently, each answered when done; end of input ends the
//! server and kills every process it holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;

use super::{
    ApprovalAnswer, ApprovalClient, CancelParams, ExecParams, ExecService, KillParams, ListParams,
    ServiceError, WriteParams,
};
use crate::network::NetworkApprovals;
use crate::orchestrator::ApprovalRequest;
use crate::patch::ApplyPatchParams;
use crate::user_shell::UserShellParams;

/// The longest line read; a longer one is answered with an error and skipped.
pub const MAX_LINE: usize = 8 << 20;
/// How long the server waits for the client to answer an `approve` request.
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);

/// JSON-RPC error codes.
mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    /// The process manager refused (unknown process, no stdin, ...).
    pub const PROCESS_ERROR: i64 = -32001;
    /// The server cannot do this at all (no patch applier).
    pub const UNAVAILABLE: i64 = -32002;
}

type Writer = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Unpin + Send>>>;
type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

async fn send(out: &Writer, message: &Value) {
    let mut line = message.to_string();
    line.push('\n');
    let mut out = out.lock().await;
    // A client that closed its end gets nothing more; the server ends at end of input.
    let _ = out.write_all(line.as_bytes()).await;
    let _ = out.flush().await;
}

fn error(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// Asks the client over the same stream.
#[derive(Clone)]
struct ClientApprover {
    out: Writer,
    waiters: Waiters,
    counter: Arc<AtomicU64>,
    /// Set at end of input: no answer can come any more, so every question is a deny at once.
    closed: Arc<AtomicBool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalResult {
    decision: ApprovalAnswer,
}

impl ApprovalClient for ClientApprover {
    async fn ask(&self, ask: &ApprovalRequest) -> ApprovalAnswer {
        let grants: Vec<&str> = ask.denials.iter().map(|d| d.allow_with.as_str()).collect();
        let params = json!({
            "command": ask.argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>(),
            "denials": ask.denials,
            "grant": grants,
        });
        self.request("approve", params).await
    }
}

impl ClientApprover {
    /// Puts one question to the client and waits for its decision.
    async fn request(&self, method: &str, params: Value) -> ApprovalAnswer {
        let id = format!(
            "approve-{}",
            self.counter.fetch_add(1, Ordering::SeqCst) + 1
        );
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), tx);
        // Checked after the waiter is in: the end of input sets the flag before it drops the
        // waiters, so a question is either dropped there or refused here.
        if self.closed.load(Ordering::SeqCst) {
            self.waiters
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            return ApprovalAnswer::Deny;
        }
        send(
            &self.out,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .await;
        let answer = tokio::time::timeout(APPROVAL_TIMEOUT, rx).await;
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        match answer {
            Ok(Ok(result)) => match serde_json::from_value::<ApprovalResult>(result) {
                Ok(r) => r.decision,
                Err(e) => {
                    tracing::info!("serve: approval answer not understood, taken as deny: {e}");
                    ApprovalAnswer::Deny
                }
            },
            // No answer, an error answer, or a timeout: nothing more is granted.
            _ => ApprovalAnswer::Deny,
        }
    }
}

/// Serves `service` until `input` ends. Every process still running is killed when the
/// service is dropped, which the caller does after this returns.
pub async fn serve<R, W>(service: Arc<ExecService>, input: R, output: W)
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let out: Writer = Arc::new(tokio::sync::Mutex::new(Box::new(output)));
    let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
    let approver = ClientApprover {
        out: Arc::clone(&out),
        waiters: Arc::clone(&waiters),
        counter: Arc::new(AtomicU64::new(0)),
        closed: Arc::new(AtomicBool::new(false)),
    };
    // Hosts outside `network.allow` are put to this client while the command waits on them.
    let asker = approver.clone();
    service.route_network_approvals(move || {
        NetworkApprovals::new(move |request| {
            let asker = asker.clone();
            async move {
                let params = json!({"host": request.host, "port": request.port});
                asker.request("approve_network", params).await == ApprovalAnswer::Approve
            }
        })
    });
    let mut input = input;
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let mut line = Vec::new();
        let read = (&mut input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::info!("serve: cannot read input: {e}");
                break;
            }
        }
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            send(
                &out,
                &error(
                    &Value::Null,
                    code::INVALID_REQUEST,
                    format!("line longer than {MAX_LINE} bytes"),
                ),
            )
            .await;
            // Skip the rest of the line.
            let mut rest = Vec::new();
            if input.read_until(b'\n', &mut rest).await.is_err() {
                break;
            }
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let (id, method, params, is_notification) = match parse_message(text) {
            Err(reply) => {
                send(&out, &reply).await;
                continue;
            }
            // A response to one of our requests.
            Ok(Incoming::Response { id, result }) => {
                let key = id.as_str().unwrap_or_default().to_owned();
                let waiter = waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
                match (waiter, result) {
                    (Some(waiter), Some(result)) => {
                        let _ = waiter.send(result);
                    }
                    // An error answer: dropping the waiter makes it a deny.
                    (Some(_), None) => {}
                    (None, _) => {
                        send(
                            &out,
                            &error(
                                &id,
                                code::INVALID_REQUEST,
                                "no request of the server has this id",
                            ),
                        )
                        .await;
                    }
                }
                continue;
            }
            Ok(Incoming::Request {
                id,
                method,
                params,
                notification,
            }) => (id, method, params, notification),
        };
        let (service, out, approver) = (Arc::clone(&service), Arc::clone(&out), approver.clone());
        tasks.spawn(async move {
            let reply = match handle(&service, &method, params, &approver).await {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err((code, message)) => error(&id, code, message),
            };
            if !is_notification {
                send(&out, &reply).await;
            }
        });
        // Reap finished handlers as we go, so the set stays small.
        while tasks.try_join_next().is_some() {}
    }
    // End of input: questions to the client are denied (no answer can come), the person's
    // commands are stopped, what is in flight is answered, then the server returns.
    approver.closed.store(true, Ordering::SeqCst);
    waiters.lock().unwrap_or_else(|e| e.into_inner()).clear();
    service.cancel_all_user_shells();
    while tasks.join_next().await.is_some() {}
}

/// One line from the client, checked as a JSON-RPC 2.0 message.
#[derive(Debug)]
pub enum Incoming {
    /// The client's answer to one of the server's requests (`result`, or an error: `None`).
    Response { id: Value, result: Option<Value> },
    /// A call of one of the server's methods; a notification (no `id`) gets no reply.
    Request {
        id: Value,
        method: String,
        params: Value,
        notification: bool,
    },
}

/// Reads one line as a message. An error is the JSON-RPC error object to send back, with a
/// one-line message naming the problem.
pub fn parse_message(text: &str) -> Result<Incoming, Value> {
    let message: Value = serde_json::from_str(text)
        .map_err(|e| error(&Value::Null, code::PARSE_ERROR, format!("parse error: {e}")))?;
    let Some(object) = message.as_object() else {
        return Err(error(
            &Value::Null,
            code::INVALID_REQUEST,
            "a message must be one JSON object (batches are not supported)",
        ));
    };
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    if !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
        return Err(error(
            &Value::Null,
            code::INVALID_REQUEST,
            "id must be a string, a number or null",
        ));
    }
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(error(&id, code::INVALID_REQUEST, "jsonrpc must be \"2.0\""));
    }
    if !object.contains_key("method") {
        return Ok(Incoming::Response {
            result: object.get("result").cloned(),
            id,
        });
    }
    if let Some(unknown) = object
        .keys()
        .find(|k| !["jsonrpc", "id", "method", "params"].contains(&k.as_str()))
    {
        return Err(error(
            &id,
            code::INVALID_REQUEST,
            format!("unknown field {unknown:?}"),
        ));
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        return Err(error(&id, code::INVALID_REQUEST, "method must be a string"));
    };
    Ok(Incoming::Request {
        method: method.to_owned(),
        params: object.get("params").cloned().unwrap_or_else(|| json!({})),
        notification: !object.contains_key("id"),
        id,
    })
}

/// Checks `params` against what `method` takes, without running anything: the same
/// validation `serve` applies before a call (unknown fields and wrong types refused).
pub fn check_params(method: &str, value: Value) -> Result<(), (i64, String)> {
    match method {
        "exec" => params::<ExecParams>(value).map(drop),
        "write_stdin" => params::<WriteParams>(value).map(drop),
        "kill" => params::<KillParams>(value).map(drop),
        "list" => params::<ListParams>(value).map(drop),
        "user_shell" => params::<UserShellParams>(value).map(drop),
        "user_shell_cancel" => params::<CancelParams>(value).map(drop),
        "apply_patch" => params::<ApplyPatchParams>(value).map(drop),
        other => Err((code::METHOD_NOT_FOUND, format!("unknown method {other:?}"))),
    }
}

fn params<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, (i64, String)> {
    if !value.is_object() {
        return Err((code::INVALID_PARAMS, "params must be an object".into()));
    }
    serde_json::from_value(value).map_err(|e| {
        (
            code::INVALID_PARAMS,
            format!(
                "invalid params: {}",
                // serde quotes a field name as the client wrote it, newlines included.
                cordon_sandbox::policy::single_line(&e.to_string())
            ),
        )
    })
}

fn service_error(e: ServiceError) -> (i64, String) {
    match e {
        ServiceError::InvalidParams(m) => (code::INVALID_PARAMS, m),
        ServiceError::Manager(m) => (code::PROCESS_ERROR, m.to_string()),
        e @ ServiceError::UnknownCall(_) => (code::PROCESS_ERROR, e.to_string()),
        ServiceError::Unavailable(m) => (code::UNAVAILABLE, m),
    }
}

fn to_value<T: serde::Serialize>(value: &T) -> Result<Value, (i64, String)> {
    serde_json::to_value(value).map_err(|e| {
        (
            code::PROCESS_ERROR,
            format!("cannot encode the result: {e}"),
        )
    })
}

async fn handle(
    service: &ExecService,
    method: &str,
    value: Value,
    approver: &ClientApprover,
) -> Result<Value, (i64, String)> {
    match method {
        "exec" => {
            let p: ExecParams = params(value)?;
            to_value(&service.exec(p, approver).await.map_err(service_error)?)
        }
        "write_stdin" => {
            let p: WriteParams = params(value)?;
            to_value(&service.write_stdin(p).await.map_err(service_error)?)
        }
        "kill" => {
            let p: KillParams = params(value)?;
            to_value(&service.kill(p).await.map_err(service_error)?)
        }
        "list" => {
            let _: ListParams = params(value)?;
            Ok(json!({"processes": to_value(&service.list())?}))
        }
        "user_shell" => {
            let p: UserShellParams = params(value)?;
            let (tx, mut rx) = tokio::sync::mpsc::channel(64);
            let out = Arc::clone(&approver.out);
            let forward = tokio::spawn(async move {
                while let Some(event) = rx.recv().await {
                    let params = serde_json::to_value(&event).unwrap_or_default();
                    send(
                        &out,
                        &json!({"jsonrpc": "2.0", "method": "user_shell_event", "params": params}),
                    )
                    .await;
                }
            });
            let reply = service.user_shell(p, tx).await;
            // Every event is on the wire before the reply (the sender is gone with the run).
            let _ = forward.await;
            to_value(&reply.map_err(service_error)?)
        }
        "user_shell_cancel" => {
            let p: CancelParams = params(value)?;
            service.cancel_user_shell(p).map_err(service_error)?;
            Ok(json!({"cancelled": true}))
        }
        "apply_patch" => {
            let p: ApplyPatchParams = params(value)?;
            Ok(service
                .apply_patch(p, approver)
                .await
                .map_err(service_error)?
                .to_json())
        }
        other => Err((
            code::METHOD_NOT_FOUND,
            format!("unknown method {other:?} (exec, write_stdin, kill, list, user_shell, user_shell_cancel, apply_patch)"),
        )),
    }
}
