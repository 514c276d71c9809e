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
}

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
    fn garbage_is_an_error() {
        assert!(read_records(&b"{\"kind\":\"nope\"}\n"[..]).is_err());
    }
}
