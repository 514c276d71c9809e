//! `cordon-sandbox`: the confining half of cordon.
//!
//! The helper reads a [`policy::SandboxPolicy`], confines its own process in one ordered
//! sequence (close inherited fds, die with the parent, namespaces, drop capabilities,
//! `no_new_privs`, Landlock, seccomp), reports what it enforced on a status fd, and `execve`s the command.
//! It never supervises; the parent (the `cordon` crate) does that.
//!
//! ```no_run
//! // The binary's whole `main`:
//! let code = cordon_sandbox::confine::main_with_args(std::env::args_os().skip(1));
//! std::process::exit(code);
//! ```

pub mod bpf;
pub mod confine;
pub mod error;
pub mod landlock_rules;
pub mod namespaces;
pub mod observe;
pub mod path_expansion;
pub mod policy;
pub mod process;
pub mod status;
pub mod syscall_rules;

pub use confine::main_with_args;
pub use error::SetupError;
pub use policy::SandboxPolicy;
