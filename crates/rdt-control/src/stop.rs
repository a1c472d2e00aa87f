//! Stopping the controller from another thread or a signal handler: a [`Stopper`] is a
//! shared flag that [`crate::Agent`] checks between the steps of its start-up, between
//! intervals, in its waits (every [`STOP_POLL`]) and while it waits for an application's
//! metric, so that a run ends within a fraction of a second of [`Stopper::stop`] whatever it
//! is doing, leaving what a normal stop leaves (the classes and their allocation as they
//! are, monitoring stopped, no transaction cut short).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a wait looks at the flag.
pub const STOP_POLL: Duration = Duration::from_millis(20);

/// A cancel handle: clones share one flag; once stopped, it stays stopped.
#[derive(Clone, Debug, Default)]
pub struct Stopper(Arc<AtomicBool>);

impl Stopper {
    /// A handle not stopped yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A handle over `flag`: for `signal_hook::flag::register`, which sets an
    /// `Arc<AtomicBool>` from a signal handler.
    #[must_use]
    pub const fn from_flag(flag: Arc<AtomicBool>) -> Self {
        Self(flag)
    }

    /// The flag (to register with a signal handler).
    #[must_use]
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }

    /// Asks every holder to stop.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was asked.
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Sleeps `dt`, waking every [`STOP_POLL`] to look at the flag; `false` when it returned
    /// early because a stop was asked.
    #[must_use = "false: stopped, the caller should stop too"]
    pub fn sleep(&self, dt: Duration) -> bool {
        let end = Instant::now() + dt;
        loop {
            if self.is_stopped() {
                return false;
            }
            let now = Instant::now();
            if now >= end {
                return true;
            }
            std::thread::sleep((end - now).min(STOP_POLL));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_ends_early_when_another_thread_stops() {
        let s = Stopper::new();
        assert!(
            s.sleep(Duration::from_millis(1)),
            "not stopped: the whole sleep"
        );
        let other = s.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.stop();
        });
        let started = Instant::now();
        assert!(!s.sleep(Duration::from_secs(30)));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(s.is_stopped() && Stopper::from_flag(s.flag()).is_stopped());
        t.join().unwrap();
    }
}
