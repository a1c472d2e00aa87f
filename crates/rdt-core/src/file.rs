//! Reading a file that may be hostile (a FIFO, a device, an endless or huge file): the one
//! bounded reader of configuration files ([`crate::config`]) and run files
//! ([`crate::runfile`]).

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why [`read_regular`] read nothing.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Opening failed.
    Open(io::Error),
    /// `fstat` or reading failed.
    Io(io::Error),
    /// Not a regular file (a FIFO, a device, a directory, a socket).
    NotRegular(FileType),
    /// Larger than allowed: the size `fstat` gave, or at least this many bytes read.
    TooLarge(u64),
}

impl ReadError {
    /// The error as an [`io::Error`] (refusals as `InvalidData`, saying why).
    pub(crate) fn into_io(self) -> io::Error {
        match self {
            Self::Open(e) | Self::Io(e) => e,
            Self::NotRegular(t) => io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a regular file ({t:?})"),
            ),
            Self::TooLarge(n) => io::Error::new(
                io::ErrorKind::InvalidData,
                format!("too large ({n} bytes or more)"),
            ),
        }
    }
}

/// Opens `path` without blocking (a FIFO without a writer would block `open` forever) and
/// without making a terminal the controlling one; not through a final symlink when
/// `nofollow`.
pub(crate) fn open_nonblocking(path: &Path, nofollow: bool) -> io::Result<File> {
    let nofollow = if nofollow { libc::O_NOFOLLOW } else { 0 };
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | nofollow)
        .open(path)
}

/// The bytes of the regular file at `path`, at most `max_bytes` of them: anything else is
/// refused before it is read, and a file that grows past the limit after `fstat` is
/// noticed (one byte past it is read).
pub(crate) fn read_regular(
    path: &Path,
    max_bytes: u64,
    nofollow: bool,
) -> Result<Vec<u8>, ReadError> {
    let file = open_nonblocking(path, nofollow).map_err(ReadError::Open)?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(meta.file_type()));
    }
    if meta.len() > max_bytes {
        return Err(ReadError::TooLarge(meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > max_bytes {
        return Err(ReadError::TooLarge(read));
    }
    Ok(bytes)
}

/// The bytes of the kernel attribute file at `path` (a sysfs or resctrl file), at most
/// `max_bytes` of them, refusing what is not a regular file as [`read_regular`] does.
///
/// It stops at the first short read instead of reading again for end of file: the kernel
/// shows an attribute in one piece (sysfs `kernfs_seq_show` and bin attributes copy what
/// remains up to the count asked for), so a read that returns less than asked has reached
/// the end, as it has on a regular file. That halves the reads of a small file: one
/// `read(2)` where `read_to_end` makes two, which counts on a FUSE-served tree (the
/// simulated platform) and on a host reading hundreds of attributes.
pub(crate) fn read_attribute(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    /// What one read asks for: a page, the size of a sysfs attribute's buffer.
    const CHUNK: usize = 4096;
    let mut file = open_nonblocking(path, false).map_err(ReadError::Open)?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(meta.file_type()));
    }
    let limit = usize::try_from(max_bytes.saturating_add(1)).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    loop {
        let want = CHUNK.min(limit - bytes.len());
        let start = bytes.len();
        bytes.resize(start + want, 0);
        let n = loop {
            match file.read(&mut bytes[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        };
        bytes.truncate(start + n);
        if bytes.len() >= limit {
            return Err(ReadError::TooLarge(max_bytes.saturating_add(1)));
        }
        if n < want {
            return Ok(bytes);
        }
    }
}
