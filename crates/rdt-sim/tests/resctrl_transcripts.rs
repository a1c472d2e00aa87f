//! The resctrl spec's worked transcripts (§15) and acceptance list (§19), driven over a real
//! FUSE mount of the simulated platform with plain file operations (`std::fs`), with real
//! short-lived host processes as the tasks: bytes read, errnos and `last_cmd_status` text
//! compared with the spec. The same transcripts also run in-process in the crate's unit tests.

use rdt_sim::fs::testing::TestMount;
use rdt_sim::fs::{MountConfig, SimClock};
use rdt_sim::resctrl::transcripts::{self, HostTasks, OverFiles};
use rdt_sim::{SimHandle, SimPlatform};

#[test]
fn spec_transcripts_hold_over_the_mounted_filesystem() {
    let tasks = HostTasks::spawn().expect("spawn host tasks");
    let ctx = tasks.ctx();
    let all = transcripts::all(&ctx);
    assert!(all.len() >= 10, "the transcripts are there: {}", all.len());
    let mut failures = Vec::new();
    for t in &all {
        let sim = SimHandle::new(SimPlatform::builtin(t.model).expect("built-in model"));
        let config = MountConfig {
            resctrl: Some(t.options.parse().expect("mount options")),
            clock: SimClock::Manual,
        };
        let m = TestMount::new(sim.clone(), config);
        let mut ops = OverFiles {
            resctrl: m.path("sys/fs/resctrl"),
            dev_cpu: m.path("dev/cpu"),
            sim,
        };
        if let Err(e) = transcripts::run(t, &mut ops) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} transcript(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
