//! `cordon learn`: the smallest profile, extending a base, that would have allowed every denial
//! of one run. It writes a profile and grants nothing by itself: whoever reads it decides
//! whether to use it, and running `learn` again with it shows what is still missing.
//!
//! Each entry comes from one denial's `allow_with`, checked the way the orchestrator checks an
//! approval ([`crate::orchestrator::widen`]: the exact path, never `/`, never an ancestor of a
//! missing path), with a comment naming the denial. A denial no profile entry can allow (a
//! hardening system call, a carve-out of the base) is listed as a comment and granted nothing.
//!
//! ```
//! use cordon::classify::{Denial, EvidenceKind, Operation};
//! use cordon::learn::{render, Base};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let out = std::fs::canonicalize(dir.path()).unwrap();
//! let denial = Denial::new(
//!     Operation::FileWrite,
//!     Some(out.join("x").display().to_string()),
//!     "not under any writable root",
//!     format!("--writable {}", out.display()),
//!     EvidenceKind::SeccompObserver,
//! );
//! let policy = cordon_sandbox::SandboxPolicy::from_json(r#"{"version":1,
//!   "filesystem":{"read":["/"],"write":[]},"network":{"mode":"denied"},
//!   "enforcement":{"missing_layer":"refuse","carve_outs":"report"}}"#).unwrap();
//! let text = render(&Base::Preset("read-only".into()), &policy, &[denial], "touch x");
//! assert!(text.contains("extends = \"read-only\""));
//! assert!(text.contains(&format!("write = [\n  {:?},  # file_write", out.display().to_string())));
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use cordon_sandbox::policy::NetworkMode;
use cordon_sandbox::SandboxPolicy;

use crate::classify::{Denial, Operation};
use crate::orchestrator::widen;

/// What the learnt profile extends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// A preset, named in `extends`.
    Preset(String),
    /// A profile file's text: its keys are copied into the learnt profile (which cannot
    /// `extends` a file), then the additions follow.
    File(String),
}

/// One entry to add, and the comment saying which denial asks for it.
struct Entry {
    value: String,
    comment: String,
}

/// The learnt profile's text: `base`, plus one entry per grantable denial in `denials` (the
/// run was confined by `policy`, what `base` resolved to), for the command `command`.
pub fn render(base: &Base, policy: &SandboxPolicy, denials: &[Denial], command: &str) -> String {
    let mut lists: BTreeMap<(&str, &str), Vec<Entry>> = BTreeMap::new();
    let mut scalars: BTreeMap<(&str, &str), Entry> = BTreeMap::new();
    let mut refused: Vec<String> = Vec::new();
    let mut wider = policy.clone();
    for d in denials {
        let note = describe(d);
        // Checked one at a time against what is already added: an entry another one covers
        // (a file under a directory just added) is not repeated.
        let Ok(next) = widen(&wider, std::slice::from_ref(d)) else {
            refused.push(format!("{note}: not granted ({})", d.allow_with));
            continue;
        };
        if next == wider {
            continue;
        }
        let comment = note;
        match d.operation {
            Operation::FileWrite | Operation::FileRead | Operation::FileExecute => {
                let (key, path) = match d.allow_with.split_once(' ') {
                    Some(("--writable", path)) => ("write", path),
                    Some((_, path)) => ("read", path),
                    None => continue,
                };
                lists.entry(("filesystem", key)).or_default().push(Entry {
                    value: toml::Value::String(path.to_owned()).to_string(),
                    comment,
                });
            }
            Operation::Network => {
                scalars.insert(
                    ("network", "mode"),
                    Entry {
                        value: format!("{:?}", NetworkMode::Enabled.name()),
                        comment,
                    },
                );
            }
            Operation::UnixSocket => {
                scalars.insert(
                    ("network", "unix_sockets"),
                    Entry {
                        value: "\"allow\"".into(),
                        comment,
                    },
                );
            }
            Operation::TcpPort => {
                let key = if d.allow_with.ends_with("tcp_connect") {
                    "tcp_connect"
                } else {
                    "tcp_bind"
                };
                let port = d.allow_with.split(' ').nth(1).unwrap_or_default();
                lists.entry(("network", key)).or_default().push(Entry {
                    value: port.to_owned(),
                    comment,
                });
            }
            Operation::Syscall => {}
        }
        wider = next;
    }
    let mut out = String::new();
    // A comment ends at the line's end: the command's own newlines must not end it.
    let command = one_line(command);
    let _ = writeln!(out, "# Written by `cordon learn` for: {command}");
    let _ = writeln!(
        out,
        "# Each entry below the base allows one denial of that run; nothing else was added."
    );
    for line in &refused {
        let _ = writeln!(out, "# {}", one_line(line));
    }
    let base_keys = match base {
        Base::Preset(name) => {
            let _ = writeln!(out, "extends = {name:?}");
            BTreeMap::new()
        }
        Base::File(text) => copy_base(text, &mut out),
    };
    for section in ["filesystem", "network"] {
        let mut keys: Vec<&str> = base_keys
            .keys()
            .filter(|(s, _)| *s == section)
            .map(|(_, k)| k.as_str())
            .chain(
                lists
                    .keys()
                    .chain(scalars.keys())
                    .filter(|(s, _)| *s == section)
                    .map(|(_, k)| *k),
            )
            .collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n[{section}]");
        for key in keys {
            let old = base_keys.get(&(section.to_owned(), key.to_owned()));
            if let Some(entry) = scalars.get(&(section, key)) {
                let _ = writeln!(out, "{key} = {}  # {}", entry.value, entry.comment);
            } else if let Some(entries) = lists.get(&(section, key)) {
                let _ = writeln!(out, "{key} = [");
                if let Some(toml::Value::Array(items)) = old {
                    for item in items {
                        let _ = writeln!(out, "  {item},");
                    }
                }
                for entry in entries {
                    let _ = writeln!(out, "  {},  # {}", entry.value, entry.comment);
                }
                let _ = writeln!(out, "]");
            } else if let Some(value) = old {
                let _ = writeln!(out, "{key} = {value}");
            }
        }
    }
    out
}

/// The base file's top-level keys written out, and its section keys returned for merging.
fn copy_base(text: &str, out: &mut String) -> BTreeMap<(String, String), toml::Value> {
    let mut sections = BTreeMap::new();
    let Ok(toml::Value::Table(table)) = text.parse::<toml::Value>() else {
        return sections;
    };
    for (key, value) in &table {
        match value {
            toml::Value::Table(inner) => {
                for (k, v) in inner {
                    sections.insert((key.clone(), k.clone()), v.clone());
                }
            }
            other => {
                let _ = writeln!(out, "{key} = {other}");
            }
        }
    }
    sections
}

/// `file_write /etc/x: not under any writable root (seccomp_observer, 2 times)`.
fn describe(d: &Denial) -> String {
    let operation = serde_json::to_value(d.operation)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let evidence = serde_json::to_value(d.evidence)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let times = if d.count > 1 {
        format!(", {} times", d.count)
    } else {
        String::new()
    };
    let target = d.target.as_deref().unwrap_or("(no target)");
    one_line(&format!(
        "{operation} {target}: {} ({evidence}{times})",
        d.rule
    ))
}

/// `text` fit for a TOML comment: a target the command named could hold a newline, which
/// would end the comment and start a line of the profile.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::EvidenceKind;

    fn policy() -> SandboxPolicy {
        SandboxPolicy::from_json(
            r#"{"version":1,"filesystem":{"read":["/"],"write":[]},"network":{"mode":"denied"},
               "enforcement":{"missing_layer":"refuse","carve_outs":"report"}}"#,
        )
        .unwrap()
    }

    #[test]
    fn a_target_with_a_newline_cannot_add_a_line_to_the_profile() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let forged = format!("{}/x\nwrite = [\"/\"]", root.display());
        let denial = Denial::new(
            Operation::FileWrite,
            Some(forged),
            "not under any writable root",
            format!("--writable {}", root.display()),
            EvidenceKind::SeccompObserver,
        );
        let text = render(
            &Base::Preset("read-only".into()),
            &policy(),
            &[denial],
            "a\nb",
        );
        crate::profile::PermissionProfile::from_toml_str(&text).unwrap();
        let parsed: toml::Value = text.parse().unwrap();
        let write = parsed["filesystem"]["write"].as_array().unwrap();
        assert_eq!(write.len(), 1, "{text}");
        assert_eq!(write[0].as_str(), Some(&*root.display().to_string()));
        assert!(!text.contains("\nwrite = [\"/\"]"), "{text}");
    }

    #[test]
    fn nothing_is_granted_for_a_syscall_or_the_filesystem_root() {
        let syscall = Denial::new(
            Operation::Syscall,
            Some("ptrace".into()),
            "seccomp: ptrace refused",
            "none: no profile allows it (tracing)",
            EvidenceKind::SeccompObserver,
        );
        let root = Denial::new(
            Operation::FileWrite,
            Some("/x".into()),
            "not under any writable root",
            "--writable /",
            EvidenceKind::Text,
        );
        let text = render(
            &Base::Preset("read-only".into()),
            &policy(),
            &[syscall, root],
            "t",
        );
        let parsed: toml::Value = text.parse().unwrap();
        assert!(parsed.get("filesystem").is_none(), "{text}");
        assert_eq!(text.matches("not granted").count(), 2, "{text}");
    }
}
