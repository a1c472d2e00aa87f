//! `pqos` without `--sim` runs on the host as it is.

use std::process::Command;

use crate::util::{PQOS, Run};

#[test]
fn display_on_a_host_without_rdt_names_the_missing_cpuid_bits() {
    let explanation = rdt_pqos::explain_no_rdt(&rdt_pqos::NativeCpuid);
    let run: Run = Command::new(PQOS)
        .arg("-d")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run pqos")
        .into();
    match explanation {
        // This project's machines: VMs without RDT.
        Some(why) => {
            let run = run.failed();
            assert_eq!(
                run.stderr.lines().count(),
                1,
                "one sentence:\n{}",
                run.stderr
            );
            assert!(
                run.stderr.contains(&why),
                "names the CPUID bits:\n{}",
                run.stderr
            );
            assert!(
                run.stderr.contains("CPUID.(EAX=07H,ECX=0):EBX[12]"),
                "{}",
                run.stderr
            );
        }
        // A host with RDT: -d either shows it, or fails for lack of the msr module / root.
        None => assert!(
            run.code == 0 && run.stdout.starts_with("Hardware capabilities")
                || run.stderr.contains("msr"),
            "{run:?}"
        ),
    }
}

#[test]
fn os_interface_of_the_simulator_is_served_in_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run: Run = Command::new(PQOS)
        .args(["--iface=os", "-s", "--sim", "--sim-state"])
        .arg(dir.path().join("s.json"))
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run pqos")
        .into();
    let run = run.ok();
    assert!(run.stdout.contains("L3CA COS0 => MASK"), "{}", run.stdout);
}
