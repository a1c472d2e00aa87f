//! The ACPI MRRM table (Memory Range and Region Mapping): which physical address ranges
//! belong to which memory region, the id that region-aware MBM counters and MBA controls are
//! indexed by. Whether a region is DDR or CXL memory is not in the table: [`classify`] tells
//! by the CXL regions the kernel has mapped (`/sys/bus/cxl/devices/regionN`), as pqos v26.03
//! does (`lib/cxl.c`).
//!
//! Layout (little endian): ACPI header (36), max memory regions u8 @36, flags u8 @37
//! (bit 0: the OS assigns region ids), reserved 26; then memory range entries of at least
//! 32 bytes: `type: u16` (0) @0, `length: u16` @2, base u64 @8, length u64 @16, region id
//! flags u16 @24 (bit 0 local id valid, bit 1 remote id valid), local region id u8 @26,
//! remote region id u8 @27; with OS-assigned ids the region id programming registers follow.
//!
//! # References
//! - Intel RDT Architecture Specification rev 1.3, ch. 4, MRRM.
//! - ACPICA `include/acpi/actbl1.h` (`struct acpi_table_mrrm`, `acpi_mrrm_mem_range_entry`);
//!   Linux `drivers/acpi/acpi_mrrm.c` (`/sys/firmware/acpi/memory_ranges/`, since 6.15).
//! - intel-cmt-cat v26.03 `lib/mrrm.c`, `lib/mem_regions.c`, `lib/cxl.c` (read for facts).

use std::collections::BTreeMap;
use std::fmt;

use crate::acpi::{self, AcpiHeader, Bytes, Problem, TableError};

const TABLE: &str = "MRRM";

/// The MRRM's fixed part, in bytes.
pub const MRRM_FIXED_LEN: usize = 64;
/// A memory range entry without programming registers, in bytes.
pub const RANGE_LEN: usize = 32;
/// MRRM flags bit 0: region ids are assigned by the OS through programming registers.
pub const FLAG_OS_ASSIGNS: u8 = 1 << 0;
/// Range flags bit 0: the local region id is valid.
pub const RANGE_LOCAL_VALID: u16 = 1 << 0;
/// Range flags bit 1: the remote region id is valid.
pub const RANGE_REMOTE_VALID: u16 = 1 << 1;

/// A memory region id: the index of region-aware MBM counters and MBA fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(u8);

impl RegionId {
    /// The region with number `id`.
    #[must_use]
    pub const fn new(id: u8) -> Self {
        Self(id)
    }

    /// The number.
    #[must_use]
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for RegionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One memory range entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRange {
    /// Byte offset in the table.
    pub offset: usize,
    /// Physical base address.
    pub base: u64,
    /// Length in bytes (never 0).
    pub length: u64,
    /// The region of accesses from agents local to the range (`None`: not valid).
    pub local: Option<RegionId>,
    /// The region of accesses from remote agents.
    pub remote: Option<RegionId>,
    /// The region id programming registers (only with [`FLAG_OS_ASSIGNS`]), uninterpreted.
    pub programming_registers: Vec<u8>,
}

impl MemoryRange {
    /// One past the last address.
    #[must_use]
    pub const fn end(&self) -> u64 {
        self.base + self.length
    }
}

/// A parsed MRRM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mrrm {
    /// The ACPI header.
    pub header: AcpiHeader,
    /// Memory regions the platform supports (region ids are below this).
    pub max_regions: u8,
    /// Flags ([`FLAG_OS_ASSIGNS`]).
    pub flags: u8,
    /// The ranges, sorted by base address.
    pub ranges: Vec<MemoryRange>,
}

impl Mrrm {
    /// Parses and checks an MRRM: entry lengths within the table, at least one range, no
    /// empty, wrapping or overlapping ranges, region ids below the maximum.
    ///
    /// # Errors
    /// A [`TableError`] naming the entry and its byte offset.
    #[allow(clippy::too_many_lines)] // one walk over the entries, each rule where it applies
    pub fn parse(data: &[u8]) -> Result<Self, TableError> {
        let header = acpi::parse_header(TABLE, data, MRRM_FIXED_LEN)?;
        let b = Bytes::new(TABLE, data);
        let max_regions = b.u8("header", 36)?;
        let flags = b.u8("header", 37)?;
        let area = b.slice("header", MRRM_FIXED_LEN, data.len() - MRRM_FIXED_LEN)?;
        let n = "memory range entry";
        let mut ranges = Vec::new();
        let mut at = 0;
        while at < area.len() {
            let head = area.slice(n, at, 4)?;
            let kind = head.u16(n, 0)?;
            let len = usize::from(head.u16(n, 2)?);
            if kind != 0 {
                return Err(area.error(
                    n,
                    at,
                    Problem::Type {
                        found: kind,
                        expected: "a memory range entry (type 0)",
                    },
                ));
            }
            if len < RANGE_LEN {
                return Err(area.error(
                    n,
                    at + 2,
                    Problem::TooShort {
                        length: len as u64,
                        min: RANGE_LEN as u64,
                    },
                ));
            }
            let e = area.slice(n, at, len)?;
            let base = e.u64(n, 8)?;
            let length = e.u64(n, 16)?;
            if length == 0 || base.checked_add(length).is_none() {
                return Err(e.error(
                    n,
                    16,
                    Problem::Value {
                        field: "range length",
                        value: length,
                        rule: "a range is not empty and ends below 2^64",
                    },
                ));
            }
            let id_flags = e.u16(n, 24)?;
            let region = |valid: u16, at: usize| -> Result<Option<RegionId>, TableError> {
                if id_flags & valid == 0 {
                    return Ok(None);
                }
                let id = e.u8(n, at)?;
                if id >= max_regions {
                    return Err(e.error(
                        n,
                        at,
                        Problem::Value {
                            field: "region id",
                            value: id.into(),
                            rule: "must be below the table's max memory regions",
                        },
                    ));
                }
                Ok(Some(RegionId(id)))
            };
            let local = region(RANGE_LOCAL_VALID, 26)?;
            let remote = region(RANGE_REMOTE_VALID, 27)?;
            let programming_registers = if flags & FLAG_OS_ASSIGNS == 0 {
                Vec::new()
            } else {
                e.as_slice()[RANGE_LEN..].to_vec()
            };
            ranges.push(MemoryRange {
                offset: e.base(),
                base,
                length,
                local,
                remote,
                programming_registers,
            });
            at += len;
        }
        if ranges.is_empty() {
            return Err(b.error(
                n,
                MRRM_FIXED_LEN,
                Problem::Truncated {
                    need: RANGE_LEN as u64,
                    have: 0,
                },
            ));
        }
        ranges.sort_by_key(|r| r.base);
        for w in ranges.windows(2) {
            if w[1].base < w[0].end() {
                return Err(b.error(
                    n,
                    w[1].offset,
                    Problem::Overlap {
                        other: w[0].offset,
                        what: "the address range",
                    },
                ));
            }
        }
        Ok(Self {
            header,
            max_regions,
            flags,
            ranges,
        })
    }

    /// The region ids the ranges name (local or remote), ascending.
    #[must_use]
    pub fn region_ids(&self) -> Vec<RegionId> {
        let mut ids: Vec<_> = self
            .ranges
            .iter()
            .flat_map(|r| [r.local, r.remote])
            .flatten()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// What memory a region is: DDR unless every range lies inside a CXL region the kernel
/// maps, `Unknown` with some of both or no CXL information on the host (no `/sys/bus/cxl`).
pub use rdt_core::region::RegionMemory;

/// A memory region: its id, its ranges (those whose local region it is) and its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRegion {
    /// The id.
    pub id: RegionId,
    /// Its local ranges as (base, length), ascending.
    pub ranges: Vec<(u64, u64)>,
    /// DDR or CXL.
    pub kind: RegionMemory,
}

/// The regions of `mrrm` (by local region id) with their kind: a region whose every range
/// lies inside one of `cxl` (base, size) windows is CXL, one with no range in any is DDR.
/// `cxl` is `None` on a host without CXL information: then every region is
/// [`RegionMemory::Unknown`] unless `mrrm` has a single region (all memory is then DDR, the
/// specification's default of one region covering all of it).
#[must_use]
pub fn classify(mrrm: &Mrrm, cxl: Option<&[(u64, u64)]>) -> Vec<MemoryRegion> {
    let mut by_id: BTreeMap<RegionId, Vec<(u64, u64)>> = BTreeMap::new();
    for r in &mrrm.ranges {
        if let Some(id) = r.local {
            by_id.entry(id).or_default().push((r.base, r.length));
        }
    }
    let single = by_id.len() == 1;
    by_id
        .into_iter()
        .map(|(id, ranges)| {
            let kind = match cxl {
                None if single => RegionMemory::Ddr,
                None => RegionMemory::Unknown,
                Some(windows) => {
                    let inside = |&(b, l): &(u64, u64)| {
                        windows.iter().any(|&(wb, ws)| {
                            b >= wb && b.saturating_add(l) <= wb.saturating_add(ws)
                        })
                    };
                    let touches = |&(b, l): &(u64, u64)| {
                        windows
                            .iter()
                            .any(|&(wb, ws)| b < wb.saturating_add(ws) && wb < b.saturating_add(l))
                    };
                    if ranges.iter().all(inside) {
                        RegionMemory::Cxl
                    } else if !ranges.iter().any(touches) {
                        RegionMemory::Ddr
                    } else {
                        RegionMemory::Unknown
                    }
                }
            };
            MemoryRegion { id, ranges, kind }
        })
        .collect()
}
