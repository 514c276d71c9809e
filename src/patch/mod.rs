//! Apply-patch, confined: agents edit files by patch more often than by shell.
//!
//! The format (see [`parse`]): `*** Begin Patch`, then any of
//! `*** Add File: PATH` with `+` lines, `*** Delete File: PATH`, and `*** Update File: PATH`
//! (optionally `*** Move to: PATH`) with `@@` hunks of ` `, `-` and `+` lines, then
//! `*** End Patch`.
//!
//! The edits are made INSIDE the sandbox: [`PatchRuntime`] runs the `cordon` binary itself as
//! the applier (`cordon __apply-patch`, see [`applier_main`]) under the request's policy, as
//! any command runs, so Landlock and the mount layer decide every write and the parent
//! re-implements no policy. The applier never follows a symlink (every path is walked from `/`
//! with `O_NOFOLLOW`, see `fs.rs`), replaces files by rename so hard links are never written
//! through, and plans everything before writing anything, so a hunk that does not apply leaves
//! every file as it was. The report is what was actually changed, per file with a unified
//! diff, also when the patch stopped part way, and over an approved retry, which starts at
//! the operation that was refused.
//!
//! ```no_run
//! use cordon::exec::Sandbox;
//! use cordon::orchestrator::{Approver, ApprovalRequest, Decision, Orchestrator};
//! use cordon::patch::{PatchRequest, PatchRuntime};
//!
//! struct Never;
//! impl Approver for Never {
//!     async fn decide(&self, _: &ApprovalRequest) -> Decision { Decision::Deny }
//! }
//! # async fn demo(policy: cordon::sandbox::SandboxPolicy) -> Result<(), Box<dyn std::error::Error>> {
//! let orchestrator = Orchestrator::new(Sandbox::locate()?);
//! let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n";
//! let request = PatchRequest::new(patch, "/home/me/project", Some(policy));
//! let report = PatchRuntime::locate()?.apply(&orchestrator, &request, &Never).await?;
//! for change in &report.changes {
//!     print!("{}", change.diff);
//! }
//! # Ok(()) }
//! ```

mod applier;
mod apply;
pub mod diff;
mod fs;
mod parse;
mod runtime;

pub use applier::{
    applier_main, read_report, AppliedLine, ChangeKind, FileChange, PatchFailure, APPLY_PATCH_ARG,
};
pub use apply::{apply_chunks, HunkError};
pub use parse::{parse, Chunk, ParseError, Patch, PatchOp};
pub use runtime::{
    ApplyPatchParams, PatchError, PatchReport, PatchRequest, PatchRuntime, APPLIER_ENV,
    APPLY_PATCH_COMMAND,
};
