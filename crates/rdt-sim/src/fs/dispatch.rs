//! [`SimFs`]: the `fuser::Filesystem` that maps inodes to paths and dispatches each request
//! to the [`Tree`] mounted at the longest matching prefix, after consulting the armed faults
//! and bringing the model's clock up to date.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use rdt_core::LogicalCpu;
use rdt_msr::MsrAddr;

use super::control::{Access, FaultOp, SharedFaults};
use super::stats::{Op, SharedCounts};
use crate::SimHandle;
use crate::vfs::errno::{EACCES, EINVAL, EISDIR, ENOENT, ENOTDIR, EPERM};
use crate::vfs::{NodeKind, Tree, err};

/// `EXDEV`: a rename across two views.
const EXDEV: i32 = 18;

/// How long the kernel may cache names and attributes of views that never change.
const STATIC_TTL: Duration = Duration::from_secs(1);

/// One view mounted at a prefix of the filesystem.
pub(crate) struct View {
    /// Where it is mounted, relative to the root (`dev/cpu`).
    pub prefix: &'static str,
    /// The view.
    pub tree: Box<dyn Tree>,
    /// The size files report: sysfs's 4096, or 0 for the device files.
    pub file_size: u64,
    /// Whether its entries change (resctrl's groups): then nothing is cached by the kernel.
    pub dynamic: bool,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Inode numbers for paths, allocated on first sight and never reused (so a removed and
/// re-made resctrl group keeps its number).
#[derive(Debug, Default)]
struct Inodes {
    paths: Vec<String>,
    ids: HashMap<String, u64>,
}

impl Inodes {
    fn new() -> Self {
        let mut i = Self::default();
        i.ino(""); // the root is inode 1
        i
    }

    fn ino(&mut self, path: &str) -> u64 {
        if let Some(&n) = self.ids.get(path) {
            return n;
        }
        self.paths.push(path.to_owned());
        let n = self.paths.len() as u64;
        self.ids.insert(path.to_owned(), n);
        n
    }

    fn path(&self, ino: INodeNo) -> io::Result<String> {
        usize::try_from(ino.0)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| self.paths.get(i))
            .cloned()
            .ok_or_else(|| err(ENOENT))
    }
}

fn join(parent: &str, name: &OsStr) -> io::Result<String> {
    let name = name.to_str().ok_or_else(|| err(ENOENT))?;
    Ok(if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    })
}

/// Where a path lands.
enum Place<'a> {
    /// Inside view `index`, at `rel`.
    View(usize, &'a str),
    /// A directory above the views (`""`, `dev`, `sys`, `sys/devices`, `sys/fs`).
    Above,
}

/// Everything behind the one lock.
#[derive(Debug)]
struct Inner {
    views: Vec<View>,
    inodes: Inodes,
    faults: SharedFaults,
    /// The model and the instant up to which its clock has been advanced (wall-clock mode).
    clock: Option<(SimHandle, Instant)>,
    /// Requests served, by kind.
    counts: SharedCounts,
    /// Permission bits given to `mkdir(2)` of a directory, by path: the directory and the
    /// ones the view makes inside it have them (kernfs: a resctrl group's `mon_groups`,
    /// `mon_data` and `mon_L3_XX` take their parent's mode).
    dir_modes: HashMap<String, u16>,
}

impl Inner {
    /// The permission bits of directory `path`: its own or its nearest ancestor's from
    /// `mkdir(2)`, else 0755.
    fn dir_mode(&self, path: &str) -> u16 {
        let mut p = path;
        loop {
            if let Some(&m) = self.dir_modes.get(p) {
                return m;
            }
            match p.rsplit_once('/') {
                Some((parent, _)) => p = parent,
                None => return 0o755,
            }
        }
    }

    /// Forgets the `mkdir(2)` modes of `path` and everything under it.
    fn forget_dir_modes(&mut self, path: &str) {
        let prefix = format!("{path}/");
        self.dir_modes
            .retain(|p, _| p != path && !p.starts_with(&prefix));
    }

    /// A directory's link count as kernfs gives it: 2 + its subdirectories.
    fn dir_links(&self, path: &str) -> u32 {
        let subdirs = self
            .list(path)
            .map_or(0, |l| l.iter().filter(|(_, k)| *k == NodeKind::Dir).count());
        2 + u32::try_from(subdirs).unwrap_or(u32::MAX - 2)
    }

    fn place<'a>(&self, path: &'a str) -> io::Result<Place<'a>> {
        for (i, v) in self.views.iter().enumerate() {
            if path == v.prefix {
                return Ok(Place::View(i, ""));
            }
            if let Some(rel) = path
                .strip_prefix(v.prefix)
                .and_then(|r| r.strip_prefix('/'))
            {
                return Ok(Place::View(i, rel));
            }
        }
        let above = self.views.iter().any(|v| {
            path.is_empty()
                || v.prefix
                    .strip_prefix(path)
                    .is_some_and(|r| r.starts_with('/'))
        });
        if above {
            Ok(Place::Above)
        } else {
            Err(err(ENOENT))
        }
    }

    fn kind(&self, path: &str) -> io::Result<NodeKind> {
        match self.place(path)? {
            Place::View(i, rel) => self.views[i].tree.kind(rel),
            Place::Above => Ok(NodeKind::Dir),
        }
    }

    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>> {
        match self.place(path)? {
            Place::View(i, rel) => self.views[i].tree.list(rel),
            Place::Above => {
                let mut names: Vec<(String, NodeKind)> = Vec::new();
                for v in &self.views {
                    let rest = if path.is_empty() {
                        Some(v.prefix)
                    } else {
                        v.prefix
                            .strip_prefix(path)
                            .and_then(|r| r.strip_prefix('/'))
                    };
                    if let Some(rest) = rest {
                        let first = rest.split('/').next().unwrap_or(rest).to_owned();
                        // a view mounted at a file (`dev/mem`) lists as what it is
                        let kind = if rest.contains('/') {
                            NodeKind::Dir
                        } else {
                            v.tree.kind("").unwrap_or(NodeKind::Dir)
                        };
                        if !names.iter().any(|(n, _)| *n == first) {
                            names.push((first, kind));
                        }
                    }
                }
                Ok(names)
            }
        }
    }

    /// (file size, ttl) of `path`'s view.
    fn policy(&self, path: &str) -> (u64, Duration) {
        match self.place(path) {
            Ok(Place::View(i, _)) => {
                let v = &self.views[i];
                let ttl = if v.dynamic {
                    Duration::ZERO
                } else {
                    STATIC_TTL
                };
                (v.file_size, ttl)
            }
            _ => (4096, STATIC_TTL),
        }
    }

    /// Advances the model by the wall-clock time since the last request (wall-clock mode).
    fn sync_clock(&mut self) {
        if let Some((sim, last)) = &mut self.clock {
            let now = Instant::now();
            sim.advance(now.saturating_duration_since(*last));
            *last = now;
        }
    }

    /// Fails with the errno of a fault that fires on these accesses, made by process
    /// `pid`; a `signal=KILL` fault kills that process first (the operation never reaches
    /// the model, as if the process had died just before it).
    fn check_faults(&self, pid: u32, accesses: &[Access<'_>]) -> io::Result<()> {
        let fired = self
            .faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .check(accesses);
        let Some(fired) = fired else { return Ok(()) };
        if fired.kill
            && let Ok(pid) = i32::try_from(pid)
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        Err(err(fired.errno))
    }
}

/// `dev/cpu/N/msr` -> N.
fn msr_cpu(path: &str) -> Option<LogicalCpu> {
    let n = path.strip_prefix("dev/cpu/")?.strip_suffix("/msr")?;
    n.parse().ok().map(LogicalCpu::new)
}

/// The accesses a read or write of `path` at `offset` makes, as faults see them.
fn io_accesses(op: FaultOp, path: &str, offset: u64) -> Vec<Access<'_>> {
    let mut v = vec![Access::Path(op, path)];
    if let Some(cpu) = msr_cpu(path) {
        let msr_op = if op == FaultOp::Write {
            FaultOp::Wrmsr
        } else {
            FaultOp::Rdmsr
        };
        #[allow(clippy::cast_possible_truncation)] // the msr driver takes the low 32 bits
        v.push(Access::Msr(msr_op, cpu, MsrAddr::new(offset as u32)));
    }
    v
}

/// The simulated platform as a FUSE filesystem: views at prefixes, one lock around all.
#[derive(Debug)]
pub(crate) struct SimFs {
    inner: Mutex<Inner>,
    /// Times every node reports.
    born: SystemTime,
}

impl SimFs {
    pub(crate) fn new(
        views: Vec<View>,
        faults: SharedFaults,
        clock: Option<SimHandle>,
        counts: SharedCounts,
    ) -> Self {
        Self {
            inner: Mutex::new(Inner {
                views,
                inodes: Inodes::new(),
                dir_modes: HashMap::new(),
                faults,
                clock: clock.map(|sim| (sim, Instant::now())),
                counts,
            }),
            born: SystemTime::now(),
        }
    }

    /// Runs `f` under the lock with the clock brought up to date. A panic in a view is
    /// answered with EIO instead of taking the mount down.
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> io::Result<T>) -> Result<T, Errno> {
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner.sync_clock();
            f(&mut inner)
        }));
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Errno::from(e)),
            Err(_) => Err(Errno::EIO),
        }
    }

    /// `dir` = (permission bits, link count) of a directory.
    fn attr(&self, ino: u64, kind: &NodeKind, file_size: u64, dir: (u16, u32)) -> FileAttr {
        let (kind, perm, size, nlink) = match kind {
            NodeKind::Dir => (FileType::Directory, dir.0, 0, dir.1),
            NodeKind::File { mode } => (FileType::RegularFile, *mode, file_size, 1),
            NodeKind::Symlink { target } => (FileType::Symlink, 0o777, target.len() as u64, 1),
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: 0,
            atime: self.born,
            mtime: self.born,
            ctime: self.born,
            crtime: self.born,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The attributes and TTL of `path`, allocating its inode.
    fn entry(&self, inner: &mut Inner, path: &str) -> io::Result<(FileAttr, Duration)> {
        let kind = inner.kind(path)?;
        let (size, mut ttl) = inner.policy(path);
        if is_device(path, &kind) {
            // Uncached, so that `lseek(SEEK_END)` always asks ([`SimFs::getattr`]).
            ttl = Duration::ZERO;
        }
        let ino = inner.inodes.ino(path);
        let dir = if kind == NodeKind::Dir {
            (inner.dir_mode(path), inner.dir_links(path))
        } else {
            (0, 0)
        };
        Ok((self.attr(ino, &kind, size, dir), ttl))
    }
}

/// Whether `path` is one of the `dev/cpu/N/{msr,cpuid}` device files.
fn is_device(path: &str, kind: &NodeKind) -> bool {
    (path.starts_with("dev/cpu/") || path == "dev/mem") && matches!(kind, NodeKind::File { .. })
}

fn file_type(kind: &NodeKind) -> FileType {
    match kind {
        NodeKind::Dir => FileType::Directory,
        NodeKind::File { .. } => FileType::RegularFile,
        NodeKind::Symlink { .. } => FileType::Symlink,
    }
}

impl Filesystem for SimFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.with(|inner| {
            let path = join(&inner.inodes.path(parent)?, name)?;
            inner.counts.count(Op::Lookup, &path);
            self.entry(inner, &path)
        }) {
            Ok((attr, ttl)) => reply.entry(&ttl, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    /// `lseek(SEEK_END)` on an open file asks for its size with the file handle (plain and
    /// `fstat` ones come without): the `msr` and `cpuid` drivers refuse `SEEK_END`
    /// (`no_seek_end_llseek`), so a device file's is EINVAL.
    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with(|inner| {
            let path = inner.inodes.path(ino)?;
            inner.counts.count(Op::Getattr, &path);
            if fh.is_some() && is_device(&path, &inner.kind(&path)?) {
                return Err(err(EINVAL));
            }
            self.entry(inner, &path)
        }) {
            Ok((attr, ttl)) => reply.attr(&ttl, &attr),
            Err(e) => reply.error(e),
        }
    }

    /// Truncation (`O_TRUNC` of `echo >`) is accepted and ignored, as sysfs and resctrl do;
    /// mode and owner changes are refused.
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.with(|inner| {
            if mode.is_some() || uid.is_some() || gid.is_some() {
                return Err(err(EPERM));
            }
            let path = inner.inodes.path(ino)?;
            self.entry(inner, &path)
        }) {
            Ok((attr, ttl)) => reply.attr(&ttl, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.with(|inner| match inner.kind(&inner.inodes.path(ino)?)? {
            NodeKind::Symlink { target } => Ok(target),
            _ => Err(err(EINVAL)),
        }) {
            Ok(target) => reply.data(target.as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    /// Every file is opened `direct_io`: each `read(2)`/`write(2)` reaches the view with its
    /// own offset and size, as on sysfs and the device drivers. Opening a file without write
    /// permission bits for writing is EACCES, as kernfs does even for root.
    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.with(|inner| {
            let path = inner.inodes.path(ino)?;
            inner.counts.count(Op::Open, &path);
            match inner.kind(&path)? {
                NodeKind::File { mode } => {
                    if flags.acc_mode() != OpenAccMode::O_RDONLY && mode & 0o222 == 0 {
                        return Err(err(EACCES));
                    }
                    Ok(())
                }
                NodeKind::Dir => Err(err(EISDIR)),
                NodeKind::Symlink { .. } => Err(err(ENOENT)),
            }
        }) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.with(|inner| {
            let path = inner.inodes.path(ino)?;
            inner.counts.count(Op::Read, &path);
            inner.check_faults(req.pid(), &io_accesses(FaultOp::Read, &path, offset))?;
            match inner.place(&path)? {
                Place::View(i, rel) => inner.views[i].tree.read(rel, offset, size),
                Place::Above => Err(err(EISDIR)),
            }
        }) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.with(|inner| {
            let path = inner.inodes.path(ino)?;
            inner.counts.count(Op::Write, &path);
            inner.check_faults(req.pid(), &io_accesses(FaultOp::Write, &path, offset))?;
            match inner.place(&path)? {
                // The writer's thread id: resctrl's `tasks` takes `0` as "the writer".
                Place::View(i, rel) => {
                    inner.views[i]
                        .tree
                        .write_by(rel, offset, data, Some(req.pid()))
                }
                Place::Above => Err(err(EISDIR)),
            }
        }) {
            Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _ = self.with(|inner| {
            let path = inner.inodes.path(ino)?;
            inner.counts.count(Op::Release, &path);
            Ok(())
        });
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _d: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.with(|inner| {
            let path = inner.inodes.path(ino)?;
            inner.counts.count(Op::Opendir, &path);
            match inner.kind(&path)? {
                NodeKind::Dir => Ok(()),
                _ => Err(err(ENOTDIR)),
            }
        }) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = self.with(|inner| {
            let path = inner.inodes.path(ino)?;
            inner.counts.count(Op::Readdir, &path);
            let parent = path.rsplit_once('/').map_or("", |(p, _)| p).to_owned();
            let mut out = vec![
                (ino.0, FileType::Directory, ".".to_owned()),
                (
                    inner.inodes.ino(&parent),
                    FileType::Directory,
                    "..".to_owned(),
                ),
            ];
            for (name, kind) in inner.list(&path)? {
                let child = join(&path, OsStr::new(&name))?;
                out.push((inner.inodes.ino(&child), file_type(&kind), name));
            }
            Ok(out)
        });
        match entries {
            Ok(entries) => {
                let skip = usize::try_from(offset).unwrap_or(usize::MAX);
                for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(skip) {
                    if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        match self.with(|inner| {
            let path = join(&inner.inodes.path(parent)?, name)?;
            inner.counts.count(Op::Mkdir, &path);
            inner.check_faults(req.pid(), &[Access::Path(FaultOp::Mkdir, &path)])?;
            match inner.place(&path)? {
                Place::View(i, rel) if !rel.is_empty() => inner.views[i].tree.mkdir(rel)?,
                _ => return Err(err(EPERM)),
            }
            // kernfs creates the directory with the mode asked (less the umask).
            inner.forget_dir_modes(&path);
            #[allow(clippy::cast_possible_truncation)] // masked to 12 bits
            inner
                .dir_modes
                .insert(path.clone(), (mode & !umask & 0o7777) as u16);
            self.entry(inner, &path)
        }) {
            Ok((attr, ttl)) => reply.entry(&ttl, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.with(|inner| {
            let path = join(&inner.inodes.path(parent)?, name)?;
            inner.counts.count(Op::Rmdir, &path);
            inner.check_faults(req.pid(), &[Access::Path(FaultOp::Rmdir, &path)])?;
            match inner.place(&path)? {
                Place::View(i, rel) if !rel.is_empty() => inner.views[i].tree.rmdir(rel)?,
                _ => return Err(err(EPERM)),
            }
            inner.forget_dir_modes(&path);
            Ok(())
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self.with(|inner| {
            let from = join(&inner.inodes.path(parent)?, name)?;
            let to = join(&inner.inodes.path(newparent)?, newname)?;
            inner.counts.count(Op::Rename, &from);
            match (inner.place(&from)?, inner.place(&to)?) {
                (Place::View(i, a), Place::View(j, b)) if i == j && !a.is_empty() => {
                    inner.views[i].tree.rename(a, b)?;
                }
                (Place::View(..), Place::View(..)) => return Err(err(EXDEV)),
                _ => return Err(err(EPERM)),
            }
            // The modes go with the directory.
            let prefix = format!("{from}/");
            let moved: Vec<(String, u16)> = inner
                .dir_modes
                .iter()
                .filter(|(p, _)| **p == from || p.starts_with(&prefix))
                .map(|(p, m)| (format!("{to}{}", &p[from.len()..]), *m))
                .collect();
            inner.forget_dir_modes(&from);
            inner.dir_modes.extend(moved);
            Ok(())
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EPERM);
    }

    /// No view creates files (the VFS answers EACCES for a directory without `create`).
    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        reply.error(Errno::EACCES);
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EACCES);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msr_reads_and_writes_are_seen_as_register_accesses() {
        let a = io_accesses(FaultOp::Write, "dev/cpu/12/msr", 0xc90);
        assert_eq!(a.len(), 2);
        assert!(matches!(
            a[1],
            Access::Msr(FaultOp::Wrmsr, cpu, addr) if cpu.get() == 12 && addr.get() == 0xc90
        ));
        assert_eq!(io_accesses(FaultOp::Read, "dev/cpu/1/cpuid", 0).len(), 1);
        assert_eq!(msr_cpu("dev/cpu/x/msr"), None);
    }

    #[test]
    fn inodes_are_stable_and_the_root_is_one() {
        let mut i = Inodes::new();
        assert_eq!(i.ino(""), 1);
        let a = i.ino("dev");
        assert_eq!(i.ino("dev"), a);
        assert_eq!(i.path(INodeNo(a)).unwrap(), "dev");
        assert!(i.path(INodeNo(0)).is_err());
        assert!(i.path(INodeNo(99)).is_err());
    }
}
