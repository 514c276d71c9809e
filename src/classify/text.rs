//! The command's output and argv, decoded once, with the small text helpers the rules share.

use std::sync::LazyLock;

use regex::Regex;

use super::Evidence;

/// The evidence as text.
pub(crate) struct Context {
    /// stderr, line by line. stdout is not read: it is the command's data (a `cat` of a log
    /// full of "Permission denied" lines is not an error), and tools report errors on stderr.
    pub lines: Vec<String>,
    /// All of stderr, for rules that look across lines.
    pub stderr: String,
    /// argv, lossily decoded.
    pub argv: Vec<String>,
    /// Code given inline to an interpreter (`bash -c`, `python -c`, `node -e`).
    pub scripts: Vec<String>,
    pub exit_code: Option<i32>,
}

impl Context {
    pub fn new(e: &Evidence) -> Context {
        let stderr = String::from_utf8_lossy(e.stderr).into_owned();
        let argv: Vec<String> = e
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut scripts = Vec::new();
        for pair in argv.windows(2) {
            if matches!(pair[0].as_str(), "-c" | "-e" | "--eval" | "-p" | "--print") {
                scripts.push(pair[1].clone());
            }
        }
        Context {
            lines: stderr.lines().map(str::to_owned).collect(),
            stderr,
            argv,
            scripts,
            exit_code: e.exit_code,
        }
    }

    /// The basename of argv[0].
    pub fn program(&self) -> &str {
        let first = self.argv.first().map(String::as_str).unwrap_or("");
        first.rsplit('/').next().unwrap_or(first)
    }

    /// True when `word` is one of the arguments.
    pub fn has_arg(&self, word: &str) -> bool {
        self.argv.iter().any(|a| a == word)
    }

    /// The argument after `flag` (`--flag VALUE`) or glued to it (`--flag=VALUE`).
    pub fn flag_value(&self, flag: &str) -> Option<&str> {
        let glued = format!("{flag}=");
        for (i, a) in self.argv.iter().enumerate() {
            if a == flag {
                return self.argv.get(i + 1).map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(&glued) {
                return Some(v);
            }
        }
        None
    }
}

/// The strings quoted in a message: GNU tools quote with '…' or ‘…’, Python with '…' or "…".
pub(crate) fn quoted(s: &str) -> Vec<String> {
    static QUOTED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"'([^']+)'|‘([^’]+)’|"([^"]+)"|`([^`]+)`"#).expect("static regex")
    });
    QUOTED
        .captures_iter(s)
        .filter_map(|c| {
            (1..=4)
                .find_map(|i| c.get(i))
                .map(|m| m.as_str().to_owned())
        })
        .collect()
}

/// `host:port` for every http(s)/git/ssh URL in `s`, with the scheme's default port.
pub(crate) fn url_endpoints(s: &str) -> Vec<String> {
    static URL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\b(https?|git|ssh|wss?|ftp)://(?:[^/@\s'`]*@)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d+))?")
            .expect("static regex")
    });
    URL.captures_iter(s)
        .filter_map(|c| {
            let scheme = c.get(1)?.as_str();
            let host = c.get(2)?.as_str();
            let port = match c.get(3) {
                Some(p) => p.as_str().to_owned(),
                None => match scheme {
                    "http" | "ws" => "80".into(),
                    "https" | "wss" => "443".into(),
                    "git" => "9418".into(),
                    "ssh" => "22".into(),
                    _ => "21".into(),
                },
            };
            Some(format!("{host}:{port}"))
        })
        .collect()
}

/// True for the forms tools use to print `EPERM`.
pub(crate) fn says_eperm(line: &str) -> bool {
    line.contains("Operation not permitted")
        || line.contains("operation not permitted")
        || line.contains("EPERM")
        || line.contains("[Errno 1]")
        || line.contains("(os error 1)")
}

/// True for the forms tools use to print `EACCES`.
pub(crate) fn says_eacces(line: &str) -> bool {
    line.contains("Permission denied")
        || line.contains("permission denied")
        || line.contains("EACCES")
        || line.contains("[Errno 13]")
        || line.contains("(os error 13)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_quoted_strings_in_every_style() {
        assert_eq!(
            quoted("mv: cannot move 'a' to ‘b c’: x \"d\""),
            vec!["a", "b c", "d"]
        );
    }

    #[test]
    fn urls_get_default_ports() {
        assert_eq!(
            url_endpoints("fatal: unable to access 'https://example.com/r.git/': x http://h:8080/"),
            vec!["example.com:443", "h:8080"]
        );
    }
}
