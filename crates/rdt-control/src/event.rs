//! What the controller tells: one [`Event`] per decision (a JSON line), and [`Metrics`]
//! in the OpenMetrics text format.

use std::collections::BTreeMap;
use std::fmt;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::engine::{Decision, Reading, Setting};

/// One workload's readings in an event, with its health (protected workloads only: share
/// of its target).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Observed {
    /// The readings over the interval.
    #[serde(flatten)]
    pub reading: Reading,
    /// Share of its target, for a protected workload whose reading is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<f64>,
}

/// One decision of the controller, with what drove it.
///
/// As a JSON line ([`Event::to_json_line`]):
/// `{"t_s":11.0,"class":"batch","action":"shrink_ways","from":{"ways":20,"mba_percent":100},
/// "to":{"ways":2,"mba_percent":100},"reason":"contended","workload":"pipeline",
/// "health":0.61,"readings":{"pipeline":{"llc_bytes":...,"ipc":1.1,"health":0.61},...},
/// "applied":true}`. On a part whose MBA limits are absolute bandwidth (AMD) the
/// allocations say `"mba_gbps":5.5` instead of `"mba_percent"` ([`Setting`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Event {
    /// Seconds since the controller started.
    pub t_s: f64,
    /// The best-effort class acted on.
    pub class: String,
    /// The decision: `action`, `from`, `to`, `reason` and the reason's details.
    #[serde(flatten)]
    pub decision: Decision,
    /// Every workload's readings of the interval, by name.
    pub readings: BTreeMap<String, Observed>,
    /// Whether it was written (false in advisory mode, or when the write failed).
    pub applied: bool,
    /// Why the write failed (the platform is as before it: the transaction undid it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Event {
    /// The event as one line of JSON, without the newline.
    #[must_use]
    pub fn to_json_line(&self) -> String {
        // Only strings, numbers and maps with string keys: serialisation cannot fail; a
        // non-finite number is written as `null` by serde_json.
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkloadLabels {
    workload: String,
}

/// The controller's metrics:
/// - `rdt_control_actions_total{action,reason}`: decisions, counted when made (applied or
///   advisory);
/// - `rdt_control_class_ways{class}`, and `rdt_control_class_mba_percent{class}` (a part
///   whose MBA is a percent, Intel) or `rdt_control_class_mba_gbps{class}` (one whose MBA
///   limits are GB/s, AMD; GB/s = 10^9 bytes/s): each best-effort class's allocation as
///   last read or written;
/// - `rdt_control_health_ratio{workload}`: each protected workload's health (share of its
///   target) at the last interval.
pub struct Metrics {
    registry: Registry,
    actions: Family<ActionLabels, Counter>,
    ways: Family<ClassLabels, Gauge>,
    mba: Family<ClassLabels, Gauge>,
    mba_gbps: Family<ClassLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    health: Family<WorkloadLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    counts: BTreeMap<(&'static str, &'static str), u64>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("actions", &self.counts)
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty metrics, registered.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let actions = Family::<ActionLabels, Counter>::default();
        let ways = Family::<ClassLabels, Gauge>::default();
        let mba = Family::<ClassLabels, Gauge>::default();
        let mba_gbps = Family::default();
        let health = Family::default();
        registry.register(
            "rdt_control_actions",
            "Decisions of the noisy-neighbour controller, by action and reason",
            actions.clone(),
        );
        registry.register(
            "rdt_control_class_ways",
            "L3 ways of each best-effort class",
            ways.clone(),
        );
        registry.register(
            "rdt_control_class_mba_percent",
            "MBA of each best-effort class, percent (100: not throttled)",
            mba.clone(),
        );
        registry.register(
            "rdt_control_class_mba_gbps",
            "MBA limit of each best-effort class, GB/s per L3 domain, where MBA limits are \
             absolute bandwidth (AMD; 2^width/8 GB/s: not throttled)",
            mba_gbps.clone(),
        );
        registry.register(
            "rdt_control_health_ratio",
            "Each protected workload's reading divided by its target",
            health.clone(),
        );
        Self {
            registry,
            actions,
            ways,
            mba,
            mba_gbps,
            health,
            counts: BTreeMap::new(),
        }
    }

    /// Counts a decision.
    pub fn count(&mut self, d: &Decision) {
        let (action, reason) = (d.action.name(), d.reason.name());
        self.actions
            .get_or_create(&ActionLabels {
                action: action.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
        *self.counts.entry((action, reason)).or_default() += 1;
    }

    /// Sets a class's allocation.
    pub fn set_class(&self, class: &str, s: Setting) {
        let l = ClassLabels {
            class: class.to_owned(),
        };
        self.ways.get_or_create(&l).set(i64::from(s.ways));
        match s.mba_gbps() {
            Some(g) => {
                self.mba_gbps.get_or_create(&l).set(g);
            }
            None => {
                self.mba.get_or_create(&l).set(i64::from(s.mba));
            }
        }
    }

    /// Sets a protected workload's health.
    pub fn set_health(&self, workload: &str, health: f64) {
        self.health
            .get_or_create(&WorkloadLabels {
                workload: workload.to_owned(),
            })
            .set(health);
    }

    /// The decisions counted, by (action, reason).
    #[must_use]
    pub const fn counts(&self) -> &BTreeMap<(&'static str, &'static str), u64> {
        &self.counts
    }

    /// The metrics in the OpenMetrics text format.
    ///
    /// # Errors
    /// Never in practice (writing to a `String`).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}
