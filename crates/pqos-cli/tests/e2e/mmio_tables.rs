//! pqos v26.03's RDT 1.3 table reports and register dumps (issue 34) on the `xeon-rdt13`
//! model: in-process (`--sim`) and FUSE-mounted (`--sysroot DIR`, tables read from
//! `DIR/sys/firmware/acpi/tables`, registers through `DIR/dev/mem`). Expected values come
//! from the model's own table bytes, parsed by the library, and from its registers read
//! directly.

use std::process::Command;

use rdt_mmio::dump::Space;
use rdt_mmio::{DevMem, Erdt, MmioIo, Mrrm};

use crate::util::mounted::Mounted;
use crate::util::{Machine, PQOS, Run, Sim};

const MODEL: &str = "xeon-rdt13";

/// `pqos --sysroot DIR ARGS...` with the default interface (auto: MMIO where the platform
/// has ERDT and MRRM, as pqos v26.03 chooses).
fn on_mount(m: &Mounted, args: &[&str]) -> Run {
    Command::new(PQOS)
        .arg("--sysroot")
        .arg(m.root())
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RDT_IFACE")
        .output()
        .expect("run pqos")
        .into()
}

fn table(m: &Mounted, sig: &str) -> Vec<u8> {
    std::fs::read(m.root().join("sys/firmware/acpi/tables").join(sig)).expect("the table")
}

#[test]
fn print_mem_regions_lists_every_mrrm_range_on_both_paths() {
    let m = Mounted::new(MODEL);
    let mrrm = Mrrm::parse(&table(&m, "MRRM")).expect("the model's MRRM");
    let sim = Sim::new(MODEL);
    for run in [
        sim.pqos(&["--print-mem-regions"]).ok(),
        on_mount(&m, &["--print-mem-regions"]).ok(),
    ] {
        let out = &run.stdout;
        assert!(
            out.starts_with(&format!(
                "Total Memory Regions:  {}\nRegion ID Type:        Static\n",
                mrrm.max_regions
            )),
            "{out}"
        );
        assert_eq!(
            out.matches("Base Address     : ").count(),
            mrrm.ranges.len()
        );
        let mut at = 0;
        for r in &mrrm.ranges {
            let entry = format!(
                "Base Address     : 0x{:x}\nLength           : 0x{:x}\nLocal Region ID  : 0x{:x}\n",
                r.base,
                r.length,
                r.local.expect("local id").get()
            );
            let found = out[at..]
                .find(&entry)
                .unwrap_or_else(|| panic!("{entry} in order:\n{out}"));
            at += found + entry.len();
        }
    }
    // an explicit other interface: pqos's line, nothing of the table
    let run = sim.pqos(&["--iface=msr", "--print-mem-regions"]).ok();
    assert_eq!(run.stdout, "MMIO interface provides Memory Regions\n");
}

#[test]
fn a_platform_without_the_tables_says_which_is_missing() {
    let sim = Sim::new("sapphire-rapids");
    let run = sim.pqos(&["--print-mem-regions"]).failed();
    assert!(run.stderr.contains("no ACPI MRRM table"), "{}", run.stderr);
    let run = sim.pqos(&["--print-topology"]).failed();
    assert!(run.stderr.contains("no ACPI ERDT table"), "{}", run.stderr);
    let run = sim
        .pqos(&["--dump", "--dump-domain-id=0", "--space=cmrc"])
        .failed();
    assert!(run.stderr.contains("no ACPI ERDT table"), "{}", run.stderr);
    assert!(!run.stdout.contains("MMIO space dump"), "{}", run.stdout);
}

#[test]
fn print_topology_and_dump_info_show_every_domain_and_block() {
    let m = Mounted::new(MODEL);
    let erdt = Erdt::parse(&table(&m, "ERDT")).expect("the model's ERDT");
    let (cpu, dev) = rdt_mmio::dump::agents(&erdt);
    let sim = Sim::new(MODEL);
    let topo = sim.pqos(&["--print-topology"]).ok().stdout;
    assert!(
        topo.starts_with(&format!(
            "CLOS:           {}\nCPU Agents:     {}\nDevice Agents:  {}\n",
            erdt.max_clos,
            cpu.len(),
            dev.len()
        )),
        "{topo}"
    );
    for d in &cpu {
        let cmrc = d.cmrc.as_ref().expect("CMRC");
        let mmrc = d.mmrc.as_ref().expect("MMRC");
        for line in [
            format!("\n\nDomain ID {}\n\n    Type: CPU\n    CACD Info:\n", d.id),
            format!(
                "        CMT Register Block Base Address:               0x{:x}\n",
                cmrc.block.base
            ),
            format!(
                "        MBM Counter Width:                             0x{:x}\n",
                mmrc.counter_width
            ),
        ] {
            assert!(topo.contains(&line), "{line}\n{topo}");
        }
    }
    for d in &dev {
        let card = d.card.as_ref().expect("CARD");
        for line in [
            format!("\n\nDomain ID {}\n\n    Type: Device\n", d.id),
            format!(
                "        Contention Bitmask:                            0x{:x}\n",
                card.contention_mask
            ),
        ] {
            assert!(topo.contains(&line), "{line}\n{topo}");
        }
    }
    let info = on_mount(&m, &["--print-dump-info"]).ok().stdout;
    let rows: Vec<&str> = info.lines().filter(|l| l.starts_with("0x")).collect();
    let want: Vec<String> = rdt_mmio::dump::dump_info(&erdt)
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "0x{:02x}         {:<12} {:<12} 0x{:016x}   0x{:08x}",
                r.domain_id,
                if r.cpu { "CPU" } else { "DEVICE" },
                r.space.label(),
                r.block.base,
                r.block.len()
            )
        })
        .collect();
    assert_eq!(rows, want);
    // five spaces per CPU domain, three per device domain
    assert_eq!(rows.len(), 5 * cpu.len() + 3 * dev.len());
}

/// The hex of a qword as pqos prints it without `--le`: most significant byte first.
fn be_hex(v: u64) -> String {
    format!("{v:016x}")
}

#[test]
fn dumps_print_the_registers_as_read_and_refuse_windows_past_the_block() {
    let m = Mounted::new(MODEL);
    let erdt = Erdt::parse(&table(&m, "ERDT")).expect("the model's ERDT");
    let (cpu, _) = rdt_mmio::dump::agents(&erdt);
    let d = cpu[0];
    let max = Space::MarcMax.block(d).expect("MARC max");
    let opt = Space::MarcOpt.block(d).expect("MARC opt");
    let mut mem = DevMem::open(m.root()).expect("dev/mem");
    let regs: Vec<u64> = (0..4)
        .map(|i| mem.read(max.base + 8 * i).expect("read"))
        .collect();
    assert!(regs.iter().any(|&r| r != 0), "{regs:x?}");
    let id = d.id.to_string();
    let run = on_mount(
        &m,
        &[
            "--dump",
            &format!("--dump-domain-id={id}"),
            "--space=marc-max",
            "--length=4",
        ],
    )
    .ok();
    let want = format!(
        "MMIO space dump: base={:#x} size={:#x} offset=0 len=4 width(bytes)=8 le=0 bin=0\n\
         000000 {} {} \n000010 {} {} \n",
        max.base,
        max.len(),
        be_hex(regs[0]),
        be_hex(regs[1]),
        be_hex(regs[2]),
        be_hex(regs[3]),
    );
    assert_eq!(run.stdout, want);
    // bytes, little endian, from byte 1 of the optimal block: the register's bytes in order
    let opt0 = mem.read(opt.base).expect("read");
    let run = Sim::new(MODEL)
        .pqos(&[
            "--dump",
            "--socket=0",
            "--space=MARC-OPT",
            "--offset=1",
            "--length=3",
            "--width=8",
            "--le",
        ])
        .ok();
    let b = opt0.to_le_bytes();
    assert!(
        run.stdout.ends_with(&format!(
            "offset=1 len=3 width(bytes)=1 le=1 bin=0\n000000 {:02x} {:02x} {:02x} \n",
            b[1], b[2], b[3]
        )),
        "{}",
        run.stdout
    );
    // a window past the block: refused naming the offset, nothing dumped
    let elems = (max.len() / 8).to_string();
    for (offset, length) in [(elems.as_str(), "0"), ("0", "513")] {
        let run = on_mount(
            &m,
            &[
                "--dump",
                &format!("--dump-domain-id={id}"),
                "--space=marc-max",
                &format!("--offset={offset}"),
                &format!("--length={length}"),
            ],
        )
        .failed();
        assert!(
            run.stderr.contains(&format!("--offset {offset}")) && run.stderr.contains("MARC(MAX)"),
            "{}",
            run.stderr
        );
        assert!(!run.stdout.contains("MMIO space dump"), "{}", run.stdout);
    }
    // a space the domain does not have, a domain the table does not have, no selection
    let run = on_mount(
        &m,
        &["--dump", &format!("--dump-domain-id={id}"), "--space=card"],
    );
    assert!(run.failed().stderr.contains("has no CARD register block"));
    let run = on_mount(&m, &["--dump", "--dump-domain-id=77", "--space=cmrc"]);
    assert!(run.failed().stderr.contains("domain id 77"));
    let run = Sim::new(MODEL).pqos(&["--dump", "--space=cmrc"]).failed();
    assert!(
        run.stderr.contains("--socket or --dump-domain-id"),
        "{}",
        run.stderr
    );
    let run = Sim::new(MODEL)
        .pqos(&["--dump", "--dump-domain-id=0"])
        .failed();
    assert!(run.stderr.contains("missing --space"), "{}", run.stderr);
    let run = Sim::new(MODEL).pqos(&["-R", "--print-dump-info"]).failed();
    assert!(
        run.stderr.contains("-r/-R together with a table report"),
        "{}",
        run.stderr
    );
    let run = Sim::new(MODEL).pqos(&["--space=cmrc"]).failed();
    assert!(run.stderr.contains("go with --dump"), "{}", run.stderr);
}

#[test]
fn rmid_dumps_show_the_region_split_of_the_workloads_traffic() {
    let m = Mounted::new(MODEL);
    let erdt = Erdt::parse(&table(&m, "ERDT")).expect("the model's ERDT");
    // the default scenario's workloads run on CPUs 2-10, under RMID 0
    let domain = {
        let p = m.platform().lock();
        p.topology().cpus()[2].l3.expect("an L3").get()
    };
    let d = erdt
        .domains
        .iter()
        .find(|d| u32::from(d.id) == domain)
        .expect("the domain");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let run = on_mount(
        &m,
        &[
            "--dump-rmid-regs",
            "--dump-rmids=0,1",
            &format!("--dump-rmid-domain-ids={}", d.id),
            "--dump-rmid-type=mbm",
            "--dump-rmid-mem-regions=0,1",
            "--dump-rmid-upscaling",
        ],
    )
    .ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "RMID MBM DUMP:",
            &format!("DOMAIN ID: {}", d.id),
            "REGION ID: 0"
        ],
        "{}",
        run.stdout
    );
    let value = |line: &str| {
        u64::from_str_radix(line.rsplit("0x").next().expect("a value"), 16).expect("hex")
    };
    assert_eq!(lines[5], "REGION ID: 1", "{}", run.stdout);
    let (ddr, cxl) = (value(lines[3]), value(lines[6]));
    assert!(
        lines[3].starts_with("RMID 0000. Value: 0x"),
        "{}",
        run.stdout
    );
    assert!(ddr > 0, "{}", run.stdout);
    #[allow(clippy::cast_precision_loss)]
    let share = ddr as f64 / (ddr + cxl) as f64;
    assert!(
        (share - 0.7).abs() < 0.02,
        "DDR share {share}\n{}",
        run.stdout
    );
    // RMID 1 ran nothing
    assert_eq!(value(lines[4]), 0, "{}", run.stdout);
    // a selection the table does not have is refused before anything is printed
    let run = on_mount(
        &m,
        &[
            "--dump-rmid-regs",
            &format!("--dump-rmids={}", d.max_rmid + 1),
            &format!("--dump-rmid-domain-ids={}", d.id),
            "--dump-rmid-type=l3",
        ],
    )
    .failed();
    assert!(
        run.stderr.contains(&format!("RMIDs 0 to {}", d.max_rmid)),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    let run = on_mount(&m, &["--dump-rmid-regs", "--dump-rmids=0"]).failed();
    assert!(
        run.stderr.contains("--dump-rmid-domain-ids"),
        "{}",
        run.stderr
    );
}

#[test]
fn print_io_devs_lists_every_irdt_device_with_its_channels_on_both_generations() {
    for (model, iface) in [(MODEL, "mmio"), ("sapphire-rapids", "msr")] {
        let m = Mounted::new(model);
        let irdt = rdt_mmio::Irdt::parse(&table(&m, "IRDT")).expect("the model's IRDT");
        let erdt = std::fs::read(m.root().join("sys/firmware/acpi/tables/ERDT"))
            .ok()
            .map(|b| Erdt::parse(&b).expect("the model's ERDT"));
        let devs = rdt_mmio::iordt::io_devices(&irdt, erdt.as_ref());
        assert!(!devs.is_empty(), "{model}");
        let out = Sim::new(model).pqos(&["--print-io-devs"]).ok().stdout;
        assert!(
            out.starts_with(&format!(
                "Enable I/O RDT            : pqos --iface={iface} l3iordt-on\n"
            )),
            "{out}"
        );
        for d in &devs {
            let addr = d.address();
            assert!(out.contains(&format!("\n{addr}: ")), "{addr}\n{out}");
            for c in &d.channels {
                for line in [
                    format!("\t\tpqos --iface={iface} --mon-dev=all:{addr}@{}\n", c.vc),
                    format!(
                        "\t\tpqos --iface={iface} --mon-channel=all:0x{:x}\n",
                        c.channel.get()
                    ),
                    format!(
                        "\t\tpqos --iface={iface} -a channel:<CLOS>=0x{:x}\n",
                        c.channel.get()
                    ),
                ] {
                    assert!(out.contains(&line), "{line}\n{out}");
                }
            }
            if iface == "mmio" {
                let dom = d.domain.expect("the model's DACD covers every device");
                assert!(
                    out.contains(&format!("\tDomain ID            : 0x{dom:x}\n")),
                    "{out}"
                );
            } else {
                assert!(!out.contains("Domain ID"), "{out}");
            }
        }
        // one device: only it
        let first = devs[0].address();
        let one = Sim::new(model)
            .pqos(&[&format!("--print-io-dev={first}")])
            .ok()
            .stdout;
        assert_eq!(one.matches("Monitoring Commands:").count(), 1, "{one}");
        assert!(one.contains(&format!("\n{first}: ")), "{one}");
        // a device the table does not have is refused, naming those it has
        let run = Sim::new(model)
            .pqos(&["--print-io-dev=0000:00:1f.7"])
            .failed();
        assert!(
            run.stderr.contains("0000:00:1f.7 is not an I/O RDT device")
                && run.stderr.contains(&first),
            "{}",
            run.stderr
        );
    }
    // no IRDT: said so
    let run = Sim::new("skylake-sp").pqos(&["--print-io-devs"]).failed();
    assert!(
        run.stderr.contains("IRDT info not available"),
        "{}",
        run.stderr
    );
}
