//! The noisy-neighbour controller as a library, on the in-process simulated platform:
//! `cargo run --features sim --example controller`. The seed white paper's experiment on a
//! simulated Xeon Gold 6140 (skylake-sp): a DPDK pipeline on CPUs 4-14 (even), a stress-ng
//! aggressor on CPUs 16-20 (even) that starts 10 s in (rdt-sim's built-in scenario
//! `dpdk-pipeline-aggressor-at-10s`). The controller runs for 30 simulated seconds (the
//! program advances the model's clock, so it takes well under a second), prints each of its
//! decisions as a JSON line, then gives back the allocation it found with one call,
//! `Agent::restore`, as `rdt-agent --on-exit restore` does.
use std::time::Duration;

use rdt_pqos::config::policy::Policy;
use rdt_pqos::control::Agent;
use rdt_pqos::proc::ProcFs;
use rdt_pqos::sim::SessionOptions;
use rdt_pqos::{Iface, OpenOptions};

/// crates/rdt-agent/policies/paper.toml: protect the pipeline (its throughput alone is the
/// target), squeeze the aggressor down to 1 way and 10 % MBA at most.
const POLICY: &str = r#"
[[protected]]
name = "pipeline"
cpus = "4,6,8,10,12,14"
target = "alone"

[[best_effort]]
name = "aggressor"
cpus = "16,18,20"
min_ways = 1
min_mba_percent = 10
"#;

fn main() -> anyhow::Result<()> {
    let session = SessionOptions {
        scenario: Some("builtin:dpdk-pipeline-aggressor-at-10s".into()),
        fresh: true,       // start from the model's reset state
        wall_clock: false, // the clock moves when this program advances it
        ..SessionOptions::new("skylake-sp")
    };
    let mut rdt = OpenOptions::new(Iface::Msr).simulate(session).open()?;
    let policy = Policy::parse_toml(POLICY, "paper.toml")?;
    let interval = policy.interval;
    let sim = rdt
        .simulated()
        .expect("a simulated platform")
        .handle()
        .clone();
    let mut agent = Agent::start(&mut rdt, policy, &ProcFs::host(), false)?;
    let mut t = Duration::ZERO;
    while t < Duration::from_secs(30) {
        sim.advance(interval);
        t += interval;
        for event in agent.tick(&mut rdt, t)?.events {
            println!("{}", event.to_json_line());
        }
    }
    let restored = agent.restore(&mut rdt)?; // monitoring stopped, the allocation found back
    println!("restored {} class(es) as found", restored.classes);
    Ok(())
}
