//! Named classes declared in TOML, applied as one transaction and taken away again, as
//! `pqos --apply FILE` and `pqos --apply FILE --remove` do: `RDT_SIM=broadwell-ep cargo run
//! --features sim --example apply_classes` (a simulated platform, no root), or as root on an
//! RDT machine. The second plan of the same file is empty: applying converges.
use rdt_pqos::config::Config;
use rdt_pqos::proc::ProcFs;
use rdt_pqos::transaction::ApplyPlan as _;
use rdt_pqos::{Iface, OpenOptions};

const CLASSES: &str = r#"
[[class]]
name = "pipeline"
l3 = { ways = 4 }
cpus = "2-7"

[[class]]
name = "noisy"
l3 = { ways = 2 }
cpus = "8-10"
"#;

fn main() -> anyhow::Result<()> {
    let mut rdt = OpenOptions::new(Iface::Auto).platform_from_env().open()?;
    let config = Config::parse_toml(CLASSES, "classes.toml")?;
    let planned = config.plan(&mut rdt, &ProcFs::host())?;
    for warning in &planned.warnings {
        eprintln!("WARN: {warning}");
    }
    planned.plan.apply(&mut rdt).into_result()?; // all or nothing
    for (name, class) in &planned.classes {
        println!("{name}: class of service {}", class.get());
    }
    let again = config.plan(&mut rdt, &ProcFs::host())?;
    println!("writes left to make: {}", again.plan.steps().len());
    config
        .remove(&mut rdt)?
        .plan
        .apply(&mut rdt)
        .into_result()?; // the classes given up
    println!("removed");
    Ok(())
}
