//! Which logical CPU sits in which package, L2, L3 and NUMA node.

use crate::{CacheDomain, CpuSet, LogicalCpu};

/// Placement of one logical CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuPlacement {
    /// The CPU.
    pub cpu: LogicalCpu,
    /// Physical package (socket), `topology/physical_package_id`.
    pub package: u32,
    /// Core id within the package, `topology/core_id`.
    pub core: u32,
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
        self.cpus.binary_search_by_key(&cpu, |c| c.cpu).ok().map(|i| &self.cpus[i])
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

    /// NUMA node ids, ascending.
    #[must_use]
    pub fn nodes(&self) -> Vec<u32> {
        sorted_unique(self.cpus.iter().map(|c| c.node))
    }

    /// CPUs sharing L3 instance `domain`.
    #[must_use]
    pub fn cpus_in_l3(&self, domain: CacheDomain) -> CpuSet {
        self.cpus.iter().filter(|c| c.l3 == Some(domain)).map(|c| c.cpu).collect()
    }

    /// CPUs sharing L2 instance `domain`.
    #[must_use]
    pub fn cpus_in_l2(&self, domain: CacheDomain) -> CpuSet {
        self.cpus.iter().filter(|c| c.l2 == domain).map(|c| c.cpu).collect()
    }

    /// CPUs of package `package`.
    #[must_use]
    pub fn cpus_in_package(&self, package: u32) -> CpuSet {
        self.cpus.iter().filter(|c| c.package == package).map(|c| c.cpu).collect()
    }

    /// Whether every L3 domain is a whole package (so pqos labels domains "Socket").
    #[must_use]
    pub fn l3_is_per_package(&self) -> bool {
        self.l3_domains().len() == self.packages().len()
    }
}

fn sorted_unique<T: Ord>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}
