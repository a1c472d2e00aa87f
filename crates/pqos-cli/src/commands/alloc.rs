//! `-e` (class definitions), `-c` (a profile's classes), `-a` (core and task association),
//! `-R` (allocation reset) and `-r` (monitoring reset), with pqos's output lines
//! (pqos/alloc.c, v25.04 strings).
//!
//! Every definition and association is checked against the backend's capabilities and
//! topology (tasks: against `/proc`) first, and the current class of every core and task
//! named is read (a core or task in another tool's resctrl group is refused then); if any
//! check fails, nothing is written. pqos applies the definitions one by one; when a write
//! still fails (the kernel or the hardware refuses it), the writes this command made before
//! it are undone, newest first, so that a command takes effect whole or not at all (this
//! tool's addition: pqos leaves the earlier writes in place).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{Context as _, Result, anyhow, bail};
use rdt_pqos::{
    AllocReset, Backend, BackendError, CacheBitmask, CacheDomain, Capabilities, CatClass, CatMask,
    CatResource, ClassId, FeatureSetting, Interface, LogicalCpu, MbaClass, MbaKind, MbaLimit,
    RequestError, TaskId, Topology,
};

use super::{L3Domains, join, profiles};
use rdt_pqos::proc::ProcFs;

use crate::command::AllocRequest;
use crate::grammar::{AllocKind, ClassDef, CosValue, MaskScope};

/// One validated write, with the label its output line uses.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Cat {
        resource: CatResource,
        domain: CacheDomain,
        label: String,
        class: CatClass,
        /// The class as it was before this write, for the undo.
        before: CatClass,
    },
    Mba {
        domain: CacheDomain,
        label: String,
        class: MbaClass,
        unit: &'static str,
        /// The class as it was before this write, for the undo.
        before: MbaClass,
    },
}

/// A write this command made, as the write that puts it back.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Undo {
    Cat(CatResource, CacheDomain, CatClass),
    Mba(CacheDomain, MbaClass),
    Core(LogicalCpu, ClassId),
    Task(TaskId, ClassId),
}

impl Undo {
    /// Only the backend's verdict matters for an undo; the lines were printed already.
    fn run<B: Backend>(&self, backend: &mut B) -> Result<(), B::Error> {
        match self {
            Self::Cat(resource, domain, class) => {
                backend.set_cat_classes(*resource, *domain, &[*class])
            }
            Self::Mba(domain, class) => backend.set_mba_classes(*domain, &[*class]).map(|_| ()),
            Self::Core(cpu, class) => backend.associate(*cpu, *class),
            Self::Task(task, class) => backend.associate_task(*task, *class),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Cat(resource, domain, class) => {
                format!("{resource} COS{} of domain {domain}", class.class)
            }
            Self::Mba(domain, class) => format!("MBA COS{} of domain {domain}", class.class),
            Self::Core(cpu, class) => format!("core {cpu} back to COS{class}"),
            Self::Task(task, class) => format!("task {task} back to COS{class}"),
        }
    }
}

/// Puts back what `done` records, newest first, and adds the outcome to `err`: nothing
/// changed, or what could not be put back.
fn undo_all<B: Backend>(backend: &mut B, done: Vec<Undo>, err: anyhow::Error) -> anyhow::Error {
    if done.is_empty() {
        return err;
    }
    let n = done.len();
    let mut failed = Vec::new();
    for u in done.into_iter().rev() {
        if let Err(e) = u.run(backend) {
            failed.push(format!("{}: {:#}", u.describe(), anyhow!(e)));
        }
    }
    if failed.is_empty() {
        err.context(format!(
            "nothing was changed: the {n} write(s) this command made before the failure were \
             undone"
        ))
    } else {
        err.context(format!(
            "the configuration is partly changed: undoing the writes made before the failure \
             failed for {}",
            failed.join("; ")
        ))
    }
}

/// `-e` and `-a`: validates everything, then writes and prints pqos's lines.
///
/// # Errors
/// A definition or association that does not fit the platform (nothing is written then),
/// or a failed write. pqos's `Allocation configuration error!` or `Allocation association
/// error!` has been written to `out` then.
pub fn run_alloc<B: Backend>(
    backend: &mut B,
    req: &AllocRequest,
    proc: &ProcFs,
    out: &mut dyn Write,
) -> Result<()> {
    for w in &req.warnings {
        writeln!(out, "{w}")?;
    }
    let mut classes = req.classes.clone();
    if let Some(name) = &req.profile {
        // pqos appends the profile's classes to the -e list (pqos/profiles.c).
        classes.extend(profiles::class_defs(name, backend.capabilities()).map_err(|m| anyhow!(m))?);
    }
    let ops = match plan_classes(backend, &classes) {
        Ok(ops) => ops,
        Err(e) => {
            writeln!(out, "Allocation configuration error!")?;
            return Err(e);
        }
    };
    let checked = check_assoc(backend, &req.assoc)
        .and_then(|()| check_tasks(backend, proc, &req.tasks))
        .and_then(|()| current_classes(backend, req));
    let (mut core_class, mut task_class) = match checked {
        Ok(current) => current,
        Err(e) => {
            writeln!(out, "Allocation association error!")?;
            return Err(e);
        }
    };
    let mut done = Vec::new();
    for op in &ops {
        if let Err(e) = apply(backend, op, out) {
            writeln!(out, "Allocation configuration error!")?;
            return Err(undo_all(backend, done, e));
        }
        done.push(match op {
            Op::Cat {
                resource,
                domain,
                before,
                ..
            } => Undo::Cat(*resource, *domain, *before),
            Op::Mba { domain, before, .. } => Undo::Mba(*domain, *before),
        });
    }
    for (cpu, class, text) in &req.assoc {
        if let Err(e) = backend.associate(*cpu, *class) {
            let e = association_failed(out, e, &format!("core {cpu}"), *class, text)?;
            return Err(undo_all(backend, done, e));
        }
        if let Some(was) = core_class.insert(*cpu, *class) {
            done.push(Undo::Core(*cpu, was));
        }
    }
    for (task, class, text) in &req.tasks {
        if let Err(e) = backend.associate_task(*task, *class) {
            let e = association_failed(out, e, &format!("task {task}"), *class, text)?;
            return Err(undo_all(backend, done, e));
        }
        if let Some(was) = task_class.insert(*task, *class) {
            done.push(Undo::Task(*task, was));
        }
    }
    if !ops.is_empty() || !req.assoc.is_empty() || !req.tasks.is_empty() {
        writeln!(out, "Allocation configuration altered.")?;
    }
    Ok(())
}

/// The class of each core and task `req` associates, read before anything is written: for
/// the undo, and to refuse a core or task in another tool's resctrl group up front.
fn current_classes<B: Backend>(
    backend: &mut B,
    req: &AllocRequest,
) -> Result<(BTreeMap<LogicalCpu, ClassId>, BTreeMap<TaskId, ClassId>)> {
    let mut cores = BTreeMap::new();
    for (cpu, _, text) in &req.assoc {
        let class = backend
            .class_of(*cpu)
            .map_err(|e| refused(e, &format!("core {cpu}"), text))?;
        cores.insert(*cpu, class);
    }
    let mut tasks = BTreeMap::new();
    for (task, _, text) in &req.tasks {
        let class = backend
            .class_of_task(*task)
            .map_err(|e| refused(e, &format!("task {task}"), text))?;
        tasks.insert(*task, class);
    }
    Ok((cores, tasks))
}

/// The error for a core or task whose class could not be read before an association.
fn refused<E: BackendError>(e: E, what: &str, text: &str) -> anyhow::Error {
    if let Some(RequestError::ForeignGroup { group, .. }) = e.request() {
        return anyhow!(
            "{what} in \"{text}\" is in resctrl group {group}, which pqos does not manage: \
             another tool created `{group}`, so pqos leaves the group, its CPUs and its tasks \
             alone (change them with that tool)"
        );
    }
    anyhow::Error::new(e).context(format!("reading the class of {what} (\"{text}\")"))
}

fn check_tasks<B: Backend>(
    backend: &B,
    proc: &ProcFs,
    tasks: &[(TaskId, ClassId, String)],
) -> Result<()> {
    let Some((_, _, first)) = tasks.first() else {
        return Ok(());
    };
    if backend.interface() != Interface::Os {
        bail!(
            "\"{first}\": associating tasks needs the OS (resctrl) interface (--iface=os); this \
             platform was opened with the MSR interface, which associates cores only"
        );
    }
    let max = backend.capabilities().os_classes();
    if max == 0 {
        bail!("Allocation capability not detected! (no L3 CAT, L2 CAT or MBA on this platform)");
    }
    for (task, class, text) in tasks {
        if class.get() >= max {
            bail!(
                "Task ID number or class id is out of bounds! COS{class} in \"{text}\" is beyond \
                 the {max} classes of this platform (COS0-COS{})",
                max - 1
            );
        }
        if !proc.exists(*task) {
            bail!(
                "Task ID number or class id is out of bounds! Task {task} in \"{text}\" does not \
                 exist (no {}/{task})",
                proc.root().display()
            );
        }
    }
    Ok(())
}

fn apply<B: Backend>(backend: &mut B, op: &Op, out: &mut dyn Write) -> Result<()> {
    match op {
        Op::Cat {
            resource,
            domain,
            label,
            class,
            ..
        } => {
            let (label, name) = match resource {
                CatResource::L3 => (label.clone(), "L3CA"),
                CatResource::L2 => (format!("L2ID {}", domain.get()), "L2CA"),
            };
            if let Err(e) = backend.set_cat_classes(*resource, *domain, &[*class]) {
                writeln!(out, "{label} {name} COS{} - FAILED!", class.class)?;
                return Err(
                    anyhow!(e).context(format!("setting {label} {name} COS{}", class.class))
                );
            }
            match class.mask {
                CatMask::Unified(m) => {
                    writeln!(out, "{label} {name} COS{} => MASK {m:#x}", class.class)?;
                }
                CatMask::Cdp { data, code } => writeln!(
                    out,
                    "{label} {name} COS{} => DATA {data:#x},CODE {code:#x}",
                    class.class
                )?,
            }
        }
        Op::Mba {
            domain,
            label,
            class,
            unit,
            ..
        } => match backend.set_mba_classes(*domain, &[*class]) {
            Ok(_) if matches!(class.limit, MbaLimit::MibPerSec(_)) => {
                // pqos/alloc.c set_mba_clos with ctrl: `%u MBps`, no "applied" part.
                writeln!(
                    out,
                    "{label} MBA COS{} => {} MBps",
                    class.class,
                    class.limit.value()
                )?;
            }
            Ok(applied) => {
                let got = applied
                    .iter()
                    .find(|a| a.class == class.class)
                    .map_or(class.limit.value(), |a| a.limit.value());
                writeln!(
                    out,
                    "{label} MBA COS{} => {}{unit} requested, {got}{unit} applied",
                    class.class,
                    class.limit.value()
                )?;
            }
            Err(e) => {
                writeln!(out, "{label} MBA COS{} - FAILED!", class.class)?;
                return Err(anyhow!(e).context(format!("setting {label} MBA COS{}", class.class)));
            }
        },
    }
    Ok(())
}

/// The current classes of the (resource, domain) pairs touched, updated as definitions are
/// applied in order (so `1d=..,1c=..` builds on itself as in pqos).
type CatTables = BTreeMap<(CatResource, CacheDomain), Vec<CatClass>>;

fn plan_classes<B: Backend>(backend: &mut B, defs: &[ClassDef]) -> Result<Vec<Op>> {
    let mut tables = CatTables::new();
    let mut mba_tables = MbaTables::new();
    let mut ops = Vec::new();
    for def in defs {
        match def.kind {
            AllocKind::L3 | AllocKind::L2 => plan_cat(backend, def, &mut tables, &mut ops)?,
            AllocKind::Mba | AllocKind::MbaMax => {
                plan_mba(backend, def, &mut mba_tables, &mut ops)?;
            }
            AllocKind::Smba => bail!(
                "\"{}\": {}",
                def.text,
                if backend.capabilities().smba.is_present() {
                    "SMBA allocation is not implemented yet"
                } else {
                    "SMBA is not supported on this platform"
                }
            ),
        }
    }
    Ok(ops)
}

fn unsupported(def: &ClassDef, what: &str, present: bool) -> anyhow::Error {
    if present {
        anyhow!(
            "\"{}\": {what} parameters are unknown on this platform (CPUID leaf not recorded)",
            def.text
        )
    } else {
        anyhow!("\"{}\": {what} is not supported on this platform", def.text)
    }
}

fn plan_cat<B: Backend>(
    backend: &mut B,
    def: &ClassDef,
    tables: &mut CatTables,
    ops: &mut Vec<Op>,
) -> Result<()> {
    let caps = backend.capabilities().clone();
    let topo = backend.topology().clone();
    let (resource, feature) = match def.kind {
        AllocKind::L2 => (CatResource::L2, &caps.l2_cat),
        _ => (CatResource::L3, &caps.l3_cat),
    };
    let name = if resource == CatResource::L3 {
        "L3 CAT"
    } else {
        "L2 CAT"
    };
    if feature.get().is_none() {
        return Err(unsupported(def, name, feature.is_present()));
    }
    let targets = cat_targets(&caps, &topo, resource, def)?;
    for v in &def.values {
        caps.check_cat_class(resource, v.class).map_err(|e| {
            anyhow!(
                "Invalid class ID: {}! \"{}\" in \"{}\": {e}",
                v.class,
                v.text,
                def.text
            )
        })?;
        check_closid(backend, v.class, &v.text, &def.text)?;
        let mask = CacheBitmask::new(v.value)
            .map_err(|e| anyhow!("\"{}\" in \"{}\": {e}", v.text, def.text))?;
        caps.check_mask(resource, mask)
            .map_err(|e| anyhow!("\"{}\" in \"{}\": {e}", v.text, def.text))?;
        for (id, domain, label) in &targets {
            let table = match tables.entry((resource, *domain)) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(slot) => {
                    let current = backend.cat_classes(resource, *domain).map_err(|e| {
                        anyhow!(e).context(format!("reading the {name} classes of {label}"))
                    })?;
                    slot.insert(current)
                }
            };
            let Some(class) = table.iter_mut().find(|c| c.class == v.class) else {
                bail!(
                    "Invalid class ID: {}! (\"{}\" in \"{}\")",
                    v.class,
                    v.text,
                    def.text
                );
            };
            let before = *class;
            class.mask = new_mask(class.mask, v, mask).ok_or_else(|| {
                let (what, unit) = if resource == CatResource::L3 {
                    ("L3", "socket")
                } else {
                    ("L2", "cluster")
                };
                anyhow!(
                    "Failed to set {what} class on {unit} {id}, CDP not enabled! \"{}\" in \"{}\": \
                     the d/c suffix sets a CDP data/code mask; turn CDP on with -R {}cdp-on",
                    v.text,
                    def.text,
                    what.to_ascii_lowercase()
                )
            })?;
            ops.push(Op::Cat {
                resource,
                domain: *domain,
                label: label.clone(),
                class: *class,
                before,
            });
        }
    }
    Ok(())
}

/// The (user id, cache domain, `-e` line label) a CAT item applies to.
fn cat_targets(
    caps: &Capabilities,
    topo: &Topology,
    resource: CatResource,
    def: &ClassDef,
) -> Result<Vec<(u32, CacheDomain, String)>> {
    let targets = if resource == CatResource::L3 {
        let l3 = L3Domains::new(caps, topo);
        let pick: Vec<(u32, CacheDomain)> = match &def.ids {
            None => l3.list.clone(),
            Some(ids) => ids
                .iter()
                .map(|&id| {
                    l3.find(id).map(|d| (id, d)).ok_or_else(|| {
                        anyhow!(
                            "\"{}\": L3 resource id {id} is not present (L3 CAT ids on this platform: {})",
                            def.text,
                            l3.ids()
                        )
                    })
                })
                .collect::<Result<_>>()?,
        };
        pick.into_iter()
            .map(|(id, d)| (id, d, l3.alloc_label(id)))
            .collect()
    } else {
        let l2 = topo.l2_domains();
        let pick: Vec<CacheDomain> = match &def.ids {
            None => l2.clone(),
            Some(ids) => ids
                .iter()
                .map(|&id| {
                    l2.iter().copied().find(|d| d.get() == id).ok_or_else(|| {
                        anyhow!(
                            "\"{}\": L2 id {id} is not present (L2 ids on this platform: {})",
                            def.text,
                            join(&l2)
                        )
                    })
                })
                .collect::<Result<_>>()?,
        };
        pick.into_iter()
            .map(|d| (d.get(), d, format!("L2ID {}", d.get())))
            .collect()
    };
    Ok(targets)
}

/// The class's masks after applying one value; `None` for a d/c suffix with CDP off.
fn new_mask(current: CatMask, v: &CosValue, mask: CacheBitmask) -> Option<CatMask> {
    Some(match (current, v.scope) {
        (CatMask::Unified(_), MaskScope::Both) => CatMask::Unified(mask),
        (CatMask::Unified(_), _) => return None,
        (CatMask::Cdp { .. }, MaskScope::Both) => CatMask::Cdp {
            data: mask,
            code: mask,
        },
        (CatMask::Cdp { code, .. }, MaskScope::Data) => CatMask::Cdp { data: mask, code },
        (CatMask::Cdp { data, .. }, MaskScope::Code) => CatMask::Cdp { data, code: mask },
    })
}

/// On the OS interface a class needs a CLOSID, and resctrl has as many as the resource with
/// the fewest ([`rdt_pqos::Capabilities::os_classes`]; pqos `os_l3ca_set` and friends check `class_id` against
/// it): a class the resource has but resctrl cannot give a group is refused up front.
fn check_closid<B: Backend>(backend: &B, class: ClassId, token: &str, item: &str) -> Result<()> {
    if backend.interface() != Interface::Os {
        return Ok(());
    }
    let max = backend.capabilities().os_classes();
    if class.get() >= max {
        bail!(
            "Invalid class ID: {class}! \"{token}\" in \"{item}\": resctrl has {max} CLOSIDs \
             (COS0-COS{}), the fewest num_closids of its resources",
            max.saturating_sub(1)
        );
    }
    Ok(())
}

/// The current MBA classes of the domains touched, updated as definitions are applied.
type MbaTables = BTreeMap<CacheDomain, Vec<MbaClass>>;

/// The class `class` of MBA `domain` before the next write, read once per domain.
fn mba_before<B: Backend>(
    backend: &mut B,
    tables: &mut MbaTables,
    domain: CacheDomain,
    class: MbaClass,
) -> Result<MbaClass> {
    let table = match tables.entry(domain) {
        std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
        std::collections::btree_map::Entry::Vacant(slot) => slot.insert(
            backend
                .mba_classes(domain)
                .map_err(|e| anyhow!(e).context(format!("reading the MBA classes of {domain}")))?,
        ),
    };
    let Some(current) = table.iter_mut().find(|c| c.class == class.class) else {
        bail!("Invalid class ID: {}!", class.class);
    };
    let before = *current;
    *current = class;
    Ok(before)
}

fn plan_mba<B: Backend>(
    backend: &mut B,
    def: &ClassDef,
    tables: &mut MbaTables,
    ops: &mut Vec<Op>,
) -> Result<()> {
    let caps = backend.capabilities().clone();
    let topo = backend.topology();
    let Some(mba) = caps.mba.get() else {
        return Err(unsupported(def, "MBA", caps.mba.is_present()));
    };
    let l3 = L3Domains::new(&caps, topo);
    let targets: Vec<(u32, CacheDomain)> = match &def.ids {
        None => l3.list.clone(),
        Some(ids) => ids
            .iter()
            .map(|&id| {
                l3.find(id).map(|d| (id, d)).ok_or_else(|| {
                    anyhow!(
                        "\"{}\": MBA resource id {id} is not present (MBA ids on this platform: {})",
                        def.text,
                        l3.ids()
                    )
                })
            })
            .collect::<Result<_>>()?,
    };
    let mbps = def.kind == AllocKind::MbaMax;
    check_mba_controller(backend.interface(), mba.ctrl_enabled, mbps, &def.text)?;
    for v in &def.values {
        caps.check_mba_class(v.class).map_err(|e| {
            anyhow!(
                "Invalid class ID: {}! \"{}\" in \"{}\": {e}",
                v.class,
                v.text,
                def.text
            )
        })?;
        check_closid(backend, v.class, &v.text, &def.text)?;
        if mbps {
            // pqos checks no range with the controller (lib/api.c pqos_mba_set); the kernel
            // takes any u32 MBps value.
            let v32 = u32::try_from(v.value).map_err(|_| {
                anyhow!(
                    "MBA COS{} rate out of range (from 1-{})! \"{}\" in \"{}\"",
                    v.class,
                    u32::MAX,
                    v.text,
                    def.text
                )
            })?;
            for (id, domain) in &targets {
                let class = MbaClass {
                    class: v.class,
                    limit: MbaLimit::MibPerSec(v32),
                };
                ops.push(Op::Mba {
                    domain: *domain,
                    label: l3.alloc_label(*id),
                    class,
                    unit: " MBps",
                    before: mba_before(backend, tables, *domain, class)?,
                });
            }
            continue;
        }
        let max = u64::from(mba.unlimited().value());
        if v.value > max {
            bail!(
                "MBA COS{} rate out of range (from 1-{max})! \"{}\" in \"{}\"",
                v.class,
                v.text,
                def.text
            );
        }
        let (limit, unit) = match mba.kind {
            // Both conversions are in range: checked against `max` (100 or 2^width) above.
            MbaKind::IntelDelay { .. } => {
                (MbaLimit::Percent(u8::try_from(v.value).unwrap_or(100)), "%")
            }
            MbaKind::AmdBandwidth { .. } => (
                MbaLimit::AmdUnits(u32::try_from(v.value).unwrap_or(u32::MAX)),
                "",
            ),
        };
        for (id, domain) in &targets {
            let class = MbaClass {
                class: v.class,
                limit,
            };
            ops.push(Op::Mba {
                domain: *domain,
                label: l3.alloc_label(*id),
                class,
                unit,
                before: mba_before(backend, tables, *domain, class)?,
            });
        }
    }
    Ok(())
}

/// `mba_max` needs the kernel's MBA controller (resctrl mounted with `mba_MBps`), and plain
/// `mba` cannot be used while it is on (pqos lib/os_allocation.c `os_mba_set`; the MSR
/// interface has no controller: lib/hw_allocation.c).
fn check_mba_controller(iface: Interface, ctrl_on: bool, mbps: bool, item: &str) -> Result<()> {
    match (iface, ctrl_on, mbps) {
        (Interface::Msr, _, true) => bail!(
            "MBA controller not supported! \"{item}\": mba_max sets MBps through the kernel's \
             MBA software controller, which needs the OS interface (--iface=os) on a resctrl \
             mounted with -o mba_MBps"
        ),
        (Interface::Os, false, true) => bail!(
            "MBA controller requested but not enabled! \"{item}\": resctrl is not mounted with \
             -o mba_MBps (pqos -R mbaCtrl-on remounts it so); use mba:COS=PERCENT meanwhile"
        ),
        (Interface::Os, true, false) => bail!(
            "Expected MBA controller but not requested! \"{item}\": resctrl is mounted with \
             mba_MBps, so MBA limits are in MBps: use mba_max:COS=MBPS"
        ),
        _ => Ok(()),
    }
}

fn check_assoc<B: Backend>(backend: &B, assoc: &[(LogicalCpu, ClassId, String)]) -> Result<()> {
    if assoc.is_empty() {
        return Ok(());
    }
    let caps = backend.capabilities();
    let topo = backend.topology();
    // resctrl: one CLOSID per class, as many as the resource with the fewest.
    let max = caps.classes(backend.interface());
    if max == 0 {
        bail!("Allocation capability not detected! (no L3 CAT, L2 CAT or MBA on this platform)");
    }
    for (cpu, class, text) in assoc {
        if topo.get(*cpu).is_none() {
            bail!(
                "Core number or class id is out of bounds! Core {cpu} in \"{text}\" is not present \
                 (cores on this platform: {})",
                topo.all_cpus()
            );
        }
        if class.get() >= max {
            bail!(
                "Core number or class id is out of bounds! COS{class} in \"{text}\" is beyond the \
                 {max} classes of this platform (COS0-COS{})",
                max - 1
            );
        }
    }
    Ok(())
}

/// `-R [CFG]`: pqos's `Allocation reset successful` or `Allocation reset failed!`.
///
/// # Errors
/// A requested setting the platform lacks, or a failed write.
pub fn run_reset_allocation<B: Backend>(
    backend: &mut B,
    cfg: AllocReset,
    out: &mut dyn Write,
) -> Result<()> {
    let caps = backend.capabilities().clone();
    let check = |setting: FeatureSetting, supported: bool, what: &str| {
        if setting == FeatureSetting::On && !supported {
            Err(anyhow!(
                "{what} requested but not supported by the platform!"
            ))
        } else {
            Ok(())
        }
    };
    let l3_cdp = caps.l3_cat.get().is_some_and(|c| c.cdp_supported);
    let l2_cdp = caps.l2_cat.get().is_some_and(|c| c.cdp_supported);
    let checked = check(cfg.l3_cdp, l3_cdp, "L3 CDP")
        .and_then(|()| check(cfg.l2_cdp, l2_cdp, "L2 CDP"))
        .and_then(|()| {
            check(
                cfg.mba_ctrl,
                backend.interface() == Interface::Os,
                "MBA CTRL",
            )
        });
    let result = checked.and_then(|()| {
        if caps.max_classes() == 0 {
            bail!("Allocation capability not detected!");
        }
        backend
            .reset_allocation(&cfg)
            .map_err(anyhow::Error::new)
            .context("resetting allocation")
    });
    match result {
        Ok(()) => {
            writeln!(out, "Allocation reset successful")?;
            Ok(())
        }
        Err(e) => {
            writeln!(out, "Allocation reset failed!")?;
            Err(e)
        }
    }
}

/// `-r`: pqos's `CMT/MBM reset successful` or `CMT/MBM reset failed!`.
///
/// # Errors
/// No monitoring capability, or a failed write.
pub fn run_reset_monitoring<B: Backend>(backend: &mut B, out: &mut dyn Write) -> Result<()> {
    let result = if backend.capabilities().monitoring.is_present() {
        backend
            .reset_monitoring()
            .map_err(anyhow::Error::new)
            .context("resetting monitoring")
    } else {
        Err(anyhow!("Monitoring capability not detected!"))
    };
    match result {
        Ok(()) => {
            writeln!(out, "CMT/MBM reset successful")?;
            Ok(())
        }
        Err(e) => {
            writeln!(out, "CMT/MBM reset failed!")?;
            Err(e)
        }
    }
}

/// Writes pqos's two lines for a failed association and returns the error, naming what was
/// associated (`core 3`, `task 1234`) and the `-a` item it came from.
fn association_failed<E>(
    out: &mut dyn Write,
    e: E,
    what: &str,
    class: ClassId,
    item: &str,
) -> Result<anyhow::Error>
where
    E: std::error::Error + Send + Sync + 'static,
{
    writeln!(
        out,
        "Setting allocation class of service association failed!"
    )?;
    writeln!(out, "Allocation association error!")?;
    Ok(anyhow!(e).context(format!("associating {what} with COS{class} (\"{item}\")")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use rdt_pqos::fake::FakeBackend;

    fn request(argv: &[&str]) -> AllocRequest {
        match crate::command::plan_of(argv).command {
            Command::Allocate(r) => r,
            c => panic!("{c:?}"),
        }
    }

    fn run(backend: &mut FakeBackend, argv: &[&str]) -> (Result<()>, String) {
        let mut out = Vec::new();
        let r = run_alloc(backend, &request(argv), &ProcFs::host(), &mut out);
        (r, String::from_utf8(out).unwrap())
    }

    /// Runs a command that must fail validation; returns the error and checks nothing was written.
    fn rejected(backend: &mut FakeBackend, argv: &[&str]) -> String {
        backend.writes.clear();
        let (r, out) = run(backend, argv);
        let e = format!("{:#}", r.unwrap_err());
        assert!(
            backend.writes.is_empty(),
            "nothing may be written: {:?}",
            backend.writes
        );
        assert!(out.is_empty() || out.ends_with(" error!\n"), "{out}");
        e
    }

    #[test]
    fn seed_paper_classes_print_pqos_lines_per_socket() {
        // arrange
        let mut b = FakeBackend::broadwell_2s();
        // act
        let (r, out) = run(&mut b, &["-e", "llc:1=0xffe00;llc:2=0x00003"]);
        // assert
        r.unwrap();
        assert_eq!(
            out,
            "SOCKET 0 L3CA COS1 => MASK 0xffe00\n\
             SOCKET 1 L3CA COS1 => MASK 0xffe00\n\
             SOCKET 0 L3CA COS2 => MASK 0x3\n\
             SOCKET 1 L3CA COS2 => MASK 0x3\n\
             Allocation configuration altered.\n"
        );
        assert_eq!(
            b.l3_mask(0, 1),
            CatMask::Unified(CacheBitmask::new(0xffe00).unwrap())
        );
        assert_eq!(
            b.l3_mask(1, 2),
            CatMask::Unified(CacheBitmask::new(0x3).unwrap())
        );
    }

    #[test]
    fn sample_issue246_single_socket_class_zero() {
        // tests/data/pqos/intel_pqos-e_llc_issue246.txt without the NOTE banner
        let mut b = FakeBackend::intel_1s();
        let (r, out) = run(&mut b, &["-e", "llc@0:0=0x400;"]);
        r.unwrap();
        let sample = crate::testdata::sample("intel_pqos-e_llc_issue246.txt");
        assert_eq!(out, crate::testdata::without_note_banner(&sample));
    }

    #[test]
    fn selected_ids_only() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(&mut b, &["-e", "llc@1:3=0xf"]);
        r.unwrap();
        assert_eq!(
            out,
            "SOCKET 1 L3CA COS3 => MASK 0xf\nAllocation configuration altered.\n"
        );
        assert_eq!(b.writes.len(), 1);
    }

    #[test]
    fn cdp_data_and_code_masks() {
        let mut b = FakeBackend::broadwell_2s();
        b.enable_l3_cdp();
        let (r, out) = run(&mut b, &["-e", "llc@0:1d=0xf,1c=0xf0"]);
        r.unwrap();
        assert_eq!(
            out,
            "SOCKET 0 L3CA COS1 => DATA 0xf,CODE 0xfffff\n\
             SOCKET 0 L3CA COS1 => DATA 0xf,CODE 0xf0\n\
             Allocation configuration altered.\n"
        );
        let (r, out) = run(&mut b, &["-e", "llc@1:2=0x3"]);
        r.unwrap();
        assert!(
            out.starts_with("SOCKET 1 L3CA COS2 => DATA 0x3,CODE 0x3\n"),
            "{out}"
        );
    }

    #[test]
    fn cdp_suffix_with_cdp_off_is_rejected() {
        let mut b = FakeBackend::broadwell_2s();
        let e = rejected(&mut b, &["-e", "llc:1d=0xf"]);
        assert!(
            e.starts_with("Failed to set L3 class on socket 0, CDP not enabled!"),
            "{e}"
        );
        assert!(e.contains("\"1d=0xf\" in \"llc:1d=0xf\""), "{e}");
    }

    #[test]
    fn l2_classes_use_l2_ids() {
        let mut b = FakeBackend::intel_1s();
        let (r, out) = run(&mut b, &["-e", "l2@2:1=0xf"]);
        r.unwrap();
        assert_eq!(
            out,
            "L2ID 2 L2CA COS1 => MASK 0xf\nAllocation configuration altered.\n"
        );
        let e = rejected(&mut b, &["-e", "l2@99:1=0xf"]);
        assert!(e.contains("L2 id 99 is not present"), "{e}");
    }

    #[test]
    fn mba_prints_requested_and_applied() {
        let mut b = FakeBackend::intel_1s();
        let (r, out) = run(&mut b, &["-e", "mba:1=50"]);
        r.unwrap();
        assert_eq!(
            out,
            "SOCKET 0 MBA COS1 => 50% requested, 50% applied\nAllocation configuration altered.\n"
        );
        // Intel rounds to the 10% granularity: the fake rounds like the hardware.
        let (r, out) = run(&mut b, &["-e", "mba@0:1=75"]);
        r.unwrap();
        assert!(
            out.starts_with("SOCKET 0 MBA COS1 => 75% requested, 80% applied\n"),
            "{out}"
        );
    }

    #[test]
    fn amd_labels_core_complexes_and_mba_in_raw_units() {
        let mut b = FakeBackend::amd_2ccx();
        let (r, out) = run(&mut b, &["-e", "llc@1:1=0xff;mba@0:1=256"]);
        r.unwrap();
        assert_eq!(
            out,
            "Core Complex 1 L3CA COS1 => MASK 0xff\n\
             Core Complex 0 MBA COS1 => 256 requested, 256 applied\n\
             Allocation configuration altered.\n"
        );
        let e = rejected(&mut b, &["-e", "mba:1=4096"]);
        assert!(
            e.starts_with("MBA COS1 rate out of range (from 1-2048)!"),
            "{e}"
        );
    }

    #[test]
    fn mask_wider_than_the_cbm_is_rejected_naming_the_token() {
        let mut b = FakeBackend::broadwell_2s();
        let e = rejected(&mut b, &["-e", "llc:1=0xffe00;llc:2=0x1fffff"]);
        assert!(e.contains("\"2=0x1fffff\" in \"llc:2=0x1fffff\""), "{e}");
        assert!(e.contains("wider than the 20-bit"), "{e}");
    }

    #[test]
    fn non_contiguous_mask_is_rejected_where_the_cpu_requires_contiguous() {
        let mut b = FakeBackend::broadwell_2s();
        let e = rejected(&mut b, &["-e", "llc:1=0xf0f"]);
        assert!(
            e.contains("\"1=0xf0f\"") && e.contains("not contiguous"),
            "{e}"
        );
        // AMD accepts any non-zero mask.
        let mut b = FakeBackend::amd_2ccx();
        run(&mut b, &["-e", "llc:1=0xf0f"]).0.unwrap();
    }

    #[test]
    fn class_beyond_the_class_count_is_rejected() {
        let mut b = FakeBackend::broadwell_2s();
        let e = rejected(&mut b, &["-e", "llc:1=0xf;llc:16=0xf"]);
        assert!(e.starts_with("Invalid class ID: 16!"), "{e}");
        assert!(e.contains("\"llc:16=0xf\""), "{e}");
        let mut b = FakeBackend::intel_1s();
        let e = rejected(&mut b, &["-e", "mba:8=50"]);
        assert!(
            e.starts_with("Invalid class ID: 8!") && e.contains("MBA"),
            "{e}"
        );
    }

    #[test]
    fn resource_id_not_present_is_rejected() {
        let mut b = FakeBackend::broadwell_2s();
        let e = rejected(&mut b, &["-e", "llc@0,5:1=0xf"]);
        assert!(
            e.contains("\"llc@0,5:1=0xf\": L3 resource id 5 is not present"),
            "{e}"
        );
        assert!(e.contains("0,1"), "{e}");
    }

    #[test]
    fn unsupported_technology_is_rejected() {
        let mut b = FakeBackend::broadwell_2s();
        let e = rejected(&mut b, &["-e", "mba:1=50"]);
        assert!(
            e.contains("\"mba:1=50\": MBA is not supported on this platform"),
            "{e}"
        );
        let e = rejected(&mut b, &["-e", "l2:1=0xf"]);
        assert!(e.contains("L2 CAT is not supported"), "{e}");
        let e = rejected(&mut b, &["-e", "mba_max:1=6000"]);
        assert!(
            e.contains("\"mba_max:1=6000\": MBA is not supported"),
            "{e}"
        );
    }

    /// intel_1s on the OS interface, with the MBA controller on or off.
    fn os_backend(mba_ctrl: bool) -> FakeBackend {
        let mut b = FakeBackend::intel_1s();
        b.os_interface = true;
        b.reconfigure(|c| c.mba.get_mut().unwrap().ctrl_enabled = mba_ctrl);
        b
    }

    #[test]
    fn mba_max_sets_mbps_through_the_controller() {
        // arrange
        let mut b = os_backend(true);
        // act
        let (r, out) = run(&mut b, &["-e", "mba_max:1=6000;mba_max@0:2=0x100"]);
        // assert
        r.unwrap();
        assert_eq!(
            out,
            "SOCKET 0 MBA COS1 => 6000 MBps\nSOCKET 0 MBA COS2 => 256 MBps\n\
             Allocation configuration altered.\n"
        );
        assert_eq!(b.writes, ["MBA 0 COS1 = 6000", "MBA 0 COS2 = 256"]);
        let mut show = Vec::new();
        crate::commands::show::run_show(&mut b, false, &mut show).unwrap();
        let show = String::from_utf8(show).unwrap();
        assert!(
            show.contains("    MBA COS1 => 6000 MBps\n    MBA COS2 => 256 MBps\n"),
            "{show}"
        );
    }

    #[test]
    fn mba_max_without_the_controller_gets_pqos_errors() {
        let mut b = os_backend(false);
        let e = rejected(&mut b, &["-e", "llc:1=0xf;mba_max:1=6000"]);
        assert!(
            e.starts_with("MBA controller requested but not enabled! \"mba_max:1=6000\""),
            "{e}"
        );
        assert!(e.contains("mba_MBps"), "{e}");
        let mut b = FakeBackend::intel_1s();
        let e = rejected(&mut b, &["-e", "mba_max:1=6000"]);
        assert!(e.starts_with("MBA controller not supported!"), "{e}");
        assert!(e.contains("--iface=os"), "{e}");
        let mut b = os_backend(true);
        let e = rejected(&mut b, &["-e", "mba:1=50"]);
        assert!(
            e.starts_with("Expected MBA controller but not requested! \"mba:1=50\""),
            "{e}"
        );
        let e = rejected(&mut b, &["-e", "mba_max:9=100"]);
        assert!(e.starts_with("Invalid class ID: 9!"), "{e}");
        let e = rejected(&mut b, &["-e", "mba_max:1=0x100000000"]);
        assert!(e.contains("rate out of range"), "{e}");
    }

    fn me() -> u32 {
        std::process::id()
    }

    #[test]
    fn pid_association_moves_every_thread_of_the_process() {
        // arrange: this test process (it exists in /proc) with two more threads, and init
        let mut b = os_backend(false);
        b.add_process(me(), &[me() + 1, me() + 2]);
        b.add_process(1, &[]);
        // act
        let (r, out) = run(&mut b, &["-a", &format!("llc:1=0;pid:3={};pid:2=1", me())]);
        // assert
        r.unwrap();
        assert_eq!(out, "Allocation configuration altered.\n");
        assert_eq!(
            (b.class_of_thread(me()), b.class_of_thread(me() + 2)),
            (3, 3)
        );
        assert_eq!(b.class_of_thread(1), 2);
        assert_eq!(b.class_of_cpu(0), 1);
        assert_eq!(b.writes[0], "assoc 0 COS1", "cores first, as pqos");
    }

    #[test]
    fn pid_association_is_validated_before_anything_is_written() {
        let mut b = os_backend(false);
        b.add_process(me(), &[]);
        // a task that cannot exist (pid_max is at most 4194304: ids are below it)
        let e = rejected(
            &mut b,
            &[
                "-e",
                "llc:1=0xf",
                "-a",
                &format!("pid:1={};pid:1=4194304", me()),
            ],
        );
        assert!(
            e.starts_with(
                "Task ID number or class id is out of bounds! Task 4194304 in \"pid:1=4194304\" \
                 does not exist"
            ),
            "{e}"
        );
        // resctrl's CLOSIDs are the fewest of any resource: 8 here (L2 CAT and MBA)
        let e = rejected(&mut b, &["-a", &format!("pid:8={}", me())]);
        assert!(
            e.starts_with("Task ID number or class id is out of bounds! COS8 in"),
            "{e}"
        );
        assert!(e.contains("(COS0-COS7)"), "{e}");
    }

    #[test]
    fn pid_association_on_the_msr_interface_names_the_os_interface() {
        let mut b = FakeBackend::intel_1s();
        let e = rejected(&mut b, &["-a", &format!("pid:1={}", me())]);
        assert!(
            e.contains("OS (resctrl) interface (--iface=os)") && e.contains("MSR interface"),
            "{e}"
        );
    }

    #[test]
    fn failed_task_write_prints_pqos_lines() {
        let mut b = os_backend(false);
        b.add_process(me(), &[]);
        b.fail_writes(true);
        let (r, out) = run(&mut b, &["-a", &format!("pid:1={}", me())]);
        let e = format!("{:#}", r.unwrap_err());
        assert_eq!(
            out,
            "Setting allocation class of service association failed!\n\
             Allocation association error!\n"
        );
        assert!(e.contains(&format!("task {} with COS1", me())), "{e}");
    }

    #[test]
    fn profile_applies_after_the_command_line_classes() {
        // broadwell_2s: 20 ways -> CFG1's 20-way table
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(&mut b, &["-e", "llc@0:5=0x3", "-c", "cfg1"]);
        r.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "SOCKET 0 L3CA COS5 => MASK 0x3");
        assert_eq!(lines[1], "SOCKET 0 L3CA COS0 => MASK 0xff");
        assert_eq!(lines[2], "SOCKET 1 L3CA COS0 => MASK 0xff");
        assert_eq!(lines[8], "SOCKET 1 L3CA COS3 => MASK 0xf0000");
        assert_eq!(lines[9], "Allocation configuration altered.");
        assert_eq!(
            b.l3_mask(1, 2),
            CatMask::Unified(CacheBitmask::new(0xf000).unwrap())
        );
        let e = rejected(&mut b, &["-c", "CFG7"]);
        assert!(
            e.starts_with("Allocation profile 'CFG7' not found or cache allocation not supported!"),
            "{e}"
        );
    }

    // profiles::class_defs (the tables are the library's, src/profiles.rs) against the
    // platforms of this crate's fake.
    #[test]
    fn profile_resolves_against_the_cbm_length_case_insensitively() {
        // broadwell_2s: 20-bit CBM, 16 classes
        let b = FakeBackend::broadwell_2s();
        let defs = profiles::class_defs("cfg1", b.capabilities()).unwrap();
        let texts: Vec<&str> = defs.iter().map(|d| d.text.as_str()).collect();
        assert_eq!(
            texts,
            ["llc:0=0xff", "llc:1=0xf00", "llc:2=0xf000", "llc:3=0xf0000"]
        );
        // intel_1s: 11-bit CBM
        let b = FakeBackend::intel_1s();
        let defs = profiles::class_defs("CFG0", b.capabilities()).unwrap();
        assert_eq!(defs[3].text, "llc:3=0x600");
    }

    #[test]
    fn unknown_profile_or_unfit_platform_gets_pqos_message() {
        let b = FakeBackend::broadwell_2s();
        let e = profiles::class_defs("CFG9", b.capabilities()).unwrap_err();
        assert!(
            e.starts_with("Allocation profile 'CFG9' not found or cache allocation not supported!"),
            "{e}"
        );
        // amd_2ccx: 16-bit CBM has a table; an 8-way L3 has none
        let mut b = FakeBackend::amd_2ccx();
        assert!(profiles::class_defs("CFG2", b.capabilities()).is_ok());
        b.reconfigure(|c| c.l3_cat.get_mut().unwrap().cbm_len = 8);
        let e = profiles::class_defs("CFG2", b.capabilities()).unwrap_err();
        assert!(e.contains("this L3 has 8"), "{e}");
        b.reconfigure(|c| c.l3_cat.get_mut().unwrap().num_classes = 2);
        let e = profiles::class_defs("CFG2", b.capabilities()).unwrap_err();
        assert!(e.contains("need 4 L3 classes"), "{e}");
    }

    #[test]
    fn seed_paper_association_is_silent_until_altered() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(&mut b, &["-a", "llc:1=2-7;llc:2=8-10"]);
        r.unwrap();
        assert_eq!(out, "Allocation configuration altered.\n");
        assert_eq!(b.class_of_cpu(2), 1);
        assert_eq!(b.class_of_cpu(10), 2);
        assert_eq!(b.class_of_cpu(11), 0);
    }

    #[test]
    fn class_definitions_and_associations_print_one_altered_line() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(&mut b, &["-e", "llc@0:1=0xf", "-a", "llc:1=2;llc:2=2"]);
        r.unwrap();
        assert_eq!(
            out,
            "warn: updating COS for core 2 from 1 to 2\n\
             SOCKET 0 L3CA COS1 => MASK 0xf\n\
             Allocation configuration altered.\n"
        );
    }

    #[test]
    fn cpu_not_present_is_rejected_and_nothing_is_written() {
        let mut b = FakeBackend::broadwell_2s();
        let e = rejected(&mut b, &["-e", "llc:1=0xf", "-a", "llc:1=2-7;llc:2=99"]);
        assert!(
            e.starts_with("Core number or class id is out of bounds! Core 99 in \"llc:2=99\""),
            "{e}"
        );
        let e = rejected(&mut b, &["-a", "llc:16=2"]);
        assert!(e.contains("COS16 in \"llc:16=2\""), "{e}");
    }

    #[test]
    fn failed_write_prints_pqos_failed_line() {
        let mut b = FakeBackend::broadwell_2s();
        b.fail_writes(true);
        let (r, out) = run(&mut b, &["-e", "llc:2=0xf"]);
        let e = format!("{:#}", r.unwrap_err());
        assert_eq!(
            out,
            "SOCKET 0 L3CA COS2 - FAILED!\nAllocation configuration error!\n"
        );
        assert!(e.contains("injected failure"), "{e}");
    }

    #[test]
    fn a_write_refused_midway_undoes_the_writes_before_it() {
        // arrange: the 3rd change (COS2 on socket 0) is refused
        let mut b = FakeBackend::broadwell_2s();
        b.fail_nth_write(3);
        let full = CatMask::Unified(CacheBitmask::new(0xfffff).unwrap());
        // act
        let mut out = Vec::new();
        let r = run_alloc(
            &mut b,
            &request(&["-e", "llc:1=0xf;llc:2=0xf0"]),
            &ProcFs::host(),
            &mut out,
        );
        // assert: pqos's lines, and COS1 back as it was on both sockets
        let e = format!("{:#}", r.unwrap_err());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SOCKET 0 L3CA COS1 => MASK 0xf\n\
             SOCKET 1 L3CA COS1 => MASK 0xf\n\
             SOCKET 0 L3CA COS2 - FAILED!\n\
             Allocation configuration error!\n"
        );
        assert!(
            e.starts_with("nothing was changed: the 2 write(s)") && e.contains("injected failure"),
            "{e}"
        );
        for socket in [0, 1] {
            assert_eq!(b.l3_mask(socket, 1), full);
            assert_eq!(b.l3_mask(socket, 2), full);
        }
        assert_eq!(
            b.writes.last().map(String::as_str),
            Some("L3 0 COS1 = Unified(CacheBitmask(1048575))"),
            "undone newest first: {:?}",
            b.writes
        );
    }

    #[test]
    fn a_refused_association_puts_back_the_classes_and_cores_before_it() {
        // arrange: core 2 starts in COS3; the 4th change (core 3) is refused
        let mut b = FakeBackend::intel_1s();
        b.associate(LogicalCpu::new(2), ClassId::new(3)).unwrap();
        b.fail_nth_write(4);
        // act
        let mut out = Vec::new();
        let r = run_alloc(
            &mut b,
            &request(&["-e", "mba:1=50", "-a", "llc:1=1-3"]),
            &ProcFs::host(),
            &mut out,
        );
        // assert
        r.unwrap_err();
        assert!(
            String::from_utf8(out)
                .unwrap()
                .ends_with("Setting allocation class of service association failed!\nAllocation association error!\n")
        );
        assert_eq!(
            [1, 2, 3].map(|c| b.class_of_cpu(c)),
            [0, 3, 0],
            "cores back where they were"
        );
        assert_eq!(
            b.mba_classes(CacheDomain::new(0)).unwrap()[1].limit,
            MbaLimit::Percent(100)
        );
    }

    #[test]
    fn reset_allocation_prints_pqos_line_and_checks_support() {
        let mut b = FakeBackend::broadwell_2s();
        run(&mut b, &["-e", "llc:1=0xf"]).0.unwrap();
        let mut out = Vec::new();
        run_reset_allocation(&mut b, AllocReset::default(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Allocation reset successful\n"
        );
        assert_eq!(
            b.l3_mask(0, 1),
            CatMask::Unified(CacheBitmask::new(0xfffff).unwrap())
        );
        let mut out = Vec::new();
        let cfg = AllocReset {
            l2_cdp: FeatureSetting::On,
            ..AllocReset::default()
        };
        let e = run_reset_allocation(&mut b, cfg, &mut out)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "L2 CDP requested but not supported by the platform!");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Allocation reset failed!\n"
        );
    }

    #[test]
    fn reset_monitoring_prints_pqos_line() {
        let mut b = FakeBackend::broadwell_2s();
        let mut out = Vec::new();
        run_reset_monitoring(&mut b, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "CMT/MBM reset successful\n"
        );
    }
}
