//! `cordon serve` (JSON-RPC over stdio) and `cordon mcp` (MCP over stdio): one session, one
//! process manager, for the life of the server.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};

use cordon::exec::process_manager::ProcessManager;
use cordon::exec::Sandbox;
use cordon::patch::PatchRuntime;
use cordon::profile::{Overrides, PermissionProfile, ResolveContext};
use cordon::sandbox::policy::NetworkMode;
use cordon::server::ExecService;
use cordon::session::{Session, SessionOptions};
use cordon::user_shell::UserShell;

use crate::units::parse_duration;
use crate::{absolute_entries, LimitArgs, NetworkArg};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// A preset (read-only, workspace-write, full-access) or a .toml/.json profile file.
    #[arg(short = 'p', long = "profile", value_name = "PRESET|FILE")]
    profile: Option<String>,
    /// The session's starting directory (default: the current directory).
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Add a writable root (repeatable).
    #[arg(short = 'w', long = "writable", value_name = "PATH")]
    writable: Vec<PathBuf>,
    /// Add a readable (and executable) root (repeatable).
    #[arg(short = 'r', long = "readable", value_name = "PATH")]
    readable: Vec<PathBuf>,
    /// Network mode, overriding the profile's.
    #[arg(long, value_enum, value_name = "MODE")]
    network: Option<NetworkArg>,
    /// Let commands reach unix sockets outside the sandbox.
    #[arg(long)]
    allow_unix_sockets: bool,
    /// Kill a command after this long unless its request says otherwise (default 10m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Where the session keeps its state (default: next to the snapshot cache); must lie
    /// outside every writable root.
    #[arg(long, value_name = "DIR")]
    session_dir: Option<PathBuf>,
    /// Run `cmd` strings without the shell snapshot.
    #[arg(long)]
    no_snapshot: bool,
    /// The shell that runs `cmd` strings (default: $SHELL, else /bin/bash).
    #[arg(long, value_name = "PATH")]
    shell: Option<PathBuf>,
    /// Running processes kept at once before the least recently used idle one is killed.
    #[arg(long, value_name = "N", default_value_t = cordon::exec::process_manager::DEFAULT_MAX_LIVE)]
    max_processes: usize,
    /// Refuse `user_shell` requests (the person's own commands, which run with full access):
    /// for a client that cannot keep the person's commands apart from the model's.
    #[arg(long)]
    no_user_shell: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Builds the service both servers share; every failure is a one-line error before anything runs.
fn service(args: &ServeArgs) -> anyhow::Result<ExecService> {
    let invoking_dir = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = match &args.cwd {
        Some(dir) => invoking_dir.join(dir),
        None => invoking_dir.clone(),
    };
    if !cwd.is_dir() {
        return Err(anyhow!(
            "working directory {cwd:?} does not exist or is not a directory"
        ));
    }
    let profile = match &args.profile {
        Some(spec) => PermissionProfile::load(spec)?,
        None => PermissionProfile::default_profile(),
    };
    let profile_limits = profile.limits;
    let overrides = Overrides {
        writable: absolute_entries(&cwd, &args.writable),
        readable: absolute_entries(&cwd, &args.readable),
        network: args.network.map(|n| match n {
            NetworkArg::Denied => NetworkMode::Denied,
            NetworkArg::Loopback => NetworkMode::Loopback,
            NetworkArg::Enabled => NetworkMode::Enabled,
            NetworkArg::Proxy => NetworkMode::Proxy,
        }),
        allow_unix_sockets: args.allow_unix_sockets,
        ..Default::default()
    };
    let resolved = profile
        .with_overrides(&overrides)
        .resolve(&ResolveContext::new(&cwd).with_invoking_dir(&invoking_dir))?;
    let limits = profile_limits.tightened_by(Some(&args.limits.limits()))?;
    let sandbox = match resolved.policy {
        Some(_) => Sandbox::locate()?,
        None => Sandbox::without_helper(),
    }
    .with_timeout(args.timeout.unwrap_or(cordon::exec::DEFAULT_TIMEOUT));
    let session_dir = match &args.session_dir {
        Some(dir) => invoking_dir.join(dir),
        None => cordon::snapshot::cache_dir(|k| std::env::var_os(k))
            .and_then(|d| d.parent().map(|p| p.join("sessions")))
            .ok_or_else(|| {
                anyhow!("neither XDG_CACHE_HOME nor HOME names a directory; give --session-dir")
            })?,
    };
    let mut opts = SessionOptions::new(&session_dir, &resolved.cwd)
        .policy(resolved.policy)
        .snapshots(!args.no_snapshot);
    opts.network.resolver = cordon::network::Resolver::from_env()
        .with_context(|| format!("cannot read {}", cordon::network::HOSTS_FILE_ENV))?;
    let session = Session::new(sandbox.clone(), opts)?;
    let shell = args
        .shell
        .clone()
        .or_else(|| {
            std::env::var_os("SHELL")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        })
        .unwrap_or_else(|| PathBuf::from("/bin/bash"));
    let patches = match std::env::var_os(cordon::patch::APPLIER_ENV) {
        Some(_) => PatchRuntime::locate()?,
        None => PatchRuntime::new(
            std::env::current_exe().context("cannot find the running cordon binary")?,
        ),
    };
    // The person's own commands: no helper, the server's timeout, the session's snapshot.
    let user_shell = UserShell::with_runtime(
        Sandbox::without_helper()
            .with_timeout(args.timeout.unwrap_or(cordon::exec::DEFAULT_TIMEOUT)),
    );
    let manager = ProcessManager::new(sandbox.clone()).with_max_live(args.max_processes);
    let service = ExecService::new(session, manager, shell, limits).with_patches(patches, sandbox);
    Ok(if args.no_user_shell {
        service
    } else {
        service.with_user_shell(user_shell, !args.no_snapshot)
    })
}

/// Which protocol.
#[derive(Clone, Copy)]
pub enum Protocol {
    JsonRpc,
    Mcp,
}

pub fn run(args: ServeArgs, protocol: Protocol) -> anyhow::Result<ExitCode> {
    let service = Arc::new(service(&args)?);
    // One thread: the helper's parent-death signal follows the thread that forked it, and
    // this one lives as long as the server.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        match protocol {
            Protocol::JsonRpc => {
                let input = tokio::io::BufReader::new(tokio::io::stdin());
                cordon::server::jsonrpc::serve(Arc::clone(&service), input, tokio::io::stdout())
                    .await;
                Ok(())
            }
            Protocol::Mcp => cordon::server::mcp::serve(Arc::clone(&service)).await,
        }
    })?;
    // Every process still held dies with the service.
    drop(service);
    Ok(ExitCode::SUCCESS)
}
