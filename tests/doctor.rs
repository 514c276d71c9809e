//! `cordon doctor` against the real kernel: here (every feature present), under the real "no
//! user namespaces" condition, with the Landlock ABI capped, and its `--json` shape.

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Output};

use common::Tree;
use serde_json::Value;

/// Feature rows, in table order.
const FEATURES: [&str; 16] = [
    "landlock",
    "landlock_abi_1",
    "landlock_abi_2",
    "landlock_abi_3",
    "landlock_abi_4",
    "landlock_abi_5",
    "landlock_abi_6",
    "landlock_abi_7",
    "seccomp",
    "no_new_privs",
    "user_namespace",
    "mount_namespace",
    "pid_namespace",
    "ipc_namespace",
    "net_namespace",
    "proc_mount",
];

/// The rows that need user namespaces.
const NAMESPACE_ROWS: [&str; 6] = [
    "user_namespace",
    "mount_namespace",
    "pid_namespace",
    "ipc_namespace",
    "net_namespace",
    "proc_mount",
];

fn doctor(tree: &Tree, args: &[&str]) -> Command {
    let mut cmd = tree.cordon();
    cmd.arg("doctor").args(args);
    cmd
}

/// `(name, available)` of each feature row of the table, in order.
fn feature_rows(out: &Output) -> Vec<(String, String)> {
    common::stdout(out)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?;
            let available = words.next()?;
            FEATURES
                .contains(&name)
                .then(|| (name.to_owned(), available.to_owned()))
        })
        .collect()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("doctor --json prints one JSON object")
}

fn preset<'a>(diagnosis: &'a Value, name: &str) -> &'a Value {
    diagnosis["presets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["preset"] == name)
        .unwrap_or_else(|| panic!("no preset {name} in {diagnosis}"))
}

fn restrictions(check: &Value) -> Vec<String> {
    check["downgrades"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["restriction"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn here_every_feature_is_available_and_the_default_preset_is_enforced() {
    require_userns!();
    require_landlock!(7);
    let tree = Tree::new();
    let out = doctor(&tree, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::stdout(&out));
    let rows = feature_rows(&out);
    let expected: Vec<(String, String)> = FEATURES
        .iter()
        .map(|f| ((*f).to_owned(), "yes".to_owned()))
        .collect();
    assert_eq!(rows, expected, "{}", common::stdout(&out));
    let text = common::stdout(&out);
    assert!(
        text.contains("\nlandlock         yes        ABI 7 in use (the kernel offers 7, cordon knows up to 7)\n"),
        "{text}"
    );
    for (preset, verdict) in [
        ("read-only", "enforced"),
        ("workspace-write", "enforced"),
        ("full-access", "unsandboxed"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{preset:15}  {verdict} "))),
            "{preset} {verdict}: {text}"
        );
    }
    assert!(!text.contains("\nhints\n"), "{text}");
    assert!(text.ends_with("the default preset (workspace-write) is fully enforced here\n"));
    // The checks ran real commands in the working directory and left nothing there.
    assert_eq!(std::fs::read_dir(&tree.cwd).unwrap().count(), 0);
}

#[test]
fn without_user_namespaces_the_namespace_rows_are_unavailable_with_the_hint_and_exit_1() {
    let tree = Tree::new();
    let out = common::without_userns(&doctor(&tree, &[]))
        .output()
        .unwrap();
    let text = common::stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for (name, available) in feature_rows(&out) {
        let expected = if NAMESPACE_ROWS.contains(&name.as_str()) {
            "NO"
        } else if name == "seccomp" || name == "no_new_privs" || name == "landlock" {
            "yes"
        } else {
            continue; // Landlock ABI levels: as the kernel has them
        };
        assert_eq!(available, expected, "{name}: {text}");
    }
    assert!(
        text.contains("\nuser_namespace   NO         user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0); set the sysctl user.max_user_namespaces above 0\n"),
        "{text}"
    );
    assert!(
        text.contains("\nhints\n  user_namespace, mount_namespace, pid_namespace, ipc_namespace, net_namespace, proc_mount: set the sysctl user.max_user_namespaces above 0\n"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("workspace-write  downgraded ")),
        "{text}"
    );
    assert!(
        text.contains("no pid_namespace: a process that leaves the command's process group (setsid, a double-forked daemon) survives a timeout, a cancellation or cordon's death"),
        "{text}"
    );
    assert!(text
        .ends_with("the default preset (workspace-write) is NOT fully enforced here (exit 1)\n"));

    // The same in JSON: the helper ran, with Landlock and seccomp but no namespace.
    let out = common::without_userns(&doctor(&tree, &["--json"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let d = json(&out);
    assert_eq!(d["default_fully_enforced"], false);
    let ws = preset(&d, "workspace-write");
    assert_eq!(ws["verdict"], "downgraded");
    assert_eq!(
        ws["layers"],
        serde_json::json!([
            "capabilities",
            "no_new_privs",
            "landlock_fs",
            "landlock_scope",
            "seccomp"
        ])
    );
    let missing: Vec<&str> = ws["missing_layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["layer"].as_str().unwrap())
        .collect();
    assert_eq!(
        missing,
        [
            "user_namespace",
            "pid_namespace",
            "mount_namespace",
            "ipc_namespace"
        ]
    );
}

#[test]
fn with_the_abi_capped_at_3_the_abi_row_and_the_refusals_are_as_documented() {
    require_landlock!(6);
    let kernel = common::landlock_abi().unwrap();
    let tree = Tree::new();
    let out = doctor(&tree, &[])
        .env("CORDON_LANDLOCK_ABI_MAX", "3")
        .output()
        .unwrap();
    let text = common::stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("\nlandlock         yes        ABI 3 in use (the kernel offers {kernel}, cordon knows up to 7, capped by CORDON_LANDLOCK_ABI_MAX=3)\n")),
        "{text}"
    );
    let abi_rows: Vec<(String, String)> = feature_rows(&out)
        .into_iter()
        .filter(|(n, _)| n.starts_with("landlock_abi_"))
        .collect();
    let expected: Vec<(String, String)> = (1..=7)
        .map(|n| {
            let available = if n <= 3 { "yes" } else { "NO" };
            (format!("landlock_abi_{n}"), available.to_owned())
        })
        .collect();
    assert_eq!(abi_rows, expected, "{text}");
    let capped: Vec<String> = (4..=kernel.min(7))
        .map(|n| format!("landlock_abi_{n}"))
        .collect();
    assert!(
        text.contains(&format!(
            "  {}: the kernel has it; CORDON_LANDLOCK_ABI_MAX caps the ABI at 3\n",
            capped.join(", ")
        )),
        "{text}"
    );
    assert!(
        text.contains("workspace-write  refused      enforcement: refusing to run: landlock_ioctl_dev cannot be enforced (ioctl on device files outside the device allow-list is not prevented: needs Landlock ABI 5, the kernel offers 3); set enforcement to \"report\" to run without it\n"),
        "{text}"
    );

    let out = doctor(&tree, &["--json"])
        .env("CORDON_LANDLOCK_ABI_MAX", "3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let d = json(&out);
    assert_eq!(
        d["landlock_abi"],
        serde_json::json!({"kernel": kernel, "used": 3, "cap": "3"})
    );
    for name in ["read-only", "workspace-write"] {
        let check = preset(&d, name);
        assert_eq!(check["verdict"], "refused", "{name}");
        assert_eq!(check["refusal"]["step"], "enforcement", "{name}");
        assert_eq!(check["landlock_abi"], 3, "{name}");
        // Everything the helper would lack, not just the first item the refusal names.
        assert_eq!(
            restrictions(check),
            [
                "landlock_ioctl_dev",
                "landlock_scope_signal",
                "landlock_scope_abstract_unix"
            ],
            "{name}"
        );
    }
}

#[test]
fn json_is_one_object_with_exact_keys() {
    let tree = Tree::new();
    let out = doctor(&tree, &["--json"]).output().unwrap();
    assert_eq!(common::stdout(&out).lines().count(), 1);
    let d = json(&out);
    let keys = |v: &Value| -> BTreeSet<String> { v.as_object().unwrap().keys().cloned().collect() };
    let set =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|s| (*s).to_owned()).collect() };
    assert_eq!(
        keys(&d),
        set(&[
            "kernel",
            "landlock_abi",
            "features",
            "presets",
            "evidence",
            "default_preset",
            "default_fully_enforced"
        ])
    );
    assert_eq!(keys(&d["landlock_abi"]), set(&["kernel", "used", "cap"]));
    assert_eq!(d["default_preset"], "workspace-write");
    let features = d["features"].as_array().unwrap();
    let names: Vec<&str> = features
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, FEATURES);
    for f in features {
        assert_eq!(
            keys(f),
            set(&["name", "available", "detail", "hint"]),
            "{f}"
        );
        // A hint exactly where the feature is missing.
        assert_eq!(f["available"] == false, !f["hint"].is_null(), "{f}");
    }
    let presets = d["presets"].as_array().unwrap();
    let names: Vec<&str> = presets
        .iter()
        .map(|p| p["preset"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read-only", "workspace-write", "full-access"]);
    for p in presets {
        assert_eq!(
            keys(p),
            set(&[
                "preset",
                "verdict",
                "layers",
                "landlock_abi",
                "downgrades",
                "missing_layers",
                "approximations",
                "unmediated",
                "refusal"
            ]),
            "{p}"
        );
    }
    assert_eq!(preset(&d, "full-access")["verdict"], "unsandboxed");
    let exit = if d["default_fully_enforced"] == true {
        0
    } else {
        1
    };
    assert_eq!(out.status.code(), Some(exit));
}

#[test]
fn a_missing_working_directory_is_one_line_and_exit_125() {
    let tree = Tree::new();
    let out = doctor(&tree, &["-C", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(common::stdout(&out), "");
    assert_eq!(
        common::stderr(&out),
        format!(
            "cordon: working directory {:?} does not exist or is not a directory\n",
            tree.cwd.join("nope")
        )
    );
}

/// The evidence rows: which sources a default run has, and why one is missing. With the ABI
/// capped below 7 the audit records cannot exist, whatever the host's audit says, so that row
/// is exact on every machine; file denials then come from the text alone.
#[test]
fn evidence_rows_say_where_denials_come_from_and_why_a_source_is_missing() {
    let tree = Tree::new();
    let evidence = |cap: Option<&str>| -> Vec<(String, bool, String)> {
        let mut cmd = doctor(&tree, &["--json"]);
        if let Some(cap) = cap {
            cmd.env("CORDON_LANDLOCK_ABI_MAX", cap);
        }
        let d = json(&cmd.output().unwrap());
        d["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_owned(),
                    e["used"].as_bool().unwrap(),
                    e["detail"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let capped = evidence(Some("3"));
    let names: Vec<&str> = capped.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["landlock_audit", "seccomp_observer", "text"]);
    assert!(!capped[0].1, "{capped:?}");
    assert!(
        capped[0]
            .2
            .ends_with("; not here: needs Landlock ABI 7 (Linux 6.15); ABI 3 is in use"),
        "{capped:?}"
    );
    // This kernel has user notification (Linux 5.0), and text is always there.
    assert!(capped[1].1 && capped[2].1, "{capped:?}");
    assert!(
        capped[2]
            .2
            .ends_with("by default, file denials here come from the text alone"),
        "{capped:?}"
    );
    // Uncapped: audit is used exactly where the host has it enabled and readable; otherwise
    // the row says which of the two is missing.
    let here = evidence(None);
    let (_, used, detail) = &here[0];
    if *used {
        assert!(!detail.contains("not here"), "{detail}");
        assert!(
            here[2]
                .2
                .ends_with("from Landlock's audit records, then the text"),
            "{here:?}"
        );
    } else {
        assert!(
            detail.contains("; not here: audit is disabled in the kernel")
                || detail.contains("; not here: needs CAP_AUDIT_READ"),
            "{detail}"
        );
    }
}
