//! The node's Kubernetes pods as the NRI plugin (`rdt-agent nri`, crate `rdt-nri`) records
//! them, for the tools that name workloads by pod: the exporter labels the series of a pod's
//! monitor group with its namespace, pod and containers, and the controller's policy picks
//! protected and best-effort workloads by QoS class, class, namespace or pod label
//! ([`PodSelector`]) and resolves them to the tasks of the matching containers
//! ([`PodsRecord::selected_tasks`]).
//!
//! The record is one JSON file, [`PODS_FILE`], in the platform's run directory, written
//! whole and atomically by the plugin ([`crate::runfile::write_run_file`]: a reader sees the
//! old file or the new one) and read through the run directory's checks
//! ([`crate::runfile::read_run_file`]: the directory verified, no symlink, no FIFO, at most
//! [`MAX_PODS_FILE_BYTES`]). Every string in it came from the runtime: the plugin caps them
//! ([`PodRecord::capped`]) and a reader treats them as data, never as paths, except the
//! monitor groups, which are checked again ([`is_mon_group_path`]).
//!
//! A container's tasks are the processes of its cgroup ([`container_tasks`]): on cgroup v2
//! (and the unified line of a hybrid host), the cgroup of its process; on cgroup v1, the
//! cgroup of its process in the `cpu,cpuacct` (or `cpu`, `cpuacct`) hierarchy, else the
//! `pids` one; else the cgroups path the runtime gave, in the same hierarchies; else its
//! process alone.
//!
//! # References
//! Linux `Documentation/admin-guide/cgroup-v1/cgroups.rst` (`tasks`, `cgroup.procs`) and
//! `cgroup-v2.rst`; proc(5) `/proc/pid/cgroup`; kubelet `pkg/kubelet/config/common.go`
//! (a static pod's UID: the hex MD5 of its manifest) and `k8s.io/apimachinery/pkg/types`
//! (`UID`, a UUID from the API server).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use rdt_core::TaskId;
use serde::{Deserialize, Serialize};

use crate::proc::{ProcFs, cgroup_processes, cgroup_v1_path};

/// The record's file name in the run directory.
pub const PODS_FILE: &str = "nri-pods.json";
/// The largest record a reader takes, in bytes (a node of 1,000 pods with 64 labels each
/// is well under it).
pub const MAX_PODS_FILE_BYTES: u64 = 16 << 20;
/// The most labels kept of a pod (the first by key; Kubernetes sets no limit, a node's
/// pods rarely carry more than a dozen).
pub const MAX_POD_LABELS: usize = 64;
/// The longest string kept (a label key: a 253-byte DNS prefix, `/`, a 63-byte name);
/// longer ones are cut at a character boundary.
pub const MAX_FIELD_BYTES: usize = 317;
/// The longest cgroups path kept, in bytes (PATH_MAX).
pub const MAX_PATH_BYTES: usize = 4096;
/// Where the cgroup hierarchy is mounted on a host.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// The record's format version.
pub const VERSION: u32 = 1;

/// One container of a pod, as placed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerRecord {
    /// The runtime's container id.
    pub id: String,
    /// The container's name in its pod.
    pub name: String,
    /// Its RDT class (`system/default` for the root's).
    pub class: String,
    /// The class's resctrl control group; `None`: the root group.
    pub group: Option<String>,
    /// Its process as the runtime gave it (0: not started yet).
    pub pid: u32,
    /// Its cgroups path as the runtime gave it (cgroupfs `/kubepods/...` or systemd's
    /// `slice:prefix:name`).
    pub cgroups_path: String,
}

/// One pod of the node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PodRecord {
    /// Its UID (a UUID; a static pod's: 32 hex digits).
    pub uid: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its QoS class (`Guaranteed`, `Burstable`, `BestEffort`); `None` outside kubelet's
    /// layout.
    pub qos: Option<String>,
    /// Its labels (at most [`MAX_POD_LABELS`]).
    pub labels: BTreeMap<String, String>,
    /// Its containers, placed and not removed.
    pub containers: Vec<ContainerRecord>,
    /// The monitor groups the plugin made for it (`gold/mon_groups/<uid>`, relative to the
    /// resctrl root): the plugin's own, which it alone removes.
    pub mon_groups: Vec<String>,
}

/// The whole record ([module docs](self)).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PodsRecord {
    /// [`VERSION`].
    pub version: u32,
    /// The pods, by UID.
    pub pods: Vec<PodRecord>,
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cap(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

impl PodRecord {
    /// A record of the pod `uid`, every string capped at [`MAX_FIELD_BYTES`], the labels at
    /// [`MAX_POD_LABELS`] (the first by key).
    #[must_use]
    pub fn capped(
        uid: &str,
        namespace: &str,
        name: &str,
        qos: Option<&str>,
        labels: &BTreeMap<String, String>,
    ) -> Self {
        Self {
            uid: cap(uid, MAX_FIELD_BYTES),
            namespace: cap(namespace, MAX_FIELD_BYTES),
            name: cap(name, MAX_FIELD_BYTES),
            qos: qos.map(|q| cap(q, MAX_FIELD_BYTES)),
            labels: labels
                .iter()
                .take(MAX_POD_LABELS)
                .map(|(k, v)| (cap(k, MAX_FIELD_BYTES), cap(v, MAX_FIELD_BYTES)))
                .collect(),
            containers: Vec::new(),
            mon_groups: Vec::new(),
        }
    }

    /// Its containers' names, sorted, `,`-separated (the exporter's `container` label of a
    /// pod's monitor group).
    #[must_use]
    pub fn container_names(&self) -> String {
        let mut names: Vec<&str> = self.containers.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.join(",")
    }
}

impl ContainerRecord {
    /// A record of container `id`, its strings capped ([`MAX_FIELD_BYTES`], the cgroups
    /// path at [`MAX_PATH_BYTES`]).
    #[must_use]
    pub fn capped(
        id: &str,
        name: &str,
        class: &str,
        group: Option<&str>,
        pid: u32,
        cgroups_path: &str,
    ) -> Self {
        Self {
            id: cap(id, MAX_FIELD_BYTES),
            name: cap(name, MAX_FIELD_BYTES),
            class: cap(class, MAX_FIELD_BYTES),
            group: group.map(|g| cap(g, MAX_FIELD_BYTES)),
            pid,
            cgroups_path: cap(cgroups_path, MAX_PATH_BYTES),
        }
    }
}

impl PodsRecord {
    /// Reads the record of run directory `run_dir` ([module docs](self)).
    ///
    /// # Errors
    /// `NotFound` without one (no plugin records pods here); the run directory's checks
    /// ([`crate::runfile::read_run_file`]); `InvalidData` for a file that is not the
    /// record's JSON (naming the line and column) or of another version.
    pub fn read(run_dir: &Path) -> io::Result<Self> {
        let path = run_dir.join(PODS_FILE);
        let text = crate::runfile::read_run_file(&path, MAX_PODS_FILE_BYTES)?;
        let record: Self = serde_json::from_str(&text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        if record.version != VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: version {}, this reader knows {VERSION}",
                    path.display(),
                    record.version
                ),
            ));
        }
        Ok(record)
    }

    /// Writes the record to run directory `run_dir`, replacing the one there atomically.
    ///
    /// # Errors
    /// [`crate::runfile::write_run_file`]'s.
    pub fn write(&self, run_dir: &Path) -> io::Result<()> {
        let mut text = serde_json::to_vec(self).map_err(io::Error::other)?;
        text.push(b'\n');
        crate::runfile::write_run_file(run_dir, PODS_FILE, &text)
    }

    /// The pod whose monitor group is `path` (relative to the resctrl root).
    #[must_use]
    pub fn pod_of_mon_group(&self, path: &str) -> Option<&PodRecord> {
        self.pods
            .iter()
            .find(|p| p.mon_groups.iter().any(|m| m == path))
    }

    /// The pods' monitor groups and their pods, for many look-ups.
    #[must_use]
    pub fn by_mon_group(&self) -> std::collections::HashMap<&str, &PodRecord> {
        self.pods
            .iter()
            .flat_map(|p| p.mon_groups.iter().map(move |m| (m.as_str(), p)))
            .filter(|(m, _)| is_mon_group_path(m))
            .collect()
    }

    /// The containers `selector` picks, with their pods.
    pub fn selected<'a>(
        &'a self,
        selector: &'a PodSelector,
    ) -> impl Iterator<Item = (&'a PodRecord, &'a ContainerRecord)> + 'a {
        self.pods.iter().flat_map(move |p| {
            p.containers
                .iter()
                .filter(move |c| selector.matches(p, c))
                .map(move |c| (p, c))
        })
    }

    /// The tasks of the containers `selector` picks ([`container_tasks`]), ascending, each
    /// once; a container that has no task (ended, not started) adds none.
    ///
    /// # Errors
    /// A cgroup's process list does not parse.
    pub fn selected_tasks(
        &self,
        selector: &PodSelector,
        proc: &ProcFs,
        cgroup_root: &Path,
    ) -> io::Result<Vec<TaskId>> {
        let mut out = Vec::new();
        for (_, c) in self.selected(selector) {
            match container_tasks(proc, cgroup_root, c.pid, &c.cgroups_path) {
                Ok(t) => out.extend(t),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// Whether `uid` can be a pod's UID, and so the name of its monitor group: a UUID in its
/// canonical form (8-4-4-4-12 hex digits, the API server's), or 32 hex digits (kubelet's
/// static pods: the MD5 of the manifest). Nothing else: no path, no dot, no other name.
#[must_use]
pub fn is_pod_uid(uid: &str) -> bool {
    let b = uid.as_bytes();
    let hex = |s: &[u8]| s.iter().all(u8::is_ascii_hexdigit);
    match b.len() {
        32 => hex(b),
        36 => b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        }),
        _ => false,
    }
}

/// The monitor group of pod `uid` in control group `group` (`None`: the root group),
/// relative to the resctrl root: `gold/mon_groups/<uid>` or `mon_groups/<uid>`.
#[must_use]
pub fn mon_group_path(group: Option<&str>, uid: &str) -> String {
    match group {
        Some(g) if !g.is_empty() => format!("{g}/mon_groups/{uid}"),
        _ => format!("mon_groups/{uid}"),
    }
}

/// Whether `path` is a pod's monitor group as [`mon_group_path`] makes them: `mon_groups/
/// <uid>` or `<group>/mon_groups/<uid>`, `<group>` one path component (not `.`, `..`,
/// `info`, `mon_groups`, `mon_data`), `<uid>` a pod UID ([`is_pod_uid`]).
#[must_use]
pub fn is_mon_group_path(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["mon_groups", uid] => is_pod_uid(uid),
        [group, "mon_groups", uid] => {
            !group.is_empty()
                && !matches!(*group, "." | ".." | "info" | "mon_groups" | "mon_data")
                && is_pod_uid(uid)
        }
        _ => false,
    }
}

/// Which containers a policy's workload takes, by what the plugin records of their pods:
/// each field given must match (a list: any of its values), every label given must be the
/// pod's with that value; an empty selector takes every container of every pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSelector {
    /// QoS classes (`Guaranteed`, `Burstable`, `BestEffort`).
    pub qos: Vec<String>,
    /// RDT classes (the container's, as the plugin placed it).
    pub classes: Vec<String>,
    /// Namespaces.
    pub namespaces: Vec<String>,
    /// Pod labels, each to be present with this value.
    pub labels: BTreeMap<String, String>,
}

impl PodSelector {
    /// Whether container `c` of pod `pod` is taken.
    #[must_use]
    pub fn matches(&self, pod: &PodRecord, c: &ContainerRecord) -> bool {
        let any = |list: &[String], v: &str| list.is_empty() || list.iter().any(|x| x == v);
        any(&self.qos, pod.qos.as_deref().unwrap_or(""))
            && any(&self.classes, &c.class)
            && any(&self.namespaces, &pod.namespace)
            && self
                .labels
                .iter()
                .all(|(k, v)| pod.labels.get(k).is_some_and(|have| have == v))
    }
}

/// The directory, relative to a cgroup mount, of a runtime's cgroups path: cgroupfs's
/// `/kubepods/burstable/pod<uid>/<id>` as it is; systemd's `slice:prefix:name` as systemd
/// lays it out (`kubepods-burstable-pod<uid>.slice` under `kubepods.slice/
/// kubepods-burstable.slice/`, the unit `prefix-name.scope` in it). `None` for an empty
/// path or one with `.` or `..` components.
///
/// # References
/// runc `libcontainer/cgroups/systemd/common.go` (`ExpandSlice`, the `slice:prefix:name`
/// form); systemd.slice(5) (a slice's name is its path in the tree, `-` separated).
#[must_use]
pub fn cgroup_dir_of(cgroups_path: &str) -> Option<PathBuf> {
    let rel = if let Some((slice, rest)) = cgroups_path.split_once(':') {
        let (prefix, name) = rest.split_once(':')?;
        let mut dir = PathBuf::new();
        let slice = slice.strip_suffix(".slice")?;
        if !slice.is_empty() && slice != "-" {
            let mut so_far = String::new();
            for part in slice.split('-') {
                if part.is_empty() {
                    return None;
                }
                if !so_far.is_empty() {
                    so_far.push('-');
                }
                so_far.push_str(part);
                dir.push(format!("{so_far}.slice"));
            }
        }
        if prefix.is_empty() {
            dir.push(format!("{name}.scope"));
        } else {
            dir.push(format!("{prefix}-{name}.scope"));
        }
        dir
    } else {
        PathBuf::from(cgroups_path.trim_start_matches('/'))
    };
    let text = rel.to_str()?;
    let clean = !text.is_empty()
        && text
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    clean.then_some(rel)
}

/// The cgroup v1 hierarchies a container's tasks are read from, in order, with the
/// controller that names each in `/proc/<pid>/cgroup`: the CPU controller's (mounted as
/// `cpu,cpuacct` by systemd, or `cpu` and `cpuacct` apart), then `pids`. runc puts every
/// process of a container in each of them.
const V1_HIERARCHIES: &[(&str, &str)] = &[
    ("cpu", "cpu,cpuacct"),
    ("cpu", "cpu"),
    ("cpuacct", "cpuacct"),
    ("pids", "pids"),
];

/// The processes of a cgroup directory that exist and list some: `Ok(None)` for one that
/// is not there or empty.
fn procs_of(dir: &Path) -> io::Result<Option<Vec<TaskId>>> {
    match cgroup_processes(dir) {
        Ok(t) if !t.is_empty() => Ok(Some(t)),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The processes of a container ([module docs](self)): of the cgroup of `pid` (cgroup v2's
/// unified line, else the v1 hierarchies of the CPU controller and of `pids`), else of the
/// cgroup `cgroups_path` names (under `cgroup_root` itself, then in those v1 hierarchies),
/// under `cgroup_root`; else `pid` alone while it exists. A v1 cgroup's processes are its
/// `cgroup.procs` (the thread groups of its `tasks`): each moves with all its threads.
///
/// # Errors
/// `NotFound`: none of them exists (the container is gone); a cgroup's `cgroup.procs`
/// does not parse (`InvalidData`).
pub fn container_tasks(
    proc: &ProcFs,
    cgroup_root: &Path,
    pid: u32,
    cgroups_path: &str,
) -> io::Result<Vec<TaskId>> {
    let task = TaskId::new(pid);
    let under = |path: &str| cgroup_root.join(path.trim_start_matches('/'));
    if pid != 0
        && let Ok(text) = proc.cgroup_file(task)
    {
        if let Some(path) = crate::proc::cgroup_unified_path(&text)
            && path != "/"
            && let Some(t) = procs_of(&under(path))?
        {
            return Ok(t);
        }
        for (controller, mount) in V1_HIERARCHIES {
            if let Some(path) = cgroup_v1_path(&text, controller)
                && path != "/"
                && let Some(t) =
                    procs_of(&cgroup_root.join(mount).join(path.trim_start_matches('/')))?
            {
                return Ok(t);
            }
        }
    }
    if let Some(rel) = cgroup_dir_of(cgroups_path) {
        if let Some(t) = procs_of(&cgroup_root.join(&rel))? {
            return Ok(t);
        }
        for (_, mount) in V1_HIERARCHIES {
            if let Some(t) = procs_of(&cgroup_root.join(mount).join(&rel))? {
                return Ok(t);
            }
        }
    }
    if pid != 0 && proc.exists(task) {
        return Ok(vec![task]);
    }
    Err(io::ErrorKind::NotFound.into())
}

#[cfg(test)]
mod tests;
