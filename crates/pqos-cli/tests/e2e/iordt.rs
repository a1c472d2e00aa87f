//! I/O RDT (pqos v23.11+, issue 34): `-R l3iordt-on|off` switches I/O RDT allocation in
//! the L3 (IA32_L3_IO_QOS_CFG 0xC83 bit 0, one CPU per L3 domain: lib/allocation.c
//! `hw_alloc_reset_l3iordt`) where the L3 CAT enumerates it, and `-D` reports it as
//! pqos/cap.c does (`I/O RDT: enabled|disabled|unsupported` under L3 CAT).

use super::util::{Machine, Sim};

/// The 16-space `I/O RDT:` line of the L3 CAT section of `-d`/`-D` (the monitoring events'
/// lines are indented 17).
fn l3_iordt_line(state: &str) -> String {
    format!("\n                I/O RDT: {state}\n")
}

/// IA32_L3_IO_QOS_CFG of `cpu`, read through the mount's msr device file.
fn io_qos_cfg(m: &super::util::mounted::Mounted, cpu: usize) -> u64 {
    let path = m.root().join(format!("dev/cpu/{cpu}/msr"));
    let f = std::fs::File::open(&path).expect("msr file");
    let mut buf = [0u8; 8];
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, 0xC83).expect("read 0xC83");
    u64::from_le_bytes(buf)
}

/// A FUSE-mounted `sapphire-rapids` whose L3 CAT is modelled with I/O RDT allocation
/// (`SimPlatform::set_io_rdt`: CPUID.(10H,1):ECX\[1\] and IA32_L3_IO_QOS_CFG): `-D` says
/// `disabled`, `-R l3iordt-on` sets bit 0 on a CPU of every socket and `-D` says `enabled`,
/// an allocation made meanwhile is reset as usual, `-R l3iordt-off` clears the bit again
/// and `-R` alone leaves it.
#[test]
fn l3iordt_on_and_off_program_the_l3_io_qos_register_of_every_socket() {
    use super::util::mounted::Mounted;
    let m = Mounted::new("sapphire-rapids");
    assert!(m.platform().lock().set_io_rdt(true));
    let cpus = m.platform().lock().topology().cpus().len();
    let d = m.pqos(&["-D"]).ok();
    assert!(
        d.stdout.contains(&l3_iordt_line("disabled")),
        "{}",
        d.stdout
    );
    assert_eq!(io_qos_cfg(&m, 0), 0);
    m.pqos(&["-e", "llc:1=0x3"]).ok();
    let r = m.pqos(&["-R", "l3iordt-on"]).ok();
    assert!(
        r.stdout.contains("Allocation reset successful"),
        "{}",
        r.stdout
    );
    assert_eq!(io_qos_cfg(&m, 0) & 1, 1, "socket 0");
    assert_eq!(io_qos_cfg(&m, cpus - 1) & 1, 1, "the last socket");
    let d = m.pqos(&["-D"]).ok();
    assert!(d.stdout.contains(&l3_iordt_line("enabled")), "{}", d.stdout);
    let s = m.pqos(&["-s"]).ok();
    assert!(
        !s.stdout.contains("L3CA COS1 => MASK 0x3\n"),
        "{}",
        s.stdout
    );
    m.pqos(&["-R"]).ok();
    assert_eq!(io_qos_cfg(&m, 0) & 1, 1, "-R alone keeps it");
    m.pqos(&["-R", "l3iordt-off"]).ok();
    assert_eq!(io_qos_cfg(&m, 0), 0);
    assert_eq!(io_qos_cfg(&m, cpus - 1), 0);
    let d = m.pqos(&["-D"]).ok();
    assert!(
        d.stdout.contains(&l3_iordt_line("disabled")),
        "{}",
        d.stdout
    );
}

/// Where the L3 CAT does not enumerate I/O RDT (every captured part) and on the OS interface
/// (resctrl has no such control): `-D` says `unsupported` on MSR, `-R l3iordt-on` fails as
/// pqos's does (`L3 I/O RDT requested but not supported by the platform!`, `Allocation
/// reset failed!`), resetting nothing; `l3iordt-off` and `l3iordt-any` are accepted.
#[test]
fn l3iordt_on_is_refused_where_the_part_lacks_it() {
    for (model, iface) in [("sapphire-rapids", "msr"), ("sapphire-rapids", "os")] {
        let sim = Sim::new(model);
        let iface = format!("--iface={iface}");
        if iface.ends_with("msr") {
            let d = sim.pqos(&[&iface, "-D"]).ok();
            assert!(
                d.stdout.contains(&l3_iordt_line("unsupported")),
                "{}",
                d.stdout
            );
        }
        sim.pqos(&[&iface, "-e", "llc:1=0x3"]).ok();
        let r = sim.pqos(&[&iface, "-R", "l3iordt-on"]);
        assert_eq!(r.code, 1, "{model} {iface}: {}\n{}", r.stdout, r.stderr);
        let all = r.raw_stdout.clone() + &r.stderr;
        assert!(
            all.contains("L3 I/O RDT requested but not supported by the platform!"),
            "{all}"
        );
        assert!(all.contains("Allocation reset failed!"), "{all}");
        let s = sim.pqos(&[&iface, "-s"]).ok();
        assert!(
            s.stdout.contains("L3CA COS1 => MASK 0x3"),
            "nothing reset: {}",
            s.stdout
        );
        sim.pqos(&[&iface, "-R", "l3iordt-off"]).ok();
        sim.pqos(&[&iface, "-R", "L3IORDT-any"]).ok();
    }
}

/// The class of I/O RDT channel `raw` as the model's CLOS tagging register holds it.
fn channel_class(m: &super::util::mounted::Mounted, raw: u32) -> Option<u32> {
    m.platform()
        .lock()
        .mmio()
        .expect("the model has an IRDT")
        .channel_tag(
            rdt_pqos::ChannelId::from_raw(raw),
            rdt_pqos::mmio::iotag::Tag::Clos,
        )
}

/// `-a channel:` and `-a dev:` (pqos v23.11+, issue 34) on the models with an IRDT, through
/// the MSR interface and (xeon-rdt13) the MMIO one: a channel goes into its class in its
/// link's CLOS tagging register, a device's channels follow it (`@VC` its one channel),
/// `-s` shows both sections as pqos does, a command naming a channel or device the IRDT
/// lacks changes nothing, and `-R` puts every channel back to COS0.
#[test]
fn channels_and_devices_go_into_classes_and_back_on_reset() {
    use super::util::mounted::Mounted;
    for (model, iface) in [
        ("xeon-rdt13", "msr"),
        ("xeon-rdt13", "mmio"),
        ("sapphire-rapids", "msr"),
    ] {
        let m = Mounted::new(model);
        assert!(m.platform().lock().set_io_rdt(true));
        let iface = format!("--iface={iface}");
        m.pqos(&[&iface, "-R", "l3iordt-on"]).ok();
        let a = m.pqos(&[&iface, "-a", "channel:3=0x10101"]).ok();
        assert!(
            a.stdout.contains("Allocation configuration altered."),
            "{model} {iface}: {}",
            a.stdout
        );
        assert_eq!(channel_class(&m, 0x10101), Some(3), "{model} {iface}");
        assert_eq!(channel_class(&m, 0x10100), Some(0), "{model} {iface}");
        // the second socket's first device, all its channels; then its second one by @VC
        m.pqos(&[&iface, "-a", "dev:2=0000:96:00.0;dev:5=96:01.0@0"])
            .ok();
        assert_eq!(channel_class(&m, 0x20100), Some(2), "{model} {iface}");
        assert_eq!(channel_class(&m, 0x20101), Some(5), "{model} {iface}");
        let s = m.pqos(&[&iface, "-s"]).ok();
        assert!(
            s.stdout.contains(
                "Device information:\n    Device 0000:16:00.0@0, Channel 0x10100 => COS0\n    \
                 Device 0000:16:01.0@0, Channel 0x10101 => COS3\n"
            ),
            "{model} {iface}: {}",
            s.stdout
        );
        assert!(
            s.stdout.contains(
                "Control channel information:\n    Channel 0x10100 => COS0\n    Channel \
                 0x10101 => COS3\n    Channel 0x20100 => COS2\n    Channel 0x20101 => COS5\n"
            ),
            "{model} {iface}: {}",
            s.stdout
        );
        // refused whole: the first item is valid, the second names no channel of the IRDT
        let r = m
            .pqos(&[&iface, "-a", "channel:7=0x10100;channel:7=0x10105"])
            .failed();
        let all = r.stdout.clone() + &r.stderr;
        assert!(
            all.contains("Channel or class id is out of bounds!"),
            "{all}"
        );
        assert!(
            all.contains("0x10105 is not in the ACPI IRDT table"),
            "{all}"
        );
        assert_eq!(channel_class(&m, 0x10100), Some(0), "nothing written");
        let r = m.pqos(&[&iface, "-a", "dev:7=0000:17:00.0"]).failed();
        let all = r.stdout.clone() + &r.stderr;
        assert!(all.contains("Invalid device!"), "{all}");
        assert!(
            all.contains("0000:17:00.0 is not in the ACPI IRDT"),
            "{all}"
        );
        let r = m.pqos(&[&iface, "-a", "channel:99=0x10100"]).failed();
        let all = r.stdout.clone() + &r.stderr;
        assert!(all.contains("out of bounds"), "{all}");
        m.pqos(&[&iface, "-R"]).ok();
        for ch in [0x10100, 0x10101, 0x20100, 0x20101] {
            assert_eq!(channel_class(&m, ch), Some(0), "{model} {iface}: {ch:#x}");
        }
    }
}

/// Without I/O RDT enumerated (every captured part as it is), `-a channel:` says what it
/// needs, and writes nothing.
#[test]
fn channel_association_needs_io_rdt() {
    let sim = Sim::new("sapphire-rapids");
    let r = sim
        .pqos(&["--iface=msr", "-a", "channel:1=0x10100"])
        .failed();
    let all = r.stdout.clone() + &r.stderr;
    assert!(all.contains("Allocation association error!"), "{all}");
    assert!(all.contains("needs a platform with I/O RDT"), "{all}");
}

/// The synthesized `xeon-rdt13` enumerates I/O RDT allocation: with `--sim` alone (one
/// process per command, the state file between them) `-R l3iordt-on`, `-a channel:`,
/// `-s` and `-R` work as on the mounted platform, on both of its interfaces.
#[test]
fn xeon_rdt13_associates_channels_under_sim() {
    for iface in ["--iface=msr", "--iface=mmio"] {
        let sim = Sim::new("xeon-rdt13");
        sim.pqos(&[iface, "-R", "l3iordt-on"]).ok();
        sim.pqos(&[iface, "-a", "channel:4=0x20101"]).ok();
        let s = sim.pqos(&[iface, "-s"]).ok();
        assert!(
            s.stdout.contains("    Channel 0x20101 => COS4\n"),
            "{iface}: {}",
            s.stdout
        );
        sim.pqos(&[iface, "-R"]).ok();
        let s = sim.pqos(&[iface, "-s"]).ok();
        assert!(
            s.stdout.contains("    Channel 0x20101 => COS0\n"),
            "{iface}: {}",
            s.stdout
        );
    }
}

/// I/O RDT e2e on the mounted `xeon-rdt13` (issue 34's acceptance): `-R l3iordt-on`, the
/// device `0000:16:01.0` (its channel 0x10101) in COS1 with `-a dev:`, then
/// `--mon-channel` of that channel and of 0x10100 while the model's device moves 1 GB/s
/// through 0x10101 keeping 6 MiB of L3 (`SimPlatform::set_io_traffic`): the `CHANNEL`
/// rows (pqos v26.03's 16-wide column) show 6 MiB of occupancy on 0x10101 within the
/// model's rounding and 0 on 0x10100; both channels are tagged with RMID 0 again after.
#[test]
fn a_devices_channel_in_a_class_has_its_io_occupancy_monitored() {
    use super::util::mounted::Mounted;
    use rdt_mmio::iotag::Tag;
    let m = Mounted::new("xeon-rdt13");
    let busy = rdt_pqos::ChannelId::from_raw(0x10101);
    let idle = rdt_pqos::ChannelId::from_raw(0x10100);
    m.pqos(&["-R", "l3iordt-on"]).ok();
    m.pqos(&["-a", "dev:1=0000:16:01.0"]).ok();
    assert_eq!(channel_class(&m, 0x10101), Some(1));
    m.platform()
        .lock()
        .set_io_traffic(busy, 1.0e9, 6.0 * 1_048_576.0)
        .unwrap();
    let run = m
        .pqos(&["--mon-channel=llc:0x10101;llc:0x10100", "-t", "2"])
        .ok();
    let out = &run.stdout;
    assert!(out.contains("         CHANNEL     LLC[KB]"), "{out}");
    let last_in = |out: &str, ch: &str| -> f64 {
        out.lines()
            .rev()
            .find(|l| l.trim_start().starts_with(ch))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no row for {ch}: {out}"))
    };
    let kib = last_in(out, "0x10101");
    assert!((kib / 6144.0 - 1.0).abs() < 0.01, "{kib} KiB: {out}");
    assert!(
        out.lines()
            .any(|l| l == "         0x10101" || l.starts_with("         0x10101 ")),
        "16-wide channel column: {out}"
    );
    assert!(last_in(out, "0x10100").abs() < f64::EPSILON, "{out}");
    // CSV and JSON name the group column `Channel` / `"channel"`
    let csv = m
        .pqos(&["--mon-channel=llc:0x10101", "-t", "1", "-u", "csv"])
        .ok();
    assert!(
        csv.stdout.starts_with("Time,Channel,LLC[KB]\n"),
        "{}",
        csv.stdout
    );
    let json = m
        .pqos(&["--mon-channel=llc:0x10101", "-t", "1", "-u", "json"])
        .ok();
    assert!(
        json.stdout.contains("\"channel\":\"0x10101\""),
        "{}",
        json.stdout
    );
    // --mon-dev: the device is its channel; the row is the device as written
    let run = m.pqos(&["--mon-dev=llc:0000:16:01.0", "-t", "1"]).ok();
    let out = &run.stdout;
    let kib = last_in(out, "0000:16:01.0");
    assert!((kib / 6144.0 - 1.0).abs() < 0.01, "{kib} KiB: {out}");
    let p = m.platform().lock();
    let mmio = p.mmio().unwrap();
    assert_eq!(mmio.channel_tag(busy, Tag::Rmid), Some(0));
    assert_eq!(mmio.channel_tag(idle, Tag::Rmid), Some(0));
}

/// The 17-space `I/O RDT:` line under each monitoring event of `-d`/`-D`.
fn mon_iordt_line(state: &str) -> String {
    format!("\n                 I/O RDT: {state}\n")
}

/// MSR `reg` of `cpu`, read through the mount's msr device file.
fn msr(m: &super::util::mounted::Mounted, cpu: usize, reg: u64) -> u64 {
    let path = m.root().join(format!("dev/cpu/{cpu}/msr"));
    let f = std::fs::File::open(&path).expect("msr file");
    let mut buf = [0u8; 8];
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, reg).expect("read msr");
    u64::from_le_bytes(buf)
}

/// `-r l3iordt-on|off` (pqos v23.11+ `pqos_mon_config.l3_iordt`, lib/hw_monitoring.c
/// `hw_mon_reset_iordt`) on a FUSE-mounted `sapphire-rapids` modelled with I/O RDT: bit 1
/// of IA32_L3_IO_QOS_CFG set on a CPU of every socket, the allocation bit left as it was,
/// `-D`'s monitoring events say `I/O RDT: enabled`; `-r` alone keeps it; `l3iordt-off`
/// clears it and `-D` says `disabled`.
#[test]
fn mon_reset_l3iordt_on_and_off_program_the_monitoring_bit_of_every_socket() {
    use super::util::mounted::Mounted;
    let m = Mounted::new("sapphire-rapids");
    assert!(m.platform().lock().set_io_rdt(true));
    let last = m.platform().lock().topology().cpus().len() - 1;
    let d = m.pqos(&["-D"]).ok();
    assert!(
        d.stdout.contains(&mon_iordt_line("disabled")),
        "{}",
        d.stdout
    );
    let r = m.pqos(&["-r", "l3iordt-on", "-t", "0"]);
    let all = r.raw_stdout.clone() + &r.stderr;
    assert!(all.contains("CMT/MBM reset successful"), "{all}");
    assert_eq!(msr(&m, 0, 0xC83), 0b10, "socket 0: monitoring only");
    assert_eq!(msr(&m, last, 0xC83), 0b10, "the last socket");
    let d = m.pqos(&["-D"]).ok();
    assert!(
        d.stdout.contains(&mon_iordt_line("enabled")),
        "{}",
        d.stdout
    );
    assert!(
        d.stdout.contains(&l3_iordt_line("disabled")),
        "allocation untouched: {}",
        d.stdout
    );
    m.pqos(&["-R", "l3iordt-on"]).ok();
    assert_eq!(
        msr(&m, 0, 0xC83),
        0b11,
        "-R l3iordt-on keeps the monitoring bit"
    );
    m.pqos(&["-r", "-t", "0"]);
    assert_eq!(msr(&m, 0, 0xC83), 0b11, "-r alone keeps it");
    m.pqos(&["-r", "L3IORDT-off", "-t", "0"]);
    assert_eq!(msr(&m, 0, 0xC83), 0b01);
    assert_eq!(msr(&m, last, 0xC83), 0b01);
    let d = m.pqos(&["-D"]).ok();
    assert!(
        d.stdout.contains(&mon_iordt_line("disabled")),
        "{}",
        d.stdout
    );
}

/// Where L3 monitoring does not enumerate I/O RDT (every captured part) and on the OS
/// interface: `-r l3iordt-on` fails as pqos's does (`I/O RDT monitoring requested but not
/// supported by the platform!`, `CMT/MBM reset failed!`); the part has no
/// IA32_L3_IO_QOS_CFG to write.
#[test]
fn mon_reset_l3iordt_on_is_refused_where_the_part_lacks_it() {
    use super::util::mounted::Mounted;
    let m = Mounted::new("sapphire-rapids");
    let d = m.pqos(&["-D"]).ok();
    assert!(
        d.stdout.contains(&mon_iordt_line("unsupported")),
        "{}",
        d.stdout
    );
    for iface in ["--iface=msr", "--iface=os"] {
        let r = m.pqos(&[iface, "-r", "l3iordt-on", "-t", "0"]);
        assert_eq!(r.code, 1, "{iface}: {}\n{}", r.raw_stdout, r.stderr);
        let all = r.raw_stdout.clone() + &r.stderr;
        assert!(
            all.contains("I/O RDT monitoring requested but not supported by the platform!"),
            "{iface}: {all}"
        );
        assert!(all.contains("CMT/MBM reset failed!"), "{iface}: {all}");
    }
    // off where there is nothing to turn off: the plain reset
    let r = m.pqos(&["-r", "l3iordt-off", "-t", "0"]);
    let all = r.raw_stdout.clone() + &r.stderr;
    assert!(all.contains("CMT/MBM reset successful"), "{all}");
}

/// The `Sub-NUMA Clustering:` line of `-d`/`-D`'s monitoring section.
fn snc_line(mode: &str) -> String {
    format!("\n        Sub-NUMA Clustering: {mode}\n")
}

/// `-r snc-local|snc-total` (pqos v23.11+ `pqos_mon_config.snc`, lib/hw_monitoring.c
/// `hw_mon_set_snc_mode`) on the FUSE-mounted `sapphire-rapids-snc2`: MSR_RMID_SNC_CONFIG
/// (0xCA0) bit 0 set (local) or cleared (total) on a CPU of every socket, and `-D` reads the
/// mode back; through `--sim` the mode is kept in the state file from one run to the next.
#[test]
fn mon_reset_snc_local_and_total_program_every_socket_and_d_reads_it_back() {
    use super::util::mounted::Mounted;
    let m = Mounted::new("sapphire-rapids-snc2");
    let last = m.platform().lock().topology().cpus().len() - 1;
    let d = m.pqos(&["-D"]).ok();
    assert!(d.stdout.contains(&snc_line("total")), "{}", d.stdout);
    let r = m.pqos(&["-r", "snc-local", "-t", "0"]);
    let all = r.raw_stdout.clone() + &r.stderr;
    assert!(all.contains("CMT/MBM reset successful"), "{all}");
    assert_eq!(msr(&m, 0, 0xCA0) & 1, 1, "socket 0");
    assert_eq!(msr(&m, last, 0xCA0) & 1, 1, "the last socket");
    let d = m.pqos(&["-D"]).ok();
    assert!(d.stdout.contains(&snc_line("local")), "{}", d.stdout);
    m.pqos(&["-r", "SNC-total", "-t", "0"]);
    assert_eq!(msr(&m, 0, 0xCA0) & 1, 0);
    assert_eq!(msr(&m, last, 0xCA0) & 1, 0);
    let d = m.pqos(&["-D"]).ok();
    assert!(d.stdout.contains(&snc_line("total")), "{}", d.stdout);

    let sim = Sim::new("sapphire-rapids-snc2");
    let r = sim.pqos(&["-r", "snc-local", "-t", "0"]);
    assert!(
        (r.raw_stdout.clone() + &r.stderr).contains("CMT/MBM reset successful"),
        "{}\n{}",
        r.raw_stdout,
        r.stderr
    );
    let d = sim.pqos(&["-D"]).ok();
    assert!(d.stdout.contains(&snc_line("local")), "saved: {}", d.stdout);
}

/// Without Sub-NUMA Clustering, and on the OS interface (resctrl has no such control), `-r
/// snc-local|snc-total` fails as pqos's does (`SNC requested but not supported by the
/// platform!`, `CMT/MBM reset failed!`) and writes nothing; `snc-any` is the plain reset.
#[test]
fn mon_reset_snc_is_refused_without_snc_and_on_os() {
    for (model, iface) in [
        ("sapphire-rapids", "--iface=msr"),
        ("sapphire-rapids-snc2", "--iface=os"),
    ] {
        let sim = Sim::new(model);
        for token in ["snc-local", "snc-total"] {
            let r = sim.pqos(&[iface, "-r", token, "-t", "0"]);
            assert_eq!(r.code, 1, "{model} {iface} {token}: {}", r.raw_stdout);
            let all = r.raw_stdout.clone() + &r.stderr;
            assert!(
                all.contains("SNC requested but not supported by the platform!"),
                "{model} {iface} {token}: {all}"
            );
            assert!(all.contains("CMT/MBM reset failed!"), "{all}");
        }
        let r = sim.pqos(&[iface, "-r", "snc-any", "-t", "0"]);
        assert!(
            (r.raw_stdout.clone() + &r.stderr).contains("CMT/MBM reset successful"),
            "{model} {iface}: {}\n{}",
            r.raw_stdout,
            r.stderr
        );
    }
}
