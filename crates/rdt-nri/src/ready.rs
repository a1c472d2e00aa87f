//! The plugin's state for the DaemonSet's probes: a run file the plugin keeps while it
//! lives ([`StateFile`]) and the check a probe runs ([`check`], `rdt-agent nri --check`).
//!
//! The file is `<run dir>/nri-<plugin name>-<pid>`, written through rdt-host's run files
//! (`rdt_pqos::runfile::RunFile`: a verified root-only directory, never through a symlink,
//! created whole and `flock`ed for the plugin's life), three lines:
//! ```text
//! state=registered
//! beat=1764640000
//! pid=4242
//! ```
//! `state` is [`State::word`]; `beat` the Unix time of the last heartbeat (rewritten every
//! [`HEARTBEAT`] by the plugin's loop, whatever it waits for). A probe finds the file whose
//! lock is held (its writer lives: liveness is the lock, not the pid, so a SIGKILLed
//! plugin's file counts for nothing), reads it, and is:
//! - ready when the state is `registered` and the beat is at most [`MAX_BEAT_AGE`] old;
//! - live when the beat is at most [`MAX_BEAT_AGE`] old, whatever the state (waiting for
//!   the runtime is the plugin's job, not a fault; a loop stuck for longer is).

use std::io;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdt_pqos::runfile::{self, RunFile};

use crate::State;

/// How often the plugin rewrites its beat.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// The oldest beat a probe accepts (a beat in the future, after the clock went back, is
/// accepted).
pub const MAX_BEAT_AGE: Duration = Duration::from_secs(15);
/// The most of a state file read.
const MAX_STATE_BYTES: u64 = 4096;

/// The prefix of the state files of plugin `name`: `nri-<name>-`.
#[must_use]
pub fn prefix(name: &str) -> String {
    format!("nri-{name}-")
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The plugin's state file, kept (and locked) while it lives.
#[derive(Debug)]
pub struct StateFile {
    file: RunFile,
    state: State,
    beat: Instant,
}

impl StateFile {
    /// Creates the state file of plugin `name` in `run_dir` (state `connecting`), after
    /// removing the files of that name whose writers have ended.
    ///
    /// # Errors
    /// The run directory is not safe or cannot be written (`rdt_pqos::runfile`).
    pub fn create(run_dir: &Path, name: &str) -> io::Result<Self> {
        let prefix = prefix(name);
        for dead in runfile::dead_run_files(run_dir, &prefix, MAX_STATE_BYTES)? {
            let _ = dead.remove();
        }
        let state = State::Connecting;
        let file = RunFile::create(run_dir, &prefix, Self::text(state).as_bytes())?;
        Ok(Self {
            file,
            state,
            beat: Instant::now(),
        })
    }

    fn text(state: State) -> String {
        format!(
            "state={}\nbeat={}\npid={}\n",
            state.word(),
            now_secs(),
            std::process::id()
        )
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Records `state` (and a beat).
    ///
    /// # Errors
    /// The rewrite fails.
    pub fn set(&mut self, state: State) -> io::Result<()> {
        self.state = state;
        self.beat = Instant::now();
        self.file.rewrite(Self::text(state).as_bytes())
    }

    /// A beat, when the last is [`HEARTBEAT`] old.
    ///
    /// # Errors
    /// The rewrite fails.
    pub fn heartbeat(&mut self) -> io::Result<()> {
        if self.beat.elapsed() < HEARTBEAT {
            return Ok(());
        }
        self.set(self.state)
    }

    /// Removes the file (the plugin stops).
    ///
    /// # Errors
    /// `unlink(2)`'s.
    pub fn remove(self) -> io::Result<()> {
        self.file.remove()
    }
}

/// What a probe asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Registered with the runtime (readiness).
    Ready,
    /// Alive and not stuck (liveness).
    Live,
}

/// Checks plugin `name`'s state file in `run_dir` for `probe` (module docs): `Ok` with
/// the state's word, or the reason it fails.
///
/// # Errors
/// No live plugin of that name, a state other than `registered` (for [`Probe::Ready`]),
/// a beat older than [`MAX_BEAT_AGE`], an unreadable file.
pub fn check(run_dir: &Path, name: &str, probe: Probe) -> Result<String, String> {
    let prefix = prefix(name);
    let pid_of = |n: &str| {
        n.strip_prefix(&prefix)
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u32>().ok())
    };
    let scan = runfile::scan_run_files(run_dir, pid_of, MAX_STATE_BYTES)
        .map_err(|e| format!("{}: {e}", run_dir.display()))?;
    drop(scan.dead);
    let Some((pid, path)) = scan.live.into_iter().max_by_key(|(pid, _)| *pid) else {
        return Err(format!(
            "no live NRI plugin {name} (no locked {}/{prefix}<pid>)",
            run_dir.display()
        ));
    };
    // a rewrite in progress reads as empty or partial: read again
    let mut last = String::new();
    for _ in 0..5 {
        let text = runfile::read_run_file(&path, MAX_STATE_BYTES)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_owned)
        };
        if let (Some(state), Some(beat)) = (field("state"), field("beat"))
            && let Ok(beat) = beat.parse::<u64>()
        {
            let age = now_secs().saturating_sub(beat);
            if age > MAX_BEAT_AGE.as_secs() {
                return Err(format!(
                    "plugin {name} (pid {pid}): no heartbeat for {age} s (state {state})"
                ));
            }
            if probe == Probe::Ready && state != State::Registered.word() {
                return Err(format!(
                    "plugin {name} (pid {pid}): {state}, not registered"
                ));
            }
            return Ok(state);
        }
        last = text;
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "{}: not a state file: {:?}",
        path.display(),
        last.chars().take(80).collect::<String>()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_while_registered_live_while_beating_and_nothing_once_gone() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        assert!(check(&run, "rdt", Probe::Live).is_err(), "no file yet");
        let mut f = StateFile::create(&run, "rdt").unwrap();
        assert_eq!(check(&run, "rdt", Probe::Live).unwrap(), "connecting");
        let e = check(&run, "rdt", Probe::Ready).unwrap_err();
        assert!(e.contains("connecting, not registered"), "{e}");
        f.set(State::Registered).unwrap();
        assert_eq!(check(&run, "rdt", Probe::Ready).unwrap(), "registered");
        // another plugin's name is another file
        assert!(check(&run, "rdt2", Probe::Ready).is_err());
        f.set(State::Connecting).unwrap();
        assert!(check(&run, "rdt", Probe::Ready).is_err());
        // a stale beat
        let stale = format!("state=registered\nbeat={}\npid=1\n", now_secs() - 60);
        f.file.rewrite(stale.as_bytes()).unwrap();
        let e = check(&run, "rdt", Probe::Live).unwrap_err();
        assert!(e.contains("no heartbeat for 60 s"), "{e}");
        f.remove().unwrap();
        assert!(check(&run, "rdt", Probe::Live).is_err());
    }
}
