//! pqos v26.03's options for the RDT 1.3 ACPI tables and the MMIO register dumps
//! (pqos/main.c `long_cmd_opts`, pqos/dump.c, pqos/dump_rmids.c): flattened into
//! [`crate::args::Args`]. The values' syntax is pqos's: lists as `strlisttotab()` takes
//! them, `--space`/`--dump-rmid-type` names ignoring case, `--width` 8 or 64.

use anyhow::{Result, anyhow, bail};
use rdt_mmio::dump;
use rdt_pqos::parse_number;

pub use rdt_mmio::dump::{RmidRegister, Space, Width};

use crate::grammar::parse_id_list;

const HEADING: &str = "RDT 1.3 tables and MMIO register dumps (pqos v26.03)";

/// The table reports and dumps.
#[derive(clap::Args, Debug, Default, Clone)]
#[allow(clippy::struct_excessive_bools)] // pqos's flags are booleans one to one
pub struct TableArgs {
    /// Print the memory regions of the ACPI MRRM table.
    #[arg(long = "print-mem-regions", help_heading = HEADING)]
    pub print_mem_regions: bool,

    /// Print the RDT 1.3 topology of the ACPI ERDT table (every domain's register blocks).
    #[arg(long = "print-topology", help_heading = HEADING)]
    pub print_topology: bool,

    /// Print every MMIO register space that --dump can read.
    #[arg(long = "print-dump-info", help_heading = HEADING)]
    pub print_dump_info: bool,

    /// Dump a window of an MMIO register space (read-only) of --dump-domain-id or --socket.
    #[arg(long = "dump", help_heading = HEADING)]
    pub dump: bool,

    /// --dump: the sockets whose agents to dump (a list: 0,1 or 0-1).
    #[arg(long = "socket", value_name = "SOCKETS", value_parser = u32_list, help_heading = HEADING)]
    pub socket: Option<List<u32>>,

    /// --dump: the RDT domain ids to dump (a list).
    #[arg(long = "dump-domain-id", value_name = "DOMAINS", value_parser = u16_list, help_heading = HEADING)]
    pub dump_domain_id: Option<List<u16>>,

    /// --dump: the space (cmrc, mmrc, marc-opt, marc-min, marc-max, cmrd, ibrd, card).
    #[arg(long = "space", value_name = "SPACE", ignore_case = true, help_heading = HEADING)]
    pub space: Option<Space>,

    /// --dump: the first element to dump, in elements of --width (default 0).
    #[arg(long = "offset", value_name = "N", value_parser = u64_value, help_heading = HEADING)]
    pub offset: Option<u64>,

    /// --dump: how many elements of --width to dump (default: to the end of the space).
    #[arg(long = "length", value_name = "N", value_parser = u64_value, help_heading = HEADING)]
    pub length: Option<u64>,

    /// --dump: the element width in bits, 8 or 64 (default 64).
    #[arg(long = "width", value_name = "BITS", value_parser = width_value, help_heading = HEADING)]
    pub width: Option<Width>,

    /// --dump: bits instead of hexadecimal digits.
    #[arg(long = "binary", help_heading = HEADING)]
    pub binary: bool,

    /// --dump: each element's bytes from the lowest address up (default: from the highest).
    #[arg(long = "le", help_heading = HEADING)]
    pub le: bool,

    /// Dump the registers of --dump-rmids in --dump-rmid-domain-ids.
    #[arg(long = "dump-rmid-regs", help_heading = HEADING)]
    pub dump_rmid_regs: bool,

    /// --dump-rmid-regs: the RMIDs (a list).
    #[arg(long = "dump-rmids", value_name = "RMIDS", value_parser = rmid_list, help_heading = HEADING)]
    pub dump_rmids: Option<List<u32>>,

    /// --dump-rmid-regs: the domain ids (a list).
    #[arg(long = "dump-rmid-domain-ids", value_name = "DOMAINS", value_parser = u16_list, help_heading = HEADING)]
    pub dump_rmid_domain_ids: Option<List<u16>>,

    /// --dump-rmid-regs: the memory regions of `mbm` registers (a list of 0-3; default all).
    #[arg(long = "dump-rmid-mem-regions", value_name = "REGIONS", value_parser = region_list, help_heading = HEADING)]
    pub dump_rmid_mem_regions: Option<List<u8>>,

    /// --dump-rmid-regs: the registers (mbm, l3, io-l3, io-total, io-miss).
    #[arg(long = "dump-rmid-type", value_name = "TYPE", ignore_case = true, help_heading = HEADING)]
    pub dump_rmid_type: Option<RmidRegister>,

    /// --dump-rmid-regs: the raw registers in bits.
    #[arg(long = "dump-rmid-binary", help_heading = HEADING)]
    pub dump_rmid_binary: bool,

    /// --dump-rmid-regs: the counts in bytes (correction and upscaling factors applied).
    #[arg(long = "dump-rmid-upscaling", help_heading = HEADING)]
    pub dump_rmid_upscaling: bool,

    /// Print every I/O RDT device of the ACPI IRDT table, its channels and the commands for them.
    #[arg(long = "print-io-devs", help_heading = HEADING)]
    pub print_io_devs: bool,

    /// Print one I/O RDT device (SEGMENT:BUS:DEVICE.FUNCTION, hexadecimal; repeatable).
    #[arg(long = "print-io-dev", value_name = "DEV", value_parser = pci_device, help_heading = HEADING)]
    pub print_io_dev: Vec<PciDevice>,
}

/// A PCI device: (segment, bus/device/function).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PciDevice(pub u16, pub u16);

fn pci_device(s: &str) -> Result<PciDevice, String> {
    rdt_mmio::iordt::parse_pci_address(s.trim()).map(|(seg, bdf)| PciDevice(seg, bdf))
}

/// A list value (one option, one list: clap would take `Vec` for a repeated option).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct List<T>(pub Vec<T>);

fn ids(s: &str) -> Result<Vec<u32>, String> {
    if s.trim().is_empty() {
        return Err("an empty list".to_owned());
    }
    parse_id_list(s).map_err(|e| e.to_string())
}

fn u32_list(s: &str) -> Result<List<u32>, String> {
    ids(s).map(List)
}

/// The most RMIDs one `--dump-rmids` may name (a domain's RMIDs are a 32-bit range; a dump of
/// every one of 65536 is 65536 lines per domain and region).
const RMID_LIMITS: rdt_pqos::ListLimits = rdt_pqos::ListLimits {
    max_value: u32::MAX as u64,
    max_entries: 65_536,
    what: "RMID",
};

fn rmid_list(s: &str) -> Result<List<u32>, String> {
    if s.trim().is_empty() {
        return Err("an empty list".to_owned());
    }
    let ids = rdt_pqos::parse_pqos_list(s, &RMID_LIMITS).map_err(|e| e.to_string())?;
    Ok(List(
        ids.into_iter()
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
            .collect(),
    ))
}

fn u16_list(s: &str) -> Result<List<u16>, String> {
    ids(s)?
        .into_iter()
        .map(|n| u16::try_from(n).map_err(|_| format!("`{n}`: a domain id is at most 65535")))
        .collect::<Result<_, _>>()
        .map(List)
}

fn region_list(s: &str) -> Result<List<u8>, String> {
    ids(s)?
        .into_iter()
        .map(|n| {
            u8::try_from(n)
                .ok()
                .filter(|r| *r < rdt_mmio::dump::DEFAULT_DUMP_REGIONS)
                .ok_or_else(|| {
                    format!(
                        "`{n}`: memory regions are 0 to {}",
                        rdt_mmio::dump::DEFAULT_DUMP_REGIONS - 1
                    )
                })
        })
        .collect::<Result<_, _>>()
        .map(List)
}

fn u64_value(s: &str) -> Result<u64, String> {
    parse_number(s.trim()).map_err(|e| format!("`{s}`: {e}"))
}

fn width_value(s: &str) -> Result<Width, String> {
    match s.trim() {
        "8" => Ok(Width::Byte),
        "64" => Ok(Width::Qword),
        other => Err(format!(
            "`{other}`: the widths are 8 or 64 (bits; default 64)"
        )),
    }
}

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
    /// `--print-io-devs`.
    IoDevs,
    /// `--print-io-dev` (segment, bdf of each).
    IoDev(Vec<(u16, u16)>),
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
    /// `--space`.
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
pub fn request(a: &TableArgs) -> Result<Option<TablesRequest>> {
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
            space: a.space.ok_or_else(|| {
                anyhow!(
                    "--dump: missing --space ({})",
                    Space::ALL.map(Space::arg).join(" ")
                )
            })?,
            offset: a.offset.unwrap_or(0),
            length: a.length.unwrap_or(0),
            width: a.width.unwrap_or_default(),
            le: a.le,
            binary: a.binary,
        })
    } else if a.print_io_devs {
        TablesRequest::IoDevs
    } else if !a.print_io_dev.is_empty() {
        TablesRequest::IoDev(a.print_io_dev.iter().map(|d| (d.0, d.1)).collect())
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
                .map_or_else(|| (0..dump::DEFAULT_DUMP_REGIONS).collect(), |l| l.0),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_as_pqos_takes_them() {
        assert_eq!(u32_list("0,2-3"), Ok(List(vec![0, 2, 3])));
        assert_eq!(rmid_list("0-511").map(|l| l.0.len()), Ok(512));
        assert!(rmid_list("0-70000").unwrap_err().contains("70000"));
        assert!(u32_list("").is_err());
        assert!(u16_list("70000").unwrap_err().contains("65535"));
        assert_eq!(region_list("3,1"), Ok(List(vec![3, 1])));
        assert!(region_list("4").unwrap_err().contains("0 to 3"));
        assert_eq!(width_value("8"), Ok(Width::Byte));
        assert!(width_value("16").unwrap_err().contains("8 or 64"));
        assert_eq!(u64_value("0x10"), Ok(16));
    }
}
