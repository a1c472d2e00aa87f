//! The seam between the MMIO interface and the registers: [`MmioIo`] reads and writes one
//! 64-bit register at a physical address (and 16/32-bit ones: [`MmioIo::read_narrow`],
//! [`MmioIo::write_narrow`]), and reads a run of consecutive registers
//! ([`MmioIo::read_range`], what the register dumps use; [`read_registers`] groups scattered
//! addresses into such runs). [`DevMem`] is the production implementation; the simulator
//! implements the trait in-process and serves `dev/mem` under its mount for [`DevMem`] itself.
//!
//! # How [`DevMem`] reaches a register
//! It depends on what the opened file is, decided once at [`DevMem::open`]:
//! - **A character device** (the real `/dev/mem`): mapped. Each register is one volatile load
//!   or store of its width (8 bytes; 2 or 4 for the narrow methods) through a `MAP_SHARED`
//!   mapping of its 4 KiB page, the file opened `O_RDWR | O_SYNC` so the mapping is uncached;
//!   pages are mapped on first use, kept, and unmapped on drop (`io/mapped.rs`, the crate's
//!   only `unsafe`). Positioned I/O would be wrong there: the kernel's `read_mem`/`write_mem`
//!   (`drivers/char/mem.c`) go through `xlate_dev_mem_ptr`, a write-back (cached) kernel
//!   mapping on x86 (`memremap(.., MEMREMAP_WB)`, `arch/x86/mm/ioremap.c`), and copy with
//!   the copy routine's access widths, not the register's (a 16-bit tagging register could be
//!   written byte by byte). pqos v26.03 maps `/dev/mem` as well (`lib/common.c`
//!   `pqos_mmap_read`/`pqos_mmap_write`).
//! - **A regular file** (the simulator's FUSE-served `dev/mem`, a register dump): positioned
//!   I/O, `pread`/`pwrite` of exactly the register's bytes at offset = physical address. A
//!   FUSE file cannot give register semantics through a mapping (the kernel caches its pages
//!   and writes them back on its own schedule), and a file has no side effects to lose.
//!   [`DevMem::open_mapped`] maps any file anyway; the tests use it on a regular file.
//!
//! `/dev/mem` needs root (CAP_SYS_RAWIO) and a kernel that lets it reach MMIO
//! (`CONFIG_STRICT_DEVMEM` allows device memory, not RAM; `CONFIG_IO_STRICT_DEVMEM` refuses a
//! range a driver has claimed, as Linux's ERDT-aware resctrl does).
//!
//! # References
//! mem(4); Linux `drivers/char/mem.c` (`read_mem`, `write_mem`, `mmap_mem`),
//! `arch/x86/mm/ioremap.c` (`xlate_dev_mem_ptr`), `arch/x86/mm/pat/memtype.c`
//! (`phys_mem_access_prot_allowed`: `O_DSYNC` -> UC-); intel-cmt-cat v26.03 `lib/common.c`,
//! `lib/mmio.c` (read for facts).

#[allow(unsafe_code)]
mod mapped;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
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
    /// can ([`DevMem`] on a regular file: one `pread` of `8 * values.len()` bytes; mapped,
    /// one 8-byte load per register, never a block copy of device memory); the default reads
    /// the registers one by one through [`MmioIo::read`].
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

    fn read_narrow(&mut self, addr: u64, bytes: u8) -> io::Result<u32> {
        (**self).read_narrow(addr, bytes)
    }

    fn write_narrow(&mut self, addr: u64, bytes: u8, value: u32) -> io::Result<()> {
        (**self).write_narrow(addr, bytes, value)
    }
}

/// `/dev/mem` (or `ROOT/dev/mem`), opened once for reading and writing with `O_SYNC`.
///
/// How a register is reached is a property of the file, decided when it is opened (module
/// docs): a character device is **mapped** (one volatile access of the register's width
/// through an uncached `MAP_SHARED` mapping of its page, as device registers need); a
/// regular file (the simulator's FUSE `dev/mem`, a dump) is read and written with
/// **positioned I/O** (`pread`/`pwrite` of exactly the register's bytes).
#[derive(Debug)]
pub struct DevMem {
    path: PathBuf,
    access: Access,
    reads: u64,
    writes: u64,
}

/// The two ways to the registers.
#[derive(Debug)]
enum Access {
    /// `pread`/`pwrite` at offset = physical address.
    Positioned(File),
    /// Volatile loads and stores through mapped pages.
    Mapped(mapped::Pages),
}

impl DevMem {
    /// The production path.
    pub const PATH: &'static str = "/dev/mem";

    /// Opens `root/dev/mem` (`root` = `/` on a host, a simulated platform's mount in tests):
    /// mapped when it is a character device, positioned I/O otherwise ([`DevMem`]).
    ///
    /// # Errors
    /// `open(2)`/`fstat(2)` errors (EACCES/EPERM without CAP_SYS_RAWIO, ENOENT), naming the
    /// path.
    pub fn open(root: &Path) -> io::Result<Self> {
        let path = root.join("dev/mem");
        let file = open_sync(&path)?;
        let meta = file.metadata().map_err(|e| named(&path, &e))?;
        let access = if meta.file_type().is_char_device() {
            Access::Mapped(mapped::Pages::new(file, None))
        } else {
            Access::Positioned(file)
        };
        Ok(Self::new(path, access))
    }

    /// Opens the file at `path` (`O_RDWR | O_SYNC`) and reaches its registers through
    /// mappings whatever it is: what [`DevMem::open`] does for a character device. On a
    /// regular file no access may pass the file's length at open (a mapped page wholly past
    /// a file's end would fault); the file must not shrink while open.
    ///
    /// # Errors
    /// As [`DevMem::open`].
    pub fn open_mapped(path: &Path) -> io::Result<Self> {
        let file = open_sync(path)?;
        let meta = file.metadata().map_err(|e| named(path, &e))?;
        let limit = meta.file_type().is_file().then_some(meta.len());
        Ok(Self::new(
            path.to_path_buf(),
            Access::Mapped(mapped::Pages::new(file, limit)),
        ))
    }

    fn new(path: PathBuf, access: Access) -> Self {
        Self {
            path,
            access,
            reads: 0,
            writes: 0,
        }
    }

    /// The device's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether registers are reached through mappings (a character device, or
    /// [`DevMem::open_mapped`]) rather than `pread`/`pwrite`.
    #[must_use]
    pub const fn is_mapped(&self) -> bool {
        matches!(self.access, Access::Mapped(_))
    }

    /// Pages mapped now (0 with positioned I/O).
    #[must_use]
    pub fn mapped_pages(&self) -> usize {
        match &self.access {
            Access::Mapped(p) => p.mapped(),
            Access::Positioned(_) => 0,
        }
    }

    /// Register reads and writes so far.
    #[must_use]
    pub const fn accesses(&self) -> (u64, u64) {
        (self.reads, self.writes)
    }
}

fn open_sync(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc_o_sync())
        .open(path)
        .map_err(|e| named(path, &e))
}

fn named(path: &Path, e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
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

/// `REG_BYTES` as the mapped module's width.
const WORD: u8 = 8;

impl MmioIo for DevMem {
    fn read(&mut self, addr: u64) -> io::Result<u64> {
        aligned(addr)?;
        self.reads += 1;
        match &mut self.access {
            Access::Positioned(file) => {
                let mut b = [0u8; 8];
                file.read_exact_at(&mut b, addr)?;
                Ok(u64::from_le_bytes(b))
            }
            Access::Mapped(pages) => pages.load(addr, WORD),
        }
    }

    fn write(&mut self, addr: u64, value: u64) -> io::Result<()> {
        aligned(addr)?;
        self.writes += 1;
        match &mut self.access {
            Access::Positioned(file) => file.write_all_at(&value.to_le_bytes(), addr),
            Access::Mapped(pages) => pages.store(addr, WORD, value),
        }
    }

    /// Positioned: one `pread` of the whole run (a short read is continued, as
    /// `read_exact_at` does). Mapped: register by register, each one volatile 8-byte load
    /// (never a block copy of device memory). Counted as `values.len()` register reads in
    /// [`DevMem::accesses`].
    fn read_range(&mut self, addr: u64, values: &mut [u64]) -> io::Result<()> {
        aligned(addr)?;
        let len = u64::try_from(values.len())
            .ok()
            .and_then(|n| n.checked_mul(REG_BYTES))
            .filter(|&n| addr.checked_add(n).is_some())
            .ok_or_else(past_the_end)?;
        match &mut self.access {
            Access::Positioned(file) => {
                let mut b = vec![0u8; usize::try_from(len).map_err(|_| past_the_end())?];
                file.read_exact_at(&mut b, addr)?;
                self.reads += len / REG_BYTES;
                for (v, chunk) in values.iter_mut().zip(b.chunks_exact(8)) {
                    let mut r = [0u8; 8];
                    r.copy_from_slice(chunk);
                    *v = u64::from_le_bytes(r);
                }
            }
            Access::Mapped(pages) => {
                // no overflow: addr + len fits (checked above)
                for (at, v) in (addr..).step_by(8).zip(values.iter_mut()) {
                    *v = pages.load(at, WORD)?;
                    self.reads += 1;
                }
            }
        }
        Ok(())
    }

    fn read_narrow(&mut self, addr: u64, bytes: u8) -> io::Result<u32> {
        narrow(addr, bytes)?;
        self.reads += 1;
        match &mut self.access {
            Access::Positioned(file) => {
                let mut b = [0u8; 4];
                let n = usize::from(bytes);
                file.read_exact_at(&mut b[..n], addr)?;
                Ok(u32::from_le_bytes(b))
            }
            Access::Mapped(pages) => {
                let v = pages.load(addr, bytes)?;
                u32::try_from(v).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
            }
        }
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
        match &mut self.access {
            Access::Positioned(file) => {
                let n = usize::from(bytes);
                file.write_all_at(&value.to_le_bytes()[..n], addr)
            }
            Access::Mapped(pages) => pages.store(addr, bytes, u64::from(value)),
        }
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

    /// A regular file of `len` bytes whose byte k is `k % 251` (no two neighbouring
    /// registers alike), in a fresh directory.
    fn patterned(len: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mem");
        let raw: Vec<u8> = (0..len).map(|k| u8::try_from(k % 251).unwrap()).collect();
        std::fs::write(&path, raw).unwrap();
        (dir, path)
    }

    fn word_at(raw: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(raw[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn open_maps_a_character_device_and_keeps_positioned_io_for_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("dev")).unwrap();
        std::fs::write(dir.path().join("dev/mem"), vec![0u8; 64]).unwrap();
        let m = DevMem::open(dir.path()).unwrap();
        assert!(!m.is_mapped(), "a regular file: pread/pwrite");
        drop(m);
        // a character device that maps like memory: /dev/zero (MAP_SHARED: shared memory the
        // size of the mapping, so only page 0 is backed; a later page would fault)
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("dev")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.path().join("dev/mem")).unwrap();
        let mut m = DevMem::open(root.path()).unwrap();
        assert!(m.is_mapped(), "a character device is mapped");
        assert_eq!(m.read(0x7f8).unwrap(), 0);
        m.write(0x7f8, 0xfeed_f00d_0000_0001).unwrap();
        // pread on /dev/zero would read 0 again: the value comes back through the mapping
        assert_eq!(m.read(0x7f8).unwrap(), 0xfeed_f00d_0000_0001);
        assert_eq!(m.read_narrow(0x7fc, 4).unwrap(), 0xfeed_f00d);
        assert_eq!(m.mapped_pages(), 1, "the page is mapped once and kept");
        assert_eq!(m.accesses(), (3, 1));
    }

    #[test]
    fn mapped_access_has_the_register_width_and_leaves_the_neighbours() {
        let (_dir, path) = patterned(2 * 4096);
        let mut m = DevMem::open_mapped(&path).unwrap();
        assert!(m.is_mapped());
        let before = std::fs::read(&path).unwrap();
        assert_eq!(m.read(0x10).unwrap(), word_at(&before, 0x10));
        assert_eq!(
            m.read_narrow(0x12, 2).unwrap(),
            u32::from(u16::from_le_bytes([before[0x12], before[0x13]]))
        );
        assert_eq!(
            m.read_narrow(0x14, 4).unwrap(),
            u32::from_le_bytes(before[0x14..0x18].try_into().unwrap())
        );
        m.write_narrow(0x22, 2, 0xbeef).unwrap();
        m.write_narrow(0x1004, 4, 0x0bad_cafe).unwrap();
        m.write(0x1ff8, 0x0123_4567_89ab_cdef).unwrap();
        // MAP_SHARED: the file's page cache holds the stores
        let after = std::fs::read(&path).unwrap();
        let mut want = before.clone();
        want[0x22..0x24].copy_from_slice(&0xbeef_u16.to_le_bytes());
        want[0x1004..0x1008].copy_from_slice(&0x0bad_cafe_u32.to_le_bytes());
        want[0x1ff8..0x2000].copy_from_slice(&0x0123_4567_89ab_cdef_u64.to_le_bytes());
        assert_eq!(after, want, "only the written registers' bytes changed");
        assert_eq!(m.read_narrow(0x20, 4).unwrap() >> 16, 0xbeef);
        assert_eq!(m.accesses(), (4, 3));
    }

    #[test]
    fn mapped_access_refuses_bad_widths_alignment_values_and_the_end_of_the_file() {
        let (_dir, path) = patterned(4096 + 64);
        let mut m = DevMem::open_mapped(&path).unwrap();
        let bad = io::ErrorKind::InvalidInput;
        assert_eq!(m.read(12).unwrap_err().kind(), bad);
        assert_eq!(m.write(4, 1).unwrap_err().kind(), bad);
        assert_eq!(m.read_narrow(3, 2).unwrap_err().kind(), bad);
        assert_eq!(m.read_narrow(8, 3).unwrap_err().kind(), bad);
        assert_eq!(m.read_narrow(8, 8).unwrap_err().kind(), bad);
        assert_eq!(m.read_narrow(6, 4).unwrap_err().kind(), bad);
        let e = m.write_narrow(8, 2, 0x1_0000).unwrap_err();
        assert_eq!(e.kind(), bad);
        assert!(e.to_string().contains("0x10000"), "{e}");
        // the last register of the file, then past it: an error, not SIGBUS
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(m.read(4096 + 56).unwrap(), word_at(&raw, 4096 + 56));
        let e = m.read(4096 + 64).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("0x1040"), "{e}");
        assert!(
            m.read(1 << 40).is_err(),
            "a page wholly past the end is not mapped"
        );
        assert_eq!(
            m.read_narrow(4096 + 62, 2).unwrap(),
            u32::from(u16::from_le_bytes([raw[4096 + 62], raw[4096 + 63]]))
        );
        assert!(m.read_narrow(4096 + 64, 2).is_err());
        assert_eq!(m.mapped_pages(), 1, "refused accesses map nothing");
        let mut v = [0u64; 2];
        assert_eq!(
            m.read_range(u64::MAX - 7, &mut v).unwrap_err().kind(),
            bad,
            "a run past 2^64"
        );
        assert!(
            m.read_range(4096 + 56, &mut v).is_err(),
            "a run past the end"
        );
        assert!(DevMem::open_mapped(&path.with_extension("none")).is_err());
    }

    #[test]
    fn mapped_read_range_crosses_pages_register_by_register() {
        let (_dir, path) = patterned(3 * 4096);
        let raw = std::fs::read(&path).unwrap();
        let mut m = DevMem::open_mapped(&path).unwrap();
        let mut v = [0u64; 4];
        m.read_range(4096 - 16, &mut v).unwrap();
        let want: Vec<u64> = (0..4).map(|k| word_at(&raw, 4096 - 16 + 8 * k)).collect();
        assert_eq!(v.to_vec(), want);
        assert_eq!(m.mapped_pages(), 2, "the run spans two pages");
        assert_eq!(m.accesses(), (4, 0), "counted per register");
        m.read_range(0, &mut []).unwrap();
        // read_registers over the mapped path gives what pread gives
        let addrs = [8, 4096, 4104, 2 * 4096 + 8];
        let mapped = read_registers(&mut m, &addrs).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("dev")).unwrap();
        std::fs::copy(&path, dir.path().join("dev/mem")).unwrap();
        let mut p = DevMem::open(dir.path()).unwrap();
        assert_eq!(read_registers(&mut p, &addrs).unwrap(), mapped);
    }

    #[test]
    fn mapped_pages_are_bounded_and_unmapped_on_drop() {
        let pages = mapped::MAX_PAGES + 3;
        let (_dir, path) = patterned(pages * 4096);
        let raw = std::fs::read(&path).unwrap();
        let mut m = DevMem::open_mapped(&path).unwrap();
        for k in 0..pages {
            let at = k * 4096 + 8 * (k % 512);
            assert_eq!(m.read(at as u64).unwrap(), word_at(&raw, at), "page {k}");
            assert!(m.mapped_pages() <= mapped::MAX_PAGES);
        }
        assert!(m.mapped_pages() >= 1);
        let name = path.display().to_string();
        let maps = || {
            std::fs::read_to_string("/proc/self/maps")
                .unwrap()
                .lines()
                .filter(|l| l.ends_with(&name))
                .count()
        };
        assert!(maps() >= 1, "the file is mapped while open");
        drop(m);
        assert_eq!(maps(), 0, "and unmapped when dropped");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// The mapped path and positioned I/O agree on every read and leave the same bytes,
        /// whatever the sequence of widths, addresses (reads in bounds or not; writes in
        /// bounds, as `pwrite` past a file's end grows it) and values.
        #[test]
        fn mapped_and_positioned_access_agree(
            ops in proptest::collection::vec(
                (0u8..6, 0u64..(2 * 4096 + 64), proptest::prelude::any::<u64>()),
                1..40,
            )
        ) {
            let (_a, mapped_path) = patterned(2 * 4096);
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("dev")).unwrap();
            std::fs::copy(&mapped_path, dir.path().join("dev/mem")).unwrap();
            let mut m = DevMem::open_mapped(&mapped_path).unwrap();
            let mut p = DevMem::open(dir.path()).unwrap();
            proptest::prop_assert!(!p.is_mapped());
            for (op, addr, value) in ops {
                let (a, b) = match op {
                    0 => (m.read(addr).ok(), p.read(addr).ok()),
                    1 => {
                        let addr = addr % (2 * 4096);
                        (m.write(addr, value).ok().map(|()| 0), p.write(addr, value).ok().map(|()| 0))
                    }
                    2 | 3 => {
                        let w = 2 + 2 * (op - 2);
                        (m.read_narrow(addr, w).ok().map(u64::from), p.read_narrow(addr, w).ok().map(u64::from))
                    }
                    _ => {
                        let w = 2 + 2 * (op - 4);
                        let addr = addr % (2 * 4096);
                        let v = u32::try_from(value & ((1 << (8 * u32::from(w))) - 1)).unwrap();
                        (m.write_narrow(addr, w, v).ok().map(|()| 0), p.write_narrow(addr, w, v).ok().map(|()| 0))
                    }
                };
                proptest::prop_assert_eq!(a, b, "op {} at {:#x}", op, addr);
            }
            drop(m);
            proptest::prop_assert_eq!(
                std::fs::read(&mapped_path).unwrap(),
                std::fs::read(dir.path().join("dev/mem")).unwrap()
            );
        }
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
