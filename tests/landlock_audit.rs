//! Landlock's audit records as evidence (ABI 7, needs CAP_AUDIT_READ and audit enabled).
//!
//! Audit is disabled on this project's machines, and cordon never changes the host's audit
//! configuration. This test does, for its own duration only: it enables audit, runs its cases,
//! and restores the value it found, holding a lock file so that no parallel test process
//! toggles audit at the same time.

mod common;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;

use common::Tree;
use serde_json::Value;

/// Gets (no argument) or sets (`0`/`1`) the kernel's audit `enabled` flag; prints its value.
const AUDIT_ENABLED: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)
s.bind((0, 0))
if len(sys.argv) > 1:
    body = struct.pack("=IIIIIIII", 1, int(sys.argv[1]), 0, 0, 0, 0, 0, 0) + b"\0" * 16
    s.send(struct.pack("=IHHII", 16 + len(body), 1001, 5, 1, 0) + body)
    s.recv(8192)
s.send(struct.pack("=IHHII", 16, 1000, 5, 2, 0))
while True:
    d = s.recv(8192)
    if struct.unpack("=H", d[4:6])[0] == 1000:
        print(struct.unpack("=I", d[20:24])[0])
        break
"#;

fn audit_enabled(set: Option<&str>) -> Option<String> {
    let out = Command::new(common::python())
        .arg("-c")
        .arg(AUDIT_ENABLED)
        .args(set)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Restores audit to what it was, however the test ends.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = audit_enabled(Some(&self.0));
    }
}

fn denials(v: &Value) -> Vec<(String, String, String)> {
    v["denials"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            (
                d["operation"].as_str().unwrap_or("").to_owned(),
                d["target"].as_str().unwrap_or("").to_owned(),
                d["evidence"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn landlock_audit_records_are_attributed_to_the_run() {
    if common::landlock_abi().is_none_or(|abi| abi < 7) {
        eprintln!("SKIPPED: Landlock audit needs ABI 7");
        return;
    }
    let lock = File::create("/run/lock/cordon-audit-test.lock")
        .or_else(|_| File::create(std::env::temp_dir().join("cordon-audit-test.lock")))
        .unwrap();
    // SAFETY: flock on a descriptor we own; released when `lock` is dropped.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let Some(before) = audit_enabled(None) else {
        eprintln!("SKIPPED: cannot read the audit status (no CAP_AUDIT_CONTROL)");
        return;
    };
    let _restore = Restore(before);
    if audit_enabled(Some("1")).as_deref() != Some("1") {
        eprintln!("SKIPPED: cannot enable audit here");
        return;
    }
    let tree = Tree::new();
    let secret = tree.outside.join("secret");
    std::fs::write(&secret, "s3cret").unwrap();
    let tool = tree.outside.join("tool");
    std::fs::copy("/bin/true", &tool).unwrap();
    std::fs::write(tree.cwd.join("inside"), "ok").unwrap();
    // Reads and executions outside the read roots are Landlock's to refuse, with or without
    // the namespace layer.
    let profile = tree.root.join("narrow.toml");
    std::fs::write(
        &profile,
        "[filesystem]\nread = [\"/usr\", \"/lib\", \"/lib64\", \"/bin\", \"/etc\", \"/proc\"]\nwrite = [\":cwd\"]\n",
    )
    .unwrap();
    let run = |observer: &str, script: &str| -> Value {
        let out = tree
            .cordon()
            .env("CORDON_OBSERVER", observer)
            .args(["run", "--json", "--timeout", "30s", "-p"])
            .arg(&profile)
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
    };
    // A silent command: no message names anything, only the kernel's records do.
    let silent = format!(
        "cat {} 2>/dev/null; {} 2>/dev/null; exit 3",
        secret.display(),
        tool.display()
    );
    let expected = vec![
        (
            "file_read".to_owned(),
            secret.display().to_string(),
            "landlock_audit".to_owned(),
        ),
        (
            "file_execute".to_owned(),
            tool.display().to_string(),
            "landlock_audit".to_owned(),
        ),
    ];
    let v = run("off", &silent);
    assert_eq!(v["outcome"], "denied", "{v}");
    assert_eq!(denials(&v), expected, "{v}");
    assert_eq!(
        v["denials"][0]["allow_with"],
        format!("--readable {}", secret.display())
    );
    // With the observer too: the same denials, confirmed by the audit records.
    let v = run("on", &silent);
    assert_eq!(denials(&v), expected, "{v}");
    // Harmless counterpart: reading inside the roots is no denial.
    let v = run("off", "cat inside && exit 3");
    assert_eq!(v["outcome"], "failed", "{v}");
    assert!(denials(&v).is_empty(), "{v}");
}
