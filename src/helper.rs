//! Finding and launching the confining helper, and reading its status records.
//!
//! The helper is the `cordon-sandbox` binary, or the `cordon` binary itself when it is called
//! with the hidden first argument [`SELF_HELPER_ARG`]. [`Helper::command`] builds a
//! `std::process::Command` with a status pipe attached; the caller adds stdio, process-group
//! settings and spawns it (a `tokio::process::Command` can be made from it).
//!
//! ```no_run
//! use cordon::helper::Helper;
//! # fn demo(policy: &cordon_sandbox::SandboxPolicy) -> Result<(), Box<dyn std::error::Error>> {
//! let helper = Helper::locate()?;
//! let mut launch = helper.command(policy, std::path::Path::new("/tmp"), &["true".into()])?;
//! let mut child = launch.command.spawn()?;
//! let records = launch.status.read_after_spawn()?; // returns at execve or helper exit
//! let status = child.wait()?;
//! # Ok(()) }
//! ```

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use cordon_sandbox::status::{read_records, StatusRecord};
use cordon_sandbox::SandboxPolicy;

use crate::exec::supervisor_guard::guard_supervisor;

/// Hidden first argument that makes the `cordon` binary act as the helper.
pub const SELF_HELPER_ARG: &str = "__sandbox";
/// Environment variable naming the helper binary explicitly.
pub const HELPER_ENV: &str = "CORDON_HELPER";
/// `CORDON_HELPER=self`: the running `cordon` binary is its own helper (`cordon __sandbox`),
/// whatever sits next to it. Tests use it so that a stale standalone helper left in the build
/// directory cannot stand in for the code under test.
pub const HELPER_SELF: &str = "self";
/// File name of the standalone helper.
pub const HELPER_NAME: &str = "cordon-sandbox";

/// Errors finding or preparing the helper.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    /// No helper binary could be found.
    #[error("cannot find the {HELPER_NAME} helper: set {HELPER_ENV} to its path, or install it next to this program")]
    NotFound,
    /// The explicitly named helper does not exist.
    #[error("{HELPER_ENV}={0:?} does not name an executable file")]
    Missing(PathBuf),
    /// The status pipe could not be created, or a passed descriptor could not be duplicated.
    #[error("cannot create the status pipe: {0}")]
    Pipe(io::Error),
    /// Two passed descriptors share a target number, or a target is 0, 1 or 2.
    #[error("cannot pass descriptor {0} to the command: targets must be distinct and above 2")]
    PassTarget(RawFd),
    /// This process could not be made non-dumpable, or its core limit could not be lowered.
    #[error(
        "cannot keep this process's memory from the command (not dumpable, no core dump): {0}"
    )]
    GuardSupervisor(io::Error),
}

/// A descriptor the command inherits on purpose, at number `target` (for example the write
/// end of a pipe the command reports on). Under the sandbox the helper accepts it only if it
/// is a pipe or socket end (`--pass-fd`); anything else is a setup error.
///
/// The parent keeps its own copy open for as long as any clone of the value lives, so drop
/// every clone after the run to see end of file on the other end.
#[derive(Debug, Clone)]
pub struct PassFd {
    /// The descriptor in this process.
    pub fd: Arc<OwnedFd>,
    /// Its number in the command (above 2).
    pub target: RawFd,
}

/// How to start the helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helper {
    program: PathBuf,
    leading_args: Vec<OsString>,
}

/// A prepared helper launch: the command to spawn, and the read end of its status pipe.
#[derive(Debug)]
pub struct Launch {
    /// The helper command, with the policy, cwd and argv in place.
    pub command: Command,
    /// Reads the helper's status records.
    pub status: StatusPipe,
}

/// The parent's end of the status pipe, plus the write end (and the copies of passed
/// descriptors) until the child is spawned.
#[derive(Debug)]
pub struct StatusPipe {
    read: File,
    write: Option<OwnedFd>,
    passed: Vec<OwnedFd>,
    /// With [`Helper::command_held`], the write end of the hold pipe: the helper waits for its
    /// closing before `execve` when its receipt lists downgrades.
    hold: Option<OwnedFd>,
}

impl StatusPipe {
    /// Closes the parent's copy of the write end and of the passed descriptors. Call right
    /// after spawning, or end of file never arrives.
    pub fn close_write_end(&mut self) {
        self.write = None;
        self.passed.clear();
    }

    /// Closes the write end and reads records until the helper execs the command (the pipe is
    /// close-on-exec) or exits.
    pub fn read_after_spawn(mut self) -> io::Result<Vec<StatusRecord>> {
        self.close_write_end();
        read_records(self.read)
    }

    /// The read end, for asynchronous readers. Closes the write end (and releases a held
    /// helper: see [`StatusPipe::into_read_end_and_hold`] to keep it waiting).
    pub fn into_read_end(mut self) -> File {
        self.close_write_end();
        self.read
    }

    /// The read end, and the hold pipe's write end when the launch was held: drop that once
    /// the receipt's downgrades have been shown, and the helper goes on to `execve`.
    pub fn into_read_end_and_hold(mut self) -> (File, Option<OwnedFd>) {
        self.close_write_end();
        let hold = self.hold.take();
        (self.read, hold)
    }
}

impl Helper {
    /// A helper at an explicit path, run as `PATH --policy ...`.
    pub fn at(program: impl Into<PathBuf>) -> Helper {
        Helper {
            program: program.into(),
            leading_args: Vec::new(),
        }
    }

    /// The `cordon` binary at `program`, acting as the helper through [`SELF_HELPER_ARG`].
    pub fn cordon_binary(program: impl Into<PathBuf>) -> Helper {
        Helper {
            program: program.into(),
            leading_args: vec![SELF_HELPER_ARG.into()],
        }
    }

    /// Finds the helper: `$CORDON_HELPER` (a path, or `self`), then `cordon-sandbox` next to
    /// the running program, then the running program itself when it is the `cordon` binary.
    pub fn locate() -> Result<Helper, HelperError> {
        let exe = std::env::current_exe().map_err(|_| HelperError::NotFound);
        if let Some(path) = std::env::var_os(HELPER_ENV) {
            if path == HELPER_SELF {
                return Ok(Helper::cordon_binary(exe?));
            }
            let path = PathBuf::from(path);
            return if is_executable(&path) {
                Ok(Helper::at(path))
            } else {
                Err(HelperError::Missing(path))
            };
        }
        let exe = exe?;
        if let Some(sibling) = exe.parent().map(|d| d.join(HELPER_NAME)) {
            if is_executable(&sibling) {
                return Ok(Helper::at(sibling));
            }
        }
        let is_cordon = exe
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "cordon" || n.starts_with("cordon-") && n != HELPER_NAME);
        if is_cordon {
            return Ok(Helper::cordon_binary(exe));
        }
        Err(HelperError::NotFound)
    }

    /// The program that will be spawned.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Builds the launch of `argv` under `policy` in `cwd`. The status pipe's write end is
    /// inherited by the helper only: it is close-on-exec in this process and made inheritable
    /// in the child between fork and exec. This process becomes not dumpable, with a core soft
    /// limit of 0, for the rest of its life; the helper gets the caller's core limit back (see
    /// [`crate::exec`]).
    pub fn command(
        &self,
        policy: &SandboxPolicy,
        cwd: &Path,
        argv: &[OsString],
    ) -> Result<Launch, HelperError> {
        self.command_with_fds(policy, cwd, argv, &[])
    }

    /// [`Helper::command`], and `pass` reaches the command at the target numbers (the helper
    /// gets `--pass-fd N` for each and refuses anything but pipe and socket ends and fully sealed
    /// memfds).
    pub fn command_with_fds(
        &self,
        policy: &SandboxPolicy,
        cwd: &Path,
        argv: &[OsString],
        pass: &[PassFd],
    ) -> Result<Launch, HelperError> {
        self.command_with_options(policy, cwd, argv, pass, LaunchOptions::default())
    }

    /// [`Helper::command_with_fds`], and the helper gets `--hold-fd`: when its receipt lists
    /// downgrades it writes it and then waits, before `execve`, until the write end kept in
    /// [`StatusPipe`] is closed (see [`StatusPipe::into_read_end_and_hold`]). A caller that
    /// shows downgrades in between is sure they come before the command's first output.
    pub fn command_held(
        &self,
        policy: &SandboxPolicy,
        cwd: &Path,
        argv: &[OsString],
        pass: &[PassFd],
    ) -> Result<Launch, HelperError> {
        let options = LaunchOptions {
            held: true,
            ..LaunchOptions::default()
        };
        self.command_with_options(policy, cwd, argv, pass, options)
    }

    /// [`Helper::command_with_fds`] with every launch option spelled out (see
    /// [`LaunchOptions`]).
    pub fn command_with_options(
        &self,
        policy: &SandboxPolicy,
        cwd: &Path,
        argv: &[OsString],
        pass: &[PassFd],
        options: LaunchOptions,
    ) -> Result<Launch, HelperError> {
        let held = options.held;
        let floor = fd_floor(pass)?;
        let core_limit = guard_supervisor().map_err(HelperError::GuardSupervisor)?;
        // A socket, not a pipe: the helper can send descriptors with its records (the seccomp
        // observer's listener); it reads and writes like a pipe otherwise.
        let (read, write) = status_socket_pair().map_err(HelperError::Pipe)?;
        // Above every target, so that installing the passed descriptors cannot overwrite it.
        let write = dup_at_least(&write, floor).map_err(HelperError::Pipe)?;
        let write_fd = write.as_raw_fd();
        let mut command = Command::new(&self.program);
        command
            .args(&self.leading_args)
            .arg("--policy")
            .arg(policy.to_json())
            .arg("--cwd")
            .arg(cwd)
            .arg("--status-fd")
            .arg(write_fd.to_string());
        for p in pass {
            command.arg("--pass-fd").arg(p.target.to_string());
        }
        if let Some(scope) = options.observe {
            command.arg(scope.arg());
        }
        let hold = if held {
            let (hold_read, hold_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| HelperError::Pipe(io::Error::from(e)))?;
            let hold_read = dup_at_least(&hold_read, floor).map_err(HelperError::Pipe)?;
            let hold_fd = hold_read.as_raw_fd();
            command.arg("--hold-fd").arg(hold_fd.to_string());
            // SAFETY: as for the status fd below: fcntl only, on a descriptor open in the child.
            unsafe {
                command.pre_exec(move || {
                    if libc::fcntl(hold_fd, libc::F_SETFD, 0) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            // The read end must stay open in this process until the spawn: it goes with the
            // passed copies, which are dropped right after it.
            Some((hold_read, hold_write))
        } else {
            None
        };
        command.arg("--").args(argv);
        // SAFETY: the closure only calls fcntl, which is async-signal-safe, on a descriptor
        // that is open in the child (it was open in the parent at fork).
        unsafe {
            command.pre_exec(move || {
                if libc::fcntl(write_fd, libc::F_SETFD, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // SAFETY: the closure calls only getrlimit and setrlimit, which are async-signal-safe,
        // and allocates nothing.
        unsafe {
            command.pre_exec(move || core_limit.restore_in_child());
        }
        let mut passed =
            install_passed_fds(&mut command, pass, floor).map_err(HelperError::Pipe)?;
        let hold = hold.map(|(hold_read, hold_write)| {
            passed.push(hold_read);
            hold_write
        });
        Ok(Launch {
            command,
            status: StatusPipe {
                read: File::from(read),
                write: Some(write),
                passed,
                hold,
            },
        })
    }
}

/// How a helper is launched beyond the policy, cwd, argv and passed descriptors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchOptions {
    /// As [`Helper::command_held`]: the helper waits before `execve` until the hold pipe's
    /// write end (in [`StatusPipe`]) is closed, when its receipt lists downgrades.
    pub held: bool,
    /// Observer mode (`--observe`, or `--observe=light` for the calls made rarely: the
    /// refusals, the network calls, directory creation): the helper sends a seccomp listener over the status socket, and every watched or
    /// refused call waits for an answer on it. Only a reader that runs the observer may ask
    /// for it ([`crate::exec`] does); anyone else would leave the command's first watched call
    /// waiting forever.
    pub observe: Option<cordon_sandbox::observe::ObserveScope>,
}

/// A connected pair of close-on-exec unix stream sockets: (parent's end, helper's end).
fn status_socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: socketpair writes two new descriptors into `fds`, a valid array of two ints.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created by socketpair and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The lowest descriptor number above every target; checks the targets.
pub(crate) fn fd_floor(pass: &[PassFd]) -> Result<RawFd, HelperError> {
    let mut seen = Vec::with_capacity(pass.len());
    for p in pass {
        if p.target <= 2 || seen.contains(&p.target) {
            return Err(HelperError::PassTarget(p.target));
        }
        seen.push(p.target);
    }
    Ok(seen.iter().max().map_or(3, |m| m + 1))
}

/// Makes `pass` appear in the child at their target numbers. Each source is first copied (in
/// this process, close-on-exec) to a number at or above `floor`, i.e. above every target, so
/// that one `dup2` in the child can never overwrite the source of the next, and `dup2` never
/// maps a number onto itself (which would leave close-on-exec set). The copies are returned;
/// keep them until the child is spawned, then drop them.
pub(crate) fn install_passed_fds(
    command: &mut Command,
    pass: &[PassFd],
    floor: RawFd,
) -> io::Result<Vec<OwnedFd>> {
    if pass.is_empty() {
        return Ok(Vec::new());
    }
    let copies = pass
        .iter()
        .map(|p| dup_at_least(&p.fd, floor))
        .collect::<io::Result<Vec<OwnedFd>>>()?;
    let moves: Vec<(RawFd, RawFd)> = copies
        .iter()
        .zip(pass)
        .map(|(c, p)| (c.as_raw_fd(), p.target))
        .collect();
    // SAFETY: dup2 is async-signal-safe; every source is open in the child (inherited from
    // the parent, where `copies` keeps it open across the spawn) and no target equals a
    // source. The closure allocates nothing.
    unsafe {
        command.pre_exec(move || {
            for &(src, target) in &moves {
                if libc::dup2(src, target) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok(copies)
}

/// A close-on-exec copy of `fd` numbered `floor` or higher.
fn dup_at_least(fd: &OwnedFd, floor: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl duplicates a descriptor we hold open; nothing else owns the result.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `copy` is a new descriptor returned by fcntl above, owned by nobody yet.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
