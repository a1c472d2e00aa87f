//! AMD ABMC and BMEC, Intel SNC, through the resctrl backend on the simulated platform's
//! kernel-faithful resctrl served in-process (`rdt_sim::inprocess`: no FUSE, no root):
//! `turin` (ABMC, 32 counters per L3 domain, `mbm_event` mode at mount), `genoa` (BMEC
//! files, no ABMC), `sapphire-rapids-snc2` (two SNC nodes per L3).
#![allow(clippy::tests_outside_test_module)]
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rdt_core::{
    AssignMode, Backend, CpuSet, EventConfig, MonEvents, MountOptions, NoPmu, RmidEvent,
};
use rdt_resctrl::{ResctrlBackend, ResctrlError, ResctrlFs, ResctrlOptions};
use rdt_sim::inprocess::InProcessResctrl;
use rdt_sim::{SimHandle, SimPlatform};

struct Sim {
    handle: SimHandle,
    resctrl: InProcessResctrl,
    files: Arc<dyn ResctrlFs>,
}

impl Sim {
    fn new(model: &str) -> Self {
        let handle = SimHandle::new(SimPlatform::builtin(model).unwrap());
        let resctrl = InProcessResctrl::new(handle.clone()).unwrap();
        resctrl.remount(&MountOptions::default()).unwrap();
        let files = resctrl.files();
        Self {
            handle,
            resctrl,
            files,
        }
    }

    fn open(&self) -> ResctrlBackend {
        let (topo, caps) = {
            let p = self.handle.lock();
            (p.topology().clone(), p.capabilities().clone())
        };
        let opts = ResctrlOptions::new("/sys/fs/resctrl")
            .files(self.resctrl.files())
            .mount_control(self.resctrl.mount_control());
        ResctrlBackend::open(opts, topo, Some(caps), NoPmu).unwrap()
    }

    fn read(&self, rel: &str) -> String {
        self.files
            .read(rel)
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        self.files
            .write(rel, text.as_bytes())
            .unwrap_or_else(|e| panic!("{rel} <- {text}: {e}"));
    }

    fn mon_groups(&self) -> Vec<String> {
        self.files.subdirs("mon_groups").unwrap()
    }
}

fn cpus(list: &str) -> CpuSet {
    list.parse().unwrap()
}

fn mbm() -> MonEvents {
    MonEvents::MBM_LOCAL | MonEvents::MBM_TOTAL
}

/// The first CPU of each of the first `n` L3 domains.
fn one_cpu_per_domain(b: &ResctrlBackend, n: usize) -> Vec<u32> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for p in b.topology().cpus() {
        let l3 = p.l3.unwrap().get();
        if !seen.contains(&l3) {
            seen.push(l3);
            out.push(p.cpu.get());
        }
    }
    out.truncate(n);
    out
}

/// ABMC (`fs/resctrl/monitor.c` `mbm_L3_assignments_write`): a CPU group gets counters in
/// its own L3 domain only, for the events it counts, and reads bytes, never `Unassigned`.
/// On today's code the kernel's mkdir default (every domain) held 2 counters per domain per
/// group, so the 16th group of the run had none anywhere and read blank.
#[test]
fn turin_cpu_groups_get_counters_in_their_domain_only_and_read_bytes() {
    let sim = Sim::new("turin");
    let mut b = sim.open();
    let firsts = one_cpu_per_domain(&b, 8);
    let mut groups = Vec::new();
    // Two groups per domain, 16 in all: more than the 15 the kernel's default would allow.
    for &c in &firsts {
        for cpu in [c, c + 1] {
            groups.push((
                cpu,
                b.start_monitoring(&cpus(&cpu.to_string()), mbm()).unwrap(),
            ));
        }
    }
    let dirs = sim.mon_groups();
    assert_eq!(dirs.len(), 16);
    let a = sim.read(&format!("mon_groups/{}/mbm_L3_assignments", dirs[0]));
    assert_eq!(
        a.lines()
            .map(|l| l.matches("=e").count())
            .collect::<Vec<_>>(),
        [1, 1],
        "one counter per event, in the group's own domain: {a}"
    );
    let avail = sim.read("info/L3_MON/available_mbm_cntrs");
    // 32 per domain, the root's 2, and 2 groups x 2 events.
    assert!(avail.starts_with("0=26;"), "{avail}");
    sim.handle.advance(Duration::from_secs(1));
    b.poll().unwrap();
    sim.handle.advance(Duration::from_secs(1));
    b.poll().unwrap();
    let busy: Vec<_> = groups
        .iter()
        .filter(|(_, g)| {
            let v = b.values(*g).unwrap();
            v.mbm_local_delta_bytes.is_some_and(|x| x > 0)
                && v.mbm_total_delta_bytes.is_some_and(|x| x > 0)
        })
        .collect();
    assert!(
        busy.len() >= 2,
        "at least two groups with traffic show bytes: {:?}",
        groups
            .iter()
            .map(|(c, g)| (c, b.values(*g).unwrap().mbm_local_delta_bytes))
            .collect::<Vec<_>>()
    );
    for (_, g) in &groups {
        let v = b.values(*g).unwrap();
        assert!(
            v.mbm_local_delta_bytes.is_some() && v.mbm_total_delta_bytes.is_some(),
            "{v:?}"
        );
    }
    for (_, g) in groups {
        b.stop_monitoring(g).unwrap();
    }
    assert!(sim.mon_groups().is_empty());
    assert!(
        sim.read("info/L3_MON/available_mbm_cntrs")
            .starts_with("0=30;"),
        "stopping gives the counters back"
    );
}

/// Another tool's 15 groups took the counters the kernel gives on mkdir (2 per domain
/// each; 32 per domain with the root's 2): a start needing one fails with an error naming
/// the counters per domain and the holders, and leaves no group of its own.
#[test]
fn out_of_counters_names_the_holders_and_leaves_no_group() {
    let sim = Sim::new("turin");
    let mut b = sim.open();
    for i in 0..15 {
        sim.files.mkdir(&format!("mon_groups/other{i}")).unwrap();
    }
    assert!(
        sim.read("info/L3_MON/available_mbm_cntrs")
            .starts_with("0=0;")
    );
    let before = sim.mon_groups();
    let e = b
        .start_monitoring(&cpus("0"), MonEvents::MBM_LOCAL)
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ResctrlError::OutOfMbmCounters { .. }), "{msg}");
    assert!(
        msg.contains("mbm_local_bytes in L3 domain 0, whose 32 counters"),
        "{msg}"
    );
    assert!(msg.contains("/ (2), mon_groups/other0 (2)"), "{msg}");
    assert_eq!(sim.mon_groups(), before, "the failed group is removed");
    // Freed by the other tool: the same start works.
    sim.write(
        "mon_groups/other0/mbm_L3_assignments",
        "mbm_local_bytes:0=_\n",
    );
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::MBM_LOCAL)
        .unwrap();
    b.stop_monitoring(g).unwrap();
}

/// A counter taken away after the start (another tool's `mbm_L3_assignments` write) makes
/// the poll fail naming the file, instead of a blank or 0.
#[test]
fn an_unassigned_counter_of_our_group_is_an_error_not_a_blank() {
    let sim = Sim::new("turin");
    let mut b = sim.open();
    // A group counting occupancy only gives back what the kernel assigned on mkdir.
    let llc = b
        .start_monitoring(&cpus("1"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    let held = sim.read(&format!(
        "mon_groups/{}/mbm_L3_assignments",
        sim.mon_groups()[0]
    ));
    assert!(!held.contains("=e"), "{held}");
    b.stop_monitoring(llc).unwrap();
    let g = b.start_monitoring(&cpus("0"), mbm()).unwrap();
    b.poll().unwrap();
    let dir = &sim.mon_groups()[0];
    sim.write(
        &format!("mon_groups/{dir}/mbm_L3_assignments"),
        "mbm_local_bytes:*=_\n",
    );
    let e = b.poll().unwrap_err();
    assert!(matches!(e, ResctrlError::Unassigned { .. }), "{e}");
    assert!(
        e.to_string().contains("mbm_local_bytes reads `Unassigned`"),
        "{e}"
    );
    b.stop_monitoring(g).unwrap();
}

/// `mbm_details`: ABMC's mode and counters on turin, its event filters; BMEC per domain on
/// genoa; SNC nodes on sapphire-rapids-snc2; nothing on an older Intel part.
#[test]
fn details_show_abmc_bmec_and_snc() {
    let sim = Sim::new("turin");
    let mut b = sim.open();
    let d = b.mbm_details().unwrap().unwrap();
    let a = d.assign.unwrap();
    assert_eq!(a.mode, AssignMode::MbmEvent);
    assert!(a.counters.iter().all(|(_, n)| *n == 32), "{:?}", a.counters);
    assert!(a.available.unwrap().iter().all(|(_, n)| *n == 30));
    assert_eq!(a.on_mkdir, Some(true));
    assert_eq!(
        d.event_configs,
        [
            (RmidEvent::MbmTotal, EventConfig::Filter(0x7f)),
            (RmidEvent::MbmLocal, EventConfig::Filter(0x15)),
        ]
    );
    assert_eq!(d.snc_nodes_per_l3, None);

    let genoa = Sim::new("genoa");
    let d = genoa.open().mbm_details().unwrap().unwrap();
    assert!(d.assign.is_none());
    let EventConfig::PerDomain(v) = &d.event_configs[0].1 else {
        panic!("{d:?}")
    };
    assert!(v.iter().all(|(_, b)| *b == 0x7f), "{v:?}");

    let snc = Sim::new("sapphire-rapids-snc2");
    let d = snc.open().mbm_details().unwrap().unwrap();
    assert_eq!(d.snc_nodes_per_l3, Some(2));
    assert!(d.event_configs.is_empty() && d.assign.is_none());

    let old = Sim::new("broadwell-ep");
    assert!(old.open().mbm_details().unwrap().unwrap().is_empty());
}

/// BMEC (`mon_config_write`) on genoa and ABMC's `event_filter` on turin: set, read back,
/// and `reset_allocation` (`pqos -R`) puts the defaults back.
#[test]
fn bmec_and_event_filter_round_trip_and_reset_restores_defaults() {
    let genoa = Sim::new("genoa");
    let mut b = genoa.open();
    b.set_mbm_event_config(RmidEvent::MbmTotal, 0x33).unwrap();
    b.set_mbm_event_config(RmidEvent::MbmLocal, 0x01).unwrap();
    let t = genoa.read("info/L3_MON/mbm_total_bytes_config");
    assert!(t.split(';').all(|x| x.trim().ends_with("=0x33")), "{t}");
    assert!(
        genoa
            .read("info/L3_MON/mbm_local_bytes_config")
            .starts_with("0=0x01;")
    );
    let e = b
        .set_mbm_event_config(RmidEvent::MbmTotal, 0x80)
        .unwrap_err();
    assert!(e.to_string().contains("only bits 0-6"), "{e}");
    b.reset_allocation(&rdt_core::AllocReset::default())
        .unwrap();
    let t = genoa.read("info/L3_MON/mbm_total_bytes_config");
    assert!(t.split(';').all(|x| x.trim().ends_with("=0x7f")), "{t}");
    assert!(
        genoa
            .read("info/L3_MON/mbm_local_bytes_config")
            .starts_with("0=0x15;")
    );

    let turin = Sim::new("turin");
    let mut b = turin.open();
    b.set_mbm_event_config(RmidEvent::MbmLocal, 0x03).unwrap();
    assert_eq!(
        turin.read("info/L3_MON/event_configs/mbm_local_bytes/event_filter"),
        "local_reads,remote_reads\n"
    );
    b.reset_allocation(&rdt_core::AllocReset::default())
        .unwrap();
    assert_eq!(
        turin.read("info/L3_MON/event_configs/mbm_local_bytes/event_filter"),
        "local_reads,local_non_temporal_writes,local_reads_slow_memory\n"
    );

    let intel = Sim::new("broadwell-ep");
    let e = intel
        .open()
        .set_mbm_event_config(RmidEvent::MbmTotal, 0x7f)
        .unwrap_err();
    assert!(e.to_string().contains("needs AMD BMEC"), "{e}");
}

/// SNC (`mon_event_count`): a group's `mon_L3_XX` value is the sum of its SNC nodes'
/// `mon_sub_L3_YY` files, and the backend's value is that sum.
#[test]
fn snc_group_values_are_the_sum_of_the_sub_domains() {
    let sim = Sim::new("sapphire-rapids-snc2");
    let mut b = sim.open();
    let all: CpuSet = b
        .topology()
        .cpus()
        .iter()
        .filter(|p| p.l3.is_some_and(|d| d.get() == 0))
        .map(|p| p.cpu)
        .collect();
    let g = b
        .start_monitoring(&all, MonEvents::MBM_TOTAL | MonEvents::LLC_OCCUPANCY)
        .unwrap();
    b.poll().unwrap();
    let dir = format!("mon_groups/{}/mon_data/mon_L3_00", sim.mon_groups()[0]);
    let subs: Vec<String> = sim
        .files
        .subdirs(&dir)
        .unwrap()
        .into_iter()
        .filter(|s| s.starts_with("mon_sub_L3_"))
        .collect();
    assert_eq!(subs.len(), 2, "{subs:?}");
    let num = |t: String| t.trim().parse::<u64>().unwrap();
    let sum = || -> u64 {
        subs.iter()
            .map(|s| num(sim.read(&format!("{dir}/{s}/mbm_total_bytes"))))
            .sum()
    };
    let before = sum();
    sim.handle.advance(Duration::from_secs(1));
    b.poll().unwrap();
    let after = sum();
    assert!(after > before, "traffic on the L3's CPUs");
    assert_eq!(
        num(sim.read(&format!("{dir}/mbm_total_bytes"))),
        after,
        "mon_L3_00 = sum of its nodes"
    );
    let v = b.values(g).unwrap();
    let d0 = v.domains.iter().find(|d| d.domain.get() == 0).unwrap();
    assert_eq!(d0.mbm_total_delta_bytes, Some(after - before), "{d0:?}");
    b.stop_monitoring(g).unwrap();
}
