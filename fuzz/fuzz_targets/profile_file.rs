//! Profile files come from users: parsing TOML or JSON must give a profile or a one-line error,
//! never a panic.
#![no_main]

use cordon::profile::PermissionProfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for result in [
        PermissionProfile::from_toml_str(text),
        PermissionProfile::from_json_str(text),
    ] {
        if let Err(e) = result {
            assert!(!e.to_string().contains('\n'), "multi-line error: {e}");
        }
    }
});
