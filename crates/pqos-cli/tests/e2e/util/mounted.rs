//! A built-in model FUSE-mounted in a temp dir, reached the production way:
//! `pqos --iface=msr --sysroot DIR` ([`Mounted`]), so every register access is a positioned
//! read or write of `DIR/dev/cpu/N/msr` (`DevCpuMsr`), CPUID comes from `DIR/dev/cpu/0/cpuid`
//! and the topology from `DIR/sys/devices/system`; or `pqos --iface=os --sysroot DIR`
//! ([`MountedOs`]), through the model's resctrl at `DIR/sys/fs/resctrl` (`ResctrlBackend`),
//! remounting it through `DIR/.sim/resctrl_mount`.
//!
//! The mount is served in-process ([`rdt_sim::fs::testing::TestMount`]), resctrl mounted as
//! `rdt-sim mount` does by default (so pqos warns about mixing interfaces, as on a host), with
//! the model's clock following wall-clock time.

use std::path::{Path, PathBuf};
use std::process::Command;

use rdt_sim::SimHandle;
use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};

use super::{Machine, PQOS};

/// Whether `pqos` on a mounted model counts IPC and misses with the model's PMU
/// (`.sim/pmu`): where this host's perf events cannot count (a VM, CI). On a host with a
/// PMU it counts with the host's, whose numbers the model does not drive.
pub fn model_pmu() -> bool {
    rdt_pqos::PerfPmu::open(&"0".parse().expect("CPU 0"), false).is_err()
}

/// A built-in model mounted in a temp dir; unmounted when dropped, even on a failed assert.
pub struct Mounted {
    mount: TestMount,
}

impl Mounted {
    /// Mounts a fresh platform of a built-in model.
    pub fn new(model: &str) -> Self {
        Self {
            mount: TestMount::builtin(model),
        }
    }

    /// The sysroot: `dev/cpu`, `sys/devices/system`, `sys/fs/resctrl`, `.sim`.
    pub fn root(&self) -> &Path {
        self.mount.root()
    }

    /// The model the mount serves, for looking behind pqos's back.
    pub fn platform(&self) -> &SimHandle {
        self.mount.platform()
    }
}

impl Machine for Mounted {
    /// `pqos --iface=msr --sysroot DIR ARGS...`.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(PQOS);
        cmd.arg("--iface=msr")
            .arg("--sysroot")
            .arg(self.root())
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RDT_IFACE")
            .env_remove("RDT_SYSROOT");
        cmd
    }

    fn monitor_args(&self) -> &'static [&'static str] {
        &[]
    }

    fn has_pmu(&self) -> bool {
        model_pmu()
    }
}

/// A built-in model mounted in a temp dir and reached through its resctrl:
/// `pqos --iface=os --sysroot DIR`. Unmounted when dropped.
pub struct MountedOs {
    mount: TestMount,
}

impl MountedOs {
    /// Mounts a fresh platform of a built-in model, resctrl mounted without options.
    pub fn new(model: &str) -> Self {
        Self::with_options(model, "")
    }

    /// Mounts a fresh platform with resctrl mounted with `options` (`cdp`, `mba_MBps`,
    /// comma-separated), as `mount -t resctrl -o OPTIONS` would.
    pub fn with_options(model: &str, options: &str) -> Self {
        let platform = rdt_sim::SimPlatform::builtin(model).expect("built-in model");
        let config = MountConfig {
            resctrl: Some(options.parse().expect("resctrl mount options")),
            clock: SimClock::WallClock,
        };
        Self {
            mount: TestMount::new(SimHandle::new(platform), config),
        }
    }

    /// The sysroot.
    pub fn root(&self) -> &Path {
        self.mount.root()
    }

    /// `rel` under the resctrl root (`COS1/schemata`; `""` for the root itself).
    pub fn resctrl(&self, rel: &str) -> PathBuf {
        self.mount.path("sys/fs/resctrl").join(rel)
    }

    /// The text of `rel` under the resctrl root, read behind pqos's back.
    pub fn read(&self, rel: &str) -> String {
        let p = self.resctrl(rel);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
    }

    /// Writes `text` to `rel` under the resctrl root, as another tool would.
    pub fn write(&self, rel: &str, text: &str) {
        let p = self.resctrl(rel);
        std::fs::write(&p, text)
            .unwrap_or_else(|e| panic!("writing {text:?} to {}: {e}", p.display()));
    }

    /// Creates the group `rel` under the resctrl root, as another tool would.
    pub fn mkdir(&self, rel: &str) {
        let p = self.resctrl(rel);
        std::fs::create_dir(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
    }

    /// Whether `rel` exists under the resctrl root.
    pub fn exists(&self, rel: &str) -> bool {
        self.resctrl(rel).exists()
    }

    /// The names in the resctrl directory `rel`, sorted.
    pub fn list(&self, rel: &str) -> Vec<String> {
        let p = self.resctrl(rel);
        let mut names: Vec<String> = std::fs::read_dir(&p)
            .unwrap_or_else(|e| panic!("listing {}: {e}", p.display()))
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Every monitor group under the root and under each control group
    /// (`mon_groups/x`, `COS1/mon_groups/y`), sorted.
    pub fn mon_groups(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .list("mon_groups")
            .into_iter()
            .map(|n| format!("mon_groups/{n}"))
            .collect();
        for g in self.list("") {
            if self.exists(&format!("{g}/mon_groups")) {
                out.extend(
                    self.list(&format!("{g}/mon_groups"))
                        .into_iter()
                        .map(|n| format!("{g}/mon_groups/{n}")),
                );
            }
        }
        out.sort();
        out
    }

    /// Arms a fault of the model (a line of the `.sim/fail` grammar).
    pub fn arm(&self, fault: &str) {
        std::fs::write(self.mount.path(".sim/fail"), format!("{fault}\n")).expect("arm a fault");
    }

    /// The resctrl mount options in force, as `.sim/resctrl_mount` gives them (`cdp`, or
    /// `""` for the defaults).
    pub fn mount_options(&self) -> String {
        std::fs::read_to_string(self.mount.path(".sim/resctrl_mount"))
            .expect(".sim/resctrl_mount")
            .trim_end()
            .to_owned()
    }

    /// The model the mount serves.
    pub fn platform(&self) -> &SimHandle {
        self.mount.platform()
    }
}

impl Machine for MountedOs {
    /// `pqos --iface=os --sysroot DIR ARGS...`.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(PQOS);
        cmd.arg("--iface=os")
            .arg("--sysroot")
            .arg(self.root())
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RDT_IFACE")
            .env_remove("RDT_SYSROOT");
        cmd
    }

    fn monitor_args(&self) -> &'static [&'static str] {
        &[]
    }

    fn has_pmu(&self) -> bool {
        model_pmu()
    }
}
