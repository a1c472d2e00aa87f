//! I/O traffic of the model's I/O RDT channels: what a device moves through a channel, in
//! bytes per second, and the L3 it keeps resident there. It is counted by the L3 of the
//! channel's package (the IRDT has one RMUD per package, `irdt_for`) under the RMID the
//! channel's RMID tagging register holds ([`MmioModel::channel_tag`]): in that RMID's MBM
//! counters (total and local: a device's DMA goes to its own socket's memory), advancing
//! with the clock as CPU traffic does, and in its occupancy. This is what pqos's channel
//! monitoring reads on the MSR interface: IA32_QM_EVTSEL/IA32_QM_CTR with the channel's
//! RMID on a core of the channel's socket (intel-cmt-cat v26.03 `lib/hw_monitoring.c`
//! `hw_mon_start_channels`, `hw_mon_read_counter`).
//!
//! Simplifications (the model's, not the hardware's): the traffic counts whatever
//! IA32_L3_IO_QOS_CFG holds (the switch gates I/O allocation, which the model does not
//! throttle I/O by), an occupancy is not bounded by the channel's class's ways, and the
//! traffic is not saved in the state file (set it in the process that advances the clock).

use rdt_core::CacheDomain;
use rdt_mmio::ChannelId;
use rdt_mmio::iotag::Tag;

use super::MmioModel;
use crate::{SimError, SimPlatform};

/// The steady I/O load of one channel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IoTraffic {
    /// Bytes per second the device moves through the channel (MBM total and local).
    pub bytes_per_s: f64,
    /// Bytes of L3 the channel's traffic keeps resident (L3 occupancy).
    pub llc_bytes: f64,
}

impl MmioModel {
    /// The L3 package index (`0..`) of `channel`'s RMUD: bits 23:16 of the id less one.
    fn channel_rmud(channel: ChannelId) -> Option<usize> {
        usize::try_from(channel.get() >> 16)
            .ok()
            .and_then(|k| k.checked_sub(1))
    }

    /// Whether the model's IRDT has `channel`.
    fn has_channel(&self, channel: ChannelId) -> bool {
        self.irdt()
            .is_some_and(|i| i.links().any(|l| l.channels.contains(&channel)))
    }
}

impl SimPlatform {
    /// Sets the I/O traffic of `channel`: `bytes_per_s` through it and `llc_bytes` of L3
    /// resident (both 0 removes it). Counted from the next [`SimPlatform::advance`] under
    /// the RMID its tagging register then holds (module docs of `crate::mmio::iotraffic`).
    ///
    /// # Errors
    /// [`SimError::IoTraffic`] when the model has no I/O RDT or no such channel (naming it),
    /// or a value is negative, NaN or infinite; the model is left as it was.
    pub fn set_io_traffic(
        &mut self,
        channel: ChannelId,
        bytes_per_s: f64,
        llc_bytes: f64,
    ) -> Result<(), SimError> {
        let known = self.mmio().is_some_and(|m| m.has_channel(channel));
        if !known {
            return Err(SimError::IoTraffic {
                problem: format!(
                    "channel {channel} is not in the model's ACPI IRDT table (`--print-io-devs` \
                     lists the channels)"
                ),
            });
        }
        for (what, v) in [("bytes per second", bytes_per_s), ("L3 bytes", llc_bytes)] {
            if !v.is_finite() || v < 0.0 {
                return Err(SimError::IoTraffic {
                    problem: format!(
                        "channel {channel}: {what} `{v}` is not a finite non-negative number"
                    ),
                });
            }
        }
        if bytes_per_s == 0.0 && llc_bytes == 0.0 {
            self.io_traffic.remove(&channel);
        } else {
            self.io_traffic.insert(
                channel,
                IoTraffic {
                    bytes_per_s,
                    llc_bytes,
                },
            );
        }
        Ok(())
    }

    /// Every channel load as it is counted now: (the L3 of the channel's package, the RMID
    /// its tagging register holds, the load). A channel whose register's enable bit is
    /// clear, or whose package has no L3, counts nowhere.
    pub(crate) fn io_loads(&self) -> Vec<(CacheDomain, u32, IoTraffic)> {
        let Some(m) = self.mmio() else {
            return Vec::new();
        };
        let packages = self.topology().packages();
        self.io_traffic
            .iter()
            .filter_map(|(&channel, &t)| {
                let rmid = m.channel_tag(channel, Tag::Rmid)?;
                let package = *packages.get(MmioModel::channel_rmud(channel)?)?;
                let domain = self
                    .topology()
                    .cpus()
                    .iter()
                    .find(|c| c.package == package)
                    .and_then(|c| c.l3)?;
                Some((domain, rmid, t))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rdt_core::LogicalCpu;
    use rdt_mmio::MmioIo;
    use rdt_mmio::iotag::tag_register;
    use rdt_msr::MsrIo;
    use rdt_msr::regs::{IA32_QM_CTR, IA32_QM_EVTSEL};

    use super::*;
    use crate::SimHandle;

    /// IA32_QM_CTR of `event` (1 occupancy, 2 total MBM) for `rmid`, read on `cpu`.
    fn counter(sim: &mut SimHandle, cpu: u32, rmid: u32, event: u64) -> u64 {
        let cpu = LogicalCpu::new(cpu);
        MsrIo::write(sim, cpu, IA32_QM_EVTSEL, u64::from(rmid) << 32 | event).unwrap();
        MsrIo::read(sim, cpu, IA32_QM_CTR).unwrap()
    }

    #[test]
    fn a_channels_traffic_counts_under_its_rmid_tag_in_its_packages_l3() {
        let mut sim = SimHandle::new(SimPlatform::builtin("xeon-rdt13").unwrap());
        let (up, last_cpu) = {
            let p = sim.lock();
            let up = p.capabilities().monitoring.get().unwrap().upscaling_factor;
            let last = p.topology().cpus().last().unwrap().cpu.get();
            (u64::from(up), last)
        };
        let irdt = sim.lock().mmio().unwrap().irdt().unwrap().clone();
        let ch = ChannelId::new(0, 1, 1);
        let r = tag_register(&irdt, ch, Tag::Rmid).unwrap();
        sim.write_narrow(r.addr, r.bytes, 7).unwrap();
        sim.lock()
            .set_io_traffic(ch, 1e9, 4.0 * 1_048_576.0)
            .unwrap();
        let before = counter(&mut sim, 0, 7, 2);
        sim.advance(Duration::from_secs(2));
        let total = (counter(&mut sim, 0, 7, 2) - before) * up;
        // 2 s of 1 GB/s under RMID 7, within one upscaling unit
        assert!(total.abs_diff(2_000_000_000) <= up, "{total}");
        let occ = counter(&mut sim, 0, 7, 1) * up;
        assert!(occ.abs_diff(4 << 20) <= up, "{occ}");
        // not in the other package's L3, not under another RMID
        assert_eq!(counter(&mut sim, last_cpu, 7, 1), 0);
        assert_eq!(counter(&mut sim, 0, 8, 1), 0);
        // retagged to RMID 9: the occupancy moves with the tag
        sim.write_narrow(r.addr, r.bytes, 9).unwrap();
        assert_eq!(counter(&mut sim, 0, 7, 1), 0);
        assert!((counter(&mut sim, 0, 9, 1) * up).abs_diff(4 << 20) <= up);
    }

    #[test]
    fn io_traffic_on_an_unknown_channel_or_of_a_bad_value_is_refused() {
        let mut p = SimPlatform::builtin("xeon-rdt13").unwrap();
        let e = p
            .set_io_traffic(ChannelId::new(5, 1, 0), 1.0, 0.0)
            .unwrap_err();
        assert!(e.to_string().contains("channel 0x60100"), "{e}");
        let ch = ChannelId::new(0, 1, 0);
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let e = p.set_io_traffic(ch, bad, 0.0).unwrap_err();
            assert!(e.to_string().contains("bytes per second"), "{e}");
        }
        assert!(p.io_traffic.is_empty());
        let e = SimPlatform::builtin("skylake-sp")
            .unwrap()
            .set_io_traffic(ch, 1.0, 0.0)
            .unwrap_err();
        assert!(
            e.to_string().contains("not in the model's ACPI IRDT"),
            "{e}"
        );
    }
}
