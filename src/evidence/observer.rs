//! The seccomp observer: a thread answering the notifications of the helper's observer-mode
//! filter (see `cordon_sandbox::observe`).
//!
//! For each notification it reads the call's path or address out of the process
//! (`process_vm_readv`, relative paths against `/proc/PID/cwd` or `/proc/PID/fd/DIRFD`), checks
//! with `SECCOMP_IOCTL_NOTIF_ID_VALID` that the process it read is still the one waiting, and
//! then answers:
//!
//! * a call the kernel filter refuses (the refusal program, run by
//!   [`cordon_sandbox::bpf::evaluate`], answers it with an errno) gets that errno, never
//!   `CONTINUE`; it is a denial of its target;
//! * any other call gets `SECCOMP_USER_NOTIF_FLAG_CONTINUE`, and Landlock decides it in the
//!   kernel; it is a denial when the policy refuses its target (evaluated like the kernel
//!   would: symlinks resolved, an existing target for removal, an absent one for creation).
//!
//! Limits: another thread of the command can rewrite a path between the kernel's reading and
//! ours, so a multi-threaded command can make the observer name a target it did not touch
//! (it still gains nothing it was refused: the answer is the kernel filter's or Landlock's).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use cordon_sandbox::bpf::sock_filter;
use cordon_sandbox::policy::{SandboxPolicy, UnixSockets};
use cordon_sandbox::status::{ConfinementReceipt, Layer, StatusRecord};
use cordon_sandbox::syscall_rules::{self, SyscallRule};

use crate::classify::access::Access;
use crate::classify::{merge, Denial, EvidenceKind, Operation, WRITE_CHECK_RULE};

/// How often the thread looks at its stop flag while no notification comes.
const POLL_MS: libc::c_int = 100;
/// The longest path read out of the process (`PATH_MAX`).
const PATH_MAX: usize = 4096;

/// A running observer.
pub(crate) struct Observer {
    stop: Arc<AtomicBool>,
    seen: Receiver<Vec<Denial>>,
}

/// What the observer judges by.
pub(crate) struct Judge {
    /// The policy the command runs under (as the helper enforces it).
    pub policy: SandboxPolicy,
    /// The helper's receipt: which layers are in force, which carve-outs are not.
    pub receipt: ConfinementReceipt,
    /// The kernel filter's refusals, as the helper compiled them.
    pub refusals: Vec<sock_filter>,
}

impl Observer {
    /// Starts the thread on `listener`. `on_new` is called with each denial the first time its
    /// operation and target are seen.
    pub fn start(
        listener: OwnedFd,
        judge: Judge,
        on_new: impl Fn(&Denial) + Send + 'static,
    ) -> io::Result<Observer> {
        // Each notification wakes the observer and the caller in turn: asking the kernel to
        // switch straight to the waiting side on the same CPU (Linux 6.6) spares a trip
        // through the scheduler both ways. Older kernels refuse the flag; it only costs speed.
        // SAFETY: SET_FLAGS reads no memory; the flag is passed by value.
        unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
            )
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let seen =
            super::spare_threads::run(move || observe(&listener, &judge, &stopping, &on_new))?;
        Ok(Observer { stop, seen })
    }

    /// Stops the thread (once the command is gone) and returns what it saw, merged.
    pub fn finish(self) -> Vec<Denial> {
        self.stop.store(true, Ordering::SeqCst);
        self.seen.recv().unwrap_or_default()
    }
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` from `<linux/seccomp.h>` (not in the libc crate).
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;

/// The program the helper sent in its `observer` record.
pub(crate) fn refusal_program(refusals: &[[u32; 4]]) -> Vec<sock_filter> {
    refusals
        .iter()
        .map(|&[code, jt, jf, k]| sock_filter {
            code: code as u16,
            jt: jt as u8,
            jf: jf as u8,
            k,
        })
        .collect()
}

fn observe(
    listener: &OwnedFd,
    judge: &Judge,
    stop: &AtomicBool,
    on_new: &dyn Fn(&Denial),
) -> Vec<Denial> {
    let records = [StatusRecord::Confined(judge.receipt.clone())];
    let access = Access::new(&judge.policy, Path::new("/"), &records);
    let names = syscall_rules::rules(&judge.policy);
    let fs = &judge.policy.filesystem;
    let ctx = Ctx {
        judge,
        access: &access,
        names: &names,
        link_free: LinkFree::default(),
        pinned: pin_unix_sockets(&judge.policy),
        writable: fs.write.iter().map(PathBuf::as_path).collect(),
        readable: fs
            .read
            .iter()
            .chain(&fs.write)
            .map(PathBuf::as_path)
            .collect(),
    };
    let mut seen: Vec<Denial> = Vec::new();
    // Stopped once the run is over even if calls keep coming: a descendant that escaped the
    // group must not keep the supervisor waiting (its calls then fail, see the module docs).
    while !stop.load(Ordering::SeqCst) {
        let mut poll = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll, 1, POLL_MS) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if ready == 0 || poll.revents & libc::POLLIN == 0 {
            // POLLHUP: every process under the filter is gone.
            if poll.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                break;
            }
            continue;
        }
        let Some(notif) = receive(listener) else {
            continue;
        };
        let (denials, answer) = ctx.judge_call(listener, &notif);
        // Recorded (and announced) before the answer, so that the event comes before
        // anything the command does after the call.
        for d in denials {
            // A check for write access is no denial until the text confirms it (see
            // `classify`): announced only once an attempt on the same target follows, which
            // then also gives the denial its rule.
            let check = d.rule.starts_with(WRITE_CHECK_RULE);
            match seen
                .iter_mut()
                .find(|s| s.operation == d.operation && s.target == d.target)
            {
                Some(s) => {
                    s.count = s.count.saturating_add(1);
                    if s.rule.starts_with(WRITE_CHECK_RULE) && !check {
                        s.rule = d.rule;
                        on_new(s);
                    }
                }
                None => {
                    if !check {
                        on_new(&d);
                    }
                    seen.push(d);
                }
            }
        }
        respond(listener, notif.id, answer);
    }
    merge(seen)
}

/// The answer to one notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Let the kernel run it (Landlock still applies).
    Continue,
    /// Fail it with this errno.
    Refuse(i32),
    /// The observer did it: return this value.
    Return(i64),
}

fn receive(listener: &OwnedFd) -> Option<libc::seccomp_notif> {
    // SAFETY: seccomp_notif is plain data; the kernel requires it zeroed before RECV.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: RECV writes one seccomp_notif into `notif`, which is valid and writable.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut notif as *mut libc::seccomp_notif,
        )
    };
    // ENOENT: the waiting process was killed between poll and receive.
    (rc == 0).then_some(notif)
}

fn respond(listener: &OwnedFd, id: u64, answer: Answer) {
    let (val, error, flags) = match answer {
        Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Answer::Refuse(errno) => (0, -errno, 0),
        Answer::Return(value) => (value, 0, 0),
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: SEND reads one seccomp_notif_resp from `resp`, valid for the call. It fails with
    // ENOENT when the process died meanwhile, which needs no handling.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut libc::seccomp_notif_resp,
        );
    }
}

/// Whether notification `id` still waits: the process whose memory was read is the one that
/// made the call, not a new one with a recycled pid.
fn still_waiting(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: ID_VALID reads one u64 from `id`, valid for the call.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        ) == 0
    }
}

/// A call's target, read out of the waiting process.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// An open: the path, the flags.
    Open(PathBuf, u64),
    /// Creating this entry (mkdir, mknod, symlink, link, bind of a socket path).
    Create(PathBuf),
    /// Removing it.
    Remove(PathBuf),
    /// Renaming the first to the second.
    Rename(PathBuf, PathBuf),
    /// Truncating it by path.
    Truncate(PathBuf),
    /// Executing it.
    Exec(PathBuf),
    /// A check for write access to it (`access(W_OK)`, `test -w`): no attempt, but how some
    /// tools give up without trying.
    WriteCheck(PathBuf),
    /// `connect`, `bind` or `sendto` on socket `fd` with this address.
    Address(SocketCall, RawFd, Address),
    /// Nothing to read (or it could not be read).
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SocketCall {
    Connect,
    Bind,
    SendTo,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Address {
    /// A path socket (`/run/x.sock`) or an abstract one (`@name`).
    Unix(String),
    /// An inet or inet6 address, as `host:port` (`[::1]:80` for inet6), and the port.
    Inet(String, u16),
    Other,
}

struct Ctx<'a> {
    judge: &'a Judge,
    access: &'a Access<'a>,
    names: &'a [SyscallRule],
    /// The sockets of `network.unix_socket_allow`, each opened (`O_PATH`, no link followed)
    /// before the command could touch them: a connection is made to the socket opened here,
    /// whatever the command does to the path afterwards.
    pinned: Vec<(PathBuf, OwnedFd)>,
    /// Directories below a root already seen to be directories, not links (see [`LinkFree`]).
    link_free: LinkFree,
    /// The roots a write may land in, and those a read or an execution may (read and write
    /// roots): made once, asked on every call.
    writable: Vec<&'a Path>,
    readable: Vec<&'a Path>,
}

/// Directories found not to be symbolic links, so that a build writing thousands of files
/// into the same few directories costs one `lstat` per file, not one per component. An entry
/// can only turn into a link by being removed or renamed over first, and the command's removals
/// and renames are all watched calls: each one empties the set before the kernel runs it. What
/// another program outside the sandbox changes is caught by the set's short lifetime. This is
/// evidence only: Landlock decides every call in the kernel whatever the set says.
#[derive(Default)]
struct LinkFree {
    dirs: std::cell::RefCell<std::collections::HashSet<PathBuf>>,
    since: std::cell::Cell<Option<std::time::Instant>>,
}

/// Whether call `nr` can take a name away (and so let a link take its place).
fn removes_or_renames(nr: i64) -> bool {
    #[cfg(target_arch = "x86_64")]
    if [libc::SYS_unlink, libc::SYS_rmdir, libc::SYS_rename].contains(&nr) {
        return true;
    }
    [libc::SYS_unlinkat, libc::SYS_renameat, libc::SYS_renameat2].contains(&nr)
}

/// How long [`LinkFree`] trusts what it saw.
const LINK_FREE_FOR: std::time::Duration = std::time::Duration::from_secs(1);

impl LinkFree {
    fn contains(&self, dir: &Path) -> bool {
        match self.since.get() {
            Some(at) if at.elapsed() < LINK_FREE_FOR => self.dirs.borrow().contains(dir),
            _ => {
                self.forget();
                false
            }
        }
    }

    fn insert(&self, dir: &Path) {
        if self.since.get().is_none() {
            self.since.set(Some(std::time::Instant::now()));
        }
        self.dirs.borrow_mut().insert(dir.to_path_buf());
    }

    fn forget(&self) {
        self.dirs.borrow_mut().clear();
        self.since.set(None);
    }
}

/// Opens every socket the policy's unix-socket list names; one that cannot be opened (gone,
/// replaced by a link) is left out, so connections to it stay refused.
fn pin_unix_sockets(policy: &SandboxPolicy) -> Vec<(PathBuf, OwnedFd)> {
    use std::os::unix::fs::OpenOptionsExt;
    policy
        .network
        .unix_socket_allow
        .iter()
        .filter_map(|path| {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
                .open(path)
                .ok()?;
            Some((path.clone(), OwnedFd::from(file)))
        })
        .collect()
}

/// A copy of process `pid`'s descriptor `fd` (`pidfd_getfd`: the same open file, so a socket
/// copied is the process's socket).
fn copy_fd(pid: u32, fd: RawFd) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    // SAFETY: pidfd_getfd copies the target's descriptor into this process.
    let copy = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(copy as i32) })
}

/// Connects the process's socket `fd` to the pinned socket itself, through a copy of the
/// descriptor (`pidfd_getfd`: the same socket, so the command's descriptor is connected), and
/// answers with the result. The command's own `connect` never runs: what it wrote in its
/// memory after the observer read it changes nothing. An `fd` swapped for another socket
/// meanwhile is connected to the same allowed socket, or fails.
fn broker_connect(pid: u32, fd: RawFd, pinned: &OwnedFd) -> Answer {
    let errno = |e: io::Error| Answer::Refuse(e.raw_os_error().unwrap_or(libc::EPERM));
    let copy = match copy_fd(pid, fd) {
        Ok(copy) => copy,
        Err(e) => return errno(e),
    };
    let via = format!("/proc/self/fd/{}", pinned.as_raw_fd());
    // SAFETY: sockaddr_un is plain data for which all-zero is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, src) in addr.sun_path.iter_mut().zip(via.as_bytes()) {
        *dst = *src as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + via.len() + 1) as libc::socklen_t;
    // SAFETY: connect on a descriptor this function owns with a sockaddr_un of `len` bytes.
    let rc = unsafe {
        libc::connect(
            copy.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    };
    if rc == 0 {
        Answer::Return(0)
    } else {
        errno(io::Error::last_os_error())
    }
}

impl Ctx<'_> {
    /// Reads the call's target, decides the answer, and says what was denied.
    fn judge_call(&self, listener: &OwnedFd, notif: &libc::seccomp_notif) -> (Vec<Denial>, Answer) {
        let data = notif.data;
        let verdict = cordon_sandbox::bpf::evaluate(
            &self.judge.refusals,
            data.arch,
            data.nr as u32,
            data.args,
        );
        let refused = if verdict == libc::SECCOMP_RET_ALLOW {
            None
        } else if verdict & libc::SECCOMP_RET_ACTION_FULL == libc::SECCOMP_RET_ERRNO {
            Some((verdict & libc::SECCOMP_RET_DATA) as i32)
        } else {
            // The refusal program kills or traps: not a call to let through.
            Some(libc::EPERM)
        };
        let process = Process { pid: notif.pid };
        let target = process.target(i64::from(data.nr), &data.args);
        // By the call, not its target: a removal whose path could not be read still counts.
        if removes_or_renames(i64::from(data.nr)) {
            self.link_free.forget();
        }
        let Some(errno) = refused else {
            // A call the kernel decides: what was read matters only if it shows a denial, and
            // then it must belong to this call (checked after reading, as below). Most calls
            // show none and are answered without the check.
            let denials = self.watched_call(&process, &target);
            if !denials.is_empty() && !still_waiting(listener, notif.id) {
                return (Vec::new(), Answer::Continue);
            }
            return (denials, Answer::Continue);
        };
        // Checked after reading and before judging: what was read belongs to this call.
        if !still_waiting(listener, notif.id) {
            return (Vec::new(), Answer::Refuse(errno));
        }
        // A listed unix socket: connected by the observer itself, never by the command.
        if let Target::Address(SocketCall::Connect, fd, Address::Unix(path)) = &target {
            if let Some(pinned) = self.pinned_for(path) {
                return (Vec::new(), broker_connect(notif.pid, *fd, pinned));
            }
        }
        (
            self.refused_call(&process, i64::from(data.nr), &data.args, &target),
            Answer::Refuse(errno),
        )
    }

    /// The pinned socket `path` names, if listed: by the name itself, or by where its links
    /// lead now. Either way the connection goes to the socket opened at the start, so a path
    /// the command rewrote since can lead only there.
    fn pinned_for(&self, path: &str) -> Option<&OwnedFd> {
        if self.pinned.is_empty() || path.starts_with('@') {
            return None;
        }
        let named = Path::new(path);
        let canonical = std::fs::canonicalize(path).ok();
        self.pinned
            .iter()
            .find(|(listed, _)| listed == named || Some(listed) == canonical.as_ref())
            .map(|(_, fd)| fd)
    }

    fn rule_for(&self, nr: i64, args: &[u64; 6]) -> Option<&SyscallRule> {
        let mine = || self.names.iter().filter(move |r| r.nr == nr);
        mine().find(|r| r.holds(args)).or_else(|| mine().next())
    }

    /// A call the kernel filter refuses: a denial of its socket target, or of the call.
    fn refused_call(
        &self,
        process: &Process,
        nr: i64,
        args: &[u64; 6],
        target: &Target,
    ) -> Vec<Denial> {
        let rule = self.rule_for(nr, args);
        let name = rule.map_or("unknown", |r| r.syscall);
        let reason = rule.map_or("refused by the seccomp filter", |r| r.reason);
        let seen = EvidenceKind::SeccompObserver;
        let unix_denied = self.judge.policy.network.unix_sockets == UnixSockets::Deny;
        if let Target::Address(call, _, address) = target {
            // The socket's path as the process meant it: relative to its own cwd.
            let unix_path = |path: &str| -> PathBuf {
                let absolute = match Path::new(path) {
                    p if p.is_absolute() => p.to_path_buf(),
                    p => match std::fs::read_link(format!("/proc/{}/cwd", process.pid)) {
                        Ok(cwd) => cwd.join(p),
                        Err(_) => return self.access.resolve(path, false),
                    },
                };
                // `.`, `..` and linked directories resolved, the last component kept.
                self.access.resolve(&absolute.to_string_lossy(), false)
            };
            let listed = !self.judge.policy.network.unix_socket_allow.is_empty();
            let unix_denial = |path: String, call: &str| {
                Denial::new(
                    Operation::UnixSocket,
                    Some(path.clone()),
                    if listed {
                        format!("not in network.unix_sockets ({call}{reason})")
                    } else {
                        format!("unix sockets denied ({call}{reason})")
                    },
                    if listed {
                        format!("--allow-unix-socket {path}")
                    } else {
                        "--allow-unix-sockets".to_owned()
                    },
                    seen,
                )
            };
            return match address {
                // Binding makes the socket file, so a path that does not exist yet is what a
                // server binds (in a directory that exists); one that does would have failed
                // with EADDRINUSE anyway.
                // Binding makes the socket file: a path that does not exist yet, in a directory
                // that exists, is what a server binds (one that exists would fail with
                // EADDRINUSE anyway). Connecting to a path that is no socket would have failed
                // anyway, unless the program takes ENOENT as "no server yet, start one" (tmux,
                // gpg, screen) and EPERM as a reason to stop: a probe, counted where the
                // output names the path as not permitted (`classify::confirmed_probes`).
                Address::Unix(path)
                    if !path.starts_with('@')
                        && (*call == SocketCall::Bind || !is_socket(Path::new(path))) =>
                {
                    let path = unix_path(path);
                    if !unix_denied || path.symlink_metadata().is_ok() || !parent_exists(&path) {
                        return Vec::new();
                    }
                    let label = match call {
                        SocketCall::Bind => UNIX_BIND_MARK.to_owned(),
                        _ => format!("{name}: "),
                    };
                    vec![unix_denial(display(&path), &label)]
                }
                Address::Unix(path) if unix_denied => {
                    vec![unix_denial(path.clone(), &format!("{name}: "))]
                }
                Address::Inet(hostport, _) => vec![Denial::new(
                    Operation::Network,
                    Some(hostport.clone()),
                    format!(
                        "network mode {} ({name}: {reason})",
                        self.judge.policy.network.mode.name()
                    ),
                    "--network enabled",
                    seen,
                )],
                _ => vec![syscall_denial(name, reason)],
            };
        }
        if PRIVILEGED_CALLS
            .iter()
            .any(|(call, cap)| *call == name && !caller_has_capability(*cap))
        {
            return Vec::new();
        }
        let family = args[0] as i32;
        let network_denied = self.judge.policy.network.mode.is_denied();
        if name == "socket" {
            if let Some(kind) = administrative_socket(family, args[1] as i32, args[2] as i32) {
                return vec![Denial::new(
                    Operation::Syscall,
                    Some(format!("socket({kind})")),
                    format!("seccomp: socket refused ({reason})"),
                    format!("none: no profile allows it ({ADMINISTRATIVE_SOCKETS})"),
                    seen,
                )];
            }
        }
        match name {
            "socket" if family == libc::AF_UNIX && unix_denied => vec![Denial::new(
                Operation::UnixSocket,
                None,
                format!("unix sockets denied ({reason})"),
                "--allow-unix-sockets",
                seen,
            )],
            // A datagram pair is a program's own channel (socat's), no probe: the call is the
            // target, and the unix-socket setting lifts it.
            "socketpair" if family == libc::AF_UNIX && unix_denied => vec![Denial::new(
                Operation::Syscall,
                Some(name.to_owned()),
                format!("seccomp: {name} refused (unix sockets denied: {reason})"),
                "--allow-unix-sockets",
                seen,
            )],
            "socket" if matches!(family, libc::AF_INET | libc::AF_INET6) && network_denied => {
                vec![Denial::new(
                    Operation::Network,
                    None,
                    format!("network mode denied ({reason})"),
                    "--network enabled",
                    seen,
                )]
            }
            // Route queries (how glibc, Go and Node list the interfaces) pass with the network.
            "socket"
                if family == libc::AF_NETLINK
                    && args[2] as i32 == libc::NETLINK_ROUTE
                    && network_denied =>
            {
                vec![Denial::new(
                    Operation::Syscall,
                    Some(name.to_owned()),
                    format!("seccomp: {name} refused ({reason})"),
                    "--network enabled",
                    seen,
                )]
            }
            "listen" if unix_denied => vec![Denial::new(
                Operation::UnixSocket,
                None,
                format!("unix sockets denied ({reason})"),
                "--allow-unix-sockets",
                seen,
            )],
            _ => vec![syscall_denial(name, reason)],
        }
    }

    /// A call let through to Landlock: a denial when the policy refuses its target.
    fn watched_call(&self, process: &Process, target: &Target) -> Vec<Denial> {
        let layers = &self.judge.receipt.layers;
        let files = layers.contains(&Layer::LandlockFs);
        let seen = EvidenceKind::SeccompObserver;
        // Removing or renaming an entry is a right on the directory that holds it.
        let change = |path: &Path, removal: bool| -> Option<Denial> {
            // A process's own kernel settings (`/proc/PID/coredump_filter`, `oom_score_adj`,
            // written by the JVM and others at start-up and ignored when refused) are no file a
            // profile could grant: not a denial to report.
            if path.starts_with("/proc") {
                return None;
            }
            let v = if removal {
                self.access.removal_verdict(path)
            } else {
                self.access.write_verdict(path)
            }?;
            Some(Denial::new(
                Operation::FileWrite,
                Some(display(path)),
                v.rule,
                v.allow_with,
                seen,
            ))
        };
        let write = |path: &Path| change(path, false);
        let remove = |path: &Path| change(path, true);
        let read = |op: Operation, path: &Path| -> Option<Denial> {
            let v = self.access.read_verdict(path)?;
            Some(Denial::new(
                op,
                Some(display(path)),
                v.rule,
                v.allow_with,
                seen,
            ))
        };
        let resolve = |p: &Path, follow: bool| self.access.resolve(&p.to_string_lossy(), follow);
        if self.plainly_allowed(target) {
            return Vec::new();
        }
        let mut out = Vec::new();
        match target {
            Target::Open(path, flags) if files => {
                let flags = *flags as i32;
                let follow = flags & libc::O_NOFOLLOW == 0;
                let path = resolve(path, follow);
                let writes = flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) != 0;
                let creates = flags & libc::O_CREAT != 0 || is_tmpfile(flags);
                let exists = path.symlink_metadata().is_ok();
                if exists && flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0 {
                    // EEXIST comes before any permission check.
                } else if exists && (writes || is_tmpfile(flags)) {
                    out.extend(write(&path));
                } else if exists {
                    out.extend(read(Operation::FileRead, &path));
                } else if creates && parent_exists(&path) {
                    out.extend(write(&path));
                }
            }
            Target::Create(path) if files => {
                let path = resolve(path, false);
                if path.symlink_metadata().is_err() && parent_exists(&path) {
                    out.extend(write(&path));
                }
            }
            Target::Remove(path) if files => {
                let path = resolve(path, false);
                if path.symlink_metadata().is_ok() {
                    out.extend(remove(&path));
                }
            }
            Target::Rename(from, to) if files => {
                let from = resolve(from, false);
                let to = resolve(to, false);
                if from.symlink_metadata().is_ok() && parent_exists(&to) {
                    out.extend(remove(&from));
                    out.extend(if to.symlink_metadata().is_ok() {
                        remove(&to)
                    } else {
                        write(&to)
                    });
                }
            }
            Target::Truncate(path) if files => {
                let path = resolve(path, true);
                if path.exists() {
                    out.extend(write(&path));
                }
            }
            Target::Exec(path) if files => {
                let path = resolve(path, true);
                if path.is_file() {
                    out.extend(read(Operation::FileExecute, &path));
                }
            }
            Target::WriteCheck(path) if files => {
                let path = resolve(path, true);
                // A check on a missing path fails with ENOENT whatever the policy says.
                if path.symlink_metadata().is_ok() {
                    out.extend(write(&path).map(|mut d| {
                        d.rule = format!("{WRITE_CHECK_RULE}{}", d.rule);
                        d
                    }));
                }
            }
            Target::Address(call, fd, address) => {
                out.extend(self.address_denial(process, *call, *fd, address));
            }
            _ => {}
        }
        out
    }

    /// Whether every path of `target` lies plainly inside a root that allows what the call
    /// does: lexically beneath the root, with no `..`, no carve-out on the way and no symbolic
    /// link below the root (roots are canonical, so nothing above can redirect it). The
    /// common case of a build writing its own tree then costs a few `lstat`s, not a full walk.
    fn plainly_allowed(&self, target: &Target) -> bool {
        let (writable, readable) = (&self.writable, &self.readable);
        let writes = |flags: u64| {
            let flags = flags as i32;
            flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) != 0
                || is_tmpfile(flags)
        };
        match target {
            Target::Open(path, flags) => {
                let follow = (*flags as i32) & libc::O_NOFOLLOW == 0;
                let roots = if writes(*flags) { writable } else { readable };
                self.plainly_inside(path, roots, follow)
            }
            Target::Create(path) | Target::Remove(path) => {
                self.plainly_inside(path, writable, false)
            }
            Target::Truncate(path) | Target::WriteCheck(path) => {
                self.plainly_inside(path, writable, true)
            }
            Target::Rename(from, to) => {
                self.plainly_inside(from, writable, false)
                    && self.plainly_inside(to, writable, false)
            }
            Target::Exec(path) => self.plainly_inside(path, readable, true),
            _ => false,
        }
    }

    fn plainly_inside(&self, path: &Path, roots: &[&Path], follow_last: bool) -> bool {
        use std::path::Component;
        let fs = &self.judge.policy.filesystem;
        if path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            return false;
        }
        let Some(root) = roots.iter().find(|r| path.starts_with(r)) else {
            return false;
        };
        let carved = fs
            .read_only
            .iter()
            .chain(&fs.deny_read)
            .any(|c| path.starts_with(c));
        if carved || cordon_sandbox::landlock_rules::excluded_from_roots(&self.judge.policy, path) {
            return false;
        }
        let Ok(below) = path.strip_prefix(root) else {
            return false;
        };
        let mut at = root.to_path_buf();
        let mut parts = below.components().peekable();
        while let Some(part) = parts.next() {
            at.push(part);
            let last = parts.peek().is_none();
            if last && !follow_last {
                break;
            }
            if !last && self.link_free.contains(&at) {
                continue;
            }
            match at.symlink_metadata() {
                Ok(meta) if meta.file_type().is_symlink() => return false,
                Ok(meta) if meta.is_dir() => self.link_free.insert(&at),
                Ok(_) => {}
                // Nothing below a missing component can be a link.
                Err(_) => break,
            }
        }
        true
    }

    /// A TCP connect or bind outside the port lists (Landlock's port rules refuse it), or the
    /// bind of a socket path where files may not be created.
    fn address_denial(
        &self,
        process: &Process,
        call: SocketCall,
        fd: RawFd,
        address: &Address,
    ) -> Option<Denial> {
        let net = &self.judge.policy.network;
        let seen = EvidenceKind::SeccompObserver;
        match (call, address) {
            (SocketCall::Bind, Address::Unix(path))
                if !path.starts_with('@')
                    && self.judge.receipt.layers.contains(&Layer::LandlockFs) =>
            {
                let path = self.access.resolve(path, false);
                if path.symlink_metadata().is_ok() || !parent_exists(&path) {
                    return None;
                }
                let v = self.access.write_verdict(&path)?;
                Some(Denial::new(
                    Operation::FileWrite,
                    Some(display(&path)),
                    v.rule,
                    v.allow_with,
                    seen,
                ))
            }
            (SocketCall::Connect | SocketCall::Bind, Address::Inet(hostport, port))
                if self.judge.receipt.layers.contains(&Layer::LandlockNet) =>
            {
                let (list, field) = match call {
                    SocketCall::Connect => (net.tcp_connect.as_ref()?, "tcp_connect"),
                    _ => (net.tcp_bind.as_ref()?, "tcp_bind"),
                };
                // Port 0 asks for an ephemeral port, which Landlock checks as port 0 on bind.
                if list.contains(port) || !process.is_tcp_socket(fd) {
                    return None;
                }
                Some(Denial::new(
                    Operation::TcpPort,
                    Some(hostport.clone()),
                    format!("TCP port {port} is not in network.{field}"),
                    format!("add {port} to network.{field}"),
                    seen,
                ))
            }
            _ => None,
        }
    }
}

/// The filter's refusals of calls that only a capability allows, with that capability's
/// number: outside the sandbox a caller without it (an ordinary user) is refused them too, so
/// the sandbox denied nothing; root, whose capabilities the sandbox drops, was denied.
const PRIVILEGED_CALLS: &[(&str, u32)] = &[
    ("chroot", 18),        // CAP_SYS_CHROOT
    ("sethostname", 21),   // CAP_SYS_ADMIN
    ("setdomainname", 21), // CAP_SYS_ADMIN
    ("settimeofday", 25),  // CAP_SYS_TIME
    ("clock_settime", 25), // CAP_SYS_TIME
];

/// Whether this process (the caller's cordon, outside the sandbox) holds capability `cap` in
/// its effective set, from `/proc/self/status`, read once.
fn caller_has_capability(cap: u32) -> bool {
    static EFFECTIVE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let effective = EFFECTIVE.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| effective_capabilities(&status))
            .unwrap_or(0)
    });
    cap < 64 && effective & (1u64 << cap) != 0
}

/// The `CapEff:` mask of a `/proc/PID/status` text.
fn effective_capabilities(status: &str) -> Option<u64> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    u64::from_str_radix(hex, 16).ok()
}

/// Why no profile grants an administrative socket: the sandbox drops the capabilities they
/// need and its filter keeps them from the command in every network mode.
const ADMINISTRATIVE_SOCKETS: &str = "packet, raw and administrative netlink sockets (audit, netfilter, xfrm, sock_diag) observe or administer the host, need capabilities the sandbox drops, and are refused in every network mode";

/// The kind of a socket that administers or observes the host (a packet or raw socket, a
/// netlink socket for audit, netfilter, xfrm or socket diagnostics), named for a denial's
/// target: `AF_NETLINK, NETLINK_AUDIT`. Libraries do not open these quietly, as glibc's
/// resolver does a route-netlink or DNS socket, so a refused one is a denial even when the
/// command says nothing about it (iptables-nft's "Failed to initialize nft"), except the audit
/// socket, which PAM's modules try and do without (`classify` counts it where the output speaks
/// of audit: useradd's "Cannot open audit interface - aborting."). Generic and uevent netlink
/// are left out: libraries do probe those.
fn administrative_socket(family: i32, kind: i32, protocol: i32) -> Option<String> {
    let raw = kind & 0xf == libc::SOCK_RAW;
    match family {
        libc::AF_PACKET => Some("AF_PACKET".to_owned()),
        libc::AF_INET if raw => Some("AF_INET, SOCK_RAW".to_owned()),
        libc::AF_INET6 if raw => Some("AF_INET6, SOCK_RAW".to_owned()),
        libc::AF_NETLINK => {
            let name = match protocol {
                libc::NETLINK_AUDIT => "NETLINK_AUDIT",
                libc::NETLINK_NETFILTER => "NETLINK_NETFILTER",
                libc::NETLINK_XFRM => "NETLINK_XFRM",
                libc::NETLINK_SOCK_DIAG => "NETLINK_SOCK_DIAG",
                _ => return None,
            };
            Some(format!("AF_NETLINK, {name}"))
        }
        _ => None,
    }
}

/// How the rule of a refused unix-socket `bind` continues after "unix sockets denied (": its
/// path does not exist (the bind was to make it), which for a connect would mark a probe.
pub(crate) const UNIX_BIND_MARK: &str = "bind: ";

fn syscall_denial(name: &str, reason: &str) -> Denial {
    Denial::new(
        Operation::Syscall,
        Some(name.to_owned()),
        format!("seccomp: {name} refused"),
        format!("none: no profile allows it ({reason})"),
        EvidenceKind::SeccompObserver,
    )
}

fn is_tmpfile(flags: i32) -> bool {
    flags & libc::O_TMPFILE == libc::O_TMPFILE
}

fn parent_exists(path: &Path) -> bool {
    path.parent().is_some_and(|p| p.is_dir())
}

fn is_socket(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.file_type().is_socket())
}

fn display(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The process that made a call, seen through `/proc` and `process_vm_readv`.
struct Process {
    pid: u32,
}

impl Process {
    /// The target of call `nr` with `args`, for the calls the observer is told about.
    // libc names the call numbers in lower case.
    #[allow(non_upper_case_globals)]
    fn target(&self, nr: i64, args: &[u64; 6]) -> Target {
        let path = |dirfd: Option<u64>, arg: u64| self.path(dirfd.map(|d| d as i32), arg);
        let attempt = || -> Option<Target> {
            use libc::*;
            Some(match nr {
                SYS_openat => Target::Open(path(Some(args[0]), args[1])?, args[2]),
                SYS_mkdirat | SYS_mknodat => Target::Create(path(Some(args[0]), args[1])?),
                SYS_symlinkat => Target::Create(path(Some(args[1]), args[2])?),
                SYS_linkat => Target::Create(path(Some(args[2]), args[3])?),
                SYS_unlinkat => Target::Remove(path(Some(args[0]), args[1])?),
                SYS_renameat | SYS_renameat2 => {
                    Target::Rename(path(Some(args[0]), args[1])?, path(Some(args[2]), args[3])?)
                }
                SYS_truncate => Target::Truncate(path(None, args[0])?),
                SYS_execve => Target::Exec(path(None, args[0])?),
                SYS_execveat => Target::Exec(path(Some(args[0]), args[1])?),
                SYS_faccessat | SYS_faccessat2 => Target::WriteCheck(path(Some(args[0]), args[1])?),
                SYS_connect => Target::Address(
                    SocketCall::Connect,
                    args[0] as i32,
                    self.address(args[1], args[2])?,
                ),
                SYS_bind => Target::Address(
                    SocketCall::Bind,
                    args[0] as i32,
                    self.address(args[1], args[2])?,
                ),
                SYS_sendto if args[4] != 0 => Target::Address(
                    SocketCall::SendTo,
                    args[0] as i32,
                    self.address(args[4], args[5])?,
                ),
                #[cfg(target_arch = "x86_64")]
                SYS_open => Target::Open(path(None, args[0])?, args[1]),
                #[cfg(target_arch = "x86_64")]
                SYS_access => Target::WriteCheck(path(None, args[0])?),
                #[cfg(target_arch = "x86_64")]
                SYS_creat => {
                    Target::Open(path(None, args[0])?, (O_CREAT | O_WRONLY | O_TRUNC) as u64)
                }
                #[cfg(target_arch = "x86_64")]
                SYS_mkdir | SYS_mknod => Target::Create(path(None, args[0])?),
                #[cfg(target_arch = "x86_64")]
                SYS_symlink | SYS_link => Target::Create(path(None, args[1])?),
                #[cfg(target_arch = "x86_64")]
                SYS_unlink | SYS_rmdir => Target::Remove(path(None, args[0])?),
                #[cfg(target_arch = "x86_64")]
                SYS_rename => Target::Rename(path(None, args[0])?, path(None, args[1])?),
                _ => return None,
            })
        };
        attempt().unwrap_or(Target::None)
    }

    /// The absolute path the call names: `arg` is a pointer to a NUL-terminated path,
    /// relative to directory descriptor `dirfd` (`None` or `AT_FDCWD`: the cwd).
    fn path(&self, dirfd: Option<i32>, arg: u64) -> Option<PathBuf> {
        let raw = self.read_string(arg)?;
        if raw.is_empty() {
            return None;
        }
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(&raw));
        if path.is_absolute() {
            return Some(path);
        }
        let base = match dirfd {
            None | Some(libc::AT_FDCWD) => format!("/proc/{}/cwd", self.pid),
            Some(fd) => format!("/proc/{}/fd/{fd}", self.pid),
        };
        let base = std::fs::read_link(base).ok()?;
        Some(base.join(path))
    }

    /// Reads `buf.len()` bytes at `addr` (fewer at the end of a mapping). One call, with
    /// nothing to open: a build starts thousands of processes, and opening each one's
    /// `/proc/PID/mem` cost more than the read. The pid may be reused by the time of the read;
    /// the caller's `ID_VALID` check then discards what was read.
    fn read_at(&self, buf: &mut [u8], addr: u64) -> Option<usize> {
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let pid = libc::pid_t::try_from(self.pid).ok()?;
        // SAFETY: `local` covers `buf`, valid and writable for its length; the remote range is
        // only read by the kernel, in the other process, and a bad address fails the call.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        usize::try_from(n).ok().filter(|&n| n > 0)
    }

    /// A NUL-terminated string at `addr`, read a page at a time so that a string ending just
    /// before an unmapped page is still read.
    fn read_string(&self, addr: u64) -> Option<Vec<u8>> {
        const PAGE: u64 = 4096;
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < PATH_MAX {
            let room = (PAGE - at % PAGE) as usize;
            let mut buf = vec![0u8; room.min(PATH_MAX - out.len())];
            let n = self.read_at(&mut buf, at)?;
            if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..end]);
                return Some(out);
            }
            out.extend_from_slice(&buf[..n]);
            at += n as u64;
        }
        None
    }

    /// The socket address at `addr`, `len` bytes long.
    fn address(&self, addr: u64, len: u64) -> Option<Address> {
        let len = usize::try_from(len)
            .ok()?
            .min(std::mem::size_of::<libc::sockaddr_storage>());
        if len < 2 {
            return None;
        }
        let mut buf = vec![0u8; len];
        let n = self.read_at(&mut buf, addr)?;
        buf.truncate(n);
        let family = i32::from(u16::from_ne_bytes([*buf.first()?, *buf.get(1)?]));
        let be16 = |at: usize| Some(u16::from_be_bytes([*buf.get(at)?, *buf.get(at + 1)?]));
        Some(match family {
            libc::AF_UNIX => {
                let name = &buf[2..];
                if name.first() == Some(&0) {
                    Address::Unix(format!("@{}", String::from_utf8_lossy(&name[1..])))
                } else {
                    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                    let path = PathBuf::from(std::ffi::OsStr::from_bytes(&name[..end]));
                    let path = if path.is_absolute() {
                        path
                    } else {
                        std::fs::read_link(format!("/proc/{}/cwd", self.pid))
                            .ok()?
                            .join(path)
                    };
                    Address::Unix(display(&path))
                }
            }
            libc::AF_INET => {
                let port = be16(2)?;
                let ip =
                    std::net::Ipv4Addr::new(*buf.get(4)?, *buf.get(5)?, *buf.get(6)?, *buf.get(7)?);
                Address::Inet(format!("{ip}:{port}"), port)
            }
            libc::AF_INET6 => {
                let port = be16(2)?;
                let octets: [u8; 16] = buf.get(8..24)?.try_into().ok()?;
                let ip = std::net::Ipv6Addr::from(octets);
                Address::Inet(format!("[{ip}]:{port}"), port)
            }
            _ => Address::Other,
        })
    }

    /// Whether the process's descriptor `fd` is a TCP socket (Landlock's port rules govern
    /// only those): a copy is taken with `pidfd_getfd` and asked for its protocol.
    fn is_tcp_socket(&self, fd: RawFd) -> bool {
        let Ok(copy) = copy_fd(self.pid, fd) else {
            return false;
        };
        let mut protocol: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes one int into `protocol`, whose size `len` says.
        let rc = unsafe {
            libc::getsockopt(
                copy.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PROTOCOL,
                (&mut protocol as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        rc == 0 && protocol == libc::IPPROTO_TCP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effective_capabilities_come_from_the_status_line() {
        let status = "Name:\tcordon\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(effective_capabilities(status), Some(0x1ff_ffff_ffff));
        assert_eq!(
            effective_capabilities("CapEff:\t0000000000000000\n"),
            Some(0)
        );
        assert_eq!(effective_capabilities("Name:\tx\n"), None);
    }
}
