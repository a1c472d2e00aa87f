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
