//! Running a shell with a hard deadline.
//!
//! Startup files are arbitrary user code: they may hang, fork daemons, or leave a background job
//! holding our pipe open. So the shell runs in its own session, its output is read with `poll`
//! against a deadline (never a blocking read that a grandchild could pin), and at the deadline
//! its whole process group is killed and the call returns at once.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Why running a shell failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The process could not be started.
    #[error("could not start the shell: {0}")]
    Spawn(#[source] io::Error),
    /// Reading its output or waiting for it failed.
    #[error("I/O error while supervising the shell: {0}")]
    Io(#[source] io::Error),
    /// It did not finish in time; its process group was killed.
    #[error("the shell did not finish within {0:?} and was killed")]
    Timeout(Duration),
    /// It wrote more than the output limit; its process group was killed.
    #[error("the shell wrote more than {0} bytes and was killed")]
    OutputTooLarge(usize),
}

/// What a finished shell left behind.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// The first [`STDERR_KEEP`] bytes of stderr, for error messages.
    pub stderr: Vec<u8>,
}

/// How much stderr is kept for error messages; the rest is read and dropped.
pub const STDERR_KEEP: usize = 16 * 1024;

/// After the shell itself exits, how long leftovers outside its process group may keep the pipe
/// open before we stop reading. Everything the shell printed is already in the pipe by then.
const DRAIN_GRACE: Duration = Duration::from_millis(200);

/// Upper bound on one `poll` so that the shell's exit is noticed even while a leftover process
/// keeps the pipe open.
const POLL_SLICE: Duration = Duration::from_millis(50);

/// Runs `cmd` with stdin `/dev/null` in a new session, collecting stdout (up to `max_stdout`
/// bytes) and stderr, and kills its process group at `timeout`.
pub fn run(cmd: &mut Command, timeout: Duration, max_stdout: usize) -> Result<Output, RunError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure runs between fork and exec in the child and only calls setsid(2),
    // which is async-signal-safe and touches no memory shared with the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let result = supervise(&mut child, timeout, max_stdout);
    if result.is_err() {
        // The group may still be running (timeout, overflow, I/O error): kill it and reap the
        // shell so that no zombie is left. Errors here mean it is already gone.
        kill_group(&child);
        let _ = child.kill();
        let _ = child.wait();
    }
    result
}

fn kill_group(child: &Child) {
    // setsid made the shell the leader of a group whose id is its pid.
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

fn supervise(child: &mut Child, timeout: Duration, max_stdout: usize) -> Result<Output, RunError> {
    let deadline = Instant::now() + timeout;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    for pipe in [
        stdout.as_ref().map(|p| p.as_raw_fd()),
        stderr.as_ref().map(|p| p.as_raw_fd()),
    ]
    .into_iter()
    .flatten()
    {
        set_nonblocking(pipe).map_err(RunError::Io)?;
    }
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut exited: Option<ExitStatus> = None;
    let mut drain_until: Option<Instant> = None;
    let mut buf = vec![0u8; 64 * 1024];

    loop {
        if stdout.is_none() && stderr.is_none() {
            break;
        }
        let now = Instant::now();
        if let Some(limit) = drain_until {
            if now >= limit {
                break;
            }
        } else if now >= deadline {
            return Err(RunError::Timeout(timeout));
        }
        let wait = drain_until
            .unwrap_or(deadline)
            .saturating_duration_since(now)
            .min(POLL_SLICE);
        poll_readable(
            &[
                stdout.as_ref().map(|p| p.as_raw_fd()),
                stderr.as_ref().map(|p| p.as_raw_fd()),
            ],
            wait,
        )
        .map_err(RunError::Io)?;
        if let Some(p) = stdout.as_mut() {
            if drain(p, &mut buf, &mut out, usize::MAX).map_err(RunError::Io)? {
                stdout = None;
            }
            if out.len() > max_stdout {
                return Err(RunError::OutputTooLarge(max_stdout));
            }
        }
        if let Some(p) = stderr.as_mut() {
            if drain(p, &mut buf, &mut err, STDERR_KEEP).map_err(RunError::Io)? {
                stderr = None;
            }
        }
        if exited.is_none() && has_exited(child).map_err(RunError::Io)? {
            // Kill leftovers of the group while the unreaped shell still pins the group id,
            // so the id cannot have been reused by an unrelated process.
            kill_group(child);
            exited = Some(child.wait().map_err(RunError::Io)?);
            drain_until = Some((Instant::now() + DRAIN_GRACE).min(deadline.max(Instant::now())));
        }
    }
    let status = match exited {
        Some(s) => s,
        None => wait_until(child, deadline, timeout)?,
    };
    Ok(Output {
        status,
        stdout: out,
        stderr: err,
    })
}

/// Waits for a shell that closed its output but has not exited yet.
fn wait_until(
    child: &mut Child,
    deadline: Instant,
    timeout: Duration,
) -> Result<ExitStatus, RunError> {
    loop {
        if has_exited(child).map_err(RunError::Io)? {
            kill_group(child);
            return child.wait().map_err(RunError::Io);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(RunError::Timeout(timeout));
        }
        std::thread::sleep(
            deadline
                .saturating_duration_since(now)
                .min(Duration::from_millis(10)),
        );
    }
}

/// True once the child has exited, without reaping it (`WNOWAIT`), so that its pid, and with
/// it the process group id, stays reserved until we kill the group.
fn has_exited(child: &Child) -> io::Result<bool> {
    let pid = libc::id_t::from(child.id());
    // SAFETY: siginfo_t is plain data for which all-zero is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `info` is a valid, writable siginfo_t; WNOHANG makes the call non-blocking and
        // WNOWAIT leaves the child waitable for `Child::wait`.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: waitid succeeded, so the si_pid field is initialised (0 when no child has
            // changed state yet).
            return Ok(unsafe { info.si_pid() } != 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reads everything currently available; true at end of file. Bytes beyond `keep` are read and
/// discarded so that a chatty process cannot block on a full pipe.
fn drain(
    pipe: &mut impl Read,
    buf: &mut [u8],
    into: &mut Vec<u8>,
    keep: usize,
) -> io::Result<bool> {
    loop {
        match pipe.read(buf) {
            Ok(0) => return Ok(true),
            Ok(n) => {
                let room = keep.saturating_sub(into.len()).min(n);
                into.extend_from_slice(&buf[..room]);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

fn set_nonblocking(fd: i32) -> io::Result<()> {
    // SAFETY: fcntl on an fd we own, with integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn poll_readable(fds: &[Option<i32>], wait: Duration) -> io::Result<()> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .flatten()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structs that outlives the call.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if rc == -1 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
