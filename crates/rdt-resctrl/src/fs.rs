//! File access under the resctrl root and `/proc`, with the kernel's conventions: one
//! `write(2)` per command, errors carrying the path, a refused write carrying
//! `info/last_cmd_status`; and the group naming rules that tell our groups from other tools'.

use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rdt_core::{CpuSet, RequestError, TaskId};
use rdt_host::proc::ProcFs;

use crate::ResctrlError;
use crate::io::{DirReader, FsLock, PositionedRead, ResctrlFs};

/// Entries of the root that are not control groups.
const ROOT_RESERVED: &[&str] = &["info", "mon_groups", "mon_data"];

/// `ENOENT`: no such file (the open of a write failed).
const ENOENT: i32 = 2;
/// `EACCES`: a read-only file opened for writing.
const EACCES: i32 = 13;
/// `ESRCH`: a task id that does not exist (any more).
pub(crate) const ESRCH: i32 = 3;
/// `ENOSPC`: out of CLOSIDs / RMIDs on mkdir.
pub(crate) const ENOSPC: i32 = 28;
/// `EBUSY`: RMIDs in limbo on mkdir.
pub(crate) const EBUSY: i32 = 16;

/// `rel` inside group `group` (`""` is the root).
pub(crate) fn join(group: &str, rel: &str) -> String {
    if group.is_empty() {
        rel.to_owned()
    } else {
        format!("{group}/{rel}")
    }
}

/// The class of a control group named as pqos names them: `COS<n>`, `n` decimal without
/// leading zeros (pqos: `"COS%u"`).
#[must_use]
pub fn cos_of_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("COS")?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if canonical { digits.parse().ok() } else { None }
}

/// Whether a monitor group's name is one pqos uses: `pqos-<pid>-<counter>`, both decimal.
#[must_use]
pub fn is_pqos_mon_name(name: &str) -> bool {
    pqos_mon_pid(name).is_some()
}

/// The process id in a pqos monitor group's name (`pqos-<pid>-<counter>`, both decimal):
/// the process that created it (pqos `resctrl_mon_new_group`: `getpid()`).
#[must_use]
pub fn pqos_mon_pid(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix("pqos-")?.split_once('-')?;
    let num = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if num(pid) && num(n) {
        pid.parse().ok()
    } else {
        None
    }
}

/// Typed access to one resctrl root, through the filesystem seam ([`ResctrlFs`]). `root`
/// names the files in messages and errors.
#[derive(Clone, Debug)]
pub(crate) struct Fs {
    root: PathBuf,
    io: Arc<dyn ResctrlFs>,
}

impl Fs {
    pub(crate) fn new(root: PathBuf, io: Arc<dyn ResctrlFs>) -> Self {
        Self { root, io }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    pub(crate) fn exists(&self, rel: &str) -> bool {
        self.io.exists(rel)
    }

    pub(crate) fn is_dir(&self, rel: &str) -> bool {
        self.io.is_dir(rel)
    }

    pub(crate) fn read(&self, rel: &str) -> Result<String, ResctrlError> {
        self.io
            .read(rel)
            .map_err(|e| ResctrlError::io("read", self.path(rel), e))
    }

    /// The file's text, `None` when it does not exist.
    pub(crate) fn read_opt(&self, rel: &str) -> Result<Option<String>, ResctrlError> {
        match self.io.read(rel) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ResctrlError::io("read", self.path(rel), e)),
        }
    }

    /// Opens `rel` for repeated positioned reads (a `mon_data` counter).
    pub(crate) fn open_reader(&self, rel: &str) -> Result<Box<dyn PositionedRead>, ResctrlError> {
        self.io
            .open_reader(rel)
            .map_err(|e| ResctrlError::io("open", self.path(rel), e))
    }

    /// [`Fs::open_reader`] with the bare `io::Error` (the caller names the file only when
    /// it reports the error).
    pub(crate) fn open_reader_io(&self, rel: &str) -> io::Result<Box<dyn PositionedRead>> {
        self.io.open_reader(rel)
    }

    /// [`ResctrlFs::open_dir`].
    pub(crate) fn open_dir_io(&self, rel: &str) -> io::Result<Box<dyn DirReader>> {
        self.io.open_dir(rel)
    }

    /// Opens directory `rel` for `flock`.
    pub(crate) fn open_lock(&self, rel: &str) -> io::Result<Box<dyn FsLock>> {
        self.io.open_lock(rel)
    }

    pub(crate) fn parse<T: FromStr>(&self, rel: &str, expected: &str) -> Result<T, ResctrlError> {
        let text = self.read(rel)?;
        text.trim().parse().map_err(|_| ResctrlError::Parse {
            path: self.path(rel),
            text: text.trim().to_owned(),
            expected: expected.to_owned(),
        })
    }

    pub(crate) fn cpus(&self, group: &str) -> Result<CpuSet, ResctrlError> {
        self.parse(&join(group, "cpus_list"), "a CPU list such as 0-3,8")
    }

    /// The ids in a `tasks` file, in file order.
    pub(crate) fn tasks(&self, group: &str) -> Result<Vec<TaskId>, ResctrlError> {
        let rel = join(group, "tasks");
        let text = self.read(&rel)?;
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| {
                l.parse().map_err(|_| ResctrlError::Parse {
                    path: self.path(&rel),
                    text: l.to_owned(),
                    expected: "one task id per line".into(),
                })
            })
            .collect()
    }

    /// `info/last_cmd_status`, trimmed ("ok" when empty or unreadable).
    pub(crate) fn last_cmd_status(&self) -> String {
        self.io.read("info/last_cmd_status").map_or_else(
            |e| format!("(info/last_cmd_status unreadable: {e})"),
            |s| {
                let t = s.trim();
                if t.is_empty() {
                    "ok".into()
                } else {
                    t.replace('\n', "; ")
                }
            },
        )
    }

    /// One `write(2)` of `text` to `rel`. The caller holds the exclusive lock, so the
    /// `last_cmd_status` read after a failure is this write's.
    pub(crate) fn write(&self, rel: &str, text: &str) -> Result<(), ResctrlError> {
        let rejected = |source: io::Error| ResctrlError::Rejected {
            file: self.path(rel),
            written: text.to_owned(),
            status: self.last_cmd_status(),
            source,
        };
        match self.io.write(rel, text.as_bytes()) {
            Ok(n) if n == text.len() => Ok(()),
            Ok(n) => Err(rejected(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {n} of {} bytes", text.len()),
            ))),
            // The open failed: the file is not there (ENOENT: the group went) or is not
            // writable (EACCES); a refused command is any other errno of the write itself.
            Err(e) if matches!(e.raw_os_error(), Some(ENOENT | EACCES)) => {
                Err(ResctrlError::io("open for writing", self.path(rel), e))
            }
            Err(e) => Err(rejected(e)),
        }
    }

    pub(crate) fn mkdir(&self, rel: &str) -> io::Result<()> {
        self.io.mkdir(rel)
    }

    pub(crate) fn rmdir(&self, rel: &str) -> Result<(), ResctrlError> {
        self.io
            .rmdir(rel)
            .map_err(|e| ResctrlError::io("remove", self.path(rel), e))
    }

    /// Names of the subdirectories of `rel`, sorted; empty when `rel` does not exist.
    pub(crate) fn subdirs(&self, rel: &str) -> Result<Vec<String>, ResctrlError> {
        match self.io.subdirs(rel) {
            Ok(mut out) => {
                out.sort();
                Ok(out)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(ResctrlError::io("list", self.path(rel), e)),
        }
    }

    /// The control groups other than the root (directories of the root that are not
    /// `info`, `mon_groups`, `mon_data`).
    pub(crate) fn ctrl_groups(&self) -> Result<Vec<String>, ResctrlError> {
        Ok(self
            .subdirs("")?
            .into_iter()
            .filter(|n| !ROOT_RESERVED.contains(&n.as_str()))
            .collect())
    }

    /// Every monitor group, as `(parent control group, path)`; the root's first.
    pub(crate) fn mon_groups(&self) -> Result<Vec<(String, String)>, ResctrlError> {
        let mut out = Vec::new();
        for parent in std::iter::once(String::new()).chain(self.ctrl_groups()?) {
            for name in self.subdirs(&join(&parent, "mon_groups"))? {
                let path = join(&parent, &format!("mon_groups/{name}"));
                out.push((parent.clone(), path));
            }
        }
        Ok(out)
    }
}

/// `/proc` (injectable) as this backend needs it: [`ProcFs`] with its errors in resctrl's
/// words.
#[derive(Clone, Debug)]
pub(crate) struct Proc(ProcFs);

impl Proc {
    pub(crate) fn new(root: PathBuf) -> Self {
        Self(ProcFs::at(root))
    }

    /// Whether the task exists.
    pub(crate) fn exists(&self, task: TaskId) -> bool {
        self.0.exists(task)
    }

    /// The threads `task` names ([`ProcFs::threads`]).
    pub(crate) fn threads(&self, task: TaskId) -> Result<Vec<TaskId>, ResctrlError> {
        self.0.threads(task).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                RequestError::NoSuchTask(task).into()
            } else {
                ResctrlError::io("read", self.0.root().join(task.to_string()), e)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pqos_names_are_recognised_strictly() {
        assert_eq!(cos_of_name("COS0"), Some(0));
        assert_eq!(cos_of_name("COS15"), Some(15));
        assert_eq!(cos_of_name("COS01"), None);
        assert_eq!(cos_of_name("COS"), None);
        assert_eq!(cos_of_name("cos1"), None);
        assert_eq!(cos_of_name("COS1a"), None);
        assert!(is_pqos_mon_name("pqos-1234-0"));
        assert!(!is_pqos_mon_name("pqos-1234"));
        assert!(!is_pqos_mon_name("pqos-x-1"));
        assert!(!is_pqos_mon_name("goresctrl.pqos-1-1"));
    }

    #[test]
    fn threads_of_a_process_are_its_task_entries_and_a_thread_is_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        for (id, tgid) in [(100, 100), (101, 100)] {
            std::fs::create_dir_all(p.join(format!("{id}"))).unwrap();
            std::fs::write(
                p.join(format!("{id}/status")),
                format!("Name:\tx\nTgid:\t{tgid}\nPid:\t{id}\n"),
            )
            .unwrap();
        }
        for t in [100, 101] {
            std::fs::create_dir_all(p.join(format!("100/task/{t}"))).unwrap();
        }
        let proc = Proc::new(p.to_owned());
        let ids = |v: &[u32]| v.iter().map(|&t| TaskId::new(t)).collect::<Vec<_>>();
        assert_eq!(proc.threads(TaskId::new(100)).unwrap(), ids(&[100, 101]));
        assert_eq!(proc.threads(TaskId::new(101)).unwrap(), ids(&[101]));
        assert!(matches!(
            proc.threads(TaskId::new(7)),
            Err(ResctrlError::Request(RequestError::NoSuchTask(_)))
        ));
    }
}
