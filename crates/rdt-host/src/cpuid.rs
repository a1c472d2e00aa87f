//! CPUID from files: the Linux per-CPU device `/dev/cpu/N/cpuid` ([`DevCpuid`]) and canonical
//! dump files ([`CpuidDumpFromPath`]). rdt-core decodes what they give ([`CpuidSource`],
//! [`CpuidDump::parse`]); reading them is here.
//!
//! # References
//! Linux `arch/x86/kernel/cpuid.c` (`cpuid_read`).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rdt_core::LogicalCpu;
use rdt_core::cpuid::{CpuidDump, CpuidRegs, CpuidSource, DumpError, MAX_DUMP_BYTES};

/// The Linux per-CPU CPUID device, `<root>/cpu/N/cpuid` (root `/dev` on a real system).
///
/// The kernel's `cpuid` driver runs CPUID on CPU N with EAX = the low 32 bits of the file
/// offset and ECX = the high 32 bits, and returns 16 bytes: EAX, EBX, ECX, EDX,
/// little-endian. Reads use `read_exact_at`, so one open device serves any number of
/// queries.
///
/// # References
/// Linux `arch/x86/kernel/cpuid.c` (`cpuid_read`).
#[derive(Debug)]
pub struct DevCpuid {
    file: File,
    cpu: LogicalCpu,
    path: PathBuf,
}

impl DevCpuid {
    /// The device root on a real system.
    pub const DEFAULT_ROOT: &'static str = "/dev";

    /// The device path of `cpu` under `root`: `<root>/cpu/<cpu>/cpuid`.
    #[must_use]
    pub fn device_path(root: impl AsRef<Path>, cpu: LogicalCpu) -> PathBuf {
        let root = root.as_ref();
        root.join("cpu").join(cpu.to_string()).join("cpuid")
    }

    /// Opens `<root>/cpu/<cpu>/cpuid` for reading.
    ///
    /// # Errors
    /// The `io::Error` of `open`: `NotFound` when the `cpuid` module is not loaded or the CPU
    /// is offline, `PermissionDenied` without root (or CAP_SYS_RAWIO).
    pub fn open(root: impl AsRef<Path>, cpu: LogicalCpu) -> io::Result<Self> {
        let root = root.as_ref();
        let path = Self::device_path(root, cpu);
        let file = File::open(&path)?;
        Ok(Self { file, cpu, path })
    }

    /// The CPU this device answers for.
    #[must_use]
    pub const fn cpu(&self) -> LogicalCpu {
        self.cpu
    }

    /// The device path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file offset that selects (`leaf`, `subleaf`): `leaf | subleaf << 32`.
    #[must_use]
    pub const fn offset(leaf: u32, subleaf: u32) -> u64 {
        leaf as u64 | (subleaf as u64) << 32
    }
}

impl CpuidSource for DevCpuid {
    /// Reads 16 bytes at [`DevCpuid::offset`]; a read error answers `None`.
    fn cpuid(&self, leaf: u32, subleaf: u32) -> Option<CpuidRegs> {
        let mut buf = [0u8; 16];
        self.file
            .read_exact_at(&mut buf, Self::offset(leaf, subleaf))
            .ok()?;
        let word = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        Some(CpuidRegs {
            eax: word(0),
            ebx: word(4),
            ecx: word(8),
            edx: word(12),
        })
    }
}

/// A [`CpuidDump`] read from a file: `CpuidDump::from_path(path)` with this trait in scope
/// (`use rdt_pqos::CpuidDumpFromPath`).
pub trait CpuidDumpFromPath: Sized {
    /// Reads and parses a dump file: a regular file of at most [`MAX_DUMP_BYTES`]
    /// ([`crate::file::read_text`]).
    ///
    /// # Errors
    /// [`DumpError::Io`] when the file cannot be read, is not a regular file, is larger than
    /// [`MAX_DUMP_BYTES`] or is not UTF-8; [`DumpError::InFile`] wrapping the
    /// [`CpuidDump::parse`] error (which names the line) when it does not parse.
    fn from_path(path: impl AsRef<Path>) -> Result<Self, DumpError>;
}

impl CpuidDumpFromPath for CpuidDump {
    fn from_path(path: impl AsRef<Path>) -> Result<Self, DumpError> {
        let path = path.as_ref();
        let text =
            crate::file::read_text(path, MAX_DUMP_BYTES).map_err(|source| DumpError::Io {
                path: path.to_owned(),
                source,
            })?;
        Self::parse(&text).map_err(|e| DumpError::InFile {
            path: path.to_owned(),
            source: Box::new(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_path_wraps_parse_errors_with_the_path() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.txt");
        std::fs::write(&path, "# x\nnot a row\n").unwrap();
        // act
        let err = CpuidDump::from_path(&path).unwrap_err();
        // assert
        let DumpError::InFile { path: p, source } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(p, &path);
        assert!(matches!(**source, DumpError::BadLine { line: 2, .. }));
        let missing = CpuidDump::from_path(dir.path().join("none")).unwrap_err();
        assert!(matches!(missing, DumpError::Io { .. }));
    }

    #[test]
    fn dev_cpuid_reads_16_bytes_at_leaf_or_subleaf_shifted_32() {
        // arrange: a sparse file standing in for the device, with one answer at
        // leaf 0x10, subleaf 1
        let dir = tempfile::tempdir().unwrap();
        let cpu_dir = dir.path().join("cpu/3");
        std::fs::create_dir_all(&cpu_dir).unwrap();
        let file = File::create(cpu_dir.join("cpuid")).unwrap();
        let mut bytes = Vec::new();
        for w in [0xau32, 0x600, 0x4, 0xf] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        file.write_all_at(&bytes, 0x10 | 1 << 32).unwrap();
        // act
        let dev = DevCpuid::open(dir.path(), LogicalCpu::new(3)).unwrap();
        // assert
        assert_eq!(dev.cpu(), LogicalCpu::new(3));
        assert_eq!(DevCpuid::offset(0x10, 1), 0x1_0000_0010);
        assert_eq!(
            dev.cpuid(0x10, 1),
            Some(CpuidRegs {
                eax: 0xa,
                ebx: 0x600,
                ecx: 4,
                edx: 0xf
            })
        );
        assert_eq!(dev.cpuid(0x10, 2), None, "short read past the end of file");
        assert!(DevCpuid::open(dir.path(), LogicalCpu::new(4)).is_err());
    }
}
