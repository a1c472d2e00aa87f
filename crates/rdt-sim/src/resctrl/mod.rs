//! A kernel-faithful resctrl filesystem over the simulated platform: [`Resctrl`] is the
//! `/sys/fs/resctrl` the Linux kernel would show on the model, as a [`Tree`] the FUSE layer
//! serves (and tests drive in-process).
//!
//! It keeps resctrl's object model (resources, schemas, control and monitor domains, CLOSIDs,
//! the RMID free list and limbo, CTRL_MON and MON groups, tasks, per-CPU defaults, the one
//! global `last_cmd_status`) and drives the one shared [`SimPlatform`] through its MSR write
//! path ([`rdt_msr::MsrIo`]), so every view agrees: a `schemata` write programs
//! IA32_L3_QOS_MASK_n (0xC90 + n) of the group's CLOSID in the named domains, a CPU moved by
//! `cpus` gets its group's CLOSID and RMID in IA32_PQR_ASSOC, `mount -o cdp` sets
//! IA32_L3_QOS_CFG bit 0 in every L3 domain, and `mon_data` reads IA32_QM_CTR through
//! IA32_QM_EVTSEL on a CPU of the domain.
//!
//! # Kernel version
//! The behaviour is Linux v6.17's (`fs/resctrl/`), as `../shared/spec/resctrl.md` describes
//! it: values in `schemata` are not padded (≥ 6.15), `sparse_masks` exists (≥ 6.7), a write
//! to `tasks` takes a comma-separated list (≥ 6.3), MON groups can be renamed (≥ 6.8), and
//! there are no 7.1 "`<file>: Invalid input`" messages. The files of 6.18 (ABMC:
//! `mbm_assign_mode`, counter assignment) and 6.19 (`io_alloc`) exist when the platform runs
//! that release ([`KernelVersion`], [`SimPlatform::set_kernel`], default 6.19) and, except
//! `mbm_assign_mode`, has the feature (`resctrl/abmc.rs`: BMEC, ABMC, io_alloc on AMD).
//! `last_cmd_status` is cleared at the start of every group-file write (after the trailing-newline check of `schemata`, `mode` and `mba_MBps_event`, which
//! fail silently), by `mkdir` and `rename`, not by reads, `rmdir` or writes to `info/` files.
//!
//! # What is simplified
//! - **Tasks.** The model has no scheduler: ids written to `tasks` are simulated tasks
//!   ([`Resctrl::add_sim_task`]), which do not change the counters (the workload model runs
//!   per CPU; `cpus` does), or host threads that exist (`/proc/<id>`), which do (below). A group's
//!   `tasks` lists the ids placed in it in ascending order; the root also lists every host
//!   thread no write has moved (`/proc/*/task/*`), as the kernel walks every thread. Writing
//!   `0` moves the writing thread ([`Tree::write_by`]: the FUSE request's thread, or the
//!   in-process caller's); a plain [`Tree::write`] does not say who writes, and `0` then fails
//!   with `ESRCH` ("No task 0"). There is no permission check.
//! - **Host tasks.** A host thread written to a `tasks` file is followed from then on: its
//!   real CPU time (`utime + stime` of `/proc/<tid>/task/<tid>/stat`), sampled at most every
//!   [`HOST_SAMPLE_PERIOD`] of the platform's clock, is charged to the group it is in, with
//!   the workload model's host-task formulas ([`crate::model`], "Host tasks": occupancy
//!   `u × min(8 MiB, its class's ways)` for a CPU share `u`, 2 GiB of L3 accesses per
//!   CPU-second of which the misses go to memory, IPC from the miss fraction). So `pqos -p`
//!   of a busy process shows occupancy, memory bandwidth, IPC and misses (its PMU counts:
//!   [`SimPlatform::task_pmu_counts`]); an idle one shows about nothing. A thread is charged
//!   to one L3 domain (`tid mod domains`). Host tasks do not take capacity from the CPUs'
//!   workloads. The platform's clock must follow real time (the default; with a virtual
//!   clock that jumps, host tasks look idle).
//! - **Pseudo-locking** is not offered: `pseudo-locksetup` fails with "Pseudo-locking not
//!   supported" (after the kernel's default-group and CDP checks).
//! - **Workers** run on the platform's virtual clock ([`SimPlatform::advance`]), checked at the
//!   start of every read, write, mkdir, rmdir and rename (and by [`Resctrl::tick`]): the RMID
//!   limbo check once at least 1 s after the last one, and, with `mba_MBps`, the 1 s MBM
//!   sampler and software controller (one step per check).
//! - **MBM counts** are the kernel's 64-bit running byte counts: the hardware counter is read
//!   through IA32_QM_CTR and extended past its `2^width` wrap with the kernel's
//!   `mbm_overflow_count`, plus the whole wraps its 1 s overflow worker would have seen
//!   between two reads (taken from the hardware's unwrapped count). On `broadwell-ep` and
//!   `skylake-sp` the counts of RMIDs above the erratum threshold are multiplied by the
//!   kernel's correction factor (`get_corrected_mbm_count`), undoing the modelled erratum
//!   of the hardware counter ([`crate::SimPlatform`]'s register table).
//! - The RMID free list is rebuilt at every mount (the kernel builds it once per boot).
//! - SNC (`sapphire-rapids-snc2`): monitor sub-domains per NUMA node
//!   (`mon_L3_XX/mon_sub_L3_YY`, the `mon_L3_XX` files summing them), `num_rmids` divided by
//!   the nodes per L3, node `k` counting RMID `r` as `r + k × num_rmids`. The occupancy
//!   scale is not divided (the model counts in the CPUID upscaling factor), and
//!   `RMID_SNC_CONFIG` (0xCA0) is not modelled.
//! - Mounting does not reprogram the registers (the kernel did that at boot); it assumes they
//!   hold resctrl's defaults, which they do on a fresh platform and after an unmount.
//!
//! # References
//! - Linux `Documentation/filesystems/resctrl.rst`, `fs/resctrl/{rdtgroup,ctrlmondata,monitor}.c`,
//!   `arch/x86/kernel/cpu/resctrl/`.
//! - `../shared/spec/resctrl.md` (behaviour contract, with the transcripts in `transcripts`,
//!   feature `transcripts`).
//! - Intel SDM Vol. 3B, ch. 18 "Intel Resource Director Technology"; AMD pub. 56375.

// p = platform, g = group, s = schema, d/di = domain, e = event, as in the kernel's code.
#![allow(clippy::many_single_char_names)]

mod abmc;
mod ctrl;
mod groups;
mod host;
mod hw;
mod kstr;
mod mon;
mod options;
mod saved;
#[cfg(any(test, feature = "transcripts"))]
pub mod transcripts;

#[cfg(test)]
mod abmc_tests;
#[cfg(test)]
mod snc_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rdt_core::{CpuSet, LogicalCpu};
use rdt_msr::regs::{IA32_L2_QOS_CFG, IA32_L3_QOS_CFG, IA32_PQR_ASSOC};
use rdt_msr::{MsrAddr, MsrIo};

use crate::vfs::{NodeKind, Tree, err};
use crate::{SimHandle, SimPlatform};

pub use crate::kernel::{KernelVersion, UnknownKernel};
pub use host::HOST_SAMPLE_PERIOD;
use hw::{Event, Hw, Res};
use mon::{ArchMbm, FsMbm};
pub use options::{MountError, MountOptions};
pub use saved::ResctrlState;

/// Linux errno values resctrl returns, beyond [`crate::vfs::errno`].
pub mod errno {
    pub use crate::vfs::errno::*;
    /// Argument list too long: a write longer than a page.
    pub const E2BIG: i32 = 7;
    /// No such device (mkdir under `info/`).
    pub const ENODEV: i32 = 19;
    /// Numerical result out of range (a CPU list past the last CPU).
    pub const ERANGE: i32 = 34;
    /// File name too long.
    pub const ENAMETOOLONG: i32 = 36;
    /// Value too large (a CPU mask wider than the machine).
    pub const EOVERFLOW: i32 = 75;
}

use errno::{E2BIG, EACCES, EBUSY, EINVAL, EIO, EISDIR, ENOENT, ENOTDIR};

/// `PAGE_SIZE`: resctrl files take one write of at most this many bytes (`atomic_write_len`).
const MAX_WRITE: usize = 4096;
/// The size of the `last_cmd_status` buffer (`seq_buf` of 512 bytes).
const LAST_CMD_STATUS_SIZE: usize = 512;
/// `MBA_MAX_MBPS`: the default `mba_MBps` target (U32_MAX).
const MBA_MAX_MBPS: u32 = u32::MAX;
/// `CQM_LIMBOCHECK_INTERVAL` and `MBM_OVERFLOW_INTERVAL`.
const WORKER_PERIOD: Duration = Duration::from_secs(1);

/// Platforms with resctrl mounted, by the address of their [`SimPlatform`] (stable while a
/// [`Resctrl`] holds the handle): a second mount is `EBUSY`.
static MOUNTED: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

fn platform_key(p: &SimPlatform) -> usize {
    std::ptr::from_ref(p).addr()
}

/// CDP type of a schema (`enum resctrl_conf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Conf {
    None,
    Code,
    Data,
}

impl Conf {
    const fn peer(self) -> Self {
        match self {
            Self::None => Self::None,
            Self::Code => Self::Data,
            Self::Data => Self::Code,
        }
    }
}

/// `resctrl_get_config_index`: where a CLOSID's value of a CDP type lives in hardware.
const fn cfg_index(closid: u32, conf: Conf) -> u32 {
    match conf {
        Conf::None => closid,
        Conf::Code => closid * 2 + 1,
        Conf::Data => closid * 2,
    }
}

/// A schema: one line of `schemata` (`struct resctrl_schema`).
#[derive(Clone, Debug)]
struct Schema {
    name: String,
    res: Res,
    conf: Conf,
    num_closid: u32,
}

/// Group id: index into [`Resctrl::groups`]; the root is 0.
type Gid = usize;
const ROOT: Gid = 0;

/// A group's allocation mode (`enum rdtgrp_mode`; the pseudo-lock modes are not offered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Shareable,
    Exclusive,
}

impl Mode {
    const fn name(self) -> &'static str {
        match self {
            Self::Shareable => "shareable",
            Self::Exclusive => "exclusive",
        }
    }
}

#[derive(Clone, Debug)]
enum GroupKind {
    /// CTRL_MON (and the root): its MON children, newest first (`crdtgrp_list`).
    Ctrl { children: Vec<Gid> },
    /// MON: its CTRL_MON parent.
    Mon { parent: Gid },
}

/// A resource group (`struct rdtgroup`).
#[derive(Clone, Debug)]
struct Group {
    name: String,
    kind: GroupKind,
    closid: u32,
    rmid: u32,
    cpus: CpuSet,
    mode: Mode,
    /// `mba_MBps_event` (CTRL_MON groups, with `mba_MBps`).
    mba_event: Event,
}

/// A task's resctrl ids (`task_struct` closid/rmid).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct TaskIds {
    closid: u32,
    rmid: u32,
}

/// A file of a group directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupFile {
    Tasks,
    Cpus,
    CpusList,
    Schemata,
    Mode,
    Size,
    MbaMbpsEvent,
    CtrlHwId,
    MonHwId,
    /// ABMC (6.18+): [`abmc`].
    MbmL3Assignments,
}

impl GroupFile {
    const fn name(self) -> &'static str {
        match self {
            Self::Tasks => "tasks",
            Self::Cpus => "cpus",
            Self::CpusList => "cpus_list",
            Self::Schemata => "schemata",
            Self::Mode => "mode",
            Self::Size => "size",
            Self::MbaMbpsEvent => "mba_MBps_event",
            Self::CtrlHwId => "ctrl_hw_id",
            Self::MonHwId => "mon_hw_id",
            Self::MbmL3Assignments => "mbm_L3_assignments",
        }
    }

    const fn mode(self) -> u16 {
        match self {
            Self::Size | Self::CtrlHwId | Self::MonHwId => 0o444,
            _ => 0o644,
        }
    }
}

/// An `info/` resource directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InfoDir {
    /// `info/<schema>` (index into [`Resctrl::schemas`]).
    Schema(usize),
    /// `info/L3_MON`.
    L3Mon,
    /// `info/L3_MON/event_configs` (ABMC).
    EventConfigs,
    /// `info/L3_MON/event_configs/<event>` (ABMC).
    EventConfig(Event),
}

/// A file of an `info/` resource directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InfoFile {
    NumClosids,
    BitUsage,
    CbmMask,
    MinCbmBits,
    ShareableBits,
    SparseMasks,
    BandwidthGran,
    DelayLinear,
    MinBandwidth,
    ThreadThrottleMode,
    MaxThresholdOccupancy,
    MonFeatures,
    NumRmids,
    // AMD extensions ([`abmc`]).
    MbmTotalConfig,
    MbmLocalConfig,
    MbmAssignMode,
    NumMbmCntrs,
    AvailableMbmCntrs,
    MbmAssignOnMkdir,
    EventFilter,
    IoAlloc,
    IoAllocCbm,
}

impl InfoFile {
    const fn name(self) -> &'static str {
        match self {
            Self::NumClosids => "num_closids",
            Self::BitUsage => "bit_usage",
            Self::CbmMask => "cbm_mask",
            Self::MinCbmBits => "min_cbm_bits",
            Self::ShareableBits => "shareable_bits",
            Self::SparseMasks => "sparse_masks",
            Self::BandwidthGran => "bandwidth_gran",
            Self::DelayLinear => "delay_linear",
            Self::MinBandwidth => "min_bandwidth",
            Self::ThreadThrottleMode => "thread_throttle_mode",
            Self::MaxThresholdOccupancy => "max_threshold_occupancy",
            Self::MonFeatures => "mon_features",
            Self::NumRmids => "num_rmids",
            Self::MbmTotalConfig => "mbm_total_bytes_config",
            Self::MbmLocalConfig => "mbm_local_bytes_config",
            Self::MbmAssignMode => "mbm_assign_mode",
            Self::NumMbmCntrs => "num_mbm_cntrs",
            Self::AvailableMbmCntrs => "available_mbm_cntrs",
            Self::MbmAssignOnMkdir => "mbm_assign_on_mkdir",
            Self::EventFilter => "event_filter",
            Self::IoAlloc => "io_alloc",
            Self::IoAllocCbm => "io_alloc_cbm",
        }
    }

    const fn mode(self) -> u16 {
        match self {
            Self::MaxThresholdOccupancy
            | Self::MbmTotalConfig
            | Self::MbmLocalConfig
            | Self::MbmAssignMode
            | Self::MbmAssignOnMkdir
            | Self::EventFilter
            | Self::IoAlloc
            | Self::IoAllocCbm => 0o644,
            _ => 0o444,
        }
    }
}

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    GroupDir(Gid),
    GroupFile(Gid, GroupFile),
    /// `mon_groups/` of a CTRL_MON group (or the root).
    MonGroups(Gid),
    MonData(Gid),
    /// `mon_data/mon_L3_XX` (index into the L3 domains).
    MonDomain(Gid, usize),
    MonFile(Gid, usize, Event),
    /// `mon_data/mon_L3_XX/mon_sub_L3_YY` (SNC): L3 domain index, node index in it.
    MonSub(Gid, usize, u32),
    MonSubFile(Gid, usize, u32, Event),
    Info,
    LastCmdStatus,
    InfoRes(InfoDir),
    InfoFile(InfoDir, InfoFile),
}

impl Node {
    const fn is_dir(self) -> bool {
        matches!(
            self,
            Self::GroupDir(_)
                | Self::MonGroups(_)
                | Self::MonData(_)
                | Self::MonDomain(..)
                | Self::MonSub(..)
                | Self::Info
                | Self::InfoRes(_)
        )
    }

    /// Permission bits of a file node.
    const fn file_mode(self) -> u16 {
        match self {
            Self::GroupFile(_, f) => f.mode(),
            Self::InfoFile(_, f) => f.mode(),
            _ => 0o444,
        }
    }

    /// The group whose kernfs node this is (`kernfs_to_rdtgroup`); `None` under `info/`.
    const fn group(self) -> Option<Gid> {
        match self {
            Self::GroupDir(g)
            | Self::GroupFile(g, _)
            | Self::MonGroups(g)
            | Self::MonData(g)
            | Self::MonDomain(g, _)
            | Self::MonFile(g, ..)
            | Self::MonSub(g, ..)
            | Self::MonSubFile(g, ..) => Some(g),
            _ => None,
        }
    }
}

/// resctrl mounted on a simulated platform: the kernel's `/sys/fs/resctrl` as a [`Tree`].
///
/// Built by [`Resctrl::mount`]; [`Resctrl::unmount`] (or dropping it) puts the platform back
/// as the kernel's unmount does. Every operation is atomic with respect to the others (the
/// kernel's `rdtgroup_mutex`): the platform is locked for its duration.
///
/// # Examples
/// ```
/// use rdt_sim::resctrl::{MountOptions, Resctrl};
/// use rdt_sim::vfs::Tree;
/// use rdt_sim::{SimHandle, SimPlatform};
///
/// let sim = SimHandle::new(SimPlatform::builtin("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal").unwrap());
/// let mut fs = Resctrl::mount(sim.clone(), &MountOptions::default()).unwrap();
/// fs.mkdir("p0").unwrap();
/// fs.write("p0/schemata", 0, b"L3:0=3\n").unwrap();
/// let text = fs.read("p0/schemata", 0, 4096).unwrap();
/// assert_eq!(text, b"    MB:0=100;1=100\n    L3:0=3;1=7ff\n");
/// assert_eq!(fs.write("p0/schemata", 0, b"L3:0=5\n").unwrap_err().raw_os_error(), Some(22));
/// let status = fs.read("info/last_cmd_status", 0, 4096).unwrap();
/// assert_eq!(status, b"The mask 5 has non-consecutive 1-bits\n");
/// fs.unmount().unwrap();
/// ```
#[derive(Debug)]
pub struct Resctrl {
    platform: SimHandle,
    opts: MountOptions,
    hw: Hw,
    /// In `resctrl_schema_all` order: SMBA, MB, L2DATA, L2CODE (or L2), L3DATA, L3CODE (or L3).
    schemas: Vec<Schema>,
    /// `max_name_width` of `schemata` and `size` lines.
    name_width: usize,
    /// `closids_supported()`: the smallest `num_closid` of any schema.
    closids_supported: u32,
    /// Allocated CLOSIDs (`closid_free_map` inverted).
    closid_used: Vec<bool>,
    /// `ctrl_val` per resource, per domain (index into [`Hw::domains`]), per hardware index.
    /// MB/SMBA hold the resctrl value (percent or AMD units), not the register's.
    ctrl_val: BTreeMap<Res, Vec<Vec<u64>>>,
    /// `mbps_val` per MB domain per CLOSID (`mba_MBps`).
    mbps_val: Vec<Vec<u32>>,
    /// The groups, by [`Gid`]; `None` once removed.
    groups: Vec<Option<Group>>,
    /// The CTRL_MON groups by name.
    ctrl_names: BTreeMap<String, Gid>,
    /// Ids of every task resctrl knows: simulated ones and host threads ever moved.
    tasks: BTreeMap<u32, TaskIds>,
    sim_tasks: BTreeSet<u32>,
    /// RMID free list, least recently freed first.
    rmid_free: VecDeque<u32>,
    /// RMIDs in limbo and the L3 domains (indices) where they are still dirty.
    limbo: BTreeMap<u32, BTreeSet<usize>>,
    /// When the limbo worker runs next (virtual time).
    limbo_due: Option<Duration>,
    /// `resctrl_rmid_realloc_threshold`, bytes.
    threshold: u32,
    /// Per (L3 domain index, RMID, event): the arch's counter state.
    arch_mbm: BTreeMap<(usize, u32, Event), ArchMbm>,
    /// Per (L3 domain index, RMID, event): the filesystem's bandwidth state (`mba_MBps`).
    fs_mbm: BTreeMap<(usize, u32, Event), FsMbm>,
    /// Virtual time of the last MBM sampler run.
    mbm_last: Duration,
    /// `last_cmd_status`.
    last_cmd: Vec<u8>,
    /// The thread writing now, when known ([`Tree::write_by`]): the kernel's `current`.
    writer: Option<u32>,
    /// Host tasks followed ([`host`]): their CPU time at the last sample.
    host: BTreeMap<u32, host::HostSample>,
    /// When the host tasks were last sampled (platform time).
    host_sampled: Duration,
    /// The threads of each followed host process (by its id) when it was last looked at:
    /// one not among them is new ([`host`], new threads).
    host_threads: BTreeMap<u32, BTreeSet<u32>>,
    /// Where host tasks are read (`/proc`).
    proc: rdt_host::proc::ProcFs,
    /// BMEC, ABMC and io_alloc ([`abmc`]).
    amd: abmc::AmdState,
    /// Still mounted (teardown not yet done).
    mounted: bool,
    key: usize,
}

fn eio(_: rdt_msr::MsrError) -> io::Error {
    err(EIO)
}

/// WRMSR through the model, which checks the value as silicon would (EIO on #GP).
fn wrmsr(p: &mut SimPlatform, cpu: LogicalCpu, addr: MsrAddr, v: u64) -> io::Result<()> {
    MsrIo::write(p, cpu, addr, v).map_err(eio)
}

/// RDMSR through the model.
fn rdmsr(p: &mut SimPlatform, cpu: LogicalCpu, addr: MsrAddr) -> io::Result<u64> {
    MsrIo::read(p, cpu, addr).map_err(eio)
}

/// CPUs of `a` not in `b`.
fn minus(a: &CpuSet, b: &CpuSet) -> CpuSet {
    a.iter().filter(|c| !b.contains(*c)).collect()
}

/// CPUs in both.
fn and(a: &CpuSet, b: &CpuSet) -> CpuSet {
    a.iter().filter(|c| b.contains(*c)).collect()
}

impl Resctrl {
    /// Mounts resctrl on `platform` with `opts`, as `mount -t resctrl -o OPTS resctrl DIR`.
    ///
    /// Like the kernel's mount, it starts from resctrl's own state after boot or the last
    /// unmount (every control value at its default, all CPUs and tasks in the root group, the
    /// root's MBM counts at 0) and writes only IA32_L3_QOS_CFG / IA32_L2_QOS_CFG bit 0, in every
    /// domain, when `cdp` / `cdpl2` enable CDP. A fresh platform's registers hold exactly those
    /// defaults; if an MSR-level tool changed them before, resctrl does not know, as on real
    /// hardware (the files show resctrl's values, the registers keep the tool's until resctrl
    /// writes them).
    ///
    /// # Errors
    /// `EBUSY` when resctrl is already mounted on this platform; `EINVAL` when `cdp`/`cdpl2`
    /// name a cache without CDP, or `mba_MBps` lacks MBM or linear MBA
    /// ([`MountOptions::check`] says which); `EIO` if the model refuses a register write.
    pub fn mount(platform: SimHandle, opts: &MountOptions) -> io::Result<Self> {
        let handle = platform.clone();
        let mut guard = handle.lock();
        let p: &mut SimPlatform = &mut guard;
        let key = platform_key(p);
        {
            let mut mounted = MOUNTED.lock().unwrap_or_else(PoisonError::into_inner);
            if mounted.contains(&key) {
                return Err(MountError::Busy.into());
            }
            opts.check(p.capabilities(), p.snc_nodes() > 1)
                .map_err(MountError::from)?;
            mounted.insert(key);
        }
        let hw = Hw::probe(p);
        let mut fs = Self::new(platform, *opts, hw, key);
        fs.amd = abmc::AmdState::new(p, fs.hw.l3_domains.len());
        fs.mbm_last = p.now();
        if let Err(e) = fs.setup(p) {
            fs.mounted = false;
            MOUNTED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            return Err(e);
        }
        Ok(fs)
    }

    fn new(platform: SimHandle, opts: MountOptions, hw: Hw, key: usize) -> Self {
        let (schemas, name_width) = build_schemas(&hw, opts);
        let closids_supported = schemas.iter().map(|s| s.num_closid).min().unwrap_or(1);
        let mut closid_used = vec![false; closids_supported.max(1) as usize];
        closid_used[0] = true;
        let ctrl_val = Res::ALL
            .iter()
            .filter(|r| hw.has(**r))
            .map(|&r| {
                let doms = hw.domains(r).len();
                let row = vec![hw.default_ctrl(r); hw.num_closid(r) as usize];
                (r, vec![row; doms])
            })
            .collect();
        let mbps_val = vec![
            vec![MBA_MAX_MBPS; hw.mb.as_ref().map_or(0, |b| b.num_closid) as usize];
            hw.l3_domains.len()
        ];
        let (rmid_free, threshold) = hw.mon.as_ref().map_or((VecDeque::new(), 0), |m| {
            // The default threshold: the L3 size shared by all RMIDs, rounded down to the
            // occupancy scale (resctrl_arch_round_mon_val).
            let t = u64::from(m.realloc_limit) / u64::from(m.num_rmids.max(1));
            let t = t / m.scale.max(1) * m.scale.max(1);
            (
                (1..m.num_rmids).collect(),
                u32::try_from(t).unwrap_or(u32::MAX),
            )
        });
        let default_event = default_mba_event(&hw);
        let root = Group {
            name: String::new(),
            kind: GroupKind::Ctrl {
                children: Vec::new(),
            },
            closid: 0,
            rmid: 0,
            cpus: hw.online.clone(),
            mode: Mode::Shareable,
            mba_event: default_event,
        };
        Self {
            platform,
            opts,
            hw,
            schemas,
            name_width,
            closids_supported,
            closid_used,
            ctrl_val,
            mbps_val,
            groups: vec![Some(root)],
            ctrl_names: BTreeMap::new(),
            tasks: BTreeMap::new(),
            sim_tasks: BTreeSet::new(),
            rmid_free,
            limbo: BTreeMap::new(),
            limbo_due: None,
            threshold,
            arch_mbm: BTreeMap::new(),
            fs_mbm: BTreeMap::new(),
            mbm_last: Duration::ZERO,
            last_cmd: Vec::new(),
            writer: None,
            host: BTreeMap::new(),
            host_sampled: Duration::ZERO,
            host_threads: BTreeMap::new(),
            proc: rdt_host::proc::ProcFs::host(),
            amd: abmc::AmdState::empty(),
            mounted: true,
            key,
        }
    }

    /// What the kernel's mount does to the registers (see [`Resctrl::mount`]).
    fn setup(&mut self, p: &mut SimPlatform) -> io::Result<()> {
        self.set_cdp(p, true)?;
        self.reset_mon_counters(p, ROOT)?;
        self.amd_mount(p)
    }

    /// Writes IA32_L3_QOS_CFG / IA32_L2_QOS_CFG bit 0 to `on` in every domain of each cache
    /// whose CDP this mount enables (`set_cache_qos_cfg`).
    fn set_cdp(&self, p: &mut SimPlatform, on: bool) -> io::Result<()> {
        for (r, addr) in [(Res::L3, IA32_L3_QOS_CFG), (Res::L2, IA32_L2_QOS_CFG)] {
            if self.cdp_enabled(r) {
                for d in self.hw.domains(r) {
                    wrmsr(p, d.cpu, addr, u64::from(on))?; // bit 0: CDP enable
                }
            }
        }
        Ok(())
    }

    /// `resctrl_arch_reset_all_ctrls` for every resource: every hardware index of every
    /// domain at the default, in `ctrl_val` and in the registers.
    fn reset_all_ctrls(&mut self, p: &mut SimPlatform) -> io::Result<()> {
        for r in Res::ALL {
            if !self.hw.has(r) {
                continue;
            }
            let def = self.hw.default_ctrl(r);
            for (di, d) in self.hw.domains(r).iter().enumerate() {
                for idx in 0..self.hw.num_closid(r) {
                    self.ctrl_val.get_mut(&r).expect("resource present")[di][idx as usize] = def;
                    let (addr, v) = self.hw.ctrl_msr(r, idx, def);
                    wrmsr(p, d.cpu, addr, v)?;
                }
            }
        }
        for row in &mut self.mbps_val {
            row.fill(MBA_MAX_MBPS);
        }
        Ok(())
    }

    /// Unmounts: every group removed, every task and CPU back in the root (IA32_PQR_ASSOC 0),
    /// CDP off, every control register at its default, `mba_MBps` off
    /// (`resctrl_fs_teardown`, `resctrl_arch_reset_all_ctrls`, `rdt_disable_ctx`).
    ///
    /// # Errors
    /// `EIO` if the model refuses one of the register writes (the others are still made).
    pub fn unmount(mut self) -> io::Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> io::Result<()> {
        if !self.mounted {
            return Ok(());
        }
        self.mounted = false;
        let handle = self.platform.clone();
        let mut guard = handle.lock();
        let p: &mut SimPlatform = &mut guard;
        let mut first_err = None;
        let mut note = |r: io::Result<()>| {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        };
        note(self.set_cdp(p, false));
        note(self.reset_all_ctrls(p));
        note(self.amd_unmount(p));
        // rmdir_all_sub: every CPU to the root; IA32_PQR_ASSOC is written where the kernel's
        // last write left other ids.
        for (cpu, ids) in self.cpu_defaults() {
            if ids != (0, 0) {
                note(wrmsr(p, cpu, IA32_PQR_ASSOC, 0));
            }
        }
        for t in self.tasks.values_mut() {
            *t = TaskIds::default();
        }
        MOUNTED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
        first_err.map_or(Ok(()), Err)
    }

    /// The mount options in effect.
    #[must_use]
    pub const fn options(&self) -> &MountOptions {
        &self.opts
    }

    /// Registers a simulated task (thread) id: writes of `id` to `tasks` find it, and it
    /// starts in the root group, as a new thread of a root task would. A simulated id shadows
    /// a host thread of the same number. Registering it again changes nothing.
    pub fn add_sim_task(&mut self, id: u32) {
        self.sim_tasks.insert(id);
        self.tasks.entry(id).or_default();
    }

    /// Forgets a simulated task, as if it exited: it leaves every `tasks` file.
    pub fn remove_sim_task(&mut self, id: u32) {
        if self.sim_tasks.remove(&id) {
            self.tasks.remove(&id);
        }
    }

    /// The CLOSID and RMID a task carries (0/0 in the root), or `None` for an id resctrl
    /// has not seen (a host thread never moved counts as the root's: 0/0 too).
    #[must_use]
    pub fn task_ids(&self, id: u32) -> Option<(u32, u32)> {
        self.tasks.get(&id).map(|t| (t.closid, t.rmid))
    }

    /// Runs the workers that are due on the platform's virtual clock (the RMID limbo check,
    /// and with `mba_MBps` the MBM sampler and software controller). Every file operation does
    /// this first; call it after [`SimPlatform::advance`] to apply their effects without one.
    ///
    /// # Errors
    /// `EIO` if the model refuses a register access.
    pub fn tick(&mut self) -> io::Result<()> {
        let handle = self.platform.clone();
        let mut guard = handle.lock();
        self.run_workers(&mut guard)
    }

    // ----- last_cmd_status -----

    fn status_clear(&mut self) {
        self.last_cmd.clear();
    }

    /// `rdt_last_cmd_printf` (`seq_buf_vprintf`): appended, and truncated to what fits the
    /// 512-byte buffer with its terminating NUL (at most 511 bytes in all); once full,
    /// nothing more is added. The kernel's `rdt_last_cmd_puts` (fixed messages) drops a
    /// message that does not fit whole instead: the model truncates those too, which only
    /// differs after some 480 bytes of messages in one operation.
    fn status(&mut self, msg: impl AsRef<[u8]>) {
        let msg = msg.as_ref();
        let room = (LAST_CMD_STATUS_SIZE - 1).saturating_sub(self.last_cmd.len());
        self.last_cmd.extend_from_slice(&msg[..msg.len().min(room)]);
    }

    /// Sets the status message and returns `code` as an error.
    fn fail<T>(&mut self, code: i32, msg: impl AsRef<[u8]>) -> io::Result<T> {
        self.status(msg);
        Err(err(code))
    }

    // ----- groups -----

    fn grp(&self, g: Gid) -> &Group {
        self.groups[g].as_ref().expect("live group id")
    }

    fn grp_mut(&mut self, g: Gid) -> &mut Group {
        self.groups[g].as_mut().expect("live group id")
    }

    /// The CTRL_MON groups, root first.
    fn ctrl_groups(&self) -> Vec<Gid> {
        std::iter::once(ROOT)
            .chain(self.ctrl_names.values().copied())
            .collect()
    }

    fn children(&self, g: Gid) -> &[Gid] {
        match &self.grp(g).kind {
            GroupKind::Ctrl { children } => children,
            GroupKind::Mon { .. } => &[],
        }
    }

    const fn is_ctrl(g: &Group) -> bool {
        matches!(g.kind, GroupKind::Ctrl { .. })
    }

    /// The mode of the group owning `closid` (`rdtgroup_mode_by_closid`).
    fn mode_by_closid(&self, closid: u32) -> Option<Mode> {
        self.ctrl_groups()
            .into_iter()
            .map(|g| self.grp(g))
            .find(|g| g.closid == closid)
            .map(|g| g.mode)
    }

    fn mon_capable(&self) -> bool {
        self.hw.mon.is_some()
    }

    fn cdp_enabled(&self, r: Res) -> bool {
        match r {
            Res::L3 => self.opts.cdp,
            Res::L2 => self.opts.cdpl2,
            _ => false,
        }
    }

    /// `is_mba_sc(r)`: MB under `mba_MBps`.
    fn mba_sc(&self, r: Res) -> bool {
        r == Res::Mb && self.opts.mba_mbps
    }

    // ----- per-CPU defaults and IA32_PQR_ASSOC -----

    /// Every online CPU's default (CLOSID, RMID), from the groups' CPU masks.
    fn cpu_defaults(&self) -> BTreeMap<LogicalCpu, (u32, u32)> {
        let root = self.grp(ROOT);
        let mut m: BTreeMap<LogicalCpu, (u32, u32)> = self
            .hw
            .online
            .iter()
            .map(|c| (c, (root.closid, root.rmid)))
            .collect();
        for g in self.ctrl_groups() {
            let grp = self.grp(g);
            for c in grp.cpus.iter() {
                m.insert(c, (grp.closid, grp.rmid));
            }
        }
        for g in self.ctrl_groups() {
            for &child in self.children(g) {
                let mg = self.grp(child);
                for c in mg.cpus.iter() {
                    m.insert(c, (mg.closid, mg.rmid));
                }
            }
        }
        m
    }

    /// Runs `f`, then writes IA32_PQR_ASSOC (COS in 63:32, RMID in the low bits) of every CPU
    /// whose default ids it changed (`update_closid_rmid`: with no task running, a CPU runs
    /// with its defaults).
    fn with_pqr_sync<T>(
        &mut self,
        p: &mut SimPlatform,
        f: impl FnOnce(&mut Self, &mut SimPlatform) -> io::Result<T>,
    ) -> io::Result<T> {
        let before = self.cpu_defaults();
        let out = f(self, p);
        let after = self.cpu_defaults();
        for (cpu, ids) in &after {
            if before.get(cpu) != Some(ids) {
                let v = (u64::from(ids.0) << 32) | u64::from(ids.1);
                wrmsr(p, *cpu, IA32_PQR_ASSOC, v)?;
            }
        }
        out
    }

    // ----- paths -----

    /// The entries of directory node `n`, in a stable order.
    #[allow(clippy::too_many_lines)] // one arm per directory kind
    fn entries(&self, n: Node) -> Vec<(String, Node)> {
        let mut v = self.entries_but_groups(n);
        match n {
            Node::GroupDir(ROOT) => v.extend(
                self.ctrl_names
                    .iter()
                    .map(|(name, &c)| (name.clone(), Node::GroupDir(c))),
            ),
            Node::MonGroups(g) => {
                v.extend(
                    self.children(g)
                        .iter()
                        .map(|&c| (self.grp(c).name.clone(), Node::GroupDir(c))),
                );
                v.sort_by(|a, b| a.0.cmp(&b.0));
            }
            _ => {}
        }
        v
    }

    /// The entry `name` of the directory `n`: a group found by its name directly (the root's
    /// control groups by `ctrl_names`, a `mon_groups/` by its children's names), everything
    /// else among [`Self::entries_but_groups`], so that a lookup does not list (and copy the
    /// names of) thousands of groups, as the kernel's `kernfs_find_ns` does not.
    fn entry(&self, n: Node, name: &str) -> Option<Node> {
        let group = match n {
            Node::GroupDir(ROOT) => self.ctrl_names.get(name).map(|&c| Node::GroupDir(c)),
            Node::MonGroups(g) => self
                .children(g)
                .iter()
                .find(|&&c| self.grp(c).name == name)
                .map(|&c| Node::GroupDir(c)),
            _ => None,
        };
        group.or_else(|| {
            self.entries_but_groups(n)
                .into_iter()
                .find(|(e, _)| e == name)
                .map(|(_, node)| node)
        })
    }

    /// The files and directories of the group directory `g` (not its groups).
    fn group_dir_entries(&self, g: Gid) -> Vec<(String, Node)> {
        let mut v: Vec<(String, Node)> = Vec::new();
        let grp = self.grp(g);
        let ctrl = Self::is_ctrl(grp);
        let mon = self.mon_capable();
        let mut files = vec![GroupFile::Cpus, GroupFile::CpusList, GroupFile::Tasks];
        if ctrl {
            files.extend([GroupFile::Schemata, GroupFile::Mode, GroupFile::Size]);
            if self.opts.mba_mbps {
                files.push(GroupFile::MbaMbpsEvent);
            }
            if self.opts.debug {
                files.push(GroupFile::CtrlHwId);
            }
        }
        if self.opts.debug && mon {
            files.push(GroupFile::MonHwId);
        }
        if mon && self.amd.abmc() {
            files.push(GroupFile::MbmL3Assignments);
        }
        v.extend(
            files
                .into_iter()
                .map(|f| (f.name().to_string(), Node::GroupFile(g, f))),
        );
        if g == ROOT {
            v.push(("info".into(), Node::Info));
        }
        if mon {
            if ctrl {
                v.push(("mon_groups".into(), Node::MonGroups(g)));
            }
            v.push(("mon_data".into(), Node::MonData(g)));
        }
        v
    }

    /// [`Self::entries`] without the groups of the root and of a `mon_groups/`.
    fn entries_but_groups(&self, n: Node) -> Vec<(String, Node)> {
        let mut v: Vec<(String, Node)> = Vec::new();
        match n {
            Node::GroupDir(g) => v = self.group_dir_entries(g),
            Node::MonData(g) => {
                v.extend(
                    self.hw
                        .l3_domains
                        .iter()
                        .enumerate()
                        .map(|(i, d)| (format!("mon_L3_{:02}", d.id), Node::MonDomain(g, i))),
                );
            }
            Node::MonDomain(g, d) => {
                v.extend(
                    self.events()
                        .into_iter()
                        .map(|e| (e.name().to_string(), Node::MonFile(g, d, e))),
                );
                // SNC: one sub-directory per node of the L3 (`mkdir_mondata_subdir_snc`).
                if self.hw.snc > 1 {
                    v.extend(
                        self.hw.l3_nodes[d]
                            .iter()
                            .zip(0..)
                            .map(|(id, k)| (format!("mon_sub_L3_{id:02}"), Node::MonSub(g, d, k))),
                    );
                }
            }
            Node::MonSub(g, d, k) => {
                v.extend(
                    self.events()
                        .into_iter()
                        .map(|e| (e.name().to_string(), Node::MonSubFile(g, d, k, e))),
                );
            }
            Node::Info => {
                v.push(("last_cmd_status".into(), Node::LastCmdStatus));
                v.extend(
                    self.schemas
                        .iter()
                        .enumerate()
                        .map(|(i, s)| (s.name.clone(), Node::InfoRes(InfoDir::Schema(i)))),
                );
                if self.mon_capable() {
                    v.push(("L3_MON".into(), Node::InfoRes(InfoDir::L3Mon)));
                }
            }
            Node::InfoRes(dir) => {
                v.extend(
                    self.info_files(dir)
                        .into_iter()
                        .map(|f| (f.name().to_string(), Node::InfoFile(dir, f))),
                );
                if dir == InfoDir::L3Mon && self.amd.abmc() {
                    v.push(("event_configs".into(), Node::InfoRes(InfoDir::EventConfigs)));
                }
                if dir == InfoDir::EventConfigs {
                    v.extend(
                        self.events()
                            .into_iter()
                            .filter(|e| *e != Event::LlcOccupancy)
                            .map(|e| {
                                (e.name().to_string(), Node::InfoRes(InfoDir::EventConfig(e)))
                            }),
                    );
                }
            }
            _ => {}
        }
        v
    }

    fn info_files(&self, dir: InfoDir) -> Vec<InfoFile> {
        use InfoFile as F;
        match dir {
            InfoDir::Schema(i) => {
                let r = self.schemas[i].res;
                if r.is_cache() {
                    let mut f = vec![F::BitUsage, F::CbmMask];
                    if self.amd.io_alloc_files() {
                        f.extend([F::IoAlloc, F::IoAllocCbm]);
                    }
                    f.extend([
                        F::MinCbmBits,
                        F::NumClosids,
                        F::ShareableBits,
                        F::SparseMasks,
                    ]);
                    f
                } else {
                    let mut f = vec![
                        F::BandwidthGran,
                        F::DelayLinear,
                        F::MinBandwidth,
                        F::NumClosids,
                    ];
                    if self.hw.bw(r).is_some_and(|b| b.throttle_mode.is_some()) {
                        f.push(F::ThreadThrottleMode);
                    }
                    f
                }
            }
            InfoDir::L3Mon => {
                let mut f = vec![F::MaxThresholdOccupancy, F::MonFeatures, F::NumRmids];
                f.extend(self.amd_l3_mon_files());
                f.sort_by_key(|f| f.name());
                f
            }
            InfoDir::EventConfigs => Vec::new(),
            InfoDir::EventConfig(_) => vec![F::EventFilter],
        }
    }

    /// The enabled L3 monitoring events, in `mon_features` order.
    fn events(&self) -> Vec<Event> {
        let Some(m) = &self.hw.mon else {
            return Vec::new();
        };
        Event::ALL
            .into_iter()
            .filter(|e| match e {
                Event::LlcOccupancy => m.llc_occupancy,
                Event::MbmTotal => m.mbm_total,
                Event::MbmLocal => m.mbm_local,
            })
            .collect()
    }

    /// What `path` names: ENOENT when nothing, ENOTDIR when a file is used as a directory.
    fn resolve(&self, path: &str) -> io::Result<Node> {
        let mut n = Node::GroupDir(ROOT);
        for comp in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
            if !n.is_dir() {
                return Err(err(ENOTDIR));
            }
            n = self.entry(n, comp).ok_or_else(|| err(ENOENT))?;
        }
        Ok(n)
    }

    fn node_kind(n: Node) -> NodeKind {
        if n.is_dir() {
            NodeKind::Dir
        } else {
            NodeKind::File {
                mode: n.file_mode(),
            }
        }
    }

    // ----- file contents -----

    fn show(&mut self, p: &mut SimPlatform, n: Node) -> io::Result<Vec<u8>> {
        Ok(match n {
            Node::GroupFile(g, GroupFile::MbmL3Assignments) => {
                self.show_assignments(g)?.into_bytes()
            }
            Node::GroupFile(g, f) => self.show_group_file(g, f).into_bytes(),
            Node::MonFile(g, d, e) => self.show_mon(p, g, d, e, None)?.into_bytes(),
            Node::MonSubFile(g, d, k, e) => self.show_mon(p, g, d, e, Some(k))?.into_bytes(),
            Node::LastCmdStatus => {
                if self.last_cmd.is_empty() {
                    b"ok\n".to_vec()
                } else {
                    self.last_cmd.clone()
                }
            }
            Node::InfoFile(dir, f) => match self.amd_show_info(dir, f) {
                Some(r) => r?.into_bytes(),
                None => self.show_info(dir, f).into_bytes(),
            },
            _ => return Err(err(EISDIR)),
        })
    }

    fn show_group_file(&self, g: Gid, f: GroupFile) -> String {
        let grp = self.grp(g);
        match f {
            GroupFile::Tasks => self.show_tasks(g),
            GroupFile::Cpus => format!("{}\n", kstr::bitmap_string(&grp.cpus, self.hw.nr_cpu_ids)),
            GroupFile::CpusList => format!("{}\n", grp.cpus),
            GroupFile::Schemata => self.show_schemata(g),
            GroupFile::Mode => format!("{}\n", grp.mode.name()),
            GroupFile::Size => self.show_size(g),
            GroupFile::MbaMbpsEvent => format!("{}\n", grp.mba_event.name()),
            GroupFile::CtrlHwId => format!("{}\n", grp.closid),
            GroupFile::MonHwId => format!("{}\n", grp.rmid),
            GroupFile::MbmL3Assignments => String::new(), // read in `show`
        }
    }

    fn store(&mut self, p: &mut SimPlatform, n: Node, data: &[u8]) -> io::Result<()> {
        match n {
            Node::GroupFile(g, GroupFile::Tasks) => {
                let r = self.write_tasks(g, data);
                self.follow_host_tasks(p); // the moves before a failure count too
                r
            }
            Node::GroupFile(g, GroupFile::Cpus) => self.write_cpus(p, g, data, false),
            Node::GroupFile(g, GroupFile::CpusList) => self.write_cpus(p, g, data, true),
            Node::GroupFile(g, GroupFile::Schemata) => self.write_schemata(p, g, data),
            Node::GroupFile(g, GroupFile::Mode) => self.write_mode(g, data),
            Node::GroupFile(g, GroupFile::MbaMbpsEvent) => self.write_mba_event(g, data),
            Node::InfoFile(InfoDir::L3Mon, InfoFile::MaxThresholdOccupancy) => {
                self.write_threshold(data)
            }
            Node::GroupFile(g, GroupFile::MbmL3Assignments) => self.write_assignments(p, g, data),
            Node::InfoFile(dir, f) => self
                .amd_write_info(p, dir, f, data)
                .unwrap_or_else(|| Err(err(EACCES))),
            _ => Err(err(EACCES)),
        }
    }

    /// A second handle on the platform, to lock it for one operation while `self` changes.
    fn handle(&self) -> SimHandle {
        self.platform.clone()
    }
}

/// `schemata_list_create`: the schemas in `resctrl_schema_all` order, and `max_name_width`.
fn build_schemas(hw: &Hw, opts: MountOptions) -> (Vec<Schema>, usize) {
    // schemata_list_create: resources in enum order, CODE before DATA, each added at the
    // head of the list.
    let mut schemas = Vec::new();
    for r in Res::ALL {
        if !hw.has(r) {
            continue;
        }
        let cdp = match r {
            Res::L3 => opts.cdp,
            Res::L2 => opts.cdpl2,
            _ => false,
        };
        let n = hw.num_closid(r);
        if cdp {
            for (conf, suffix) in [(Conf::Code, "CODE"), (Conf::Data, "DATA")] {
                schemas.push(Schema {
                    name: format!("{}{suffix}", r.name()),
                    res: r,
                    conf,
                    num_closid: n / 2,
                });
            }
        } else {
            schemas.push(Schema {
                name: r.name().into(),
                res: r,
                conf: Conf::None,
                num_closid: n,
            });
        }
    }
    schemas.reverse();
    // max_name_width: a CDP-capable resource without CDP counts its suffix too.
    let name_width = schemas
        .iter()
        .map(|s| {
            let cdp_capable = hw.cache(s.res).is_some_and(|c| c.cdp_capable);
            s.name.len()
                + if cdp_capable && s.conf == Conf::None {
                    4
                } else {
                    0
                }
        })
        .max()
        .unwrap_or(0);
    (schemas, name_width)
}

/// The default `mba_MBps_event`: local bandwidth when counted, else total.
fn default_mba_event(hw: &Hw) -> Event {
    if hw.mon.as_ref().is_some_and(|m| m.mbm_local) {
        Event::MbmLocal
    } else {
        Event::MbmTotal
    }
}

impl Drop for Resctrl {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

impl Tree for Resctrl {
    fn kind(&self, path: &str) -> io::Result<NodeKind> {
        self.resolve(path).map(Self::node_kind)
    }

    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>> {
        let n = self.resolve(path)?;
        if !n.is_dir() {
            return Err(err(ENOTDIR));
        }
        Ok(self
            .entries(n)
            .into_iter()
            .map(|(name, node)| (name, Self::node_kind(node)))
            .collect())
    }

    /// Each read generates the whole file (seq_file) and returns the slice at `offset`.
    fn read(&mut self, path: &str, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let handle = self.handle();
        let mut guard = handle.lock();
        let p: &mut SimPlatform = &mut guard;
        self.run_workers(p)?;
        let n = self.resolve(path)?;
        if n.is_dir() {
            return Err(err(EISDIR));
        }
        let text = self.show(p, n)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(text.len());
        let end = start.saturating_add(size as usize).min(text.len());
        Ok(text[start..end].to_vec())
    }

    /// One write(2) is one command; the offset is ignored. Read-only files are EACCES (the
    /// open for writing fails), writes over a page E2BIG.
    fn write(&mut self, path: &str, _offset: u64, data: &[u8]) -> io::Result<usize> {
        let handle = self.handle();
        let mut guard = handle.lock();
        let p: &mut SimPlatform = &mut guard;
        self.run_workers(p)?;
        let n = self.resolve(path)?;
        if n.is_dir() {
            return Err(err(EISDIR));
        }
        if n.file_mode() & 0o200 == 0 {
            return Err(err(EACCES));
        }
        if data.len() > MAX_WRITE {
            return Err(err(E2BIG));
        }
        self.store(p, n, data)?;
        Ok(data.len())
    }

    fn write_by(
        &mut self,
        path: &str,
        offset: u64,
        data: &[u8],
        writer: Option<u32>,
    ) -> io::Result<usize> {
        self.writer = writer;
        let r = self.write(path, offset, data);
        self.writer = None;
        r
    }

    fn mkdir(&mut self, path: &str) -> io::Result<()> {
        let handle = self.handle();
        let mut guard = handle.lock();
        let p: &mut SimPlatform = &mut guard;
        self.run_workers(p)?;
        self.do_mkdir(p, path)
    }

    fn rmdir(&mut self, path: &str) -> io::Result<()> {
        let handle = self.handle();
        let mut guard = handle.lock();
        let p: &mut SimPlatform = &mut guard;
        self.run_workers(p)?;
        let n = self.resolve(path)?;
        if path.split('/').all(str::is_empty) {
            return Err(err(EBUSY)); // the mount point itself
        }
        if !n.is_dir() {
            return Err(err(ENOTDIR));
        }
        self.do_rmdir(p, n)
    }

    fn rename(&mut self, from: &str, to: &str) -> io::Result<()> {
        let handle = self.handle();
        let mut guard = handle.lock();
        let p: &mut SimPlatform = &mut guard;
        self.run_workers(p)?;
        self.do_rename(p, from, to)
    }
}

/// Splits `path` into its parent directory and last component.
fn split_last(path: &str) -> (&str, &str) {
    let t = path.trim_end_matches('/');
    t.rsplit_once('/').unwrap_or(("", t))
}

/// `EINVAL` as an error value.
fn einval<T>() -> io::Result<T> {
    Err(err(EINVAL))
}
