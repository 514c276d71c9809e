//! `cordon snapshot ...`, and the cached shell snapshot that `cordon run -- SHELL -lc` uses.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use clap::Subcommand;

use cordon::exec::{EnvPolicy, ExecRequest};
use cordon::session::{capture_env, wrap_with_snapshot};
use cordon::snapshot::{self, CacheUse, CachedSnapshot, RewriteOptions, ShellKind};

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

/// What a run's use of the snapshot cache leaves to do once the command has finished: when
/// the run's policy made the cache directory writable, the command may have planted files
/// there for later runs, so the directory is purged (on drop, which `main` keeps until after
/// the command has exited).
#[derive(Debug, Default)]
pub struct SnapshotUse {
    purge_after: Option<PathBuf>,
    /// Keeps other runs off the cache until the purge is done; dropped after it.
    marker: Option<snapshot::BypassMarker>,
}

impl Drop for SnapshotUse {
    fn drop(&mut self) {
        if let Some(dir) = self.purge_after.take() {
            match snapshot::purge_cache(&dir) {
                Ok(0) => {}
                Ok(failed) => {
                    tracing::info!("snapshot cache {dir:?}: {failed} entries could not be purged")
                }
                Err(e) => tracing::info!("snapshot cache not purged: {e}"),
            }
        }
        // Only now may other runs read the cache again.
        self.marker = None;
    }
}

/// Wraps `SHELL -lc SCRIPT` with the cached snapshot of that shell, making it on first use.
/// Any failure leaves the request as it was: a snapshot only saves time. A run whose writable
/// roots cover the cache, or one of the shell's startup files, gets no snapshot (the command's
/// own login shell then runs inside the sandbox, exactly as without cordon's cache).
///
/// Every run whose policy covers the cache purges it afterwards, whatever its command and
/// with or without `want_snapshot` (`--no-snapshot`): any confined command could plant there.
pub fn use_cached_snapshot(request: &mut ExecRequest, want_snapshot: bool) -> SnapshotUse {
    let dir = match cache_dir() {
        Ok(dir) => dir,
        Err(e) => {
            tracing::info!("running without a shell snapshot: {e:#}");
            return SnapshotUse::default();
        }
    };
    let policy = request.policy.clone();
    let policy = policy.as_ref();
    let mut used = SnapshotUse::default();
    if let CacheUse::Bypass { root } = CacheUse::for_policy(policy, &dir) {
        tracing::info!(
            "no shell snapshot: the writable root {root:?} covers the cache {dir:?}, which is purged after the command"
        );
        used.purge_after = Some(dir.clone());
        used.marker = match snapshot::BypassMarker::hold(&dir) {
            Ok(marker) => Some(marker),
            Err(e) => {
                tracing::info!("cannot mark the snapshot cache as being written: {e}");
                None
            }
        };
    }
    let program = match request.argv.as_slice() {
        [shell, flag, _, ..] if flag == "-lc" && want_snapshot => PathBuf::from(shell),
        _ => return used,
    };
    if ShellKind::from_path(&program).is_none() {
        return used;
    }
    let mut attempt = || -> anyhow::Result<()> {
        let shell = snapshot::detect_shell(Some(&program))?;
        let env = capture_env(&EnvPolicy::default())?;
        let lookup = |k: &str| snapshot::changed_env(&env, k);
        if let Some((file, root)) =
            snapshot::startup_files_under_writable_root(policy, shell.kind, lookup)
        {
            eprintln!(
                "cordon: note: no shell snapshot for this run: the startup file {} lies in the writable root {}",
                file.display(),
                root.display()
            );
            return Ok(());
        }
        if used.purge_after.is_some() {
            return Ok(());
        }
        if snapshot::bypass_in_progress(&dir) {
            tracing::info!(
                "no shell snapshot: a running command can write the cache {dir:?} (it is purged when that run ends)"
            );
            return Ok(());
        }
        let cached = snapshot::cached_snapshot(&dir, &shell, env, snapshot::DEFAULT_TIMEOUT)?;
        let mut rw = RewriteOptions::new(cached.snapshot.clone());
        // Explicit --env values win over the snapshot, as the sandbox markers do.
        rw.keep_overrides(request.env.set.keys());
        // And so do the proxy's variables: a startup file's `export NO_PROXY=*` must not send
        // clients around the proxy.
        if let Some(policy) = &request.policy {
            rw.keep_overrides(&cordon::network::env_names(policy));
        }
        wrap_with_snapshot(request, &rw, &cached.content, None)?;
        Ok(())
    };
    if let Err(e) = attempt() {
        tracing::info!("running without a shell snapshot: {e:#}");
    }
    used
}

pub fn run(command: SnapshotCommand) -> anyhow::Result<()> {
    let dir = cache_dir()?;
    match command {
        SnapshotCommand::Show { shell } => {
            let (shell, cached) = cached_for(&dir, shell.as_deref())?;
            let summary = snapshot::SnapshotSummary::parse(&cached.content);
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
            // Not followed: a symlink at the cache's name is reported by cleanup, not used.
            if std::fs::symlink_metadata(&dir).is_err() {
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
