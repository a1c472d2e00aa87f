//! Host tasks in simulated groups: activity from their real CPU time (module docs of
//! [`super`], "Host tasks").
//!
//! A host thread written to a group's `tasks` is followed from then on: at most every
//! [`HOST_SAMPLE_PERIOD`] of the platform's clock (checked with the other workers, before
//! every file operation) its `utime + stime` is read from `/proc/<tid>/stat`
//! ([`rdt_host::proc::ProcFs::cpu_ticks`]), and the CPU time since the last sample is charged to the group it
//! is in now: [`SimPlatform::charge_host_task`] turns "busy `u` of the last `dt` seconds"
//! into occupancy of its RMID, MBM bytes and PMU counts with the workload model
//! ([`crate::model`], "Host tasks"). A thread that has exited is forgotten, as the kernel
//! drops it from every `tasks` file.

use std::time::Duration;

use rdt_core::TaskId;
use rdt_host::proc::USER_HZ;

use super::Resctrl;
use crate::SimPlatform;
use crate::num::u64_to_f64;

/// The least platform time between two samples of the host tasks' CPU time: `/proc` is read
/// at most ten times a simulated second, however many file operations there are.
pub const HOST_SAMPLE_PERIOD: Duration = Duration::from_millis(100);

/// A host task's CPU time at its last sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct HostSample {
    /// `utime + stime`, clock ticks.
    pub ticks: u64,
    /// The platform's clock then.
    pub at: Duration,
}

impl Resctrl {
    /// Starts following the host tasks written to a `tasks` file and not followed yet:
    /// their CPU time from now on counts, what they used before does not. Every followed
    /// task has PMU counts on the platform from then on (at 0 in a new process).
    pub(super) fn follow_host_tasks(&mut self, p: &mut SimPlatform) {
        let host: Vec<u32> = self
            .tasks
            .keys()
            .filter(|id| !self.sim_tasks.contains(id))
            .copied()
            .collect();
        for id in host {
            if !self.host.contains_key(&id) {
                let Ok(ticks) = self.proc.cpu_ticks(TaskId::new(id)) else {
                    continue;
                };
                self.host.insert(id, HostSample { ticks, at: p.now() });
            }
            p.follow_host_task(id);
        }
    }

    /// Charges every followed host task's CPU time since its last sample, when
    /// [`HOST_SAMPLE_PERIOD`] has passed since the last run.
    pub(super) fn sample_host_tasks(&mut self, p: &mut SimPlatform) {
        let now = p.now();
        if self.host.is_empty() || now < self.host_sampled + HOST_SAMPLE_PERIOD {
            return;
        }
        self.host_sampled = now;
        let ids: Vec<u32> = self.host.keys().copied().collect();
        let domains: Vec<_> = self.hw.l3_domains.iter().map(|d| d.id).collect();
        for id in ids {
            let Ok(ticks) = self.proc.cpu_ticks(TaskId::new(id)) else {
                self.host.remove(&id);
                p.forget_host_task(id);
                continue;
            };
            let prev = self.host.insert(id, HostSample { ticks, at: now });
            let Some(prev) = prev else { continue };
            let dt = now.saturating_sub(prev.at).as_secs_f64();
            let ids = self.tasks.get(&id).copied().unwrap_or_default();
            if dt <= 0.0 || domains.is_empty() {
                continue;
            }
            let used = u64_to_f64(ticks.saturating_sub(prev.ticks)) / u64_to_f64(USER_HZ);
            // The thread runs on some CPU of the host; on the model it is charged to one L3
            // domain, chosen by its id (`tid mod domains`), so that threads spread.
            let domain = domains[id as usize % domains.len()];
            let rmid = if self.mon_capable() { ids.rmid } else { 0 };
            p.charge_host_task(
                id,
                rdt_core::CacheDomain::new(domain),
                ids.closid,
                rmid,
                (used / dt).min(1.0),
                dt,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};

    use super::*;
    use crate::resctrl::MountOptions;
    use crate::vfs::Tree;
    use crate::{SimHandle, SimPlatform};

    /// A child that keeps a CPU busy; killed when dropped.
    struct Spinner(Child);

    impl Drop for Spinner {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn read_u64(fs: &mut Resctrl, path: &str) -> u64 {
        let text = fs.read(path, 0, 64).unwrap();
        String::from_utf8(text).unwrap().trim().parse().unwrap()
    }

    #[test]
    fn a_busy_host_task_in_a_group_fills_its_rmid_and_counts_instructions() {
        // arrange: a busy child in group p0, the clock following real time
        let sim = SimHandle::new(
            SimPlatform::builtin("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal").unwrap(),
        );
        let mut fs = Resctrl::mount(sim.clone(), &MountOptions::default()).unwrap();
        let child = Spinner(
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id();
        fs.mkdir("p0").unwrap();
        fs.mkdir("idle").unwrap();
        fs.write("p0/tasks", 0, format!("{pid}\n").as_bytes())
            .unwrap();
        // act: 400 ms of real and simulated time
        std::thread::sleep(Duration::from_millis(400));
        sim.advance(Duration::from_millis(400));
        fs.tick().unwrap();
        // assert
        let d = format!("mon_L3_{:02}", pid % 2);
        let occupancy = read_u64(&mut fs, &format!("p0/mon_data/{d}/llc_occupancy"));
        let total = read_u64(&mut fs, &format!("p0/mon_data/{d}/mbm_total_bytes"));
        assert!(occupancy > 1 << 20, "{occupancy} bytes");
        assert!(total > 1 << 20, "{total} bytes");
        let idle = read_u64(&mut fs, &format!("idle/mon_data/{d}/llc_occupancy"));
        assert_eq!(idle, 0);
        let pmu = sim.lock().task_pmu_counts(pid).unwrap();
        assert!(pmu.cycles > 0 && pmu.instructions > 0, "{pmu:?}");
        let ipc = u64_to_f64(pmu.instructions) / u64_to_f64(pmu.cycles);
        assert!(ipc > 1.0 && ipc < 1.5, "{ipc}");
        // a task that exits is forgotten
        drop(child);
        sim.advance(HOST_SAMPLE_PERIOD);
        fs.tick().unwrap();
        assert!(sim.lock().task_pmu_counts(pid).is_none());
    }
}
