//! The helper's namespace layer on its own, with policies written directly: the cases a
//! profile never produces today (carve-outs that do not exist yet, links planted on a path of
//! the view) and the kernel refusing a fresh `/proc`. Real namespaces and mounts, as root.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn userns_available() -> bool {
    cordon_sandbox::namespaces::userns::probe().is_ok()
}

macro_rules! require_userns {
    () => {
        if !userns_available() {
            eprintln!("SKIPPED: needs unprivileged user namespaces");
            return;
        }
    };
}

/// A private directory (not under /tmp, which policies here do not make writable anyway).
fn workdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

fn policy(write: &Path, read_only: &[PathBuf], deny_read: &[PathBuf]) -> String {
    let list = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|p| format!("{:?}", p.display().to_string()))
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{:?}],"read_only":[{}],"deny_read":[{}]}},"network":{{"mode":"denied"}},"enforcement":{{"missing_layer":"refuse","carve_outs":"refuse"}}}}"#,
        write.display().to_string(),
        list(read_only),
        list(deny_read)
    )
}

/// Runs the helper with a status fd, under `prefix` (a shell prefix, may be empty). Returns the
/// output, with the status records on stdout and the command's own stdout on stderr.
fn run(prefix: &str, policy: &str, cwd: &Path, script: &str) -> Output {
    let line = format!(
        "exec 3>&1 1>&2; exec {prefix} {} --status-fd 3 --policy \"$POLICY\" -- sh -c \"$SCRIPT\"",
        env!("CARGO_BIN_EXE_cordon-sandbox")
    );
    Command::new("sh")
        .args(["-c", &line])
        .current_dir(cwd)
        .env("POLICY", policy)
        .env("SCRIPT", script)
        .env_remove("CORDON_LANDLOCK_ABI_MAX")
        .output()
        .unwrap()
}

fn records(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn command_output(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_carve_out_that_does_not_exist_cannot_be_created() {
    require_userns!();
    let (_dir, w) = workdir();
    let policy = policy(
        &w,
        &[w.join(".git"), w.join("a/b/hooks"), w.join("a/c/hooks")],
        &[],
    );
    let out = run(
        "",
        &policy,
        &w,
        "mkdir .git 2>/dev/null || echo mkdir-refused; \
         (echo x > .git/config) 2>/dev/null || echo write-refused; \
         mkdir a/b 2>/dev/null || echo nested-refused; \
         echo fine > other && echo other-written",
    );
    assert_eq!(out.status.code(), Some(0), "{}", command_output(&out));
    assert_eq!(
        command_output(&out),
        "mkdir-refused\nwrite-refused\nnested-refused\nother-written\n"
    );
    // The receipt names the placeholders; they are gone again, the real work stays.
    let records = records(&out);
    assert_eq!(
        records[0]["placeholders"],
        serde_json::json!([w.join(".git"), w.join("a")])
    );
    assert!(!w.join(".git").exists());
    assert!(!w.join("a").exists());
    assert_eq!(fs::read_to_string(w.join("other")).unwrap(), "fine\n");
}

#[test]
fn a_symbolic_link_on_a_path_of_the_view_fails_closed() {
    require_userns!();
    let (_dir, w) = workdir();
    let (_elsewhere_dir, elsewhere) = workdir();
    fs::create_dir(elsewhere.join("secret")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, w.join("link")).unwrap();
    for policy in [
        policy(&w, &[w.join("link/secret")], &[]),
        policy(&w, &[], &[w.join("link/secret")]),
    ] {
        let out = run("", &policy, &w, "touch ran");
        assert_eq!(out.status.code(), Some(125), "{}", command_output(&out));
        let records = records(&out);
        assert_eq!(records[0]["kind"], "setup_error", "{records:?}");
        assert_eq!(records[0]["errno"], libc::ELOOP);
        assert!(!w.join("ran").exists(), "the command ran");
    }
    // Harmless counterpart: the same carve-out through the real path is enforced.
    let policy = policy(&w, &[], &[elsewhere.join("secret")]);
    let out = run("", &policy, &w, "touch ran");
    assert_eq!(out.status.code(), Some(0), "{}", command_output(&out));
    assert!(w.join("ran").exists());
}

#[test]
fn a_refused_proc_is_an_empty_proc_and_a_recorded_downgrade() {
    require_userns!();
    let (_dir, w) = workdir();
    let policy = policy(&w, &[], &[]);
    // A /proc partly covered by a mount the helper's namespace cannot remove (as in many
    // containers) makes the kernel refuse a fresh one with EPERM.
    let out = run(
        "unshare --user --map-root-user --mount -- sh -c 'mount -t tmpfs none /proc/sys && exec \"$0\" \"$@\"'",
        &policy,
        &w,
        "ls -A /proc | wc -l",
    );
    assert_eq!(out.status.code(), Some(0), "{}", command_output(&out));
    assert_eq!(command_output(&out).trim(), "0");
    let records = records(&out);
    assert_eq!(records[0]["downgrades"][0]["restriction"], "private_proc");
    assert!(!records[0]["layers"].to_string().contains("private_proc"));
    // Harmless counterpart: with the host's /proc intact, the command gets its own.
    let out = run("", &policy, &w, "ls -A /proc | grep -c '^1$'");
    assert_eq!(command_output(&out).trim(), "1");
    assert!(records_of(&out)[0]["layers"]
        .to_string()
        .contains("private_proc"));
}

fn records_of(out: &Output) -> Vec<serde_json::Value> {
    records(out)
}

#[test]
fn devices_outside_dev_are_refused() {
    let (_dir, w) = workdir();
    let bad = policy(&w, &[], &[]).replace(
        r#""deny_read":[]"#,
        r#""deny_read":[],"devices":["/etc/passwd"]"#,
    );
    let out = run("", &bad, &w, "touch ran");
    assert_eq!(out.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("not below /dev"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!w.join("ran").exists());
}

/// The view is the namespace's copy of the tree changed in place: every mount the command can
/// see outside its writable roots and its private `/dev/shm`, `/dev/pts` and `/proc` must be
/// read-only, and the tmpfs the empty file for hidden files comes from must be gone again.
#[test]
fn every_mount_outside_the_writable_roots_is_read_only_and_nothing_of_the_setup_is_left() {
    require_userns!();
    let (_dir, w) = workdir();
    let (_outside_dir, outside) = workdir();
    let secret = outside.join("token");
    fs::write(&secret, "t0k3n").unwrap();
    let policy = policy(&w, &[], std::slice::from_ref(&secret));
    let script = format!(
        "cat /proc/self/mountinfo; echo ---; cat {secret:?}; echo ---; \
         (echo x > {secret:?}) 2>&1 | sed 's/.*: //'; echo ok > written",
        secret = secret.display().to_string()
    );
    let out = run("", &policy, &w, &script);
    assert_eq!(out.status.code(), Some(0), "{}", command_output(&out));
    let text = command_output(&out);
    let parts: Vec<&str> = text.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{text}");
    let writable = |point: &str| {
        let point = Path::new(point);
        point.starts_with(&w)
            || point.starts_with("/dev/shm")
            || point.starts_with("/dev/pts")
            || point == Path::new("/proc")
    };
    let mut seen_root = false;
    for line in parts[0].lines() {
        // id parent major:minor root mount-point options ... - type source super-options
        let fields: Vec<&str> = line.split(' ').collect();
        let (root, point, options) = (fields[3], fields[4], fields[5]);
        let read_only = options.split(',').any(|o| o == "ro");
        seen_root |= point == "/";
        if !writable(point) {
            assert!(
                read_only,
                "a writable mount outside the writable roots: {line}"
            );
        }
        assert!(
            !(root == "/" && line.contains("mode=700") && line.contains(" tmpfs ")),
            "the staging tmpfs is still in the view: {line}"
        );
    }
    assert!(seen_root, "{text}");
    // The hidden file reads as empty and cannot be written, and outside it is unchanged.
    assert_eq!(parts[1], "", "{text}");
    assert_eq!(parts[2].trim(), "Read-only file system", "{text}");
    assert_eq!(fs::read_to_string(&secret).unwrap(), "t0k3n");
    // Harmless counterpart: the writable root is writable, and seen so from outside.
    assert_eq!(fs::read_to_string(w.join("written")).unwrap(), "ok\n");
}
