//! The degradation matrix: every preset and a user profile, under every Landlock ABI cap 0..7
//! and with and without user namespaces, either enforces, refuses with 125 having run nothing,
//! or runs and reports exactly what it did not enforce. The expected outcome of each cell is
//! derived from the tables below (what each ABI adds, what each profile asks for, what stops
//! each probe), never from the code under test; each probe's effect is checked from outside.
//!
//! "No user namespaces" is the real condition ([`common::without_userns`]); the ABI cap is the
//! helper's `CORDON_LANDLOCK_ABI_MAX` knob, which can only lower confinement.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::Value;

use common::Tree;

/// What one Landlock ABI level adds, in the order the receipt lists what is missing below it.
/// A restriction is lost (and so a downgrade) whenever the ABI in use is below `since`.
const LANDLOCK_LEVELS: [Level; 6] = [
    // ABI 1 is Landlock itself: without it no filesystem rule exists at all.
    Level {
        restriction: "landlock_filesystem",
        since: 1,
        asked_by: Asks::Always,
    },
    // LANDLOCK_ACCESS_FS_TRUNCATE arrived in ABI 3; below it truncate(2) on a readable file
    // outside the writable roots is not checked.
    Level {
        restriction: "landlock_truncate",
        since: 3,
        asked_by: Asks::Always,
    },
    // TCP bind/connect rules arrived in ABI 4; only a profile that lists ports asks for them.
    Level {
        restriction: "landlock_tcp_ports",
        since: 4,
        asked_by: Asks::PortLists,
    },
    // LANDLOCK_ACCESS_FS_IOCTL_DEV arrived in ABI 5.
    Level {
        restriction: "landlock_ioctl_dev",
        since: 5,
        asked_by: Asks::Always,
    },
    // Signal scoping arrived in ABI 6; every sandboxed profile asks for it.
    Level {
        restriction: "landlock_scope_signal",
        since: 6,
        asked_by: Asks::Always,
    },
    // Abstract unix socket scoping arrived with it; asked for only when unix sockets are denied
    // (every profile here keeps the default `unix_sockets = "deny"`).
    Level {
        restriction: "landlock_scope_abstract_unix",
        since: 6,
        asked_by: Asks::UnixDenied,
    },
];

struct Level {
    restriction: &'static str,
    since: u32,
    asked_by: Asks,
}

enum Asks {
    Always,
    PortLists,
    UnixDenied,
}

/// What to do with something that cannot be enforced (`enforcement` in a profile).
#[derive(Clone, Copy, PartialEq)]
enum On {
    Refuse,
    Report,
}

#[derive(Clone, Copy, PartialEq)]
enum Net {
    /// `network.mode = "denied"`: seccomp refuses inet sockets.
    Denied,
    /// `network.mode = "enabled"` with `tcp_connect` listing only the allowed listener's port.
    Ports,
    /// `network.mode = "loopback"`: a private network namespace, which needs user namespaces.
    Loopback,
}

/// One profile of the matrix.
struct Profile {
    name: &'static str,
    /// `-p` takes a preset name, or this text written to a profile file (`PORT` replaced by
    /// the allowed listener's port).
    file: Option<&'static str>,
    extra_args: &'static [&'static str],
    /// `None`: full access, no sandbox at all.
    sandbox: Option<Sandboxed>,
}

#[derive(Clone, Copy)]
struct Sandboxed {
    /// `enforcement.missing_layer`: a Landlock level the kernel (or the cap) lacks.
    missing_layer: On,
    /// `enforcement.carve_outs`: `read_only`/`deny_read`, which need the mount layer.
    carve_outs: On,
    writes_cwd: bool,
    net: Net,
    /// Whether the resolved policy must hide `~/.ssh` (checked, so the secret probe below
    /// cannot pass by the profile never asking).
    must_hide_ssh: bool,
}

/// A user profile as the issue describes it: the default plus a hidden `~/.ssh` and a TCP
/// port list, so that the port rules are in play.
macro_rules! user_profile {
    () => {
        "extends = \"workspace-write\"\n[filesystem]\ndeny_read = [\"~/.ssh\"]\n[network]\ntcp_connect = [PORT]\n"
    };
}
const USER_PROFILE: &str = user_profile!();

const PROFILES: [Profile; 8] = [
    // Read and execute everything, write nothing: strict, so any missing level refuses.
    Profile {
        name: "read-only",
        file: None,
        extra_args: &[],
        sandbox: Some(Sandboxed {
            missing_layer: On::Refuse,
            carve_outs: On::Refuse,
            writes_cwd: false,
            net: Net::Denied,
            must_hide_ssh: false,
        }),
    },
    // The default: missing Landlock levels refuse, its own carve-outs (`.git`, ...) are
    // reported without the mount layer so that it stays usable there.
    Profile {
        name: "workspace-write",
        file: None,
        extra_args: &[],
        sandbox: Some(Sandboxed {
            missing_layer: On::Refuse,
            carve_outs: On::Report,
            writes_cwd: true,
            net: Net::Denied,
            must_hide_ssh: false,
        }),
    },
    // No sandbox: every cell runs, unconfined, and says so.
    Profile {
        name: "full-access",
        file: None,
        extra_args: &[],
        sandbox: None,
    },
    // Extends the default, so it inherits its enforcement for the preset's own carve-outs:
    // missing levels refuse (ports included, below ABI 4); the hidden `~/.ssh` it writes
    // itself is enforced or refused whatever the preset says.
    Profile {
        name: "user",
        file: Some(USER_PROFILE),
        extra_args: &["--network", "enabled"],
        sandbox: Some(Sandboxed {
            missing_layer: On::Refuse,
            carve_outs: On::Report,
            writes_cwd: true,
            net: Net::Ports,
            must_hide_ssh: true,
        }),
    },
    // The same with `enforcement = "report"`: every cell runs, and the receipt lists every
    // level the ABI lacks (a refusal names only the first), with the probes showing each loss.
    Profile {
        name: "user-report",
        file: Some(concat!("enforcement = \"report\"\n", user_profile!())),
        extra_args: &["--network", "enabled"],
        sandbox: Some(Sandboxed {
            missing_layer: On::Report,
            carve_outs: On::Report,
            writes_cwd: true,
            net: Net::Ports,
            must_hide_ssh: true,
        }),
    },
    // The same with `enforcement = "refuse"`: without user namespaces its carve-outs refuse.
    Profile {
        name: "user-refuse",
        file: Some(concat!("enforcement = \"refuse\"\n", user_profile!())),
        extra_args: &["--network", "enabled"],
        sandbox: Some(Sandboxed {
            missing_layer: On::Refuse,
            carve_outs: On::Refuse,
            writes_cwd: true,
            net: Net::Ports,
            must_hide_ssh: true,
        }),
    },
    // The default with a private loopback network: without user namespaces there is no network
    // namespace, a missing layer, which the default refuses.
    Profile {
        name: "loopback",
        // The preset itself, as a file (its name is not a preset).
        file: Some("extends = \"workspace-write\"\n"),
        extra_args: &["--network", "loopback"],
        sandbox: Some(Sandboxed {
            missing_layer: On::Refuse,
            carve_outs: On::Report,
            writes_cwd: true,
            net: Net::Loopback,
            must_hide_ssh: false,
        }),
    },
    // The same under `report`: without user namespaces it runs with the network denied.
    Profile {
        name: "loopback-report",
        file: Some("enforcement = \"report\"\nextends = \"workspace-write\"\n"),
        extra_args: &["--network", "loopback"],
        sandbox: Some(Sandboxed {
            missing_layer: On::Report,
            carve_outs: On::Report,
            writes_cwd: true,
            net: Net::Loopback,
            must_hide_ssh: false,
        }),
    },
];

/// What can stop a probe's operation; the first one in force in a cell decides the result.
#[derive(Clone, Copy)]
enum Guard {
    /// The namespace layer (present exactly when user namespaces are): everything outside the
    /// writable roots and every carve-out read-only at the mount level, hidden paths empty, a
    /// private pid namespace.
    Namespaces(&'static str),
    /// Landlock, from the level of [`LANDLOCK_LEVELS`] that adds this restriction.
    Landlock(&'static str, &'static str),
    /// The seccomp filter, in force in every sandboxed cell whatever the ABI.
    Seccomp(&'static str),
    /// Landlock ABI 1 exactly: it cannot grant LANDLOCK_ACCESS_FS_REFER (ABI 2), so moving or
    /// linking a file into another directory fails even inside a writable root. A loss of
    /// function, not of confinement, so the receipt lists no downgrade for it.
    Abi1Reparenting(&'static str),
}

/// The probes, run in one python process per cell; each is observable from outside.
const PROBES: [&str; 10] = [
    // The harmless counterpart: a new file in the working directory (absent after a refusal).
    "marker",
    // A new file outside every root.
    "outside_write",
    // truncate(2) of a readable file outside every root: the ABI 3 right.
    "outside_truncate",
    // Appending to `.git/config` inside the writable working directory: a carve-out.
    "git_config",
    // Reading `~/.ssh/id_test`: hidden by `deny_read`.
    "secret",
    // A TCP connection to an outside listener the port list allows.
    "tcp_allowed",
    // A TCP connection to an outside listener the port list does not allow: the ABI 4 rule.
    "tcp_blocked",
    // SIGUSR1 to an outside process of the same user: the ABI 6 scope.
    "signal",
    // Moving `a/f` to `b/f` inside the working directory: must work wherever it is writable.
    "move_between_dirs",
    // Reading the outside process's command line: unmediated without a private /proc.
    "proc_cmdline",
];

/// What stops `probe` under `profile`, given the resolved policy's hidden paths.
fn guards(probe: &str, profile: &Sandboxed, ssh_hidden: bool) -> Vec<Guard> {
    use Guard::*;
    let outside_roots = vec![
        Namespaces("EROFS"),
        Landlock("landlock_filesystem", "EACCES"),
    ];
    match probe {
        "marker" if profile.writes_cwd => vec![],
        "marker" | "outside_write" => outside_roots,
        "outside_truncate" => vec![Namespaces("EROFS"), Landlock("landlock_truncate", "EACCES")],
        // Writable, except that the namespace layer binds the carve-out read-only.
        "git_config" if profile.writes_cwd => vec![Namespaces("EROFS")],
        "git_config" => outside_roots,
        // A mount hides it; without one, Landlock grants `/` around it (siblings along the
        // path), so its contents stay unreadable though its name is listed.
        "secret" if ssh_hidden => vec![
            Namespaces("ENOENT"),
            Landlock("landlock_filesystem", "EACCES"),
        ],
        "secret" => vec![],
        "tcp_allowed" | "tcp_blocked" if profile.net == Net::Denied => vec![Seccomp("EPERM")],
        // Inside the private network nothing listens on the outside listener's port; without
        // the namespace the policy falls back to a denied network.
        "tcp_allowed" | "tcp_blocked" if profile.net == Net::Loopback => {
            vec![Namespaces("ECONNREFUSED"), Seccomp("EPERM")]
        }
        "tcp_allowed" => vec![],
        "tcp_blocked" => vec![Landlock("landlock_tcp_ports", "EACCES")],
        // The outside process is not in the pid namespace; without one, only the scope stops it.
        "signal" => vec![
            Namespaces("ESRCH"),
            Landlock("landlock_scope_signal", "EPERM"),
        ],
        "move_between_dirs" if profile.writes_cwd => vec![Abi1Reparenting("EXDEV")],
        "move_between_dirs" => outside_roots,
        // Not in the pid namespace's /proc; Landlock grants `/`, and /proc with it.
        "proc_cmdline" => vec![Namespaces("ENOENT")],
        _ => unreachable!("unknown probe {probe}"),
    }
}

/// The ABI that adds `restriction`.
fn since(restriction: &str) -> u32 {
    LANDLOCK_LEVELS
        .iter()
        .find(|level| level.restriction == restriction)
        .map(|level| level.since)
        .unwrap_or_else(|| panic!("{restriction} is not in LANDLOCK_LEVELS"))
}

/// A probe's result when nothing stops it.
fn unguarded(probe: &str) -> &'static str {
    match probe {
        "secret" => SECRET,
        _ => "OK",
    }
}

const SECRET: &str = "secret-key-material";
const GIT_CONFIG: &str = "[core]\n";
const VICTIM: &str = "outside content\n";

const PROBE_SCRIPT: &str = r#"
import json, signal
cwd, outside, home, allowed, blocked, pid = sys.argv[1:7]
def write(path, mode):
    def f():
        with open(path, mode) as out:
            out.write("planted\n")
    return f
def connect(port):
    def f():
        socket.create_connection(("127.0.0.1", int(port)), timeout=5).close()
    return f
def secret():
    try:
        with open(home + "/.ssh/id_test") as f:
            return f.read().strip()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({
    "marker": attempt(write(cwd + "/ran", "x")),
    "outside_write": attempt(write(outside + "/escape", "x")),
    "outside_truncate": attempt(lambda: os.truncate(outside + "/victim", 0)),
    "git_config": attempt(write(cwd + "/.git/config", "a")),
    "secret": secret(),
    "tcp_allowed": attempt(connect(allowed)),
    "tcp_blocked": attempt(connect(blocked)),
    "signal": attempt(lambda: os.kill(int(pid), signal.SIGUSR1)),
    "move_between_dirs": attempt(lambda: os.rename(cwd + "/a/f", cwd + "/b/f")),
    "proc_cmdline": attempt(lambda: open("/proc/" + pid + "/cmdline", "rb").read()),
    "sandbox_env": os.environ.get("CORDON_SANDBOX", "unset"),
    "network_env": os.environ.get("CORDON_SANDBOX_NETWORK_DISABLED", "unset"),
}))
"#;

/// One cell of the matrix.
#[derive(Clone, Copy)]
struct Cell {
    profile: &'static Profile,
    abi: u32,
    userns: bool,
}

impl Cell {
    fn label(&self) -> String {
        let ns = if self.userns { "userns" } else { "no-userns" };
        format!("{} abi={} {ns}", self.profile.name, self.abi)
    }
}

/// What a cell must show.
#[derive(Debug, PartialEq)]
enum Expected {
    /// No sandbox: the fixed `mode: none` record, every probe unconfined.
    Unsandboxed,
    /// Exit 125, step `enforcement`, naming this restriction; nothing ran.
    Refused(String),
    /// Ran, with exactly these downgrades and layers.
    Ran {
        downgrades: Vec<String>,
        layers: Vec<&'static str>,
    },
}

/// The outside world one cell's command may touch, so that each effect is seen from outside.
struct Fixture {
    tree: Tree,
    allowed: TcpListener,
    blocked: TcpListener,
    target: Child,
    profile_arg: String,
}

impl Fixture {
    fn new(profile: &Profile) -> Fixture {
        let tree = Tree::new();
        fs::create_dir_all(tree.cwd.join(".git/hooks")).unwrap();
        fs::write(tree.cwd.join(".git/config"), GIT_CONFIG).unwrap();
        fs::write(tree.cwd.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::create_dir(tree.home.join(".ssh")).unwrap();
        fs::write(tree.home.join(".ssh/id_test"), SECRET).unwrap();
        fs::write(tree.outside.join("victim"), VICTIM).unwrap();
        fs::create_dir(tree.cwd.join("a")).unwrap();
        fs::create_dir(tree.cwd.join("b")).unwrap();
        fs::write(tree.cwd.join("a/f"), "moved\n").unwrap();
        let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
        let blocked = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let profile_arg = match profile.file {
            None => profile.name.to_owned(),
            Some(text) => {
                let port = allowed.local_addr().unwrap().port().to_string();
                let path = tree.root.join(format!("{}.toml", profile.name));
                fs::write(&path, text.replace("PORT", &port)).unwrap();
                path.display().to_string()
            }
        };
        Fixture {
            tree,
            allowed,
            blocked,
            target,
            profile_arg,
        }
    }

    fn cordon_run(&self, profile: &Profile, extra: &[&str]) -> Command {
        let mut cmd = self.tree.cordon();
        cmd.args(["run", "-p", &self.profile_arg])
            .args(profile.extra_args)
            .args(extra);
        cmd
    }

    /// The resolved policy (`--print-policy`), which names the carve-outs the receipt reports.
    fn policy(&self, profile: &Profile) -> Value {
        let out = self
            .cordon_run(profile, &["--print-policy", "--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn port(listener: &TcpListener) -> String {
        listener.local_addr().unwrap().port().to_string()
    }

    /// What reached the outside, probe by probe, observed without asking the command.
    fn outside_effects(&mut self) -> BTreeMap<&'static str, bool> {
        let tree = &self.tree;
        let accepted = |l: &TcpListener| {
            l.set_nonblocking(true).unwrap();
            match l.accept() {
                Ok(_) => true,
                Err(e) if e.kind() == ErrorKind::WouldBlock => false,
                Err(e) => panic!("accept: {e}"),
            }
        };
        BTreeMap::from([
            ("marker", tree.cwd.join("ran").exists()),
            ("outside_write", tree.outside.join("escape").exists()),
            (
                "outside_truncate",
                fs::read_to_string(tree.outside.join("victim")).unwrap() != VICTIM,
            ),
            (
                "git_config",
                fs::read_to_string(tree.cwd.join(".git/config")).unwrap() != GIT_CONFIG,
            ),
            ("tcp_allowed", accepted(&self.allowed)),
            ("tcp_blocked", accepted(&self.blocked)),
            ("signal", died_of_sigusr1(&mut self.target)),
            ("move_between_dirs", tree.cwd.join("b/f").exists()),
        ])
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.target.kill();
        let _ = self.target.wait();
    }
}

/// True when the outside `sleep` was sent SIGUSR1. A fatal signal sets the process's exit
/// status when it is sent, so the SIGKILL that ends the fixture cannot mask it, and nothing has
/// to wait for the signal to be acted on.
fn died_of_sigusr1(child: &mut Child) -> bool {
    let _ = child.kill();
    child.wait().unwrap().signal() == Some(libc::SIGUSR1)
}

/// Paths of a policy list, as strings.
fn paths(policy: &Value, key: &str) -> Vec<String> {
    policy["filesystem"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no filesystem.{key} in {policy}"))
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect()
}

/// The outcome the tables predict for `cell`; `policy` supplies the carve-out paths.
fn expected(cell: &Cell, policy: &Value) -> Expected {
    let Some(profile) = &cell.profile.sandbox else {
        return Expected::Unsandboxed;
    };
    let mut lost: Vec<String> = LANDLOCK_LEVELS
        .iter()
        .filter(|level| cell.abi < level.since)
        .filter(|level| match level.asked_by {
            Asks::Always => true,
            Asks::PortLists => profile.net == Net::Ports,
            Asks::UnixDenied => true,
        })
        .map(|level| level.restriction.to_owned())
        .collect();
    // A missing layer like the Landlock levels, listed after them.
    if profile.net == Net::Loopback && !cell.userns {
        lost.push("network_loopback".to_owned());
    }
    // Without the mount layer each carve-out is a downgrade named by kind and path,
    // `read_only` ones first; a hidden path outside every writable root is not, as long as
    // Landlock is there to grant around it.
    let carve_outs: Vec<String> = if cell.userns {
        Vec::new()
    } else {
        let read_only = paths(policy, "read_only").into_iter();
        let write = paths(policy, "write");
        // The helper grants around a hidden path only when its directory has at most 64
        // entries (`/etc/shadow`, hidden as root, has ~140 siblings): the rest stay downgrades.
        let crowded = |p: &str| {
            std::path::Path::new(p)
                .parent()
                .and_then(|d| std::fs::read_dir(d).ok())
                .is_none_or(|entries| entries.count() > 64)
        };
        let hidden = paths(policy, "deny_read").into_iter().filter(|p| {
            let inside_write = write.iter().any(|w| std::path::Path::new(p).starts_with(w));
            cell.abi == 0 || inside_write || crowded(p)
        });
        read_only
            .map(|p| format!("read_only:{p}"))
            .chain(hidden.map(|p| format!("deny_read:{p}")))
            .collect()
    };
    if profile.missing_layer == On::Refuse {
        if let Some(first) = lost.first() {
            return Expected::Refused(first.clone());
        }
    }
    // A carve-out the profile itself wrote (`filesystem.required`, left empty by its own
    // `enforcement = "report"`) refuses whatever the preset's `carve_outs` says.
    let required: Vec<String> = policy["filesystem"]["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str())
        .map(|p| p.to_owned())
        .collect();
    if let Some(first) = carve_outs.iter().find(|c| {
        c.split_once(':')
            .is_some_and(|(_, p)| required.iter().any(|r| r == p))
    }) {
        return Expected::Refused(first.clone());
    }
    if profile.carve_outs == On::Refuse {
        if let Some(first) = carve_outs.first() {
            return Expected::Refused(first.clone());
        }
    }
    let mut layers = Vec::new();
    if cell.userns {
        // The network namespace comes after the ipc one, before the private /proc.
        let (before, after) = common::NAMESPACE_LAYERS.split_at(4);
        layers.extend(before);
        if profile.net == Net::Loopback {
            layers.push("net_namespace");
        }
        layers.extend(after);
    }
    layers.extend(["capabilities", "no_new_privs"]);
    if cell.abi >= 1 {
        layers.push("landlock_fs");
    }
    if cell.abi >= 4 && profile.net == Net::Ports {
        layers.push("landlock_net");
    }
    if cell.abi >= 6 {
        layers.push("landlock_scope");
    }
    layers.push("seccomp");
    Expected::Ran {
        downgrades: lost.into_iter().chain(carve_outs).collect(),
        layers,
    }
}

/// What each probe must print in a cell that ran.
fn expected_probes(cell: &Cell, ssh_hidden: bool) -> BTreeMap<&'static str, String> {
    PROBES
        .iter()
        .map(|&probe| {
            let result = match &cell.profile.sandbox {
                None => unguarded(probe),
                Some(profile) => guards(probe, profile, ssh_hidden)
                    .into_iter()
                    .find_map(|guard| match guard {
                        Guard::Namespaces(errno) => cell.userns.then_some(errno),
                        Guard::Landlock(restriction, errno) => {
                            (cell.abi >= since(restriction)).then_some(errno)
                        }
                        Guard::Seccomp(errno) => Some(errno),
                        Guard::Abi1Reparenting(errno) => (cell.abi == 1).then_some(errno),
                    })
                    .unwrap_or(unguarded(probe)),
            };
            (probe, result.to_owned())
        })
        .collect()
}

/// Runs one cell and returns every mismatch with what the tables predict.
fn check(cell: &Cell) -> Vec<String> {
    let profile = cell.profile;
    let mut fixture = Fixture::new(profile);
    let policy = fixture.policy(profile);
    let mut problems = Vec::new();
    let mut expect = |what: &str, got: String, want: String| {
        if got != want {
            problems.push(format!("{}: {what}: got {got}, want {want}", cell.label()));
        }
    };
    let home_ssh = fixture.tree.home.join(".ssh").display().to_string();
    let ssh_hidden = profile.sandbox.is_some() && paths(&policy, "deny_read").contains(&home_ssh);
    if profile.sandbox.is_some_and(|s| s.must_hide_ssh) && !ssh_hidden {
        expect("deny_read has ~/.ssh", "false".into(), "true".into());
    }
    if profile.sandbox.is_some_and(|s| s.writes_cwd) {
        let git = fixture.tree.cwd.join(".git").display().to_string();
        let protected = paths(&policy, "read_only").contains(&git);
        expect("read_only has .git", protected.to_string(), "true".into());
    }
    let want = expected(cell, &policy);

    let tree = &fixture.tree;
    let mut cmd = fixture.cordon_run(profile, &["--json", "--"]);
    cmd.arg(common::python())
        .arg("-c")
        .arg(format!("{}\n{PROBE_SCRIPT}", common::PROBE))
        .arg(&tree.cwd)
        .arg(&tree.outside)
        .arg(&tree.home)
        .arg(Fixture::port(&fixture.allowed))
        .arg(Fixture::port(&fixture.blocked))
        .arg(fixture.target.id().to_string())
        .env(ABI_KNOB, cell.abi.to_string());
    let cmd = if cell.userns {
        cmd
    } else {
        common::without_userns(&cmd)
    };
    let out = { cmd }.output().unwrap();
    let Ok(json) = serde_json::from_slice::<Value>(&out.stdout) else {
        return vec![format!(
            "{}: stdout is not one JSON object: {:?} (stderr {:?})",
            cell.label(),
            common::stdout(&out),
            common::stderr(&out)
        )];
    };
    let sandbox = &json["sandbox"];
    let restrictions: Vec<String> = sandbox["downgrades"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| d["restriction"].as_str().unwrap_or("<none>").to_owned())
                .collect()
        })
        .unwrap_or_default();
    let effects = fixture.outside_effects();
    let code = out.status.code();

    match &want {
        Expected::Refused(restriction) => {
            expect("exit", format!("{code:?}"), "Some(125)".into());
            expect(
                "outcome",
                json["outcome"].to_string(),
                "\"setup_error\"".into(),
            );
            expect(
                "step",
                json["error"]["step"].to_string(),
                "\"enforcement\"".into(),
            );
            let message = json["error"]["message"].as_str().unwrap_or_default();
            let names = format!("refusing to run: {restriction} cannot be enforced");
            expect(
                "message",
                message.starts_with(&names).to_string(),
                "true".into(),
            );
            // A carve-out refused for want of user namespaces names the setting to change.
            if !cell.userns && restriction.contains(':') {
                let hint = message.contains("user.max_user_namespaces");
                expect("hint", hint.to_string(), "true".into());
            }
            expect("downgrades", format!("{restrictions:?}"), "[]".into());
            expect("layers", sandbox["layers"].to_string(), "[]".into());
            expect("stdout", json["stdout"].to_string(), "\"\"".into());
            for (probe, reached) in &effects {
                expect(
                    &format!("{probe} reached outside"),
                    reached.to_string(),
                    "false".into(),
                );
            }
        }
        Expected::Unsandboxed => {
            let record = serde_json::json!({
                "mode": "none",
                "layers": [],
                "landlock_abi": 0,
                "downgrades": [{
                    "restriction": "sandbox",
                    "reason": "full-access profile: the command ran without any sandbox",
                }],
                "approximations": [],
                "unmediated": [],
            });
            expect("exit", format!("{code:?}"), "Some(0)".into());
            expect("sandbox", sandbox.to_string(), record.to_string());
        }
        Expected::Ran { downgrades, layers } => {
            expect("exit", format!("{code:?}"), "Some(0)".into());
            expect("outcome", json["outcome"].to_string(), "\"success\"".into());
            expect(
                "downgrades",
                format!("{restrictions:?}"),
                format!("{downgrades:?}"),
            );
            expect(
                "layers",
                sandbox["layers"].to_string(),
                serde_json::json!(layers).to_string(),
            );
            expect(
                "landlock_abi",
                sandbox["landlock_abi"].to_string(),
                cell.abi.to_string(),
            );
            // Only the namespace layer stops chmod, chown, utime and xattr changes, shows a
            // /proc of the sandbox's own processes and ends every descendant.
            let unmediated = sandbox["unmediated"].as_array().map_or(0, Vec::len);
            let want_unmediated = if cell.userns { 0 } else { 6 };
            expect(
                "unmediated",
                unmediated.to_string(),
                want_unmediated.to_string(),
            );
        }
    }
    if !matches!(want, Expected::Refused(_)) {
        let printed: Value =
            serde_json::from_str(json["stdout"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
        for (probe, result) in expected_probes(cell, ssh_hidden) {
            let got = printed[probe].as_str().unwrap_or("<missing>").to_owned();
            if let Some(&reached) = effects.get(probe) {
                // The outside view agrees with what the command saw.
                let want_reached = result == "OK";
                expect(
                    &format!("{probe} reached outside"),
                    reached.to_string(),
                    want_reached.to_string(),
                );
            }
            expect(probe, got, result);
        }
        let env = if profile.sandbox.is_some() {
            "1"
        } else {
            "unset"
        };
        expect(
            "CORDON_SANDBOX",
            printed["sandbox_env"].to_string(),
            format!("{env:?}"),
        );
        // A loopback network without its namespace is a denied one, and says so to the command.
        let network_denied = profile
            .sandbox
            .is_some_and(|s| s.net == Net::Denied || (s.net == Net::Loopback && !cell.userns));
        let env = if network_denied { "1" } else { "unset" };
        expect(
            "CORDON_SANDBOX_NETWORK_DISABLED",
            printed["network_env"].to_string(),
            format!("{env:?}"),
        );
    }
    problems
}

const ABI_KNOB: &str = "CORDON_LANDLOCK_ABI_MAX";

#[test]
fn every_profile_under_every_abi_cap_with_and_without_user_namespaces() {
    require_landlock!(7);
    require_userns!();
    let cells: Vec<Cell> = PROFILES
        .iter()
        .flat_map(|profile| {
            (0..=7).flat_map(move |abi| {
                [true, false].map(|userns| Cell {
                    profile,
                    abi,
                    userns,
                })
            })
        })
        .collect();
    let next = AtomicUsize::new(0);
    let problems = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                while let Some(cell) = cells.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let found = check(cell);
                    problems.lock().unwrap().extend(found);
                }
            });
        }
    });
    let problems = problems.into_inner().unwrap();
    assert!(
        problems.is_empty(),
        "{} mismatches in {} cells:\n{}",
        problems.len(),
        cells.len(),
        problems.join("\n")
    );
}

/// `read-only` is strict (`enforcement` refuses whatever is missing): with no Landlock at all it
/// refuses with 125 in plain mode too, in one line naming the missing restriction and the
/// fix, and runs nothing; the same command under the kernel's own ABI runs.
#[test]
fn read_only_without_landlock_refuses_and_runs_nothing() {
    require_landlock!(7);
    let tree = Tree::new();
    let marker = tree.outside.join("ran");
    let script = format!("echo ran > {}", marker.display());
    let run = |abi: &str| {
        tree.cordon()
            .args(["run", "-p", "read-only", "--", "sh", "-c", &script])
            .env(ABI_KNOB, abi)
            .output()
            .unwrap()
    };
    let out = run("0");
    assert_eq!(out.status.code(), Some(125), "{}", common::stderr(&out));
    assert_eq!(
        common::stderr(&out),
        "cordon: sandbox setup failed at step enforcement: refusing to run: landlock_filesystem \
         cannot be enforced (filesystem access is not restricted at all, nor /proc/PID/mem and \
         environ of the user's processes outside the sandbox: the kernel has no Landlock); set \
         enforcement to \"report\" to run without it\n"
    );
    assert_eq!(common::stdout(&out), "");
    assert!(!marker.exists(), "the command ran");
    // The harmless counterpart: the same command confined, whose write is denied, ran (the
    // shell's own message) and exits with the shell's code.
    let out = run("7");
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(!marker.exists());
    assert!(
        common::stderr(&out).contains(&format!("{}: ", marker.display())),
        "{}",
        common::stderr(&out)
    );
}

/// `full-access` never starts the helper, whatever the kernel offers: no receipt, the fixed
/// `mode: none` record, and one line on stderr saying so in plain mode.
#[test]
fn full_access_never_has_a_receipt() {
    let tree = Tree::new();
    for abi in ["0", "7"] {
        let out = tree
            .cordon()
            .args(["run", "-p", "full-access", "--", "sh", "-c"])
            .arg("echo ${CORDON_SANDBOX:-unset}")
            .env(ABI_KNOB, abi)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(common::stdout(&out), "unset\n");
        assert_eq!(
            common::stderr(&out).lines().next(),
            Some("cordon: full-access profile: running without any sandbox")
        );
    }
}
