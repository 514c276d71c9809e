//! The parent runs unconfined, so it must not grant anything on the strength of a symlink or a
//! file that a confined command could have written: roots through planted links, and profile
//! files that are not small regular files. Every case runs the real `cordon` binary; run 1 is a
//! real confined command that plants the link, and the effect is checked from outside.

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{stderr, Tree};

/// Runs `cmd`, failing the test (and killing the process) if it takes longer than `limit`: a
/// cordon that hangs must fail, not block the suite.
fn run_within(mut cmd: Command, limit: Duration) -> Output {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cordon");
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cordon did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect output")
}

/// `cordon run ARGS...` in the tree, with a deadline.
fn cordon_run(tree: &Tree, args: &[&str]) -> Output {
    let mut cmd = tree.cordon();
    cmd.arg("run").args(args);
    run_within(cmd, Duration::from_secs(20))
}

/// The command every refused run tries: mark that it ran, then write outside the workspace.
fn escape_script(tree: &Tree) -> String {
    format!(
        "touch {}; echo x > {}",
        tree.cwd.join("ran").display(),
        victim(tree).display()
    )
}

fn victim(tree: &Tree) -> PathBuf {
    tree.outside.join("victim")
}

/// Run 1: a confined command under the default profile replaces `work/frontend` with a link.
fn plant_frontend(tree: &Tree, target: &Path) {
    std::fs::create_dir(tree.cwd.join("frontend")).unwrap();
    let out = cordon_run(
        tree,
        &[
            "--",
            "sh",
            "-c",
            &format!("rm -r frontend && ln -s {} frontend", target.display()),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "run 1: {}", stderr(&out));
    assert_eq!(
        std::fs::read_link(tree.cwd.join("frontend")).unwrap(),
        target
    );
}

/// A refused run: exit 125, one line naming `link`, nothing ran, nothing written outside.
fn assert_refused(tree: &Tree, out: &Output, link: &Path) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("cordon: "), "{err}");
    assert!(
        err.contains(&format!("symlink {:?}", link.display().to_string())),
        "{err}"
    );
    assert!(!tree.cwd.join("ran").exists(), "the command ran");
    assert!(!victim(tree).exists(), "the victim was written");
}

#[test]
fn a_planted_link_to_root_as_the_working_directory_is_refused() {
    let tree = Tree::new();
    plant_frontend(&tree, Path::new("/"));
    let script = escape_script(&tree);
    let out = cordon_run(&tree, &["-C", "frontend", "--", "sh", "-c", &script]);
    assert_refused(&tree, &out, &tree.cwd.join("frontend"));
}

#[test]
fn a_planted_link_to_an_outside_directory_is_refused_as_cwd_writable_readable_and_profile_root() {
    let tree = Tree::new();
    plant_frontend(&tree, &tree.outside);
    let link = tree.cwd.join("frontend");
    let script = escape_script(&tree);
    let profile = tree.cwd.join("frontend.toml");
    std::fs::write(
        &profile,
        "extends = \"read-only\"\n[filesystem]\nwrite = [\":cwd/frontend\"]\n",
    )
    .unwrap();
    let absolute = tree.cwd.join("absolute.toml");
    std::fs::write(
        &absolute,
        format!(
            "extends = \"read-only\"\n[filesystem]\nwrite = [{:?}]\n",
            link.display().to_string()
        ),
    )
    .unwrap();
    let cases: [Vec<&str>; 5] = [
        vec!["-C", "frontend"],
        vec!["-w", "frontend"],
        vec!["-r", "frontend"],
        vec!["-p", profile.to_str().unwrap()],
        vec!["-p", absolute.to_str().unwrap()],
    ];
    for pre in cases {
        let mut args = pre.clone();
        args.extend(["--", "sh", "-c", &script]);
        let out = cordon_run(&tree, &args);
        assert_refused(&tree, &out, &link);
    }
}

#[test]
fn a_planted_link_in_the_middle_of_a_path_is_refused() {
    let tree = Tree::new();
    std::fs::create_dir_all(tree.cwd.join("sub/deep")).unwrap();
    std::fs::create_dir(tree.outside.join("x")).unwrap();
    // Run 1 replaces a directory two levels down.
    let out = cordon_run(
        &tree,
        &[
            "--",
            "sh",
            "-c",
            &format!(
                "rm -r sub/deep && ln -s {} sub/deep",
                tree.outside.display()
            ),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "run 1: {}", stderr(&out));
    let link = tree.cwd.join("sub/deep");
    let script = format!(
        "touch {}; echo x > {}",
        tree.cwd.join("ran").display(),
        tree.outside.join("x/victim").display()
    );
    for pre in [["-w", "sub/deep/x"], ["-C", "sub/deep/x"]] {
        let mut args = pre.to_vec();
        args.extend(["--", "sh", "-c", &script]);
        let out = cordon_run(&tree, &args);
        assert_refused(&tree, &out, &link);
        assert!(!tree.outside.join("x/victim").exists());
    }
}

#[test]
fn a_tmpdir_that_is_a_link_under_tmp_is_refused() {
    let tree = Tree::new();
    // This case needs /tmp itself: a private directory there, removed when the test ends.
    let private = tempfile::Builder::new()
        .prefix("cordon-roots-trust-")
        .tempdir_in("/tmp")
        .unwrap();
    let tmpdir = private.path().join("tmpdir");
    symlink(&tree.outside, &tmpdir).unwrap();
    let script = escape_script(&tree);
    let mut cmd = tree.cordon();
    cmd.env("TMPDIR", &tmpdir)
        .args(["run", "--", "sh", "-c", &script]);
    let out = run_within(cmd, Duration::from_secs(20));
    assert_refused(&tree, &out, &tmpdir);

    // Harmless counterpart: a real directory as TMPDIR is writable as before.
    let real = private.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let mut cmd = tree.cordon();
    cmd.env("TMPDIR", &real)
        .args(["run", "--", "sh", "-c", "echo ok > \"$TMPDIR/file\""]);
    let out = run_within(cmd, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(real.join("file")).unwrap(), "ok\n");
}

#[test]
fn a_working_directory_linked_from_outside_every_writable_root_still_works() {
    let tree = Tree::new();
    // The tree's root holds the link: not the workspace, /tmp or any writable root.
    let link = tree.root.join("ws");
    symlink(&tree.outside, &link).unwrap();
    let out = cordon_run(
        &tree,
        &[
            "-C",
            link.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "echo ok > granted; pwd",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The target was granted (and is where the command ran).
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("granted")).unwrap(),
        "ok\n"
    );
    assert_eq!(common::stdout(&out).trim(), tree.outside.to_str().unwrap());
}

#[test]
fn a_planted_link_is_followed_when_the_profile_names_its_target_itself() {
    let tree = Tree::new();
    plant_frontend(&tree, &tree.outside);
    let outside = tree.outside.to_str().unwrap();
    let out = cordon_run(
        &tree,
        &[
            "-C",
            "frontend",
            "-w",
            outside,
            "--",
            "sh",
            "-c",
            "echo ok > named",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("named")).unwrap(),
        "ok\n"
    );
    // Naming the target grants the target only: the rest of the tree stays read-only.
    let out = cordon_run(
        &tree,
        &[
            "-w",
            "frontend",
            "-w",
            outside,
            "--",
            "sh",
            "-c",
            &format!("echo x > {}", tree.home.join("victim").display()),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!tree.home.join("victim").exists());
}

/// A profile path that is not a small regular file: exit 125 with one line, quickly, nothing run.
fn assert_profile_refused(tree: &Tree, profile: &Path, says: &str) {
    let marker = tree.cwd.join("marker");
    let start = Instant::now();
    let out = run_within(
        {
            let mut cmd = tree.cordon();
            cmd.args(["run", "-p", profile.to_str().unwrap(), "--", "touch"])
                .arg(&marker);
            cmd
        },
        Duration::from_secs(10),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(says), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5), "{err}");
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn profiles_that_are_not_small_regular_files_are_refused_without_reading_them() {
    let tree = Tree::new();
    let fifo = tree.root.join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    assert_profile_refused(&tree, &fifo, "is a FIFO, not a regular file");

    let zero = tree.root.join("zero.toml");
    symlink("/dev/zero", &zero).unwrap();
    assert_profile_refused(&tree, &zero, "is a device, not a regular file");

    let dir = tree.root.join("dir.json");
    std::fs::create_dir(&dir).unwrap();
    assert_profile_refused(&tree, &dir, "is a directory, not a regular file");

    // 2 MiB of valid TOML (a comment) is refused for its size, not for its syntax.
    let big = tree.root.join("big.toml");
    let mut text = String::from("extends = \"workspace-write\"\n#");
    text.push_str(&"x".repeat(2 * 1024 * 1024));
    std::fs::write(&big, text).unwrap();
    assert_profile_refused(&tree, &big, "is larger than 1048576 bytes");

    // Harmless counterpart: a small profile file (even through a link) is read and used.
    let small = tree.root.join("small.toml");
    std::fs::write(&small, "extends = \"workspace-write\"\n").unwrap();
    let linked = tree.root.join("linked.toml");
    symlink(&small, &linked).unwrap();
    for profile in [&small, &linked] {
        let marker = tree.cwd.join("marker");
        let out = cordon_run(
            &tree,
            &[
                "-p",
                profile.to_str().unwrap(),
                "--",
                "touch",
                marker.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(marker.exists());
        std::fs::remove_file(&marker).unwrap();
    }
}
