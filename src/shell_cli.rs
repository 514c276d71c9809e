//! `cordon shell -c SCRIPT`: the person's own command, run on purpose with full access in
//! their login shell (see `cordon::user_shell`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use cordon::exec::{EnvPolicy, StreamKind};
use cordon::session::capture_env;
use cordon::snapshot::{self, cache_dir, cached_snapshot, detect_shell};
use cordon::user_shell::{
    history_record, UserShell, UserShellEvent, UserShellRequest, ABORTED_BY_USER, EXIT_NOT_RUN,
};

use crate::units::{parse_bytes, parse_duration};

/// What the history record keeps of the output by default.
const DEFAULT_HISTORY_BUDGET: usize = 10 * 1024;

#[derive(clap::Args)]
pub struct ShellArgs {
    /// The command, as the person typed it.
    #[arg(short = 'c', value_name = "SCRIPT")]
    script: String,
    /// Working directory (default: the current directory).
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// The shell (default: $SHELL, then the passwd entry).
    #[arg(long, value_name = "PATH")]
    shell: Option<PathBuf>,
    /// Run `SHELL -lc` without the cached shell snapshot.
    #[arg(long)]
    no_snapshot: bool,
    /// Kill the command (and everything it started) after this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Print the events as JSON lines, then the history record, instead of the output.
    #[arg(long)]
    json: bool,
    /// Bytes of output the history record keeps (head and tail).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "10K")]
    history_budget: Option<usize>,
}

pub fn run(args: ShellArgs) -> anyhow::Result<ExitCode> {
    let invoking_dir = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = match &args.cwd {
        Some(dir) => invoking_dir.join(dir),
        None => invoking_dir,
    };
    let mut request = UserShellRequest::new("cli", args.script.clone(), cwd);
    request.shell = args.shell.clone();
    // The person's own command reads the person's own stdin (`cordon shell -c 'wc -l' < f`).
    request.stdin = cordon::exec::StdinSource::Inherit;
    // A year: the person decides when to stop their own command.
    request.timeout = Some(args.timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600)));
    let mut runner = UserShell::new();
    if !args.no_snapshot {
        runner = with_cached_snapshot(runner, args.shell.as_deref());
    }
    // Refuse before anything starts (and before a runtime exists).
    runner.prepare(&request)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let budget = args.history_budget.unwrap_or(DEFAULT_HISTORY_BUDGET);
    runtime.block_on(drive(runner, request, args.json, budget))
}

/// The cached snapshot of the person's shell, when there is one to trust (a failure only
/// means the login shell reads its startup files itself).
fn with_cached_snapshot(runner: UserShell, shell: Option<&std::path::Path>) -> UserShell {
    let attempt = || -> anyhow::Result<UserShell> {
        let dir = cache_dir(|k| std::env::var_os(k))
            .ok_or_else(|| anyhow::anyhow!("neither XDG_CACHE_HOME nor HOME names a directory"))?;
        if snapshot::bypass_in_progress(&dir) {
            anyhow::bail!("a running command can write the cache {dir:?}");
        }
        let shell = detect_shell(shell)?;
        let env = capture_env(&EnvPolicy::default())?;
        let cached = cached_snapshot(&dir, &shell, env, snapshot::DEFAULT_TIMEOUT)?;
        Ok(runner
            .clone()
            .with_snapshot(cached.snapshot, cached.content))
    };
    match attempt() {
        Ok(with) => with,
        Err(e) => {
            tracing::info!("user shell: running without a shell snapshot: {e:#}");
            runner
        }
    }
}

async fn drive(
    runner: UserShell,
    request: UserShellRequest,
    json: bool,
    budget: usize,
) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{signal, SignalKind};
    for kind in [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ] {
        let mut stream = signal(kind).context("cannot install a signal handler")?;
        let cancel = request.cancel.clone();
        tokio::spawn(async move {
            if stream.recv().await.is_some() {
                cancel.cancel();
            }
        });
    }
    let command = request.command.clone();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let printer = tokio::spawn(async move {
        let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
        while let Some(event) = rx.recv().await {
            if json {
                let line = serde_json::to_string(&event).unwrap_or_default();
                let _ = writeln!(out, "{line}");
                continue;
            }
            match event {
                // A closed stdout (`| head`) must not stop the command.
                UserShellEvent::OutputDelta { stream, chunk, .. } => {
                    let _ = match stream {
                        StreamKind::Stdout => out.write_all(&chunk).and_then(|_| out.flush()),
                        StreamKind::Stderr => err.write_all(&chunk).and_then(|_| err.flush()),
                    };
                }
                UserShellEvent::Begin { .. } | UserShellEvent::End(_) => {}
            }
        }
    });
    let end = runner.run(request, tx).await?;
    let _ = printer.await;
    if json {
        let record =
            serde_json::json!({"event": "history", "text": history_record(&command, &end, budget)});
        println!("{record}");
    }
    if end.exit_code != EXIT_NOT_RUN {
        return Ok(ExitCode::from(u8::try_from(end.exit_code).unwrap_or(125)));
    }
    let last = end.stderr.lines().last().unwrap_or_default();
    if !json {
        eprintln!("cordon: {last}");
    }
    Ok(ExitCode::from(if last == ABORTED_BY_USER {
        130
    } else {
        125
    }))
}
