//! [`FakeMsrs`]: an in-memory [`MsrIo`] for tests and benches (feature `fake`).

use std::collections::{HashMap, VecDeque};
use std::io;

use rdt_core::LogicalCpu;

use crate::{MsrAddr, MsrError, MsrIo, regs};

/// An in-memory register file: a `HashMap<(LogicalCpu, MsrAddr), u64>` that counts every
/// access, so tests and benches can assert how many RDMSR/WRMSR an operation costs.
///
/// Registers never written read as 0, or, after [`FakeMsrs::failing_unknown`], fail like a
/// register the CPU lacks ([`MsrError::Read`] / [`MsrError::Write`] with EIO, the `msr`
/// driver's answer to #GP).
///
/// IA32_QM_CTR can be given per-(CPU, RMID, event) values with [`FakeMsrs::set_counter`] and
/// [`FakeMsrs::queue_counter`]: a read of IA32_QM_CTR then answers for the RMID and event
/// last written to IA32_QM_EVTSEL on that CPU, as the hardware does. Without such a value
/// it reads as an ordinary register.
///
/// This is a register map, not a CPU model: it raises no #GP for a bad mask or COS. The
/// simulated platform (`rdt-sim`) models the hardware.
///
/// # Examples
/// ```
/// use rdt_core::LogicalCpu;
/// use rdt_msr::{regs, FakeMsrs, MsrIo};
///
/// let mut msrs = FakeMsrs::new();
/// msrs.write(LogicalCpu::new(0), regs::IA32_PQR_ASSOC, 1 << 32)?;
/// assert_eq!(msrs.read(LogicalCpu::new(0), regs::IA32_PQR_ASSOC)?, 1 << 32);
/// assert_eq!((msrs.reads(), msrs.writes()), (1, 1));
/// # Ok::<(), rdt_msr::MsrError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct FakeMsrs {
    regs: HashMap<(LogicalCpu, MsrAddr), u64>,
    /// IA32_QM_CTR answers by (CPU, RMID, event id); the front is returned, and popped while
    /// more than one value is queued.
    counters: HashMap<(LogicalCpu, u32, u64), VecDeque<u64>>,
    fail_unknown: bool,
    reads: u64,
    writes: u64,
}

impl FakeMsrs {
    /// An empty register file; unknown registers read as 0 and accept writes.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty register file where registers not [`set`](Self::set) beforehand fail with
    /// EIO on read and on write (as a register the CPU lacks does).
    #[must_use]
    pub fn failing_unknown() -> Self {
        Self {
            fail_unknown: true,
            ..Self::default()
        }
    }

    /// Sets a register without counting an access (test arrangement).
    pub fn set(&mut self, cpu: LogicalCpu, addr: MsrAddr, value: u64) {
        self.regs.insert((cpu, addr), value);
    }

    /// A register's value without counting an access; `None` if never set or written.
    #[must_use]
    pub fn get(&self, cpu: LogicalCpu, addr: MsrAddr) -> Option<u64> {
        self.regs.get(&(cpu, addr)).copied()
    }

    /// Makes IA32_QM_CTR on `cpu` read `value` (raw, flags included) whenever IA32_QM_EVTSEL
    /// on `cpu` selects `event` for `rmid`. Replaces any queued values.
    pub fn set_counter(&mut self, cpu: LogicalCpu, rmid: u32, event: u64, value: u64) {
        self.counters
            .insert((cpu, rmid, event & 0xff), VecDeque::from([value]));
    }

    /// Queues `value` after the current IA32_QM_CTR values of (`cpu`, `rmid`, `event`):
    /// each read returns the front and pops it while more values remain, so the last one
    /// sticks.
    pub fn queue_counter(&mut self, cpu: LogicalCpu, rmid: u32, event: u64, value: u64) {
        self.counters
            .entry((cpu, rmid, event & 0xff))
            .or_default()
            .push_back(value);
    }

    /// RDMSRs done through [`MsrIo::read`] so far.
    #[must_use]
    pub const fn reads(&self) -> u64 {
        self.reads
    }

    /// WRMSRs done through [`MsrIo::write`] so far.
    #[must_use]
    pub const fn writes(&self) -> u64 {
        self.writes
    }

    /// Sets both access counters back to 0.
    pub const fn reset_counts(&mut self) {
        self.reads = 0;
        self.writes = 0;
    }

    fn eio() -> io::Error {
        io::Error::from_raw_os_error(5) // EIO: what the msr driver returns when RDMSR/WRMSR #GPs
    }

    fn counter_for(&mut self, cpu: LogicalCpu) -> Option<u64> {
        let sel = *self.regs.get(&(cpu, regs::IA32_QM_EVTSEL))?;
        let rmid = regs::pqr_rmid(sel >> 32); // EVTSEL bits 41:32: RMID
        let event = sel & 0xff; // EVTSEL bits 7:0: event id
        let q = self.counters.get_mut(&(cpu, rmid, event))?;
        if q.len() > 1 {
            q.pop_front()
        } else {
            q.front().copied()
        }
    }
}

impl MsrIo for FakeMsrs {
    fn read(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<u64, MsrError> {
        self.reads += 1;
        if addr == regs::IA32_QM_CTR
            && let Some(v) = self.counter_for(cpu)
        {
            return Ok(v);
        }
        match self.regs.get(&(cpu, addr)) {
            Some(&v) => Ok(v),
            None if self.fail_unknown => Err(MsrError::Read {
                cpu,
                addr,
                source: Self::eio(),
            }),
            None => Ok(0),
        }
    }

    fn write(&mut self, cpu: LogicalCpu, addr: MsrAddr, value: u64) -> Result<(), MsrError> {
        self.writes += 1;
        if self.fail_unknown && !self.regs.contains_key(&(cpu, addr)) {
            return Err(MsrError::Write {
                cpu,
                addr,
                value,
                source: Self::eio(),
            });
        }
        self.regs.insert((cpu, addr), value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU0: LogicalCpu = LogicalCpu::new(0);

    #[test]
    fn unknown_registers_read_as_zero_by_default() {
        let mut m = FakeMsrs::new();
        assert_eq!(m.read(CPU0, regs::IA32_L3_QOS_CFG).unwrap(), 0);
        assert_eq!(m.reads(), 1);
    }

    #[test]
    fn failing_unknown_gives_eio_read_and_write_errors() {
        // arrange
        let mut m = FakeMsrs::failing_unknown();
        m.set(CPU0, regs::IA32_PQR_ASSOC, 0);
        // act
        let r = m.read(CPU0, regs::IA32_L3_QOS_CFG);
        let w = m.write(CPU0, regs::IA32_L3_QOS_CFG, 1);
        // assert
        let Err(MsrError::Read { source, .. }) = r else {
            panic!("{r:?}")
        };
        assert_eq!(source.raw_os_error(), Some(5));
        assert!(matches!(w, Err(MsrError::Write { value: 1, .. })));
        assert!(m.write(CPU0, regs::IA32_PQR_ASSOC, 7).is_ok());
        assert_eq!((m.reads(), m.writes()), (1, 2));
    }

    #[test]
    fn qm_ctr_answers_for_the_rmid_and_event_selected_on_that_cpu() {
        // arrange
        let mut m = FakeMsrs::new();
        m.set_counter(CPU0, 3, 2, 100);
        m.set_counter(CPU0, 3, 3, 50);
        // act
        m.write(
            CPU0,
            regs::IA32_QM_EVTSEL,
            regs::qm_evtsel(3, regs::EVT_MBM_LOCAL),
        )
        .unwrap();
        let local = m.read(CPU0, regs::IA32_QM_CTR).unwrap();
        m.write(
            CPU0,
            regs::IA32_QM_EVTSEL,
            regs::qm_evtsel(3, regs::EVT_MBM_TOTAL),
        )
        .unwrap();
        let total = m.read(CPU0, regs::IA32_QM_CTR).unwrap();
        // assert
        assert_eq!((local, total), (50, 100));
    }

    #[test]
    fn queued_counter_values_are_consumed_and_the_last_one_sticks() {
        // arrange
        let mut m = FakeMsrs::new();
        m.set_counter(CPU0, 1, 1, regs::QM_CTR_UNAVAILABLE);
        m.queue_counter(CPU0, 1, 1, 9);
        m.write(CPU0, regs::IA32_QM_EVTSEL, regs::qm_evtsel(1, 1))
            .unwrap();
        // act
        let seq: Vec<u64> = (0..3)
            .map(|_| m.read(CPU0, regs::IA32_QM_CTR).unwrap())
            .collect();
        // assert
        assert_eq!(seq, [regs::QM_CTR_UNAVAILABLE, 9, 9]);
    }
}
