//! I/O RDT channel monitoring through the library on the in-process simulated `xeon-rdt13`
//! (feature `sim`), its clock driven by the test: a channel's I/O traffic
//! (`SimPlatform::set_io_traffic`) is read as the occupancy and bandwidth of the group that
//! tagged it, a channel without traffic reads 0, and tags go back to RMID 0 on stop and reset.

use std::time::Duration;

use rdt_pqos::sim::SessionOptions;
use rdt_pqos::{Backend, ChannelId, Iface, MonEvents, OpenOptions, Rdt, Reset, Rmid};

fn open(dir: &std::path::Path) -> Rdt {
    let session = SessionOptions {
        state: Some(dir.join("state.json")),
        ..SessionOptions::new("xeon-rdt13")
    };
    OpenOptions::simulate(OpenOptions::new(Iface::Msr).rdt_iface(None), session)
        .open()
        .expect("open the simulated xeon-rdt13 on MSR")
}

/// The RMID `ch` is tagged with (0 for none).
fn tag(rdt: &mut Rdt, ch: ChannelId) -> u32 {
    rdt.io_rdt()
        .expect("I/O RDT")
        .channel_rmid(ch)
        .expect("read the tag")
        .map_or(0, Rmid::get)
}

#[test]
fn a_channels_io_occupancy_and_bandwidth_are_monitored_and_its_tag_undone() {
    let dir = tempfile::tempdir().unwrap();
    let mut rdt = open(dir.path());
    let busy = ChannelId::from_raw(0x10101);
    let idle = ChannelId::from_raw(0x10100);
    let events = MonEvents::LLC_OCCUPANCY | MonEvents::MBM_TOTAL;
    let g = rdt.start_channel_monitoring(&[busy], events).unwrap();
    let g_idle = rdt.start_channel_monitoring(&[idle], events).unwrap();
    let (r_busy, r_idle) = (tag(&mut rdt, busy), tag(&mut rdt, idle));
    assert!(
        r_busy != 0 && r_idle != 0 && r_busy != r_idle,
        "{r_busy} {r_idle}"
    );
    assert_eq!(rdt.group_channels(g), Some(&[busy][..]));
    {
        let h = rdt.simulated().unwrap().handle();
        let mut p = h.lock();
        p.set_io_traffic(busy, 1.0e9, 6.0 * 1_048_576.0).unwrap();
        p.advance(Duration::from_secs(2));
    }
    rdt.poll().unwrap();
    let v = rdt.values(g).unwrap();
    let occ = v.llc_occupancy_bytes.unwrap();
    let total = v.mbm_total_delta_bytes.unwrap();
    // the model's counts are whole upscaling units, rounded down: within 1 % (occupancy)
    // and 0.1 % (2 s of 1 GB/s)
    assert!(occ.abs_diff(6 << 20) < (6 << 20) / 100, "{occ}");
    assert!(total.abs_diff(2_000_000_000) < 2_000_000, "{total}");
    let v = rdt.values(g_idle).unwrap();
    assert_eq!(v.llc_occupancy_bytes, Some(0));
    assert_eq!(v.mbm_total_delta_bytes, Some(0));

    // a channel already tagged is refused, nothing written
    let e = rdt
        .start_channel_monitoring(&[ChannelId::from_raw(0x20100), busy], events)
        .unwrap_err()
        .to_string();
    assert!(e.contains("channel 0x10101 is already monitored"), "{e}");
    assert_eq!(tag(&mut rdt, ChannelId::from_raw(0x20100)), 0);

    rdt.stop_monitoring(g).unwrap();
    assert_eq!(tag(&mut rdt, busy), 0, "stop tags RMID 0 again");
    assert_eq!(tag(&mut rdt, idle), r_idle, "the other group keeps its tag");
    assert!(rdt.values(g).is_none());

    // a run killed before it stopped leaves a tag: refused until a monitoring reset
    rdt.io_rdt()
        .unwrap()
        .set_channel_rmid(busy, Rmid::new(5))
        .unwrap();
    assert!(rdt.start_channel_monitoring(&[busy], events).is_err());
    rdt.reset(&Reset::Monitoring(rdt_pqos::MonReset::default()))
        .unwrap();
    assert_eq!(tag(&mut rdt, busy), 0);
    assert_eq!(tag(&mut rdt, idle), 0);
    rdt.start_channel_monitoring(&[busy], events).unwrap();
}

#[test]
fn channel_groups_refuse_bad_input_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut rdt = open(dir.path());
    let ch = ChannelId::from_raw(0x10100);
    for (channels, events, want) in [
        (vec![], MonEvents::LLC_OCCUPANCY, "needs at least one"),
        (
            vec![ChannelId::from_raw(0x90100)],
            MonEvents::LLC_OCCUPANCY,
            "channel 0x90100 is not in the ACPI IRDT",
        ),
        (vec![ch, ch], MonEvents::LLC_OCCUPANCY, "listed twice"),
        (
            vec![ch],
            MonEvents::IPC,
            "cannot be monitored on an I/O RDT channel",
        ),
    ] {
        let e = rdt
            .start_channel_monitoring(&channels, events)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{want}: {e}");
        assert_eq!(tag(&mut rdt, ch), 0, "{want}");
    }
    // the OS interface cannot reach the links
    let session = SessionOptions {
        state: Some(dir.path().join("os.json")),
        ..SessionOptions::new("xeon-rdt13")
    };
    let mut os = OpenOptions::simulate(OpenOptions::new(Iface::Os).rdt_iface(None), session)
        .open()
        .unwrap();
    let e = os
        .start_channel_monitoring(&[ch], MonEvents::LLC_OCCUPANCY)
        .unwrap_err()
        .to_string();
    assert!(e.contains("MSR interface"), "{e}");
}

/// A channel tagged by another run holds its RMID in no IA32_PQR_ASSOC: a CPU group started
/// meanwhile does not take it.
#[test]
fn a_cpu_group_does_not_take_a_channels_rmid() {
    use rdt_pqos::msr::MsrIo;
    use rdt_pqos::{BackendExt, CpuSet, LogicalCpu};
    let dir = tempfile::tempdir().unwrap();
    let mut rdt = open(dir.path());
    let ch = ChannelId::from_raw(0x20100);
    rdt.io_rdt()
        .unwrap()
        .set_channel_rmid(ch, Rmid::new(1))
        .unwrap();
    let cpus: CpuSet = std::iter::once(LogicalCpu::new(0)).collect();
    rdt.start_monitoring(&cpus, MonEvents::LLC_OCCUPANCY)
        .unwrap();
    let mut h = rdt.simulated().unwrap().handle().clone();
    let pqr = MsrIo::read(
        &mut h,
        LogicalCpu::new(0),
        rdt_pqos::msr::regs::IA32_PQR_ASSOC,
    )
    .unwrap();
    assert_eq!(pqr & 0x3ff, 2, "RMID 1 is the channel's: {pqr:#x}");
}
