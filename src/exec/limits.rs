//! Resource limits for one command: memory, processes, CPU time and file size.
//!
//! Where the caller may create a cgroup (root, or a delegated subtree), the command runs in a
//! new child of the caller's own cgroup, which bounds memory and the number of processes for
//! the command and everything it starts *together*, and reports when a bound was hit; the
//! cgroup is killed and removed when the run ends. cgroup v2 is preferred; on a hybrid host
//! whose memory and pids controllers sit on v1 hierarchies those are used. Otherwise, and for
//! CPU time and file size always, `setrlimit` bounds each process of the command separately.
//! [`LimitReceipt`] says which mechanism enforced each limit and what that covers. A limit no
//! mechanism can enforce here is refused: the request is rejected and nothing runs.
//!
//! ```
//! use cordon::exec::limits::Limits;
//! let limits: Limits = serde_json::from_str(r#"{"memory":"512M","processes":64,"cpu_time":"10m"}"#).unwrap();
//! assert_eq!(limits.memory, Some(512 << 20));
//! assert_eq!(limits.cpu_time, Some(600));
//! ```

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Deserializer, Serialize};

/// The bounds a command runs under; `None` leaves a resource as the caller's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Memory in bytes (`"2G"`, `"512M"` or a number).
    #[serde(default, deserialize_with = "bytes_value")]
    pub memory: Option<u64>,
    /// Processes (and threads) at once.
    #[serde(default)]
    pub processes: Option<u64>,
    /// CPU time in seconds (`"10m"`, `"30s"` or a number of seconds).
    #[serde(default, deserialize_with = "seconds_value")]
    pub cpu_time: Option<u64>,
    /// The largest file the command may write, in bytes.
    #[serde(default, deserialize_with = "bytes_value")]
    pub file_size: Option<u64>,
}

/// Which resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Memory.
    Memory,
    /// The number of processes.
    Processes,
    /// CPU time.
    CpuTime,
    /// File size.
    FileSize,
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LimitKind::Memory => "memory",
            LimitKind::Processes => "processes",
            LimitKind::CpuTime => "cpu_time",
            LimitKind::FileSize => "file_size",
        })
    }
}

/// How a limit was enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// A cgroup v2 child of the caller's cgroup.
    CgroupV2,
    /// A child cgroup on the controller's v1 hierarchy.
    CgroupV1,
    /// `setrlimit` on each process.
    Rlimit,
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mechanism::CgroupV2 => "cgroup v2",
            Mechanism::CgroupV1 => "cgroup v1",
            Mechanism::Rlimit => "rlimit",
        })
    }
}

/// One limit as enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitReceipt {
    /// Which resource.
    pub limit: LimitKind,
    /// The bound (bytes, processes or seconds).
    pub value: u64,
    /// What enforced it.
    pub mechanism: Mechanism,
    /// What it covers, and what happens when it is hit.
    pub scope: String,
}

/// Why limits could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// A limit of zero would stop the command before it starts.
    #[error("the {0} limit must be above zero")]
    Zero(LimitKind),
    /// No mechanism can enforce the limit here.
    #[error("cannot enforce the {limit} limit: {reason}")]
    Unenforceable {
        /// Which.
        limit: LimitKind,
        /// Why.
        reason: String,
    },
    /// A text value did not parse.
    #[error("{0}")]
    Parse(String),
}

impl Limits {
    /// True when nothing is bounded.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// `self`, with each limit `other` sets lowered to it (never raised): a request may ask
    /// for less than the server allows, not more.
    pub fn tightened_by(&self, other: Option<&Limits>) -> Result<Limits, LimitError> {
        let Some(other) = other else {
            return Ok(*self);
        };
        let min = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let limits = Limits {
            memory: min(self.memory, other.memory),
            processes: min(self.processes, other.processes),
            cpu_time: min(self.cpu_time, other.cpu_time),
            file_size: min(self.file_size, other.file_size),
        };
        limits.check()?;
        Ok(limits)
    }

    /// Rejects zero limits.
    pub fn check(&self) -> Result<(), LimitError> {
        for (kind, value) in [
            (LimitKind::Memory, self.memory),
            (LimitKind::Processes, self.processes),
            (LimitKind::CpuTime, self.cpu_time),
            (LimitKind::FileSize, self.file_size),
        ] {
            if value == Some(0) {
                return Err(LimitError::Zero(kind));
            }
        }
        Ok(())
    }
}

/// Parses `1048576`, `64K`, `512M`, `2G`, `1T` (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, LimitError> {
    let upper = text.trim().to_ascii_uppercase();
    let trimmed = upper.trim_end_matches("IB").trim_end_matches('B');
    let (digits, shift) = match trimmed.chars().last() {
        Some('K') => (&trimmed[..trimmed.len() - 1], 10),
        Some('M') => (&trimmed[..trimmed.len() - 1], 20),
        Some('G') => (&trimmed[..trimmed.len() - 1], 30),
        Some('T') => (&trimmed[..trimmed.len() - 1], 40),
        _ => (trimmed, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| LimitError::Parse(format!("{text:?} is not a size like 512M or 2G")))
}

/// Parses `30s`, `10m`, `2h` or a number of seconds, to whole seconds (at least 1).
pub fn parse_seconds(text: &str) -> Result<u64, LimitError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let bad = || LimitError::Parse(format!("{text:?} is not a CPU time like 30s, 10m or 2h"));
    let value: u64 = number.parse().map_err(|_| bad())?;
    let factor = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(bad()),
    };
    value.checked_mul(factor).filter(|&v| v > 0).ok_or_else(bad)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(u64),
    Text(String),
}

fn bytes_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<NumberOrText>::deserialize(d)? {
        None => Ok(None),
        Some(NumberOrText::Number(n)) => Ok(Some(n)),
        Some(NumberOrText::Text(t)) => parse_size(&t).map(Some).map_err(serde::de::Error::custom),
    }
}

fn seconds_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<NumberOrText>::deserialize(d)? {
        None => Ok(None),
        Some(NumberOrText::Number(n)) => Ok(Some(n)),
        Some(NumberOrText::Text(t)) => parse_seconds(&t)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// A cgroup made for one run: its directory, the descriptor the child writes itself into,
/// and how to read what was hit.
#[derive(Debug)]
pub(crate) struct RunCgroup {
    dirs: Vec<(Mechanism, &'static str, PathBuf)>,
    /// `cgroup.procs` of each directory, opened before the fork.
    procs: Vec<File>,
}

/// How a run is bounded: the cgroup (if any), the rlimits to set in the child, the receipts.
#[derive(Debug, Default)]
pub(crate) struct LimitPlan {
    pub cgroup: Option<RunCgroup>,
    pub rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    pub receipts: Vec<LimitReceipt>,
}

static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Where a controller lives for this process: `(mechanism, the caller's cgroup directory)`.
fn controller_home(controller: &str) -> Option<(Mechanism, PathBuf)> {
    let cgroups = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    // mountinfo: ... mount_point ... - fstype source super_options
    let mounts: Vec<(String, String, String)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mount_point = left.split(' ').nth(4)?.to_owned();
            let mut right = right.split(' ');
            let fstype = right.next()?.to_owned();
            let options = right.nth(1).unwrap_or("").to_owned();
            Some((mount_point, fstype, options))
        })
        .collect();
    // cgroup v2: the unified hierarchy, when the controller is available in our cgroup.
    if let Some(path) = cgroups.lines().find_map(|l| l.strip_prefix("0::")) {
        for (mount, fstype, _) in &mounts {
            if fstype != "cgroup2" {
                continue;
            }
            let dir = Path::new(mount).join(path.trim_start_matches('/'));
            let available = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
            if available.split_whitespace().any(|c| c == controller) {
                return Some((Mechanism::CgroupV2, dir));
            }
        }
    }
    // cgroup v1: the hierarchy that has this controller.
    let path = cgroups.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    })?;
    mounts.iter().find_map(|(mount, fstype, options)| {
        (fstype == "cgroup" && options.split(',').any(|o| o == controller)).then(|| {
            (
                Mechanism::CgroupV1,
                Path::new(mount).join(path.trim_start_matches('/')),
            )
        })
    })
}

/// A new child cgroup under `parent` for one run, with `settings` written in it.
fn make_child(
    mechanism: Mechanism,
    parent: &Path,
    controller: &str,
    settings: &[(&str, String)],
) -> Result<PathBuf, String> {
    if mechanism == Mechanism::CgroupV2 {
        let enabled = fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
        if !enabled.split_whitespace().any(|c| c == controller) {
            fs::write(
                parent.join("cgroup.subtree_control"),
                format!("+{controller}"),
            )
            .map_err(|e| {
                format!(
                    "cannot enable the {controller} controller below {}: {e}",
                    parent.display()
                )
            })?;
        }
    }
    let name = format!(
        "cordon-{}-{}",
        std::process::id(),
        RUN_COUNTER.fetch_add(1, Ordering::SeqCst)
    );
    let dir = parent.join(name);
    fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (file, value) in settings {
        if let Err(e) = fs::write(dir.join(file), value) {
            let _ = fs::remove_dir(&dir);
            return Err(format!("cannot write {} in {}: {e}", file, dir.display()));
        }
    }
    Ok(dir)
}

impl LimitPlan {
    /// Decides how to enforce `limits` and creates the cgroups now. Nothing is enforced until
    /// the child writes itself into them ([`RunCgroup::join_in_child`]) and sets the rlimits.
    pub(crate) fn new(limits: &Limits) -> Result<LimitPlan, LimitError> {
        limits.check()?;
        let mut plan = LimitPlan::default();
        let mut dirs = Vec::new();
        let mut refusals: Vec<(LimitKind, String)> = Vec::new();
        if let Some(bytes) = limits.memory {
            let made = controller_home("memory")
                .ok_or_else(|| "no memory controller is mounted for this process".to_owned())
                .and_then(|(mechanism, parent)| {
                    let settings: Vec<(&str, String)> = match mechanism {
                        // No swap either: a limit the command can spill past is no limit.
                        Mechanism::CgroupV2 => vec![
                            ("memory.max", bytes.to_string()),
                            ("memory.swap.max", "0".into()),
                        ],
                        _ => vec![("memory.limit_in_bytes", bytes.to_string())],
                    };
                    make_child(mechanism, &parent, "memory", &settings).map(|dir| (mechanism, dir))
                });
            match made {
                Ok((mechanism, dir)) => {
                    if mechanism == Mechanism::CgroupV1 {
                        // Only where swap accounting exists; without it there is no swap limit to set.
                        let _ =
                            fs::write(dir.join("memory.memsw.limit_in_bytes"), bytes.to_string());
                    }
                    plan.receipts.push(LimitReceipt {
                        limit: LimitKind::Memory,
                        value: bytes,
                        mechanism,
                        scope: "all processes of the command together; the kernel kills the command when it is exceeded (outcome limit_exceeded)".into(),
                    });
                    dirs.push((mechanism, "memory", dir));
                }
                Err(reason) => {
                    tracing::info!("limits: memory by rlimit: {reason}");
                    plan.rlimits.push((libc::RLIMIT_AS, bytes));
                    plan.receipts.push(LimitReceipt {
                        limit: LimitKind::Memory,
                        value: bytes,
                        mechanism: Mechanism::Rlimit,
                        scope: format!("address space of each process separately (no cgroup: {reason}); an allocation past it fails with ENOMEM, which cordon cannot tell from the command's own failure"),
                    });
                }
            }
        }
        if let Some(count) = limits.processes {
            let made = controller_home("pids")
                .ok_or_else(|| "no pids controller is mounted for this process".to_owned())
                .and_then(|(mechanism, parent)| {
                    make_child(
                        mechanism,
                        &parent,
                        "pids",
                        &[("pids.max", count.to_string())],
                    )
                    .map(|dir| (mechanism, dir))
                });
            match made {
                Ok((mechanism, dir)) => {
                    plan.receipts.push(LimitReceipt {
                        limit: LimitKind::Processes,
                        value: count,
                        mechanism,
                        scope: "processes and threads of the command together; fork fails with EAGAIN past it (outcome limit_exceeded when the command then fails)".into(),
                    });
                    dirs.push((mechanism, "pids", dir));
                }
                // SAFETY: geteuid has no preconditions.
                Err(reason) if unsafe { libc::geteuid() } == 0 => refusals.push((
                    LimitKind::Processes,
                    format!("{reason}, and RLIMIT_NPROC does not bind root"),
                )),
                Err(reason) => {
                    plan.rlimits.push((libc::RLIMIT_NPROC, count));
                    plan.receipts.push(LimitReceipt {
                        limit: LimitKind::Processes,
                        value: count,
                        mechanism: Mechanism::Rlimit,
                        scope: format!("RLIMIT_NPROC (no cgroup: {reason}): counted per user, inside the sandbox's own user namespace when it has one, else across all of the user's processes"),
                    });
                }
            }
        }
        if let Some(seconds) = limits.cpu_time {
            plan.rlimits.push((libc::RLIMIT_CPU, seconds));
            plan.receipts.push(LimitReceipt {
                limit: LimitKind::CpuTime,
                value: seconds,
                mechanism: Mechanism::Rlimit,
                scope: "CPU seconds of each process separately; SIGXCPU past it (outcome limit_exceeded)".into(),
            });
        }
        if let Some(bytes) = limits.file_size {
            plan.rlimits.push((libc::RLIMIT_FSIZE, bytes));
            plan.receipts.push(LimitReceipt {
                limit: LimitKind::FileSize,
                value: bytes,
                mechanism: Mechanism::Rlimit,
                scope: "each file a process writes; SIGXFSZ past it (outcome limit_exceeded)"
                    .into(),
            });
        }
        let mut procs = Vec::new();
        for (mechanism, _, dir) in &dirs {
            // Both versions take a process (all its threads) by writing its pid here.
            let file = "cgroup.procs";
            let _ = mechanism;
            match OpenOptions::new().write(true).open(dir.join(file)) {
                Ok(f) => procs.push(f),
                Err(e) => {
                    // Dropping it removes the directories made so far.
                    drop(RunCgroup {
                        dirs: dirs.clone(),
                        procs: Vec::new(),
                    });
                    return Err(LimitError::Unenforceable {
                        limit: LimitKind::Memory,
                        reason: format!("cannot open {}: {e}", dir.join(file).display()),
                    });
                }
            }
        }
        if !dirs.is_empty() {
            plan.cgroup = Some(RunCgroup { dirs, procs });
        }
        if let Some((limit, reason)) = refusals.into_iter().next() {
            // Dropping the cgroup removes it.
            plan.cgroup = None;
            return Err(LimitError::Unenforceable { limit, reason });
        }
        Ok(plan)
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

impl RunCgroup {
    /// The raw descriptors the child writes `0` into (itself) before it execs.
    pub(crate) fn procs_fds(&self) -> Vec<i32> {
        self.procs.iter().map(|f| f.as_raw_fd()).collect()
    }

    /// Which limit the run hit, from the kernel's own counters.
    pub(crate) fn exceeded(&self) -> Option<LimitKind> {
        for (mechanism, controller, dir) in &self.dirs {
            let hit = match (*controller, mechanism) {
                ("memory", Mechanism::CgroupV2) => counter(&dir.join("memory.events"), "oom_kill"),
                ("memory", _) => counter(&dir.join("memory.oom_control"), "oom_kill"),
                ("pids", _) => counter(&dir.join("pids.events"), "max"),
                _ => 0,
            };
            if hit > 0 {
                return Some(if *controller == "memory" {
                    LimitKind::Memory
                } else {
                    LimitKind::Processes
                });
            }
        }
        None
    }

    /// Kills whatever is still in the cgroups (a descendant that left the process group
    /// included) and removes them.
    pub(crate) fn remove(&self) {
        for (mechanism, _, dir) in &self.dirs {
            if *mechanism == Mechanism::CgroupV2 && fs::write(dir.join("cgroup.kill"), "1").is_ok()
            {
                continue;
            }
            kill_members(dir);
        }
        let dirs: Vec<PathBuf> = self.dirs.iter().map(|(_, _, d)| d.clone()).collect();
        if try_remove(&dirs) {
            return;
        }
        // Killed processes take a moment to leave; removal must not hold up the caller.
        std::thread::spawn(move || {
            for _ in 0..50 {
                for dir in &dirs {
                    kill_members(dir);
                }
                if try_remove(&dirs) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            tracing::info!("limits: cgroups {dirs:?} could not be removed");
        });
    }
}

fn try_remove(dirs: &[PathBuf]) -> bool {
    dirs.iter()
        .all(|d| matches!(fs::remove_dir(d), Ok(())) || !d.exists())
}

fn kill_members(dir: &Path) {
    let members = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in members
        .lines()
        .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
    {
        if pid > 1 {
            // SAFETY: kill only sends a signal, to a process listed in the run's own cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

fn counter(file: &Path, key: &str) -> u64 {
    fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

/// In the forked child before exec: joins the run's cgroups and sets the rlimits. Only
/// async-signal-safe calls (write, setrlimit); allocates nothing.
pub(crate) fn apply_in_child(
    procs: &[i32],
    rlimits: &[(libc::__rlimit_resource_t, u64)],
) -> io::Result<()> {
    for &fd in procs {
        // SAFETY: writes two bytes from a static buffer to a descriptor open in this process.
        if unsafe { libc::write(fd, b"0\n".as_ptr().cast(), 2) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    for &(resource, value) in rlimits {
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit struct to a live local.
        if unsafe { libc::getrlimit(resource, &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The hard limit a little above the soft one for CPU time: SIGXCPU first, which a
        // command may catch to save its work, then SIGKILL. Never above a stricter limit the
        // caller already has.
        let hard = if resource == libc::RLIMIT_CPU {
            value.saturating_add(1)
        } else {
            value
        };
        let limit = libc::rlimit {
            rlim_cur: value.min(old.rlim_max),
            rlim_max: hard.min(old.rlim_max),
        };
        // SAFETY: setrlimit reads one rlimit struct from a live local.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_parse_and_nonsense_does_not() {
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        for bad in ["", "0", "-1", "2X", "G", "99999999999999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_seconds("90").unwrap(), 90);
        assert_eq!(parse_seconds("10m").unwrap(), 600);
        assert_eq!(parse_seconds("2h").unwrap(), 7200);
        for bad in ["", "0s", "1.5m", "10ms", "m"] {
            assert!(parse_seconds(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_request_may_only_lower_the_limits_it_is_given() {
        let server = Limits {
            memory: Some(1 << 30),
            processes: Some(64),
            ..Limits::default()
        };
        let asked: Limits =
            serde_json::from_str(r#"{"memory":"4G","processes":8,"file_size":"1M"}"#).unwrap();
        let applied = server.tightened_by(Some(&asked)).unwrap();
        assert_eq!(
            applied,
            Limits {
                memory: Some(1 << 30),
                processes: Some(8),
                cpu_time: None,
                file_size: Some(1 << 20),
            }
        );
        assert_eq!(server.tightened_by(None).unwrap(), server);
        let zero = Limits {
            processes: Some(0),
            ..Limits::default()
        };
        assert!(matches!(
            server.tightened_by(Some(&zero)),
            Err(LimitError::Zero(LimitKind::Processes))
        ));
        assert!(serde_json::from_str::<Limits>(r#"{"memroy":"1G"}"#).is_err());
    }
}
