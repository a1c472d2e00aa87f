//! The seam between the MMIO interface and the registers: [`MmioIo`] reads and writes one
//! 64-bit register at a physical address. [`DevMem`] is the production implementation, on
//! `/dev/mem` with positioned I/O (`pread`/`pwrite` at offset = physical address, as the
//! kernel's `mem` driver takes it; no `mmap`, so no `unsafe`); the simulator implements the
//! trait in-process and serves `dev/mem` under its mount for [`DevMem`] itself.
//!
//! `/dev/mem` needs root (CAP_SYS_RAWIO) and a kernel that lets it reach MMIO
//! (`CONFIG_STRICT_DEVMEM` allows device memory, not RAM; `CONFIG_IO_STRICT_DEVMEM` refuses a
//! range a driver has claimed, as Linux's ERDT-aware resctrl does).
//!
//! # References
//! mem(4); Linux `drivers/char/mem.c` (`read_mem`, `write_mem`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::regs::REG_BYTES;

/// Access to 64-bit MMIO registers by physical address.
pub trait MmioIo {
    /// Reads the 8-byte register at physical address `addr` (8-byte aligned).
    ///
    /// # Errors
    /// The access failed (EIO, EPERM, EINVAL for an unaligned address).
    fn read(&mut self, addr: u64) -> io::Result<u64>;

    /// Writes `value` to the 8-byte register at `addr`.
    ///
    /// # Errors
    /// As [`MmioIo::read`].
    fn write(&mut self, addr: u64, value: u64) -> io::Result<()>;

    /// Reads the `bytes`-wide (2 or 4) register at `addr` (aligned to its width), as
    /// pqos reads the IRDT links' tagging registers (`lib/iordt.c`, 16- and 32-bit
    /// accesses). The default reads the 8-byte word holding it; [`DevMem`] reads exactly
    /// `bytes`.
    ///
    /// # Errors
    /// As [`MmioIo::read`]; a width other than 2 or 4, or an address not aligned to it.
    fn read_narrow(&mut self, addr: u64, bytes: u8) -> io::Result<u32> {
        let (word, shift, mask) = narrow(addr, bytes)?;
        let v = (self.read(word)? >> shift) & mask;
        u32::try_from(v).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
    }

    /// Writes the `bytes`-wide register at `addr`. The default writes the 8-byte word
    /// holding it with its other bytes as read just before (a simulator's registers);
    /// [`DevMem`] writes exactly `bytes`, leaving the neighbouring registers alone.
    ///
    /// # Errors
    /// As [`MmioIo::read_narrow`].
    fn write_narrow(&mut self, addr: u64, bytes: u8, value: u32) -> io::Result<()> {
        let (word, shift, mask) = narrow(addr, bytes)?;
        if u64::from(value) & !mask != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{value:#x} does not fit a {bytes}-byte register"),
            ));
        }
        let old = self.read(word)?;
        self.write(word, (old & !(mask << shift)) | (u64::from(value) << shift))
    }
}

/// The 8-byte word holding the `bytes`-wide register at `addr`, its bit offset in it and
/// its mask.
fn narrow(addr: u64, bytes: u8) -> io::Result<(u64, u64, u64)> {
    if !matches!(bytes, 2 | 4) || !addr.is_multiple_of(u64::from(bytes)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a {bytes}-byte MMIO register at {addr:#x}: 2 or 4 bytes, aligned"),
        ));
    }
    let word = addr & !(REG_BYTES - 1);
    Ok((
        word,
        (addr - word) * 8,
        (1u64 << (u64::from(bytes) * 8)) - 1,
    ))
}

/// A boxed implementation (the facade holds `Box<dyn MmioIo + Send>`).
impl<T: MmioIo + ?Sized> MmioIo for Box<T> {
    fn read(&mut self, addr: u64) -> io::Result<u64> {
        (**self).read(addr)
    }

    fn write(&mut self, addr: u64, value: u64) -> io::Result<()> {
        (**self).write(addr, value)
    }

    fn read_narrow(&mut self, addr: u64, bytes: u8) -> io::Result<u32> {
        (**self).read_narrow(addr, bytes)
    }

    fn write_narrow(&mut self, addr: u64, bytes: u8, value: u32) -> io::Result<()> {
        (**self).write_narrow(addr, bytes, value)
    }
}

/// `/dev/mem` (or `ROOT/dev/mem`), opened once for reading and writing with `O_SYNC`
/// (uncached access, as device registers need).
#[derive(Debug)]
pub struct DevMem {
    path: PathBuf,
    file: File,
    reads: u64,
    writes: u64,
}

impl DevMem {
    /// The production path.
    pub const PATH: &'static str = "/dev/mem";

    /// Opens `root/dev/mem` (`root` = `/` on a host, a simulated platform's mount in tests).
    ///
    /// # Errors
    /// `open(2)` errors (EACCES/EPERM without CAP_SYS_RAWIO, ENOENT).
    pub fn open(root: &Path) -> io::Result<Self> {
        let path = root.join("dev/mem");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc_o_sync())
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(Self {
            path,
            file,
            reads: 0,
            writes: 0,
        })
    }

    /// The device's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Register reads and writes so far.
    #[must_use]
    pub const fn accesses(&self) -> (u64, u64) {
        (self.reads, self.writes)
    }
}

/// `O_SYNC` on Linux (`0o4010000`), without a libc dependency for one constant.
const fn libc_o_sync() -> i32 {
    0o4_010_000
}

fn aligned(addr: u64) -> io::Result<()> {
    if addr.is_multiple_of(REG_BYTES) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("MMIO register address {addr:#x} is not 8-byte aligned"),
        ))
    }
}

impl MmioIo for DevMem {
    fn read(&mut self, addr: u64) -> io::Result<u64> {
        aligned(addr)?;
        self.reads += 1;
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, addr)?;
        Ok(u64::from_le_bytes(b))
    }

    fn write(&mut self, addr: u64, value: u64) -> io::Result<()> {
        aligned(addr)?;
        self.writes += 1;
        self.file.write_all_at(&value.to_le_bytes(), addr)
    }

    fn read_narrow(&mut self, addr: u64, bytes: u8) -> io::Result<u32> {
        narrow(addr, bytes)?;
        self.reads += 1;
        let mut b = [0u8; 4];
        let n = usize::from(bytes);
        self.file.read_exact_at(&mut b[..n], addr)?;
        Ok(u32::from_le_bytes(b))
    }

    fn write_narrow(&mut self, addr: u64, bytes: u8, value: u32) -> io::Result<()> {
        let (_, _, mask) = narrow(addr, bytes)?;
        if u64::from(value) & !mask != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{value:#x} does not fit a {bytes}-byte register"),
            ));
        }
        self.writes += 1;
        let n = usize::from(bytes);
        self.file.write_all_at(&value.to_le_bytes()[..n], addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_mem_reads_and_writes_8_bytes_at_the_physical_address() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("dev")).unwrap();
        std::fs::write(dir.path().join("dev/mem"), vec![0u8; 64]).unwrap();
        let mut m = DevMem::open(dir.path()).unwrap();
        m.write(16, 0x0123_4567_89ab_cdef).unwrap();
        assert_eq!(m.read(16).unwrap(), 0x0123_4567_89ab_cdef);
        assert_eq!(m.read(8).unwrap(), 0);
        let raw = std::fs::read(dir.path().join("dev/mem")).unwrap();
        assert_eq!(raw[16..24], 0x0123_4567_89ab_cdef_u64.to_le_bytes());
        assert_eq!(m.read(12).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(m.accesses(), (2, 1));
        assert!(m.read(4096).is_err(), "past the end of the file");
        assert!(DevMem::open(&dir.path().join("nowhere")).is_err());
    }
}
