//! cordon: run shell commands inside a Landlock + seccomp sandbox, and say precisely why they
//! failed when the sandbox was the cause.
//!
//! The parent side lives here: profiles ([`profile`]), launching the helper ([`helper`]),
//! supervising a run ([`exec`]), deciding whether the sandbox caused a failure ([`classify`]),
//! shell snapshots ([`snapshot`]) and sessions that carry shell state between commands
//! ([`session`]).
//! The confining side is the `cordon-sandbox` crate, re-exported as [`sandbox`].

pub mod classify;
pub mod exec;
pub mod helper;
pub mod orchestrator;
pub mod profile;
pub mod session;
pub mod snapshot;

pub use cordon_sandbox as sandbox;
