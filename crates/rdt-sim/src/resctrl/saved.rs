//! resctrl's state outside any process: [`ResctrlState`], what a [`Resctrl`] keeps that the
//! registers do not (groups, CLOSID and RMID allocation, limbo, tasks' ids, the MBM counter
//! state, `last_cmd_status`), so that the in-process resctrl of a persistent simulated
//! platform ([`crate::session`]) stays mounted, with its groups, from one run to the next.
//!
//! [`Resctrl::park`] takes it out of a mount without the unmount's register resets;
//! [`Resctrl::restore`] puts it back on the platform it was taken from (whose registers the
//! platform's own state restored). Nothing from the file is trusted: every index, id and
//! size is checked against the hardware profile before use, and a state that does not fit is
//! an `InvalidData` error, never a panic.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::sync::PoisonError;
use std::time::Duration;

use rdt_core::CpuSet;
use serde::{Deserialize, Serialize};

use super::hw::Event;
use super::mon::{ArchMbm, FsMbm};
use super::{Group, GroupKind, MOUNTED, Mode, MountOptions, ROOT, Resctrl, TaskIds};
use crate::SimHandle;

/// One group of a [`ResctrlState`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupState {
    name: String,
    /// The CTRL_MON parent of a MON group; `None` for a CTRL_MON group (and the root).
    parent: Option<usize>,
    /// A CTRL_MON group's MON children, newest first.
    children: Vec<usize>,
    closid: u32,
    rmid: u32,
    /// `cpus_list` form.
    cpus: String,
    mode: String,
    mba_event: String,
}

/// One MBM counter's state: (L3 domain index, RMID, event, two values).
type CounterState = (usize, u32, String, u64, u64);

/// MBM counter states by (L3 domain index, RMID, event).
type CounterPairs = BTreeMap<(usize, u32, Event), (u64, u64)>;

/// What a mounted in-process resctrl keeps beyond the registers (module docs). Serialised
/// in the simulator's state file (`resctrl` field, [`crate::session::Saved`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResctrlState {
    /// The mount options (`cdp,mba_MBps`; empty for the defaults).
    options: String,
    /// By group id; `None` for a removed group's slot.
    groups: Vec<Option<GroupState>>,
    closid_used: Vec<bool>,
    /// Per resource name: per domain, per hardware index.
    ctrl_val: BTreeMap<String, Vec<Vec<u64>>>,
    mbps_val: Vec<Vec<u32>>,
    /// `(task id, CLOSID, RMID)`.
    tasks: Vec<(u32, u32, u32)>,
    sim_tasks: Vec<u32>,
    rmid_free: Vec<u32>,
    /// `(RMID, L3 domain indices where it is still dirty)`.
    limbo: Vec<(u32, Vec<usize>)>,
    limbo_due_ns: Option<u64>,
    threshold: u32,
    arch_mbm: Vec<CounterState>,
    fs_mbm: Vec<CounterState>,
    mbm_last_ns: u64,
    last_cmd: String,
    /// Host tasks' CPU time at their last sample, in clock ticks (`(task id, ticks,
    /// virtual ns of the sample)`), [`super::host`].
    #[serde(default)]
    host_cpu: Vec<(u32, u64, u64)>,
    /// BMEC, ABMC and io_alloc ([`super::abmc`]); absent in older files.
    #[serde(default)]
    amd: Option<super::abmc::AmdSaved>,
}

impl ResctrlState {
    /// The names of its control (`CTRL_MON`) groups other than the root, in group-id order:
    /// what a program made with `mkdir` in the mount's root.
    #[must_use]
    pub fn control_groups(&self) -> Vec<&str> {
        self.groups
            .iter()
            .flatten()
            .filter(|g| g.parent.is_none() && !g.name.is_empty())
            .map(|g| g.name.as_str())
            .collect()
    }
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("saved resctrl state: {}", what.into()),
    )
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn event_named(name: &str) -> io::Result<Event> {
    Event::ALL
        .into_iter()
        .find(|e| e.name() == name)
        .ok_or_else(|| invalid(format!("unknown event `{name}`")))
}

impl Resctrl {
    /// Takes the state out of this mount and forgets the mount **without** the unmount's
    /// effects (registers, CDP and tasks stay as they are): for a persistent platform whose
    /// registers are saved with it, as if the process serving the mount went away while the
    /// "kernel" kept running. Use [`Resctrl::restore`] to mount it again.
    #[must_use]
    pub fn park(mut self) -> ResctrlState {
        let state = self.state();
        self.mounted = false;
        MOUNTED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
        state
    }

    /// The state as [`Resctrl::park`] would take it, leaving the mount in place.
    #[must_use]
    pub fn state(&self) -> ResctrlState {
        let counters = |m: &CounterPairs| -> Vec<CounterState> {
            m.iter()
                .map(|(&(d, r, e), &(a, b))| (d, r, e.name().to_owned(), a, b))
                .collect()
        };
        let arch: BTreeMap<_, _> = self
            .arch_mbm
            .iter()
            .map(|(k, v)| (*k, v.to_pair()))
            .collect();
        let fsm: BTreeMap<_, _> = self.fs_mbm.iter().map(|(k, v)| (*k, v.to_pair())).collect();
        ResctrlState {
            options: self.opts.to_string(),
            groups: self
                .groups
                .iter()
                .map(|g| {
                    g.as_ref().map(|g| GroupState {
                        name: g.name.clone(),
                        parent: match &g.kind {
                            GroupKind::Mon { parent } => Some(*parent),
                            GroupKind::Ctrl { .. } => None,
                        },
                        children: match &g.kind {
                            GroupKind::Ctrl { children } => children.clone(),
                            GroupKind::Mon { .. } => Vec::new(),
                        },
                        closid: g.closid,
                        rmid: g.rmid,
                        cpus: g.cpus.to_string(),
                        mode: g.mode.name().to_owned(),
                        mba_event: g.mba_event.name().to_owned(),
                    })
                })
                .collect(),
            closid_used: self.closid_used.clone(),
            ctrl_val: self
                .ctrl_val
                .iter()
                .map(|(r, v)| (r.name().to_owned(), v.clone()))
                .collect(),
            mbps_val: self.mbps_val.clone(),
            tasks: self
                .tasks
                .iter()
                .map(|(&id, t)| (id, t.closid, t.rmid))
                .collect(),
            sim_tasks: self.sim_tasks.iter().copied().collect(),
            rmid_free: self.rmid_free.iter().copied().collect(),
            limbo: self
                .limbo
                .iter()
                .map(|(&r, d)| (r, d.iter().copied().collect()))
                .collect(),
            limbo_due_ns: self.limbo_due.map(ns),
            threshold: self.threshold,
            arch_mbm: counters(&arch),
            fs_mbm: counters(&fsm),
            mbm_last_ns: ns(self.mbm_last),
            last_cmd: String::from_utf8_lossy(&self.last_cmd).into_owned(),
            host_cpu: self
                .host
                .iter()
                .map(|(&id, s)| (id, s.ticks, ns(s.at)))
                .collect(),
            amd: self.amd_saved(),
        }
    }

    /// Mounts resctrl on `platform` again with a [`ResctrlState`] taken by
    /// [`Resctrl::park`], without touching a register (the platform's own saved state holds
    /// them).
    ///
    /// # Errors
    /// `EBUSY` when resctrl is mounted on this platform; `InvalidData` when the state does
    /// not fit the platform (another model, an edited file), naming what does not fit.
    pub fn restore(platform: SimHandle, state: &ResctrlState) -> io::Result<Self> {
        let handle = platform.clone();
        let guard = handle.lock();
        let key = super::platform_key(&guard);
        let opts: MountOptions = state
            .options
            .parse()
            .map_err(|e| invalid(format!("mount options: {e}")))?;
        opts.check(guard.capabilities(), guard.snc_nodes() > 1)
            .map_err(|e| invalid(format!("mount options: {e}")))?;
        let hw = super::hw::Hw::probe(&guard);
        let amd = super::abmc::AmdState::new(&guard, hw.l3_domains.len());
        drop(guard);
        let mut fs = Self::new(platform, opts, hw, key);
        fs.amd = amd;
        fs.mounted = false; // until every check passed: no teardown of a half-made mount
        fs.load(state)?;
        let mut mounted = MOUNTED.lock().unwrap_or_else(PoisonError::into_inner);
        if !mounted.insert(key) {
            return Err(super::MountError::Busy.into());
        }
        fs.mounted = true;
        Ok(fs)
    }

    /// Checks `s` against this fresh mount's shapes and takes it over.
    #[allow(clippy::too_many_lines)] // one check per field, in field order
    fn load(&mut self, s: &ResctrlState) -> io::Result<()> {
        let num_rmids = self.hw.mon.as_ref().map_or(1, |m| m.num_rmids.max(1));
        let n_l3 = self.hw.l3_domains.len();
        let n_closid = u32::try_from(self.closid_used.len()).unwrap_or(u32::MAX);
        // Groups.
        let n = s.groups.len();
        let live = |i: usize| s.groups.get(i).and_then(Option::as_ref);
        let root = live(ROOT).ok_or_else(|| invalid("no root group"))?;
        if root.parent.is_some() || !root.name.is_empty() || root.closid != 0 || root.rmid != 0 {
            return Err(invalid("the root group is not the default CTRL_MON group"));
        }
        let mut groups = Vec::with_capacity(n);
        let mut ctrl_names = BTreeMap::new();
        for (i, g) in s.groups.iter().enumerate() {
            let Some(g) = g else {
                groups.push(None);
                continue;
            };
            if g.closid >= n_closid || g.rmid >= num_rmids {
                return Err(invalid(format!("group {i}: CLOSID or RMID out of range")));
            }
            let cpus: CpuSet = g
                .cpus
                .parse()
                .map_err(|_| invalid(format!("group {i}: CPU list `{}`", g.cpus)))?;
            if cpus.iter().any(|c| !self.hw.online.contains(c)) {
                return Err(invalid(format!("group {i}: a CPU the platform lacks")));
            }
            let kind = match g.parent {
                None => {
                    for &c in &g.children {
                        if live(c).and_then(|m| m.parent) != Some(i) {
                            return Err(invalid(format!(
                                "group {i}: child {c} is not its MON group"
                            )));
                        }
                    }
                    if i != ROOT && ctrl_names.insert(g.name.clone(), i).is_some() {
                        return Err(invalid(format!("two groups named `{}`", g.name)));
                    }
                    GroupKind::Ctrl {
                        children: g.children.clone(),
                    }
                }
                Some(p) => {
                    let parent = live(p).filter(|pg| pg.parent.is_none());
                    if !parent.is_some_and(|pg| pg.children.contains(&i)) || p >= n {
                        return Err(invalid(format!("group {i}: parent {p} does not list it")));
                    }
                    GroupKind::Mon { parent: p }
                }
            };
            let mode = match g.mode.as_str() {
                "shareable" => Mode::Shareable,
                "exclusive" => Mode::Exclusive,
                m => return Err(invalid(format!("group {i}: mode `{m}`"))),
            };
            groups.push(Some(Group {
                name: g.name.clone(),
                kind,
                closid: g.closid,
                rmid: g.rmid,
                cpus,
                mode,
                mba_event: event_named(&g.mba_event)?,
            }));
        }
        // Allocation.
        if s.closid_used.len() != self.closid_used.len() {
            return Err(invalid("CLOSID count differs from the platform's"));
        }
        let mut ctrl_val = BTreeMap::new();
        for (r, rows) in &self.ctrl_val {
            let saved = s
                .ctrl_val
                .get(r.name())
                .ok_or_else(|| invalid(format!("no {} values", r.name())))?;
            let same_shape = saved.len() == rows.len()
                && saved.iter().zip(rows).all(|(a, b)| a.len() == b.len());
            if !same_shape {
                return Err(invalid(format!(
                    "{} values do not fit the platform",
                    r.name()
                )));
            }
            ctrl_val.insert(*r, saved.clone());
        }
        if s.ctrl_val.len() != self.ctrl_val.len() {
            return Err(invalid("values of a resource the platform lacks"));
        }
        let same = |a: &[Vec<u32>], b: &[Vec<u32>]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.len() == y.len())
        };
        if !same(&s.mbps_val, &self.mbps_val) {
            return Err(invalid("mba_MBps values do not fit the platform"));
        }
        // Tasks and RMIDs.
        let mut tasks = BTreeMap::new();
        for &(id, closid, rmid) in &s.tasks {
            if closid >= n_closid || rmid >= num_rmids {
                return Err(invalid(format!("task {id}: CLOSID or RMID out of range")));
            }
            tasks.insert(id, TaskIds { closid, rmid });
        }
        if s.rmid_free.iter().any(|&r| r >= num_rmids)
            || s.limbo
                .iter()
                .any(|(r, d)| *r >= num_rmids || d.iter().any(|&d| d >= n_l3))
        {
            return Err(invalid(
                "an RMID or domain out of range in the free list or limbo",
            ));
        }
        // Under SNC a counter is kept per node's hardware RMID: `rmid + node * num_rmids`
        // (`reset_mon_counters`), up to the undivided RMID count.
        let hw_rmids = num_rmids.saturating_mul(self.hw.snc.max(1));
        let counters = |list: &[CounterState]| -> io::Result<CounterPairs> {
            list.iter()
                .map(|(d, r, e, a, b)| {
                    if *d >= n_l3 || *r >= hw_rmids {
                        return Err(invalid("an MBM counter of a domain or RMID out of range"));
                    }
                    Ok(((*d, *r, event_named(e)?), (*a, *b)))
                })
                .collect()
        };
        let arch = counters(&s.arch_mbm)?;
        let fsm = counters(&s.fs_mbm)?;
        // Everything fits: take it.
        self.groups = groups;
        self.ctrl_names = ctrl_names;
        self.closid_used.clone_from(&s.closid_used);
        self.ctrl_val = ctrl_val;
        self.mbps_val.clone_from(&s.mbps_val);
        self.tasks = tasks;
        self.sim_tasks = s.sim_tasks.iter().copied().collect::<BTreeSet<_>>();
        self.rmid_free = s.rmid_free.iter().copied().collect::<VecDeque<_>>();
        self.limbo = s
            .limbo
            .iter()
            .map(|(r, d)| (*r, d.iter().copied().collect()))
            .collect();
        self.limbo_due = s.limbo_due_ns.map(Duration::from_nanos);
        self.threshold = s.threshold;
        self.arch_mbm = arch
            .into_iter()
            .map(|(k, (a, b))| (k, ArchMbm::from_pair(a, b)))
            .collect();
        self.fs_mbm = fsm
            .into_iter()
            .map(|(k, (a, b))| (k, FsMbm::from_pair(a, b)))
            .collect();
        self.mbm_last = Duration::from_nanos(s.mbm_last_ns);
        self.last_cmd = s
            .last_cmd
            .as_bytes()
            .iter()
            .copied()
            .take(super::LAST_CMD_STATUS_SIZE - 1)
            .collect();
        self.host = s
            .host_cpu
            .iter()
            .map(|&(id, ticks, at)| {
                (
                    id,
                    super::host::HostSample {
                        ticks,
                        at: Duration::from_nanos(at),
                    },
                )
            })
            .collect();
        if let Some(a) = &s.amd {
            self.amd_load(a).map_err(invalid)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimPlatform;
    use crate::vfs::Tree;

    #[test]
    fn a_parked_mount_comes_back_with_its_groups_and_no_register_write() {
        // arrange
        let sim = SimHandle::new(
            SimPlatform::builtin("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal").unwrap(),
        );
        let mut fs = Resctrl::mount(sim.clone(), &MountOptions::default()).unwrap();
        fs.mkdir("p0").unwrap();
        fs.write("p0/schemata", 0, b"L3:0=3\n").unwrap();
        fs.mkdir("p0/mon_groups/m").unwrap();
        fs.write("p0/cpus_list", 0, b"2-3\n").unwrap();
        fs.write("p0/mon_groups/m/cpus_list", 0, b"2\n").unwrap();
        let before = fs.read("p0/schemata", 0, 4096).unwrap();
        // act
        let state = fs.park();
        let json = serde_json::to_string(&state).unwrap();
        let writes = sim.msr_accesses().1;
        let back: ResctrlState = serde_json::from_str(&json).unwrap();
        let mut fs = Resctrl::restore(sim.clone(), &back).unwrap();
        // assert
        assert_eq!(sim.msr_accesses().1, writes, "no register written");
        assert_eq!(fs.read("p0/schemata", 0, 4096).unwrap(), before);
        assert_eq!(fs.read("p0/mon_groups/m/cpus_list", 0, 64).unwrap(), b"2\n");
        assert_eq!(fs.read("p0/cpus_list", 0, 64).unwrap(), b"2-3\n");
        assert!(
            Resctrl::restore(sim.clone(), &back).is_err(),
            "mounted once only"
        );
        fs.rmdir("p0").unwrap();
    }

    #[test]
    fn a_state_that_does_not_fit_is_refused_without_panicking() {
        let sim = SimHandle::new(
            SimPlatform::builtin("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal").unwrap(),
        );
        let mut fs = Resctrl::mount(sim.clone(), &MountOptions::default()).unwrap();
        fs.mkdir("p0").unwrap();
        fs.mkdir("p0/mon_groups/m").unwrap();
        let good = serde_json::to_value(fs.park()).unwrap();
        let edits: [(&str, serde_json::Value); 6] = [
            ("/groups/0", serde_json::Value::Null),
            ("/groups/1/children/0", serde_json::json!(99)),
            ("/groups/2/parent", serde_json::json!(0)),
            ("/groups/1/closid", serde_json::json!(1_000_000)),
            ("/closid_used", serde_json::json!([true])),
            (
                "/arch_mbm",
                serde_json::json!([[7, 0, "mbm_total_bytes", 0, 0]]),
            ),
        ];
        for (path, v) in edits {
            let mut bad = good.clone();
            *bad.pointer_mut(path).unwrap_or_else(|| panic!("{path}")) = v;
            let Ok(state) = serde_json::from_value::<ResctrlState>(bad) else {
                continue;
            };
            let e = Resctrl::restore(sim.clone(), &state).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{path}: {e}");
        }
        let state: ResctrlState = serde_json::from_value(good).unwrap();
        Resctrl::restore(sim, &state).unwrap();
    }
}
