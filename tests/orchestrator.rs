//! The orchestrator retries exactly when the sandbox denied something and the approver agrees,
//! with real commands under the real sandbox (only the approver is a test double).

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use common::Tree;
use cordon::classify::{Denial, EvidenceKind, Operation};
use cordon::exec::{ExecRequest, Outcome, Sandbox};
use cordon::helper::Helper;
use cordon::orchestrator::{widen, ApprovalRequest, Approver, Decision, Orchestrator, WidenError};
use cordon::profile::{PermissionProfile, ResolveContext};
use cordon::sandbox::SandboxPolicy;

/// Answers with a fixed kind of decision, counts how often it was asked and keeps what it
/// was shown.
struct Scripted {
    answer: fn(&ApprovalRequest) -> Decision,
    asked: AtomicUsize,
    shown: Mutex<Vec<ApprovalRequest>>,
}

impl Scripted {
    fn new(answer: fn(&ApprovalRequest) -> Decision) -> Scripted {
        Scripted {
            answer,
            asked: AtomicUsize::new(0),
            shown: Mutex::new(Vec::new()),
        }
    }
    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
    fn last_shown(&self) -> ApprovalRequest {
        self.shown.lock().unwrap().last().cloned().expect("asked")
    }
}

impl Approver for Scripted {
    async fn decide(&self, request: &ApprovalRequest) -> Decision {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.shown.lock().unwrap().push(request.clone());
        (self.answer)(request)
    }
}

/// The approver most callers write: retry with exactly what the denials show, or not at all.
fn widen_or_deny(ask: &ApprovalRequest) -> Decision {
    match widen(&ask.policy, &ask.denials) {
        Ok(wider) => Decision::RetryWith(wider),
        Err(_) => Decision::Deny,
    }
}

fn orchestrator() -> Orchestrator {
    Orchestrator::new(Sandbox::new(Helper::cordon_binary(env!(
        "CARGO_BIN_EXE_cordon"
    ))))
}

fn policy(tree: &Tree) -> SandboxPolicy {
    PermissionProfile::default_profile()
        .resolve(
            &ResolveContext::new(&tree.cwd)
                .with_home(&tree.home)
                .with_tmpdir(None),
        )
        .unwrap()
        .policy
        .unwrap()
}

fn write_outside(tree: &Tree, name: &str) -> ExecRequest {
    let target = tree.outside.join(name);
    ExecRequest::sandboxed(
        ["sh", "-c", &format!("echo approved > {}", target.display())],
        &tree.cwd,
        policy(tree),
    )
}

#[tokio::test]
async fn denied_write_is_retried_with_the_widened_policy_and_cached() {
    let tree = Tree::new();
    let approver = Scripted::new(widen_or_deny);
    let orchestrator = orchestrator();

    let run = orchestrator.run(write_outside(&tree, "a"), &approver).await;
    let Outcome::Denied { denials, code } = &run.first.outcome else {
        panic!("first attempt: {:?}", run.first.outcome);
    };
    assert_eq!(*code, 2);
    assert_eq!(denials.len(), 1);
    assert_eq!(denials[0].operation, Operation::FileWrite);
    assert_eq!(
        denials[0].target.as_deref(),
        tree.outside.join("a").to_str()
    );
    assert_eq!(approver.asked(), 1);
    assert!(!run.decision_cached);
    let second = run.second.as_ref().expect("a second attempt");
    assert_eq!(second.outcome, Outcome::Success);
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("a")).unwrap(),
        "approved\n"
    );
    assert!(second
        .policy
        .as_ref()
        .unwrap()
        .filesystem
        .write
        .contains(&tree.outside));

    // The same denial again: the cached approval applies, the approver is not asked.
    std::fs::remove_file(tree.outside.join("a")).unwrap();
    let run = orchestrator.run(write_outside(&tree, "a"), &approver).await;
    assert_eq!(approver.asked(), 1);
    assert!(run.decision_cached);
    assert_eq!(run.last().outcome, Outcome::Success);
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("a")).unwrap(),
        "approved\n"
    );

    // A different denial is a different approval.
    let run = orchestrator.run(write_outside(&tree, "b"), &approver).await;
    assert_eq!(approver.asked(), 2);
    assert_eq!(run.last().outcome, Outcome::Success);
}

#[tokio::test]
async fn deny_means_no_second_attempt() {
    let tree = Tree::new();
    let approver = Scripted::new(|_| Decision::Deny);
    let run = orchestrator()
        .run(write_outside(&tree, "c"), &approver)
        .await;
    assert!(matches!(run.first.outcome, Outcome::Denied { .. }));
    assert_eq!(run.decision, Some(Decision::Deny));
    assert!(run.second.is_none());
    assert_eq!(approver.asked(), 1);
    assert!(!tree.outside.join("c").exists());
}

#[tokio::test]
async fn retry_unsandboxed_runs_without_the_helper() {
    let tree = Tree::new();
    let approver = Scripted::new(|_| Decision::RetryUnsandboxed);
    let run = orchestrator()
        .run(write_outside(&tree, "d"), &approver)
        .await;
    let second = run.second.expect("a second attempt");
    assert_eq!(second.outcome, Outcome::Success);
    assert_eq!(second.policy, None);
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("d")).unwrap(),
        "approved\n"
    );
}

#[tokio::test]
async fn network_denial_widens_to_network_enabled() {
    let tree = Tree::new();
    let approver = Scripted::new(widen_or_deny);
    // An uncaught PermissionError from socket(): the traceback real programs print.
    let script = "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\n";
    let request = ExecRequest::sandboxed(
        [common::python().to_str().unwrap(), "-c", script],
        &tree.cwd,
        policy(&tree),
    );
    let run = orchestrator().run(request, &approver).await;
    let Outcome::Denied { denials, .. } = &run.first.outcome else {
        panic!(
            "first attempt: {:?} {}",
            run.first.outcome,
            run.first.stdout.text()
        );
    };
    assert_eq!(denials[0].operation, Operation::Network);
    let second = run.second.expect("a second attempt");
    assert!(!second.policy.as_ref().unwrap().network.mode.is_denied());
    // With the network allowed, the connect reaches loopback and is refused by the kernel:
    // an ordinary failure, not a denial.
    assert_eq!(second.outcome.kind(), "failed", "{}", second.stderr.text());
    assert!(second.stderr.text().contains("ConnectionRefusedError"));
}

#[tokio::test]
async fn failures_without_denial_timeouts_and_exec_errors_are_never_retried() {
    let tree = Tree::new();
    let approver = Scripted::new(|_| Decision::RetryUnsandboxed);
    let orchestrator = orchestrator();
    let cases = [
        ExecRequest::sandboxed(["sh", "-c", "exit 3"], &tree.cwd, policy(&tree)),
        ExecRequest::sandboxed(["sleep", "10"], &tree.cwd, policy(&tree))
            .timeout(Duration::from_millis(200)),
        ExecRequest::sandboxed(["cordon-no-such-program"], &tree.cwd, policy(&tree)),
        ExecRequest::sandboxed(Vec::<String>::new(), &tree.cwd, policy(&tree)),
        ExecRequest::sandboxed(["true"], &tree.cwd, policy(&tree)),
    ];
    let expected = ["failed", "timed_out", "exec_error", "rejected", "success"];
    for (request, kind) in cases.into_iter().zip(expected) {
        let run = orchestrator.run(request, &approver).await;
        assert_eq!(run.first.outcome.kind(), kind);
        assert!(
            run.decision.is_none() && run.second.is_none(),
            "{kind} was retried"
        );
    }
    assert_eq!(approver.asked(), 0);
}

/// A command that writes nothing and only prints the line `sh` prints for a refused write.
fn fake_denial(tree: &Tree, path: &str) -> ExecRequest {
    let line = format!("sh: 1: cannot create {path}: Permission denied");
    ExecRequest::sandboxed(
        ["sh", "-c", &format!("echo '{line}' >&2; exit 2")],
        &tree.cwd,
        policy(tree),
    )
}

fn write_denial(allow_with: String) -> Denial {
    Denial {
        operation: Operation::FileWrite,
        target: None,
        rule: "not under any writable root".into(),
        allow_with,
        evidence: EvidenceKind::Text,
        count: 1,
    }
}

#[tokio::test]
async fn a_printed_denial_is_shown_as_text_evidence_and_widen_grants_exactly_what_it_shows() {
    let tree = Tree::new();
    let approver = Scripted::new(widen_or_deny);
    let run = orchestrator()
        .run(fake_denial(&tree, "/etc/cordon-fake-denial"), &approver)
        .await;
    let shown = approver.last_shown();
    assert_eq!(shown.denials.len(), 1);
    assert_eq!(shown.denials[0].evidence, EvidenceKind::Text);
    assert_eq!(shown.denials[0].allow_with, "--writable /etc");
    assert!(
        shown.denials[0]
            .to_string()
            .ends_with("(from the command's output)"),
        "{}",
        shown.denials[0]
    );
    // Approved: the retry gets /etc and nothing else (not /, not another ancestor).
    let second = run.second.as_ref().expect("a second attempt");
    let before = &shown.policy.filesystem.write;
    let after = &second.policy.as_ref().unwrap().filesystem.write;
    let added: Vec<&PathBuf> = after.iter().filter(|p| !before.contains(p)).collect();
    assert_eq!(added, vec![&PathBuf::from("/etc")]);
    assert!(!Path::new("/etc/cordon-fake-denial").exists());
}

#[tokio::test]
async fn a_denial_of_a_missing_directory_is_not_widened_to_an_ancestor() {
    let tree = Tree::new();
    let missing = tree.outside.join("x-nonexistent");
    let approver = Scripted::new(widen_or_deny);
    let run = orchestrator()
        .run(
            fake_denial(&tree, &format!("{}/file", missing.display())),
            &approver,
        )
        .await;
    assert!(matches!(run.first.outcome, Outcome::Denied { .. }));
    let shown = approver.last_shown();
    assert_eq!(
        shown.denials[0].allow_with,
        format!("--writable {}", missing.display())
    );
    let refused = widen(&shown.policy, &shown.denials).unwrap_err();
    assert_eq!(
        refused,
        WidenError::Missing {
            allow_with: format!("--writable {}", missing.display()),
            path: missing.clone(),
        }
    );
    assert!(refused.to_string().contains("does not exist"), "{refused}");
    // No retry, and the first attempt's policy grants nothing new.
    assert_eq!(run.decision, Some(Decision::Deny));
    assert!(run.second.is_none());
    assert!(!run
        .first
        .policy
        .as_ref()
        .unwrap()
        .filesystem
        .write
        .contains(&tree.outside));
    assert!(!missing.exists());
}

#[tokio::test]
async fn widen_never_grants_the_file_system_root() {
    let tree = Tree::new();
    let approver = Scripted::new(widen_or_deny);
    // A missing file directly under / makes the classifier suggest `--writable /`.
    let run = orchestrator()
        .run(fake_denial(&tree, "/cordon-fake-top-level"), &approver)
        .await;
    let shown = approver.last_shown();
    assert_eq!(shown.denials[0].allow_with, "--writable /");
    assert_eq!(
        widen(&shown.policy, &shown.denials),
        Err(WidenError::FileSystemRoot {
            allow_with: "--writable /".into()
        })
    );
    assert!(run.second.is_none());
    let read_root = Denial {
        operation: Operation::FileRead,
        allow_with: "--readable /".into(),
        ..write_denial(String::new())
    };
    assert!(matches!(
        widen(&policy(&tree), &[read_root]),
        Err(WidenError::FileSystemRoot { .. })
    ));
}

#[tokio::test]
async fn widen_refuses_a_path_that_leads_elsewhere_and_grants_an_existing_one_exactly() {
    let tree = Tree::new();
    let base = policy(&tree);
    std::os::unix::fs::symlink("/", tree.outside.join("to-root")).unwrap();
    let through_link = format!("--writable {}", tree.outside.join("to-root").display());
    assert!(matches!(
        widen(&base, &[write_denial(through_link)]),
        Err(WidenError::NotExact { resolved: Some(ref r), .. }) if r == Path::new("/")
    ));
    assert!(matches!(
        widen(&base, &[write_denial("--writable relative/dir".into())]),
        Err(WidenError::NotExact { .. })
    ));
    // All or nothing: one refused denial keeps the granted one out too.
    let fine = write_denial(format!("--writable {}", tree.outside.display()));
    let missing = write_denial(format!(
        "--writable {}",
        tree.root.join("missing").display()
    ));
    assert!(widen(&base, &[fine.clone(), missing]).is_err());
    let wider = widen(&base, &[fine]).unwrap();
    assert_eq!(wider.filesystem.write.last(), Some(&tree.outside));
    assert_eq!(
        wider.filesystem.write.len(),
        base.filesystem.write.len() + 1
    );
}

/// A unix socket outside the list is granted exactly (that socket added to the list, never
/// all unix sockets), and only when the suggestion names the denial's own target.
#[test]
fn widen_adds_exactly_the_unix_socket_shown_to_the_list() {
    let tree = Tree::new();
    let listed = tree.outside.join("listed.sock");
    let other = tree.outside.join("other.sock");
    let _a = std::os::unix::net::UnixListener::bind(&listed).unwrap();
    let _b = std::os::unix::net::UnixListener::bind(&other).unwrap();
    let mut base = policy(&tree);
    base.network.unix_socket_allow = vec![listed.clone()];
    let denial = |target: &Path, allow_with: String| {
        Denial::new(
            Operation::UnixSocket,
            Some(target.display().to_string()),
            "not in network.unix_sockets",
            allow_with,
            EvidenceKind::SeccompObserver,
        )
    };
    let shown = format!("--allow-unix-socket {}", other.display());
    let wider = widen(&base, &[denial(&other, shown.clone())]).unwrap();
    assert_eq!(
        wider.network.unix_socket_allow,
        vec![listed.clone(), other.clone()]
    );
    assert_eq!(wider.network.unix_sockets, base.network.unix_sockets);
    // A suggestion naming another socket than the denial's target is not granted.
    assert!(widen(&base, &[denial(&listed, shown)]).is_err());
}
