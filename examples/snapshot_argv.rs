//! Prints the argv `cordon run` would execute for `SHELL -lc SCRIPT [ARGS...]` with the cached
//! shell snapshot (making it when missing), one NUL-terminated argument each, and writes the
//! snapshot's content to `--content FILE`, so that a benchmark can run exactly the wrapped
//! command through the helper (the wrapper sources the content from descriptor 8, a sealed
//! memfd that `cordon run` fills; `scripts/bench.sh` does the same with a small launcher).
//!
//! ```text
//! CORDON_HELPER=target/x86_64-unknown-linux-gnu/release/cordon-sandbox HOME=/tmp/bench-home \
//!   target/x86_64-unknown-linux-gnu/release/examples/snapshot_argv --content /tmp/snap.sh bash -lc true | xargs -0 ...
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
    let usage = "usage: snapshot_argv --content FILE SHELL -lc SCRIPT [ARGS...]";
    let mut argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    if argv.len() < 2 || argv[0] != "--content" {
        return Err(usage.into());
    }
    let content_file = std::path::PathBuf::from(argv.remove(1));
    argv.remove(0);
    let program = argv.first().ok_or(usage)?;
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
    std::fs::write(&content_file, cached.content.as_slice())?;
    let mut out = std::io::stdout().lock();
    for arg in &wrapped {
        out.write_all(arg.as_bytes())?;
        out.write_all(b"\0")?;
    }
    Ok(())
}
