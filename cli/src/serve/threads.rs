//! The threads connections are served on: one tokio runtime of one worker per
//! core, each connection on one of them for its whole life.
//!
//! A request spawns several tasks: rmcp runs each request's service loop, its
//! handler and its reply in tasks of their own. In one runtime of several
//! workers, a spawn that finds the worker's next-task slot taken wakes an idle
//! worker to steal work, so a request hops between threads (a wake-up through
//! the I/O driver, cold caches) several times. On a runtime with one worker
//! every task of the connection stays on its thread. Nothing is lost for long
//! work: an execution past its first moments leaves the worker
//! (`block_in_place`, in the sandbox), and the connections beside it go on.
//! A thread about to sleep tidies the sandbox, then polls its sockets for a
//! moment ([`super::busy_poll`]).

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;

use super::busy_poll::{Fd, Sockets};

pub(super) struct ConnectionThreads {
    threads: Vec<Thread>,
}

struct Thread {
    /// `None` only while dropping.
    runtime: Option<Runtime>,
    /// The sockets of the connections open on it.
    open: Arc<Sockets>,
}

impl ConnectionThreads {
    /// One thread per core this process may use; each, about to sleep,
    /// polls its sockets for `busy_poll` first (zero: never).
    pub(super) fn start(busy_poll: Duration) -> io::Result<Self> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let threads = (0..cores)
            .map(|index| {
                let open = Arc::<Sockets>::default();
                let polled = open.clone();
                let runtime = executor_sandbox::tokio_runtime_builder()
                    .worker_threads(1)
                    .thread_name(format!("executor-http-{index}"))
                    // In place of the builder's own hook, which it calls first.
                    .on_thread_park(move || {
                        executor_sandbox::tidy();
                        if !busy_poll.is_zero() {
                            polled.poll(busy_poll);
                        }
                    })
                    .build()?;
                Ok(Thread { runtime: Some(runtime), open })
            })
            .collect::<io::Result<_>>()?;
        Ok(Self { threads })
    }

    /// Serve `connection`, whose socket is `socket`, on the thread with the
    /// fewest connections open.
    pub(super) fn spawn(&self, socket: Fd, connection: impl Future<Output = ()> + Send + 'static) {
        let open: Vec<usize> = self.threads.iter().map(|thread| thread.open.count()).collect();
        let thread = &self.threads[least_loaded(&open)];
        let Some(runtime) = &thread.runtime else { return };
        thread.open.add(socket);
        let counted = Counted { open: thread.open.clone(), socket };
        runtime.spawn(async move {
            let _counted = counted;
            connection.await;
        });
    }
}

/// The first of the threads with the fewest connections.
fn least_loaded(open: &[usize]) -> usize {
    open.iter().enumerate().min_by_key(|&(index, open)| (open, index)).map_or(0, |(index, _)| index)
}

/// One open connection on a thread; forgotten when the connection's task
/// ends or is dropped.
struct Counted {
    open: Arc<Sockets>,
    socket: Fd,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.open.remove(self.socket);
    }
}

impl Drop for ConnectionThreads {
    /// The server has stopped: what is left on the threads (connections cut
    /// after the drain) ends with them. Without waiting, so that this may be
    /// dropped in an async context.
    fn drop(&mut self) {
        for thread in &mut self.threads {
            if let Some(runtime) = thread.runtime.take() {
                runtime.shutdown_background();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::busy_poll;

    #[test]
    fn a_connection_goes_to_the_first_thread_with_the_fewest() {
        let cases: &[(&[usize], usize)] =
            &[(&[0], 0), (&[0, 0], 0), (&[1, 0], 1), (&[1, 1], 0), (&[3, 1, 2], 1), (&[2, 5, 2], 0), (&[4, 4, 3], 2)];
        for &(open, expected) in cases {
            assert_eq!(least_loaded(open), expected, "open connections {open:?}");
        }
    }

    #[test]
    fn connections_spread_over_the_threads_and_are_counted_down_when_they_end() {
        let threads = ConnectionThreads::start(Duration::ZERO).unwrap();
        let (ends, _) = tokio::sync::broadcast::channel::<()>(1);
        let (started, names) = std::sync::mpsc::channel();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sockets: Vec<_> = (0..threads.threads.len() * 2)
            .map(|_| std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap())
            .collect();
        for socket in &sockets {
            let (mut end, started) = (ends.subscribe(), started.clone());
            threads.spawn(busy_poll::fd_of(socket), async move {
                started.send(std::thread::current().name().map(str::to_owned)).unwrap();
                let _ = end.recv().await;
            });
        }
        let mut seen: Vec<_> = (0..threads.threads.len() * 2).map(|_| names.recv().unwrap().unwrap()).collect();
        seen.sort();
        let mut expected: Vec<_> = (0..threads.threads.len())
            .flat_map(|index| std::iter::repeat_n(format!("executor-http-{index}"), 2))
            .collect();
        expected.sort();
        assert_eq!(seen, expected, "two connections on each thread");
        assert!(threads.threads.iter().all(|thread| thread.open.count() == 2));
        ends.send(()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while threads.threads.iter().any(|thread| thread.open.count() != 0) {
            assert!(std::time::Instant::now() < deadline, "connections that ended are still counted");
            std::thread::yield_now();
        }
    }

    /// A thread with an idle connection polls its socket only as it goes to
    /// sleep, then sleeps: waiting on its own timer for a while, it uses a
    /// small part of a core, not all of it. (A busy machine can only lower
    /// what the thread gets, so this cannot fail for want of CPU.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_with_an_idle_connection_sleeps_after_polling() {
        fn thread_cpu() -> Duration {
            let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: clock_gettime writes the calling thread's CPU time into `now`.
            assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) }, 0);
            Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
        }
        let threads = ConnectionThreads::start(busy_poll::DEFAULT).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let idle: Vec<_> = (0..threads.threads.len())
            .map(|_| std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap())
            .collect();
        let (used, cpu) = std::sync::mpsc::channel();
        for socket in &idle {
            let used = used.clone();
            threads.spawn(busy_poll::fd_of(socket), async move {
                let start = thread_cpu();
                // A timer far longer than the poll: the thread polls, then sleeps.
                for _ in 0..30 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                used.send(thread_cpu() - start).unwrap();
            });
        }
        for _ in &idle {
            let used = cpu.recv().unwrap();
            // 30 polls of 0.1 ms, against 600 ms of polling throughout.
            assert!(used < Duration::from_millis(300), "{used:?} of CPU in 600 ms idle");
        }
    }
}
