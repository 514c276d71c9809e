//! What this machine lets cordon enforce: cheap probes of each kernel feature the helper uses,
//! and, for each preset, the helper's own answer (its receipt, or its refusal) for `true` run
//! under the preset's resolved policy. The CLI renders it (`cordon doctor`).
//!
//! ```no_run
//! # async fn demo() {
//! let cwd = std::env::current_dir().unwrap();
//! let features = cordon::doctor::probe_features();
//! let presets = cordon::doctor::check_presets(&cwd).await;
//! let diagnosis = cordon::doctor::Diagnosis::new(features, presets);
//! assert_eq!(diagnosis.default_preset, "workspace-write");
//! # }
//! ```

use std::path::Path;
use std::time::Duration;

use cordon_sandbox::landlock_rules;
use cordon_sandbox::namespaces::userns;
use cordon_sandbox::policy::{Enforcement, SandboxPolicy};
use cordon_sandbox::status::{Approximation, ConfinementReceipt, Downgrade, Layer, Step};
use serde::Serialize;

use crate::exec::{ExecRequest, Outcome, Sandbox, SetupStep};
use crate::profile::{PermissionProfile, Preset, ResolveContext};

/// How long the helper may take to confine `true`; far more than it ever needs.
const CHECK_TIMEOUT: Duration = Duration::from_secs(20);

/// One kernel feature and whether cordon can use it here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Feature {
    /// A stable identifier (`landlock`, `landlock_abi_4`, `user_namespace`, `proc_mount`, ...).
    pub name: String,
    /// Whether cordon can use it here.
    pub available: bool,
    /// What it gives, and what the probe found.
    pub detail: String,
    /// What would make it available, when it is not.
    pub hint: Option<String>,
}

/// What one Landlock ABI level adds, with the Linux release that brought it.
pub struct AbiLevel {
    /// The ABI number.
    pub abi: u32,
    /// The first Linux release with it.
    pub linux: &'static str,
    /// What cordon enforces with it, and so what is missing without it.
    pub adds: &'static str,
}

/// Every Landlock ABI level the helper knows, in order.
pub const LANDLOCK_ABI_LEVELS: [AbiLevel; 7] = [
    AbiLevel {
        abi: 1,
        linux: "5.13",
        adds: "filesystem allow-lists: read, write, execute, create and remove only beneath the profile's roots",
    },
    AbiLevel {
        abi: 2,
        linux: "5.19",
        adds: "renaming and linking between directories (refer); below it Landlock refuses every such rename, even inside writable roots",
    },
    AbiLevel {
        abi: 3,
        linux: "6.2",
        adds: "truncation: files outside writable roots cannot be truncated",
    },
    AbiLevel {
        abi: 4,
        linux: "6.7",
        adds: "TCP port rules: tcp_connect and tcp_bind allow-lists",
    },
    AbiLevel {
        abi: 5,
        linux: "6.10",
        adds: "ioctl on device files: only the device allow-list and the command's terminal accept it",
    },
    AbiLevel {
        abi: 6,
        linux: "6.12",
        adds: "scoping: no signals to processes outside the sandbox, no connecting to abstract unix sockets outside it",
    },
    AbiLevel {
        abi: 7,
        linux: "6.15",
        adds: "audit records of denials, which cordon reads as evidence where audit is enabled and it holds CAP_AUDIT_READ (it never enables audit); nothing cordon enforces needs ABI 7",
    },
];

/// One namespace the helper builds inside the user namespace.
struct Namespace {
    /// The feature's name, which is also the receipt's layer name.
    name: &'static str,
    layer: Layer,
    /// The `unshare` flag that probes it.
    flag: libc::c_int,
    /// What the command gets from it.
    gives: &'static str,
    /// What the command loses without it. The loss is no receipt downgrade: without the
    /// namespace the helper still enforces everything Landlock and seccomp can.
    without: &'static str,
}

const NAMESPACES: [Namespace; 4] = [
    Namespace {
        name: "mount_namespace",
        layer: Layer::MountNamespace,
        flag: libc::CLONE_NEWNS,
        gives: "read-only carve-outs (.git, ...) and hidden paths; everything outside the writable roots read-only at the mount level (also stops chmod, chown, utime, xattr); a minimal private /dev",
        without: "no read-only carve-outs or hidden paths; chmod, chown, utime and xattr changes outside the writable roots are not stopped; the host's /dev and /proc stay visible within Landlock's rules",
    },
    Namespace {
        name: "pid_namespace",
        layer: Layer::PidNamespace,
        flag: libc::CLONE_NEWPID,
        gives: "a pid-1 init: no process of the command outlives a timeout, a cancellation or cordon's death; other processes are invisible",
        without: "a process that leaves the command's process group (setsid, a double-forked daemon) survives a timeout, a cancellation or cordon's death",
    },
    Namespace {
        name: "ipc_namespace",
        layer: Layer::IpcNamespace,
        flag: libc::CLONE_NEWIPC,
        gives: "private System V IPC and POSIX message queues",
        without: "System V IPC and POSIX message queues are refused by seccomp instead of being private",
    },
    Namespace {
        name: "net_namespace",
        layer: Layer::NetNamespace,
        flag: libc::CLONE_NEWNET,
        gives: "network.mode = \"loopback\" and \"proxy\": a private network with only lo (and cordon's proxy)",
        without: "network.mode = \"loopback\" and \"proxy\" are unavailable (refused, or under report the network is denied instead)",
    },
];

/// Probes every feature without confining anything (the namespace probes run in throwaway
/// children). Call it before starting threads: it forks.
pub fn probe_features() -> Vec<Feature> {
    let mut features = landlock_features();
    features.push(seccomp_feature());
    features.push(no_new_privs_feature());
    features.extend(namespace_features());
    features
}

fn landlock_features() -> Vec<Feature> {
    let LandlockAbi {
        kernel,
        used,
        cap: knob,
    } = LandlockAbi::probe();
    let capped = used < kernel.min(landlock_rules::MAX_LANDLOCK_ABI);
    let cap_note = match (&knob, capped) {
        (Some(value), true) => format!(", capped by {}={value}", landlock_rules::ABI_CAP_ENV),
        _ => String::new(),
    };
    let mut features = vec![Feature {
        name: "landlock".into(),
        available: used > 0,
        detail: format!(
            "ABI {used} in use (the kernel offers {kernel}, cordon knows up to {}{cap_note})",
            landlock_rules::MAX_LANDLOCK_ABI
        ),
        hint: (used == 0).then(|| match kernel {
            0 => "needs Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK=y and `landlock` in the lsm= boot parameter (see /sys/kernel/security/lsm)".to_owned(),
            _ => format!("unset {} (it caps the ABI)", landlock_rules::ABI_CAP_ENV),
        }),
    }];
    for level in &LANDLOCK_ABI_LEVELS {
        let available = used >= level.abi;
        let hint = (!available).then(|| {
            if kernel >= level.abi {
                format!(
                    "the kernel has it; {} caps the ABI at {used}",
                    landlock_rules::ABI_CAP_ENV
                )
            } else {
                format!(
                    "needs Linux {} or later (this kernel offers ABI {kernel})",
                    level.linux
                )
            }
        });
        features.push(Feature {
            name: format!("landlock_abi_{}", level.abi),
            available,
            detail: format!("{} (Linux {})", level.adds, level.linux),
            hint,
        });
    }
    features
}

fn seccomp_feature() -> Feature {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_ulong = 2;
    let action: u32 = libc::SECCOMP_RET_KILL_PROCESS;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL only reads the u32 the pointer names, which lives on
    // this stack frame for the call.
    let filter = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    } == 0;
    // SAFETY: PR_GET_SECCOMP takes no pointer; it returns this thread's seccomp mode.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP) };
    let outer = if mode == 2 {
        "; cordon already runs under a seccomp filter (a container's or an outer sandbox's), which stays in force too"
    } else {
        ""
    };
    Feature {
        name: "seccomp".into(),
        available: filter,
        detail: format!(
            "filter mode: the system-call rules (no inet sockets unless the network is enabled, no ptrace, io_uring, mount, ...){outer}"
        ),
        hint: (!filter).then(|| {
            "needs a kernel built with CONFIG_SECCOMP_FILTER (Linux 3.5 or later); in a container, a runtime that lets seccomp(2) through".to_owned()
        }),
    }
}

fn no_new_privs_feature() -> Feature {
    // SAFETY: PR_GET_NO_NEW_PRIVS takes no pointer and only reports the flag.
    let state = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    Feature {
        name: "no_new_privs".into(),
        available: state >= 0,
        detail: "setuid and file-capability binaries gain nothing inside the sandbox; Landlock and seccomp need it".into(),
        hint: (state < 0).then(|| "needs Linux 3.5 or later".to_owned()),
    }
}

fn namespace_features() -> Vec<Feature> {
    let userns = userns::probe();
    let user_hint = |reason: &str| -> String {
        // The probe's reason reads "<what it found>; <what to change>".
        match reason.split_once("; ") {
            Some((_, fix)) => fix.to_owned(),
            None => userns::UNSHARE_HINT.trim_start_matches("; ").to_owned(),
        }
    };
    let mut features = vec![Feature {
        name: "user_namespace".into(),
        available: userns.is_ok(),
        detail: match &userns {
            Ok(()) => "the caller's uid and gid mapped to themselves; every other namespace is made inside it".into(),
            Err(missing) => missing.reason.clone(),
        },
        hint: userns.as_ref().err().map(|m| user_hint(&m.reason)),
    }];
    for ns in &NAMESPACES {
        let found = match &userns {
            Ok(()) => in_child(probe_unshare, ns.flag),
            Err(_) => Err("needs a user namespace, which is unavailable".to_owned()),
        };
        features.push(Feature {
            name: ns.name.into(),
            available: found.is_ok(),
            detail: match &found {
                Ok(()) => ns.gives.into(),
                Err(why) => format!("{why}; without it: {}", ns.without),
            },
            hint: found.err().map(|_| match &userns {
                Err(missing) => user_hint(&missing.reason),
                Ok(()) => format!("creating the {} is refused here (a container's seccomp profile or a security module); allow unshare for it", ns.name),
            }),
        });
    }
    let proc = match &userns {
        Ok(()) => in_child(probe_proc_mount, 0),
        Err(_) => Err("needs a user namespace, which is unavailable".to_owned()),
    };
    features.push(Feature {
        name: "proc_mount".into(),
        available: proc.is_ok(),
        detail: match &proc {
            Ok(()) => "a fresh /proc for the pid namespace: the command sees only its own processes".into(),
            Err(why) => format!("{why}; without it the command gets an empty /proc under the namespace layer (a reported downgrade), or the host's /proc without the layer"),
        },
        hint: proc.err().map(|_| match &userns {
            Err(missing) => user_hint(&missing.reason),
            Ok(()) => "the kernel refuses a new proc mount where the visible /proc is partly covered (a container masking /proc paths); run where /proc is fully visible".to_owned(),
        }),
    });
    features
}

/// Runs `probe(arg)` in a forked child and returns its verdict: Ok, or the errno it exited
/// with. The child calls only async-signal-safe system calls.
fn in_child(probe: fn(libc::c_int) -> libc::c_int, arg: libc::c_int) -> Result<(), String> {
    // SAFETY: the child runs only `probe`, which makes raw system calls and nothing that
    // allocates or locks, then `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let errno = probe(arg);
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(errno.clamp(0, 255)) };
    }
    if pid < 0 {
        return Err(format!(
            "cannot probe (fork failed: {})",
            std::io::Error::last_os_error()
        ));
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked, with a valid status pointer.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return Err("cannot probe (waitpid failed)".into());
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, errno) => Err(format!(
            "refused: {}",
            crate::sandbox::confine::describe_errno(errno)
        )),
        _ => Err("the probe did not exit normally".into()),
    }
}

/// The errno of the last failed call, in a forked child.
fn last_errno() -> libc::c_int {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Child side: a user namespace with the namespace of `flag` inside it.
fn probe_unshare(flag: libc::c_int) -> libc::c_int {
    // SAFETY: unshare only changes this (throwaway) process's namespace membership.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | flag) } != 0 {
        return last_errno();
    }
    0
}

/// Child side: user, mount and pid namespaces, then, as pid 1 of the new pid namespace, a
/// fresh proc mounted over `/proc` in the private mount namespace (as the helper mounts it).
fn probe_proc_mount(_: libc::c_int) -> libc::c_int {
    // SAFETY: unshare only changes this (throwaway) process's namespace membership.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID) } != 0 {
        return last_errno();
    }
    // SAFETY: fork in a single-threaded child; the grandchild makes raw system calls only.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: mount calls with static C strings, in a private mount namespace: nothing
        // outside this throwaway process sees them.
        let errno = unsafe {
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
                || libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ) != 0
            {
                last_errno()
            } else {
                0
            }
        };
        // SAFETY: ends the grandchild.
        unsafe { libc::_exit(errno.clamp(0, 255)) };
    }
    if pid < 0 {
        return last_errno();
    }
    let mut status = 0;
    // SAFETY: waits for the grandchild just forked, with a valid status pointer.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid || !libc::WIFEXITED(status) {
        return libc::ECHILD;
    }
    libc::WEXITSTATUS(status)
}

/// What cordon does with a preset here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Everything the preset asks for is enforced, with every namespace layer.
    Enforced,
    /// The preset runs, but without some of it: see `downgrades` and `missing_layers`.
    Downgraded,
    /// The helper refuses to run under it (exit 125): see `refusal`, and `downgrades` for
    /// everything it would lack.
    Refused,
    /// The preset is no sandbox at all, by choice.
    Unsandboxed,
    /// The check itself failed (the profile did not resolve here, the helper is missing, or a
    /// setup step other than enforcement failed): see `refusal`.
    Error,
}

/// A namespace layer the helper did not build, and what that costs the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingLayer {
    /// The layer.
    pub layer: Layer,
    /// What a command loses without it.
    pub effect: String,
}

/// Why a preset was refused, or why its check failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The failing step (`enforcement` for a refusal).
    pub step: String,
    /// The message, with the fix.
    pub message: String,
}

/// One preset, as the helper enforces it here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PresetCheck {
    /// The preset's name.
    pub preset: String,
    /// What cordon does with it.
    pub verdict: Verdict,
    /// Layers in force (from the receipt).
    pub layers: Vec<Layer>,
    /// The Landlock ABI used.
    pub landlock_abi: u32,
    /// Everything the preset asks for that this kernel cannot enforce (for a refused preset,
    /// what the helper lists when the same policy is run with `enforcement = "report"`).
    pub downgrades: Vec<Downgrade>,
    /// Namespace layers not built, which no downgrade names.
    pub missing_layers: Vec<MissingLayer>,
    /// Rules enforced more narrowly than named.
    pub approximations: Vec<Approximation>,
    /// Operations no layer mediates under this preset here.
    pub unmediated: Vec<String>,
    /// The refusal or failure, for `refused` and `error`.
    pub refusal: Option<Refusal>,
}

impl PresetCheck {
    fn empty(preset: Preset, verdict: Verdict) -> PresetCheck {
        PresetCheck {
            preset: preset.name().into(),
            verdict,
            layers: Vec::new(),
            landlock_abi: 0,
            downgrades: Vec::new(),
            missing_layers: Vec::new(),
            approximations: Vec::new(),
            unmediated: Vec::new(),
            refusal: None,
        }
    }

    fn failed(preset: Preset, step: &str, message: String) -> PresetCheck {
        let mut check = PresetCheck::empty(preset, Verdict::Error);
        check.refusal = Some(Refusal {
            step: step.into(),
            message,
        });
        check
    }
}

/// Runs `true` under every preset's policy, resolved in `cwd`, through the helper.
pub async fn check_presets(cwd: &Path) -> Vec<PresetCheck> {
    let sandbox = Sandbox::locate().map(|s| s.with_timeout(CHECK_TIMEOUT));
    let mut checks = Vec::new();
    for preset in Preset::ALL {
        let context = ResolveContext::new(cwd).with_invoking_dir(cwd);
        let resolved = match PermissionProfile::preset(preset).resolve(&context) {
            Ok(resolved) => resolved,
            Err(e) => {
                checks.push(PresetCheck::failed(preset, "profile", e.to_string()));
                continue;
            }
        };
        let Some(policy) = resolved.policy else {
            checks.push(PresetCheck::empty(preset, Verdict::Unsandboxed));
            continue;
        };
        let sandbox = match &sandbox {
            Ok(sandbox) => sandbox,
            Err(e) => {
                checks.push(PresetCheck::failed(preset, "spawn_helper", e.to_string()));
                continue;
            }
        };
        checks.push(check_policy(sandbox, preset, &resolved.cwd, policy).await);
    }
    checks
}

async fn check_policy(
    sandbox: &Sandbox,
    preset: Preset,
    cwd: &Path,
    policy: SandboxPolicy,
) -> PresetCheck {
    let first = run_true(sandbox, cwd, policy.clone()).await;
    let (receipt, refusal) = match first {
        Ok(receipt) => (receipt, None),
        Err((step, message)) if step == SetupStep::Helper(Step::Enforcement) => {
            // The refusal names the first thing missing; the same policy under `report`
            // lists all of it.
            let mut reporting = policy.clone();
            reporting.enforcement.missing_layer = Enforcement::Report;
            reporting.enforcement.carve_outs = Enforcement::Report;
            reporting.filesystem.required.clear();
            match run_true(sandbox, cwd, reporting).await {
                Ok(receipt) => (receipt, Some((step, message))),
                Err((step, message)) => {
                    return PresetCheck::failed(preset, &step.to_string(), message)
                }
            }
        }
        Err((step, message)) => return PresetCheck::failed(preset, &step.to_string(), message),
    };
    let mut expected = vec![
        Layer::UserNamespace,
        Layer::PidNamespace,
        Layer::MountNamespace,
        Layer::IpcNamespace,
    ];
    if policy.network.mode.is_private() {
        expected.push(Layer::NetNamespace);
    }
    let missing_layers: Vec<MissingLayer> = expected
        .into_iter()
        .filter(|layer| !receipt.layers.contains(layer))
        .map(|layer| MissingLayer {
            layer,
            effect: layer_loss(layer).into(),
        })
        .collect();
    let verdict = match (
        &refusal,
        receipt.downgrades.is_empty() && missing_layers.is_empty(),
    ) {
        (Some(_), _) => Verdict::Refused,
        (None, true) => Verdict::Enforced,
        (None, false) => Verdict::Downgraded,
    };
    PresetCheck {
        preset: preset.name().into(),
        verdict,
        layers: if refusal.is_some() {
            Vec::new()
        } else {
            receipt.layers
        },
        landlock_abi: receipt.landlock_abi,
        downgrades: receipt.downgrades,
        missing_layers,
        approximations: receipt.approximations,
        unmediated: receipt.unmediated,
        refusal: refusal.map(|(step, message)| Refusal {
            step: step.to_string(),
            message,
        }),
    }
}

/// What a command loses without `layer`.
fn layer_loss(layer: Layer) -> &'static str {
    if layer == Layer::UserNamespace {
        return "every other namespace is made inside it, so none of them exists";
    }
    NAMESPACES
        .iter()
        .find(|ns| ns.layer == layer)
        .map_or("", |ns| ns.without)
}

/// `true` under `policy`: the receipt, or the failing step and its message.
async fn run_true(
    sandbox: &Sandbox,
    cwd: &Path,
    policy: SandboxPolicy,
) -> Result<ConfinementReceipt, (SetupStep, String)> {
    let result = sandbox
        .exec(ExecRequest::sandboxed(["true"], cwd, policy))
        .await;
    match (result.outcome, result.receipt) {
        (Outcome::SetupError { step, message, .. }, _) => Err((step, message)),
        (_, Some(receipt)) => Ok(receipt),
        (outcome, None) => Err((
            SetupStep::Parent(crate::exec::ParentStep::HelperSilent),
            format!(
                "the helper reported no confinement (outcome {})",
                outcome.kind()
            ),
        )),
    }
}

/// The Landlock ABI numbers behind the `landlock` feature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LandlockAbi {
    /// What the kernel offers (0: no Landlock).
    pub kernel: u32,
    /// What the helper uses: the kernel's, capped by what cordon knows and by the knob.
    pub used: u32,
    /// The value of `CORDON_LANDLOCK_ABI_MAX`, when set.
    pub cap: Option<String>,
}

impl LandlockAbi {
    /// Reads the kernel's ABI and the knob, as the helper does.
    pub fn probe() -> LandlockAbi {
        let kernel = landlock_rules::kernel_abi();
        let cap = std::env::var(landlock_rules::ABI_CAP_ENV).ok();
        LandlockAbi {
            kernel,
            used: landlock_rules::effective_abi(kernel, cap.as_deref()),
            cap,
        }
    }
}

/// One source of denial evidence and whether a run here uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EvidenceSource {
    /// `landlock_audit`, `seccomp_observer` or `text` (the values of a denial's `evidence`).
    pub name: &'static str,
    /// Whether a default run here uses it.
    pub used: bool,
    /// What it finds, and why it is not used when it is not.
    pub detail: String,
}

/// The evidence sources a default run here has, best first: which denials are known from the
/// kernel and which only from the command's text.
pub fn probe_evidence(landlock_abi: u32) -> Vec<EvidenceSource> {
    use crate::evidence::audit::{readable, AuditUnreadable};
    let finds = "Landlock's records of its own refusals: reads, executions and TCP ports outside the rules, and writes where Landlock answers them (outside the namespace layer, whose read-only mounts answer writes first)";
    let audit = match (landlock_abi >= 7).then(readable) {
        None => Err(format!(
            "needs Landlock ABI 7 (Linux 6.15); ABI {landlock_abi} is in use"
        )),
        Some(Err(AuditUnreadable::NoCapability(e))) => Err(format!(
            "needs CAP_AUDIT_READ to join the audit read-log group (root has it): {e}"
        )),
        Some(Err(AuditUnreadable::Disabled)) => Err(
            "audit is disabled in the kernel; `auditctl -e 1` enables it (cordon never changes it)"
                .to_owned(),
        ),
        Some(Ok(())) => Ok(()),
    };
    // SAFETY: SECCOMP_GET_NOTIF_SIZES writes three u16s into the struct, which lives on this
    // stack frame for the call.
    let notifications = unsafe {
        let mut sizes: libc::seccomp_notif_sizes = std::mem::zeroed();
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut sizes as *mut libc::seccomp_notif_sizes,
        ) == 0
    };
    let observer = "its light scope by default: seccomp's refusals, connect, bind, addressed sendto and the creation of directories, nodes and symlinks, so network, unix-socket, port and system-call denials and refused directory creations are exact; CORDON_OBSERVER=on also watches every writing open, removal and rename (exact file denials, at a round trip per call)";
    let files_from = if audit.is_ok() {
        "Landlock's audit records, then the text"
    } else {
        "the text alone"
    };
    vec![
        EvidenceSource {
            name: "landlock_audit",
            used: audit.is_ok(),
            detail: match &audit {
                Ok(()) => finds.to_owned(),
                Err(why) => format!("{finds}; not here: {why}"),
            },
        },
        EvidenceSource {
            name: "seccomp_observer",
            used: notifications,
            detail: if notifications {
                observer.to_owned()
            } else {
                format!("{observer}; not here: the kernel has no seccomp user notification (Linux 5.0)")
            },
        },
        EvidenceSource {
            name: "text",
            used: true,
            detail: format!("the command's own messages, for what no kernel source saw (marked \"evidence\": \"text\"); by default, file denials here come from {files_from}"),
        },
    ]
}

/// Everything `cordon doctor` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// The Landlock ABI numbers.
    pub landlock_abi: LandlockAbi,
    /// Kernel features, in table order.
    pub features: Vec<Feature>,
    /// Each preset, in documentation order.
    pub presets: Vec<PresetCheck>,
    /// Where denials are known from, best first.
    pub evidence: Vec<EvidenceSource>,
    /// The preset `cordon run` uses without `-p`.
    pub default_preset: &'static str,
    /// Whether the default preset is enforced here in full (the doctor's exit status).
    pub default_fully_enforced: bool,
}

impl Diagnosis {
    /// Puts the probes and checks together.
    pub fn new(features: Vec<Feature>, presets: Vec<PresetCheck>) -> Diagnosis {
        let default_preset = Preset::WorkspaceWrite.name();
        let default_fully_enforced = presets
            .iter()
            .any(|p| p.preset == default_preset && p.verdict == Verdict::Enforced);
        let landlock_abi = LandlockAbi::probe();
        Diagnosis {
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|r| r.trim().to_owned())
                .unwrap_or_else(|e| format!("unknown ({e})")),
            evidence: probe_evidence(landlock_abi.used),
            landlock_abi,
            features,
            presets,
            default_preset,
            default_fully_enforced,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_landlock_abi_the_helper_knows_has_a_row_in_order() {
        let numbers: Vec<u32> = LANDLOCK_ABI_LEVELS.iter().map(|l| l.abi).collect();
        let expected: Vec<u32> = (1..=landlock_rules::MAX_LANDLOCK_ABI).collect();
        assert_eq!(numbers, expected);
        assert!(LANDLOCK_ABI_LEVELS.iter().all(|l| !l.adds.is_empty()));
    }

    #[test]
    fn every_missing_namespace_layer_says_what_it_costs() {
        for layer in [
            Layer::UserNamespace,
            Layer::PidNamespace,
            Layer::MountNamespace,
            Layer::IpcNamespace,
            Layer::NetNamespace,
        ] {
            assert!(!layer_loss(layer).is_empty(), "{layer:?}");
        }
    }
}
