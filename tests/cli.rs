//! `cordon run` and the helper's command line: exit codes, bad input, enforcement.

mod common;

use std::fs;
use std::process::Command;

use common::{stderr, stdout, Tree};

#[test]
fn exit_codes_and_signals_propagate() {
    let tree = Tree::new();
    assert_eq!(
        tree.run(&["--", "sh", "-c", "exit 7"]).status.code(),
        Some(7)
    );
    assert_eq!(tree.run(&["--", "true"]).status.code(), Some(0));
    assert_eq!(
        tree.run(&["--", "sh", "-c", "kill -TERM $$"]).status.code(),
        Some(128 + libc::SIGTERM)
    );
    let missing = tree.run(&["--", "cordon-no-such-program"]);
    assert_eq!(missing.status.code(), Some(127));
    assert_eq!(
        stderr(&missing).trim(),
        "cordon: cordon-no-such-program: No such file or directory"
    );
    fs::write(tree.cwd.join("not-exec"), "#!/bin/sh\n").unwrap();
    assert_eq!(tree.run(&["--", "./not-exec"]).status.code(), Some(126));
}

#[test]
fn bad_input_exits_125_and_runs_nothing() {
    let tree = Tree::new();
    fs::write(tree.cwd.join("malformed.toml"), "[filesystem\nwrite = ").unwrap();
    fs::write(
        tree.cwd.join("unknown.toml"),
        "[filesystem]\nwritable = [\"/tmp\"]\n",
    )
    .unwrap();
    fs::write(
        tree.cwd.join("unknown.json"),
        r#"{"network": {"mode": "enabled", "color": 1}}"#,
    )
    .unwrap();
    fs::write(
        tree.cwd.join("badmode.toml"),
        "[network]\nmode = \"sometimes\"\n",
    )
    .unwrap();
    fs::write(
        tree.cwd.join("relative.toml"),
        "[filesystem]\nwrite = [\"build\"]\n",
    )
    .unwrap();
    let marker = tree.cwd.join("marker");
    let touch = format!("touch {}", marker.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["-p", "no-such-preset"],
            "unknown preset \"no-such-preset\"",
        ),
        (
            vec!["-p", "missing.toml"],
            "cannot read profile \"missing.toml\"",
        ),
        (vec!["-p", "malformed.toml"], "malformed.toml:"),
        (vec!["-p", "unknown.toml"], "unknown field `writable`"),
        (vec!["-p", "unknown.json"], "unknown field `color`"),
        (vec!["-p", "badmode.toml"], "unknown variant `sometimes`"),
        (
            vec!["-p", "relative.toml"],
            "filesystem.write: \"build\" is relative",
        ),
        (
            vec!["-C", "/nonexistent-dir"],
            "working directory \"/nonexistent-dir\"",
        ),
        (vec!["--network", "sometimes"], "invalid value 'sometimes'"),
        (
            vec!["--no-such-flag"],
            "unexpected argument '--no-such-flag'",
        ),
    ];
    for (args, expected) in cases {
        let mut full = args.clone();
        full.extend(["--", "sh", "-c", &touch]);
        let out = tree.run(&full);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {err}");
        assert!(err.starts_with("cordon: "), "{args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line expected: {err}"
        );
        assert!(err.contains(expected), "{args:?}: {err}");
        // Each cause once: a library error that quotes its source is not followed by it again.
        let causes: Vec<&str> = err.trim_end().split(": ").collect();
        let mut unique = causes.clone();
        unique.dedup();
        assert_eq!(causes, unique, "{args:?}: a cause repeated: {err}");
        assert!(!marker.exists(), "{args:?} ran the command");
    }
    let out = tree.run(&[]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("no command given"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn helper_rejects_bad_policies_with_125() {
    let tree = Tree::new();
    let marker = tree.cwd.join("marker");
    let good = r#"{"version":1,"filesystem":{"read":["/"]},"network":{"mode":"denied"},"enforcement":{"missing_layer":"refuse","carve_outs":"refuse"}}"#;
    let cases = [
        (
            good.replace("\"version\":1", "\"version\":2"),
            "policy version 2",
        ),
        (
            good.replace("[\"/\"]", "[\"usr\"]"),
            "not an absolute, canonical path",
        ),
        (good.replace("\"read\"", "\"reed\""), "unknown field `reed`"),
        (
            good.replace(
                "\"read\":[\"/\"]",
                "\"read\":[\"/\"],\"write\":[\"/w\"],\"deny_read\":[\"/\"]",
            ),
            "under deny_read",
        ),
        (
            good.replace("\"denied\"}", "\"denied\",\"tcp_connect\":[80]}"),
            "needs network.mode",
        ),
        ("not json".to_owned(), "not valid JSON"),
    ];
    let tree_link = tree.cwd.join("link-to-outside");
    std::os::unix::fs::symlink(&tree.outside, &tree_link).unwrap();
    // A symlink anywhere in a policy path is refused at open time (openat2 RESOLVE_NO_SYMLINKS),
    // so a link swapped in after resolution cannot move a rule.
    let linked = good.replace(
        "\"read\":[\"/\"]",
        &format!("\"read\":[\"/\"],\"write\":[\"{}\"]", tree_link.display()),
    );
    let cases: Vec<(String, &str)> = cases
        .into_iter()
        .chain([(linked, "goes through a symbolic link")])
        .collect();
    for (policy, expected) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_cordon"))
            .args(["__sandbox", "--policy", &policy, "--", "touch"])
            .arg(&marker)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{policy}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{policy}: {}",
            stderr(&out)
        );
        assert!(!marker.exists());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(["__sandbox", "--policy", good, "--"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("no command given"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn print_policy_is_what_the_helper_accepts() {
    let tree = Tree::new();
    let out = tree.run(&["--print-policy"]);
    assert_eq!(out.status.code(), Some(0));
    let json = stdout(&out);
    assert_eq!(json.lines().count(), 1);
    let policy = cordon::sandbox::SandboxPolicy::from_json(json.trim()).unwrap();
    policy.validate().unwrap();
    assert_eq!(
        policy.filesystem.write,
        vec![tree.cwd.clone(), std::path::PathBuf::from("/tmp")]
    );
    let marker = tree.cwd.join("ran");
    let out = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(["__sandbox", "--policy", json.trim(), "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(marker.exists());
}

/// Runs the helper with a status pipe on fd 3 and returns (exit code, status lines).
fn helper_with_status(policy: &str, env: &[(&str, &str)]) -> (Option<i32>, Vec<String>) {
    helper_with_status_in("", policy, env)
}

/// The same, run under `prefix` (for example [`common::WITHOUT_USERNS`]).
fn helper_with_status_in(
    prefix: &str,
    policy: &str,
    env: &[(&str, &str)],
) -> (Option<i32>, Vec<String>) {
    let script = format!(
        "exec 3>&1 1>/dev/null; exec {prefix} {} __sandbox --status-fd 3 --policy '{}' -- true",
        env!("CARGO_BIN_EXE_cordon"),
        policy
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code(),
        stdout(&out).lines().map(str::to_owned).collect(),
    )
}

#[test]
fn confined_record_lists_layers_and_downgrades() {
    require_landlock!(6);
    require_userns!();
    let tree = Tree::new();
    let w = tree.cwd.display();
    let policy = format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":["{w}"],"read_only":["{w}/.git"]}},"network":{{"mode":"denied"}},"enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#
    );
    // With user namespaces the carve-out is enforced: namespace layers first, no downgrade,
    // and the four operations Landlock does not mediate are stopped by the read-only mounts.
    let (code, records) = helper_with_status(&policy, &[]);
    assert_eq!(code, Some(0));
    let record: serde_json::Value = serde_json::from_str(&records[0]).unwrap();
    let mut layers: Vec<&str> = common::NAMESPACE_LAYERS.to_vec();
    layers.extend([
        "capabilities",
        "no_new_privs",
        "landlock_fs",
        "landlock_scope",
        "seccomp",
    ]);
    assert_eq!(record["layers"], serde_json::json!(layers));
    assert_eq!(record["downgrades"], serde_json::json!([]));
    assert_eq!(record["unmediated"], serde_json::json!([]));

    // Without them (really: a user namespace where no further one may be created), the
    // carve-out is a downgrade.
    let (code, records) = helper_with_status_in(common::WITHOUT_USERNS, &policy, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(records.len(), 1, "{records:?}");
    let record: serde_json::Value = serde_json::from_str(&records[0]).unwrap();
    assert_eq!(record["kind"], "confined");
    assert_eq!(
        record["landlock_abi"],
        7.min(common::landlock_abi().unwrap())
    );
    assert_eq!(
        record["layers"],
        serde_json::json!([
            "capabilities",
            "no_new_privs",
            "landlock_fs",
            "landlock_scope",
            "seccomp"
        ])
    );
    assert_eq!(
        record["downgrades"][0]["restriction"],
        format!("read_only:{w}/.git")
    );
    assert_eq!(record["downgrades"].as_array().unwrap().len(), 1);

    assert!(
        record["downgrades"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("user.max_user_namespaces"),
        "{record}"
    );

    // The same carve-out with enforcement "refuse" does not run.
    let strict = policy.replace("\"carve_outs\":\"report\"", "\"carve_outs\":\"refuse\"");
    let (code, records) = helper_with_status_in(common::WITHOUT_USERNS, &strict, &[]);
    assert_eq!(code, Some(125));
    let record: serde_json::Value = serde_json::from_str(&records[0]).unwrap();
    assert_eq!(record["kind"], "setup_error");
    assert_eq!(record["step"], "enforcement");
}

#[test]
fn capped_landlock_abi_is_refused_or_reported() {
    require_landlock!(6);
    let policy = r#"{"version":1,"filesystem":{"read":["/"],"write":["/tmp"]},"network":{"mode":"denied"},"enforcement":{"missing_layer":"refuse","carve_outs":"refuse"}}"#;
    let (code, records) = helper_with_status(policy, &[("CORDON_LANDLOCK_ABI_MAX", "2")]);
    assert_eq!(code, Some(125));
    let record: serde_json::Value = serde_json::from_str(&records[0]).unwrap();
    assert_eq!(record["step"], "enforcement");
    assert!(record["message"]
        .as_str()
        .unwrap()
        .contains("landlock_truncate"));

    let report = policy.replace(
        "\"missing_layer\":\"refuse\"",
        "\"missing_layer\":\"report\"",
    );
    let (code, records) = helper_with_status(&report, &[("CORDON_LANDLOCK_ABI_MAX", "2")]);
    assert_eq!(code, Some(0));
    let record: serde_json::Value = serde_json::from_str(&records[0]).unwrap();
    assert_eq!(record["landlock_abi"], 2);
    let downgraded: Vec<&str> = record["downgrades"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["restriction"].as_str().unwrap())
        .collect();
    assert_eq!(
        downgraded,
        [
            "landlock_truncate",
            "landlock_ioctl_dev",
            "landlock_scope_signal",
            "landlock_scope_abstract_unix"
        ]
    );

    // ABI 0 behaves as a kernel without Landlock: with "report" the filesystem is open, and
    // the record says so.
    let (code, records) = helper_with_status(&report, &[("CORDON_LANDLOCK_ABI_MAX", "0")]);
    assert_eq!(code, Some(0));
    let record: serde_json::Value = serde_json::from_str(&records[0]).unwrap();
    assert_eq!(record["landlock_abi"], 0);
    assert_eq!(
        record["downgrades"][0]["restriction"],
        "landlock_filesystem"
    );
    let mut layers: Vec<&str> = if common::userns_available() {
        common::NAMESPACE_LAYERS.to_vec()
    } else {
        Vec::new()
    };
    layers.extend(["capabilities", "no_new_privs", "seccomp"]);
    assert_eq!(record["layers"], serde_json::json!(layers));
}

#[test]
fn capped_abi_really_lifts_truncate_protection() {
    require_landlock!(3);
    // With ABI 2 the kernel does not mediate truncate: the downgrade the record reports is real
    // where nothing else covers it. Under the namespace layer the read-only mount does (EROFS,
    // file intact); without user namespaces the truncate goes through.
    let tree = Tree::new();
    let victim = tree.outside.join("victim");
    fs::write(&victim, "data").unwrap();
    let profile = tree.cwd.join("report.toml");
    fs::write(
        &profile,
        "extends = \"workspace-write\"\nenforcement = \"report\"\n",
    )
    .unwrap();
    let script = format!("print(attempt(lambda: os.truncate({victim:?}, 0)))");
    let code = format!("{}\n{script}", common::PROBE);
    let mut cmd = tree.cordon();
    cmd.env("CORDON_LANDLOCK_ABI_MAX", "2")
        .args(["run", "-p", "report.toml", "--"])
        .arg(common::python())
        .args(["-c", &code]);
    if common::userns_available() {
        let out = cmd.output().unwrap();
        assert_eq!(stdout(&out).trim(), "EROFS", "{}", stderr(&out));
        assert_eq!(fs::read_to_string(&victim).unwrap(), "data");
    }
    let out = common::without_userns(&cmd).output().unwrap();
    assert_eq!(stdout(&out).trim(), "OK", "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "");
}

#[test]
fn full_access_says_it_is_unsandboxed() {
    let tree = Tree::new();
    let target = tree.outside.join("written");
    let out = tree.run(&[
        "-p",
        "full-access",
        "--",
        "sh",
        "-c",
        &format!("echo free > {}", target.display()),
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stderr(&out).trim(),
        "cordon: full-access profile: running without any sandbox"
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "free\n");
}

#[test]
fn the_command_gets_default_signal_dispositions() {
    let tree = Tree::new();
    // Rust ignores SIGPIPE in its own processes; an ignored signal survives execve, so the
    // helper must hand the command the default, or `yes | head -1` ends with EPIPE errors.
    // Other ignored signals are the caller's choice (think `nohup`) and are kept: the expected
    // mask is what the same command sees when this process runs it directly (std's spawn
    // resets SIGPIPE too), less glibc's internal signals 32 and 33, which glibc's posix_spawn
    // hands on ignored and the helper resets.
    let control = Command::new("sh")
        .args(["-c", "grep SigIgn /proc/self/status"])
        .output()
        .unwrap();
    let control = stdout(&control);
    let mask = u64::from_str_radix(control.trim().trim_start_matches("SigIgn:\t"), 16).unwrap();
    assert_eq!(mask & (1 << (libc::SIGPIPE - 1)), 0, "{control}");
    let control = format!("SigIgn:\t{:016x}\n", mask & !(1 << 31 | 1 << 32));
    let out = tree.run(&[
        "--",
        "sh",
        "-c",
        "yes | head -1; grep SigIgn /proc/self/status",
    ]);
    assert_eq!(stdout(&out), format!("y\n{control}"), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn pass_through_keeps_the_callers_stdout() {
    let tree = Tree::new();
    let sink = tree.outside.join("stdout.txt");
    let file = fs::File::create(&sink).unwrap();
    let status = tree
        .cordon()
        .args(["run", "--", "readlink", "/proc/self/fd/1"])
        .stdout(file)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    // The command wrote straight into the caller's file, not into a pipe through cordon.
    assert_eq!(
        fs::read_to_string(&sink).unwrap(),
        format!("{}\n", sink.display())
    );
}

#[test]
fn first_interrupt_reaches_the_command_second_cancels() {
    use std::time::{Duration, Instant};
    let tree = Tree::new();
    let interrupt = |child: &std::process::Child| {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    };
    // A command that handles SIGINT gets it and decides how to end.
    let mut child = tree
        .cordon()
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "trap 'echo caught; exit 3' INT; echo ready; while :; do sleep 0.05; done",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready, "ready\n");
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "caught\n");
    assert_eq!(out.status.code(), Some(3));

    // A command that ignores it is killed, with its whole group, at the second.
    let mut child = tree
        .cordon()
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "trap '' INT; echo ready; sleep 30 & wait",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    let started = Instant::now();
    interrupt(&child);
    std::thread::sleep(Duration::from_millis(200));
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(stderr(&out).contains("interrupted; killed sh and its process group"));
}

#[test]
fn bare_cordon_and_bare_snapshot_print_their_usage_and_exit_125() {
    let tree = Tree::new();
    for args in [&[][..], &["snapshot"][..]] {
        let out = tree.cordon().args(args).output().expect("spawn cordon");
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains("Usage: cordon"), "{args:?}: {err}");
        assert!(err.contains("Commands:"), "{args:?}: {err}");
    }
}

#[test]
fn argument_errors_are_one_line_and_keep_the_valid_values() {
    let tree = Tree::new();
    let out = tree.run(&["--network", "maybe", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        stderr(&out),
        "cordon: invalid value 'maybe' for '--network <MODE>' [possible values: denied, loopback, proxy, enabled]\n"
    );
    let out = tree.run(&["--frobnicate", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        stderr(&out),
        "cordon: unexpected argument '--frobnicate' found (to pass '--frobnicate' as a value, use '-- --frobnicate')\n"
    );
}

#[test]
fn an_empty_program_name_is_bad_input_and_nothing_runs() {
    let tree = Tree::new();
    let out = tree.run(&["--", "", "x"]);
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        stderr(&out),
        "cordon: the program name is empty (usage: cordon run [OPTIONS] -- PROGRAM [ARGS...])\n"
    );
}

#[test]
fn full_access_print_policy_says_that_nothing_is_confined() {
    let tree = Tree::new();
    let out = tree.run(&["-p", "full-access", "--print-policy"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(value["sandbox"], "none");
    assert_eq!(value["cwd"], tree.cwd.display().to_string());
    assert!(value["note"]
        .as_str()
        .unwrap()
        .contains("without the helper"));
}

#[test]
fn completions_load_in_their_shells_and_the_man_page_renders() {
    let tree = Tree::new();
    let bash = tree
        .cordon()
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert_eq!(bash.status.code(), Some(0));
    let script = tree.root.join("cordon.bash");
    fs::write(&script, &bash.stdout).unwrap();
    // bash itself loads it and registers the completion for `cordon`.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p cordon", script.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("cordon"), "{}", stdout(&out));
    assert!(stdout(&bash).contains("--profile"));
    let zsh = tree.cordon().args(["completions", "zsh"]).output().unwrap();
    assert!(stdout(&zsh).starts_with("#compdef cordon"));
    let fish = tree
        .cordon()
        .args(["completions", "fish"])
        .output()
        .unwrap();
    assert!(stdout(&fish).contains("complete -c cordon"));
    let man = tree.cordon().arg("man").output().unwrap();
    assert_eq!(man.status.code(), Some(0));
    let page = stdout(&man);
    assert!(page.contains(".TH cordon 1"), "{page}");
    assert!(page.contains("doctor"));
}

#[test]
fn run_help_and_argument_errors_come_from_the_full_parser() {
    // `cordon run` is parsed with its own definitions alone for speed; help and errors must
    // read exactly as the full command line's parser words them.
    let tree = Tree::new();
    let help = tree.cordon().args(["run", "--help"]).output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    let text = stdout(&help);
    assert!(
        text.starts_with("Run PROGRAM confined by a profile"),
        "{text}"
    );
    assert!(text.contains("Usage: cordon run [OPTIONS]"), "{text}");
    let bad = tree.cordon().args(["run", "--bogus"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(125));
    assert_eq!(
        stderr(&bad),
        "cordon: unexpected argument '--bogus' found (to pass '--bogus' as a value, use '-- --bogus')\n"
    );
    // A command line the fast path accepts runs as before.
    let ok = tree.run(&["--", "sh", "-c", "echo ran"]);
    assert_eq!(stdout(&ok), "ran\n", "{}", stderr(&ok));
    assert_eq!(ok.status.code(), Some(0));
}

/// A single file can be a writable root (`-w app.db`): the command may change that file and
/// nothing beside it, and no carve-out is looked for beneath it (it has nothing beneath).
#[test]
fn a_single_file_can_be_a_writable_root() {
    let tree = Tree::new();
    let file = tree.outside.join("app.db");
    fs::write(&file, "x\n").unwrap();
    let beside = tree.outside.join("other");
    let out = tree.run(&[
        "-w",
        file.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!(
            "echo y >> {}; echo z > {}",
            file.display(),
            beside.display()
        ),
    ]);
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "x\ny\n",
        "{}",
        stderr(&out)
    );
    assert!(!beside.exists());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("cordon: denied write to {}", beside.display())),
        "{}",
        stderr(&out)
    );
}

/// A writable root where no process can create anything (procfs, sysfs) needs no placeholder
/// for the protected names, and gets none: the run works instead of failing its setup.
#[test]
fn a_writable_root_on_procfs_needs_no_placeholders() {
    let tree = Tree::new();
    let host = fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let out = tree
        .cordon()
        .args([
            "run",
            "-w",
            "/proc/sys/vm",
            "--",
            "cat",
            "/proc/sys/vm/swappiness",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), host);
    assert!(!std::path::Path::new("/proc/sys/vm/.git").exists());
}

/// Where a writable root has no `.git`, the namespace layer puts an empty, read-only one there
/// for the run (so that the command cannot plant a repository whose hooks the person's git
/// would run later). Go takes it for a repository and would fail `go build` on its VCS
/// stamping; the command is told `-buildvcs=false` in `GOFLAGS`, after the caller's own flags,
/// and only then. A real `go build` of a module in such a directory works.
#[test]
fn go_builds_beside_the_git_placeholder() {
    let tree = Tree::new();
    let flags = |extra: &[(&str, &str)]| {
        let mut cmd = tree.cordon();
        cmd.args(["run", "--", "sh", "-c", "echo \"[$GOFLAGS]\""]);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        stdout(&cmd.output().unwrap())
    };
    assert_eq!(flags(&[]), "[-buildvcs=false]\n");
    assert_eq!(
        flags(&[("GOFLAGS", "-mod=mod")]),
        "[-mod=mod -buildvcs=false]\n"
    );
    assert_eq!(
        flags(&[("GOFLAGS", "-buildvcs=true")]),
        "[-buildvcs=true]\n"
    );
    // A real repository needs no placeholder, and the command's GOFLAGS is left alone.
    fs::create_dir(tree.cwd.join(".git")).unwrap();
    assert_eq!(flags(&[]), "[]\n");
    fs::remove_dir(tree.cwd.join(".git")).unwrap();
    if Command::new("go").arg("version").output().is_err() {
        eprintln!("SKIPPED: the go build needs go (golang-go)");
        return;
    }
    fs::write(
        tree.cwd.join("go.mod"),
        "module example.com/hello\n\ngo 1.19\n",
    )
    .unwrap();
    fs::write(
        tree.cwd.join("main.go"),
        "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n",
    )
    .unwrap();
    let cache = tree.cwd.join(".gocache");
    let out = tree.run(&[
        "--env",
        &format!("GOCACHE={}", cache.display()),
        "--env",
        &format!("GOPATH={}", tree.cwd.join(".gopath").display()),
        "--",
        "sh",
        "-c",
        "go build -o hello . && ./hello",
    ]);
    assert_eq!(stdout(&out), "hello\n", "{}", stderr(&out));
    assert_eq!(out.status.code(), Some(0));
}
