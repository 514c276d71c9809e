//! What a snapshot file holds, by name only: for `cordon snapshot show`, which must never
//! print a value (exports routinely carry tokens).
//!
//! ```
//! use cordon::snapshot::SnapshotSummary;
//!
//! let text = b"# Snapshot file\nunalias -a 2>/dev/null || :\ngreet () \n{ \n    echo hi\n}\n\
//!              set -o noclobber\nset +o xtrace\nalias ll='ls -l'\nexport TOKEN='s3cr3t\nexport X=1'\n";
//! let s = SnapshotSummary::parse(text);
//! assert_eq!(s.functions, ["greet"]);
//! assert_eq!(s.options_on, ["noclobber"]);
//! assert_eq!(s.aliases, ["ll"]);
//! assert_eq!(s.exports, ["TOKEN"]); // the value's second line is not an export
//! ```

use super::quote::is_identifier;

/// Names found in a snapshot, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotSummary {
    /// Function names.
    pub functions: Vec<String>,
    /// Aliases (including zsh suffix aliases).
    pub aliases: Vec<String>,
    /// Options the snapshot turns on (`set -o`, `shopt -s`, `setopt`).
    pub options_on: Vec<String>,
    /// Options it turns off.
    pub options_off: usize,
    /// Exported variable names.
    pub exports: Vec<String>,
}

impl SnapshotSummary {
    /// Reads a snapshot as written by [`create_snapshot`](super::create_snapshot). Function
    /// bodies are indented by every supported shell, so a header is recognised only at the
    /// start of a line; alias and export values may span lines inside quotes, which are
    /// skipped as a whole.
    pub fn parse(text: &[u8]) -> SnapshotSummary {
        let mut summary = SnapshotSummary::default();
        let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            i += 1;
            if let Some(rest) = line.strip_prefix(b"export ") {
                if let Some(name) = name_before_eq(rest) {
                    summary.exports.push(name);
                }
                i = skip_open_quote(&lines, i, after_eq(rest));
            } else if let Some(rest) = line.strip_prefix(b"alias ") {
                let mut rest = rest;
                while let Some(r) = rest
                    .strip_prefix(b"-s ")
                    .or_else(|| rest.strip_prefix(b"-g "))
                    .or_else(|| rest.strip_prefix(b"-- "))
                {
                    rest = r;
                }
                if let Some(eq) = rest.iter().position(|b| *b == b'=') {
                    let name = String::from_utf8_lossy(unquote(&rest[..eq])).into_owned();
                    if !name.is_empty() {
                        summary.aliases.push(name);
                    }
                }
                i = skip_open_quote(&lines, i, after_eq(rest));
            } else if let Some(name) = option_on(line) {
                summary.options_on.push(name);
            } else if is_option_off(line) {
                summary.options_off += 1;
            } else if let Some(name) = function_header(line) {
                summary.functions.push(name);
            }
        }
        summary
    }
}

fn name_before_eq(rest: &[u8]) -> Option<String> {
    let eq = rest.iter().position(|b| *b == b'=')?;
    let name = &rest[..eq];
    is_identifier(name).then(|| String::from_utf8_lossy(name).into_owned())
}

fn after_eq(rest: &[u8]) -> &[u8] {
    match rest.iter().position(|b| *b == b'=') {
        Some(eq) => &rest[eq + 1..],
        None => b"",
    }
}

/// `'ll'` and `ll` alike (zsh quotes unusual alias names).
fn unquote(name: &[u8]) -> &[u8] {
    name.strip_prefix(b"'")
        .and_then(|n| n.strip_suffix(b"'"))
        .unwrap_or(name)
}

/// When `value` leaves a quote open, the index of the first line after the one that closes it.
fn skip_open_quote(lines: &[&[u8]], mut next: usize, value: &[u8]) -> usize {
    let mut state = QuoteState::default();
    state.feed(value);
    while state.open() && next < lines.len() {
        state.feed(b"\n");
        state.feed(lines[next]);
        next += 1;
    }
    next
}

#[derive(Default)]
struct QuoteState {
    single: bool,
    double: bool,
    escaped: bool,
}

impl QuoteState {
    fn feed(&mut self, bytes: &[u8]) {
        for &c in bytes {
            if self.escaped {
                self.escaped = false;
                continue;
            }
            match c {
                b'\\' if !self.single => self.escaped = true,
                b'\'' if !self.double => self.single = !self.single,
                b'"' if !self.single => self.double = !self.double,
                _ => {}
            }
        }
    }

    fn open(&self) -> bool {
        self.single || self.double
    }
}

fn option_on(line: &[u8]) -> Option<String> {
    let name = [&b"set -o "[..], b"shopt -s ", b"setopt "]
        .iter()
        .find_map(|p| line.strip_prefix(*p))?;
    Some(String::from_utf8_lossy(name).trim().to_owned())
}

fn is_option_off(line: &[u8]) -> bool {
    [&b"set +o "[..], b"shopt -u ", b"unsetopt "]
        .iter()
        .any(|p| line.starts_with(p))
}

/// `name () ` (bash) or `name () {` (zsh, and bash/ksh as sh), at the start of a line.
fn function_header(line: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(line).ok()?.trim_end();
    let text = text.strip_suffix('{').unwrap_or(text).trim_end();
    let name = text.strip_suffix("()")?.trim_end();
    let ok = !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || "=(){}'\"$;&|<>`".contains(c));
    ok.then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_summary_zsh_and_dash_forms() {
        let zsh = b"greet () {\n\techo hi\n}\nsetopt autolist\nunsetopt dotglob\n\
                    alias -- ll='ls -l'\nalias -s txt=less\nexport A=$'x'\n";
        let s = SnapshotSummary::parse(zsh);
        assert_eq!(s.functions, ["greet"]);
        assert_eq!(s.options_on, ["autolist"]);
        assert_eq!(s.options_off, 1);
        assert_eq!(s.aliases, ["ll", "txt"]);
        assert_eq!(s.exports, ["A"]);
        let dash = b"set -o noclobber\nset +o xtrace\nalias nl='a\nalias fake=1'\nexport B='1'\n";
        let s = SnapshotSummary::parse(dash);
        assert_eq!(s.aliases, ["nl"]);
        assert_eq!(s.exports, ["B"]);
        assert_eq!(s.options_on, ["noclobber"]);
        assert!(s.functions.is_empty());
    }
}
