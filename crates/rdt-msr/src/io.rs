//! The MSR access seam: [`MsrIo`], and its production implementation [`DevCpuMsr`].
//!
//! [`DevCpuMsr`]: crate::DevCpuMsr

use std::fmt;

use rdt_core::LogicalCpu;

use crate::MsrError;

/// A model-specific register address (the `ecx` of RDMSR/WRMSR, the file offset in
/// `/dev/cpu/N/msr`). `{:#x}` prints `0xc8f`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MsrAddr(u32);

impl MsrAddr {
    /// Wraps an address.
    #[must_use]
    pub const fn new(addr: u32) -> Self {
        Self(addr)
    }

    /// The raw address.
    #[must_use]
    pub const fn get(self) -> u32 {
        self.0
    }

    /// `self + n`, for register arrays indexed by class (`IA32_L3_QOS_MASK_0 + n`).
    #[must_use]
    pub const fn offset(self, n: u32) -> Self {
        Self(self.0 + n)
    }
}

impl fmt::LowerHex for MsrAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

impl fmt::Display for MsrAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Reads and writes 64-bit model-specific registers of one logical CPU.
///
/// Implementations: [`DevCpuMsr`] (the Linux `msr` driver), the simulated platform of
/// `rdt-sim`, and `FakeMsrs` (feature `fake`). Object safe, so `Box<dyn MsrIo>` is an
/// `MsrIo` too.
///
/// [`DevCpuMsr`]: crate::DevCpuMsr
pub trait MsrIo {
    /// RDMSR `addr` on `cpu`.
    ///
    /// # Errors
    /// [`MsrError`] naming the CPU and register: [`MsrError::Read`] with EIO when the CPU
    /// raised #GP (the register does not exist); [`MsrError::NoDevice`] /
    /// [`MsrError::PermissionDenied`] when the device cannot be used.
    fn read(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<u64, MsrError>;

    /// WRMSR `value` to `addr` on `cpu`.
    ///
    /// # Errors
    /// [`MsrError`] naming the CPU, register and value: [`MsrError::Write`] with EIO when
    /// the CPU raised #GP (a reserved bit set, an out-of-range COS/RMID, a CBM the CPU does
    /// not accept); [`MsrError::NoDevice`] / [`MsrError::PermissionDenied`] when the device
    /// cannot be used.
    fn write(&mut self, cpu: LogicalCpu, addr: MsrAddr, value: u64) -> Result<(), MsrError>;
}

impl<T: MsrIo + ?Sized> MsrIo for Box<T> {
    fn read(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<u64, MsrError> {
        (**self).read(cpu, addr)
    }

    fn write(&mut self, cpu: LogicalCpu, addr: MsrAddr, value: u64) -> Result<(), MsrError> {
        (**self).write(cpu, addr, value)
    }
}

impl<T: MsrIo + ?Sized> MsrIo for &mut T {
    fn read(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<u64, MsrError> {
        (**self).read(cpu, addr)
    }

    fn write(&mut self, cpu: LogicalCpu, addr: MsrAddr, value: u64) -> Result<(), MsrError> {
        (**self).write(cpu, addr, value)
    }
}
