//! [`Session`]: one program's use of a persistent in-process simulated platform, so that
//! separate runs (`pqos --sim -e ...`, then `pqos --sim -s`) act on one machine.
//!
//! A session finds the model (a built-in name or a CPUID dump file), takes an exclusive lock
//! on `<state>.lock` (two runs on one state file take turns instead of the last one to save
//! silently undoing the other's changes), loads the saved state, installs a scenario, and
//! saves the state back when asked ([`Session::save`]).
//!
//! The platform's resctrl ([`Session::resctrl`], the OS interface in-process) is part of
//! the state: once mounted, it stays mounted with its groups across sessions, as the
//! kernel's mount outlives the processes that use it ([`crate::inprocess`], "Persistence").

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rdt_core::runfile::{LockWaitError, lock_with_timeout};

use crate::inprocess::InProcessResctrl;
use crate::{BUILTIN_MODELS, Scenario, SimError, SimHandle, SimPlatform};

/// How long [`Session::open`] waits for another run on the same state file by default.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(10);

/// Opening a [`Session`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// `model` is neither a built-in model nor an existing file.
    #[error(
        "not a built-in model ({}) and no such CPUID dump file",
        BUILTIN_MODELS.join(", ")
    )]
    NoSuchModel {
        /// The name given.
        model: String,
    },
    /// The CPUID dump file cannot be read.
    #[error("reading the CPUID dump {}", .path.display())]
    ReadDump {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The model cannot be built from its dump.
    #[error(transparent)]
    Model(SimError),
    /// Another program holds the state file's lock.
    #[error(
        "another program is using the simulated platform in {} (still busy after {} s)",
        .state.display(),
        .waited.as_secs()
    )]
    Busy {
        /// The state file.
        state: PathBuf,
        /// How long this one waited.
        waited: Duration,
    },
    /// The lock file cannot be opened or locked.
    #[error("locking the simulator state {}", .path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The saved state cannot be loaded.
    #[error(
        "loading the simulated platform's state from {} (delete the file to start afresh, or choose another)",
        .path.display()
    )]
    Load {
        /// The state file.
        path: PathBuf,
        /// Why.
        #[source]
        source: SimError,
    },
    /// The state file is a symbolic link: refused (as pqos refuses `-o` and `-l` links), so
    /// that a link planted where a root-run program saves its state cannot redirect the
    /// write.
    #[error(
        "File {} is a symlink (refused: name the state file itself)",
        .path.display()
    )]
    StateSymlink {
        /// The state file given.
        path: PathBuf,
    },
    /// The scenario file is invalid or does not fit the model.
    #[error("scenario {}", .path.display())]
    Scenario {
        /// The scenario file.
        path: PathBuf,
        /// Why.
        #[source]
        source: SimError,
    },
}

/// What a [`Session`] opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOptions {
    /// A built-in model ([`BUILTIN_MODELS`]) or the path of a CPUID dump.
    pub model: String,
    /// The state file; `None` for [`default_state_path`].
    pub state: Option<PathBuf>,
    /// A scenario file to install (kept in the state afterwards).
    pub scenario: Option<PathBuf>,
    /// How long to wait for another run on the same state file.
    pub lock_wait: Duration,
    /// The kernel release whose resctrl the in-process mount shows (not saved: each run
    /// chooses).
    pub kernel: crate::resctrl::KernelVersion,
}

impl SessionOptions {
    /// `model` with the default state file, no scenario, [`DEFAULT_LOCK_WAIT`].
    #[must_use]
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            state: None,
            scenario: None,
            lock_wait: DEFAULT_LOCK_WAIT,
            kernel: crate::resctrl::KernelVersion::default(),
        }
    }
}

/// A persistent simulated platform, locked for this program until dropped.
#[derive(Debug)]
pub struct Session {
    /// Dropped first: parks the mount before the lock goes.
    resctrl: InProcessResctrl,
    handle: SimHandle,
    state: PathBuf,
    /// The state as the file holds it after opening (when it existed): a save that would
    /// write the same text leaves the file alone.
    loaded: Option<String>,
    _lock: File,
}

impl Session {
    /// Builds the model, locks and loads its state file, and installs the scenario.
    ///
    /// # Errors
    /// [`SessionError::NoSuchModel`], [`SessionError::ReadDump`], [`SessionError::Model`],
    /// [`SessionError::StateSymlink`] when the state file (or its lock file) is a symbolic
    /// link, [`SessionError::Busy`] after waiting [`SessionOptions::lock_wait`],
    /// [`SessionError::Lock`], [`SessionError::Load`], [`SessionError::Scenario`].
    pub fn open(opts: &SessionOptions) -> Result<Self, SessionError> {
        let mut platform = open_model(&opts.model)?;
        platform.set_kernel(opts.kernel);
        let state = opts
            .state
            .clone()
            .unwrap_or_else(|| default_state_path(platform.identity()));
        refuse_symlink(&state)?;
        let lock = lock_state(&state, opts.lock_wait)?;
        let existed = state.symlink_metadata().is_ok();
        if existed {
            platform
                .load_from(&state)
                .map_err(|source| SessionError::Load {
                    path: state.clone(),
                    source,
                })?;
        }
        if let Some(path) = &opts.scenario {
            let scenario_err = |source| SessionError::Scenario {
                path: path.clone(),
                source,
            };
            let scenario =
                Scenario::from_path(path).map_err(|e| scenario_err(SimError::Scenario(e)))?;
            platform
                .set_scenario(&scenario)
                .map_err(|e| scenario_err(SimError::Scenario(e)))?;
        }
        let handle = SimHandle::new(platform);
        let resctrl = InProcessResctrl::new(handle.clone()).map_err(|e| SessionError::Load {
            path: state.clone(),
            source: SimError::Io {
                op: "mount the saved resctrl of",
                path: state.clone(),
                source: e,
            },
        })?;
        let mut session = Self {
            resctrl,
            handle,
            state,
            loaded: None,
            _lock: lock,
        };
        if existed {
            session.loaded = Some(session.serialized());
        }
        Ok(session)
    }

    /// The platform, to hand to a backend (it is both the MSRs and the PMU).
    #[must_use]
    pub const fn handle(&self) -> &SimHandle {
        &self.handle
    }

    /// The platform's resctrl, in-process: the OS interface without a mount
    /// ([`crate::inprocess`]). Mounted as the state file left it; unmounted on a fresh
    /// platform.
    #[must_use]
    pub const fn resctrl(&self) -> &InProcessResctrl {
        &self.resctrl
    }

    /// The state file.
    #[must_use]
    pub fn state_path(&self) -> &Path {
        &self.state
    }

    /// Saves the platform's state to the state file (atomically), unless the file already
    /// holds exactly this state: a run that changed nothing (`pqos -s`, `-d`) leaves the file
    /// as it was, neither rewritten nor replaced.
    ///
    /// # Errors
    /// [`SimError::Io`] naming the file that could not be written.
    pub fn save(&self) -> Result<(), SimError> {
        let text = self.serialized();
        if self.loaded.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        crate::state::write_state(&self.state, &text)
    }

    /// The state [`Self::save`] writes: the platform's, with the resctrl mount's.
    fn serialized(&self) -> String {
        let resctrl = self.resctrl.state();
        let mut platform = self.handle.lock();
        platform.set_resctrl_state(resctrl);
        let text = platform.save_state();
        platform.set_resctrl_state(None);
        text
    }
}

/// A built-in model by name, or a model from the CPUID dump file at `model`; either may
/// end with the `rdt=` boot parameter, `:rdt=LIST` ([`crate::quirks::split_model_spec`]).
///
/// # Errors
/// [`SessionError::NoSuchModel`], [`SessionError::ReadDump`], [`SessionError::Model`].
pub fn open_model(model: &str) -> Result<SimPlatform, SessionError> {
    let (name, rdt) = crate::quirks::split_model_spec(model)
        .map_err(|e| SessionError::Model(SimError::RdtOptions(e)))?;
    if BUILTIN_MODELS.contains(&name) {
        return SimPlatform::builtin(model).map_err(SessionError::Model);
    }
    let path = Path::new(name);
    if !path.exists() {
        return Err(SessionError::NoSuchModel {
            model: model.to_owned(),
        });
    }
    let text =
        rdt_core::file::read_text(path, rdt_core::cpuid::MAX_DUMP_BYTES).map_err(|source| {
            SessionError::ReadDump {
                path: path.to_owned(),
                source,
            }
        })?;
    let mut p = SimPlatform::from_dump(&text).map_err(SessionError::Model)?;
    p.set_rdt_boot_options(rdt);
    Ok(p)
}

/// `$XDG_RUNTIME_DIR/rdt-sim-<model>.json` (the temp dir when unset), `<model>` being the
/// platform's identity without `builtin:` and with other characters than `[A-Za-z0-9_-]`
/// replaced by `-`.
#[must_use]
pub fn default_state_path(identity: &str) -> PathBuf {
    let name: String = identity
        .strip_prefix("builtin:")
        .unwrap_or(identity)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    dir.join(format!("rdt-sim-{name}.json"))
}

/// [`SessionError::StateSymlink`] when `path` is a symbolic link.
fn refuse_symlink(path: &Path) -> Result<(), SessionError> {
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(SessionError::StateSymlink {
            path: path.to_owned(),
        });
    }
    Ok(())
}

/// An exclusive lock on `<state>.lock`, waiting up to `wait` for another holder. The lock
/// file is opened with `O_NOFOLLOW`: a link there is refused, not followed.
fn lock_state(state: &Path, wait: Duration) -> Result<File, SessionError> {
    let mut lock_path = state.as_os_str().to_owned();
    lock_path.push(".lock");
    let lock_path = PathBuf::from(lock_path);
    refuse_symlink(&lock_path)?;
    let lock_err = |source| SessionError::Lock {
        path: lock_path.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&lock_path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                SessionError::StateSymlink {
                    path: lock_path.clone(),
                }
            } else {
                lock_err(e)
            }
        })?;
    match lock_with_timeout(&file, true, wait) {
        Ok(()) => Ok(file),
        Err(LockWaitError::Timeout { waited }) => Err(SessionError::Busy {
            state: state.to_owned(),
            waited,
        }),
        Err(LockWaitError::Io(e)) => Err(lock_err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_state_file_is_named_after_the_model() {
        let p = default_state_path("builtin:broadwell-ep");
        assert_eq!(p.file_name().unwrap(), "rdt-sim-broadwell-ep.json");
        let p = default_state_path("dump:fnv1a64:00ab");
        assert_eq!(p.file_name().unwrap(), "rdt-sim-dump-fnv1a64-00ab.json");
    }

    #[test]
    fn a_second_session_on_one_state_file_waits_then_says_busy() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let opts = SessionOptions {
            state: Some(dir.path().join("s.json")),
            lock_wait: Duration::from_millis(100),
            ..SessionOptions::new("broadwell-ep")
        };
        let first = Session::open(&opts).unwrap();
        // act
        let second = Session::open(&opts);
        // assert
        assert!(
            matches!(second, Err(SessionError::Busy { .. })),
            "{second:?}"
        );
        drop(first);
        Session::open(&opts).unwrap();
    }

    #[test]
    fn state_survives_between_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let opts = SessionOptions {
            state: Some(dir.path().join("s.json")),
            ..SessionOptions::new("skylake-sp")
        };
        let s = Session::open(&opts).unwrap();
        s.handle().lock().advance(Duration::from_secs(7));
        s.save().unwrap();
        drop(s);
        let s = Session::open(&opts).unwrap();
        assert_eq!(s.handle().lock().now(), Duration::from_secs(7));
    }

    #[test]
    fn unknown_model_names_the_built_in_ones() {
        let e = open_model("no-such-model").unwrap_err();
        assert!(e.to_string().contains("broadwell-ep"), "{e}");
    }
}
