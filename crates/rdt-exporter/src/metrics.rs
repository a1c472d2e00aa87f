//! The metrics: a [`Scrape`] as OpenMetrics text (prefix `rdt_`), through the
//! `prometheus-client` crate's encoder.
//!
//! | metric | type | unit | labels | source |
//! |---|---|---|---|---|
//! | `rdt_llc_occupancy_bytes` | gauge | bytes | group, domain, kind, owner (, pod_uid, container_id) | `mon_data/mon_L3_XX/llc_occupancy`; IA32_QM_CTR event 1 on the MSR interface |
//! | `rdt_mbm_total_bytes_total` | counter | bytes | as above | `mbm_total_bytes`, monotonic across wraps and group re-creation |
//! | `rdt_mbm_local_bytes_total` | counter | bytes | as above; `region` on a platform with memory regions | `mbm_local_bytes`, likewise; on the MMIO interface (RDT 1.3) the exporter's own groups count per L3 domain and memory region (`MBM_REGION_m_RMID_n`), one series per region in place of the domain's |
//! | `rdt_cache_ways` | gauge | ways | group, resource, domain, kind, owner (, …) | set bits of the `schemata` mask |
//! | `rdt_cache_mask` | gauge | bitmask | as above | the `schemata` mask as a number |
//! | `rdt_mba_limit` | gauge | see `unit` label | group, resource, domain, unit, kind, owner (, …) | `MB`/`SMBA` of `schemata` |
//! | `rdt_group_cpus` | gauge | CPUs | group, kind, owner (, …) | `cpus_list` |
//! | `rdt_group_tasks` | gauge | threads | as above | `tasks` |
//! | `rdt_up` | gauge | 0 or 1 | — | 1 when resctrl was read: mounted, and the same mount as at the last scan or scanned anew; 0 when it is unmounted or gone (no group samples then) |
//! | `rdt_scrape_complete` | gauge | 0 or 1 | — | 1 when every file of every group was read; 0 when some could not be (the groups are named in the log) |
//! | `rdt_scrape_duration_seconds` | gauge | seconds | — | time the last scrape's reads took |
//! | `rdt_scrape_read_errors_total` | counter | reads | — | reads that failed or did not parse |
//! | `rdt_group_scans_total` | counter | scans | — | scans of the resctrl group list |
//!
//! Label values: `group` is the path under the resctrl root (`/` for the root group,
//! `COS1`, `kubepods/mon_groups/x`), or `cores:LIST` / `pids:LIST` for a group this exporter
//! monitors itself; `kind` is `ctrl` or `mon`; `owner` is `ours` (pqos's `COS<n>` and
//! `pqos-<pid>-<n>` names) or `foreign`; `domain` is the cache id; `unit` of an MBA limit
//! is `percent` (Intel), `mibps` (Intel with resctrl's `mba_MBps`) or `amd_eighth_gbps`
//! (AMD, 1/8 GB/s). `region` is the memory region's id (ACPI MRRM: `0` DDR, `1` CXL on
//! the simulated `xeon-rdt13`), on region-aware series only. `pod_uid` and `container_id` appear where the group's tasks belong to
//! one Kubernetes pod or container. `namespace`, `pod` and `container` appear on the
//! monitor groups the NRI plugin (`rdt-agent nri --monitoring`) made for pods
//! (`<class>/mon_groups/<pod-uid>`), from its record in the run directory
//! (`nri-pods.json`, [`rdt_pqos::pods`]): the pod's namespace and name, and its
//! containers' names, sorted and `,`-separated (one group per pod holds them all).

use std::collections::HashMap;
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};
use rdt_pqos::resctrl::GroupSample;
use rdt_pqos::{GroupKind, GroupOwner, MbaLimit, MonValues, RegionValues, RmidEvent};

use crate::collect::{PodLabels, Scrape};

/// The `Content-Type` of [`encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The `Content-Type` of [`to_prometheus_text`]'s text.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

type Labels = Vec<(&'static str, String)>;

/// One metric family being filled: its samples, gauges or counters.
struct Family {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    /// A counter (else a gauge).
    counter: bool,
    samples: Vec<(Labels, u64)>,
}

impl Family {
    fn new(name: &'static str, help: &'static str, unit: Option<Unit>, kind: MetricType) -> Self {
        Self {
            name,
            help,
            unit,
            counter: matches!(kind, MetricType::Counter),
            samples: Vec::new(),
        }
    }
}

impl fmt::Debug for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.name)
            .field("samples", &self.samples.len())
            .finish_non_exhaustive()
    }
}

/// Every family of one scrape, encoded by the registry.
#[derive(Debug)]
struct Families(Vec<Family>);

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        for fam in &self.0 {
            if fam.samples.is_empty() {
                continue;
            }
            let kind = if fam.counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut metric =
                encoder.encode_descriptor(fam.name, fam.help, fam.unit.as_ref(), kind)?;
            let gauge = |v: u64| ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
            match fam.samples.as_slice() {
                // One sample without labels: the family's only one.
                [(labels, v)] if labels.is_empty() => {
                    if fam.counter {
                        ConstCounter::new(*v).encode(metric)?;
                    } else {
                        gauge(*v).encode(metric)?;
                    }
                }
                samples => {
                    for (labels, v) in samples {
                        let m = metric.encode_family(labels)?;
                        if fam.counter {
                            ConstCounter::new(*v).encode(m)?;
                        } else {
                            gauge(*v).encode(m)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The group labels of a resctrl group, with its pod's when it is a pod's monitor group.
fn group_labels(g: &GroupSample, pods: &HashMap<String, PodLabels>) -> Labels {
    let mut l: Labels = vec![
        (
            "group",
            if g.path.is_empty() {
                "/".to_owned()
            } else {
                g.path.clone()
            },
        ),
        ("kind", kind(g.kind).to_owned()),
        ("owner", owner(g.owner).to_owned()),
    ];
    if let Some(uid) = &g.container.pod_uid {
        l.push(("pod_uid", uid.clone()));
    }
    if let Some(id) = &g.container.container_id {
        l.push(("container_id", id.clone()));
    }
    if let Some(p) = pods.get(&g.path) {
        l.push(("namespace", p.namespace.clone()));
        l.push(("pod", p.pod.clone()));
        l.push(("container", p.container.clone()));
    }
    l
}

const fn kind(k: GroupKind) -> &'static str {
    match k {
        GroupKind::Control => "ctrl",
        GroupKind::Monitor => "mon",
    }
}

const fn owner(o: GroupOwner) -> &'static str {
    match o {
        GroupOwner::Pqos => "ours",
        GroupOwner::Foreign => "foreign",
    }
}

/// `base` with `extra` labels inserted after `group`.
fn with(base: &Labels, extra: &[(&'static str, String)]) -> Labels {
    let mut l = Vec::with_capacity(base.len() + extra.len());
    l.push(base[0].clone());
    l.extend_from_slice(extra);
    l.extend_from_slice(&base[1..]);
    l
}

/// The families of one scrape (module docs).
#[allow(clippy::too_many_lines)] // one table of families, read top to bottom
fn families(s: &Scrape) -> Vec<Family> {
    let mut occ = Family::new(
        "llc_occupancy",
        "LLC occupancy now, per group and L3 monitoring domain (resctrl mon_data/mon_L3_XX/llc_occupancy; IA32_QM_CTR event 1 on the MSR interface).",
        Some(Unit::Bytes),
        MetricType::Gauge,
    );
    let mut total = Family::new(
        "mbm_total",
        "Memory traffic to all NUMA nodes counted in all, per group and L3 domain (resctrl mbm_total_bytes): never decreases, across hardware counter wraps and re-creation of the group under the same name.",
        Some(Unit::Bytes),
        MetricType::Counter,
    );
    let mut local = Family::new(
        "mbm_local",
        "Memory traffic to the local NUMA node counted in all, per group and L3 domain (resctrl mbm_local_bytes): never decreases, as rdt_mbm_total_bytes_total.",
        Some(Unit::Bytes),
        MetricType::Counter,
    );
    let mut ways = Family::new(
        "cache_ways",
        "Cache ways the group may fill: set bits of its capacity bitmask, per cache schema (L3, L3CODE, L3DATA, L2, ...) and cache id (resctrl schemata).",
        None,
        MetricType::Gauge,
    );
    let mut mask = Family::new(
        "cache_mask",
        "The group's cache capacity bitmask as a number (bit n = way n), per cache schema and cache id (resctrl schemata).",
        None,
        MetricType::Gauge,
    );
    let mut mba = Family::new(
        "mba_limit",
        "Memory bandwidth limit per MBA schema (MB, SMBA) and L3 domain, in the unit the `unit` label names: percent of peak (Intel), mibps (MiB/s, resctrl mounted with mba_MBps), amd_eighth_gbps (AMD, 1/8 GB/s) (resctrl schemata).",
        None,
        MetricType::Gauge,
    );
    let mut cpus = Family::new(
        "group_cpus",
        "Logical CPUs assigned to the group (resctrl cpus_list; the CPUs of --monitor-cores).",
        None,
        MetricType::Gauge,
    );
    let mut tasks = Family::new(
        "group_tasks",
        "Threads in the group (resctrl tasks; a control group's include its monitor groups').",
        None,
        MetricType::Gauge,
    );
    for g in &s.groups {
        let base = group_labels(g, &s.pods);
        for c in &g.counters {
            let l = with(&base, &[("domain", c.domain.to_string())]);
            match c.event {
                RmidEvent::LlcOccupancy => occ.samples.push((l, c.bytes)),
                RmidEvent::MbmTotal => total.samples.push((l, c.bytes)),
                RmidEvent::MbmLocal => local.samples.push((l, c.bytes)),
            }
        }
        for a in &g.cache {
            let l = with(
                &base,
                &[
                    ("resource", a.schema.clone()),
                    ("domain", a.domain.to_string()),
                ],
            );
            ways.samples.push((l.clone(), u64::from(a.ways())));
            mask.samples.push((l, a.mask));
        }
        for b in &g.bandwidth {
            let unit = match b.limit {
                MbaLimit::Percent(_) => "percent",
                MbaLimit::MibPerSec(_) => "mibps",
                MbaLimit::AmdUnits(_) => "amd_eighth_gbps",
            };
            let l = with(
                &base,
                &[
                    ("resource", b.schema.clone()),
                    ("domain", b.domain.to_string()),
                    ("unit", unit.to_owned()),
                ],
            );
            mba.samples.push((l, u64::from(b.limit.value())));
        }
        if let Some(n) = g.cpus {
            cpus.samples.push((base.clone(), n as u64));
        }
        if let Some(n) = g.tasks {
            tasks.samples.push((base, n as u64));
        }
    }
    for (name, n, v) in &s.own {
        let base: Labels = vec![
            ("group", name.clone()),
            ("kind", "mon".to_owned()),
            ("owner", "ours".to_owned()),
        ];
        let regions = s.own_regions.get(name).map(Vec::as_slice);
        own_values(&base, v, regions, &mut occ, &mut total, &mut local);
        if let Some(n) = n {
            cpus.samples.push((base, *n as u64));
        }
    }
    let mut errors = Family::new(
        "scrape_read_errors",
        "Reads of resctrl files that failed or did not parse since start (each is one missing sample).",
        None,
        MetricType::Counter,
    );
    let mut scans = Family::new(
        "group_scans",
        "Scans of the resctrl group list since start (on start, on inotify events, on reads of removed groups, every --rescan-interval).",
        None,
        MetricType::Counter,
    );
    errors.samples.push((Vec::new(), s.read_errors));
    scans.samples.push((Vec::new(), s.scans));
    let mut up = Family::new(
        "up",
        "1 when resctrl was read (mounted, the same mount as at the last scan or scanned anew), 0 when it is unmounted or gone.",
        None,
        MetricType::Gauge,
    );
    up.samples.push((Vec::new(), u64::from(s.up)));
    let mut complete = Family::new(
        "scrape_complete",
        "1 when this scrape read every file of every group, 0 when some could not be read (the exporter's log names the groups).",
        None,
        MetricType::Gauge,
    );
    complete
        .samples
        .push((Vec::new(), u64::from(s.up && s.incomplete.is_empty())));
    vec![
        up, complete, occ, total, local, ways, mask, mba, cpus, tasks, errors, scans,
    ]
}

/// The per-domain values of one of the exporter's own groups; with `regions` (a platform
/// with memory regions) its local traffic per domain and region, `region`-labelled, in place
/// of the per-domain local series (a region whose counter is unavailable now has no sample).
fn own_values(
    base: &Labels,
    v: &MonValues,
    regions: Option<&[RegionValues]>,
    occ: &mut Family,
    total: &mut Family,
    local: &mut Family,
) {
    for d in &v.domains {
        let l = with(base, &[("domain", d.domain.get().to_string())]);
        if let Some(b) = d.llc_occupancy_bytes {
            occ.samples.push((l.clone(), b));
        }
        if let Some(b) = d.mbm_total_bytes {
            total.samples.push((l.clone(), b));
        }
        if let Some(b) = d.mbm_local_bytes.filter(|_| regions.is_none()) {
            local.samples.push((l, b));
        }
    }
    for r in regions.unwrap_or_default() {
        if let Some(b) = r.bytes {
            let l = with(
                base,
                &[
                    ("domain", r.domain.get().to_string()),
                    ("region", r.region.to_string()),
                ],
            );
            local.samples.push((l, b));
        }
    }
}

/// The scrape duration, in seconds (a float gauge: the only non-integer metric).
#[derive(Debug)]
struct ScrapeDuration(f64);

impl Collector for ScrapeDuration {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let g = ConstGauge::new(self.0);
        let m = encoder.encode_descriptor(
            "scrape_duration",
            "Time the reads of the last scrape took, in seconds.",
            Some(&Unit::Seconds),
            g.metric_type(),
        )?;
        g.encode(m)
    }
}

/// `s` as OpenMetrics text.
///
/// # Errors
/// Never in practice (writing to a `String`); the encoder's `fmt::Error`.
pub fn encode(s: &Scrape) -> Result<String, fmt::Error> {
    let mut registry = Registry::with_prefix("rdt");
    registry.register_collector(Box::new(Families(families(s))));
    registry.register_collector(Box::new(ScrapeDuration(s.duration.as_secs_f64())));
    let mut out = String::with_capacity(64 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &registry)?;
    if let Some(text) = &s.controller {
        splice_controller(&mut out, text);
    }
    Ok(out)
}

/// Puts the controller's families (`rdt_control_*`, as `rdt-agent` writes them) before the
/// `# EOF` of `out`. Only its `rdt_control_` lines and their `# HELP`/`# TYPE`/`# UNIT`
/// are taken: a damaged or foreign file cannot break the exposition.
fn splice_controller(out: &mut String, text: &str) {
    const EOF: &str = "# EOF\n";
    let ours = |l: &str| {
        let name = ["# HELP ", "# TYPE ", "# UNIT "]
            .iter()
            .find_map(|p| l.strip_prefix(p))
            .unwrap_or(l);
        name.starts_with("rdt_control_") && !l.contains(['\r', '\0'])
    };
    let lines: Vec<&str> = text.lines().filter(|l| ours(l)).collect();
    if lines.is_empty() || !out.ends_with(EOF) {
        return;
    }
    out.truncate(out.len() - EOF.len());
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(EOF);
}

/// OpenMetrics text as the Prometheus text format 0.0.4, for clients that do not ask for
/// OpenMetrics (curl, `promtool check metrics`): a counter family is named with its
/// `_total` suffix in `# HELP` and `# TYPE` (0.0.4 names families by their samples), and
/// the `# UNIT` and `# EOF` lines, which 0.0.4 does not have, are left out.
#[must_use]
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        if let Some((prefix, rest)) = meta {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            if counters.contains(&name) {
                out.push_str(&format!("{prefix}{name}_total {tail}\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_controllers_families_go_before_eof_and_nothing_else_of_its_file() {
        let mut out = "# HELP rdt_up x\n# TYPE rdt_up gauge\nrdt_up 1\n# EOF\n".to_owned();
        let agent = "# HELP rdt_control_actions Decisions.\n# TYPE rdt_control_actions counter\n\
                     rdt_control_actions_total{action=\"shrink_ways\",reason=\"contended\"} 1\n\
                     # EOF\nrdt_up 0\ngarbage line\n# HELP other_metric x\n";
        super::splice_controller(&mut out, agent);
        assert_eq!(
            out,
            "# HELP rdt_up x\n# TYPE rdt_up gauge\nrdt_up 1\n\
             # HELP rdt_control_actions Decisions.\n# TYPE rdt_control_actions counter\n\
             rdt_control_actions_total{action=\"shrink_ways\",reason=\"contended\"} 1\n# EOF\n"
        );
        let before = out.clone();
        super::splice_controller(&mut out, "rdt_up 5\n\u{0}");
        assert_eq!(
            out, before,
            "a file without controller lines changes nothing"
        );
    }

    use rdt_pqos::proc::ContainerIds;
    use rdt_pqos::resctrl::{BandwidthAllocation, CacheAllocation, CounterSample};

    use super::*;

    fn scrape() -> Scrape {
        Scrape {
            groups: vec![
                GroupSample {
                    path: String::new(),
                    kind: GroupKind::Control,
                    owner: GroupOwner::Pqos,
                    cpus: Some(8),
                    tasks: Some(100),
                    container: ContainerIds::default(),
                    cache: vec![CacheAllocation {
                        schema: "L3".into(),
                        domain: 0,
                        mask: 0x7ff,
                    }],
                    bandwidth: vec![BandwidthAllocation {
                        schema: "MB".into(),
                        domain: 0,
                        limit: MbaLimit::MibPerSec(6000),
                    }],
                    counters: vec![CounterSample {
                        domain: 0,
                        event: RmidEvent::MbmTotal,
                        bytes: 1 << 40,
                    }],
                },
                GroupSample {
                    path: "kubepods/mon_groups/x".into(),
                    kind: GroupKind::Monitor,
                    owner: GroupOwner::Foreign,
                    cpus: None,
                    tasks: Some(1),
                    container: ContainerIds {
                        pod_uid: Some("p".into()),
                        container_id: None,
                    },
                    cache: Vec::new(),
                    bandwidth: Vec::new(),
                    counters: vec![CounterSample {
                        domain: 1,
                        event: RmidEvent::LlcOccupancy,
                        bytes: 4096,
                    }],
                },
            ],
            read_errors: 3,
            scans: 2,
            up: true,
            incomplete: vec!["kubepods/mon_groups/x".into()],
            ..Scrape::default()
        }
    }

    #[test]
    fn region_traffic_of_an_own_group_is_labelled_with_its_region_in_place_of_the_domain_series() {
        use rdt_pqos::{CacheDomain, MemRegion};
        let mut s = scrape();
        let mut v = MonValues::default();
        v.domains.push(rdt_pqos::DomainValues {
            domain: CacheDomain::new(0),
            llc_occupancy_bytes: None,
            mbm_local_bytes: Some(1000),
            mbm_total_bytes: Some(2000),
            mbm_local_delta_bytes: None,
            mbm_total_delta_bytes: None,
        });
        s.own.push(("cores:2-10".into(), Some(9), v));
        let region = |r: u8, bytes: Option<u64>| RegionValues {
            domain: CacheDomain::new(0),
            region: MemRegion(r),
            bytes,
            delta_bytes: None,
        };
        let own = |s: &Scrape| {
            encode(s)
                .unwrap()
                .lines()
                .filter(|l| l.contains("cores:2-10") && l.starts_with("rdt_mbm_local"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        // without regions: the domain's series
        assert_eq!(
            own(&s),
            [
                "rdt_mbm_local_bytes_total{group=\"cores:2-10\",domain=\"0\",kind=\"mon\",owner=\"ours\"} 1000"
            ]
        );
        // with regions: one per region, none for an unavailable counter
        s.own_regions.insert(
            "cores:2-10".into(),
            vec![region(0, Some(700)), region(1, Some(300)), region(2, None)],
        );
        assert_eq!(
            own(&s),
            [
                "rdt_mbm_local_bytes_total{group=\"cores:2-10\",domain=\"0\",region=\"0\",kind=\"mon\",owner=\"ours\"} 700",
                "rdt_mbm_local_bytes_total{group=\"cores:2-10\",domain=\"0\",region=\"1\",kind=\"mon\",owner=\"ours\"} 300",
            ]
        );
        // the total series is untouched
        assert!(encode(&s).unwrap().contains(
            "rdt_mbm_total_bytes_total{group=\"cores:2-10\",domain=\"0\",kind=\"mon\",owner=\"ours\"} 2000"
        ));
    }

    #[test]
    fn a_pods_monitor_group_is_labelled_with_its_namespace_pod_and_containers() {
        let uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        let mut s = scrape();
        s.groups[1].path = format!("gold/mon_groups/{uid}");
        // from the plugin's record, through the run directory
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let mut pod = rdt_pqos::pods::PodRecord::capped(
            uid,
            "prod",
            "db-0",
            Some("Guaranteed"),
            &std::collections::BTreeMap::new(),
        );
        pod.containers = ["sidecar", "db"]
            .iter()
            .map(|n| rdt_pqos::pods::ContainerRecord::capped(n, n, "gold", Some("gold"), 1, ""))
            .collect();
        pod.mon_groups = vec![format!("gold/mon_groups/{uid}")];
        rdt_pqos::pods::PodsRecord {
            version: rdt_pqos::pods::VERSION,
            pods: vec![pod],
        }
        .write(&run)
        .unwrap();
        s.pods = crate::collect::pod_labels(&run).unwrap();
        let text = encode(&s).unwrap();
        let want = format!(
            "rdt_llc_occupancy_bytes{{group=\"gold/mon_groups/{uid}\",domain=\"1\",kind=\"mon\",owner=\"foreign\",pod_uid=\"p\",namespace=\"prod\",pod=\"db-0\",container=\"db,sidecar\"}} 4096"
        );
        assert!(text.contains(&want), "{text}");
        // the other groups have no pod labels; no record: none at all
        assert!(!text.contains("group=\"/\",namespace"), "{text}");
        assert!(
            crate::collect::pod_labels(&dir.path().join("none"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_scrape_becomes_the_documented_families_and_labels() {
        let text = encode(&scrape()).unwrap();
        for line in [
            "# TYPE rdt_mbm_total_bytes counter",
            "rdt_mbm_total_bytes_total{group=\"/\",domain=\"0\",kind=\"ctrl\",owner=\"ours\"} 1099511627776",
            "rdt_llc_occupancy_bytes{group=\"kubepods/mon_groups/x\",domain=\"1\",kind=\"mon\",owner=\"foreign\",pod_uid=\"p\"} 4096",
            "rdt_cache_ways{group=\"/\",resource=\"L3\",domain=\"0\",kind=\"ctrl\",owner=\"ours\"} 11",
            "rdt_cache_mask{group=\"/\",resource=\"L3\",domain=\"0\",kind=\"ctrl\",owner=\"ours\"} 2047",
            "rdt_mba_limit{group=\"/\",resource=\"MB\",domain=\"0\",unit=\"mibps\",kind=\"ctrl\",owner=\"ours\"} 6000",
            "rdt_group_cpus{group=\"/\",kind=\"ctrl\",owner=\"ours\"} 8",
            "rdt_group_tasks{group=\"kubepods/mon_groups/x\",kind=\"mon\",owner=\"foreign\",pod_uid=\"p\"} 1",
            "rdt_scrape_read_errors_total 3",
            "rdt_group_scans_total 2",
            "rdt_up 1",
            "rdt_scrape_complete 0",
            "# EOF",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(!text.contains("rdt_mbm_local"), "no samples, no family");
    }

    #[test]
    fn the_prometheus_text_form_names_counter_families_with_total_and_has_no_eof() {
        let om = encode(&scrape()).unwrap();
        let text = to_prometheus_text(&om);
        assert!(
            text.contains("# TYPE rdt_mbm_total_bytes_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP rdt_mbm_total_bytes_total Memory traffic"),
            "{text}"
        );
        assert!(text.contains("# TYPE rdt_llc_occupancy_bytes gauge\n"));
        assert!(
            !text.contains("# UNIT") && !text.contains("# EOF"),
            "{text}"
        );
        let samples = |t: &str| t.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(samples(&text), samples(&om));
    }
}
