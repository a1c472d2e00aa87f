//! AMD's MBM extensions on the MSR interface, as the kernel drives them
//! (arch/x86/kernel/cpu/resctrl/monitor.c):
//!
//! - **ABMC** ([`rdt_core::mbm::AmdMbmCaps::abmc_counters`]): an RMID's bandwidth is counted
//!   only by a counter assigned to it. Starting a group assigns, in each L3 domain it spans,
//!   one counter per MBM event it monitors (total, local) through L3_QOS_ABMC_CFG
//!   (`resctrl_arch_config_cntr`: `cfg_en`, `cntr_en`, the group's RMID in `bw_src`, the
//!   event's configuration in `bw_type`), enabling ABMC in L3_QOS_EXT_CFG first where it is
//!   off (`_resctrl_abmc_enable`); polls read the counters (IA32_QM_EVTSEL ExtendedEvtID,
//!   `__cntr_id_read`); stopping unassigns them (`cntr_en` clear) and, where this process
//!   enabled ABMC and no counter of the domain counts any more, disables it again. A counter
//!   is free when L3_QOS_ABMC_DSC says it does not count: those resctrl (or another run)
//!   assigned are left alone. Every domain's free counters are checked before anything is
//!   written ([`MsrError::NotEnoughMbmCounters`] names the counts). A killed run's counters
//!   go back with its RMIDs ([`MsrBackend::reclaim_dead_runs`]).
//! - **BMEC** ([`rdt_core::mbm::AmdMbmCaps::bmec`]): QOS_EVT_CFG_0/1, the transactions the
//!   total and local events count in each L3 domain (`resctrl_arch_mon_event_config_write`,
//!   the bits of resctrl's `mbm_total_bytes_config`). ABMC counters count the configuration
//!   their event has in the domain when they are assigned (the kernel's `event_filter`).
//!
//! pqos (v25.04) does neither: on an ABMC part its MSR monitoring of groups beyond those the
//! hardware counts without assignment reads nothing (intel-cmt-cat issue 311).
//!
//! # References
//! AMD pub. 56375 "ABMC", "BMEC"; Linux `union l3_qos_abmc_cfg` (internal.h),
//! `resctrl_arch_config_cntr`, `__cntr_id_read`, `resctrl_abmc_set_one_amd`,
//! `mon_event_config_index_get`.

use rdt_core::mbm::{MBM_CONFIG_ALL, MBM_CONFIG_LOCAL_DEFAULT};
use rdt_core::{CacheDomain, LogicalCpu, PmuSource, RequestError, RmidEvent};

use crate::regs::{
    AMD_L3_QOS_ABMC_CFG, AMD_L3_QOS_ABMC_DSC, AMD_L3_QOS_EXT_CFG, AMD_QOS_EVT_CFG_0, AbmcCfg,
    EXT_CFG_ABMC,
};
use crate::{MsrAddr, MsrError, MsrIo};

use super::MsrBackend;
use super::monitoring::Context;

/// QOS_EVT_CFG_n of an MBM event (Linux `mon_event_config_index_get`: total 0, local 1).
fn evt_cfg_addr(event: RmidEvent) -> Option<MsrAddr> {
    let n = match event {
        RmidEvent::MbmTotal => 0,
        RmidEvent::MbmLocal => 1,
        RmidEvent::LlcOccupancy => return None,
    };
    Some(MsrAddr::new(AMD_QOS_EVT_CFG_0.get() + n))
}

/// Counter `id` of the domain of `cpu` as L3_QOS_ABMC_DSC describes it, after selecting it
/// by a write of L3_QOS_ABMC_CFG without `cfg_en` (which changes no counter).
fn describe<M: MsrIo>(io: &mut M, cpu: LogicalCpu, id: u32) -> Result<AbmcCfg, MsrError> {
    let select = AbmcCfg {
        cntr_id: id,
        ..AbmcCfg::default()
    };
    io.write(cpu, AMD_L3_QOS_ABMC_CFG, select.encode())?;
    Ok(AbmcCfg::decode(io.read(cpu, AMD_L3_QOS_ABMC_DSC)?))
}

/// A dead run's counters: every counter of the domain of `cpu` (of `counters`) that counts
/// `rmid` is unassigned ([`MsrBackend::reclaim_dead_runs`]). ABMC's enable bit is left as it
/// is (whether the run found it off is not recorded).
///
/// # Errors
/// A register access.
pub(super) fn unassign_rmid<M: MsrIo>(
    io: &mut M,
    cpu: LogicalCpu,
    rmid: u32,
    counters: u32,
) -> Result<(), MsrError> {
    for id in 0..counters {
        let d = describe(io, cpu, id)?;
        if d.cntr_en && !d.is_clos && d.bw_src == rmid {
            let cfg = AbmcCfg {
                bw_src: rmid,
                cntr_id: id,
                cfg_en: true,
                ..AbmcCfg::default()
            };
            io.write(cpu, AMD_L3_QOS_ABMC_CFG, cfg.encode())?;
        }
    }
    Ok(())
}

impl<M: MsrIo, P: PmuSource> MsrBackend<M, P> {
    /// The supported transaction bits (CPUID.(8000_0020H,3):ECX\[6:0\]).
    fn event_config_mask(&self) -> u32 {
        match self.caps.amd_mbm.event_config_mask {
            0 => MBM_CONFIG_ALL,
            m => m,
        }
    }

    /// What `event` counts in the domain of `cpu`: QOS_EVT_CFG_n with BMEC, else the
    /// kernel's defaults (all supported bits for total, those ∩ 0x15 for local).
    fn event_config(&mut self, cpu: LogicalCpu, event: RmidEvent) -> Result<u32, MsrError> {
        let mask = self.event_config_mask();
        if self.caps.amd_mbm.bmec
            && let Some(addr) = evt_cfg_addr(event)
        {
            let v = self.io.read(cpu, addr)?;
            return Ok(u32::try_from(v & u64::from(MBM_CONFIG_ALL)).unwrap_or(0) & mask);
        }
        Ok(match event {
            RmidEvent::MbmLocal => mask & MBM_CONFIG_LOCAL_DEFAULT,
            _ => mask,
        })
    }

    /// The counters of the domain of `cpu` that do not count (L3_QOS_ABMC_DSC `cntr_en`
    /// clear), ascending, and the domain's count.
    fn free_counters(&mut self, cpu: LogicalCpu) -> Result<(Vec<u32>, u32), MsrError> {
        let n = self.caps.amd_mbm.abmc_counters.unwrap_or(0);
        let mut free = Vec::new();
        for id in 0..n {
            if !describe(&mut self.io, cpu, id)?.cntr_en {
                free.push(id);
            }
        }
        Ok((free, n))
    }

    /// The counters of L3 domain `domain` this process's monitoring groups hold (for
    /// [`MsrError::NotEnoughMbmCounters`], which tells them from resctrl's and other runs').
    fn own_counters(&self, domain: rdt_core::CacheDomain) -> u32 {
        let n: usize = self
            .groups
            .iter()
            .flat_map(|g| &g.contexts)
            .filter(|c| c.domain == domain)
            .map(|c| c.counters.len())
            .sum();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// On an ABMC part: assigns each context a counter per MBM event of `events`, after
    /// checking every domain has enough free ones (nothing but counter selections is
    /// written before that); enables ABMC where it is off. A failed write unassigns what was
    /// assigned (best effort).
    ///
    /// # Errors
    /// [`MsrError::NotEnoughMbmCounters`]; a register access.
    pub(super) fn assign_counters(
        &mut self,
        contexts: &mut [Context],
        events: &[RmidEvent],
    ) -> Result<(), MsrError> {
        let mbm: Vec<RmidEvent> = events
            .iter()
            .copied()
            .filter(|e| *e != RmidEvent::LlcOccupancy)
            .collect();
        if mbm.is_empty() || self.caps.amd_mbm.abmc_counters.is_none() {
            return Ok(());
        }
        let mut plan: Vec<Vec<u32>> = Vec::with_capacity(contexts.len());
        for ctx in contexts.iter() {
            let (free, per_domain) = self.free_counters(ctx.cpu)?;
            if free.len() < mbm.len() {
                let free = u32::try_from(free.len()).unwrap_or(u32::MAX);
                return Err(MsrError::NotEnoughMbmCounters {
                    domain: ctx.domain.get(),
                    needed: u32::try_from(mbm.len()).unwrap_or(u32::MAX),
                    free,
                    per_domain,
                    own: self.own_counters(ctx.domain),
                });
            }
            plan.push(free);
        }
        for i in 0..contexts.len() {
            let r = self.assign_context(&mut contexts[i], &mbm, &plan[i]);
            if let Err(e) = r {
                for ctx in contexts.iter_mut().take(i + 1) {
                    let _ = self.unassign_context(ctx); // best-effort rollback
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// ABMC enabled in the context's domain (remembered when this process enabled it), then
    /// a counter of `free` per event of `mbm` for its RMID.
    fn assign_context(
        &mut self,
        ctx: &mut Context,
        mbm: &[RmidEvent],
        free: &[u32],
    ) -> Result<(), MsrError> {
        let ext = self.io.read(ctx.cpu, AMD_L3_QOS_EXT_CFG)?;
        if ext & EXT_CFG_ABMC == 0 {
            self.io
                .write(ctx.cpu, AMD_L3_QOS_EXT_CFG, ext | EXT_CFG_ABMC)?;
            self.abmc_enabled.insert(ctx.domain);
        }
        for (&event, &id) in mbm.iter().zip(free) {
            let cfg = AbmcCfg {
                bw_type: self.event_config(ctx.cpu, event)?,
                bw_src: ctx.rmid,
                is_clos: false,
                cntr_id: id,
                cntr_en: true,
                cfg_en: true,
            };
            self.io.write(ctx.cpu, AMD_L3_QOS_ABMC_CFG, cfg.encode())?;
            ctx.counters.push((event, id));
        }
        Ok(())
    }

    /// Unassigns the context's counters (configured not counting, Linux
    /// `resctrl_arch_config_cntr` with `assign` false); then, where this process enabled ABMC
    /// and no counter of the domain counts any more, disables ABMC again. Every counter is
    /// attempted; the first error is returned.
    pub(super) fn unassign_context(&mut self, ctx: &mut Context) -> Result<(), MsrError> {
        let mut first = Ok(());
        for (_, id) in std::mem::take(&mut ctx.counters) {
            let cfg = AbmcCfg {
                bw_src: ctx.rmid,
                cntr_id: id,
                cfg_en: true,
                ..AbmcCfg::default()
            };
            let r = self.io.write(ctx.cpu, AMD_L3_QOS_ABMC_CFG, cfg.encode());
            if first.is_ok() {
                first = r;
            }
        }
        if first.is_ok() && self.abmc_enabled.contains(&ctx.domain) {
            first = self.disable_if_unused(ctx.cpu, ctx.domain);
        }
        first
    }

    /// ABMC disabled in `domain` (through `cpu`) when no counter there counts.
    fn disable_if_unused(&mut self, cpu: LogicalCpu, domain: CacheDomain) -> Result<(), MsrError> {
        let (free, n) = self.free_counters(cpu)?;
        if free.len() == n as usize {
            let ext = self.io.read(cpu, AMD_L3_QOS_EXT_CFG)?;
            self.io
                .write(cpu, AMD_L3_QOS_EXT_CFG, ext & !EXT_CFG_ABMC)?;
            self.abmc_enabled.remove(&domain);
        }
        Ok(())
    }

    /// [`rdt_core::MsrOps::set_mbm_event_config`]: QOS_EVT_CFG_n := `bits` in every L3
    /// domain (written where it differs; the hardware then clears the event's counters).
    ///
    /// # Errors
    /// [`RequestError::Unsupported`] without BMEC, for LLC occupancy, for bits outside the
    /// supported ones, or while this backend monitors (a change clears the counters its
    /// groups read); a register access.
    pub fn set_mbm_event_config(&mut self, event: RmidEvent, bits: u32) -> Result<(), MsrError> {
        if !self.caps.amd_mbm.bmec {
            return Err(RequestError::Unsupported(
                "MBM event configuration needs AMD BMEC (CPUID.(8000_0020H,0):EBX[3]), which this CPU does not have".into(),
            )
            .into());
        }
        let Some(addr) = evt_cfg_addr(event) else {
            return Err(RequestError::Unsupported(
                "only the MBM events (total, local) have a transaction configuration".into(),
            )
            .into());
        };
        let mask = self.event_config_mask();
        if bits & !mask != 0 {
            return Err(RequestError::Unsupported(format!(
                "MBM event configuration {bits:#x}: this CPU supports the transaction bits {mask:#x} only"
            ))
            .into());
        }
        if !self.groups.is_empty() {
            return Err(RequestError::Unsupported(format!(
                "MBM event configuration: {} monitoring group(s) of this process are running; \
                 a change clears the counters they read, stop them first",
                self.groups.len()
            ))
            .into());
        }
        let cpus: Vec<LogicalCpu> = self
            .topology
            .l3_domains()
            .into_iter()
            .filter_map(|d| self.topology.cpus_in_l3(d).first())
            .collect();
        for cpu in cpus {
            if self.io.read(cpu, addr)? & u64::from(MBM_CONFIG_ALL) != u64::from(bits) {
                self.io.write(cpu, addr, u64::from(bits))?;
            }
        }
        Ok(())
    }

    /// The configuration of `event` (QOS_EVT_CFG_n) per L3 domain; empty without BMEC.
    ///
    /// # Errors
    /// A register read.
    pub fn mbm_event_config(
        &mut self,
        event: RmidEvent,
    ) -> Result<Vec<(CacheDomain, u32)>, MsrError> {
        if !self.caps.amd_mbm.bmec || evt_cfg_addr(event).is_none() {
            return Ok(Vec::new());
        }
        let doms: Vec<(CacheDomain, LogicalCpu)> = self
            .topology
            .l3_domains()
            .into_iter()
            .filter_map(|d| self.topology.cpus_in_l3(d).first().map(|c| (d, c)))
            .collect();
        doms.into_iter()
            .map(|(d, cpu)| Ok((d, self.event_config(cpu, event)?)))
            .collect()
    }
}
