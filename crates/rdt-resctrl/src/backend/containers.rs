//! Monitor groups made for someone else's lifetime: a container's `mon_groups/<id>` (OCI
//! `enableMonitoring`, `rdt_pqos::oci`), which outlives the process that made it, unlike the
//! backend's `pqos-<pid>-<n>` groups that are reclaimed when their process ends. And the
//! reads a runtime's statistics need: a group's counters now and its `schemata`.

use rdt_core::{PmuSource, RequestError, RmidEvent, TaskId};

use super::ResctrlBackend;
use crate::fs::{is_pqos_mon_name, join};
use crate::schemata::Schemata;
use crate::telemetry::CounterSample;
use crate::{ResctrlError, counter::Counter};

/// `ENOSPC`: no RMID left for a new monitor group.
const ENOSPC: i32 = 28;

impl<P: PmuSource> ResctrlBackend<P> {
    /// Makes the monitor group `mon_groups/<name>` of control group `ctrl` (`""` for the
    /// root) unless it exists, and moves every thread of `task` into it (which keeps them in
    /// `ctrl`'s CLOSID if they were there, and puts them there otherwise). Returns the
    /// group's path relative to the root (`guaranteed/mon_groups/ctr-1`).
    ///
    /// The group is not this process's (it is never reclaimed when this process ends);
    /// [`ResctrlBackend::remove_mon_group`] takes it away.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`] for a name that cannot be a monitor group (empty, `/`,
    /// `.`, `..`, or pqos's own `pqos-<pid>-<n>` form), a control group that does not exist,
    /// or a platform without monitoring; [`ResctrlError::Io`] ("create (no RMID left)") when
    /// the kernel has no RMID left (`ENOSPC`); the root lock; a failed write.
    pub fn place_in_mon_group(
        &mut self,
        ctrl: &str,
        name: &str,
        task: TaskId,
    ) -> Result<String, ResctrlError> {
        let bad = name.is_empty()
            || name.contains('/')
            || name == "."
            || name == ".."
            || is_pqos_mon_name(name);
        if bad {
            return Err(RequestError::Unsupported(format!(
                "{name:?} cannot name a monitor group (empty, `/`, `.`, `..`, or pqos's own \
                 pqos-<pid>-<n> names)"
            ))
            .into());
        }
        if !self.caps.monitoring.is_present() {
            return Err(RequestError::Unsupported(
                "monitor groups: this platform has no CMT/MBM (no info/L3_MON)".into(),
            )
            .into());
        }
        let _g = self.lock.exclusive()?;
        if !ctrl.is_empty() && !self.fs.exists(ctrl) {
            return Err(RequestError::Unsupported(format!(
                "control group {ctrl:?} does not exist"
            ))
            .into());
        }
        let path = join(&join(ctrl, "mon_groups"), name);
        if !self.fs.exists(&path) {
            self.fs.mkdir(&path).map_err(|e| {
                let what = if e.raw_os_error() == Some(ENOSPC) {
                    "create (no RMID left)"
                } else {
                    "create"
                };
                ResctrlError::io(what, self.fs.path(&path), e)
            })?;
        }
        for tid in self.expand(&[task])? {
            self.move_task(&path, tid)?;
        }
        Ok(path)
    }

    /// Whether the group at `path` (relative to the root: `gold`, `gold/mon_groups/x`)
    /// exists now.
    #[must_use]
    pub fn has_group(&self, path: &str) -> bool {
        self.fs.is_dir(path)
    }

    /// Removes the monitor group at `path` (`CTRL/mon_groups/NAME` or `mon_groups/NAME`)
    /// when no task and no CPU is left in it; `false`, and nothing removed, when it is
    /// absent or still holds something.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`] for a path that is not a monitor group's (`.`, `..`
    /// and empty parts included); the root lock; a read or the `rmdir` fails.
    pub fn remove_mon_group(&mut self, path: &str) -> Result<bool, ResctrlError> {
        // CTRL/mon_groups/NAME or mon_groups/NAME, no `.`, `..` or empty part: a path from a
        // runtime's state file never leaves the resctrl root.
        let parts: Vec<&str> = path.split('/').collect();
        let is_mon = matches!(parts.len(), 2 | 3)
            && parts[parts.len() - 2] == "mon_groups"
            && parts
                .iter()
                .all(|p| !p.is_empty() && *p != "." && *p != "..");
        if !is_mon {
            return Err(RequestError::Unsupported(format!(
                "{path:?} is not a monitor group (CTRL/mon_groups/NAME)"
            ))
            .into());
        }
        let _g = self.lock.exclusive()?;
        if !self.fs.exists(path)
            || !self.fs.tasks(path)?.is_empty()
            || !self.fs.cpus(path)?.is_empty()
        {
            return Ok(false);
        }
        self.fs.rmdir(path)?;
        Ok(true)
    }

    /// The counters of group `group` (relative to the root: `""`, `guaranteed`,
    /// `guaranteed/mon_groups/ctr-1`) as its `mon_data` files read now, for every L3
    /// monitoring domain and every event the platform counts; a value that reads
    /// `Unavailable`, `Error` or `Unassigned` is left out. `bytes` are the kernel's:
    /// occupancy now, MBM traffic since the group was made. The files are read with the
    /// backend's counter reader (one positioned read each) and closed again.
    ///
    /// # Errors
    /// A file cannot be opened or read, or does not hold a count.
    pub fn read_group_counters(&self, group: &str) -> Result<Vec<CounterSample>, ResctrlError> {
        let events: Vec<RmidEvent> = RmidEvent::ALL
            .into_iter()
            .filter(|e| self.caps.supported_events().contains(e.flag()))
            .collect();
        let mut out = Vec::new();
        for &domain in &self.mon_domains {
            for &event in &events {
                let rel = join(
                    group,
                    &format!("mon_data/mon_L3_{domain:02}/{}", event.resctrl_name()),
                );
                if let Some(bytes) = Counter::open(&self.fs, &rel, 0, event)?.read()? {
                    out.push(CounterSample {
                        domain,
                        event,
                        bytes,
                    });
                }
            }
        }
        Ok(out)
    }

    /// The `schemata` of control group `group` (`""` for the root).
    ///
    /// # Errors
    /// The file cannot be read or does not parse.
    pub fn group_schemata(&self, group: &str) -> Result<Schemata, ResctrlError> {
        self.read_schemata(group)
    }
}
