//! Prints what the platform can do: `cargo run --example capabilities` (as root on an RDT
//! machine), `RDT_SIM=skylake-sp cargo run --features sim --example capabilities` (a
//! simulated one, no root), or with RDT_SYSROOT=DIR on a platform `rdt-sim mount DIR` serves.
use rdt_pqos::{Backend, CatResource, Iface, OpenOptions};

fn main() -> anyhow::Result<()> {
    let rdt = OpenOptions::new(Iface::Auto).platform_from_env().open()?;
    let caps = rdt.capabilities();
    let topo = rdt.topology();
    println!("{:?} via the {:?} interface", caps.vendor, rdt.interface());
    println!(
        "CPUs {}, L3 domains {:?}",
        topo.all_cpus(),
        topo.l3_domains()
    );
    for res in [CatResource::L3, CatResource::L2] {
        match caps.cat(res) {
            Some(c) => println!(
                "{res} CAT: {}-bit CBM, {} classes, CDP {}",
                c.cbm_len,
                c.usable_classes(),
                if c.cdp_enabled { "on" } else { "off" }
            ),
            None => println!("{res} CAT: no"),
        }
    }
    match caps.mba.get() {
        Some(m) => println!("MBA: {} classes, step {}", m.num_classes, m.granularity()),
        None => println!("MBA: no"),
    }
    println!("monitoring: {}", caps.supported_events().describe());
    Ok(())
}
