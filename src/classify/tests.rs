//! Focused tests of the classification rules, each on a hand-made piece of evidence.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use cordon_sandbox::policy::SandboxPolicy;
use cordon_sandbox::status::{ConfinementReceipt, Downgrade, Layer, StatusRecord, Step};

use super::*;

fn policy(write: &[&Path], network: &str, unix: &str) -> SandboxPolicy {
    let write: Vec<String> = write
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    SandboxPolicy::from_json(&format!(
        r#"{{"version":1,"filesystem":{{"read":["/"],"write":[{}]}},
           "network":{{"mode":"{network}","unix_sockets":"{unix}"}},
           "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#,
        write.join(",")
    ))
    .unwrap()
}

struct Case {
    policy: SandboxPolicy,
    cwd: PathBuf,
    argv: Vec<OsString>,
    exit: Option<i32>,
    records: Vec<StatusRecord>,
    stderr: String,
    stdout: String,
    /// What the observer's light scope saw refused, when it ran.
    kernel_light: Option<Vec<Denial>>,
}

impl Case {
    fn new(cwd: &Path, argv: &[&str], exit: i32, stderr: &str) -> Case {
        Case {
            policy: policy(&[cwd], "denied", "deny"),
            cwd: cwd.to_path_buf(),
            argv: argv.iter().map(OsString::from).collect(),
            exit: Some(exit),
            records: Vec::new(),
            stderr: stderr.to_owned(),
            stdout: String::new(),
            kernel_light: None,
        }
    }

    fn run(&self) -> Vec<Denial> {
        find_denials(&Evidence {
            policy: &self.policy,
            cwd: &self.cwd,
            argv: &self.argv,
            exit_code: self.exit,
            signal: None,
            records: &self.records,
            stdout: self.stdout.as_bytes(),
            stderr: self.stderr.as_bytes(),
            kernel: None,
            kernel_light: self.kernel_light.as_deref(),
            audit: None,
        })
    }

    fn one(&self) -> (Operation, Option<String>) {
        let found = self.run();
        assert_eq!(found.len(), 1, "{found:?}");
        (found[0].operation, found[0].target.clone())
    }
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    (dir, cwd)
}

const TOUCH_ETC: &str = "touch: cannot touch '/etc/cordon-unit': Permission denied\n";

#[test]
fn write_outside_writable_roots_is_a_denial_with_the_parent_as_fix() {
    let (_d, cwd) = workspace();
    let found = Case::new(&cwd, &["touch", "/etc/cordon-unit"], 1, TOUCH_ETC).run();
    assert_eq!(
        found,
        vec![Denial {
            operation: Operation::FileWrite,
            target: Some("/etc/cordon-unit".into()),
            rule: "not under any writable root".into(),
            allow_with: "--writable /etc".into(),
            evidence: EvidenceKind::Text,
            count: 1,
        }]
    );
}

#[test]
fn a_temporary_file_is_the_target_and_its_directory_the_fix() {
    let (_d, cwd) = workspace();
    let line = "sed: couldn't open temporary file /etc/sedAb12Cd: Permission denied\n";
    let found = Case::new(&cwd, &["sed", "-i", "s/a/b/", "/etc/hosts"], 4, line).run();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].target.as_deref(), Some("/etc/sedAb12Cd"));
    assert_eq!(found[0].allow_with, "--writable /etc");
    // The same with the namespace layer's errno: one denial, of the file.
    let line = "sed: couldn't open temporary file /etc/sedAb12Cd: Read-only file system\n";
    let found = Case::new(&cwd, &["sed", "-i", "s/a/b/", "/etc/hosts"], 4, line).run();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].target.as_deref(), Some("/etc/sedAb12Cd"));
}

#[test]
fn success_is_never_a_denial() {
    let (_d, cwd) = workspace();
    assert!(Case::new(&cwd, &["touch", "/etc/x"], 0, TOUCH_ETC)
        .run()
        .is_empty());
}

#[test]
fn setup_errors_are_not_denials() {
    let (_d, cwd) = workspace();
    let mut case = Case::new(&cwd, &["touch", "/etc/cordon-unit"], 125, TOUCH_ETC);
    case.records = vec![StatusRecord::SetupError {
        step: Step::Landlock,
        errno: Some(libc::ENOSYS),
        message: "no landlock".into(),
    }];
    assert!(case.run().is_empty());
}

#[test]
fn a_layer_not_in_force_denies_nothing() {
    let (_d, cwd) = workspace();
    let mut case = Case::new(&cwd, &["touch", "/etc/cordon-unit"], 1, TOUCH_ETC);
    case.records = vec![StatusRecord::Confined(ConfinementReceipt {
        layers: vec![Layer::Capabilities, Layer::NoNewPrivs, Layer::Seccomp],
        ..Default::default()
    })];
    assert!(case.run().is_empty());
}

#[test]
fn permission_errors_the_policy_allows_are_ordinary() {
    let (_d, cwd) = workspace();
    let line = format!(
        "bash: line 1: {}/locked: Permission denied\n",
        cwd.display()
    );
    assert!(Case::new(&cwd, &["bash", "-c", "echo > locked"], 1, &line)
        .run()
        .is_empty());
    let line = "PermissionError: [Errno 13] Permission denied: 'locked'\n";
    assert!(Case::new(&cwd, &["python3", "x.py"], 1, line)
        .run()
        .is_empty());
    assert!(Case::new(
        &cwd,
        &["cat", "/dev/null"],
        1,
        "cat: /dev/null: Permission denied\n"
    )
    .run()
    .is_empty());
}

#[test]
fn relative_paths_resolve_against_cwd_and_through_symlinks() {
    let (_d, cwd) = workspace();
    let outside = tempfile::tempdir().unwrap();
    let outside = std::fs::canonicalize(outside.path()).unwrap();
    std::os::unix::fs::symlink(&outside, cwd.join("link")).unwrap();
    let case = Case::new(
        &cwd,
        &["bash", "-c", "echo x > link/f"],
        1,
        "bash: line 1: link/f: Permission denied\n",
    );
    assert_eq!(
        case.one(),
        (
            Operation::FileWrite,
            Some(outside.join("f").display().to_string())
        )
    );
    // Without the symlink, the same relative path is inside the workspace.
    std::fs::remove_file(cwd.join("link")).unwrap();
    assert!(case.run().is_empty());
}

#[test]
fn words_in_paths_and_plain_failures_are_not_evidence() {
    let (_d, cwd) = workspace();
    for (argv, exit, stderr) in [
        (&["bash", "-c", "false"][..], 1, ""),
        (&["bash", "-c", "exit 126"][..], 126, ""),
        (
            &["bash", "-c", "nope"][..],
            127,
            "bash: line 1: nope: command not found\n",
        ),
        (
            &["cat", "sandbox/denied"][..],
            1,
            "cat: sandbox/denied: No such file or directory\n",
        ),
        (
            &["sh", "-c", "echo x"][..],
            3,
            "sandbox: operation not permitted, access denied\n",
        ),
        (
            &["cat", "'Permission denied'"][..],
            1,
            "cat: 'Permission denied': No such file or directory\n",
        ),
    ] {
        assert!(
            Case::new(&cwd, argv, exit, stderr).run().is_empty(),
            "{argv:?}"
        );
    }
}

#[test]
fn exec_errors_count_only_for_eacces_outside_readable_roots() {
    let (_d, cwd) = workspace();
    let exec = |errno| StatusRecord::ExecError {
        program: "/opt/cordon-unit/tool".into(),
        errno,
        message: String::new(),
    };
    let mut case = Case::new(&cwd, &["/opt/cordon-unit/tool"], 126, "");
    case.policy.filesystem.read = vec!["/usr".into()];
    case.records = vec![exec(libc::EACCES)];
    assert_eq!(
        case.one(),
        (Operation::FileExecute, Some("/opt/cordon-unit/tool".into()))
    );
    case.records = vec![exec(libc::ENOENT)];
    assert!(case.run().is_empty());
    // Readable: the EACCES is the file's mode, not the sandbox.
    case.policy.filesystem.read = vec!["/".into()];
    case.records = vec![exec(libc::EACCES)];
    assert!(case.run().is_empty());
}

#[test]
fn network_failures_count_only_when_the_network_is_denied() {
    let (_d, cwd) = workspace();
    let curl = "curl: (6) Could not resolve host: example.com\n";
    let mut case = Case::new(&cwd, &["curl", "https://example.com/"], 6, curl);
    assert_eq!(
        case.one(),
        (Operation::Network, Some("example.com:443".into()))
    );
    assert_eq!(case.run()[0].allow_with, "--network enabled");
    case.policy = policy(&[&cwd], "enabled", "allow");
    assert!(case.run().is_empty());
}

#[test]
fn unix_socket_failures_count_only_when_unix_sockets_are_denied() {
    let (_d, cwd) = workspace();
    let docker = "permission denied while trying to connect to the Docker daemon socket at \
        unix:///var/run/docker.sock: Get \"http://x\": dial unix /var/run/docker.sock: connect: \
        operation not permitted\n";
    let mut case = Case::new(&cwd, &["docker", "ps"], 1, docker);
    assert_eq!(
        case.one(),
        (Operation::UnixSocket, Some("/var/run/docker.sock".into()))
    );
    case.policy = policy(&[&cwd], "denied", "allow");
    assert!(case.run().is_empty());
}

#[test]
fn hardening_syscalls_name_no_fix() {
    let (_d, cwd) = workspace();
    let line = "strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted\n";
    let found = Case::new(&cwd, &["strace", "true"], 1, line).run();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].operation, Operation::Syscall);
    assert_eq!(found[0].rule, "seccomp: ptrace refused");
    assert!(found[0].allow_with.starts_with("none"));
}

#[test]
fn calls_refused_only_for_some_arguments_are_not_claimed_from_text() {
    let (_d, cwd) = workspace();
    // The kernel gives the same EPERM for a file another user owns, or a process of another
    // uid: the message cannot show which it was.
    let chmod = "chmod: changing permissions of 'x': Operation not permitted\n";
    assert!(Case::new(&cwd, &["chmod", "u+s", "x"], 1, chmod)
        .run()
        .is_empty());
    let renice = "renice: failed to set priority for 1 (process ID): Operation not permitted\n";
    assert!(Case::new(&cwd, &["renice", "5", "1"], 1, renice)
        .run()
        .is_empty());
    // Refused whatever the arguments: named, with its reason.
    let shm = "shmget: Operation not permitted\n";
    let found = Case::new(&cwd, &["./ipc-test"], 1, shm).run();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].rule, "seccomp: shmget refused");
}

#[test]
fn duplicates_collapse() {
    let (_d, cwd) = workspace();
    let twice = format!("{TOUCH_ETC}{TOUCH_ETC}");
    assert_eq!(
        Case::new(&cwd, &["touch", "/etc/cordon-unit"], 1, &twice)
            .run()
            .len(),
        1
    );
}

#[test]
fn unenforced_carve_outs_deny_nothing() {
    let (_d, cwd) = workspace();
    let git = cwd.join(".git");
    let line = format!(
        "touch: cannot touch '{}/x': Permission denied\n",
        git.display()
    );
    let mut case = Case::new(&cwd, &["touch", ".git/x"], 1, &line);
    case.policy.filesystem.read_only = vec![git.clone()];
    assert_eq!(case.one().0, Operation::FileWrite);
    case.records = vec![StatusRecord::Confined(ConfinementReceipt {
        layers: vec![Layer::LandlockFs, Layer::Seccomp],
        downgrades: vec![Downgrade {
            restriction: format!("read_only:{}", git.display()),
            reason: "no mount namespace".into(),
        }],
        ..Default::default()
    })];
    assert!(case.run().is_empty());
}

#[test]
fn denials_serialise_in_snake_case() {
    let d = Denial {
        operation: Operation::UnixSocket,
        target: None,
        rule: "unix sockets denied".into(),
        allow_with: "--allow-unix-sockets".into(),
        evidence: EvidenceKind::Text,
        count: 1,
    };
    let json = serde_json::to_string(&d).unwrap();
    assert!(json.contains("\"unix_socket\""), "{json}");
    assert!(json.contains("\"evidence\":\"text\""), "{json}");
    assert_eq!(serde_json::from_str::<Denial>(&json).unwrap(), d);
}

#[test]
fn quiet_curl_and_wget_exit_codes_are_evidence_only_with_the_network_denied() {
    let (_d, cwd) = workspace();
    let curl = Case::new(&cwd, &["curl", "-s", "http://127.0.0.1:9/"], 7, "");
    assert_eq!(curl.one(), (Operation::Network, Some("127.0.0.1:9".into())));
    let wget = Case::new(&cwd, &["wget", "-q", "https://example.org/x"], 4, "");
    assert_eq!(
        wget.one(),
        (Operation::Network, Some("example.org:443".into()))
    );
    // Through a login shell, as agents run it.
    let wrapped = Case::new(&cwd, &["bash", "-lc", "curl -s http://127.0.0.1:9/"], 7, "");
    assert_eq!(
        wrapped.one(),
        (Operation::Network, Some("127.0.0.1:9".into()))
    );
    // The same exit with the network enabled is the network's own failure.
    let mut enabled = Case::new(&cwd, &["curl", "-s", "http://127.0.0.1:9/"], 7, "");
    enabled.policy = policy(&[&cwd], "enabled", "deny");
    assert_eq!(enabled.run(), vec![]);
    // Other curl failures (22: HTTP error status) say nothing about the network policy.
    assert_eq!(
        Case::new(&cwd, &["curl", "-sf", "http://127.0.0.1:9/"], 22, "").run(),
        vec![]
    );
    // With something on stderr the exit code is not used: the messages decide, and an
    // unrelated one is no evidence.
    assert_eq!(
        Case::new(
            &cwd,
            &["curl", "-s", "http://x/"],
            7,
            "warning: unrelated\n"
        )
        .run(),
        vec![]
    );
}

#[test]
fn shared_memory_eacces_points_at_dev_shm_unless_it_is_writable() {
    let (_d, cwd) = workspace();
    // What `python3 -c "import multiprocessing as m; m.Lock()"` prints under workspace-write.
    let traceback = "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n    sl = self._semlock = _multiprocessing.SemLock(\n                         ^^^^^^^^^^^^^^^^^^^^^^^^^\nPermissionError: [Errno 13] Permission denied\n";
    let case = Case::new(
        &cwd,
        &["python3", "-c", "import multiprocessing as m; m.Lock()"],
        1,
        traceback,
    );
    let found = case.run();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].operation, Operation::FileWrite);
    assert_eq!(found[0].target.as_deref(), Some("/dev/shm"));
    assert_eq!(found[0].allow_with, "--writable /dev/shm");
    // With /dev/shm writable the same failure is not the sandbox's doing.
    let mut allowed = Case::new(
        &cwd,
        &["python3", "-c", "import multiprocessing as m; m.Lock()"],
        1,
        traceback,
    );
    allowed.policy = policy(&[&cwd, Path::new("/dev/shm")], "denied", "deny");
    assert_eq!(allowed.run(), vec![]);
}

#[test]
fn a_tool_that_found_a_path_not_writable_names_a_write_denial() {
    let (_d, cwd) = workspace();
    for line in [
        "pyenv: cannot rehash: /etc isn't writable\n",
        "error: '/etc' is not writable\n",
        "fatal: not writable: /etc\n",
    ] {
        let found = Case::new(&cwd, &["sh", "-c", "x"], 1, line).run();
        assert_eq!(found.len(), 1, "{line}: {found:?}");
        assert_eq!(found[0].operation, Operation::FileWrite, "{line}");
        assert_eq!(found[0].target.as_deref(), Some("/etc"), "{line}");
        assert_eq!(found[0].allow_with, "--writable /etc", "{line}");
    }
    // The same words about a path the policy lets the command write are its own problem.
    let inside = format!("pyenv: cannot rehash: {} isn't writable\n", cwd.display());
    assert!(Case::new(&cwd, &["sh", "-c", "x"], 1, &inside)
        .run()
        .is_empty());
}

#[test]
fn any_read_only_file_system_line_names_what_was_changed() {
    let (_d, cwd) = workspace();
    for (argv, line) in [
        (
            vec!["gcc", "m.c", "-o", "/etc/m"],
            "/usr/bin/ld: cannot open output file /etc/m: Read-only file system\n",
        ),
        (
            vec!["openssl", "genrsa", "-out", "/etc/m"],
            "genrsa: Can't open \"/etc/m\" for writing, Read-only file system\n",
        ),
        (
            vec!["java", "W.java"],
            "java.io.FileNotFoundException: /etc/m (Read-only file system)\n",
        ),
        (
            vec!["ssh-keygen", "-f", "/etc/m"],
            "Saving key \"/etc/m\" failed: Read-only file system\n",
        ),
        (
            vec!["tar", "xf", "a.tar", "-C", "/etc"],
            "tar: m: Cannot open: Read-only file system\n",
        ),
    ] {
        let found = Case::new(&cwd, &argv, 1, line).run();
        let targets: Vec<_> = found
            .iter()
            .map(|d| (d.operation, d.target.clone()))
            .collect();
        assert_eq!(
            targets,
            vec![(Operation::FileWrite, Some("/etc/m".to_owned()))],
            "{line}"
        );
    }
    // The other end of a link is not changed; the speaking program is no path it changed.
    let link =
        "ln: failed to create symbolic link '/etc/l' -> '/usr/bin/env': Read-only file system\n";
    let found = Case::new(&cwd, &["ln", "-s", "/usr/bin/env", "/etc/l"], 1, link).run();
    let targets: Vec<_> = found.iter().map(|d| d.target.clone()).collect();
    assert_eq!(targets, vec![Some("/etc/l".to_owned())]);
    // Without the errno's words, a path on a line is nothing.
    let plain = "/usr/bin/ld: cannot find /etc/m\n";
    assert!(Case::new(&cwd, &["gcc"], 1, plain).run().is_empty());
}

fn targets(found: &[Denial]) -> Vec<(Operation, Option<String>)> {
    found
        .iter()
        .map(|d| (d.operation, d.target.clone()))
        .collect()
}

/// Shapes from runs of tools the rules were not written for (compilers, interpreters,
/// databases, fetchers, key tools): each names its exact target, whatever the wording, with or
/// without an errno, split over lines or not; the policy decides every one.
#[test]
fn messages_of_many_tools_name_their_exact_targets() {
    let (_d, cwd) = workspace();
    let w = |t: &str| vec![(Operation::FileWrite, Some(t.to_owned()))];
    for (line, expected) in [
        ("failed to initialize build cache at /etc/go-build: mkdir /etc/go-build: read-only file system\n", w("/etc/go-build")),
        ("error: error writing dependencies to `/etc/h.d`: Read-only file system (os error 30)\n", w("/etc/h.d")),
        ("/etc/out.txt: Read-only file system\n", w("/etc/out.txt")),
        ("Warning: Failed to open the file /etc/svc.html: Read-only file system\n", w("/etc/svc.html")),
        ("mysql: Can't create/write to file '/etc/svc.log' (Errcode: 30 \"Read-only file system\")\n", w("/etc/svc.log")),
        ("checkdir error:  cannot create /etc/data\n                 Read-only file system\n", w("/etc/data")),
        ("error: failed to open: /etc/.crates.toml\n\nCaused by:\n  Read-only file system (os error 30)\n", w("/etc/.crates.toml")),
        ("npm error rofs EROFS: read-only file system, symlink '../../../var/tmp/p' -> '/etc/lpkg'\n", w("/etc/lpkg")),
        ("/usr/lib/ruby/3.1.0/fileutils.rb:243:in `mkdir': Permission denied @ dir_s_mkdir - /etc/gx (Errno::EACCES)\n", w("/etc/gx")),
        ("Error: cannot open \"/etc/sqlout.txt\"\nError: cannot write to \"/etc/sqlout.txt\"\n", w("/etc/sqlout.txt")),
        ("Error: unable to open database \"/etc/new.db\": unable to open database file\n", w("/etc/new.db")),
        ("npm error Log files were not written due to an error writing to the directory: /etc/npm-logs\n", w("/etc/npm-logs")),
        ("    You don't have write permissions for the /etc/gems directory.\n", w("/etc/gems")),
        ("Error copying file \"f.txt\" to \"/etc/f.txt\".\n", w("/etc/f.txt")),
        ("cmake -E touch: failed to update \"/etc/cmtouch\".\n", w("/etc/cmtouch")),
        ("Error creating directory \"/etc/cmdir\".\n", w("/etc/cmdir")),
        // A program that names itself by its path is the speaker, not the target.
        ("/bin/sh: 1: cannot create /etc/out.txt: Read-only file system\n", w("/etc/out.txt")),
        ("/bin/sh: 1: cannot create out.txt: Read-only file system\n", vec![]),
        // git writes PATH.lock and renames it over PATH; autom4te names the entry and its
        // directory apart.
        ("error: could not lock config file /etc/gitconfig: Read-only file system\n", w("/etc/gitconfig.lock")),
        ("autom4te: error: cannot create autom4te.cache in /etc: Read-only file system\n", w("/etc/autom4te.cache")),
    ] {
        let found = Case::new(&cwd, &["tool"], 1, line).run();
        assert_eq!(targets(&found), expected, "{line}");
    }
    // A relative path, against the directory a build tool entered, the one it was told to
    // work in, or the working directory.
    for (argv, stdout, line, expected) in [
        (
            vec!["make"],
            "make[1]: Entering directory '/etc'\n",
            "/bin/sh: 1: cannot create out.txt: Read-only file system\n",
            w("/etc/out.txt"),
        ),
        (
            vec!["ninja"],
            "ninja: Entering directory `/etc'\n",
            "Fatal error: can't create hello.o: Read-only file system\n",
            w("/etc/hello.o"),
        ),
        (
            vec!["patch", "-d", "/etc", "-p1"],
            "",
            "patch: **** Can't create temporary file ./f.txt.oVD9E7i : Read-only file system\n",
            w("/etc/f.txt.oVD9E7i"),
        ),
        (
            vec!["git", "-C", "/etc", "config", "a.b", "c"],
            "",
            "error: could not lock config file .git/config: Read-only file system\n",
            vec![],
        ),
        (
            vec!["ls", "-d", "/etc"],
            "",
            "ls: x.txt: Read-only file system\n",
            vec![],
        ),
        (
            vec!["ninja", "-C", "/etc"],
            "",
            "ninja: build stopped: Error writing to build log: Read-only file system.\n",
            w("/etc/.ninja_log"),
        ),
        (
            vec!["sh", "-c", "cd /etc && ./configure"],
            "",
            "./configure: line 1497: config.log: Read-only file system\n",
            w("/etc/config.log"),
        ),
        (
            vec!["make", "-C", "/etc"],
            "",
            "/usr/bin/ld: cannot open output file hello: Read-only file system\n",
            w("/etc/hello"),
        ),
        (
            vec!["git", "-C", "/etc", "config", "a.b", "c"],
            "",
            "error: could not lock config file .git/config: Read-only file system\n",
            vec![],
        ),
    ] {
        let mut case = Case::new(&cwd, &argv, 1, line);
        case.stdout = stdout.to_owned();
        assert_eq!(targets(&case.run()), expected, "{line}");
    }
    // Python's, in a working directory outside the writable roots.
    let mut case = Case::new(&cwd, &["pytest"], 1, "");
    case.stdout = "E       OSError: [Errno 30] Read-only file system: 'results.txt'\n".to_owned();
    case.cwd = PathBuf::from("/etc");
    assert_eq!(targets(&case.run()), w("/etc/results.txt"));

    // Reads, under read roots that leave /etc out.
    let narrow = |line: &str| {
        let mut case = Case::new(&cwd, &["tool"], 1, line);
        case.policy = SandboxPolicy::from_json(&format!(
            r#"{{"version":1,"filesystem":{{"read":["/usr",{cwd:?}],"write":[{cwd:?}]}},
               "network":{{"mode":"denied","unix_sockets":"deny"}},
               "enforcement":{{"missing_layer":"refuse","carve_outs":"report"}}}}"#,
            cwd = cwd.display().to_string()
        ))
        .unwrap();
        case.run()
    };
    let r = vec![(Operation::FileRead, Some("/etc/hostname".to_owned()))];
    for line in [
        "error: couldn't read `/etc/hostname`: Permission denied (os error 13)\n",
        "-e:1:in `read': Permission denied @ rb_sysopen - /etc/hostname (Errno::EACCES)\n",
        "PHP Warning:  file_get_contents(/etc/hostname): Failed to open stream: Permission denied in Command line code on line 1\n",
        "Can't open perl script \"/etc/hostname\": Permission denied\n",
        "/etc/hostname: Permission denied\n",
        "Exception in thread \"main\" java.nio.file.AccessDeniedException: /etc/hostname\n",
        "error: error reading /etc/hostname; /etc/hostname\n",
        "Error: Unable to access jarfile /etc/hostname\n",
        "error:  cannot open zipfile [ /etc/hostname ]\n        Permission denied\n",
        "jq: error: Could not open file /etc/hostname: Permission denied\n",
        "yq: error: Could not open /etc/hostname: Permission denied\n",
    ] {
        if !Path::new("/etc/hostname").exists() {
            eprintln!("SKIPPED: reads need an existing /etc/hostname");
            break;
        }
        assert_eq!(targets(&narrow(line)), r, "{line}");
    }
    // What the rules must leave alone: a file that is only missing (a read of it would say
    // ENOENT, unprinted), another errno, a connection, a path the policy allows.
    for line in [
        "Error: cannot open \"/etc/cordon-missing.sql\"\n",
        "cannot open /etc/cordon-x: No such file or directory\n",
        "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock\n",
        &format!("Error: cannot write to \"{}/out\"\n", cwd.display()),
        "error reading /etc/hostname; /etc/hostname\n",
    ] {
        let found = Case::new(&cwd, &["tool"], 1, line).run();
        assert!(found.is_empty(), "{line}: {found:?}");
    }
    // A "Read-only file system" message on stdout (screen, zip and 7z print theirs there).
    let mut case = Case::new(&cwd, &["screen", "-dmS", "x"], 1, "");
    case.stdout = "Cannot make directory '/etc/screen-x': Read-only file system\n".into();
    assert_eq!(targets(&case.run()), w("/etc/screen-x"));
}

/// Clients that print where they were going in their own words: the target is that address,
/// the one the run's refused socket was for.
#[test]
fn refused_connections_are_named_from_each_clients_words() {
    let (_d, cwd) = workspace();
    for (argv, line, target) in [
        (vec!["ssh", "-p", "18022", "127.0.0.1"], "ssh: connect to host 127.0.0.1 port 18022: failure\n", "127.0.0.1:18022"),
        (vec!["redis-cli", "-p", "16379"], "Could not connect to Redis at 127.0.0.1:16379: Can't create socket\n", "127.0.0.1:16379"),
        (vec!["psql", "-h", "localhost"], "psql: error: connection to server at \"localhost\" (127.0.0.1), port 15433 failed: Operation not permitted\n", "127.0.0.1:15433"),
        (vec!["php", "-r", "x"], "PHP Warning:  fsockopen(): Unable to connect to 127.0.0.1:18080 (Unknown error) in Command line code on line 1\n", "127.0.0.1:18080"),
        (vec!["logger", "-n", "127.0.0.1"], "logger: failed to connect to 127.0.0.1 port 18514\n", "127.0.0.1:18514"),
    ] {
        let case = Case::new(&cwd, &argv, 1, line);
        assert_eq!(
            case.one(),
            (Operation::Network, Some(target.to_owned())),
            "{line}"
        );
    }
}

/// Removing a directory outside the writable roots needs the directory that holds it: the
/// suggestion names the parent, not the directory itself (which a grant would only make a
/// mount point that cannot be removed at all).
#[test]
fn a_refused_removal_suggests_the_parent() {
    let (_d, cwd) = workspace();
    let line = "npm error rofs EROFS: read-only file system, rmdir '/etc/ssl'\n";
    let found = Case::new(&cwd, &["npm", "cache", "clean"], 1, line).run();
    assert_eq!(
        targets(&found),
        vec![(Operation::FileWrite, Some("/etc/ssl".to_owned()))]
    );
    assert_eq!(found[0].allow_with, "--writable /etc");
}

/// Name lookups refused with the network: the host the client named is the target.
#[test]
fn refused_lookups_name_the_host() {
    let (_d, cwd) = workspace();
    for (line, target) in [
        ("Exception in thread \"main\" java.net.UnknownHostException: example.com: Temporary failure in name resolution\n", "example.com"),
        ("getaddrinfo example.com: Temporary failure in name resolution\n", "example.com"),
        ("IO::Socket::INET: IO::Socket::INET: Bad hostname 'example.com:443'\n", "example.com:443"),
        ("Err:1 http://example.com/debian bookworm InRelease\n  Temporary failure resolving 'example.com'\n", "example.com:80"),
    ] {
        let case = Case::new(&cwd, &["tool"], 1, line);
        assert_eq!(case.one(), (Operation::Network, Some(target.to_owned())), "{line}");
    }
}

/// Node's recursive mkdir reports the ENOENT of its follow-up stat, not the refusal: with the
/// directory above present, it was a refused creation; with it missing, a real ENOENT.
#[test]
fn a_masked_mkdir_refusal_is_a_write() {
    let (_d, cwd) = workspace();
    let line = "Error: ENOENT: no such file or directory, mkdir '/etc/cordon-myapp'\n";
    let found = Case::new(&cwd, &["node", "-e", "x"], 1, line).run();
    assert_eq!(
        targets(&found),
        vec![(Operation::FileWrite, Some("/etc/cordon-myapp".to_owned()))]
    );
    let missing = "Error: ENOENT: no such file or directory, mkdir '/etc/cordon-none/myapp'\n";
    assert!(Case::new(&cwd, &["node", "-e", "x"], 1, missing)
        .run()
        .is_empty());
}

/// A preset's hidden entry (`~/.gnupg`) is lifted by its name, with the directory to grant
/// when the change lies outside every writable root: "remove it from filesystem.deny_read"
/// names a profile the person never wrote.
#[test]
fn a_preset_hidden_entry_is_lifted_by_its_name() {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        eprintln!("SKIPPED: needs HOME");
        return;
    };
    let (_d, cwd) = workspace();
    let gnupg = home.join(".gnupg");
    let target = gnupg.join("private-keys-v1.d");
    let line = format!(
        "gpg-agent: error creating '{}': Permission denied\n",
        target.display()
    );
    let mut case = Case::new(&cwd, &["gpg-agent", "--daemon"], 2, &line);
    case.policy.filesystem.deny_read.push(gnupg.clone());
    let found = case.run();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].target.as_deref(), Some(target.to_str().unwrap()));
    assert_eq!(
        found[0].allow_with,
        format!("--unprotect ~/.gnupg --writable {}", gnupg.display())
    );
    // A carve-out of the person's own stays theirs to remove.
    let mut case = Case::new(
        &cwd,
        &["cat", "/srv/secret/x"],
        1,
        "cat: /srv/secret/x: Permission denied\n",
    );
    case.policy
        .filesystem
        .deny_read
        .push(PathBuf::from("/srv/secret"));
    let found = case.run();
    if Path::new("/srv").is_dir() {
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].allow_with,
            "remove /srv/secret from filesystem.deny_read"
        );
    }
}

/// In the default scope the kernel saw the directory creation refused: a message that names
/// only the directory it was to be made in is that same refusal, and the kernel's exact target
/// stands alone. A message about another file still counts, from the text.
#[test]
fn a_message_about_the_directory_of_a_refused_creation_adds_nothing() {
    let (_d, cwd) = workspace();
    let kernel = vec![Denial::new(
        Operation::FileWrite,
        Some("/etc/autom4te.cache".to_owned()),
        "not under any writable root",
        "--writable /etc",
        EvidenceKind::SeccompObserver,
    )];
    let mut case = Case::new(
        &cwd,
        &["autoreconf"],
        1,
        "autoreconf: error: cannot write to /etc: Read-only file system\ntouch: cannot touch '/etc/other': Read-only file system\n",
    );
    case.kernel_light = Some(kernel.clone());
    let found = case.run();
    let got: Vec<(Option<String>, EvidenceKind)> = found
        .iter()
        .map(|d| (d.target.clone(), d.evidence))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Some("/etc/autom4te.cache".into()),
                EvidenceKind::SeccompObserver
            ),
            (Some("/etc/other".into()), EvidenceKind::Text),
        ]
    );
}

/// A failure line naming a path the command was given is about that path, whatever errno it
/// prints (ImageMagick reports a later call's, Ghostscript none): a write of an output outside
/// the writable roots, a read of an input outside the read roots. Not a path the command was
/// not given, not an output the policy allows, not a missing directory.
#[test]
fn a_failure_naming_the_commands_own_argument_is_about_it() {
    let (_d, cwd) = workspace();
    for (argv, line, expected) in [
        (
            vec!["convert", "-size", "10x10", "xc:red", "/etc/out.png"],
            "convert: unable to open image `/etc/out.png': No such file or directory @ error/blob.c/OpenBlob/2998.\n",
            vec![(Operation::FileWrite, Some("/etc/out.png".to_owned()))],
        ),
        (
            vec!["gs", "-q", "-sDEVICE=pdfwrite", "-sOutputFile=/etc/o.pdf", "in.ps"],
            "GPL Ghostscript 10.00.0: **** Could not open the file /etc/o.pdf .\n",
            vec![(Operation::FileWrite, Some("/etc/o.pdf".to_owned()))],
        ),
        (
            vec!["convert", "a.png", "/etc/out.png"],
            "convert: unable to open image `/etc/other.png': No such file or directory\n",
            vec![],
        ),
        (
            vec!["convert", "a.png", "/etc/none/out.png"],
            "convert: unable to open image `/etc/none/out.png': No such file or directory\n",
            vec![],
        ),
        // A file that is only missing.
        (
            vec!["cat", "/etc/cordon-none"],
            "cat: /etc/cordon-none: No such file or directory\n",
            vec![],
        ),
    ] {
        let found = Case::new(&cwd, &argv, 1, line).run();
        assert_eq!(targets(&found), expected, "{line}");
    }
    let out = cwd.join("out.png");
    let line = format!(
        "convert: unable to open image `{}': No such file or directory\n",
        out.display()
    );
    let found = Case::new(&cwd, &["convert", "a.png", out.to_str().unwrap()], 1, &line).run();
    assert!(found.is_empty(), "{found:?}");
}

/// A refused route-netlink socket that `ip` names is lifted by the network for a query, but
/// not for a change to the host's links, addresses or routes (CAP_NET_ADMIN is dropped).
#[test]
fn ip_changing_the_network_gets_no_network_suggestion() {
    let (_d, cwd) = workspace();
    let kernel = vec![Denial::new(
        Operation::Syscall,
        Some("socket".to_owned()),
        "seccomp: socket refused",
        "--network enabled",
        EvidenceKind::SeccompObserver,
    )];
    let line = "Cannot open netlink socket: Operation not permitted\n";
    for (argv, allow) in [
        (vec!["ip", "addr", "show"], "--network enabled"),
        (
            vec!["ip", "link", "set", "lo", "down"],
            "none: no profile allows it",
        ),
    ] {
        let mut case = Case::new(&cwd, &argv, 1, line);
        case.kernel_light = Some(kernel.clone());
        let found = case.run();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].allow_with.starts_with(allow),
            "{argv:?}: {found:?}"
        );
    }
}

/// `mkdir -p` and tools like it name the deepest directory; the kernel saw the first missing
/// one refused. The message adds nothing, and its suggestion (a directory that does not
/// exist) would not work.
#[test]
fn a_message_about_a_path_below_a_refused_creation_adds_nothing() {
    let (_d, cwd) = workspace();
    let kernel = vec![Denial::new(
        Operation::FileWrite,
        Some("/etc/cordon-ccache".to_owned()),
        "not under any writable root",
        "--writable /etc",
        EvidenceKind::SeccompObserver,
    )];
    let mut case = Case::new(
        &cwd,
        &["ccache", "gcc"],
        1,
        "ccache: error: Failed to create directory /etc/cordon-ccache/tmp: Read-only file system\n",
    );
    case.kernel_light = Some(kernel.clone());
    let found = case.run();
    assert_eq!(
        targets(&found),
        vec![(Operation::FileWrite, Some("/etc/cordon-ccache".to_owned()))]
    );
    assert_eq!(found[0].evidence, EvidenceKind::SeccompObserver);
}

/// git's "could not lock config file PATH" is a write of PATH.lock, relative PATH too.
#[test]
fn git_lock_files_are_the_target() {
    let (_d, cwd) = workspace();
    let (_o, outside) = workspace();
    std::fs::create_dir(outside.join(".git")).unwrap();
    let dir = outside.display().to_string();
    let case = Case::new(
        &cwd,
        &["git", "-C", &dir, "config", "a.b", "c"],
        255,
        "error: could not lock config file .git/config: Read-only file system\n",
    );
    assert_eq!(
        targets(&case.run()),
        vec![(
            Operation::FileWrite,
            Some(format!("{dir}/.git/config.lock"))
        )]
    );
}

/// A refused removal acts on a link itself: the link is the target, not where it leads.
#[test]
fn a_refused_removal_of_a_link_names_the_link() {
    let (_d, cwd) = workspace();
    let (_o, outside) = workspace();
    let link = outside.join("x.dpkg-tmp");
    std::os::unix::fs::symlink("/bin/true", &link).unwrap();
    let line = format!(
        "update-alternatives: error: unable to remove '{}': Read-only file system\n",
        link.display()
    );
    let found = Case::new(&cwd, &["update-alternatives", "--install"], 2, &line).run();
    assert_eq!(
        targets(&found),
        vec![(Operation::FileWrite, Some(link.display().to_string()))]
    );
}

/// An inet socket refused at creation is a probe until the output says so; a command that says
/// only that an operation was not permitted (nc, a Python server) says so. Anything more
/// specific about something else does not.
#[test]
fn a_bare_eperm_confirms_a_refused_inet_socket() {
    let (_d, cwd) = workspace();
    let kernel = vec![Denial::new(
        Operation::Network,
        None,
        "network mode denied (socket)",
        "--network enabled",
        EvidenceKind::SeccompObserver,
    )];
    for (line, expected) in [
        ("nc: Operation not permitted\n", 1),
        ("Traceback (most recent call last):\n  File \"x\", line 1\nPermissionError: [Errno 1] Operation not permitted\n", 1),
        ("chmod: changing permissions of '/x': Operation not permitted\n", 0),
        ("", 0),
    ] {
        let mut case = Case::new(&cwd, &["nc", "-l", "8080"], 1, line);
        case.kernel_light = Some(kernel.clone());
        let found = case.run();
        assert_eq!(found.len(), expected, "{line}: {found:?}");
        if expected == 1 {
            assert_eq!(found[0].operation, Operation::Network);
            assert_eq!(found[0].allow_with, "--network enabled");
        }
    }
}

/// Files tools name in their own terms: a sysctl key is a file under /proc/sys, ninja's build
/// log is `.ninja_log` in its build directory.
#[test]
fn files_named_in_a_tools_own_terms() {
    let (_d, cwd) = workspace();
    let case = Case::new(
        &cwd,
        &["sysctl", "-w", "vm.swappiness=10"],
        1,
        "sysctl: permission denied on key \"vm.swappiness\"\n",
    );
    assert_eq!(
        targets(&case.run()),
        vec![(
            Operation::FileWrite,
            Some("/proc/sys/vm/swappiness".to_owned())
        )]
    );
    let mut case = Case::new(&cwd, &["ninja", "-C", "/etc"], 1, "");
    case.stdout = "ninja: Entering directory `/etc'\nninja: build stopped: Error writing to build log: Read-only file system.\n".to_owned();
    assert_eq!(
        targets(&case.run()),
        vec![(Operation::FileWrite, Some("/etc/.ninja_log".to_owned()))]
    );
}
