//! The namespace layer: user, mount, pid, ipc and (for `network.mode = "loopback"`) network
//! namespaces, built by the helper before it drops capabilities, so that Landlock and seccomp
//! then apply inside them exactly as without.
//!
//! [`enter`] is the one step [`crate::confine`] calls. It forks twice (see [`init`]) and
//! returns only in the process that goes on to confine itself and exec the command.
//!
//! Hook for `.git` as a `gitdir:` file (worktrees, submodules): the parent resolves the file
//! and adds the directory it names to `filesystem.read_only`; a `read_only` entry may be a
//! file or a directory, and the view protects both alike, so nothing here needs to change.

pub mod init;
pub mod mounts;
pub mod net;
pub mod userns;

use std::io;
use std::path::{Path, PathBuf};

use crate::error::SetupError;
use crate::policy::SandboxPolicy;
use crate::process;
use crate::status::{Downgrade, Layer, TAG_PUBLISH};

pub use mounts::ViewPlan;

/// The command's pid inside the pid namespace: the init is 1, and the command is the first
/// process it forks. The seccomp rules let the command act on itself by this pid.
pub const COMMAND_PID: u32 = 2;

/// Everything the layer needs, computed in `Env::new` before anything changes.
#[derive(Debug, Clone)]
pub struct Plan {
    uid: libc::uid_t,
    gid: libc::gid_t,
    /// A private network namespace with `lo` up.
    pub loopback: bool,
    /// Listening sockets opened in that namespace for the parent (proxy, host ports).
    pub listeners: net::Listeners,
    /// The mount view.
    pub view: ViewPlan,
}

impl Plan {
    /// Whether `/dev/pts` is a private instance (then Landlock may grant all of it).
    pub fn private_terminals(&self) -> bool {
        !self.view.host_terminals
    }
}

impl Plan {
    /// The plan for `policy`, run by the calling user.
    pub fn new(policy: &SandboxPolicy) -> Plan {
        let fs = &policy.filesystem;
        Plan {
            // SAFETY: geteuid and getegid cannot fail.
            uid: unsafe { libc::geteuid() },
            // SAFETY: as above.
            gid: unsafe { libc::getegid() },
            loopback: policy.network.mode.is_private(),
            listeners: net::Listeners::of(policy),
            view: ViewPlan {
                write: fs.write.clone(),
                read_only: fs.read_only.clone(),
                deny_read: fs.deny_read.clone(),
                reallowed: fs
                    .read
                    .iter()
                    .filter(|r| fs.deny_read.iter().any(|d| r.starts_with(d) && *r != d))
                    .filter(|r| !below_dev(r))
                    .cloned()
                    .collect(),
                // A readable root below /dev names host devices: bound into the private /dev
                // like the listed ones (writable roots there are bound as writable roots).
                devices: fs
                    .devices
                    .iter()
                    .chain(fs.read.iter().filter(|p| below_dev(p) && !below_pts(p)))
                    .cloned()
                    .collect(),
                host_terminals: fs.read.iter().chain(&fs.write).any(|p| below_pts(p))
                    || given_a_terminal(),
            },
        }
    }

    /// The namespaces in force once [`enter`] has run, in the order they were made.
    pub fn layers(&self) -> Vec<Layer> {
        let mut layers = vec![
            Layer::UserNamespace,
            Layer::PidNamespace,
            Layer::MountNamespace,
            Layer::IpcNamespace,
        ];
        if self.loopback {
            layers.push(Layer::NetNamespace);
        }
        layers
    }
}

fn below_dev(path: &Path) -> bool {
    path.starts_with("/dev") && path != Path::new("/dev")
}

fn below_pts(path: &Path) -> bool {
    path.starts_with("/dev/pts")
}

/// Whether stdin, stdout or stderr is a terminal, which the command may reopen by its name.
fn given_a_terminal() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    (0..3).any(|fd| unsafe { libc::isatty(fd) } == 1)
}

/// What the command's process learns from [`enter`].
#[derive(Debug, Default)]
pub struct Entered {
    /// Namespace layers in force.
    pub layers: Vec<Layer>,
    /// What the kernel refused at run time (a fresh `/proc`).
    pub downgrades: Vec<Downgrade>,
    /// Placeholders made for `read_only` paths that did not exist.
    pub placeholders: Vec<PathBuf>,
    /// Listening sockets in the private network namespace, by tag, for the parent.
    pub listeners: Vec<(String, Vec<std::os::fd::OwnedFd>)>,
}

/// The step: placeholders, user namespace, pid namespace, the monitor and init processes, then
/// mount, ipc and network namespaces with the view and `lo`. Returns only in the command's
/// process; the monitor and the init never return from here (setup errors in the init do: it
/// reports them like any step, and the monitor passes its exit code on).
pub fn enter(plan: &Plan, parent: libc::pid_t) -> Result<Entered, SetupError> {
    // As the caller, in the host's view: the placeholders must exist where the command's
    // writable root really is, and the monitor removes them again from out here.
    let (read_only, placeholders) = mounts::prepare_read_only(&plan.view)?;
    let forked = (|| {
        userns::enter(plan.uid, plan.gid)?;
        // The credential change may clear the parent-death signal; arm it again and recheck.
        process::die_with_parent(parent)?;
        unshare(libc::CLONE_NEWPID, "pid namespace")?;
        let link = init::Link::new()?;
        let saved_mask = init::block_signals()?;
        let pid = init::fork_group_leader("fork the init")?;
        Ok((link, saved_mask, pid))
    })();
    let (link, saved_mask, monitor_pid) = match forked {
        Ok(forked) => forked,
        Err(e) => {
            // Nothing will run: the placeholders go now, not after a command.
            for placeholder in placeholders.iter().rev() {
                placeholder.remove();
            }
            return Err(e);
        }
    };
    if monitor_pid != 0 {
        let kept: Vec<_> = placeholders.iter().flat_map(|p| p.fds()).collect();
        init::run_monitor(monitor_pid, link.into_monitor_end(), &kept, || {
            for placeholder in placeholders.iter().rev() {
                placeholder.remove();
            }
        });
    }
    let placeholder_paths = placeholders.iter().map(|p| p.path.clone()).collect();
    drop(placeholders);
    let link = link.into_init_end();
    init::die_with_monitor(&link)?;
    init::not_dumpable()?;
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if plan.loopback {
        flags |= libc::CLONE_NEWNET;
    }
    unshare(flags, "mount, ipc and network namespaces")?;
    // The view keeps every path where it was, so the working directory is entered again by
    // name: the directory this process is in may now lie under a mount bound over it (a
    // writable root, a carve-out), and only the name leads to the mount on top. An explicit
    // `--cwd` is entered later anyway.
    let cwd = std::env::current_dir().map_err(|source| SetupError::Init {
        what: "read the working directory",
        source,
    })?;
    let downgrades = mounts::build(&plan.view, &read_only)?;
    std::env::set_current_dir(&cwd).map_err(|source| SetupError::Chdir { path: cwd, source })?;
    if plan.loopback {
        net::loopback_up()?;
    }
    // In the init, before the command exists: a connection the command makes at once waits in
    // the backlog until the parent accepts it. The init closes its copies when it starts
    // waiting; the command's process sends them on and loses them at execve.
    let mut listeners = plan.listeners.open()?;
    // Published ports: the parent connects into this namespace through sockets the init makes
    // here on request (the init outlives nothing: it is already there for the command).
    let factory = match plan.listeners.publish {
        true => {
            let (parent_end, init_end) = net::socket_request_pair()?;
            listeners.push((TAG_PUBLISH.to_owned(), vec![parent_end]));
            Some(init_end)
        }
        false => None,
    };
    let command = init::fork_group_leader("fork the command")?;
    if command != 0 {
        init::run_init(command, link, factory);
    }
    // The command's process never holds the init's end.
    drop(factory);
    drop(link);
    init::restore_signals(&saved_mask)?;
    let mut layers = plan.layers();
    if !downgrades
        .iter()
        .any(|d| d.restriction == mounts::PRIVATE_PROC)
    {
        layers.push(Layer::PrivateProc);
    }
    Ok(Entered {
        layers,
        downgrades,
        placeholders: placeholder_paths,
        listeners,
    })
}

fn unshare(flags: libc::c_int, what: &'static str) -> Result<(), SetupError> {
    // SAFETY: unshare with flags only changes this process's namespace membership.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(SetupError::Namespace {
            what,
            source: io::Error::last_os_error(),
            hint: "",
        });
    }
    Ok(())
}
