//! cordon: run shell commands inside a Landlock + seccomp sandbox, and say precisely why they
//! failed when the sandbox was the cause.
//!
//! The parent side lives here: profiles ([`profile`]), launching the helper ([`helper`]),
//! supervising a run ([`exec`]), deciding whether the sandbox caused a failure ([`classify`]),
//! shell snapshots ([`snapshot`]) and sessions that carry shell state between commands
//! ([`session`]).
//! The confining side is the `cordon-sandbox` crate, re-exported as [`sandbox`].
//!
//! The whole path, from a profile to an explained failure:
//!
//! ```no_run
//! use cordon::classify::classify_result;
//! use cordon::exec::{ExecRequest, Outcome, Sandbox};
//! use cordon::profile::{PermissionProfile, ResolveContext};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let cwd = std::env::current_dir()?;
//! let policy = PermissionProfile::default_profile()
//!     .resolve(&ResolveContext::new(&cwd))?
//!     .policy
//!     .expect("workspace-write is sandboxed");
//! let sandbox = Sandbox::locate()?;
//! let request = ExecRequest::sandboxed(["sh", "-c", "echo x > /etc/hosts"], &cwd, policy);
//! let result = classify_result(sandbox.exec(request).await);
//! if let Outcome::Denied { denials, .. } = &result.outcome {
//!     for d in denials {
//!         eprintln!("cordon: {d}"); // denied write to /etc/hosts (...; allow with --writable /etc)
//!     }
//! }
//! # Ok(()) }
//! ```

pub mod classify;
pub mod context;
pub mod doctor;
pub mod evidence;
pub mod exec;
pub mod helper;
pub mod learn;
pub mod network;
pub mod orchestrator;
pub mod patch;
mod path_walk;
pub mod profile;
pub mod server;
pub mod session;
pub mod snapshot;
pub mod user_shell;

pub use cordon_sandbox as sandbox;
