//! The user-shell path with real processes: full access on purpose, a login shell, events in
//! order, errors before anything starts, spawn failure, cancellation of the whole group, a run
//! beside a sandboxed command, the snapshot wrapper's PATH order, and the history record.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::{stderr, stdout, Tree};
use cordon::exec::{ExecRequest, Outcome, Sandbox, StreamKind};
use cordon::helper::Helper;
use cordon::profile::{PermissionProfile, ResolveContext};
use cordon::snapshot::{ShellKind, SnapshotRef};
use cordon::user_shell::{
    history_record, CommandSource, UserShell, UserShellEnd, UserShellError, UserShellEvent,
    UserShellRequest, ABORTED_BY_USER, EXIT_NOT_RUN,
};
use tokio::sync::mpsc;

fn request(tree: &Tree, call_id: &str, command: &str) -> UserShellRequest {
    let mut request = UserShellRequest::new(call_id, command, &tree.cwd).shell("/bin/bash");
    request.env = request.env.clone().with_var("HOME", &tree.home);
    request
}

/// Runs `request` and returns every event sent, in order, and the end.
async fn run(runner: &UserShell, request: UserShellRequest) -> (Vec<UserShellEvent>, UserShellEnd) {
    let (tx, mut rx) = mpsc::channel(1024);
    let end = runner.run(request, tx).await.expect("user shell starts");
    let mut events = Vec::new();
    while let Some(event) = rx.recv().await {
        events.push(event);
    }
    (events, end)
}

fn delta_text(events: &[UserShellEvent], which: StreamKind) -> String {
    let mut text = Vec::new();
    for event in events {
        if let UserShellEvent::OutputDelta { stream, chunk, .. } = event {
            if *stream == which {
                text.extend_from_slice(chunk);
            }
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_shell_login_shell_events_in_order_and_nonzero_exit_is_a_normal_end() {
    let tree = Tree::new();
    std::fs::write(
        tree.home.join(".bash_profile"),
        "export FROM_PROFILE=login\n",
    )
    .expect("write");
    let command =
        "shopt -q login_shell && echo \"$FROM_PROFILE\"; sleep 0.2; echo oops >&2; exit 3";
    let (events, end) = run(&UserShell::new(), request(&tree, "c-1", command)).await;
    match events.first() {
        Some(UserShellEvent::Begin {
            call_id,
            argv,
            cwd,
            source,
        }) => {
            assert_eq!(call_id, "c-1");
            assert_eq!(argv, &["/bin/bash", "-lc", command]);
            assert_eq!(cwd, &tree.cwd);
            assert_eq!(*source, CommandSource::UserShell);
        }
        other => panic!("first event is not Begin: {other:?}"),
    }
    assert_eq!(events.last(), Some(&UserShellEvent::End(end.clone())));
    for event in &events[1..events.len() - 1] {
        assert!(
            matches!(event, UserShellEvent::OutputDelta { call_id, .. } if call_id == "c-1"),
            "{event:?}"
        );
    }
    assert_eq!(delta_text(&events, StreamKind::Stdout), "login\n");
    assert_eq!(delta_text(&events, StreamKind::Stderr), "oops\n");
    assert_eq!(end.exit_code, 3);
    assert_eq!(end.stdout, "login\n");
    assert_eq!(end.stderr, "oops\n");
    assert_eq!(end.aggregated, "login\noops\n");
    assert!(end.duration > Duration::ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_shell_has_full_access_where_a_sandboxed_command_is_denied() {
    let tree = Tree::new();
    let target = tree.outside.join("written-by-person");
    let command = format!("echo mine > '{}' && echo done", target.display());
    let (_, end) = run(&UserShell::new(), request(&tree, "c-2", &command)).await;
    assert_eq!(
        (end.exit_code, end.stdout.as_str()),
        (0, "done\n"),
        "{}",
        end.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("file written outside"),
        "mine\n"
    );

    // The same write from a confined command is refused, and leaves nothing outside.
    let confined_target = tree.outside.join("written-by-model");
    let policy = PermissionProfile::default_profile()
        .resolve(&ResolveContext::new(&tree.cwd).with_home(&tree.home))
        .expect("resolve")
        .policy
        .expect("sandboxed");
    let sandbox = Sandbox::new(Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon")));
    let script = format!("echo model > '{}'", confined_target.display());
    let result = sandbox
        .exec(ExecRequest::sandboxed(
            ["sh", "-c", &script],
            &tree.cwd,
            policy,
        ))
        .await;
    assert_eq!(
        result.outcome,
        Outcome::Failed { code: 2 },
        "{}",
        result.stderr.text()
    );
    // Read-only under the namespace layer's view, refused by Landlock without it.
    let refusal = if common::userns_available() {
        "Read-only file system"
    } else {
        "Permission denied"
    };
    assert!(
        result
            .stderr
            .text()
            .ends_with(&format!("written-by-model: {refusal}\n")),
        "{}",
        result.stderr.text()
    );
    assert!(!confined_target.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_shell_drops_injected_proxy_variables_and_keeps_the_rest() {
    let tree = Tree::new();
    let mut req = request(
        &tree,
        "c-3",
        "echo \"[$HTTPS_PROXY][$no_proxy][$KEEP_ME][${CORDON_SANDBOX-unset}]\"",
    );
    req.env = req
        .env
        .clone()
        .with_var("HTTPS_PROXY", "http://127.0.0.1:3128")
        .with_var("no_proxy", "localhost")
        .with_var("KEEP_ME", "kept");
    let (_, end) = run(&UserShell::new(), req).await;
    assert_eq!(end.stdout, "[][][kept][unset]\n", "{}", end.stderr);
}

#[test]
fn user_shell_cli_environment_is_the_persons_without_markers_or_proxy() {
    let tree = Tree::new();
    let out = tree
        .cordon()
        .args(["shell", "--no-snapshot", "--shell", "/bin/bash", "-c"])
        .arg("echo \"[${CORDON_SANDBOX-unset}][${CORDON_SANDBOX_NETWORK_DISABLED-unset}][${HTTP_PROXY-unset}][${all_proxy-unset}][$GITHUB_TOKEN][$FOO]\"")
        .env("CORDON_SANDBOX", "1")
        .env("CORDON_SANDBOX_NETWORK_DISABLED", "1")
        .env("HTTP_PROXY", "http://127.0.0.1:3128")
        .env("all_proxy", "socks5://127.0.0.1:1080")
        .env("GITHUB_TOKEN", "person-token")
        .env("FOO", "bar")
        .output()
        .expect("spawn cordon");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "[unset][unset][unset][unset][person-token][bar]\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_shell_without_shell_or_local_cwd_fails_before_anything_starts() {
    let tree = Tree::new();
    let marker = tree.outside.join("ran");
    let command = format!("touch '{}'", marker.display());
    let cases: Vec<(UserShellRequest, &str)> = vec![
        (
            request(&tree, "x", &command).shell(tree.root.join("no-such/bash")),
            "is not an executable file",
        ),
        (
            request(&tree, "x", &command).shell("/bin/fish-not-supported"),
            "no usable local shell",
        ),
        (
            UserShellRequest {
                cwd: tree.root.join("missing"),
                ..request(&tree, "x", &command)
            },
            "is not an existing local directory",
        ),
        (
            UserShellRequest {
                cwd: PathBuf::from("work"),
                ..request(&tree, "x", &command)
            },
            "is not an existing local directory",
        ),
        (
            UserShellRequest {
                cwd: tree.root.join("file"),
                ..request(&tree, "x", &command)
            },
            "is not an existing local directory",
        ),
    ];
    std::fs::write(tree.root.join("file"), "").expect("write");
    for (req, expected) in cases {
        let (tx, mut rx) = mpsc::channel(16);
        let err = UserShell::new()
            .run(req, tx)
            .await
            .expect_err("must not start");
        assert!(err.to_string().contains(expected), "{err}");
        assert!(matches!(
            err,
            UserShellError::NoShell(_)
                | UserShellError::ShellNotExecutable(_)
                | UserShellError::Cwd(_)
        ));
        assert!(
            rx.recv().await.is_none(),
            "no event for a command that never started"
        );
    }
    assert!(!marker.exists());
    // The harmless counterpart: the same command with a good shell and cwd runs.
    let (_, end) = run(&UserShell::new(), request(&tree, "x", &command)).await;
    assert_eq!(end.exit_code, 0);
    assert!(marker.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_shell_spawn_failure_ends_with_minus_one_and_the_error() {
    let tree = Tree::new();
    // Named like bash, executable, but its interpreter does not exist: execve fails.
    let shell = tree.root.join("bash");
    std::fs::write(&shell, "#!/nonexistent/interpreter\n").expect("write");
    std::fs::set_permissions(&shell, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let (events, end) = run(
        &UserShell::new(),
        request(&tree, "c-5", "echo never").shell(&shell),
    )
    .await;
    assert!(matches!(events.first(), Some(UserShellEvent::Begin { .. })));
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(end.exit_code, EXIT_NOT_RUN);
    assert_eq!(end.stdout, "");
    assert_eq!(
        end.stderr,
        format!(
            "cannot execute {}: No such file or directory",
            shell.display()
        )
    );
    assert_eq!(end.aggregated, end.stderr);
}

fn alive(pid: i32) -> bool {
    // A zombie is dead for this purpose: it runs nothing.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_shell_cancel_kills_the_process_group_and_says_aborted() {
    let tree = Tree::new();
    let pidfile = tree.root.join("pid");
    let command = format!(
        "echo started; sleep 300 & echo $! > '{}'; wait",
        pidfile.display()
    );
    let req = request(&tree, "c-6", &command);
    let cancel = req.cancel.clone();
    let runner = UserShell::new();
    let task = tokio::spawn(async move { run(&runner, req).await });
    let mut pid = None;
    for _ in 0..200 {
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            pid = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let pid = pid.expect("background sleep started");
    assert!(alive(pid));
    cancel.cancel();
    let (_, end) = task.await.expect("join");
    assert_eq!(end.exit_code, EXIT_NOT_RUN);
    assert_eq!(end.stdout, "started\n");
    assert_eq!(end.stderr, ABORTED_BY_USER);
    assert_eq!(end.aggregated, format!("started\n{ABORTED_BY_USER}"));
    let mut gone = false;
    for _ in 0..100 {
        if !alive(pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the background sleep {pid} outlived the cancellation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_shell_runs_beside_a_sandboxed_command_without_disturbing_it() {
    let tree = Tree::new();
    let policy = PermissionProfile::default_profile()
        .resolve(&ResolveContext::new(&tree.cwd).with_home(&tree.home))
        .expect("resolve")
        .policy
        .expect("sandboxed");
    let sandbox = Sandbox::new(Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon")));
    let denied = tree.outside.join("model");
    let script = format!(
        "sleep 0.5; echo confined > inside; echo confined; echo x > '{}' || echo refused",
        denied.display()
    );
    let confined = sandbox.exec(ExecRequest::sandboxed(
        ["sh", "-c", &script],
        &tree.cwd,
        policy,
    ));
    let person = tree.outside.join("person");
    let command = format!("echo person > '{}'; echo ok", person.display());
    let runner = UserShell::new();
    let user = run(&runner, request(&tree, "c-7", &command));
    let (confined, (_, end)) = tokio::join!(confined, user);
    assert_eq!(end.exit_code, 0);
    assert_eq!(
        std::fs::read_to_string(&person).expect("person's file"),
        "person\n"
    );
    assert_eq!(
        confined.outcome,
        Outcome::Success,
        "{}",
        confined.stderr.text()
    );
    assert_eq!(confined.stdout.text(), "confined\nrefused\n");
    assert_eq!(
        std::fs::read_to_string(tree.cwd.join("inside")).expect("inside"),
        "confined\n"
    );
    assert!(!denied.exists(), "the confined command stayed confined");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_shell_snapshot_wrapper_keeps_runtime_path_ahead() {
    let tree = Tree::new();
    let runtime_bin = tree.root.join("runtime-bin");
    std::fs::create_dir(&runtime_bin).expect("mkdir");
    let snapshot =
        b"# Snapshot file\nexport PATH='/snap/bin:/usr/bin:/bin'\nexport FROM_SNAPSHOT=yes\n"
            .to_vec();
    let runner = UserShell::new()
        .with_snapshot(
            SnapshotRef {
                path: tree.root.join("unused.sh"),
                kind: ShellKind::Bash,
            },
            Arc::new(snapshot),
        )
        .with_path_prepend(vec![runtime_bin.clone()]);
    let command = "echo \"$PATH\"; echo \"$FROM_SNAPSHOT\"";
    let (events, end) = run(&runner, request(&tree, "c-8", command)).await;
    assert_eq!(
        end.stdout,
        format!("{}:/snap/bin:/usr/bin:/bin\nyes\n", runtime_bin.display()),
        "{}",
        end.stderr
    );
    // The event reports the derived command, never the wrapper.
    assert!(
        matches!(events.first(), Some(UserShellEvent::Begin { argv, .. }) if argv == &["/bin/bash", "-lc", command])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_shell_history_record_truncates_capped_output_once() {
    let tree = Tree::new();
    let command = "head -c 3000 /dev/zero | tr '\\0' a; echo; echo END";
    let req = request(&tree, "c-9", command).output_limit(1000);
    let (_, end) = run(&UserShell::new(), req).await;
    assert_eq!(end.exit_code, 0);
    // The capture already cut the output (1000 of 3005 bytes kept).
    assert_eq!(
        end.aggregated.matches("bytes elided").count(),
        1,
        "{}",
        end.aggregated
    );
    let record = history_record(command, &end, 100);
    assert_eq!(record.matches("bytes elided").count(), 1, "{record}");
    let expected_output = format!(
        "{}\n[... cordon: 2905 bytes elided ...]\n{}\nEND",
        "a".repeat(50),
        "a".repeat(45)
    );
    let duration = format!("{:.4}", end.duration.as_secs_f64());
    assert_eq!(
        record,
        format!("<user_shell_command>\n<command>\n{command}\n</command>\n<result>\nExit code: 0\nDuration: {duration} seconds\nOutput:\n{expected_output}\n</result>\n</user_shell_command>")
    );
}

#[test]
fn user_shell_cli_exit_code_and_bad_cwd() {
    let tree = Tree::new();
    let marker = tree.outside.join("ran");
    let script = format!("touch '{}'; echo out; exit 7", marker.display());
    let bad = tree
        .cordon()
        .args(["shell", "--no-snapshot", "-C", "missing", "-c", &script])
        .output()
        .expect("spawn cordon");
    assert_eq!(bad.status.code(), Some(125));
    assert_eq!(stdout(&bad), "");
    assert_eq!(
        stderr(&bad),
        format!(
            "cordon: user shell: working directory {:?} is not an existing local directory (give an absolute path on this machine)\n",
            tree.cwd.join("missing")
        )
    );
    assert!(!marker.exists());
    let good = tree
        .cordon()
        .args([
            "shell",
            "--no-snapshot",
            "--shell",
            "/bin/sh",
            "-c",
            &script,
        ])
        .output()
        .expect("spawn cordon");
    assert_eq!(good.status.code(), Some(7), "{}", stderr(&good));
    assert_eq!(stdout(&good), "out\n");
    assert!(marker.exists());
}
