//! Tests of the platform through its register interface, on the built-in models.

use std::time::Duration;

use rdt_core::{CacheDomain, LogicalCpu, Rmid};
use rdt_msr::regs::{
    AMD_MBA_BW_0, EVT_LLC_OCCUPANCY, EVT_MBM_LOCAL, EVT_MBM_TOTAL, IA32_L2_QOS_MASK_0,
    IA32_L3_QOS_CFG, IA32_L3_QOS_MASK_0, IA32_MBA_THRTL_0, IA32_PQR_ASSOC, IA32_QM_CTR,
    IA32_QM_EVTSEL, QM_CTR_ERROR, QM_CTR_UNAVAILABLE, pqr_assoc, qm_evtsel,
};
use rdt_msr::{MsrAddr, MsrError, MsrIo};

use crate::{Scenario, SimError, SimHandle, SimPlatform};

const MIB: f64 = 1024.0 * 1024.0;

fn cpu(n: u32) -> LogicalCpu {
    LogicalCpu::new(n)
}

fn broadwell() -> SimPlatform {
    SimPlatform::builtin("broadwell-ep").unwrap()
}

fn is_eio(e: &MsrError) -> bool {
    match e {
        MsrError::Read { source, .. } | MsrError::Write { source, .. } => {
            source.raw_os_error() == Some(5)
        }
        _ => false,
    }
}

#[track_caller]
fn assert_write_eio(p: &mut impl MsrIo, c: u32, addr: MsrAddr, v: u64) {
    let e = p.write(cpu(c), addr, v).expect_err("write should fault");
    assert!(is_eio(&e), "{e:?}");
    assert!(matches!(e, MsrError::Write { value, .. } if value == v));
}

/// Reads an event of `rmid` through IA32_QM_EVTSEL / IA32_QM_CTR on `c`, as pqos does.
fn qm_read(p: &mut impl MsrIo, c: u32, rmid: u32, event: u64) -> u64 {
    p.write(cpu(c), IA32_QM_EVTSEL, qm_evtsel(rmid, event))
        .unwrap();
    p.read(cpu(c), IA32_QM_CTR).unwrap()
}

/// Occupancy of `rmid` in MiB, summed over the L3 domains of `cpus_per_domain` (one CPU each).
fn occupancy_mib(p: &mut impl MsrIo, cpus_per_domain: &[u32], rmid: u32, upscale: f64) -> f64 {
    cpus_per_domain
        .iter()
        .map(|&c| {
            let raw = qm_read(p, c, rmid, EVT_LLC_OCCUPANCY);
            assert_eq!(raw & (QM_CTR_ERROR | QM_CTR_UNAVAILABLE), 0);
            #[allow(clippy::cast_precision_loss)]
            let counts = raw as f64;
            counts * upscale / MIB
        })
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Models

#[test]
fn builtin_models_have_the_documented_shape() {
    let b = broadwell();
    assert_eq!(b.topology().cpus().len(), 56);
    assert_eq!(b.topology().l3_domains().len(), 2);
    let l3 = b.capabilities().l3_cat.get().unwrap();
    assert_eq!(
        (l3.cbm_len, l3.num_classes, l3.cdp_supported),
        (20, 16, true)
    );
    assert_eq!(b.capabilities().monitoring.get().unwrap().counter_width, 24);
    assert!(b.cpuid_patches().is_empty());

    let s = SimPlatform::builtin("skylake-sp").unwrap();
    assert_eq!(s.capabilities().l3_cat.get().unwrap().cbm_len, 11);
    assert_eq!(s.capabilities().mba.get().unwrap().num_classes, 8);
    assert_eq!(s.cpuid_patches().len(), 1);
    assert_eq!(
        (s.cpuid_patches()[0].leaf, s.cpuid_patches()[0].subleaf),
        (0x10, 3)
    );

    let m = SimPlatform::builtin("milan").unwrap();
    assert_eq!(m.topology().l3_domains().len(), 16);
    assert_eq!(
        m.topology().cpus_in_l3(CacheDomain::new(0)).to_string(),
        "0-7"
    );

    let r = SimPlatform::builtin("sapphire-rapids").unwrap();
    assert_eq!(r.capabilities().l2_cat.get().unwrap().num_classes, 8);
    assert_eq!(r.capabilities().monitoring.get().unwrap().counter_width, 32);
}

#[test]
fn unknown_model_names_the_builtins() {
    let e = SimPlatform::builtin("haswell").unwrap_err();
    assert!(matches!(e, SimError::UnknownModel { .. }));
    assert!(
        e.to_string()
            .contains("broadwell-ep, skylake-sp, milan, sapphire-rapids"),
        "{e}"
    );
}

#[test]
fn from_dump_models_any_dump_and_rejects_non_rdt_ones() {
    let text = include_str!("../models/intel-xeon-e5-2650lv4_broadwell-ep__hwloc.all.txt");
    let p = SimPlatform::from_dump(text).unwrap();
    assert_eq!(p.capabilities(), broadwell().capabilities());
    assert!(p.identity().starts_with("dump:fnv1a64:"));
    assert!(p.model().contains("E5-2650L v4"));

    let no_rdt = "# canonical-cpuid v1\n\
                  00000000 00000000 0000000d 756e6547 6c65746e 49656e69\n\
                  00000001 00000000 000306e4 00200800 7fbee3ff bfebfbff\n\
                  00000007 00000000 00000000 00000281 00000000 00000000\n";
    assert!(matches!(
        SimPlatform::from_dump(no_rdt),
        Err(SimError::NoRdt { .. })
    ));
    assert!(matches!(
        SimPlatform::from_dump("zz top\n"),
        Err(SimError::Dump { .. })
    ));
}

/// The Broadwell dump with `row` (`leaf subleaf`, 8 hex digits each) of every CPU block
/// replaced by `regs` (`eax ebx ecx edx`).
fn broadwell_dump_with(row: &str, regs: &str) -> String {
    let text = include_str!("../models/intel-xeon-e5-2650lv4_broadwell-ep__hwloc.all.txt");
    text.lines()
        .map(|l| {
            if l.starts_with(row) {
                format!("{row} {regs}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

#[test]
fn a_dump_claiming_absurd_rmids_or_classes_is_refused_not_allocated() {
    // arrange: 2^31 RMIDs (CPUID.(0FH,1):ECX = 2^31 - 1; EBX of subleaf 0 alike) and 65,536
    // classes of service (CPUID.(10H,1):EDX[15:0] = ffff). Taken at face value, the first
    // makes per-RMID counters of 64 GiB per L3 domain.
    let rmids = broadwell_dump_with("0000000f 00000001", "00000000 0000e000 7fffffff 00000007");
    let rmids = rmids.replace(
        "0000000f 00000000 00000000 0000006f",
        "0000000f 00000000 00000000 7fffffff",
    );
    let classes = broadwell_dump_with("00000010 00000001", "00000013 000c0000 00000004 0000ffff");
    // act
    let e_rmids = SimPlatform::from_dump(&rmids).unwrap_err();
    let e_classes = SimPlatform::from_dump(&classes).unwrap_err();
    // assert
    assert!(
        matches!(e_rmids, SimError::Implausible { .. }),
        "{e_rmids:?}"
    );
    assert_eq!(
        rdt_core::error_chain(&e_rmids),
        "model `Intel(R) Xeon(R) CPU E5-2650L v4 @ 1.70GHz` claims a capability no platform \
         has: implausible RMID count, \
         CPUID.(0FH,1):ECX + 1: 2147483648 (at most 65536 accepted; no known platform has more)"
    );
    assert!(
        rdt_core::error_chain(&e_classes)
            .contains("L3 CAT classes of service, CPUID.(10H,1):EDX[15:0] + 1: 65536 (at most 512"),
        "{e_classes}"
    );
}

/// A one-CPU Broadwell dump whose RDT leaves (0FH and 10H, every subleaf) say anything:
/// the platform is built or refused with an error, never a panic or an abort.
#[test]
fn fuzz_dumps_with_any_rdt_leaves_build_or_are_refused() {
    use proptest::prelude::*;
    use rdt_core::fake::fuzz::fuzz;
    let text = include_str!("../models/intel-xeon-e5-2650lv4_broadwell-ep__hwloc.all.txt");
    let cpu0: String = text
        .lines()
        .take_while(|l| *l != "# logical-cpu 1")
        .filter(|l| !l.starts_with("0000000f") && !l.starts_with("00000010"))
        .flat_map(|l| [l, "\n"])
        .collect();
    let rows = [
        (0xF, 0),
        (0xF, 1),
        (0x10, 0),
        (0x10, 1),
        (0x10, 2),
        (0x10, 3),
    ];
    let regs = proptest::collection::vec(any::<[u32; 4]>(), rows.len());
    fuzz("SimPlatform::from_dump (RDT leaves)", regs, |regs| {
        let mut dump = cpu0.clone();
        for ((leaf, sub), [a, b, c, d]) in rows.iter().zip(regs) {
            dump.push_str(&format!(
                "{leaf:08x} {sub:08x} {a:08x} {b:08x} {c:08x} {d:08x}\n"
            ));
        }
        match SimPlatform::from_dump(&dump) {
            Ok(p) => prop_assert!(p.capabilities().check_plausible().is_ok()),
            Err(e) => prop_assert!(
                matches!(e, SimError::NoRdt { .. } | SimError::Implausible { .. }),
                "{e:?}"
            ),
        }
        Ok(())
    });
}

/// Any scenario text is a scenario or an error naming a line (JSON syntax) or a field
/// path; installing a parsed one on a platform never panics.
#[test]
fn fuzz_scenario_files_never_panic_and_errors_name_the_field() {
    use proptest::prelude::*;
    use rdt_core::fake::fuzz::{fuzz, text};
    const WORDS: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"workloads\"",
        "\"idle\"",
        "\"cpus\"",
        "\"0-3\"",
        "\"0-4294967295\"",
        "\"8191\"",
        "\"working_set_mib\"",
        "\"traffic_mibps\"",
        "\"ipc\"",
        "\"utilization\"",
        "\"local_fraction\"",
        "\"name\"",
        "1e308",
        "-1",
        "0.5",
        "null",
        "true",
        "\n",
        " ",
    ];
    let mut p = broadwell();
    let p = std::cell::RefCell::new(&mut p);
    fuzz("Scenario::from_str", text(WORDS, 40), |t| {
        match t.parse::<Scenario>() {
            Ok(s) => {
                let _ = p.borrow_mut().set_scenario(&s);
            }
            Err(crate::ScenarioError::Syntax { line, .. }) => {
                prop_assert!(line <= t.split('\n').count(), "line {line} of {t:?}");
            }
            Err(e @ crate::ScenarioError::Field { .. }) => {
                let m = e.to_string();
                prop_assert!(m.starts_with("scenario field `"), "{m}");
            }
            Err(e) => prop_assert!(false, "unexpected {e:?}"),
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Faults

#[test]
fn out_of_range_class_or_rmid_and_reserved_bits_fault() {
    let mut p = broadwell();
    p.write(cpu(3), IA32_PQR_ASSOC, pqr_assoc(15, 111)).unwrap();
    assert_write_eio(&mut p, 3, IA32_PQR_ASSOC, pqr_assoc(16, 0)); // 16 COS: 0..=15
    assert_write_eio(&mut p, 3, IA32_PQR_ASSOC, pqr_assoc(0, 112)); // 112 RMIDs: 0..=111
    assert_write_eio(&mut p, 3, IA32_PQR_ASSOC, 1 << 10); // bits 31:10 reserved
    // a failed write leaves the register as it was
    assert_eq!(p.read(cpu(3), IA32_PQR_ASSOC).unwrap(), pqr_assoc(15, 111));
}

#[test]
fn bad_capacity_bitmasks_fault_on_intel() {
    let mut p = broadwell();
    let cos1 = IA32_L3_QOS_MASK_0.offset(1);
    assert_write_eio(&mut p, 0, cos1, 0); // zero
    assert_write_eio(&mut p, 0, cos1, 0x10_0000); // bit 20 of a 20-bit CBM
    assert_write_eio(&mut p, 0, cos1, 0xf0f); // not contiguous, CPUID.(10H,1):ECX[3] = 0
    assert_eq!(p.read(cpu(0), cos1).unwrap(), 0xf_ffff, "reset value kept");
    p.write(cpu(0), cos1, 0xffe00).unwrap();
    assert_eq!(p.read(cpu(0), cos1).unwrap(), 0xffe00);
}

#[test]
fn non_contiguous_mask_is_accepted_on_milan() {
    let mut p = SimPlatform::builtin("milan").unwrap();
    p.write(cpu(0), IA32_L3_QOS_MASK_0.offset(1), 0xf0f)
        .unwrap();
    assert_eq!(p.read(cpu(0), IA32_L3_QOS_MASK_0.offset(1)).unwrap(), 0xf0f);
    assert_write_eio(&mut p, 0, IA32_L3_QOS_MASK_0.offset(1), 0x1_0000); // 16-bit CBM
    // AMD accepts an empty mask (kernel min_cbm_bits 0): the class may not fill the L3.
    p.write(cpu(0), IA32_L3_QOS_MASK_0.offset(2), 0).unwrap();
    assert_eq!(p.read(cpu(0), IA32_L3_QOS_MASK_0.offset(2)).unwrap(), 0);
}

#[test]
fn reserved_cfg_bits_unknown_msrs_and_qm_ctr_writes_fault() {
    let mut p = broadwell();
    assert_write_eio(&mut p, 0, IA32_L3_QOS_CFG, 0x2);
    assert_write_eio(&mut p, 0, IA32_QM_CTR, 0);
    assert_write_eio(&mut p, 0, IA32_MBA_THRTL_0, 0); // no MBA on this part
    assert_write_eio(&mut p, 0, IA32_L3_QOS_MASK_0.offset(16), 0xff); // only 16 COS
    assert_write_eio(&mut p, 0, IA32_QM_EVTSEL, 1 << 8); // EVTSEL bits 31:8 reserved
    for addr in [0x11, 0x123, 0xC80, 0xD10, 0xC000_0200] {
        let e = p.read(cpu(0), MsrAddr::new(addr)).unwrap_err();
        assert!(is_eio(&e), "{addr:#x}: {e:?}");
    }
    assert!(
        matches!(p.read(cpu(56), IA32_PQR_ASSOC), Err(MsrError::Request(rdt_core::RequestError::NoSuchCpu(c))) if c == cpu(56))
    );
}

#[test]
fn qos_cfg_does_not_exist_without_cdp() {
    let b = broadwell();
    let mut caps = b.capabilities().clone();
    caps.l3_cat.get_mut().unwrap().cdp_supported = false;
    let mut p = SimPlatform::from_parts(
        "no-cdp",
        "parts:no-cdp",
        b.cpuid(),
        caps,
        b.topology().clone(),
    )
    .unwrap();
    assert!(is_eio(&p.read(cpu(0), IA32_L3_QOS_CFG).unwrap_err()));
    assert_write_eio(&mut p, 0, IA32_L3_QOS_CFG, 1);
    p.write(cpu(0), IA32_L3_QOS_MASK_0, 0xff).unwrap();
}

#[test]
fn bad_event_or_rmid_sets_the_error_bit() {
    let mut p = broadwell();
    assert_eq!(qm_read(&mut p, 0, 112, EVT_LLC_OCCUPANCY), QM_CTR_ERROR);
    assert_eq!(qm_read(&mut p, 0, 1, 4), QM_CTR_ERROR);
    assert_eq!(qm_read(&mut p, 0, 1, 0), QM_CTR_ERROR);
    assert_eq!(qm_read(&mut p, 0, 111, EVT_MBM_LOCAL) & QM_CTR_ERROR, 0);
}

#[test]
fn unavailable_bit_only_through_the_test_hook() {
    let mut p = broadwell();
    p.inject_unavailable(CacheDomain::new(0), Rmid::new(0), 2);
    assert_eq!(qm_read(&mut p, 0, 0, EVT_LLC_OCCUPANCY), QM_CTR_UNAVAILABLE);
    assert_eq!(qm_read(&mut p, 2, 0, EVT_MBM_TOTAL), QM_CTR_UNAVAILABLE);
    let third = qm_read(&mut p, 0, 0, EVT_LLC_OCCUPANCY);
    assert_eq!(third & (QM_CTR_ERROR | QM_CTR_UNAVAILABLE), 0);
    assert!(third > 0, "RMID 0 holds every CPU's data");
}

#[test]
fn mba_values_beyond_the_maximum_fault() {
    let mut s = SimPlatform::builtin("skylake-sp").unwrap();
    s.write(cpu(0), IA32_MBA_THRTL_0.offset(7), 90).unwrap();
    assert_write_eio(&mut s, 0, IA32_MBA_THRTL_0.offset(7), 91);
    assert_write_eio(&mut s, 0, IA32_MBA_THRTL_0.offset(8), 0); // 8 MBA COS
    let mut m = SimPlatform::builtin("milan").unwrap();
    assert_eq!(
        m.read(cpu(0), AMD_MBA_BW_0).unwrap(),
        2048,
        "reset = unlimited"
    );
    m.write(cpu(0), AMD_MBA_BW_0.offset(15), 2048).unwrap();
    assert_write_eio(&mut m, 0, AMD_MBA_BW_0.offset(15), 2049);
}

// ---------------------------------------------------------------------------------------------
// Domains and CDP

#[test]
fn shared_registers_are_per_domain() {
    let mut p = broadwell();
    let socket1: Vec<LogicalCpu> = p
        .topology()
        .cpus_in_l3(CacheDomain::new(1))
        .iter()
        .collect();
    assert_eq!(socket1[..3], [cpu(1), cpu(3), cpu(5)]); // odd CPUs are socket 1 in this dump
    let cos3 = IA32_L3_QOS_MASK_0.offset(3);
    p.write(cpu(1), cos3, 0x000ff).unwrap();
    assert_eq!(p.read(cpu(5), cos3).unwrap(), 0x000ff, "same L3 as CPU 1");
    assert_eq!(
        p.read(cpu(0), cos3).unwrap(),
        0xf_ffff,
        "other socket keeps its own mask"
    );
    assert_eq!(p.read(cpu(2), cos3).unwrap(), 0xf_ffff);
    // per-CPU registers are not shared
    p.write(cpu(1), IA32_PQR_ASSOC, pqr_assoc(3, 0)).unwrap();
    assert_eq!(p.read(cpu(5), IA32_PQR_ASSOC).unwrap(), 0);
}

#[test]
fn l2_masks_are_shared_by_the_cpus_of_one_l2() {
    let mut p = SimPlatform::builtin("sapphire-rapids").unwrap();
    let l2 = p.topology().get(cpu(0)).unwrap().l2;
    let sib = p
        .topology()
        .cpus_in_l2(l2)
        .iter()
        .find(|c| *c != cpu(0))
        .unwrap();
    let other = p.topology().cpus().iter().find(|c| c.l2 != l2).unwrap().cpu;
    p.write(cpu(0), IA32_L2_QOS_MASK_0.offset(1), 0xff).unwrap();
    assert_eq!(p.read(sib, IA32_L2_QOS_MASK_0.offset(1)).unwrap(), 0xff);
    assert_eq!(p.read(other, IA32_L2_QOS_MASK_0.offset(1)).unwrap(), 0xffff);
    assert_write_eio(&mut p, 0, IA32_L2_QOS_MASK_0.offset(8), 0xff); // 8 L2 COS
}

#[test]
fn cdp_halves_the_classes_in_its_domain_only() {
    let mut p = broadwell();
    p.write(cpu(0), IA32_PQR_ASSOC, pqr_assoc(8, 0)).unwrap();
    p.write(cpu(0), IA32_PQR_ASSOC, 0).unwrap();
    p.write(cpu(0), IA32_L3_QOS_CFG, 1).unwrap();
    assert_eq!(
        p.read(cpu(2), IA32_L3_QOS_CFG).unwrap(),
        1,
        "CFG is per L3 domain"
    );
    assert_write_eio(&mut p, 2, IA32_PQR_ASSOC, pqr_assoc(8, 0));
    p.write(cpu(2), IA32_PQR_ASSOC, pqr_assoc(7, 0)).unwrap();
    p.write(cpu(1), IA32_PQR_ASSOC, pqr_assoc(8, 0)).unwrap(); // socket 1: CDP still off
    p.write(cpu(0), IA32_L3_QOS_CFG, 0).unwrap();
    p.write(cpu(2), IA32_PQR_ASSOC, pqr_assoc(8, 0)).unwrap();
}

#[test]
fn with_cdp_the_data_mask_decides_occupancy() {
    let mut p = broadwell();
    p.write(cpu(0), IA32_L3_QOS_CFG, 1).unwrap();
    // COS1: data mask (0xC92) 2 ways, code mask (0xC93) all ways, on socket 0.
    p.write(cpu(0), IA32_L3_QOS_MASK_0.offset(2), 0x3).unwrap();
    for c in [8, 10] {
        p.write(cpu(c), IA32_PQR_ASSOC, pqr_assoc(1, 0)).unwrap();
    }
    let occ =
        p.activity(cpu(8)).unwrap().occupancy_bytes + p.activity(cpu(10)).unwrap().occupancy_bytes;
    assert!(occ <= 2.0 * 1.75 * MIB + 1.0, "{occ}");
}

// ---------------------------------------------------------------------------------------------
// Counters, time, PMU

#[test]
fn mbm_counters_wrap_at_24_bits() {
    let mut p = broadwell();
    for c in [8, 10] {
        p.write(cpu(c), IA32_PQR_ASSOC, pqr_assoc(0, 2)).unwrap();
    }
    let upscale = 57344.0; // CPUID.(0FH,1):EBX of the E5-2650L v4
    let rate: f64 = [8, 10]
        .iter()
        .map(|&c| p.activity(cpu(c)).unwrap().traffic_bytes_per_s)
        .sum();
    let mut prev = qm_read(&mut p, 0, 2, EVT_MBM_TOTAL);
    let mut wraps = 0;
    for _ in 0..120 {
        p.advance(Duration::from_secs(1));
        let now = qm_read(&mut p, 0, 2, EVT_MBM_TOTAL);
        assert!(now < 1 << 24, "{now:#x}");
        if now < prev {
            wraps += 1;
        }
        prev = now;
    }
    let total_counts = rate * 120.0 / upscale;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let expected = (total_counts as u64) % (1 << 24);
    assert!(prev.abs_diff(expected) <= 1, "{prev} vs {expected}");
    assert!(
        wraps >= 1 && total_counts > f64::from(1u32 << 24),
        "{wraps} wraps"
    );
    // the other socket's counter of RMID 2 did not count (CPU 9 is still on RMID 0)
    assert_eq!(qm_read(&mut p, 1, 2, EVT_MBM_TOTAL), 0);
    let local = qm_read(&mut p, 0, 2, EVT_MBM_LOCAL);
    assert!(local > 0 && local < 1 << 24);
}

#[test]
fn pmu_counts_follow_the_model() {
    let mut p = broadwell();
    p.advance(Duration::from_millis(500));
    p.advance(Duration::from_millis(500));
    let a = *p.activity(cpu(2)).unwrap();
    let c = rdt_core::PmuSource::read(&mut p, cpu(2)).unwrap();
    #[allow(clippy::cast_precision_loss)]
    let (cycles, instr, misses) = (c.cycles as f64, c.instructions as f64, c.llc_misses as f64);
    assert!(
        (cycles - 1.7e9).abs() <= 1.0,
        "1.7 GHz from the brand string: {cycles}"
    );
    assert!((instr - a.ipc * 1.7e9).abs() <= 1.0);
    assert!((misses - a.traffic_bytes_per_s / 64.0).abs() <= 1.0);
    assert_eq!(p.now(), Duration::from_secs(1));
    assert!(rdt_core::PmuSource::read(&mut p, cpu(99)).is_none());
}

#[test]
fn mba_throttles_traffic_and_ipc() {
    let mut s = SimPlatform::builtin("skylake-sp").unwrap();
    let before = *s.activity(cpu(8)).unwrap();
    s.write(cpu(0), IA32_MBA_THRTL_0.offset(1), 50).unwrap();
    s.write(cpu(8), IA32_PQR_ASSOC, pqr_assoc(1, 0)).unwrap();
    let after = *s.activity(cpu(8)).unwrap();
    assert!((after.traffic_bytes_per_s - before.traffic_bytes_per_s / 2.0).abs() < 1.0);
    assert!(after.ipc < before.ipc);

    let mut m = SimPlatform::builtin("milan").unwrap();
    m.write(cpu(8), AMD_MBA_BW_0.offset(1), 8).unwrap(); // 8 × 1/8 GB/s on CPU 8's CCX
    m.write(cpu(8), IA32_PQR_ASSOC, pqr_assoc(1, 0)).unwrap();
    assert!((m.activity(cpu(8)).unwrap().traffic_bytes_per_s - 1.0e9).abs() < 1.0);
}

#[test]
fn amd_mba_limits_a_class_total_in_its_ccx_not_each_cpu() {
    // AMD APM Vol. 2 §19.4.5.2: the limit bounds the total of all threads with the COS in
    // the L3 QOS domain. Milan's default scenario: thrashers on CPUs 8-10 (CCX 1), each
    // wanting far more than 1 GB/s.
    let mut m = SimPlatform::builtin("milan").unwrap();
    let alone = m.activity(cpu(8)).unwrap().traffic_bytes_per_s;
    assert!(
        alone > 2.0e9,
        "each thrasher wants more than the limit: {alone}"
    );
    m.write(cpu(8), AMD_MBA_BW_0.offset(1), 8).unwrap(); // 1 GB/s for COS 1 in CCX 1
    for c in [8, 9] {
        m.write(cpu(c), IA32_PQR_ASSOC, pqr_assoc(1, 0)).unwrap();
    }
    let t = |m: &SimPlatform, c: u32| m.activity(cpu(c)).unwrap().traffic_bytes_per_s;
    // two CPUs of the class in one CCX share the 1 GB/s (per CPU it would be 2 GB/s)
    assert!(
        (t(&m, 8) + t(&m, 9) - 1.0e9).abs() < 1.0,
        "{} + {}",
        t(&m, 8),
        t(&m, 9)
    );
    assert!(
        (t(&m, 8) - t(&m, 9)).abs() < 1.0,
        "alike workloads share alike"
    );
    assert!((m.activity(cpu(8)).unwrap().throttle - 0.5e9 / alone).abs() < 1e-9);
    // a CPU of another class in the same CCX keeps its traffic
    assert!((t(&m, 10) - alone).abs() < 1.0);
}

// ---------------------------------------------------------------------------------------------
// The seed paper's scenario

#[test]
fn paper_masks_give_the_pipeline_its_cache_back() {
    // arrange: the default scenario; monitoring groups as `pqos -m "all:[2-7];all:[8-10]"`.
    let sim = SimHandle::new(broadwell());
    let mut msr = sim.clone();
    let upscale = 57344.0;
    let domains = [0, 1]; // CPU 0 is on L3 0, CPU 1 on L3 1
    for c in 2..=10 {
        msr.write(
            cpu(c),
            IA32_PQR_ASSOC,
            pqr_assoc(0, if c <= 7 { 1 } else { 2 }),
        )
        .unwrap();
    }
    let mbm = |msr: &mut SimHandle| {
        let t0: u64 = domains
            .iter()
            .map(|&d| qm_read(msr, d, 1, EVT_MBM_TOTAL))
            .sum();
        sim.advance(Duration::from_secs(1));
        let t1: u64 = domains
            .iter()
            .map(|&d| qm_read(msr, d, 1, EVT_MBM_TOTAL))
            .sum();
        t1 - t0 // no wrap: the pipeline moves < 1 GiB/s, a wrap takes ~900 GiB
    };
    let mbm_before = mbm(&mut msr);
    let pipe_before = occupancy_mib(&mut msr, &domains, 1, upscale);
    let thrash_before = occupancy_mib(&mut msr, &domains, 2, upscale);
    let ipc_before = sim.lock().activity(cpu(2)).unwrap().ipc;

    // act: pqos -e "llc:1=0xffe00;llc:2=0x00003" (every L3 domain), then
    // pqos -a "llc:1=2-7;llc:2=8-10" (read-modify-write keeps the RMID).
    for d in domains {
        msr.write(cpu(d), IA32_L3_QOS_MASK_0.offset(1), 0xffe00)
            .unwrap();
        msr.write(cpu(d), IA32_L3_QOS_MASK_0.offset(2), 0x00003)
            .unwrap();
    }
    for c in 2..=10 {
        let old = msr.read(cpu(c), IA32_PQR_ASSOC).unwrap();
        let cos = if c <= 7 { 1 } else { 2 };
        msr.write(cpu(c), IA32_PQR_ASSOC, (old & 0x3ff) | (cos << 32))
            .unwrap();
    }
    let pipe_after = occupancy_mib(&mut msr, &domains, 1, upscale);
    let thrash_after = occupancy_mib(&mut msr, &domains, 2, upscale);
    let ipc_after = sim.lock().activity(cpu(2)).unwrap().ipc;

    // assert: the paper's story (23 MB -> 4.5 MB, back to an isolated 11 ways).
    assert!(
        pipe_before < 6.0,
        "squeezed well below its 24 MiB: {pipe_before}"
    );
    assert!(
        thrash_before > 60.0,
        "thrasher holds most of 2 × 35 MiB: {thrash_before}"
    );
    assert!(
        pipe_after > 23.5,
        "whole 24 MiB working set fits in 11 ways: {pipe_after}"
    );
    assert!(
        thrash_after <= 2.0 * 2.0 * 1.75,
        "at most 2 ways per domain: {thrash_after}"
    );
    assert!(ipc_after > 1.6 * ipc_before, "{ipc_before} -> {ipc_after}");

    // the pipeline's memory bandwidth (MBM total) drops with its miss rate (0.86 -> 0.05)
    let mbm_after = mbm(&mut msr);
    assert!(
        mbm_after > 0 && mbm_after * 10 < mbm_before,
        "{mbm_before} -> {mbm_after}"
    );
}

#[test]
fn milan_keeps_pipeline_and_thrasher_in_different_ccx() {
    let p = SimPlatform::builtin("milan").unwrap();
    let pipe = p.activity(cpu(2)).unwrap();
    assert!(
        (pipe.occupancy_bytes - 4.0 * MIB).abs() < 1.0,
        "CCX 0 holds only idle CPUs besides"
    );
}

#[test]
fn scenario_changes_move_occupancy_and_reject_missing_cpus() {
    let mut p = broadwell();
    let s: Scenario = r#"{"workloads":[{"cpus":"0","working_set_mib":8,"traffic_mibps":100}]}"#
        .parse()
        .unwrap();
    p.set_scenario(&s).unwrap();
    assert!((p.activity(cpu(0)).unwrap().occupancy_bytes - 8.0 * MIB).abs() < 1.0);
    let bad: Scenario = r#"{"workloads":[{"cpus":"60","working_set_mib":8,"traffic_mibps":1}]}"#
        .parse()
        .unwrap();
    let e = p.set_scenario(&bad).unwrap_err();
    assert!(
        e.to_string().contains("workloads[0].cpus") && e.to_string().contains("60"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// State

fn registers(p: &mut SimPlatform) -> Vec<u64> {
    let mut v = Vec::new();
    for c in 0..56 {
        for addr in [IA32_PQR_ASSOC, IA32_QM_EVTSEL, IA32_L3_QOS_CFG] {
            v.push(p.read(cpu(c), addr).unwrap());
        }
        for n in 0..16 {
            v.push(p.read(cpu(c), IA32_L3_QOS_MASK_0.offset(n)).unwrap());
        }
    }
    v
}

#[test]
fn state_round_trip_keeps_registers_counters_clock_and_scenario() {
    // arrange
    let mut a = broadwell();
    a.write(cpu(1), IA32_L3_QOS_CFG, 1).unwrap();
    a.write(cpu(0), IA32_L3_QOS_MASK_0.offset(1), 0xffe00)
        .unwrap();
    a.write(cpu(3), IA32_PQR_ASSOC, pqr_assoc(1, 7)).unwrap();
    a.write(cpu(9), IA32_QM_EVTSEL, qm_evtsel(7, EVT_MBM_TOTAL))
        .unwrap();
    let mut s = Scenario::default();
    s.workloads[0].workload.ipc = 2.5;
    a.set_scenario(&s).unwrap();
    a.advance(Duration::from_millis(12_345));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.json");
    // act
    a.save_to(&path).unwrap();
    let mut b = broadwell();
    b.load_from(&path).unwrap();
    // assert
    assert_eq!(registers(&mut a), registers(&mut b));
    assert_eq!(b.now(), Duration::from_millis(12_345));
    assert_eq!(b.scenario(), a.scenario());
    for (c, r) in [(1, 7), (0, 0), (1, 0)] {
        for e in [EVT_LLC_OCCUPANCY, EVT_MBM_TOTAL, EVT_MBM_LOCAL] {
            assert_eq!(qm_read(&mut a, c, r, e), qm_read(&mut b, c, r, e));
        }
    }
    assert_eq!(
        rdt_core::PmuSource::read(&mut a, cpu(3)),
        rdt_core::PmuSource::read(&mut b, cpu(3))
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().count() == 1,
        "no temp file left"
    );
    assert!(a.save_state().contains("\"0xffe00\""));
}

#[test]
fn state_of_another_model_or_garbage_is_refused() {
    let a = broadwell();
    let mut m = SimPlatform::builtin("milan").unwrap();
    assert!(matches!(
        m.restore_state(&a.save_state()),
        Err(SimError::StateMismatch { .. })
    ));
    let mut b = broadwell();
    assert!(matches!(
        b.restore_state("{"),
        Err(SimError::StateFormat { .. })
    ));
    let bad = a.save_state().replacen("\"0xfffff\"", "\"0xf0f0f\"", 1);
    assert!(matches!(
        b.restore_state(&bad),
        Err(SimError::StateInvalid { .. })
    ));
    assert!(matches!(
        b.load_from("/nonexistent/sim.json"),
        Err(SimError::Io { op: "read", .. })
    ));
}

#[test]
fn handle_clones_share_one_platform_and_count_accesses() {
    let h = SimHandle::new(broadwell());
    let mut a = h.clone();
    let mut b = h.clone();
    a.write(cpu(0), IA32_L3_QOS_MASK_0.offset(4), 0xff).unwrap();
    assert_eq!(b.read(cpu(2), IA32_L3_QOS_MASK_0.offset(4)).unwrap(), 0xff);
    let _ = b.read(cpu(0), MsrAddr::new(0x123));
    assert_eq!(h.msr_accesses(), (2, 1));
    h.advance(Duration::from_secs(2));
    assert_eq!(h.lock().now(), Duration::from_secs(2));
    assert!(rdt_core::PmuSource::read(&mut a, cpu(0)).unwrap().cycles > 0);
}

// ---------------------------------------------------------------------------------------------
// The MSR backend of rdt-msr, run unchanged against the model

mod with_msr_backend {
    use rdt_core::{
        AllocReset, Backend, BackendExt, CacheBitmask, CatClass, CatMask, CatResource, ClassId,
        CpuSet, FeatureSetting, MbaClass, MbaLimit, MonEvents,
    };
    use rdt_msr::MsrBackend;

    use super::*;

    fn backend(model: &str) -> (SimHandle, MsrBackend<SimHandle, SimHandle>) {
        let p = SimPlatform::builtin(model).unwrap();
        let (caps, topo) = (p.capabilities().clone(), p.topology().clone());
        let sim = SimHandle::new(p);
        let b = MsrBackend::new(sim.clone(), caps, topo, sim.clone()).unwrap();
        (sim, b)
    }

    fn class(n: u32, mask: u64) -> CatClass {
        CatClass {
            class: ClassId::new(n),
            mask: CatMask::Unified(CacheBitmask::new(mask).unwrap()),
        }
    }

    #[test]
    fn paper_commands_through_the_backend_move_occupancy() {
        // arrange
        let (sim, mut b) = backend("broadwell-ep");
        let events = MonEvents::PQOS_ALL | MonEvents::MBM_TOTAL;
        let pipe = b.start_monitoring(&"2-7".parse().unwrap(), events).unwrap();
        let thrash = b
            .start_monitoring(&"8-10".parse().unwrap(), events)
            .unwrap();
        b.poll().unwrap();
        let before = (
            b.values(pipe).unwrap().clone(),
            b.values(thrash).unwrap().clone(),
        );
        // act: pqos -e "llc:1=0xffe00;llc:2=0x00003"; pqos -a "llc:1=2-7;llc:2=8-10"
        for d in b.topology().l3_domains() {
            b.set_cat_classes(CatResource::L3, d, &[class(1, 0xffe00), class(2, 0x3)])
                .unwrap();
        }
        for c in 2..=10 {
            b.associate(cpu(c), ClassId::new(if c <= 7 { 1 } else { 2 }))
                .unwrap();
        }
        sim.advance(Duration::from_secs(1));
        b.poll().unwrap();
        let after = (
            b.values(pipe).unwrap().clone(),
            b.values(thrash).unwrap().clone(),
        );
        // assert
        let mib = |v: Option<u64>| {
            #[allow(clippy::cast_precision_loss)]
            let x = v.unwrap() as f64 / MIB;
            x
        };
        assert!(mib(before.0.llc_occupancy_bytes) < 6.0);
        assert!(mib(after.0.llc_occupancy_bytes) > 23.5);
        assert!(mib(before.1.llc_occupancy_bytes) > 60.0);
        assert!(mib(after.1.llc_occupancy_bytes) <= 7.0);
        let ipc = after.0.ipc().unwrap();
        assert!(
            (ipc - 1.714).abs() < 0.01,
            "pipeline IPC from the model: {ipc}"
        );
        assert!(after.1.mbm_total_delta_bytes.unwrap() > 60 * 1024 * 1024 * 1024 / 3);
        assert_eq!(b.class_of(cpu(9)).unwrap(), ClassId::new(2));
        b.stop_monitoring(pipe).unwrap();
        assert_eq!(b.rmid_of(cpu(2)).unwrap(), Some(Rmid::new(0)));
    }

    #[test]
    fn cdp_reset_and_bad_input_through_the_backend() {
        let (sim, mut b) = backend("broadwell-ep");
        let on = AllocReset {
            l3_cdp: FeatureSetting::On,
            ..AllocReset::default()
        };
        b.reset_allocation(&on).unwrap();
        assert!(b.capabilities().l3_cat.get().unwrap().cdp_enabled);
        assert_eq!(sim.lock().read(cpu(1), IA32_L3_QOS_CFG).unwrap(), 1);
        let cdp = CatClass {
            class: ClassId::new(1),
            mask: CatMask::Cdp {
                data: CacheBitmask::new(0xff).unwrap(),
                code: CacheBitmask::new(0xf00).unwrap(),
            },
        };
        b.set_cat_classes(CatResource::L3, CacheDomain::new(0), &[cdp])
            .unwrap();
        assert_eq!(
            sim.lock()
                .read(cpu(0), IA32_L3_QOS_MASK_0.offset(2))
                .unwrap(),
            0xff
        );
        assert_eq!(
            sim.lock()
                .read(cpu(0), IA32_L3_QOS_MASK_0.offset(3))
                .unwrap(),
            0xf00
        );
        assert!(
            b.associate(cpu(2), ClassId::new(8)).is_err(),
            "8 classes with CDP on"
        );
        let off = AllocReset {
            l3_cdp: FeatureSetting::Off,
            ..AllocReset::default()
        };
        b.reset_allocation(&off).unwrap();
        b.associate(cpu(2), ClassId::new(8)).unwrap();
        let bad = class(1, 0xf0f);
        assert!(
            b.set_cat_classes(CatResource::L3, CacheDomain::new(0), &[bad])
                .is_err()
        );
        let all: CpuSet = "0-55".parse().unwrap();
        assert!(b.start_monitoring(&all, MonEvents::LLC_OCCUPANCY).is_ok());
    }

    #[test]
    fn mba_through_the_backend_on_skylake_and_milan() {
        let (sim, mut b) = backend("skylake-sp");
        let set = [MbaClass {
            class: ClassId::new(1),
            limit: MbaLimit::Percent(70),
        }];
        let applied = b.set_mba_classes(CacheDomain::new(0), &set).unwrap();
        assert_eq!(applied[0].limit, MbaLimit::Percent(70));
        assert_eq!(
            sim.lock().read(cpu(0), IA32_MBA_THRTL_0.offset(1)).unwrap(),
            30
        );

        let (sim, mut b) = backend("milan");
        let set = [MbaClass {
            class: ClassId::new(1),
            limit: MbaLimit::AmdUnits(8),
        }];
        b.set_mba_classes(CacheDomain::new(1), &set).unwrap();
        b.associate(cpu(8), ClassId::new(1)).unwrap();
        let t = sim.lock().activity(cpu(8)).unwrap().traffic_bytes_per_s;
        assert!((t - 1.0e9).abs() < 1.0, "{t}");
    }
}

// ---------------------------------------------------------------------------------------------
// Properties

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// One register write as a backend (or a buggy tool) might issue it.
    #[derive(Clone, Debug)]
    enum Op {
        Mask { cpu: u32, cos: u32, mask: u64 },
        Assoc { cpu: u32, cos: u32, rmid: u32 },
        Cdp { cpu: u32, on: bool },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u32..56, 0u32..17, 0u64..0x20_0000).prop_map(|(cpu, cos, mask)| Op::Mask {
                cpu,
                cos,
                mask
            }),
            (0u32..56, 0u32..17, 0u32..114).prop_map(|(cpu, cos, rmid)| Op::Assoc {
                cpu,
                cos,
                rmid
            }),
            (0u32..56, any::<bool>()).prop_map(|(cpu, on)| Op::Cdp { cpu, on }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever is written (accepted or faulted), no L3 domain holds more than its
        /// capacity, no CPU more than its working set, and masks always read back valid.
        #[test]
        fn occupancy_never_exceeds_capacity_or_working_set(ops in proptest::collection::vec(op(), 1..40)) {
            let mut p = broadwell();
            for o in ops {
                let _ = match o {
                    Op::Mask { cpu: c, cos, mask } => p.write(cpu(c), IA32_L3_QOS_MASK_0.offset(cos), mask),
                    Op::Assoc { cpu: c, cos, rmid } => p.write(cpu(c), IA32_PQR_ASSOC, pqr_assoc(cos, rmid)),
                    Op::Cdp { cpu: c, on } => p.write(cpu(c), IA32_L3_QOS_CFG, u64::from(on)),
                };
            }
            for d in p.topology().l3_domains() {
                let cpus = p.topology().cpus_in_l3(d);
                let total: f64 = cpus.iter().map(|c| p.activity(c).unwrap().occupancy_bytes).sum();
                prop_assert!(total <= 35.0 * MIB + 1.0, "{total}");
                for c in cpus.iter() {
                    let ws = p.scenario().workload_of(c).working_set_bytes;
                    prop_assert!(p.activity(c).unwrap().occupancy_bytes <= ws + 1e-6);
                }
                let first = cpus.first().unwrap();
                for n in 0..16 {
                    let m = p.read(first, IA32_L3_QOS_MASK_0.offset(n)).unwrap();
                    prop_assert!(m != 0 && m <= 0xf_ffff && (m >> m.trailing_zeros()).wrapping_add(1) & (m >> m.trailing_zeros()) == 0);
                }
            }
        }

        #[test]
        fn scenario_text_round_trips(
            ws in 0.0f64..4096.0, traffic in 0.0f64..50_000.0, local in 0.0f64..=1.0,
            ipc in 0.01f64..16.0, util in 0.0f64..=1.0, lo in 0u32..50, len in 0u32..8,
        ) {
            let text = format!(
                r#"{{"workloads":[{{"cpus":"{lo}-{}","working_set_mib":{ws},"traffic_mibps":{traffic},
                    "local_fraction":{local},"ipc":{ipc},"utilization":{util}}}]}}"#,
                lo + len
            );
            let s: Scenario = text.parse().unwrap();
            let back: Scenario = s.to_string().parse().unwrap();
            prop_assert_eq!(back.workloads[0].cpus.clone(), s.workloads[0].cpus.clone());
            let (a, b) = (&back.workloads[0].workload, &s.workloads[0].workload);
            prop_assert!((a.working_set_bytes - b.working_set_bytes).abs() <= 1e-6 * b.working_set_bytes.max(1.0));
            prop_assert!((a.traffic_bytes_per_s - b.traffic_bytes_per_s).abs() <= 1e-6 * b.traffic_bytes_per_s.max(1.0));
            prop_assert_eq!((a.local_fraction, a.ipc, a.utilization), (b.local_fraction, b.ipc, b.utilization));
        }
    }
}

#[test]
fn scenario_files_are_read_and_missing_ones_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    std::fs::write(
        &path,
        r#"{"workloads":[{"cpus":"4","working_set_mib":2,"traffic_mibps":5}]}"#,
    )
    .unwrap();
    let s = Scenario::from_path(&path).unwrap();
    assert_eq!(s.workloads[0].cpus.to_string(), "4");
    let missing = dir.path().join("nope.json");
    let e = Scenario::from_path(&missing).unwrap_err();
    assert!(e.to_string().contains("nope.json"), "{e}");
}

#[test]
fn rmid_snc_config_is_kept_in_the_state_and_a_bad_saved_value_refused() {
    // arrange: the SNC2 model, legacy ("local") mode written on package 1's first CPU
    let model = "sapphire-rapids-snc2";
    let mut sim = SimHandle::new(SimPlatform::builtin(model).unwrap());
    let last = cpu(u32::try_from(sim.lock().topology().cpus().len()).unwrap() - 1);
    let reg = rdt_msr::regs::MSR_RMID_SNC_CONFIG;
    assert_eq!(sim.read(last, reg).unwrap(), 0, "Linux's sharing mode");
    sim.write(last, reg, 1).unwrap();
    // act
    let text = sim.lock().save_state();
    let mut other = SimHandle::new(SimPlatform::builtin(model).unwrap());
    other.lock().restore_state(&text).unwrap();
    // assert: the package written reads 1, the other one the model's 0
    assert_eq!(other.read(last, reg).unwrap(), 1);
    assert_eq!(other.read(cpu(0), reg).unwrap(), 0);
    // a bit beyond 0, or a package the model lacks, is refused
    for (field, value) in [(1, 2), (0, 99)] {
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["rmid_snc_config"][0][field] = value.into();
        let e = SimHandle::new(SimPlatform::builtin(model).unwrap())
            .lock()
            .restore_state(&json.to_string())
            .unwrap_err();
        assert!(e.to_string().contains("MSR_RMID_SNC_CONFIG"), "{e}");
    }
}
