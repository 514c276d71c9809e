//! Filesystem confinement under the default profile, against the real kernel.

mod common;

use std::fs;

use common::{lines, stderr, Tree};

#[test]
fn reads_anywhere_work_and_return_the_content() {
    require_landlock!(1);
    let tree = Tree::new();
    fs::write(tree.outside.join("data"), "outside data\n").unwrap();
    let path = tree.outside.join("data");
    let out = tree.py(
        &[],
        &format!(
            "print(open({:?}).read().strip()); print(len(open('/etc/passwd').read()) > 0)",
            path
        ),
    );
    assert_eq!(lines(&out), ["outside data", "True"], "{}", stderr(&out));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn writes_in_cwd_and_tmp_work() {
    require_landlock!(1);
    let tree = Tree::new();
    let tmp_file = tempfile::NamedTempFile::new_in("/tmp").unwrap();
    let out = tree.run(&[
        "--",
        "sh",
        "-c",
        &format!(
            "echo inside > made.txt && mkdir sub && echo deep > sub/f && echo tmp > {}",
            tmp_file.path().display()
        ),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(tree.cwd.join("made.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(
        fs::read_to_string(tree.cwd.join("sub/f")).unwrap(),
        "deep\n"
    );
    assert_eq!(fs::read_to_string(tmp_file.path()).unwrap(), "tmp\n");
}

#[test]
fn writes_outside_fail_with_eacces() {
    require_landlock!(1);
    let tree = Tree::new();
    std::os::unix::fs::symlink(&tree.outside, tree.cwd.join("escape")).unwrap();
    let script = format!(
        r#"
flags = os.O_WRONLY | os.O_CREAT
print(attempt(lambda: os.open("/etc/cordon-test-file", flags)))
print(attempt(lambda: os.open({home:?}, flags)))
print(attempt(lambda: os.open("escape/planted", flags)))
print(attempt(lambda: os.mkdir({outside_dir:?})))
print(attempt(lambda: os.symlink("/etc/passwd", {outside_link:?})))
"#,
        home = tree.home.join(".bashrc"),
        outside_dir = tree.outside.join("newdir"),
        outside_link = tree.outside.join("link"),
    );
    // The namespace layer's read-only mounts refuse first (EROFS); Landlock alone, EACCES.
    if common::userns_available() {
        let out = tree.py(&[], &script);
        assert_eq!(lines(&out), ["EROFS"; 5], "{}", stderr(&out));
    }
    let out = tree.py_without_userns(&[], &script);
    assert_eq!(lines(&out), ["EACCES"; 5], "{}", stderr(&out));
    assert!(!std::path::Path::new("/etc/cordon-test-file").exists());
    assert!(!tree.home.join(".bashrc").exists());
    assert!(!tree.outside.join("planted").exists());
    assert!(!tree.outside.join("newdir").exists());
}

#[test]
fn linking_or_renaming_an_outside_file_into_cwd_fails() {
    require_landlock!(1);
    let tree = Tree::new();
    let victim = tree.outside.join("victim");
    fs::write(&victim, "keep me").unwrap();
    let script = format!(
        r#"
print(attempt(lambda: os.link({victim:?}, "hardlink")))
print(attempt(lambda: os.rename({victim:?}, "moved")))
"#
    );
    let out = tree.py(&[], &script);
    let got = lines(&out);
    assert_eq!(got.len(), 2, "{}", stderr(&out));
    for result in &got {
        assert!(result == "EXDEV" || result == "EACCES", "got {got:?}");
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(!tree.cwd.join("hardlink").exists());
    assert!(!tree.cwd.join("moved").exists());
}

#[test]
fn truncating_an_outside_file_fails() {
    require_landlock!(3);
    let tree = Tree::new();
    let victim = tree.outside.join("victim");
    fs::write(&victim, "keep me").unwrap();
    let script = format!("print(attempt(lambda: os.truncate({victim:?}, 0)))");
    if common::userns_available() {
        let out = tree.py(&[], &script);
        assert_eq!(lines(&out), ["EROFS"], "{}", stderr(&out));
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
    }
    let out = tree.py_without_userns(&[], &script);
    assert_eq!(lines(&out), ["EACCES"], "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
}

#[test]
fn device_allow_list_works() {
    require_landlock!(1);
    let tree = Tree::new();
    let out = tree.run(&[
        "--",
        "sh",
        "-c",
        "echo gone > /dev/null && head -c 4 /dev/zero | wc -c && head -c 4 /dev/urandom | wc -c",
    ]);
    assert_eq!(lines(&out), ["4", "4"], "{}", stderr(&out));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn read_only_preset_denies_writes_in_cwd() {
    require_landlock!(1);
    let tree = Tree::new();
    let script = "print(attempt(lambda: os.open('x', os.O_WRONLY | os.O_CREAT)))\nprint(attempt(lambda: open('/dev/null', 'w').write('x')))";
    if common::userns_available() {
        let out = tree.py(&["-p", "read-only"], script);
        assert_eq!(lines(&out), ["EROFS", "OK"], "{}", stderr(&out));
    }
    let out = tree.py_without_userns(&["-p", "read-only"], script);
    assert_eq!(lines(&out), ["EACCES", "OK"], "{}", stderr(&out));
    assert!(!tree.cwd.join("x").exists());
}

#[test]
fn extra_writable_root_from_the_command_line() {
    require_landlock!(1);
    let tree = Tree::new();
    let outside = tree.outside.to_str().unwrap().to_owned();
    let out = tree.run(&[
        "-w",
        &outside,
        "--",
        "sh",
        "-c",
        "echo granted > ../outside/f",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(tree.outside.join("f")).unwrap(),
        "granted\n"
    );
}

#[test]
fn inherited_fd_to_an_outside_file_is_closed() {
    require_landlock!(1);
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let tree = Tree::new();
    let victim = tree.outside.join("victim");
    fs::write(&victim, "original").unwrap();
    let file = fs::OpenOptions::new().write(true).open(&victim).unwrap();
    let raw = file.as_raw_fd();
    let mut cmd = tree.cordon();
    cmd.args(["run", "--", "sh", "-c", "echo overwritten >&7"]);
    // SAFETY: dup2 is async-signal-safe; it gives the child an inheritable fd 7.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(raw, 7) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Bad file descriptor"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "original");
}

#[test]
fn root_cannot_use_capabilities_inside() {
    require_landlock!(1);
    let tree = Tree::new();
    // As uid 0, only dropped capabilities stand between the command and these operations.
    let victim = tree.outside.join("victim");
    fs::write(&victim, "x").unwrap();
    let script = format!(
        r#"
print(attempt(lambda: os.chown({victim:?}, 65534, 65534)))
print(attempt(lambda: os.mknod("node", 0o600 | 0o20000, os.makedev(1, 3))))
print(" ".join(l.split()[1] for l in open("/proc/self/status") if l.startswith("Cap")))
"#
    );
    // CapInh, CapPrm, CapEff, CapBnd, CapAmb: all empty.
    let empty = ["0000000000000000"; 5].join(" ");
    // With the namespace layer the read-only mount refuses the chown before any capability
    // check; without it, the missing CAP_CHOWN does.
    if common::userns_available() {
        let out = tree.py(&[], &script);
        assert_eq!(
            lines(&out),
            ["EROFS", "EPERM", empty.as_str()],
            "{}",
            stderr(&out)
        );
    }
    // There, uid 65534 is not mapped in the test's own user namespace (EINVAL before any
    // capability check); mknod and the empty sets still show the dropped capabilities.
    let out = tree.py_without_userns(&[], &script);
    assert_eq!(
        lines(&out),
        ["EINVAL", "EPERM", empty.as_str()],
        "{}",
        stderr(&out)
    );
}

#[test]
fn extra_readable_root_from_the_command_line() {
    require_landlock!(1);
    let tree = Tree::new();
    fs::write(tree.outside.join("f"), "readable\n").unwrap();
    let profile = tree.cwd.join("narrow.toml");
    fs::write(
        &profile,
        "[filesystem]\nread = [\"/usr\", \"/lib\", \"/lib64\", \"/bin\"]\n",
    )
    .unwrap();
    let target = tree.outside.join("f");
    let target = target.to_str().unwrap();
    let out = tree.run(&["-p", "narrow.toml", "--", "/bin/cat", target]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("denied read of {target}")),
        "{}",
        stderr(&out)
    );
    let outside = tree.outside.to_str().unwrap();
    let out = tree.run(&["-p", "narrow.toml", "-r", outside, "--", "/bin/cat", target]);
    assert_eq!(common::stdout(&out), "readable\n", "{}", stderr(&out));
}
