//! Ground truth for evaluating a controller: each workload's application metric and the
//! memory domains' load. Nothing here is a register or a kernel file a production backend
//! could read; it is exposed only through [`SimPlatform::workload_metrics`] /
//! [`SimPlatform::memory_domains`] (in-process, e.g. through a [`crate::SimHandle`] or a
//! [`crate::session::Session`]'s handle) and the mount's `.sim/workloads` file
//! ([`WORKLOADS_FORMAT`]).
//!
//! # Application metric
//! A workload with `instructions_per_op` ([`crate::Workload::instructions_per_op`]) does
//! `instructions/s ÷ instructions_per_op` operations per second on each of its CPUs (packets,
//! requests); a workload's rate is the sum over its CPUs, and its count since the scenario was
//! installed integrates that rate over the simulated clock (piecewise, as every counter:
//! [`SimPlatform::advance`]). It is not saved with the platform's state: a restored platform
//! counts from 0.
//!
//! # Memory domains
//! One per NUMA node of the topology (a package, or a Sub-NUMA cluster): its peak bandwidth
//! is the scenario's `memory_peak_gbps`, else the model's per-package peak
//! ([`model::MEMORY_PEAKS`], [`model::DEFAULT_MEMORY_PEAK`]) divided among the package's
//! nodes. A CPU's misses go `local_fraction` to its own node and the rest in equal parts to
//! every other node (all to its own when there is one node), which is also how its latency
//! mixes the nodes' ([`model`], "Memory bandwidth"). On a model with memory regions (RDT 1.3,
//! [`crate::mmio`]) a node's DDR and CXL are separate domains (node-major order), the CXL
//! one with [`crate::mmio::CXL_PEAK_BYTES_PER_S`] per package.

use std::fmt;
use std::time::Duration;

use rdt_core::CpuSet;

use crate::SimPlatform;
use crate::model::{self, CpuActivity, CpuLoad, Unloaded};

/// The load on one memory domain in the current steady state.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryDomainLoad {
    /// The NUMA node.
    pub node: u32,
    /// The memory region of the node this domain is, on a model with memory regions (RDT
    /// 1.3, [`crate::mmio`]: 0 DDR, 1 CXL, each with its own peak); `None` without regions.
    pub region: Option<u8>,
    /// Its peak bandwidth, bytes/s.
    pub peak_bytes_per_s: f64,
    /// The traffic it serves, bytes/s (at most the peak).
    pub demand_bytes_per_s: f64,
    /// `L`: its latency under this load, in units of its idle latency.
    pub latency_factor: f64,
}

impl MemoryDomainLoad {
    /// Demand ÷ peak (0..=1).
    #[must_use]
    pub fn utilization(&self) -> f64 {
        if self.peak_bytes_per_s > 0.0 {
            self.demand_bytes_per_s / self.peak_bytes_per_s
        } else {
            0.0
        }
    }
}

/// One workload of the scenario, now: the ground truth a controller is judged on.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadMetric {
    /// Its `name`, else `workload<i>` ([`crate::Assignment::label`]).
    pub name: String,
    /// Its CPUs.
    pub cpus: CpuSet,
    /// Whether it runs now (started and not stopped).
    pub running: bool,
    /// Application operations per second now; `None` without `instructions_per_op`.
    pub ops_per_s: Option<f64>,
    /// Operations since the scenario was installed; `None` without `instructions_per_op`
    /// in any phase so far.
    pub ops_total: Option<f64>,
    /// Instructions retired per second now, all its CPUs (0 while it does not run).
    pub instructions_per_s: f64,
    /// L3 bytes its data occupies now, all its CPUs and L3 domains (0 while it does not
    /// run: its CPUs' idle work is not its).
    pub occupancy_bytes: f64,
    /// Memory traffic now, bytes/s, all its CPUs (0 while it does not run).
    pub memory_bytes_per_s: f64,
}

/// The format of `.sim/workloads`: one JSON object per line per workload of the scenario,
/// in scenario order, with the fields `name` (string), `cpus` (CPU list string), `running`
/// (bool), `ops_per_s` and `ops` (numbers, `null` without `instructions_per_op`),
/// `instructions_per_s`, `occupancy_bytes` and `memory_bytes_per_s` (numbers), then one
/// line per memory domain: `{"memory_node":N,"peak_bytes_per_s":..,"demand_bytes_per_s":..,
/// "latency_factor":..}` (and `"memory_region":R` on a model with memory regions). Read-only ground truth for evaluation ([module docs](self)). The
/// constant lists a workload line's keys in order. Example line:
/// `{"name":"pipeline","cpus":"4,6,8,10,12,14","running":true,"ops_per_s":16000000.0,...}`.
pub const WORKLOADS_FORMAT: &str =
    "name cpus running ops_per_s ops instructions_per_s occupancy_bytes memory_bytes_per_s";

impl fmt::Display for WorkloadMetric {
    /// The `.sim/workloads` line ([`WORKLOADS_FORMAT`]), without the newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = serde_json::json!({
            "name": self.name,
            "cpus": self.cpus.to_string(),
            "running": self.running,
            "ops_per_s": self.ops_per_s,
            "ops": self.ops_total,
            "instructions_per_s": self.instructions_per_s,
            "occupancy_bytes": self.occupancy_bytes,
            "memory_bytes_per_s": self.memory_bytes_per_s,
        });
        write!(f, "{v}")
    }
}

impl fmt::Display for MemoryDomainLoad {
    /// The `.sim/workloads` line of a memory domain ([`WORKLOADS_FORMAT`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut v = serde_json::json!({
            "memory_node": self.node,
            "peak_bytes_per_s": self.peak_bytes_per_s,
            "demand_bytes_per_s": self.demand_bytes_per_s,
            "latency_factor": self.latency_factor,
        });
        if let (Some(r), Some(o)) = (self.region, v.as_object_mut()) {
            o.insert("memory_region".into(), r.into());
        }
        write!(f, "{v}")
    }
}

impl SimPlatform {
    /// Every workload of the scenario now, in scenario order: its application metric,
    /// occupancy and memory traffic ([module docs](self)). Ground truth for evaluating a
    /// controller; no register or kernel file shows it.
    #[must_use]
    pub fn workload_metrics(&self) -> Vec<WorkloadMetric> {
        let cpus = self.topology.cpus();
        self.scenario
            .workloads
            .iter()
            .enumerate()
            .map(|(k, a)| {
                let mut m = WorkloadMetric {
                    name: a.label(k),
                    cpus: a.cpus.clone(),
                    running: a.at(self.now.saturating_sub(self.epoch)).is_some(),
                    ops_per_s: None,
                    ops_total: None,
                    instructions_per_s: 0.0,
                    occupancy_bytes: 0.0,
                    memory_bytes_per_s: 0.0,
                };
                for (i, p) in cpus.iter().enumerate() {
                    if !a.cpus.contains(p.cpu) {
                        continue;
                    }
                    if !m.running {
                        continue; // its CPUs run the idle workload
                    }
                    let act = &self.activity[i];
                    m.occupancy_bytes += act.occupancy_bytes;
                    m.memory_bytes_per_s += act.traffic_bytes_per_s;
                    m.instructions_per_s += act.instructions_per_s;
                    if let Some(Some((_, per_op))) = self.cpu_metric.get(i) {
                        *m.ops_per_s.get_or_insert(0.0) += act.instructions_per_s / per_op;
                    }
                }
                let ever = a.workload.instructions_per_op.is_some()
                    || a.phases
                        .iter()
                        .any(|p| p.workload.instructions_per_op.is_some());
                if ever {
                    m.ops_total = Some(self.ops.get(k).copied().unwrap_or(0.0));
                    m.ops_per_s.get_or_insert(0.0);
                }
                m
            })
            .collect()
    }

    /// The memory domains now, by NUMA node ([module docs](self)).
    #[must_use]
    pub fn memory_domains(&self) -> &[MemoryDomainLoad] {
        &self.memory
    }

    /// `.sim/workloads` ([`WORKLOADS_FORMAT`]).
    #[must_use]
    pub fn workloads_text(&self) -> String {
        let mut s = String::new();
        for m in self.workload_metrics() {
            s.push_str(&m.to_string());
            s.push('\n');
        }
        for d in &self.memory {
            s.push_str(&d.to_string());
            s.push('\n');
        }
        s
    }

    /// The peak bandwidth of each memory domain of `nodes` (sorted), bytes/s.
    fn memory_peaks(&self, nodes: &[u32]) -> Vec<f64> {
        if let Some(peak) = self.scenario.memory_peak_bytes_per_s {
            return vec![peak; nodes.len()];
        }
        let package_peak = model::MEMORY_PEAKS
            .iter()
            .find(|(name, _, _)| *name == self.model)
            .map_or(model::DEFAULT_MEMORY_PEAK, |(_, peak, _)| *peak);
        nodes
            .iter()
            .map(|&node| package_peak / self.nodes_in_package_of(node))
            .collect()
    }

    /// How many NUMA nodes the package of `node` has (at least 1).
    fn nodes_in_package_of(&self, node: u32) -> f64 {
        let cpus = self.topology.cpus();
        let package = cpus.iter().find(|c| c.node == node).map(|c| c.package);
        let mut siblings: Vec<u32> = cpus
            .iter()
            .filter(|c| Some(c.package) == package)
            .map(|c| c.node)
            .collect();
        siblings.sort_unstable();
        siblings.dedup();
        #[allow(clippy::cast_precision_loss)] // a handful of nodes
        let n = siblings.len().max(1) as f64;
        n
    }
}

/// The CPUs' activities under memory contention and the memory domains' loads, from each
/// CPU's workload and unloaded activity (topology order).
pub(crate) fn contend(
    p: &SimPlatform,
    workloads: &[&crate::Workload],
    unloaded: Vec<Unloaded>,
) -> (Vec<CpuActivity>, Vec<MemoryDomainLoad>) {
    let cpus = p.topology.cpus();
    let mut nodes: Vec<u32> = cpus.iter().map(|c| c.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let node_peaks = p.memory_peaks(&nodes);
    // With memory regions (RDT 1.3: DDR and CXL) each node's regions are domains of their own,
    // node-major: (node 0, region 0), (node 0, region 1), (node 1, region 0), ...
    let regions = if p.mmio.is_some() {
        crate::mmio::REGIONS
    } else {
        1
    };
    let peaks: Vec<f64> = node_peaks
        .iter()
        .zip(&nodes)
        .flat_map(|(&peak, &node)| (0..regions).map(move |r| (peak, node, r)))
        .map(|(peak, node, r)| {
            if r == 0 {
                peak
            } else {
                crate::mmio::CXL_PEAK_BYTES_PER_S / p.nodes_in_package_of(node)
            }
        })
        .collect();
    let loads: Vec<CpuLoad> = unloaded
        .into_iter()
        .zip(cpus)
        .zip(workloads)
        .enumerate()
        .map(|(i, ((u, c), w))| {
            let own = nodes.binary_search(&c.node).unwrap_or(0);
            let by_node = CpuLoad::node_shares(own, w.local_fraction.clamp(0.0, 1.0), nodes.len());
            let split = p.region_traffic_of(i).map(|(split, _)| split);
            let shares = by_node
                .iter()
                .flat_map(|&n| {
                    (0..regions).map(move |r| match split {
                        Some(split) => n * split[r],
                        None if r == 0 => n,
                        None => 0.0,
                    })
                })
                .collect();
            CpuLoad {
                unloaded: u,
                shares,
            }
        })
        .collect();
    let sol = model::solve_memory(&loads, &peaks);
    let memory = nodes
        .iter()
        .flat_map(|&node| (0..regions).map(move |r| (node, r)))
        .enumerate()
        .map(|(d, (node, r))| MemoryDomainLoad {
            node,
            region: (regions > 1).then(|| u8::try_from(r).unwrap_or(u8::MAX)),
            peak_bytes_per_s: peaks[d],
            demand_bytes_per_s: sol.demand[d],
            latency_factor: sol.latency[d],
        })
        .collect();
    (sol.activity, memory)
}

/// Per CPU: (its assignment's index, instructions per operation) where the workload it runs
/// at `now` has a metric.
pub(crate) fn cpu_metrics(p: &SimPlatform, now: Duration) -> Vec<Option<(usize, f64)>> {
    p.topology
        .cpus()
        .iter()
        .map(|c| {
            let (k, a) = p
                .scenario
                .workloads
                .iter()
                .enumerate()
                .find(|(_, a)| a.cpus.contains(c.cpu))?;
            let per_op = a.at(now)?.instructions_per_op?;
            (per_op > 0.0).then_some((k, per_op))
        })
        .collect()
}

/// Adds `dt` seconds of every workload's operations to its count.
pub(crate) fn add_ops(p: &mut SimPlatform, dt: f64) {
    if p.ops.len() != p.scenario.workloads.len() {
        p.ops.resize(p.scenario.workloads.len(), 0.0);
    }
    for (m, a) in p.cpu_metric.iter().zip(&p.activity) {
        if let Some((k, per_op)) = m
            && let Some(ops) = p.ops.get_mut(*k)
        {
            *ops += a.instructions_per_s * dt / per_op;
        }
    }
}
