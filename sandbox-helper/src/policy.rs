//! [`SandboxPolicy`]: the wire contract between the parent runtime and the helper.
//!
//! The parent resolves a user's profile into this plain, absolute, canonical form and hands it
//! to the helper as JSON; the helper validates it before it touches anything.
//!
//! ```
//! use cordon_sandbox::policy::SandboxPolicy;
//!
//! let json = r#"{
//!   "version": 1,
//!   "filesystem": { "read": ["/"], "write": ["/tmp"] },
//!   "network": { "mode": "denied", "unix_sockets": "deny" },
//!   "enforcement": { "missing_layer": "refuse", "carve_outs": "report" }
//! }"#;
//! let policy = SandboxPolicy::from_json(json).unwrap();
//! policy.validate().unwrap();
//! assert!(policy.network.mode.is_denied());
//! ```

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The only policy version this helper understands.
pub const POLICY_VERSION: u32 = 1;

/// Environment marker set for every confined command.
pub const MARKER_SANDBOX: &str = "CORDON_SANDBOX";
/// Environment marker set when the network is denied.
pub const MARKER_NETWORK_DISABLED: &str = "CORDON_SANDBOX_NETWORK_DISABLED";

/// Everything the helper needs to confine one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxPolicy {
    /// Must equal [`POLICY_VERSION`].
    pub version: u32,
    /// Filesystem access.
    pub filesystem: FilesystemPolicy,
    /// Network and socket access.
    pub network: NetworkPolicy,
    /// What to do when something asked for cannot be enforced on this kernel.
    pub enforcement: EnforcementPolicy,
    /// Environment variables the helper sets just before `execve`. When absent the helper
    /// derives them: `CORDON_SANDBOX=1`, plus `CORDON_SANDBOX_NETWORK_DISABLED=1` when the
    /// network is denied. When present they must agree with that derivation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markers: Option<BTreeMap<String, String>>,
}

/// Filesystem access, all paths absolute and canonical.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesystemPolicy {
    /// Roots readable and executable, with everything beneath them.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Roots with every filesystem right, with everything beneath them.
    #[serde(default)]
    pub write: Vec<PathBuf>,
    /// Paths inside writable roots that must stay read-only (carve-outs).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Paths that must not be readable even though a readable root covers them (carve-outs).
    /// A writable root may lie beneath one: the mount layer hides the rest and keeps it usable.
    #[serde(default)]
    pub deny_read: Vec<PathBuf>,
    /// Device nodes (or directories of them, such as `/dev/dri`) under `/dev` that the command
    /// may open for reading and writing, on top of the minimal set every command gets. With the
    /// namespace layer they are the only other devices in its private `/dev`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<PathBuf>,
    /// The `read_only` and `deny_read` paths a person wrote themselves (in their profile or on
    /// the command line), as opposed to a preset's protected defaults: each is enforced or the
    /// run is refused, whatever `enforcement.carve_outs` says. A preset's leniency about its
    /// own defaults must never quietly relax a rule somebody wrote down; only their own
    /// `enforcement = "report"` does, and then the parent leaves this list empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<PathBuf>,
    /// The patterns of `read_only` and `deny_read` and what each expanded to when the profile
    /// was resolved (the paths are in `read_only` / `deny_read` too): for `--print-policy`, and
    /// for the receipt, which says where a pattern cannot cover paths created later.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<PatternExpansion>,
}

/// Which carve-out list a pattern belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CarveOut {
    /// `read_only`.
    ReadOnly,
    /// `deny_read`.
    DenyRead,
}

impl CarveOut {
    /// The field's name, as profiles and receipts spell it.
    pub fn name(self) -> &'static str {
        match self {
            CarveOut::ReadOnly => "read_only",
            CarveOut::DenyRead => "deny_read",
        }
    }
}

/// One glob pattern of a carve-out list, expanded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternExpansion {
    /// The list it came from.
    pub field: CarveOut,
    /// The pattern as written (`**/.env`, `:cwd/secrets/**`).
    pub pattern: String,
    /// The directories it was matched beneath.
    pub roots: Vec<PathBuf>,
    /// What it matched (a directory stands for everything beneath it).
    pub matched: Vec<PathBuf>,
    /// True when the carve-out also covers matching paths created after resolution: the
    /// pattern only names everything beneath literal directories (`secrets/**`, `.claude/*`),
    /// and those directories are carved out whole. False for patterns on names (`**/.env`):
    /// mounts and Landlock cover paths, not names, so a match made later is not covered.
    pub covers_new_paths: bool,
}

/// Network and socket access.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Whether non-unix sockets may be created at all.
    pub mode: NetworkMode,
    /// Whether the command may reach unix sockets that live outside the sandbox.
    #[serde(default)]
    pub unix_sockets: UnixSockets,
    /// When set (network enabled only), TCP `connect` is allowed to these ports and no other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_connect: Option<Vec<u16>>,
    /// When set (network enabled only), TCP `bind` is allowed to these ports and no other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_bind: Option<Vec<u16>>,
    /// `proxy` mode: the hosts cordon's proxy lets the command reach (`pypi.org`,
    /// `*.pythonhosted.org` for subdomains only, `github.com:443`). The parent enforces them;
    /// the helper only checks their form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// `proxy` mode: hosts refused even when an `allow` entry matches (deny wins).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// `loopback` and `proxy` modes: ports of services on the host's loopback that the command
    /// reaches at the same port on its own 127.0.0.1 and ::1, and no other host port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_ports: Vec<u16>,
    /// `loopback` and `proxy` modes: servers the command runs on these ports of its own
    /// loopback, reachable from the host's loopback while the run lasts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publish: Vec<PublishedPort>,
    /// With unix sockets denied and the network denied: the unix sockets (absolute paths,
    /// canonical) the command may still connect to, and no other. The parent's observer
    /// brokers each such connection (seccomp refuses every `connect` in this mode, so each one
    /// reaches the observer, which connects the command's own socket to the listed path
    /// itself); the helper only checks their form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unix_socket_allow: Vec<PathBuf>,
}

/// A port published from the sandbox to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedPort {
    /// The port the command's server listens on, inside.
    pub port: u16,
    /// The port on the host's 127.0.0.1 (and ::1) that reaches it.
    pub host_port: u16,
}

impl Default for NetworkPolicy {
    /// No network: the mode every preset starts from.
    fn default() -> NetworkPolicy {
        NetworkPolicy {
            mode: NetworkMode::Denied,
            unix_sockets: UnixSockets::Deny,
            tcp_connect: None,
            tcp_bind: None,
            allow: Vec::new(),
            deny: Vec::new(),
            host_ports: Vec::new(),
            publish: Vec::new(),
            unix_socket_allow: Vec::new(),
        }
    }
}

/// The port of cordon's proxy on the sandbox's own 127.0.0.1 and ::1 in `proxy` mode (HTTP,
/// `CONNECT` and SOCKS5 on one port). Fixed: the namespace is private, so nothing else holds it.
pub const PROXY_PORT: u16 = 3128;

/// Whether the command gets a network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Only `AF_UNIX` sockets can be created.
    Denied,
    /// A private network namespace with only `lo` up: sockets of every family can be created,
    /// and reach the command's own processes on 127.0.0.1 and ::1, nothing outside. Needs the
    /// namespace layer.
    Loopback,
    /// Like `loopback`, and the only way out is cordon's filtering proxy on 127.0.0.1 and ::1
    /// port [`PROXY_PORT`], which the helper opens in the namespace and hands to the parent.
    /// Needs the namespace layer.
    Proxy,
    /// Sockets of every family can be created.
    Enabled,
}

impl NetworkMode {
    /// True for [`NetworkMode::Denied`].
    pub fn is_denied(self) -> bool {
        self == NetworkMode::Denied
    }

    /// The name used in policies and profiles.
    pub fn name(self) -> &'static str {
        match self {
            NetworkMode::Denied => "denied",
            NetworkMode::Loopback => "loopback",
            NetworkMode::Proxy => "proxy",
            NetworkMode::Enabled => "enabled",
        }
    }

    /// True for the modes that put the command in a private network namespace.
    pub fn is_private(self) -> bool {
        matches!(self, NetworkMode::Loopback | NetworkMode::Proxy)
    }
}

/// Whether unix sockets outside the sandbox are reachable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnixSockets {
    /// Connecting to (or sending datagrams at) a named unix socket is refused.
    #[default]
    Deny,
    /// No restriction on unix sockets.
    Allow,
}

/// What to do when a requested restriction cannot be enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Do not run the command (setup error, exit 125).
    Refuse,
    /// Run the command and list what was not enforced in the status record.
    Report,
}

/// Enforcement choices, split so that a preset can accept missing carve-outs while still
/// refusing to run without its main layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnforcementPolicy {
    /// A layer or part of a layer (Landlock, one of its rights, a scope, port rules) that the
    /// kernel cannot provide.
    pub missing_layer: Enforcement,
    /// `read_only` and `deny_read` carve-outs, which need the mount-namespace layer.
    pub carve_outs: Enforcement,
    // `network.mode = "loopback"` needs the namespace layer too; without it, `missing_layer`
    // decides (refuse, or report and run with the network denied instead).
}

impl EnforcementPolicy {
    /// Refuse everything that cannot be enforced.
    pub const STRICT: EnforcementPolicy = EnforcementPolicy {
        missing_layer: Enforcement::Refuse,
        carve_outs: Enforcement::Refuse,
    };
}

/// Why a policy was rejected. Every message names the offending field and value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// A unix-socket allow-list outside the mode it works in.
    #[error("network.unix_sockets as a list needs network.mode = \"denied\" (every connect then reaches cordon, which connects the listed sockets itself); in other modes use \"allow\" or \"deny\"")]
    UnixSocketListNeedsDenied,
    /// A unix-socket allow-list entry that is not absolute.
    #[error("network.unix_sockets entry {0:?} is not an absolute path")]
    RelativeUnixSocket(PathBuf),
    /// The JSON did not parse or had an unknown field.
    #[error("policy is not valid JSON for version {POLICY_VERSION}: {0}")]
    Syntax(String),
    /// The version is not the one this helper speaks.
    #[error("policy version {found} is not supported (this helper understands version {POLICY_VERSION})")]
    Version {
        /// The version in the policy.
        found: u32,
    },
    /// A path is relative, empty, has `.`/`..` components or a NUL byte.
    #[error("{field}: {path:?} is not an absolute, canonical path")]
    NotCanonical {
        /// The policy field.
        field: &'static str,
        /// The offending path.
        path: PathBuf,
    },
    /// Two entries say opposite things about the same place.
    #[error("{path:?} is in both {first} and {second}, which contradict each other")]
    Contradiction {
        /// The path.
        path: PathBuf,
        /// One field.
        first: &'static str,
        /// The other field.
        second: &'static str,
    },
    /// A writable root lies under a path that must not be read. Only `/` is refused: hiding
    /// the whole tree leaves nothing to run; below that the mount layer keeps the root usable.
    #[error("writable root {write:?} is under deny_read path {deny:?}")]
    WritableUnderDenyRead {
        /// The writable root.
        write: PathBuf,
        /// The deny-read path above it.
        deny: PathBuf,
    },
    /// A read-only carve-out outside every writable root means nothing.
    #[error("read_only path {0:?} is not inside any writable root, so it is already read-only")]
    ReadOnlyOutsideWritable(PathBuf),
    /// Port lists only make sense with a network.
    #[error("network.{0} needs network.mode = \"enabled\" or \"loopback\"")]
    PortsWithoutNetwork(&'static str),
    /// A `filesystem.devices` entry is not a path below `/dev`.
    #[error("filesystem.devices: {0:?} is not below /dev")]
    DeviceOutsideDev(PathBuf),
    /// `filesystem.required` names a path that is in neither `read_only` nor `deny_read`.
    #[error("filesystem.required: {0:?} is in neither read_only nor deny_read")]
    RequiredNotACarveOut(PathBuf),
    /// A marker name or value is not acceptable.
    #[error("markers: {0}")]
    Marker(String),
    /// An `allow`/`deny` entry is not `HOST`, `*.DOMAIN` or either with `:PORT`.
    #[error("network.{field}: {entry:?} is not a host name, an IP address or *.domain, with an optional :port ({why})")]
    HostPattern {
        /// `allow` or `deny`.
        field: &'static str,
        /// The entry.
        entry: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A network field that only one mode uses.
    #[error("network.{field} needs network.mode = {needs}")]
    NetworkFieldWithoutMode {
        /// The field.
        field: &'static str,
        /// The modes that use it.
        needs: &'static str,
    },
    /// A port that cannot be used (0, the proxy's own port, or listed twice).
    #[error("network.{field}: port {port} {why}")]
    BadPort {
        /// The field.
        field: &'static str,
        /// The port.
        port: u16,
        /// Why.
        why: &'static str,
    },
}

impl SandboxPolicy {
    /// Parses the JSON wire form (unknown fields are errors). Call [`SandboxPolicy::validate`]
    /// before using the result.
    pub fn from_json(text: &str) -> Result<SandboxPolicy, PolicyError> {
        serde_json::from_str(text).map_err(|e| PolicyError::Syntax(single_line(&e.to_string())))
    }

    /// The compact JSON wire form, exactly what the helper's `--policy` accepts.
    pub fn to_json(&self) -> String {
        // Serialising plain data with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Checks everything that can be checked without touching the system.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.version != POLICY_VERSION {
            return Err(PolicyError::Version {
                found: self.version,
            });
        }
        let fs = &self.filesystem;
        for (field, paths) in [
            ("filesystem.read", &fs.read),
            ("filesystem.write", &fs.write),
            ("filesystem.read_only", &fs.read_only),
            ("filesystem.deny_read", &fs.deny_read),
            ("filesystem.devices", &fs.devices),
        ] {
            for path in paths {
                check_canonical(field, path)?;
            }
        }
        for path in &fs.write {
            if fs.deny_read.contains(path) {
                return Err(contradiction(
                    path,
                    "filesystem.write",
                    "filesystem.deny_read",
                ));
            }
            if fs.read_only.contains(path) {
                return Err(contradiction(
                    path,
                    "filesystem.write",
                    "filesystem.read_only",
                ));
            }
            if let Some(deny) = fs.deny_read.iter().find(|d| d.as_os_str() == "/") {
                return Err(PolicyError::WritableUnderDenyRead {
                    write: path.clone(),
                    deny: deny.clone(),
                });
            }
        }
        for path in &fs.read {
            if fs.deny_read.contains(path) {
                return Err(contradiction(
                    path,
                    "filesystem.read",
                    "filesystem.deny_read",
                ));
            }
        }
        for path in &fs.read_only {
            if fs.deny_read.contains(path) {
                return Err(contradiction(
                    path,
                    "filesystem.read_only",
                    "filesystem.deny_read",
                ));
            }
            if !fs.write.iter().any(|w| path.starts_with(w)) {
                return Err(PolicyError::ReadOnlyOutsideWritable(path.clone()));
            }
        }
        for path in &fs.required {
            check_canonical("filesystem.required", path)?;
            if !fs.read_only.contains(path) && !fs.deny_read.contains(path) {
                return Err(PolicyError::RequiredNotACarveOut(path.clone()));
            }
        }
        for path in &fs.devices {
            if !path.starts_with("/dev") || path.as_os_str() == "/dev" {
                return Err(PolicyError::DeviceOutsideDev(path.clone()));
            }
        }
        if self.network.mode.is_denied() {
            if self.network.tcp_connect.is_some() {
                return Err(PolicyError::PortsWithoutNetwork("tcp_connect"));
            }
            if self.network.tcp_bind.is_some() {
                return Err(PolicyError::PortsWithoutNetwork("tcp_bind"));
            }
        }
        self.check_private_network()?;
        if !self.network.unix_socket_allow.is_empty() {
            if !self.network.mode.is_denied() || self.network.unix_sockets != UnixSockets::Deny {
                return Err(PolicyError::UnixSocketListNeedsDenied);
            }
            if let Some(path) = self
                .network
                .unix_socket_allow
                .iter()
                .find(|p| !p.is_absolute())
            {
                return Err(PolicyError::RelativeUnixSocket(path.clone()));
            }
        }
        if let Some(markers) = &self.markers {
            self.check_markers(markers)?;
        }
        Ok(())
    }

    fn check_private_network(&self) -> Result<(), PolicyError> {
        let n = &self.network;
        // Landlock's connect list would cut the command off from the proxy itself; in proxy
        // mode the allow list decides where connections go.
        if n.mode == NetworkMode::Proxy && n.tcp_connect.is_some() {
            return Err(PolicyError::PortsWithoutNetwork("tcp_connect"));
        }
        if n.mode != NetworkMode::Proxy {
            for (field, list) in [("allow", &n.allow), ("deny", &n.deny)] {
                if !list.is_empty() {
                    return Err(PolicyError::NetworkFieldWithoutMode {
                        field,
                        needs: "\"proxy\"",
                    });
                }
            }
        }
        for (field, empty) in [
            ("host_ports", n.host_ports.is_empty()),
            ("publish", n.publish.is_empty()),
        ] {
            if !n.mode.is_private() && !empty {
                return Err(PolicyError::NetworkFieldWithoutMode {
                    field,
                    needs: "\"loopback\" or \"proxy\"",
                });
            }
        }
        for (i, p) in n.publish.iter().enumerate() {
            let why = if p.port == 0 || p.host_port == 0 {
                Some("is not a port")
            } else if p.port == PROXY_PORT && n.mode == NetworkMode::Proxy {
                Some("is where cordon's proxy listens inside the sandbox")
            } else if n.host_ports.contains(&p.port) {
                Some("is also a host port, which the sandbox's side of it already holds")
            } else if n.publish[..i]
                .iter()
                .any(|q| q.host_port == p.host_port || q.port == p.port)
            {
                Some("is published twice")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(PolicyError::BadPort {
                    field: "publish",
                    port: p.port,
                    why,
                });
            }
        }
        for (field, list) in [("allow", &n.allow), ("deny", &n.deny)] {
            for entry in list {
                check_host_pattern(entry).map_err(|why| PolicyError::HostPattern {
                    field,
                    entry: entry.clone(),
                    why,
                })?;
            }
        }
        for (i, &port) in n.host_ports.iter().enumerate() {
            let why = if port == 0 {
                Some("is not a port")
            } else if port == PROXY_PORT && n.mode == NetworkMode::Proxy {
                Some("is where cordon's proxy listens inside the sandbox")
            } else if n.host_ports[..i].contains(&port) {
                Some("is listed twice")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(PolicyError::BadPort {
                    field: "host_ports",
                    port,
                    why,
                });
            }
        }
        Ok(())
    }

    /// The environment markers the helper sets before `execve`.
    pub fn effective_markers(&self) -> BTreeMap<String, String> {
        if let Some(markers) = &self.markers {
            return markers.clone();
        }
        derived_markers(self.network.mode)
    }

    fn check_markers(&self, markers: &BTreeMap<String, String>) -> Result<(), PolicyError> {
        for (name, value) in markers {
            let valid_name = name.starts_with("CORDON_")
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !valid_name {
                return Err(PolicyError::Marker(format!(
                    "{name:?} is not a CORDON_* variable name of A-Z, 0-9 and _"
                )));
            }
            if value.contains('\0') {
                return Err(PolicyError::Marker(format!(
                    "{name} has a NUL byte in its value"
                )));
            }
        }
        for (name, value) in derived_markers(self.network.mode) {
            if markers.get(&name) != Some(&value) {
                return Err(PolicyError::Marker(format!(
                    "{name}={value} is required by this policy's network mode"
                )));
            }
        }
        if !self.network.mode.is_denied() && markers.contains_key(MARKER_NETWORK_DISABLED) {
            return Err(PolicyError::Marker(format!(
                "{MARKER_NETWORK_DISABLED} contradicts network.mode = \"{}\"",
                self.network.mode.name()
            )));
        }
        Ok(())
    }
}

/// Parser messages quote the user's text (an unknown key, say), which may hold newlines or
/// other control characters; error messages must stay on one line, so those are escaped.
pub fn single_line(message: &str) -> String {
    message
        .trim_end()
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

fn derived_markers(mode: NetworkMode) -> BTreeMap<String, String> {
    let mut markers = BTreeMap::from([(MARKER_SANDBOX.to_owned(), "1".to_owned())]);
    if mode.is_denied() {
        markers.insert(MARKER_NETWORK_DISABLED.to_owned(), "1".to_owned());
    }
    markers
}

/// Checks the form of a `network.allow`/`network.deny` entry: `HOST`, `*.DOMAIN`, an IPv4
/// address or a bracketed IPv6 address, each with an optional `:PORT`. Returns why not.
pub fn check_host_pattern(entry: &str) -> Result<(), &'static str> {
    split_host_pattern(entry).map(|_| ())
}

/// `(host, wildcard, port)` of an entry whose form [`check_host_pattern`] accepts; the host is
/// lower-case, without brackets or a trailing dot, and without the `*.` of a wildcard.
pub fn split_host_pattern(entry: &str) -> Result<(String, bool, Option<u16>), &'static str> {
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address needs its closing ]")?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or("only :port may follow ]")?),
        };
        inside
            .parse::<std::net::Ipv6Addr>()
            .map_err(|_| "not an IPv6 address inside [ ]")?;
        (inside.to_owned(), port)
    } else {
        match entry.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (entry.to_owned(), None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err("the port must be a number from 1 to 65535"),
            Ok(n) => Some(n),
        },
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok((host, false, port));
    }
    let (name, wildcard) = match host.strip_prefix("*.") {
        Some(rest) => (rest.to_owned(), true),
        None => (host, false),
    };
    if name.is_empty() || name.len() > 253 {
        return Err("the host name is empty or too long");
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !name.split('.').all(label_ok) {
        return Err("a host name is labels of letters, digits, - and _ separated by dots; * only as a leading *.");
    }
    Ok((name, wildcard, port))
}

fn contradiction(path: &Path, first: &'static str, second: &'static str) -> PolicyError {
    PolicyError::Contradiction {
        path: path.to_path_buf(),
        first,
        second,
    }
}

fn check_canonical(field: &'static str, path: &Path) -> Result<(), PolicyError> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let canonical = path.is_absolute()
        && !bytes.contains(&0)
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        // `components()` hides "/./" and trailing slashes; the wire form must not have them.
        && !bytes.windows(2).any(|w| w == b"//")
        && !bytes.ends_with(b"/.")
        && (bytes == b"/" || !bytes.ends_with(b"/"))
        && !bytes.windows(3).any(|w| w == b"/./");
    if canonical {
        Ok(())
    } else {
        Err(PolicyError::NotCanonical {
            field,
            path: path.to_path_buf(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> SandboxPolicy {
        SandboxPolicy {
            version: POLICY_VERSION,
            filesystem: FilesystemPolicy {
                read: vec!["/".into()],
                write: vec!["/work".into()],
                read_only: vec!["/work/.git".into()],
                deny_read: vec![],
                devices: vec![],
                required: vec![],
                patterns: vec![],
            },
            network: NetworkPolicy {
                mode: NetworkMode::Denied,
                unix_sockets: UnixSockets::Deny,
                tcp_connect: None,
                tcp_bind: None,
                ..NetworkPolicy::default()
            },
            enforcement: EnforcementPolicy::STRICT,
            markers: None,
        }
    }

    #[test]
    fn round_trips_through_json() {
        let policy = base();
        assert_eq!(SandboxPolicy::from_json(&policy.to_json()).unwrap(), policy);
    }

    #[test]
    fn unknown_field_is_named() {
        let json = base()
            .to_json()
            .replace("\"version\"", "\"colour\":1,\"version\"");
        let err = SandboxPolicy::from_json(&json).unwrap_err().to_string();
        assert!(err.contains("unknown field `colour`"), "{err}");
    }

    #[test]
    fn rejects_relative_and_dotted_paths() {
        for bad in ["work", "/work/../etc", "/work/./x", "/work/", "//work", ""] {
            let mut policy = base();
            policy.filesystem.write = vec![bad.into()];
            policy.filesystem.read_only.clear();
            assert!(
                matches!(policy.validate(), Err(PolicyError::NotCanonical { .. })),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn rejects_contradictions() {
        let mut policy = base();
        policy.filesystem.deny_read = vec!["/work".into()];
        assert!(matches!(
            policy.validate(),
            Err(PolicyError::Contradiction { .. })
        ));

        // Below a hidden directory a writable root stays usable; only hiding `/` is refused.
        let mut policy = base();
        policy.filesystem.deny_read = vec!["/work-parent".into()];
        policy.filesystem.write = vec!["/work-parent/work".into()];
        policy.filesystem.read_only = vec![];
        assert_eq!(policy.validate(), Ok(()));
        let mut policy = base();
        policy.filesystem.deny_read = vec!["/".into()];
        policy.filesystem.read = vec!["/usr".into()];
        assert_eq!(
            policy.validate(),
            Err(PolicyError::WritableUnderDenyRead {
                write: "/work".into(),
                deny: "/".into()
            })
        );

        let mut policy = base();
        policy.filesystem.read_only = vec!["/etc".into()];
        assert_eq!(
            policy.validate(),
            Err(PolicyError::ReadOnlyOutsideWritable("/etc".into()))
        );
    }

    #[test]
    fn required_paths_must_be_carve_outs() {
        let mut policy = base();
        policy.filesystem.required = vec!["/work/.git".into()];
        assert_eq!(policy.validate(), Ok(()));
        policy.filesystem.required = vec!["/work/src".into()];
        assert_eq!(
            policy.validate(),
            Err(PolicyError::RequiredNotACarveOut("/work/src".into()))
        );
        // Old policies without the field still parse: nothing is required.
        let json = base().to_json();
        assert!(
            !json.contains("required") && !json.contains("patterns"),
            "{json}"
        );
        assert!(SandboxPolicy::from_json(&json)
            .unwrap()
            .filesystem
            .required
            .is_empty());
    }

    #[test]
    fn ports_need_network() {
        let mut policy = base();
        policy.network.tcp_connect = Some(vec![443]);
        assert_eq!(
            policy.validate(),
            Err(PolicyError::PortsWithoutNetwork("tcp_connect"))
        );
        policy.network.mode = NetworkMode::Enabled;
        assert_eq!(policy.validate(), Ok(()));
        policy.network.mode = NetworkMode::Loopback;
        assert_eq!(policy.validate(), Ok(()));
    }

    #[test]
    fn proxy_fields_need_their_mode_and_a_valid_form() {
        let mut policy = base();
        policy.network.allow = vec!["pypi.org".into()];
        assert!(matches!(
            policy.validate(),
            Err(PolicyError::NetworkFieldWithoutMode { field: "allow", .. })
        ));
        policy.network.mode = NetworkMode::Proxy;
        for good in [
            "pypi.org",
            "*.pythonhosted.org",
            "github.com:443",
            "127.0.0.1:8080",
            "[::1]:80",
            "Example.COM.",
        ] {
            policy.network.allow = vec![good.into()];
            assert_eq!(policy.validate(), Ok(()), "{good}");
        }
        for bad in [
            "",
            "*",
            "a.*.com",
            "pypi.org:0",
            "pypi.org:99999",
            "host:",
            "[::1",
            "-a.com",
            "a b.com",
            "*.",
            "https://pypi.org",
        ] {
            policy.network.allow = vec![bad.into()];
            assert!(
                matches!(policy.validate(), Err(PolicyError::HostPattern { .. })),
                "{bad:?} accepted"
            );
        }
        policy.network.allow.clear();
        policy.network.tcp_connect = Some(vec![443]);
        assert_eq!(
            policy.validate(),
            Err(PolicyError::PortsWithoutNetwork("tcp_connect"))
        );
        policy.network.tcp_connect = None;
        policy.network.host_ports = vec![5432, 5432];
        assert!(matches!(
            policy.validate(),
            Err(PolicyError::BadPort { port: 5432, .. })
        ));
        policy.network.host_ports = vec![PROXY_PORT];
        assert!(matches!(
            policy.validate(),
            Err(PolicyError::BadPort { .. })
        ));
        policy.network.host_ports = vec![5432];
        assert_eq!(policy.validate(), Ok(()));
        policy.network.mode = NetworkMode::Enabled;
        assert!(matches!(
            policy.validate(),
            Err(PolicyError::NetworkFieldWithoutMode {
                field: "host_ports",
                ..
            })
        ));
        assert_eq!(
            split_host_pattern("*.Foo.org:443"),
            Ok(("foo.org".into(), true, Some(443)))
        );
    }

    #[test]
    fn devices_must_be_below_dev() {
        let mut policy = base();
        policy.filesystem.devices = vec!["/dev/dri".into(), "/dev/nvidia0".into()];
        assert_eq!(policy.validate(), Ok(()));
        for bad in ["/dev", "/devices/x", "/etc/passwd"] {
            policy.filesystem.devices = vec![bad.into()];
            assert_eq!(
                policy.validate(),
                Err(PolicyError::DeviceOutsideDev(bad.into()))
            );
        }
        policy.filesystem.devices = vec!["dev/null".into()];
        assert!(matches!(
            policy.validate(),
            Err(PolicyError::NotCanonical { .. })
        ));
    }

    #[test]
    fn markers_must_agree_with_network_mode() {
        let mut policy = base();
        policy.markers = Some(BTreeMap::from([("CORDON_SANDBOX".into(), "1".into())]));
        assert!(matches!(policy.validate(), Err(PolicyError::Marker(_))));
        policy.markers = Some(derived_markers(NetworkMode::Denied));
        assert_eq!(policy.validate(), Ok(()));
        policy.markers = Some(BTreeMap::from([("PATH".into(), "/evil".into())]));
        assert!(matches!(policy.validate(), Err(PolicyError::Marker(_))));
    }
}
