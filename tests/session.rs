//! Sessions against real shells and the real sandbox: `cd` persistence, environment scripts,
//! overrides, the reported argv, symlinked workspace roots, a snapshot under a policy that
//! hides the session directory.
//! Every test has a private HOME and snapshot directory; nothing touches the real HOME.

mod common;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use common::Tree;
use cordon::exec::{EnvPolicy, ExecResult, Outcome, Sandbox};
use cordon::helper::Helper;
use cordon::profile::{PermissionProfile, ResolveContext};
use cordon::sandbox::SandboxPolicy;
use cordon::session::{CwdRejection, CwdUpdate, Session, SessionOptions, SessionRequest};

fn sandbox() -> Sandbox {
    Sandbox::new(Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon")))
}

/// The default profile resolved for `cwd` with the tree's HOME.
fn default_policy(tree: &Tree, cwd: &Path) -> SandboxPolicy {
    PermissionProfile::default_profile()
        .resolve(&ResolveContext::new(cwd).with_home(&tree.home))
        .unwrap()
        .policy
        .unwrap()
}

/// The environment every command and capture gets: the tree's HOME, no startup-file knobs.
fn env(tree: &Tree) -> EnvPolicy {
    EnvPolicy::default().with_var("HOME", &tree.home)
}

fn session_at(tree: &Tree, cwd: &Path, policy: SandboxPolicy, dir: &Path) -> Session {
    let opts = SessionOptions::new(dir, cwd)
        .policy(Some(policy))
        .snapshot_env(env(tree));
    Session::new(sandbox(), opts).unwrap()
}

fn session(tree: &Tree) -> Session {
    let dir = tree.root.join("snapshots");
    session_at(tree, &tree.cwd, default_policy(tree, &tree.cwd), &dir)
}

fn request(tree: &Tree, shell: &str, script: &str) -> SessionRequest {
    SessionRequest::new([shell, "-lc", script]).env(env(tree))
}

fn out(r: &ExecResult) -> String {
    String::from_utf8_lossy(&r.stdout.bytes).into_owned()
}

fn ok(r: &ExecResult) -> String {
    assert_eq!(
        r.outcome,
        Outcome::Success,
        "stderr: {}",
        String::from_utf8_lossy(&r.stderr.bytes)
    );
    out(r)
}

fn shell_path(name: &str) -> PathBuf {
    cordon::snapshot::detect_shell(Some(Path::new(name)))
        .unwrap()
        .path
}

#[tokio::test]
async fn session_cd_persists_and_explicit_cwd_does_not() {
    for shell in ["bash", "zsh", "sh"] {
        let tree = Tree::new();
        let mut s = session(&tree);
        let sub = tree.cwd.join("a/b");
        let r = s
            .exec(request(&tree, shell, "mkdir -p a/b && cd a/b && pwd"))
            .await;
        assert_eq!(ok(&r), format!("{}\n", sub.display()), "{shell}");
        assert!(s.snapshot_path(&shell_path(shell)).is_some(), "{shell}");
        assert_eq!(s.cwd(), sub, "{shell}");
        assert_eq!(
            ok(&s.exec(request(&tree, shell, "pwd")).await),
            format!("{}\n", sub.display())
        );

        // An explicit cwd is used for that command only, and its `cd` is not adopted.
        let r = s
            .exec(request(&tree, shell, "pwd; cd /").cwd(&tree.outside))
            .await;
        assert_eq!(ok(&r), format!("{}\n", tree.outside.display()));
        assert_eq!(s.cwd(), sub, "{shell}");

        // `exit` still reports where the script ended.
        let r = s.exec(request(&tree, shell, "cd ..; exit 3")).await;
        assert_eq!(r.outcome, Outcome::Failed { code: 3 });
        assert_eq!(s.cwd(), tree.cwd.join("a"), "{shell}");

        // A directory that is gone by the end is not adopted.
        let r = s
            .exec(request(
                &tree,
                shell,
                "mkdir gone && cd gone && rmdir ../gone",
            ))
            .await;
        ok(&r);
        assert_eq!(s.cwd(), tree.cwd.join("a"), "{shell}");
    }
}

#[tokio::test]
async fn session_env_scripts_persist_in_name_order_and_env_file_is_last() {
    let tree = Tree::new();
    let mut s = session(&tree);
    fs::write(s.env_dir().join("20-b.sh"), "export FOO=\"$FOO-b\"\n").unwrap();
    fs::write(
        s.env_dir().join("10-a.sh"),
        "export FOO=a\nvenv() { echo \"venv $FOO\"; }\n",
    )
    .unwrap();
    let r = s.exec(request(&tree, "bash", "venv")).await;
    assert_eq!(ok(&r), "venv a-b\n");
    // Written by one command, used by the next: the scripts are sourced on every command.
    let r = s
        .exec(request(
            &tree,
            "bash",
            &format!(
                "echo 'export BAR=from-cmd' > {}/30-c.sh",
                s.env_dir().display()
            ),
        ))
        .await;
    // The env directory is not writable under the default profile.
    assert_ne!(r.outcome, Outcome::Success);
    fs::write(s.env_dir().join("30-c.sh"), "export BAR=later\n").unwrap();
    assert_eq!(
        ok(&s.exec(request(&tree, "bash", "echo $BAR; venv")).await),
        "later\nvenv a-b\n"
    );

    let extra = tree.cwd.join("extra.env");
    fs::write(&extra, "export FOO=last\n").unwrap();
    let req = SessionRequest::new(["bash", "-lc", "venv"])
        .env(env(&tree).with_var("CORDON_ENV_FILE", &extra));
    assert_eq!(ok(&s.exec(req).await), "venv last\n");
}

#[tokio::test]
async fn session_overrides_win_and_argv_is_the_original() {
    let tree = Tree::new();
    fs::write(
        tree.home.join(".bashrc"),
        "export OVR=snap KEEP=snap\ngreet() { echo \"hello $1\"; }\n",
    )
    .unwrap();
    let mut s = session(&tree);
    fs::write(s.env_dir().join("10.sh"), "export OVR=envdir\n").unwrap();
    let argv = [
        "bash",
        "-lc",
        "greet \"$0\"; echo $OVR $KEEP $CORDON_SANDBOX",
        "zero",
    ];
    let req = SessionRequest::new(argv).env(env(&tree).with_var("OVR", "req"));
    let r = s.exec(req).await;
    assert_eq!(ok(&r), "hello zero\nreq snap 1\n");
    let expected: Vec<OsString> = argv.iter().map(OsString::from).collect();
    assert_eq!(r.argv, expected);
    // Without the override, the env/ script wins over the snapshot.
    let r = s.exec(request(&tree, "bash", "echo $OVR")).await;
    assert_eq!(ok(&r), "envdir\n");
}

#[tokio::test]
async fn session_keeps_symlinked_root_lexical() {
    let tree = Tree::new();
    let real = tree.root.join("real-ws");
    fs::create_dir(&real).unwrap();
    let link = tree.root.join("ws");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let dir = tree.root.join("snapshots");
    let mut s = session_at(&tree, &link, default_policy(&tree, &link), &dir);
    let r = s
        .exec(request(
            &tree,
            "bash",
            "mkdir -p sub/deeper && cd sub && pwd -P",
        ))
        .await;
    assert_eq!(ok(&r), format!("{}\n", real.join("sub").display()));
    assert_eq!(s.cwd(), link.join("sub"));
    let r = s.exec(request(&tree, "bash", "cd ..; pwd")).await;
    ok(&r);
    assert_eq!(s.cwd(), link);
    // Outside every root the report is not adopted: the cwd stays, and the session says why.
    let r = s
        .exec(request(
            &tree,
            "bash",
            &format!("cd {}", tree.outside.display()),
        ))
        .await;
    ok(&r);
    assert_eq!(s.cwd(), link);
    assert_eq!(
        s.last_cwd_update(),
        &CwdUpdate::Rejected {
            reported: tree.outside.clone(),
            reason: CwdRejection::OutsideWorkspace,
        }
    );
}

#[tokio::test]
async fn session_snapshot_needs_no_readable_root() {
    let tree = Tree::new();
    fs::write(
        tree.home.join(".bashrc"),
        "greet() { echo \"hello $1\"; }\n",
    )
    .unwrap();
    // Readable: the system only. Neither HOME (where the snapshots live) nor the tree root.
    let mut read: Vec<PathBuf> = ["/usr", "/bin", "/lib", "/lib64", "/etc"]
        .iter()
        .filter_map(|p| fs::canonicalize(p).ok())
        .collect();
    read.dedup();
    let json = serde_json::json!({
        "version": 1,
        "filesystem": {"read": read, "write": [&tree.cwd]},
        "network": {"mode": "denied"},
        "enforcement": {"missing_layer": "refuse", "carve_outs": "report"},
    });
    let policy = SandboxPolicy::from_json(&json.to_string()).unwrap();
    let dir = tree.home.join(".cache/cordon/sessions");
    let mut s = session_at(&tree, &tree.cwd, policy.clone(), &dir);
    let r = s.exec(request(&tree, "bash", "greet x")).await;
    assert_eq!(ok(&r), "hello x\n");
    // The snapshot arrives on a sealed memfd: the command's policy is the session's, with no
    // root added for the session directory.
    let used = r.policy.unwrap();
    assert_eq!(used.filesystem.read, read);
    assert_eq!(s.policy(), Some(&policy));
    // The home itself stays unreadable.
    let r = s
        .exec(request(
            &tree,
            "bash",
            &format!("ls {}", tree.home.display()),
        ))
        .await;
    assert_eq!(r.outcome, Outcome::Failed { code: 2 });
}

#[tokio::test]
async fn session_without_snapshot_runs_the_command_unchanged() {
    let tree = Tree::new();
    // The capture sources .bashrc, which exits before the marker: no snapshot. A login bash
    // does not read .bashrc itself, so the command still runs.
    fs::write(tree.home.join(".bashrc"), "exit 7\n").unwrap();
    let mut s = session(&tree);
    let r = s.exec(request(&tree, "bash", "echo ok; cd /")).await;
    assert_eq!(ok(&r), "ok\n");
    assert_eq!(s.snapshot_path(&shell_path("bash")), None);
    // No wrapper, so no cwd report either.
    assert_eq!(s.cwd(), tree.cwd);
    assert_eq!(r.argv, ["bash", "-lc", "echo ok; cd /"]);
}
