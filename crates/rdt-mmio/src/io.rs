//! The seam between the MMIO interface and the registers: [`MmioIo`] reads and writes one
//! 64-bit register at a physical address, and reads a run of consecutive registers in one
//! access ([`MmioIo::read_range`], what the register dumps use; [`read_registers`] groups
//! scattered addresses into such runs). [`DevMem`] is the production implementation, on
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

    /// Reads `values.len()` consecutive registers starting at `addr` (8-byte aligned):
    /// `values[k]` = the register at `addr + 8 * k`. One access where the implementation
    /// can ([`DevMem`]: one `pread` of `8 * values.len()` bytes); the default reads the
    /// registers one by one through [`MmioIo::read`].
    ///
    /// # Errors
    /// As [`MmioIo::read`]; EINVAL for a run that would pass 2^64. On an error `values` may
    /// hold some of the registers.
    fn read_range(&mut self, addr: u64, values: &mut [u64]) -> io::Result<()> {
        let mut a = Some(addr);
        for v in values {
            let at = a.ok_or_else(past_the_end)?;
            *v = self.read(at)?;
            a = at.checked_add(REG_BYTES);
        }
        Ok(())
    }
}

fn past_the_end() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a run of MMIO registers past physical address 2^64",
    )
}

/// Reads the registers at `addrs` (8-byte aligned, any order) through `io`, each run of
/// consecutive ascending addresses (`addrs[k + 1] == addrs[k] + 8`) in one
/// [`MmioIo::read_range`]: the values in `addrs`'s order. Only reads.
///
/// # Errors
/// The first failed access, naming the address of the run it began.
pub fn read_registers(io: &mut dyn MmioIo, addrs: &[u64]) -> io::Result<Vec<u64>> {
    let mut values = vec![0u64; addrs.len()];
    let mut start = 0;
    while start < addrs.len() {
        let mut end = start + 1;
        while end < addrs.len() && addrs[end - 1].checked_add(REG_BYTES) == Some(addrs[end]) {
            end += 1;
        }
        let addr = addrs[start];
        io.read_range(addr, &mut values[start..end])
            .map_err(|e| io::Error::new(e.kind(), format!("MMIO register 0x{addr:x}: {e}")))?;
        start = end;
    }
    Ok(values)
}

/// A boxed implementation (the facade holds `Box<dyn MmioIo + Send>`).
impl<T: MmioIo + ?Sized> MmioIo for Box<T> {
    fn read(&mut self, addr: u64) -> io::Result<u64> {
        (**self).read(addr)
    }

    fn write(&mut self, addr: u64, value: u64) -> io::Result<()> {
        (**self).write(addr, value)
    }

    fn read_range(&mut self, addr: u64, values: &mut [u64]) -> io::Result<()> {
        (**self).read_range(addr, values)
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

    /// One `pread` of the whole run (a short read is continued, as `read_exact_at` does);
    /// counted as `values.len()` register reads in [`DevMem::accesses`].
    fn read_range(&mut self, addr: u64, values: &mut [u64]) -> io::Result<()> {
        aligned(addr)?;
        let len = u64::try_from(values.len())
            .ok()
            .and_then(|n| n.checked_mul(REG_BYTES))
            .filter(|&n| addr.checked_add(n).is_some())
            .ok_or_else(past_the_end)?;
        let mut b = vec![0u8; usize::try_from(len).map_err(|_| past_the_end())?];
        self.file.read_exact_at(&mut b, addr)?;
        self.reads += len / REG_BYTES;
        for (v, chunk) in values.iter_mut().zip(b.chunks_exact(8)) {
            let mut r = [0u8; 8];
            r.copy_from_slice(chunk);
            *v = u64::from_le_bytes(r);
        }
        Ok(())
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

    #[test]
    fn dev_mem_reads_a_run_of_registers_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("dev")).unwrap();
        let raw: Vec<u8> = (0u64..8).flat_map(|k| (k * 0x1111).to_le_bytes()).collect();
        std::fs::write(dir.path().join("dev/mem"), raw).unwrap();
        let mut m = DevMem::open(dir.path()).unwrap();
        let mut v = [0u64; 3];
        m.read_range(16, &mut v).unwrap();
        assert_eq!(v, [0x2222, 0x3333, 0x4444]);
        assert_eq!(m.accesses(), (3, 0), "counted per register");
        assert_eq!(
            m.read_range(12, &mut v).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert!(
            m.read_range(48, &mut v).is_err(),
            "runs past the end of the file"
        );
        assert_eq!(
            m.read_range(u64::MAX - 7, &mut v).unwrap_err().kind(),
            io::ErrorKind::InvalidInput,
            "a run past 2^64"
        );
        m.read_range(0, &mut []).unwrap();
    }

    /// Registers whose value is their address; records each `read_range` as (addr, count).
    struct Runs(Vec<(u64, usize)>);

    impl MmioIo for Runs {
        fn read(&mut self, addr: u64) -> io::Result<u64> {
            Ok(addr)
        }

        fn write(&mut self, _: u64, _: u64) -> io::Result<()> {
            unreachable!("only reads")
        }

        fn read_range(&mut self, addr: u64, values: &mut [u64]) -> io::Result<()> {
            if addr == 0xdead_0000 {
                return Err(io::Error::other("bus error"));
            }
            self.0.push((addr, values.len()));
            for (k, v) in (0u64..).zip(values.iter_mut()) {
                *v = addr + 8 * k;
            }
            Ok(())
        }
    }

    /// Registers whose value is their address, through the default `read_range`.
    struct One;
    impl MmioIo for One {
        fn read(&mut self, addr: u64) -> io::Result<u64> {
            Ok(addr)
        }
        fn write(&mut self, _: u64, _: u64) -> io::Result<()> {
            unreachable!("only reads")
        }
    }

    #[test]
    fn read_registers_reads_each_consecutive_run_once_in_the_given_order() {
        let mut io = Runs(Vec::new());
        let addrs = [0x10, 0x18, 0x20, 0x40, 0x48, 0x8, 0x8, u64::MAX - 7];
        assert_eq!(read_registers(&mut io, &addrs).unwrap(), addrs);
        assert_eq!(
            io.0,
            [(0x10, 3), (0x40, 2), (0x8, 1), (0x8, 1), (u64::MAX - 7, 1)]
        );
        let e = read_registers(&mut io, &[0x10, 0xdead_0000]).unwrap_err();
        assert!(e.to_string().contains("0xdead0000"), "{e}");
        assert!(read_registers(&mut io, &[]).unwrap().is_empty());
        // the default read_range: register by register, refusing a run past 2^64
        let mut v = [0u64; 2];
        One.read_range(0x100, &mut v).unwrap();
        assert_eq!(v, [0x100, 0x108]);
        assert!(One.read_range(u64::MAX - 7, &mut v).is_err());
    }
}
