//! An in-memory [`Backend`] for the CLI's tests: hand-built capabilities and topology,
//! register-like tables, a record of every write, and a deterministic monitoring model.

use std::collections::BTreeMap;
use std::fmt;

use rdt::{
    AllocReset, Backend, CacheBitmask, CacheDomain, CacheGeometry, Capabilities, CatCaps, CatClass,
    CatMask, CatResource, ClassId, CpuPlacement, CpuSet, Feature, FeatureSetting, GroupInfo,
    GroupKind, GroupOwner, Interface, LogicalCpu, MbaCaps, MbaClass, MbaKind, MbaLimit,
    MonEventSupport, MonEvents, MonGroupId, MonValues, MonitoringCaps, PmuCaps, Rmid, TaskId,
    Topology, Vendor,
};

/// The fake's error: a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeError(pub String);

impl fmt::Display for FakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FakeError {}

impl From<rdt::Unsupported> for FakeError {
    fn from(e: rdt::Unsupported) -> Self {
        Self(e.to_string())
    }
}

type R<T> = Result<T, FakeError>;

fn fail<T>(msg: impl Into<String>) -> R<T> {
    Err(FakeError(msg.into()))
}

#[derive(Debug, Clone)]
struct Group {
    cpus: CpuSet,
    events: MonEvents,
    polls: u64,
    /// PID groups: the tasks (`cpus` is empty then).
    tasks: Vec<TaskId>,
}

/// The fake platform.
#[derive(Debug, Clone)]
pub struct FakeBackend {
    caps: Capabilities,
    topo: Topology,
    /// Usable classes' masks per (resource, domain).
    cat: BTreeMap<(CatResource, CacheDomain), Vec<CatMask>>,
    mba: BTreeMap<CacheDomain, Vec<MbaLimit>>,
    cos: BTreeMap<LogicalCpu, ClassId>,
    rmid: BTreeMap<LogicalCpu, Rmid>,
    groups: BTreeMap<MonGroupId, Group>,
    values: BTreeMap<MonGroupId, MonValues>,
    next_group: u32,
    /// Every state change, in order (`"L3 0 COS1 = ..."`, `"assoc 2 COS1"`, ...).
    pub writes: Vec<String>,
    /// Make every write fail.
    pub fail_writes: bool,
    /// Report the OS interface (no RMIDs in `rmid_of`; task association works).
    pub os_interface: bool,
    /// Processes: process id (its main thread) -> every thread id, main thread included.
    processes: BTreeMap<TaskId, Vec<TaskId>>,
    /// The class of every known thread (resctrl: which group's `tasks` lists it).
    task_class: BTreeMap<TaskId, ClassId>,
    /// resctrl groups present besides the root (ours and other tools').
    groups_present: Vec<GroupInfo>,
}

fn cpus(topo_spec: &[(u32, u32, u32, u32)]) -> Topology {
    Topology::from_placements(
        topo_spec
            .iter()
            .map(|&(cpu, package, l2, l3)| CpuPlacement {
                cpu: LogicalCpu::new(cpu),
                package,
                core: cpu,
                l2: CacheDomain::new(l2),
                l3: Some(CacheDomain::new(l3)),
                node: package,
            })
            .collect(),
    )
}

fn monitoring(num_rmids: u32, upscaling_factor: u32) -> Feature<MonitoringCaps> {
    Feature::Supported(MonitoringCaps {
        max_rmid: num_rmids - 1,
        num_rmids,
        upscaling_factor,
        counter_width: 24,
        overflow_bit: false,
        io_rdt: false,
        events: MonEventSupport {
            llc_occupancy: true,
            mbm_total: true,
            mbm_local: true,
        },
    })
}

fn cat(
    cbm_len: u32,
    shareable_bits: u64,
    num_classes: u32,
    cdp: bool,
    sparse: bool,
) -> Feature<CatCaps> {
    Feature::Supported(CatCaps {
        cbm_len,
        shareable_bits,
        num_classes,
        cdp_supported: cdp,
        cdp_enabled: false,
        non_contiguous_cbm: sparse,
        io_rdt: false,
        min_cbm_bits: 1,
    })
}

impl FakeBackend {
    fn new(caps: Capabilities, topo: Topology) -> Self {
        let mut b = Self {
            caps,
            topo,
            cat: BTreeMap::new(),
            mba: BTreeMap::new(),
            cos: BTreeMap::new(),
            rmid: BTreeMap::new(),
            groups: BTreeMap::new(),
            values: BTreeMap::new(),
            next_group: 1,
            writes: Vec::new(),
            fail_writes: false,
            os_interface: false,
            processes: BTreeMap::new(),
            task_class: BTreeMap::new(),
            groups_present: Vec::new(),
        };
        b.reset_tables();
        for c in b.topo.cpus() {
            b.cos.insert(c.cpu, ClassId::new(0));
            b.rmid.insert(c.cpu, Rmid::new(0));
        }
        b
    }

    fn reset_tables(&mut self) {
        self.cat.clear();
        self.mba.clear();
        for res in [CatResource::L3, CatResource::L2] {
            let Some(c) = self.caps.cat(res) else {
                continue;
            };
            let full = c.full_mask();
            let mask = if c.cdp_enabled {
                CatMask::Cdp {
                    data: full,
                    code: full,
                }
            } else {
                CatMask::Unified(full)
            };
            let domains = match res {
                CatResource::L3 => self.topo.l3_domains(),
                CatResource::L2 => self.topo.l2_domains(),
            };
            for d in domains {
                self.cat
                    .insert((res, d), vec![mask; c.usable_classes() as usize]);
            }
        }
        if let Some(m) = self.caps.mba.get() {
            for d in self.topo.l3_domains() {
                self.mba
                    .insert(d, vec![m.unlimited(); m.num_classes as usize]);
            }
        }
    }

    /// Two-socket Xeon E5 v4 (Broadwell-EP) like the seed paper's: 12 CPUs per socket, one
    /// L3 per socket with a 20-bit CBM and 16 classes, CDP supported, CMT/MBM, no MBA.
    pub fn broadwell_2s() -> Self {
        let spec: Vec<_> = (0..24).map(|c| (c, c / 12, c, c / 12)).collect();
        let caps = Capabilities {
            vendor: Vendor::Intel,
            brand: Some("Intel(R) Xeon(R) CPU E5-2650L v4 @ 1.70GHz".into()),
            signature: Some(0x406f1),
            monitoring: monitoring(176, 65536),
            l3_cat: cat(20, 0, 16, true, false),
            l2_cat: Feature::Unsupported,
            mba: Feature::Unsupported,
            smba: Feature::Unsupported,
            l3_cache: Some(CacheGeometry {
                level: 3,
                ways: 20,
                partitions: 1,
                line_size: 64,
                sets: 28672,
                max_sharing_ids: 32,
            }),
            l2_cache: Some(CacheGeometry {
                level: 2,
                ways: 8,
                partitions: 1,
                line_size: 64,
                sets: 512,
                max_sharing_ids: 2,
            }),
            pmu: PmuCaps {
                ipc: true,
                llc_misses: true,
            },
        };
        Self::new(caps, cpus(&spec))
    }

    /// One-socket Intel part with 8 CPUs: L3 CAT (11-bit CBM, shareable 0x600, 16 classes),
    /// L2 CAT (one L2 per pair of CPUs, 8-bit CBM, 8 classes), MBA (8 classes, 10% steps).
    pub fn intel_1s() -> Self {
        let spec: Vec<_> = (0..8).map(|c| (c, 0, c / 2, 0)).collect();
        let caps = Capabilities {
            vendor: Vendor::Intel,
            brand: None,
            signature: None,
            monitoring: monitoring(192, 49152),
            l3_cat: cat(11, 0x600, 16, true, false),
            l2_cat: cat(8, 0, 8, false, false),
            mba: Feature::Supported(MbaCaps {
                num_classes: 8,
                kind: MbaKind::IntelDelay {
                    max_delay: 90,
                    linear: true,
                    per_thread: false,
                },
                ctrl_enabled: false,
            }),
            smba: Feature::Unsupported,
            l3_cache: None,
            l2_cache: None,
            pmu: PmuCaps {
                ipc: true,
                llc_misses: true,
            },
        };
        Self::new(caps, cpus(&spec))
    }

    /// One-socket AMD part with two CCX of 4 CPUs: L3 CAT per CCX (16-bit CBM, any non-zero
    /// mask), MBA in raw units (11-bit field: 2048 = unlimited).
    pub fn amd_2ccx() -> Self {
        let spec: Vec<_> = (0..8).map(|c| (c, 0, c, c / 4)).collect();
        let caps = Capabilities {
            vendor: Vendor::Amd,
            brand: None,
            signature: None,
            monitoring: monitoring(256, 64),
            l3_cat: cat(16, 0, 16, true, true),
            l2_cat: Feature::Unsupported,
            mba: Feature::Supported(MbaCaps {
                num_classes: 16,
                kind: MbaKind::AmdBandwidth { width: 11 },
                ctrl_enabled: false,
            }),
            smba: Feature::Unsupported,
            l3_cache: None,
            l2_cache: None,
            pmu: PmuCaps::default(),
        };
        Self::new(caps, cpus(&spec))
    }

    /// Changes the capabilities and rebuilds the class tables.
    pub fn reconfigure(&mut self, f: impl FnOnce(&mut Capabilities)) {
        f(&mut self.caps);
        self.reset_tables();
    }

    /// Turns L3 CDP on (as `-R l3cdp-on` would), without recording a write.
    pub fn enable_l3_cdp(&mut self) {
        if let Some(c) = self.caps.l3_cat.get_mut() {
            c.cdp_enabled = true;
        }
        self.reset_tables();
    }

    /// The L3 masks of `class` in L3 domain `domain`.
    pub fn l3_mask(&self, domain: u32, class: u32) -> CatMask {
        self.cat[&(CatResource::L3, CacheDomain::new(domain))][class as usize]
    }

    /// The class of `cpu`.
    pub fn class_of_cpu(&self, cpu: u32) -> u32 {
        self.cos[&LogicalCpu::new(cpu)].get()
    }

    /// The RMID of `cpu`.
    pub fn rmid_of_cpu(&self, cpu: u32) -> u32 {
        self.rmid[&LogicalCpu::new(cpu)].get()
    }

    /// Adds a process with its threads (the process id is its main thread), all in COS0.
    pub fn add_process(&mut self, pid: u32, threads: &[u32]) {
        let mut all = vec![TaskId::new(pid)];
        all.extend(threads.iter().map(|&t| TaskId::new(t)));
        all.sort_unstable();
        all.dedup();
        for t in &all {
            self.task_class.insert(*t, ClassId::new(0));
        }
        self.processes.insert(TaskId::new(pid), all);
    }

    /// The class of thread `tid`.
    pub fn class_of_thread(&self, tid: u32) -> u32 {
        self.task_class[&TaskId::new(tid)].get()
    }

    /// Adds a resctrl group as `ls /sys/fs/resctrl` would show it.
    pub fn add_group(&mut self, path: &str, kind: GroupKind, owner: GroupOwner) {
        let class = path
            .split('/')
            .next()
            .and_then(|top| top.strip_prefix("COS"))
            .and_then(|n| n.parse().ok())
            .map(ClassId::new);
        self.groups_present.push(GroupInfo {
            path: path.to_owned(),
            kind,
            owner,
            class,
        });
    }

    /// Whether a monitoring group is still running.
    pub fn running_groups(&self) -> usize {
        self.groups.len()
    }

    fn write(&mut self, what: String) -> R<()> {
        if self.fail_writes {
            return fail(format!("injected failure writing {what}"));
        }
        self.writes.push(what);
        Ok(())
    }

    fn cpu(&self, cpu: LogicalCpu) -> R<()> {
        if self.topo.get(cpu).is_none() {
            return fail(format!("CPU {cpu} is not present"));
        }
        Ok(())
    }
}

fn mib(n: u64) -> u64 {
    n * 1024 * 1024
}

impl Backend for FakeBackend {
    type Error = FakeError;

    fn interface(&self) -> Interface {
        if self.os_interface {
            Interface::Os
        } else {
            Interface::Msr
        }
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn topology(&self) -> &Topology {
        &self.topo
    }

    fn cat_classes(&mut self, resource: CatResource, domain: CacheDomain) -> R<Vec<CatClass>> {
        let Some(t) = self.cat.get(&(resource, domain)) else {
            return fail(format!("no {resource} domain {domain}"));
        };
        Ok(t.iter()
            .enumerate()
            .map(|(i, m)| CatClass {
                class: ClassId::new(u32::try_from(i).unwrap()),
                mask: *m,
            })
            .collect())
    }

    fn set_cat_classes(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
        classes: &[CatClass],
    ) -> R<()> {
        let caps = self.caps.clone();
        let Some(c) = caps.cat(resource) else {
            return fail("unsupported");
        };
        if !self.cat.contains_key(&(resource, domain)) {
            return fail(format!("no {resource} domain {domain}"));
        }
        for cl in classes {
            caps.check_cat_class(resource, cl.class)
                .map_err(|e| FakeError(e.to_string()))?;
            let masks = match cl.mask {
                CatMask::Unified(m) if !c.cdp_enabled => vec![m],
                CatMask::Cdp { data, code } if c.cdp_enabled => vec![data, code],
                _ => return fail("mask kind does not match the CDP state"),
            };
            for m in masks {
                caps.check_mask(resource, m)
                    .map_err(|e| FakeError(e.to_string()))?;
            }
        }
        for cl in classes {
            self.write(format!(
                "{resource} {domain} COS{} = {:?}",
                cl.class, cl.mask
            ))?;
            self.cat.get_mut(&(resource, domain)).expect("checked")[cl.class.get() as usize] =
                cl.mask;
        }
        Ok(())
    }

    fn mba_classes(&mut self, domain: CacheDomain) -> R<Vec<MbaClass>> {
        let Some(t) = self.mba.get(&domain) else {
            return fail(format!("no MBA domain {domain}"));
        };
        Ok(t.iter()
            .enumerate()
            .map(|(i, l)| MbaClass {
                class: ClassId::new(u32::try_from(i).unwrap()),
                limit: *l,
            })
            .collect())
    }

    fn set_mba_classes(&mut self, domain: CacheDomain, classes: &[MbaClass]) -> R<Vec<MbaClass>> {
        let Some(m) = self.caps.mba.get().cloned() else {
            return fail("unsupported");
        };
        if !self.mba.contains_key(&domain) {
            return fail(format!("no MBA domain {domain}"));
        }
        let mut applied = Vec::new();
        for cl in classes {
            self.caps
                .check_mba_class(cl.class)
                .map_err(|e| FakeError(e.to_string()))?;
            let limit = match (m.kind, cl.limit) {
                (MbaKind::IntelDelay { max_delay, .. }, MbaLimit::Percent(p))
                    if !m.ctrl_enabled =>
                {
                    let step = 100 - max_delay;
                    let rounded = (u32::from(p) + step / 2) / step * step;
                    MbaLimit::Percent(u8::try_from(rounded.clamp(100 - max_delay, 100)).unwrap())
                }
                (MbaKind::AmdBandwidth { .. }, MbaLimit::AmdUnits(u)) if !m.ctrl_enabled => {
                    MbaLimit::AmdUnits(u)
                }
                (_, MbaLimit::MibPerSec(v)) if m.ctrl_enabled => MbaLimit::MibPerSec(v),
                _ => return fail("wrong MBA limit kind"),
            };
            applied.push(MbaClass {
                class: cl.class,
                limit,
            });
        }
        for cl in &applied {
            self.write(format!("MBA {domain} COS{} = {}", cl.class, cl.limit))?;
            self.mba.get_mut(&domain).expect("checked")[cl.class.get() as usize] = cl.limit;
        }
        Ok(applied)
    }

    fn class_of(&mut self, cpu: LogicalCpu) -> R<ClassId> {
        self.cpu(cpu)?;
        Ok(self.cos[&cpu])
    }

    fn associate(&mut self, cpu: LogicalCpu, class: ClassId) -> R<()> {
        self.cpu(cpu)?;
        if class.get() >= self.caps.max_classes() {
            return fail(format!("COS{class} out of range"));
        }
        self.write(format!("assoc {cpu} COS{class}"))?;
        self.cos.insert(cpu, class);
        Ok(())
    }

    fn rmid_of(&mut self, cpu: LogicalCpu) -> R<Option<Rmid>> {
        self.cpu(cpu)?;
        Ok((!self.os_interface).then(|| self.rmid[&cpu]))
    }

    fn reset_allocation(&mut self, cfg: &AllocReset) -> R<()> {
        self.write(format!("reset allocation {cfg:?}"))?;
        for (feature, setting) in [
            (&mut self.caps.l3_cat, cfg.l3_cdp),
            (&mut self.caps.l2_cat, cfg.l2_cdp),
        ] {
            if let Some(c) = feature.get_mut() {
                match setting {
                    FeatureSetting::On => c.cdp_enabled = true,
                    FeatureSetting::Off => c.cdp_enabled = false,
                    FeatureSetting::Any => {}
                }
            }
        }
        self.reset_tables();
        for c in self.cos.values_mut() {
            *c = ClassId::new(0);
        }
        Ok(())
    }

    fn reset_monitoring(&mut self) -> R<()> {
        self.write("reset monitoring".into())?;
        for r in self.rmid.values_mut() {
            *r = Rmid::new(0);
        }
        Ok(())
    }

    fn start_monitoring(&mut self, cpus: &CpuSet, events: MonEvents) -> R<MonGroupId> {
        for cpu in cpus.iter() {
            self.cpu(cpu)?;
            if self.rmid[&cpu].get() != 0 {
                return fail(format!("monitoring on CPU {cpu} is already started"));
            }
        }
        let id = MonGroupId(self.next_group);
        self.next_group += 1;
        self.write(format!("start {cpus} {events:?}"))?;
        for cpu in cpus.iter() {
            self.rmid.insert(cpu, Rmid::new(id.0));
        }
        self.groups.insert(
            id,
            Group {
                cpus: cpus.clone(),
                events,
                polls: 0,
                tasks: Vec::new(),
            },
        );
        Ok(id)
    }

    /// PID monitoring where [`FakeBackend::os_interface`] is set (else `Unsupported`, as
    /// the MSR backend): a task may be in one group only; values as for one CPU per task.
    fn start_monitoring_tasks(&mut self, tasks: &[TaskId], events: MonEvents) -> R<MonGroupId> {
        if !self.os_interface {
            return Err(self.unsupported("PID monitoring").into());
        }
        if let Some(t) = tasks
            .iter()
            .find(|t| self.groups.values().any(|g| g.tasks.contains(t)))
        {
            return fail(format!("task {t} is already monitored"));
        }
        let id = MonGroupId(self.next_group);
        self.next_group += 1;
        self.write(format!("start tasks {tasks:?} {events:?}"))?;
        self.groups.insert(
            id,
            Group {
                cpus: CpuSet::default(),
                events,
                polls: 0,
                tasks: tasks.to_vec(),
            },
        );
        Ok(id)
    }

    /// Per CPU n: occupancy (n + 1) MiB; from the second poll on, per poll 100 MiB local and
    /// 150 MiB total traffic, 2e9 instructions in 1e9 cycles, 1e6 LLC misses.
    fn poll(&mut self) -> R<()> {
        for (id, g) in &mut self.groups {
            g.polls += 1;
            let n = (g.cpus.len() + g.tasks.len()) as u64;
            let first = g.polls == 1;
            let d = |v: u64| if first { 0 } else { v * n };
            let occ: u64 = g
                .cpus
                .iter()
                .map(|c| mib(u64::from(c.get()) + 1))
                .sum::<u64>()
                + g.tasks.len() as u64 * mib(1);
            let e = g.events;
            let on = |ev: MonEvents, v: u64| e.contains(ev).then_some(v);
            self.values.insert(
                *id,
                MonValues {
                    llc_occupancy_bytes: on(MonEvents::LLC_OCCUPANCY, occ),
                    mbm_local_delta_bytes: on(MonEvents::MBM_LOCAL, d(mib(100))),
                    mbm_total_delta_bytes: on(MonEvents::MBM_TOTAL, d(mib(150))),
                    mbm_remote_delta_bytes: on(MonEvents::MBM_REMOTE, d(mib(50))),
                    instructions_delta: on(MonEvents::IPC, d(2_000_000_000)),
                    cycles_delta: on(MonEvents::IPC, d(1_000_000_000)),
                    llc_misses_delta: on(MonEvents::LLC_MISSES, d(1_000_000)),
                },
            );
        }
        Ok(())
    }

    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        self.values.get(&group)
    }

    fn class_of_task(&mut self, task: TaskId) -> R<ClassId> {
        if !self.os_interface {
            return Err(self.unsupported("task association").into());
        }
        self.task_class
            .get(&task)
            .copied()
            .ok_or_else(|| FakeError(format!("no task {task}")))
    }

    fn associate_task(&mut self, task: TaskId, class: ClassId) -> R<()> {
        if !self.os_interface {
            return Err(self.unsupported("task association").into());
        }
        if class.get() >= crate::commands::alloc::os_classes(&self.caps) {
            return fail(format!("COS{class} out of range"));
        }
        let threads = match self.processes.get(&task) {
            Some(all) => all.clone(),
            None if self.task_class.contains_key(&task) => vec![task],
            None => return fail(format!("no task {task}")),
        };
        for t in threads {
            self.write(format!("task {t} COS{class}"))?;
            self.task_class.insert(t, class);
        }
        Ok(())
    }

    fn tasks_of_class(&mut self, class: ClassId) -> R<Vec<TaskId>> {
        if !self.os_interface {
            return Err(self.unsupported("task association").into());
        }
        if self.fail_writes {
            return fail("injected failure reading tasks");
        }
        Ok(self
            .task_class
            .iter()
            .filter(|(_, c)| **c == class)
            .map(|(t, _)| *t)
            .collect())
    }

    fn groups(&mut self) -> R<Vec<GroupInfo>> {
        Ok(if self.os_interface {
            self.groups_present.clone()
        } else {
            Vec::new()
        })
    }

    fn stop_monitoring(&mut self, group: MonGroupId) -> R<()> {
        let Some(g) = self.groups.remove(&group) else {
            return fail("unknown group");
        };
        self.values.remove(&group);
        for cpu in g.cpus.iter() {
            self.rmid.insert(cpu, Rmid::new(0));
        }
        if g.tasks.is_empty() {
            self.writes.push(format!("stop {}", g.cpus));
        } else {
            self.writes.push(format!("stop tasks {:?}", g.tasks));
        }
        Ok(())
    }
}

#[test]
fn fake_masks_are_full_after_creation() {
    let b = FakeBackend::broadwell_2s();
    assert_eq!(
        b.l3_mask(1, 15),
        CatMask::Unified(CacheBitmask::new(0xfffff).unwrap())
    );
}
