//! A noisy-neighbour controller: the seed white paper's feedback loop (monitor occupancy,
//! find the aggressor, apply CAT, check the gain; Intel, "Increasing Platform Determinism
//! with Platform Quality of Service for the Data Plane Development Kit", 2016, Figure 5),
//! automated and made safe.
//!
//! A [policy](rdt_config::policy::Policy) names the workloads to protect and the
//! best-effort ones. Each interval the [`Agent`] reads one monitoring group per workload
//! (LLC occupancy, memory traffic, IPC), the [`Engine`] decides, and each change is one
//! journaled transaction on the best-effort workloads' named classes: fewer L3 ways, more
//! MBA throttling, undone when it did not help, given back when the pressure is gone.
//! Nothing else is written: protected workloads stay where they are, other tools' groups
//! are never touched. Every decision is an [`Event`] (JSON lines) and counted in
//! [`Metrics`] (`rdt_control_actions_total{action,reason}`, ways and MBA per class).
//!
//! The [`engine`] is pure (no I/O): its rules are in its module docs.

pub mod agent;
pub mod app;
pub mod engine;
pub mod event;
mod regions;
pub mod stop;

pub use agent::{Agent, AgentError, METRICS_FILE, RunOptions};
pub use engine::{
    ActionKind, CapacitySource, Decision, Engine, Evidence, Facts, MbaScale, MbaUnit, Pressure,
    Reading, Reason, Setting,
};
pub use event::{Event, Metrics};
pub use stop::Stopper;

#[cfg(test)]
mod engine_tests;
