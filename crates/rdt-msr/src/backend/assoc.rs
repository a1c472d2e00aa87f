//! Association: CPUs into classes of service through IA32_PQR_ASSOC (COS in bits 63:32,
//! RMID kept).

use rdt_core::{ClassId, Interface, LogicalCpu, PmuSource, RequestError, Rmid};

use crate::regs::{self, IA32_PQR_ASSOC};
use crate::{MsrError, MsrIo};

use super::MsrBackend;

impl<M: MsrIo, P: PmuSource> MsrBackend<M, P> {
    pub(super) fn check_cpu(&self, cpu: LogicalCpu) -> Result<(), MsrError> {
        self.topology
            .get(cpu)
            .map(|_| ())
            .ok_or_else(|| RequestError::NoSuchCpu(cpu).into())
    }

    /// Read-modify-write of IA32_PQR_ASSOC: COS into bits 63:32, RMID (bits 31:0) kept.
    ///
    /// # Errors
    /// [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu); [`RequestError::Limit`](rdt_core::RequestError::Limit) ([`LimitError::ClassOutOfRange`](rdt_core::LimitError::ClassOutOfRange)) when
    /// `class` is not below the largest class count of the allocation resources (nothing is
    /// written then); a read or write error.
    pub(super) fn associate_one(
        &mut self,
        cpu: LogicalCpu,
        class: ClassId,
    ) -> Result<(), MsrError> {
        self.check_cpu(cpu)?;
        self.caps.check_class(Interface::Msr, class)?;
        let old = self.io.read(cpu, IA32_PQR_ASSOC)?;
        self.io
            .write(cpu, IA32_PQR_ASSOC, regs::pqr_with_cos(old, class.get()))
    }

    /// One read of IA32_PQR_ASSOC: COS from bits 63:32, RMID from bits 9:0.
    ///
    /// # Errors
    /// [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu) or a read error.
    pub(super) fn read_association(
        &mut self,
        cpu: LogicalCpu,
    ) -> Result<(ClassId, Option<Rmid>), MsrError> {
        self.check_cpu(cpu)?;
        let v = self.io.read(cpu, IA32_PQR_ASSOC)?;
        Ok((
            ClassId::new(regs::pqr_cos(v)),
            Some(Rmid::new(regs::pqr_rmid(v))),
        ))
    }
}

#[cfg(test)]
mod tests;
