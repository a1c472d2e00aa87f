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

/// A declarative file (`pqos --apply`) with a `regions` table on the MMIO interface:
/// planned as region MBA steps of the class's transaction (dry-run lines), applied, applied
/// again as nothing, refused at the file's line for a region the MRRM lacks, a value above
/// the window and the MSR interface (nothing written), and taken away by `--remove`.
#[test]
fn apply_files_plan_region_mba_in_the_class_transaction() {
    use rdt_pqos::config::Config;
    use rdt_pqos::proc::ProcFs;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path());
    let domains = rdt.topology().l3_domains();
    assert_eq!(domains.len(), 2, "{domains:?}");
    let window = rdt.regions().expect("regions").bw_window();
    let proc = ProcFs::host();
    let text = "[[class]]\nname = \"batch\"\ncpus = \"2-10\"\n\
                [class.regions.1]\nmax = 0x7f\ndomains = { 1 = { max = 0x20, min = 0x10 } }\n";
    let cfg = Config::parse_toml(text, "batch.toml").expect("parse");
    let planned = cfg.plan(&mut rdt, &proc).expect("plan");
    let lines = planned.lines();
    let region_lines: Vec<&String> = lines.iter().filter(|l| l.contains("region")).collect();
    assert_eq!(
        region_lines,
        [
            &format!(
                "batch (COS1): MBA region 1 max domain {}: {window} -> 127",
                domains[0]
            ),
            // per domain in pqos's order of the controls: opt, min, max
            &format!(
                "batch (COS1): MBA region 1 min domain {}: 0 -> 16",
                domains[1]
            ),
            &format!(
                "batch (COS1): MBA region 1 max domain {}: {window} -> 32",
                domains[1]
            ),
        ],
        "{lines:#?}"
    );
    planned.plan.apply(&mut rdt).into_result().expect("applied");
    assert_eq!(max_of(&mut rdt, domains[0], 1, 1), 0x7f);
    assert_eq!(max_of(&mut rdt, domains[1], 1, 1), 0x20);
    assert_eq!(max_of(&mut rdt, domains[0], 1, 0), window, "DDR untouched");
    assert!(
        cfg.plan(&mut rdt, &proc).expect("plan").plan.is_empty(),
        "applying again writes nothing"
    );

    // refused at the file's line and key, nothing written
    let refused = |text: &str, rdt: &mut Rdt| -> String {
        let cfg = Config::parse_toml(text, "bad.toml").expect("parse");
        cfg.plan(rdt, &proc).expect_err("refused").to_string()
    };
    let e = refused(
        "[[class]]\nname = \"batch\"\ncpus = \"2-10\"\nregions = { 7 = { max = 1 } }\n",
        &mut rdt,
    );
    assert_eq!(
        e,
        "bad.toml:4: class \"batch\": regions.7: memory region 7 does not exist: the \
         platform's MRRM has region 0 (DDR), region 1 (CXL)"
    );
    let e = refused(
        "[[class]]\nname = \"batch\"\ncpus = \"2-10\"\n\
         regions = { 1 = { max = 1, domains = { 1 = { opt = 512 } } } }\n",
        &mut rdt,
    );
    assert_eq!(
        e,
        format!(
            "bad.toml:4: class \"batch\": regions.1.domains.1.opt: opt 512 is outside the \
             control window: 0 to {window} ({window} is full bandwidth)"
        )
    );
    assert_eq!(max_of(&mut rdt, domains[1], 1, 1), 0x20, "nothing written");

    // --remove: every control back to the window
    let removal = cfg.remove(&mut rdt).expect("removal");
    removal.plan.apply(&mut rdt).into_result().expect("removed");
    for &d in &domains {
        assert_eq!(max_of(&mut rdt, d, 1, 1), window);
    }

    // the MSR interface has no region controls: refused at `regions`
    drop(rdt);
    let session = SessionOptions {
        state: Some(dir.path().join("state.json")),
        ..SessionOptions::new("xeon-rdt13")
    };
    let mut msr = OpenOptions::simulate(OpenOptions::new(Iface::Msr).rdt_iface(None), session)
        .open()
        .expect("open on MSR");
    let e = cfg.plan(&mut msr, &proc).expect_err("no MMIO").to_string();
    assert!(
        e.starts_with(
            "batch.toml:4: class \"batch\": regions: region-aware MBA needs the MMIO \
                       interface of an RDT 1.3 platform"
        ),
        "{e}"
    );
}

/// The controller with a best-effort workload whose policy names `mba_regions = [1]`: the
/// seed paper's experiment (`dpdk-pipeline-aggressor-at-10s`, on this model's skylake-sp
/// CPUID and topology) with the aggressor's traffic 90 % to the CXL region and the
/// pipeline's 30 %: the aggressor saturates CXL (32 GB/s per package), whose latency the
/// pipeline's CXL misses feel. After the ways (cache pressure), the engine's MBA step is
/// written as the class's maximum on region 1 only, its DDR control and its MBA never
/// touched; it relieves the CXL region, the pipeline recovers and the step is kept.
#[test]
#[allow(clippy::too_many_lines)] // one experiment, then the refusal on MSR
fn the_controller_throttles_a_mostly_cxl_best_effort_class_on_the_cxl_region_only() {
    use rdt_pqos::config::policy::Policy;
    use rdt_pqos::control::{ActionKind, Agent};
    use rdt_pqos::proc::ProcFs;
    use rdt_pqos::{LogicalCpu, MbaResource};

    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path());
    let sim = rdt.simulated().expect("simulated").handle().clone();
    {
        let mut p = sim.lock();
        p.set_scenario(
            &rdt_sim::Scenario::builtin("dpdk-pipeline-aggressor-at-10s").expect("built-in"),
        )
        .expect("scenario");
        for c in [16, 18, 20] {
            p.set_region_split(LogicalCpu::new(c), [0.1, 0.9]);
        }
    }
    let policy = Policy::parse_toml(
        "[[protected]]\nname = \"pipeline\"\ncpus = \"4,6,8,10,12,14\"\n\n\
         [[best_effort]]\nname = \"aggressor\"\ncpus = \"16,18,20\"\nmin_ways = 1\n\
         min_mba_percent = 10\nmba_regions = [1]\n",
        "policy.toml",
    )
    .expect("policy");
    let mut agent = Agent::start(&mut rdt, policy, &ProcFs::host(), false).expect("start");
    let class = agent.classes()[0];
    let domain = CacheDomain::new(0);
    let window = rdt.regions().expect("regions").bw_window();
    let mut events = Vec::new();
    let (mut cxl, mut ddr, mut mba, mut ops) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for t in 1..=40u64 {
        advance(&rdt, Duration::from_secs(1));
        events.extend(
            agent
                .tick(&mut rdt, Duration::from_secs(t))
                .expect("tick")
                .events,
        );
        cxl.push(max_of(&mut rdt, domain, class.get(), 1));
        ddr.push(max_of(&mut rdt, domain, class.get(), 0));
        let limits = rdt
            .bandwidth_classes_in(MbaResource::Mba, &[domain])
            .expect("mba");
        let limit = limits[0].iter().find(|c| c.class == class).expect("class");
        mba.push(limit.limit.value());
        let m = sim.workload_metrics();
        ops.push(m[0].ops_per_s.expect("the pipeline's throughput"));
    }
    let kinds: Vec<ActionKind> = events.iter().map(|e| e.decision.action).collect();
    assert_eq!(
        kinds,
        [
            ActionKind::ShrinkWays,
            ActionKind::ThrottleMba,
            ActionKind::ThrottleMba
        ],
        "two region steps, neither undone: {events:?}"
    );
    assert!(events.iter().all(|e| e.applied), "{events:?}");
    // the search: half way from 100 % to the 10 % floor (60 % of the window on the CXL
    // region), then the secant's 40 %, kept to the end
    let of_window = |percent: u32| u16::try_from((u32::from(window) * percent + 50) / 100).ok();
    let at = |t: usize| cxl[t - 1];
    assert_eq!(at(13), of_window(60).expect("60 %"), "{cxl:?}");
    assert_eq!(at(15), of_window(40).expect("40 %"), "{cxl:?}");
    assert!(
        cxl[14..].iter().all(|v| Some(*v) == of_window(40)),
        "kept: {cxl:?}"
    );
    assert!(ddr.iter().all(|v| *v == window), "DDR untouched: {ddr:?}");
    assert!(mba.iter().all(|v| *v == 100), "MBA untouched: {mba:?}");
    // the pipeline's throughput as a share of alone (16.0 Mpps before the aggressor):
    // 63.9 % with it, 94.3 % with the ways (the CXL latency is left), 98.1 % at 60 %,
    // 99.6 % at 40 % (on the old model, where region limits only scaled the counts, the
    // region step bought nothing and was undone)
    let alone = ops[8];
    let share = |t: usize| ops[t - 1] / alone;
    assert!((alone - 16.0e6).abs() < 0.1e6, "{ops:?}");
    assert!((share(10) - 0.639).abs() < 0.005, "contended: {ops:?}");
    assert!((share(11) - 0.943).abs() < 0.005, "the ways: {ops:?}");
    assert!((share(13) - 0.981).abs() < 0.005, "CXL at 60 %: {ops:?}");
    assert!(share(40) > 0.995, "CXL at 40 %: {ops:?}");
    // the MSR interface has no region controls: refused when the controller starts
    drop(rdt);
    let session = SessionOptions {
        state: Some(dir.path().join("state.json")),
        ..SessionOptions::new("xeon-rdt13")
    };
    let mut msr = OpenOptions::simulate(OpenOptions::new(Iface::Msr).rdt_iface(None), session)
        .open()
        .expect("open on MSR");
    let policy = Policy::parse_toml(
        "[[protected]]\nname = \"pipeline\"\ncpus = \"2-7\"\n\n\
         [[best_effort]]\nname = \"thrasher\"\ncpus = \"8-10\"\n\
         min_mba_percent = 20\nmba_regions = [1]\n",
        "policy.toml",
    )
    .expect("policy");
    let e = Agent::start(&mut msr, policy, &ProcFs::host(), false)
        .expect_err("no region controls")
        .to_string();
    assert!(
        e.contains(
            "policy.toml: best-effort workload \"thrasher\": mba_regions needs region-aware MBA"
        ),
        "{e}"
    );
}

/// Controls that share a MARC register are written with one register write in a
/// transaction: regions 0 and 1 of COS1's maximum in both domains (planned region by region,
/// as an `--apply` file's are) are 2 writes, not 4, and undoing them is 2 writes again that
/// put both fields back. Fails where each control rewrote the register.
#[test]
fn region_controls_sharing_a_register_are_one_write_and_undone_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path());
    let domains = rdt.topology().l3_domains();
    let window = rdt.regions().expect("regions").bw_window();
    let writes = |rdt: &Rdt| {
        let h = rdt.simulated().expect("simulated").handle().clone();
        h.lock().mmio().expect("mmio").accesses().1
    };
    let mut changes: Vec<Change> = Vec::new();
    for (region, value) in [(0u8, 0x100u16), (1, 0x40)] {
        for &d in &domains {
            let mut c = cxl_max(1, value, d);
            if let Change::RegionMba { bw, .. } = &mut c {
                bw.region = MemRegion(region);
            }
            changes.push(c);
        }
    }
    let plan = Plan::new(&mut rdt, &changes).expect("plan");
    assert_eq!(
        plan.steps().len(),
        4,
        "a step per control, journaled as such"
    );
    let before = writes(&rdt);
    let done = plan.apply(&mut rdt).into_result().expect("applied");
    assert_eq!(writes(&rdt) - before, 2, "one MARC write per domain");
    for &d in &domains {
        assert_eq!(max_of(&mut rdt, d, 1, 0), 0x100);
        assert_eq!(max_of(&mut rdt, d, 1, 1), 0x40);
    }
    let before = writes(&rdt);
    Plan::undoing(&mut rdt, &done)
        .apply(&mut rdt)
        .into_result()
        .expect("undone");
    assert_eq!(writes(&rdt) - before, 2, "undone with one write per domain");
    for &d in &domains {
        assert_eq!(max_of(&mut rdt, d, 1, 0), window);
        assert_eq!(max_of(&mut rdt, d, 1, 1), window);
    }
}

/// Every region change's value is checked against the window when planned, also a second
/// change of a class and domain whose controls the planner has already read (it was
/// checked for the first one only, and the backend refused it mid-apply).
#[test]
fn a_second_region_change_of_a_class_and_domain_above_the_window_is_refused_by_the_plan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rdt = open(dir.path());
    let d = rdt.topology().l3_domains()[0];
    let window = rdt.regions().expect("regions").bw_window();
    let mut ddr = cxl_max(1, window + 1, d);
    if let Change::RegionMba { bw, .. } = &mut ddr {
        bw.region = MemRegion(0);
    }
    let e = Plan::new(&mut rdt, &[cxl_max(1, 0x20, d), ddr]).expect_err("above the window");
    assert!(matches!(e, PlanError::Invalid { index: 1, .. }), "{e}");
    assert!(e.to_string().contains("above the control window"), "{e}");
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
