//! The patch applier: `cordon __apply-patch [--skip N]`, run INSIDE the sandbox (the helper
//! execs it like any command), so that Landlock and the mount layer judge every write and no
//! policy logic is repeated on the parent side. It reads the patch on stdin, and reports on
//! stdout one JSON line per file changed ([`AppliedLine::Applied`]) and, when it stops, one
//! [`AppliedLine::Failed`]; the failure is also printed on stderr in the wording tools use
//! (`cannot create '/etc/x': Permission denied`), which denial classification reads.
//!
//! Two phases: first every operation is planned in memory (files read, hunks applied, targets
//! checked), so a hunk that does not fit, a missing file or a planted symlink stops the patch
//! before anything is written; then the files are written in order, each one replaced whole
//! (see [`super::fs`]), and the first refusal stops the rest.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use super::apply::apply_chunks;
use super::diff::unified_diff;
use super::fs::{self, errno_name, FsError, FsStep};
use super::parse::{parse, PatchOp};

/// The hidden first argument that makes the `cordon` binary the patch applier.
pub const APPLY_PATCH_ARG: &str = "__apply-patch";

/// The largest patch the applier reads from stdin.
pub const MAX_PATCH_BYTES: u64 = 64 * 1024 * 1024;

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Created.
    Added,
    /// Content changed in place.
    Modified,
    /// Removed.
    Deleted,
    /// Moved (and perhaps changed): `path` is gone, `move_to` holds the content.
    Moved,
}

/// One file the patch changed, as it was actually changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The file (absolute).
    pub path: String,
    /// What happened to it.
    pub kind: ChangeKind,
    /// Where it went, for a move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_to: Option<String>,
    /// Unified diff of the change (`/dev/null` on the missing side of an add or delete).
    pub diff: String,
}

/// Why the applier stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchFailure {
    /// The operation (0-based, in patch order) that failed; a retry starts there.
    pub index: usize,
    /// The file it was about (absolute).
    pub path: String,
    /// The errno's name, when the kernel refused something.
    pub errno: Option<String>,
    /// What failed, one line.
    pub message: String,
}

/// One line of the applier's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppliedLine {
    /// Operation `index` changed this file.
    Applied {
        /// The operation.
        index: usize,
        /// The change.
        change: FileChange,
    },
    /// The applier stopped here.
    Failed(PatchFailure),
}

/// The applier's entry point: `args` after [`APPLY_PATCH_ARG`]. Exit 0 when every operation
/// applied, 1 when one failed, 2 on bad input (the parent validates first, so never in use).
pub fn applier_main(args: impl Iterator<Item = OsString>) -> i32 {
    let args: Vec<OsString> = args.collect();
    let skip = match args.as_slice() {
        [] => Some(0),
        [flag, n] if flag == "--skip" => n.to_str().and_then(|n| n.parse().ok()),
        _ => None,
    };
    let Some(skip) = skip else {
        eprintln!("apply_patch: usage: cordon {APPLY_PATCH_ARG} [--skip N] < PATCH");
        return 2;
    };
    let mut text = String::new();
    if let Err(e) = std::io::stdin()
        .take(MAX_PATCH_BYTES)
        .read_to_string(&mut text)
    {
        eprintln!("apply_patch: cannot read the patch on stdin: {e}");
        return 2;
    }
    let patch = match parse(&text) {
        Ok(patch) => patch,
        Err(e) => {
            eprintln!("apply_patch: {e}");
            return 2;
        }
    };
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(e) => {
            eprintln!("apply_patch: cannot read the working directory: {e}");
            return 2;
        }
    };
    let mut out = std::io::stdout().lock();
    let mut emit = |line: &AppliedLine| {
        // The parent reads these lines; a line it cannot get is a change it cannot report,
        // but the change was made, so the applier goes on.
        if let Ok(json) = serde_json::to_string(line) {
            let _ = writeln!(out, "{json}").and_then(|()| out.flush());
        }
    };
    match apply_ops(&patch.ops, skip, &cwd, &mut emit) {
        Ok(()) => 0,
        Err(failure) => {
            eprintln!("apply_patch: {}", failure.message);
            emit(&AppliedLine::Failed(failure));
            1
        }
    }
}

/// A file's state as the plan sees it: content and permission bits, or absent.
type State = Option<(String, u32)>;

/// One planned write.
enum Planned {
    Add {
        path: PathBuf,
        shown: String,
        content: String,
    },
    Delete {
        path: PathBuf,
        shown: String,
        old: String,
    },
    Update {
        path: PathBuf,
        shown: String,
        to: Option<(PathBuf, String)>,
        old: String,
        new: String,
        mode: u32,
    },
}

fn failure(index: usize, path: &Path, errno: Option<Errno>, message: String) -> PatchFailure {
    PatchFailure {
        index,
        path: fs::display(path),
        errno: errno.map(errno_name),
        message,
    }
}

fn fs_failure(index: usize, e: &FsError) -> PatchFailure {
    failure(index, &e.path, Some(e.errno), e.to_string())
}

/// Plans `ops[skip..]`, then writes them, calling `emit` after each file changed.
fn apply_ops(
    ops: &[PatchOp],
    skip: usize,
    cwd: &Path,
    emit: &mut dyn FnMut(&AppliedLine),
) -> Result<(), PatchFailure> {
    let planned = plan(ops, skip, cwd)?;
    for (index, step) in planned {
        match write(&step) {
            Ok(change) => emit(&AppliedLine::Applied { index, change }),
            Err((e, partial)) => {
                if let Some(change) = partial {
                    emit(&AppliedLine::Applied {
                        index,
                        change: *change,
                    });
                }
                return Err(fs_failure(index, &e));
            }
        }
    }
    Ok(())
}

fn plan(ops: &[PatchOp], skip: usize, cwd: &Path) -> Result<Vec<(usize, Planned)>, PatchFailure> {
    let mut overlay: HashMap<PathBuf, State> = HashMap::new();
    let current = |path: &Path,
                   index: usize,
                   overlay: &HashMap<PathBuf, State>|
     -> Result<State, PatchFailure> {
        if let Some(state) = overlay.get(path) {
            return Ok(state.clone());
        }
        match fs::read_file(path).map_err(|e| fs_failure(index, &e))? {
            None => Ok(None),
            Some((bytes, mode)) => match String::from_utf8(bytes) {
                Ok(text) => Ok(Some((text, mode))),
                Err(_) => Err(failure(
                    index,
                    path,
                    None,
                    format!(
                        "{}: not UTF-8 text; the patch applier edits text files only",
                        fs::display(path)
                    ),
                )),
            },
        }
    };
    let exists = |index: usize, path: &Path| {
        failure(
            index,
            path,
            Some(Errno::EEXIST),
            format!("cannot create '{}': File exists", fs::display(path)),
        )
    };
    let missing = |index: usize, path: &Path, step: FsStep| {
        let verb = if step == FsStep::Remove {
            "cannot remove"
        } else {
            "cannot open"
        };
        failure(
            index,
            path,
            Some(Errno::ENOENT),
            format!("{verb} '{}': No such file or directory", fs::display(path)),
        )
    };
    let mut planned = Vec::new();
    for (index, op) in ops.iter().enumerate().skip(skip) {
        let path = fs::normalize(cwd, op.path());
        let step = match op {
            PatchOp::Add {
                path: shown,
                content,
            } => {
                if current(&path, index, &overlay)?.is_some() {
                    return Err(exists(index, &path));
                }
                overlay.insert(path.clone(), Some((content.clone(), 0o644)));
                Planned::Add {
                    path,
                    shown: shown.clone(),
                    content: content.clone(),
                }
            }
            PatchOp::Delete { path: shown } => {
                let Some((old, _)) = current(&path, index, &overlay)? else {
                    return Err(missing(index, &path, FsStep::Remove));
                };
                overlay.insert(path.clone(), None);
                Planned::Delete {
                    path,
                    shown: shown.clone(),
                    old,
                }
            }
            PatchOp::Update {
                path: shown,
                move_to,
                chunks,
            } => {
                let Some((old, mode)) = current(&path, index, &overlay)? else {
                    return Err(missing(index, &path, FsStep::Read));
                };
                let new = apply_chunks(&old, chunks).map_err(|e| {
                    failure(index, &path, None, format!("{}: {e}", fs::display(&path)))
                })?;
                let to = match move_to {
                    Some(to_shown) => {
                        let to = fs::normalize(cwd, to_shown);
                        // A destination that already holds exactly the result is the trace of
                        // an attempt that moved the file and was stopped removing the source.
                        if to != path {
                            match current(&to, index, &overlay)? {
                                Some((there, _)) if there != new => return Err(exists(index, &to)),
                                _ => {}
                            }
                        }
                        Some((to, to_shown.clone()))
                    }
                    None => None,
                };
                match &to {
                    Some((to, _)) if *to != path => {
                        overlay.insert(path.clone(), None);
                        overlay.insert(to.clone(), Some((new.clone(), mode)));
                    }
                    _ => {
                        overlay.insert(path.clone(), Some((new.clone(), mode)));
                    }
                }
                Planned::Update {
                    path,
                    shown: shown.clone(),
                    to,
                    old,
                    new,
                    mode,
                }
            }
        };
        planned.push((index, step));
    }
    Ok(planned)
}

/// Makes one planned change and describes it; on failure, also what it did change (a move
/// whose source could not be removed has still written its destination).
fn write(step: &Planned) -> Result<FileChange, (FsError, Option<Box<FileChange>>)> {
    let alone = |e| (e, None);
    Ok(match step {
        Planned::Add {
            path,
            shown,
            content,
        } => {
            fs::create_file(path, content.as_bytes()).map_err(alone)?;
            FileChange {
                path: fs::display(path),
                kind: ChangeKind::Added,
                move_to: None,
                diff: unified_diff("/dev/null", &format!("b/{shown}"), "", content),
            }
        }
        Planned::Delete { path, shown, old } => {
            fs::remove_file(path).map_err(alone)?;
            FileChange {
                path: fs::display(path),
                kind: ChangeKind::Deleted,
                move_to: None,
                diff: unified_diff(&format!("a/{shown}"), "/dev/null", old, ""),
            }
        }
        Planned::Update {
            path,
            shown,
            to: Some((to, to_shown)),
            old,
            new,
            mode,
        } if to != path => {
            fs::replace_file(to, new.as_bytes(), *mode).map_err(alone)?;
            if let Err(e) = fs::remove_file(path) {
                let written = FileChange {
                    path: fs::display(to),
                    kind: ChangeKind::Added,
                    move_to: None,
                    diff: unified_diff("/dev/null", &format!("b/{to_shown}"), "", new),
                };
                return Err((e, Some(Box::new(written))));
            }
            FileChange {
                path: fs::display(path),
                kind: ChangeKind::Moved,
                move_to: Some(fs::display(to)),
                diff: unified_diff(&format!("a/{shown}"), &format!("b/{to_shown}"), old, new),
            }
        }
        Planned::Update {
            path,
            shown,
            old,
            new,
            mode,
            ..
        } => {
            fs::replace_file(path, new.as_bytes(), *mode).map_err(alone)?;
            FileChange {
                path: fs::display(path),
                kind: ChangeKind::Modified,
                move_to: None,
                diff: unified_diff(&format!("a/{shown}"), &format!("b/{shown}"), old, new),
            }
        }
    })
}

/// The applier's report lines in `stdout` (lines that are not reports are ignored).
pub fn read_report(stdout: &[u8]) -> Vec<AppliedLine> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}
