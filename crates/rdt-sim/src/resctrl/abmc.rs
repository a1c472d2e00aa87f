//! AMD's monitoring and allocation extensions of resctrl, as the files of the kernel release
//! the platform runs ([`KernelVersion`]) show them:
//!
//! - **BMEC** (CPUID.(8000_0020H,0):EBX\[3\]): `info/L3_MON/mbm_total_bytes_config` and
//!   `mbm_local_bytes_config` (`mon_config_show`/`mon_config_write`), one configuration per
//!   L3 domain and event, the supported bits from CPUID.(8000_0020H,3):ECX\[6:0\]
//!   (`mbm_cfg_mask`). Defaults: total = the mask, local = the mask ∩ 0x15 (local reads,
//!   local non-temporal writes, local slow-memory reads). A change clears every MBM counter
//!   of the domain: the next read of each group's `mbm_*` there is `Unavailable`, later reads
//!   count from 0. `mon_features` lists `<event>_config` after each event.
//! - **ABMC** (EBX\[5\], 6.18+): `mbm_assign_mode` (on every monitoring system),
//!   `num_mbm_cntrs` (CPUID.(8000_0020H,5):EBX\[15:0\] + 1 per domain), `available_mbm_cntrs`,
//!   `mbm_assign_on_mkdir`, `event_configs/{mbm_total_bytes,mbm_local_bytes}/event_filter`
//!   and every group's `mbm_L3_assignments` (fs/resctrl/monitor.c). `mbm_event` mode is on
//!   at mount: the root gets a counter per MBM event and domain, each new group too while
//!   `mbm_assign_on_mkdir` is 1 and counters last ("Failed to allocate counter for EVENT in
//!   domain ID" in `last_cmd_status` otherwise, the mkdir still succeeds); removing a group
//!   frees its counters. An MBM read of a group without a counter in that domain is
//!   `Unassigned` (a CTRL_MON group sums the members that have one). While the mode is on the
//!   BMEC files are hidden and `mon_features` has no `_config` lines.
//! - **io_alloc** (SDCIAE, EBX\[6\], 6.19+): `io_alloc` and `io_alloc_cbm` in every cache
//!   `info/` directory (`not supported` outside L3). Enabling reserves the highest CLOSID of
//!   L3 (`num_closid - 1`, halved first under CDP), initialised like a new group's CBMs; its
//!   CBM counts as hardware bits (`H`/`X`) in no `bit_usage` column of its own but blocks
//!   exclusive groups, since the CLOSID is allocated.
//!
//! The hardware side is [`crate::amdqos`]'s registers, programmed as the kernel programs
//! them: `mbm_event` mode sets L3_QOS_EXT_CFG bit 0 in every domain (at mount too) and clears
//! it in `default` mode; an assignment writes L3_QOS_ABMC_CFG (`resctrl_arch_config_cntr`:
//! the group's RMID, the event's `event_filter`, counting enabled; a removal the same with
//! counting disabled) and the group's reads go through that counter (`__cntr_id_read`); a
//! BMEC write writes QOS_EVT_CFG_n (`mbm_config_write_domain`). So what the configurations
//! select is what `mbm_*_bytes` count (the model's traffic is local and remote reads), and a
//! counter resctrl assigned is busy for an MSR tool. The configurations shown are the ones
//! written through resctrl (the kernel reads the register back; a tool that writes
//! QOS_EVT_CFG_n directly is not seen here). Enabling io_alloc writes no register.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io;

use rdt_core::CpuidSource as _;

use super::errno::{EINVAL, ENODEV, ENOENT, ENOSPC};
use super::hw::{Event, Res};
use super::kstr::{kstrtoul, strim, strsep};
use super::mon::ReadError;
use super::{Conf, Gid, GroupKind, InfoDir, KernelVersion, Mode, ROOT, Resctrl, einval};
use super::{rdmsr, wrmsr};
use crate::SimPlatform;
use crate::vfs::err;
use rdt_msr::MsrAddr;
use rdt_msr::regs::{
    AMD_L3_QOS_ABMC_CFG, AMD_L3_QOS_EXT_CFG, AMD_QOS_EVT_CFG_0, AbmcCfg, EXT_CFG_ABMC,
};

// The kernel's BMEC facts (`MAX_EVT_CONFIG_BITS`, the default local configuration, the
// `mbm_transactions[]` names by bit) are rdt-core's, in one place.
use rdt_core::mbm::{
    MBM_CONFIG_ALL as MAX_EVT_CONFIG_BITS, MBM_CONFIG_LOCAL_DEFAULT as LOCAL_BITS,
    MBM_TRANSACTIONS as TRANSACTIONS,
};
const NOT_ENABLED: &str = "mbm_event counter assignment mode is not enabled\n";

/// What CPUID 8000_0020H enumerates beyond MBA/SMBA (x86 `rdt_get_mon_l3_config`,
/// `rdt_init_res_defs_amd`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct AmdHw {
    /// BMEC (EBX\[3\]) or ABMC: the supported transaction bits (subleaf 3 ECX\[6:0\]).
    pub bmec_mask: Option<u32>,
    /// Whether the `*_bytes_config` files exist (BMEC itself, EBX\[3\]).
    pub bmec: bool,
    /// ABMC (EBX\[5\]): assignable counters per L3 domain (subleaf 5 EBX\[15:0\] + 1).
    pub cntrs: Option<u32>,
    /// SDCIAE (EBX\[6\]): L3 io_alloc.
    pub io_alloc: bool,
}

impl AmdHw {
    /// Reads CPUID 8000_0020H of `p` (nothing on Intel).
    pub(super) fn probe(p: &SimPlatform) -> Self {
        if !p.capabilities().vendor.is_amd_like() {
            return Self::default();
        }
        let c = p.cpuid();
        let ebx = c.cpuid(0x8000_0020, 0).map_or(0, |r| r.ebx);
        let bit = |b: u32| ebx & (1 << b) != 0;
        let (bmec, abmc) = (bit(3), bit(5));
        let mask = c
            .cpuid(0x8000_0020, 3)
            .map_or(MAX_EVT_CONFIG_BITS, |r| r.ecx & MAX_EVT_CONFIG_BITS);
        Self {
            bmec_mask: (bmec || abmc).then_some(mask),
            bmec,
            cntrs: abmc.then(|| c.cpuid(0x8000_0020, 5).map_or(32, |r| (r.ebx & 0xffff) + 1)),
            io_alloc: bit(6),
        }
    }
}

/// The AMD extensions' state of one mount.
#[derive(Clone, Debug)]
pub(super) struct AmdState {
    pub kernel: KernelVersion,
    pub hw: AmdHw,
    /// BMEC configuration per L3 domain: `[total, local]`.
    evt_cfg: Vec<[u32; 2]>,
    /// `mbm_event` mode on.
    assign: bool,
    on_mkdir: bool,
    /// `event_filter` of `[total, local]`.
    filter: [u32; 2],
    /// Per L3 domain, the holder of each counter.
    cntr: Vec<Vec<Option<(Gid, Event)>>>,
    /// Counters cleared by a BMEC change: the next read is Unavailable.
    cleared: BTreeSet<(usize, u32, Event)>,
    /// io_alloc enabled.
    io_alloc: bool,
}

const fn ev_idx(e: Event) -> usize {
    match e {
        Event::MbmLocal => 1,
        _ => 0,
    }
}

impl AmdState {
    /// Nothing: before the mount probes the platform ([`AmdState::new`]).
    pub(super) fn empty() -> Self {
        Self {
            kernel: KernelVersion::V6_17,
            hw: AmdHw::default(),
            evt_cfg: Vec::new(),
            assign: false,
            on_mkdir: true,
            filter: [0; 2],
            cntr: Vec::new(),
            cleared: BTreeSet::new(),
            io_alloc: false,
        }
    }

    pub(super) fn new(p: &SimPlatform, domains: usize) -> Self {
        let hw = AmdHw::probe(p);
        let kernel = p.kernel();
        let mask = hw.bmec_mask.unwrap_or(MAX_EVT_CONFIG_BITS);
        let defaults = [mask, mask & LOCAL_BITS];
        let assign = kernel.has_abmc_files() && hw.cntrs.is_some();
        Self {
            kernel,
            hw,
            evt_cfg: vec![defaults; domains],
            assign,
            on_mkdir: true,
            filter: defaults,
            cntr: vec![vec![None; hw.cntrs.unwrap_or(0) as usize]; domains],
            cleared: BTreeSet::new(),
            io_alloc: false,
        }
    }

    /// Counter assignment (ABMC files) in this release and on this hardware.
    pub(super) fn abmc(&self) -> bool {
        self.kernel.has_abmc_files() && self.hw.cntrs.is_some()
    }

    /// The BMEC `*_bytes_config` files are shown (BMEC, not hidden by `mbm_event` mode).
    pub(super) const fn bmec_files(&self) -> bool {
        self.hw.bmec && !self.assign
    }

    /// io_alloc files exist.
    pub(super) fn io_alloc_files(&self) -> bool {
        self.kernel.has_io_alloc() && self.hw.io_alloc
    }

    fn assigned(&self, di: usize, g: Gid, e: Event) -> bool {
        self.cntr[di].contains(&Some((g, e)))
    }

    /// The configuration of counter `slot` of domain `di` as the holder table says
    /// (`resctrl_arch_config_cntr`): counting `rmid`'s `e` with its `event_filter`, or
    /// configured and not counting (`rmid` 0) when free.
    fn cntr_cfg(&self, slot: usize, hold: Option<(u32, Event)>) -> AbmcCfg {
        AbmcCfg {
            bw_type: hold.map_or(0, |(_, e)| self.filter[ev_idx(e)]),
            bw_src: hold.map_or(0, |(rmid, _)| rmid),
            is_clos: false,
            cntr_id: u32::try_from(slot).unwrap_or(u32::MAX),
            cntr_en: hold.is_some(),
            cfg_en: true,
        }
    }
}

/// The AMD state a parked mount keeps ([`super::ResctrlState`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AmdSaved {
    /// BMEC `[total, local]` per L3 domain.
    evt_cfg: Vec<[u32; 2]>,
    assign: bool,
    on_mkdir: bool,
    filter: [u32; 2],
    /// Per L3 domain, each counter's holder: (group id, event name).
    cntr: Vec<Vec<Option<(usize, String)>>>,
    io_alloc: bool,
}

/// `kstrtobool`: `y/Y/t/T/1`, `n/N/f/F/0`, `on`, `off` (first characters only).
fn kstrtobool(s: &[u8]) -> Result<bool, i32> {
    match s {
        [b'y' | b'Y' | b't' | b'T' | b'1', ..] | [b'o' | b'O', b'n' | b'N', ..] => Ok(true),
        [b'n' | b'N' | b'f' | b'F' | b'0', ..] | [b'o' | b'O', b'f' | b'F', ..] => Ok(false),
        _ => Err(EINVAL),
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Resctrl {
    /// The state to save; `None` when the platform has none of the extensions.
    pub(super) fn amd_saved(&self) -> Option<AmdSaved> {
        let a = &self.amd;
        (a.hw.bmec || a.hw.cntrs.is_some() || a.hw.io_alloc).then(|| AmdSaved {
            evt_cfg: a.evt_cfg.clone(),
            assign: a.assign,
            on_mkdir: a.on_mkdir,
            filter: a.filter,
            cntr: a
                .cntr
                .iter()
                .map(|d| {
                    d.iter()
                        .map(|c| c.map(|(g, e)| (g, e.name().to_owned())))
                        .collect()
                })
                .collect(),
            io_alloc: a.io_alloc,
        })
    }

    /// Takes over a saved state after checking it fits this mount (groups already loaded).
    pub(super) fn amd_load(&mut self, s: &AmdSaved) -> Result<(), String> {
        let n = self.hw.l3_domains.len();
        let slots = self.amd.hw.cntrs.unwrap_or(0) as usize;
        if s.evt_cfg.len() != n || s.cntr.len() != n || s.cntr.iter().any(|d| d.len() != slots) {
            return Err("AMD state: domain or counter count differs".into());
        }
        let mut cntr = vec![vec![None; slots]; n];
        for (di, d) in s.cntr.iter().enumerate() {
            for (i, c) in d.iter().enumerate() {
                if let Some((g, name)) = c {
                    let e = Event::ALL
                        .into_iter()
                        .find(|e| e.name() == name && *e != Event::LlcOccupancy)
                        .ok_or_else(|| format!("AMD state: unknown event `{name}`"))?;
                    if self.groups.get(*g).is_none_or(Option::is_none) {
                        return Err(format!("AMD state: counter of a missing group {g}"));
                    }
                    cntr[di][i] = Some((*g, e));
                }
            }
        }
        if s.io_alloc && !self.amd.io_alloc_files() {
            return Err("AMD state: io_alloc on a platform without it".into());
        }
        let a = &mut self.amd;
        a.evt_cfg.clone_from(&s.evt_cfg);
        a.assign = s.assign && a.abmc();
        a.on_mkdir = s.on_mkdir;
        a.filter = s.filter;
        a.cntr = cntr;
        a.io_alloc = s.io_alloc;
        // the registers were saved with the platform ([`crate::amdqos`]): nothing to write
        Ok(())
    }

    /// Programs every register of [`crate::amdqos`] from this mount's state: the BMEC
    /// configurations, ABMC's enable bit, every counter (held ones counting).
    fn amd_program_all(&self, p: &mut SimPlatform) -> io::Result<()> {
        for di in 0..self.hw.l3_domains.len() {
            if self.amd.hw.bmec {
                for (n, v) in self.amd.evt_cfg[di].iter().enumerate() {
                    self.write_evt_cfg(p, di, n, *v)?;
                }
            }
            if self.amd.hw.cntrs.is_some() {
                self.set_abmc_enable(p, di, self.amd.assign)?;
                for slot in 0..self.amd.cntr[di].len() {
                    self.program_cntr(p, di, slot)?;
                }
            }
        }
        Ok(())
    }

    /// WRMSR QOS_EVT_CFG_`n` of domain `di` (`mbm_config_write_domain`).
    fn write_evt_cfg(&self, p: &mut SimPlatform, di: usize, n: usize, v: u32) -> io::Result<()> {
        let cpu = self.hw.l3_domains[di].cpu;
        let addr = MsrAddr::new(AMD_QOS_EVT_CFG_0.get() + u32::try_from(n).unwrap_or(0));
        wrmsr(p, cpu, addr, u64::from(v))
    }

    /// L3_QOS_EXT_CFG bit 0 of domain `di` set or cleared, other bits kept
    /// (`resctrl_abmc_set_one_amd`).
    fn set_abmc_enable(&self, p: &mut SimPlatform, di: usize, on: bool) -> io::Result<()> {
        let cpu = self.hw.l3_domains[di].cpu;
        let v = rdmsr(p, cpu, AMD_L3_QOS_EXT_CFG)?;
        let new = if on {
            v | EXT_CFG_ABMC
        } else {
            v & !EXT_CFG_ABMC
        };
        if new == v {
            return Ok(());
        }
        wrmsr(p, cpu, AMD_L3_QOS_EXT_CFG, new)
    }

    /// WRMSR L3_QOS_ABMC_CFG for counter `slot` of domain `di` as the holder table says
    /// (`resctrl_arch_config_cntr`), which resets it.
    fn program_cntr(&self, p: &mut SimPlatform, di: usize, slot: usize) -> io::Result<()> {
        let hold = self.amd.cntr[di][slot].map(|(g, e)| (self.grp(g).rmid, e));
        let cpu = self.hw.l3_domains[di].cpu;
        wrmsr(
            p,
            cpu,
            AMD_L3_QOS_ABMC_CFG,
            self.amd.cntr_cfg(slot, hold).encode(),
        )
    }

    /// The ABMC counter that counts `e` of `rmid` in domain `di` in `mbm_event` mode.
    pub(super) fn amd_cntr_of(&self, di: usize, rmid: u32, e: Event) -> Option<u32> {
        if !self.amd.assign || e == Event::LlcOccupancy {
            return None;
        }
        let slot = self.amd.cntr.get(di)?.iter().position(|c| {
            c.is_some_and(|(g, ce)| {
                ce == e
                    && self
                        .groups
                        .get(g)
                        .is_some_and(|x| x.as_ref().is_some_and(|x| x.rmid == rmid))
            })
        })?;
        u32::try_from(slot).ok()
    }

    fn mbm_events(&self) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| *e != Event::LlcOccupancy)
            .collect()
    }

    /// `ID=...;ID=...\n` over the L3 monitor domains.
    fn per_domain(&self, f: impl Fn(usize) -> String) -> String {
        let doms: Vec<String> = self
            .hw
            .l3_domains
            .iter()
            .enumerate()
            .map(|(di, d)| format!("{}={}", d.id, f(di)))
            .collect();
        format!("{}\n", doms.join(";"))
    }

    // ----- mount, mkdir, rmdir -----

    /// At mount: the registers as this mount's state says (in `mbm_event` mode ABMC
    /// enabled, every counter free), then the root's counters (`rdtgroup_assign_cntrs`).
    pub(super) fn amd_mount(&mut self, p: &mut SimPlatform) -> io::Result<()> {
        self.amd_program_all(p)?;
        self.amd_assign_on_mkdir(p, ROOT)
    }

    /// `rdtgroup_assign_cntrs`: a counter per MBM event and domain for a new group, while
    /// `mbm_assign_on_mkdir` is set; failures leave a message, not an error.
    pub(super) fn amd_assign_on_mkdir(&mut self, p: &mut SimPlatform, g: Gid) -> io::Result<()> {
        if !self.amd.assign || !self.amd.on_mkdir || !self.mon_capable() {
            return Ok(());
        }
        for e in self.mbm_events() {
            for di in 0..self.hw.l3_domains.len() {
                // rdtgroup_assign_cntr_event(NULL, ...): every domain, errors ignored.
                let _ = self.assign_cntr(p, di, g, e)?;
            }
        }
        Ok(())
    }

    /// At unmount (`rmdir_all_sub`, `rdtgroup_unassign_cntrs`): every counter freed, so the
    /// hardware holds none of this mount's; ABMC's enable bit stays as the mode left it.
    pub(super) fn amd_unmount(&mut self, p: &mut SimPlatform) -> io::Result<()> {
        let mut first = Ok(());
        for di in 0..self.amd.cntr.len() {
            for slot in 0..self.amd.cntr[di].len() {
                if self.amd.cntr[di][slot].take().is_some() {
                    let r = self.program_cntr(p, di, slot);
                    if first.is_ok() {
                        first = r;
                    }
                }
            }
        }
        first
    }

    /// `rdtgroup_unassign_cntrs`: frees a removed group's counters (and its MON children's),
    /// each configured not counting. Best effort (an rmdir does not fail on it).
    pub(super) fn amd_group_removed(&mut self, p: &mut SimPlatform, g: Gid) {
        for di in 0..self.amd.cntr.len() {
            for slot in 0..self.amd.cntr[di].len() {
                if self.amd.cntr[di][slot].is_some_and(|(h, _)| h == g) {
                    self.amd.cntr[di][slot] = None;
                    let _ = self.program_cntr(p, di, slot);
                }
            }
        }
    }

    /// `rdtgroup_alloc_assign_cntr`: `Ok(false)` (message set) when the domain has no free
    /// counter. The counter starts from 0.
    fn assign_cntr(
        &mut self,
        p: &mut SimPlatform,
        di: usize,
        g: Gid,
        e: Event,
    ) -> io::Result<bool> {
        if self.amd.assigned(di, g, e) {
            return Ok(true);
        }
        let Some(slot) = self.amd.cntr[di].iter().position(Option::is_none) else {
            let id = self.hw.l3_domains[di].id;
            self.status(format!(
                "Failed to allocate counter for {} in domain {id}\n",
                e.name()
            ));
            return Ok(false);
        };
        self.amd.cntr[di][slot] = Some((g, e));
        self.program_cntr(p, di, slot)?;
        let rmid = self.grp(g).rmid;
        self.reset_counter(p, di, rmid, e)?;
        Ok(true)
    }

    fn unassign_cntr(
        &mut self,
        p: &mut SimPlatform,
        di: usize,
        g: Gid,
        e: Event,
    ) -> io::Result<()> {
        if let Some(slot) = self.amd.cntr[di].iter().position(|c| *c == Some((g, e))) {
            self.amd.cntr[di][slot] = None;
            self.program_cntr(p, di, slot)?;
            let rmid = self.grp(g).rmid;
            self.reset_counter(p, di, rmid, e)?;
        }
        Ok(())
    }

    /// Why an MBM read of group `g`'s RMID in domain `di` gives no number now: no counter
    /// assigned in `mbm_event` mode, or the first read after a BMEC change (consumed).
    pub(super) fn amd_read_gate(&mut self, di: usize, g: Gid, e: Event) -> Option<ReadError> {
        if e == Event::LlcOccupancy {
            return None;
        }
        if self.amd.assign && !self.amd.assigned(di, g, e) {
            return Some(ReadError::Unassigned);
        }
        let rmid = self.grp(g).rmid;
        self.amd
            .cleared
            .remove(&(di, rmid, e))
            .then_some(ReadError::Unavailable)
    }

    // ----- files -----

    /// The `info/L3_MON` files this release and hardware add, in name order.
    pub(super) fn amd_l3_mon_files(&self) -> Vec<super::InfoFile> {
        use super::InfoFile as F;
        let mut v = Vec::new();
        if self.amd.abmc() {
            v.push(F::AvailableMbmCntrs);
        }
        if self.amd.kernel.has_abmc_files() {
            v.push(F::MbmAssignMode);
        }
        if self.amd.abmc() {
            v.push(F::MbmAssignOnMkdir);
        }
        if self.amd.bmec_files() {
            let ev = self.events();
            if ev.contains(&Event::MbmLocal) {
                v.push(F::MbmLocalConfig);
            }
            if ev.contains(&Event::MbmTotal) {
                v.push(F::MbmTotalConfig);
            }
        }
        if self.amd.abmc() {
            v.push(F::NumMbmCntrs);
        }
        v
    }

    /// `mon_features`: each event, and `<event>_config` after a BMEC-configurable one unless
    /// `mbm_event` mode is on.
    pub(super) fn amd_mon_features(&self) -> String {
        self.events().into_iter().fold(String::new(), |mut o, e| {
            let _ = writeln!(o, "{}", e.name());
            if e != Event::LlcOccupancy && self.amd.bmec_files() {
                let _ = writeln!(o, "{}_config", e.name());
            }
            o
        })
    }

    /// Reads an AMD `info/` file; `None` when `f` is not one.
    pub(super) fn amd_show_info(
        &mut self,
        dir: InfoDir,
        f: super::InfoFile,
    ) -> Option<io::Result<String>> {
        use super::InfoFile as F;
        Some(match f {
            F::MbmTotalConfig | F::MbmLocalConfig => {
                let i = usize::from(f == F::MbmLocalConfig);
                Ok(self.per_domain(|di| format!("0x{:02x}", self.amd.evt_cfg[di][i])))
            }
            F::MbmAssignMode => Ok(match (self.amd.hw.cntrs.is_some(), self.amd.assign) {
                (true, true) => "[mbm_event]\ndefault\n".into(),
                (true, false) => "[default]\nmbm_event\n".into(),
                _ => "[default]\n".into(),
            }),
            F::NumMbmCntrs => {
                let n = self.amd.hw.cntrs.unwrap_or(0);
                Ok(self.per_domain(|_| n.to_string()))
            }
            F::AvailableMbmCntrs => {
                self.status_clear();
                if self.amd.assign {
                    Ok(self.per_domain(|di| {
                        self.amd.cntr[di]
                            .iter()
                            .filter(|c| c.is_none())
                            .count()
                            .to_string()
                    }))
                } else {
                    self.fail(EINVAL, NOT_ENABLED)
                }
            }
            F::MbmAssignOnMkdir => {
                self.status_clear();
                if self.amd.assign {
                    Ok(format!("{}\n", u8::from(self.amd.on_mkdir)))
                } else {
                    self.fail(EINVAL, NOT_ENABLED)
                }
            }
            F::EventFilter => {
                let InfoDir::EventConfig(e) = dir else {
                    return Some(einval());
                };
                self.status_clear();
                if !self.amd.assign {
                    return Some(self.fail(EINVAL, NOT_ENABLED));
                }
                let cfg = self.amd.filter[ev_idx(e)];
                let names: Vec<&str> = TRANSACTIONS
                    .iter()
                    .enumerate()
                    .filter(|(b, _)| cfg & (1 << b) != 0)
                    .map(|(_, n)| *n)
                    .collect();
                Ok(format!("{}\n", names.join(",")))
            }
            F::IoAlloc => {
                let InfoDir::Schema(si) = dir else {
                    return Some(einval());
                };
                Ok(if self.schemas[si].res != Res::L3 {
                    "not supported\n".into()
                } else if self.amd.io_alloc {
                    "enabled\n".into()
                } else {
                    "disabled\n".into()
                })
            }
            F::IoAllocCbm => {
                let InfoDir::Schema(si) = dir else {
                    return Some(einval());
                };
                self.show_io_alloc_cbm(si)
            }
            _ => return None,
        })
    }

    /// Writes an AMD `info/` file; `None` when `f` is not one.
    pub(super) fn amd_write_info(
        &mut self,
        p: &mut SimPlatform,
        dir: InfoDir,
        f: super::InfoFile,
        data: &[u8],
    ) -> Option<io::Result<()>> {
        use super::InfoFile as F;
        Some(match (f, dir) {
            (F::MbmTotalConfig | F::MbmLocalConfig, _) => {
                self.write_bmec(p, usize::from(f == F::MbmLocalConfig), data)
            }
            (F::MbmAssignMode, _) => self.write_assign_mode(p, data),
            // `resctrl_mbm_assign_on_mkdir_write`: the value is parsed before the lock is
            // taken and `last_cmd_status` cleared, so a bad one is a bare EINVAL that leaves
            // the previous status as it was (6.18, 6.19; 7.1 words it).
            (F::MbmAssignOnMkdir, _) => {
                let Ok(v) = kstrtobool(data) else {
                    return Some(einval());
                };
                self.status_clear();
                if !self.amd.assign {
                    return Some(self.fail(EINVAL, NOT_ENABLED));
                }
                self.amd.on_mkdir = v;
                Ok(())
            }
            (F::EventFilter, InfoDir::EventConfig(e)) => self.write_event_filter(p, e, data),
            (F::IoAlloc, InfoDir::Schema(si)) => self.write_io_alloc(p, si, data),
            (F::IoAllocCbm, InfoDir::Schema(si)) => self.write_io_alloc_cbm(p, si, data),
            _ => return None,
        })
    }

    /// `mbm_L3_assignments` of group `g`.
    pub(super) fn show_assignments(&mut self, g: Gid) -> io::Result<String> {
        self.status_clear();
        if !self.amd.assign {
            return self.fail(EINVAL, NOT_ENABLED);
        }
        let mut out = String::new();
        for e in self.mbm_events() {
            let line = self.per_domain(|di| {
                if self.amd.assigned(di, g, e) {
                    "e"
                } else {
                    "_"
                }
                .to_string()
            });
            let _ = write!(out, "{}:{line}", e.name());
        }
        Ok(out)
    }

    /// `mbm_L3_assignments_write`.
    pub(super) fn write_assignments(
        &mut self,
        p: &mut SimPlatform,
        g: Gid,
        data: &[u8],
    ) -> io::Result<()> {
        let Some(buf) = data.strip_suffix(b"\n") else {
            return einval();
        };
        self.status_clear();
        if !self.amd.assign {
            return self.fail(EINVAL, "mbm_event mode is not enabled\n");
        }
        let events = self.mbm_events();
        for line in buf.split(|&c| c == b'\n') {
            let (ev, doms) = strsep(line, b':');
            let Some(e) = events.iter().copied().find(|e| e.name().as_bytes() == ev) else {
                return self.fail(ENOENT, format!("Invalid event {}\n", lossy(ev)));
            };
            let mut rest = doms;
            while let Some(r) = rest.filter(|r| !r.is_empty()) {
                let (tok, next) = strsep(r, b';');
                rest = next;
                // The token is trimmed, its id is not: `strsep` leaves `0 ` of `0 = e`,
                // which `kstrtoul` refuses ("Missing domain id"). Without `=` the id is
                // the whole token and the state NULL, which the failed assignment prints
                // as `(null)` (`resctrl_parse_mbm_assignment`, `resctrl_process_assign`).
                let tok = strim(tok);
                let (id, state) = strsep(tok, b'=');
                let targets: Vec<usize> = if id == b"*" {
                    (0..self.hw.l3_domains.len()).collect()
                } else {
                    let Ok(n) = kstrtoul(id, 10) else {
                        return self.fail(EINVAL, "Missing domain id\n");
                    };
                    match self.hw.l3_domains.iter().position(|d| u64::from(d.id) == n) {
                        Some(di) => vec![di],
                        None => return self.fail(EINVAL, format!("Invalid domain id {n}\n")),
                    }
                };
                let failed = |fs: &mut Self, code| {
                    fs.fail::<()>(
                        code,
                        format!(
                            "Assign operation '{}:{}={}' failed\n",
                            e.name(),
                            lossy(id),
                            state.map_or_else(|| "(null)".into(), lossy)
                        ),
                    )
                };
                let mut code = None;
                match state.unwrap_or_default() {
                    b"e" => {
                        for di in targets {
                            if !self.assign_cntr(p, di, g, e)? {
                                code = Some(ENOSPC);
                            }
                        }
                    }
                    b"_" => {
                        for di in targets {
                            self.unassign_cntr(p, di, g, e)?;
                        }
                    }
                    _ => code = Some(EINVAL),
                }
                if let Some(c) = code {
                    return failed(self, c);
                }
            }
        }
        Ok(())
    }

    // ----- BMEC -----

    /// `mon_config_write`: `ID=VAL[;ID=VAL]...\n`, applied token by token.
    fn write_bmec(&mut self, p: &mut SimPlatform, i: usize, data: &[u8]) -> io::Result<()> {
        let Some(buf) = data.strip_suffix(b"\n") else {
            return einval();
        };
        self.status_clear();
        let mask = self.amd.hw.bmec_mask.unwrap_or(MAX_EVT_CONFIG_BITS);
        let mut rest = Some(buf);
        while let Some(r) = rest.filter(|r| !r.is_empty()) {
            let (tok, next) = strsep(r, b';');
            rest = next;
            let tok = strim(tok);
            // `mon_config_write`: without `=` the id is the whole token and parses; the
            // missing value is then "Non-numeric".
            let (id, val) = strsep(tok, b'=');
            let Ok(id) = kstrtoul(id, 10) else {
                return self.fail(EINVAL, "Missing '=' or non-numeric domain id\n");
            };
            let Some(Ok(v)) = val.map(|val| kstrtoul(val, 16)) else {
                return self.fail(EINVAL, "Non-numeric event configuration value\n");
            };
            if v & !u64::from(mask) != 0 {
                return self.fail(
                    EINVAL,
                    format!("Invalid event configuration: max valid mask is 0x{mask:02x}\n"),
                );
            }
            let Some(di) = self
                .hw
                .l3_domains
                .iter()
                .position(|d| u64::from(d.id) == id)
            else {
                return einval(); // unknown domain: no message
            };
            let v = u32::try_from(v).unwrap_or(mask);
            if self.amd.evt_cfg[di][i] != v {
                self.amd.evt_cfg[di][i] = v;
                self.write_evt_cfg(p, di, i, v)?;
                self.clear_domain_counters(p, di)?;
            }
        }
        Ok(())
    }

    /// The hardware clears every MBM counter of a domain when a BMEC configuration changes:
    /// each group's next read there is Unavailable, then counts from 0.
    fn clear_domain_counters(&mut self, p: &mut SimPlatform, di: usize) -> io::Result<()> {
        let rmids: Vec<u32> = self.groups.iter().flatten().map(|g| g.rmid).collect();
        for rmid in rmids {
            for e in self.mbm_events() {
                self.reset_counter(p, di, rmid, e)?;
                self.amd.cleared.insert((di, rmid, e));
            }
        }
        Ok(())
    }

    // ----- ABMC mode and filters -----

    /// `resctrl_mbm_assign_mode_write`.
    fn write_assign_mode(&mut self, p: &mut SimPlatform, data: &[u8]) -> io::Result<()> {
        let Some(buf) = data.strip_suffix(b"\n") else {
            return einval();
        };
        self.status_clear();
        let enable = match buf {
            b"default" => false,
            b"mbm_event" if self.amd.hw.cntrs.is_some() => true,
            b"mbm_event" => return self.fail(EINVAL, "mbm_event mode is not supported\n"),
            _ => return self.fail(EINVAL, "Unsupported assign mode\n"),
        };
        if enable == self.amd.assign {
            return Ok(());
        }
        // A switch frees every assignment, resets every MBM count and the event filters.
        self.amd.assign = enable;
        if enable {
            self.amd.on_mkdir = true;
        }
        for doms in &mut self.amd.cntr {
            doms.fill(None);
        }
        let mask = self.amd.hw.bmec_mask.unwrap_or(MAX_EVT_CONFIG_BITS);
        self.amd.filter = [mask, mask & LOCAL_BITS];
        self.amd_program_all(p)?;
        let rmids: Vec<u32> = self.groups.iter().flatten().map(|g| g.rmid).collect();
        for di in 0..self.hw.l3_domains.len() {
            for &rmid in &rmids {
                for e in self.mbm_events() {
                    self.reset_counter(p, di, rmid, e)?;
                }
            }
        }
        Ok(())
    }

    /// `event_filter_write`: comma-separated transaction names (may be empty).
    fn write_event_filter(&mut self, p: &mut SimPlatform, e: Event, data: &[u8]) -> io::Result<()> {
        let Some(buf) = data.strip_suffix(b"\n") else {
            return einval();
        };
        self.status_clear();
        if !self.amd.assign {
            return self.fail(EINVAL, NOT_ENABLED);
        }
        let mut cfg = 0u32;
        if !buf.is_empty() {
            for tok in buf.split(|&c| c == b',') {
                let tok = strim(tok);
                let Some(b) = TRANSACTIONS.iter().position(|n| n.as_bytes() == tok) else {
                    return self.fail(
                        EINVAL,
                        format!("Invalid memory transaction type {}\n", lossy(tok)),
                    );
                };
                cfg |= 1 << b;
            }
        }
        if self.amd.filter[ev_idx(e)] != cfg {
            self.amd.filter[ev_idx(e)] = cfg;
            // Every assigned counter of the event is reprogrammed, which resets it.
            for di in 0..self.hw.l3_domains.len() {
                let holders: Vec<Gid> = self.amd.cntr[di]
                    .iter()
                    .flatten()
                    .filter(|(_, ce)| *ce == e)
                    .map(|(g, _)| *g)
                    .collect();
                for g in holders {
                    if let Some(slot) = self.amd.cntr[di].iter().position(|c| *c == Some((g, e))) {
                        self.program_cntr(p, di, slot)?;
                    }
                    let rmid = self.grp(g).rmid;
                    self.reset_counter(p, di, rmid, e)?;
                }
            }
        }
        Ok(())
    }

    // ----- io_alloc -----

    /// The CLOSID io_alloc holds while it is enabled (`resctrl_arch_get_io_alloc_enabled`).
    pub(super) fn io_alloc_in_use(&self) -> Option<u32> {
        self.amd.io_alloc.then(|| self.io_alloc_closid())
    }

    /// `resctrl_io_alloc_closid`: the highest CLOSID of L3 (of its CDP half).
    fn io_alloc_closid(&self) -> u32 {
        let n = self.hw.num_closid(Res::L3);
        if self.cdp_enabled(Res::L3) {
            (n / 2).saturating_sub(1)
        } else {
            n.saturating_sub(1)
        }
    }

    /// `resctrl_io_alloc_write`.
    fn write_io_alloc(&mut self, p: &mut SimPlatform, si: usize, data: &[u8]) -> io::Result<()> {
        let enable = kstrtobool(data).map_err(err)?;
        self.status_clear();
        let name = self.schemas[si].name.clone();
        if self.schemas[si].res != Res::L3 {
            return self.fail(ENODEV, format!("io_alloc is not supported on {name}\n"));
        }
        if self.amd.io_alloc == enable {
            return Ok(());
        }
        let closid = self.io_alloc_closid();
        if closid >= self.closids_supported {
            return self.fail(
                EINVAL,
                format!("io_alloc CLOSID (ctrl_hw_id) {closid} is not available\n"),
            );
        }
        if enable {
            if self.closid_used[closid as usize] {
                let owner = self
                    .groups
                    .iter()
                    .flatten()
                    .find(|g| g.closid == closid && matches!(g.kind, GroupKind::Ctrl { .. }))
                    .map_or_else(|| "another".to_string(), |g| g.name.clone());
                return self.fail(
                    ENOSPC,
                    format!("CLOSID (ctrl_hw_id) {closid} for io_alloc is used by {owner} group\n"),
                );
            }
            self.closid_used[closid as usize] = true;
            let mut staged = super::ctrl::Staged::new();
            for s in self.schemas.clone().iter().filter(|s| s.res == Res::L3) {
                for di in 0..self.hw.l3_domains.len() {
                    let Ok(v) = self.init_one_domain(s, di, closid) else {
                        self.closid_used[closid as usize] = false;
                        return self.fail(ENOSPC, "Failed to initialize io_alloc allocations\n");
                    };
                    staged.insert((s.res, s.conf, di), v);
                }
            }
            self.update_domains(p, closid, &staged)?;
        } else {
            self.closid_used[closid as usize] = false;
        }
        self.amd.io_alloc = enable;
        Ok(())
    }

    fn show_io_alloc_cbm(&mut self, si: usize) -> io::Result<String> {
        self.status_clear();
        let s = self.schemas[si].clone();
        if s.res != Res::L3 {
            return self.fail(ENODEV, format!("io_alloc is not supported on {}\n", s.name));
        }
        if !self.amd.io_alloc {
            return self.fail(EINVAL, format!("io_alloc is not enabled on {}\n", s.name));
        }
        let closid = self.io_alloc_closid();
        Ok(self.per_domain(|di| format!("{:x}", self.get_config(Res::L3, di, closid, s.conf))))
    }

    /// `resctrl_io_alloc_cbm_write`: `ID=CBM[;ID=CBM]\n`, validated as a shareable group's
    /// CBM; under CDP the CODE and DATA copies stay equal.
    fn write_io_alloc_cbm(
        &mut self,
        p: &mut SimPlatform,
        si: usize,
        data: &[u8],
    ) -> io::Result<()> {
        let Some(buf) = data.strip_suffix(b"\n") else {
            return einval();
        };
        self.status_clear();
        let s = self.schemas[si].clone();
        if s.res != Res::L3 {
            return self.fail(ENODEV, format!("io_alloc is not supported on {}\n", s.name));
        }
        if !self.amd.io_alloc {
            return self.fail(EINVAL, format!("io_alloc is not enabled on {}\n", s.name));
        }
        let closid = self.io_alloc_closid();
        let mut staged = super::ctrl::Staged::new();
        let mut rest = Some(buf);
        while let Some(r) = rest.filter(|r| !r.is_empty()) {
            let (tok, next) = strsep(r, b';');
            rest = next;
            let (id, val) = strsep(tok, b'=');
            let (Some(val), Ok(id)) = (val, kstrtoul(strim(id), 10)) else {
                return self.fail(EINVAL, "Missing '=' or non-numeric domain\n");
            };
            let Some(di) = self
                .hw
                .l3_domains
                .iter()
                .position(|d| u64::from(d.id) == id)
            else {
                return einval();
            };
            self.parse_cbm_for(&s, di, strim(val), closid, Mode::Shareable, &mut staged)?;
            if let Some(&v) = staged
                .get(&(s.res, s.conf, di))
                .filter(|_| s.conf != Conf::None)
            {
                staged.insert((s.res, s.conf.peer(), di), v);
            }
        }
        self.update_domains(p, closid, &staged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kstrtobool_reads_the_kernels_spellings() {
        for (s, v) in [
            (&b"1"[..], Ok(true)),
            (b"Y\n", Ok(true)),
            (b"on", Ok(true)),
            (b"0", Ok(false)),
            (b"off", Ok(false)),
            (b"o", Err(EINVAL)),
            (b"", Err(EINVAL)),
            (b"2", Err(EINVAL)),
        ] {
            assert_eq!(kstrtobool(s), v, "{s:?}");
        }
    }
}
