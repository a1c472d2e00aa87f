//! Uncore PCIe LLC monitoring on Skylake-SP (CPU model 0x55), as pqos does it
//! (`lib/uncore_monitoring.c`, intel-cmt-cat v25.04): each of the four events has a CHA of
//! its own (CHA 0: LLC misses of PCIe reads, 1: misses of PCIe writes, 2: references of
//! PCIe reads, 3: references of PCIe writes), programmed on one CPU of every socket of the
//! group, and the group's value is the sum of that CHA's counter 0 over its sockets.
//!
//! Start, per socket and event (`_setup_counter`): box control unfreeze, freeze; counter
//! control 0 = enable | umask << 8 | `TOR_INSERTS`; filter 1 = the opcode match; box
//! control reset counters; unfreeze. Stop (`uncore_mon_stop`): box control reset control.
//! Poll (`uncore_mon_poll`): counter 0, read on the same CPU.
//!
//! One difference from pqos: the delta of each socket is taken modulo the 48-bit counter
//! width before the sockets are summed, so a counter that wraps does not give a huge
//! delta (pqos subtracts the summed raw values).

use std::time::Instant;

use rdt_core::{LogicalCpu, MonEvents, MonGroupId, MonValues, UncoreCounts};

use crate::regs::cha::{
    BOX_CTL_FREEZE, BOX_CTL_RESET_CONTROL, BOX_CTL_RESET_COUNTERS, BOX_CTL_UNFREEZE, COUNTER_WIDTH,
    EVENT_TOR_INSERTS, FILTER1_PCIE_READ, FILTER1_PCIE_WRITE, OFFSET_CTL0, OFFSET_CTR0,
    OFFSET_FILTER1, UMASK_MISS, UMASK_REF, box_ctl, event_select,
};
use crate::{MsrError, MsrIo};

/// How pqos counts one uncore event: its CHA, `TOR_INSERTS` unit mask and filter 1 value
/// (`uncore_events_skx[]`; the CHA is the event's index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UncoreEvent {
    /// The event.
    pub event: MonEvents,
    /// The CHA whose counter 0 counts it.
    pub cha: u32,
    /// Unit mask of the event select.
    pub umask: u64,
    /// Filter 1 (opcode match).
    pub filter: u64,
}

/// The four events in pqos's order ([`MonEvents::UNCORE`]).
pub const UNCORE_EVENTS: [UncoreEvent; 4] = [
    UncoreEvent {
        event: MonEvents::LLC_MISS_PCIE_READ,
        cha: 0,
        umask: UMASK_MISS,
        filter: FILTER1_PCIE_READ,
    },
    UncoreEvent {
        event: MonEvents::LLC_MISS_PCIE_WRITE,
        cha: 1,
        umask: UMASK_MISS,
        filter: FILTER1_PCIE_WRITE,
    },
    UncoreEvent {
        event: MonEvents::LLC_REF_PCIE_READ,
        cha: 2,
        umask: UMASK_REF,
        filter: FILTER1_PCIE_READ,
    },
    UncoreEvent {
        event: MonEvents::LLC_REF_PCIE_WRITE,
        cha: 3,
        umask: UMASK_REF,
        filter: FILTER1_PCIE_WRITE,
    },
];

impl UncoreEvent {
    /// The event select value written to counter control 0.
    #[must_use]
    pub const fn select(&self) -> u64 {
        event_select(self.umask, EVENT_TOR_INSERTS)
    }
}

/// Programs `e`'s CHA on `cpu` (pqos `_setup_counter`): six WRMSRs, in pqos's order.
pub(crate) fn program<M: MsrIo>(
    io: &mut M,
    cpu: LogicalCpu,
    e: &UncoreEvent,
) -> Result<(), MsrError> {
    let b = box_ctl(e.cha);
    io.write(cpu, b, BOX_CTL_UNFREEZE)?;
    io.write(cpu, b, BOX_CTL_FREEZE)?;
    io.write(cpu, b.offset(OFFSET_CTL0), e.select())?;
    io.write(cpu, b.offset(OFFSET_FILTER1), e.filter)?;
    io.write(cpu, b, BOX_CTL_RESET_COUNTERS)?;
    io.write(cpu, b, BOX_CTL_UNFREEZE)
}

/// Stops `e`'s CHA on `cpu` (pqos `uncore_mon_stop`): box control "reset control".
pub(crate) fn stop<M: MsrIo>(io: &mut M, cpu: LogicalCpu, e: &UncoreEvent) -> Result<(), MsrError> {
    io.write(cpu, box_ctl(e.cha), BOX_CTL_RESET_CONTROL)
}

/// A started uncore group.
#[derive(Debug)]
pub(crate) struct UncoreGroup {
    pub(crate) id: MonGroupId,
    /// (socket, the CPU its CHAs are programmed and read on), in the order given.
    pub(crate) sockets: Vec<(u32, LogicalCpu)>,
    pub(crate) events: Vec<UncoreEvent>,
    /// Last raw counter 0 per (socket, event), in `sockets` × `events` order; 0 at start
    /// (the start resets the counters, so it needs no reading).
    last: Vec<u64>,
    /// When the next interval began: the start (the counters' reset), then the last poll.
    pub(crate) since: Instant,
    values: MonValues,
}

impl UncoreGroup {
    /// A group of `sockets` counting `events` whose counters are reset at `started` (the
    /// first poll's interval begins there; [`UncoreGroup::since`] may move it to the end of
    /// the programming).
    pub(crate) fn new(
        id: MonGroupId,
        sockets: Vec<(u32, LogicalCpu)>,
        events: MonEvents,
        started: Instant,
    ) -> Self {
        let events: Vec<UncoreEvent> = UNCORE_EVENTS
            .into_iter()
            .filter(|e| events.contains(e.event))
            .collect();
        Self {
            id,
            last: vec![0; sockets.len() * events.len()],
            sockets,
            events,
            since: started,
            values: MonValues::default(),
        }
    }

    /// Reads counter 0 of every event's CHA on every socket (one RDMSR each); the deltas
    /// since the previous poll (since the start on the first) summed over the sockets.
    pub(crate) fn poll<M: MsrIo>(&mut self, io: &mut M, at: Instant) -> Result<(), MsrError> {
        let mask = (1u64 << COUNTER_WIDTH) - 1;
        let mut counts = UncoreCounts::default();
        for (j, e) in self.events.iter().enumerate() {
            let mut sum = 0u64;
            for (i, &(_, cpu)) in self.sockets.iter().enumerate() {
                let now = io.read(cpu, box_ctl(e.cha).offset(OFFSET_CTR0))? & mask;
                let k = i * self.events.len() + j;
                sum = sum.saturating_add(now.wrapping_sub(self.last[k]) & mask);
                self.last[k] = now;
            }
            counts.set(e.event, Some(sum));
        }
        self.values.interval = at.saturating_duration_since(self.since);
        self.values.polled_at = Some(at);
        self.since = at;
        self.values.uncore = Some(counts);
        Ok(())
    }

    pub(crate) const fn values(&self) -> &MonValues {
        &self.values
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::FakeMsrs;
    use crate::regs::cha::CHA_PMON_BOX_CTL_0;

    /// pqos's own unit tests (`unit-test/uncore_monitoring.c`, `test_uncore_mon_start_*`)
    /// expect exactly these registers and values, in this order.
    #[test]
    fn programming_writes_pqos_registers_and_values_in_order() {
        // arrange
        let cpu = LogicalCpu::new(0);
        let expected: [[(u32, u64); 6]; 4] = [
            [
                (3584, 65536),
                (3584, 65792),
                (3585, 4_203_573),
                (3590, 277_555),
                (3584, 65794),
                (3584, 65536),
            ],
            [
                (3600, 65536),
                (3600, 65792),
                (3601, 4_203_573),
                (3606, 0x1004_9033),
                (3600, 65794),
                (3600, 65536),
            ],
            [
                (3616, 65536),
                (3616, 65792),
                (3617, 0x40_1435),
                (3622, 277_555),
                (3616, 65794),
                (3616, 65536),
            ],
            [
                (3632, 65536),
                (3632, 65792),
                (3633, 0x40_1435),
                (3638, 0x1004_9033),
                (3632, 65794),
                (3632, 65536),
            ],
        ];
        for (e, want) in UNCORE_EVENTS.iter().zip(expected) {
            let mut io = RecordingMsrs::default();
            // act
            program(&mut io, cpu, e).unwrap();
            // assert
            assert_eq!(io.writes, want.map(|(a, v)| (cpu, a, v)), "{:?}", e.event);
        }
        assert_eq!(CHA_PMON_BOX_CTL_0.get(), 0xE00);
    }

    #[test]
    fn stop_resets_the_control_of_the_event_cha() {
        let mut io = RecordingMsrs::default();
        stop(&mut io, LogicalCpu::new(5), &UNCORE_EVENTS[3]).unwrap();
        // pqos test_uncore_monitoring_stop: UNIT_CTRL_RESET_CONTROL = 65793
        assert_eq!(io.writes, [(LogicalCpu::new(5), 0xE30, 65793)]);
    }

    #[test]
    fn poll_sums_socket_deltas_and_survives_a_48_bit_wrap() {
        // arrange: two sockets, CPU 0 and CPU 18; only misses of PCIe reads (CHA 0)
        let (c0, c1) = (LogicalCpu::new(0), LogicalCpu::new(18));
        let ctr = box_ctl(0).offset(OFFSET_CTR0);
        let mut io = FakeMsrs::new();
        let t = Instant::now();
        let mut g = UncoreGroup::new(
            MonGroupId(1),
            vec![(0, c0), (1, c1)],
            MonEvents::LLC_MISS_PCIE_READ,
            t,
        );
        io.set(c0, ctr, 100);
        io.set(c1, ctr, (1 << 48) - 10);
        // act: the first poll counts since the start (counters were reset), as pqos does,
        // over the time since the start, as every group's first poll
        g.poll(&mut io, t + Duration::from_secs(2)).unwrap();
        let first = g.values().clone();
        io.set(c0, ctr, 150);
        io.set(c1, ctr, 5); // wrapped: 15 more
        g.poll(&mut io, t + Duration::from_secs(3)).unwrap();
        let second = g.values().uncore.unwrap();
        // assert
        assert_eq!(first.interval, Duration::from_secs(2));
        assert_eq!(g.values().interval, Duration::from_secs(1));
        let first = first.uncore.unwrap();
        assert_eq!(first.llc_miss_pcie_read, Some(100 + (1 << 48) - 10));
        assert_eq!(second.llc_miss_pcie_read, Some(50 + 15));
        assert_eq!(second.llc_miss_pcie_write, None, "not monitored");
    }

    /// Records every write in order.
    #[derive(Default)]
    struct RecordingMsrs {
        writes: Vec<(LogicalCpu, u32, u64)>,
    }

    impl MsrIo for RecordingMsrs {
        fn read(&mut self, _cpu: LogicalCpu, _addr: crate::MsrAddr) -> Result<u64, MsrError> {
            Ok(0)
        }
        fn write(&mut self, cpu: LogicalCpu, addr: crate::MsrAddr, v: u64) -> Result<(), MsrError> {
            self.writes.push((cpu, addr.get(), v));
            Ok(())
        }
    }
}
