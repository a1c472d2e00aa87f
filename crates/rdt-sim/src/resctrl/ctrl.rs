//! Allocation: `schemata`, `size`, `mode`, `bit_usage` and the other `info/` files, and the
//! initial controls of a new group (`fs/resctrl/ctrlmondata.c`, `rdtgroup.c`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;

use crate::SimPlatform;
use crate::vfs::err;

use super::errno::{EINVAL, ENOSPC};
use super::hw::Res;
use super::kstr::{kstrtou32, kstrtoul, strim, strsep};
use super::{
    Conf, Gid, InfoDir, InfoFile, MBA_MAX_MBPS, Mode, ROOT, Resctrl, Schema, einval, wrmsr,
};

/// Staged control values of one write (`staged_config`): (resource, CDP type, domain index).
pub(super) type Staged = BTreeMap<(Res, Conf, usize), u64>;

/// `find_first_bit` / `find_next_zero_bit` / `find_next_bit` over the low `len` bits.
fn next_bit(v: u64, len: u32, from: u32, set: bool) -> u32 {
    (from..len)
        .find(|&i| (v >> i) & 1 == u64::from(set))
        .unwrap_or(len)
}

/// `cbm_ensure_valid` (`fs/resctrl/rdtgroup.c`): only the lowest run of ones is kept,
/// whether or not the resource takes sparse masks (on AMD a free `ff0f` becomes `f`).
fn cbm_ensure_valid(v: u64, len: u32) -> u64 {
    if v == 0 {
        return v;
    }
    let first = next_bit(v, len, 0, true);
    let zero = next_bit(v, len, first, false);
    if zero >= 64 {
        v
    } else {
        v & ((1u64 << zero) - 1)
    }
}

impl Resctrl {
    fn ctrl(&self, r: Res, dom: usize, idx: u32) -> u64 {
        self.ctrl_val[&r][dom][idx as usize]
    }

    /// `resctrl_arch_get_config`: the committed value of `closid` of CDP type `conf`.
    pub(super) fn get_config(&self, r: Res, dom: usize, closid: u32, conf: Conf) -> u64 {
        self.ctrl(r, dom, super::cfg_index(closid, conf))
    }

    /// The value `schemata` and `size` show for `closid` in domain `dom` of `s`.
    fn shown_value(&self, s: &Schema, dom: usize, closid: u32) -> u64 {
        if self.mba_sc(s.res) {
            u64::from(self.mbps_val[dom][closid as usize])
        } else {
            self.get_config(s.res, dom, closid, s.conf)
        }
    }

    pub(super) fn show_schemata(&self, g: Gid) -> String {
        let closid = self.grp(g).closid;
        let mut out = String::new();
        for s in &self.schemas {
            if closid >= s.num_closid {
                continue;
            }
            let _ = write!(out, "{:>w$}:", s.name, w = self.name_width);
            let doms: Vec<String> = self
                .hw
                .domains(s.res)
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let v = self.shown_value(s, i, closid);
                    if s.res.is_cache() {
                        format!("{}={v:x}", d.id)
                    } else {
                        format!("{}={v}", d.id)
                    }
                })
                .collect();
            out.push_str(&doms.join(";"));
            out.push('\n');
        }
        out
    }

    /// `size`: bytes per domain for caches (`cache size / cbm_len * popcount`, in 32-bit
    /// arithmetic as the kernel's `unsigned int`), the raw value for MB/SMBA.
    pub(super) fn show_size(&self, g: Gid) -> String {
        let closid = self.grp(g).closid;
        let mut out = String::new();
        for s in &self.schemas {
            let _ = write!(out, "{:>w$}:", s.name, w = self.name_width);
            let doms: Vec<String> = self
                .hw
                .domains(s.res)
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let v = self.shown_value(s, i, closid);
                    let size = self.hw.cache(s.res).map_or(v, |c| {
                        let bits = u64::from((v & c.default_ctrl()).count_ones());
                        let size = u64::from(u32::try_from(c.cache_size).unwrap_or(u32::MAX));
                        size / u64::from(c.cbm_len) * bits
                    });
                    format!("{}={}", d.id, u32::try_from(size).unwrap_or(u32::MAX))
                })
                .collect();
            out.push_str(&doms.join(";"));
            out.push('\n');
        }
        out
    }

    /// One `write(2)` to `schemata` (`rdtgroup_schemata_write`): every line is parsed and
    /// checked into a staging area first; only when all pass are the staged domains written
    /// (partial update). `mba_MBps` targets are stored while parsing, as the kernel does.
    pub(super) fn write_schemata(
        &mut self,
        p: &mut SimPlatform,
        g: Gid,
        data: &[u8],
    ) -> io::Result<()> {
        // Valid input requires a trailing newline (checked before the status is cleared).
        let Some(buf) = data.strip_suffix(b"\n") else {
            return einval();
        };
        self.status_clear();
        let closid = self.grp(g).closid;
        let mut staged = Staged::new();
        for tok in buf.split(|&c| c == b'\n') {
            let (name, rest) = strsep(tok, b':');
            let name = strim(name);
            let Some(rest) = rest else {
                return self.fail(EINVAL, "Missing ':'\n");
            };
            if rest.is_empty() {
                let mut m = b"Missing '".to_vec();
                m.extend_from_slice(name);
                m.extend_from_slice(b"' value\n");
                return self.fail(EINVAL, m);
            }
            let Some(si) = self
                .schemas
                .iter()
                .position(|s| s.name.as_bytes() == name && closid < s.num_closid)
            else {
                let mut m = b"Unknown or unsupported resource name '".to_vec();
                m.extend_from_slice(name);
                m.extend_from_slice(b"'\n");
                return self.fail(EINVAL, m);
            };
            self.parse_line(rest, si, g, &mut staged)?;
        }
        self.update_domains(p, closid, &staged)
    }

    /// `parse_line`: `ID=VALUE` tokens separated by `;`.
    fn parse_line(
        &mut self,
        line: &[u8],
        si: usize,
        g: Gid,
        staged: &mut Staged,
    ) -> io::Result<()> {
        let s = self.schemas[si].clone();
        let mut line = Some(line);
        while let Some(l) = line.filter(|l| !l.is_empty()) {
            let (dom, rest) = strsep(l, b';');
            line = rest;
            let (id, val) = strsep(dom, b'=');
            let (Some(val), Ok(dom_id)) = (val, kstrtoul(id, 10)) else {
                return self.fail(EINVAL, "Missing '=' or non-numeric domain\n");
            };
            let val = strim(val);
            let Some(di) = self
                .hw
                .domains(s.res)
                .iter()
                .position(|d| u64::from(d.id) == dom_id)
            else {
                return einval(); // unknown domain: no message
            };
            if s.res.is_cache() {
                self.parse_cbm(&s, di, val, g, staged)?;
            } else {
                self.parse_bw(&s, di, val, g, staged)?;
            }
        }
        Ok(())
    }

    /// `parse_cbm` + `cbm_validate` for group `g`.
    fn parse_cbm(
        &mut self,
        s: &Schema,
        di: usize,
        val: &[u8],
        g: Gid,
        staged: &mut Staged,
    ) -> io::Result<()> {
        let (closid, mode) = (self.grp(g).closid, self.grp(g).mode);
        self.parse_cbm_for(s, di, val, closid, mode, staged)
    }

    /// `parse_cbm` + `cbm_validate` for `closid` with `mode` (a group's, or io_alloc's).
    pub(super) fn parse_cbm_for(
        &mut self,
        s: &Schema,
        di: usize,
        val: &[u8],
        closid: u32,
        mode: Mode,
        staged: &mut Staged,
    ) -> io::Result<()> {
        let c = self.hw.cache(s.res).expect("cache schema").clone();
        let dom_id = self.hw.domains(s.res)[di].id;
        if staged.contains_key(&(s.res, s.conf, di)) {
            return self.fail(EINVAL, format!("Duplicate domain {dom_id}\n"));
        }
        let Ok(v) = kstrtoul(val, 16) else {
            let mut m = b"Non-hex character in the mask ".to_vec();
            m.extend_from_slice(val);
            m.push(b'\n');
            return self.fail(EINVAL, m);
        };
        if (c.min_cbm_bits > 0 && v == 0) || v > c.default_ctrl() {
            return self.fail(EINVAL, "Mask out of range\n");
        }
        let first = next_bit(v, c.cbm_len, 0, true);
        let zero = next_bit(v, c.cbm_len, first, false);
        if !c.sparse && next_bit(v, c.cbm_len, zero, true) < c.cbm_len {
            return self.fail(
                EINVAL,
                format!("The mask {v:x} has non-consecutive 1-bits\n"),
            );
        }
        if zero - first < c.min_cbm_bits {
            return self.fail(
                EINVAL,
                format!("Need at least {} bits in the mask\n", c.min_cbm_bits),
            );
        }
        if self.cbm_overlaps(s, di, v, closid, true) {
            return self.fail(EINVAL, "Overlaps with exclusive group\n");
        }
        if self.cbm_overlaps(s, di, v, closid, false) && mode == Mode::Exclusive {
            return self.fail(EINVAL, "Overlaps with other group\n");
        }
        staged.insert((s.res, s.conf, di), v);
        Ok(())
    }

    /// `parse_bw` + `bw_validate`.
    fn parse_bw(
        &mut self,
        s: &Schema,
        di: usize,
        val: &[u8],
        g: Gid,
        staged: &mut Staged,
    ) -> io::Result<()> {
        let closid = self.grp(g).closid;
        let b = self.hw.bw(s.res).expect("bandwidth schema").clone();
        let dom_id = self.hw.domains(s.res)[di].id;
        if staged.contains_key(&(s.res, s.conf, di)) {
            return self.fail(EINVAL, format!("Duplicate domain {dom_id}\n"));
        }
        let Ok(bw) = kstrtou32(val, 10) else {
            let mut m = b"Invalid MB value ".to_vec();
            m.extend_from_slice(val);
            m.push(b'\n');
            return self.fail(EINVAL, m);
        };
        if self.mba_sc(s.res) {
            // Stored at once, not staged: it sticks even if a later line fails.
            self.mbps_val[di][closid as usize] = bw;
            return Ok(());
        }
        if bw < b.min_bw || bw > b.max_bw {
            return self.fail(
                EINVAL,
                format!("MB value {bw} out of range [{},{}]\n", b.min_bw, b.max_bw),
            );
        }
        let gran = b.bw_gran.max(1);
        staged.insert((s.res, s.conf, di), u64::from(bw.div_ceil(gran) * gran));
        Ok(())
    }

    /// `__rdtgroup_cbm_overlaps` for one CDP type.
    fn cbm_overlaps_type(
        &self,
        r: Res,
        di: usize,
        cbm: u64,
        closid: u32,
        conf: Conf,
        exclusive: bool,
    ) -> bool {
        let c = self.hw.cache(r).expect("cache resource");
        let cbm = cbm & c.default_ctrl();
        if !exclusive && cbm & c.shareable_bits != 0 {
            return true;
        }
        for i in 0..self.closids_supported {
            if !self.closid_used[i as usize] || i == closid {
                continue;
            }
            if cbm & self.get_config(r, di, i, conf) != 0 {
                if exclusive {
                    if self.mode_by_closid(i) == Some(Mode::Exclusive) {
                        return true;
                    }
                    continue;
                }
                return true;
            }
        }
        false
    }

    /// `rdtgroup_cbm_overlaps`: against this CDP type and, with CDP on, its peer.
    fn cbm_overlaps(&self, s: &Schema, di: usize, cbm: u64, closid: u32, exclusive: bool) -> bool {
        self.cbm_overlaps_type(s.res, di, cbm, closid, s.conf, exclusive)
            || (self.cdp_enabled(s.res)
                && self.cbm_overlaps_type(s.res, di, cbm, closid, s.conf.peer(), exclusive))
    }

    /// `resctrl_arch_update_domains`: commits staged values that differ, register by register
    /// on a CPU of the domain.
    pub(super) fn update_domains(
        &mut self,
        p: &mut SimPlatform,
        closid: u32,
        staged: &Staged,
    ) -> io::Result<()> {
        for (&(r, conf, di), &v) in staged {
            let idx = super::cfg_index(closid, conf);
            if self.ctrl(r, di, idx) == v {
                continue;
            }
            self.ctrl_val.get_mut(&r).expect("resource present")[di][idx as usize] = v;
            let (addr, reg) = self.hw.ctrl_msr(r, idx, v);
            let cpu = self.hw.domains(r)[di].cpu;
            wrmsr(p, cpu, addr, reg)?;
        }
        Ok(())
    }

    /// `rdtgroup_mode_write`.
    pub(super) fn write_mode(&mut self, g: Gid, data: &[u8]) -> io::Result<()> {
        let Some(buf) = data.strip_suffix(b"\n") else {
            return einval();
        };
        self.status_clear();
        let cur = self.grp(g).mode;
        if buf == cur.name().as_bytes() {
            return Ok(());
        }
        match buf {
            b"shareable" => self.grp_mut(g).mode = Mode::Shareable,
            b"exclusive" => {
                self.mode_test_exclusive(g)?;
                self.grp_mut(g).mode = Mode::Exclusive;
            }
            b"pseudo-locksetup" => {
                // rdtgroup_locksetup_enter, up to the check the model cannot pass.
                if g == ROOT {
                    return self.fail(EINVAL, "Cannot pseudo-lock default group\n");
                }
                if self.opts.cdp || self.opts.cdpl2 {
                    return self.fail(EINVAL, "CDP enabled\n");
                }
                return self.fail(EINVAL, "Pseudo-locking not supported\n");
            }
            _ => return self.fail(EINVAL, "Unknown or unsupported mode\n"),
        }
        Ok(())
    }

    /// `rdtgroup_mode_test_exclusive`.
    fn mode_test_exclusive(&mut self, g: Gid) -> io::Result<()> {
        let closid = self.grp(g).closid;
        let mut has_cache = false;
        for s in &self.schemas {
            if !s.res.is_cache() {
                continue;
            }
            has_cache = true;
            for di in 0..self.hw.domains(s.res).len() {
                let ctrl = self.get_config(s.res, di, closid, s.conf);
                if self.cbm_overlaps(s, di, ctrl, closid, false) {
                    return self.fail(EINVAL, "Schemata overlaps\n");
                }
            }
        }
        if !has_cache {
            return self.fail(EINVAL, "Cannot be exclusive without CAT/CDP\n");
        }
        Ok(())
    }

    /// `rdt_bit_usage_show`: the CBM of io_alloc's CLOSID (6.19) counts as hardware's, as
    /// `shareable_bits` do, so the bits both I/O and a group use read `X`.
    fn show_bit_usage(&self, s: &Schema) -> String {
        let c = self.hw.cache(s.res).expect("cache schema");
        let io_alloc = self.io_alloc_in_use().filter(|_| s.res == Res::L3);
        let doms: Vec<String> = self
            .hw
            .domains(s.res)
            .iter()
            .enumerate()
            .map(|(di, d)| {
                let mut hw = c.shareable_bits;
                let (mut sw, mut excl) = (0u64, 0u64);
                for i in 0..self.closids_supported {
                    if !self.closid_used[i as usize] {
                        continue;
                    }
                    let v = self.get_config(s.res, di, i, s.conf);
                    if io_alloc == Some(i) {
                        hw |= v;
                        continue;
                    }
                    match self.mode_by_closid(i) {
                        Some(Mode::Shareable) => sw |= v,
                        Some(Mode::Exclusive) => excl |= v,
                        None => {}
                    }
                }
                let bits: String = (0..c.cbm_len)
                    .rev()
                    .map(|i| {
                        let t = |x: u64| (x >> i) & 1 != 0;
                        match (t(hw), t(sw)) {
                            (true, true) => 'X',
                            (true, false) => 'H',
                            (false, true) => 'S',
                            (false, false) if t(excl) => 'E',
                            _ => '0',
                        }
                    })
                    .collect();
                format!("{}={bits}", d.id)
            })
            .collect();
        format!("{}\n", doms.join(";"))
    }

    pub(super) fn show_info(&self, dir: InfoDir, f: InfoFile) -> String {
        use InfoFile as F;
        match dir {
            InfoDir::Schema(i) => {
                let s = &self.schemas[i];
                let cache = self.hw.cache(s.res);
                let bw = self.hw.bw(s.res);
                match f {
                    F::NumClosids => format!("{}\n", s.num_closid),
                    F::BitUsage => self.show_bit_usage(s),
                    F::CbmMask => {
                        format!("{:x}\n", cache.map_or(0, super::hw::CacheRes::default_ctrl))
                    }
                    F::MinCbmBits => format!("{}\n", cache.map_or(0, |c| c.min_cbm_bits)),
                    F::ShareableBits => format!("{:x}\n", cache.map_or(0, |c| c.shareable_bits)),
                    F::SparseMasks => format!("{}\n", u8::from(cache.is_some_and(|c| c.sparse))),
                    F::MinBandwidth => format!("{}\n", bw.map_or(0, |b| b.min_bw)),
                    F::BandwidthGran => format!("{}\n", bw.map_or(0, |b| b.bw_gran)),
                    F::DelayLinear => format!("{}\n", u8::from(bw.is_some_and(|b| b.delay_linear))),
                    F::ThreadThrottleMode => {
                        format!(
                            "{}\n",
                            bw.and_then(|b| b.throttle_mode).unwrap_or("undefined")
                        )
                    }
                    _ => String::new(),
                }
            }
            InfoDir::L3Mon => match f {
                F::NumRmids => format!("{}\n", self.hw.mon.as_ref().map_or(0, |m| m.num_rmids)),
                F::MonFeatures => self.amd_mon_features(),
                F::MaxThresholdOccupancy => format!("{}\n", self.threshold),
                _ => String::new(),
            },
            // Their files are AMD's (abmc.rs).
            InfoDir::EventConfigs | InfoDir::EventConfig(_) => String::new(),
        }
    }

    /// `rdtgroup_init_alloc`: the controls of a new CTRL_MON group with `closid`. Caches get
    /// every bit not owned by an exclusive group (`__init_one_rdt_domain`), MB/SMBA the
    /// default (or the `mba_MBps` default target). ENOSPC "No space on <schema>:<id>" when a
    /// cache domain has too few bits left.
    pub(super) fn init_alloc(&mut self, p: &mut SimPlatform, closid: u32) -> io::Result<()> {
        for s in self.schemas.clone() {
            let mut staged = Staged::new();
            let doms = self.hw.domains(s.res).len();
            if s.res.is_cache() {
                for di in 0..doms {
                    let v = self.init_one_domain(&s, di, closid)?;
                    staged.insert((s.res, s.conf, di), v);
                }
            } else if self.mba_sc(s.res) {
                for row in &mut self.mbps_val {
                    row[closid as usize] = MBA_MAX_MBPS;
                }
                continue;
            } else {
                let def = self.hw.default_ctrl(s.res);
                for di in 0..doms {
                    staged.insert((s.res, s.conf, di), def);
                }
            }
            if self.update_domains(p, closid, &staged).is_err() {
                return self.fail(super::errno::EIO, "Failed to initialize allocations\n");
            }
        }
        Ok(())
    }

    /// `__init_one_rdt_domain`.
    pub(super) fn init_one_domain(
        &mut self,
        s: &Schema,
        di: usize,
        closid: u32,
    ) -> io::Result<u64> {
        let c = self.hw.cache(s.res).expect("cache schema").clone();
        let full = c.default_ctrl();
        let mut new = c.shareable_bits;
        let mut used = c.shareable_bits;
        for i in 0..self.closids_supported {
            if !self.closid_used[i as usize] || i == closid {
                continue;
            }
            let peer = if self.cdp_enabled(s.res) {
                self.get_config(s.res, di, i, s.conf.peer())
            } else {
                0
            };
            let v = self.get_config(s.res, di, i, s.conf);
            used |= v | peer;
            if self.mode_by_closid(i) == Some(Mode::Shareable) {
                new |= v | peer;
            }
        }
        new |= (used ^ full) & full;
        let new = cbm_ensure_valid(new & full, c.cbm_len);
        if new.count_ones() < c.min_cbm_bits {
            let id = self.hw.domains(s.res)[di].id;
            self.status(format!("No space on {}:{id}\n", s.name));
            return Err(err(ENOSPC));
        }
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_valid_keeps_the_lowest_run() {
        assert_eq!(cbm_ensure_valid(0b1110_0110, 8), 0b0000_0110);
        assert_eq!(cbm_ensure_valid(0xff0f, 16), 0xf);
        assert_eq!(cbm_ensure_valid(0, 8), 0);
        assert_eq!(cbm_ensure_valid(0xff, 8), 0xff);
    }

    #[test]
    fn bit_search_stops_at_the_length() {
        assert_eq!(next_bit(0b1100, 4, 0, true), 2);
        assert_eq!(next_bit(0b1100, 4, 2, false), 4);
        assert_eq!(next_bit(0, 4, 0, true), 4);
    }
}
