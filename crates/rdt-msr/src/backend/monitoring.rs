//! Monitoring: starting groups (RMIDs into IA32_PQR_ASSOC), polling IA32_QM_EVTSEL /
//! IA32_QM_CTR into each group's accumulator, stopping and resetting; and the uncore
//! groups ([`crate::uncore`]).

use std::time::Instant;

use rdt_core::mbm::MbmCorrection;
use rdt_core::monitor::CounterFormat;
use rdt_core::{
    CacheDomain, CpuSet, LogicalCpu, MonAccumulator, MonEvents, MonGroupId, PmuSource,
    RequestError, RmidEvent,
};

use crate::claims::Claims;
use crate::regs::{self, IA32_PQR_ASSOC, IA32_QM_CTR, IA32_QM_EVTSEL};
use crate::uncore::{self, UncoreGroup};
use crate::{MsrError, MsrIo};

use super::MsrBackend;

/// Reads of IA32_QM_CTR per event per poll before the value is reported as unavailable
/// (pqos `hw_mon_read`: at most 4 attempts).
pub const QM_CTR_ATTEMPTS: u32 = 4;

/// The IA32_QM_EVTSEL event id of an RMID event (SDM Vol. 3B, 18.18.5: 1 occupancy,
/// 2 total, 3 local).
const fn evtsel_id(event: RmidEvent) -> u64 {
    match event {
        RmidEvent::LlcOccupancy => regs::EVT_LLC_OCCUPANCY,
        RmidEvent::MbmLocal => regs::EVT_MBM_LOCAL,
        RmidEvent::MbmTotal => regs::EVT_MBM_TOTAL,
    }
}

/// One RMID of a group in one L3 domain (pqos's poll context).
#[derive(Clone, Debug)]
pub(super) struct Context {
    pub(super) domain: CacheDomain,
    pub(super) rmid: u32,
    /// The CPU IA32_QM_EVTSEL/IA32_QM_CTR are accessed on: the group's lowest CPU in the domain.
    pub(super) cpu: LogicalCpu,
    /// On an ABMC part, the counter assigned to each MBM event ([`super::abmc`]): read
    /// instead of the RMID's event.
    pub(super) counters: Vec<(RmidEvent, u32)>,
}

/// A started monitoring group with everything a poll needs precomputed.
#[derive(Clone, Debug)]
pub(super) struct Group {
    pub(super) id: MonGroupId,
    cpus: Vec<LogicalCpu>,
    /// RMID events read per context, in [`RmidEvent::ALL`]'s order.
    rmid_events: Vec<RmidEvent>,
    /// One per L3 domain spanned, ascending; the accumulator's contexts in the same order,
    /// `nodes` each (context `i`'s node `k` is accumulator context `i × nodes + k`).
    pub(super) contexts: Vec<Context>,
    /// Sub-NUMA Clustering: the nodes per L3 whose counters a context sums (1 without SNC),
    /// node `k` counting the context's RMID `r` as `r + k × stride`.
    nodes: u32,
    stride: u32,
    pub(super) acc: MonAccumulator,
}

/// Reads one event of one RMID, or the ABMC counter assigned to it: WRMSR IA32_QM_EVTSEL
/// (`sel`: [`regs::qm_evtsel`] or [`regs::qm_evtsel_abmc`]), RDMSR IA32_QM_CTR (pqos
/// `hw_mon_read`; Linux `__cntr_id_read`). On the Error flag (bit 63) EVTSEL is written again before the next read;
/// on the Unavailable flag (bit 62) IA32_QM_CTR is read again; after [`QM_CTR_ATTEMPTS`]
/// reads the value is `None`. The data is bits 61:0 (the accumulator masks it to the
/// counter width).
fn read_event<M: MsrIo>(io: &mut M, cpu: LogicalCpu, sel: u64) -> Result<Option<u64>, MsrError> {
    io.write(cpu, IA32_QM_EVTSEL, sel)?;
    for attempt in 1..=QM_CTR_ATTEMPTS {
        let v = io.read(cpu, IA32_QM_CTR)?;
        if v & regs::QM_CTR_ERROR != 0 {
            // QM_CTR bit 63: the selection was not valid; select again and retry.
            if attempt < QM_CTR_ATTEMPTS {
                io.write(cpu, IA32_QM_EVTSEL, sel)?;
            }
            continue;
        }
        if v & regs::QM_CTR_UNAVAILABLE != 0 {
            continue; // QM_CTR bit 62: no data yet; read again
        }
        return Ok(Some(v & regs::QM_CTR_DATA)); // bits 61:0
    }
    Ok(None)
}

impl Group {
    /// Reads this group's RMID counters and PMU counts into its accumulator; without
    /// occupancy when `!occupancy` (the reading at start: occupancy is a level, not a
    /// count with a start).
    fn read<M: MsrIo, P: PmuSource>(
        &mut self,
        io: &mut M,
        pmu: &mut P,
        occupancy: bool,
    ) -> Result<(), MsrError> {
        for (i, ctx) in self.contexts.iter().enumerate() {
            for k in 0..self.nodes {
                let rmid = ctx.rmid + k * self.stride;
                for &event in &self.rmid_events {
                    if !occupancy && event == RmidEvent::LlcOccupancy {
                        continue;
                    }
                    // EVTSEL: RMID in 41:32, event id in 7:0; or the counter's id, ExtendedEvtID
                    let sel = ctx.counters.iter().find(|(e, _)| *e == event).map_or_else(
                        || regs::qm_evtsel(rmid, evtsel_id(event)),
                        |&(_, id)| regs::qm_evtsel_abmc(id),
                    );
                    let now = read_event(io, ctx.cpu, sel)?;
                    self.acc
                        .record(i * self.nodes as usize + k as usize, event, now);
                }
            }
        }
        if self.acc.events().intersects(MonEvents::PMU) {
            self.acc
                .record_pmu(self.cpus.iter().map(|&cpu| pmu.read(cpu)));
        }
        Ok(())
    }

    /// The reading at start, at `at`: every MBM counter and the PMU once
    /// ([`MonAccumulator::finish_baseline`]).
    fn baseline<M: MsrIo, P: PmuSource>(
        &mut self,
        io: &mut M,
        pmu: &mut P,
        at: Instant,
    ) -> Result<(), MsrError> {
        self.read(io, pmu, false)?;
        self.acc.finish_baseline(at);
        Ok(())
    }

    /// A poll finishing at `at`: every counter and the PMU.
    fn poll<M: MsrIo, P: PmuSource>(
        &mut self,
        io: &mut M,
        pmu: &mut P,
        at: Instant,
    ) -> Result<(), MsrError> {
        self.read(io, pmu, true)?;
        self.acc.finish(at);
        Ok(())
    }
}

impl<M: MsrIo, P: PmuSource> MsrBackend<M, P> {
    /// [`BackendExt::start_monitoring`](rdt_core::BackendExt::start_monitoring) without the lock.
    fn start_group(&mut self, cpus: &CpuSet, events: MonEvents) -> Result<MonGroupId, MsrError> {
        if cpus.is_empty() || events.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        let mut members: Vec<(LogicalCpu, Option<CacheDomain>)> = Vec::with_capacity(cpus.len());
        for cpu in cpus.iter() {
            let p = self.topology.get(cpu).ok_or(RequestError::NoSuchCpu(cpu))?;
            members.push((cpu, p.l3));
        }
        let rmid_events = self.caps.check_rmid_events(events)?;
        if !rmid_events.is_empty()
            && let Some(&(cpu, _)) = members.iter().find(|(_, l3)| l3.is_none())
        {
            return Err(RequestError::Unsupported(format!(
                "CPU {cpu} has no L3 cache, so its LLC occupancy and memory bandwidth cannot be monitored"
            )).into());
        }
        let assoc = self.unmonitored_assoc(&members)?;

        let mut contexts: Vec<Context> = Vec::new();
        if !rmid_events.is_empty() {
            contexts = self.allocate_rmids(cpus, &members)?;
            // ABMC: counters checked, then assigned, before any CPU is tagged
            let evs: Vec<RmidEvent> = RmidEvent::of(rmid_events).collect();
            self.assign_counters(&mut contexts, &evs)?;
            let rmids: Vec<(LogicalCpu, u32)> = members
                .iter()
                .map(|&(cpu, l3)| {
                    let rmid = contexts
                        .iter()
                        .find(|c| Some(c.domain) == l3)
                        .map_or(0, |c| c.rmid);
                    (cpu, rmid)
                })
                .collect();
            // The claim is on disk before the first CPU is tagged: a kill at any write leaves
            // a record of every CPU this group may have tagged.
            if let Some(c) = &mut self.claims {
                c.add(rmids.iter().copied())?;
            }
            for (i, &(cpu, rmid)) in rmids.iter().enumerate() {
                if let Err(e) =
                    self.io
                        .write(cpu, IA32_PQR_ASSOC, regs::pqr_with_rmid(assoc[i], rmid))
                {
                    for (j, &(done, _)) in members.iter().enumerate().take(i) {
                        let _ = self.io.write(done, IA32_PQR_ASSOC, assoc[j]); // best-effort rollback
                    }
                    for ctx in &mut contexts {
                        let _ = self.unassign_context(ctx);
                    }
                    if let Some(c) = &mut self.claims {
                        let _ = c.remove(members.iter().map(|m| m.0));
                    }
                    return Err(e);
                }
            }
        }

        let id = MonGroupId(self.next_group);
        let cpus: Vec<LogicalCpu> = members.iter().map(|m| m.0).collect();
        let (acc, nodes, stride) = self.accumulator(events, &contexts, cpus.len());
        let mut group = Group {
            id,
            cpus,
            rmid_events: RmidEvent::of(events).collect(),
            contexts,
            nodes,
            stride,
            acc,
        };
        // The reading at start (rdt_core::monitor, "Start and first poll"): a failed
        // register access gives the RMIDs back, as a failed tagging does.
        if let Err(e) = group.baseline(&mut self.io, &mut self.pmu, Instant::now()) {
            if !group.contexts.is_empty() {
                for ctx in &mut group.contexts {
                    let _ = self.unassign_context(ctx);
                }
                let _ = self.release_rmids(group.cpus.iter().copied()); // best effort
                if let Some(c) = &mut self.claims {
                    let _ = c.remove(group.cpus.iter().copied());
                }
            }
            return Err(e);
        }
        self.next_group += 1;
        self.groups.push(group);
        Ok(id)
    }

    /// The IA32_PQR_ASSOC values of `members`, after checking none is in a group of this
    /// backend or holds an RMID already.
    fn unmonitored_assoc(
        &mut self,
        members: &[(LogicalCpu, Option<CacheDomain>)],
    ) -> Result<Vec<u64>, MsrError> {
        for &(cpu, _) in members {
            if let Some(g) = self.groups.iter().find(|g| g.cpus.contains(&cpu)) {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("CPU {cpu}"),
                    by: Some(format!("monitoring group {} of this process", g.id.0)),
                }
                .into());
            }
        }
        let mut assoc = Vec::with_capacity(members.len());
        for &(cpu, _) in members {
            let v = self.io.read(cpu, IA32_PQR_ASSOC)?;
            let rmid = regs::pqr_rmid(v); // IA32_PQR_ASSOC bits 9:0
            if rmid != 0 {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("CPU {cpu}"),
                    by: Some(format!(
                        "RMID {rmid} (another tool or a run that did not stop)"
                    )),
                }
                .into());
            }
            assoc.push(v);
        }
        Ok(assoc)
    }

    /// The accumulator of a new group: its counter contexts (with SNC, one per node of
    /// each context: the RMIDs are split between the nodes of an L3 in the kernel's RMID
    /// sharing mode, MSR_RMID_SNC_CONFIG, so the group's RMID counts on node k as RMID + k ×
    /// (RMIDs / nodes)), corrected for the Broadwell-X / Skylake-X MBM erratum as the kernel
    /// corrects it, so both interfaces report the same bytes. Also the nodes and stride.
    fn accumulator(
        &self,
        events: MonEvents,
        contexts: &[Context],
        members: usize,
    ) -> (MonAccumulator, u32, u32) {
        let (nodes, stride) = self.snc_split();
        let domains: Vec<CacheDomain> = contexts
            .iter()
            .flat_map(|c| std::iter::repeat_n(c.domain, nodes as usize))
            .collect();
        let mut acc = MonAccumulator::new(
            events,
            &domains,
            CounterFormat::of_qm_ctr(&self.caps),
            members,
        );
        if let Some(c) = MbmCorrection::of(&self.caps) {
            for (i, ctx) in contexts.iter().enumerate() {
                if let Some(f) = c.factor_for(ctx.rmid) {
                    for k in 0..nodes as usize {
                        acc.correct_mbm(i * nodes as usize + k, f);
                    }
                }
            }
        }
        (acc, nodes, stride)
    }

    /// Every CPU's IA32_PQR_ASSOC RMID := 0 (COS kept; written only where it is not 0
    /// already), and every group of this backend is forgotten (pqos `-r`).
    ///
    /// # Errors
    /// The first read or write error; every CPU is still attempted.
    pub(super) fn reset_rmids(&mut self) -> Result<(), MsrError> {
        let groups = std::mem::take(&mut self.groups);
        let mut unassigned = Ok(());
        for mut g in groups {
            for ctx in &mut g.contexts {
                let r = self.unassign_context(ctx);
                if unassigned.is_ok() {
                    unassigned = r;
                }
            }
        }
        let all: Vec<LogicalCpu> = self.topology.cpus().iter().map(|c| c.cpu).collect();
        let released = self.release_rmids(all);
        let unclaimed = self.claims.as_mut().map_or(Ok(()), Claims::clear);
        unassigned.and(released).and(unclaimed)
    }

    /// The lowest CPU of every package, by package id: where pqos reads and writes a
    /// per-socket register (`pqos_cpu_get_one_core` of each of `pqos_cpu_get_sockets`).
    pub(super) fn package_firsts(&self) -> Vec<LogicalCpu> {
        self.topology
            .packages()
            .into_iter()
            .filter_map(|p| {
                self.topology
                    .cpus()
                    .iter()
                    .find(|c| c.package == p)
                    .map(|c| c.cpu)
            })
            .collect()
    }

    /// What `-r` sets besides the RMIDs ([`rdt_core::MonReset`], checked by the caller):
    /// I/O RDT monitoring, IA32_L3_IO_QOS_CFG (0xC83) bit 1, then the SNC mode,
    /// MSR_RMID_SNC_CONFIG (0xCA0) bit 0, each read-modify-written on the lowest CPU of every
    /// package where it differs (lib/hw_monitoring.c `hw_mon_reset_iordt`,
    /// `hw_mon_set_snc_mode`: one core per socket). The SNC state in the capabilities and
    /// the RMID split follow the new mode.
    ///
    /// # Errors
    /// The first failed read or write (packages before it are left written).
    pub(super) fn reset_mon_config(&mut self, cfg: rdt_core::MonReset) -> Result<(), MsrError> {
        let firsts = self.package_firsts();
        let rmw = |io: &mut dyn FnMut(LogicalCpu) -> Result<(), MsrError>| {
            firsts.iter().try_for_each(|&cpu| io(cpu))
        };
        let bit = |v: u64, mask: u64, on: bool| if on { v | mask } else { v & !mask };
        let io_on = match cfg.l3_iordt {
            rdt_core::FeatureSetting::Any => None,
            rdt_core::FeatureSetting::On => Some(true),
            rdt_core::FeatureSetting::Off => Some(false),
        };
        // a part without I/O RDT monitoring has no bit to clear (`off` is then a no-op, as
        // in pqos, which turns it off only where `iordt_on`)
        if let (Some(on), Some(_)) = (io_on, self.caps.mon_iordt) {
            rmw(&mut |cpu| {
                let v = self.io.read(cpu, regs::IA32_L3_IO_QOS_CFG)?;
                let new = bit(v, regs::L3_IO_QOS_MON_EN, on);
                if new != v {
                    self.io.write(cpu, regs::IA32_L3_IO_QOS_CFG, new)?;
                }
                Ok(())
            })?;
            self.caps.mon_iordt = Some(on);
        }
        if let Some(mode) = cfg.snc {
            let local = mode == rdt_core::SncMode::Local;
            rmw(&mut |cpu| {
                let v = self.io.read(cpu, regs::MSR_RMID_SNC_CONFIG)?;
                let new = bit(v, 1, local);
                if new != v {
                    self.io.write(cpu, regs::MSR_RMID_SNC_CONFIG, new)?;
                }
                Ok(())
            })?;
            if let Some(state) = self.caps.snc.as_mut() {
                state.mode = mode;
                self.snc = if local { 1 } else { state.nodes_per_l3 };
            }
        }
        Ok(())
    }

    /// Starts a group: checks every CPU is online, not in a group of this backend and has
    /// RMID 0 in IA32_PQR_ASSOC; picks per L3 domain the lowest RMID >= 1 that no
    /// IA32_PQR_ASSOC of the domain and no other group holds; writes it into each CPU's
    /// IA32_PQR_ASSOC (COS kept). IPC and LLC misses need no RMID and are accepted even
    /// without a PMU (their values are then `None`).
    ///
    /// # Errors
    /// [`RequestError::EmptyGroup`](rdt_core::RequestError::EmptyGroup), [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu), [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) (an
    /// event the platform does not count, or a CPU without L3), [`RequestError::AlreadyMonitored`](rdt_core::RequestError::AlreadyMonitored),
    /// [`RequestError::OutOfRmids`](rdt_core::RequestError::OutOfRmids): nothing is written in these cases. A failed write is rolled
    /// back on the CPUs already written (best effort) and returned.
    /// Holds the writers' lock ([`MsrBackend::with_run_dir`]) while it picks and writes
    /// the RMIDs, so two processes cannot pick the same one.
    pub(super) fn start_locked(
        &mut self,
        cpus: &CpuSet,
        events: MonEvents,
    ) -> Result<MonGroupId, MsrError> {
        rdt_core::transaction::with_writers(self, |b| b.start_group(cpus, events))?
    }

    /// Starts a group of no CPU that holds one RMID, the same in every L3 domain, for an
    /// agent that tags its own traffic with it: the I/O RDT channels of pqos's
    /// `--mon-channel` (intel-cmt-cat v26.03 `lib/hw_monitoring.c` `hw_mon_start_channels`:
    /// an unused RMID, then the channels' RMID tagging registers). The RMID is the lowest
    /// that no IA32_PQR_ASSOC, no group of this backend and nothing in `taken` (the
    /// channels' current tags) holds in any L3 domain; it is polled as every group is
    /// (IA32_QM_EVTSEL/IA32_QM_CTR on each domain's lowest CPU, summed over the domains, so
    /// the value does not depend on which L3 a device's traffic lands in) and given back by
    /// [`MsrBackend::stop_monitoring`]. Nothing is tagged here: the caller tags the
    /// channels. Returns the group and its RMID. Holds the writers' lock while it picks.
    ///
    /// # Errors
    /// [`RequestError::EmptyGroup`](rdt_core::RequestError::EmptyGroup) for no event;
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) for an event other
    /// than LLC occupancy and MBM (the PMU counts CPUs, not channels) or one the part lacks;
    /// [`RequestError::OutOfRmids`](rdt_core::RequestError::OutOfRmids); a register access.
    pub fn start_rmid_group(
        &mut self,
        events: MonEvents,
        taken: &[u32],
    ) -> Result<(MonGroupId, u32), MsrError> {
        rdt_core::transaction::with_writers(self, |b| b.start_rmid_group_unlocked(events, taken))?
    }

    fn start_rmid_group_unlocked(
        &mut self,
        events: MonEvents,
        taken: &[u32],
    ) -> Result<(MonGroupId, u32), MsrError> {
        if events.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        let other = events - events.rmid_events() - MonEvents::MBM_REMOTE;
        if !other.is_empty() {
            return Err(RequestError::Unsupported(format!(
                "{} cannot be monitored on an I/O RDT channel: only LLC occupancy and memory \
                 bandwidth are counted by RMID",
                other.describe()
            ))
            .into());
        }
        self.caps.check_rmid_events(events)?;
        let mut contexts = self.allocate_shared_rmid(taken)?;
        let rmid = contexts.first().map_or(0, |c| c.rmid);
        let evs: Vec<RmidEvent> = RmidEvent::of(events).collect();
        self.assign_counters(&mut contexts, &evs)?;
        let id = MonGroupId(self.next_group);
        let (acc, nodes, stride) = self.accumulator(events, &contexts, 0);
        let mut group = Group {
            id,
            cpus: Vec::new(),
            rmid_events: evs,
            contexts,
            nodes,
            stride,
            acc,
        };
        if let Err(e) = group.baseline(&mut self.io, &mut self.pmu, Instant::now()) {
            for ctx in &mut group.contexts {
                let _ = self.unassign_context(ctx);
            }
            return Err(e);
        }
        self.next_group += 1;
        self.groups.push(group);
        Ok((id, rmid))
    }

    /// Programs the CHA performance monitors of one CPU per socket (the lowest) as pqos does
    /// (`lib/uncore_monitoring.c`, see [`crate::uncore`]): each event has a CHA of its own,
    /// so two groups of one socket would share counters and are refused.
    ///
    /// # Errors
    /// [`RequestError::EmptyGroup`](rdt_core::RequestError::EmptyGroup) for no socket or no
    /// event; [`RequestError::UnsupportedEvent`](rdt_core::RequestError::UnsupportedEvent)
    /// when `events` holds a non-uncore event or the CPU has no uncore events
    /// ([`Capabilities::uncore_pcie`](rdt_core::Capabilities::uncore_pcie)); [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain)
    /// for a socket without an online CPU;
    /// [`RequestError::AlreadyMonitored`](rdt_core::RequestError::AlreadyMonitored) for a
    /// socket of another uncore group: nothing is written in these cases. A failed write
    /// stops the CHAs already programmed (best effort) and is returned.
    pub fn start_uncore_monitoring(
        &mut self,
        sockets: &[u32],
        events: MonEvents,
    ) -> Result<MonGroupId, MsrError> {
        if sockets.is_empty() || events.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        if !self.caps.uncore_pcie || !MonEvents::UNCORE.contains(events) {
            let event = if self.caps.uncore_pcie {
                events.difference(MonEvents::UNCORE)
            } else {
                events
            };
            return Err(RequestError::UnsupportedEvent {
                event,
                needed_for: None,
            }
            .into());
        }
        let mut members = Vec::with_capacity(sockets.len());
        for &s in sockets {
            let cpu = self.topology.cpus_in_package(s).first().ok_or_else(|| {
                RequestError::NoSuchDomain {
                    resource: "socket",
                    domain: CacheDomain::new(s),
                    known: Some(
                        self.topology
                            .packages()
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(","),
                    ),
                }
            })?;
            if let Some(g) = self
                .uncore
                .iter()
                .find(|g| g.sockets.iter().any(|(x, _)| *x == s))
            {
                return Err(RequestError::AlreadyMonitored {
                    what: format!("socket {s}"),
                    by: Some(format!(
                        "uncore monitoring group {} of this process",
                        g.id.0
                    )),
                }
                .into());
            }
            if !members.iter().any(|(x, _)| *x == s) {
                members.push((s, cpu));
            }
        }
        let id = MonGroupId(self.next_group);
        let mut group = UncoreGroup::new(id, members, events, Instant::now());
        let mut done: Vec<(LogicalCpu, usize)> = Vec::new();
        for &(_, cpu) in &group.sockets {
            for (k, e) in group.events.iter().enumerate() {
                if let Err(err) = uncore::program(&mut self.io, cpu, e) {
                    for &(cpu, k) in &done {
                        let _ = uncore::stop(&mut self.io, cpu, &group.events[k]);
                    }
                    return Err(err);
                }
                done.push((cpu, k));
            }
        }
        // programming reset the counters: the first poll counts from here, no reading
        // needed (rdt_core::monitor, "Start and first poll")
        group.since = Instant::now();
        self.next_group += 1;
        self.uncore.push(group);
        Ok(id)
    }

    /// For every group, every L3 domain it spans and every hardware event: WRMSR
    /// IA32_QM_EVTSEL (`rmid << 32 | event`), RDMSR IA32_QM_CTR on the group's lowest CPU
    /// in that domain; plus one PMU read per CPU when IPC or LLC misses are monitored.
    ///
    /// # Errors
    /// A read or write error of the `MsrIo` (not the Error/Unavailable flags of
    /// IA32_QM_CTR: those make the value `None`).
    pub fn poll(&mut self) -> Result<(), MsrError> {
        let Self {
            io,
            pmu,
            groups,
            uncore,
            ..
        } = self;
        let at = Instant::now(); // one timestamp for every group of the poll
        for g in groups {
            g.poll(io, pmu, at)?;
        }
        for g in uncore {
            g.poll(io, at)?;
        }
        Ok(())
    }

    /// The RMID `group` holds in each L3 domain it spans, ascending by domain (the first
    /// node's with Sub-NUMA Clustering); `None` for an unknown (or uncore) group. What
    /// another interface that counts by RMID reads beside IA32_QM_CTR: RDT 1.3's region
    /// counters in MMIO (`rdt_mmio`'s backend).
    #[must_use]
    pub fn group_rmids(&self, group: MonGroupId) -> Option<Vec<(CacheDomain, u32)>> {
        let i = self.groups.binary_search_by_key(&group, |g| g.id).ok()?;
        Some(
            self.groups[i]
                .contexts
                .iter()
                .map(|c| (c.domain, c.rmid))
                .collect(),
        )
    }

    /// Forgets the group and writes RMID 0 back into its CPUs' IA32_PQR_ASSOC (COS kept).
    ///
    /// # Errors
    /// [`RequestError::NoSuchGroup`](rdt_core::RequestError::NoSuchGroup); otherwise the first read or write error (every CPU is
    /// still attempted and the group is forgotten).
    pub fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), MsrError> {
        if let Ok(i) = self.uncore.binary_search_by_key(&group, |g| g.id) {
            // pqos `uncore_mon_stop`: box control "reset control" of each event's CHA on
            // each socket; every one is attempted, the first error returned
            let g = self.uncore.remove(i);
            let mut first = Ok(());
            for &(_, cpu) in &g.sockets {
                for e in &g.events {
                    let r = uncore::stop(&mut self.io, cpu, e);
                    if first.is_ok() {
                        first = r;
                    }
                }
            }
            return first;
        }
        let i = self
            .groups
            .binary_search_by_key(&group, |g| g.id)
            .map_err(|_| RequestError::NoSuchGroup(group))?;
        let mut g = self.groups.remove(i);
        if g.contexts.is_empty() {
            return Ok(());
        }
        let mut unassigned = Ok(());
        for ctx in &mut g.contexts {
            let r = self.unassign_context(ctx);
            if unassigned.is_ok() {
                unassigned = r;
            }
        }
        let released = self.release_rmids(g.cpus.iter().copied());
        let unclaimed = self.claims.as_mut().map_or(Ok(()), |c| c.remove(g.cpus));
        unassigned.and(released).and(unclaimed)
    }
}

#[cfg(test)]
mod tests;
