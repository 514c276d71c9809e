//! `cordon run` at a terminal: the command gets a pseudo-terminal of its own, as its
//! controlling terminal, and cordon relays between it and the caller's terminal (put in raw
//! mode), the way `ssh -t` or `script` do. Colours, progress bars, pagers, editors and password
//! prompts then behave as they would without cordon; Ctrl-C reaches the command through its
//! terminal's own line discipline; the window size follows the caller's (SIGWINCH). The
//! caller's terminal is never handed to the sandbox, so nothing confined can reach it (no
//! `TIOCSTI` into the user's shell, no settings left behind).
//!
//! Used only when stdin, stdout and stderr are all terminals; with anything redirected the
//! plain pass-through keeps streams apart. Denials are still reported after the command ends,
//! from what came through the terminal.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use anyhow::{anyhow, Context};
use tokio::io::AsyncReadExt;

use cordon::exec::pty::{AsyncStream, PtyMaster};
use cordon::exec::{ExecEvent, ExecRequest, ExecResult, Pty, Sandbox, StdinSource, WindowSize};

/// True when fds 0, 1 and 2 are all terminals.
pub fn wanted() -> bool {
    // SAFETY: isatty only queries the descriptors.
    (0..=2).all(|fd| unsafe { libc::isatty(fd) } == 1)
}

fn window_of(fd: RawFd) -> WindowSize {
    // SAFETY: winsize is plain data; all-zero is valid.
    let mut w: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `w`.
    if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut w) } == 0 && w.ws_row > 0 && w.ws_col > 0 {
        WindowSize {
            rows: w.ws_row,
            cols: w.ws_col,
        }
    } else {
        WindowSize::default()
    }
}

/// The caller's terminal in raw mode (the command's own terminal does the line editing and
/// the signal keys) and its file status flags, both put back on drop. `SavedTerminals` in
/// `main` restores the settings too, whichever way the run ends.
struct CallerTerminal {
    termios: libc::termios,
    flags: libc::c_int,
}

impl CallerTerminal {
    fn enter() -> anyhow::Result<CallerTerminal> {
        // SAFETY: termios is plain data; tcgetattr fills it.
        let mut termios: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr writes one termios for fd 0.
        if unsafe { libc::tcgetattr(0, &mut termios) } != 0 {
            return Err(std::io::Error::last_os_error())
                .context("cannot read the terminal's settings");
        }
        // SAFETY: F_GETFL on fd 0; no memory passed.
        let flags = unsafe { libc::fcntl(0, libc::F_GETFL) };
        let mut raw = termios;
        // SAFETY: cfmakeraw edits the local copy; tcsetattr reads it.
        unsafe {
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(0, libc::TCSANOW, &raw) != 0 {
                return Err(std::io::Error::last_os_error())
                    .context("cannot put the terminal in raw mode");
            }
        }
        Ok(CallerTerminal { termios, flags })
    }
}

impl Drop for CallerTerminal {
    fn drop(&mut self) {
        // SAFETY: puts back what `enter` read: a termios from tcgetattr and F_GETFL's flags
        // (the relay made the shared file description non-blocking, which a shell's next
        // program must not inherit).
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.termios);
            if self.flags >= 0 {
                libc::fcntl(0, libc::F_SETFL, self.flags);
            }
        }
    }
}

/// The command's suspend character, when its terminal turns it into `SIGTSTP` (`ISIG` on).
fn suspend_key(master: &PtyMaster) -> Option<u8> {
    // SAFETY: termios is plain data; tcgetattr on the master reads the terminal's settings.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr writes one termios into `t`.
    if unsafe { libc::tcgetattr(master.0.as_raw_fd(), &mut t) } != 0 {
        return None;
    }
    let key = t.c_cc[libc::VSUSP];
    (t.c_lflag & libc::ISIG != 0 && key != 0).then_some(key)
}

/// Stops cordon as the terminal stops a job (caller's settings back first), and when the
/// caller's shell continues it, takes raw mode again and continues the command's foreground
/// group, which its own terminal stopped.
fn suspend_until_continued(saved: &libc::termios, saved_flags: libc::c_int, master: &PtyMaster) {
    // SAFETY: tcsetattr reads a termios from tcgetattr; fcntl sets file status flags read by
    // F_GETFL; raise stops this process until a SIGCONT (cordon leaves SIGTSTP at its default
    // action); cfmakeraw/tcsetattr work on locals; tcgetpgrp and killpg query and signal.
    unsafe {
        // The shell shares the terminal's file description: it must get it blocking, as it
        // left it, and it may reset the flags itself while cordon is stopped.
        libc::tcsetattr(0, libc::TCSANOW, saved);
        if saved_flags >= 0 {
            libc::fcntl(0, libc::F_SETFL, saved_flags);
        }
        libc::raise(libc::SIGTSTP);
        if saved_flags >= 0 {
            libc::fcntl(0, libc::F_SETFL, saved_flags | libc::O_NONBLOCK);
        }
        let mut raw = *saved;
        libc::cfmakeraw(&mut raw);
        libc::tcsetattr(0, libc::TCSANOW, &raw);
        let _ = master.set_window_size(window_of(1));
        let foreground = libc::tcgetpgrp(master.0.as_raw_fd());
        if foreground > 1 {
            libc::killpg(foreground, libc::SIGCONT);
        }
    }
}

/// Runs `request` on a PTY relayed to the caller's terminal; returns the runtime's result.
pub async fn run(
    sandbox: &Sandbox,
    mut request: ExecRequest,
    group: &std::sync::atomic::AtomicI32,
) -> anyhow::Result<ExecResult> {
    use std::io::Write;
    let pty = Pty::open(window_of(1)).context("cannot allocate a pseudo-terminal")?;
    let resize_pty = pty.master_handle();
    let to_command =
        AsyncStream::new(&pty.master).context("cannot write the command's terminal")?;
    // The supervisor drops the slave after the spawn; nothing here may keep a copy of it.
    request.tty = Some(pty);
    request.stdin = StdinSource::Null;
    request.inherit_stdout = false;
    request.lossless_events = true;
    let _terminal = CallerTerminal::enter()?;
    // SAFETY: fd 0 is open for the life of the process.
    let stdin: OwnedFd = unsafe { BorrowedFd::borrow_raw(0) }
        .try_clone_to_owned()
        .context("cannot duplicate stdin")?;
    let mut input = AsyncStream::new(&stdin).context("cannot read the terminal")?;
    let (saved, saved_flags) = (_terminal.termios, _terminal.flags);
    let suspend_master = resize_pty.clone();
    let keys = tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        loop {
            let n = match input.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut chunk = &buf[..n];
            // The suspend key goes to the command's terminal, which stops the command; then
            // cordon stops too, so the caller's shell gets its terminal back as it would.
            while let Some(at) =
                suspend_key(&suspend_master).and_then(|k| chunk.iter().position(|b| *b == k))
            {
                if to_command.write_all(&chunk[..=at]).await.1.is_err() {
                    return;
                }
                suspend_until_continued(&saved, saved_flags, &suspend_master);
                chunk = &chunk[at + 1..];
            }
            if to_command.write_all(chunk).await.1.is_err() {
                break;
            }
        }
    });
    let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
        .context("cannot install a SIGWINCH handler")?;
    let resizes = tokio::spawn(async move {
        while winch.recv().await.is_some() {
            // A failed resize leaves the old size; the command keeps running.
            let _ = resize_pty.set_window_size(window_of(1));
        }
    });
    let mut events = sandbox.exec_streaming(request);
    let mut out = std::io::stdout();
    let mut result = None;
    while let Some(event) = events.recv().await {
        match event {
            ExecEvent::Started { pid, .. } => {
                group.store(
                    i32::try_from(pid).unwrap_or(0),
                    std::sync::atomic::Ordering::SeqCst,
                );
            }
            ExecEvent::Output { bytes, .. } => {
                let _ = out.write_all(&bytes).and_then(|_| out.flush());
            }
            ExecEvent::Finished(r) => {
                result = Some(*r);
                break;
            }
            // Printed once after the command ends, from the result, as without a terminal.
            ExecEvent::Denied(_) => {}
        }
    }
    keys.abort();
    resizes.abort();
    // The master's last holder goes with `pty`; the fd of the caller's terminal is restored by
    // `_terminal` when this returns.
    let _ = stdin.as_raw_fd();
    result.ok_or_else(|| anyhow!("the runtime ended without a result"))
}
