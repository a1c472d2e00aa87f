//! Register-level tests of monitoring: start, stop, reset, polls, PMU and uncore groups
//! ([`super::super::test_support`]).

use std::collections::HashMap;

use rdt_core::fake::fixtures;
use rdt_core::{
    Backend, BackendExt, CpuSet, Feature, LogicalCpu, MonEvents, MonGroupId, PmuCounts, PmuSource,
    RequestError, Rmid,
};

use crate::MsrBackend;
use crate::backend::test_support::{
    PQR, Refused, SCALE, Untouched, assert_refused, backend_with, caps, cpu, cpus, ctr, fresh,
    topology,
};
use crate::regs::{self, EVT_LLC_OCCUPANCY, EVT_MBM_LOCAL, EVT_MBM_TOTAL};
use crate::{FakeMsrs, MsrAddr, MsrError};

// ---- monitoring: start / stop / reset ----

#[test]
fn start_keeps_the_class_of_service() {
    let mut b = fresh();
    b.io_mut().set(cpu(1), PQR, regs::pqr_assoc(6, 0));
    b.start_monitoring(&cpus("1"), MonEvents::PQOS_ALL).unwrap();
    assert_eq!(b.io().get(cpu(1), PQR), Some(regs::pqr_assoc(6, 1)));
}

/// A group that cannot start is refused before any write: CPUs monitored already, offline
/// CPUs, empty groups.
#[test]
fn start_refusals_write_nothing() {
    assert_refused(&[
        Refused {
            case: "a_cpu_with_a_non_zero_rmid_refuses_start_and_nothing_is_written",
            backend: || {
                let mut b = fresh();
                b.io_mut().set(cpu(2), PQR, regs::pqr_assoc(0, 5));
                b
            },
            call: |b| {
                b.start_monitoring(&cpus("1-3"), MonEvents::PQOS_ALL)
                    .map(drop)
            },
            error: |e| matches!(e, MsrError::Request(RequestError::AlreadyMonitored { what, by: Some(by) }) if what == "CPU 2" && by.starts_with("RMID 5")),
            untouched: Untouched::Writes,
        },
        Refused {
            case: "a_cpu_already_in_a_group_of_this_backend_refuses_start",
            backend: || {
                let mut b = fresh();
                b.start_monitoring(&cpus("1"), MonEvents::IPC).unwrap(); // PMU only: no RMID written
                b
            },
            call: |b| b.start_monitoring(&cpus("0-1"), MonEvents::IPC).map(drop),
            error: |e| matches!(e, MsrError::Request(RequestError::AlreadyMonitored { what, .. }) if what == "CPU 1"),
            untouched: Untouched::Unchecked,
        },
        Refused {
            case: "offline_cpus_and_empty_groups_are_refused: offline CPU",
            backend: fresh,
            call: |b| {
                b.start_monitoring(&cpus("8"), MonEvents::PQOS_ALL)
                    .map(drop)
            },
            error: |e| matches!(e, MsrError::Request(RequestError::NoSuchCpu(_))),
            untouched: Untouched::Unchecked,
        },
        Refused {
            case: "offline_cpus_and_empty_groups_are_refused: no CPU",
            backend: fresh,
            call: |b| {
                b.start_monitoring(&CpuSet::new(), MonEvents::PQOS_ALL)
                    .map(drop)
            },
            error: |e| matches!(e, MsrError::Request(RequestError::EmptyGroup)),
            untouched: Untouched::Unchecked,
        },
        Refused {
            case: "offline_cpus_and_empty_groups_are_refused: no event",
            backend: fresh,
            call: |b| b.start_monitoring(&cpus("0"), MonEvents::empty()).map(drop),
            error: |e| matches!(e, MsrError::Request(RequestError::EmptyGroup)),
            untouched: Untouched::Unchecked,
        },
    ]);
}

#[test]
fn unsupported_events_are_refused_naming_the_event() {
    // arrange
    let mut c = caps();
    c.monitoring.get_mut().unwrap().events.mbm_total = false;
    let mut b = backend_with(FakeMsrs::new(), c);
    // act
    let err = b
        .start_monitoring(&cpus("0"), MonEvents::PQOS_ALL)
        .unwrap_err();
    // assert
    assert_eq!(
        err.to_string(),
        "monitoring of total memory bandwidth (needed for remote memory bandwidth) is not supported on \
         this platform"
    );
    assert!(
        b.start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL)
            .is_ok()
    );
}

#[test]
fn pmu_events_start_without_a_pmu() {
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("3"), MonEvents::IPC | MonEvents::LLC_MISSES)
        .unwrap();
    b.poll().unwrap();
    let v = b.values(g).unwrap();
    assert_eq!(
        (
            v.instructions_delta,
            v.llc_misses_delta,
            v.llc_occupancy_bytes
        ),
        (None, None, None)
    );
    assert_eq!(b.rmid_of(cpu(3)).unwrap(), Some(Rmid::new(0)));
}

#[test]
fn stop_restores_rmid_0_keeping_cos_and_frees_the_rmid() {
    // arrange
    let mut b = fresh();
    b.io_mut().set(cpu(1), PQR, regs::pqr_assoc(2, 0));
    let g = b
        .start_monitoring(&cpus("0-1"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    // act
    b.stop_monitoring(g).unwrap();
    // assert
    assert_eq!(b.io().get(cpu(1), PQR), Some(regs::pqr_assoc(2, 0)));
    assert_eq!(b.io().get(cpu(0), PQR), Some(0));
    assert!(b.values(g).is_none());
    assert!(
        matches!(b.stop_monitoring(g), Err(MsrError::Request(RequestError::NoSuchGroup(id))) if id == g)
    );
    b.start_monitoring(&cpus("2"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    assert_eq!(b.rmid_of(cpu(2)).unwrap(), Some(Rmid::new(1)));
}

#[test]
fn reset_monitoring_zeroes_every_rmid_keeping_cos_and_forgets_groups() {
    // arrange
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    b.io_mut().set(cpu(7), PQR, regs::pqr_assoc(3, 44));
    // act
    b.reset_monitoring().unwrap();
    // assert
    assert_eq!(b.io().get(cpu(7), PQR), Some(regs::pqr_assoc(3, 0)));
    assert_eq!(b.io().get(cpu(0), PQR), Some(0));
    assert!(b.values(g).is_none());
}

// ---- monitoring: poll ----

#[test]
fn poll_does_exactly_two_msr_accesses_per_event_per_context() {
    // arrange: a group over both L3 domains, occupancy + local + total (remote implies both)
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("2-5"), MonEvents::PQOS_ALL | MonEvents::MBM_TOTAL)
        .unwrap();
    b.io_mut().reset_counts();
    // act
    b.poll().unwrap();
    // assert: 3 events x 2 contexts x (1 WRMSR EVTSEL + 1 RDMSR QM_CTR)
    assert_eq!((b.io().writes(), b.io().reads()), (6, 6));
    assert!(b.values(g).is_some());
}

/// Starting a group reads its MBM counters once (one WRMSR IA32_QM_EVTSEL and one RDMSR
/// IA32_QM_CTR per MBM event per context), not its occupancy: what a start costs beyond
/// tagging the CPUs.
#[test]
fn start_reads_each_mbm_counter_once_and_not_the_occupancy() {
    // arrange: the same group with occupancy only, and with occupancy, local and total
    let cost = |events| {
        let mut b = fresh();
        b.start_monitoring(&cpus("2-5"), events).unwrap();
        (b.io().writes(), b.io().reads())
    };
    // act
    let occupancy = cost(MonEvents::LLC_OCCUPANCY);
    let all = cost(MonEvents::PQOS_ALL | MonEvents::MBM_TOTAL);
    // assert: 2 MBM events x 2 contexts more
    assert_eq!((all.0 - occupancy.0, all.1 - occupancy.1), (4, 4));
}

#[test]
fn first_poll_reports_the_traffic_since_start_and_scaled_occupancy_summed_over_domains() {
    // arrange: RMID 1 counted before this group (a previous user of the RMID)
    let mut b = fresh();
    ctr(&mut b, 3, 1, EVT_MBM_LOCAL, 400);
    ctr(&mut b, 3, 1, EVT_MBM_TOTAL, 500);
    let g = b
        .start_monitoring(&cpus("3-4"), MonEvents::PQOS_ALL)
        .unwrap();
    ctr(&mut b, 3, 1, EVT_LLC_OCCUPANCY, 10);
    ctr(&mut b, 4, 1, EVT_LLC_OCCUPANCY, 5);
    ctr(&mut b, 3, 1, EVT_MBM_LOCAL, 1000);
    ctr(&mut b, 3, 1, EVT_MBM_TOTAL, 2000);
    // act
    b.poll().unwrap();
    // assert: the counts since the reading at start, not a zero first sample
    let v = b.values(g).unwrap().clone();
    assert_eq!(v.llc_occupancy_bytes, Some(15 * SCALE));
    assert_eq!(v.mbm_local_delta_bytes, Some(600 * SCALE));
    assert_eq!(v.mbm_total_delta_bytes, Some(1500 * SCALE));
    assert_eq!(v.mbm_remote_delta_bytes, Some(900 * SCALE));
    assert_eq!(
        v.mbm_local_bytes,
        Some(600 * SCALE),
        "cumulative from the start"
    );
    assert!(v.interval > std::time::Duration::ZERO, "since the start");
    assert!(v.mbm_local_bytes_per_s().is_some_and(|r| r > 0.0));
}

/// A value of [`rdt_core::MonValues`]: its name and how to read it.
type Field = (&'static str, fn(&rdt_core::MonValues) -> Option<u64>);

const OCCUPANCY: Field = ("llc_occupancy_bytes", |v| v.llc_occupancy_bytes);
const LOCAL: Field = ("mbm_local_delta_bytes", |v| v.mbm_local_delta_bytes);
const TOTAL: Field = ("mbm_total_delta_bytes", |v| v.mbm_total_delta_bytes);
const REMOTE: Field = ("mbm_remote_delta_bytes", |v| v.mbm_remote_delta_bytes);

/// One group polled once per round after the raw IA32_QM_CTR values `(CPU, RMID, event,
/// value)` of that round are set, and the values the last poll must give.
struct Polled {
    case: &'static str,
    cpus: &'static str,
    events: MonEvents,
    rounds: &'static [&'static [(u32, u32, u64, u64)]],
    expect: &'static [(Field, Option<u64>)],
}

/// MBM deltas are scaled, remote is total minus local (0 when local exceeds total), a
/// counter wrapping at its width (24 bits) gives the right delta, and data bits above the
/// width are ignored.
#[test]
fn polls_scale_counters_and_handle_their_width() {
    let cases = [
        Polled {
            case: "mbm_deltas_are_scaled_and_remote_is_total_minus_local",
            cpus: "0",
            events: MonEvents::MBM_REMOTE,
            rounds: &[
                &[(0, 1, EVT_MBM_LOCAL, 100), (0, 1, EVT_MBM_TOTAL, 100)],
                &[(0, 1, EVT_MBM_LOCAL, 130), (0, 1, EVT_MBM_TOTAL, 150)],
            ],
            expect: &[
                (LOCAL, Some(30 * SCALE)),
                (TOTAL, Some(50 * SCALE)),
                (REMOTE, Some(20 * SCALE)),
                (OCCUPANCY, None),
            ],
        },
        Polled {
            case: "remote_is_zero_when_local_exceeds_total",
            cpus: "0",
            events: MonEvents::MBM_REMOTE,
            rounds: &[&[], &[(0, 1, EVT_MBM_LOCAL, 50), (0, 1, EVT_MBM_TOTAL, 40)]],
            expect: &[(REMOTE, Some(0))],
        },
        Polled {
            case: "a_counter_wrapping_at_24_bits_gives_the_right_delta",
            cpus: "4",
            events: MonEvents::MBM_LOCAL,
            rounds: &[
                &[(4, 1, EVT_MBM_LOCAL, 0xff_fff0)],
                &[(4, 1, EVT_MBM_LOCAL, 0x10)],
            ],
            expect: &[(LOCAL, Some(0x20 * SCALE))],
        },
        Polled {
            case: "data_bits_above_the_counter_width_are_ignored",
            cpus: "0",
            events: MonEvents::LLC_OCCUPANCY,
            rounds: &[&[(0, 1, EVT_LLC_OCCUPANCY, (1 << 30) | 3)]],
            expect: &[(OCCUPANCY, Some(3 * SCALE))],
        },
    ];
    for c in &cases {
        let mut b = fresh();
        let g = b.start_monitoring(&cpus(c.cpus), c.events).unwrap();
        for round in c.rounds {
            for &(cpu_n, rmid, event, value) in *round {
                ctr(&mut b, cpu_n, rmid, event, value);
            }
            b.poll().unwrap();
        }
        let v = b.values(g).unwrap();
        for ((name, get), want) in c.expect {
            assert_eq!(get(v), *want, "{}: {name}", c.case);
        }
    }
}

/// A one-event group on CPU 0 (RMID 1) whose IA32_QM_CTR gives `raw` first, then `next`
/// (if any): the value one poll gives and its (WRMSR, RDMSR) count.
struct Flagged {
    case: &'static str,
    events: MonEvents,
    event: u64,
    field: Field,
    raw: u64,
    next: Option<u64>,
    want: Option<u64>,
    cost: (u64, u64),
}

/// IA32_QM_CTR's Error bit (63) makes a poll select the event again and read again, the
/// Unavailable bit (62) read again, at most four times each ([`crate::QM_CTR_ATTEMPTS`]);
/// the value is `None` if no read gives data.
#[test]
fn a_flagged_counter_is_retried_then_given_up() {
    let cases = [
        Flagged {
            case: "the_error_bit_gives_none_after_four_attempts_reselecting_each_time",
            events: MonEvents::LLC_OCCUPANCY,
            event: EVT_LLC_OCCUPANCY,
            field: OCCUPANCY,
            raw: regs::QM_CTR_ERROR,
            next: None,
            want: None,
            cost: (4, 4),
        },
        Flagged {
            case: "the_unavailable_bit_gives_none_after_four_reads",
            events: MonEvents::MBM_LOCAL,
            event: EVT_MBM_LOCAL,
            field: LOCAL,
            raw: regs::QM_CTR_UNAVAILABLE | 5,
            next: None,
            want: None,
            cost: (1, 4),
        },
        Flagged {
            case: "a_transient_unavailable_is_retried_and_the_value_used",
            events: MonEvents::LLC_OCCUPANCY,
            event: EVT_LLC_OCCUPANCY,
            field: OCCUPANCY,
            raw: regs::QM_CTR_UNAVAILABLE,
            next: Some(2),
            want: Some(2 * SCALE),
            cost: (1, 2),
        },
    ];
    for c in &cases {
        let mut b = fresh();
        let g = b.start_monitoring(&cpus("0"), c.events).unwrap();
        ctr(&mut b, 0, 1, c.event, c.raw);
        if let Some(next) = c.next {
            b.io_mut().queue_counter(cpu(0), 1, c.event, next);
        }
        b.io_mut().reset_counts();
        b.poll().unwrap();
        let (name, get) = c.field;
        assert_eq!(get(b.values(g).unwrap()), c.want, "{}: {name}", c.case);
        assert_eq!(
            (b.io().writes(), b.io().reads()),
            c.cost,
            "{}: accesses",
            c.case
        );
    }
}

#[test]
fn after_a_failed_read_the_next_delta_is_unknown_then_counting_resumes() {
    // arrange
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::MBM_LOCAL)
        .unwrap();
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, 10);
    b.poll().unwrap(); // first: 10 since the start
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, regs::QM_CTR_UNAVAILABLE);
    b.poll().unwrap(); // failed: None
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, 50);
    b.poll().unwrap(); // rebaseline: None
    let after_gap = b.values(g).unwrap().mbm_local_delta_bytes;
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, 53);
    // act
    b.poll().unwrap();
    // assert
    assert_eq!(after_gap, None);
    assert_eq!(b.values(g).unwrap().mbm_local_delta_bytes, Some(3 * SCALE));
}

/// PMU counts by CPU, advanced by the test.
#[derive(Default)]
struct TablePmu(HashMap<LogicalCpu, PmuCounts>);

impl PmuSource for TablePmu {
    fn read(&mut self, cpu: LogicalCpu) -> Option<PmuCounts> {
        self.0.get(&cpu).copied()
    }
}

#[test]
fn pmu_deltas_are_summed_over_the_group_cpus() {
    // arrange
    let mut pmu = TablePmu::default();
    for c in [1, 2] {
        pmu.0.insert(
            cpu(c),
            PmuCounts {
                instructions: 1000,
                cycles: 500,
                llc_misses: 7,
                llc_references: Some(70),
            },
        );
    }
    let mut b = MsrBackend::new(FakeMsrs::new(), caps(), topology(), pmu).unwrap();
    let g = b.start_monitoring(&cpus("1-2"), MonEvents::PMU).unwrap();
    b.poll().unwrap();
    b.pmu_mut().0.insert(
        cpu(1),
        PmuCounts {
            instructions: 3000,
            cycles: 1500,
            llc_misses: 10,
            llc_references: Some(100),
        },
    );
    b.pmu_mut().0.insert(
        cpu(2),
        PmuCounts {
            instructions: 1500,
            cycles: 1000,
            llc_misses: 8,
            llc_references: Some(90),
        },
    );
    // act
    b.poll().unwrap();
    // assert
    let v = b.values(g).unwrap().clone();
    assert_eq!(
        (v.instructions_delta, v.cycles_delta, v.llc_misses_delta),
        (Some(2500), Some(1500), Some(4))
    );
    assert_eq!(v.llc_references_delta, Some(30 + 20));
    assert!((v.ipc().unwrap() - 2500.0 / 1500.0).abs() < 1e-12);
}

#[test]
fn pmu_deltas_are_none_if_any_cpu_cannot_be_read() {
    let mut pmu = TablePmu::default();
    pmu.0.insert(cpu(1), PmuCounts::default());
    let mut b = MsrBackend::new(FakeMsrs::new(), caps(), topology(), pmu).unwrap();
    let g = b.start_monitoring(&cpus("1-2"), MonEvents::IPC).unwrap();
    b.poll().unwrap();
    assert_eq!(b.values(g).unwrap().instructions_delta, None);
    assert_eq!(b.values(g).unwrap().llc_misses_delta, None);
}

#[test]
fn poll_propagates_a_failing_register_access() {
    assert_refused(&[Refused {
        case: "poll_propagates_a_failing_register_access",
        backend: || {
            let mut b = fresh();
            b.start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY)
                .unwrap();
            let mut strict = FakeMsrs::failing_unknown();
            strict.set(cpu(0), regs::IA32_QM_EVTSEL, 0);
            *b.io_mut() = strict;
            b
        },
        call: MsrBackend::poll,
        error: |e| matches!(e, MsrError::Read { addr, .. } if *addr == regs::IA32_QM_CTR),
        untouched: Untouched::Unchecked,
    }]);
}

/// The test platform with the uncore PCIe events (a Skylake-SP would report them).
fn uncore_backend() -> MsrBackend<FakeMsrs> {
    let mut c = caps();
    c.uncore_pcie = true;
    let mut b = backend_with(FakeMsrs::new(), c);
    b.io_mut().reset_counts();
    b
}

#[test]
fn uncore_group_programs_one_cpu_per_socket_and_sums_the_sockets() {
    // arrange: CHA 0 counter 0 (0xE08) of socket 0 (CPU 0) and socket 1 (CPU 4)
    let mut b = uncore_backend();
    let ctr = MsrAddr::new(0xE08);
    // act
    let g = b
        .start_uncore_monitoring(&[0, 1], MonEvents::UNCORE)
        .unwrap();
    // assert: 6 writes per event per socket, on the lowest CPU of each socket only
    assert_eq!(b.io().writes(), 2 * 4 * 6);
    for c in [0, 4] {
        assert_eq!(b.io().get(cpu(c), MsrAddr::new(0xE01)), Some(0x40_2435));
        assert_eq!(b.io().get(cpu(c), MsrAddr::new(0xE36)), Some(0x1004_9033));
        assert_eq!(b.io().get(cpu(c), MsrAddr::new(0xE30)), Some(0x1_0000));
    }
    assert_eq!(b.io().get(cpu(1), MsrAddr::new(0xE00)), None);
    b.io_mut().set(cpu(0), ctr, 1000);
    b.io_mut().set(cpu(4), ctr, 234);
    b.poll().unwrap();
    let v = b.values(g).unwrap().uncore.unwrap();
    assert_eq!(v.llc_miss_pcie_read, Some(1234));
    assert_eq!(v.llc_ref_pcie_write, Some(0));
    // stop: "reset control" in each CHA's box control
    b.stop_monitoring(g).unwrap();
    assert_eq!(b.io().get(cpu(4), MsrAddr::new(0xE20)), Some(0x1_0101));
    assert!(b.values(g).is_none());
}

#[test]
fn uncore_monitoring_is_refused_without_the_events_or_for_a_missing_socket() {
    let unsupported =
        |e: &MsrError| matches!(e, MsrError::Request(RequestError::UnsupportedEvent { .. }));
    assert_refused(&[
        Refused {
            case: "uncore events where the CPU has none",
            backend: fresh,
            call: |b| b.start_uncore_monitoring(&[0], MonEvents::UNCORE).map(drop),
            error: unsupported,
            untouched: Untouched::Unchecked,
        },
        Refused {
            case: "a missing socket",
            backend: uncore_backend,
            call: |b| b.start_uncore_monitoring(&[7], MonEvents::UNCORE).map(drop),
            error: |e| e.to_string().contains("socket domain 7 does not exist"),
            untouched: Untouched::Writes,
        },
        Refused {
            case: "a non-uncore event",
            backend: uncore_backend,
            call: |b| {
                b.start_uncore_monitoring(&[0], MonEvents::LLC_OCCUPANCY)
                    .map(drop)
            },
            error: unsupported,
            untouched: Untouched::Writes,
        },
        Refused {
            case: "a socket of another uncore group",
            backend: || {
                let mut b = uncore_backend();
                b.start_uncore_monitoring(&[1], MonEvents::UNCORE).unwrap();
                assert_eq!(b.io().writes(), 4 * 6, "the start of socket 1");
                b.io_mut().reset_counts();
                b
            },
            call: |b| {
                b.start_uncore_monitoring(&[0, 1], MonEvents::UNCORE)
                    .map(drop)
            },
            error: |e| e.to_string().contains("socket 1 is already monitored"),
            untouched: Untouched::Writes,
        },
    ]);
}

#[test]
fn mbm_of_an_rmid_above_the_erratum_threshold_is_corrected_as_the_kernel_does() {
    // arrange: a Broadwell-X (family 6 model 4FH) with 24 RMIDs: the kernel's table entry
    // (15, 0.969650) corrects RMIDs 16..=23; 20 CPUs in one L3
    let mut caps = caps();
    caps.signature = Some(0x0004_06f1);
    if let Feature::Supported(m) = &mut caps.monitoring {
        m.num_rmids = 24;
        m.max_rmid = 23;
    }
    let topo = fixtures::topology((0..20).map(|c| (c, 0, c, 0)));
    let mut b = MsrBackend::new(FakeMsrs::new(), caps, topo, rdt_core::NoPmu).unwrap();
    let groups: Vec<MonGroupId> = (0..16)
        .map(|c| {
            b.start_monitoring(&cpus(&c.to_string()), MonEvents::MBM_TOTAL)
                .unwrap()
        })
        .collect();
    // RMIDs 1..=16 in CPU order: CPU 14 has RMID 15 (the threshold), CPU 15 RMID 16
    for (c, rmid) in [(14, 15), (15, 16)] {
        assert_eq!(b.rmid_of(cpu(c)).unwrap(), Some(Rmid::new(rmid)));
        ctr(&mut b, c, rmid, EVT_MBM_TOTAL, 1_000);
    }
    b.poll().unwrap();
    for (c, rmid) in [(14, 15), (15, 16)] {
        ctr(&mut b, c, rmid, EVT_MBM_TOTAL, 1_000 + 1_000_000);
    }
    // act
    b.poll().unwrap();
    // assert: 1,000,000 counts; the RMID above the threshold × 1016752 / 2^20
    let delta = |g: MonGroupId| b.values(g).unwrap().mbm_total_delta_bytes;
    assert_eq!(delta(groups[14]), Some(1_000_000 * SCALE));
    assert_eq!(
        delta(groups[15]),
        Some(((1_000_000 * 1_016_752) >> 20) * SCALE)
    );
}
