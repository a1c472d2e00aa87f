//! The ACPI IRDT table (I/O RDT): the resource management units (RMUDs) of the platform's
//! I/O blocks, the PCI devices behind each (DSS) with the virtual channels they use, and the
//! links (RCS) whose MMIO registers tag a channel's traffic with a CLOS and an RMID.
//!
//! Layout as intel-cmt-cat v26.03 reads it (`lib/acpi_table.h`), little endian:
//! - IRDT: ACPI header (36), I/O protocol flags u16 @36, cache protocol flags u16 @38
//!   (bit 0 monitoring, bit 1 control, bit 2 bandwidth control), reserved 8; RMUDs from @48.
//! - RMUD: type u8 (0) @0, length u32 @4, PCI segment u16 @8; DSS and RCS entries from @13.
//! - DSS (type 0): `type: u16, length: u16`, device type u8 @4 (1 endpoint, 2 bridge),
//!   bus/device/function u16 @5; channel maps (CHMS) of 16 bytes from @8: RCS enumeration id
//!   u8, then 8 bytes, one per virtual channel VC0..VC7: bit 7 valid, bit 6 shared with
//!   another device, bits 5:0 the RCS channel.
//! - RCS (type 1): link type u16 @4 (0 PCIe, 1 CXL.cache), enumeration id u8 @6, channel
//!   count u8 @7, flags u16 @8 (bit 1 RMID tagging, bit 2 CLOS tagging, bit 3 2-byte
//!   registers), RMID block offset u16 @10, CLOS block offset u16 @12, MMIO base u64 @32;
//!   40 bytes.
//!
//! # References
//! - Intel RDT Architecture Specification rev 1.3, ch. 4 (IRDT) and the I/O RDT chapter.
//! - intel-cmt-cat v26.03 `lib/acpi_table.h`, `lib/iordt.c` (channel ids: `PQOS_IRDT_CHAN_ID`).

use std::collections::BTreeMap;

use crate::acpi::{self, AcpiHeader, Bytes, Problem, TableError};

const TABLE: &str = "IRDT";

/// The IRDT's fixed part, in bytes.
pub const IRDT_FIXED_LEN: usize = 48;
/// An RMUD's fixed part, in bytes.
pub const RMUD_LEN: usize = 13;
/// A DSS's fixed part, in bytes.
pub const DSS_LEN: usize = 8;
/// One channel map (CHMS), in bytes.
pub const CHMS_LEN: usize = 16;
/// An RCS, in bytes.
pub const RCS_LEN: usize = 40;
/// Virtual channels per channel map.
pub const VCS: usize = 8;
/// CHMS VC byte bit 7: the entry is valid.
pub const VC_VALID: u8 = 1 << 7;
/// CHMS VC byte bit 6: the channel is shared with another device.
pub const VC_SHARED: u8 = 1 << 6;
/// RCS flags bit 1: the link tags traffic with RMIDs.
pub const RCS_RMID_TAGGING: u16 = 1 << 1;
/// RCS flags bit 2: the link tags traffic with CLOS.
pub const RCS_CLOS_TAGGING: u16 = 1 << 2;
/// RCS flags bit 3: the link's registers are 2 bytes wide (else 4).
pub const RCS_REG_2BYTE: u16 = 1 << 3;
/// RCS flags bit 4 (REF): an RMID tagging register has an enable bit, its top bit.
pub const RCS_RMID_ENABLE: u16 = 1 << 4;
/// RCS flags bit 5 (CEF): a CLOS tagging register has an enable bit, its top bit.
pub const RCS_CLOS_ENABLE: u16 = 1 << 5;

/// An I/O RDT channel id as pqos numbers them (the model's, [`rdt_core::ChannelId`]).
pub use rdt_core::ChannelId;

/// One virtual channel of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceChannel {
    /// The virtual channel (VC0..VC7).
    pub vc: u8,
    /// The channel it travels on.
    pub channel: ChannelId,
    /// Whether another device shares the channel.
    pub shared: bool,
}

/// A device scope structure (DSS): one PCI device or bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Byte offset in the table.
    pub offset: usize,
    /// 1: PCI endpoint, 2: PCI sub-hierarchy (a bridge and what is behind it).
    pub device_type: u8,
    /// PCI segment (the RMUD's).
    pub segment: u16,
    /// Bus (15:8), device (7:3), function (2:0).
    pub bdf: u16,
    /// Its channels.
    pub channels: Vec<DeviceChannel>,
}

impl Device {
    /// `SSSS:BB:DD.F`, as pqos prints a device.
    #[must_use]
    pub fn address(&self) -> String {
        rdt_core::iordt::pci_address(self.segment, self.bdf)
    }
}

/// A resource control structure (RCS): a link and its tagging registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Byte offset in the table.
    pub offset: usize,
    /// 0: PCIe, 1: CXL.cache.
    pub link_type: u16,
    /// Enumeration id, unique in its RMUD.
    pub enum_id: u8,
    /// Channels of the link (at most 8).
    pub channel_count: u8,
    /// Flags ([`RCS_RMID_TAGGING`], [`RCS_CLOS_TAGGING`], [`RCS_REG_2BYTE`]).
    pub flags: u16,
    /// Offset of the RMID tagging registers from [`Self::mmio`].
    pub rmid_block_offset: u16,
    /// Offset of the CLOS tagging registers.
    pub clos_block_offset: u16,
    /// Physical address of the link's register block.
    pub mmio: u64,
    /// The link's channel ids.
    pub channels: Vec<ChannelId>,
}

/// A resource management unit (RMUD): the devices and links of one PCI segment's I/O block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rmud {
    /// Byte offset in the table.
    pub offset: usize,
    /// PCI segment.
    pub segment: u16,
    /// Devices.
    pub devices: Vec<Device>,
    /// Links.
    pub links: Vec<Link>,
}

/// A parsed IRDT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Irdt {
    /// The ACPI header.
    pub header: AcpiHeader,
    /// I/O protocol flags (bit 0 monitoring, 1 control, 2 bandwidth control).
    pub io_protocol: u16,
    /// Cache protocol flags (same bits).
    pub cache_protocol: u16,
    /// The RMUDs.
    pub rmuds: Vec<Rmud>,
}

impl Irdt {
    /// Parses and checks an IRDT: lengths within their parents, whole channel maps, link
    /// enumeration ids unique per RMUD, every device channel on a link of its RMUD and within
    /// the link's channel count.
    ///
    /// # Errors
    /// A [`TableError`] naming the structure and its byte offset.
    pub fn parse(data: &[u8]) -> Result<Self, TableError> {
        let header = acpi::parse_header(TABLE, data, IRDT_FIXED_LEN)?;
        let b = Bytes::new(TABLE, data);
        let area = b.slice("header", IRDT_FIXED_LEN, data.len() - IRDT_FIXED_LEN)?;
        let mut rmuds = Vec::new();
        let mut at = 0;
        let mut index = 0u8;
        while at < area.len() {
            let n = "RMUD";
            let head = area.slice(n, at, 8)?;
            let kind = head.u8(n, 0)?;
            let len = head.u32(n, 4)?;
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if len < RMUD_LEN {
                return Err(area.error(
                    n,
                    at + 4,
                    Problem::TooShort {
                        length: len as u64,
                        min: RMUD_LEN as u64,
                    },
                ));
            }
            let r = area.slice(n, at, len)?;
            if kind == 0 {
                rmuds.push(parse_rmud(r, index)?);
                index = index.checked_add(1).ok_or_else(|| {
                    r.error(
                        n,
                        0,
                        Problem::Value {
                            field: "RMUD count",
                            value: 256,
                            rule: "pqos numbers at most 255 RMUDs",
                        },
                    )
                })?;
            }
            at += len;
        }
        Ok(Self {
            header,
            io_protocol: b.u16("header", 36)?,
            cache_protocol: b.u16("header", 38)?,
            rmuds,
        })
    }

    /// Every device of every RMUD.
    pub fn devices(&self) -> impl Iterator<Item = &Device> {
        self.rmuds.iter().flat_map(|r| &r.devices)
    }

    /// Every link of every RMUD.
    pub fn links(&self) -> impl Iterator<Item = &Link> {
        self.rmuds.iter().flat_map(|r| &r.links)
    }
}

// One pass over the RMUD's entries, then the devices' channel maps checked against its links.
#[allow(clippy::too_many_lines)]
fn parse_rmud(r: Bytes<'_>, index: u8) -> Result<Rmud, TableError> {
    let segment = r.u16("RMUD", 8)?;
    let entries = r.slice("RMUD", RMUD_LEN, r.len() - RMUD_LEN)?;
    let mut devices = Vec::new();
    let mut links: Vec<Link> = Vec::new();
    for sub in acpi::sub_tables(entries, "RMUD") {
        let sub = sub?;
        let s = sub.bytes;
        match sub.kind {
            0 => {
                let n = "DSS";
                if s.len() < DSS_LEN || !(s.len() - DSS_LEN).is_multiple_of(CHMS_LEN) {
                    return Err(s.error(
                        n,
                        2,
                        Problem::BadLength {
                            length: s.len() as u64,
                            rule: "a DSS is 8 bytes and whole 16-byte channel maps",
                        },
                    ));
                }
                let device_type = s.u8(n, 4)?;
                if !matches!(device_type, 1 | 2) {
                    return Err(s.error(
                        n,
                        4,
                        Problem::Value {
                            field: "device type",
                            value: device_type.into(),
                            rule: "1 (PCI endpoint) or 2 (PCI sub-hierarchy)",
                        },
                    ));
                }
                let mut maps = Vec::new();
                for i in 0..(s.len() - DSS_LEN) / CHMS_LEN {
                    let m = s.slice("CHMS", DSS_LEN + i * CHMS_LEN, CHMS_LEN)?;
                    maps.push((m.base(), m.u8("CHMS", 0)?, m.array::<VCS>("CHMS", 1)?));
                }
                devices.push((s, device_type, s.u16(n, 5)?, maps));
            }
            1 => {
                let n = "RCS";
                if s.len() < RCS_LEN {
                    return Err(s.error(
                        n,
                        2,
                        Problem::TooShort {
                            length: s.len() as u64,
                            min: RCS_LEN as u64,
                        },
                    ));
                }
                let enum_id = s.u8(n, 6)?;
                let channel_count = s.u8(n, 7)?;
                if usize::from(channel_count) > VCS {
                    return Err(s.error(
                        n,
                        7,
                        Problem::Value {
                            field: "channel count",
                            value: channel_count.into(),
                            rule: "a link has at most 8 channels",
                        },
                    ));
                }
                if let Some(first) = links.iter().find(|l| l.enum_id == enum_id) {
                    return Err(s.error(
                        n,
                        6,
                        Problem::Duplicate {
                            what: format!("RCS enumeration id {enum_id} in one RMUD"),
                            first: first.offset,
                        },
                    ));
                }
                links.push(Link {
                    offset: s.base(),
                    link_type: s.u16(n, 4)?,
                    enum_id,
                    channel_count,
                    flags: s.u16(n, 8)?,
                    rmid_block_offset: s.u16(n, 10)?,
                    clos_block_offset: s.u16(n, 12)?,
                    mmio: s.u64(n, 32)?,
                    channels: (0..channel_count)
                        .map(|c| ChannelId::new(index, enum_id, c))
                        .collect(),
                });
            }
            _ => {}
        }
    }
    let counts: BTreeMap<u8, u8> = links.iter().map(|l| (l.enum_id, l.channel_count)).collect();
    let mut out = Vec::new();
    for (s, device_type, bdf, maps) in devices {
        let mut channels = Vec::new();
        for (map_at, rcs, vcs) in maps {
            let Some(&count) = counts.get(&rcs) else {
                return Err(s.error(
                    "CHMS",
                    map_at - s.base(),
                    Problem::Value {
                        field: "RCS enumeration id",
                        value: rcs.into(),
                        rule: "must name an RCS of the same RMUD",
                    },
                ));
            };
            for (vc, &byte) in (0u8..).zip(vcs.iter()) {
                if byte & VC_VALID == 0 {
                    continue;
                }
                let channel = byte & !(VC_VALID | VC_SHARED);
                if channel >= count {
                    return Err(s.error(
                        "CHMS",
                        map_at - s.base() + 1 + usize::from(vc),
                        Problem::Value {
                            field: "channel",
                            value: channel.into(),
                            rule: "must be below its RCS's channel count",
                        },
                    ));
                }
                channels.push(DeviceChannel {
                    vc,
                    channel: ChannelId::new(index, rcs, channel),
                    shared: byte & VC_SHARED != 0,
                });
            }
        }
        out.push(Device {
            offset: s.base(),
            device_type,
            segment,
            bdf,
            channels,
        });
    }
    Ok(Rmud {
        offset: r.base(),
        segment,
        devices: out,
        links,
    })
}
