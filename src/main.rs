//! The `cordon` command line. Thin: parsing and exit codes here, everything else in the library.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use clap::{Parser, Subcommand, ValueEnum};

use cordon::helper::{Helper, SELF_HELPER_ARG};
use cordon::profile::{Overrides, PermissionProfile, ResolveContext};
use cordon::sandbox::policy::NetworkMode;
use cordon::sandbox::status::StatusRecord;

/// Exit code for cordon's own errors (bad input, setup failure).
const EXIT_CORDON: u8 = 125;

#[derive(Parser)]
#[command(
    name = "cordon",
    version,
    about = "Run commands in a Landlock + seccomp sandbox"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run PROGRAM confined by a profile (default: workspace-write).
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// A preset (read-only, workspace-write, full-access) or a .toml/.json profile file.
    #[arg(short = 'p', long = "profile", value_name = "PRESET|FILE")]
    profile: Option<String>,
    /// Working directory of the command (default: the current directory).
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Add a writable root (repeatable). Relative paths are taken from the working directory.
    #[arg(short = 'w', long = "writable", value_name = "PATH")]
    writable: Vec<PathBuf>,
    /// Network mode, overriding the profile's.
    #[arg(long, value_enum, value_name = "MODE")]
    network: Option<NetworkArg>,
    /// Let the command reach unix sockets outside the sandbox.
    #[arg(long)]
    allow_unix_sockets: bool,
    /// Print the resolved policy as one line of JSON and exit without running anything.
    #[arg(long)]
    print_policy: bool,
    /// The command and its arguments.
    #[arg(last = true, value_name = "PROGRAM [ARGS]...")]
    argv: Vec<OsString>,
}

#[derive(Clone, Copy, ValueEnum)]
enum NetworkArg {
    Denied,
    Enabled,
}

fn main() -> ExitCode {
    // Helper dispatch comes before anything else: the confining path must not pay for the
    // CLI's parsing or logging, and must not log after exec.
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    if Path::new(&argv0).file_name() == Some(OsStr::new(cordon::helper::HELPER_NAME)) {
        return exit_code(cordon::sandbox::main_with_args(args));
    }
    if std::env::args_os().nth(1).as_deref() == Some(OsStr::new(SELF_HELPER_ARG)) {
        return exit_code(cordon::sandbox::main_with_args(args.skip(1)));
    }

    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("cordon: {}", first.trim_start_matches("error: "));
            return ExitCode::from(EXIT_CORDON);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Run(args) => match run(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("cordon: {e:#}");
                ExitCode::from(EXIT_CORDON)
            }
        },
    }
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(EXIT_CORDON))
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let cwd = match args.cwd {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !cwd.is_dir() {
        return Err(anyhow!(
            "working directory {:?} does not exist or is not a directory",
            cwd
        ));
    }
    let cwd = std::fs::canonicalize(&cwd).with_context(|| format!("working directory {cwd:?}"))?;
    let profile = match &args.profile {
        Some(spec) => PermissionProfile::load(spec)?,
        None => PermissionProfile::default_profile(),
    };
    let overrides = Overrides {
        writable: args
            .writable
            .iter()
            .map(|w| cwd.join(w).to_string_lossy().into_owned())
            .collect(),
        network: args.network.map(|n| match n {
            NetworkArg::Denied => NetworkMode::Denied,
            NetworkArg::Enabled => NetworkMode::Enabled,
        }),
        allow_unix_sockets: args.allow_unix_sockets,
    };
    let resolved = profile
        .with_overrides(&overrides)
        .resolve(&ResolveContext::new(&cwd))?;
    for note in &resolved.notes {
        tracing::info!("{note}");
    }
    if args.print_policy {
        match &resolved.policy {
            Some(policy) => println!("{}", policy.to_json()),
            None => println!("null"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.argv.is_empty() {
        return Err(anyhow!(
            "no command given (usage: cordon run [OPTIONS] -- PROGRAM [ARGS...])"
        ));
    }

    let Some(policy) = resolved.policy else {
        eprintln!("cordon: full-access profile: running without any sandbox");
        let child = std::process::Command::new(&args.argv[0])
            .args(&args.argv[1..])
            .current_dir(&cwd)
            .spawn();
        return match child {
            Ok(child) => wait_for(child),
            Err(e) => {
                eprintln!("cordon: {}: {e}", args.argv[0].to_string_lossy());
                Ok(ExitCode::from(
                    if e.kind() == std::io::ErrorKind::NotFound {
                        127
                    } else {
                        126
                    },
                ))
            }
        };
    };

    let helper = Helper::locate()?;
    let mut launch = helper.command(&policy, &cwd, &args.argv)?;
    let child = launch
        .command
        .spawn()
        .with_context(|| format!("cannot start the helper {:?}", helper.program()))?;
    let records = launch
        .status
        .read_after_spawn()
        .context("cannot read the helper's status")?;
    for record in &records {
        match record {
            StatusRecord::Confined(receipt) => {
                for d in &receipt.downgrades {
                    tracing::info!("not enforced: {} ({})", d.restriction, d.reason);
                }
            }
            StatusRecord::SetupError { step, message, .. } => {
                eprintln!("cordon: sandbox setup failed at step {step}: {message}");
            }
            StatusRecord::ExecError {
                program, message, ..
            } => eprintln!("cordon: {program}: {message}"),
        }
    }
    wait_for(child)
}

/// Waits for `child` with SIGINT and SIGQUIT ignored, so that a Ctrl-C reaches the command (it
/// shares the terminal's process group) and cordon reports how the command ended.
fn wait_for(mut child: std::process::Child) -> anyhow::Result<ExitCode> {
    use nix::sys::signal::{signal, SigHandler, Signal};
    use std::os::unix::process::ExitStatusExt;
    for sig in [Signal::SIGINT, Signal::SIGQUIT] {
        // SAFETY: SIG_IGN installs no handler code; the child was already spawned, so it keeps
        // the default disposition.
        unsafe { signal(sig, SigHandler::SigIgn) }.context("cannot ignore SIGINT")?;
    }
    let status = child.wait().context("cannot wait for the command")?;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => exit_code(code),
        (None, Some(sig)) => exit_code(128 + sig),
        (None, None) => ExitCode::from(EXIT_CORDON),
    })
}
