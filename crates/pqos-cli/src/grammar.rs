//! pqos's argument grammar (pqos(8), `pqos/main.c`, `pqos/alloc.c`, `pqos/monitor.c`): the
//! values of `-e`, `-a`, `-R`, `-r`, `-m`, `-p`, `-t` and `-i`, each a type with its own `FromStr`.
//!
//! Parsing checks syntax only. Whether a class, mask, CPU or resource id exists on this
//! platform is checked against the backend's capabilities before anything is written
//! (`commands::alloc`). Error messages keep pqos's text where pqos has one and add the
//! offending token and the rule.

pub use rdt_pqos::transaction::MaskScope;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rdt_pqos::{
    AllocReset, ClassId, CpuSet, FeatureSetting, ListLimits, LogicalCpu, MonEvents, MonReset,
    SncMode, TaskId, parse_pqos_list,
};

/// A command-line value does not follow pqos's grammar. The message names the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

fn err(msg: impl Into<String>) -> ArgError {
    ArgError(msg.into())
}

/// pqos's `strtouint64()`: decimal, or hexadecimal with a `0x`/`0X` prefix.
///
/// # Errors
/// `No digits were found` for an empty token, pqos's `Error converting '%s' to unsigned
/// number!` for anything else that is not a number.
pub fn parse_u64(token: &str) -> Result<u64, ArgError> {
    rdt_pqos::parse_number(token).map_err(|e| match e {
        rdt_pqos::ParseNumberError::NoDigits => err(format!("No digits were found in '{token}'")),
        _ => err(format!("Error converting '{token}' to unsigned number!")),
    })
}

fn parse_u32(token: &str, what: &str) -> Result<u32, ArgError> {
    let v = parse_u64(token)?;
    u32::try_from(v).map_err(|_| err(format!("{what} '{token}' is out of range")))
}

/// pqos's `strlisttotab()` for resource ids (the ids after `@` in `-e`), through the one
/// list parser of rdt-core ([`parse_pqos_list`] with [`ListLimits::RESOURCE_IDS`]):
/// comma-separated numbers and `a-b` ranges; empty elements are skipped, reversed ranges
/// swapped, duplicates removed; in first-mention order, as pqos applies them.
///
/// # Errors
/// When an element is not a number or a range of numbers, or the list is too long.
pub fn parse_id_list(list: &str) -> Result<Vec<u32>, ArgError> {
    let ids = parse_pqos_list(list, &ListLimits::RESOURCE_IDS).map_err(|e| err(e.to_string()))?;
    // RESOURCE_IDS caps values below u32::MAX.
    Ok(ids
        .into_iter()
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        .collect())
}

/// A task list of `-a pid:` in pqos's lenient form ([`ListLimits::TASKS`]).
fn parse_task_list(list: &str, item: &str) -> Result<Vec<TaskId>, ArgError> {
    let ids = parse_pqos_list(list, &ListLimits::TASKS)
        .map_err(|e| err(format!("{e} (in \"{item}\")")))?;
    // TASKS caps values at MAX_TASK_ID, far below u32::MAX.
    Ok(ids
        .into_iter()
        .map(|n| TaskId::new(u32::try_from(n).unwrap_or(u32::MAX)))
        .collect())
}

/// A CPU list in pqos's lenient form, with the error naming the item it came from.
fn parse_cpu_list(list: &str, item: &str) -> Result<CpuSet, ArgError> {
    CpuSet::from_pqos_list(list).map_err(|e| err(format!("{e} (in \"{item}\")")))
}

// ---------------------------------------------------------------------------------------
// -e CLASSDEF
// ---------------------------------------------------------------------------------------

/// The allocation technology of one `-e` item (`TYPE` in `TYPE[@IDS]:...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocKind {
    /// `llc`: L3 CAT.
    L3,
    /// `l2`: L2 CAT.
    L2,
    /// `mba`: memory bandwidth allocation (percent on Intel, raw units on AMD).
    Mba,
    /// `mba_max`: MBA in MBps through the kernel's `mba_MBps` controller.
    MbaMax,
    /// `smba`: AMD slow-memory bandwidth allocation.
    Smba,
}

/// One `COS=VALUE` of a `-e` item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CosValue {
    /// The class of service.
    pub class: ClassId,
    /// Which masks (CAT only).
    pub scope: MaskScope,
    /// The mask (CAT; never 0) or the bandwidth value (MBA; never 0).
    pub value: u64,
    /// The text of this `COS=VALUE`, for messages.
    pub text: String,
}

/// One `;`-separated item of `-e`: `TYPE[@IDS]:COS=VALUE[,COS=VALUE...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassDef {
    /// The technology.
    pub kind: AllocKind,
    /// Resource ids after `@` (sockets or L3 ids, L2 ids); `None` = all.
    pub ids: Option<Vec<u32>>,
    /// The classes to set, in order.
    pub values: Vec<CosValue>,
    /// The item's text, for messages.
    pub text: String,
}

/// The value of one `-e` option: items separated by `;`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassDefs(pub Vec<ClassDef>);

const CLASSDEF_RULE: &str = "expected TYPE[@IDS]:COS=VALUE[,COS=VALUE], e.g. llc:1=0xffe00, llc@0,1:1=0xf, l2:1=0xf or mba:1=50";

impl FromStr for ClassDef {
    type Err = ArgError;

    fn from_str(item: &str) -> Result<Self, ArgError> {
        let Some((head, body)) = item.split_once(':') else {
            return Err(err(format!(
                "Unrecognized allocation format: \"{item}\" has no ':' ({CLASSDEF_RULE})"
            )));
        };
        let (type_text, ids) = match head.split_once('@') {
            Some((t, list)) => {
                let ids = parse_id_list(list).map_err(|e| err(format!("{e} (in \"{item}\")")))?;
                if ids.is_empty() {
                    return Err(err(format!(
                        "No resource ID specified: \"{item}\" (expected ids after '@', e.g. llc@0,1:1=0xf)"
                    )));
                }
                (t, Some(ids))
            }
            None => (head, None),
        };
        let kind = match type_text.trim().to_ascii_lowercase().as_str() {
            "llc" => AllocKind::L3,
            "l2" => AllocKind::L2,
            "mba" => AllocKind::Mba,
            "mba_max" => AllocKind::MbaMax,
            "smba" => AllocKind::Smba,
            _ => {
                return Err(err(format!(
                    "Unrecognized allocation type: \"{type_text}\" in \"{item}\" (expected llc, l2, mba, mba_max or smba)"
                )));
            }
        };
        let mut values = Vec::new();
        for spec in body.split(',') {
            if spec.trim().is_empty() {
                continue;
            }
            values.push(parse_cos_value(spec, kind, item)?);
        }
        if values.is_empty() {
            return Err(err(format!(
                "Invalid class of service definition: \"{item}\" has no COS=VALUE ({CLASSDEF_RULE})"
            )));
        }
        Ok(Self {
            kind,
            ids,
            values,
            text: item.to_owned(),
        })
    }
}

fn parse_cos_value(spec: &str, kind: AllocKind, item: &str) -> Result<CosValue, ArgError> {
    let Some((cos_text, value_text)) = spec.split_once('=') else {
        return Err(err(format!(
            "Invalid class of service definition: \"{spec}\" has no '=' (in \"{item}\"; expected COS=VALUE, e.g. 1=0xf)"
        )));
    };
    let c = cos_text.trim();
    let (num, scope) = if c.len() > 1 && (c.ends_with('d') || c.ends_with('D')) {
        (&c[..c.len() - 1], MaskScope::Data)
    } else if c.len() > 1 && (c.ends_with('c') || c.ends_with('C')) {
        (&c[..c.len() - 1], MaskScope::Code)
    } else {
        (c, MaskScope::Both)
    };
    let in_item = |e: ArgError| err(format!("{e} (class of service in \"{item}\")"));
    let class = ClassId::new(parse_u32(num, "class of service").map_err(in_item)?);
    let is_cat = matches!(kind, AllocKind::L3 | AllocKind::L2);
    if scope != MaskScope::Both && !is_cat {
        return Err(err(format!(
            "\"{spec}\" in \"{item}\": the d/c (CDP data/code) suffix applies to llc and l2 classes only"
        )));
    }
    let value = parse_u64(value_text).map_err(|e| {
        err(format!(
            "{e} (value in \"{item}\"; decimal, or hexadecimal with 0x)"
        ))
    })?;
    if value == 0 {
        return Err(err(if is_cat {
            format!(
                "Failed to set {} configuration! \"{spec}\" in \"{item}\": a zero mask selects no cache way",
                if kind == AllocKind::L3 {
                    "L3 CAT"
                } else {
                    "L2 CAT"
                }
            )
        } else {
            format!(
                "Failed to set MBA configuration! \"{spec}\" in \"{item}\": a zero bandwidth is not allowed"
            )
        }));
    }
    Ok(CosValue {
        class,
        scope,
        value,
        text: spec.trim().to_owned(),
    })
}

/// What pqos v25.04 prints on stdout for an `-e` argument this grammar refuses: its line for
/// the first item it cannot apply, then `Allocation configuration error!` (pqos/alloc.c
/// `set_allocation_class`, `set_allocation_cos`, `set_l3_cos`/`set_l2_cos`/`set_mba_cos`,
/// `alloc_apply`). `None` when pqos has no such line (a value that is not a number ends
/// pqos's option parsing instead) or when `arg` parses.
///
/// Scripts look for these lines on stdout; the clearer message stays on stderr.
#[must_use]
pub fn classdefs_pqos_failure(arg: &str) -> Option<String> {
    let failure = arg
        .split(';')
        .filter(|i| !i.trim().is_empty())
        .find_map(|item| item.parse::<ClassDef>().err().map(|_| item))?;
    let line = classdef_pqos_line(failure)?;
    Some(format!("{line}\nAllocation configuration error!\n"))
}

/// pqos's stdout line for the `-e` item `item` that does not parse.
fn classdef_pqos_line(item: &str) -> Option<String> {
    let Some((head, body)) = item.split_once(':') else {
        return Some(format!("Unrecognized allocation format: {item}"));
    };
    let type_text = match head.split_once('@') {
        Some((t, list)) => {
            if parse_id_list(list).ok()?.is_empty() {
                return Some(format!("No resource ID specified: {item}"));
            }
            t
        }
        None => head,
    };
    let kind = match type_text.trim().to_ascii_lowercase().as_str() {
        "llc" => AllocKind::L3,
        "l2" => AllocKind::L2,
        "mba" | "mba_max" | "smba" => AllocKind::Mba,
        _ => return Some(format!("Unrecognized allocation type: {item}")),
    };
    // strtok_r skips empty tokens
    for spec in body.split(',').filter(|s| !s.is_empty()) {
        let Some((_, value)) = spec.split_once('=') else {
            return Some(format!("Invalid class of service definition: {spec}"));
        };
        if parse_u64(value).ok()? == 0 {
            return Some(
                match kind {
                    AllocKind::L3 => "Failed to set L3 CAT configuration!",
                    AllocKind::L2 => "Failed to set L2 CAT configuration!",
                    _ => "Failed to set MBA configuration!",
                }
                .to_owned(),
            );
        }
    }
    None
}

/// The `;`-separated items of an `-e`/`-a` argument, each parsed; empty items are skipped,
/// and an argument with none is `EMPTY "ARG" (RULE)`.
fn semicolon_items<T: FromStr<Err = ArgError>>(
    s: &str,
    empty: &str,
    rule: &str,
) -> Result<Vec<T>, ArgError> {
    let items: Vec<T> = s
        .split(';')
        .filter(|i| !i.trim().is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    if items.is_empty() {
        return Err(err(format!("{empty} \"{s}\" ({rule})")));
    }
    Ok(items)
}

impl FromStr for ClassDefs {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        let items: Vec<ClassDef> =
            semicolon_items(s, "Empty allocation class definition", CLASSDEF_RULE)?;
        if items.len() > 32 {
            return Err(err("Too many allocation options! (at most 32 per -e)"));
        }
        Ok(Self(items))
    }
}

// ---------------------------------------------------------------------------------------
// -a CLASS2ID
// ---------------------------------------------------------------------------------------

/// What a `-a` item associates with a class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssocTarget {
    /// `llc:`, `cos:`, `core:`: logical CPUs.
    Cores(CpuSet),
    /// `pid:`: task ids (OS interface only), in first-mention order. A process id stands for
    /// every thread of the process.
    Pids(Vec<TaskId>),
    /// `channel:`: one I/O RDT channel (pqos `fill_channel_tab`).
    Channel(rdt_pqos::ChannelId),
    /// `dev:`: an I/O RDT device's channels, the `vc`th one or all of them (pqos
    /// `fill_dev_tab`; hexadecimal `[SEG:]BUS:DEV.FN[@VC]`, VC decimal 0-7).
    Device {
        /// PCI segment.
        segment: u16,
        /// Bus (15:8), device (7:3), function (2:0).
        bdf: u16,
        /// The device's channel (its index among the device's channels, as pqos counts).
        vc: Option<u8>,
    },
}

/// One `;`-separated item of `-a`: `cos:COS=LIST`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assoc {
    /// The class.
    pub class: ClassId,
    /// The CPUs or tasks.
    pub target: AssocTarget,
    /// The item's text, for messages.
    pub text: String,
}

/// The value of one `-a` option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssocDefs(pub Vec<Assoc>);

const ASSOC_RULE: &str = "expected llc:COS=CPU_LIST, cos:COS=CPU_LIST, core:COS=CPU_LIST, \
     pid:COS=TASK_LIST, dev:COS=[SEG:]BUS:DEV.FN[@VC] or channel:COS=CHANNEL, e.g. llc:1=2-7, \
     pid:1=1234,5678, dev:1=0000:16:00.0@0 or channel:1=0x10100";

/// `dev:`'s device: `[SEG:]BUS:DEV.FN[@VC]` (pqos `pqos_parse_pci_id`, VC decimal below
/// `PQOS_DEV_MAX_CHANNELS` = 8).
fn parse_device(text: &str, item: &str) -> Result<AssocTarget, ArgError> {
    let (pci, vc) = match text.split_once('@') {
        Some((p, v)) => (p, Some(v)),
        None => (text, None),
    };
    let (segment, bdf) = rdt_pqos::mmio::iordt::parse_pci_address(pci.trim())
        .map_err(|e| err(format!("Invalid PCI ID in \"{item}\": {e}")))?;
    let vc = match vc {
        None => None,
        Some(v) => {
            let n = parse_u64(v.trim())
                .map_err(|e| err(format!("Invalid virtual channel in \"{item}\": {e}")))?;
            Some(u8::try_from(n).ok().filter(|n| *n < 8).ok_or_else(|| {
                err(format!(
                    "Virtual channel {n} is out of range [0, 7] in \"{item}\""
                ))
            })?)
        }
    };
    Ok(AssocTarget::Device { segment, bdf, vc })
}

impl FromStr for Assoc {
    type Err = ArgError;

    fn from_str(item: &str) -> Result<Self, ArgError> {
        let lower = item.trim_start().to_ascii_lowercase();
        let prefix = ["cos:", "llc:", "core:", "pid:", "dev:", "channel:"]
            .into_iter()
            .find(|p| lower.starts_with(p));
        let Some(prefix) = prefix else {
            return Err(err(format!(
                "Unrecognized allocation type: \"{item}\" ({ASSOC_RULE})"
            )));
        };
        let rest = &item.trim_start()[prefix.len()..];
        let Some((cos_text, list)) = rest.split_once('=') else {
            return Err(err(format!(
                "Invalid allocation class of service association format: \"{item}\" has no '=' ({ASSOC_RULE})"
            )));
        };
        let class = ClassId::new(
            parse_u32(cos_text, "class of service")
                .map_err(|e| err(format!("{e} (class of service in \"{item}\")")))?,
        );
        let target = if prefix == "channel:" {
            let channel = list
                .trim()
                .parse::<rdt_pqos::ChannelId>()
                .map_err(|e| err(format!("{e} (in \"{item}\")")))?;
            AssocTarget::Channel(channel)
        } else if prefix == "dev:" {
            parse_device(list, item)?
        } else if prefix == "pid:" {
            let pids = parse_task_list(list, item)?;
            if pids.is_empty() {
                return Err(err(format!("No task id specified in \"{item}\"")));
            }
            AssocTarget::Pids(pids)
        } else {
            let cpus = parse_cpu_list(list, item)?;
            if cpus.is_empty() {
                return Err(err(format!(
                    "No cores specified in \"{item}\" ({ASSOC_RULE})"
                )));
            }
            AssocTarget::Cores(cpus)
        };
        Ok(Self {
            class,
            target,
            text: item.to_owned(),
        })
    }
}

impl FromStr for AssocDefs {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        let items: Vec<Assoc> = semicolon_items(s, "Empty allocation association", ASSOC_RULE)?;
        Ok(Self(items))
    }
}

// ---------------------------------------------------------------------------------------
// -R [CFG] and -r [CFG]
// ---------------------------------------------------------------------------------------

/// The value of `-R`: comma-separated `l3cdp-on|off|any`, `l2cdp-on|off|any`,
/// `mbaCtrl-on|off|any`, `mba40-on|off|any`, `l3iordt-on|off|any` (case-insensitive);
/// empty = reset with everything `any`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResetCfg(pub AllocReset);

fn feature_setting(suffix: &str) -> Option<FeatureSetting> {
    match suffix {
        "on" => Some(FeatureSetting::On),
        "off" => Some(FeatureSetting::Off),
        "any" => Some(FeatureSetting::Any),
        _ => None,
    }
}

impl FromStr for ResetCfg {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        let mut cfg = AllocReset::default();
        for token in s.split(',') {
            let t = token.trim();
            if t.is_empty() {
                continue;
            }
            let lower = t.to_ascii_lowercase();
            let unknown = || {
                err(format!(
                    "Unrecognized '{t}' allocation reset option! (expected l3cdp-on|off|any, l2cdp-on|off|any, mbaCtrl-on|off|any or mba40-on|off|any)"
                ))
            };
            let (name, setting) = lower.rsplit_once('-').ok_or_else(unknown)?;
            let setting = feature_setting(setting).ok_or_else(unknown)?;
            match name {
                "l3cdp" => cfg.l3_cdp = setting,
                "l2cdp" => cfg.l2_cdp = setting,
                "mbactrl" => cfg.mba_ctrl = setting,
                // pqos/main.c selfn_reset_alloc: `pqos_alloc_config.mba40`
                "mba40" => cfg.mba40 = setting,
                // pqos/main.c selfn_reset_alloc: `pqos_alloc_config.l3_iordt`
                "l3iordt" => cfg.l3_iordt = setting,
                _ => return Err(unknown()),
            }
        }
        Ok(Self(cfg))
    }
}

/// The value of `-r`: comma-separated `l3iordt-on|off|any` and `snc-local|total|any`
/// (case-insensitive; pqos/main.c `selfn_reset_mon`, `pqos_mon_config`); an empty value is
/// the plain reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MonResetCfg(pub MonReset);

impl FromStr for MonResetCfg {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        let mut cfg = MonReset::default();
        for token in s.split(',') {
            let t = token.trim();
            match t.to_ascii_lowercase().as_str() {
                "" => {}
                "l3iordt-on" => cfg.l3_iordt = FeatureSetting::On,
                "l3iordt-off" => cfg.l3_iordt = FeatureSetting::Off,
                "l3iordt-any" => cfg.l3_iordt = FeatureSetting::Any,
                "snc-local" => cfg.snc = Some(SncMode::Local),
                "snc-total" => cfg.snc = Some(SncMode::Total),
                "snc-any" => cfg.snc = None,
                _ => {
                    return Err(err(format!(
                        "Unrecognized '{t}' monitoring reset option! (expected l3iordt-on|off|any or snc-local|total|any)"
                    )));
                }
            }
        }
        Ok(Self(cfg))
    }
}

// ---------------------------------------------------------------------------------------
// -m EVTCORES
// ---------------------------------------------------------------------------------------

/// One monitoring group of `-m`: a set of cores counted together, and its events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonGroupSpec {
    /// The row label: the number of an ungrouped core, the bracket text of a group (`0-3`).
    pub desc: String,
    /// The cores.
    pub cpus: CpuSet,
    /// The events asked for (`all` = [`MonEvents::PQOS_ALL`]); IPC and misses are added later.
    pub events: MonEvents,
}

/// The value of one `-m` option: `EVENT:LIST[;EVENT:LIST...]`, where LIST mixes ungrouped
/// cores (`0,2,4-6`: one group each) and bracketed groups (`[0-3]`: one group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvtCores(pub Vec<MonGroupSpec>);

const EVTCORES_RULE: &str = "expected EVENT:CORES with EVENT llc, mbl, mbr, mbt, llc_ref or all, e.g. all:0-3 or llc:[0-3];mbl:4";

fn parse_event(name: &str, item: &str, rule: &str) -> Result<MonEvents, ArgError> {
    Ok(match name.trim().to_ascii_lowercase().as_str() {
        "llc" => MonEvents::LLC_OCCUPANCY,
        "mbl" => MonEvents::MBM_LOCAL,
        "mbr" => MonEvents::MBM_REMOTE,
        "mbt" => MonEvents::MBM_TOTAL,
        "llc_ref" => MonEvents::LLC_REFERENCES,
        "all" | "" => MonEvents::PQOS_ALL,
        _ => {
            return Err(err(format!(
                "Unrecognized monitoring event type \"{name}\" in \"{item}\" ({rule})"
            )));
        }
    })
}

/// One part of an `EVENT:LIST` item: a bracketed group or a plain list of ids.
enum ListPart<'a> {
    /// `[0-3]`: the text between the brackets, one group.
    Bracket(&'a str),
    /// `0,2,4-6` (up to the next bracket or the end): one group per id.
    Plain(&'a str),
}

/// One `EVENT:LIST` item: its text, its events and its list parts.
type EvtItem<'a> = (&'a str, MonEvents, Vec<ListPart<'a>>);

/// Splits an `EVENT:LIST[;EVENT:LIST...]` value (`-m`, `-p`) into its items, each with its
/// events and list parts. `rule` (the expected form) goes into the messages.
fn split_evt_items<'a>(s: &'a str, rule: &str) -> Result<Vec<EvtItem<'a>>, ArgError> {
    let mut items = Vec::new();
    for item in s.split(';') {
        if item.trim().is_empty() {
            continue;
        }
        let Some((event, list)) = item.split_once(':') else {
            return Err(err(format!(
                "Unrecognized monitoring event type: \"{item}\" has no ':' ({rule})"
            )));
        };
        let events = parse_event(event, item, rule)?;
        let mut parts = Vec::new();
        let mut rest = list.trim();
        while !rest.is_empty() {
            if let Some(inner_start) = rest.strip_prefix('[') {
                let Some(end) = inner_start.find(']') else {
                    return Err(err(format!("Missing ']' in \"{item}\" ({rule})")));
                };
                parts.push(ListPart::Bracket(&inner_start[..end]));
                rest = inner_start[end + 1..].trim_start();
                rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
                if !rest.is_empty() && rest.starts_with(']') {
                    return Err(err(format!("Unbalanced ']' in \"{item}\"")));
                }
            } else {
                let end = rest.find(',').unwrap_or(rest.len());
                let token = &rest[..end];
                if token.contains(']') || token.contains('[') {
                    return Err(err(format!("Misplaced bracket in '{token}' in \"{item}\"")));
                }
                parts.push(ListPart::Plain(token));
                rest = rest[end..].strip_prefix(',').unwrap_or("").trim_start();
            }
        }
        items.push((item, events, parts));
    }
    if items.is_empty() {
        return Err(err(format!("Empty monitoring selection \"{s}\" ({rule})")));
    }
    Ok(items)
}

impl FromStr for EvtCores {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        let mut groups = Vec::new();
        for (item, events, parts) in split_evt_items(s, EVTCORES_RULE)? {
            let before = groups.len();
            for part in parts {
                match part {
                    ListPart::Bracket(inner) => {
                        let cpus = parse_cpu_list(inner, item)?;
                        if cpus.is_empty() {
                            return Err(err(format!("Empty core group '[{inner}]' in \"{item}\"")));
                        }
                        groups.push(MonGroupSpec {
                            desc: inner.trim().to_owned(),
                            cpus,
                            events,
                        });
                    }
                    ListPart::Plain(token) => {
                        for cpu in parse_cpu_list(token, item)?.iter() {
                            groups.push(MonGroupSpec {
                                desc: cpu.get().to_string(),
                                cpus: std::iter::once(cpu).collect(),
                                events,
                            });
                        }
                    }
                }
            }
            if groups.len() == before {
                return Err(err(format!(
                    "No cores selected for monitoring in \"{item}\" ({EVTCORES_RULE})"
                )));
            }
        }
        Ok(Self(groups))
    }
}

/// Merges monitoring groups as pqos does: a group listed twice with the same cores gets
/// the union of its events; a core in two different groups is an error.
///
/// # Errors
/// pqos's `Error: cannot monitor same cores in different groups`, naming the core and
/// both groups.
pub fn merge_groups(
    groups: impl IntoIterator<Item = MonGroupSpec>,
) -> Result<Vec<MonGroupSpec>, ArgError> {
    let mut out: Vec<MonGroupSpec> = Vec::new();
    for g in groups {
        if let Some(same) = out.iter_mut().find(|o| o.cpus == g.cpus) {
            same.events |= g.events;
            continue;
        }
        if let Some(other) = out.iter().find(|o| o.cpus.intersects(&g.cpus)) {
            let core = g
                .cpus
                .iter()
                .find(|c| other.cpus.contains(*c))
                .map_or(0, LogicalCpu::get);
            return Err(err(format!(
                "Error: cannot monitor same cores in different groups: core {core} is in group \"{}\" and group \"{}\"",
                other.desc, g.desc
            )));
        }
        out.push(g);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// --mon-channel=EVTCHANNELS
// ---------------------------------------------------------------------------------------

/// One I/O RDT channel monitoring group of `--mon-channel`: channels counted together
/// (one RMID tagged on all of them), and its events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelGroupSpec {
    /// The row label: the channel as written for an ungrouped one, the bracket text of a
    /// group.
    pub desc: String,
    /// The channels ([`AssocTarget::Channel`], `--mon-channel`) or devices
    /// ([`AssocTarget::Device`], `--mon-dev`: resolved to their channels when monitoring
    /// starts), in the order written.
    pub targets: Vec<AssocTarget>,
    /// The events asked for (`all` = [`MonEvents::PQOS_ALL`], narrowed later to the RMID
    /// events the platform counts).
    pub events: MonEvents,
}

/// The value of one `--mon-channel` option (pqos `selfn_monitor_channels`): the `-m`
/// grammar with channel ids (`0x10100`, decimal or hex) instead of cores: ungrouped ids one
/// group each, `[0x10100,0x10101]` one group. Channel ids have no ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvtChannels(pub Vec<ChannelGroupSpec>);

const EVTCHANNELS_RULE: &str = "expected EVENT:CHANNELS with EVENT llc, mbl, mbt or all, e.g. llc:0x10100 or all:[0x10100,0x10101]";

impl FromStr for EvtChannels {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        parse_io_groups(s, EVTCHANNELS_RULE, |t, item| {
            t.parse()
                .map(AssocTarget::Channel)
                .map_err(|e| err(format!("{e} in \"{item}\" ({EVTCHANNELS_RULE})")))
        })
        .map(Self)
    }
}

/// The value of one `--mon-dev` option (pqos `selfn_monitor_devs`): the `-m` grammar with
/// I/O RDT devices `[SEG:]BUS:DEV.FN[@VC]` (as `-a dev:`) instead of cores; a device
/// without `@VC` is all its channels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvtDevices(pub Vec<ChannelGroupSpec>);

const EVTDEVICES_RULE: &str = "expected EVENT:DEVICES with EVENT llc, mbl, mbt or all and DEVICE [SEG:]BUS:DEV.FN[@VC], e.g. llc:0000:16:00.0@0 or all:[16:00.0,16:01.0]";

impl FromStr for EvtDevices {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        parse_io_groups(s, EVTDEVICES_RULE, parse_device).map(Self)
    }
}

/// `--mon-channel`/`--mon-dev` groups: the `-m` grammar with `target` parsing each id.
fn parse_io_groups(
    s: &str,
    rule: &str,
    target: impl Fn(&str, &str) -> Result<AssocTarget, ArgError>,
) -> Result<Vec<ChannelGroupSpec>, ArgError> {
    {
        let ids = |text: &str, item: &str| -> Result<Vec<AssocTarget>, ArgError> {
            let mut out = Vec::new();
            for t in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                let c = target(t, item)?;
                if !out.contains(&c) {
                    out.push(c);
                }
            }
            Ok(out)
        };
        let mut groups = Vec::new();
        for (item, events, parts) in split_evt_items(s, rule)? {
            let before = groups.len();
            for part in parts {
                match part {
                    ListPart::Bracket(inner) => {
                        let channels = ids(inner, item)?;
                        if channels.is_empty() {
                            return Err(err(format!(
                                "Empty channel group '[{inner}]' in \"{item}\""
                            )));
                        }
                        groups.push(ChannelGroupSpec {
                            desc: inner.trim().to_owned(),
                            targets: channels,
                            events,
                        });
                    }
                    ListPart::Plain(token) => {
                        for (c, text) in ids(token, item)?
                            .into_iter()
                            .zip(token.split(',').map(str::trim).filter(|t| !t.is_empty()))
                        {
                            groups.push(ChannelGroupSpec {
                                desc: match c {
                                    AssocTarget::Channel(id) => id.to_string(),
                                    _ => text.to_owned(),
                                },
                                targets: vec![c],
                                events,
                            });
                        }
                    }
                }
            }
            if groups.len() == before {
                return Err(err(format!(
                    "No channels selected for monitoring in \"{item}\" ({rule})"
                )));
            }
        }
        Ok(groups)
    }
}

// ---------------------------------------------------------------------------------------
// --mon-uncore[=EVTSOCKETS]
// ---------------------------------------------------------------------------------------

/// One uncore monitoring group of `--mon-uncore`: sockets counted together, and its events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketGroupSpec {
    /// The row label: the number of an ungrouped socket, the bracket text of a group.
    pub desc: String,
    /// The sockets (physical package ids), ascending.
    pub sockets: Vec<u32>,
    /// The events asked for; only `all` selects the uncore events
    /// ([`MonEvents::select_uncore`]).
    pub events: MonEvents,
}

/// The value of one `--mon-uncore` option (pqos `selfn_monitor_uncore`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvtSockets {
    /// `--mon-uncore` without a value: one group per socket with every uncore event
    /// (pqos `monitor_setup`).
    EverySocket,
    /// `--mon-uncore=EVENT:SOCKETS[;...]`, the `-m` grammar with socket ids: ungrouped ids
    /// (`0,1`: one group each) and bracketed groups (`[0-1]`: one group).
    Groups(Vec<SocketGroupSpec>),
}

impl EvtSockets {
    /// What clap hands over for `--mon-uncore` without `=VALUE`: NUL, which no command-line
    /// argument can contain, so that `--mon-uncore=` (empty) stays pqos's error.
    pub const MISSING: &'static str = "\0";
}

const EVTSOCKETS_RULE: &str = "expected EVENT:SOCKETS with EVENT all, e.g. all:0,1 or all:[0-1]";

impl FromStr for EvtSockets {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        if s == Self::MISSING {
            return Ok(Self::EverySocket);
        }
        if s.is_empty() {
            return Err(err(format!("Empty string! ({EVTSOCKETS_RULE})")));
        }
        let mut groups = Vec::new();
        for (item, events, parts) in split_evt_items(s, EVTSOCKETS_RULE)? {
            let before = groups.len();
            for part in parts {
                // socket lists have the -m list grammar (pqos `strlisttotab`)
                let (inner, bracket) = match part {
                    ListPart::Bracket(inner) => (inner, true),
                    ListPart::Plain(token) => (token, false),
                };
                let ids: Vec<u32> = parse_cpu_list(inner, item)?
                    .iter()
                    .map(LogicalCpu::get)
                    .collect();
                if bracket {
                    if ids.is_empty() {
                        return Err(err(format!("Empty socket group '[{inner}]' in \"{item}\"")));
                    }
                    groups.push(SocketGroupSpec {
                        desc: inner.trim().to_owned(),
                        sockets: ids,
                        events,
                    });
                } else {
                    groups.extend(ids.into_iter().map(|id| SocketGroupSpec {
                        desc: id.to_string(),
                        sockets: vec![id],
                        events,
                    }));
                }
            }
            if groups.len() == before {
                return Err(err(format!(
                    "No sockets selected for monitoring in \"{item}\" ({EVTSOCKETS_RULE})"
                )));
            }
        }
        Ok(Self::Groups(groups))
    }
}

/// Merges uncore groups as pqos's `grp_add` does: a group listed twice with the same
/// sockets gets the union of its events; a socket in two different groups is an error.
///
/// # Errors
/// pqos's `Error: cannot monitor same sockets in different groups`, naming the socket and
/// both groups.
pub fn merge_socket_groups(
    groups: impl IntoIterator<Item = SocketGroupSpec>,
) -> Result<Vec<SocketGroupSpec>, ArgError> {
    let mut out: Vec<SocketGroupSpec> = Vec::new();
    for g in groups {
        if let Some(same) = out.iter_mut().find(|o| o.sockets == g.sockets) {
            same.events |= g.events;
            continue;
        }
        if let Some((other, socket)) = out.iter().find_map(|o| {
            g.sockets
                .iter()
                .find(|s| o.sockets.contains(s))
                .map(|s| (o, s))
        }) {
            return Err(err(format!(
                "Error: cannot monitor same sockets in different groups: socket {socket} is in group \"{}\" and group \"{}\"",
                other.desc, g.desc
            )));
        }
        out.push(g);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// -p EVTPIDS
// ---------------------------------------------------------------------------------------

/// One monitoring group of `-p`: processes (or single threads) counted together, and its
/// events. A process id stands for all of its threads (pqos `pqos_mon_start_pids2`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PidGroupSpec {
    /// The row label: the id of an ungrouped process, the bracket text of a group.
    pub desc: String,
    /// The process (or thread) ids, ascending, without duplicates.
    pub pids: Vec<TaskId>,
    /// The events asked for (`all` = [`MonEvents::PQOS_ALL`]); IPC and misses are added later.
    pub events: MonEvents,
}

/// The value of one `-p` option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvtPids {
    /// `-p` without a value: pqos's top-pids mode.
    Top,
    /// `EVENT:PIDS[;EVENT:PIDS...]`, where PIDS mixes ungrouped ids (`1234,5678`: one group
    /// each) and bracketed groups (`[1234,5678]`: one group).
    Groups(Vec<PidGroupSpec>),
}

const EVTPIDS_RULE: &str = "expected EVENT:PIDS with EVENT llc, mbl, mbr, mbt, llc_ref or all, e.g. all:1234,5678 or llc:[1234,5678]";

/// How many ids one `-p` list may expand to (pqos's `strlisttotab` capacity for PIDs).
pub const PID_LIST_CAPACITY: usize = 262_144;

/// pqos's `strlisttotab()` for process ids: comma-separated ids and `a-b` ranges; empty
/// elements skipped, reversed ranges swapped, duplicates removed. Ascending.
fn parse_pid_list(list: &str, item: &str) -> Result<Vec<TaskId>, ArgError> {
    let mut ids: Vec<u32> = Vec::new();
    for token in list.split(',') {
        let t = token.trim();
        if t.is_empty() {
            continue;
        }
        let bad = || {
            err(format!(
                "'{t}' in \"{item}\" is not a process id or a range of process ids N-M"
            ))
        };
        let (lo, hi) = match t.split_once('-') {
            None => {
                let n =
                    parse_u32(t, "process id").map_err(|e| err(format!("{e} (in \"{item}\")")))?;
                (n, n)
            }
            Some((a, b)) => {
                let a = parse_u32(a, "process id").map_err(|_| bad())?;
                let b = parse_u32(b, "process id").map_err(|_| bad())?;
                (a.min(b), a.max(b))
            }
        };
        let count = usize::try_from(hi - lo)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        if ids.len().saturating_add(count) > PID_LIST_CAPACITY {
            return Err(err(format!(
                "Exceeded parser capacity of {PID_LIST_CAPACITY} entries in \"{item}\""
            )));
        }
        ids.extend(lo..=hi);
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids.into_iter().map(TaskId::new).collect())
}

impl FromStr for EvtPids {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        if s.trim().is_empty() {
            return Ok(Self::Top);
        }
        let mut groups = Vec::new();
        for (item, events, parts) in split_evt_items(s, EVTPIDS_RULE)? {
            let before = groups.len();
            for part in parts {
                match part {
                    ListPart::Bracket(inner) => {
                        let pids = parse_pid_list(inner, item)?;
                        if pids.is_empty() {
                            return Err(err(format!(
                                "Empty process group '[{inner}]' in \"{item}\""
                            )));
                        }
                        groups.push(PidGroupSpec {
                            desc: inner.trim().to_owned(),
                            pids,
                            events,
                        });
                    }
                    ListPart::Plain(token) => {
                        for pid in parse_pid_list(token, item)? {
                            groups.push(PidGroupSpec {
                                desc: pid.to_string(),
                                pids: vec![pid],
                                events,
                            });
                        }
                    }
                }
            }
            if groups.len() == before {
                return Err(err(format!(
                    "No process id selected for monitoring in \"{item}\" ({EVTPIDS_RULE})"
                )));
            }
        }
        Ok(Self::Groups(groups))
    }
}

/// Merges `-p` groups as pqos does: a group listed twice with the same ids gets the union
/// of its events; an id in two different groups is an error.
///
/// # Errors
/// pqos's `Error: cannot monitor same pids in different groups`, naming the id and both
/// groups.
pub fn merge_pid_groups(
    groups: impl IntoIterator<Item = PidGroupSpec>,
) -> Result<Vec<PidGroupSpec>, ArgError> {
    let mut out: Vec<PidGroupSpec> = Vec::new();
    for g in groups {
        if let Some(same) = out.iter_mut().find(|o| o.pids == g.pids) {
            same.events |= g.events;
            continue;
        }
        if let Some((other, pid)) = out
            .iter()
            .find_map(|o| g.pids.iter().find(|p| o.pids.contains(p)).map(|p| (o, *p)))
        {
            return Err(err(format!(
                "Error: cannot monitor same pids in different groups: pid {pid} is in group \"{}\" and group \"{}\"",
                other.desc, g.desc
            )));
        }
        out.push(g);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// -t and -i
// ---------------------------------------------------------------------------------------

/// `-t SECONDS|inf|infinite`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonTime {
    /// Stop after this long.
    Limited(Duration),
    /// Run until interrupted (pqos's default).
    Infinite,
}

impl FromStr for MonTime {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("inf") || t.eq_ignore_ascii_case("infinite") {
            return Ok(Self::Infinite);
        }
        parse_u64(t)
            .map(|secs| Self::Limited(Duration::from_secs(secs)))
            .map_err(|e| err(format!("{e} (expected SECONDS, inf or infinite)")))
    }
}

/// `-i N`: the sampling interval, N × 100 ms, N ≥ 1 (pqos/main.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval(pub Duration);

impl FromStr for Interval {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, ArgError> {
        let n =
            parse_u64(s).map_err(|e| err(format!("{e} (expected N >= 1, in units of 100 ms)")))?;
        if n == 0 {
            return Err(err(format!(
                "Invalid monitoring interval '{s}': N must be at least 1 (N x 100 ms)"
            )));
        }
        let ms = n
            .checked_mul(100)
            .filter(|ms| *ms <= 24 * 3600 * 1000)
            .ok_or_else(|| err(format!("Invalid monitoring interval '{s}': too long")))?;
        Ok(Self(Duration::from_millis(ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        s.parse().unwrap()
    }

    fn e(s: &str) -> String {
        s.parse::<ClassDefs>().unwrap_err().to_string()
    }

    #[test]
    fn numbers_are_decimal_unless_0x() {
        assert_eq!(parse_u64("255"), Ok(255));
        assert_eq!(parse_u64("0xff"), Ok(255));
        assert_eq!(parse_u64("0XFF"), Ok(255));
        assert!(
            parse_u64("")
                .unwrap_err()
                .0
                .contains("No digits were found")
        );
        assert!(
            parse_u64("0x")
                .unwrap_err()
                .0
                .contains("No digits were found")
        );
        assert!(
            parse_u64("ff")
                .unwrap_err()
                .0
                .contains("Error converting 'ff' to unsigned number!")
        );
    }

    #[test]
    fn id_lists_are_lenient_like_strlisttotab() {
        assert_eq!(parse_id_list("0,1"), Ok(vec![0, 1]));
        assert_eq!(parse_id_list("3-1,,1"), Ok(vec![1, 2, 3]));
        assert!(parse_id_list("1-").is_err());
        assert_eq!(parse_id_list(""), Ok(vec![]));
    }

    #[test]
    fn seed_paper_class_definition_parses() {
        let d: ClassDefs = "llc:1=0xffe00;llc:2=0x00003".parse().unwrap();
        assert_eq!(d.0.len(), 2);
        assert_eq!(d.0[0].kind, AllocKind::L3);
        assert_eq!(d.0[0].ids, None);
        assert_eq!(d.0[0].values[0].class, ClassId::new(1));
        assert_eq!(d.0[0].values[0].value, 0xffe00);
        assert_eq!(d.0[1].values[0].value, 3);
    }

    #[test]
    fn class_definitions_with_ids_cdp_l2_and_mba_parse() {
        let d: ClassDefs = "llc@0,1:1=0xf".parse().unwrap();
        assert_eq!(d.0[0].ids, Some(vec![0, 1]));
        let d: ClassDefs = "llc@0-1:2=0xff00".parse().unwrap();
        assert_eq!(d.0[0].ids, Some(vec![0, 1]));
        let d: ClassDefs = "llc:1d=0xf,1c=0xf0".parse().unwrap();
        assert_eq!(d.0[0].values[0].scope, MaskScope::Data);
        assert_eq!(d.0[0].values[1].scope, MaskScope::Code);
        assert_eq!(d.0[0].values[1].value, 0xf0);
        let d: ClassDefs = "l2@2:1=0xf".parse().unwrap();
        assert_eq!(
            (d.0[0].kind, d.0[0].ids.clone()),
            (AllocKind::L2, Some(vec![2]))
        );
        let d: ClassDefs = "mba@1:3=80".parse().unwrap();
        assert_eq!((d.0[0].kind, d.0[0].values[0].value), (AllocKind::Mba, 80));
        let d: ClassDefs = "LLC:1=255;".parse().unwrap();
        assert_eq!(
            d.0[0].values[0].value, 255,
            "decimal unless 0x; trailing ';' skipped"
        );
    }

    #[test]
    fn class_definition_errors_name_the_token() {
        let m = e("llc1=");
        assert!(
            m.starts_with("Unrecognized allocation format: \"llc1=\""),
            "{m}"
        );
        let m = e("llc:1");
        assert!(
            m.contains("Invalid class of service definition: \"1\""),
            "{m}"
        );
        let m = e("llc:1=");
        assert!(
            m.contains("No digits were found") && m.contains("llc:1="),
            "{m}"
        );
        let m = e("llc@:1=0xf");
        assert!(
            m.starts_with("No resource ID specified: \"llc@:1=0xf\""),
            "{m}"
        );
        let m = e("foo:1=0xf");
        assert!(
            m.starts_with("Unrecognized allocation type: \"foo\""),
            "{m}"
        );
        let m = e("llc:1=0xzz");
        assert!(m.contains("'0xzz'") && m.contains("llc:1=0xzz"), "{m}");
        let m = e("llc:1=0");
        assert!(m.contains("zero mask") && m.contains("llc:1=0"), "{m}");
        let m = e("mba:1d=50");
        assert!(m.contains("mba:1d=50") && m.contains("suffix"), "{m}");
        let m = e("llc:x=0xf");
        assert!(m.contains("'x'") && m.contains("llc:x=0xf"), "{m}");
    }

    #[test]
    fn associations_parse() {
        let a: AssocDefs = "llc:1=2-7;llc:2=8-10".parse().unwrap();
        assert_eq!(a.0[0].class, ClassId::new(1));
        assert_eq!(a.0[0].target, AssocTarget::Cores(cpus("2-7")));
        assert_eq!(a.0[1].target, AssocTarget::Cores(cpus("8-10")));
        let a: AssocDefs = "cos:1=0,2".parse().unwrap();
        assert_eq!(a.0[0].target, AssocTarget::Cores(cpus("0,2")));
        let a: AssocDefs = "core:1=3".parse().unwrap();
        assert_eq!(a.0[0].target, AssocTarget::Cores(cpus("3")));
        let a: AssocDefs = "pid:2=1234,5678".parse().unwrap();
        assert_eq!(
            a.0[0].target,
            AssocTarget::Pids(vec![TaskId::new(1234), TaskId::new(5678)])
        );
        let a: AssocDefs = "llc:1=0-1;pid:2=5678-5677,9;core:3=4".parse().unwrap();
        assert_eq!(a.0.len(), 3, "core and pid items mix in one -a");
        assert_eq!(
            a.0[1].target,
            AssocTarget::Pids(vec![TaskId::new(5677), TaskId::new(5678), TaskId::new(9)])
        );
        // PIDs go beyond every CPU number, up to the kernel's pid_max limit
        let a: AssocDefs = "pid:1=4194304".parse().unwrap();
        assert_eq!(
            a.0[0].target,
            AssocTarget::Pids(vec![TaskId::new(4_194_304)])
        );
        let m = "pid:1=4194305".parse::<AssocDefs>().unwrap_err().0;
        assert!(
            m.contains("task id 4194305") && m.contains("pid:1=4194305"),
            "{m}"
        );
        let m = "pid:1=1-300000".parse::<AssocDefs>().unwrap_err().0;
        assert!(m.contains("more than 262144 task ids"), "{m}");
        let m = "pid:1=".parse::<AssocDefs>().unwrap_err().0;
        assert!(m.contains("No task id specified"), "{m}");
    }

    #[test]
    fn association_errors_name_the_token() {
        let m = "llc:1=2-".parse::<AssocDefs>().unwrap_err().0;
        assert!(m.contains("`2-`") && m.contains("llc:1=2-"), "{m}");
        let m = "llc:1=7-2x".parse::<AssocDefs>().unwrap_err().0;
        assert!(m.contains("`7-2x`"), "{m}");
        let m = "llc1=2".parse::<AssocDefs>().unwrap_err().0;
        assert!(
            m.starts_with("Unrecognized allocation type: \"llc1=2\""),
            "{m}"
        );
        let m = "llc:1".parse::<AssocDefs>().unwrap_err().0;
        assert!(m.contains("has no '='"), "{m}");
        let m = "dev:1=0000:00:20.0".parse::<AssocDefs>().unwrap_err().0;
        assert!(
            m.contains("Invalid PCI ID") && m.contains("0000:00:20.0"),
            "{m}"
        );
        let m = "dev:1=16:00.0@8".parse::<AssocDefs>().unwrap_err().0;
        assert!(
            m.contains("Virtual channel 8 is out of range [0, 7]"),
            "{m}"
        );
        let m = "channel:1=0".parse::<AssocDefs>().unwrap_err().0;
        assert!(m.contains("non-zero id"), "{m}");
    }

    #[test]
    fn channel_monitoring_groups_parse_as_the_m_grammar_with_channel_ids() {
        let EvtChannels(g) = "llc:0x10100,65793;all:[0x20100, 0x20101]"
            .parse::<EvtChannels>()
            .unwrap();
        let got: Vec<(&str, Vec<u32>, MonEvents)> = g
            .iter()
            .map(|g| {
                (
                    g.desc.as_str(),
                    g.targets
                        .iter()
                        .map(|t| match t {
                            AssocTarget::Channel(c) => c.get(),
                            _ => 0,
                        })
                        .collect(),
                    g.events,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("0x10100", vec![0x10100], MonEvents::LLC_OCCUPANCY),
                ("0x10101", vec![0x10101], MonEvents::LLC_OCCUPANCY),
                (
                    "0x20100, 0x20101",
                    vec![0x20100, 0x20101],
                    MonEvents::PQOS_ALL
                ),
            ]
        );
        for (bad, want) in [
            ("llc:", "No channels selected"),
            ("llc:0", "non-zero id"),
            ("llc:0x1g", "non-zero id"),
            ("llc:[]", "Empty channel group"),
            ("xyz:0x10100", "Unrecognized monitoring event type"),
            ("", "Empty monitoring selection"),
        ] {
            let e = bad.parse::<EvtChannels>().unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn io_rdt_associations_parse_as_pqos_takes_them() {
        let a = "channel:3=0x10101;dev:2=0000:96:00.0;dev:5=96:01.0@1"
            .parse::<AssocDefs>()
            .unwrap()
            .0;
        assert_eq!(
            a[0].target,
            AssocTarget::Channel(rdt_pqos::ChannelId::from_raw(0x10101))
        );
        assert_eq!(a[0].class, ClassId::new(3));
        assert_eq!(
            a[1].target,
            AssocTarget::Device {
                segment: 0,
                bdf: 0x9600,
                vc: None
            }
        );
        assert_eq!(
            a[2].target,
            AssocTarget::Device {
                segment: 0,
                bdf: 0x9608,
                vc: Some(1)
            }
        );
        // pqos's strtouint64: decimal as well
        let a = "channel:1=65792".parse::<AssocDefs>().unwrap().0;
        assert_eq!(
            a[0].target,
            AssocTarget::Channel(rdt_pqos::ChannelId::from_raw(0x10100))
        );
    }

    #[test]
    fn reset_options_parse_case_insensitively() {
        assert_eq!("".parse::<ResetCfg>(), Ok(ResetCfg::default()));
        let c: ResetCfg = "l3cdp-on,L2CDP-off,mbaCtrl-any".parse().unwrap();
        assert_eq!(c.0.l3_cdp, FeatureSetting::On);
        assert_eq!(c.0.l2_cdp, FeatureSetting::Off);
        assert_eq!(c.0.mba_ctrl, FeatureSetting::Any);
        let m = "l3cdp-maybe".parse::<ResetCfg>().unwrap_err().0;
        assert!(
            m.starts_with("Unrecognized 'l3cdp-maybe' allocation reset option!"),
            "{m}"
        );
        assert!("snc-any".parse::<MonResetCfg>().is_ok());
        assert_eq!(
            "snc-local,L3IORDT-on".parse::<MonResetCfg>().unwrap().0,
            MonReset {
                l3_iordt: FeatureSetting::On,
                snc: Some(SncMode::Local)
            }
        );
    }

    #[test]
    fn monitoring_groups_follow_pqos_grouping() {
        let m: EvtCores = "all:0-3".parse().unwrap();
        assert_eq!(m.0.len(), 4, "ungrouped cores are one group each");
        assert_eq!(m.0[2].desc, "2");
        let m: EvtCores = "all:[0-3]".parse().unwrap();
        assert_eq!(m.0.len(), 1);
        assert_eq!((m.0[0].desc.as_str(), &m.0[0].cpus), ("0-3", &cpus("0-3")));
        let m: EvtCores = "llc:[0-3];all:[4,5,6];mbr:[7-8],9,10".parse().unwrap();
        let descs: Vec<&str> = m.0.iter().map(|g| g.desc.as_str()).collect();
        assert_eq!(descs, ["0-3", "4,5,6", "7-8", "9", "10"]);
        assert_eq!(m.0[2].events, MonEvents::MBM_REMOTE);
        let m: EvtCores = ":1".parse().unwrap();
        assert_eq!(m.0[0].events, MonEvents::PQOS_ALL);
    }

    #[test]
    fn identical_groups_merge_events_and_overlaps_are_errors() {
        let m: EvtCores = "llc:0-3;mbl:0-3".parse().unwrap();
        let g = merge_groups(m.0).unwrap();
        assert_eq!(g.len(), 4);
        assert_eq!(g[0].events, MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL);
        let m: EvtCores = "llc:[0-3];mbl:0".parse().unwrap();
        let e = merge_groups(m.0).unwrap_err().0;
        assert!(
            e.starts_with("Error: cannot monitor same cores in different groups"),
            "{e}"
        );
        assert!(e.contains("core 0") && e.contains("\"0-3\""), "{e}");
    }

    #[test]
    fn monitoring_errors_name_the_token() {
        let m = "foo:0-3".parse::<EvtCores>().unwrap_err().0;
        assert!(
            m.starts_with("Unrecognized monitoring event type \"foo\""),
            "{m}"
        );
        let m = "0-3".parse::<EvtCores>().unwrap_err().0;
        assert!(m.starts_with("Unrecognized monitoring event type"), "{m}");
        let m = "all:[0-3".parse::<EvtCores>().unwrap_err().0;
        assert!(m.contains("Missing ']'"), "{m}");
        let m = "all:2-".parse::<EvtCores>().unwrap_err().0;
        assert!(m.contains("`2-`"), "{m}");
        let m = "all:".parse::<EvtCores>().unwrap_err().0;
        assert!(m.contains("No cores selected"), "{m}");
    }

    fn pid_groups(s: &str) -> Vec<PidGroupSpec> {
        match s.parse::<EvtPids>().unwrap() {
            EvtPids::Groups(g) => g,
            EvtPids::Top => panic!("top"),
        }
    }

    fn tasks(ids: &[u32]) -> Vec<TaskId> {
        ids.iter().copied().map(TaskId::new).collect()
    }

    #[test]
    fn pid_lists_give_one_group_per_pid_or_per_bracket() {
        let g = pid_groups("all:1234,5678");
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].desc.as_str(), &g[0].pids), ("1234", &tasks(&[1234])));
        assert_eq!(g[1].events, MonEvents::PQOS_ALL);
        let g = pid_groups("llc:[1234,5678];mbl:7,9-8");
        let descs: Vec<&str> = g.iter().map(|g| g.desc.as_str()).collect();
        assert_eq!(descs, ["1234,5678", "7", "8", "9"]);
        assert_eq!(g[0].pids, tasks(&[1234, 5678]));
        assert_eq!(g[0].events, MonEvents::LLC_OCCUPANCY);
        assert_eq!(pid_groups("all:[30-28,28]")[0].pids, tasks(&[28, 29, 30]));
        assert_eq!("".parse::<EvtPids>().unwrap(), EvtPids::Top);
    }

    #[test]
    fn pid_list_errors_name_the_token() {
        let m = "all:12x".parse::<EvtPids>().unwrap_err().0;
        assert!(m.contains("'12x'") && m.contains("all:12x"), "{m}");
        let m = "all:[]".parse::<EvtPids>().unwrap_err().0;
        assert!(m.contains("Empty process group"), "{m}");
        let m = "cpu:1".parse::<EvtPids>().unwrap_err().0;
        assert!(
            m.starts_with("Unrecognized monitoring event type \"cpu\""),
            "{m}"
        );
        let m = "all:1-300000".parse::<EvtPids>().unwrap_err().0;
        assert!(
            m.contains("Exceeded parser capacity of 262144 entries"),
            "{m}"
        );
    }

    #[test]
    fn same_pid_in_two_groups_is_refused_and_same_group_merges() {
        let g = merge_pid_groups(pid_groups("llc:5;mbl:5")).unwrap();
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].events, MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL);
        let e = merge_pid_groups(pid_groups("llc:[5,6];mbl:6"))
            .unwrap_err()
            .0;
        assert_eq!(
            e,
            "Error: cannot monitor same pids in different groups: pid 6 is in group \"5,6\" and group \"6\""
        );
    }

    #[test]
    fn time_and_interval() {
        assert_eq!("inf".parse(), Ok(MonTime::Infinite));
        assert_eq!("INFINITE".parse(), Ok(MonTime::Infinite));
        assert_eq!("3".parse(), Ok(MonTime::Limited(Duration::from_secs(3))));
        assert_eq!("5".parse(), Ok(Interval(Duration::from_millis(500))));
        assert!(
            "0".parse::<Interval>()
                .unwrap_err()
                .0
                .contains("at least 1")
        );
        assert!("x".parse::<MonTime>().is_err());
    }

    #[test]
    fn refused_classdefs_get_pqos_stdout_lines() {
        for (arg, want) in [
            ("llc1=0xf", Some("Unrecognized allocation format: llc1=0xf")),
            (
                "llc:1=0xf;foo:1=0xf",
                Some("Unrecognized allocation type: foo:1=0xf"),
            ),
            ("llc@:1=0xf", Some("No resource ID specified: llc@:1=0xf")),
            ("llc:1", Some("Invalid class of service definition: 1")),
            (
                "llc:1=0xf,2",
                Some("Invalid class of service definition: 2"),
            ),
            ("llc:1=0", Some("Failed to set L3 CAT configuration!")),
            ("l2:1=0x0", Some("Failed to set L2 CAT configuration!")),
            ("mba:1=0", Some("Failed to set MBA configuration!")),
            ("llc:1=0xzz", None),
            ("llc:1=0xf", None),
        ] {
            let got = classdefs_pqos_failure(arg);
            assert_eq!(
                got,
                want.map(|l| format!("{l}\nAllocation configuration error!\n")),
                "{arg}"
            );
        }
    }

    /// Every value grammar of the command line: any text parses or is an error quoting the
    /// value or one of its tokens, never a panic (numbers beyond 64 bits, `é`, empty items).
    #[test]
    fn fuzz_every_value_grammar_never_panics_and_errors_quote_a_token() {
        use proptest::prelude::*;
        use rdt_pqos::fake::fuzz::{fuzz, names_a_token, text};
        const WORDS: &[&str] = &[
            "llc",
            "l2",
            "mba",
            "mba_max",
            "smba",
            "code",
            "data",
            "all",
            "mbl",
            "mbr",
            "mbt",
            "ipc",
            "llc_miss",
            "llc_ref",
            ":",
            ";",
            "=",
            ",",
            "@",
            "-",
            "[",
            "]",
            "0x",
            "0",
            "1",
            "15",
            "0xffe00",
            "4294967296",
            "inf",
            "l3cdp-on",
            "mem-bw",
            " ",
        ];
        const SEPARATORS: &[char] = &[';', ':', '=', ',', '@', '[', ']', '-'];
        fn check<T: FromStr<Err = ArgError>>(t: &str) -> Result<(), TestCaseError> {
            if let Err(e) = t.parse::<T>() {
                let m = e.to_string();
                prop_assert!(
                    names_a_token(&m, t, SEPARATORS) || (t.trim().is_empty() && !m.is_empty()),
                    "{m} for {t:?}"
                );
            }
            Ok(())
        }
        fuzz("-e ClassDefs", text(WORDS, 16), |t| check::<ClassDefs>(&t));
        fuzz("-a AssocDefs", text(WORDS, 16), |t| check::<AssocDefs>(&t));
        fuzz("-R ResetCfg", text(WORDS, 6), |t| check::<ResetCfg>(&t));
        fuzz("-r MonResetCfg", text(WORDS, 6), |t| {
            check::<MonResetCfg>(&t)
        });
        fuzz("-m EvtCores", text(WORDS, 16), |t| check::<EvtCores>(&t));
        fuzz("-p EvtPids", text(WORDS, 16), |t| check::<EvtPids>(&t));
        fuzz("--mon-uncore EvtSockets", text(WORDS, 16), |t| {
            check::<EvtSockets>(&t)
        });
        fuzz("-t MonTime", text(WORDS, 3), |t| check::<MonTime>(&t));
        fuzz("-i Interval", text(WORDS, 3), |t| check::<Interval>(&t));
        fuzz("parse_id_list", text(WORDS, 8), |t| {
            if let Err(e) = parse_id_list(&t) {
                let m = e.to_string();
                prop_assert!(names_a_token(&m, &t, SEPARATORS), "{m} for {t:?}");
            }
            Ok(())
        });
    }

    /// pqos `selfn_monitor_uncore`: no value = every socket; `EVENT:LIST` as `-m` with
    /// socket ids; an empty value is pqos's "Empty string!"; a socket in two groups is
    /// `grp_add`'s error.
    #[test]
    fn evt_sockets_follow_pqos_mon_uncore() {
        assert_eq!(
            EvtSockets::MISSING.parse::<EvtSockets>().unwrap(),
            EvtSockets::EverySocket
        );
        let EvtSockets::Groups(g) = "all:0,1;all:[2-3]".parse::<EvtSockets>().unwrap() else {
            panic!("groups")
        };
        let got: Vec<(&str, &[u32])> = g
            .iter()
            .map(|g| (g.desc.as_str(), &g.sockets[..]))
            .collect();
        assert_eq!(
            got,
            [("0", &[0][..]), ("1", &[1][..]), ("2-3", &[2, 3][..])]
        );
        assert!(g.iter().all(|g| g.events == MonEvents::PQOS_ALL));
        assert!(
            "".parse::<EvtSockets>()
                .unwrap_err()
                .to_string()
                .starts_with("Empty string!")
        );
        assert!("foo:0".parse::<EvtSockets>().is_err());
        let e = merge_socket_groups(g.into_iter().chain([SocketGroupSpec {
            desc: "1-2".into(),
            sockets: vec![1, 2],
            events: MonEvents::PQOS_ALL,
        }]))
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Error: cannot monitor same sockets in different groups: socket 1"),
            "{e}"
        );
    }
}
