//! All or nothing, also under SIGKILL: a failed write (`.sim/fail` `errno=EIO`) and a
//! process killed at a write (`signal=KILL`) at every write position of an allocation
//! change and of a reset, on both interfaces of a FUSE-mounted simulated platform. After a
//! failed run the registers or the resctrl tree equal the state before; after a killed
//! run, the next `pqos -s` rolls the change back from its journal and shows that state.

use std::collections::BTreeMap;
use std::path::Path;

use crate::util::mounted::{Mounted, MountedOs};
use crate::util::{Machine, Reaped, SKX_RDT};

/// The journals in the run directory of the platform at `root`.
fn journals(root: &Path) -> Vec<String> {
    let run = rdt_pqos::Paths::under(root).run;
    std::fs::read_dir(&run)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("txn-"))
                .collect()
        })
        .unwrap_or_default()
}

fn arm(root: &Path, line: &str) {
    std::fs::write(root.join(".sim/fail"), format!("clear\n{line}\n")).expect("arm a fault");
}

/// Runs `args` with the `n`th change of `target` failing (EIO), for n = 1, 2, ... until the
/// run succeeds; after every failed run the state equals the one before. Then kills the
/// process at each of those positions (after `back` brought the platform back to the state
/// before); the next `pqos -s` restores the state before. Returns the number of write
/// positions.
pub fn every_write_position<S: PartialEq + std::fmt::Debug>(
    m: &impl Machine,
    root: &Path,
    target: &str,
    args: &[&str],
    state: impl Fn() -> S,
    back: impl Fn(),
) -> usize {
    let before = state();
    let mut positions = 0;
    for n in 1.. {
        arm(root, &format!("modify {target} nth={n} errno=EIO"));
        let run = m.pqos(args);
        if run.code == 0 {
            break; // fewer than n changes: the fault never fired, the change is made
        }
        let armed = std::fs::read_to_string(root.join(".sim/fail")).expect(".sim/fail");
        assert_eq!(
            armed, "",
            "write {n}: failed without the fault: {}",
            run.stderr
        );
        assert_eq!(state(), before, "a failure at write {n}: {}", run.stderr);
        assert!(
            journals(root).is_empty(),
            "write {n}: the journal is removed"
        );
        positions = n;
        assert!(n < 1000, "a run that never succeeds");
    }
    arm(root, "");
    let applied = state();
    assert_ne!(applied, before, "the change does something");
    // Back to the state before, through the library (the same undo a killed run gets).
    for n in 1..=positions {
        if state() != before {
            back();
            assert_eq!(state(), before, "back to the state before");
        }
        arm(root, &format!("modify {target} nth={n} signal=KILL"));
        let run = m.pqos(args);
        assert_eq!(run.code, -1, "killed at write {n}: {}", run.stderr);
        assert_eq!(
            journals(root).len(),
            1,
            "killed at write {n}: its journal stays"
        );
        let s = m.pqos(&["-s"]).ok();
        // a WARN: record of the library, on stdout as pqos's library logs
        assert!(
            s.warnings
                .contains("rolled back the allocation change of process"),
            "killed at write {n}: {}",
            s.raw_stdout
        );
        assert_eq!(state(), before, "killed at write {n}");
        assert!(
            journals(root).is_empty(),
            "killed at write {n}: rolled back: {}",
            s.stderr
        );
    }
    arm(root, "");
    positions
}

/// The allocation registers of a mounted model: every CPU's IA32_PQR_ASSOC, every CAT
/// and MBA register and CDP bit, from the model's saved state.
fn registers(m: &Mounted) -> serde_json::Value {
    let state: serde_json::Value =
        serde_json::from_str(&m.platform().lock().save_state()).expect("state JSON");
    let cpus: Vec<&serde_json::Value> = state["cpus"]
        .as_array()
        .expect("cpus")
        .iter()
        .map(|c| &c["pqr_assoc"])
        .collect();
    serde_json::json!({
        "pqr_assoc": cpus,
        "l3": state["l3"],
        "l2": state["l2"],
        "mba": state["mba"],
        "smba": state["smba"],
    })
}

/// Every control group of the resctrl tree with its files (`schemata`, `cpus_list`,
/// `tasks`, `mode`) and monitor groups. The root's `tasks` is left out: the kernel lists
/// every task outside the other groups there, the model only those written to it.
pub fn tree(m: &MountedOs) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut groups = vec![String::new()];
    groups.extend(
        m.list("")
            .into_iter()
            .filter(|n| !["info", "mon_groups", "mon_data"].contains(&n.as_str()))
            .filter(|n| m.resctrl(n).is_dir()),
    );
    for g in groups {
        for f in ["schemata", "cpus_list", "tasks", "mode"] {
            if g.is_empty() && f == "tasks" {
                continue;
            }
            let rel = if g.is_empty() {
                f.to_owned()
            } else {
                format!("{g}/{f}")
            };
            out.insert(rel.clone(), m.read(&rel));
        }
    }
    out.insert("mon_groups".into(), m.mon_groups().join(" "));
    out
}

#[test]
fn msr_every_write_of_classes_and_cores_fails_or_is_killed_and_is_undone() {
    let m = Mounted::new("skylake-sp");
    // 2 resources x 2 domains x 3 classes + 3 cores
    let args = [
        "-e",
        "llc:1=0x3;llc:2=0xc;llc:3=0x70;mba:1=50;mba:2=30;mba:3=20",
        "-a",
        "llc:1=2,3;llc:3=4",
    ];
    let n = every_write_position(
        &m,
        m.root(),
        "dev/**",
        &args,
        || registers(&m),
        || drop(m.pqos(&["-R"]).ok()),
    );
    assert_eq!(n, 15, "12 class registers and 3 IA32_PQR_ASSOC");
}

#[test]
fn msr_every_write_of_a_cdp_reset_fails_or_is_killed_and_is_undone() {
    let m = Mounted::new("broadwell-ep");
    let setup = || {
        m.pqos(&["-R", "l3cdp-off"]).ok();
        m.pqos(&["-e", "llc:1=0xf;llc:2=0xf0", "-a", "llc:1=2-5"])
            .ok();
    };
    setup();
    let before = registers(&m);
    let n = every_write_position(
        &m,
        m.root(),
        "dev/**",
        &["-R", "l3cdp-on"],
        || registers(&m),
        setup,
    );
    assert_eq!(
        n, 70,
        "32 L3 masks, 4 IA32_PQR_ASSOC, 2 QOS_CFG, then 32 masks in the CDP layout"
    );
    assert_eq!(registers(&m), before);
    // the lock-out sequence of the issue: killed between the two domains' QOS_CFG writes
    arm(m.root(), "msr 0xc81 nth=2 signal=KILL");
    assert_eq!(m.pqos(&["-R", "l3cdp-on"]).code, -1);
    let s = m.pqos(&["-s"]).ok();
    assert!(!s.stderr.contains("CDP is enabled in"), "{}", s.stderr);
    assert_eq!(registers(&m), before, "rolled back, not locked out");
    m.pqos(&["-R", "l3cdp-on"]).ok();
    m.pqos(&["-e", "llc:1d=0xf"]).ok();
}

#[test]
fn os_every_write_of_classes_cores_and_tasks_fails_or_is_killed_and_is_undone() {
    let m = MountedOs::new(SKX_RDT);
    let (a, b) = (Reaped::sleeper(), Reaped::sleeper());
    let assoc = format!("llc:1=2,3;llc:3=4;pid:2={},{}", a.pid(), b.pid());
    let args = [
        "-e",
        "llc:1=0x3;llc:2=0xc;llc:3=0x70;mba:1=50;mba:2=30;mba:3=20",
        "-a",
        &assoc,
    ];
    let back = || {
        m.pqos(&["-R"]).ok();
        for g in ["COS1", "COS2", "COS3"] {
            let _ = std::fs::remove_dir(m.resctrl(g));
        }
    };
    let n = every_write_position(&m, m.root(), "sys/fs/resctrl/**", &args, || tree(&m), back);
    // 3 mkdir, 6 schemata (a write per class and resource, both domains in one), 2 cpus_list
    // (CPUs 2 and 3 into COS1 in one write, CPU 4), 2 tasks
    assert_eq!(n, 13);
}

#[test]
fn os_every_write_of_a_reset_fails_or_is_killed_and_is_undone() {
    let m = MountedOs::new(SKX_RDT);
    let a = Reaped::sleeper();
    let setup = || {
        m.pqos(&[
            "-e",
            "llc:1=0xf;llc:2=0xf0;mba:1=50",
            "-a",
            &format!("llc:1=2,3;llc:2=4;pid:2={}", a.pid()),
        ])
        .ok();
    };
    setup();
    let positions = every_write_position(
        &m,
        m.root(),
        "sys/fs/resctrl/**",
        &["-R"],
        || tree(&m),
        setup,
    );
    assert_eq!(
        positions, 6,
        "the schemata of COS1 and COS2, their CPUs and the task back to the root"
    );
}
