//! Monitors CPUs and PIDs every second, printing Prometheus text for each of SAMPLES polls:
//! `cargo run --example monitor_prometheus SAMPLES CPUS [PID,...]`.
use rdt_pqos::{BackendExt, Iface, MonEvents, MonValues, OpenOptions, TaskId};

const FAMILIES: [&str; 3] = ["llc_occupancy", "mbm_local", "mbm_total"];
fn bytes(v: &MonValues) -> [Option<u64>; 3] {
    [v.llc_occupancy_bytes, v.mbm_local_bytes, v.mbm_total_bytes]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(samples), Some(cpus)) = (args.first(), args.get(1)) else {
        anyhow::bail!("usage: monitor_prometheus SAMPLES CPUS [PID,...]");
    };
    let mut rdt = OpenOptions::new(Iface::Auto).platform_from_env().open()?;
    let events = MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL | MonEvents::MBM_TOTAL;
    let mut mon = rdt.monitoring(); // every group stops when `mon` goes
    let cpu_group = mon.start(&cpus.parse()?, events)?;
    let mut groups = vec![(format!("cpus=\"{cpus}\""), cpu_group)];
    if let Some(pids) = args.get(2) {
        let tasks: Result<Vec<TaskId>, _> = pids.split(',').map(str::parse).collect();
        let task_group = mon.start_tasks(&tasks?, events)?;
        groups.push((format!("pids=\"{pids}\""), task_group));
    }
    for n in 0..samples.parse::<u64>()? {
        std::thread::sleep(std::time::Duration::from_secs(u64::from(n > 0)));
        mon.poll()?;
        for (i, name) in FAMILIES.iter().enumerate() {
            let kind = if i == 0 { "gauge" } else { "counter" };
            let total = if i == 0 { "" } else { "_total" };
            println!("# TYPE rdt_{name}_bytes{total} {kind}");
            for (labels, g) in &groups {
                if let Some(b) = mon.values(*g).and_then(|v| bytes(v)[i]) {
                    println!("rdt_{name}_bytes{total}{{{labels}}} {b}");
                }
            }
        }
    }
    Ok(())
}
