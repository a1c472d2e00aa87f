//! Host tasks in simulated groups: activity from their real CPU time (module docs of
//! [`super`], "Host tasks").
//!
//! A host thread written to a group's `tasks` is followed from then on: at most every
//! [`HOST_SAMPLE_PERIOD`] of the platform's clock (checked with the other workers, before
//! every file operation) its own `utime + stime` is read from `/proc/<tid>/task/<tid>/stat`
//! ([`rdt_host::proc::ProcFs::thread_cpu_ticks`]: a process id's `/proc/<pid>/stat` would
//! be all its threads'), and the CPU time since the last sample is charged to the group it
//! is in now: [`SimPlatform::charge_host_task`] turns "busy `u` of the last `dt` seconds"
//! into occupancy of its RMID, MBM bytes and PMU counts with the workload model
//! ([`crate::model`], "Host tasks"). A thread that has exited is forgotten, as the kernel
//! drops it from every `tasks` file.
//!
//! A thread a followed process starts later joins its creator's group, as the kernel's
//! `copy_process` gives it its creator's closid and rmid. `/proc` does not say which thread
//! created it, so at each sample a thread of a followed process that was not there when the
//! process was last looked at (when its first thread was followed, or the last sample) is
//! put in the group of the process's threads in groups, when that is one group, and
//! followed; where they are in several groups it stays in the root, as a thread never
//! written anywhere.

use std::collections::BTreeSet;
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
                let Ok(ticks) = self.proc.thread_cpu_ticks(TaskId::new(id)) else {
                    continue;
                };
                self.host.insert(id, HostSample { ticks, at: p.now() });
                if let Some((tgid, threads)) = self.process_threads(id) {
                    self.host_threads.entry(tgid).or_insert(threads);
                }
            }
            p.follow_host_task(id);
        }
    }

    /// The threads of `task`'s process, with the process id; `None` when it has exited.
    fn process_threads(&self, task: u32) -> Option<(u32, BTreeSet<u32>)> {
        let tgid = self.proc.thread_group(TaskId::new(task)).ok()?;
        let threads = self.proc.threads(tgid).ok()?;
        Some((tgid.get(), threads.iter().map(|t| t.get()).collect()))
    }

    /// Puts the threads followed processes started since they were last looked at (at the
    /// sample at `since` or later) in their process's group (module docs) and follows them:
    /// they were in it from their start, so all their CPU time counts, spread over the time
    /// since that sample.
    fn adopt_new_threads(&mut self, p: &mut SimPlatform, since: Duration) {
        let mut seen = BTreeSet::new();
        let mut adopted = Vec::new();
        let followed: Vec<u32> = self.host.keys().copied().collect();
        for id in followed {
            let Some((tgid, threads)) = self.process_threads(id) else {
                continue;
            };
            if !seen.insert(tgid) {
                continue;
            }
            let known = self.host_threads.insert(tgid, threads.clone());
            let mut groups = threads.iter().filter_map(|t| self.tasks.get(t));
            let (Some(known), Some(&ids)) = (known, groups.next()) else {
                continue;
            };
            if groups.any(|other| *other != ids) {
                continue; // in several groups: the creator's is not known
            }
            adopted.extend(
                threads
                    .difference(&known)
                    .filter(|t| !self.tasks.contains_key(t) && !self.sim_tasks.contains(t))
                    .map(|&t| (t, ids)),
            );
        }
        self.host_threads.retain(|tgid, _| seen.contains(tgid));
        for (t, ids) in adopted {
            self.tasks.insert(t, ids);
            self.host.insert(
                t,
                HostSample {
                    ticks: 0,
                    at: since,
                },
            );
            p.follow_host_task(t);
        }
    }

    /// Charges every followed host task's CPU time since its last sample, when
    /// [`HOST_SAMPLE_PERIOD`] has passed since the last run.
    pub(super) fn sample_host_tasks(&mut self, p: &mut SimPlatform) {
        let now = p.now();
        if self.host.is_empty() || now < self.host_sampled + HOST_SAMPLE_PERIOD {
            return;
        }
        let since = self.host_sampled;
        self.host_sampled = now;
        self.adopt_new_threads(p, since);
        let ids: Vec<u32> = self.host.keys().copied().collect();
        let domains: Vec<_> = self.hw.l3_domains.iter().map(|d| d.id).collect();
        for id in ids {
            let Ok(ticks) = self.proc.thread_cpu_ticks(TaskId::new(id)) else {
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

    /// This thread's id (`/proc/thread-self` is `PID/task/TID`).
    fn own_tid() -> u32 {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        link.file_name().unwrap().to_str().unwrap().parse().unwrap()
    }

    #[test]
    fn a_thread_started_by_a_task_in_a_group_joins_the_group() {
        // arrange: this thread in p0 (its process's other threads, there before, are not)
        let sim = SimHandle::new(
            SimPlatform::builtin("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal").unwrap(),
        );
        let mut fs = Resctrl::mount(sim.clone(), &MountOptions::default()).unwrap();
        let me = own_tid();
        fs.mkdir("p0").unwrap();
        fs.write("p0/tasks", 0, format!("{me}\n").as_bytes())
            .unwrap();
        // act: a thread started now keeps a CPU busy for 300 ms, then waits
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let busy = std::thread::spawn(move || {
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(300) {
                std::hint::spin_loop();
            }
            tx.send(own_tid()).unwrap();
            let _ = stop_rx.recv();
        });
        let new = rx.recv().unwrap();
        sim.advance(HOST_SAMPLE_PERIOD);
        fs.tick().unwrap();
        let tasks = String::from_utf8(fs.read("p0/tasks", 0, 4096).unwrap()).unwrap();
        let d = format!("mon_L3_{:02}", new % 2);
        let total = read_u64(&mut fs, &format!("p0/mon_data/{d}/mbm_total_bytes"));
        stop_tx.send(()).unwrap();
        busy.join().unwrap();
        // assert: in p0 beside its creator, and its CPU time counted there; the process's
        // main thread, there before, is not (other tests' threads started meanwhile are new
        // threads of this process too, and may be listed)
        let listed: Vec<u32> = tasks.lines().map(|l| l.parse().unwrap()).collect();
        assert!(listed.contains(&me) && listed.contains(&new), "{listed:?}");
        assert!(!listed.contains(&std::process::id()), "{listed:?}");
        assert!(total > 1 << 20, "{total} bytes");
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
