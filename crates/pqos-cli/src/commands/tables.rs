//! pqos v26.03's reports of the RDT 1.3 ACPI tables and its register dumps:
//! `--print-mem-regions` (MRRM), `--print-topology` (ERDT), `--print-dump-info`, `--dump`
//! and `--dump-rmid-regs` (the register blocks the ERDT locates, read-only through
//! [`rdt_mmio::MmioIo`]).
//!
//! The tables and the registers come from the library ([`rdt_mmio::AcpiTables`],
//! [`rdt_mmio::dump`]); this module only prints them the way pqos does. Formats: pqos v26.03
//! `pqos/cap.c` (`cap_print_mrrm_info_regions`, `cap_print_erdt_info_topology` and the agent
//! blocks it prints), `pqos/dump.c`, `lib/mmio_dump.c`, `lib/mmio_dump_rmids.c` (read for
//! facts; the bytes that could not be confirmed are listed in docs/compat.md).

use std::fmt::Write as _;
use std::io::Write;

use anyhow::{Context as _, Result, anyhow, bail};
use rdt_mmio::AcpiTables;
use rdt_mmio::dump::{self, RmidRegister, Space, Width};
use rdt_mmio::erdt::{CorrectionFactors, Domain, Erdt};
use rdt_mmio::mrrm::Mrrm;

/// What a table report or dump asks for (one per run, as pqos runs the first it finds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TablesRequest {
    /// `--print-mem-regions`.
    MemRegions,
    /// `--print-topology`.
    Topology,
    /// `--print-dump-info`.
    DumpInfo,
    /// `--dump` and its options.
    Dump(DumpRequest),
    /// `--dump-rmid-regs` and its options.
    DumpRmids(RmidDumpRequest),
}

/// Which domains a dump covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DumpDomains {
    /// `--dump-domain-id`: these ids.
    Ids(Vec<u16>),
    /// `--socket`: the agents of these sockets.
    Sockets(Vec<u32>),
}

/// `--dump`: a window of one register space of some domains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpRequest {
    /// The domains.
    pub domains: DumpDomains,
    /// `--dump-domain-id` and `--socket` both given (pqos notes it ignores `--socket`).
    pub socket_ignored: bool,
    /// `--space` (pqos's default: `cmrc`).
    pub space: Space,
    /// `--offset`, in elements of `width`.
    pub offset: u64,
    /// `--length`, in elements of `width` (0: to the end of the block).
    pub length: u64,
    /// `--width`.
    pub width: Width,
    /// `--le`: each element's bytes from the lowest address up (else from the highest).
    pub le: bool,
    /// `--binary`: bits instead of hexadecimal digits.
    pub binary: bool,
}

/// `--dump-rmid-regs`: the registers of some RMIDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RmidDumpRequest {
    /// `--dump-rmid-domain-ids`.
    pub domains: Vec<u16>,
    /// `--dump-rmids`.
    pub rmids: Vec<u32>,
    /// `--dump-rmid-mem-regions` (every region pqos knows of when not given).
    pub regions: Vec<u8>,
    /// `--dump-rmid-type`.
    pub kind: RmidRegister,
    /// `--dump-rmid-binary`.
    pub binary: bool,
    /// `--dump-rmid-upscaling`.
    pub upscale: bool,
}

/// The table report or dump `args` ask for, in pqos's order (`--print-mem-regions`,
/// `--print-topology`, `--print-dump-info`, `--dump`, `--dump-rmid-regs`), `None` without
/// one.
///
/// # Errors
/// A dump without what it needs (pqos: `Provide either --socket or --dump-domain-id`,
/// `Missing --dump-rmid-domain-ids option`, ...), or dump options without `--dump` /
/// `--dump-rmid-regs` (pqos ignores them; refused here so that a typo does not go unseen).
pub fn request(a: &crate::args::tables::TableArgs) -> Result<Option<TablesRequest>> {
    let dump_opts = a.socket.is_some()
        || a.dump_domain_id.is_some()
        || a.space.is_some()
        || a.offset.is_some()
        || a.length.is_some()
        || a.width.is_some()
        || a.binary
        || a.le;
    let rmid_opts = a.dump_rmids.is_some()
        || a.dump_rmid_domain_ids.is_some()
        || a.dump_rmid_mem_regions.is_some()
        || a.dump_rmid_type.is_some()
        || a.dump_rmid_binary
        || a.dump_rmid_upscaling;
    let req = if a.print_mem_regions {
        TablesRequest::MemRegions
    } else if a.print_topology {
        TablesRequest::Topology
    } else if a.print_dump_info {
        TablesRequest::DumpInfo
    } else if a.dump {
        let domains = match (&a.dump_domain_id, &a.socket) {
            (Some(ids), _) => DumpDomains::Ids(ids.0.clone()),
            (None, Some(s)) => DumpDomains::Sockets(s.0.clone()),
            (None, None) => bail!("--dump: provide either --socket or --dump-domain-id"),
        };
        TablesRequest::Dump(DumpRequest {
            domains,
            socket_ignored: a.dump_domain_id.is_some() && a.socket.is_some(),
            space: a.space.unwrap_or(Space::Cmrc),
            offset: a.offset.unwrap_or(0),
            length: a.length.unwrap_or(0),
            width: a.width.unwrap_or_default(),
            le: a.le,
            binary: a.binary,
        })
    } else if a.dump_rmid_regs {
        let Some(domains) = a.dump_rmid_domain_ids.clone().map(|l| l.0) else {
            bail!("--dump-rmid-regs: missing --dump-rmid-domain-ids option");
        };
        let Some(rmids) = a.dump_rmids.clone().map(|l| l.0) else {
            bail!("--dump-rmid-regs: missing --dump-rmids option");
        };
        let Some(kind) = a.dump_rmid_type else {
            bail!(
                "--dump-rmid-regs: missing --dump-rmid-type option (mbm l3 io-l3 io-total io-miss)"
            );
        };
        TablesRequest::DumpRmids(RmidDumpRequest {
            domains,
            rmids,
            regions: a
                .dump_rmid_mem_regions
                .clone()
                .map(|l| l.0)
                .unwrap_or_else(|| (0..dump::DEFAULT_DUMP_REGIONS).collect()),
            kind,
            binary: a.dump_rmid_binary,
            upscale: a.dump_rmid_upscaling,
        })
    } else if dump_opts {
        bail!(
            "--socket, --dump-domain-id, --space, --offset, --length, --width, --binary and --le go with --dump"
        );
    } else if rmid_opts {
        bail!("--dump-rmids and the --dump-rmid-* options go with --dump-rmid-regs");
    } else {
        return Ok(None);
    };
    Ok(Some(req))
}

/// Whether the MMIO interface is the one in use: pqos v26.03 (`lib/cap.c`) takes it when
/// asked, or automatically when the platform has ERDT and MRRM and `RDT_IFACE` does not
/// ask for another; an explicit `msr` or `os` (`-I`) is not MMIO.
#[must_use]
pub fn mmio_in_use(iface: rdt_pqos::Iface, tables: &AcpiTables) -> bool {
    let env = std::env::var("RDT_IFACE").unwrap_or_default();
    let forced_other = ["msr", "os"].iter().any(|i| env.eq_ignore_ascii_case(i));
    !matches!(iface, rdt_pqos::Iface::Msr | rdt_pqos::Iface::Os)
        && !forced_other
        && tables.has_mmio()
}

/// pqos's line when the interface in use is not MMIO (pqos/cap.c prints this for both
/// `--print-mem-regions` and `--print-topology`).
pub const NOT_MMIO: &str = "MMIO interface provides Memory Regions";

/// Runs `req` on `tables` (and, for the dumps, the registers through `io`). `mmio` says
/// whether the MMIO interface is the one in use; `packages` is the number of sockets (for
/// `--socket`).
///
/// # Errors
/// A table the report needs is missing, a selection the table does not have (named), a
/// failed register read. Nothing is printed for a dump whose selection is refused.
pub fn run(
    req: &TablesRequest,
    tables: &AcpiTables,
    mmio: bool,
    packages: usize,
    io: &mut dyn FnMut() -> Result<Box<dyn rdt_mmio::MmioIo>>,
    out: &mut dyn Write,
) -> Result<()> {
    match req {
        TablesRequest::MemRegions => {
            let Some(mrrm) = &tables.mrrm else {
                bail!(
                    "--print-mem-regions: the platform has no ACPI MRRM table (sys/firmware/acpi/tables/MRRM)"
                );
            };
            if mmio {
                out.write_all(mem_regions(mrrm).as_bytes())?;
            } else {
                writeln!(out, "{NOT_MMIO}")?;
            }
        }
        TablesRequest::Topology => {
            let erdt = need_erdt(tables, "--print-topology")?;
            if mmio {
                out.write_all(topology(erdt).as_bytes())?;
            } else {
                writeln!(out, "{NOT_MMIO}")?;
            }
        }
        TablesRequest::DumpInfo => {
            let erdt = need_erdt(tables, "--print-dump-info")?;
            let (text, any) = dump_info(erdt);
            out.write_all(text.as_bytes())?;
            if !any {
                bail!("--print-dump-info: the ERDT describes no MMIO register block");
            }
        }
        TablesRequest::Dump(d) => {
            let erdt = need_erdt(tables, "--dump")?;
            run_dump(d, erdt, packages, io, out)?;
        }
        TablesRequest::DumpRmids(d) => {
            let erdt = need_erdt(tables, "--dump-rmid-regs")?;
            run_rmid_dump(d, erdt, io, out)?;
        }
    }
    Ok(())
}

fn need_erdt<'a>(tables: &'a AcpiTables, option: &str) -> Result<&'a Erdt> {
    tables.erdt.as_ref().ok_or_else(|| {
        anyhow!("{option}: the platform has no ACPI ERDT table (sys/firmware/acpi/tables/ERDT): it is not an RDT 1.3 (MMIO) platform")
    })
}

/// `--print-mem-regions`: MRRM's header and every range entry (pqos/cap.c
/// `cap_print_mrrm_info_regions`, including its uneven `Remote Region ID` spacing).
#[must_use]
pub fn mem_regions(mrrm: &Mrrm) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Total Memory Regions:  {}", mrrm.max_regions);
    let kind = if mrrm.flags == 0 { "Static" } else { "Dynamic" };
    let _ = writeln!(s, "Region ID Type:        {kind}");
    s.push_str("\n\n");
    for r in &mrrm.ranges {
        let _ = writeln!(s, "\n\n\nBase Address     : 0x{:x}", r.base);
        let _ = writeln!(s, "Length           : 0x{:x}", r.length);
        match r.local {
            Some(id) => {
                let _ = writeln!(s, "Local Region ID  : 0x{:x}", id.get());
            }
            None => s.push_str("Local Region ID  : Not Valid\n"),
        }
        match r.remote {
            Some(id) => {
                let _ = writeln!(s, "Remote Region ID: 0x{:x}", id.get());
            }
            None => s.push_str("Remote Region ID : Not Valid\n"),
        }
    }
    s.push('\n');
    s
}

/// One `label: value` line of an agent block: eight spaces, the label padded so the value
/// starts at column `col` (pqos's hand-padded printf strings: 55 for most fields).
fn field(s: &mut String, label: &str, col: usize, value: &str) {
    let _ = writeln!(s, "{:<col$}{value}", format!("        {label}"));
}

fn yes_no(b: bool) -> &'static str {
    if b { "Yes" } else { "No" }
}

fn correction_list(c: &CorrectionFactors) -> Vec<u32> {
    match c {
        CorrectionFactors::None => Vec::new(),
        CorrectionFactors::Single(f) => vec![*f],
        CorrectionFactors::PerRmid(v) => v.clone(),
    }
}

/// `--print-topology`: the ERDT's classes and agents, then each CPU agent's CACD, CMRC,
/// MMRC and MARC blocks and each device agent's DACD, CMRD, IBRD and CARD blocks
/// (pqos/cap.c `cap_print_erdt_info_topology`). A sub-structure the domain lacks prints
/// as zeros, as pqos's zeroed structure does.
#[must_use]
pub fn topology(erdt: &Erdt) -> String {
    let (cpu, dev) = dump::agents(erdt);
    let mut s = String::new();
    let _ = writeln!(s, "CLOS:           {}", erdt.max_clos);
    let _ = writeln!(s, "CPU Agents:     {}", cpu.len());
    let _ = writeln!(s, "Device Agents:  {}", dev.len());
    s.push_str("\n\n\n");
    for d in cpu {
        let _ = write!(s, "\n\nDomain ID {}\n\n    Type: CPU\n", d.id);
        cpu_agent(&mut s, d);
    }
    s.push_str("\n\n\n");
    for d in dev {
        let _ = write!(s, "\n\nDomain ID {}\n\n    Type: Device\n", d.id);
        device_agent(&mut s, d);
    }
    s
}

fn cpu_agent(s: &mut String, d: &Domain) {
    s.push_str("    CACD Info:\n");
    // sic: pqos v26.03 spells it so
    field(s, "Domanin ID:", 55, &d.id.to_string());
    let ids: String = d.cpu_agents.iter().map(|a| format!("0x{a:x} ")).collect();
    field(s, "Enumeration IDs:", 55, &ids);
    s.push('\n');
    s.push_str("    CMRC Info:\n");
    let c = d.cmrc.clone().unwrap_or(rdt_mmio::erdt::Cmrc {
        offset: 0,
        flags: 0,
        index_fn: 0,
        block: rdt_mmio::RegisterBlock { base: 0, pages: 0 },
        clump_size: 0,
        clump_stride: 0,
        upscaling: 0,
    });
    field(s, "Unavailable Bit Support:", 55, yes_no(c.flags == 1));
    field(s, "Indexing Function Version:", 55, &c.index_fn.to_string());
    field(
        s,
        "CMT Register Block Base Address:",
        55,
        &format!("0x{:x}", c.block.base),
    );
    field(
        s,
        "CMT Register Block Size:",
        55,
        &format!("0x{:x}", c.block.pages),
    );
    field(
        s,
        "CMT Register Clump Size:",
        55,
        &format!("0x{:x}", c.clump_size),
    );
    field(
        s,
        "CMT Register Clump Stride:",
        55,
        &format!("0x{:x}", c.clump_stride),
    );
    field(
        s,
        "CMT Counter Upscaling Factor:",
        55,
        &format!("0x{:x}", c.upscaling),
    );
    s.push_str("\n\n    MMRC Info:\n");
    let (flags, index_fn, base, pages, width, up, corr) =
        d.mmrc.as_ref().map_or((0, 0, 0, 0, 0, 0, Vec::new()), |m| {
            (
                m.flags,
                m.index_fn,
                m.block.base,
                m.block.pages,
                m.counter_width,
                m.upscaling,
                correction_list(&m.correction),
            )
        });
    field(s, "Unavailable Bit Support:", 55, yes_no(flags & 1 != 0));
    field(s, "Overflow Bit Support:", 55, yes_no(flags & 2 != 0));
    field(s, "Indexing Function Version:", 55, &index_fn.to_string());
    field(
        s,
        "MBM Register Block Base Address:",
        55,
        &format!("0x{base:x}"),
    );
    field(s, "MBM Register Block Size:", 55, &format!("0x{pages:x}"));
    field(s, "MBM Counter Width:", 55, &format!("0x{width:x}"));
    field(s, "MBM Counter Upscaling Factor:", 55, &format!("0x{up:x}"));
    field(
        s,
        "MBM Correction Factor List Length:",
        55,
        &corr.len().to_string(),
    );
    if !corr.is_empty() {
        let list: String = corr.iter().map(|f| format!("0x{f:x} ")).collect();
        let _ = write!(s, "{:<47}{list}", "        MBM Correction Factor:");
    }
    s.push_str("\n\n");
    s.push_str("\n\n    MARC Info:\n");
    let (flags, index_fn, opt, min, max, pages, window) =
        d.marc.as_ref().map_or((0, 0, 0, 0, 0, 0, 0), |m| {
            (
                m.flags,
                m.index_fn,
                m.optimal.base,
                m.min.base,
                m.max.base,
                m.optimal.pages,
                m.control_window,
            )
        });
    field(s, "MBA Optimal Control Window:", 55, yes_no(flags & 1 != 0));
    field(s, "MBA Minimum Control Window:", 55, yes_no(flags & 2 != 0));
    field(s, "MBA Maximum Control Window:", 55, yes_no(flags & 4 != 0));
    field(s, "Indexing Function Version:", 55, &index_fn.to_string());
    field(
        s,
        "MBA Optimal BW Register Block Base Address:",
        55,
        &format!("0x{opt:x}"),
    );
    field(
        s,
        "MBA Minimum BW Register Block Base Address:",
        55,
        &format!("0x{min:x}"),
    );
    field(
        s,
        "MBA Maximum BW Register Block Base Address:",
        55,
        &format!("0x{max:x}"),
    );
    field(s, "MBA Register Block Size:", 55, &format!("0x{pages:x}"));
    field(s, "MBA BW Control Window Range:", 55, &window.to_string());
    s.push_str("\n\n");
}

fn device_agent(s: &mut String, d: &Domain) {
    s.push_str("\n\n    DACD Info:\n");
    field(s, "Domain ID:", 54, &d.id.to_string());
    field(
        s,
        "Number of DASEs:",
        54,
        &d.device_agents.len().to_string(),
    );
    for (i, dase) in d.device_agents.iter().enumerate() {
        let _ = writeln!(s, "\n        DASE {i}:");
        let _ = writeln!(s, "             Type:             {:x}", dase.kind);
        let _ = writeln!(s, "             Segment Number:   {:x}", dase.segment);
        let _ = writeln!(s, "             Start Bus Number: {:x}", dase.start_bus);
        let path: String = dase
            .path
            .iter()
            .flat_map(|(dev, func)| [*dev, *func])
            .map(|b| format!("0x{b:02x} "))
            .collect();
        let _ = writeln!(s, "             Path:             {path}");
    }
    s.push_str("\n\n    CMRD Info:\n");
    let (flags, index_fn, base, pages, offset, clump, up) =
        d.cmrd.as_ref().map_or((0, 0, 0, 0, 0, 0, 0), |c| {
            (
                c.flags,
                c.index_fn,
                c.block.base,
                c.block.pages,
                c.register_offset,
                c.clump_size,
                c.upscaling,
            )
        });
    field(s, "Unavailable Bit Support:", 55, yes_no(flags == 1));
    field(s, "Indexing Function Version:", 55, &index_fn.to_string());
    field(s, "Register Base Address:", 55, &format!("0x{base:x}"));
    field(s, "Register Block Size:", 55, &format!("0x{pages:x}"));
    // sic: pqos v26.03 labels the register offset "Clump Size" too
    field(s, "CMT Register Clump Size:", 55, &format!("0x{offset:x}"));
    field(s, "CMT Register Clump Size:", 55, &format!("0x{clump:x}"));
    field(s, "CMT Counter Upscaling Factor:", 55, &format!("0x{up:x}"));
    s.push_str("\n\n    IBRD Info:\n");
    let i = d.ibrd.as_ref();
    let flags = i.map_or(0, |i| i.flags);
    field(s, "Unavailable Bit Support:", 55, yes_no(flags & 1 != 0));
    field(s, "Overflow Bit Support:", 55, yes_no(flags & 2 != 0));
    field(
        s,
        "Indexing Function Version:",
        55,
        &i.map_or(0, |i| i.index_fn).to_string(),
    );
    let hex = |v: u64| format!("0x{v:x}");
    field(
        s,
        "Register Base Address:",
        55,
        &hex(i.map_or(0, |i| i.block.base)),
    );
    field(
        s,
        "Register Block Size:",
        55,
        &hex(i.map_or(0, |i| i.block.pages.into())),
    );
    field(
        s,
        "Total I/O BW Register Offset:",
        55,
        &hex(i.map_or(0, |i| i.total_offset.into())),
    );
    field(
        s,
        "I/O Miss BW Register Offset:",
        55,
        &hex(i.map_or(0, |i| i.miss_offset.into())),
    );
    field(
        s,
        "Total I/O BW  Register Clump Size:",
        55,
        &hex(i.map_or(0, |i| i.total_clump_size.into())),
    );
    field(
        s,
        "I/O Miss Register Clump Size:",
        55,
        &hex(i.map_or(0, |i| i.miss_clump_size.into())),
    );
    field(
        s,
        "I/O BW Counter Width:",
        55,
        &hex(i.map_or(0, |i| i.counter_width.into())),
    );
    field(
        s,
        "I/O BW Counter Upscaling Factor:",
        55,
        &hex(i.map_or(0, |i| i.upscaling)),
    );
    let corr = i.map_or_else(Vec::new, |i| correction_list(&i.correction));
    field(
        s,
        "I/O BW Counter Correction Factor List Length:",
        55,
        &corr.len().to_string(),
    );
    if !corr.is_empty() {
        let list: String = corr.iter().map(|f| format!("0x{f:x} ")).collect();
        let _ = write!(
            s,
            "{:<47}{list}",
            "        I/O BW Counter Correction Factor:"
        );
    }
    s.push_str("\n\n    CARD Info:\n");
    let c = d.card.as_ref();
    let flags = c.map_or(0, |c| c.flags);
    field(
        s,
        "Contention Bitmask Valid:",
        55,
        yes_no(flags & rdt_mmio::erdt::CARD_CONTENTION_VALID != 0),
    );
    field(
        s,
        "Non-Contiguous Bitmasks Supported:",
        55,
        yes_no(flags & rdt_mmio::erdt::CARD_NON_CONTIGUOUS != 0),
    );
    field(
        s,
        "Zero-length Bitmask:",
        55,
        yes_no(flags & rdt_mmio::erdt::CARD_ZERO_LENGTH != 0),
    );
    field(
        s,
        "Contention Bitmask:",
        55,
        &hex(c.map_or(0, |c| c.contention_mask.into())),
    );
    field(
        s,
        "Indexing Function Version:",
        55,
        &c.map_or(0, |c| c.index_fn).to_string(),
    );
    field(
        s,
        "Register Base Address:",
        55,
        &hex(c.map_or(0, |c| c.block.base)),
    );
    field(
        s,
        "Register Block Size:",
        55,
        &hex(c.map_or(0, |c| c.block.pages.into())),
    );
    field(
        s,
        "CAT Register Offset:",
        55,
        &hex(c.map_or(0, |c| c.cat_offset.into())),
    );
    field(
        s,
        "CAT Register Block Size:",
        55,
        &hex(c.map_or(0, |c| c.cat_block_size.into())),
    );
    s.push_str("\n\n");
}

/// `--print-dump-info`: the table of dumpable spaces (pqos/dump.c `pqos_print_dump_info`),
/// and whether it has any row.
#[must_use]
pub fn dump_info(erdt: &Erdt) -> (String, bool) {
    let mut s = String::from("\n");
    let _ = writeln!(
        s,
        "{:<12} {:<12} {:<12} {:<18}   Size (bytes)",
        "Domain ID", "Type", "Space", "Base Address"
    );
    s.push_str(&"-".repeat(72));
    s.push('\n');
    let mut any = false;
    for rows in dump::dump_info(erdt) {
        for r in rows {
            any = true;
            let _ = writeln!(
                s,
                "0x{:02x}         {:<12} {:<12} 0x{:016x}   0x{:08x}",
                r.domain_id,
                if r.cpu { "CPU" } else { "DEVICE" },
                r.space.label(),
                r.block.base,
                r.block.len()
            );
        }
        s.push('\n');
    }
    s.push('\n');
    if !any {
        s.push_str("No MMIO spaces found.\n");
    }
    (s, any)
}

/// The lines of a hex dump of `bytes` (pqos `lib/mmio_dump.c` `print_hex_dump`): per line
/// the byte offset from the window's start (`%06x`), then each element's bytes, highest
/// address first unless `le`, as two hex digits or eight bits each, a space after each
/// element.
#[must_use]
pub fn hex_dump(bytes: &[u8], width: Width, le: bool, binary: bool) -> String {
    let w = usize::try_from(width.bytes()).unwrap_or(8);
    let per_line = width.per_line();
    let mut s = String::new();
    for (n, line) in bytes.chunks(w * per_line).enumerate() {
        let _ = write!(s, "{:06x} ", n * w * per_line);
        for elem in line.chunks(w) {
            let ordered: Vec<u8> = if le {
                elem.to_vec()
            } else {
                elem.iter().rev().copied().collect()
            };
            for b in ordered {
                if binary {
                    let _ = write!(s, "{b:08b}");
                } else {
                    let _ = write!(s, "{b:02x}");
                }
            }
            s.push(' ');
        }
        s.push('\n');
    }
    s
}

/// The domain ids a dump covers, validated (every window checked) before anything is read.
fn run_dump(
    d: &DumpRequest,
    erdt: &Erdt,
    packages: usize,
    io: &mut dyn FnMut() -> Result<Box<dyn rdt_mmio::MmioIo>>,
    out: &mut dyn Write,
) -> Result<()> {
    let ids: Vec<u16> = match &d.domains {
        DumpDomains::Ids(ids) => ids.clone(),
        DumpDomains::Sockets(sockets) => {
            let (cpu, dev) = dump::agents(erdt);
            let n = if d.space.is_cpu() {
                cpu.len()
            } else {
                dev.len()
            };
            let per_socket = (n / packages.max(1)).max(1);
            let mut ids = Vec::new();
            for &s in sockets {
                ids.extend(
                    dump::socket_domains(erdt, s, d.space, per_socket)
                        .map_err(|e| anyhow!("--socket {s}: {e}"))?,
                );
            }
            ids
        }
    };
    let windows = ids
        .iter()
        .map(|&id| dump::window(erdt, id, d.space, d.width, d.offset, d.length))
        .collect::<Result<Vec<_>, _>>()
        .context("--dump")?;
    if d.socket_ignored {
        writeln!(
            out,
            "Dumping MMIO Registers for --dump-domain-id options. --socket is ignored."
        )?;
    }
    let mut regs = io()?;
    for (block, addr, count) in windows {
        writeln!(
            out,
            "MMIO space dump: base={:#x} size={:#x} offset={} len={} width(bytes)={} le={} bin={}",
            block.base,
            block.len(),
            d.offset,
            d.length,
            d.width.bytes(),
            u8::from(d.le),
            u8::from(d.binary)
        )?;
        let bytes = dump::read_window(regs.as_mut(), addr, count * d.width.bytes())?;
        out.write_all(hex_dump(&bytes, d.width, d.le, d.binary).as_bytes())?;
    }
    Ok(())
}

/// `--dump-rmid-regs`: every selection checked against the table first, then read.
fn run_rmid_dump(
    d: &RmidDumpRequest,
    erdt: &Erdt,
    io: &mut dyn FnMut() -> Result<Box<dyn rdt_mmio::MmioIo>>,
    out: &mut dyn Write,
) -> Result<()> {
    let regions: &[u8] = if d.kind.per_region() {
        &d.regions
    } else {
        &[0]
    };
    // Checked before the first read: the domain, the RMIDs, the register's place, through
    // the library's read against a seam that reads nothing.
    struct NoRead;
    impl rdt_mmio::MmioIo for NoRead {
        fn read(&mut self, _: u64) -> std::io::Result<u64> {
            Ok(0)
        }
        fn write(&mut self, _: u64, _: u64) -> std::io::Result<()> {
            Err(std::io::Error::other("read-only"))
        }
    }
    for &id in &d.domains {
        for &region in regions {
            for &rmid in &d.rmids {
                dump::read_rmid(erdt, &mut NoRead, id, d.kind, rmid, region)
                    .context("--dump-rmid-regs")?;
            }
        }
    }
    let mut regs = io()?;
    writeln!(out, "{}", d.kind.heading())?;
    for &id in &d.domains {
        writeln!(out, "DOMAIN ID: {id}")?;
        for &region in regions {
            if d.kind.per_region() {
                writeln!(out, "REGION ID: {region}")?;
            }
            for &rmid in &d.rmids {
                let v = dump::read_rmid(erdt, regs.as_mut(), id, d.kind, rmid, region)
                    .context("--dump-rmid-regs")?;
                if d.binary {
                    writeln!(out, "RMID {rmid:04}. Value: {:064b}", v.raw)?;
                } else {
                    let value = if d.upscale { v.upscaled } else { v.raw };
                    writeln!(out, "RMID {rmid:04}. Value: 0x{value:016x}")?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdt_mmio::mrrm::{MemoryRange, RegionId};

    #[test]
    fn mem_regions_print_as_pqos_with_its_spacing() {
        let r = |base, length, local: Option<u8>, remote: Option<u8>| MemoryRange {
            offset: 0,
            base,
            length,
            local: local.map(RegionId::new),
            remote: remote.map(RegionId::new),
            programming_registers: vec![],
        };
        let mrrm = Mrrm {
            header: rdt_mmio::build::header(b"MRRM"),
            max_regions: 4,
            flags: 0,
            ranges: vec![
                r(0, 0x40_0000_0000, Some(0), Some(1)),
                r(0x100_0000_0000, 0x20_0000_0000, Some(1), None),
            ],
        };
        let want = "Total Memory Regions:  4\nRegion ID Type:        Static\n\n\n\
                    \n\n\nBase Address     : 0x0\nLength           : 0x4000000000\n\
                    Local Region ID  : 0x0\nRemote Region ID: 0x1\n\
                    \n\n\nBase Address     : 0x10000000000\nLength           : 0x2000000000\n\
                    Local Region ID  : 0x1\nRemote Region ID : Not Valid\n\n";
        assert_eq!(mem_regions(&mrrm), want);
        let dynamic = Mrrm { flags: 1, ..mrrm };
        assert!(mem_regions(&dynamic).contains("Region ID Type:        Dynamic\n"));
    }

    #[test]
    fn hex_dumps_order_bytes_by_endianness_and_width() {
        let bytes: Vec<u8> = (0u8..20).collect();
        // qwords, big-endian (pqos's default): highest byte first, two per line
        let be = hex_dump(&bytes[..16], Width::Qword, false, false);
        assert_eq!(be, "000000 0706050403020100 0f0e0d0c0b0a0908 \n");
        let le = hex_dump(&bytes[..16], Width::Qword, true, false);
        assert_eq!(le, "000000 0001020304050607 08090a0b0c0d0e0f \n");
        // bytes: 16 per line, the remainder on a short line with its offset
        let b = hex_dump(&bytes, Width::Byte, true, false);
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("000000 00 01 02 "), "{b}");
        assert_eq!(lines[1], "000010 10 11 12 13 ");
        // binary: eight bits per byte
        assert_eq!(
            hex_dump(&[0x81], Width::Byte, true, true),
            "000000 10000001 \n"
        );
    }

    #[test]
    fn fields_put_values_at_pqos_columns() {
        let mut s = String::new();
        field(&mut s, "Domanin ID:", 55, "3");
        assert_eq!(
            s,
            "        Domanin ID:                                    3\n"
        );
        let mut s = String::new();
        field(&mut s, "Domain ID:", 54, "3");
        assert_eq!(
            s,
            "        Domain ID:                                    3\n"
        );
    }
}
