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
}

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
            NetworkMode::Enabled => "enabled",
        }
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
        if let Some(markers) = &self.markers {
            self.check_markers(markers)?;
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
