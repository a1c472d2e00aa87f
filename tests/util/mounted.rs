//! A built-in model FUSE-mounted in a temp dir, reached the production way:
//! `pqos --iface=msr --sysroot DIR`, so every register access is a positioned read or write of
//! `DIR/dev/cpu/N/msr` (`DevCpuMsr`), CPUID comes from `DIR/dev/cpu/0/cpuid` and the topology
//! from `DIR/sys/devices/system`.
//!
//! The mount is served in-process ([`rdt_sim::fs::testing::TestMount`]), resctrl mounted as
//! `rdt-sim mount` does by default (so pqos warns about mixing interfaces, as on a host), with
//! the model's clock following wall-clock time.

use std::path::Path;
use std::process::Command;

use rdt_sim::SimHandle;
use rdt_sim::fs::testing::TestMount;

use super::{Machine, pqos_bin};

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
        let mut cmd = Command::new(pqos_bin());
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
        false
    }
}
