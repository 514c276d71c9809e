//! The status records the helper writes on its status fd, one JSON object per line.
//!
//! The fd is close-on-exec, so a successful `execve` closes it: the parent reads records until
//! end of file. At most one `confined` record comes first; then, if `execve` failed, one
//! `exec_error`. A `setup_error` means the command never ran.
//!
//! ```
//! use cordon_sandbox::status::{StatusRecord, read_records};
//!
//! let text = br#"{"kind":"exec_error","program":"nope","errno":2,"message":"No such file or directory"}
//! "#;
//! let records = read_records(&text[..]).unwrap();
//! assert!(matches!(records[0], StatusRecord::ExecError { errno: 2, .. }));
//! ```

use std::io::{self, BufRead, Write};
use std::os::fd::{AsRawFd, BorrowedFd};

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
    /// `execve` failed after confinement (not found, not executable, denied by the sandbox).
    ExecError {
        /// The program as given.
        program: String,
        /// The errno from `execve`.
        errno: i32,
        /// The system's description of the errno.
        message: String,
    },
    /// Descriptors sent with this record's bytes (`SCM_RIGHTS`, see [`send_fds`]), in order,
    /// for the purpose `tag` names. A reader that is not [`read_records_and_fds`] loses them
    /// (the kernel closes descriptors that a plain `read` does not take).
    Fds {
        /// What the descriptors are for ([`TAG_SECCOMP_LISTENER`], ...).
        tag: String,
        /// How many were sent.
        count: usize,
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

/// Sends `fds` over the status socket `channel` with one `fds` record naming `tag`, in one
/// `sendmsg`, so that the descriptors travel with the record's first byte and a reader that
/// takes them in order ([`read_records_and_fds`]) hands each record its own. The caller keeps
/// its copies and closes them when it wishes (the receiver holds its own).
pub fn send_fds(channel: BorrowedFd<'_>, tag: &str, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let line = encode(&StatusRecord::Fds {
        tag: tag.to_owned(),
        count: fds.len(),
    })?;
    let raw: Vec<libc::c_int> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let payload = std::mem::size_of_val(raw.as_slice());
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    // u64 elements keep the control buffer aligned for `cmsghdr`.
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut sent = 0;
    while sent < line.len() {
        let rest = &line[sent..];
        let mut iov = libc::iovec {
            iov_base: rest.as_ptr() as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        // The descriptors go with the first bytes; the rest of a short write goes plain.
        if sent == 0 && !raw.is_empty() {
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            // SAFETY: the control buffer is `space` bytes, room for one header carrying
            // `payload` bytes, so CMSG_FIRSTHDR is non-null and CMSG_DATA points at `payload`
            // writable bytes.
            unsafe {
                let header = libc::CMSG_FIRSTHDR(&msg);
                (*header).cmsg_level = libc::SOL_SOCKET;
                (*header).cmsg_type = libc::SCM_RIGHTS;
                (*header).cmsg_len = libc::CMSG_LEN(payload as u32) as _;
                std::ptr::copy_nonoverlapping(
                    raw.as_ptr().cast::<u8>(),
                    libc::CMSG_DATA(header),
                    payload,
                );
            }
        }
        // SAFETY: `msg` points at `iov` and `control`, both alive and sized as declared.
        let n = unsafe { libc::sendmsg(channel.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        sent += n as usize;
    }
    Ok(())
}

/// A status socket read with `recvmsg`, keeping the descriptors that arrive, in order.
struct FdReader {
    socket: std::os::fd::OwnedFd,
    received: std::collections::VecDeque<std::os::fd::OwnedFd>,
}

/// The most descriptors one `recvmsg` takes; a record sends far fewer.
const MAX_FDS_PER_READ: usize = 16;

impl io::Read for FdReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::fd::FromRawFd;
        let payload = MAX_FDS_PER_READ * std::mem::size_of::<libc::c_int>();
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
        let mut control = vec![0u64; space.div_ceil(8)];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let n = loop {
            // SAFETY: `msg` points at `buf` and `control`, both alive and sized as declared;
            // received descriptors are close-on-exec from the start.
            let n =
                unsafe { libc::recvmsg(self.socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
            if n >= 0 {
                break n as usize;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        };
        // SAFETY: the kernel filled `msg.msg_control` with `msg_controllen` bytes of headers;
        // CMSG_FIRSTHDR/CMSG_NXTHDR walk only within them, and each SCM_RIGHTS payload holds
        // (cmsg_len - CMSG_LEN(0)) / sizeof(int) descriptors that this process now owns.
        unsafe {
            let mut header = libc::CMSG_FIRSTHDR(&msg);
            while !header.is_null() {
                if (*header).cmsg_level == libc::SOL_SOCKET
                    && (*header).cmsg_type == libc::SCM_RIGHTS
                {
                    let bytes = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let data = libc::CMSG_DATA(header).cast::<libc::c_int>();
                    for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                        let fd = std::ptr::read_unaligned(data.add(i));
                        self.received
                            .push_back(std::os::fd::OwnedFd::from_raw_fd(fd));
                    }
                }
                header = libc::CMSG_NXTHDR(&msg, header);
            }
        }
        Ok(n)
    }
}

/// Reads every record from the status socket until end of file, like
/// [`read_records_as_they_come`], and gives each `fds` record the descriptors sent with it.
/// Descriptors the sender attached to no record are closed.
pub fn read_records_and_fds(
    socket: std::os::fd::OwnedFd,
    mut on_record: impl FnMut(&StatusRecord, Vec<std::os::fd::OwnedFd>),
) -> io::Result<Vec<StatusRecord>> {
    let mut reader = io::BufReader::new(FdReader {
        socket,
        received: Default::default(),
    });
    let mut records = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(records);
        }
        let text = line.trim_end_matches('\n');
        if text.is_empty() {
            continue;
        }
        let record: StatusRecord = serde_json::from_str(text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unreadable status record {text:?}: {e}"),
            )
        })?;
        let fds = match &record {
            StatusRecord::Fds { count, .. } => {
                let queue = &mut reader.get_mut().received;
                if queue.len() < *count {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("status record {text:?} arrived without its descriptors"),
                    ));
                }
                queue.drain(..*count).collect()
            }
            _ => Vec::new(),
        };
        on_record(&record, fds);
        records.push(record);
    }
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
        let record = serde_json::from_str(&line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unreadable status record {line:?}: {e}"),
            )
        })?;
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
        use std::io::{Read, Seek};
        use std::os::fd::AsFd;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"sent").unwrap();
        write_record(
            ours.as_fd(),
            &StatusRecord::Observer {
                refusals: vec![[6, 0, 0, 0]],
            },
        )
        .unwrap();
        send_fds(ours.as_fd(), "test", &[file.as_fd()]).unwrap();
        drop(ours);
        let mut got = Vec::new();
        let records =
            read_records_and_fds(theirs.into(), |r, fds| got.push((r.clone(), fds))).unwrap();
        assert_eq!(records.len(), 2);
        assert!(got[0].1.is_empty());
        assert_eq!(
            got[1].0,
            StatusRecord::Fds {
                tag: "test".into(),
                count: 1
            }
        );
        let mut received = std::fs::File::from(got.remove(1).1.remove(0));
        received.rewind().unwrap();
        let mut text = String::new();
        received.read_to_string(&mut text).unwrap();
        assert_eq!(text, "sent");
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(read_records(&b"{\"kind\":\"nope\"}\n"[..]).is_err());
    }
}
