//! The `Backend` trait both interfaces (MSR and resctrl) implement, and the values it speaks.

mod abilities;
mod ext;

pub use abilities::{MsrOps, NamedClasses, OsOps, Writers};
pub use ext::BackendExt;

use crate::{
    CacheBitmask, CacheDomain, Capabilities, CatResource, ClassId, CpuSet, LogicalCpu, MbaLimit,
    MbaResource, MonEvents, MonGroupId, MonValues, RequestError, Rmid, TaskId, Topology,
};

/// The interface a backend programs the hardware through (pqos `--iface`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Interface {
    /// Model-specific registers through `/dev/cpu/N/msr`.
    Msr,
    /// The Linux resctrl filesystem.
    Os,
    /// RDT 1.3's MMIO registers that the ACPI ERDT table locates (pqos v26.03
    /// `--iface=mmio`), for region-aware MBM and MBA ([`Backend::regions`]); cores keep
    /// IA32_PQR_ASSOC and L3 CAT keeps its MSRs, so for everything else it acts as
    /// [`Interface::Msr`] ([`Interface::uses_msrs`]).
    Mmio,
}

impl Interface {
    /// Whether CPUs are associated and CAT/MBA classes programmed through MSRs: the MSR and
    /// the MMIO interface (pqos v26.03 `lib/mmio_allocation.c` keeps `hw_alloc_*` for cores).
    #[must_use]
    pub const fn uses_msrs(self) -> bool {
        matches!(self, Self::Msr | Self::Mmio)
    }
}

/// The masks of one CAT class: one mask, or a data and a code mask while CDP is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum CatMask {
    /// CDP off: one mask for code and data.
    Unified(CacheBitmask),
    /// CDP on: data mask (register 2n) and code mask (register 2n+1).
    Cdp {
        /// Mask for data fetches.
        data: CacheBitmask,
        /// Mask for code fetches.
        code: CacheBitmask,
    },
}

impl CatMask {
    /// Every way the class may fill, as mask bits: the mask, or data and code together.
    #[must_use]
    pub const fn ways(self) -> u64 {
        match self {
            Self::Unified(m) => m.bits(),
            Self::Cdp { data, code } => data.bits() | code.bits(),
        }
    }

    /// Whether every mask is `full` (a class as a reset leaves it).
    #[must_use]
    pub fn is_all(self, full: CacheBitmask) -> bool {
        match self {
            Self::Unified(m) => m == full,
            Self::Cdp { data, code } => data == full && code == full,
        }
    }
}

impl std::fmt::Display for CatMask {
    /// `0xffe00`, or `data 0xf code 0xf0` with CDP on.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unified(m) => write!(f, "{m:#x}"),
            Self::Cdp { data, code } => write!(f, "data {data:#x} code {code:#x}"),
        }
    }
}

/// One class of service's CAT masks in one cache domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CatClass {
    /// The class.
    pub class: ClassId,
    /// Its masks.
    pub mask: CatMask,
}

/// One class of service's bandwidth limit in one MBA domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MbaClass {
    /// The class.
    pub class: ClassId,
    /// Its limit.
    pub limit: MbaLimit,
}

/// A requested state of an on/off feature at reset (pqos `-R l3cdp-on`, `pqos_cdp_config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum FeatureSetting {
    /// Keep as is.
    #[default]
    Any,
    /// Turn on.
    On,
    /// Turn off.
    Off,
}

/// What `-R` resets besides the masks and associations (pqos `pqos_alloc_config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AllocReset {
    /// L3 code/data prioritization.
    pub l3_cdp: FeatureSetting,
    /// L2 code/data prioritization.
    pub l2_cdp: FeatureSetting,
    /// The kernel's MBA software controller (`mba_MBps`); OS interface only.
    pub mba_ctrl: FeatureSetting,
    /// Intel's MBA 4.0 extensions (pqos `-R mba40-on|off`, `pqos_alloc_config.mba40`):
    /// IA32_MBA_CFG (0xC84) bit 2 on one CPU per MBA domain (lib/allocation.c
    /// `hw_alloc_reset_mba40`), where [`Capabilities::mba40`](crate::Capabilities::mba40)
    /// says the part has them; MSR interface only (pqos's OS interface never reports them).
    pub mba40: FeatureSetting,
    /// L3 I/O RDT allocation (pqos `-R l3iordt-on|off`, `pqos_alloc_config.l3_iordt`):
    /// IA32_L3_IO_QOS_CFG (0xC83) bit 0, L3 non-CPU agent allocation enable, set or cleared
    /// on one CPU per L3 domain (lib/allocation.c `hw_alloc_reset_l3iordt`; Intel RDT
    /// architecture specification, I/O RDT), where
    /// [`Capabilities::l3_iordt`](crate::Capabilities::l3_iordt) says the part has it; MSR
    /// and MMIO interfaces only (resctrl has no such control).
    #[cfg_attr(feature = "serde", serde(default))]
    pub l3_iordt: FeatureSetting,
}

/// What the error of every [`Backend`] offers code that is generic over the trait: the
/// shared [`RequestError`] inside it, when that is what it is (a CPU in another tool's
/// resctrl group, an unsupported event, out of RMIDs, ...), so the caller can tell these
/// cases from a failed write without knowing the backend.
pub trait BackendError: std::error::Error + Send + Sync + 'static + From<RequestError> {
    /// The [`RequestError`] this error is, if any.
    fn request(&self) -> Option<&RequestError>;
}

impl BackendError for RequestError {
    fn request(&self) -> Option<&RequestError> {
        Some(self)
    }
}

/// A batch start ([`Backend::start_monitoring_many`]) failed at one group; the groups the
/// batch had started are stopped again.
#[derive(Debug, thiserror::Error)]
#[error("monitoring group {} of {}: {error}", .index + 1, .of)]
pub struct GroupStartError<E> {
    /// The failed group's index in the request (0-based).
    pub index: usize,
    /// How many groups the request asked for.
    pub of: usize,
    /// Why it failed: the error starting that group alone would give, or a check of the
    /// whole batch (RMIDs, ABMC counters) that this group is the first to exceed. Errors
    /// of no one group (taking resctrl's lock, listing its groups) are given to group 0.
    pub error: E,
}

impl<E> GroupStartError<E> {
    /// The same failure with the error converted (a backend's error into a facade's).
    pub fn map<F>(self, f: impl FnOnce(E) -> F) -> GroupStartError<F> {
        GroupStartError {
            index: self.index,
            of: self.of,
            error: f(self.error),
        }
    }
}

/// Whether a resctrl group is a control group (own `schemata`, a CLOSID) or a monitor group
/// (under a control group's `mon_groups/`, an RMID only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// A CTRL_MON group: `/sys/fs/resctrl/<name>` (or the root).
    Control,
    /// A MON group: `<control>/mon_groups/<name>`.
    Monitor,
}

/// Who made a resctrl group, judged by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupOwner {
    /// A name pqos (Intel's or this one) uses: `COS<n>` control groups, `pqos-<pid>-<n>`
    /// monitor groups. Both tools read, rewrite and remove these.
    Pqos,
    /// Any other name (goresctrl, kubelet, a user's `mkdir`): never rewritten or removed,
    /// except by a full reset the user asked for.
    Foreign,
}

/// One resctrl group as [`BackendExt::groups`] lists it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupInfo {
    /// Path relative to the resctrl root: `COS1`, `kubepods`, `COS1/mon_groups/pqos-42-0`.
    pub path: String,
    /// Control or monitor group.
    pub kind: GroupKind,
    /// Who made it.
    pub owner: GroupOwner,
    /// The class of service it maps to, for `COS<n>` control groups and groups under them.
    pub class: Option<ClassId>,
}

/// L3 I/O allocation as resctrl shows it ([`BackendExt::io_alloc`]): Linux 6.19's
/// `info/L3/io_alloc` and `info/L3/io_alloc_cbm`, on AMD parts with SDCIAE
/// (CPUID.(8000_0020H,0):EBX\[6\]). While it is enabled, the kernel keeps one CLOSID for the
/// L3 allocations of I/O devices, so one resctrl group fewer can exist.
///
/// # References
/// Linux `fs/resctrl/ctrlmondata.c` (`resctrl_io_alloc_show`, `resctrl_io_alloc_write`,
/// `resctrl_io_alloc_cbm_show`), `resctrl_io_alloc_closid()`;
/// `Documentation/filesystems/resctrl.rst` "io_alloc".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IoAlloc {
    /// `io_alloc` reads `enabled`.
    pub enabled: bool,
    /// The CLOSID io_alloc takes while enabled: the highest of L3, of its CDP half while CDP
    /// is on (`resctrl_io_alloc_closid()`: `num_closid - 1`, halved first under CDP). Never
    /// a class to hand out while `enabled` ([`crate::transaction::free_classes`]).
    pub class: ClassId,
    /// While enabled: the L3 mask of the I/O CLOSID per L3 domain (`io_alloc_cbm`,
    /// `0=ffff;1=ffff`); empty otherwise.
    pub masks: Vec<(CacheDomain, CacheBitmask)>,
}

/// The ways a resctrl group in `exclusive` mode holds in one cache domain
/// ([`BackendExt::exclusive_ways`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExclusiveWays {
    /// The group's path relative to the resctrl root.
    pub group: String,
    /// Its class of service, for `COS<n>` and named classes.
    pub class: Option<ClassId>,
    /// Its mask (data and code masks together with CDP on).
    pub bits: u64,
}

/// The state of the kernel's MBA software controller (resctrl's `mba_MBps` mount option,
/// pqos's "MBA CTRL"): with it on, MBA limits are MiB/s targets the kernel holds each class
/// to (a 1 s feedback loop over MBM local bytes), not percentages.
///
/// # References
/// Linux `Documentation/arch/x86/resctrl.rst`, "Memory bandwidth Allocation specified in
/// MiBps"; pqos `pqos_cap_mba.ctrl`/`ctrl_on`, `pqos -R mbaCtrl-on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MbaCtrl {
    /// The platform cannot run it: no MBA, no MBM, or non-linear MBA (AMD), or SNC.
    Unsupported,
    /// Supported, resctrl is mounted without `mba_MBps`: limits are percentages.
    Disabled,
    /// resctrl is mounted with `mba_MBps`: limits are MiB/s ([`crate::MbaLimit::MibPerSec`]).
    Enabled,
}

/// One way of programming RDT: raw MSRs or resctrl. The operations every interface has:
/// capabilities and topology, the classes of each resource read and written, CPUs
/// associated, reset, and monitoring started, polled and stopped.
///
/// What only one interface can do is reached through one accessor each, `None` where the
/// backend lacks it: [`Backend::os`] (tasks, resctrl groups, MBM assignment, io_alloc;
/// [`OsOps`]), [`Backend::msr`] (uncore PMON, IA32_MBA_CFG; [`MsrOps`]), [`Backend::names`]
/// (named classes; [`NamedClasses`]) and [`Backend::writers`] (the writers' lock and the run
/// directory; [`Writers`]). The conveniences every program uses (one domain, one CPU, one
/// group, the interface-specific calls with their "unsupported" error) are
/// [`BackendExt`]'s, implemented once for every `Backend`.
///
/// Domains are cache instances: `CacheDomain` is an L3 id for L3 CAT and MBA (the kernel's
/// MBA domains are L3 domains), an L2 id for L2 CAT.
///
/// # Atomicity
/// Implementations validate every argument of a call against [`Backend::capabilities`]
/// ([`Capabilities::check_cat`], [`Capabilities::check_bandwidth_limit`]) before writing anything,
/// so a rejected call leaves the platform as it was. A call is the unit a backend keeps
/// whole where the interface allows it (one resctrl `schemata` write per class; one
/// register per value on the MSR interface); undoing several calls, or a call whose second
/// register write failed, is the job of a [`crate::transaction`], which records what it
/// changed and puts it back.
pub trait Backend {
    /// The backend's error. Requests the platform or interface cannot carry out are
    /// [`RequestError`]s in it ([`BackendExt`] returns [`RequestError::NeedsOsInterface`]
    /// through it where [`Backend::os`] is `None`).
    type Error: BackendError;

    /// The interface this backend uses.
    fn interface(&self) -> Interface;

    /// Capabilities, including the current CDP state.
    fn capabilities(&self) -> &Capabilities;

    /// Topology of the online CPUs.
    fn topology(&self) -> &Topology;

    /// All usable classes' masks of `resource` in each of `domains`, in the order given, by
    /// class: what a report of every domain (pqos `-s`) reads. resctrl reads each class's
    /// `schemata` once for all of them (one file per class where a domain at a time reads
    /// one per class and domain: 80 L2 domains on sapphire-rapids).
    ///
    /// # Errors
    /// When the resource is not supported, a domain does not exist, or the registers/files
    /// cannot be read.
    fn cat_classes_in(
        &mut self,
        resource: CatResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<CatClass>>, Self::Error>;

    /// Sets the masks of `resource` given as `(domain, class and mask)` pairs. The mask kind
    /// must match the CDP state ([`Capabilities::check_cat`]). On resctrl each class's
    /// `schemata` is written once for all the domains given for it.
    ///
    /// # Errors
    /// When a class, domain or mask is invalid (nothing is written then) or a write fails.
    fn set_cat_masks(
        &mut self,
        resource: CatResource,
        masks: &[(CacheDomain, CatClass)],
    ) -> Result<(), Self::Error>;

    /// All classes' limits of the bandwidth resource `resource` (MBA or SMBA) in each of
    /// `domains` (L3 ids; the kernel's MBA and SMBA domains are L3 domains), in the order
    /// given, as [`Backend::cat_classes_in`].
    ///
    /// # Errors
    /// When the resource is not supported, a domain does not exist, or the registers/files
    /// cannot be read.
    fn bandwidth_classes_in(
        &mut self,
        resource: MbaResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, Self::Error>;

    /// Sets limits of the bandwidth resource `resource` (MBA or SMBA) given as `(domain,
    /// class and limit)` pairs; returns the limits the hardware applied, in the order given
    /// (Intel rounds to the granularity), one per pair.
    ///
    /// # Errors
    /// When the resource is not supported, a class, domain or limit is invalid (nothing is
    /// written then) or a write fails.
    fn set_bandwidth_limits(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> Result<Vec<(CacheDomain, MbaClass)>, Self::Error>;

    /// The class and RMID of each CPU of `cpus`, ascending, each with its own result: the
    /// RMID where the interface exposes RMIDs (MSR: one read of IA32_PQR_ASSOC, COS in bits
    /// 63:32, RMID in bits 9:0), `None` on OS; a CPU in another tool's resctrl group is
    /// [`RequestError::ForeignGroup`]. resctrl lists its groups and reads each `cpus_list`
    /// once for all CPUs.
    ///
    /// # Errors
    /// A CPU that is not online ([`RequestError::NoSuchCpu`]); what every CPU needs cannot
    /// be read (resctrl: the group list).
    #[allow(clippy::type_complexity)] // a list of per-CPU results
    fn associations_in(
        &mut self,
        cpus: &CpuSet,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), Self::Error>)>, Self::Error>;

    /// Puts every CPU of `cpus` in `class`, in as few writes as the interface allows. On
    /// resctrl that is one `cpus_list` write of the class's group for the whole set, all or
    /// nothing (the kernel's `rdtgroup_cpus_write` takes a list); on the MSR interface one
    /// IA32_PQR_ASSOC write per CPU, ascending, stopping at the first failure (the CPUs
    /// before it stay moved: a [`crate::transaction`] undoes them).
    ///
    /// # Errors
    /// When a CPU or the class is invalid (nothing is written then) or a write fails.
    fn associate_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> Result<(), Self::Error>;

    /// Resets allocation ([`Reset::Allocation`]: every class to the full mask / no limit,
    /// every CPU to COS 0, then CDP on or off as requested; pqos `-R`) or monitoring
    /// ([`Reset::Monitoring`]: every CPU back to RMID 0; pqos `-r`).
    ///
    /// # Errors
    /// When a requested setting is unsupported or a write fails.
    fn reset(&mut self, what: &Reset) -> Result<(), Self::Error>;

    /// Starts several groups of CPUs at once, all or none: group `k` of the result is
    /// `groups[k]`, monitoring its events on its CPUs (one RMID per L3 domain spanned). Each
    /// group's MBM counters and PMU counts are read once at the start, so that the first
    /// [`Backend::poll`] reports the traffic since the start over the time since the start
    /// ([`crate::monitor`], "Start and first poll"). resctrl lists its groups once for the
    /// whole batch and checks RMIDs and ABMC counters for all groups before it creates any;
    /// the MSR interface starts them one by one ([`start_one_by_one`]).
    ///
    /// # Errors
    /// [`GroupStartError`]: which group failed (its index in `groups`): a CPU offline or
    /// already monitored, events unsupported, no RMID free, or the reading at start failed;
    /// no group of the batch is left running.
    fn start_monitoring_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<Self::Error>>;

    /// Reads the counters of every started group; afterwards [`Backend::values`] has the new
    /// values.
    ///
    /// # Errors
    /// When a counter read fails for a reason other than the hardware's Unavailable flag.
    fn poll(&mut self) -> Result<(), Self::Error>;

    /// The values of `group` from the last poll.
    fn values(&self, group: MonGroupId) -> Option<&MonValues>;

    /// Stops a group and gives its RMIDs back (its CPUs return to RMID 0).
    ///
    /// # Errors
    /// When the group is unknown or a write fails.
    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), Self::Error>;

    /// Makes the writes made so far outlast this process where the platform keeps them
    /// apart from the writes themselves: the simulated platform of `pqos --sim` saves its
    /// state file. Registers and resctrl files hold a write once it returned, so on the
    /// hardware (and by default) this does nothing. A program reports a change as done
    /// only after this returned `Ok`.
    ///
    /// # Errors
    /// The writes could not be kept (the simulated platform's state file cannot be
    /// written); they are lost when the process ends.
    fn commit(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// The writers' lock and the run directory ([`Writers`]); `None` for a backend with
    /// neither (then two processes' changes do not serialize and a transaction killed
    /// half-way cannot be rolled back by the next process).
    fn writers(&mut self) -> Option<&mut dyn Writers<Self::Error>> {
        None
    }

    /// Named classes ([`NamedClasses`]); `None` for a backend without them.
    fn names(&mut self) -> Option<&mut dyn NamedClasses<Self::Error>> {
        None
    }

    /// What only the OS interface (resctrl) does ([`OsOps`]); `None` elsewhere.
    fn os(&mut self) -> Option<&mut dyn OsOps<Self::Error>> {
        None
    }

    /// What only the MSR interface does ([`MsrOps`]); `None` elsewhere.
    fn msr(&mut self) -> Option<&mut dyn MsrOps<Self::Error>> {
        None
    }

    /// Region-aware MBM and MBA ([`crate::region`]); `None` on a backend without the
    /// RDT 1.3 registers.
    fn regions(&mut self) -> Option<&mut dyn crate::RegionOps<Self::Error>> {
        None
    }

    /// I/O RDT channel association ([`crate::IoRdtOps`]): the tagging registers of the ACPI
    /// IRDT table's links; `None` on a platform without I/O RDT or an interface that cannot
    /// reach them (resctrl).
    fn io_rdt(&mut self) -> Option<&mut dyn crate::IoRdtOps<Self::Error>> {
        None
    }

    /// Starts monitoring `events` (LLC occupancy and MBM) of the I/O RDT `channels` as one
    /// group, polled, read and stopped like any ([`Backend::poll`], [`Backend::values`],
    /// [`Backend::stop_monitoring`]): one RMID free in every L3 domain, written into each
    /// channel's RMID tagging register (pqos `--mon-channel`; intel-cmt-cat v26.03
    /// `lib/hw_monitoring.c` `hw_mon_start_channels`). The facade `rdt_pqos::Rdt` has it on
    /// the MSR interface; by default it is refused.
    ///
    /// # Errors
    /// [`RequestError::IoRdt`] where the backend cannot monitor channels; the backend's
    /// errors (an unknown channel, one already monitored, no RMID free, a register access).
    fn start_channel_monitoring(
        &mut self,
        channels: &[crate::ChannelId],
        events: MonEvents,
    ) -> Result<MonGroupId, Self::Error> {
        let _ = (channels, events);
        Err(RequestError::IoRdt(
            "I/O RDT channel monitoring needs a platform with I/O RDT (an ACPI IRDT table) on \
             the MSR interface (--iface=msr)"
                .to_owned(),
        )
        .into())
    }
}

/// What [`Backend::reset`] resets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reset {
    /// Allocation, with what else `-R` sets (pqos `pqos_alloc_reset`).
    Allocation(AllocReset),
    /// Monitoring: every CPU to RMID 0, with what else `-r` sets (pqos `pqos_mon_reset`,
    /// `pqos_mon_reset_config`).
    Monitoring(MonReset),
}

/// What a reset of monitoring (pqos `-r`, `pqos_mon_config`) sets besides putting every CPU
/// back on RMID 0; the default changes nothing else (pqos's `l3iordt-any`, `snc-any`).
/// Checked by [`Capabilities::check_mon_reset`](crate::Capabilities::check_mon_reset) before
/// any write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MonReset {
    /// L3 I/O RDT monitoring (pqos `-r l3iordt-on|off`, `pqos_mon_config.l3_iordt`):
    /// IA32_L3_IO_QOS_CFG (0xC83) bit 1, read-modify-written on one CPU per socket
    /// (lib/hw_monitoring.c `hw_mon_reset_iordt`), where L3 monitoring enumerates non-CPU
    /// agents (CPUID.(0FH,1):EAX\[9\]/\[10\], [`MonitoringCaps::io_rdt`](crate::MonitoringCaps::io_rdt));
    /// MSR and MMIO interfaces only.
    pub l3_iordt: FeatureSetting,
    /// Sub-NUMA Clustering RMID mode (pqos `-r snc-local|snc-total`, `pqos_mon_config.snc`):
    /// MSR_RMID_SNC_CONFIG (0xCA0) bit 0 set ([`SncMode::Local`](crate::SncMode::Local)) or
    /// cleared ([`SncMode::Total`](crate::SncMode::Total)) on one CPU per socket
    /// (lib/hw_monitoring.c `hw_mon_set_snc_mode`), where
    /// [`Capabilities::snc`](crate::Capabilities::snc) reports SNC; `None`: unchanged. MSR
    /// and MMIO interfaces only.
    pub snc: Option<crate::SncMode>,
}

/// Starts `count` groups one by one with `start` (given the group's index) and, when one
/// fails, stops the groups it started, newest first, with `stop`: [`Backend::start_monitoring_many`]
/// for a backend whose groups are independent (the MSR interface, test doubles).
///
/// # Errors
/// [`GroupStartError`] with the index of the group that failed and its error.
pub fn start_one_by_one<B: ?Sized, E>(
    backend: &mut B,
    count: usize,
    mut start: impl FnMut(&mut B, usize) -> Result<MonGroupId, E>,
    mut stop: impl FnMut(&mut B, MonGroupId),
) -> Result<Vec<MonGroupId>, GroupStartError<E>> {
    let mut started = Vec::with_capacity(count);
    for index in 0..count {
        match start(backend, index) {
            Ok(id) => started.push(id),
            Err(error) => {
                while let Some(id) = started.pop() {
                    stop(backend, id);
                }
                return Err(GroupStartError {
                    index,
                    of: count,
                    error,
                });
            }
        }
    }
    Ok(started)
}

/// Monitoring groups that cannot outlive their owner: every group started through the
/// guard is stopped when the guard is dropped (its RMIDs given back on the MSR interface, its
/// `pqos-<pid>-<n>` monitor groups removed on resctrl), on an early return, a `?` or a
/// panic alike. [`Monitoring::finish`] stops them and reports the first error; dropping
/// ignores errors (there is no one left to tell).
///
/// The guard borrows the backend mutably; [`Monitoring::backend`] gives it back for reads
/// (capabilities, topology) while the guard lives.
///
/// # Examples
/// ```
/// use rdt_core::fake::FakeBackend;
/// use rdt_core::{BackendExt, MonEvents};
///
/// let mut b = FakeBackend::broadwell_2s();
/// {
///     let mut mon = b.monitoring();
///     let g = mon.start(&"0-3".parse()?, MonEvents::LLC_OCCUPANCY)?;
///     mon.poll()?;
///     println!("{:?} bytes", mon.values(g).and_then(|v| v.llc_occupancy_bytes));
/// } // stopped here
/// assert_eq!(b.running_groups(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Monitoring<'a, B: Backend> {
    backend: &'a mut B,
    groups: Vec<MonGroupId>,
}

impl<'a, B: Backend> Monitoring<'a, B> {
    /// A guard with no group yet.
    pub fn new(backend: &'a mut B) -> Self {
        Self {
            backend,
            groups: Vec::new(),
        }
    }

    /// Starts a group of CPUs ([`BackendExt::start_monitoring`]) owned by the guard.
    ///
    /// # Errors
    /// As [`BackendExt::start_monitoring`].
    pub fn start(&mut self, cpus: &CpuSet, events: MonEvents) -> Result<MonGroupId, B::Error> {
        let id = self.backend.start_monitoring(cpus, events)?;
        self.groups.push(id);
        Ok(id)
    }

    /// Starts several groups of CPUs at once ([`Backend::start_monitoring_many`]), owned
    /// by the guard; the ids are in the order of `groups`.
    ///
    /// # Errors
    /// As [`Backend::start_monitoring_many`]: no group of the batch is left running.
    pub fn start_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<B::Error>> {
        let ids = self.backend.start_monitoring_many(groups)?;
        self.groups.extend_from_slice(&ids);
        Ok(ids)
    }

    /// Starts a group of tasks ([`BackendExt::start_monitoring_tasks`]) owned by the guard.
    ///
    /// # Errors
    /// As [`BackendExt::start_monitoring_tasks`].
    pub fn start_tasks(
        &mut self,
        tasks: &[TaskId],
        events: MonEvents,
    ) -> Result<MonGroupId, B::Error> {
        let id = self.backend.start_monitoring_tasks(tasks, events)?;
        self.groups.push(id);
        Ok(id)
    }

    /// Starts several groups of tasks at once ([`BackendExt::start_monitoring_tasks_many`]),
    /// owned by the guard; the ids are in the order of `groups`.
    ///
    /// # Errors
    /// As [`BackendExt::start_monitoring_tasks_many`]: no group of the batch is left running.
    pub fn start_tasks_many(
        &mut self,
        groups: &[(Vec<TaskId>, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<B::Error>> {
        let ids = self.backend.start_monitoring_tasks_many(groups)?;
        self.groups.extend_from_slice(&ids);
        Ok(ids)
    }

    /// Starts an uncore group of sockets ([`BackendExt::start_uncore_monitoring`]) owned by the
    /// guard.
    ///
    /// # Errors
    /// As [`BackendExt::start_uncore_monitoring`].
    ///
    /// # Examples
    /// ```
    /// use rdt_core::fake::FakeBackend;
    /// use rdt_core::{BackendExt, MonEvents};
    ///
    /// let mut b = FakeBackend::broadwell_2s();
    /// b.reconfigure(|c| c.uncore_pcie = true); // as on a Skylake-SP
    /// let mut mon = b.monitoring();
    /// let g = mon.start_uncore(&[0, 1], MonEvents::UNCORE)?;
    /// mon.poll()?;
    /// let pcie = mon.values(g).and_then(|v| v.uncore).unwrap();
    /// assert_eq!(pcie.llc_miss_pcie_read, Some(1000 * (1 + 2)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_uncore(
        &mut self,
        sockets: &[u32],
        events: MonEvents,
    ) -> Result<MonGroupId, B::Error> {
        let id = self.backend.start_uncore_monitoring(sockets, events)?;
        self.groups.push(id);
        Ok(id)
    }

    /// Starts a group of I/O RDT channels ([`Backend::start_channel_monitoring`]), stopped
    /// with the guard's other groups.
    ///
    /// # Errors
    /// As [`Backend::start_channel_monitoring`].
    pub fn start_channels(
        &mut self,
        channels: &[crate::ChannelId],
        events: MonEvents,
    ) -> Result<MonGroupId, B::Error> {
        let id = self.backend.start_channel_monitoring(channels, events)?;
        self.groups.push(id);
        Ok(id)
    }

    /// Polls every group ([`Backend::poll`]).
    ///
    /// # Errors
    /// As [`Backend::poll`].
    pub fn poll(&mut self) -> Result<(), B::Error> {
        self.backend.poll()
    }

    /// The values of `group` from the last poll.
    #[must_use]
    pub fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        self.backend.values(group)
    }

    /// The groups the guard holds, in start order.
    #[must_use]
    pub fn groups(&self) -> &[MonGroupId] {
        &self.groups
    }

    /// The backend, for reads while the guard lives.
    #[must_use]
    pub fn backend(&self) -> &B {
        self.backend
    }

    /// The backend, mutable (its abilities: [`Backend::regions`] for region values).
    pub fn backend_mut(&mut self) -> &mut B {
        self.backend
    }

    /// Stops one group of the guard now.
    ///
    /// # Errors
    /// [`RequestError::NoSuchGroup`] for a group the guard does not hold; as
    /// [`Backend::stop_monitoring`] (the group is released by the guard either way).
    pub fn stop(&mut self, group: MonGroupId) -> Result<(), B::Error> {
        let Some(i) = self.groups.iter().position(|g| *g == group) else {
            return Err(RequestError::NoSuchGroup(group).into());
        };
        self.groups.remove(i);
        self.backend.stop_monitoring(group)
    }

    /// Stops every group still held, newest first, and reports the first error (every
    /// group is attempted).
    ///
    /// # Errors
    /// The first [`Backend::stop_monitoring`] error.
    pub fn finish(mut self) -> Result<(), B::Error> {
        self.stop_all()
    }

    fn stop_all(&mut self) -> Result<(), B::Error> {
        let mut first = Ok(());
        while let Some(g) = self.groups.pop() {
            if let Err(e) = self.backend.stop_monitoring(g)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }
}

impl<B: Backend> Drop for Monitoring<'_, B> {
    fn drop(&mut self) {
        let _ = self.stop_all();
    }
}
