//! Keeping the supervising process's memory out of reach of the command it runs.
//!
//! The process that calls [`crate::exec::Sandbox::exec`] holds what the command must not see:
//! the environment variables the secret filter withheld, and whatever else the embedding
//! program keeps in memory. A core dump of it (into the working directory, which the command
//! can read) or a read of its `/proc/PID/mem` or `environ` would hand that over. So before
//! every spawn the supervisor makes itself not dumpable (`PR_SET_DUMPABLE 0`: no core dump, and
//! `/proc` access to its memory needs `CAP_SYS_PTRACE`) and lowers its own `RLIMIT_CORE` soft
//! limit to 0, the second guard for when `fs.suid_dumpable` would dump it anyway. The hard limit
//! is left alone, so the command still starts with the caller's soft limit: the child puts it
//! back between fork and exec ([`CoreLimit::restore_in_child`]), and `execve` makes the child
//! dumpable again.
//!
//! It is applied where a launch is built, not in the CLI: [`crate::helper::Helper::command_with_fds`]
//! (every confined run, through [`crate::exec::Sandbox::exec`] or an embedder spawning the helper
//! itself) and the supervisor's unconfined spawn. Every such caller holds secrets and runs code it
//! does not trust (the CLI, sessions, the orchestrator, embedders). Both settings are
//! process-wide and stay after the run: another run may start at any time, and the secrets stay
//! in memory. An embedder that wants core dumps of its own crashes loses them.

use std::io;
use std::sync::OnceLock;

/// The caller's `RLIMIT_CORE` soft limit as it was before the first run lowered it.
static CALLERS_CORE_SOFT_LIMIT: OnceLock<libc::rlim_t> = OnceLock::new();

/// The `RLIMIT_CORE` soft limit the command is to start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CoreLimit {
    soft: libc::rlim_t,
}

/// Makes this process not dumpable and its `RLIMIT_CORE` soft limit 0 (again, if something
/// raised it since the last run), and returns the soft limit the caller had before the first
/// call, for the command.
pub(crate) fn guard_supervisor() -> io::Result<CoreLimit> {
    let current = core_limit()?;
    // Recorded before lowering, so a concurrent first call sees the caller's value too.
    let soft = *CALLERS_CORE_SOFT_LIMIT.get_or_init(|| current.rlim_cur);
    if current.rlim_cur != 0 {
        let lowered = libc::rlimit {
            rlim_cur: 0,
            rlim_max: current.rlim_max,
        };
        // SAFETY: setrlimit reads the struct, which lives for the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &lowered) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(CoreLimit { soft })
}

fn core_limit() -> io::Result<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into `limit`, a valid rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(limit)
}

impl CoreLimit {
    /// Gives the calling process (the forked child, before exec) the caller's soft limit back,
    /// capped at the current hard limit. Only async-signal-safe calls, no allocation.
    pub(crate) fn restore_in_child(self) -> io::Result<()> {
        let current = core_limit()?;
        let restored = libc::rlimit {
            // RLIM_INFINITY is the largest value, so this also keeps an unlimited soft limit.
            rlim_cur: self.soft.min(current.rlim_max),
            rlim_max: current.rlim_max,
        };
        // SAFETY: setrlimit reads the struct, which lives for the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &restored) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
