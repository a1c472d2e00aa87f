//! Reading the tables from a host: `sys/firmware/acpi/tables/{ERDT,MRRM,IRDT}` and the CXL
//! regions `sys/bus/cxl/devices/regionN/{resource,size}` under a sysroot (`/` on a host, a
//! simulated platform's mount or directory in tests), through the workspace's bounded reader
//! (`rdt_host::file::read_regular`: a FIFO, a device or an endless file is refused).

use std::io;
use std::path::{Path, PathBuf};

use rdt_host::file::{ReadError, read_regular, read_text};

use crate::acpi::{MAX_TABLE_LEN, TableError};
use crate::erdt::Erdt;
use crate::irdt::Irdt;
use crate::mrrm::{MemoryRegion, Mrrm, classify};

/// Where the kernel shows ACPI tables, relative to the sysroot.
pub const TABLES_DIR: &str = "sys/firmware/acpi/tables";
/// Where the kernel shows CXL devices and regions, relative to the sysroot.
pub const CXL_DEVICES_DIR: &str = "sys/bus/cxl/devices";

/// The most CXL regions read (the kernel numbers them from 0; a platform has a handful).
const MAX_CXL_REGIONS: usize = 1024;

/// A table could not be read or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadTablesError {
    /// The file could not be read (other than being absent).
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: ReadError,
    },
    /// The table's bytes are not a usable table.
    #[error("{path}: {source}")]
    Table {
        /// The file.
        path: PathBuf,
        /// What is wrong, where.
        #[source]
        source: TableError,
    },
}

/// The RDT 1.3 tables of a host: each `None` when the firmware has none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AcpiTables {
    /// ERDT.
    pub erdt: Option<Erdt>,
    /// MRRM.
    pub mrrm: Option<Mrrm>,
    /// IRDT.
    pub irdt: Option<Irdt>,
    /// CXL regions the kernel maps, as (base, size) in bytes; `None` without `/sys/bus/cxl`.
    pub cxl_windows: Option<Vec<(u64, u64)>>,
}

impl AcpiTables {
    /// Reads and parses the tables under `sysroot`.
    ///
    /// # Errors
    /// [`ReadTablesError`] for a table that is present and cannot be read or parsed (an
    /// absent table is `None`).
    pub fn read(sysroot: &Path) -> Result<Self, ReadTablesError> {
        Ok(Self {
            erdt: read_table(sysroot, "ERDT", Erdt::parse)?,
            mrrm: read_table(sysroot, "MRRM", Mrrm::parse)?,
            irdt: read_table(sysroot, "IRDT", Irdt::parse)?,
            cxl_windows: read_cxl_windows(sysroot),
        })
    }

    /// Parses tables given as bytes by signature (`ERDT`, `MRRM`, `IRDT`; others are
    /// ignored), e.g. a simulated platform's, with the CXL windows the kernel would show.
    ///
    /// # Errors
    /// [`ReadTablesError::Table`] for bytes that do not parse, its path the table's place
    /// under [`TABLES_DIR`].
    pub fn from_bytes<'s, 'b>(
        tables: impl IntoIterator<Item = (&'s str, &'b [u8])>,
        cxl_windows: Option<Vec<(u64, u64)>>,
    ) -> Result<Self, ReadTablesError> {
        let mut out = Self {
            cxl_windows,
            ..Self::default()
        };
        for (sig, bytes) in tables {
            let err = |source| ReadTablesError::Table {
                path: Path::new(TABLES_DIR).join(sig),
                source,
            };
            match sig {
                "ERDT" => out.erdt = Some(Erdt::parse(bytes).map_err(err)?),
                "MRRM" => out.mrrm = Some(Mrrm::parse(bytes).map_err(err)?),
                "IRDT" => out.irdt = Some(Irdt::parse(bytes).map_err(err)?),
                _ => {}
            }
        }
        Ok(out)
    }

    /// Whether the host has what pqos's MMIO interface needs: ERDT and MRRM (pqos v26.03
    /// `lib/cap.c` chooses MMIO when both exist).
    #[must_use]
    pub const fn has_mmio(&self) -> bool {
        self.erdt.is_some() && self.mrrm.is_some()
    }

    /// The memory regions with their kind (DDR/CXL), empty without an MRRM.
    #[must_use]
    pub fn regions(&self) -> Vec<MemoryRegion> {
        self.mrrm
            .as_ref()
            .map(|m| classify(m, self.cxl_windows.as_deref()))
            .unwrap_or_default()
    }
}

fn read_table<T>(
    sysroot: &Path,
    signature: &str,
    parse: fn(&[u8]) -> Result<T, TableError>,
) -> Result<Option<T>, ReadTablesError> {
    let path = sysroot.join(TABLES_DIR).join(signature);
    let bytes = match read_regular(&path, MAX_TABLE_LEN as u64, false) {
        Ok(b) => b,
        Err(ReadError::Open(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ReadTablesError::Read { path, source }),
    };
    parse(&bytes)
        .map(Some)
        .map_err(|source| ReadTablesError::Table { path, source })
}

/// The CXL regions under `sysroot` (`regionN/resource` and `size`, hexadecimal as the kernel
/// writes them), `None` when the bus is absent. A region whose attributes cannot be read or
/// parsed is left out (it decodes no address this can know).
#[must_use]
pub fn read_cxl_windows(sysroot: &Path) -> Option<Vec<(u64, u64)>> {
    let dir = sysroot.join(CXL_DEVICES_DIR);
    let entries = std::fs::read_dir(&dir).ok()?;
    let mut out = Vec::new();
    for e in entries.flatten().take(MAX_CXL_REGIONS) {
        let name = e.file_name();
        let Some(n) = name.to_str().and_then(|n| n.strip_prefix("region")) else {
            continue;
        };
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let num = |attr: &str| -> Option<u64> {
            let text = read_text(e.path().join(attr), 4096).ok()?;
            let t = text.trim();
            u64::from_str_radix(t.strip_prefix("0x").unwrap_or(t), 16).ok()
        };
        if let (Some(base), Some(size)) = (num("resource"), num("size"))
            && size > 0
        {
            out.push((base, size));
        }
    }
    out.sort_unstable();
    Some(out)
}
