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
