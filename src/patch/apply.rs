//! Applying an update's hunks to a file's text, in memory: either every hunk applies and the
//! new text is returned, or nothing is changed and the error says which hunk did not fit.
//!
//! Context is matched exactly first, then ignoring trailing whitespace, then ignoring
//! whitespace at both ends: a patch written from a slightly reformatted view of the file still
//! applies, and the file's own lines are what the unchanged context keeps.

use super::parse::Chunk;

/// A hunk that does not fit the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HunkError {
    /// The `@@` header line is not in the file (after the previous hunk).
    #[error("hunk at patch line {line}: the line {context:?} after `@@` is not in the file")]
    ContextNotFound {
        /// Patch line of the hunk.
        line: usize,
        /// The header text.
        context: String,
    },
    /// The lines the hunk replaces are not in the file (after the previous hunk).
    #[error(
        "hunk at patch line {line}: the lines it changes are not in the file (first: {first:?})"
    )]
    LinesNotFound {
        /// Patch line of the hunk.
        line: usize,
        /// The first line expected.
        first: String,
    },
}

/// How strictly two lines must agree, loosest last.
const MATCHERS: [fn(&str, &str) -> bool; 3] = [
    |a, b| a == b,
    |a, b| a.trim_end() == b.trim_end(),
    |a, b| a.trim() == b.trim(),
];

/// `original` with `chunks` applied. The result ends with a newline.
pub fn apply_chunks(original: &str, chunks: &[Chunk]) -> Result<String, HunkError> {
    let mut lines: Vec<&str> = original.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    // (start, lines replaced, the chunk, how many of its new lines are used)
    let mut replacements: Vec<(usize, usize, &Chunk, usize)> = Vec::new();
    let mut cursor = 0;
    for chunk in chunks {
        if let Some(context) = &chunk.context {
            let header = std::slice::from_ref(context);
            match seek(&lines, header, cursor, false) {
                Some(at) => cursor = at + 1,
                None => {
                    return Err(HunkError::ContextNotFound {
                        line: chunk.line,
                        context: context.clone(),
                    })
                }
            }
        }
        if chunk.old.is_empty() {
            // Pure insertion: after the header when there is one, else at the end.
            let at = if chunk.context.is_some() {
                cursor
            } else {
                lines.len()
            };
            replacements.push((at, 0, chunk, chunk.new.len()));
            // Hunks come in file order: nothing after an insertion at the end can match before
            // it (found by fuzzing: a later hunk matched above it and the splice went backwards).
            cursor = at;
            continue;
        }
        let mut old = &chunk.old[..];
        let mut new = &chunk.new[..];
        let mut found = seek(&lines, old, cursor, chunk.end_of_file);
        // A trailing empty context line stands for the file's final newline.
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            old = &old[..old.len() - 1];
            if new.last().is_some_and(String::is_empty) {
                new = &new[..new.len() - 1];
            }
            found = seek(&lines, old, cursor, chunk.end_of_file);
        }
        match found {
            Some(start) => {
                replacements.push((start, old.len(), chunk, new.len()));
                cursor = start + old.len();
            }
            None => {
                return Err(HunkError::LinesNotFound {
                    line: chunk.line,
                    first: chunk.old[0].clone(),
                })
            }
        }
    }
    let mut result: Vec<&str> = Vec::with_capacity(lines.len());
    let mut next = 0;
    for (start, len, chunk, used) in replacements {
        // Hunks are found in order from the cursor, so they never overlap.
        result.extend_from_slice(&lines[next..start]);
        for (j, text) in chunk.new[..used].iter().enumerate() {
            // A context line keeps the file's own text, which matched it perhaps loosely.
            match chunk.kept.get(j).copied().flatten() {
                Some(i) if i < len => result.push(lines[start + i]),
                _ => result.push(text),
            }
        }
        next = start + len;
    }
    result.extend_from_slice(&lines[next..]);
    let mut text = result.join("\n");
    text.push('\n');
    Ok(text)
}

/// Where `pattern` starts in `lines` at or after `from` (at the end first when `at_end`),
/// trying each matcher in turn.
fn seek(lines: &[&str], pattern: &[String], from: usize, at_end: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(from.min(lines.len()));
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - pattern.len();
    let fits = |start: usize, same: fn(&str, &str) -> bool| {
        pattern
            .iter()
            .zip(&lines[start..])
            .all(|(want, have)| same(have, want))
    };
    for same in MATCHERS {
        if at_end && last_start >= from && fits(last_start, same) {
            return Some(last_start);
        }
        if let Some(start) = (from..=last_start).find(|&s| fits(s, same)) {
            return Some(start);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk whose context lines are the `new` lines also in `old`, in order.
    fn chunk(context: Option<&str>, old: &[&str], new: &[&str], eof: bool) -> Chunk {
        let mut next_old = 0;
        let kept = new
            .iter()
            .map(|line| {
                let at = old[next_old..].iter().position(|o| o == line)? + next_old;
                next_old = at + 1;
                Some(at)
            })
            .collect();
        Chunk {
            context: context.map(str::to_owned),
            old: old.iter().map(|s| (*s).to_owned()).collect(),
            new: new.iter().map(|s| (*s).to_owned()).collect(),
            kept,
            end_of_file: eof,
            line: 3,
        }
    }

    #[test]
    fn patch_hunks_apply_in_order_with_header_context() {
        let file = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
        let chunks = [chunk(Some("fn b() {"), &["    x();"], &["    y();"], false)];
        assert_eq!(
            apply_chunks(file, &chunks).as_deref(),
            Ok("fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n")
        );
    }

    #[test]
    fn patch_context_matches_despite_whitespace_differences() {
        // The file has trailing spaces and tabs the patch's context does not.
        let file = "alpha  \n\tbeta\ngamma\n";
        let chunks = [chunk(
            None,
            &["alpha", "  beta", "gamma"],
            &["alpha", "BETA", "gamma"],
            false,
        )];
        // The unchanged context keeps the file's own text.
        assert_eq!(
            apply_chunks(file, &chunks).as_deref(),
            Ok("alpha  \nBETA\ngamma\n")
        );
    }

    #[test]
    fn patch_end_of_file_hunk_prefers_the_end() {
        let file = "x\ny\nx\n";
        let chunks = [chunk(None, &["x"], &["z"], true)];
        assert_eq!(apply_chunks(file, &chunks).as_deref(), Ok("x\ny\nz\n"));
        // Without the marker the first occurrence changes.
        let chunks = [chunk(None, &["x"], &["z"], false)];
        assert_eq!(apply_chunks(file, &chunks).as_deref(), Ok("z\ny\nx\n"));
    }

    #[test]
    fn patch_hunk_that_does_not_fit_is_an_error() {
        let file = "one\ntwo\n";
        let chunks = [
            chunk(None, &["one"], &["1"], false),
            chunk(None, &["three"], &["3"], false),
        ];
        assert_eq!(
            apply_chunks(file, &chunks),
            Err(HunkError::LinesNotFound {
                line: 3,
                first: "three".into()
            })
        );
        let chunks = [chunk(Some("fn nowhere()"), &["one"], &["1"], false)];
        assert!(matches!(
            apply_chunks(file, &chunks),
            Err(HunkError::ContextNotFound { .. })
        ));
    }

    #[test]
    fn patch_insertion_without_old_lines_appends() {
        assert_eq!(
            apply_chunks("a\n", &[chunk(None, &[], &["b"], false)]).as_deref(),
            Ok("a\nb\n")
        );
        // A file without a final newline gets one.
        assert_eq!(
            apply_chunks("a", &[chunk(None, &["a"], &["b"], false)]).as_deref(),
            Ok("b\n")
        );
    }
}

#[cfg(test)]
mod fuzz_regressions {
    use super::*;
    use crate::patch::parse;

    /// A pure insertion at the end followed by a hunk whose lines come earlier in the file is
    /// an error (hunks are in file order), not a splice that runs backwards.
    #[test]
    fn an_insertion_at_the_end_then_an_earlier_hunk_is_an_error() {
        let patch = parse(
            "*** Begin Patch\n*** Update File: f\n@@\n+appended\n@@\n-first\n+changed\n*** End Patch\n",
        )
        .expect("parses");
        let crate::patch::PatchOp::Update { chunks, .. } = &patch.ops[0] else {
            panic!("an update");
        };
        assert!(apply_chunks("first\nsecond\n", chunks).is_err());
    }
}
