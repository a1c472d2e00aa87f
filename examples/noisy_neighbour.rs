//! The seed white paper's session on a simulated 2-socket Xeon E5-2650L v4, without root or
//! RDT hardware: `cargo run --features sim --example noisy_neighbour`. A pipeline on CPUs
//! 2-7 shares the 20-way LLC with a cache thrasher on CPUs 8-10: measure both, give them
//! separate ways (COS1 0xffe00, COS2 0x3) in one transaction, measure again, reset.
use rdt_pqos::transaction::{self, Change};
use rdt_pqos::{
    AllocReset, Backend, BackendExt, ClassId, MonEvents, OpenOptions, Rdt, monitor::MibPerSec,
};

fn measure(rdt: &mut Rdt, when: &str) -> anyhow::Result<()> {
    let events = MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL;
    let mut mon = rdt.monitoring(); // the groups stop when `mon` goes
    let groups = mon.start_many(&[("2-7".parse()?, events), ("8-10".parse()?, events)])?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    mon.poll()?;
    for (name, group) in ["pipeline", "thrasher"].into_iter().zip(groups) {
        let v = mon.values(group).expect("started");
        let local = MibPerSec::from_bytes_per_s(v.mbm_local_bytes_per_s().unwrap_or(0.0));
        let llc = v.llc_occupancy_bytes.unwrap_or(0) / 1024;
        println!("{when}: {name} LLC {llc} KiB, local {local:.1} MB/s");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut rdt = OpenOptions::simulated("broadwell-ep").open()?;
    measure(&mut rdt, "shared")?;
    let (pipeline, thrasher) = (ClassId::new(1), ClassId::new(2));
    let mut changes = Vec::new();
    for domain in rdt.topology().l3_domains() {
        changes.push(Change::l3(domain, pipeline, "0xffe00".parse()?));
        changes.push(Change::l3(domain, thrasher, "0x3".parse()?));
    }
    changes.extend((2..=7u32).map(|cpu| Change::cpu(cpu.into(), pipeline)));
    changes.extend((8..=10u32).map(|cpu| Change::cpu(cpu.into(), thrasher)));
    transaction::run(&mut rdt, &changes)?.into_result()?; // all or nothing
    measure(&mut rdt, "isolated")?;
    let reset = Change::Reset(AllocReset::default()); // the simulated platform persists
    transaction::run(&mut rdt, &[reset])?.into_result()?;
    Ok(())
}
