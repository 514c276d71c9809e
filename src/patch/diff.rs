//! Unified diffs of two texts, line by line (Myers' algorithm), for the change report.

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// Above this many differing lines the diff is the whole old text against the whole new one:
/// the trace of Myers' algorithm grows with the square of the edit distance.
const MAX_EDIT_DISTANCE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    Keep,
    Remove,
    Insert,
}

/// The unified diff of `old` (called `old_name`) and `new` (`new_name`); empty when equal.
/// Use `/dev/null` as the name of the missing side of an added or deleted file.
pub fn unified_diff(old_name: &str, new_name: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = split_lines(old);
    let b: Vec<&str> = split_lines(new);
    let script = edit_script(&a, &b);
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    // Positions in a and b of each edit.
    let mut steps = Vec::with_capacity(script.len());
    let (mut i, mut j) = (0, 0);
    for edit in &script {
        steps.push((*edit, i, j));
        match edit {
            Edit::Keep => {
                i += 1;
                j += 1;
            }
            Edit::Remove => i += 1,
            Edit::Insert => j += 1,
        }
    }
    let changed: Vec<usize> = (0..steps.len())
        .filter(|&k| steps[k].0 != Edit::Keep)
        .collect();
    let mut k = 0;
    while k < changed.len() {
        // Group changes closer than twice the context into one hunk.
        let first = changed[k];
        let mut last = first;
        while k + 1 < changed.len() && changed[k + 1] - last <= 2 * CONTEXT + 1 {
            k += 1;
            last = changed[k];
        }
        k += 1;
        let start = first.saturating_sub(CONTEXT);
        let end = (last + CONTEXT + 1).min(steps.len());
        let (_, a_start, b_start) = steps[start];
        let a_len = steps[start..end]
            .iter()
            .filter(|s| s.0 != Edit::Insert)
            .count();
        let b_len = steps[start..end]
            .iter()
            .filter(|s| s.0 != Edit::Remove)
            .count();
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(a_start, a_len),
            range(b_start, b_len)
        ));
        for &(edit, ai, bj) in &steps[start..end] {
            let (sign, line) = match edit {
                Edit::Keep => (' ', a[ai]),
                Edit::Remove => ('-', a[ai]),
                Edit::Insert => ('+', b[bj]),
            };
            out.push(sign);
            out.push_str(line);
            out.push('\n');
        }
    }
    if !old.is_empty() && !old.ends_with('\n') || !new.is_empty() && !new.ends_with('\n') {
        out.push_str("\\ No newline at end of file\n");
    }
    out
}

fn split_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// `start,len` in unified-diff notation (1-based; an empty range names the line before it).
fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        _ => format!("{},{len}", start + 1),
    }
}

/// The shortest edit script from `a` to `b` (Myers 1986), or remove-all then insert-all when
/// the distance exceeds [`MAX_EDIT_DISTANCE`].
fn edit_script(a: &[&str], b: &[&str]) -> Vec<Edit> {
    let (n, m) = (a.len(), b.len());
    let max = (n + m).min(MAX_EDIT_DISTANCE);
    let offset = max + 1;
    let mut v = vec![0usize; 2 * max + 3];
    let mut trace: Vec<Vec<usize>> = Vec::new();
    let mut found = false;
    'outer: for d in 0..=max {
        trace.push(v.clone());
        let d = d as isize;
        let mut k = -d;
        while k <= d {
            let index = (k + offset as isize) as usize;
            let mut x = if k == -d || (k != d && v[index - 1] < v[index + 1]) {
                v[index + 1]
            } else {
                v[index - 1] + 1
            };
            let mut y = (x as isize - k) as usize;
            while x < n && y < m && a[x] == b[y] {
                x += 1;
                y += 1;
            }
            v[index] = x;
            if x >= n && y >= m {
                found = true;
                break 'outer;
            }
            k += 2;
        }
    }
    if !found {
        let mut script = vec![Edit::Remove; n];
        script.extend(std::iter::repeat_n(Edit::Insert, m));
        return script;
    }
    // Walk the trace back from (n, m).
    let mut script = Vec::new();
    let (mut x, mut y) = (n as isize, m as isize);
    for (d, v) in trace.iter().enumerate().rev() {
        let d = d as isize;
        let k = x - y;
        let at = |k: isize| v[(k + offset as isize) as usize] as isize;
        let prev_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = if d == 0 { 0 } else { at(prev_k) };
        let prev_y = if d == 0 { 0 } else { prev_x - prev_k };
        while x > prev_x && y > prev_y {
            script.push(Edit::Keep);
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            script.push(if x == prev_x {
                Edit::Insert
            } else {
                Edit::Remove
            });
        }
        x = prev_x;
        y = prev_y;
    }
    script.reverse();
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_diff_of_one_changed_line() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            unified_diff("a/f", "b/f", old, new),
            "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn patch_diff_of_added_and_deleted_files() {
        assert_eq!(
            unified_diff("/dev/null", "b/n", "", "x\ny\n"),
            "--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+x\n+y\n"
        );
        assert_eq!(
            unified_diff("a/n", "/dev/null", "x\n", ""),
            "--- a/n\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
        );
        assert_eq!(unified_diff("a", "b", "same\n", "same\n"), "");
    }

    #[test]
    fn patch_diff_separate_hunks_for_distant_changes() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=20)
            .map(|i| match i {
                2 => "two\n".to_owned(),
                19 => "nineteen\n".to_owned(),
                i => format!("{i}\n"),
            })
            .collect();
        let diff = unified_diff("a", "b", &old, &new);
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(
            diff.contains("@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"),
            "{diff}"
        );
        assert!(
            diff.contains("@@ -16,5 +16,5 @@\n 16\n 17\n 18\n-19\n+nineteen\n 20\n"),
            "{diff}"
        );
    }
}
