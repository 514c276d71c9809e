//! The helper's one ordered procedure: validate everything ([`Env::new`]), then confine and
//! exec ([`Env::run`]). Nothing is changed in the process until validation has passed.
//!
//! ```
//! use cordon_sandbox::confine::Args;
//!
//! // Parsing is pure: a bad command line is refused before anything else happens.
//! let args = Args::parse(["--policy", "{}", "--status-fd", "3", "--", "true"].map(Into::into));
//! assert_eq!(args.unwrap().status_fd, Some(3));
//! let missing = Args::parse(["--policy", "{}", "--"].map(Into::into)).unwrap_err();
//! assert!(missing.to_string().contains("no command given"));
//! ```

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use seccompiler::BpfProgram;

use crate::error::SetupError;
use crate::namespaces::{self, userns};
use crate::policy::{CarveOut, Enforcement, NetworkMode, SandboxPolicy};
use crate::status::{
    self, write_record, Approximation, ConfinementReceipt, Downgrade, Layer, StatusRecord,
};
use crate::{landlock_rules, process, syscall_rules};

/// Exit code when the sandbox could not be built (or the arguments were bad).
pub const EXIT_SETUP: i32 = 125;
/// Exit code when the program exists but could not be executed.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit code when the program was not found.
pub const EXIT_NOT_FOUND: i32 = 127;

/// What no layer of this helper stops without the namespace layer, listed in every receipt of
/// a run without it: with it, everything outside the writable roots is read-only at the mount
/// level, which refuses the first four, `/proc` is the pid namespace's own, and the init kills
/// every descendant.
pub const UNMEDIATED: [&str; 6] = [
    "chmod/fchmod on files the user owns outside writable roots, except the setuid and setgid bits, which seccomp refuses (Landlock does not mediate chmod)",
    "chown/fchown (Landlock does not mediate it; capabilities are dropped, so only no-op changes succeed)",
    "utime/utimensat on files the user owns outside writable roots (Landlock does not mediate it)",
    "setxattr/removexattr on files the user owns outside writable roots (Landlock does not mediate it)",
    "/proc lists every process of the machine with its command line (a private /proc needs the pid namespace)",
    "a process that calls setsid and leaves the process group survives the run (only a pid namespace ends every descendant)",
];

/// Listed in the receipt when `tcp_bind` is set: the kernel's autobind on `listen` skips the
/// bind hook that Landlock's port rule sits on, and seccomp cannot see whether a socket is bound.
pub const UNMEDIATED_LISTEN_AUTOBIND: &str =
    "listen on a TCP socket that was never bound takes an ephemeral port that tcp_bind does not cover (Landlock checks bind only)";

/// What no layer mediates under `policy`, for the receipt.
fn unmediated(policy: &SandboxPolicy) -> Vec<String> {
    let mut out: Vec<String> = UNMEDIATED.iter().map(|s| (*s).to_owned()).collect();
    if policy.network.tcp_bind.is_some() {
        out.push(UNMEDIATED_LISTEN_AUTOBIND.to_owned());
    }
    out
}

/// A pattern on names (`**/.env`) was expanded into the paths that matched when the profile
/// was resolved; the layers cover those paths, never a name, so the receipt says what a
/// matching path created later gets.
fn pattern_approximations(policy: &SandboxPolicy) -> impl Iterator<Item = Approximation> + '_ {
    policy
        .filesystem
        .patterns
        .iter()
        .filter(|p| !p.covers_new_paths)
        .map(|p| {
            let verb = match p.field {
                CarveOut::ReadOnly => "kept read-only",
                CarveOut::DenyRead => "hidden",
            };
            let kind = p.field.name();
            let roots: Vec<String> = p.roots.iter().map(|r| r.display().to_string()).collect();
            Approximation {
                rule: format!("{kind}:{}", p.pattern),
                effect: format!(
                    "the {} paths it matched beneath {} when the profile was resolved are {verb}; \
                     a matching path created later is not (mounts and Landlock cover paths, not names)",
                    p.matched.len(),
                    roots.join(", ")
                ),
            }
        })
}

/// Parsed helper arguments.
#[derive(Debug)]
pub struct Args {
    /// Where to write status records.
    pub status_fd: Option<RawFd>,
    /// The read end of a pipe whose other end the parent closes once it has shown the
    /// receipt's downgrades (`--hold-fd`): see [`hold_until_shown`].
    pub hold_fd: Option<RawFd>,
    /// Descriptors the command inherits on purpose (`--pass-fd`); checked to be pipe or socket
    /// ends by [`Env::new`].
    pub pass_fds: Vec<RawFd>,
    /// Observer mode (`--observe`): the seccomp filter reports to a listener handed to the
    /// parent over the status socket ([`crate::observe`]).
    pub observe: Option<crate::observe::ObserveScope>,
    policy: PolicySource,
    cwd: Option<PathBuf>,
    argv: Vec<OsString>,
}

#[derive(Debug)]
enum PolicySource {
    Inline(OsString),
    File(PathBuf),
}

impl Args {
    /// Parses `(--policy JSON | --policy-file PATH) [--cwd DIR] [--status-fd N] [--hold-fd N]
    /// [--pass-fd N]... [--observe[=network]] -- PROGRAM [ARGS...]` (`args` without the program name).
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Args, SetupError> {
        let mut args = args.into_iter();
        let mut status_fd = None;
        let mut hold_fd = None;
        let mut pass_fds: Vec<RawFd> = Vec::new();
        let mut observe = None;
        let mut policy = None;
        let mut cwd = None;
        let mut argv = Vec::new();
        let bad = |m: String| SetupError::Arguments(m);
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .ok_or_else(|| bad(format!("{name} needs a value")))
            };
            match arg.to_str() {
                Some("--policy") => set_once(
                    &mut policy,
                    PolicySource::Inline(value("--policy")?),
                    "--policy",
                )?,
                Some("--policy-file") => set_once(
                    &mut policy,
                    PolicySource::File(value("--policy-file")?.into()),
                    "--policy-file",
                )?,
                Some("--cwd") => set_once(&mut cwd, PathBuf::from(value("--cwd")?), "--cwd")?,
                Some("--status-fd") => {
                    let fd = fd_number("--status-fd", &value("--status-fd")?)?;
                    set_once(&mut status_fd, fd, "--status-fd")?;
                }
                Some("--hold-fd") => {
                    let fd = fd_number("--hold-fd", &value("--hold-fd")?)?;
                    set_once(&mut hold_fd, fd, "--hold-fd")?;
                }
                Some("--pass-fd") => {
                    let fd = fd_number("--pass-fd", &value("--pass-fd")?)?;
                    if pass_fds.contains(&fd) {
                        return Err(bad(format!("--pass-fd {fd} given twice")));
                    }
                    pass_fds.push(fd);
                }
                Some("--observe") => observe = Some(crate::observe::ObserveScope::Full),
                Some("--observe=light") => observe = Some(crate::observe::ObserveScope::Light),
                Some("--") => {
                    argv.extend(args.by_ref());
                    break;
                }
                _ => return Err(bad(format!("unexpected argument {arg:?}"))),
            }
        }
        let policy = policy.ok_or_else(|| bad("--policy or --policy-file is required".into()))?;
        if argv.is_empty() {
            return Err(bad("no command given after --".into()));
        }
        if let Some(fd) = status_fd.filter(|fd| pass_fds.contains(fd)) {
            // The status fd is close-on-exec so that exec signals success; it cannot also be
            // inherited by the command.
            return Err(bad(format!("--pass-fd {fd} is also the --status-fd")));
        }
        if let Some(fd) = hold_fd.filter(|fd| pass_fds.contains(fd) || status_fd == Some(*fd)) {
            // Like the status fd, it is close-on-exec: the command never holds it.
            return Err(bad(format!(
                "--hold-fd {fd} is also the --status-fd or a --pass-fd"
            )));
        }
        if hold_fd.is_some() && status_fd.is_none() {
            return Err(bad("--hold-fd needs a --status-fd to report on".into()));
        }
        if observe.is_some() && status_fd.is_none() {
            return Err(bad(
                "--observe needs a --status-fd (a unix socket) to hand the listener over".into(),
            ));
        }
        Ok(Args {
            status_fd,
            hold_fd,
            pass_fds,
            observe,
            policy,
            cwd,
            argv,
        })
    }
}

/// A descriptor number above stderr, from a `--status-fd`/`--pass-fd` value.
fn fd_number(flag: &str, value: &OsString) -> Result<RawFd, SetupError> {
    value
        .to_str()
        .and_then(|s| s.parse::<RawFd>().ok())
        .filter(|&fd| fd > 2)
        .ok_or_else(|| {
            SetupError::Arguments(format!(
                "{flag} {value:?} is not a descriptor number above 2"
            ))
        })
}

fn set_once<T>(slot: &mut Option<T>, value: T, name: &str) -> Result<(), SetupError> {
    if slot.is_some() {
        return Err(SetupError::Arguments(format!(
            "{name} given twice (or with its alternative)"
        )));
    }
    *slot = Some(value);
    Ok(())
}

/// Everything validated and precomputed; [`Env::run`] only applies it.
pub struct Env {
    /// The policy as it will be enforced: as given, or with `loopback` turned into `denied`
    /// where the namespace layer is missing and the policy accepts that (reported).
    policy: SandboxPolicy,
    /// What Landlock grants: the policy plus, with the namespace layer, the private
    /// `/dev/shm` and `/dev/pts` (nothing of the host's).
    landlock_policy: SandboxPolicy,
    /// The namespace layer, when user namespaces are available.
    namespaces: Option<namespaces::Plan>,
    /// Whether the command gets a private IPC namespace (SysV IPC, POSIX message queues).
    /// The seccomp rules may rely on it: without one, those calls reach the host's objects.
    pub ipc_namespace: bool,
    status: Option<RawFd>,
    hold: Option<RawFd>,
    /// The status fd, the hold fd and the `--pass-fd` descriptors: all that survives `close_inherited_fds`.
    keep_fds: Vec<RawFd>,
    cwd: Option<PathBuf>,
    argv: Vec<CString>,
    parent: libc::pid_t,
    landlock_abi: u32,
    fs_plan: landlock_rules::FsPlan,
    downgrades: Vec<Downgrade>,
    seccomp: Seccomp,
}

/// The seccomp filter to install: refusals only, or observer mode's.
enum Seccomp {
    Plain(BpfProgram),
    Observed(crate::observe::ObservedFilter),
}

/// How [`Env::run`] ends when it does not exec.
#[derive(Debug)]
pub enum RunError {
    /// Confinement failed; the command did not run.
    Setup(SetupError),
    /// Confinement succeeded but `execve` failed with this errno.
    Exec {
        /// The errno.
        errno: i32,
    },
}

impl Env {
    /// Validates arguments and policy and computes every rule, without changing the process.
    /// `parent` is `getppid()` read as early as possible, to detect a parent that died.
    pub fn new(args: Args, parent: libc::pid_t) -> Result<Env, SetupError> {
        let status = args.status_fd;
        for &fd in &args.pass_fds {
            check_pass_fd(fd)?;
        }
        let hold = args.hold_fd.map(prepare_hold_fd).transpose()?;
        let keep_fds: Vec<RawFd> = status
            .into_iter()
            .chain(hold)
            .chain(args.pass_fds)
            .collect();
        let policy_text = match args.policy {
            PolicySource::Inline(text) => text.into_vec(),
            PolicySource::File(path) => {
                std::fs::read(&path).map_err(|source| SetupError::PolicyFile { path, source })?
            }
        };
        let policy_text = String::from_utf8(policy_text)
            .map_err(|_| SetupError::Arguments("the policy is not UTF-8".into()))?;
        let mut policy = SandboxPolicy::from_json(&policy_text)?;
        policy.validate()?;

        let argv = args
            .argv
            .into_iter()
            .map(|a| CString::new(a.into_vec()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| SetupError::Arguments("an argument contains a NUL byte".into()))?;

        let knob = std::env::var(landlock_rules::ABI_CAP_ENV).ok();
        let landlock_abi =
            landlock_rules::effective_abi(landlock_rules::kernel_abi(), knob.as_deref());
        let mut layer_downgrades = landlock_rules::downgrades(&policy, landlock_abi);
        // Probed once, here: everything below is decided from it, never silently at run time.
        let userns = userns::probe();
        // Without the mount layer, a deny_read path outside every writable root may still be
        // kept unreadable by Landlock (its siblings along the path are granted instead of its
        // parent; the plan decides which); one inside a writable root cannot (new entries
        // there would be ungranted).
        let hide_by_landlock: Vec<PathBuf> = match (&userns, landlock_abi) {
            (Err(_), abi) if abi > 0 => policy
                .filesystem
                .deny_read
                .iter()
                .filter(|d| !policy.filesystem.write.iter().any(|w| d.starts_with(w)))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        if let Err(missing) = &userns {
            if policy.network.mode.is_private() {
                // Denied is the only mode left that confines as much: no host port, no proxy,
                // nothing reached that a private namespace would have kept out.
                layer_downgrades.push(Downgrade {
                    restriction: format!("network_{}", policy.network.mode.name()),
                    reason: format!(
                        "a private {} network needs a network namespace: {}; under enforcement = \"report\" the network is denied instead",
                        policy.network.mode.name(),
                        missing.reason
                    ),
                });
                policy.network.mode = NetworkMode::Denied;
                policy.network.allow.clear();
                policy.network.deny.clear();
                policy.network.host_ports.clear();
                policy.network.publish.clear();
            }
        }
        if !namespaces::net::Listeners::of(&policy).is_empty() && !status.is_some_and(is_socket) {
            // The proxy, host ports and published ports are served by the parent through
            // sockets handed over on the status socket; without one, connections would wait
            // forever.
            return Err(SetupError::Arguments(format!(
                "network.mode = \"{}\" with a proxy, host ports or published ports needs --status-fd to be a unix socket to the parent that serves them",
                policy.network.mode.name()
            )));
        }
        refuse_if_required(policy.enforcement.missing_layer, &layer_downgrades)?;
        let namespaces = userns.is_ok().then(|| namespaces::Plan::new(&policy));
        let ipc_namespace = namespaces.is_some();
        let mut landlock_policy = policy.clone();
        if let Some(plan) = &namespaces {
            let private = &mut landlock_policy.filesystem.write;
            private.push("/dev/shm".into());
            if plan.private_terminals() {
                private.push("/dev/pts".into());
            }
        }

        // Reads only the few directories above an excluded path; nothing is changed yet. The
        // view keeps every path where it was, so a plan made here holds inside it too; its own
        // /dev needs no excluding unless the host's terminals are bound into it.
        let dev = match &namespaces {
            Some(plan) if plan.private_terminals() => landlock_rules::DevView::Private,
            _ => landlock_rules::DevView::Host,
        };
        let fs_plan = if landlock_abi > 0 {
            landlock_rules::plan(&landlock_policy, dev, &hide_by_landlock)?
        } else {
            landlock_rules::FsPlan::default()
        };
        // After the plan, which says which hidden paths Landlock keeps unreadable after all.
        let carve_out_downgrades = match &userns {
            Ok(()) => Vec::new(),
            Err(missing) => carve_out_downgrades(&policy, &missing.reason, &fs_plan.hidden),
        };
        // A carve-out the person wrote is refused whatever `carve_outs` says (that setting is
        // the preset's, about its own defaults); the rest follow it.
        let (written, defaults): (Vec<_>, Vec<_>) = carve_out_downgrades
            .into_iter()
            .partition(|(_, written)| *written);
        let written: Vec<Downgrade> = written.into_iter().map(|(d, _)| d).collect();
        let defaults: Vec<Downgrade> = defaults.into_iter().map(|(d, _)| d).collect();
        refuse_if_required(Enforcement::Refuse, &written)?;
        refuse_if_required(policy.enforcement.carve_outs, &defaults)?;
        // Only reached with `written` empty: whatever is reported is a preset's default.
        let carve_out_downgrades = defaults;
        // Read here, not after confinement: the command keeps this pid across execve, and the
        // process rules may let it act on itself by pid only if they know the pid. Under the
        // namespace layer the command is the init's first child, and its IPC is its own.
        let scope = match &namespaces {
            Some(_) => syscall_rules::ProcessScope::IN_NAMESPACES,
            None => syscall_rules::ProcessScope::of_this_process(),
        };
        let refusals = syscall_rules::rules_for(&policy, &scope);
        let seccomp = match args.observe {
            Some(scope) => Seccomp::Observed(crate::observe::compile(&refusals, &policy, scope)?),
            None => Seccomp::Plain(syscall_rules::compile(&refusals)?),
        };
        Ok(Env {
            fs_plan,
            policy,
            landlock_policy,
            namespaces,
            ipc_namespace,
            status,
            hold,
            keep_fds,
            cwd: args.cwd,
            argv,
            parent,
            landlock_abi,
            downgrades: layer_downgrades
                .into_iter()
                .chain(carve_out_downgrades)
                .collect(),
            seccomp,
        })
    }

    /// The status fd, for reporting an error from [`Env::run`].
    pub fn status_fd(&self) -> Option<BorrowedFd<'_>> {
        // SAFETY: the status fd was checked open by `prepare_status_fd` and nothing closes it
        // before exec (`close_inherited_fds` keeps it).
        self.status.map(|fd| unsafe { BorrowedFd::borrow_raw(fd) })
    }

    /// Confines the process and execs the command. Returns only on failure.
    pub fn run(&self) -> RunError {
        match self.confine() {
            Ok(()) => RunError::Exec { errno: self.exec() },
            Err(e) => RunError::Setup(e),
        }
    }

    /// The audited sequence. Each step assumes the ones above it.
    fn confine(&self) -> Result<(), SetupError> {
        // First: nothing the parent leaked may outlive this point, and every later step may
        // fail, so the status fd must be the only descriptor left to report on. `--pass-fd`
        // descriptors stay too; `Env::new` checked they are pipe or socket ends, which carry
        // data but grant no access to any path Landlock guards.
        process::close_inherited_fds(&self.keep_fds)?;
        // Early: a command whose supervisor already died could never be timed out or killed.
        process::die_with_parent(self.parent)?;
        // After the fds are closed (the monitor and init it forks must hold nothing of the
        // parent's) and with the parent-death signal armed (where the chain of deaths starts);
        // before capabilities are dropped, because building the view needs those the new user
        // namespace grants. Returns only in the process that goes on to exec the command.
        let mut entered = match &self.namespaces {
            Some(plan) => namespaces::enter(plan, self.parent)?,
            None => namespaces::Entered::default(),
        };
        // Right after the namespace step made them, before anything of the command runs: the
        // parent serves the proxy, host ports and published ports through these.
        self.hand_over(std::mem::take(&mut entered.listeners))?;
        // In the process that execs, after the namespace layer gave it a group of its own and
        // before seccomp (which has no reason to allow TIOCSPGRP to setup).
        process::foreground_on_terminal()?;
        // Before no_new_privs and Landlock: dropping the bounding set needs CAP_SETPCAP.
        process::drop_capabilities()?;
        // Before Landlock and seccomp, which require it without CAP_SYS_ADMIN; also stops
        // setuid binaries from regaining what was dropped.
        process::set_no_new_privs()?;
        // Landlock before seccomp: building the ruleset uses landlock_* system calls and opens
        // paths, which the seccomp filter need not then allow for.
        let mut layers = std::mem::take(&mut entered.layers);
        layers.extend([Layer::Capabilities, Layer::NoNewPrivs]);
        layers.extend(landlock_rules::apply(
            &self.landlock_policy,
            self.landlock_abi,
            &self.fs_plan,
        )?);
        // Seccomp last among the restrictions, so that its filters need not allow what setup does.
        self.install_seccomp()?;
        layers.push(Layer::Seccomp);
        // Markers, and what the placeholders ask of tools: nothing above reads the environment.
        for (name, value) in self.policy.effective_markers() {
            std::env::set_var(name, value);
        }
        process::tools_beside_placeholders(&entered.placeholders);
        // Rust's runtime (the `cordon __sandbox` entry) ignores SIGPIPE, and an ignored signal
        // survives execve: without this, `yes | head -1` would fail with EPIPE instead of ending.
        process::default_signals()?;
        if let Some(dir) = &self.cwd {
            std::env::set_current_dir(dir).map_err(|source| SetupError::Chdir {
                path: dir.clone(),
                source,
            })?;
        }
        // Report last, so that `confined` means only execve remains; after execve the
        // close-on-exec status fd is gone.
        let receipt = self.receipt(layers, entered);
        self.report(&StatusRecord::Confined(receipt.clone()))?;
        // After the report and before execve: the parent shows what is not enforced before
        // the command can write a byte of its own.
        hold_until_shown(self.hold, &receipt).map_err(SetupError::Status)
    }

    /// Sends the managed network's sockets to the parent on the status socket, then closes
    /// this process's copies (close-on-exec would too): the command never holds them.
    fn hand_over(
        &self,
        listeners: Vec<(String, Vec<std::os::fd::OwnedFd>)>,
    ) -> Result<(), SetupError> {
        for (tag, fds) in listeners {
            let status = self
                .status_fd()
                .ok_or_else(|| SetupError::Arguments("listeners need --status-fd".into()))?;
            let borrowed: Vec<_> = fds.iter().map(std::os::fd::AsFd::as_fd).collect();
            status::send_fds(status, &tag, &borrowed).map_err(SetupError::Status)?;
        }
        Ok(())
    }

    /// Installs the filter; in observer mode also hands the listener to the parent (before
    /// `execve`, the first watched call, so the parent is ready to answer it) and closes it.
    fn install_seccomp(&self) -> Result<(), SetupError> {
        match (&self.seccomp, self.status_fd()) {
            (Seccomp::Plain(program), _) => syscall_rules::install(program),
            (Seccomp::Observed(filter), Some(status)) => {
                crate::observe::install_and_hand_over(filter, status)
            }
            (Seccomp::Observed(_), None) => Err(SetupError::Arguments(
                "--observe needs a --status-fd".into(),
            )),
        }
    }

    /// What is in force: `layers`, plus what the namespace step found at run time.
    fn receipt(&self, layers: Vec<Layer>, entered: namespaces::Entered) -> ConfinementReceipt {
        // With the mount layer everything outside the writable roots is read-only, which
        // refuses the four operations Landlock does not mediate.
        let mut unmediated = unmediated(&self.policy);
        if self.namespaces.is_some() {
            unmediated.retain(|u| !UNMEDIATED.contains(&u.as_str()));
        }
        let downgrades = self.downgrades.iter().cloned();
        ConfinementReceipt {
            layers,
            landlock_abi: self.landlock_abi,
            downgrades: downgrades.chain(entered.downgrades).collect(),
            approximations: self
                .fs_plan
                .approximations
                .iter()
                .cloned()
                .chain(pattern_approximations(&self.policy))
                .collect(),
            unmediated,
            placeholders: entered.placeholders,
        }
    }

    /// `execvp`s the command; returns its errno when that fails.
    fn exec(&self) -> i32 {
        let mut ptrs: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // SAFETY: `ptrs` is a NULL-terminated array of pointers into CStrings that live in
        // `self` for the duration of the call.
        unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOEXEC)
    }

    /// Writes a record on the status fd, or on stderr when there is none (standalone use).
    pub fn report(&self, record: &StatusRecord) -> Result<(), SetupError> {
        report(self.status_fd(), record).map_err(SetupError::Status)
    }

    /// The program as given, for messages.
    pub fn program(&self) -> String {
        String::from_utf8_lossy(self.argv[0].as_bytes()).into_owned()
    }
}

/// Writes a record on the status fd; without one, prints what a person needs on stderr.
pub fn report(status: Option<BorrowedFd<'_>>, record: &StatusRecord) -> io::Result<()> {
    if let Some(fd) = status {
        return write_record(fd, record);
    }
    match record {
        StatusRecord::Confined(receipt) => {
            for line in crate::status::not_enforced_lines(&receipt.downgrades) {
                eprintln!("cordon-sandbox: {line}");
            }
        }
        StatusRecord::SetupError { message, .. } => eprintln!("cordon-sandbox: {message}"),
        StatusRecord::ExecError {
            program, message, ..
        } => eprintln!("cordon-sandbox: {program}: {message}"),
        // Only ever sent on a status socket: without one there is nobody to hand them to.
        StatusRecord::Fds { .. } | StatusRecord::Observer { .. } => {}
    }
    Ok(())
}

/// With `--hold-fd`, waits after a receipt that lists downgrades until the parent closes its
/// end of the pipe, so that its "not enforced" lines reach the terminal before anything the
/// command writes (the command's stdout may be the terminal itself, which the parent does not
/// relay). A receipt without downgrades has nothing to show: no wait. The parent's death
/// closes its end too, and the parent-death signal kills this process anyway.
fn hold_until_shown(hold: Option<RawFd>, receipt: &ConfinementReceipt) -> io::Result<()> {
    let Some(fd) = hold.filter(|_| !receipt.downgrades.is_empty()) else {
        return Ok(());
    };
    let mut byte = 0u8;
    loop {
        // SAFETY: `fd` was checked open by `prepare_hold_fd` and is kept by
        // `close_inherited_fds`; the buffer is one valid, writable byte.
        let n = unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) };
        if n >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Whether `fd` is a socket (descriptors can be sent over it).
fn is_socket(fd: RawFd) -> bool {
    // SAFETY: `stat` is plain data for which all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`, a valid, writable stat buffer; `fd` is only an integer.
    unsafe { libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK }
}

/// Checks the hold fd is open and makes it close-on-exec: the command must never inherit it.
fn prepare_hold_fd(fd: RawFd) -> Result<RawFd, SetupError> {
    open_cloexec_fd("--hold-fd", fd)
}

/// Checks the status fd is open and makes it close-on-exec, so that a successful `execve`
/// closes it and the parent sees end of file.
fn prepare_status_fd(fd: RawFd) -> Result<RawFd, SetupError> {
    open_cloexec_fd("--status-fd", fd)
}

/// Checks that `fd` (given as `flag`) is open and sets close-on-exec on it.
fn open_cloexec_fd(flag: &str, fd: RawFd) -> Result<RawFd, SetupError> {
    // SAFETY: fcntl on an integer descriptor; fails with EBADF if it is not open.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    // SAFETY: as above, setting a flag only.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(SetupError::Arguments(format!(
            "{flag} {fd} is not an open descriptor: {}",
            io::Error::last_os_error()
        )));
    }
    Ok(fd)
}

/// Accepts a `--pass-fd` descriptor only if it is a pipe, a socket, or a fully sealed memfd.
/// A descriptor of a regular file or a directory was opened before Landlock existed in this
/// process, so the command could read, write or `openat` beneath it regardless of the policy.
/// A memfd is a regular file too, but one that lives on no path; once it carries every seal
/// below, its content can never change again, so all the command gains from it is bytes the
/// parent chose to give it (a shell snapshot, a session's env scripts). An ordinary file on
/// tmpfs also answers `F_GET_SEALS`, but with `F_SEAL_SEAL` alone and no way to add the rest,
/// so it is refused like any other file.
fn check_pass_fd(fd: RawFd) -> Result<(), SetupError> {
    /// Write, grow, shrink, and no further seal changes: immutable for good.
    const REQUIRED_SEALS: libc::c_int =
        libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
    // SAFETY: `stat` is plain data for which all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`, a valid, writable stat buffer; `fd` is only an integer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(SetupError::PassFd {
            fd,
            kind: "not an open descriptor",
            errno: io::Error::last_os_error().raw_os_error(),
        });
    }
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFIFO | libc::S_IFSOCK => return Ok(()),
        libc::S_IFREG => {
            // SAFETY: F_GET_SEALS only reads the descriptor's seal set; no memory is passed.
            let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
            if seals >= 0 && seals & REQUIRED_SEALS == REQUIRED_SEALS {
                return Ok(());
            }
            if seals >= 0 {
                "a memfd (or tmpfs file) without the write, grow, shrink and seal seals"
            } else {
                "a regular file"
            }
        }
        libc::S_IFDIR => "a directory",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFLNK => "a symbolic link",
        _ => "of an unknown type",
    };
    Err(SetupError::PassFd {
        fd,
        kind,
        errno: None,
    })
}

/// The carve-outs the mount layer would have enforced, each with whether the person wrote it
/// (`filesystem.required`), in policy order.
fn carve_out_downgrades(
    policy: &SandboxPolicy,
    missing: &str,
    approximated: &[PathBuf],
) -> Vec<(Downgrade, bool)> {
    let fs = &policy.filesystem;
    let reason = format!(
        "carve-outs need the mount-namespace layer, and {missing}; Landlock rights cannot be \
         subtracted beneath a granted root"
    );
    fs.read_only
        .iter()
        .map(|p| ("read_only", p))
        .chain(
            fs.deny_read
                .iter()
                .filter(|p| !approximated.iter().any(|h| kept_unreadable_by(fs, h, p)))
                .map(|p| ("deny_read", p)),
        )
        .map(|(kind, path)| {
            let downgrade = Downgrade {
                restriction: format!("{kind}:{}", path.display()),
                reason: reason.clone(),
            };
            (downgrade, fs.required.contains(path))
        })
        .collect()
}

/// Whether `path` stays unreadable because Landlock left the hidden `hidden` out of every root
/// above it: `path` is `hidden` itself, or lies beneath it with no root of its own in between
/// (a root below a hidden directory is granted on its own, and would need its own exclusion).
fn kept_unreadable_by(fs: &crate::policy::FilesystemPolicy, hidden: &Path, path: &Path) -> bool {
    path.starts_with(hidden)
        && !fs
            .read
            .iter()
            .chain(&fs.write)
            .any(|root| path.starts_with(root) && root.starts_with(hidden) && root != hidden)
}

fn refuse_if_required(
    enforcement: Enforcement,
    downgrades: &[Downgrade],
) -> Result<(), SetupError> {
    match (enforcement, downgrades.first()) {
        (Enforcement::Refuse, Some(d)) => Err(SetupError::Refused {
            restriction: d.restriction.clone(),
            reason: d.reason.clone(),
        }),
        _ => Ok(()),
    }
}

/// The helper's whole life: parse, validate, confine, exec. Returns the exit code to use when
/// it does not exec. `args` excludes the program name.
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    // SAFETY: getppid cannot fail. Read first, so a parent that dies during setup is noticed.
    let parent = unsafe { libc::getppid() };
    let args = match Args::parse(args) {
        Ok(args) => args,
        Err(e) => {
            let _ = report(None, &e.to_record());
            return EXIT_SETUP;
        }
    };
    let status_fd = match args.status_fd.map(prepare_status_fd).transpose() {
        Ok(fd) => fd,
        Err(e) => {
            let _ = report(None, &e.to_record());
            return EXIT_SETUP;
        }
    };
    let env = match Env::new(args, parent) {
        Ok(env) => env,
        Err(e) => {
            // SAFETY: `prepare_status_fd` checked the descriptor is open; nothing closed it.
            let borrowed = status_fd.map(|fd| unsafe { BorrowedFd::borrow_raw(fd) });
            let _ = report(borrowed, &e.to_record());
            return EXIT_SETUP;
        }
    };
    match env.run() {
        RunError::Setup(e) => {
            let _ = env.report(&e.to_record());
            EXIT_SETUP
        }
        RunError::Exec { errno } => {
            let _ = env.report(&StatusRecord::ExecError {
                program: env.program(),
                errno,
                message: describe_errno(errno),
            });
            if errno == libc::ENOENT || errno == libc::ENOTDIR {
                EXIT_NOT_FOUND
            } else {
                EXIT_NOT_EXECUTABLE
            }
        }
    }
}

/// The system's description of `errno`, without std's "(os error N)" suffix.
pub fn describe_errno(errno: i32) -> String {
    let text = io::Error::from_raw_os_error(errno).to_string();
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, SetupError> {
        Args::parse(args.iter().map(OsString::from))
    }

    #[test]
    fn hold_fd_needs_a_status_fd_and_a_number_of_its_own() {
        let ok = parse(&[
            "--policy",
            "{}",
            "--status-fd",
            "3",
            "--hold-fd",
            "4",
            "--",
            "true",
        ]);
        assert_eq!(ok.unwrap().hold_fd, Some(4));
        let cases: [(&[&str], &str); 4] = [
            (
                &["--policy", "{}", "--hold-fd", "4", "--", "true"],
                "--hold-fd needs a --status-fd",
            ),
            (
                &[
                    "--policy",
                    "{}",
                    "--status-fd",
                    "3",
                    "--hold-fd",
                    "3",
                    "--",
                    "true",
                ],
                "--hold-fd 3 is also the --status-fd or a --pass-fd",
            ),
            (
                &[
                    "--policy",
                    "{}",
                    "--status-fd",
                    "3",
                    "--pass-fd",
                    "5",
                    "--hold-fd",
                    "5",
                    "--",
                    "true",
                ],
                "--hold-fd 5 is also the --status-fd or a --pass-fd",
            ),
            (
                &[
                    "--policy",
                    "{}",
                    "--status-fd",
                    "3",
                    "--hold-fd",
                    "2",
                    "--",
                    "true",
                ],
                "--hold-fd \"2\" is not a descriptor number above 2",
            ),
        ];
        for (args, message) in cases {
            let err = parse(args).expect_err("refused");
            assert!(err.to_string().starts_with(message), "{args:?}: {err}");
        }
    }
}
