//! `cordon run` at a real terminal (tmux): the command gets a terminal of its own as its
//! controlling terminal, sized like the caller's and following its resizes; typed lines and
//! Ctrl-C reach it; a denial is still reported after it ends; the caller's terminal settings
//! come back as they were.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::Tree;

fn tmux(sock: &Path, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .arg("-S")
        .arg(sock)
        .args(args)
        .output()
        .expect("tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(sock: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let screen = tmux(sock, &["capture-pane", "-p", "-t", "t"]);
        if screen.contains(needle) {
            return screen;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} never appeared; screen:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct KillServer<'a>(&'a Path);

impl Drop for KillServer<'_> {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(self.0)
            .arg("kill-server")
            .output();
    }
}

#[test]
fn cordon_run_at_a_terminal_relays_a_controlling_terminal_of_its_own() {
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is not installed (.ci/run installs it)");
    }
    let tree = Tree::new();
    let script = tree.cwd.join("probe.py");
    std::fs::write(
        &script,
        r#"
import os, signal, sys, time
size = os.get_terminal_size()
print("TTY", os.isatty(0), os.isatty(1), os.isatty(2), os.tcgetpgrp(0) == os.getpgrp(), size.columns, size.lines, flush=True)
print("GOT", input("name? ").upper(), flush=True)
signal.signal(signal.SIGWINCH, lambda *_: print("SIZE", os.get_terminal_size().columns, flush=True))
try:
    while True:
        time.sleep(0.1)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
    sys.exit(3)
"#,
    )
    .unwrap();
    let sock = tree.root.join("tmux.sock");
    let _server = KillServer(&sock);
    let shell = format!(
        "stty -echoctl; before=$(stty -g); env HOME={home} CORDON_HELPER=self {cordon} run -- python3 {script}; echo RC=$?; \
         env HOME={home} CORDON_HELPER=self {cordon} run -- sh -c 'echo x > {outside}/f'; echo RC2=$?; \
         [ \"$(stty -g)\" = \"$before\" ] && echo SETTINGS-RESTORED; sleep 60",
        home = tree.home.display(),
        cordon = env!("CARGO_BIN_EXE_cordon"),
        script = script.display(),
        outside = tree.outside.display(),
    );
    let dir = tree.cwd.to_str().unwrap();
    tmux(
        &sock,
        &[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "91",
            "-y",
            "27",
            "-c",
            dir,
            &shell,
        ],
    );
    let screen = wait_for(&sock, "name?");
    assert!(screen.contains("TTY True True True True 91 27"), "{screen}");
    tmux(&sock, &["send-keys", "-t", "t", "bob", "Enter"]);
    wait_for(&sock, "GOT BOB");
    tmux(
        &sock,
        &["resize-window", "-t", "t", "-x", "120", "-y", "30"],
    );
    wait_for(&sock, "SIZE 120");
    tmux(&sock, &["send-keys", "-t", "t", "C-c"]);
    wait_for(&sock, "INTERRUPTED");
    let screen = wait_for(&sock, "RC=3");
    assert!(!screen.contains("Traceback"), "{screen}");
    // The denial is still explained after the command ends, and nothing was written outside.
    let screen = wait_for(&sock, "RC2=");
    assert!(screen.contains("RC2=2"), "{screen}");
    assert!(
        screen.contains(&format!(
            "cordon: denied write to {}/f",
            tree.outside.display()
        )),
        "{screen}"
    );
    assert!(!tree.outside.join("f").exists());
    wait_for(&sock, "SETTINGS-RESTORED");
}

#[test]
fn ctrl_z_stops_the_command_and_cordon_and_fg_continues_both() {
    let tree = Tree::new();
    let script = tree.cwd.join("stoppable.py");
    std::fs::write(
        &script,
        r#"
import signal, sys, time
signal.signal(signal.SIGCONT, lambda *_: print("CONTINUED", flush=True))
print("READY", flush=True)
try:
    while True:
        time.sleep(0.1)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
    sys.exit(3)
"#,
    )
    .unwrap();
    let sock = tree.root.join("tmux.sock");
    let _server = KillServer(&sock);
    let dir = tree.cwd.to_str().unwrap();
    // An interactive shell with job control, as a person's.
    tmux(
        &sock,
        &[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "100",
            "-y",
            "30",
            "-c",
            dir,
            "bash --norc --noprofile -i",
        ],
    );
    let line = format!(
        "env HOME={} CORDON_HELPER=self {} run -- python3 {}",
        tree.home.display(),
        env!("CARGO_BIN_EXE_cordon"),
        script.display()
    );
    tmux(&sock, &["send-keys", "-t", "t", &line, "Enter"]);
    wait_for(&sock, "READY");
    tmux(&sock, &["send-keys", "-t", "t", "C-z"]);
    // The shell got its terminal back and reports the job stopped.
    wait_for(&sock, "Stopped");
    tmux(&sock, &["send-keys", "-t", "t", "echo SHELL-BACK", "Enter"]);
    wait_for(&sock, "\nSHELL-BACK");
    tmux(&sock, &["send-keys", "-t", "t", "fg", "Enter"]);
    wait_for(&sock, "CONTINUED");
    let prompts = |screen: &str| screen.lines().filter(|l| l.starts_with("bash-")).count();
    let before = prompts(&tmux(&sock, &["capture-pane", "-p", "-t", "t"]));
    tmux(&sock, &["send-keys", "-t", "t", "C-c"]);
    wait_for(&sock, "INTERRUPTED");
    // Only once the shell prompts again is typing the shell's, not the command's.
    let deadline = Instant::now() + Duration::from_secs(20);
    while prompts(&tmux(&sock, &["capture-pane", "-p", "-t", "t"])) <= before {
        assert!(Instant::now() < deadline, "the shell never prompted again");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The job's status, as the shell saw it end after `fg`: the command's own exit code.
    tmux(&sock, &["send-keys", "-t", "t", "echo FG-RC=$?", "Enter"]);
    wait_for(&sock, "FG-RC=3");
}
