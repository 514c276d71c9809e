//! The patch format: `*** Begin Patch`, then `*** Add File:`, `*** Delete File:` and
//! `*** Update File:` (optionally `*** Move to:`, then `@@` hunks of ` `, `-` and `+` lines,
//! optionally closed by `*** End of File`), then `*** End Patch`.
//!
//! Parsing is complete before anything is applied, so a malformed patch touches nothing; the
//! error names the line (1-based) and quotes it.

use serde::{Deserialize, Serialize};

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE_TO: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// A parsed patch: its operations in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Patch {
    /// The operations, applied in this order.
    pub ops: Vec<PatchOp>,
}

/// One file operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum PatchOp {
    /// Create a file that does not exist yet.
    Add {
        /// As written in the patch (relative paths are taken from the working directory).
        path: String,
        /// Its content: the `+` lines, each ended by a newline.
        content: String,
    },
    /// Remove a file.
    Delete {
        /// As written in the patch.
        path: String,
    },
    /// Change a file, and perhaps move it.
    Update {
        /// As written in the patch.
        path: String,
        /// Where the changed file goes instead.
        move_to: Option<String>,
        /// The hunks, in file order.
        chunks: Vec<Chunk>,
    },
}

impl PatchOp {
    /// The path the operation names first.
    pub fn path(&self) -> &str {
        match self {
            PatchOp::Add { path, .. } | PatchOp::Delete { path } | PatchOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// One hunk of an update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// The text after `@@ `: a line to find first (a function header), narrowing where the
    /// hunk applies.
    pub context: Option<String>,
    /// Context and `-` lines: what must be there.
    pub old: Vec<String>,
    /// Context and `+` lines: what replaces it.
    pub new: Vec<String>,
    /// For each line of `new`, the line of `old` it is (a context line), so that applying
    /// keeps the file's own text there when context matched loosely.
    pub kept: Vec<Option<usize>>,
    /// `*** End of File` closed the hunk: it applies at the end of the file.
    pub end_of_file: bool,
    /// The patch line the hunk starts on, for messages.
    pub line: usize,
}

/// A malformed patch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid patch, line {line}: {reason} (line: {text:?})")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// The line as written (empty past the end).
    pub text: String,
    /// What was expected.
    pub reason: String,
}

/// Parses `text`. Blank lines around the patch and trailing whitespace on marker lines are
/// tolerated; anything else out of place is an error naming its line.
pub fn parse(text: &str) -> Result<Patch, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let error = |index: usize, reason: &str| ParseError {
        line: index + 1,
        text: lines
            .get(index)
            .map(|l| (*l).to_owned())
            .unwrap_or_default(),
        reason: reason.to_owned(),
    };
    let marker = |index: usize| lines.get(index).map(|l| l.trim_end()).unwrap_or("");
    let mut i = 0;
    while i < lines.len() && lines[i].trim().is_empty() {
        i += 1;
    }
    if marker(i) != BEGIN {
        return Err(error(i, "expected `*** Begin Patch`"));
    }
    i += 1;
    let mut ops = Vec::new();
    loop {
        if i >= lines.len() {
            return Err(error(i, "the patch ends without `*** End Patch`"));
        }
        let line = marker(i);
        if line == END {
            i += 1;
            break;
        }
        if let Some(path) = after(line, ADD) {
            let path =
                file_name(path).ok_or_else(|| error(i, "the file name is empty or holds a NUL"))?;
            i += 1;
            let mut content = String::new();
            while i < lines.len() && !lines[i].starts_with("***") {
                match lines[i].strip_prefix('+') {
                    Some(rest) => {
                        content.push_str(rest);
                        content.push('\n');
                    }
                    None => return Err(error(i, "every line of an added file starts with `+`")),
                }
                i += 1;
            }
            ops.push(PatchOp::Add { path, content });
        } else if let Some(path) = after(line, DELETE) {
            let path =
                file_name(path).ok_or_else(|| error(i, "the file name is empty or holds a NUL"))?;
            i += 1;
            ops.push(PatchOp::Delete { path });
        } else if let Some(path) = after(line, UPDATE) {
            let path =
                file_name(path).ok_or_else(|| error(i, "the file name is empty or holds a NUL"))?;
            let update_line = i;
            i += 1;
            let mut move_to = None;
            if let Some(to) = after(marker(i), MOVE_TO) {
                move_to = Some(
                    file_name(to)
                        .ok_or_else(|| error(i, "the file name is empty or holds a NUL"))?,
                );
                i += 1;
            }
            let (chunks, next) =
                parse_chunks(&lines, i).map_err(|(at, reason)| error(at, reason))?;
            if chunks.is_empty() && move_to.is_none() {
                return Err(error(
                    update_line,
                    "an update without a hunk or a move changes nothing",
                ));
            }
            i = next;
            ops.push(PatchOp::Update {
                path,
                move_to,
                chunks,
            });
        } else {
            return Err(error(
                i,
                "expected `*** Add File:`, `*** Delete File:`, `*** Update File:` or `*** End Patch`",
            ));
        }
    }
    if let Some(extra) = (i..lines.len()).find(|&k| !lines[k].trim().is_empty()) {
        return Err(error(extra, "text after `*** End Patch`"));
    }
    if ops.is_empty() {
        return Err(error(0, "the patch has no file operation"));
    }
    Ok(Patch { ops })
}

/// The rest of `line` after the marker `name` (`*** Add File:`), when it is that marker.
fn after<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(name)?;
    (rest.is_empty() || rest.starts_with(' ')).then_some(rest)
}

fn file_name(text: &str) -> Option<String> {
    let name = text.trim();
    (!name.is_empty() && !name.contains('\0')).then(|| name.to_owned())
}

/// The hunks of one update, from line `start` up to the next `***` line other than
/// `*** End of File`; returns them and the index after them.
fn parse_chunks(
    lines: &[&str],
    start: usize,
) -> Result<(Vec<Chunk>, usize), (usize, &'static str)> {
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut i = start;
    let mut current: Option<Chunk> = None;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_end() == END_OF_FILE {
            match current.as_mut() {
                Some(chunk) if !chunk.old.is_empty() || !chunk.new.is_empty() => {
                    chunk.end_of_file = true;
                }
                _ => return Err((i, "`*** End of File` must close a hunk")),
            }
            chunks.extend(current.take());
            i += 1;
            continue;
        }
        if line.starts_with("***") {
            break;
        }
        if line.trim_end() == "@@" || line.starts_with("@@ ") {
            if let Some(chunk) = current.take() {
                if chunk.old.is_empty() && chunk.new.is_empty() {
                    return Err((chunk.line - 1, "an `@@` hunk has no lines"));
                }
                chunks.push(chunk);
            }
            let context = line
                .strip_prefix("@@ ")
                .map(str::trim_end)
                .filter(|c| !c.is_empty());
            current = Some(Chunk {
                context: context.map(str::to_owned),
                old: Vec::new(),
                new: Vec::new(),
                kept: Vec::new(),
                end_of_file: false,
                line: i + 1,
            });
            i += 1;
            continue;
        }
        // The first hunk may start without `@@`.
        let chunk = current.get_or_insert_with(|| Chunk {
            context: None,
            old: Vec::new(),
            new: Vec::new(),
            kept: Vec::new(),
            end_of_file: false,
            line: i + 1,
        });
        match line.chars().next() {
            // An empty line is an empty context line: editors strip the lone space.
            None | Some(' ') => {
                let text = line.get(1..).unwrap_or("");
                chunk.kept.push(Some(chunk.old.len()));
                chunk.old.push(text.to_owned());
                chunk.new.push(text.to_owned());
            }
            Some('-') => chunk.old.push(line[1..].to_owned()),
            Some('+') => {
                chunk.kept.push(None);
                chunk.new.push(line[1..].to_owned());
            }
            Some(_) => {
                return Err((
                    i,
                    "a hunk line starts with ` `, `-` or `+` (or the hunk header `@@`)",
                ))
            }
        }
        i += 1;
    }
    if let Some(chunk) = current {
        if chunk.old.is_empty() && chunk.new.is_empty() {
            return Err((chunk.line - 1, "an `@@` hunk has no lines"));
        }
        chunks.push(chunk);
    }
    Ok((chunks, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_parses_every_operation() {
        let text = "*** Begin Patch\n*** Add File: new.txt\n+one\n+two\n*** Delete File: old.txt\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@ fn main() {\n-    old();\n+    new();\n \n@@\n-last\n+LAST\n*** End of File\n*** End Patch\n";
        let patch = parse(text).expect("parses");
        assert_eq!(
            patch.ops,
            vec![
                PatchOp::Add {
                    path: "new.txt".into(),
                    content: "one\ntwo\n".into()
                },
                PatchOp::Delete {
                    path: "old.txt".into()
                },
                PatchOp::Update {
                    path: "src/a.rs".into(),
                    move_to: Some("src/b.rs".into()),
                    chunks: vec![
                        Chunk {
                            context: Some("fn main() {".into()),
                            old: vec!["    old();".into(), "".into()],
                            new: vec!["    new();".into(), "".into()],
                            kept: vec![None, Some(1)],
                            end_of_file: false,
                            line: 8,
                        },
                        Chunk {
                            context: None,
                            old: vec!["last".into()],
                            new: vec!["LAST".into()],
                            kept: vec![None],
                            end_of_file: true,
                            line: 12,
                        },
                    ],
                },
            ]
        );
    }

    #[test]
    fn patch_malformed_names_the_line() {
        let cases = [
            ("hello\n", 1, "hello", "expected `*** Begin Patch`"),
            ("*** Begin Patch\n*** Add File: a\n+x\n", 4, "", "the patch ends without `*** End Patch`"),
            ("*** Begin Patch\n*** Add File: a\nx\n*** End Patch\n", 3, "x", "every line of an added file starts with `+`"),
            ("*** Begin Patch\n*** Update File: a\n@@\n~x\n*** End Patch\n", 4, "~x", "a hunk line starts with ` `, `-` or `+` (or the hunk header `@@`)"),
            ("*** Begin Patch\n*** Frobnicate File: a\n*** End Patch\n", 2, "*** Frobnicate File: a", "expected `*** Add File:`, `*** Delete File:`, `*** Update File:` or `*** End Patch`"),
            ("*** Begin Patch\n*** Update File: a\n*** End Patch\n", 2, "*** Update File: a", "an update without a hunk or a move changes nothing"),
            ("*** Begin Patch\n*** Delete File:  \n*** End Patch\n", 2, "*** Delete File:  ", "the file name is empty or holds a NUL"),
            ("*** Begin Patch\n*** End Patch\n", 1, "*** Begin Patch", "the patch has no file operation"),
            ("*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore\n", 4, "more", "text after `*** End Patch`"),
        ];
        for (text, line, quoted, reason) in cases {
            let err = parse(text).expect_err(text);
            assert_eq!(
                (err.line, err.text.as_str(), err.reason.as_str()),
                (line, quoted, reason),
                "{text}"
            );
        }
        let err = parse("x\n").expect_err("bad");
        assert_eq!(
            err.to_string(),
            "invalid patch, line 1: expected `*** Begin Patch` (line: \"x\")"
        );
    }
}
