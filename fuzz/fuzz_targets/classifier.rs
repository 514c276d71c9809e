//! The denial classifier reads what a command printed, which the command chooses: any output
//! (with or without kernel evidence beside it) must give a list of denials, never a panic, and
//! every denial it gives must say what allows it and name a target when it has one.
#![no_main]

use std::ffi::OsString;
use std::path::Path;

use cordon::classify::{find_denials, Evidence};
use cordon_sandbox::SandboxPolicy;
use libfuzzer_sys::fuzz_target;

const POLICY: &str = r#"{"version":1,"filesystem":{"read":["/"],"write":["/w","/tmp"],"read_only":["/w/.git"],"deny_read":["/root/.ssh"]},"network":{"mode":"denied","unix_sockets":"deny"},"enforcement":{"missing_layer":"refuse","carve_outs":"report"}}"#;

fuzz_target!(|data: &[u8]| {
    let Ok(policy) = SandboxPolicy::from_json(POLICY) else {
        return;
    };
    let Some((&selector, output)) = data.split_first() else {
        return;
    };
    let argv: Vec<OsString> = match selector % 4 {
        0 => vec!["sh".into(), "-c".into(), "make".into()],
        1 => vec!["python3".into(), "build.py".into()],
        2 => vec!["curl".into(), "https://example.com".into()],
        _ => vec!["git".into(), "push".into()],
    };
    let (stdout, stderr) = output.split_at(output.len() / 3);
    for code in [Some(1), Some(126), None] {
        let denials = find_denials(&Evidence {
            policy: &policy,
            cwd: Path::new("/w"),
            argv: &argv,
            exit_code: code,
            signal: if code.is_none() { Some(9) } else { None },
            records: &[],
            stdout,
            stderr,
            kernel: None,
            kernel_light: if selector & 0x80 != 0 { Some(&[]) } else { None },
            audit: None,
        });
        for d in &denials {
            assert!(!d.allow_with.is_empty(), "{d:?}");
            assert!(d.target.as_deref() != Some(""), "{d:?}");
        }
    }
});
