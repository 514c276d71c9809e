//! [`PermissionProfile`]: what users write, and its resolution into a [`SandboxPolicy`].
//!
//! A profile is a preset (`read-only`, `workspace-write`, `full-access`) or a TOML/JSON file
//! that may start from a preset with `extends`. Resolution against a working directory and an
//! environment expands tokens, canonicalises paths and produces the helper's wire policy.
//!
//! ```
//! use cordon::profile::{PermissionProfile, ResolveContext};
//!
//! let profile = PermissionProfile::from_toml_str(r#"
//!     extends = "workspace-write"
//!     [filesystem]
//!     write = ["~/.cache/pip"]
//!     [network]
//!     mode = "enabled"
//! "#).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let ctx = ResolveContext::new(dir.path()).with_home(dir.path());
//! let resolved = profile.resolve(&ctx).unwrap();
//! let policy = resolved.policy.unwrap();
//! assert!(!policy.network.mode.is_denied());
//! // ~/.cache/pip does not exist, so it is left out and said so:
//! assert!(resolved.notes.iter().any(|n| n.contains(".cache/pip")));
//! ```
//!
//! Merging: lists in a file are added to the lists of the preset it extends; scalar keys
//! (`network.mode`, `enforcement`, ...) replace the preset's.
//!
//! `workspace-write` also protects a list of paths nobody has to write down (hooks, editor
//! and shell configuration read-only, credential stores hidden; see `profile/protected.rs`);
//! `[filesystem] unprotect` lifts one by name.

pub mod patterns;
mod protected;
mod trust;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use trust::{walk, PlantablePlaces, PlantedLink, Walk};

use cordon_sandbox::policy::{
    single_line, CarveOut, Enforcement, EnforcementPolicy, FilesystemPolicy, NetworkMode,
    NetworkPolicy, PatternExpansion, PublishedPort, SandboxPolicy, UnixSockets, POLICY_VERSION,
};

/// The built-in presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Read everything, write nothing but the device allow-list (`/dev/null`, ...).
    ReadOnly,
    /// Read everything; write the working directory, `/tmp` and `$TMPDIR`; no network;
    /// `.git`, `.cordon`, editor and hook configuration read-only inside writable roots, shell
    /// startup files and git's and cordon's configuration read-only, credential stores hidden
    /// (the list is in `profile/protected.rs`). The default.
    WorkspaceWrite,
    /// No sandbox at all.
    FullAccess,
}

impl Preset {
    /// Every preset, in documentation order.
    pub const ALL: [Preset; 3] = [Preset::ReadOnly, Preset::WorkspaceWrite, Preset::FullAccess];

    /// The preset's name as users write it.
    pub fn name(self) -> &'static str {
        match self {
            Preset::ReadOnly => "read-only",
            Preset::WorkspaceWrite => "workspace-write",
            Preset::FullAccess => "full-access",
        }
    }

    /// Looks a preset up by name.
    pub fn from_name(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }

    fn rules(self) -> Option<Rules> {
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        match self {
            Preset::FullAccess => None,
            Preset::ReadOnly => Some(Rules {
                read: strings(&["/"]),
                ..Rules::empty()
            }),
            Preset::WorkspaceWrite => Some(Rules {
                read: strings(&["/"]),
                write: strings(&[":cwd", ":tmp"]),
                protects: true,
                // Carve-outs need the namespace layer; without user namespaces the preset's
                // own (its protected paths) are reported, so that the default stays usable.
                // Missing layers are still refused, and so are the `read_only` and
                // `deny_read` entries a person adds (`FilesystemPolicy::required`).
                enforcement: EnforcementPolicy {
                    missing_layer: Enforcement::Refuse,
                    carve_outs: Enforcement::Report,
                },
                ..Rules::empty()
            }),
        }
    }
}

/// A profile as the user wrote it (before resolution).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionProfile {
    /// Where it came from (a preset name or a file path), for messages.
    pub origin: String,
    rules: Option<Rules>,
    /// `[limits]`: resource bounds for every command run under the profile (command-line
    /// limits may only lower them).
    pub limits: crate::exec::limits::Limits,
}

/// Sandboxed rules with unexpanded tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rules {
    read: Vec<String>,
    write: Vec<String>,
    read_only: Vec<String>,
    deny_read: Vec<String>,
    devices: Vec<String>,
    /// Whether the preset's protected paths ([`protected::PROTECTED`]) apply.
    protects: bool,
    /// Protected paths lifted by name.
    unprotect: Vec<String>,
    network: NetworkMode,
    unix_sockets: UnixSockets,
    tcp_connect: Option<Vec<u16>>,
    tcp_bind: Option<Vec<u16>>,
    /// `network.allow`, `network.deny`, `network.host_ports` (proxy and loopback modes).
    allow: Vec<String>,
    deny: Vec<String>,
    host_ports: Vec<u16>,
    publish: Vec<PublishedPort>,
    /// `network.unix_sockets` as a list: the sockets reachable with unix sockets otherwise
    /// denied (`$VAR` entries expanded from the environment at resolution).
    unix_socket_allow: Vec<String>,
    enforcement: EnforcementPolicy,
    /// `enforcement` as the person set it (their profile file or `--enforcement`), not a
    /// preset's: only this relaxes the `read_only` and `deny_read` entries they wrote.
    own_enforcement: Option<Enforcement>,
}

impl Rules {
    /// Whether `name` is a protected entry these rules have, for `unprotect`.
    fn check_unprotect(&self, origin: &str, name: &str) -> Result<(), ProfileError> {
        if self.protects && protected::find(name).is_some() {
            return Ok(());
        }
        Err(ProfileError::NotProtected {
            origin: origin.to_owned(),
            known: if self.protects {
                format!(
                    "it protects: {}",
                    protected::PROTECTED
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                "only workspace-write and profiles extending it protect paths".into()
            },
            entry: name.to_owned(),
        })
    }

    fn empty() -> Rules {
        Rules {
            read: Vec::new(),
            write: Vec::new(),
            read_only: Vec::new(),
            deny_read: Vec::new(),
            devices: Vec::new(),
            protects: false,
            unprotect: Vec::new(),
            network: NetworkMode::Denied,
            unix_sockets: UnixSockets::Deny,
            unix_socket_allow: Vec::new(),
            tcp_connect: None,
            tcp_bind: None,
            allow: Vec::new(),
            deny: Vec::new(),
            host_ports: Vec::new(),
            publish: Vec::new(),
            enforcement: EnforcementPolicy::STRICT,
            own_enforcement: None,
        }
    }

    fn set_enforcement(&mut self, e: Enforcement) {
        self.enforcement = EnforcementPolicy {
            missing_layer: e,
            carve_outs: e,
        };
        self.own_enforcement = Some(e);
    }

    /// Whether the `read_only` and `deny_read` entries written here must be enforced or
    /// refused whatever the preset's `carve_outs` says.
    fn own_rules_required(&self) -> bool {
        self.own_enforcement != Some(Enforcement::Report)
    }
}

/// The file format, TOML or JSON, with every key named.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    extends: Option<String>,
    #[serde(default)]
    filesystem: FilesystemSection,
    #[serde(default)]
    network: NetworkSection,
    enforcement: Option<Enforcement>,
    #[serde(default)]
    limits: crate::exec::limits::Limits,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilesystemSection {
    /// `allow_read` is the name sandbox-runtime's users know; a root below a `deny_read` path
    /// is readable again (the more specific rule wins).
    #[serde(default, alias = "allow_read")]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    #[serde(default)]
    read_only: Vec<String>,
    #[serde(default)]
    deny_read: Vec<String>,
    #[serde(default)]
    devices: Vec<String>,
    /// Protected paths of the preset to lift, each by its name (`~/.ssh`, `.vscode`).
    #[serde(default)]
    unprotect: Vec<String>,
}

/// `network.unix_sockets`: `"allow"`, `"deny"`, or the list of sockets allowed with the rest
/// denied (`["$SSH_AUTH_SOCK", "/var/run/docker.sock"]`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum UnixSocketsSetting {
    Mode(UnixSockets),
    List(Vec<String>),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkSection {
    mode: Option<NetworkMode>,
    unix_sockets: Option<UnixSocketsSetting>,
    tcp_connect: Option<Vec<u16>>,
    tcp_bind: Option<Vec<u16>>,
    /// Hosts the proxy lets through (`mode = "proxy"`); added to the preset's.
    #[serde(default)]
    allow: Vec<String>,
    /// Hosts the proxy refuses whatever `allow` says.
    #[serde(default)]
    deny: Vec<String>,
    /// Ports of host-loopback services the command may reach (`loopback`, `proxy`).
    #[serde(default)]
    host_ports: Vec<u16>,
    /// Ports of servers inside the sandbox reachable from the host's loopback at the same
    /// port (`loopback`, `proxy`).
    #[serde(default)]
    publish: Vec<u16>,
}

/// Why a profile could not be loaded or resolved. Messages are one line and name the problem.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A `read_only` or `deny_read` entry reaches its target through a symbolic link inside a
    /// writable root.
    #[error("{field}: {entry:?} goes through the symbolic link {link:?}, which lies inside a writable root: the command could replace the link, so the carve-out cannot be enforced; name the link's target instead, or remove the link")]
    CarveOutThroughSymlink {
        /// The profile field.
        field: &'static str,
        /// The profile entry.
        entry: String,
        /// The link.
        link: PathBuf,
    },
    /// `-p NAME` is neither a preset nor a file.
    #[error("unknown preset {0:?} (presets: read-only, workspace-write, full-access; a profile file must end in .toml or .json)")]
    UnknownPreset(String),
    /// The profile file could not be read.
    #[error("cannot read profile {path:?}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The profile path names something other than a regular file (a FIFO, a device, a
    /// directory), which cordon will not read.
    #[error("profile {path:?} is {kind}, not a regular file")]
    NotRegularFile {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The profile file is larger than [`MAX_PROFILE_BYTES`].
    #[error("profile {path:?} is larger than {} bytes", MAX_PROFILE_BYTES)]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The profile file is not UTF-8.
    #[error("profile {path:?} is not UTF-8 text")]
    NotText {
        /// The file.
        path: PathBuf,
    },
    /// The file did not parse (syntax, unknown key, wrong type).
    #[error("{origin}: {message}")]
    Parse {
        /// The file.
        origin: String,
        /// What is wrong, one line.
        message: String,
    },
    /// `extends` names something that is not a preset.
    #[error(
        "{origin}: extends = {name:?} is not a preset (read-only, workspace-write, full-access)"
    )]
    UnknownExtends {
        /// The file.
        origin: String,
        /// The value.
        name: String,
    },
    /// A file extends full-access but also sets sandbox keys.
    #[error("{0}: extends = \"full-access\" has no sandbox, so it cannot take filesystem or network keys")]
    ExtendsFullAccess(String),
    /// A path entry is relative where it must be absolute, or uses an unknown token.
    #[error("{field}: {entry:?} {problem}")]
    BadEntry {
        /// The key.
        field: &'static str,
        /// The entry.
        entry: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The working directory is not usable.
    #[error("working directory {path:?}: {source}")]
    Cwd {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A root (or the working directory) resolves through a symlink lying where a sandboxed
    /// command could have planted it, and the profile does not name the link's target itself.
    #[error("{what} {entry:?} resolves through the symlink {link:?} -> {points_to:?}, which lies inside {place:?} where a sandboxed command could have planted it; cordon does not follow it (name the target itself to grant it)")]
    PlantedLink {
        /// The key, or "working directory".
        what: &'static str,
        /// The entry as written.
        entry: String,
        /// The link.
        link: PathBuf,
        /// What the link points at.
        points_to: PathBuf,
        /// The plantable place that holds it.
        place: PathBuf,
    },
    /// `unprotect` names something the profile does not protect.
    #[error(
        "{origin}: filesystem.unprotect: {entry:?} is not protected by this profile ({known})"
    )]
    NotProtected {
        /// The profile.
        origin: String,
        /// The entry.
        entry: String,
        /// What could be lifted instead.
        known: String,
    },
    /// A protected path goes through a symbolic link that lies inside a writable root.
    #[error("protected {name}: {path:?} goes through the symbolic link {link:?}, which lies inside a writable root: the command could replace the link, so the protection cannot be enforced; remove the link, or lift the protection with [filesystem] unprotect = [{name:?}]")]
    ProtectedThroughSymlink {
        /// The protected entry's name.
        name: &'static str,
        /// The path looked at.
        path: PathBuf,
        /// The link.
        link: PathBuf,
    },
    /// A protected path is itself granted as a root.
    #[error("protected {name}: {path:?} is also granted as a root; to grant it, lift the protection with [filesystem] unprotect = [{name:?}]")]
    ProtectedIsRoot {
        /// The protected entry's name.
        name: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// `~` was used but no home directory is known.
    #[error("{field}: {entry:?} uses ~ but HOME is not set")]
    NoHome {
        /// The key.
        field: &'static str,
        /// The entry.
        entry: String,
    },
    /// A `read_only` or `deny_read` pattern is invalid, or matching it reached a bound.
    #[error(transparent)]
    Pattern(#[from] patterns::PatternError),
    /// The resolved policy is contradictory.
    #[error("profile {origin}: {source}")]
    Policy {
        /// The profile.
        origin: String,
        /// The contradiction.
        source: cordon_sandbox::policy::PolicyError,
    },
}

/// What resolution needs from the outside world.
#[derive(Debug, Clone)]
pub struct ResolveContext {
    /// The command's working directory, as given (a relative one is taken from
    /// `invoking_dir`, else from this process's directory). Resolution checks it like a root.
    pub cwd: PathBuf,
    /// The directory the user invoked cordon from, when it differs from `cwd` (`cordon run
    /// -C DIR`). An earlier run there may have written it, so links inside it are not trusted.
    pub invoking_dir: Option<PathBuf>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `$TMPDIR`.
    pub tmpdir: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (used when absolute; else `~/.config`).
    pub xdg_config_home: Option<PathBuf>,
    /// `$XDG_CACHE_HOME` (used when absolute; else `~/.cache`).
    pub xdg_cache_home: Option<PathBuf>,
    /// Whether cordon runs as root (then `/etc/shadow` and `/etc/gshadow` are hidden too).
    pub as_root: bool,
    /// How far the `read_only` and `deny_read` patterns may walk ([`patterns::PatternLimits`]).
    pub pattern_limits: patterns::PatternLimits,
}

impl ResolveContext {
    /// A context for `cwd` with `HOME` and `TMPDIR` read from this process's environment.
    pub fn new(cwd: impl Into<PathBuf>) -> ResolveContext {
        ResolveContext {
            cwd: cwd.into(),
            invoking_dir: None,
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            tmpdir: std::env::var_os("TMPDIR")
                .filter(|t| !t.is_empty())
                .map(PathBuf::from),
            xdg_config_home: std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from),
            xdg_cache_home: std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from),
            // SAFETY: geteuid cannot fail.
            as_root: unsafe { libc::geteuid() } == 0,
            pattern_limits: patterns::PatternLimits::from_env(),
        }
    }

    /// The directory a protected entry's `anchor` stands for here (`None` for
    /// [`protected::Anchor::EveryWritableRoot`], which is every writable root, and where the
    /// context has no such directory).
    fn anchor_dir(&self, anchor: protected::Anchor) -> Option<PathBuf> {
        use protected::Anchor;
        let absolute = |p: &Option<PathBuf>| p.clone().filter(|p| p.is_absolute());
        let home = || absolute(&self.home);
        match anchor {
            Anchor::EveryWritableRoot => None,
            Anchor::Home => home(),
            Anchor::ConfigHome => {
                absolute(&self.xdg_config_home).or_else(|| home().map(|h| h.join(".config")))
            }
            Anchor::CacheHome => {
                absolute(&self.xdg_cache_home).or_else(|| home().map(|h| h.join(".cache")))
            }
            Anchor::AbsoluteAsRoot => self.as_root.then(|| PathBuf::from("/")),
        }
    }

    /// The name of the protected entry that would cover `target` once `granted` is a writable
    /// root: granting the directory alone would leave the target read-only or hidden, so a
    /// suggestion must lift that entry too (`git config --global` writes `~/.gitconfig`, which
    /// `--writable ~` protects). Covered: a target at or below the entry, or a missing one the
    /// entry lies below, where the placeholder for a missing entry would go (its first missing
    /// component: `pip install --user` creating `~/.local`, under which
    /// `~/.local/share/keyrings` is protected).
    pub(crate) fn protection_once_granted(
        &self,
        target: &Path,
        granted: &Path,
    ) -> Option<&'static str> {
        protected::PROTECTED.iter().find_map(|entry| {
            let place = self.place_of(entry, Some(granted))?;
            // `PATH.lock` is how git (and others) replace PATH: written, then renamed over it,
            // which the protection of PATH refuses.
            let lock = place.file_name().is_some_and(|name| {
                let mut lock = name.to_os_string();
                lock.push(".lock");
                target == place.with_file_name(lock)
            });
            let covered = target.starts_with(&place)
                || lock
                || (place.starts_with(target) && target.symlink_metadata().is_err());
            (place.starts_with(granted) && covered).then_some(entry.name)
        })
    }

    /// The name of the protected entry that is `path` itself (`~/.gnupg`), for the entries
    /// anchored in the home or XDG directories.
    pub(crate) fn protected_entry_at(&self, path: &Path) -> Option<&'static str> {
        protected::PROTECTED
            .iter()
            .find(|entry| {
                self.place_of(entry, None)
                    .is_some_and(|place| place == path)
            })
            .map(|entry| entry.name)
    }

    /// Where `entry` protects: below `writable_root` for the entries of every writable root
    /// (none without one), in the home or XDG directories for the others; never the absolute
    /// ones, protected only where a writable root covers them, which `/` is not.
    fn place_of(
        &self,
        entry: &protected::Protected,
        writable_root: Option<&Path>,
    ) -> Option<PathBuf> {
        let base = match entry.anchor {
            protected::Anchor::EveryWritableRoot => writable_root.map(Path::to_path_buf),
            protected::Anchor::AbsoluteAsRoot => None,
            anchor => self.anchor_dir(anchor),
        }?;
        Some(base.join(entry.rest))
    }

    /// Overrides `XDG_CONFIG_HOME` and `XDG_CACHE_HOME`.
    pub fn with_xdg(
        mut self,
        config_home: Option<PathBuf>,
        cache_home: Option<PathBuf>,
    ) -> ResolveContext {
        self.xdg_config_home = config_home;
        self.xdg_cache_home = cache_home;
        self
    }

    /// Overrides `HOME`.
    pub fn with_home(mut self, home: impl Into<PathBuf>) -> ResolveContext {
        self.home = Some(home.into());
        self
    }

    /// Overrides `TMPDIR`.
    pub fn with_tmpdir(mut self, tmpdir: Option<PathBuf>) -> ResolveContext {
        self.tmpdir = tmpdir;
        self
    }

    /// Sets the directory cordon was invoked from.
    pub fn with_invoking_dir(mut self, dir: impl Into<PathBuf>) -> ResolveContext {
        self.invoking_dir = Some(dir.into());
        self
    }

    /// The working directory made absolute, without following any link.
    fn absolute_cwd(&self) -> Result<PathBuf, ProfileError> {
        if self.cwd.is_absolute() {
            return Ok(self.cwd.clone());
        }
        let base = match &self.invoking_dir {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().map_err(|source| ProfileError::Cwd {
                path: self.cwd.clone(),
                source,
            })?,
        };
        Ok(base.join(&self.cwd))
    }
}

/// The outcome of resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The working directory, canonical and checked like a root: the command must run here.
    pub cwd: PathBuf,
    /// The helper's policy; `None` means full access, no sandbox at all.
    pub policy: Option<SandboxPolicy>,
    /// Entries left out and why (missing paths, carve-outs outside writable roots).
    pub notes: Vec<String>,
}

/// Command-line adjustments applied on top of a profile.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Extra writable roots (`-w`).
    pub writable: Vec<String>,
    /// Extra readable roots (`-r`).
    pub readable: Vec<String>,
    /// `--network`.
    pub network: Option<NetworkMode>,
    /// `--allow-unix-sockets`.
    pub allow_unix_sockets: bool,
    /// `--allow-unix-socket PATH`: added to the `network.unix_sockets` list.
    pub unix_sockets: Vec<String>,
    /// Extra `read_only` entries (`--read-only`), written by the person like a profile's.
    pub read_only: Vec<String>,
    /// Extra `deny_read` entries (`--deny-read`).
    pub deny_read: Vec<String>,
    /// `--enforcement`: replaces the profile's, as the person's own choice.
    pub enforcement: Option<Enforcement>,
    /// `--allow-domain HOST[:PORT]`: added to `network.allow`.
    pub allow_domains: Vec<String>,
    /// `--allow-host-port PORT`: added to `network.host_ports`.
    pub host_ports: Vec<u16>,
    /// `--publish PORT[:HOSTPORT]`: added to `network.publish`.
    pub publish: Vec<PublishedPort>,
    /// `--unprotect NAME`: added to `filesystem.unprotect` (checked by
    /// [`PermissionProfile::check_overrides`]).
    pub unprotect: Vec<String>,
}

impl PermissionProfile {
    /// The `network.unix_sockets` list, resolved: `$VAR` (or `$VAR/rest`) from the environment
    /// and `~/` from the home directory, each made canonical. An entry whose variable is unset
    /// or whose socket does not exist now is left out with a note (there is nothing to connect
    /// to); one that is not absolute, or names something that is not a socket, is an error.
    fn unix_socket_paths(
        &self,
        rules: &Rules,
        ctx: &ResolveContext,
        notes: &mut Vec<String>,
    ) -> Result<Vec<PathBuf>, ProfileError> {
        use std::os::unix::fs::FileTypeExt;
        let field = "network.unix_sockets";
        let mut out: Vec<PathBuf> = Vec::new();
        for entry in &rules.unix_socket_allow {
            let bad = |problem| ProfileError::BadEntry {
                field,
                entry: entry.clone(),
                problem,
            };
            let path = if let Some(var) = entry.strip_prefix('$') {
                let (name, rest) = var.split_once('/').unwrap_or((var, ""));
                match std::env::var_os(name).filter(|v| !v.is_empty()) {
                    Some(value) if rest.is_empty() => PathBuf::from(value),
                    Some(value) => PathBuf::from(value).join(rest),
                    None => {
                        notes.push(format!("{field}: {entry} is not set; nothing to allow"));
                        continue;
                    }
                }
            } else if let Some(rest) = entry.strip_prefix("~/") {
                match ctx.home.as_ref().filter(|h| h.is_absolute()) {
                    Some(home) => home.join(rest),
                    None => return Err(bad("~ needs an absolute HOME")),
                }
            } else {
                PathBuf::from(entry)
            };
            if !path.is_absolute() {
                return Err(bad("a unix socket must be an absolute path"));
            }
            let canonical = match std::fs::canonicalize(&path) {
                Ok(c) => c,
                Err(_) => {
                    notes.push(format!(
                        "{field}: {entry} ({}) does not exist; nothing to allow",
                        path.display()
                    ));
                    continue;
                }
            };
            match std::fs::metadata(&canonical) {
                Ok(m) if m.file_type().is_socket() => {}
                _ => return Err(bad("names something that is not a unix socket")),
            }
            if !out.contains(&canonical) {
                out.push(canonical);
            }
        }
        Ok(out)
    }

    /// A preset.
    pub fn preset(preset: Preset) -> PermissionProfile {
        PermissionProfile {
            origin: preset.name().to_owned(),
            rules: preset.rules(),
            limits: crate::exec::limits::Limits::default(),
        }
    }

    /// The default profile, `workspace-write`.
    pub fn default_profile() -> PermissionProfile {
        PermissionProfile::preset(Preset::WorkspaceWrite)
    }

    /// A preset name, or a path to a `.toml` / `.json` file.
    pub fn load(spec: &str) -> Result<PermissionProfile, ProfileError> {
        if let Some(preset) = Preset::from_name(spec) {
            return Ok(PermissionProfile::preset(preset));
        }
        let path = Path::new(spec);
        let ext = path.extension().and_then(|e| e.to_str());
        if !matches!(ext, Some("toml") | Some("json")) {
            return Err(ProfileError::UnknownPreset(spec.to_owned()));
        }
        let text = read_profile_file(path)?;
        if ext == Some("json") {
            PermissionProfile::from_json_str_named(&text, spec)
        } else {
            PermissionProfile::from_toml_str_named(&text, spec)
        }
    }

    /// Parses TOML text.
    pub fn from_toml_str(text: &str) -> Result<PermissionProfile, ProfileError> {
        PermissionProfile::from_toml_str_named(text, "profile")
    }

    /// Parses JSON text.
    pub fn from_json_str(text: &str) -> Result<PermissionProfile, ProfileError> {
        PermissionProfile::from_json_str_named(text, "profile")
    }

    fn from_toml_str_named(text: &str, origin: &str) -> Result<PermissionProfile, ProfileError> {
        let file: ProfileFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let message = single_line(e.message());
            ProfileError::Parse {
                origin: origin.to_owned(),
                message: match line {
                    Some(line) => format!("{message} (line {line})"),
                    None => message,
                },
            }
        })?;
        PermissionProfile::from_file(file, origin)
    }

    fn from_json_str_named(text: &str, origin: &str) -> Result<PermissionProfile, ProfileError> {
        let file: ProfileFile = serde_json::from_str(text).map_err(|e| ProfileError::Parse {
            origin: origin.to_owned(),
            message: single_line(&e.to_string()),
        })?;
        PermissionProfile::from_file(file, origin)
    }

    fn from_file(file: ProfileFile, origin: &str) -> Result<PermissionProfile, ProfileError> {
        let base = match &file.extends {
            None => Some(Rules::empty()),
            Some(name) => Preset::from_name(name)
                .ok_or_else(|| ProfileError::UnknownExtends {
                    origin: origin.to_owned(),
                    name: name.clone(),
                })?
                .rules(),
        };
        let Some(mut rules) = base else {
            let fs = &file.filesystem;
            let n = &file.network;
            let sets_sandbox_keys = !(fs.read.is_empty()
                && fs.write.is_empty()
                && fs.read_only.is_empty()
                && fs.deny_read.is_empty()
                && fs.devices.is_empty()
                && fs.unprotect.is_empty())
                || n.mode.is_some()
                || n.unix_sockets.is_some()
                || n.tcp_connect.is_some()
                || n.tcp_bind.is_some()
                || !n.allow.is_empty()
                || !n.deny.is_empty()
                || !n.host_ports.is_empty()
                || !n.publish.is_empty()
                || file.enforcement.is_some();
            if sets_sandbox_keys {
                return Err(ProfileError::ExtendsFullAccess(origin.to_owned()));
            }
            return Ok(PermissionProfile {
                origin: origin.to_owned(),
                rules: None,
                limits: file.limits,
            });
        };
        rules.read.extend(file.filesystem.read);
        rules.write.extend(file.filesystem.write);
        rules.read_only.extend(file.filesystem.read_only);
        rules.deny_read.extend(file.filesystem.deny_read);
        rules.devices.extend(file.filesystem.devices);
        for name in file.filesystem.unprotect {
            rules.check_unprotect(origin, &name)?;
            if !rules.unprotect.contains(&name) {
                rules.unprotect.push(name);
            }
        }
        if let Some(mode) = file.network.mode {
            rules.network = mode;
        }
        match file.network.unix_sockets {
            Some(UnixSocketsSetting::Mode(unix)) => {
                rules.unix_sockets = unix;
                rules.unix_socket_allow.clear();
            }
            Some(UnixSocketsSetting::List(list)) => {
                rules.unix_sockets = UnixSockets::Deny;
                rules.unix_socket_allow = list;
            }
            None => {}
        }
        if file.network.tcp_connect.is_some() {
            rules.tcp_connect = file.network.tcp_connect;
        }
        if file.network.tcp_bind.is_some() {
            rules.tcp_bind = file.network.tcp_bind;
        }
        rules.allow.extend(file.network.allow);
        rules.deny.extend(file.network.deny);
        rules.host_ports.extend(file.network.host_ports);
        rules
            .publish
            .extend(file.network.publish.iter().map(|&port| PublishedPort {
                port,
                host_port: port,
            }));
        if let Some(e) = file.enforcement {
            rules.set_enforcement(e);
        }
        Ok(PermissionProfile {
            origin: origin.to_owned(),
            rules: Some(rules),
            limits: file.limits,
        })
    }

    /// True for full access (no sandbox).
    pub fn is_unsandboxed(&self) -> bool {
        self.rules.is_none()
    }

    /// Applies command-line adjustments. Full access ignores them (it already allows all).
    pub fn with_overrides(mut self, overrides: &Overrides) -> PermissionProfile {
        if let Some(rules) = &mut self.rules {
            rules.write.extend(overrides.writable.iter().cloned());
            rules.read.extend(overrides.readable.iter().cloned());
            if let Some(mode) = overrides.network {
                rules.network = mode;
            }
            if overrides.allow_unix_sockets {
                rules.unix_sockets = UnixSockets::Allow;
                rules.unix_socket_allow.clear();
            } else {
                rules
                    .unix_socket_allow
                    .extend(overrides.unix_sockets.iter().cloned());
            }
            rules.read_only.extend(overrides.read_only.iter().cloned());
            rules.deny_read.extend(overrides.deny_read.iter().cloned());
            if let Some(e) = overrides.enforcement {
                rules.set_enforcement(e);
            }
            rules.allow.extend(overrides.allow_domains.iter().cloned());
            for port in &overrides.host_ports {
                if !rules.host_ports.contains(port) {
                    rules.host_ports.push(*port);
                }
            }
            rules.publish.extend(overrides.publish.iter().copied());
            for name in &overrides.unprotect {
                if !rules.unprotect.contains(name) {
                    rules.unprotect.push(name.clone());
                }
            }
        }
        self
    }

    /// What [`with_overrides`](Self::with_overrides) cannot refuse: an `--unprotect` name that
    /// this profile does not protect.
    pub fn check_overrides(&self, overrides: &Overrides) -> Result<(), ProfileError> {
        for name in &overrides.unprotect {
            match &self.rules {
                Some(rules) => rules.check_unprotect("--unprotect", name)?,
                // Full access: nothing to lift.
                None => Rules::empty().check_unprotect("--unprotect", name)?,
            }
        }
        Ok(())
    }

    /// Resolves against `ctx` into the helper's policy.
    ///
    /// Every root and the working directory are resolved component by component; one that
    /// passes through a symlink lying where a confined command of an earlier run could have
    /// written (the working directory, `/tmp`, `$TMPDIR`, a writable root) is an error unless
    /// its target is itself a root of the same kind reached without such a link.
    pub fn resolve(&self, ctx: &ResolveContext) -> Result<Resolved, ProfileError> {
        // The same directories (the working directory's components, `/tmp`, `$HOME`) are
        // asked about once per root, plantable place and protected entry: each is asked once.
        crate::path_walk::memoized(|| self.resolve_in(ctx))
    }

    fn resolve_in(&self, ctx: &ResolveContext) -> Result<Resolved, ProfileError> {
        let lexical_cwd = ctx.absolute_cwd()?;
        let cwd_walk = walk(&lexical_cwd).map_err(|source| ProfileError::Cwd {
            path: ctx.cwd.clone(),
            source,
        })?;
        if !cwd_walk.canonical.is_dir() {
            return Err(ProfileError::Cwd {
                path: ctx.cwd.clone(),
                source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
            });
        }
        let Some(rules) = &self.rules else {
            // No sandbox: there is no grant a link could widen.
            return Ok(Resolved {
                cwd: cwd_walk.canonical,
                policy: None,
                notes: vec![
                    "full-access: no sandbox, the command runs with all of the caller's rights"
                        .into(),
                ],
            });
        };
        let mut notes = Vec::new();
        let expander = Expander {
            ctx,
            cwd: &lexical_cwd,
        };
        let places = expander.plantable_places(rules)?;

        let read = expander.existing_roots("filesystem.read", &rules.read, &mut notes)?;
        let write = expander.existing_roots("filesystem.write", &rules.write, &mut notes)?;
        let trusted_write = trusted(&write, &places);
        let trusted_any: Vec<&Path> = trusted(&read, &places)
            .into_iter()
            .chain(trusted_write.iter().copied())
            .collect();
        refuse_planted(
            "working directory",
            &ctx.cwd.to_string_lossy(),
            &cwd_walk,
            &places,
            &trusted_any,
        )?;
        for root in &write {
            refuse_planted(root.field, &root.entry, &root.walk, &places, &trusted_write)?;
        }
        for root in &read {
            refuse_planted(root.field, &root.entry, &root.walk, &places, &trusted_any)?;
        }
        let cwd = cwd_walk.canonical;
        let read = canonical_roots(read);
        let write = canonical_roots(write);

        // What the person wrote (not the preset's protected defaults), when they did not
        // relax it themselves: enforced or refused (`FilesystemPolicy::required`).
        let mut required: Vec<PathBuf> = Vec::new();
        let mut patterns = expander.expand_patterns(rules, &write)?;
        let mut read_only = Vec::new();
        for entry in &rules.read_only {
            let pattern = patterns::pattern_index(&patterns, CarveOut::ReadOnly, entry);
            let candidates = if let Some(i) = pattern {
                std::mem::take(&mut patterns[i].matched)
            } else if is_relative_entry(entry) {
                write.iter().map(|root| root.join(entry)).collect()
            } else {
                expander.expand("filesystem.read_only", entry)?
            };
            let mut added = Vec::new();
            for path in candidates {
                // The link itself is not protected by protecting its target: the command could
                // replace it with a directory of its own (a `.git` with hooks). Fail closed.
                if let Some(link) = link_inside(&path, &write) {
                    return Err(ProfileError::CarveOutThroughSymlink {
                        field: "filesystem.read_only",
                        entry: entry.clone(),
                        link,
                    });
                }
                // A path that does not exist yet is kept when the entry names one place and a
                // writable root covers it: the helper then makes an empty read-only
                // placeholder there for the run, so the command cannot create what the person
                // asked to keep read-only. A relative entry stands for a name in every
                // writable root (`/tmp` too), where placeholders would race between
                // concurrent runs as the protected defaults' would: what exists is covered.
                let Some(located) = locate(&path) else {
                    continue; // cannot tell where it would be: nothing there to protect
                };
                if !located.exists && is_relative_entry(entry) {
                    continue;
                }
                let path = located.canonical;
                // A read-only path that is itself a writable root stays in: validation
                // rejects the contradiction rather than quietly leaving it writable.
                if !write.iter().any(|w| path.starts_with(w)) {
                    if !is_relative_entry(entry) {
                        notes.push(format!(
                            "filesystem.read_only: {} is outside every writable root, so it is already read-only",
                            path.display()
                        ));
                    }
                } else {
                    added.push(path.clone());
                    if !read_only.contains(&path) {
                        required.push(path.clone());
                        read_only.push(path);
                    }
                }
            }
            if let Some(i) = pattern {
                patterns[i].matched = added;
            }
        }
        let mut deny_read = Vec::new();
        for entry in &rules.deny_read {
            let pattern = patterns::pattern_index(&patterns, CarveOut::DenyRead, entry);
            let candidates = match pattern {
                Some(i) => std::mem::take(&mut patterns[i].matched),
                None => expander.expand("filesystem.deny_read", entry)?,
            };
            let mut added = Vec::new();
            for path in candidates {
                // Hiding the target of a link the command can rewrite would let it choose what
                // the next run hides (point the link elsewhere, and the secret is readable).
                if let Some(link) = link_inside(&path, &write) {
                    return Err(ProfileError::CarveOutThroughSymlink {
                        field: "filesystem.deny_read",
                        entry: entry.clone(),
                        link,
                    });
                }
                match std::fs::canonicalize(&path) {
                    Ok(p) => {
                        added.push(p.clone());
                        if !deny_read.contains(&p) {
                            required.push(p.clone());
                            deny_read.push(p);
                        }
                    }
                    Err(_) => notes.push(format!(
                        "filesystem.deny_read: {} does not exist; nothing to hide",
                        path.display()
                    )),
                }
            }
            if let Some(i) = pattern {
                // A directory named whole that does not exist covers nothing made later.
                patterns[i].covers_new_paths &= !added.is_empty();
                patterns[i].matched = added;
            }
        }

        if rules.protects {
            let protect = Protector {
                ctx,
                read: &read,
                write: &write,
                anchors: Default::default(),
                person_hooks: Default::default(),
                directory_roots: Default::default(),
            };
            protect.apply(rules, &mut read_only, &mut deny_read, &mut notes)?;
        }
        // A carve-out below another is covered by it; left in, the layer would make the
        // directories between them mount points bound writable, over the outer carve-out.
        let covered: Vec<PathBuf> = read_only
            .iter()
            .filter(|p| read_only.iter().any(|q| q != *p && p.starts_with(q)))
            .cloned()
            .collect();
        read_only.retain(|p| !covered.contains(p));
        if rules.own_rules_required() {
            required.retain(|p| read_only.contains(p) || deny_read.contains(p));
            required.dedup();
        } else {
            required.clear();
        }

        let devices = canonical_roots(expander.existing_roots(
            "filesystem.devices",
            &rules.devices,
            &mut notes,
        )?);

        let policy = SandboxPolicy {
            version: POLICY_VERSION,
            filesystem: FilesystemPolicy {
                read,
                write,
                read_only,
                deny_read,
                devices,
                required,
                patterns,
            },
            network: NetworkPolicy {
                mode: rules.network,
                unix_sockets: rules.unix_sockets,
                tcp_connect: rules.tcp_connect.clone(),
                tcp_bind: rules.tcp_bind.clone(),
                allow: rules.allow.clone(),
                deny: rules.deny.clone(),
                host_ports: rules.host_ports.clone(),
                publish: rules.publish.clone(),
                unix_socket_allow: self.unix_socket_paths(rules, ctx, &mut notes)?,
            },
            enforcement: rules.enforcement,
            markers: None,
        };
        policy.validate().map_err(|source| ProfileError::Policy {
            origin: self.origin.clone(),
            source,
        })?;
        Ok(Resolved {
            cwd,
            policy: Some(policy),
            notes,
        })
    }
}

/// The largest profile file cordon reads. Real profiles are a few hundred bytes; the bound
/// keeps a mistaken or hostile path (a huge log, `/dev/zero` behind a link) from exhausting
/// memory.
pub const MAX_PROFILE_BYTES: u64 = 1024 * 1024;

/// Reads a profile file, refusing anything but a regular file of at most [`MAX_PROFILE_BYTES`].
/// The open is non-blocking, so a FIFO with no writer cannot hang cordon, and the type and size
/// come from the open descriptor, so a file swapped after a check cannot slip past it.
fn read_profile_file(path: &Path) -> Result<String, ProfileError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let read_error = |source| ProfileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(read_error)?;
    let file_type = file.metadata().map_err(read_error)?.file_type();
    if !file_type.is_file() {
        let kind = if file_type.is_dir() {
            "a directory"
        } else if file_type.is_fifo() {
            "a FIFO"
        } else if file_type.is_char_device() || file_type.is_block_device() {
            "a device"
        } else if file_type.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(ProfileError::NotRegularFile {
            path: path.to_path_buf(),
            kind,
        });
    }
    // The size in the metadata can change while reading (a file still being written), so the
    // bound is enforced on what is actually read: one byte past it proves it too large.
    let mut bytes = Vec::new();
    file.take(MAX_PROFILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_PROFILE_BYTES {
        return Err(ProfileError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    String::from_utf8(bytes).map_err(|_| ProfileError::NotText {
        path: path.to_path_buf(),
    })
}

/// A root entry resolved, before it is judged.
struct WalkedRoot {
    field: &'static str,
    entry: String,
    walk: Walk,
}

/// The canonical roots reached without any link a sandboxed command could have planted.
fn trusted<'a>(roots: &'a [WalkedRoot], places: &PlantablePlaces) -> Vec<&'a Path> {
    roots
        .iter()
        .filter(|r| places.first_planted(&r.walk).is_none())
        .map(|r| r.walk.canonical.as_path())
        .collect()
}

/// An error when `walk` went through a planted link, unless where it arrived is one of
/// `named`: the profile then grants that target on its own, and the link widens nothing.
fn refuse_planted(
    what: &'static str,
    entry: &str,
    walk: &Walk,
    places: &PlantablePlaces,
    named: &[&Path],
) -> Result<(), ProfileError> {
    let Some(PlantedLink {
        link,
        points_to,
        place,
    }) = places.first_planted(walk)
    else {
        return Ok(());
    };
    if named.contains(&walk.canonical.as_path()) {
        return Ok(());
    }
    Err(ProfileError::PlantedLink {
        what,
        entry: entry.to_owned(),
        link,
        points_to,
        place,
    })
}

fn canonical_roots(roots: Vec<WalkedRoot>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for root in roots {
        if !out.contains(&root.walk.canonical) {
            out.push(root.walk.canonical);
        }
    }
    out
}

fn is_relative_entry(entry: &str) -> bool {
    !entry.starts_with('/') && !entry.starts_with('~') && !entry.starts_with(':')
}

struct Expander<'a> {
    ctx: &'a ResolveContext,
    cwd: &'a Path,
}

impl Expander<'_> {
    /// Expands tokens in one entry into absolute paths (`:tmp` gives up to two).
    fn expand(&self, field: &'static str, entry: &str) -> Result<Vec<PathBuf>, ProfileError> {
        let bad = |problem| ProfileError::BadEntry {
            field,
            entry: entry.to_owned(),
            problem,
        };
        let (base, rest): (Vec<PathBuf>, &str) = if let Some(rest) = token_rest(entry, ":cwd") {
            (vec![self.cwd.to_path_buf()], rest)
        } else if let Some(rest) = token_rest(entry, ":tmp") {
            let mut bases = vec![PathBuf::from("/tmp")];
            // A relative TMPDIR is taken from the working directory, as the plantable places
            // take it, so that the root checked is the root granted.
            bases.extend(self.ctx.tmpdir.as_ref().map(|t| self.cwd.join(t)));
            (bases, rest)
        } else if let Some(rest) = token_rest(entry, "~") {
            let home = self.ctx.home.clone().ok_or_else(|| ProfileError::NoHome {
                field,
                entry: entry.to_owned(),
            })?;
            (vec![home], rest)
        } else if entry.starts_with(':') {
            return Err(bad("is not a known token (:cwd, :tmp)"));
        } else if entry.starts_with('/') {
            return Ok(vec![PathBuf::from(entry)]);
        } else {
            return Err(bad(
                "is relative; use an absolute path, ~/..., :cwd/... or :tmp (only read_only takes relative entries)",
            ));
        };
        Ok(base
            .into_iter()
            .map(|b| if rest.is_empty() { b } else { b.join(rest) })
            .collect())
    }

    /// Expands every pattern of `read_only` and `deny_read` (see [`patterns`]): a relative one
    /// beneath every writable root, an absolute one beneath its literal directory. Each
    /// directory is walked once for all the patterns beneath it. The `matched` paths are
    /// lexical here; resolution replaces them with what it keeps.
    fn expand_patterns(
        &self,
        rules: &Rules,
        write: &[PathBuf],
    ) -> Result<Vec<PatternExpansion>, ProfileError> {
        let entries = rules
            .read_only
            .iter()
            .map(|e| (CarveOut::ReadOnly, "filesystem.read_only", e))
            .chain(
                rules
                    .deny_read
                    .iter()
                    .map(|e| (CarveOut::DenyRead, "filesystem.deny_read", e)),
            )
            .filter(|(_, _, e)| patterns::is_pattern(e));
        let mut expansions: Vec<PatternExpansion> = Vec::new();
        // (directory, [(expansion, glob)]) for the patterns that need a walk.
        let mut walks: Vec<(PathBuf, Vec<(usize, &str)>)> = Vec::new();
        for (kind, field, entry) in entries {
            if patterns::pattern_index(&expansions, kind, entry).is_some() {
                continue;
            }
            let (literal, glob) = patterns::split(entry);
            let roots: Vec<PathBuf> = if literal.is_empty() || is_relative_entry(literal) {
                write
                    .iter()
                    .map(|w| {
                        if literal.is_empty() {
                            w.clone()
                        } else {
                            w.join(literal)
                        }
                    })
                    .collect()
            } else {
                self.expand(field, literal)?
            };
            let whole = patterns::names_everything_beneath(glob);
            let index = expansions.len();
            expansions.push(PatternExpansion {
                field: kind,
                pattern: entry.clone(),
                matched: if whole { roots.clone() } else { Vec::new() },
                roots: roots.clone(),
                covers_new_paths: whole,
            });
            if whole {
                continue;
            }
            for root in roots {
                match walks.iter_mut().find(|(dir, _)| *dir == root) {
                    Some((_, list)) => list.push((index, glob)),
                    None => walks.push((root, vec![(index, glob)])),
                }
            }
        }
        let mut budget = patterns::Budget::new(self.ctx.pattern_limits);
        for (dir, list) in &walks {
            let wanted: Vec<patterns::Wanted<'_>> = list
                .iter()
                .map(|&(index, glob)| {
                    let hides = expansions[index].field == CarveOut::DenyRead;
                    patterns::Wanted {
                        glob,
                        pattern: &expansions[index].pattern,
                        field: if hides {
                            "filesystem.deny_read"
                        } else {
                            "filesystem.read_only"
                        },
                        hides,
                    }
                })
                .collect();
            let found = patterns::walk(dir, &wanted, &mut budget)?;
            for (&(index, _), paths) in list.iter().zip(found) {
                expansions[index].matched.extend(paths);
            }
        }
        Ok(expansions)
    }

    /// Where a confined command of an earlier run could have written: the invoking and
    /// working directories, `/tmp`, `$TMPDIR` and every writable root as written.
    fn plantable_places(&self, rules: &Rules) -> Result<PlantablePlaces, ProfileError> {
        let mut places = PlantablePlaces::default();
        places.add(self.cwd);
        places.add(Path::new("/tmp"));
        for dir in self.ctx.invoking_dir.iter().chain(&self.ctx.tmpdir) {
            places.add(&self.cwd.join(dir));
        }
        for entry in &rules.write {
            for path in self.expand("filesystem.write", entry)? {
                places.add(&path);
            }
        }
        Ok(places)
    }

    /// Expands and resolves root entries; missing ones are left out with a note.
    fn existing_roots(
        &self,
        field: &'static str,
        entries: &[String],
        notes: &mut Vec<String>,
    ) -> Result<Vec<WalkedRoot>, ProfileError> {
        let mut roots = Vec::new();
        for entry in entries {
            for path in self.expand(field, entry)? {
                match walk(&path) {
                    Ok(walk) => roots.push(WalkedRoot {
                        field,
                        entry: entry.clone(),
                        walk,
                    }),
                    // A pattern where a root is expected would otherwise be left out quietly
                    // as a path that does not exist; a real path with such a name still works.
                    Err(_) if patterns::is_pattern(entry) => {
                        return Err(ProfileError::BadEntry {
                            field,
                            entry: entry.clone(),
                            problem: "is a glob pattern, and no such path exists; only read_only and deny_read take patterns",
                        })
                    }
                    Err(e) => notes.push(format!(
                        "{field}: {} left out: {}",
                        path.display(),
                        cordon_sandbox::confine::describe_errno(e.raw_os_error().unwrap_or(0))
                    )),
                }
            }
        }
        Ok(roots)
    }
}

/// The first symbolic link on the way to `path` that lies inside one of the writable roots
/// `write` (where a confined command could replace it), if any.
fn link_inside(path: &Path, write: &[PathBuf]) -> Option<PathBuf> {
    let mut prefix = PathBuf::new();
    for component in path.components() {
        prefix.push(component);
        let is_link = crate::path_walk::stat_mode(&prefix, false)
            .is_ok_and(crate::path_walk::is_symlink_mode);
        if !is_link {
            continue;
        }
        let location = prefix
            .parent()
            .and_then(|parent| std::fs::canonicalize(parent).ok())
            .zip(prefix.file_name())
            .map(|(parent, name)| parent.join(name));
        if let Some(location) = location.filter(|l| write.iter().any(|w| l.starts_with(w))) {
            return Some(location);
        }
    }
    None
}

/// Adds the preset's protected paths ([`protected::PROTECTED`]) to a resolved policy.
struct Protector<'a> {
    ctx: &'a ResolveContext,
    read: &'a [PathBuf],
    write: &'a [PathBuf],
    /// The walks of the directories entries are found below (`$HOME`, the XDG directories,
    /// the writable roots), each made once: most entries then cost one `statx`, not one per
    /// component of their path.
    anchors: std::cell::RefCell<Vec<(PathBuf, Option<crate::path_walk::Walk>)>>,
    /// The `core.hooksPath` values of the person's own git configuration, read once for all
    /// the `.git` entries (one per writable root).
    person_hooks: std::cell::OnceCell<Vec<String>>,
    /// The writable roots that are directories (a file root, `-w app.db`, has nothing beneath
    /// it to protect), found once for all the in-root entries.
    directory_roots: std::cell::OnceCell<Vec<PathBuf>>,
}

/// Where a protected path is, as far as the file system tells.
struct Located {
    /// Canonical; for a missing path, where it would be created.
    canonical: PathBuf,
    exists: bool,
    /// The links followed on the way.
    hops: Vec<crate::path_walk::LinkHop>,
}

impl Protector<'_> {
    fn apply(
        &self,
        rules: &Rules,
        read_only: &mut Vec<PathBuf>,
        deny_read: &mut Vec<PathBuf>,
        notes: &mut Vec<String>,
    ) -> Result<(), ProfileError> {
        for entry in protected::PROTECTED {
            if rules.unprotect.iter().any(|name| name == entry.name) {
                notes.push(format!(
                    "filesystem.unprotect: {} is not protected ({})",
                    entry.name, entry.reason
                ));
                continue;
            }
            for path in self.candidates(entry) {
                self.protect(entry, &path, read_only, deny_read)?;
                if entry.anchor == protected::Anchor::EveryWritableRoot && entry.rest == ".git" {
                    // Read only once `.git` itself is known not to be a planted link.
                    for target in self.what_git_runs(&path) {
                        self.protect(entry, &target, read_only, deny_read)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// What else git would run or read as a repository when used in the directory of
    /// `dot_git`: a `.git` file's `gitdir:` and `commondir` (worktrees, submodules), the
    /// `core.hooksPath` the repository's or the person's configuration names, and each
    /// submodule's `.git` that `.gitmodules` lists (with its pointers).
    fn what_git_runs(&self, dot_git: &Path) -> Vec<PathBuf> {
        let Some(worktree) = dot_git.parent() else {
            return Vec::new();
        };
        let pointers = git_pointers(dot_git);
        let home = self.ctx.home.clone().filter(|h| h.is_absolute());
        let mut values: Vec<String> = std::iter::once(dot_git)
            .chain(pointers.iter().map(PathBuf::as_path))
            .flat_map(|dir| config_values(&dir.join("config"), false, "core", "hookspath"))
            .collect();
        values.extend(
            self.person_hooks
                .get_or_init(|| {
                    // The person's own configuration lies outside the workspace (else it is protected
                    // itself), so a dotfile manager's link to it is followed.
                    let config_home = self
                        .ctx
                        .xdg_config_home
                        .clone()
                        .filter(|c| c.is_absolute())
                        .or_else(|| home.as_ref().map(|h| h.join(".config")));
                    home.iter()
                        .map(|h| h.join(".gitconfig"))
                        .chain(config_home.iter().map(|c| c.join("git/config")))
                        .flat_map(|config| config_values(&config, true, "core", "hookspath"))
                        .collect()
                })
                .iter()
                .cloned(),
        );
        let mut out = pointers.clone();
        for value in values {
            let hooks = match (value.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => worktree.join(&value),
            };
            out.push(hooks);
        }
        for sub in config_values(&worktree.join(".gitmodules"), false, "submodule", "path") {
            let sub = Path::new(&sub);
            if sub
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
            {
                let sub_git = worktree.join(sub).join(".git");
                out.extend(git_pointers(&sub_git));
                out.push(sub_git);
            }
        }
        out
    }

    /// The absolute paths `entry` stands for in this context.
    fn candidates(&self, entry: &protected::Protected) -> Vec<PathBuf> {
        if entry.anchor == protected::Anchor::EveryWritableRoot {
            let roots = self.directory_roots.get_or_init(|| {
                self.write
                    .iter()
                    .filter(|w| {
                        crate::path_walk::stat_mode(w, true)
                            .map_or(true, crate::path_walk::is_dir_mode)
                    })
                    .cloned()
                    .collect()
            });
            return roots.iter().map(|w| w.join(entry.rest)).collect();
        }
        self.ctx
            .anchor_dir(entry.anchor)
            .map(|b| b.join(entry.rest))
            .into_iter()
            .collect()
    }

    /// [`locate`], reusing the walk of the anchor `path` lies below.
    fn locate(&self, path: &Path) -> Option<Located> {
        use crate::path_walk::{walk as walk_path, walk_below, Mode};
        let home = self.ctx.home.clone().filter(|h| h.is_absolute());
        let anchors = home
            .iter()
            .cloned()
            .chain(self.ctx.xdg_config_home.clone().filter(|p| p.is_absolute()))
            .chain(self.ctx.xdg_cache_home.clone().filter(|p| p.is_absolute()))
            .chain(home.iter().map(|h| h.join(".config")))
            .chain(home.iter().map(|h| h.join(".cache")))
            .chain(self.write.iter().cloned());
        let Some(anchor) = anchors
            .filter(|a| path.starts_with(a) && path != a.as_path())
            .max_by_key(|a| a.as_os_str().len())
        else {
            return locate(path);
        };
        let rest = path.strip_prefix(&anchor).ok()?.to_path_buf();
        let mut cache = self.anchors.borrow_mut();
        let base = match cache.iter().find(|(a, _)| *a == anchor) {
            Some((_, walked)) => walked.clone(),
            None => {
                let walked = walk_path(&anchor, Mode::Lenient, true)
                    .ok()
                    .filter(|w| w.exists);
                cache.push((anchor, walked.clone()));
                walked
            }
        };
        drop(cache);
        let Some(base) = base else {
            return locate(path); // the anchor itself is missing: walk the whole path
        };
        let walked = walk_below(&base, &rest, Mode::Lenient, true).ok()?;
        Some(Located {
            exists: walked.exists,
            canonical: walked.canonical,
            hops: walked.hops,
        })
    }

    fn protect(
        &self,
        entry: &protected::Protected,
        path: &Path,
        read_only: &mut Vec<PathBuf>,
        deny_read: &mut Vec<PathBuf>,
    ) -> Result<(), ProfileError> {
        let Some(located) = self.locate(path) else {
            return Ok(()); // nothing there, and nothing can be created there
        };
        // Protecting a link's target leaves the link to the command, which could point it
        // at a directory of its own before the person next uses it. Fail closed.
        if let Some(hop) = located
            .hops
            .iter()
            .find(|hop| self.write.iter().any(|w| hop.link.starts_with(w)))
        {
            return Err(ProfileError::ProtectedThroughSymlink {
                name: entry.name,
                path: path.to_path_buf(),
                link: hop.link.clone(),
            });
        }
        let granted = |p: &PathBuf| self.read.contains(p) || self.write.contains(p);
        match entry.protection {
            protected::Protection::Hidden if located.exists => {
                if granted(&located.canonical) {
                    return Err(ProfileError::ProtectedIsRoot {
                        name: entry.name,
                        path: located.canonical,
                    });
                }
                if !deny_read.contains(&located.canonical) {
                    deny_read.push(located.canonical);
                }
                Ok(())
            }
            // A credential store that does not exist yet must not be created either (a new
            // `~/.ssh/config` runs its ProxyCommand): read-only, like the rest.
            protected::Protection::Hidden | protected::Protection::ReadOnly => {
                self.read_only(entry, located, read_only)
            }
        }
    }

    /// Adds a read-only carve-out when a writable root covers it (elsewhere the path is
    /// read-only already), missing or not (the namespace layer makes a placeholder for a missing
    /// one), except a missing one in a shared temporary directory.
    fn read_only(
        &self,
        entry: &protected::Protected,
        located: Located,
        read_only: &mut Vec<PathBuf>,
    ) -> Result<(), ProfileError> {
        let Some(root) = self
            .write
            .iter()
            .filter(|w| located.canonical.starts_with(w))
            .max_by_key(|w| w.as_os_str().len())
        else {
            return Ok(());
        };
        if &located.canonical == root {
            return Err(ProfileError::ProtectedIsRoot {
                name: entry.name,
                path: located.canonical,
            });
        }
        // A protected path that does not exist stays a carve-out: the namespace layer puts a
        // placeholder there for the run (shared by concurrent runs in one workspace, removed
        // by the last of them, taken over from a run that was killed), so the command cannot
        // create it. Not in a shared temporary directory (`/tmp`): a placeholder there would
        // keep every other user of the machine from creating that name, and nobody runs git
        // or an editor in `/tmp` itself on the strength of what appears there.
        if !located.exists && is_shared_temporary(root) {
            return Ok(());
        }
        // Nor where nobody can create a file (`-w /proc/sys/vm`): there is nothing to protect,
        // and no placeholder could be made.
        if !located.exists && is_kernel_file_system(root) {
            return Ok(());
        }
        if !read_only.contains(&located.canonical) {
            read_only.push(located.canonical);
        }
        Ok(())
    }
}

/// A directory anyone may create entries in, each keeping their own (`/tmp`, `/var/tmp`,
/// `/dev/shm`): world-writable with the sticky bit.
fn is_shared_temporary(dir: &Path) -> bool {
    crate::path_walk::stat_mode(dir, true)
        .is_ok_and(|mode| crate::path_walk::is_dir_mode(mode) && mode & 0o1002 == 0o1002)
}

/// Whether `dir` lies on procfs or sysfs, where the kernel alone makes the entries: no
/// process, root included, can create a file, a directory or a link there.
fn is_kernel_file_system(dir: &Path) -> bool {
    use nix::sys::statfs::{statfs, PROC_SUPER_MAGIC, SYSFS_MAGIC};
    statfs(dir).is_ok_and(|fs| [PROC_SUPER_MAGIC, SYSFS_MAGIC].contains(&fs.filesystem_type()))
}

/// Resolves `path` following links (a missing part taken as it is); `None` when it cannot be
/// told where it is.
fn locate(path: &Path) -> Option<Located> {
    use crate::path_walk::{walk as walk_path, Mode};
    let walked = walk_path(path, Mode::Lenient, true).ok()?;
    Some(Located {
        exists: walked.exists,
        canonical: walked.canonical,
        hops: walked.hops,
    })
}

/// The directories a `.git` file points git at: its `gitdir:` and that directory's
/// `commondir` (a worktree's main repository, where hooks and config live).
fn git_pointers(dot_git: &Path) -> Vec<PathBuf> {
    let Some(dir) = dot_git.parent() else {
        return Vec::new();
    };
    let Some(gitdir) = read_pointer(dot_git, "gitdir:") else {
        return Vec::new();
    };
    let gitdir = dir.join(gitdir);
    let common = read_pointer(&gitdir.join("commondir"), "").map(|c| gitdir.join(c));
    std::iter::once(gitdir).chain(common).collect()
}

/// The values of `section.key` (both lowercase) in a git configuration file, read like
/// [`read_pointer`] reads (`follow` allows a link: files outside every writable root). A small
/// reader on purpose: running git here would run the very configuration being judged.
fn config_values(file: &Path, follow: bool, section: &str, key: &str) -> Vec<String> {
    let Some(text) = read_small_file(file, follow, 256 * 1024) else {
        return Vec::new();
    };
    let mut current = String::new();
    let mut values = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            current = header
                .split(|c: char| c == ']' || c == '"' || c.is_whitespace())
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            continue;
        }
        if current != section || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case(key) {
            let value = value.trim().trim_matches('"').trim();
            if !value.is_empty() {
                values.push(value.to_owned());
            }
        }
    }
    values
}

/// A regular file's first `limit` bytes as text, opened without blocking on a FIFO and, unless
/// `follow`, without following a link.
fn read_small_file(file: &Path, follow: bool, limit: u64) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let no_follow = if follow { 0 } else { libc::O_NOFOLLOW };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(no_follow | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(file)
        .ok()?;
    if !opened.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    opened.take(limit).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The path a small git pointer file holds after `prefix` on its first line. The file lies in
/// a writable root, so it is opened without following a link or blocking on a FIFO, must be a
/// regular file, and only its first 4 KiB are read.
fn read_pointer(file: &Path, prefix: &str) -> Option<PathBuf> {
    let text = read_small_file(file, false, 4096)?;
    let line = text.lines().next()?.strip_prefix(prefix)?.trim();
    (!line.is_empty()).then(|| PathBuf::from(line))
}

/// `entry` minus `token`, when `entry` is the token alone or the token followed by `/`.
fn token_rest<'a>(entry: &'a str, token: &str) -> Option<&'a str> {
    let rest = entry.strip_prefix(token)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/')
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn ctx(dir: &Path) -> ResolveContext {
        ResolveContext::new(dir).with_home(dir).with_tmpdir(None)
    }

    /// A context whose HOME lies outside the working directory `dir`.
    fn ctx_home_apart(dir: &Path, home: &Path) -> ResolveContext {
        let mut ctx = ResolveContext::new(dir)
            .with_home(home)
            .with_tmpdir(None)
            .with_xdg(None, None);
        ctx.as_root = false;
        ctx
    }

    #[test]
    fn workspace_write_resolves_cwd_tmp_and_carve_outs() {
        let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        fs::create_dir(dir.path().join(".git")).unwrap();
        let resolved = PermissionProfile::default_profile()
            .resolve(&ctx_home_apart(dir.path(), home.path()))
            .unwrap();
        let policy = resolved.policy.unwrap();
        let cwd = fs::canonicalize(dir.path()).unwrap();
        assert_eq!(policy.filesystem.read, vec![PathBuf::from("/")]);
        assert_eq!(
            policy.filesystem.write,
            vec![cwd.clone(), PathBuf::from("/tmp")]
        );
        // Every in-root entry, whether it exists (here only `.git`) or not (the helper makes a
        // placeholder); none in the shared /tmp, where nothing of the list exists.
        let in_root: Vec<PathBuf> = protected::PROTECTED
            .iter()
            .filter(|p| p.anchor == protected::Anchor::EveryWritableRoot)
            .map(|p| cwd.join(p.rest))
            .collect();
        assert_eq!(policy.filesystem.read_only, in_root);
        assert_eq!(policy.filesystem.deny_read, Vec::<PathBuf>::new());
        assert!(policy.network.mode.is_denied());
        assert_eq!(policy.enforcement.carve_outs, Enforcement::Report);
        assert_eq!(policy.enforcement.missing_layer, Enforcement::Refuse);
    }

    #[test]
    fn with_home_writable_existing_credentials_are_hidden_and_startup_files_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let home = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir(home.join(".ssh")).unwrap();
        fs::write(home.join(".bashrc"), "").unwrap();
        let mut ctx = ctx_home_apart(&home, &home);
        ctx.as_root = true;
        let policy = PermissionProfile::default_profile()
            .resolve(&ctx)
            .unwrap()
            .policy
            .unwrap();
        let fs_policy = &policy.filesystem;
        assert!(fs_policy.deny_read.contains(&home.join(".ssh")));
        // Missing: nothing to hide, but kept from being created (see `Protector::read_only`).
        assert!(!fs_policy.deny_read.contains(&home.join(".aws")));
        assert!(fs_policy.read_only.contains(&home.join(".aws")));
        assert!(fs_policy
            .read_only
            .contains(&home.join(".docker/config.json")));
        assert!(fs_policy.read_only.contains(&home.join(".bashrc")));
        // Outside every writable root: already read-only, only hidden.
        assert!(fs_policy.deny_read.contains(&PathBuf::from("/etc/shadow")));
        assert!(!fs_policy.read_only.iter().any(|p| p.starts_with("/etc")));
        ctx.as_root = false;
        let policy = PermissionProfile::default_profile().resolve(&ctx).unwrap();
        assert!(!policy
            .policy
            .unwrap()
            .filesystem
            .deny_read
            .contains(&PathBuf::from("/etc/shadow")));
    }

    #[test]
    fn a_git_file_protects_its_gitdir_and_common_dir_once() {
        let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let base = fs::canonicalize(dir.path()).unwrap();
        let common = base.join("main/.git");
        let gitdir = common.join("worktrees/wt");
        fs::create_dir_all(&gitdir).unwrap();
        fs::create_dir(base.join("wt")).unwrap();
        fs::write(base.join("wt/.git"), "gitdir: ../main/.git/worktrees/wt\n").unwrap();
        fs::write(gitdir.join("commondir"), "../..\n").unwrap();
        let profile = PermissionProfile::from_toml_str(&format!(
            "extends = \"workspace-write\"\n[filesystem]\nwrite = [{:?}]\n",
            base.display().to_string()
        ))
        .unwrap();
        let policy = profile
            .resolve(&ctx_home_apart(&base.join("wt"), home.path()))
            .unwrap()
            .policy
            .unwrap();
        let read_only = &policy.filesystem.read_only;
        assert!(read_only.contains(&base.join("wt/.git")));
        // The worktree's gitdir lies below the common dir, which covers it: listed once.
        assert!(read_only.contains(&common));
        assert!(!read_only.contains(&gitdir));
        // A gitdir through a link inside a writable root is refused.
        std::os::unix::fs::symlink(&common, base.join("link")).unwrap();
        fs::write(base.join("wt/.git"), "gitdir: ../link/worktrees/wt\n").unwrap();
        let err = profile
            .resolve(&ctx_home_apart(&base.join("wt"), home.path()))
            .unwrap_err();
        assert!(
            matches!(&err, ProfileError::ProtectedThroughSymlink { name: ".git", link, .. } if link == &base.join("link")),
            "{err}"
        );
    }

    #[test]
    fn unprotect_takes_protected_names_only() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(".git")).unwrap();
        fs::create_dir(dir.path().join(".cordon")).unwrap();
        let profile = PermissionProfile::from_toml_str(
            "extends = \"workspace-write\"\n[filesystem]\nunprotect = [\".git\"]\n",
        )
        .unwrap();
        let resolved = profile
            .resolve(&ctx_home_apart(dir.path(), home.path()))
            .unwrap();
        let cwd = fs::canonicalize(dir.path()).unwrap();
        let read_only = resolved.policy.unwrap().filesystem.read_only;
        assert!(!read_only.contains(&cwd.join(".git")));
        assert!(read_only.contains(&cwd.join(".cordon")));
        for (text, problem) in [
            (
                "extends = \"workspace-write\"\n[filesystem]\nunprotect = [\"~/.git\"]\n",
                "it protects: .git",
            ),
            (
                "extends = \"read-only\"\n[filesystem]\nunprotect = [\".git\"]\n",
                "only workspace-write",
            ),
            (
                "[filesystem]\nunprotect = [\".git\"]\n",
                "only workspace-write",
            ),
        ] {
            let err = PermissionProfile::from_toml_str(text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(problem) && !err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn a_protected_path_granted_as_a_root_says_how_to_lift_it() {
        let home = tempfile::tempdir().unwrap();
        let ssh = home.path().join(".ssh");
        fs::create_dir(&ssh).unwrap();
        let err = PermissionProfile::default_profile()
            .resolve(&ctx_home_apart(&ssh, home.path()))
            .unwrap_err();
        assert!(
            matches!(&err, ProfileError::ProtectedIsRoot { name: "~/.ssh", .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("unprotect = [\"~/.ssh\"]"),
            "{err}"
        );
        let lifted = PermissionProfile::from_toml_str(
            "extends = \"workspace-write\"\n[filesystem]\nunprotect = [\"~/.ssh\"]\n",
        )
        .unwrap();
        let policy = lifted
            .resolve(&ctx_home_apart(&ssh, home.path()))
            .unwrap()
            .policy
            .unwrap();
        assert_eq!(policy.filesystem.write[0], fs::canonicalize(&ssh).unwrap());
    }

    #[test]
    fn git_configuration_values_are_read_by_section_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        fs::write(
            &config,
            "[Core]\n  HooksPath = \"a b\"\n# hooksPath = commented\n[submodule \"x\"]\n\tpath = lib\n[core]\nhookspath=second\n",
        )
        .unwrap();
        assert_eq!(
            config_values(&config, false, "core", "hookspath"),
            ["a b", "second"]
        );
        assert_eq!(config_values(&config, false, "submodule", "path"), ["lib"]);
        // A link is not followed where the file lies in a writable root.
        std::os::unix::fs::symlink(&config, dir.path().join("link")).unwrap();
        let link = dir.path().join("link");
        assert!(config_values(&link, false, "core", "hookspath").is_empty());
        assert_eq!(config_values(&link, true, "core", "hookspath").len(), 2);
    }

    #[test]
    fn tmpdir_is_added_and_missing_roots_are_noted() {
        let dir = tempfile::tempdir().unwrap();
        let tmpdir = dir.path().join("mytmp");
        fs::create_dir(&tmpdir).unwrap();
        let ctx = ctx(dir.path()).with_tmpdir(Some(tmpdir.clone()));
        let profile = PermissionProfile::default_profile().with_overrides(&Overrides {
            writable: vec!["/does/not/exist".into()],
            ..Overrides::default()
        });
        let resolved = profile.resolve(&ctx).unwrap();
        let policy = resolved.policy.unwrap();
        assert!(policy
            .filesystem
            .write
            .contains(&fs::canonicalize(&tmpdir).unwrap()));
        assert_eq!(
            resolved.notes,
            vec!["filesystem.write: /does/not/exist left out: No such file or directory"]
        );
    }

    #[test]
    fn a_root_through_a_link_in_the_workspace_is_refused_unless_its_target_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let (cwd, target) = (base.join("work"), base.join("real"));
        fs::create_dir(&cwd).unwrap();
        fs::create_dir(&target).unwrap();
        std::os::unix::fs::symlink(&target, cwd.join("link")).unwrap();
        let profile = |write: &str| {
            PermissionProfile::from_toml_str(&format!(
                "extends = \"read-only\"\n[filesystem]\nwrite = [{write}]\n"
            ))
            .unwrap()
        };
        let err = profile("\":cwd/link\"").resolve(&ctx(&cwd)).unwrap_err();
        match &err {
            ProfileError::PlantedLink { link, place, .. } => {
                assert_eq!(link, &cwd.join("link"));
                assert_eq!(place, &cwd);
            }
            other => panic!("{other}"),
        }
        assert!(!err.to_string().contains('\n'));
        let named = format!("\":cwd/link\", {:?}", target.display().to_string());
        let policy = profile(&named).resolve(&ctx(&cwd)).unwrap().policy.unwrap();
        assert_eq!(policy.filesystem.write, vec![target]);
    }

    #[test]
    fn unknown_keys_are_named_on_single_line() {
        let err = PermissionProfile::from_toml_str("[filesystem]\nwrit = [\"/tmp\"]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `writ`"), "{err}");
        assert!(err.contains("line 2"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let err = PermissionProfile::from_json_str(r#"{"netwrk": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `netwrk`"), "{err}");
    }

    #[test]
    fn errors_quoting_user_text_stay_on_single_line() {
        // Found by fuzzing: a key with a newline in it.
        for err in [
            PermissionProfile::from_json_str("{\"ex\\nL\": 1}").unwrap_err(),
            PermissionProfile::from_toml_str("\"ex\\nL\" = 1\n").unwrap_err(),
        ] {
            let text = err.to_string();
            assert!(!text.contains('\n'), "{text}");
            assert!(text.contains("ex\\nL"), "{text}");
        }
    }

    #[test]
    fn relative_entries_only_in_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let profile = PermissionProfile::from_toml_str(
            "extends = \"read-only\"\n[filesystem]\nwrite = [\"build\"]\n",
        )
        .unwrap();
        let err = profile.resolve(&ctx(dir.path())).unwrap_err().to_string();
        assert!(
            err.starts_with("filesystem.write: \"build\" is relative"),
            "{err}"
        );
    }

    #[test]
    fn full_access_has_no_policy_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let resolved = PermissionProfile::preset(Preset::FullAccess)
            .resolve(&ctx(dir.path()))
            .unwrap();
        assert_eq!(resolved.policy, None);
        assert!(resolved.notes[0].contains("no sandbox"));
        assert!(matches!(
            PermissionProfile::from_toml_str(
                "extends = \"full-access\"\n[network]\nmode = \"denied\"\n"
            ),
            Err(ProfileError::ExtendsFullAccess(_))
        ));
    }

    #[test]
    fn enforcement_and_network_keys_replace_the_preset() {
        let dir = tempfile::tempdir().unwrap();
        let profile = PermissionProfile::from_toml_str(
            "extends = \"workspace-write\"\nenforcement = \"refuse\"\n[network]\nmode = \"enabled\"\nunix_sockets = \"allow\"\ntcp_connect = [443]\n",
        )
        .unwrap();
        let policy = profile.resolve(&ctx(dir.path())).unwrap().policy.unwrap();
        assert_eq!(policy.enforcement, EnforcementPolicy::STRICT);
        assert_eq!(policy.network.tcp_connect, Some(vec![443]));
        assert_eq!(policy.network.unix_sockets, UnixSockets::Allow);
    }

    #[test]
    fn a_path_both_writable_and_read_only_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let profile = PermissionProfile::from_toml_str(
            "extends = \"workspace-write\"\n[filesystem]\nread_only = [\":cwd\"]\n",
        )
        .unwrap();
        let err = profile.resolve(&ctx(dir.path())).unwrap_err().to_string();
        assert!(err.contains("contradict"), "{err}");
    }

    #[test]
    fn writable_root_under_deny_read_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let profile = PermissionProfile::from_toml_str(
            "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\":cwd\"]\n",
        )
        .unwrap();
        let err = profile.resolve(&ctx(dir.path())).unwrap_err().to_string();
        assert!(err.contains("deny_read"), "{err}");
    }

    #[test]
    fn patterns_expand_into_carve_outs_and_are_refused_where_roots_are_expected() {
        let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let cwd = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir_all(cwd.join("a/.claude")).unwrap();
        fs::write(cwd.join("a/.env"), "").unwrap();
        fs::write(cwd.join("x.pem"), "").unwrap();
        let profile = PermissionProfile::from_toml_str(
            "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\":cwd/**/.env\"]\nread_only = [\":cwd/*.pem\", \":cwd/a/.claude/**\"]\n",
        )
        .unwrap();
        let policy = profile
            .resolve(&ctx_home_apart(&cwd, home.path()))
            .unwrap()
            .policy
            .unwrap();
        let fs_policy = &policy.filesystem;
        assert_eq!(fs_policy.deny_read, vec![cwd.join("a/.env")]);
        assert!(fs_policy.read_only.contains(&cwd.join("x.pem")));
        assert!(fs_policy.read_only.contains(&cwd.join("a/.claude")));
        let covers: Vec<(&str, bool)> = fs_policy
            .patterns
            .iter()
            .map(|p| (p.pattern.as_str(), p.covers_new_paths))
            .collect();
        assert_eq!(
            covers,
            [
                (":cwd/*.pem", false),
                (":cwd/a/.claude/**", true),
                (":cwd/**/.env", false)
            ]
        );
        // Every match is the person's own rule (the preset's protected paths, placeholders for
        // the missing ones included, are not).
        for path in [cwd.join("a/.env"), cwd.join("x.pem"), cwd.join("a/.claude")] {
            assert!(fs_policy.required.contains(&path), "{path:?}");
        }
        assert!(!fs_policy.required.contains(&cwd.join(".git")));
        let err = PermissionProfile::from_toml_str(
            "extends = \"workspace-write\"\n[filesystem]\nwrite = [\":cwd/**/build\"]\n",
        )
        .unwrap()
        .resolve(&ctx_home_apart(&cwd, home.path()))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("only read_only and deny_read take patterns"),
            "{err}"
        );
    }

    #[test]
    fn unknown_preset_and_missing_file() {
        assert!(matches!(
            PermissionProfile::load("workspace"),
            Err(ProfileError::UnknownPreset(_))
        ));
        assert!(matches!(
            PermissionProfile::load("/nonexistent/p.toml"),
            Err(ProfileError::Read { .. })
        ));
    }

    /// A write whose suggested grant would still protect the target names the entry to lift:
    /// `~/.gitconfig` itself, a missing `~/.local` under which `~/.local/share/keyrings` is
    /// protected (its placeholder would take `~/.local`'s place), `.git` below a granted
    /// directory; nothing for a path no entry covers, or one outside the grant.
    #[test]
    fn the_entry_a_grant_would_protect_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let ctx = ResolveContext::new(dir.path())
            .with_home(&home)
            .with_xdg(None, None);
        let names = |target: &Path, granted: &Path| ctx.protection_once_granted(target, granted);
        assert_eq!(names(&home.join(".gitconfig"), &home), Some("~/.gitconfig"));
        assert_eq!(names(&home.join(".ssh/known_hosts"), &home), Some("~/.ssh"));
        assert_eq!(
            names(&home.join(".local"), &home),
            Some("~/.local/share/keyrings")
        );
        std::fs::create_dir(home.join(".local")).unwrap();
        assert_eq!(names(&home.join(".local/lib"), &home), None);
        let project = dir.path().join("project");
        assert_eq!(names(&project.join(".git/config"), &project), Some(".git"));
        assert_eq!(names(&project.join("src/main.rs"), &project), None);
        assert_eq!(names(&home.join(".gitconfig"), &project), None);
    }
}
