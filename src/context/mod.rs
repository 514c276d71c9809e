//! The environment context: what an agent tells its model about where commands run, as the
//! `<environment_context>` block put in front of the conversation, and only what changed
//! since the last time it was sent.
//!
//! [`EnvironmentContext`] is a projection of the session's state for the model, not the policy
//! itself: the cwd, status and shell of each environment, today's date and the timezone, the
//! network rules and the filesystem roots of the primary environment's profile. It serialises
//! to JSON (save it, and diff against it next turn) and renders deterministically:
//!
//! ```
//! use cordon::context::{ContextBuilder, EnvironmentStatus};
//!
//! let state = ContextBuilder::new()
//!     .environment("local", "/home/me/project", EnvironmentStatus::Available, Some("bash"))
//!     .date("2026-12-01")
//!     .timezone("Europe/Berlin")
//!     .build();
//! assert_eq!(
//!     state.render(),
//!     "<environment_context>\n  <cwd>/home/me/project</cwd>\n  <shell>bash</shell>\n  \
//!      <current_date>2026-12-01</current_date>\n  <timezone>Europe/Berlin</timezone>\n\
//!      </environment_context>"
//! );
//! // Nothing changed, nothing to send.
//! assert_eq!(state.render_diff(&state), None);
//! ```
//!
//! The layout: with exactly one environment and it available, `<cwd>` and `<shell>` sit
//! directly under `<environment_context>`; otherwise an `<environments>` list names each by
//! `id` and says which is `primary`. See [`EnvironmentContext::render_diff`] for what a diff
//! holds, and [`EnvironmentContext::merge_patch`] for the same change as an RFC 7386 JSON merge
//! patch.

mod clock;
mod merge_patch;
mod render;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use cordon_sandbox::SandboxPolicy;

use crate::profile::Resolved;
use crate::session::Session;

pub use clock::{local_date, local_timezone, FALLBACK_TIMEZONE};
pub use merge_patch::{apply_merge_patch, merge_patch};

/// Whether an environment can run commands yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentStatus {
    /// Ready: commands run there.
    Available,
    /// Being set up; its shell is not known yet and it is never the primary.
    Starting,
}

impl EnvironmentStatus {
    /// The name the model reads.
    pub fn name(self) -> &'static str {
        match self {
            EnvironmentStatus::Available => "available",
            EnvironmentStatus::Starting => "starting",
        }
    }
}

/// One environment as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// Its working directory.
    pub cwd: String,
    /// Available or starting.
    pub status: EnvironmentStatus,
    /// The shell's name, known only once the environment is available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// Whether commands go here unless the model names another.
    pub primary: bool,
}

/// The network rules the model is told about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkContext {
    /// `denied`, `loopback`, `proxy`, `enabled`, or `full-access` when there is no sandbox.
    pub mode: String,
    /// Hosts a proxy lets through (empty when the mode has no host list).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Hosts a proxy refuses.
    #[serde(default)]
    pub denied_hosts: Vec<String>,
}

/// Who confines the commands, as far as the filesystem goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilesystemMode {
    /// cordon confines them with the roots listed.
    Managed,
    /// No sandbox (`full-access`): every path the user can reach.
    Disabled,
    /// Something outside cordon confines them (a container, another sandbox); cordon does
    /// not know the roots.
    External,
}

impl FilesystemMode {
    /// The name the model reads.
    pub fn name(self) -> &'static str {
        match self {
            FilesystemMode::Managed => "managed",
            FilesystemMode::Disabled => "disabled",
            FilesystemMode::External => "external",
        }
    }
}

/// The primary environment's filesystem rules, projected for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesystemContext {
    /// Managed, disabled or external.
    pub mode: FilesystemMode,
    /// Readable roots.
    #[serde(default)]
    pub readable: Vec<String>,
    /// Writable roots (workspace tokens such as `:cwd` already expanded).
    #[serde(default)]
    pub writable: Vec<String>,
    /// Read-only carve-outs inside writable roots.
    #[serde(default)]
    pub read_only: Vec<String>,
    /// Hidden paths. An approval never makes these readable, so the model is told not to ask.
    #[serde(default)]
    pub hidden: Vec<String>,
}

impl FilesystemContext {
    /// The projection of a resolved profile: its roots when sandboxed, `disabled` for full
    /// access. Device allow-list entries are left out: they are plumbing, not places to work.
    pub fn from_resolved(resolved: &Resolved) -> FilesystemContext {
        FilesystemContext::from_policy(resolved.policy.as_ref())
    }

    /// The projection of a resolved policy (`None`: full access).
    pub fn from_policy(policy: Option<&SandboxPolicy>) -> FilesystemContext {
        let strings = |paths: &[std::path::PathBuf]| {
            paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        match policy {
            None => FilesystemContext {
                mode: FilesystemMode::Disabled,
                readable: Vec::new(),
                writable: Vec::new(),
                read_only: Vec::new(),
                hidden: Vec::new(),
            },
            Some(policy) => FilesystemContext {
                mode: FilesystemMode::Managed,
                readable: strings(&policy.filesystem.read),
                writable: strings(&policy.filesystem.write),
                read_only: strings(&policy.filesystem.read_only),
                hidden: strings(&policy.filesystem.deny_read),
            },
        }
    }

    /// Confinement by something outside cordon, whose roots cordon does not know.
    pub fn external() -> FilesystemContext {
        FilesystemContext {
            mode: FilesystemMode::External,
            readable: Vec::new(),
            writable: Vec::new(),
            read_only: Vec::new(),
            hidden: Vec::new(),
        }
    }
}

impl NetworkContext {
    /// The network part of a resolved profile (host lists empty: they come from a proxy's
    /// configuration, see [`NetworkContext::hosts`]).
    pub fn from_resolved(resolved: &Resolved) -> NetworkContext {
        NetworkContext::from_policy(resolved.policy.as_ref())
    }

    /// The network part of a resolved policy (`None`: full access).
    pub fn from_policy(policy: Option<&SandboxPolicy>) -> NetworkContext {
        let mode = match policy {
            Some(policy) => policy.network.mode.name(),
            None => "full-access",
        };
        NetworkContext {
            mode: mode.to_owned(),
            allowed_hosts: Vec::new(),
            denied_hosts: Vec::new(),
        }
    }

    /// Sets the host lists (kept in the order given: the proxy's rule order).
    pub fn hosts(mut self, allowed: Vec<String>, denied: Vec<String>) -> NetworkContext {
        self.allowed_hosts = allowed;
        self.denied_hosts = denied;
        self
    }
}

/// The whole projection. Environments are keyed (and rendered) by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentContext {
    /// Environments by id.
    pub environments: BTreeMap<String, Environment>,
    /// Today in the local timezone, `YYYY-MM-DD`, as of when the state was built.
    pub current_date: String,
    /// The IANA timezone name.
    pub timezone: String,
    /// The network rules, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkContext>,
    /// The primary environment's filesystem rules, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<FilesystemContext>,
}

/// Why a saved state could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// Not the JSON of an [`EnvironmentContext`].
    #[error("not a saved environment context: {0}")]
    Json(#[from] serde_json::Error),
}

impl EnvironmentContext {
    /// The state as JSON (keys in a fixed order).
    pub fn to_json(&self) -> serde_json::Value {
        // Plain data with string keys: serialisation cannot fail.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// A state saved with [`EnvironmentContext::to_json`].
    pub fn from_json(text: &str) -> Result<EnvironmentContext, ContextError> {
        Ok(serde_json::from_str(text)?)
    }

    /// The change from `previous` to `self` as an RFC 7386 JSON merge patch: applied to
    /// `previous.to_json()` with [`apply_merge_patch`] it gives `self.to_json()`. An empty
    /// object when nothing changed.
    pub fn merge_patch(&self, previous: &EnvironmentContext) -> serde_json::Value {
        merge_patch(&previous.to_json(), &self.to_json())
    }

    /// The id of the primary environment, if any.
    pub fn primary(&self) -> Option<&str> {
        self.environments
            .iter()
            .find(|(_, env)| env.primary)
            .map(|(id, _)| id.as_str())
    }

    /// True when the compact layout applies: exactly one environment, and it available.
    pub fn is_compact(&self) -> bool {
        self.environments.len() == 1
            && self
                .environments
                .values()
                .all(|env| env.status == EnvironmentStatus::Available)
    }
}

/// One environment as the caller lists it, in its selection order.
#[derive(Debug, Clone)]
struct EnvironmentEntry {
    id: String,
    cwd: String,
    status: EnvironmentStatus,
    shell: Option<String>,
    /// The environment's policy, when the caller gave it (`Some(None)`: full access).
    policy: Option<Option<SandboxPolicy>>,
}

/// Builds an [`EnvironmentContext`]: environments in the caller's selection order, the date
/// and timezone read from the system at [`ContextBuilder::build`] unless given.
#[derive(Debug, Clone, Default)]
pub struct ContextBuilder {
    entries: Vec<EnvironmentEntry>,
    date: Option<String>,
    timezone: Option<String>,
    network: Option<NetworkContext>,
    filesystem: Option<FilesystemContext>,
}

impl ContextBuilder {
    /// An empty builder.
    pub fn new() -> ContextBuilder {
        ContextBuilder::default()
    }

    /// Adds an environment. The first available one, in the order added, is the primary. A
    /// later entry for the same id replaces the earlier one, except that a starting entry never
    /// replaces an available one (a reconnect in progress does not hide a working
    /// environment). The shell of a starting environment is dropped: it is not known yet.
    pub fn environment(
        mut self,
        id: impl Into<String>,
        cwd: impl AsRef<Path>,
        status: EnvironmentStatus,
        shell: Option<&str>,
    ) -> ContextBuilder {
        let entry = EnvironmentEntry {
            id: id.into(),
            cwd: cwd.as_ref().to_string_lossy().into_owned(),
            status,
            shell: match status {
                EnvironmentStatus::Available => shell.map(str::to_owned),
                EnvironmentStatus::Starting => None,
            },
            policy: None,
        };
        match self.entries.iter_mut().find(|e| e.id == entry.id) {
            Some(existing)
                if existing.status == EnvironmentStatus::Available
                    && entry.status == EnvironmentStatus::Starting => {}
            Some(existing) => *existing = entry,
            None => self.entries.push(entry),
        }
        self
    }

    /// Adds a session as an available environment: its current cwd, and its policy, which
    /// gives the filesystem and network parts when it is the primary and they are not set.
    pub fn session(
        self,
        id: impl Into<String>,
        session: &Session,
        shell: Option<&str>,
    ) -> ContextBuilder {
        let id = id.into();
        let mut builder = self.environment(
            id.clone(),
            session.cwd(),
            EnvironmentStatus::Available,
            shell,
        );
        if let Some(entry) = builder.entries.iter_mut().find(|e| e.id == id) {
            entry.policy = Some(session.policy().cloned());
        }
        builder
    }

    /// Uses this date (`YYYY-MM-DD`) instead of today's.
    pub fn date(mut self, date: impl Into<String>) -> ContextBuilder {
        self.date = Some(date.into());
        self
    }

    /// Uses this timezone instead of the system's.
    pub fn timezone(mut self, timezone: impl Into<String>) -> ContextBuilder {
        self.timezone = Some(timezone.into());
        self
    }

    /// Sets the network rules.
    pub fn network(mut self, network: NetworkContext) -> ContextBuilder {
        self.network = Some(network);
        self
    }

    /// Sets the primary environment's filesystem projection.
    pub fn filesystem(mut self, filesystem: FilesystemContext) -> ContextBuilder {
        self.filesystem = Some(filesystem);
        self
    }

    /// The state, with the date and timezone read now when not given, and the filesystem and
    /// network parts projected from the primary's policy when not given and it is known.
    pub fn build(self) -> EnvironmentContext {
        let primary_entry = self
            .entries
            .iter()
            .find(|e| e.status == EnvironmentStatus::Available);
        let primary = primary_entry.map(|e| e.id.clone());
        let primary_policy = primary_entry.and_then(|e| e.policy.clone());
        let filesystem = self.filesystem.or_else(|| {
            primary_policy
                .as_ref()
                .map(|p| FilesystemContext::from_policy(p.as_ref()))
        });
        let network = self.network.or_else(|| {
            primary_policy
                .as_ref()
                .map(|p| NetworkContext::from_policy(p.as_ref()))
        });
        let environments = self
            .entries
            .into_iter()
            .map(|e| {
                let env = Environment {
                    primary: primary.as_deref() == Some(e.id.as_str()),
                    cwd: e.cwd,
                    status: e.status,
                    shell: e.shell,
                };
                (e.id, env)
            })
            .collect();
        EnvironmentContext {
            environments,
            current_date: self.date.unwrap_or_else(local_date),
            timezone: self.timezone.unwrap_or_else(local_timezone),
            network,
            filesystem,
        }
    }
}
