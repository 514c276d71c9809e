//! Serving the listeners: the filtering proxy (HTTP, CONNECT, SOCKS5) and host ports.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::rules::{non_public, normalise_host, HostRules, Verdict};
use super::{NetworkApprovals, Resolver};
use crate::classify::{Denial, EvidenceKind, Operation};

/// The largest request head (request line and headers) the proxy reads.
const MAX_HEAD: usize = 64 * 1024;
/// How long a client may take to send its request head or SOCKS5 greeting.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to an upstream address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Relay buffer per direction: large enough that a download is not limited by it.
const RELAY_BUFFER: usize = 256 * 1024;

/// What one run's proxy knows.
pub(super) struct Context {
    pub(super) rules: HostRules,
    pub(super) resolver: Resolver,
    pub(super) approvals: Option<NetworkApprovals>,
    pub(super) denials: Mutex<Vec<Denial>>,
}

/// What a listener is for.
#[derive(Clone)]
pub(super) enum Role {
    /// cordon's proxy.
    Proxy,
    /// The host's loopback at this port, same address family as the listener.
    HostPort(u16),
    /// A host listener for a port published from the sandbox: connections go to this port on
    /// the sandbox's loopback, through sockets its init makes there.
    Published(u16, Arc<SocketChannel>),
}

/// The parent's end of the sandbox init's socket-request channel, one request at a time.
pub(super) struct SocketChannel {
    channel: Mutex<Option<std::os::fd::OwnedFd>>,
}

impl SocketChannel {
    pub(super) fn new(channel: std::os::fd::OwnedFd) -> SocketChannel {
        SocketChannel {
            channel: Mutex::new(Some(channel)),
        }
    }

    /// An unconnected TCP socket in the sandbox's namespace. A channel that failed once is
    /// dropped: a late answer must never be taken for the next request's.
    fn socket(&self, v6: bool) -> std::io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        let mut guard = self
            .channel
            .lock()
            .map_err(|_| std::io::Error::other("socket channel poisoned"))?;
        let Some(channel) = guard.as_ref() else {
            return Err(std::io::Error::other(
                "the sandbox's socket channel failed earlier",
            ));
        };
        let answer = cordon_sandbox::status::request_socket(channel.as_fd(), v6);
        if answer.is_err() {
            *guard = None;
        }
        answer
    }
}

/// Connects to `port` on the sandbox's own loopback: 127.0.0.1 first, then ::1 (a dev
/// server bound to `localhost` may hold only one of them).
fn connect_inside(channel: &SocketChannel, port: u16) -> std::io::Result<std::net::TcpStream> {
    let mut last = None;
    for (v6, ip) in [
        (false, IpAddr::V4(Ipv4Addr::LOCALHOST)),
        (true, IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ] {
        let socket = channel.socket(v6)?;
        let address = nix::sys::socket::SockaddrStorage::from(SocketAddr::new(ip, port));
        match nix::sys::socket::connect(std::os::fd::AsRawFd::as_raw_fd(&socket), &address) {
            Ok(()) => return Ok(std::net::TcpStream::from(socket)),
            Err(e) => last = Some(std::io::Error::from(e)),
        }
    }
    Err(last.unwrap_or_else(|| std::io::ErrorKind::ConnectionRefused.into()))
}

/// A published port: the host's client is relayed to the command's server inside; when
/// nothing listens there, the client's connection is closed, as a closed port would be.
async fn serve_published(mut client: TcpStream, port: u16, channel: Arc<SocketChannel>) {
    let inside = tokio::task::spawn_blocking(move || connect_inside(&channel, port)).await;
    let Ok(Ok(inside)) = inside else { return };
    let upstream = inside
        .set_nonblocking(true)
        .and_then(|()| TcpStream::from_std(inside));
    if let Ok(mut upstream) = upstream {
        let _ = relay(&mut client, &mut upstream).await;
    }
}

/// Accepts until `stop`; each connection is served on its own task, also ended by `stop`.
pub(super) async fn accept_loop(
    ctx: Arc<Context>,
    listener: std::net::TcpListener,
    role: Role,
    stop: CancellationToken,
) {
    let family_v6 = listener.local_addr().map(|a| a.is_ipv6()).unwrap_or(false);
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| TcpListener::from_std(listener))
    {
        Ok(listener) => listener,
        Err(e) => {
            tracing::warn!("cannot serve a sandbox listener: {e}");
            return;
        }
    };
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else {
            // EMFILE and friends: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let (ctx, stop, role) = (Arc::clone(&ctx), stop.clone(), role.clone());
        tokio::spawn(async move {
            let served = async {
                match role {
                    Role::Proxy => serve_proxy(&ctx, client).await,
                    Role::HostPort(port) => serve_host_port(client, port, family_v6).await,
                    Role::Published(port, channel) => serve_published(client, port, channel).await,
                }
            };
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = served => {}
            }
        });
    }
}

/// A host port: the same port on the host's loopback, in the listener's family, and nothing
/// else. A refused connect closes the client's connection, as a closed port would.
async fn serve_host_port(mut client: TcpStream, port: u16, v6: bool) {
    let ip = if v6 {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    };
    let Ok(Ok(mut upstream)) = tokio::time::timeout(
        CONNECT_TIMEOUT,
        TcpStream::connect(SocketAddr::new(ip, port)),
    )
    .await
    else {
        return;
    };
    let _ = relay(&mut client, &mut upstream).await;
}

async fn relay(a: &mut TcpStream, b: &mut TcpStream) -> std::io::Result<(u64, u64)> {
    let _ = a.set_nodelay(true);
    let _ = b.set_nodelay(true);
    tokio::io::copy_bidirectional_with_sizes(a, b, RELAY_BUFFER, RELAY_BUFFER).await
}

async fn serve_proxy(ctx: &Context, client: TcpStream) {
    let mut first = [0u8; 1];
    match tokio::time::timeout(HEAD_TIMEOUT, client.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == 5 => socks5(ctx, client).await,
        Ok(Ok(1)) => http(ctx, client).await,
        _ => {}
    }
}

/// Why a connection was not made.
struct Refusal {
    /// A denial by the rules (recorded, 403), or a failure (bad request, unknown host,
    /// unreachable: 400/502, not a denial).
    denied: bool,
    status: u16,
    message: String,
}

impl Refusal {
    fn failure(status: u16, message: String) -> Refusal {
        Refusal {
            denied: false,
            status,
            message,
        }
    }
}

impl Context {
    /// Decides on `raw_host:port` and connects when allowed. Every refusal by the rules is
    /// recorded as a denial.
    async fn open(&self, raw_host: &str, port: u16) -> Result<TcpStream, Refusal> {
        let Some(host) = normalise_host(raw_host) else {
            return Err(Refusal::failure(
                400,
                format!("{raw_host:?} is not a host name or address"),
            ));
        };
        if port == 0 {
            return Err(Refusal::failure(400, "port 0 cannot be reached".into()));
        }
        // As an allow entry writes it: an IPv6 address in brackets.
        let named = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let target = format!("{named}:{port}");
        let exact = match self.rules.verdict(&host, port) {
            Verdict::Allowed { exact } => exact,
            Verdict::Denied { entry } => {
                return Err(self.deny(
                    &target,
                    format!("{host} matches network.deny entry {entry:?} (deny wins over allow)"),
                    format!("removing {entry:?} from network.deny"),
                ))
            }
            Verdict::Unlisted => match &self.approvals {
                // Granted, the approval is an exact `host:port` entry: the approver was shown
                // that name and port, as a person writing an exact entry names them.
                Some(approvals) if approvals.decide(&host, port).await => true,
                Some(_) => {
                    return Err(self.deny(
                        &target,
                        format!("{target} is not in network.allow, and the approver refused it"),
                        format!("--allow-domain {named}"),
                    ))
                }
                None => {
                    return Err(self.deny(
                        &target,
                        format!("{target} is not in network.allow"),
                        format!("--allow-domain {named}"),
                    ))
                }
            },
        };
        let addrs = self
            .resolver
            .resolve(&host, port)
            .await
            .map_err(|e| Refusal::failure(502, format!("cannot resolve {host}: {e}")))?;
        // Only addresses the entry may reach, checked here and connected to as checked (no
        // second lookup a rebinding name could answer differently).
        let mut refused_because = None;
        let permitted: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|a| match non_public(a.ip()) {
                Some(why) if !exact => {
                    refused_because.get_or_insert((a.ip(), why));
                    false
                }
                _ => true,
            })
            .collect();
        if permitted.is_empty() {
            return Err(match refused_because {
                Some((ip, why)) => self.deny(
                    &target,
                    format!("{host} resolves to {ip}, which is {why}; only an allow entry naming the host exactly reaches such an address"),
                    format!("--allow-domain {target}"),
                ),
                None => Refusal::failure(502, format!("{host} has no address")),
            });
        }
        let mut last = None;
        for addr in permitted {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    tracing::info!("proxy: {target} connected to {addr}");
                    return Ok(stream);
                }
                Ok(Err(e)) => last = Some(e.to_string()),
                Err(_) => last = Some("timed out".into()),
            }
        }
        Err(Refusal::failure(
            502,
            format!(
                "cannot connect to {target}: {}",
                last.unwrap_or_else(|| "no address".into())
            ),
        ))
    }

    fn deny(&self, target: &str, rule: String, allow_with: String) -> Refusal {
        let message = format!(
            "network access to {target} denied by cordon's proxy: {rule}; allow with {allow_with}"
        );
        tracing::info!("proxy: {message}");
        let denial = Denial {
            operation: Operation::Network,
            target: Some(target.to_owned()),
            rule,
            allow_with,
            evidence: EvidenceKind::Proxy,
            count: 1,
        };
        match self.denials.lock() {
            Ok(mut d) => d.push(denial),
            Err(poisoned) => poisoned.into_inner().push(denial),
        }
        Refusal {
            denied: true,
            status: 403,
            message,
        }
    }
}

/// One HTTP request: `CONNECT host:port` is relayed as bytes; an absolute-form request is
/// forwarded with its head rewritten (origin-form target, `Host` from the URL, hop-by-hop
/// and proxy headers removed, `Connection: close`), then relayed. One request per connection:
/// a client that wants another opens a new connection, as `Connection: close` tells it.
async fn http(ctx: &Context, mut client: TcpStream) {
    let Ok(Ok((head, rest))) = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await
    else {
        let _ = respond(
            &mut client,
            400,
            "cordon's proxy: incomplete or oversized request head\n",
        )
        .await;
        return;
    };
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        let _ = respond(&mut client, 400, "cordon's proxy: malformed request line\n").await;
        return;
    };
    if !version.starts_with("HTTP/1.") {
        let _ = respond(&mut client, 505, "cordon's proxy speaks HTTP/1.x\n").await;
        return;
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let Some((host, port)) = split_authority(target, None) else {
            let _ = respond(
                &mut client,
                400,
                "cordon's proxy: CONNECT needs host:port\n",
            )
            .await;
            return;
        };
        let mut upstream = match ctx.open(&host, port).await {
            Ok(upstream) => upstream,
            Err(refusal) => return refuse(&mut client, &refusal).await,
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
            || upstream.write_all(&rest).await.is_err()
        {
            return;
        }
        let _ = relay(&mut client, &mut upstream).await;
        return;
    }
    let lower = target.to_ascii_lowercase();
    let Some(after_scheme) = lower.strip_prefix("http://").map(|_| &target[7..]) else {
        let message = if lower.starts_with("https://") {
            "cordon's proxy does not terminate TLS: send https through CONNECT\n"
        } else {
            "cordon's proxy needs absolute-form requests (GET http://host/path)\n"
        };
        let _ = respond(&mut client, 400, message).await;
        return;
    };
    let (authority, path) = match after_scheme.find(['/', '?']) {
        Some(i) if after_scheme.as_bytes()[i] == b'/' => {
            (&after_scheme[..i], after_scheme[i..].to_owned())
        }
        Some(i) => (&after_scheme[..i], format!("/{}", &after_scheme[i..])),
        None => (after_scheme, "/".to_owned()),
    };
    let Some((host, port)) = split_authority(authority, Some(80)) else {
        let _ = respond(
            &mut client,
            400,
            "cordon's proxy: the URL has no usable host\n",
        )
        .await;
        return;
    };
    let mut upstream = match ctx.open(&host, port).await {
        Ok(upstream) => upstream,
        Err(refusal) => return refuse(&mut client, &refusal).await,
    };
    let mut rewritten = format!("{method} {path} {version}\r\nHost: {authority}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if matches!(
            name.as_str(),
            "host" | "connection" | "proxy-connection" | "proxy-authorization" | "keep-alive"
        ) {
            continue;
        }
        rewritten.push_str(line);
        rewritten.push_str("\r\n");
    }
    rewritten.push_str("Connection: close\r\n\r\n");
    if upstream.write_all(rewritten.as_bytes()).await.is_err()
        || upstream.write_all(&rest).await.is_err()
    {
        return;
    }
    let _ = relay(&mut client, &mut upstream).await;
}

/// `host:port` (IPv6 in brackets); `default` when the port is absent.
fn split_authority(authority: &str, default: Option<u16>) -> Option<(String, u16)> {
    // userinfo@ in a proxy URL would make the host ambiguous; refuse it.
    if authority.contains('@') {
        return None;
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default?,
    };
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// Reads up to the blank line ending the head; returns the head (without it) and whatever
/// came after it.
async fn read_head(client: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf[end + 4..].to_vec();
            buf.truncate(end);
            let head = String::from_utf8(buf)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))?;
            return Ok((head, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "head too large",
            ));
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Answers a refused HTTP request: 403 for a denial, 400/502 for a failure, with a body
/// that says why (and, for a denial, what would allow it).
async fn refuse(client: &mut TcpStream, refusal: &Refusal) {
    let body = format!("cordon: {}\n", refusal.message);
    let _ = respond(client, refusal.status, &body).await;
}

async fn respond(client: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        502 => "Bad Gateway",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

/// SOCKS5 (RFC 1928), no authentication, `CONNECT` only. Replies: 0 succeeded, 2 not allowed
/// by the ruleset (a denial), 4 host unreachable, 7 command not supported, 8 address type not
/// supported.
async fn socks5(ctx: &Context, mut client: TcpStream) {
    let request = tokio::time::timeout(HEAD_TIMEOUT, socks5_request(&mut client)).await;
    let (host, port) = match request {
        Ok(Ok(Ok(target))) => target,
        Ok(Ok(Err(code))) => {
            let _ = client.write_all(&socks5_reply(code)).await;
            return;
        }
        _ => return,
    };
    let mut upstream = match ctx.open(&host, port).await {
        Ok(upstream) => upstream,
        Err(refusal) => {
            let code = if refusal.denied { 2 } else { 4 };
            let _ = client.write_all(&socks5_reply(code)).await;
            return;
        }
    };
    if client.write_all(&socks5_reply(0)).await.is_err() {
        return;
    }
    let _ = relay(&mut client, &mut upstream).await;
}

/// The greeting and the request; `Ok(Err(code))` is a request refused with that reply code.
async fn socks5_request(client: &mut TcpStream) -> std::io::Result<Result<(String, u16), u8>> {
    let mut greeting = [0u8; 2];
    client.read_exact(&mut greeting).await?;
    let mut methods = vec![0u8; usize::from(greeting[1])];
    client.read_exact(&mut methods).await?;
    if !methods.contains(&0) {
        client.write_all(&[5, 0xff]).await?;
        return Err(std::io::ErrorKind::PermissionDenied.into());
    }
    client.write_all(&[5, 0]).await?;
    let mut header = [0u8; 4];
    client.read_exact(&mut header).await?;
    if header[0] != 5 {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    let host = match header[3] {
        1 => {
            let mut a = [0u8; 4];
            client.read_exact(&mut a).await?;
            Ipv4Addr::from(a).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            client.read_exact(&mut len).await?;
            let mut name = vec![0u8; usize::from(len[0])];
            client.read_exact(&mut name).await?;
            match String::from_utf8(name) {
                Ok(name) => name,
                Err(_) => return Ok(Err(4)),
            }
        }
        4 => {
            let mut a = [0u8; 16];
            client.read_exact(&mut a).await?;
            Ipv6Addr::from(a).to_string()
        }
        _ => return Ok(Err(8)),
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port).await?;
    if header[1] != 1 {
        return Ok(Err(7));
    }
    Ok(Ok((host, u16::from_be_bytes(port))))
}

fn socks5_reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_with_ipv6_and_defaults() {
        assert_eq!(
            split_authority("pypi.org", Some(80)),
            Some(("pypi.org".into(), 80))
        );
        assert_eq!(
            split_authority("pypi.org:8080", Some(80)),
            Some(("pypi.org".into(), 8080))
        );
        assert_eq!(
            split_authority("[::1]:443", None),
            Some(("::1".into(), 443))
        );
        assert_eq!(split_authority("pypi.org", None), None);
        assert_eq!(split_authority("user@evil.com:80", None), None);
        assert_eq!(split_authority("host:x", None), None);
    }
}
