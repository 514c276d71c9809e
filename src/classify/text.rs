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
    /// stdout, line by line, for the one rule that may read it: a "Read-only file system"
    /// message, which only ever describes a change (screen, zip and 7z print theirs there).
    pub stdout_lines: Vec<String>,
    /// argv, lossily decoded.
    pub argv: Vec<String>,
    /// argv, then every simple command of the shell scripts it runs (`bash -lc 'curl ...'`,
    /// which is how the runtime starts everything), so that rules about a tool's own flags see
    /// the tool and not the shell.
    pub commands: Vec<Command>,
    /// Code given inline to an interpreter (`bash -c`, `python -c`, `node -e`, `perl -e`).
    pub scripts: Vec<String>,
    pub exit_code: Option<i32>,
    /// The directory the command started in.
    pub cwd: std::path::PathBuf,
}

/// How deep `bash -c "bash -c '...'"` is unwrapped; the runtime's wrapping is two levels.
const MAX_SHELL_NESTING: usize = 4;

const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh", "ash"];

impl Context {
    pub fn new(e: &Evidence) -> Context {
        let stderr = String::from_utf8_lossy(e.stderr).into_owned();
        let argv: Vec<String> = e
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut commands = Vec::new();
        let mut scripts = Vec::new();
        collect(Command(argv.clone()), 0, &mut commands, &mut scripts);
        Context {
            lines: stderr.lines().map(str::to_owned).collect(),
            stderr,
            stdout_lines: String::from_utf8_lossy(e.stdout)
                .lines()
                .map(str::to_owned)
                .collect(),
            argv,
            commands,
            scripts,
            exit_code: e.exit_code,
            cwd: e.cwd.to_path_buf(),
        }
    }
}

/// Records `cmd`, its inline code, and (for a shell) the commands of its script.
fn collect(cmd: Command, depth: usize, commands: &mut Vec<Command>, scripts: &mut Vec<String>) {
    let code = cmd.inline_code().map(str::to_owned);
    let is_shell = SHELLS.contains(&cmd.program());
    commands.push(cmd);
    if let Some(code) = code {
        if is_shell && depth < MAX_SHELL_NESTING {
            for inner in split_shell(&code) {
                collect(inner, depth + 1, commands, scripts);
            }
        }
        scripts.push(code);
    }
}

/// One simple command: its words, with leading assignments and wrappers (`env`, `exec`, ...)
/// removed so that the first word is the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command(pub Vec<String>);

impl Command {
    fn new(mut words: Vec<String>) -> Command {
        const WRAPPERS: &[&str] = &["exec", "command", "env", "nohup", "time", "builtin"];
        while let Some(first) = words.first() {
            let assignment = first
                .split_once('=')
                .is_some_and(|(name, _)| !name.is_empty() && !name.contains('/'));
            if assignment || WRAPPERS.contains(&first.as_str()) {
                words.remove(0);
            } else {
                break;
            }
        }
        Command(words)
    }

    /// The basename of the program.
    pub fn program(&self) -> &str {
        let first = self.0.first().map(String::as_str).unwrap_or("");
        first.rsplit('/').next().unwrap_or(first)
    }

    /// True when `word` is one of the arguments.
    pub fn has_arg(&self, word: &str) -> bool {
        self.0.iter().skip(1).any(|a| a == word)
    }

    /// The argument after `flag` (`--flag VALUE`) or glued to it (`--flag=VALUE`).
    pub fn flag_value(&self, flag: &str) -> Option<&str> {
        let glued = format!("{flag}=");
        for (i, a) in self.0.iter().enumerate().skip(1) {
            if a == flag {
                return self.0.get(i + 1).map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(&glued) {
                return Some(v);
            }
        }
        None
    }

    /// Code passed inline to a shell or an interpreter.
    fn inline_code(&self) -> Option<&str> {
        let program = self.program();
        let takes_code = |flag: &str| -> bool {
            if SHELLS.contains(&program) {
                // `-c`, and the bundles `-lc`, `-ec`, `-xc` the runtime and people write.
                flag.starts_with('-') && !flag.starts_with("--") && flag.contains('c')
            } else if program.starts_with("python") {
                flag == "-c"
            } else if matches!(program, "perl" | "ruby") {
                flag == "-e" || flag == "-E"
            } else if matches!(program, "node" | "nodejs" | "deno" | "bun") {
                matches!(flag, "-e" | "--eval" | "-p" | "--print")
            } else {
                false
            }
        };
        let at = self.0.iter().skip(1).position(|a| takes_code(a))?;
        self.0.get(at + 2).map(String::as_str)
    }
}

/// Splits a shell script into simple commands of words, honouring quotes and backslashes.
/// It is not a shell parser (no expansions, no here-documents); it only has to find the
/// program and its literal arguments in the one-liners agents run.
pub(crate) fn split_shell(script: &str) -> Vec<Command> {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote = Quote::None;
    let mut chars = script.chars().peekable();
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match quote {
            Quote::Single => {
                if c == '\'' {
                    quote = Quote::None;
                } else {
                    word.push(c);
                }
            }
            Quote::Double => match c {
                '"' => quote = Quote::None,
                '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                    if let Some(n) = chars.next() {
                        word.push(n);
                    }
                }
                _ => word.push(c),
            },
            Quote::None => match c {
                '\'' => {
                    quote = Quote::Single;
                    in_word = true;
                }
                '"' => {
                    quote = Quote::Double;
                    in_word = true;
                }
                '\\' => {
                    if let Some(n) = chars.next() {
                        if n != '\n' {
                            word.push(n);
                            in_word = true;
                        }
                    }
                }
                ' ' | '\t' => end_word(&mut words, &mut word, &mut in_word),
                ';' | '|' | '&' | '\n' | '(' | ')' => {
                    end_word(&mut words, &mut word, &mut in_word);
                    if !words.is_empty() {
                        commands.push(Command::new(std::mem::take(&mut words)));
                    }
                }
                '#' if !in_word => {
                    // A comment runs to the end of the line, which also ends the command.
                    for n in chars.by_ref() {
                        if n == '\n' {
                            break;
                        }
                    }
                    if !words.is_empty() {
                        commands.push(Command::new(std::mem::take(&mut words)));
                    }
                }
                _ => {
                    word.push(c);
                    in_word = true;
                }
            },
        }
    }
    end_word(&mut words, &mut word, &mut in_word);
    if !words.is_empty() {
        commands.push(Command::new(words));
    }
    commands
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
    fn shell_scripts_split_into_commands() {
        let words = |c: &Command| c.0.clone();
        let cmds = split_shell(
            "cd x && FOO=1 env curl -sS --unix-socket '/run/a b.sock' \"http://h/\" | tee o # c\nexec nc -U s",
        );
        let cmds: Vec<Vec<String>> = cmds.iter().map(words).collect();
        assert_eq!(
            cmds,
            vec![
                vec!["cd", "x"],
                vec!["curl", "-sS", "--unix-socket", "/run/a b.sock", "http://h/"],
                vec!["tee", "o"],
                vec!["nc", "-U", "s"],
            ]
        );
    }

    #[test]
    fn wrapped_commands_are_unwrapped() {
        let argv: Vec<std::ffi::OsString> = ["bash", "-c", "bash -lc 'getent hosts x'"]
            .iter()
            .map(Into::into)
            .collect();
        let policy = cordon_sandbox::SandboxPolicy::from_json(
            r#"{"version":1,"filesystem":{},"network":{"mode":"denied"},
               "enforcement":{"missing_layer":"refuse","carve_outs":"refuse"}}"#,
        )
        .unwrap();
        let ctx = Context::new(&Evidence {
            policy: &policy,
            cwd: std::path::Path::new("/"),
            argv: &argv,
            exit_code: Some(2),
            signal: None,
            records: &[],
            stdout: b"",
            stderr: b"",
            kernel: None,
            kernel_light: None,
            audit: None,
        });
        let programs: Vec<&str> = ctx.commands.iter().map(Command::program).collect();
        assert_eq!(programs, vec!["bash", "bash", "getent"]);
        assert_eq!(
            ctx.scripts,
            vec!["getent hosts x", "bash -lc 'getent hosts x'"]
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
