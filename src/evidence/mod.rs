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

/// Environment variable forcing the seccomp observer on (`on`, `1`) or off (`off`, `0`).
pub const OBSERVER_ENV: &str = "CORDON_OBSERVER";

/// Whether the observer runs when neither the request nor [`OBSERVER_ENV`] says: off.
/// `scripts/bench.sh` measures its cost on a build that creates 10,000 files: every writing
/// open waits for the observer, about 18 µs each on an idle machine and far more when the
/// cores are busy, and the build took 1.5 to 6 times as long (the README has the figures),
/// against a target of 5%. So it is opt-in (`CORDON_OBSERVER=on`, `ExecRequest::observe`,
/// and always for `cordon learn`); Landlock's audit records, which cost nothing until a
/// denial, are used whenever they can be read.
pub const OBSERVER_DEFAULT: bool = false;

/// Whether to run the observer for a request that says `requested`.
pub fn observer_wanted(requested: Option<bool>) -> bool {
    if let Some(on) = requested {
        return on;
    }
    match std::env::var(OBSERVER_ENV).ok().as_deref() {
        Some("on" | "1" | "true" | "yes") => true,
        Some("off" | "0" | "false" | "no") => false,
        _ => OBSERVER_DEFAULT,
    }
}
