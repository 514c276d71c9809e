//! Long-lived processes for agents: start a command, collect its output until it exits or a
//! yield time passes, and come back later to write to its stdin and collect more.
//!
//! Every process runs through the one supervisor ([`Sandbox::exec_streaming`]): the same
//! policy, helper, timeout, outcomes and process-group kill as a one-shot run. The manager only
//! keeps what a later call needs: the output nobody has collected yet, a bounded transcript
//! (head and tail, like the output caps), the stdin pipe or PTY master, and the result once the
//! command has exited.
//!
//! ```no_run
//! use cordon::exec::process_manager::{ProcessIo, ProcessManager, ProcessStatus};
//! use cordon::exec::{ExecRequest, Sandbox};
//! use std::time::Duration;
//!
//! # async fn demo(policy: cordon::sandbox::SandboxPolicy) -> Result<(), Box<dyn std::error::Error>> {
//! let manager = ProcessManager::new(Sandbox::locate()?);
//! let request = ExecRequest::sandboxed(["python3", "-i", "-q"], "/tmp", policy);
//! let first = manager.start(request, ProcessIo::Pipe, Duration::from_millis(500)).await?;
//! assert_eq!(first.status, ProcessStatus::Running);
//! let answer = manager
//!     .write_stdin(first.process_id, b"print(6 * 7)\n", Duration::from_millis(500))
//!     .await?;
//! assert!(answer.output.text().contains("42"));
//! manager.kill(first.process_id).await?;
//! # Ok(()) }
//! ```
//!
//! Limits: at most [`DEFAULT_MAX_LIVE`] running processes per manager (configurable); starting
//! one more kills the least recently used process that no call is waiting on, and the response
//! says which ([`Response::evicted`]). A process that has exited stays until its result is
//! collected by one more call. Dropping the manager kills every process it holds.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::capture::{CappedBuffer, Captured};
use super::pty::{AsyncStream, Pty, PtyMaster, StdinPipe, WindowSize};
use super::{ExecEvent, ExecRequest, ExecResult, Sandbox, StdinSource};

/// Running processes one manager keeps before it evicts the least recently used idle one.
pub const DEFAULT_MAX_LIVE: usize = 64;
/// Bytes of output kept per process between two calls, and in its transcript (head and tail).
pub const DEFAULT_TRANSCRIPT_LIMIT: usize = 256 * 1024;
/// How long `kill` and eviction wait for the supervisor to report the killed process.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// The identifier of a managed process: small, never reused within one manager.
pub type ProcessId = u64;

/// How the process's standard streams are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessIo {
    /// Whatever the request says (`/dev/null` by default): no `write_stdin`.
    Request,
    /// Stdin is a pipe the manager writes to; stdout and stderr are pipes.
    Pipe,
    /// A pseudo-terminal of this size is the command's controlling terminal and all three
    /// streams; output is the raw terminal stream.
    Pty(WindowSize),
}

/// Why a call could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// No process has this id (never started, already collected, killed or evicted).
    #[error("no process {0} (it exited and was collected, was killed, or never existed)")]
    UnknownProcess(ProcessId),
    /// The process has no stdin to write to.
    #[error("process {0} has no open stdin (start it with a pipe or a tty to write to it)")]
    NoStdin(ProcessId),
    /// Writing to its stdin failed.
    #[error("cannot write to the stdin of process {id}: {source} ({written} bytes written)")]
    Write {
        /// The process.
        id: ProcessId,
        /// Bytes written before the error.
        written: usize,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The process has no terminal to resize.
    #[error("process {0} has no terminal")]
    NoTerminal(ProcessId),
    /// The stdin pipe or PTY could not be made.
    #[error("cannot set up the process's stdin or terminal: {0}")]
    Io(#[from] std::io::Error),
    /// Every live process is in a call right now, so none can be evicted for a new one.
    #[error("{0} processes are running and every one is busy; kill one first")]
    Full(usize),
}

/// Whether the process is still running after a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ProcessStatus {
    /// It is still running; call again with its id.
    Running,
    /// It has ended and is no longer held by the manager.
    Exited {
        /// The supervisor's full result (unclassified; `output`, `stdout` and `stderr` are
        /// capped as for a one-shot run).
        result: Box<ExecResult>,
    },
}

/// What one `start`, `write_stdin` or `kill` call returns.
#[derive(Debug, Clone, Serialize)]
pub struct Response {
    /// The process.
    pub process_id: ProcessId,
    /// Output since the previous call (both streams in the order read; a terminal's raw
    /// stream), capped to the manager's transcript limit with head and tail kept.
    pub output: Captured,
    /// Running, or exited with the result.
    pub status: ProcessStatus,
    /// Processes killed to make room for this one (only ever set by `start`).
    pub evicted: Vec<ProcessInfo>,
    /// Time spent in this call.
    #[serde(with = "millis")]
    pub wall_time: Duration,
}

/// What [`ProcessManager::list`] says about one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessInfo {
    /// The manager's id.
    pub process_id: ProcessId,
    /// The command as given (never a snapshot wrapper).
    #[serde(serialize_with = "lossy_list")]
    pub argv: Vec<OsString>,
    /// Its pid (the helper's, which the command keeps), once spawned.
    pub pid: Option<u32>,
    /// When it was started, in seconds since the Unix epoch.
    pub started_at: u64,
    /// Whether it runs on a pseudo-terminal.
    pub tty: bool,
    /// False once it has exited (its result not yet collected).
    pub running: bool,
    /// Bytes it has written in all.
    pub output_bytes: u64,
}

/// Runs and keeps long-lived processes. Cheap to share behind an `Arc`; every method takes
/// `&self`.
#[derive(Debug)]
pub struct ProcessManager {
    sandbox: Sandbox,
    table: Mutex<Table>,
    max_live: usize,
    transcript_limit: usize,
}

#[derive(Debug, Default)]
struct Table {
    next_id: ProcessId,
    procs: BTreeMap<ProcessId, Arc<Process>>,
}

#[derive(Debug)]
struct Process {
    id: ProcessId,
    argv: Vec<OsString>,
    started_at: SystemTime,
    /// The PTY's master, for resizing (never the slave: see [`Pty::master_handle`]).
    pty: Option<PtyMaster>,
    /// The stdin pipe's write end or the PTY master; `None` once closed.
    stdin: tokio::sync::Mutex<Option<AsyncStream>>,
    cancel: CancellationToken,
    state: Mutex<State>,
    /// Bumped whenever `state` changes; callers wait on it.
    changed: watch::Sender<u64>,
}

#[derive(Debug)]
struct State {
    pid: Option<u32>,
    unread: CappedBuffer,
    transcript: CappedBuffer,
    result: Option<ExecResult>,
    last_used: Instant,
    /// Calls in progress on this process: a busy process is never evicted.
    busy: usize,
}

impl Process {
    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a panic while pushing bytes; the buffers are still valid.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn info(&self) -> ProcessInfo {
        let state = self.state();
        ProcessInfo {
            process_id: self.id,
            argv: self.argv.clone(),
            pid: state.pid,
            started_at: self
                .started_at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            tty: self.pty.is_some(),
            running: state.result.is_none(),
            output_bytes: state.transcript.total(),
        }
    }
}

/// Marks a process busy for the length of a call.
struct Busy(Arc<Process>);

impl Busy {
    fn new(process: Arc<Process>) -> Busy {
        {
            let mut state = process.state();
            state.busy += 1;
            state.last_used = Instant::now();
        }
        Busy(process)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.busy = state.busy.saturating_sub(1);
        state.last_used = Instant::now();
    }
}

impl ProcessManager {
    /// A manager running processes through `sandbox`.
    pub fn new(sandbox: Sandbox) -> ProcessManager {
        ProcessManager {
            sandbox,
            table: Mutex::new(Table::default()),
            max_live: DEFAULT_MAX_LIVE,
            transcript_limit: DEFAULT_TRANSCRIPT_LIMIT,
        }
    }

    /// At most `max` running processes (at least 1).
    pub fn with_max_live(mut self, max: usize) -> ProcessManager {
        self.max_live = max.max(1);
        self
    }

    /// Bytes of output kept per process between calls and in its transcript.
    pub fn with_transcript_limit(mut self, bytes: usize) -> ProcessManager {
        self.transcript_limit = bytes;
        self
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, id: ProcessId) -> Result<Arc<Process>, ManagerError> {
        self.table()
            .procs
            .get(&id)
            .cloned()
            .ok_or(ManagerError::UnknownProcess(id))
    }

    /// Starts `request` and collects its output until it exits or `yield_time` passes. The
    /// request's `stdin` and `tty` are replaced as `io` says. Must be called within a Tokio
    /// runtime that outlives the process (see the parent-death caveat in [`super`]).
    pub async fn start(
        &self,
        mut request: ExecRequest,
        io: ProcessIo,
        yield_time: Duration,
    ) -> Result<Response, ManagerError> {
        let began = Instant::now();
        let evicted = self.make_room().await?;
        let (stdin, pty) = match io {
            ProcessIo::Request => (None, None),
            ProcessIo::Pipe => {
                let (read, write) = StdinPipe::new()?;
                request.stdin = StdinSource::Pipe(read);
                request.tty = None;
                (Some(AsyncStream::new(&write)?), None)
            }
            ProcessIo::Pty(size) => {
                let pty = Pty::open(size)?;
                let master = pty.master_handle();
                let stream = AsyncStream::new(&pty.master)?;
                request.tty = Some(pty);
                (Some(stream), Some(master))
            }
        };
        // Nothing may be dropped between the drain and us: the command waits for the manager
        // (which only appends to memory) rather than lose output.
        request.lossless_events = true;
        let cancel = request.cancel.clone();
        let (changed, _) = watch::channel(0u64);
        let id = {
            let mut table = self.table();
            table.next_id += 1;
            table.next_id
        };
        let process = Arc::new(Process {
            id,
            argv: request.display_argv().to_vec(),
            started_at: SystemTime::now(),
            pty,
            stdin: tokio::sync::Mutex::new(stdin),
            cancel,
            state: Mutex::new(State {
                pid: None,
                unread: CappedBuffer::new(self.transcript_limit),
                transcript: CappedBuffer::new(self.transcript_limit),
                result: None,
                last_used: Instant::now(),
                busy: 0,
            }),
            changed,
        });
        let busy = Busy::new(Arc::clone(&process));
        let mut events = self.sandbox.exec_streaming(request);
        let sink = Arc::clone(&process);
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                {
                    let mut state = sink.state();
                    match event {
                        ExecEvent::Started { pid, .. } => state.pid = Some(pid),
                        ExecEvent::Output { bytes, .. } => {
                            state.unread.push(&bytes);
                            state.transcript.push(&bytes);
                        }
                        ExecEvent::Finished(result) => state.result = Some(*result),
                        // The result lists every denial; a live one changes nothing here.
                        ExecEvent::Denied(_) => {}
                    }
                }
                sink.changed.send_modify(|n| *n += 1);
            }
        });
        self.table().procs.insert(id, Arc::clone(&process));
        let mut response = self.collect(&busy.0, yield_time, began).await;
        response.evicted = evicted;
        Ok(response)
    }

    /// Writes `bytes` to the process's stdin (its terminal, with a PTY) and collects output
    /// until it exits or `yield_time` passes. An empty write only collects.
    pub async fn write_stdin(
        &self,
        id: ProcessId,
        bytes: &[u8],
        yield_time: Duration,
    ) -> Result<Response, ManagerError> {
        let began = Instant::now();
        let busy = Busy::new(self.get(id)?);
        if !bytes.is_empty() {
            let stdin = busy.0.stdin.lock().await;
            let Some(stream) = stdin.as_ref() else {
                return Err(ManagerError::NoStdin(id));
            };
            // A command that stops reading must not hold the caller past its yield time.
            match tokio::time::timeout(
                yield_time.max(Duration::from_millis(100)),
                stream.write_all(bytes),
            )
            .await
            {
                Ok((_, Ok(()))) => {}
                Ok((written, Err(source))) => {
                    // Writing to an exited command: report its end, not the broken pipe.
                    if busy.0.state().result.is_none() {
                        return Err(ManagerError::Write {
                            id,
                            written,
                            source,
                        });
                    }
                }
                Err(_) => {
                    return Err(ManagerError::Write {
                        id,
                        written: 0,
                        source: std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the command did not read its input within the yield time",
                        ),
                    })
                }
            }
        }
        let remaining = yield_time.saturating_sub(began.elapsed());
        Ok(self.collect(&busy.0, remaining, began).await)
    }

    /// Closes the process's stdin (end of file on a pipe; on a terminal the master stays open,
    /// send `\x04` instead).
    pub async fn close_stdin(&self, id: ProcessId) -> Result<(), ManagerError> {
        let process = self.get(id)?;
        if process.pty.is_some() {
            return Ok(());
        }
        *process.stdin.lock().await = None;
        Ok(())
    }

    /// Changes the process's terminal size.
    pub fn resize(&self, id: ProcessId, size: WindowSize) -> Result<(), ManagerError> {
        let process = self.get(id)?;
        match &process.pty {
            Some(pty) => Ok(pty.set_window_size(size)?),
            None => Err(ManagerError::NoTerminal(id)),
        }
    }

    /// Kills the process's group and returns its end (outcome `cancelled` unless it had
    /// already exited) with the output not yet collected.
    pub async fn kill(&self, id: ProcessId) -> Result<Response, ManagerError> {
        let began = Instant::now();
        let process = self.get(id)?;
        process.cancel.cancel();
        Ok(self.collect(&process, KILL_WAIT, began).await)
    }

    /// Every process held, in id order.
    pub fn list(&self) -> Vec<ProcessInfo> {
        let procs: Vec<Arc<Process>> = self.table().procs.values().cloned().collect();
        procs.iter().map(|p| p.info()).collect()
    }

    /// The process's transcript: its first and last output, up to the transcript limit.
    pub fn transcript(&self, id: ProcessId) -> Result<Captured, ManagerError> {
        Ok(self.get(id)?.state().transcript.snapshot())
    }

    /// Waits for the process to exit or `yield_time` to pass, then takes the unread output;
    /// an exited process leaves the table.
    async fn collect(
        &self,
        process: &Arc<Process>,
        yield_time: Duration,
        began: Instant,
    ) -> Response {
        let deadline = tokio::time::Instant::now() + yield_time;
        let mut changes = process.changed.subscribe();
        loop {
            if process.state().result.is_some() {
                break;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                // The sender lives in `process`; it cannot be gone while we hold it.
                Ok(Err(_)) | Err(_) => break,
            }
        }
        let (output, result) = {
            let mut state = process.state();
            let unread =
                std::mem::replace(&mut state.unread, CappedBuffer::new(self.transcript_limit));
            (unread.finish(), state.result.take())
        };
        let status = match result {
            Some(result) => {
                self.table().procs.remove(&process.id);
                ProcessStatus::Exited {
                    result: Box::new(result),
                }
            }
            None => ProcessStatus::Running,
        };
        Response {
            process_id: process.id,
            output,
            status,
            evicted: Vec::new(),
            wall_time: began.elapsed(),
        }
    }

    /// Kills least recently used idle processes until one more may start.
    async fn make_room(&self) -> Result<Vec<ProcessInfo>, ManagerError> {
        let mut evicted = Vec::new();
        loop {
            let victim = {
                let table = self.table();
                let live: Vec<&Arc<Process>> = table
                    .procs
                    .values()
                    .filter(|p| p.state().result.is_none())
                    .collect();
                if live.len() < self.max_live {
                    return Ok(evicted);
                }
                live.iter()
                    .filter(|p| p.state().busy == 0)
                    .min_by_key(|p| p.state().last_used)
                    .map(|p| Arc::clone(p))
            };
            let Some(victim) = victim else {
                return Err(ManagerError::Full(self.max_live));
            };
            let info = victim.info();
            victim.cancel.cancel();
            // Its result is dropped: the eviction report is all the caller gets.
            let _ = self.collect(&victim, KILL_WAIT, Instant::now()).await;
            self.table().procs.remove(&victim.id);
            evicted.push(ProcessInfo {
                running: false,
                ..info
            });
        }
    }
}

impl Drop for ProcessManager {
    fn drop(&mut self) {
        // The supervisor kills each group when its token fires; should the runtime be gone
        // first, dropping its task kills the group too.
        for process in self.table().procs.values() {
            process.cancel.cancel();
        }
    }
}

fn lossy_list<S: serde::Serializer>(list: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|a| a.to_string_lossy()))
}

mod millis {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}
