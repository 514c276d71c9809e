//! The seccomp layer, as data: every rule names a system call, the argument conditions under
//! which it is refused, the errno returned, and one line saying why.
//!
//! The filter is a deny-list on top of Landlock: Landlock decides *which files*, seccomp removes
//! the kernel interfaces that bypass or attack the sandbox, and the socket families that the
//! policy's network mode forbids. Rules are compiled with seccompiler into one BPF program per
//! errno (seccompiler has one match action per filter); on x86_64 a small hand-written program
//! also refuses x32 system calls, which share the native audit arch but use other numbers.
//! Non-native ABIs (i386 through `int 0x80`) fail seccompiler's arch check and kill the process.
//!
//! ```
//! use cordon_sandbox::policy::SandboxPolicy;
//! use cordon_sandbox::syscall_rules::rules;
//!
//! let policy = SandboxPolicy::from_json(r#"{"version":1,"filesystem":{},
//!   "network":{"mode":"denied"},
//!   "enforcement":{"missing_layer":"refuse","carve_outs":"refuse"}}"#).unwrap();
//! let rules = rules(&policy);
//! assert!(rules.iter().any(|r| r.syscall == "socket" && r.errno == libc::EPERM));
//! assert!(rules.iter().all(|r| !r.reason.is_empty()));
//! ```

use std::collections::{BTreeMap, BTreeSet};

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

use crate::error::SetupError;
use crate::policy::{SandboxPolicy, UnixSockets};

/// A condition on one system-call argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// The 32-bit argument equals the value.
    Eq32(u8, u64),
    /// The 32-bit argument differs from the value.
    Ne32(u8, u64),
    /// The 32-bit argument, masked, equals the value.
    Masked32(u8, u64, u64),
    /// The 64-bit argument, masked, equals the value.
    Masked64(u8, u64, u64),
    /// The 64-bit argument is not zero (a pointer that is not NULL).
    NonZero64(u8),
}

/// One refused system call (or one refused use of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallRule {
    /// The system call's name.
    pub syscall: &'static str,
    /// Its number on this architecture.
    pub nr: i64,
    /// All must hold for the rule to apply; empty means always.
    pub when: Vec<Arg>,
    /// The errno returned instead of running the call.
    pub errno: i32,
    /// Why the rule exists.
    pub reason: &'static str,
}

fn rule(
    syscall: &'static str,
    nr: i64,
    when: &[Arg],
    errno: i32,
    reason: &'static str,
) -> SyscallRule {
    SyscallRule {
        syscall,
        nr,
        when: when.to_vec(),
        errno,
        reason,
    }
}

const UNIX_FAMILY: u64 = libc::AF_UNIX as u64;
/// `SOCK_TYPE_MASK` in the kernel: the type without `SOCK_CLOEXEC`/`SOCK_NONBLOCK`.
const SOCK_TYPE_MASK: u64 = 0xf;
const DGRAM_TYPE: u64 = libc::SOCK_DGRAM as u64;

/// The rules for `policy`, in a fixed order.
pub fn rules(policy: &SandboxPolicy) -> Vec<SyscallRule> {
    use libc::*;
    let mut r = vec![
        rule("io_uring_setup", SYS_io_uring_setup, &[], EPERM,
            "io_uring performs file and socket operations that seccomp cannot see"),
        rule("io_uring_enter", SYS_io_uring_enter, &[], EPERM,
            "io_uring performs file and socket operations that seccomp cannot see"),
        rule("io_uring_register", SYS_io_uring_register, &[], EPERM,
            "io_uring performs file and socket operations that seccomp cannot see"),
        rule("ptrace", SYS_ptrace, &[], EPERM,
            "tracing another process reads and rewrites its memory and can outlive its confinement"),
        rule("process_vm_readv", SYS_process_vm_readv, &[], EPERM,
            "reads another process's memory directly"),
        rule("process_vm_writev", SYS_process_vm_writev, &[], EPERM,
            "writes another process's memory directly"),
        rule("bpf", SYS_bpf, &[], EPERM,
            "eBPF is a large kernel attack surface and can observe other processes"),
        rule("perf_event_open", SYS_perf_event_open, &[], EPERM,
            "performance counters leak information about other processes and the kernel"),
        rule("userfaultfd", SYS_userfaultfd, &[], EPERM,
            "lets a process stall the kernel mid-copy, a staple of kernel exploits"),
        rule("kexec_load", SYS_kexec_load, &[], EPERM, "replaces the running kernel"),
        rule("kexec_file_load", SYS_kexec_file_load, &[], EPERM, "replaces the running kernel"),
        rule("init_module", SYS_init_module, &[], EPERM, "loads code into the kernel"),
        rule("finit_module", SYS_finit_module, &[], EPERM, "loads code into the kernel"),
        rule("delete_module", SYS_delete_module, &[], EPERM, "unloads kernel code"),
        rule("keyctl", SYS_keyctl, &[], EPERM,
            "the kernel keyring is shared with the user's other processes and holds their secrets"),
        rule("add_key", SYS_add_key, &[], EPERM,
            "the kernel keyring is shared with the user's other processes"),
        rule("request_key", SYS_request_key, &[], EPERM,
            "the kernel keyring is shared with the user's other processes"),
        rule("mount", SYS_mount, &[], EPERM, "mounting over a path changes what Landlock rules see"),
        rule("umount2", SYS_umount2, &[], EPERM, "unmounting can expose what a mount hid"),
        rule("pivot_root", SYS_pivot_root, &[], EPERM, "changes the filesystem root"),
        rule("fsopen", SYS_fsopen, &[], EPERM, "new mount API: creates filesystems"),
        rule("fsconfig", SYS_fsconfig, &[], EPERM, "new mount API: configures filesystems"),
        rule("fsmount", SYS_fsmount, &[], EPERM, "new mount API: creates mounts"),
        rule("fspick", SYS_fspick, &[], EPERM, "new mount API: reconfigures mounts"),
        rule("move_mount", SYS_move_mount, &[], EPERM, "new mount API: attaches mounts"),
        rule("open_tree", SYS_open_tree, &[], EPERM, "new mount API: clones mount trees"),
        rule("mount_setattr", SYS_mount_setattr, &[], EPERM, "new mount API: changes mount flags"),
        rule("ioctl", SYS_ioctl, &[Arg::Eq32(1, TIOCSTI as u64)], EPERM,
            "TIOCSTI types characters into the terminal, which the user's shell runs after cordon exits"),
        rule("ioctl", SYS_ioctl, &[Arg::Eq32(1, TIOCLINUX as u64)], EPERM,
            "TIOCLINUX can paste the console selection, which injects input like TIOCSTI"),
        rule("unshare", SYS_unshare, &[Arg::Masked32(0, CLONE_NEWUSER as u64, CLONE_NEWUSER as u64)], EPERM,
            "a new user namespace grants capabilities in it and opens kernel attack surface"),
        rule("clone", SYS_clone, &[Arg::Masked64(0, CLONE_NEWUSER as u64, CLONE_NEWUSER as u64)], EPERM,
            "a new user namespace grants capabilities in it and opens kernel attack surface"),
        rule("clone3", SYS_clone3, &[], ENOSYS,
            "clone3 passes its flags in memory that seccomp cannot read; ENOSYS makes libc fall back to clone"),
    ];
    let network_denied = policy.network.mode.is_denied();
    if network_denied {
        r.push(rule(
            "socket",
            SYS_socket,
            &[Arg::Ne32(0, UNIX_FAMILY)],
            EPERM,
            "network mode denied: only AF_UNIX sockets may be created",
        ));
        r.push(rule(
            "socketpair",
            SYS_socketpair,
            &[Arg::Ne32(0, UNIX_FAMILY)],
            EPERM,
            "network mode denied: only AF_UNIX socket pairs may be created",
        ));
    }
    if policy.network.unix_sockets == UnixSockets::Deny {
        if network_denied {
            // Every socket the command can create is AF_UNIX, so refusing connect and addressed
            // sendto outright refuses exactly the unix sockets, and keeps the path in the error.
            r.push(rule("connect", SYS_connect, &[], EPERM,
                "unix sockets denied: connecting could reach a socket outside the sandbox (docker, ssh-agent, D-Bus)"));
            r.push(rule("sendto", SYS_sendto, &[Arg::NonZero64(4)], EPERM,
                "unix sockets denied: a datagram with a destination could reach a socket outside the sandbox"));
        } else {
            // With the network on, connect must work for TCP, so no unix socket may be made.
            r.push(rule("socket", SYS_socket, &[Arg::Eq32(0, UNIX_FAMILY)], EPERM,
                "unix sockets denied: with the network enabled, connect cannot be filtered by family, so unix sockets cannot be created"));
        }
        r.push(rule("socket", SYS_socket, &[Arg::Eq32(0, UNIX_FAMILY), Arg::Masked32(1, SOCK_TYPE_MASK, DGRAM_TYPE)], EPERM,
            "unix sockets denied: sendmsg's destination is invisible to seccomp, so no unix datagram sockets"));
        r.push(rule(
            "socketpair",
            SYS_socketpair,
            &[
                Arg::Eq32(0, UNIX_FAMILY),
                Arg::Masked32(1, SOCK_TYPE_MASK, DGRAM_TYPE),
            ],
            EPERM,
            "unix sockets denied: a datagram pair can still sendmsg to a named socket outside",
        ));
    }
    r
}

fn condition(arg: Arg) -> Result<SeccompCondition, seccompiler::BackendError> {
    let (index, len, op, value) = match arg {
        Arg::Eq32(i, v) => (i, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, v),
        Arg::Ne32(i, v) => (i, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, v),
        Arg::Masked32(i, m, v) => (i, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(m), v),
        Arg::Masked64(i, m, v) => (i, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(m), v),
        Arg::NonZero64(i) => (i, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0),
    };
    SeccompCondition::new(index, len, op, value)
}

fn target_arch() -> Result<TargetArch, SetupError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| SetupError::Seccomp {
        what: "select architecture",
        message: e.to_string(),
        errno: None,
    })
}

/// Compiles `rules` into the BPF programs to install, in installation order.
pub fn compile(rules: &[SyscallRule]) -> Result<Vec<BpfProgram>, SetupError> {
    let arch = target_arch()?;
    let compile_error = |e: &dyn std::fmt::Display| SetupError::Seccomp {
        what: "compile",
        message: e.to_string(),
        errno: None,
    };
    let mut by_errno: BTreeMap<i32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
    let mut unconditional = BTreeSet::new();
    for r in rules {
        if unconditional.contains(&(r.errno, r.nr)) {
            continue;
        }
        let conditions = r
            .when
            .iter()
            .map(|&a| condition(a))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| compile_error(&e))?;
        let chain = by_errno
            .entry(r.errno)
            .or_default()
            .entry(r.nr)
            .or_default();
        if conditions.is_empty() {
            // seccompiler expresses "always" as an empty rule chain.
            chain.clear();
            unconditional.insert((r.errno, r.nr));
            continue;
        }
        chain.push(SeccompRule::new(conditions).map_err(|e| compile_error(&e))?);
    }
    let mut programs = Vec::new();
    for (errno, map) in by_errno {
        let filter = SeccompFilter::new(
            map,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .map_err(|e| compile_error(&e))?;
        programs.push(BpfProgram::try_from(filter).map_err(|e| compile_error(&e))?);
    }
    if arch == TargetArch::x86_64 {
        programs.push(x32_program());
    }
    Ok(programs)
}

/// Refuses every x32 system call (native audit arch, number with bit 30 set) with EPERM.
/// The x32 ABI reaches the same kernel socket code under numbers the main filter never sees.
fn x32_program() -> BpfProgram {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const ARCH_OFFSET: u32 = 4;
    const NR_OFFSET: u32 = 0;
    let stmt = |code, k| sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code, k, jt, jf| sock_filter { code, jt, jf, k };
    vec![
        stmt(LD_W_ABS, ARCH_OFFSET),
        jump(JEQ_K, AUDIT_ARCH_X86_64, 0, 3),
        stmt(LD_W_ABS, NR_OFFSET),
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(RET_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Installs the programs. Needs `no_new_privs` (or CAP_SYS_ADMIN).
pub fn install(programs: &[BpfProgram]) -> Result<(), SetupError> {
    for program in programs {
        seccompiler::apply_filter(program).map_err(|e| SetupError::Seccomp {
            what: "install",
            errno: std::io::Error::last_os_error().raw_os_error(),
            message: e.to_string(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::*;

    fn policy(mode: NetworkMode, unix: UnixSockets) -> SandboxPolicy {
        SandboxPolicy {
            version: POLICY_VERSION,
            filesystem: FilesystemPolicy::default(),
            network: NetworkPolicy {
                mode,
                unix_sockets: unix,
                tcp_connect: None,
                tcp_bind: None,
            },
            enforcement: EnforcementPolicy::STRICT,
            markers: None,
        }
    }

    #[test]
    fn every_rule_has_a_reason_and_compiles() {
        for mode in [NetworkMode::Denied, NetworkMode::Enabled] {
            for unix in [UnixSockets::Deny, UnixSockets::Allow] {
                let rules = rules(&policy(mode, unix));
                assert!(rules.iter().all(|r| r.reason.len() > 10), "{rules:?}");
                let programs = compile(&rules).unwrap();
                assert!(!programs.is_empty());
            }
        }
    }

    #[test]
    fn network_enabled_keeps_connect() {
        let rules = rules(&policy(NetworkMode::Enabled, UnixSockets::Deny));
        assert!(!rules.iter().any(|r| r.syscall == "connect"));
        let rules = rules_for_allow();
        assert!(!rules
            .iter()
            .any(|r| r.syscall == "connect" || r.syscall == "socket"));
    }

    fn rules_for_allow() -> Vec<SyscallRule> {
        rules(&policy(NetworkMode::Enabled, UnixSockets::Allow))
    }

    #[test]
    fn clone3_gets_enosys() {
        let rules = rules(&policy(NetworkMode::Denied, UnixSockets::Deny));
        let clone3 = rules.iter().find(|r| r.syscall == "clone3").unwrap();
        assert_eq!(clone3.errno, libc::ENOSYS);
    }
}
