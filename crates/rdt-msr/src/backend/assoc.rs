//! Association: CPUs into classes of service through IA32_PQR_ASSOC (COS in bits 63:32,
//! RMID kept).

use rdt_core::{ClassId, CpuSet, Interface, LogicalCpu, PmuSource, RequestError, Rmid};

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

    /// Every CPU and the class checked first, then per CPU, ascending, a read-modify-write
    /// of IA32_PQR_ASSOC: COS into bits 63:32, RMID (bits 31:0) kept.
    ///
    /// # Errors
    /// [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu); [`RequestError::Limit`](rdt_core::RequestError::Limit) ([`LimitError::ClassOutOfRange`](rdt_core::LimitError::ClassOutOfRange)) when
    /// `class` is not below the largest class count of the allocation resources (nothing is
    /// written then); a read or write error (the CPUs before it stay moved).
    pub(super) fn write_associations(
        &mut self,
        cpus: &CpuSet,
        class: ClassId,
    ) -> Result<(), MsrError> {
        for cpu in cpus.iter() {
            self.check_cpu(cpu)?;
        }
        self.caps.check_class(Interface::Msr, class)?;
        for cpu in cpus.iter() {
            let old = self.io.read(cpu, IA32_PQR_ASSOC)?;
            self.io
                .write(cpu, IA32_PQR_ASSOC, regs::pqr_with_cos(old, class.get()))?;
        }
        Ok(())
    }

    /// Every CPU checked first, then one read of IA32_PQR_ASSOC per CPU: COS from bits
    /// 63:32, RMID from bits 9:0.
    ///
    /// # Errors
    /// [`RequestError::NoSuchCpu`](rdt_core::RequestError::NoSuchCpu); a CPU's read error
    /// is that CPU's.
    #[allow(clippy::type_complexity)] // a list of per-CPU results
    pub(super) fn read_associations(
        &mut self,
        cpus: &CpuSet,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), MsrError>)>, MsrError> {
        for cpu in cpus.iter() {
            self.check_cpu(cpu)?;
        }
        Ok(cpus
            .iter()
            .map(|cpu| {
                let v = self.io.read(cpu, IA32_PQR_ASSOC);
                let a = v.map(|v| {
                    (
                        ClassId::new(regs::pqr_cos(v)),
                        Some(Rmid::new(regs::pqr_rmid(v))),
                    )
                });
                (cpu, a)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests;
