//! `cordon-sandbox (--policy JSON | --policy-file PATH) [--cwd DIR] [--status-fd N] [--pass-fd N]... -- PROGRAM [ARGS...]`
//!
//! `no_main`: the helper's start-up is paid by every command, and Rust's runtime start-up
//! (stack-guard discovery through `/proc/self/maps`, a signal stack, stdio checks, ignoring
//! SIGPIPE) is work the helper neither needs nor wants to hand on to the command it execs.
#![no_main]

use std::ffi::{c_char, c_int};

/// The C entry point. glibc hands `argv` to std through `.init_array`, so `args_os` works.
#[no_mangle]
pub extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    cordon_sandbox::main_with_args(std::env::args_os().skip(1))
}
