//! The standalone `cordon-sandbox` binary (its `no_main` entry point), run as a real process.

use std::process::Command;

const POLICY: &str = r#"{"version":1,"filesystem":{"read":["/"],"write":["/tmp"]},"network":{"mode":"denied"},"enforcement":{"missing_layer":"report","carve_outs":"refuse"}}"#;

fn helper() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordon-sandbox"));
    cmd.env_remove("CORDON_LANDLOCK_ABI_MAX");
    cmd
}

#[test]
fn runs_the_command_confined_with_default_signals() {
    let out = helper()
        .args(["--policy", POLICY, "--", "sh", "-c"])
        .arg("yes | head -1; grep -E '^(SigIgn|NoNewPrivs|Seccomp):' /proc/self/status; echo $CORDON_SANDBOX")
        .output()
        .unwrap();
    // Ignored signals are inherited as the caller left them (std's spawn resets SIGPIPE),
    // except glibc's internal 32 and 33, which its posix_spawn hands on ignored and the helper
    // resets to their default.
    let control = Command::new("grep")
        .args(["^SigIgn:", "/proc/self/status"])
        .output()
        .unwrap();
    let control = String::from_utf8_lossy(&control.stdout);
    let mask = u64::from_str_radix(control.trim().trim_start_matches("SigIgn:\t"), 16).unwrap();
    let control = format!("SigIgn:\t{:016x}\n", mask & !(1 << 31 | 1 << 32));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("y\n{control}NoNewPrivs:\t1\nSeccomp:\t2\n1\n")
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn exit_codes_follow_the_shell_conventions() {
    let code = |argv: &[&str]| {
        helper()
            .args(["--policy", POLICY, "--"])
            .args(argv)
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(code(&["sh", "-c", "exit 9"]), Some(9));
    assert_eq!(code(&["cordon-no-such-program"]), Some(127));
    assert_eq!(code(&["/etc/passwd"]), Some(126));
    assert_eq!(code(&["--bogus"]), Some(127));
}

#[test]
fn bad_arguments_exit_125_with_one_line() {
    for args in [
        vec!["--", "true"],
        vec!["--policy", POLICY],
        vec!["--policy", "{}", "--", "true"],
        vec!["--status-fd", "1", "--policy", POLICY, "--", "true"],
        vec!["--status-fd", "77", "--policy", POLICY, "--", "true"],
        vec!["--frobnicate"],
    ] {
        let out = helper().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("cordon-sandbox: "), "{args:?}: {err}");
    }
}

#[test]
fn policy_file_and_a_missing_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.json");
    std::fs::write(&file, POLICY).unwrap();
    let out = helper()
        .arg("--policy-file")
        .arg(&file)
        .args(["--cwd", "/", "--", "pwd"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "/\n");
    assert_eq!(out.status.code(), Some(0));

    // A working directory that does not exist is a setup error at the chdir step, and the
    // command does not run.
    let marker = dir.path().join("ran");
    let out = helper()
        .arg("--policy-file")
        .arg(&file)
        .args(["--cwd", "/nonexistent-cordon-dir", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "cordon-sandbox: cannot change directory to \"/nonexistent-cordon-dir\": No such file or directory (os error 2)\n"
    );
    assert!(!marker.exists());

    let out = helper()
        .args([
            "--policy-file",
            "/nonexistent-cordon-policy.json",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with(
        "cordon-sandbox: cannot read policy file \"/nonexistent-cordon-policy.json\""
    ));
}
