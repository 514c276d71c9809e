//! Process hygiene before confinement: inherited descriptors, parent death, capabilities and
//! `no_new_privs`. Each function is one step of [`crate::confine`].
//!
//! They change the calling process for good, so the example only shows the order they go in:
//!
//! ```no_run
//! use cordon_sandbox::process::*;
//! # fn demo(status_fd: i32, parent: libc::pid_t) -> Result<(), cordon_sandbox::SetupError> {
//! close_inherited_fds(&[status_fd])?; // nothing leaked survives
//! die_with_parent(parent)?;           // SIGKILL when the supervisor goes
//! drop_capabilities()?;               // needs CAP_SETPCAP, so before no_new_privs
//! set_no_new_privs()?;                // required for Landlock and seccomp
//! # Ok(()) }
//! ```

use std::io;
use std::os::fd::RawFd;

use caps::CapSet;

use crate::error::SetupError;

/// Closes every descriptor above stderr except those in `keep`, so that nothing the parent
/// leaked (an open file outside the sandbox, a socket) survives into the command. Landlock
/// checks access when a file is opened, so an fd opened before confinement would otherwise
/// bypass it; the caller keeps only the status fd and checked pipe or socket ends.
pub fn close_inherited_fds(keep: &[RawFd]) -> Result<(), SetupError> {
    let mut kept: Vec<u32> = keep
        .iter()
        .filter_map(|&fd| u32::try_from(fd).ok())
        .filter(|&fd| fd > 2)
        .collect();
    kept.sort_unstable();
    kept.dedup();
    // The gaps between kept descriptors: [3, k0-1], [k0+1, k1-1], ..., [kn+1, MAX].
    let mut ranges = Vec::with_capacity(kept.len() + 1);
    let mut first = 3u32;
    for fd in kept {
        ranges.push((first, fd - 1));
        first = fd + 1;
    }
    ranges.push((first, u32::MAX));
    for (first, last) in ranges {
        if first > last {
            continue;
        }
        // SAFETY: close_range only closes descriptors; none of the ones closed here are owned
        // by Rust objects that will use them later (the helper opens nothing before this step).
        let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::ENOSYS) {
                return Err(SetupError::CloseFds(err));
            }
            close_one_by_one(first, last)?;
        }
    }
    Ok(())
}

/// Fallback for kernels before 5.9: close what `/proc/self/fd` lists.
fn close_one_by_one(first: u32, last: u32) -> Result<(), SetupError> {
    let entries = std::fs::read_dir("/proc/self/fd").map_err(SetupError::CloseFds)?;
    let fds: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| (first..=last).contains(fd))
        .collect();
    for fd in fds {
        // SAFETY: closing a descriptor number; the directory iterator's own fd is already
        // closed because `entries` was consumed and dropped above.
        unsafe { libc::close(fd as RawFd) };
    }
    Ok(())
}

/// Arranges for SIGKILL when the parent dies, then checks it did not die already: a helper
/// whose supervisor is gone must not run a command nobody can time out or kill.
pub fn die_with_parent(original_parent: libc::pid_t) -> Result<(), SetupError> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    if rc != 0 {
        return Err(SetupError::ParentDeath(io::Error::last_os_error()));
    }
    // SAFETY: getppid cannot fail.
    if unsafe { libc::getppid() } != original_parent {
        return Err(SetupError::ParentDeath(io::Error::other(
            "the parent exited before the sandbox was set up",
        )));
    }
    Ok(())
}

/// Drops every capability: bounding set first (that needs CAP_SETPCAP, which is still in the
/// effective set), then ambient, then inheritable, permitted and effective in one `capset`.
/// A process without CAP_SETPCAP cannot shrink its bounding set, but it also cannot gain
/// capabilities back once `no_new_privs` is set, so that case is skipped, not an error.
/// Raw calls rather than the caps crate's per-set helpers: this runs before every command,
/// and probing each capability before dropping it doubles the system calls.
pub fn drop_capabilities() -> Result<(), SetupError> {
    for cap in 0..=MAX_CAPABILITY {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } == 0 {
            continue;
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            // Past the last capability this kernel knows: the set is empty.
            Some(libc::EINVAL) => break,
            // No CAP_SETPCAP: the bounding set cannot shrink (see above).
            Some(libc::EPERM) if cap == 0 => break,
            _ => {
                return Err(SetupError::Capabilities {
                    what: "bounding",
                    source: err,
                })
            }
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(|e| SetupError::Capabilities {
        what: "ambient",
        source: io::Error::other(e.to_string()),
    })?;
    let header = CapUserHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapUserData::default(); 2];
    // SAFETY: the header and the two data structs have the kernel's layout for version 3 and
    // live for the duration of the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if rc != 0 {
        return Err(SetupError::Capabilities {
            what: "effective, permitted and inheritable",
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Above every capability number Linux has defined (40 in 6.x); the loop stops at EINVAL.
const MAX_CAPABILITY: libc::c_ulong = 63;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapUserHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`; version 3 takes two (capabilities 0-31 and 32-63).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapUserData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Sets `no_new_privs`: setuid binaries and file capabilities no longer raise privileges, and
/// unprivileged Landlock and seccomp become possible.
pub fn set_no_new_privs() -> Result<(), SetupError> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if rc != 0 {
        return Err(SetupError::NoNewPrivs(io::Error::last_os_error()));
    }
    Ok(())
}

/// Sets what tools need beside the placeholders the namespace layer made. A `.git`
/// placeholder (an empty directory where a writable root had no repository, so that the
/// command cannot plant one whose hooks or `core.fsmonitor` the person's git would run
/// later) makes Go take the directory for a repository and fail `go build` with "error
/// obtaining VCS status: exit status 128"; `-buildvcs=false` in `GOFLAGS` tells it there is
/// nothing to stamp. Flags the caller put in `GOFLAGS` stay, and a `-buildvcs` of theirs wins.
pub fn tools_beside_placeholders(placeholders: &[std::path::PathBuf]) {
    if !placeholders
        .iter()
        .any(|p| p.file_name().is_some_and(|n| n == ".git"))
    {
        return;
    }
    let flags = std::env::var("GOFLAGS").unwrap_or_default();
    if flags.split_whitespace().any(|f| f.starts_with("-buildvcs")) {
        return;
    }
    let flags = match flags.trim() {
        "" => "-buildvcs=false".to_owned(),
        given => format!("{given} -buildvcs=false"),
    };
    std::env::set_var("GOFLAGS", flags);
}

/// Signals 32 and 33, which glibc keeps for itself (thread cancellation and `setuid` across
/// threads): its `posix_spawn` hands them to a child as ignored when the parent had handlers
/// on them, and an ignored signal survives `execve`. They are no caller's choice, so the
/// command gets them at their default, as a shell's fork and exec would give them.
const GLIBC_INTERNAL_SIGNALS: [libc::c_int; 2] = [32, 33];

/// Restores the default disposition of SIGPIPE and of glibc's internal signals for the command.
pub fn default_signals() -> Result<(), SetupError> {
    // SAFETY: installing SIG_DFL runs no handler code.
    if unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) } == libc::SIG_ERR {
        return Err(SetupError::Signals(io::Error::last_os_error()));
    }
    // glibc's sigaction refuses its internal signals, so the kernel is asked directly. The
    // kernel's struct: handler, flags, restorer, mask (one 64-bit word on Linux).
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }
    let default = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for signal in GLIBC_INTERNAL_SIGNALS {
        // SAFETY: `default` lives across the call and has the kernel's layout; the old action
        // is not asked for (null); SIG_DFL runs no handler code.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                &default as *const KernelSigaction,
                std::ptr::null_mut::<KernelSigaction>(),
                std::mem::size_of::<u64>(),
            )
        };
        if rc != 0 {
            return Err(SetupError::Signals(io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// When stdin is this process's controlling terminal (the parent's PTY, taken with
/// `TIOCSCTTY` before the helper started), makes this process's group the terminal's
/// foreground group. The namespace layer runs the command in a process group of its own, and
/// a background group that reads its terminal is stopped by `SIGTTIN`. Without a controlling
/// terminal on stdin (a pipe, `/dev/null`, a terminal the helper's `setsid` left behind) this
/// does nothing.
pub fn foreground_on_terminal() -> Result<(), SetupError> {
    // SAFETY: tcgetsid only queries fd 0; it fails with ENOTTY unless fd 0 is our
    // controlling terminal.
    if unsafe { libc::tcgetsid(0) } < 0 {
        return Ok(());
    }
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it; pthread_sigmask
    // reads and writes sigsets that live on this stack frame.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut saved: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        // A background group changing the foreground group gets SIGTTOU unless it is blocked.
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut saved);
        let rc = libc::tcsetpgrp(0, libc::getpgrp());
        let err = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &saved, std::ptr::null_mut());
        if rc != 0 {
            return Err(SetupError::Terminal(err));
        }
    }
    Ok(())
}
