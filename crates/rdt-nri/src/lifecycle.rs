//! The plugin's life beside the runtime's: connect, register, serve, and after every loss
//! of the connection (the runtime restarted, upgraded, its socket replaced or not there
//! yet) connect again after a back-off, until told to stop ([`Lifecycle::run`]).

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::{Ended, NriError, Registration, Session, serve_session};

/// Where the plugin is in its life ([`Lifecycle::run`] reports each change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// No connection: waiting for the runtime's socket, or between connections.
    Connecting,
    /// Connected, the registration sent, not yet accepted.
    Registering,
    /// The runtime accepted the registration: containers are placed.
    Registered,
    /// Stopped (the stop flag).
    Stopped,
}

impl State {
    /// The state's word in the readiness file ([`crate::ready`]).
    #[must_use]
    pub const fn word(self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Registering => "registering",
            Self::Registered => "registered",
            Self::Stopped => "stopped",
        }
    }
}

/// Exponential back-off with jitter: each delay is drawn from `[d/2, d)` where `d` starts
/// at `initial` and doubles up to `max` ("equal jitter"), so that plugins of many nodes,
/// or a plugin and the runtime restarting together, do not retry in lockstep.
#[derive(Clone, Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
    rng: u64,
}

impl Backoff {
    /// The plugin's: 100 ms, doubling to 2 s.
    #[must_use]
    pub fn standard() -> Self {
        Self::new(Duration::from_millis(100), Duration::from_secs(2))
    }

    /// From `initial`, doubling to `max` (at least `initial`).
    #[must_use]
    pub fn new(initial: Duration, max: Duration) -> Self {
        let seed = u64::from(std::process::id())
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::from(d.subsec_nanos()));
        Self {
            initial,
            max: max.max(initial),
            current: initial,
            rng: seed | 1,
        }
    }

    /// The next delay; the one after is up to twice as long, at most `max`.
    pub fn next_delay(&mut self) -> Duration {
        // xorshift64: jitter, not secrecy
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let d = self.current;
        let half = d / 2;
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX).max(1);
        let delay = half + Duration::from_nanos(self.rng % nanos);
        self.current = (self.current * 2).min(self.max);
        delay
    }

    /// Back to `initial` (after a connection that registered).
    pub fn reset(&mut self) {
        self.current = self.initial;
    }
}

/// How the plugin lives beside the runtime.
#[derive(Clone, Debug)]
pub struct Lifecycle {
    /// The runtime's NRI socket.
    pub socket: PathBuf,
    /// The plugin's name and index.
    pub registration: Registration,
    /// The socket's read timeout: how often `stop` is checked and the session ticks while
    /// the runtime is quiet.
    pub tick: Duration,
    /// The delays between connection attempts.
    pub backoff: Backoff,
    /// Registrations refused in a row before [`Lifecycle::run`] gives up (a refusal is
    /// the runtime's answer to this plugin's name or index, which retrying cannot
    /// change; a few are retried in case the runtime still held a previous connection).
    pub max_refusals: u32,
}

impl Lifecycle {
    /// The plugin's defaults on `socket`: ticks of 100 ms, [`Backoff::standard`], 5
    /// refusals.
    #[must_use]
    pub fn new(socket: impl Into<PathBuf>, registration: Registration) -> Self {
        Self {
            socket: socket.into(),
            registration,
            tick: Duration::from_millis(100),
            backoff: Backoff::standard(),
            max_refusals: 5,
        }
    }

    /// Connects to the runtime and serves `session` ([`serve_session`]), again after every
    /// loss of the connection, with [`Lifecycle::backoff`] between attempts (reset by each
    /// registration), until `stop` is set; each change of state goes to
    /// [`Session::state_changed`]. A socket that is not there yet is waited for. Stops
    /// within one tick plus [`crate::WRITE_TIMEOUT`] of `stop`.
    ///
    /// # Errors
    /// [`NriError::Registration`] when the runtime refused [`Lifecycle::max_refusals`]
    /// registrations in a row. Every other failure (socket, protocol) is logged and the
    /// connection made again.
    pub fn run(&mut self, stop: &AtomicBool, session: &mut dyn Session) -> Result<(), NriError> {
        let mut refusals = 0;
        let mut waiting = false;
        loop {
            if stop.load(Ordering::Relaxed) {
                session.state_changed(State::Stopped);
                return Ok(());
            }
            session.state_changed(State::Connecting);
            let stream = match UnixStream::connect(&self.socket) {
                Ok(s) => s,
                Err(e) => {
                    if !waiting {
                        log::info!(
                            "waiting for the runtime's NRI socket {}: {e}",
                            self.socket.display()
                        );
                        waiting = true;
                    }
                    self.pause(stop, session);
                    continue;
                }
            };
            waiting = false;
            session.state_changed(State::Registering);
            let mut hooked = Hooked {
                session: &mut *session,
                registered: false,
            };
            let served = serve_session(stream, &self.registration, stop, self.tick, &mut hooked);
            if hooked.registered {
                refusals = 0;
                self.backoff.reset();
            }
            match served {
                Ok(Ended::Stopped) => continue,
                Ok(Ended::Closed) => {
                    log::warn!("the runtime closed the connection: connecting again");
                }
                Err(e @ NriError::Registration { .. }) => {
                    refusals += 1;
                    log::error!("{e} ({refusals} in a row)");
                    if refusals >= self.max_refusals {
                        session.state_changed(State::Stopped);
                        return Err(e);
                    }
                }
                Err(e) => {
                    log::warn!("the connection to the runtime failed: {e}: connecting again");
                }
            }
            session.state_changed(State::Connecting);
            self.pause(stop, session);
        }
    }

    /// Waits the next back-off delay, ticking the session, until `stop`.
    fn pause(&mut self, stop: &AtomicBool, session: &mut dyn Session) {
        let end = Instant::now() + self.backoff.next_delay();
        let slice = self
            .tick
            .clamp(Duration::from_millis(1), Duration::from_millis(50));
        let mut last_tick = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if now.duration_since(last_tick) >= self.tick {
                session.tick();
                last_tick = now;
            }
            std::thread::sleep((end - now).min(slice));
        }
    }
}

/// The session, noting whether the connection registered.
struct Hooked<'a> {
    session: &'a mut dyn Session,
    registered: bool,
}

impl Session for Hooked<'_> {
    fn handle(&mut self, method: &str, payload: &[u8]) -> Result<Vec<u8>, crate::ttrpc::Status> {
        self.session.handle(method, payload)
    }
    fn connected(&mut self) {
        self.session.connected();
    }
    fn registered(&mut self) {
        self.registered = true;
        self.session.state_changed(State::Registered);
        self.session.registered();
    }
    fn tick(&mut self) {
        self.session.tick();
    }
    fn state_changed(&mut self, state: State) {
        self.session.state_changed(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_to_its_cap_with_jitter_and_resets() {
        let mut b = Backoff::standard();
        let delays: Vec<Duration> = (0..8).map(|_| b.next_delay()).collect();
        let ms = |d: &Duration| d.as_millis();
        // [d/2, d) for d = 100, 200, 400, 800, 1600, 2000, 2000, 2000 ms
        for (d, cap) in delays
            .iter()
            .zip([100, 200, 400, 800, 1600, 2000, 2000, 2000])
        {
            assert!(
                ms(d) >= cap / 2 && ms(d) < cap,
                "{d:?} not in [{}, {cap})",
                cap / 2
            );
        }
        b.reset();
        assert!(b.next_delay() < Duration::from_millis(100));
    }
}
