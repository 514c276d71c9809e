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
use std::path::Path;

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use crate::error::SetupError;
use crate::policy::{SandboxPolicy, UnixSockets};
use crate::status::{Downgrade, Layer};

/// The newest Landlock ABI whose rights this helper handles.
pub const MAX_LANDLOCK_ABI: u32 = 7;

/// Test knob: caps the ABI the helper uses, to exercise older kernels' behaviour on a new one.
/// `0` behaves as a kernel without Landlock. It can only lower confinement, and every resulting
/// downgrade still goes through the policy's `enforcement`.
pub const ABI_CAP_ENV: &str = "CORDON_LANDLOCK_ABI_MAX";

/// Character devices every command may read and write, whatever the profile.
pub const DEVICE_FILES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

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
        "filesystem access is not restricted at all",
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

/// Builds the ruleset for `abi` and restricts the calling thread. Returns the Landlock layers
/// now in force. `abi` must be what [`effective_abi`] chose; with 0 nothing is applied.
pub fn apply(policy: &SandboxPolicy, abi: u32) -> Result<Vec<Layer>, SetupError> {
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

    let fs = &policy.filesystem;
    let rules = fs
        .read
        .iter()
        .map(|p| (p.as_path(), read, true))
        .chain(fs.write.iter().map(|p| (p.as_path(), handled, true)))
        .chain(DEVICE_FILES.iter().map(|p| (Path::new(*p), device, false)))
        // The profile's devices get the device rights only: creating files beside them in
        // the host's /dev is not what listing them asks for.
        .chain(fs.devices.iter().map(|p| (p.as_path(), device, true)));
    for (path, access, required) in rules {
        let file = match open_path(path) {
            Ok(file) => file,
            // A device missing from a minimal /dev is not something the policy asked for.
            Err(SetupError::LandlockPath { source, .. })
                if !required && source.kind() == io::ErrorKind::NotFound =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(false);
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(ll_abi)
        };
        created = created
            .add_rule(PathBeneath::new(file, access))
            .map_err(|e| SetupError::LandlockPath {
                path: path.to_path_buf(),
                source: io::Error::other(e.to_string()),
            })?;
    }
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
