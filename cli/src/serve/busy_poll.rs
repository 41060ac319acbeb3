//! A connection thread about to sleep first polls its sockets for a moment.
//!
//! One connection sending request after request (an agent's loop, the wire
//! bench) has its next request arrive a few dozen microseconds after its
//! answer. A thread already asleep must then be woken: the client's write
//! kicks the thread's core out of its idle state, and the thread waits to be
//! scheduled. On a virtual machine that was a fifth of such a request's time
//! (docs/benchmarks.md, "Polling before sleeping"). A thread that polls instead sees the
//! request at once, and the client's write wakes nobody.
//!
//! The cost is bounded: a thread polls for at most the time it is given
//! (`--busy-poll-us`, [`DEFAULT`] unless set; zero turns it off) each time
//! it is about to sleep, only when it has connections open and not more
//! than [`MAX_POLLED`] (a thread with more is seldom idle), and it yields its
//! core between polls, so a thread with work on the same core runs first.
//! What it delays is bounded alike: work for the thread that does not come
//! through its sockets (a timer, a task woken from another thread) waits at
//! most that long.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a thread polls its sockets before it sleeps, by default: a
/// client's next request, sent once it has read the answer, comes within it
/// on one machine or a local network (docs/benchmarks.md, "Polling before sleeping").
pub const DEFAULT: Duration = Duration::from_micros(100);

/// The longest poll that may be asked for: past it a thread spends more
/// time polling than most requests take to answer.
pub const MAX: Duration = Duration::from_millis(10);

/// A thread with more connections open than this does not poll them.
const MAX_POLLED: usize = 32;

/// A socket as the system names it.
#[cfg(unix)]
pub(super) type Fd = std::os::fd::RawFd;
#[cfg(not(unix))]
pub(super) type Fd = ();

/// The socket of `stream`, for [`Sockets::add`].
pub(super) fn fd_of(stream: &std::net::TcpStream) -> Fd {
    #[cfg(unix)]
    return std::os::fd::AsRawFd::as_raw_fd(stream);
    #[cfg(not(unix))]
    let _ = stream;
}

/// The sockets of the connections open on one thread.
#[derive(Default)]
pub(super) struct Sockets {
    open: Mutex<Vec<Fd>>,
}

/// How [`Sockets::poll`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Polled {
    /// Nothing to poll (no socket, or more than [`MAX_POLLED`]).
    Skipped,
    /// A socket can be read (or has closed, or is no longer open).
    Ready,
    /// Nothing came within the time given.
    Quiet,
}

impl Sockets {
    pub(super) fn add(&self, fd: Fd) {
        self.lock().push(fd);
    }

    /// Forget one socket `fd` (connections' sockets have distinct numbers).
    pub(super) fn remove(&self, fd: Fd) {
        let mut open = self.lock();
        if let Some(at) = open.iter().position(|&open| open == fd) {
            open.swap_remove(at);
        }
    }

    pub(super) fn count(&self) -> usize {
        self.lock().len()
    }

    /// Poll the sockets until one can be read, for at most `spin`.
    ///
    /// A socket whose connection ends meanwhile (its task can run on
    /// another thread while this one sleeps in the sandbox's blocking
    /// section) is closed before it is removed here; polling its number then
    /// answers that it is not open, or is about another socket given the
    /// same number: either way the poll only ends sooner.
    pub(super) fn poll(&self, spin: Duration) -> Polled {
        #[cfg(unix)]
        {
            let mut polled: Vec<libc::pollfd> =
                self.lock().iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
            if polled.is_empty() || polled.len() > MAX_POLLED {
                return Polled::Skipped;
            }
            let until = Instant::now() + spin;
            loop {
                // SAFETY: `polled` is a live array of `polled.len()` entries; a
                // timeout of 0 returns at once.
                let ready = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, 0) };
                if ready != 0 {
                    // Ready, or failed (interrupted): the thread goes on to
                    // its own wait, which sorts it out.
                    return Polled::Ready;
                }
                if Instant::now() >= until {
                    return Polled::Quiet;
                }
                // SAFETY: sched_yield takes nothing and only gives up the core.
                unsafe { libc::sched_yield() };
            }
        }
        #[cfg(not(unix))]
        {
            let _ = (spin, MAX_POLLED, Instant::now());
            Polled::Skipped
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Fd>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    use super::*;

    /// Long enough that a poll that should end at once and does not fails
    /// by its answer (`Quiet`), never by a time measured.
    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn a_readable_socket_ends_the_poll() {
        let (mut client, server) = UnixStream::pair().unwrap();
        let (_quiet, other) = UnixStream::pair().unwrap();
        let sockets = Sockets::default();
        sockets.add(other.as_raw_fd());
        sockets.add(server.as_raw_fd());
        assert_eq!(sockets.poll(Duration::from_millis(1)), Polled::Quiet, "nothing was sent");
        client.write_all(b"next request").unwrap();
        assert_eq!(sockets.poll(LONG), Polled::Ready);
    }

    #[test]
    fn no_socket_or_too_many_are_not_polled() {
        let sockets = Sockets::default();
        assert_eq!(sockets.poll(LONG), Polled::Skipped, "no socket");
        let pairs: Vec<_> = (0..=MAX_POLLED).map(|_| UnixStream::pair().unwrap()).collect();
        for (_, server) in &pairs {
            sockets.add(server.as_raw_fd());
        }
        assert_eq!(sockets.count(), MAX_POLLED + 1);
        assert_eq!(sockets.poll(LONG), Polled::Skipped, "more than {MAX_POLLED} sockets");
        sockets.remove(pairs[0].1.as_raw_fd());
        assert_eq!(sockets.count(), MAX_POLLED);
        assert_eq!(sockets.poll(Duration::from_millis(1)), Polled::Quiet, "{MAX_POLLED} sockets are polled");
    }

    #[test]
    fn a_removed_socket_is_no_longer_polled() {
        let (mut client, server) = UnixStream::pair().unwrap();
        client.write_all(b"x").unwrap();
        let sockets = Sockets::default();
        sockets.add(server.as_raw_fd());
        assert_eq!(sockets.poll(LONG), Polled::Ready);
        sockets.remove(server.as_raw_fd());
        assert_eq!(sockets.poll(LONG), Polled::Skipped);
    }
}
