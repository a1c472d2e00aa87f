//! Counts of the filesystem requests the mount served, for benchmarks that must show what a
//! client does per poll (opens, reads, stats, directory scans).
//!
//! Every request on a path outside `.sim/` is counted once, by kind, as the kernel passed it
//! to the filesystem. The resctrl view is served with no attribute or entry caching, so each
//! `stat(2)`, path lookup, `open(2)`, `read(2)` and `getdents(2)` of a client there reaches
//! the filesystem and is counted; the static views (`dev/cpu`, sysfs) let the kernel cache
//! names and attributes for a second, so their lookups are undercounted.
//!
//! Read as text at `DIR/.sim/stats` (one `KIND COUNT` line per kind, in the order of
//! [`OpCounts`]'s fields); writing `reset` there zeroes the counts.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// Requests served, by kind (FUSE operation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Name lookups (a path component resolved: `open`, `stat`, `mkdir` of an uncached name).
    pub lookup: u64,
    /// Attribute reads (`stat(2)`, `fstat(2)` and the kernel's revalidation).
    pub getattr: u64,
    /// File opens.
    pub open: u64,
    /// File closes (the last close of an open file).
    pub release: u64,
    /// `read(2)`/`pread(2)` calls on files.
    pub read: u64,
    /// `write(2)`/`pwrite(2)` calls on files.
    pub write: u64,
    /// Directory opens.
    pub opendir: u64,
    /// Directory listing requests (`getdents(2)`; one listing may take several).
    pub readdir: u64,
    /// `mkdir(2)` calls.
    pub mkdir: u64,
    /// `rmdir(2)` calls.
    pub rmdir: u64,
    /// `rename(2)` calls.
    pub rename: u64,
}

/// A kind of request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Lookup,
    Getattr,
    Open,
    Release,
    Read,
    Write,
    Opendir,
    Readdir,
    Mkdir,
    Rmdir,
    Rename,
}

impl OpCounts {
    fn slot(&mut self, op: Op) -> &mut u64 {
        match op {
            Op::Lookup => &mut self.lookup,
            Op::Getattr => &mut self.getattr,
            Op::Open => &mut self.open,
            Op::Release => &mut self.release,
            Op::Read => &mut self.read,
            Op::Write => &mut self.write,
            Op::Opendir => &mut self.opendir,
            Op::Readdir => &mut self.readdir,
            Op::Mkdir => &mut self.mkdir,
            Op::Rmdir => &mut self.rmdir,
            Op::Rename => &mut self.rename,
        }
    }

    /// `(kind, count)` pairs in the order of the text form.
    #[must_use]
    pub fn pairs(&self) -> [(&'static str, u64); 11] {
        [
            ("lookup", self.lookup),
            ("getattr", self.getattr),
            ("open", self.open),
            ("release", self.release),
            ("read", self.read),
            ("write", self.write),
            ("opendir", self.opendir),
            ("readdir", self.readdir),
            ("mkdir", self.mkdir),
            ("rmdir", self.rmdir),
            ("rename", self.rename),
        ]
    }

    /// The counts of `self` minus those of an earlier snapshot.
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Self {
            lookup: d(self.lookup, earlier.lookup),
            getattr: d(self.getattr, earlier.getattr),
            open: d(self.open, earlier.open),
            release: d(self.release, earlier.release),
            read: d(self.read, earlier.read),
            write: d(self.write, earlier.write),
            opendir: d(self.opendir, earlier.opendir),
            readdir: d(self.readdir, earlier.readdir),
            mkdir: d(self.mkdir, earlier.mkdir),
            rmdir: d(self.rmdir, earlier.rmdir),
            rename: d(self.rename, earlier.rename),
        }
    }
}

impl fmt::Display for OpCounts {
    /// One `KIND COUNT` line per kind.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, n) in self.pairs() {
            writeln!(f, "{name} {n}")?;
        }
        Ok(())
    }
}

/// The counts shared by the filesystem, the control tree and the [`super::Mount`].
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedCounts(Arc<Mutex<OpCounts>>);

impl SharedCounts {
    /// Counts one request on `path` (relative to the mount root), unless it is under `.sim`.
    pub(crate) fn count(&self, op: Op, path: &str) {
        if path == ".sim" || path.starts_with(".sim/") {
            return;
        }
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .slot(op) += 1;
    }

    pub(crate) fn snapshot(&self) -> OpCounts {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn reset(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = OpCounts::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_kind_skip_the_control_directory_and_reset() {
        let c = SharedCounts::default();
        c.count(Op::Read, "sys/fs/resctrl/mon_data/mon_L3_00/llc_occupancy");
        c.count(Op::Read, "dev/cpu/0/msr");
        c.count(Op::Open, "sys/fs/resctrl/schemata");
        c.count(Op::Read, ".sim/stats");
        c.count(Op::Lookup, ".sim");
        let s = c.snapshot();
        assert_eq!((s.read, s.open, s.lookup), (2, 1, 0));
        assert!(
            s.to_string().starts_with("lookup 0\ngetattr 0\nopen 1\n"),
            "{s}"
        );
        let later = {
            c.count(Op::Read, "x");
            c.snapshot()
        };
        assert_eq!(later.since(&s).read, 1);
        c.reset();
        assert_eq!(c.snapshot(), OpCounts::default());
    }
}
