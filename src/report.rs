//! What `cordon run` prints about a finished run: the `--json` object, or one stderr line per
//! fact a person needs (denials, setup and exec errors, timeouts).

use cordon::classify::Denial;
use cordon::exec::{ExecResult, Outcome};
use cordon::sandbox::status::ConfinementReceipt;
use serde::Serialize;
use serde_json::{json, Value};

/// The `--json` object (schema in the README): every key, in one place. It goes out through a
/// `serde_json::Value`, whose maps keep keys sorted, so the output order is stable.
#[derive(Serialize)]
struct Report<'a> {
    outcome: &'a str,
    exit_code: i32,
    signal: Option<i32>,
    denials: &'a [Denial],
    stdout: String,
    stderr: String,
    truncated: Truncated,
    duration_ms: u64,
    sandbox: Value,
    dropped_env: &'a [String],
    error: Value,
    /// Which mechanism enforced each resource limit (empty without limits).
    limits: &'a [cordon::exec::limits::LimitReceipt],
}

#[derive(Serialize)]
struct Truncated {
    stdout: u64,
    stderr: u64,
}

impl Report<'_> {
    fn render(&self) -> String {
        serde_json::to_value(self)
            .map(|v| v.to_string())
            .unwrap_or_else(|e| format!("{{\"outcome\":\"rejected\",\"error\":{{\"message\":\"cannot encode the report: {e}\"}}}}"))
    }
}

/// The `--json` object for a finished run.
pub fn json(result: &ExecResult<Denial>) -> String {
    let denials = match &result.outcome {
        Outcome::Denied { denials, .. } => denials.as_slice(),
        // The proxy's refusals of a run that succeeded anyway (a `curl` that printed the 403).
        _ => result.network_denials.as_slice(),
    };
    Report {
        outcome: result.outcome.kind(),
        exit_code: result.cordon_exit_code(),
        signal: result.signal,
        denials,
        stdout: result.stdout.text(),
        stderr: result.stderr.text(),
        truncated: Truncated {
            stdout: result.stdout.dropped,
            stderr: result.stderr.dropped,
        },
        duration_ms: u64::try_from(result.duration.as_millis()).unwrap_or(u64::MAX),
        sandbox: sandbox(result),
        dropped_env: &result.dropped_env,
        error: error(&result.outcome),
        limits: &result.limits,
    }
    .render()
}

/// What was enforced: the helper's receipt, or an explicit "none" for full access.
fn sandbox(result: &ExecResult<Denial>) -> Value {
    if result.policy.is_none() {
        return json!({
            "mode": "none",
            "layers": [],
            "landlock_abi": 0,
            "downgrades": [{
                "restriction": "sandbox",
                "reason": "full-access profile: the command ran without any sandbox",
            }],
            "approximations": [],
            "unmediated": [],
        });
    }
    match &result.receipt {
        Some(receipt) => json!({
            "mode": "helper",
            "layers": receipt.layers,
            "landlock_abi": receipt.landlock_abi,
            "downgrades": receipt.downgrades,
            "approximations": receipt.approximations,
            "unmediated": receipt.unmediated,
        }),
        // The helper never reported confinement (setup error, rejection): nothing ran.
        None => json!({
            "mode": "helper",
            "layers": [],
            "landlock_abi": 0,
            "downgrades": [],
            "approximations": [],
            "unmediated": [],
        }),
    }
}

fn error(outcome: &Outcome<Denial>) -> Value {
    match outcome {
        Outcome::SetupError {
            step,
            errno,
            message,
        } => json!({ "step": step, "errno": errno, "message": message }),
        Outcome::ExecError { errno, message } => json!({ "errno": errno, "message": message }),
        Outcome::Rejected { reason } => json!({ "message": reason }),
        Outcome::LimitExceeded { limit, .. } => json!({ "limit": limit }),
        _ => Value::Null,
    }
}

/// The `--json` object for a request rejected before the runtime saw it.
pub fn rejected_json(message: &str) -> String {
    Report {
        outcome: "rejected",
        exit_code: 125,
        signal: None,
        denials: &[],
        stdout: String::new(),
        stderr: String::new(),
        truncated: Truncated {
            stdout: 0,
            stderr: 0,
        },
        duration_ms: 0,
        sandbox: Value::Null,
        dropped_env: &[],
        error: json!({ "message": message }),
        limits: &[],
    }
    .render()
}

/// One line per downgrade in the receipt (those of one kind with one reason share a line), for
/// stderr before the command's output (each printed with a `cordon: ` prefix).
pub fn not_enforced_lines(receipt: &ConfinementReceipt) -> Vec<String> {
    cordon_sandbox::status::not_enforced_lines(&receipt.downgrades)
}

/// Lines for stderr after the command's own output (each printed with a `cordon: ` prefix).
pub fn stderr_lines(result: &ExecResult<Denial>) -> Vec<String> {
    let program = result
        .argv
        .first()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut lines = match &result.outcome {
        Outcome::Denied { denials, .. } => denials.iter().map(ToString::to_string).collect(),
        Outcome::SetupError { step, message, .. } => {
            vec![format!("sandbox setup failed at step {step}: {message}")]
        }
        Outcome::ExecError { message, .. } => vec![format!("{program}: {message}")],
        Outcome::TimedOut => vec![format!(
            "timed out after {:.1}s; killed {program} and its process group",
            result.duration.as_secs_f64()
        )],
        Outcome::Cancelled => vec![format!(
            "interrupted; killed {program} and its process group"
        )],
        Outcome::Rejected { reason } => vec![reason.clone()],
        Outcome::LimitExceeded { limit, .. } => {
            let how = result
                .limits
                .iter()
                .find(|r| r.limit == *limit)
                .map(|r| format!(" ({} enforced by {}: {})", r.value, r.mechanism, r.scope))
                .unwrap_or_default();
            vec![format!("{program} exceeded its {limit} limit{how}")]
        }
        // The proxy's refusals are first-hand even when the command went on (a `curl` without
        // `-f` printing the 403, a client that fell back to another host): say them.
        Outcome::Success | Outcome::Failed { .. } | Outcome::Signaled { .. } => result
            .network_denials
            .iter()
            .map(ToString::to_string)
            .collect(),
    };
    // A command that fails for want of a credential should be told why; a success, or a
    // failure the sandbox already explains, needs no note.
    let unexplained = matches!(
        result.outcome,
        Outcome::Failed { .. } | Outcome::Signaled { .. }
    );
    if unexplained && !result.dropped_env.is_empty() {
        lines.push(format!(
            "note: not passed to the command (secret-looking names and loader variables): {} (keep one with --env NAME)",
            result.dropped_env.join(", ")
        ));
    }
    lines
}
