//! The seam between the simulated platform's file views and the FUSE layer that serves them.
//!
//! Each view (`dev/cpu`, the sysfs topology, `sys/fs/resctrl`, the `.sim` control directory)
//! is a [`Tree`]: a path-addressed set of directories and files whose contents are computed
//! from the one [`crate::SimPlatform`] model at each call. The FUSE layer maps inodes to
//! paths and calls these methods; tests can call them directly, in-process.
//!
//! Paths are relative to the view's root, `/`-separated, without a leading slash; `""` is the
//! root itself. Errors are `io::Error`s carrying the errno the kernel would return
//! (`io::Error::from_raw_os_error(libc::EINVAL)`), which the FUSE layer passes on unchanged.

use std::io;

/// What a path is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A directory.
    Dir,
    /// A regular file with these permission bits (`0o444` read-only, `0o644` writable).
    File {
        /// Permission bits.
        mode: u16,
    },
    /// A symbolic link to `target` (relative, as sysfs uses them).
    Symlink {
        /// The link text.
        target: String,
    },
}

/// A view of the simulated platform as files.
pub trait Tree: Send {
    /// What `path` is.
    ///
    /// # Errors
    /// ENOENT when it does not exist.
    fn kind(&self, path: &str) -> io::Result<NodeKind>;

    /// The entries of directory `path` (not `.` and `..`), in a stable order.
    ///
    /// # Errors
    /// ENOENT, ENOTDIR.
    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>>;

    /// Up to `size` bytes of file `path` from `offset`. Text files generate their whole
    /// content and return the slice; device files (`N/msr`, `N/cpuid`) interpret the offset
    /// as the register address / CPUID leaf.
    ///
    /// # Errors
    /// ENOENT, EISDIR, EIO (an MSR read that #GPs), or the file's own errno.
    fn read(&mut self, path: &str, offset: u64, size: u32) -> io::Result<Vec<u8>>;

    /// One `write(2)` of `data` at `offset` to file `path`; returns the bytes taken.
    ///
    /// # Errors
    /// EACCES for read-only files, or the file's own errno (EINVAL, ESRCH, ENOSPC, EIO...).
    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> io::Result<usize>;

    /// [`Tree::write`] by the thread `writer` (its id, when known: the FUSE request's or the
    /// calling thread's): resctrl's `tasks` reads `0` as "the writer" (`rdtgroup_move_task`,
    /// `current`). The default ignores the writer.
    ///
    /// # Errors
    /// As [`Tree::write`].
    fn write_by(
        &mut self,
        path: &str,
        offset: u64,
        data: &[u8],
        writer: Option<u32>,
    ) -> io::Result<usize> {
        let _ = writer;
        self.write(path, offset, data)
    }

    /// `mkdir(2)`.
    ///
    /// # Errors
    /// EPERM where directories cannot be made, EEXIST, ENOSPC, ...
    fn mkdir(&mut self, path: &str) -> io::Result<()> {
        let _ = path;
        Err(io::Error::from_raw_os_error(EPERM))
    }

    /// `rmdir(2)`.
    ///
    /// # Errors
    /// EPERM where directories cannot be removed, ENOENT, EBUSY, ...
    fn rmdir(&mut self, path: &str) -> io::Result<()> {
        let _ = path;
        Err(io::Error::from_raw_os_error(EPERM))
    }

    /// `rename(2)`.
    ///
    /// # Errors
    /// EPERM where renames are not supported, or the tree's own errno.
    fn rename(&mut self, from: &str, to: &str) -> io::Result<()> {
        let _ = (from, to);
        Err(io::Error::from_raw_os_error(EPERM))
    }
}

/// Linux errno values the views return (x86-64 numbering, `asm-generic/errno-base.h`).
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: i32 = 1;
    /// No such file or directory.
    pub const ENOENT: i32 = 2;
    /// No such process.
    pub const ESRCH: i32 = 3;
    /// I/O error (the `msr` driver's answer to #GP).
    pub const EIO: i32 = 5;
    /// Permission denied.
    pub const EACCES: i32 = 13;
    /// Device or resource busy.
    pub const EBUSY: i32 = 16;
    /// File exists.
    pub const EEXIST: i32 = 17;
    /// Not a directory.
    pub const ENOTDIR: i32 = 20;
    /// Is a directory.
    pub const EISDIR: i32 = 21;
    /// Invalid argument.
    pub const EINVAL: i32 = 22;
    /// No space left on device (out of CLOSIDs / RMIDs).
    pub const ENOSPC: i32 = 28;
    /// Directory not empty.
    pub const ENOTEMPTY: i32 = 39;
    /// Operation not supported.
    pub const EOPNOTSUPP: i32 = 95;
}

use errno::EPERM;

/// An `io::Error` carrying `code`.
#[must_use]
pub fn err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}
