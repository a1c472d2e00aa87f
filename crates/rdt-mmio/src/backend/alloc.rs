//! Region-aware MBA through a domain's MARC: three register blocks (optimal, minimum,
//! maximum bandwidth), one 64-bit register per class and group of four memory regions,
//! one 9-bit field per region ([`crate::regs::mba_offset`], [`crate::regs::with_mba_field`]).
//! A value is in units of the MARC's control window: the window is full bandwidth.

use rdt_core::{
    BwControl, CacheDomain, ClassId, MemRegion, MonGroupId, PmuSource, RegionBw, RegionInfo,
    RegionOps, RegionValues, RequestError,
};
use rdt_msr::MsrIo;

use crate::erdt::MbaControl;
use crate::io::MmioIo;
use crate::regs;

use super::{MmioBackend, MmioError};

const fn control(c: BwControl) -> MbaControl {
    match c {
        BwControl::Optimal => MbaControl::Optimal,
        BwControl::Min => MbaControl::Min,
        BwControl::Max => MbaControl::Max,
    }
}

/// The register name for errors: `MARC max COS1 regions 0-3 of domain 0`.
fn reg_name(c: BwControl, class: ClassId, region: u8, domain: u16) -> String {
    let first = region - region % regs::MBA_REGIONS_PER_REG;
    format!(
        "MARC {c} COS{class} regions {first}-{} of ERDT domain {domain}",
        first + regs::MBA_REGIONS_PER_REG - 1
    )
}

impl<M: MsrIo, P: PmuSource, D: MmioIo> MmioBackend<M, P, D> {
    /// The control window of the first domain's MARC (the value of full bandwidth); every
    /// domain's is checked at open to be the same.
    fn window(&self) -> u16 {
        self.domains
            .first()
            .and_then(|d| d.erdt.marc.as_ref())
            .map_or(0, |m| u16::try_from(m.control_window).unwrap_or(u16::MAX))
            .min(u16::try_from(regs::MBA_FIELD_MAX).unwrap_or(u16::MAX))
    }

    /// The physical address of `class`'s `c` register for `region` in L3 `domain`.
    fn mba_address(
        &self,
        domain: CacheDomain,
        class: ClassId,
        region: MemRegion,
        c: BwControl,
    ) -> Result<(u64, u16), MmioError> {
        let d = self.domain_of(domain)?;
        let id = d.erdt.id;
        let marc = d
            .erdt
            .marc
            .as_ref()
            .ok_or_else(|| MmioError::NotAvailable(format!("ERDT domain {id} has no MARC")))?;
        if class.get() >= self.erdt.max_clos {
            return Err(RequestError::Unsupported(format!(
                "COS{class} does not exist for region MBA: the ERDT has {} classes",
                self.erdt.max_clos
            ))
            .into());
        }
        if !self.regions.iter().any(|r| r.region == region) {
            return Err(RequestError::Unsupported(format!(
                "memory region {region} does not exist (the MRRM has {})",
                self.regions.len()
            ))
            .into());
        }
        let addr = marc
            .address(control(c), region.0, class.get())
            .ok_or_else(|| {
                MmioError::NotAvailable(format!(
                    "the MARC of ERDT domain {id} has no {c} register for COS{class} region {region}"
                ))
            })?;
        Ok((addr, id))
    }

    /// Every region control of every class in every domain to the window (the reset).
    pub(super) fn reset_region_mba(&mut self) -> Result<(), MmioError> {
        let window = self.window();
        let l3: Vec<CacheDomain> = self.domains.iter().map(|d| d.l3).collect();
        let regions: Vec<MemRegion> = self.regions.iter().map(|r| r.region).collect();
        for d in l3 {
            for class in 0..self.erdt.max_clos {
                let values: Vec<RegionBw> = regions
                    .iter()
                    .flat_map(|&region| {
                        BwControl::ALL.map(|control| RegionBw {
                            region,
                            control,
                            value: window,
                        })
                    })
                    .collect();
                self.write_region_bw(d, ClassId::new(class), &values)?;
            }
        }
        Ok(())
    }

    /// Every class's region controls in `domain` ([`RegionOps::region_bandwidth_all`]).
    fn read_region_bw_all(&mut self, domain: CacheDomain) -> Result<Vec<Vec<RegionBw>>, MmioError> {
        let classes = self.erdt.max_clos;
        let n = usize::try_from(classes).unwrap_or(usize::MAX);
        let regions: Vec<MemRegion> = self.regions.iter().map(|r| r.region).collect();
        let mut out = vec![Vec::with_capacity(regions.len() * 3); n];
        if classes == 0 {
            return Ok(out);
        }
        // (register group of four regions, control) -> the classes' registers
        let mut runs: Vec<(u8, BwControl, Vec<u64>)> = Vec::new();
        for &region in &regions {
            for c in BwControl::ALL {
                let group = region.0 / regs::MBA_REGIONS_PER_REG;
                let values = if let Some((_, _, v)) =
                    runs.iter().find(|(g, rc, _)| *g == group && *rc == c)
                {
                    v.clone()
                } else {
                    let (first, id) = self.mba_address(domain, ClassId::new(0), region, c)?;
                    // the last class's register is in the block too (checked by the address)
                    self.mba_address(domain, ClassId::new(classes - 1), region, c)?;
                    let mut v = vec![0u64; n];
                    self.mem
                        .read_range(first, &mut v)
                        .map_err(|source| MmioError::Register {
                            op: "read",
                            addr: first,
                            what: format!(
                                "{} (COS0 to COS{})",
                                reg_name(c, ClassId::new(0), region.0, id),
                                classes - 1
                            ),
                            source,
                        })?;
                    runs.push((group, c, v.clone()));
                    v
                };
                for (class, reg) in out.iter_mut().zip(values) {
                    class.push(RegionBw {
                        region,
                        control: c,
                        value: regs::mba_field(reg, region.0),
                    });
                }
            }
        }
        Ok(out)
    }

    fn write_region_bw(
        &mut self,
        domain: CacheDomain,
        class: ClassId,
        values: &[RegionBw],
    ) -> Result<(), MmioError> {
        let window = self.window();
        let mut addrs = Vec::with_capacity(values.len());
        for v in values {
            if v.value > window {
                return Err(RequestError::Unsupported(format!(
                    "MBA region {} {} value {} is above the control window {window}",
                    v.region, v.control, v.value
                ))
                .into());
            }
            addrs.push(self.mba_address(domain, class, v.region, v.control)?);
        }
        // each register once: its fields from every value that falls in it, in order
        let mut done: Vec<u64> = Vec::with_capacity(addrs.len());
        for (v, &(addr, id)) in values.iter().zip(&addrs) {
            if done.contains(&addr) {
                continue;
            }
            done.push(addr);
            let name = || reg_name(v.control, class, v.region.0, id);
            let reg = self.read_reg(addr, name)?;
            let new = values
                .iter()
                .zip(&addrs)
                .filter(|(_, (a, _))| *a == addr)
                .fold(reg, |r, (w, _)| {
                    regs::with_mba_field(r, w.region.0, w.value)
                });
            if new != reg {
                self.write_reg(addr, new, name)?;
            }
        }
        Ok(())
    }
}

/// Generic over the error, so that a facade holding this backend hands it out with its own
/// error type (as the MSR backend's abilities are).
impl<M: MsrIo, P: PmuSource, D: MmioIo, E: From<MmioError>> RegionOps<E> for MmioBackend<M, P, D> {
    fn memory_regions(&self) -> &[RegionInfo] {
        &self.regions
    }

    fn bw_window(&self) -> u16 {
        self.window()
    }

    fn region_classes(&self) -> u32 {
        self.erdt.max_clos
    }

    fn domain_ids(&self) -> Vec<(CacheDomain, u16)> {
        self.domains.iter().map(|d| (d.l3, d.erdt.id)).collect()
    }

    /// One register read per control and group of four regions.
    fn region_bandwidth(
        &mut self,
        domain: CacheDomain,
        class: ClassId,
    ) -> Result<Vec<RegionBw>, E> {
        let regions: Vec<MemRegion> = self.regions.iter().map(|r| r.region).collect();
        let mut out = Vec::with_capacity(regions.len() * 3);
        let mut cache: Vec<(u64, u64)> = Vec::new();
        for region in regions {
            for c in BwControl::ALL {
                let (addr, id) = self
                    .mba_address(domain, class, region, c)
                    .map_err(E::from)?;
                let reg = if let Some(&(_, v)) = cache.iter().find(|(a, _)| *a == addr) {
                    v
                } else {
                    let v = self
                        .read_reg(addr, || reg_name(c, class, region.0, id))
                        .map_err(E::from)?;
                    cache.push((addr, v));
                    v
                };
                out.push(RegionBw {
                    region,
                    control: c,
                    value: regs::mba_field(reg, region.0),
                });
            }
        }
        Ok(out)
    }

    /// One run of registers per control and group of four regions: COS 0 .. max CLOS of
    /// a control are consecutive registers (`regs::mba_offset`).
    fn region_bandwidth_all(&mut self, domain: CacheDomain) -> Result<Vec<Vec<RegionBw>>, E> {
        self.read_region_bw_all(domain).map_err(E::from)
    }

    fn set_region_bandwidth(
        &mut self,
        domain: CacheDomain,
        class: ClassId,
        values: &[RegionBw],
    ) -> Result<(), E> {
        self.write_region_bw(domain, class, values).map_err(E::from)
    }

    fn region_values(&self, group: MonGroupId) -> Option<&[RegionValues]> {
        self.groups
            .get(&group)
            .filter(|g| !g.contexts.is_empty())
            .map(|g| g.region_values.as_slice())
    }
}
