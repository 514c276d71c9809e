//! The Landlock layer: filesystem allow-lists, TCP port rules (ABI 4) and scoping of abstract
//! unix sockets and signals (ABI 6).
//!
//! The ABI is fixed in code: the helper uses the best ABI the kernel offers up to
//! [`MAX_LANDLOCK_ABI`], never "all rights of whatever the kernel has", so that a newer kernel
//! cannot silently change what a policy means. Everything an older kernel cannot enforce becomes
//! a [`Downgrade`], which the policy's `enforcement` then refuses or reports.
//!
//! ```
//! use cordon_sandbox::landlock_rules::{downgrades, effective_abi};
//! use cordon_sandbox::SandboxPolicy;
//!
//! // A kernel with ABI 9 is used at ABI 7; the test knob can lower it further.
//! assert_eq!(effective_abi(9, None), 7);
//! assert_eq!(effective_abi(9, Some("5")), 5);
//! // What ABI 5 cannot give the default network settings: the ABI 6 scopes.
//! let policy = SandboxPolicy::from_json(r#"{"version":1,"filesystem":{"read":["/"]},
//!   "network":{"mode":"denied"},"enforcement":{"missing_layer":"refuse","carve_outs":"refuse"}}"#).unwrap();
//! let missing: Vec<String> = downgrades(&policy, 5).into_iter().map(|d| d.restriction).collect();
//! assert_eq!(missing, ["landlock_scope_signal", "landlock_scope_abstract_unix"]);
//! ```

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use crate::error::SetupError;
use crate::path_expansion::{self, Entry, Grant};
use crate::policy::{SandboxPolicy, UnixSockets};
use crate::status::{Approximation, Downgrade, Layer};

/// The newest Landlock ABI whose rights this helper handles.
pub const MAX_LANDLOCK_ABI: u32 = 7;

/// Test knob: caps the ABI the helper uses, to exercise older kernels' behaviour on a new one.
/// `0` behaves as a kernel without Landlock. It can only lower confinement, and every resulting
/// downgrade still goes through the policy's `enforcement`.
pub const ABI_CAP_ENV: &str = "CORDON_LANDLOCK_ABI_MAX";

/// Character devices every command may read and write, whatever the profile (the device
/// allow-list). Everything else under `/dev` is left out of roots above it; see
/// [`EXCLUDED_BENEATH_ROOTS`].
pub const DEVICE_FILES: [&str; 6] = [
    // The universal sink and source: shells redirect to it constantly.
    "/dev/null",
    // Zero bytes on read; `dd`, `head -c` and allocators read it.
    "/dev/zero",
    // ENOSPC on write: programs test their error paths with it.
    "/dev/full",
    // Randomness for every TLS library, Python's `os.urandom` fallback, mktemp, ...
    "/dev/random",
    "/dev/urandom",
    // The caller's controlling terminal only, never another one: it is the terminal the
    // command was given (and ENXIO under `cordon run`, whose command has its own session).
    "/dev/tty",
];

/// Paths that a root above them does not cover: the root is granted entry by entry around
/// them instead ([`crate::path_expansion`]). A root at or beneath one of these paths (say
/// `-r /dev/input` or `-w /dev/shm`) is granted as named.
pub const EXCLUDED_BENEATH_ROOTS: [Exclusion; 1] = [Exclusion {
    path: "/dev",
    reason: "device nodes are not files: other terminals (/dev/pts/N, /dev/tty1..63, \
             /dev/console, /dev/vcs*, serial ttys) carry other people's keystrokes, /dev/input/* \
             every keystroke, raw block devices every file on disk (root reads them by DAC \
             ownership alone), /dev/shm and /dev/mqueue other processes' shared memory and \
             queues; only the device allow-list and the terminal the command was given remain",
}];

/// A path left out of the roots above it, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exclusion {
    /// The path.
    pub path: &'static str,
    /// Why a root above it must not cover it.
    pub reason: &'static str,
}

/// True when a root above `path` does not grant it (it lies at or beneath an excluded path)
/// and no root at or beneath that exclusion names it: what a denial report needs to know.
pub fn excluded_from_roots(policy: &SandboxPolicy, path: &Path) -> bool {
    let fs = &policy.filesystem;
    EXCLUDED_BENEATH_ROOTS
        .iter()
        .map(|e| Path::new(e.path))
        .filter(|e| path.starts_with(e))
        .any(|e| {
            !fs.read
                .iter()
                .chain(&fs.write)
                .any(|r| r.starts_with(e) && path.starts_with(r))
        })
        && !DEVICE_FILES.iter().any(|d| path == Path::new(d))
}

/// The ABI the running kernel offers (0 without Landlock).
pub fn kernel_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attribute pointer, size 0 and the VERSION flag the kernel only
    // returns the ABI number; no memory is read or written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 {
        0
    } else {
        rc as u32
    }
}

/// The ABI to use: the kernel's, capped by [`MAX_LANDLOCK_ABI`] and by the test knob.
pub fn effective_abi(kernel: u32, knob: Option<&str>) -> u32 {
    let cap = knob
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(MAX_LANDLOCK_ABI);
    kernel.min(MAX_LANDLOCK_ABI).min(cap)
}

/// What the policy asks of Landlock that the chosen ABI cannot give.
pub fn downgrades(policy: &SandboxPolicy, abi: u32) -> Vec<Downgrade> {
    let mut out = Vec::new();
    let mut missing = |restriction: &str, since: u32, what: &str| {
        if abi < since {
            out.push(Downgrade {
                restriction: restriction.to_owned(),
                reason: if abi == 0 {
                    format!("{what}: the kernel has no Landlock")
                } else {
                    format!("{what}: needs Landlock ABI {since}, the kernel offers {abi}")
                },
            });
        }
    };
    missing(
        "landlock_filesystem",
        1,
        "filesystem access is not restricted at all, nor /proc/PID/mem and environ of the user's processes outside the sandbox",
    );
    missing(
        "landlock_truncate",
        3,
        "truncating files outside writable roots is not prevented",
    );
    let ports_requested = policy.network.tcp_connect.is_some() || policy.network.tcp_bind.is_some();
    if ports_requested {
        missing(
            "landlock_tcp_ports",
            4,
            "TCP connect/bind port allow-lists are not enforced",
        );
    }
    missing(
        "landlock_ioctl_dev",
        5,
        "ioctl on device files outside the device allow-list is not prevented",
    );
    missing(
        "landlock_scope_signal",
        6,
        "signals to processes outside the sandbox are not prevented",
    );
    if policy.network.unix_sockets == UnixSockets::Deny {
        missing(
            "landlock_scope_abstract_unix",
            6,
            "connecting to abstract unix sockets outside the sandbox is not prevented",
        );
    }
    out
}

/// The rights one filesystem rule carries, turned into Landlock bits for the ABI in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAccess {
    /// A readable root: read and execute.
    Read,
    /// A writable root: every right the ABI handles.
    Write,
    /// A directory along the way to an excluded path: listing only.
    Listing,
    /// The device allow-list: read, write, truncate, ioctl.
    Device,
}

/// One filesystem rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsRule {
    /// The path the rule is attached to.
    pub path: PathBuf,
    /// Its rights.
    pub access: RuleAccess,
    /// Whether it is a directory, when a listing already said so.
    pub is_dir: Option<bool>,
    /// False for paths the policy did not name (a device missing from a minimal `/dev`, an
    /// entry that vanished since it was listed): those are skipped when they do not exist.
    pub required: bool,
}

/// The filesystem rules, computed by [`plan`] before anything in the process changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsPlan {
    /// Every rule, in order.
    pub rules: Vec<FsRule>,
    /// Roots narrowed around an excluded path, for the receipt.
    pub approximations: Vec<Approximation>,
    /// The `hidden` paths given to [`plan`] that the rules keep unreadable (those in a small
    /// enough directory); the others stay downgrades.
    pub hidden: Vec<PathBuf>,
}

/// Above this many entries beside a hidden path, granting around it costs more Landlock rules
/// (about 4 µs each, before every command) than it is worth: `/etc/shadow` would take ~140.
/// Such a path is left to the caller as a downgrade.
pub const MAX_SIBLINGS_TO_APPROXIMATE: usize = 64;

/// Which `/dev` the command will see, which decides whether roots above it must leave it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevView {
    /// The host's `/dev`, or a private one with the host's `/dev/pts` bound into it (the
    /// command was given a terminal): roots above it are expanded around it.
    Host,
    /// The namespace layer's own `/dev`: the device allow-list, the listed devices, a private
    /// shm and devpts and nothing else, so a root above it may cover it whole (and the ~20
    /// rules of an expanded `/` are not paid for).
    Private,
}

/// Whether `dir`'s link count alone shows more subdirectories than
/// [`MAX_SIBLINGS_TO_APPROXIMATE`] (each subdirectory's `..` is a link to it), so that listing
/// it would be wasted: `/etc`, with some 75 subdirectories, is read on every run otherwise. A
/// file system that does not count links this way (btrfs says 1) is listed as before.
fn more_subdirectories_than_approximated(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir).is_ok_and(|m| {
        m.is_dir() && m.nlink().saturating_sub(2) > MAX_SIBLINGS_TO_APPROXIMATE as u64
    })
}

/// Computes the filesystem rules of `policy`, expanding roots above [`EXCLUDED_BENEATH_ROOTS`]
/// with the real directory listing when the command sees the host's `/dev`.
///
/// `hidden` are `deny_read` paths that no mount layer will hide (no user namespaces) and that
/// lie outside every writable root: they are left out of the roots above them the same way,
/// which keeps their contents unreadable (their names stay listable, and the receipt says so).
pub fn plan(
    policy: &SandboxPolicy,
    dev: DevView,
    hidden: &[PathBuf],
) -> Result<FsPlan, SetupError> {
    plan_with(policy, dev, hidden, &mut path_expansion::list_directory)
}

/// [`plan`] over any directory listing.
pub fn plan_with(
    policy: &SandboxPolicy,
    dev: DevView,
    hidden: &[PathBuf],
    list: &mut impl FnMut(&Path) -> io::Result<Vec<Entry>>,
) -> Result<FsPlan, SetupError> {
    let mut excluded: Vec<&Path> = match dev {
        DevView::Host => EXCLUDED_BENEATH_ROOTS
            .iter()
            .map(|e| Path::new(e.path))
            .collect(),
        DevView::Private => Vec::new(),
    };
    // Each directory is listed once: the size check below and the expansion read the same ones.
    let mut listed: Vec<(PathBuf, Vec<Entry>)> = Vec::new();
    let mut list = |dir: &Path| -> io::Result<Vec<Entry>> {
        if let Some((_, entries)) = listed.iter().find(|(d, _)| d == dir) {
            return Ok(entries.clone());
        }
        let entries = list(dir)?;
        listed.push((dir.to_path_buf(), entries.clone()));
        Ok(entries)
    };
    let mut out = FsPlan::default();
    for path in hidden {
        let few = path
            .parent()
            .filter(|dir| !more_subdirectories_than_approximated(dir))
            .and_then(|dir| list(dir).ok())
            .is_some_and(|entries| entries.len() <= MAX_SIBLINGS_TO_APPROXIMATE);
        if few {
            out.hidden.push(path.clone());
        }
    }
    excluded.extend(out.hidden.iter().map(PathBuf::as_path));
    let fs = &policy.filesystem;
    let roots = fs
        .read
        .iter()
        .map(|p| (p, RuleAccess::Read, "read"))
        .chain(fs.write.iter().map(|p| (p, RuleAccess::Write, "write")));
    for (root, access, kind) in roots {
        let expansion = path_expansion::expand(root, &excluded, &mut list).map_err(|source| {
            SetupError::LandlockPath {
                path: root.clone(),
                source,
            }
        })?;
        for grant in expansion.grants {
            out.rules.push(match grant {
                // The root itself is required; entries found by listing may vanish.
                Grant::Whole { path, is_dir } => FsRule {
                    required: &path == root,
                    path,
                    access,
                    is_dir,
                },
                Grant::ListingOnly(path) => FsRule {
                    required: &path == root,
                    path,
                    access: RuleAccess::Listing,
                    is_dir: Some(true),
                },
            });
        }
        if !expansion.narrowed.is_empty() {
            out.approximations
                .push(approximation(kind, root, &expansion.narrowed, &excluded));
        }
    }
    // A read rule on a path that also has a write rule adds nothing (write includes every read
    // right), and each rule costs system calls before every command: `/tmp` is both an entry of
    // an expanded `/` and a writable root under the default profile.
    let written: Vec<PathBuf> = out
        .rules
        .iter()
        .filter(|r| r.access == RuleAccess::Write)
        .map(|r| r.path.clone())
        .collect();
    out.rules
        .retain(|r| r.access != RuleAccess::Read || r.required || !written.contains(&r.path));
    out.rules.extend(DEVICE_FILES.iter().map(|p| FsRule {
        path: PathBuf::from(p),
        access: RuleAccess::Device,
        is_dir: Some(false),
        required: false,
    }));
    // The profile's devices (`filesystem.devices`) get the device rights only: creating files
    // beside them in the host's /dev is not what listing them asks for.
    out.rules.extend(fs.devices.iter().map(|p| FsRule {
        path: p.clone(),
        access: RuleAccess::Device,
        is_dir: None,
        required: true,
    }));
    Ok(out)
}

fn approximation(
    kind: &str,
    root: &Path,
    narrowed: &[PathBuf],
    excluded: &[&Path],
) -> Approximation {
    let list = |paths: &mut dyn Iterator<Item = String>| paths.collect::<Vec<_>>().join(", ");
    let left_out = list(
        &mut excluded
            .iter()
            .filter(|e| e.starts_with(root) && **e != root)
            .map(|e| e.display().to_string()),
    );
    let dirs = list(&mut narrowed.iter().map(|d| d.display().to_string()));
    let writes = if kind == "write" {
        format!("; nothing can be created, removed or renamed directly in {dirs}")
    } else {
        String::new()
    };
    Approximation {
        rule: format!("{kind}:{}", root.display()),
        effect: format!(
            "granted entry by entry to leave out {left_out} (Landlock cannot subtract rights \
             beneath a root): entries created later directly in {dirs} are not covered, and \
             names beneath what is left out stay listable{writes}"
        ),
    }
}

/// Builds the ruleset for `abi` and restricts the calling thread. Returns the Landlock layers
/// now in force. `abi` must be what [`effective_abi`] chose; with 0 nothing is applied.
/// `plan` is what [`plan`] computed for `policy`.
pub fn apply(policy: &SandboxPolicy, abi: u32, plan: &FsPlan) -> Result<Vec<Layer>, SetupError> {
    if abi == 0 {
        return Ok(Vec::new());
    }
    let ll_abi = ABI::from(abi as i32);
    let handled = AccessFs::from_all(ll_abi);
    let read = AccessFs::from_read(ll_abi);
    let device =
        (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev)
            & handled;

    let ports_wanted =
        abi >= 4 && (policy.network.tcp_connect.is_some() || policy.network.tcp_bind.is_some());
    let mut net_handled = BitFlags::<AccessNet>::EMPTY;
    if ports_wanted && policy.network.tcp_connect.is_some() {
        net_handled |= AccessNet::ConnectTcp;
    }
    if ports_wanted && policy.network.tcp_bind.is_some() {
        net_handled |= AccessNet::BindTcp;
    }
    let mut scopes = BitFlags::<Scope>::EMPTY;
    if abi >= 6 {
        scopes |= Scope::Signal;
        if policy.network.unix_sockets == UnixSockets::Deny {
            scopes |= Scope::AbstractUnixSocket;
        }
    }

    // HardRequirement: the ABI was chosen above from the kernel's own answer, so anything the
    // crate would have to drop silently is a bug and must fail instead.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(ruleset_error("handle filesystem rights"))?;
    if !net_handled.is_empty() {
        ruleset = ruleset
            .handle_access(net_handled)
            .map_err(ruleset_error("handle TCP rights"))?;
    }
    if !scopes.is_empty() {
        ruleset = ruleset
            .scope(scopes)
            .map_err(ruleset_error("scope signals and abstract sockets"))?;
    }
    let mut created = ruleset
        .create()
        .map_err(ruleset_error("create ruleset"))?
        // no_new_privs is its own step of the helper, before this one.
        .no_new_privs(false);

    for rule in &plan.rules {
        let access = match rule.access {
            RuleAccess::Read => read,
            RuleAccess::Write => handled,
            RuleAccess::Listing => handled & AccessFs::ReadDir,
            RuleAccess::Device => device,
        };
        created = add_path_rule(created, rule, access, ll_abi)?;
    }
    created = add_inherited_terminal_rules(created, device & AccessFs::from_file(ll_abi))?;
    if net_handled.contains(AccessNet::ConnectTcp) {
        for &port in policy.network.tcp_connect.iter().flatten() {
            created = created
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(ruleset_error("add TCP connect port"))?;
        }
    }
    if net_handled.contains(AccessNet::BindTcp) {
        for &port in policy.network.tcp_bind.iter().flatten() {
            created = created
                .add_rule(NetPort::new(port, AccessNet::BindTcp))
                .map_err(ruleset_error("add TCP bind port"))?;
        }
    }

    if abi >= 7 {
        // ABI 7: the kernel audits this domain's denials after execve (the command's, which
        // the parent may read as evidence: Landlock audit), not those of the helper itself.
        created = created
            .log_same_exec(false)
            .and_then(|c| c.log_new_exec(true))
            .map_err(ruleset_error("set the audit flags"))?;
    }
    let status = created
        .restrict_self()
        .map_err(ruleset_error("restrict_self"))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(SetupError::Landlock {
            what: "restrict_self",
            source: io::Error::other(format!(
                "the kernel reported {:?} for ABI {abi}",
                status.ruleset
            )),
        });
    }
    let mut layers = vec![Layer::LandlockFs];
    if !net_handled.is_empty() {
        layers.push(Layer::LandlockNet);
    }
    if !scopes.is_empty() {
        layers.push(Layer::LandlockScope);
    }
    Ok(layers)
}

type CreatedRuleset = landlock::RulesetCreated;

/// Adds the rule for one path, skipping a path the policy did not name if it does not exist.
fn add_path_rule(
    created: CreatedRuleset,
    rule: &FsRule,
    access: BitFlags<AccessFs>,
    ll_abi: ABI,
) -> Result<CreatedRuleset, SetupError> {
    let file = match open_path(&rule.path) {
        Ok(file) => file,
        Err(SetupError::LandlockPath { source, .. })
            if !rule.required && source.kind() == io::ErrorKind::NotFound =>
        {
            return Ok(created)
        }
        Err(e) => return Err(e),
    };
    let is_dir = match rule.is_dir {
        Some(known) => known,
        None => file.metadata().map(|m| m.is_dir()).unwrap_or(false),
    };
    let access = if is_dir {
        access
    } else {
        access & AccessFs::from_file(ll_abi)
    };
    created
        .add_rule(PathBeneath::new(file, access))
        .map_err(|e| SetupError::LandlockPath {
            path: rule.path.clone(),
            source: io::Error::other(e.to_string()),
        })
}

/// `/dev/ptmx`: reopening a pty master makes a new pseudo-terminal, not the given one.
const PTMX: (u32, u32) = (5, 2);

/// Lets the command reopen the terminals its stdin, stdout and stderr are (`/dev/stdout`,
/// `/proc/self/fd/1`, `/dev/pts/N` by name), and no other: the rule is attached to the
/// inherited descriptor's own inode. The descriptors themselves work regardless, since
/// Landlock checks at open.
fn add_inherited_terminal_rules(
    mut created: CreatedRuleset,
    access: BitFlags<AccessFs>,
) -> Result<CreatedRuleset, SetupError> {
    for fd in 0..=2 {
        // SAFETY: `stat` is plain data for which all-zero is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes into `st`, a valid stat buffer; `fd` is only an integer and a
        // closed one fails with EBADF.
        if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFCHR {
            continue;
        }
        // SAFETY: isatty only queries the descriptor.
        if unsafe { libc::isatty(fd) } != 1
            || (libc::major(st.st_rdev), libc::minor(st.st_rdev)) == PTMX
        {
            continue;
        }
        // SAFETY: fstat just succeeded on `fd`, and nothing closes it before the rule is added
        // (the borrow ends with this iteration).
        let terminal = unsafe { BorrowedFd::borrow_raw(fd) };
        created = created
            .add_rule(PathBeneath::new(terminal, access))
            .map_err(|e| SetupError::LandlockPath {
                path: PathBuf::from(format!("/proc/self/fd/{}", terminal.as_raw_fd())),
                source: io::Error::other(e.to_string()),
            })?;
    }
    Ok(created)
}

/// Opens `path` with `O_PATH` (enough for a Landlock rule, and it needs no read permission),
/// refusing to follow a symbolic link anywhere in it: policy paths are canonical by contract,
/// and resolving them here means a link swapped in after the parent resolved the profile
/// cannot move a rule somewhere else. Kernels without `openat2` (before 5.6) get a plain open.
fn open_path(path: &Path) -> Result<std::fs::File, SetupError> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        SetupError::LandlockPath {
            path: path.to_path_buf(),
            source: io::Error::from_raw_os_error(libc::EINVAL),
        }
    })?;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: `c_path` is NUL-terminated and `how` has the layout of `struct open_how`, whose
    // size is passed; both outlive the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: the kernel just returned this descriptor, and nothing else owns it.
        return Ok(unsafe { std::fs::File::from_raw_fd(fd as i32) });
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ELOOP) => Err(SetupError::SymlinkInPolicy {
            path: path.to_path_buf(),
        }),
        Some(libc::ENOSYS) => {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
                .open(path)
                .map_err(|source| SetupError::LandlockPath {
                    path: path.to_path_buf(),
                    source,
                })
        }
        _ => Err(SetupError::LandlockPath {
            path: path.to_path_buf(),
            source: err,
        }),
    }
}

/// `struct open_how` (libc's is `non_exhaustive`, so it cannot be built outside libc).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_SYMLINKS: u64 = 0x04;

fn ruleset_error<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> SetupError {
    move |e| SetupError::Landlock {
        what,
        source: io::Error::other(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path_expansion::EntryKind;

    fn policy(read: &[&str], write: &[&str]) -> SandboxPolicy {
        let mut policy = SandboxPolicy::from_json(
            r#"{"version":1,"filesystem":{},"network":{"mode":"denied"},
                "enforcement":{"missing_layer":"refuse","carve_outs":"refuse"}}"#,
        )
        .unwrap();
        policy.filesystem.read = read.iter().map(PathBuf::from).collect();
        policy.filesystem.write = write.iter().map(PathBuf::from).collect();
        policy
    }

    fn fake_root(dir: &Path) -> io::Result<Vec<Entry>> {
        match dir.to_str() {
            Some("/") => Ok(vec![
                Entry::new("usr", EntryKind::Directory),
                Entry::new("dev", EntryKind::Directory),
                Entry::new("lib", EntryKind::Symlink),
                // Also a writable root below: its read rule from the expansion is dropped.
                Entry::new("tmp", EntryKind::Directory),
            ]),
            _ => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    fn summary(plan: &FsPlan) -> Vec<(String, RuleAccess, bool)> {
        plan.rules
            .iter()
            .map(|r| (r.path.display().to_string(), r.access, r.required))
            .collect()
    }

    #[test]
    fn a_root_above_dev_is_planned_around_it_and_named_devices_stay() {
        let plan = plan_with(
            &policy(&["/"], &["/tmp", "/dev/shm"]),
            DevView::Host,
            &[],
            &mut fake_root,
        )
        .unwrap();
        let mut expected: Vec<(String, RuleAccess, bool)> = vec![
            ("/".into(), RuleAccess::Listing, true),
            ("/usr".into(), RuleAccess::Read, false),
            ("/tmp".into(), RuleAccess::Write, true),
            ("/dev/shm".into(), RuleAccess::Write, true),
        ];
        expected.extend(
            DEVICE_FILES
                .iter()
                .map(|d| (d.to_string(), RuleAccess::Device, false)),
        );
        assert_eq!(summary(&plan), expected);
        assert_eq!(plan.approximations.len(), 1);
        assert_eq!(plan.approximations[0].rule, "read:/");
    }

    #[test]
    fn a_hidden_path_is_left_out_like_dev() {
        let hidden = [PathBuf::from("/usr")];
        let plan = plan_with(
            &policy(&["/"], &[]),
            DevView::Private,
            &hidden,
            &mut fake_root,
        )
        .unwrap();
        let rules = summary(&plan);
        assert_eq!(rules[0], ("/".into(), RuleAccess::Listing, true));
        assert!(!rules.iter().any(|(p, _, _)| p == "/usr"), "{rules:?}");
        assert!(rules.contains(&("/tmp".into(), RuleAccess::Read, false)));
        assert!(plan.approximations[0].effect.contains("leave out /usr ("));
        assert_eq!(plan.hidden, hidden);
        // A directory that cannot be listed (or is too crowded) keeps its hidden path out of
        // the plan: the caller reports it as a downgrade.
        let unlisted = [PathBuf::from("/usr/lib/secret")];
        let plan = plan_with(
            &policy(&["/"], &[]),
            DevView::Private,
            &unlisted,
            &mut fake_root,
        )
        .unwrap();
        assert!(plan.hidden.is_empty());
        assert_eq!(summary(&plan)[0], ("/".into(), RuleAccess::Read, true));
    }

    #[test]
    fn a_private_dev_is_covered_by_the_root_above_it() {
        let plan = plan_with(
            &policy(&["/"], &["/tmp"]),
            DevView::Private,
            &[],
            &mut fake_root,
        )
        .unwrap();
        let summary = summary(&plan);
        assert_eq!(summary[0], ("/".into(), RuleAccess::Read, true));
        assert_eq!(summary[1], ("/tmp".into(), RuleAccess::Write, true));
        assert!(plan.approximations.is_empty());
    }

    #[test]
    fn a_writable_root_above_dev_says_what_it_cannot_do() {
        let plan = plan_with(&policy(&[], &["/"]), DevView::Host, &[], &mut fake_root).unwrap();
        assert_eq!(plan.rules[0].access, RuleAccess::Listing);
        assert_eq!(plan.rules[1].access, RuleAccess::Write);
        let effect = &plan.approximations[0].effect;
        assert!(effect.contains("nothing can be created, removed or renamed directly in /"));
    }

    #[test]
    fn excluded_paths_for_denial_reports() {
        let p = policy(&["/", "/dev/input"], &["/dev/shm"]);
        assert!(excluded_from_roots(&p, Path::new("/dev/pts/3")));
        assert!(excluded_from_roots(&p, Path::new("/dev/sda")));
        assert!(!excluded_from_roots(&p, Path::new("/dev/null")));
        assert!(!excluded_from_roots(&p, Path::new("/dev/input/event0")));
        assert!(!excluded_from_roots(&p, Path::new("/dev/shm/x")));
        assert!(!excluded_from_roots(&p, Path::new("/etc/passwd")));
    }

    #[test]
    fn abi_is_capped_in_code_and_by_knob() {
        assert_eq!(effective_abi(9, None), MAX_LANDLOCK_ABI);
        assert_eq!(effective_abi(5, None), 5);
        assert_eq!(effective_abi(7, Some("3")), 3);
        assert_eq!(effective_abi(2, Some("6")), 2);
        assert_eq!(effective_abi(7, Some("0")), 0);
        assert_eq!(effective_abi(7, Some("garbage")), 7);
    }
}
