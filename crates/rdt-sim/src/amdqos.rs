//! AMD's monitoring extension registers: BMEC's event configuration and ABMC's assignable
//! counters, per L3 domain, and what they change in IA32_QM_CTR.
//!
//! | MSR | exists when | value | writes fault (EIO) |
//! |---|---|---|---|
//! | L3_QOS_EXT_CFG 0xC000_03FF | ABMC (CPUID.(8000_0020H,0):EBX\[5\]) or SDCIAE (EBX\[6\]) | bit 0 ABMC enable, bit 1 SDCIAE enable; reset 0 | a bit the part does not have |
//! | L3_QOS_ABMC_CFG 0xC000_03FD | ABMC | the last value written in the domain | reserved bits; `cntr_id` ≥ the counters (CPUID.(8000_0020H,5):EBX\[15:0\] + 1); with `cfg_en`: `bw_src` ≥ #RMIDs (RMID) or ≥ #COS (CLOSID), `bw_type` bits outside CPUID.(8000_0020H,3):ECX\[6:0\] |
//! | L3_QOS_ABMC_DSC 0xC000_03FE | ABMC | the configuration of the counter the last ABMC_CFG write named (`cfg_en` clear) | every write |
//! | QOS_EVT_CFG_n 0xC000_0400+n, n = 0 (total), 1 (local) | BMEC (EBX\[3\]) | the transactions the event counts; reset: the supported bits (total), those ∩ 0x15 (local) | bits outside the supported ones |
//!
//! Every register is per L3 domain: a write on any CPU of the domain is what all of them
//! read (the kernel writes them on one CPU of the domain, `resctrl_abmc_config_one_amd`,
//! `mbm_config_write_domain`, except L3_QOS_EXT_CFG which it sets on every CPU,
//! `_resctrl_abmc_enable`).
//!
//! What IA32_QM_CTR then reads (IA32_QM_EVTSEL accepts bit 31, ExtendedEvtID, on an ABMC part):
//! - **An ABMC counter**: EVTSEL = counter id in bits 43:32, bit 31, event id 1
//!   ([`rdt_msr::regs::qm_evtsel_abmc`], Linux `__cntr_id_read`), while ABMC is enabled in
//!   the domain: the traffic of `bw_src`'s RMID in the domain that `bw_type` selects, since the
//!   last configuration of the counter (a write with `cfg_en` resets it). Error (bit 63) for
//!   a counter id beyond the counters, any other extended event, or ABMC disabled;
//!   Unavailable (bit 62) for a counter that is not counting (`cntr_en` clear, never
//!   configured, or counting a CLOSID, which the model does not count by).
//! - **MBM events 2 and 3 of an RMID**: while ABMC is enabled in the domain, Unavailable: an
//!   RMID's bandwidth is counted only by the counters assigned to it (Linux reads only
//!   assigned counters in `mbm_event` mode and reports `Unassigned` for the rest). Otherwise,
//!   on a BMEC part, the traffic QOS_EVT_CFG_0 (total) or QOS_EVT_CFG_1 (local) selects, from
//!   0 at the last change of that configuration (Linux `mon_config_write`: "the bandwidth
//!   counters for all RMIDs and Events will be cleared by the hardware"); elsewhere as before.
//!
//! The transactions: the workload model's traffic is all reads, local (bit 0) or remote
//! (bit 1) as the model splits it; it makes no non-temporal writes, slow-memory reads or
//! dirty victims (bits 2-6). So the default configurations count what the legacy events
//! count (total = local + remote, local = local), a configuration without bit 0 drops the
//! local traffic, one without bits 0 and 1 counts nothing.
//!
//! Simplified: the model does not set Unavailable on the first read after a BMEC change (the
//! resctrl model reports it for the groups it reads). The registers are part of the saved
//! state ([`crate::state`]) where they differ from reset, counters with their starting counts.
//!
//! The resctrl model ([`crate::resctrl`]) programs the same registers as the kernel does:
//! `mbm_event` mode sets L3_QOS_EXT_CFG bit 0, each assignment of `mbm_L3_assignments`
//! writes L3_QOS_ABMC_CFG and its reads go through the counter, `mbm_*_bytes_config` writes
//! QOS_EVT_CFG_n. A counter resctrl assigned is the counter an MSR reader sees.
//!
//! # References
//! AMD64 Technology Platform Quality of Service Extensions (pub. 56375), "ABMC" and "BMEC";
//! Linux `arch/x86/kernel/cpu/resctrl/internal.h` (`union l3_qos_abmc_cfg`,
//! `ABMC_EXTENDED_EVT_ID`, `ABMC_ENABLE_BIT`, `SDCIAE_ENABLE_BIT`), `monitor.c`
//! (`resctrl_arch_config_cntr`, `__cntr_id_read`, `resctrl_arch_mon_event_config_write`),
//! `arch/x86/include/asm/msr-index.h`.

use std::collections::BTreeMap;

use rdt_core::CpuidSource as _;
use rdt_core::mbm::{MBM_CONFIG_ALL, MBM_CONFIG_LOCAL_DEFAULT};
use rdt_msr::regs::{
    AMD_L3_QOS_ABMC_CFG, AMD_L3_QOS_ABMC_DSC, AMD_L3_QOS_EXT_CFG, AMD_QOS_EVT_CFG_0, AbmcCfg,
    EVT_ABMC, EXT_CFG_ABMC, EXT_CFG_SDCIAE, QM_CTR_ERROR, QM_CTR_UNAVAILABLE, QM_EVTSEL_EXTENDED,
};

use crate::SimPlatform;

/// One of the registers (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AmdReg {
    ExtCfg,
    AbmcCfg,
    AbmcDsc,
    /// QOS_EVT_CFG_n: 0 total, 1 local.
    EvtCfg(usize),
}

/// One ABMC counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cntr {
    /// Its configuration as last applied (`cfg_en` clear).
    pub cfg: AbmcCfg,
    /// The count of its configuration at the last application: it reads from 0 there.
    base: u64,
}

/// The registers of one L3 domain (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AmdQosRegs {
    pub ext_cfg: u64,
    /// L3_QOS_ABMC_CFG as last written.
    abmc_cfg: u64,
    pub cntrs: Vec<Cntr>,
    /// QOS_EVT_CFG_0/1.
    pub evt_cfg: [u32; 2],
    /// Per RMID, the legacy events' counts at the last change of their configuration.
    evt_base: BTreeMap<u32, [u64; 2]>,
}

/// The registers of one L3 domain in the saved state ([`crate::state::MachineState`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AmdQosSaved {
    domain: u32,
    ext_cfg: u64,
    abmc_cfg: u64,
    /// `(counter, configuration as L3_QOS_ABMC_DSC reads it, count at its configuration)`
    /// of each configured counter.
    cntrs: Vec<(u32, u64, u64)>,
    evt_cfg: [u32; 2],
    /// `(RMID, [total, local] counts at the last BMEC change)`.
    evt_base: Vec<(u32, [u64; 2])>,
}

/// What the part has of the extensions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AmdQosHw {
    bmec: bool,
    mask: u32,
    cntrs: Option<u32>,
    sdciae: bool,
}

/// The traffic configuration `bits` selects of an RMID's counts, `(total, local)` (module
/// docs: reads only).
fn selected(bits: u32, (total, local): (u64, u64)) -> u64 {
    let remote = total.saturating_sub(local);
    let mut v = 0u64;
    if bits & 1 != 0 {
        v = v.wrapping_add(local);
    }
    if bits & 2 != 0 {
        v = v.wrapping_add(remote);
    }
    v
}

impl SimPlatform {
    /// The extensions the model's CPUID enumerates.
    pub(crate) fn amd_qos_hw(&self) -> AmdQosHw {
        let a = self.caps.amd_mbm;
        let sdciae = self.caps.vendor.is_amd_like()
            && self
                .cpuid
                .cpuid(0x8000_0020, 0)
                .is_some_and(|r| r.ebx >> 6 & 1 == 1);
        AmdQosHw {
            bmec: a.bmec,
            mask: if a.event_config_mask == 0 {
                MBM_CONFIG_ALL
            } else {
                a.event_config_mask
            },
            cntrs: a.abmc_counters,
            sdciae,
        }
    }

    /// The reset registers of an L3 domain; `None` on a part with none of them.
    pub(crate) fn amd_qos_reset(&self) -> Option<AmdQosRegs> {
        let hw = self.amd_qos_hw();
        (hw.bmec || hw.cntrs.is_some() || hw.sdciae).then(|| AmdQosRegs {
            ext_cfg: 0,
            abmc_cfg: 0,
            cntrs: vec![Cntr::default(); hw.cntrs.unwrap_or(0) as usize],
            evt_cfg: [hw.mask, hw.mask & MBM_CONFIG_LOCAL_DEFAULT],
            evt_base: BTreeMap::new(),
        })
    }

    /// The registers of every L3 domain that differ from reset, for the saved state.
    pub(crate) fn amd_qos_saved(&self) -> Vec<AmdQosSaved> {
        let Some(reset) = self.amd_qos_reset() else {
            return Vec::new();
        };
        self.regs
            .amd
            .iter()
            .filter(|(_, r)| **r != reset)
            .map(|(d, r)| AmdQosSaved {
                domain: d.get(),
                ext_cfg: r.ext_cfg,
                abmc_cfg: r.abmc_cfg,
                cntrs: r
                    .cntrs
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c != Cntr::default())
                    .map(|(id, c)| {
                        (
                            u32::try_from(id).unwrap_or(u32::MAX),
                            c.cfg.encode(),
                            c.base,
                        )
                    })
                    .collect(),
                evt_cfg: r.evt_cfg,
                evt_base: r.evt_base.iter().map(|(k, v)| (*k, *v)).collect(),
            })
            .collect()
    }

    /// Puts saved registers into `regs` (the registers per L3 domain, fresh from reset).
    ///
    /// # Errors
    /// A domain the part does not have, a counter beyond its counters, a configuration
    /// with bits the part does not take.
    pub(crate) fn amd_qos_load(
        &self,
        regs: &mut BTreeMap<rdt_core::CacheDomain, AmdQosRegs>,
        saved: &[AmdQosSaved],
    ) -> Result<(), String> {
        let hw = self.amd_qos_hw();
        for s in saved {
            let d = rdt_core::CacheDomain::new(s.domain);
            let Some(r) = regs.get_mut(&d) else {
                return Err(format!(
                    "AMD QoS registers of L3 domain {} that does not exist",
                    s.domain
                ));
            };
            if s.evt_cfg.iter().any(|v| v & !hw.mask != 0) {
                return Err(format!(
                    "QOS_EVT_CFG of L3 domain {}: unsupported bits",
                    s.domain
                ));
            }
            for &(id, cfg, base) in &s.cntrs {
                let Some(c) = r.cntrs.get_mut(id as usize) else {
                    return Err(format!(
                        "ABMC counter {id} of L3 domain {} does not exist",
                        s.domain
                    ));
                };
                *c = Cntr {
                    cfg: AbmcCfg::decode(cfg),
                    base,
                };
            }
            r.ext_cfg = s.ext_cfg;
            r.abmc_cfg = s.abmc_cfg;
            r.evt_cfg = s.evt_cfg;
            r.evt_base = s.evt_base.iter().copied().collect();
        }
        Ok(())
    }

    /// The register at `addr`, if the part has it (module docs).
    pub(crate) fn decode_amd_qos(&self, addr: u32) -> Option<AmdReg> {
        let hw = self.amd_qos_hw();
        let abmc = hw.cntrs.is_some();
        match addr {
            a if a == AMD_L3_QOS_EXT_CFG.get() && (abmc || hw.sdciae) => Some(AmdReg::ExtCfg),
            a if a == AMD_L3_QOS_ABMC_CFG.get() && abmc => Some(AmdReg::AbmcCfg),
            a if a == AMD_L3_QOS_ABMC_DSC.get() && abmc => Some(AmdReg::AbmcDsc),
            a if hw.bmec && (AMD_QOS_EVT_CFG_0.get()..AMD_QOS_EVT_CFG_0.get() + 2).contains(&a) => {
                Some(AmdReg::EvtCfg((a - AMD_QOS_EVT_CFG_0.get()) as usize))
            }
            _ => None,
        }
    }

    /// The registers of the L3 domain of the CPU at topology index `i`.
    fn amd_regs(&self, i: usize) -> Option<&AmdQosRegs> {
        let d = self.topology.cpus().get(i)?.l3?;
        self.regs.amd.get(&d)
    }

    /// RDMSR of one of the registers on the CPU at topology index `i`.
    pub(crate) fn read_amd_qos(&self, i: usize, reg: AmdReg) -> Option<u64> {
        let r = self.amd_regs(i)?;
        Some(match reg {
            AmdReg::ExtCfg => r.ext_cfg,
            AmdReg::AbmcCfg => r.abmc_cfg,
            AmdReg::AbmcDsc => {
                let id = AbmcCfg::decode(r.abmc_cfg).cntr_id;
                let c = r.cntrs.get(id as usize)?;
                AbmcCfg {
                    cntr_id: id,
                    cfg_en: false,
                    ..c.cfg
                }
                .encode()
            }
            AmdReg::EvtCfg(n) => u64::from(*r.evt_cfg.get(n)?),
        })
    }

    /// WRMSR of one of the registers; `false` = #GP (module docs).
    pub(crate) fn write_amd_qos(&mut self, i: usize, reg: AmdReg, v: u64) -> bool {
        let hw = self.amd_qos_hw();
        let num_rmids = self.caps.monitoring.get().map_or(0, |m| m.num_rmids);
        let num_cos = self.caps.l3_cat.get().map_or(0, |c| c.num_classes);
        let Some(dom) = self.topology.cpus().get(i).and_then(|p| p.l3) else {
            return false;
        };
        // the counts the new configurations start from, read before borrowing the registers
        let counts: Vec<(u64, u64)> = self
            .counters
            .get(&dom)
            .map(|v| v.iter().map(|c| (c.total.whole, c.local.whole)).collect())
            .unwrap_or_default();
        let Some(regs) = self.regs.amd.get_mut(&dom) else {
            return false;
        };
        match reg {
            AmdReg::ExtCfg => {
                let mut allowed = 0;
                if hw.cntrs.is_some() {
                    allowed |= EXT_CFG_ABMC;
                }
                if hw.sdciae {
                    allowed |= EXT_CFG_SDCIAE;
                }
                if v & !allowed != 0 {
                    return false;
                }
                regs.ext_cfg = v;
                true
            }
            AmdReg::AbmcCfg => {
                let c = AbmcCfg::decode(v);
                if v & AbmcCfg::RESERVED != 0 || c.cntr_id as usize >= regs.cntrs.len() {
                    return false;
                }
                if c.cfg_en {
                    let limit = if c.is_clos { num_cos } else { num_rmids };
                    if c.bw_src >= limit || c.bw_type & !hw.mask != 0 {
                        return false;
                    }
                    let base = if c.is_clos {
                        0
                    } else {
                        counts
                            .get(c.bw_src as usize)
                            .map_or(0, |rc| selected(c.bw_type, *rc))
                    };
                    regs.cntrs[c.cntr_id as usize] = Cntr {
                        cfg: AbmcCfg { cfg_en: false, ..c },
                        base,
                    };
                }
                regs.abmc_cfg = v;
                true
            }
            AmdReg::AbmcDsc => false,
            AmdReg::EvtCfg(n) => {
                let Ok(bits) = u32::try_from(v) else {
                    return false;
                };
                if bits & !hw.mask != 0 || n > 1 {
                    return false;
                }
                if regs.evt_cfg[n] != bits {
                    regs.evt_cfg[n] = bits;
                    // the hardware clears the event's counters of every RMID
                    for (rmid, rc) in counts.iter().enumerate() {
                        let rmid = u32::try_from(rmid).unwrap_or(u32::MAX);
                        regs.evt_base.entry(rmid).or_default()[n] = selected(bits, *rc);
                    }
                }
                true
            }
        }
    }

    /// IA32_QM_CTR for an extended IA32_QM_EVTSEL (bit 31) in L3 domain `d` (module docs),
    /// before the wrap.
    pub(crate) fn read_abmc_ctr(&self, d: rdt_core::CacheDomain, sel: u64) -> u64 {
        let Some(r) = self.regs.amd.get(&d) else {
            return QM_CTR_ERROR;
        };
        let id = sel >> 32 & 0xfff;
        if sel & QM_EVTSEL_EXTENDED == 0
            || sel & 0xff != EVT_ABMC
            || r.ext_cfg & EXT_CFG_ABMC == 0
            || id >= r.cntrs.len() as u64
        {
            return QM_CTR_ERROR;
        }
        let c = r.cntrs[usize::try_from(id).unwrap_or(usize::MAX)];
        if !c.cfg.cntr_en || c.cfg.is_clos {
            return QM_CTR_UNAVAILABLE;
        }
        self.counters
            .get(&d)
            .and_then(|v| v.get(c.cfg.bw_src as usize))
            .map_or(0, |rc| {
                selected(c.cfg.bw_type, (rc.total.whole, rc.local.whole))
            })
            .wrapping_sub(c.base)
    }

    /// The count of ABMC counter `cntr_id` of domain `d` as its read returns it, before the
    /// wrap; `None` when it is not counting. The resctrl model's running count.
    pub(crate) fn abmc_count(&self, d: rdt_core::CacheDomain, cntr_id: u32) -> Option<u64> {
        let v = self.read_abmc_ctr(d, rdt_msr::regs::qm_evtsel_abmc(cntr_id));
        (v & (QM_CTR_ERROR | QM_CTR_UNAVAILABLE) == 0).then_some(v)
    }

    /// MBM event `event` (2 total, 3 local) of `rmid` in domain `d` as IA32_QM_CTR reads it,
    /// before the wrap and the erratum (module docs): `Err(flags)` while ABMC is enabled.
    pub(crate) fn legacy_mbm_count(
        &self,
        d: rdt_core::CacheDomain,
        rmid: u32,
        event: u64,
    ) -> Result<u64, u64> {
        let c = self
            .counters
            .get(&d)
            .and_then(|v| v.get(rmid as usize))
            .copied()
            .unwrap_or_default();
        let n = usize::from(event != rdt_msr::regs::EVT_MBM_TOTAL);
        let Some(r) = self.regs.amd.get(&d) else {
            return Ok(if n == 0 { c.total.whole } else { c.local.whole });
        };
        if r.ext_cfg & EXT_CFG_ABMC != 0 {
            return Err(QM_CTR_UNAVAILABLE);
        }
        if !self.amd_qos_hw().bmec {
            return Ok(if n == 0 { c.total.whole } else { c.local.whole });
        }
        let base = r.evt_base.get(&rmid).map_or(0, |b| b[n]);
        Ok(selected(r.evt_cfg[n], (c.total.whole, c.local.whole)).wrapping_sub(base))
    }
}

#[cfg(test)]
mod tests;
