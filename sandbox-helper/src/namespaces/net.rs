//! `network.mode = "loopback"`: `lo` up in the private network namespace, nothing else. The
//! kernel gives a new namespace a `lo` that is down and no other interface; bringing it up also
//! assigns ::1 when IPv6 is enabled. `network.mode = "proxy"` and `network.host_ports` add
//! listening sockets on that `lo` which the parent serves (see [`Listeners`]).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::SetupError;
use crate::policy::{NetworkMode, SandboxPolicy, PROXY_PORT};
use crate::status::{self, StatusRecord, TAG_HOST_PORT, TAG_PROXY, TAG_SOCKET};

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

/// The listening sockets the helper opens in the private network namespace for the parent,
/// which serves them from the host's namespace: no process of cordon's runs in between.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listeners {
    /// `(tag, port)`, each opened on 127.0.0.1 and (where IPv6 is up) ::1.
    pub ports: Vec<(String, u16)>,
    /// Whether the init serves socket requests for published ports.
    pub publish: bool,
}

/// How many connections wait for the parent's `accept`; a burst from a package manager
/// opening many at once must not be refused.
const BACKLOG: libc::c_int = 1024;

impl Listeners {
    /// What `policy` needs: the proxy's port in `proxy` mode, and one per host port.
    pub fn of(policy: &SandboxPolicy) -> Listeners {
        let network = &policy.network;
        let mut ports = Vec::new();
        if network.mode == NetworkMode::Proxy {
            ports.push((TAG_PROXY.to_owned(), PROXY_PORT));
        }
        if network.mode.is_private() {
            for &port in &network.host_ports {
                ports.push((format!("{TAG_HOST_PORT}{port}"), port));
            }
        }
        Listeners {
            ports,
            publish: network.mode.is_private() && !network.publish.is_empty(),
        }
    }

    /// True when nothing is to be opened.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty() && !self.publish
    }

    /// Opens every listener (close-on-exec), in the namespace this process is in.
    pub fn open(&self) -> Result<Vec<(String, Vec<OwnedFd>)>, SetupError> {
        let mut out = Vec::new();
        for (tag, port) in &self.ports {
            let mut fds = vec![listen(IpAddr::V4(Ipv4Addr::LOCALHOST), *port)?];
            match listen(IpAddr::V6(Ipv6Addr::LOCALHOST), *port) {
                Ok(fd) => fds.push(fd),
                // IPv6 off in this kernel or namespace: there is no ::1 to serve.
                Err(SetupError::Listener { source, .. })
                    if matches!(
                        source.raw_os_error(),
                        Some(libc::EADDRNOTAVAIL | libc::EAFNOSUPPORT)
                    ) => {}
                Err(e) => return Err(e),
            }
            out.push((tag.clone(), fds));
        }
        Ok(out)
    }
}

fn listen(ip: IpAddr, port: u16) -> Result<OwnedFd, SetupError> {
    let fail = |source: io::Error| SetupError::Listener {
        address: SocketAddr::new(ip, port).to_string(),
        source,
    };
    let family = match ip {
        IpAddr::V4(_) => libc::AF_INET,
        IpAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket with constant arguments; the result is checked.
    let raw = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(fail(io::Error::last_os_error()));
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let rc = match ip {
        IpAddr::V4(v4) => {
            let addr = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(v4).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `addr` is a valid sockaddr_in of the size given.
            unsafe {
                libc::bind(
                    sock.as_raw_fd(),
                    (&addr as *const libc::sockaddr_in).cast(),
                    std::mem::size_of_val(&addr) as libc::socklen_t,
                )
            }
        }
        IpAddr::V6(v6) => {
            let one: libc::c_int = 1;
            // SAFETY: setsockopt with a valid int option value; a v6-only socket leaves the
            // IPv4 port to the IPv4 listener.
            unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::IPPROTO_IPV6,
                    libc::IPV6_V6ONLY,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of_val(&one) as libc::socklen_t,
                )
            };
            // SAFETY: `sockaddr_in6` is plain data for which all-zero is valid.
            let mut addr: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            addr.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            addr.sin6_port = port.to_be();
            addr.sin6_addr.s6_addr = v6.octets();
            // SAFETY: `addr` is a valid sockaddr_in6 of the size given.
            unsafe {
                libc::bind(
                    sock.as_raw_fd(),
                    (&addr as *const libc::sockaddr_in6).cast(),
                    std::mem::size_of_val(&addr) as libc::socklen_t,
                )
            }
        }
    };
    if rc != 0 {
        return Err(fail(io::Error::last_os_error()));
    }
    // SAFETY: listen on a bound socket this function owns.
    if unsafe { libc::listen(sock.as_raw_fd(), BACKLOG) } != 0 {
        return Err(fail(io::Error::last_os_error()));
    }
    Ok(sock)
}

/// The socket-request channel for published ports: `(parent's end, init's end)`, both
/// close-on-exec, the init's non-blocking. A stream pair, like the status channel.
pub fn socket_request_pair() -> Result<(OwnedFd, OwnedFd), SetupError> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into `fds`.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(SetupError::Listener {
            address: "the socket-request channel".into(),
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: the kernel just returned these descriptors and nothing else owns them.
    let (parent_end, init_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The init's end never blocks: pid 1 must go on reaping and forwarding signals whatever
    // the parent does; an answer that does not fit ends the serving instead.
    // SAFETY: fcntl setting a status flag on a descriptor this function owns.
    if unsafe { libc::fcntl(init_end.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
        return Err(SetupError::Listener {
            address: "the socket-request channel".into(),
            source: io::Error::last_os_error(),
        });
    }
    Ok((parent_end, init_end))
}

/// In the init: answers every request waiting on `channel` (one byte each, `4` or `6`) with
/// one unconnected TCP socket of that family made here, in the sandbox's network namespace,
/// so that the parent can connect to a server the command runs. The sockets carry no
/// privilege: the parent could not make them only because sockets belong to the namespace
/// they are created in. A request that cannot be met is answered with a record of zero
/// descriptors, so the parent never waits in vain. Returns false once the parent has hung up
/// (or the channel failed): then there is nothing more to serve.
pub fn serve_socket_requests(channel: &OwnedFd) -> bool {
    let mut requests = [0u8; 64];
    // SAFETY: recv into a valid buffer, without blocking.
    let n = unsafe {
        libc::recv(
            channel.as_raw_fd(),
            requests.as_mut_ptr().cast(),
            requests.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n == 0 {
        return false;
    }
    if n < 0 {
        let err = io::Error::last_os_error();
        return matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
        );
    }
    use std::os::fd::AsFd;
    for &request in &requests[..n as usize] {
        let family = match request {
            4 => libc::AF_INET,
            6 => libc::AF_INET6,
            _ => -1,
        };
        // SAFETY: socket with constant arguments (an unknown family fails with EAFNOSUPPORT).
        let raw = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        let sent = if raw < 0 {
            status::write_record(
                channel.as_fd(),
                &StatusRecord::Fds {
                    tag: TAG_SOCKET.into(),
                    count: 0,
                },
            )
        } else {
            // SAFETY: the kernel just returned this descriptor and nothing else owns it.
            let sock = unsafe { OwnedFd::from_raw_fd(raw) };
            status::send_fds(channel.as_fd(), TAG_SOCKET, &[sock.as_fd()])
        };
        if sent.is_err() {
            return false;
        }
    }
    true
}
