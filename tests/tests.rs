//! Integration tests of the facade library: the platform opened on the simulated platform
//! FUSE-mounted in a temp dir (`rdt_sim::fs::testing::TestMount`, [`mounted`]). Tests that run the `pqos`
//! binary live with it, in `crates/pqos-cli/tests/e2e`, where Cargo builds it for them.
#![allow(clippy::tests_outside_test_module)]

// The MSR interface under a sysroot: CPUID, topology and registers from the mounted files.
mod sysroot;

// One monitoring accumulator: both interfaces give the same values for the same traffic,
// including an unreadable domain.
mod monitoring;

// Monitoring and leases cannot leak: guards stop their groups and give their classes back,
// and a killed run's groups, RMIDs and leased class are given back at the next open, on both
// interfaces.
mod reclaim;

// The examples of examples/, run against the mounted simulated platform.
mod examples;

// Every README.md line that starts a project program runs as written and exits 0.
mod readme;
// The README's and the guide's console blocks print what they show; their links resolve.
mod docs;

// The OS interface: Iface::Os | Iface::Auto on the mounted platform's resctrl,
// allocation, monitoring and task association through the facade.
mod resctrl;

// The transaction API as a program uses it, on both interfaces.
mod transaction;

// The library's shape over its sources: a small Backend, a facade that forwards only it,
// one CAT check.
mod shape;

// OCI runtime-spec `linux.intelRdt` fragments through `rdt_pqos::oci` (feature `oci`).
#[cfg(feature = "oci")]
mod oci;

// The noisy-neighbour controller on the in-process simulated platform (feature `sim`).
#[cfg(feature = "sim")]
mod control;

// The MMIO interface (RDT 1.3) on the in-process xeon-rdt13 (feature `sim`): region
// counters and region MBA as transaction steps.
#[cfg(feature = "sim")]
mod mmio;

// I/O RDT channel monitoring on the in-process xeon-rdt13 (feature `sim`).
#[cfg(feature = "sim")]
mod iomon;

// Node Feature Discovery's feature file of each simulated model, read as NFD reads it
// (feature `sim`).
#[cfg(feature = "sim")]
mod nfd;

// Opening the mounted simulated platform (shared with the benches).
#[path = "support/mounted.rs"]
mod support;
use support::mounted;
