//! `cordon mcp`: the service as an MCP server over stdio, built on the official Rust SDK
//! (`rmcp`). Three tools, `exec_command`, `write_stdin` and `apply_patch`, whose descriptions
//! are written for the model that calls them. A denial is put to the user through MCP
//! elicitation when the client offers it (form mode): accepted, the command (or the rest of the
//! patch) runs once more with exactly the grant shown, as `cordon serve` does. Without
//! elicitation (or declined) the denial comes back in the result with that grant, for the
//! model to put to its user. In proxy mode a host outside `network.allow` is put to the user
//! the same way while the command waits on it, once per host and port per session.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    ApprovalAnswer, ApprovalClient, ExecParams, ExecReply, ExecService, PatchReply, ServiceError,
    WriteParams,
};
use crate::exec::Outcome;
use crate::network::NetworkApprovals;
use crate::orchestrator::ApprovalRequest;
use crate::patch::{ApplyPatchParams, ChangeKind};

/// How long the user may take to answer an approval.
const APPROVAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The form shown to the user for a denied command.
#[derive(Debug, Deserialize, serde::Serialize, JsonSchema)]
pub struct ApprovalForm {
    /// Run the command once more with exactly the access shown.
    pub approve: bool,
}

rmcp::elicit_safe!(ApprovalForm);

/// Asks the user through the MCP client (elicitation); anything but an explicit approval,
/// including a client without elicitation, is a deny.
struct ElicitApprover(rmcp::Peer<rmcp::RoleServer>);

impl ApprovalClient for ElicitApprover {
    async fn ask(&self, ask: &ApprovalRequest) -> ApprovalAnswer {
        let command: Vec<String> = ask
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut message = format!("The sandbox refused this command: {}\n", command.join(" "));
        for d in &ask.denials {
            let _ = writeln!(message, "- {d}");
        }
        let grants: Vec<&str> = ask.denials.iter().map(|d| d.allow_with.as_str()).collect();
        let _ = write!(
            message,
            "Run it once more with exactly this added ({})? Its first attempt is not undone.",
            grants.join(", ")
        );
        match self
            .0
            .elicit_with_timeout::<ApprovalForm>(message, Some(APPROVAL_TIMEOUT))
            .await
        {
            Ok(Some(ApprovalForm { approve: true })) => ApprovalAnswer::Approve,
            Ok(_) => ApprovalAnswer::Deny,
            Err(e) => {
                tracing::info!("mcp: no approval ({e}); the denial is reported instead");
                ApprovalAnswer::Deny
            }
        }
    }
}

/// The user's answer about one network host, asked while the command waits on it.
async fn elicit_network(peer: rmcp::Peer<rmcp::RoleServer>, host: String, port: u16) -> bool {
    let message = format!(
        "A sandboxed command is connecting to {host}:{port}, which is not among the allowed \
         hosts. Let it through? The answer holds for {host}:{port} for the rest of this session."
    );
    match peer
        .elicit_with_timeout::<ApprovalForm>(message, Some(APPROVAL_TIMEOUT))
        .await
    {
        Ok(Some(ApprovalForm { approve: true })) => true,
        Ok(_) => false,
        Err(e) => {
            tracing::info!("mcp: no network approval for {host}:{port} ({e}); refused");
            false
        }
    }
}

/// `apply_patch`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// The patch, from "*** Begin Patch" to "*** End Patch".
    pub patch: String,
    /// Directory that relative paths in the patch are taken from. Leave it out to use the
    /// session's current directory.
    #[serde(default)]
    pub workdir: Option<String>,
}

/// `exec_command`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecCommandArgs {
    /// The shell command line to run, e.g. "cargo test 2>&1 | tail -20".
    pub cmd: String,
    /// Directory to run in. Leave it out to use the session's current directory, which
    /// follows `cd` in earlier commands.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Milliseconds to wait for the command to finish before returning with it still running
    /// (default 10000, at most 300000). A command still running is given a process_id.
    #[serde(default)]
    pub yield_time_ms: Option<u64>,
    /// Run on a pseudo-terminal, for programs that need one (REPLs, prompts, curses). Output
    /// is then the raw terminal stream, including echo of what you type.
    #[serde(default)]
    pub tty: Option<bool>,
    /// Keep stdin open so that write_stdin can send input (implied by tty).
    #[serde(default)]
    pub keep_stdin_open: Option<bool>,
    /// Kill the command after this many milliseconds (default: the server's, 10 minutes).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `write_stdin`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteStdinArgs {
    /// The process_id exec_command returned for a command that is still running.
    pub process_id: u64,
    /// Text to send to the process's stdin, e.g. "print(1)\n" (include the newline). Leave it
    /// empty to only collect new output.
    #[serde(default)]
    pub chars: String,
    /// Milliseconds to wait for output after writing (default 250, at most 300000).
    #[serde(default)]
    pub yield_time_ms: Option<u64>,
    /// Send end of file (close stdin) after the text; not for tty processes (send "\u0004").
    #[serde(default)]
    pub close_stdin: Option<bool>,
}

/// The MCP face of an [`ExecService`].
#[derive(Clone)]
pub struct CordonMcp {
    service: Arc<ExecService>,
    tool_router: ToolRouter<CordonMcp>,
}

#[tool_router]
impl CordonMcp {
    /// A server over `service`.
    pub fn new(service: Arc<ExecService>) -> CordonMcp {
        CordonMcp {
            service,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Run a shell command in cordon's sandbox and return its output. \
The command runs as `$SHELL -lc CMD` in one persistent session: the working directory persists across calls (a `cd` in one command applies to the next, as long as it stays inside the workspace), and the environment of the user's login shell (PATH, tool managers, virtualenvs) is replayed from a snapshot, so it does not need re-sourcing. \
What the sandbox allows is the server's profile; by default the command may read the file system, write only inside the workspace and temporary directories, and not use the network. \
When the sandbox refuses something, the user may be asked (if this client supports it) whether to run the command once more with exactly the access it lacked; otherwise, or if they decline, the result says `Denied by the sandbox` and lists each refused operation with the exact flag that would allow it (e.g. `--writable /path`): tell the user what was denied and why you need it, or find another way. \
If the command is still running after yield_time_ms, the result gives a process_id: call write_stdin with it to send input or to collect more output, and it keeps running meanwhile (servers, watchers). Output is capped, keeping its start and end."
    )]
    async fn exec_command(
        &self,
        peer: rmcp::Peer<rmcp::RoleServer>,
        Parameters(args): Parameters<ExecCommandArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let params = ExecParams {
            cmd: Some(args.cmd),
            cwd: args.workdir.map(PathBuf::from),
            yield_time_ms: args.yield_time_ms,
            timeout_ms: args.timeout_ms,
            tty: args.tty.unwrap_or(false),
            stdin: args.keep_stdin_open.unwrap_or(false),
            ..ExecParams::default()
        };
        self.route_network_approvals(&peer);
        Ok(render(
            self.service.exec(params, &ElicitApprover(peer)).await,
        ))
    }

    #[tool(
        description = "Edit files by patch, in cordon's sandbox: the edits are made under the same rules as exec_command's commands, so a file outside the writable directories is refused. \
The patch format: a line `*** Begin Patch`, then for each file one of `*** Add File: PATH` followed by its lines each prefixed with `+`; `*** Delete File: PATH`; or `*** Update File: PATH` (optionally followed by `*** Move to: NEWPATH`) followed by hunks, each starting with a line `@@` (optionally `@@ TEXT` naming a line such as a function header just above the hunk) and made of context lines prefixed with a space, removed lines prefixed with `-` and added lines prefixed with `+`; then `*** End Patch`. Relative paths are taken from workdir or the session's current directory. Give about three lines of context around each change; leading and trailing whitespace differences in context lines are tolerated. \
A malformed patch is refused before anything is touched, with the line that is wrong. A hunk whose context is not found leaves that file unchanged. The result lists every file actually changed (added, modified, deleted, moved) with a unified diff, also when the patch stopped part way. When the sandbox refuses a write, the user may be asked whether to allow exactly that directory, and the rest of the patch is then applied; otherwise the result says `Denied by the sandbox` with the flag that would allow it."
    )]
    async fn apply_patch(
        &self,
        peer: rmcp::Peer<rmcp::RoleServer>,
        Parameters(args): Parameters<ApplyPatchArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let params = ApplyPatchParams {
            patch: args.patch,
            cwd: args.workdir.map(PathBuf::from),
            timeout_ms: None,
        };
        Ok(render_patch(
            self.service
                .apply_patch(params, &ElicitApprover(peer))
                .await,
        ))
    }

    #[tool(
        description = "Send input to a command that exec_command left running, and collect its new output. \
Use the process_id from exec_command. With empty chars it only waits up to yield_time_ms and returns what the process printed since the last call, so it also serves to poll a long build or a server. \
Include the newline to submit a line (\"print(1)\\n\"). The result says whether the process is still running or, once it has exited, its exit code; an exited process's id is no longer valid."
    )]
    async fn write_stdin(
        &self,
        Parameters(args): Parameters<WriteStdinArgs>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let params = WriteParams {
            process_id: args.process_id,
            chars: args.chars,
            yield_time_ms: args.yield_time_ms,
            close_stdin: args.close_stdin.unwrap_or(false),
            rows: None,
            cols: None,
        };
        Ok(render(self.service.write_stdin(params).await))
    }
}

impl CordonMcp {
    /// The first tool call's peer asks the user about network hosts for the whole session
    /// (the connection, and so the peer, lasts as long as the session).
    fn route_network_approvals(&self, peer: &rmcp::Peer<rmcp::RoleServer>) {
        let peer = peer.clone();
        self.service.route_network_approvals(move || {
            NetworkApprovals::new(move |request| {
                elicit_network(peer.clone(), request.host, request.port)
            })
        });
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CordonMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cordon", env!("CARGO_PKG_VERSION")))
            .with_instructions(
            "cordon runs shell commands in a Landlock + seccomp sandbox. exec_command runs one; \
             write_stdin talks to one that is still running; apply_patch edits files under the \
             same rules. A denial is put to the user for approval when the client supports \
             elicitation, and reported otherwise.",
        )
    }
}

/// The result as a model reads it: a status line, then the output.
fn render(reply: Result<ExecReply, ServiceError>) -> CallToolResult {
    let reply = match reply {
        Ok(reply) => reply,
        Err(e) => return CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
    };
    let mut text = String::new();
    match (&reply.process_id, &reply.outcome) {
        (Some(id), _) => {
            let _ = writeln!(
                text,
                "Process running with process_id {id}; call write_stdin with it to send input or collect more output."
            );
        }
        (None, Some(outcome)) => {
            let _ = writeln!(
                text,
                "Exit code: {} ({})",
                reply.exit_code.unwrap_or_default(),
                outcome.kind()
            );
            match outcome {
                Outcome::Denied { denials, .. } => {
                    let _ = writeln!(text, "Denied by the sandbox:");
                    for d in denials {
                        let _ = writeln!(text, "- {d}");
                    }
                }
                Outcome::LimitExceeded { limit, .. } => {
                    let _ = writeln!(text, "The command exceeded its {limit} limit.");
                }
                Outcome::SetupError { message, .. } | Outcome::ExecError { message, .. } => {
                    let _ = writeln!(text, "{message}");
                }
                Outcome::Rejected { reason } => {
                    let _ = writeln!(text, "{reason}");
                }
                _ => {}
            }
        }
        (None, None) => {}
    }
    if let Some(approval) = &reply.approval {
        let _ = writeln!(
            text,
            "The first attempt was denied; approval: {}{}",
            approval.decision,
            approval
                .reason
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        );
    }
    for line in &reply.not_enforced {
        let _ = writeln!(text, "Note: {line}");
    }
    let _ = writeln!(text, "Working directory: {}", reply.cwd.display());
    let _ = writeln!(
        text,
        "Wall time: {:.3} s",
        reply.wall_time_ms as f64 / 1000.0
    );
    if reply.output_dropped_bytes > 0 {
        let _ = writeln!(
            text,
            "Output ({} bytes from the middle were dropped):",
            reply.output_dropped_bytes
        );
    } else {
        let _ = writeln!(text, "Output:");
    }
    text.push_str(&reply.output);
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// The patch result as a model reads it: a status line, the denials, the files changed with
/// their diffs.
fn render_patch(reply: Result<PatchReply, ServiceError>) -> CallToolResult {
    let reply = match reply {
        Ok(reply) => reply,
        Err(e) => return CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
    };
    let report = &reply.report;
    let mut text = String::new();
    if report.applied() {
        let _ = writeln!(text, "Patch applied.");
    } else {
        let _ = writeln!(text, "Patch not fully applied.");
        if let Some(failure) = &report.failure {
            let _ = writeln!(
                text,
                "Stopped at operation {} ({}): {}",
                failure.index + 1,
                failure.path,
                failure.message
            );
        }
        if let Outcome::Denied { denials, .. } = &report.run.last().outcome {
            let _ = writeln!(text, "Denied by the sandbox:");
            for d in denials {
                let _ = writeln!(text, "- {d}");
            }
        }
    }
    if let Some(approval) = &reply.approval {
        let _ = writeln!(
            text,
            "The first attempt was denied; approval: {}{}",
            approval.decision,
            approval
                .reason
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        );
    }
    if report.changes.is_empty() {
        let _ = writeln!(text, "No file was changed.");
    } else {
        let _ = writeln!(text, "Files changed:");
    }
    for change in &report.changes {
        let line = match (change.kind, &change.move_to) {
            (ChangeKind::Moved, Some(to)) => format!("R {} -> {to}", change.path),
            (ChangeKind::Added, _) => format!("A {}", change.path),
            (ChangeKind::Deleted, _) => format!("D {}", change.path),
            _ => format!("M {}", change.path),
        };
        let _ = writeln!(text, "{line}");
        text.push_str(&change.diff);
        if !change.diff.is_empty() && !change.diff.ends_with('\n') {
            text.push('\n');
        }
    }
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// Serves MCP over stdio until the client goes away.
pub async fn serve(service: Arc<ExecService>) -> anyhow::Result<()> {
    let running = CordonMcp::new(service)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("MCP initialisation failed: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| anyhow::anyhow!("MCP server task failed: {e}"))?;
    Ok(())
}
