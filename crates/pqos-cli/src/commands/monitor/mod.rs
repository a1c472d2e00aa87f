//! Monitoring (`-m`, `-p`, `-t`, `-i`, `-T`, `-P`, `-o`, `-u`): start the groups once, then
//! per tick poll and print, and stop the groups at the end, on error, on SIGINT/SIGTERM/
//! SIGHUP and when stdout is closed.
//!
//! Output formats follow pqos/monitor_text.c, monitor_csv.c and monitor_xml.c (v25.04;
//! spec §2.3-2.5), plus JSON Lines ([`output::Json`]). As in v25.04 the first sample is
//! printed at the start, with IPC 0.00 and misses 0, and bandwidths 0.0 on the MSR
//! interface; on the OS interface its bandwidths are over the time since the groups
//! started: pqos's format, applied by [`output::Cells::pqos_first_sample`] (the library's
//! first poll has real values since the start). Samples are due at
//! `k × interval` from the start ([`Schedule`]); MB/s use the measured time between two
//! polls, not the nominal interval (docs/compat.md).
//!
//! Layout: [`clock`] (time and waiting), [`output`] (the formats), [`proc`] (procfs for PID
//! mode).

pub mod clock;
pub mod output;
pub mod proc;

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use anyhow::{Context as _, Result, anyhow, bail};
use rdt_pqos::{
    Backend, BackendExt, Interface, LogicalCpu, MonEvents, MonGroupId, Monitoring, RequestError,
    TaskId,
};

#[cfg(feature = "sim")]
pub use self::clock::{AdvancingClock, VirtualClock};
pub use self::clock::{Clock, RealClock, Schedule};
use self::output::{
    Cells, Columns, Csv, Format, Json, LlcUnit, MAX_REGION_COLUMNS, RegionColumns, Row, Sample,
    TermSize, Text, Xml,
};
use self::proc::GroupThreads;
use super::Context;
use crate::args::FileType;
use crate::command::MonitorRequest;
use crate::grammar::{AssocTarget, ChannelGroupSpec, MonGroupSpec, SocketGroupSpec};
use rdt_pqos::proc::ProcFs;

/// The group's events as pqos chooses them ([`MonEvents::select`]), with pqos's words for
/// an event the platform does not count.
fn setup_events(
    desc: &str,
    requested: MonEvents,
    supported: MonEvents,
    excluded: MonEvents,
) -> Result<MonEvents> {
    requested.select(supported, excluded).map_err(|e| match e {
        RequestError::UnsupportedEvent { event, .. } => {
            let token = match event {
                MonEvents::LLC_OCCUPANCY => "llc",
                MonEvents::MBM_LOCAL => "mbl",
                MonEvents::MBM_REMOTE => "mbr",
                _ => "mbt",
            };
            anyhow!(
                "monitoring event {token} ({}) of group \"{desc}\" is not supported on this \
                     platform",
                event.describe()
            )
        }
        e => e.into(),
    })
}

/// What a group monitors: cores, processes or (uncore) sockets.
#[derive(Clone, Debug)]
enum Target {
    Cores(rdt_pqos::CpuSet),
    Pids(Vec<TaskId>),
    Sockets(Vec<u32>),
    Channels(Vec<rdt_pqos::ChannelId>),
}

/// A group to start: its label, what it monitors and the events asked for.
#[derive(Clone, Debug)]
struct GroupPlan {
    desc: String,
    target: Target,
    /// The events shown for this group (IPC and misses only where a PMU counts them).
    events: MonEvents,
}

/// A started group.
#[derive(Debug)]
struct Started<'a> {
    id: MonGroupId,
    plan: &'a GroupPlan,
    /// Core mode: the lowest core (rows are sorted by it).
    first_cpu: LogicalCpu,
    /// PID mode: the threads' `stat` files for the `CORE` cell.
    threads: Option<GroupThreads>,
}

/// pqos's top-pids mode (`-p` without a value; `pqos/monitor.c` `selfn_monitor_top_pids`):
/// prints `Monitoring top-pids enabled`, lets the library choose the 10 busiest processes
/// over 1.2 s ([`rdt_pqos::proc::ProcFs::top_pids`]) and monitors each as a group of its own
/// with every event (`PQOS_MON_EVENT_ALL`), rows sorted by LLC occupancy (`-T`).
fn top_pids_request(
    req: &MonitorRequest,
    proc: &rdt_pqos::proc::ProcFs,
    out: &mut dyn Write,
) -> Result<MonitorRequest> {
    /// `PID_CPU_TIME_DELAY_USEC`.
    const DELAY: std::time::Duration = std::time::Duration::from_millis(1200);
    /// `TOP_PROC_MAX`.
    const TOP: usize = 10;
    writeln!(out, "Monitoring top-pids enabled")?;
    out.flush()?;
    let pids = proc
        .top_pids(DELAY, TOP)
        .context("Getting processor usage statistic failed!")?;
    if pids.is_empty() {
        bail!(
            "top-pids mode: no running process found in {}",
            proc.root().display()
        );
    }
    let mut r = req.clone();
    r.top = true;
    r.top_pids = false;
    r.pid_groups = pids
        .into_iter()
        .map(|pid| crate::grammar::PidGroupSpec {
            desc: pid.to_string(),
            pids: vec![pid],
            events: MonEvents::PQOS_ALL,
        })
        .collect();
    Ok(r)
}

/// Runs monitoring until `-t` has elapsed, a stop signal arrives or the output is closed.
///
/// # Errors
/// No monitoring capability, an unsupported event, an absent core, a process that does not
/// exist, an output file that cannot be opened (or is a symlink), a group that cannot start
/// (groups already started are stopped again), a failed poll, or an output error. Groups
/// are stopped and the output closed (XML `</records>`) on every one of these exits.
pub fn run_monitor<B: Backend>(
    backend: &mut B,
    req: &MonitorRequest,
    ctx: &mut Context<'_>,
    out: &mut dyn Write,
) -> Result<()> {
    let top;
    let req = if req.top_pids {
        top = top_pids_request(req, ctx.proc, out)?;
        &top
    } else {
        req
    };
    let caps = backend.capabilities().clone();
    if req.uncore_groups.is_some() && !backend.interface().uses_msrs() {
        // said before anything else: resctrl may not even monitor, and would not help
        return Err(anyhow!(RequestError::NeedsMsrInterface {
            operation: "uncore monitoring (--mon-uncore)",
            interface: backend.interface(),
        })
        .context("Uncore monitoring start error"));
    }
    if !caps.monitoring.is_present() {
        bail!("Monitoring capability not detected!");
    }
    let plans = if req.channel_groups.is_empty() {
        group_plans(backend, req)?
    } else {
        channel_plans(backend, &req.channel_groups)?
    };
    let proc = ctx.proc;
    validate_targets(backend, proc, &plans)?;
    check_rmid_capacity(backend, &plans)?;

    let llc = if req.llc_percent {
        let total = caps.l3_cache.map(|g| g.total_size()).filter(|t| *t > 0);
        LlcUnit::Percent {
            l3_bytes: total
                .ok_or_else(|| anyhow!("-P: the L3 cache size of this platform is unknown"))?,
        }
    } else {
        LlcUnit::KiB
    };
    let events = plans.iter().fold(MonEvents::empty(), |a, g| a | g.events);
    let cols = Columns {
        events,
        llc,
        pid_mode: !req.pid_groups.is_empty(),
        socket_mode: req.uncore_groups.is_some(),
        channel_mode: !req.channel_groups.is_empty(),
        regions: region_columns(backend, req, events)?,
    };
    // PID mode: every thread's stat file, opened before anything is started.
    let mut threads: Vec<Option<GroupThreads>> = Vec::with_capacity(plans.len());
    for g in &plans {
        threads.push(match &g.target {
            Target::Cores(_) | Target::Sockets(_) | Target::Channels(_) => None,
            Target::Pids(pids) => Some(GroupThreads::open(proc, pids).with_context(|| {
                format!("PID {} monitoring start error: reading its threads", g.desc)
            })?),
        });
    }

    let mut file = match &req.output {
        Some(path) => Some(BufWriter::new(NamedWriter {
            file: open_output(path, req.format)?,
            path,
        })),
        None => None,
    };
    let tty = req.output.is_none() && ctx.stdout_is_tty;
    let mut fmt: Box<dyn Format> = match req.format {
        FileType::Text => {
            let size: Option<TermSize> =
                tty.then(|| Box::new(|| crossterm::terminal::size().ok()) as TermSize);
            Box::new(Text::new(cols, size))
        }
        FileType::Csv => Box::new(Csv::new(cols, tty)),
        FileType::Xml => Box::new(Xml::new(cols)),
        FileType::Json => Box::new(Json::new(cols)),
    };
    let w: &mut dyn Write = match &mut file {
        Some(f) => f,
        None => out,
    };

    // The guard stops every group it started on every way out of this function.
    let interface = backend.interface();
    let mut mon = backend.monitoring();
    let mut started: Vec<Started<'_>> = Vec::with_capacity(plans.len());
    let ids = start_groups(&mut mon, &plans)?;
    for ((g, threads), id) in plans.iter().zip(threads).zip(ids) {
        started.push(Started {
            id,
            plan: g,
            first_cpu: match &g.target {
                Target::Cores(cpus) => cpus.first().unwrap_or_default(),
                Target::Pids(_) | Target::Sockets(_) | Target::Channels(_) => LogicalCpu::default(),
            },
            threads,
        });
    }

    let result = fmt.begin(w).map_err(anyhow::Error::from).and_then(|()| {
        let view = (interface, cols.regions);
        monitor_loop(&mut mon, view, req, ctx, w, fmt.as_mut(), &mut started)
    });
    // The output is closed (XML `</records>`) and the groups stopped on every exit.
    let ended = fmt.end(w).map_err(anyhow::Error::from);
    let stopped = stop_each(&mut mon, &started);
    result.and(ended).and(stopped)
}

/// Starts every planned group and gives their ids in plan order. Core groups and PID
/// groups each start in one batch: resctrl is listed once, and every group's RMIDs and ABMC
/// counters are checked before any is made (all or none). A failure names the group with
/// pqos's words (`Monitoring start error on core(s) 3`, `PID 42 monitoring start error`).
fn start_groups<B: Backend>(
    mon: &mut Monitoring<'_, B>,
    plans: &[GroupPlan],
) -> Result<Vec<MonGroupId>> {
    let (core_plans, core_groups): (Vec<&GroupPlan>, Vec<_>) = plans
        .iter()
        .filter_map(|g| match &g.target {
            Target::Cores(cpus) => Some((g, (cpus.clone(), g.events))),
            Target::Pids(_) | Target::Sockets(_) | Target::Channels(_) => None,
        })
        .unzip();
    let (pid_plans, pid_groups): (Vec<&GroupPlan>, Vec<_>) = plans
        .iter()
        .filter_map(|g| match &g.target {
            Target::Pids(pids) => Some((g, (pids.clone(), g.events))),
            Target::Cores(_) | Target::Sockets(_) | Target::Channels(_) => None,
        })
        .unzip();
    let desc = |of: &[&GroupPlan], i: usize| of.get(i).map_or("?", |g| g.desc.as_str()).to_owned();
    let mut core_ids = mon
        .start_many(&core_groups)
        .map_err(|e| {
            let d = desc(&core_plans, e.index);
            anyhow!(e.error).context(format!("Monitoring start error on core(s) {d}"))
        })?
        .into_iter();
    let mut pid_ids = mon
        .start_tasks_many(&pid_groups)
        .map_err(|e| {
            let d = desc(&pid_plans, e.index);
            anyhow!(e.error).context(format!("PID {d} monitoring start error"))
        })?
        .into_iter();
    let mut ids = Vec::with_capacity(plans.len());
    for g in plans {
        let id = match &g.target {
            Target::Cores(_) => core_ids.next(),
            Target::Pids(_) => pid_ids.next(),
            Target::Sockets(sockets) => Some(mon.start_uncore(sockets, g.events).map_err(|e| {
                anyhow!(e).context(format!(
                    "Uncore monitoring start error on socket {}",
                    g.desc
                ))
            })?),
            Target::Channels(channels) => {
                Some(mon.start_channels(channels, g.events).map_err(|e| {
                    anyhow!(e).context(format!("Monitoring start error on channel(s) {}", g.desc))
                })?)
            }
        }
        .ok_or_else(|| anyhow!("a batch start returned fewer groups than asked for"))?;
        ids.push(id);
    }
    Ok(ids)
}

/// The uncore groups of `--mon-uncore` (pqos `monitor_setup`): the given socket groups,
/// or one group per socket with every uncore event; their events as pqos chooses them
/// ([`MonEvents::select_uncore`]). The MSR interface alone has them (pqos: `lib/api.c`;
/// [`run_monitor`] refuses the others first).
fn uncore_plans<B: Backend>(backend: &B, specs: &[SocketGroupSpec]) -> Result<Vec<GroupPlan>> {
    let defaults: Vec<SocketGroupSpec>;
    let specs = if specs.is_empty() {
        defaults = backend
            .topology()
            .packages()
            .into_iter()
            .map(|p| SocketGroupSpec {
                desc: p.to_string(),
                sockets: vec![p],
                events: MonEvents::PQOS_ALL,
            })
            .collect();
        &defaults
    } else {
        specs
    };
    let supported = backend.capabilities().supported_events();
    specs
        .iter()
        .map(|g| {
            let start_error = || format!("Uncore monitoring start error on socket {}", g.desc);
            let events = g.events.select_uncore(supported).map_err(|_| {
                let why = if supported.intersects(MonEvents::UNCORE) {
                    "only the event 'all' selects the uncore PCIe events (e.g. \
                     --mon-uncore=all:0)"
                        .to_owned()
                } else {
                    format!(
                        "this CPU has no uncore PCIe events (pqos enables them on Skylake-SP, \
                         CPU model {:#x}, only)",
                        rdt_pqos::UNCORE_PCIE_MODEL
                    )
                };
                anyhow!("{}: {why}", start_error())
            })?;
            Ok(GroupPlan {
                desc: g.desc.clone(),
                target: Target::Sockets(g.sockets.clone()),
                events,
            })
        })
        .collect()
}

/// The groups of `--mon-channel`: the RMID-counted events asked for that the platform
/// counts (a channel has no PMU: IPC and misses are neither added nor accepted, as pqos's
/// `hw_mon_start_channels` takes only the L3 events).
/// A `--mon-dev` device is its channels (all, or its `@VC`th), through the platform's IRDT
/// (pqos `pqos_devinfo_get_channel_id`).
fn channel_plans<B: Backend>(
    backend: &mut B,
    specs: &[ChannelGroupSpec],
) -> Result<Vec<GroupPlan>> {
    if !backend.interface().uses_msrs() {
        return Err(anyhow!(RequestError::NeedsMsrInterface {
            operation: "I/O RDT channel monitoring (--mon-channel, --mon-dev)",
            interface: backend.interface(),
        })
        .context("Monitoring start error"));
    }
    let counted = MonEvents::LLC_OCCUPANCY
        | MonEvents::MBM_LOCAL
        | MonEvents::MBM_REMOTE
        | MonEvents::MBM_TOTAL;
    let supported = backend.capabilities().supported_events() & counted;
    specs
        .iter()
        .map(|g| {
            let events = if g.events.contains(MonEvents::PQOS_ALL) {
                g.events & supported
            } else {
                g.events
            };
            let lacking = events - supported;
            if events.is_empty() || !lacking.is_empty() {
                bail!(
                    "Monitoring start error on channel(s) {}: {} cannot be monitored on an I/O \
                     RDT channel here (it counts {})",
                    g.desc,
                    if lacking.is_empty() {
                        g.events
                    } else {
                        lacking
                    }
                    .describe(),
                    supported.describe()
                );
            }
            let mut channels = Vec::new();
            for t in &g.targets {
                match *t {
                    AssocTarget::Channel(c) => channels.push(c),
                    AssocTarget::Device { segment, bdf, vc } => {
                        let io = backend.io_rdt().ok_or_else(|| {
                            anyhow!(
                                "Monitoring start error on device {}: I/O RDT monitoring needs \
                                 a platform with I/O RDT (an ACPI IRDT table)",
                                g.desc
                            )
                        })?;
                        let found = io.device_channels(segment, bdf, vc).map_err(|e| {
                            anyhow!("Monitoring start error on device {}: {e}", g.desc)
                        })?;
                        for c in found {
                            if !channels.contains(&c) {
                                channels.push(c);
                            }
                        }
                    }
                    _ => {}
                }
            }
            Ok(GroupPlan {
                desc: g.desc.clone(),
                target: Target::Channels(channels),
                events,
            })
        })
        .collect()
}

/// The groups to start: `--mon-uncore` groups, `-p` groups, `-m` groups, or one group per
/// core with every event.
fn group_plans<B: Backend>(backend: &B, req: &MonitorRequest) -> Result<Vec<GroupPlan>> {
    if let Some(specs) = &req.uncore_groups {
        return uncore_plans(backend, specs);
    }
    let supported = backend.capabilities().supported_events();
    let mut excluded = MonEvents::empty();
    excluded.set(MonEvents::IPC, req.disable_ipc);
    excluded.set(MonEvents::LLC_MISSES, req.disable_llc_miss);
    // pqos adds IPC and misses to every group where the platform counts them. Without a
    // usable PMU the capabilities list neither, so their columns are left out, as pqos
    // leaves out every event the platform lacks; stderr says so once.
    let missing = MonEvents::PMU.difference(supported).difference(excluded);
    if !missing.is_empty() {
        eprintln!(
            "NOTE: no usable PMU (perf events cannot count here): {} not monitored",
            missing.describe()
        );
    }
    let plan = |desc: &str, target: Target, requested: MonEvents| -> Result<GroupPlan> {
        Ok(GroupPlan {
            desc: desc.to_owned(),
            target,
            events: setup_events(desc, requested, supported, excluded)?,
        })
    };
    if !req.pid_groups.is_empty() {
        return req
            .pid_groups
            .iter()
            .map(|g| plan(&g.desc, Target::Pids(g.pids.clone()), g.events))
            .collect();
    }
    let default_groups: Vec<MonGroupSpec>;
    let specs: &[MonGroupSpec] = if req.groups.is_empty() {
        default_groups = backend
            .topology()
            .cpus()
            .iter()
            .map(|c| MonGroupSpec {
                desc: c.cpu.to_string(),
                cpus: std::iter::once(c.cpu).collect(),
                events: MonEvents::PQOS_ALL,
            })
            .collect();
        &default_groups
    } else {
        &req.groups
    };
    specs
        .iter()
        .map(|g| plan(&g.desc, Target::Cores(g.cpus.clone()), g.events))
        .collect()
}

/// On the OS interface every group that counts an RMID event is a resctrl monitor group
/// with an RMID of its own, and the root keeps RMID 0: more groups than `num_rmids - 1` are
/// refused before any is made, as pqos/monitor.c does (`Too many monitoring groups
/// selected`), instead of failing at the first group without one after making the others.
fn check_rmid_capacity<B: Backend>(backend: &B, plans: &[GroupPlan]) -> Result<()> {
    let Some(available) = backend.capabilities().resctrl_mon_groups() else {
        return Ok(());
    };
    if backend.interface() != rdt_pqos::Interface::Os {
        return Ok(());
    }
    let requested = plans
        .iter()
        .filter(|g| !g.events.rmid_events().is_empty())
        .count();
    if requested > available as usize {
        bail!(
            "Too many monitoring groups selected. Requested {requested} groups, but only \
             {available} are available (resctrl's RMIDs less the root's)."
        );
    }
    Ok(())
}

/// Every core is present; every process exists (pqos master's `/proc` check).
fn validate_targets<B: Backend>(backend: &B, proc: &ProcFs, plans: &[GroupPlan]) -> Result<()> {
    for g in plans {
        match &g.target {
            Target::Cores(cpus) => {
                if let Some(cpu) = cpus.iter().find(|c| backend.topology().get(*c).is_none()) {
                    bail!(
                        "Monitoring start error on core(s) {}: core {cpu} is not present (cores on this platform: {})",
                        g.desc,
                        backend.topology().all_cpus()
                    );
                }
            }
            Target::Sockets(sockets) => {
                let known = backend.topology().packages();
                if let Some(s) = sockets.iter().find(|s| !known.contains(s)) {
                    bail!(
                        "Uncore monitoring start error on socket {}: socket {s} is not present (sockets on this platform: {})",
                        g.desc,
                        known
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    );
                }
            }
            Target::Channels(_) => {} // checked by the library before any write
            Target::Pids(pids) => {
                if let Some(pid) = proc.first_missing(pids) {
                    bail!(
                        "Requested PID set contains nonexistent processes (first invalid PID: {pid})"
                    );
                }
            }
        }
    }
    Ok(())
}

/// Opens `-o FILE` as pqos's `safe_fopen` does: a symlink is refused (`File %s is a
/// symlink`); text appends, CSV, XML and JSON truncate.
fn open_output(path: &Path, format: FileType) -> Result<File> {
    let symlink = |p: &Path| anyhow!("File {} is a symlink", p.display());
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(symlink(path));
    }
    let mut o = OpenOptions::new();
    match format {
        FileType::Text => o.append(true).create(true),
        FileType::Csv | FileType::Xml | FileType::Json => o.write(true).create(true).truncate(true),
    };
    // O_NOFOLLOW: a symlink put there after the check above is refused too (ELOOP).
    o.custom_flags(libc::O_NOFOLLOW);
    o.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            symlink(path)
        } else {
            anyhow!(e).context(format!("Error opening '{}' output file!", path.display()))
        }
    })
}

/// The `-o` file, whose write errors name it: `-o /dev/full` fails with "writing the
/// output file /dev/full: No space left on device", not with the errno alone.
struct NamedWriter<'a> {
    file: File,
    path: &'a Path,
}

/// A write to the `-o` file failed (the errno is the source).
#[derive(Debug, thiserror::Error)]
#[error("writing the output file {}", .path.display())]
struct OutputWriteError {
    path: std::path::PathBuf,
    #[source]
    source: std::io::Error,
}

impl NamedWriter<'_> {
    /// `e` with the path; its kind kept (a broken pipe stays one).
    fn named(&self, e: std::io::Error) -> std::io::Error {
        std::io::Error::new(
            e.kind(),
            OutputWriteError {
                path: self.path.to_owned(),
                source: e,
            },
        )
    }
}

impl Write for NamedWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf).map_err(|e| self.named(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush().map_err(|e| self.named(e))
    }
}

/// Stops the groups one by one, to name the group whose stop failed.
fn stop_each<B: Backend>(mon: &mut Monitoring<'_, B>, started: &[Started<'_>]) -> Result<()> {
    let mut first = Ok(());
    for s in started {
        if let Err(e) = mon.stop(s.id)
            && first.is_ok()
        {
            first =
                Err(anyhow!(e).context(format!("Monitoring stop error! (group {})", s.plan.desc)));
        }
    }
    first
}

/// The memory regions whose local bandwidth the MMIO interface shows (pqos v26.03: every
/// region, or `--mon-mem-regions`), checked against the platform's; none on another
/// interface (where `--mon-mem-regions` is refused) or without local bandwidth.
fn region_columns<B: Backend>(
    backend: &mut B,
    req: &MonitorRequest,
    events: MonEvents,
) -> Result<RegionColumns> {
    let Some(r) = backend.regions() else {
        if req.mem_regions.is_some() {
            bail!(
                "--mon-mem-regions: region-aware monitoring needs the MMIO interface \
                 (--iface=mmio on an RDT 1.3 platform)"
            );
        }
        return Ok(RegionColumns::default());
    };
    if !events.contains(MonEvents::MBM_LOCAL) {
        return Ok(RegionColumns::default());
    }
    let have: Vec<u8> = r.memory_regions().iter().map(|m| m.region.0).collect();
    let ids = match &req.mem_regions {
        None => have.clone(),
        Some(ids) => {
            if let Some(bad) = ids.iter().find(|i| !have.contains(i)) {
                bail!(
                    "--mon-mem-regions: memory region {bad} does not exist (regions: {})",
                    super::join(have.iter())
                );
            }
            ids.clone()
        }
    };
    RegionColumns::new(&ids).ok_or_else(|| {
        anyhow!("--mon-mem-regions: at most {MAX_REGION_COLUMNS} regions side by side")
    })
}

/// A group's local bandwidth per shown region over `over` (MiB/s), summed over its L3
/// domains; `None` where a domain's counter was unavailable or overflowed this poll.
fn region_cells<B: Backend>(
    mon: &mut Monitoring<'_, B>,
    id: MonGroupId,
    cols: &RegionColumns,
    over: std::time::Duration,
) -> [Option<f64>; MAX_REGION_COLUMNS] {
    let mut out = [None; MAX_REGION_COLUMNS];
    if cols.is_empty() {
        return out;
    }
    let Some(values) = mon
        .backend_mut()
        .regions()
        .and_then(|r| r.region_values(id).map(<[_]>::to_vec))
    else {
        return out;
    };
    for (slot, region) in out.iter_mut().zip(cols.ids()) {
        let mut sum = Some(0u64);
        for v in values.iter().filter(|v| v.region.0 == *region) {
            sum = sum.zip(v.delta_bytes).map(|(a, b)| a.saturating_add(b));
        }
        *slot = sum.map(|b| rdt_pqos::monitor::MibPerSec::from_bytes(b, over).0);
    }
    out
}

/// `view`: the interface (pqos's first sample depends on it) and the region columns.
fn monitor_loop<'a, B: Backend>(
    mon: &mut Monitoring<'_, B>,
    (interface, regions): (Interface, RegionColumns),
    req: &MonitorRequest,
    ctx: &mut Context<'_>,
    w: &mut dyn Write,
    fmt: &mut dyn Format,
    started: &mut [Started<'a>],
) -> Result<()> {
    let mut schedule = Schedule::new(req.interval);
    // The groups have just started: the first poll's deltas are since then.
    let mut last_poll = ctx.clock.elapsed();
    let mut first = true;
    let mut keyed: Vec<(Row<'a>, LogicalCpu)> = Vec::with_capacity(started.len());
    let mut rows: Vec<Row<'a>> = Vec::with_capacity(started.len());
    let mut said_no_pmu = false;
    loop {
        mon.poll()
            .map_err(|e| anyhow!(e).context("Failed to poll monitoring data!"))?;
        let now = ctx.clock.elapsed();
        let interval = now.saturating_sub(last_poll);
        last_poll = now;
        for s in started.iter_mut() {
            let plan: &'a GroupPlan = s.plan;
            // The first poll's deltas are since the group started reading its counters, over
            // the time the library measured from that reading (`MonValues::interval`); the
            // loop's clock starts later.
            let over = mon
                .values(s.id)
                .map_or(interval, |v| if first { v.interval } else { interval });
            let mut cells = mon
                .values(s.id)
                .map_or_else(Cells::default, |v| Cells::new(v, plan.events, over));
            if plan.events.contains(MonEvents::MBM_LOCAL) {
                cells.regions = region_cells(mon, s.id, &regions, over);
            }
            if first {
                cells = cells.pqos_first_sample(interface);
            }
            if !said_no_pmu
                && (plan.events.contains(MonEvents::IPC) && cells.ipc.is_none()
                    || plan.events.contains(MonEvents::LLC_MISSES) && cells.llc_misses.is_none())
            {
                said_no_pmu = true;
                eprintln!(
                    "NOTE: the PMU is unavailable: IPC and LLC misses are not measured on this \
                     platform; their columns are left blank"
                );
            }
            let row = Row {
                desc: &plan.desc,
                cores: s.threads.as_mut().map(GroupThreads::cores),
                cells,
            };
            keyed.push((row, s.first_cpu));
        }
        if req.top {
            keyed.sort_by_key(|(r, _)| std::cmp::Reverse(r.cells.llc_occupancy_bytes.unwrap_or(0)));
        } else if req.pid_groups.is_empty() {
            keyed.sort_by_key(|(_, first_cpu)| *first_cpu);
        }
        first = false;
        rows.clear();
        rows.extend(keyed.drain(..).map(|(r, _)| r));
        let time = ctx.clock.now();
        fmt.sample(
            w,
            &Sample {
                time: &time,
                interval,
                rows: &rows,
            },
        )?;
        if ctx.stop.load(Ordering::Relaxed) || req.duration.is_some_and(|d| schedule.due() >= d) {
            return Ok(());
        }
        let due = schedule.advance(ctx.clock.elapsed());
        ctx.clock.wait_until(due, ctx.stop);
        if ctx.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::command::Command;
    use rdt_pqos::fake::FakeBackend;
    use std::time::Duration;

    /// A virtual clock at a fixed local time, so `TIME` lines are exact.
    struct TestClock {
        t: Duration,
    }

    impl Clock for TestClock {
        fn elapsed(&self) -> Duration {
            self.t
        }
        fn wait_until(&mut self, t: Duration, _stop: &AtomicBool) {
            self.t = self.t.max(t);
        }
        fn now(&self) -> jiff::Zoned {
            let start: jiff::Zoned = "2024-09-23T10:00:00[UTC]".parse().unwrap();
            start
                .checked_add(jiff::SignedDuration::try_from(self.t).unwrap())
                .unwrap()
        }
    }

    fn request(argv: &[&str]) -> MonitorRequest {
        match crate::command::plan_of(argv).command {
            Command::Monitor(r) => r,
            c => panic!("{c:?}"),
        }
    }

    fn run(b: &mut FakeBackend, argv: &[&str], tty: bool) -> (Result<()>, String) {
        let mut clock = TestClock { t: Duration::ZERO };
        let stop = AtomicBool::new(false);
        let mut ctx = Context {
            clock: &mut clock,
            stop: &stop,
            stdout_is_tty: tty,
            proc: &ProcFs::host(),
        };
        let mut out = Vec::new();
        let r = run_monitor(b, &request(argv), &mut ctx, &mut out);
        (r, String::from_utf8(out).unwrap())
    }

    #[test]
    fn text_output_matches_pqos_layout_and_first_sample_has_zero_bandwidth() {
        // arrange
        let mut b = FakeBackend::broadwell_2s();
        // act: -t 1 at 500 ms: samples at 0, 0.5 and 1 s
        let (r, out) = run(
            &mut b,
            &["-m", "all:[2-7];all:8", "-t", "1", "-i", "5"],
            false,
        );
        // assert
        r.unwrap();
        let header = "    CORE         IPC      MISSES     LLC[KB]   MBL[MB/s]   MBR[MB/s]";
        assert_eq!(
            out,
            format!(
                "TIME 2024-09-23 10:00:00\n{header}\n\
                 \x20    2-7        0.00          0k     33792.0         0.0         0.0\n\
                 \x20      8        0.00          0k      9216.0         0.0         0.0\n\
                 TIME 2024-09-23 10:00:00\n{header}\n\
                 \x20    2-7        2.00       6000k     33792.0      1200.0       600.0\n\
                 \x20      8        2.00       1000k      9216.0       200.0       100.0\n\
                 TIME 2024-09-23 10:00:01\n{header}\n\
                 \x20    2-7        2.00       6000k     33792.0      1200.0       600.0\n\
                 \x20      8        2.00       1000k      9216.0       200.0       100.0\n"
            )
        );
        assert_eq!(b.running_groups(), 0, "groups are stopped at the end");
        assert_eq!(b.rmid_of_cpu(2), 0);
    }

    /// A clock that moves 250 ms each time it is read, so time passes between the start
    /// of the groups and the first poll.
    struct TickingClock(std::cell::Cell<Duration>);

    impl Clock for TickingClock {
        fn elapsed(&self) -> Duration {
            let t = self.0.get() + Duration::from_millis(250);
            self.0.set(t);
            t
        }
        fn wait_until(&mut self, t: Duration, _stop: &AtomicBool) {
            self.0.set(self.0.get().max(t));
        }
        fn now(&self) -> jiff::Zoned {
            "2024-09-23T10:00:00[UTC]".parse().unwrap()
        }
    }

    /// pqos's first sample: bandwidth 0.0 on the MSR interface (`valid_mbm_read`); on the
    /// OS interface the traffic since the groups started over the time since then
    /// (`resctrl_mon_poll` counts from the new group's 0). IPC and misses are 0 on both.
    #[test]
    fn first_sample_has_bandwidth_since_the_start_on_the_os_interface_only() {
        for os in [false, true] {
            // arrange
            let mut b = FakeBackend::broadwell_2s();
            b.os_interface = os;
            let mut clock = TickingClock(std::cell::Cell::new(Duration::ZERO));
            let stop = AtomicBool::new(false);
            let mut ctx = Context {
                clock: &mut clock,
                stop: &stop,
                stdout_is_tty: false,
                proc: &ProcFs::host(),
            };
            let mut out = Vec::new();
            // act: one sample
            run_monitor(
                &mut b,
                &request(&["-m", "all:8", "-t", "0"]),
                &mut ctx,
                &mut out,
            )
            .unwrap();
            // assert
            let out = String::from_utf8(out).unwrap();
            let row: Vec<&str> = out.lines().nth(2).unwrap().split_whitespace().collect();
            assert_eq!(row[..3], ["8", "0.00", "0k"], "{out}");
            let mbl: f64 = row[4].parse().unwrap();
            if os {
                assert!(mbl > 0.0, "{out}");
            } else {
                assert_eq!(row[4..], ["0.0", "0.0"], "{out}");
            }
        }
    }

    #[test]
    fn explicit_events_get_ipc_and_misses_unless_disabled() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(&mut b, &["-m", "llc:0", "-t", "0"], false);
        r.unwrap();
        assert!(out.contains("    CORE         IPC      MISSES     LLC[KB]\n       0        0.00          0k      1024.0\n"), "{out}");
        let (r, out) = run(
            &mut b,
            &[
                "-m",
                "llc:0",
                "-t",
                "0",
                "--disable-mon-ipc",
                "--disable-mon-llc_miss",
            ],
            false,
        );
        r.unwrap();
        assert!(
            out.ends_with("    CORE     LLC[KB]\n       0      1024.0\n"),
            "{out}"
        );
    }

    #[test]
    fn events_missing_in_a_group_print_blank_cells() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(
            &mut b,
            &[
                "-m",
                "llc:0;mbt:1",
                "-t",
                "0",
                "--disable-mon-ipc",
                "--disable-mon-llc_miss",
            ],
            false,
        );
        r.unwrap();
        assert!(out.ends_with(
            "    CORE     LLC[KB]   MBT[MB/s]\n       0      1024.0            \n       1                     0.0\n"
        ), "{out}");
    }

    #[test]
    fn default_monitors_every_core_and_top_sorts_by_llc() {
        let mut b = FakeBackend::amd_2ccx();
        let (r, out) = run(&mut b, &["-t", "0", "-T"], false);
        r.unwrap();
        let rows: Vec<&str> = out
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(rows, ["7", "6", "5", "4", "3", "2", "1", "0"]);
        // No PMU on this fake: no IPC or MISSES columns (never a column of blank cells).
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], "    CORE     LLC[KB]   MBL[MB/s]   MBR[MB/s]");
        assert_eq!(lines[2], "       7      8192.0         0.0         0.0");
    }

    #[test]
    fn percent_llc() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(
            &mut b,
            &[
                "-m",
                "llc:0",
                "-t",
                "0",
                "-P",
                "--disable-mon-ipc",
                "--disable-mon-llc_miss",
            ],
            false,
        );
        r.unwrap();
        assert!(
            out.ends_with("    CORE      LLC[%]\n       0         2.0\n"),
            "{out}"
        );
    }

    #[test]
    fn tty_clears_the_screen_and_ends_with_blank_lines() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(
            &mut b,
            &[
                "-m",
                "llc:0",
                "-t",
                "0",
                "--disable-mon-ipc",
                "--disable-mon-llc_miss",
            ],
            true,
        );
        r.unwrap();
        // Clear the screen, cursor to the top left; no newline after the last row; two at
        // the end (pqos monitor_text.c on a terminal).
        assert_eq!(
            out,
            "\x1b[2J\x1b[1;1HTIME 2024-09-23 10:00:00\n    CORE     LLC[KB]\n       0      1024.0\n\n"
        );
    }

    #[test]
    fn csv_output() {
        let mut b = FakeBackend::broadwell_2s();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.csv");
        let p = path.to_str().unwrap();
        let (r, out) = run(
            &mut b,
            &["-m", "all:0", "-t", "0", "-i", "5", "-u", "csv", "-o", p],
            false,
        );
        r.unwrap();
        assert!(out.is_empty());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "Time,Core,IPC,LLC Misses,LLC[KB],MBL[MB/s],MBR[MB/s]\n\
             2024-09-23 10:00:00,\"0\",0.00,0,1024.0,0.0,0.0\n"
        );
    }

    #[test]
    fn xml_output() {
        let mut b = FakeBackend::broadwell_2s();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.xml");
        let p = path.to_str().unwrap();
        let (r, _) = run(
            &mut b,
            &[
                "-m",
                "llc:0;mbl:1",
                "-t",
                "0",
                "-u",
                "xml",
                "-o",
                p,
                "--disable-mon-ipc",
            ],
            false,
        );
        r.unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<records>\n\
             <record>\n\t<time>2024-09-23 10:00:00</time>\n\t<core>0</core>\n\t<llc_misses>0</llc_misses>\n\
             \t<l3_occupancy_kB>1024.0</l3_occupancy_kB>\n\t<mbm_local_MB></mbm_local_MB>\n</record>\n\
             <record>\n\t<time>2024-09-23 10:00:00</time>\n\t<core>1</core>\n\t<llc_misses>0</llc_misses>\n\
             \t<l3_occupancy_kB></l3_occupancy_kB>\n\t<mbm_local_MB>0.0</mbm_local_MB>\n</record>\n\
             </records>\n"
        );
    }

    #[test]
    fn a_group_that_cannot_start_stops_the_others() {
        let mut b = FakeBackend::broadwell_2s();
        b.start_monitoring(&"5".parse().unwrap(), MonEvents::LLC_OCCUPANCY)
            .unwrap();
        let (r, out) = run(&mut b, &["-m", "all:[2-4];all:5"], false);
        let e = format!("{:#}", r.unwrap_err());
        assert!(
            e.starts_with("Monitoring start error on core(s) 5: CPU 5 is already monitored"),
            "{e}"
        );
        assert!(out.is_empty());
        assert_eq!(b.rmid_of_cpu(2), 0, "group [2-4] was stopped again");
    }

    #[test]
    fn unsupported_event_and_absent_core_are_errors() {
        let mut b = FakeBackend::broadwell_2s();
        b.reconfigure(|c| {
            if let Some(m) = c.monitoring.get_mut() {
                m.events.mbm_local = false;
            }
        });
        let (r, _) = run(&mut b, &["-m", "mbl:0"], false);
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("mbl (local memory bandwidth) of group \"0\" is not supported"),
            "{e}"
        );
        let (r, _) = run(&mut b, &["-m", "all:99"], false);
        let e = r.unwrap_err().to_string();
        assert!(e.contains("core 99 is not present"), "{e}");
        assert!(b.writes.is_empty());
    }

    #[test]
    fn stop_flag_ends_infinite_monitoring() {
        let mut b = FakeBackend::broadwell_2s();
        let mut clock = TestClock { t: Duration::ZERO };
        let stop = AtomicBool::new(true);
        let mut ctx = Context {
            clock: &mut clock,
            stop: &stop,
            stdout_is_tty: false,
            proc: &ProcFs::host(),
        };
        let mut out = Vec::new();
        run_monitor(&mut b, &request(&["-m", "llc:0"]), &mut ctx, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().matches("TIME").count(), 1);
        assert_eq!(b.running_groups(), 0);
    }

    fn spawn_sleeper() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep")
    }

    #[test]
    fn json_rows_have_unit_named_fields_and_null_for_blank_cells() {
        let mut b = FakeBackend::broadwell_2s();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        let p = path.to_str().unwrap();
        let (r, out) = run(
            &mut b,
            &["-m", "llc:0;mbl:1", "-t", "1", "-u", "json", "-o", p],
            false,
        );
        r.unwrap();
        assert!(out.is_empty());
        let text = std::fs::read_to_string(&path).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 4, "2 groups x 2 samples:\n{text}");
        let last = &rows[2];
        assert_eq!(last["time"], "2024-09-23T10:00:01+00:00");
        assert_eq!(last["core"], "0");
        assert_eq!(last["interval_s"], 1.0);
        assert_eq!(last["ipc"], 2.0);
        assert_eq!(last["llc_misses"], 1_000_000);
        assert_eq!(last["llc_occupancy_kib"], 1024.0);
        assert!(last["mbm_local_mib_per_s"].is_null(), "{last}");
        assert_eq!(rows[3]["mbm_local_mib_per_s"], 100.0);
        assert!(rows[3]["llc_occupancy_kib"].is_null());
        let keys: Vec<&String> = last.as_object().unwrap().keys().collect();
        assert!(
            !keys
                .iter()
                .any(|k| k.contains("remote") || k.contains("total") || *k == "pid"),
            "only the columns shown: {keys:?}"
        );
    }

    #[test]
    fn pid_mode_monitors_real_processes_and_prints_the_cores_they_ran_on() {
        // arrange: two live processes
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        let (mut c1, mut c2) = (spawn_sleeper(), spawn_sleeper());
        let (p1, p2) = (c1.id(), c2.id());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.csv");
        // act
        let (r, text) = run(
            &mut b,
            &["-p", &format!("llc:[{p1},{p2}]"), "-t", "0"],
            false,
        );
        r.unwrap();
        let (r, _) = run(
            &mut b,
            &[
                "-p",
                &format!("all:{p1},{p2}"),
                "-t",
                "1",
                "-u",
                "csv",
                "-o",
                path.to_str().unwrap(),
            ],
            false,
        );
        r.unwrap();
        c1.kill().unwrap();
        c2.kill().unwrap();
        c1.wait().unwrap();
        c2.wait().unwrap();
        // assert: text layout of PID mode
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1], "     PID     CORE         IPC      MISSES     LLC[KB]",
            "{text}"
        );
        let desc = format!("{p1},{p2}");
        let want_desc = &desc[..desc.len().min(8)];
        assert_eq!(
            lines[2][..8].trim(),
            want_desc,
            "%8.8s cuts the label: {text}"
        );
        assert!(
            lines[2][9..17]
                .trim()
                .split(',')
                .all(|c| c.parse::<u32>().is_ok()),
            "{text}"
        );
        // CSV: header and rows with quoted PID and core lists
        let csv = std::fs::read_to_string(&path).unwrap();
        let mut csv_lines = csv.lines();
        assert_eq!(
            csv_lines.next(),
            Some("Time,PID,Core,IPC,LLC Misses,LLC[KB],MBL[MB/s],MBR[MB/s]")
        );
        let rows: Vec<&str> = csv_lines.collect();
        assert_eq!(rows.len(), 4, "{csv}");
        for (row, pid) in rows.iter().zip([p1, p2, p1, p2]) {
            let rest = row
                .strip_prefix("2024-09-23 10:00:0")
                .and_then(|r| r.get(1..))
                .unwrap_or_else(|| panic!("{row}"));
            let rest = rest
                .strip_prefix(&format!(",\"{pid}\",\""))
                .unwrap_or_else(|| panic!("{row}"));
            let (cores, values) = rest.split_once('"').unwrap();
            assert!(cores.split(',').all(|c| c.parse::<u32>().is_ok()), "{row}");
            assert_eq!(values.split(',').count(), 6, "{row}");
        }
        assert_eq!(b.running_groups(), 0, "groups are stopped");
    }

    /// The number format of a field: integer digits `N`, decimals counted (`0.00` -> `N.2`).
    fn number_format(v: &str) -> String {
        match v.split_once('.') {
            Some((_, frac)) => format!("N.{}", frac.len()),
            None if v.chars().all(|c| c.is_ascii_digit()) => "N".into(),
            None => v.into(),
        }
    }

    #[test]
    fn pid_csv_rows_parse_as_telegraf_parses_the_real_line() {
        // telegraf_pqos_csv_line.txt: `time,"pids",cores...,6 metrics`, read by Telegraf's
        // intel_rdt input (split on commas; the PIDs are the first quoted string; the last
        // six fields are IPC, misses, LLC, MBL, MBR, MBT).
        let real = crate::testdata::sample("telegraf_pqos_csv_line.txt");
        let real: Vec<&str> = real.trim_end().split(',').collect();
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        let (mut c1, mut c2) = (spawn_sleeper(), spawn_sleeper());
        let pids = format!("{},{}", c1.id(), c2.id());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        // Telegraf's -p argument (createArgsForGroups): all:[PIDS];mbt:[PIDS];
        let (r, _) = run(
            &mut b,
            &[
                &format!("--mon-pid=all:[{pids}];mbt:[{pids}];"),
                "-u",
                "csv",
                "-o",
                path.to_str().unwrap(),
                "-t",
                "1",
            ],
            false,
        );
        c1.kill().unwrap();
        c2.kill().unwrap();
        c1.wait().unwrap();
        c2.wait().unwrap();
        r.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let row = text.lines().last().unwrap();
        let ours: Vec<&str> = row.split(',').collect();
        let shape = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_ascii_digit() { 'D' } else { c })
                .collect()
        };
        assert_eq!(shape(ours[0]), shape(real[0]), "{row}");
        let quoted = |l: &str| l.split('"').nth(1).map(str::to_owned);
        assert_eq!(quoted(row), Some(pids.clone()), "PIDs first, quoted: {row}");
        let metrics = |v: &[&str]| -> Vec<String> {
            v[v.len() - 6..].iter().map(|m| number_format(m)).collect()
        };
        assert_eq!(metrics(&ours), metrics(&real), "{row}");
        for m in &ours[ours.len() - 6..] {
            m.parse::<f64>().unwrap();
        }
    }

    #[test]
    fn pid_mode_on_the_msr_interface_says_it_needs_the_os_interface() {
        let mut b = FakeBackend::broadwell_2s();
        let mut child = spawn_sleeper();
        let me = child.id();
        let (r, out) = run(&mut b, &["-p", &format!("all:{me}"), "-t", "0"], false);
        child.kill().unwrap();
        child.wait().unwrap();
        let e = format!("{:#}", r.unwrap_err());
        assert!(
            e.starts_with(&format!(
                "PID {me} monitoring start error: PID monitoring needs the OS (resctrl) interface"
            )),
            "{e}"
        );
        assert!(out.is_empty());
    }

    #[test]
    fn a_process_that_does_not_exist_is_named_before_anything_starts() {
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        let mut c = spawn_sleeper();
        let gone = c.id();
        c.kill().unwrap();
        c.wait().unwrap();
        let mut live = spawn_sleeper();
        let me = live.id();
        let (r, _) = run(
            &mut b,
            &["-p", &format!("all:{me};all:{gone}"), "-t", "0"],
            false,
        );
        live.kill().unwrap();
        live.wait().unwrap();
        assert_eq!(
            r.unwrap_err().to_string(),
            format!("Requested PID set contains nonexistent processes (first invalid PID: {gone})")
        );
        assert!(b.writes.is_empty(), "nothing started: {:?}", b.writes);
    }

    #[test]
    fn output_file_that_is_a_symlink_is_refused_and_left_alone() {
        let mut b = FakeBackend::broadwell_2s();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep me\n").unwrap();
        let link = dir.path().join("out.csv");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let (r, _) = run(
            &mut b,
            &[
                "-m",
                "llc:0",
                "-t",
                "0",
                "-u",
                "csv",
                "-o",
                link.to_str().unwrap(),
            ],
            false,
        );
        assert_eq!(
            r.unwrap_err().to_string(),
            format!("File {} is a symlink", link.display())
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");
        assert!(b.writes.is_empty());
    }

    #[test]
    fn a_failed_write_to_the_output_file_names_the_file() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, _) = run(
            &mut b,
            &["-m", "llc:0", "-t", "0", "-u", "csv", "-o", "/dev/full"],
            false,
        );
        assert_eq!(
            format!("{:#}", r.unwrap_err()),
            "writing the output file /dev/full: No space left on device (os error 28)"
        );
    }

    #[test]
    fn text_files_are_appended_to_and_csv_files_truncated() {
        let mut b = FakeBackend::broadwell_2s();
        let dir = tempfile::tempdir().unwrap();
        for (format, name) in [("text", "m.txt"), ("csv", "m.csv")] {
            let path = dir.path().join(name);
            std::fs::write(&path, "old line\n").unwrap();
            let p = path.to_str().unwrap();
            run(
                &mut b,
                &["-m", "llc:0", "-t", "0", "-u", format, "-o", p],
                false,
            )
            .0
            .unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                text.starts_with("old line\n"),
                format == "text",
                "{format}: {text}"
            );
        }
    }

    /// A writer whose reader went away after `left` bytes (`pqos ... | head`).
    struct ClosedPipe {
        left: usize,
    }

    impl Write for ClosedPipe {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.left == 0 {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.left);
            self.left -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stdout_ends_infinite_monitoring_and_stops_the_groups() {
        let mut b = FakeBackend::broadwell_2s();
        let mut clock = TestClock { t: Duration::ZERO };
        let stop = AtomicBool::new(false);
        let mut ctx = Context {
            clock: &mut clock,
            stop: &stop,
            stdout_is_tty: false,
            proc: &ProcFs::host(),
        };
        let mut out = ClosedPipe { left: 300 };
        let e = run_monitor(&mut b, &request(&["-m", "all:0-3"]), &mut ctx, &mut out).unwrap_err();
        assert!(
            e.chain().any(|c| c
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)),
            "{e:#}"
        );
        assert_eq!(b.running_groups(), 0);
        assert_eq!(b.rmid_of_cpu(0), 0);
    }

    /// pqos offers uncore monitoring on the MSR interface only (`lib/api.c`): on the OS
    /// interface the request is refused before anything starts, naming the interface.
    #[test]
    fn uncore_monitoring_needs_the_msr_interface() {
        // arrange: even a CPU with the events
        let mut b = FakeBackend::broadwell_2s();
        b.reconfigure(|c| c.uncore_pcie = true);
        b.os_interface = true;
        // act
        let (r, out) = run(&mut b, &["--mon-uncore", "-t", "1"], false);
        // assert
        let e = format!("{:#}", r.unwrap_err());
        assert!(
            e.starts_with(
                "Uncore monitoring start error: uncore monitoring (--mon-uncore) needs the MSR \
                 interface (--iface=msr); this platform was opened with the Os interface"
            ),
            "{e}"
        );
        assert_eq!(out, "", "no sample");
        assert_eq!(b.running_groups(), 0);
    }

    /// `--mon-uncore` without a value: one row per socket in socket order, the uncore
    /// columns only (no IPC or misses: pqos masks the core events out of uncore groups),
    /// pqos's `" %10.0fk"` cells; the groups are stopped at the end.
    #[test]
    fn uncore_text_has_a_row_per_socket_with_the_pcie_counts() {
        // arrange
        let mut b = FakeBackend::broadwell_2s();
        b.reconfigure(|c| c.uncore_pcie = true);
        // act
        let (r, out) = run(&mut b, &["--mon-uncore", "-t", "1"], false);
        // assert: FakeBackend counts 1000/500/2000/1000 x (socket + 1) per poll
        r.unwrap();
        let sample = "  SOCKET   MISS_READ  MISS_WRITE    REF_READ   REF_WRITE\n       0          1k          0k          2k          1k\n       1          2k          1k          4k          2k\n";
        assert_eq!(
            out,
            format!("TIME 2024-09-23 10:00:00\n{sample}TIME 2024-09-23 10:00:01\n{sample}")
        );
        assert_eq!(b.running_groups(), 0);
        assert!(
            b.writes.iter().any(|w| w == "stop uncore [1]"),
            "{:?}",
            b.writes
        );
    }
}
