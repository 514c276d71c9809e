//! What a login shell prints while its startup files run is untrusted (a `.bashrc` prints what
//! it likes and exports names of its choosing). Finding the sections and rendering the
//! snapshot must never panic on any output; and when the startup files set only variables,
//! the exports of the snapshot (the file every later command sources) must parse back as
//! exactly one `export NAME=WORD` per variable, each NAME a shell identifier, each WORD
//! quoted so that no value can end the quotes and run something.
#![no_main]

use std::collections::HashMap;

use cordon::snapshot::fuzzing::{output_with_env, render_capture};
use cordon::snapshot::ShellKind;
use libfuzzer_sys::fuzz_target;

const SEP: &str = "#cordon-section-fuzz";

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let kind = match selector % 3 {
        0 => ShellKind::Bash,
        1 => ShellKind::Zsh,
        _ => ShellKind::Sh,
    };
    let inherited: HashMap<Vec<u8>, Vec<u8>> = [(b"PATH".to_vec(), b"/usr/bin:/bin".to_vec())]
        .into_iter()
        .collect();
    if selector & 0x80 != 0 {
        // Any output at all: only "no panic".
        let _ = render_capture(kind, rest, SEP, &inherited);
        return;
    }
    let snapshot = render_capture(kind, &output_with_env(SEP, rest), SEP, &inherited)
        .expect("a complete capture renders");
    let Some(start) = find(&snapshot, b"\nexport ") else {
        return;
    };
    let mut cursor = &snapshot[start + 1..];
    while !cursor.is_empty() {
        cursor = cursor
            .strip_prefix(b"export ")
            .unwrap_or_else(|| panic!("not an export: {:?}", String::from_utf8_lossy(cursor)));
        let eq = cursor.iter().position(|b| *b == b'=').expect("NAME=");
        let name = &cursor[..eq];
        assert!(
            name.first().is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
                && name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_'),
            "export of a non-identifier {:?}",
            String::from_utf8_lossy(name)
        );
        cursor = skip_word(&cursor[eq + 1..]);
        cursor = cursor.strip_prefix(b"\n").expect("one export per line");
    }
});

/// Skips one word as `push_quoted` writes it: `'...'` runs and `\'`, up to the newline.
fn skip_word(mut s: &[u8]) -> &[u8] {
    loop {
        if let Some(after) = s.strip_prefix(b"'") {
            let close = after.iter().position(|b| *b == b'\'').expect("closed quote");
            s = &after[close + 1..];
        } else if let Some(after) = s.strip_prefix(b"\\'") {
            s = after;
        } else {
            return s;
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
