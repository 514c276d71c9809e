//! The `cordon` command line. Thin: parsing and exit codes here, everything else in the library.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::{Parser, Subcommand, ValueEnum};

use cordon::classify::classify_result;
use cordon::exec::{
    EnvBase, EnvPolicy, ExecEvent, ExecRequest, ExecResult, Sandbox, StdinSource, StreamKind,
};
use cordon::helper::SELF_HELPER_ARG;
use cordon::profile::{Overrides, PermissionProfile, ResolveContext};
use cordon::sandbox::policy::{Enforcement, NetworkMode};

mod context_cli;
mod doctor_cli;
mod learn_cli;
mod patch_cli;
mod pty_relay;
mod report;
mod serve_cli;
mod shell_cli;
mod snapshot_cli;
mod terminal;
mod units;

use snapshot_cli::{use_cached_snapshot, SnapshotCommand, SnapshotUse};
use units::{parse_bytes, parse_duration};

/// `cordon run` without `--timeout` waits as long as the command runs.
pub(crate) const NO_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

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
    Run(Box<RunArgs>),
    /// Inspect or clean the shell snapshot cache.
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
    /// Show what this kernel lets cordon enforce, feature by feature and preset by preset
    /// (exit 0 when the default preset is enforced in full, 1 otherwise).
    Doctor(doctor_cli::DoctorArgs),
    /// Print the environment context an agent shows its model (`--since FILE`: only what
    /// changed since a state saved with `--json`).
    Context(context_cli::ContextArgs),
    /// Run the person's own command in their login shell with full access, on purpose
    /// unsandboxed (what a `!command` in an agent's UI runs).
    Shell(shell_cli::ShellArgs),
    /// Apply a patch (`*** Begin Patch` ... `*** End Patch`, on stdin) inside the sandbox.
    Patch(patch_cli::PatchArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) on stdout: `cordon man | man -l -`.
    Man,
    /// Serve exec, write_stdin, kill and list as JSON-RPC 2.0 over stdin/stdout, one message
    /// per line, for agents in any language (see the README).
    Serve(serve_cli::ServeArgs),
    /// The same as an MCP server over stdio (tools exec_command and write_stdin).
    Mcp(serve_cli::ServeArgs),
    /// Run PROGRAM confined by a base profile and write the smallest profile extending it that
    /// allows what the kernel refused (it grants nothing by itself).
    Learn(learn_cli::LearnArgs),
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
    /// Add a readable (and executable) root (repeatable). Relative paths are taken from the
    /// working directory.
    #[arg(short = 'r', long = "readable", value_name = "PATH")]
    readable: Vec<PathBuf>,
    /// Keep PATH (or every match of a glob pattern) read-only inside the writable roots
    /// (repeatable; like the profile's `read_only`, enforced or refused).
    #[arg(long = "read-only", value_name = "PATH|PATTERN")]
    read_only: Vec<String>,
    /// Hide PATH (or every match of a glob pattern) although a readable root covers it
    /// (repeatable; like the profile's `deny_read`, enforced or refused).
    #[arg(long = "deny-read", value_name = "PATH|PATTERN")]
    deny_read: Vec<String>,
    /// What to do when something asked for cannot be enforced here, overriding the profile:
    /// `report` runs without it (and says so), `refuse` exits 125.
    #[arg(long, value_enum, value_name = "WHAT")]
    enforcement: Option<EnforcementArg>,
    /// Network mode, overriding the profile's.
    #[arg(long, value_enum, value_name = "MODE")]
    network: Option<NetworkArg>,
    /// Let the command reach unix sockets outside the sandbox.
    #[arg(long)]
    allow_unix_sockets: bool,
    /// Let the command connect to this unix socket, and no other (repeatable; `$VAR` is taken
    /// from the environment, e.g. '$SSH_AUTH_SOCK'; needs --network denied).
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    allow_unix_socket: Vec<String>,
    /// Let the command reach HOST (or `*.DOMAIN`, every subdomain), at any port or at PORT,
    /// through cordon's proxy (repeatable; implies `--network proxy`).
    #[arg(long = "allow-domain", value_name = "HOST[:PORT]")]
    allow_domains: Vec<String>,
    /// Let the command reach the service on the host's loopback at PORT, at the same port on
    /// its own 127.0.0.1 and ::1 (repeatable; needs `--network loopback` or `proxy`).
    #[arg(long = "allow-host-port", value_name = "PORT")]
    allow_host_ports: Vec<u16>,
    /// Make the server the command runs on PORT reachable from the host's loopback at HOSTPORT
    /// (default: the same port) while the run lasts (repeatable; needs `--network loopback`
    /// or `proxy`).
    #[arg(long = "publish", value_name = "PORT[:HOSTPORT]", value_parser = parse_publish)]
    publish: Vec<cordon::sandbox::policy::PublishedPort>,
    /// Lift a protected path of the preset by its name (`~/.gitconfig`, `.git`, `~/.ssh`;
    /// repeatable; like the profile's `unprotect`).
    #[arg(long = "unprotect", value_name = "NAME")]
    unprotect: Vec<String>,
    /// Print the resolved policy as one line of JSON and exit without running anything.
    #[arg(long)]
    print_policy: bool,
    /// Kill the command (and everything it started) after this long: 500ms, 10s, 2m, 1h.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Keep at most this many bytes of each stream in the result (head and tail): 1048576, 64K, 1M.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    output_limit: Option<usize>,
    /// Print exactly one JSON object describing the run on stdout, instead of passing output through.
    #[arg(long)]
    json: bool,
    /// Start the command's environment empty instead of from cordon's.
    #[arg(long)]
    env_clear: bool,
    /// Set KEY=VALUE in the command's environment, or pass KEY through from cordon's (repeatable;
    /// wins over the secret filter).
    #[arg(long = "env", value_name = "KEY[=VALUE]")]
    env: Vec<String>,
    /// Run `SHELL -lc SCRIPT` without the cached shell snapshot (the login shell then reads
    /// its startup files itself, inside the sandbox).
    #[arg(long)]
    no_snapshot: bool,
    #[command(flatten)]
    limits: LimitArgs,
    /// The command and its arguments.
    #[arg(last = true, value_name = "PROGRAM [ARGS]...")]
    argv: Vec<OsString>,
}

/// Resource limits (`cordon run`, `cordon serve`, `cordon mcp`).
#[derive(clap::Args, Clone, Default)]
pub struct LimitArgs {
    /// Bound the command's memory (all its processes together where a cgroup can be made): 512M, 2G.
    #[arg(long, value_name = "SIZE", value_parser = parse_limit_size)]
    memory: Option<u64>,
    /// Bound how many processes and threads the command may have at once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    processes: Option<u64>,
    /// Bound the CPU time of each of the command's processes: 30s, 10m, 1h.
    #[arg(long, value_name = "DURATION", value_parser = parse_limit_seconds)]
    cpu_time: Option<u64>,
    /// Bound the size of each file the command writes: 1G.
    #[arg(long, value_name = "SIZE", value_parser = parse_limit_size)]
    file_size: Option<u64>,
}

impl LimitArgs {
    fn limits(&self) -> cordon::exec::limits::Limits {
        cordon::exec::limits::Limits {
            memory: self.memory,
            processes: self.processes,
            cpu_time: self.cpu_time,
            file_size: self.file_size,
        }
    }
}

fn parse_limit_size(text: &str) -> Result<u64, String> {
    cordon::exec::limits::parse_size(text).map_err(|e| e.to_string())
}

fn parse_limit_seconds(text: &str) -> Result<u64, String> {
    cordon::exec::limits::parse_seconds(text).map_err(|e| e.to_string())
}

#[derive(Clone, Copy, ValueEnum)]
enum EnforcementArg {
    Refuse,
    Report,
}

#[derive(Clone, Copy, ValueEnum)]
enum NetworkArg {
    Denied,
    /// A private network with only the loopback interface (needs user namespaces).
    Loopback,
    /// A private network whose only way out is cordon's filtering proxy (needs user
    /// namespaces); hosts from `--allow-domain` and the profile's `network.allow`.
    Proxy,
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

    if std::env::args_os().nth(1).as_deref() == Some(OsStr::new(cordon::patch::APPLY_PATCH_ARG)) {
        // Run inside the sandbox by the patch runtime; no CLI parsing, no logging.
        return exit_code(cordon::patch::applier_main(std::env::args_os().skip(2)));
    }
    let parsed = match parse_run_alone() {
        Some(args) => Ok(Cli {
            command: Command::Run(Box::new(args)),
        }),
        None => Cli::try_parse(),
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand
            ) {
                // Bare `cordon` or `cordon snapshot`: what there is to run is the useful answer.
                eprint!("{}", e.render());
            } else {
                eprintln!("cordon: {}", clap_error_line(&e.render().to_string()));
            }
            return ExitCode::from(EXIT_CORDON);
        }
    };
    match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init(),
        // Without RUST_LOG, warnings and errors: a plain level needs none of the directive
        // parsing (regular expressions included) that a filter costs every command.
        Err(_) => tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_writer(std::io::stderr)
            .init(),
    }
    match cli.command {
        Command::Run(args) => {
            let json = args.json;
            match run(*args) {
                Ok(code) => code,
                Err(e) => {
                    let message = one_line(&e);
                    eprintln!("cordon: {message}");
                    if json {
                        println!("{}", report::rejected_json(&message));
                    }
                    ExitCode::from(EXIT_CORDON)
                }
            }
        }
        Command::Doctor(args) => match doctor_cli::run(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("cordon: {}", one_line(&e));
                ExitCode::from(EXIT_CORDON)
            }
        },
        Command::Context(args) => match context_cli::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cordon: {}", one_line(&e));
                ExitCode::from(EXIT_CORDON)
            }
        },
        Command::Patch(args) => match patch_cli::run(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("cordon: {}", one_line(&e));
                ExitCode::from(EXIT_CORDON)
            }
        },
        Command::Learn(args) => match learn_cli::run(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("cordon: {}", one_line(&e));
                ExitCode::from(EXIT_CORDON)
            }
        },
        Command::Shell(args) => match shell_cli::run(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("cordon: {}", one_line(&e));
                ExitCode::from(EXIT_CORDON)
            }
        },
        Command::Serve(args) => serve_or_report(args, serve_cli::Protocol::JsonRpc),
        Command::Mcp(args) => serve_or_report(args, serve_cli::Protocol::Mcp),
        Command::Snapshot(command) => match snapshot_cli::run(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cordon: {}", one_line(&e));
                ExitCode::from(EXIT_CORDON)
            }
        },
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "cordon", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man => {
            use clap::CommandFactory;
            match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("cordon: cannot write the manual page: {e}");
                    ExitCode::from(EXIT_CORDON)
                }
            }
        }
    }
}

/// `cordon run ...` parsed with the `run` subcommand's definitions alone: to parse any command
/// line clap builds every subcommand's, about 0.1 ms that each run would pay. Only a command
/// line this parser accepts is taken from it (the full parser accepts it too, with the same
/// meaning: the `run` subcommand is these very definitions); help, version and every error
/// are left to the full parser, which words them as it always has.
fn parse_run_alone() -> Option<RunArgs> {
    use clap::{Args, FromArgMatches};
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new("run")) {
        return None;
    }
    let command = RunArgs::augment_args(clap::Command::new("run").no_binary_name(true));
    let matches = command.try_get_matches_from(args).ok()?;
    RunArgs::from_arg_matches(&matches).ok()
}

/// clap's error on one line: the message and its details (the valid values, a tip), without
/// the usage and the pointer to `--help`.
fn clap_error_line(rendered: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for line in rendered.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("For more information") {
            continue;
        }
        if line.starts_with("Usage:") {
            break;
        }
        parts.push(line.trim_start_matches("error: "));
    }
    if parts.is_empty() {
        return "invalid arguments".to_owned();
    }
    parts
        .iter()
        .map(|part| match part.strip_prefix("tip: ") {
            Some(tip) => format!("({tip})"),
            None => (*part).to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn serve_or_report(args: serve_cli::ServeArgs, protocol: serve_cli::Protocol) -> ExitCode {
    match serve_cli::run(args, protocol) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cordon: {}", one_line(&e));
            ExitCode::from(EXIT_CORDON)
        }
    }
}

/// An error and its causes on one line, each cause once: the library's errors already quote
/// their source in their own message, which `{:#}` would repeat.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(EXIT_CORDON))
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let json = args.json;
    let (request, _snapshot_in_use) = match prepare(args)? {
        Prepared::Printed => return Ok(ExitCode::SUCCESS),
        Prepared::Run(request, snapshot) => (request, snapshot),
    };
    // Held until `run` returns, however it returns: the command may leave the terminal it
    // inherited with echo off or another window size, and a shell would put them back.
    let _terminal = terminal::SavedTerminals::save();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // A current-thread runtime forks from this thread, which lives as long as the command:
    // the helper's parent-death signal must not fire early.
    runtime.block_on(supervise(*request, json))
}

enum Prepared {
    /// `--print-policy` was handled.
    Printed,
    /// The request, and what its use of the snapshot cache leaves to do after it has run.
    Run(Box<ExecRequest>, SnapshotUse),
}

/// Everything that can reject the request, before anything runs.
fn prepare(args: RunArgs) -> anyhow::Result<Prepared> {
    let invoking_dir = std::env::current_dir().context("cannot read the current directory")?;
    // Kept as given: the profile resolves it, refusing a symlink that a sandboxed command
    // could have planted on the way (a canonical path here would already have followed it).
    let cwd = match &args.cwd {
        Some(dir) => invoking_dir.join(dir),
        None => invoking_dir.clone(),
    };
    if !cwd.is_dir() {
        return Err(anyhow!(
            "working directory {:?} does not exist or is not a directory",
            args.cwd.as_deref().unwrap_or(&cwd)
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
        network: match args.network {
            Some(NetworkArg::Denied) => Some(NetworkMode::Denied),
            Some(NetworkArg::Loopback) => Some(NetworkMode::Loopback),
            Some(NetworkArg::Proxy) => Some(NetworkMode::Proxy),
            Some(NetworkArg::Enabled) => Some(NetworkMode::Enabled),
            None if !args.allow_domains.is_empty() => Some(NetworkMode::Proxy),
            None => None,
        },
        allow_unix_sockets: args.allow_unix_sockets,
        unix_sockets: args.allow_unix_socket.clone(),
        read_only: args.read_only.clone(),
        deny_read: args.deny_read.clone(),
        enforcement: args.enforcement.map(|e| match e {
            EnforcementArg::Refuse => Enforcement::Refuse,
            EnforcementArg::Report => Enforcement::Report,
        }),
        allow_domains: args.allow_domains.clone(),
        host_ports: args.allow_host_ports.clone(),
        publish: args.publish.clone(),
        unprotect: args.unprotect.clone(),
    };
    profile.check_overrides(&overrides)?;
    let resolved = profile
        .with_overrides(&overrides)
        .resolve(&ResolveContext::new(&cwd).with_invoking_dir(&invoking_dir))?;
    let cwd = resolved.cwd.clone();
    for note in &resolved.notes {
        tracing::info!("{note}");
    }
    if args.print_policy {
        match &resolved.policy {
            Some(policy) => println!("{}", policy.to_json()),
            // No policy means no helper: say so rather than print `null`.
            None => println!(
                "{}",
                serde_json::json!({
                    "version": 1,
                    "sandbox": "none",
                    "cwd": cwd,
                    "note": "full-access: the command runs directly, without the helper: no \
                             Landlock, seccomp or namespaces, full filesystem and network access",
                })
            ),
        }
        return Ok(Prepared::Printed);
    }
    match args.argv.first() {
        None => {
            return Err(anyhow!(
                "no command given (usage: cordon run [OPTIONS] -- PROGRAM [ARGS...])"
            ))
        }
        Some(program) if program.is_empty() => {
            return Err(anyhow!(
                "the program name is empty (usage: cordon run [OPTIONS] -- PROGRAM [ARGS...])"
            ))
        }
        Some(_) => {}
    }
    let mut env = EnvPolicy::default();
    if args.env_clear {
        env.base = EnvBase::Empty;
    }
    for entry in &args.env {
        match entry.split_once('=') {
            Some((key, value)) => {
                env.set.insert(key.into(), value.into());
            }
            None => match std::env::var_os(entry) {
                Some(value) => {
                    env.set.insert(entry.into(), value);
                }
                None => {
                    return Err(anyhow!(
                        "--env {entry}: {entry} is not set in cordon's environment"
                    ))
                }
            },
        }
    }
    let mut request = ExecRequest::new(args.argv, &cwd, resolved.policy)
        .env(env)
        .lossless_events(!args.json);
    request.limits = profile_limits.tightened_by(Some(&args.limits.limits()))?;
    if !args.json {
        // Pass-through: stdin and stdout are the caller's own (a terminal stays a terminal);
        // stderr goes through cordon, which needs it to explain a denial.
        request.stdin = StdinSource::Inherit;
        request.inherit_stdout = true;
        // Before the command's first byte: a person must not read output produced under less
        // confinement than the profile asked for without being told first.
        // At a terminal the caller's terminal is in raw mode by then (see `pty_relay`): a
        // line must bring its own carriage return.
        let line_end = if pty_relay::wanted() { "\r\n" } else { "\n" };
        request = request.on_confined(move |receipt| {
            use std::io::Write;
            let mut err = std::io::stderr().lock();
            for line in report::not_enforced_lines(receipt) {
                let _ = write!(err, "cordon: {line}{line_end}");
            }
            let _ = err.flush();
        });
    }
    if let Some(timeout) = args.timeout {
        request = request.timeout(timeout);
    }
    if let Some(limit) = args.output_limit {
        request = request.output_limit(limit);
    }
    // Only where a proxy resolves names: a hosts file is no concern of any other run.
    let proxied = (request.policy.as_ref()).is_some_and(|p| p.network.mode == NetworkMode::Proxy);
    if proxied {
        let resolver = cordon::network::Resolver::from_env()
            .with_context(|| format!("cannot read {}", cordon::network::HOSTS_FILE_ENV))?;
        request = request.network_resolver(resolver);
    }
    let snapshot = use_cached_snapshot(&mut request, !args.no_snapshot);
    Ok(Prepared::Run(Box::new(request), snapshot))
}

/// Runs the request. The command has its own session, so the terminal's signals reach only
/// cordon: the first SIGINT, SIGTERM or SIGHUP is passed on to the command's process group, so
/// it can stop cleanly; a second one cancels the run (SIGKILL to the group, exit 130).
async fn supervise(request: ExecRequest, json: bool) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{signal, SignalKind};
    let sandbox = match request.policy {
        Some(_) => Sandbox::locate()?,
        None => Sandbox::without_helper(),
    }
    .with_timeout(NO_TIMEOUT);
    let cancel = request.cancel.clone();
    let group = Arc::new(AtomicI32::new(0));
    for kind in [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ] {
        let mut stream = signal(kind).context("cannot install a signal handler")?;
        let (cancel, group) = (cancel.clone(), Arc::clone(&group));
        tokio::spawn(async move {
            let mut forwarded = false;
            while stream.recv().await.is_some() {
                let pgid = group.load(Ordering::SeqCst);
                if forwarded || pgid <= 0 {
                    cancel.cancel();
                    continue;
                }
                // SAFETY: kill with the command's process group id (its session leader's pid,
                // recorded at spawn) and a plain signal number.
                unsafe { libc::kill(-pgid, kind.as_raw_value()) };
                forwarded = true;
            }
        });
    }
    if request.policy.is_none() && !json {
        eprintln!("cordon: full-access profile: running without any sandbox");
    }
    let result = if json {
        sandbox.exec(request).await
    } else if pty_relay::wanted() {
        pty_relay::run(&sandbox, request, &group).await?
    } else {
        pass_through(&sandbox, request, &group).await?
    };
    let result = classify_result(result);
    if json {
        println!("{}", report::json(&result));
    } else {
        for line in report::stderr_lines(&result) {
            eprintln!("cordon: {line}");
        }
    }
    Ok(exit_code(result.cordon_exit_code()))
}

/// Streams the command's output to ours as it arrives; returns the runtime's result.
async fn pass_through(
    sandbox: &Sandbox,
    request: ExecRequest,
    group: &AtomicI32,
) -> anyhow::Result<ExecResult> {
    use std::io::Write;
    let mut events = sandbox.exec_streaming(request);
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    while let Some(event) = events.recv().await {
        match event {
            ExecEvent::Started { pid, .. } => {
                // The runtime makes the command a session (and process group) leader.
                group.store(i32::try_from(pid).unwrap_or(0), Ordering::SeqCst);
            }
            ExecEvent::Output { stream, bytes } => {
                // A closed stdout (`| head`) must not stop the command's supervision.
                let _ = match stream {
                    StreamKind::Stdout => out.write_all(&bytes).and_then(|_| out.flush()),
                    StreamKind::Stderr => err.write_all(&bytes).and_then(|_| err.flush()),
                };
            }
            // Printed once each, after the command's output, from the classified result.
            ExecEvent::Denied(_) => {}
            ExecEvent::Finished(result) => return Ok(*result),
        }
    }
    Err(anyhow!("the runtime ended without a result"))
}

/// `PORT[:HOSTPORT]` of `--publish`.
fn parse_publish(text: &str) -> Result<cordon::sandbox::policy::PublishedPort, String> {
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|&n| n != 0)
            .ok_or_else(|| format!("{p:?} is not a port from 1 to 65535"))
    };
    let (inside, host) = match text.split_once(':') {
        Some((inside, host)) => (port(inside)?, port(host)?),
        None => (port(text)?, port(text)?),
    };
    Ok(cordon::sandbox::policy::PublishedPort {
        port: inside,
        host_port: host,
    })
}

/// Command-line paths as profile entries, relative ones taken from the working directory.
fn absolute_entries(cwd: &Path, paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| cwd.join(p).to_string_lossy().into_owned())
        .collect()
}
