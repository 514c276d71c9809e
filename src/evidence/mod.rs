//! Why a command failed, from the kernel's evidence: Landlock's audit records ([`audit`],
//! where the caller may read them) and the seccomp observer ([`observer`]), which sees
//! every call the sandbox can refuse as the command makes it, and says which of them the
//! policy refuses, with the exact target. The classifier ([`crate::classify`]) turns those
//! into the run's denials when the command failed, and falls back to reading the command's
//! text only where no kernel source ran.
//!
//! Whether the observer runs: [`ExecRequest::observe`](crate::exec::ExecRequest::observe) when
//! set, else the environment variable [`OBSERVER_ENV`] (`on`/`off`), else
//! [`OBSERVER_DEFAULT`].

pub(crate) mod audit;
pub(crate) mod observer;
pub(crate) mod spare_threads;

/// Environment variable forcing the seccomp observer on (`on`, `1`) or off (`off`, `0`).
pub const OBSERVER_ENV: &str = "CORDON_OBSERVER";

/// Whether the full observer runs when neither the request nor [`OBSERVER_ENV`] says: off.
/// `scripts/bench.sh` measures its cost on a build that creates 10,000 files: every writing
/// open waits for the observer, about 18 µs each on an idle machine and far more when the
/// cores are busy, and the build took 1.5 to 6 times as long (the README has the figures),
/// against a target of 5%. So it is opt-in (`CORDON_OBSERVER=on`, `ExecRequest::observe`,
/// and always for `cordon learn`); Landlock's audit records, which cost nothing until a
/// denial, are used whenever they can be read.
///
/// What runs by default instead is the observer's light scope ([`ObserveScope::Light`]):
/// seccomp's own refusals (rare by nature: a refused call is a command going where it may
/// not), the network calls (a handful per command), and the file calls a build makes once per
/// directory at most (creating a directory, a node or a symlink, truncating by path, checking
/// for write access). Network, unix-socket, port and system-call denials and refused directory
/// creations are known from the kernel at no cost a build notices; the writing opens and
/// removals fall back to the audit records or the text.
pub const OBSERVER_DEFAULT: bool = false;

pub use cordon_sandbox::observe::ObserveScope;

/// Whether to run the full observer for a request that says `requested`.
pub fn observer_wanted(requested: Option<bool>) -> bool {
    observer_scope(requested) == Some(ObserveScope::Full)
}

/// The observer's scope for a request that says `requested` (`Some(true)`: full,
/// `Some(false)`: none at all), else [`OBSERVER_ENV`] (`on`, `off`, or `light`), else the
/// default: the light scope ([`OBSERVER_DEFAULT`] says the full one is off).
pub fn observer_scope(requested: Option<bool>) -> Option<ObserveScope> {
    match requested {
        Some(true) => return Some(ObserveScope::Full),
        Some(false) => return None,
        None => {}
    }
    match std::env::var(OBSERVER_ENV).ok().as_deref() {
        Some("on" | "1" | "true" | "yes" | "full") => Some(ObserveScope::Full),
        Some("off" | "0" | "false" | "no") => None,
        Some("light") => Some(ObserveScope::Light),
        _ if OBSERVER_DEFAULT => Some(ObserveScope::Full),
        _ => Some(ObserveScope::Light),
    }
}
