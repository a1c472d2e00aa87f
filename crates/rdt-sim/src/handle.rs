//! [`SimHandle`]: a shared, cloneable handle on one simulated platform.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rdt_core::{LogicalCpu, PmuCounts, PmuSource};
use rdt_msr::{MsrAddr, MsrError, MsrIo};

use crate::SimPlatform;

/// A cheap [`Clone`] handle on a [`SimPlatform`] (`Arc<Mutex<_>>`): give one clone to the MSR
/// backend as its [`MsrIo`], another as its [`PmuSource`], and keep one to advance the clock.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use rdt_core::LogicalCpu;
/// use rdt_msr::{MsrAddr, MsrIo};
/// use rdt_sim::{SimHandle, SimPlatform};
///
/// let sim = SimHandle::new(SimPlatform::builtin("broadwell-ep").unwrap());
/// let mut msr = sim.clone();
/// msr.write(LogicalCpu::new(0), MsrAddr::new(0xC91), 0xffe00).unwrap(); // COS1 on socket 0
/// sim.advance(Duration::from_secs(1));
/// assert_eq!(sim.msr_accesses(), (0, 1));
/// ```
#[derive(Clone, Debug)]
pub struct SimHandle(Arc<Mutex<SimPlatform>>);

impl SimHandle {
    /// Wraps a platform.
    #[must_use]
    pub fn new(platform: SimPlatform) -> Self {
        Self(Arc::new(Mutex::new(platform)))
    }

    /// Locks the platform. A panic in another holder does not poison it for good: the
    /// platform's invariants hold between register accesses, so the lock is taken anyway.
    pub fn lock(&self) -> MutexGuard<'_, SimPlatform> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Advances the virtual clock ([`SimPlatform::advance`]).
    pub fn advance(&self, dt: Duration) {
        self.lock().advance(dt);
    }

    /// MSR accesses so far, through any handle or the platform itself: (reads, writes).
    #[must_use]
    pub fn msr_accesses(&self) -> (u64, u64) {
        self.lock().msr_accesses()
    }
}

impl From<SimPlatform> for SimHandle {
    fn from(p: SimPlatform) -> Self {
        Self::new(p)
    }
}

impl MsrIo for SimHandle {
    /// [`SimPlatform`]'s RDMSR.
    fn read(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<u64, MsrError> {
        MsrIo::read(&mut *self.lock(), cpu, addr)
    }

    /// [`SimPlatform`]'s WRMSR.
    fn write(&mut self, cpu: LogicalCpu, addr: MsrAddr, value: u64) -> Result<(), MsrError> {
        self.lock().write(cpu, addr, value)
    }
}

impl PmuSource for SimHandle {
    /// [`SimPlatform`]'s PMU counts.
    fn read(&mut self, cpu: LogicalCpu) -> Option<PmuCounts> {
        PmuSource::read(&mut *self.lock(), cpu)
    }

    /// [`SimPlatform`]'s counts of a host task in a resctrl group.
    fn read_task(&mut self, task: rdt_core::TaskId) -> Option<PmuCounts> {
        self.lock().read_task(task)
    }
}
