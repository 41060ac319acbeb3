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

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Runtime;

pub(super) struct ConnectionThreads {
    threads: Vec<Thread>,
}

struct Thread {
    /// `None` only while dropping.
    runtime: Option<Runtime>,
    /// Connections open on it.
    open: Arc<AtomicUsize>,
}

impl ConnectionThreads {
    /// One thread per core this process may use.
    pub(super) fn start() -> io::Result<Self> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let threads = (0..cores)
            .map(|index| {
                let runtime = executor_sandbox::tokio_runtime_builder()
                    .worker_threads(1)
                    .thread_name(format!("executor-http-{index}"))
                    .build()?;
                Ok(Thread { runtime: Some(runtime), open: Arc::default() })
            })
            .collect::<io::Result<_>>()?;
        Ok(Self { threads })
    }

    /// Serve `connection` on the thread with the fewest connections open.
    pub(super) fn spawn(&self, connection: impl Future<Output = ()> + Send + 'static) {
        let open: Vec<usize> = self.threads.iter().map(|thread| thread.open.load(Ordering::Relaxed)).collect();
        let thread = &self.threads[least_loaded(&open)];
        let Some(runtime) = &thread.runtime else { return };
        thread.open.fetch_add(1, Ordering::Relaxed);
        let counted = Counted(thread.open.clone());
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

/// One open connection on a thread; counted down when the connection's task
/// ends or is dropped.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
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
        let threads = ConnectionThreads::start().unwrap();
        let (ends, _) = tokio::sync::broadcast::channel::<()>(1);
        let (started, names) = std::sync::mpsc::channel();
        for _ in 0..threads.threads.len() * 2 {
            let (mut end, started) = (ends.subscribe(), started.clone());
            threads.spawn(async move {
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
        assert!(threads.threads.iter().all(|thread| thread.open.load(Ordering::Relaxed) == 2));
        ends.send(()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while threads.threads.iter().any(|thread| thread.open.load(Ordering::Relaxed) != 0) {
            assert!(std::time::Instant::now() < deadline, "connections that ended are still counted");
            std::thread::yield_now();
        }
    }
}
