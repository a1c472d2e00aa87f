//! I/O RDT in the model: the channels that carry a PCIe (or CXL.cache) device's traffic,
//! each tagged with a class of service (L3 CAT of the I/O agents) and an RMID (occupancy
//! and bandwidth monitoring of the I/O agents), as the ACPI IRDT table describes them.
//!
//! A backend that can reach the tagging registers offers [`IoRdtOps`] through
//! [`Backend::io_rdt`](crate::Backend::io_rdt); the transaction plans and journals channel
//! associations ([`crate::transaction::Change::Channel`]) as it does CPU associations, and a
//! reset (`-R`) puts every channel that tags CLOS back to COS 0 with its enable bit clear, as
//! pqos does (`lib/iordt.c` `iordt_assoc_reset`).
//!
//! # References
//! - Intel RDT Architecture Specification rev 1.3, the I/O RDT chapter (IRDT RCS tagging
//!   registers).
//! - intel-cmt-cat v26.03 `lib/iordt.c` (`PQOS_IRDT_CHAN_ID`, `iordt_assoc_write`,
//!   `iordt_mon_assoc_write`), `lib/api.c` (`pqos_alloc_assoc_set_dev`), read for facts.

use std::fmt;

use crate::{ClassId, RequestError, Rmid};

/// An I/O RDT channel id as pqos numbers them: the link's channel in bits 7:0, the link's
/// (RCS) enumeration id in bits 15:8, the index of its RMUD in the IRDT plus one in bits
/// 23:16 (`PQOS_IRDT_CHAN_ID`). Shown as pqos does, `0x10100`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct ChannelId(u32);

impl ChannelId {
    /// The channel `channel` of link (RCS) `rcs` in the `rmud_index`th RMUD.
    #[must_use]
    pub const fn new(rmud_index: u8, rcs: u8, channel: u8) -> Self {
        Self(channel as u32 | (rcs as u32) << 8 | ((rmud_index as u32) + 1) << 16)
    }

    /// The raw id.
    #[must_use]
    pub const fn get(self) -> u32 {
        self.0
    }

    /// An id from its raw form.
    #[must_use]
    pub const fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The channel's index on its link (bits 7:0): which tagging register of the link's
    /// blocks is its.
    #[must_use]
    pub const fn index(self) -> u8 {
        (self.0 & 0xff) as u8
    }

    /// The id of its link: the id with the channel bits cleared (`PQOS_IRDT_CHAN_MMIO`).
    #[must_use]
    pub const fn link(self) -> u32 {
        self.0 & !0xff
    }
}

impl fmt::Display for ChannelId {
    /// pqos's form, `0x10100`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl std::str::FromStr for ChannelId {
    type Err = RequestError;

    /// A channel id as pqos takes it (`strtouint64`): decimal, or hexadecimal with `0x`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(h) => u32::from_str_radix(h, 16),
            None => t.parse(),
        };
        match v {
            Ok(v) if v != 0 => Ok(Self(v)),
            _ => Err(RequestError::IoRdt(format!(
                "`{s}`: an I/O RDT channel is a non-zero id such as 0x10100 (`--print-io-devs` \
                 lists them)"
            ))),
        }
    }
}

/// One channel of the platform (pqos `struct pqos_channel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IoChannelInfo {
    /// Its id.
    pub id: ChannelId,
    /// Its link tags traffic with an RMID (IRDT RCS flags bit 1).
    pub rmid_tagging: bool,
    /// Its link tags traffic with a CLOS (IRDT RCS flags bit 2).
    pub clos_tagging: bool,
}

/// One device and the channels its virtual channels travel on (pqos `struct pqos_dev`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IoDeviceInfo {
    /// PCI segment.
    pub segment: u16,
    /// Bus (15:8), device (7:3), function (2:0).
    pub bdf: u16,
    /// Its channels in table order; pqos's "virtual channel" of a device (`dev:1=16:00.0@1`,
    /// `Device 0000:16:00.0@1`) is the index in this list. `true`: shared with another
    /// device.
    pub channels: Vec<(ChannelId, bool)>,
}

impl IoDeviceInfo {
    /// `SSSS:BB:DD.F`, as pqos prints a device ([`pci_address`]).
    #[must_use]
    pub fn address(&self) -> String {
        pci_address(self.segment, self.bdf)
    }
}

/// A PCI device's address as pqos prints it, `SSSS:BB:DD.F` (hex): `segment`, and `bdf` =
/// bus (bits 15:8), device (7:3), function (2:0), as the ACPI IRDT's device scope gives it.
#[must_use]
pub fn pci_address(segment: u16, bdf: u16) -> String {
    format!(
        "{segment:04x}:{:02x}:{:02x}.{:x}",
        bdf >> 8,
        (bdf >> 3) & 0x1f,
        bdf & 7
    )
}

/// The I/O RDT association of a backend that reaches the IRDT links' tagging registers
/// ([`Backend::io_rdt`](crate::Backend::io_rdt)).
///
/// A tagging register holds a class (or an RMID) in its low bits and, on links whose RCS
/// says so (flags bit 5 CEF for CLOS, bit 4 REF for RMID), an enable bit in its top bit; a
/// register without it set reads as `None` (pqos's `NOCLOS`/`NORMID`).
pub trait IoRdtOps<E> {
    /// Every channel of every link, in table order.
    fn io_channels(&self) -> Vec<IoChannelInfo>;

    /// Every device, in table order.
    fn io_devices(&self) -> Vec<IoDeviceInfo>;

    /// The channel(s) of the device at `segment`/`bdf`: the `vc`th one, or all of them
    /// (pqos's `dev:` form without `@VC`).
    ///
    /// # Errors
    /// [`RequestError::IoRdt`] naming the device when the IRDT has no such device or it
    /// has no `vc`th channel.
    fn device_channels(
        &self,
        segment: u16,
        bdf: u16,
        vc: Option<u8>,
    ) -> Result<Vec<ChannelId>, RequestError> {
        let devices = self.io_devices();
        let dev = devices
            .iter()
            .find(|d| d.segment == segment && d.bdf == bdf)
            .ok_or_else(|| {
                RequestError::IoRdt(format!(
                    "device {} is not in the ACPI IRDT table (`--print-io-devs` lists the \
                     devices)",
                    pci_address(segment, bdf)
                ))
            })?;
        match vc {
            None => Ok(dev.channels.iter().map(|c| c.0).collect()),
            Some(v) => dev
                .channels
                .get(usize::from(v))
                .map(|c| vec![c.0])
                .ok_or_else(|| {
                    RequestError::IoRdt(format!(
                        "device {} has {} channel(s): no virtual channel {v}",
                        dev.address(),
                        dev.channels.len()
                    ))
                }),
        }
    }

    /// The class `channel` is tagged with; `None` when its enable bit is clear.
    ///
    /// # Errors
    /// An unknown channel or one whose link does not tag CLOS ([`RequestError`]); the
    /// register read failed.
    fn channel_class(&mut self, channel: ChannelId) -> Result<Option<ClassId>, E>;

    /// Tags `channel` with `class` (enable bit set where the link has one); `None` writes
    /// class 0 with the enable bit clear (what a reset leaves).
    ///
    /// # Errors
    /// As [`IoRdtOps::channel_class`]; a class wider than the register.
    fn set_channel_class(&mut self, channel: ChannelId, class: Option<ClassId>) -> Result<(), E>;

    /// The RMID `channel` is tagged with; `None` when its enable bit is clear.
    ///
    /// # Errors
    /// As [`IoRdtOps::channel_class`], for RMID tagging.
    fn channel_rmid(&mut self, channel: ChannelId) -> Result<Option<Rmid>, E>;

    /// Tags `channel` with `rmid` (RMID 0 clears the enable bit, as pqos writes it).
    ///
    /// # Errors
    /// As [`IoRdtOps::channel_rmid`].
    fn set_channel_rmid(&mut self, channel: ChannelId, rmid: Rmid) -> Result<(), E>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_print_as_pqos_prints_them() {
        assert_eq!(pci_address(0, 0x9600), "0000:96:00.0");
        // bus 0x16, device 1, function 5; segment 0x1a
        assert_eq!(pci_address(0x1a, 0x160d), "001a:16:01.5");
        assert_eq!(pci_address(0xffff, 0xffff), "ffff:ff:1f.7");
    }

    #[test]
    fn channel_ids_are_pqos_numbers() {
        let c = ChannelId::new(0, 1, 1);
        assert_eq!(c.get(), 0x10101);
        assert_eq!(c.to_string(), "0x10101");
        assert_eq!(c.index(), 1);
        assert_eq!(c.link(), 0x10100);
        assert_eq!("0x10101".parse::<ChannelId>().unwrap(), c);
        assert_eq!("65793".parse::<ChannelId>().unwrap(), c);
        for bad in ["", "0", "x", "0x", "-1", "0x1_0000_0000"] {
            let e = bad.parse::<ChannelId>().unwrap_err().to_string();
            assert!(e.contains("I/O RDT channel"), "{bad}: {e}");
        }
    }
}
