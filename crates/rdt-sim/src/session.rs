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
//! The session composes the state file ([`Saved`]): the machine's state beside the
//! kernel's, neither model holding the other's.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rdt_host::runfile::{LockWaitError, lock_with_timeout};

use serde::Serialize;

use crate::inprocess::InProcessResctrl;
use crate::resctrl::ResctrlState;
use crate::state::MachineState;
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
    /// A fresh platform ([`SessionOptions::fresh`]) could not drop the run directory of the
    /// state it discards.
    #[error("removing {} (the run directory of the discarded simulator state)", .path.display())]
    Forget {
        /// The run directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The directory of this user's state files ([`default_state_dir`]) cannot be made, or
    /// is not safe to keep state in.
    #[error(
        "the simulated platform's state directory {}: {why} (set XDG_RUNTIME_DIR to a directory of yours, or name a state file)",
        .path.display()
    )]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
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
    /// A scenario to install (kept in the state afterwards): a file, or `builtin:NAME` for
    /// one of [`crate::BUILTIN_SCENARIOS`] ([`Scenario::from_arg`]).
    pub scenario: Option<PathBuf>,
    /// How long to wait for another run on the same state file.
    pub lock_wait: Duration,
    /// The kernel release whose resctrl the in-process mount shows (not saved: each run
    /// chooses).
    pub kernel: crate::resctrl::KernelVersion,
    /// Whether the model's clock follows the wall clock ([`SimHandle::with_wall_clock`]):
    /// for a program that polls as it would on hardware. `false` (the default): it moves
    /// only when the program calls [`SimHandle::advance`].
    pub wall_clock: bool,
    /// Only reads the saved state (`pqos -s`, `-d`): the lock file is opened read-only and
    /// locked shared (a user who may read a shared state but not write it can still look
    /// at it; readers do not wait for each other, a writer waits for them), and
    /// [`Session::save`] writes nothing. `false` by default.
    pub read_only: bool,
    /// Starts from the model's reset state, ignoring the saved one (`--sim-fresh`): what
    /// earlier runs changed is gone, and the next [`Session::save`] replaces it. `false` by
    /// default: the platform is as the last run left it ([`Session::changes_from_reset`]
    /// says how that differs from reset). It overrides [`Self::read_only`]: forgetting the
    /// saved state is a write.
    pub fresh: bool,
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
            wall_clock: false,
            read_only: false,
            fresh: false,
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
    /// The state as the file holds it (after opening, when it existed, and after each
    /// save): a save that would write the same text leaves the file alone.
    saved: std::sync::Mutex<Option<String>>,
    /// [`SessionOptions::read_only`].
    read_only: bool,
    /// How the loaded state differs from the model's reset state ([`Self::changes_from_reset`]).
    changes: Vec<String>,
    /// The lock (`None`: read-only, and no lock file, so no state anyone saved).
    _lock: Option<File>,
}

impl Session {
    /// Builds the model, locks and loads its state file, and installs the scenario.
    ///
    /// # Errors
    /// [`SessionError::NoSuchModel`], [`SessionError::ReadDump`], [`SessionError::Model`],
    /// [`SessionError::StateDir`] when the default state directory is not safe,
    /// [`SessionError::StateSymlink`] when the state file (or its lock file) is a symbolic
    /// link, [`SessionError::Busy`] after waiting [`SessionOptions::lock_wait`],
    /// [`SessionError::Lock`], [`SessionError::Load`], [`SessionError::Scenario`];
    /// [`SessionError::Forget`] when a fresh platform cannot drop the old run directory.
    pub fn open(opts: &SessionOptions) -> Result<Self, SessionError> {
        let mut platform = open_model(&opts.model)?;
        platform.set_kernel(opts.kernel);
        let state = match &opts.state {
            Some(state) => state.clone(),
            None => default_state_path(platform.identity())?,
        };
        refuse_symlink(&state)?;
        // A fresh platform replaces the saved state: never a read-only session.
        let read_only = opts.read_only && !opts.fresh;
        let lock = lock_state(&state, opts.lock_wait, read_only)?;
        let existed = !opts.fresh && state.symlink_metadata().is_ok();
        if opts.fresh {
            forget_run_dir(&run_dir_of(&state))?;
        }
        let reset = platform.machine_state();
        let mut kernel = None;
        if existed {
            let load_err = |source| SessionError::Load {
                path: state.clone(),
                source,
            };
            let saved = Saved::read(&state).map_err(load_err)?;
            platform.restore_machine(saved.machine).map_err(load_err)?;
            kernel = saved.kernel;
        }
        let mut changes = platform.machine_state().changes_from(&reset);
        if let Some(k) = &kernel {
            let groups = k.control_groups();
            changes.push(if groups.is_empty() {
                "resctrl mounted".to_owned()
            } else {
                format!("resctrl mounted with groups {}", groups.join(", "))
            });
        }
        if let Some(path) = &opts.scenario {
            let scenario_err = |source| SessionError::Scenario {
                path: path.clone(),
                source,
            };
            let scenario =
                Scenario::from_arg(path).map_err(|e| scenario_err(SimError::Scenario(e)))?;
            platform
                .set_scenario(&scenario)
                .map_err(|e| scenario_err(SimError::Scenario(e)))?;
        }
        let handle = if opts.wall_clock {
            SimHandle::with_wall_clock(platform)
        } else {
            SimHandle::new(platform)
        };
        let resctrl =
            InProcessResctrl::with_state(handle.clone(), kernel.as_ref()).map_err(|e| {
                SessionError::Load {
                    path: state.clone(),
                    source: SimError::Io {
                        op: "mount the saved resctrl of",
                        path: state.clone(),
                        source: e,
                    },
                }
            })?;
        let mut session = Self {
            resctrl,
            handle,
            state,
            saved: std::sync::Mutex::new(None),
            read_only,
            changes,
            _lock: lock,
        };
        if existed {
            session.saved = std::sync::Mutex::new(Some(session.serialized()));
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

    /// How the platform as opened differs from the model's reset state, because earlier
    /// runs on the same state file changed it (before this run's scenario, if any, was
    /// installed): one phrase per change ([`MachineState::changes_from`], and `resctrl
    /// mounted with groups gold, silver`). Empty for a fresh platform
    /// ([`SessionOptions::fresh`], or no state saved yet). A program says so once, so that a
    /// user knows the platform is not the one a fresh machine would show.
    #[must_use]
    pub fn changes_from_reset(&self) -> &[String] {
        &self.changes
    }

    /// The run directory of this platform (`<state file>.run`): the facade's journals,
    /// named classes and leases, as the host's `/run/rdt` holds them.
    #[must_use]
    pub fn run_dir(&self) -> PathBuf {
        run_dir_of(&self.state)
    }

    /// The state file.
    #[must_use]
    pub fn state_path(&self) -> &Path {
        &self.state
    }

    /// Saves the platform's state to the state file (atomically), unless the file already
    /// holds exactly this state: a run that changed nothing (`pqos -s`, `-d`) leaves the file
    /// as it was, neither rewritten nor replaced, and so does a second save of the same
    /// state. A read-only session ([`SessionOptions::read_only`]) saves nothing.
    ///
    /// # Errors
    /// [`SimError::Io`] naming the file that could not be written.
    pub fn save(&self) -> Result<(), SimError> {
        if self.read_only {
            return Ok(());
        }
        let text = self.serialized();
        let mut saved = self
            .saved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if saved.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        crate::state::write_state(&self.state, &text)?;
        *saved = Some(text);
        Ok(())
    }

    /// The state [`Self::save`] writes: the platform's, with the resctrl mount's.
    fn serialized(&self) -> String {
        let kernel = self.resctrl.state();
        let machine = self.handle.lock().machine_state();
        Saved { machine, kernel }.to_json()
    }
}

/// The run directory of the simulated platform saved at `state`: `<state>.run`.
pub(crate) fn run_dir_of(state: &Path) -> PathBuf {
    let mut dir = state.as_os_str().to_owned();
    dir.push(".run");
    dir.into()
}

/// Removes the run directory `dir` of a platform opened fresh: its journals, named classes
/// and leases describe the state being discarded. A symbolic link there is refused
/// ([`SessionError::StateSymlink`]), never followed; no directory is nothing to do.
fn forget_run_dir(dir: &Path) -> Result<(), SessionError> {
    match dir.symlink_metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(m) if m.file_type().is_symlink() => Err(SessionError::StateSymlink {
            path: dir.to_path_buf(),
        }),
        _ => std::fs::remove_dir_all(dir).map_err(|source| SessionError::Forget {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// A session's state file: the machine's state and the kernel's, composed here so that
/// neither model holds the other's. It is one JSON object: the machine's fields
/// ([`crate::state`]) and, while resctrl is mounted, `resctrl` ([`ResctrlState`]), the
/// format state files have always had.
#[derive(Debug)]
pub struct Saved {
    /// The machine's: registers, counters, clock, scenario ([`SimPlatform::machine_state`]).
    pub machine: MachineState,
    /// The kernel's: the resctrl mount ([`InProcessResctrl::state`]); `None` when unmounted.
    pub kernel: Option<ResctrlState>,
}

/// [`Saved`] as it is written: the machine's fields, then `resctrl`.
#[derive(Serialize)]
struct SavedFile<'a> {
    #[serde(flatten)]
    machine: &'a MachineState,
    #[serde(skip_serializing_if = "Option::is_none")]
    resctrl: Option<&'a ResctrlState>,
}

impl Saved {
    /// The state as the file holds it (pretty-printed JSON).
    #[must_use]
    pub fn to_json(&self) -> String {
        let file = SavedFile {
            machine: &self.machine,
            resctrl: self.kernel.as_ref(),
        };
        // Serialising plain structs of strings and numbers into a String cannot fail.
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// Parses a state file's text: the kernel's `resctrl` field (absent or `null`: none),
    /// the rest the machine's.
    ///
    /// # Errors
    /// [`SimError::StateFormat`] when the text is not a JSON object of that shape.
    pub fn from_json(text: &str) -> Result<Self, SimError> {
        let format = |source| SimError::StateFormat { source };
        let mut fields: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(format)?;
        let kernel = match fields.remove("resctrl") {
            Some(v) => serde_json::from_value(v).map_err(format)?,
            None => None,
        };
        let machine = serde_json::from_value(serde_json::Value::Object(fields)).map_err(format)?;
        Ok(Self { machine, kernel })
    }

    /// Reads the state file at `path` (at most [`crate::state::MAX_STATE_BYTES`]).
    ///
    /// # Errors
    /// [`SimError::Io`] when it cannot be read; otherwise as [`Saved::from_json`].
    pub fn read(path: &Path) -> Result<Self, SimError> {
        Self::from_json(&crate::state::read_state(path)?)
    }

    /// Writes the state file at `path` atomically (a temporary file renamed over it).
    ///
    /// # Errors
    /// [`SimError::Io`] naming the file that could not be written or renamed.
    pub fn write(&self, path: &Path) -> Result<(), SimError> {
        crate::state::write_state(path, &self.to_json())
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
        rdt_host::file::read_text(path, rdt_core::cpuid::MAX_DUMP_BYTES).map_err(|source| {
            SessionError::ReadDump {
                path: path.to_owned(),
                source,
            }
        })?;
    let mut p = SimPlatform::from_dump(&text).map_err(SessionError::Model)?;
    p.set_rdt_boot_options(rdt);
    Ok(p)
}

/// `<dir>/<model>.json` in this user's state directory ([`default_state_dir`]), `<model>`
/// being the platform's identity without `builtin:` and with other characters than
/// `[A-Za-z0-9_-]` replaced by `-`.
///
/// # Errors
/// As [`default_state_dir`].
pub fn default_state_path(identity: &str) -> Result<PathBuf, SessionError> {
    Ok(default_state_dir()?.join(state_file_name(identity)))
}

/// The state file's name of the platform `identity` (`broadwell-ep.json`).
fn state_file_name(identity: &str) -> String {
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
    format!("{name}.json")
}

/// The directory where this user's simulated platforms keep their state when no state file
/// is named, created with mode 0700 when missing: `$XDG_RUNTIME_DIR/rdt-sim` where
/// `XDG_RUNTIME_DIR` names a directory of this user's (the per-user runtime directory of
/// pam_systemd), else `$XDG_STATE_HOME/rdt-sim`, else `$HOME/.local/state/rdt-sim` (the XDG
/// base directory specification), each only where the variable names a directory owned by
/// the effective uid (not the invoking user's home kept by `sudo`), else
/// `<temp dir>/rdt-sim-<uid>`.
///
/// The directory must be a directory of this user's (not a symbolic link, owned by the
/// effective uid) that no one else can write: another local user can then neither plant a
/// link where a root-run `pqos --sim` writes its state, journals and named classes, nor
/// see or change that state. One planted in the temp dir under this user's name is refused,
/// not used.
///
/// # Errors
/// [`SessionError::StateDir`] when the directory cannot be created or fails the checks.
pub fn default_state_dir() -> Result<PathBuf, SessionError> {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::geteuid().as_raw();
    // A base directory of this user's: not one the environment kept from another user
    // (HOME=/home/alice under sudo).
    let ours = |name: &str| {
        std::env::var_os(name).map(PathBuf::from).filter(|d| {
            d.is_absolute()
                && d != Path::new("/")
                && d.metadata().is_ok_and(|m| m.is_dir() && m.uid() == uid)
        })
    };
    let dir = if let Some(run) = ours("XDG_RUNTIME_DIR") {
        run.join("rdt-sim")
    } else if let Some(state) = ours("XDG_STATE_HOME") {
        state.join("rdt-sim")
    } else if let Some(home) = ours("HOME") {
        home.join(".local/state/rdt-sim")
    } else {
        std::env::temp_dir().join(format!("rdt-sim-{uid}"))
    };
    private_dir(&dir, uid)?;
    Ok(dir)
}

/// Creates `dir` (mode 0700; its parents as the umask says) unless it exists, then checks
/// that it is a directory, not a link, owned by `uid` and writable by no one else.
fn private_dir(dir: &Path, uid: u32) -> Result<(), SessionError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let refuse = |why: String| SessionError::StateDir {
        path: dir.to_owned(),
        why,
    };
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| refuse(format!("creating its parent: {e}")))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(refuse(format!("cannot create it: {e}"))),
    }
    let meta = dir
        .symlink_metadata()
        .map_err(|e| refuse(format!("cannot read it: {e}")))?;
    if meta.file_type().is_symlink() {
        return Err(refuse("it is a symbolic link (refused)".to_owned()));
    }
    if !meta.is_dir() {
        return Err(refuse("it is not a directory".to_owned()));
    }
    if meta.uid() != uid {
        return Err(refuse(format!(
            "it belongs to uid {}, not to this user (uid {uid})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "others can write it (mode {:o}; chmod 700 it)",
            meta.mode() & 0o7777
        )));
    }
    Ok(())
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

/// A lock on `<state>.lock`, waiting up to `wait` for another holder: exclusive on a file
/// opened for writing (created if need be), or for `read_only`, shared on a file opened
/// read-only (`None` when there is no lock file: no state was ever saved there). The lock
/// file is opened with `O_NOFOLLOW`: a link there is refused, not followed.
fn lock_state(state: &Path, wait: Duration, read_only: bool) -> Result<Option<File>, SessionError> {
    let mut lock_path = state.as_os_str().to_owned();
    lock_path.push(".lock");
    let lock_path = PathBuf::from(lock_path);
    refuse_symlink(&lock_path)?;
    let lock_err = |source| SessionError::Lock {
        path: lock_path.clone(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    if read_only {
        options.read(true);
    } else {
        options.create(true).truncate(false).write(true);
    }
    let opened = options.custom_flags(libc::O_NOFOLLOW).open(&lock_path);
    if read_only
        && let Err(e) = &opened
        && e.kind() == std::io::ErrorKind::NotFound
    {
        return Ok(None);
    }
    let file = opened.map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            SessionError::StateSymlink {
                path: lock_path.clone(),
            }
        } else {
            lock_err(e)
        }
    })?;
    match lock_with_timeout(&file, !read_only, wait) {
        Ok(()) => Ok(Some(file)),
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
        assert_eq!(state_file_name("builtin:broadwell-ep"), "broadwell-ep.json");
        assert_eq!(
            state_file_name("dump:fnv1a64:00ab"),
            "dump-fnv1a64-00ab.json"
        );
    }

    #[test]
    fn a_private_dir_is_created_0700_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("a/rdt-sim");
        let uid = nix::unistd::geteuid().as_raw();
        private_dir(&dir, uid).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        private_dir(&dir, uid).unwrap();
    }

    #[test]
    fn a_planted_link_or_foreign_or_open_dir_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let uid = nix::unistd::geteuid().as_raw();
        // a link another user planted where the directory would be
        let target = base.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        let link = base.path().join("rdt-sim-link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = private_dir(&link, uid).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // a directory of someone else's
        let e = private_dir(&target, uid + 1).unwrap_err();
        assert!(e.to_string().contains("belongs to uid"), "{e}");
        // a directory others can write
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = private_dir(&target, uid).unwrap_err();
        assert!(e.to_string().contains("others can write it"), "{e}");
        // a file
        let file = base.path().join("file");
        std::fs::write(&file, "").unwrap();
        let e = private_dir(&file, uid).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }

    #[test]
    fn a_reopened_platform_names_what_earlier_runs_changed_and_fresh_forgets_it() {
        use rdt_core::LogicalCpu;
        use rdt_msr::{MsrAddr, MsrIo};
        // arrange: a first run gives COS1 a smaller L3 mask and puts CPU 3 in COS2
        let dir = tempfile::tempdir().unwrap();
        let opts = SessionOptions {
            state: Some(dir.path().join("s.json")),
            ..SessionOptions::new("broadwell-ep")
        };
        let first = Session::open(&opts).unwrap();
        assert_eq!(
            first.changes_from_reset(),
            [] as [String; 0],
            "new: as reset"
        );
        let mut msr = first.handle().clone();
        msr.write(LogicalCpu::new(0), MsrAddr::new(0xC91), 0xff)
            .unwrap();
        msr.write(LogicalCpu::new(3), MsrAddr::new(0xC8F), 2 << 32)
            .unwrap();
        first.save().unwrap();
        std::fs::create_dir(first.run_dir()).unwrap();
        std::fs::write(first.run_dir().join("journal"), "x").unwrap();
        drop(first);
        // act
        let again = Session::open(&opts).unwrap();
        // assert: the next run is told, class by class
        assert_eq!(
            again.changes_from_reset(),
            ["COS1 (L3 CAT)", "CPUs 3 in COS2"]
        );
        drop(again);
        // act: fresh
        let fresh = Session::open(&SessionOptions {
            fresh: true,
            ..opts.clone()
        })
        .unwrap();
        // assert: reset registers, nothing to say, the old run directory gone
        assert_eq!(fresh.changes_from_reset(), [] as [String; 0]);
        let mut msr = fresh.handle().clone();
        assert_eq!(
            msr.read(LogicalCpu::new(0), MsrAddr::new(0xC91)).unwrap(),
            0xfffff
        );
        assert!(!fresh.run_dir().exists());
        // and its save replaces the old state: the next plain open is as reset
        fresh.save().unwrap();
        drop(fresh);
        let after = Session::open(&opts).unwrap();
        assert_eq!(after.changes_from_reset(), [] as [String; 0]);
    }

    #[test]
    fn a_wall_clock_session_moves_on_by_itself() {
        let dir = tempfile::tempdir().unwrap();
        let opts = SessionOptions {
            state: Some(dir.path().join("s.json")),
            wall_clock: true,
            ..SessionOptions::new("broadwell-ep")
        };
        let s = Session::open(&opts).unwrap();
        let t0 = s.handle().lock().now();
        std::thread::sleep(Duration::from_millis(20));
        let t1 = s.handle().lock().now();
        assert!(t1 >= t0 + Duration::from_millis(20), "{t0:?} -> {t1:?}");
        // a manual session does not
        let manual = Session::open(&SessionOptions {
            state: Some(dir.path().join("m.json")),
            ..SessionOptions::new("broadwell-ep")
        })
        .unwrap();
        let t0 = manual.handle().lock().now();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(manual.handle().lock().now(), t0);
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
    fn the_state_file_is_the_machines_fields_then_the_kernels_mount() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let opts = SessionOptions {
            state: Some(path.clone()),
            ..SessionOptions::new("skylake-sp")
        };
        let s = Session::open(&opts).unwrap();
        s.resctrl()
            .remount(&rdt_core::MountOptions::default())
            .unwrap();
        s.resctrl().files().mkdir("kept").unwrap();
        s.save().unwrap();
        let machine_only = s.handle().lock().save_state();
        drop(s);
        let text = std::fs::read_to_string(&path).unwrap();
        // The format state files have had since the resctrl mount was kept in them.
        let keys: Vec<String> =
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text)
                .unwrap()
                .keys()
                .cloned()
                .collect();
        let mut expected: Vec<String> = [
            "format", "model", "now_ns", "cpus", "l3", "l2", "mba", "smba", "counters", "pmu",
            "scenario", "resctrl",
        ]
        .map(String::from)
        .to_vec();
        expected.sort(); // serde_json's map without `preserve_order` is sorted
        assert_eq!(keys, expected);
        assert!(
            text.starts_with(machine_only.trim_end_matches("\n}")),
            "{text:.300}"
        );
        let saved = Saved::from_json(&text).unwrap();
        assert!(saved.kernel.is_some());
        assert_eq!(saved.to_json(), text);
        assert!(Saved::from_json(&machine_only).unwrap().kernel.is_none());
        assert!(matches!(
            Saved::from_json("[]"),
            Err(SimError::StateFormat { .. })
        ));
        let s = Session::open(&opts).unwrap();
        assert!(
            s.resctrl().files().is_dir("kept"),
            "mounted again from the file"
        );
    }

    #[test]
    fn unknown_model_names_the_built_in_ones() {
        let e = open_model("no-such-model").unwrap_err();
        assert!(e.to_string().contains("broadwell-ep"), "{e}");
    }
}
