//! Throughput of the supervised runtime, each figure next to a reference measured in the same
//! run on the same machine.
//!
//! ```text
//! cargo build --release -p cordon-runtime --bins --examples
//! target/x86_64-unknown-linux-gnu/release/examples/exec_bench [--helper PATH] [--execs N] [--gib N]
//! ```
//!
//! Without `--helper` it uses `$CORDON_HELPER`, else the `cordon` binary next to the examples
//! directory (acting as its own helper).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cordon::exec::{ExecRequest, Outcome, Sandbox};
use cordon::helper::Helper;
use cordon::sandbox::SandboxPolicy;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Options {
    helper: Helper,
    execs: usize,
    gib: u64,
}

fn options() -> Result<Options, BoxError> {
    let mut helper = None;
    let mut execs = 400;
    let mut gib = 1;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--helper" => helper = Some(Helper::at(value()?)),
            "--execs" => execs = value()?.parse()?,
            "--gib" => gib = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let helper = match helper {
        Some(h) => h,
        None if std::env::var_os(cordon::helper::HELPER_ENV).is_some() => Helper::locate()?,
        None => {
            let exe = std::env::current_exe()?;
            let dir = exe
                .parent()
                .and_then(|examples| examples.parent())
                .ok_or("cannot find the target directory")?;
            Helper::cordon_binary(dir.join("cordon"))
        }
    };
    Ok(Options { helper, execs, gib })
}

fn policy(writable: &str) -> Result<SandboxPolicy, BoxError> {
    Ok(SandboxPolicy::from_json(&format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{writable:?}]}},
            "network":{{"mode":"denied","unix_sockets":"deny"}},
            "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#
    ))?)
}

/// Peak resident set size of this process, in MiB.
fn vm_hwm_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

/// Resets the peak RSS counter (Linux 4.0+), so each measurement starts from now.
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

async fn library_execs(
    sandbox: &Sandbox,
    request: &ExecRequest,
    total: usize,
    concurrency: usize,
) -> Result<f64, BoxError> {
    let started = Instant::now();
    let per_worker = total / concurrency;
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let sandbox = sandbox.clone();
        let request = request.clone();
        workers.push(tokio::spawn(async move {
            for _ in 0..per_worker {
                let result = sandbox.exec(request.clone()).await;
                if result.outcome != Outcome::Success {
                    return Err(format!("exec failed: {:?}", result.outcome));
                }
            }
            Ok(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    Ok((per_worker * concurrency) as f64 / started.elapsed().as_secs_f64())
}

/// Execs per second of `one_exec` run `total` times over `concurrency` threads.
fn threaded_execs(
    total: usize,
    concurrency: usize,
    one_exec: impl Fn() -> Result<(), String> + Clone + Send + 'static,
) -> Result<f64, BoxError> {
    let started = Instant::now();
    let per_worker = total / concurrency;
    let threads: Vec<_> = (0..concurrency)
        .map(|_| {
            let one_exec = one_exec.clone();
            std::thread::spawn(move || (0..per_worker).try_for_each(|_| one_exec()))
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "thread panicked")??;
    }
    Ok((per_worker * concurrency) as f64 / started.elapsed().as_secs_f64())
}

/// `std::process::Command` running `true`; with `setsid`, the same `pre_exec` step the runtime
/// uses, which makes std fork instead of using `posix_spawn`.
fn plain_execs(total: usize, concurrency: usize, setsid: bool) -> Result<f64, BoxError> {
    use std::os::unix::process::CommandExt;
    threaded_execs(total, concurrency, move || {
        let mut command = Command::new("true");
        if setsid {
            // SAFETY: setsid is async-signal-safe.
            unsafe {
                command.pre_exec(|| {
                    libc::setsid();
                    Ok(())
                });
            }
        }
        command.status().map(drop).map_err(|e| e.to_string())
    })
}

/// `std::process::Command` running the helper exactly as the library launches it (the same
/// command line: policy, cwd, status socket, the observer's light scope), reading its status
/// records to their end as the library does, without the library's supervision around it: the
/// reference the library's figure is held to, since both pay for the helper.
fn plain_launch_execs(
    total: usize,
    concurrency: usize,
    helper: Helper,
    policy: SandboxPolicy,
    cwd: std::path::PathBuf,
) -> Result<f64, BoxError> {
    let options = cordon::helper::LaunchOptions {
        observe: Some(cordon::sandbox::observe::ObserveScope::Light),
        ..Default::default()
    };
    threaded_execs(total, concurrency, move || {
        let mut launch = helper
            .command_with_options(&policy, &cwd, &["true".into()], &[], options)
            .map_err(|e| e.to_string())?;
        let mut child = launch
            .command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        drop(launch.command);
        launch
            .status
            .read_after_spawn()
            .map_err(|e| e.to_string())?;
        let status = child.wait().map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("the helper's launch failed: {status}"))
        }
    })
}

fn mib_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / elapsed.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let opts = options()?;
    let tmp = std::env::temp_dir().canonicalize()?;
    let tmp = tmp.to_str().ok_or("temp dir is not UTF-8")?;
    let policy = policy(tmp)?;
    let sandbox = Sandbox::new(opts.helper.clone()).with_timeout(Duration::from_secs(600));
    let confined_true = ExecRequest::sandboxed(["true"], tmp, policy.clone());
    let direct_true = ExecRequest::unsandboxed(["true"], tmp);
    println!("helper: {}", opts.helper.program().display());
    println!("execs of `true` per second ({} per figure):", opts.execs);
    // Warm the page cache and the helper binary before timing.
    library_execs(&sandbox, &confined_true, 8, 1).await?;
    for concurrency in [1, 8] {
        let confined = library_execs(&sandbox, &confined_true, opts.execs, concurrency).await?;
        let direct = library_execs(&sandbox, &direct_true, opts.execs, concurrency).await?;
        let execs = opts.execs;
        let reference =
            tokio::task::spawn_blocking(move || plain_execs(execs, concurrency, false)).await??;
        let forked =
            tokio::task::spawn_blocking(move || plain_execs(execs, concurrency, true)).await??;
        let (helper, launch_policy, cwd) = (
            opts.helper.clone(),
            policy.clone(),
            std::path::PathBuf::from(tmp),
        );
        let helper_line = tokio::task::spawn_blocking(move || {
            plain_launch_execs(execs, concurrency, helper, launch_policy, cwd)
        })
        .await??;
        println!(
            "  concurrency {concurrency}: library+helper {confined:8.1}/s | std::process::Command running the same helper launch {helper_line:8.1}/s (ratio {:.3}; target >= 0.85) | library unsandboxed {direct:8.1}/s | std::process::Command running true {reference:8.1}/s (with a setsid pre_exec: {forked:8.1}/s)",
            confined / helper_line
        );
    }

    let bytes = opts.gib << 30;
    println!("draining {} GiB of output:", opts.gib);
    reset_hwm();
    let before = vm_hwm_mib();
    let request = ExecRequest::sandboxed(
        ["head", "-c", &bytes.to_string(), "/dev/zero"],
        tmp,
        policy.clone(),
    );
    let started = Instant::now();
    let result = sandbox.exec(request).await;
    let elapsed = started.elapsed();
    if result.outcome != Outcome::Success || result.stdout.total != bytes {
        return Err(format!("drain run failed: {:?}", result.outcome).into());
    }
    println!(
        "  library+helper (1 MiB cap):     {:8.1} MiB/s, peak RSS {} MiB (was {} MiB before)",
        mib_per_s(bytes, elapsed),
        vm_hwm_mib(),
        before
    );
    drop(result);

    let head_arg = bytes.to_string();
    let reference =
        tokio::task::spawn_blocking(move || -> std::io::Result<(Duration, Duration)> {
            let started = Instant::now();
            Command::new("head")
                .args(["-c", &head_arg, "/dev/zero"])
                .stdout(Stdio::null())
                .status()?;
            let to_null = started.elapsed();
            let started = Instant::now();
            let mut child = Command::new("head")
                .args(["-c", &head_arg, "/dev/zero"])
                .stdout(Stdio::piped())
                .spawn()?;
            let mut pipe = child.stdout.take().ok_or(std::io::ErrorKind::BrokenPipe)?;
            let mut buf = vec![0u8; 64 * 1024];
            while pipe.read(&mut buf)? > 0 {}
            child.wait()?;
            Ok((to_null, started.elapsed()))
        })
        .await??;
    println!(
        "  reference: head > /dev/null     {:8.1} MiB/s",
        mib_per_s(bytes, reference.0)
    );
    println!(
        "  reference: std pipe read+discard {:7.1} MiB/s",
        mib_per_s(bytes, reference.1)
    );
    Ok(())
}
