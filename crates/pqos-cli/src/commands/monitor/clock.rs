//! Where monitoring gets its time and how it waits: the host's monotonic clock, or the
//! simulated platform's clock (stepped, or following real time).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where monitoring gets its time and waits.
pub trait Clock {
    /// Time since the clock started.
    fn elapsed(&self) -> Duration;
    /// Waits until [`Clock::elapsed`] reaches `t`, returning early once `stop` is set.
    fn wait_until(&mut self, t: Duration, stop: &AtomicBool);
    /// Local time now, for the `TIME` line.
    fn now(&self) -> jiff::Zoned;
}

/// The real clock: monotonic time, sleeping in steps of at most 100 ms.
#[derive(Debug)]
pub struct RealClock {
    start: Instant,
}

impl RealClock {
    /// Starts the clock.
    #[must_use]
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
        }
    }
}

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for RealClock {
    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    fn wait_until(&mut self, t: Duration, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let now = self.start.elapsed();
            if now >= t {
                break;
            }
            std::thread::sleep(t.saturating_sub(now).min(Duration::from_millis(100)));
        }
    }

    fn now(&self) -> jiff::Zoned {
        jiff::Zoned::now()
    }
}

/// A clock that does not sleep: waiting calls `advance` with the time to move on (the
/// simulated platform's virtual clock), and `TIME` is the start time plus virtual time.
#[allow(missing_debug_implementations)] // holds a closure
// The clocks of the simulated platform (`--sim`).
#[cfg_attr(not(feature = "sim"), allow(dead_code))]
pub struct VirtualClock<F: FnMut(Duration)> {
    start: jiff::Zoned,
    t: Duration,
    advance: F,
}

#[cfg_attr(not(feature = "sim"), allow(dead_code))]
impl<F: FnMut(Duration)> VirtualClock<F> {
    /// A virtual clock at 0 that calls `advance(dt)` whenever it waits.
    pub fn new(advance: F) -> Self {
        Self {
            start: jiff::Zoned::now(),
            t: Duration::ZERO,
            advance,
        }
    }
}

impl<F: FnMut(Duration)> Clock for VirtualClock<F> {
    fn elapsed(&self) -> Duration {
        self.t
    }

    fn wait_until(&mut self, t: Duration, _stop: &AtomicBool) {
        if t > self.t {
            (self.advance)(t.saturating_sub(self.t));
            self.t = t;
        }
    }

    fn now(&self) -> jiff::Zoned {
        let dt = jiff::SignedDuration::try_from(self.t).unwrap_or(jiff::SignedDuration::ZERO);
        self.start
            .checked_add(dt)
            .unwrap_or_else(|_| self.start.clone())
    }
}

/// A real-time clock for a simulated platform: waits for real, then moves the simulated
/// clock on by the real time that passed (`advance`). Elapsed time is the simulated time, so
/// rates are computed over exactly the time the counters saw.
#[allow(missing_debug_implementations)] // holds a closure
#[cfg_attr(not(feature = "sim"), allow(dead_code))]
pub struct AdvancingClock<F: FnMut(Duration)> {
    real: RealClock,
    advanced: Duration,
    advance: F,
}

#[cfg_attr(not(feature = "sim"), allow(dead_code))]
impl<F: FnMut(Duration)> AdvancingClock<F> {
    /// Starts the clock; `advance(dt)` moves the simulated platform on.
    pub fn new(advance: F) -> Self {
        Self {
            real: RealClock::new(),
            advanced: Duration::ZERO,
            advance,
        }
    }
}

impl<F: FnMut(Duration)> Clock for AdvancingClock<F> {
    fn elapsed(&self) -> Duration {
        self.advanced
    }

    fn wait_until(&mut self, t: Duration, stop: &AtomicBool) {
        self.real.wait_until(t, stop);
        let now = self.real.elapsed();
        if now > self.advanced {
            (self.advance)(now.saturating_sub(self.advanced));
            self.advanced = now;
        }
    }

    fn now(&self) -> jiff::Zoned {
        jiff::Zoned::now()
    }
}

/// The sampling schedule: sample `k` is due `k × interval` after the start (pqos's periodic
/// `timerfd`, §5.1), so the time one sample takes never shifts the next ones. A loop that
/// fell behind skips the deadlines already passed and samples at once, counting them as
/// pqos counts the timer's expirations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    interval: Duration,
    tick: u32,
}

impl Schedule {
    /// Sample 0 is due at once; then one every `interval`.
    #[must_use]
    pub const fn new(interval: Duration) -> Self {
        Self { interval, tick: 0 }
    }

    /// When the current sample was due, since the start (pqos's `runtime`).
    #[must_use]
    pub fn due(&self) -> Duration {
        self.interval.saturating_mul(self.tick)
    }

    /// Moves to the next sample given the clock's `elapsed` time and returns when it is due:
    /// the next deadline, or the latest one already passed when the loop is late.
    pub fn advance(&mut self, elapsed: Duration) -> Duration {
        let passed = elapsed.as_nanos() / self.interval.as_nanos().max(1);
        let passed = u32::try_from(passed).unwrap_or(u32::MAX);
        self.tick = self.tick.saturating_add(1).max(passed);
        self.due()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_are_multiples_of_the_interval_whatever_a_sample_took() {
        // arrange
        let i = Duration::from_millis(100);
        let mut s = Schedule::new(i);
        // act / assert: samples that take 30 ms do not push the deadlines
        assert_eq!(s.due(), Duration::ZERO);
        assert_eq!(s.advance(Duration::from_millis(30)), i);
        assert_eq!(s.advance(Duration::from_millis(130)), 2 * i);
        assert_eq!(s.advance(Duration::from_millis(230)), 3 * i);
    }

    #[test]
    fn a_late_loop_skips_the_passed_deadlines_like_timerfd_expirations() {
        let i = Duration::from_millis(100);
        let mut s = Schedule::new(i);
        // The first sample took 350 ms: deadlines 1, 2 and 3 have passed; sample now.
        assert_eq!(s.advance(Duration::from_millis(350)), 3 * i);
        assert_eq!(s.advance(Duration::from_millis(360)), 4 * i);
    }

    #[test]
    fn virtual_clock_advances_the_platform_by_the_time_waited() {
        let mut moved = Vec::new();
        let stop = AtomicBool::new(false);
        {
            let mut c = VirtualClock::new(|dt| moved.push(dt));
            c.wait_until(Duration::from_millis(100), &stop);
            c.wait_until(Duration::from_millis(100), &stop);
            c.wait_until(Duration::from_millis(300), &stop);
            assert_eq!(c.elapsed(), Duration::from_millis(300));
        }
        assert_eq!(
            moved,
            [Duration::from_millis(100), Duration::from_millis(200)]
        );
    }
}
