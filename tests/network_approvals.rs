//! Deferred network approvals through the library: hosts outside `network.allow` go to the
//! approver while the command runs; the proxy holds the connection until the answer, asks once
//! per host and port in a session, and remembers the answer for the session's later runs.

mod common;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordon::classify::{classify_result, EvidenceKind, Operation};
use cordon::exec::{ExecRequest, Outcome, Sandbox};
use cordon::helper::Helper;
use cordon::network::{NetworkApprovals, Resolver};
use cordon::sandbox::SandboxPolicy;

fn policy(writable: &std::path::Path) -> SandboxPolicy {
    let json = format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{:?}]}},
            "network":{{"mode":"proxy","unix_sockets":"deny"}},
            "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#,
        writable.to_str().unwrap()
    );
    SandboxPolicy::from_json(&json).unwrap()
}

/// A one-answer-per-connection HTTP server on the host's loopback, counting connections.
fn upstream() -> (u16, Arc<Mutex<usize>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(Mutex::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            *seen.lock().unwrap() += 1;
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n",
            );
        }
    });
    (port, count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_granted_mid_run_and_one_refused_each_asked_once_per_session() {
    if !common::userns_available() {
        eprintln!("SKIPPED: proxy mode needs user namespaces");
        return;
    }
    let tree = common::Tree::new();
    let (port, connections) = upstream();
    let asked: Arc<Mutex<Vec<(String, u16)>>> = Arc::default();
    let log = Arc::clone(&asked);
    // The approver takes its time, as a person would: the command is running and waiting.
    let approvals = NetworkApprovals::new(move |request| {
        log.lock()
            .unwrap()
            .push((request.host.clone(), request.port));
        async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            request.host == "granted.test"
        }
    });
    let local: IpAddr = "127.0.0.1".parse().unwrap();
    let resolver = Resolver::with_hosts([
        ("granted.test".to_owned(), vec![local]),
        ("refused.test".to_owned(), vec![local]),
    ]);
    let script = format!(
        r#"
import time, urllib.request, urllib.error
def get(host):
    start = time.monotonic()
    try:
        body = urllib.request.urlopen(f"http://{{host}}:{port}/", timeout=20).read().decode().strip()
    except urllib.error.HTTPError as e:
        body = str(e.code)
    return body, time.monotonic() - start
body, waited = get("granted.test")
print("granted.test", body, "held" if waited >= 0.3 else "not held")
print("granted.test again", get("granted.test")[0])
print("refused.test", get("refused.test")[0])
"#
    );
    let sandbox = Sandbox::new(Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon")));
    let run = |approvals: NetworkApprovals| {
        let request = ExecRequest::sandboxed(
            [common::python().to_str().unwrap(), "-c", &script],
            &tree.cwd,
            policy(&tree.cwd),
        )
        .network_approvals(approvals)
        .network_resolver(resolver.clone())
        .timeout(Duration::from_secs(60));
        sandbox.exec(request)
    };
    let result = run(approvals.clone()).await;
    assert_eq!(result.outcome, Outcome::Success, "{}", result.stderr.text());
    assert_eq!(
        result.stdout.text(),
        "granted.test ok held\ngranted.test again ok\nrefused.test 403\n"
    );
    // Once per host, although granted.test was requested twice.
    assert_eq!(
        *asked.lock().unwrap(),
        vec![
            ("granted.test".to_owned(), port),
            ("refused.test".to_owned(), port)
        ]
    );
    assert_eq!(
        *connections.lock().unwrap(),
        2,
        "the refused host never reached the server"
    );
    let denial = &result.network_denials[0];
    assert_eq!(result.network_denials.len(), 1);
    assert_eq!(denial.operation, Operation::Network);
    assert_eq!(
        denial.target.as_deref(),
        Some(format!("refused.test:{port}").as_str())
    );
    assert_eq!(denial.evidence, EvidenceKind::Proxy);
    assert!(
        denial.rule.contains("the approver refused it"),
        "{}",
        denial.rule
    );
    assert_eq!(denial.allow_with, "--allow-domain refused.test");

    // The next run of the session asks nobody: both answers are remembered.
    let result = classify_result(run(approvals.clone()).await);
    assert_eq!(result.outcome.kind(), "success");
    assert_eq!(
        result.stdout.text(),
        "granted.test ok not held\ngranted.test again ok\nrefused.test 403\n"
    );
    assert_eq!(asked.lock().unwrap().len(), 2);
    assert_eq!(
        approvals.answered(),
        vec![
            ("granted.test".to_owned(), port, true),
            ("refused.test".to_owned(), port, false)
        ]
    );
    // Without an approver the same host is simply refused.
    let request = ExecRequest::sandboxed(
        [common::python().to_str().unwrap(), "-c", &script],
        &tree.cwd,
        policy(&tree.cwd),
    )
    .network_resolver(resolver.clone());
    let result = sandbox.exec(request).await;
    assert_eq!(
        result.stdout.text(),
        "granted.test 403 not held\ngranted.test again 403\nrefused.test 403\n"
    );
    assert_eq!(asked.lock().unwrap().len(), 2);
}

/// Approve-and-retry for a proxy denial: the orchestrator's approver widens the policy by
/// exactly the host the denial names, and the second attempt reaches it; with network approvals
/// on the orchestrator, the same host is asked about while the command runs instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_orchestrator_retries_with_the_exact_host_or_routes_it_to_the_approver_mid_run() {
    use cordon::orchestrator::{widen, ApprovalRequest, Approver, Decision, Orchestrator};
    if !common::userns_available() {
        eprintln!("SKIPPED: proxy mode needs user namespaces");
        return;
    }
    struct Widen;
    impl Approver for Widen {
        async fn decide(&self, ask: &ApprovalRequest) -> Decision {
            match widen(&ask.policy, &ask.denials) {
                Ok(wider) => Decision::RetryWith(wider),
                Err(_) => Decision::Deny,
            }
        }
    }
    let tree = common::Tree::new();
    let (port, connections) = upstream();
    let local: IpAddr = "127.0.0.1".parse().unwrap();
    let resolver = Resolver::with_hosts([("api.test".to_owned(), vec![local])]);
    let url = format!("http://api.test:{port}/");
    let request = || {
        ExecRequest::sandboxed(
            ["curl", "-sS", "-f", "-m", "20", &url],
            &tree.cwd,
            policy(&tree.cwd),
        )
        .network_resolver(resolver.clone())
    };
    let sandbox = Sandbox::new(Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon")));
    let orchestrator = Orchestrator::new(sandbox.clone());
    let run = orchestrator.run(request(), &Widen).await;
    assert_eq!(run.first.outcome.kind(), "denied");
    let Some(Decision::RetryWith(wider)) = &run.decision else {
        panic!("{:?}", run.decision)
    };
    assert_eq!(wider.network.allow, vec!["api.test".to_owned()]);
    let second = run.second.as_ref().unwrap();
    assert_eq!(second.outcome.kind(), "success", "{}", second.stderr.text());
    assert_eq!(second.stdout.text(), "ok\n");
    assert_eq!(
        *connections.lock().unwrap(),
        1,
        "only the retry reached the server"
    );

    // Routed while the command runs: one attempt, no retry.
    let asked = Arc::new(Mutex::new(0));
    let count = Arc::clone(&asked);
    let orchestrator =
        Orchestrator::new(sandbox).with_network_approvals(NetworkApprovals::new(move |r| {
            *count.lock().unwrap() += 1;
            async move { r.host == "api.test" }
        }));
    let run = orchestrator.run(request(), &Widen).await;
    assert_eq!(
        run.first.outcome.kind(),
        "success",
        "{}",
        run.first.stderr.text()
    );
    assert!(run.decision.is_none() && run.second.is_none());
    assert_eq!(*asked.lock().unwrap(), 1);
    assert_eq!(*connections.lock().unwrap(), 2);
}
