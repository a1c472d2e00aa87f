//! Monitoring's stdout, written by a thread of its own so that a consumer that stops
//! reading cannot hold the run hostage.
//!
//! A `write(2)` to a full pipe blocks, and a signal handler installed with `SA_RESTART` (as
//! signal-hook installs them) restarts it: Intel's pqos then sits in `write` ignoring SIGINT,
//! the agent that started it SIGKILLs it, and its monitor groups stay in resctrl for good.
//! Here the monitoring loop only queues its bytes; a writer thread does the blocking
//! `write(2)`. When the queue is full (the reader has stopped) the loop waits for room while
//! watching the stop flag, so SIGINT/SIGTERM/SIGHUP still end the run at once: the groups
//! are stopped, the queued output is given up ([`Abandoned`]) and the process exits even
//! though the writer thread is still blocked.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Bytes queued for the writer before [`Detached::flush`] waits for room: many samples of
/// the widest table, and a bound on memory when nobody reads.
const QUEUE_LIMIT: usize = 1 << 20;

/// How often a waiting flush looks at the stop flag.
const POLL: Duration = Duration::from_millis(10);

/// How long, after a stop signal, [`Detached::finish`] waits for the queue to drain.
const DRAIN_AFTER_STOP: Duration = Duration::from_millis(200);

/// The output was given up: a stop signal arrived while the reader was not reading.
#[derive(Debug, thiserror::Error)]
#[error("stopped while stdout was not being read; the rest of the output was dropped")]
pub struct Abandoned;

impl Abandoned {
    /// Whether `e` is this error.
    #[must_use]
    pub fn is(e: &io::Error) -> bool {
        e.get_ref()
            .is_some_and(<dyn std::error::Error + Send + Sync>::is::<Self>)
    }
}

/// What the writer thread and the writers share.
#[derive(Debug, Default)]
struct Shared {
    /// Bytes sent and not yet written.
    queued: AtomicUsize,
    /// The writer's first error (`EPIPE` when the reader closed the pipe).
    error: Mutex<Option<io::ErrorKind>>,
}

/// Stdout through a writer thread ([module docs](self)). Bytes are buffered until
/// [`Write::flush`], which hands them to the thread.
#[derive(Debug)]
pub struct Detached {
    buf: Vec<u8>,
    tx: Option<Sender<Vec<u8>>>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Detached {
    /// Starts the writer thread on `sink` (stdout in production); `stop` is the flag the
    /// signal handlers set.
    ///
    /// # Errors
    /// The thread cannot be spawned.
    pub fn spawn(sink: Box<dyn Write + Send>, stop: Arc<AtomicBool>) -> io::Result<Self> {
        let (tx, rx) = channel::<Vec<u8>>();
        let shared = Arc::new(Shared::default());
        let thread = thread::Builder::new().name("stdout".into()).spawn({
            let shared = Arc::clone(&shared);
            move || write_all(sink, &rx, &shared)
        })?;
        Ok(Self {
            buf: Vec::new(),
            tx: Some(tx),
            shared,
            stop,
            thread: Some(thread),
        })
    }

    fn writer_error(&self) -> Option<io::Error> {
        let kind = *self
            .shared
            .error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kind.map(|k| pqos_cli::args::logger::stdout_error(io::Error::from(k)))
    }

    /// Hands everything written so far to the thread and waits for it to be written: at
    /// most [`DRAIN_AFTER_STOP`] once a stop signal has arrived, else until done.
    ///
    /// # Errors
    /// The writer's error (`BrokenPipe`), or [`Abandoned`] when the output could not be
    /// written before the stop.
    pub fn finish(mut self) -> io::Result<()> {
        self.flush()?;
        drop(self.tx.take());
        let mut stopped_at = None;
        while self.shared.queued.load(Ordering::Acquire) > 0 {
            if let Some(e) = self.writer_error() {
                return Err(e);
            }
            if self.stop.load(Ordering::Relaxed) {
                let since = *stopped_at.get_or_insert_with(Instant::now);
                if since.elapsed() >= DRAIN_AFTER_STOP {
                    return Err(io::Error::other(Abandoned));
                }
            }
            thread::sleep(POLL);
        }
        if let Some(e) = self.writer_error() {
            return Err(e);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        Ok(())
    }
}

/// The writer thread: writes every chunk in order until the channel closes or a write fails.
fn write_all(mut sink: Box<dyn Write + Send>, rx: &Receiver<Vec<u8>>, shared: &Shared) {
    for chunk in rx {
        let result = sink.write_all(&chunk).and_then(|()| sink.flush());
        shared.queued.fetch_sub(chunk.len(), Ordering::AcqRel);
        if let Err(e) = result {
            *shared
                .error
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e.kind());
            // Nothing more can be written; what is still queued is dropped.
            shared.queued.store(0, Ordering::Release);
            return;
        }
    }
}

impl Write for Detached {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    /// Queues the buffered bytes; waits while the queue is over [`QUEUE_LIMIT`] (the reader
    /// is slow or has stopped) unless a stop signal has arrived.
    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        loop {
            if let Some(e) = self.writer_error() {
                return Err(e);
            }
            if self.shared.queued.load(Ordering::Acquire) + self.buf.len() <= QUEUE_LIMIT
                || self.shared.queued.load(Ordering::Acquire) == 0
            {
                break;
            }
            if self.stop.load(Ordering::Relaxed) {
                return Err(io::Error::other(Abandoned));
            }
            thread::sleep(POLL);
        }
        let chunk = std::mem::take(&mut self.buf);
        self.shared.queued.fetch_add(chunk.len(), Ordering::AcqRel);
        let tx = self
            .tx
            .as_ref()
            .ok_or_else(|| io::Error::other(Abandoned))?;
        if tx.send(chunk).is_err() {
            // The thread ended after a write error.
            return Err(self
                .writer_error()
                .unwrap_or_else(|| io::ErrorKind::BrokenPipe.into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that blocks every write until released, like a pipe nobody reads.
    struct Stuck(Arc<Mutex<()>>);

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let _held = self.0.lock().map_err(|_| io::ErrorKind::Other)?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A sink whose reader is gone.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[derive(Clone, Default)]
    struct Collect(Arc<Mutex<Vec<u8>>>);

    impl Write for Collect {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writes_everything_in_order() {
        let sink = Collect::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut out = Detached::spawn(Box::new(sink.clone()), stop).expect("spawn");
        for i in 0..1000 {
            writeln!(out, "line {i}").expect("write");
            out.flush().expect("flush");
        }
        out.finish().expect("finish");
        let text = String::from_utf8(sink.0.lock().expect("lock").clone()).expect("utf8");
        let want = (0..1000).fold(String::new(), |mut s, i| {
            s.push_str(&format!("line {i}\n"));
            s
        });
        assert_eq!(text, want);
    }

    #[test]
    fn a_stop_gets_past_a_reader_that_stopped_reading() {
        // arrange: the sink blocks; fill the queue past its limit
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().expect("lock");
        let stop = Arc::new(AtomicBool::new(false));
        let mut out =
            Detached::spawn(Box::new(Stuck(Arc::clone(&gate))), Arc::clone(&stop)).expect("spawn");
        let chunk = vec![b'x'; QUEUE_LIMIT / 2];
        out.write_all(&chunk).expect("write");
        out.flush().expect("room for the first chunk");
        out.write_all(&chunk).expect("write");
        out.flush().expect("room for the second chunk");
        // act: the third would block; a stop arrives meanwhile
        let setter = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(50));
                stop.store(true, Ordering::Relaxed);
            })
        };
        out.write_all(&chunk).expect("write");
        let started = Instant::now();
        let e = out.flush().expect_err("the queue is full");
        setter.join().expect("join");
        // assert
        assert!(Abandoned::is(&e), "{e}");
        assert!(started.elapsed() < Duration::from_secs(1));
        let started = Instant::now();
        let e = out.finish().expect_err("cannot drain");
        assert!(Abandoned::is(&e), "{e}");
        assert!(started.elapsed() < Duration::from_secs(1));
        drop(held);
    }

    #[test]
    fn a_closed_pipe_is_reported_as_broken() {
        let stop = Arc::new(AtomicBool::new(false));
        let mut out = Detached::spawn(Box::new(Closed), stop).expect("spawn");
        writeln!(out, "x").expect("write");
        let _ = out.flush();
        let e = out.finish().expect_err("broken");
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }
}
