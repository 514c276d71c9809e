//! The managed network of `network.mode = "proxy"` and the host ports of `loopback`/`proxy`.
//!
//! The helper opens the listening sockets inside the command's private network namespace
//! (127.0.0.1 and ::1, port [`PROXY_PORT`] for the proxy, each host port at its own number)
//! and hands them to this process over the status socket. This process accepts on them and
//! connects out from the host's namespace: no bridge process sits in between, so there is
//! nothing to die, and when this process stops serving (the run is over, or it died) a
//! connection inside finds nobody behind the listener and nothing else: the namespace has no
//! other way out.
//!
//! The proxy speaks HTTP (absolute-form requests, forwarded with `Connection: close`), HTTPS
//! through `CONNECT` (bytes are relayed, TLS is not terminated), and SOCKS5 (no
//! authentication, `CONNECT` only), all on one port: the first byte tells SOCKS5 (5) from
//! HTTP. Names are resolved here, outside the sandbox; see [`rules`] for what is refused
//! after resolution.
//!
//! Tests reach made-up names through a resolver hook: [`Resolver::with_hosts`], and for the
//! CLI the environment variable [`HOSTS_FILE_ENV`] naming a file in `/etc/hosts` format that
//! this process (never the command) reads. The machine's `/etc/hosts` is never edited.

mod approval;
mod proxy;
pub mod rules;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Arc, Mutex};

use cordon_sandbox::policy::{NetworkMode, PublishedPort, SandboxPolicy, PROXY_PORT};
use cordon_sandbox::status::{TAG_HOST_PORT, TAG_PROXY, TAG_PUBLISH};
use tokio_util::sync::CancellationToken;

pub use approval::{NetworkApprovalRequest, NetworkApprovals};

use crate::classify::Denial;
use rules::HostRules;

/// Environment variable naming a hosts file (`ADDRESS NAME...` per line) that the proxy
/// consults before the system resolver. For tests and for pinning names; read by the parent.
pub const HOSTS_FILE_ENV: &str = "CORDON_PROXY_HOSTS";

/// Options of the managed network that are not part of the policy (they are the caller's,
/// not the command's).
#[derive(Debug, Clone, Default)]
pub struct NetworkOptions {
    /// Where hosts that no `allow` entry covers are routed while the command runs. Without
    /// one they are refused.
    pub approvals: Option<NetworkApprovals>,
    /// How names are resolved.
    pub resolver: Resolver,
}

/// Name resolution for the proxy: fixed answers first, then the system's resolver.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    fixed: Arc<HashMap<String, Vec<IpAddr>>>,
}

impl Resolver {
    /// Answers `name` with `addresses` (for tests, or to pin a name), before the system's
    /// resolver is asked. Names are compared lower-case.
    pub fn with_hosts(entries: impl IntoIterator<Item = (String, Vec<IpAddr>)>) -> Resolver {
        Resolver {
            fixed: Arc::new(
                entries
                    .into_iter()
                    .map(|(name, addrs)| (name.to_ascii_lowercase(), addrs))
                    .collect(),
            ),
        }
    }

    /// Reads a file in `/etc/hosts` format.
    pub fn from_hosts_file(path: &Path) -> io::Result<Resolver> {
        let text = std::fs::read_to_string(path)?;
        let mut entries: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace();
            let Some(address) = words.next() else {
                continue;
            };
            let address: IpAddr = address.parse().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {address:?} is not an IP address", path.display()),
                )
            })?;
            for name in words {
                entries
                    .entry(name.to_ascii_lowercase())
                    .or_default()
                    .push(address);
            }
        }
        Ok(Resolver::with_hosts(entries))
    }

    /// The resolver the CLI uses: [`HOSTS_FILE_ENV`] when set, else the system's.
    pub fn from_env() -> io::Result<Resolver> {
        match std::env::var_os(HOSTS_FILE_ENV) {
            Some(path) => Resolver::from_hosts_file(Path::new(&path)),
            None => Ok(Resolver::default()),
        }
    }

    /// The addresses of `host` (normalised) at `port`.
    pub async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        if let Some(addrs) = self.fixed.get(host) {
            return Ok(addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
        }
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// The proxy's address inside the sandbox, as the command's environment names it.
pub fn proxy_url() -> String {
    format!("http://127.0.0.1:{PROXY_PORT}")
}

/// Names that are always the command's own namespace: the proxy itself, the command's own
/// servers, and the host ports, which appear there at their own numbers. Nothing in this list
/// is a host the command could reach through the proxy instead, so a client that skips the
/// proxy for them loses nothing.
pub const NO_PROXY: &str = "localhost,127.0.0.1,::1";

/// What a proxy variable is set to.
#[derive(Debug, Clone, Copy)]
enum ProxyValue {
    /// `http://127.0.0.1:3128`: HTTP, and HTTPS through CONNECT.
    Http,
    /// `socks5h://127.0.0.1:3128`: SOCKS5 with names resolved by the proxy.
    Socks,
    /// [`NO_PROXY`].
    Bypass,
    /// `1`, for a switch.
    On,
}

/// The variables the command gets in `proxy` mode, each with the tools that read it. Set over
/// whatever the caller's environment had: a `NO_PROXY=*` inherited from the host would
/// otherwise send every client straight at a namespace with no way out.
const PROXY_ENV: &[(&str, ProxyValue, &str)] = &[
    (
        "HTTP_PROXY",
        ProxyValue::Http,
        "curl, wget, Python (urllib, requests, pip), Go, Ruby, cargo, git",
    ),
    (
        "http_proxy",
        ProxyValue::Http,
        "curl reads only the lower-case one for http://",
    ),
    (
        "HTTPS_PROXY",
        ProxyValue::Http,
        "the same tools for https:// (CONNECT)",
    ),
    (
        "https_proxy",
        ProxyValue::Http,
        "the lower-case form, which wget and older tools read",
    ),
    (
        "ALL_PROXY",
        ProxyValue::Socks,
        "curl for other schemes; socks5h so names resolve outside",
    ),
    ("all_proxy", ProxyValue::Socks, "the lower-case form"),
    (
        "NO_PROXY",
        ProxyValue::Bypass,
        "only the namespace's own loopback",
    ),
    ("no_proxy", ProxyValue::Bypass, "the lower-case form"),
    (
        "npm_config_proxy",
        ProxyValue::Http,
        "npm reads its own config, not HTTP_PROXY (older releases)",
    ),
    (
        "npm_config_https_proxy",
        ProxyValue::Http,
        "npm's https registry traffic",
    ),
    (
        "YARN_HTTP_PROXY",
        ProxyValue::Http,
        "Yarn 2+ ignores HTTP_PROXY",
    ),
    ("YARN_HTTPS_PROXY", ProxyValue::Http, "Yarn 2+ for https"),
    (
        "CARGO_HTTP_PROXY",
        ProxyValue::Http,
        "cargo's own setting, above a proxy in ~/.cargo/config",
    ),
    (
        "PIP_PROXY",
        ProxyValue::Http,
        "pip's own setting, above a proxy in pip.conf",
    ),
    (
        "NODE_USE_ENV_PROXY",
        ProxyValue::On,
        "Node's fetch and http honour HTTP_PROXY only with it (Node 22.21+, 24)",
    ),
];

/// The proxy variables as `(name, value)`.
pub fn proxy_env() -> Vec<(&'static str, String)> {
    PROXY_ENV
        .iter()
        .map(|&(name, value, _why)| {
            let value = match value {
                ProxyValue::Http => proxy_url(),
                ProxyValue::Socks => format!("socks5h://127.0.0.1:{PROXY_PORT}"),
                ProxyValue::Bypass => NO_PROXY.to_owned(),
                ProxyValue::On => "1".to_owned(),
            };
            (name, value)
        })
        .collect()
}

/// The network service of one run: what it serves, and the denials it recorded.
pub(crate) struct Service {
    ctx: Arc<proxy::Context>,
    stop: CancellationToken,
    runtime: tokio::runtime::Handle,
    /// Published ports' host listeners, bound before the spawn (a port in use rejects the run
    /// before anything runs) and served once the sandbox's socket-request channel arrives.
    published: Mutex<Vec<(PublishedPort, std::net::TcpListener)>>,
}

impl Service {
    /// The service for `policy`, or `None` when the policy needs none. An `allow`/`deny`
    /// entry that cannot be served is the error (the run is rejected).
    pub(crate) fn for_policy(
        policy: &SandboxPolicy,
        options: &NetworkOptions,
    ) -> Result<Option<Service>, String> {
        let n = &policy.network;
        if n.mode != NetworkMode::Proxy && n.host_ports.is_empty() && n.publish.is_empty() {
            return Ok(None);
        }
        let rules = HostRules::new(&n.allow, &n.deny)?;
        let mut published = Vec::new();
        for p in &n.publish {
            // The host's loopback only: publishing is for a browser or test runner on this
            // machine, not for the network the host is on.
            let v4 = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, p.host_port))
                .map_err(|e| {
                    format!(
                        "network.publish: cannot listen on 127.0.0.1:{} on the host: {e}",
                        p.host_port
                    )
                })?;
            published.push((*p, v4));
            if let Ok(v6) =
                std::net::TcpListener::bind((std::net::Ipv6Addr::LOCALHOST, p.host_port))
            {
                published.push((*p, v6));
            }
        }
        Ok(Some(Service {
            ctx: Arc::new(proxy::Context {
                rules,
                resolver: options.resolver.clone(),
                approvals: options.approvals.clone(),
                denials: Mutex::new(Vec::new()),
            }),
            stop: CancellationToken::new(),
            runtime: tokio::runtime::Handle::current(),
            published: Mutex::new(published),
        }))
    }

    /// Starts serving the listeners the helper sent with `tag`. Callable from any thread.
    /// Listeners with a tag this service does not know are closed: nobody would serve them.
    pub(crate) fn serve(&self, tag: &str, fds: Vec<OwnedFd>) {
        if tag == TAG_PUBLISH {
            let Some(channel) = fds.into_iter().next() else {
                return;
            };
            let channel = Arc::new(proxy::SocketChannel::new(channel));
            let published = match self.published.lock() {
                Ok(mut guard) => std::mem::take(&mut *guard),
                Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
            };
            for (port, listener) in published {
                let role = proxy::Role::Published(port.port, Arc::clone(&channel));
                let (ctx, stop) = (Arc::clone(&self.ctx), self.stop.clone());
                self.runtime
                    .spawn(proxy::accept_loop(ctx, listener, role, stop));
            }
            return;
        }
        let role = if tag == TAG_PROXY {
            proxy::Role::Proxy
        } else if let Some(port) = tag
            .strip_prefix(TAG_HOST_PORT)
            .and_then(|p| p.parse::<u16>().ok())
        {
            proxy::Role::HostPort(port)
        } else {
            return;
        };
        for fd in fds {
            let listener = std::net::TcpListener::from(fd);
            let (ctx, stop) = (Arc::clone(&self.ctx), self.stop.clone());
            self.runtime
                .spawn(proxy::accept_loop(ctx, listener, role.clone(), stop));
        }
    }

    /// Stops serving: every listener and open connection is closed.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
        // Host listeners never served (the sandbox failed before sending its channel).
        if let Ok(mut published) = self.published.lock() {
            published.clear();
        }
    }

    /// Stops serving and returns the denials recorded, sorted, each once.
    pub(crate) fn finish(&self) -> Vec<Denial> {
        self.stop();
        let mut denials = match self.ctx.denials.lock() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        denials.sort();
        denials.dedup();
        denials
    }
}

/// The names [`env_for`] sets under `policy`: a shell snapshot must not replay its own values
/// over them.
pub fn env_names(policy: &SandboxPolicy) -> Vec<OsString> {
    env_for(policy).into_iter().map(|(name, _)| name).collect()
}

/// The command's environment changes under `policy`: the proxy variables in `proxy` mode,
/// nothing otherwise.
pub(crate) fn env_for(policy: &SandboxPolicy) -> Vec<(OsString, OsString)> {
    if policy.network.mode != NetworkMode::Proxy {
        return Vec::new();
    }
    proxy_env()
        .into_iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_names_only_the_sandboxs_own_loopback() {
        let env = proxy_env();
        for name in ["NO_PROXY", "no_proxy"] {
            let value = &env.iter().find(|(n, _)| *n == name).unwrap().1;
            assert_eq!(value, "localhost,127.0.0.1,::1");
        }
        for name in [
            "HTTP_PROXY",
            "https_proxy",
            "npm_config_proxy",
            "YARN_HTTPS_PROXY",
        ] {
            let value = &env.iter().find(|(n, _)| *n == name).unwrap().1;
            assert_eq!(value, "http://127.0.0.1:3128", "{name}");
        }
        assert!(env.contains(&("ALL_PROXY", "socks5h://127.0.0.1:3128".to_owned())));
    }

    #[tokio::test]
    async fn the_hosts_file_answers_before_the_system_resolver() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        std::fs::write(
            &path,
            "# test names\n127.0.0.1 Up.test alias.test\n::1 up.test\n\n",
        )
        .unwrap();
        let resolver = Resolver::from_hosts_file(&path).unwrap();
        let addrs = resolver.resolve("up.test", 80).await.unwrap();
        assert_eq!(
            addrs,
            vec!["127.0.0.1:80".parse().unwrap(), "[::1]:80".parse().unwrap()]
        );
        assert_eq!(
            resolver.resolve("alias.test", 8).await.unwrap(),
            vec!["127.0.0.1:8".parse().unwrap()]
        );
        assert_eq!(
            resolver.resolve("10.0.0.1", 9).await.unwrap(),
            vec!["10.0.0.1:9".parse().unwrap()]
        );
        std::fs::write(&path, "not-an-address up.test\n").unwrap();
        let err = Resolver::from_hosts_file(&path).unwrap_err().to_string();
        assert!(
            err.contains("\"not-an-address\" is not an IP address"),
            "{err}"
        );
    }
}
