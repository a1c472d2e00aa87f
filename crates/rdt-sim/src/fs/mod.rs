//! The FUSE face of the simulated platform: one model behind the files real hardware is
//! driven through, so that production code paths (positioned reads of `/dev/cpu/N/msr`,
//! sysfs parsing, resctrl file operations) run against it unchanged.
//!
//! [`Mount::new`] serves, under a directory `DIR`:
//!
//! | path | view | what it answers |
//! |---|---|---|
//! | `dev/cpu/N/{msr,cpuid}` | [`DevCpuTree`] | the `msr` and `cpuid` drivers: 8-byte registers at offset = MSR address, 16-byte CPUID answers at offset `leaf \| subleaf << 32` |
//! | `sys/devices/system/{cpu,node}` | [`SysfsTree`] | topology and cache files consistent with the model's [`crate::SimPlatform::topology`] |
//! | `sys/fs/resctrl` | [`crate::resctrl::Resctrl`] | the kernel's resctrl filesystem over the same registers (an empty directory, as on a host where resctrl is not mounted, with [`MountConfig::resctrl`] `None`) |
//! | `dev/mem` | [`DevMemTree`] | the RDT 1.3 MMIO registers and the IRDT links' tagging registers at their physical addresses (models with [`crate::mmio`]) |
//! | `sys/firmware/acpi/tables/{ERDT,MRRM,IRDT}` | static | the model's ACPI tables ([`crate::mmio`]; only the tables it has) |
//! | `sys/bus/cxl/devices/regionN/{resource,size,commit}` | static | the CXL regions the model's kernel maps (`xeon-rdt13`) |
//! | `.sim/` | [`ControlTree`] | `fail` (fault injection, grammar in [`control`]), `status`, `model`, `clock`, `stats` (request counts, [`stats`]), `resctrl_mount` (mount, unmount, remount resctrl, [`remount`]), `workloads` (per workload: application ops/s and ops, occupancy, memory traffic; per memory node: load; ground truth for evaluation, [`crate::metrics`]), `pmu/cpu<N>`, `pmu/task<TID>` (the model's PMU counters, [`control::PMU_FORMAT`]) |
//!
//! A schemata write changes what `dev/cpu/N/msr` reads at 0xC90+n, an MSR write through
//! `dev/cpu` is what an in-process [`SimHandle`] reads, and so on: every view locks the one
//! model. Resctrl's groups live only as long as the mount: unmounting resets every register
//! it controls, as the kernel's unmount does ([`crate::resctrl`]), so a model whose registers
//! must survive the mount (a saved state) is mounted without resctrl. The filesystem serves one request at a time, so do not hold [`SimHandle::lock`]
//! while doing file I/O on the mount from the same process.
//!
//! # Time
//! With [`SimClock::WallClock`] (the default) the model's clock follows real time: before
//! each request the filesystem advances the model by the wall-clock time elapsed since the
//! previous one ([`crate::SimPlatform::advance`]), so MBM counters and PMU counts grow at the
//! workload's rates while a tool sleeps between two samples, and occupancy follows
//! allocation changes at once. [`SimClock::Manual`] leaves the clock to the caller
//! ([`SimHandle::advance`]), for exact numbers in tests.
//!
//! # Mounting
//! As root the mount is made with `mount(2)` on `/dev/fuse` (module `fuse`); neither libfuse
//! nor `fusermount3` is needed. Dropping the [`Mount`] unmounts (lazily if the mount is still
//! busy). [`testing::TestMount`] mounts in a fresh temporary directory for a test and
//! always unmounts, also when the test panics.
//!
//! # References
//! Linux `Documentation/filesystems/fuse.rst`; msr(4), cpuid(4);
//! `Documentation/arch/x86/resctrl.rst`.

pub mod control;
mod devcpu;
mod devmem;
mod dispatch;
pub mod remount;
mod static_tree;
pub mod stats;
mod sysfs;
pub mod testing;

use std::io;
use std::path::{Path, PathBuf};

pub use control::{ControlTree, Fault, FaultOp, FaultTarget, Faults, ParseFaultError};
pub use devcpu::{DevCpuTree, instruction_answer};
pub use devmem::DevMemTree;
pub use stats::OpCounts;
pub use sysfs::SysfsTree;

use self::control::SharedFaults;
use self::dispatch::{SimFs, View};
use self::remount::{ResctrlSlot, ResctrlView};
use self::stats::SharedCounts;
use crate::SimHandle;
use crate::resctrl::MountOptions;

/// How the mounted model's clock moves (module docs, "Time").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SimClock {
    /// Advanced by the wall-clock time between requests.
    #[default]
    WallClock,
    /// Advanced only by the caller.
    Manual,
}

/// Options of a [`Mount`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MountConfig {
    /// Mount resctrl at `sys/fs/resctrl` with these options (`"cdp,mba_MBps".parse()`), or
    /// leave the directory empty (`None`). Default: mounted, no options.
    pub resctrl: Option<MountOptions>,
    /// How the model's clock moves.
    pub clock: SimClock,
}

impl Default for MountConfig {
    fn default() -> Self {
        Self {
            resctrl: Some(MountOptions::default()),
            clock: SimClock::default(),
        }
    }
}

/// Mounting the simulated platform failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot mount the simulated platform at {dir}: {hint}")]
struct MountFailed {
    dir: PathBuf,
    hint: &'static str,
    #[source]
    source: io::Error,
}

/// A mounted simulated platform. Dropping it unmounts.
///
/// # Examples
/// ```no_run
/// use std::path::Path;
/// use rdt_sim::fs::{Mount, MountConfig};
/// use rdt_sim::{SimHandle, SimPlatform};
///
/// let sim = SimHandle::new(SimPlatform::builtin("broadwell-ep")?);
/// let mount = Mount::new(sim, Path::new("/tmp/rdt"), MountConfig::default())?;
/// let online = std::fs::read_to_string("/tmp/rdt/sys/devices/system/cpu/online")?;
/// assert_eq!(online, "0-55\n");
/// mount.unmount()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Mount {
    session: Option<fuser::BackgroundSession>,
    dir: PathBuf,
    platform: SimHandle,
    faults: SharedFaults,
    resctrl: ResctrlSlot,
    counts: SharedCounts,
}

/// The views of the RDT 1.3 generation, on a model that has it: `dev/mem`, the ACPI tables
/// and the CXL regions (a model with an IRDT alone: the table and `dev/mem`).
fn mmio_views(platform: &SimHandle) -> Vec<View> {
    let p = platform.lock();
    let Some(m) = p.mmio() else {
        return Vec::new();
    };
    let mut acpi = static_tree::StaticTree::new();
    for (sig, bytes) in m.tables() {
        acpi.bin_file(&format!("tables/{sig}"), bytes.to_vec());
    }
    let mut views = vec![View {
        prefix: "sys/firmware/acpi",
        tree: Box::new(acpi),
        // sysfs bin attributes report the table's size; 0 (read to the end) serves as well
        file_size: 0,
        dynamic: false,
    }];
    // the IRDT's link registers (I/O RDT) are MMIO too: served with an IRDT alone
    views.push(View {
        prefix: "dev/mem",
        tree: Box::new(DevMemTree::new(platform.clone())),
        file_size: 0,
        dynamic: false,
    });
    if m.erdt().is_some() {
        let mut cxl = static_tree::StaticTree::new();
        for (n, (base, size)) in m.cxl_windows().iter().enumerate() {
            cxl.file(
                &format!("devices/region{n}/resource"),
                format!("{base:#x}\n"),
            );
            cxl.file(&format!("devices/region{n}/size"), format!("{size:#x}\n"));
            cxl.file(&format!("devices/region{n}/commit"), "1\n");
        }
        views.push(View {
            prefix: "sys/bus/cxl",
            tree: Box::new(cxl),
            file_size: 4096,
            dynamic: false,
        });
    }
    views
}

impl Mount {
    /// Mounts `platform` at `dir`, an existing directory, and serves it from a background
    /// thread until the returned value is dropped or [`Mount::unmount`]ed.
    ///
    /// # Errors
    /// resctrl cannot be mounted with the options on this model (`InvalidInput`, naming the
    /// option; `EBUSY` when resctrl is already mounted on this platform); `/dev/fuse` is missing (the `fuse`
    /// module is not loaded) or `dir` does not exist (`NotFound`); the caller may not mount
    /// (not root, and no `fusermount3`); the kernel refuses the mount. The message names the
    /// directory and the likely cause.
    pub fn new(platform: SimHandle, dir: &Path, config: MountConfig) -> io::Result<Self> {
        let fail = |hint: &'static str, source: io::Error| {
            io::Error::new(
                source.kind(),
                MountFailed {
                    dir: dir.to_owned(),
                    hint,
                    source,
                },
            )
        };
        if !Path::new("/dev/fuse").exists() {
            return Err(fail(
                "/dev/fuse does not exist: load the fuse module (`modprobe fuse`)",
                io::Error::from(io::ErrorKind::NotFound),
            ));
        }
        let dir = dir
            .canonicalize()
            .map_err(|e| fail("the mount point does not exist", e))?;
        let MountConfig { resctrl, clock } = config;
        let faults = SharedFaults::default();
        let slot = ResctrlSlot::new(platform.clone(), resctrl.as_ref())
            .map_err(|e| fail("resctrl cannot be mounted with these options", e))?;
        let counts = SharedCounts::default();
        let sysfs = SysfsTree::new(&platform.lock());
        let mut views = vec![
            View {
                prefix: "dev/cpu",
                tree: Box::new(DevCpuTree::new(platform.clone())),
                file_size: 0,
                dynamic: false,
            },
            View {
                prefix: "sys/devices/system",
                tree: Box::new(sysfs),
                file_size: 4096,
                dynamic: false,
            },
            View {
                prefix: "sys/fs/resctrl",
                tree: Box::new(ResctrlView(slot.clone())),
                // kernfs files of resctrl report size 0 (sysfs attributes 4096).
                file_size: 0,
                dynamic: true,
            },
            View {
                prefix: ".sim",
                tree: Box::new(ControlTree::new(
                    platform.clone(),
                    faults.clone(),
                    slot.clone(),
                    counts.clone(),
                )),
                file_size: 4096,
                dynamic: true,
            },
        ];
        views.extend(mmio_views(&platform));
        let clock = (clock == SimClock::WallClock).then(|| platform.clone());
        let fs = SimFs::new(views, faults.clone(), clock, counts.clone());
        let mut options = fuser::Config::default();
        options.mount_options = vec![
            fuser::MountOption::FSName("rdt-sim".into()),
            fuser::MountOption::Subtype("rdt-sim".into()),
        ];
        options.n_threads = Some(1);
        let session = fuser::spawn_mount(fs, &dir, &options)
            .map_err(|e| fail("the kernel refused the FUSE mount (are you root?)", e))?;
        Ok(Self {
            session: Some(session),
            dir,
            platform,
            faults,
            resctrl: slot,
            counts,
        })
    }

    /// The mount point (canonical).
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The model served.
    #[must_use]
    pub fn platform(&self) -> &SimHandle {
        &self.platform
    }

    /// Arms `fault` as a line written to `.sim/fail` would.
    pub fn arm(&self, fault: Fault) {
        self.faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .arm(fault);
    }

    /// The requests served so far, by kind, outside `.sim/` ([`stats`]).
    #[must_use]
    pub fn op_counts(&self) -> OpCounts {
        self.counts.snapshot()
    }

    /// Zeroes the request counts.
    pub fn reset_op_counts(&self) {
        self.counts.reset();
    }

    /// The options resctrl is mounted with at `sys/fs/resctrl`, `None` when unmounted.
    #[must_use]
    pub fn resctrl_options(&self) -> Option<MountOptions> {
        self.resctrl.options()
    }

    /// Remounts resctrl with `options`, as a line `remount OPTS` written to
    /// `.sim/resctrl_mount` does ([`remount`]).
    ///
    /// # Errors
    /// `InvalidInput` when the platform cannot honour an option (the mount is unchanged
    /// then); the model refused a register write.
    pub fn remount_resctrl(&self, options: &MountOptions) -> io::Result<()> {
        self.resctrl.remount(*options)
    }

    /// Whether the filesystem is still served (false once someone ran `umount DIR`).
    #[must_use]
    pub fn is_served(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| !s.guard.is_finished())
    }

    /// Unmounts and waits for the serving thread.
    ///
    /// # Errors
    /// The unmount failed (the mount is busy: then it is detached lazily and goes away when
    /// the last open file is closed), or the serving thread ended with an error.
    pub fn unmount(mut self) -> io::Result<()> {
        self.unmount_now()
    }

    fn unmount_now(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        session.umount_and_join().inspect_err(|_| {
            // Busy: detach it so that it disappears once the last open file is closed.
            let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
        })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = self.unmount_now() {
            eprintln!("rdt-sim: unmounting {}: {e}", self.dir.display());
        }
    }
}
