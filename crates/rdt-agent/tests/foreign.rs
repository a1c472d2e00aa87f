//! A controller policy whose best-effort workload is named like a resctrl group another
//! tool made (`kube`) is refused at start, naming the class, the group and that another
//! tool owns it; the group is left as it was (before, the controller took it over). On a
//! FUSE-mounted simulated skylake-sp; needs root and /dev/fuse.

use std::process::Command;

mod support;

const AGENT: &str = env!("CARGO_BIN_EXE_rdt-agent");

#[test]
fn a_policy_naming_another_tools_group_is_refused_and_the_group_left_alone() {
    let m = support::mount_with_foreign_group();
    let kube = support::foreign_group(&m);
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("p.toml");
    std::fs::write(
        &policy,
        "[[protected]]\nname = \"pipeline\"\ncpus = \"2-7\"\ntarget = { ipc = 1.6 }\n\
         [[best_effort]]\nname = \"kube\"\ncpus = \"8-10\"\nmin_ways = 2\n",
    )
    .expect("policy");
    let out = Command::new(AGENT)
        .arg("--policy")
        .arg(&policy)
        .arg("--sysroot")
        .arg(m.root())
        .args(["--iface", "os", "--duration", "1"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("\"kube\"") && err.contains("resctrl group `kube` belongs to another tool"),
        "{err}"
    );
    assert_eq!(
        support::foreign_group(&m),
        kube,
        "another tool's group as it was"
    );
}
