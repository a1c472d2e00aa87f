//! The simulator's adapter for programs that open it through the `rdt` library: what the
//! library's opener needs from a simulated platform, in the types of rdt-core, rdt-msr and
//! rdt-resctrl (this crate cannot name the library's own types; the library maps these onto
//! its `OpenOptions` and `MsrSource`). The library knows nothing of the simulator's control
//! files: they are named here only.
//!
//! - [`attach`]: a platform mounted with FUSE ([`crate::fs`]) and opened through its files,
//!   as `pqos --sysroot DIR` opens it. Its `.sim/` control directory serves the resctrl
//!   mount ([`Attachment::mount_control`]: reading gives the options, writing `remount
//!   OPTS` remounts) and the model's PMU counters ([`Attachment::pmu`], [`crate::simpmu`]).
//! - [`in_process`]: an open [`Session`], the in-process platform of `pqos --sim`: its
//!   registers, PMU, capabilities, topology and resctrl ([`InProcess`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rdt_core::{Capabilities, PmuSource, Topology};
use rdt_msr::MsrIo;
use rdt_resctrl::{ControlFileMount, MountControl, ResctrlFs};

use crate::session::Session;
use crate::simpmu::SimPmuFiles;

/// The control file of the resctrl mount, under a mounted platform's root.
const MOUNT_CONTROL: &str = ".sim/resctrl_mount";
/// The directory of the model's PMU counters, under a mounted platform's root.
const PMU_DIR: &str = ".sim/pmu";

/// The simulator's side of a platform mounted at `root` (module docs). Nothing is checked
/// here: each part answers `None` while its file is missing, so attaching to a directory
/// that is not a simulated platform (a host's sysroot) changes nothing.
#[must_use]
pub fn attach(root: impl AsRef<Path>) -> Attachment {
    Attachment {
        root: root.as_ref().to_owned(),
    }
}

/// A mounted simulated platform's mount control and PMU counters ([`attach`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    root: PathBuf,
}

impl Attachment {
    /// The directory the platform is mounted at.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The resctrl mount's control file (`<root>/.sim/resctrl_mount`) as a [`MountControl`],
    /// when it exists (checked at each call); `None` otherwise.
    #[must_use]
    pub fn mount_control(&self) -> Option<Box<dyn MountControl>> {
        let file = self.root.join(MOUNT_CONTROL);
        file.is_file()
            .then(|| Box::new(ControlFileMount::new(&file)) as Box<dyn MountControl>)
    }

    /// The model's PMU counters (`<root>/.sim/pmu`, [`SimPmuFiles`]) when the directory
    /// exists (checked at each call); `None` otherwise.
    #[must_use]
    pub fn pmu(&self) -> Option<Box<dyn PmuSource + Send>> {
        let dir = self.root.join(PMU_DIR);
        dir.is_dir()
            .then(|| Box::new(SimPmuFiles::new(dir)) as Box<dyn PmuSource + Send>)
    }
}

/// What the library opens an in-process simulated platform with ([`in_process`]).
#[allow(missing_debug_implementations)] // trait objects
pub struct InProcess {
    /// The registers (the model, [`crate::SimHandle`]).
    pub io: Box<dyn MsrIo + Send>,
    /// IPC and LLC misses from the workload model ([`crate::SimHandle`]).
    pub pmu: Box<dyn PmuSource + Send>,
    /// The model's capabilities.
    pub capabilities: Capabilities,
    /// The model's topology.
    pub topology: Topology,
    /// A name for messages: `the simulated <model>`.
    pub name: String,
    /// Where journals, named classes and leases live: `<state file>.run`, next to the state
    /// file and as long-lived as it.
    pub run_dir: PathBuf,
    /// resctrl's files, served in-process ([`crate::inprocess`]), kept mounted with the
    /// state file.
    pub files: Arc<dyn ResctrlFs>,
    /// resctrl's mount, in-process.
    pub mount: Box<dyn MountControl>,
    /// The name of resctrl's root in messages: `sim:<model>:/sys/fs/resctrl`.
    pub resctrl_root: PathBuf,
}

/// The parts of an open session the library opens it with (module docs).
#[must_use]
pub fn in_process(session: &Session) -> InProcess {
    let sim = session.handle();
    let platform = sim.lock();
    InProcess {
        io: Box::new(sim.clone()),
        pmu: Box::new(sim.clone()),
        capabilities: platform.capabilities().clone(),
        topology: platform.topology().clone(),
        name: format!("the simulated {}", platform.model()),
        run_dir: session.run_dir(),
        files: session.resctrl().files(),
        mount: Box::new(session.resctrl().mount_control()),
        resctrl_root: format!("sim:{}:/sys/fs/resctrl", platform.model()).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_is_there_only_while_its_file_is() {
        let dir = tempfile::tempdir().unwrap();
        let a = attach(dir.path());
        assert!(
            a.mount_control().is_none() && a.pmu().is_none(),
            "not a simulator"
        );
        std::fs::create_dir_all(dir.path().join(".sim/pmu")).unwrap();
        std::fs::write(dir.path().join(".sim/resctrl_mount"), "").unwrap();
        assert!(a.mount_control().is_some() && a.pmu().is_some());
        assert_eq!(a.root(), dir.path());
    }

    #[test]
    fn the_run_dir_is_next_to_the_state_file() {
        assert_eq!(
            crate::session::run_dir_of(Path::new("/s/broadwell-ep.json")),
            Path::new("/s/broadwell-ep.json.run")
        );
    }
}
