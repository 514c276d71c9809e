//! Shell quoting that is exact for every byte string a shell can receive.

/// Appends `bytes` to `out` as one shell word that bash, zsh and dash all read back as exactly
/// `bytes`.
///
/// Runs of bytes other than `'` go inside single quotes, where no byte is special; each `'` is
/// written as `\'` outside the quotes. Never emitting `''` next to a closing quote keeps the
/// result unambiguous even under zsh's `RC_QUOTES`. The empty string is `''`.
pub fn push_quoted(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.is_empty() {
        out.extend_from_slice(b"''");
        return;
    }
    for (i, run) in bytes.split(|b| *b == b'\'').enumerate() {
        if i > 0 {
            out.extend_from_slice(b"\\'");
        }
        if !run.is_empty() {
            out.push(b'\'');
            out.extend_from_slice(run);
            out.push(b'\'');
        }
    }
}

/// `bytes` as one quoted shell word.
pub fn quoted(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 2);
    push_quoted(&mut out, bytes);
    out
}

/// True for names a shell can assign and export: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_identifier(name: &[u8]) -> bool {
    match name.split_first() {
        Some((first, rest)) => {
            (first.is_ascii_alphabetic() || *first == b'_')
                && rest.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_quote_forms() {
        assert_eq!(quoted(b""), b"''");
        assert_eq!(quoted(b"abc"), b"'abc'");
        assert_eq!(quoted(b"'"), b"\\'");
        assert_eq!(quoted(b"a'b"), b"'a'\\''b'");
        assert_eq!(quoted(b"''x"), b"\\'\\''x'");
        assert_eq!(quoted(b"x\n$y"), b"'x\n$y'");
    }

    #[test]
    fn snapshot_identifiers() {
        assert!(is_identifier(b"_"));
        assert!(is_identifier(b"PATH_2"));
        assert!(!is_identifier(b""));
        assert!(!is_identifier(b"2X"));
        assert!(!is_identifier(b"A-B"));
        assert!(!is_identifier(b"BASH_FUNC_f%%"));
    }
}
