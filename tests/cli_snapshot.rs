//! `cordon run -- SHELL -lc ...` with the snapshot cache, `--no-snapshot`, and the `cordon
//! snapshot` subcommands. Each test has a private HOME (the cache lives beneath it).

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{stderr, stdout, Tree};

/// `cordon ARGS...` with the tree's HOME and no variable that would move the cache or change
/// which startup files the shells read.
fn cordon(tree: &Tree, args: &[&str]) -> Output {
    let mut cmd: Command = tree.cordon();
    cmd.args(args)
        .env_remove("XDG_CACHE_HOME")
        .env_remove("BASH_ENV")
        .env_remove("ENV")
        .env_remove("ZDOTDIR");
    cmd.output().unwrap()
}

fn cache(tree: &Tree) -> PathBuf {
    tree.home.join(".cache/cordon/snapshots")
}

/// The snapshot files in the cache, sorted.
fn snapshots(tree: &Tree) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(cache(tree)) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .collect();
    v.sort();
    v
}

fn ok(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(out));
    stdout(out)
}

fn write_rc(tree: &Tree, name: &str, body: &str) {
    fs::write(tree.home.join(name), body).unwrap();
}

#[test]
fn cli_snapshot_is_made_once_and_reused() {
    let tree = Tree::new();
    // Every capture appends a line; a reused snapshot never runs .bashrc again.
    write_rc(
        &tree,
        ".bashrc",
        "echo x >> \"$HOME/captures\"\ngreet() { echo \"hello $1\"; }\n",
    );
    let out = cordon(&tree, &["run", "--", "bash", "-lc", "greet first"]);
    assert_eq!(ok(&out), "hello first\n");
    let first = snapshots(&tree);
    assert_eq!(first.len(), 1, "{first:?}");
    let name = first[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(
        name.starts_with("bash-") && name.ends_with(".0.sh"),
        "{name}"
    );
    assert_eq!(name.len(), "bash-".len() + 16 + ".0.sh".len());
    let inode = fs::metadata(&first[0]).unwrap().ino();

    let out = cordon(&tree, &["run", "--", "bash", "-lc", "greet second"]);
    assert_eq!(ok(&out), "hello second\n");
    assert_eq!(snapshots(&tree), first);
    assert_eq!(fs::metadata(&first[0]).unwrap().ino(), inode);
    // The capture ran confined read-only: the startup file could not write anywhere.
    assert!(!tree.home.join("captures").exists());
}

#[test]
fn cli_snapshot_edited_bashrc_makes_a_new_one() {
    let tree = Tree::new();
    write_rc(&tree, ".bashrc", "greet() { echo \"v1 $1\"; }\n");
    assert_eq!(
        ok(&cordon(&tree, &["run", "--", "bash", "-lc", "greet a"])),
        "v1 a\n"
    );
    let before = snapshots(&tree);
    assert_eq!(before.len(), 1);
    write_rc(&tree, ".bashrc", "greet() { echo \"v2 $1\"; }\n");
    assert_eq!(
        ok(&cordon(&tree, &["run", "--", "bash", "-lc", "greet a"])),
        "v2 a\n"
    );
    let after = snapshots(&tree);
    // The old one stays until stale cleanup's retention passes.
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(after.contains(&before[0]));
}

#[test]
fn cli_no_snapshot_runs_the_login_shell_itself() {
    let tree = Tree::new();
    write_rc(&tree, ".bashrc", "greet() { echo hello; }\n");
    // A non-interactive login bash does not read .bashrc: without the snapshot there is no
    // greet, and nothing is cached.
    let out = cordon(
        &tree,
        &[
            "run",
            "--no-snapshot",
            "--",
            "bash",
            "-lc",
            "echo plain; greet",
        ],
    );
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(stdout(&out), "plain\n");
    assert!(!cache(&tree).exists());
    // Other commands are never wrapped either.
    assert_eq!(
        ok(&cordon(&tree, &["run", "--", "bash", "-c", "echo c"])),
        "c\n"
    );
    assert!(!cache(&tree).exists());
}

#[test]
fn cli_snapshot_failure_falls_back() {
    let tree = Tree::new();
    write_rc(&tree, ".bashrc", "exit 7\n");
    let out = cordon(&tree, &["run", "--", "bash", "-lc", "echo still-runs"]);
    assert_eq!(ok(&out), "still-runs\n");
    assert_eq!(stderr(&out), "");
    assert!(snapshots(&tree).is_empty());
}

#[test]
fn cli_snapshot_zsh_and_sh() {
    let tree = Tree::new();
    write_rc(
        &tree,
        ".zshrc",
        "zgreet() { echo \"z $1\"; }\nsetopt noclobber\n",
    );
    let out = cordon(
        &tree,
        &[
            "run",
            "--",
            "zsh",
            "-lc",
            "zgreet a; [[ -o noclobber ]] && echo on",
        ],
    );
    assert_eq!(ok(&out), "z a\non\n");
    // sh reads $ENV in the capture; `--env ENV=...` gives the command the same value.
    write_rc(
        &tree,
        ".shrc",
        "alias hi='echo sh-alias'\nexport FROM_SHRC=1\n",
    );
    let env = format!("ENV={}", tree.home.join(".shrc").display());
    let mut cmd = tree.cordon();
    let out = cmd
        .args(["run", "--env", &env, "--", "sh", "-lc", "echo $FROM_SHRC"])
        .env("ENV", tree.home.join(".shrc"))
        .env_remove("XDG_CACHE_HOME")
        .output()
        .unwrap();
    assert_eq!(ok(&out), "1\n");
    assert_eq!(snapshots(&tree).len(), 2);
}

#[test]
fn cli_snapshot_works_when_home_is_not_readable_in_the_sandbox() {
    let tree = Tree::new();
    write_rc(&tree, ".bashrc", "greet() { echo \"hello $1\"; }\n");
    let mut read: Vec<String> = ["/usr", "/bin", "/lib", "/lib64", "/etc"]
        .iter()
        .filter(|p| Path::new(p).exists())
        .map(|p| format!("{p:?}"))
        .collect();
    read.dedup();
    fs::write(
        tree.cwd.join("narrow.toml"),
        format!(
            "[filesystem]\nread = [{}]\nwrite = [\":cwd\"]\n",
            read.join(", ")
        ),
    )
    .unwrap();
    let home = tree.home.display().to_string();
    let script = format!("greet x; cat {home}/.bashrc >/dev/null 2>&1 || echo home-unreadable");
    let out = cordon(
        &tree,
        &["run", "-p", "narrow.toml", "--", "bash", "-lc", &script],
    );
    assert_eq!(ok(&out), "hello x\nhome-unreadable\n");
}

#[test]
fn cli_snapshot_show_prints_names_never_values_and_clean_deletes() {
    let tree = Tree::new();
    write_rc(
        &tree,
        ".bashrc",
        "export MY_SETTING=supersecretvalue\nalias ll='ls -l'\ngreet() { :; }\nshopt -s globstar\n",
    );
    let bash = cordon::snapshot::detect_shell(Some(Path::new("bash")))
        .unwrap()
        .path;
    let out = cordon(
        &tree,
        &["snapshot", "show", "--shell", bash.to_str().unwrap()],
    );
    let text = ok(&out);
    assert!(!text.contains("supersecretvalue"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let files = snapshots(&tree);
    assert_eq!(files.len(), 1);
    assert_eq!(lines[0], format!("path: {}", files[0].display()));
    assert_eq!(
        lines[1],
        format!("shell: {} (bash), made now", bash.display())
    );
    assert_eq!(lines[2], "functions (1): greet");
    assert_eq!(lines[3], "aliases (1): ll");
    assert!(lines[4].starts_with("options on (") && lines[4].contains(" globstar"));
    assert!(lines[5].starts_with("exports (") && lines[5].contains(" MY_SETTING"));
    // Shown again: the same file, not made again.
    let again = ok(&cordon(
        &tree,
        &["snapshot", "show", "--shell", bash.to_str().unwrap()],
    ));
    assert_eq!(
        again.lines().nth(1),
        Some(format!("shell: {} (bash)", bash.display()).as_str())
    );

    // Recent: kept. With a tiny retention: deleted (no run holds a lock file any more).
    let out = ok(&cordon(&tree, &["snapshot", "clean"]));
    assert_eq!(out, "0 deleted, 0 failed\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let out = ok(&cordon(
        &tree,
        &["snapshot", "clean", "--retention", "10ms"],
    ));
    assert_eq!(
        out,
        format!("deleted {}\n1 deleted, 0 failed\n", files[0].display())
    );
    assert!(snapshots(&tree).is_empty());
}
