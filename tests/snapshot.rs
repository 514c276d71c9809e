//! Shell snapshot tests against real bash, zsh and dash. Every test uses a private temporary
//! HOME and snapshot directory, and passes environment changes to the child shells only.

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use cordon::snapshot::{
    cleanup_stale, create_snapshot, quoted, rewrite_argv, spawn_cleanup, ReportFd, RewriteOptions,
    SessionId, SessionLock, Shell, ShellKind, SnapshotError, SnapshotFile, SnapshotOptions,
    SnapshotRef, DEFAULT_RETENTION, MARKER_LINE,
};
use tempfile::TempDir;

/// A private HOME and snapshot directory.
struct Fixture {
    home: TempDir,
    snaps: TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            home: TempDir::new().unwrap(),
            snaps: TempDir::new().unwrap(),
        }
    }

    fn dir(&self) -> PathBuf {
        self.snaps.path().join("snapshots")
    }

    fn write(&self, name: &str, body: &str) {
        fs::write(self.home.path().join(name), body).unwrap();
    }

    /// The startup-file variables every child gets: HOME and ZDOTDIR point at the fixture,
    /// ENV at its `.shrc`, BASH_ENV is removed.
    fn child_env(&self) -> Vec<(OsString, Option<OsString>)> {
        let home = self.home.path().as_os_str().to_os_string();
        vec![
            ("HOME".into(), Some(home.clone())),
            ("ZDOTDIR".into(), Some(home)),
            (
                "ENV".into(),
                Some(self.home.path().join(".shrc").into_os_string()),
            ),
            ("BASH_ENV".into(), None),
        ]
    }

    fn opts(&self, session: &str) -> SnapshotOptions {
        let mut o = SnapshotOptions::new(self.dir(), SessionId::new(session).unwrap(), 1);
        o.env = self.child_env();
        // The binary under test confines the capture (a stale standalone helper might not).
        o.helper = Some(cordon::helper::Helper::cordon_binary(env!(
            "CARGO_BIN_EXE_cordon"
        )));
        o
    }

    fn snapshot(&self, shell: &str) -> Result<SnapshotFile, SnapshotError> {
        create_snapshot(&Shell::new(shell).unwrap(), &self.opts("s1"))
    }

    fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    /// Runs an argv with the fixture's child environment plus `extra`.
    fn run(&self, argv: &[OsString], extra: &[(&str, Option<&str>)]) -> Output {
        self.run_fds(argv, None, None, extra)
    }

    /// [`Fixture::run`], with `snapshot` and `env_scripts` as sealed memfds at the
    /// descriptors the wrapper sources them from, the way `Session` and `cordon run` pass them.
    fn run_fds(
        &self,
        argv: &[OsString],
        snapshot: Option<&[u8]>,
        env_scripts: Option<&[u8]>,
        extra: &[(&str, Option<&str>)],
    ) -> Output {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).stdin(Stdio::null());
        // Each memfd is copied to a number at or above 100 first, so that no dup2 in the child
        // maps a number onto itself (which would keep close-on-exec) or overwrites the source
        // of the next move.
        let memfds: Vec<(std::os::fd::OwnedFd, i32)> = [
            (snapshot, cordon::snapshot::SNAPSHOT_FD),
            (env_scripts, cordon::snapshot::ENV_FD),
        ]
        .into_iter()
        .filter_map(|(content, target)| {
            let content = content?;
            let memfd = cordon::snapshot::sealed_memfd("test", content).unwrap();
            // SAFETY: fcntl duplicates a descriptor we hold open; the copy is owned below.
            let high = unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 100) };
            assert!(high >= 100);
            // SAFETY: `high` was just returned by fcntl and is owned by nothing else.
            Some((unsafe { std::os::fd::OwnedFd::from_raw_fd(high) }, target))
        })
        .collect();
        let moves: Vec<(i32, i32)> = memfds.iter().map(|(fd, t)| (fd.as_raw_fd(), *t)).collect();
        // SAFETY: dup2 is async-signal-safe; every source stays open in the parent (`memfds`)
        // until the spawn returns, and no source equals a target.
        unsafe {
            cmd.pre_exec(move || {
                for &(src, target) in &moves {
                    if libc::dup2(src, target) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        for (k, v) in self.child_env().into_iter().chain(
            extra
                .iter()
                .map(|(k, v)| (OsString::from(k), v.map(OsString::from))),
        ) {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let out = cmd.output().unwrap();
        drop(memfds);
        out
    }
}

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "status {:?}, stderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

const EXPORT_LINE: &str = "export SNAP_VAR='line1\nit'\\''s \"quoted\" $HOME `x`'\n";
const EXPORT_VALUE: &str = "[line1\nit's \"quoted\" $HOME `x`]\n";

/// Startup file contents shared by the shells: noise, a function, an alias, an option, an
/// export with a newline and quotes.
fn rc_body(option: &str) -> String {
    format!(
        "echo NOISE-BEFORE\nprintf 'partial line'\n\
         greet() {{ printf 'hello %s\\n' \"$1\"; }}\n\
         alias ll='echo ALIAS-OK'\n\
         {option}\n{EXPORT_LINE}"
    )
}

fn check_snapshot_file(snap: &SnapshotFile) {
    let body = fs::read(snap.path()).unwrap();
    assert!(body.starts_with(format!("{MARKER_LINE}\n").as_bytes()));
    assert!(!String::from_utf8_lossy(&body).contains("NOISE-BEFORE"));
    let mode = fs::metadata(snap.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dmode = fs::metadata(snap.path().parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dmode, 0o700);
}

#[test]
fn snapshot_bash_restores_function_alias_option_export() {
    let fx = Fixture::new();
    fx.write(".bashrc", &rc_body("set -o noclobber\nshopt -s extglob"));
    let snap = fx.snapshot("/bin/bash").unwrap();
    check_snapshot_file(&snap);
    assert_eq!(fx.entries(), ["s1.1.sh"]);
    // The startup file is gone: whatever the command sees comes from the snapshot.
    fs::remove_file(fx.home.path().join(".bashrc")).unwrap();

    let script = "greet world; ll; case $- in *C*) echo noclobber-on;; esac; \
                  shopt -q extglob && echo extglob-on; printf '[%s]\\n' \"$SNAP_VAR\"";
    let argv = os(&["/bin/bash", "-lc", script]);
    let mut rw = RewriteOptions::new(snap.to_ref());
    rw.bash_expand_aliases = true;
    let out = fx.run_fds(&rewrite_argv(&argv, &rw), Some(snap.content()), None, &[]);
    assert_eq!(
        stdout(&out),
        format!("hello world\nALIAS-OK\nnoclobber-on\nextglob-on\n{EXPORT_VALUE}")
    );

    // Without the flag bash keeps its non-interactive default: the alias exists but is not
    // expanded.
    rw.bash_expand_aliases = false;
    let argv = os(&[
        "/bin/bash",
        "-lc",
        "alias ll; ll 2>/dev/null || echo not-expanded",
    ]);
    let out = fx.run_fds(&rewrite_argv(&argv, &rw), Some(snap.content()), None, &[]);
    assert_eq!(stdout(&out), "alias ll='echo ALIAS-OK'\nnot-expanded\n");
}

#[test]
fn snapshot_zsh_restores_function_alias_option_export() {
    let fx = Fixture::new();
    fx.write(".zshrc", &rc_body("setopt noclobber extendedglob"));
    let snap = fx.snapshot("/usr/bin/zsh").unwrap();
    check_snapshot_file(&snap);
    fs::remove_file(fx.home.path().join(".zshrc")).unwrap();

    let script = "greet world; ll; [[ -o noclobber ]] && echo noclobber-on; \
                  [[ -o extendedglob ]] && echo extendedglob-on; printf '[%s]\\n' \"$SNAP_VAR\"";
    let argv = os(&["/usr/bin/zsh", "-lc", script]);
    let out = fx.run_fds(
        &rewrite_argv(&argv, &RewriteOptions::new(snap.to_ref())),
        Some(snap.content()),
        None,
        &[],
    );
    assert_eq!(
        stdout(&out),
        format!("hello world\nALIAS-OK\nnoclobber-on\nextendedglob-on\n{EXPORT_VALUE}")
    );
}

#[test]
fn snapshot_dash_restores_alias_option_export_but_cannot_list_functions() {
    let fx = Fixture::new();
    fx.write(".shrc", &rc_body("set -o noclobber"));
    let snap = fx.snapshot("/usr/bin/dash").unwrap();
    check_snapshot_file(&snap);
    fs::remove_file(fx.home.path().join(".shrc")).unwrap();

    let script = "command -v greet >/dev/null || echo no-function; ll; \
                  case $- in *C*) echo noclobber-on;; esac; printf '[%s]\\n' \"$SNAP_VAR\"";
    let argv = os(&["/usr/bin/dash", "-lc", script]);
    let out = fx.run_fds(
        &rewrite_argv(&argv, &RewriteOptions::new(snap.to_ref())),
        Some(snap.content()),
        None,
        &[],
    );
    assert_eq!(
        stdout(&out),
        format!("no-function\nALIAS-OK\nnoclobber-on\n{EXPORT_VALUE}")
    );
}

/// An `sh` that is really bash (as on Fedora) can list its functions, so they are kept.
#[test]
fn snapshot_sh_that_is_bash_restores_functions() {
    let fx = Fixture::new();
    let bin = fx.snaps.path().join("bin");
    fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink("/bin/bash", bin.join("sh")).unwrap();
    let sh = bin.join("sh");
    fx.write(".shrc", &rc_body("set -o noclobber"));
    let snap = create_snapshot(&Shell::new(&sh).unwrap(), &fx.opts("s1")).unwrap();
    assert_eq!(snap.shell().kind, ShellKind::Sh);
    fs::remove_file(fx.home.path().join(".shrc")).unwrap();

    let script = "greet world; ll; case $- in *C*) echo noclobber-on;; esac; \
                  printf '[%s]\\n' \"$SNAP_VAR\"";
    let argv = vec![sh.into_os_string(), "-lc".into(), script.into()];
    let out = fx.run_fds(
        &rewrite_argv(&argv, &RewriteOptions::new(snap.to_ref())),
        Some(snap.content()),
        None,
        &[],
    );
    assert_eq!(
        stdout(&out),
        format!("hello world\nALIAS-OK\nnoclobber-on\n{EXPORT_VALUE}")
    );
}

#[test]
fn snapshot_without_marker_is_an_error_and_leaves_nothing() {
    let fx = Fixture::new();
    // A startup file that ends the shell before the capture script prints anything.
    fx.write(".bashrc", "echo early; exit 0\n");
    let err = fx.snapshot("/bin/bash").unwrap_err();
    assert!(
        matches!(
            err,
            SnapshotError::MissingMarker {
                section: "marker",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(fx.entries(), Vec::<String>::new());
}

#[test]
fn snapshot_hanging_startup_file_is_killed_at_the_timeout() {
    let fx = Fixture::new();
    let pidfile = fx.home.path().join("grandchild.pid");
    // A grandchild in its own session keeps our stdout pipe open after the group is killed;
    // the call must not wait for it.
    fx.write(
        ".bashrc",
        &format!(
            "setsid sleep 1000 &\necho $! > '{}'\nsleep 1000\n",
            pidfile.display()
        ),
    );
    let mut opts = fx.opts("s1");
    opts.timeout = Duration::from_millis(700);
    let started = Instant::now();
    let err = create_snapshot(&Shell::new("/bin/bash").unwrap(), &opts).unwrap_err();
    let took = started.elapsed();
    if let Ok(pid) = fs::read_to_string(&pidfile) {
        let _ = Command::new("kill").args(["-9", pid.trim()]).status();
    }
    assert!(err.is_timeout(), "{err}");
    assert!(took < Duration::from_millis(1700), "took {took:?}");
    assert_eq!(fx.entries(), Vec::<String>::new());

    // The plain case: the shell's own foreground sleep dies with the group.
    fx.write(".bashrc", "sleep 1000\n");
    let started = Instant::now();
    let err = create_snapshot(&Shell::new("/bin/bash").unwrap(), &opts).unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() < Duration::from_millis(1700));
}

#[test]
fn snapshot_validation_failure_leaves_no_file() {
    let fx = Fixture::new();
    // bash accepts this function name but prints a definition it cannot read back.
    fx.write(".bashrc", "function a=b { :; }\n");
    let err = fx.snapshot("/bin/bash").unwrap_err();
    match &err {
        SnapshotError::ValidateStatus { path, .. } => {
            assert!(path
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("s1.tmp-"));
            assert!(!path.exists());
        }
        other => panic!("expected a validation failure, got {other}"),
    }
    assert_eq!(fx.entries(), Vec::<String>::new());
}

#[test]
fn snapshot_file_is_deleted_on_drop_unless_kept() {
    let fx = Fixture::new();
    let snap = fx.snapshot("/usr/bin/dash").unwrap();
    let path = snap.path().to_path_buf();
    assert_eq!(path, fx.dir().join("s1.1.sh"));
    assert!(path.exists());
    // A use refreshes the mtime that stale cleanup goes by.
    set_age(&path, Duration::from_secs(3600));
    snap.touch().unwrap();
    let age = SystemTime::now()
        .duration_since(fs::metadata(&path).unwrap().modified().unwrap())
        .unwrap_or_default();
    assert!(age < Duration::from_secs(60), "{age:?}");
    drop(snap);
    assert!(!path.exists());

    let kept = fx.snapshot("/usr/bin/dash").unwrap().keep();
    assert!(kept.exists());
}

#[test]
fn snapshot_overrides_and_path_win() {
    let fx = Fixture::new();
    fx.write(
        ".bashrc",
        "export HTTP_PROXY=from-snapshot MY_TOKEN=from-snapshot OTHER=from-snapshot\n",
    );
    let snap = fx.snapshot("/bin/bash").unwrap();
    let env_scripts = cordon::session::env_bundle(
        ShellKind::Bash,
        &[b"export HTTP_PROXY=from-env-dir\n".to_vec()],
    );

    let mut rw = RewriteOptions::new(snap.to_ref());
    // A runtime with its own proxy keeps the proxy variables too.
    rw.keep_vars
        .extend(cordon::snapshot::PROXY_VARS.iter().map(|s| s.to_string()));
    rw.keep_vars.push("MY_TOKEN".into());
    rw.keep_vars.push("not-an-identifier".into());
    rw.env_scripts = true;
    rw.path_prepend = vec!["/opt/cordon bin".into(), "/bad:entry".into()];
    let script = "printf '%s|' \"$HTTP_PROXY\" \"${MY_TOKEN-unset}\" \"$OTHER\" \
                  \"$CORDON_SANDBOX\"; printf '%s\\n' \"${PATH%%:*}\"";
    let argv = rewrite_argv(&os(&["bash", "-lc", script]), &rw);
    // The run-time values are read when the wrapper runs, not baked into argv.
    assert!(!argv[2].as_bytes().windows(7).any(|w| w == b"runtime"));
    let out = fx.run_fds(
        &argv,
        Some(snap.content()),
        Some(&env_scripts),
        &[
            ("HTTP_PROXY", Some("runtime")),
            ("MY_TOKEN", None),
            ("OTHER", Some("runtime")),
            ("CORDON_SANDBOX", Some("1")),
        ],
    );
    assert_eq!(
        stdout(&out),
        "runtime|unset|from-snapshot|1|/opt/cordon bin\n"
    );
}

#[test]
fn snapshot_env_scripts_are_evaluated_in_order_then_the_env_file() {
    let fx = Fixture::new();
    let scripts: Vec<Vec<u8>> = ["3", "10", "20"]
        .iter()
        .map(|tag| format!("ORDER=\"${{ORDER:-}}{tag},\"\n").into_bytes())
        .chain([
            b"if then\n".to_vec(),
            b"ORDER=\"${ORDER}after-error,\"\n".to_vec(),
        ])
        .collect();
    let extra = fx.snaps.path().join("extra.sh");
    fs::write(&extra, "ORDER=\"${ORDER}extra\"\n").unwrap();
    let marker_only = format!("{MARKER_LINE}\n");

    for (shell, kind) in [
        ("/bin/bash", ShellKind::Bash),
        ("/usr/bin/zsh", ShellKind::Zsh),
        ("/usr/bin/dash", ShellKind::Sh),
    ] {
        let mut rw = RewriteOptions::new(SnapshotRef {
            path: fx.snaps.path().join("unused.sh"),
            kind,
        });
        rw.env_scripts = true;
        let bundle = cordon::session::env_bundle(kind, &scripts);
        let argv = rewrite_argv(&os(&[shell, "-lc", "echo \"$ORDER\""]), &rw);
        let out = fx.run_fds(
            &argv,
            Some(marker_only.as_bytes()),
            Some(&bundle),
            &[("CORDON_ENV_FILE", Some(extra.to_str().unwrap()))],
        );
        // A syntax error in one script spares the scripts after it.
        assert_eq!(stdout(&out), "3,10,20,after-error,extra\n", "{shell}");
        // Without the memfds or the variable nothing fails.
        let argv = rewrite_argv(&os(&[shell, "-lc", "echo \"${ORDER:-none}\""]), &rw);
        assert_eq!(stdout(&fx.run(&argv, &[])), "none\n", "{shell}");
    }
}

/// Runs an argv with fd 3 redirected to `report`.
fn run_with_fd3(fx: &Fixture, argv: &[OsString], report: &Path) -> Output {
    let file = fs::File::create(report).unwrap();
    let raw = file.as_raw_fd();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).env("HOME", fx.home.path());
    // SAFETY: dup2 and fcntl are async-signal-safe; `raw` stays open in the parent until spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself would keep close-on-exec, so clear it in that case.
            let rc = if raw == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(raw, 3)
            };
            if rc == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    drop(file);
    out
}

#[test]
fn snapshot_reports_final_directory_on_fd_even_after_exit() {
    let fx = Fixture::new();
    let sub = fx.home.path().join("sub dir");
    fs::create_dir(&sub).unwrap();
    let expected = format!("{}\n", sub.canonicalize().unwrap().display());
    let report = fx.snaps.path().join("cwd");
    for (shell, kind) in [
        ("/bin/bash", ShellKind::Bash),
        ("/usr/bin/zsh", ShellKind::Zsh),
        ("/usr/bin/dash", ShellKind::Sh),
    ] {
        let snap_path = fx.snaps.path().join(format!("{}.sh", kind.name()));
        fs::write(&snap_path, format!("{MARKER_LINE}\n")).unwrap();
        let mut rw = RewriteOptions::new(SnapshotRef {
            path: snap_path,
            kind,
        });
        rw.report_cwd_fd = ReportFd::new(3);
        for (script, code) in [("cd \"$1\" && exit 3", 3), ("cd \"$1\"; echo done", 0)] {
            let argv = rewrite_argv(
                &[
                    OsString::from(shell),
                    "-lc".into(),
                    script.into(),
                    "zero".into(),
                    sub.clone().into_os_string(),
                ],
                &rw,
            );
            let out = run_with_fd3(&fx, &argv, &report);
            assert_eq!(out.status.code(), Some(code), "{shell} {script}");
            assert_eq!(fs::read_to_string(&report).unwrap(), expected, "{shell}");
            let want_stdout = if code == 0 { "done\n" } else { "" };
            assert_eq!(String::from_utf8_lossy(&out.stdout), want_stdout);
        }
    }
}

/// Kills and reaps a helper process even when an assertion fails first.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn set_age(path: &Path, age: Duration) {
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
}

#[test]
fn snapshot_cleanup_keeps_live_sessions_and_removes_stale_and_junk() {
    let fx = Fixture::new();
    let dir = fx.dir();
    fs::create_dir_all(&dir).unwrap();
    let old = Duration::from_secs(4 * 24 * 3600);
    let outside = fx.snaps.path().join("outside.txt");
    fs::write(&outside, "keep me").unwrap();

    for name in [
        "live.1.sh",
        "dead.1.sh",
        "dead.lock",
        "dead.2.sh",
        "gone.1.sh",
        "mine.1.sh",
        "x.tmp-abc",
        "y.tmp-def",
        "junk.txt",
    ] {
        fs::write(dir.join(name), "").unwrap();
    }
    for name in [
        "live.1.sh",
        "dead.1.sh",
        "dead.lock",
        "gone.1.sh",
        "mine.1.sh",
    ] {
        set_age(&dir.join(name), old);
    }
    set_age(&dir.join("x.tmp-abc"), Duration::from_secs(20 * 60));
    std::os::unix::fs::symlink(&outside, dir.join("link-to-outside")).unwrap();
    std::os::unix::fs::symlink(fx.snaps.path(), dir.join("link-to-dir")).unwrap();
    fs::create_dir(dir.join("a-subdir")).unwrap();

    // Another process holds the "live" session's lock.
    // One process (no forked child that could outlive a kill) holding the lock on fd 9.
    let holder = Command::new("sh")
        .args([
            "-c",
            "exec 9>\"$1\" && flock -s 9 && echo locked && exec sleep 1000",
            "holder",
        ])
        .arg(dir.join("live.lock"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut holder = KillOnDrop(holder);
    let mut line = String::new();
    BufReader::new(holder.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "locked\n");
    set_age(&dir.join("live.lock"), old);
    // And this process holds "mine".
    let mine = SessionLock::acquire(&dir, &SessionId::new("mine").unwrap()).unwrap();
    set_age(mine.path(), old);

    let report = cleanup_stale(&dir, DEFAULT_RETENTION).unwrap();
    drop(holder);

    let mut deleted: Vec<String> = report
        .deleted
        .iter()
        .map(|p| {
            assert_eq!(p.parent().unwrap(), dir);
            p.file_name().unwrap().to_str().unwrap().to_string()
        })
        .collect();
    deleted.sort();
    assert_eq!(
        deleted,
        [
            "dead.1.sh",
            "dead.lock",
            "gone.1.sh",
            "junk.txt",
            "link-to-dir",
            "link-to-outside",
            "x.tmp-abc"
        ]
    );
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let live: Vec<&str> = report.live_sessions.iter().map(|s| s.as_str()).collect();
    assert_eq!(live, ["live", "mine"]);
    assert_eq!(
        fx.entries(),
        [
            "a-subdir",
            "dead.2.sh",
            "live.1.sh",
            "live.lock",
            "mine.1.sh",
            "mine.lock",
            "y.tmp-def"
        ]
    );
    assert_eq!(fs::read_to_string(&outside).unwrap(), "keep me");
    assert!(fx.snaps.path().join("outside.txt").exists());

    // Once the sessions end, their stale files go.
    drop(mine);
    let report = spawn_cleanup(dir.clone(), DEFAULT_RETENTION)
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    let mut deleted: Vec<String> = report
        .deleted
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    deleted.sort();
    assert_eq!(
        deleted,
        ["live.1.sh", "live.lock", "mine.1.sh", "mine.lock"]
    );
}

#[test]
fn snapshot_cleanup_refuses_a_symlinked_directory() {
    let fx = Fixture::new();
    let real = fx.snaps.path().join("real");
    fs::create_dir(&real).unwrap();
    fs::write(real.join("junk"), "").unwrap();
    let link = fx.snaps.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(cleanup_stale(&link, DEFAULT_RETENTION).is_err());
    assert!(real.join("junk").exists());
}

mod quoting {
    use super::*;
    use proptest::prelude::*;

    fn arg() -> impl Strategy<Value = Vec<u8>> {
        // Every byte but NUL, which argv cannot carry; weighted towards the troublemakers.
        let byte = prop_oneof![
            3 => prop::sample::select(b"'\"\\$`\n !*?[]{}();&|<>~#=%-".to_vec()),
            2 => 1u8..=255u8,
        ];
        prop::collection::vec(byte, 0..12)
    }

    fn check(kind: ShellKind, shell: &str, snap: &Path, payload: &[u8], args: &[Vec<u8>]) {
        // The payload is quoted once into the script, and the script again into the wrapper.
        let mut script = b"x=".to_vec();
        script.extend_from_slice(&quoted(payload));
        script.extend_from_slice(b"; printf '%s\\0' \"$x\" \"$0\" \"$@\"");
        let mut argv = vec![
            OsString::from(shell),
            "-lc".into(),
            OsString::from_vec(script),
        ];
        argv.extend(args.iter().cloned().map(OsString::from_vec));
        let rw = RewriteOptions::new(SnapshotRef {
            path: snap.to_path_buf(),
            kind,
        });
        let out = Command::new(shell)
            .args(&rewrite_argv(&argv, &rw)[1..])
            .env("HOME", snap.parent().unwrap())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let mut want = payload.to_vec();
        want.push(0);
        match args.first() {
            Some(zero) => want.extend_from_slice(zero),
            None => want.extend_from_slice(shell.as_bytes()),
        }
        want.push(0);
        for a in args.iter().skip(1) {
            want.extend_from_slice(a);
            want.push(0);
        }
        assert_eq!(
            out.stdout,
            want,
            "{shell}: stderr {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn snapshot_quoting_round_trips_bytes(
            payload in arg(),
            args in prop::collection::vec(arg(), 0..4),
        ) {
            let home = TempDir::new().unwrap();
            let snap = home.path().join("s.1.sh");
            fs::write(&snap, format!("{MARKER_LINE}\n")).unwrap();
            for (shell, kind) in [
                ("/bin/bash", ShellKind::Bash),
                ("/usr/bin/zsh", ShellKind::Zsh),
                ("/usr/bin/dash", ShellKind::Sh),
            ] {
                check(kind, shell, &snap, &payload, &args);
            }
        }
    }
}

#[test]
fn snapshot_unsupported_argv_is_untouched() {
    let rw = RewriteOptions::new(SnapshotRef {
        path: "/x/s.1.sh".into(),
        kind: ShellKind::Zsh,
    });
    let argv = vec![OsString::from("/bin/bash"), "-lc".into(), "true".into()];
    assert_eq!(rewrite_argv(&argv, &rw), argv);
}

#[test]
fn snapshot_markers_win_over_env_file_without_env_dir() {
    for shell in ["/bin/bash", "/usr/bin/zsh", "/usr/bin/dash"] {
        let fx = Fixture::new();
        let snap = fx.snapshot(shell).unwrap();
        let file = fx.snaps.path().join("extra.sh");
        fs::write(
            &file,
            "export CORDON_SANDBOX=0 CORDON_SANDBOX_NETWORK_DISABLED=0 X=from-file\n",
        )
        .unwrap();
        let rw = RewriteOptions::new(snap.to_ref());
        let script = "printf '%s|' \"${CORDON_SANDBOX-unset}\" \
                      \"${CORDON_SANDBOX_NETWORK_DISABLED-unset}\" \"${X-unset}\" \
                      \"${__cordon_s0-clean}${__cordon_v1-}${__cordon_f-}\"";
        let argv = rewrite_argv(&os(&[shell, "-lc", script]), &rw);
        let file = file.to_str().unwrap();
        let out = fx.run_fds(
            &argv,
            Some(snap.content()),
            None,
            &[
                ("CORDON_ENV_FILE", Some(file)),
                ("CORDON_SANDBOX", Some("1")),
                ("CORDON_SANDBOX_NETWORK_DISABLED", None),
            ],
        );
        assert_eq!(stdout(&out), "1|unset|from-file|clean|", "{shell}");
        // Without an env file nothing touches them.
        let out = fx.run_fds(
            &argv,
            Some(snap.content()),
            None,
            &[("CORDON_ENV_FILE", None), ("CORDON_SANDBOX", Some("1"))],
        );
        assert_eq!(stdout(&out), "1|unset|unset|clean|", "{shell}");
    }
}
