//! The allocation state of a platform as one value: what a reset replaces, and what undoing
//! a reset (or rolling back a killed one) writes back.

use std::collections::BTreeMap;

use crate::BackendExt;
use crate::{
    AllocReset, Backend, BackendError, CacheDomain, CatClass, CatResource, ChannelId, ClassId,
    CpuSet, FeatureSetting, GroupKind, GroupOwner, LogicalCpu, MbaClass, MbaCtrl, MbaResource,
    RegionBw, RequestError, TaskId,
};

/// Everything allocation sets, as read from a [`Backend`]: the CDP and MBA CTRL states,
/// every class's masks and MBA and SMBA limits in every domain, every CPU's class, and (OS interface)
/// the tasks placed in pqos's `COS<n>` groups. CPUs and tasks in other tools' resctrl
/// groups are not part of it: a reset does not touch them either.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AllocState {
    /// L3 CDP on (`None`: no L3 CAT with CDP).
    pub l3_cdp: Option<bool>,
    /// L2 CDP on (`None`: no L2 CAT with CDP).
    pub l2_cdp: Option<bool>,
    /// The kernel's MBA software controller on (`None`: not available here).
    pub mba_ctrl: Option<bool>,
    /// L3 I/O RDT allocation on ([`crate::Capabilities::l3_iordt`]; `None`: not available
    /// here, and in journals written before it was planned).
    #[cfg_attr(feature = "serde", serde(default))]
    pub l3_iordt: Option<bool>,
    /// Per cache level and domain, every class's masks.
    pub cat: Vec<(CatResource, CacheDomain, Vec<CatClass>)>,
    /// Per L3 domain, every class's MBA limit (MiB/s while MBA CTRL is on).
    pub mba: Vec<(CacheDomain, Vec<MbaClass>)>,
    /// Per L3 domain, every class's SMBA limit (AMD; empty without SMBA, and in journals
    /// written before SMBA was planned).
    #[cfg_attr(feature = "serde", serde(default))]
    pub smba: Vec<(CacheDomain, Vec<MbaClass>)>,
    /// Every CPU's class (CPUs in other tools' groups left out).
    pub cpus: Vec<(LogicalCpu, ClassId)>,
    /// Tasks explicitly in a class other than COS 0 (OS interface).
    pub tasks: Vec<(TaskId, ClassId)>,
    /// Per L3 domain and class, every region MBA control (MMIO interface, RDT 1.3; empty
    /// elsewhere and in journals written before regions were planned).
    #[cfg_attr(feature = "serde", serde(default))]
    pub regions: Vec<(CacheDomain, ClassId, Vec<RegionBw>)>,
    /// Every I/O RDT channel whose link tags CLOS, with its class (`None`: enable bit
    /// clear); empty without I/O RDT, and in journals written before channels were planned.
    #[cfg_attr(feature = "serde", serde(default))]
    pub channels: Vec<(ChannelId, Option<ClassId>)>,
}

/// What [`AllocState::restore`] wrote: how many calls, for the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Whether a reset was needed to bring CDP or MBA CTRL back.
    pub reset: bool,
    /// Classes whose masks or limits were written back.
    pub classes: usize,
    /// CPUs and tasks moved back.
    pub associations: usize,
}

fn cdp_of<B: Backend>(b: &B, resource: CatResource) -> Option<bool> {
    b.capabilities()
        .cat(resource)
        .filter(|c| c.cdp_supported)
        .map(|c| c.cdp_enabled)
}

fn ctrl_of<B: Backend>(b: &mut B) -> Option<bool> {
    match b.mba_ctrl()? {
        MbaCtrl::Unsupported => None,
        MbaCtrl::Disabled => Some(false),
        MbaCtrl::Enabled => Some(true),
    }
}

const fn setting(on: Option<bool>) -> FeatureSetting {
    match on {
        None => FeatureSetting::Any,
        Some(true) => FeatureSetting::On,
        Some(false) => FeatureSetting::Off,
    }
}

impl AllocState {
    /// Reads the whole allocation state: one table read per resource and domain, one class
    /// read per CPU, and on the OS interface the control groups and the `tasks` of each
    /// `COS<n>` group that exists.
    ///
    /// # Errors
    /// A read fails.
    pub fn read<B: Backend>(b: &mut B) -> Result<Self, B::Error> {
        let mut cat = Vec::new();
        for resource in [CatResource::L3, CatResource::L2] {
            if b.capabilities().cat(resource).is_none() {
                continue;
            }
            let domains = match resource {
                CatResource::L3 => b.topology().l3_domains(),
                CatResource::L2 => b.topology().l2_domains(),
            };
            for d in domains {
                cat.push((resource, d, b.cat_classes(resource, d)?));
            }
        }
        let mut bw = [Vec::new(), Vec::new()];
        for (resource, tables) in MbaResource::ALL.into_iter().zip(&mut bw) {
            if b.capabilities().bandwidth(resource).get().is_some() {
                for d in b.topology().l3_domains() {
                    tables.push((d, b.bandwidth_classes(resource, d)?));
                }
            }
        }
        let [mba, smba] = bw;
        let cpus: Vec<(LogicalCpu, ClassId)> = b
            .cpu_classes()?
            .into_iter()
            .filter_map(|(cpu, class)| Some((cpu, class?)))
            .collect();
        let mut tasks = Vec::new();
        for g in b.groups()? {
            if let (GroupKind::Control, GroupOwner::Pqos, Some(class)) = (g.kind, g.owner, g.class)
            {
                for t in b.tasks_of_class(class)? {
                    tasks.push((t, class));
                }
            }
        }
        let mut regions = Vec::new();
        let domains = b.topology().l3_domains();
        if let Some(r) = b.regions() {
            for d in domains {
                for (c, values) in (0..r.region_classes()).zip(r.region_bandwidth_all(d)?) {
                    regions.push((d, ClassId::new(c), values));
                }
            }
        }
        let mut channels = Vec::new();
        if let Some(io) = b.io_rdt() {
            for c in io.io_channels().into_iter().filter(|c| c.clos_tagging) {
                channels.push((c.id, io.channel_class(c.id)?));
            }
        }
        Ok(Self {
            channels,
            regions,
            l3_cdp: cdp_of(b, CatResource::L3),
            l2_cdp: cdp_of(b, CatResource::L2),
            mba_ctrl: ctrl_of(b),
            l3_iordt: b.capabilities().l3_iordt,
            cat,
            mba,
            smba,
            cpus,
            tasks,
        })
    }

    /// The reset that brings CDP and MBA CTRL back to this state, when they differ from
    /// `b`'s (or `b` can only be reset: [`BackendExt::needs_reset`]).
    fn features_reset<B: Backend>(&self, b: &mut B) -> Option<AllocReset> {
        let now = (
            cdp_of(b, CatResource::L3),
            cdp_of(b, CatResource::L2),
            ctrl_of(b),
        );
        let iordt = b.capabilities().l3_iordt;
        // a journal written before I/O RDT was planned recorded `None`: leave it as it is
        let iordt_differs = self.l3_iordt.is_some() && iordt != self.l3_iordt;
        let differs = now != (self.l3_cdp, self.l2_cdp, self.mba_ctrl) || iordt_differs;
        (differs || b.needs_reset().is_some()).then_some(AllocReset {
            l3_cdp: setting(self.l3_cdp),
            l2_cdp: setting(self.l2_cdp),
            mba_ctrl: setting(self.mba_ctrl),
            mba40: FeatureSetting::Any,
            l3_iordt: setting(self.l3_iordt),
        })
    }

    /// Writes back what differs between this state and `b`'s: first a reset when CDP or
    /// MBA CTRL differ, then per domain one `set_cat_classes`/`set_mba_classes` call with
    /// the classes that differ, then the CPUs and tasks whose class differs. Tasks that
    /// have exited since are skipped. Restoring twice writes nothing the second time.
    ///
    /// # Errors
    /// The first failed read or write (what was restored before it stays restored).
    pub fn restore<B: Backend>(&self, b: &mut B) -> Result<Restored, B::Error> {
        let mut done = Restored::default();
        if let Some(cfg) = self.features_reset(b) {
            b.reset_allocation(&cfg)?;
            done.reset = true;
        }
        for (resource, domain, want) in &self.cat {
            let have = b.cat_classes(*resource, *domain)?;
            let differ: Vec<CatClass> =
                want.iter().filter(|w| !have.contains(w)).copied().collect();
            if !differ.is_empty() {
                b.set_cat_classes(*resource, *domain, &differ)?;
                done.classes += differ.len();
            }
        }
        for (resource, tables) in [
            (MbaResource::Mba, &self.mba),
            (MbaResource::Smba, &self.smba),
        ] {
            for (domain, want) in tables {
                let have = b.bandwidth_classes(resource, *domain)?;
                let differ: Vec<MbaClass> =
                    want.iter().filter(|w| !have.contains(w)).copied().collect();
                if !differ.is_empty() {
                    b.set_bandwidth_classes(resource, *domain, &differ)?;
                    done.classes += differ.len();
                }
            }
        }
        for (domain, class, want) in &self.regions {
            let Some(r) = b.regions() else {
                return Err(RequestError::Unsupported(
                    "the state has region MBA controls; this interface has none".into(),
                )
                .into());
            };
            let have = r.region_bandwidth(*domain, *class)?;
            let differ: Vec<RegionBw> =
                want.iter().filter(|w| !have.contains(w)).copied().collect();
            if !differ.is_empty() {
                r.set_region_bandwidth(*domain, *class, &differ)?;
                done.classes += 1;
            }
        }
        // the CPUs to move, by class: one write per class (resctrl: one `cpus_list`)
        let now = b.cpu_classes()?;
        let mut moves: BTreeMap<ClassId, CpuSet> = BTreeMap::new();
        for &(cpu, class) in &self.cpus {
            if now
                .iter()
                .any(|(c, have)| *c == cpu && *have != Some(class))
            {
                moves.entry(class).or_default().insert(cpu);
            }
        }
        for (class, cpus) in moves {
            b.associate_cpus(&cpus, class)?;
            done.associations += cpus.len();
        }
        for &(channel, class) in &self.channels {
            let Some(io) = b.io_rdt() else {
                return Err(RequestError::Unsupported(
                    "the state has I/O RDT channel classes; this interface reaches none".into(),
                )
                .into());
            };
            if io.channel_class(channel)? != class {
                io.set_channel_class(channel, class)?;
                done.associations += 1;
            }
        }
        for &(task, class) in &self.tasks {
            let gone = |e: &B::Error| matches!(e.request(), Some(RequestError::NoSuchTask(_)));
            match b.class_of_task(task) {
                Ok(c) if c == class => continue,
                Err(e) if gone(&e) => continue,
                Ok(_) => {}
                Err(e) => return Err(e),
            }
            match b.associate_task(task, class) {
                Ok(()) => done.associations += 1,
                Err(e) if gone(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}
