//! `cordon snapshot ...`, and the cached shell snapshot that `cordon run -- SHELL -lc` uses.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::Subcommand;

use cordon::exec::{EnvPolicy, ExecRequest};
use cordon::session::{capture_env, wrap_with_snapshot};
use cordon::snapshot::{self, CachedSnapshot, RewriteOptions, ShellKind};

use crate::units::parse_duration;

#[derive(Subcommand)]
pub enum SnapshotCommand {
    /// Print the current snapshot's path and what it holds (names only, never values); make it
    /// first if it does not exist.
    Show {
        /// The shell (default: $SHELL, then the passwd entry).
        #[arg(long, value_name = "PATH")]
        shell: Option<PathBuf>,
    },
    /// Delete stale snapshots and debris from the cache and list what was deleted.
    Clean {
        /// Keep snapshots used within this long: 30m, 12h, 3d (default 3d).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        retention: Option<Duration>,
    },
}

/// Wraps `SHELL -lc SCRIPT` with the cached snapshot of that shell, making it on first use.
/// Any failure leaves the request as it was: a snapshot only saves time.
pub fn use_cached_snapshot(request: &mut ExecRequest) -> Option<CachedSnapshot> {
    let program = match request.argv.as_slice() {
        [shell, flag, _, ..] if flag == "-lc" => PathBuf::from(shell),
        _ => return None,
    };
    ShellKind::from_path(&program)?;
    let mut attempt = || -> anyhow::Result<Option<CachedSnapshot>> {
        let dir = cache_dir()?;
        let (_, cached) = cached_for(&dir, Some(&program))?;
        let mut rw = RewriteOptions::new(cached.snapshot.clone());
        // Explicit --env values win over the snapshot, as the sandbox markers do.
        rw.keep_overrides(request.env.set.keys());
        let canonical =
            std::fs::canonicalize(&dir).with_context(|| format!("snapshot directory {dir:?}"))?;
        Ok(wrap_with_snapshot(request, &rw, &canonical).then_some(cached))
    };
    match attempt() {
        Ok(cached) => cached,
        Err(e) => {
            tracing::info!("running without a shell snapshot: {e:#}");
            None
        }
    }
}

pub fn run(command: SnapshotCommand) -> anyhow::Result<()> {
    let dir = cache_dir()?;
    match command {
        SnapshotCommand::Show { shell } => {
            let (shell, cached) = cached_for(&dir, shell.as_deref())?;
            let text = std::fs::read(&cached.path)
                .with_context(|| format!("cannot read {:?}", cached.path))?;
            let summary = snapshot::SnapshotSummary::parse(&text);
            println!("path: {}", cached.path.display());
            println!(
                "shell: {} ({}){}",
                shell.path.display(),
                shell.kind.name(),
                if cached.created { ", made now" } else { "" }
            );
            // Counts, then names: never a value (exports routinely hold tokens).
            let line = |what: &str, names: &[String], extra: &str| {
                let mut text = format!("{what} ({}{extra})", names.len());
                if !names.is_empty() {
                    text.push_str(": ");
                    text.push_str(&names.join(" "));
                }
                println!("{text}");
            };
            line("functions", &summary.functions, "");
            line("aliases", &summary.aliases, "");
            let off = format!(", {} off", summary.options_off);
            line("options on", &summary.options_on, &off);
            line("exports", &summary.exports, "");
        }
        SnapshotCommand::Clean { retention } => {
            if !dir.exists() {
                println!("{}: nothing to clean", dir.display());
                return Ok(());
            }
            let report =
                snapshot::cleanup_stale(&dir, retention.unwrap_or(snapshot::DEFAULT_RETENTION))?;
            for path in &report.deleted {
                println!("deleted {}", path.display());
            }
            for (path, error) in &report.failed {
                println!("could not delete {}: {error}", path.display());
            }
            for session in &report.live_sessions {
                println!("in use, kept: {}", session.as_str());
            }
            println!(
                "{} deleted, {} failed",
                report.deleted.len(),
                report.failed.len()
            );
        }
    }
    Ok(())
}

/// The snapshot cache directory.
fn cache_dir() -> anyhow::Result<PathBuf> {
    snapshot::cache_dir(|k| std::env::var_os(k))
        .ok_or_else(|| anyhow!("neither XDG_CACHE_HOME nor HOME names a directory"))
}

/// The cached snapshot of `shell` (default: the user's shell), made now if missing. It is
/// captured from the environment a command would get (secrets filtered out).
fn cached_for(
    dir: &Path,
    shell: Option<&Path>,
) -> anyhow::Result<(snapshot::Shell, CachedSnapshot)> {
    let shell = snapshot::detect_shell(shell)?;
    let env = capture_env(&EnvPolicy::default())?;
    let cached = snapshot::cached_snapshot(dir, &shell, env, snapshot::DEFAULT_TIMEOUT)?;
    Ok((shell, cached))
}
