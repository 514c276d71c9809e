//! Landlock's own audit records (ABI 7), read where the caller may: with `CAP_AUDIT_READ` and
//! audit enabled, a listener on the audit netlink multicast group sees every
//! `AUDIT_LANDLOCK_ACCESS` record (domain id, blockers, path or port) and the
//! `AUDIT_LANDLOCK_DOMAIN` record that names the process that created the domain. A domain is
//! this run's when that process is the helper or one of its descendants; its access records
//! are then denials with `evidence: "landlock_audit"`.
//!
//! This module never changes the audit configuration: where the caller lacks the capability
//! it does not run, and where audit is disabled (the default on most machines) its thread
//! only asks and ends.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cordon_sandbox::policy::SandboxPolicy;
use cordon_sandbox::status::{ConfinementReceipt, StatusRecord};

use crate::classify::access::Access;
use crate::classify::{merge, Denial, EvidenceKind, Operation};

const NETLINK_AUDIT: libc::c_int = 9;
/// The multicast group of read-only log listeners (`AUDIT_NLGRP_READLOG`).
const AUDIT_NLGRP_READLOG: u32 = 1;
const AUDIT_GET: u16 = 1000;
const AUDIT_LANDLOCK_ACCESS: u16 = 1423;
const AUDIT_LANDLOCK_DOMAIN: u16 = 1424;
const NLMSG_HDRLEN: usize = 16;

/// A running listener.
pub(crate) struct AuditListener {
    stop: Arc<AtomicBool>,
    records: Receiver<Records>,
}

/// How long a "disabled" answer to `AUDIT_GET` is believed: runs back to back (an embedder's,
/// a server's) then skip the group, the question and the listener's thread. Audit enabled in
/// the meantime is seen by the first run after it.
const DISABLED_BELIEVED_FOR: Duration = Duration::from_secs(1);

/// When a run of this process last found audit disabled.
static DISABLED_AT: Mutex<Option<Instant>> = Mutex::new(None);

fn recently_disabled() -> bool {
    DISABLED_AT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .is_some_and(|at| at.elapsed() < DISABLED_BELIEVED_FOR)
}

fn note_disabled() {
    *DISABLED_AT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Instant::now());
}

/// Access records by domain, and the domains created by this run's processes.
#[derive(Default)]
struct Records {
    access: BTreeMap<String, Vec<String>>,
    ours: Vec<String>,
}

/// The read-log group joined, before the helper is spawned, so that no record of its domains
/// is missed: they wait in the socket until [`AuditGroup::listen_for`] reads them.
pub(crate) struct AuditGroup {
    socket: OwnedFd,
}

impl AuditGroup {
    /// Joins the group; `None` without `CAP_AUDIT_READ` (then nothing more is asked), or
    /// when a run of this process found audit disabled less than [`DISABLED_BELIEVED_FOR`] ago.
    pub fn join() -> Option<AuditGroup> {
        if recently_disabled() {
            return None;
        }
        multicast_socket().ok().map(|socket| AuditGroup { socket })
    }

    /// Starts the listener for the run whose helper is `pid`: domains it and its descendants
    /// create are this run's. Whether audit is enabled at all is asked on the listener's own
    /// thread (the kernel answers `AUDIT_GET` from a kernel thread it starts for the purpose,
    /// about 0.1 ms the run need not wait for); disabled, the thread ends with nothing. Called
    /// after the spawn: the first thread a process makes has glibc take over `SIGSETXID`, and
    /// a command spawned after that would not inherit the caller's disposition of it.
    pub fn listen_for(self, pid: u32) -> Option<AuditListener> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let socket = self.socket;
        let records = super::spare_threads::run(move || {
            if !audit_enabled() {
                note_disabled();
                return Records::default();
            }
            listen(&socket, &stopping, pid)
        })
        .ok()?;
        Some(AuditListener { stop, records })
    }
}

impl AuditListener {
    /// Stops listening and returns the run's denials as `policy` and `receipt` explain them.
    pub fn finish(
        self,
        policy: &SandboxPolicy,
        receipt: Option<&ConfinementReceipt>,
    ) -> Vec<Denial> {
        self.stop.store(true, Ordering::SeqCst);
        let records = self.records.recv().unwrap_or_default();
        let status: Vec<StatusRecord> = receipt
            .cloned()
            .map(StatusRecord::Confined)
            .into_iter()
            .collect();
        let access = Access::new(policy, Path::new("/"), &status);
        let mut out = Vec::new();
        for domain in &records.ours {
            for record in records.access.get(domain).into_iter().flatten() {
                out.extend(denial(record, &access));
            }
        }
        merge(out)
    }
}

/// Why Landlock's audit records cannot be read here, for `cordon doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AuditUnreadable {
    /// The read-log group refused this process (no `CAP_AUDIT_READ`), with the OS error.
    NoCapability(String),
    /// Audit is disabled in the kernel.
    Disabled,
}

/// Whether a run here would read Landlock's audit records: the read-log group can be joined
/// and audit is enabled. Asking changes nothing.
pub(crate) fn readable() -> Result<(), AuditUnreadable> {
    multicast_socket().map_err(|e| AuditUnreadable::NoCapability(e.to_string()))?;
    if audit_enabled() {
        Ok(())
    } else {
        Err(AuditUnreadable::Disabled)
    }
}

/// Whether audit is enabled (`AUDIT_GET`); asking changes nothing.
fn audit_enabled() -> bool {
    let Ok(socket) = netlink_socket() else {
        return false;
    };
    let request = header(
        NLMSG_HDRLEN as u32,
        AUDIT_GET,
        (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16,
    );
    // SAFETY: sends the 16 bytes of `request` on a socket we own.
    if unsafe {
        libc::send(
            socket.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
        )
    } < 0
    {
        return false;
    }
    // A kernel that never answers (it should) costs a second, not the run.
    let timeout = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: sets a socket option from `timeout`, valid for its size.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    let mut buf = vec![0u8; 8192];
    for _ in 0..4 {
        // SAFETY: receives into `buf`, valid for its length.
        let n = unsafe { libc::recv(socket.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < (NLMSG_HDRLEN + 8) as isize {
            return false;
        }
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        let error = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
        if kind == libc::NLMSG_ERROR as u16 && error != 0 {
            // Refused: outside the initial user namespace, or without the capability.
            return false;
        }
        if kind == AUDIT_GET {
            // struct audit_status: mask, then enabled.
            return u32::from_ne_bytes([buf[20], buf[21], buf[22], buf[23]]) != 0;
        }
    }
    false
}

fn header(len: u32, kind: u16, flags: u16) -> Vec<u8> {
    let mut h = Vec::with_capacity(NLMSG_HDRLEN);
    h.extend_from_slice(&len.to_ne_bytes());
    h.extend_from_slice(&kind.to_ne_bytes());
    h.extend_from_slice(&flags.to_ne_bytes());
    h.extend_from_slice(&1u32.to_ne_bytes());
    h.extend_from_slice(&0u32.to_ne_bytes());
    h
}

fn netlink_socket() -> io::Result<OwnedFd> {
    // SAFETY: creates a new socket; no memory is passed.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A socket bound to the read-log group (needs `CAP_AUDIT_READ`).
fn multicast_socket() -> io::Result<OwnedFd> {
    let socket = netlink_socket()?;
    // SAFETY: sockaddr_nl is plain data; all-zero is valid before the fields are set.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    addr.nl_groups = AUDIT_NLGRP_READLOG;
    // SAFETY: binds to `addr`, valid for its size.
    let rc = unsafe {
        libc::bind(
            socket.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(socket)
}

fn listen(socket: &OwnedFd, stop: &AtomicBool, child: u32) -> Records {
    let mut records = Records::default();
    let mut buf = vec![0u8; 65536];
    // After the stop, a short while more: the records of the last denials may still be on
    // their way. The group carries every process's records, so it never falls silent by
    // itself: the deadline, not silence, ends the loop.
    let mut deadline: Option<std::time::Instant> = None;
    loop {
        match deadline {
            Some(at) if std::time::Instant::now() >= at => break,
            None if stop.load(Ordering::SeqCst) => {
                deadline = Some(std::time::Instant::now() + std::time::Duration::from_millis(150));
            }
            _ => {}
        }
        let mut poll = libc::pollfd {
            fd: socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call.
        let ready = unsafe { libc::poll(&mut poll, 1, 50) };
        if ready <= 0 {
            continue;
        }
        // SAFETY: receives into `buf`, valid for its length.
        let n = unsafe { libc::recv(socket.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let Ok(n) = usize::try_from(n) else {
            continue;
        };
        if n < NLMSG_HDRLEN {
            continue;
        }
        let len = (u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize).min(n);
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        let text = String::from_utf8_lossy(&buf[NLMSG_HDRLEN..len]).into_owned();
        let Some(domain) = field(&text, "domain") else {
            continue;
        };
        match kind {
            AUDIT_LANDLOCK_ACCESS => records.access.entry(domain).or_default().push(text),
            AUDIT_LANDLOCK_DOMAIN if field(&text, "status").as_deref() == Some("allocated") => {
                let creator = field(&text, "pid").and_then(|p| p.parse::<u32>().ok());
                if creator.is_some_and(|p| child != 0 && descends_from(p, child)) {
                    records.ours.push(domain);
                }
            }
            _ => {}
        }
    }
    records
}

/// Whether `pid` is `ancestor` or one of its descendants (by the parent links in `/proc`).
fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut at = pid;
    for _ in 0..64 {
        if at == ancestor {
            return true;
        }
        if at <= 1 {
            return false;
        }
        let Ok(status) = std::fs::read_to_string(format!("/proc/{at}/status")) else {
            return false;
        };
        let parent = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|p| p.trim().parse::<u32>().ok());
        match parent {
            Some(p) => at = p,
            None => return false,
        }
    }
    false
}

/// The value of `key=` in an audit record: a quoted string, hex-encoded text, or a bare word.
fn field(text: &str, key: &str) -> Option<String> {
    let start = text
        .match_indices(&format!("{key}="))
        .find(|(i, _)| *i == 0 || text.as_bytes()[i - 1] == b' ')?
        .0
        + key.len()
        + 1;
    let rest = &text[start..];
    if let Some(quoted) = rest.strip_prefix('"') {
        return quoted.split('"').next().map(str::to_owned);
    }
    let word = rest.split(' ').next().unwrap_or_default();
    // Paths with spaces or odd bytes are hex-encoded.
    if word.len().is_multiple_of(2)
        && word.len() > 1
        && word.bytes().all(|b| b.is_ascii_hexdigit())
        && key == "path"
    {
        let bytes: Option<Vec<u8>> = (0..word.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&word[i..i + 2], 16).ok())
            .collect();
        return bytes.map(|b| String::from_utf8_lossy(&b).into_owned());
    }
    Some(word.to_owned())
}

/// One access record as a denial: the blocker says the operation, the path or port the target.
fn denial(record: &str, access: &Access) -> Option<Denial> {
    let blockers = field(record, "blockers")?;
    let blocker = blockers.split(',').next()?;
    let seen = EvidenceKind::LandlockAudit;
    if let Some(net) = blocker.strip_prefix("net.") {
        let port = field(record, "dest").or_else(|| field(record, "src"))?;
        let host = field(record, "daddr")
            .or_else(|| field(record, "saddr"))
            .unwrap_or_else(|| "127.0.0.1".into());
        let list = if net == "bind_tcp" {
            "tcp_bind"
        } else {
            "tcp_connect"
        };
        return Some(Denial::new(
            Operation::TcpPort,
            Some(format!("{host}:{port}")),
            format!("TCP port {port} is not in network.{list}"),
            format!("add {port} to network.{list}"),
            seen,
        ));
    }
    if blocker.starts_with("scope.abstract_unix_socket") {
        return Some(Denial::new(
            Operation::UnixSocket,
            None,
            "abstract unix sockets outside the sandbox are scoped out",
            "--allow-unix-sockets",
            seen,
        ));
    }
    let path = Path::new(&field(record, "path")?).to_path_buf();
    let (operation, verdict) = match blocker {
        "fs.execute" => (Operation::FileExecute, access.read_verdict(&path)),
        "fs.read_file" | "fs.read_dir" => (Operation::FileRead, access.read_verdict(&path)),
        _ => (Operation::FileWrite, access.write_verdict(&path)),
    };
    let verdict = verdict?;
    // For creation and removal the record names the directory, which is also what to grant.
    let allow_with = match (
        operation,
        blocker.starts_with("fs.make_") || blocker.starts_with("fs.remove_"),
    ) {
        (Operation::FileWrite, true) => format!("--writable {}", path.display()),
        _ => verdict.allow_with,
    };
    Some(Denial::new(
        operation,
        Some(path.display().to_string()),
        verdict.rule,
        allow_with,
        seen,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_real_records() {
        let access = r#"audit(1796120200.430:53): domain=1fafa7a78 blockers=fs.make_reg path="/etc" dev="vda" ino=19"#;
        assert_eq!(field(access, "domain").as_deref(), Some("1fafa7a78"));
        assert_eq!(field(access, "blockers").as_deref(), Some("fs.make_reg"));
        assert_eq!(field(access, "path").as_deref(), Some("/etc"));
        let domain = r#"audit(1796120200.430:53): domain=1fafa7a78 status=allocated mode=enforcing pid=27973 uid=0 exe="/x" comm="cordon""#;
        assert_eq!(field(domain, "pid").as_deref(), Some("27973"));
        assert_eq!(field(domain, "status").as_deref(), Some("allocated"));
        // A hex-encoded path (it had a space).
        assert_eq!(
            field("domain=1 blockers=fs.make_reg path=2F6120620A", "path").as_deref(),
            Some("/a b\n")
        );
    }
}
