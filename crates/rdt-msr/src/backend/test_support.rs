//! The platform and helpers of the register-level tests of [`MsrBackend`] against
//! [`FakeMsrs`] (each concern's `tests` module).
//!
//! Platform: 8 CPUs, 2 L3 domains of 4 CPUs (0-3, 4-7), L2 shared by CPU pairs; L3 CAT
//! 20-bit CBM, 16 COS, CDP supported; L2 CAT 8-bit CBM, 8 COS, CDP supported; Intel MBA
//! max delay 90 (granularity 10), 8 COS; CMT/MBM with 112 RMIDs, 24-bit counters, upscaling
//! factor 57344.

use rdt_core::fake::fixtures;
use rdt_core::{CacheBitmask, CacheDomain, Capabilities, CpuSet, LogicalCpu, Topology};

use crate::MsrBackend;
use crate::regs;
use crate::{FakeMsrs, MsrAddr, MsrError};

pub(super) const SCALE: u64 = 57344;

pub(super) const PQR: MsrAddr = regs::IA32_PQR_ASSOC;

pub(super) fn cpu(n: u32) -> LogicalCpu {
    LogicalCpu::new(n)
}

pub(super) fn dom(n: u32) -> CacheDomain {
    CacheDomain::new(n)
}

pub(super) fn mask(bits: u64) -> CacheBitmask {
    CacheBitmask::new(bits).unwrap()
}

pub(super) fn l3(n: u32) -> MsrAddr {
    regs::IA32_L3_QOS_MASK_0.offset(n)
}

/// The platform of these tests: two sockets of 4 CPUs (L3 per socket, L2 per pair), L3
/// CAT 20 bits/16 COS, L2 CAT 8 bits/8 COS, both with CDP, MBA 8 COS, 112 RMIDs at 56 KiB
/// per count ([`fixtures::intel_2s`]).
pub(super) fn caps() -> Capabilities {
    fixtures::intel_2s().0
}

pub(super) fn topology() -> Topology {
    fixtures::intel_2s().1
}

pub(super) fn backend_with(io: FakeMsrs, caps: Capabilities) -> MsrBackend<FakeMsrs> {
    MsrBackend::new(io, caps, topology(), rdt_core::NoPmu).unwrap()
}

pub(super) fn backend(io: FakeMsrs) -> MsrBackend<FakeMsrs> {
    backend_with(io, caps())
}

/// A backend whose counters are zeroed after construction.
pub(super) fn fresh() -> MsrBackend<FakeMsrs> {
    let mut b = backend(FakeMsrs::new());
    b.io_mut().reset_counts();
    b
}

pub(super) fn accesses(b: &MsrBackend<FakeMsrs>) -> u64 {
    b.io().reads() + b.io().writes()
}

pub(super) fn cpus(list: &str) -> CpuSet {
    list.parse().unwrap()
}

pub(super) fn with_cdp_on() -> MsrBackend<FakeMsrs> {
    let mut io = FakeMsrs::new();
    io.set(cpu(0), regs::IA32_L3_QOS_CFG, 1);
    io.set(cpu(4), regs::IA32_L3_QOS_CFG, 1);
    let mut b = backend(io);
    b.io_mut().reset_counts();
    b
}

/// Sets the raw IA32_QM_CTR value CPU `c` returns for (`rmid`, `event`).
pub(super) fn ctr(b: &mut MsrBackend<FakeMsrs>, c: u32, rmid: u32, event: u64, value: u64) {
    b.io_mut().set_counter(cpu(c), rmid, event, value);
}

/// What a refused call must have left alone, counted since the backend was made (or its
/// counts last reset).
#[derive(Clone, Copy, Debug)]
pub(super) enum Untouched {
    /// No register written.
    Writes,
    /// No register read or written.
    Accesses,
    /// Not checked: the case is about the error only.
    Unchecked,
}

/// One call that must be refused: the backend it is made on, the call, the error it must
/// give and what it must not have touched. `case` names it in a failure (the name of the
/// test it was before the tests were tables).
pub(super) struct Refused {
    pub(super) case: &'static str,
    pub(super) backend: fn() -> MsrBackend<FakeMsrs>,
    pub(super) call: fn(&mut MsrBackend<FakeMsrs>) -> Result<(), MsrError>,
    pub(super) error: fn(&MsrError) -> bool,
    pub(super) untouched: Untouched,
}

/// Makes every call of `cases` on its own backend and checks it is refused with its error
/// and touched no more than it may.
pub(super) fn assert_refused(cases: &[Refused]) {
    for c in cases {
        let mut b = (c.backend)();
        let Err(err) = (c.call)(&mut b) else {
            panic!("{}: accepted", c.case);
        };
        assert!((c.error)(&err), "{}: {err}", c.case);
        match c.untouched {
            Untouched::Writes => assert_eq!(b.io().writes(), 0, "{}: written", c.case),
            Untouched::Accesses => assert_eq!(accesses(&b), 0, "{}: accessed", c.case),
            Untouched::Unchecked => {}
        }
    }
}
