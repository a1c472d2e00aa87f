//! One scrape: the resctrl groups through the library's read-only telemetry, and the
//! groups this exporter monitors itself through the facade's monitoring guard.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use rdt_pqos::resctrl::{GroupSample, ResctrlTelemetry, pqos_mon_pid};
use rdt_pqos::{
    Backend, CpuSet, MonEvents, MonGroupId, MonValues, Monitoring, Rdt, RegionValues, TaskId,
};

/// A group this exporter started, and how it is named in the labels.
#[derive(Debug)]
pub struct OwnGroup {
    /// `cores:0-3` or `pids:1234,5678`.
    pub name: String,
    /// The group's CPUs, for `rdt_group_cpus`; `None` for a task group.
    pub cpus: Option<usize>,
    /// The handle.
    pub id: MonGroupId,
}

/// What one scrape read.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    /// Every resctrl group but this exporter's own monitor groups.
    pub groups: Vec<GroupSample>,
    /// This exporter's groups with their values.
    pub own: Vec<(String, Option<usize>, MonValues)>,
    /// On a platform with memory regions (the MMIO interface, RDT 1.3): each own group's
    /// local traffic per L3 domain and region since it started
    /// ([`rdt_pqos::RegionOps::region_values`]), by group name; empty elsewhere.
    pub own_regions: HashMap<String, Vec<RegionValues>>,
    /// How long the reads took.
    pub duration: Duration,
    /// Reads that failed, in all.
    pub read_errors: u64,
    /// Group list scans, in all.
    pub scans: u64,
    /// Whether resctrl was read (mounted, the same mount or scanned anew); `true` on the
    /// MSR interface, which has no resctrl to lose.
    pub up: bool,
    /// The resctrl groups this scrape could not read in full (a file that could not be
    /// opened or read, or did not parse); empty when it read everything.
    pub incomplete: Vec<String>,
    /// The noisy-neighbour controller's metrics (`rdt-agent` on this platform), as it
    /// last wrote them ([`rdt_pqos::control::METRICS_FILE`]); `None` when no agent runs.
    pub controller: Option<String>,
    /// The Kubernetes pods of the NRI plugin's monitor groups ([`pod_labels`]): group
    /// path to its labels.
    pub pods: HashMap<String, PodLabels>,
}

/// The labels of a pod's monitor group: its namespace, pod name and containers' names
/// (sorted, `,`-separated: one group per pod holds them all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodLabels {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// Its containers' names.
    pub container: String,
}

/// The monitor groups of the NRI plugin's pod record in run directory `run`
/// ([`rdt_pqos::pods::PodsRecord`]: read through the run directory's checks, at most
/// [`rdt_pqos::pods::MAX_PODS_FILE_BYTES`]), each with its pod's labels; empty without a
/// record.
///
/// # Errors
/// A record that cannot be read or parsed (not a missing one).
pub fn pod_labels(run: &Path) -> std::io::Result<HashMap<String, PodLabels>> {
    let record = match rdt_pqos::pods::PodsRecord::read(run) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e),
    };
    Ok(record
        .by_mon_group()
        .into_iter()
        .map(|(path, p)| {
            (
                path.to_owned(),
                PodLabels {
                    namespace: p.namespace.clone(),
                    pod: p.name.clone(),
                    container: p.container_names(),
                },
            )
        })
        .collect())
}

/// The sources of a scrape.
#[derive(Debug)]
pub struct Collector<'a> {
    pub telemetry: Option<ResctrlTelemetry>,
    pub monitoring: Option<Monitoring<'a, Rdt>>,
    pub own: Vec<OwnGroup>,
    /// Since when resctrl is not readable (logged once, and when it comes back).
    pub down_since: Option<Instant>,
    /// The controller's metrics file in the platform's run directory.
    pub controller: PathBuf,
    /// The platform's run directory, where the NRI plugin records its pods.
    pub run: PathBuf,
    /// The pod record could not be read at the last scrape (logged once).
    pub pods_failed: bool,
}

/// The RMID events the exporter's own groups count.
pub const OWN_EVENTS: MonEvents = MonEvents::LLC_OCCUPANCY
    .union(MonEvents::MBM_LOCAL)
    .union(MonEvents::MBM_TOTAL);

impl Collector<'_> {
    /// Reads everything once. resctrl unmounted (or not readable) is no error: the
    /// scrape says `up: false` and has no resctrl groups; the reason is in the log.
    ///
    /// # Errors
    /// A failed poll of the own groups.
    pub fn scrape(&mut self) -> Result<Scrape> {
        let start = Instant::now();
        let mut out = Scrape {
            up: true,
            ..Scrape::default()
        };
        if let Some(t) = &mut self.telemetry {
            let me = std::process::id();
            match t.scrape() {
                Ok(groups) => {
                    out.groups = groups
                        .iter()
                        .filter(|g| {
                            pqos_mon_pid(g.path.rsplit('/').next().unwrap_or_default()) != Some(me)
                        })
                        .cloned()
                        .collect();
                    out.incomplete = t.incomplete().to_vec();
                }
                Err(e) => {
                    out.up = false;
                    if self.down_since.is_none() {
                        eprintln!("rdt-exporter: resctrl is not readable: {e}; rdt_up is 0");
                    }
                }
            }
            match (out.up, self.down_since) {
                (false, None) => self.down_since = Some(Instant::now()),
                (true, Some(since)) => {
                    eprintln!(
                        "rdt-exporter: resctrl readable again after {:.0?}",
                        since.elapsed()
                    );
                    self.down_since = None;
                }
                _ => {}
            }
            out.read_errors = t.stats().read_errors;
            out.scans = t.stats().scans;
        }
        // The run directory's file: verified directory, no symlink, at most 1 MiB.
        out.controller = rdt_pqos::runfile::read_run_file(&self.controller, 1 << 20).ok();
        if !out.groups.is_empty() {
            match pod_labels(&self.run) {
                Ok(p) => {
                    out.pods = p;
                    self.pods_failed = false;
                }
                Err(e) => {
                    if !self.pods_failed {
                        eprintln!("rdt-exporter: the NRI plugin's pod record: {e}; no pod labels");
                    }
                    self.pods_failed = true;
                }
            }
        }
        if let Some(mon) = &mut self.monitoring {
            mon.poll().context("polling the exporter's own groups")?;
            for g in &self.own {
                if let Some(v) = mon.values(g.id) {
                    out.own.push((g.name.clone(), g.cpus, v.clone()));
                }
                let regions = mon
                    .backend_mut()
                    .regions()
                    .and_then(|r| r.region_values(g.id).map(<[_]>::to_vec));
                if let Some(r) = regions.filter(|r| !r.is_empty()) {
                    out.own_regions.insert(g.name.clone(), r);
                }
            }
        }
        out.duration = start.elapsed();
        Ok(out)
    }
}

/// Starts the groups of `--monitor-cores` and `--monitor-pids` on `mon` (released when it
/// is finished or dropped).
///
/// # Errors
/// A group cannot be started (a CPU or process that does not exist, out of RMIDs, a
/// process list on the MSR interface).
pub fn start_own(
    mon: &mut Monitoring<'_, Rdt>,
    cores: &[CpuSet],
    pids: &[Vec<TaskId>],
) -> Result<Vec<OwnGroup>> {
    let events = OWN_EVENTS & mon.backend().capabilities().supported_events();
    let mut own = Vec::new();
    // one batch each (resctrl lists its groups once for all of them; all or none)
    let groups: Vec<(CpuSet, MonEvents)> = cores.iter().map(|c| (c.clone(), events)).collect();
    let ids = mon.start_many(&groups).map_err(|e| {
        anyhow::Error::new(e.error).context(format!("monitoring CPUs {}", cores[e.index]))
    })?;
    for (cpus, id) in cores.iter().zip(ids) {
        own.push(OwnGroup {
            name: format!("cores:{cpus}"),
            cpus: Some(cpus.len()),
            id,
        });
    }
    let lists: Vec<String> = pids
        .iter()
        .map(|t| {
            t.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let groups: Vec<(Vec<TaskId>, MonEvents)> = pids.iter().map(|t| (t.clone(), events)).collect();
    let ids = mon.start_tasks_many(&groups).map_err(|e| {
        anyhow::Error::new(e.error).context(format!("monitoring processes {}", lists[e.index]))
    })?;
    for (list, id) in lists.into_iter().zip(ids) {
        own.push(OwnGroup {
            name: format!("pids:{list}"),
            cpus: None,
            id,
        });
    }
    Ok(own)
}
