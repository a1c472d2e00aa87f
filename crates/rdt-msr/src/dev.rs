//! [`DevCpuMsr`]: MSR access through the Linux `msr` driver (`/dev/cpu/N/msr`).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rdt_core::{LogicalCpu, RequestError};

use crate::{MsrAddr, MsrError, MsrIo};

/// The production [`MsrIo`]: positioned 8-byte reads and writes on `<root>/N/msr`, where
/// the Linux `msr` driver takes the file offset as the register address (RDMSR/WRMSR `ecx`)
/// and the 8 bytes as the little-endian register value.
///
/// Each CPU's device is opened once, read-write, on first use and kept open until the
/// value is dropped (pqos caches its descriptors the same way, `lib/machine.c`). The root is
/// `/dev/cpu` by default; [`DevCpuMsr::with_root`] points it elsewhere (the simulated
/// platform's FUSE mount, or a test directory of regular files).
///
/// Errors are translated into causes (STYLE.md §4): ENOENT -> [`MsrError::NoDevice`] (is
/// the `msr` module loaded?), EACCES/EPERM -> [`MsrError::PermissionDenied`], EIO on a read
/// or write (the CPU raised #GP: no such register, a reserved bit set) ->
/// [`MsrError::Read`] / [`MsrError::Write`] with the driver's error as the source.
///
/// A directory of regular files laid out as `<root>/N/msr` works as a stand-in, with one
/// caveat: a file stores bytes, so registers at adjacent addresses (0xC90, 0xC91) overlap.
/// Use `FakeMsrs` (feature `fake`) or the simulated platform to model registers.
///
/// # Examples
/// ```
/// use rdt_core::LogicalCpu;
/// use rdt_msr::{regs, DevCpuMsr, MsrIo};
///
/// // A regular file stands in for /dev/cpu/0/msr.
/// let root = tempfile::tempdir()?;
/// std::fs::create_dir(root.path().join("0"))?;
/// std::fs::File::create(root.path().join("0/msr"))?.set_len(0x1000)?;
///
/// let mut msr = DevCpuMsr::with_root(root.path());
/// msr.write(LogicalCpu::new(0), regs::IA32_PQR_ASSOC, 1 << 32)?;
/// assert_eq!(msr.read(LogicalCpu::new(0), regs::IA32_PQR_ASSOC)?, 1 << 32);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # References
/// Linux `arch/x86/kernel/msr.c` (the `msr` driver, msr(4)); pqos `lib/machine.c`.
#[derive(Debug)]
pub struct DevCpuMsr {
    root: PathBuf,
    files: HashMap<LogicalCpu, File>,
}

impl DevCpuMsr {
    /// MSR access under `/dev/cpu`.
    #[must_use]
    pub fn new() -> Self {
        Self::with_root("/dev/cpu")
    }

    /// MSR access under `root`: CPU N's device is `<root>/N/msr`. Nothing is opened yet.
    #[must_use]
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            files: HashMap::new(),
        }
    }

    /// The root directory holding `N/msr`.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The device path of `cpu`: `<root>/<cpu>/msr`.
    #[must_use]
    pub fn device_path(&self, cpu: LogicalCpu) -> PathBuf {
        self.root.join(cpu.get().to_string()).join("msr")
    }

    /// The open device of `cpu`, opening it read-write on first use.
    fn file(&mut self, cpu: LogicalCpu) -> Result<&File, MsrError> {
        if !self.files.contains_key(&cpu) {
            let path = self.device_path(cpu);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|source| open_error(path, cpu, source))?;
            self.files.insert(cpu, file);
        }
        // Just inserted or already present.
        self.files
            .get(&cpu)
            .ok_or_else(|| RequestError::NoSuchCpu(cpu).into())
    }
}

impl Default for DevCpuMsr {
    fn default() -> Self {
        Self::new()
    }
}

impl MsrIo for DevCpuMsr {
    fn read(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<u64, MsrError> {
        let mut buf = [0u8; 8];
        let res = self
            .file(cpu)?
            .read_exact_at(&mut buf, u64::from(addr.get()));
        match res {
            Ok(()) => Ok(u64::from_le_bytes(buf)),
            Err(e) if is_permission(&e) => Err(MsrError::PermissionDenied {
                path: self.device_path(cpu),
            }),
            Err(source) => Err(MsrError::Read { cpu, addr, source }),
        }
    }

    fn write(&mut self, cpu: LogicalCpu, addr: MsrAddr, value: u64) -> Result<(), MsrError> {
        let res = self
            .file(cpu)?
            .write_all_at(&value.to_le_bytes(), u64::from(addr.get()));
        match res {
            Ok(()) => Ok(()),
            // Kernel lockdown without msr.allow_writes=on refuses WRMSR with EPERM.
            Err(e) if is_permission(&e) => Err(MsrError::PermissionDenied {
                path: self.device_path(cpu),
            }),
            Err(source) => Err(MsrError::Write {
                cpu,
                addr,
                value,
                source,
            }),
        }
    }
}

/// EACCES and EPERM both map to `PermissionDenied` in std.
fn is_permission(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
}

fn open_error(path: PathBuf, cpu: LogicalCpu, source: io::Error) -> MsrError {
    match source.kind() {
        io::ErrorKind::NotFound => MsrError::NoDevice { path, cpu },
        io::ErrorKind::PermissionDenied => MsrError::PermissionDenied { path },
        _ => MsrError::Open { path, cpu, source },
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::regs;

    /// `<root>/0/msr` as a sparse regular file long enough for every register we touch.
    fn fake_root(cpus: u32) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for cpu in 0..cpus {
            fs::create_dir(root.path().join(cpu.to_string())).unwrap();
            fs::File::create(root.path().join(format!("{cpu}/msr")))
                .unwrap()
                .set_len(0xC000_1000)
                .unwrap();
        }
        root
    }

    #[test]
    fn write_then_read_round_trips_at_the_register_offset() {
        // arrange
        let root = fake_root(2);
        let mut msr = DevCpuMsr::with_root(root.path());
        // act
        msr.write(
            LogicalCpu::new(1),
            regs::IA32_PQR_ASSOC,
            0x0000_0003_0000_0005,
        )
        .unwrap();
        msr.write(LogicalCpu::new(1), regs::AMD_MBA_BW_0.offset(2), 0x800)
            .unwrap();
        // assert
        assert_eq!(
            msr.read(LogicalCpu::new(1), regs::IA32_PQR_ASSOC).unwrap(),
            0x3_0000_0005
        );
        assert_eq!(
            msr.read(LogicalCpu::new(1), regs::AMD_MBA_BW_0.offset(2))
                .unwrap(),
            0x800
        );
        assert_eq!(
            msr.read(LogicalCpu::new(0), regs::IA32_PQR_ASSOC).unwrap(),
            0
        );
    }

    #[test]
    fn value_is_stored_little_endian_at_offset_equal_to_the_address() {
        // arrange
        let root = fake_root(1);
        let mut msr = DevCpuMsr::with_root(root.path());
        // act
        msr.write(
            LogicalCpu::new(0),
            MsrAddr::new(0xC8F),
            0x0102_0304_0506_0708,
        )
        .unwrap();
        // assert
        let f = fs::File::open(root.path().join("0/msr")).unwrap();
        let mut buf = [0u8; 8];
        f.read_exact_at(&mut buf, 0xC8F).unwrap();
        assert_eq!(buf, [8, 7, 6, 5, 4, 3, 2, 1]);
    }

    #[test]
    fn missing_device_is_reported_as_no_device() {
        // arrange
        let root = fake_root(1);
        let mut msr = DevCpuMsr::with_root(root.path());
        // act
        let err = msr
            .read(LogicalCpu::new(7), regs::IA32_PQR_ASSOC)
            .unwrap_err();
        // assert
        assert!(
            matches!(&err, MsrError::NoDevice { cpu, path } if cpu.get() == 7 && path.ends_with("7/msr")),
            "{err:?}"
        );
        assert!(err.to_string().contains("modprobe msr"));
    }

    #[test]
    fn read_past_the_end_is_a_read_error_naming_cpu_and_register() {
        // arrange
        let root = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("0")).unwrap();
        fs::File::create(root.path().join("0/msr")).unwrap();
        let mut msr = DevCpuMsr::with_root(root.path());
        // act
        let err = msr.read(LogicalCpu::new(0), regs::IA32_QM_CTR).unwrap_err();
        // assert
        assert!(
            matches!(err, MsrError::Read { addr, .. } if addr == regs::IA32_QM_CTR),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "RDMSR 0xc8e failed on CPU 0");
    }

    #[test]
    fn each_device_is_opened_once_and_cached() {
        // arrange
        let root = fake_root(1);
        let mut msr = DevCpuMsr::with_root(root.path());
        msr.write(LogicalCpu::new(0), regs::IA32_PQR_ASSOC, 42)
            .unwrap();
        // act: remove the path; the cached descriptor still works
        fs::remove_file(root.path().join("0/msr")).unwrap();
        let v = msr.read(LogicalCpu::new(0), regs::IA32_PQR_ASSOC);
        // assert
        assert_eq!(v.unwrap(), 42);
    }

    #[test]
    fn open_errno_is_translated_into_a_cause() {
        // arrange
        let path = PathBuf::from("/dev/cpu/3/msr");
        let cpu = LogicalCpu::new(3);
        let map = |errno| open_error(path.clone(), cpu, io::Error::from_raw_os_error(errno));
        // act / assert: ENOENT, EACCES, EPERM, ENXIO (CPU offline)
        assert!(matches!(map(2), MsrError::NoDevice { .. }));
        assert!(matches!(map(13), MsrError::PermissionDenied { .. }));
        assert!(matches!(map(1), MsrError::PermissionDenied { .. }));
        assert!(
            matches!(map(6), MsrError::Open { source, .. } if source.raw_os_error() == Some(6))
        );
    }

    #[test]
    fn default_root_is_dev_cpu() {
        assert_eq!(
            DevCpuMsr::new().device_path(LogicalCpu::new(3)),
            Path::new("/dev/cpu/3/msr")
        );
    }
}
