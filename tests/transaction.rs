//! The transaction API as a program uses it, on both interfaces of the mounted simulated
//! platform: a process (OS interface) or a core (MSR interface: pqos associates cores) put
//! in a 4-way class in a few lines, as one transaction.

use std::process::Command;

use rdt_pqos::transaction::{self, ApplyPlan, Change};
use rdt_pqos::{
    Backend, BackendExt, CacheBitmask, CacheDomain, CatMask, CatResource, ClassId, Iface,
    Interface, LogicalCpu, Paths, TaskId,
};
use rdt_sim::fs::testing::TestMount;

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal`: the kernel's Skylake-SP quirk
/// (`__check_quirks_intel`) hides L3 CAT, CMT and MBM from resctrl on the stock model.
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

/// The whole of what a program writes: a named class with 4 L3 ways in domain 0, and the
/// process (or, on MSR, the core) in it; applied all or nothing.
fn limit<B: Backend>(
    rdt: &mut B,
    pid: u32,
    cpu: u32,
) -> Result<ClassId, Box<dyn std::error::Error>> {
    let class = rdt.class_named("limited")?;
    let member = match rdt.interface() {
        Interface::Os => Change::task(TaskId::new(pid), class),
        Interface::Msr | Interface::Mmio => Change::cpu(LogicalCpu::new(cpu), class),
    };
    let ways = Change::l3(CacheDomain::new(0), class, CacheBitmask::new(0xf)?);
    transaction::run(rdt, &[ways, member])?.into_result()?;
    Ok(class)
}

#[test]
fn a_process_or_core_is_limited_in_a_few_lines_on_both_interfaces() {
    let mut child = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    for iface in [Iface::Os, Iface::Msr] {
        let m = TestMount::builtin(SKX_RDT);
        let mut rdt = crate::mounted(iface, m.root()).open().expect("open");
        let class = limit(&mut rdt, pid, 3).expect("limit");
        let masks = rdt
            .cat_classes(CatResource::L3, CacheDomain::new(0))
            .expect("masks");
        let mask = masks.iter().find(|c| c.class == class).expect("class").mask;
        assert_eq!(
            mask,
            CatMask::Unified(CacheBitmask::new(0xf).expect("mask"))
        );
        match iface {
            Iface::Os => {
                assert_eq!(rdt.class_of_task(TaskId::new(pid)).expect("task"), class);
                let tasks = std::fs::read_to_string(m.path("sys/fs/resctrl/limited/tasks"));
                assert_eq!(tasks.expect("the named group"), format!("{pid}\n"));
            }
            _ => assert_eq!(rdt.class_of(LogicalCpu::new(3)).expect("core"), class),
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The whole allocation state and the names of a platform.
fn state<B: Backend>(rdt: &mut B) -> (transaction::AllocState, Vec<(ClassId, String)>) {
    (
        transaction::AllocState::read(rdt).expect("state"),
        rdt.own_class_names(),
    )
}

#[test]
fn an_applied_configuration_is_undone_by_the_plan_it_returns_on_both_interfaces() {
    let mut child = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    for iface in [Iface::Os, Iface::Msr] {
        let m = TestMount::builtin(SKX_RDT);
        let paths = Paths::under(m.root());
        let mut rdt = crate::mounted(iface, m.root()).open().expect("open");
        let tasks = if iface == Iface::Os {
            format!("tasks = [{pid}]\n")
        } else {
            String::new()
        };
        let cfg = rdt_pqos::config::Config::parse_toml(
            &format!(
                "[[class]]\nname = \"web\"\nl3 = {{ ways = 4 }}\nmba = {{ percent = 35 }}\n\
                 cpus = \"2-3\"\n{tasks}"
            ),
            std::path::Path::new("c.toml"),
        )
        .expect("config");
        let before = state(&mut rdt);
        let done = cfg
            .plan(&mut rdt, &rdt_pqos::proc::ProcFs::host())
            .expect("plan")
            .plan
            .apply(&mut rdt)
            .into_result()
            .expect("applied");
        assert_eq!(rdt.own_class_names().len(), 1, "{iface:?}");
        let record = paths.run.join(match iface {
            Iface::Os => "os-classes",
            _ => "msr-classes",
        });
        assert!(record.exists(), "{iface:?}: the name is recorded");
        if iface == Iface::Os {
            assert!(m.path("sys/fs/resctrl/web").is_dir());
        }
        // a later process undoes it: the plan names what it needs
        drop(rdt);
        let mut rdt = crate::mounted(iface, m.root()).open().expect("open again");
        transaction::Plan::undoing(&mut rdt, &done)
            .apply(&mut rdt)
            .into_result()
            .expect("undone");
        assert_eq!(state(&mut rdt), before, "{iface:?}");
        assert!(!record.exists(), "{iface:?}: the record goes with the name");
        assert!(!m.path("sys/fs/resctrl/web").exists(), "{iface:?}");
    }
    let _ = child.kill();
    let _ = child.wait();
}
