//! Bad input: a clear error naming the offending token, a non-zero exit, and nothing written.

use crate::util::{Machine, Sim};

/// Runs `args` on a sim with the paper's allocation applied and asserts the run fails, its
/// error names `token`, and `pqos -s` prints exactly what it printed before.
#[track_caller]
fn rejected(model: &str, args: &[&str], token: &str) {
    let sim = Sim::new(model);
    sim.pqos(&["-e", "llc:1=0xf0"]).ok();
    sim.pqos(&["-a", "llc:1=2-3"]).ok();
    let before = sim.pqos(&["-s"]).ok().stdout;

    let run = sim.pqos(args).failed();
    assert!(
        run.stderr.contains(token),
        "error for {args:?} should name `{token}`:\n{}",
        run.stderr
    );
    assert!(
        run.stderr.lines().any(|l| l.starts_with("error: ")),
        "{}",
        run.stderr
    );
    assert_eq!(
        sim.pqos(&["-s"]).ok().stdout,
        before,
        "{args:?} changed the platform"
    );
}

#[test]
fn mask_wider_than_the_cbm() {
    rejected("broadwell-ep", &["-e", "llc:1=0x1fffff"], "0x1fffff");
    rejected("skylake-sp", &["-e", "llc:1=0xfff"], "0xfff"); // 11-bit CBM
}

#[test]
fn zero_mask() {
    rejected("broadwell-ep", &["-e", "llc:1=0"], "1=0");
}

#[test]
fn non_contiguous_mask_on_intel() {
    rejected("broadwell-ep", &["-e", "llc:1=0xf0f"], "0xf0f");
}

#[test]
fn class_beyond_the_class_count() {
    rejected("broadwell-ep", &["-e", "llc:16=0xf"], "16");
    rejected("broadwell-ep", &["-a", "llc:16=4"], "16");
    rejected("skylake-sp", &["-e", "mba:8=50"], "8"); // 8 MBA classes
}

#[test]
fn cpu_not_present() {
    rejected("broadwell-ep", &["-a", "llc:1=56"], "56");
}

#[test]
fn malformed_lists_and_definitions() {
    rejected("broadwell-ep", &["-a", "llc:1=2-"], "2-");
    rejected("broadwell-ep", &["-a", "llc:1=7-2x"], "7-2x");
    rejected("broadwell-ep", &["-e", "llc1="], "llc1=");
    rejected("broadwell-ep", &["-e", "llc:1=0xzz"], "0xzz");
    rejected("broadwell-ep", &["-e", "llc@9:1=0xf"], "9");
}

#[test]
fn one_bad_item_stops_the_good_ones_too() {
    // The first definition is valid, the second is not: neither may be written.
    rejected(
        "broadwell-ep",
        &["-e", "llc:2=0xff;llc:3=0x100001"],
        "0x100001",
    );
    rejected("broadwell-ep", &["-a", "llc:2=4-5;llc:3=99"], "99");
}

#[test]
fn resources_the_platform_lacks() {
    rejected("broadwell-ep", &["-e", "mba:1=50"], "mba");
    rejected("broadwell-ep", &["-e", "l2:1=0xf"], "l2");
    rejected("broadwell-ep", &["-e", "llc:1d=0xf"], "1d");
}

#[test]
fn unknown_event_and_core_in_two_groups() {
    rejected("broadwell-ep", &["-m", "foo:1", "-t", "1"], "foo");
    rejected(
        "broadwell-ep",
        &["-m", "llc:[0-3];mbl:0", "-t", "1"],
        "core 0",
    );
    rejected("broadwell-ep", &["-m", "all:99", "-t", "1"], "99");
}
