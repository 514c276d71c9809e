//! Apply-patch, confined: every operation, whitespace-tolerant context, a hunk that does not
//! apply, writes outside the roots denied by the kernel with the delta of what was changed, a
//! planted symlink refused, a hard link not written through, a retry after approval, and the
//! CLI. Every effect is checked from outside, on the real files.

mod common;

use std::path::Path;

use common::{stderr, stdout, Tree};
use cordon::classify::Operation;
use cordon::exec::{Outcome, Sandbox};
use cordon::helper::Helper;
use cordon::orchestrator::{widen, ApprovalRequest, Approver, Decision, Orchestrator};
use cordon::patch::{ChangeKind, FileChange, PatchError, PatchReport, PatchRequest, PatchRuntime};
use cordon::profile::{Overrides, PermissionProfile, ResolveContext};
use cordon::sandbox::SandboxPolicy;

struct Never;
impl Approver for Never {
    async fn decide(&self, _: &ApprovalRequest) -> Decision {
        Decision::Deny
    }
}

/// Grants exactly what the denials show, and remembers being asked.
struct Widen(std::sync::Mutex<Vec<ApprovalRequest>>);
impl Approver for Widen {
    async fn decide(&self, ask: &ApprovalRequest) -> Decision {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ask.clone());
        match widen(&ask.policy, &ask.denials) {
            Ok(wider) => Decision::RetryWith(wider),
            Err(_) => Decision::Deny,
        }
    }
}

fn policy(tree: &Tree, extra_writable: &[&Path]) -> SandboxPolicy {
    let overrides = Overrides {
        writable: extra_writable
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
        ..Overrides::default()
    };
    PermissionProfile::default_profile()
        .with_overrides(&overrides)
        .resolve(&ResolveContext::new(&tree.cwd).with_home(&tree.home))
        .expect("resolve")
        .policy
        .expect("sandboxed")
}

fn orchestrator() -> Orchestrator {
    Orchestrator::new(Sandbox::new(Helper::cordon_binary(env!(
        "CARGO_BIN_EXE_cordon"
    ))))
}

async fn apply(tree: &Tree, patch: &str, policy: SandboxPolicy) -> PatchReport {
    let request = PatchRequest::new(patch, &tree.cwd, Some(policy));
    PatchRuntime::new(env!("CARGO_BIN_EXE_cordon"))
        .apply(&orchestrator(), &request, &Never)
        .await
        .expect("well-formed patch")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The errno a write outside the roots gets: EROFS from the namespace layer's read-only view,
/// EACCES from Landlock without it.
fn outside_errno() -> &'static str {
    if common::userns_available() {
        "EROFS"
    } else {
        "EACCES"
    }
}

fn kinds(changes: &[FileChange]) -> Vec<(ChangeKind, String)> {
    changes.iter().map(|c| (c.kind, c.path.clone())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_every_operation_applies_inside_the_sandbox() {
    let tree = Tree::new();
    let w = &tree.cwd;
    std::fs::write(w.join("update.txt"), "alpha  \n\tbeta\ngamma\n").expect("write");
    std::fs::write(w.join("move.txt"), "one\ntwo\n").expect("write");
    std::fs::write(w.join("delete.txt"), "bye\n").expect("write");
    // The context is written without the file's trailing spaces and with spaces for its tab.
    let patch = "*** Begin Patch
*** Add File: sub/dir/new.txt
+hello
+world
*** Update File: update.txt
@@
 alpha
-  beta
+BETA
 gamma
*** Update File: move.txt
*** Move to: moved/there.txt
@@
 one
-two
+TWO
*** Delete File: delete.txt
*** End Patch
";
    let report = apply(&tree, patch, policy(&tree, &[])).await;
    assert!(report.applied(), "{:?}", report.failure);
    let at = |p: &str| w.join(p).to_string_lossy().into_owned();
    assert_eq!(
        kinds(&report.changes),
        vec![
            (ChangeKind::Added, at("sub/dir/new.txt")),
            (ChangeKind::Modified, at("update.txt")),
            (ChangeKind::Moved, at("move.txt")),
            (ChangeKind::Deleted, at("delete.txt")),
        ]
    );
    assert_eq!(read(&w.join("sub/dir/new.txt")), "hello\nworld\n");
    assert_eq!(read(&w.join("update.txt")), "alpha  \nBETA\ngamma\n");
    assert_eq!(read(&w.join("moved/there.txt")), "one\nTWO\n");
    assert!(!w.join("move.txt").exists());
    assert!(!w.join("delete.txt").exists());
    assert_eq!(
        report.changes[2].move_to.as_deref(),
        Some(at("moved/there.txt").as_str())
    );
    assert_eq!(
        report.changes[0].diff,
        "--- /dev/null\n+++ b/sub/dir/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n"
    );
    assert_eq!(
        report.changes[1].diff,
        "--- a/update.txt\n+++ b/update.txt\n@@ -1,3 +1,3 @@\n alpha  \n-\tbeta\n+BETA\n gamma\n"
    );
    assert_eq!(
        report.changes[2].diff,
        "--- a/move.txt\n+++ b/moved/there.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
    );
    assert_eq!(
        report.changes[3].diff,
        "--- a/delete.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
    );
    // The applier ran confined, as the request said.
    assert!(report.run.first.receipt.is_some());
    assert_eq!(report.run.first.argv, ["apply_patch"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_hunk_that_does_not_apply_leaves_every_file_as_it_was() {
    let tree = Tree::new();
    let w = &tree.cwd;
    std::fs::write(w.join("a.txt"), "a1\na2\n").expect("write");
    std::fs::write(w.join("b.txt"), "b1\nb2\nb3\n").expect("write");
    // a.txt would apply; b.txt's first hunk would, its second does not.
    let patch = "*** Begin Patch
*** Update File: a.txt
@@
-a1
+A1
*** Update File: b.txt
@@
-b1
+B1
@@
-b9
+B9
*** Add File: c.txt
+c
*** End Patch
";
    let report = apply(&tree, patch, policy(&tree, &[])).await;
    let failure = report.failure.as_ref().expect("failed");
    assert_eq!(failure.index, 1);
    assert_eq!(failure.errno, None);
    assert_eq!(
        failure.message,
        format!(
            "{}: hunk at patch line 10: the lines it changes are not in the file (first: \"b9\")",
            w.join("b.txt").display()
        )
    );
    assert!(report.changes.is_empty(), "{:?}", report.changes);
    assert_eq!(read(&w.join("a.txt")), "a1\na2\n");
    assert_eq!(read(&w.join("b.txt")), "b1\nb2\nb3\n");
    assert!(!w.join("c.txt").exists());
    // No temporary file is left beside them.
    let mut names: Vec<String> = std::fs::read_dir(w)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.txt", "b.txt"]);
    // Not a sandbox denial: nothing to approve.
    assert_eq!(report.run.first.outcome, Outcome::Failed { code: 1 });
    assert!(report.run.decision.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_write_outside_the_roots_is_denied_with_the_delta_so_far() {
    let tree = Tree::new();
    let w = &tree.cwd;
    std::fs::write(w.join("a.txt"), "old\n").expect("write");
    std::fs::write(w.join("keep.txt"), "keep\n").expect("write");
    std::fs::write(tree.outside.join("existing.txt"), "outside\n").expect("write");
    let outside_new = tree.outside.join("new.txt");
    let patch = format!(
        "*** Begin Patch
*** Update File: a.txt
@@
-old
+new
*** Add File: {}
+planted
*** Update File: {}
@@
-outside
+changed
*** Delete File: keep.txt
*** End Patch
",
        outside_new.display(),
        tree.outside.join("existing.txt").display()
    );
    let report = apply(&tree, &patch, policy(&tree, &[])).await;
    let failure = report.failure.as_ref().expect("denied");
    assert_eq!(failure.index, 1);
    assert_eq!(failure.errno.as_deref(), Some(outside_errno()));
    assert_eq!(failure.path, outside_new.to_string_lossy());
    // What was changed before the refusal is reported, and is on disk.
    assert_eq!(
        kinds(&report.changes),
        vec![(
            ChangeKind::Modified,
            w.join("a.txt").to_string_lossy().into_owned()
        )]
    );
    assert_eq!(read(&w.join("a.txt")), "new\n");
    // Outside: nothing created, nothing changed; after the refusal nothing else was done.
    assert!(!outside_new.exists());
    assert_eq!(read(&tree.outside.join("existing.txt")), "outside\n");
    assert_eq!(read(&w.join("keep.txt")), "keep\n");
    // Classified like any command's denial, with the grant that would allow it.
    match &report.run.first.outcome {
        Outcome::Denied { denials, .. } => {
            assert_eq!(denials.len(), 1, "{denials:?}");
            assert_eq!(denials[0].operation, Operation::FileWrite);
            assert_eq!(
                denials[0].target.as_deref(),
                Some(outside_new.to_string_lossy().as_ref())
            );
            assert_eq!(
                denials[0].allow_with,
                format!("--writable {}", tree.outside.display())
            );
        }
        other => panic!("not a denial: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_never_follows_a_planted_symlink_even_into_a_writable_root() {
    let tree = Tree::new();
    let w = &tree.cwd;
    std::fs::write(tree.outside.join("target.txt"), "secret\n").expect("write");
    std::os::unix::fs::symlink(&tree.outside, w.join("dirlink")).expect("symlink");
    std::os::unix::fs::symlink(tree.outside.join("target.txt"), w.join("filelink"))
        .expect("symlink");
    // `outside` is writable here, so only the applier's refusal can stop these.
    let writable_outside = policy(&tree, &[&tree.outside]);
    let cases = [
        (
            "*** Add File: dirlink/planted.txt\n+x\n",
            "dirlink/planted.txt",
        ),
        (
            "*** Update File: filelink\n@@\n-secret\n+owned\n",
            "filelink",
        ),
        (
            "*** Update File: dirlink/target.txt\n@@\n-secret\n+owned\n",
            "dirlink/target.txt",
        ),
        ("*** Delete File: filelink\n", "filelink"),
    ];
    for (ops, path) in cases {
        let patch = format!("*** Begin Patch\n{ops}*** End Patch\n");
        let report = apply(&tree, &patch, writable_outside.clone()).await;
        let failure = report
            .failure
            .as_ref()
            .unwrap_or_else(|| panic!("{path}: applied"));
        assert_eq!(
            failure.errno.as_deref(),
            Some("ELOOP"),
            "{path}: {}",
            failure.message
        );
        assert_eq!(failure.path, w.join(path).to_string_lossy(), "{path}");
        assert!(report.changes.is_empty());
    }
    assert_eq!(read(&tree.outside.join("target.txt")), "secret\n");
    assert!(!tree.outside.join("planted.txt").exists());
    assert!(std::fs::symlink_metadata(w.join("filelink"))
        .expect("link kept")
        .file_type()
        .is_symlink());
    // The harmless counterpart: the real path of the same place is written.
    let patch = format!(
        "*** Begin Patch\n*** Update File: {}\n@@\n-secret\n+edited\n*** End Patch\n",
        tree.outside.join("target.txt").display()
    );
    let report = apply(&tree, &patch, writable_outside).await;
    assert!(report.applied(), "{:?}", report.failure);
    assert_eq!(read(&tree.outside.join("target.txt")), "edited\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_never_writes_through_a_hard_link_to_a_file_outside() {
    let tree = Tree::new();
    let w = &tree.cwd;
    let outside = tree.outside.join("linked.txt");
    std::fs::write(&outside, "shared\n").expect("write");
    std::fs::hard_link(&outside, w.join("linked.txt")).expect("hard link");
    let patch = "*** Begin Patch\n*** Update File: linked.txt\n@@\n-shared\n+mine\n*** End Patch\n";
    let report = apply(&tree, patch, policy(&tree, &[])).await;
    assert!(report.applied(), "{:?}", report.failure);
    assert_eq!(read(&w.join("linked.txt")), "mine\n");
    assert_eq!(
        read(&outside),
        "shared\n",
        "the file outside the roots was written through its link"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_retry_after_approval_resumes_and_reports_both_attempts() {
    let tree = Tree::new();
    let w = &tree.cwd;
    std::fs::write(w.join("a.txt"), "x\n").expect("write");
    std::fs::write(w.join("b.txt"), "y\n").expect("write");
    let outside_new = tree.outside.join("approved.txt");
    let patch = format!(
        "*** Begin Patch
*** Update File: a.txt
@@
-x
+x2
*** Add File: {}
+approved
*** Update File: b.txt
@@
-y
+y2
*** End Patch
",
        outside_new.display()
    );
    let approver = Widen(Default::default());
    let request = PatchRequest::new(patch, w, Some(policy(&tree, &[])));
    let report = PatchRuntime::new(env!("CARGO_BIN_EXE_cordon"))
        .apply(&orchestrator(), &request, &approver)
        .await
        .expect("well-formed");
    let asked = approver.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].argv, ["apply_patch"]);
    assert_eq!(
        asked[0].denials[0].allow_with,
        format!("--writable {}", tree.outside.display())
    );
    assert!(report.applied(), "{:?}", report.failure);
    let path = |p: &Path| p.to_string_lossy().into_owned();
    assert_eq!(
        kinds(&report.changes),
        vec![
            (ChangeKind::Modified, path(&w.join("a.txt"))),
            (ChangeKind::Added, path(&outside_new)),
            (ChangeKind::Modified, path(&w.join("b.txt"))),
        ]
    );
    // a.txt was changed once, by the first attempt: the retry started at the refused file.
    assert_eq!(read(&w.join("a.txt")), "x2\n");
    assert_eq!(read(&outside_new), "approved\n");
    assert_eq!(read(&w.join("b.txt")), "y2\n");
    assert_eq!(
        report.run.second.as_ref().map(|s| s.outcome.clone()),
        Some(Outcome::Success)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_malformed_is_rejected_before_anything_runs() {
    let tree = Tree::new();
    let patch = "*** Begin Patch\n*** Add File: made.txt\n+x\n*** Update File: a.txt\n@@\n*oops\n*** End Patch\n";
    let request = PatchRequest::new(patch, &tree.cwd, Some(policy(&tree, &[])));
    let err = PatchRuntime::new(env!("CARGO_BIN_EXE_cordon"))
        .apply(&orchestrator(), &request, &Never)
        .await
        .expect_err("malformed");
    assert_eq!(
        err.to_string(),
        "invalid patch, line 6: a hunk line starts with ` `, `-` or `+` (or the hunk header `@@`) (line: \"*oops\")"
    );
    assert!(matches!(err, PatchError::Parse(_)));
    assert!(!tree.cwd.join("made.txt").exists());
}

#[test]
fn patch_cli_summary_denial_and_bad_input() {
    let tree = Tree::new();
    std::fs::write(tree.cwd.join("f.txt"), "1\n").expect("write");
    let run = |patch: &str, args: &[&str]| {
        use std::io::Write;
        let mut child = tree
            .cordon()
            .arg("patch")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn cordon");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(patch.as_bytes()).expect("write patch");
        }
        child.wait_with_output().expect("wait")
    };
    let ok = run(
        "*** Begin Patch\n*** Update File: f.txt\n@@\n-1\n+2\n*** End Patch\n",
        &[],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(
        stdout(&ok),
        format!("M {}\n", tree.cwd.join("f.txt").display())
    );
    assert_eq!(read(&tree.cwd.join("f.txt")), "2\n");

    let outside = tree.outside.join("o.txt");
    let denied = run(
        &format!(
            "*** Begin Patch\n*** Add File: {}\n+o\n*** End Patch\n",
            outside.display()
        ),
        &[],
    );
    assert_eq!(denied.status.code(), Some(1));
    assert_eq!(stdout(&denied), "");
    let errno_text = if common::userns_available() {
        "Read-only file system"
    } else {
        "Permission denied"
    };
    assert_eq!(
        stderr(&denied)
            .lines()
            .filter(|l| l.starts_with("cordon: apply_patch") || l.starts_with("cordon: denied"))
            .collect::<Vec<_>>(),
        [
            format!("cordon: apply_patch: cannot create '{}': {errno_text}", outside.display()),
            format!(
                "cordon: denied write to {} (not under any writable root; allow with --writable {}) (from the command's output)",
                outside.display(),
                tree.outside.display()
            ),
        ]
    );
    assert!(!outside.exists());

    let bad = run("*** Begin Patch\n*** Delete File: f.txt\n", &[]);
    assert_eq!(bad.status.code(), Some(125));
    assert_eq!(
        stderr(&bad),
        "cordon: invalid patch, line 3: the patch ends without `*** End Patch` (line: \"\")\n"
    );
    assert!(tree.cwd.join("f.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_relative_escape_is_judged_by_the_kernel() {
    let tree = Tree::new();
    std::fs::write(tree.cwd.join("inside.txt"), "in\n").expect("write");
    let escaped = tree.outside.join("escaped.txt");
    let patch = "*** Begin Patch\n*** Add File: sub/../../outside/escaped.txt\n+x\n*** End Patch\n";
    let report = apply(&tree, patch, policy(&tree, &[])).await;
    let failure = report.failure.as_ref().expect("denied");
    assert_eq!(
        failure.errno.as_deref(),
        Some(outside_errno()),
        "{}",
        failure.message
    );
    assert_eq!(failure.path, escaped.to_string_lossy());
    assert!(!escaped.exists());
    assert!(
        !tree.cwd.join("sub").exists(),
        "no directory made on the way"
    );
    // The harmless counterpart: `..` that stays inside the root.
    let patch =
        "*** Begin Patch\n*** Update File: sub/../inside.txt\n@@\n-in\n+IN\n*** End Patch\n";
    let report = apply(&tree, patch, policy(&tree, &[])).await;
    assert!(report.applied(), "{:?}", report.failure);
    assert_eq!(read(&tree.cwd.join("inside.txt")), "IN\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_read_only_carve_out_inside_the_root_is_refused() {
    if !common::userns_available() {
        eprintln!("SKIP patch_read_only_carve_out_inside_the_root_is_refused: no user namespaces, carve-outs are only reported");
        return;
    }
    let tree = Tree::new();
    let git = tree.cwd.join(".git");
    std::fs::create_dir_all(git.join("hooks")).expect("mkdir");
    std::fs::write(git.join("config"), "[core]\n").expect("write");
    let patch = "*** Begin Patch
*** Add File: ok.txt
+fine
*** Add File: .git/hooks/post-checkout
+#!/bin/sh
*** Update File: .git/config
@@
-[core]
+[core] hooksPath = /tmp
*** End Patch
";
    let report = apply(&tree, patch, policy(&tree, &[])).await;
    let failure = report.failure.as_ref().expect("refused");
    assert_eq!(failure.index, 1);
    assert_eq!(failure.errno.as_deref(), Some("EROFS"));
    assert_eq!(
        kinds(&report.changes),
        vec![(
            ChangeKind::Added,
            tree.cwd.join("ok.txt").to_string_lossy().into_owned()
        )]
    );
    assert_eq!(read(&tree.cwd.join("ok.txt")), "fine\n");
    assert!(!git.join("hooks/post-checkout").exists());
    assert_eq!(read(&git.join("config")), "[core]\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_refuses_fifos_and_devices_without_opening_them() {
    let tree = Tree::new();
    let fifo = tree.cwd.join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    for target in [fifo.to_string_lossy().into_owned(), "/dev/null".to_owned()] {
        let patch =
            format!("*** Begin Patch\n*** Update File: {target}\n@@\n-x\n+y\n*** End Patch\n");
        let started = std::time::Instant::now();
        let report = apply(&tree, &patch, policy(&tree, &[])).await;
        let failure = report.failure.as_ref().expect("refused");
        assert_eq!(
            failure.errno.as_deref(),
            Some("EINVAL"),
            "{}",
            failure.message
        );
        assert_eq!(
            failure.message,
            format!("cannot open '{target}': not a regular file (EINVAL)")
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
    let kind = std::fs::symlink_metadata(&fifo)
        .expect("fifo kept")
        .file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));
}
