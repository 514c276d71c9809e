//! cordon: sandboxed execution of shell commands with precise denial reports.
//!
//! The confining helper lives in the `cordon-sandbox` crate; this crate is the parent side.

pub mod classify;
