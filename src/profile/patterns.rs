//! Glob patterns in `read_only` and `deny_read` (`**/.env`, `**/*.pem`, `secrets/**`,
//! `.claude/*`), expanded into paths when the profile is resolved.
//!
//! The kernel layers cover paths, never names, so a pattern is turned into the paths it
//! matches at resolution time, by walking the tree beneath it (the `ignore` crate's parallel
//! walker, with every filter off: hidden and git-ignored files are exactly where secrets live;
//! links are not followed). Two kinds of pattern:
//!
//! - one that names everything beneath a literal directory (`secrets/**`, `.claude/*`,
//!   `~/.config/gh/**`) becomes that directory, carved out whole: whatever is created in it
//!   later is covered too, and nothing is walked;
//! - any other (`**/.env`, `**/*.pem`, `config/*.key`) becomes the paths that match now. A
//!   path created later that would match is not covered, and the receipt says so.
//!
//! Walking is bounded ([`PatternLimits`]): all patterns of one resolution together visit at
//! most [`MAX_ENTRIES`] directory entries and take at most [`MAX_TIME`]. At the bound the
//! profile is refused (exit 125), never half-expanded: the paths not walked could hold exactly
//! what the pattern was written to protect.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cordon_sandbox::policy::{CarveOut, PatternExpansion};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Entries all patterns of one resolution may visit together. A large monorepo with its
/// `node_modules` and build outputs has a few hundred thousand; a pattern that needs more is
/// rooted too high (`/**/x`, `~/**`) and should name a directory.
pub const MAX_ENTRIES: usize = 500_000;

/// Time all patterns of one resolution may take together, on top of everything else cordon
/// does before the command: long enough for [`MAX_ENTRIES`] on a cold cache, short enough
/// that a pattern rooted too high fails fast instead of hanging every command.
pub const MAX_TIME: Duration = Duration::from_secs(5);

/// Lowers [`MAX_ENTRIES`] (never raises it): for tests, and for callers that want a tighter
/// bound. A lower bound can only refuse sooner.
pub const MAX_ENTRIES_ENV: &str = "CORDON_PATTERN_MAX_ENTRIES";

/// Lowers [`MAX_TIME`], in milliseconds (never raises it).
pub const MAX_MILLIS_ENV: &str = "CORDON_PATTERN_MAX_MILLIS";

/// The bounds of one resolution's walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternLimits {
    /// Directory entries visited, over all patterns.
    pub max_entries: usize,
    /// Wall-clock time, over all patterns.
    pub max_time: Duration,
}

impl Default for PatternLimits {
    fn default() -> PatternLimits {
        PatternLimits {
            max_entries: MAX_ENTRIES,
            max_time: MAX_TIME,
        }
    }
}

impl PatternLimits {
    /// The defaults, lowered by [`MAX_ENTRIES_ENV`] and [`MAX_MILLIS_ENV`] where set.
    pub fn from_env() -> PatternLimits {
        let read = |name: &str| std::env::var(name).ok()?.trim().parse::<u64>().ok();
        let mut limits = PatternLimits::default();
        if let Some(n) = read(MAX_ENTRIES_ENV) {
            limits.max_entries = limits.max_entries.min(n as usize);
        }
        if let Some(ms) = read(MAX_MILLIS_ENV) {
            limits.max_time = limits.max_time.min(Duration::from_millis(ms));
        }
        limits
    }
}

/// What is left of the bounds while a resolution walks.
#[derive(Debug)]
pub struct Budget {
    limits: PatternLimits,
    visited: usize,
    deadline: Instant,
}

impl Budget {
    /// A fresh budget; the clock starts now.
    pub fn new(limits: PatternLimits) -> Budget {
        Budget {
            limits,
            visited: 0,
            deadline: Instant::now() + limits.max_time,
        }
    }
}

/// Why a pattern could not be expanded. Messages are one line and name the pattern.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// Not a valid glob.
    #[error("{field}: {pattern:?} is not a valid pattern: {message}")]
    Syntax {
        /// The profile field.
        field: &'static str,
        /// The pattern.
        pattern: String,
        /// What is wrong.
        message: String,
    },
    /// The walk reached a bound.
    #[error("{field}: {pattern:?} was not expanded in full: walking {root:?} reached the bound of {bound} (all patterns of a profile together), so paths it would match may be left unprotected and cordon refuses; root the pattern in a narrower directory")]
    TooBroad {
        /// The profile field.
        field: &'static str,
        /// The pattern.
        pattern: String,
        /// Where it was walking.
        root: PathBuf,
        /// Which bound, in words.
        bound: String,
    },
}

/// Where `entry` of `field` is in `expansions`, when it is a pattern.
pub fn pattern_index(
    expansions: &[PatternExpansion],
    field: CarveOut,
    entry: &str,
) -> Option<usize> {
    expansions
        .iter()
        .position(|e| e.field == field && e.pattern == entry)
}

/// True when `entry` is a glob pattern rather than a path.
pub fn is_pattern(entry: &str) -> bool {
    entry.contains(['*', '?', '[', '{'])
}

/// A pattern split before its first component with a glob character: `~/.config/*/token` is
/// `~/.config` and `*/token`; `**/.env` is `` and `**/.env`.
pub fn split(pattern: &str) -> (&str, &str) {
    let mut literal_end = 0;
    for (start, component) in components(pattern) {
        if is_pattern(component) {
            return (
                pattern[..literal_end].trim_end_matches('/'),
                &pattern[start..],
            );
        }
        literal_end = start + component.len();
    }
    (pattern, "")
}

/// `(byte offset, component)` for each `/`-separated component, empty ones skipped.
fn components(pattern: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    pattern.split('/').filter_map(move |part| {
        let start = offset;
        offset += part.len() + 1;
        (!part.is_empty()).then_some((start, part))
    })
}

/// True when the glob part names everything beneath its directory (only `*` and `**`
/// components): then the directory itself is the carve-out.
pub fn names_everything_beneath(glob: &str) -> bool {
    components(glob).all(|(_, c)| c == "*" || c == "**")
}

/// One pattern to match in a walk.
pub struct Wanted<'a> {
    /// The glob part, relative to the walked directory.
    pub glob: &'a str,
    /// The whole entry, for messages.
    pub pattern: &'a str,
    /// The profile field.
    pub field: &'static str,
    /// Whether a matched directory hides everything beneath it (`deny_read`), so that the
    /// walk need not look inside.
    pub hides: bool,
}

/// Walks `base` once for every pattern in `wanted` and returns, per pattern, the paths that
/// match (a matched directory stands for everything beneath it). A missing `base` matches
/// nothing.
pub fn walk(
    base: &Path,
    wanted: &[Wanted<'_>],
    budget: &mut Budget,
) -> Result<Vec<Vec<PathBuf>>, PatternError> {
    let mut set = GlobSetBuilder::new();
    for w in wanted {
        let glob = GlobBuilder::new(w.glob)
            .literal_separator(true)
            .build()
            .map_err(|e| PatternError::Syntax {
                field: w.field,
                pattern: w.pattern.to_owned(),
                message: cordon_sandbox::policy::single_line(e.kind().to_string().as_str()),
            })?;
        set.add(glob);
    }
    let set: GlobSet = set.build().map_err(|e| PatternError::Syntax {
        field: wanted.first().map_or("filesystem", |w| w.field),
        pattern: wanted.first().map_or("", |w| w.pattern).to_owned(),
        message: e.to_string(),
    })?;
    let mut found = vec![Vec::new(); wanted.len()];
    if !base.is_dir() {
        return Ok(found);
    }
    let remaining = budget.limits.max_entries.saturating_sub(budget.visited);
    let visited = AtomicUsize::new(0);
    let over = AtomicBool::new(false);
    let out_of_time = AtomicBool::new(false);
    let matches: Mutex<Vec<(usize, PathBuf)>> = Mutex::new(Vec::new());
    let deadline = budget.deadline;
    let any_hiding = wanted.iter().any(|w| w.hides);
    ignore::WalkBuilder::new(base)
        .standard_filters(false)
        .follow_links(false)
        .threads(2)
        .build_parallel()
        .run(|| {
            let mut hits = Vec::new();
            let (visited, over, out_of_time, matches, set) =
                (&visited, &over, &out_of_time, &matches, &set);
            Box::new(move |entry| {
                use ignore::WalkState;
                let Ok(entry) = entry else {
                    // An entry cordon cannot read, the command (same user, fewer rights)
                    // cannot read either.
                    return WalkState::Continue;
                };
                if visited.fetch_add(1, Ordering::Relaxed) >= remaining {
                    over.store(true, Ordering::Relaxed);
                    return WalkState::Quit;
                }
                if Instant::now() >= deadline {
                    out_of_time.store(true, Ordering::Relaxed);
                    return WalkState::Quit;
                }
                let Ok(relative) = entry.path().strip_prefix(base) else {
                    return WalkState::Continue;
                };
                if relative.as_os_str().is_empty() {
                    return WalkState::Continue;
                }
                set.matches_into(relative, &mut hits);
                if hits.is_empty() {
                    return WalkState::Continue;
                }
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                let hidden_whole = hits.iter().any(|&i| wanted[i].hides);
                if let Ok(mut all) = matches.lock() {
                    all.extend(hits.iter().map(|&i| (i, entry.path().to_path_buf())));
                }
                // Beneath a directory carved out whole there is nothing more to carve: a
                // hidden one hides it all, a read-only one covers it unless something in it
                // is to be hidden.
                if is_dir && (hidden_whole || !any_hiding) {
                    WalkState::Skip
                } else {
                    WalkState::Continue
                }
            })
        });
    budget.visited += visited.load(Ordering::Relaxed).min(remaining);
    let bound = if over.load(Ordering::Relaxed) {
        Some(format!("{} entries", budget.limits.max_entries))
    } else if out_of_time.load(Ordering::Relaxed) {
        Some(format!("{} ms", budget.limits.max_time.as_millis()))
    } else {
        None
    };
    if let Some(bound) = bound {
        let patterns: Vec<&str> = wanted.iter().map(|w| w.pattern).collect();
        return Err(PatternError::TooBroad {
            field: wanted.first().map_or("filesystem", |w| w.field),
            pattern: patterns.join(", "),
            root: base.to_path_buf(),
            bound,
        });
    }
    let matches = matches.into_inner().unwrap_or_else(|e| e.into_inner());
    for (index, path) in matches {
        found[index].push(path);
    }
    for paths in &mut found {
        // The walker's threads report in no fixed order; the policy should not change from
        // one resolution to the next.
        paths.sort();
        paths.dedup();
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn patterns_split_before_their_first_glob_component() {
        assert_eq!(split("**/.env"), ("", "**/.env"));
        assert_eq!(split("secrets/**"), ("secrets", "**"));
        assert_eq!(split(":cwd/secrets/*.key"), (":cwd/secrets", "*.key"));
        assert_eq!(split("~/.config/*/token"), ("~/.config", "*/token"));
        assert_eq!(split("/srv/x/{a,b}"), ("/srv/x", "{a,b}"));
        assert!(names_everything_beneath("**"));
        assert!(names_everything_beneath("*"));
        assert!(names_everything_beneath("*/**"));
        assert!(!names_everything_beneath("**/.env"));
        assert!(!names_everything_beneath("*.pem"));
        assert!(is_pattern("a/*.pem") && !is_pattern("~/.ssh"));
    }

    fn wanted<'a>(glob: &'a str, hides: bool) -> Wanted<'a> {
        Wanted {
            glob,
            pattern: glob,
            field: "filesystem.deny_read",
            hides,
        }
    }

    #[test]
    fn a_walk_finds_hidden_and_nested_matches_and_stops_at_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        fs::create_dir_all(base.join("a/b/.git")).unwrap();
        fs::write(base.join(".env"), "").unwrap();
        fs::write(base.join("a/b/.env"), "").unwrap();
        fs::write(base.join("a/key.pem"), "").unwrap();
        fs::write(base.join("a/b/.git/.env"), "").unwrap();
        fs::write(base.join(".gitignore"), ".env\n*.pem\n").unwrap();
        let mut budget = Budget::new(PatternLimits::default());
        let found = walk(
            base,
            &[wanted("**/.env", true), wanted("**/*.pem", true)],
            &mut budget,
        )
        .unwrap();
        // Ignored and hidden files are matched all the same.
        assert_eq!(
            found[0],
            [
                base.join(".env"),
                base.join("a/b/.env"),
                base.join("a/b/.git/.env")
            ]
        );
        assert_eq!(found[1], [base.join("a/key.pem")]);
        // `*` does not cross a `/`.
        let found = walk(base, &[wanted("*.pem", true)], &mut budget).unwrap();
        assert!(found[0].is_empty());

        let mut tight = Budget::new(PatternLimits {
            max_entries: 3,
            max_time: MAX_TIME,
        });
        let err = walk(base, &[wanted("**/.env", true)], &mut tight).unwrap_err();
        assert!(err.to_string().contains("bound of 3 entries"), "{err}");
        let mut no_time = Budget::new(PatternLimits {
            max_entries: MAX_ENTRIES,
            max_time: Duration::ZERO,
        });
        let err = walk(base, &[wanted("**/.env", true)], &mut no_time).unwrap_err();
        assert!(err.to_string().contains("bound of 0 ms"), "{err}");
        let err = walk(base, &[wanted("a/[b", true)], &mut budget).unwrap_err();
        assert!(err.to_string().contains("not a valid pattern"), "{err}");
    }
}
