//! Filesystem denials: `EACCES` messages that name a path the policy forbids, and `execve`
//! failures of programs outside the readable roots.
//!
//! Landlock refuses with `EACCES`, which tools print as "Permission denied"; the namespace
//! layer's read-only mounts refuse changes with `EROFS` ("Read-only file system"), which can
//! only be a write, so such a message counts as a write of the path it names. The message alone
//! never decides: the path it names is resolved and checked against the policy, and what the
//! tool was doing (writing, reading, executing) is taken from the tool's own wording.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use cordon_sandbox::status::StatusRecord;
use regex::Regex;

use super::access::{mode_refuses_read, Access, Verdict};
use super::text::{quoted, says_eacces, Context};
use super::{Denial, EvidenceKind, Operation};

/// What a message says the tool was doing with the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Intent {
    /// Creating or changing it.
    Write,
    /// Removing or renaming it: acts on a symlink itself, not on its target.
    Unlink,
    /// Creating a temporary file (the path) beside the file it edits: the directory is what
    /// must be writable.
    TempBeside,
    Read,
    Execute,
    /// The message does not say (a shell redirection, Python's `open`).
    Unknown,
    /// A message with no errno at all ("error reading PATH", Java's "Unable to access jarfile
    /// PATH"): only a read the policy refuses of a file that exists explains it.
    ReadNoErrno,
    /// "cannot open PATH" with no errno: a file that exists and that the policy refuses is the
    /// denial; a missing one may just be missing (a read would say ENOENT, unprinted).
    UnknownNoErrno,
    /// sqlite's "unable to open database "PATH"": opened to read, or created when absent.
    OpenOrCreate,
    /// "cannot create PATH" with no errno: a write, where its directory exists (else ENOENT).
    WriteNoErrno,
}

/// Phrases of GNU coreutils, sed, bash and friends, most specific first.
const PHRASES: &[(&str, Intent)] = &[
    ("couldn't open temporary file", Intent::TempBeside),
    ("cannot open temporary file", Intent::TempBeside),
    ("cannot create temporary file", Intent::TempBeside),
    ("cannot touch", Intent::Write),
    ("cannot create", Intent::Write),
    ("cannot make directory", Intent::Write),
    ("cannot mkdir", Intent::Write),
    ("could not create", Intent::Write),
    ("unable to create", Intent::Write),
    ("could not write", Intent::Write),
    ("unable to write", Intent::Write),
    ("failed to create", Intent::Write),
    ("failed to write", Intent::Write),
    ("cannot overwrite", Intent::Write),
    ("couldn't edit", Intent::Write),
    ("for writing", Intent::Write),
    ("cannot remove", Intent::Unlink),
    ("unable to remove", Intent::Unlink),
    ("unable to unlink", Intent::Unlink),
    ("unable to rename", Intent::Unlink),
    ("failed to remove", Intent::Unlink),
    ("cannot unlink", Intent::Unlink),
    ("cannot move", Intent::Unlink),
    ("cannot rename", Intent::Unlink),
    ("cannot execute", Intent::Execute),
    ("cannot open directory", Intent::Read),
    ("for reading", Intent::Read),
    ("cannot open", Intent::Read),
    ("couldn't open file", Intent::Read),
    ("cannot access", Intent::Read),
    ("cannot read", Intent::Read),
    ("cannot stat", Intent::Read),
    ("error reading", Intent::Read),
];

/// Programs whose bare `prog: PATH: Permission denied` is about reading PATH.
const READERS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "wc",
    "sort",
    "uniq",
    "cut",
    "diff",
    "cmp",
    "od",
    "xxd",
    "ls",
    "find",
    "du",
    "file",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "awk",
    "gawk",
    "jq",
    "tar",
    "unzip",
];
/// Programs whose bare `prog: PATH: Permission denied` is about writing PATH.
const WRITERS: &[&str] = &["tee", "truncate", "install", "ln"];
const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh", "ash"];

/// A path mentioned next to "Permission denied", with what the tool was doing.
struct Mention {
    path: String,
    intent: Intent,
}

/// Calls whose files live in /dev/shm, as tracebacks and error messages name them.
const SHARED_MEMORY_CALLS: &[&str] = &["SemLock", "sem_open", "shm_open", "SharedMemory("];

fn mentions(ctx: &Context) -> Vec<Mention> {
    // git's "could not lock config file PATH": what it failed to create is PATH.lock (it
    // writes there and renames it over PATH).
    static GIT_LOCK: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"could not lock config file ([^\s:]+)").expect("static regex")
    });
    // autom4te's "cannot create NAME in DIR": the entry, not its directory.
    static NAME_IN_DIR: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"cannot create ([^\s/:]+) in (/[^\s:]+):").expect("static regex")
    });
    let mut renamed: Vec<(String, String)> = Vec::new();
    for l in &ctx.lines {
        if let Some(c) = GIT_LOCK.captures(l) {
            renamed.push((c[1].to_owned(), format!("{}.lock", &c[1])));
        }
        if let Some(c) = NAME_IN_DIR.captures(l) {
            let entry = Path::new(&c[2]).join(&c[1]);
            renamed.push((c[2].to_owned(), entry.display().to_string()));
        }
    }
    let mut out = raw_mentions(ctx);
    for m in &mut out {
        // A relative name was made absolute against a directory (`.git/config`).
        let renamed_to = renamed.iter().find_map(|(from, to)| {
            if *from == m.path {
                Some(to.clone())
            } else if !from.starts_with('/') && m.path.ends_with(&format!("/{from}")) {
                Some(format!("{}{}", m.path, &to[from.len()..]))
            } else {
                None
            }
        });
        if let Some(to) = renamed_to {
            m.path = to;
        }
    }
    out
}

fn raw_mentions(ctx: &Context) -> Vec<Mention> {
    static PYTHON: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\[Errno 13\] Permission denied: '([^']+)'(?: -> '([^']+)')?")
            .expect("static regex")
    });
    static NODE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"EACCES: permission denied, (\w+) '([^']+)'(?: -> '([^']+)')?")
            .expect("static regex")
    });
    let mut out = Vec::new();
    // POSIX semaphores and shared memory (Python's multiprocessing locks, `sem_open`,
    // `shm_open`) fail with a bare EACCES that names no path; they live in /dev/shm.
    let shared_memory = ctx
        .lines
        .iter()
        .any(|l| SHARED_MEMORY_CALLS.iter().any(|w| l.contains(w)));
    if shared_memory && ctx.lines.iter().any(|l| says_eacces(l)) {
        out.push(Mention {
            path: "/dev/shm".into(),
            intent: Intent::Write,
        });
    }
    // A message split over lines (unzip's "cannot create PATH" then "Read-only file system" on
    // the next line, 7z's "errno=30 : Read-only file system") is read as one line too.
    let lines = with_continuations(&ctx.lines);
    for original in &lines {
        let (line, read_only_fs) = match as_eacces(original) {
            Some(line) => (line, true),
            None => (original.clone(), false),
        };
        let line = &line;
        if !says_eacces(line) && !says_eacces_by_name(line) {
            continue;
        }
        let before = out.len();
        if says_eacces(line) {
            scan_line(line, ctx, &mut out, &PYTHON, &NODE);
        }
        // No shape of a known tool matched: every absolute path on the line, as for EROFS
        // below (Rust's "`PATH`: Permission denied (os error 13)", Ruby's "Permission denied
        // @ rb_sysopen - PATH", PHP's "FUNC(PATH): Failed to open stream: Permission denied",
        // perl's "Can't open perl script "PATH": Permission denied", C's `perror(PATH)`).
        // Not on a line about a connection (Docker's "permission denied while trying to
        // connect to ... unix:///var/run/docker.sock"): the network rules read those.
        let lower = line.to_lowercase();
        let about_network = ["connect", "socket", "dial ", "unix:"]
            .iter()
            .any(|w| lower.contains(w));
        if out.len() == before && !read_only_fs && !about_network {
            let intent = PHRASES
                .iter()
                .find(|(p, _)| lower.contains(p))
                .map_or(Intent::Unknown, |(_, i)| *i);
            out.extend(
                line_paths(line)
                    .into_iter()
                    // A path whose directory is missing fails with ENOENT, not EACCES.
                    .filter(|path| parent_exists(Path::new(path)))
                    .map(|path| Mention { path, intent }),
            );
        }
        if read_only_fs {
            for m in &mut out[before..] {
                m.intent = as_write(m.intent);
            }
        }
    }
    let stdout_lines = with_continuations(&ctx.stdout_lines);
    for line in lines.iter().chain(&stdout_lines) {
        out.extend(read_only_fs_paths(line, ctx));
    }
    for line in &ctx.lines {
        out.extend(errno_less(line));
        out.extend(masked_mkdir(line));
    }
    out.extend(rust_style(ctx));
    out.extend(named_arguments(ctx));
    out.extend(named_by_tool(ctx));
    out.extend(not_writable(ctx));
    out
}

/// Files that tools name by their own terms: sysctl's key (`permission denied on key
/// "vm.swappiness"` is a write of `/proc/sys/vm/swappiness`) and ninja's build log ("Error
/// writing to build log" is `.ninja_log` in the directory it entered or was given with `-C`).
fn named_by_tool(ctx: &Context) -> Vec<Mention> {
    static SYSCTL_KEY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"^sysctl: (?:permission denied on key|setting key) "?([A-Za-z0-9_.\-/]+)"?"#)
            .expect("static regex")
    });
    let mut out = Vec::new();
    for line in ctx.lines.iter().chain(&ctx.stdout_lines) {
        if let Some(c) = SYSCTL_KEY.captures(line) {
            let key = c[1].replace('.', "/");
            out.push(Mention {
                path: format!("/proc/sys/{}", key.trim_start_matches('/')),
                intent: Intent::WriteNoErrno,
            });
        }
        if line.contains("ninja: build stopped: Error writing to build log") {
            let dir = working_directory(ctx);
            out.push(Mention {
                path: dir.join(".ninja_log").display().to_string(),
                intent: Intent::WriteNoErrno,
            });
        }
    }
    out
}

/// A path the command was given (an argument, or the value of `-sOutputFile=` and the like)
/// that a failure line on stderr names, whatever errno the line gives: tools that report the
/// errno of a later call or none at all (ImageMagick's "unable to open image `PATH': No such
/// file or directory @ error/blob.c/OpenBlob", Ghostscript's "Could not open the file PATH .")
/// still name the file they were told to use. The argument is what ties the line to the
/// command: read only of a file that exists and the policy refuses reading, a write only of one
/// that does not exist, under a directory that does, which the policy refuses writing.
fn named_arguments(ctx: &Context) -> Vec<Mention> {
    const FAILURE_WORDS: &[&str] = &[
        "unable to",
        "could not",
        "couldn't",
        "cannot",
        "can't",
        "failed",
        "error",
    ];
    let failing: Vec<&String> = ctx
        .lines
        .iter()
        .filter(|l| {
            let lower = l.to_lowercase();
            FAILURE_WORDS.iter().any(|w| lower.contains(w))
        })
        .collect();
    if failing.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for command in ctx
        .commands
        .iter()
        .filter(|c| !SHELLS.contains(&c.program()))
    {
        for word in command.0.iter().skip(1) {
            let value = match word.split_once('=') {
                Some((flag, value)) if flag.starts_with('-') => value,
                _ if word.starts_with('-') => continue,
                _ => word.as_str(),
            };
            if !value.contains('/') || value.contains(char::is_whitespace) || value.contains(':') {
                continue;
            }
            let exists = ctx.cwd.join(value).exists();
            // A missing file the line calls missing is just missing (`cat /etc/none`), unless
            // the line is ImageMagick's, whose errno is a later call's.
            let about = |l: &str| {
                names_word(l, value) && (exists || !says_missing(l) || l.contains(" @ error/"))
            };
            if !failing.iter().any(|l| about(l)) {
                continue;
            }
            out.push(Mention {
                path: value.to_owned(),
                intent: if exists {
                    Intent::ReadNoErrno
                } else {
                    Intent::WriteNoErrno
                },
            });
        }
    }
    out
}

/// Whether `line` names `word` as a whole, not as part of a longer path (a `.` that ends the
/// sentence may follow it).
fn names_word(line: &str, word: &str) -> bool {
    let in_path = |c: char| c.is_alphanumeric() || "/._-".contains(c);
    line.match_indices(word).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let mut after = line[at + word.len()..].chars();
        let next = after.next();
        let ends_sentence = next == Some('.') && after.next().is_none_or(char::is_whitespace);
        before.is_none_or(|c| !in_path(c)) && (next.is_none_or(|c| !in_path(c)) || ends_sentence)
    })
}

/// Whether a message says a file is missing.
fn says_missing(line: &str) -> bool {
    let lower = line.to_lowercase();
    [
        "no such file",
        "not found",
        "does not exist",
        "doesn't exist",
        "enoent",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// Node's recursive `mkdir` reports the `ENOENT` of the `stat` it makes after a refused
/// `mkdir`, not the refusal: `ENOENT: no such file or directory, mkdir 'PATH'` where PATH's
/// directory exists cannot be a missing component, so it was the refusal (npm's refused
/// `mkdir` is the same). A write of PATH, where the policy refuses it.
fn masked_mkdir(line: &str) -> Vec<Mention> {
    static NODE_MKDIR: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"ENOENT: no such file or directory, mkdir '(/[^']+)'").expect("static regex")
    });
    NODE_MKDIR
        .captures(line)
        .map(|c| c[1].to_owned())
        .filter(|path| parent_exists(Path::new(path)))
        .map(|path| Mention {
            path,
            intent: Intent::WriteNoErrno,
        })
        .into_iter()
        .collect()
}

/// `lines`, then [`continued`]'s joined ones.
fn with_continuations(lines: &[String]) -> Vec<String> {
    lines.iter().cloned().chain(continued(lines)).collect()
}

/// Lines that carry an errno with nothing else, joined to the nearest non-empty line above
/// them, which names the path: `PREVIOUS: ERRNO`.
fn continued(lines: &[String]) -> Vec<String> {
    static ERRNO_ONLY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*(?:errno=\d+\s*:\s*)?(Read-only file system|Permission denied)\.?\s*$")
            .expect("static regex")
    });
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = ERRNO_ONLY.captures(line) else {
            continue;
        };
        if let Some(previous) = lines[..i].iter().rev().find(|l| !l.trim().is_empty()) {
            out.push(format!("{}: {}", previous.trim_end(), &c[1]));
        }
    }
    out
}

/// Names that mean EACCES without its words: Java's `AccessDeniedException: PATH`, Ruby's
/// `Errno::EACCES`.
fn says_eacces_by_name(line: &str) -> bool {
    line.contains("AccessDeniedException") || line.contains("Errno::EACCES")
}

/// Other errors a message can name: a line that says one of them is about that error, not a
/// denial the tool left unexplained.
const OTHER_ERRORS: &[&str] = &[
    "no such file",
    "not found",
    "file exists",
    "already exists",
    "is a directory",
    "not a directory",
    "no space left",
    "disk quota",
    "too many open files",
    "invalid argument",
    "resource busy",
    "directory not empty",
    "temporarily unavailable",
    "text file busy",
    "name too long",
    "input/output error",
    "too many levels of symbolic links",
    "read-only file system",
    "permission denied",
    "operation not permitted",
    "errno",
    "os error",
];

/// What a tool that prints no errno says when an open fails, and what it was doing.
const ERRNO_LESS_PHRASES: &[(&str, Intent)] = &[
    ("unable to open database", Intent::OpenOrCreate),
    ("error reading", Intent::ReadNoErrno),
    ("unable to access", Intent::ReadNoErrno),
    ("cannot read", Intent::ReadNoErrno),
    ("can't read", Intent::ReadNoErrno),
    ("could not read", Intent::ReadNoErrno),
    ("couldn't read", Intent::ReadNoErrno),
    ("failed to read", Intent::ReadNoErrno),
    ("unable to read", Intent::ReadNoErrno),
    ("cannot write to", Intent::WriteNoErrno),
    ("could not write", Intent::WriteNoErrno),
    ("couldn't write", Intent::WriteNoErrno),
    ("unable to write", Intent::WriteNoErrno),
    ("error writing", Intent::WriteNoErrno),
    ("failed to write", Intent::WriteNoErrno),
    ("were not written", Intent::WriteNoErrno),
    ("cannot create", Intent::WriteNoErrno),
    ("can't create", Intent::WriteNoErrno),
    ("could not create", Intent::WriteNoErrno),
    ("unable to create", Intent::WriteNoErrno),
    ("failed to create", Intent::WriteNoErrno),
    ("error creating", Intent::WriteNoErrno),
    // CMake's `Error copying file "A" to "B".` (B is the copy) and `cmake -E touch: failed to
    // update "PATH".`
    ("error copying file", Intent::WriteNoErrno),
    ("failed to update", Intent::WriteNoErrno),
    ("cannot open", Intent::UnknownNoErrno),
    ("can't open", Intent::UnknownNoErrno),
    ("unable to open", Intent::UnknownNoErrno),
    ("could not open", Intent::UnknownNoErrno),
    ("couldn't open", Intent::UnknownNoErrno),
    ("failed to open", Intent::UnknownNoErrno),
    ("error opening", Intent::UnknownNoErrno),
];

/// A failed open that the tool reports with no errno at all (sqlite's `Error: cannot open
/// "PATH"` and `unable to open database "PATH"`, javac's `error reading PATH`, Java's `Unable to
/// access jarfile PATH`, npm's "not written due to an error writing to the directory: PATH"):
/// the absolute paths on the line, with what the phrase says. The policy decides, and stricter
/// than for a message with an errno ([`message_denials`]): a read only of a file that exists,
/// an open of unknown purpose only of one that exists.
fn errno_less(line: &str) -> Vec<Mention> {
    let lower = line.to_lowercase();
    if OTHER_ERRORS.iter().any(|e| lower.contains(e)) {
        return Vec::new();
    }
    let Some((phrase, intent)) = ERRNO_LESS_PHRASES.iter().find(|(p, _)| lower.contains(p)) else {
        return Vec::new();
    };
    // Only what follows the phrase: "cannot create X from Y" names X; a path before the phrase
    // is the speaker or the context ("/usr/lib/x.rb:12: cannot open ...").
    let at = lower.find(phrase).map_or(0, |at| at + phrase.len());
    line_paths(&line[at..])
        .into_iter()
        .take(1)
        .map(|path| Mention {
            path,
            intent: *intent,
        })
        .collect()
}

/// Every absolute path on a message line that can be what the tool tried, in order. Left out:
/// the program that speaks (`/usr/bin/ld: `, unless its path is all the line names: C's
/// `perror(PATH)` prints `PATH: Permission denied`), a source location (`/x/y.rb:243:in`),
/// and the far side of a link or move (after `->`, or after ` to ` when a path comes before
/// it: `mv A to B`; "error writing dependencies to PATH" keeps its only path).
fn line_paths(line: &str) -> Vec<String> {
    static ABSOLUTE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"(?:^|[\s'"`(<\[=‘])(/[^\s'"`()<>\[\],;:’]+)"#).expect("static regex")
    });
    let candidates = |text: &str| -> Vec<String> {
        ABSOLUTE
            .captures_iter(text)
            .filter_map(|c| {
                let m = c.get(1)?;
                let after = &text[m.end()..];
                // `PATH:LINE` is where code is, not what it touched.
                if after.starts_with(':') && after[1..].starts_with(|c: char| c.is_ascii_digit()) {
                    return None;
                }
                let path = m.as_str().trim_end_matches('.');
                (path.len() > 1).then(|| path.to_owned())
            })
            .collect()
    };
    let mut rest = match line.split_once(": ") {
        Some((prog, after)) if !prog.contains(' ') && !candidates(after).is_empty() => after,
        // A program that speaks by its path ("/bin/sh: 1: cannot create out.txt: Read-only
        // file system", every make recipe's shell) is not what it failed to change, unless all
        // it says after its name is the errno ("/usr/local/bin/x: Permission denied").
        Some((prog, after)) if is_executable_file(prog) && !only_errno(after) => after,
        _ => line,
    };
    if let Some(at) = rest.find(" -> ") {
        rest = &rest[..at];
    }
    if let Some(at) = rest.find(" to ") {
        if !candidates(&rest[..at]).is_empty() {
            rest = &rest[..at];
        }
    }
    candidates(rest)
}

/// Whether `text` is an errno's words and nothing else: "Read-only file system",
/// "Permission denied (os error 13)".
fn only_errno(text: &str) -> bool {
    static ERRNO: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^(read-only file system|permission denied|operation not permitted)\.?(?: \(os error \d+\))?\.?$")
            .expect("static regex")
    });
    ERRNO.is_match(text.trim())
}

/// An existing regular file someone may execute: a program naming itself by its path.
fn is_executable_file(path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.starts_with('/')
        && std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Every path a "Read-only file system" line names, as a write: `EROFS` is only ever the
/// answer to a change, so whatever the tool's wording ("cannot open output file PATH",
/// "Can't open "PATH" for writing, Read-only file system", "PATH (Read-only file system)",
/// "Saving key "PATH" failed"), the path on that line is what it tried to change. Paths after
/// `->` or ` to ` are the other end of a link or a move (not changed there). A relative path
/// in tar's `tar: PATH: Cannot open` is relative to its `-C` directory. The policy must still
/// refuse writing it (checked by the caller), and its directory must exist (otherwise the
/// kernel would have said ENOENT).
fn read_only_fs_paths(line: &str, ctx: &Context) -> Vec<Mention> {
    let lower = line.to_lowercase();
    if !lower.contains("read-only file system") {
        return Vec::new();
    }
    // A removal or a rename acts on a link itself, not on where it leads
    // (update-alternatives' "unable to remove '/etc/alternatives/x.dpkg-tmp'").
    let removal = [
        "unable to remove",
        "cannot remove",
        "failed to remove",
        "cannot unlink",
        "unable to unlink",
        "cannot rename",
        "unable to rename",
        "failed to rename",
    ]
    .iter()
    .any(|p| lower.contains(p));
    let intent = if removal {
        Intent::Unlink
    } else {
        Intent::Write
    };
    let mut out: Vec<Mention> = line_paths(line)
        .into_iter()
        .filter(|path| parent_exists(Path::new(path)))
        .map(|path| Mention { path, intent })
        .collect();
    if out.is_empty() {
        out.extend(relative_read_only_fs_path(line, ctx));
    }
    out
}

/// The path a "Read-only file system" line names relative to some directory (a make recipe's
/// "cannot create out.txt", ninja's "can't create hello.o", Python's "[Errno 30] Read-only file
/// system: 'results.txt'", git's "could not lock config file .git/config"), made absolute
/// against [`working_directory`]. The policy must still refuse writing it.
fn relative_read_only_fs_path(line: &str, ctx: &Context) -> Option<Mention> {
    static PYTHON_STYLE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)read-only file system: '([^'/][^']*)'").expect("static regex")
    });
    static QUOTED_BEFORE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"'(\.?\.?/?[^'/\s][^'\s]*)'[^']*:\s*read-only file system")
            .expect("static regex")
    });
    let lower = line.to_lowercase();
    let relative = if let Some(c) = PYTHON_STYLE.captures(line) {
        c[1].to_owned()
    } else if let Some(c) = QUOTED_BEFORE.captures(&lower) {
        // Lowercased for the match only: the path is cut from the line as it was.
        let m = c.get(1)?;
        line.get(m.start()..m.end())?.to_owned()
    } else {
        // "tar: m: Cannot open": a segment that is one word is the path; otherwise the last
        // word of the last segment ("cannot create out.txt"). The speaker (a first segment of
        // one word) and line numbers ("/bin/sh: 1:", "line 1497") are neither.
        let at = lower.find(": read-only file system")?;
        let segments: Vec<&str> = line[..at].split(": ").map(str::trim).collect();
        let after_speaker = match segments.split_first() {
            Some((first, rest)) if !first.contains(' ') && !rest.is_empty() => rest,
            _ => &segments[..],
        };
        // The last word must look like a file's name ("hello.o", ".git/config") or be called
        // one (ld's "cannot open output file hello"): ninja's "Error writing to build log"
        // names none.
        match after_speaker
            .iter()
            .find(|s| !s.contains(' ') && looks_like_relative_path(s))
        {
            Some(whole) => (*whole).to_owned(),
            None => {
                let words: Vec<&str> = after_speaker.last()?.split_whitespace().collect();
                let (last, before) = match words.as_slice() {
                    [.., before, last] => (*last, Some(*before)),
                    [last] => (*last, None),
                    [] => return None,
                };
                let named_a_file = before.is_some_and(|w| w.eq_ignore_ascii_case("file"));
                if !(last.contains('.') || last.contains('/') || named_a_file) {
                    return None;
                }
                last.to_owned()
            }
        }
    };
    if !looks_like_relative_path(&relative) {
        return None;
    }
    let base = working_directory(ctx);
    let path = base.join(relative.trim_start_matches("./"));
    parent_exists(&path).then(|| Mention {
        path: path.display().to_string(),
        intent: Intent::Write,
    })
}

/// The directory a build's process most likely was in when it failed on a relative path: the
/// last one a build tool said it entered ("make[1]: Entering directory '/x'", "ninja: Entering
/// directory `build'"), else the one the tool was told to work in (`-C`, `--directory`, `-d`,
/// `--build`, `--instdir`, a script's `cd DIR`), else the working directory.
fn working_directory(ctx: &Context) -> PathBuf {
    static ENTERING: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"Entering directory [`'‘]([^'’]+)['’]").expect("static regex")
    });
    let entered = ctx
        .lines
        .iter()
        .chain(&ctx.stdout_lines)
        .rev()
        .find_map(|l| ENTERING.captures(l).map(|c| c[1].to_owned()));
    let told = || {
        ctx.commands.iter().find_map(|c| {
            // A script's `cd DIR && ./configure`.
            if c.program() == "cd" {
                return c.0.get(1).filter(|d| !d.starts_with('-')).cloned();
            }
            let flags: &[&str] = match c.program() {
                "tar" | "make" | "gmake" => &["-C", "--directory"],
                "ninja" | "git" | "meson" => &["-C"],
                "patch" => &["-d", "--directory"],
                "cmake" => &["--build", "-B"],
                "dpkg" => &["--instdir"],
                _ => &[],
            };
            flags
                .iter()
                .find_map(|f| c.flag_value(f))
                .filter(|d| !d.starts_with('-'))
                .map(str::to_owned)
        })
    };
    entered
        .or_else(told)
        .map_or(ctx.cwd.clone(), |d| ctx.cwd.join(d))
}

/// A word that can be a relative path: letters somewhere, no spaces, not an option.
fn looks_like_relative_path(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with('/')
        && !word.starts_with('-')
        && word.chars().any(|c| c.is_ascii_alphabetic())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+/@,=".contains(c))
}

/// "PATH isn't writable", "'PATH' is not writable", "not writable: PATH": tools that check for
/// write access (`test -w`, `access(W_OK)`) and give up without trying say so, with no errno
/// (pyenv's "cannot rehash: /root/.pyenv/shims isn't writable"). The path must still be one
/// the policy refuses to write.
fn not_writable(ctx: &Context) -> Vec<Mention> {
    static BEFORE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"['"`]?(/[^\s'"`:]*)['"`]?,? (?:or its parent directory )?(?:is not|isn't|is not owned or is not) writable"#)
            .expect("static regex")
    });
    static AFTER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r#"(?:not writable|no write permission|no write access|(?:don't|do not|doesn't|does not) have write permissions?(?: for| to| on)?(?: the)?)(?: to)?:? ['"`]?(/[^\s'"`:]*)"#,
        )
        .expect("static regex")
    });
    let mut out = Vec::new();
    for line in &ctx.lines {
        for re in [&*BEFORE, &*AFTER] {
            for c in re.captures_iter(line) {
                let path = c[1].trim_end_matches(['.', ',', ';']);
                if path.len() > 1 {
                    out.push(Mention {
                        path: path.to_owned(),
                        intent: Intent::Write,
                    });
                }
            }
        }
    }
    out
}

/// An EROFS message rewritten in the EACCES form the parsers read, or `None`.
fn as_eacces(line: &str) -> Option<String> {
    const FORMS: [(&str, &str); 4] = [
        (
            "[Errno 30] Read-only file system",
            "[Errno 13] Permission denied",
        ),
        ("EROFS: read-only file system", "EACCES: permission denied"),
        ("(os error 30)", "(os error 13)"),
        (": Read-only file system", ": Permission denied"),
    ];
    FORMS
        .iter()
        .find(|(erofs, _)| line.contains(erofs))
        .map(|(erofs, eacces)| line.replace(erofs, eacces))
}

/// What an EROFS failure was: a change, whatever the wording suggests.
fn as_write(intent: Intent) -> Intent {
    match intent {
        Intent::Read | Intent::Unknown | Intent::Execute => Intent::Write,
        other => other,
    }
}

fn scan_line(line: &str, ctx: &Context, out: &mut Vec<Mention>, python: &Regex, node: &Regex) {
    {
        if let Some(c) = python.captures(line) {
            let rename = c.get(2).is_some();
            for m in [c.get(1), c.get(2)].into_iter().flatten() {
                let intent = if rename {
                    Intent::Unlink
                } else {
                    Intent::Unknown
                };
                out.push(Mention {
                    path: m.as_str().to_owned(),
                    intent,
                });
            }
            return;
        }
        if let Some(c) = node.captures(line) {
            let intent = match c.get(1).map_or("", |m| m.as_str()) {
                "mkdir" | "copyfile" | "symlink" | "link" | "utime" | "chmod" => Intent::Write,
                "unlink" | "rmdir" | "rename" => Intent::Unlink,
                "scandir" | "opendir" | "stat" | "lstat" | "access" | "readlink" => Intent::Read,
                _ => Intent::Unknown,
            };
            // `symlink 'CONTENT' -> 'LINK'`: the content is text stored in the link, relative
            // to the link's directory, and nothing the call touched.
            let touched = match c.get(1).map(|m| m.as_str()) {
                Some("symlink") if c.get(3).is_some() => [None, c.get(3)],
                _ => [c.get(2), c.get(3)],
            };
            for m in touched.into_iter().flatten() {
                out.push(Mention {
                    path: m.as_str().to_owned(),
                    intent,
                });
            }
            return;
        }
        out.extend(gnu_style(line, ctx));
    }
}

/// Rust tools (cargo, rustup) put the path and the errno on different lines of an error chain:
///
/// ```text
/// Caused by:
///   failed to create directory `/etc/x`
///
/// Caused by:
///   Permission denied (os error 13)
/// ```
fn rust_style(ctx: &Context) -> Vec<Mention> {
    /// How far above the errno the path may be; an error chain is a few lines per cause.
    const LOOK_BACK: usize = 6;
    static CAUSE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"failed to (\w+)(?: [\w ]+)?(?: `([^`]+)`|: (/[^\s`'\x22]+))")
            .expect("static regex")
    });
    let mut out = Vec::new();
    for (i, line) in ctx.lines.iter().enumerate() {
        let read_only_fs = line.contains("(os error 30)");
        if !line.contains("(os error 13)") && !read_only_fs {
            continue;
        }
        let cause = ctx.lines[i.saturating_sub(LOOK_BACK)..=i]
            .iter()
            .rev()
            .find_map(|l| CAUSE.captures(l));
        if let Some(c) = cause {
            let intent = match &c[1] {
                "create" | "write" | "copy" | "link" | "persist" => Intent::Write,
                "remove" | "rename" => Intent::Unlink,
                "read" | "open" | "load" | "stat" => Intent::Read,
                _ => Intent::Unknown,
            };
            let intent = if read_only_fs {
                as_write(intent)
            } else {
                intent
            };
            if let Some(path) = c.get(2).or_else(|| c.get(3)) {
                out.push(Mention {
                    path: path.as_str().to_owned(),
                    intent,
                });
            }
        }
    }
    out
}

/// `prog: [line N: ][what ]PATH: Permission denied`, the shape of coreutils, sed, bash, tee.
fn gnu_style(line: &str, ctx: &Context) -> Vec<Mention> {
    let Some(head) = line.trim_end().strip_suffix(": Permission denied") else {
        return Vec::new();
    };
    let Some((prog, rest)) = head.split_once(": ") else {
        return Vec::new();
    };
    let prog = prog.rsplit('/').next().unwrap_or(prog);
    let lower = rest.to_lowercase();
    let phrase = PHRASES.iter().find(|(p, _)| lower.contains(p));
    // `ln`'s "'LINK' -> 'TARGET'": the link is what was created, the target is untouched.
    let quoted_paths = quoted(rest.split(" -> ").next().unwrap_or(rest));
    let paths: Vec<String> = if !quoted_paths.is_empty() {
        quoted_paths
    } else {
        // Unquoted: the path is the last `: ` segment, after the phrase if there is one.
        let last = rest.rsplit(": ").next().unwrap_or(rest);
        let last = match phrase {
            Some((p, _)) => match last.to_lowercase().find(p) {
                Some(at) => last[at + p.len()..].trim(),
                None => last,
            },
            None => last,
        };
        // jq's "Could not open file PATH": a word between the phrase and the path is no part
        // of it.
        let last = match last.find(" /") {
            Some(at) if !last.starts_with('/') => {
                last[at + 1..].split_whitespace().next().unwrap_or(last)
            }
            _ => last,
        };
        if last.is_empty() {
            Vec::new()
        } else {
            vec![last.to_owned()]
        }
    };
    let intent = match phrase {
        Some((_, intent)) => *intent,
        None if READERS.contains(&prog) => Intent::Read,
        None if WRITERS.contains(&prog) => Intent::Write,
        None => Intent::Unknown,
    };
    paths
        .into_iter()
        .map(|path| {
            let intent = if intent == Intent::Unknown && SHELLS.contains(&prog) {
                shell_intent(&path, ctx)
            } else {
                intent
            };
            Mention { path, intent }
        })
        .collect()
}

/// A shell prints the bare path both for a failed redirection and for a failed `execve`; the
/// script and the exit status (126 is "found but could not execute") tell them apart.
fn shell_intent(path: &str, ctx: &Context) -> Intent {
    let escaped = regex::escape(path);
    let redirect = |ops: &str| {
        Regex::new(&format!(r#"(?:{ops})\s*['"]?{escaped}(?:['"\s;|&)]|$)"#))
            .map(|re| ctx.scripts.iter().any(|s| re.is_match(s)))
            .unwrap_or(false)
    };
    if redirect(r">>?|>\||&>>?") {
        Intent::Write
    } else if redirect(r"<") {
        Intent::Read
    } else if ctx.exit_code == Some(126) {
        Intent::Execute
    } else {
        Intent::Unknown
    }
}

fn denial(operation: Operation, target: &Path, v: Verdict) -> Denial {
    Denial {
        operation,
        target: Some(target.display().to_string()),
        rule: v.rule,
        allow_with: v.allow_with,
        evidence: EvidenceKind::Text,
        count: 1,
    }
}

/// Denials named by "Permission denied" messages.
pub(crate) fn message_denials(ctx: &Context, access: &Access) -> Vec<Denial> {
    let mut out = Vec::new();
    for m in mentions(ctx) {
        let found = match m.intent {
            Intent::Write => {
                let p = access.resolve(&m.path, true);
                access
                    .write_verdict(&p)
                    .map(|v| denial(Operation::FileWrite, &p, v))
            }
            Intent::Unlink => {
                let p = access.resolve(&m.path, false);
                access
                    .removal_verdict(&p)
                    .map(|v| denial(Operation::FileWrite, &p, v))
            }
            // The temporary file itself is the target (sed's "couldn't open temporary file
            // /etc/sedAb12Cd"); the suggestion grants its directory, as for any new file.
            Intent::TempBeside => {
                let p = access.resolve(&m.path, false);
                access
                    .write_verdict(&p)
                    .map(|v| denial(Operation::FileWrite, &p, v))
            }
            Intent::Read => {
                let p = access.resolve(&m.path, true);
                access
                    .read_verdict(&p)
                    .map(|v| denial(Operation::FileRead, &p, v))
            }
            Intent::Execute => {
                let p = access.resolve(&m.path, true);
                access
                    .read_verdict(&p)
                    .map(|v| denial(Operation::FileExecute, &p, v))
            }
            Intent::Unknown => unknown_intent(access, access.resolve(&m.path, true)),
            Intent::ReadNoErrno => {
                let p = access.resolve(&m.path, true);
                p.exists()
                    .then(|| access.read_verdict(&p))
                    .flatten()
                    .map(|v| denial(Operation::FileRead, &p, v))
            }
            Intent::UnknownNoErrno => {
                let p = access.resolve(&m.path, true);
                p.exists().then(|| unknown_intent(access, p)).flatten()
            }
            Intent::WriteNoErrno => {
                let p = access.resolve(&m.path, true);
                parent_exists(&p)
                    .then(|| access.write_verdict(&p))
                    .flatten()
                    .map(|v| denial(Operation::FileWrite, &p, v))
            }
            Intent::OpenOrCreate => {
                let p = access.resolve(&m.path, true);
                if p.exists() {
                    unknown_intent(access, p)
                } else if parent_exists(&p) {
                    access
                        .write_verdict(&p)
                        .map(|v| denial(Operation::FileWrite, &p, v))
                } else {
                    None
                }
            }
        };
        out.extend(found);
    }
    out
}

fn parent_exists(path: &Path) -> bool {
    path.parent().is_some_and(Path::is_dir)
}

/// Decides a read-or-write message from the policy and the file itself.
fn unknown_intent(access: &Access, p: PathBuf) -> Option<Denial> {
    let write = access.write_verdict(&p);
    let read = access.read_verdict(&p);
    // A missing file cannot fail a read with EACCES (the kernel reports ENOENT before any
    // permission check), so EACCES on it was a create.
    if !p.exists() {
        return write.map(|w| denial(Operation::FileWrite, &p, w));
    }
    if let Some(r) = read {
        return Some(denial(Operation::FileRead, &p, r));
    }
    let write = write?;
    // Readable by policy but not writable: if its mode bits refuse reading, the EACCES can be
    // the file's own permissions, which no profile change fixes, so it is not called a denial.
    if mode_refuses_read(&p) == Some(true) {
        return None;
    }
    Some(denial(Operation::FileWrite, &p, write))
}

/// An `exec_error` with `EACCES` for a program outside the readable roots. `ENOENT` and the
/// rest are the command's own problem.
pub(crate) fn exec_record_denials(records: &[StatusRecord], access: &Access) -> Vec<Denial> {
    records
        .iter()
        .filter_map(|r| match r {
            StatusRecord::ExecError { program, errno, .. } if *errno == libc::EACCES => {
                let path = locate_program(program, access)?;
                access.read_verdict(&path).map(|v| Denial {
                    evidence: EvidenceKind::HelperRecord,
                    count: 1,
                    ..denial(Operation::FileExecute, &path, v)
                })
            }
            _ => None,
        })
        .collect()
}

/// The file `execvp` would have tried: a path with a slash as is, a bare name on this
/// process's PATH (the caller's, which the helper passes on).
fn locate_program(program: &str, access: &Access) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(access.resolve(program, true));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.exists())
        .map(|p| access.resolve(&p.to_string_lossy(), true))
}
