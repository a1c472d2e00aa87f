//! Region-aware MBM and LLC occupancy through MMIO. A group's RMIDs are the MSR backend's
//! (IA32_PQR_ASSOC tags the cores, as on RDT 1.3 it still does); its counters are read
//! from its domain's MMRC (`MBM_REGION_m_RMID_n`, one per memory region) and CMRC
//! (`L3_CMT_RMID_n`) at the addresses the ERDT's indexing functions give.
//!
//! A bandwidth counter holds a count of `upscaling`-byte units (before the per-RMID
//! correction factor), wrapping at the MMRC's counter width: the traffic between two reads
//! is `correction(count_now - count_before mod 2^width) × upscaling`. Bit 63 (unavailable)
//! makes the value unknown for this poll (the previous reading is kept, so the next delta
//! covers both intervals); bit 62 (overflow: the counter wrapped more than once since the
//! last read) makes this poll's delta unknown and takes the new count as the next baseline.

use rdt_core::{
    CacheDomain, MemRegion, MonEvents, MonGroupId, PmuSource, RegionValues, RequestError,
};
use rdt_msr::MsrIo;

use crate::io::MmioIo;
use crate::regs;

use super::{MmioBackend, MmioError};

/// One region counter of one RMID.
#[derive(Clone, Debug)]
struct Counter {
    region: MemRegion,
    /// The count at the last valid reading.
    last: Option<u64>,
    /// Bytes since the group started.
    total: u64,
    /// Bytes over the last poll's interval; `None` when unknown.
    delta: Option<u64>,
}

/// One RMID of a group in one L3 domain.
#[derive(Clone, Debug)]
pub(crate) struct Context {
    l3: CacheDomain,
    /// Index into the backend's domain map.
    domain: usize,
    rmid: u32,
    counters: Vec<Counter>,
}

/// The MMIO side of one monitoring group.
#[derive(Clone, Debug, Default)]
pub(crate) struct RegionGroup {
    pub(crate) contexts: Vec<Context>,
    /// Per context and region, after the last poll.
    pub(crate) region_values: Vec<RegionValues>,
    /// The MSR backend's values with LLC occupancy read from CMRC (when monitored).
    pub(crate) values: Option<rdt_core::MonValues>,
    occupancy: bool,
}

/// Outcome of one counter read.
enum Reading {
    Unavailable,
    Overflow(u64),
    Count(u64),
}

impl<M: MsrIo, P: PmuSource, D: MmioIo> MmioBackend<M, P, D> {
    /// Sets up the MMIO counters of a group the MSR backend started: its RMID in each of
    /// its L3 domains, and a baseline reading of every region counter.
    pub(super) fn start_regions(
        &mut self,
        id: MonGroupId,
        events: MonEvents,
    ) -> Result<(), MmioError> {
        let mbm = events.intersects(MonEvents::MBM);
        let occupancy = events.contains(MonEvents::LLC_OCCUPANCY);
        if !mbm && !occupancy {
            return Ok(());
        }
        let rmids = self
            .msr
            .group_rmids(id)
            .ok_or(RequestError::NoSuchGroup(id))?;
        let mut contexts = Vec::with_capacity(rmids.len());
        for (l3, rmid) in rmids {
            let domain = self
                .domains
                .iter()
                .position(|d| d.l3 == l3)
                .ok_or_else(|| MmioError::Topology(format!("L3 domain {l3} has no ERDT domain")))?;
            let counters = if mbm {
                self.regions
                    .iter()
                    .map(|r| Counter {
                        region: r.region,
                        last: None,
                        total: 0,
                        delta: None,
                    })
                    .collect()
            } else {
                Vec::new()
            };
            contexts.push(Context {
                l3,
                domain,
                rmid,
                counters,
            });
        }
        let mut g = RegionGroup {
            contexts,
            occupancy,
            ..RegionGroup::default()
        };
        // the baseline: the first poll reports the traffic since the start
        self.read_group(&mut g, false)?;
        self.groups.insert(id, g);
        Ok(())
    }

    /// Reads every started group's MMIO counters (after the MSR backend's poll).
    pub(super) fn poll_regions(&mut self) -> Result<(), MmioError> {
        let ids: Vec<MonGroupId> = self.groups.keys().copied().collect();
        for id in ids {
            let Some(mut g) = self.groups.remove(&id) else {
                continue;
            };
            let r = self.read_group(&mut g, true);
            if g.occupancy {
                g.values = self.msr_values_with_occupancy(id, &mut g);
            }
            self.groups.insert(id, g);
            r?;
        }
        Ok(())
    }

    fn read_counter(
        &mut self,
        addr: u64,
        mask: u64,
        what: impl FnOnce() -> String,
    ) -> Result<Reading, MmioError> {
        let v = self.read_reg(addr, what)?;
        Ok(if v & regs::COUNTER_UNAVAILABLE != 0 {
            Reading::Unavailable
        } else if v & regs::COUNTER_OVERFLOW != 0 {
            Reading::Overflow(v & mask)
        } else {
            Reading::Count(v & mask)
        })
    }

    /// Reads a group's region counters; `report` false for the baseline at start.
    fn read_group(&mut self, g: &mut RegionGroup, report: bool) -> Result<(), MmioError> {
        g.region_values.clear();
        for ctx in &mut g.contexts {
            let d = &self.domains[ctx.domain];
            let Some(mmrc) = d.erdt.mmrc.clone() else {
                continue;
            };
            let id = d.erdt.id;
            let width = u32::from(mmrc.counter_width).min(62);
            let mask = if width == 0 {
                regs::BW_COUNT_MASK
            } else {
                (1u64 << width) - 1
            };
            for c in &mut ctx.counters {
                let addr = mmrc.address(ctx.rmid, c.region.0).ok_or_else(|| {
                    MmioError::NotAvailable(format!(
                        "the MMRC of ERDT domain {id} has no counter for RMID {} region {}",
                        ctx.rmid, c.region
                    ))
                })?;
                let (rmid, region) = (ctx.rmid, c.region);
                let reading = self.read_counter(addr, mask, || {
                    format!("MMRC RMID {rmid} region {region} of ERDT domain {id}")
                })?;
                c.delta = None;
                match reading {
                    Reading::Unavailable => {}
                    Reading::Overflow(now) => c.last = Some(now),
                    Reading::Count(now) => {
                        if let Some(before) = c.last.filter(|_| report) {
                            let raw = now.wrapping_sub(before) & mask;
                            let bytes = mmrc
                                .correction
                                .apply(rmid, raw)
                                .saturating_mul(mmrc.upscaling);
                            c.total = c.total.saturating_add(bytes);
                            c.delta = Some(bytes);
                        }
                        c.last = Some(now);
                    }
                }
                g.region_values.push(RegionValues {
                    domain: ctx.l3,
                    region: c.region,
                    bytes: c.delta.map(|_| c.total),
                    delta_bytes: c.delta,
                });
            }
        }
        Ok(())
    }

    /// The MSR backend's values of `id` with LLC occupancy from each domain's CMRC
    /// (`None` where the register says unavailable or cannot be read).
    fn msr_values_with_occupancy(
        &mut self,
        id: MonGroupId,
        g: &mut RegionGroup,
    ) -> Option<rdt_core::MonValues> {
        use rdt_core::Backend as _;
        let mut v = self.msr.values(id)?.clone();
        let mut sum: Option<u64> = None;
        for ctx in &g.contexts {
            let d = &self.domains[ctx.domain];
            let Some(cmrc) = d.erdt.cmrc.clone() else {
                continue;
            };
            let bytes = cmrc.address(ctx.rmid).and_then(|addr| {
                let reg = self.mem.read(addr).ok()?;
                (reg & regs::COUNTER_UNAVAILABLE == 0)
                    .then(|| (reg & regs::OCCUPANCY_COUNT_MASK).saturating_mul(cmrc.upscaling))
            });
            if let Some(dv) = v.domains.iter_mut().find(|dv| dv.domain == ctx.l3) {
                dv.llc_occupancy_bytes = bytes;
            }
            if let Some(b) = bytes {
                sum = Some(sum.unwrap_or(0).saturating_add(b));
            }
        }
        v.llc_occupancy_bytes = sum;
        Some(v)
    }
}
