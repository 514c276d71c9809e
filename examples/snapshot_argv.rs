//! Prints the argv `cordon run` would execute for `SHELL -lc SCRIPT [ARGS...]` with the cached
//! shell snapshot (making it when missing), one NUL-terminated argument each, so that a
//! benchmark can run exactly the wrapped command through the helper.
//!
//! ```text
//! HOME=/tmp/bench-home target/release/examples/snapshot_argv bash -lc true | xargs -0 ...
//! ```
//!
//! Exits 1 with a message when no snapshot can be made (the benchmark must not silently
//! measure the unwrapped command).

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use cordon::exec::EnvPolicy;
use cordon::session::capture_env;
use cordon::snapshot::{
    cache_dir, cached_snapshot, detect_shell, rewrite_argv, RewriteOptions, DEFAULT_TIMEOUT,
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let program = argv
        .first()
        .ok_or("usage: snapshot_argv SHELL -lc SCRIPT [ARGS...]")?;
    let dir = cache_dir(|k| std::env::var_os(k)).ok_or("no HOME or XDG_CACHE_HOME")?;
    let shell = detect_shell(Some(program.as_ref()))?;
    let cached = cached_snapshot(
        &dir,
        &shell,
        capture_env(&EnvPolicy::default())?,
        DEFAULT_TIMEOUT,
    )?;
    let wrapped = rewrite_argv(&argv, &RewriteOptions::new(cached.snapshot.clone()));
    if wrapped == argv {
        return Err("the command is not SHELL -lc SCRIPT for a supported shell".into());
    }
    let mut out = std::io::stdout().lock();
    for arg in &wrapped {
        out.write_all(arg.as_bytes())?;
        out.write_all(b"\0")?;
    }
    Ok(())
}
