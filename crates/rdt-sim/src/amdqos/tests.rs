//! Tests of [`super`]: the registers on the models that have them and EIO elsewhere, what
//! they change in IA32_QM_CTR, the counters resctrl and the MSR backend share, and the MSR
//! backend's ABMC assignment and BMEC configuration on `turin` and `genoa`.

use std::time::Duration;

use rdt_core::{Backend, BackendExt, CpuSet, LogicalCpu, MonEvents, MonGroupId, RmidEvent};
use rdt_msr::regs::{
    AMD_L3_QOS_ABMC_CFG, AMD_L3_QOS_ABMC_DSC, AMD_L3_QOS_EXT_CFG, AMD_QOS_EVT_CFG_0, AbmcCfg,
    IA32_PQR_ASSOC, IA32_QM_CTR, IA32_QM_EVTSEL, QM_CTR_ERROR, QM_CTR_UNAVAILABLE, qm_evtsel,
    qm_evtsel_abmc,
};
use rdt_msr::{MsrAddr, MsrBackend, MsrError, MsrIo};

use crate::resctrl::{KernelVersion, MountOptions, Resctrl};
use crate::vfs::Tree as _;
use crate::{SimHandle, SimPlatform};

const EVT_CFG_1: MsrAddr = MsrAddr::new(0xC000_0401);
const EVT_CFG_2: MsrAddr = MsrAddr::new(0xC000_0402);

fn cpu(n: u32) -> LogicalCpu {
    LogicalCpu::new(n)
}

fn rd(p: &mut SimPlatform, c: u32, addr: MsrAddr) -> Option<u64> {
    p.read(cpu(c), addr).ok()
}

fn qm(p: &mut SimPlatform, c: u32, sel: u64) -> u64 {
    p.write(cpu(c), IA32_QM_EVTSEL, sel).unwrap();
    p.read(cpu(c), IA32_QM_CTR).unwrap()
}

fn assign(id: u32, rmid: u32, bw_type: u32) -> u64 {
    AbmcCfg {
        bw_type,
        bw_src: rmid,
        is_clos: false,
        cntr_id: id,
        cntr_en: true,
        cfg_en: true,
    }
    .encode()
}

/// The configuration of counter `id` as L3_QOS_ABMC_DSC describes it after selecting it.
fn dsc(p: &mut SimPlatform, c: u32, id: u32) -> AbmcCfg {
    let select = AbmcCfg {
        cntr_id: id,
        ..AbmcCfg::default()
    };
    p.write(cpu(c), AMD_L3_QOS_ABMC_CFG, select.encode())
        .unwrap();
    AbmcCfg::decode(rd(p, c, AMD_L3_QOS_ABMC_DSC).unwrap())
}

/// A platform whose CPUs `cpus` each run a workload of `base + step × i` MiB/s (`i` their
/// index), 80 % local.
fn busy(model: &str, cpus: &[u32], base: u32, step: u32) -> SimHandle {
    let w: Vec<String> = cpus
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                r#"{{"cpus": "{c}", "working_set_mib": 1024, "traffic_mibps": {}, "local_fraction": 0.8}}"#,
                base + step * u32::try_from(i).unwrap()
            )
        })
        .collect();
    let sim = SimHandle::new(SimPlatform::builtin(model).unwrap());
    sim.lock()
        .set_scenario(
            &format!(r#"{{"workloads": [{}]}}"#, w.join(","))
                .parse()
                .unwrap(),
        )
        .unwrap();
    sim
}

/// What the model says CPU `c` moves per second: (total, local) bytes.
fn rate(sim: &SimHandle, c: u32) -> (u64, u64) {
    let p = sim.lock();
    let a = p.activity(cpu(c)).unwrap();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    (a.traffic_bytes_per_s as u64, a.local_bytes_per_s as u64)
}

/// How far a measured second of `want` bytes may be off: 0.2 % and 4 KiB (the counters
/// count whole upscaling-factor units of the model's exact traffic).
const fn tolerance(want: u64) -> u64 {
    want / 500 + 4096
}

fn close(got: u64, want: u64) -> bool {
    got.abs_diff(want) <= tolerance(want)
}

fn backend(sim: &SimHandle) -> MsrBackend<SimHandle> {
    let (caps, topo) = {
        let p = sim.lock();
        (p.capabilities().clone(), p.topology().clone())
    };
    MsrBackend::new(sim.clone(), caps, topo, rdt_core::NoPmu).unwrap()
}

/// The first CPU of every L3 domain.
fn domain_cpus(p: &SimPlatform) -> Vec<u32> {
    p.topology()
        .l3_domains()
        .into_iter()
        .filter_map(|d| p.topology().cpus_in_l3(d).first())
        .map(LogicalCpu::get)
        .collect()
}

/// Absent features: EIO as on the parts (AMD pub. 56375: the MSRs exist where CPUID
/// 8000_0020H enumerates BMEC, ABMC or SDCIAE).
#[test]
fn the_registers_exist_only_where_cpuid_enumerates_their_feature() {
    let all = [
        AMD_L3_QOS_EXT_CFG,
        AMD_L3_QOS_ABMC_CFG,
        AMD_L3_QOS_ABMC_DSC,
        AMD_QOS_EVT_CFG_0,
        EVT_CFG_1,
    ];
    for model in ["skylake-sp", "milan"] {
        let mut p = SimPlatform::builtin(model).unwrap();
        for a in all {
            assert_eq!(rd(&mut p, 0, a), None, "{model} {a}");
            assert!(p.write(cpu(0), a, 0).is_err(), "{model} {a}");
        }
    }
    // genoa: BMEC without ABMC or SDCIAE
    let mut g = SimPlatform::builtin("genoa").unwrap();
    assert_eq!(rd(&mut g, 0, AMD_QOS_EVT_CFG_0), Some(0x7f));
    assert_eq!(rd(&mut g, 0, EVT_CFG_1), Some(0x15));
    assert_eq!(rd(&mut g, 0, EVT_CFG_2), None, "two events only");
    for a in [AMD_L3_QOS_EXT_CFG, AMD_L3_QOS_ABMC_CFG, AMD_L3_QOS_ABMC_DSC] {
        assert_eq!(rd(&mut g, 0, a), None, "genoa {a}");
    }
    assert!(g.write(cpu(0), AMD_QOS_EVT_CFG_0, 0x80).is_err(), "bit 7");
    // the extended event id is ABMC's
    assert!(g.write(cpu(0), IA32_QM_EVTSEL, qm_evtsel_abmc(0)).is_err());
    // turin: all of them
    let mut t = SimPlatform::builtin("turin").unwrap();
    assert_eq!(rd(&mut t, 0, AMD_L3_QOS_EXT_CFG), Some(0));
    t.write(cpu(0), AMD_L3_QOS_EXT_CFG, 0b11).unwrap();
    assert!(t.write(cpu(0), AMD_L3_QOS_EXT_CFG, 0b100).is_err());
    assert!(
        t.write(cpu(0), AMD_L3_QOS_ABMC_CFG, assign(0, 1, 0x80))
            .is_err(),
        "bit 7"
    );
    assert!(
        t.write(cpu(0), AMD_L3_QOS_ABMC_CFG, assign(0, 1, 0x7f) | 1 << 55)
            .is_err()
    );
    assert!(
        t.write(cpu(0), AMD_L3_QOS_ABMC_DSC, 0).is_err(),
        "read-only"
    );
}

/// Linux `resctrl_arch_config_cntr` then `__cntr_id_read`: the counter counts its RMID's
/// traffic of the configured transactions from the configuration on; legacy MBM reads are
/// Unavailable while ABMC is on.
#[test]
fn an_abmc_counter_counts_its_rmid_and_its_transactions_from_assignment() {
    let sim = busy("turin", &[1], 800, 0);
    let mut p = sim.lock();
    p.write(cpu(1), IA32_PQR_ASSOC, 7).unwrap();
    p.advance(Duration::from_secs(1));
    let legacy = qm(&mut p, 1, qm_evtsel(7, 2));
    assert!(
        legacy > 0 && legacy & QM_CTR_UNAVAILABLE == 0,
        "{legacy:#x}"
    );
    // ABMC off: counter reads are errors
    assert_eq!(qm(&mut p, 1, qm_evtsel_abmc(3)), QM_CTR_ERROR);
    p.write(cpu(1), AMD_L3_QOS_EXT_CFG, 1).unwrap();
    for (id, bits) in [(3, 0x7f), (4, 0x1), (5, 0x2), (6, 0x4)] {
        p.write(cpu(1), AMD_L3_QOS_ABMC_CFG, assign(id, 7, bits))
            .unwrap();
    }
    // an idle RMID's counter, and a counter never configured
    p.write(cpu(1), AMD_L3_QOS_ABMC_CFG, assign(8, 9, 0x7f))
        .unwrap();
    let d = dsc(&mut p, 1, 3);
    assert_eq!((d.bw_src, d.bw_type, d.cntr_en), (7, 0x7f, true));
    assert!(!dsc(&mut p, 1, 10).cntr_en);
    // from 0 at the assignment
    assert_eq!(qm(&mut p, 1, qm_evtsel_abmc(3)), 0);
    p.advance(Duration::from_secs(1));
    let [all, local, remote, nt] = [3, 4, 5, 6].map(|id| qm(&mut p, 1, qm_evtsel_abmc(id)));
    // the model's traffic of CPU 1 in counts of the upscaling factor, 1 s
    let up = u64::from(p.capabilities().monitoring.get().unwrap().upscaling_factor);
    let a = p.activity(cpu(1)).unwrap().traffic_bytes_per_s;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let want = a as u64;
    assert!(
        want > 100 << 20 && close(all * up, want),
        "{} vs {want}",
        all * up
    );
    assert_eq!(local + remote, all, "reads are local or remote");
    assert!(local > remote * 3, "80 % local: {local} vs {remote}");
    assert_eq!(nt, 0, "the model makes no non-temporal writes");
    assert_eq!(qm(&mut p, 1, qm_evtsel_abmc(8)), 0, "RMID 9 is idle");
    assert_eq!(qm(&mut p, 1, qm_evtsel_abmc(10)), QM_CTR_UNAVAILABLE);
    // the RMID's own events are not counted while ABMC is on
    assert_eq!(qm(&mut p, 1, qm_evtsel(7, 2)), QM_CTR_UNAVAILABLE);
    p.write(cpu(1), AMD_L3_QOS_EXT_CFG, 0).unwrap();
    assert_eq!(qm(&mut p, 1, qm_evtsel_abmc(3)), QM_CTR_ERROR);
    assert!(qm(&mut p, 1, qm_evtsel(7, 2)) > legacy);
}

/// BMEC (Linux `mon_config_write`): a change clears the event's counters, which then count
/// the configured transactions; the other event and domains are untouched.
#[test]
fn a_bmec_configuration_decides_what_the_legacy_events_count() {
    let sim = busy("genoa", &[1], 1000, 0);
    let mut p = sim.lock();
    p.write(cpu(1), IA32_PQR_ASSOC, 3).unwrap();
    p.advance(Duration::from_secs(1));
    let total0 = qm(&mut p, 1, qm_evtsel(3, 2));
    let local0 = qm(&mut p, 1, qm_evtsel(3, 3));
    assert!(local0 < total0, "{local0} {total0}");
    // total := local reads only: cleared, then counts what local counts
    p.write(cpu(1), AMD_QOS_EVT_CFG_0, 0x1).unwrap();
    assert_eq!(rd(&mut p, 1, AMD_QOS_EVT_CFG_0), Some(0x1));
    assert_eq!(qm(&mut p, 1, qm_evtsel(3, 2)), 0);
    p.advance(Duration::from_secs(1));
    let total1 = qm(&mut p, 1, qm_evtsel(3, 2));
    let local1 = qm(&mut p, 1, qm_evtsel(3, 3));
    assert_eq!(total1, local1 - local0);
    // no read transaction: nothing
    p.write(cpu(1), AMD_QOS_EVT_CFG_0, 0x4).unwrap();
    p.advance(Duration::from_secs(1));
    assert_eq!(qm(&mut p, 1, qm_evtsel(3, 2)), 0);
}

/// One model of the counters: those resctrl's `mbm_event` mode assigns are busy for an MSR
/// reader, and the MSR backend's are taken from the free ones, leaving resctrl's alone.
#[test]
fn resctrl_and_the_msr_backend_share_the_counters() {
    let sim = busy("turin", &[9], 500, 0);
    sim.lock().set_kernel(KernelVersion::V6_18);
    let mut fs = Resctrl::mount(sim.clone(), &MountOptions::default()).unwrap();
    fs.mkdir("g1").unwrap();
    {
        let mut p = sim.lock();
        assert_eq!(rd(&mut p, 9, AMD_L3_QOS_EXT_CFG), Some(1), "mbm_event mode");
        // the root (RMID 0) holds counters 0 and 1, g1 2 and 3
        let d0 = dsc(&mut p, 9, 0);
        assert_eq!((d0.bw_src, d0.bw_type, d0.cntr_en), (0, 0x7f, true));
        let d1 = dsc(&mut p, 9, 1);
        assert_eq!((d1.bw_src, d1.bw_type, d1.cntr_en), (0, 0x15, true));
        assert!(dsc(&mut p, 9, 2).cntr_en && dsc(&mut p, 9, 3).cntr_en);
        assert!(!dsc(&mut p, 9, 4).cntr_en);
    }
    let mut b = backend(&sim);
    let g = b
        .start_monitoring(&CpuSet::from_iter([cpu(9)]), MonEvents::MBM_TOTAL)
        .unwrap();
    let rmid = {
        let mut p = sim.lock();
        let rmid = rdt_msr::regs::pqr_rmid(rd(&mut p, 9, IA32_PQR_ASSOC).unwrap());
        let d4 = dsc(&mut p, 9, 4);
        assert_eq!(
            (d4.bw_src, d4.cntr_en),
            (rmid, true),
            "the first free counter"
        );
        rmid
    };
    assert_ne!(rmid, 0);
    b.poll().unwrap();
    sim.lock().advance(Duration::from_secs(1));
    b.poll().unwrap();
    let bytes = b.values(g).unwrap().mbm_total_delta_bytes.unwrap();
    assert!(close(bytes, rate(&sim, 9).0), "{bytes}");
    // resctrl's root still counts through its counter (CPU 9 left it for the MSR RMID)
    let root = String::from_utf8(
        fs.read("mon_data/mon_L3_00/mbm_total_bytes", 0, 64)
            .unwrap(),
    )
    .unwrap();
    assert!(root.trim().parse::<u64>().is_ok(), "{root}");
    b.stop_monitoring(g).unwrap();
    let mut p = sim.lock();
    assert!(!dsc(&mut p, 9, 4).cntr_en, "given back");
    assert!(dsc(&mut p, 9, 0).cntr_en, "resctrl's kept");
    assert_eq!(
        rd(&mut p, 9, AMD_L3_QOS_EXT_CFG),
        Some(1),
        "left on, as found"
    );
    drop(p);
    fs.unmount().unwrap();
    // the unmount freed resctrl's counters (`rdtgroup_unassign_cntrs`)
    let mut p = sim.lock();
    assert!((0..32).all(|id| !dsc(&mut p, 9, id).cntr_en));
}

/// The issue's acceptance: 64 single-CPU groups on turin, each CPU running its own rate,
/// each group's MBM read through the counters assigned to it; ABMC was off before and is off
/// after, every counter free again.
#[test]
fn msr_monitoring_of_64_groups_on_turin_reads_every_groups_mbm_through_abmc() {
    let cpus: Vec<u32> = (0..64).collect();
    let sim = busy("turin", &cpus, 100, 10);
    let n = sim.lock().topology().cpus().len();
    assert!(n >= 64, "turin has {n} CPUs");
    let mut b = backend(&sim);
    let groups: Vec<MonGroupId> = cpus
        .iter()
        .map(|&c| {
            b.start_monitoring(
                &CpuSet::from_iter([cpu(c)]),
                MonEvents::MBM_TOTAL | MonEvents::MBM_LOCAL,
            )
            .unwrap()
        })
        .collect();
    {
        let mut p = sim.lock();
        // on in the domains holding a group (CPUs 0-63: 8 of the stock part's 12 CCDs),
        // left off in the others
        let used = |p: &SimPlatform, c: u32| {
            let d = p.topology().get(cpu(c)).and_then(|x| x.l3);
            cpus.iter()
                .any(|&m| p.topology().get(cpu(m)).and_then(|x| x.l3) == d)
        };
        let mut on = 0;
        for c in domain_cpus(&p) {
            let want = u64::from(used(&p, c));
            on += want;
            assert_eq!(rd(&mut p, c, AMD_L3_QOS_EXT_CFG), Some(want), "CPU {c}");
        }
        assert_eq!(on, 8, "the groups span 8 L3 domains");
        // the RMIDs' own events read nothing: the values below come from the counters
        let rmid = rdt_msr::regs::pqr_rmid(rd(&mut p, 5, IA32_PQR_ASSOC).unwrap());
        assert_eq!(qm(&mut p, 5, qm_evtsel(rmid, 2)), QM_CTR_UNAVAILABLE);
    }
    b.poll().unwrap();
    sim.lock().advance(Duration::from_secs(1));
    b.poll().unwrap();
    let rates: Vec<(u64, u64)> = cpus.iter().map(|&c| rate(&sim, c)).collect();
    // every CPU moves its own amount, so a group reading another's counter fails below
    let mut distinct: Vec<u64> = rates.iter().map(|r| r.0).collect();
    distinct.sort_unstable();
    assert!(
        distinct
            .windows(2)
            .all(|w| w[1] - w[0] > 2 * tolerance(w[1])),
        "{distinct:?}"
    );
    for (i, g) in groups.iter().enumerate() {
        let v = b.values(*g).unwrap();
        let total = v.mbm_total_delta_bytes.unwrap();
        let local = v.mbm_local_delta_bytes.unwrap();
        assert!(
            close(total, rates[i].0),
            "group {i}: {total} vs {:?}",
            rates[i]
        );
        assert!(
            close(local, rates[i].1),
            "group {i}: local {local} vs {:?}",
            rates[i]
        );
        assert!(local < total, "group {i}");
    }
    for g in groups {
        b.stop_monitoring(g).unwrap();
    }
    let mut p = sim.lock();
    for c in domain_cpus(&p) {
        assert_eq!(
            rd(&mut p, c, AMD_L3_QOS_EXT_CFG),
            Some(0),
            "as found, CPU {c}"
        );
        assert!((0..32).all(|id| !dsc(&mut p, c, id).cntr_en), "CPU {c}");
    }
}

/// Counters run out (resctrl holds all but one of domain 0's): the group is refused before
/// anything is written, naming the counts; one event still fits.
#[test]
fn a_group_beyond_the_free_counters_is_refused_with_the_counts() {
    let sim = busy("turin", &[1], 300, 0);
    sim.lock().set_kernel(KernelVersion::V6_18);
    let mut fs = Resctrl::mount(sim.clone(), &MountOptions::default()).unwrap();
    for i in 1..=15 {
        fs.mkdir(&format!("g{i}")).unwrap();
    }
    fs.write("g1/mbm_L3_assignments", 0, b"mbm_local_bytes:0=_\n")
        .unwrap();
    let mut b = backend(&sim);
    let err = b
        .start_monitoring(
            &CpuSet::from_iter([cpu(1)]),
            MonEvents::MBM_TOTAL | MonEvents::MBM_LOCAL,
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            MsrError::NotEnoughMbmCounters {
                domain: 0,
                needed: 2,
                free: 1,
                per_domain: 32,
                own: 0,
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("only 1 of the domain's 32")
            && msg.contains("0 held by this run's monitoring groups, 31 by resctrl's groups"),
        "{msg}"
    );
    {
        let mut p = sim.lock();
        assert_eq!(rd(&mut p, 1, IA32_PQR_ASSOC), Some(0), "CPU not tagged");
        let d: Vec<bool> = (0..32).map(|id| dsc(&mut p, 1, id).cntr_en).collect();
        assert_eq!(d.iter().filter(|e| !**e).count(), 1, "nothing assigned");
    }
    // the one free counter serves a total-only group
    let g = b
        .start_monitoring(&CpuSet::from_iter([cpu(1)]), MonEvents::MBM_TOTAL)
        .unwrap();
    // now this run's group holds one: the next refusal counts it apart from resctrl's 31
    let err = b
        .start_monitoring(&CpuSet::from_iter([cpu(2)]), MonEvents::MBM_TOTAL)
        .unwrap_err();
    assert!(
        matches!(
            err,
            MsrError::NotEnoughMbmCounters {
                free: 0,
                own: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("1 held by this run's monitoring groups, 31 by resctrl's groups"),
        "{err}"
    );
    b.poll().unwrap();
    sim.lock().advance(Duration::from_secs(1));
    b.poll().unwrap();
    let bytes = b.values(g).unwrap().mbm_total_delta_bytes.unwrap();
    assert!(close(bytes, rate(&sim, 1).0), "{bytes}");
    b.stop_monitoring(g).unwrap();
    fs.unmount().unwrap();
}

/// BMEC on the MSR interface ([`rdt_core::MsrOps::set_mbm_event_config`]): the register of
/// every domain, read back, and what a group then measures; refused without BMEC.
#[test]
fn bmec_is_settable_on_the_msr_interface_and_changes_what_groups_measure() {
    for model in ["genoa", "turin"] {
        let sim = busy(model, &[1], 1000, 0);
        let mut b = backend(&sim);
        let measure = |b: &mut MsrBackend<SimHandle>| {
            let g = b
                .start_monitoring(&CpuSet::from_iter([cpu(1)]), MonEvents::MBM_TOTAL)
                .unwrap();
            b.poll().unwrap();
            sim.lock().advance(Duration::from_secs(1));
            b.poll().unwrap();
            let v = b.values(g).unwrap().mbm_total_delta_bytes.unwrap();
            b.stop_monitoring(g).unwrap();
            v
        };
        let (total, local) = rate(&sim, 1);
        let all = measure(&mut b);
        assert!(close(all, total), "{model}: {all} vs {total}");
        BackendExt::set_mbm_event_config(&mut b, RmidEvent::MbmTotal, 0x2).unwrap();
        let doms = domain_cpus(&sim.lock());
        let mut p = sim.lock();
        for &c in &doms {
            assert_eq!(
                rd(&mut p, c, AMD_QOS_EVT_CFG_0),
                Some(0x2),
                "{model} CPU {c}"
            );
            assert_eq!(rd(&mut p, c, EVT_CFG_1), Some(0x15), "{model}: local kept");
        }
        drop(p);
        assert_eq!(
            b.mbm_event_config(RmidEvent::MbmTotal).unwrap().len(),
            doms.len()
        );
        // remote reads only: the traffic that is not local
        let remote = measure(&mut b);
        assert!(
            close(remote, total - local),
            "{model}: {remote} vs {total} - {local}"
        );
        assert!(remote < all * 2 / 5, "{model}: {remote} of {all}");
        let err = BackendExt::set_mbm_event_config(&mut b, RmidEvent::MbmTotal, 0x80);
        assert!(err.is_err(), "{model}: bit 7");
    }
    let sim = SimHandle::new(SimPlatform::builtin("milan").unwrap());
    let err =
        BackendExt::set_mbm_event_config(&mut backend(&sim), RmidEvent::MbmTotal, 0x3).unwrap_err();
    assert!(err.to_string().contains("BMEC"), "{err}");
}

/// A killed run (`rdt_msr`'s RMID claims): the next open gives back its RMIDs and the
/// counters that count them, so killed runs do not use up the domain's counters.
#[test]
fn a_killed_runs_counters_are_given_back_with_its_rmids() {
    let sim = busy("turin", &[1], 300, 0);
    let mut b1 = backend(&sim);
    b1.start_monitoring(
        &CpuSet::from_iter([cpu(1)]),
        MonEvents::MBM_TOTAL | MonEvents::MBM_LOCAL,
    )
    .unwrap();
    drop(b1); // killed: nothing stopped
    let rmid = rdt_msr::regs::pqr_rmid(rd(&mut sim.lock(), 1, IA32_PQR_ASSOC).unwrap());
    let holding = |sim: &SimHandle| {
        let mut p = sim.lock();
        (0..32)
            .filter(|&id| {
                let d = dsc(&mut p, 1, id);
                d.cntr_en && d.bw_src == rmid
            })
            .count()
    };
    assert_eq!(holding(&sim), 2);
    // its claim file, whose lock is free: the run has ended
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("msr-mon-4242"), format!("1 {rmid}\n")).unwrap();
    let mut b2 = backend(&sim).with_run_dir(dir.path());
    assert_eq!(b2.reclaim_dead_runs().unwrap().len(), 1);
    assert_eq!(rd(&mut sim.lock(), 1, IA32_PQR_ASSOC), Some(0));
    assert_eq!(holding(&sim), 0);
}

/// The registers are saved with the machine (a later process, `--sim-state`, sees the
/// counters an earlier one assigned), and a saved state with a counter the part does not
/// have is refused.
#[test]
fn the_registers_survive_a_saved_state() {
    let sim = busy("turin", &[1], 400, 0);
    let (state, before) = {
        let mut p = sim.lock();
        p.write(cpu(1), IA32_PQR_ASSOC, 4).unwrap();
        p.write(cpu(1), AMD_L3_QOS_EXT_CFG, 1).unwrap();
        p.write(cpu(1), AMD_L3_QOS_ABMC_CFG, assign(6, 4, 0x3))
            .unwrap();
        p.write(cpu(1), EVT_CFG_1, 0x1).unwrap();
        p.advance(Duration::from_secs(1));
        (p.save_state(), qm(&mut p, 1, qm_evtsel_abmc(6)))
    };
    assert!(before > 0);
    let mut q = SimPlatform::builtin("turin").unwrap();
    q.restore_state(&state).unwrap();
    assert_eq!(rd(&mut q, 1, AMD_L3_QOS_EXT_CFG), Some(1));
    assert_eq!(rd(&mut q, 1, EVT_CFG_1), Some(0x1));
    let d = dsc(&mut q, 1, 6);
    assert_eq!((d.bw_src, d.bw_type, d.cntr_en), (4, 0x3, true));
    assert_eq!(qm(&mut q, 1, qm_evtsel_abmc(6)), before, "the same count");
    // domain 0 of a state edited to name counter 40
    let bad = state.replacen(
        "\"cntrs\": [\n        [\n          6,",
        "\"cntrs\": [\n        [\n          40,",
        1,
    );
    assert_ne!(bad, state, "{state}");
    assert!(
        SimPlatform::builtin("turin")
            .unwrap()
            .restore_state(&bad)
            .is_err()
    );
}
