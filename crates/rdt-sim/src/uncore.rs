//! The uncore CHA performance monitors of a Skylake-SP package (CPU model 0x55, the
//! `skylake-sp` model), as far as pqos's PCIe LLC events use them
//! (`lib/uncore_monitoring.c`; [`rdt_msr::uncore`] programs them the same way).
//!
//! | MSR | scope | value | writes |
//! |---|---|---|---|
//! | CHA `n` box control 0xE00 + 0x10·n | package | the last value written, bits 0 and 1 cleared (they act once) | bits other than 0, 1, 8, 16: EIO. Bit 0 resets the CHA's counter controls and filters to 0, bit 1 its counters to 0, bit 8 freezes its counters while set |
//! | counter control 0-3, +0x1..+0x4 | package | last written | any value |
//! | filter 0 and 1, +0x5, +0x6 | package | last written | any value |
//! | counter 0-3, +0x8..+0xB | package | 48-bit count | sets the count (bits 47:0) |
//!
//! Only models whose CPUID reports family 6 model 0x55 have the registers (elsewhere they
//! read and write EIO, as the msr driver reports a #GP); `n` ranges over the package's CHAs,
//! one per core (the Gold 6140 has 18 cores and 18 LLC slices of 1.375 MiB, 24.75 MiB in
//! all; models/PROVENANCE.md).
//!
//! # What the counters count
//! A counter counts while its box is not frozen and its control has the enable bit (22) and
//! event `TOR_INSERTS` (0x35) with one of the four selections pqos makes: unit mask 0x24
//! ("LLC misses") or 0x14 ("LLC references"), with the CHA's filter 1 at 0x43C33 (PCIe
//! reads) or 0x1004_9033 (PCIe writes). Any other selection counts nothing, and so does an
//! unprogrammed counter.
//!
//! The model's PCIe traffic follows the cores' memory traffic ([`crate::model`]): a
//! package's devices read [`PCIE_READ_SHARE`] and write [`PCIE_WRITE_SHARE`] of the bytes
//! its cores move to and from memory, in 64-byte lines; every line is an LLC reference, and
//! it misses the LLC as often as the package's core accesses miss (their traffic-weighted
//! miss fraction). Addresses spread evenly over the LLC slices, so each CHA sees
//! 1/(number of CHAs) of the package's lines: a counter of one CHA, the one pqos reads per
//! event, holds that slice's share only. Deterministic, over the virtual clock like the
//! MBM and PMU counters. Not saved in the state file (it starts at 0 in each process).
//!
//! # References
//! Intel Xeon Processor Scalable Memory Family Uncore Performance Monitoring Reference
//! Manual, 2.2 "CHA Performance Monitoring"; intel-cmt-cat `lib/uncore_monitoring.c`.

use rdt_msr::regs::cha::{
    BOX_CTL_FRZ, BOX_CTL_RST_CTRL, BOX_CTL_RST_CTRS, CHA_PMON_BOX_CTL_0, CHA_PMON_STRIDE,
    COUNTER_WIDTH, CTL_ENABLE, EVENT_TOR_INSERTS, FILTER1_PCIE_READ, FILTER1_PCIE_WRITE,
    OFFSET_CTL0, OFFSET_CTR0, OFFSET_FILTER1, UMASK_MISS, UMASK_REF,
};

use crate::num::Accum;

/// Share of a package's core memory traffic its PCIe devices read (module docs).
pub const PCIE_READ_SHARE: f64 = 0.10;
/// Share of a package's core memory traffic its PCIe devices write (module docs).
pub const PCIE_WRITE_SHARE: f64 = 0.05;
/// Bytes per cache line.
const LINE_BYTES: f64 = 64.0;
/// Box control bits a write may set (module docs).
const BOX_CTL_WRITABLE: u64 = BOX_CTL_RST_CTRL | BOX_CTL_RST_CTRS | BOX_CTL_FRZ | 1 << 16;

/// One CHA's performance-monitoring registers.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ChaBox {
    box_ctl: u64,
    ctl: [u64; 4],
    filter: [u64; 2],
    ctr: [Accum; 4],
}

/// A CHA register (offset in the CHA's block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChaReg {
    BoxCtl,
    Ctl(usize),
    Filter(usize),
    Ctr(usize),
}

/// A package's PCIe traffic, in lines per second (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PcieRates {
    pub read_lines_per_s: f64,
    pub write_lines_per_s: f64,
    pub miss_fraction: f64,
}

impl PcieRates {
    /// The package's PCIe lines from its CPUs' (memory bytes/s, LLC miss fraction).
    pub(crate) fn of(cpus: impl Iterator<Item = (f64, f64)>) -> Self {
        let (mut bytes, mut missed) = (0.0, 0.0);
        for (b, miss) in cpus {
            bytes += b;
            missed += b * miss;
        }
        Self {
            read_lines_per_s: bytes * PCIE_READ_SHARE / LINE_BYTES,
            write_lines_per_s: bytes * PCIE_WRITE_SHARE / LINE_BYTES,
            miss_fraction: if bytes > 0.0 { missed / bytes } else { 1.0 },
        }
    }

    /// Lines per second one CHA counts for an event select and filter 1 (module docs).
    fn counted(&self, ctl: u64, filter1: u64) -> f64 {
        if ctl & CTL_ENABLE == 0 || ctl & 0xff != EVENT_TOR_INSERTS {
            return 0.0;
        }
        let lines = match filter1 {
            FILTER1_PCIE_READ => self.read_lines_per_s,
            FILTER1_PCIE_WRITE => self.write_lines_per_s,
            _ => return 0.0,
        };
        match ctl >> 8 & 0xff {
            UMASK_MISS => lines * self.miss_fraction,
            UMASK_REF => lines,
            _ => 0.0,
        }
    }
}

/// The register at `addr` of a package with `chas` CHAs: (CHA, register).
pub(crate) fn decode(addr: u32, chas: usize) -> Option<(usize, ChaReg)> {
    let off = addr.checked_sub(CHA_PMON_BOX_CTL_0.get())?;
    let cha = (off / CHA_PMON_STRIDE) as usize;
    if cha >= chas {
        return None;
    }
    let reg = match off % CHA_PMON_STRIDE {
        0 => ChaReg::BoxCtl,
        o @ 1..=4 => ChaReg::Ctl((o - OFFSET_CTL0) as usize),
        o @ 5..=6 => ChaReg::Filter((o + 1 - OFFSET_FILTER1) as usize),
        o @ 8..=11 => ChaReg::Ctr((o - OFFSET_CTR0) as usize),
        _ => return None,
    };
    Some((cha, reg))
}

const fn counter_mask() -> u64 {
    (1 << COUNTER_WIDTH) - 1
}

impl ChaBox {
    pub(crate) fn read(&self, reg: ChaReg) -> u64 {
        match reg {
            ChaReg::BoxCtl => self.box_ctl,
            ChaReg::Ctl(k) => self.ctl[k],
            ChaReg::Filter(k) => self.filter[k],
            ChaReg::Ctr(k) => self.ctr[k].whole & counter_mask(),
        }
    }

    /// A write; `false` = #GP (module docs).
    pub(crate) fn write(&mut self, reg: ChaReg, v: u64) -> bool {
        match reg {
            ChaReg::BoxCtl => {
                if v & !BOX_CTL_WRITABLE != 0 {
                    return false;
                }
                if v & BOX_CTL_RST_CTRL != 0 {
                    self.ctl = [0; 4];
                    self.filter = [0; 2];
                }
                if v & BOX_CTL_RST_CTRS != 0 {
                    self.ctr = [Accum::default(); 4];
                }
                self.box_ctl = v & !(BOX_CTL_RST_CTRL | BOX_CTL_RST_CTRS);
            }
            ChaReg::Ctl(k) => self.ctl[k] = v,
            ChaReg::Filter(k) => self.filter[k] = v,
            ChaReg::Ctr(k) => {
                self.ctr[k] = Accum {
                    whole: v & counter_mask(),
                    frac: 0.0,
                };
            }
        }
        true
    }

    /// `dt` seconds of the package's PCIe traffic, this CHA's `share` of it.
    pub(crate) fn advance(&mut self, rates: &PcieRates, share: f64, dt: f64) {
        if self.box_ctl & BOX_CTL_FRZ != 0 {
            return;
        }
        for k in 0..4 {
            let lines = rates.counted(self.ctl[k], self.filter[1]) * share * dt;
            self.ctr[k].add(lines);
            self.ctr[k].whole &= counter_mask();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rdt_core::{Backend, LogicalCpu, MonEvents};
    use rdt_msr::uncore::UNCORE_EVENTS;
    use rdt_msr::{MsrAddr, MsrBackend, MsrIo};

    use crate::{SimHandle, SimPlatform};

    fn cpu(n: u32) -> LogicalCpu {
        LogicalCpu::new(n)
    }

    fn rd(p: &mut SimPlatform, c: u32, addr: u32) -> Option<u64> {
        p.read(cpu(c), MsrAddr::new(addr)).ok()
    }

    /// Programs `e` on `c` as pqos's `_setup_counter` does.
    fn program(p: &mut SimPlatform, c: u32, e: &rdt_msr::uncore::UncoreEvent) {
        let b = 0xE00 + 0x10 * e.cha;
        for (off, v) in [
            (0, 0x1_0000),
            (0, 0x1_0100),
            (1, e.select()),
            (6, e.filter),
            (0, 0x1_0102),
            (0, 0x1_0000),
        ] {
            p.write(cpu(c), MsrAddr::new(b + off), v).unwrap();
        }
    }

    #[test]
    fn skylake_sp_has_one_cha_per_core_and_other_models_none() {
        let mut p = SimPlatform::builtin("skylake-sp").unwrap();
        assert_eq!((p.uncore_chas(0), p.uncore_chas(1)), (18, 18));
        // CHA 17's counter 0 exists, CHA 18's does not; offset 7 is not a register
        assert_eq!(rd(&mut p, 0, 0xE00 + 0x10 * 17 + 8), Some(0));
        assert_eq!(rd(&mut p, 0, 0xE00 + 0x10 * 18 + 8), None);
        assert_eq!(rd(&mut p, 0, 0xE07), None);
        for model in ["broadwell-ep", "sapphire-rapids", "milan"] {
            let mut q = SimPlatform::builtin(model).unwrap();
            assert_eq!(rd(&mut q, 0, 0xE08), None, "{model}");
            assert!(q.write(cpu(0), MsrAddr::new(0xE00), 0x1_0000).is_err());
        }
    }

    #[test]
    fn unprogrammed_counters_stay_zero_and_programmed_ones_follow_the_traffic() {
        // arrange
        let mut p = SimPlatform::builtin("skylake-sp").unwrap();
        for e in &UNCORE_EVENTS[..3] {
            program(&mut p, 0, e);
        }
        // act
        p.advance(Duration::from_secs(1));
        // assert: socket 0 counts (CPU 0 is on it), socket 1 was not programmed
        let miss_read = rd(&mut p, 0, 0xE08).unwrap();
        let miss_write = rd(&mut p, 0, 0xE18).unwrap();
        let ref_read = rd(&mut p, 0, 0xE28).unwrap();
        assert!(miss_read > 0 && miss_write > 0, "{miss_read} {miss_write}");
        assert!(ref_read >= miss_read, "{ref_read} < {miss_read}");
        assert!(miss_read > miss_write, "reads are twice the writes");
        assert_eq!(rd(&mut p, 0, 0xE38), Some(0), "CHA 3 not programmed");
        assert_eq!(rd(&mut p, 0, 0xE09), Some(0), "counter 1 not programmed");
        let socket1 = p
            .topology()
            .cpus()
            .iter()
            .find(|c| c.package == 1)
            .unwrap()
            .cpu;
        assert_eq!(rd(&mut p, socket1.get(), 0xE08), Some(0));
    }

    #[test]
    fn freeze_stops_counting_and_resets_clear_counters_and_controls() {
        let mut p = SimPlatform::builtin("skylake-sp").unwrap();
        program(&mut p, 0, &UNCORE_EVENTS[2]);
        p.advance(Duration::from_millis(100));
        let n = rd(&mut p, 0, 0xE28).unwrap();
        assert!(n > 0);
        p.write(cpu(0), MsrAddr::new(0xE20), 0x1_0100).unwrap(); // freeze
        p.advance(Duration::from_millis(100));
        assert_eq!(rd(&mut p, 0, 0xE28), Some(n), "frozen");
        p.write(cpu(0), MsrAddr::new(0xE20), 0x1_0102).unwrap(); // reset counters
        assert_eq!(rd(&mut p, 0, 0xE28), Some(0));
        p.write(cpu(0), MsrAddr::new(0xE20), 0x1_0101).unwrap(); // pqos's stop
        assert_eq!(rd(&mut p, 0, 0xE21), Some(0), "control reset");
        assert_eq!(rd(&mut p, 0, 0xE26), Some(0), "filter reset");
        p.write(cpu(0), MsrAddr::new(0xE20), 0x1_0000).unwrap();
        p.advance(Duration::from_millis(100));
        assert_eq!(rd(&mut p, 0, 0xE28), Some(0), "no event selected");
        assert!(p.write(cpu(0), MsrAddr::new(0xE20), 1 << 20).is_err());
    }

    #[test]
    fn msr_backend_uncore_group_counts_on_the_simulated_skylake() {
        // arrange
        let p = SimPlatform::builtin("skylake-sp").unwrap();
        let (caps, topo) = (p.capabilities().clone(), p.topology().clone());
        assert!(caps.uncore_pcie);
        let sim = SimHandle::new(p);
        let mut b = MsrBackend::new(sim.clone(), caps, topo, sim.clone()).unwrap();
        let g = b
            .start_uncore_monitoring(&[0, 1], MonEvents::UNCORE)
            .unwrap();
        b.poll().unwrap();
        // act
        sim.advance(Duration::from_secs(1));
        b.poll().unwrap();
        // assert
        let v = b.values(g).unwrap().uncore.unwrap();
        let all = [
            v.llc_miss_pcie_read,
            v.llc_miss_pcie_write,
            v.llc_ref_pcie_read,
            v.llc_ref_pcie_write,
        ];
        assert!(all.iter().all(|x| x.is_some_and(|n| n > 0)), "{v:?}");
        b.stop_monitoring(g).unwrap();
        assert_eq!(sim.lock().read(cpu(0), MsrAddr::new(0xE01)).unwrap(), 0);
    }
}
