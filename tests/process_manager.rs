//! The process manager against real, confined processes: a long-running server polled and
//! killed, yield-time bounds, a REPL on a pipe and on a PTY, eviction and drop.

mod common;

use std::time::{Duration, Instant};

use common::{lib_policy as policy, lib_sandbox as sandbox, workdir, WorkDir as Dir};
use cordon::exec::process_manager::{
    ManagerError, ProcessIo, ProcessManager, ProcessStatus, Response,
};
use cordon::exec::{ExecRequest, Outcome, WindowSize};

fn request(dir: &Dir, argv: &[&str]) -> ExecRequest {
    ExecRequest::sandboxed(argv.iter().copied(), &dir.path, policy(&dir.path))
}

fn sh(dir: &Dir, script: &str) -> ExecRequest {
    request(dir, &["sh", "-c", script])
}

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
    for _ in 0..100 {
        if process_gone(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("process {pid} is still alive");
}

/// Writes `bytes`, then keeps collecting until `needle` has arrived (a loaded machine may be
/// slow to start an interpreter); returns everything collected.
async fn write_until(manager: &ProcessManager, id: u64, bytes: &[u8], needle: &str) -> String {
    let mut text = manager
        .write_stdin(id, bytes, Duration::from_millis(300))
        .await
        .unwrap()
        .output
        .text();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !text.contains(needle) {
        assert!(Instant::now() < deadline, "{needle:?} never came: {text:?}");
        let more = manager
            .write_stdin(id, b"", Duration::from_millis(300))
            .await
            .unwrap();
        text.push_str(&more.output.text());
    }
    text
}

fn exited(response: &Response) -> &cordon::exec::ExecResult {
    match &response.status {
        ProcessStatus::Exited { result } => result,
        ProcessStatus::Running => panic!("still running: {:?}", response.output.text()),
    }
}

/// The host pid of a command that ran in the sandbox's pid namespace: the newest descendant
/// of the helper whose command line is `needle`.
fn host_pid_of(needle: &str) -> Option<u32> {
    // A loaded machine may take a moment to exec the command.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match find_host_pid(needle) {
            Some(pid) => return Some(pid),
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            None => return None,
        }
    }
}

fn find_host_pid(needle: &str) -> Option<u32> {
    let mut found = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).replace('\0', " ").trim() == needle {
            found = Some(found.map_or(pid, |f: u32| f.max(pid)));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_running_server_is_polled_and_killed() {
    let dir = workdir();
    let manager = ProcessManager::new(sandbox());
    let beats = dir.path.join("beats");
    // A "server": prints a line per beat and appends to a file outside the manager's view.
    let script = format!(
        "i=0; while :; do i=$((i+1)); echo beat $i; echo $i >> {}; sleep 0.1; done",
        beats.display()
    );
    let first = manager
        .start(
            sh(&dir, &script),
            ProcessIo::Request,
            Duration::from_millis(1000),
        )
        .await
        .unwrap();
    assert_eq!(first.status, ProcessStatus::Running);
    assert!(
        first.output.text().starts_with("beat 1\n"),
        "{:?}",
        first.output.text()
    );
    let listed = manager.list();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].process_id, first.process_id);
    assert!(listed[0].running);
    let pid = listed[0].pid.expect("spawned");

    let second = manager
        .write_stdin(first.process_id, b"", Duration::from_millis(400))
        .await
        .unwrap();
    assert_eq!(second.status, ProcessStatus::Running);
    // Only new output: the poll continues where the first call stopped.
    let last_first: u32 = first.output.text().lines().last().unwrap()[5..]
        .parse()
        .unwrap();
    let first_second: u32 = second.output.text().lines().next().unwrap()[5..]
        .parse()
        .unwrap();
    assert_eq!(
        first_second,
        last_first + 1,
        "{:?} then {:?}",
        first.output.text(),
        second.output.text()
    );
    assert!(manager
        .transcript(first.process_id)
        .unwrap()
        .text()
        .starts_with("beat 1\nbeat 2\n"));

    let killed = manager.kill(first.process_id).await.unwrap();
    assert_eq!(exited(&killed).outcome, Outcome::Cancelled);
    assert_gone_soon(pid).await;
    // From outside: the file stops growing once it is killed.
    let after_kill = std::fs::read_to_string(&beats).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(std::fs::read_to_string(&beats).unwrap(), after_kill);
    assert!(manager.list().is_empty());
    assert!(matches!(
        manager.write_stdin(first.process_id, b"", Duration::ZERO).await,
        Err(ManagerError::UnknownProcess(id)) if id == first.process_id
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yield_time_bounds_are_honoured() {
    let dir = workdir();
    let manager = ProcessManager::new(sandbox());
    // A quick command returns as soon as it exits, not at the end of a long yield.
    let began = Instant::now();
    let quick = manager
        .start(
            sh(&dir, "echo hi"),
            ProcessIo::Request,
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(exited(&quick).outcome, Outcome::Success);
    assert_eq!(quick.output.text(), "hi\n");
    assert!(
        manager.list().is_empty(),
        "an exited, collected process leaves the manager"
    );

    // A slow one is returned at the yield time, still running.
    let began = Instant::now();
    let slow = manager
        .start(
            sh(&dir, "sleep 30"),
            ProcessIo::Request,
            Duration::from_millis(500),
        )
        .await
        .unwrap();
    let took = began.elapsed();
    assert_eq!(slow.status, ProcessStatus::Running);
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    let began = Instant::now();
    let poll = manager
        .write_stdin(slow.process_id, b"", Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(poll.status, ProcessStatus::Running);
    assert!(began.elapsed() >= Duration::from_millis(300));
    assert!(began.elapsed() < Duration::from_millis(2000));
    manager.kill(slow.process_id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repl_on_a_pipe_answers_each_line() {
    let dir = workdir();
    let manager = ProcessManager::new(sandbox());
    let started = manager
        .start(
            request(&dir, &["python3", "-i", "-q", "-u"]),
            ProcessIo::Pipe,
            Duration::from_millis(800),
        )
        .await
        .unwrap();
    assert_eq!(started.status, ProcessStatus::Running);
    // Unbuffered print writes the text and its newline separately, so the prompt on
    // stderr may land between them: look for the text alone.
    write_until(&manager, started.process_id, b"print(6 * 7)\n", "42").await;
    let again = write_until(&manager, started.process_id, b"print('x' * 3)\n", "xxx").await;
    assert!(
        !again.contains("42"),
        "old output is not repeated: {again:?}"
    );
    let end = manager
        .write_stdin(
            started.process_id,
            b"import sys; sys.exit(3)\n",
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(exited(&end).outcome, Outcome::Failed { code: 3 });

    // End of file on the pipe ends a REPL too.
    let eof = manager
        .start(
            request(&dir, &["python3", "-i", "-q", "-u"]),
            ProcessIo::Pipe,
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    manager.close_stdin(eof.process_id).await.unwrap();
    let end = manager
        .write_stdin(eof.process_id, b"", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(exited(&end).outcome, Outcome::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repl_on_a_pty_has_a_controlling_terminal() {
    let dir = workdir();
    let manager = ProcessManager::new(sandbox());
    let size = WindowSize {
        rows: 33,
        cols: 101,
    };
    let started = manager
        .start(
            request(&dir, &["python3", "-i", "-q"]),
            ProcessIo::Pty(size),
            Duration::from_millis(800),
        )
        .await
        .unwrap();
    assert_eq!(started.status, ProcessStatus::Running);
    assert!(manager.list()[0].tty);
    let script = b"import os, sys; print('tty', os.isatty(0), os.isatty(1), os.isatty(2), os.tcgetpgrp(0) == os.getpgrp(), os.get_terminal_size(0))\n";
    // The terminal echoes the line; the answer comes after it, with CRLF line ends.
    write_until(
        &manager,
        started.process_id,
        script,
        "tty True True True True os.terminal_size(columns=101, lines=33)\r\n",
    )
    .await;
    manager
        .resize(
            started.process_id,
            WindowSize {
                rows: 40,
                cols: 120,
            },
        )
        .unwrap();
    write_until(
        &manager,
        started.process_id,
        b"print('size', os.get_terminal_size(0))\n",
        "size os.terminal_size(columns=120, lines=40)\r\n",
    )
    .await;
    let end = manager
        .write_stdin(started.process_id, b"exit(4)\n", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(exited(&end).outcome, Outcome::Failed { code: 4 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiocsti_is_refused_on_the_pty_and_bash_runs_interactively() {
    let dir = workdir();
    let manager = ProcessManager::new(sandbox());
    let probe = r#"
import errno, fcntl, os, termios
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("TIOCSTI ok")
except OSError as e:
    print("TIOCSTI", errno.errorcode[e.errno])
# The harmless counterpart on the same descriptor: reading the window size works.
print("TIOCGWINSZ", os.get_terminal_size(0).columns)
"#;
    let probe_file = dir.path.join("probe.py");
    std::fs::write(&probe_file, probe).unwrap();
    let started = manager
        .start(
            request(&dir, &["bash", "--norc", "--noprofile", "-i"]),
            ProcessIo::Pty(WindowSize { rows: 24, cols: 77 }),
            Duration::from_millis(800),
        )
        .await
        .unwrap();
    assert_eq!(started.status, ProcessStatus::Running);
    let line = format!("python3 {}; echo done $((6*7))\n", probe_file.display());
    let mut text = String::new();
    for _ in 0..20 {
        let r = manager
            .write_stdin(
                started.process_id,
                if text.is_empty() {
                    line.as_bytes()
                } else {
                    b""
                },
                Duration::from_millis(300),
            )
            .await
            .unwrap();
        text.push_str(&r.output.text());
        if text.contains("done 42") {
            break;
        }
    }
    assert!(text.contains("TIOCSTI EPERM\r\n"), "{text:?}");
    assert!(text.contains("TIOCGWINSZ 77\r\n"), "{text:?}");
    assert!(text.contains("done 42\r\n"), "{text:?}");
    // Nothing was injected: the next line bash reads is ours, and the shell runs it as given.
    let end = manager
        .write_stdin(started.process_id, b"exit 5\n", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        !end.output.text().contains("x: command not found"),
        "{:?}",
        end.output.text()
    );
    assert_eq!(exited(&end).outcome, Outcome::Failed { code: 5 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_least_recently_used_idle_process_is_evicted_and_reported() {
    let dir = workdir();
    let manager = ProcessManager::new(sandbox()).with_max_live(2);
    let yield_time = Duration::from_millis(300);
    let a = manager
        .start(
            request(&dir, &["sleep", "61"]),
            ProcessIo::Request,
            yield_time,
        )
        .await
        .unwrap();
    let b = manager
        .start(
            request(&dir, &["sleep", "62"]),
            ProcessIo::Request,
            yield_time,
        )
        .await
        .unwrap();
    let pid_b = host_pid_of("sleep 62").expect("sleep 62 runs");
    let pid_a = host_pid_of("sleep 61").expect("sleep 61 runs");
    // `a` was used last, so `b` is the one to go.
    manager
        .write_stdin(a.process_id, b"", Duration::ZERO)
        .await
        .unwrap();
    let c = manager
        .start(
            request(&dir, &["sleep", "63"]),
            ProcessIo::Request,
            yield_time,
        )
        .await
        .unwrap();
    assert_eq!(c.evicted.len(), 1);
    assert_eq!(c.evicted[0].process_id, b.process_id);
    assert_eq!(c.evicted[0].argv, ["sleep", "62"]);
    assert_gone_soon(pid_b).await;
    assert!(
        !process_gone(pid_a),
        "the recently used process keeps running"
    );
    let ids: Vec<_> = manager.list().iter().map(|p| p.process_id).collect();
    assert_eq!(ids, [a.process_id, c.process_id]);

    // Dropping the manager kills what it holds.
    let pid_c = host_pid_of("sleep 63").expect("sleep 63 runs");
    drop(manager);
    assert_gone_soon(pid_a).await;
    assert_gone_soon(pid_c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_must_be_asked_for_and_denials_keep_their_outcome() {
    let dir = workdir();
    let manager = ProcessManager::new(sandbox());
    let sleeper = manager
        .start(
            request(&dir, &["sleep", "30"]),
            ProcessIo::Request,
            Duration::from_millis(200),
        )
        .await
        .unwrap();
    assert!(matches!(
        manager
            .write_stdin(sleeper.process_id, b"x\n", Duration::ZERO)
            .await,
        Err(ManagerError::NoStdin(_))
    ));
    assert!(matches!(
        manager.resize(sleeper.process_id, WindowSize::default()),
        Err(ManagerError::NoTerminal(_))
    ));
    manager.kill(sleeper.process_id).await.unwrap();

    // The same outcomes as a one-shot run: a write outside the writable root fails, and the
    // file outside stays absent; the write inside works.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().canonicalize().unwrap().join("f");
    let script = format!("echo in > ok; echo out > {}", target.display());
    let r = manager
        .start(
            sh(&dir, &script),
            ProcessIo::Request,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let result = exited(&r);
    assert_eq!(result.outcome, Outcome::Failed { code: 2 });
    assert!(!target.exists());
    assert_eq!(
        std::fs::read_to_string(dir.path.join("ok")).unwrap(),
        "in\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_reaches_a_descendant_that_left_the_process_group() {
    let dir = workdir();
    let manager = ProcessManager::new(sandbox());
    let started = manager
        .start(
            sh(&dir, "setsid sleep 371 & echo started; sleep 372"),
            ProcessIo::Request,
            Duration::from_millis(600),
        )
        .await
        .unwrap();
    assert_eq!(started.output.text(), "started\n");
    let escaped = host_pid_of("sleep 371").expect("the setsid child runs");
    let main = host_pid_of("sleep 372").expect("the main sleep runs");
    // The harmless counterpart: an unrelated process outside keeps running.
    let mut outside = std::process::Command::new("sleep")
        .arg("373")
        .spawn()
        .unwrap();
    let killed = manager.kill(started.process_id).await.unwrap();
    assert_eq!(exited(&killed).outcome, Outcome::Cancelled);
    assert_gone_soon(main).await;
    assert_gone_soon(escaped).await;
    assert!(
        outside.try_wait().unwrap().is_none(),
        "an outside process was killed"
    );
    outside.kill().unwrap();
    let _ = outside.wait();
}
