//! `cordon run --json`, `--timeout`, `--output-limit`, `--env*`: one JSON object, exact fields.

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::{stderr, stdout, Tree};
use serde_json::Value;

fn json_run(tree: &Tree, args: &[&str]) -> (Option<i32>, Value) {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = tree.run(&full);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "exactly one JSON line: {text}");
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (out.status.code(), value)
}

#[test]
fn json_reports_a_denied_write_with_its_fix() {
    let tree = Tree::new();
    let (code, v) = json_run(
        &tree,
        &["--", "sh", "-c", "echo hi; echo x > /etc/cordon-json-test"],
    );
    assert_eq!(code, Some(2));
    assert_eq!(v["outcome"], "denied");
    assert_eq!(v["exit_code"], 2);
    assert_eq!(v["stdout"], "hi\n");
    assert_eq!(v["denials"][0]["operation"], "file_write");
    assert_eq!(v["denials"][0]["target"], "/etc/cordon-json-test");
    assert_eq!(v["denials"][0]["rule"], "not under any writable root");
    assert_eq!(v["denials"][0]["allow_with"], "--writable /etc");
    assert_eq!(v["denials"][0]["evidence"], "text");
    assert_eq!(v["sandbox"]["mode"], "helper");
    assert_eq!(
        v["sandbox"]["landlock_abi"],
        7.min(common::landlock_abi().unwrap_or(0))
    );
    assert_eq!(v["truncated"]["stdout"], 0);
}

#[test]
fn plain_mode_prints_denials_after_the_output() {
    let tree = Tree::new();
    let out = tree.run(&["--", "sh", "-c", "echo x > /etc/cordon-plain-test"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    let last = err.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        "cordon: denied write to /etc/cordon-plain-test (not under any writable root; allow with --writable /etc) (from the command's output)"
    );
}

#[test]
fn json_outcomes_for_success_failure_exec_error_and_bad_input() {
    let tree = Tree::new();
    let (code, v) = json_run(&tree, &["--", "true"]);
    assert_eq!((code, v["outcome"].as_str()), (Some(0), Some("success")));
    assert_eq!(v["denials"], serde_json::json!([]));
    let (code, v) = json_run(&tree, &["--", "sh", "-c", "echo oops >&2; exit 3"]);
    assert_eq!((code, v["outcome"].as_str()), (Some(3), Some("failed")));
    assert_eq!(v["stderr"], "oops\n");
    let (code, v) = json_run(&tree, &["--", "cordon-no-such-program"]);
    assert_eq!(
        (code, v["outcome"].as_str()),
        (Some(127), Some("exec_error"))
    );
    assert_eq!(v["error"]["errno"], libc::ENOENT);
    let (code, v) = json_run(&tree, &["--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!((code, v["outcome"].as_str()), (Some(137), Some("signaled")));
    assert_eq!(v["signal"], 9);
    let (code, v) = json_run(&tree, &["-p", "no-such-preset", "--", "true"]);
    assert_eq!((code, v["outcome"].as_str()), (Some(125), Some("rejected")));
    let (code, v) = json_run(&tree, &["-p", "full-access", "--", "true"]);
    assert_eq!(
        (code, v["sandbox"]["mode"].as_str()),
        (Some(0), Some("none"))
    );
    assert_eq!(v["sandbox"]["downgrades"][0]["restriction"], "sandbox");
}

#[test]
fn timeout_kills_the_tree_and_exits_124() {
    let tree = Tree::new();
    let started = Instant::now();
    let (code, v) = json_run(
        &tree,
        &[
            "--timeout",
            "300ms",
            "--",
            "sh",
            "-c",
            "sleep 30 & sleep 30",
        ],
    );
    assert_eq!(code, Some(124));
    assert_eq!(v["outcome"], "timed_out");
    // A correctness bound (the call returns), not a benchmark: generous on a shared machine.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn output_limit_keeps_head_and_tail() {
    let tree = Tree::new();
    let (code, v) = json_run(
        &tree,
        &[
            "--output-limit",
            "1K",
            "--",
            "sh",
            "-c",
            "printf HEAD; head -c 100000 /dev/zero | tr '\\0' x; printf TAIL",
        ],
    );
    assert_eq!(code, Some(0));
    let out = v["stdout"].as_str().unwrap();
    assert!(out.starts_with("HEADxxx"), "{}", &out[..20]);
    assert!(out.ends_with("xxxTAIL"));
    let dropped = v["truncated"]["stdout"].as_u64().unwrap();
    assert_eq!(dropped, 100_008 - 1024);
    assert!(
        out.contains(&dropped.to_string()),
        "marker names the elided count"
    );
}

#[test]
fn env_flags_set_clear_and_drop_secrets() {
    let tree = Tree::new();
    let out = tree
        .cordon()
        .env("MY_API_TOKEN", "s3cr3t")
        .env("PLAIN_SETTING", "visible")
        .args([
            "run",
            "--json",
            "--env",
            "EXTRA=1",
            "--",
            "sh",
            "-c",
            "echo ${MY_API_TOKEN:-unset} $PLAIN_SETTING $EXTRA $CORDON_SANDBOX",
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["stdout"], "unset visible 1 1\n");
    let dropped: Vec<&str> = v["dropped_env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(dropped.contains(&"MY_API_TOKEN"), "{dropped:?}");
    assert!(
        !stdout(&out).contains("s3cr3t"),
        "a secret value leaked into the result"
    );

    let out = tree
        .cordon()
        .env("PLAIN_SETTING", "visible")
        .args([
            "run",
            "--json",
            "--env-clear",
            "--env",
            "ONLY=this",
            "--",
            "/usr/bin/env",
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mut vars: Vec<&str> = v["stdout"].as_str().unwrap().lines().collect();
    vars.sort();
    // Besides the markers, only what the `.git` placeholder asks of Go (the test's working
    // directory is no repository, so the namespace layer put one there).
    assert_eq!(
        vars,
        [
            "CORDON_SANDBOX=1",
            "CORDON_SANDBOX_NETWORK_DISABLED=1",
            "GOFLAGS=-buildvcs=false",
            "ONLY=this"
        ]
    );
}

#[test]
fn bad_durations_and_sizes_are_rejected() {
    let tree = Tree::new();
    for args in [
        ["--timeout", "soon"],
        ["--timeout", "0s"],
        ["--output-limit", "lots"],
    ] {
        let out = tree.run(&[args[0], args[1], "--", "true"]);
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert_eq!(
            stderr(&out).lines().count(),
            1,
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_failing_command_is_told_which_secrets_were_withheld() {
    let tree = Tree::new();
    let run = |script: &str| {
        tree.cordon()
            .env("DEPLOY_TOKEN", "s3cr3t")
            .args(["run", "--", "sh", "-c", script])
            .output()
            .unwrap()
    };
    let out = run("exit 4");
    assert_eq!(out.status.code(), Some(4));
    let note = stderr(&out);
    assert!(
        note.contains(
            "cordon: note: not passed to the command (secret-looking names and loader variables): "
        ),
        "{note}"
    );
    assert!(note.contains("DEPLOY_TOKEN"), "{note}");
    assert!(!note.contains("s3cr3t"));
    // Success: no note.
    let out = run("true");
    assert_eq!(stderr(&out), "");
}

#[test]
fn a_command_printing_a_fake_denial_gets_a_denial_marked_as_text_evidence() {
    let tree = Tree::new();
    let marker = tree.outside.join("never-written");
    let line = format!(
        "sh: 1: cannot create {}: Permission denied",
        marker.display()
    );
    let (code, v) = json_run(
        &tree,
        &["--", "sh", "-c", &format!("echo '{line}' >&2; exit 2")],
    );
    assert_eq!((code, v["outcome"].as_str()), (Some(2), Some("denied")));
    assert_eq!(v["denials"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["denials"][0]["target"], marker.to_str().unwrap());
    assert_eq!(v["denials"][0]["evidence"], "text");
    assert!(!marker.exists());
}

#[test]
fn an_exec_refused_before_the_command_ran_is_marked_as_the_helpers_record() {
    let tree = Tree::new();
    let program = tree.outside.join("prog");
    std::fs::write(&program, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(
        tree.cwd.join("narrow.toml"),
        "[filesystem]\nread = [\"/usr\", \"/bin\", \"/lib\", \"/lib64\", \"/etc\"]\n",
    )
    .unwrap();
    let (code, v) = json_run(
        &tree,
        &[
            "-p",
            "narrow.toml",
            "--no-snapshot",
            "--",
            program.to_str().unwrap(),
        ],
    );
    assert_eq!(
        (code, v["outcome"].as_str()),
        (Some(126), Some("denied")),
        "{v}"
    );
    assert_eq!(v["denials"][0]["operation"], "file_execute");
    assert_eq!(v["denials"][0]["target"], program.to_str().unwrap());
    assert_eq!(v["denials"][0]["evidence"], "helper_record");
    assert_eq!(v["stdout"], "");
    // The same program inside the readable roots runs: the refusal was the sandbox's.
    let (code, v) = json_run(
        &tree,
        &[
            "-r",
            tree.outside.to_str().unwrap(),
            "-p",
            "narrow.toml",
            "--",
            program.to_str().unwrap(),
        ],
    );
    assert_eq!(
        (code, v["stdout"].as_str()),
        (Some(0), Some("ran\n")),
        "{v}"
    );
}

/// `git config --global` writes `~/.gitconfig`, which granting `~` alone would still protect:
/// the suggestion lifts that entry too, and the run it suggests works (the file is checked from
/// outside). Naming a path that is not protected is refused before anything runs.
#[test]
fn a_write_the_preset_would_protect_suggests_lifting_it_and_the_suggestion_works() {
    let tree = Tree::new();
    let config = tree.home.join(".gitconfig");
    fs::write(&config, "[user]\n\tname = before\n").unwrap();
    let run = |pre: &[&str]| -> Value {
        let out = tree
            .cordon()
            .args(["run", "--json"])
            .args(pre)
            .args(["--", "git", "config", "--global", "user.name", "after"])
            .output()
            .unwrap();
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {out:?}"))
    };
    let v = run(&[]);
    assert_eq!(v["outcome"], "denied", "{v}");
    // git writes `~/.gitconfig.lock` and renames it over `~/.gitconfig`: the lock is what was
    // refused, and the protection of the file it replaces must be lifted too.
    assert_eq!(
        v["denials"][0]["target"],
        format!("{}.lock", config.display()),
        "{v}"
    );
    let allow = v["denials"][0]["allow_with"].as_str().unwrap().to_owned();
    assert_eq!(
        allow,
        format!(
            "--unprotect ~/.gitconfig --writable {}",
            tree.home.display()
        )
    );
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        "[user]\n\tname = before\n"
    );
    let flags: Vec<&str> = allow.split_whitespace().collect();
    let v = run(&flags);
    assert_eq!(v["outcome"], "success", "{v}");
    assert!(
        fs::read_to_string(&config)
            .unwrap()
            .contains("name = after"),
        "{}",
        fs::read_to_string(&config).unwrap()
    );
    let out = tree
        .cordon()
        .args(["run", "--unprotect", "~/.nothing", "--", "touch", "ran"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(!tree.cwd.join("ran").exists());
}
