//! Sub-NUMA Clustering on `sapphire-rapids-snc2` (spec §8.2, §9.1; `mkdir_mondata_subdir_snc`,
//! `mon_event_count` summing the nodes of an L3, `num_rmids` divided).

use std::time::Duration;

use super::errno::EINVAL;
use super::{MountOptions, Resctrl};
use crate::vfs::Tree;
use crate::{SimHandle, SimPlatform};

fn mount(model: &str) -> (SimHandle, Resctrl) {
    let sim = SimHandle::new(SimPlatform::builtin(model).unwrap());
    let fs = Resctrl::mount(sim.clone(), &MountOptions::default()).unwrap();
    (sim, fs)
}

fn text(fs: &mut Resctrl, path: &str) -> String {
    String::from_utf8(fs.read(path, 0, 1 << 20).unwrap()).unwrap()
}

fn number(fs: &mut Resctrl, path: &str) -> u64 {
    text(fs, path).trim_end().parse().unwrap()
}

#[test]
fn snc2_halves_the_rmids_and_adds_one_sub_domain_per_node() {
    let (_s, mut plain) = mount("sapphire-rapids");
    let rmids = number(&mut plain, "info/L3_MON/num_rmids");
    plain.unmount().unwrap();
    let (sim, mut fs) = mount("sapphire-rapids-snc2");
    assert_eq!(number(&mut fs, "info/L3_MON/num_rmids"), rmids / 2);
    assert_eq!(sim.lock().topology().nodes(), [0, 1, 2, 3]);
    let entries: Vec<String> = fs
        .list("mon_data/mon_L3_01")
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        entries,
        [
            "llc_occupancy",
            "mbm_total_bytes",
            "mbm_local_bytes",
            "mon_sub_L3_02",
            "mon_sub_L3_03"
        ]
    );
    // mba_MBps needs MBA and monitoring at one scope: refused with SNC
    fs.unmount().unwrap();
    let opts: MountOptions = "mba_MBps".parse().unwrap();
    let e = Resctrl::mount(sim, &opts).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(EINVAL));
}

#[test]
fn an_l3_file_is_the_sum_of_its_nodes() {
    // arrange: the default scenario's pipeline and thrasher in a group of their own
    let (sim, mut fs) = mount("sapphire-rapids-snc2");
    fs.mkdir("p").unwrap();
    let cpus: Vec<u32> = sim
        .lock()
        .topology()
        .cpus()
        .iter()
        .map(|c| c.cpu.get())
        .collect();
    let list = format!("0-{}\n", cpus.len() - 1);
    fs.write("p/cpus_list", 0, list.as_bytes()).unwrap();
    // act
    sim.lock().advance(Duration::from_secs(2));
    // assert
    for (l3, subs) in [
        ("mon_L3_00", ["mon_sub_L3_00", "mon_sub_L3_01"]),
        ("mon_L3_01", ["mon_sub_L3_02", "mon_sub_L3_03"]),
    ] {
        for ev in ["llc_occupancy", "mbm_total_bytes", "mbm_local_bytes"] {
            let whole = number(&mut fs, &format!("p/mon_data/{l3}/{ev}"));
            let parts: Vec<u64> = subs
                .iter()
                .map(|s| number(&mut fs, &format!("p/mon_data/{l3}/{s}/{ev}")))
                .collect();
            assert_eq!(whole, parts.iter().sum::<u64>(), "{l3}/{ev}: {parts:?}");
        }
    }
    let busy: Vec<u64> = [
        "mon_sub_L3_00",
        "mon_sub_L3_01",
        "mon_sub_L3_02",
        "mon_sub_L3_03",
    ]
    .iter()
    .enumerate()
    .map(|(i, s)| {
        number(
            &mut fs,
            &format!("p/mon_data/mon_L3_0{}/{s}/mbm_total_bytes", i / 2),
        )
    })
    .collect();
    // both nodes of an L3 carry traffic, so a parent reading one node would differ
    assert!(busy[0] > 0 && busy[1] > 0, "{busy:?}");
}
