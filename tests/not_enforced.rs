//! Plain `cordon run` (no `--json`) names every downgrade on stderr before the command's first
//! output, under the two real conditions that cause them: no user namespaces, and a capped
//! Landlock ABI. Both streams go to one file, so the order on it is the order a person sees.

mod common;

use std::fs::File;
use std::process::Command;

use common::Tree;

/// Runs `cmd` with stdout and stderr on the same open file, and returns its lines and exit code.
fn merged(tree: &Tree, mut cmd: Command) -> (Vec<String>, i32) {
    let path = tree.root.join("merged.out");
    let file = File::create(&path).expect("create the output file");
    cmd.stdout(file.try_clone().expect("dup the output file"))
        .stderr(file);
    let status = cmd.status().expect("spawn cordon");
    let text = std::fs::read_to_string(&path).expect("read the output file");
    (
        text.lines().map(str::to_owned).collect(),
        status.code().unwrap_or(-1),
    )
}

/// A profile file extending workspace-write with `extra` lines.
fn profile(tree: &Tree, extra: &str) -> String {
    let path = tree.root.join("profile.toml");
    std::fs::write(&path, format!("extends = \"workspace-write\"\n{extra}")).unwrap();
    path.to_string_lossy().into_owned()
}

/// The downgrades a `--json` run of the same command reports, as the lines plain `run` prints.
fn expected_lines(cmd: Command) -> Vec<String> {
    let out = common::without_userns(&cmd).output().expect("spawn cordon");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    // Downgrades of one kind with one reason share a line listing their paths.
    let mut groups: Vec<(String, String, Vec<String>)> = Vec::new();
    for d in report["sandbox"]["downgrades"]
        .as_array()
        .expect("downgrades")
    {
        let restriction = d["restriction"].as_str().unwrap();
        let reason = d["reason"].as_str().unwrap().to_owned();
        let (kind, what) = restriction.split_once(':').unwrap_or((restriction, ""));
        match groups.iter_mut().find(|g| g.0 == kind && g.1 == reason) {
            Some(g) if !what.is_empty() => g.2.push(what.to_owned()),
            _ => groups.push((kind.to_owned(), reason, vec![what.to_owned()])),
        }
    }
    groups
        .into_iter()
        .map(|(kind, reason, whats)| match whats.len() {
            1 if whats[0].is_empty() => format!("cordon: not enforced: {kind} ({reason})"),
            1 => format!("cordon: not enforced: {kind}:{} ({reason})", whats[0]),
            _ => format!(
                "cordon: not enforced: {kind}: {} ({reason})",
                whats.join(", ")
            ),
        })
        .collect()
}

#[test]
fn deny_read_without_user_namespaces_is_announced_before_the_output() {
    let tree = Tree::new();
    // Inside the writable working directory Landlock cannot keep a path unreadable (it would
    // have to leave new entries there ungranted): a downgrade. Outside every writable root it
    // grants around the path instead: enforced, with an approximation, and not announced.
    let secret = tree.cwd.join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let far = tree.outside.join("far-secret");
    std::fs::write(&far, "far\n").unwrap();
    std::fs::write(tree.outside.join("public"), "public\n").unwrap();
    // The profile relaxes its own rules: without that, a rule it wrote is refused instead.
    let profile = profile(
        &tree,
        &format!(
            "enforcement = \"report\"\n[filesystem]\ndeny_read = [{:?}, {:?}]\n",
            secret.display(),
            far.display()
        ),
    );
    let script = format!(
        "cat {0}/public; cat {1}; cat {2} 2>/dev/null || echo far-refused; echo done >&2",
        tree.outside.display(),
        secret.display(),
        far.display()
    );
    let run = |json: bool| {
        let mut cmd = tree.cordon();
        cmd.args(["run", "-p", &profile]);
        if json {
            cmd.arg("--json");
        }
        cmd.args(["--", "sh", "-c", &script]);
        cmd
    };

    let (lines, code) = merged(&tree, common::without_userns(&run(false)));
    assert_eq!(code, 0, "{lines:#?}");
    let reason = " (carve-outs need the mount-namespace layer, and user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0); set the sysctl user.max_user_namespaces above 0; Landlock rights cannot be subtracted beneath a granted root)";
    let notices: Vec<&String> = lines
        .iter()
        .take_while(|l| l.starts_with("cordon: "))
        .collect();
    // As root, /etc/shadow and /etc/gshadow share the secret's line.
    assert!(
        notices
            .iter()
            .any(|l| l.starts_with("cordon: not enforced: deny_read")
                && l.ends_with(reason)
                && l.contains(&secret.display().to_string())),
        "{lines:#?}"
    );
    assert!(
        !notices
            .iter()
            .any(|l| l.contains(&far.display().to_string())),
        "{lines:#?}"
    );
    // Exactly the receipt's downgrades, one line each, and all of them before the command's
    // first line; then the command's output as it wrote it (the secret in the working
    // directory is readable here, which is what the line says; the far one is not).
    let expected = expected_lines(run(true));
    assert_eq!(notices, expected.iter().collect::<Vec<_>>());
    assert_eq!(
        &lines[notices.len()..],
        ["public", "s3cret", "far-refused", "done"],
        "{lines:#?}"
    );

    // The counterpart, with user namespaces: both are hidden (read as empty), so there is
    // nothing to announce about them, and the public file still reads.
    require_userns!();
    let (lines, code) = merged(&tree, run(false));
    assert_eq!(code, 0, "{lines:#?}");
    assert!(
        !lines
            .iter()
            .any(|l| l.contains(&secret.display().to_string())),
        "{lines:#?}"
    );
    let output: Vec<&String> = lines
        .iter()
        .filter(|l| !l.starts_with("cordon: "))
        .collect();
    assert_eq!(output, ["public", "done"], "{lines:#?}");
}

#[test]
fn a_capped_landlock_abi_is_announced_before_the_output_under_report() {
    require_userns!();
    let tree = Tree::new();
    let profile = profile(&tree, "enforcement = \"report\"\n");
    let mut cmd = tree.cordon();
    cmd.env("CORDON_LANDLOCK_ABI_MAX", "3").args([
        "run",
        "-p",
        &profile,
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2",
    ]);
    let (lines, code) = merged(&tree, cmd);
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(
        lines,
        [
            "cordon: not enforced: landlock_ioctl_dev (ioctl on device files outside the device allow-list is not prevented: needs Landlock ABI 5, the kernel offers 3)",
            "cordon: not enforced: landlock_scope_signal (signals to processes outside the sandbox are not prevented: needs Landlock ABI 6, the kernel offers 3)",
            "cordon: not enforced: landlock_scope_abstract_unix (connecting to abstract unix sockets outside the sandbox is not prevented: needs Landlock ABI 6, the kernel offers 3)",
            "out",
            "err",
        ]
    );

    // Without the cap the same profile has nothing to announce.
    let mut cmd = tree.cordon();
    cmd.args([
        "run",
        "-p",
        &profile,
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2",
    ]);
    let (lines, code) = merged(&tree, cmd);
    assert_eq!(code, 0);
    assert_eq!(lines, ["out", "err"]);
}

#[test]
fn a_capped_landlock_abi_under_the_default_profile_refuses_and_runs_nothing() {
    let tree = Tree::new();
    let marker = tree.outside.join("ran");
    let script = format!("echo out; touch {}", marker.display());
    let mut cmd = tree.cordon();
    cmd.env("CORDON_LANDLOCK_ABI_MAX", "3").args([
        "run",
        "-w",
        &tree.outside.display().to_string(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let (lines, code) = merged(&tree, cmd);
    assert_eq!(code, 125);
    assert_eq!(
        lines,
        ["cordon: sandbox setup failed at step enforcement: refusing to run: landlock_ioctl_dev cannot be enforced (ioctl on device files outside the device allow-list is not prevented: needs Landlock ABI 5, the kernel offers 3); set enforcement to \"report\" to run without it"]
    );
    assert!(!marker.exists(), "the command ran although it was refused");

    // The harmless counterpart: uncapped, the same command runs and leaves its mark.
    let mut cmd = tree.cordon();
    cmd.args([
        "run",
        "-w",
        &tree.outside.display().to_string(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let (lines, code) = merged(&tree, cmd);
    assert_eq!((code, lines), (0, vec!["out".to_owned()]));
    assert!(marker.exists());
}

/// The helper itself holds the command back until the parent has shown the downgrades: with
/// the hold pipe's write end still open nothing runs; closing it lets the command run. Without
/// downgrades there is nothing to show and the helper does not wait.
#[test]
fn the_helper_waits_for_the_hold_pipe_only_when_there_are_downgrades() {
    use std::io::{BufRead, BufReader};
    use std::time::Duration;

    use cordon::helper::Helper;
    use cordon::sandbox::status::StatusRecord;
    use cordon::sandbox::SandboxPolicy;

    let tree = Tree::new();
    let marker = tree.outside.join("ran");
    let policy = SandboxPolicy::from_json(&format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{:?}]}},"network":{{"mode":"denied"}},"enforcement":{{"missing_layer":"report","carve_outs":"report"}}}}"#,
        tree.outside.display()
    ))
    .unwrap();
    let helper = Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon"));
    let argv = [
        "sh".into(),
        "-c".into(),
        format!("echo ran > {}", marker.display()).into(),
    ];
    for (cap, waits) in [(Some("3"), true), (None, false)] {
        let _ = std::fs::remove_file(&marker);
        let mut launch = helper
            .command_held(&policy, &tree.cwd, &argv, &[])
            .expect("launch");
        launch.command.env_remove("CORDON_LANDLOCK_ABI_MAX");
        if let Some(cap) = cap {
            launch.command.env("CORDON_LANDLOCK_ABI_MAX", cap);
        }
        let mut child = launch.command.spawn().expect("spawn the helper");
        let (read, hold) = launch.status.into_read_end_and_hold();
        let mut first = String::new();
        let mut reader = BufReader::new(read);
        reader.read_line(&mut first).expect("the confined record");
        let Ok(StatusRecord::Confined(receipt)) = serde_json::from_str(&first) else {
            panic!("not a confined record: {first}");
        };
        assert_eq!(!receipt.downgrades.is_empty(), waits, "{first}");
        if waits {
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                !marker.exists(),
                "the command ran before the hold was released"
            );
        } else {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !marker.exists() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(
                marker.exists(),
                "without downgrades the helper must not wait"
            );
        }
        drop(hold);
        assert!(child.wait().unwrap().success());
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    }
}
