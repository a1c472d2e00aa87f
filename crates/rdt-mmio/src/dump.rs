//! Read-only views of the MMIO register blocks an ERDT describes, as pqos v26.03's dump
//! options select them (`--print-dump-info`, `--dump`, `--dump-rmid-regs`): which block of
//! which domain, which window of it, and the registers of chosen RMIDs, every access checked
//! against the block the table gives before anything is read.
//!
//! Nothing here writes a register: [`read_window`] and [`read_rmid`] only call
//! [`MmioIo::read`].
//!
//! # References
//! intel-cmt-cat v26.03 (read for facts): `pqos/dump.c` (`pqos_print_dump_info`,
//! `dump_mmio_regs`, the space names), `lib/mmio_dump.c` (`dump_mmio_range`: offset and
//! length in elements of the chosen width, length 0 = to the end of the block),
//! `pqos/dump_rmids.c` and `lib/mmio_dump_rmids.c` (the RMID register types and the
//! upscaled values).

use std::fmt;
use std::io;

use crate::erdt::{Domain, Erdt, MbaControl, RegisterBlock};
use crate::io::MmioIo;
use crate::regs;

/// The most bytes one window may span: a register block of a real part is a few pages
/// (pqos maps what it dumps); a table claiming gigabytes must not make a dump read them.
pub const MAX_WINDOW_BYTES: u64 = 4 << 20;

/// The memory regions an RMID dump covers when none are named: pqos's
/// `PQOS_MAX_MEM_REGIONS` (lib/pqos.h), four per MBA register.
pub const DEFAULT_DUMP_REGIONS: u8 = regs::MBA_REGIONS_PER_REG;

/// One register block kind of a domain, as pqos's `--space` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Space {
    /// CMRC: LLC occupancy of the CPU agents (`cmrc`).
    Cmrc,
    /// MMRC: region-aware memory bandwidth of the CPU agents (`mmrc`).
    Mmrc,
    /// MARC optimal bandwidth registers (`marc-opt`).
    MarcOpt,
    /// MARC minimum bandwidth registers (`marc-min`).
    MarcMin,
    /// MARC maximum bandwidth registers (`marc-max`).
    MarcMax,
    /// CMRD: I/O LLC occupancy of the device agents (`cmrd`).
    Cmrd,
    /// IBRD: I/O bandwidth of the device agents (`ibrd`).
    Ibrd,
    /// CARD: I/O LLC allocation of the device agents (`card`).
    Card,
}

impl Space {
    /// Every space in pqos's order (`sel_mmio_dump_space_map`): the CPU agents' five, then
    /// the device agents' three.
    pub const ALL: [Self; 8] = [
        Self::Cmrc,
        Self::Mmrc,
        Self::MarcOpt,
        Self::MarcMin,
        Self::MarcMax,
        Self::Cmrd,
        Self::Ibrd,
        Self::Card,
    ];

    /// The `--space` value (pqos compares it ignoring case).
    #[must_use]
    pub const fn arg(self) -> &'static str {
        match self {
            Self::Cmrc => "cmrc",
            Self::Mmrc => "mmrc",
            Self::MarcOpt => "marc-opt",
            Self::MarcMin => "marc-min",
            Self::MarcMax => "marc-max",
            Self::Cmrd => "cmrd",
            Self::Ibrd => "ibrd",
            Self::Card => "card",
        }
    }

    /// The name `--print-dump-info` shows (`CMRC`, `MARC(OPT)`, ...).
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Cmrc => "CMRC",
            Self::Mmrc => "MMRC",
            Self::MarcOpt => "MARC(OPT)",
            Self::MarcMin => "MARC(MIN)",
            Self::MarcMax => "MARC(MAX)",
            Self::Cmrd => "CMRD",
            Self::Ibrd => "IBRD",
            Self::Card => "CARD",
        }
    }

    /// Whether the space belongs to a domain of CPU agents (else of device agents).
    #[must_use]
    pub const fn is_cpu(self) -> bool {
        matches!(
            self,
            Self::Cmrc | Self::Mmrc | Self::MarcOpt | Self::MarcMin | Self::MarcMax
        )
    }

    /// The register block of this space in `domain`, `None` when the domain has no such
    /// sub-structure.
    #[must_use]
    pub fn block(self, domain: &Domain) -> Option<RegisterBlock> {
        match self {
            Self::Cmrc => domain.cmrc.as_ref().map(|c| c.block),
            Self::Mmrc => domain.mmrc.as_ref().map(|m| m.block),
            Self::MarcOpt => domain.marc.as_ref().map(|m| m.block(MbaControl::Optimal)),
            Self::MarcMin => domain.marc.as_ref().map(|m| m.block(MbaControl::Min)),
            Self::MarcMax => domain.marc.as_ref().map(|m| m.block(MbaControl::Max)),
            Self::Cmrd => domain.cmrd.as_ref().map(|c| c.block),
            Self::Ibrd => domain.ibrd.as_ref().map(|i| i.block),
            Self::Card => domain.card.as_ref().map(|c| c.block),
        }
    }
}

impl std::str::FromStr for Space {
    type Err = String;

    /// pqos's `--space` names, case ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|sp| sp.arg().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "`{s}`: the spaces are {}",
                    Self::ALL.map(Self::arg).join(" ")
                )
            })
    }
}

impl fmt::Display for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Whether `domain` is one of pqos's CPU agents (an L3 of CPUs: RMDD flag bit 0, or CPU
/// agents or a CPU sub-structure in its table entry).
#[must_use]
pub fn is_cpu_domain(domain: &Domain) -> bool {
    domain.is_cpu_l3()
        || !domain.cpu_agents.is_empty()
        || domain.cmrc.is_some()
        || domain.mmrc.is_some()
        || domain.marc.is_some()
}

/// Whether `domain` is one of pqos's device agents (an L3 of I/O agents).
#[must_use]
pub fn is_device_domain(domain: &Domain) -> bool {
    !is_cpu_domain(domain)
        && (domain.is_io_l3()
            || !domain.device_agents.is_empty()
            || domain.cmrd.is_some()
            || domain.ibrd.is_some()
            || domain.card.is_some())
}

/// The CPU agents' domains, then the device agents', each in table order (pqos's
/// `erdt->cpu_agents` and `erdt->dev_agents`).
#[must_use]
pub fn agents(erdt: &Erdt) -> (Vec<&Domain>, Vec<&Domain>) {
    let cpu = erdt.domains.iter().filter(|d| is_cpu_domain(d)).collect();
    let dev = erdt
        .domains
        .iter()
        .filter(|d| is_device_domain(d))
        .collect();
    (cpu, dev)
}

/// One row of `--print-dump-info`: a space of a domain with a non-empty block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpaceInfo {
    /// The domain id.
    pub domain_id: u16,
    /// Whether the domain is a CPU agent's (else a device agent's).
    pub cpu: bool,
    /// The space.
    pub space: Space,
    /// Its block.
    pub block: RegisterBlock,
}

/// Every dumpable space, grouped by domain: CPU agents first, then device agents, each
/// domain's spaces in [`Space::ALL`]'s order, blocks at address 0 or of 0 pages left out
/// (as pqos prints only a base and a size that are both non-zero).
#[must_use]
pub fn dump_info(erdt: &Erdt) -> Vec<Vec<SpaceInfo>> {
    let (cpu, dev) = agents(erdt);
    let mut out = Vec::new();
    for (domains, is_cpu) in [(cpu, true), (dev, false)] {
        for d in domains {
            let rows = Space::ALL
                .into_iter()
                .filter(|s| s.is_cpu() == is_cpu)
                .filter_map(|space| {
                    let block = space.block(d)?;
                    (block.base != 0 && !block.is_empty()).then_some(SpaceInfo {
                        domain_id: d.id,
                        cpu: is_cpu,
                        space,
                        block,
                    })
                })
                .collect();
            out.push(rows);
        }
    }
    out
}

/// Element width of a dump: pqos's `--width` (8 or 64 bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Width {
    /// One byte per element, 16 per line.
    Byte,
    /// Eight bytes per element, 2 per line (pqos's default).
    #[default]
    Qword,
}

impl Width {
    /// Bytes per element.
    #[must_use]
    pub const fn bytes(self) -> u64 {
        match self {
            Self::Byte => 1,
            Self::Qword => 8,
        }
    }

    /// Elements per output line (pqos's `BYTE_ELEMS_PER_LINE`, `QWORD_ELEMS_PER_LINE`).
    #[must_use]
    pub const fn per_line(self) -> usize {
        match self {
            Self::Byte => 16,
            Self::Qword => 2,
        }
    }
}

/// A dump request, or a register read, that the table or the arguments do not allow.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DumpError {
    /// No domain of the ERDT has this id.
    #[error("domain id {0} (0x{0:x}) is not in the ERDT")]
    NoDomain(u16),
    /// The domain has no block of this space.
    #[error(
        "domain id {id} (0x{id:x}) has no {space} register block (its {kind} agents' spaces: {have})"
    )]
    NoSpace {
        /// The domain.
        id: u16,
        /// The space asked for.
        space: Space,
        /// `CPU` or `device`.
        kind: &'static str,
        /// The spaces it has.
        have: String,
    },
    /// The offset is at or past the end of the block.
    #[error(
        "--offset {offset}: the {space} block of domain {id} has {available} elements of {width} \
         byte(s) (0x{size:x} bytes at 0x{base:x}), so the offset must be below {available}"
    )]
    Offset {
        /// The domain.
        id: u16,
        /// The space.
        space: Space,
        /// The offset asked for, in elements.
        offset: u64,
        /// Elements in the block.
        available: u64,
        /// Bytes per element.
        width: u64,
        /// Block base.
        base: u64,
        /// Block size in bytes.
        size: u64,
    },
    /// The window runs past the end of the block.
    #[error(
        "--offset {offset} --length {length}: the {space} block of domain {id} has {available} \
         elements of {width} byte(s) from that offset (0x{size:x} bytes at 0x{base:x})"
    )]
    Length {
        /// The domain.
        id: u16,
        /// The space.
        space: Space,
        /// The offset, in elements.
        offset: u64,
        /// The length asked for, in elements.
        length: u64,
        /// Elements from the offset to the end of the block.
        available: u64,
        /// Bytes per element.
        width: u64,
        /// Block base.
        base: u64,
        /// Block size in bytes.
        size: u64,
    },
    /// The window is larger than [`MAX_WINDOW_BYTES`].
    #[error(
        "--offset {offset} --length {length}: {bytes} bytes of the {space} block of domain {id} \
         is more than one dump reads ({max} bytes); give a smaller --length"
    )]
    TooLarge {
        /// The domain.
        id: u16,
        /// The space.
        space: Space,
        /// Offset, in elements.
        offset: u64,
        /// Length, in elements (0 = to the end).
        length: u64,
        /// Bytes the window spans.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// The RMID is above the domain's highest.
    #[error("RMID {rmid}: domain id {id} (0x{id:x}) has RMIDs 0 to {max}")]
    Rmid {
        /// The domain.
        id: u16,
        /// The RMID asked for.
        rmid: u32,
        /// The domain's highest RMID.
        max: u32,
    },
    /// The register the index function gives is outside the block the table gives.
    #[error(
        "RMID {rmid}{region}: its {kind} register lies outside domain {id}'s register block \
         (the ERDT's block is too small for it)"
    )]
    OutsideBlock {
        /// The domain.
        id: u16,
        /// The RMID.
        rmid: u32,
        /// `, region N` for a bandwidth counter, else empty.
        region: String,
        /// The register kind.
        kind: RmidRegister,
    },
}

/// The window of `space` in domain `id` that a dump reads: the physical address of its
/// first byte and the number of elements, from pqos's `--offset` and `--length` (in
/// elements of `width`; length 0 = from the offset to the end of the block).
///
/// # Errors
/// [`DumpError::NoDomain`], [`DumpError::NoSpace`], [`DumpError::Offset`],
/// [`DumpError::Length`] (pqos's `dump_mmio_range` checks), [`DumpError::TooLarge`].
pub fn window(
    erdt: &Erdt,
    id: u16,
    space: Space,
    width: Width,
    offset: u64,
    length: u64,
) -> Result<(RegisterBlock, u64, u64), DumpError> {
    let domain = domain(erdt, id)?;
    let block = space.block(domain).ok_or_else(|| no_space(domain, space))?;
    let w = width.bytes();
    let size = block.len();
    let all = size / w;
    if offset >= all {
        return Err(DumpError::Offset {
            id,
            space,
            offset,
            available: all,
            width: w,
            base: block.base,
            size,
        });
    }
    let available = all - offset;
    let count = if length == 0 { available } else { length };
    if count > available {
        return Err(DumpError::Length {
            id,
            space,
            offset,
            length,
            available,
            width: w,
            base: block.base,
            size,
        });
    }
    let bytes = count * w;
    if bytes > MAX_WINDOW_BYTES {
        return Err(DumpError::TooLarge {
            id,
            space,
            offset,
            length,
            bytes,
            max: MAX_WINDOW_BYTES,
        });
    }
    // the window's end must be an address (a table may put a block at the top of the space)
    let start = block
        .base
        .checked_add(offset * w)
        .filter(|a| a.checked_add(bytes).is_some())
        .ok_or(DumpError::TooLarge {
            id,
            space,
            offset,
            length,
            bytes,
            max: u64::MAX - block.base,
        })?;
    Ok((block, start, count))
}

fn domain(erdt: &Erdt, id: u16) -> Result<&Domain, DumpError> {
    erdt.domains
        .iter()
        .find(|d| d.id == id)
        .ok_or(DumpError::NoDomain(id))
}

fn no_space(domain: &Domain, space: Space) -> DumpError {
    let cpu = is_cpu_domain(domain);
    let have: Vec<&str> = Space::ALL
        .into_iter()
        .filter(|s| s.block(domain).is_some())
        .map(Space::arg)
        .collect();
    DumpError::NoSpace {
        id: domain.id,
        space,
        kind: if cpu { "CPU" } else { "device" },
        have: if have.is_empty() {
            "none".to_owned()
        } else {
            have.join(" ")
        },
    }
}

/// Reads `len` bytes from physical address `addr` through `io`: the aligned 8-byte
/// registers that cover the window, in one [`MmioIo::read_range`] (one `pread` of
/// `/dev/mem`), keeping the bytes of the window. Only reads. `len` is the caller's bound
/// ([`window`] keeps it under [`MAX_WINDOW_BYTES`]).
///
/// # Errors
/// The failed read, naming the window's first register; a window past 2^64 (InvalidInput).
pub fn read_window(io: &mut dyn MmioIo, addr: u64, len: u64) -> io::Result<Vec<u8>> {
    let start = addr - addr % regs::REG_BYTES;
    let end = addr
        .checked_add(len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "window past 2^64"))?;
    let n = (end - start).div_ceil(regs::REG_BYTES);
    if start
        .checked_add(n.saturating_sub(1) * regs::REG_BYTES)
        .is_none()
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "window past 2^64",
        ));
    }
    let mut values = vec![0u64; usize::try_from(n).map_err(|_| io::ErrorKind::InvalidInput)?];
    io.read_range(start, &mut values)
        .map_err(|e| io::Error::new(e.kind(), format!("MMIO register 0x{start:x}: {e}")))?;
    let skip = usize::try_from(addr - start).unwrap_or(0);
    let keep = usize::try_from(len).unwrap_or(usize::MAX);
    Ok(values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .skip(skip)
        .take(keep)
        .collect())
}

/// The domains `--socket` selects for `space`: pqos's rule (`get_socket_domain_ids`): the
/// agents of the space's kind in table order, `per_socket` of them per socket, socket `s`
/// owning the `s`th run of them.
///
/// # Errors
/// The socket has no such run (`Mismatch between socket and CPU Agents ...`, as pqos says).
pub fn socket_domains(
    erdt: &Erdt,
    socket: u32,
    space: Space,
    per_socket: usize,
) -> Result<Vec<u16>, String> {
    let (cpu, dev) = agents(erdt);
    let (list, what) = if space.is_cpu() {
        (cpu, "CPU Agents")
    } else {
        (dev, "Device Agents")
    };
    let first = usize::try_from(socket)
        .ok()
        .and_then(|s| s.checked_mul(per_socket))
        .filter(|f| f.checked_add(per_socket).is_some_and(|e| e <= list.len()));
    match first {
        Some(f) if per_socket > 0 => Ok(list[f..f + per_socket].iter().map(|d| d.id).collect()),
        _ => Err(format!(
            "Mismatch between socket and {what}. Available {what} {}. The requested socket {socket}",
            list.len()
        )),
    }
}

/// The RMID register kinds of `--dump-rmid-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmidRegister {
    /// `l3`: `L3_CMT_RMID_n` of a CPU domain's CMRC (LLC occupancy).
    L3,
    /// `mbm`: `MBM_REGION_m_RMID_n` of a CPU domain's MMRC (bandwidth per region).
    Mbm,
    /// `io-l3`: a device domain's CMRD occupancy register.
    IoL3,
    /// `io-total`: a device domain's IBRD total I/O bandwidth register.
    IoTotal,
    /// `io-miss`: a device domain's IBRD I/O LLC-miss bandwidth register.
    IoMiss,
}

impl RmidRegister {
    /// Every kind, in pqos's list order (`mbm l3 io-l3 io-total io-miss`).
    pub const ALL: [Self; 5] = [Self::Mbm, Self::L3, Self::IoL3, Self::IoTotal, Self::IoMiss];

    /// The `--dump-rmid-type` value.
    #[must_use]
    pub const fn arg(self) -> &'static str {
        match self {
            Self::L3 => "l3",
            Self::Mbm => "mbm",
            Self::IoL3 => "io-l3",
            Self::IoTotal => "io-total",
            Self::IoMiss => "io-miss",
        }
    }

    /// pqos's heading (`RMID CMT DUMP:` ...).
    #[must_use]
    pub const fn heading(self) -> &'static str {
        match self {
            Self::L3 => "RMID CMT DUMP:",
            Self::Mbm => "RMID MBM DUMP:",
            Self::IoL3 => "RMID IO L3 CMT DUMP:",
            Self::IoTotal => "RMID IO L3 TOTAL DUMP:",
            Self::IoMiss => "RMID IO L3 MISS DUMP:",
        }
    }

    /// Whether the registers are per memory region (only `mbm`).
    #[must_use]
    pub const fn per_region(self) -> bool {
        matches!(self, Self::Mbm)
    }
}

impl fmt::Display for RmidRegister {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.arg())
    }
}

impl std::str::FromStr for RmidRegister {
    type Err = String;

    /// pqos's `--dump-rmid-type` names, case ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.arg().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "`{s}`: the types are {}",
                    Self::ALL.map(Self::arg).join(" ")
                )
            })
    }
}

/// One RMID register read: the raw 64-bit value and the count it stands for, upscaled to
/// bytes (occupancy) or corrected and upscaled to bytes (bandwidth: the correction factor of
/// the RMID, then the upscaling factor), flag bits masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmidValue {
    /// The register as read.
    pub raw: u64,
    /// The count in bytes (pqos's `--dump-rmid-upscaling` value).
    pub upscaled: u64,
}

/// Where the `kind` register of `rmid` (in memory region `region` for `mbm`) of domain `id`
/// lies, and how its raw value becomes bytes: the table's checks of one RMID register,
/// without an access.
///
/// # Errors
/// [`DumpError`] for a domain, space or RMID the table does not have, or a register outside
/// the domain's block.
pub fn rmid_register(
    erdt: &Erdt,
    id: u16,
    kind: RmidRegister,
    rmid: u32,
    region: u8,
) -> Result<RmidLocation<'_>, DumpError> {
    let d = domain(erdt, id)?;
    if rmid > d.max_rmid {
        return Err(DumpError::Rmid {
            id,
            rmid,
            max: d.max_rmid,
        });
    }
    let space = match kind {
        RmidRegister::L3 => Space::Cmrc,
        RmidRegister::Mbm => Space::Mmrc,
        RmidRegister::IoL3 => Space::Cmrd,
        RmidRegister::IoTotal | RmidRegister::IoMiss => Space::Ibrd,
    };
    let outside = || DumpError::OutsideBlock {
        id,
        rmid,
        region: if kind.per_region() {
            format!(", region {region}")
        } else {
            String::new()
        },
        kind,
    };
    let (addr, scale) = match kind {
        RmidRegister::L3 => {
            let c = d.cmrc.as_ref().ok_or_else(|| no_space(d, space))?;
            (
                c.address(rmid).ok_or_else(outside)?,
                Scale::Occupancy(c.upscaling),
            )
        }
        RmidRegister::Mbm => {
            let m = d.mmrc.as_ref().ok_or_else(|| no_space(d, space))?;
            (
                m.address(rmid, region).ok_or_else(outside)?,
                Scale::Bandwidth(m.upscaling, m.counter_width, &m.correction),
            )
        }
        RmidRegister::IoL3 => {
            let c = d.cmrd.as_ref().ok_or_else(|| no_space(d, space))?;
            let off = u64::from(c.register_offset)
                + regs::cmt_offset(rmid, c.clump_size, c.clump_size.saturating_mul(8))
                    .ok_or_else(outside)?;
            (
                c.block.register(off).ok_or_else(outside)?,
                Scale::Occupancy(c.upscaling),
            )
        }
        RmidRegister::IoTotal | RmidRegister::IoMiss => {
            let i = d.ibrd.as_ref().ok_or_else(|| no_space(d, space))?;
            let (base, clump) = if kind == RmidRegister::IoTotal {
                (i.total_offset, i.total_clump_size)
            } else {
                (i.miss_offset, i.miss_clump_size)
            };
            let off = u64::from(base)
                + regs::cmt_offset(rmid, clump, clump.saturating_mul(8)).ok_or_else(outside)?;
            (
                i.block.register(off).ok_or_else(outside)?,
                Scale::Bandwidth(i.upscaling, i.counter_width, &i.correction),
            )
        }
    };
    Ok(RmidLocation { addr, rmid, scale })
}

/// One RMID register as [`rmid_register`] locates it.
#[derive(Clone, Copy, Debug)]
pub struct RmidLocation<'a> {
    /// Its physical address.
    pub addr: u64,
    rmid: u32,
    scale: Scale<'a>,
}

/// How a raw counter becomes bytes.
#[derive(Clone, Copy, Debug)]
enum Scale<'a> {
    /// Occupancy: count bits × upscaling factor.
    Occupancy(u64),
    /// Bandwidth: count bits (the table's counter width), corrected, × upscaling factor.
    Bandwidth(u64, u8, &'a crate::erdt::CorrectionFactors),
}

impl RmidLocation<'_> {
    /// The value read from this register: raw, and upscaled to bytes (occupancy: count ×
    /// upscaling; bandwidth: the RMID's correction factor, then the upscaling factor), flag
    /// bits masked.
    #[must_use]
    pub fn value(&self, raw: u64) -> RmidValue {
        let upscaled = match self.scale {
            Scale::Occupancy(up) => (raw & regs::OCCUPANCY_COUNT_MASK).saturating_mul(up),
            Scale::Bandwidth(up, width, corr) => corr
                .apply(self.rmid, counter_bits(raw, width))
                .saturating_mul(up),
        };
        RmidValue { raw, upscaled }
    }
}

/// Reads the `kind` register of `rmid` (in memory region `region` for `mbm`) of domain `id`.
/// Only reads.
///
/// # Errors
/// [`DumpError`] for a domain or RMID the table does not have (checked before any read), or
/// the read's I/O error naming the register.
pub fn read_rmid(
    erdt: &Erdt,
    io: &mut dyn MmioIo,
    id: u16,
    kind: RmidRegister,
    rmid: u32,
    region: u8,
) -> Result<RmidValue, RmidReadError> {
    Ok(read_rmids(erdt, io, id, kind, &[rmid], region)?[0])
}

/// Reads the `kind` registers of `rmids` (in memory region `region` for `mbm`) of domain
/// `id`, in `rmids`'s order: every register located first (nothing read if one fails), then
/// each run of consecutive registers in one [`MmioIo::read_range`] (eight RMIDs per run in
/// an MMRC, a clump in a CMRC). Only reads.
///
/// # Errors
/// As [`read_rmid`].
pub fn read_rmids(
    erdt: &Erdt,
    io: &mut dyn MmioIo,
    id: u16,
    kind: RmidRegister,
    rmids: &[u32],
    region: u8,
) -> Result<Vec<RmidValue>, RmidReadError> {
    let located = rmids
        .iter()
        .map(|&rmid| rmid_register(erdt, id, kind, rmid, region))
        .collect::<Result<Vec<_>, _>>()?;
    let addrs: Vec<u64> = located.iter().map(|l| l.addr).collect();
    let raw = crate::io::read_registers(io, &addrs).map_err(RmidReadError::Io)?;
    Ok(located.iter().zip(raw).map(|(l, r)| l.value(r)).collect())
}

/// The count bits of a bandwidth counter: bits 61:0, then the table's counter width.
fn counter_bits(raw: u64, width: u8) -> u64 {
    let v = raw & regs::BW_COUNT_MASK;
    if width == 0 || width >= 62 {
        v
    } else {
        v & ((1u64 << width) - 1)
    }
}

/// Why an RMID register could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RmidReadError {
    /// The table does not allow the read.
    #[error(transparent)]
    Dump(#[from] DumpError),
    /// The read failed.
    #[error(transparent)]
    Io(io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build;
    use crate::tests::sample_erdt;

    /// Registers as a map: unread addresses read as their own address (so a test sees
    /// which register was read), a counter of the log of reads.
    struct Regs(Vec<u64>);

    impl MmioIo for Regs {
        fn read(&mut self, addr: u64) -> io::Result<u64> {
            self.0.push(addr);
            Ok(addr)
        }

        fn write(&mut self, _: u64, _: u64) -> io::Result<()> {
            panic!("a dump never writes")
        }
    }

    #[test]
    fn spaces_parse_ignoring_case_and_say_the_list() {
        assert_eq!("MARC-OPT".parse::<Space>(), Ok(Space::MarcOpt));
        assert_eq!("card".parse::<Space>(), Ok(Space::Card));
        let e = "cmt".parse::<Space>().unwrap_err();
        assert!(
            e.contains("cmrc mmrc marc-opt marc-min marc-max cmrd ibrd card"),
            "{e}"
        );
        assert_eq!(
            "IO-Total".parse::<RmidRegister>(),
            Ok(RmidRegister::IoTotal)
        );
        assert!("cmt".parse::<RmidRegister>().is_err());
    }

    #[test]
    fn dump_info_lists_cpu_then_device_spaces_with_their_blocks() {
        let erdt = Erdt::parse(&build::erdt(&sample_erdt())).unwrap();
        let info = dump_info(&erdt);
        let (cpu, dev) = agents(&erdt);
        assert_eq!(info.len(), cpu.len() + dev.len());
        let first = &info[0];
        let spaces: Vec<Space> = first.iter().map(|r| r.space).collect();
        assert_eq!(spaces[0], Space::Cmrc);
        assert!(first.iter().all(|r| r.cpu && r.domain_id == cpu[0].id));
        assert_eq!(first[0].block, cpu[0].cmrc.as_ref().unwrap().block);
        let last = info.last().unwrap();
        assert!(last.iter().all(|r| !r.cpu && !r.space.is_cpu()));
    }

    #[test]
    fn windows_are_checked_against_the_block() {
        let erdt = Erdt::parse(&build::erdt(&sample_erdt())).unwrap();
        let d = agents(&erdt).0[0];
        let block = d.cmrc.as_ref().unwrap().block;
        let elems = block.len() / 8;
        // the whole block by default, qwords
        assert_eq!(
            window(&erdt, d.id, Space::Cmrc, Width::Qword, 0, 0),
            Ok((block, block.base, elems))
        );
        // bytes: offset 3, 5 bytes
        assert_eq!(
            window(&erdt, d.id, Space::Cmrc, Width::Byte, 3, 5),
            Ok((block, block.base + 3, 5))
        );
        // the last element is fine, one more is not
        assert!(window(&erdt, d.id, Space::Cmrc, Width::Qword, elems - 1, 1).is_ok());
        let e = window(&erdt, d.id, Space::Cmrc, Width::Qword, elems - 1, 2).unwrap_err();
        assert!(matches!(e, DumpError::Length { available: 1, .. }), "{e}");
        assert!(e.to_string().contains("--length 2"), "{e}");
        let e = window(&erdt, d.id, Space::Cmrc, Width::Qword, elems, 0).unwrap_err();
        assert!(e.to_string().contains(&format!("--offset {elems}")), "{e}");
        // a CPU domain has no CARD; an unknown domain is named
        let e = window(&erdt, d.id, Space::Card, Width::Qword, 0, 0).unwrap_err();
        assert!(matches!(e, DumpError::NoSpace { .. }), "{e}");
        assert!(e.to_string().contains("cmrc mmrc"), "{e}");
        assert_eq!(
            window(&erdt, 0xbeef, Space::Cmrc, Width::Qword, 0, 0),
            Err(DumpError::NoDomain(0xbeef))
        );
        // offsets near 2^64 do not overflow, nor does a block at the top of the space
        assert!(window(&erdt, d.id, Space::Cmrc, Width::Qword, u64::MAX, 1).is_err());
        let mut top = erdt.clone();
        let cmrc = top.domains[0].cmrc.as_mut().unwrap();
        cmrc.block.base = u64::MAX - 0xfff;
        cmrc.block.pages = 2;
        let e = window(&top, d.id, Space::Cmrc, Width::Qword, 0, 0).unwrap_err();
        assert!(matches!(e, DumpError::TooLarge { .. }), "{e}");
        let mut regs = Regs(Vec::new());
        let last = read_window(&mut regs, u64::MAX - 8, 8).unwrap();
        assert_eq!(last.len(), 8);
        assert_eq!(regs.0, vec![u64::MAX - 15, u64::MAX - 7]);
        assert!(read_window(&mut regs, u64::MAX - 7, 8).is_err());
    }

    #[test]
    fn read_window_reads_whole_registers_and_keeps_the_window() {
        let mut regs = Regs(Vec::new());
        let bytes = read_window(&mut regs, 0x1003, 6).unwrap();
        // registers 0x1000 and 0x1008 read (value = address), bytes 3..9 kept
        assert_eq!(regs.0, vec![0x1000, 0x1008]);
        let mut want = 0x1000u64.to_le_bytes().to_vec();
        want.extend_from_slice(&0x1008u64.to_le_bytes());
        assert_eq!(bytes, want[3..9]);
    }

    /// Records each run read (registers read as their address).
    struct Runs(Vec<(u64, usize)>);

    impl MmioIo for Runs {
        fn read(&mut self, _: u64) -> io::Result<u64> {
            panic!("dumps read runs")
        }

        fn write(&mut self, _: u64, _: u64) -> io::Result<()> {
            panic!("a dump never writes")
        }

        fn read_range(&mut self, addr: u64, values: &mut [u64]) -> io::Result<()> {
            self.0.push((addr, values.len()));
            for (k, v) in (0u64..).zip(values.iter_mut()) {
                *v = addr + 8 * k;
            }
            Ok(())
        }
    }

    #[test]
    fn a_window_is_one_run_and_rmids_are_read_by_runs() {
        let erdt = Erdt::parse(&build::erdt(&sample_erdt())).unwrap();
        let d = agents(&erdt).0[0];
        let (block, addr, count) = window(&erdt, d.id, Space::Mmrc, Width::Qword, 0, 0).unwrap();
        let mut io = Runs(Vec::new());
        let bytes = read_window(&mut io, addr, count * 8).unwrap();
        assert_eq!(io.0, [(block.base, usize::try_from(count).unwrap())]);
        assert_eq!(bytes[8..16], (block.base + 8).to_le_bytes());
        // MMRC: eight consecutive RMIDs share 64 bytes, the next eight are 16 KiB on
        let mut io = Runs(Vec::new());
        let rmids: Vec<u32> = (0..16).collect();
        let got = read_rmids(&erdt, &mut io, d.id, RmidRegister::Mbm, &rmids, 1).unwrap();
        let mmrc = d.mmrc.as_ref().unwrap();
        assert_eq!(
            io.0,
            [
                (mmrc.address(0, 1).unwrap(), 8),
                (mmrc.address(8, 1).unwrap(), 8)
            ]
        );
        for (&rmid, v) in rmids.iter().zip(&got) {
            assert_eq!(v.raw, mmrc.address(rmid, 1).unwrap());
            let one = read_rmid(
                &erdt,
                &mut Runs(Vec::new()),
                d.id,
                RmidRegister::Mbm,
                rmid,
                1,
            );
            assert_eq!(one.unwrap(), *v);
        }
        // one RMID past the domain's: nothing read
        let mut io = Runs(Vec::new());
        let bad = [0, d.max_rmid + 1];
        assert!(read_rmids(&erdt, &mut io, d.id, RmidRegister::L3, &bad, 0).is_err());
        assert!(io.0.is_empty());
    }

    #[test]
    fn rmid_registers_follow_the_index_functions_and_scale() {
        let erdt = Erdt::parse(&build::erdt(&sample_erdt())).unwrap();
        let d = agents(&erdt).0[0];
        let mut regs = Regs(Vec::new());
        let v = read_rmid(&erdt, &mut regs, d.id, RmidRegister::L3, 9, 0).unwrap();
        let cmrc = d.cmrc.as_ref().unwrap();
        assert_eq!(regs.0, vec![cmrc.address(9).unwrap()]);
        assert_eq!(v.raw, cmrc.address(9).unwrap());
        assert_eq!(v.upscaled, v.raw * cmrc.upscaling);
        let v = read_rmid(&erdt, &mut regs, d.id, RmidRegister::Mbm, 3, 1).unwrap();
        let mmrc = d.mmrc.as_ref().unwrap();
        assert_eq!(v.raw, mmrc.address(3, 1).unwrap());
        let e = read_rmid(&erdt, &mut regs, d.id, RmidRegister::L3, d.max_rmid + 1, 0).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("RMIDs 0 to {}", d.max_rmid)),
            "{e}"
        );
        let e = read_rmid(&erdt, &mut regs, d.id, RmidRegister::IoL3, 0, 0).unwrap_err();
        assert!(e.to_string().contains("no CMRD"), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any block, offset, length and width: a window inside the block, or an error;
        /// never a panic.
        #[test]
        fn fuzz_windows_lie_inside_their_block(
            base in proptest::prelude::any::<u64>(),
            pages in 0u32..64,
            offset in proptest::prelude::any::<u64>(),
            length in proptest::prelude::any::<u64>(),
            byte in proptest::prelude::any::<bool>(),
            small in proptest::prelude::any::<bool>(),
        ) {
            let mut erdt = Erdt::parse(&build::erdt(&sample_erdt())).unwrap();
            let cmrc = erdt.domains[0].cmrc.as_mut().unwrap();
            cmrc.block = RegisterBlock { base, pages };
            let width = if byte { Width::Byte } else { Width::Qword };
            let (offset, length) = if small { (offset % 600, length % 600) } else { (offset, length) };
            if let Ok((block, start, count)) = window(&erdt, 0, Space::Cmrc, width, offset, length) {
                let bytes = count * width.bytes();
                proptest::prop_assert!(count > 0 && bytes <= MAX_WINDOW_BYTES);
                proptest::prop_assert!(start >= block.base);
                proptest::prop_assert!(start - block.base + bytes <= block.len());
            }
        }
    }

    #[test]
    fn socket_runs_follow_pqos_and_refuse_past_the_table() {
        let erdt = Erdt::parse(&build::erdt(&sample_erdt())).unwrap();
        let (cpu, _) = agents(&erdt);
        assert_eq!(
            socket_domains(&erdt, 0, Space::Cmrc, 1),
            Ok(vec![cpu[0].id])
        );
        let e = socket_domains(&erdt, 99, Space::Cmrc, 1).unwrap_err();
        assert!(
            e.starts_with("Mismatch between socket and CPU Agents"),
            "{e}"
        );
        assert!(socket_domains(&erdt, u32::MAX, Space::Cmrc, 4).is_err());
    }
}
