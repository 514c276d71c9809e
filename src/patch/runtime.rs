//! The parent side of apply-patch: parse (a malformed patch is rejected before anything is
//! touched), run the applier under the request's policy through the orchestrator (so denials
//! are classified like any command's and an approval can retry), and gather the changes of
//! every attempt.

use std::path::PathBuf;
use std::time::Duration;

use cordon_sandbox::SandboxPolicy;

use super::applier::{
    read_report, AppliedLine, FileChange, PatchFailure, APPLY_PATCH_ARG, MAX_PATCH_BYTES,
};
use super::parse::{parse, ParseError};
use crate::exec::{EnvPolicy, ExecRequest, Outcome};
use crate::orchestrator::{Approver, OrchestratedRun, Orchestrator};

/// What the report of the applier may hold: a diff per file, for patches of source files.
const REPORT_LIMIT: usize = 64 * 1024 * 1024;

/// The name approvals and denial reports show for the applier.
pub const APPLY_PATCH_COMMAND: &str = "apply_patch";

/// Why a patch was not run at all.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch is malformed; nothing was touched.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The patch is larger than the applier reads.
    #[error("the patch is {0} bytes, more than the {MAX_PATCH_BYTES} the applier reads")]
    TooLarge(usize),
    /// No applier binary was found.
    #[error("cannot find the cordon binary to apply patches with: set {APPLIER_ENV} to its path")]
    NoApplier,
}

/// Environment variable naming the `cordon` binary that applies patches.
pub const APPLIER_ENV: &str = "CORDON_PATCH_APPLIER";

/// One patch to apply.
#[derive(Debug, Clone)]
pub struct PatchRequest {
    /// The patch text.
    pub patch: String,
    /// The directory relative paths are taken from.
    pub cwd: PathBuf,
    /// The policy the applier runs under; `None` runs it unsandboxed.
    pub policy: Option<SandboxPolicy>,
    /// Overrides the runtime's default timeout.
    pub timeout: Option<Duration>,
}

impl PatchRequest {
    /// `patch` in `cwd` under `policy`.
    pub fn new(
        patch: impl Into<String>,
        cwd: impl Into<PathBuf>,
        policy: Option<SandboxPolicy>,
    ) -> PatchRequest {
        PatchRequest {
            patch: patch.into(),
            cwd: cwd.into(),
            policy,
            timeout: None,
        }
    }
}

/// The parameters of an `apply_patch` request as a server receives them (JSON); the server
/// supplies the policy (the session's).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchParams {
    /// The patch text.
    pub patch: String,
    /// The directory relative paths are taken from: absent for the server's working
    /// directory, relative to it when relative.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Timeout in milliseconds; absent for the runtime's default.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl ApplyPatchParams {
    /// The request, under `policy`, with `cwd` taken from `base` when absent or relative.
    pub fn into_request(
        self,
        policy: Option<SandboxPolicy>,
        base: &std::path::Path,
    ) -> PatchRequest {
        let cwd = match self.cwd {
            Some(dir) => base.join(dir),
            None => base.to_path_buf(),
        };
        PatchRequest {
            timeout: self.timeout_ms.map(Duration::from_millis),
            ..PatchRequest::new(self.patch, cwd, policy)
        }
    }
}

impl PatchReport {
    /// The report as a server answers it: whether everything applied, the changes, the
    /// failure, and the last attempt's denials.
    pub fn to_json(&self) -> serde_json::Value {
        let denials = match &self.run.last().outcome {
            Outcome::Denied { denials, .. } => denials.clone(),
            _ => Vec::new(),
        };
        serde_json::json!({
            "applied": self.applied(),
            "changes": self.changes,
            "failure": self.failure,
            "denials": denials,
        })
    }
}

/// Everything a patch did, over every attempt.
#[derive(Debug, Clone)]
pub struct PatchReport {
    /// The files changed, in the order they were changed, first attempt's first.
    pub changes: Vec<FileChange>,
    /// Why the last attempt stopped; `None` when every operation applied.
    pub failure: Option<PatchFailure>,
    /// The attempts, classified (the first attempt's denials are what an approver saw).
    pub run: OrchestratedRun,
}

impl PatchReport {
    /// True when the whole patch applied.
    pub fn applied(&self) -> bool {
        self.failure.is_none() && self.run.last().outcome == Outcome::Success
    }
}

/// Runs patches with a `cordon` binary as the applier.
#[derive(Debug, Clone)]
pub struct PatchRuntime {
    applier: PathBuf,
}

impl PatchRuntime {
    /// Uses the `cordon` binary at `applier`.
    pub fn new(applier: impl Into<PathBuf>) -> PatchRuntime {
        PatchRuntime {
            applier: applier.into(),
        }
    }

    /// `$CORDON_PATCH_APPLIER`, else the running program when it is the `cordon` binary.
    pub fn locate() -> Result<PatchRuntime, PatchError> {
        if let Some(path) = std::env::var_os(APPLIER_ENV).filter(|p| !p.is_empty()) {
            return Ok(PatchRuntime::new(path));
        }
        let exe = std::env::current_exe().map_err(|_| PatchError::NoApplier)?;
        let is_cordon = exe
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "cordon");
        if is_cordon {
            Ok(PatchRuntime::new(exe))
        } else {
            Err(PatchError::NoApplier)
        }
    }

    /// The applier's request for `request`, starting at operation `skip`.
    fn exec_request(&self, request: &PatchRequest, skip: usize) -> ExecRequest {
        let mut exec = ExecRequest::new(
            applier_argv(&self.applier, skip),
            &request.cwd,
            request.policy.clone(),
        )
        .env(EnvPolicy::empty())
        .stdin_bytes(request.patch.clone().into_bytes())
        .output_limit(REPORT_LIMIT);
        exec.timeout = request.timeout;
        exec.reported_argv = Some(vec![APPLY_PATCH_COMMAND.into()]);
        exec
    }

    /// Parses and applies `request` through `orchestrator`: on a denial `approver` decides,
    /// and an approved retry starts at the operation that was refused, so nothing already
    /// changed is changed twice. `Err` only when nothing ran (a malformed patch).
    pub async fn apply<A: Approver>(
        &self,
        orchestrator: &Orchestrator,
        request: &PatchRequest,
        approver: &A,
    ) -> Result<PatchReport, PatchError> {
        if request.patch.len() as u64 > MAX_PATCH_BYTES {
            return Err(PatchError::TooLarge(request.patch.len()));
        }
        let patch = parse(&request.patch)?;
        let total = patch.ops.len();
        let applier = self.applier.clone();
        let run = orchestrator
            .run_adjusting(self.exec_request(request, 0), approver, |first, retry| {
                let skip = resume_at(&read_report(&first.stdout.bytes))
                    .unwrap_or(0)
                    .min(total);
                retry.argv = applier_argv(&applier, skip);
            })
            .await;
        let mut changes = Vec::new();
        let mut failure = None;
        for attempt in std::iter::once(&run.first).chain(run.second.as_ref()) {
            failure = None;
            for line in read_report(&attempt.stdout.bytes) {
                match line {
                    AppliedLine::Applied { change, .. } => changes.push(change),
                    AppliedLine::Failed(f) => failure = Some(f),
                }
            }
            if failure.is_none() && attempt.outcome != Outcome::Success {
                // The applier did not say why (killed, timed out, could not start).
                failure = Some(PatchFailure {
                    index: 0,
                    path: String::new(),
                    errno: None,
                    message: format!(
                        "the patch applier did not finish: {}",
                        outcome_text(attempt)
                    ),
                });
            }
        }
        Ok(PatchReport {
            changes,
            failure,
            run,
        })
    }
}

fn applier_argv(applier: &std::path::Path, skip: usize) -> Vec<std::ffi::OsString> {
    vec![
        applier.as_os_str().to_os_string(),
        APPLY_PATCH_ARG.into(),
        "--skip".into(),
        skip.to_string().into(),
    ]
}

/// Where a retry starts: at the failed operation, else after the last one applied (an
/// attempt stopped without saying why), else at the start.
fn resume_at(report: &[AppliedLine]) -> Option<usize> {
    let failed = report.iter().find_map(|line| match line {
        AppliedLine::Failed(f) => Some(f.index),
        AppliedLine::Applied { .. } => None,
    });
    failed.or_else(|| {
        report
            .iter()
            .filter_map(|line| match line {
                AppliedLine::Applied { index, .. } => Some(index + 1),
                AppliedLine::Failed(_) => None,
            })
            .max()
    })
}

fn outcome_text(result: &crate::exec::ExecResult<crate::classify::Denial>) -> String {
    match &result.outcome {
        Outcome::SetupError { message, .. } => message.clone(),
        Outcome::ExecError { message, .. } => message.clone(),
        Outcome::Rejected { reason } => reason.clone(),
        other => format!("exit code {}", other.exit_code()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(index: usize) -> AppliedLine {
        AppliedLine::Applied {
            index,
            change: FileChange {
                path: "/w/f".into(),
                kind: super::super::ChangeKind::Modified,
                move_to: None,
                diff: String::new(),
            },
        }
    }

    #[test]
    fn patch_params_from_json() {
        let params: ApplyPatchParams =
            serde_json::from_str(r#"{"patch":"*** Begin Patch","cwd":"/w","timeout_ms":20}"#)
                .expect("params");
        let request = params.into_request(None, std::path::Path::new("/base"));
        assert_eq!(request.patch, "*** Begin Patch");
        assert_eq!(request.cwd, PathBuf::from("/w"));
        let params: ApplyPatchParams =
            serde_json::from_str(r#"{"patch":"","cwd":"sub"}"#).expect("params");
        assert_eq!(
            params.into_request(None, std::path::Path::new("/base")).cwd,
            PathBuf::from("/base/sub")
        );
        assert_eq!(request.timeout, Some(Duration::from_millis(20)));
        assert!(
            serde_json::from_str::<ApplyPatchParams>(r#"{"patch":"","cwd":"/w","policy":{}}"#)
                .is_err()
        );
    }

    #[test]
    fn patch_retry_resumes_at_the_refused_operation() {
        let failed = AppliedLine::Failed(PatchFailure {
            index: 2,
            path: "/x".into(),
            errno: Some("EACCES".into()),
            message: String::new(),
        });
        // A move that wrote its destination reports it under the failing index.
        assert_eq!(
            resume_at(&[applied(0), applied(1), applied(2), failed]),
            Some(2)
        );
        // Stopped without a word (killed): after the last one applied.
        assert_eq!(resume_at(&[applied(0), applied(1)]), Some(2));
        assert_eq!(resume_at(&[]), None);
    }
}
