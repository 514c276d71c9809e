//! Socket containment against the real kernel: unix datagrams, unix names offered to the
//! outside, socket families, and stream protocols around the TCP port lists. Every refusal is
//! checked from outside the sandbox (an outside socket that must receive nothing, an outside
//! client that must find nothing to connect to, an outside listener that must accept nothing),
//! next to a harmless counterpart that must keep working.

mod common;

use std::io::{BufRead, BufReader};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::{in_private_netns, lines, stderr, stdout, Tree};

/// `sendmmsg(2)` from python through ctypes (python has no binding), one message with a
/// destination, raising OSError like the socket module does.
const SENDMMSG: &str = r#"
import ctypes, struct
_libc = ctypes.CDLL(None, use_errno=True)
class _iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class _msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(_iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t), ("flags", ctypes.c_int)]
class _mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _msghdr), ("len", ctypes.c_uint)]
def sockaddr(sock, address):
    if sock.family == socket.AF_UNIX:
        raw = struct.pack("=H", socket.AF_UNIX) + address.encode()
    else:
        host, port = address
        raw = struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + socket.inet_aton(host) + bytes(8)
    return ctypes.create_string_buffer(raw, len(raw)), len(raw)
def sendmmsg(sock, data, address, flags=0):
    name, namelen = sockaddr(sock, address)
    buf = ctypes.create_string_buffer(data, len(data))
    iov = _iovec(ctypes.cast(buf, ctypes.c_void_p), len(data))
    msg = _mmsghdr(_msghdr(ctypes.cast(name, ctypes.c_void_p), namelen, ctypes.pointer(iov), 1, None, 0, 0), 0)
    if _libc.sendmmsg(sock.fileno(), ctypes.byref(msg), 1, flags) != 1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
"#;

/// An abstract unix name no other test (or run) uses.
fn abstract_name(tag: &str) -> String {
    format!("cordon-test-{tag}-{}", std::process::id())
}

/// A datagram socket outside the sandbox that records every datagram it receives.
struct OutsideDatagrams {
    socket: Arc<UnixDatagram>,
    stop: Arc<AtomicBool>,
    reader: JoinHandle<Vec<String>>,
}

impl OutsideDatagrams {
    fn bind(addr: &SocketAddr) -> OutsideDatagrams {
        let socket = Arc::new(UnixDatagram::bind_addr(addr).expect("bind the outside socket"));
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("read timeout");
        let stop = Arc::new(AtomicBool::new(false));
        // Drained while the command runs: a unix datagram queue holds only ten messages.
        let reader = {
            let (socket, stop) = (Arc::clone(&socket), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut buf = [0u8; 256];
                loop {
                    match socket.recv(&mut buf) {
                        Ok(n) => got.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
                        Err(_) if stop.load(Ordering::SeqCst) => return got,
                        Err(_) => {}
                    }
                }
            })
        };
        OutsideDatagrams {
            socket,
            stop,
            reader,
        }
    }

    /// Everything received, then proof that nothing more is queued (non-blocking recv gives
    /// EAGAIN).
    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        let mut got = self.reader.join().expect("reader thread");
        got.sort();
        self.socket.set_nonblocking(true).expect("non-blocking");
        let err = self
            .socket
            .recv(&mut [0u8; 16])
            .expect_err("queue is empty");
        assert_eq!(err.raw_os_error(), Some(libc::EAGAIN));
        got
    }
}

/// The datagram attempts, one line each: `label result`. Each datagram carries its label, so
/// the outside knows exactly which attempts reached it.
fn datagram_script(named: &Path, abstract_name: &str) -> String {
    format!(
        r#"{SENDMMSG}
import time
def send(kind, call, sock, label, address):
    for _ in range(500):  # a non-blocking sender meets a full queue as EAGAIN
        try:
            if call == "sendto": sock.sendto(label.encode(), address)
            elif call == "sendmsg": sock.sendmsg([label.encode()], [], 0, address)
            else: sendmmsg(sock, label.encode(), address)
            return
        except BlockingIOError:
            time.sleep(0.01)
kinds = {{"DGRAM": socket.SOCK_DGRAM, "RAW": socket.SOCK_RAW,
         "DGRAM|CLOEXEC|NONBLOCK": socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK,
         "RAW|CLOEXEC|NONBLOCK": socket.SOCK_RAW | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK}}
targets = {{"named": {named:?}, "abstract": "\0{abstract_name}"}}
for via in ("socket", "socketpair"):
    for kind, value in kinds.items():
        for call in ("sendto", "sendmsg", "sendmmsg"):
            for target, address in targets.items():
                label = f"{{via}}/{{kind}}/{{call}}/{{target}}"
                def go():
                    sock = socket.socket(socket.AF_UNIX, value) if via == "socket" else socket.socketpair(socket.AF_UNIX, value)[0]
                    send(kind, call, sock, label, address)
                print(label, attempt(go))
"#
    )
}

fn every_datagram_label(target: &str) -> Vec<String> {
    let mut labels = Vec::new();
    for via in ["socket", "socketpair"] {
        for kind in [
            "DGRAM",
            "RAW",
            "DGRAM|CLOEXEC|NONBLOCK",
            "RAW|CLOEXEC|NONBLOCK",
        ] {
            for call in ["sendto", "sendmsg", "sendmmsg"] {
                labels.push(format!("{via}/{kind}/{call}/{target}"));
            }
        }
    }
    labels.sort();
    labels
}

#[test]
fn no_unix_datagram_reaches_a_socket_outside() {
    let tree = Tree::new();
    let named = tree.outside.join("dgram.sock");
    let abstract_name = abstract_name("dgram");
    let script = datagram_script(&named, &abstract_name);
    for (network, unix_allowed) in [
        ("denied", false),
        ("enabled", false),
        ("denied", true),
        ("enabled", true),
    ] {
        let _ = std::fs::remove_file(&named);
        let named_sink =
            OutsideDatagrams::bind(&SocketAddr::from_pathname(&named).expect("path address"));
        let abstract_sink = OutsideDatagrams::bind(
            &SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("abstract address"),
        );
        let mut args = vec!["--network", network];
        if unix_allowed {
            args.push("--allow-unix-sockets");
        }
        let out = tree.py(&args, &script);
        let results: Vec<String> = lines(&out)
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap_or_default().to_owned())
            .collect();
        let expected = if unix_allowed { "OK" } else { "EPERM" };
        assert_eq!(
            results.len(),
            48,
            "{network}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        assert!(
            results.iter().all(|r| r == expected),
            "{network}, unix allowed {unix_allowed}: {}",
            stdout(&out)
        );
        let (reached_named, reached_abstract) = (named_sink.finish(), abstract_sink.finish());
        if unix_allowed {
            // The counterpart: the same attempts do arrive when unix sockets are allowed.
            assert_eq!(reached_named, every_datagram_label("named"), "{network}");
            assert_eq!(
                reached_abstract,
                every_datagram_label("abstract"),
                "{network}"
            );
        } else {
            assert_eq!(reached_named, Vec::<String>::new(), "{network}");
            assert_eq!(reached_abstract, Vec::<String>::new(), "{network}");
        }
    }
}

#[test]
fn stream_and_seqpacket_pairs_work_and_address_no_one() {
    let tree = Tree::new();
    let named = tree.outside.join("dgram.sock");
    let outside = UnixDatagram::bind(&named).expect("bind the outside socket");
    let abstract_seq = abstract_name("seqpacket");
    let seq_listener = Command::new(common::python())
        .arg("-c")
        .arg(format!(
            "import socket\nl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\nl.bind('\\0{abstract_seq}'); l.listen(4); l.settimeout(30)\nprint('listening', flush=True)\nwhile True:\n    said = l.accept()[0].recv(16).decode(); print(said, flush=True)\n    if said == 'outside': break\n"
        ))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the outside seqpacket listener");
    let seq_listener = wait_for(seq_listener, "listening");
    let script = format!(
        r#"{SENDMMSG}
for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET, socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK,
             socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK):
    a, b = socket.socketpair(socket.AF_UNIX, kind)
    a.send(b"p"); os.write(b.fileno(), b"q")
    print(b.recv(1).decode() + os.read(a.fileno(), 1).decode())
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
# seqpacket ignores a destination: the datagram goes to the peer, never to the named socket.
print(attempt(lambda: a.sendmsg([b"s"], [], 0, {named:?})), b.recv(1).decode())
print(attempt(lambda: sendmmsg(a, b"m", {named:?})), b.recv(1).decode())
s, t = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: s.sendmsg([b"x"], [], 0, {named:?})))
def reach_listener():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect("\0{abstract_seq}"); s.send(b"inside")
print(attempt(reach_listener))
"#
    );
    let out = tree.py(&["--network", "denied"], &script);
    assert_eq!(
        lines(&out),
        ["pq", "pq", "pq", "pq", "OK s", "OK m", "EISCONN", "EPERM"],
        "{}",
        stderr(&out)
    );
    let out = tree.py(&["--network", "enabled"], &script);
    assert_eq!(
        lines(&out),
        ["pq", "pq", "pq", "pq", "OK s", "OK m", "EISCONN", "EPERM"],
        "{}",
        stderr(&out)
    );
    outside.set_nonblocking(true).expect("non-blocking");
    let err = outside
        .recv(&mut [0u8; 16])
        .expect_err("nothing reached the named socket");
    assert_eq!(err.raw_os_error(), Some(libc::EAGAIN));
    // Nothing from inside reached the outside seqpacket listener, which was listening all
    // along: a client outside gets through.
    let probe = Command::new(common::python())
        .arg("-c")
        .arg(format!(
            "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\ns.connect('\\0{abstract_seq}'); s.send(b'outside')"
        ))
        .status()
        .expect("connect from outside");
    assert!(probe.success());
    assert_eq!(seq_listener.finish(), ["outside"]);
}

/// A child process whose stdout has been read up to a marker line.
struct Held {
    child: Child,
    rest: BufReader<std::process::ChildStdout>,
    /// The lines before the marker.
    before: Vec<String>,
}

/// Reads `child`'s stdout up to the line `marker`.
fn wait_for(mut child: Child, marker: &str) -> Held {
    let mut rest = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut before = Vec::new();
    loop {
        let mut next = String::new();
        match rest.read_line(&mut next) {
            Ok(0) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no {marker:?} line; output so far: {before:?}");
            }
            Ok(_) if next.trim() == marker => {
                return Held {
                    child,
                    rest,
                    before,
                }
            }
            Ok(_) => before.push(next.trim().to_owned()),
        }
    }
}

impl Held {
    /// Closes stdin (a held command then finishes), reads the rest of stdout and checks the
    /// exit status is 0.
    fn finish(mut self) -> Vec<String> {
        drop(self.child.stdin.take());
        let rest: Vec<String> = (&mut self.rest)
            .lines()
            .map(|l| l.map(|l| l.trim().to_owned()).unwrap_or_default())
            .collect();
        let status = self.child.wait().expect("wait for the child");
        assert!(status.success(), "{status:?} {rest:?}");
        rest
    }
}

/// Runs `script` confined and keeps it alive (blocked on stdin) after it prints `ready`, so
/// the outside can try to reach whatever it bound; [`Held::finish`] lets it end.
fn hold(tree: &Tree, args: &[&str], script: &str) -> Held {
    let child = tree
        .cordon()
        .arg("run")
        .args(args)
        .arg("--")
        .arg(common::python())
        .arg("-c")
        .arg(format!(
            "{}\n{script}\nprint('ready', flush=True)\nsys.stdin.read()\n",
            common::PROBE
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn cordon");
    wait_for(child, "ready")
}

/// An outside client's attempts (python, unconfined): `kind address` pairs, one errno each.
fn outside_connects(tree: &Tree, attempts: &[(&str, String)]) -> Vec<String> {
    let mut script = String::new();
    for (kind, address) in attempts {
        // A python literal: Rust's `{:?}` writes NUL as `\0`, which python reads as an octal
        // escape when a digit follows.
        let address = format!("\"{}\"", address.replace('\0', "\\x00"));
        let call = match *kind {
            "stream" => {
                format!("socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect({address})")
            }
            "seqpacket" => {
                format!("socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).connect({address})")
            }
            _ => {
                format!("socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', {address})")
            }
        };
        script.push_str(&format!("print(attempt(lambda: {call}))\n"));
    }
    lines(&tree.py_unconfined(&script))
}

#[test]
fn a_confined_command_offers_no_unix_socket_with_the_network_denied() {
    let tree = Tree::new();
    let path = tree.cwd.join("server.sock");
    let name = abstract_name("squat");
    let script = format!(
        r#"
named = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: named.bind({path:?})), attempt(lambda: named.listen(8)))
hidden = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: hidden.bind("\0{name}")), attempt(lambda: hidden.listen(8)))
auto = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: auto.bind("")), attempt(lambda: auto.listen(8)))
print("auto", repr(auto.getsockname()))
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: a.bind({path:?} + ".pair")), attempt(lambda: a.listen(8)))
"#
    );
    let held = hold(&tree, &["--network", "denied"], &script);
    let before = &held.before;
    assert_eq!(
        before[..3],
        ["EPERM EPERM", "EPERM EPERM", "EPERM EPERM"],
        "{before:?}"
    );
    // An unbound socket has the empty name; autobind would have given it "\0xxxxx".
    assert_eq!(before[3], "auto ''");
    assert_eq!(before[4], "EPERM EPERM");
    let outside = outside_connects(
        &tree,
        &[
            ("stream", path.display().to_string()),
            ("stream", format!("\0{name}")),
            ("stream", format!("{}.pair", path.display())),
        ],
    );
    assert_eq!(outside, ["ENOENT", "ECONNREFUSED", "ENOENT"]);
    assert_eq!(held.finish(), Vec::<String>::new());

    // The counterpart: with unix sockets allowed the same server is reachable from outside.
    let _ = std::fs::remove_file(&path);
    let allowed = format!(
        r#"
named = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: named.bind({path:?})), attempt(lambda: named.listen(8)))
hidden = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: hidden.bind("\0{name}")), attempt(lambda: hidden.listen(8)))
"#
    );
    let held = hold(&tree, &["--allow-unix-sockets"], &allowed);
    assert_eq!(held.before, ["OK OK", "OK OK"]);
    let outside = outside_connects(
        &tree,
        &[
            ("stream", path.display().to_string()),
            ("stream", format!("\0{name}")),
        ],
    );
    assert_eq!(outside, ["OK", "OK"]);
    assert_eq!(held.finish(), Vec::<String>::new());
}

#[test]
fn a_confined_command_offers_no_unix_socket_with_the_network_enabled() {
    let tree = Tree::new();
    let path = tree.cwd.join("pair.sock");
    let seq_path = tree.cwd.join("seqpair.sock");
    let name = abstract_name("pair");
    // socket(AF_UNIX) is refused; a pair can still be bound to a name (the kernel allows it),
    // but it is connected, so it can never listen, whatever happens to its peer.
    let script = format!(
        r#"
print(attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)))
print(attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)))
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
print(attempt(lambda: a.bind({path:?})), attempt(lambda: a.listen(8)))
b.close(); print(attempt(lambda: a.listen(8)))
a.shutdown(socket.SHUT_RDWR); print(attempt(lambda: a.listen(8)))
c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
print(attempt(lambda: c.bind("\0{name}")), attempt(lambda: c.listen(8)))
e, f = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
print(attempt(lambda: e.bind({seq_path:?})), attempt(lambda: e.listen(8)))
# SO_PASSCRED autobinds on connect; the pair is connected already.
g, h = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
g.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
print(attempt(lambda: g.connect({path:?})), attempt(lambda: g.listen(8)))
print("auto", repr(g.getsockname()))
"#
    );
    let held = hold(&tree, &["--network", "enabled"], &script);
    let before = &held.before;
    assert_eq!(
        before[..7],
        [
            "EPERM",
            "EPERM",
            "OK EINVAL",
            "EINVAL",
            "EINVAL",
            "OK EINVAL",
            "OK EINVAL"
        ],
        "{before:?}"
    );
    assert_eq!(before[7], "ECONNREFUSED EINVAL", "{before:?}");
    let auto = before[8].trim_start_matches("auto ").to_owned();
    let mut attempts = vec![
        ("stream", path.display().to_string()),
        ("dgram", path.display().to_string()),
        ("seqpacket", format!("\0{name}")),
        ("stream", format!("\0{name}")),
        ("seqpacket", seq_path.display().to_string()),
    ];
    let mut expected = vec![
        "ECONNREFUSED",
        "EPROTOTYPE",
        "ECONNREFUSED",
        // Abstract names are looked up per type, so a stream client finds no seqpacket name.
        "ECONNREFUSED",
        "ECONNREFUSED",
    ];
    // The autobound name, if the kernel gave one, is no more reachable than the others.
    if let Some(hidden) = auto
        .strip_prefix("b'\\x00")
        .and_then(|s| s.strip_suffix('\''))
    {
        attempts.push(("stream", format!("\0{hidden}")));
        expected.push("ECONNREFUSED");
    }
    assert_eq!(outside_connects(&tree, &attempts), expected, "{before:?}");
    assert_eq!(held.finish(), Vec::<String>::new());
}

/// A listener outside the sandbox in the private network namespace: TCP on two ports and UDP
/// on the second, counting what arrives until the file `done` appears, then printing
/// `tcp_allowed=N tcp_denied=N udp=N`.
const PORT_LISTENER: &str = r#"
import os, select, socket, sys
allowed, denied = int(sys.argv[1]), int(sys.argv[2])
def listen(port):
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port)); l.listen(16); return l
tcp = {listen(allowed): "tcp_allowed", listen(denied): "tcp_denied"}
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", denied))
counts = {"tcp_allowed": 0, "tcp_denied": 0, "udp": 0}
open("ready", "w").close()
quiet_after_done = 0
while quiet_after_done < 3:
    ready, _, _ = select.select(list(tcp) + [udp], [], [], 0.1)
    for s in ready:
        if s is udp: udp.recv(64); counts["udp"] += 1
        else: s.accept(); counts[tcp[s]] += 1
    if not ready and os.path.exists("done"): quiet_after_done += 1
print(" ".join(f"{k}={v}" for k, v in counts.items()))
"#;

/// Stream protocols other than TCP, Fast Open and friends, aimed at a port not in the list.
fn port_probe(denied: u16, allowed: u16) -> String {
    let fastopen_connect = 30; // TCP_FASTOPEN_CONNECT
    format!(
        r#"{SENDMMSG}
D, A = ("127.0.0.1", {denied}), ("127.0.0.1", {allowed})
def connect(family, kind, protocol, address):
    s = socket.socket(family, kind, protocol)
    s.settimeout(5)
    s.connect(address if family == socket.AF_INET else ("::ffff:" + address[0], address[1]))
print("tcp-allowed", attempt(lambda: connect(socket.AF_INET, socket.SOCK_STREAM, 0, A)))
print("tcp-denied", attempt(lambda: connect(socket.AF_INET, socket.SOCK_STREAM, 0, D)))
print("tcp6-denied", attempt(lambda: connect(socket.AF_INET6, socket.SOCK_STREAM, 6, D)))
print("mptcp", attempt(lambda: connect(socket.AF_INET, socket.SOCK_STREAM, 262, D)))
print("mptcp6", attempt(lambda: connect(socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_CLOEXEC, 262, D)))
print("sctp-stream", attempt(lambda: connect(socket.AF_INET, socket.SOCK_STREAM, 132, D)))
print("sctp-seqpacket", attempt(lambda: connect(socket.AF_INET, socket.SOCK_SEQPACKET, 132, D)))
print("smc", attempt(lambda: connect(socket.AF_INET, socket.SOCK_STREAM, 256, D)))
print("dccp", attempt(lambda: connect(socket.AF_INET, 6, 33, D)))
print("raw", attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)))
print("fastopen-sendto", attempt(lambda: socket.socket().sendto(b"x", socket.MSG_FASTOPEN, D)))
print("fastopen-sendmsg", attempt(lambda: socket.socket().sendmsg([b"x"], [], socket.MSG_FASTOPEN, D)))
print("fastopen-sendmmsg", attempt(lambda: sendmmsg(socket.socket(), b"x", D, socket.MSG_FASTOPEN)))
def fastopen_connect():
    s = socket.socket(); s.setsockopt(socket.IPPROTO_TCP, {fastopen_connect}, 1); s.connect(D)
print("fastopen-connect", attempt(fastopen_connect))
print("udp", attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"u", D)))
"#
    )
}

/// Starts [`PORT_LISTENER`], runs `command` (the probe, confined or not) and prints the
/// probe's lines followed by the listener's counts, all inside a private network namespace.
fn with_port_listener(tree: &Tree, command: &str) -> Vec<String> {
    let (allowed, denied) = (4431, 4432);
    let listener = tree.outside.join("listener.py");
    std::fs::write(&listener, PORT_LISTENER).expect("write the listener");
    let probe = tree.outside.join("probe.py");
    std::fs::write(
        &probe,
        format!("{}\n{}", common::PROBE, port_probe(denied, allowed)),
    )
    .expect("write the probe");
    let state = tree.outside.join("state");
    std::fs::create_dir_all(&state).expect("state dir");
    let python = common::python().display();
    let script = format!(
        "cd {state} && rm -f ready done && ({python} {listener} {allowed} {denied} > counts &) && \
         for i in $(seq 200); do [ -e ready ] && break; sleep 0.05; done && \
         (cd {cwd} && {command} {python} {probe}); touch {state}/done; \
         for i in $(seq 200); do [ -s counts ] && break; sleep 0.05; done; cat counts",
        state = state.display(),
        listener = listener.display(),
        cwd = tree.cwd.display(),
        probe = probe.display(),
    );
    let out = in_private_netns(tree, &script);
    assert!(out.status.success(), "{}", stderr(&out));
    lines(&out)
}

#[test]
fn no_stream_protocol_bypasses_the_tcp_port_list() {
    require_landlock!(4);
    let tree = Tree::new();
    if !common::private_netns_available() {
        return;
    }
    std::fs::write(
        tree.cwd.join("ports.toml"),
        "extends = \"workspace-write\"\n[network]\nmode = \"enabled\"\ntcp_connect = [4431]\n",
    )
    .expect("write the profile");
    let cordon = format!("{} run -p ports.toml --", env!("CARGO_BIN_EXE_cordon"));
    let confined = with_port_listener(&tree, &cordon);
    assert_eq!(
        confined,
        [
            "tcp-allowed OK",
            "tcp-denied EACCES",
            "tcp6-denied EACCES",
            "mptcp EPERM",
            "mptcp6 EPERM",
            "sctp-stream EPERM",
            "sctp-seqpacket EPERM",
            "smc EPERM",
            "dccp EPERM",
            "raw EPERM",
            "fastopen-sendto EPERM",
            "fastopen-sendmsg EPERM",
            "fastopen-sendmmsg EPERM",
            "fastopen-connect EACCES",
            "udp OK",
            // Only the allowed TCP connection and the UDP datagram arrived.
            "tcp_allowed=1 tcp_denied=0 udp=1",
        ]
    );
    // The control, unconfined in the same kind of namespace: MPTCP and Fast Open do reach the
    // port, so the refusals above are what kept them out.
    let unconfined = with_port_listener(&tree, "");
    let reached: Vec<&String> = unconfined
        .iter()
        .filter(|l| {
            [
                "tcp-denied",
                "mptcp ",
                "fastopen-sendto",
                "fastopen-connect",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .collect();
    assert_eq!(
        reached,
        [
            "tcp-denied OK",
            "mptcp OK",
            "fastopen-sendto OK",
            "fastopen-connect OK"
        ],
        "{unconfined:?}"
    );
    let counts = unconfined.last().expect("counts line");
    assert!(counts.starts_with("tcp_allowed=1 "), "{unconfined:?}");
    assert!(!counts.contains("tcp_denied=0 "), "{unconfined:?}");
}

#[test]
fn network_enabled_allows_only_the_families_networking_needs() {
    let tree = Tree::new();
    let script = r#"
AF_VSOCK, AF_ALG, AF_PACKET, AF_KEY, AF_TIPC, AF_BLUETOOTH, AF_XDP, AF_RDS = 40, 38, 17, 15, 30, 31, 44, 21
for name, family, kind, protocol in (
        ("vsock", AF_VSOCK, socket.SOCK_STREAM, 0), ("alg", AF_ALG, socket.SOCK_SEQPACKET, 0),
        ("packet", AF_PACKET, socket.SOCK_RAW, 0), ("key", AF_KEY, socket.SOCK_RAW, 2),
        ("tipc", AF_TIPC, socket.SOCK_RDM, 0), ("bluetooth", AF_BLUETOOTH, socket.SOCK_RAW, 1),
        ("xdp", AF_XDP, socket.SOCK_RAW, 0), ("rds", AF_RDS, socket.SOCK_SEQPACKET, 0),
        ("netlink-sock-diag", socket.AF_NETLINK, socket.SOCK_RAW, 4),
        ("netlink-audit", socket.AF_NETLINK, socket.SOCK_RAW, 9),
        ("netlink-uevent", socket.AF_NETLINK, socket.SOCK_DGRAM, 15),
        ("netlink-generic", socket.AF_NETLINK, socket.SOCK_RAW, 16)):
    print(name, attempt(lambda: socket.socket(family, kind, protocol)),
          attempt(lambda: socket.socketpair(family, kind, protocol)))
# Route queries work: a link dump over NETLINK_ROUTE answers with at least loopback.
import struct
def links():
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    s.send(struct.pack("=IHHII", 32, 18, 0x301, 1, 0) + bytes(16))  # RTM_GETLINK, NLM_F_REQUEST|NLM_F_DUMP
    assert struct.unpack("=IH", s.recv(65536)[:6])[1] == 16  # RTM_NEWLINK
print("netlink-route", attempt(links))
print("if_nameindex", any(name == "lo" for _, name in socket.if_nameindex()))
print("inet", attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
      attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)))
"#;
    let out = tree.py(&["--network", "enabled"], script);
    assert_eq!(
        lines(&out),
        [
            "vsock EPERM EPERM",
            "alg EPERM EPERM",
            "packet EPERM EPERM",
            "key EPERM EPERM",
            "tipc EPERM EPERM",
            "bluetooth EPERM EPERM",
            "xdp EPERM EPERM",
            "rds EPERM EPERM",
            "netlink-sock-diag EPERM EPERM",
            "netlink-audit EPERM EPERM",
            "netlink-uevent EPERM EPERM",
            "netlink-generic EPERM EPERM",
            "netlink-route OK",
            "if_nameindex True",
            "inet OK OK",
        ],
        "{}",
        stderr(&out)
    );
    // The control: outside the sandbox the kernel offers these netlink protocols (the other
    // families depend on modules), so the refusals inside are the filter's.
    let control = tree.py_unconfined(
        r#"
for family, kind, protocol in ((socket.AF_NETLINK, socket.SOCK_RAW, 4), (socket.AF_NETLINK, socket.SOCK_DGRAM, 15),
                               (socket.AF_NETLINK, socket.SOCK_RAW, 16)):
    print(attempt(lambda: socket.socket(family, kind, protocol)))
"#,
    );
    assert_eq!(lines(&control), ["OK", "OK", "OK"], "{}", stderr(&control));
}

#[test]
fn unix_sockets_allowed_keeps_unix_datagrams_and_servers() {
    // With the network enabled and unix sockets allowed nothing on AF_UNIX is refused, while
    // the family allow-list still holds.
    let tree = Tree::new();
    let out = tree.py(
        &["--network", "enabled", "--allow-unix-sockets"],
        r#"
for kind in range(16):
    if kind in (1, 2, 3, 5):
        print(kind, attempt(lambda: socket.socket(socket.AF_UNIX, kind)), attempt(lambda: socket.socketpair(socket.AF_UNIX, kind)))
print(attempt(lambda: socket.socket(40, socket.SOCK_STREAM)))
"#,
    );
    assert_eq!(
        lines(&out),
        ["1 OK OK", "2 OK OK", "3 OK OK", "5 OK OK", "EPERM"],
        "{}",
        stderr(&out)
    );
}

/// `listen` on a socket that was never bound autobinds an ephemeral port without passing the
/// bind hook Landlock's rule sits on; the receipt says so whenever `tcp_bind` is set, and the
/// probe shows the gap is real (so the entry cannot go stale silently).
#[test]
fn the_receipt_names_the_listen_autobind_gap_of_tcp_bind() {
    require_landlock!(4);
    let tree = Tree::new();
    if !common::private_netns_available() {
        return;
    }
    std::fs::write(
        tree.cwd.join("bind.toml"),
        "extends = \"workspace-write\"\n[network]\nmode = \"enabled\"\ntcp_bind = [4432]\n",
    )
    .expect("write the profile");
    let probe = tree.outside.join("autobind.py");
    std::fs::write(
        &probe,
        format!(
            "{}\ns = socket.socket(); print('bind-other', attempt(lambda: s.bind(('127.0.0.1', 4433))))\n\
             t = socket.socket(); print('listen-unbound', attempt(lambda: t.listen(1)), t.getsockname()[1] > 0)\n",
            common::PROBE
        ),
    )
    .expect("write the probe");
    let cordon = format!(
        "{} run --json -p bind.toml -- {} {}",
        env!("CARGO_BIN_EXE_cordon"),
        common::python().display(),
        probe.display()
    );
    let out = in_private_netns(&tree, &cordon);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    assert_eq!(
        v["stdout"].as_str().unwrap_or_default(),
        "bind-other EACCES\nlisten-unbound OK True\n"
    );
    let unmediated: Vec<&str> = v["sandbox"]["unmediated"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    assert!(
        unmediated.contains(&cordon::sandbox::confine::UNMEDIATED_LISTEN_AUTOBIND),
        "{unmediated:?}"
    );
    // Without a bind list nothing is claimed about it.
    let out = tree.run(&["--json", "--", "true"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    assert!(!v["sandbox"]["unmediated"]
        .to_string()
        .contains("ephemeral port"));
}
