//! Using a snapshot: rewrite `<shell> -lc <script>` into `<shell> -c <wrapper>`.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::quote::{is_identifier, push_quoted};
use super::shell::ShellKind;
use super::{SnapshotRef, ENV_FD, SNAPSHOT_FD};

/// Variables that always win over a snapshot: the sandbox markers, which the helper sets per
/// command (a snapshot never contains them, but an `env/` script could). Explicit overrides
/// from the request are added by the caller, and [`PROXY_VARS`] when it runs a proxy.
///
/// Every kept variable costs the wrapper two parameter expansions and a test at run time
/// (about 60 µs for a dozen in bash), so the list holds only what can actually differ.
pub const ALWAYS_KEEP: &[&str] = &[
    cordon_sandbox::policy::MARKER_SANDBOX,
    cordon_sandbox::policy::MARKER_NETWORK_DISABLED,
];

/// Proxy settings: a runtime that points commands at its own proxy adds these to
/// [`RewriteOptions::keep_vars`] so that a proxy exported by the user's startup files does not
/// replace it.
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "FTP_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "ftp_proxy",
];

/// The variable naming an extra file the wrapper sources after the session `env/` directory.
pub const ENV_FILE_VAR: &str = "CORDON_ENV_FILE";

/// A file descriptor the wrapper reports the final working directory on. Single digits only,
/// because dash cannot redirect to descriptors above 9; 0-2 are the command's own streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportFd(u8);

impl ReportFd {
    /// `Some` for 3..=9.
    pub fn new(fd: u8) -> Option<ReportFd> {
        (3..=9).contains(&fd).then_some(ReportFd(fd))
    }

    /// The descriptor number.
    pub fn get(self) -> u8 {
        self.0
    }
}

/// How [`rewrite_argv`] wraps a command.
#[derive(Debug, Clone)]
pub struct RewriteOptions {
    /// The snapshot to source; without one nothing is rewritten.
    pub snapshot: Option<SnapshotRef>,
    /// Variables whose run-time values win over the snapshot (set, or unset). Names that are
    /// not shell identifiers are skipped: a shell never touches such variables, and a snapshot
    /// never contains them, so they already pass through unchanged.
    pub keep_vars: Vec<String>,
    /// Source the session's `env/` scripts, which the caller passes as a sealed memfd at
    /// [`ENV_FD`] (see [`crate::session::env_bundle`]), after the snapshot.
    pub env_scripts: bool,
    /// The runtime's own `PATH` entries, prepended in this order. Entries containing `:` or
    /// NUL cannot be expressed in `PATH` and are skipped.
    pub path_prepend: Vec<PathBuf>,
    /// When set, `pwd -P` of where the script ended is written to this descriptor, also when
    /// the script calls `exit` (but not when it replaces the `EXIT` trap or is killed).
    pub report_cwd_fd: Option<ReportFd>,
    /// bash only: turn on `expand_aliases` before the script. Off by default, matching plain
    /// `bash -c`, because interactive aliases such as `rm='rm -i'` silently change what a
    /// non-interactive command does. The aliases are restored either way, and the snapshot
    /// turns alias expansion on when the user's startup files did.
    pub bash_expand_aliases: bool,
}

impl RewriteOptions {
    /// Options for `snapshot` keeping [`ALWAYS_KEEP`], with nothing else.
    pub fn new(snapshot: SnapshotRef) -> Self {
        RewriteOptions {
            snapshot: Some(snapshot),
            keep_vars: ALWAYS_KEEP.iter().map(|s| s.to_string()).collect(),
            env_scripts: false,
            path_prepend: Vec::new(),
            report_cwd_fd: None,
            bash_expand_aliases: false,
        }
    }

    /// Also keeps the variables a request sets explicitly, so that they win over the snapshot
    /// (names that are not UTF-8 cannot be shell identifiers and are skipped).
    pub fn keep_overrides<'a>(&mut self, names: impl IntoIterator<Item = &'a OsString>) {
        self.keep_vars.extend(
            names
                .into_iter()
                .filter_map(|k| k.to_str().map(str::to_owned)),
        );
    }
}

/// Rewrites `[shell, "-lc", script, extra...]` into `[shell, "-c", wrapper]` (plus `extra[0]`
/// as `$0` when given) if the options carry a snapshot for the same kind of shell; any other
/// argv is returned unchanged. Pure: it reads neither the file system nor the environment.
///
/// The wrapper sources the snapshot from `/proc/self/fd/`[`SNAPSHOT_FD`] (and the `env/`
/// scripts from [`ENV_FD`]): the caller passes the content as sealed memfds, so nothing a
/// command can write, wherever the cache lies, changes what a later command sources.
///
/// The script runs in the wrapper shell itself (through `eval`), not in a fresh `exec`ed
/// shell, because functions, aliases and options do not survive `exec`; `$0` and the
/// positional parameters are those `<shell> -c script extra...` would have given it.
pub fn rewrite_argv(argv: &[OsString], opts: &RewriteOptions) -> Vec<OsString> {
    let Some(snapshot) = opts.snapshot.as_ref() else {
        return argv.to_vec();
    };
    let (shell, script, extra) = match argv {
        [shell, flag, script, extra @ ..] if flag.as_bytes() == b"-lc" => (shell, script, extra),
        _ => return argv.to_vec(),
    };
    if ShellKind::from_path(Path::new(shell)) != Some(snapshot.kind) {
        return argv.to_vec();
    }
    // A NUL cannot reach a shell through argv, so such a command fails to start either way;
    // leave it to fail exactly as it would have.
    let has_nul = |s: &OsString| s.as_bytes().contains(&0);
    if has_nul(script) || extra.iter().any(has_nul) {
        return argv.to_vec();
    }

    let wrapper = build_wrapper(
        snapshot,
        opts,
        script.as_bytes(),
        extra.get(1..).unwrap_or(&[]),
    );
    let mut out = vec![
        shell.clone(),
        OsString::from("-c"),
        OsString::from_vec(wrapper),
    ];
    if let Some(zero) = extra.first() {
        out.push(zero.clone());
    }
    out
}

/// Shell text for the wrapper. Everything after the snapshot is sourced calls builtins through
/// `builtin` (bash, zsh) or `command` (sh) with a leading backslash, because the snapshot may
/// define functions or aliases with the same names (`cd`, `pwd` and `export` wrappers exist in
/// the wild).
fn build_wrapper(
    snap: &SnapshotRef,
    opts: &RewriteOptions,
    script: &[u8],
    args: &[OsString],
) -> Vec<u8> {
    let kind = snap.kind;
    let b: &[u8] = match kind {
        ShellKind::Bash | ShellKind::Zsh => b"\\builtin ",
        ShellKind::Sh => b"\\command ",
    };
    let mut w: Vec<u8> = Vec::with_capacity(script.len() + 1024);
    let keep: Vec<&[u8]> = opts
        .keep_vars
        .iter()
        .map(|s| s.as_bytes())
        .filter(|n| is_identifier(n) && !n.starts_with(b"__cordon_"))
        .collect();
    // The snapshot never sets the sandbox markers (capture leaves them out), so without an
    // env/ directory only `$CORDON_ENV_FILE` can change them: they are then saved and restored
    // around that file alone, and a command without one pays nothing for them. Each kept
    // variable costs bash two parameter expansions and a test, about 15 µs.
    let is_marker = |n: &&[u8]| {
        [
            cordon_sandbox::policy::MARKER_SANDBOX,
            cordon_sandbox::policy::MARKER_NETWORK_DISABLED,
        ]
        .iter()
        .any(|m| m.as_bytes() == *n)
    };
    let (around_env_file, around_all): (Kept<'_>, Kept<'_>) = keep
        .iter()
        .copied()
        .enumerate()
        .partition(|(_, n)| !opts.env_scripts && is_marker(n));

    // 1. Save the variables that must win, reading them now, at run time.
    for &(i, name) in &around_all {
        push_save(&mut w, i, name);
        w.push(b'\n');
    }

    // 2. The snapshot. Its failure is ignored: a partly applied snapshot beats no command.
    //    `command .` keeps dash from exiting on an error in the sourced file. It only defines
    //    things, so it neither reads stdin nor prints; error messages (an option this shell
    //    version lacks) are silenced.
    let snap_path = format!("/proc/self/fd/{SNAPSHOT_FD}");
    w.extend_from_slice(b"if ");
    w.extend_from_slice(b);
    w.extend_from_slice(format!("test -r {snap_path}; then ").as_bytes());
    w.extend_from_slice(b);
    w.extend_from_slice(format!(". {snap_path} 2>/dev/null || :; fi\n").as_bytes());

    // 3. The env/ scripts (one memfd, each script `eval`ed on its own so that a syntax error
    //    in one spares the others), then $CORDON_ENV_FILE. A name without a slash is made
    //    relative to the working directory, since `.` would otherwise search PATH for it.
    if opts.env_scripts {
        let env_path = format!("/proc/self/fd/{ENV_FD}");
        w.extend_from_slice(b"if ");
        w.extend_from_slice(b);
        w.extend_from_slice(format!("test -r {env_path}; then ").as_bytes());
        w.extend_from_slice(b);
        w.extend_from_slice(format!(". {env_path} || :; fi\n").as_bytes());
    }
    // 4. The memfds have served; the script gets only the descriptors it would have had.
    w.extend_from_slice(b);
    w.extend_from_slice(format!("exec {SNAPSHOT_FD}<&-").as_bytes());
    if opts.env_scripts {
        w.extend_from_slice(format!(" {ENV_FD}<&-").as_bytes());
    }
    w.push(b'\n');
    // The branch for `$CORDON_ENV_FILE` is passed to `eval` as one quoted word: bash parses a
    // quoted word far faster than the commands in it, and most commands have no such file.
    let bs = String::from_utf8_lossy(b);
    let mut body: Vec<u8> = Vec::new();
    for &(i, name) in &around_env_file {
        push_save(&mut body, i, name);
        body.extend_from_slice(b"; ");
    }
    body.extend_from_slice(format!("__cordon_f=${ENV_FILE_VAR}; case $__cordon_f in */*) ;; *) __cordon_f=./$__cordon_f;; esac; if {bs}test -r \"$__cordon_f\"; then {bs}. \"$__cordon_f\" || :; fi").as_bytes());
    for &(i, name) in &around_env_file {
        body.extend_from_slice(b"; ");
        push_restore(&mut body, b, i, name);
        body.extend_from_slice(format!("; {bs}unset __cordon_s{i} __cordon_v{i}").as_bytes());
    }
    body.extend_from_slice(format!("; {bs}unset __cordon_f").as_bytes());
    w.extend_from_slice(
        format!("if {bs}test -n \"${{{ENV_FILE_VAR}:-}}\"; then {bs}eval ").as_bytes(),
    );
    push_quoted(&mut w, &body);
    w.extend_from_slice(b"; fi\n");

    // 5. Restore the saved variables: exported with their run-time value, or unset.
    for &(i, name) in &around_all {
        push_restore(&mut w, b, i, name);
        w.push(b'\n');
    }

    // 6. The runtime's PATH entries go first.
    let entries: Vec<&[u8]> = opts
        .path_prepend
        .iter()
        .map(|p| p.as_os_str().as_bytes())
        .filter(|p| !p.is_empty() && !p.contains(&b':') && !p.contains(&0))
        .collect();
    if !entries.is_empty() {
        w.extend_from_slice(b"PATH=");
        push_quoted(&mut w, &entries.join(&b':'));
        w.extend_from_slice(b"${PATH:+:$PATH}; ");
        w.extend_from_slice(b);
        w.extend_from_slice(b"export PATH\n");
    }

    // Scratch variables must not leak into the script's view of the shell. (The env-file
    // branch cleans up after itself.)
    let mut scratch: Vec<String> = Vec::new();
    for &(i, _) in &around_all {
        scratch.extend([format!("__cordon_s{i}"), format!("__cordon_v{i}")]);
    }
    if !scratch.is_empty() {
        w.extend_from_slice(b);
        w.extend_from_slice(b"unset ");
        w.extend_from_slice(scratch.join(" ").as_bytes());
        w.push(b'\n');
    }

    if kind == ShellKind::Bash && opts.bash_expand_aliases {
        w.extend_from_slice(b"\\builtin shopt -s expand_aliases\n");
    }

    // 7. The working directory report runs from an EXIT trap so that `exit` inside the script
    //    still reports; the trap re-exits with the script's status.
    if let Some(fd) = opts.report_cwd_fd {
        let bs = String::from_utf8_lossy(b);
        w.extend_from_slice(
            format!(
                "{bs}trap '__cordon_rc=$?; {{ {bs}pwd -P >&{fd}; }} 2>/dev/null; {bs}exit \"$__cordon_rc\"' EXIT\n",
                fd = fd.get()
            )
            .as_bytes(),
        );
    }

    // 8. The script, in this shell, with its positional parameters.
    w.extend_from_slice(b);
    w.extend_from_slice(b"set --");
    for a in args {
        w.push(b' ');
        push_quoted(&mut w, a.as_bytes());
    }
    w.push(b'\n');
    w.extend_from_slice(b);
    w.extend_from_slice(b"eval ");
    push_quoted(&mut w, script);
    w.push(b'\n');
    w
}

/// Kept variables with the index of their scratch variables.
type Kept<'a> = Vec<(usize, &'a [u8])>;

/// `__cordon_s<i>=${NAME+x} __cordon_v<i>=${NAME-}`: whether `name` is set, and its value.
fn push_save(w: &mut Vec<u8>, i: usize, name: &[u8]) {
    w.extend_from_slice(format!("__cordon_s{i}=${{").as_bytes());
    w.extend_from_slice(name);
    w.extend_from_slice(format!("+x}} __cordon_v{i}=${{").as_bytes());
    w.extend_from_slice(name);
    w.extend_from_slice(b"-}");
}

/// Puts `name` back as [`push_save`] found it: exported with its value, or unset.
fn push_restore(w: &mut Vec<u8>, b: &[u8], i: usize, name: &[u8]) {
    let bs = String::from_utf8_lossy(b);
    w.extend_from_slice(format!("if {bs}test -n \"$__cordon_s{i}\"; then ").as_bytes());
    w.extend_from_slice(name);
    w.extend_from_slice(format!("=$__cordon_v{i}; {bs}export ").as_bytes());
    w.extend_from_slice(name);
    w.extend_from_slice(format!("; else {bs}unset ").as_bytes());
    w.extend_from_slice(name);
    w.extend_from_slice(b"; fi");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kind: ShellKind) -> RewriteOptions {
        RewriteOptions::new(SnapshotRef {
            path: std::path::PathBuf::from("/snap/s.1.sh"),
            kind,
        })
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn snapshot_rewrite_leaves_other_argv_alone() {
        let o = opts(ShellKind::Bash);
        for argv in [
            os(&["bash", "-c", "echo"]),
            os(&["zsh", "-lc", "echo"]),
            os(&["bash", "-lc"]),
            os(&["python3", "-lc", "x"]),
            os(&[]),
        ] {
            assert_eq!(rewrite_argv(&argv, &o), argv);
        }
        let none = RewriteOptions {
            snapshot: None,
            ..o.clone()
        };
        let argv = os(&["bash", "-lc", "echo"]);
        assert_eq!(rewrite_argv(&argv, &none), argv);
    }

    #[test]
    fn snapshot_rewrite_shape() {
        let o = opts(ShellKind::Bash);
        let out = rewrite_argv(&os(&["/bin/bash", "-lc", "echo", "zero", "one"]), &o);
        assert_eq!(out.len(), 4);
        assert_eq!(out[0], "/bin/bash");
        assert_eq!(out[1], "-c");
        assert_eq!(out[3], "zero");
        let w = out[2].as_bytes();
        assert!(w.ends_with(b"\\builtin set -- 'one'\n\\builtin eval 'echo'\n"));
    }

    #[test]
    fn snapshot_report_fd_range() {
        assert!(ReportFd::new(2).is_none());
        assert!(ReportFd::new(10).is_none());
        assert_eq!(ReportFd::new(9).map(ReportFd::get), Some(9));
    }
}
