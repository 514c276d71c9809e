//! `network.mode = "loopback"`: `lo` up in the private network namespace, nothing else. The
//! kernel gives a new namespace a `lo` that is down and no other interface; bringing it up also
//! assigns ::1 when IPv6 is enabled.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::SetupError;

/// Sets `IFF_UP` on `lo` with `SIOCSIFFLAGS`. Needs CAP_NET_ADMIN in the namespace's owner,
/// which the init holds in the new user namespace.
pub fn loopback_up() -> Result<(), SetupError> {
    // SAFETY: socket with constant arguments; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(SetupError::Loopback(io::Error::last_os_error()));
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: `ifreq` is plain data for which all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq naming "lo"; the kernel fills the flags member.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) } != 0 {
        return Err(SetupError::Loopback(io::Error::last_os_error()));
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union, which is read and updated.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: as above; the kernel reads the name and the flags.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req) } != 0 {
        return Err(SetupError::Loopback(io::Error::last_os_error()));
    }
    Ok(())
}
