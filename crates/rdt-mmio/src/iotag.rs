//! The tagging registers of the IRDT's links: per channel a CLOS register and an RMID
//! register, which the link stamps on the channel's traffic ([`IoRdt`], the
//! [`rdt_core::IoRdtOps`] of the MSR and MMIO interfaces).
//!
//! Layout (intel-cmt-cat v26.03 `lib/iordt.c`, read for facts; RDT Architecture
//! Specification rev 1.3, I/O RDT): a link (RCS) at physical address `mmio` has an RMID
//! block at `mmio + rmid_block_offset` and a CLOS block at `mmio + clos_block_offset`, each
//! eight registers, one per channel of the link (the channel id's bits 7:0), 2 bytes wide
//! when the RCS flags have bit 3 (REGW), else 4. Where flags bit 5 (CEF) / bit 4 (REF) say
//! so, the register's top bit enables the tag: pqos sets it with a class (with an RMID other
//! than 0), clears it on reset, and reads a register without it as "no class" (`NOCLOS`,
//! `NORMID`).

use std::io;

use rdt_core::{ChannelId, ClassId, IoChannelInfo, IoDeviceInfo, IoRdtOps, RequestError, Rmid};

use crate::backend::MmioError;
use crate::io::MmioIo;
use crate::irdt::{
    Irdt, Link, RCS_CLOS_ENABLE, RCS_CLOS_TAGGING, RCS_REG_2BYTE, RCS_RMID_ENABLE, RCS_RMID_TAGGING,
};

/// Registers per tagging block (`MMIO_MAX_CHANNELS`).
pub const TAG_REGISTERS: u8 = 8;

/// Which tagging block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// The CLOS block.
    Clos,
    /// The RMID block.
    Rmid,
}

impl Tag {
    const fn name(self) -> &'static str {
        match self {
            Self::Clos => "CLOS",
            Self::Rmid => "RMID",
        }
    }

    const fn tagging_flag(self) -> u16 {
        match self {
            Self::Clos => RCS_CLOS_TAGGING,
            Self::Rmid => RCS_RMID_TAGGING,
        }
    }

    const fn enable_flag(self) -> u16 {
        match self {
            Self::Clos => RCS_CLOS_ENABLE,
            Self::Rmid => RCS_RMID_ENABLE,
        }
    }
}

/// Where the tagging register of one channel is: its address, width in bytes, and whether
/// its top bit is an enable bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagRegister {
    /// Physical address.
    pub addr: u64,
    /// 2 or 4.
    pub bytes: u8,
    /// The top bit enables the tag.
    pub enable: bool,
}

impl TagRegister {
    /// The enable bit.
    #[must_use]
    pub const fn enable_bit(self) -> u32 {
        1 << (u32::from_ne_bytes([self.bytes, 0, 0, 0]) * 8 - 1)
    }

    /// The bits a value may use: all of them, or all but the enable bit.
    #[must_use]
    pub const fn value_mask(self) -> u32 {
        let all = if self.bytes == 2 { 0xffff } else { u32::MAX };
        if self.enable {
            all & !self.enable_bit()
        } else {
            all
        }
    }
}

/// The link that carries `channel`, from the channel id's RMUD index and link id.
///
/// # Errors
/// [`RequestError::IoRdt`] naming the channel when no link of the IRDT has it.
pub fn link_of(irdt: &Irdt, channel: ChannelId) -> Result<&Link, RequestError> {
    let raw = channel.get();
    let rmud = (raw >> 16)
        .checked_sub(1)
        .and_then(|i| usize::try_from(i).ok());
    let enum_id = (raw >> 8) & 0xff;
    rmud.and_then(|i| irdt.rmuds.get(i))
        .and_then(|r| r.links.iter().find(|l| u32::from(l.enum_id) == enum_id))
        .filter(|l| channel.index() < l.channel_count && raw >> 24 == 0)
        .ok_or_else(|| {
            RequestError::IoRdt(format!(
                "I/O RDT channel {channel} is not in the ACPI IRDT table (`--print-io-devs` \
                 lists the channels)"
            ))
        })
}

/// The `tag` register of `channel`.
///
/// # Errors
/// As [`link_of`]; the link does not tag `tag`, or the channel is beyond its block's eight
/// registers.
pub fn tag_register(
    irdt: &Irdt,
    channel: ChannelId,
    tag: Tag,
) -> Result<TagRegister, RequestError> {
    let link = link_of(irdt, channel)?;
    if link.flags & tag.tagging_flag() == 0 {
        return Err(RequestError::IoRdt(format!(
            "I/O RDT channel {channel}: its link does not tag {} (IRDT RCS flags {:#x})",
            tag.name(),
            link.flags
        )));
    }
    if channel.index() >= TAG_REGISTERS {
        return Err(RequestError::IoRdt(format!(
            "I/O RDT channel {channel}: a link has at most {TAG_REGISTERS} tagging registers"
        )));
    }
    let bytes: u8 = if link.flags & RCS_REG_2BYTE != 0 {
        2
    } else {
        4
    };
    let block = match tag {
        Tag::Clos => link.clos_block_offset,
        Tag::Rmid => link.rmid_block_offset,
    };
    let addr = link
        .mmio
        .checked_add(u64::from(block) + u64::from(bytes) * u64::from(channel.index()))
        .ok_or_else(|| {
            RequestError::IoRdt(format!(
                "I/O RDT channel {channel}: its {} register lies beyond the address space",
                tag.name()
            ))
        })?;
    Ok(TagRegister {
        addr,
        bytes,
        enable: link.flags & tag.enable_flag() != 0,
    })
}

/// I/O RDT through the IRDT's links: the parsed table and the register access.
pub struct IoRdt<M> {
    irdt: Irdt,
    mem: M,
}

impl<M> std::fmt::Debug for IoRdt<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoRdt")
            .field("irdt", &self.irdt)
            .finish_non_exhaustive()
    }
}

impl<M: MmioIo> IoRdt<M> {
    /// I/O RDT of `irdt`, its registers reached through `mem`.
    pub const fn new(irdt: Irdt, mem: M) -> Self {
        Self { irdt, mem }
    }

    /// The table.
    pub const fn irdt(&self) -> &Irdt {
        &self.irdt
    }

    /// The register access.
    pub const fn mem(&mut self) -> &mut M {
        &mut self.mem
    }

    fn register_error(
        op: &'static str,
        r: TagRegister,
        what: String,
        source: io::Error,
    ) -> MmioError {
        MmioError::Register {
            op,
            addr: r.addr,
            what,
            source,
        }
    }

    /// The value of `channel`'s `tag` register; `None` when its enable bit is clear.
    ///
    /// # Errors
    /// As [`tag_register`] ([`MmioError::Request`]); the read failed.
    pub fn read_tag(&mut self, channel: ChannelId, tag: Tag) -> Result<Option<u32>, MmioError> {
        let r = tag_register(&self.irdt, channel, tag)?;
        let v = self.mem.read_narrow(r.addr, r.bytes).map_err(|e| {
            Self::register_error(
                "read",
                r,
                format!("{} tag of channel {channel}", tag.name()),
                e,
            )
        })?;
        if r.enable && v & r.enable_bit() == 0 {
            return Ok(None);
        }
        Ok(Some(v & r.value_mask()))
    }

    /// Writes `value` to `channel`'s `tag` register, with the enable bit set where the link
    /// has one and `enable` asks for it (pqos: a class always, an RMID other than 0).
    ///
    /// # Errors
    /// As [`IoRdt::read_tag`]; a value wider than the register ([`RequestError::IoRdt`]).
    pub fn write_tag(
        &mut self,
        channel: ChannelId,
        tag: Tag,
        value: u32,
        enable: bool,
    ) -> Result<(), MmioError> {
        let r = tag_register(&self.irdt, channel, tag)?;
        if value & !r.value_mask() != 0 {
            return Err(RequestError::IoRdt(format!(
                "I/O RDT channel {channel}: {} {value} does not fit its {}-byte register",
                tag.name(),
                r.bytes
            ))
            .into());
        }
        let bits = value
            | if r.enable && enable {
                r.enable_bit()
            } else {
                0
            };
        self.mem.write_narrow(r.addr, r.bytes, bits).map_err(|e| {
            Self::register_error(
                "write",
                r,
                format!("{} tag of channel {channel}", tag.name()),
                e,
            )
        })
    }
}

impl<M: MmioIo, E: From<MmioError>> IoRdtOps<E> for IoRdt<M> {
    fn io_channels(&self) -> Vec<IoChannelInfo> {
        self.irdt
            .links()
            .flat_map(|l| {
                l.channels.iter().map(|&id| IoChannelInfo {
                    id,
                    rmid_tagging: l.flags & RCS_RMID_TAGGING != 0,
                    clos_tagging: l.flags & RCS_CLOS_TAGGING != 0,
                })
            })
            .collect()
    }

    fn io_devices(&self) -> Vec<IoDeviceInfo> {
        self.irdt
            .devices()
            .map(|d| IoDeviceInfo {
                segment: d.segment,
                bdf: d.bdf,
                channels: d.channels.iter().map(|c| (c.channel, c.shared)).collect(),
            })
            .collect()
    }

    fn channel_class(&mut self, channel: ChannelId) -> Result<Option<ClassId>, E> {
        Ok(self.read_tag(channel, Tag::Clos)?.map(ClassId::new))
    }

    fn set_channel_class(&mut self, channel: ChannelId, class: Option<ClassId>) -> Result<(), E> {
        let value = class.map_or(0, ClassId::get);
        Ok(self.write_tag(channel, Tag::Clos, value, class.is_some())?)
    }

    fn channel_rmid(&mut self, channel: ChannelId) -> Result<Option<Rmid>, E> {
        Ok(self.read_tag(channel, Tag::Rmid)?.map(Rmid::new))
    }

    fn set_channel_rmid(&mut self, channel: ChannelId, rmid: Rmid) -> Result<(), E> {
        Ok(self.write_tag(channel, Tag::Rmid, rmid.get(), rmid.get() != 0)?)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::tests::sample_irdt;

    /// 8-byte registers in a map: what the simulator does, enough for the narrow default.
    #[derive(Default)]
    struct Mem(BTreeMap<u64, u64>);

    impl MmioIo for Mem {
        fn read(&mut self, addr: u64) -> io::Result<u64> {
            Ok(self.0.get(&addr).copied().unwrap_or(0))
        }
        fn write(&mut self, addr: u64, value: u64) -> io::Result<()> {
            self.0.insert(addr, value);
            Ok(())
        }
    }

    type Ops = dyn IoRdtOps<MmioError>;

    #[test]
    fn a_class_lands_in_the_channels_register_of_its_link_and_reads_back() {
        let irdt = sample_irdt();
        let link = irdt.links().next().unwrap().clone();
        let mut io = IoRdt::new(irdt, Mem::default());
        let ch = ChannelId::new(0, link.enum_id, 1);
        let ops: &mut Ops = &mut io;
        ops.set_channel_class(ch, Some(ClassId::new(3))).unwrap();
        assert_eq!(ops.channel_class(ch).unwrap(), Some(ClassId::new(3)));
        // channel 0 of the same link is untouched
        assert_eq!(
            ops.channel_class(ChannelId::new(0, link.enum_id, 0))
                .unwrap(),
            Some(ClassId::new(0))
        );
        let r = tag_register(io.irdt(), ch, Tag::Clos).unwrap();
        let bytes = u64::from(r.bytes);
        assert_eq!(
            r.addr,
            link.mmio + u64::from(link.clos_block_offset) + bytes
        );
        let word = io.mem.0[&(r.addr & !7)];
        assert_eq!((word >> ((r.addr & 7) * 8)) & 0xffff, 3);
    }

    #[test]
    fn the_enable_bit_is_set_with_a_class_and_clear_after_a_reset() {
        let mut irdt = sample_irdt();
        let flags = RCS_CLOS_TAGGING | RCS_RMID_TAGGING | RCS_CLOS_ENABLE | RCS_REG_2BYTE;
        irdt.rmuds[0].links[0].flags = flags;
        let enum_id = irdt.rmuds[0].links[0].enum_id;
        let mut io = IoRdt::new(irdt, Mem::default());
        let ch = ChannelId::new(0, enum_id, 0);
        let ops: &mut Ops = &mut io;
        assert_eq!(ops.channel_class(ch).unwrap(), None, "power-on: no class");
        ops.set_channel_class(ch, Some(ClassId::new(2))).unwrap();
        assert_eq!(ops.channel_class(ch).unwrap(), Some(ClassId::new(2)));
        let r = tag_register(io.irdt(), ch, Tag::Clos).unwrap();
        assert_eq!(r.bytes, 2);
        assert_eq!(io.mem.read_narrow(r.addr, 2).unwrap(), 0x8002);
        let ops: &mut Ops = &mut io;
        ops.set_channel_class(ch, None).unwrap();
        assert_eq!(ops.channel_class(ch).unwrap(), None);
        // a class that needs the enable bit does not fit
        let e = ops
            .set_channel_class(ch, Some(ClassId::new(0x8000)))
            .unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
    }

    #[test]
    fn unknown_channels_and_untagged_links_are_refused_by_name() {
        let mut irdt = sample_irdt();
        let enum_id = irdt.rmuds[0].links[0].enum_id;
        let count = irdt.rmuds[0].links[0].channel_count;
        irdt.rmuds[0].links[0].flags = RCS_RMID_TAGGING;
        let mut io = IoRdt::new(irdt, Mem::default());
        let ops: &mut Ops = &mut io;
        for bad in [
            ChannelId::new(0, enum_id, count),
            ChannelId::new(5, enum_id, 0),
            ChannelId::new(0, enum_id.wrapping_add(7), 0),
            ChannelId::from_raw(0),
        ] {
            let e = ops.channel_class(bad).unwrap_err().to_string();
            assert!(e.contains(&bad.to_string()) && e.contains("IRDT"), "{e}");
        }
        let ch = ChannelId::new(0, enum_id, 0);
        let e = ops
            .set_channel_class(ch, Some(ClassId::new(1)))
            .unwrap_err();
        assert!(e.to_string().contains("does not tag CLOS"), "{e}");
        ops.set_channel_rmid(ch, Rmid::new(7)).unwrap();
        assert_eq!(ops.channel_rmid(ch).unwrap(), Some(Rmid::new(7)));
        assert!(io.mem.0.len() == 1, "only the RMID register was written");
    }

    #[test]
    fn devices_resolve_to_their_channels_as_pqos_numbers_them() {
        let irdt = sample_irdt();
        let d = irdt.devices().next().unwrap().clone();
        let io = IoRdt::new(irdt, Mem::default());
        let ops: &Ops = &io;
        let all = ops.device_channels(d.segment, d.bdf, None).unwrap();
        assert_eq!(
            all,
            d.channels.iter().map(|c| c.channel).collect::<Vec<_>>()
        );
        assert_eq!(
            ops.device_channels(d.segment, d.bdf, Some(1)).unwrap(),
            vec![all[1]]
        );
        let e = ops.device_channels(d.segment, d.bdf, Some(7)).unwrap_err();
        assert!(e.to_string().contains("no virtual channel 7"), "{e}");
        let e = ops.device_channels(d.segment, d.bdf ^ 1, None).unwrap_err();
        assert!(e.to_string().contains("not in the ACPI IRDT"), "{e}");
    }
}
