//! Observer mode: the seccomp filter reports the calls that the sandbox can refuse to a
//! supervisor (the parent's seccomp observer), so that a denial is learnt from what the
//! command really attempted, not from what it printed.
//!
//! One filter, one listener (the kernel allows one listener per filter chain):
//!
//! * the refusals of [`crate::syscall_rules`] that return `EPERM` notify instead, and the
//!   observer answers them with `EPERM` after recording them (seccomp's precedence would
//!   otherwise hide them from any notifier). A listener that is gone makes the kernel fail them
//!   with `ENOSYS`, and a slow one only delays them: a refused call stays refused;
//! * the calls of [`watched_rules`] (file creation, writing opens, removal, rename, link,
//!   execution, connect, bind, addressed sendto) notify too, and the observer answers them
//!   with `SECCOMP_USER_NOTIF_FLAG_CONTINUE`: Landlock still decides them in the kernel.
//!
//! The observer tells the two apart by running the refusal program itself (sent in the
//! `observer` status record; [`crate::bpf::evaluate`]), never by a table of its own.
//!
//! The listener reaches the parent over the status socket and is closed here before `execve`:
//! a command holding it could answer its own notifications.

use std::os::fd::{AsFd, FromRawFd, OwnedFd};

use seccompiler::BpfProgram;

use crate::error::SetupError;
use crate::policy::SandboxPolicy;
use crate::status::{self, StatusRecord, TAG_SECCOMP_LISTENER};
use crate::syscall_rules::{Arg, SyscallRule};

/// The flags with which an open can change a file: write access, creation, truncation, and
/// `O_TMPFILE` (without the `O_DIRECTORY` bit it includes, which a plain directory open sets).
const WRITING_OPEN_FLAGS: u64 = (libc::O_WRONLY
    | libc::O_RDWR
    | libc::O_CREAT
    | libc::O_TRUNC
    | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u64;

/// Whether the policy restricts what may be read to some roots: then every open is watched,
/// otherwise only writing opens are (a read-only open is the commonest call of all: a program's
/// start-up opens its libraries and locale files, some thirty opens for `cp`). Hidden paths
/// under "read everything" (`deny_read`: `/etc/shadow`, a credentials file) do not make reads
/// watched: every command would pay for every open to catch the rare read of a few files, and
/// under the namespace layer those read as empty rather than fail.
pub fn reads_restricted(policy: &SandboxPolicy) -> bool {
    !policy.filesystem.read.iter().any(|r| r.as_os_str() == "/")
}

fn watch(syscall: &'static str, nr: i64, when: &[Arg], reason: &'static str) -> SyscallRule {
    SyscallRule {
        syscall,
        nr,
        when: when.to_vec(),
        // Never an answer: watched calls are compiled only by `bpf::compile_observed`, which
        // notifies for them; the observer lets them continue.
        errno: 0,
        reason,
    }
}

/// What the observer is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObserveScope {
    /// Every refusal and every call Landlock can refuse ([`watched_rules`]): exact evidence
    /// for every denial, at the price of a round trip to the observer on every writing open.
    Full,
    /// The calls a command makes rarely ([`watched_rules_for`]): the refusals (seccomp's own,
    /// rare by nature), the network calls (`connect`, `bind`, addressed `sendto`, a few per
    /// command), and the file calls made once per directory or not at all in a build:
    /// creating a directory, a node or a symlink, truncating by path, checking for write
    /// access. Exact evidence for network, unix-socket, port and system-call denials and for
    /// the refused directory creations, which tools report with no path more often than any
    /// other (a library's `mkdir`, `mkdir -p` deep in a build tool), at no cost a build
    /// notices. The writing opens and removals, made once per file, are left to Landlock's
    /// audit records or the text.
    Light,
}

impl ObserveScope {
    /// The helper's argument: `--observe` or `--observe=light`.
    pub fn arg(self) -> &'static str {
        match self {
            ObserveScope::Full => "--observe",
            ObserveScope::Light => "--observe=light",
        }
    }
}

/// The calls reported to the observer besides the refusals, each with why it is watched.
pub fn watched_rules(policy: &SandboxPolicy) -> Vec<SyscallRule> {
    watched_rules_for(policy, ObserveScope::Full)
}

/// [`watched_rules`] for `scope`: everything, or only the calls made rarely.
pub fn watched_rules_for(policy: &SandboxPolicy, scope: ObserveScope) -> Vec<SyscallRule> {
    let mut r = rare_calls();
    if scope == ObserveScope::Full {
        r.extend(per_file_calls(policy));
    }
    r
}

/// The network calls and the file calls a build makes once per directory at most.
fn rare_calls() -> Vec<SyscallRule> {
    use libc::*;
    let mut r = vec![
        watch("connect", SYS_connect, &[], "a connection's address says which host, port or socket the command wanted"),
        watch("bind", SYS_bind, &[], "binding a port under port rules, or a socket path, is refused outside the rules"),
        watch("sendto", SYS_sendto, &[Arg::NonZero64(4)], "a datagram's destination says which host or socket the command wanted"),
        watch("mkdirat", SYS_mkdirat, &[], "creating a directory needs the parent's make_dir right"),
        watch("mknodat", SYS_mknodat, &[], "creating a file, fifo or socket node needs the parent's make right"),
        watch("symlinkat", SYS_symlinkat, &[], "creating a symlink needs the parent's make_sym right"),
        watch("truncate", SYS_truncate, &[], "truncating by path needs Landlock's truncate right"),
        watch("faccessat", SYS_faccessat, &[Arg::AnyBits32(2, W_OK as u64)],
            "a check for write access (`test -w`) is how some tools give up without trying: read-only mounts answer it EROFS"),
        watch("faccessat2", SYS_faccessat2, &[Arg::AnyBits32(2, W_OK as u64)], "as faccessat"),
    ];
    #[cfg(target_arch = "x86_64")]
    r.extend([
        watch("mkdir", SYS_mkdir, &[], "as mkdirat"),
        watch("mknod", SYS_mknod, &[], "as mknodat"),
        watch("symlink", SYS_symlink, &[], "as symlinkat"),
        watch(
            "access",
            SYS_access,
            &[Arg::AnyBits32(1, W_OK as u64)],
            "as faccessat",
        ),
    ]);
    r
}

/// The file calls a build makes once per file (and, where reads are restricted, every open
/// and exec): watched only in the full scope.
fn per_file_calls(policy: &SandboxPolicy) -> Vec<SyscallRule> {
    use libc::*;
    let writes = WRITING_OPEN_FLAGS;
    let all_opens = reads_restricted(policy);
    let open_when = |flags: u8| -> Vec<Arg> {
        if all_opens {
            Vec::new()
        } else {
            vec![Arg::AnyBits32(flags, writes)]
        }
    };
    let mut r = vec![
        watch("openat", SYS_openat, &open_when(2),
            "an open that writes, creates or truncates (or any open, when reads are restricted) is what Landlock refuses outside the roots"),
        watch("linkat", SYS_linkat, &[], "a hard link is a file created in the new parent"),
        watch("unlinkat", SYS_unlinkat, &[], "removal needs the parent's remove right"),
        watch("renameat", SYS_renameat, &[], "rename removes from one directory and creates in another"),
        watch("renameat2", SYS_renameat2, &[], "rename removes from one directory and creates in another"),
    ];
    // Execution is granted with reading (there is no execute list), so under "read everything"
    // an exec can be refused only where a read is: hidden paths, which are not watched either.
    // Watching it anyway cost every process a round trip (`make` running one `cp` per file).
    if all_opens {
        r.extend([
            watch(
                "execve",
                SYS_execve,
                &[],
                "executing needs the execute right on the file, which only the read roots carry",
            ),
            watch("execveat", SYS_execveat, &[], "as execve"),
        ]);
    }
    #[cfg(target_arch = "x86_64")]
    r.extend([
        watch("open", SYS_open, &open_when(1), "as openat"),
        watch("creat", SYS_creat, &[], "creates or truncates a file"),
        watch("link", SYS_link, &[], "as linkat"),
        watch("unlink", SYS_unlink, &[], "as unlinkat"),
        watch("rmdir", SYS_rmdir, &[], "as unlinkat"),
        watch("rename", SYS_rename, &[], "as renameat"),
    ]);
    r
}

/// The two programs of observer mode: the one to install, and the refusals alone for the
/// observer to evaluate.
pub struct ObservedFilter {
    /// Refusals routed to the observer, then the watched calls ([`crate::bpf::compile_observed`]).
    pub install: BpfProgram,
    /// The plain refusal program: what the kernel filter would answer without the observer.
    pub refusals: BpfProgram,
}

/// Compiles observer mode's programs from the refusal `rules` and `policy`'s watched calls
/// for `scope`.
pub fn compile(
    rules: &[SyscallRule],
    policy: &SandboxPolicy,
    scope: ObserveScope,
) -> Result<ObservedFilter, SetupError> {
    Ok(ObservedFilter {
        install: crate::bpf::compile_observed(rules, &watched_rules_for(policy, scope))?,
        refusals: crate::bpf::compile(rules)?,
    })
}

/// Installs `filter` with a new listener, sends the listener and the refusal program over the
/// status socket, and closes this process's copy of the listener. Needs `no_new_privs`.
pub fn install_and_hand_over(
    filter: &ObservedFilter,
    status_socket: std::os::fd::BorrowedFd<'_>,
) -> Result<(), SetupError> {
    let listener = install_with_listener(&filter.install)?;
    let refusals = filter
        .refusals
        .iter()
        .map(|i| [u32::from(i.code), u32::from(i.jt), u32::from(i.jf), i.k])
        .collect();
    let handed = status::write_record(status_socket, &StatusRecord::Observer { refusals })
        .and_then(|()| status::send_fds(status_socket, TAG_SECCOMP_LISTENER, &[listener.as_fd()]));
    // Closed whatever happened: the command must never hold it.
    drop(listener);
    handed.map_err(|e| SetupError::Seccomp {
        what: "hand the observer its listener",
        errno: e.raw_os_error(),
        message: format!("the status fd must be a unix socket in observer mode: {e}"),
    })
}

fn install_with_listener(program: &BpfProgram) -> Result<OwnedFd, SetupError> {
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len()).map_err(|_| SetupError::Seccomp {
            what: "install",
            errno: None,
            message: "program too long".into(),
        })?,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at `program`, alive for the call; the kernel copies it. The flag
    // asks for a listener descriptor as the return value (close-on-exec, see seccomp(2)).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        return Err(SetupError::Seccomp {
            what: "install with a listener",
            errno: err.raw_os_error(),
            message: format!("seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER): {err}"),
        });
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::{evaluate, AUDIT_ARCH};

    fn policy(read: &str, deny_read: &str) -> SandboxPolicy {
        SandboxPolicy::from_json(&format!(
            r#"{{"version":1,"filesystem":{{"read":[{read}],"write":["/w"],"deny_read":[{deny_read}]}},
               "network":{{"mode":"denied"}},
               "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#
        ))
        .unwrap()
    }

    fn openat(program: &BpfProgram, flags: i32) -> u32 {
        evaluate(
            program,
            AUDIT_ARCH,
            libc::SYS_openat as u32,
            [0, 0, flags as u64, 0, 0, 0],
        )
    }

    #[test]
    fn read_only_opens_stay_off_the_observer_unless_reads_are_restricted() {
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        let everything = policy(r#""/""#, "");
        let filter = compile(
            &crate::syscall_rules::rules(&everything),
            &everything,
            ObserveScope::Full,
        )
        .unwrap();
        assert_eq!(
            openat(&filter.install, libc::O_RDONLY | libc::O_CLOEXEC),
            allow
        );
        assert_eq!(
            openat(&filter.install, libc::O_RDONLY | libc::O_DIRECTORY),
            allow
        );
        for flags in [
            libc::O_WRONLY,
            libc::O_RDWR,
            libc::O_CREAT,
            libc::O_TRUNC,
            libc::O_TMPFILE,
        ] {
            assert_eq!(openat(&filter.install, flags), notify, "{flags:#x}");
        }
        // Restricted to a narrower read root: every open is watched. A hidden path under "read
        // everything" is not a restriction of the roots: reads stay off the observer.
        for (read, hidden, expected) in [(r#""/usr""#, "", notify), (r#""/""#, r#""/root""#, allow)]
        {
            let p = policy(read, hidden);
            let filter = compile(&crate::syscall_rules::rules(&p), &p, ObserveScope::Full).unwrap();
            assert_eq!(
                openat(&filter.install, libc::O_RDONLY),
                expected,
                "{read} {hidden}"
            );
            // Execution goes with reading: watched exactly where reads are.
            for nr in [libc::SYS_execve, libc::SYS_execveat] {
                let answer = evaluate(&filter.install, AUDIT_ARCH, nr as u32, [0; 6]);
                assert_eq!(answer, expected, "{nr} {read} {hidden}");
            }
        }
        // A check for read or execute access stays off the observer; one for write access not.
        let faccessat = |mode: i32| {
            evaluate(
                &filter.install,
                AUDIT_ARCH,
                libc::SYS_faccessat as u32,
                [0, 0, mode as u64, 0, 0, 0],
            )
        };
        assert_eq!(faccessat(libc::R_OK | libc::X_OK), allow);
        assert_eq!(faccessat(libc::W_OK), notify);
        // The refusal program the observer evaluates lets every open through: opens are only
        // watched, never refused by seccomp (except setuid creation).
        assert_eq!(openat(&filter.refusals, libc::O_WRONLY), allow);
    }

    #[test]
    fn every_watched_rule_has_a_reason_and_notifies() {
        let p = policy(r#""/""#, "");
        let filter = compile(&crate::syscall_rules::rules(&p), &p, ObserveScope::Full).unwrap();
        for rule in watched_rules(&p) {
            assert!(!rule.reason.is_empty(), "{}", rule.syscall);
            let mut args = [0u64; 6];
            if rule.syscall.starts_with("open") {
                args[if rule.syscall == "open" { 1 } else { 2 }] = libc::O_WRONLY as u64;
            }
            if rule.syscall == "sendto" {
                args[4] = 1;
            }
            // A check for write access: W_OK in the mode.
            match rule.syscall {
                "access" => args[1] = libc::W_OK as u64,
                "faccessat" | "faccessat2" => args[2] = libc::W_OK as u64,
                _ => {}
            }
            let answer = evaluate(&filter.install, AUDIT_ARCH, rule.nr as u32, args);
            assert_eq!(answer, libc::SECCOMP_RET_USER_NOTIF, "{}", rule.syscall);
        }
    }

    #[test]
    fn the_light_scope_leaves_per_file_calls_to_the_kernel_and_watches_the_rare_ones() {
        // Restricted reads, which make the full scope watch every open and exec.
        let p = policy(r#""/usr""#, r#""/root""#);
        let filter = compile(&crate::syscall_rules::rules(&p), &p, ObserveScope::Light).unwrap();
        let allow = libc::SECCOMP_RET_ALLOW;
        // No open, removal, rename, link or exec waits for the observer.
        for flags in [libc::O_RDONLY, libc::O_WRONLY | libc::O_CREAT, libc::O_RDWR] {
            assert_eq!(openat(&filter.install, flags), allow, "{flags:#x}");
        }
        for nr in [
            libc::SYS_unlinkat,
            libc::SYS_renameat2,
            libc::SYS_linkat,
            libc::SYS_execve,
            libc::SYS_open,
            libc::SYS_unlink,
            libc::SYS_rename,
        ] {
            assert_eq!(
                evaluate(&filter.install, AUDIT_ARCH, nr as u32, [0; 6]),
                allow,
                "{nr}"
            );
        }
        let watched = watched_rules_for(&p, ObserveScope::Light);
        let names: Vec<&str> = watched.iter().map(|r| r.syscall).collect();
        for name in [
            "connect",
            "bind",
            "sendto",
            "mkdirat",
            "mkdir",
            "mknodat",
            "symlinkat",
            "truncate",
            "faccessat",
        ] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
        for rule in watched {
            let mut args = [0u64; 6];
            match rule.syscall {
                "sendto" => args[4] = 1,
                "access" => args[1] = libc::W_OK as u64,
                "faccessat" | "faccessat2" => args[2] = libc::W_OK as u64,
                _ => {}
            }
            let answer = evaluate(&filter.install, AUDIT_ARCH, rule.nr as u32, args);
            assert_eq!(answer, libc::SECCOMP_RET_USER_NOTIF, "{}", rule.syscall);
        }
        // The refusals notify too (the observer answers them with their errno).
        let ptrace = evaluate(&filter.install, AUDIT_ARCH, libc::SYS_ptrace as u32, [0; 6]);
        assert_eq!(ptrace, libc::SECCOMP_RET_USER_NOTIF);
    }
}
