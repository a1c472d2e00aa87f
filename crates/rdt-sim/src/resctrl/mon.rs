//! Monitoring: RMID allocation and limbo, `mon_data` reads, the MBM overflow/bandwidth
//! sampler and the `mba_MBps` software controller (`fs/resctrl/monitor.c`,
//! `arch/x86/kernel/cpu/resctrl/monitor.c`).

use std::collections::BTreeSet;
use std::io;

use rdt_core::CacheDomain;
use rdt_msr::regs::{
    IA32_QM_CTR, IA32_QM_EVTSEL, QM_CTR_DATA, QM_CTR_ERROR, QM_CTR_UNAVAILABLE, qm_evtsel,
};

use crate::SimPlatform;
use crate::vfs::err;

use super::errno::{EBUSY, EINVAL, ENOSPC};
use super::hw::{Event, MAX_MBA_BW, Res};
use super::kstr::kstrtou32;
use super::{Gid, GroupKind, Resctrl, WORKER_PERIOD, einval, rdmsr, wrmsr};

/// The arch's state of one hardware MBM counter (`struct arch_mbm_state`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ArchMbm {
    /// Counts accumulated since the last reset (upscaling-factor units).
    chunks: u64,
    /// The counter at the last read, unwrapped (the model's count).
    prev_raw: u64,
}

/// The filesystem's bandwidth state of one counter (`struct mbm_state`, for `mba_MBps`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FsMbm {
    /// Bytes at the last sample.
    prev_bw_bytes: u64,
    /// MiB/s over the last sample period.
    prev_bw: u64,
}

impl ArchMbm {
    /// `(chunks, prev_raw)`, for a saved state.
    pub(super) const fn to_pair(self) -> (u64, u64) {
        (self.chunks, self.prev_raw)
    }

    /// From [`ArchMbm::to_pair`].
    pub(super) const fn from_pair(chunks: u64, prev_raw: u64) -> Self {
        Self { chunks, prev_raw }
    }
}

impl FsMbm {
    /// `(prev_bw_bytes, prev_bw)`, for a saved state.
    pub(super) const fn to_pair(self) -> (u64, u64) {
        (self.prev_bw_bytes, self.prev_bw)
    }

    /// From [`FsMbm::to_pair`].
    pub(super) const fn from_pair(prev_bw_bytes: u64, prev_bw: u64) -> Self {
        Self {
            prev_bw_bytes,
            prev_bw,
        }
    }
}

/// `mbm_overflow_count`: counts between two `width`-bit counter values, across one wrap.
const fn mbm_overflow_count(prev: u64, cur: u64, width: u32) -> u64 {
    let shift = 64 - width;
    (cur << shift).wrapping_sub(prev << shift) >> shift
}

/// Why a counter read failed: IA32_QM_CTR's Error bit (`Error`) or Unavailable bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadError {
    Error,
    Unavailable,
    /// `mbm_event` mode and no counter assigned (ENOENT in the kernel's `rr->err`).
    Unassigned,
}

impl Resctrl {
    /// `alloc_rmid`: the head of the free list; none free → EBUSY while RMIDs sit in limbo,
    /// else ENOSPC.
    pub(super) fn alloc_rmid(&mut self) -> Result<u32, i32> {
        self.rmid_free
            .pop_front()
            .ok_or(if self.limbo.is_empty() { ENOSPC } else { EBUSY })
    }

    /// `free_rmid`: into limbo (dirty in every L3 domain) when occupancy is monitored, else to
    /// the tail of the free list. RMID 0 is never freed.
    pub(super) fn free_rmid(&mut self, p: &SimPlatform, rmid: u32) {
        let Some(m) = &self.hw.mon else {
            return;
        };
        if rmid == 0 {
            return;
        }
        if m.llc_occupancy {
            if self.limbo.is_empty() {
                self.limbo_due = Some(p.now() + WORKER_PERIOD);
            }
            let doms: BTreeSet<usize> = (0..self.hw.l3_domains.len()).collect();
            self.limbo.insert(rmid, doms);
        } else {
            self.rmid_free.push_back(rmid);
        }
    }

    /// One hardware read of `event` for `rmid` in L3 domain `di`, as `__rmid_read_phys` does
    /// it: IA32_QM_EVTSEL then IA32_QM_CTR on a CPU of the domain; in `mbm_event` mode
    /// through the ABMC counter assigned to them (`__cntr_id_read`). Returns the counter value.
    fn qm_read(
        &self,
        p: &mut SimPlatform,
        di: usize,
        rmid: u32,
        event: Event,
    ) -> io::Result<Result<u64, ReadError>> {
        let cpu = self.hw.l3_domains[di].cpu;
        let sel = self.amd_cntr_of(di, rmid, event).map_or_else(
            || qm_evtsel(rmid, event.evtsel()),
            rdt_msr::regs::qm_evtsel_abmc,
        );
        wrmsr(p, cpu, IA32_QM_EVTSEL, sel)?;
        let v = rdmsr(p, cpu, IA32_QM_CTR)?;
        Ok(if v & QM_CTR_ERROR != 0 {
            Err(ReadError::Error)
        } else if v & QM_CTR_UNAVAILABLE != 0 {
            Err(ReadError::Unavailable)
        } else {
            Ok(v & QM_CTR_DATA)
        })
    }

    /// The hardware's MBM count of (`di`, `rmid`, `event`) before it wraps (the model's
    /// count through the part's erratum, [`SimPlatform::mbm_hw_count`]): the ABMC counter
    /// assigned to them in `mbm_event` mode, else the RMID's event ([`crate::amdqos`]).
    fn raw_count(&self, p: &SimPlatform, di: usize, rmid: u32, event: Event) -> u64 {
        let d = CacheDomain::new(self.hw.l3_domains[di].id);
        let counts = match self.amd_cntr_of(di, rmid, event) {
            Some(id) => p.abmc_count(d, id).unwrap_or(0),
            None => p.legacy_mbm_count(d, rmid, event.evtsel()).unwrap_or(0),
        };
        p.mbm_hw_count(rmid, counts)
    }

    /// `resctrl_arch_rmid_read`: bytes for occupancy, the 64-bit running byte count for MBM.
    fn rmid_read(
        &mut self,
        p: &mut SimPlatform,
        di: usize,
        rmid: u32,
        event: Event,
    ) -> io::Result<Result<u64, ReadError>> {
        let m = self.hw.mon.clone().expect("monitoring");
        let hw = match self.qm_read(p, di, rmid, event)? {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        if event == Event::LlcOccupancy {
            return Ok(Ok(hw * m.scale));
        }
        let raw = self.raw_count(p, di, rmid, event);
        let am = self.arch_mbm.entry((di, rmid, event)).or_default();
        // The kernel adds mbm_overflow_count() of the last two hardware values; its overflow
        // worker reads every counter each second, so whole wraps in between are counted too.
        let width = m.width.clamp(1, 62);
        let delta = raw.wrapping_sub(am.prev_raw);
        let wraps = delta >> width << width;
        let wrap_mask = (1u64 << width) - 1;
        am.chunks = am
            .chunks
            .wrapping_add(wraps)
            .wrapping_add(mbm_overflow_count(
                am.prev_raw & wrap_mask,
                hw & wrap_mask,
                width,
            ));
        am.prev_raw = raw;
        // get_corrected_mbm_count: the erratum's correction of the running count
        let chunks = rdt_core::mbm::MbmCorrection::of(&p.caps)
            .map_or(am.chunks, |c| c.corrected(rmid, am.chunks));
        Ok(Ok(chunks.wrapping_mul(m.scale)))
    }

    /// `resctrl_arch_reset_rmid` for both MBM events of `g`'s RMID in every domain (a new
    /// group's counts start at 0, whatever the RMID counted before).
    pub(super) fn reset_mon_counters(&mut self, p: &mut SimPlatform, g: Gid) -> io::Result<()> {
        let rmid = self.grp(g).rmid;
        for e in self.events() {
            if e == Event::LlcOccupancy {
                continue;
            }
            let per_node = self.hw.mon.as_ref().map_or(0, |m| m.num_rmids);
            for di in 0..self.hw.l3_domains.len() {
                for k in 0..self.hw.snc {
                    self.reset_counter(p, di, rmid + k * per_node, e)?;
                }
            }
        }
        Ok(())
    }

    /// `resctrl_arch_reset_rmid` of one (domain, RMID, MBM event): the next count starts
    /// from 0 at the counter's current value.
    pub(super) fn reset_counter(
        &mut self,
        p: &mut SimPlatform,
        di: usize,
        rmid: u32,
        e: Event,
    ) -> io::Result<()> {
        let _ = self.qm_read(p, di, rmid, e)?;
        let prev_raw = self.raw_count(p, di, rmid, e);
        self.arch_mbm.insert(
            (di, rmid, e),
            ArchMbm {
                chunks: 0,
                prev_raw,
            },
        );
        self.fs_mbm.insert((di, rmid, e), FsMbm::default());
        Ok(())
    }

    /// `mon_event_count`: the group's RMID, plus (CTRL_MON) every MON child's, in the SNC
    /// nodes `nodes` of the domain (all of them for `mon_L3_XX`, one for `mon_sub_L3_YY`;
    /// node `k` counts RMID `r` as `r + k × num_rmids`); a failed read is dropped when
    /// another succeeded.
    fn mon_event_count(
        &mut self,
        p: &mut SimPlatform,
        g: Gid,
        di: usize,
        e: Event,
        nodes: std::ops::Range<u32>,
    ) -> io::Result<Result<u64, ReadError>> {
        let per_node = self.hw.mon.as_ref().map_or(0, |m| m.num_rmids);
        let mut members = vec![g];
        members.extend_from_slice(self.children(g));
        let mut total = 0u64;
        let mut ok = false;
        let mut last_err = ReadError::Error;
        for m in members {
            // mbm_event mode: only members with a counter here count (abmc.rs).
            if let Some(er) = self.amd_read_gate(di, m, e) {
                last_err = er;
                continue;
            }
            let rmid = self.grp(m).rmid;
            for k in nodes.clone() {
                match self.rmid_read(p, di, rmid + k * per_node, e)? {
                    Ok(v) => {
                        total = total.wrapping_add(v);
                        ok = true;
                    }
                    Err(er) => last_err = er,
                }
            }
        }
        Ok(if ok { Ok(total) } else { Err(last_err) })
    }

    /// `rdtgroup_mondata_show`: `mon_L3_XX/<event>` (`sub` `None`: the sum over the
    /// domain's SNC nodes) or `mon_L3_XX/mon_sub_L3_YY/<event>` (node index `sub`).
    pub(super) fn show_mon(
        &mut self,
        p: &mut SimPlatform,
        g: Gid,
        di: usize,
        e: Event,
        sub: Option<u32>,
    ) -> io::Result<String> {
        let nodes = sub.map_or(0..self.hw.snc, |k| k..k + 1);
        Ok(match self.mon_event_count(p, g, di, e, nodes)? {
            Ok(v) => format!("{v}\n"),
            Err(ReadError::Error) => "Error\n".into(),
            Err(ReadError::Unavailable) => "Unavailable\n".into(),
            Err(ReadError::Unassigned) => "Unassigned\n".into(),
        })
    }

    /// `max_threshold_occ_write`: `kstrtouint(buf, 0)`; above the L3 size EINVAL; stored
    /// rounded down to the occupancy scale. v6.17 sets no message.
    pub(super) fn write_threshold(&mut self, data: &[u8]) -> io::Result<()> {
        let m = self.hw.mon.clone().expect("monitoring");
        let bytes = kstrtou32(data, 0).map_err(err)?;
        if bytes > m.realloc_limit {
            return einval();
        }
        let scale = m.scale.max(1);
        self.threshold = u32::try_from(u64::from(bytes) / scale * scale).unwrap_or(u32::MAX);
        Ok(())
    }

    /// `rdtgroup_mba_mbps_event_write`.
    pub(super) fn write_mba_event(&mut self, g: Gid, data: &[u8]) -> io::Result<()> {
        let Some(buf) = data.strip_suffix(b"\n") else {
            return einval();
        };
        self.status_clear();
        let events = self.events();
        let e = match buf {
            b"mbm_local_bytes" => Some(Event::MbmLocal),
            b"mbm_total_bytes" => Some(Event::MbmTotal),
            _ => None,
        }
        .filter(|e| events.contains(e));
        let Some(e) = e else {
            let mut m = b"Unsupported event id '".to_vec();
            m.extend_from_slice(buf);
            m.extend_from_slice(b"'\n");
            return self.fail(EINVAL, m);
        };
        self.grp_mut(g).mba_event = e;
        Ok(())
    }

    /// Runs the workers due on the virtual clock.
    pub(super) fn run_workers(&mut self, p: &mut SimPlatform) -> io::Result<()> {
        self.sample_host_tasks(p);
        let now = p.now();
        if self.limbo_due.is_some_and(|due| now >= due) {
            self.check_limbo(p)?;
            self.limbo_due = (!self.limbo.is_empty()).then(|| now + WORKER_PERIOD);
        }
        if self.opts.mba_mbps && now >= self.mbm_last + WORKER_PERIOD {
            let elapsed = now.saturating_sub(self.mbm_last);
            self.mbm_last = now;
            self.mbm_sample(p, elapsed.as_secs_f64())?;
        }
        Ok(())
    }

    /// `__check_limbo`, per domain: an RMID whose occupancy reads below the threshold is
    /// clean there; clean everywhere, it goes to the tail of the free list.
    fn check_limbo(&mut self, p: &mut SimPlatform) -> io::Result<()> {
        for di in 0..self.hw.l3_domains.len() {
            let busy: Vec<u32> = self
                .limbo
                .iter()
                .filter(|(_, d)| d.contains(&di))
                .map(|(&r, _)| r)
                .collect();
            let per_node = self.hw.mon.as_ref().map_or(0, |m| m.num_rmids);
            for rmid in busy {
                // SNC: clean only when clean in every node of the L3.
                let mut dirty = false;
                for k in 0..self.hw.snc {
                    dirty |=
                        match self.rmid_read(p, di, rmid + k * per_node, Event::LlcOccupancy)? {
                            Ok(v) => v >= u64::from(self.threshold),
                            Err(_) => true,
                        };
                }
                if dirty {
                    continue;
                }
                let doms = self.limbo.get_mut(&rmid).expect("in limbo");
                doms.remove(&di);
                if doms.is_empty() {
                    self.limbo.remove(&rmid);
                    self.rmid_free.push_back(rmid);
                }
            }
        }
        Ok(())
    }

    /// `mbm_handle_overflow` with `mba_MBps`: per L3 domain, every group's MBM counters are
    /// read and their bandwidth over the period computed (`mbm_bw_count`), then each
    /// CTRL_MON group's MBA percentage takes one step toward its target (`update_mba_bw`).
    fn mbm_sample(&mut self, p: &mut SimPlatform, secs: f64) -> io::Result<()> {
        let events: Vec<Event> = self
            .events()
            .into_iter()
            .filter(|&e| e != Event::LlcOccupancy)
            .collect();
        let ctrls = self.ctrl_groups();
        for di in 0..self.hw.l3_domains.len() {
            for &g in &ctrls {
                let mut gs = vec![g];
                gs.extend_from_slice(self.children(g));
                for m in gs {
                    let rmid = self.grp(m).rmid;
                    for &e in &events {
                        if let Ok(bytes) = self.rmid_read(p, di, rmid, e)? {
                            let st = self.fs_mbm.entry((di, rmid, e)).or_default();
                            let delta = bytes.wrapping_sub(st.prev_bw_bytes);
                            st.prev_bw_bytes = bytes;
                            let mib = crate::num::u64_to_f64(delta) / (1024.0 * 1024.0);
                            st.prev_bw = crate::num::f64_floor_u64(mib / secs.max(1.0));
                        }
                    }
                }
                self.update_mba_bw(p, g, di)?;
            }
        }
        Ok(())
    }

    /// `update_mba_bw`: one step of `bw_gran` down when over the target, up when a step up
    /// would likely stay under it.
    fn update_mba_bw(&mut self, p: &mut SimPlatform, g: Gid, di: usize) -> io::Result<()> {
        let Some(b) = self.hw.mb.clone() else {
            return Ok(());
        };
        let grp = self.grp(g);
        let (closid, e) = (grp.closid, grp.mba_event);
        let mut rmids = vec![grp.rmid];
        if let GroupKind::Ctrl { children } = &grp.kind {
            rmids.extend(children.iter().map(|&c| self.grp(c).rmid));
        }
        let cur_bw: u64 = rmids
            .iter()
            .map(|&r| self.fs_mbm.get(&(di, r, e)).map_or(0, |s| s.prev_bw))
            .sum();
        let user_bw = u64::from(self.mbps_val[di][closid as usize]);
        let cur = self.ctrl_val[&Res::Mb][di][closid as usize];
        let (min_bw, gran) = (u64::from(b.min_bw), u64::from(b.bw_gran));
        let new = if cur > min_bw && user_bw < cur_bw {
            cur - gran
        } else if cur < u64::from(MAX_MBA_BW) && cur > 0 && user_bw > cur_bw * (cur + min_bw) / cur
        {
            cur + gran
        } else {
            return Ok(());
        };
        self.ctrl_val.get_mut(&Res::Mb).expect("MB present")[di][closid as usize] = new;
        let (addr, v) = self.hw.ctrl_msr(Res::Mb, closid, new);
        let cpu = self.hw.l3_domains[di].cpu;
        wrmsr(p, cpu, addr, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_count_spans_one_wrap() {
        assert_eq!(mbm_overflow_count(10, 25, 24), 15);
        assert_eq!(mbm_overflow_count((1 << 24) - 5, 3, 24), 8);
    }
}
