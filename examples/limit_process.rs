//! Gives a process 4 cache ways and a 50 % memory bandwidth cap (class of service 1, every
//! L3 domain): `cargo run --example limit_process PID` (OS interface: resctrl mounted, or
//! `RDT_SIM=MODEL` with `--features sim`).
use rdt_pqos::{Backend, BackendExt, CacheBitmask, CatClass, CatMask, CatResource, ClassId, Iface};
use rdt_pqos::{MbaClass, MbaLimit, OpenOptions, TaskId, proc::ProcFs};

fn main() -> anyhow::Result<()> {
    let arg = std::env::args()
        .nth(1)
        .ok_or(anyhow::anyhow!("usage: limit_process PID"))?;
    let pid: TaskId = arg.parse()?;
    if !ProcFs::host().exists(pid) {
        anyhow::bail!("no process {pid}"); // before anything is written
    }
    let mut rdt = OpenOptions::new(Iface::Os)
        .needs_os("a process id")
        .platform_from_env()
        .open()?;
    let class = ClassId::new(1);
    let mask = CatMask::Unified(CacheBitmask::new(0xf)?); // the 4 lowest ways
    let mba = rdt.capabilities().mba.is_present();
    for domain in rdt.topology().l3_domains() {
        rdt.set_cat_classes(CatResource::L3, domain, &[CatClass { class, mask }])?;
        if mba {
            let limit = MbaLimit::Percent(50);
            let applied = rdt.set_mba_classes(domain, &[MbaClass { class, limit }])?;
            println!("L3 {domain}: 4 ways, MBA {:#}", applied[0].limit);
        }
    }
    rdt.associate_task(pid, class)?;
    println!("process {pid} is in COS{class}");
    Ok(())
}
