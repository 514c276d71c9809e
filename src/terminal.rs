//! The terminal `cordon run` was started on, kept as the command found it.
//!
//! The command inherits cordon's terminal and may change its settings (`stty -echo`, raw mode,
//! a window size) and then die without putting them back. A shell restores its terminal after
//! a job; cordon does the same when it returns, whichever way it returns (exit, timeout,
//! cancellation, error), by holding a [`SavedTerminals`] for the whole run.

use std::os::fd::RawFd;

/// The settings of each distinct terminal among stdin, stdout and stderr, taken before the
/// command starts; dropping it puts back whatever changed.
pub struct SavedTerminals {
    saved: Vec<Saved>,
}

struct Saved {
    fd: RawFd,
    termios: libc::termios,
    window: Option<libc::winsize>,
}

impl SavedTerminals {
    /// Records the current settings of every terminal on fds 0-2 (one entry per terminal).
    pub fn save() -> SavedTerminals {
        let mut seen: Vec<libc::dev_t> = Vec::new();
        let mut saved = Vec::new();
        for fd in 0..=2 {
            let Some(device) = terminal_device(fd) else {
                continue;
            };
            if seen.contains(&device) {
                continue;
            }
            let Some(termios) = get_termios(fd) else {
                continue;
            };
            seen.push(device);
            saved.push(Saved {
                fd,
                termios,
                window: get_window(fd),
            });
        }
        SavedTerminals { saved }
    }
}

impl Drop for SavedTerminals {
    fn drop(&mut self) {
        if self.saved.is_empty() {
            return;
        }
        // A cordon running in the background would be stopped by SIGTTOU when it writes the
        // terminal's settings; with the signal blocked the kernel lets the write through.
        let _blocked = BlockedTtou::new();
        for saved in &self.saved {
            if get_termios(saved.fd).is_some_and(|now| !same_termios(&now, &saved.termios)) {
                // SAFETY: `saved.termios` is a termios the kernel filled in for this fd.
                // TCSANOW: draining could wait forever on a terminal stopped with ^S.
                unsafe { libc::tcsetattr(saved.fd, libc::TCSANOW, &saved.termios) };
            }
            if let Some(window) = saved.window {
                if get_window(saved.fd).is_some_and(|now| !same_window(&now, &window)) {
                    // SAFETY: TIOCSWINSZ reads one winsize from the pointer, valid for the call.
                    unsafe { libc::ioctl(saved.fd, libc::TIOCSWINSZ, &window) };
                }
            }
        }
    }
}

/// The terminal's device number when `fd` is a terminal.
fn terminal_device(fd: RawFd) -> Option<libc::dev_t> {
    // SAFETY: isatty only queries the descriptor.
    if unsafe { libc::isatty(fd) } != 1 {
        return None;
    }
    // SAFETY: `stat` is plain data for which all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`, a valid stat buffer.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_rdev)
}

fn get_termios(fd: RawFd) -> Option<libc::termios> {
    // SAFETY: `termios` is plain data for which all-zero is a valid value.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr writes one termios into `t`.
    (unsafe { libc::tcgetattr(fd, &mut t) } == 0).then_some(t)
}

fn get_window(fd: RawFd) -> Option<libc::winsize> {
    // SAFETY: `winsize` is plain data for which all-zero is a valid value.
    let mut w: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `w`.
    (unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut w) } == 0).then_some(w)
}

fn same_termios(a: &libc::termios, b: &libc::termios) -> bool {
    a.c_iflag == b.c_iflag
        && a.c_oflag == b.c_oflag
        && a.c_cflag == b.c_cflag
        && a.c_lflag == b.c_lflag
        && a.c_cc == b.c_cc
}

fn same_window(a: &libc::winsize, b: &libc::winsize) -> bool {
    (a.ws_row, a.ws_col, a.ws_xpixel, a.ws_ypixel) == (b.ws_row, b.ws_col, b.ws_xpixel, b.ws_ypixel)
}

/// SIGTTOU blocked on this thread for as long as it lives.
struct BlockedTtou {
    previous: libc::sigset_t,
}

impl BlockedTtou {
    fn new() -> BlockedTtou {
        // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it, and
        // pthread_sigmask reads `set` and writes the old mask into `previous`.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTTOU);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut previous);
            BlockedTtou { previous }
        }
    }
}

impl Drop for BlockedTtou {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new`, a valid sigset_t.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.previous, std::ptr::null_mut()) };
    }
}
