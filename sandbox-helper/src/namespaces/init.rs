//! The processes the namespace layer adds between the parent and the command:
//!
//! ```text
//! parent (cordon) -> monitor (the helper, outside the pid namespace)
//!                      -> init (pid 1 of the new pid namespace)
//!                           -> command (confines itself further, then execve)
//! ```
//!
//! The monitor exists because the helper the parent spawned cannot itself become pid 1: a new
//! pid namespace only takes the children of whoever creates it. It waits for the init, forwards
//! signals to it, removes the placeholders, and dies the way the command died, so the parent's
//! view of exit codes and signal deaths is unchanged. The init reaps orphans, forwards signals
//! to the command, and exits as soon as the command does: the kernel then kills every other
//! process in the namespace, `setsid` and double-forked daemons included.
//!
//! Dying together: the monitor has `PR_SET_PDEATHSIG` (set by an earlier step) towards the
//! parent, the init has it towards the monitor, and the init's death ends the namespace. A
//! timeout or cancellation kills the monitor's process group, which holds the init.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::SetupError;

/// Signals the monitor and the init pass on instead of dying of them, each with why.
const FORWARDED: [(libc::c_int, &str); 7] = [
    (
        libc::SIGTERM,
        "the polite stop a supervisor or `kill` sends",
    ),
    (
        libc::SIGINT,
        "an interrupt the command may want to handle (Ctrl-C forwarded by a caller)",
    ),
    (libc::SIGHUP, "the terminal or session went away"),
    (
        libc::SIGQUIT,
        "a request for a core dump or a stack trace (JVMs, Go)",
    ),
    (
        libc::SIGUSR1,
        "application-defined (reload, dump statistics)",
    ),
    (libc::SIGUSR2, "application-defined"),
    (libc::SIGWINCH, "the terminal was resized"),
];

/// The two ends of the socket pair between monitor and init: the init writes the command's
/// wait status on it before exiting, and sees the monitor's death as a hang-up on it.
pub struct Link {
    monitor_end: OwnedFd,
    init_end: OwnedFd,
}

impl Link {
    /// A new close-on-exec socket pair.
    pub fn new() -> Result<Link, SetupError> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: socketpair writes two descriptors into `fds`.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(init_error("socketpair")(io::Error::last_os_error()));
        }
        // SAFETY: the kernel just returned these descriptors and nothing else owns them.
        let (monitor_end, init_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Link {
            monitor_end,
            init_end,
        })
    }

    /// The monitor's end (the init's is closed).
    pub fn into_monitor_end(self) -> OwnedFd {
        self.monitor_end
    }

    /// The init's end (the monitor's is closed).
    pub fn into_init_end(self) -> OwnedFd {
        self.init_end
    }
}

/// The signal mask before [`block_signals`], restored in the command.
pub struct SavedMask(libc::sigset_t);

/// Blocks the forwarded signals and SIGCHLD, before forking, so that none arriving between the
/// fork and the wait loop is lost (pid 1 ignores signals it has no handler for, unless blocked).
pub fn block_signals() -> Result<SavedMask, SetupError> {
    let set = wait_set();
    // SAFETY: `sigset_t` is plain data; sigprocmask writes the old mask into it.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are valid for the call.
    if unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old) } != 0 {
        return Err(init_error("block signals")(io::Error::last_os_error()));
    }
    Ok(SavedMask(old))
}

/// Restores the mask the helper started with; the command must not inherit blocked signals.
pub fn restore_signals(saved: &SavedMask) -> Result<(), SetupError> {
    // SAFETY: the saved set is valid; the old mask is not wanted.
    if unsafe { libc::sigprocmask(libc::SIG_SETMASK, &saved.0, std::ptr::null_mut()) } != 0 {
        return Err(init_error("restore the signal mask")(
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn wait_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a set on the stack.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        for (signal, _) in FORWARDED {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// `fork` into a new process group led by the child (set on both sides, so neither can act
/// before it holds): `Ok(0)` in the child, the child's pid in the parent.
pub fn fork_group_leader(what: &'static str) -> Result<libc::pid_t, SetupError> {
    // SAFETY: the helper is single-threaded, so the child can go on running Rust code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(init_error(what)(io::Error::last_os_error()));
    }
    // SAFETY: setpgid on this process or its own new child; a failure (the child already
    // exec'd or exited) leaves it in the parent's group, which only changes who gets a signal.
    unsafe { libc::setpgid(pid, 0) };
    Ok(pid)
}

/// In the init, right after the fork: die with the monitor, and make sure it is still there
/// (it may have died before the death signal was armed; its end of the link then hangs up).
pub fn die_with_monitor(link: &OwnedFd) -> Result<(), SetupError> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(init_error("arm the parent-death signal")(
            io::Error::last_os_error(),
        ));
    }
    let mut poll = libc::pollfd {
        fd: link.as_raw_fd(),
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd with a zero timeout.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    if ready != 0 {
        return Err(init_error("check the monitor")(io::Error::other(
            "the monitor exited before the sandbox was set up",
        )));
    }
    Ok(())
}

/// Makes the init non-dumpable: it keeps the new user namespace's capabilities for as long as
/// it lives, and nothing in the sandbox may read its memory or descriptors through `/proc/1`
/// (the capability check already refuses; this does not depend on it).
pub fn not_dumpable() -> Result<(), SetupError> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(init_error("make the init non-dumpable")(
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// The monitor's life after forking the init. Never returns.
///
/// It ends as soon as the init reports the command's status, which the init does only once
/// every other process of the namespace is dead and reaped; the namespace's teardown (the
/// mounts, the network) then runs in the init's exit, off the path the caller waits on.
pub fn run_monitor(init: libc::pid_t, link: OwnedFd, keep: &[RawFd], on_exit: impl FnOnce()) -> ! {
    // Nothing of the parent's (status fd, passed descriptors, stdio) may stay open here: the
    // parent reads them to end of file, which must come with the command's exec and exit.
    let mut kept: Vec<RawFd> = keep.to_vec();
    kept.push(link.as_raw_fd());
    close_all_but(&kept);
    let set = wait_set();
    // SAFETY: signalfd on a valid set; the blocked signals are then read from it.
    let signals = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC) };
    let status = loop {
        let mut fds = [
            libc::pollfd {
                fd: link.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: signals,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // Without a signalfd (it cannot fail short of a broken kernel), only the link is watched.
        let count = if signals < 0 { 1 } else { 2 };
        // SAFETY: poll on `count` valid pollfds.
        if unsafe { libc::poll(fds.as_mut_ptr(), count, -1) } < 0 {
            continue; // EINTR
        }
        if fds[0].revents != 0 {
            let mut raw = [0u8; 4];
            // SAFETY: recv into a 4-byte buffer on a descriptor this function owns.
            let n = unsafe {
                libc::recv(
                    link.as_raw_fd(),
                    raw.as_mut_ptr().cast(),
                    raw.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n == 4 {
                break i32::from_ne_bytes(raw);
            }
            // End of file without a status: the init was killed. Its own status, then.
            break wait_blocking(init);
        }
        if fds[1].revents != 0 {
            // SAFETY: `signalfd_siginfo` is plain data; read fills it.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: read into a buffer of exactly one record.
            if unsafe {
                libc::read(
                    signals,
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            } != size as isize
            {
                continue;
            }
            let signal = info.ssi_signo as libc::c_int;
            if signal != libc::SIGCHLD {
                forward(init, signal);
            }
            // SIGCHLD: the init ended; its end of the link is closed too, which the next
            // poll reports (with the status written before it, if any).
        }
    };
    on_exit();
    die_like(status)
}

/// The init's life after forking the command. Never returns. With `sockets` (published
/// ports), it also answers the parent's requests for sockets in this network namespace (see
/// [`super::net::serve_socket_requests`]).
pub fn run_init(command: libc::pid_t, link: OwnedFd, sockets: Option<OwnedFd>) -> ! {
    let mut keep = vec![link.as_raw_fd()];
    keep.extend(sockets.as_ref().map(AsRawFd::as_raw_fd));
    close_all_but(&keep);
    // To the command's whole group, as a signal to its group would have reached it.
    let status = match &sockets {
        None => wait_forwarding(command, |signal| forward(-command, signal)),
        Some(sockets) => wait_serving(command, sockets, |signal| forward(-command, signal)),
    };
    // Nothing outlives the command: kill what is left of the namespace and reap it before
    // reporting, so that "the command ended" also means "and nothing of it runs".
    // SAFETY: kill(-1) from pid 1 reaches every other process of its namespace; waitpid
    // with a valid status pointer until there is no child left.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
        let mut ignored = 0;
        while libc::waitpid(-1, &mut ignored, 0) > 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
    let bytes = status.to_ne_bytes();
    // SAFETY: write of a 4-byte buffer on a descriptor this function owns; best effort, the
    // exit code below carries the same information less precisely.
    unsafe { libc::write(link.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    // SAFETY: _exit ends the process without running anything inherited from the helper.
    unsafe { libc::_exit(exit_code(status)) }
}

fn wait_blocking(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: waitpid with a valid status pointer.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 128 << 8; // no such child: report a failure, not a success
        }
    }
    status
}

/// Waits for `child`, reaping every other child on the way (orphans reparent to pid 1) and
/// passing forwarded signals to `forward`. Returns `child`'s wait status.
fn wait_forwarding(child: libc::pid_t, forward: impl Fn(libc::c_int)) -> i32 {
    let set = wait_set();
    loop {
        // SAFETY: sigwaitinfo on a valid set; the info is not needed.
        let signal = unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        if signal < 0 {
            continue; // EINTR
        }
        if signal != libc::SIGCHLD {
            forward(signal);
            continue;
        }
        loop {
            let mut status = 0;
            // SAFETY: waitpid with a valid status pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid == child {
                return status;
            }
            if pid <= 0 {
                break;
            }
        }
    }
}

/// [`wait_forwarding`], also serving socket requests on `sockets` as they come: the signals
/// arrive on a signalfd, so one `poll` watches both. A parent that hangs up stops the serving,
/// not the waiting.
fn wait_serving(child: libc::pid_t, sockets: &OwnedFd, forward: impl Fn(libc::c_int)) -> i32 {
    let set = wait_set();
    // SAFETY: signalfd on a valid set, which is blocked (see `block_signals`).
    let signals = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC) };
    if signals < 0 {
        // Cannot happen short of a broken kernel; the command still gets its init.
        return wait_forwarding(child, forward);
    }
    let mut serving = true;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: signals,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if serving { sockets.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll on two valid pollfds (a negative fd is ignored).
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            continue; // EINTR
        }
        if fds[1].revents != 0 {
            serving = super::net::serve_socket_requests(sockets);
        }
        if fds[0].revents == 0 {
            continue;
        }
        // SAFETY: `signalfd_siginfo` is plain data; read fills it.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: read into a buffer of exactly one record.
        let n = unsafe {
            libc::read(
                signals,
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                size,
            )
        };
        if n != size as isize {
            continue;
        }
        let signal = info.ssi_signo as libc::c_int;
        if signal != libc::SIGCHLD {
            forward(signal);
            continue;
        }
        loop {
            let mut status = 0;
            // SAFETY: waitpid with a valid status pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid == child {
                return status;
            }
            if pid <= 0 {
                break;
            }
        }
    }
}

fn forward(to: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill only sends a signal.
    unsafe { libc::kill(to, signal) };
}

/// The exit code for a wait status: the code, or 128+N for a death by signal N.
fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        128
    }
}

/// Ends the monitor with the command's status: the same exit code, or the same signal, so the
/// parent sees what it would have seen without the namespace layer.
fn die_like(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain calls with valid arguments: no core file of the monitor itself, the
        // default action for the signal, the signal unblocked, then sent to this process.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(signal, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
        }
    }
    // SAFETY: _exit ends the process.
    unsafe { libc::_exit(exit_code(status)) }
}

/// Closes every descriptor, stdio included, except `keep`.
fn close_all_but(keep: &[RawFd]) {
    let mut keep: Vec<u32> = keep
        .iter()
        .filter_map(|&fd| u32::try_from(fd).ok())
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut first = 0u32;
    for fd in keep.into_iter().chain([u32::MAX]) {
        if fd > first {
            // SAFETY: close_range only closes descriptors; nothing later uses the closed ones.
            unsafe { libc::syscall(libc::SYS_close_range, first, fd - 1, 0) };
        }
        first = fd.saturating_add(1);
    }
}

fn init_error(what: &'static str) -> impl Fn(io::Error) -> SetupError {
    move |source| SetupError::Init { what, source }
}
