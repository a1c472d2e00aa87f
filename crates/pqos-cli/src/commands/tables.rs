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

pub use crate::args::tables::{DumpDomains, DumpRequest, RmidDumpRequest, TablesRequest};
use rdt_mmio::dump::{self, Width};
use rdt_mmio::erdt::{CorrectionFactors, Domain, Erdt};
use rdt_mmio::mrrm::Mrrm;

/// What the reports need to know of the platform besides its tables.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The MMIO interface is the one in use ([`mmio_in_use`]).
    pub mmio: bool,
    /// The MSR interface is the one the library opened.
    pub msr: bool,
    /// Sockets (for `--socket`).
    pub packages: usize,
    /// L3 CAT: (classes, CBM bits), on the MSR interface's I/O RDT reports.
    pub l3_cat: Option<(u32, u32)>,
    /// The sysroot (PCI devices under `sys/bus/pci/devices`).
    pub sysroot: std::path::PathBuf,
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

/// Runs `req` on `tables` (and, for the dumps, the registers through `io`), with what
/// `facts` says of the platform.
///
/// # Errors
/// A table the report needs is missing, a selection the table does not have (named), a
/// failed register read. Nothing is printed for a dump whose selection is refused.
pub fn run(
    req: &TablesRequest,
    tables: &AcpiTables,
    facts: &Facts,
    io: &mut dyn FnMut() -> Result<Box<dyn rdt_mmio::MmioIo>>,
    out: &mut dyn Write,
) -> Result<()> {
    let (mmio, packages) = (facts.mmio, facts.packages);
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
        TablesRequest::IoDevs | TablesRequest::IoDev(_) => {
            let option = if *req == TablesRequest::IoDevs {
                "--print-io-devs"
            } else {
                "--print-io-dev"
            };
            let Some(irdt) = &tables.irdt else {
                bail!("{option}: IRDT info not available (the platform has no ACPI IRDT table)");
            };
            let iface = if mmio {
                "mmio"
            } else if facts.msr {
                "msr"
            } else {
                bail!("{option} command is supported in msr and mmio interfaces only");
            };
            let all = rdt_mmio::iordt::io_devices(irdt, tables.erdt.as_ref());
            let devs: Vec<&rdt_mmio::iordt::IoDevice> = match req {
                TablesRequest::IoDev(sel) => sel
                    .iter()
                    .map(|&(seg, bdf)| {
                        all.iter()
                            .find(|d| d.segment == seg && d.bdf == bdf)
                            .ok_or_else(|| {
                                anyhow!(
                                    "{option}: {seg:04x}:{:02x}:{:02x}.{:x} is not an I/O RDT device of the IRDT table (its devices: {})",
                                    bdf >> 8,
                                    (bdf >> 3) & 0x1f,
                                    bdf & 7,
                                    all.iter().map(rdt_mmio::iordt::IoDevice::address).collect::<Vec<_>>().join(" ")
                                )
                            })
                    })
                    .collect::<Result<_>>()?,
                _ => all.iter().collect(),
            };
            let max_clos = tables.erdt.as_ref().map_or(0, |e| e.max_clos);
            out.write_all(io_devs(&devs, iface, max_clos, facts).as_bytes())?;
        }
    }
    Ok(())
}

/// What the PCI sysfs says of a device: revision, NUMA node, kernel driver; `None` when
/// the device is not there (pqos: `Unable to get I/O device ... PCI information`).
fn pci_info(
    root: &std::path::Path,
    addr: &str,
) -> Option<(Option<u8>, Option<i32>, Option<String>)> {
    let dir = root.join("sys/bus/pci/devices").join(addr);
    if !dir.is_dir() {
        return None;
    }
    let read = |f: &str| rdt_pqos::file::read_text(dir.join(f), 64).ok();
    let rev = read("revision").and_then(|t| {
        let t = t.trim().trim_start_matches("0x").to_owned();
        u8::from_str_radix(&t, 16).ok()
    });
    let numa = read("numa_node")
        .and_then(|t| t.trim().parse::<i32>().ok())
        .filter(|n| *n >= 0);
    let driver = std::fs::read_link(dir.join("driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    Some((rev, numa, driver))
}

/// `--print-io-devs` / `--print-io-dev`: the I/O RDT commands, then each device with its
/// channels, their links' MMIO addresses, and the commands that monitor and allocate them
/// (pqos/cap.c `cap_print_io_devs`). PCI vendor and device names (pqos reads pci.ids) are
/// not printed: `PCI device` stands for them.
#[must_use]
#[allow(clippy::too_many_lines)] // one statement per pqos line, in pqos's order
pub fn io_devs(
    devs: &[&rdt_mmio::iordt::IoDevice],
    iface: &str,
    max_clos: u32,
    facts: &Facts,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Enable I/O RDT            : pqos --iface={iface} l3iordt-on"
    );
    let _ = writeln!(
        s,
        "Disable I/O RDT           : pqos --iface={iface} l3iordt-off"
    );
    let _ = writeln!(
        s,
        "Reset I/O RDT Allocation  : pqos --iface={iface} --alloc-reset or pqos --iface={iface} -R"
    );
    let _ = writeln!(
        s,
        "Reset I/O RDT Monitoring  : pqos --iface={iface} --mon-reset or pqos --iface={iface} -r -d"
    );
    for d in devs {
        let addr = d.address();
        let _ = write!(s, "\n{addr}: ");
        if let Some((rev, numa, driver)) = pci_info(&facts.sysroot, &addr) {
            s.push_str("PCI device:  ");
            if let Some(r) = rev.filter(|r| *r != 0) {
                let _ = write!(s, " (rev {r:02x})");
            }
            s.push('\n');
            if let Some(n) = numa {
                let _ = writeln!(s, "\tNUMA                 : {n}");
            }
            if let Some(k) = driver {
                let _ = writeln!(s, "\tKernel driver in use : {k}");
            }
        } else {
            let _ = writeln!(s, "Unable to get I/O device {addr} PCI information");
            s.push_str("PCI device:  \n");
        }
        if iface == "mmio" {
            let _ = writeln!(s, "\tDomain ID            : 0x{:x}", d.domain.unwrap_or(0));
        }
        s.push_str("\tAssociated Channels  : ");
        for c in &d.channels {
            let _ = write!(s, "0x{:x}         ", c.channel.get());
        }
        s.push('\n');
        s.push_str("\tMMIO Addresses       : ");
        for c in &d.channels {
            let _ = write!(s, "0x{:x}       ", c.mmio.unwrap_or(0));
        }
        s.push('\n');
        s.push_str("\tMonitoring Commands:\n");
        for (n, c) in d.channels.iter().enumerate() {
            if n > 0 {
                s.push('\n');
            }
            let _ = writeln!(s, "\t\tpqos --iface={iface} --mon-dev=all:{addr}@{}", c.vc);
            let _ = writeln!(
                s,
                "\t\tpqos --iface={iface} --mon-channel=all:0x{:x}",
                c.channel.get()
            );
        }
        let classes = if iface == "mmio" {
            Some(max_clos)
        } else {
            facts.l3_cat.map(|(c, _)| c)
        };
        if let Some(c) = classes {
            let _ = writeln!(s, "\n\tAvailable CLOS: 0 to {}", i64::from(c) - 1);
        }
        s.push_str("\tAllocation Commands:\n");
        for (n, c) in d.channels.iter().enumerate() {
            if n > 0 {
                s.push('\n');
            }
            let _ = writeln!(
                s,
                "\t\tpqos --iface={iface} -a channel:<CLOS>={addr}@{}",
                c.vc
            );
            let _ = writeln!(
                s,
                "\t\tpqos --iface={iface} -a channel:<CLOS>=0x{:x}",
                c.channel.get()
            );
        }
        s.push_str("\n\tAfter/Before allocation commands, assign required Cache Ways to CLOS\n");
        if iface == "mmio" {
            if let Some(w) = d.io_l3_ways {
                let _ = writeln!(s, "\tAvailable Cache Ways: {w}");
            }
            let dom = d.domain.unwrap_or(0);
            let _ = writeln!(
                s,
                "\tFor example, set COS 14 to the first 4 L3 cache ways and COS 10 to the next 8 L3 cache ways in Device Domain 0x{dom:x}"
            );
            let _ = writeln!(
                s,
                "\tpqos --iface={iface} --alloc-domain-id=0x{dom:x} -e \"llc:14=0x000f;llc:10=0x0ff0;\""
            );
        } else {
            if let Some((_, ways)) = facts.l3_cat {
                let _ = writeln!(s, "\tAvailable Cache Ways: {ways}");
            }
            s.push_str(
                "\tFor example, set COS 14 to the first 4 L3 cache ways and COS 10 to the next 8 L3 cache ways\n",
            );
            let _ = writeln!(
                s,
                "\tpqos --iface={iface} -e \"llc:14=0x000f;llc:10=0x0ff0;\""
            );
        }
    }
    s.push('\n');
    s
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

/// `0x..` words, each followed by a space (pqos's lists), at least `digits` hex digits.
fn hex_words(values: impl IntoIterator<Item = u64>, digits: usize) -> String {
    values.into_iter().fold(String::new(), |mut s, v| {
        let _ = write!(s, "0x{v:0digits$x} ");
        s
    })
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

#[allow(clippy::too_many_lines)] // one statement per pqos line, in pqos's order
fn cpu_agent(s: &mut String, d: &Domain) {
    s.push_str("    CACD Info:\n");
    // sic: pqos v26.03 spells it so
    field(s, "Domanin ID:", 55, &d.id.to_string());
    let ids = hex_words(d.cpu_agents.iter().map(|&a| u64::from(a)), 0);
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
        let list = hex_words(corr.iter().map(|&f| u64::from(f)), 0);
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

#[allow(clippy::too_many_lines)] // one statement per pqos line, in pqos's order
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
        let path = hex_words(
            dase.path
                .iter()
                .flat_map(|(dev, func)| [u64::from(*dev), u64::from(*func)]),
            2,
        );
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
        let list = hex_words(corr.iter().map(|&f| u64::from(f)), 0);
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
    // Checked before the first read: the domain, the RMIDs, the register's place.
    for &id in &d.domains {
        for &region in regions {
            for &rmid in &d.rmids {
                dump::rmid_register(erdt, id, d.kind, rmid, region).context("--dump-rmid-regs")?;
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
            let values = dump::read_rmids(erdt, regs.as_mut(), id, d.kind, &d.rmids, region)
                .context("--dump-rmid-regs")?;
            for (&rmid, v) in d.rmids.iter().zip(values) {
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
    fn io_devs_print_channels_and_commands_per_interface() {
        use rdt_mmio::iordt::{IoChannel, IoDevice};
        use rdt_mmio::irdt::ChannelId;
        let dev = IoDevice {
            segment: 0,
            bdf: 0x1608,
            device_type: 1,
            channels: vec![
                IoChannel {
                    vc: 0,
                    channel: ChannelId::new(0, 1, 0),
                    mmio: Some(0xfc00_0000),
                },
                IoChannel {
                    vc: 1,
                    channel: ChannelId::new(0, 1, 1),
                    mmio: None,
                },
            ],
            domain: Some(0x100),
            io_l3_ways: Some(12),
        };
        let facts = Facts {
            l3_cat: Some((15, 11)),
            sysroot: "/nonexistent".into(),
            ..Facts::default()
        };
        let mmio = io_devs(&[&dev], "mmio", 16, &facts);
        assert!(mmio.contains(
            "\n0000:16:01.0: Unable to get I/O device 0000:16:01.0 PCI information\nPCI device:  \n\tDomain ID            : 0x100\n\tAssociated Channels  : 0x10100         0x10101         \n\tMMIO Addresses       : 0xfc000000       0x0       \n"
        ), "{mmio}");
        assert!(mmio.contains(
            "\t\tpqos --iface=mmio --mon-channel=all:0x10100\n\n\t\tpqos --iface=mmio --mon-dev=all:0000:16:01.0@1\n"
        ), "{mmio}");
        assert!(mmio.contains("\n\tAvailable CLOS: 0 to 15\n"), "{mmio}");
        assert!(mmio.contains("\tAvailable Cache Ways: 12\n"), "{mmio}");
        assert!(mmio.contains("--alloc-domain-id=0x100 -e"), "{mmio}");
        let msr = io_devs(&[&dev], "msr", 16, &facts);
        assert!(!msr.contains("Domain ID"), "{msr}");
        assert!(
            msr.contains("\n\tAvailable CLOS: 0 to 14\n\tAllocation Commands:\n"),
            "{msr}"
        );
        assert!(msr.contains("\tAvailable Cache Ways: 11\n"), "{msr}");
        assert!(
            msr.ends_with("\tpqos --iface=msr -e \"llc:14=0x000f;llc:10=0x0ff0;\"\n\n"),
            "{msr}"
        );
    }

    #[test]
    fn topology_prints_a_cpu_agent_block_line_for_line() {
        use rdt_mmio::erdt::{Cmrc, Mmrc};
        use rdt_mmio::{Domain, RegisterBlock};
        let block = |base, pages| RegisterBlock { base, pages };
        let d = Domain {
            offset: 0,
            flags: rdt_mmio::erdt::RMDD_CPU_L3,
            id: 3,
            max_rmid: 7,
            io_l3_slices: 0,
            io_l3_sets: 0,
            io_l3_ways: 0,
            control: block(0xfe00_0000, 1),
            cpu_agents: vec![0, 0x12],
            device_agents: vec![],
            cmrc: Some(Cmrc {
                offset: 0,
                flags: 1,
                index_fn: 1,
                block: block(0xfe00_1000, 2),
                clump_size: 8,
                clump_stride: 64,
                upscaling: 0x12000,
            }),
            mmrc: Some(Mmrc {
                offset: 0,
                flags: 2,
                index_fn: 1,
                block: block(0xfe01_0000, 16),
                counter_width: 44,
                upscaling: 64,
                correction: CorrectionFactors::Single(0x10000),
            }),
            marc: None,
            carc: None,
            cmrd: None,
            ibrd: None,
            ibad: None,
            card: None,
        };
        let erdt = Erdt {
            header: rdt_mmio::build::header(b"ERDT"),
            max_clos: 16,
            domains: vec![d],
        };
        let text = topology(&erdt);
        let want = [
            "CLOS:           16",
            "CPU Agents:     1",
            "Device Agents:  0",
            "",
            "",
            "",
            "",
            "",
            "Domain ID 3",
            "",
            "    Type: CPU",
            "    CACD Info:",
            "        Domanin ID:                                    3",
            "        Enumeration IDs:                               0x0 0x12 ",
            "",
            "    CMRC Info:",
            "        Unavailable Bit Support:                       Yes",
            "        Indexing Function Version:                     1",
            "        CMT Register Block Base Address:               0xfe001000",
            "        CMT Register Block Size:                       0x2",
            "        CMT Register Clump Size:                       0x8",
            "        CMT Register Clump Stride:                     0x40",
            "        CMT Counter Upscaling Factor:                  0x12000",
            "",
            "",
            "    MMRC Info:",
            "        Unavailable Bit Support:                       No",
            "        Overflow Bit Support:                          Yes",
            "        Indexing Function Version:                     1",
            "        MBM Register Block Base Address:               0xfe010000",
            "        MBM Register Block Size:                       0x10",
            "        MBM Counter Width:                             0x2c",
            "        MBM Counter Upscaling Factor:                  0x40",
            "        MBM Correction Factor List Length:             1",
            "        MBM Correction Factor:                 0x10000 ",
            "",
            "",
            "",
            "    MARC Info:",
            "        MBA Optimal Control Window:                    No",
            "",
        ]
        .join("\n");
        assert!(text.starts_with(&want), "{text}");
        // no MARC: zeros, as pqos's zeroed structure prints
        assert!(
            text.contains("        MBA BW Control Window Range:                   0\n\n\n"),
            "{text}"
        );
        assert!(text.ends_with("\n\n\n"), "{text:?}");
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
