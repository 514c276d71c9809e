//! The helper's policy parser and validator take untrusted bytes: they must never panic, and a
//! policy that validates must survive a round trip through its wire form unchanged.
#![no_main]

use cordon_sandbox::SandboxPolicy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let policy = match SandboxPolicy::from_json(text) {
        Ok(policy) => policy,
        Err(e) => {
            assert!(!e.to_string().contains('\n'), "multi-line error: {e}");
            return;
        }
    };
    if let Err(e) = policy.validate() {
        assert!(!e.to_string().contains('\n'), "multi-line error: {e}");
    } else {
        let again = SandboxPolicy::from_json(&policy.to_json()).expect("wire form parses");
        assert_eq!(again, policy);
        let _ = cordon_sandbox::syscall_rules::compile(&cordon_sandbox::syscall_rules::rules(&policy))
            .expect("a valid policy compiles to seccomp programs");
    }
});
