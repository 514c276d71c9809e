//! The environment a command starts with.
//!
//! Starting from the caller's environment (or an empty one), [`EnvPolicy::prepare`]:
//!
//! 1. removes every dynamic-loader variable (`LD_*`, `DYLD_*`). The helper is an ordinary
//!    dynamically linked program that runs *unconfined* until it has built the sandbox, so a
//!    `LD_PRELOAD` reaching it would run arbitrary code outside the sandbox. For the same reason
//!    they may not be put back with `set`: that is rejected, not silently ignored;
//! 2. removes `CORDON_SANDBOX*`: the helper sets the markers, and an unsandboxed command must
//!    not claim to be confined;
//! 3. unless `drop_secrets` is off, removes variables whose names look like credentials
//!    ([`looks_secret`]), except those listed in `keep`;
//! 4. applies `set`, which wins over step 3.
//!
//! The names removed (never the values) are returned, so the caller can tell the user.
//!
//! ```
//! use cordon::exec::env::EnvPolicy;
//!
//! let caller = [("PATH", "/bin"), ("OPENAI_API_KEY", "sk-..."), ("LD_PRELOAD", "/x.so")]
//!     .map(|(k, v)| (k.into(), v.into()));
//! let env = EnvPolicy::default().prepare(caller).unwrap();
//! assert_eq!(env.vars, vec![("PATH".into(), "/bin".into())]);
//! assert_eq!(env.dropped, ["LD_PRELOAD", "OPENAI_API_KEY"]);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// Where the environment starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EnvBase {
    /// The calling process's environment.
    #[default]
    Inherit,
    /// Nothing; only `set` entries.
    Empty,
}

/// How to build a command's environment. The default inherits and drops secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvPolicy {
    /// Starting point.
    pub base: EnvBase,
    /// Drop variables whose names look like credentials.
    pub drop_secrets: bool,
    /// Exact names exempt from the secret filter.
    pub keep: BTreeSet<String>,
    /// Variables to set; they win over the secret filter.
    pub set: BTreeMap<OsString, OsString>,
}

impl Default for EnvPolicy {
    fn default() -> EnvPolicy {
        EnvPolicy {
            base: EnvBase::Inherit,
            drop_secrets: true,
            keep: BTreeSet::new(),
            set: BTreeMap::new(),
        }
    }
}

/// The environment to give the command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreparedEnv {
    /// Variables, sorted by name.
    pub vars: Vec<(OsString, OsString)>,
    /// Names removed from the base environment, sorted (lossy UTF-8).
    pub dropped: Vec<String>,
}

/// A `set` entry that cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// A loader variable would run code in the helper before it confines itself.
    #[error("environment variable {0} cannot be set: dynamic-loader variables would run code in the helper before the sandbox is in place")]
    Loader(String),
    /// The sandbox markers belong to the helper.
    #[error("environment variable {0} cannot be set: the CORDON_SANDBOX* markers are set by the sandbox itself")]
    Marker(String),
    /// Empty, or contains `=` or NUL.
    #[error("{0:?} is not a valid environment variable name (empty, or contains '=' or NUL)")]
    InvalidName(String),
    /// The value contains NUL.
    #[error("the value of environment variable {0} contains a NUL byte")]
    InvalidValue(String),
}

impl EnvPolicy {
    /// An empty environment plus `set`.
    pub fn empty() -> EnvPolicy {
        EnvPolicy {
            base: EnvBase::Empty,
            ..EnvPolicy::default()
        }
    }

    /// Adds one variable to `set`.
    pub fn with_var(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> EnvPolicy {
        self.set.insert(name.into(), value.into());
        self
    }

    /// Builds the environment from the calling process's.
    pub fn prepare_from_process(&self) -> Result<PreparedEnv, EnvError> {
        self.prepare(std::env::vars_os())
    }

    /// Builds the environment from `caller` (used only when the base is [`EnvBase::Inherit`]).
    pub fn prepare(
        &self,
        caller: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<PreparedEnv, EnvError> {
        for (name, value) in &self.set {
            let text = name.to_string_lossy().into_owned();
            let bytes = name.as_bytes();
            if bytes.is_empty() || bytes.contains(&b'=') || bytes.contains(&0) {
                return Err(EnvError::InvalidName(text));
            }
            if value.as_bytes().contains(&0) {
                return Err(EnvError::InvalidValue(text));
            }
            if is_loader_var(&text) {
                return Err(EnvError::Loader(text));
            }
            if is_marker(&text) {
                return Err(EnvError::Marker(text));
            }
        }
        let mut vars = BTreeMap::new();
        let mut dropped = BTreeSet::new();
        if self.base == EnvBase::Inherit {
            for (name, value) in caller {
                let text = name.to_string_lossy().into_owned();
                let remove = is_loader_var(&text)
                    || is_marker(&text)
                    || (self.drop_secrets
                        && !self.keep.contains(&text)
                        && !self.set.contains_key(&name)
                        && looks_secret(&text));
                if remove {
                    dropped.insert(text);
                } else {
                    vars.insert(name, value);
                }
            }
        }
        for (name, value) in &self.set {
            vars.insert(name.clone(), value.clone());
        }
        Ok(PreparedEnv {
            vars: vars.into_iter().collect(),
            dropped: dropped.into_iter().collect(),
        })
    }
}

/// `LD_*` (glibc, musl) and `DYLD_*` (macOS, for environments copied from one).
pub fn is_loader_var(name: &str) -> bool {
    name.starts_with("LD_") || name.starts_with("DYLD_")
}

/// `CORDON_SANDBOX` and `CORDON_SANDBOX_*`.
pub fn is_marker(name: &str) -> bool {
    name.starts_with(cordon_sandbox::policy::MARKER_SANDBOX)
}

/// Words that mark a credential when they appear anywhere in a name (case-insensitive).
const SECRET_WORDS: [&str; 11] = [
    "KEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",
    "PRIVATE",
    "COOKIE",
    "SESSION_ID",
];

/// Words that contain a secret word but are known to be harmless; they are blanked out before
/// matching, so `KEYBOARD_LAYOUT` and `GIT_AUTHOR_NAME` survive while `GIT_AUTHOR_TOKEN` would
/// not.
const BENIGN_WORDS: [&str; 3] = ["KEYBOARD", "KEYMAP", "AUTHOR"];

/// Well-known variables whose names contain a secret word but whose values are not secrets,
/// passed through as they are (each with what it holds). Matched exactly, case-insensitively.
#[rustfmt::skip]
const WELL_KNOWN_NON_SECRETS: &[(&str, &str)] = &[
    ("XDG_SESSION_ID", "the logind session number"),
    ("XDG_SESSION_TYPE", "x11, wayland or tty"),
    ("XDG_SESSION_CLASS", "user, greeter or lock-screen"),
    ("XDG_SESSION_DESKTOP", "the desktop's name"),
    ("TOKENIZERS_PARALLELISM", "a Hugging Face tokenizers switch"),
    ("KEYTIMEOUT", "zsh's key sequence timeout"),
    ("PASSWORD_STORE_DIR", "where pass keeps its store (a path; the store itself is hidden)"),
];

/// Whether a variable name looks like it holds a credential.
///
/// Case-insensitive: any of `KEY`, `SECRET`, `TOKEN`, `PASSWORD`, `PASSWD`, `PASSPHRASE`,
/// `CREDENTIAL`, `AUTH`, `PRIVATE`, `COOKIE`, `SESSION_ID` anywhere in the name (after blanking
/// `KEYBOARD`, `KEYMAP`, `AUTHOR`), or a name ending `_PAT`; except the well-known names in
/// [`WELL_KNOWN_NON_SECRETS`]. So `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` and
/// `AWS_ACCESS_KEY_ID` go while `AWS_REGION`, `AWS_PROFILE` and `AWS_CA_BUNDLE` (a path) stay.
/// This deliberately errs towards dropping: `SSH_AUTH_SOCK` and `XAUTHORITY` go too, because
/// an agent socket or X cookie *is* a credential. Put a name in [`EnvPolicy::keep`] or `set`
/// to pass it anyway.
pub fn looks_secret(name: &str) -> bool {
    let mut upper = name.to_ascii_uppercase();
    if WELL_KNOWN_NON_SECRETS
        .iter()
        .any(|(known, _)| *known == upper)
    {
        return false;
    }
    if upper.ends_with("_PAT") {
        return true;
    }
    for benign in BENIGN_WORDS {
        upper = upper.replace(benign, "_");
    }
    SECRET_WORDS.iter().any(|word| upper.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn secret_names() {
        for name in [
            "OPENAI_API_KEY",
            "github_token",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_ACCESS_KEY_ID",
            "MY_PAT",
            "DB_PASSWORD",
            "PGPASSWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SSH_AUTH_SOCK",
            "TLS_PRIVATE_KEY_PATH",
            "GPG_PASSPHRASE",
            "ApiKey",
        ] {
            assert!(looks_secret(name), "{name} kept");
        }
        for name in [
            "PATH",
            "HOME",
            "KEYBOARD_LAYOUT",
            "XKB_DEFAULT_KEYMAP",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "PATTERN",
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_PROFILE",
            "AWS_CA_BUNDLE",
            "XDG_SESSION_ID",
            "tokenizers_parallelism",
            "LANG",
            "TERM",
        ] {
            assert!(!looks_secret(name), "{name} dropped");
        }
    }

    #[test]
    fn set_wins_over_secret_filter_and_keep_exempts() {
        let mut policy = EnvPolicy::default().with_var("NPM_TOKEN", "mine");
        policy.keep.insert("HF_TOKEN".into());
        let env = policy
            .prepare(vars(&[
                ("NPM_TOKEN", "theirs"),
                ("HF_TOKEN", "h"),
                ("AWS_SECRET_ACCESS_KEY", "s"),
                ("CORDON_SANDBOX", "1"),
            ]))
            .unwrap();
        assert_eq!(env.vars, vars(&[("HF_TOKEN", "h"), ("NPM_TOKEN", "mine")]));
        assert_eq!(env.dropped, ["AWS_SECRET_ACCESS_KEY", "CORDON_SANDBOX"]);
    }

    #[test]
    fn loader_and_marker_variables_cannot_be_set() {
        let err = EnvPolicy::default()
            .with_var("LD_PRELOAD", "/x.so")
            .prepare(vec![])
            .unwrap_err();
        assert_eq!(err, EnvError::Loader("LD_PRELOAD".into()));
        let err = EnvPolicy::default()
            .with_var("CORDON_SANDBOX", "0")
            .prepare(vec![])
            .unwrap_err();
        assert_eq!(err, EnvError::Marker("CORDON_SANDBOX".into()));
        let err = EnvPolicy::default()
            .with_var("A=B", "x")
            .prepare(vec![])
            .unwrap_err();
        assert!(matches!(err, EnvError::InvalidName(_)));
    }

    #[test]
    fn empty_base_ignores_caller() {
        let env = EnvPolicy::empty()
            .with_var("PATH", "/bin")
            .prepare(vars(&[("HOME", "/root"), ("API_KEY", "k")]))
            .unwrap();
        assert_eq!(env.vars, vars(&[("PATH", "/bin")]));
        assert!(env.dropped.is_empty());
    }
}
