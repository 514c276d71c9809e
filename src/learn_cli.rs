//! `cordon learn`: run a command confined by a base profile, with the seccomp observer, and
//! write the smallest profile extending the base that allows what it was refused.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context};
use cordon::classify::{classify_result, Denial};
use cordon::exec::{ExecRequest, Outcome, Sandbox};
use cordon::learn::{render, Base};
use cordon::profile::{PermissionProfile, Preset, ResolveContext};

use crate::units::parse_duration;

#[derive(clap::Args)]
pub struct LearnArgs {
    /// The base: a preset (read-only, workspace-write) or a .toml/.json profile file.
    #[arg(short = 'p', long = "profile", value_name = "PRESET|FILE")]
    profile: Option<String>,
    /// Write the learnt profile here (default: print it on stdout).
    #[arg(short = 'o', long = "output", value_name = "PROFILE.toml")]
    output: Option<PathBuf>,
    /// Working directory of the command (default: the current directory).
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Kill the command (and everything it started) after this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// The command and its arguments.
    #[arg(last = true, value_name = "PROGRAM [ARGS]...")]
    argv: Vec<OsString>,
}

/// Runs the command, prints its output, then writes the profile; exits with the command's
/// code (125 when cordon itself failed).
pub fn run(args: LearnArgs) -> anyhow::Result<ExitCode> {
    if args.argv.is_empty() {
        return Err(anyhow!(
            "no command given (usage: cordon learn [-p BASE] [-o PROFILE.toml] -- PROGRAM [ARGS...])"
        ));
    }
    let invoking_dir = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = match &args.cwd {
        Some(dir) => invoking_dir.join(dir),
        None => invoking_dir.clone(),
    };
    let spec = args.profile.as_deref().unwrap_or("workspace-write");
    let profile = PermissionProfile::load(spec)?;
    let base = if Preset::from_name(spec).is_some() {
        Base::Preset(spec.to_owned())
    } else if spec.ends_with(".toml") {
        Base::File(std::fs::read_to_string(spec).with_context(|| format!("cannot read {spec}"))?)
    } else {
        return Err(anyhow!(
            "learn extends a preset or a .toml profile; {spec} is neither"
        ));
    };
    let resolved = profile.resolve(&ResolveContext::new(&cwd).with_invoking_dir(&invoking_dir))?;
    let policy = resolved
        .policy
        .clone()
        .ok_or_else(|| anyhow!("{spec} runs without a sandbox: there is nothing to learn"))?;
    let mut request = ExecRequest::new(args.argv.clone(), &resolved.cwd, Some(policy.clone()))
        // Learning needs kernel evidence: the command's text would be the command's word.
        .observe(true);
    if let Some(timeout) = args.timeout {
        request = request.timeout(timeout);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let sandbox = Sandbox::locate()?.with_timeout(args.timeout.unwrap_or(crate::NO_TIMEOUT));
    let result = classify_result(runtime.block_on(sandbox.exec(request)));
    let _ = std::io::stdout().write_all(&result.stdout.bytes);
    let _ = std::io::stderr().write_all(&result.stderr.bytes);
    if let Outcome::SetupError { message, .. } | Outcome::Rejected { reason: message } =
        &result.outcome
    {
        return Err(anyhow!("the command could not run: {message}"));
    }
    // Everything the kernel refused, whether or not the command got past it: a refusal it
    // survived may still be a feature it did without.
    let denials: Vec<Denial> = match (&result.kernel_denials, &result.outcome) {
        (Some(kernel), _) => kernel.clone(),
        (None, Outcome::Denied { denials, .. }) => denials.clone(),
        (None, _) => Vec::new(),
    };
    let command = args
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let text = render(&base, &policy, &denials, &command);
    match &args.output {
        Some(path) => {
            std::fs::write(path, &text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "cordon: learnt {} denial(s); wrote {}",
                denials.len(),
                path.display()
            );
        }
        None => print!("{text}"),
    }
    for d in &denials {
        eprintln!("cordon: {d}");
    }
    Ok(ExitCode::from(
        u8::try_from(result.cordon_exit_code()).unwrap_or(125),
    ))
}
