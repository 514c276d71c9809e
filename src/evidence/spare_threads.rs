//! Threads for the evidence sources of a run (the seccomp observer, the audit listener), kept
//! for the next run once their job is done.
//!
//! Every confined run with the observer (its light scope is the default) needs a thread for
//! as long as the command runs, and root's runs one more for the audit records. Making a
//! thread costs about 40 µs here, a tenth of a `true` through the library; an embedder running
//! commands back to back pays it on every one. A thread that finishes its job waits
//! [`IDLE_FOR`] for another before it ends. There is no cap: a job never waits for a thread
//! (an observer that waited would leave its command's first watched call waiting too), so the
//! count follows the peak of concurrent runs and falls back when they stop.
//!
//! ```ignore
//! let result = spare_threads::run(|| 6 * 7)?;
//! assert_eq!(result.recv().ok(), Some(42));
//! ```

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::Duration;

/// How long a thread whose job is done waits for the next one before it ends.
pub(crate) const IDLE_FOR: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

/// A set of threads waiting for jobs; the process has one, [`SPARES`].
pub(crate) struct Spares {
    /// The threads waiting for a job, each by a number of its own and its job channel.
    idle: Mutex<Vec<(u64, Sender<Job>)>>,
    next_id: AtomicU64,
}

/// The process's threads for evidence sources.
pub(crate) static SPARES: Spares = Spares::new();

/// What the threads are called: one serves the observer of one run and the audit listener of
/// the next, so no job's name would stay true.
const THREAD_NAME: &str = "cordon-evidence";

/// Runs `job` on one of [`SPARES`]' waiting threads, or on a new one; its result arrives on
/// the receiver (which reports a disconnection instead if the job panicked).
pub(crate) fn run<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> io::Result<Receiver<T>> {
    SPARES.run(job)
}

impl Spares {
    pub(crate) const fn new() -> Spares {
        Spares {
            idle: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Sender<Job>)>> {
        // A job's panic never holds this lock, so poisoning cannot leave the list half-changed.
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// As [`run`], on this set's threads.
    pub(crate) fn run<T: Send + 'static>(
        &'static self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<Receiver<T>> {
        let (result, receiver) = channel();
        let mut job: Job = Box::new(move || {
            let _ = result.send(job());
        });
        loop {
            let waiting = self.idle().pop();
            let Some((_, thread)) = waiting else { break };
            // A thread that ended between its timeout and taking itself off the list has
            // dropped its receiver: the job comes back and the next one is tried.
            match thread.send(job) {
                Ok(()) => return Ok(receiver),
                Err(returned) => job = returned.0,
            }
        }
        std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn(move || self.serve(job))?;
        Ok(receiver)
    }

    fn serve(&self, first: Job) {
        let mut job = first;
        loop {
            job();
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (sender, jobs) = channel();
            self.idle().push((id, sender));
            job = match jobs.recv_timeout(IDLE_FOR) {
                Ok(next) => next,
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {
                    let mut list = self.idle();
                    match list.iter().position(|(i, _)| *i == id) {
                        Some(at) => {
                            list.remove(at);
                            return;
                        }
                        // Taken off the list by `run`, which is about to send: the job must
                        // be run, not lost.
                        None => {
                            drop(list);
                            match jobs.recv() {
                                Ok(next) => next,
                                Err(_) => return,
                            }
                        }
                    }
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test's own set: the process's is shared with every other test's runs.
    static TEST: Spares = Spares::new();

    fn run<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> io::Result<Receiver<T>> {
        TEST.run(job)
    }

    #[test]
    fn a_finished_thread_takes_the_next_job_and_a_panic_is_a_disconnection() {
        // One job at a time: once a finished thread has listed itself (a moment after its
        // result arrives), the next job runs on a thread that ran one before.
        let mut seen = Vec::new();
        let mut reused = false;
        for _ in 0..100 {
            let thread = run(|| std::thread::current().id()).unwrap().recv().unwrap();
            if seen.contains(&thread) {
                reused = true;
                break;
            }
            seen.push(thread);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(reused, "no job ran on the waiting thread");
        let panicked = run(|| -> u32 { panic!("job failed") }).unwrap();
        assert!(panicked.recv().is_err());
        // Jobs that run at the same time each get a thread: none waits for another.
        let (gate_tx, gate) = channel::<()>();
        let gate = std::sync::Arc::new(Mutex::new(gate));
        let blocked: Vec<_> = (0..4)
            .map(|_| {
                let gate = std::sync::Arc::clone(&gate);
                run(move || {
                    let _ = gate.lock().unwrap().recv_timeout(Duration::from_secs(5));
                })
                .unwrap()
            })
            .collect();
        let free = run(|| 7).unwrap();
        assert_eq!(free.recv_timeout(Duration::from_secs(2)), Ok(7));
        drop(gate_tx);
        for b in blocked {
            b.recv().unwrap();
        }
    }
}
