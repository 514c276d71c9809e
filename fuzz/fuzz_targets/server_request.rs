//! `cordon serve` reads one JSON-RPC message per line from an agent: any line must give a
//! message or an error reply (a JSON-RPC error object with a one-line message), and any call's
//! params must be accepted or refused with a one-line message, never a panic. Nothing runs:
//! params are only checked against what each method takes.
#![no_main]

use cordon::server::jsonrpc::{check_params, parse_message, Incoming};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse_message(text.trim()) {
        Err(reply) => {
            assert_eq!(reply["jsonrpc"], "2.0");
            let message = reply["error"]["message"].as_str().expect("an error message");
            assert!(!message.contains('\n'), "multi-line error: {message}");
            assert!(reply["error"]["code"].is_i64());
        }
        Ok(Incoming::Response { id, .. }) => {
            assert!(id.is_null() || id.is_string() || id.is_number());
        }
        Ok(Incoming::Request { method, params, .. }) => {
            if let Err((code, message)) = check_params(&method, params) {
                assert!(code < 0, "{code}");
                assert!(!message.contains('\n'), "multi-line error: {message}");
            }
        }
    }
});
