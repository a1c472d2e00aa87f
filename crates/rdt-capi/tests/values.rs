//! `pqos_mon_poll` writes the library's own numbers: called from Rust in-process (the rlib
//! exports the same functions), each group's deltas are the library's over the same
//! interval, summed over the library polls since the group's previous `pqos_mon_poll`, and 0
//! at its first poll (libpqos's `valid_mbm_read`); an uncore group's `pqos_mon_get_value`
//! values and deltas are the library's counts; on the MMIO interface each memory region
//! slot's are the library's region traffic. Also the cost of polling 160 groups through
//! the C API beside the Rust API (`--ignored`, prints the numbers).

use std::ffi::c_uint;
use std::time::{Duration, Instant};

use pqos::{
    PQOS_RETVAL_OK, pqos_config, pqos_fini, pqos_init, pqos_interface, pqos_mon_data,
    pqos_mon_event, pqos_mon_poll, pqos_mon_start_cores, pqos_mon_stop,
};
use rdt_pqos::{Backend, BackendExt, CpuSet, Iface, LogicalCpu, MonEvents, OpenOptions};

fn config(iface: pqos_interface) -> pqos_config {
    pqos_config {
        fd_log: 2,
        callback_log: None,
        context_log: std::ptr::null_mut(),
        verbose: 0,
        interface: iface as c_uint,
    }
}

/// The simulated platform `model` for this process (the only test of its binary that sets
/// the environment, so no other thread reads it meanwhile).
fn simulate(model: &str, state: &std::path::Path) {
    // SAFETY: see above; set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("RDT_SIM", model);
        std::env::set_var("XDG_RUNTIME_DIR", state);
    }
}

const MBM: c_uint = pqos_mon_event::PQOS_MON_EVENT_L3_OCCUP as c_uint
    | pqos_mon_event::PQOS_MON_EVENT_LMEM_BW as c_uint
    | pqos_mon_event::PQOS_MON_EVENT_TMEM_BW as c_uint
    | pqos_mon_event::PQOS_MON_EVENT_RMEM_BW as c_uint;

fn start(cores: &[c_uint]) -> *mut pqos_mon_data {
    let mut group: *mut pqos_mon_data = std::ptr::null_mut();
    let n = c_uint::try_from(cores.len()).expect("count");
    // SAFETY: `cores` holds `n` cores; `group` is a local to fill.
    let ret = unsafe {
        pqos_mon_start_cores(
            n,
            cores.as_ptr(),
            MBM,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &raw mut group,
        )
    };
    assert_eq!(ret, PQOS_RETVAL_OK);
    group
}

fn poll(groups: &mut [*mut pqos_mon_data]) {
    let n = c_uint::try_from(groups.len()).expect("count");
    // SAFETY: started groups.
    assert_eq!(
        unsafe { pqos_mon_poll(groups.as_mut_ptr(), n) },
        PQOS_RETVAL_OK
    );
}

#[test]
fn deltas_are_the_librarys_over_each_groups_own_interval() {
    let state = tempfile::tempdir().expect("state");
    simulate("sapphire-rapids", state.path());
    let cfg = config(pqos_interface::PQOS_INTER_MSR);
    // SAFETY: a valid configuration.
    assert_eq!(unsafe { pqos_init(&raw const cfg) }, PQOS_RETVAL_OK);
    let a = start(&[0, 1, 2, 3]);
    let b = start(&[4, 5]);
    let lib = |g| pqos::testing::library_values(g).expect("library values");
    // first poll of each: no bandwidth yet, as libpqos
    poll(&mut [a, b]);
    // SAFETY: `a` and `b` are live groups until stopped below.
    let (va, vb) = unsafe { ((*a).values, (*b).values) };
    assert_eq!(
        (va.mbm_local_delta, va.mbm_total_delta, vb.mbm_total_delta),
        (0, 0, 0)
    );
    assert!(va.llc > 0 && va.llc == lib(a).llc_occupancy_bytes.unwrap_or(0));
    let mut b_pending = 0u64;
    for round in 0..4 {
        std::thread::sleep(Duration::from_millis(50));
        if round % 2 == 0 {
            poll(&mut [a]);
        } else {
            poll(&mut [a, b]);
        }
        let (la, lb) = (lib(a), lib(b));
        // SAFETY: as above.
        let va = unsafe { (*a).values };
        assert_eq!(
            Some(va.mbm_local_delta),
            la.mbm_local_delta_bytes,
            "round {round}"
        );
        assert_eq!(
            Some(va.mbm_total_delta),
            la.mbm_total_delta_bytes,
            "round {round}"
        );
        assert_eq!(
            Some(va.mbm_remote_delta),
            la.mbm_remote_delta_bytes,
            "round {round}"
        );
        assert!(va.mbm_total_delta > 0, "traffic in round {round}");
        b_pending += lb.mbm_total_delta_bytes.unwrap_or(0);
        if round % 2 == 1 {
            // SAFETY: as above.
            let vb = unsafe { (*b).values };
            assert_eq!(
                vb.mbm_total_delta, b_pending,
                "b over its own interval, round {round}"
            );
            b_pending = 0;
        }
    }
    // SAFETY: started groups, stopped once.
    unsafe {
        assert_eq!(pqos_mon_stop(a), PQOS_RETVAL_OK);
        assert_eq!(pqos_mon_stop(b), PQOS_RETVAL_OK);
        assert_eq!(pqos_fini(), PQOS_RETVAL_OK);
    }
    uncore_values_are_the_librarys(state.path());
    region_values_are_the_librarys(state.path());
}

/// An uncore group's values and deltas (`pqos_mon_get_value`) are the library's counts of
/// each interval and their sum, on the simulated Skylake-SP (the model with the CHA's PCIe
/// events). Run after the test above, in the same thread: one `pqos_init` per process.
fn uncore_values_are_the_librarys(state: &std::path::Path) {
    use pqos::{pqos_mon_get_value, pqos_mon_start_uncore};
    simulate("skylake-sp", state);
    let cfg = config(pqos_interface::PQOS_INTER_MSR);
    // SAFETY: a valid configuration.
    assert_eq!(unsafe { pqos_init(&raw const cfg) }, PQOS_RETVAL_OK);
    let events = MonEvents::UNCORE.bits();
    let sockets: [c_uint; 2] = [0, 1];
    let mut g: *mut pqos_mon_data = std::ptr::null_mut();
    // SAFETY: two sockets; `g` a local to fill.
    let ret = unsafe {
        pqos_mon_start_uncore(
            2,
            sockets.as_ptr(),
            events,
            std::ptr::null_mut(),
            &raw mut g,
        )
    };
    assert_eq!(ret, PQOS_RETVAL_OK);
    let mut totals = [0u64; 4];
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(50));
        poll(&mut [g]);
        let lib = pqos::testing::library_values(g)
            .and_then(|v| v.uncore)
            .expect("library uncore values");
        for (i, event) in MonEvents::UNCORE.iter().enumerate() {
            let (mut value, mut delta) = (0u64, 0u64);
            // SAFETY: a started group; two u64 outputs.
            let ret =
                unsafe { pqos_mon_get_value(g, event.bits(), &raw mut value, &raw mut delta) };
            assert_eq!(ret, PQOS_RETVAL_OK);
            totals[i] += lib.get(event).expect("monitored");
            assert_eq!(Some(delta), lib.get(event), "{event:?}, round {round}");
            assert_eq!(value, totals[i], "{event:?}, round {round}");
            assert!(delta > 0, "{event:?} counts, round {round}");
        }
    }
    // SAFETY: started, stopped once.
    unsafe {
        assert_eq!(pqos_mon_stop(g), PQOS_RETVAL_OK);
        assert_eq!(pqos_fini(), PQOS_RETVAL_OK);
    }
}

/// On the MMIO interface (simulated `xeon-rdt13`), each region slot's delta is the library's
/// traffic to that slot's region (summed over the group's L3 domains) over the group's own
/// interval, in the order the regions were given (first poll: 0), and its total the traffic
/// since the start. Run after the tests above, in the same thread.
fn region_values_are_the_librarys(state: &std::path::Path) {
    use pqos::{pqos_mon_mem_region, pqos_mon_stop};
    simulate("xeon-rdt13", state);
    let cfg = config(pqos_interface::PQOS_INTER_MMIO);
    // SAFETY: a valid configuration.
    assert_eq!(unsafe { pqos_init(&raw const cfg) }, PQOS_RETVAL_OK);
    let start_regions = |cores: &[c_uint], regions: &[i32]| {
        let mut mem = pqos_mon_mem_region::default();
        mem.region_num[..regions.len()].copy_from_slice(regions);
        mem.num_mem_regions = i32::try_from(regions.len()).expect("count");
        let mut g: *mut pqos_mon_data = std::ptr::null_mut();
        let n = c_uint::try_from(cores.len()).expect("count");
        // SAFETY: `cores` holds `n` cores; `mem` and `g` are locals.
        let ret = unsafe {
            pqos_mon_start_cores(
                n,
                cores.as_ptr(),
                pqos_mon_event::PQOS_MON_EVENT_TMEM_BW as c_uint,
                std::ptr::null_mut(),
                &raw mut mem,
                &raw mut g,
            )
        };
        assert_eq!(ret, PQOS_RETVAL_OK);
        g
    };
    // CPUs 2-4 and 5-6 run the default scenario's workloads
    let a = start_regions(&[2, 3, 4], &[1, 0]);
    let b = start_regions(&[5, 6], &[0]);
    let region_delta = |g, region: u8| -> u64 {
        pqos::testing::library_region_values(g)
            .expect("library region values")
            .iter()
            .filter(|v| v.region.0 == region)
            .filter_map(|v| v.delta_bytes)
            .sum()
    };
    poll(&mut [a, b]);
    // SAFETY: live groups until stopped below.
    let (ra, rb) = unsafe { ((*a).region_values, (*b).region_values) };
    assert_eq!(
        (ra.mbm_total_delta, rb.mbm_total_delta[0]),
        ([0; 4], 0),
        "first poll"
    );
    // totals count from the start: the first poll's traffic too
    let (mut a_total, mut b_total, mut b_pending) = (
        [region_delta(a, 1), region_delta(a, 0)],
        region_delta(b, 0),
        0u64,
    );
    assert_eq!(
        (&ra.mbm_total[..2], rb.mbm_total[0]),
        (&a_total[..], b_total)
    );
    for round in 0..4 {
        std::thread::sleep(Duration::from_millis(50));
        if round % 2 == 0 {
            poll(&mut [a]);
        } else {
            poll(&mut [a, b]);
        }
        // SAFETY: as above.
        let ra = unsafe { (*a).region_values };
        let want = [region_delta(a, 1), region_delta(a, 0)];
        assert!(want[0] > 0 && want[1] > want[0], "DDR above CXL: {want:?}");
        assert_eq!(ra.mbm_total_delta[..2], want, "a, round {round}");
        assert_eq!(ra.mbm_total_delta[2..], [0, 0], "unused slots");
        a_total[0] += want[0];
        a_total[1] += want[1];
        assert_eq!(ra.mbm_total[..2], a_total, "a totals, round {round}");
        b_pending += region_delta(b, 0);
        if round % 2 == 1 {
            // SAFETY: as above.
            let rb = unsafe { (*b).region_values };
            assert_eq!(
                rb.mbm_total_delta[0], b_pending,
                "b's own interval, round {round}"
            );
            b_total += b_pending;
            assert_eq!(rb.mbm_total[0], b_total, "b total, round {round}");
            b_pending = 0;
        }
    }
    // SAFETY: started groups, stopped once.
    unsafe {
        assert_eq!(pqos_mon_stop(a), PQOS_RETVAL_OK);
        assert_eq!(pqos_mon_stop(b), PQOS_RETVAL_OK);
        assert_eq!(pqos_fini(), PQOS_RETVAL_OK);
    }
}

/// The read- and write-like system calls this process has made (`/proc/self/io`'s `syscr`
/// and `syscw`, all threads).
fn syscalls() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    io.lines()
        .filter(|l| l.starts_with("syscr:") || l.starts_with("syscw:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// The mean time and read/write system calls of `rounds` calls of `f` (after one call not
/// counted).
fn mean(rounds: u32, mut f: impl FnMut()) -> (Duration, u64) {
    f();
    let calls = syscalls();
    let t = Instant::now();
    for _ in 0..rounds {
        f();
    }
    (
        t.elapsed() / rounds,
        (syscalls() - calls) / u64::from(rounds),
    )
}

/// A measurement, not a check: the cost of one poll of 160 single-CPU groups (all four
/// RDT events) through `pqos_mon_poll` and through the library's `Backend::poll`, on both
/// interfaces, in time and in read/write system calls per poll. The platform is the one
/// the environment names (`RDT_SYSROOT=DIR` of an `rdt-sim mount`, as benches/capi_poll.sh
/// runs it), else the in-process simulated Sapphire Rapids (no system calls to count).
/// `CAPI_BENCH_ROUNDS` polls are timed (default 50); `CAPI_BENCH_ONLY=msr-c|msr-rust|os-c|
/// os-rust` runs one of the four (for `strace -c`).
#[test]
#[ignore = "a measurement: benches/capi_poll.sh, or cargo test -p rdt-capi --test values -- --ignored --nocapture"]
fn poll_cost_of_160_groups() {
    let state = tempfile::tempdir().expect("state");
    if std::env::var_os("RDT_SYSROOT").is_none() {
        simulate("sapphire-rapids", state.path());
    }
    let rounds: u32 = std::env::var("CAPI_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(50);
    let only = std::env::var("CAPI_BENCH_ONLY").ok();
    let runs = |what: &str| only.as_deref().is_none_or(|o| o == what);
    for (iface, name) in [
        (pqos_interface::PQOS_INTER_MSR, "msr"),
        (pqos_interface::PQOS_INTER_OS, "os"),
    ] {
        if runs(&format!("{name}-c")) {
            let cfg = config(iface);
            // SAFETY: a valid configuration.
            assert_eq!(unsafe { pqos_init(&raw const cfg) }, PQOS_RETVAL_OK);
            let mut groups: Vec<*mut pqos_mon_data> = (0..160).map(|c| start(&[c])).collect();
            let (time, calls) = mean(rounds, || poll(&mut groups));
            for g in groups {
                // SAFETY: started groups, stopped once.
                assert_eq!(unsafe { pqos_mon_stop(g) }, PQOS_RETVAL_OK);
            }
            // SAFETY: initialised above.
            assert_eq!(unsafe { pqos_fini() }, PQOS_RETVAL_OK);
            println!(
                "{name}: pqos_mon_poll of 160 groups: {time:?}, {calls} read/write syscalls (mean of {rounds})"
            );
        }
        if runs(&format!("{name}-rust")) {
            let iface = if name == "msr" { Iface::Msr } else { Iface::Os };
            let mut rdt = OpenOptions::new(iface)
                .platform_from_env()
                .open()
                .expect("open");
            let events = MonEvents::LLC_OCCUPANCY
                | MonEvents::MBM_LOCAL
                | MonEvents::MBM_TOTAL
                | MonEvents::MBM_REMOTE;
            let sets: Vec<(CpuSet, MonEvents)> = (0..160)
                .map(|c| (std::iter::once(LogicalCpu::new(c)).collect(), events))
                .collect();
            let ids = rdt.start_monitoring_many(&sets).expect("start");
            let (time, calls) = mean(rounds, || rdt.poll().expect("poll"));
            for id in ids {
                rdt.stop_monitoring(id).expect("stop");
            }
            let _ = rdt.reset_monitoring();
            println!(
                "{name}: Backend::poll of 160 groups: {time:?}, {calls} read/write syscalls (mean of {rounds})"
            );
        }
    }
}
