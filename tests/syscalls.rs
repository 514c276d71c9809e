//! The seccomp layer, Landlock scopes and the network rules, against the real kernel.

mod common;

use std::process::Command;

use common::{compile_c, in_private_netns, lines, stderr, stdout, Tree};

#[test]
fn no_new_privs_and_seccomp_are_in_force() {
    let tree = Tree::new();
    let out = tree.run(&[
        "--",
        "grep",
        "-E",
        "^(NoNewPrivs|Seccomp):",
        "/proc/self/status",
    ]);
    let text = stdout(&out);
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    assert!(text.contains("Seccomp:\t2"), "{text}");
}

#[test]
fn non_unix_socket_families_get_eperm() {
    let tree = Tree::new();
    let script = r#"
for fam in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET, socket.AF_VSOCK):
    print(attempt(lambda: socket.socket(fam, socket.SOCK_DGRAM if fam == socket.AF_NETLINK else socket.SOCK_STREAM)))
print(attempt(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)))
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
a.sendall(b"ping"); print(b.recv(4).decode())
a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536); print(a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) > 0)
"#;
    let out = tree.py(&[], script);
    assert_eq!(
        lines(&out),
        ["EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "OK", "ping", "True"],
        "{}",
        stderr(&out)
    );
}

#[test]
fn network_enabled_allows_inet_sockets() {
    let tree = Tree::new();
    let out = tree.py(
        &["--network", "enabled"],
        "print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)))",
    );
    assert_eq!(lines(&out), ["OK"], "{}", stderr(&out));
}

#[test]
fn dangerous_syscalls_are_refused() {
    let tree = Tree::new();
    // ctypes reaches the raw system calls, so the errno is the filter's, not a library's.
    let script = r#"
import ctypes, fcntl, termios
libc = ctypes.CDLL(None, use_errno=True)
def sys(nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()]
print(sys(425, 8, 0))                 # io_uring_setup
print(sys(101, 0, 0, 0, 0))           # ptrace(PTRACE_TRACEME)
print(sys(272, 0x10000000))           # unshare(CLONE_NEWUSER)
print(sys(56, 0x10000000 | 17, 0, 0, 0, 0))  # clone(CLONE_NEWUSER|SIGCHLD)
print(sys(435, 0, 0))                 # clone3
print(sys(321, 0, 0, 0))              # bpf
print(sys(323, 0))                    # userfaultfd
print(sys(250, 0, 0, 0, 0, 0))        # keyctl
print(sys(430, 0, 0))                 # fsopen
print(sys(16, 0, 0x5412, ctypes.addressof(ctypes.c_char(b"x"))))  # ioctl(0, TIOCSTI)
print(sys(16, 0, 0x541C, 0))          # ioctl(0, TIOCLINUX)
import subprocess
print(subprocess.run(["true"]).returncode)  # fork/exec still work after clone3 falls back
"#;
    let out = tree.py(&[], script);
    assert_eq!(
        lines(&out),
        [
            "EPERM", "EPERM", "EPERM", "EPERM", "ENOSYS", "EPERM", "EPERM", "EPERM", "EPERM",
            "EPERM", "EPERM", "0"
        ],
        "{}",
        stderr(&out)
    );
}

#[cfg(target_arch = "x86_64")]
#[test]
fn i386_and_x32_system_calls_cannot_reach_socket() {
    let tree = Tree::new();
    // int 0x80 with eax=359 is the i386 socket(AF_INET, SOCK_STREAM, 0).
    let i386 = compile_c(
        &tree.outside,
        "i386",
        r#"#include <stdio.h>
int main(void){ long r; __asm__ volatile("int $0x80" : "=a"(r) : "a"(359), "b"(2), "c"(1), "d"(0) : "memory");
printf("%ld\n", r); return 0; }"#,
    );
    // Bit 30 marks an x32 system call; 41 is socket.
    let x32 = compile_c(
        &tree.outside,
        "x32",
        r#"#include <stdio.h>
#include <unistd.h>
#include <errno.h>
int main(void){ long r = syscall(0x40000000 | 41, 2, 1, 0); printf("%ld %d\n", r, r < 0 ? errno : 0); return 0; }"#,
    );
    let out = tree.run(&["--", i386.to_str().unwrap()]);
    // The i386 ABI fails the filter's architecture check: the process is killed by SIGSYS.
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGSYS),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");
    let out = tree.run(&["--", x32.to_str().unwrap()]);
    assert_eq!(
        stdout(&out).trim(),
        format!("-1 {}", libc::EPERM),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unix_sockets_outside_are_unreachable_unless_allowed() {
    let tree = Tree::new();
    let path = tree.outside.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let script = format!(
        r#"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: s.connect({path:?})))
print(attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)))
print(attempt(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)))
"#
    );
    let out = tree.py(&[], &script);
    assert_eq!(lines(&out), ["EPERM", "EPERM", "EPERM"], "{}", stderr(&out));
    let out = tree.py(&["--allow-unix-sockets"], &script);
    assert_eq!(lines(&out), ["OK", "OK", "OK"], "{}", stderr(&out));
    drop(listener);
}

#[test]
fn abstract_unix_sockets_and_signals_are_scoped() {
    require_landlock!(6);
    let tree = Tree::new();
    let name = format!("cordon-test-{}", std::process::id());
    let listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
    };
    // A process outside the sandbox to signal (signal 0 only checks permission).
    let mut outsider = Command::new("sleep").arg("30").spawn().unwrap();
    let script = format!(
        r#"
print(attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect("\0{name}")))
print(attempt(lambda: os.kill({pid}, 0)))
"#,
        pid = outsider.id()
    );
    // Landlock's own scoping, without the namespace layer. Unix sockets allowed: no
    // abstract-socket scope, but signals stay scoped.
    let out = tree.py_without_userns(&["--allow-unix-sockets"], &script);
    assert_eq!(lines(&out), ["OK", "EPERM"], "{}", stderr(&out));
    // The default denies unix sockets: seccomp refuses connect, and Landlock scopes it too.
    let out = tree.py_without_userns(&[], &script);
    assert_eq!(lines(&out), ["EPERM", "EPERM"], "{}", stderr(&out));
    // With it, the outside process is not even visible from the pid namespace.
    if common::userns_available() {
        let out = tree.py(&["--allow-unix-sockets"], &script);
        assert_eq!(lines(&out), ["OK", "ESRCH"], "{}", stderr(&out));
        let out = tree.py(&[], &script);
        assert_eq!(lines(&out), ["EPERM", "ESRCH"], "{}", stderr(&out));
    }
    assert!(
        outsider.try_wait().unwrap().is_none(),
        "the outside process died"
    );
    outsider.kill().unwrap();
    outsider.wait().unwrap();
    drop(listener);
}

#[test]
fn tcp_connect_to_loopback_fails_inside_and_works_outside() {
    let tree = Tree::new();
    if !common::private_netns_available() {
        return;
    }
    let python = common::python().display().to_string();
    let client = tree.outside.join("client.py");
    std::fs::write(
        &client,
        format!(
            "{}\nimport sys\ns = None\ndef go():\n    global s\n    s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\nprint(attempt(go))\n",
            common::PROBE
        ),
    )
    .unwrap();
    let server = r#"import socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
print(l.getsockname()[1], flush=True)
sys.stdout.close()
import time; time.sleep(20)"#;
    let cordon = env!("CARGO_BIN_EXE_cordon");
    let script = format!(
        "{python} -c '{server}' > port 2>/dev/null & SERVER=$!; while [ ! -s port ]; do sleep 0.1; done; P=$(cat port); \
         echo outside=$({python} {client} $P); \
         echo inside=$({cordon} run -- {python} {client} $P); \
         echo enabled=$({cordon} run --network enabled -- {python} {client} $P); kill $SERVER",
        client = client.display()
    );
    let out = in_private_netns(&tree, &script);
    assert_eq!(
        lines(&out),
        ["outside=OK", "inside=EPERM", "enabled=OK"],
        "{}",
        stderr(&out)
    );
}

#[test]
fn tcp_port_allow_list_is_enforced_by_landlock() {
    require_landlock!(4);
    let tree = Tree::new();
    std::fs::write(
        tree.cwd.join("ports.toml"),
        "extends = \"workspace-write\"\n[network]\nmode = \"enabled\"\ntcp_bind = [0]\ntcp_connect = [1]\n",
    )
    .unwrap();
    // Binding port 0 is allowed by the list; binding 8 is not. Nothing leaves the process.
    let out = tree.py(
        &["-p", "ports.toml"],
        r#"
s = socket.socket(); print(attempt(lambda: s.bind(("127.0.0.1", 0))))
t = socket.socket(); print(attempt(lambda: t.bind(("127.0.0.1", 8))))
"#,
    );
    assert_eq!(lines(&out), ["OK", "EACCES"], "{}", stderr(&out));
}
