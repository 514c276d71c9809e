//! Issue 7, classes 2, 3 and 6, against the real kernel: a confined command cannot change the
//! limits, priorities, scheduling or memory placement of processes outside its sandbox (cordon
//! included), cannot reach System V IPC objects or POSIX message queues, and cannot make a
//! setuid or setgid file. Every refusal is checked from outside, next to a harmless use that
//! must keep working.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{lines, stderr, Tree};

/// Python helpers for raw system calls (so that the errno is the kernel's or the filter's, not
/// a library's): `sys(name, *args)` prints "OK" or the errno name; ints become C longs.
fn raw_calls() -> String {
    #[cfg(target_arch = "x86_64")]
    let arch_only = format!(
        "'chmod': {}, 'open': {}, 'creat': {}, 'mknod': {}, ",
        libc::SYS_chmod,
        libc::SYS_open,
        libc::SYS_creat,
        libc::SYS_mknod
    );
    #[cfg(not(target_arch = "x86_64"))]
    let arch_only = String::new();
    let numbers: [(&str, libc::c_long); 31] = [
        ("prlimit64", libc::SYS_prlimit64),
        ("setpriority", libc::SYS_setpriority),
        ("sched_setaffinity", libc::SYS_sched_setaffinity),
        ("sched_setscheduler", libc::SYS_sched_setscheduler),
        ("sched_setparam", libc::SYS_sched_setparam),
        ("sched_setattr", libc::SYS_sched_setattr),
        ("ioprio_set", libc::SYS_ioprio_set),
        ("migrate_pages", libc::SYS_migrate_pages),
        ("move_pages", libc::SYS_move_pages),
        ("prctl", libc::SYS_prctl),
        ("pidfd_open", libc::SYS_pidfd_open),
        ("pidfd_getfd", libc::SYS_pidfd_getfd),
        ("process_madvise", libc::SYS_process_madvise),
        ("shmget", libc::SYS_shmget),
        ("shmat", libc::SYS_shmat),
        ("shmctl", libc::SYS_shmctl),
        ("msgget", libc::SYS_msgget),
        ("msgsnd", libc::SYS_msgsnd),
        ("msgrcv", libc::SYS_msgrcv),
        ("msgctl", libc::SYS_msgctl),
        ("semget", libc::SYS_semget),
        ("semop", libc::SYS_semop),
        ("semtimedop", libc::SYS_semtimedop),
        ("semctl", libc::SYS_semctl),
        ("mq_open", libc::SYS_mq_open),
        ("mq_unlink", libc::SYS_mq_unlink),
        ("fchmodat", libc::SYS_fchmodat),
        ("fchmodat2", 452),
        ("mknodat", libc::SYS_mknodat),
        ("openat", libc::SYS_openat),
        ("openat2", libc::SYS_openat2),
    ];
    let table: String = numbers
        .iter()
        .map(|(name, nr)| format!("'{name}': {nr}, "))
        .collect();
    format!(
        r#"
import ctypes, resource, subprocess
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {{{arch_only}{table}}}
def sys(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(NR[name], *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()]
class rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]
def limit(soft, hard):
    return ctypes.byref(rlimit(soft, hard))
CPU0 = ctypes.byref(ctypes.c_ulong(1))
PARAM0 = ctypes.byref(ctypes.c_int(0))
class sched_attr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                ("nice", ctypes.c_int32), ("prio", ctypes.c_uint32), ("rt", ctypes.c_uint64 * 3)]
BATCH = ctypes.byref(sched_attr(ctypes.sizeof(sched_attr), 3, 0, 19))  # SCHED_BATCH, nice 19
IOPRIO_IDLE = 3 << 13
IOPRIO_BE4 = (2 << 13) | 4
"#
    )
}

/// What outsiders can see of a process's limits, priority and scheduling.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    cpu_limit: String,
    core_limit: String,
    nice: String,
    policy: String,
    cpus_allowed: String,
    ioprio: i64,
    oom_score_adj: String,
}

fn observe(pid: u32) -> Observed {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let limit = |name: &str| {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .expect("limit line")
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command name, which is in parentheses; field 3 (state) comes first.
    let fields: Vec<String> = stat
        .rsplit_once(')')
        .expect("stat format")
        .1
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let cpus_allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim()
        .to_owned();
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    // SAFETY: ioprio_get takes two integers and only reads the target's I/O priority.
    let ioprio = unsafe {
        libc::syscall(
            libc::SYS_ioprio_get,
            IOPRIO_WHO_PROCESS,
            libc::c_long::from(pid as i32),
        )
    };
    Observed {
        cpu_limit: limit("Max cpu time"),
        core_limit: limit("Max core file size"),
        nice: fields[16].clone(),
        policy: fields[38].clone(),
        cpus_allowed,
        ioprio,
        oom_score_adj: std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
            .expect("oom_score_adj"),
    }
}

/// A process outside the sandbox, leading its own process group, killed on drop. It runs as
/// the test's user with no capabilities, as every process of an ordinary user does: the
/// capability LSM already protects a target holding capabilities the caller lacks from
/// setpriority, sched_* and ioprio_set (not from prlimit64), and such a target would hide a
/// missing rule.
struct Outsider(Child);

impl Outsider {
    fn start() -> Outsider {
        let mut command = Command::new("sleep");
        command.arg("60").process_group(0);
        // SAFETY: prctl is async-signal-safe and takes integers only. Emptying the bounding set
        // makes root's execve grant no capabilities; without CAP_SETPCAP it fails with EPERM,
        // and then the process had no capabilities to begin with.
        unsafe {
            command.pre_exec(|| {
                for cap in 0..64 {
                    if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                        break;
                    }
                }
                Ok(())
            });
        }
        Outsider(command.spawn().expect("spawn sleep"))
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A uid no process runs as: PRIO_USER and IOPRIO_WHO_USER on it change nothing even when they
/// are let through (the kernel then says ESRCH), so the test cannot renice the machine.
const UNUSED_UID: u32 = 1_999_999_999;

/// The attacks on process `pid` (leading group `pid`); one line each.
fn attacks_on(pid: u32) -> String {
    format!(
        r#"
P = {pid}
print(sys("prlimit64", P, resource.RLIMIT_CPU, limit(1, 1), None))
print(sys("prlimit64", P, resource.RLIMIT_CORE, limit(2**64 - 1, 2**64 - 1), None))
print(sys("setpriority", os.PRIO_PROCESS, P, 19))
print(sys("setpriority", os.PRIO_PGRP, P, 19))
print(sys("setpriority", os.PRIO_USER, {UNUSED_UID}, 19))
print(sys("sched_setaffinity", P, 8, CPU0))
print(sys("sched_setscheduler", P, 5, PARAM0))   # SCHED_IDLE
print(sys("sched_setparam", P, PARAM0))
print(sys("sched_setattr", P, BATCH, 0))
print(sys("ioprio_set", 1, P, IOPRIO_IDLE))        # IOPRIO_WHO_PROCESS
print(sys("ioprio_set", 2, P, IOPRIO_IDLE))        # IOPRIO_WHO_PGRP
print(sys("ioprio_set", 3, {UNUSED_UID}, IOPRIO_IDLE))  # IOPRIO_WHO_USER
"#
    )
}

#[test]
fn outside_processes_keep_their_limits_priority_and_scheduling() {
    let tree = Tree::new();
    let outsider = Outsider::start();
    let before = observe(outsider.pid());
    let script = format!(
        r#"{calls}{attacks}
print(sys("migrate_pages", P, 64, CPU0, CPU0))
print(sys("move_pages", P, 0, None, None, None, 0))
print(sys("prctl", 62, 2, P, 0, 0))                # PR_SCHED_CORE_SHARE_TO
pidfd = libc.syscall(NR["pidfd_open"], ctypes.c_long(P), ctypes.c_long(0))
print("pidfd", "OK" if pidfd >= 0 else errno.errorcode[ctypes.get_errno()])
iov = (ctypes.c_uint64 * 2)(0, 4096)
print(sys("process_madvise", pidfd, ctypes.byref(iov), 1, 20, 0))  # MADV_COLD
print(sys("pidfd_getfd", pidfd, 0, 0))
print(sys("prlimit64", P, resource.RLIMIT_CPU, None, limit(0, 0)))  # reading
# The /proc files that tune a process are Landlock's: /proc is not writable.
print(attempt(lambda: open(f"/proc/{{P}}/oom_score_adj", "w").write("1000")))
"#,
        calls = raw_calls(),
        attacks = attacks_on(outsider.pid())
    );
    // The seccomp rules themselves, on the Landlock + seccomp path: with the namespace layer
    // the outsider is not even visible (ESRCH; tests/namespaces.rs), which would hide them.
    if common::userns_available() {
        let out = tree.py(&[], &script);
        assert!(
            !lines(&out).iter().any(|l| l == "OK" || l == "pidfd OK"),
            "{}",
            common::stdout(&out)
        );
        assert_eq!(observe(outsider.pid()), before);
    }
    let out = tree.py_without_userns(&[], &script);
    assert_eq!(
        lines(&out),
        [
            "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "EPERM",
            "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "pidfd OK", "EPERM", "EPERM",
            "OK", "EACCES"
        ],
        "{}",
        stderr(&out)
    );
    assert_eq!(observe(outsider.pid()), before);

    // The same attacks, unconfined, on another outsider: they work, and observe() sees it.
    let victim = Outsider::start();
    let untouched = observe(victim.pid());
    let out = tree.py_unconfined(&format!("{}{}", raw_calls(), attacks_on(victim.pid())));
    assert_eq!(
        lines(&out),
        ["OK", "OK", "OK", "OK", "ESRCH", "OK", "OK", "OK", "OK", "OK", "OK", "ESRCH"],
        "{}",
        stderr(&out)
    );
    let changed = observe(victim.pid());
    assert_ne!(changed.cpu_limit, untouched.cpu_limit);
    assert_ne!(changed.core_limit, untouched.core_limit);
    assert_eq!(changed.nice, "19");
    assert_eq!(changed.cpus_allowed, "0");
    assert_eq!(changed.policy, "3", "SCHED_BATCH, set last");
    assert_eq!(changed.ioprio, 3 << 13);
}

#[test]
fn the_command_and_its_descendants_change_their_own_limits_and_priority() {
    let tree = Tree::new();
    let script = format!(
        r#"{calls}
me = os.getpid()
print(sys("prlimit64", 0, resource.RLIMIT_CPU, limit(1000, 1000), None))
print(sys("prlimit64", me, resource.RLIMIT_CORE, limit(4096, 4096), None))
print(resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_CORE))
print(sys("setpriority", os.PRIO_PROCESS, 0, 3), sys("setpriority", os.PRIO_PROCESS, me, 4),
      sys("setpriority", os.PRIO_PGRP, 0, 5), sys("setpriority", os.PRIO_PGRP, me, 6))
print(os.getpriority(os.PRIO_PROCESS, 0))
print(sys("sched_setaffinity", 0, 8, CPU0), sys("sched_setaffinity", me, 8, CPU0), sorted(os.sched_getaffinity(0)))
print(sys("sched_setscheduler", 0, 3, PARAM0), sys("sched_setscheduler", me, 3, PARAM0), os.sched_getscheduler(0))
print(sys("ioprio_set", 1, 0, IOPRIO_BE4), sys("ioprio_set", 1, me, IOPRIO_BE4), sys("ioprio_set", 2, 0, IOPRIO_BE4))
child = r'''
import os, resource, errno
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
os.nice(2)
os.sched_setaffinity(0, {{0}})
print(resource.getrlimit(resource.RLIMIT_NOFILE), os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)))
os.setpriority(os.PRIO_PGRP, 0, 9)
print(os.getpriority(os.PRIO_PROCESS, 0))
try:
    os.setpriority(os.PRIO_PROCESS, os.getpid(), 12)
except OSError as e:
    print(errno.errorcode[e.errno])
'''
print(subprocess.run([os.readlink("/proc/self/exe"), "-c", child], capture_output=True, text=True).stdout.strip())
"#,
        calls = raw_calls()
    );
    let out = tree.py(&[], &script);
    assert_eq!(
        lines(&out),
        [
            "OK",
            "OK",
            "(1000, 1000) (4096, 4096)",
            "OK OK OK OK",
            "6",
            "OK OK [0]",
            "OK OK 3",
            "OK OK OK",
            // The descendant: pid 0 works; its own explicit pid is not the helper's.
            "(64, 64) 8 [0]",
            "9",
            "EPERM",
        ],
        "{}",
        stderr(&out)
    );
}

/// Waits until `path` exists.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// From a process that keeps every capability but CAP_SYS_PTRACE in its effective set: kcmp,
/// which needs ptrace read access with the real credentials, succeeds on a dumpable process of
/// the same user and fails with EPERM on one that is not dumpable.
fn ptrace_readable(tree: &Tree, pids: &[u32]) -> Vec<String> {
    let script = format!(
        r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
class H(ctypes.Structure): _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class D(ctypes.Structure): _fields_ = [("eff", ctypes.c_uint32), ("perm", ctypes.c_uint32), ("inh", ctypes.c_uint32)]
h = H(0x20080522, 0); d = (D * 2)()
assert libc.capget(ctypes.byref(h), d) == 0
d[0].eff &= ~(1 << 19)
assert libc.capset(ctypes.byref(h), d) == 0
for pid in {pids:?}:
    r = libc.syscall({kcmp}, os.getpid(), pid, 0, 0, 0)   # KCMP_FILE 0 0: needs ptrace access
    print("OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
"#,
        kcmp = libc::SYS_kcmp
    );
    lines(&tree.py_unconfined(&script))
}

#[test]
fn cordon_cannot_be_touched_and_keeps_no_core_while_the_command_runs() {
    let tree = Tree::new();
    // The caller's core limit, which the command must get although cordon runs with 0.
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid rlimit.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut current) },
        0
    );
    assert!(
        current.rlim_max >= 1 << 20,
        "the test needs a core hard limit of 1 MiB"
    );
    let callers = libc::rlimit {
        rlim_cur: 1 << 20,
        rlim_max: current.rlim_max,
    };
    let script = format!(
        r#"{calls}
cordon = os.getppid()
print(sys("prlimit64", cordon, resource.RLIMIT_CORE, limit(2**64 - 1, 2**64 - 1), None))
print(sys("prlimit64", cordon, resource.RLIMIT_CPU, limit(1, 1), None))
print(sys("setpriority", os.PRIO_PROCESS, cordon, 19))
print(sys("sched_setaffinity", cordon, 8, CPU0))
print(sys("ioprio_set", 1, cordon, IOPRIO_IDLE))
# A descendant finds cordon as its parent's parent.
child = r'''
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
stat = open("/proc/" + str(os.getppid()) + "/stat").read()
cordon = int(stat.rsplit(")", 1)[1].split()[1])
lim = (ctypes.c_uint64 * 2)(2**64 - 1, 2**64 - 1)
r = libc.syscall(%d, cordon, 4, ctypes.byref(lim), None)   # RLIMIT_CORE
print(cordon, "OK" if r == 0 else errno.errorcode[ctypes.get_errno()])
''' % NR["prlimit64"]
print(subprocess.run([os.readlink("/proc/self/exe"), "-c", child], capture_output=True, text=True).stdout.strip() == "%d EPERM" % cordon)
print(" ".join(next(l for l in open("/proc/self/limits") if l.startswith("Max core")).split()))
open("ready", "w").close()
import time
deadline = time.time() + 30
while not os.path.exists("go") and time.time() < deadline:
    time.sleep(0.02)
"#,
        calls = raw_calls()
    );
    let mut cmd = tree.cordon();
    cmd.arg("run")
        .arg("--")
        .arg(common::python())
        .arg("-c")
        .arg(format!("{}\n{script}", common::PROBE))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe and reads a struct copied into the closure.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_CORE, &callers) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let cordon = cmd.spawn().expect("spawn cordon");
    let cordon_pid = cordon.id();
    let before = Observed {
        core_limit: String::new(),
        ..observe(std::process::id())
    };
    wait_for(&tree.cwd.join("ready"));

    // From outside, while the command runs: cordon's core soft limit is 0 (hard unchanged),
    // nothing else of it changed, and it is not dumpable, unlike an ordinary process.
    let during = observe(cordon_pid);
    let hard = if current.rlim_max == libc::RLIM_INFINITY {
        "unlimited".to_owned()
    } else {
        current.rlim_max.to_string()
    };
    assert_eq!(
        during.core_limit,
        format!("Max core file size 0 {hard} bytes")
    );
    assert_eq!(during.cpu_limit, "Max cpu time unlimited unlimited seconds");
    assert_eq!(during.nice, before.nice);
    assert_eq!(during.cpus_allowed, before.cpus_allowed);
    let ordinary = Outsider::start();
    assert_eq!(
        ptrace_readable(&tree, &[cordon_pid, ordinary.pid()]),
        ["EPERM", "OK"]
    );

    std::fs::write(tree.cwd.join("go"), "").expect("write go");
    let out = cordon.wait_with_output().expect("wait for cordon");
    assert_eq!(
        lines(&out),
        [
            "EPERM",
            "EPERM",
            "EPERM",
            "EPERM",
            "EPERM",
            "True",
            &format!("Max core file size {} {hard} bytes", 1 << 20),
        ],
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(0));
}

/// System V IPC objects and a POSIX message queue made outside, removed on drop.
struct OutsideIpc {
    shm_key: i32,
    shm_id: i32,
    msg_key: i32,
    msg_id: i32,
    sem_key: i32,
    sem_id: i32,
    mq_name: String,
}

const SECRET: &[u8] = b"outside secret";

/// `struct msgbuf` with room for the secret.
#[repr(C)]
struct MsgBuf {
    mtype: libc::c_long,
    mtext: [u8; 64],
}

impl OutsideIpc {
    fn create() -> OutsideIpc {
        let base = 0x4300_0000 | ((std::process::id() as i32 & 0xffff) << 4);
        let flags = libc::IPC_CREAT | libc::IPC_EXCL | 0o600;
        // SAFETY: these calls take integers and pointers to buffers that outlive them.
        unsafe {
            let shm_id = libc::shmget(base, 4096, flags);
            assert!(shm_id >= 0, "shmget: {}", std::io::Error::last_os_error());
            let at = libc::shmat(shm_id, std::ptr::null(), 0);
            assert_ne!(at as isize, -1, "shmat");
            std::ptr::copy_nonoverlapping(SECRET.as_ptr(), at.cast::<u8>(), SECRET.len());
            assert_eq!(libc::shmdt(at), 0);
            let msg_id = libc::msgget(base + 1, flags);
            assert!(msg_id >= 0, "msgget");
            let mut msg = MsgBuf {
                mtype: 1,
                mtext: [0; 64],
            };
            msg.mtext[..SECRET.len()].copy_from_slice(SECRET);
            let sent = libc::msgsnd(msg_id, (&msg as *const MsgBuf).cast(), SECRET.len(), 0);
            assert_eq!(sent, 0);
            let sem_id = libc::semget(base + 2, 1, flags);
            assert!(sem_id >= 0, "semget");
            assert_eq!(libc::semctl(sem_id, 0, libc::SETVAL, 7), 0);
            let mq_name = format!("cordon-test-{}", std::process::id());
            let c_name = std::ffi::CString::new(format!("/{mq_name}")).expect("name");
            let mq = libc::mq_open(
                c_name.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600,
                std::ptr::null_mut::<libc::mq_attr>(),
            );
            assert!(mq >= 0, "mq_open: {}", std::io::Error::last_os_error());
            assert_eq!(
                libc::mq_send(mq, SECRET.as_ptr().cast(), SECRET.len(), 0),
                0
            );
            libc::mq_close(mq);
            OutsideIpc {
                shm_key: base,
                shm_id,
                msg_key: base + 1,
                msg_id,
                sem_key: base + 2,
                sem_id,
                mq_name,
            }
        }
    }

    /// The content of each object, read from outside.
    fn contents(&self) -> (Vec<u8>, Vec<u8>, i32, Vec<u8>) {
        // SAFETY: as in `create`; every buffer outlives the call that fills it.
        unsafe {
            let at = libc::shmat(self.shm_id, std::ptr::null(), libc::SHM_RDONLY);
            assert_ne!(at as isize, -1, "shmat");
            let shm = std::slice::from_raw_parts(at.cast::<u8>(), SECRET.len()).to_vec();
            libc::shmdt(at);
            let mut msg = MsgBuf {
                mtype: 0,
                mtext: [0; 64],
            };
            let n = libc::msgrcv(
                self.msg_id,
                (&mut msg as *mut MsgBuf).cast(),
                64,
                0,
                libc::IPC_NOWAIT | libc::MSG_COPY,
            );
            // MSG_COPY needs CONFIG_CHECKPOINT_RESTORE; without it, take the message out.
            let n = if n < 0 {
                libc::msgrcv(
                    self.msg_id,
                    (&mut msg as *mut MsgBuf).cast(),
                    64,
                    0,
                    libc::IPC_NOWAIT,
                )
            } else {
                n
            };
            let queued = msg.mtext[..n.max(0) as usize].to_vec();
            let sem = libc::semctl(self.sem_id, 0, libc::GETVAL);
            let c_name = std::ffi::CString::new(format!("/{}", self.mq_name)).expect("name");
            let mq = libc::mq_open(c_name.as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK);
            assert!(mq >= 0, "mq_open");
            let mut buf = [0u8; 8192];
            let n = libc::mq_receive(mq, buf.as_mut_ptr().cast(), buf.len(), std::ptr::null_mut());
            libc::mq_close(mq);
            (shm, queued, sem, buf[..n.max(0) as usize].to_vec())
        }
    }
}

impl Drop for OutsideIpc {
    fn drop(&mut self) {
        // SAFETY: removing objects this test made; IPC_RMID ignores the buffer argument.
        unsafe {
            libc::shmctl(self.shm_id, libc::IPC_RMID, std::ptr::null_mut());
            libc::msgctl(self.msg_id, libc::IPC_RMID, std::ptr::null_mut());
            libc::semctl(self.sem_id, 0, libc::IPC_RMID);
            if let Ok(name) = std::ffi::CString::new(format!("/{}", self.mq_name)) {
                libc::mq_unlink(name.as_ptr());
            }
        }
    }
}

/// True when a POSIX message queue of this name (without the leading slash) exists.
fn mq_exists(name: &str) -> bool {
    let c_name = std::ffi::CString::new(format!("/{name}")).expect("name");
    // SAFETY: mq_open with a valid C string and no O_CREAT reads nothing else.
    let mq = unsafe { libc::mq_open(c_name.as_ptr(), libc::O_RDONLY) };
    if mq >= 0 {
        // SAFETY: closing the descriptor just opened.
        unsafe { libc::mq_close(mq) };
    }
    mq >= 0
}

#[test]
fn outside_sysv_ipc_and_posix_queues_cannot_be_reached_or_added_to() {
    let tree = Tree::new();
    let ipc = OutsideIpc::create();
    let new_queue = format!("cordon-test-new-{}", std::process::id());
    let probe = |name: &str| {
        format!(
            r#"{calls}
SHM_KEY, SHM_ID, MSG_KEY, MSG_ID, SEM_KEY, SEM_ID = {shm_key}, {shm_id}, {msg_key}, {msg_id}, {sem_key}, {sem_id}
MQ = b"{mq}"
buf = ctypes.create_string_buffer(4096)
"#,
            calls = raw_calls(),
            shm_key = ipc.shm_key,
            shm_id = ipc.shm_id,
            msg_key = ipc.msg_key,
            msg_id = ipc.msg_id,
            sem_key = ipc.sem_key,
            sem_id = ipc.sem_id,
            mq = name,
        )
    };
    let script = format!(
        r#"{prelude}
print(os.getpid())
print(sys("shmget", SHM_KEY, 0, 0), sys("shmctl", 0, 14, buf), sys("shmctl", SHM_ID, 2, buf),
      sys("shmat", SHM_ID, 0, 0), sys("shmctl", SHM_ID, 0, 0), sys("shmget", 0, 4096, 0o1600))
sop = (ctypes.c_short * 3)(0, -1, 0o4000)
print(sys("msgget", MSG_KEY, 0), sys("msgctl", 0, 12, buf), sys("msgrcv", MSG_ID, buf, 64, 0, 0o4000),
      sys("msgsnd", MSG_ID, buf, 8, 0o4000), sys("msgctl", MSG_ID, 0, 0), sys("msgget", 0, 0o1600))
print(sys("semget", SEM_KEY, 0, 0), sys("semop", SEM_ID, sop, 1), sys("semtimedop", SEM_ID, sop, 1, None),
      sys("semctl", SEM_ID, 0, 16, 0), sys("semctl", SEM_ID, 0, 0), sys("semget", 0, 1, 0o1600))
print(sys("mq_open", MQ, os.O_RDWR, 0, None), sys("mq_unlink", MQ),
      sys("mq_open", b"{new_queue}", os.O_CREAT | os.O_RDWR, 0o600, None))
# What stays: memory shared with a child through an anonymous shared mapping, and a pipe.
import mmap
shared = mmap.mmap(-1, 4096)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    shared[:6] = b"shared"; os.write(w, b"piped"); os._exit(0)
os.waitpid(pid, 0)
print(shared[:6].decode(), os.read(r, 5).decode())
"#,
        prelude = probe(&ipc.mq_name),
    );
    // The refusals, on the Landlock + seccomp path; with the namespace layer the IPC namespace
    // is the command's own and these objects are not there (tests/namespaces.rs).
    let out = tree.py_without_userns(&[], &script);
    let got = lines(&out);
    assert_eq!(
        got[1..],
        [
            "EPERM EPERM EPERM EPERM EPERM EPERM",
            "EPERM EPERM EPERM EPERM EPERM EPERM",
            "EPERM EPERM EPERM EPERM EPERM EPERM",
            "EPERM EPERM EPERM",
            "shared piped",
        ],
        "{}",
        stderr(&out)
    );
    // From outside: everything intact, no new queue, no segment made by the command.
    assert_eq!(
        ipc.contents(),
        (SECRET.to_vec(), SECRET.to_vec(), 7, SECRET.to_vec())
    );
    assert!(!mq_exists(&new_queue));
    // /proc/sysvipc/shm: key shmid perms size cpid ...; no segment was made by the command.
    let listing = std::fs::read_to_string("/proc/sysvipc/shm").expect("sysvipc");
    assert!(
        !listing
            .lines()
            .any(|l| l.split_whitespace().nth(4) == Some(got[0].as_str())),
        "{listing}"
    );

    // Unconfined, the same lookups reach the objects: the probe itself works.
    let control = format!(
        r#"{prelude}
print(sys("shmget", SHM_KEY, 0, 0), sys("shmctl", SHM_ID, 2, buf), sys("msgget", MSG_KEY, 0),
      sys("semget", SEM_KEY, 0, 0), sys("mq_open", MQ, os.O_RDONLY, 0, None))
"#,
        prelude = probe(&ipc.mq_name),
    );
    let out = tree.py_unconfined(&control);
    assert_eq!(lines(&out), ["OK OK OK OK OK"], "{}", stderr(&out));
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn no_call_makes_a_setuid_or_setgid_file() {
    let tree = Tree::new();
    let x86_only = if cfg!(target_arch = "x86_64") {
        r#"
print(sys("chmod", b"plain", 0o4755), sys("open", b"created-open", os.O_CREAT | os.O_WRONLY, 0o2755),
      sys("creat", b"created-creat", 0o4755), sys("mknod", b"node-mknod", stat.S_IFREG | 0o6755, 0))
"#
    } else {
        "print('EPERM EPERM EPERM EPERM')\n"
    };
    let script = format!(
        r#"{calls}
import shutil, stat
os.umask(0o022)
open("plain", "w").close()
print(attempt(lambda: os.chmod("plain", 0o4755)), attempt(lambda: os.chmod("plain", 0o2755)),
      attempt(lambda: os.chmod("plain", 0o6755)))
fd = os.open("plain", os.O_RDONLY)
print(attempt(lambda: os.fchmod(fd, 0o4755)), sys("fchmodat", -100, b"plain", 0o4755),
      sys("fchmodat2", -100, b"plain", 0o2755, 0))
print(attempt(lambda: os.open("created", os.O_CREAT | os.O_WRONLY, 0o4755)),
      attempt(lambda: os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o2755)),
      attempt(lambda: os.mknod("node", stat.S_IFREG | 0o4755)),
      sys("mknodat", -100, b"node-at", stat.S_IFREG | 0o2755, 0),
      sys("openat", -100, b"created-at", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o4700))
{x86_only}
how = (ctypes.c_uint64 * 3)(os.O_RDONLY, 0, 0)
print(sys("openat2", -100, b"plain", ctypes.byref(how), 24))
shutil.copy(os.path.realpath("/bin/sh"), "rootshell")
# File capabilities are the other privilege-raising mark: the kernel wants CAP_SETFCAP for them.
caps = (1 << 25 | 1).to_bytes(4, "little") + (1 << 7).to_bytes(4, "little") + bytes(12)
print(attempt(lambda: os.chmod("rootshell", 0o4755)),
      attempt(lambda: os.setxattr("rootshell", "security.capability", caps)),
      attempt(lambda: (os.mkdir("group-dir"), os.chmod("group-dir", 0o2775))))
# What stays: ordinary modes, the sticky bit, creating with ordinary modes, mkdir.
print(attempt(lambda: os.chmod("plain", 0o755)), attempt(lambda: os.mkdir("dir")),
      attempt(lambda: os.chmod("dir", 0o1777)),
      attempt(lambda: os.close(os.open("made", os.O_CREAT | os.O_WRONLY, 0o644))),
      attempt(lambda: os.mknod("node-ok", stat.S_IFREG | 0o644)),
      attempt(lambda: os.mkdir("setid-dir", 0o6777)),
      attempt(lambda: os.close(os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600))),
      open("plain").read() == "")
"#,
        calls = raw_calls()
    );
    let out = tree.py(&[], &script);
    assert_eq!(
        lines(&out),
        [
            "EPERM EPERM EPERM",
            "EPERM EPERM EPERM",
            "EPERM EPERM EPERM EPERM EPERM",
            "EPERM EPERM EPERM EPERM",
            "ENOSYS",
            "EPERM EPERM EPERM",
            "OK OK OK OK OK OK OK True",
        ],
        "{}",
        stderr(&out)
    );
    // From outside: the exact modes, and nothing refused was made.
    let cwd = &tree.cwd;
    assert_eq!(mode_of(&cwd.join("plain")), 0o755);
    assert_eq!(mode_of(&cwd.join("rootshell")), 0o755);
    assert_eq!(mode_of(&cwd.join("group-dir")), 0o755);
    let out = tree
        .py_unconfined("print(attempt(lambda: os.getxattr('rootshell', 'security.capability')))");
    assert_eq!(lines(&out), ["ENODATA"], "{}", stderr(&out));
    assert_eq!(mode_of(&cwd.join("dir")), 0o1777);
    assert_eq!(mode_of(&cwd.join("made")), 0o644);
    assert_eq!(mode_of(&cwd.join("node-ok")), 0o644);
    // mkdir keeps only the permission and sticky bits of its mode.
    assert_eq!(mode_of(&cwd.join("setid-dir")), 0o755);
    for refused in [
        "created",
        "created-open",
        "created-creat",
        "created-at",
        "node",
        "node-at",
        "node-mknod",
    ] {
        assert!(!cwd.join(refused).exists(), "{refused} was made");
    }
    for entry in std::fs::read_dir(cwd).expect("read cwd") {
        let path = entry.expect("entry").path();
        assert_eq!(mode_of(&path) & 0o6000, 0, "{}", path.display());
    }

    // Unconfined, the same chmod works: the check from outside can see a setuid file.
    let control = cwd.join("control");
    std::fs::write(&control, "").expect("write control");
    let out = tree.py_unconfined("print(attempt(lambda: os.chmod('control', 0o4755)))");
    assert_eq!(lines(&out), ["OK"], "{}", stderr(&out));
    assert_eq!(mode_of(&control), 0o4755);
}

#[test]
fn copying_tools_keep_working_without_the_setuid_bit() {
    let tree = Tree::new();
    let source = tree.outside.join("suid-src");
    std::fs::copy("/bin/true", &source).expect("copy /bin/true");
    std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o4755)).expect("chmod");
    let src = source.display();
    let out = tree.run(&[
        "--",
        "sh",
        "-c",
        &format!(
            "umask 022; cp {src} cp-plain; echo cp=$?; cp -p {src} cp-p 2>/dev/null; echo cp-p=$?; \
             install -m 4755 {src} installed 2>/dev/null; echo install=$?; \
             install -m 755 {src} installed-755; echo install-755=$?"
        ),
    ]);
    // cp without -p drops the bits by itself; cp -p and install -m 4755 report the refused
    // chmod and fail, leaving the file they created with their private creation mode.
    assert_eq!(
        lines(&out),
        ["cp=0", "cp-p=1", "install=1", "install-755=0"],
        "{}",
        stderr(&out)
    );
    let cwd = &tree.cwd;
    assert_eq!(mode_of(&cwd.join("cp-plain")), 0o755);
    assert_eq!(mode_of(&cwd.join("cp-p")), 0o700);
    assert_eq!(mode_of(&cwd.join("installed")), 0o600);
    assert_eq!(mode_of(&cwd.join("installed-755")), 0o755);
    assert_eq!(mode_of(&source), 0o4755);
}

/// The ptrace-gated calls are refused by seccomp itself: under `enforcement = "report"` on a
/// kernel without Landlock (simulated with the ABI knob), nothing else would stop them.
#[test]
fn ptrace_gated_calls_are_refused_without_landlock_too() {
    let tree = Tree::new();
    std::fs::write(
        tree.cwd.join("no-landlock.toml"),
        "extends = \"workspace-write\"\nenforcement = \"report\"\n",
    )
    .expect("write profile");
    let outsider = Outsider::start();
    let before = observe(outsider.pid());
    let script = format!(
        r#"{calls}
P = {pid}
print(sys("migrate_pages", P, 64, CPU0, CPU0), sys("move_pages", P, 0, None, None, None, 0))
pidfd = libc.syscall(NR["pidfd_open"], ctypes.c_long(P), ctypes.c_long(0))
iov = (ctypes.c_uint64 * 2)(0, 4096)
print(sys("process_madvise", pidfd, ctypes.byref(iov), 1, 20, 0), sys("pidfd_getfd", pidfd, 1, 0))
print(sys("prlimit64", P, resource.RLIMIT_CPU, limit(1, 1), None), sys("setpriority", os.PRIO_PROCESS, P, 19))
"#,
        calls = raw_calls(),
        pid = outsider.pid()
    );
    let out = tree
        .cordon()
        .env("CORDON_LANDLOCK_ABI_MAX", "0")
        .args(["run", "--json", "-p", "no-landlock.toml", "--"])
        .arg(common::python())
        .arg("-c")
        .arg(format!("{}\n{script}", common::PROBE))
        .output()
        .expect("spawn cordon");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let layers = report["sandbox"]["layers"].to_string();
    assert!(!layers.contains("landlock"), "{layers}");
    assert!(layers.contains("seccomp"), "{layers}");
    assert_eq!(
        report["stdout"]
            .as_str()
            .map(|s| s.lines().collect::<Vec<_>>()),
        Some(vec!["EPERM EPERM", "EPERM EPERM", "EPERM EPERM"]),
        "{report}"
    );
    assert_eq!(observe(outsider.pid()), before);
}

/// Library callers get the same guard as the CLI: after `Sandbox::exec` the calling process is
/// not dumpable and keeps no core, while the command got the caller's core limit.
#[tokio::test(flavor = "multi_thread")]
async fn library_callers_keep_no_core_and_the_command_gets_the_callers_limit() {
    use cordon::exec::{ExecRequest, Outcome, Sandbox};
    let tree = Tree::new();
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid rlimit.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut current) },
        0
    );
    assert!(
        current.rlim_max >= 1 << 20,
        "the test needs a core hard limit of 1 MiB"
    );
    // No other test in this binary calls the library, so this is the caller's limit when the
    // first run starts.
    let callers = libc::rlimit {
        rlim_cur: 1 << 20,
        rlim_max: current.rlim_max,
    };
    // SAFETY: setrlimit reads a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_CORE, &callers) }, 0);
    let policy = cordon::sandbox::SandboxPolicy::from_json(&format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{:?}]}},
            "network":{{"mode":"denied","unix_sockets":"deny"}},
            "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#,
        tree.cwd
    ))
    .expect("policy");
    let sandbox = Sandbox::new(cordon::helper::Helper::cordon_binary(env!(
        "CARGO_BIN_EXE_cordon"
    )));
    let request =
        ExecRequest::sandboxed(["grep", "Max core", "/proc/self/limits"], &tree.cwd, policy);
    let result = sandbox.exec(request).await;
    assert_eq!(result.outcome, Outcome::Success, "{result:?}");
    let line = String::from_utf8_lossy(&result.stdout.bytes)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let hard = if current.rlim_max == libc::RLIM_INFINITY {
        "unlimited".to_owned()
    } else {
        current.rlim_max.to_string()
    };
    assert_eq!(line, format!("Max core file size {} {hard} bytes", 1 << 20));
    let mut after = callers;
    // SAFETY: getrlimit writes into a valid rlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut after) }, 0);
    assert_eq!((after.rlim_cur, after.rlim_max), (0, current.rlim_max));
    assert_eq!(ptrace_readable(&tree, &[std::process::id()]), ["EPERM"]);
}

/// Run standalone (without cordon's `setsid`), the helper's process group may hold processes
/// outside the sandbox, so no process group counts as the command's own.
#[test]
fn a_helper_outside_its_own_session_cannot_renice_its_group() {
    let tree = Tree::new();
    let outsider = Outsider::start();
    let before = observe(outsider.pid());
    let policy = format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{:?}]}},"network":{{"mode":"denied"}},"enforcement":{{"missing_layer":"refuse","carve_outs":"refuse"}}}}"#,
        tree.cwd
    );
    let script = format!(
        r#"{probe}{calls}
print(sys("setpriority", os.PRIO_PGRP, 0, 19), sys("ioprio_set", 2, 0, IOPRIO_IDLE),
      sys("setpriority", os.PRIO_PROCESS, 0, 5), os.getpriority(os.PRIO_PROCESS, 0))
"#,
        probe = common::PROBE,
        calls = raw_calls()
    );
    let mut helper = Command::new(env!("CARGO_BIN_EXE_cordon"));
    helper
        .arg(cordon::helper::SELF_HELPER_ARG)
        .args(["--policy", &policy, "--"])
        .arg(common::python())
        .args(["-c", &script])
        .current_dir(&tree.cwd)
        .env_remove("CORDON_LANDLOCK_ABI_MAX");
    // With the namespace layer the command leads a process group of its own inside the pid
    // namespace, so its group is its own: renicing it works, and the outsider is untouched
    // (raising the priority back needs CAP_SYS_NICE: EACCES).
    if common::userns_available() {
        let out = Command::new(helper.get_program())
            .args(helper.get_args())
            .current_dir(&tree.cwd)
            .env_remove("CORDON_LANDLOCK_ABI_MAX")
            .process_group(outsider.pid() as i32)
            .output()
            .expect("spawn the helper");
        assert_eq!(lines(&out), ["OK OK EACCES 19"], "{}", stderr(&out));
        assert_eq!(observe(outsider.pid()), before);
    }
    let out = common::without_userns(&helper)
        // In the outsider's group: a PRIO_PGRP of 0 would reach it.
        .process_group(outsider.pid() as i32)
        .output()
        .expect("spawn the helper");
    assert_eq!(lines(&out), ["EPERM EPERM OK 5"], "{}", stderr(&out));
    assert_eq!(observe(outsider.pid()), before);
}
