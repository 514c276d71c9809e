//! The user namespace: probing whether one can be created, and entering it with the caller's
//! own uid and gid mapped to themselves.

use std::io;

use crate::error::SetupError;

/// Why user namespaces cannot be used here, with the setting that would change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// What the probe found.
    pub reason: String,
}

/// Knobs that switch unprivileged user namespaces off, each with the hint a person needs.
/// Read once in `Env::new`; the `unshare` itself is the final word (and fails closed).
const KNOBS: [(&str, &str, bool); 3] = [
    (
        "/proc/sys/user/max_user_namespaces",
        "set the sysctl user.max_user_namespaces above 0",
        // Applies to root too: it is a count limit, not a permission.
        true,
    ),
    (
        "/proc/sys/kernel/unprivileged_userns_clone",
        "Debian: set the sysctl kernel.unprivileged_userns_clone=1",
        false,
    ),
    (
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        "Ubuntu: set the sysctl kernel.apparmor_restrict_unprivileged_userns=0 or give cordon an AppArmor profile with `userns,`",
        false,
    ),
];

/// Checks, without creating anything, whether this process can create a user namespace.
/// Paid by every command before anything else, so each question costs one or two system
/// calls: nothing here follows the namespace link or renders `/proc/self/status`.
pub fn probe() -> Result<(), Unavailable> {
    // The entry itself, not the namespace it links to: following it makes the kernel
    // instantiate an nsfs inode, which is most of the cost of a `stat`.
    if std::fs::symlink_metadata("/proc/self/ns/user").is_err() {
        return Err(Unavailable {
            reason: "the kernel has no user namespaces (CONFIG_USER_NS), or /proc is not mounted"
                .into(),
        });
    }
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    for (file, hint, applies_to_root) in KNOBS {
        let Some(value) = read_knob(file) else {
            continue; // the knob does not exist on this kernel
        };
        let value = value.as_str();
        let off = if file.ends_with("apparmor_restrict_unprivileged_userns") {
            value == "1"
        } else {
            value == "0"
        };
        if off && (applies_to_root || !root) {
            return Err(Unavailable {
                reason: format!("user namespaces are disabled ({file} is {value}); {hint}"),
            });
        }
    }
    if under_seccomp_filter() {
        return try_in_child();
    }
    Ok(())
}

/// A sysctl's value, trimmed: one open and one read (sysctl values here are a few digits;
/// anything longer is not a value this probe understands and reads as absent).
fn read_knob(file: &str) -> Option<String> {
    use std::io::Read;
    let mut buf = [0u8; 32];
    let n = std::fs::File::open(file).ok()?.read(&mut buf).ok()?;
    let text = std::str::from_utf8(buf.get(..n)?).ok()?;
    Some(text.trim().to_owned())
}

/// A seccomp filter (a container runtime's, or an outer cordon's) may refuse `unshare` where
/// the sysctls allow it; only then is the real call tried, in a throwaway child. Asked with
/// `PR_GET_SECCOMP` (2 = filter mode); a filter that refuses even that question counts as one.
fn under_seccomp_filter() -> bool {
    // SAFETY: prctl with integer arguments only.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    mode != 0
}

fn try_in_child() -> Result<(), Unavailable> {
    // SAFETY: the helper is single-threaded here; the child only calls unshare and _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: unshare then _exit in the child; nothing else runs there.
        unsafe {
            let code = if libc::unshare(libc::CLONE_NEWUSER) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::_exit(code.clamp(0, 255));
        }
    }
    let mut status = 0;
    // SAFETY: waitpid on the child just forked, with a valid status pointer.
    if pid < 0 || unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return Err(Unavailable {
            reason: "cannot probe for user namespaces (fork failed)".into(),
        });
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, errno) => Err(Unavailable {
            reason: format!(
                "creating a user namespace is refused here ({}: a seccomp filter of the container or of an outer sandbox); run outside it, or allow unshare(CLONE_NEWUSER) in its profile",
                io::Error::from_raw_os_error(errno)
            ),
        }),
        _ => Err(Unavailable {
            reason: "the user-namespace probe did not exit normally".into(),
        }),
    }
}

/// The hint added to an `unshare(CLONE_NEWUSER)` failure.
pub const UNSHARE_HINT: &str = "; user namespaces may be disabled: check the sysctls user.max_user_namespaces, kernel.unprivileged_userns_clone (Debian) and kernel.apparmor_restrict_unprivileged_userns (Ubuntu)";

/// Moves the calling (single-threaded) process into a new user namespace in which `uid` and
/// `gid` map to themselves. Not to root: a command that sees uid 0 behaves as if it could do
/// anything, and files it creates must keep the caller's ownership outside.
///
/// `setgroups` is denied first, for root callers too: after `unshare` this process holds no
/// capability in the parent namespace, and without CAP_SETGID there the kernel accepts a
/// `gid_map` only once `setgroups` is off. The supplementary groups stay as they are.
pub fn enter(uid: libc::uid_t, gid: libc::gid_t) -> Result<(), SetupError> {
    // SAFETY: unshare with a flag only changes this process's namespace membership.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
        return Err(SetupError::Namespace {
            what: "user namespace",
            source: io::Error::last_os_error(),
            hint: UNSHARE_HINT,
        });
    }
    let write = |file: &'static str, what: &'static str, text: String| {
        std::fs::write(file, text).map_err(|source| SetupError::Namespace {
            what,
            source,
            hint: "",
        })
    };
    write(
        "/proc/self/setgroups",
        "user namespace (setgroups deny)",
        "deny".into(),
    )?;
    write(
        "/proc/self/uid_map",
        "user namespace (uid_map)",
        format!("{uid} {uid} 1"),
    )?;
    write(
        "/proc/self/gid_map",
        "user namespace (gid_map)",
        format!("{gid} {gid} 1"),
    )?;
    Ok(())
}
