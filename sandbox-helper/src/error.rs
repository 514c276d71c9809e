//! The helper's setup errors: one variant per step, each holding the source error and, where
//! there is one, the path involved.
//!
//! ```
//! use cordon_sandbox::error::SetupError;
//! use cordon_sandbox::status::{StatusRecord, Step};
//!
//! let err = SetupError::NoNewPrivs(std::io::Error::from_raw_os_error(libc::EINVAL));
//! // What the parent receives on the status fd: the step, the errno and a message.
//! let StatusRecord::SetupError { step, errno, message } = err.to_record() else { unreachable!() };
//! assert_eq!((step, errno), (Step::NoNewPrivs, Some(libc::EINVAL)));
//! assert!(message.starts_with("cannot set no_new_privs"));
//! ```

use std::io;
use std::path::PathBuf;

use crate::policy::PolicyError;
use crate::status::{StatusRecord, Step};

/// A failure before `execve`. The command did not run; the helper exits 125.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Bad helper arguments.
    #[error("{0} (usage: cordon-sandbox (--policy JSON | --policy-file PATH) [--cwd DIR] [--status-fd N] [--hold-fd N] [--pass-fd N]... -- PROGRAM [ARGS...])")]
    Arguments(String),
    /// A `--pass-fd` descriptor that is not a pipe or socket end, nor a fully sealed memfd.
    #[error("--pass-fd {fd} is {kind}: only pipe and socket ends and fully sealed memfds may be passed into the sandbox, because a file or directory descriptor would bypass Landlock")]
    PassFd {
        /// The descriptor.
        fd: i32,
        /// What it is instead.
        kind: &'static str,
        /// The errno when it could not be inspected at all.
        errno: Option<i32>,
    },
    /// The policy file could not be read.
    #[error("cannot read policy file {path:?}: {source}")]
    PolicyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The policy did not parse or validate.
    #[error("invalid policy: {0}")]
    Policy(#[from] PolicyError),
    /// `close_range` failed.
    #[error("cannot close inherited file descriptors: {0}")]
    CloseFds(io::Error),
    /// `PR_SET_PDEATHSIG` failed or the parent was already gone.
    #[error("cannot tie the sandbox to its parent: {0}")]
    ParentDeath(io::Error),
    /// A capability could not be dropped.
    #[error("cannot drop capabilities ({what}): {source}")]
    Capabilities {
        /// Which set.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
    /// `PR_SET_NO_NEW_PRIVS` failed.
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(io::Error),
    /// A Landlock rule's path could not be opened.
    #[error("cannot open {path:?} for a Landlock rule: {source}")]
    LandlockPath {
        /// The path from the policy.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A policy path goes through a symbolic link.
    #[error("{path:?} goes through a symbolic link; policy paths must be canonical (name the link's target)")]
    SymlinkInPolicy {
        /// The path from the policy.
        path: PathBuf,
    },
    /// A Landlock system call failed.
    #[error("Landlock {what} failed: {source}")]
    Landlock {
        /// Which operation.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
    /// The seccomp filter could not be compiled or installed.
    #[error("seccomp {what} failed: {message}")]
    Seccomp {
        /// Which operation.
        what: &'static str,
        /// The error text from seccompiler.
        message: String,
        /// The errno, when the kernel refused.
        errno: Option<i32>,
    },
    /// Something the policy asks for is not available and the policy says `refuse`.
    #[error("refusing to run: {restriction} cannot be enforced ({reason}); set enforcement to \"report\" to run without it")]
    Refused {
        /// The restriction.
        restriction: String,
        /// Why it is unavailable.
        reason: String,
    },
    /// A signal disposition could not be reset.
    #[error("cannot reset signal dispositions: {0}")]
    Signals(io::Error),
    /// The command's process group could not become its terminal's foreground group.
    #[error("cannot make the command the foreground process group of its terminal: {0}")]
    Terminal(io::Error),
    /// The status record could not be written.
    #[error("cannot write the status record: {0}")]
    Status(io::Error),
    /// `chdir` into the working directory failed.
    #[error("cannot change directory to {path:?}: {source}")]
    Chdir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Creating a namespace (or writing its id maps) failed.
    #[error("cannot create the {what}: {source}{hint}")]
    Namespace {
        /// Which namespace or map.
        what: &'static str,
        /// Why.
        source: io::Error,
        /// What to change on this system, when the cause is a known setting (or empty).
        hint: &'static str,
    },
    /// One mount of the view could not be made.
    #[error("cannot {what} {path:?}: {source}")]
    Mount {
        /// The operation (`bind`, `make read-only`, `mount tmpfs on`, ...).
        what: &'static str,
        /// The path in the sandbox's view.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A path of the view goes through a symbolic link, which a command could have planted.
    #[error("{path:?} goes through a symbolic link; refusing to build the view through it (carve-outs and roots must be canonical, and a link inside a writable root could have been planted)")]
    SymlinkInView {
        /// The path from the policy.
        path: PathBuf,
    },
    /// `lo` could not be brought up in the private network namespace.
    #[error("cannot bring up the loopback interface: {0}")]
    Loopback(io::Error),
    /// A listening socket for the proxy or a host port could not be opened in the namespace.
    #[error("cannot listen on {address} in the sandbox's network namespace: {source}")]
    Listener {
        /// The address.
        address: String,
        /// The failure.
        source: io::Error,
    },
    /// Forking the init or the command, or arranging its signals, failed.
    #[error("cannot start the sandbox's init ({what}): {source}")]
    Init {
        /// Which operation.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
}

impl SetupError {
    /// The step this error belongs to.
    pub fn step(&self) -> Step {
        match self {
            SetupError::Arguments(_) | SetupError::PassFd { .. } => Step::Arguments,
            SetupError::PolicyFile { .. } | SetupError::Policy(_) => Step::Policy,
            SetupError::CloseFds(_) => Step::CloseFds,
            SetupError::ParentDeath(_) => Step::ParentDeath,
            SetupError::Capabilities { .. } => Step::Capabilities,
            SetupError::NoNewPrivs(_) => Step::NoNewPrivs,
            SetupError::LandlockPath { .. }
            | SetupError::SymlinkInPolicy { .. }
            | SetupError::Landlock { .. } => Step::Landlock,
            SetupError::Seccomp { .. } => Step::Seccomp,
            SetupError::Refused { .. } => Step::Enforcement,
            SetupError::Status(_) => Step::Status,
            SetupError::Signals(_) => Step::Signals,
            SetupError::Terminal(_) => Step::Terminal,
            SetupError::Chdir { .. } => Step::Chdir,
            SetupError::Namespace { .. } => Step::Namespaces,
            SetupError::Mount { .. } | SetupError::SymlinkInView { .. } => Step::Mounts,
            SetupError::Loopback(_) | SetupError::Listener { .. } => Step::Loopback,
            SetupError::Init { .. } => Step::Init,
        }
    }

    /// The errno of the failing system call, when there was one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            SetupError::PolicyFile { source, .. }
            | SetupError::Capabilities { source, .. }
            | SetupError::LandlockPath { source, .. }
            | SetupError::Landlock { source, .. }
            | SetupError::Chdir { path: _, source }
            | SetupError::Namespace { source, .. }
            | SetupError::Mount { source, .. }
            | SetupError::Init { source, .. } => source.raw_os_error(),
            SetupError::CloseFds(e)
            | SetupError::ParentDeath(e)
            | SetupError::NoNewPrivs(e)
            | SetupError::Signals(e)
            | SetupError::Terminal(e)
            | SetupError::Status(e)
            | SetupError::Loopback(e)
            | SetupError::Listener { source: e, .. } => e.raw_os_error(),
            SetupError::Seccomp { errno, .. } | SetupError::PassFd { errno, .. } => *errno,
            SetupError::SymlinkInPolicy { .. } | SetupError::SymlinkInView { .. } => {
                Some(libc::ELOOP)
            }
            SetupError::Arguments(_) | SetupError::Policy(_) | SetupError::Refused { .. } => None,
        }
    }

    /// The record the parent receives for this error.
    pub fn to_record(&self) -> StatusRecord {
        StatusRecord::SetupError {
            step: self.step(),
            errno: self.errno(),
            message: self.to_string(),
        }
    }
}
