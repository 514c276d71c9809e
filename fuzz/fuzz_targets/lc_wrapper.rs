//! The `-lc` wrapper embeds the agent's script, the variables to keep and the runtime's PATH
//! entries in a shell program: any bytes must give an argv (never a panic), the script must
//! reach the shell exactly once, quoted (its bytes appear in the wrapper only inside quotes,
//! so the property test's real-shell round trip covers what they do), and an argv that is not
//! `SHELL -lc SCRIPT` must come back unchanged.
#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use cordon::snapshot::{quoted, rewrite_argv, RewriteOptions, ShellKind, SnapshotRef};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let (kind, shell) = match selector % 3 {
        0 => (ShellKind::Bash, "/bin/bash"),
        1 => (ShellKind::Zsh, "/bin/zsh"),
        _ => (ShellKind::Sh, "/bin/sh"),
    };
    // The input: script, then (after the first NUL) a variable name to keep, then a PATH entry.
    let mut parts = rest.splitn(3, |b| *b == 0);
    let script = parts.next().unwrap_or_default().to_vec();
    let keep = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let prepend = PathBuf::from(OsString::from_vec(parts.next().unwrap_or_default().to_vec()));
    let mut opts = RewriteOptions::new(SnapshotRef {
        path: PathBuf::from("/nonexistent/snapshot.sh"),
        kind,
    });
    opts.keep_vars.push(keep);
    opts.path_prepend.push(prepend);
    opts.env_scripts = selector & 0x40 != 0;
    opts.bash_expand_aliases = selector & 0x80 != 0;

    let argv: Vec<OsString> = vec![shell.into(), "-lc".into(), OsString::from_vec(script.clone())];
    let out = rewrite_argv(&argv, &opts);
    assert!(!out.is_empty());
    if out == argv {
        return; // left alone (a NUL in the script, say)
    }
    assert_eq!(out[0], argv[0]);
    assert_eq!(out[1].as_bytes(), b"-c");
    let wrapper = out[2].as_bytes();
    let needle = quoted(&script);
    assert!(
        wrapper.windows(needle.len()).any(|w| w == needle.as_slice()),
        "the script is not in the wrapper as one quoted word"
    );

    // Not `-lc`: untouched.
    let other: Vec<OsString> = vec![shell.into(), "-c".into(), OsString::from_vec(script)];
    assert_eq!(rewrite_argv(&other, &opts), other);
});
