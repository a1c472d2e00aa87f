//! A container runtime's use of `rdt_pqos::oci`: reads an OCI bundle's `config.json`, puts
//! the container's process in the resctrl group its `linux.intelRdt` asks for, waits for the
//! process to exit (the container's life), prints its statistics as runc's `events --stats`
//! does when `enableMonitoring` is set (JSON, runc's field names), then deletes the group if
//! it was the container's own:
//! `cargo run --features oci --example oci_runtime CONFIG.json CONTAINER_ID PID`.
use oci_spec::runtime::Spec;
use rdt_pqos::{Iface, OpenOptions, TaskId, oci, proc::ProcFs};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: oci_runtime CONFIG.json CONTAINER_ID PID";
    let (config, id, pid) = (args.next(), args.next(), args.next());
    let (Some(config), Some(id), Some(pid)) = (config, id, pid) else {
        anyhow::bail!(usage);
    };
    let pid: TaskId = pid.parse()?;
    let spec = Spec::load(&config)?;
    let Some(rdt_spec) = spec.linux().as_ref().and_then(|l| l.intel_rdt().clone()) else {
        println!("no linux.intelRdt: resctrl is left alone"); // runtime-spec: MUST NOT touch it
        return Ok(());
    };
    let mut rdt = OpenOptions::new(Iface::Os).platform_from_env().open()?;
    let placed = oci::apply(&mut rdt, &rdt_spec, &id, pid)?;
    println!(
        "container {id}: process {pid} in resctrl group {}",
        placed.group
    );
    while ProcFs::host().exists(pid) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if placed.monitor.is_some() {
        let stats = oci::stats(&mut rdt, &placed)?;
        println!(
            "container {id}: intel_rdt {}",
            serde_json::to_string(&stats)?
        );
    }
    println!(
        "container {id}: group {:?} on delete",
        oci::remove(&mut rdt, &placed)?
    );
    Ok(())
}
