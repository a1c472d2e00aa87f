//! The region-aware model of RDT 1.3 (pqos v26.03's MMIO interface): a **memory region**
//! (DDR, CXL, ...; the ACPI MRRM table's ranges) is an id beside the L3 domain. Memory
//! bandwidth is counted per (L3 domain, RMID, region) and throttled per (L3 domain, class,
//! region) by three controls, optimal / minimum / maximum, each a value in units of the
//! platform's control window ([`RegionOps::bw_window`]: the window means "no limit").
//!
//! Reached through [`Backend::regions`](crate::Backend::regions) on a backend that has the
//! registers (`rdt_mmio`'s MMIO backend); region limits are planned and applied as
//! [`Change::RegionMba`](crate::transaction::Change::RegionMba) steps of a
//! [`transaction`](crate::transaction), journalled and rolled back like every other change.
//!
//! # References
//! Intel RDT Architecture Specification rev 1.3, ch. 3 (region-aware MBM and MBA);
//! intel-cmt-cat v26.03 `lib/pqos.h` (`struct pqos_mba_mem_region`, `PQOS_BW_CTRL_TYPE_*`),
//! `lib/mmio_allocation.c`, `lib/mmio_monitoring.c` (read for facts).

use std::fmt;

use crate::{CacheDomain, ClassId, MonGroupId};

/// A memory region's number (MRRM's region id: 0 .. the table's maximum, at most 255).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MemRegion(pub u8);

impl fmt::Display for MemRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Which of a region's three MBA controls (pqos `PQOS_BW_CTRL_TYPE_OPT/MIN/MAX`,
/// `--alloc-opt-bw`, `--alloc-min-bw`, `--alloc-max-bw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum BwControl {
    /// The bandwidth the class should get (`MBA_OPTIMAL_BW_n`).
    Optimal,
    /// The bandwidth the class is guaranteed (`MBA_MIN_BW_n`).
    Min,
    /// The bandwidth the class may not exceed (`MBA_MAX_BW_n`).
    Max,
}

impl BwControl {
    /// All three, in pqos's order.
    pub const ALL: [Self; 3] = [Self::Optimal, Self::Min, Self::Max];

    /// pqos's short name: `opt`, `min`, `max`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Optimal => "opt",
            Self::Min => "min",
            Self::Max => "max",
        }
    }
}

impl fmt::Display for BwControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One control of one region of a class: its value in control-window units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RegionBw {
    /// The memory region.
    pub region: MemRegion,
    /// Which control.
    pub control: BwControl,
    /// The value, 0 ..= [`RegionOps::bw_window`].
    pub value: u16,
}

/// What kind of memory a region is (from the MRRM and the kernel's CXL regions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegionMemory {
    /// Ordinary DRAM.
    Ddr,
    /// CXL-attached memory.
    Cxl,
    /// Some of both, or the host does not say which (no CXL information).
    Unknown,
}

impl fmt::Display for RegionMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ddr => "DDR",
            Self::Cxl => "CXL",
            Self::Unknown => "unknown",
        })
    }
}

/// One memory region of the platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// Its id.
    pub region: MemRegion,
    /// DDR or CXL.
    pub memory: RegionMemory,
    /// Bytes of physical address space it covers (its ranges summed).
    pub bytes: u64,
}

/// A group's traffic to one memory region in one L3 domain after a poll, in bytes (counter
/// values upscaled and corrected with the table's factors; wraps handled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionValues {
    /// The L3 domain.
    pub domain: CacheDomain,
    /// The memory region.
    pub region: MemRegion,
    /// Traffic since the group started; `None` while the counter is unavailable or
    /// overflowed (the count since the last reading is not known).
    pub bytes: Option<u64>,
    /// Traffic since the previous poll (the first poll: since the start); `None` unless both
    /// readings were valid.
    pub delta_bytes: Option<u64>,
}

/// What a backend with region-aware registers does ([`Backend::regions`](crate::Backend::regions)).
///
/// Domains are L3 ids, as everywhere else; a backend maps them to its resource management
/// domains (ERDT: by the x2APIC ids of each domain's CPU agents).
pub trait RegionOps<E> {
    /// The platform's memory regions, by id.
    fn memory_regions(&self) -> &[RegionInfo];

    /// The value of an MBA control that means full bandwidth (the MARC control window).
    fn bw_window(&self) -> u16;

    /// Each L3 domain with the id firmware gives its resource management domain (ERDT
    /// RMDD domain id: pqos v26.03's `--alloc-domain-id`), ascending by L3 id.
    fn domain_ids(&self) -> Vec<(CacheDomain, u16)>;

    /// The classes of service the region controls have (ERDT's maximum CLOS): COS 0 ..
    /// this.
    fn region_classes(&self) -> u32;

    /// Every region control of `class` in L3 `domain`: three per memory region, by region
    /// then control ([`BwControl::ALL`]).
    ///
    /// # Errors
    /// No such domain or class; a register read failed.
    fn region_bandwidth(&mut self, domain: CacheDomain, class: ClassId)
    -> Result<Vec<RegionBw>, E>;

    /// Every region control of every class (COS 0 .. [`RegionOps::region_classes`]) in L3
    /// `domain`: element `c` is what [`RegionOps::region_bandwidth`] gives for COS `c`. The
    /// default asks class by class; a backend whose registers allow it reads each control's
    /// classes together (MMIO: the classes of one control are consecutive registers, read
    /// in one access).
    ///
    /// # Errors
    /// As [`RegionOps::region_bandwidth`].
    fn region_bandwidth_all(&mut self, domain: CacheDomain) -> Result<Vec<Vec<RegionBw>>, E> {
        (0..self.region_classes())
            .map(|c| self.region_bandwidth(domain, ClassId::new(c)))
            .collect()
    }

    /// Sets region controls of `class` in L3 `domain`, all checked first (region, value
    /// within the window, class, domain; nothing is written when one is invalid), then
    /// written in the order given, each register once: the hardware keeps four regions'
    /// fields of a control in one register, which is read once, given every value of this
    /// call that falls in it (a later value of the same control wins), and written once if
    /// it changed.
    ///
    /// # Errors
    /// An invalid value ([`crate::RequestError`]); a register write failed (those before it
    /// stay written: a transaction undoes them).
    fn set_region_bandwidth(
        &mut self,
        domain: CacheDomain,
        class: ClassId,
        values: &[RegionBw],
    ) -> Result<(), E>;

    /// The region traffic of `group` from the last poll, by L3 domain then region; `None` for
    /// an unknown group or one that counts no memory bandwidth.
    fn region_values(&self, group: MonGroupId) -> Option<&[RegionValues]>;
}
