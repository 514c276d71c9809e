//! `cordon context`: the environment-context projection for one directory, whole or as the
//! change since a saved state.

use std::path::PathBuf;

use anyhow::{anyhow, Context};

use cordon::context::{
    ContextBuilder, EnvironmentContext, EnvironmentStatus, FilesystemContext, NetworkContext,
};
use cordon::profile::{PermissionProfile, ResolveContext};

/// The largest saved state `--since` reads; real ones are a few kilobytes.
const MAX_STATE_BYTES: u64 = 1024 * 1024;

/// The id of the one environment the command line describes.
const LOCAL_ID: &str = "local";

#[derive(clap::Args)]
pub struct ContextArgs {
    /// A preset (read-only, workspace-write, full-access) or a .toml/.json profile file.
    #[arg(short = 'p', long = "profile", value_name = "PRESET|FILE")]
    profile: Option<String>,
    /// The environment's working directory (default: the current directory).
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Print the state as JSON (with --since: the RFC 7386 merge patch from the saved state).
    #[arg(long)]
    json: bool,
    /// A state saved with --json: print only what changed since it (nothing when nothing did).
    #[arg(long, value_name = "FILE")]
    since: Option<PathBuf>,
}

pub fn run(args: ContextArgs) -> anyhow::Result<()> {
    // Read first: a bad saved state is bad input, and nothing else is worth doing then.
    let previous = args.since.as_deref().map(read_state).transpose()?;
    let invoking_dir = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = match &args.cwd {
        Some(dir) => invoking_dir.join(dir),
        None => invoking_dir.clone(),
    };
    let profile = match &args.profile {
        Some(spec) => PermissionProfile::load(spec)?,
        None => PermissionProfile::default_profile(),
    };
    let resolved = profile.resolve(&ResolveContext::new(&cwd).with_invoking_dir(&invoking_dir))?;
    let shell = cordon::snapshot::detect_shell(None).ok().and_then(|shell| {
        shell
            .path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
    });
    let state = ContextBuilder::new()
        .environment(
            LOCAL_ID,
            &resolved.cwd,
            EnvironmentStatus::Available,
            shell.as_deref(),
        )
        .network(NetworkContext::from_resolved(&resolved))
        .filesystem(FilesystemContext::from_resolved(&resolved))
        .build();
    match (&previous, args.json) {
        (None, false) => println!("{}", state.render()),
        (None, true) => println!("{}", state.to_json()),
        (Some(previous), false) => {
            if let Some(diff) = state.render_diff(previous) {
                println!("{diff}");
            }
        }
        (Some(previous), true) => println!("{}", state.merge_patch(previous)),
    }
    Ok(())
}

fn read_state(path: &std::path::Path) -> anyhow::Result<EnvironmentContext> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .with_context(|| format!("--since {}: cannot open", path.display()))?;
    let mut text = String::new();
    file.take(MAX_STATE_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("--since {}: cannot read", path.display()))?;
    if text.len() as u64 > MAX_STATE_BYTES {
        return Err(anyhow!(
            "--since {}: larger than {MAX_STATE_BYTES} bytes, not a saved state",
            path.display()
        ));
    }
    EnvironmentContext::from_json(&text).with_context(|| format!("--since {}", path.display()))
}
