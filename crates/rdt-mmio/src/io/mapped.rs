//! `/dev/mem` mapped: each MMIO register reached with one volatile load or store of its
//! width through a shared mapping of the 4 KiB page that holds it. The crate's only `unsafe`
//! lives here.
//!
//! Why not `pread`/`pwrite`: the kernel's `read_mem`/`write_mem` (`drivers/char/mem.c`) reach
//! a page that is not RAM through `xlate_dev_mem_ptr`, which on x86 is
//! `memremap(page, PAGE_SIZE, MEMREMAP_WB)` (`arch/x86/mm/ioremap.c`): a *write-back* mapping
//! of a device register, then copy it with `copy_from_kernel_nofault` / `copy_from_user`,
//! whose access widths are the copy routine's, not the register's. A mapping of `/dev/mem`
//! opened with `O_SYNC` is uncached instead (x86 `phys_mem_access_prot_allowed`: `O_DSYNC` in
//! the file's flags -> `_PAGE_CACHE_MODE_UC_MINUS` when PAT is on, `arch/x86/mm/pat/memtype.c`;
//! `O_SYNC` includes `O_DSYNC`), and an aligned volatile `u16`/`u32`/`u64` access through it
//! is one load or store of that width (what `read_volatile` is documented for: MMIO).
//!
//! pqos v26.03 maps too (`lib/common.c` `pqos_mmap_read`: `O_RDONLY`, `MAP_PRIVATE`;
//! `pqos_mmap_write`: `O_RDWR`, `MAP_SHARED`; one mapping per access, unmapped after it) and
//! dereferences the mapping (`lib/mmio.c`). Here the file is opened once `O_RDWR | O_SYNC`,
//! pages are mapped `MAP_SHARED` on first use and kept ([`MAX_PAGES`] at most), and every
//! access is volatile.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io;

use memmap2::{MmapOptions, MmapRaw};

/// The mapping granule: registers are looked up by the 4 KiB page that holds them (the
/// architectural page; memmap2 maps from the host's page boundary below it if the host's
/// pages are larger, so the window is always covered).
pub(super) const PAGE: u64 = 4096;

/// [`PAGE`] as a mapping length.
const PAGE_LEN: usize = 4096;

/// Pages kept mapped at once; one more unmaps them all first (a dump of a large block
/// remaps as it goes rather than holding thousands of mappings).
pub(super) const MAX_PAGES: usize = 256;

/// The mapped pages of one open `/dev/mem` (or of a regular file standing in for it).
pub(super) struct Pages {
    file: File,
    /// The file's length when it is a regular file (no access may reach past it: a page of a
    /// file wholly past its end faults with SIGBUS); `None` for a device.
    limit: Option<u64>,
    /// Page base (a multiple of [`PAGE`]) -> its mapping. Unmapped when dropped.
    maps: BTreeMap<u64, MmapRaw>,
}

impl fmt::Debug for Pages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pages")
            .field("limit", &self.limit)
            .field("mapped", &self.maps.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Checks `addr` and `width` (2, 4 or 8 bytes, `addr` a multiple of `width`): the page base
/// and the offset in it. An aligned access of at most 8 bytes never crosses a page.
fn locate(addr: u64, width: u8) -> io::Result<(u64, usize)> {
    if !matches!(width, 2 | 4 | 8) || !addr.is_multiple_of(u64::from(width)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a {width}-byte MMIO register at {addr:#x}: 2, 4 or 8 bytes, aligned"),
        ));
    }
    let base = addr & !(PAGE - 1);
    let off =
        usize::try_from(addr - base).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    Ok((base, off))
}

impl Pages {
    /// Maps nothing yet; `limit` as on the field.
    pub(super) fn new(file: File, limit: Option<u64>) -> Self {
        Self {
            file,
            limit,
            maps: BTreeMap::new(),
        }
    }

    /// Pages mapped now.
    pub(super) fn mapped(&self) -> usize {
        self.maps.len()
    }

    /// The address of the `width`-byte register at `addr` in its page's mapping (mapping the
    /// page if it is not yet), checked: aligned, inside the mapping, before the file's end.
    fn pointer(&mut self, addr: u64, width: u8) -> io::Result<*mut u8> {
        let (base, off) = locate(addr, width)?;
        if let Some(limit) = self.limit
            && addr
                .checked_add(u64::from(width))
                .is_none_or(|end| end > limit)
        {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("MMIO register {addr:#x} is past the end of the file ({limit:#x} bytes)"),
            ));
        }
        if !self.maps.contains_key(&base) {
            if self.maps.len() >= MAX_PAGES {
                self.maps.clear();
            }
            let map = MmapOptions::new()
                .offset(base)
                .len(PAGE_LEN)
                .map_raw(&self.file)
                .map_err(|e| io::Error::new(e.kind(), format!("mmap of page {base:#x}: {e}")))?;
            self.maps.insert(base, map);
        }
        let map = &self.maps[&base];
        if off + usize::from(width) > map.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MMIO register {addr:#x} is outside its page's mapping"),
            ));
        }
        // `off < map.len()` (checked above), so this stays inside the mapping; the pointer is
        // only formed here, dereferenced by the callers after the alignment check.
        let ptr = map.as_mut_ptr().wrapping_add(off);
        if !(ptr as usize).is_multiple_of(usize::from(width)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MMIO register {addr:#x}: mapping not aligned to {width} bytes"),
            ));
        }
        Ok(ptr)
    }

    /// Loads the `width`-byte (2, 4 or 8) little-endian register at `addr` with one volatile
    /// load of that width.
    ///
    /// # Errors
    /// A bad width or alignment (InvalidInput), past the end of a regular file
    /// (UnexpectedEof), `mmap(2)` refused (EPERM under `CONFIG_STRICT_DEVMEM` for RAM, ...).
    #[allow(clippy::cast_ptr_alignment, reason = "`pointer` checks the alignment")]
    pub(super) fn load(&mut self, addr: u64, width: u8) -> io::Result<u64> {
        let ptr = self.pointer(addr, width)?;
        // SAFETY: `ptr` points `width` bytes inside a live shared mapping held in `self.maps`
        // (checked in `pointer`; it is unmapped only when removed from the map, which cannot
        // happen while `&mut self` is borrowed here), and is aligned to `width` (checked in
        // `pointer`). The mapping is of a device or of a file at least `addr + width` long (the
        // `limit` check), so the access does not fault. Volatile: the compiler may neither
        // elide, merge, split nor reorder it with the other volatile accesses.
        let v = unsafe {
            match width {
                2 => u64::from(u16::from_le(ptr.cast::<u16>().read_volatile())),
                4 => u64::from(u32::from_le(ptr.cast::<u32>().read_volatile())),
                _ => u64::from_le(ptr.cast::<u64>().read_volatile()),
            }
        };
        Ok(v)
    }

    /// Stores `value` (which must fit `width` bytes) to the register at `addr` with one
    /// volatile store of that width; the neighbouring bytes are not touched.
    ///
    /// # Errors
    /// As [`Pages::load`]; a value wider than the register (InvalidInput).
    #[allow(clippy::cast_ptr_alignment, reason = "`pointer` checks the alignment")]
    pub(super) fn store(&mut self, addr: u64, width: u8, value: u64) -> io::Result<()> {
        let too_wide = |_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{value:#x} does not fit a {width}-byte register"),
            )
        };
        let word = match width {
            2 => Word::W2(u16::try_from(value).map_err(too_wide)?),
            4 => Word::W4(u32::try_from(value).map_err(too_wide)?),
            _ => Word::W8(value),
        };
        let ptr = self.pointer(addr, width)?;
        // SAFETY: as in `load`: `width` bytes inside a live mapping held by `self`, aligned to
        // `width` (a width other than 2, 4, 8 was refused by `pointer`), within the file. The
        // mapping is PROT_READ | PROT_WRITE, MAP_SHARED (`map_raw`) of a file opened for
        // writing, so the store reaches the device (or the file's page cache).
        unsafe {
            match word {
                Word::W2(v) => ptr.cast::<u16>().write_volatile(v.to_le()),
                Word::W4(v) => ptr.cast::<u32>().write_volatile(v.to_le()),
                Word::W8(v) => ptr.cast::<u64>().write_volatile(v.to_le()),
            }
        }
        Ok(())
    }
}

/// A value of a register's width.
#[derive(Debug, Clone, Copy)]
enum Word {
    W2(u16),
    W4(u32),
    W8(u64),
}
