//! Table bytes from typed descriptions, laid out field by field at the offsets of the
//! specification (the tables in [`crate::erdt`], [`crate::mrrm`], [`crate::irdt`]): what the
//! simulator serves at `sys/firmware/acpi/tables/` and what the tests parse. The header's
//! length and checksum are computed; the `offset` fields of the descriptions are ignored
//! (they are where the parser found things).

use crate::acpi::{AcpiHeader, HEADER_LEN};
use crate::erdt::{self, CorrectionFactors, Domain, Erdt, kind};
use crate::irdt::{self, Irdt, VC_SHARED, VC_VALID};
use crate::mrrm::{self, Mrrm, RANGE_LOCAL_VALID, RANGE_REMOTE_VALID};

/// A header for a table of `signature` with this crate's OEM ids (`RDTSIM`), revision 1.
#[must_use]
pub fn header(signature: &[u8; 4]) -> AcpiHeader {
    AcpiHeader {
        signature: *signature,
        length: 0,
        revision: 1,
        checksum_ok: true,
        oem_id: *b"RDTSIM",
        oem_table_id: *b"RDT 1.3 ",
        oem_revision: 1,
        creator_id: u32::from_le_bytes(*b"RUST"),
        creator_revision: 1,
    }
}

/// A growing table: little-endian writes at explicit offsets.
#[derive(Debug, Default)]
struct Buf(Vec<u8>);

impl Buf {
    fn at(&mut self, offset: usize, bytes: &[u8]) {
        if self.0.len() < offset + bytes.len() {
            self.0.resize(offset + bytes.len(), 0);
        }
        self.0[offset..offset + bytes.len()].copy_from_slice(bytes);
    }
    fn u8(&mut self, o: usize, v: u8) {
        self.at(o, &[v]);
    }
    fn u16(&mut self, o: usize, v: u16) {
        self.at(o, &v.to_le_bytes());
    }
    fn u32(&mut self, o: usize, v: u32) {
        self.at(o, &v.to_le_bytes());
    }
    fn u64(&mut self, o: usize, v: u64) {
        self.at(o, &v.to_le_bytes());
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    /// Appends `sub` and patches its `u16` length at +2.
    fn sub16(&mut self, sub: Buf) {
        let mut sub = sub;
        let len = u16::try_from(sub.len()).unwrap_or(u16::MAX);
        sub.u16(2, len);
        let at = self.len();
        self.at(at, &sub.0);
    }
}

fn finish(h: &AcpiHeader, mut b: Buf) -> Vec<u8> {
    b.at(0, &h.signature);
    let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
    b.u32(4, len);
    b.u8(8, h.revision);
    b.u8(9, 0);
    b.at(10, &h.oem_id);
    b.at(16, &h.oem_table_id);
    b.u32(24, h.oem_revision);
    b.u32(28, h.creator_id);
    b.u32(32, h.creator_revision);
    let sum = b.0.iter().fold(0u8, |s, &x| s.wrapping_add(x));
    b.u8(9, 0u8.wrapping_sub(sum));
    b.0
}

fn correction(b: &mut Buf, len_at: usize, list_at: usize, c: &CorrectionFactors) {
    let list: &[u32] = match c {
        CorrectionFactors::None => &[],
        CorrectionFactors::Single(f) => std::slice::from_ref(f),
        CorrectionFactors::PerRmid(v) => v,
    };
    b.u32(len_at, u32::try_from(list.len()).unwrap_or(u32::MAX));
    for (i, f) in list.iter().enumerate() {
        b.u32(list_at + 4 * i, *f);
    }
}

#[allow(clippy::too_many_lines)] // one block per sub-structure, in table order
fn rmdd(d: &Domain) -> Buf {
    let mut r = Buf::default();
    r.u16(0, kind::RMDD);
    r.u16(4, d.flags);
    r.u16(6, d.io_l3_slices);
    r.u8(8, d.io_l3_sets);
    r.u8(9, d.io_l3_ways);
    r.u16(18, d.id);
    r.u32(20, d.max_rmid);
    r.u64(24, d.control.base);
    r.u16(32, u16::try_from(d.control.pages).unwrap_or(u16::MAX));
    debug_assert_eq!(r.len(), erdt::RMDD_LEN);
    if !d.cpu_agents.is_empty() {
        let mut s = Buf::default();
        s.u16(0, kind::CACD);
        s.u16(6, d.id);
        for (i, x) in d.cpu_agents.iter().enumerate() {
            s.u32(erdt::CACD_LEN + 4 * i, *x);
        }
        r.sub16(s);
    }
    if !d.device_agents.is_empty() {
        let mut s = Buf::default();
        s.u16(0, kind::DACD);
        s.u16(6, d.id);
        let mut at = erdt::CACD_LEN;
        for e in &d.device_agents {
            let len = erdt::DASE_LEN + 2 * e.path.len();
            s.u8(at, e.kind);
            s.u8(at + 1, u8::try_from(len).unwrap_or(u8::MAX));
            s.u16(at + 2, e.segment);
            s.u8(at + 4, 0);
            s.u8(at + 5, e.start_bus);
            for (i, (dev, func)) in e.path.iter().enumerate() {
                s.u8(at + 6 + 2 * i, *dev);
                s.u8(at + 7 + 2 * i, *func);
            }
            at += len;
        }
        r.sub16(s);
    }
    if let Some(c) = &d.cmrc {
        let mut s = Buf::default();
        s.u16(0, kind::CMRC);
        s.u32(8, c.flags);
        s.u8(12, c.index_fn);
        s.u64(24, c.block.base);
        s.u32(32, c.block.pages);
        s.u16(36, c.clump_size);
        s.u16(38, c.clump_stride);
        s.u64(40, c.upscaling);
        r.sub16(s);
    }
    if let Some(m) = &d.mmrc {
        let mut s = Buf::default();
        s.u16(0, kind::MMRC);
        s.u32(8, m.flags);
        s.u8(12, m.index_fn);
        s.u64(24, m.block.base);
        s.u32(32, m.block.pages);
        s.u8(36, m.counter_width);
        s.u64(37, m.upscaling);
        correction(&mut s, 52, erdt::MMRC_LEN, &m.correction);
        r.sub16(s);
    }
    if let Some(m) = &d.marc {
        let mut s = Buf::default();
        s.u16(0, kind::MARC);
        s.u16(6, m.flags);
        s.u8(8, m.index_fn);
        s.u64(16, m.optimal.base);
        s.u64(24, m.min.base);
        s.u64(32, m.max.base);
        s.u32(40, m.optimal.pages);
        s.u32(44, m.control_window);
        r.sub16(s);
    }
    if d.carc.is_some() {
        let mut s = Buf::default();
        s.u16(0, kind::CARC);
        s.u16(2, 4);
        r.sub16(s);
    }
    if let Some(c) = &d.cmrd {
        let mut s = Buf::default();
        s.u16(0, kind::CMRD);
        s.u32(8, c.flags);
        s.u8(12, c.index_fn);
        s.u64(24, c.block.base);
        s.u32(32, c.block.pages);
        s.u16(36, c.register_offset);
        s.u16(38, c.clump_size);
        s.u64(40, c.upscaling);
        r.sub16(s);
    }
    if let Some(i) = &d.ibrd {
        let mut s = Buf::default();
        s.u16(0, kind::IBRD);
        s.u32(8, i.flags);
        s.u8(12, i.index_fn);
        s.u64(24, i.block.base);
        s.u32(32, i.block.pages);
        s.u16(36, i.total_offset);
        s.u16(38, i.miss_offset);
        s.u16(40, i.total_clump_size);
        s.u16(42, i.miss_clump_size);
        s.u8(51, i.counter_width);
        s.u64(52, i.upscaling);
        correction(&mut s, 60, erdt::IBRD_LEN, &i.correction);
        r.sub16(s);
    }
    if d.ibad.is_some() {
        let mut s = Buf::default();
        s.u16(0, kind::IBAD);
        s.u16(2, 4);
        r.sub16(s);
    }
    if let Some(c) = &d.card {
        let mut s = Buf::default();
        s.u16(0, kind::CARD);
        s.u32(8, c.flags);
        s.u32(12, c.contention_mask);
        s.u8(16, c.index_fn);
        s.u64(24, c.block.base);
        s.u32(32, c.block.pages);
        s.u16(36, c.cat_offset);
        s.u16(38, c.cat_block_size);
        r.sub16(s);
    }
    r
}

/// The bytes of an ERDT describing `e` (its header's OEM fields, max CLOS and domains).
#[must_use]
pub fn erdt(e: &Erdt) -> Vec<u8> {
    let mut b = Buf::default();
    b.at(0, &[0; erdt::ERDT_FIXED_LEN]);
    b.u32(HEADER_LEN, e.max_clos);
    for d in &e.domains {
        b.sub16(rmdd(d));
    }
    finish(&e.header, b)
}

/// The bytes of an MRRM describing `m`.
#[must_use]
pub fn mrrm(m: &Mrrm) -> Vec<u8> {
    let mut b = Buf::default();
    b.at(0, &[0; mrrm::MRRM_FIXED_LEN]);
    b.u8(36, m.max_regions);
    b.u8(37, m.flags);
    for r in &m.ranges {
        let mut e = Buf::default();
        e.at(0, &[0; mrrm::RANGE_LEN]);
        e.u64(8, r.base);
        e.u64(16, r.length);
        let mut flags = 0;
        if let Some(id) = r.local {
            flags |= RANGE_LOCAL_VALID;
            e.u8(26, id.get());
        }
        if let Some(id) = r.remote {
            flags |= RANGE_REMOTE_VALID;
            e.u8(27, id.get());
        }
        e.u16(24, flags);
        e.at(mrrm::RANGE_LEN, &r.programming_registers);
        b.sub16(e);
    }
    finish(&m.header, b)
}

/// The bytes of an IRDT describing `t` (devices' channels are written back as channel maps
/// of the links their ids name).
#[must_use]
pub fn irdt(t: &Irdt) -> Vec<u8> {
    let mut b = Buf::default();
    b.at(0, &[0; irdt::IRDT_FIXED_LEN]);
    b.u16(36, t.io_protocol);
    b.u16(38, t.cache_protocol);
    for r in &t.rmuds {
        let mut u = Buf::default();
        u.at(0, &[0; irdt::RMUD_LEN]);
        u.u16(8, r.segment);
        for d in &r.devices {
            let mut s = Buf::default();
            s.u16(0, 0);
            s.u8(4, d.device_type);
            s.u16(5, d.bdf);
            s.u8(7, 0);
            let mut links: Vec<u8> = d
                .channels
                .iter()
                .map(|c| ((c.channel.get() >> 8) & 0xff) as u8)
                .collect();
            links.sort_unstable();
            links.dedup();
            for (i, rcs) in links.iter().enumerate() {
                let at = irdt::DSS_LEN + i * irdt::CHMS_LEN;
                s.at(at, &[0; irdt::CHMS_LEN]);
                s.u8(at, *rcs);
                for c in d
                    .channels
                    .iter()
                    .filter(|c| ((c.channel.get() >> 8) & 0xff) as u8 == *rcs)
                {
                    let mut byte = VC_VALID | (c.channel.get() & 0x3f) as u8;
                    if c.shared {
                        byte |= VC_SHARED;
                    }
                    s.u8(at + 1 + usize::from(c.vc % 8), byte);
                }
            }
            u.sub16(s);
        }
        for l in &r.links {
            let mut s = Buf::default();
            s.at(0, &[0; irdt::RCS_LEN]);
            s.u16(0, 1);
            s.u16(4, l.link_type);
            s.u8(6, l.enum_id);
            s.u8(7, l.channel_count);
            s.u16(8, l.flags);
            s.u16(10, l.rmid_block_offset);
            s.u16(12, l.clos_block_offset);
            s.u64(32, l.mmio);
            u.sub16(s);
        }
        let len = u32::try_from(u.len()).unwrap_or(u32::MAX);
        u.u32(4, len);
        let at = b.len();
        b.at(at, &u.0);
    }
    finish(&t.header, b)
}
