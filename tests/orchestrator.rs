//! The orchestrator retries exactly when the sandbox denied something and the approver agrees,
//! with real commands under the real sandbox (only the approver is a test double).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::Tree;
use cordon::classify::Operation;
use cordon::exec::{ExecRequest, Outcome, Sandbox};
use cordon::helper::Helper;
use cordon::orchestrator::{widen, ApprovalRequest, Approver, Decision, Orchestrator};
use cordon::profile::{PermissionProfile, ResolveContext};
use cordon::sandbox::SandboxPolicy;

/// Answers with a fixed kind of decision and counts how often it was asked.
struct Scripted {
    answer: fn(&ApprovalRequest) -> Decision,
    asked: AtomicUsize,
}

impl Scripted {
    fn new(answer: fn(&ApprovalRequest) -> Decision) -> Scripted {
        Scripted {
            answer,
            asked: AtomicUsize::new(0),
        }
    }
    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl Approver for Scripted {
    async fn decide(&self, request: &ApprovalRequest) -> Decision {
        self.asked.fetch_add(1, Ordering::SeqCst);
        (self.answer)(request)
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
    let approver = Scripted::new(|ask| Decision::RetryWith(widen(&ask.policy, &ask.denials)));
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
    let approver = Scripted::new(|ask| Decision::RetryWith(widen(&ask.policy, &ask.denials)));
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
