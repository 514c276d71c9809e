//! Patches come from a model: parsing any text must give a patch or a one-line error naming
//! the line, and applying the hunks of a parsed update to any file content must give the new
//! content or a hunk error, never a panic. A patch that parses also parses again from its JSON
//! form unchanged (what the server and the library pass around).
#![no_main]

use cordon::patch::{apply_chunks, parse, Patch, PatchOp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The part before the first NUL is the patch, the rest a file to apply it to.
    let (patch_text, file) = text.split_once('\0').unwrap_or((text, ""));
    let patch = match parse(patch_text) {
        Ok(patch) => patch,
        Err(e) => {
            assert!(!e.to_string().contains('\n'), "multi-line error: {e}");
            assert!(e.line >= 1);
            return;
        }
    };
    let json = serde_json::to_string(&patch).expect("a patch serialises");
    let again: Patch = serde_json::from_str(&json).expect("and parses back");
    assert_eq!(again, patch);
    for op in &patch.ops {
        if let PatchOp::Update { chunks, .. } = op {
            let _ = apply_chunks(file, chunks);
        }
    }
});
