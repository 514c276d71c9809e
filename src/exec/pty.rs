//! Pseudo-terminals and pipe ends the parent keeps talking to while a command runs: a PTY the
//! command gets as its controlling terminal, and an asynchronous, non-blocking view of a
//! descriptor (a PTY master, the write end of a stdin pipe) that the supervisor reads and the
//! process manager writes.
//!
//! The parent allocates the PTY; the command's side (the slave) becomes stdin, stdout and
//! stderr of the helper, which leads a new session and takes it as its controlling terminal
//! before anything is confined (see `supervise::build_command`), so the command and everything
//! it starts inherit it. The seccomp rules still refuse `TIOCSTI` and `TIOCLINUX` on it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, ReadBuf};

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowSize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

impl Default for WindowSize {
    /// The classic 24 x 80.
    fn default() -> WindowSize {
        WindowSize { rows: 24, cols: 80 }
    }
}

/// A pseudo-terminal pair allocated by the parent. Cloning shares the descriptors.
#[derive(Debug, Clone)]
pub struct Pty {
    /// The parent's side: what the command writes is read here, what is written here is the
    /// command's keyboard input.
    pub master: Arc<OwnedFd>,
    /// The command's side, its stdin, stdout and stderr.
    pub slave: Arc<OwnedFd>,
}

impl PartialEq for Pty {
    fn eq(&self, other: &Pty) -> bool {
        Arc::ptr_eq(&self.master, &other.master)
    }
}

impl Eq for Pty {}

impl Pty {
    /// Allocates a PTY of `size`, both ends close-on-exec (the supervisor hands the slave to
    /// the child explicitly as its stdio).
    pub fn open(size: WindowSize) -> io::Result<Pty> {
        let (mut master, mut slave): (RawFd, RawFd) = (-1, -1);
        let window = winsize(size);
        // SAFETY: openpty writes two descriptors into the out-pointers, which point at live
        // locals; the name buffer is null (not wanted) and the termios is null (defaults).
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &window,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: openpty succeeded, so both are open descriptors that nothing else owns.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        set_cloexec(&master)?;
        set_cloexec(&slave)?;
        Ok(Pty {
            master: Arc::new(master),
            slave: Arc::new(slave),
        })
    }

    /// The parent's side alone, to keep after the spawn (for resizing): the parent must not
    /// hold the slave, or the master never sees the terminal hang up when the command exits.
    pub fn master_handle(&self) -> PtyMaster {
        PtyMaster(Arc::clone(&self.master))
    }

    /// Changes the window size; the command's foreground process group gets `SIGWINCH`.
    pub fn set_window_size(&self, size: WindowSize) -> io::Result<()> {
        self.master_handle().set_window_size(size)
    }
}

/// A PTY's master side, shared.
#[derive(Debug, Clone)]
pub struct PtyMaster(pub Arc<OwnedFd>);

impl PtyMaster {
    /// Changes the window size; the command's foreground process group gets `SIGWINCH`.
    pub fn set_window_size(&self, size: WindowSize) -> io::Result<()> {
        let window = winsize(size);
        // SAFETY: TIOCSWINSZ reads one winsize from the pointer, which points at a live local.
        if unsafe { libc::ioctl(self.0.as_raw_fd(), libc::TIOCSWINSZ, &window) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The current window size.
    pub fn window_size(&self) -> io::Result<WindowSize> {
        // SAFETY: winsize is plain old data; all-zero is a valid value.
        let mut window: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ writes one winsize to the pointer, which points at a live local.
        if unsafe { libc::ioctl(self.0.as_raw_fd(), libc::TIOCGWINSZ, &mut window) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(WindowSize {
            rows: window.ws_row,
            cols: window.ws_col,
        })
    }
}

fn winsize(size: WindowSize) -> libc::winsize {
    libc::winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

fn set_cloexec(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: F_SETFD on a descriptor we own; no memory is passed.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A duplicate of a descriptor, made non-blocking and registered with the Tokio reactor, for
/// reading and writing without a blocking thread. The duplicate shares the file description,
/// so the original becomes non-blocking too; every user of these descriptors is asynchronous.
#[derive(Debug)]
pub struct AsyncStream {
    fd: AsyncFd<OwnedFd>,
}

impl AsyncStream {
    /// Duplicates `fd` (close-on-exec) and registers it. Must be called within a Tokio runtime.
    pub fn new(fd: &OwnedFd) -> io::Result<AsyncStream> {
        let dup = fd.try_clone()?;
        // SAFETY: F_GETFL/F_SETFL on a descriptor we own; no memory is passed.
        unsafe {
            let flags = libc::fcntl(dup.as_raw_fd(), libc::F_GETFL);
            if flags < 0
                || libc::fcntl(dup.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: `dup` is an open descriptor owned by the AsyncFd for its whole life, and an
        // OwnedFd's as_raw_fd always returns that same descriptor.
        let fd = unsafe { AsyncFd::register(dup) }.map_err(|e| e.into_parts().1)?;
        Ok(AsyncStream { fd })
    }

    /// Writes all of `bytes`, waiting while the other side does not read. Returns how many
    /// were written before an error (a closed pipe, a hung-up terminal).
    pub async fn write_all(&self, bytes: &[u8]) -> (usize, io::Result<()>) {
        let mut written = 0;
        while written < bytes.len() {
            let mut guard = match self.fd.writable().await {
                Ok(guard) => guard,
                Err(e) => return (written, Err(e)),
            };
            let rest = &bytes[written..];
            match guard.try_io(|fd| {
                // SAFETY: writes from a live slice of `rest.len()` bytes to a descriptor we own.
                let n = unsafe { libc::write(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                Ok(Ok(n)) => written += n,
                Ok(Err(e)) => return (written, Err(e)),
                Err(_would_block) => continue,
            }
        }
        (written, Ok(()))
    }
}

impl AsyncRead for AsyncStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| {
                // SAFETY: reads into a live, initialised slice of `unfilled.len()` bytes.
                let n = unsafe {
                    libc::read(fd.as_raw_fd(), unfilled.as_mut_ptr().cast(), unfilled.len())
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // A PTY master reads EIO once no process holds the slave: that is its end of
                // file.
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Poll::Ready(Ok(())),
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

/// The read end of a pipe that is the command's stdin; the caller keeps the write end (and
/// closes it to send end of file). Cloning shares the descriptor.
#[derive(Debug, Clone)]
pub struct StdinPipe(pub Arc<OwnedFd>);

impl PartialEq for StdinPipe {
    fn eq(&self, other: &StdinPipe) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for StdinPipe {}

impl StdinPipe {
    /// A new pipe, both ends close-on-exec: the command's end, and the caller's write end.
    pub fn new() -> io::Result<(StdinPipe, OwnedFd)> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok((StdinPipe(Arc::new(read)), write))
    }
}
