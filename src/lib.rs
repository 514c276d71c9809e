//! cordon: sandboxed execution of shell commands (parent side).

pub mod snapshot;
