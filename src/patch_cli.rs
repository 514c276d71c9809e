//! `cordon patch [-p PROFILE] [-C DIR] [--json] < PATCH`: apply a patch inside the sandbox.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context};

use cordon::exec::Sandbox;
use cordon::orchestrator::{ApprovalRequest, Approver, Decision, Orchestrator};
use cordon::patch::{ChangeKind, PatchRequest, PatchRuntime, APPLIER_ENV};
use cordon::profile::{PermissionProfile, ResolveContext};

use crate::report;

/// The largest patch read from stdin.
const MAX_PATCH_BYTES: u64 = 16 * 1024 * 1024;

#[derive(clap::Args)]
pub struct PatchArgs {
    /// A preset (read-only, workspace-write, full-access) or a .toml/.json profile file.
    #[arg(short = 'p', long = "profile", value_name = "PRESET|FILE")]
    profile: Option<String>,
    /// The directory relative paths in the patch are taken from (default: the current one).
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Print one JSON object (changes, failure, denials) instead of a summary.
    #[arg(long)]
    json: bool,
}

/// The command line asks nobody: a denied patch stays denied, and the denial says what
/// would allow it.
struct NoApprover;

impl Approver for NoApprover {
    async fn decide(&self, _: &ApprovalRequest) -> Decision {
        Decision::Deny
    }
}

pub fn run(args: PatchArgs) -> anyhow::Result<ExitCode> {
    let mut text = String::new();
    std::io::stdin()
        .take(MAX_PATCH_BYTES + 1)
        .read_to_string(&mut text)
        .context("cannot read the patch on stdin")?;
    if text.len() as u64 > MAX_PATCH_BYTES {
        return Err(anyhow!("the patch is larger than {MAX_PATCH_BYTES} bytes"));
    }
    // Malformed: refused before a profile is even resolved, with the line that is wrong.
    cordon::patch::parse(&text)?;
    let invoking_dir = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = match &args.cwd {
        Some(dir) => invoking_dir.join(dir),
        None => invoking_dir.clone(),
    };
    let profile = match &args.profile {
        Some(spec) => PermissionProfile::load(spec)?,
        None => PermissionProfile::default_profile(),
    };
    let resolved = profile.resolve(&ResolveContext::new(&cwd).with_invoking_dir(&invoking_dir))?;
    let sandbox = match &resolved.policy {
        Some(_) => Sandbox::locate()?,
        None => Sandbox::without_helper(),
    };
    let patch_runtime = match std::env::var_os(APPLIER_ENV) {
        Some(_) => PatchRuntime::locate()?,
        None => PatchRuntime::new(
            std::env::current_exe().context("cannot find the running cordon binary")?,
        ),
    };
    let request = PatchRequest::new(text, &resolved.cwd, resolved.policy);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let orchestrator = Orchestrator::new(sandbox);
    let report = runtime.block_on(patch_runtime.apply(&orchestrator, &request, &NoApprover))?;
    let last = report.run.last();
    if args.json {
        println!("{}", report.to_json());
    } else {
        for change in &report.changes {
            match (change.kind, &change.move_to) {
                (ChangeKind::Moved, Some(to)) => println!("R {} -> {to}", change.path),
                (ChangeKind::Added, _) => println!("A {}", change.path),
                (ChangeKind::Deleted, _) => println!("D {}", change.path),
                _ => println!("M {}", change.path),
            }
        }
        if let Some(failure) = &report.failure {
            eprintln!("cordon: apply_patch: {}", failure.message);
            for line in report::stderr_lines(last) {
                eprintln!("cordon: {line}");
            }
        }
    }
    Ok(if report.applied() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
