//! The supervised runtime against real processes, confined by the `cordon` binary acting as
//! its own helper.

mod common;

use std::time::{Duration, Instant};

use common::{lib_policy as policy, lib_sandbox as sandbox, workdir, WorkDir as Dir};
use cordon::exec::capture::elision_marker;
use cordon::exec::{
    EnvPolicy, ExecEvent, ExecRequest, ExecResult, Outcome, ParentStep, Sandbox, SandboxMode,
    SetupStep, StreamKind,
};
use cordon::sandbox::status::{Layer, Step};
use tokio_util::sync::CancellationToken;

fn sh(dir: &Dir, script: &str) -> ExecRequest {
    ExecRequest::sandboxed(["sh", "-c", script], &dir.path, policy(&dir.path))
}

/// Whether a process is gone (or only a zombie waiting for its new parent to reap it).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

async fn assert_gone_soon(pid: u32) {
    for _ in 0..50 {
        if process_gone(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("process {pid} survived the run");
}

/// A `sleep` duration no other process uses, so that the command's processes can be found
/// from outside by their command line: pids printed inside the sandbox's pid namespace mean
/// nothing out here.
fn unique_sleep() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("100.{}{:04}", std::process::id(), n)
}

/// Live (non-zombie) processes whose arguments include `arg`, read from the host's /proc.
fn processes_with_arg(arg: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
                .unwrap_or(false)
                && !process_gone(pid)
        })
        .collect()
}

async fn assert_none_soon(arg: &str) {
    for _ in 0..50 {
        if processes_with_arg(arg).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "processes {:?} running `sleep {arg}` survived the run",
        processes_with_arg(arg)
    );
}

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_is_confined_and_captures_both_streams() {
    let dir = workdir();
    let result = sandbox()
        .exec(sh(
            &dir,
            "echo out:$CORDON_SANDBOX:$CORDON_SANDBOX_NETWORK_DISABLED; echo err >&2",
        ))
        .await;
    assert_eq!(result.outcome, Outcome::Success, "{result:?}");
    assert_eq!(result.cordon_exit_code(), 0);
    assert_eq!(result.sandbox, SandboxMode::Helper);
    assert_eq!(result.stdout.text(), "out:1:1\n");
    assert_eq!(result.stderr.text(), "err\n");
    assert_eq!(result.output.total, 12);
    let receipt = result.receipt.as_ref().expect("confined record");
    assert!(receipt.layers.contains(&Layer::Seccomp), "{receipt:?}");
    assert!(receipt.layers.contains(&Layer::LandlockFs), "{receipt:?}");
    assert!(receipt.landlock_abi >= 1);
    assert_eq!(result.exit_code, Some(0));
    assert!(result.pid.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_keeps_the_commands_code_even_125() {
    let dir = workdir();
    let result = sandbox().exec(sh(&dir, "exit 3")).await;
    assert_eq!(result.outcome, Outcome::Failed { code: 3 });
    assert_eq!(result.cordon_exit_code(), 3);
    // A command exiting 125 is not a setup error: the status pipe says it was confined.
    let result = sandbox().exec(sh(&dir, "exit 125")).await;
    assert_eq!(result.outcome, Outcome::Failed { code: 125 });
    assert!(result.receipt.is_some());
    // A write the policy forbids is just a failure here; classification is a later stage.
    let result = sandbox().exec(sh(&dir, "touch /etc/cordon-denied")).await;
    assert_eq!(result.outcome, Outcome::Failed { code: 1 });
    let text = result.stderr.text();
    assert!(
        text.contains("Permission denied") || text.contains("Read-only file system"),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_tree_even_when_a_grandchild_holds_stdout() {
    let dir = workdir();
    let timeout = Duration::from_secs(1);
    let started = Instant::now();
    let marker = unique_sleep();
    let script = format!("sleep {marker} & echo $!; sleep {marker}");
    let result = sandbox().exec(sh(&dir, &script).timeout(timeout)).await;
    let elapsed = started.elapsed();
    assert_eq!(result.outcome, Outcome::TimedOut, "{result:?}");
    assert_eq!(result.cordon_exit_code(), 124);
    assert_eq!(result.signal, Some(9));
    assert!(
        elapsed < timeout + Duration::from_secs(2),
        "took {elapsed:?}"
    );
    assert!(elapsed >= timeout, "returned early: {elapsed:?}");
    assert_none_soon(&marker).await;
    assert_gone_soon(result.pid.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn normal_exit_does_not_wait_for_a_background_child_holding_stdout() {
    let dir = workdir();
    let started = Instant::now();
    let marker = unique_sleep();
    let script = format!("sleep {marker} & echo $!");
    let result = sandbox()
        .exec(sh(&dir, &script).timeout(Duration::from_secs(60)))
        .await;
    let elapsed = started.elapsed();
    assert_eq!(result.outcome, Outcome::Success, "{result:?}");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    assert_none_soon(&marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_kills_and_reports_cancelled() {
    let dir = workdir();
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let result = sandbox()
        .exec(sh(&dir, "sleep 100 & sleep 100").cancel_token(token))
        .await;
    assert_eq!(result.outcome, Outcome::Cancelled, "{result:?}");
    assert_eq!(result.cordon_exit_code(), 130);
    assert!(started.elapsed() < Duration::from_secs(3));

    // A token cancelled before the call spawns nothing.
    let token = CancellationToken::new();
    token.cancel();
    let result = sandbox().exec(sh(&dir, "true").cancel_token(token)).await;
    assert_eq!(result.outcome, Outcome::Cancelled);
    assert_eq!(result.pid, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_is_capped_head_and_tail_intact_memory_bounded() {
    let dir = workdir();
    const BODY: u64 = 200 * 1024 * 1024;
    let limit = 1 << 20;
    let before = vm_hwm_kib();
    let result = sandbox()
        .exec(
            sh(
                &dir,
                &format!("echo START; head -c {BODY} /dev/zero; echo END"),
            )
            .timeout(Duration::from_secs(120)),
        )
        .await;
    let growth_mib = (vm_hwm_kib().saturating_sub(before)) / 1024;
    assert_eq!(result.outcome, Outcome::Success, "{:?}", result.outcome);
    let total = BODY + 6 + 4;
    let dropped = total - limit as u64;
    assert_eq!(result.stdout.total, total);
    assert_eq!(result.stdout.dropped, dropped);
    let marker = elision_marker(dropped);
    let bytes = &result.stdout.bytes;
    assert_eq!(bytes.len(), limit + marker.len());
    let mut head = b"START\n".to_vec();
    head.resize(limit / 2, 0);
    assert_eq!(&bytes[..limit / 2], &head[..], "head");
    assert_eq!(
        &bytes[limit / 2..limit / 2 + marker.len()],
        marker.as_bytes()
    );
    let mut tail = vec![0u8; limit / 2 - 4];
    tail.extend_from_slice(b"END\n");
    assert_eq!(&bytes[limit / 2 + marker.len()..], &tail[..], "tail");
    assert_eq!(result.output.total, total);
    assert_eq!(result.output.dropped, dropped);
    assert!(growth_mib < 64, "peak RSS grew by {growth_mib} MiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_and_loader_variables_are_dropped_and_named() {
    // Names unique to this test, so other tests' environments are unaffected in substance.
    std::env::set_var("CORDON_TEST_API_KEY", "hunter2-value");
    std::env::set_var("LD_CORDON_TEST_LOADER", "loader-value");
    std::env::set_var("CORDON_SANDBOX_TEST_FAKE", "1");
    std::env::set_var("CORDON_TEST_PLAIN", "plain-value");
    let dir = workdir();
    let env = EnvPolicy::default().with_var("CORDON_TEST_EXPLICIT_TOKEN", "given");
    let result = sandbox().exec(sh(&dir, "env").env(env.clone())).await;
    assert_eq!(result.outcome, Outcome::Success);
    let out = result.stdout.text();
    assert!(out.contains("CORDON_TEST_PLAIN=plain-value"));
    assert!(out.contains("CORDON_TEST_EXPLICIT_TOKEN=given"));
    assert!(out.contains("CORDON_SANDBOX=1\n"));
    for name in [
        "CORDON_TEST_API_KEY",
        "LD_CORDON_TEST_LOADER",
        "CORDON_SANDBOX_TEST_FAKE",
    ] {
        assert!(
            result.dropped_env.iter().any(|d| d == name),
            "{name} not reported"
        );
        assert!(!out.contains(&format!("{name}=")), "{name} leaked");
    }
    let json = serde_json::to_string(&result).unwrap();
    assert!(!json.contains("hunter2-value") && !json.contains("loader-value"));

    // Unsandboxed: same filtering, and no marker claims confinement.
    let request = ExecRequest::unsandboxed(["env"], &dir.path).env(env);
    let result = sandbox().exec(request).await;
    assert_eq!(result.sandbox, SandboxMode::None);
    assert!(result.receipt.is_none());
    let out = result.stdout.text();
    assert!(!out.contains("CORDON_SANDBOX"), "{out}");
    assert!(!out.contains("hunter2-value"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signaled_by_its_own_hand() {
    let dir = workdir();
    let result = sandbox().exec(sh(&dir, "kill -9 $$")).await;
    assert_eq!(result.outcome, Outcome::Signaled { signal: 9 });
    assert_eq!(result.cordon_exit_code(), 137);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_error_comes_from_the_status_record() {
    let dir = workdir();
    let mut policy = policy(&dir.path);
    policy.filesystem.read.push(dir.path.join("does-not-exist"));
    let request = ExecRequest::sandboxed(["true"], &dir.path, policy);
    let result = sandbox().exec(request).await;
    match &result.outcome {
        Outcome::SetupError {
            step,
            errno,
            message,
        } => {
            assert_eq!(*step, SetupStep::Helper(Step::Landlock));
            assert_eq!(*errno, Some(libc::ENOENT));
            assert!(message.contains("does-not-exist"), "{message}");
        }
        other => panic!("expected a setup error, got {other:?}"),
    }
    assert_eq!(result.cordon_exit_code(), 125);
    assert_eq!(result.exit_code, Some(125));
    assert!(result.receipt.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_error_for_a_missing_program() {
    let dir = workdir();
    let request = ExecRequest::sandboxed(["cordon-no-such-program"], &dir.path, policy(&dir.path));
    let result = sandbox().exec(request).await;
    assert!(
        matches!(result.outcome, Outcome::ExecError { errno, .. } if errno == libc::ENOENT),
        "{result:?}"
    );
    assert_eq!(result.cordon_exit_code(), 127);
    assert!(
        result.receipt.is_some(),
        "confinement happened before execve"
    );

    let result = sandbox()
        .exec(ExecRequest::unsandboxed(
            ["cordon-no-such-program"],
            &dir.path,
        ))
        .await;
    assert!(matches!(result.outcome, Outcome::ExecError { errno, .. } if errno == libc::ENOENT));
    assert_eq!(result.cordon_exit_code(), 127);

    // Not executable: 126.
    let script = dir.path.join("script");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let request = ExecRequest::sandboxed([script.as_os_str()], &dir.path, policy(&dir.path));
    let result = sandbox().exec(request).await;
    assert!(matches!(result.outcome, Outcome::ExecError { errno, .. } if errno == libc::EACCES));
    assert_eq!(result.cordon_exit_code(), 126);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_requests_are_rejected_before_spawning() {
    let dir = workdir();
    let file = dir.path.join("file");
    std::fs::write(&file, "").unwrap();
    let mut bad_policy = policy(&dir.path);
    bad_policy.filesystem.write.push("relative/path".into());
    let cases: Vec<(ExecRequest, &str)> = vec![
        (
            ExecRequest::sandboxed(Vec::<String>::new(), &dir.path, policy(&dir.path)),
            "empty",
        ),
        (
            ExecRequest::sandboxed(["true"], dir.path.join("missing"), policy(&dir.path)),
            "missing",
        ),
        (
            ExecRequest::sandboxed(["true"], &file, policy(&dir.path)),
            "not a directory",
        ),
        (
            ExecRequest::sandboxed(["true"], &dir.path, bad_policy),
            "relative/path",
        ),
        (
            sh(&dir, "true").env(EnvPolicy::default().with_var("LD_PRELOAD", "/x.so")),
            "LD_PRELOAD",
        ),
    ];
    for (request, needle) in cases {
        let result = sandbox().exec(request).await;
        match &result.outcome {
            Outcome::Rejected { reason } => assert!(reason.contains(needle), "{reason}"),
            other => panic!("expected rejection ({needle}), got {other:?}"),
        }
        assert_eq!(result.cordon_exit_code(), 125);
        assert_eq!(result.pid, None);
    }
    let result = Sandbox::without_helper().exec(sh(&dir, "true")).await;
    assert!(matches!(result.outcome, Outcome::Rejected { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_bytes_are_delivered_and_default_is_dev_null() {
    let dir = workdir();
    let result = sandbox()
        .exec(ExecRequest::sandboxed(["cat"], &dir.path, policy(&dir.path)).stdin_bytes("hello\n"))
        .await;
    assert_eq!(result.outcome, Outcome::Success);
    assert_eq!(result.stdout.text(), "hello\n");
    // Larger than a pipe buffer, so the writer really has to stream.
    let big = vec![b'x'; 1 << 20];
    let result = sandbox().exec(sh(&dir, "wc -c").stdin_bytes(big)).await;
    assert_eq!(result.stdout.text().trim(), "1048576");
    let result = sandbox()
        .exec(
            ExecRequest::sandboxed(["cat"], &dir.path, policy(&dir.path))
                .timeout(Duration::from_secs(10)),
        )
        .await;
    assert_eq!(result.outcome, Outcome::Success);
    assert_eq!(result.stdout.total, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_events_arrive_in_order() {
    let dir = workdir();
    let mut rx = sandbox().exec_streaming(sh(&dir, "echo a; sleep 0.2; echo b >&2; echo c"));
    let mut events = Vec::new();
    while let Some(event) = rx.recv().await {
        events.push(event);
    }
    assert!(
        matches!(events.first(), Some(ExecEvent::Started { .. })),
        "{events:?}"
    );
    let Some(ExecEvent::Finished(result)) = events.last() else {
        panic!("last event is not Finished: {events:?}");
    };
    assert_eq!(result.outcome, Outcome::Success);
    let ExecEvent::Started { pid, argv } = &events[0] else {
        unreachable!()
    };
    assert_eq!(Some(*pid), result.pid);
    assert_eq!(argv[0], "sh");
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    for event in &events[1..events.len() - 1] {
        match event {
            ExecEvent::Output {
                stream: StreamKind::Stdout,
                bytes,
            } => stdout.extend_from_slice(bytes),
            ExecEvent::Output {
                stream: StreamKind::Stderr,
                bytes,
            } => stderr.extend_from_slice(bytes),
            other => panic!("unexpected event in the middle: {other:?}"),
        }
    }
    assert_eq!(stdout, b"a\nc\n");
    assert_eq!(stderr, b"b\n");
    // The sleep separates "a" from "b", so the interleaved capture has them in that order.
    assert!(
        result.output.text().starts_with("a\n"),
        "{:?}",
        result.output.text()
    );

    // A rejected request streams only Finished.
    let mut rx =
        sandbox().exec_streaming(ExecRequest::unsandboxed(Vec::<String>::new(), &dir.path));
    let first = rx.recv().await.unwrap();
    assert!(
        matches!(&first, ExecEvent::Finished(r) if matches!(r.outcome, Outcome::Rejected { .. }))
    );
    assert!(rx.recv().await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classification_seam_turns_failures_into_denials() {
    let dir = workdir();
    let result = sandbox().exec(sh(&dir, "touch /etc/cordon-denied")).await;
    let classified: ExecResult<String> = result.classify(|evidence| {
        // Landlock's EACCES, or EROFS from the namespace layer's read-only mounts.
        let text = evidence.stderr.text();
        if text.contains("Permission denied") || text.contains("Read-only file system") {
            vec!["write /etc/cordon-denied".to_owned()]
        } else {
            Vec::new()
        }
    });
    assert_eq!(
        classified.outcome,
        Outcome::Denied {
            denials: vec!["write /etc/cordon-denied".to_owned()],
            code: 1
        }
    );
    // A success is never a denial, whatever the classifier says.
    let result = sandbox().exec(sh(&dir, "true")).await;
    let classified = result.classify(|_| vec!["bogus".to_owned()]);
    assert_eq!(classified.outcome, Outcome::Success);
    let _ = ParentStep::SpawnHelper;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_future_kills_the_tree() {
    let dir = workdir();
    let pidfile = dir.path.join("pids");
    let marker = unique_sleep();
    let script = format!(
        "sleep {marker} & echo $$ $! > {}; sleep {marker}",
        pidfile.display()
    );
    let sandbox = sandbox();
    let run = sandbox.exec(sh(&dir, &script));
    assert!(tokio::time::timeout(Duration::from_millis(500), run)
        .await
        .is_err());
    assert!(
        std::fs::read_to_string(&pidfile).is_ok(),
        "the command never ran"
    );
    assert_none_soon(&marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_event_receiver_never_stalls_the_command() {
    let dir = workdir();
    let bytes: u64 = 48 << 20;
    let request = sh(&dir, &format!("head -c {bytes} /dev/zero")).timeout(Duration::from_secs(60));
    let mut rx = sandbox().exec_streaming(request);
    // Read nothing while the command runs: the channel fills and the drain must go on.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut streamed = 0u64;
    let mut finished = None;
    while let Some(event) = rx.recv().await {
        match event {
            ExecEvent::Output { bytes, .. } => streamed += bytes.len() as u64,
            ExecEvent::Finished(result) => finished = Some(result),
            ExecEvent::Started { .. } | ExecEvent::Denied(_) => {}
        }
    }
    let result = finished.expect("Finished event");
    assert_eq!(result.outcome, Outcome::Success);
    assert!(
        result.duration < Duration::from_secs(3),
        "{:?}",
        result.duration
    );
    assert!(result.events_dropped_bytes > 0);
    assert_eq!(streamed + result.events_dropped_bytes, bytes);
    assert_eq!(result.stdout.total, bytes);
}

/// A descendant that leaves the process group escapes the kill (documented limit until the
/// PID-namespace layer exists), but it cannot hang the call by holding stdout open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escaped_descendant_holding_stdout_cannot_hang_the_call() {
    let dir = workdir();
    let started = Instant::now();
    let result = sandbox()
        .exec(sh(&dir, "setsid sleep 100 & echo $!").timeout(Duration::from_secs(60)))
        .await;
    assert_eq!(result.outcome, Outcome::Success, "{result:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let escaped: i32 = result.stdout.text().trim().parse().unwrap();
    // Clean up what the runtime, by design, could not reach.
    // SAFETY: sending a signal to a pid this test's command printed.
    unsafe { libc::kill(escaped, libc::SIGKILL) };
}
