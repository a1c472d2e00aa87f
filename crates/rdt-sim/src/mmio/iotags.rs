//! The tagging registers of the model's IRDT links (I/O RDT): per link an RMID block and a
//! CLOS block of eight registers, one per channel, at `mmio + rmid_block_offset` and
//! `mmio + clos_block_offset` (`rdt_mmio::iotag` has the layout). They power on as 0 (no
//! class, no RMID: the links the model describes have no enable bits), are kept with the
//! saved state, and are what the I/O traffic of a channel is counted under.
//!
//! The model serves them as the 8-byte words that hold them ([`crate::SimPlatform::mmio_read`]):
//! a 2- or 4-byte access of `rdt_mmio::MmioIo::read_narrow` is one word read and, for a
//! write, one word write of what was read with the register's bytes replaced.

use rdt_mmio::ChannelId;
use rdt_mmio::iotag::{TAG_REGISTERS, Tag, tag_register};

use super::MmioModel;

impl MmioModel {
    /// The 8-byte words of every link's tagging blocks: (first word, bytes of the block).
    fn tag_blocks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.irdt.iter().flat_map(|irdt| {
            irdt.links().flat_map(move |l| {
                let bytes: u64 = if l.flags & rdt_mmio::irdt::RCS_REG_2BYTE != 0 {
                    2
                } else {
                    4
                };
                [l.rmid_block_offset, l.clos_block_offset]
                    .into_iter()
                    .map(move |off| (l.mmio + u64::from(off), bytes * u64::from(TAG_REGISTERS)))
            })
        })
    }

    /// Whether `addr` is an 8-byte word of a tagging block.
    pub(super) fn is_tag_word(&self, addr: u64) -> bool {
        addr.is_multiple_of(8)
            && self
                .tag_blocks()
                .any(|(base, len)| addr >= base && addr < base + len)
    }

    /// The word at `addr` when it is a tagging word.
    pub(super) fn tag_read(&self, addr: u64) -> Option<u64> {
        self.is_tag_word(addr)
            .then(|| self.tags.get(&addr).copied().unwrap_or(0))
    }

    /// Stores `value` at `addr` when it is a tagging word; `false` when it is not one.
    pub(super) fn tag_write(&mut self, addr: u64, value: u64) -> bool {
        if !self.is_tag_word(addr) {
            return false;
        }
        if value == 0 {
            self.tags.remove(&addr);
        } else {
            self.tags.insert(addr, value);
        }
        true
    }

    /// The value of `channel`'s `tag` register (enable bit cleared); `None` for a channel
    /// the model's IRDT does not have or whose enable bit is clear.
    #[must_use]
    pub fn channel_tag(&self, channel: ChannelId, tag: Tag) -> Option<u32> {
        let r = tag_register(self.irdt.as_ref()?, channel, tag).ok()?;
        let word = r.addr & !7;
        let v = (self.tags.get(&word).copied().unwrap_or(0) >> ((r.addr - word) * 8))
            & u64::from(if r.bytes == 2 { 0xffff_u32 } else { u32::MAX });
        let v = u32::try_from(v).ok()?;
        if r.enable && v & r.enable_bit() == 0 {
            return None;
        }
        Some(v & r.value_mask())
    }
}

impl crate::SimPlatform {
    /// Whether `addr` is a word of an IRDT link's tagging blocks, which take 2- and 4-byte
    /// accesses (`dev/mem`, [`crate::fs::DevMemTree`]).
    #[must_use]
    pub fn mmio_takes_narrow(&self, addr: u64) -> bool {
        self.mmio().is_some_and(|m| m.is_tag_word(addr & !7))
    }
}

#[cfg(test)]
mod tests {
    use rdt_mmio::MmioIo;

    use super::*;
    use crate::SimHandle;

    fn sim(model: &str) -> SimHandle {
        SimHandle::new(crate::SimPlatform::builtin(model).unwrap())
    }

    #[test]
    fn xeon_rdt13_enumerates_io_rdt_and_keeps_its_switch_in_the_state() {
        use rdt_msr::MsrIo;
        let mut sim = sim("xeon-rdt13");
        assert!(sim.lock().capabilities().l3_cat.get().unwrap().io_rdt);
        MsrIo::write(
            &mut sim,
            rdt_core::LogicalCpu::new(0),
            rdt_msr::regs::IA32_L3_IO_QOS_CFG,
            1,
        )
        .unwrap();
        let text = sim.lock().save_state();
        let mut other = self::sim("xeon-rdt13");
        other.lock().restore_state(&text).unwrap();
        assert_eq!(
            MsrIo::read(
                &mut other,
                rdt_core::LogicalCpu::new(0),
                rdt_msr::regs::IA32_L3_IO_QOS_CFG
            )
            .unwrap(),
            1
        );
        // a part without I/O RDT refuses such a state
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["model"] = "builtin:skylake-sp".into();
        let e = self::sim("skylake-sp")
            .lock()
            .restore_state(&json.to_string())
            .unwrap_err();
        assert!(e.to_string().contains("IA32_L3_IO_QOS_CFG"), "{e}");
        assert!(
            !self::sim("sapphire-rapids")
                .lock()
                .capabilities()
                .l3_cat
                .get()
                .unwrap()
                .io_rdt
        );
    }

    #[test]
    fn a_channels_clos_tag_is_kept_served_narrow_and_saved() {
        for model in ["xeon-rdt13", "sapphire-rapids"] {
            let mut sim = sim(model);
            let irdt = sim.lock().mmio().unwrap().irdt().unwrap().clone();
            let ch = ChannelId::new(0, 1, 1);
            let r = tag_register(&irdt, ch, Tag::Clos).unwrap();
            assert_eq!(
                sim.read_narrow(r.addr, r.bytes).unwrap(),
                0,
                "{model}: power-on"
            );
            sim.write_narrow(r.addr, r.bytes, 5).unwrap();
            assert_eq!(
                sim.lock().mmio().unwrap().channel_tag(ch, Tag::Clos),
                Some(5)
            );
            // the neighbouring channel's register is still 0
            let other = ChannelId::new(0, 1, 0);
            assert_eq!(
                sim.lock().mmio().unwrap().channel_tag(other, Tag::Clos),
                Some(0)
            );
            // another process sees it
            let text = sim.lock().save_state();
            let fresh = self::sim(model);
            fresh.lock().restore_state(&text).unwrap();
            assert_eq!(
                fresh.lock().mmio().unwrap().channel_tag(ch, Tag::Clos),
                Some(5)
            );
            // a tag word that is no link's is refused whole
            let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(json["mmio"]["tags"][0][0], r.addr & !7, "{model}");
            json["mmio"]["tags"][0][0] = 8.into();
            let bad = json.to_string();
            let e = self::sim(model).lock().restore_state(&bad).unwrap_err();
            assert!(e.to_string().contains("tagging register 0x8"), "{e}");
        }
    }
}
