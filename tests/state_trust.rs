//! The parent trusts nothing a confined command could have written: shell snapshots, the
//! snapshot cache and session state, attacked the way a confined command would attack them.
//! Every test replays the attack with the real `cordon` binary (or `Session`) and the real
//! kernel, then checks the effect from outside: a marker file the payload would create, a
//! victim file outside the sandbox. Each has a harmless counterpart that must keep working.

mod common;

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{stderr, stdout, Tree};

/// `cordon ARGS...` in `cwd`, with the tree's HOME and, when given, `XDG_CACHE_HOME`.
fn cordon_in(tree: &Tree, cwd: &Path, xdg: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = tree.cordon();
    cmd.current_dir(cwd).env_remove("XDG_CACHE_HOME");
    if let Some(xdg) = xdg {
        cmd.env("XDG_CACHE_HOME", xdg);
    }
    cmd.args(args).output().expect("spawn cordon")
}

/// [`cordon_in`] on the Landlock + seccomp path: the attacks that need chmod or utime outside
/// the writable roots, which the namespace layer's read-only mounts refuse outright
/// (tests/namespaces.rs), so that what is tested here is what the parent believes afterwards.
fn cordon_in_without_userns(tree: &Tree, cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = tree.cordon();
    cmd.current_dir(cwd).env_remove("XDG_CACHE_HOME").args(args);
    common::without_userns(&cmd).output().expect("spawn cordon")
}

/// The snapshot cache `cordon` uses with this HOME / XDG_CACHE_HOME.
fn cache_of(tree: &Tree, xdg: Option<&Path>) -> PathBuf {
    xdg.map(Path::to_path_buf)
        .unwrap_or_else(|| tree.home.join(".cache"))
        .join("cordon/snapshots")
}

/// A `.bashrc` with a function the harmless runs use.
fn write_bashrc(tree: &Tree, extra: &str) {
    fs::write(
        tree.home.join(".bashrc"),
        format!("greet() {{ echo \"hello $1\"; }}\n{extra}"),
    )
    .unwrap();
}

/// Shell text that overwrites every snapshot in `cache` (and plants a new one and two
/// symlinks to `victim`) with a payload that creates `marker`, then prints `planted`.
fn plant_script(cache: &Path, marker: &Path, victim: &Path) -> String {
    let payload = format!(
        "touch '{m}'\ngreet() {{ touch '{m}'; echo evil; }}\n",
        m = marker.display()
    );
    format!(
        "d='{d}'; mkdir -p \"$d\" || exit 9; \
         for f in \"$d\"/*.sh \"$d\"/bash-planted.0.sh; do printf '%s' PAYLOAD > \"$f\" || exit 10; done; \
         ln -sf '{v}' \"$d/link.0.sh\"; ln -sfn '{vd}' \"$d/dirlink\"; \
         grep -l evil \"$d\"/*.sh >/dev/null && echo planted",
        d = cache.display(),
        v = victim.display(),
        vd = victim.parent().unwrap().display(),
    )
    .replace("PAYLOAD", &shell_quote(&payload))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A victim file outside every writable root, with a mode to watch.
fn victim(tree: &Tree) -> PathBuf {
    let dir = tree.outside.join("victims");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("victim.sh");
    fs::write(&path, "victim content\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn assert_victim_intact(victim: &Path) {
    assert_eq!(fs::read_to_string(victim).unwrap(), "victim content\n");
    assert_eq!(fs::metadata(victim).unwrap().mode() & 0o7777, 0o644);
    let dir = victim.parent().unwrap();
    assert_eq!(fs::metadata(dir).unwrap().mode() & 0o7777, 0o755);
    let names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        ["victim.sh"],
        "something was written next to the victim"
    );
}

fn cache_entries(cache: &Path) -> Vec<String> {
    let mut names: Vec<String> = match fs::read_dir(cache) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// A profile that lifts the default profile's protection of cordon's cache, so that the cache
/// is writable for the command and what the parent does afterwards is what gets tested.
fn cache_unprotected(tree: &Tree) -> String {
    let path = tree.root.join("cache-unprotected.toml");
    fs::write(
        &path,
        "extends = \"workspace-write\"\n[filesystem]\nunprotect = [\"~/.cache/cordon\"]\n",
    )
    .unwrap();
    path.display().to_string()
}

/// Run 1 plants under `plant_args` (in `plant_cwd`), then each victim run must not run the
/// payload, and the cache must have been purged in between. Under the default profile the
/// cache is read-only even where a writable root covers it; the plant runs lift that.
fn replay_plant(tree: &Tree, xdg: Option<&Path>, plant_cwd: &Path, plant_args: &[&str]) {
    let cache = cache_of(tree, xdg);
    let lifted = cache_unprotected(tree);
    let marker = tree.outside.join("marker");
    let victim = victim(tree);
    for victim_args in [
        &["-p", "full-access"][..],
        &["--network", "enabled"][..],
        &[][..],
    ] {
        // A trusted run fills the cache, so that there is a real snapshot to replace.
        let warm = cordon_in(
            tree,
            &tree.cwd,
            xdg,
            &[
                "run",
                "-p",
                "full-access",
                "--",
                "bash",
                "-lc",
                "greet warm",
            ],
        );
        assert_eq!(stdout(&warm), "hello warm\n", "{}", stderr(&warm));
        assert!(!cache_entries(&cache).is_empty());

        let script = plant_script(&cache, &marker, &victim);
        let mut args = vec!["run"];
        args.extend_from_slice(plant_args);
        args.extend_from_slice(&["--", "sh", "-c", &script]);
        // Protected by default: the plant fails (exit 10, the first write refused).
        let refused = cordon_in(tree, plant_cwd, xdg, &args);
        assert_eq!(refused.status.code(), Some(10), "{}", stderr(&refused));
        assert_eq!(stdout(&refused), "");
        args.splice(1..1, ["-p", lifted.as_str()]);
        let plant = cordon_in(tree, plant_cwd, xdg, &args);
        // The attack itself works: the cache was writable for that command.
        assert_eq!(stdout(&plant), "planted\n", "{}", stderr(&plant));
        // ... and nothing it planted survives the run.
        assert_eq!(cache_entries(&cache), Vec::<String>::new());
        assert_victim_intact(&victim);

        let mut args = vec!["run"];
        args.extend_from_slice(victim_args);
        args.extend_from_slice(&["--", "bash", "-lc", "greet victim; true"]);
        let run = cordon_in(tree, &tree.cwd, xdg, &args);
        assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
        assert!(!stdout(&run).contains("evil"), "{}", stdout(&run));
        assert!(!marker.exists(), "payload ran in {victim_args:?}");
        assert_victim_intact(&victim);
    }
}

#[test]
fn state_trust_snapshot_planted_in_a_tmp_cache_is_never_sourced() {
    let tree = Tree::new();
    write_bashrc(&tree, "");
    // A private directory under /tmp, which the default profile makes writable.
    let xdg = tempfile::tempdir_in("/tmp").unwrap();
    replay_plant(&tree, Some(xdg.path()), &tree.cwd, &[]);
    // Harmless counterpart: a trusted run still gets the cached function.
    let out = cordon_in(
        &tree,
        &tree.cwd,
        Some(xdg.path()),
        &[
            "run",
            "-p",
            "full-access",
            "--",
            "bash",
            "-lc",
            "greet again",
        ],
    );
    assert_eq!(stdout(&out), "hello again\n");
}

#[test]
fn state_trust_snapshot_planted_from_cwd_home_is_never_sourced() {
    let tree = Tree::new();
    write_bashrc(&tree, "");
    replay_plant(&tree, None, &tree.home, &[]);
}

#[test]
fn state_trust_snapshot_planted_with_writable_cache_is_never_sourced() {
    let tree = Tree::new();
    write_bashrc(&tree, "");
    let dot_cache = tree.home.join(".cache");
    fs::create_dir_all(&dot_cache).unwrap();
    replay_plant(&tree, None, &tree.cwd, &["-w", dot_cache.to_str().unwrap()]);
    // Harmless counterpart: the default profile (cache not writable) reuses the snapshot.
    let cache = cache_of(&tree, None);
    let first = cordon_in(
        &tree,
        &tree.cwd,
        None,
        &["run", "--", "bash", "-lc", "greet a"],
    );
    assert_eq!(stdout(&first), "hello a\n", "{}", stderr(&first));
    let before = cache_entries(&cache);
    assert_eq!(before.len(), 1, "{before:?}");
    let second = cordon_in(
        &tree,
        &tree.cwd,
        None,
        &["run", "--", "bash", "-lc", "greet b"],
    );
    assert_eq!(stdout(&second), "hello b\n");
    assert_eq!(cache_entries(&cache), before);
}

#[test]
fn state_trust_a_run_still_planting_keeps_concurrent_runs_off_the_cache() {
    let tree = Tree::new();
    write_bashrc(&tree, "");
    let cache = cache_of(&tree, None);
    let marker = tree.outside.join("marker");
    let victim = victim(&tree);
    let warm = cordon_in(
        &tree,
        &tree.cwd,
        None,
        &[
            "run",
            "-p",
            "full-access",
            "--",
            "bash",
            "-lc",
            "greet warm",
        ],
    );
    assert_eq!(stdout(&warm), "hello warm\n");
    // cwd = HOME, with the cache's protection lifted, makes the cache writable; the command
    // plants, then stays alive.
    let script = format!("{}; sleep 4", plant_script(&cache, &marker, &victim));
    let lifted = cache_unprotected(&tree);
    let mut planter = tree
        .cordon()
        .current_dir(&tree.home)
        .env_remove("XDG_CACHE_HOME")
        .args(["run", "-p", &lifted, "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(planter.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "planted\n");
    // While it runs, the planted snapshot sits in the cache; no other run may source it.
    assert!(cache_entries(&cache)
        .iter()
        .any(|n| n == "bash-planted.0.sh"));
    for args in [
        &[
            "run",
            "-p",
            "full-access",
            "--",
            "bash",
            "-lc",
            "greet x; true",
        ][..],
        &[
            "run",
            "--network",
            "enabled",
            "--",
            "bash",
            "-lc",
            "greet x; true",
        ][..],
    ] {
        let out = cordon_in(&tree, &tree.cwd, None, args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(!stdout(&out).contains("evil"), "{args:?}");
        assert!(
            !marker.exists(),
            "{args:?}: the planted snapshot was sourced"
        );
    }
    assert!(planter.wait().unwrap().success());
    // The run ended: purged, and the cache is trusted again.
    assert!(!cache_entries(&cache)
        .iter()
        .any(|n| n == "bash-planted.0.sh"));
    let out = cordon_in(
        &tree,
        &tree.cwd,
        None,
        &[
            "run",
            "-p",
            "full-access",
            "--",
            "bash",
            "-lc",
            "greet again",
        ],
    );
    assert_eq!(stdout(&out), "hello again\n");
    assert!(!marker.exists());
    assert_victim_intact(&victim);
}

#[test]
fn state_trust_startup_file_in_a_writable_root_means_no_snapshot_and_one_note() {
    let tree = Tree::new();
    write_bashrc(&tree, "");
    // cwd = HOME: the default profile makes ~/.bashrc writable.
    let out = cordon_in(
        &tree,
        &tree.home,
        None,
        &["run", "--", "bash", "-lc", "echo ran"],
    );
    assert_eq!(stdout(&out), "ran\n");
    let notes: Vec<&str> = std::str::from_utf8(&out.stderr)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cordon: note: no shell snapshot"))
        .collect();
    assert_eq!(notes.len(), 1, "{}", stderr(&out));
    assert!(
        notes[0].contains(tree.home.to_str().unwrap()),
        "{}",
        notes[0]
    );
    // Nothing was captured or cached for that run.
    assert_eq!(cache_entries(&cache_of(&tree, None)), Vec::<String>::new());
}

#[test]
fn state_trust_capture_of_a_poisoned_bashrc_cannot_write_or_connect() {
    let tree = Tree::new();
    // .bashrc sources a file in the (writable) workspace.
    let sourced = tree.cwd.join("env.sh");
    fs::write(&sourced, "true\n").unwrap();
    write_bashrc(&tree, &format!(". '{}'\n", sourced.display()));
    let marker = tree.outside.join("marker");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();

    // Run 1 (confined) poisons the sourced file and touches .bashrc (utime is not mediated
    // by Landlock) so that the next run captures again.
    let payload = format!(
        "echo pwned > '{m}'; {{ echo hi > /dev/tcp/127.0.0.1/{port}; }} 2>/dev/null",
        m = marker.display()
    );
    let script = format!(
        "printf '%s\\n' {} > '{}' && touch -d '2001-01-01' ~/.bashrc && echo poisoned",
        shell_quote(&payload),
        sourced.display()
    );
    let out = cordon_in_without_userns(&tree, &tree.cwd, &["run", "--", "sh", "-c", &script]);
    assert_eq!(stdout(&out), "poisoned\n", "{}", stderr(&out));

    for args in [
        &["run", "--", "bash", "-lc", "greet x"][..],
        &["run", "-p", "full-access", "--", "bash", "-lc", "greet x"][..],
    ] {
        let out = cordon_in(&tree, &tree.cwd, None, args);
        // The capture ran the payload, confined: no file outside, no connection.
        assert!(!marker.exists(), "{args:?}: {}", stderr(&out));
        assert_eq!(
            listener.accept().map(|_| ()).unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock,
            "{args:?}: the capture connected out"
        );
        // Harmless counterpart: the function from the same .bashrc is there.
        assert_eq!(stdout(&out), "hello x\n", "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn state_trust_symlinked_cache_dir_is_refused_by_clean_and_run() {
    let tree = Tree::new();
    write_bashrc(&tree, "");
    let victim = victim(&tree);
    // An old file with a snapshot's name in the victim directory: cleanup must not reach it.
    let xdg = tree.root.join("xdg");
    for link_at in ["cordon/snapshots", "cordon"] {
        let _ = fs::remove_dir_all(&xdg);
        let link = xdg.join(link_at);
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        let target = if link_at == "cordon" {
            // The link replaces `cordon`, so the victim directory must hold `snapshots`.
            let t = tree.outside.join("fake-cordon");
            fs::create_dir_all(t.join("snapshots")).unwrap();
            std::os::unix::fs::symlink(victim.parent().unwrap(), t.join("snapshots/inner"))
                .unwrap();
            t
        } else {
            victim.parent().unwrap().to_path_buf()
        };
        std::os::unix::fs::symlink(&target, &link).unwrap();

        let out = cordon_in(
            &tree,
            &tree.cwd,
            Some(&xdg),
            &["snapshot", "clean", "--retention", "1ms"],
        );
        assert_eq!(out.status.code(), Some(125), "{link_at}: {}", stdout(&out));
        assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
        assert_victim_intact(&victim);

        let out = cordon_in(
            &tree,
            &tree.cwd,
            Some(&xdg),
            &["run", "-p", "full-access", "--", "bash", "-lc", "echo ran"],
        );
        assert_eq!(stdout(&out), "ran\n", "{}", stderr(&out));
        assert_victim_intact(&victim);
        if link_at == "cordon" {
            let names: Vec<_> = fs::read_dir(target.join("snapshots"))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, ["inner"]);
        }
    }
}

#[test]
fn state_trust_symlinks_at_snapshot_and_lock_names_are_never_followed() {
    let tree = Tree::new();
    write_bashrc(&tree, "");
    let victim = victim(&tree);
    let cache = cache_of(&tree, None);
    let out = cordon_in(
        &tree,
        &tree.cwd,
        None,
        &["run", "--", "bash", "-lc", "greet a"],
    );
    assert_eq!(stdout(&out), "hello a\n");
    let names = cache_entries(&cache);
    assert_eq!(names.len(), 1);
    let snapshot = cache.join(&names[0]);
    let lock = cache.join(names[0].replace(".0.sh", ".lock"));
    fs::remove_file(&snapshot).unwrap();
    std::os::unix::fs::symlink(&victim, &snapshot).unwrap();
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    std::os::unix::fs::symlink(&victim, cache.join("other.3.sh")).unwrap();

    // A normal run neither sources, writes nor chmods through the links.
    let out = cordon_in(
        &tree,
        &tree.cwd,
        None,
        &["run", "--", "bash", "-lc", "greet b"],
    );
    assert_eq!(stdout(&out), "hello b\n", "{}", stderr(&out));
    assert_victim_intact(&victim);
    // The link at the snapshot's name was replaced by a real snapshot.
    assert!(fs::symlink_metadata(&snapshot)
        .unwrap()
        .file_type()
        .is_file());

    // Cleanup deletes the links as links.
    let out = cordon_in(&tree, &tree.cwd, None, &["snapshot", "clean"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(fs::symlink_metadata(&lock).is_err());
    assert!(fs::symlink_metadata(cache.join("other.3.sh")).is_err());
    assert_victim_intact(&victim);
    // The real snapshot is recent and stays.
    assert!(snapshot.is_file());
}

#[test]
fn state_trust_loosened_modes_in_the_cache_are_not_believed() {
    let tree = Tree::new();
    write_bashrc(&tree, "");
    let cache = cache_of(&tree, None);
    let marker = tree.outside.join("marker");
    let out = cordon_in(
        &tree,
        &tree.cwd,
        None,
        &["run", "--", "bash", "-lc", "greet a"],
    );
    assert_eq!(stdout(&out), "hello a\n");
    let names = cache_entries(&cache);
    let snapshot = cache.join(&names[0]);
    // chmod is not mediated by Landlock: a confined command opens the cache to everyone.
    let script = format!(
        "chmod 777 '{c}' && chmod 666 '{s}' && echo opened",
        c = cache.display(),
        s = snapshot.display()
    );
    let out = cordon_in_without_userns(&tree, &tree.cwd, &["run", "--", "sh", "-c", &script]);
    assert_eq!(stdout(&out), "opened\n", "{}", stderr(&out));
    // Anyone may now write the snapshot; someone does.
    fs::write(
        &snapshot,
        format!("touch '{}'\ngreet() {{ echo evil; }}\n", marker.display()),
    )
    .unwrap();
    let out = cordon_in(
        &tree,
        &tree.cwd,
        None,
        &["run", "-p", "full-access", "--", "bash", "-lc", "greet b"],
    );
    assert_eq!(stdout(&out), "hello b\n", "{}", stderr(&out));
    assert!(!marker.exists());
    // The directory is private again, and the snapshot is a fresh, private one.
    assert_eq!(fs::metadata(&cache).unwrap().mode() & 0o7777, 0o700);
    assert_eq!(fs::metadata(&snapshot).unwrap().mode() & 0o7777, 0o600);
    assert!(!fs::read_to_string(&snapshot).unwrap().contains("evil"));
}

#[test]
fn state_trust_a_confined_flock_on_the_cache_blocks_nothing() {
    let tree = Tree::new();
    write_bashrc(&tree, "");
    let cache = cache_of(&tree, None);
    let out = cordon_in(
        &tree,
        &tree.cwd,
        None,
        &["run", "--", "bash", "-lc", "greet a"],
    );
    assert_eq!(stdout(&out), "hello a\n");
    // Every file in the cache (and the lock names older versions used) is locked
    // exclusively by a confined command that can read the cache.
    let names = cache_entries(&cache);
    let lock = cache.join(names[0].replace(".0.sh", ".lock"));
    // The lock name does not exist (nobody creates it any more) and cannot be created.
    let script = format!(
        "import fcntl, glob, sys, time\n\
         fs = [open(p, 'rb') for p in glob.glob('{c}/*')]\n\
         for f in fs: fcntl.flock(f, fcntl.LOCK_EX)\n\
         try:\n    open('{l}', 'a')\n    print('lock-created')\n\
         except OSError as e:\n    print('lock-refused')\n\
         print('locked', len(fs)); sys.stdout.flush(); time.sleep(30)\n",
        c = cache.display(),
        l = lock.display()
    );
    let mut holder = tree
        .cordon()
        .env_remove("XDG_CACHE_HOME")
        .args([
            "run",
            "--",
            common::python().to_str().unwrap(),
            "-c",
            &script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "lock-refused\n");
    line.clear();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "locked 1\n");

    for args in [
        &["run", "--", "bash", "-lc", "greet b"][..],
        &["run", "-p", "full-access", "--", "bash", "-lc", "greet b"][..],
        &["snapshot", "clean"][..],
    ] {
        let started = Instant::now();
        let mut child = tree
            .cordon()
            .env_remove("XDG_CACHE_HOME")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(15) {
                let _ = child.kill();
                let _ = holder.kill();
                panic!("{args:?} blocked behind the confined lock holder");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        assert!(status.success(), "{args:?}: {}", stderr(&out));
        if args[0] == "run" {
            assert_eq!(stdout(&out), "hello b\n");
        }
    }
    let _ = holder.kill();
    let _ = holder.wait();
}

mod session {
    use super::*;
    use cordon::exec::{EnvPolicy, Outcome, Sandbox};
    use cordon::helper::Helper;
    use cordon::profile::{PermissionProfile, ResolveContext};
    use cordon::sandbox::SandboxPolicy;
    use cordon::session::{
        CwdRejection, CwdUpdate, Session, SessionError, SessionOptions, SessionRequest,
    };

    fn sandbox() -> Sandbox {
        Sandbox::new(Helper::cordon_binary(env!("CARGO_BIN_EXE_cordon")))
    }

    fn policy(tree: &Tree) -> SandboxPolicy {
        PermissionProfile::default_profile()
            .resolve(&ResolveContext::new(&tree.cwd).with_home(&tree.home))
            .unwrap()
            .policy
            .unwrap()
    }

    fn env(tree: &Tree) -> EnvPolicy {
        EnvPolicy::default().with_var("HOME", &tree.home)
    }

    fn options(tree: &Tree, dir: &Path) -> SessionOptions {
        SessionOptions::new(dir, &tree.cwd)
            .policy(Some(policy(tree)))
            .snapshot_env(env(tree))
    }

    fn request(tree: &Tree, script: &str) -> SessionRequest {
        SessionRequest::new(["bash", "-lc", script]).env(env(tree))
    }

    #[test]
    fn state_trust_session_dir_inside_a_writable_root_is_a_typed_error() {
        let tree = Tree::new();
        let inside = tree.cwd.join("sessions");
        match Session::new(sandbox(), options(&tree, &inside)) {
            Err(SessionError::InsideWritableRoot { dir, root }) => {
                assert_eq!(dir, inside);
                assert_eq!(root, tree.cwd);
            }
            other => panic!("expected InsideWritableRoot, got {other:?}"),
        }
        assert!(!inside.exists());
        // Harmless counterpart: outside every writable root it works, and a later policy
        // that would cover it is refused, leaving the old one in place.
        let outside = tree.root.join("sessions");
        let mut s = Session::new(sandbox(), options(&tree, &outside)).unwrap();
        let mut wider = policy(&tree);
        wider.filesystem.write.push(tree.root.clone());
        assert!(matches!(
            s.set_policy(Some(wider)),
            Err(SessionError::InsideWritableRoot { .. })
        ));
        assert_eq!(s.policy(), Some(&policy(&tree)));
    }

    #[tokio::test]
    async fn state_trust_session_env_dir_cannot_be_planted() {
        let tree = Tree::new();
        write_bashrc(&tree, "");
        let marker = tree.outside.join("marker");
        let victim = victim(&tree);
        let dir = tree.root.join("sessions");
        let mut s = Session::new(sandbox(), options(&tree, &dir)).unwrap();
        fs::write(s.env_dir().join("10-mine.sh"), "export FROM_ENV=mine\n").unwrap();
        // Entries the embedder did not make as private regular files are ignored.
        std::os::unix::fs::symlink(&victim, s.env_dir().join("20-link.sh")).unwrap();
        let loose = s.env_dir().join("30-loose.sh");
        fs::write(&loose, format!("touch '{}'\n", marker.display())).unwrap();
        fs::set_permissions(&loose, fs::Permissions::from_mode(0o666)).unwrap();

        let plant = format!(
            "printf 'touch %s\\n' '{m}' > '{e}/40-planted.sh' 2>/dev/null && echo wrote || echo refused",
            m = marker.display(),
            e = s.env_dir().display()
        );
        let r = s.exec(request(&tree, &plant)).await;
        assert_eq!(String::from_utf8_lossy(&r.stdout.bytes), "refused\n");
        assert!(!s.env_dir().join("40-planted.sh").exists());

        let r = s.exec(request(&tree, "greet x; echo \"$FROM_ENV\"")).await;
        assert_eq!(r.outcome, Outcome::Success);
        // Harmless counterpart: the snapshot and the embedder's own script still apply.
        assert_eq!(String::from_utf8_lossy(&r.stdout.bytes), "hello x\nmine\n");
        assert!(!marker.exists());
        assert_victim_intact(&victim);
    }

    #[tokio::test]
    async fn state_trust_session_cwd_outside_the_workspace_is_not_adopted() {
        let tree = Tree::new();
        write_bashrc(&tree, "");
        let dir = tree.root.join("sessions");
        let mut s = Session::new(sandbox(), options(&tree, &dir)).unwrap();
        // Harmless counterpart: cd inside the workspace is tracked.
        let r = s.exec(request(&tree, "mkdir -p sub && cd sub")).await;
        assert_eq!(r.outcome, Outcome::Success);
        assert_eq!(s.cwd(), tree.cwd.join("sub"));
        assert_eq!(
            s.last_cwd_update(),
            &CwdUpdate::Adopted(tree.cwd.join("sub"))
        );

        // A forged report (the trap removed, a path written by hand), a symlink out of the
        // workspace, and a path that is no directory: none is adopted.
        fs::create_dir_all(tree.cwd.join("sub")).unwrap();
        std::os::unix::fs::symlink(&tree.outside, tree.cwd.join("sub/out")).unwrap();
        for (script, reported, reason) in [
            (
                format!("trap - EXIT; echo '{}' >&9", tree.outside.display()),
                tree.outside.clone(),
                CwdRejection::OutsideWorkspace,
            ),
            (
                "cd out".to_string(),
                tree.outside.clone(),
                CwdRejection::OutsideWorkspace,
            ),
            (
                "trap - EXIT; echo /nonexistent/dir >&9".to_string(),
                PathBuf::from("/nonexistent/dir"),
                CwdRejection::NotADirectory,
            ),
        ] {
            let r = s.exec(request(&tree, &script)).await;
            assert_eq!(r.outcome, Outcome::Success, "{script}");
            assert_eq!(s.cwd(), tree.cwd.join("sub"), "{script}");
            assert_eq!(
                s.last_cwd_update(),
                &CwdUpdate::Rejected { reported, reason },
                "{script}"
            );
        }
    }
}
