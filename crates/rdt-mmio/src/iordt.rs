//! I/O RDT devices as pqos v26.03's `--print-io-devs` and `--print-io-dev` show them: each
//! IRDT device with its virtual channels, the MMIO base of the link each channel travels on,
//! and the ERDT device domain (DACD) whose scope covers it.
//!
//! # References
//! intel-cmt-cat v26.03 `pqos/cap.c` (`cap_print_io_devs`), `lib/iordt.c`, `lib/erdt.c`
//! (read for facts); Intel RDT Architecture Specification rev 1.3 (DACD device agent scope
//! entries).

use crate::erdt::{DeviceScope, Erdt};
use crate::irdt::{ChannelId, Irdt};

/// One virtual channel of an I/O device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoChannel {
    /// The virtual channel (VC0..VC7).
    pub vc: u8,
    /// Its channel id (pqos's numbering).
    pub channel: ChannelId,
    /// MMIO base of the link (RCS) that carries the channel, `None` when no link of the
    /// device's RMUD lists it.
    pub mmio: Option<u64>,
}

/// An I/O RDT device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoDevice {
    /// PCI segment.
    pub segment: u16,
    /// Bus (15:8), device (7:3), function (2:0).
    pub bdf: u16,
    /// 1: PCI endpoint, 2: PCI sub-hierarchy (IRDT DSS type).
    pub device_type: u8,
    /// Its channels, in the table's order.
    pub channels: Vec<IoChannel>,
    /// The ERDT device domain whose scope covers the device.
    pub domain: Option<u16>,
    /// That domain's I/O L3 ways.
    pub io_l3_ways: Option<u8>,
}

impl IoDevice {
    /// PCI bus.
    #[must_use]
    pub const fn bus(&self) -> u8 {
        (self.bdf >> 8) as u8
    }

    /// PCI device.
    #[must_use]
    pub const fn device(&self) -> u8 {
        ((self.bdf >> 3) & 0x1f) as u8
    }

    /// PCI function.
    #[must_use]
    pub const fn function(&self) -> u8 {
        (self.bdf & 7) as u8
    }

    /// `SSSS:BB:DD.F`.
    #[must_use]
    pub fn address(&self) -> String {
        rdt_core::iordt::pci_address(self.segment, self.bdf)
    }
}

/// Whether a DACD scope entry covers the device at `segment`/`bdf`: an endpoint entry names
/// it (its bus is the start bus and its one hop the device and function); a sub-hierarchy
/// entry covers its start bus.
fn covers(scope: &DeviceScope, segment: u16, bdf: u16) -> bool {
    let bus = u8::try_from(bdf >> 8).unwrap_or(u8::MAX);
    let dev_fn = (
        u8::try_from((bdf >> 3) & 0x1f).unwrap_or(0),
        u8::try_from(bdf & 7).unwrap_or(0),
    );
    scope.segment == segment
        && scope.start_bus == bus
        && match scope.kind {
            2 => true,
            _ => scope.path.len() == 1 && scope.path[0] == dev_fn,
        }
}

/// Every device of `irdt`, in table order, with its ERDT domain when `erdt` covers it.
#[must_use]
pub fn io_devices(irdt: &Irdt, erdt: Option<&Erdt>) -> Vec<IoDevice> {
    let mut out = Vec::new();
    for rmud in &irdt.rmuds {
        for d in &rmud.devices {
            let channels = d
                .channels
                .iter()
                .map(|c| IoChannel {
                    vc: c.vc,
                    channel: c.channel,
                    mmio: rmud
                        .links
                        .iter()
                        .find(|l| l.channels.contains(&c.channel))
                        .map(|l| l.mmio),
                })
                .collect();
            let domain = erdt.and_then(|e| {
                e.domains.iter().find(|dom| {
                    dom.device_agents
                        .iter()
                        .any(|s| covers(s, d.segment, d.bdf))
                })
            });
            out.push(IoDevice {
                segment: d.segment,
                bdf: d.bdf,
                device_type: d.device_type,
                channels,
                domain: domain.map(|x| x.id),
                io_l3_ways: domain.map(|x| x.io_l3_ways),
            });
        }
    }
    out
}

/// Parses pqos's device argument `SEGMENT:BUS:DEVICE.FUNCTION` (hexadecimal; the segment may
/// be left out, as `BUS:DEVICE.FUNCTION`) into (segment, bdf).
///
/// # Errors
/// A message naming the token and the rule.
pub fn parse_pci_address(s: &str) -> Result<(u16, u16), String> {
    let bad = || {
        format!("`{s}`: a PCI device is SEGMENT:BUS:DEVICE.FUNCTION in hexadecimal (0000:16:00.0)")
    };
    let (head, func) = s.rsplit_once('.').ok_or_else(bad)?;
    let parts: Vec<&str> = head.split(':').collect();
    let (seg, bus, dev) = match parts[..] {
        [seg, bus, dev] => (seg, bus, dev),
        [bus, dev] => ("0", bus, dev),
        _ => return Err(bad()),
    };
    let hex = |t: &str, max: u32| {
        u32::from_str_radix(t, 16)
            .ok()
            .filter(|v| *v <= max && !t.is_empty() && t.len() <= 4)
            .ok_or_else(bad)
    };
    let (seg, bus, dev, func) = (
        hex(seg, 0xffff)?,
        hex(bus, 0xff)?,
        hex(dev, 0x1f)?,
        hex(func, 7)?,
    );
    let bdf = (bus << 8) | (dev << 3) | func;
    Ok((
        u16::try_from(seg).map_err(|_| bad())?,
        u16::try_from(bdf).map_err(|_| bad())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{sample_erdt, sample_irdt};

    #[test]
    fn devices_carry_their_channels_links_and_domain() {
        let irdt = sample_irdt();
        let erdt = sample_erdt();
        let devs = io_devices(&irdt, Some(&erdt));
        assert_eq!(devs.len(), 1);
        let d = &devs[0];
        assert_eq!(d.address(), "0000:17:02.0");
        assert_eq!(d.channels.len(), 2);
        // both channels travel on the link of enumeration id 1
        assert!(d.channels.iter().all(|c| c.mmio == Some(0xfc00_0000)));
        // the sample's DACD scope is an endpoint at bus 0x17, path (2,0) then (0,1): two
        // hops, so it names a device behind a bridge, not this one
        assert_eq!(d.domain, None);
        let mut erdt = erdt;
        erdt.domains[2].device_agents[0].path = vec![(2, 0)];
        let d = &io_devices(&irdt, Some(&erdt))[0];
        assert_eq!(d.domain, Some(8));
        assert_eq!(d.io_l3_ways, Some(12));
    }

    #[test]
    fn pci_addresses_parse_as_pqos_takes_them() {
        assert_eq!(parse_pci_address("0000:16:00.0"), Ok((0, 0x1600)));
        assert_eq!(parse_pci_address("96:01.1"), Ok((0, 0x9609)));
        assert_eq!(parse_pci_address("1:ff:1f.7"), Ok((1, 0xffff)));
        for bad in ["", "16:00", "16:20.0", "16:00.8", "x:16:00.0", "0:0:0:0.0"] {
            assert!(
                parse_pci_address(bad).unwrap_err().contains("SEGMENT:BUS"),
                "{bad}"
            );
        }
    }
}
