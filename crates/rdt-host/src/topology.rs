//! The topology of the running system from the kernel's sysfs (`/sys/devices/system`), and
//! from x2APIC ids with sysfs's online CPUs and NUMA nodes: rdt-core's [`Topology`] built
//! from files ([`TopologyFromSysfs`]), its parsing of CPUID dumps and placements staying in
//! rdt-core.
//!
//! # References
//! - Linux `Documentation/ABI/testing/sysfs-devices-system-cpu` (`topology/*`,
//!   `cache/indexN/*`), `arch/x86/kernel/cpu/cacheinfo.c` (`get_cache_id`).
//! - pqos `lib/cpuinfo.c`, `lib/os_cpuinfo.c` (`shared/spec/pqos.md` §6.1).

mod sysfs;

use std::collections::BTreeMap;
use std::path::Path;

use rdt_core::{ApicIdLayout, CpuSet, LogicalCpu, Topology, TopologyError};

/// [`Topology`] read from a sysfs system directory: `Topology::from_sysfs(dir)` with this
/// trait in scope (`use rdt_pqos::TopologyFromSysfs`), as `procfs`'s `Current` reads
/// `procfs-core`'s types.
pub trait TopologyFromSysfs: Sized {
    /// Reads the topology of the online CPUs from a sysfs system directory (the equivalent of
    /// `/sys/devices/system`, holding `cpu/` and optionally `node/`).
    ///
    /// Files are read per group, never per CPU: each list is read on the lowest online CPU
    /// of a group not yet placed, and places every online CPU it names.
    ///
    /// - Online CPUs: `cpu/online` (list form). Without it, every `cpu/cpuN` directory whose
    ///   `cpuN/online` is not `0`.
    /// - Package: `topology/physical_package_id` (`-1`, which some architectures write for
    ///   "unknown", is read as 0) and `topology/package_cpus_list` (`core_siblings_list`
    ///   before Linux 5.5), once per package. The core id is not read (`core` is `None`).
    /// - Caches: which `cache/indexK` is the L2 (the level-2 `Data` or `Unified` entry) and
    ///   the L3 (the level-3 `Unified` one) from `indexK/{level,type}` of the first online
    ///   CPU (x86 numbers the entries alike on every CPU: CPUID leaf 4 / 8000_001DH subleaf
    ///   order); then `indexK/{shared_cpu_list,id}` once per cache instance. Kernels before
    ///   4.13 have no `id` file: the id is then the lowest CPU of the `shared_cpu_list`,
    ///   which identifies the instance just as well (it is not the number the kernel would
    ///   print). A CPU without an L2 entry (some VMs) gets its own CPU number as L2 id (a
    ///   private L2); one without an L3 entry gets `l3: None`.
    /// - NUMA node: the `node/nodeM/cpulist` that lists the CPU, else 0.
    ///
    /// Files are read as kernel attributes: regular files only (a FIFO is an error, not a
    /// wait), at most 64 KiB, in one `read(2)` each.
    ///
    /// # Errors
    /// [`TopologyError::Io`] when a needed file cannot be read or is not a regular file of
    /// at most 64 KiB (the path is named),
    /// [`TopologyError::Parse`] when one does not hold a number or CPU list, and
    /// [`TopologyError::NoCpus`] when no CPU is online.
    ///
    /// # Examples
    /// ```no_run
    /// use std::path::Path;
    /// use rdt_core::Topology;
    /// use rdt_host::topology::TopologyFromSysfs;
    /// let topo = Topology::from_sysfs(Path::new(Topology::DEFAULT_SYSFS))?;
    /// println!("{} CPUs in {} L3 domains", topo.cpus().len(), topo.l3_domains().len());
    /// # Ok::<(), rdt_core::TopologyError>(())
    /// ```
    fn from_sysfs(system_dir: impl AsRef<Path>) -> Result<Self, TopologyError>;

    /// The online CPUs of a sysfs system directory: `cpu/online` (one file), or without it
    /// every `cpu/cpuN` whose `cpuN/online` is not `0`.
    ///
    /// # Errors
    /// As [`TopologyFromSysfs::from_sysfs`].
    fn online_from_sysfs(system_dir: impl AsRef<Path>) -> Result<CpuSet, TopologyError>;

    /// Not the machine's topology but a sample of it for reading per-domain state: the
    /// lowest online CPU of every L3 instance in every NUMA node (of every package, for CPUs
    /// without an L3), each placed as [`TopologyFromSysfs::from_sysfs`] places it. So every
    /// package and L3 instance is there, one L2 instance per L3 instance and node, and the
    /// nodes of an L3 instance under Sub-NUMA Clustering (which the MSR backend reports).
    ///
    /// It reads the package and L3 lists of [`TopologyFromSysfs::from_sysfs`] but an L2 list only
    /// per representative: a capability report (pqos `-d`) reads the CDP enable bits of
    /// every L3 instance and of one L2 instance per L3 instance, without a file per L2
    /// instance (one per core on most Intel parts: 80 on the 160-CPU sapphire-rapids).
    ///
    /// # Errors
    /// As [`TopologyFromSysfs::from_sysfs`].
    fn l3_representatives_from_sysfs(system_dir: impl AsRef<Path>) -> Result<Self, TopologyError>;

    /// The topology of the online CPUs from their x2APIC ids (`x2apic_id` of each online
    /// CPU, e.g. IA32_X2APIC_APICID read through its msr device) and the platform's
    /// [`ApicIdLayout`], as pqos's MSR mode computes it (`lib/cpuinfo.c`); the online CPUs
    /// (`cpu/online`) and NUMA nodes (`node/nodeM/cpulist`) from the sysfs system directory.
    /// Package and cache ids equal sysfs's (the kernel derives them from the same ids), at
    /// one register read per CPU where sysfs takes ~11 file operations per L2 instance.
    ///
    /// `Ok(None)` as soon as one CPU's id is unknown (`x2apic_id` gives `None`: the local
    /// APIC is not in x2APIC mode, or the register cannot be read): use
    /// [`TopologyFromSysfs::from_sysfs`] then.
    ///
    /// # Errors
    /// As [`TopologyFromSysfs::from_sysfs`] for the files read.
    fn from_x2apic_ids(
        system_dir: impl AsRef<Path>,
        layout: ApicIdLayout,
        x2apic_id: impl FnMut(LogicalCpu) -> Option<u32>,
    ) -> Result<Option<Self>, TopologyError>;
}

impl TopologyFromSysfs for Topology {
    fn from_sysfs(system_dir: impl AsRef<Path>) -> Result<Self, TopologyError> {
        let system_dir = system_dir.as_ref();
        sysfs::read(system_dir)
    }

    fn online_from_sysfs(system_dir: impl AsRef<Path>) -> Result<CpuSet, TopologyError> {
        let system_dir = system_dir.as_ref();
        sysfs::online(system_dir)
    }

    fn l3_representatives_from_sysfs(system_dir: impl AsRef<Path>) -> Result<Self, TopologyError> {
        let system_dir = system_dir.as_ref();
        sysfs::read_l3_representatives(system_dir)
    }

    fn from_x2apic_ids(
        system_dir: impl AsRef<Path>,
        layout: ApicIdLayout,
        mut x2apic_id: impl FnMut(LogicalCpu) -> Option<u32>,
    ) -> Result<Option<Self>, TopologyError> {
        let system_dir = system_dir.as_ref();
        let online = sysfs::online(system_dir)?;
        if online.is_empty() {
            return Err(TopologyError::NoCpus {
                path: system_dir.join("cpu"),
            });
        }
        let mut ids = BTreeMap::new();
        for cpu in online.iter() {
            let Some(id) = x2apic_id(cpu) else {
                return Ok(None);
            };
            ids.insert(cpu, id);
        }
        let nodes = sysfs::nodes(system_dir)?;
        Ok(Self::from_x2apic_ids_of(&online, &nodes, layout, |cpu| {
            ids.get(&cpu).copied()
        }))
    }
}
