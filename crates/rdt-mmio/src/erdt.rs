//! The ACPI ERDT table (Enhanced RDT): the resource management domains of an RDT 1.3
//! platform and, for each, the agents in it (CPUs by x2APIC id, devices by PCI path) and the
//! MMIO register blocks that monitor and control them.
//!
//! Layout (all little endian, byte offsets from the start of each structure):
//!
//! | structure | fixed bytes | fields |
//! |---|---|---|
//! | ERDT | 64 | ACPI header (36), max CLOS u32 @36, reserved 24 |
//! | RMDD (type 0) | 34 | flags u16 @4, I/O L3 slices u16 @6, sets u8 @8, ways u8 @9, domain id u16 @18, max RMID u32 @20, control base u64 @24, control size u16 @32 (4 KiB pages); then its sub-structures up to its length |
//! | CACD (1) | 8 | domain id u16 @6, x2APIC ids u32 from @8 |
//! | DACD (2) | 8 | domain id u16 @6, DASE entries from @8: type u8, length u8, segment u16 @2, start bus u8 @5, path (device, function) byte pairs from @6 |
//! | CMRC (3) | 48 | flags u32 @8, index fn u8 @12, base u64 @24, size u32 @32 (pages), clump size u16 @36, clump stride u16 @38, upscaling u64 @40 |
//! | MMRC (4) | 56 | flags u32 @8, index fn u8 @12, base u64 @24, size u32 @32, counter width u8 @36, upscaling u64 @37, correction list length u32 @52, list u32s from @56 |
//! | MARC (5) | 48 | flags u16 @6, index fn u8 @8, optimal / minimum / maximum bases u64 @16/@24/@32, size u32 @40, control window u32 @44 |
//! | CARC (6), IBAD (9) | 4 | header only in rev 1.3 (kept as present, not interpreted) |
//! | CMRD (7) | 48 | flags u32 @8, index fn u8 @12, base u64 @24, size u32 @32, register offset u16 @36, clump size u16 @38, upscaling u64 @40 |
//! | IBRD (8) | 64 | flags u32 @8, index fn u8 @12, base u64 @24, size u32 @32, total / miss offsets u16 @36/@38, clump sizes u16 @40/@42, counter width u8 @51, upscaling u64 @52, correction list length u32 @60, list from @64 |
//! | CARD (10) | 40 | flags u32 @8, contention mask u32 @12, index fn u8 @16, base u64 @24, size u32 @32, CAT register offset u16 @36, CAT block size u16 @38 |
//!
//! Every sub-structure starts with `type: u16, length: u16`. RMDDs follow the ERDT header;
//! the other sub-structures lie inside their RMDD's length (as ACPICA and Linux's
//! `arch/x86/kernel/cpu/resctrl/erdt.c` walk them).
//!
//! # References
//! - Intel RDT Architecture Specification rev 1.3, ch. 4 "ACPI Tables", ERDT.
//! - ACPICA `include/acpi/actbl2.h` (`struct acpi_table_erdt`, `acpi_erdt_*`).
//! - intel-cmt-cat v26.03 `lib/erdt.h`, `lib/erdt.c` (read for facts).

use std::collections::BTreeMap;

use crate::acpi::{self, AcpiHeader, Bytes, Problem, TableError};
use crate::regs;

const TABLE: &str = "ERDT";

/// Length of the ERDT's fixed part (header, max CLOS, reserved), in bytes.
pub const ERDT_FIXED_LEN: usize = 64;
/// Fixed part of an RMDD, in bytes.
pub const RMDD_LEN: usize = 34;
/// Fixed part of a CACD or DACD, in bytes.
pub const CACD_LEN: usize = 8;
/// CMRC, in bytes.
pub const CMRC_LEN: usize = 48;
/// Fixed part of an MMRC (before its correction factors), in bytes.
pub const MMRC_LEN: usize = 56;
/// MARC, in bytes.
pub const MARC_LEN: usize = 48;
/// CMRD, in bytes.
pub const CMRD_LEN: usize = 48;
/// Fixed part of an IBRD (before its correction factors), in bytes.
pub const IBRD_LEN: usize = 64;
/// CARD, in bytes.
pub const CARD_LEN: usize = 40;
/// Fixed part of a device agent scope entry (DASE), in bytes.
pub const DASE_LEN: usize = 6;

/// Sub-structure types (RDT spec rev 1.3, ERDT; ACPICA `enum acpi_erdt_type`).
#[allow(missing_docs)]
pub mod kind {
    pub const RMDD: u16 = 0;
    pub const CACD: u16 = 1;
    pub const DACD: u16 = 2;
    pub const CMRC: u16 = 3;
    pub const MMRC: u16 = 4;
    pub const MARC: u16 = 5;
    pub const CARC: u16 = 6;
    pub const CMRD: u16 = 7;
    pub const IBRD: u16 = 8;
    pub const IBAD: u16 = 9;
    pub const CARD: u16 = 10;
}

/// RMDD flags bit 0: the domain is an L3 cache of CPU agents.
pub const RMDD_CPU_L3: u16 = 1 << 0;
/// RMDD flags bit 1: the domain is an L3 cache of I/O (device) agents.
pub const RMDD_IO_L3: u16 = 1 << 1;

/// CARD flags bit 0: the contention bitmask is valid.
pub const CARD_CONTENTION_VALID: u32 = 1 << 0;
/// CARD flags bit 1: non-contiguous bitmasks are supported.
pub const CARD_NON_CONTIGUOUS: u32 = 1 << 1;
/// CARD flags bit 2: a zero-length bitmask is allowed.
pub const CARD_ZERO_LENGTH: u32 = 1 << 2;

/// The one register indexing function defined by rev 1.3.
pub const INDEX_FN_V1: u8 = 1;

/// A block of MMIO registers at a physical address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegisterBlock {
    /// Physical address of the first byte.
    pub base: u64,
    /// Size in 4 KiB pages.
    pub pages: u32,
}

impl RegisterBlock {
    /// Size in bytes.
    #[must_use]
    pub const fn len(&self) -> u64 {
        self.pages as u64 * regs::PAGE
    }

    /// Whether the block is empty (0 pages; the parser refuses those).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.pages == 0
    }

    /// Physical address of the 8-byte register at byte `offset` of the block, `None` when it
    /// does not lie wholly inside the block.
    #[must_use]
    pub fn register(&self, offset: u64) -> Option<u64> {
        let end = offset.checked_add(regs::REG_BYTES)?;
        (end <= self.len()).then(|| self.base + offset)
    }

    /// Whether the 8-byte register at physical address `addr` lies inside the block.
    #[must_use]
    pub fn contains(&self, addr: u64) -> bool {
        addr.checked_sub(self.base)
            .is_some_and(|off| self.register(off).is_some())
    }
}

/// Per-RMID correction of a bandwidth counter: `corrected = raw × factor >> 16` (a 16.16
/// fixed-point factor; 0 means no correction), as Linux's `apply_correction_factor`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum CorrectionFactors {
    /// List length 0: counters are used as they are.
    #[default]
    None,
    /// List length 1: one factor for every RMID.
    Single(u32),
    /// List length max RMID + 1: one factor per RMID.
    PerRmid(Vec<u32>),
}

impl CorrectionFactors {
    /// The factor of `rmid` (0 = none).
    #[must_use]
    pub fn factor(&self, rmid: u32) -> u32 {
        match self {
            Self::None => 0,
            Self::Single(f) => *f,
            Self::PerRmid(v) => usize::try_from(rmid)
                .ok()
                .and_then(|i| v.get(i))
                .copied()
                .unwrap_or(0),
        }
    }

    /// `count` corrected for `rmid`: `count × factor >> 16`, or `count` without a factor.
    #[must_use]
    pub fn apply(&self, rmid: u32, count: u64) -> u64 {
        match self.factor(rmid) {
            0 => count,
            f => u64::try_from((u128::from(count) * u128::from(f)) >> 16).unwrap_or(u64::MAX),
        }
    }
}

/// CMRC: LLC occupancy registers of the domain's CPU agents (`L3_CMT_RMID_n`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmrc {
    /// Byte offset in the table.
    pub offset: usize,
    /// Flags (reserved in rev 1.3).
    pub flags: u32,
    /// Register indexing function version.
    pub index_fn: u8,
    /// The register block.
    pub block: RegisterBlock,
    /// RMIDs per clump of consecutive registers (never 0).
    pub clump_size: u16,
    /// Bytes from one clump to the next.
    pub clump_stride: u16,
    /// Bytes per counter unit.
    pub upscaling: u64,
}

impl Cmrc {
    /// Physical address of `rmid`'s occupancy register, `None` outside the block.
    #[must_use]
    pub fn address(&self, rmid: u32) -> Option<u64> {
        self.block
            .register(regs::cmt_offset(rmid, self.clump_size, self.clump_stride)?)
    }
}

/// MMRC: region-aware memory bandwidth counters of the domain's CPU agents
/// (`MBM_REGION_m_RMID_n`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mmrc {
    /// Byte offset in the table.
    pub offset: usize,
    /// Flags.
    pub flags: u32,
    /// Register indexing function version.
    pub index_fn: u8,
    /// The register block.
    pub block: RegisterBlock,
    /// Counter width in bits (1..=62): counts wrap at 2^width.
    pub counter_width: u8,
    /// Bytes per counter unit.
    pub upscaling: u64,
    /// Correction factors.
    pub correction: CorrectionFactors,
}

impl Mmrc {
    /// Physical address of the counter of `rmid` in memory region `region`, `None` outside
    /// the block.
    #[must_use]
    pub fn address(&self, rmid: u32, region: u8) -> Option<u64> {
        self.block.register(regs::mbm_offset(rmid, region))
    }
}

/// Which of the three MBA control registers of a MARC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MbaControl {
    /// `MBA_OPTIMAL_BW_n`: the bandwidth the class should get.
    Optimal,
    /// `MBA_MIN_BW_n`: the bandwidth the class is guaranteed.
    Min,
    /// `MBA_MAX_BW_n`: the bandwidth the class may not exceed.
    Max,
}

impl MbaControl {
    /// All three, in table order.
    pub const ALL: [Self; 3] = [Self::Optimal, Self::Min, Self::Max];
}

/// MARC: region-aware memory bandwidth allocation registers of the domain's CPU agents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marc {
    /// Byte offset in the table.
    pub offset: usize,
    /// Flags.
    pub flags: u16,
    /// Register indexing function version.
    pub index_fn: u8,
    /// `MBA_OPTIMAL_BW_n` block.
    pub optimal: RegisterBlock,
    /// `MBA_MIN_BW_n` block.
    pub min: RegisterBlock,
    /// `MBA_MAX_BW_n` block.
    pub max: RegisterBlock,
    /// The bandwidth control window (the value that means "all of a region's bandwidth").
    pub control_window: u32,
}

impl Marc {
    /// The block of `control`.
    #[must_use]
    pub const fn block(&self, control: MbaControl) -> RegisterBlock {
        match control {
            MbaControl::Optimal => self.optimal,
            MbaControl::Min => self.min,
            MbaControl::Max => self.max,
        }
    }

    /// Physical address of the register holding class `clos`'s `control` field for memory
    /// region `region` (four regions per register, [`regs::mba_field`]), `None` outside the
    /// block.
    #[must_use]
    pub fn address(&self, control: MbaControl, region: u8, clos: u32) -> Option<u64> {
        self.block(control).register(regs::mba_offset(region, clos))
    }
}

/// CMRD: I/O LLC occupancy registers of the domain's device agents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmrd {
    /// Byte offset in the table.
    pub offset: usize,
    /// Flags.
    pub flags: u32,
    /// Register indexing function version.
    pub index_fn: u8,
    /// The register block.
    pub block: RegisterBlock,
    /// Byte offset of the occupancy registers in the block.
    pub register_offset: u16,
    /// RMIDs per clump.
    pub clump_size: u16,
    /// Bytes per counter unit.
    pub upscaling: u64,
}

/// IBRD: I/O bandwidth counters of the domain's device agents (total and LLC-miss).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ibrd {
    /// Byte offset in the table.
    pub offset: usize,
    /// Flags.
    pub flags: u32,
    /// Register indexing function version.
    pub index_fn: u8,
    /// The register block.
    pub block: RegisterBlock,
    /// Byte offset of the `TOTAL_IO_BW_RMID_n` registers in the block.
    pub total_offset: u16,
    /// Byte offset of the `IO_MISS_BW_RMID_n` registers.
    pub miss_offset: u16,
    /// RMIDs per clump of total-bandwidth registers.
    pub total_clump_size: u16,
    /// RMIDs per clump of miss-bandwidth registers.
    pub miss_clump_size: u16,
    /// Counter width in bits (1..=62).
    pub counter_width: u8,
    /// Bytes per counter unit.
    pub upscaling: u64,
    /// Correction factors.
    pub correction: CorrectionFactors,
}

/// CARD: I/O LLC allocation (CAT) registers of the domain's device agents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    /// Byte offset in the table.
    pub offset: usize,
    /// Flags ([`CARD_CONTENTION_VALID`], [`CARD_NON_CONTIGUOUS`], [`CARD_ZERO_LENGTH`]).
    pub flags: u32,
    /// Ways shared with other agents (valid when [`CARD_CONTENTION_VALID`]).
    pub contention_mask: u32,
    /// Register indexing function version.
    pub index_fn: u8,
    /// The register block.
    pub block: RegisterBlock,
    /// Byte offset of the I/O CAT registers in the block.
    pub cat_offset: u16,
    /// Size of one CAT register block, in bytes.
    pub cat_block_size: u16,
}

/// A PCI device or bridge in a DACD (a device agent scope entry, DASE).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceScope {
    /// Byte offset in the table.
    pub offset: usize,
    /// Entry type (1: PCI endpoint, 2: PCI sub-hierarchy, as DMAR's device scope).
    pub kind: u8,
    /// PCI segment.
    pub segment: u16,
    /// Bus the path starts at.
    pub start_bus: u8,
    /// The path: (device, function) per hop from the host bridge.
    pub path: Vec<(u8, u8)>,
}

/// One resource management domain (an RMDD with its sub-structures).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    /// Byte offset of the RMDD in the table.
    pub offset: usize,
    /// RMDD flags ([`RMDD_CPU_L3`], [`RMDD_IO_L3`]).
    pub flags: u16,
    /// Domain id (unique in the table).
    pub id: u16,
    /// Highest RMID of the domain.
    pub max_rmid: u32,
    /// Slices of the I/O L3 cache.
    pub io_l3_slices: u16,
    /// Sets of the I/O L3 cache.
    pub io_l3_sets: u8,
    /// Ways of the I/O L3 cache.
    pub io_l3_ways: u8,
    /// Control registers (`RDT_CTRL` at its base).
    pub control: RegisterBlock,
    /// x2APIC ids of the CPU agents (from the domain's CACDs), in table order.
    pub cpu_agents: Vec<u32>,
    /// Device agents (from the domain's DACDs).
    pub device_agents: Vec<DeviceScope>,
    /// LLC occupancy of CPU agents.
    pub cmrc: Option<Cmrc>,
    /// Region-aware memory bandwidth monitoring of CPU agents.
    pub mmrc: Option<Mmrc>,
    /// Region-aware memory bandwidth allocation of CPU agents.
    pub marc: Option<Marc>,
    /// Offset of a CARC (header only in rev 1.3).
    pub carc: Option<usize>,
    /// I/O LLC occupancy.
    pub cmrd: Option<Cmrd>,
    /// I/O bandwidth monitoring.
    pub ibrd: Option<Ibrd>,
    /// Offset of an IBAD (header only in rev 1.3).
    pub ibad: Option<usize>,
    /// I/O LLC allocation.
    pub card: Option<Card>,
}

impl Domain {
    /// Whether the domain is an L3 of CPU agents.
    #[must_use]
    pub const fn is_cpu_l3(&self) -> bool {
        self.flags & RMDD_CPU_L3 != 0
    }

    /// Whether the domain is an L3 of I/O agents.
    #[must_use]
    pub const fn is_io_l3(&self) -> bool {
        self.flags & RMDD_IO_L3 != 0
    }

    /// Every register block of the domain with its name, for dumps and access checks.
    #[must_use]
    pub fn register_blocks(&self) -> Vec<(&'static str, RegisterBlock)> {
        let mut v = vec![("RMDD control", self.control)];
        if let Some(c) = &self.cmrc {
            v.push(("CMRC", c.block));
        }
        if let Some(m) = &self.mmrc {
            v.push(("MMRC", m.block));
        }
        if let Some(m) = &self.marc {
            v.push(("MARC optimal", m.optimal));
            v.push(("MARC min", m.min));
            v.push(("MARC max", m.max));
        }
        if let Some(c) = &self.cmrd {
            v.push(("CMRD", c.block));
        }
        if let Some(i) = &self.ibrd {
            v.push(("IBRD", i.block));
        }
        if let Some(c) = &self.card {
            v.push(("CARD", c.block));
        }
        v
    }
}

/// A parsed ERDT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Erdt {
    /// The ACPI header.
    pub header: AcpiHeader,
    /// Classes of service of the platform (COS 0 ..= max_clos - 1).
    pub max_clos: u32,
    /// The domains, in table order.
    pub domains: Vec<Domain>,
}

impl Erdt {
    /// Parses and checks an ERDT: every length, count and offset against the bytes there are,
    /// every register block against the RMIDs and classes it must hold, domain ids and CPU
    /// agents unique across domains.
    ///
    /// # Errors
    /// A [`TableError`] naming the sub-structure and its byte offset.
    pub fn parse(data: &[u8]) -> Result<Self, TableError> {
        let header = acpi::parse_header(TABLE, data, ERDT_FIXED_LEN)?;
        let b = Bytes::new(TABLE, data);
        let max_clos = b.u32("header", 36)?;
        let area = b.slice("header", ERDT_FIXED_LEN, data.len() - ERDT_FIXED_LEN)?;
        let mut domains: Vec<Domain> = Vec::new();
        let mut ids = BTreeMap::new();
        let mut cpus = BTreeMap::new();
        for sub in acpi::sub_tables(area, "ERDT") {
            let sub = sub?;
            match sub.kind {
                kind::RMDD => {
                    let d = parse_rmdd(sub.bytes, max_clos)?;
                    if let Some(first) = ids.insert(d.id, d.offset) {
                        return Err(b.error(
                            "RMDD",
                            d.offset + 18,
                            Problem::Duplicate {
                                what: format!("domain id {}", d.id),
                                first,
                            },
                        ));
                    }
                    for &x2apic in &d.cpu_agents {
                        if let Some(first) = cpus.insert(x2apic, d.offset) {
                            return Err(b.error(
                                "CACD",
                                d.offset,
                                Problem::Duplicate {
                                    what: format!("CPU agent x2APIC id {x2apic:#x}"),
                                    first,
                                },
                            ));
                        }
                    }
                    domains.push(d);
                }
                1..=10 => {
                    return Err(sub.bytes.error(
                        acpi::erdt_type_name(sub.kind),
                        0,
                        Problem::Type {
                            found: sub.kind,
                            expected: "an RMDD (other sub-structures belong inside one)",
                        },
                    ));
                }
                // reserved types: skipped, their length already checked
                _ => {}
            }
        }
        Ok(Self {
            header,
            max_clos,
            domains,
        })
    }

    /// The domain with id `id`.
    #[must_use]
    pub fn domain(&self, id: u16) -> Option<&Domain> {
        self.domains.iter().find(|d| d.id == id)
    }

    /// The domain whose CPU agents include x2APIC id `x2apic`.
    #[must_use]
    pub fn domain_of_cpu(&self, x2apic: u32) -> Option<&Domain> {
        self.domains.iter().find(|d| d.cpu_agents.contains(&x2apic))
    }
}

fn register_block(
    b: &Bytes<'_>,
    structure: &'static str,
    base_at: usize,
    pages: u32,
) -> Result<RegisterBlock, TableError> {
    let base = b.u64(structure, base_at)?;
    let block = RegisterBlock { base, pages };
    if pages == 0 {
        return Err(b.error(
            structure,
            0,
            Problem::Value {
                field: "register block size",
                value: 0,
                rule: "a register block has at least one 4 KiB page",
            },
        ));
    }
    if base.checked_add(block.len()).is_none() || !base.is_multiple_of(regs::REG_BYTES) {
        return Err(b.error(
            structure,
            base_at,
            Problem::Value {
                field: "register block base",
                value: base,
                rule: "the block must be 8-byte aligned and end below 2^64",
            },
        ));
    }
    Ok(block)
}

fn fixed<'a>(sub: Bytes<'a>, name: &'static str, min: usize) -> Result<Bytes<'a>, TableError> {
    if sub.len() < min {
        return Err(sub.error(
            name,
            2,
            Problem::TooShort {
                length: sub.len() as u64,
                min: min as u64,
            },
        ));
    }
    Ok(sub)
}

fn once<T>(
    slot: Option<&T>,
    first: Option<usize>,
    sub: &Bytes<'_>,
    name: &'static str,
) -> Result<(), TableError> {
    match (slot, first) {
        (Some(_), Some(first)) => Err(sub.error(
            name,
            0,
            Problem::Duplicate {
                what: format!("{name} in one RMDD"),
                first,
            },
        )),
        _ => Ok(()),
    }
}

fn value_err(
    b: &Bytes<'_>,
    structure: &'static str,
    at: usize,
    field: &'static str,
    value: u64,
    rule: &'static str,
) -> TableError {
    b.error(structure, at, Problem::Value { field, value, rule })
}

// One arm per sub-structure type, in the table's order; r = the RMDD, s = a sub-structure,
// n = the structure name errors carry.
#[allow(clippy::too_many_lines, clippy::many_single_char_names)]
fn parse_rmdd(r: Bytes<'_>, max_clos: u32) -> Result<Domain, TableError> {
    let r = fixed(r, "RMDD", RMDD_LEN)?;
    let n = "RMDD";
    let id = r.u16(n, 18)?;
    let max_rmid = r.u32(n, 20)?;
    let control = register_block(&r, n, 24, u32::from(r.u16(n, 32)?))?;
    let mut d = Domain {
        offset: r.base(),
        flags: r.u16(n, 4)?,
        id,
        max_rmid,
        io_l3_slices: r.u16(n, 6)?,
        io_l3_sets: r.u8(n, 8)?,
        io_l3_ways: r.u8(n, 9)?,
        control,
        cpu_agents: Vec::new(),
        device_agents: Vec::new(),
        cmrc: None,
        mmrc: None,
        marc: None,
        carc: None,
        cmrd: None,
        ibrd: None,
        ibad: None,
        card: None,
    };
    let children = r.slice(n, RMDD_LEN, r.len() - RMDD_LEN)?;
    let mut offsets: BTreeMap<u16, usize> = BTreeMap::new();
    for sub in acpi::sub_tables(children, n) {
        let sub = sub?;
        let s = sub.bytes;
        let name = acpi::erdt_type_name(sub.kind);
        let first = offsets.get(&sub.kind).copied();
        match sub.kind {
            kind::RMDD => {
                return Err(s.error(
                    name,
                    0,
                    Problem::Type {
                        found: sub.kind,
                        expected: "a sub-structure of an RMDD (RMDDs do not nest)",
                    },
                ));
            }
            kind::CACD | kind::DACD => {
                let s = fixed(s, name, CACD_LEN)?;
                let domain = s.u16(name, 6)?;
                if domain != id {
                    return Err(value_err(
                        &s,
                        name,
                        6,
                        "domain id",
                        domain.into(),
                        "must be its RMDD's domain id",
                    ));
                }
                if sub.kind == kind::CACD {
                    let ids = s.len() - CACD_LEN;
                    if !ids.is_multiple_of(4) {
                        return Err(s.error(
                            name,
                            2,
                            Problem::BadLength {
                                length: s.len() as u64,
                                rule: "a CACD is 8 bytes and whole 4-byte x2APIC ids",
                            },
                        ));
                    }
                    for i in 0..ids / 4 {
                        d.cpu_agents.push(s.u32(name, CACD_LEN + 4 * i)?);
                    }
                } else {
                    parse_dases(&s, &mut d.device_agents)?;
                }
            }
            kind::CMRC => {
                once(d.cmrc.as_ref(), first, &s, name)?;
                let s = fixed(s, name, CMRC_LEN)?;
                let clump_size = s.u16(name, 36)?;
                let clump_stride = s.u16(name, 38)?;
                if clump_size == 0 {
                    return Err(value_err(
                        &s,
                        name,
                        36,
                        "clump size",
                        0,
                        "a clump holds at least one RMID",
                    ));
                }
                if clump_size > 1 && u32::from(clump_stride) < u32::from(clump_size) * 8 {
                    return Err(value_err(
                        &s,
                        name,
                        38,
                        "clump stride",
                        clump_stride.into(),
                        "clumps of 8-byte registers may not overlap",
                    ));
                }
                let c = Cmrc {
                    offset: s.base(),
                    flags: s.u32(name, 8)?,
                    index_fn: s.u8(name, 12)?,
                    block: register_block(&s, name, 24, s.u32(name, 32)?)?,
                    clump_size,
                    clump_stride,
                    upscaling: s.u64(name, 40)?,
                };
                if c.address(max_rmid).is_none() {
                    return Err(value_err(
                        &s,
                        name,
                        32,
                        "register block size",
                        c.block.pages.into(),
                        "the register of the highest RMID lies outside the block",
                    ));
                }
                d.cmrc = Some(c);
            }
            kind::MMRC => {
                once(d.mmrc.as_ref(), first, &s, name)?;
                let s = fixed(s, name, MMRC_LEN)?;
                let counter_width = s.u8(name, 36)?;
                check_width(&s, name, 36, counter_width)?;
                let correction = correction_factors(&s, name, 52, MMRC_LEN, max_rmid)?;
                let m = Mmrc {
                    offset: s.base(),
                    flags: s.u32(name, 8)?,
                    index_fn: s.u8(name, 12)?,
                    block: register_block(&s, name, 24, s.u32(name, 32)?)?,
                    counter_width,
                    upscaling: s.u64(name, 37)?,
                    correction,
                };
                if m.address(max_rmid, 0).is_none() {
                    return Err(value_err(
                        &s,
                        name,
                        32,
                        "register block size",
                        m.block.pages.into(),
                        "the counter of the highest RMID lies outside the block",
                    ));
                }
                d.mmrc = Some(m);
            }
            kind::MARC => {
                once(d.marc.as_ref(), first, &s, name)?;
                let s = fixed(s, name, MARC_LEN)?;
                let pages = s.u32(name, 40)?;
                let m = Marc {
                    offset: s.base(),
                    flags: s.u16(name, 6)?,
                    index_fn: s.u8(name, 8)?,
                    optimal: register_block(&s, name, 16, pages)?,
                    min: register_block(&s, name, 24, pages)?,
                    max: register_block(&s, name, 32, pages)?,
                    control_window: s.u32(name, 44)?,
                };
                if max_clos > 0 && m.address(MbaControl::Optimal, 0, max_clos - 1).is_none() {
                    return Err(value_err(
                        &s,
                        name,
                        40,
                        "register block size",
                        pages.into(),
                        "the register of the highest class of service lies outside the block",
                    ));
                }
                d.marc = Some(m);
            }
            kind::CARC => {
                once(d.carc.as_ref(), first, &s, name)?;
                d.carc = Some(s.base());
            }
            kind::IBAD => {
                once(d.ibad.as_ref(), first, &s, name)?;
                d.ibad = Some(s.base());
            }
            kind::CMRD => {
                once(d.cmrd.as_ref(), first, &s, name)?;
                let s = fixed(s, name, CMRD_LEN)?;
                d.cmrd = Some(Cmrd {
                    offset: s.base(),
                    flags: s.u32(name, 8)?,
                    index_fn: s.u8(name, 12)?,
                    block: register_block(&s, name, 24, s.u32(name, 32)?)?,
                    register_offset: s.u16(name, 36)?,
                    clump_size: s.u16(name, 38)?,
                    upscaling: s.u64(name, 40)?,
                });
            }
            kind::IBRD => {
                once(d.ibrd.as_ref(), first, &s, name)?;
                let s = fixed(s, name, IBRD_LEN)?;
                let counter_width = s.u8(name, 51)?;
                check_width(&s, name, 51, counter_width)?;
                d.ibrd = Some(Ibrd {
                    offset: s.base(),
                    flags: s.u32(name, 8)?,
                    index_fn: s.u8(name, 12)?,
                    block: register_block(&s, name, 24, s.u32(name, 32)?)?,
                    total_offset: s.u16(name, 36)?,
                    miss_offset: s.u16(name, 38)?,
                    total_clump_size: s.u16(name, 40)?,
                    miss_clump_size: s.u16(name, 42)?,
                    counter_width,
                    upscaling: s.u64(name, 52)?,
                    correction: correction_factors(&s, name, 60, IBRD_LEN, max_rmid)?,
                });
            }
            kind::CARD => {
                once(d.card.as_ref(), first, &s, name)?;
                let s = fixed(s, name, CARD_LEN)?;
                d.card = Some(Card {
                    offset: s.base(),
                    flags: s.u32(name, 8)?,
                    contention_mask: s.u32(name, 12)?,
                    index_fn: s.u8(name, 16)?,
                    block: register_block(&s, name, 24, s.u32(name, 32)?)?,
                    cat_offset: s.u16(name, 36)?,
                    cat_block_size: s.u16(name, 38)?,
                });
            }
            // reserved types inside an RMDD: skipped
            _ => {}
        }
        offsets.entry(sub.kind).or_insert(s.base());
    }
    Ok(d)
}

fn check_width(s: &Bytes<'_>, name: &'static str, at: usize, width: u8) -> Result<(), TableError> {
    if width == 0 || width > 62 {
        return Err(value_err(
            s,
            name,
            at,
            "counter width",
            width.into(),
            "a bandwidth counter has 1 to 62 bits (bits 63:62 are flags)",
        ));
    }
    Ok(())
}

fn correction_factors(
    s: &Bytes<'_>,
    name: &'static str,
    len_at: usize,
    list_at: usize,
    max_rmid: u32,
) -> Result<CorrectionFactors, TableError> {
    let n = s.u32(name, len_at)?;
    let rule = "a correction factor list holds 0, 1 or max RMID + 1 factors";
    if n > 1 && u64::from(n) != u64::from(max_rmid) + 1 {
        return Err(value_err(
            s,
            name,
            len_at,
            "correction factor list length",
            n.into(),
            rule,
        ));
    }
    let count = usize::try_from(n).map_err(|_| {
        value_err(
            s,
            name,
            len_at,
            "correction factor list length",
            n.into(),
            rule,
        )
    })?;
    let need = count.checked_mul(4).and_then(|b| b.checked_add(list_at));
    if need != Some(s.len()) {
        return Err(s.error(
            name,
            2,
            Problem::BadLength {
                length: s.len() as u64,
                rule: "must be the fixed part plus 4 bytes per correction factor",
            },
        ));
    }
    Ok(match n {
        0 => CorrectionFactors::None,
        1 => CorrectionFactors::Single(s.u32(name, list_at)?),
        _ => {
            let mut v = Vec::with_capacity(count);
            for i in 0..count {
                v.push(s.u32(name, list_at + 4 * i)?);
            }
            CorrectionFactors::PerRmid(v)
        }
    })
}

fn parse_dases(s: &Bytes<'_>, out: &mut Vec<DeviceScope>) -> Result<(), TableError> {
    let mut at = CACD_LEN;
    while at < s.len() {
        let n = "DASE";
        let head = s.slice(n, at, 2)?;
        let kind = head.u8(n, 0)?;
        let len = usize::from(head.u8(n, 1)?);
        if len < DASE_LEN {
            return Err(s.error(
                n,
                at + 1,
                Problem::TooShort {
                    length: len as u64,
                    min: DASE_LEN as u64,
                },
            ));
        }
        if !(len - DASE_LEN).is_multiple_of(2) {
            return Err(s.error(
                n,
                at + 1,
                Problem::BadLength {
                    length: len as u64,
                    rule: "a DASE is 6 bytes and whole (device, function) pairs",
                },
            ));
        }
        let e = s.slice(n, at, len)?;
        let path = (DASE_LEN..len)
            .step_by(2)
            .map(|i| Ok((e.u8(n, i)?, e.u8(n, i + 1)?)))
            .collect::<Result<Vec<_>, TableError>>()?;
        out.push(DeviceScope {
            offset: e.base(),
            kind,
            segment: e.u16(n, 2)?,
            start_bus: e.u8(n, 5)?,
            path,
        });
        at += len;
    }
    Ok(())
}
