//! End-to-end tests: the built `pqos` binary (`CARGO_BIN_EXE_pqos`) run as a user runs it,
//! against the simulated platform: in process (`--sim`) or FUSE-mounted (`--sysroot DIR`).
//! One test binary, one `mod` per area. The facade library's own tests against a mounted
//! platform live in the root package's `tests/`.
#![allow(clippy::tests_outside_test_module)]

// Shared helpers: running the built `pqos` binary on a `Machine`, a private sim state (`Sim`)
// or a FUSE-mounted model (`Mounted`, `MountedOs`), and reading its monitoring text back.
mod util;

// What the unit tests cannot reach: the process's own argument list (-f expanded in place),
// -H before any platform is opened, -l log files, RDT_IFACE, real exit codes and streams.
mod cli;

// The seed white paper's commands (-e, -a, -s, -m) on the simulated Broadwell-EP.
mod paper;

// CDP, L2 CAT, MBA and AMD per-CCX domains on the other built-in models.
mod alloc;

// Malformed or out-of-range arguments: clear errors and nothing written.
mod bad_input;

// Monitoring output: golden layouts from real pqos samples, CSV and XML consumers, signals,
// a closed pipe, a simulated day of counter wraps.
mod monitor_output;

// The host itself, without --sim.
mod native;

// paper.rs's and alloc.rs's scenarios again through `pqos --iface=msr --sysroot DIR` on a
// FUSE-mounted simulated platform: DevCpuMsr's positioned reads, DevCpuid, the sysfs parser.
mod sysroot;

// Every command of "pqos runs end to end" through `pqos --iface=os --sysroot DIR`, checked in
// the resctrl files: tasks and PIDs, CLOSIDs and RMIDs running out, kernel rejections,
// another tool's groups, two pqos at once, faults midway.
mod os_mode;

// AMD ABMC counters, BMEC / event_filter (--mbm-config), SNC and what -d/-D add, on the
// in-process OS interface of turin, genoa and sapphire-rapids-snc2.
mod amd_mon;

// A monitoring agent's CSV flow (Telegraf intel_rdt) on --sim and on the mount: OS
// interface in-process, IPC from the model's PMU, a busy process's activity.
mod agent;

// All or nothing under faults and SIGKILL at every write position.
mod crash;

// pqos v26.03's MMIO interface on xeon-rdt13: region monitoring, region MBA, -R, SIGKILL.
mod mmio;

// `pqos --apply FILE`: named classes from TOML, idempotent, all or nothing.
mod declarative;

// Named classes are pqos's own: -R gives them up, `--apply FILE --remove` takes them away
// (the tree or the registers as before), another tool's group of a name is never touched.
mod named;

// `-u json`: pure JSON on stdout, every document valid against docs/json's schemas.
mod json;

// The run directory: another user's refused, one per platform whatever its spelling.
mod rundir;

// `rdtset`: a command in a class of its own, given back when it ends.
mod rdtset;

// `pqos --apply FILE.yaml`: goresctrl's documented configurations on the in-process
// simulated platform (OS interface), idempotent, invalid ones refused naming the key.
mod goresctrl;

// `--apply` converges: exactly the members a file says (CPUs and tasks no longer listed go
// back to COS0), every value form re-applied writes nothing, on both interfaces.
mod converge;

// Issue 34: pqos's AMD -v lines, -e's CCX order, -R's AMD value, -r on turin's counters,
// MBA 4.0 and top-pids mode.
mod pqos_compat4;

// What pqos says is what happened: no success line for a change the `--sim` state did not
// keep, an error keeps its errno's kind, a read-only user reads a shared state, and names
// reach the terminal escaped.
mod words;

// Issue 34: pqos v26.03's RDT 1.3 table reports (--print-mem-regions, --print-topology,
// --print-dump-info) and register dumps (--dump, --dump-rmid-regs) on xeon-rdt13.
mod mmio_tables;

// Issue 34: I/O RDT: -R l3iordt-on/off on a part whose L3 CAT enumerates it; -r
// l3iordt-on/off and snc-local/snc-total (the monitoring reset options).
mod iordt;
