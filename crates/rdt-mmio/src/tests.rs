//! Tests of the three parsers: bytes assembled by hand at the specification's offsets
//! (independent of [`crate::build`]), round trips through the builder, one test per rule a
//! table can break, and fuzzing of truncated, overlapping and corrupted tables.

#![allow(
    clippy::many_single_char_names,
    clippy::similar_names,
    clippy::too_many_lines
)]

use proptest::prelude::*;
use rdt_core::fake::fuzz::fuzz;

use crate::acpi::Problem;
use crate::build;
use crate::erdt::{
    self, Card, Cmrc, Cmrd, CorrectionFactors, DeviceScope, Domain, Erdt, Ibrd, Marc, MbaControl,
    Mmrc, RegisterBlock,
};
use crate::irdt::{ChannelId, Device, DeviceChannel, Irdt, Link, Rmud};
use crate::mrrm::{self, MemoryRange, Mrrm, RegionId, RegionMemory};
use crate::regs;

/// A little-endian byte image written at explicit offsets (the test's own, so that a wrong
/// offset in the builder and the parser alike cannot pass).
fn put(buf: &mut Vec<u8>, at: usize, bytes: &[u8]) {
    if buf.len() < at + bytes.len() {
        buf.resize(at + bytes.len(), 0);
    }
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

fn acpi_header(buf: &mut Vec<u8>, sig: [u8; 4]) {
    put(buf, 0, &sig);
    let len = u32::try_from(buf.len()).unwrap();
    put(buf, 4, &len.to_le_bytes());
    put(buf, 8, &[1]);
    let sum = buf.iter().fold(0u8, |s, &x| s.wrapping_add(x));
    put(buf, 9, &[0u8.wrapping_sub(sum)]);
}

#[test]
fn a_hand_assembled_mrrm_parses_to_its_ranges() {
    let mut t = vec![0u8; 64];
    t[36] = 4; // max memory regions
    // range 0: 0x1_0000_0000 + 64 GiB, local region 0, remote region 2
    let mut e = vec![0u8; 32];
    put(&mut e, 2, &32u16.to_le_bytes());
    put(&mut e, 8, &0x1_0000_0000u64.to_le_bytes());
    put(&mut e, 16, &(64u64 << 30).to_le_bytes());
    put(&mut e, 24, &3u16.to_le_bytes());
    e[26] = 0;
    e[27] = 2;
    t.extend_from_slice(&e);
    // range 1: CXL window at 0x40_0000_0000, 16 GiB, local region 1 only
    let mut e = vec![0u8; 32];
    put(&mut e, 2, &32u16.to_le_bytes());
    put(&mut e, 8, &0x40_0000_0000u64.to_le_bytes());
    put(&mut e, 16, &(16u64 << 30).to_le_bytes());
    put(&mut e, 24, &1u16.to_le_bytes());
    e[26] = 1;
    e[27] = 9; // not valid (flag bit 1 clear), so not checked against the 4 regions
    t.extend_from_slice(&e);
    acpi_header(&mut t, *b"MRRM");
    let m = Mrrm::parse(&t).unwrap();
    assert!(m.header.checksum_ok);
    assert_eq!(m.max_regions, 4);
    assert_eq!(m.ranges.len(), 2);
    assert_eq!(m.ranges[0].offset, 64);
    assert_eq!(
        (m.ranges[0].base, m.ranges[0].length),
        (0x1_0000_0000, 64 << 30)
    );
    assert_eq!(
        (m.ranges[0].local, m.ranges[0].remote),
        (Some(RegionId::new(0)), Some(RegionId::new(2)))
    );
    assert_eq!(
        (m.ranges[1].local, m.ranges[1].remote),
        (Some(RegionId::new(1)), None)
    );
    assert_eq!(m.region_ids(), [0, 1, 2].map(RegionId::new));
    let regions = mrrm::classify(&m, Some(&[(0x40_0000_0000, 32 << 30)]));
    assert_eq!(regions.len(), 2);
    assert_eq!(
        (regions[0].id, regions[0].kind),
        (RegionId::new(0), RegionMemory::Ddr)
    );
    assert_eq!(
        (regions[1].id, regions[1].kind),
        (RegionId::new(1), RegionMemory::Cxl)
    );
    assert!(
        mrrm::classify(&m, None)
            .iter()
            .all(|r| r.kind == RegionMemory::Unknown)
    );
    // the builder writes the same bytes (an id that is not valid as 0)
    let mut same = t.clone();
    same[64 + 32 + 27] = 0;
    same[9] = same[9].wrapping_add(9);
    assert_eq!(build::mrrm(&m), same);
}

#[test]
fn a_hand_assembled_erdt_parses_to_its_domain() {
    let mut t = vec![0u8; 64];
    put(&mut t, 36, &16u32.to_le_bytes()); // max CLOS
    let mut r = vec![0u8; 34];
    put(&mut r, 0, &0u16.to_le_bytes());
    put(&mut r, 4, &1u16.to_le_bytes()); // CPU L3 domain
    put(&mut r, 18, &7u16.to_le_bytes()); // domain id
    put(&mut r, 20, &255u32.to_le_bytes()); // max RMID
    put(&mut r, 24, &0xfe00_0000u64.to_le_bytes());
    put(&mut r, 32, &1u16.to_le_bytes());
    // CACD: two x2APIC ids
    let mut c = vec![0u8; 16];
    put(&mut c, 0, &1u16.to_le_bytes());
    put(&mut c, 2, &16u16.to_le_bytes());
    put(&mut c, 6, &7u16.to_le_bytes());
    put(&mut c, 8, &0u32.to_le_bytes());
    put(&mut c, 12, &2u32.to_le_bytes());
    r.extend_from_slice(&c);
    // CMRC: clumps of 4, stride 64, 2 pages, 64 KiB per unit
    let mut c = vec![0u8; 48];
    put(&mut c, 0, &3u16.to_le_bytes());
    put(&mut c, 2, &48u16.to_le_bytes());
    c[12] = 1;
    put(&mut c, 24, &0xfe01_0000u64.to_le_bytes());
    put(&mut c, 32, &2u32.to_le_bytes());
    put(&mut c, 36, &4u16.to_le_bytes());
    put(&mut c, 38, &64u16.to_le_bytes());
    put(&mut c, 40, &65536u64.to_le_bytes());
    r.extend_from_slice(&c);
    // MMRC: 16 pages, 44-bit counters, 64 B per unit, one correction factor 1.5
    let mut c = vec![0u8; 60];
    put(&mut c, 0, &4u16.to_le_bytes());
    put(&mut c, 2, &60u16.to_le_bytes());
    c[12] = 1;
    put(&mut c, 24, &0xfe10_0000u64.to_le_bytes());
    put(&mut c, 32, &16u32.to_le_bytes());
    c[36] = 44;
    put(&mut c, 37, &64u64.to_le_bytes());
    put(&mut c, 52, &1u32.to_le_bytes());
    put(&mut c, 56, &0x18000u32.to_le_bytes());
    r.extend_from_slice(&c);
    // MARC
    let mut c = vec![0u8; 48];
    put(&mut c, 0, &5u16.to_le_bytes());
    put(&mut c, 2, &48u16.to_le_bytes());
    c[8] = 1;
    put(&mut c, 16, &0xfe20_0000u64.to_le_bytes());
    put(&mut c, 24, &0xfe20_1000u64.to_le_bytes());
    put(&mut c, 32, &0xfe20_2000u64.to_le_bytes());
    put(&mut c, 40, &1u32.to_le_bytes());
    put(&mut c, 44, &0x1ffu32.to_le_bytes());
    r.extend_from_slice(&c);
    let rlen = u16::try_from(r.len()).unwrap();
    put(&mut r, 2, &rlen.to_le_bytes());
    t.extend_from_slice(&r);
    acpi_header(&mut t, *b"ERDT");

    let e = Erdt::parse(&t).unwrap();
    assert_eq!(e.max_clos, 16);
    assert_eq!(e.domains.len(), 1);
    let d = &e.domains[0];
    assert_eq!((d.offset, d.id, d.max_rmid), (64, 7, 255));
    assert!(d.is_cpu_l3() && !d.is_io_l3());
    assert_eq!(
        d.control,
        RegisterBlock {
            base: 0xfe00_0000,
            pages: 1
        }
    );
    assert_eq!(d.cpu_agents, [0, 2]);
    let cmrc = d.cmrc.as_ref().unwrap();
    assert_eq!(cmrc.offset, 64 + 34 + 16);
    assert_eq!(
        (cmrc.clump_size, cmrc.clump_stride, cmrc.upscaling),
        (4, 64, 65536)
    );
    assert_eq!(cmrc.address(9), Some(0xfe01_0000 + 2 * 64 + 8));
    let mmrc = d.mmrc.as_ref().unwrap();
    assert_eq!((mmrc.counter_width, mmrc.upscaling), (44, 64));
    assert_eq!(mmrc.correction, CorrectionFactors::Single(0x18000));
    assert_eq!(mmrc.correction.apply(3, 1000), 1500);
    assert_eq!(mmrc.address(8, 1), Some(0xfe10_0000 + 4 * 4096 + 2048));
    let marc = d.marc.as_ref().unwrap();
    assert_eq!(marc.max.base, 0xfe20_2000);
    assert_eq!(marc.control_window, 0x1ff);
    assert_eq!(
        marc.address(MbaControl::Min, 5, 3),
        Some(0xfe20_1000 + 512 + 24)
    );
    assert_eq!(
        marc.address(MbaControl::Max, 0, 512),
        None,
        "past the one page"
    );
    assert_eq!(e.domain_of_cpu(2).map(|d| d.id), Some(7));
    assert_eq!(build::erdt(&e), t, "the builder writes the same bytes");
}

fn block(base: u64, pages: u32) -> RegisterBlock {
    RegisterBlock { base, pages }
}

/// Two CPU domains (one per socket) with CMRC/MMRC/MARC, and an I/O domain with every
/// device-agent sub-structure.
pub(crate) fn sample_erdt() -> Erdt {
    let cpu = |id: u16, base: u64, x2apic: std::ops::Range<u32>| Domain {
        offset: 0,
        flags: erdt::RMDD_CPU_L3,
        id,
        max_rmid: 511,
        io_l3_slices: 0,
        io_l3_sets: 0,
        io_l3_ways: 0,
        control: block(base, 1),
        cpu_agents: x2apic.collect(),
        device_agents: vec![],
        cmrc: Some(Cmrc {
            offset: 0,
            flags: 0,
            index_fn: 1,
            block: block(base + 0x1000, 2),
            clump_size: 8,
            clump_stride: 64,
            upscaling: 98304,
        }),
        mmrc: Some(Mmrc {
            offset: 0,
            flags: 0,
            index_fn: 1,
            block: block(base + 0x10000, 16),
            counter_width: 44,
            upscaling: 64,
            correction: CorrectionFactors::PerRmid((0..512).map(|i| 0x10000 + i).collect()),
        }),
        marc: Some(Marc {
            offset: 0,
            flags: 0,
            index_fn: 1,
            optimal: block(base + 0x20000, 1),
            min: block(base + 0x21000, 1),
            max: block(base + 0x22000, 1),
            control_window: 0x1ff,
        }),
        carc: None,
        cmrd: None,
        ibrd: None,
        ibad: None,
        card: None,
    };
    let io = Domain {
        offset: 0,
        flags: erdt::RMDD_IO_L3,
        id: 8,
        max_rmid: 63,
        io_l3_slices: 4,
        io_l3_sets: 64,
        io_l3_ways: 12,
        control: block(0xfd00_0000, 1),
        cpu_agents: vec![],
        device_agents: vec![DeviceScope {
            offset: 0,
            kind: 1,
            segment: 0,
            start_bus: 0x17,
            path: vec![(2, 0), (0, 1)],
        }],
        cmrc: None,
        mmrc: None,
        marc: None,
        carc: Some(0),
        cmrd: Some(Cmrd {
            offset: 0,
            flags: 0,
            index_fn: 1,
            block: block(0xfd01_0000, 1),
            register_offset: 0x100,
            clump_size: 8,
            upscaling: 65536,
        }),
        ibrd: Some(Ibrd {
            offset: 0,
            flags: 0,
            index_fn: 1,
            block: block(0xfd02_0000, 2),
            total_offset: 0,
            miss_offset: 0x800,
            total_clump_size: 8,
            miss_clump_size: 8,
            counter_width: 40,
            upscaling: 64,
            correction: CorrectionFactors::None,
        }),
        ibad: Some(0),
        card: Some(Card {
            offset: 0,
            flags: erdt::CARD_CONTENTION_VALID,
            contention_mask: 0x3,
            index_fn: 1,
            block: block(0xfd03_0000, 1),
            cat_offset: 0x40,
            cat_block_size: 0x100,
        }),
    };
    Erdt {
        header: build::header(b"ERDT"),
        max_clos: 15,
        domains: vec![cpu(0, 0xfe00_0000, 0..4), cpu(1, 0xfe80_0000, 4..8), io],
    }
}

pub(crate) fn sample_mrrm() -> Mrrm {
    let r = |base: u64, gib: u64, local: u8, remote: u8| MemoryRange {
        offset: 0,
        base,
        length: gib << 30,
        local: Some(RegionId::new(local)),
        remote: Some(RegionId::new(remote)),
        programming_registers: vec![],
    };
    Mrrm {
        header: build::header(b"MRRM"),
        max_regions: 4,
        flags: 0,
        ranges: vec![
            r(0, 256, 0, 0),
            r(0x40_0000_0000, 256, 0, 0),
            r(0x100_0000_0000, 128, 1, 1),
        ],
    }
}

pub(crate) fn sample_irdt() -> Irdt {
    let link = |enum_id: u8, count: u8, mmio: u64| Link {
        offset: 0,
        link_type: 0,
        enum_id,
        channel_count: count,
        flags: crate::irdt::RCS_RMID_TAGGING | crate::irdt::RCS_CLOS_TAGGING,
        rmid_block_offset: 0x100,
        clos_block_offset: 0x200,
        mmio,
        channels: (0..count).map(|c| ChannelId::new(0, enum_id, c)).collect(),
    };
    Irdt {
        header: build::header(b"IRDT"),
        io_protocol: 0b111,
        cache_protocol: 0b011,
        rmuds: vec![Rmud {
            offset: 0,
            segment: 0,
            devices: vec![Device {
                offset: 0,
                device_type: 1,
                segment: 0,
                bdf: 0x1710,
                channels: vec![
                    DeviceChannel {
                        vc: 0,
                        channel: ChannelId::new(0, 1, 0),
                        shared: false,
                    },
                    DeviceChannel {
                        vc: 1,
                        channel: ChannelId::new(0, 1, 1),
                        shared: true,
                    },
                ],
            }],
            links: vec![link(1, 2, 0xfc00_0000), link(2, 1, 0xfc01_0000)],
        }],
    }
}

#[test]
fn the_builder_round_trips_every_sub_structure() {
    let e = sample_erdt();
    let bytes = build::erdt(&e);
    let p = Erdt::parse(&bytes).unwrap();
    assert!(p.header.checksum_ok);
    assert_eq!(p.domains.len(), 3);
    for (a, b) in p.domains.iter().zip(&e.domains) {
        assert_eq!(
            (a.id, a.flags, a.max_rmid, a.control),
            (b.id, b.flags, b.max_rmid, b.control)
        );
        assert_eq!(a.cpu_agents, b.cpu_agents);
        assert_eq!(a.register_blocks(), b.register_blocks());
        assert_eq!(
            a.mmrc.as_ref().map(|m| &m.correction),
            b.mmrc.as_ref().map(|m| &m.correction)
        );
        assert_eq!(
            a.device_agents.iter().map(|d| &d.path).collect::<Vec<_>>(),
            b.device_agents.iter().map(|d| &d.path).collect::<Vec<_>>()
        );
        assert_eq!(
            a.ibrd.as_ref().map(|i| (i.miss_offset, i.counter_width)),
            b.ibrd.as_ref().map(|i| (i.miss_offset, i.counter_width))
        );
        assert_eq!(
            a.card.as_ref().map(|c| (c.contention_mask, c.cat_offset)),
            b.card.as_ref().map(|c| (c.contention_mask, c.cat_offset))
        );
        assert_eq!(
            (a.carc.is_some(), a.ibad.is_some()),
            (b.carc.is_some(), b.ibad.is_some())
        );
    }
    assert_eq!(p.domains[2].cmrd.as_ref().unwrap().register_offset, 0x100);
    assert_eq!(build::erdt(&p), bytes);

    let m = sample_mrrm();
    let bytes = build::mrrm(&m);
    let p = Mrrm::parse(&bytes).unwrap();
    assert_eq!(
        p.ranges
            .iter()
            .map(|r| (r.base, r.length, r.local))
            .collect::<Vec<_>>(),
        m.ranges
            .iter()
            .map(|r| (r.base, r.length, r.local))
            .collect::<Vec<_>>()
    );
    assert_eq!(build::mrrm(&p), bytes);

    let i = sample_irdt();
    let bytes = build::irdt(&i);
    let p = Irdt::parse(&bytes).unwrap();
    assert_eq!(
        p.rmuds[0]
            .links
            .iter()
            .map(|l| (l.enum_id, l.channel_count, l.mmio))
            .collect::<Vec<_>>(),
        vec![(1, 2, 0xfc00_0000), (2, 1, 0xfc01_0000)]
    );
    assert_eq!(
        p.rmuds[0].devices[0].channels,
        i.rmuds[0].devices[0].channels
    );
    assert_eq!(p.rmuds[0].devices[0].address(), "0000:17:02.0");
    assert_eq!(p.rmuds[0].links[0].channels[1].to_string(), "0x10101");
    assert_eq!(build::irdt(&p), bytes);
}

/// Parses `bytes` after `edit`, fixing up the header length, and returns the error.
#[track_caller]
fn erdt_err(edit: impl FnOnce(&mut Erdt)) -> crate::TableError {
    let mut e = sample_erdt();
    edit(&mut e);
    match Erdt::parse(&build::erdt(&e)) {
        Ok(_) => panic!("the edited table parsed"),
        Err(e) => e,
    }
}

#[test]
fn every_erdt_rule_is_an_error_naming_the_sub_structure() {
    let e = erdt_err(|e| e.domains[1].id = 0);
    assert!(
        matches!(e.problem, Problem::Duplicate { .. }) && e.structure == "RMDD",
        "{e}"
    );
    let e = erdt_err(|e| e.domains[1].cpu_agents.push(2));
    assert!(e.to_string().contains("x2APIC id 0x2"), "{e}");
    let e = erdt_err(|e| e.domains[0].cmrc.as_mut().unwrap().clump_size = 0);
    assert_eq!((e.structure, e.offset), ("CMRC", 64 + 34 + 24 + 36), "{e}");
    let e = erdt_err(|e| e.domains[0].cmrc.as_mut().unwrap().clump_stride = 8);
    assert!(
        e.to_string()
            .contains("clumps of 8-byte registers may not overlap"),
        "{e}"
    );
    // RMID 511 in clumps of 8, 128 bytes apart: 63 × 128 + 56 is past one page
    let e = erdt_err(|e| {
        let c = e.domains[0].cmrc.as_mut().unwrap();
        (c.clump_stride, c.block.pages) = (128, 1);
    });
    assert!(
        e.to_string()
            .contains("highest RMID lies outside the block"),
        "{e}"
    );
    let e = erdt_err(|e| e.domains[0].mmrc.as_mut().unwrap().counter_width = 63);
    assert!(e.to_string().contains("counter width = 0x3f"), "{e}");
    let e = erdt_err(|e| {
        e.domains[0].mmrc.as_mut().unwrap().correction = CorrectionFactors::PerRmid(vec![1; 7]);
    });
    assert!(e.to_string().contains("0, 1 or max RMID + 1"), "{e}");
    let e = erdt_err(|e| e.domains[0].mmrc.as_mut().unwrap().block.pages = 8);
    assert_eq!(e.structure, "MMRC", "{e}");
    let e = erdt_err(|e| e.max_clos = 600);
    assert!(e.to_string().contains("highest class of service"), "{e}");
    let e = erdt_err(|e| e.domains[0].control.pages = 0);
    assert!(e.to_string().contains("at least one 4 KiB page"), "{e}");
    let e = erdt_err(|e| e.domains[0].marc.as_mut().unwrap().max.base = u64::MAX - 7);
    assert!(e.to_string().contains("end below 2^64"), "{e}");
}

#[test]
fn erdt_structure_errors() {
    let good = build::erdt(&sample_erdt());
    // the first RMDD's length field reaches past the table
    let mut t = good.clone();
    t[66..68].copy_from_slice(&u16::MAX.to_le_bytes());
    let e = Erdt::parse(&t).unwrap_err();
    assert_eq!((e.structure, e.offset), ("RMDD", 64), "{e}");
    // a CACD naming another domain
    let mut t = good.clone();
    t[64 + 34 + 6] = 9;
    let e = Erdt::parse(&t).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("ERDT: CACD at byte 0x68: domain id = 0x9"),
        "{e}"
    );
    // a CMRC at the top level
    let mut t = good.clone();
    t[64] = 3;
    let e = Erdt::parse(&t).unwrap_err();
    assert!(matches!(e.problem, Problem::Type { found: 3, .. }), "{e}");
    // a CACD whose length is not whole ids
    let mut t = good;
    let len = u16::from_le_bytes([t[64 + 34 + 2], t[64 + 34 + 3]]);
    t[64 + 34 + 2..64 + 34 + 4].copy_from_slice(&(len - 2).to_le_bytes());
    let e = Erdt::parse(&t).unwrap_err();
    assert_eq!((e.structure, e.offset), ("CACD", 64 + 34 + 2), "{e}");
}

#[test]
fn mrrm_and_irdt_rules() {
    let mut m = sample_mrrm();
    m.ranges[2].base = 0x40_0000_0000 + (1 << 30);
    let e = Mrrm::parse(&build::mrrm(&m)).unwrap_err();
    assert!(matches!(e.problem, Problem::Overlap { .. }), "{e}");
    let mut m = sample_mrrm();
    m.ranges[1].local = Some(RegionId::new(4));
    let e = Mrrm::parse(&build::mrrm(&m)).unwrap_err();
    assert_eq!(
        (e.structure, e.offset),
        ("memory range entry", 64 + 32 + 26),
        "{e}"
    );
    let mut m = sample_mrrm();
    m.ranges.clear();
    assert!(Mrrm::parse(&build::mrrm(&m)).is_err());
    let mut m = sample_mrrm();
    m.ranges[0].length = 0;
    assert!(
        Mrrm::parse(&build::mrrm(&m))
            .unwrap_err()
            .to_string()
            .contains("not empty")
    );

    let mut i = sample_irdt();
    i.rmuds[0].links[1].enum_id = 1;
    let e = Irdt::parse(&build::irdt(&i)).unwrap_err();
    assert!(
        matches!(e.problem, Problem::Duplicate { .. }) && e.structure == "RCS",
        "{e}"
    );
    let mut i = sample_irdt();
    i.rmuds[0].links[0].channel_count = 1;
    let e = Irdt::parse(&build::irdt(&i)).unwrap_err();
    assert!(
        e.to_string().contains("below its RCS's channel count"),
        "{e}"
    );
    let mut i = sample_irdt();
    i.rmuds[0].links.remove(0);
    let e = Irdt::parse(&build::irdt(&i)).unwrap_err();
    assert!(e.to_string().contains("must name an RCS"), "{e}");
    let mut i = sample_irdt();
    i.rmuds[0].devices[0].device_type = 3;
    assert!(
        Irdt::parse(&build::irdt(&i))
            .unwrap_err()
            .to_string()
            .contains("device type")
    );
}

#[test]
fn tables_are_read_under_a_sysroot() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join(crate::tables::TABLES_DIR);
    std::fs::create_dir_all(&t).unwrap();
    let none = crate::AcpiTables::read(dir.path()).unwrap();
    assert!(!none.has_mmio() && none.cxl_windows.is_none());
    std::fs::write(t.join("ERDT"), build::erdt(&sample_erdt())).unwrap();
    std::fs::write(t.join("MRRM"), build::mrrm(&sample_mrrm())).unwrap();
    let cxl = dir
        .path()
        .join(crate::tables::CXL_DEVICES_DIR)
        .join("region0");
    std::fs::create_dir_all(&cxl).unwrap();
    std::fs::write(cxl.join("resource"), "0x10000000000\n").unwrap();
    std::fs::write(cxl.join("size"), "0x2000000000\n").unwrap();
    let all = crate::AcpiTables::read(dir.path()).unwrap();
    assert!(all.has_mmio() && all.irdt.is_none());
    let kinds: Vec<_> = all.regions().iter().map(|r| (r.id.get(), r.kind)).collect();
    assert_eq!(kinds, [(0, RegionMemory::Ddr), (1, RegionMemory::Cxl)]);
    // a corrupt table names the file, the sub-table and the offset
    let mut bad = build::mrrm(&sample_mrrm());
    bad.truncate(100);
    std::fs::write(t.join("MRRM"), &bad).unwrap();
    let e = crate::AcpiTables::read(dir.path()).unwrap_err();
    let msg = format!("{e}");
    assert!(msg.contains("MRRM: header at byte 0x4: truncated"), "{msg}");
    // a FIFO is refused, not waited on
    std::fs::remove_file(t.join("MRRM")).unwrap();
    nix_mkfifo(&t.join("MRRM"));
    assert!(matches!(
        crate::AcpiTables::read(dir.path()),
        Err(crate::ReadTablesError::Read { .. })
    ));
}

fn nix_mkfifo(path: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo");
}

/// The error must point inside the bytes it was given.
fn points_inside(e: &crate::TableError, len: usize) -> Result<(), TestCaseError> {
    prop_assert!(e.offset <= len, "{e} at {} of {len}", e.offset);
    prop_assert!(!e.structure.is_empty());
    Ok(())
}

#[derive(Debug, Clone)]
enum Damage {
    Truncate(usize),
    /// Overwrite a u16 at an offset (a length or type field most of the time) and fix up the
    /// header's length so the damage is inside.
    Write16(usize, u16),
    Byte(usize, u8),
    Append(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Vec<Damage>> {
    let one = prop_oneof![
        (0usize..4096).prop_map(Damage::Truncate),
        (0usize..4096, any::<u16>()).prop_map(|(a, v)| Damage::Write16(a, v)),
        (
            0usize..4096,
            prop_oneof![Just(0u16), Just(4), Just(8), 0u16..64, any::<u16>()]
        )
            .prop_map(|(a, v)| Damage::Write16(a, v)),
        (0usize..4096, any::<u8>()).prop_map(|(a, v)| Damage::Byte(a, v)),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Damage::Append),
    ];
    proptest::collection::vec(one, 1..4)
}

fn apply(mut t: Vec<u8>, damage: &[Damage]) -> Vec<u8> {
    for d in damage {
        match d {
            Damage::Truncate(n) => t.truncate(*n % (t.len() + 1)),
            Damage::Write16(a, v) if t.len() >= 2 => {
                let a = a % (t.len() - 1);
                t[a..a + 2].copy_from_slice(&v.to_le_bytes());
            }
            Damage::Byte(a, v) if !t.is_empty() => {
                let a = a % t.len();
                t[a] = *v;
            }
            Damage::Append(b) => t.extend_from_slice(b),
            _ => {}
        }
        // keep the header's length true most of the time, so the damage reaches the body
        if t.len() >= 8 && !t.len().is_multiple_of(3) {
            let len = u32::try_from(t.len()).unwrap_or(u32::MAX);
            t[4..8].copy_from_slice(&len.to_le_bytes());
        }
    }
    t
}

/// A parser whose result is only judged by its error.
type Parse = fn(&[u8]) -> Result<(), crate::TableError>;

#[test]
fn fuzz_damaged_tables_are_errors_never_panics() {
    let erdt = build::erdt(&sample_erdt());
    let mrrm = build::mrrm(&sample_mrrm());
    let irdt = build::irdt(&sample_irdt());
    fuzz(
        "acpi_tables_damaged",
        (0usize..3, damage()),
        |(which, d)| {
            let (base, parse): (&[u8], Parse) = match which {
                0 => (&erdt, |b| Erdt::parse(b).map(drop)),
                1 => (&mrrm, |b| Mrrm::parse(b).map(drop)),
                _ => (&irdt, |b| Irdt::parse(b).map(drop)),
            };
            let t = apply(base.to_vec(), &d);
            if let Err(e) = parse(&t) {
                points_inside(&e, t.len())?;
            }
            Ok(())
        },
    );
}

#[test]
fn fuzz_every_truncation_is_an_error() {
    // every prefix of a valid table, with its header length made to match, fails cleanly or
    // parses to fewer structures: never reads past the end
    for (name, t, parse) in [
        (
            "ERDT",
            build::erdt(&sample_erdt()),
            (|b: &[u8]| Erdt::parse(b).map(|e| e.domains.len()))
                as fn(&[u8]) -> Result<usize, crate::TableError>,
        ),
        ("MRRM", build::mrrm(&sample_mrrm()), |b: &[u8]| {
            Mrrm::parse(b).map(|m| m.ranges.len())
        }),
        ("IRDT", build::irdt(&sample_irdt()), |b: &[u8]| {
            Irdt::parse(b).map(|i| i.rmuds.len())
        }),
    ] {
        let whole = parse(&t).unwrap();
        for n in 0..t.len() {
            let mut cut = t[..n].to_vec();
            assert!(
                parse(&cut).is_err(),
                "{name} cut at {n} with the old length"
            );
            if n >= 8 {
                cut[4..8].copy_from_slice(&u32::try_from(n).unwrap().to_le_bytes());
                match parse(&cut) {
                    Ok(k) => assert!(k <= whole, "{name} at {n}"),
                    Err(e) => assert!(e.offset <= n, "{name} at {n}: {e}"),
                }
            }
        }
    }
}

#[test]
fn fuzz_arbitrary_bytes_behind_a_valid_header() {
    fuzz(
        "acpi_tables_random",
        (0usize..3, proptest::collection::vec(any::<u8>(), 0..600)),
        |(which, body)| {
            let (sig, fixed) = [(b"ERDT", 64), (b"MRRM", 64), (b"IRDT", 48)][which];
            let mut t = vec![0u8; fixed.min(body.len() + 36).max(36)];
            t.extend_from_slice(&body);
            put(&mut t, 0, sig);
            let len = u32::try_from(t.len()).unwrap();
            put(&mut t, 4, &len.to_le_bytes());
            let r = match which {
                0 => Erdt::parse(&t).map(drop),
                1 => Mrrm::parse(&t).map(drop),
                _ => Irdt::parse(&t).map(drop),
            };
            if let Err(e) = r {
                points_inside(&e, t.len())?;
            }
            Ok(())
        },
    );
}

#[test]
fn register_layout_constants_match_the_masks_of_the_spec() {
    assert_eq!(regs::BW_COUNT_MASK, 0x3fff_ffff_ffff_ffff);
    assert_eq!(regs::OCCUPANCY_COUNT_MASK, 0x7fff_ffff_ffff_ffff);
    assert_eq!(
        regs::COUNTER_UNAVAILABLE | regs::COUNTER_OVERFLOW | regs::BW_COUNT_MASK,
        u64::MAX
    );
    let all = (0..4).fold(0, |r, region| regs::with_mba_field(r, region, 0x1ff));
    assert_eq!(all, 0x01ff_01ff_01ff_01ff);
}
