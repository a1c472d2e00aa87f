//! [`SimHandle`]: a shared, cloneable handle on one simulated platform.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

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
pub struct SimHandle {
    platform: Arc<Mutex<SimPlatform>>,
    /// With [`SimHandle::with_wall_clock`]: when the model was last advanced to the wall
    /// clock.
    wall: Option<Arc<Mutex<Instant>>>,
}

/// The least wall-clock time [`SimHandle::with_wall_clock`] advances the model by: accesses
/// closer together than this (the reads of one poll) see one model time, and the model's
/// O(CPUs) advance runs at most once a millisecond.
const WALL_CLOCK_STEP: Duration = Duration::from_millis(1);

impl SimHandle {
    /// Wraps a platform whose clock moves only when told ([`SimHandle::advance`]): exact
    /// numbers for tests, and the clock of a program that advances it as it sleeps.
    #[must_use]
    pub fn new(platform: SimPlatform) -> Self {
        Self {
            platform: Arc::new(Mutex::new(platform)),
            wall: None,
        }
    }

    /// Wraps a platform whose clock follows the wall clock, as the mounted platform's does
    /// ([`crate::fs`]): every [`SimHandle::lock`] first advances the model by the
    /// (monotonic) time elapsed since the previous advance, when that is 1 ms or more. A
    /// program that sleeps a second between two polls then sees a second of traffic, with
    /// nothing to call.
    #[must_use]
    pub fn with_wall_clock(platform: SimPlatform) -> Self {
        Self {
            platform: Arc::new(Mutex::new(platform)),
            wall: Some(Arc::new(Mutex::new(Instant::now()))),
        }
    }

    /// Locks the platform (advanced to the wall clock first, for a handle made with
    /// [`SimHandle::with_wall_clock`]). A panic in another holder does not poison it for
    /// good: the platform's invariants hold between register accesses, so the lock is taken
    /// anyway.
    pub fn lock(&self) -> MutexGuard<'_, SimPlatform> {
        let mut platform = self.platform.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(wall) = &self.wall {
            let mut last = wall.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            let dt = now.saturating_duration_since(*last);
            if dt >= WALL_CLOCK_STEP {
                platform.advance(dt);
                *last = now;
            }
        }
        platform
    }

    /// Advances the virtual clock ([`SimPlatform::advance`]).
    pub fn advance(&self, dt: Duration) {
        self.lock().advance(dt);
    }

    /// Every workload's application metric, occupancy and memory traffic now
    /// ([`SimPlatform::workload_metrics`]): ground truth for evaluating a controller, which
    /// reads only registers and kernel files.
    #[must_use]
    pub fn workload_metrics(&self) -> Vec<crate::WorkloadMetric> {
        self.lock().workload_metrics()
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
