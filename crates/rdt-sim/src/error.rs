//! Errors of the simulated platform.

use std::io;
use std::path::PathBuf;

/// Building, restoring or saving a simulated platform failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The name is not one of [`crate::BUILTIN_MODELS`].
    #[error("unknown simulated platform model `{name}` (built-in models: {})", crate::BUILTIN_MODELS.join(", "))]
    UnknownModel {
        /// The name asked for.
        name: String,
    },
    /// The `rdt=` boot parameter of a model spec (`NAME:rdt=LIST`) names an unknown flag.
    #[error(transparent)]
    RdtOptions(crate::quirks::RdtOptionsError),
    /// The CPUID dump could not be parsed.
    #[error("the CPUID dump of model `{model}` could not be parsed")]
    Dump {
        /// The model (built-in name, or `dump` for a user-supplied file).
        model: String,
        /// The parser's error.
        #[source]
        source: rdt_core::DumpError,
    },
    /// The topology could not be derived from the dump's per-CPU leaves.
    #[error("the topology of model `{model}` could not be derived from its CPUID dump")]
    Topology {
        /// The model.
        model: String,
        /// The topology builder's error.
        #[source]
        source: rdt_core::TopologyError,
    },
    /// The platform has no CPUs.
    #[error("model `{model}` has no logical CPUs")]
    NoCpus {
        /// The model.
        model: String,
    },
    /// The dump enumerates none of the features the model simulates (CMT/MBM, L3/L2 CAT, MBA).
    #[error(
        "model `{model}` has no RDT/PQoS feature to simulate (CPUID enumerates no monitoring or allocation)"
    )]
    NoRdt {
        /// The model.
        model: String,
    },
    /// The dump claims a table size no platform has (2^31 RMIDs, thousands of classes):
    /// refused before anything is sized from it.
    #[error("model `{model}` claims a capability no platform has")]
    Implausible {
        /// The model.
        model: String,
        /// The value out of range.
        #[source]
        source: rdt_core::ImplausibleError,
    },
    /// A saved state is not valid JSON of the expected shape.
    #[error("the simulator state is not valid")]
    StateFormat {
        /// The JSON decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A saved state belongs to another model (or another dump).
    #[error("the simulator state is for model `{found}`, not `{expected}`")]
    StateMismatch {
        /// This platform's model identity.
        expected: String,
        /// The state's model identity.
        found: String,
    },
    /// A saved state does not fit this platform (a CPU, domain, register count or value the
    /// model does not have).
    #[error("the simulator state does not fit model `{model}`: {problem}")]
    StateInvalid {
        /// The model identity.
        model: String,
        /// What does not fit.
        problem: String,
    },
    /// Reading or writing a state file failed.
    #[error("failed to {op} {path}")]
    Io {
        /// `"read"`, `"write"`, `"rename to"`, ...
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// I/O traffic set on a channel the model does not have, or of a rate or occupancy that
    /// is not a finite non-negative number ([`crate::SimPlatform::set_io_traffic`]).
    #[error("I/O traffic: {problem}")]
    IoTraffic {
        /// What is wrong, naming the channel or value.
        problem: String,
    },
    /// A scenario is invalid for this platform.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
}

/// A scenario file is malformed, or does not fit the platform.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The text is not JSON.
    #[error("scenario is not valid JSON (line {line}, column {column})")]
    Syntax {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The JSON parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A field is missing, unknown, of the wrong type or out of range.
    #[error("scenario field `{field}`: {problem}")]
    Field {
        /// Path of the field, e.g. `workloads[1].local_fraction`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A workload names a CPU the platform does not have.
    #[error("scenario field `{field}`: CPU {cpu} does not exist on this platform")]
    NoSuchCpu {
        /// Path of the `cpus` field.
        field: String,
        /// The CPU.
        cpu: u32,
    },
    /// Two workloads name the same CPU.
    #[error("scenario field `{field}`: CPU {cpu} is already given to an earlier workload")]
    CpuTwice {
        /// Path of the second `cpus` field.
        field: String,
        /// The CPU.
        cpu: u32,
    },
    /// Reading a scenario file failed.
    #[error("failed to read scenario file {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// `builtin:NAME` names no built-in scenario.
    #[error("unknown built-in scenario `{name}` (built-in scenarios: {})", crate::BUILTIN_SCENARIOS.join(", "))]
    UnknownBuiltin {
        /// The name asked for.
        name: String,
    },
}
