//! Network, unix-socket and hardening-syscall denials, all of them seccomp's `EPERM`.
//!
//! With `network.mode = "denied"` every non-unix `socket()` fails with `EPERM`, so tools report
//! either that error ("connect EPERM", "[Errno 1] Operation not permitted") or what follows
//! from it: a resolver that cannot reach any server ("Could not resolve host", `EAI_AGAIN`), a
//! connection that never started ("Failed to connect to"). Under that policy these messages
//! have one cause, the sandbox; under `enabled` the same messages mean the network itself
//! failed, and nothing is reported.

use std::path::Path;
use std::sync::LazyLock;

use cordon_sandbox::policy::{SandboxPolicy, UnixSockets};
use cordon_sandbox::syscall_rules::rules;
use regex::Regex;

use super::text::{says_eperm, url_endpoints, Command, Context};
use super::{Denial, EvidenceKind, Operation};

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("static regex")
}

/// Words that put an `EPERM` line in a socket context.
const SOCKET_WORDS: &[&str] = &[
    "socket",
    "connect",
    "Connecting to",
    "/dev/tcp/",
    "/dev/udp/",
    "urlopen",
    "NewConnectionError",
    "Failed to establish a new connection",
    "dial ",
    "getaddrinfo",
    "sendto",
];

/// What resolvers print when no DNS server can be reached.
const RESOLVER_FAILURES: &[&str] = &[
    "Could not resolve host",
    "Couldn't resolve host",
    "Could not resolve hostname",
    "Temporary failure in name resolution",
    // apt's "Temporary failure resolving 'HOST'".
    "Temporary failure resolving",
    "Name or service not known",
    "EAI_AGAIN",
    "unable to resolve host address",
    "failed to lookup address information",
    "nodename nor servname provided",
    "No address associated with hostname",
    // Java, perl's IO::Socket.
    "UnknownHostException",
    "Bad hostname",
];

/// What tools print when a connection could not even start (curl, git's libcurl).
const CONNECT_FAILURES: &[&str] = &[
    "Failed to connect to",
    "failed to connect to",
    "Couldn't connect to server",
    // PHP's fsockopen, many database drivers; ssh; redis-cli; libpq.
    "Unable to connect to",
    "connect to host",
    "Could not connect to",
    "connection to server at",
];

/// Programs that speak only over unix sockets, whose socket failures are never the network's.
const UNIX_ONLY_PROGRAMS: &[&str] = &[
    "ssh-add",
    "ssh-agent",
    "busctl",
    "dbus-send",
    "systemctl",
    "journalctl",
    "loginctl",
];

/// How the output says a socket operation failed.
#[derive(Default)]
struct Signals {
    /// `EPERM` from a socket call.
    eperm_socket: bool,
    /// A resolver or connect failure, which the network policy explains.
    unreachable: bool,
}

/// Tools that fail silently (OpenBSD netcat skips an address whose `socket()` fails and exits
/// 1 without a word); for them a bare failure under a denied network is the evidence.
const SILENT_CLIENTS: &[&str] = &["nc", "netcat", "ncat"];

/// Exit codes that mean "could not resolve the host or connect to it": curl 6 and 7 (and 5,
/// could not resolve the proxy), wget 4 (network failure).
const QUIET_NETWORK_EXITS: &[(&str, &[i32])] = &[("curl", &[5, 6, 7]), ("wget", &[4])];

fn signals(ctx: &Context, unix_path: Option<&str>) -> Signals {
    let code_uses_sockets = ctx
        .scripts
        .iter()
        .any(|s| s.contains("socket") || s.contains("net.") || s.contains("connect("));
    let mut s = Signals::default();
    for line in &ctx.lines {
        // Java says `SocketException`, Go `socket:`, Python `socket.py`.
        let lower = line.to_lowercase();
        let about_socket = code_uses_sockets
            || SOCKET_WORDS
                .iter()
                .any(|w| lower.contains(&w.to_lowercase()))
            || unix_path.is_some_and(|p| line.contains(p));
        if says_eperm(line) && about_socket {
            s.eperm_socket = true;
        }
        if RESOLVER_FAILURES
            .iter()
            .chain(CONNECT_FAILURES)
            .any(|w| line.contains(w))
        {
            s.unreachable = true;
        }
    }
    // getent prints nothing: exit 2 is "not found", which for a host means no resolver answered.
    let getent_hosts = ctx.commands.iter().any(|c| {
        c.program() == "getent"
            && matches!(
                c.0.get(1).map(String::as_str),
                Some("hosts" | "ahosts" | "ahostsv4" | "ahostsv6")
            )
    });
    if getent_hosts && ctx.exit_code == Some(2) {
        s.unreachable = true;
    }
    let silent_client = ctx
        .commands
        .iter()
        .any(|c| SILENT_CLIENTS.contains(&c.program()) && !c.has_arg("-l"));
    if silent_client && ctx.exit_code.is_some_and(|c| c != 0) && ctx.stderr.trim().is_empty() {
        s.unreachable = true;
    }
    // Told to be quiet (`curl -s`, `wget -q`), these tools leave only their documented exit
    // code for "could not resolve or connect"; with nothing on stderr, that code is the evidence.
    let quiet_exit = ctx.commands.iter().any(|c| {
        QUIET_NETWORK_EXITS.iter().any(|(tool, codes)| {
            c.program() == *tool && ctx.exit_code.is_some_and(|e| codes.contains(&e))
        })
    });
    if quiet_exit && ctx.stderr.trim().is_empty() {
        s.unreachable = true;
    }
    s
}

/// The unix socket the command was talking to, when argv or output names one (relative paths
/// resolved against the cwd); `Some(None)` when it clearly used a unix socket but the path is
/// not known (ssh-add finds its socket in the environment, which the evidence does not carry).
fn unix_socket(ctx: &Context, cwd: &Path) -> Option<Option<String>> {
    unix_socket_named(ctx)
        .map(|found| found.map(|p| cwd.join(p).display().to_string()))
        .or_else(|| {
            ctx.commands
                .iter()
                .any(|c| UNIX_ONLY_PROGRAMS.contains(&c.program()))
                .then_some(None)
        })
}

fn unix_socket_named(ctx: &Context) -> Option<Option<String>> {
    static DIAL: LazyLock<Regex> = LazyLock::new(|| re(r"dial unix (\S+?):? "));
    static UNIX_URL: LazyLock<Regex> = LazyLock::new(|| re(r"unix://(/[^\s'`:]+)"));
    static PY_CONNECT: LazyLock<Regex> =
        LazyLock::new(|| re(r#"\.connect\(\s*['"]([^'"]+)['"]\s*\)"#));
    static SOCAT_UNIX: LazyLock<Regex> = LazyLock::new(|| {
        re(r"(?i)^(?:UNIX|UNIX-CONNECT|UNIX-CLIENT|UNIX-SENDTO|ABSTRACT-CONNECT):([^,]+)")
    });
    for cmd in &ctx.commands {
        for flag in ["--unix-socket", "--abstract-unix-socket"] {
            if let Some(p) = cmd.flag_value(flag) {
                return Some(Some(p.to_owned()));
            }
        }
        if SILENT_CLIENTS.contains(&cmd.program()) && cmd.has_arg("-U") {
            return Some(cmd.0.last().cloned());
        }
        if cmd.program() == "socat" {
            if let Some(c) = cmd.0.iter().find_map(|a| SOCAT_UNIX.captures(a)) {
                return Some(Some(c[1].to_owned()));
            }
        }
    }
    for line in &ctx.lines {
        if let Some(c) = DIAL.captures(line) {
            return Some(Some(c[1].to_owned()));
        }
    }
    for text in ctx.argv.iter().chain(&ctx.lines) {
        if let Some(c) = UNIX_URL.captures(text) {
            return Some(Some(c[1].to_owned()));
        }
    }
    for script in &ctx.scripts {
        if script.contains("AF_UNIX") {
            return Some(PY_CONNECT.captures(script).map(|c| c[1].to_owned()));
        }
    }
    None
}

/// The best `host:port` (or host) the evidence names for a refused connection.
fn network_target(ctx: &Context) -> Option<String> {
    static WITH_PORT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
        vec![
            // ssh: "connect to host H port P: failure".
            re(r"(?i)connect to host (\S+) port (\d+)"),
            re(r"(?i)connect to (\S+) port (\d+)"),
            // PHP's fsockopen, redis-cli ("Could not connect to Redis at H:P").
            re(
                r"(?i)(?:unable to|failed to|could not|couldn't|can't|cannot) connect to (?:\S+ at )?([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})\b",
            ),
            re(r"connect E[A-Z]+ (\S+):(\d+)"),
            re(r"Connecting to (\S+?)(?: \([^)]*\))?(?:\|[^|]*\|)?:(\d+)\.\.\."),
            re(r"/dev/(?:tcp|udp)/([^/\s]+)/(\d+)"),
            re(r"host='([^']+)', port=(\d+)"),
            re(r"dial (?:tcp|udp)\S* (\S+):(\d+)"),
            re(r"Bad hostname '([A-Za-z0-9.-]+):(\d+)'"),
        ]
    });
    static HOST_ONLY: LazyLock<Vec<Regex>> = LazyLock::new(|| {
        vec![
            re(r"[Cc]ould(?:n't| not) resolve host(?:name)?:? '?([A-Za-z0-9.-]+)"),
            re(r"unable to resolve host address [‘']([^’']+)[’']"),
            re(r"getaddrinfo E[A-Z_]+ (\S+)"),
            // Java's `UnknownHostException: HOST: ...`, perl's `getaddrinfo HOST: ...` and
            // `Bad hostname 'HOST:PORT'` (the port, when there, is taken below).
            re(r"UnknownHostException: ([A-Za-z0-9.-]+)"),
            re(r"getaddrinfo(?: for)? ([A-Za-z0-9][A-Za-z0-9.-]*)(?::| failed)"),
            re(r"Bad hostname '([A-Za-z0-9.-]+)'"),
        ]
    });
    static CODE_TUPLE: LazyLock<Regex> =
        LazyLock::new(|| re(r#"\(\s*['"]([^'"]+)['"]\s*,\s*(\d+)\s*\)"#));
    static NODE_CONNECT: LazyLock<Regex> =
        LazyLock::new(|| re(r#"connect\(\s*(\d+)\s*,\s*['"]([^'"]+)['"]"#));
    static CODE_HOST_PORT: LazyLock<Regex> =
        LazyLock::new(|| re(r#"['"]([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})['"]"#));

    // libpq: `connection to server at "HOST" (ADDRESS), port P failed`: the address it dialled.
    static LIBPQ: LazyLock<Regex> =
        LazyLock::new(|| re(r#"connection to server at "([^"]+)"(?: \(([^)]+)\))?, port (\d+)"#));
    for line in &ctx.lines {
        for r in WITH_PORT.iter() {
            if let Some(c) = r.captures(line) {
                return Some(format!("{}:{}", &c[1], &c[2]));
            }
        }
        if let Some(c) = LIBPQ.captures(line) {
            let host = c
                .get(2)
                .unwrap_or_else(|| c.get(1).expect("group 1 always takes part"));
            return Some(format!("{}:{}", host.as_str(), &c[3]));
        }
    }
    if let Some(t) = url_endpoints(&ctx.stderr).into_iter().next() {
        return Some(t);
    }
    if let Some(t) = ctx.argv.iter().flat_map(|a| url_endpoints(a)).next() {
        return Some(t);
    }
    for script in &ctx.scripts {
        if let Some(c) = CODE_TUPLE.captures(script) {
            return Some(format!("{}:{}", &c[1], &c[2]));
        }
        if let Some(c) = NODE_CONNECT.captures(script) {
            return Some(format!("{}:{}", &c[2], &c[1]));
        }
        if let Some(c) = CODE_HOST_PORT.captures(script) {
            return Some(format!("{}:{}", &c[1], &c[2]));
        }
    }
    for line in &ctx.lines {
        for r in HOST_ONLY.iter() {
            if let Some(c) = r.captures(line) {
                return Some(c[1].trim_end_matches('.').to_owned());
            }
        }
    }
    ctx.commands.iter().find_map(tool_target)
}

/// Where tools that print no address were going, from their own argv conventions.
fn tool_target(cmd: &Command) -> Option<String> {
    static SOCAT_NET: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?i)^(?:TCP[46]?|UDP[46]?|OPENSSL|SSL)(?:-CONNECT)?:([^:,]+):(\d+)"));
    let positional: Vec<&str> = cmd
        .0
        .iter()
        .skip(1)
        .map(String::as_str)
        .filter(|a| !a.starts_with(['-', '+', '@']))
        .collect();
    match cmd.program() {
        "getent" => cmd.0.get(2).cloned(),
        "dig" | "host" | "nslookup" => positional.first().map(|s| (*s).to_owned()),
        "socat" => cmd
            .0
            .iter()
            .find_map(|a| SOCAT_NET.captures(a))
            .map(|c| format!("{}:{}", &c[1], &c[2])),
        // `nc [options] host port`: the last two plain arguments (option values such as
        // `-w 2` are plain too, so count from the end).
        p if SILENT_CLIENTS.contains(&p) => match positional.as_slice() {
            [.., host, port] if port.parse::<u16>().is_ok() => Some(format!("{host}:{port}")),
            _ => None,
        },
        // pip names its index only as a path; without --index-url it is PyPI.
        p if p.starts_with("pip") && cmd.flag_value("--index-url").is_none() => {
            Some("pypi.org:443".into())
        }
        _ => None,
    }
}

/// Network and unix-socket denials.
pub(crate) fn denials(policy: &SandboxPolicy, cwd: &Path, ctx: &Context) -> Vec<Denial> {
    let named = unix_socket_named(ctx).flatten();
    let s = signals(ctx, named.as_deref());
    if !s.eperm_socket && !s.unreachable {
        return Vec::new();
    }
    let unix_denied = policy.network.unix_sockets == UnixSockets::Deny;
    if let Some(target) = unix_socket(ctx, cwd) {
        if !unix_denied {
            return Vec::new();
        }
        return vec![Denial {
            operation: Operation::UnixSocket,
            target,
            rule: "unix sockets denied".into(),
            allow_with: "--allow-unix-sockets".into(),
            evidence: EvidenceKind::Text,
            count: 1,
        }];
    }
    if policy.network.mode.is_denied() {
        return vec![Denial {
            operation: Operation::Network,
            target: network_target(ctx),
            rule: "network mode denied".into(),
            allow_with: "--network enabled".into(),
            evidence: EvidenceKind::Text,
            count: 1,
        }];
    }
    // The network is on, so a socket call refused with EPERM can only be seccomp's refusal of
    // AF_UNIX sockets (Landlock's port rules refuse with EACCES).
    if s.eperm_socket && unix_denied {
        return vec![Denial {
            operation: Operation::UnixSocket,
            target: None,
            rule: "unix sockets denied".into(),
            allow_with: "--allow-unix-sockets".into(),
            evidence: EvidenceKind::Text,
            count: 1,
        }];
    }
    Vec::new()
}

/// System calls that no profile allows, named in an `EPERM` message.
pub(crate) fn syscall_denials(policy: &SandboxPolicy, ctx: &Context) -> Vec<Denial> {
    // Socket rules are reported as network / unix denials; ioctl and clone are refused only for
    // particular arguments that a message cannot show, so an EPERM naming them proves nothing.
    const NOT_HERE: &[&str] = &[
        "socket",
        "socketpair",
        "connect",
        "sendto",
        "sendmsg",
        "sendmmsg",
        "bind",
        "listen",
        "ioctl",
        "clone",
    ];
    const USER_NS_FLAGS: &[&str] = &[
        "-U",
        "--user",
        "-r",
        "--map-root-user",
        "--map-current-user",
    ];
    let user_namespace = ctx
        .commands
        .iter()
        .any(|c| c.program() == "unshare" && USER_NS_FLAGS.iter().any(|f| c.has_arg(f)));
    let mut out = Vec::new();
    for rule in rules(policy) {
        // A rule that refuses only some arguments (another process's pid, a setuid mode) is
        // not shown by a message naming the call: the kernel refuses the same call with EPERM
        // for reasons of its own. unshare's flag is checked on the command line below.
        let conditional = !rule.when.is_empty() && rule.syscall != "unshare";
        if rule.errno != libc::EPERM || conditional || NOT_HERE.contains(&rule.syscall) {
            continue;
        }
        if rule.syscall == "unshare" && !user_namespace {
            continue;
        }
        let named = ctx
            .lines
            .iter()
            .any(|line| says_eperm(line) && names_word(line, rule.syscall));
        if named {
            out.push(Denial {
                operation: Operation::Syscall,
                target: Some(rule.syscall.to_owned()),
                rule: format!("seccomp: {} refused", rule.syscall),
                allow_with: format!("none: no profile allows it ({})", rule.reason),
                evidence: EvidenceKind::Text,
                count: 1,
            });
        }
    }
    out
}

/// True when `word` appears in `line` not as part of a longer identifier.
fn names_word(line: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    line.match_indices(word).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

#[cfg(test)]
mod tests {
    use super::names_word;

    #[test]
    fn words_are_whole() {
        assert!(names_word(
            "strace: ptrace(PTRACE_TRACEME, ...): x",
            "ptrace"
        ));
        assert!(!names_word("PTRACE_TRACEME", "ptrace"));
        assert!(!names_word("my_ptrace_helper", "ptrace"));
    }
}
