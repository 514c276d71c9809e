//! The seccomp layer, as data: every rule names a system call, the argument conditions under
//! which it is refused, the errno returned, and one line saying why.
//!
//! The filter is a deny-list on top of Landlock: Landlock decides *which files*, seccomp removes
//! the kernel interfaces that bypass or attack the sandbox, and the socket families that the
//! policy's network mode forbids. [`compile`] turns the table into one BPF program
//! ([`crate::bpf`] describes its layout); on x86_64 it also refuses x32 system calls, which
//! share the native audit arch but use other numbers, and non-native ABIs (i386 through
//! `int 0x80`) fail its architecture check and kill the process.
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

use seccompiler::BpfProgram;

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
    /// The 32-bit argument has at least one of the mask's bits set.
    AnyBits32(u8, u64),
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

impl SyscallRule {
    /// Whether every condition holds for a call with `args` (as the compiled filter checks
    /// them: 32-bit conditions on the low word).
    pub fn holds(&self, args: &[u64; 6]) -> bool {
        let low = |i: u8| args[usize::from(i)] & 0xffff_ffff;
        self.when.iter().all(|&a| match a {
            Arg::Eq32(i, v) => low(i) == v,
            Arg::Ne32(i, v) => low(i) != v,
            Arg::Masked32(i, m, v) => low(i) & m == v,
            Arg::Masked64(i, m, v) => args[usize::from(i)] & m == v,
            Arg::NonZero64(i) => args[usize::from(i)] != 0,
            Arg::AnyBits32(i, m) => low(i) & m != 0,
        })
    }
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

/// Which processes belong to the confined command, as far as a static filter can tell.
///
/// seccomp cannot ask "is this pid inside the sandbox", so calls that act on another process
/// by pid are allowed only for pid 0 (the caller) and the helper's own pid, which the command
/// keeps across `execve`; every other pid is refused, including a descendant's own explicit pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessScope {
    /// The helper's pid, or `None` when unknown (then only pid 0 is the command's own).
    pub own_pid: Option<u32>,
    /// The helper leads its own session (cordon starts it with `setsid`), so its process group
    /// can hold sandboxed processes only: a process can join a group only in its own session.
    pub leads_session: bool,
    /// The command has an IPC namespace of its own (the namespace layer), so System V IPC and
    /// POSIX message queues reach only its own objects and are allowed.
    pub ipc_namespace: bool,
}

impl ProcessScope {
    /// Nothing known: only pid 0 counts as the command's own, and no process group does.
    pub const UNKNOWN: ProcessScope = ProcessScope {
        own_pid: None,
        leads_session: false,
        ipc_namespace: false,
    };

    /// The command under the namespace layer: the first child of the pid namespace's init, so
    /// pid 2 there (pid 1 is the init); it leads a process group of its own, and every group it
    /// can name lies inside the namespace; its IPC namespace is private.
    pub const IN_NAMESPACES: ProcessScope = ProcessScope {
        own_pid: Some(crate::namespaces::COMMAND_PID),
        leads_session: true,
        ipc_namespace: true,
    };

    /// The scope of the calling process, which is about to become the command.
    pub fn of_this_process() -> ProcessScope {
        // SAFETY: getpid and getsid(0) only read the caller's own ids and cannot fail.
        let (pid, sid) = unsafe { (libc::getpid(), libc::getsid(0)) };
        ProcessScope {
            own_pid: u32::try_from(pid).ok(),
            leads_session: sid == pid,
            ipc_namespace: false,
        }
    }
}

/// The rules for `policy`, in a fixed order, for a command whose pid is not known
/// ([`ProcessScope::UNKNOWN`]: only pid 0 counts as its own). The helper uses [`rules_for`].
pub fn rules(policy: &SandboxPolicy) -> Vec<SyscallRule> {
    rules_for(policy, &ProcessScope::UNKNOWN)
}

/// The rules for `policy` and a command running as `scope`, in a fixed order.
// The ioctl request constants are `c_ulong` on glibc and `c_int` on musl; the casts are for musl.
#[allow(clippy::unnecessary_cast)]
pub fn rules_for(policy: &SandboxPolicy, scope: &ProcessScope) -> Vec<SyscallRule> {
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
        // Refused by the kernel anyway once the sandbox drops the capabilities (as for root,
        // whose capabilities these are); refused here too so that the refusal is seen, and
        // named, by the observer. An ordinary caller lacked them outside too: the parent
        // counts no denial then (`evidence::observer`).
        rule("chroot", SYS_chroot, &[], EPERM,
            "changing the root directory needs CAP_SYS_CHROOT, which the sandbox drops"),
        rule("sethostname", SYS_sethostname, &[], EPERM,
            "the host name is the whole host's: CAP_SYS_ADMIN, which the sandbox drops"),
        rule("setdomainname", SYS_setdomainname, &[], EPERM,
            "the domain name is the whole host's: CAP_SYS_ADMIN, which the sandbox drops"),
        rule("settimeofday", SYS_settimeofday, &[], EPERM,
            "the clock is the whole host's: CAP_SYS_TIME, which the sandbox drops"),
        rule("clock_settime", SYS_clock_settime, &[], EPERM,
            "the clock is the whole host's: CAP_SYS_TIME, which the sandbox drops"),
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
    r.extend(process_rules(scope));
    if !scope.ipc_namespace {
        r.extend(ipc_rules());
    }
    r.extend(mode_rules());
    r.extend(socket_rules(policy));
    r
}

/// The families a command may create with the network enabled, and why each is needed:
/// `AF_UNIX` (local sockets, further limited by the unix-socket setting), `AF_INET` and
/// `AF_INET6` (the network), `AF_NETLINK` (route and address queries: glibc's `getaddrinfo`
/// with `AI_ADDRCONFIG`, `getifaddrs`, `if_nametoindex`; only `NETLINK_ROUTE`, see below).
const NETWORK_FAMILIES: [i32; 4] = [
    libc::AF_UNIX,
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_NETLINK,
];

/// Socket types (the kernel's four-bit type field) refused on `AF_UNIX` while unix sockets are
/// denied: the complement of the allow-list, stream (1) and seqpacket (5). A stream socket
/// refuses a destination on send (`EISCONN`/`EOPNOTSUPP`) and a seqpacket one ignores it
/// (`unix_seqpacket_sendmsg`), so neither can address a socket outside; everything else either
/// has datagram semantics or is refused so that a type a later kernel gives them cannot pass.
/// Each entry is `(mask, value)` over the type field, so that a group of types costs one rule
/// (the filter is compiled before every command; fewer rules install faster).
const UNIX_TYPES_REFUSED: [(u64, u64, &str); 5] = [
    (0xf, 0, "unix sockets denied: type 0 is no unix type; only stream and seqpacket pass"),
    (0xe, 2, "unix sockets denied: SOCK_DGRAM (2) carries a destination in sendmsg/sendmmsg that seccomp cannot read, and the kernel turns AF_UNIX SOCK_RAW (3) into SOCK_DGRAM (unix_create)"),
    (0xf, 4, "unix sockets denied: SOCK_RDM is no unix type today; refused so that a later kernel cannot make it a datagram socket"),
    (0xe, 6, "unix sockets denied: SOCK_DCCP (6) and type 7 are no unix types today; refused so that a later kernel cannot make them datagram sockets"),
    (0x8, 8, "unix sockets denied: types 8-15 (SOCK_PACKET, the unassigned ones, beyond SOCK_MAX) are no unix types; only stream and seqpacket pass"),
];

/// Socket types refused on `AF_INET`/`AF_INET6` while TCP port lists are in force: Landlock's
/// port rules govern only stream sockets with protocol TCP, so every type but stream (1, whose
/// protocol is checked separately) and datagram (2: UDP, ICMP echo, governed by the network mode
/// alone, as documented) is refused. `(mask, value)` over the type field, as above.
const INET_TYPES_REFUSED_UNDER_PORTS: [(u64, u64, &str); 4] = [
    (0xf, 0, "TCP port lists: type 0 is no inet type; only stream (TCP) and datagram pass"),
    (0xf, 3, "TCP port lists: a raw socket crafts TCP segments to any port (and needs CAP_NET_RAW, which is dropped)"),
    (0xc, 4, "TCP port lists: SOCK_RDM (4), SOCK_SEQPACKET (5, SCTP), SOCK_DCCP (6) and type 7 connect or bind outside Landlock's TCP port rules"),
    (0x8, 8, "TCP port lists: types 8-15 (SOCK_PACKET, the unassigned ones, beyond SOCK_MAX) are outside Landlock's TCP port rules"),
];

/// The socket rules: which families, which types, and (unix sockets denied) which calls could
/// address or offer a unix socket outside the sandbox. seccomp sees only register arguments, so
/// every rule is on the family, type, protocol or flags, never on an address.
fn socket_rules(policy: &SandboxPolicy) -> Vec<SyscallRule> {
    use libc::*;
    let network_denied = policy.network.mode.is_denied();
    let unix_denied = policy.network.unix_sockets == UnixSockets::Deny;
    let ports_in_force = policy.network.tcp_connect.is_some() || policy.network.tcp_bind.is_some();
    let mut r = Vec::new();
    if network_denied {
        r.push(rule(
            "socket",
            SYS_socket,
            &[Arg::Ne32(0, UNIX_FAMILY)],
            EPERM,
            "network mode denied: only AF_UNIX sockets may be created",
        ));
    } else {
        let outside_allow_list: Vec<Arg> = NETWORK_FAMILIES
            .iter()
            .map(|&family| Arg::Ne32(0, family as u64))
            .collect();
        r.extend(vec![
            rule("socket", SYS_socket, &outside_allow_list, EPERM,
                "network enabled: only unix, inet, inet6 and netlink route; vsock, alg, key, packet, bluetooth, tipc, xdp and the rest reach kernel subsystems and hosts that networking does not need"),
            rule("socket", SYS_socket, &[Arg::Eq32(0, AF_NETLINK as u64), Arg::Ne32(2, NETLINK_ROUTE as u64)], EPERM,
                "network enabled: netlink only for route queries; the other protocols (audit, sock_diag, uevent, generic, netfilter) administer or observe the host"),
        ]);
    }
    r.push(rule("socketpair", SYS_socketpair, &[Arg::Ne32(0, UNIX_FAMILY)], EPERM,
        "only unix socket pairs are local; the one other family with pairs (tipc) is a cluster network"));
    if !network_denied && ports_in_force {
        for family in [AF_INET as u64, AF_INET6 as u64] {
            let is_family = Arg::Eq32(0, family);
            for (mask, kind, reason) in INET_TYPES_REFUSED_UNDER_PORTS {
                let is_kind = Arg::Masked32(1, mask, kind);
                r.push(rule(
                    "socket",
                    SYS_socket,
                    &[is_family, is_kind],
                    EPERM,
                    reason,
                ));
            }
            let stream = Arg::Masked32(1, SOCK_TYPE_MASK, SOCK_STREAM as u64);
            let (not_default, not_tcp) = (Arg::Ne32(2, 0), Arg::Ne32(2, IPPROTO_TCP as u64));
            r.push(rule("socket", SYS_socket, &[is_family, stream, not_default, not_tcp], EPERM,
                "TCP port lists: Landlock governs only protocol TCP; MPTCP, SCTP and SMC stream sockets would reach any port"));
        }
    }
    if !network_denied && policy.network.tcp_connect.is_some() {
        // The flags are a register argument of all three calls, and sendmmsg overwrites each
        // message's msg_flags with it, so no message can carry the flag past the filter.
        let fastopen = MSG_FASTOPEN as u64;
        r.extend(vec![
            rule("sendto", SYS_sendto, &[Arg::Masked32(3, fastopen, fastopen)], EPERM,
                "TCP connect list: MSG_FASTOPEN connects without connect(), which Landlock's port rule does not see"),
            rule("sendmsg", SYS_sendmsg, &[Arg::Masked32(2, fastopen, fastopen)], EPERM,
                "TCP connect list: MSG_FASTOPEN connects without connect(), which Landlock's port rule does not see"),
            rule("sendmmsg", SYS_sendmmsg, &[Arg::Masked32(3, fastopen, fastopen)], EPERM,
                "TCP connect list: MSG_FASTOPEN connects without connect(), which Landlock's port rule does not see"),
        ]);
    }
    if !unix_denied {
        return r;
    }
    let is_unix = Arg::Eq32(0, UNIX_FAMILY);
    if network_denied {
        // Every socket the command can create is AF_UNIX, so refusing these outright refuses
        // exactly the unix sockets, and keeps the path in the error.
        r.extend(vec![
            rule("connect", SYS_connect, &[], EPERM,
                "unix sockets denied: connecting could reach a socket outside the sandbox (docker, ssh-agent, D-Bus)"),
            rule("sendto", SYS_sendto, &[Arg::NonZero64(4)], EPERM,
                "unix sockets denied: a datagram with a destination could reach a socket outside the sandbox"),
            rule("bind", SYS_bind, &[], EPERM,
                "unix sockets denied: a bound name (path, abstract or autobind) is a socket a process outside could reach"),
            rule("listen", SYS_listen, &[], EPERM,
                "unix sockets denied: a listening unix socket is a server that processes outside could connect to"),
        ]);
        for (mask, kind, reason) in UNIX_TYPES_REFUSED {
            let is_kind = Arg::Masked32(1, mask, kind);
            r.push(rule(
                "socket",
                SYS_socket,
                &[is_unix, is_kind],
                EPERM,
                reason,
            ));
        }
    } else {
        // With the network on, connect, bind and listen must work for TCP, so no unix socket
        // may be made. A stream or seqpacket pair can still be bound to a name, but it is
        // connected: listen() fails with EINVAL and a connecting client gets ECONNREFUSED.
        r.push(rule("socket", SYS_socket, &[is_unix], EPERM,
            "unix sockets denied: with the network enabled, connect cannot be filtered by family, so unix sockets cannot be created"));
    }
    for (mask, kind, reason) in UNIX_TYPES_REFUSED {
        let is_kind = Arg::Masked32(1, mask, kind);
        r.push(rule(
            "socketpair",
            SYS_socketpair,
            &[is_unix, is_kind],
            EPERM,
            reason,
        ));
    }
    r
}

/// `which` values of `setpriority` and `ioprio_set` (`PRIO_*` in libc; `IOPRIO_WHO_*` from
/// `linux/ioprio.h`, which libc does not export).
const PRIO_PROCESS_WHICH: u64 = libc::PRIO_PROCESS as u64;
const PRIO_PGRP_WHICH: u64 = libc::PRIO_PGRP as u64;
const PRIO_USER_WHICH: u64 = libc::PRIO_USER as u64;
const IOPRIO_PROCESS_WHICH: u64 = 1;
const IOPRIO_PGRP_WHICH: u64 = 2;
const IOPRIO_USER_WHICH: u64 = 3;
/// `PR_SCHED_CORE`, the `prctl` option that shares core-scheduling cookies between processes.
const SCHED_CORE_OPTION: u64 = 62;

/// Refusals of calls that change another process's resource limits, scheduling or memory
/// placement. Landlock checks none of prlimit64, setpriority, the sched_set* calls and
/// ioprio_set. prlimit64 asks only that the uid match, so a command reaches every process of
/// its user, cordon included. The others also ask (in the capability module) that the target
/// hold no capability the caller lacks: that spares root's fully privileged processes, but not
/// a single process of an ordinary user, whose processes hold no capabilities. migrate_pages,
/// move_pages, process_madvise, pidfd_getfd and PR_SCHED_CORE do make a ptrace-mode check,
/// which Landlock's ptrace restriction answers, but Landlock may be absent under
/// `enforcement = "report"`, so they are refused here too.
///
/// A pid is the command's own when it is 0 or the helper's pid (kept across `execve`). A
/// descendant naming itself by its explicit pid (or a thread by its tid, as
/// `pthread_setaffinity_np` and `pthread_setschedparam` do) is refused like any other process:
/// seccomp cannot tell it is inside. The pid and process-group ids are compared as 32 bits,
/// as the kernel reads them (`pid_t`).
///
/// Left alone on purpose: `setrlimit`, `set_mempolicy`, `set_mempolicy_home_node` and `mbind`
/// act on the caller only; the readers (`getpriority`, `sched_get*`, `ioprio_get`, `kcmp`) change
/// nothing; `process_mrelease` only frees the memory of a process already being killed; signals
/// are Landlock's scope (ABI 6), reported as a downgrade where it is missing.
fn process_rules(scope: &ProcessScope) -> Vec<SyscallRule> {
    use libc::*;
    // Conditions meaning "argument `i` names some process other than the command's own".
    let other = |i: u8, also: &[Arg]| -> Vec<Arg> {
        let mut when = vec![Arg::Ne32(i, 0)];
        when.extend(scope.own_pid.map(|pid| Arg::Ne32(i, u64::from(pid))));
        when.extend_from_slice(also);
        when
    };
    // A process group is the command's own only when the helper leads its session.
    let other_group = |which: u64| -> Vec<Arg> {
        if scope.leads_session {
            other(1, &[Arg::Eq32(0, which)])
        } else {
            vec![Arg::Eq32(0, which)]
        }
    };
    vec![
        rule("prlimit64", SYS_prlimit64, &other(0, &[Arg::NonZero64(2)]), EPERM,
            "setting another process's limits needs no capability for the same uid: RLIMIT_CPU kills it, RLIMIT_CORE makes it dump its memory (cordon's withheld secrets); reading (new limit NULL) stays allowed"),
        rule("setpriority", SYS_setpriority, &other(1, &[Arg::Eq32(0, PRIO_PROCESS_WHICH)]), EPERM,
            "renicing another process of the same uid needs no capability"),
        rule("setpriority", SYS_setpriority, &other_group(PRIO_PGRP_WHICH), EPERM,
            "renicing a process group other than the command's own reaches processes outside the sandbox"),
        rule("setpriority", SYS_setpriority, &[Arg::Eq32(0, PRIO_USER_WHICH)], EPERM,
            "PRIO_USER renices every process of the uid, those outside the sandbox included"),
        rule("sched_setaffinity", SYS_sched_setaffinity, &other(0, &[]), EPERM,
            "pinning another process of the same uid to CPUs needs no capability"),
        rule("sched_setscheduler", SYS_sched_setscheduler, &other(0, &[]), EPERM,
            "changing another process's scheduling policy (SCHED_IDLE starves it) needs no capability for the same uid"),
        rule("sched_setparam", SYS_sched_setparam, &other(0, &[]), EPERM,
            "changing another process's scheduling priority needs no capability for the same uid"),
        rule("sched_setattr", SYS_sched_setattr, &other(0, &[]), EPERM,
            "changing another process's scheduling attributes needs no capability for the same uid"),
        rule("ioprio_set", SYS_ioprio_set, &other(1, &[Arg::Eq32(0, IOPRIO_PROCESS_WHICH)]), EPERM,
            "setting another process's I/O priority (idle class starves it) needs no capability for the same uid"),
        rule("ioprio_set", SYS_ioprio_set, &other_group(IOPRIO_PGRP_WHICH), EPERM,
            "setting the I/O priority of a process group other than the command's own reaches processes outside"),
        rule("ioprio_set", SYS_ioprio_set, &[Arg::Eq32(0, IOPRIO_USER_WHICH)], EPERM,
            "IOPRIO_WHO_USER changes every process of the uid, those outside the sandbox included"),
        rule("migrate_pages", SYS_migrate_pages, &other(0, &[]), EPERM,
            "moves another process's memory between NUMA nodes (ptrace-gated; Landlock may be absent)"),
        rule("move_pages", SYS_move_pages, &other(0, &[]), EPERM,
            "moves or locates another process's pages (ptrace-gated; Landlock may be absent)"),
        rule("process_madvise", SYS_process_madvise, &[], EPERM,
            "advises on the memory of the process a pidfd names, which seccomp cannot compare with the sandbox; madvise covers the command's own"),
        rule("pidfd_getfd", SYS_pidfd_getfd, &[], EPERM,
            "copies a descriptor out of the process a pidfd names, which seccomp cannot compare with the sandbox (ptrace-gated; Landlock may be absent)"),
        rule("prctl", SYS_prctl, &other(2, &[Arg::Eq32(0, SCHED_CORE_OPTION)]), EPERM,
            "PR_SCHED_CORE shares core-scheduling cookies with another process (ptrace-gated; Landlock may be absent)"),
    ]
}

/// Refusals of System V IPC and POSIX message queues. Their objects live in the IPC namespace
/// the helper shares with every other process of the machine, under global keys or names and
/// guessable ids, and no Landlock right covers them: a command could list, read, rewrite and
/// remove another program's segments, queues and semaphores, or leave its own for outside
/// processes to find. Under the namespace layer the IPC namespace is the command's own, and
/// these rules are left out ([`ProcessScope::ipc_namespace`]); without it they are refused. x86_64 and aarch64 have no `ipc(2)` multiplexer to cover (it
/// exists on i386, whose system calls the filter kills). POSIX shared memory and semaphores are
/// files in `/dev/shm`, which Landlock governs.
fn ipc_rules() -> Vec<SyscallRule> {
    use libc::*;
    vec![
        rule("shmget", SYS_shmget, &[], EPERM,
            "System V shared memory is shared with every process: finds or creates segments by global key"),
        rule("shmat", SYS_shmat, &[], EPERM,
            "System V shared memory is shared with every process: maps any segment whose id is guessed"),
        rule("shmctl", SYS_shmctl, &[], EPERM,
            "System V shared memory is shared with every process: lists, inspects and removes segments"),
        rule("shmdt", SYS_shmdt, &[], EPERM,
            "System V shared memory: nothing can be attached (shmat is refused), so detaching is refused with it"),
        rule("msgget", SYS_msgget, &[], EPERM,
            "System V message queues are shared with every process: finds or creates queues by global key"),
        rule("msgsnd", SYS_msgsnd, &[], EPERM,
            "System V message queues are shared with every process: writes into any queue whose id is guessed"),
        rule("msgrcv", SYS_msgrcv, &[], EPERM,
            "System V message queues are shared with every process: takes messages out of any queue"),
        rule("msgctl", SYS_msgctl, &[], EPERM,
            "System V message queues are shared with every process: lists, inspects and removes queues"),
        rule("semget", SYS_semget, &[], EPERM,
            "System V semaphores are shared with every process: finds or creates sets by global key"),
        rule("semop", SYS_semop, &[], EPERM,
            "System V semaphores are shared with every process: changes any set whose id is guessed"),
        rule("semtimedop", SYS_semtimedop, &[], EPERM,
            "System V semaphores are shared with every process: changes any set whose id is guessed"),
        rule("semctl", SYS_semctl, &[], EPERM,
            "System V semaphores are shared with every process: lists, rewrites and removes sets"),
        rule("mq_open", SYS_mq_open, &[], EPERM,
            "POSIX message queues have machine-wide names that Landlock does not govern: opens or creates them"),
        rule("mq_unlink", SYS_mq_unlink, &[], EPERM,
            "POSIX message queues have machine-wide names that Landlock does not govern: removes them"),
        rule("mq_timedsend", SYS_mq_timedsend, &[], EPERM,
            "POSIX message queues: works on a queue descriptor, which only mq_open gives; refused with it"),
        rule("mq_timedreceive", SYS_mq_timedreceive, &[], EPERM,
            "POSIX message queues: works on a queue descriptor, which only mq_open gives; refused with it"),
        rule("mq_notify", SYS_mq_notify, &[], EPERM,
            "POSIX message queues: works on a queue descriptor, which only mq_open gives; refused with it"),
        rule("mq_getsetattr", SYS_mq_getsetattr, &[], EPERM,
            "POSIX message queues: works on a queue descriptor, which only mq_open gives; refused with it"),
    ]
}

/// `fchmodat2` (Linux 6.6), the same number on every architecture; libc does not name it on
/// all of them.
const SYS_FCHMODAT2: i64 = 452;
/// The bits that make an executable run with its owner's or group's privileges.
const SET_ID_BITS: u64 = (libc::S_ISUID | libc::S_ISGID) as u64;
/// The flags with which `open` applies its mode: `O_CREAT`, and `O_TMPFILE` without the
/// `O_DIRECTORY` bit it includes (that bit alone means no file is made).
const CREATING_FLAGS: u64 = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u64;

/// Refusals of every call that sets a mode with the setuid or setgid bit. Landlock does not
/// mediate chmod, so without these a command (as root without capabilities, or as any user on
/// its own files) could leave a setuid copy of a shell that gives whoever runs it later, outside
/// the sandbox, the owner's privileges. The sticky bit and ordinary modes stay allowed.
///
/// `mkdir`/`mkdirat` need no rule: the kernel keeps only the permission and sticky bits of
/// their mode (a directory is setgid only by inheriting it from a setgid parent, which someone
/// outside made so). File capabilities (`security.capability`) need CAP_SETFCAP, which the
/// command does not have. `openat2` passes its mode in memory the filter cannot read, so it gets
/// ENOSYS and libc and programs fall back to `openat`.
fn mode_rules() -> Vec<SyscallRule> {
    use libc::*;
    // (name, number, index of the mode argument)
    let mode_setters: &[(&'static str, i64, u8, &'static str)] = &[
        #[cfg(target_arch = "x86_64")]
        ("chmod", SYS_chmod, 1, "a setuid or setgid file runs with its owner's privileges for whoever executes it outside the sandbox"),
        ("fchmod", SYS_fchmod, 1, "a setuid or setgid file runs with its owner's privileges for whoever executes it outside the sandbox"),
        ("fchmodat", SYS_fchmodat, 2, "a setuid or setgid file runs with its owner's privileges for whoever executes it outside the sandbox"),
        ("fchmodat2", SYS_FCHMODAT2, 2, "a setuid or setgid file runs with its owner's privileges for whoever executes it outside the sandbox"),
        #[cfg(target_arch = "x86_64")]
        ("creat", SYS_creat, 1, "creating a file with the setuid or setgid bit makes a privilege-raising executable"),
        #[cfg(target_arch = "x86_64")]
        ("mknod", SYS_mknod, 1, "mknod(S_IFREG) with the setuid or setgid bit makes a privilege-raising executable"),
        ("mknodat", SYS_mknodat, 2, "mknodat(S_IFREG) with the setuid or setgid bit makes a privilege-raising executable"),
    ];
    // (name, number, index of the flags argument, index of the mode argument)
    let openers: &[(&'static str, i64, u8, u8)] = &[
        #[cfg(target_arch = "x86_64")]
        ("open", SYS_open, 1, 2),
        ("openat", SYS_openat, 2, 3),
    ];
    let mut r = Vec::new();
    for &(name, nr, mode, reason) in mode_setters {
        r.push(rule(
            name,
            nr,
            &[Arg::AnyBits32(mode, SET_ID_BITS)],
            EPERM,
            reason,
        ));
    }
    for &(name, nr, flags, mode) in openers {
        r.push(rule(
            name,
            nr,
            &[Arg::AnyBits32(flags, CREATING_FLAGS), Arg::AnyBits32(mode, SET_ID_BITS)],
            EPERM,
            "creating a file (O_CREAT or O_TMPFILE) with the setuid or setgid bit makes a privilege-raising executable",
        ));
    }
    r.push(rule("openat2", SYS_openat2, &[], ENOSYS,
        "openat2 passes its mode in memory that seccomp cannot read; ENOSYS makes libc and programs fall back to openat"));
    r
}

/// Compiles `rules` into one BPF program; see [`crate::bpf`] for its layout.
pub fn compile(rules: &[SyscallRule]) -> Result<BpfProgram, SetupError> {
    crate::bpf::compile(rules)
}

/// Installs the program. Needs `no_new_privs` (or CAP_SYS_ADMIN).
pub fn install(program: &BpfProgram) -> Result<(), SetupError> {
    seccompiler::apply_filter(program).map_err(|e| SetupError::Seccomp {
        what: "install",
        errno: std::io::Error::last_os_error().raw_os_error(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use seccompiler::sock_filter;

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
                ..NetworkPolicy::default()
            },
            enforcement: EnforcementPolicy::STRICT,
            markers: None,
        }
    }

    /// A classic-BPF interpreter for the instructions seccomp filters use.
    pub(super) fn run(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let insn = &program[pc];
            let code = u32::from(insn.code);
            pc += 1;
            match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    let at = insn.k as usize;
                    acc = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
                }
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => acc &= insn.k,
                c if c == libc::BPF_JMP | libc::BPF_JA => pc += insn.k as usize,
                c if c & 0x07 == libc::BPF_JMP => {
                    let taken = match c & 0xf0 {
                        x if x == libc::BPF_JEQ => acc == insn.k,
                        x if x == libc::BPF_JGT => acc > insn.k,
                        x if x == libc::BPF_JGE => acc >= insn.k,
                        x if x == libc::BPF_JSET => acc & insn.k != 0,
                        other => panic!("unexpected jump {other:#x}"),
                    };
                    pc += usize::from(if taken { insn.jt } else { insn.jf });
                }
                c if c == libc::BPF_RET | libc::BPF_K => return insn.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    /// What the rule table says, evaluated directly (independent of seccompiler and the prefix).
    pub(super) fn oracle(rules: &[SyscallRule], nr: u32, args: [u64; 6]) -> u32 {
        if cfg!(target_arch = "x86_64") && nr >= 0x4000_0000 {
            return libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        }
        let holds = |a: &Arg| match *a {
            Arg::Eq32(i, v) => args[i as usize] & 0xffff_ffff == v,
            Arg::Ne32(i, v) => args[i as usize] & 0xffff_ffff != v,
            Arg::Masked32(i, m, v) => args[i as usize] & 0xffff_ffff & m == v,
            Arg::Masked64(i, m, v) => args[i as usize] & m == v,
            Arg::NonZero64(i) => args[i as usize] != 0,
            Arg::AnyBits32(i, m) => args[i as usize] & 0xffff_ffff & m != 0,
        };
        match rules
            .iter()
            .find(|r| r.nr == i64::from(nr) && r.when.iter().all(holds))
        {
            Some(r) => libc::SECCOMP_RET_ERRNO | r.errno as u32,
            None => libc::SECCOMP_RET_ALLOW,
        }
    }

    #[test]
    fn compiled_program_agrees_with_the_rule_table_for_every_call() {
        let native = match std::env::consts::ARCH {
            "x86_64" => 0xc000_003e,
            "aarch64" => 0xc000_00b7,
            _ => return,
        };
        let interesting: [u64; 9] = [
            0,
            1,
            libc::AF_UNIX as u64,
            libc::AF_INET as u64,
            libc::SOCK_DGRAM as u64 | libc::SOCK_CLOEXEC as u64,
            libc::CLONE_NEWUSER as u64,
            #[allow(clippy::unnecessary_cast)]
            {
                libc::TIOCSTI as u64
            },
            #[allow(clippy::unnecessary_cast)]
            {
                libc::TIOCLINUX as u64 | (1 << 32)
            },
            u64::MAX,
        ];
        for mode in [NetworkMode::Denied, NetworkMode::Enabled] {
            for unix in [UnixSockets::Deny, UnixSockets::Allow] {
                let rules = rules(&policy(mode, unix));
                let program = compile(&rules).unwrap();
                let numbers = (0..600u32).chain([0x4000_0000 | 41, 0x4000_0000 | 42]);
                for nr in numbers {
                    for &a0 in &interesting {
                        for &a1 in &interesting {
                            for a4 in [0, 0x7fff_0000, 1 << 32] {
                                let args = [a0, a1, 0, 0, a4, 0];
                                assert_eq!(
                                    run(&program, native, nr, args),
                                    oracle(&rules, nr, args),
                                    "nr {nr} args {args:x?} ({mode:?}, {unix:?})"
                                );
                            }
                        }
                    }
                }
                // Any other architecture (i386 through int 0x80) is killed.
                let i386 = 0x4000_0003;
                assert_eq!(
                    run(&program, i386, 359, [2, 1, 0, 0, 0, 0]),
                    libc::SECCOMP_RET_KILL_PROCESS
                );
            }
        }
    }

    /// The process, IPC and mode rules compare pids, `which` selectors, flags and modes in
    /// arguments 0 to 3. Every pair of those positions takes every interesting value (the
    /// others held at 0 or all ones), for every scope the helper can be in.
    #[test]
    fn process_ipc_and_mode_conditions_compile_as_the_table_says() {
        let native = match std::env::consts::ARCH {
            "x86_64" => 0xc000_003e,
            "aarch64" => 0xc000_00b7,
            _ => return,
        };
        let own: u32 = 4242;
        let values: Vec<u64> = vec![
            0,
            1,
            2,
            3,
            SCHED_CORE_OPTION,
            u64::from(own),
            u64::from(own) | (1 << 32),
            777,
            u64::MAX,
            0o4755,
            0o2755,
            0o6000,
            0o1777,
            0o755,
            (libc::S_IFREG | 0o4755) as u64,
            (libc::O_CREAT | libc::O_WRONLY) as u64,
            libc::O_TMPFILE as u64 | libc::O_RDWR as u64,
            libc::O_DIRECTORY as u64,
        ];
        let scopes = [
            ProcessScope::UNKNOWN,
            ProcessScope {
                own_pid: Some(own),
                leads_session: true,
                ipc_namespace: false,
            },
            ProcessScope {
                own_pid: Some(own),
                leads_session: false,
                ipc_namespace: false,
            },
        ];
        for scope in scopes {
            let rules = rules_for(&policy(NetworkMode::Denied, UnixSockets::Deny), &scope);
            let program = compile(&rules).unwrap();
            let ruled: BTreeSet<u32> = rules.iter().map(|r| r.nr as u32).collect();
            for nr in 0..600u32 {
                // Calls without rules are checked on one pair; they only pass the search.
                let pairs: &[(usize, usize)] = if ruled.contains(&nr) {
                    &[(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
                } else {
                    &[(0, 2)]
                };
                for &(i, j) in pairs {
                    for background in [0, u64::MAX] {
                        for &vi in &values {
                            for &vj in &values {
                                let mut args = [background; 6];
                                args[i] = vi;
                                args[j] = vj;
                                assert_eq!(
                                    run(&program, native, nr, args),
                                    oracle(&rules, nr, args),
                                    "nr {nr} args {args:x?} ({scope:?})"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn other_processes_are_refused_and_the_own_ones_allowed() {
        let own = 4242;
        let scope = ProcessScope {
            own_pid: Some(own),
            leads_session: true,
            ipc_namespace: false,
        };
        let rules = rules_for(&policy(NetworkMode::Denied, UnixSockets::Deny), &scope);
        let nr = |name: &str| rules.iter().find(|r| r.syscall == name).unwrap().nr as u32;
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        let allow = libc::SECCOMP_RET_ALLOW;
        let new_limit = 0x7fff_1000;
        let own = u64::from(own);
        let cases: [(&str, [u64; 6], u32); 14] = [
            ("prlimit64", [0, 0, new_limit, 0, 0, 0], allow),
            ("prlimit64", [own, 0, new_limit, 0, 0, 0], allow),
            ("prlimit64", [777, 0, new_limit, 0, 0, 0], eperm),
            ("prlimit64", [777, 0, 0, new_limit, 0, 0], allow),
            ("setpriority", [PRIO_PROCESS_WHICH, 0, 5, 0, 0, 0], allow),
            ("setpriority", [PRIO_PROCESS_WHICH, 777, 5, 0, 0, 0], eperm),
            ("setpriority", [PRIO_PGRP_WHICH, own, 5, 0, 0, 0], allow),
            ("setpriority", [PRIO_USER_WHICH, 0, 5, 0, 0, 0], eperm),
            ("ioprio_set", [IOPRIO_USER_WHICH, 0, 0, 0, 0, 0], eperm),
            ("sched_setaffinity", [own, 8, 0, 0, 0, 0], allow),
            ("sched_setaffinity", [own + 1, 8, 0, 0, 0, 0], eperm),
            ("fchmod", [3, 0o4755, 0, 0, 0, 0], eperm),
            ("fchmod", [3, 0o1755, 0, 0, 0, 0], allow),
            ("openat", [0, 0, libc::O_CREAT as u64, 0o2755, 0, 0], eperm),
        ];
        let program = compile(&rules).unwrap();
        let native = match std::env::consts::ARCH {
            "x86_64" => 0xc000_003e,
            "aarch64" => 0xc000_00b7,
            _ => return,
        };
        for (name, args, expected) in cases {
            assert_eq!(oracle(&rules, nr(name), args), expected, "{name} {args:?}");
            assert_eq!(
                run(&program, native, nr(name), args),
                expected,
                "{name} {args:?}"
            );
        }
        // Without the session, no process group is the command's own.
        let alone = ProcessScope {
            leads_session: false,
            ..scope
        };
        let rules = rules_for(&policy(NetworkMode::Denied, UnixSockets::Deny), &alone);
        let args = [PRIO_PGRP_WHICH, 0, 5, 0, 0, 0];
        assert_eq!(oracle(&rules, nr("setpriority"), args), eperm);
    }

    #[test]
    fn every_rule_has_a_reason_and_compiles() {
        for mode in [NetworkMode::Denied, NetworkMode::Enabled] {
            for unix in [UnixSockets::Deny, UnixSockets::Allow] {
                let rules = rules(&policy(mode, unix));
                assert!(rules.iter().all(|r| r.reason.len() > 10), "{rules:?}");
                let program = compile(&rules).unwrap();
                assert!(program.len() > 10);
            }
        }
    }

    #[test]
    fn network_enabled_keeps_connect() {
        let rules = rules(&policy(NetworkMode::Enabled, UnixSockets::Deny));
        assert!(!rules.iter().any(|r| r.syscall == "connect"));
        // The family allow-list stays; connect, bind and listen must serve TCP.
        let rules = rules_for_allow();
        assert!(!rules
            .iter()
            .any(|r| ["connect", "bind", "listen"].contains(&r.syscall)));
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

#[cfg(test)]
mod socket_tests {
    use super::tests::{oracle, run};
    use super::*;
    use crate::policy::*;

    const EPERM_RET: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const FLAGS: [u64; 3] = [
        0,
        (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64,
        // seccomp compares the low half; the kernel reads an int, so the high half is noise.
        1 << 32,
    ];

    fn policy(
        mode: NetworkMode,
        unix: UnixSockets,
        tcp_connect: Option<Vec<u16>>,
        tcp_bind: Option<Vec<u16>>,
    ) -> SandboxPolicy {
        SandboxPolicy {
            version: POLICY_VERSION,
            filesystem: FilesystemPolicy::default(),
            network: NetworkPolicy {
                mode,
                unix_sockets: unix,
                tcp_connect,
                tcp_bind,
                ..NetworkPolicy::default()
            },
            enforcement: EnforcementPolicy::STRICT,
            markers: None,
        }
    }

    /// Every network setting the socket rules distinguish.
    fn every_policy() -> Vec<SandboxPolicy> {
        let mut all = Vec::new();
        for unix in [UnixSockets::Deny, UnixSockets::Allow] {
            all.push(policy(NetworkMode::Denied, unix, None, None));
            all.push(policy(NetworkMode::Enabled, unix, None, None));
            all.push(policy(NetworkMode::Enabled, unix, Some(vec![443]), None));
            all.push(policy(NetworkMode::Enabled, unix, None, Some(vec![8080])));
        }
        all
    }

    fn native() -> Option<u32> {
        match std::env::consts::ARCH {
            "x86_64" => Some(0xc000_003e),
            "aarch64" => Some(0xc000_00b7),
            _ => None,
        }
    }

    /// What the compiled program answers for `nr(args)` under `policy`, checked against the
    /// rule table first.
    fn answer(policy: &SandboxPolicy, nr: i64, args: [u64; 6]) -> u32 {
        let arch = native().expect("checked by the caller");
        let rules = rules(policy);
        let program = compile(&rules).unwrap();
        let nr = u32::try_from(nr).unwrap();
        let got = run(&program, arch, nr, args);
        assert_eq!(got, oracle(&rules, nr, args), "nr {nr} args {args:x?}");
        got
    }

    #[test]
    fn compiled_program_agrees_with_the_rule_table_for_socket_arguments() {
        let Some(arch) = native() else { return };
        let families: [u64; 14] = [0, 1, 2, 10, 15, 16, 17, 30, 31, 38, 40, 44, 45, 2 | 1 << 32];
        let types: Vec<u64> = (0..16u64)
            .flat_map(|t| FLAGS.iter().map(move |f| t | f))
            .collect();
        let protocols: [u64; 8] = [0, 4, 6, 17, 132, 256, 262, 6 | 1 << 32];
        let fastopen = libc::MSG_FASTOPEN as u64;
        let flags: [u64; 4] = [0, libc::MSG_DONTWAIT as u64, fastopen, fastopen | 1 << 32];
        let socket_calls = [
            libc::SYS_socket,
            libc::SYS_socketpair,
            libc::SYS_connect,
            libc::SYS_bind,
            libc::SYS_listen,
            libc::SYS_sendto,
            libc::SYS_sendmsg,
            libc::SYS_sendmmsg,
        ];
        for policy in every_policy() {
            let rules = rules(&policy);
            let program = compile(&rules).unwrap();
            for nr in socket_calls {
                let nr = u32::try_from(nr).unwrap();
                for &a0 in &families {
                    for &a1 in &types {
                        for &a2 in protocols.iter().chain(&flags) {
                            for &a3 in &flags {
                                for a4 in [0, 0x7fff_0000, 1 << 32] {
                                    let args = [a0, a1, a2, a3, a4, 0];
                                    assert_eq!(
                                        run(&program, arch, nr, args),
                                        oracle(&rules, nr, args),
                                        "nr {nr} args {args:x?} {:?}",
                                        policy.network
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn unix_types_are_allow_listed_to_stream_and_seqpacket() {
        if native().is_none() {
            return;
        }
        let unix = libc::AF_UNIX as u64;
        for mode in [NetworkMode::Denied, NetworkMode::Enabled] {
            let denied = policy(mode, UnixSockets::Deny, None, None);
            let allowed = policy(mode, UnixSockets::Allow, None, None);
            for kind in 0..16u64 {
                let passes =
                    kind == libc::SOCK_STREAM as u64 || kind == libc::SOCK_SEQPACKET as u64;
                for flags in FLAGS {
                    let args = [unix, kind | flags, 0, 0, 0, 0];
                    let pair = answer(&denied, libc::SYS_socketpair, args);
                    assert_eq!(
                        pair == EPERM_RET,
                        !passes,
                        "socketpair type {kind} {mode:?}"
                    );
                    let single = answer(&denied, libc::SYS_socket, args);
                    // With the network enabled no unix socket may be created at all.
                    let single_passes = passes && mode == NetworkMode::Denied;
                    assert_eq!(
                        single == EPERM_RET,
                        !single_passes,
                        "socket type {kind} {mode:?}"
                    );
                    assert_eq!(
                        answer(&allowed, libc::SYS_socketpair, args),
                        libc::SECCOMP_RET_ALLOW
                    );
                    assert_eq!(
                        answer(&allowed, libc::SYS_socket, args),
                        libc::SECCOMP_RET_ALLOW
                    );
                }
            }
        }
    }

    #[test]
    fn network_enabled_allows_only_the_families_networking_needs() {
        if native().is_none() {
            return;
        }
        let enabled = policy(NetworkMode::Enabled, UnixSockets::Allow, None, None);
        for family in 0..64u64 {
            let args = [family, libc::SOCK_DGRAM as u64, 0, 0, 0, 0];
            let passes = [
                libc::AF_UNIX,
                libc::AF_INET,
                libc::AF_INET6,
                libc::AF_NETLINK,
            ]
            .contains(&(family as i32));
            assert_eq!(
                answer(&enabled, libc::SYS_socket, args) == EPERM_RET,
                !passes,
                "family {family}"
            );
            let pair_passes = family == libc::AF_UNIX as u64;
            assert_eq!(
                answer(&enabled, libc::SYS_socketpair, args) == EPERM_RET,
                !pair_passes,
                "pair family {family}"
            );
        }
        for protocol in 0..32u64 {
            let args = [
                libc::AF_NETLINK as u64,
                libc::SOCK_RAW as u64,
                protocol,
                0,
                0,
                0,
            ];
            let passes = protocol == libc::NETLINK_ROUTE as u64;
            assert_eq!(
                answer(&enabled, libc::SYS_socket, args) == EPERM_RET,
                !passes,
                "netlink {protocol}"
            );
        }
    }

    #[test]
    fn port_lists_leave_only_tcp_streams_and_datagrams_on_inet() {
        if native().is_none() {
            return;
        }
        let fastopen = libc::MSG_FASTOPEN as u64;
        for (connect, bind) in [(Some(vec![443]), None), (None, Some(vec![8080]))] {
            let ports = policy(
                NetworkMode::Enabled,
                UnixSockets::Deny,
                connect.clone(),
                bind,
            );
            let open = policy(NetworkMode::Enabled, UnixSockets::Deny, None, None);
            for family in [libc::AF_INET as u64, libc::AF_INET6 as u64] {
                for kind in 0..16u64 {
                    for protocol in [0u64, 6, 17, 132, 256, 262] {
                        let args = [family, kind | FLAGS[1], protocol, 0, 0, 0];
                        let passes = kind == libc::SOCK_DGRAM as u64
                            || (kind == libc::SOCK_STREAM as u64
                                && (protocol == 0 || protocol == 6));
                        assert_eq!(
                            answer(&ports, libc::SYS_socket, args) == EPERM_RET,
                            !passes,
                            "family {family} type {kind} protocol {protocol}"
                        );
                        assert_eq!(
                            answer(&open, libc::SYS_socket, args),
                            libc::SECCOMP_RET_ALLOW
                        );
                    }
                }
            }
            // Fast Open connects from sendto/sendmsg/sendmmsg; it only matters to the connect list.
            let refused = if connect.is_some() {
                EPERM_RET
            } else {
                libc::SECCOMP_RET_ALLOW
            };
            assert_eq!(
                answer(&ports, libc::SYS_sendto, [3, 0, 1, fastopen, 0, 0]),
                refused
            );
            assert_eq!(
                answer(&ports, libc::SYS_sendmsg, [3, 0, fastopen, 0, 0, 0]),
                refused
            );
            assert_eq!(
                answer(&ports, libc::SYS_sendmmsg, [3, 0, 1, fastopen, 0, 0]),
                refused
            );
            assert_eq!(
                answer(&ports, libc::SYS_sendto, [3, 0, 1, 0, 0x7fff_0000, 0]),
                libc::SECCOMP_RET_ALLOW
            );
            assert_eq!(
                answer(&ports, libc::SYS_sendmsg, [3, 0, 0, 0, 0, 0]),
                libc::SECCOMP_RET_ALLOW
            );
        }
    }

    #[test]
    fn unix_names_cannot_be_offered_with_the_network_denied() {
        if native().is_none() {
            return;
        }
        let denied = policy(NetworkMode::Denied, UnixSockets::Deny, None, None);
        let allowed = policy(NetworkMode::Denied, UnixSockets::Allow, None, None);
        for nr in [libc::SYS_bind, libc::SYS_listen, libc::SYS_connect] {
            assert_eq!(
                answer(&denied, nr, [3, 0x7fff_0000, 110, 0, 0, 0]),
                EPERM_RET
            );
            assert_eq!(
                answer(&allowed, nr, [3, 0x7fff_0000, 110, 0, 0, 0]),
                libc::SECCOMP_RET_ALLOW
            );
        }
        // With the network enabled bind/listen serve TCP; unix sockets are refused at creation.
        let enabled = policy(NetworkMode::Enabled, UnixSockets::Deny, None, None);
        assert_eq!(
            answer(&enabled, libc::SYS_bind, [3, 0x7fff_0000, 16, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
    }
}
