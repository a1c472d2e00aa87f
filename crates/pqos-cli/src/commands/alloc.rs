//! `-e` (class definitions), `-c` (a profile's classes), `-a` (core and task association),
//! `-R` (allocation reset) and `-r` (monitoring reset), with pqos's output lines
//! (pqos/alloc.c, v25.04 strings).
//!
//! `-e`/`-a` are one library transaction ([`rdt_pqos::transaction::Plan`]): every
//! definition and association is validated and the current class of every core and task is
//! read before anything is written; a write that still fails is undone with the writes before
//! it, so a command takes effect whole or not at all (this tool's addition: pqos leaves the
//! earlier writes in place). What stays here is pqos's grammar (resource ids and their
//! labels, the meaning of a bare MBA number) and pqos's words.

use std::io::Write;

use anyhow::{Result, anyhow, bail};
use rdt_pqos::config::goresctrl::GroupOptions;
use rdt_pqos::config::{ConfigFile, ConfigPlanError};
use rdt_pqos::proc::ProcFs;
use rdt_pqos::transaction::{
    self, ApplyPlan, Change, Done, Failed, Outcome, Plan, PlanError, Step,
};
use rdt_pqos::{
    AllocReset, Backend, BackendError, BackendExt, CacheBitmask, CacheDomain, Capabilities,
    CatMask, CatResource, ClassId, LimitError, MbaKind, MbaLimit, MbaResource, MbaUnitMismatch,
    RequestError, Topology,
};

use super::{L3Domains, join, profiles};
use crate::command::AllocRequest;
use crate::grammar::{AllocKind, AssocTarget, ClassDef, CosValue};

/// Where a change came from: what its pqos line and messages say.
#[derive(Clone, Debug)]
enum Origin<'a> {
    /// One `COS=MASK` of an `llc`/`l2` item, in one domain.
    Cat {
        def: &'a ClassDef,
        value: &'a CosValue,
        /// The domain's user-visible id (socket, CCX, L2 id).
        id: u32,
        /// `SOCKET 0`, `Core Complex 0`, `L2ID 1`.
        label: String,
    },
    /// One `COS=VALUE` of an `mba`/`mba_max`/`smba` item, in one domain.
    Mba {
        def: &'a ClassDef,
        value: &'a CosValue,
        label: String,
        /// `%`, ` MBps` or nothing (AMD units).
        unit: &'static str,
    },
    /// One `COS=VALUE` of an `mba` item on the MMIO interface: one control of one memory
    /// region in one ERDT domain (`--alloc-domain-id`, `--alloc-mem-regions`).
    RegionMba {
        def: &'a ClassDef,
        value: &'a CosValue,
        /// The ERDT domain id, as given.
        domain_id: u16,
    },
    /// A core of `-a`.
    Core { item: &'a str },
    /// A task of `-a pid:`.
    Task { item: &'a str },
    /// An I/O RDT channel of `-a channel:` or `-a dev:`.
    Channel { item: &'a str },
}

impl Origin<'_> {
    const fn is_definition(&self) -> bool {
        matches!(
            self,
            Self::Cat { .. } | Self::Mba { .. } | Self::RegionMba { .. }
        )
    }
}

/// `-e` and `-a`: one transaction, with pqos's lines.
///
/// # Errors
/// A definition or association that does not fit the platform (nothing is written then),
/// or a failed write (the writes before it are undone). pqos's `Allocation configuration
/// error!` or `Allocation association error!` has been written to `out` then.
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
    // MMIO interface: the ERDT domain of each L3 domain and the number of memory regions
    let regions = backend
        .regions()
        .map(|r| (r.domain_ids(), r.memory_regions().len()));
    let channels = match io_channels(backend, req) {
        Ok(c) => c,
        Err(e) => {
            if let Some(line) = pqos_line(&e) {
                writeln!(out, "{line}")?;
            }
            writeln!(out, "Allocation association error!")?;
            return Err(e);
        }
    };
    let (changes, origins) = match changes_of(backend, &classes, req, regions.as_ref(), &channels) {
        Ok(c) => c,
        Err(e) => {
            if let Some(line) = pqos_line(&e) {
                writeln!(out, "{line}")?;
            }
            writeln!(out, "Allocation configuration error!")?;
            return Err(e);
        }
    };
    // The writers' lock is held from reading the state to the last write.
    match transaction::with_writers(backend, |b| {
        plan_and_apply(b, proc, &changes, &origins, out)
    }) {
        Ok(result) => result,
        Err(e) => {
            writeln!(out, "Allocation configuration error!")?;
            Err(e.into())
        }
    }
}

/// [`run_alloc`] under the writers' lock.
fn plan_and_apply<B: Backend>(
    backend: &mut B,
    proc: &ProcFs,
    changes: &[Change],
    origins: &[Origin<'_>],
    out: &mut dyn Write,
) -> Result<()> {
    let plan = match Plan::new(backend, changes) {
        Ok(plan) => plan,
        Err(e) => {
            let origin = &origins[e.index()];
            let e = refused(backend, proc, &changes[e.index()], origin, e);
            if let Some(line) = pqos_line(&e) {
                writeln!(out, "{line}")?;
            }
            if origin.is_definition() {
                writeln!(out, "Allocation configuration error!")?;
            } else {
                writeln!(out, "Allocation association error!")?;
            }
            return Err(e);
        }
    };
    for w in plan.warnings() {
        log::warn!("{w}");
    }
    let outcome = plan.apply(backend);
    let (done, failed, not_undone) = match outcome {
        Outcome::Applied(done) => {
            // Kept before any line reports a write (`--sim`: the state file saved).
            super::commit(backend, out, Some("Allocation configuration error!"))?;
            (done, None, Vec::new())
        }
        Outcome::NotApplied(e) => {
            writeln!(out, "Allocation configuration error!")?;
            return Err(e.into());
        }
        Outcome::RolledBack { done, failed } => (done, Some(failed), Vec::new()),
        Outcome::PartlyChanged {
            done,
            failed,
            not_undone,
        } => (done, Some(failed), not_undone),
    };
    for d in &done {
        applied_line(out, d, &origins[d.change])?;
    }
    if let Some(failed) = failed {
        let e = failed_lines(out, failed, origins)?;
        return Err(undone(e, done.len(), &not_undone));
    }
    if !changes.is_empty() {
        writeln!(out, "Allocation configuration altered.")?;
    }
    Ok(())
}

/// The channels of `-a channel:` and `-a dev:` items (a device resolved to its channels
/// through the platform's IRDT, as pqos's `pqos_devinfo_get_channel_id` does), each with
/// its class and item, in command-line order.
fn io_channels<'a, B: Backend>(
    backend: &mut B,
    req: &'a AllocRequest,
) -> Result<Vec<(rdt_pqos::ChannelId, ClassId, &'a str)>> {
    if req.io.is_empty() {
        return Ok(Vec::new());
    }
    let interface = backend.interface();
    let Some(io) = backend.io_rdt() else {
        let item = &req.io[0].2;
        bail!(
            "\"{item}\": I/O RDT association needs a platform with I/O RDT (L3 non-CPU agent \
             allocation and an ACPI IRDT table) on the MSR or MMIO interface{}",
            if interface == rdt_pqos::Interface::Os {
                " (this platform was opened with the OS interface: use --iface=msr)"
            } else {
                "; this platform has none (pqos -d: `I/O RDT: unsupported`, or no IRDT)"
            }
        );
    };
    let mut out = Vec::new();
    for (target, class, item) in &req.io {
        match *target {
            AssocTarget::Channel(c) => out.push((c, *class, item.as_str())),
            AssocTarget::Device { segment, bdf, vc } => {
                let channels = io
                    .device_channels(segment, bdf, vc)
                    .map_err(|e| anyhow!("Invalid device! \"{item}\": {e}"))?;
                out.extend(channels.into_iter().map(|c| (c, *class, item.as_str())));
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The transaction's changes in pqos's order (definitions as given, then cores, then
/// tasks, then channels), each with where it came from.
fn changes_of<'a, B: Backend>(
    backend: &B,
    defs: &'a [ClassDef],
    req: &'a AllocRequest,
    regions: Option<&(Vec<(CacheDomain, u16)>, usize)>,
    channels: &[(rdt_pqos::ChannelId, ClassId, &'a str)],
) -> Result<(Vec<Change>, Vec<Origin<'a>>)> {
    let caps = backend.capabilities();
    let topo = backend.topology();
    let mut list = Changes::default();
    if req.regions.given() && regions.is_none() {
        bail!(
            "--alloc-domain-id, --alloc-mem-regions and --alloc-{{opt,min,max}}-bw set \
             region-aware MBA, which needs the MMIO interface (--iface=mmio on an RDT 1.3 \
             platform)"
        );
    }
    for def in defs {
        if let (AllocKind::Mba, Some(map)) = (def.kind, regions) {
            list.region_mba(&req.regions, map, def)?;
            continue;
        }
        match def.kind {
            AllocKind::L3 => list.cat(caps, topo, CatResource::L3, def)?,
            AllocKind::L2 => list.cat(caps, topo, CatResource::L2, def)?,
            AllocKind::Mba | AllocKind::MbaMax => list.mba(caps, topo, MbaResource::Mba, def)?,
            AllocKind::Smba => list.mba(caps, topo, MbaResource::Smba, def)?,
        }
    }
    for (cpu, class, item) in &req.assoc {
        let change = Change::Cpu {
            cpu: *cpu,
            class: *class,
        };
        list.push(change, Origin::Core { item });
    }
    for (task, class, item) in &req.tasks {
        let change = Change::Task {
            task: *task,
            class: *class,
        };
        list.push(change, Origin::Task { item });
    }
    for &(channel, class, item) in channels {
        list.push(Change::Channel { channel, class }, Origin::Channel { item });
    }
    Ok((list.changes, list.origins))
}

/// Changes and their origins, side by side.
#[derive(Default)]
struct Changes<'a> {
    changes: Vec<Change>,
    origins: Vec<Origin<'a>>,
}

impl<'a> Changes<'a> {
    fn push(&mut self, change: Change, origin: Origin<'a>) {
        self.changes.push(change);
        self.origins.push(origin);
    }

    /// One change per value and domain of an `llc`/`l2` item.
    fn cat(
        &mut self,
        caps: &Capabilities,
        topo: &Topology,
        resource: CatResource,
        def: &'a ClassDef,
    ) -> Result<()> {
        if caps.cat(resource).is_none() {
            let present = match resource {
                CatResource::L3 => caps.l3_cat.is_present(),
                CatResource::L2 => caps.l2_cat.is_present(),
            };
            let e = unsupported(def, &format!("{resource} CAT"), present);
            if resource == CatResource::L3 && !present {
                // pqos/alloc.c `set_l3_cos`: pqos_l3ca_get fails on the first socket
                // selected (intel-cmt-cat issues 228 and 290, Skylake-SP under resctrl).
                let socket = def
                    .ids
                    .as_ref()
                    .and_then(|ids| ids.first().copied())
                    .or_else(|| topo.cpus().iter().map(|c| c.package).min())
                    .unwrap_or(0);
                return Err(anyhow!(
                    "Failed to retrieve socket {socket} L3 classes! ({e})"
                ));
            }
            return Err(e);
        }
        let targets = cat_targets(caps, topo, resource, def)?;
        for value in &def.values {
            let mask = CacheBitmask::new(value.value)
                .map_err(|e| anyhow!("\"{}\" in \"{}\": {e}", value.text, def.text))?;
            for (id, domain, label) in &targets {
                let change = Change::Cat {
                    resource,
                    domain: *domain,
                    class: value.class,
                    scope: value.scope,
                    mask,
                };
                let origin = Origin::Cat {
                    def,
                    value,
                    id: *id,
                    label: label.clone(),
                };
                self.push(change, origin);
            }
        }
        Ok(())
    }

    /// One change per value and domain of an `mba`/`mba_max` item (`resource` MBA) or an
    /// `smba` item (SMBA: AMD units, in the same L3 domains; pqos `pqos_cpu_get_smba_ids`).
    fn mba(
        &mut self,
        caps: &Capabilities,
        topo: &Topology,
        resource: MbaResource,
        def: &'a ClassDef,
    ) -> Result<()> {
        let name = resource.name();
        let feature = caps.bandwidth(resource);
        let Some(mba) = feature.get() else {
            return Err(unsupported(def, name, feature.is_present()));
        };
        let l3 = L3Domains::new(caps, topo);
        let targets = domain_ids(&l3, def, name)?;
        for value in &def.values {
            // pqos's number: MBps for mba_max, percent on Intel, 1/8 GB/s units on AMD.
            let (limit, unit) = match (def.kind, mba.kind) {
                (AllocKind::MbaMax, _) => {
                    // pqos checks no range with the controller (lib/api.c pqos_mba_set); the
                    // kernel takes any u32.
                    let mbps = u32::try_from(value.value).map_err(|_| {
                        anyhow!(
                            "MBA COS{} rate out of range (from 1-{})! \"{}\" in \"{}\"",
                            value.class,
                            u32::MAX,
                            value.text,
                            def.text
                        )
                    })?;
                    (MbaLimit::MibPerSec(mbps), " MBps")
                }
                (_, MbaKind::IntelDelay { .. }) => (
                    MbaLimit::Percent(u8::try_from(value.value).unwrap_or(u8::MAX)),
                    "%",
                ),
                (_, MbaKind::AmdBandwidth { .. }) => (
                    MbaLimit::AmdUnits(u32::try_from(value.value).unwrap_or(u32::MAX)),
                    "",
                ),
            };
            for (id, domain) in &targets {
                let change = Change::bandwidth(resource, *domain, value.class, limit);
                let origin = Origin::Mba {
                    def,
                    value,
                    label: l3.alloc_label(*id),
                    unit,
                };
                self.push(change, origin);
            }
        }
        Ok(())
    }
}

impl<'a> Changes<'a> {
    /// pqos v26.03 `set_mba_clos` on the MMIO interface: one change per value, domain,
    /// region and control, in that order; the domains and regions must be given, the
    /// regions must exist, the value is the control's (0 ..= the control window, checked by
    /// the plan).
    fn region_mba(
        &mut self,
        opts: &crate::command::RegionAlloc,
        (domains, num_regions): &(Vec<(CacheDomain, u16)>, usize),
        def: &'a ClassDef,
    ) -> Result<()> {
        match (opts.domains.is_empty(), opts.regions.is_empty()) {
            (true, true) => bail!(
                "--alloc-domain-id & --alloc-mem-region options are missing in command line. \
                 Failed to set MBA configuration!"
            ),
            (true, false) => bail!(
                "--alloc-domain-id option is missing in command line. Failed to set MBA \
                 configuration!"
            ),
            (false, true) => bail!(
                "--alloc-mem-region option is missing in command line. Failed to set MBA \
                 configuration!"
            ),
            (false, false) => {}
        }
        if def.ids.is_some() {
            bail!(
                "\"{}\": on the MMIO interface --alloc-domain-id selects the domains, not @IDS",
                def.text
            );
        }
        if let Some(r) = opts
            .regions
            .iter()
            .find(|r| usize::from(**r) >= *num_regions)
        {
            bail!(
                "Memory region {r} is not supported on this platform, available regions are 0 \
                 to {}. Failed to set MBA configuration!",
                num_regions.saturating_sub(1)
            );
        }
        let controls: &[rdt_pqos::BwControl] = if opts.controls.is_empty() {
            &rdt_pqos::BwControl::ALL
        } else {
            &opts.controls
        };
        for value in &def.values {
            let bw = u16::try_from(value.value).map_err(|_| {
                anyhow!(
                    "\"{}\" in \"{}\": a region MBA value is 0 to 0x1ff",
                    value.text,
                    def.text
                )
            })?;
            for &id in &opts.domains {
                let Some((domain, _)) = domains.iter().find(|(_, d)| *d == id) else {
                    let known: Vec<String> = domains.iter().map(|(_, d)| d.to_string()).collect();
                    bail!(
                        "Domain id {id} is unavailable (the ERDT's CPU domains: {})",
                        known.join(",")
                    );
                };
                for &region in &opts.regions {
                    for &control in controls {
                        let change = Change::RegionMba {
                            domain: *domain,
                            class: value.class,
                            bw: rdt_pqos::RegionBw {
                                region: rdt_pqos::MemRegion(region),
                                control,
                                value: bw,
                            },
                        };
                        self.push(
                            change,
                            Origin::RegionMba {
                                def,
                                value,
                                domain_id: id,
                            },
                        );
                    }
                }
            }
        }
        Ok(())
    }
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

/// The (user id, cache domain) pairs of an L3 or MBA item (`@IDS` or every domain).
fn domain_ids(l3: &L3Domains, def: &ClassDef, what: &str) -> Result<Vec<(u32, CacheDomain)>> {
    match &def.ids {
        // pqos/alloc.c: every id of `pqos_cpu_get_l3cat_ids` / `pqos_cpu_get_mba_ids`, in
        // its order (CPU enumeration, not ascending)
        None => Ok(l3.cpu_order.clone()),
        Some(ids) => ids
            .iter()
            .map(|&id| {
                l3.find(id).map(|d| (id, d)).ok_or_else(|| {
                    anyhow!(
                        "\"{}\": {what} resource id {id} is not present ({what} ids on this \
                         platform: {})",
                        def.text,
                        l3.ids()
                    )
                })
            })
            .collect(),
    }
}

/// The (user id, cache domain, `-e` line label) a CAT item applies to.
fn cat_targets(
    caps: &Capabilities,
    topo: &Topology,
    resource: CatResource,
    def: &ClassDef,
) -> Result<Vec<(u32, CacheDomain, String)>> {
    if resource == CatResource::L3 {
        let l3 = L3Domains::new(caps, topo);
        return Ok(domain_ids(&l3, def, "L3")?
            .into_iter()
            .map(|(id, d)| (id, d, l3.alloc_label(id)))
            .collect());
    }
    // pqos/alloc.c: `pqos_cpu_get_l2ids`'s order (CPU enumeration)
    let l2 = topo.l2_domains_in_cpu_order();
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
    Ok(pick
        .into_iter()
        .map(|d| (d.get(), d, format!("L2ID {}", d.get())))
        .collect())
}

/// A change the plan refused, in pqos's words for what the user wrote.
fn refused<B: Backend>(
    backend: &B,
    proc: &ProcFs,
    change: &Change,
    origin: &Origin<'_>,
    e: PlanError<B::Error>,
) -> anyhow::Error {
    let what = match (change, origin) {
        (Change::Cpu { cpu, .. }, Origin::Core { item }) => format!("core {cpu} in \"{item}\""),
        (Change::Task { task, .. }, Origin::Task { item }) => {
            format!("task {task} in \"{item}\"")
        }
        (Change::Channel { channel, .. }, Origin::Channel { item }) => {
            format!("I/O RDT channel {channel} in \"{item}\"")
        }
        _ => "the current classes".to_owned(),
    };
    let error = match e {
        PlanError::Invalid { error, .. } => error,
        PlanError::Read { error, .. } => {
            return anyhow::Error::new(error).context(format!("reading the class of {what}"));
        }
    };
    match (origin, &error) {
        (_, RequestError::ForeignGroup { group, .. }) => anyhow!(
            "{what} is in resctrl group {group}, which pqos does not manage: another tool \
             created `{group}`, so pqos leaves the group, its CPUs and its tasks alone (change \
             them with that tool)"
        ),
        (Origin::Cat { .. } | Origin::Mba { .. }, _) => definition_refused(change, origin, error),
        (Origin::RegionMba { def, value, .. }, _) => {
            anyhow!("\"{}\" in \"{}\": {error}", value.text, def.text)
        }
        (Origin::Core { item } | Origin::Task { item } | Origin::Channel { item }, _) => {
            association_refused(backend, proc, change, item, error)
        }
    }
}

/// The line pqos prints on stdout for a refusal whose message starts with it (pqos/alloc.c
/// `set_l3_cos`: `Invalid class ID: 9!`, `Failed to set L3 class on socket 0, CDP not
/// enabled!`, `Failed to retrieve socket 0 L3 classes!` where L3 CAT is absent; `set_allocation_assoc`: `Core number or class id is out of bounds!`, ...),
/// before its `Allocation configuration error!`. The rest of the message (which token, why)
/// is ours and goes to stderr.
fn pqos_line(e: &anyhow::Error) -> Option<String> {
    const PQOS_LINES: [&str; 10] = [
        "Invalid class ID: ",
        "Failed to retrieve socket ",
        "Failed to set ",
        "MBA controller not supported!",
        "MBA controller requested but not enabled!",
        "Expected MBA controller but not requested!",
        "Core number or class id is out of bounds!",
        "Task ID number or class id is out of bounds!",
        "Channel or class id is out of bounds!",
        "Invalid device!",
    ];
    let text = e.to_string();
    let end = text.find('!')? + 1;
    let line = &text[..end];
    PQOS_LINES
        .iter()
        .any(|p| line.starts_with(p))
        .then(|| line.to_owned())
}

/// A refused `-e` value, in pqos's words.
fn definition_refused(change: &Change, origin: &Origin<'_>, error: RequestError) -> anyhow::Error {
    let (Origin::Cat { def, value, .. } | Origin::Mba { def, value, .. }) = origin else {
        return anyhow!("{error}");
    };
    let (token, item, class) = (&value.text, &def.text, value.class);
    match error {
        RequestError::CdpMismatch { resource, .. } => {
            let id = match origin {
                Origin::Cat { id, .. } => *id,
                _ => 0,
            };
            let (what, unit) = match resource {
                CatResource::L3 => ("L3", "socket"),
                CatResource::L2 => ("L2", "cluster"),
            };
            anyhow!(
                "Failed to set {what} class on {unit} {id}, CDP not enabled! \"{token}\" in \
                 \"{item}\": the d/c suffix sets a CDP data/code mask; turn CDP on with -R \
                 {}cdp-on",
                what.to_ascii_lowercase()
            )
        }
        RequestError::Limit(LimitError::ClassOutOfRange {
            num_classes,
            resource,
            ..
        }) if resource == Capabilities::OS_CLASS_LIMIT => anyhow!(
            "Invalid class ID: {class}! \"{token}\" in \"{item}\": resctrl has {num_classes} \
             CLOSIDs (COS0-COS{}), the fewest num_closids of its resources",
            num_classes.saturating_sub(1)
        ),
        RequestError::Limit(e @ LimitError::ClassOutOfRange { .. }) => {
            anyhow!("Invalid class ID: {class}! \"{token}\" in \"{item}\": {e}")
        }
        RequestError::Limit(LimitError::MbaOutOfRange { max, .. }) => {
            // pqos's text for SMBA too (lib/api.c pqos_mba_set checks both alike).
            anyhow!("MBA COS{class} rate out of range (from 1-{max})! \"{token}\" in \"{item}\"")
        }
        RequestError::MbaUnit { mismatch, .. } if matches!(change, Change::Mba { .. }) => {
            match mismatch {
                MbaUnitMismatch::MibPerSecOnMsr => anyhow!(
                    "MBA controller not supported! \"{item}\": mba_max sets MBps through the \
                     kernel's MBA software controller, which needs the OS interface \
                     (--iface=os) on a resctrl mounted with -o mba_MBps"
                ),
                MbaUnitMismatch::ControllerOff => anyhow!(
                    "MBA controller requested but not enabled! \"{item}\": resctrl is not \
                     mounted with -o mba_MBps (pqos -R mbaCtrl-on remounts it so); use \
                     mba:COS=PERCENT meanwhile"
                ),
                MbaUnitMismatch::ControllerOn => anyhow!(
                    "Expected MBA controller but not requested! \"{item}\": resctrl is mounted \
                     with mba_MBps, so MBA limits are in MBps: use mba_max:COS=MBPS"
                ),
                m => anyhow!("\"{item}\": {m}"),
            }
        }
        e => anyhow!("\"{token}\" in \"{item}\": {e}"),
    }
}

/// A refused `-a` item, in pqos's words.
fn association_refused<B: Backend>(
    backend: &B,
    proc: &ProcFs,
    change: &Change,
    item: &str,
    error: RequestError,
) -> anyhow::Error {
    let (kind, subject, class) = match change {
        Change::Cpu { cpu, class } => ("Core", format!("Core {cpu}"), *class),
        Change::Task { task, class } => ("Task ID", format!("Task {task}"), *class),
        // pqos/alloc.c set_allocation_assoc: PQOS_RETVAL_PARAM of
        // pqos_alloc_assoc_set_channel/_dev
        Change::Channel { .. } => {
            return anyhow!("Channel or class id is out of bounds! \"{item}\": {error}");
        }
        _ => return anyhow!("\"{item}\": {error}"),
    };
    match error {
        RequestError::NoSuchCpu(_) => anyhow!(
            "{kind} number or class id is out of bounds! {subject} in \"{item}\" is not present \
             (cores on this platform: {})",
            backend.topology().all_cpus()
        ),
        RequestError::NoSuchTask(task) => anyhow!(
            "{kind} number or class id is out of bounds! {subject} in \"{item}\" does not exist \
             (no {}/{task})",
            proc.root().display()
        ),
        RequestError::Limit(LimitError::ClassOutOfRange { num_classes, .. }) => anyhow!(
            "{kind} number or class id is out of bounds! COS{class} in \"{item}\" is beyond the \
             {num_classes} classes of this platform (COS0-COS{})",
            num_classes.saturating_sub(1)
        ),
        RequestError::Limit(LimitError::Unsupported(_)) => anyhow!(
            "Allocation capability not detected! (no L3 CAT, L2 CAT or MBA on this platform)"
        ),
        RequestError::NeedsOsInterface { .. } => anyhow!(
            "\"{item}\": associating tasks needs the OS (resctrl) interface (--iface=os); this \
             platform was opened with the MSR interface, which associates cores only"
        ),
        e => anyhow!("\"{item}\": {e}"),
    }
}

/// pqos's line for a write that was made.
fn applied_line(out: &mut dyn Write, d: &Done, origin: &Origin<'_>) -> std::io::Result<()> {
    match (&d.step, origin) {
        (
            Step::Cat {
                resource, after, ..
            },
            Origin::Cat { label, .. },
        ) => {
            let name = cat_name(*resource);
            match after.mask {
                CatMask::Unified(m) => {
                    writeln!(out, "{label} {name} COS{} => MASK {m:#x}", after.class)
                }
                CatMask::Cdp { data, code } => writeln!(
                    out,
                    "{label} {name} COS{} => DATA {data:#x},CODE {code:#x}",
                    after.class
                ),
            }
        }
        (
            Step::Mba {
                resource, after, ..
            },
            Origin::Mba { label, unit, .. },
        ) => {
            if let MbaLimit::MibPerSec(v) = after.limit {
                // pqos/alloc.c set_mba_clos with ctrl: `%u MBps`, no "applied" part.
                writeln!(out, "{label} {resource} COS{} => {v} MBps", after.class)
            } else {
                // set_mba_clos, set_smba_clos: `%s %u SMBA COS%u => %u requested, ...`
                let got = d.applied.unwrap_or(after.limit).value();
                writeln!(
                    out,
                    "{label} {resource} COS{} => {}{unit} requested, {got}{unit} applied",
                    after.class,
                    after.limit.value()
                )
            }
        }
        (Step::RegionMba { class, after, .. }, Origin::RegionMba { domain_id, .. }) => {
            // pqos v26.03 pqos/alloc.c print_mmio_mba_log
            let control = match after.control {
                rdt_pqos::BwControl::Optimal => "Optimal",
                rdt_pqos::BwControl::Min => "Minimum",
                rdt_pqos::BwControl::Max => "Maximum",
            };
            writeln!(
                out,
                "Domain ID {domain_id} MBA COS{class} Memory Region {} {control} Bandwidth=> \
                 {:#x} requested, {:#x} applied",
                after.region, after.value, after.value
            )
        }
        _ => Ok(()),
    }
}

const fn cat_name(resource: CatResource) -> &'static str {
    match resource {
        CatResource::L3 => "L3CA",
        CatResource::L2 => "L2CA",
    }
}

/// pqos's lines for the write that failed, and its error.
fn failed_lines<E: BackendError>(
    out: &mut dyn Write,
    failed: Failed<E>,
    origins: &[Origin<'_>],
) -> Result<anyhow::Error> {
    let error = anyhow::Error::new(failed.error);
    Ok(match (&failed.step, &origins[failed.change]) {
        (
            Step::Cat {
                resource, after, ..
            },
            Origin::Cat { label, .. },
        ) => {
            let name = cat_name(*resource);
            writeln!(out, "{label} {name} COS{} - FAILED!", after.class)?;
            writeln!(out, "Allocation configuration error!")?;
            error.context(format!("setting {label} {name} COS{}", after.class))
        }
        (
            Step::Mba {
                resource, after, ..
            },
            Origin::Mba { label, .. },
        ) => {
            writeln!(out, "{label} {resource} COS{} - FAILED!", after.class)?;
            writeln!(out, "Allocation configuration error!")?;
            error.context(format!("setting {label} {resource} COS{}", after.class))
        }
        (Step::RegionMba { class, .. }, Origin::RegionMba { domain_id, .. }) => {
            // pqos v26.03 set_mba_clos on MMIO: `Domain ID %u MBA COS%u - FAILED!`
            writeln!(out, "Domain ID {domain_id} MBA COS{class} - FAILED!")?;
            writeln!(out, "Allocation configuration error!")?;
            error.context(format!("setting Domain ID {domain_id} MBA COS{class}"))
        }
        (step, origin) => {
            let (what, class, item) = match (step, origin) {
                (Step::Cpu { cpu, after, .. }, Origin::Core { item }) => {
                    (format!("core {cpu}"), *after, *item)
                }
                (Step::Task { task, after, .. }, Origin::Task { item }) => {
                    (format!("task {task}"), *after, *item)
                }
                (
                    Step::Channel {
                        channel,
                        after: Some(after),
                        ..
                    },
                    Origin::Channel { item },
                ) => (format!("I/O RDT channel {channel}"), *after, *item),
                (step, _) => (step.to_string(), ClassId::new(0), ""),
            };
            writeln!(
                out,
                "Setting allocation class of service association failed!"
            )?;
            writeln!(out, "Allocation association error!")?;
            error.context(format!("associating {what} with COS{class} (\"{item}\")"))
        }
    })
}

/// Adds to `err` whether the writes before the failure were undone.
fn undone<E: std::error::Error + Send + Sync + 'static>(
    err: anyhow::Error,
    done: usize,
    not_undone: &[(Step, E)],
) -> anyhow::Error {
    if done == 0 {
        return err;
    }
    if not_undone.is_empty() {
        err.context(format!(
            "nothing was changed: the {done} write(s) this command made before the failure were \
             undone"
        ))
    } else {
        let failed: Vec<String> = not_undone
            .iter()
            .map(|(s, e)| format!("{s}: {e}"))
            .collect();
        err.context(format!(
            "the configuration is partly changed: undoing the writes made before the failure \
             failed for {}",
            failed.join("; ")
        ))
    }
}

/// How `--apply` runs: `--dry-run`, `--remove`, `--group-prefix`, `--prune`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyMode {
    /// `--dry-run`: print the writes, make none.
    pub dry_run: bool,
    /// `--remove`: take the file's named classes away ([`ConfigFile::remove`]).
    pub remove: bool,
    /// `--group-prefix P`, `--prune`: goresctrl's group options
    /// ([`ConfigFile::plan_with`]).
    pub groups: GroupOptions,
    /// `--adopt OWNER`: the groups with the prefix OWNER made are adopted
    /// ([`ConfigFile::plan_adopting`]).
    pub adopt: Option<rdt_pqos::config::goresctrl::PreviousOwner>,
}

/// `--apply FILE [--remove] [--dry-run]`: the configuration (named classes in TOML/JSON,
/// or goresctrl's YAML) as one transaction, or with `--remove` the transaction that takes
/// its named classes away again. Prints one line per write
/// (`pipeline (COS1): L3 domain 0: 0x7fff -> 0x7ff0`), then what happened; with
/// `--dry-run` nothing is written. The plan's warnings (a name that is not ours, for
/// `--remove`) are logged.
///
/// # Errors
/// The file cannot be read or does not fit the platform (naming file, line and key;
/// nothing is written), or a write failed (the writes before it are undone).
pub fn run_apply<B: Backend>(
    backend: &mut B,
    file: &std::path::Path,
    mode: &ApplyMode,
    proc: &ProcFs,
    out: &mut dyn Write,
) -> Result<()> {
    let config = ConfigFile::load(file)?;
    // The writers' lock is held from reading the state to the last write.
    transaction::with_writers(backend, |backend| {
        let planned = if mode.remove {
            config.remove(backend, &mode.groups)
        } else {
            config.plan_adopting(backend, proc, &mode.groups, mode.adopt)
        };
        let planned = planned.map_err(|e| match e {
            ConfigPlanError::Config(e) => anyhow::Error::new(e),
            ConfigPlanError::Backend(e) => anyhow::Error::new(e).context("reading the platform"),
        })?;
        for w in &planned.warnings {
            log::warn!("{w}");
        }
        let lines = planned.lines();
        for line in &lines {
            writeln!(out, "{line}")?;
        }
        if lines.is_empty() {
            writeln!(out, "Nothing to change.")?;
            return Ok(());
        }
        if mode.dry_run {
            writeln!(
                out,
                "{} write(s) planned; dry run: nothing written.",
                lines.len()
            )?;
            return Ok(());
        }
        match planned.plan.apply(backend).into_result() {
            Ok(done) => {
                super::commit(backend, out, Some("Allocation configuration error!"))?;
                writeln!(out, "Applied {} write(s).", done.len())?;
                Ok(())
            }
            Err(e) => {
                writeln!(out, "Allocation configuration error!")?;
                Err(anyhow::Error::new(e).context(format!("applying {}", file.display())))
            }
        }
    })?
}

/// `-R [CFG]`: pqos's `Allocation reset successful` or `Allocation reset failed!` on
/// `out`. The reset also gives up this library's named classes (the plan's
/// [`Step::Release`]s); the names it gave up are told on `notes` (stderr), so that stdout
/// stays pqos's one line: `NOTE: named classes removed: pipeline (COS1), noisy (COS2)`.
/// A named class kept (its resctrl group holds monitor groups) is a logged warning.
///
/// # Errors
/// A requested setting the platform lacks, or a failed write.
pub fn run_reset_allocation<B: Backend>(
    backend: &mut B,
    cfg: AllocReset,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<()> {
    let planned = transaction::with_writers(backend, |b| {
        Plan::new(b, &[Change::Reset(cfg)]).map(|plan| {
            for w in plan.warnings() {
                log::warn!("{w}");
            }
            plan.apply(b)
        })
    });
    let outcome = match planned {
        Ok(planned) => planned,
        Err(e) => Ok(Outcome::NotApplied(e)),
    };
    let result = match outcome {
        Err(PlanError::Invalid {
            error: RequestError::FeatureUnsupported { feature, .. },
            ..
        }) => Err(if feature == "Allocation" {
            anyhow!("Allocation capability not detected!")
        } else {
            anyhow!("{feature} requested but not supported by the platform!")
        }),
        Err(e) => Err(anyhow::Error::new(e).context("resetting allocation")),
        Ok(outcome) => outcome
            .into_result()
            .map_err(|e| anyhow::Error::new(e).context("resetting allocation")),
    };
    // Kept before the success line (`--sim`: the state file saved).
    let result = result.and_then(|done| {
        super::commit(backend, &mut std::io::sink(), None)?;
        Ok(done)
    });
    match result {
        Ok(done) => {
            writeln!(out, "Allocation reset successful")?;
            let removed: Vec<String> = done
                .iter()
                .filter_map(|d| match &d.step {
                    Step::Release { class, name, .. } => {
                        Some(format!("{} (COS{class})", rdt_pqos::Shown(name)))
                    }
                    _ => None,
                })
                .collect();
            if !removed.is_empty() {
                writeln!(notes, "NOTE: named classes removed: {}", removed.join(", "))?;
            }
            Ok(())
        }
        Err(e) => {
            writeln!(out, "Allocation reset failed!")?;
            Err(e)
        }
    }
}

/// `-r [CFG]`: pqos's `CMT/MBM reset successful` or `CMT/MBM reset failed!`. What `cfg`
/// asks the platform cannot do (I/O RDT monitoring, an SNC mode) is refused before any
/// write with pqos's line (lib/hw_monitoring.c `hw_mon_reset`: `I/O RDT monitoring
/// requested but not supported by the platform!`, `SNC requested but not supported by the
/// platform!`).
///
/// # Errors
/// No monitoring capability, a refused `cfg`, or a failed write.
pub fn run_reset_monitoring<B: Backend>(
    backend: &mut B,
    cfg: rdt_pqos::MonReset,
    out: &mut dyn Write,
) -> Result<()> {
    let result = if backend.capabilities().monitoring.is_present() {
        match backend.reset_monitoring_with(&cfg) {
            Ok(()) => Ok(()),
            Err(e) => match e.request() {
                Some(RequestError::FeatureUnsupported { feature, reason }) => {
                    if let Some(why) = reason {
                        log::info!("{feature}: {why}");
                    }
                    Err(anyhow!(
                        "{feature} requested but not supported by the platform!"
                    ))
                }
                _ => Err(anyhow::Error::new(e).context("resetting monitoring")),
            },
        }
    } else {
        Err(anyhow!("Monitoring capability not detected!"))
    };
    let result = result.and_then(|()| super::commit(backend, &mut std::io::sink(), None));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use rdt_pqos::fake::FakeBackend;
    use rdt_pqos::{FeatureSetting, LogicalCpu};

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
        crate::commands::show::run_show(&mut b, false, false, &mut show).unwrap();
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
        // arrange: core 2 starts in COS3; the 3rd write (core 3, after the MBA limit and
        // cores 1-2 in one write) is refused
        let mut b = FakeBackend::intel_1s();
        b.associate(LogicalCpu::new(2), ClassId::new(3)).unwrap();
        b.fail_nth_write(3);
        // act
        let mut out = Vec::new();
        let r = run_alloc(
            &mut b,
            &request(&["-e", "mba:1=50", "-a", "llc:1=1-2;llc:2=3"]),
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
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        run_reset_allocation(&mut b, AllocReset::default(), &mut out, &mut notes).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Allocation reset successful\n"
        );
        assert!(notes.is_empty(), "no named class to remove");
        assert_eq!(
            b.l3_mask(0, 1),
            CatMask::Unified(CacheBitmask::new(0xfffff).unwrap())
        );
        let mut out = Vec::new();
        let cfg = AllocReset {
            l2_cdp: FeatureSetting::On,
            ..AllocReset::default()
        };
        let e = run_reset_allocation(&mut b, cfg, &mut out, &mut notes)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "L2 CDP requested but not supported by the platform!");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Allocation reset failed!\n"
        );
    }

    #[test]
    fn reset_allocation_gives_up_named_classes_and_says_so_on_the_notes_only() {
        // arrange: two named classes applied
        let mut b = FakeBackend::broadwell_2s();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "[[class]]\nname = \"db\"\nl3 = { ways = 4 }\ncpus = \"2-3\"\n\n\
             [[class]]\nname = \"web\"\nl3 = { ways = 2 }\ncpus = \"4\"\n",
        )
        .unwrap();
        let mut out = Vec::new();
        run_apply(
            &mut b,
            &file,
            &ApplyMode::default(),
            &ProcFs::host(),
            &mut out,
        )
        .unwrap();
        assert_eq!(b.own_class_names().len(), 2);
        // act
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        run_reset_allocation(&mut b, AllocReset::default(), &mut out, &mut notes).unwrap();
        // assert: pqos's line alone on stdout, the names on the notes, none left
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Allocation reset successful\n"
        );
        assert_eq!(
            String::from_utf8(notes).unwrap(),
            "NOTE: named classes removed: db (COS1), web (COS2)\n"
        );
        assert!(b.own_class_names().is_empty() && b.class_names().is_empty());
        assert_eq!([2, 3, 4].map(|c| b.class_of_cpu(c)), [0, 0, 0]);
    }

    #[test]
    fn apply_remove_takes_away_the_files_classes_only_and_dry_run_writes_nothing() {
        // arrange: `db` applied; `other` is named by the file but was never applied
        let mut b = FakeBackend::broadwell_2s();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "[[class]]\nname = \"db\"\nl3 = { ways = 4 }\ncpus = \"2-3\"\n",
        )
        .unwrap();
        let proc = ProcFs::host();
        let before = rdt_pqos::transaction::AllocState::read(&mut b).unwrap();
        run_apply(&mut b, &file, &ApplyMode::default(), &proc, &mut Vec::new()).unwrap();
        std::fs::write(
            &file,
            "[[class]]\nname = \"db\"\n\n[[class]]\nname = \"other\"\n",
        )
        .unwrap();
        let remove = |dry_run| ApplyMode {
            dry_run,
            remove: true,
            ..ApplyMode::default()
        };
        // act: a dry run, then the removal
        let writes = b.writes.len();
        let mut out = Vec::new();
        run_apply(&mut b, &file, &remove(true), &proc, &mut out).unwrap();
        let dry = String::from_utf8(out).unwrap();
        assert!(
            dry.ends_with("dry run: nothing written.\n")
                && dry.contains("db (COS1): CPU 2 to COS0\n"),
            "{dry}"
        );
        assert_eq!(b.writes.len(), writes, "a dry run writes nothing");
        let mut out = Vec::new();
        run_apply(&mut b, &file, &remove(false), &proc, &mut out).unwrap();
        // assert
        let got = String::from_utf8(out).unwrap();
        assert!(
            got.ends_with("db (COS1): named class removed\nApplied 5 write(s).\n"),
            "{got}"
        );
        assert_eq!(
            rdt_pqos::transaction::AllocState::read(&mut b).unwrap(),
            before
        );
        assert!(b.own_class_names().is_empty());
        let mut out = Vec::new();
        run_apply(&mut b, &file, &remove(false), &proc, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "Nothing to change.\n");
    }

    #[test]
    fn reset_monitoring_prints_pqos_line() {
        let mut b = FakeBackend::broadwell_2s();
        let mut out = Vec::new();
        run_reset_monitoring(&mut b, rdt_pqos::MonReset::default(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "CMT/MBM reset successful\n"
        );
    }

    #[test]
    fn no_success_line_is_printed_for_a_change_the_backend_could_not_keep() {
        // arrange: a backend whose writes work but cannot be kept (`--sim` with a state
        // file that cannot be written)
        let mut b = FakeBackend::broadwell_2s();
        b.fail_commit(true);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[[class]]\nname = \"db\"\nl3 = { ways = 4 }\n").unwrap();
        // act
        let (alloc, alloc_out) = run(&mut b, &["-e", "llc:1=0xf", "-a", "llc:1=2"]);
        let mut apply_out = Vec::new();
        let apply = run_apply(
            &mut b,
            &file,
            &ApplyMode::default(),
            &ProcFs::host(),
            &mut apply_out,
        );
        let (mut reset_out, mut notes) = (Vec::new(), Vec::new());
        let reset = run_reset_allocation(&mut b, AllocReset::default(), &mut reset_out, &mut notes);
        let mut mon_out = Vec::new();
        let mon = run_reset_monitoring(&mut b, rdt_pqos::MonReset::default(), &mut mon_out);
        // assert: each fails, says pqos's failure line, and claims no write
        let outs = [
            (
                alloc,
                alloc_out.into_bytes(),
                "Allocation configuration error!\n",
            ),
            (apply, apply_out, "Allocation configuration error!\n"),
            (reset, reset_out, "Allocation reset failed!\n"),
            (mon, mon_out, "CMT/MBM reset failed!\n"),
        ];
        for (result, out, failed) in outs {
            let out = String::from_utf8(out).unwrap();
            let e = format!("{:#}", result.unwrap_err());
            assert!(e.contains("cannot be kept"), "{e}");
            assert!(out.ends_with(failed), "{out}");
            for claim in ["altered", "=> MASK", "COS1 =>", "Applied", "successful"] {
                assert!(!out.contains(claim), "{claim}: {out}");
            }
        }
        assert!(notes.is_empty(), "no name is said to be removed");
        // and once the backend keeps writes, the same commands say so
        b.fail_commit(false);
        let (r, out) = run(&mut b, &["-e", "llc:1=0xf"]);
        r.unwrap();
        assert!(
            out.ends_with("Allocation configuration altered.\n"),
            "{out}"
        );
    }
}
