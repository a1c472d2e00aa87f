//! The spec's transcripts and acceptance list in-process ([`transcripts`]), and the acceptance
//! items a file-operation transcript cannot express: mount errors, unmount reset, counter
//! semantics against the model, the `mba_MBps` controller, host threads, every model's tree.

use std::time::Duration;

use rdt_core::{CacheDomain, LogicalCpu, Rmid};
use rdt_msr::{MsrAddr, MsrIo};

use super::errno::{EBUSY, EINVAL, EISDIR, ENOENT, ENOSPC, ENOTDIR, ESRCH};
use super::transcripts::{self, Ctx, FsOps, InProcess};
use super::{MountOptions, Resctrl};
use crate::vfs::{NodeKind, Tree};
use crate::{BUILTIN_MODELS, SimHandle, SimPlatform};

/// `skylake-sp` booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal`: L3 CAT, CMT and MBM back.
const SKX_RDT: &str = "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal";

fn handle(model: &str) -> SimHandle {
    SimHandle::new(SimPlatform::builtin(model).unwrap())
}

fn mount(sim: &SimHandle, opts: &str) -> Resctrl {
    Resctrl::mount(sim.clone(), &opts.parse().unwrap()).unwrap()
}

fn errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.unwrap_err().raw_os_error().unwrap()
}

fn text(fs: &mut Resctrl, path: &str) -> String {
    String::from_utf8(fs.read(path, 0, 1 << 20).unwrap()).unwrap()
}

fn msr(sim: &SimHandle, cpu: u32, addr: u32) -> u64 {
    let mut h = sim.clone();
    MsrIo::read(&mut h, LogicalCpu::new(cpu), MsrAddr::new(addr)).unwrap()
}

fn number(fs: &mut Resctrl, path: &str) -> u64 {
    text(fs, path).trim_end().parse().unwrap()
}

/// A platform like `model` with its capabilities changed by `f`.
fn variant(model: &str, f: impl FnOnce(&mut rdt_core::Capabilities)) -> SimHandle {
    let base = SimPlatform::builtin(model).unwrap();
    let mut caps = base.capabilities().clone();
    f(&mut caps);
    let p = SimPlatform::from_parts(
        "variant",
        "test:variant",
        base.cpuid(),
        caps,
        base.topology().clone(),
    )
    .unwrap();
    SimHandle::new(p)
}

#[test]
fn every_spec_transcript_passes_in_process() {
    // arrange
    let ctx = Ctx::simulated();
    let mut failures = Vec::new();
    // act
    for t in transcripts::all(&ctx) {
        let mut h = InProcess::mount(t.model, t.options, &ctx).unwrap();
        if let Err(e) = transcripts::run(&t, &mut h) {
            failures.push(e);
        }
    }
    // assert
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn amd_accepts_an_empty_cbm() {
    let ctx = Ctx::simulated();
    let t = transcripts::amd_zero_cbm();
    let mut h = InProcess::mount(t.model, t.options, &ctx).unwrap();
    transcripts::run(&t, &mut h).unwrap();
}

#[test]
fn mounting_twice_is_ebusy_until_unmounted() {
    // arrange
    let sim = handle("broadwell-ep");
    let fs = mount(&sim, "");
    // act / assert
    assert_eq!(
        errno(Resctrl::mount(sim.clone(), &MountOptions::default())),
        EBUSY
    );
    fs.unmount().unwrap();
    let again = mount(&sim, "cdp");
    drop(again);
    let _third = mount(&sim, "");
    // another platform is another machine
    let _other = mount(&handle("broadwell-ep"), "");
}

#[test]
fn options_the_platform_cannot_honour_are_einval() {
    let no_cdp = variant("broadwell-ep", |c| {
        c.l3_cat.get_mut().unwrap().cdp_supported = false;
    });
    assert_eq!(
        errno(Resctrl::mount(no_cdp.clone(), &"cdp".parse().unwrap())),
        EINVAL
    );
    // the failed mount leaves the platform mountable
    drop(mount(&no_cdp, ""));
    // broadwell-ep has no L2 CAT and no MBA; milan's MBA is not linear
    assert_eq!(
        errno(Resctrl::mount(
            handle("broadwell-ep"),
            &"cdpl2".parse().unwrap()
        )),
        EINVAL
    );
    assert_eq!(
        errno(Resctrl::mount(
            handle("broadwell-ep"),
            &"mba_MBps".parse().unwrap()
        )),
        EINVAL
    );
    assert_eq!(
        errno(Resctrl::mount(
            handle("milan"),
            &"mba_MBps".parse().unwrap()
        )),
        EINVAL
    );
    let e = "mba_MBps"
        .parse::<MountOptions>()
        .unwrap()
        .check(SimPlatform::builtin("milan").unwrap().capabilities(), false);
    assert_eq!(
        e.unwrap_err().to_string(),
        "mba_MBps requires MBM and linear scale MBA at L3 scope"
    );
}

#[test]
fn unmount_puts_every_cpu_mask_and_cdp_bit_back() {
    // arrange: groups, CPUs, masks, MBA and CDP all changed
    let sim = handle(SKX_RDT);
    let mut fs = mount(&sim, "cdp");
    fs.mkdir("p0").unwrap();
    fs.mkdir("p0/mon_groups/m").unwrap();
    fs.write("p0/schemata", 0, b"L3DATA:0=3;1=3\nL3CODE:0=c\nMB:0=30\n")
        .unwrap();
    fs.write("p0/cpus_list", 0, b"0-9\n").unwrap();
    fs.write("p0/mon_groups/m/cpus_list", 0, b"2\n").unwrap();
    assert_eq!(msr(&sim, 2, 0xC8F), (1 << 32) | 2);
    assert_eq!(msr(&sim, 0, 0xC92), 0x3);
    assert_eq!(msr(&sim, 0, 0xD51), 70);
    // act
    fs.unmount().unwrap();
    // assert
    for cpu in [0, 2, 9, 71] {
        assert_eq!(msr(&sim, cpu, 0xC8F), 0, "IA32_PQR_ASSOC of CPU {cpu}");
    }
    for cpu in [0, 1] {
        assert_eq!(msr(&sim, cpu, 0xC81), 0, "IA32_L3_QOS_CFG");
        for n in 0..16 {
            assert_eq!(msr(&sim, cpu, 0xC90 + n), 0x7ff, "IA32_L3_QOS_MASK_{n}");
        }
        for n in 0..8 {
            assert_eq!(msr(&sim, cpu, 0xD50 + n), 0, "MBA delay {n}");
        }
    }
    // and a new mount starts from scratch
    let mut fs = mount(&sim, "");
    assert_eq!(fs.kind("p0").unwrap_err().raw_os_error(), Some(ENOENT));
    assert_eq!(text(&mut fs, "cpus_list"), "0-71\n");
}

#[test]
fn dropping_the_mount_unmounts() {
    let sim = handle("broadwell-ep");
    {
        let mut fs = mount(&sim, "cdp");
        fs.mkdir("p0").unwrap();
        fs.write("p0/cpus_list", 0, b"3\n").unwrap();
    }
    assert_eq!(msr(&sim, 3, 0xC8F), 0);
    assert_eq!(msr(&sim, 0, 0xC81), 0);
    drop(mount(&sim, ""));
}

#[test]
fn mount_leaves_what_an_msr_tool_wrote_until_resctrl_writes_it() {
    // arrange: COS 3 on CPU 5 and a narrow COS 1 mask, as `pqos -e/-a` over /dev/cpu leaves
    let sim = handle("broadwell-ep");
    let mut h = sim.clone();
    MsrIo::write(&mut h, LogicalCpu::new(5), MsrAddr::new(0xC8F), 3 << 32).unwrap();
    MsrIo::write(&mut h, LogicalCpu::new(0), MsrAddr::new(0xC91), 0x3).unwrap();
    // act
    let mut fs = mount(&sim, "");
    // assert: the kernel does not read them back; its files show its own defaults
    assert_eq!(msr(&sim, 5, 0xC8F), 3 << 32);
    assert_eq!(msr(&sim, 0, 0xC91), 0x3);
    fs.mkdir("p0").unwrap();
    assert_eq!(text(&mut fs, "p0/schemata"), "    L3:0=fffff;1=fffff\n");
    assert_eq!(
        msr(&sim, 0, 0xC91),
        0x3,
        "an unchanged value is not rewritten"
    );
    fs.write("p0/schemata", 0, b"L3:0=ff\n").unwrap();
    fs.write("p0/cpus_list", 0, b"5\n").unwrap();
    assert_eq!(msr(&sim, 0, 0xC91), 0xff);
    assert_eq!(msr(&sim, 5, 0xC8F), (1 << 32) | 1);
}

#[test]
fn occupancy_is_the_models_bytes_for_the_groups_rmid() {
    // arrange: the thrasher's CPUs 8 and 10 (L3 domain 0) in p0
    let sim = handle("broadwell-ep");
    let mut fs = mount(&sim, "");
    fs.mkdir("p0").unwrap();
    fs.write("p0/cpus_list", 0, b"8,10\n").unwrap();
    // act
    let p0 = number(&mut fs, "p0/mon_data/mon_L3_00/llc_occupancy");
    let root = number(&mut fs, "mon_data/mon_L3_00/llc_occupancy");
    // assert
    let p = sim.lock();
    let d0 = CacheDomain::new(0);
    assert!(p0 > 10 << 20, "{p0}");
    assert_eq!(p0, p.llc_occupancy_bytes(d0, Rmid::new(1)));
    assert_eq!(root, p.llc_occupancy_bytes(d0, Rmid::new(0)));
}

#[test]
fn mbm_counts_run_past_the_hardware_counter_wrap() {
    // arrange: skylake-sp counts 24 bits of 73728 bytes, so the counter wraps every ~1.2 TB;
    // the thrasher alone moves tens of GB/s through the root's RMID.
    let sim = handle(SKX_RDT);
    let mut fs = mount(&sim, "");
    let wrap = (1u64 << 24) * 73728;
    // act: one long step and one read, then more steps between reads
    sim.advance(Duration::from_secs(200));
    let first = number(&mut fs, "mon_data/mon_L3_00/mbm_total_bytes");
    for _ in 0..3 {
        sim.advance(Duration::from_secs(100));
    }
    let second = number(&mut fs, "mon_data/mon_L3_00/mbm_total_bytes");
    // assert: the model's unwrapped count times the scale, well past the wrap
    let raw = {
        let p = sim.lock();
        p.counters[&CacheDomain::new(0)][0].total.whole
    };
    let hw = msr_counter(&sim);
    assert!(first > 2 * wrap, "{first} vs wrap {wrap}");
    assert_eq!(second, raw * 73728);
    assert!(second > first);
    assert_ne!(hw * 73728, second, "the hardware value alone has wrapped");
}

/// The root RMID's total counter of L3 domain 0 as IA32_QM_CTR shows it (wrapped).
fn msr_counter(sim: &SimHandle) -> u64 {
    rmid_counter(sim, 0)
}

/// RMID `rmid`'s total counter of L3 domain 0 as IA32_QM_CTR shows it (wrapped).
fn rmid_counter(sim: &SimHandle, rmid: u64) -> u64 {
    let mut h = sim.clone();
    MsrIo::write(
        &mut h,
        LogicalCpu::new(0),
        MsrAddr::new(0xC8D),
        rmid << 32 | 2,
    )
    .unwrap();
    MsrIo::read(&mut h, LogicalCpu::new(0), MsrAddr::new(0xC8E)).unwrap()
}

/// `intel_rdt_mbm_apply_quirk` (`arch/x86/kernel/cpu/resctrl/monitor.c`): on Broadwell-X
/// the kernel multiplies the MBM counts of RMIDs above the `mbm_cf_table` threshold by the
/// correction factor; the model's hardware counts those RMIDs low by that factor, so
/// resctrl reports the traffic and IA32_QM_CTR does not.
#[test]
fn mbm_above_the_erratum_threshold_is_low_in_hardware_and_corrected_by_the_kernel() {
    // arrange: broadwell-ep with 24 RMIDs, whose table entry is (15, 0.969650)
    let sim = variant("broadwell-ep", |c| {
        let m = c.monitoring.get_mut().unwrap();
        m.num_rmids = 24;
        m.max_rmid = 23;
    });
    let scale = u64::from(
        sim.lock()
            .capabilities()
            .monitoring
            .get()
            .unwrap()
            .upscaling_factor,
    );
    let mut fs = mount(&sim, "");
    for n in 1..=16 {
        fs.mkdir(&format!("mon_groups/g{n}")).unwrap(); // RMID n
    }
    fs.write("mon_groups/g15/cpus_list", 0, b"2\n").unwrap();
    fs.write("mon_groups/g16/cpus_list", 0, b"4\n").unwrap();
    // act
    sim.advance(Duration::from_secs(2));
    // assert
    for rmid in [15_u32, 16] {
        let model = sim.lock().counters[&CacheDomain::new(0)][rmid as usize]
            .total
            .whole;
        let hw = rmid_counter(&sim, u64::from(rmid));
        let bytes = number(
            &mut fs,
            &format!("mon_groups/g{rmid}/mon_data/mon_L3_00/mbm_total_bytes"),
        );
        assert!(model > 1000, "traffic on RMID {rmid}: {model}");
        if rmid == 15 {
            assert_eq!(hw, model, "at the threshold the counter is exact");
            assert_eq!(bytes, model * scale);
        } else {
            assert_eq!(
                hw,
                (model << 20) / 1_016_752,
                "the erratum: low by the factor"
            );
            assert_eq!(bytes, ((hw * 1_016_752) >> 20) * scale, "corrected");
            assert!(
                bytes.abs_diff(model * scale) <= scale,
                "{bytes} vs {}",
                model * scale
            );
        }
    }
}

#[test]
fn a_new_group_counts_from_zero_on_a_reused_rmid() {
    // arrange: three RMIDs, so the second group after a removal reuses RMID 1
    let sim = variant("broadwell-ep", |c| {
        let m = c.monitoring.get_mut().unwrap();
        m.num_rmids = 3;
        m.max_rmid = 2;
    });
    let mut fs = mount(&sim, "");
    fs.mkdir("mon_groups/a").unwrap(); // RMID 1
    fs.write("mon_groups/a/cpus_list", 0, b"8\n").unwrap();
    sim.advance(Duration::from_secs(5));
    assert!(number(&mut fs, "mon_groups/a/mon_data/mon_L3_00/mbm_total_bytes") > 0);
    fs.rmdir("mon_groups/a").unwrap();
    sim.advance(Duration::from_secs(1));
    fs.mkdir("mon_groups/b").unwrap(); // RMID 2, the head of the free list
    // act
    fs.mkdir("mon_groups/c").unwrap(); // RMID 1, back from limbo
    // assert
    assert_eq!(
        text(&mut fs, "mon_groups/c/mon_data/mon_L3_00/mbm_total_bytes"),
        "0\n"
    );
    assert_eq!(errno(fs.mkdir("mon_groups/d")), ENOSPC);
    assert_eq!(text(&mut fs, "info/last_cmd_status"), "Out of RMIDs\n");
}

#[test]
fn unavailable_reads_show_as_text_and_a_ctrl_group_drops_them_when_a_child_reads() {
    // arrange: p0 (RMID 1) with m (RMID 2)
    let sim = handle(SKX_RDT);
    let mut fs = mount(&sim, "");
    fs.mkdir("p0").unwrap();
    fs.mkdir("p0/mon_groups/m").unwrap();
    fs.write("p0/cpus_list", 0, b"2,4\n").unwrap();
    fs.write("p0/mon_groups/m/cpus_list", 0, b"4\n").unwrap();
    sim.advance(Duration::from_secs(1));
    let d0 = CacheDomain::new(0);
    // act / assert: the child alone
    sim.lock().inject_unavailable(d0, Rmid::new(2), 1);
    assert_eq!(
        text(
            &mut fs,
            "p0/mon_groups/m/mon_data/mon_L3_00/mbm_total_bytes"
        ),
        "Unavailable\n"
    );
    assert!(
        number(
            &mut fs,
            "p0/mon_groups/m/mon_data/mon_L3_00/mbm_total_bytes"
        ) > 0
    );
    // the parent: the child's failure is dropped, its own count remains
    let own_and_child = number(&mut fs, "p0/mon_data/mon_L3_00/mbm_total_bytes");
    let child = number(
        &mut fs,
        "p0/mon_groups/m/mon_data/mon_L3_00/mbm_total_bytes",
    );
    sim.lock().inject_unavailable(d0, Rmid::new(2), 1);
    assert_eq!(
        number(&mut fs, "p0/mon_data/mon_L3_00/mbm_total_bytes"),
        own_and_child - child
    );
    // both failing: the text
    sim.lock().inject_unavailable(d0, Rmid::new(1), 1);
    sim.lock().inject_unavailable(d0, Rmid::new(2), 1);
    assert_eq!(
        text(&mut fs, "p0/mon_data/mon_L3_00/llc_occupancy"),
        "Unavailable\n"
    );
}

#[test]
fn mba_mbps_controller_steps_a_group_down_to_its_target() {
    // arrange: the thrasher's CPUs in p0 with a 1000 MBps target on total bandwidth
    let sim = handle(SKX_RDT);
    let mut fs = mount(&sim, "mba_MBps");
    fs.mkdir("p0").unwrap();
    fs.write("p0/cpus_list", 0, b"8-10\n").unwrap();
    fs.write("p0/mba_MBps_event", 0, b"mbm_total_bytes\n")
        .unwrap();
    fs.write("p0/schemata", 0, b"MB:0=1000;1=1000\n").unwrap();
    assert_eq!(msr(&sim, 0, 0xD51), 0);
    // act: the 1 s sampler runs once per second of virtual time
    let mut delays = Vec::new();
    for _ in 0..12 {
        sim.advance(Duration::from_secs(1));
        fs.tick().unwrap();
        delays.push(msr(&sim, 0, 0xD51));
    }
    // assert: 10 % down per period to the 10 % floor (delay 90); the target still shows
    assert_eq!(&delays[..3], &[10, 20, 30]);
    assert_eq!(*delays.last().unwrap(), 90);
    assert_eq!(
        text(&mut fs, "p0/schemata"),
        "    MB:0=1000;1=1000\n    L3:0=7ff;1=7ff\n"
    );
    // the root, unlimited, is never throttled
    assert_eq!(msr(&sim, 0, 0xD50), 0);
}

#[test]
fn host_threads_move_by_id_and_zero_is_not_supported() {
    // arrange
    let sim = handle("broadwell-ep");
    let mut fs = mount(&sim, "");
    fs.mkdir("p0").unwrap();
    let me = std::process::id();
    // act
    fs.write("p0/tasks", 0, format!("{me}\n").as_bytes())
        .unwrap();
    // assert
    assert_eq!(text(&mut fs, "p0/tasks"), format!("{me}\n"));
    assert_eq!(fs.task_ids(me), Some((1, 1)));
    assert_eq!(errno(fs.write("p0/tasks", 0, b"0\n")), ESRCH);
    assert_eq!(
        text(&mut fs, "info/last_cmd_status"),
        "No task 0\nError while processing task 0\n"
    );
    fs.write("tasks", 0, format!("{me}").as_bytes()).unwrap();
    assert!(text(&mut fs, "tasks").lines().any(|l| l == me.to_string()));
}

#[test]
fn simulated_tasks_start_in_the_root_and_leave_when_removed() {
    // arrange: two ids no host thread has
    let free: Vec<u32> = (4_000_000..)
        .filter(|id| !std::path::Path::new(&format!("/proc/{id}")).exists())
        .take(2)
        .collect();
    let (a, b) = (free[0], free[1]);
    let sim = handle("broadwell-ep");
    let mut fs = mount(&sim, "");
    fs.add_sim_task(b);
    fs.add_sim_task(a);
    // (the root also lists every host thread)
    let sim_ids = |t: String| -> Vec<u32> {
        t.lines()
            .filter_map(|l| l.parse().ok())
            .filter(|id| [a, b].contains(id))
            .collect()
    };
    assert_eq!(sim_ids(text(&mut fs, "tasks")), [a, b]);
    // act
    fs.mkdir("p0").unwrap();
    fs.write("p0/tasks", 0, format!("{b:#x}\n").as_bytes())
        .unwrap();
    // assert
    assert_eq!(sim_ids(text(&mut fs, "tasks")), [a]);
    assert_eq!(text(&mut fs, "p0/tasks"), format!("{b}\n"));
    fs.remove_sim_task(b);
    assert_eq!(text(&mut fs, "p0/tasks"), "");
    assert_eq!(
        errno(fs.write("p0/tasks", 0, format!("{b}\n").as_bytes())),
        ESRCH
    );
}

#[test]
fn no_space_on_a_cache_when_exclusive_groups_hold_every_bit() {
    // arrange: sapphire-rapids' root made exclusive over all of L2 (no shareable bits there)
    let sim = handle("sapphire-rapids");
    let mut fs = mount(&sim, "");
    // L3 shareable_bits are 0x6000: the root leaves them
    fs.write("schemata", 0, b"L3:0=1fff;1=1fff\n").unwrap();
    fs.write("mode", 0, b"exclusive\n").unwrap();
    // act / assert
    assert_eq!(errno(fs.mkdir("g1")), ENOSPC);
    assert_eq!(text(&mut fs, "info/last_cmd_status"), "No space on L2:0\n");
    assert_eq!(fs.kind("g1").unwrap_err().raw_os_error(), Some(ENOENT));
    // the CLOSID came back
    fs.write("mode", 0, b"shareable\n").unwrap();
    fs.mkdir("g1").unwrap();
    assert_eq!(fs.grp(fs.ctrl_names["g1"]).closid, 1);
}

#[test]
fn exclusive_needs_a_cache_resource() {
    let sim = variant(SKX_RDT, |c| {
        c.l3_cat = rdt_core::Feature::Unsupported;
    });
    let mut fs = mount(&sim, "");
    fs.mkdir("p0").unwrap();
    assert_eq!(text(&mut fs, "p0/schemata"), "MB:0=100;1=100\n");
    assert_eq!(errno(fs.write("p0/mode", 0, b"exclusive\n")), EINVAL);
    assert_eq!(
        text(&mut fs, "info/last_cmd_status"),
        "Cannot be exclusive without CAT/CDP\n"
    );
}

#[test]
fn reads_slice_at_the_offset_and_paths_give_the_vfs_errors() {
    let sim = handle(SKX_RDT);
    let mut fs = mount(&sim, "");
    assert_eq!(fs.read("schemata", 4, 3).unwrap(), b"MB:");
    assert_eq!(fs.read("schemata", 1000, 3).unwrap(), b"");
    assert_eq!(errno(fs.read("info", 0, 10)), EISDIR);
    assert_eq!(errno(fs.write("info", 0, b"x")), EISDIR);
    assert_eq!(errno(fs.list("tasks")), ENOTDIR);
    assert_eq!(errno(fs.kind("tasks/x")), ENOTDIR);
    assert_eq!(errno(fs.kind("nope")), ENOENT);
    assert_eq!(errno(fs.mkdir("tasks/x")), ENOTDIR);
    assert_eq!(errno(fs.rmdir("tasks")), ENOTDIR);
    assert_eq!(errno(fs.rmdir("")), EBUSY);
    assert_eq!(fs.kind("size").unwrap(), NodeKind::File { mode: 0o444 });
    assert_eq!(
        fs.kind("info/L3_MON/max_threshold_occupancy").unwrap(),
        NodeKind::File { mode: 0o644 }
    );
    assert_eq!(
        errno(fs.mkdir(&"x".repeat(256))),
        super::errno::ENAMETOOLONG
    );
    assert_eq!(errno(fs.mkdir("a\nb")), EINVAL);
}

#[test]
fn root_directory_lists_the_kernels_files() {
    let sim = handle(SKX_RDT);
    let mut fs = mount(&sim, "");
    fs.mkdir("p0").unwrap();
    let names = |fs: &Resctrl, p: &str| -> Vec<String> {
        let mut v: Vec<String> = fs.list(p).unwrap().into_iter().map(|(n, _)| n).collect();
        v.sort();
        v
    };
    assert_eq!(
        names(&fs, ""),
        [
            "cpus",
            "cpus_list",
            "info",
            "mode",
            "mon_data",
            "mon_groups",
            "p0",
            "schemata",
            "size",
            "tasks"
        ]
    );
    assert_eq!(
        names(&fs, "info"),
        ["L3", "L3_MON", "MB", "last_cmd_status"]
    );
    assert_eq!(
        names(&fs, "info/L3"),
        [
            "bit_usage",
            "cbm_mask",
            "min_cbm_bits",
            "num_closids",
            "shareable_bits",
            "sparse_masks"
        ]
    );
    assert_eq!(
        names(&fs, "info/MB"),
        [
            "bandwidth_gran",
            "delay_linear",
            "min_bandwidth",
            "num_closids",
            "thread_throttle_mode"
        ]
    );
    // 6.18+ (the default release): `mbm_assign_mode` on every monitoring system
    assert_eq!(
        names(&fs, "info/L3_MON"),
        [
            "max_threshold_occupancy",
            "mbm_assign_mode",
            "mon_features",
            "num_rmids"
        ]
    );
    fs.mkdir("p0/mon_groups/m").unwrap();
    assert_eq!(
        names(&fs, "p0/mon_groups/m"),
        ["cpus", "cpus_list", "mon_data", "tasks"]
    );
    assert_eq!(names(&fs, "p0/mon_data"), ["mon_L3_00", "mon_L3_01"]);
}

/// Every file of the tree under `dir`, read once.
fn walk(fs: &mut Resctrl, dir: &str, files: &mut Vec<String>) {
    for (name, kind) in fs.list(dir).unwrap() {
        let path = if dir.is_empty() {
            name
        } else {
            format!("{dir}/{name}")
        };
        assert_eq!(fs.kind(&path).unwrap(), kind, "{path}");
        if kind == NodeKind::Dir {
            walk(fs, &path, files);
        } else {
            // Files whose read is EINVAL while their feature is off (abmc.rs).
            let off = ["available_mbm_cntrs", "mbm_assign_on_mkdir", "event_filter"]
                .iter()
                .chain(&["mbm_L3_assignments", "io_alloc_cbm"])
                .any(|f| path.ends_with(f));
            match fs.read(&path, 0, 1 << 20) {
                Err(e) if off && e.raw_os_error() == Some(EINVAL) => {}
                r => {
                    let t = String::from_utf8(r.unwrap()).unwrap();
                    assert!(t.is_empty() || t.ends_with('\n'), "{path}: {t:?}");
                }
            }
            files.push(path);
        }
    }
}

#[test]
fn every_model_and_option_mounts_and_every_file_reads() {
    let models = BUILTIN_MODELS.iter().copied().chain([SKX_RDT]);
    for model in models {
        for opts in [
            "",
            "cdp",
            "cdpl2",
            "mba_MBps",
            "debug",
            "cdp,cdpl2,mba_MBps,debug",
        ] {
            let sim = handle(model);
            let Ok(mut fs) = Resctrl::mount(sim.clone(), &opts.parse().unwrap()) else {
                continue;
            };
            fs.mkdir("p0").unwrap();
            // Stock skylake-sp: no monitoring (`__check_quirks_intel`); xeon-rdt13 has its CPUID.
            let mon = model != "skylake-sp" && model != "xeon-rdt13";
            assert_eq!(fs.kind("p0/mon_groups").is_ok(), mon, "{model}");
            if mon {
                fs.mkdir("p0/mon_groups/m").unwrap();
            }
            let mut files = Vec::new();
            walk(&mut fs, "", &mut files);
            assert_eq!(
                files
                    .iter()
                    .any(|f| f == "p0/mon_groups/m/mon_data/mon_L3_00/llc_occupancy"),
                mon,
                "{model}"
            );
            // schemata lines are the schemas, right-aligned to one width
            let s = text(&mut fs, "p0/schemata");
            let widths: Vec<usize> = s.lines().map(|l| l.find(':').unwrap()).collect();
            assert!(
                widths.windows(2).all(|w| w[0] == w[1]),
                "{model} -o {opts}: {s}"
            );
        }
    }
}

#[test]
fn l2_lines_follow_the_l2_ids_of_the_topology() {
    let sim = handle("sapphire-rapids");
    let ids: Vec<u32> = sim
        .lock()
        .topology()
        .l2_domains()
        .iter()
        .map(|d| d.get())
        .collect();
    let mut fs = mount(&sim, "");
    let s = text(&mut fs, "schemata");
    let l2 = s
        .lines()
        .find(|l| l.trim_start().starts_with("L2:"))
        .unwrap();
    let want: Vec<String> = ids.iter().map(|i| format!("{i}=ffff")).collect();
    assert_eq!(l2, format!("    L2:{}", want.join(";")));
    assert_eq!(
        s.lines()
            .map(|l| l.split(':').next().unwrap())
            .collect::<Vec<_>>(),
        ["    MB", "    L2", "    L3"]
    );
}

#[test]
fn the_in_process_harness_reads_whole_files() {
    let ctx = Ctx::simulated();
    let mut h = InProcess::mount("milan", "", &ctx).unwrap();
    let s = FsOps::read(&mut h, "schemata").unwrap();
    assert!(s.len() > 100 && s.ends_with(b"\n"));
}

#[test]
fn amd_with_smba_and_no_cdp_matches_the_specs_reference_layout() {
    // arrange: milan without L3 CDP and with SMBA like its MBA: the spec's §15.7 machine
    let sim = variant("milan", |c| {
        c.l3_cat.get_mut().unwrap().cdp_supported = false;
        c.smba = c.mba.clone();
    });
    let mut fs = mount(&sim, "");
    let line = |name: &str, v: &dyn Fn(u32) -> String| {
        let d: Vec<String> = (0..16).map(|i| format!("{i}={}", v(i))).collect();
        format!("{name}:{}\n", d.join(";"))
    };
    let full = |_| "2048".to_string();
    // act / assert
    assert_eq!(
        text(&mut fs, "schemata"),
        format!(
            "{}{}{}",
            line("SMBA", &full),
            line("  MB", &full),
            line("  L3", &|_| "ffff".into())
        )
    );
    fs.write("schemata", 0, b"SMBA:1=16\n").unwrap();
    assert!(
        text(&mut fs, "schemata").starts_with(&line("SMBA", &|i| if i == 1 {
            "16".into()
        } else {
            "2048".into()
        }))
    );
    assert_eq!(
        msr(&sim, 8, 0xC000_0280),
        16,
        "SMBA limit of COS 0 in L3 domain 1"
    );
    assert_eq!(errno(fs.write("schemata", 0, b"SMBA:0=4096\n")), EINVAL);
    assert_eq!(
        text(&mut fs, "info/last_cmd_status"),
        "MB value 4096 out of range [0,2048]\n"
    );
    assert_eq!(text(&mut fs, "info/SMBA/min_bandwidth"), "0\n");
    assert_eq!(text(&mut fs, "info/SMBA/bandwidth_gran"), "1\n");
    assert_eq!(text(&mut fs, "info/SMBA/num_closids"), "16\n");
    assert_eq!(errno(fs.kind("info/SMBA/thread_throttle_mode")), ENOENT);
    // without a CDP-capable L3, `cdp` is refused
    drop(fs);
    assert_eq!(errno(Resctrl::mount(sim, &"cdp".parse().unwrap())), EINVAL);
}

/// `arch/x86/kernel/cpu/resctrl/core.c` `__check_quirks_intel`: on Skylake-SP stepping ≤ 4
/// (the Gold 6140 is stepping 4) the kernel sets `rdt=!cmt,!mbmtotal,!mbmlocal,!l3cat`, so
/// a stock mount shows MB only; `rdt=l3cat,cmt,mbmtotal,mbmlocal` brings the rest back
/// (`rdt_cpu_has`: force_on wins). The MSR view keeps CPUID's L3 CAT either way.
#[test]
fn skylake_sp_stepping_4_shows_mb_only_until_the_rdt_boot_option() {
    let sim = handle("skylake-sp");
    let mut fs = mount(&sim, "");
    assert_eq!(text(&mut fs, "schemata"), "MB:0=100;1=100\n");
    let info: Vec<String> = fs.list("info").unwrap().into_iter().map(|e| e.0).collect();
    assert_eq!(info, ["last_cmd_status", "MB"]);
    assert_eq!(errno(fs.kind("mon_data")), ENOENT);
    assert_eq!(errno(fs.kind("mon_groups")), ENOENT);
    // 8 MB CLOSIDs (not L3's 16): root + 7 groups.
    for i in 0..7 {
        fs.mkdir(&format!("g{i}")).unwrap();
    }
    assert_eq!(errno(fs.mkdir("g7")), ENOSPC);
    // The MSR view: IA32_L3_QOS_MASK_1 still exists and takes a mask.
    let mut h = sim.clone();
    MsrIo::write(&mut h, LogicalCpu::new(0), MsrAddr::new(0xc91), 0x3).unwrap();
    assert_eq!(msr(&sim, 0, 0xc91), 0x3);
    drop(fs);

    let sim = handle(SKX_RDT);
    let mut fs = mount(&sim, "");
    assert_eq!(
        text(&mut fs, "schemata"),
        "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n"
    );
    assert!(fs.kind("info/L3_MON").is_ok());
    assert!(fs.kind("mon_data/mon_L3_01/mbm_local_bytes").is_ok());
    drop(fs);

    // Forcing one back: CMT only.
    let sim = handle("skylake-sp:rdt=cmt");
    let mut fs = mount(&sim, "");
    assert_eq!(text(&mut fs, "info/L3_MON/mon_features"), "llc_occupancy\n");
    assert_eq!(text(&mut fs, "schemata"), "MB:0=100;1=100\n");
}

/// `fs/resctrl/rdtgroup.c` `rdtgroup_move_task`: pid 0 is `current`, the writer;
/// `show_rdt_tasks` on the root walks every thread of the system, so every host thread no
/// write moved is listed there.
#[test]
fn writing_zero_moves_the_writer_and_the_root_lists_every_other_host_thread() {
    let sim = handle("broadwell-ep");
    let mut fs = mount(&sim, "");
    fs.mkdir("p0").unwrap();
    let me = std::process::id();
    let ids = |t: String| -> Vec<u32> { t.lines().map(|l| l.parse().unwrap()).collect() };
    let root = ids(text(&mut fs, "tasks"));
    assert!(root.contains(&me) && root.contains(&1), "{root:?}");
    // act: "0" written by thread `me`
    fs.write_by("p0/tasks", 0, b"0\n", Some(me)).unwrap();
    // assert
    assert_eq!(text(&mut fs, "p0/tasks"), format!("{me}\n"));
    assert!(!ids(text(&mut fs, "tasks")).contains(&me));
    assert!(ids(text(&mut fs, "tasks")).contains(&1), "init stays");
}

/// `rdt_last_cmd_printf` → `seq_buf_vprintf`: a message longer than the 512-byte buffer
/// is truncated to 511 bytes (and the NUL), not dropped.
#[test]
fn last_cmd_status_truncates_a_long_message_at_the_buffer() {
    let sim = handle("broadwell-ep");
    let mut fs = mount(&sim, "");
    let name = "x".repeat(600);
    assert_eq!(
        errno(fs.write("schemata", 0, format!("{name}:0=f\n").as_bytes())),
        EINVAL
    );
    let status = text(&mut fs, "info/last_cmd_status");
    assert_eq!(status.len(), 511);
    assert!(status.starts_with("Unknown or unsupported resource name 'xxx"));
}

/// `fs/resctrl/rdtgroup.c` `__init_one_rdt_domain` → `cbm_ensure_valid`: a new group's
/// default CBM is the lowest contiguous run of what is free, even on AMD where sparse
/// masks are allowed: with `f0` exclusive to p0, the candidate `ff0f` becomes `f`.
#[test]
fn a_new_groups_default_cbm_is_the_lowest_run_even_with_sparse_masks() {
    let sim = handle("milan");
    let mut fs = mount(&sim, "");
    let line = |v: &str| {
        let ids: Vec<String> = (0..16).map(|d| format!("{d}={v}")).collect();
        format!("L3:{}\n", ids.join(";"))
    };
    fs.write("schemata", 0, line("ff0f").as_bytes()).unwrap();
    fs.mkdir("p0").unwrap();
    fs.write("p0/schemata", 0, line("f0").as_bytes()).unwrap();
    fs.write("p0/mode", 0, b"exclusive\n").unwrap();
    // act
    fs.mkdir("p1").unwrap();
    // assert
    let s = text(&mut fs, "p1/schemata");
    let l3 = s
        .lines()
        .find(|l| l.trim_start().starts_with("L3:"))
        .unwrap();
    assert!(l3.trim_start().starts_with("L3:0=f;1=f;"), "{s}");
    assert!(
        text(&mut fs, "info/L3/sparse_masks").starts_with('1'),
        "milan takes sparse masks"
    );
}

/// `arch/x86/kernel/cpu/resctrl/monitor.c` `rdt_get_mon_l3_config`: the limit of
/// `max_threshold_occupancy` is `x86_cache_size * 1024`, the L2 size on AMD (512 KB on
/// Milan), so the default is 512 KiB / 256 RMIDs = 2048 and more than 512 KiB is EINVAL;
/// on Intel it is the L3 size.
#[test]
fn amd_max_threshold_occupancy_is_bounded_by_the_l2_size() {
    let sim = handle("milan");
    let mut fs = mount(&sim, "");
    let path = "info/L3_MON/max_threshold_occupancy";
    assert_eq!(text(&mut fs, path), "2048\n");
    fs.write(path, 0, b"524288").unwrap();
    assert_eq!(errno(fs.write(path, 0, b"524352")), EINVAL);
    let sim = handle("broadwell-ep");
    let mut fs = mount(&sim, "");
    // 35 MiB L3 (36700160 bytes) is accepted on Intel.
    fs.write(path, 0, b"36700160").unwrap();
}
