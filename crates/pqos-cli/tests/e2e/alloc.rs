//! Allocation beyond the paper: CDP, L2 CAT, MBA, and AMD's per-CCX L3 domains.
//!
//! Each scenario is written once for any [`Machine`] (the `..._on` functions) and run here on
//! the simulated platform (`pqos --sim`); `sysroot.rs` runs them again on the same models
//! FUSE-mounted (`pqos --iface=msr --sysroot DIR`).

use crate::eqnice;
use crate::util::{Machine, Sim};

#[test]
fn cdp_reset_halves_classes_and_masks_have_data_and_code() {
    cdp_reset_halves_classes_and_masks_have_data_and_code_on(&Sim::new("broadwell-ep"), || {});
}

/// `-R l3cdp-on`, a data and a code mask, `-R l3cdp-off` on a Broadwell-EP; `while_on` runs
/// with CDP on and COS3 set, for what only one machine can check.
pub fn cdp_reset_halves_classes_and_masks_have_data_and_code_on(
    m: &dyn Machine,
    while_on: impl FnOnce(),
) {
    let d = m.pqos(&["-d"]).ok().stdout;
    assert!(
        d.contains("CDP: disabled") && d.contains("Num COS: 16"),
        "{d}"
    );

    eqnice!(
        "Allocation reset successful\n",
        m.pqos(&["-R", "l3cdp-on"]).ok().stdout
    );
    let d = m.pqos(&["-d"]).ok().stdout;
    assert!(
        d.contains("CDP: enabled") && d.contains("Num COS: 8"),
        "{d}"
    );

    let e = m.pqos(&["-e", "llc:3d=0x0f00,3c=0xf000"]).ok().stdout;
    // pqos applies each COSSPEC in turn and prints the class after each.
    eqnice!(
        "SOCKET 0 L3CA COS3 => DATA 0xf00,CODE 0xfffff\n\
         SOCKET 1 L3CA COS3 => DATA 0xf00,CODE 0xfffff\n\
         SOCKET 0 L3CA COS3 => DATA 0xf00,CODE 0xf000\n\
         SOCKET 1 L3CA COS3 => DATA 0xf00,CODE 0xf000\n\
         Allocation configuration altered.\n",
        e
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(
        s.contains("\n    L3CA COS3 => DATA 0xf00, CODE 0xf000\n"),
        "{s}"
    );
    assert!(!s.contains("COS8 =>"), "only 8 classes with CDP on:\n{s}");

    // COS8 exists without CDP but not with it.
    let bad = m.pqos(&["-e", "llc:8=0xf"]).failed();
    assert!(bad.stderr.contains("COS8"), "{}", bad.stderr);
    while_on();

    eqnice!(
        "Allocation reset successful\n",
        m.pqos(&["-R", "l3cdp-off"]).ok().stdout
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(
        s.contains("\n    L3CA COS3 => MASK 0xfffff\n"),
        "reset restores full masks:\n{s}"
    );
    assert!(s.contains("\n    L3CA COS15 => MASK 0xfffff\n"), "{s}");
}

#[test]
fn l2_cat_on_sapphire_rapids_is_per_l2_id() {
    l2_cat_on_sapphire_rapids_is_per_l2_id_on(&Sim::new("sapphire-rapids"));
}

/// L2 masks by L2 ID on a Sapphire Rapids.
pub fn l2_cat_on_sapphire_rapids_is_per_l2_id_on(m: &dyn Machine) {
    let d = m.pqos(&["-d"]).ok().stdout;
    assert!(d.contains("            L2 CAT\n"), "{d}");

    let e = m.pqos(&["-e", "l2@0,1:1=0xf;l2@7:2=0xff00"]).ok().stdout;
    eqnice!(
        "L2ID 0 L2CA COS1 => MASK 0xf\n\
         L2ID 1 L2CA COS1 => MASK 0xf\n\
         L2ID 7 L2CA COS2 => MASK 0xff00\n\
         Allocation configuration altered.\n",
        e
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    let l2_block = |id: u32| {
        s.split("L2CA COS definitions for L2ID ")
            .find(|b| b.starts_with(&format!("{id}:")))
            .unwrap_or_else(|| panic!("L2ID {id} in\n{s}"))
            .to_owned()
    };
    assert!(l2_block(1).contains("    L2CA COS1 => MASK 0xf\n"));
    assert!(l2_block(7).contains("    L2CA COS2 => MASK 0xff00\n"));
    assert!(
        l2_block(2).contains("    L2CA COS1 => MASK 0xffff\n"),
        "L2ID 2 untouched"
    );
}

#[test]
fn intel_mba_is_rounded_to_the_granularity() {
    intel_mba_is_rounded_to_the_granularity_on(&Sim::new("skylake-sp"));
}

/// MBA classes on a Skylake-SP.
pub fn intel_mba_is_rounded_to_the_granularity_on(m: &dyn Machine) {
    let e = m.pqos(&["-e", "mba:1=50;mba@1:2=75"]).ok().stdout;
    // Skylake-SP: max delay 90, so 10% steps; pqos rounds half up (75 -> 80).
    eqnice!(
        "SOCKET 0 MBA COS1 => 50% requested, 50% applied\n\
         SOCKET 1 MBA COS1 => 50% requested, 50% applied\n\
         SOCKET 1 MBA COS2 => 75% requested, 80% applied\n\
         Allocation configuration altered.\n",
        e
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    assert!(s.contains("L3CA/MBA COS definitions for Socket 1:"), "{s}");
    assert!(s.contains("\n    MBA COS2 => 80% available\n"), "{s}");
    let bad = m.pqos(&["-e", "mba:1=0"]).failed();
    assert!(bad.stderr.contains("mba:1=0"), "{}", bad.stderr);
}

#[test]
fn milan_has_one_l3_domain_per_ccx_and_amd_mba_units() {
    milan_has_one_l3_domain_per_ccx_and_amd_mba_units_on(&Sim::new("milan"));
}

/// L3 masks and MBA by CCX on a Milan.
pub fn milan_has_one_l3_domain_per_ccx_and_amd_mba_units_on(m: &dyn Machine) {
    let e = m.pqos(&["-e", "llc@0,15:1=0xff;mba@3:1=256"]).ok().stdout;
    eqnice!(
        "Core Complex 0 L3CA COS1 => MASK 0xff\n\
         Core Complex 15 L3CA COS1 => MASK 0xff\n\
         Core Complex 3 MBA COS1 => 256 requested, 256 applied\n\
         Allocation configuration altered.\n",
        e
    );
    let s = m.pqos(&["-s"]).ok().stdout;
    let headers: Vec<&str> = s
        .lines()
        .filter(|l| l.contains("COS definitions for"))
        .collect();
    assert_eq!(headers.len(), 16, "16 CCX domains:\n{s}");
    assert_eq!(
        headers[0],
        "L3CA/MBA COS definitions for L3 Cluster (or Core Complex) 0:"
    );
    // Non-contiguous masks are fine on AMD.
    m.pqos(&["-e", "llc@1:2=0xf0f"]).ok();
    // Each CCX holds 8 CPUs: associating CPU 8 puts it in CCX 1.
    m.pqos(&["-a", "cos:2=8"]).ok();
    let s = m.pqos(&["-s"]).ok().stdout;
    let line = s
        .lines()
        .find(|l| l.starts_with("    Core 8, "))
        .expect("core 8");
    assert!(line.contains("L3ID 1 => COS2"), "{line}");
}

#[test]
fn reset_restores_every_class_and_core() {
    reset_restores_every_class_and_core_on(&Sim::new("skylake-sp"));
}

/// `-e`, `-a` and then `-R` on a Skylake-SP.
pub fn reset_restores_every_class_and_core_on(m: &dyn Machine) {
    let fresh = m.pqos(&["-s"]).ok().stdout;
    m.pqos(&["-e", "llc:1=0xf;mba:1=30"]).ok();
    m.pqos(&["-a", "core:1=0-3"]).ok();
    assert_ne!(m.pqos(&["-s"]).ok().stdout, fresh);
    eqnice!("Allocation reset successful\n", m.pqos(&["-R"]).ok().stdout);
    eqnice!(fresh, m.pqos(&["-s"]).ok().stdout);
}
