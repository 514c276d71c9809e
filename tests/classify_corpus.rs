//! Replays the labelled corpus in `tests/fixtures/classify/` through `find_denials`.
//!
//! Each fixture is one real run of a real tool through `cordon-sandbox`, made by
//! `scripts/gen-classify-corpus.py`. Paths of the run's temporary directory appear as `@BASE@`;
//! this test makes a fresh base directory, re-creates the case's files and symlinks in it (the
//! classifier resolves symlinks, so they must exist) and substitutes it back.
//!
//! The bar is exact: no denial that the label does not list (precision) and every listed denial
//! found with its operation and target (recall).
//!
//! Every fixture is replayed twice: as it ran, and with its argv wrapped the way the runtime
//! starts commands, `bash -lc '<argv, quoted>'`. Bash runs a lone simple command by `execve`
//! in place of itself, so the output and exit status of the wrapped run are those of the
//! direct run; only `execve` failures differ (bash reports them itself instead of the helper's
//! `exec_error` record), so fixtures with an `exec_error` record are replayed as they ran only.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use cordon::classify::{find_denials, Evidence, Operation};
use cordon_sandbox::policy::SandboxPolicy;
use cordon_sandbox::status::StatusRecord;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Fixture {
    name: String,
    argv: Vec<String>,
    cwd: String,
    #[serde(default)]
    setup: Setup,
    policy: Value,
    exit_code: Option<i32>,
    signal: Option<i32>,
    records: Vec<Value>,
    stdout: String,
    stderr: String,
    expected: Vec<Expected>,
}

#[derive(Deserialize, Default)]
struct Setup {
    #[serde(default)]
    files: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    symlinks: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    nobody000: Vec<String>,
    #[serde(default)]
    copy_true: Vec<String>,
}

#[derive(Deserialize, Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Expected {
    operation: Operation,
    target: Option<String>,
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/classify")
}

/// Lays out the base directory the way the generator did for the real run.
fn make_base(setup: &Setup) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    for sub in ["cwd", "tmp", "home", "out"] {
        std::fs::create_dir(base.join(sub)).unwrap();
    }
    let base_str = base.display().to_string();
    for (rel, text) in &setup.files {
        let path = base.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    for (rel, target) in &setup.symlinks {
        std::os::unix::fs::symlink(target.replace("@BASE@", &base_str), base.join(rel)).unwrap();
    }
    for rel in &setup.nobody000 {
        let path = base.join(rel);
        // Only root can give a file away; for anyone else the file is theirs, mode 000.
        let _ = std::os::unix::fs::chown(&path, Some(65534), Some(65534));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    for rel in &setup.copy_true {
        let path = base.join(rel);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, base_str)
}

/// `bash -lc 'a' 'b c'` as the runtime would write it: every word single-quoted.
fn wrap_in_shell(argv: &[String]) -> Vec<OsString> {
    let script: Vec<String> = argv
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    vec!["bash".into(), "-lc".into(), script.join(" ").into()]
}

#[test]
fn classify_corpus_precision_and_recall() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 40,
        "corpus has only {} fixtures",
        paths.len()
    );

    let (mut true_pos, mut false_pos, mut false_neg) = (0usize, 0usize, 0usize);
    let (mut denied_cases, mut clean_cases) = (0usize, 0usize);
    let mut failures = Vec::new();
    let mut wrapped_replays = 0usize;
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let fixture: Fixture =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (_dir, base) = make_base(&fixture.setup);
        let sub = |s: &str| s.replace("@BASE@", &base);

        let policy = SandboxPolicy::from_json(&sub(&fixture.policy.to_string())).unwrap();
        policy.validate().unwrap();
        let records: Vec<StatusRecord> = fixture
            .records
            .iter()
            .map(|r| serde_json::from_str(&sub(&r.to_string())).unwrap())
            .collect();
        let argv: Vec<String> = fixture.argv.iter().map(|a| sub(a)).collect();
        let cwd = PathBuf::from(sub(&fixture.cwd));
        let stdout = sub(&fixture.stdout);
        let stderr = sub(&fixture.stderr);
        let classify = |argv: &[OsString]| -> BTreeSet<Expected> {
            find_denials(&Evidence {
                policy: &policy,
                cwd: &cwd,
                argv,
                exit_code: fixture.exit_code,
                signal: fixture.signal,
                records: &records,
                stdout: stdout.as_bytes(),
                stderr: stderr.as_bytes(),
                kernel: None,
                kernel_light: None,
                audit: None,
            })
            .iter()
            .map(|d| Expected {
                operation: d.operation,
                target: d.target.clone(),
            })
            .collect()
        };
        let direct: Vec<OsString> = argv.iter().map(OsString::from).collect();
        let got = classify(&direct);
        let has_exec_error = records
            .iter()
            .any(|r| matches!(r, StatusRecord::ExecError { .. }));
        if !has_exec_error {
            let wrapped = classify(&wrap_in_shell(&argv));
            wrapped_replays += 1;
            if wrapped != got {
                failures.push(format!(
                    "{} (bash -lc): {wrapped:?} differs from direct {got:?}",
                    fixture.name
                ));
            }
        }
        let want: BTreeSet<Expected> = fixture
            .expected
            .iter()
            .map(|e| Expected {
                operation: e.operation,
                target: e.target.as_deref().map(sub),
            })
            .collect();
        if want.is_empty() {
            clean_cases += 1;
        } else {
            denied_cases += 1;
        }
        true_pos += got.intersection(&want).count();
        let extra: Vec<_> = got.difference(&want).collect();
        let missed: Vec<_> = want.difference(&got).collect();
        false_pos += extra.len();
        false_neg += missed.len();
        if !extra.is_empty() || !missed.is_empty() {
            failures.push(format!(
                "{}: false denials {extra:?}, missed {missed:?}",
                fixture.name
            ));
        }
    }
    let ratio = |num: usize, den: usize| {
        if den == 0 {
            1.0
        } else {
            num as f64 / den as f64
        }
    };
    println!(
        "classify corpus: {} fixtures ({denied_cases} with denials, {clean_cases} without, \
         {wrapped_replays} also replayed under bash -lc); \
         denials: {true_pos} found, {false_pos} false, {false_neg} missed; \
         precision {:.3}, recall {:.3}",
        paths.len(),
        ratio(true_pos, true_pos + false_pos),
        ratio(true_pos, true_pos + false_neg),
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
