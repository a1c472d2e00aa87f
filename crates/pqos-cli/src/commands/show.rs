//! `-s`: allocation classes per domain and the core-to-class association (pqos/alloc.c
//! `alloc_print_config`, v25.04 layout); on the OS interface also the task association
//! (`PID association information:`) and, as this tool's own additions, the resctrl groups
//! other tools made (`Other resctrl groups (not managed by pqos):`, after pqos's sections),
//! which pqos and this tool leave alone, and for a CPU in such a group a core line naming
//! the group instead of a class (`    Core 3, L2ID 3, L3ID 0 => kubepods (not managed by
//! pqos)`), where pqos has no class to print. The named classes `--apply` made are this
//! tool's classes like any other (on the OS interface their resctrl groups are listed as
//! COS numbers in pqos's sections); a section of ours after pqos's says which name each
//! stands for (`Named classes (pqos --apply):` then `    COS1 => pipeline`).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{Result, anyhow};
use rdt_pqos::{
    Backend, BackendError, BackendExt, BwControl, CacheDomain, CatClass, CatMask, CatResource,
    ClassId, CpuPlacement, GroupInfo, GroupKind, GroupOwner, Interface, IoAlloc, LogicalCpu,
    MbaClass, MbaLimit, MbaResource, RegionBw, RequestError, Rmid, Shown, TaskId,
};

use super::L3Domains;

fn cat_line(name: &str, c: &CatClass) -> String {
    match c.mask {
        CatMask::Unified(m) => format!("    {name} COS{} => MASK {m:#x}", c.class),
        CatMask::Cdp { data, code } => {
            format!(
                "    {name} COS{} => DATA {data:#x}, CODE {code:#x}",
                c.class
            )
        }
    }
}

fn mba_value(limit: MbaLimit) -> String {
    match limit {
        MbaLimit::Percent(p) => format!("{p}% available"),
        MbaLimit::AmdUnits(u) => format!("{u} available"),
        MbaLimit::MibPerSec(v) => format!("{v} MBps"),
    }
}

/// What `-s` found for one core.
#[derive(Debug)]
enum CoreAssoc {
    /// Its class (when allocation is present) and RMID (MSR interface, when monitoring is).
    Assoc {
        class: Option<ClassId>,
        rmid: Option<Rmid>,
    },
    /// It sits in another tool's resctrl group, which has no pqos class.
    Foreign(String),
    /// Its association could not be read.
    Error,
}

/// One core of `Core information for socket N:`.
#[derive(Debug)]
struct Core {
    place: CpuPlacement,
    assoc: CoreAssoc,
}

/// One part of `-s`: not shown here (the platform lacks the resource, or the interface has
/// no such thing), shown but unreadable, or read.
#[derive(Debug)]
enum Part<T> {
    Absent,
    Failed,
    Read(T),
}

impl<T> Part<T> {
    /// `Absent` unless `shown`; else the read's value, or `Failed` after noting its error.
    fn read<E: Into<anyhow::Error>>(
        shown: bool,
        read: impl FnOnce() -> Result<T, E>,
        context: impl FnOnce() -> String,
        note: &mut dyn FnMut(anyhow::Error),
    ) -> Self {
        if !shown {
            return Self::Absent;
        }
        match read() {
            Ok(v) => Self::Read(v),
            Err(e) => {
                note(e.into().context(context()));
                Self::Failed
            }
        }
    }

    const fn value(&self) -> Option<&T> {
        match self {
            Self::Read(v) => Some(v),
            _ => None,
        }
    }
}

/// One L3 domain's `L3CA/MBA COS definitions for ...:` section.
#[derive(Debug)]
struct L3Section {
    label: String,
    domain: CacheDomain,
    l3: Part<Vec<CatClass>>,
    mba: Part<Vec<MbaClass>>,
    /// AMD SMBA, printed after MBA (pqos/alloc.c `print_per_l3_cluster_config`).
    smba: Part<Vec<MbaClass>>,
}

/// The MMIO interface's region MBA (pqos v26.03 `print_domain_alloc_config`): per CPU
/// domain, every class's three controls of every memory region.
#[derive(Debug)]
struct RegionMbaConfig {
    /// Per L3 domain, ascending: its ERDT domain id and, per class from COS0, the controls
    /// by region then control ([`rdt_pqos::RegionOps::region_bandwidth`]); `Failed` from
    /// the first class that could not be read.
    domains: Vec<(CacheDomain, u16, Part<Vec<ClassRegions>>)>,
}

/// One class's region controls, by region then control.
type ClassRegions = (ClassId, Vec<RegionBw>);

impl RegionMbaConfig {
    /// The region MBA of every class in every domain; `None` on a backend without regions.
    fn read<B: Backend>(backend: &mut B, note: &mut dyn FnMut(anyhow::Error)) -> Option<Self> {
        let r = backend.regions()?;
        let classes = r.region_classes();
        let mut domains = Vec::new();
        for (domain, id) in r.domain_ids() {
            let part = Part::read(
                true,
                || {
                    r.region_bandwidth_all(domain)
                        .map(|all| (0..classes).map(ClassId::new).zip(all).collect::<Vec<_>>())
                },
                || format!("reading the region MBA of domain ID {id} (L3 id {domain})"),
                note,
            );
            domains.push((domain, id, part));
        }
        Some(Self { domains })
    }

    /// The ERDT domain id of L3 `domain`.
    fn domain_id(&self, domain: CacheDomain) -> Option<u16> {
        self.domains
            .iter()
            .find(|(d, _, _)| *d == domain)
            .map(|(_, id, _)| *id)
    }

    /// pqos v26.03's lines (pqos/alloc.c `print_mba`, `print_domain_alloc_config`): per
    /// domain, per class `Domain ID %u MBA COS%u Memory Region %d <control> Bandwidth=>
    /// 0x%x` for each region and control then a blank line, and a blank line after each
    /// domain.
    fn print(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for (_, id, part) in &self.domains {
            match part {
                Part::Read(classes) => {
                    for (class, controls) in classes {
                        for c in controls {
                            writeln!(
                                out,
                                "Domain ID {id} MBA COS{class} Memory Region {} {} Bandwidth=> \
                                 {:#x}",
                                c.region,
                                control_name(c.control),
                                c.value
                            )?;
                        }
                        writeln!(out)?;
                    }
                }
                // pqos stops the report there; ours says so and goes on
                Part::Failed | Part::Absent => {
                    writeln!(out, "Error retrieving MMIO registers for Domain ID {id:x}")?;
                }
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

/// pqos's name of a region control (pqos/alloc.c `print_mba`).
const fn control_name(c: BwControl) -> &'static str {
    match c {
        BwControl::Optimal => "Optimal",
        BwControl::Min => "Minimum",
        BwControl::Max => "Maximum",
    }
}

/// `PID association information:`: the tasks of each class in order, and whether reading
/// stopped at a class that failed.
#[derive(Debug)]
struct ClassTasks {
    list: Vec<(ClassId, Vec<TaskId>)>,
    failed: bool,
}

/// One line of pqos's I/O RDT association section (`print_dev_assoc`,
/// `print_channel_assoc`): a device's channel or a channel, its class and RMID where shown.
#[derive(Debug)]
struct IoAssoc {
    /// `Device 0000:16:00.0@0, Channel 0x10100` or `Channel 0x10100`.
    label: String,
    /// The class (`Ok(None)`: no class, `NOCOS`), where allocation is on and the link tags
    /// CLOS.
    clos: Option<Result<Option<ClassId>, ()>>,
    /// The RMID, where I/O monitoring is on and the link tags RMIDs.
    rmid: Option<Result<Option<Rmid>, ()>>,
}

impl IoAssoc {
    fn line(&self) -> String {
        let mut line = format!("    {} => ", self.label);
        match self.clos {
            Some(Ok(Some(c))) => line.push_str(&format!("COS{c}")),
            Some(Ok(None)) => line.push_str("NOCOS"),
            Some(Err(())) => line.push_str("ERROR"),
            None => {}
        }
        if let Some(r) = self.rmid {
            if self.clos.is_some() {
                line.push_str(", ");
            }
            match r {
                Ok(Some(r)) => line.push_str(&format!("RMID{r}")),
                Ok(None) => line.push_str("NORMID"),
                Err(()) => line.push_str("ERROR"),
            }
        }
        line
    }
}

/// pqos's `Device information:` and `Control channel information:` of `-s`, where I/O RDT
/// allocation or monitoring is on (pqos/alloc.c `print_iordt_alloc`).
#[derive(Debug)]
struct IoRdtShown {
    devices: Vec<IoAssoc>,
    channels: Vec<IoAssoc>,
}

impl IoRdtShown {
    fn read<B: Backend>(backend: &mut B, note: &mut dyn FnMut(anyhow::Error)) -> Option<Self> {
        let caps = backend.capabilities();
        let alloc = caps.l3_iordt == Some(true);
        // pqos/alloc.c `print_iordt_alloc`: `is_iordt_mon` is the monitoring enable bit
        let mon = caps.mon_iordt == Some(true);
        if !(alloc || mon) {
            return None;
        }
        let io = backend.io_rdt()?;
        let channels = io.io_channels();
        let device_list = io.io_devices();
        let mut read = |id: rdt_pqos::ChannelId, label: String| -> Option<IoAssoc> {
            let info = channels.iter().find(|c| c.id == id)?;
            let clos = (alloc && info.clos_tagging).then(|| {
                io.channel_class(id).map_err(|e| {
                    note(anyhow!(e).context(format!("reading the class of channel {id}")));
                })
            });
            let rmid = (mon && info.rmid_tagging).then(|| {
                io.channel_rmid(id).map_err(|e| {
                    note(anyhow!(e).context(format!("reading the RMID of channel {id}")));
                })
            });
            (clos.is_some() || rmid.is_some()).then_some(IoAssoc { label, clos, rmid })
        };
        let mut devices = Vec::new();
        for d in device_list {
            for (vc, (id, _)) in d.channels.iter().enumerate() {
                let label = format!("Device {}@{vc}, Channel {id}", d.address());
                devices.extend(read(*id, label));
            }
        }
        let channels = channels
            .iter()
            .filter_map(|c| read(c.id, format!("Channel {}", c.id)))
            .collect();
        Some(Self { devices, channels })
    }

    fn print(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "Device information:")?;
        for d in &self.devices {
            writeln!(out, "{}", d.line())?;
        }
        writeln!(out, "Control channel information:")?;
        for c in &self.channels {
            writeln!(out, "{}", c.line())?;
        }
        Ok(())
    }
}

/// Everything `-s` shows, read once; the text and JSON forms are printed from it.
#[derive(Debug)]
struct Config {
    interface: Interface,
    l3ca: bool,
    l2ca: bool,
    mba: bool,
    smba: bool,
    l3: Vec<L3Section>,
    /// L3 I/O allocation (resctrl, Linux 6.19+), where the interface shows it.
    io_alloc: Option<IoAlloc>,
    /// Per L2 domain, its classes.
    l2: Vec<(CacheDomain, Part<Vec<CatClass>>)>,
    /// Per package, its cores.
    packages: Vec<(u32, Vec<Core>)>,
    /// OS interface with allocation: the tasks of each class.
    tasks: Option<ClassTasks>,
    /// OS interface: every resctrl group.
    groups: Part<Vec<GroupInfo>>,
    /// The named classes this tool made ([`BackendExt::own_class_names`]), by class.
    named: Vec<(ClassId, String)>,
    /// The MMIO interface's region MBA; `None` elsewhere.
    regions: Option<RegionMbaConfig>,
    /// I/O RDT associations, where I/O RDT is on.
    iordt: Option<IoRdtShown>,
}

/// Reads the classes of several domains at once ([`Backend::cat_classes_in`],
/// [`BackendExt::mba_classes_in`]).
type ReadDomains<B, T> = fn(&mut B, &[CacheDomain]) -> Result<Vec<Vec<T>>, <B as Backend>::Error>;

/// One core's class (with allocation) and RMID (MSR interface), or why not.
type AssocResult<E> = Result<(Option<ClassId>, Option<Rmid>), E>;

/// The classes of every domain of `domains` (`Ok(vec![])` each when not `shown`), read at
/// once through `all`; when that fails, domain by domain, so that each error names its own
/// domain.
fn read_domains<B: Backend, T>(
    backend: &mut B,
    shown: bool,
    domains: &[CacheDomain],
    all: ReadDomains<B, T>,
) -> Vec<Result<Vec<T>, B::Error>> {
    if !shown {
        return domains.iter().map(|_| Ok(Vec::new())).collect();
    }
    match all(backend, domains) {
        Ok(v) if v.len() == domains.len() => v.into_iter().map(Ok).collect(),
        _ => domains
            .iter()
            .map(|d| {
                all(backend, std::slice::from_ref(d)).map(|v| v.into_iter().flatten().collect())
            })
            .collect(),
    }
}

/// Every core's class and RMID: with allocation one [`BackendExt::associations`] (resctrl
/// lists its groups once, the MSR interface reads IA32_PQR_ASSOC once per core), RMIDs alone
/// core by core. Cores missing from the map could not be read (the error is noted).
fn core_assocs<B: Backend>(
    backend: &mut B,
    is_alloc: bool,
    is_mon: bool,
    note: &mut dyn FnMut(anyhow::Error),
) -> BTreeMap<LogicalCpu, CoreAssoc> {
    let cpus: Vec<LogicalCpu> = backend.topology().cpus().iter().map(|c| c.cpu).collect();
    let read: Vec<(LogicalCpu, AssocResult<B::Error>)> = if is_alloc {
        match backend.associations() {
            Ok(list) => list
                .into_iter()
                .map(|(cpu, r)| (cpu, r.map(|(c, rmid)| (Some(c), rmid.filter(|_| is_mon)))))
                .collect(),
            Err(e) => {
                note(anyhow!(e).context("reading the association of the cores"));
                return BTreeMap::new();
            }
        }
    } else {
        cpus.iter()
            .map(|&cpu| {
                let rmid = if is_mon {
                    backend.rmid_of(cpu)
                } else {
                    Ok(None)
                };
                (cpu, rmid.map(|r| (None, r)))
            })
            .collect()
    };
    read.into_iter()
        .map(|(cpu, r)| {
            let assoc = match r {
                Ok((class, rmid)) => CoreAssoc::Assoc { class, rmid },
                Err(e) => {
                    if let Some(RequestError::ForeignGroup { group, .. }) = e.request() {
                        CoreAssoc::Foreign(group.clone())
                    } else {
                        note(anyhow!(e).context(format!("reading the association of core {cpu}")));
                        CoreAssoc::Error
                    }
                }
            };
            (cpu, assoc)
        })
        .collect()
}

/// The tasks of each class from COS1, or from COS0 with `-v` (pqos/alloc.c; classes up to
/// resctrl's CLOSID count), up to the first class whose tasks cannot be read.
fn read_tasks<B: Backend>(
    backend: &mut B,
    verbose: bool,
    note: &mut dyn FnMut(anyhow::Error),
) -> ClassTasks {
    let classes = backend.capabilities().os_classes();
    let mut list = Vec::new();
    for class in u32::from(!verbose)..classes {
        let class = ClassId::new(class);
        match backend.tasks_of_class(class) {
            Ok(tasks) => list.push((class, tasks)),
            Err(e) => {
                note(anyhow!(e).context(format!("reading the tasks of COS{class}")));
                return ClassTasks { list, failed: true };
            }
        }
    }
    ClassTasks {
        list,
        failed: false,
    }
}

/// The first `limit` classes of `v` (all of them without a limit).
fn first_classes<T>(mut v: Vec<T>, limit: Option<u32>) -> Vec<T> {
    if let Some(n) = limit {
        v.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    v
}

/// The `L3CA/MBA COS definitions` sections: every L3 domain's L3 masks, MBA and SMBA
/// limits (those the platform has), each read for every domain at once.
fn read_l3<B: Backend>(
    backend: &mut B,
    caps: &rdt_pqos::Capabilities,
    topo: &rdt_pqos::Topology,
    limit: Option<u32>,
    note: &mut dyn FnMut(anyhow::Error),
) -> Vec<L3Section> {
    let l3ca = caps.l3_cat.get().is_some();
    let mba = caps.mba.get().is_some();
    let smba = caps.smba.get().is_some();
    let mut l3 = Vec::new();
    let domains = L3Domains::new(caps, topo);
    let ids: Vec<CacheDomain> = domains.list.iter().map(|(_, d)| *d).collect();
    let cat = read_domains(backend, l3ca, &ids, |b, d| {
        b.cat_classes_in(CatResource::L3, d)
    });
    let limits = read_domains(backend, mba, &ids, B::mba_classes_in);
    let slow = read_domains(backend, smba, &ids, |b, d| {
        b.bandwidth_classes_in(MbaResource::Smba, d)
    });
    for ((((id, domain), cat), limits), slow) in domains.list.iter().zip(cat).zip(limits).zip(slow)
    {
        let cat = Part::read(
            l3ca,
            || cat.map(|v| first_classes(v, limit)),
            || format!("reading the L3 classes of domain {domain}"),
            note,
        );
        let limits = Part::read(
            mba,
            || limits.map(|v| first_classes(v, limit)),
            || format!("reading the MBA classes of domain {domain}"),
            note,
        );
        let slow = Part::read(
            smba,
            || slow.map(|v| first_classes(v, limit)),
            || format!("reading the SMBA classes of domain {domain}"),
            note,
        );
        l3.push(L3Section {
            label: domains.show_label(*id),
            domain: *domain,
            l3: cat,
            mba: limits,
            smba: slow,
        });
    }
    l3
}

impl Config {
    /// Reads what `-s` shows; each failed read goes to `note` and leaves its part empty.
    fn read<B: Backend>(
        backend: &mut B,
        verbose: bool,
        note: &mut dyn FnMut(anyhow::Error),
    ) -> Self {
        let caps = backend.capabilities().clone();
        let topo = backend.topology().clone();
        // resctrl gives a group one CLOSID valid for every resource: pqos lists as many
        // classes as the resource with the fewest has (lib/resctrl_alloc.c
        // `resctrl_alloc_get_grps_num`), on the MSR interface each resource's own count.
        let limit = (backend.interface() == Interface::Os).then(|| caps.os_classes());
        let l3ca = caps.l3_cat.get().is_some();
        let l2ca = caps.l2_cat.get().is_some();
        let mba = caps.mba.get().is_some();
        let smba = caps.smba.get().is_some();
        let l3 = if l3ca || mba || smba {
            read_l3(backend, &caps, &topo, limit, note)
        } else {
            Vec::new()
        };
        let io = backend.io_alloc().unwrap_or_else(|e| {
            note(anyhow!(e).context("reading resctrl's info/L3/io_alloc"));
            None
        });
        let l2_domains = if l2ca { topo.l2_domains() } else { Vec::new() };
        let l2_classes = read_domains(backend, l2ca, &l2_domains, |b, d| {
            b.cat_classes_in(CatResource::L2, d)
        });
        let l2 = l2_domains
            .into_iter()
            .zip(l2_classes)
            .map(|(domain, classes)| {
                let classes = Part::read(
                    true,
                    || classes.map(|v| first_classes(v, limit)),
                    || format!("reading the L2 classes of L2 id {domain}"),
                    note,
                );
                (domain, classes)
            })
            .collect();
        let regions = RegionMbaConfig::read(backend, note);
        let is_alloc = l3ca || l2ca || mba || smba || regions.is_some();
        // The OS interface has no RMIDs to show (pqos prints `, RMID%u` on MSR/MMIO only).
        let is_mon = caps.monitoring.is_present() && backend.interface() != Interface::Os;
        let mut assocs = core_assocs(backend, is_alloc, is_mon, note);
        let mut packages = Vec::new();
        for package in topo.packages() {
            let mut cores = Vec::new();
            for cpu in topo.cpus_in_package(package).iter() {
                let Some(place) = topo.get(cpu).copied() else {
                    continue;
                };
                let assoc = assocs.remove(&cpu).unwrap_or(CoreAssoc::Error);
                cores.push(Core { place, assoc });
            }
            packages.push((package, cores));
        }
        let iordt = IoRdtShown::read(backend, note);
        let os = backend.interface() == Interface::Os;
        let tasks = (os && is_alloc).then(|| read_tasks(backend, verbose, note));
        let groups = Part::read(
            os,
            || backend.groups(),
            || "listing the resctrl groups".to_owned(),
            note,
        );
        Self {
            interface: backend.interface(),
            l3ca,
            l2ca,
            mba,
            smba,
            l3,
            io_alloc: io,
            l2,
            packages,
            tasks,
            groups,
            named: backend.own_class_names(),
            regions,
            iordt,
        }
    }

    /// pqos's `-s` text (v25.04 layout) and this tool's foreign-group section.
    /// The L3 sections of [`Config::print_text`]: L3CA, MBA and SMBA classes per domain,
    /// then this tool's io_alloc section.
    fn print_l3(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for section in &self.l3 {
            writeln!(
                out,
                "{}{}{} COS definitions for {}:",
                if self.l3ca { "L3CA" } else { "" },
                if self.l3ca && self.mba { "/" } else { "" },
                if self.mba { "MBA" } else { "" },
                section.label
            )?;
            match &section.l3 {
                Part::Read(classes) => {
                    for c in classes {
                        writeln!(out, "{}", cat_line("L3CA", c))?;
                    }
                }
                Part::Failed => writeln!(out, "L3CA: Couldn't obtain info.")?,
                Part::Absent => {}
            }
            for (name, part) in [("MBA", &section.mba), ("SMBA", &section.smba)] {
                match part {
                    Part::Read(classes) => {
                        for c in classes {
                            writeln!(out, "    {name} COS{} => {}", c.class, mba_value(c.limit))?;
                        }
                    }
                    Part::Failed => writeln!(out, "{name}: Couldn't obtain info.")?,
                    Part::Absent => {}
                }
            }
        }
        // Ours (pqos knows no io_alloc): the CLOSID the kernel keeps for I/O and its masks.
        if let Some(io) = &self.io_alloc {
            if io.enabled {
                writeln!(
                    out,
                    "L3 I/O allocation (io_alloc): enabled, COS{} reserved",
                    io.class
                )?;
                for (domain, mask) in &io.masks {
                    writeln!(out, "    L3ID {domain} => MASK {mask:#x}")?;
                }
            } else {
                writeln!(out, "L3 I/O allocation (io_alloc): disabled")?;
            }
        }
        Ok(())
    }

    fn print_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        // The MMIO interface: pqos v26.03 prints region MBA in place of the L3CA/MBA
        // sections (`print_domain_alloc_config`; its I/O L3CA lines are not modelled here).
        match &self.regions {
            Some(regions) => regions.print(out)?,
            None => self.print_l3(out)?,
        }
        for (domain, classes) in &self.l2 {
            if let Part::Read(classes) = classes {
                writeln!(out, "L2CA COS definitions for L2ID {domain}:")?;
                for c in classes {
                    writeln!(out, "{}", cat_line("L2CA", c))?;
                }
            }
        }
        for (package, cores) in &self.packages {
            writeln!(out, "Core information for socket {package}:")?;
            for core in cores {
                let place = &core.place;
                let cpu = place.cpu;
                // MMIO: pqos v26.03 prefixes the core's ERDT domain (`print_core_assoc`)
                let domain = self
                    .regions
                    .as_ref()
                    .zip(place.l3)
                    .and_then(|(r, l3)| r.domain_id(l3));
                let mut line = match domain {
                    Some(id) => format!("    Domain ID  {id:#x} => "),
                    None => String::new(),
                };
                line.push_str(&match place.l3 {
                    Some(l3) => format!("    Core {cpu}, L2ID {}, L3ID {l3} => ", place.l2),
                    None => format!("    Core {cpu}, L2ID {} => ", place.l2),
                });
                match &core.assoc {
                    CoreAssoc::Assoc { class, rmid } => {
                        if let Some(c) = class {
                            line.push_str(&format!("COS{c}"));
                        }
                        if let Some(r) = rmid {
                            let sep = if class.is_some() { ", " } else { "" };
                            line.push_str(&format!("{sep}RMID{r}"));
                        }
                        writeln!(out, "{line}")?;
                    }
                    // This tool's extension: a CPU in another tool's resctrl group has no
                    // pqos class; say whose it is.
                    CoreAssoc::Foreign(group) => {
                        writeln!(out, "{line}{group} (not managed by pqos)")?;
                    }
                    CoreAssoc::Error => writeln!(out, "    Core {cpu} => ERROR")?,
                }
            }
        }
        if let Some(io) = &self.iordt {
            io.print(out)?;
        }
        if let Some(ClassTasks { list, failed }) = &self.tasks {
            writeln!(out, "PID association information:")?;
            for (class, tasks) in list {
                if tasks.is_empty() {
                    writeln!(out, "    COS{class} => (none)")?;
                } else {
                    let list: Vec<String> = tasks.iter().map(ToString::to_string).collect();
                    writeln!(out, "    COS{class} => {}", list.join(", "))?;
                }
            }
            if *failed {
                writeln!(out, "Error retrieving PID information!")?;
            }
        }
        if !self.named.is_empty() {
            writeln!(out, "Named classes (pqos --apply):")?;
            for (class, name) in &self.named {
                writeln!(out, "    COS{class} => {}", Shown(name))?;
            }
        }
        let foreign: Vec<&GroupInfo> = self
            .groups
            .value()
            .into_iter()
            .flatten()
            .filter(|g| g.owner == GroupOwner::Foreign)
            .collect();
        if !foreign.is_empty() {
            writeln!(out, "Other resctrl groups (not managed by pqos):")?;
            for g in foreign {
                let kind = match g.kind {
                    GroupKind::Control => "control group",
                    GroupKind::Monitor => "monitor group",
                };
                writeln!(out, "    {} ({kind})", Shown(&g.path))?;
            }
        }
        Ok(())
    }

    /// The same as one JSON document (`docs/json/configuration.schema.json`).
    fn print_json(&self, errors: Vec<String>, out: &mut dyn Write) -> Result<()> {
        let doc = json::ConfigDoc::new(self, errors);
        serde_json::to_writer(&mut *out, &doc)?;
        writeln!(out)?;
        Ok(())
    }
}

/// The JSON form of `-s` (`-u json`): field names carry units; masks are `0x` hex strings as
/// pqos prints them.
mod json {
    use serde::Serialize;

    use super::{Config, CoreAssoc};
    use rdt_pqos::{
        BwControl, CacheDomain, CatClass, CatMask, ClassId, GroupKind, GroupOwner, MbaClass,
        MbaLimit, RegionBw, Rmid,
    };

    #[derive(Debug, Serialize)]
    pub(super) struct ConfigDoc {
        interface: &'static str,
        l3_cat: Option<Vec<CatDomainDoc>>,
        l2_cat: Option<Vec<CatDomainDoc>>,
        mba: Option<Vec<MbaDomainDoc>>,
        /// AMD SMBA, as `mba`.
        smba: Option<Vec<MbaDomainDoc>>,
        /// L3 I/O allocation (resctrl, Linux 6.19+); `null` where not shown.
        io_alloc: Option<IoAllocDoc>,
        cores: Vec<CoreDoc>,
        tasks: Option<Vec<TasksDoc>>,
        groups: Option<Vec<GroupDoc>>,
        /// The named classes `--apply` made, by class.
        named_classes: Vec<NamedDoc>,
        /// The MMIO interface's region MBA per CPU domain; `null` elsewhere.
        region_mba: Option<Vec<RegionDomainDoc>>,
        errors: Vec<String>,
    }

    /// One CPU domain's region MBA.
    #[derive(Debug, Serialize)]
    struct RegionDomainDoc {
        /// The L3 id.
        domain: u32,
        /// The ERDT domain id (`--alloc-domain-id`).
        domain_id: u16,
        /// `null` where they could not be read.
        classes: Option<Vec<RegionClassDoc>>,
    }

    #[derive(Debug, Serialize)]
    struct RegionClassDoc {
        class: u32,
        regions: Vec<RegionControlsDoc>,
    }

    /// One region's three controls, in control-window units.
    #[derive(Debug, Serialize)]
    struct RegionControlsDoc {
        region: u8,
        opt: Option<u16>,
        min: Option<u16>,
        max: Option<u16>,
    }

    fn region_class(class: ClassId, controls: &[RegionBw]) -> RegionClassDoc {
        let mut regions: Vec<RegionControlsDoc> = Vec::new();
        for c in controls {
            if regions.last().is_none_or(|r| r.region != c.region.0) {
                regions.push(RegionControlsDoc {
                    region: c.region.0,
                    opt: None,
                    min: None,
                    max: None,
                });
            }
            if let Some(r) = regions.last_mut() {
                let slot = match c.control {
                    BwControl::Optimal => &mut r.opt,
                    BwControl::Min => &mut r.min,
                    BwControl::Max => &mut r.max,
                };
                *slot = Some(c.value);
            }
        }
        RegionClassDoc {
            class: class.get(),
            regions,
        }
    }

    #[derive(Debug, Serialize)]
    struct NamedDoc {
        class: u32,
        name: String,
    }

    impl NamedDoc {
        fn list(c: &Config) -> Vec<Self> {
            c.named
                .iter()
                .map(|(class, name)| Self {
                    class: class.get(),
                    name: name.clone(),
                })
                .collect()
        }
    }

    #[derive(Debug, Serialize)]
    struct CatDomainDoc {
        domain: u32,
        label: Option<String>,
        /// `null` when the classes could not be read.
        classes: Option<Vec<CatClassDoc>>,
    }

    #[derive(Debug, Serialize)]
    struct CatClassDoc {
        class: u32,
        mask: Option<String>,
        data_mask: Option<String>,
        code_mask: Option<String>,
        /// Ways the class may fill (data and code together with CDP on).
        ways: u32,
    }

    #[derive(Debug, Serialize)]
    struct MbaDomainDoc {
        domain: u32,
        label: String,
        classes: Option<Vec<MbaClassDoc>>,
    }

    #[derive(Debug, Serialize)]
    struct MbaClassDoc {
        class: u32,
        percent: Option<u8>,
        mib_per_s: Option<u32>,
        amd_units: Option<u32>,
    }

    #[derive(Debug, Serialize)]
    struct IoAllocDoc {
        enabled: bool,
        /// The CLOSID io_alloc keeps while enabled.
        class: u32,
        /// Per L3 domain, the I/O mask (empty while disabled).
        masks: Vec<IoMaskDoc>,
    }

    #[derive(Debug, Serialize)]
    struct IoMaskDoc {
        domain: u32,
        mask: String,
    }

    #[derive(Debug, Serialize)]
    struct CoreDoc {
        cpu: u32,
        socket: u32,
        l2_id: u32,
        l3_id: Option<u32>,
        class: Option<u32>,
        rmid: Option<u32>,
        /// The other tool's resctrl group the core sits in.
        foreign_group: Option<String>,
        /// The association could not be read.
        error: bool,
    }

    #[derive(Debug, Serialize)]
    struct TasksDoc {
        class: u32,
        tasks: Vec<u32>,
    }

    #[derive(Debug, Serialize)]
    struct GroupDoc {
        path: String,
        kind: &'static str,
        owner: &'static str,
        class: Option<u32>,
    }

    fn cat_class(c: &CatClass) -> CatClassDoc {
        let hex = |m: rdt_pqos::CacheBitmask| Some(format!("{m:#x}"));
        let (mask, data_mask, code_mask) = match c.mask {
            CatMask::Unified(m) => (hex(m), None, None),
            CatMask::Cdp { data, code } => (None, hex(data), hex(code)),
        };
        CatClassDoc {
            class: c.class.get(),
            mask,
            data_mask,
            code_mask,
            ways: c.mask.ways().count_ones(),
        }
    }

    fn io_alloc_doc(io: &rdt_pqos::IoAlloc) -> IoAllocDoc {
        IoAllocDoc {
            enabled: io.enabled,
            class: io.class.get(),
            masks: io
                .masks
                .iter()
                .map(|(d, m)| IoMaskDoc {
                    domain: d.get(),
                    mask: format!("{m:#x}"),
                })
                .collect(),
        }
    }

    fn mba_class(c: &MbaClass) -> MbaClassDoc {
        let (mut percent, mut mib_per_s, mut amd_units) = (None, None, None);
        match c.limit {
            MbaLimit::Percent(p) => percent = Some(p),
            MbaLimit::MibPerSec(v) => mib_per_s = Some(v),
            MbaLimit::AmdUnits(u) => amd_units = Some(u),
        }
        MbaClassDoc {
            class: c.class.get(),
            percent,
            mib_per_s,
            amd_units,
        }
    }

    impl ConfigDoc {
        #[allow(clippy::too_many_lines)] // one field after the other, read top to bottom
        pub(super) fn new(c: &Config, errors: Vec<String>) -> Self {
            let l3_cat = c.l3ca.then(|| {
                c.l3.iter()
                    .map(|s| CatDomainDoc {
                        domain: s.domain.get(),
                        label: Some(s.label.clone()),
                        classes: s.l3.value().map(|v| v.iter().map(cat_class).collect()),
                    })
                    .collect()
            });
            let bandwidth =
                |shown: bool, part: fn(&super::L3Section) -> &super::Part<Vec<MbaClass>>| {
                    shown.then(|| {
                        c.l3.iter()
                            .map(|s| MbaDomainDoc {
                                domain: s.domain.get(),
                                label: s.label.clone(),
                                classes: part(s).value().map(|v| v.iter().map(mba_class).collect()),
                            })
                            .collect()
                    })
                };
            let mba = bandwidth(c.mba, |s| &s.mba);
            let smba = bandwidth(c.smba, |s| &s.smba);
            let l2_cat = c.l2ca.then(|| {
                c.l2.iter()
                    .map(|(domain, classes)| CatDomainDoc {
                        domain: domain.get(),
                        label: None,
                        classes: classes.value().map(|v| v.iter().map(cat_class).collect()),
                    })
                    .collect()
            });
            let cores = c
                .packages
                .iter()
                .flat_map(|(_, cores)| cores)
                .map(|core| {
                    let (class, rmid, foreign_group, error) = match &core.assoc {
                        CoreAssoc::Assoc { class, rmid } => {
                            (class.map(ClassId::get), rmid.map(Rmid::get), None, false)
                        }
                        CoreAssoc::Foreign(g) => (None, None, Some(g.clone()), false),
                        CoreAssoc::Error => (None, None, None, true),
                    };
                    CoreDoc {
                        cpu: core.place.cpu.get(),
                        socket: core.place.package,
                        l2_id: core.place.l2.get(),
                        l3_id: core.place.l3.map(CacheDomain::get),
                        class,
                        rmid,
                        foreign_group,
                        error,
                    }
                })
                .collect();
            let tasks = c.tasks.as_ref().map(|t| {
                t.list
                    .iter()
                    .map(|(class, tasks)| TasksDoc {
                        class: class.get(),
                        tasks: tasks.iter().map(|t| t.get()).collect(),
                    })
                    .collect()
            });
            // `null` on the MSR interface and when unreadable (said in `errors`).
            let groups = c.groups.value().map(|g| {
                g.iter()
                    .map(|g| GroupDoc {
                        path: g.path.clone(),
                        kind: match g.kind {
                            GroupKind::Control => "ctrl",
                            GroupKind::Monitor => "mon",
                        },
                        owner: match g.owner {
                            GroupOwner::Pqos => "ours",
                            GroupOwner::Foreign => "foreign",
                        },
                        class: g.class.map(ClassId::get),
                    })
                    .collect()
            });
            Self {
                interface: match c.interface {
                    rdt_pqos::Interface::Msr => "msr",
                    rdt_pqos::Interface::Os => "os",
                    rdt_pqos::Interface::Mmio => "mmio",
                },
                l3_cat,
                l2_cat,
                mba,
                smba,
                io_alloc: c.io_alloc.as_ref().map(io_alloc_doc),
                cores,
                tasks,
                groups,
                named_classes: NamedDoc::list(c),
                region_mba: c.regions.as_ref().map(|r| {
                    r.domains
                        .iter()
                        .map(|(domain, id, part)| RegionDomainDoc {
                            domain: domain.get(),
                            domain_id: *id,
                            classes: part.value().map(|classes| {
                                classes
                                    .iter()
                                    .map(|(class, controls)| region_class(*class, controls))
                                    .collect()
                            }),
                        })
                        .collect()
                }),
                errors,
            }
        }
    }
}

/// Prints pqos's `-s` report (`verbose`: `-v`, which lists COS0's tasks too), or with
/// `json` the same as one JSON document. Like pqos, a domain whose classes cannot be read
/// gets a `Couldn't obtain info.` line and the report goes on; the first such error is
/// returned at the end (JSON: every error is listed in `errors`).
///
/// # Errors
/// The first read that failed, or an output error.
pub fn run_show<B: Backend>(
    backend: &mut B,
    verbose: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut errors: Vec<anyhow::Error> = Vec::new();
    let config = Config::read(backend, verbose, &mut |e| errors.push(e));
    if json {
        let messages = errors.iter().map(|e| format!("{e:#}")).collect();
        config.print_json(messages, out)?;
    } else {
        config.print_text(out)?;
    }
    errors.into_iter().next().map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use rdt_pqos::fake::fixtures;
    use rdt_pqos::{Feature, GroupKind, GroupOwner};

    use super::*;
    use crate::command::AllocRequest;
    use crate::commands::alloc::run_alloc;
    use crate::testdata::{sample, without_note_banner};
    use rdt_pqos::fake::FakeBackend;

    fn show(b: &mut FakeBackend) -> String {
        show_v(b, false)
    }

    fn show_v(b: &mut FakeBackend, verbose: bool) -> String {
        let mut out = Vec::new();
        run_show(b, verbose, false, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn define(b: &mut FakeBackend, classdef: &str) {
        let req = AllocRequest {
            classes: classdef.parse::<crate::grammar::ClassDefs>().unwrap().0,
            ..AllocRequest::default()
        };
        run_alloc(b, &req, &rdt_pqos::proc::ProcFs::host(), &mut Vec::new()).unwrap();
    }

    #[test]
    fn matches_real_pqos_s_on_a_two_socket_20_bit_part() {
        // arrange: the OS interface prints no RMIDs; the sample is cut after core 4
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        let want = without_note_banner(&sample("intel_pqos-os-s_2socket_20bit_issue59.txt"));
        // act
        let got = show(&mut b);
        // assert
        assert!(got.starts_with(&want), "want:\n{want}\ngot:\n{got}");
    }

    #[test]
    fn matches_real_pqos_s_with_l3ca_and_mba() {
        let mut b = FakeBackend::intel_1s();
        define(&mut b, "llc:0=0x600");
        let want = without_note_banner(&sample("intel_pqos-s_l3ca_mba_2socket_issue246.txt"));
        let got = show(&mut b);
        assert!(got.starts_with(&want), "want:\n{want}\ngot:\n{got}");
    }

    #[test]
    fn matches_real_pqos_s_with_mba_only() {
        let mut b = FakeBackend::broadwell_2s();
        b.reconfigure(|c| {
            c.l3_cat = Feature::Unsupported;
            c.mba = Feature::Supported(fixtures::intel_mba(8));
        });
        define(&mut b, "mba:1=50;mba:2=70;mba:5=10");
        let sample = sample("intel_pqos-e_and_-s_mba_only_issue228.txt");
        let want = without_note_banner(sample.split_once("---\n").unwrap().1);
        let got = show(&mut b);
        assert!(got.starts_with(&want), "want:\n{want}\ngot:\n{got}");
    }

    #[test]
    fn msr_core_lines_carry_the_rmid_and_cdp_masks_have_a_space() {
        let mut b = FakeBackend::broadwell_2s();
        b.enable_l3_cdp();
        let got = show(&mut b);
        assert!(got.starts_with(
            "L3CA COS definitions for Socket 0:\n    L3CA COS0 => DATA 0xfffff, CODE 0xfffff\n"
        ));
        assert!(
            got.contains(
                "Core information for socket 1:\n    Core 12, L2ID 12, L3ID 1 => COS0, RMID0\n"
            ),
            "{got}"
        );
    }

    #[test]
    fn amd_labels_l3_clusters_and_prints_raw_units() {
        let mut b = FakeBackend::amd_2ccx();
        let got = show(&mut b);
        assert!(
            got.starts_with("L3CA/MBA COS definitions for L3 Cluster (or Core Complex) 0:\n"),
            "{got}"
        );
        assert!(got.contains("    MBA COS15 => 2048 available\nL3CA/MBA COS definitions for L3 Cluster (or Core Complex) 1:\n"), "{got}");
    }

    #[test]
    fn l2_classes_per_l2_id() {
        let mut b = FakeBackend::intel_1s();
        let got = show(&mut b);
        assert!(
            got.contains("L2CA COS definitions for L2ID 3:\n    L2CA COS0 => MASK 0xff\n"),
            "{got}"
        );
        assert!(
            got.ends_with("    Core 7, L2ID 3, L3ID 0 => COS0, RMID0\n"),
            "{got}"
        );
    }

    #[test]
    fn os_interface_lists_tasks_per_class_from_cos1_and_cos0_with_v() {
        // arrange: intel_1s on resctrl has 8 CLOSIDs (L2 CAT and MBA have 8)
        let mut b = FakeBackend::intel_1s();
        b.os_interface = true;
        b.add_process(123, &[124]);
        b.add_process(456, &[]);
        b.add_process(7, &[]);
        for pid in [123, 456] {
            b.associate_task(rdt_pqos::TaskId::new(pid), rdt_pqos::ClassId::new(1))
                .unwrap();
        }
        // act
        let got = show(&mut b);
        let got_v = show_v(&mut b, true);
        // assert
        let tail = "Core information for socket 0:\n";
        let cores = &got[got.find(tail).unwrap()..];
        assert!(
            cores.starts_with(
                "Core information for socket 0:\n    Core 0, L2ID 0, L3ID 0 => COS0\n"
            ),
            "no RMID on the OS interface: {cores}"
        );
        assert!(
            got.ends_with(
                "    Core 7, L2ID 3, L3ID 0 => COS0\nPID association information:\n    \
                 COS1 => 123, 124, 456\n    COS2 => (none)\n    COS3 => (none)\n    \
                 COS4 => (none)\n    COS5 => (none)\n    COS6 => (none)\n    COS7 => (none)\n"
            ),
            "{got}"
        );
        assert!(
            got_v.contains("PID association information:\n    COS0 => 7\n    COS1 => 123"),
            "{got_v}"
        );
    }

    #[test]
    fn foreign_groups_are_listed_after_pqos_sections() {
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        b.add_group("COS1", GroupKind::Control, GroupOwner::Pqos);
        b.add_group("kubepods", GroupKind::Control, GroupOwner::Foreign);
        b.add_group(
            "COS1/mon_groups/pqos-1-0",
            GroupKind::Monitor,
            GroupOwner::Pqos,
        );
        b.add_group(
            "COS1/mon_groups/mine",
            GroupKind::Monitor,
            GroupOwner::Foreign,
        );
        let got = show(&mut b);
        assert!(
            got.ends_with(
                "    COS15 => (none)\nOther resctrl groups (not managed by pqos):\n    \
                 kubepods (control group)\n    COS1/mon_groups/mine (monitor group)\n"
            ),
            "{got}"
        );
        // MSR: no task section, no groups, RMIDs shown
        b.os_interface = false;
        let got = show(&mut b);
        assert!(
            !got.contains("PID association") && !got.contains("Other resctrl"),
            "{got}"
        );
        assert!(got.ends_with(", RMID0\n"), "{got}");
    }

    #[test]
    fn unreadable_tasks_get_pqos_error_line() {
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        b.fail_reads(true);
        let mut out = Vec::new();
        let e = run_show(&mut b, false, false, &mut out).unwrap_err();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.ends_with("PID association information:\nError retrieving PID information!\n"),
            "{out}"
        );
        assert!(format!("{e:#}").contains("tasks of COS1"), "{e:#}");
    }

    #[test]
    fn json_lists_failed_reads_and_leaves_their_parts_empty() {
        // arrange: the OS interface, the task and group reads failing
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        b.fail_reads(true);
        let mut out = Vec::new();
        // act
        let e = run_show(&mut b, false, true, &mut out).unwrap_err();
        // assert: one document, the same first error, every failure listed
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let errors: Vec<&str> = doc["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(errors.first().copied(), Some(format!("{e:#}").as_str()));
        assert!(
            errors.iter().any(|m| m.contains("tasks of COS1")),
            "{errors:?}"
        );
        assert!(doc["groups"].is_null(), "{doc}");
        assert_eq!(doc["tasks"], serde_json::json!([]), "{doc}");
        assert_eq!(doc["interface"], "os");
    }

    #[test]
    fn json_shows_cdp_masks_and_foreign_cores() {
        let mut b = FakeBackend::broadwell_2s();
        define(&mut b, "llc:1=0xf0");
        let mut out = Vec::new();
        run_show(&mut b, false, true, &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let cos1 = &doc["l3_cat"][1]["classes"][1];
        assert_eq!(
            (cos1["mask"].as_str(), cos1["ways"].as_u64()),
            (Some("0xf0"), Some(4)),
            "{doc}"
        );
        assert!(
            doc["groups"].is_null() && doc["tasks"].is_null(),
            "MSR: {doc}"
        );
        assert_eq!(doc["cores"][0]["rmid"], 0, "{doc}");
    }
}
