//! Resource limits against the real kernel: a fork bomb stopped (and the host still spawning
//! processes meanwhile), an allocation past the memory limit, CPU time and file size, each
//! with a harmless counterpart under the same limit that must keep working.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cordon::exec::limits::{LimitKind, Limits, Mechanism};
use cordon::exec::{ExecRequest, ExecResult, Outcome, Sandbox};
use cordon::helper::Helper;
use cordon::sandbox::SandboxPolicy;

fn sandbox() -> Sandbox {
    Sandbox::new(Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon")))
}

fn policy(writable: &Path) -> SandboxPolicy {
    let json = format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{:?}]}},
            "network":{{"mode":"denied","unix_sockets":"deny"}},
            "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#,
        writable.to_str().unwrap()
    );
    SandboxPolicy::from_json(&json).unwrap()
}

struct Dir {
    _tmp: tempfile::TempDir,
    path: PathBuf,
}

fn workdir() -> Dir {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().canonicalize().unwrap();
    Dir { _tmp: tmp, path }
}

fn py(dir: &Dir, script: &str, limits: Limits) -> ExecRequest {
    let mut request =
        ExecRequest::sandboxed(["python3", "-c", script], &dir.path, policy(&dir.path))
            .timeout(Duration::from_secs(20));
    request.limits = limits;
    request
}

fn receipt(result: &ExecResult, kind: LimitKind) -> &cordon::exec::limits::LimitReceipt {
    result
        .limits
        .iter()
        .find(|r| r.limit == kind)
        .unwrap_or_else(|| panic!("no receipt for {kind}: {:?}", result.limits))
}

/// Forks children that sleep until fork fails; prints how many it got.
const FORK_UNTIL_REFUSED: &str = r#"
import os, sys, time
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except BlockingIOError as e:
    print("refused after", n, "errno", e.errno, flush=True)
    sys.exit(3)
print("forked", n, flush=True)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_stopped_at_the_process_limit() {
    let dir = workdir();
    let limits = Limits {
        processes: Some(16),
        ..Limits::default()
    };
    let result = sandbox().exec(py(&dir, FORK_UNTIL_REFUSED, limits)).await;
    assert_eq!(
        result.outcome,
        Outcome::LimitExceeded {
            limit: LimitKind::Processes,
            code: 3
        },
        "{}",
        result.output.text()
    );
    let text = result.stdout.text();
    let got: u32 = text
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text:?}"));
    assert!(got < 16, "{text:?}");
    assert!(
        text.ends_with(&format!("errno {}\n", libc::EAGAIN)),
        "{text:?}"
    );
    let r = receipt(&result, LimitKind::Processes);
    assert_eq!(r.value, 16);
    // We run as root on the project's machines, where a cgroup can always be made, and
    // RLIMIT_NPROC would not bind root anyway.
    assert!(
        matches!(r.mechanism, Mechanism::CgroupV1 | Mechanism::CgroupV2),
        "{r:?}"
    );

    // The harmless counterpart: a few processes under the same limit are fine.
    let few = r#"
import os
pids = [os.fork() or os._exit(0) for _ in range(4)]
for p in pids: os.waitpid(p, 0)
print("four")
"#;
    let ok = sandbox().exec(py(&dir, few, limits)).await;
    assert_eq!(ok.outcome, Outcome::Success, "{}", ok.output.text());
    assert_eq!(ok.stdout.text(), "four\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_fork_bomb_leaves_the_host_responsive() {
    let dir = workdir();
    let mut request = ExecRequest::sandboxed(
        ["bash", "-c", "b() { b | b & }; b; sleep 10"],
        &dir.path,
        policy(&dir.path),
    )
    .timeout(Duration::from_secs(3));
    request.limits = Limits {
        processes: Some(32),
        ..Limits::default()
    };
    let bomb = tokio::spawn(async move { sandbox().exec(request).await });
    // While it runs, the host still starts processes, promptly.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    for _ in 0..5 {
        let began = Instant::now();
        let out = std::process::Command::new("true").status().unwrap();
        assert!(out.success());
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "{:?}",
            began.elapsed()
        );
    }
    let result = bomb.await.unwrap();
    assert!(
        matches!(
            result.outcome,
            Outcome::LimitExceeded {
                limit: LimitKind::Processes,
                ..
            }
        ),
        "{:?}",
        result.outcome
    );
    // Nothing of it is left: no bash of the bomb's is still running.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let leftover = std::process::Command::new("pgrep")
        .args(["-f", "b\\(\\) \\{ b \\| b & \\}"])
        .output()
        .unwrap();
    assert!(
        leftover.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&leftover.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocation_past_the_memory_limit_ends_as_limit_exceeded() {
    let dir = workdir();
    let limits = Limits {
        memory: Some(64 << 20),
        ..Limits::default()
    };
    // Written, not only reserved, so the pages are really charged.
    let hog = "b = b'x' * (256 << 20); print('allocated', len(b))";
    let result = sandbox().exec(py(&dir, hog, limits)).await;
    assert!(
        matches!(
            result.outcome,
            Outcome::LimitExceeded {
                limit: LimitKind::Memory,
                ..
            }
        ),
        "{:?} {}",
        result.outcome,
        result.output.text()
    );
    assert!(!result.stdout.text().contains("allocated"));
    assert!(matches!(
        receipt(&result, LimitKind::Memory).mechanism,
        Mechanism::CgroupV1 | Mechanism::CgroupV2
    ));

    let modest = "b = b'x' * (8 << 20); print('allocated', len(b))";
    let ok = sandbox().exec(py(&dir, modest, limits)).await;
    assert_eq!(ok.outcome, Outcome::Success, "{}", ok.output.text());
    assert_eq!(ok.stdout.text(), format!("allocated {}\n", 8 << 20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_time_and_file_size_limits_end_as_limit_exceeded() {
    let dir = workdir();
    let cpu = Limits {
        cpu_time: Some(1),
        ..Limits::default()
    };
    let began = Instant::now();
    let spin = sandbox().exec(py(&dir, "while True: pass", cpu)).await;
    assert_eq!(
        spin.outcome,
        Outcome::LimitExceeded {
            limit: LimitKind::CpuTime,
            code: 128 + libc::SIGXCPU
        }
    );
    assert!(began.elapsed() < Duration::from_secs(10));
    assert_eq!(
        receipt(&spin, LimitKind::CpuTime).mechanism,
        Mechanism::Rlimit
    );
    let quick = sandbox()
        .exec(py(&dir, "print(sum(range(1000)))", cpu))
        .await;
    assert_eq!(quick.outcome, Outcome::Success);

    let size = Limits {
        file_size: Some(1 << 20),
        ..Limits::default()
    };
    let big = dir.path.join("big");
    // Not python: it ignores SIGXFSZ and sees EFBIG instead, a failure of its own.
    let sh = |script: String| {
        let mut request =
            ExecRequest::sandboxed(["sh", "-c", &script], &dir.path, policy(&dir.path));
        request.limits = size;
        request
    };
    let r = sandbox()
        .exec(sh(format!("head -c 2097152 /dev/zero > {}", big.display())))
        .await;
    assert_eq!(
        r.outcome,
        Outcome::LimitExceeded {
            limit: LimitKind::FileSize,
            code: 128 + libc::SIGXFSZ
        }
    );
    // From outside: the file stopped at the limit.
    assert_eq!(std::fs::metadata(&big).unwrap().len(), 1 << 20);
    let small = dir.path.join("small");
    let ok = sandbox()
        .exec(sh(format!(
            "head -c 524288 /dev/zero > {}",
            small.display()
        )))
        .await;
    assert_eq!(ok.outcome, Outcome::Success);
    assert_eq!(std::fs::metadata(&small).unwrap().len(), 512 << 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_limit_is_rejected_and_nothing_runs() {
    let dir = workdir();
    let marker = dir.path.join("ran");
    let mut request = ExecRequest::sandboxed(
        ["touch", marker.to_str().unwrap()],
        &dir.path,
        policy(&dir.path),
    );
    request.limits = Limits {
        memory: Some(0),
        ..Limits::default()
    };
    let result = sandbox().exec(request).await;
    assert_eq!(
        result.outcome,
        Outcome::Rejected {
            reason: "the memory limit must be above zero".into()
        }
    );
    assert!(!marker.exists());
}

mod cli {
    use super::common::Tree;

    #[test]
    fn profile_limits_apply_and_the_command_line_only_lowers_them() {
        let tree = Tree::new();
        let profile = tree.root.join("limited.toml");
        std::fs::write(
            &profile,
            "extends = \"workspace-write\"\n[limits]\nmemory = \"64M\"\nprocesses = 16\n",
        )
        .unwrap();
        let out = tree.run(&[
            "-p",
            profile.to_str().unwrap(),
            "--processes",
            "8",
            "--memory",
            "1G",
            "--json",
            "--",
            "true",
        ]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["outcome"], "success", "{report}");
        let limits = report["limits"].as_array().unwrap();
        let value = |name: &str| {
            limits
                .iter()
                .find(|l| l["limit"] == name)
                .map(|l| l["value"].clone())
        };
        assert_eq!(
            value("memory"),
            Some(serde_json::json!(64 << 20)),
            "{report}"
        );
        assert_eq!(value("processes"), Some(serde_json::json!(8)), "{report}");

        std::fs::write(
            &profile,
            "extends = \"workspace-write\"\n[limits]\nmemory = \"lots\"\n",
        )
        .unwrap();
        let marker = tree.cwd.join("ran");
        let out = tree.run(&[
            "-p",
            profile.to_str().unwrap(),
            "--",
            "touch",
            marker.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(125));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("\"lots\" is not a size like 512M or 2G"),
            "{stderr}"
        );
        assert!(!marker.exists());
    }
}
