//! The RDT 1.3 MMIO generation on the simulated platform: the ACPI tables (ERDT, MRRM, IRDT)
//! firmware would publish, the CXL regions the kernel would map, and the MMIO register
//! blocks the ERDT locates, with region-aware bandwidth counters that move with the workload
//! model's traffic and region-aware MBA that throttles it.
//!
//! Served as `sys/firmware/acpi/tables/{ERDT,MRRM,IRDT}`, `sys/bus/cxl/devices/regionN`
//! and `dev/mem` under a mount ([`crate::fs`]), and in-process through
//! [`rdt_mmio::MmioIo`] on a [`crate::SimHandle`].
//!
//! # The model (`xeon-rdt13`; what is synthesized: `models/PROVENANCE.md`)
//! - One CPU resource management domain per L3 (per socket), id = the L3 id, its CPU agents
//!   the x2APIC ids of the L3's CPUs; max RMID = the CPUID's RMIDs - 1; max CLOS = the L3
//!   CAT classes. Register blocks at `0xfe00_0000 + 1 MiB × domain`: `RDT_CTRL` (+0),
//!   CMRC (+0x1000, clumps of 8 RMIDs 64 bytes apart, 64 KiB units as the CPUID's), MMRC
//!   (+0x10000, 16 pages, 44-bit counters of 64-byte units, a correction factor per RMID
//!   `1 + rmid/4096` in 16.16 fixed point), MARC optimal/min/max (+0x20000/+0x21000/+0x22000,
//!   control window 0x1ff).
//! - One I/O domain per package (id `0x100 + package`, `0xfd00_0000 + 1 MiB × package`)
//!   with two PCIe devices (DACD), CMRD, IBRD and CARD, and one IRDT RMUD per package whose
//!   two devices use the two channels of one link.
//! - Two memory regions: 0 = DDR (256 GiB per package from `256 GiB × package`), 1 = CXL
//!   (a 128 GiB CXL window per package from `0x100_0000_0000 + 128 GiB × package`, also
//!   shown as `sys/bus/cxl/devices/regionN`); MRRM max regions 4.
//! - Traffic: each CPU's memory traffic ([`crate::CpuActivity::traffic_bytes_per_s`]) is split
//!   across regions by the CPU's split ([`SimPlatform::set_region_split`]; default 70 % DDR,
//!   30 % CXL) and counted under the CPU's RMID (IA32_PQR_ASSOC) in its domain.
//! - Region-aware MBA: the maximum bandwidth field of the CPU's class (IA32_PQR_ASSOC's COS)
//!   for region `r` scales that region's traffic by `max_r = field / control window` (at
//!   most 1): a delay-style throttle per region. The CPU's throttle is the classic MBA one
//!   ([`crate::model`], "Misses, memory traffic and throttling") further scaled by
//!   `g = Σ split_r × max_r`, so its IPC falls as a throttled bandwidth-bound workload's
//!   does; its achieved traffic goes to region `r` in the share `split_r × max_r / g`
//!   (what the counters count and what loads the region). The optimal and minimum fields
//!   are kept, not modelled.
//! - Region bandwidth: each NUMA node's regions are memory domains of their own in the
//!   workload model's contention ([`crate::model`], "Memory bandwidth"): DDR with the node's
//!   peak, CXL with [`CXL_PEAK_BYTES_PER_S`] per package (divided among its nodes), so an
//!   aggressor that saturates CXL slows the CXL misses of every CPU, and a CXL limit on it
//!   relieves them.
//! - Registers (module [`rdt_mmio::regs`]): counters read as `count mod 2^width` with bit 62
//!   (overflow) when the count moved by 2^width or more since the register was last read,
//!   raw counts before the correction factor (`raw = count × 65536 / factor`); occupancy is
//!   the model's L3 occupancy of the RMID. `RDT_CTRL` bit 2 (legacy total mode) resets set;
//!   MBA fields reset to the window (optimal, maximum) and 0 (minimum). Writes to counter
//!   blocks, reserved bits, or addresses outside every block fail with EIO. Saved with
//!   the machine's state ([`MmioSaved`]: control registers, counts, splits), so separate
//!   processes act on one machine.

use std::collections::BTreeMap;
use std::io;

use rdt_core::{CacheDomain, LogicalCpu};
use rdt_mmio::erdt::{
    self, Card, Cmrc, Cmrd, CorrectionFactors, DeviceScope, Domain, Erdt, Ibrd, Marc, MbaControl,
    Mmrc, RegisterBlock,
};
use rdt_mmio::irdt::{self, ChannelId, Device, DeviceChannel, Irdt, Link, Rmud};
use rdt_mmio::mrrm::{MemoryRange, Mrrm, RegionId};
use rdt_mmio::{build, regs};

use crate::SimPlatform;
use crate::vfs::err;
use crate::vfs::errno::{EINVAL, EIO};

/// GiB, bytes.
mod iotags;
mod iotraffic;

pub use iotraffic::IoTraffic;

const GIB: u64 = 1 << 30;
/// Base of the CPU domains' register blocks.
const CPU_BASE: u64 = 0xfe00_0000;
/// Base of the I/O domains' register blocks.
const IO_BASE: u64 = 0xfd00_0000;
/// Distance between two domains' blocks.
const DOMAIN_STRIDE: u64 = 0x10_0000;
/// The MBA control window: the field value of full bandwidth.
pub const CONTROL_WINDOW: u16 = 0x1ff;
/// MMRC counter width, bits.
pub const MBM_WIDTH: u8 = 44;
/// Bytes per MMRC count.
pub const MBM_UPSCALE: u64 = 64;
/// Memory regions of the model: 0 DDR, 1 CXL.
pub const REGIONS: usize = 2;
/// The default traffic split over the regions (DDR, CXL).
pub const DEFAULT_SPLIT: [f64; REGIONS] = [0.7, 0.3];

/// Which RDT 1.3 parts a built-in model carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Generation {
    /// None: the RDT of its CPUID only.
    None,
    /// ERDT, MRRM, IRDT and the MMIO registers (`xeon-rdt13`).
    Rdt13,
    /// An IRDT only (`sapphire-rapids`: I/O RDT devices and channels, no ERDT).
    IrdtOnly,
}

/// The MMIO state of a simulated RDT 1.3 platform (module docs).
#[derive(Clone, Debug)]
pub struct MmioModel {
    erdt: Option<Erdt>,
    mrrm: Option<Mrrm>,
    irdt: Option<Irdt>,
    tables: BTreeMap<&'static str, Vec<u8>>,
    cxl_windows: Vec<(u64, u64)>,
    /// ERDT CPU domain id of each L3 domain.
    domain_of_l3: BTreeMap<CacheDomain, u16>,
    rdt_ctrl: BTreeMap<u16, u64>,
    /// MBA registers by (domain, control, byte offset in the block).
    mba: BTreeMap<(u16, MbaControl, u64), u64>,
    /// Bandwidth counts (MMRC units, corrected) by (domain, RMID, region).
    counts: BTreeMap<(u16, u32, u8), f64>,
    /// The count each counter had when last read, for the overflow bit.
    last_read: BTreeMap<(u16, u32, u8), f64>,
    /// Per CPU: its traffic's share per region.
    split: Vec<[f64; REGIONS]>,
    /// I/O CAT registers by address.
    io_regs: BTreeMap<u64, u64>,
    /// The IRDT links' tagging registers: the 8-byte words that are not 0, by address
    /// ([`iotags`]).
    tags: BTreeMap<u64, u64>,
    accesses: (u64, u64),
}

fn block(base: u64, pages: u32) -> RegisterBlock {
    RegisterBlock { base, pages }
}

impl MmioModel {
    /// The tables and registers of `generation` for platform `p`.
    pub(crate) fn new(p: &SimPlatform, generation: Generation) -> Option<Self> {
        let packages = p.topology().packages();
        let irdt = (generation != Generation::None).then(|| irdt_for(&packages));
        let (erdt, mrrm, windows, domain_of_l3) = if generation == Generation::Rdt13 {
            let (e, map) = erdt_for(p, &packages);
            let (m, w) = mrrm_for(&packages);
            (Some(e), Some(m), w, map)
        } else {
            (None, None, Vec::new(), BTreeMap::new())
        };
        irdt.as_ref()?;
        // The model holds what its bytes parse to (offsets, lengths, checksums as served);
        // the bytes come from this module's own descriptions, checked by its tests.
        let mut tables = BTreeMap::new();
        let erdt = erdt.map(|e| {
            let bytes = build::erdt(&e);
            let parsed = Erdt::parse(&bytes).expect("the model's ERDT parses");
            tables.insert("ERDT", bytes);
            parsed
        });
        let mrrm = mrrm.map(|m| {
            let bytes = build::mrrm(&m);
            let parsed = Mrrm::parse(&bytes).expect("the model's MRRM parses");
            tables.insert("MRRM", bytes);
            parsed
        });
        let irdt = irdt.map(|i| {
            let bytes = build::irdt(&i);
            let parsed = Irdt::parse(&bytes).expect("the model's IRDT parses");
            tables.insert("IRDT", bytes);
            parsed
        });
        let mut m = Self {
            erdt,
            mrrm,
            irdt,
            tables,
            cxl_windows: windows,
            domain_of_l3,
            rdt_ctrl: BTreeMap::new(),
            mba: BTreeMap::new(),
            counts: BTreeMap::new(),
            last_read: BTreeMap::new(),
            split: vec![DEFAULT_SPLIT; p.topology().cpus().len()],
            io_regs: BTreeMap::new(),
            tags: BTreeMap::new(),
            accesses: (0, 0),
        };
        m.reset_registers();
        Some(m)
    }

    /// Power-on values of the control registers (module docs); counters are kept.
    pub fn reset_registers(&mut self) {
        self.rdt_ctrl.clear();
        self.mba.clear();
        self.io_regs.clear();
        self.tags.clear();
        let Some(e) = &self.erdt else { return };
        for d in &e.domains {
            self.rdt_ctrl.insert(d.id, regs::RDT_CTRL_TOTAL_MODE);
            let Some(marc) = &d.marc else { continue };
            let full = (0..regs::MBA_REGIONS_PER_REG).fold(0, |r, region| {
                regs::with_mba_field(r, region, CONTROL_WINDOW)
            });
            for control in MbaControl::ALL {
                let v = if control == MbaControl::Min { 0 } else { full };
                for clos in 0..e.max_clos {
                    if marc.address(control, 0, clos).is_some() {
                        self.mba
                            .insert((d.id, control, regs::mba_offset(0, clos)), v);
                    }
                }
            }
        }
    }

    /// The bytes of table `signature` (`ERDT`, `MRRM`, `IRDT`), if the model has it.
    #[must_use]
    pub fn table(&self, signature: &str) -> Option<&[u8]> {
        self.tables.get(signature).map(Vec::as_slice)
    }

    /// The tables the model has, by signature.
    pub fn tables(&self) -> impl Iterator<Item = (&'static str, &[u8])> {
        self.tables.iter().map(|(k, v)| (*k, v.as_slice()))
    }

    /// The CXL regions the model's kernel maps, as (base, size).
    #[must_use]
    pub fn cxl_windows(&self) -> &[(u64, u64)] {
        &self.cxl_windows
    }

    /// The parsed ERDT.
    #[must_use]
    pub const fn erdt(&self) -> Option<&Erdt> {
        self.erdt.as_ref()
    }

    /// The parsed MRRM.
    #[must_use]
    pub const fn mrrm(&self) -> Option<&Mrrm> {
        self.mrrm.as_ref()
    }

    /// The parsed IRDT.
    #[must_use]
    pub const fn irdt(&self) -> Option<&Irdt> {
        self.irdt.as_ref()
    }

    /// Register (reads, writes) so far.
    #[must_use]
    pub const fn accesses(&self) -> (u64, u64) {
        self.accesses
    }

    /// The bandwidth count of (domain, RMID, region) in bytes, as the model counted it
    /// (ground truth for tests).
    #[must_use]
    pub fn region_bytes(&self, domain: u16, rmid: u32, region: u8) -> f64 {
        self.counts
            .get(&(domain, rmid, region))
            .copied()
            .unwrap_or(0.0)
            * u64_f64(MBM_UPSCALE)
    }

    /// The maximum-bandwidth factor (field / window, at most 1) of `clos` in `domain` for
    /// `region`.
    fn max_factor(&self, domain: u16, clos: u32, region: u8) -> f64 {
        let reg = self
            .mba
            .get(&(domain, MbaControl::Max, regs::mba_offset(region, clos)))
            .copied()
            .unwrap_or(u64::MAX);
        (f64::from(regs::mba_field(reg, region)) / f64::from(CONTROL_WINDOW)).min(1.0)
    }

    /// Where CPU `i`'s memory traffic goes when its class `clos` in L3 `l3` is throttled by
    /// region (module docs, "Region-aware MBA"): per region, its share of the CPU's achieved
    /// traffic (summing to 1), and the factor `g = Σ split_r × max_r` (0..=1) by which the
    /// region limits scale the CPU's wanted traffic. `None` for an L3 outside every ERDT
    /// domain.
    pub(crate) fn region_traffic(
        &self,
        i: usize,
        l3: CacheDomain,
        clos: u32,
    ) -> Option<([f64; REGIONS], f64)> {
        let &domain = self.domain_of_l3.get(&l3)?;
        let split = self.split.get(i).copied().unwrap_or(DEFAULT_SPLIT);
        let mut limited = [0.0; REGIONS];
        for ((r, share), out) in (0u8..).zip(split).zip(&mut limited) {
            *out = share * self.max_factor(domain, clos, r);
        }
        let scale: f64 = limited.iter().sum();
        if scale <= 0.0 {
            // nothing moves: keep the unthrottled split for the (zero) counts
            return Some((split, 0.0));
        }
        Some((limited.map(|l| l / scale), scale))
    }

    /// Adds `dt` seconds of `traffic` (bytes/s, achieved) in L3 `l3` under `rmid`, spread
    /// over the regions by `split` ([`MmioModel::region_traffic`]).
    pub(crate) fn accumulate(
        &mut self,
        l3: CacheDomain,
        rmid: u32,
        split: [f64; REGIONS],
        traffic: f64,
        dt: f64,
    ) {
        let Some(&domain) = self.domain_of_l3.get(&l3) else {
            return;
        };
        for (r, share) in (0u8..).zip(split) {
            let bytes = traffic * share * dt;
            *self.counts.entry((domain, rmid, r)).or_default() += bytes / u64_f64(MBM_UPSCALE);
        }
    }

    fn domain_at(&self, addr: u64) -> Option<&Domain> {
        self.erdt
            .as_ref()?
            .domains
            .iter()
            .find(|d| d.register_blocks().iter().any(|(_, b)| b.contains(addr)))
    }
}

fn u64_f64(v: u64) -> f64 {
    #[allow(clippy::cast_precision_loss)] // register-sized constants, exact in f64
    let f = v as f64;
    f
}

/// The ERDT of `p`: a CPU domain per L3, an I/O domain per package (module docs).
#[allow(clippy::too_many_lines)] // one description per domain kind, field by field
fn erdt_for(p: &SimPlatform, packages: &[u32]) -> (Erdt, BTreeMap<CacheDomain, u16>) {
    let caps = p.capabilities();
    let max_rmid = caps
        .monitoring
        .get()
        .map_or(0, |m| m.num_rmids.saturating_sub(1));
    let max_clos = caps.l3_cat.get().map_or(1, |c| c.num_classes);
    let cmt_up = caps
        .monitoring
        .get()
        .map_or(65536, |m| u64::from(m.upscaling_factor));
    let mut l3s: Vec<CacheDomain> = p.topology().cpus().iter().filter_map(|c| c.l3).collect();
    l3s.sort_unstable();
    l3s.dedup();
    let mut domains = Vec::new();
    let mut map = BTreeMap::new();
    for (k, &l3) in (0u64..).zip(&l3s) {
        let id = u16::try_from(l3.get()).unwrap_or(u16::MAX);
        map.insert(l3, id);
        let base = CPU_BASE + k * DOMAIN_STRIDE;
        let agents = p
            .topology()
            .cpus()
            .iter()
            .filter(|c| c.l3 == Some(l3))
            .filter_map(|c| p.x2apic_id(c.cpu))
            .collect();
        let cmt_pages = u32::try_from((u64::from(max_rmid) + 1) * regs::REG_BYTES)
            .unwrap_or(u32::MAX)
            .div_ceil(4096)
            .max(1);
        domains.push(Domain {
            offset: 0,
            flags: erdt::RMDD_CPU_L3,
            id,
            max_rmid,
            io_l3_slices: 0,
            io_l3_sets: 0,
            io_l3_ways: 0,
            control: block(base, 1),
            cpu_agents: agents,
            device_agents: Vec::new(),
            cmrc: Some(Cmrc {
                offset: 0,
                flags: 0,
                index_fn: erdt::INDEX_FN_V1,
                block: block(base + 0x1000, cmt_pages),
                clump_size: 8,
                clump_stride: 64,
                upscaling: cmt_up,
            }),
            mmrc: Some(Mmrc {
                offset: 0,
                flags: 0,
                index_fn: erdt::INDEX_FN_V1,
                block: block(base + 0x1_0000, 16),
                counter_width: MBM_WIDTH,
                upscaling: MBM_UPSCALE,
                correction: CorrectionFactors::PerRmid(
                    (0..=max_rmid).map(|r| 0x1_0000 + r * 16).collect(),
                ),
            }),
            marc: Some(Marc {
                offset: 0,
                flags: 0,
                index_fn: erdt::INDEX_FN_V1,
                optimal: block(base + 0x2_0000, 1),
                min: block(base + 0x2_1000, 1),
                max: block(base + 0x2_2000, 1),
                control_window: u32::from(CONTROL_WINDOW),
            }),
            carc: None,
            cmrd: None,
            ibrd: None,
            ibad: None,
            card: None,
        });
    }
    for (k, &pkg) in (0u64..).zip(packages) {
        let base = IO_BASE + k * DOMAIN_STRIDE;
        let bus = u8::try_from(0x16 + 0x80 * (k % 2)).unwrap_or(0x16);
        domains.push(Domain {
            offset: 0,
            flags: erdt::RMDD_IO_L3,
            id: 0x100 + u16::try_from(pkg).unwrap_or(0),
            max_rmid: 63,
            io_l3_slices: 4,
            io_l3_sets: 64,
            io_l3_ways: 12,
            control: block(base, 1),
            cpu_agents: Vec::new(),
            device_agents: (0..2)
                .map(|dev| DeviceScope {
                    offset: 0,
                    kind: 1,
                    segment: 0,
                    start_bus: bus,
                    path: vec![(dev, 0)],
                })
                .collect(),
            cmrc: None,
            mmrc: None,
            marc: None,
            carc: None,
            cmrd: Some(Cmrd {
                offset: 0,
                flags: 0,
                index_fn: erdt::INDEX_FN_V1,
                block: block(base + 0x1000, 1),
                register_offset: 0,
                clump_size: 8,
                upscaling: cmt_up,
            }),
            ibrd: Some(Ibrd {
                offset: 0,
                flags: 0,
                index_fn: erdt::INDEX_FN_V1,
                block: block(base + 0x2000, 2),
                total_offset: 0,
                miss_offset: 0x1000,
                total_clump_size: 8,
                miss_clump_size: 8,
                counter_width: MBM_WIDTH,
                upscaling: MBM_UPSCALE,
                correction: CorrectionFactors::None,
            }),
            ibad: None,
            card: Some(Card {
                offset: 0,
                flags: erdt::CARD_CONTENTION_VALID,
                contention_mask: 0x3,
                index_fn: erdt::INDEX_FN_V1,
                block: block(base + 0x4000, 1),
                cat_offset: 0,
                cat_block_size: 0x100,
            }),
        });
    }
    let e = Erdt {
        header: build::header(b"ERDT"),
        max_clos,
        domains,
    };
    (e, map)
}

/// The MRRM: per package a DDR range (region 0) and a CXL range (region 1).
fn mrrm_for(packages: &[u32]) -> (Mrrm, Vec<(u64, u64)>) {
    let mut ranges = Vec::new();
    let mut windows = Vec::new();
    for (k, _) in (0u64..).zip(packages) {
        let range = |base, length, region| MemoryRange {
            offset: 0,
            base,
            length,
            local: Some(RegionId::new(region)),
            remote: Some(RegionId::new(region)),
            programming_registers: Vec::new(),
        };
        ranges.push(range(k * 256 * GIB, 256 * GIB, 0));
        let cxl = (0x100_0000_0000 + k * 128 * GIB, 128 * GIB);
        ranges.push(range(cxl.0, cxl.1, 1));
        windows.push(cxl);
    }
    (
        Mrrm {
            header: build::header(b"MRRM"),
            max_regions: 4,
            flags: 0,
            ranges,
        },
        windows,
    )
}

/// The IRDT: per package an RMUD with one link of two channels and two devices on it.
fn irdt_for(packages: &[u32]) -> Irdt {
    let rmuds = (0u8..)
        .zip(packages)
        .map(|(k, _)| {
            let bus = 0x16 + 0x80 * (u16::from(k) % 2);
            let link = Link {
                offset: 0,
                link_type: 0,
                enum_id: 1,
                channel_count: 2,
                flags: irdt::RCS_RMID_TAGGING | irdt::RCS_CLOS_TAGGING,
                rmid_block_offset: 0x100,
                clos_block_offset: 0x200,
                mmio: 0xfc00_0000 + u64::from(k) * DOMAIN_STRIDE,
                channels: (0..2).map(|c| ChannelId::new(k, 1, c)).collect(),
            };
            let devices = (0..2u16)
                .map(|d| Device {
                    offset: 0,
                    device_type: 1,
                    segment: 0,
                    bdf: bus << 8 | d << 3,
                    channels: vec![DeviceChannel {
                        vc: 0,
                        channel: ChannelId::new(k, 1, u8::try_from(d).unwrap_or(0)),
                        shared: false,
                    }],
                })
                .collect();
            Rmud {
                offset: 0,
                segment: 0,
                devices,
                links: vec![link],
            }
        })
        .collect();
    Irdt {
        header: build::header(b"IRDT"),
        io_protocol: 0b011,
        cache_protocol: 0b011,
        rmuds,
    }
}

/// The peak bandwidth of the CXL region of one package, bytes/s: one CXL 2.0 Type-3 memory
/// expander on a PCIe 5.0 ×8 link (32 GT/s × 8 lanes ≈ 32 GB/s per direction, what the
/// x8 CXL memory modules of the first RDT 1.3 servers offer). A choice of this model, not a
/// measured part (`models/PROVENANCE.md`).
pub const CXL_PEAK_BYTES_PER_S: f64 = 32.0e9;

impl SimPlatform {
    /// CPU `i`'s region traffic now (its class from IA32_PQR_ASSOC):
    /// [`MmioModel::region_traffic`]; `None` without MMIO or outside every domain.
    pub(crate) fn region_traffic_of(&self, i: usize) -> Option<([f64; REGIONS], f64)> {
        let m = self.mmio.as_deref()?;
        let l3 = self.topology.cpus().get(i)?.l3?;
        let clos = rdt_msr::regs::pqr_cos(self.regs.cpus.get(i)?.pqr_assoc);
        m.region_traffic(i, l3, clos)
    }

    /// The RDT 1.3 MMIO state of the model, `None` on a model without one.
    #[must_use]
    pub fn mmio(&self) -> Option<&MmioModel> {
        self.mmio.as_deref()
    }

    /// Sets the share of CPU `cpu`'s memory traffic that goes to each memory region (DDR,
    /// CXL), normalised to sum 1; ignored on a model without MMIO or for an unknown CPU.
    pub fn set_region_split(&mut self, cpu: LogicalCpu, split: [f64; REGIONS]) {
        let Some(i) = self.topology.cpus().iter().position(|c| c.cpu == cpu) else {
            return;
        };
        let sum: f64 = split.iter().map(|s| s.max(0.0)).sum();
        if let Some(m) = self.mmio.as_deref_mut()
            && sum > 0.0
            && let Some(slot) = m.split.get_mut(i)
        {
            *slot = split.map(|s| s.max(0.0) / sum);
            self.recompute();
        }
    }

    /// Reads the 8-byte register at physical address `addr` (module docs).
    ///
    /// # Errors
    /// EIO for an address outside every register block (or a model without MMIO).
    pub fn mmio_read(&mut self, addr: u64) -> io::Result<u64> {
        let occupancy = self.mmio_occupancy_lookup(addr);
        let m = self.mmio.as_deref_mut().ok_or_else(|| err(EIO))?;
        m.accesses.0 += 1;
        if let Some(v) = m.tag_read(addr) {
            return Ok(v);
        }
        let d = m.domain_at(addr).ok_or_else(|| err(EIO))?.clone();
        if addr == d.control.base {
            return Ok(m.rdt_ctrl.get(&d.id).copied().unwrap_or(0));
        }
        if let Some(v) = occupancy {
            return Ok(v);
        }
        if let Some(mmrc) = &d.mmrc
            && mmrc.block.contains(addr)
        {
            return Ok(m.read_mbm(&d, mmrc, addr - mmrc.block.base));
        }
        if let Some(marc) = &d.marc {
            for control in MbaControl::ALL {
                let b = marc.block(control);
                if b.contains(addr) {
                    return Ok(m
                        .mba
                        .get(&(d.id, control, addr - b.base))
                        .copied()
                        .unwrap_or(0));
                }
            }
        }
        Ok(m.io_regs.get(&addr).copied().unwrap_or(0))
    }

    /// The occupancy register value at `addr` when it is one (needs the whole platform).
    fn mmio_occupancy_lookup(&self, addr: u64) -> Option<u64> {
        let m = self.mmio.as_deref()?;
        let d = m.domain_at(addr)?;
        let cmrc = d.cmrc.as_ref().filter(|c| c.block.contains(addr))?;
        let off = addr - cmrc.block.base;
        let rmid =
            regs::cmt_rmid(off, cmrc.clump_size, cmrc.clump_stride).filter(|&r| r <= d.max_rmid)?;
        let l3 = m
            .domain_of_l3
            .iter()
            .find(|(_, id)| **id == d.id)
            .map(|(l3, _)| *l3)?;
        let bytes = self.llc_occupancy_bytes(l3, rdt_core::Rmid::new(rmid));
        Some((bytes / cmrc.upscaling.max(1)) & regs::OCCUPANCY_COUNT_MASK)
    }

    /// Writes `value` to the register at `addr` (module docs).
    ///
    /// # Errors
    /// EIO for a counter register, reserved bits, or an address outside every block.
    pub fn mmio_write(&mut self, addr: u64, value: u64) -> io::Result<()> {
        let m = self.mmio.as_deref_mut().ok_or_else(|| err(EIO))?;
        m.accesses.1 += 1;
        if m.tag_write(addr, value) {
            return Ok(());
        }
        let d = m.domain_at(addr).ok_or_else(|| err(EIO))?.clone();
        if addr == d.control.base {
            if value & !regs::RDT_CTRL_TOTAL_MODE != 0 {
                return Err(err(EIO));
            }
            m.rdt_ctrl.insert(d.id, value);
            return Ok(());
        }
        if let Some(marc) = &d.marc {
            for control in MbaControl::ALL {
                let b = marc.block(control);
                if b.contains(addr) {
                    let all = (0..regs::MBA_REGIONS_PER_REG)
                        .fold(0, |r, region| regs::with_mba_field(r, region, u16::MAX));
                    if value & !all != 0 {
                        return Err(err(EIO));
                    }
                    let old = m.mba.insert((d.id, control, addr - b.base), value);
                    // the maximum fields throttle the workload (module docs)
                    if control == MbaControl::Max && old != Some(value) {
                        self.recompute();
                    }
                    return Ok(());
                }
            }
        }
        if let Some(card) = &d.card
            && card.block.contains(addr)
        {
            m.io_regs.insert(addr, value);
            return Ok(());
        }
        Err(err(EIO))
    }
}

impl MmioModel {
    fn read_mbm(&mut self, d: &Domain, mmrc: &Mmrc, off: u64) -> u64 {
        let found = regs::mbm_rmid_region(off)
            .filter(|&(r, region)| r <= d.max_rmid && region < regs::MBA_REGIONS_PER_REG);
        let Some((rmid, region)) = found else {
            return 0;
        };
        let key = (d.id, rmid, region);
        let count = self.counts.get(&key).copied().unwrap_or(0.0);
        let last = self.last_read.insert(key, count).unwrap_or(0.0);
        let wrap = u64_f64(1u64 << mmrc.counter_width);
        let factor = f64::from(mmrc.correction.factor(rmid).max(1)) / 65536.0;
        let raw = (count / factor).floor() % wrap;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        // floor of a value below 2^62
        let mut v = raw as u64 & regs::BW_COUNT_MASK;
        if count - last >= wrap {
            v |= regs::COUNTER_OVERFLOW;
        }
        v
    }
}

/// The MMIO part of a saved machine state ([`crate::state`]): what differs from power-on
/// and the running counts, so that a second process sees the first one's MBA writes and
/// counters. Opaque outside the simulator.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MmioSaved {
    /// `RDT_CTRL` per domain: (domain id, value).
    #[serde(default)]
    rdt_ctrl: Vec<(u16, u64)>,
    /// MBA registers: (domain id, control `opt`/`min`/`max`, byte offset in the block, value).
    #[serde(default)]
    mba: Vec<(u16, String, u64, u64)>,
    /// Bandwidth counts in MMRC units: (domain id, RMID, region, count, count when last read).
    #[serde(default)]
    counts: Vec<(u16, u32, u8, f64, f64)>,
    /// Per CPU (topology order): its traffic's share per region.
    #[serde(default)]
    split: Vec<[f64; REGIONS]>,
    /// I/O CAT registers: (address, value).
    #[serde(default)]
    io: Vec<(u64, u64)>,
    /// The IRDT links' tagging words that are not 0: (address, value).
    #[serde(default)]
    tags: Vec<(u64, u64)>,
}

const fn control_name(c: MbaControl) -> &'static str {
    match c {
        MbaControl::Optimal => "opt",
        MbaControl::Min => "min",
        MbaControl::Max => "max",
    }
}

impl MmioModel {
    /// The registers and counts to save (module docs of [`crate::state`]).
    pub(crate) fn saved(&self) -> MmioSaved {
        let counts = self
            .counts
            .iter()
            .map(|(&(d, rmid, region), &c)| {
                let last = self
                    .last_read
                    .get(&(d, rmid, region))
                    .copied()
                    .unwrap_or(0.0);
                (d, rmid, region, c, last)
            })
            .collect();
        MmioSaved {
            rdt_ctrl: self.rdt_ctrl.iter().map(|(d, v)| (*d, *v)).collect(),
            mba: self
                .mba
                .iter()
                .map(|(&(d, c, off), &v)| (d, control_name(c).to_owned(), off, v))
                .collect(),
            counts,
            split: self.split.clone(),
            io: self.io_regs.iter().map(|(a, v)| (*a, *v)).collect(),
            tags: self.tags.iter().map(|(a, v)| (*a, *v)).collect(),
        }
    }

    /// This model with `saved` restored over its power-on registers, every entry checked
    /// against the ERDT (a domain, block and offset that exist; values within the fields);
    /// `Err` names the first entry that does not fit (the model is not changed then).
    pub(crate) fn restored(&self, saved: &MmioSaved) -> Result<Self, String> {
        let mut m = self.clone();
        m.reset_registers();
        let erdt = m.erdt.clone();
        let domain = |id: u16| {
            erdt.as_ref()
                .and_then(|e| e.domains.iter().find(|d| d.id == id))
                .ok_or_else(|| format!("MMIO domain {id} does not exist"))
        };
        for &(d, v) in &saved.rdt_ctrl {
            domain(d)?;
            if v & !regs::RDT_CTRL_TOTAL_MODE != 0 {
                return Err(format!(
                    "RDT_CTRL {v:#x} of MMIO domain {d} has reserved bits"
                ));
            }
            m.rdt_ctrl.insert(d, v);
        }
        let fields = (0..regs::MBA_REGIONS_PER_REG)
            .fold(0, |r, region| regs::with_mba_field(r, region, u16::MAX));
        for (d, name, off, v) in &saved.mba {
            let control = MbaControl::ALL
                .into_iter()
                .find(|c| control_name(*c) == name)
                .ok_or_else(|| format!("MBA control `{name}` is not opt, min or max"))?;
            let marc = domain(*d)?
                .marc
                .as_ref()
                .ok_or_else(|| format!("MMIO domain {d} has no MARC"))?;
            let block = marc.block(control);
            if !off.is_multiple_of(regs::REG_BYTES) || *off >= block.len() || v & !fields != 0 {
                return Err(format!(
                    "MBA register {name} +{off:#x} = {v:#x} of MMIO domain {d} does not fit"
                ));
            }
            m.mba.insert((*d, control, *off), *v);
        }
        for &(d, rmid, region, c, last) in &saved.counts {
            let dom = domain(d)?;
            let ok = |x: f64| x.is_finite() && x >= 0.0;
            if rmid > dom.max_rmid || usize::from(region) >= REGIONS || !ok(c) || !ok(last) {
                return Err(format!(
                    "MMIO count of RMID {rmid} region {region} in domain {d} does not fit"
                ));
            }
            m.counts.insert((d, rmid, region), c);
            m.last_read.insert((d, rmid, region), last);
        }
        if !saved.split.is_empty() {
            let ok = |s: &[f64; REGIONS]| s.iter().all(|x| x.is_finite() && *x >= 0.0);
            if saved.split.len() != m.split.len() || !saved.split.iter().all(ok) {
                return Err("the region split does not fit the model's CPUs".into());
            }
            m.split.clone_from(&saved.split);
        }
        for &(addr, v) in &saved.io {
            let exists = erdt.as_ref().is_some_and(|e| {
                e.domains
                    .iter()
                    .any(|d| d.card.as_ref().is_some_and(|c| c.block.contains(addr)))
            });
            if !exists || !addr.is_multiple_of(regs::REG_BYTES) {
                return Err(format!("I/O CAT register {addr:#x} does not exist"));
            }
            m.io_regs.insert(addr, v);
        }
        for &(addr, v) in &saved.tags {
            if !m.tag_write(addr, v) {
                return Err(format!(
                    "I/O RDT tagging register {addr:#x} is not in a link of the IRDT"
                ));
            }
        }
        Ok(m)
    }
}

impl rdt_mmio::MmioIo for crate::SimHandle {
    fn read(&mut self, addr: u64) -> io::Result<u64> {
        self.lock().mmio_read(addr)
    }

    fn write(&mut self, addr: u64, value: u64) -> io::Result<()> {
        self.lock().mmio_write(addr, value)
    }

    /// The run under one lock of the platform (as `dev/mem` serves one `pread`).
    fn read_range(&mut self, addr: u64, values: &mut [u64]) -> io::Result<()> {
        let mut p = self.lock();
        let mut a = Some(addr);
        for v in values {
            let at = a.ok_or_else(|| err(EINVAL))?;
            *v = p.mmio_read(at)?;
            a = at.checked_add(regs::REG_BYTES);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rdt_core::{LogicalCpu, Rmid};
    use rdt_mmio::mrrm::{RegionMemory, classify};
    use rdt_mmio::{Erdt, Irdt, MmioIo, Mrrm};
    use rdt_msr::MsrIo;
    use rdt_msr::regs::{IA32_PQR_ASSOC, pqr_assoc};

    use super::*;
    use crate::SimHandle;

    fn mr(sim: &mut SimHandle, addr: u64) -> io::Result<u64> {
        MmioIo::read(sim, addr)
    }

    fn mw(sim: &mut SimHandle, addr: u64, value: u64) -> io::Result<()> {
        MmioIo::write(sim, addr, value)
    }

    fn rdt13() -> SimHandle {
        SimHandle::new(SimPlatform::builtin("xeon-rdt13").unwrap())
    }

    /// The L3 domain id and the CPUs of the default scenario's workloads (CPUs 2-10).
    fn tag(sim: &mut SimHandle, cos: u32, rmid: u32) -> u16 {
        for c in 2..=10 {
            MsrIo::write(
                sim,
                LogicalCpu::new(c),
                IA32_PQR_ASSOC,
                pqr_assoc(cos, rmid),
            )
            .unwrap();
        }
        let p = sim.lock();
        let l3 = p.topology().cpus()[2].l3.unwrap();
        u16::try_from(l3.get()).unwrap()
    }

    /// Bytes of (domain, rmid, region) as software reads them: the register, corrected and
    /// upscaled.
    fn region_bytes(sim: &mut SimHandle, domain: u16, rmid: u32, region: u8) -> u64 {
        let mmrc = sim
            .lock()
            .mmio()
            .unwrap()
            .erdt()
            .unwrap()
            .domain(domain)
            .unwrap()
            .mmrc
            .clone()
            .unwrap();
        let v = mr(sim, mmrc.address(rmid, region).unwrap()).unwrap();
        assert_eq!(v & (regs::COUNTER_UNAVAILABLE | regs::COUNTER_OVERFLOW), 0);
        mmrc.correction.apply(rmid, v & regs::BW_COUNT_MASK) * mmrc.upscaling
    }

    #[test]
    fn the_tables_parse_to_what_the_model_holds() {
        let sim = rdt13();
        let p = sim.lock();
        let m = p.mmio().unwrap();
        let e = Erdt::parse(m.table("ERDT").unwrap()).unwrap();
        let mrrm = Mrrm::parse(m.table("MRRM").unwrap()).unwrap();
        let irdt = Irdt::parse(m.table("IRDT").unwrap()).unwrap();
        assert!(e.header.checksum_ok && mrrm.header.checksum_ok && irdt.header.checksum_ok);
        let cpu_domains: Vec<_> = e.domains.iter().filter(|d| d.is_cpu_l3()).collect();
        assert_eq!(cpu_domains.len(), 2, "one per socket");
        assert_eq!(
            cpu_domains
                .iter()
                .map(|d| d.cpu_agents.len())
                .sum::<usize>(),
            72
        );
        assert_eq!(e.domains.iter().filter(|d| d.is_io_l3()).count(), 2);
        let caps = p.capabilities();
        assert_eq!(
            cpu_domains[0].max_rmid + 1,
            caps.monitoring.get().unwrap().num_rmids
        );
        assert_eq!(e.max_clos, caps.l3_cat.get().unwrap().num_classes);
        // every CPU's x2APIC id is an agent of the domain of its L3
        for c in p.topology().cpus() {
            let d = e.domain_of_cpu(p.x2apic_id(c.cpu).unwrap()).unwrap();
            assert_eq!(u32::from(d.id), c.l3.unwrap().get());
        }
        let kinds: Vec<_> = classify(&mrrm, Some(m.cxl_windows()))
            .iter()
            .map(|r| (r.id.get(), r.kind))
            .collect();
        assert_eq!(kinds, [(0, RegionMemory::Ddr), (1, RegionMemory::Cxl)]);
        assert_eq!(irdt.devices().count(), 4);
        assert_eq!(irdt.links().map(|l| l.channel_count).sum::<u8>(), 4);
        // sapphire-rapids has an IRDT and nothing else
        let spr = SimPlatform::builtin("sapphire-rapids").unwrap();
        let m = spr.mmio().unwrap();
        assert!(m.table("ERDT").is_none() && m.table("MRRM").is_none());
        assert_eq!(
            Irdt::parse(m.table("IRDT").unwrap()).unwrap().rmuds.len(),
            spr.topology().packages().len()
        );
        assert!(SimPlatform::builtin("skylake-sp").unwrap().mmio().is_none());
    }

    #[test]
    fn region_counters_split_a_workloads_traffic_70_30() {
        let mut sim = rdt13();
        let d = tag(&mut sim, 0, 1);
        sim.advance(Duration::from_secs(1));
        let (ddr, cxl) = (
            region_bytes(&mut sim, d, 1, 0),
            region_bytes(&mut sim, d, 1, 1),
        );
        assert!(ddr > 100 << 20, "{ddr} bytes in a second");
        #[allow(clippy::cast_precision_loss)]
        let share = ddr as f64 / (ddr + cxl) as f64;
        assert!((share - 0.7).abs() < 0.02, "DDR share {share}");
        // the total is the workload model's traffic of those CPUs in this domain (CPUs
        // alternate between the sockets on this part)
        let p = sim.lock();
        let cpus = p.topology().cpus();
        let traffic: f64 = (2..=10)
            .filter(|&c| cpus[c].l3.map(CacheDomain::get) == Some(u32::from(d)))
            .map(|c| p.activity(cpus[c].cpu).unwrap().traffic_bytes_per_s)
            .sum();
        #[allow(clippy::cast_precision_loss)]
        let sum = (ddr + cxl) as f64;
        assert!((sum / traffic - 1.0).abs() < 0.01, "{sum} vs {traffic}");
        // RMID 2 counted nothing; the ground truth agrees with the register
        drop(p);
        assert_eq!(region_bytes(&mut sim, d, 2, 0), 0);
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let truth = sim.lock().mmio().unwrap().region_bytes(d, 1, 0) as u64;
        assert!(truth.abs_diff(ddr) <= 128, "{truth} vs {ddr}");
    }

    #[test]
    fn max_bandwidth_on_the_cxl_region_lowers_only_that_regions_traffic() {
        let mut sim = rdt13();
        let d = tag(&mut sim, 1, 1);
        let marc = sim
            .lock()
            .mmio()
            .unwrap()
            .erdt()
            .unwrap()
            .domain(d)
            .unwrap()
            .marc
            .clone()
            .unwrap();
        let addr = marc.address(MbaControl::Max, 1, 1).unwrap();
        let before = mr(&mut sim, addr).unwrap();
        assert_eq!(
            regs::mba_field(before, 1),
            CONTROL_WINDOW,
            "reset: unthrottled"
        );
        let rate = |sim: &mut SimHandle| {
            let a = (region_bytes(sim, d, 1, 0), region_bytes(sim, d, 1, 1));
            sim.advance(Duration::from_secs(1));
            (
                region_bytes(sim, d, 1, 0) - a.0,
                region_bytes(sim, d, 1, 1) - a.1,
            )
        };
        let (ddr0, cxl0) = rate(&mut sim);
        // a quarter of the window on region 1, for COS 1 only
        mw(
            &mut sim,
            addr,
            regs::with_mba_field(before, 1, CONTROL_WINDOW / 4),
        )
        .unwrap();
        let (ddr1, cxl1) = rate(&mut sim);
        assert_eq!(
            ddr1.abs_diff(ddr0) * 1000 / ddr0,
            0,
            "DDR unchanged: {ddr0} -> {ddr1}"
        );
        #[allow(clippy::cast_precision_loss)]
        let ratio = cxl1 as f64 / cxl0 as f64;
        assert!((ratio - 0.25).abs() < 0.01, "CXL {cxl0} -> {cxl1}");
        // another class is not throttled; a reset restores the window
        sim.lock().reset();
        assert_eq!(mr(&mut sim, addr).unwrap(), before);
    }

    #[test]
    fn registers_refuse_what_hardware_refuses() {
        let mut sim = rdt13();
        let e = sim.lock().mmio().unwrap().erdt().unwrap().clone();
        let d = &e.domains[0];
        let ctrl = d.control.base;
        assert_eq!(mr(&mut sim, ctrl).unwrap(), regs::RDT_CTRL_TOTAL_MODE);
        mw(&mut sim, ctrl, 0).unwrap();
        assert_eq!(mr(&mut sim, ctrl).unwrap(), 0, "region mode");
        assert!(mw(&mut sim, ctrl, 1).is_err(), "reserved bit");
        let mmrc = d.mmrc.as_ref().unwrap();
        assert!(
            mw(&mut sim, mmrc.address(1, 0).unwrap(), 5).is_err(),
            "counters are read-only"
        );
        let mba = d.marc.as_ref().unwrap();
        assert!(
            mw(
                &mut sim,
                mba.address(MbaControl::Min, 0, 0).unwrap(),
                1 << 9
            )
            .is_err(),
            "reserved bits"
        );
        assert!(mr(&mut sim, 0x1000).is_err(), "no register there");
        sim.lock().reset();
        assert_eq!(mr(&mut sim, ctrl).unwrap(), regs::RDT_CTRL_TOTAL_MODE);
        assert_eq!(sim.lock().mmio().unwrap().accesses().1, 4);
        // occupancy: the model's L3 occupancy of the RMID, in CMRC units
        let dom = tag(&mut sim, 0, 3);
        sim.advance(Duration::from_millis(100));
        let cmrc = e.domain(dom).unwrap().cmrc.clone().unwrap();
        let occ = mr(&mut sim, cmrc.address(3).unwrap()).unwrap() * cmrc.upscaling;
        let l3 = sim.lock().topology().cpus()[2].l3.unwrap();
        let truth = sim.lock().llc_occupancy_bytes(l3, Rmid::new(3));
        assert!(
            occ > 0 && truth.abs_diff(occ) < cmrc.upscaling,
            "{occ} vs {truth}"
        );
    }

    #[test]
    fn a_counter_wraps_at_its_width_and_says_it_overflowed() {
        let mut sim = rdt13();
        let d = tag(&mut sim, 0, 1);
        let mmrc = sim
            .lock()
            .mmio()
            .unwrap()
            .erdt()
            .unwrap()
            .domain(d)
            .unwrap()
            .mmrc
            .clone()
            .unwrap();
        let addr = mmrc.address(1, 0).unwrap();
        // 2^44 counts of 64 bytes = 1 PiB: a few days of this traffic
        sim.advance(Duration::from_hours(30 * 24));
        let v = mr(&mut sim, addr).unwrap();
        assert_ne!(v & regs::COUNTER_OVERFLOW, 0, "{v:#x}");
        assert!(v & regs::BW_COUNT_MASK < 1 << MBM_WIDTH);
        sim.advance(Duration::from_secs(1));
        assert_eq!(
            mr(&mut sim, addr).unwrap() & regs::COUNTER_OVERFLOW,
            0,
            "read again soon: no overflow"
        );
    }

    #[test]
    fn the_split_is_per_cpu() {
        let mut sim = rdt13();
        let d = tag(&mut sim, 0, 1);
        for c in 2..=10 {
            sim.lock().set_region_split(LogicalCpu::new(c), [1.0, 0.0]);
        }
        sim.advance(Duration::from_secs(1));
        assert!(region_bytes(&mut sim, d, 1, 0) > 0);
        assert_eq!(region_bytes(&mut sim, d, 1, 1), 0);
    }

    #[test]
    fn mba_writes_and_region_counts_survive_a_save_and_restore() {
        let mut sim = rdt13();
        let d = tag(&mut sim, 1, 1);
        let marc = sim
            .lock()
            .mmio()
            .unwrap()
            .erdt()
            .unwrap()
            .domain(d)
            .unwrap()
            .marc
            .clone();
        let addr = marc.unwrap().address(MbaControl::Max, 1, 1).unwrap();
        let v = regs::with_mba_field(mr(&mut sim, addr).unwrap(), 1, 0x40);
        mw(&mut sim, addr, v).unwrap();
        sim.lock().set_region_split(LogicalCpu::new(3), [0.5, 0.5]);
        sim.advance(Duration::from_secs(1));
        let text = sim.lock().save_state();
        let ddr = sim.lock().mmio().unwrap().region_bytes(d, 1, 0);
        // another process: the same model built afresh, the state loaded
        let mut other = rdt13();
        other.lock().restore_state(&text).unwrap();
        assert_eq!(mr(&mut other, addr).unwrap(), v, "the MBA write is seen");
        assert!((other.lock().mmio().unwrap().region_bytes(d, 1, 0) - ddr).abs() < 1.0);
        assert_eq!(
            other.lock().mmio().unwrap().saved(),
            sim.lock().mmio().unwrap().saved()
        );
        // a state that does not fit this model is refused whole
        let bad = text.replace("\"max\"", "\"maximum\"");
        assert_ne!(bad, text);
        let e = rdt13().lock().restore_state(&bad).unwrap_err().to_string();
        assert!(e.contains("`maximum` is not opt, min or max"), "{e}");
        // states saved before MMIO was kept load, with power-on registers
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json.as_object_mut().unwrap().remove("mmio");
        let mut old = rdt13();
        old.lock().restore_state(&json.to_string()).unwrap();
        assert_eq!(
            regs::mba_field(mr(&mut old, addr).unwrap(), 1),
            CONTROL_WINDOW
        );
    }

    /// Region MBA throttles the workload as classic MBA does: a mostly-CXL thrasher (CPUs
    /// 8-10, COS 1) throttled on the CXL region slows down (its θ is `Σ split × max`), the
    /// CXL domains it saturated are relieved and the pipeline (CPUs 2-7, COS 0, 30 % of its
    /// misses on CXL) speeds up; the DDR domains keep their peak. Fails where region limits
    /// only scale the counts.
    #[test]
    fn cxl_max_bandwidth_slows_the_throttled_class_and_relieves_the_cxl_region() {
        let mut sim = rdt13();
        tag(&mut sim, 0, 1);
        for c in 8..=10 {
            MsrIo::write(
                &mut sim,
                LogicalCpu::new(c),
                IA32_PQR_ASSOC,
                pqr_assoc(1, 2),
            )
            .unwrap();
            sim.lock().set_region_split(LogicalCpu::new(c), [0.1, 0.9]);
        }
        let snapshot = |sim: &SimHandle| {
            let p = sim.lock();
            let a = |c: u32| *p.activity(LogicalCpu::new(c)).unwrap();
            let cxl: Vec<(f64, f64)> = p
                .memory_domains()
                .iter()
                .filter(|m| m.region == Some(1))
                .map(|m| (m.latency_factor, m.peak_bytes_per_s))
                .collect();
            (a(2), a(8), cxl)
        };
        let (pipe0, thrash0, cxl0) = snapshot(&sim);
        assert_eq!(cxl0.len(), 2, "a CXL domain per socket: {cxl0:?}");
        let line = sim.lock().memory_domains()[1].to_string();
        assert!(line.contains(r#""memory_region":1"#), "{line}");
        assert!(
            cxl0.iter()
                .all(|(_, peak)| (*peak - CXL_PEAK_BYTES_PER_S).abs() < 1.0),
            "{cxl0:?}"
        );
        assert!(
            cxl0.iter().any(|(l, _)| *l > 1.2),
            "the thrasher loads CXL: {cxl0:?}"
        );
        assert!((thrash0.throttle - 1.0).abs() < 1e-12);

        // every domain's COS 1 to a quarter of the window on region 1
        let domains: Vec<u16> = sim
            .lock()
            .mmio()
            .unwrap()
            .domain_of_l3
            .values()
            .copied()
            .collect();
        for id in domains {
            let m = sim
                .lock()
                .mmio()
                .unwrap()
                .erdt()
                .unwrap()
                .domain(id)
                .unwrap()
                .marc
                .clone();
            let addr = m.unwrap().address(MbaControl::Max, 1, 1).unwrap();
            let v = mr(&mut sim, addr).unwrap();
            mw(&mut sim, addr, regs::with_mba_field(v, 1, 128)).unwrap();
        }
        let (pipe1, thrash1, cxl1) = snapshot(&sim);
        let theta = 0.1 + 0.9 * 128.0 / f64::from(CONTROL_WINDOW);
        assert!(
            (thrash1.throttle - theta).abs() < 1e-9,
            "{}",
            thrash1.throttle
        );
        assert!(
            thrash1.ipc < 0.6 * thrash0.ipc,
            "the throttled class slows: {} -> {}",
            thrash0.ipc,
            thrash1.ipc
        );
        assert!(
            cxl0.iter().zip(&cxl1).all(|((l0, _), (l1, _))| l1 <= l0)
                && cxl1.iter().all(|(l, _)| (*l - 1.0).abs() < 1e-9),
            "CXL relieved: {cxl0:?} -> {cxl1:?}"
        );
        assert!(
            pipe1.ipc > 1.04 * pipe0.ipc,
            "the pipeline recovers: {} -> {}",
            pipe0.ipc,
            pipe1.ipc
        );
        // the pipeline is not throttled by its neighbour's limit
        assert!((pipe1.throttle - 1.0).abs() < 1e-12);
    }
}
