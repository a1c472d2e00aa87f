//! Which logical CPU sits in which package, L2, L3 and NUMA node.
//!
//! Two sources: the kernel's sysfs view (`Topology::from_sysfs` of rdt-host's
//! `TopologyFromSysfs`, what the OS interface and
//! pqos's OS mode use) and the x2APIC ids of a per-CPU CPUID dump
//! ([`Topology::from_cpuid_dump`], what pqos's MSR mode computes by running CPUID on every
//! CPU). Both give cache ids with the kernel's meaning: the id of a cache is the APIC id of its
//! CPUs shifted right by `ceil(log2(max sharing ids))`, so ids are unique machine-wide but
//! need not be dense (an L3 id on a second socket is typically not 1).
//!
//! # References
//! - Linux `Documentation/ABI/testing/sysfs-devices-system-cpu` (`topology/*`,
//!   `cache/indexN/*`), `arch/x86/kernel/cpu/cacheinfo.c` (`get_cache_id`).
//! - Intel SDM Vol. 3A, 10.12.8 / 9.9 "Identifying the Topology of a Processor"; CPUID leaves
//!   04H, 0BH, 1FH.
//! - AMD APM Vol. 3, CPUID Fn8000_0008 (ApicIdCoreIdSize), Fn8000_001D, Fn8000_001E.
//! - pqos `lib/cpuinfo.c`, `lib/os_cpuinfo.c` (`shared/spec/pqos.md` §6.1).

mod cpuid_topo;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::cpuid::{CpuidDump, CpuidSource};
pub use crate::detect::ceil_log2;
use crate::{CacheDomain, CpuSet, LogicalCpu};

/// The topology could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// A sysfs file or directory could not be read.
    #[error("failed to read {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A sysfs file does not hold what the kernel writes there.
    #[error("{path}: cannot parse `{text}`: expected {expected}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Its contents, trimmed.
        text: String,
        /// What the file should hold.
        expected: &'static str,
    },
    /// No online CPU was found.
    #[error("no online CPU found under {path}")]
    NoCpus {
        /// The `cpu` directory searched.
        path: PathBuf,
    },
    /// A CPU block of a CPUID dump lacks the leaves its placement needs.
    #[error("logical CPU {cpu} of the CPUID dump: {reason}")]
    Cpuid {
        /// The CPU block.
        cpu: LogicalCpu,
        /// What is missing.
        reason: String,
    },
}

/// How a platform's x2APIC ids split into SMT, core, package and cache ids: the shifts
/// CPUID gives (Intel SDM Vol. 3A 10.12.8 "Hierarchical Mapping of CPU Topology to APIC ID";
/// leaves 0BH/1FH, 04H, AMD 8000_0008H, 8000_001DH, 8000_001EH; the kernel's
/// `detect_extended_topology` and `get_cache_id`). The same on every CPU of a part whose
/// cores are all of one type, so one CPU's CPUID and every CPU's x2APIC id (IA32_X2APIC_APICID,
/// MSR 802H, on the MSR interface) place every CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApicIdLayout {
    /// Bits of the id below the core: `EAX[4:0]` of the SMT level.
    pub smt_shift: u32,
    /// Bits of the id below the package: `EAX[4:0]` of the last level.
    pub package_shift: u32,
    /// Bits of the id below the L2 instance: `ceil(log2(sharing))` of the L2 entry.
    pub l2_shift: u32,
    /// Bits of the id below the L3 instance; `None` without an L3.
    pub l3_shift: Option<u32>,
}

impl ApicIdLayout {
    /// The layout from one CPU's CPUID, as [`Topology::from_cpuid_dump`] computes it per
    /// CPU. `None` when neither a topology leaf nor leaf 1 answers, and on a hybrid part
    /// (CPUID.(07H,0):EDX\[15\]), whose core types share caches differently.
    #[must_use]
    pub fn from_cpuid(cpuid: &dyn CpuidSource) -> Option<Self> {
        cpuid_topo::layout_of(cpuid)
    }
}

/// Placement of one logical CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuPlacement {
    /// The CPU.
    pub cpu: LogicalCpu,
    /// Physical package (socket), `topology/physical_package_id`.
    pub package: u32,
    /// Core id within the package, from CPUID ([`Topology::from_cpuid_dump`]); `None` from
    /// sysfs (`Topology::from_sysfs`, rdt-host), which would have to read a `topology/core_id` per
    /// CPU for it and nothing here needs it.
    pub core: Option<u32>,
    /// L2 cache instance (`cache/indexK/id` where `level` is 2).
    pub l2: CacheDomain,
    /// L3 cache instance, `None` on a CPU without L3.
    pub l3: Option<CacheDomain>,
    /// NUMA node.
    pub node: u32,
}

/// The topology of the online logical CPUs, sorted by CPU number.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Topology {
    cpus: Vec<CpuPlacement>,
}

impl Topology {
    /// The sysfs system directory of a running Linux system.
    pub const DEFAULT_SYSFS: &'static str = "/sys/devices/system";

    /// Computes the topology from a per-CPU CPUID dump (one block per logical CPU), as pqos
    /// does in MSR mode.
    ///
    /// Per CPU block:
    /// - x2APIC id: CPUID.(1FH or 0BH, 0):EDX (Intel prefers 1FH). AMD without leaf 0BH:
    ///   CPUID.8000001EH:EAX (extended APIC id), else the 8-bit initial APIC id
    ///   CPUID.1:EBX\[31:24\].
    /// - Shifts: SMT shift = EAX\[4:0\] of the level of type 1 (SMT), package shift = EAX\[4:0\]
    ///   of the last level (the core level of leaf 0BH). Without a topology leaf: AMD
    ///   CPUID.80000008H:ECX\[15:12\] (ApicIdCoreIdSize, or `ceil_log2(ECX[7:0] + 1)` when 0) for
    ///   the package and `ceil_log2(8000001EH:EBX[15:8] + 1)` for SMT; Intel
    ///   `ceil_log2(1:EBX[23:16])` for the package and the ratio to `4:EAX[31:26] + 1` for SMT.
    /// - package = x2APIC >> package shift; core = (x2APIC >> SMT shift) masked to the bits
    ///   below the package shift.
    /// - Cache ids, as the kernel and pqos compute them: x2APIC >> `ceil_log2(EAX[25:14] + 1)`
    ///   of the L2 (data or unified) and L3 (unified) entries of leaf 4 (Intel) or 8000001DH
    ///   (AMD, Hygon). No renumbering: on Intel the result equals sysfs's `cache/index3/id`.
    ///   When the cache leaf was not recorded, L2 = per core (x2APIC >> SMT shift) and L3 =
    ///   per package (pqos's fallback); when it has no L3 entry, `l3` is `None`.
    /// - NUMA node = package: dumps carry no NUMA information.
    ///
    /// # Errors
    /// [`TopologyError::Cpuid`] naming the CPU block when neither a topology leaf nor leaf 1
    /// was recorded for it.
    pub fn from_cpuid_dump(dump: &CpuidDump) -> Result<Self, TopologyError> {
        cpuid_topo::from_dump(dump)
    }

    /// The topology of `online` CPUs from their x2APIC ids (`x2apic_id` of each, e.g.
    /// IA32_X2APIC_APICID read through its msr device) and the platform's [`ApicIdLayout`],
    /// as pqos's MSR mode computes it (`lib/cpuinfo.c`); `nodes` gives each CPU's NUMA node
    /// (a CPU not in it is in node 0). Package and cache ids equal sysfs's (the kernel
    /// derives them from the same ids). `None` as soon as one CPU's id is unknown
    /// (`x2apic_id` gives `None`). `rdt_host::topology::TopologyFromSysfs::from_x2apic_ids`
    /// reads `online` and `nodes` from sysfs.
    #[must_use]
    pub fn from_x2apic_ids_of(
        online: &CpuSet,
        nodes: &BTreeMap<LogicalCpu, u32>,
        layout: ApicIdLayout,
        mut x2apic_id: impl FnMut(LogicalCpu) -> Option<u32>,
    ) -> Option<Self> {
        let mut ids = Vec::with_capacity(online.len());
        for cpu in online.iter() {
            ids.push((cpu, x2apic_id(cpu)?));
        }
        Some(Self::from_placements(
            ids.into_iter()
                .map(|(cpu, id)| layout.place(cpu, id, nodes.get(&cpu).copied().or(Some(0))))
                .collect(),
        ))
    }

    /// Builds a topology from placements (sorted here by CPU number).
    #[must_use]
    pub fn from_placements(mut cpus: Vec<CpuPlacement>) -> Self {
        cpus.sort_by_key(|c| c.cpu);
        cpus.dedup_by_key(|c| c.cpu);
        Self { cpus }
    }

    /// All placements, by CPU number.
    #[must_use]
    pub fn cpus(&self) -> &[CpuPlacement] {
        &self.cpus
    }

    /// The placement of `cpu`, if it is online.
    #[must_use]
    pub fn get(&self, cpu: LogicalCpu) -> Option<&CpuPlacement> {
        self.cpus
            .binary_search_by_key(&cpu, |c| c.cpu)
            .ok()
            .map(|i| &self.cpus[i])
    }

    /// Every online CPU.
    #[must_use]
    pub fn all_cpus(&self) -> CpuSet {
        self.cpus.iter().map(|c| c.cpu).collect()
    }

    /// Package ids, ascending.
    #[must_use]
    pub fn packages(&self) -> Vec<u32> {
        sorted_unique(self.cpus.iter().map(|c| c.package))
    }

    /// L3 domain ids, ascending.
    #[must_use]
    pub fn l3_domains(&self) -> Vec<CacheDomain> {
        sorted_unique(self.cpus.iter().filter_map(|c| c.l3))
    }

    /// L2 domain ids, ascending.
    #[must_use]
    pub fn l2_domains(&self) -> Vec<CacheDomain> {
        sorted_unique(self.cpus.iter().map(|c| c.l2))
    }

    /// Package ids in the order CPUs are numbered: each the first time a CPU of it is met,
    /// CPU 0 upwards. pqos lists resource ids this way (`lib/utils.c`
    /// `pqos_cpu_get_sockets`, `pqos_cpu_get_l3cat_ids`, `pqos_cpu_get_mba_ids`,
    /// `pqos_cpu_get_l2ids`: a walk of its core table, new ids appended) and `pqos -e`
    /// without `@ids` writes, and prints a line for, each id in that order.
    #[must_use]
    pub fn packages_in_cpu_order(&self) -> Vec<u32> {
        first_seen(self.cpus.iter().map(|c| c.package))
    }

    /// L3 domain ids in the order CPUs are numbered ([`Self::packages_in_cpu_order`]): on
    /// an EPYC 9654 whose firmware numbers CCDs 0, 4, 8, 2, ... CPU by CPU, that order
    /// rather than ascending.
    ///
    /// # Examples
    /// ```
    /// use rdt_core::{CacheDomain, CpuPlacement, LogicalCpu, Topology};
    /// let at = |cpu, l3| CpuPlacement {
    ///     cpu: LogicalCpu::new(cpu),
    ///     package: 0,
    ///     core: None,
    ///     l2: CacheDomain::new(cpu),
    ///     l3: Some(CacheDomain::new(l3)),
    ///     node: 0,
    /// };
    /// let topo = Topology::from_placements(vec![at(0, 0), at(1, 4), at(2, 2), at(3, 4)]);
    /// let ids: Vec<u32> = topo.l3_domains_in_cpu_order().iter().map(|d| d.get()).collect();
    /// assert_eq!(ids, [0, 4, 2]);
    /// assert_eq!(topo.l3_domains().iter().map(|d| d.get()).collect::<Vec<_>>(), [0, 2, 4]);
    /// ```
    #[must_use]
    pub fn l3_domains_in_cpu_order(&self) -> Vec<CacheDomain> {
        first_seen(self.cpus.iter().filter_map(|c| c.l3))
    }

    /// L2 domain ids in the order CPUs are numbered ([`Self::packages_in_cpu_order`]).
    #[must_use]
    pub fn l2_domains_in_cpu_order(&self) -> Vec<CacheDomain> {
        first_seen(self.cpus.iter().map(|c| c.l2))
    }

    /// NUMA node ids, ascending.
    #[must_use]
    pub fn nodes(&self) -> Vec<u32> {
        sorted_unique(self.cpus.iter().map(|c| c.node))
    }

    /// CPUs sharing L3 instance `domain`.
    #[must_use]
    pub fn cpus_in_l3(&self, domain: CacheDomain) -> CpuSet {
        self.cpus
            .iter()
            .filter(|c| c.l3 == Some(domain))
            .map(|c| c.cpu)
            .collect()
    }

    /// CPUs sharing L2 instance `domain`.
    #[must_use]
    pub fn cpus_in_l2(&self, domain: CacheDomain) -> CpuSet {
        self.cpus
            .iter()
            .filter(|c| c.l2 == domain)
            .map(|c| c.cpu)
            .collect()
    }

    /// CPUs of package `package`.
    #[must_use]
    pub fn cpus_in_package(&self, package: u32) -> CpuSet {
        self.cpus
            .iter()
            .filter(|c| c.package == package)
            .map(|c| c.cpu)
            .collect()
    }

    /// Whether every L3 domain is a whole package (so pqos labels domains "Socket").
    #[must_use]
    pub fn l3_is_per_package(&self) -> bool {
        self.l3_domains().len() == self.packages().len()
    }
}

/// Each item the first time it occurs, in order.
fn first_seen<T: Ord + Copy>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut seen = std::collections::BTreeSet::new();
    it.filter(|x| seen.insert(*x)).collect()
}

fn sorted_unique<T: Ord>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}
