//! AMD's assignable MBM counters (ABMC), AMD's bandwidth event configuration (BMEC) and
//! Intel's Sub-NUMA Clustering as resctrl shows them ([`rdt_core::mbm`]).
//!
//! In ABMC's `mbm_event` mode (Linux 6.18+, `info/L3_MON/mbm_assign_mode` reads
//! `[mbm_event]`) an MBM event of a group counts only in the L3 domains where a hardware
//! counter is assigned to it; elsewhere its file reads `Unassigned`. The kernel assigns
//! counters to a new group in every domain while `mbm_assign_on_mkdir` is 1 and counters
//! last, and says nothing (the `mkdir` succeeds) when they have run out: pqos v25.04 then
//! shows nothing or 0 (intel-cmt-cat issue 311). Here every monitor group this backend makes
//! gets exactly the counters it needs, the MBM events asked for in the L3 domains of its
//! CPUs (every domain for tasks), the others given back, through the group's
//! `mbm_L3_assignments` (`fs/resctrl/monitor.c` `mbm_L3_assignments_write`: lines
//! `EVENT:ID=e;ID=_`). Before a batch of groups is made, the counters it needs per domain
//! are counted against `available_mbm_cntrs`: the groups take them in request order, and a
//! group beyond them starts without its MBM events (occupancy and the PMU only, logged as
//! a warning naming it: `pqos -r` on the 192-CPU `turin` monitors every CPU, as pqos does),
//! or, asking for nothing but bandwidth, is refused with
//! [`ResctrlError::NotEnoughMbmCounters`] (needed, free, the groups holding that domain's
//! counters) with nothing made; when an assignment is refused all the same (another tool
//! took counters meanwhile) the start fails with [`ResctrlError::OutOfMbmCounters`] and the
//! batch's groups are removed (which frees their counters, `rdtgroup_unassign_cntrs`).

use std::collections::BTreeMap;

use rdt_core::mbm::{MBM_TRANSACTIONS, mbm_default_config, mbm_transaction_names};
use rdt_core::{
    AssignMode, CounterAssignment, EventConfig, MbmDetails, PmuSource, RequestError, RmidEvent,
};

use super::ResctrlBackend;
use super::batch::Need;
use crate::ResctrlError;
use crate::fs::{ENOSPC, is_pqos_mon_name, join};

const MODE: &str = "info/L3_MON/mbm_assign_mode";
const NUM_CNTRS: &str = "info/L3_MON/num_mbm_cntrs";
const AVAILABLE: &str = "info/L3_MON/available_mbm_cntrs";
const ON_MKDIR: &str = "info/L3_MON/mbm_assign_on_mkdir";
const MBM_EVENTS: [RmidEvent; 2] = [RmidEvent::MbmTotal, RmidEvent::MbmLocal];

/// `mbm_assign_mode`: the bracketed line (`[mbm_event]\ndefault\n`).
fn parse_mode(text: &str) -> Option<AssignMode> {
    let sel = text
        .lines()
        .find_map(|l| l.trim().strip_prefix('[')?.strip_suffix(']'))?;
    match sel {
        "mbm_event" => Some(AssignMode::MbmEvent),
        "default" => Some(AssignMode::Default),
        _ => None,
    }
}

/// `ID=VALUE;ID=VALUE` (`num_mbm_cntrs`, `available_mbm_cntrs`, `mbm_*_bytes_config`) with
/// decimal or `0x` values; `None` when a token does not parse.
fn parse_per_domain(text: &str) -> Option<Vec<(u32, u32)>> {
    text.trim()
        .split(';')
        .filter(|t| !t.is_empty())
        .map(|t| {
            let (id, v) = t.split_once('=')?;
            let v = v.trim();
            let v = match v.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).ok()?,
                None => v.parse().ok()?,
            };
            Some((id.trim().parse().ok()?, v))
        })
        .collect()
}

/// `event_filter`: comma-separated transaction names; `None` for an unknown name.
fn parse_filter(text: &str) -> Option<u32> {
    text.trim()
        .split(',')
        .filter(|t| !t.trim().is_empty())
        .try_fold(0u32, |acc, t| {
            let b = MBM_TRANSACTIONS.iter().position(|n| *n == t.trim())?;
            Some(acc | 1 << b)
        })
}

/// A group's `mbm_L3_assignments`: per event name, the domains with a counter.
fn parse_assignments(text: &str) -> BTreeMap<String, Vec<(u32, bool)>> {
    text.lines()
        .filter_map(|l| {
            let (ev, doms) = l.split_once(':')?;
            let doms = doms
                .split(';')
                .filter_map(|t| {
                    let (id, s) = t.split_once('=')?;
                    Some((id.trim().parse().ok()?, s.trim() == "e"))
                })
                .collect();
            Some((ev.to_owned(), doms))
        })
        .collect()
}

fn config_file(event: RmidEvent) -> String {
    format!("info/L3_MON/{}_config", event.resctrl_name())
}

fn filter_file(event: RmidEvent) -> String {
    format!(
        "info/L3_MON/event_configs/{}/event_filter",
        event.resctrl_name()
    )
}

impl<P: PmuSource> ResctrlBackend<P> {
    /// Whether a new monitor group's counters must be set ([`Self::assign_counters`]): an
    /// AMD platform with `mbm_assign_mode` reading `[mbm_event]` (one read, AMD only).
    /// Also for a group counting no MBM event: the kernel gave it counters on mkdir, which
    /// are given back. The caller holds a lock.
    pub(super) fn needs_counters(&self) -> Result<bool, ResctrlError> {
        if !self.caps.vendor.is_amd_like() {
            return Ok(false);
        }
        Ok(self
            .fs
            .read_opt(MODE)?
            .and_then(|t| parse_mode(&t))
            .is_some_and(|m| m == AssignMode::MbmEvent))
    }

    /// Gives group `dir` a counter for each MBM event of `events` in each of `domains` and
    /// no other (see the module documentation). The caller holds the exclusive lock.
    ///
    /// # Errors
    /// [`ResctrlError::OutOfMbmCounters`] when a domain has none free;
    /// [`ResctrlError::Rejected`] for any other refusal; read errors.
    pub(super) fn assign_counters(
        &self,
        dir: &str,
        events: &[RmidEvent],
        domains: &[u32],
    ) -> Result<(), ResctrlError> {
        let file = join(dir, "mbm_L3_assignments");
        let now = parse_assignments(&self.fs.read(&file)?);
        let mut release = String::new();
        let mut assign = String::new();
        for (name, doms) in &now {
            let wanted = events.iter().any(|e| e.resctrl_name() == name);
            let mut off = Vec::new();
            let mut on = Vec::new();
            for &(d, has) in doms {
                let want = wanted && domains.contains(&d);
                if has && !want {
                    off.push(format!("{d}=_"));
                } else if want && !has {
                    on.push(format!("{d}=e"));
                }
            }
            if !off.is_empty() {
                release.push_str(&format!("{name}:{}\n", off.join(";")));
            }
            if !on.is_empty() {
                assign.push_str(&format!("{name}:{}\n", on.join(";")));
            }
        }
        // Free what the kernel gave on mkdir first: it is never needed.
        if !release.is_empty() {
            self.fs.write(&file, &release)?;
        }
        if assign.is_empty() {
            return Ok(());
        }
        match self.fs.write(&file, &assign) {
            Err(ResctrlError::Rejected { source, status, .. })
                if source.raw_os_error() == Some(ENOSPC) =>
            {
                Err(self.out_of_counters(dir, events, domains, status))
            }
            r => r,
        }
    }

    /// [`ResctrlError::OutOfMbmCounters`] for `dir`: the first event and domain still
    /// without a counter, and every group holding counters there.
    fn out_of_counters(
        &self,
        dir: &str,
        events: &[RmidEvent],
        domains: &[u32],
        status: String,
    ) -> ResctrlError {
        let mine = self
            .fs
            .read(&join(dir, "mbm_L3_assignments"))
            .map(|t| parse_assignments(&t))
            .unwrap_or_default();
        let (event, domain) = events
            .iter()
            .filter(|e| MBM_EVENTS.contains(e))
            .flat_map(|e| domains.iter().map(move |d| (*e, *d)))
            .find(|(e, d)| {
                !mine
                    .get(e.resctrl_name())
                    .is_some_and(|v| v.contains(&(*d, true)))
            })
            .unwrap_or((RmidEvent::MbmTotal, domains.first().copied().unwrap_or(0)));
        ResctrlError::OutOfMbmCounters {
            group: self.fs.path(dir),
            event: event.resctrl_name(),
            domain,
            per_domain: self.counters_per_domain(domain),
            in_use: self.counter_holders(domain, Some(dir)),
            status,
        }
    }

    /// `num_mbm_cntrs` of L3 domain `domain`, 0 when unknown (for messages).
    fn counters_per_domain(&self, domain: u32) -> u32 {
        self.fs
            .read_opt(NUM_CNTRS)
            .ok()
            .flatten()
            .and_then(|t| parse_per_domain(&t))
            .and_then(|v| v.into_iter().find(|(d, _)| *d == domain))
            .map_or(0, |(_, n)| n)
    }

    /// Every group but `except` holding counters in L3 domain `domain`, as `path (count)`
    /// (`/` for the root), read from each group's `mbm_L3_assignments` (for messages).
    fn counter_holders(&self, domain: u32, except: Option<&str>) -> Vec<String> {
        let mut groups = vec![String::new()];
        groups.extend(self.fs.ctrl_groups().unwrap_or_default());
        groups.extend(
            self.fs
                .mon_groups()
                .unwrap_or_default()
                .into_iter()
                .map(|(_, p)| p),
        );
        groups
            .iter()
            .filter(|g| Some(g.as_str()) != except)
            .filter_map(|g| {
                let held = self
                    .fs
                    .read(&join(g, "mbm_L3_assignments"))
                    .ok()
                    .map(|t| parse_assignments(&t))?
                    .values()
                    .filter(|v| v.contains(&(domain, true)))
                    .count();
                (held > 0).then(|| {
                    let name = if g.is_empty() { "/" } else { g.as_str() };
                    // another tool's: a control group of no class of ours, or a monitor
                    // group not named as ours
                    let foreign = match g.rsplit_once("mon_groups/") {
                        Some((_, leaf)) => !is_pqos_mon_name(leaf),
                        None => !g.is_empty() && self.class_of_group(g).is_none(),
                    };
                    let tag = if foreign { " (foreign)" } else { "" };
                    format!("{name} ({held}){tag}")
                })
            })
            .collect()
    }

    /// In `mbm_event` mode, before any group of a batch is made: the counters the planned
    /// groups (`needs`) need in each L3 domain (per monitor group directory, one per MBM
    /// event it counts in each of its domains, as [`Self::assign_counters`] will assign) against
    /// `available_mbm_cntrs` (one read). What the kernel assigns on `mkdir` is given back
    /// before the group's own counters are asked for, so these sums are exact. Nothing is
    /// checked when the file is absent or unreadable (the assignment still refuses).
    /// The caller holds the exclusive lock.
    ///
    /// # Errors
    /// The index of the first group whose counters do not fit, and
    /// [`ResctrlError::NotEnoughMbmCounters`] for the domain where that happens.
    pub(super) fn check_counter_budget(
        &self,
        needs: &[Need<'_>],
    ) -> Result<(), (usize, ResctrlError)> {
        let Some(available) = self
            .fs
            .read_opt(AVAILABLE)
            .ok()
            .flatten()
            .and_then(|t| parse_per_domain(&t))
        else {
            return Ok(());
        };
        let available: BTreeMap<u32, u32> = available.into_iter().collect();
        // Per domain: counters needed, groups asking, the first group over the free ones.
        let mut need: BTreeMap<u32, (u32, usize, Option<usize>)> = BTreeMap::new();
        for (i, (evs, dirs)) in needs.iter().enumerate() {
            let events = evs.iter().filter(|e| MBM_EVENTS.contains(e)).count();
            let events = u32::try_from(events).unwrap_or(u32::MAX);
            if events == 0 {
                continue;
            }
            let mut seen = Vec::new();
            for doms in dirs {
                for &d in *doms {
                    let e = need.entry(d).or_default();
                    e.0 = e.0.saturating_add(events);
                    if !seen.contains(&d) {
                        seen.push(d);
                        e.1 += 1;
                    }
                    let free = available.get(&d).copied().unwrap_or(0);
                    if e.0 > free && e.2.is_none() {
                        e.2 = Some(i);
                    }
                }
            }
        }
        let short = need
            .iter()
            .filter_map(|(d, (n, groups, first))| Some((*first.as_ref()?, *d, *n, *groups)))
            .min();
        let Some((first, domain, needed, groups)) = short else {
            return Ok(());
        };
        Err((
            first,
            ResctrlError::NotEnoughMbmCounters {
                groups,
                domain,
                needed,
                available: available.get(&domain).copied().unwrap_or(0),
                per_domain: self.counters_per_domain(domain),
                in_use: self.counter_holders(domain, None),
            },
        ))
    }

    /// [`rdt_core::BackendExt::mbm_details`] on resctrl, under a shared lock.
    pub(super) fn read_mbm_details(&self) -> Result<MbmDetails, ResctrlError> {
        let _g = self.lock.shared()?;
        let mut out = MbmDetails::default();
        // ABMC and BMEC are AMD's: nothing to read on Intel (no extra file operations).
        let amd = self.caps.vendor.is_amd_like();
        let mode = if amd {
            self.fs.read_opt(MODE)?.and_then(|t| parse_mode(&t))
        } else {
            None
        };
        let counters = if amd {
            self.fs.read_opt(NUM_CNTRS)?
        } else {
            None
        };
        if let Some(counters) = counters {
            let parse = |file: &str, text: &str| {
                parse_per_domain(text).ok_or_else(|| ResctrlError::Parse {
                    path: self.fs.path(file),
                    text: text.trim().to_owned(),
                    expected: "ID=COUNT;ID=COUNT".into(),
                })
            };
            let mode = mode.unwrap_or(AssignMode::Default);
            let on = mode == AssignMode::MbmEvent;
            let available = if on {
                self.fs.read_opt(AVAILABLE)?
            } else {
                None
            };
            out.assign = Some(CounterAssignment {
                mode,
                counters: parse(NUM_CNTRS, &counters)?,
                available: available.map(|t| parse(AVAILABLE, &t)).transpose()?,
                on_mkdir: if on {
                    self.fs.read_opt(ON_MKDIR)?.map(|t| t.trim() == "1")
                } else {
                    None
                },
            });
        }
        for event in MBM_EVENTS {
            if !amd {
                break;
            }
            let file = filter_file(event);
            if mode == Some(AssignMode::MbmEvent)
                && let Some(t) = self.fs.read_opt(&file)?
            {
                let bits = parse_filter(&t).ok_or_else(|| ResctrlError::Parse {
                    path: self.fs.path(&file),
                    text: t.trim().to_owned(),
                    expected: "transaction names separated by commas".into(),
                })?;
                out.event_configs.push((event, EventConfig::Filter(bits)));
            } else if let Some(t) = self.fs.read_opt(&config_file(event))? {
                let v = parse_per_domain(&t).ok_or_else(|| ResctrlError::Parse {
                    path: self.fs.path(&config_file(event)),
                    text: t.trim().to_owned(),
                    expected: "ID=0xBITS;ID=0xBITS".into(),
                })?;
                out.event_configs.push((event, EventConfig::PerDomain(v)));
            }
        }
        if self.snc
            && let Some(d) = self.mon_domains.first()
        {
            let subs = self
                .fs
                .subdirs(&format!("mon_data/mon_L3_{d:02}"))?
                .iter()
                .filter(|s| s.starts_with("mon_sub_L3_"))
                .count();
            out.snc_nodes_per_l3 = u32::try_from(subs).ok().filter(|n| *n > 0);
        }
        Ok(out)
    }

    /// [`rdt_core::BackendExt::set_mbm_event_config`] on resctrl: `event_filter` in
    /// `mbm_event` mode, else `mbm_*_bytes_config` of every L3 domain in one write. The
    /// caller holds no lock.
    pub(super) fn write_mbm_event_config(
        &self,
        event: RmidEvent,
        bits: u32,
    ) -> Result<(), ResctrlError> {
        if !MBM_EVENTS.contains(&event) {
            return Err(RequestError::Unsupported(format!(
                "{} has no transaction configuration (only mbm_total_bytes and \
                 mbm_local_bytes do)",
                event.resctrl_name()
            ))
            .into());
        }
        if bits >> MBM_TRANSACTIONS.len() != 0 {
            return Err(RequestError::Unsupported(format!(
                "MBM event configuration {bits:#x}: only bits 0-6 (0x7f) name transactions"
            ))
            .into());
        }
        let _g = self.lock.exclusive()?;
        let mode = self.fs.read_opt(MODE)?.and_then(|t| parse_mode(&t));
        if mode == Some(AssignMode::MbmEvent) && self.fs.exists(&filter_file(event)) {
            let text = format!("{}\n", mbm_transaction_names(bits).join(","));
            return self.fs.write(&filter_file(event), &text);
        }
        if self.fs.exists(&config_file(event)) {
            let doms: Vec<String> = self
                .mon_domains
                .iter()
                .map(|d| format!("{d}=0x{bits:02x}"))
                .collect();
            return self
                .fs
                .write(&config_file(event), &format!("{}\n", doms.join(";")));
        }
        Err(RequestError::Unsupported(format!(
            "resctrl has no configuration of {} here (needs AMD BMEC: \
             info/L3_MON/{}_config, or ABMC's event_filter in mbm_event mode)",
            event.resctrl_name(),
            event.resctrl_name()
        ))
        .into())
    }

    /// [`rdt_core::BackendExt::set_mbm_assign_mode`] on resctrl: the mode's name to
    /// `info/L3_MON/mbm_assign_mode` when the file offers it and it is not the current one.
    pub(super) fn write_assign_mode(&self, mode: AssignMode) -> Result<(), ResctrlError> {
        let _g = self.lock.exclusive()?;
        let Some(text) = self.fs.read_opt(MODE)? else {
            return Err(RequestError::Unsupported(
                "resctrl has no MBM counter assignment here (info/L3_MON/mbm_assign_mode: AMD \
                 ABMC, Linux 6.18 and later)"
                    .to_owned(),
            )
            .into());
        };
        if parse_mode(&text) == Some(mode) {
            return Ok(());
        }
        let offered: Vec<&str> = text
            .lines()
            .map(|l| l.trim().trim_start_matches('[').trim_end_matches(']'))
            .collect();
        if !offered.contains(&mode.name()) {
            return Err(RequestError::Unsupported(format!(
                "MBM assignment mode {}: resctrl offers {}",
                mode.name(),
                offered.join(", ")
            ))
            .into());
        }
        self.fs.write(MODE, &format!("{}\n", mode.name()))
    }

    /// Puts every MBM event configuration that differs from the default back to it (`-R`);
    /// nothing on a platform without BMEC or ABMC. Unchanged configurations are not
    /// written (a write resets the counters).
    pub(super) fn restore_mbm_configs(&self) -> Result<(), ResctrlError> {
        if !self.caps.vendor.is_amd_like() {
            return Ok(());
        }
        let details = self.read_mbm_details()?;
        for (event, cfg) in &details.event_configs {
            let Some(default) = mbm_default_config(*event) else {
                continue;
            };
            let same = match cfg {
                EventConfig::PerDomain(v) => v.iter().all(|(_, b)| *b == default),
                EventConfig::Filter(b) => *b == default,
            };
            if !same {
                self.write_mbm_event_config(*event, default)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resctrl_texts_parse() {
        assert_eq!(
            parse_mode("[mbm_event]\ndefault\n"),
            Some(AssignMode::MbmEvent)
        );
        assert_eq!(parse_mode("[default]\n"), Some(AssignMode::Default));
        assert_eq!(parse_mode("default\n"), None);
        assert_eq!(
            parse_per_domain("0=0x7f;1=0x15\n"),
            Some(vec![(0, 0x7f), (1, 0x15)])
        );
        assert_eq!(
            parse_per_domain("0=32;8=30\n"),
            Some(vec![(0, 32), (8, 30)])
        );
        assert_eq!(parse_per_domain("0=x\n"), None);
        assert_eq!(
            parse_filter("local_reads,local_non_temporal_writes,local_reads_slow_memory\n"),
            Some(0x15)
        );
        assert_eq!(parse_filter("\n"), Some(0));
        assert_eq!(parse_filter("reads\n"), None);
        let a = parse_assignments("mbm_total_bytes:0=e;1=_\nmbm_local_bytes:0=_;1=_\n");
        assert_eq!(a["mbm_total_bytes"], [(0, true), (1, false)]);
        assert_eq!(a["mbm_local_bytes"], [(0, false), (1, false)]);
    }
}
