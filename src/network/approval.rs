//! Deferred network approvals: a host that no `allow` entry covers is put to an approver while
//! the command runs. The proxy holds the client's connection until the answer comes, asks at
//! most once per `host:port` in a session (concurrent connections wait for the same answer),
//! and remembers the answer for the rest of the session.
//!
//! ```
//! use cordon::network::NetworkApprovals;
//!
//! // Grants pypi.org:443 and nothing else; a real approver asks a person or a policy service.
//! let approvals = NetworkApprovals::new(|request| async move {
//!     request.host == "pypi.org" && request.port == 443
//! });
//! # let _ = approvals;
//! ```
//!
//! The key is `host:port`, not the host alone: an approval grants exactly what the approver
//! was shown, and counts as an exact `allow` entry for it (so, like one, it also reaches a
//! loopback or private address the name resolves to). The approver is asked before the name
//! is resolved: an unlisted name is never looked up, so lookups cannot carry data out.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

/// What the approver is asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkApprovalRequest {
    /// The host as the client named it (normalised: lower-case, no trailing dot).
    pub host: String,
    /// The port.
    pub port: u16,
}

type Answer = Pin<Box<dyn Future<Output = bool> + Send>>;
type Approver = dyn Fn(NetworkApprovalRequest) -> Answer + Send + Sync;
/// One answer per `(host, port)`, filled once by whichever connection asks first.
type Answers = HashMap<(String, u16), Arc<OnceCell<bool>>>;

/// The approver and the session's answers. Cheap to clone; clones share the answers, so one
/// value given to every run of a session asks once per host for the whole session.
#[derive(Clone)]
pub struct NetworkApprovals {
    approver: Arc<Approver>,
    answers: Arc<Mutex<Answers>>,
}

impl std::fmt::Debug for NetworkApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkApprovals")
            .field("answers", &self.answered())
            .finish()
    }
}

impl NetworkApprovals {
    /// Routes unlisted hosts to `approver`, which answers `true` to let the connection through.
    pub fn new<F, Fut>(approver: F) -> NetworkApprovals
    where
        F: Fn(NetworkApprovalRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        NetworkApprovals {
            approver: Arc::new(move |request| Box::pin(approver(request))),
            answers: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The answer for `host:port`: the session's, or the approver's, asked now. A run that
    /// ends while the approver thinks drops this future; the approver's answer, if it comes
    /// later, is then not recorded, and the next run asks again.
    pub async fn decide(&self, host: &str, port: u16) -> bool {
        let cell = {
            let mut answers = match self.answers.lock() {
                Ok(guard) => guard,
                // A panicking approver poisoned it; the answers recorded so far are intact.
                Err(poisoned) => poisoned.into_inner(),
            };
            Arc::clone(answers.entry((host.to_owned(), port)).or_default())
        };
        let request = NetworkApprovalRequest {
            host: host.to_owned(),
            port,
        };
        *cell.get_or_init(|| (self.approver)(request)).await
    }

    /// Every answer given so far in this session, sorted.
    pub fn answered(&self) -> Vec<(String, u16, bool)> {
        let answers = match self.answers.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut out: Vec<_> = answers
            .iter()
            .filter_map(|((h, p), cell)| cell.get().map(|a| (h.clone(), *p, *a)))
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn asks_once_per_host_and_port_even_when_connections_race() {
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&asked);
        let approvals = NetworkApprovals::new(move |r| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                r.host == "ok.test"
            }
        });
        let (a, b, c) = tokio::join!(
            approvals.decide("ok.test", 80),
            approvals.decide("ok.test", 80),
            approvals.decide("no.test", 80)
        );
        assert_eq!((a, b, c), (true, true, false));
        assert!(approvals.clone().decide("ok.test", 80).await);
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        assert!(approvals.decide("ok.test", 81).await);
        assert_eq!(asked.load(Ordering::SeqCst), 3);
        assert_eq!(
            approvals.answered(),
            vec![
                ("no.test".into(), 80, false),
                ("ok.test".into(), 80, true),
                ("ok.test".into(), 81, true)
            ]
        );
    }
}
