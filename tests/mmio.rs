//! The MMIO interface (RDT 1.3, `Iface::Mmio`) through the library on the in-process
//! simulated `xeon-rdt13` (feature `sim`), its clock driven by the test: region counters
//! read through the ERDT's MMRC (upscaled, corrected) split as the workload model splits its
//! traffic, LLC occupancy through CMRC, and region MBA planned, applied, undone and refused
//! by the transaction like every other change.

use std::time::Duration;

use rdt_pqos::sim::SessionOptions;
use rdt_pqos::transaction::{ApplyPlan, Change, Plan, PlanError, Step};
use rdt_pqos::{
    Backend, BackendExt, BwControl, CacheDomain, ClassId, CpuSet, Iface, Interface, MemRegion,
    MonEvents, OpenOptions, Rdt, RegionBw,
};

fn open(dir: &std::path::Path) -> Rdt {
    let session = SessionOptions {
        state: Some(dir.join("state.json")),
        ..SessionOptions::new("xeon-rdt13")
    };
    OpenOptions::simulate(OpenOptions::new(Iface::Mmio).rdt_iface(None), session)
        .open()
        .expect("open the simulated RDT 1.3 platform")
}

fn advance(rdt: &Rdt, d: Duration) {
    rdt.simulated()
        .expect("simulated")
        .handle()
        .lock()
        .advance(d);
}

fn cxl_max(class: u32, value: u16, domain: CacheDomain) -> Change {
    Change::RegionMba {
        domain,
        class: ClassId::new(class),
        bw: RegionBw {
            region: MemRegion(1),
            control: BwControl::Max,
            value,
        },
    }
}

fn max_of(rdt: &mut Rdt, domain: CacheDomain, class: u32, region: u8) -> u16 {
    rdt.regions()
        .expect("regions")
        .region_bandwidth(domain, ClassId::new(class))
        .expect("read")
        .into_iter()
        .find(|b| b.region == MemRegion(region) && b.control == BwControl::Max)
        .expect("the control")
        .value
}

#[test]
fn region_counters_split_70_30_and_occupancy_comes_from_cmrc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path());
    assert_eq!(rdt.interface(), Interface::Mmio);
    let regions = rdt.regions().expect("regions").memory_regions().to_vec();
    assert_eq!(regions.len(), 2, "{regions:?}");
    let cpus: CpuSet = "2-10".parse().expect("cpus");
    let g = rdt
        .start_monitoring(&cpus, MonEvents::MBM_LOCAL | MonEvents::LLC_OCCUPANCY)
        .expect("start");
    advance(&rdt, Duration::from_secs(1));
    rdt.poll().expect("poll");
    let values = rdt
        .regions()
        .expect("regions")
        .region_values(g)
        .expect("region values")
        .to_vec();
    let per = |r: u8| -> u64 {
        values
            .iter()
            .filter(|v| v.region == MemRegion(r))
            .map(|v| v.delta_bytes.expect("a valid reading"))
            .sum()
    };
    let (ddr, cxl) = (per(0), per(1));
    assert!(ddr > 100 << 20, "{ddr} bytes of DDR traffic in a second");
    #[allow(clippy::cast_precision_loss)]
    let share = ddr as f64 / (ddr + cxl) as f64;
    assert!((share - 0.7).abs() < 0.02, "DDR share {share}");
    // the running totals are the deltas so far
    assert!(values.iter().all(|v| v.bytes == v.delta_bytes));
    let v = rdt.values(g).expect("values");
    assert!(v.llc_occupancy_bytes.is_some_and(|b| b > 0), "{v:?}");
    rdt.stop_monitoring(g).expect("stop");
    assert!(rdt.regions().expect("regions").region_values(g).is_none());
}

#[test]
fn region_mba_is_planned_applied_undone_and_refused_as_a_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path());
    let domains = rdt.topology().l3_domains();
    let window = rdt.regions().expect("regions").bw_window();
    assert_eq!(window, 0x1ff);
    let changes: Vec<Change> = domains.iter().map(|&d| cxl_max(1, 0x40, d)).collect();
    let plan = Plan::new(&mut rdt, &changes).expect("plan");
    assert_eq!(plan.steps().len(), domains.len());
    assert!(matches!(
        plan.steps()[0].1,
        Step::RegionMba { before, .. } if before.value == window
    ));
    let done = plan.apply(&mut rdt).into_result().expect("applied");
    for &d in &domains {
        assert_eq!(max_of(&mut rdt, d, 1, 1), 0x40);
        assert_eq!(max_of(&mut rdt, d, 1, 0), window, "DDR's field kept");
        assert_eq!(max_of(&mut rdt, d, 2, 1), window, "another class kept");
    }
    // undone: the values the plan read
    Plan::undoing(&mut rdt, &done)
        .apply(&mut rdt)
        .into_result()
        .expect("undone");
    assert_eq!(max_of(&mut rdt, domains[0], 1, 1), window);

    // refused whole, nothing written: above the window, a region that does not exist
    let bad = [
        cxl_max(1, 0x20, domains[0]),
        cxl_max(1, window + 1, domains[1]),
    ];
    let e = Plan::new(&mut rdt, &bad).expect_err("above the window");
    assert!(matches!(e, PlanError::Invalid { index: 1, .. }), "{e}");
    let mut nowhere = cxl_max(1, 0x20, domains[0]);
    if let Change::RegionMba { bw, .. } = &mut nowhere {
        bw.region = MemRegion(7);
    }
    let e = Plan::new(&mut rdt, &[nowhere]).expect_err("no region 7");
    assert!(e.to_string().contains("region 7"), "{e}");
    assert_eq!(max_of(&mut rdt, domains[0], 1, 1), window);

    // a reset brings every control back and is undone by writing them back
    let done = Plan::new(&mut rdt, &[cxl_max(3, 0x10, domains[0])])
        .expect("plan")
        .apply(&mut rdt)
        .into_result()
        .expect("applied");
    assert_eq!(done.len(), 1);
    rdt.reset_allocation(&rdt_pqos::AllocReset::default())
        .expect("reset");
    assert_eq!(max_of(&mut rdt, domains[0], 3, 1), window);

    // the MSR interface has no region controls: such a change is refused there
    drop(rdt);
    let session = SessionOptions {
        state: Some(dir.path().join("state.json")),
        ..SessionOptions::new("xeon-rdt13")
    };
    let mut msr = OpenOptions::simulate(OpenOptions::new(Iface::Msr).rdt_iface(None), session)
        .open()
        .expect("open on MSR");
    let e = Plan::new(&mut msr, &[cxl_max(1, 0x20, domains[0])]).expect_err("no MMIO");
    assert!(e.to_string().contains("MMIO interface"), "{e}");
}

/// Every class's region controls of a domain at once equal the controls class by class,
/// and cost one register read per control and group of four regions (not one per class).
#[test]
fn region_bandwidth_of_all_classes_reads_each_control_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path());
    let d = rdt.topology().l3_domains()[0];
    let changes = [
        cxl_max(1, 0x40, d),
        cxl_max(3, 0x21, d),
        Change::RegionMba {
            domain: d,
            class: ClassId::new(2),
            bw: RegionBw {
                region: MemRegion(0),
                control: BwControl::Min,
                value: 0x11,
            },
        },
    ];
    let plan = Plan::new(&mut rdt, &changes).expect("plan");
    plan.apply(&mut rdt).into_result().expect("applied");
    let accesses = |rdt: &Rdt| {
        rdt.simulated()
            .expect("simulated")
            .handle()
            .lock()
            .mmio()
            .expect("mmio")
            .accesses()
            .0
    };
    let r = rdt.regions().expect("regions");
    let classes = r.region_classes();
    let before = accesses(&rdt);
    let all = rdt
        .regions()
        .expect("regions")
        .region_bandwidth_all(d)
        .expect("all classes");
    let reads = accesses(&rdt) - before;
    assert_eq!(all.len(), usize::try_from(classes).unwrap());
    for (c, got) in (0..classes).zip(&all) {
        let one = rdt
            .regions()
            .expect("regions")
            .region_bandwidth(d, ClassId::new(c))
            .expect("one class");
        assert_eq!(*got, one, "COS{c}");
    }
    assert_eq!(max_of(&mut rdt, d, 3, 1), 0x21);
    assert!(
        all[2]
            .iter()
            .any(|b| b.control == BwControl::Min && b.value == 0x11)
    );
    // two regions share one register: three controls, each a run of `classes` registers
    // (the simulator counts registers; the run is one access of the seam)
    assert_eq!(reads, 3 * u64::from(classes));
}
