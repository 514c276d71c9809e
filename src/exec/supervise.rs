//! One run, from validation to the final kill. See the parent module for the guarantees.

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon_sandbox::confine::describe_errno;
use cordon_sandbox::status::{read_records_with_fds, StatusRecord, TAG_SECCOMP_LISTENER};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::capture::{CappedBuffer, Captured};
use super::env::PreparedEnv;
use super::limits::{LimitKind, LimitPlan, Limits};
use super::outcome::{ExecResult, Outcome, ParentStep, SandboxMode, SetupStep, StreamKind};
use super::supervisor_guard::guard_supervisor;
use super::{Config, ExecEvent, ExecRequest, StdinSource};
use crate::evidence::observer::{self, Observer};

/// Size of one read from a pipe; the pipe buffer is 64 KiB by default.
const READ_CHUNK: usize = 64 * 1024;

/// How supervision ended, before the status records are consulted.
enum Ended {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
    WaitFailed(io::Error),
}

pub(super) async fn run(
    config: &Config,
    mut request: ExecRequest,
    events: Option<mpsc::Sender<ExecEvent>>,
) -> ExecResult {
    let started = Instant::now();
    let mut result = ExecResult {
        outcome: Outcome::Success,
        sandbox: if request.policy.is_some() {
            SandboxMode::Helper
        } else {
            SandboxMode::None
        },
        argv: request.display_argv().to_vec(),
        cwd: request.cwd.clone(),
        policy: request.policy.clone(),
        pid: None,
        exit_code: None,
        signal: None,
        records: Vec::new(),
        receipt: None,
        stdout: Captured::default(),
        stderr: Captured::default(),
        output: Captured::default(),
        duration: Duration::ZERO,
        dropped_env: Vec::new(),
        events_dropped_bytes: 0,
        network_denials: Vec::new(),
        limits: Vec::new(),
        kernel_denials: None,
        light_kernel_denials: None,
        audit_denials: None,
    };
    let mut env = match validate(config, &request) {
        Ok(env) => env,
        Err(reason) => {
            result.outcome = Outcome::Rejected { reason };
            return result;
        }
    };
    // Before the spawn, so that a policy the proxy cannot serve runs nothing. The service
    // lives until the end of this function: the listeners in the sandbox are served exactly
    // as long as the run lasts.
    let network = match &request.policy {
        Some(policy) => match crate::network::Service::for_policy(policy, &request.network) {
            Ok(service) => {
                set_env(&mut env.vars, crate::network::env_for(policy));
                service.map(Arc::new)
            }
            Err(reason) => {
                result.outcome = Outcome::Rejected { reason };
                return result;
            }
        },
        None => None,
    };
    let _stop_network = network.clone().map(StopOnDrop);
    result.dropped_env = env.dropped.clone();
    if request.cancel.is_cancelled() {
        result.outcome = Outcome::Cancelled;
        return result;
    }
    // Made before the spawn, removed (with anything left in it) when this function returns.
    let limit_plan = match LimitPlan::new(&request.limits) {
        Ok(plan) => plan,
        Err(e) => {
            result.outcome = Outcome::Rejected {
                reason: e.to_string(),
            };
            return result;
        }
    };
    result.limits = limit_plan.receipts.clone();

    let (command, status_pipe, passed) = match build_command(config, &request, &env, &limit_plan) {
        Ok(built) => built,
        Err(e) => {
            result.outcome = spawn_failure(&e, &result);
            return result;
        }
    };
    let mut command = tokio::process::Command::from(command);
    // Joined before the spawn, so that no record of the run is missed.
    let audit_group = request
        .policy
        .as_ref()
        .and_then(|_| crate::evidence::audit::AuditGroup::join());
    let spawned = command.spawn();
    // The parent's copies of the child's stdio (a PTY slave, a stdin pipe's read end) go with
    // the command, so a terminal hangs up when the command's last holder exits.
    drop(command);
    // Whatever happened, the parent's copy of the write end must go now, or end of file never
    // arrives on the status pipe.
    let status_read = status_pipe.map(|p| p.into_read_end_and_hold());
    drop(passed);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            result.outcome = spawn_failure(&e, &result);
            result.duration = started.elapsed();
            return result;
        }
    };
    let pid = child.id();
    result.pid = pid;
    let audit = audit_group
        .zip(pid)
        .and_then(|(group, pid)| group.listen_for(pid));
    let group = ProcessGroup::new(pid);

    // A blocking read is fine: the status pipe reaches end of file at the helper's execve or
    // exit, and the helper does neither fork nor wait on anything we control.
    let hook = request.on_confined.clone();
    let served = network.clone();
    let watch = request.policy.clone().map(|policy| Watch {
        policy,
        events: events.clone(),
    });
    let status_task = status_read.map(|(file, hold)| {
        tokio::task::spawn_blocking(move || read_status(file, hold, hook, served, watch))
    });
    let _stdin_task = match (&request.stdin, child.stdin.take()) {
        (StdinSource::Bytes(bytes), Some(mut pipe)) => {
            let bytes = bytes.clone();
            Some(AbortOnDrop(tokio::spawn(async move {
                // A command that exits without reading everything closes the pipe: not an error.
                let _ = pipe.write_all(&bytes).await;
                let _ = pipe.shutdown().await;
            })))
        }
        _ => None,
    };
    if let (Some(tx), Some(pid)) = (&events, pid) {
        let _ = tx
            .send(ExecEvent::Started {
                pid,
                argv: request.display_argv().to_vec(),
            })
            .await;
    }
    let stop_drain = CancellationToken::new();
    // If this future is dropped mid-run, the drain must not go on reading pipes that an
    // escaped descendant may hold open forever.
    let _stop_drain_on_drop = stop_drain.clone().drop_guard();
    let limit = request.output_limit.unwrap_or(config.output_limit);
    let consumer = Arc::new(ConsumerState::default());
    // From here on only the master: the parent's copy of the slave would keep the terminal
    // from hanging up when the command exits.
    let tty = request.tty.take();
    let is_tty = tty.is_some();
    let (out_reader, err_reader): (Option<Reader>, Option<Reader>) = match &tty {
        Some(pty) => match super::pty::AsyncStream::new(&pty.master) {
            Ok(stream) => (Some(Box::new(stream)), None),
            Err(e) => {
                group.kill();
                result.outcome = Outcome::SetupError {
                    step: SetupStep::Parent(ParentStep::SpawnHelper),
                    errno: e.raw_os_error(),
                    message: format!("cannot read the command's terminal: {e}"),
                };
                result.duration = started.elapsed();
                return result;
            }
        },
        None => (
            child.stdout.take().map(|r| Box::new(r) as Reader),
            child.stderr.take().map(|r| Box::new(r) as Reader),
        ),
    };
    // The reader has its own duplicate of the master; the caller keeps its own copy of it.
    drop(tty);
    let mut drain_task = tokio::spawn(drain(
        out_reader,
        err_reader,
        limit,
        events,
        request.lossless_events.then(|| Arc::clone(&consumer)),
        stop_drain.clone(),
    ));

    let mut drained = None;
    let timeout = request.timeout.unwrap_or(config.timeout);
    // Exit first: a child that has already exited is reported as it ended, even if the
    // timeout or the token fired at the same moment.
    let ended = tokio::select! {
        biased;
        status = child.wait() => match status {
            Ok(status) => Ended::Exited(status),
            Err(e) => Ended::WaitFailed(e),
        },
        _ = request.cancel.cancelled() => Ended::Cancelled,
        _ = tokio::time::sleep(timeout) => Ended::TimedOut,
    };

    let mut final_status = match &ended {
        Ended::Exited(status) => {
            // Let readers collect what the command wrote last; a background descendant that
            // keeps the pipe open only costs the grace period. A lossless stream waits as long
            // as its receiver is still taking output, so a slow reader loses nothing.
            loop {
                join_within(&mut drain_task, &mut drained, config.grace).await;
                if drained.is_some() || !consumer.busy.load(Ordering::SeqCst) {
                    break;
                }
            }
            Some(*status)
        }
        _ => None,
    };
    group.kill();
    if final_status.is_none() {
        // Killed: reap it, but never wait beyond the grace period (a process stuck in the
        // kernel can ignore SIGKILL for a while; tokio reaps it later).
        if let Ok(Ok(status)) = tokio::time::timeout(config.grace, child.wait()).await {
            final_status = Some(status);
        }
    }
    // After the kill the pipes close as soon as the group is gone; give the readers that long,
    // then abandon whatever still holds them (a descendant that left the group).
    join_within(&mut drain_task, &mut drained, config.grace).await;
    stop_drain.cancel();
    let drained = match drained {
        Some(drained) => drained,
        None => drain_task.await.unwrap_or_default(),
    };
    let (records, observer) = match status_task {
        Some(task) => match tokio::time::timeout(config.grace, task).await {
            Ok(Ok((records, observer))) => (Some(records), observer),
            Ok(Err(join)) => (Some(Err(io::Error::other(join.to_string()))), None),
            Err(_) => (None, None),
        },
        None => (None, None),
    };
    // The helper (the namespace layer's monitor) removes its placeholders when the sandbox
    // ends; where it could not (its user namespace maps no owner of the directory: root's run
    // in another user's directory), or was killed first, they go now, from out here.
    if let Some(Ok(records)) = &records {
        let placeholders = records.iter().find_map(|r| match r {
            StatusRecord::Confined(receipt) => Some(&receipt.placeholders),
            _ => None,
        });
        for path in placeholders.into_iter().flatten() {
            cordon_sandbox::namespaces::mounts::remove_leftover_placeholder(path);
        }
    }
    if let (Some(audit), Some(policy)) = (audit, request.policy.clone()) {
        let receipt = records
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .and_then(|r| {
                r.iter().find_map(|record| match record {
                    StatusRecord::Confined(receipt) => Some(receipt.clone()),
                    _ => None,
                })
            });
        result.audit_denials =
            tokio::task::spawn_blocking(move || audit.finish(&policy, receipt.as_ref()))
                .await
                .ok();
    }
    if let Some(observer) = observer {
        // The group is dead: the thread sees its listener hang up, or stops at its next look.
        let seen = tokio::task::spawn_blocking(move || observer.finish())
            .await
            .ok();
        match observer_scope_for(&request) {
            Some(cordon_sandbox::observe::ObserveScope::Light) => {
                result.light_kernel_denials = seen
            }
            _ => result.kernel_denials = seen,
        }
    }

    result.stdout = drained.stdout.finish();
    result.stderr = drained.stderr.finish();
    if is_tty {
        // A terminal has one stream, where the command's error messages are too: it is what
        // the classifier must read as it reads stderr.
        result.stderr = result.stdout.clone();
    }
    result.output = drained.output.finish();
    result.events_dropped_bytes = drained.events_dropped_bytes;
    if let Some(status) = final_status {
        result.exit_code = status.code();
        result.signal = status.signal();
    }
    result.outcome = decide(&ended, records, &mut result);
    if let Some(network) = &network {
        result.network_denials = network.finish();
    }
    result.outcome = limit_outcome(result.outcome, &request.limits, &limit_plan);
    result.duration = started.elapsed();
    result
}

/// Sets `changes` over `vars`, keeping them sorted by name.
fn set_env(
    vars: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>,
    changes: Vec<(std::ffi::OsString, std::ffi::OsString)>,
) {
    for (name, value) in changes {
        match vars.binary_search_by(|(k, _)| k.cmp(&name)) {
            Ok(i) => vars[i].1 = value,
            Err(i) => vars.insert(i, (name, value)),
        }
    }
}

/// Stops the network service when the run's future ends or is dropped.
struct StopOnDrop(Arc<crate::network::Service>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// `limit_exceeded` in place of a failure, signal death or timeout that a limit caused, as
/// the kernel's counters (cgroup) or the limit's own signal (rlimit) show.
fn limit_outcome(outcome: Outcome, limits: &Limits, plan: &LimitPlan) -> Outcome {
    let code = outcome.exit_code();
    let hit = match &outcome {
        Outcome::Failed { .. } | Outcome::Signaled { .. } | Outcome::TimedOut => {
            plan.cgroup.as_ref().and_then(|c| c.exceeded())
        }
        _ => None,
    };
    // The limit's own signal killed the command, or a shell reported (as 128+N) that it
    // killed the command's child.
    let signal = match outcome {
        Outcome::Signaled { signal } => Some(signal),
        Outcome::Failed { code } if code > 128 => Some(code - 128),
        _ => None,
    };
    let by_signal = match signal {
        Some(libc::SIGXCPU) if limits.cpu_time.is_some() => Some(LimitKind::CpuTime),
        Some(libc::SIGXFSZ) if limits.file_size.is_some() => Some(LimitKind::FileSize),
        _ => None,
    };
    match hit.or(by_signal) {
        Some(limit) => Outcome::LimitExceeded { limit, code },
        None => outcome,
    }
}

/// The observer's scope for `request`: as asked (or the default), and never none when the
/// policy lists unix sockets: the observer is what connects those.
fn observer_scope_for(request: &ExecRequest) -> Option<cordon_sandbox::observe::ObserveScope> {
    let listed = request
        .policy
        .as_ref()
        .is_some_and(|p| !p.network.unix_socket_allow.is_empty());
    crate::evidence::observer_scope(request.observe)
        .or(listed.then_some(cordon_sandbox::observe::ObserveScope::Light))
}

/// What the seccomp observer needs from the request, should the helper hand it a listener.
struct Watch {
    policy: cordon_sandbox::SandboxPolicy,
    events: Option<mpsc::Sender<ExecEvent>>,
}

/// Reads the helper's records until `execve` or its exit. The `confined` record goes to `hook`
/// first; then, in observer mode, the observer starts on the listener that came before it;
/// and only then is `hold` closed, which lets a helper that waits on it go on.
fn read_status(
    file: std::fs::File,
    hold: Option<std::os::fd::OwnedFd>,
    hook: Option<super::ConfinedHook>,
    network: Option<Arc<crate::network::Service>>,
    watch: Option<Watch>,
) -> (io::Result<Vec<StatusRecord>>, Option<Observer>) {
    let mut hold = hold;
    let mut refusals = None;
    let mut listener = None;
    let mut observer = None;
    let records = read_records_with_fds(std::os::fd::OwnedFd::from(file), |record, mut fds| {
        match record {
            StatusRecord::Observer { refusals: program } => {
                refusals = Some(observer::refusal_program(program));
            }
            StatusRecord::Fds { tag, .. } if tag == TAG_SECCOMP_LISTENER => {
                listener = fds.pop();
            }
            StatusRecord::Fds { tag, .. } => {
                if let Some(network) = &network {
                    network.serve(tag, fds);
                }
            }
            StatusRecord::Confined(receipt) => {
                // Without user namespaces, under `report`, the helper runs with the network
                // denied instead: nothing is served, and published ports must not stay open
                // on the host.
                if let Some(network) = &network {
                    if !receipt
                        .layers
                        .contains(&cordon_sandbox::status::Layer::NetNamespace)
                    {
                        network.stop();
                    }
                }
                if let Some(hook) = &hook {
                    hook.call(receipt);
                }
                if let (Some(watch), Some(listener), Some(refusals)) =
                    (&watch, listener.take(), refusals.take())
                {
                    observer = start_observer(listener, watch, receipt, refusals);
                }
                hold = None;
            }
            _ => {}
        }
    });
    // However reading ended (setup error, unreadable record), a held helper must not wait on.
    drop(hold);
    (records, observer)
}

/// Starts the observer; a thread that cannot start leaves the listener closed, and the
/// command's watched calls then fail (the kernel answers `ENOSYS`), refusals included.
fn start_observer(
    listener: std::os::fd::OwnedFd,
    watch: &Watch,
    receipt: &cordon_sandbox::status::ConfinementReceipt,
    refusals: Vec<cordon_sandbox::bpf::sock_filter>,
) -> Option<Observer> {
    let judge = observer::Judge {
        policy: watch.policy.clone(),
        receipt: receipt.clone(),
        refusals,
    };
    let events = watch.events.clone();
    let started = Observer::start(listener, judge, move |denial| {
        if let Some(tx) = &events {
            // Never block the observer (the command waits on it): the result has them all.
            let _ = tx.try_send(ExecEvent::Denied(denial.clone()));
        }
    });
    match started {
        Ok(observer) => Some(observer),
        Err(e) => {
            tracing::warn!("cannot start the seccomp observer: {e}");
            None
        }
    }
}

/// Waits up to `limit` for the drain, storing its result; a `JoinHandle` must not be polled
/// again once it has produced its output.
async fn join_within(task: &mut JoinHandle<Drained>, slot: &mut Option<Drained>, limit: Duration) {
    if slot.is_none() {
        if let Ok(joined) = tokio::time::timeout(limit, &mut *task).await {
            *slot = Some(joined.unwrap_or_default());
        }
    }
}

/// Checks everything that can be checked before spawning; the error is the rejection reason.
fn validate(config: &Config, request: &ExecRequest) -> Result<PreparedEnv, String> {
    if request.argv.is_empty() {
        return Err("the command is empty (argv has no program)".into());
    }
    if request
        .argv
        .iter()
        .any(|a| a.as_encoded_bytes().contains(&0))
    {
        return Err("an argument contains a NUL byte".into());
    }
    match std::fs::metadata(&request.cwd) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(format!(
                "working directory {:?} is not a directory",
                request.cwd
            ))
        }
        Err(e) => {
            return Err(format!(
                "working directory {:?} is not usable: {e}",
                request.cwd
            ))
        }
    }
    crate::helper::fd_floor(&request.pass_fds).map_err(|e| e.to_string())?;
    if let Some(policy) = &request.policy {
        policy
            .validate()
            .map_err(|e| format!("invalid sandbox policy: {e}"))?;
        if config.helper.is_none() {
            return Err(
                "this runtime has no sandbox helper, so it cannot run a sandboxed request".into(),
            );
        }
    }
    request
        .env
        .prepare_from_process()
        .map_err(|e| e.to_string())
}

/// The command to spawn; when confined, the helper's status pipe; unconfined, the copies of
/// passed descriptors to close right after the spawn (confined, the status pipe holds them).
type Built = (
    std::process::Command,
    Option<crate::helper::StatusPipe>,
    Vec<std::os::fd::OwnedFd>,
);

/// The command to spawn, see [`Built`].
fn build_command(
    config: &Config,
    request: &ExecRequest,
    env: &PreparedEnv,
    limits: &LimitPlan,
) -> io::Result<Built> {
    let (mut command, status, passed) = match (&request.policy, &config.helper) {
        (Some(policy), Some(helper)) => {
            let options = crate::helper::LaunchOptions {
                held: request.on_confined.is_some(),
                observe: observer_scope_for(request),
            };
            let launch = helper
                .command_with_options(
                    policy,
                    &request.cwd,
                    &request.argv,
                    &request.pass_fds,
                    options,
                )
                .map_err(|e| match e {
                    crate::helper::HelperError::Pipe(io) => io,
                    other => io::Error::other(other.to_string()),
                })?;
            (launch.command, Some(launch.status), Vec::new())
        }
        _ => {
            let mut command = std::process::Command::new(&request.argv[0]);
            command.args(&request.argv[1..]).current_dir(&request.cwd);
            // The helper arranges its own death with the parent; unconfined, we do it here.
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: prctl and getppid are async-signal-safe and touch no memory of ours.
            unsafe {
                command.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    // The parent may have died before the prctl took effect.
                    if libc::getppid() != parent {
                        return Err(io::Error::from_raw_os_error(libc::ESRCH));
                    }
                    Ok(())
                });
            }
            let floor = crate::helper::fd_floor(&request.pass_fds)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
            let passed = crate::helper::install_passed_fds(&mut command, &request.pass_fds, floor)?;
            // The helper launch does the same (`Helper::command_with_fds`).
            let core_limit = guard_supervisor().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot keep this process's memory from the command (not dumpable, no core dump): {e}"),
                )
            })?;
            // SAFETY: the closure calls only getrlimit and setrlimit, which are
            // async-signal-safe, and allocates nothing.
            unsafe {
                command.pre_exec(move || core_limit.restore_in_child());
            }
            (command, None, passed)
        }
    };
    command
        .env_clear()
        .envs(env.vars.iter().map(|(k, v)| (k, v)));
    match &request.tty {
        Some(pty) => {
            command
                .stdin(Stdio::from(pty.slave.try_clone()?))
                .stdout(Stdio::from(pty.slave.try_clone()?))
                .stderr(Stdio::from(pty.slave.try_clone()?));
        }
        None => {
            command
                .stdin(match &request.stdin {
                    StdinSource::Null => Stdio::null(),
                    StdinSource::Bytes(_) => Stdio::piped(),
                    StdinSource::Inherit => Stdio::inherit(),
                    StdinSource::Pipe(pipe) => Stdio::from(pipe.0.try_clone()?),
                })
                .stdout(if request.inherit_stdout {
                    Stdio::inherit()
                } else {
                    Stdio::piped()
                })
                .stderr(Stdio::piped());
        }
    }
    let cgroup_fds = limits
        .cgroup
        .as_ref()
        .map(|c| c.procs_fds())
        .unwrap_or_default();
    let rlimits = limits.rlimits.clone();
    if !cgroup_fds.is_empty() || !rlimits.is_empty() {
        // SAFETY: apply_in_child only calls write, getrlimit and setrlimit, which are
        // async-signal-safe, on descriptors open in the child and on the captured vectors,
        // which were allocated before the fork.
        unsafe {
            command.pre_exec(move || super::limits::apply_in_child(&cgroup_fds, &rlimits));
        }
    }
    let take_terminal = request.tty.is_some();
    // SAFETY: setsid and ioctl are async-signal-safe and touch no memory of ours. setsid makes
    // the child the leader of a new session and process group, so one killpg reaches the whole
    // tree and the caller's terminal's signals do not. With a PTY, the new session takes the
    // slave (already on fd 0) as its controlling terminal here, before the helper confines
    // anything: the seccomp rules then need not allow TIOCSCTTY, and every process the
    // command starts inherits the terminal (the namespace layer's init keeps the session).
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if take_terminal && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok((command, status, passed))
}

/// The outcome when nothing could be spawned.
fn spawn_failure(e: &io::Error, result: &ExecResult) -> Outcome {
    let errno = e.raw_os_error();
    let is_exec_errno = matches!(
        errno,
        Some(
            libc::ENOENT
                | libc::ENOTDIR
                | libc::EACCES
                | libc::EPERM
                | libc::ENOEXEC
                | libc::ELOOP
                | libc::ETXTBSY
                | libc::EISDIR
                | libc::ENAMETOOLONG
        )
    );
    match (result.sandbox, errno) {
        // Unconfined, the program itself failed to execute.
        (SandboxMode::None, Some(errno)) if is_exec_errno => Outcome::ExecError {
            errno,
            message: describe_errno(errno),
        },
        (SandboxMode::None, _) => Outcome::SetupError {
            step: SetupStep::Parent(ParentStep::SpawnHelper),
            errno,
            message: format!("cannot start {:?}: {e}", result.argv[0]),
        },
        (SandboxMode::Helper, _) => Outcome::SetupError {
            step: SetupStep::Parent(ParentStep::SpawnHelper),
            errno,
            message: format!("cannot start the sandbox helper: {e}"),
        },
    }
}

/// The outcome from how supervision ended and what the helper reported. Fills the records and
/// receipt into `result`.
fn decide(
    ended: &Ended,
    records: Option<io::Result<Vec<StatusRecord>>>,
    result: &mut ExecResult,
) -> Outcome {
    let records = match records {
        Some(Ok(records)) => Some(records),
        Some(Err(e)) => {
            if matches!(ended, Ended::Exited(_)) {
                return Outcome::SetupError {
                    step: SetupStep::Parent(ParentStep::StatusPipe),
                    errno: e.raw_os_error(),
                    message: format!("cannot read the helper's status: {e}"),
                };
            }
            None
        }
        None => None,
    };
    if let Some(records) = records {
        result.receipt = records.iter().find_map(|r| match r {
            StatusRecord::Confined(receipt) => Some(receipt.clone()),
            _ => None,
        });
        result.records = records;
    }
    let status = match ended {
        Ended::Cancelled => return Outcome::Cancelled,
        Ended::TimedOut => return Outcome::TimedOut,
        Ended::WaitFailed(e) => {
            return Outcome::SetupError {
                step: SetupStep::Parent(ParentStep::Wait),
                errno: e.raw_os_error(),
                message: format!("cannot wait for the command: {e}"),
            }
        }
        Ended::Exited(status) => status,
    };
    if result.sandbox == SandboxMode::Helper {
        for record in &result.records {
            match record {
                StatusRecord::SetupError {
                    step,
                    errno,
                    message,
                } => {
                    return Outcome::SetupError {
                        step: SetupStep::Helper(*step),
                        errno: *errno,
                        message: message.clone(),
                    }
                }
                StatusRecord::ExecError { errno, message, .. } => {
                    return Outcome::ExecError {
                        errno: *errno,
                        message: message.clone(),
                    }
                }
                StatusRecord::Confined(_)
                | StatusRecord::Fds { .. }
                | StatusRecord::Observer { .. } => {}
            }
        }
        if result.receipt.is_none() {
            let stderr = String::from_utf8_lossy(&result.stderr.bytes);
            return Outcome::SetupError {
                step: SetupStep::Parent(ParentStep::HelperSilent),
                errno: None,
                message: format!(
                    "the sandbox helper ended ({status}) without reporting confinement; its stderr: {}",
                    stderr.trim()
                ),
            };
        }
    }
    match (status.code(), status.signal()) {
        (Some(0), _) => Outcome::Success,
        (Some(code), _) => Outcome::Failed { code },
        (None, Some(signal)) => Outcome::Signaled { signal },
        (None, None) => Outcome::SetupError {
            step: SetupStep::Parent(ParentStep::Wait),
            errno: None,
            message: format!("unrecognised wait status {status}"),
        },
    }
}

/// The child's process group. Killed explicitly at the end of a run, and on drop so that an
/// abandoned `exec` future does not leave the tree running.
struct ProcessGroup {
    pgid: Option<libc::pid_t>,
}

impl ProcessGroup {
    fn new(pid: Option<u32>) -> ProcessGroup {
        ProcessGroup {
            pgid: pid
                .and_then(|p| libc::pid_t::try_from(p).ok())
                .filter(|&p| p > 1),
        }
    }

    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            // SAFETY: killpg only sends a signal. The child called setsid, so `pgid` names its
            // own group and no other; ESRCH (already gone) is the expected common case.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Aborts a helper task (the stdin writer) when the run ends or is dropped; a command that
/// never reads its input would otherwise keep the writer waiting forever.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the drain collected.
#[derive(Debug)]
struct Drained {
    stdout: CappedBuffer,
    stderr: CappedBuffer,
    output: CappedBuffer,
    events_dropped_bytes: u64,
}

impl Default for Drained {
    fn default() -> Drained {
        Drained::new(0)
    }
}

impl Drained {
    fn new(limit: usize) -> Drained {
        Drained {
            stdout: CappedBuffer::new(limit),
            stderr: CappedBuffer::new(limit),
            output: CappedBuffer::new(limit),
            events_dropped_bytes: 0,
        }
    }
}

/// What a lossless drain is doing: `busy` while it waits for the event receiver to take a
/// chunk (so the run is not abandoned while output is still being delivered).
#[derive(Debug, Default)]
struct ConsumerState {
    busy: AtomicBool,
}

/// One of the command's output streams: a pipe, or the PTY master.
type Reader = Box<dyn AsyncRead + Unpin + Send>;

/// Reads both pipes until end of file or `stop`, always reading so the command never blocks
/// on a full pipe. One task reads both, so `output` has the order reads completed in.
async fn drain(
    mut stdout: Option<Reader>,
    mut stderr: Option<Reader>,
    limit: usize,
    mut events: Option<mpsc::Sender<ExecEvent>>,
    lossless: Option<Arc<ConsumerState>>,
    stop: CancellationToken,
) -> Drained {
    let mut drained = Drained::new(limit);
    // Capacity only: the kernel's copy touches what a read fills, so a stream that stays
    // quiet (or is not read at all: an inherited stdout) costs no zeroed 64 KiB, 16 page
    // faults each.
    let mut out_buf = Vec::with_capacity(if stdout.is_some() { READ_CHUNK } else { 0 });
    let mut err_buf = Vec::with_capacity(if stderr.is_some() { READ_CHUNK } else { 0 });
    while stdout.is_some() || stderr.is_some() {
        let (stream, n) = tokio::select! {
            _ = stop.cancelled() => break,
            r = read_some(&mut stdout, &mut out_buf) => match r {
                Ok(n) if n > 0 => (StreamKind::Stdout, n),
                _ => { stdout = None; continue; }
            },
            r = read_some(&mut stderr, &mut err_buf) => match r {
                Ok(n) if n > 0 => (StreamKind::Stderr, n),
                _ => { stderr = None; continue; }
            },
        };
        let bytes = match stream {
            StreamKind::Stdout => &out_buf[..n],
            StreamKind::Stderr => &err_buf[..n],
        };
        match stream {
            StreamKind::Stdout => drained.stdout.push(bytes),
            StreamKind::Stderr => drained.stderr.push(bytes),
        }
        drained.output.push(bytes);
        if let Some(tx) = &events {
            let event = ExecEvent::Output {
                stream,
                bytes: bytes.to_vec(),
            };
            if let Some(consumer) = &lossless {
                consumer.busy.store(true, Ordering::SeqCst);
                tokio::select! {
                    _ = stop.cancelled() => break,
                    sent = tx.send(event) => if sent.is_err() { events = None },
                }
                consumer.busy.store(false, Ordering::SeqCst);
                continue;
            }
            match tx.try_send(event) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => drained.events_dropped_bytes += n as u64,
                Err(TrySendError::Closed(_)) => events = None,
            }
        }
    }
    drained
}

/// Reads from the pipe if it is still open into `buf`'s spare capacity (what an earlier read
/// left there is consumed already); otherwise never completes, so `select!` ignores it.
async fn read_some<R: AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut Vec<u8>,
) -> io::Result<usize> {
    match pipe {
        Some(pipe) => {
            buf.clear();
            pipe.read_buf(buf).await
        }
        None => std::future::pending().await,
    }
}
