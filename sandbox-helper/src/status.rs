//! The status records the helper writes on its status fd, one JSON object per line.
//!
//! The fd is close-on-exec, so a successful `execve` closes it: the parent reads records until
//! end of file. At most one `confined` record comes first; then, if `execve` failed, one
//! `exec_error`. A `setup_error` means the command never ran. Before `confined`, `fds` records
//! may hand descriptors to the parent ([`send_fds`]; the fd is then a unix socket, and the
//! parent reads with [`read_records_with_fds`]): the listeners of the managed network.
//!
//! ```
//! use cordon_sandbox::status::{StatusRecord, read_records};
//!
//! let text = br#"{"kind":"exec_error","program":"nope","errno":2,"message":"No such file or directory"}
//! "#;
//! let records = read_records(&text[..]).unwrap();
//! assert!(matches!(records[0], StatusRecord::ExecError { errno: 2, .. }));
//! ```

use std::collections::VecDeque;
use std::io::{self, BufRead, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

/// One status record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StatusRecord {
    /// Every restriction is in place; `execve` comes next.
    Confined(ConfinementReceipt),
    /// The sandbox could not be built; the command did not run.
    SetupError {
        /// The step that failed.
        step: Step,
        /// The errno of the failing system call, when there was one.
        errno: Option<i32>,
        /// What failed and what to do about it.
        message: String,
    },
    /// Descriptors the helper hands to the parent, sent with this record's line in one
    /// `sendmsg` (`SCM_RIGHTS`): see [`send_fds`]. Comes before `confined`.
    Fds {
        /// What they are for, e.g. [`TAG_PROXY`], `host_port:5432` or
        /// [`TAG_SECCOMP_LISTENER`]. A reader that is not [`read_records_with_fds`] loses the
        /// descriptors (the kernel closes what a plain `read` does not take).
        tag: String,
        /// How many came with the record.
        count: usize,
    },
    /// `execve` failed after confinement (not found, not executable, denied by the sandbox).
    ExecError {
        /// The program as given.
        program: String,
        /// The errno from `execve`.
        errno: i32,
        /// The system's description of the errno.
        message: String,
    },
    /// What the seccomp observer needs besides its listener: the program of the kernel
    /// filter's refusals, as it would run without the observer (`code`, `jt`, `jf`, `k` per
    /// instruction). A notification this program answers with an errno is a refused call,
    /// answered with that errno; only one it allows may continue.
    Observer {
        /// The instructions.
        refusals: Vec<[u32; 4]>,
    },
}

/// [`StatusRecord::Fds`] tag of the seccomp user-notification listener.
pub const TAG_SECCOMP_LISTENER: &str = "seccomp_listener";

/// What the helper enforced, and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfinementReceipt {
    /// Layers in force, in the order they were applied.
    pub layers: Vec<Layer>,
    /// The Landlock ABI used (0 when Landlock is not in force).
    pub landlock_abi: u32,
    /// Everything the policy asked for that is not enforced.
    pub downgrades: Vec<Downgrade>,
    /// Where less was granted than the policy names, and how (a root granted entry by entry
    /// around an excluded path). Absent when nothing was narrowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approximations: Vec<Approximation>,
    /// Operations no layer mediates, whatever the policy says.
    pub unmediated: Vec<String>,
    /// Empty directories the helper created at `read_only` paths that did not exist, so that
    /// the command could not create them. The helper removes them when the command ends
    /// normally; after a kill the parent may remove those still empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placeholders: Vec<std::path::PathBuf>,
}

/// A confinement layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// A user namespace mapping the caller's uid and gid to themselves.
    UserNamespace,
    /// A mount namespace with the view: read-only outside writable roots, carve-outs, hidden
    /// paths, a minimal `/dev`.
    MountNamespace,
    /// A pid namespace with the helper as init: nothing of the command outlives it.
    PidNamespace,
    /// A fresh `/proc` showing only the sandbox's processes.
    PrivateProc,
    /// A private SysV IPC and POSIX message queue namespace.
    IpcNamespace,
    /// A private network namespace (loopback only).
    NetNamespace,
    /// All capabilities dropped.
    Capabilities,
    /// `PR_SET_NO_NEW_PRIVS` set.
    NoNewPrivs,
    /// Landlock filesystem rules.
    LandlockFs,
    /// Landlock TCP port rules.
    LandlockNet,
    /// Landlock abstract-unix-socket and signal scoping.
    LandlockScope,
    /// The seccomp filter.
    Seccomp,
}

/// One line per downgrade, without a prefix: downgrades of one kind with the same reason
/// (every carve-out, when there is no mount layer) share a line that lists what they name, so
/// that the reason is read once rather than skipped as noise.
pub fn not_enforced_lines(downgrades: &[Downgrade]) -> Vec<String> {
    // (kind, reason, what), in first-seen order.
    let mut groups: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for d in downgrades {
        let (kind, what) = d
            .restriction
            .split_once(':')
            .unwrap_or((d.restriction.as_str(), ""));
        match groups
            .iter_mut()
            .find(|(k, r, _)| *k == kind && *r == d.reason.as_str())
        {
            Some((_, _, whats)) if !what.is_empty() => whats.push(what),
            _ => groups.push((kind, d.reason.as_str(), vec![what])),
        }
    }
    groups
        .into_iter()
        .map(|(kind, reason, whats)| match whats.as_slice() {
            [""] => format!("not enforced: {kind} ({reason})"),
            [one] => format!("not enforced: {kind}:{one} ({reason})"),
            many => format!("not enforced: {kind}: {} ({reason})", many.join(", ")),
        })
        .collect()
}

/// One requested restriction that is not enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Downgrade {
    /// The restriction, as a short stable identifier (`read_only:/w/.git`, `landlock_truncate`).
    pub restriction: String,
    /// Why it is not enforced.
    pub reason: String,
}

/// A rule enforced more narrowly than the policy names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approximation {
    /// The policy rule, as `read:/` or `write:/srv`.
    pub rule: String,
    /// What was granted instead, and what that costs the command.
    pub effect: String,
}

/// The steps of the helper's setup, named in setup errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Reading the helper's arguments.
    Arguments,
    /// Parsing and validating the policy.
    Policy,
    /// Closing inherited file descriptors.
    CloseFds,
    /// Arranging to die with the parent.
    ParentDeath,
    /// Dropping capabilities.
    Capabilities,
    /// Setting `no_new_privs`.
    NoNewPrivs,
    /// Building and applying the Landlock ruleset.
    Landlock,
    /// Building and applying the seccomp filter.
    Seccomp,
    /// A requested restriction cannot be enforced and the policy says `refuse`.
    Enforcement,
    /// Writing the status record.
    Status,
    /// Resetting signal dispositions for the command.
    Signals,
    /// Changing to the working directory.
    Chdir,
    /// Creating the user, pid, ipc or network namespace.
    Namespaces,
    /// Building the mount view.
    Mounts,
    /// Bringing up `lo` in the private network namespace.
    Loopback,
    /// Starting the pid-1 init and the command's process.
    Init,
    /// Making the command the foreground process group of its controlling terminal.
    Terminal,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        f.write_str(&name)
    }
}

/// Writes one record as a single line with one `write` call, so that a reader never sees
/// half a record even if the helper dies right after.
pub fn write_record(fd: BorrowedFd<'_>, record: &StatusRecord) -> io::Result<()> {
    let line = encode(record)?;
    let mut written = 0;
    while written < line.len() {
        // SAFETY: `fd` is a live borrowed descriptor and the buffer is valid for its length.
        let n = unsafe {
            libc::write(
                fd.as_raw_fd(),
                line[written..].as_ptr().cast(),
                line.len() - written,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        written += n as usize;
    }
    Ok(())
}

/// Tag of the listening sockets of cordon's proxy inside the sandbox's network namespace.
pub const TAG_PROXY: &str = "proxy";
/// Tag prefix of the listening sockets for a host port (`host_port:5432`).
pub const TAG_HOST_PORT: &str = "host_port:";
/// Tag of the parent's end of the socket-request channel for published ports: a byte `4` or
/// `6` written on it is answered by one unconnected TCP socket of that family, made in the
/// sandbox's network namespace, sent back with an `fds` record tagged [`TAG_SOCKET`].
pub const TAG_PUBLISH: &str = "publish";
/// Tag of a socket answering a request on the [`TAG_PUBLISH`] channel.
pub const TAG_SOCKET: &str = "socket";

/// The most descriptors one [`send_fds`] carries (the kernel's own limit is 253).
pub const MAX_FDS_PER_RECORD: usize = 16;

/// Sends `fds` to the parent with an [`StatusRecord::Fds`] record tagged `tag`, as one
/// `sendmsg` on `channel`, which must be a unix socket. The parent's reader
/// ([`read_records_with_fds`]) hands them over with the record. The descriptors stay open here:
/// the caller closes its copies (or lets close-on-exec do it).
pub fn send_fds(channel: BorrowedFd<'_>, tag: &str, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.is_empty() || fds.len() > MAX_FDS_PER_RECORD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("between 1 and {MAX_FDS_PER_RECORD} descriptors per record"),
        ));
    }
    let line = encode(&StatusRecord::Fds {
        tag: tag.to_owned(),
        count: fds.len(),
    })?;
    let raw: Vec<libc::c_int> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    let payload = std::mem::size_of_val(raw.as_slice());
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: line.as_ptr() as *mut libc::c_void,
        iov_len: line.len(),
    };
    // SAFETY: `msghdr` is plain data for which all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at a control buffer of CMSG_SPACE(payload) bytes, so the first
    // header exists and its data has room for `payload` bytes.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(payload as u32) as _;
        std::ptr::copy_nonoverlapping(raw.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), payload);
    }
    loop {
        // SAFETY: `msg` and everything it points at live across the call. The line is small
        // (far below a socket buffer), so one call sends it whole or fails.
        let n = unsafe { libc::sendmsg(channel.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            if n as usize != line.len() {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the descriptor record was sent in part",
                ));
            }
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Reads records from the status socket until end of file, like [`read_records_as_they_come`],
/// also receiving the descriptors sent with [`send_fds`]: `on_record` gets each record with the
/// descriptors that came with it (none for every other kind). Descriptors arrive close-on-exec.
/// A record that claims more descriptors than arrived is an error; so are descriptors that no
/// record claims.
pub fn read_records_with_fds(
    channel: OwnedFd,
    mut on_record: impl FnMut(&StatusRecord, Vec<OwnedFd>),
) -> io::Result<Vec<StatusRecord>> {
    let mut records = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut received: VecDeque<OwnedFd> = VecDeque::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = recv_with_fds(channel.as_fd(), &mut buf, &mut received)?;
        if n == 0 {
            break;
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            if text.is_empty() {
                continue;
            }
            let record = parse_line(&text)?;
            let fds = match &record {
                StatusRecord::Fds { count, .. } => {
                    if *count > received.len() {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("status record {text:?} came without its descriptors"),
                        ));
                    }
                    received.drain(..*count).collect()
                }
                _ => Vec::new(),
            };
            on_record(&record, fds);
            records.push(record);
        }
    }
    if !pending.is_empty() {
        let text = String::from_utf8_lossy(&pending).into_owned();
        let record = parse_line(&text)?;
        on_record(&record, Vec::new());
        records.push(record);
    }
    if !received.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} descriptors arrived on the status socket without a record",
                received.len()
            ),
        ));
    }
    Ok(records)
}

/// One `recvmsg` on `channel` into `buf`; the descriptors that came with it are appended to
/// `received` (owned, close-on-exec, so none leaks whatever happens next). Returns the number
/// of bytes, 0 at end of file.
fn recv_with_fds(
    channel: BorrowedFd<'_>,
    buf: &mut [u8],
    received: &mut VecDeque<OwnedFd>,
) -> io::Result<usize> {
    // Room for the most descriptors one record may carry.
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe {
        libc::CMSG_SPACE((MAX_FDS_PER_RECORD * std::mem::size_of::<libc::c_int>()) as u32)
    } as usize;
    let mut control = vec![0u8; space];
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: `msghdr` is plain data for which all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: every buffer `msg` names is valid and writable for its stated length.
        let n = unsafe { libc::recvmsg(channel.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        // SAFETY: the kernel filled `msg`'s control buffer; the macros walk it within bounds.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
                    for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                        let fd = std::ptr::read_unaligned(data.add(i));
                        received.push_back(OwnedFd::from_raw_fd(fd));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "more descriptors arrived than one record may carry",
            ));
        }
        return Ok(n as usize);
    }
}

/// The parent's side of the [`TAG_PUBLISH`] channel: asks the sandbox's init for one
/// unconnected TCP socket (IPv6 when `v6`) in the sandbox's network namespace and waits for
/// it. One request at a time per channel (the caller serialises); a channel that timed out or
/// failed must not be used again, since a late answer would be taken for the next one.
pub fn request_socket(channel: BorrowedFd<'_>, v6: bool) -> io::Result<OwnedFd> {
    let request = [if v6 { 6u8 } else { 4u8 }];
    // SAFETY: send of a one-byte buffer on a borrowed, open socket.
    let n = unsafe {
        libc::send(
            channel.as_raw_fd(),
            request.as_ptr().cast(),
            1,
            libc::MSG_NOSIGNAL,
        )
    };
    if n != 1 {
        return Err(io::Error::last_os_error());
    }
    let mut line = Vec::new();
    let mut received = VecDeque::new();
    let mut buf = [0u8; 512];
    while !line.ends_with(b"\n") {
        let n = recv_with_fds(channel, &mut buf, &mut received)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the sandbox's init no longer answers (the run is over)",
            ));
        }
        line.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
    match (parse_line(&text)?, received.pop_front()) {
        (StatusRecord::Fds { tag, count: 1 }, Some(fd))
            if tag == TAG_SOCKET && received.is_empty() =>
        {
            Ok(fd)
        }
        (StatusRecord::Fds { count: 0, .. }, None) => Err(io::Error::other(
            "the sandbox's init could not make a socket",
        )),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected answer on the socket-request channel: {text:?}"),
        )),
    }
}

fn parse_line(line: &str) -> io::Result<StatusRecord> {
    serde_json::from_str(line).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unreadable status record {line:?}: {e}"),
        )
    })
}

/// Reads every record until end of file. A line that does not parse is an error that quotes it.
pub fn read_records<R: io::Read>(reader: R) -> io::Result<Vec<StatusRecord>> {
    read_records_as_they_come(reader, |_| {})
}

/// [`read_records`], calling `on_record` with each record as soon as its line has arrived
/// (a `confined` record comes before `execve`, while the helper may be waiting on it).
pub fn read_records_as_they_come<R: io::Read>(
    reader: R,
    mut on_record: impl FnMut(&StatusRecord),
) -> io::Result<Vec<StatusRecord>> {
    let mut records = Vec::new();
    for line in io::BufReader::new(reader).lines() {
        let line = line?;
        if line.is_empty() {
            continue;
        }
        let record = parse_line(&line)?;
        on_record(&record);
        records.push(record);
    }
    Ok(records)
}

/// Writes a record to any writer; used by tests and by the parent's own diagnostics.
pub fn write_record_to<W: Write>(mut w: W, record: &StatusRecord) -> io::Result<()> {
    w.write_all(&encode(record)?)
}

/// One record as one line of JSON.
fn encode(record: &StatusRecord) -> io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn downgrade(restriction: &str, reason: &str) -> Downgrade {
        Downgrade {
            restriction: restriction.into(),
            reason: reason.into(),
        }
    }

    #[test]
    fn downgrades_of_one_kind_and_reason_share_a_line() {
        let lines = not_enforced_lines(&[
            downgrade("read_only:/w/.git", "no mounts"),
            downgrade("landlock_truncate", "ABI 2"),
            downgrade("read_only:/w/.vscode", "no mounts"),
            downgrade("deny_read:/etc/shadow", "no mounts"),
            downgrade("read_only:/x", "other"),
        ]);
        assert_eq!(
            lines,
            [
                "not enforced: read_only: /w/.git, /w/.vscode (no mounts)",
                "not enforced: landlock_truncate (ABI 2)",
                "not enforced: deny_read:/etc/shadow (no mounts)",
                "not enforced: read_only:/x (other)",
            ]
        );
    }

    #[test]
    fn records_round_trip() {
        let records = vec![
            StatusRecord::Confined(ConfinementReceipt {
                layers: vec![Layer::Capabilities, Layer::Seccomp],
                landlock_abi: 7,
                downgrades: vec![Downgrade {
                    restriction: "read_only:/w/.git".into(),
                    reason: "needs the mount namespace layer".into(),
                }],
                approximations: vec![Approximation {
                    rule: "read:/".into(),
                    effect: "granted entry by entry".into(),
                }],
                unmediated: vec!["chmod".into()],
                placeholders: vec![],
            }),
            StatusRecord::SetupError {
                step: Step::Landlock,
                errno: Some(38),
                message: "x".into(),
            },
        ];
        let mut buf = Vec::new();
        for r in &records {
            write_record_to(&mut buf, r).unwrap();
        }
        assert_eq!(read_records(&buf[..]).unwrap(), records);
        assert_eq!(Step::CloseFds.to_string(), "close_fds");
    }

    #[test]
    fn descriptors_travel_with_their_record() {
        use std::os::fd::AsFd;
        let mut pair = [0; 2];
        // SAFETY: socketpair writes two descriptors into `pair`.
        assert_eq!(
            unsafe {
                libc::socketpair(
                    libc::AF_UNIX,
                    libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                    0,
                    pair.as_mut_ptr(),
                )
            },
            0
        );
        // SAFETY: fresh descriptors owned by nobody else.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let (r, w) = nix::unistd::pipe().unwrap();
        write_record(
            theirs.as_fd(),
            &StatusRecord::SetupError {
                step: Step::Status,
                errno: None,
                message: "before".into(),
            },
        )
        .unwrap();
        send_fds(theirs.as_fd(), TAG_PROXY, &[w.as_fd()]).unwrap();
        drop(w);
        drop(theirs);
        let mut got = Vec::new();
        let records =
            read_records_with_fds(ours, |record, fds| got.push((record.clone(), fds))).unwrap();
        assert_eq!(records.len(), 2);
        assert!(got[0].1.is_empty());
        assert_eq!(
            got[1].0,
            StatusRecord::Fds {
                tag: TAG_PROXY.into(),
                count: 1
            }
        );
        // The received copy is the pipe's write end: bytes written to it come out of `r`.
        let fd = got[1].1.pop().unwrap();
        assert_eq!(nix::unistd::write(&fd, b"x").unwrap(), 1);
        let mut byte = [0u8; 1];
        assert_eq!(nix::unistd::read(r.as_raw_fd(), &mut byte).unwrap(), 1);
        assert_eq!(&byte, b"x");
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(read_records(&b"{\"kind\":\"nope\"}\n"[..]).is_err());
    }
}
