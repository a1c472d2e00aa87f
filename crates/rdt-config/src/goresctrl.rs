//! goresctrl's RDT configuration (YAML), as containerd and CRI-O read it, resolved into the
//! masks and limits goresctrl would write and planned as one transaction.
//!
//! ```yaml
//! options:
//!   l3: { optional: true }
//! partitions:
//!   exclusive:
//!     l3Allocation: "60%"          # or "0xff0", "4-11", or per cache id: {all: "60%", "2-3": "20%"}
//!     mbAllocation: ["100%"]       # percent, and/or "1000MBps" for resctrl's mba_MBps
//!     classes:
//!       guaranteed:
//!         l3Allocation: "100%"     # of the partition's ways
//!   shared:
//!     l3Allocation: "40%"
//!     mbAllocation: ["50%"]
//!     classes:
//!       burstable:
//!       besteffort:
//!         l3Allocation: "50%"
//!       system/default:            # the resctrl root ("" too)
//!         l3Allocation: "30%"
//! ```
//!
//! Three steps, as for the TOML form ([`super::Config`]):
//! 1. [`GoresctrlConfig::parse_yaml`] / [`GoresctrlConfig::load`] read the file and check
//!    everything that needs no platform (keys, value syntax, percentages of at most 100,
//!    contiguous masks, class names).
//! 2. [`GoresctrlConfig::resolve`] reproduces goresctrl's arithmetic (`pkg/rdt/config.go`)
//!    on a [`GoresctrlPlatform`]: the masks and MBA values of every class, per cache level,
//!    cache id and CDP type.
//! 3. [`GoresctrlConfig::plan`] turns them into a [`ConfigPlan`] on a backend, the same
//!    transaction `pqos --apply` makes of the TOML form: all-or-nothing, and the writes of
//!    what already matches left out.
//!
//! # goresctrl's arithmetic
//! Per cache level (L2, L3), cache id and type (`unified`, `code`, `data`):
//! - Partitions are taken in the order of their names (Go's `sort.Strings`: bytewise). Either
//!   all give a percentage or all give an absolute mask; a partition without the level when
//!   another has it, or a percentage range (`"20-50%"`), is an error.
//! - Percentages: the percentages must add up to at most 100. `bits_total = total% × cbm_len
//!   / 100`; partitions are granted bits smallest request first (a stable sort, as Go's
//!   insertion sort is for up to 12 partitions): `req × available / (available × total% /
//!   bits_total)`, rounded down, at least `min_cbm_bits`, and the last one takes what is left.
//!   The masks are then laid out from bit 0 upwards in name order.
//! - Absolute masks are used as written and must not overlap.
//! - A class's allocation is relative to its partition's mask in that cache id: a
//!   percentage `p` is bits `(p_low − 1) × n / 100 ..= (p − 1) × n / 100` of the partition's
//!   `n` bits (`p_low` is 1, or the low end of a range), widened to `min_cbm_bits` downwards
//!   first; an absolute mask is shifted to the partition's lowest bit and must fit in it. A
//!   class without the level gets the partition's whole mask; with no partition allocating
//!   the level, the partition "mask" is all ways.
//! - `code`/`data` fall back to `unified`; with CDP off only `unified` is written, with CDP
//!   on only `code` and `data`.
//! - MBA, percent mode: a partition's value (at least `min_bandwidth`), a class's
//!   `class% × partition / 100` (at least `min_bandwidth`); `mba_MBps` mode: the class's
//!   MBps capped at the partition's; no value means 100% / `u32::MAX` MBps. The first value
//!   of the mode in force is used; values of another unit are ignored, others warned about.
//!
//! # What is not expressed, and differences from goresctrl
//! - `kubernetes` class options (`denyPodAnnotation`, `denyContainerAnnotation`) are read
//!   into [`Class`]; they write nothing to resctrl. The NRI plugin (`rdt_nri`, `rdt-agent
//!   nri`) honours them as goresctrl does when it places containers.
//! - goresctrl's group name prefix (`rdt.Initialize(resctrlGroupPrefix)`) is chosen by the
//!   program embedding it (containerd, CRI-O), not by the file: here it is
//!   [`GroupOptions::prefix`] (`pqos --apply FILE --group-prefix P`). Every class's group
//!   is the prefix and the class name; the root has none.
//! - goresctrl removes every group with its prefix that a new configuration no longer
//!   names, with an empty prefix every group it finds, another tool's too. Here removal is
//!   asked for ([`GroupOptions::prune`], `--prune`) and takes only the named classes this
//!   library made ([`BackendExt::own_class_names`]) whose names have the prefix: never a
//!   group another tool made. Like goresctrl (without `force`), a stale group that still
//!   holds tasks is refused, naming it; its CPUs go back to the root, as the kernel's
//!   `rmdir` moves them. goresctrl also resets the root when the file does not configure
//!   it; this import changes the root only when the file names it.
//! - The MBA values are rounded to the hardware's granularity as the interface stores them
//!   ([`rdt_core::MbaCaps::stored_limit`]: up on the OS interface, as the kernel's
//!   `bw_validate()` does; half up on MSR, as pqos does), so that applying the file twice
//!   writes nothing the second time.
//! - Stricter than goresctrl: unknown keys are errors (Go's JSON decoding ignores them);
//!   keys match case-insensitively, as Go's does. MBA percentages over 100 are refused
//!   (goresctrl passes them to the kernel); every MBA value is checked, not only those of
//!   the unit in force. YAML is read as YAML 1.2 (`yes`/`on` are strings, not booleans).
//! - `options.*.optional` defaults to `false` (required), as goresctrl's code has it (its
//!   documentation says the default is `true`).
//! - On AMD, resctrl's MB values are bandwidth units, which goresctrl has no form for: the
//!   platform counts as having no MBA (an `mbAllocation` is refused unless
//!   `options.mb.optional` is set, then skipped).
//!
//! # References
//! - goresctrl, `pkg/rdt/config.go` and `doc/rdt.md` (github.com/intel/goresctrl).
//! - Linux `Documentation/arch/x86/resctrl.rst`; `fs/resctrl/ctrlmondata.c` `bw_validate()`.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use super::error::Location;
use super::node::{self, Entry, Format, Node, Value};
use super::parse::name_problem;
use super::{ConfigError, ConfigErrorKind, ConfigPlan, ConfigPlanError, ConfigWarning};
use rdt_core::BackendExt;
use rdt_core::transaction::{Change, MaskScope, Plan, PlanError, PlanWarning};
use rdt_core::{
    Backend, BackendError, CacheBitmask, CacheDomain, Capabilities, CatResource, ClassId, MbaKind,
    MbaLimit, Topology,
};

/// The names goresctrl gives the resctrl root: `system/default` (its `RootClassName`), `""`
/// (`RootClassAlias`), `DEFAULT` (its documentation) and `SYSTEM_DEFAULT` (goresctrl ≤ 0.2).
pub const ROOT_NAMES: [&str; 4] = ["system/default", "", "DEFAULT", "SYSTEM_DEFAULT"];

/// A goresctrl configuration, parsed ([`GoresctrlConfig::parse_yaml`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoresctrlConfig {
    /// The file it came from.
    pub file: PathBuf,
    /// `options.l2.optional`, `options.l3.optional`, `options.mb.optional`.
    pub optional: Optional,
    /// The partitions, in goresctrl's order (by name, bytewise).
    pub partitions: Vec<Partition>,
    /// What the file says that has no effect here, as warnings of the plan.
    pub notes: Vec<ConfigWarning>,
}

/// How a goresctrl configuration's classes become resctrl groups: what goresctrl takes from
/// the program that embeds it rather than from the file (`rdt.Initialize(prefix)` and the
/// removal of stale groups in `configureResctrl`, goresctrl `pkg/rdt/rdt.go`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupOptions {
    /// Put before every class's name to make its group's (`"cri-"`: class `Guaranteed` is
    /// group `cri-Guaranteed`); the root's names are never prefixed. The record of named
    /// classes keeps the whole group name, so a later run with the same prefix finds them.
    pub prefix: String,
    /// Also remove the named classes this library made whose names start with
    /// [`GroupOptions::prefix`] and that the file no longer names, in the same
    /// transaction ([`GoresctrlConfig::plan_with`]).
    pub prune: bool,
}

impl GroupOptions {
    /// The group name of class `name` (the root's names as they are).
    #[must_use]
    pub fn group_name(&self, name: &str) -> String {
        if ROOT_NAMES.contains(&name) {
            name.to_owned()
        } else {
            format!("{}{name}", self.prefix)
        }
    }
}

/// A named class [`GroupOptions::prune`] takes away, with the changes that do.
struct Stale {
    class: ClassId,
    name: String,
    changes: Vec<Change>,
}

/// `options.*.optional`: a resource the platform lacks is skipped instead of refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Optional {
    /// L2 CAT.
    pub l2: bool,
    /// L3 CAT.
    pub l3: bool,
    /// MBA.
    pub mb: bool,
}

/// Where a value is: its dotted key path in the file and its line.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct At {
    /// `partitions.exclusive.l3Allocation.all`.
    pub path: String,
    /// 1-based line.
    pub line: usize,
}

/// One partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Its name.
    pub name: String,
    /// `l2Allocation`.
    pub l2: Option<CatAllocation>,
    /// `l3Allocation`.
    pub l3: Option<CatAllocation>,
    /// `mbAllocation`.
    pub mb: Option<MbAllocation>,
    /// Its classes, by name.
    pub classes: Vec<Class>,
    /// Where the partition is.
    pub at: At,
}

/// One class (a resctrl control group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Class {
    /// Its name as written (one of [`ROOT_NAMES`] for the root).
    pub name: String,
    /// `l2Allocation`, relative to the partition's.
    pub l2: Option<CatAllocation>,
    /// `l3Allocation`, relative to the partition's.
    pub l3: Option<CatAllocation>,
    /// `mbAllocation`, relative to the partition's.
    pub mb: Option<MbAllocation>,
    /// `kubernetes.denyPodAnnotation`: the pod annotations may not name this class (an NRI
    /// plugin honours it, `rdt_nri`; nothing is written for it).
    pub deny_pod_annotation: bool,
    /// `kubernetes.denyContainerAnnotation`: the container annotation may not name this
    /// class (as [`Class::deny_pod_annotation`]).
    pub deny_container_annotation: bool,
    /// Where the class is.
    pub at: At,
}

impl Class {
    /// Whether the class is the resctrl root.
    #[must_use]
    pub fn is_root(&self) -> bool {
        ROOT_NAMES.contains(&self.name.as_str())
    }
}

/// A share of a cache: goresctrl's `CacheProportion`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proportion {
    /// `"60%"`, 0 to 100.
    Percent(u8),
    /// `"20-50%"` (classes only), low ≤ high ≤ 100.
    Range(u8, u8),
    /// `"0xff0"` or bit numbers `"4-11"`: one contiguous block of bits.
    Mask(u64),
}

impl fmt::Display for Proportion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Percent(p) => write!(f, "{p}%"),
            Self::Range(l, h) => write!(f, "{l}-{h}%"),
            Self::Mask(m) => write!(f, "{m:#x}"),
        }
    }
}

/// The allocation of one set of cache ids: `unified`, and `code` with `data` for CDP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheIdAllocation {
    /// Used with CDP off, and for code and data when they are not given.
    pub unified: (Proportion, At),
    /// Code and data (both or neither).
    pub cdp: Option<[(Proportion, At); 2]>,
}

impl CacheIdAllocation {
    fn get(&self, typ: CdpType) -> &(Proportion, At) {
        match (typ, &self.cdp) {
            (CdpType::Code, Some([code, _])) => code,
            (CdpType::Data, Some([_, data])) => data,
            _ => &self.unified,
        }
    }
}

/// Which cache ids an entry is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheIds {
    /// `all`: the default for the ids not named.
    All,
    /// `0,2-3`: the ids as ranges, sorted, none overlapping or adjacent another (`0-65535`
    /// is one range, not 65,536 ids: a key's size bounds its memory).
    List(Vec<RangeInclusive<u32>>),
}

impl CacheIds {
    /// Whether `id` is one of these ids (`All`: every id).
    #[must_use]
    pub fn contains(&self, id: u32) -> bool {
        match self {
            Self::All => true,
            Self::List(ranges) => {
                // The first range ending at or after `id` is the only one that may hold it.
                let i = ranges.partition_point(|r| *r.end() < id);
                ranges.get(i).is_some_and(|r| r.contains(&id))
            }
        }
    }
}

/// `l2Allocation` or `l3Allocation`: entries by cache ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatAllocation {
    /// The entries, in file order.
    pub entries: Vec<(CacheIds, CacheIdAllocation)>,
    /// Where the key is.
    pub at: At,
}

impl CatAllocation {
    /// The entry in force for `id`: the last entry naming it, else `all`, else `None`
    /// (goresctrl's default, 100%).
    fn for_id(&self, id: u32) -> Option<&CacheIdAllocation> {
        self.entries
            .iter()
            .rev()
            .find(|(ids, _)| matches!(ids, CacheIds::List(_)) && ids.contains(id))
            .or_else(|| {
                self.entries
                    .iter()
                    .find(|(ids, _)| matches!(ids, CacheIds::All))
            })
            .map(|(_, a)| a)
    }
}

/// One value of an `mbAllocation` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MbValue {
    /// `"50%"`.
    Percent(u32),
    /// `"1000MBps"`.
    Mbps(u32),
    /// Any other unit: ignored (goresctrl logs "unrecognized MBA allocation unit").
    Other(String),
}

/// `mbAllocation`: value lists by cache ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MbAllocation {
    /// The entries, in file order.
    pub entries: Vec<(CacheIds, Vec<MbValue>, At)>,
    /// Where the key is.
    pub at: At,
}

/// A CDP type of a cache allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum CdpType {
    Unified,
    Code,
    Data,
}

impl CdpType {
    const ALL: [Self; 3] = [Self::Unified, Self::Code, Self::Data];

    const fn name(self) -> &'static str {
        match self {
            Self::Unified => "unified",
            Self::Code => "code",
            Self::Data => "data",
        }
    }
}

/// What [`GoresctrlConfig::resolve`] needs of a platform.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GoresctrlPlatform {
    /// L2 CAT, if present.
    pub l2: Option<CatLevel>,
    /// L3 CAT, if present.
    pub l3: Option<CatLevel>,
    /// MBA, if present.
    pub mb: Option<MbLevel>,
}

/// One cache level of a [`GoresctrlPlatform`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatLevel {
    /// Bits of the capacity bitmask (`info/L3/cbm_mask`'s width).
    pub cbm_len: u32,
    /// `info/L3/min_cbm_bits`.
    pub min_cbm_bits: u32,
    /// The cache ids.
    pub domains: Vec<CacheDomain>,
    /// CDP is on (`L3CODE`/`L3DATA`).
    pub cdp: bool,
}

/// MBA of a [`GoresctrlPlatform`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MbLevel {
    /// The MBA domains (L3 cache ids).
    pub domains: Vec<CacheDomain>,
    /// resctrl is mounted with `mba_MBps`.
    pub mbps: bool,
    /// `info/MB/min_bandwidth`, in percent.
    pub min_bandwidth: u32,
    /// `info/MB/bandwidth_gran`, in percent.
    pub granularity: u32,
}

impl GoresctrlPlatform {
    /// The platform of `caps` and `topology`. Intel's MBA minimum is its granularity
    /// (`100 − max_delay`, the kernel's `min_bw` and `bw_gran`); AMD's MBA is left out
    /// (its limits are not percentages).
    #[must_use]
    pub fn of(caps: &Capabilities, topology: &Topology) -> Self {
        let level = |resource: CatResource| {
            caps.cat(resource).map(|cat| CatLevel {
                cbm_len: cat.cbm_len,
                min_cbm_bits: cat.min_cbm_bits.max(1),
                domains: match resource {
                    CatResource::L3 => topology.l3_domains(),
                    CatResource::L2 => topology.l2_domains(),
                },
                cdp: cat.cdp_enabled,
            })
        };
        let mb = caps.mba.get().and_then(|mba| match mba.kind {
            MbaKind::IntelDelay { .. } => Some(MbLevel {
                domains: topology.l3_domains(),
                mbps: mba.ctrl_enabled,
                min_bandwidth: mba.granularity().max(1),
                granularity: mba.granularity().max(1),
            }),
            MbaKind::AmdBandwidth { .. } => None,
        });
        Self {
            l2: level(CatResource::L2),
            l3: level(CatResource::L3),
            mb,
        }
    }

    const fn cat(&self, resource: CatResource) -> Option<&CatLevel> {
        match resource {
            CatResource::L2 => self.l2.as_ref(),
            CatResource::L3 => self.l3.as_ref(),
        }
    }
}

/// A class's masks and limits, as goresctrl would write them ([`GoresctrlConfig::resolve`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedClass {
    /// The class's name as written.
    pub name: String,
    /// Its partition.
    pub partition: String,
    /// Cache masks by (level, cache id, scope): [`MaskScope::Both`] with CDP off,
    /// [`MaskScope::Code`] and [`MaskScope::Data`] with it on.
    pub cat: BTreeMap<(CatResource, CacheDomain, MaskScope), CacheBitmask>,
    /// MBA values by domain: percent, or MBps with `mba_MBps`.
    pub mb: BTreeMap<CacheDomain, u32>,
    /// `mb` is in MBps.
    pub mbps: bool,
    /// Where the class is.
    pub at: At,
}

impl ResolvedClass {
    /// Whether the class is the resctrl root.
    #[must_use]
    pub fn is_root(&self) -> bool {
        ROOT_NAMES.contains(&self.name.as_str())
    }

    /// The class's `schemata` as goresctrl writes it: `L2`, `L2CODE`, `L2DATA`, `L3`,
    /// `L3CODE`, `L3DATA`, `MB` lines, each `ID=VALUE` by cache id, masks in hex.
    #[must_use]
    pub fn schemata(&self) -> String {
        let mut out = String::new();
        for resource in [CatResource::L2, CatResource::L3] {
            for (scope, suffix) in [
                (MaskScope::Both, ""),
                (MaskScope::Code, "CODE"),
                (MaskScope::Data, "DATA"),
            ] {
                let items: Vec<String> = self
                    .cat
                    .iter()
                    .filter(|((r, _, s), _)| *r == resource && *s == scope)
                    .map(|((_, d, _), m)| format!("{d}={m}"))
                    .collect();
                if !items.is_empty() {
                    out.push_str(&format!("{resource}{suffix}:{}\n", items.join(";")));
                }
            }
        }
        if !self.mb.is_empty() {
            let items: Vec<String> = self.mb.iter().map(|(d, v)| format!("{d}={v}")).collect();
            out.push_str(&format!("MB:{}\n", items.join(";")));
        }
        out
    }
}

/// The result of [`GoresctrlConfig::resolve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Every class, partitions in name order and classes by name in each.
    pub classes: Vec<ResolvedClass>,
    /// What is worth telling (ignored MBA units, skipped optional resources).
    pub warnings: Vec<ConfigWarning>,
}

impl Resolved {
    /// The class called `name`.
    #[must_use]
    pub fn class(&self, name: &str) -> Option<&ResolvedClass> {
        self.classes.iter().find(|c| c.name == name)
    }
}

// ---------------------------------------------------------------------------------------
// Parsing

struct Parser<'f> {
    file: &'f Path,
    notes: Vec<ConfigWarning>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl Parser<'_> {
    fn error(&self, at: &At, message: impl Into<String>) -> ConfigError {
        ConfigError::new(
            ConfigErrorKind::Invalid,
            self.file,
            Location {
                line: Some(at.line),
                key: (!at.path.is_empty()).then(|| at.path.clone()),
                ..Location::default()
            },
            message,
        )
    }

    fn describe(node: &Node) -> String {
        node.value.describe(Format::Yaml)
    }

    /// The entries of a mapping (a null is an empty one).
    fn mapping<'n>(&self, node: &'n Node, at: &At) -> Result<&'n [Entry], ConfigError> {
        match &node.value {
            Value::Table(entries) => Ok(entries),
            Value::Null => Ok(&[]),
            _ => Err(self.error(
                at,
                format!("expected a mapping, found {}", Self::describe(node)),
            )),
        }
    }

    /// Matches `entries` against `keys` (case-insensitively, as Go's JSON decoding does);
    /// an unknown key is an error naming the known ones.
    fn fields<'n, const N: usize>(
        &self,
        entries: &'n [Entry],
        path: &str,
        keys: [&str; N],
    ) -> Result<[Option<(&'n Node, At)>; N], ConfigError> {
        let mut out: [Option<(&'n Node, At)>; N] = std::array::from_fn(|_| None);
        for e in entries {
            let at = At {
                path: join(path, &e.key),
                line: e.line,
            };
            let Some(i) = keys.iter().position(|k| k.eq_ignore_ascii_case(&e.key)) else {
                return Err(self.error(
                    &at,
                    format!("unknown key; expected one of {}", keys.join(", ")),
                ));
            };
            if out[i].is_some() {
                return Err(self.error(&at, format!("{} given twice", keys[i])));
            }
            out[i] = Some((&e.node, at));
        }
        Ok(out)
    }

    /// A scalar's text (a number as written).
    fn text(&self, node: &Node, at: &At) -> Result<String, ConfigError> {
        match &node.value {
            Value::String(s) | Value::Float(s) => Ok(s.clone()),
            Value::Integer(i) => Ok(i.to_string()),
            _ => Err(self.error(
                at,
                format!("expected a string, found {}", Self::describe(node)),
            )),
        }
    }

    fn config(mut self, root: &Node) -> Result<GoresctrlConfig, ConfigError> {
        let top = At {
            path: String::new(),
            line: root.line,
        };
        let entries = self.mapping(root, &top)?;
        let [options, partitions] = self.fields(entries, "", ["options", "partitions"])?;
        let optional = match options {
            Some((node, at)) => self.options(node, &at)?,
            None => Optional::default(),
        };
        let mut parts = Vec::new();
        if let Some((node, at)) = partitions {
            for e in self.mapping(node, &at)? {
                let at = At {
                    path: join(&at.path, &e.key),
                    line: e.line,
                };
                parts.push(self.partition(&e.key, &e.node, at)?);
            }
        }
        parts.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        // Class names are unique across partitions; the root has one name.
        let mut seen: BTreeMap<String, &At> = BTreeMap::new();
        for class in parts.iter().flat_map(|p| &p.classes) {
            let key = if class.is_root() {
                "system/default".to_owned()
            } else {
                class.name.clone()
            };
            if let Some(first) = seen.get(&key) {
                return Err(self.error(
                    &class.at,
                    format!(
                        "class {key:?} is defined twice (first at {}, line {}): class names \
                         are unique across partitions",
                        first.path, first.line
                    ),
                ));
            }
            seen.insert(key, &class.at);
        }
        Ok(GoresctrlConfig {
            file: self.file.to_owned(),
            optional,
            partitions: parts,
            notes: self.notes,
        })
    }

    fn options(&self, node: &Node, at: &At) -> Result<Optional, ConfigError> {
        let entries = self.mapping(node, at)?;
        let fields = self.fields(entries, &at.path, ["l2", "l3", "mb"])?;
        let mut flags = [false; 3];
        for (flag, field) in flags.iter_mut().zip(fields) {
            let Some((node, at)) = field else { continue };
            let [optional] = self.fields(self.mapping(node, &at)?, &at.path, ["optional"])?;
            if let Some((node, at)) = optional {
                *flag = match node.value {
                    Value::Bool(b) => b,
                    Value::Null => false,
                    _ => {
                        return Err(self.error(
                            &at,
                            format!("expected true or false, found {}", Self::describe(node)),
                        ));
                    }
                };
            }
        }
        Ok(Optional {
            l2: flags[0],
            l3: flags[1],
            mb: flags[2],
        })
    }

    fn partition(&mut self, name: &str, node: &Node, at: At) -> Result<Partition, ConfigError> {
        let entries = self.mapping(node, &at)?;
        let [l2, l3, mb, classes] = self.fields(
            entries,
            &at.path,
            ["l2Allocation", "l3Allocation", "mbAllocation", "classes"],
        )?;
        let mut out = Partition {
            name: name.to_owned(),
            l2: l2.map(|(n, a)| self.cat(n, a)).transpose()?.flatten(),
            l3: l3.map(|(n, a)| self.cat(n, a)).transpose()?.flatten(),
            mb: mb.map(|(n, a)| self.mb(n, a)).transpose()?.flatten(),
            classes: Vec::new(),
            at,
        };
        if let Some((node, at)) = classes {
            for e in self.mapping(node, &at)? {
                let at = At {
                    path: join(&at.path, &e.key),
                    line: e.line,
                };
                let class = self.class(&e.key, &e.node, at)?;
                for (level, given, has) in [
                    ("L2", class.l2.is_some(), out.l2.is_some()),
                    ("L3", class.l3.is_some(), out.l3.is_some()),
                    ("MB", class.mb.is_some(), out.mb.is_some()),
                ] {
                    if given && !has {
                        return Err(self.error(
                            &class.at,
                            format!(
                                "class {:?} sets {level} allocation, but its partition {:?} \
                                 has none",
                                class.name, out.name
                            ),
                        ));
                    }
                }
                out.classes.push(class);
            }
        }
        out.classes
            .sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        Ok(out)
    }

    fn class(&mut self, name: &str, node: &Node, at: At) -> Result<Class, ConfigError> {
        if !ROOT_NAMES.contains(&name)
            && let Some(problem) = name_problem(name)
        {
            return Err(self.error(&at, problem));
        }
        let entries = self.mapping(node, &at)?;
        let [l2, l3, mb, kubernetes] = self.fields(
            entries,
            &at.path,
            ["l2Allocation", "l3Allocation", "mbAllocation", "kubernetes"],
        )?;
        let (mut deny_container_annotation, mut deny_pod_annotation) = (false, false);
        if let Some((node, kat)) = kubernetes {
            let keys = ["denyContainerAnnotation", "denyPodAnnotation"];
            let found = self.fields(self.mapping(node, &kat)?, &kat.path, keys)?;
            for (slot, field) in [&mut deny_container_annotation, &mut deny_pod_annotation]
                .into_iter()
                .zip(found)
            {
                let Some((node, at)) = field else { continue };
                match node.value {
                    Value::Bool(b) => *slot = b,
                    Value::Null => {}
                    _ => {
                        return Err(self.error(
                            &at,
                            format!("expected true or false, found {}", Self::describe(node)),
                        ));
                    }
                }
            }
        }
        Ok(Class {
            name: name.to_owned(),
            l2: l2.map(|(n, a)| self.cat(n, a)).transpose()?.flatten(),
            l3: l3.map(|(n, a)| self.cat(n, a)).transpose()?.flatten(),
            mb: mb.map(|(n, a)| self.mb(n, a)).transpose()?.flatten(),
            deny_pod_annotation,
            deny_container_annotation,
            at,
        })
    }

    /// `l2Allocation`/`l3Allocation`: a proportion (for `all`), or a mapping of cache ids to
    /// a proportion or a `unified`/`code`/`data` mapping. Null is no allocation.
    fn cat(&self, node: &Node, at: At) -> Result<Option<CatAllocation>, ConfigError> {
        let entries = match &node.value {
            Value::Null => return Ok(None),
            Value::Table(entries) => entries,
            _ => {
                let unified = (self.proportion(node, &at)?, at.clone());
                return Ok(Some(CatAllocation {
                    entries: vec![(CacheIds::All, CacheIdAllocation { unified, cdp: None })],
                    at,
                }));
            }
        };
        let mut out = Vec::new();
        for e in entries {
            let eat = At {
                path: join(&at.path, &e.key),
                line: e.line,
            };
            let ids = self.cache_ids(&e.key, &eat)?;
            let alloc = if let Value::Table(fields) = &e.node.value {
                let [unified, code, data] =
                    self.fields(fields, &eat.path, ["unified", "code", "data"])?;
                let get = |f: Option<(&Node, At)>| -> Result<_, ConfigError> {
                    f.filter(|(n, _)| !matches!(n.value, Value::Null))
                        .map(|(n, a)| Ok((self.proportion(n, &a)?, a)))
                        .transpose()
                };
                let (unified, code, data) = (get(unified)?, get(code)?, get(data)?);
                let Some(unified) = unified else {
                    return Err(self.error(&eat, "`unified` is required"));
                };
                let cdp = match (code, data) {
                    (Some(c), Some(d)) => Some([c, d]),
                    (None, None) => None,
                    (Some(_), None) => {
                        return Err(self.error(&eat, "`code` given without `data`"));
                    }
                    (None, Some(_)) => {
                        return Err(self.error(&eat, "`data` given without `code`"));
                    }
                };
                CacheIdAllocation { unified, cdp }
            } else {
                CacheIdAllocation {
                    unified: (self.proportion(&e.node, &eat)?, eat.clone()),
                    cdp: None,
                }
            };
            out.push((ids, alloc));
        }
        Ok(Some(CatAllocation { entries: out, at }))
    }

    /// `all`, or cache ids in goresctrl's list form (`0,2-3`; a range's end above its start).
    fn cache_ids(&self, key: &str, at: &At) -> Result<CacheIds, ConfigError> {
        if key == "all" {
            return Ok(CacheIds::All);
        }
        let bad = || {
            self.error(
                at,
                format!(
                    "cache ids {:?}: expected `all` or a list of ids like `0,2-3`",
                    node::Shortened(key)
                ),
            )
        };
        let mut ranges = Vec::new();
        for part in key.split(',') {
            let num = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n < 1 << 16)
                    .ok_or_else(bad)
            };
            match part.split_once('-') {
                None => {
                    let n = num(part)?;
                    ranges.push(n..=n);
                }
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if b <= a {
                        return Err(bad());
                    }
                    ranges.push(a..=b);
                }
            }
        }
        // Sorted and merged: overlapping and adjacent ranges become one.
        ranges.sort_unstable_by_key(|r| *r.start());
        let mut merged: Vec<RangeInclusive<u32>> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match merged.last_mut() {
                Some(last) if *r.start() <= last.end().saturating_add(1) => {
                    *last = *last.start()..=*last.end().max(r.end());
                }
                _ => merged.push(r),
            }
        }
        Ok(CacheIds::List(merged))
    }

    /// goresctrl's `CacheProportion`: `N%`, `L-H%`, `0xMASK` or bit numbers `0-3,4`.
    fn proportion(&self, node: &Node, at: &At) -> Result<Proportion, ConfigError> {
        let text = self.text(node, at)?;
        let shown = node::Shortened(&text);
        let pct = |s: &str| -> Result<u8, ConfigError> {
            let p: u32 = s.trim().parse().map_err(|_| {
                self.error(at, format!("{shown:?}: {s:?} is not a whole percentage"))
            })?;
            if p > 100 {
                return Err(self.error(at, format!("{p}% over 100%")));
            }
            Ok(u8::try_from(p).unwrap_or(100))
        };
        if let Some(body) = text.strip_suffix('%') {
            return match body.split_once('-') {
                None => Ok(Proportion::Percent(pct(body)?)),
                Some((l, h)) => {
                    let (l, h) = (pct(l)?, pct(h)?);
                    if l > h {
                        return Err(self.error(
                            at,
                            format!("{shown:?}: the range's low end is above its high end"),
                        ));
                    }
                    Ok(Proportion::Range(l, h))
                }
            };
        }
        let bits = if let Some(hex) = text.strip_prefix("0x") {
            u64::from_str_radix(hex, 16)
                .map_err(|_| self.error(at, format!("{shown:?} is not a hexadecimal mask")))?
        } else {
            let mut bits = 0u64;
            for part in text.split(',') {
                let bit = |s: &str| {
                    s.parse::<u32>().ok().filter(|b| *b < 64).ok_or_else(|| {
                        self.error(
                            at,
                            format!(
                                "{shown:?}: expected a percentage (`60%`), a mask (`0xff`) or \
                                 bit numbers 0 to 63 (`0-7`)"
                            ),
                        )
                    })
                };
                match part.split_once('-') {
                    None => bits |= 1 << bit(part)?,
                    Some((a, b)) => {
                        let (a, b) = (bit(a)?, bit(b)?);
                        if b <= a {
                            return Err(self.error(
                                at,
                                format!("{shown:?}: bit range {part:?} does not go upwards"),
                            ));
                        }
                        bits |= (u64::MAX >> (63 - (b - a))) << a;
                    }
                }
            }
            bits
        };
        if bits == 0 {
            return Err(self.error(at, format!("{shown:?}: an empty mask")));
        }
        if (bits >> bits.trailing_zeros()).trailing_ones() != bits.count_ones() {
            return Err(self.error(
                at,
                format!("{shown:?}: more than one contiguous block of bits ({bits:#x})"),
            ));
        }
        Ok(Proportion::Mask(bits))
    }

    /// `mbAllocation`: a list (for `all`) or a mapping of cache ids to lists.
    fn mb(&self, node: &Node, at: At) -> Result<Option<MbAllocation>, ConfigError> {
        let list = |node: &Node, at: &At| -> Result<Vec<MbValue>, ConfigError> {
            let Value::Array(items) = &node.value else {
                return Err(self.error(
                    at,
                    format!(
                        "expected a list like [\"50%\", \"1000MBps\"], found {}",
                        Self::describe(node)
                    ),
                ));
            };
            items.iter().map(|n| self.mb_value(n, at)).collect()
        };
        match &node.value {
            Value::Null => Ok(None),
            Value::Array(_) => Ok(Some(MbAllocation {
                entries: vec![(CacheIds::All, list(node, &at)?, at.clone())],
                at,
            })),
            Value::Table(entries) => {
                let mut out = Vec::new();
                for e in entries {
                    let eat = At {
                        path: join(&at.path, &e.key),
                        line: e.line,
                    };
                    out.push((self.cache_ids(&e.key, &eat)?, list(&e.node, &eat)?, eat));
                }
                Ok(Some(MbAllocation { entries: out, at }))
            }
            _ => Err(self.error(
                &at,
                format!(
                    "expected a list like [\"50%\"] or a mapping of cache ids, found {}",
                    Self::describe(node)
                ),
            )),
        }
    }

    fn mb_value(&self, node: &Node, at: &At) -> Result<MbValue, ConfigError> {
        let text = self.text(node, at)?;
        if let Some(p) = text.strip_suffix('%') {
            let p: u32 = p.parse().map_err(|_| {
                self.error(
                    at,
                    format!("{:?} is not a whole percentage", node::Shortened(&text)),
                )
            })?;
            if p > 100 {
                return Err(self.error(at, format!("{p}% over 100%")));
            }
            return Ok(MbValue::Percent(p));
        }
        if let Some(v) = text.strip_suffix("MBps") {
            let v: u32 = v.parse().map_err(|_| {
                self.error(
                    at,
                    format!(
                        "{:?} is not a whole number of MBps (0 to 4294967295)",
                        node::Shortened(&text)
                    ),
                )
            })?;
            return Ok(MbValue::Mbps(v));
        }
        Ok(MbValue::Other(text))
    }
}

// ---------------------------------------------------------------------------------------
// Resolving

/// One partition's grant for one (level, id, type).
type Grants = BTreeMap<(usize, u32, CdpType), u64>;

/// A bitmask of `n` low bits.
const fn low(n: u64) -> u64 {
    if n >= 64 { u64::MAX } else { (1 << n) - 1 }
}

impl GoresctrlConfig {
    /// Parses goresctrl's YAML. `file` names the source in errors; nothing is read from it.
    ///
    /// # Errors
    /// [`ConfigErrorKind::Syntax`] for YAML syntax (and aliases, duplicate keys, more than
    /// one document); [`ConfigErrorKind::Invalid`] for an unknown key, a wrong type, a
    /// percentage over 100, a non-contiguous or empty mask, a bad cache id list, `code`
    /// without `data`, a class name twice or unusable as a group name, a class setting a
    /// resource its partition does not. The error names the line and key path
    /// (`partitions.exclusive.l3Allocation.all: 120% over 100%`).
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use rdt_config::goresctrl::GoresctrlConfig;
    /// let e = GoresctrlConfig::parse_yaml(
    ///     "partitions:\n  exclusive:\n    l3Allocation:\n      all: 120%\n",
    ///     Path::new("rdt.yaml"),
    /// )
    /// .unwrap_err();
    /// assert_eq!(e.to_string(), "rdt.yaml:4: partitions.exclusive.l3Allocation.all: 120% over 100%");
    /// ```
    pub fn parse_yaml(text: &str, file: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let file = file.as_ref();
        let root = super::yaml::from_yaml(text).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::Syntax,
                file,
                Location {
                    line: e.line,
                    ..Location::default()
                },
                format!("YAML syntax: {}", e.message),
            )
        })?;
        Parser {
            file,
            notes: Vec::new(),
        }
        .config(&root)
    }

    /// Reads and parses a goresctrl configuration file (regular files only, at most
    /// [`super::MAX_CONFIG_BYTES`], as [`super::Config::load`]).
    ///
    /// # Errors
    /// The reading errors of [`super::Config::load`], then those of
    /// [`GoresctrlConfig::parse_yaml`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = super::load::read(path)?;
        Self::parse_yaml(&text, path)
    }

    fn error(&self, kind: ConfigErrorKind, at: &At, message: impl Into<String>) -> ConfigError {
        ConfigError::new(
            kind,
            &self.file,
            Location {
                line: (at.line > 0).then_some(at.line),
                key: (!at.path.is_empty()).then(|| at.path.clone()),
                ..Location::default()
            },
            message,
        )
    }

    fn warning(&self, at: &At, message: impl Into<String>) -> ConfigWarning {
        ConfigWarning::new(
            &self.file,
            Location {
                line: (at.line > 0).then_some(at.line),
                key: (!at.path.is_empty()).then(|| at.path.clone()),
                ..Location::default()
            },
            message,
        )
    }

    /// Computes the masks and MBA values goresctrl would write for every class on
    /// `platform` (the [module docs](self) give the arithmetic).
    ///
    /// # Errors
    /// [`ConfigErrorKind::Platform`] naming the key path: a resource a class sets that the
    /// platform lacks and `options` does not make optional; partitions that mix
    /// percentages and masks, or where one lacks a level or type another has; partition
    /// percentages over 100% in total; overlapping partition masks; a percentage range in a
    /// partition; too few bits for `min_cbm_bits`; a mask wider than the CBM or a class
    /// mask that does not fit its partition's; an MBA list without a value of the unit in
    /// force.
    pub fn resolve(&self, platform: &GoresctrlPlatform) -> Result<Resolved, ConfigError> {
        let mut warnings = self.notes.clone();
        let mut classes: Vec<ResolvedClass> = Vec::new();
        for p in &self.partitions {
            for c in &p.classes {
                classes.push(ResolvedClass {
                    name: c.name.clone(),
                    partition: p.name.clone(),
                    cat: BTreeMap::new(),
                    mb: BTreeMap::new(),
                    mbps: platform.mb.as_ref().is_some_and(|m| m.mbps),
                    at: c.at.clone(),
                });
            }
        }
        for resource in [CatResource::L2, CatResource::L3] {
            let optional = match resource {
                CatResource::L2 => self.optional.l2,
                CatResource::L3 => self.optional.l3,
            };
            let Some(level) = platform.cat(resource) else {
                for (p, c) in self.classes() {
                    if let Some(a) = Self::cat_of(resource, c.l2.as_ref(), c.l3.as_ref()) {
                        if !optional {
                            return Err(self.error(
                                ConfigErrorKind::Platform,
                                &a.at,
                                format!(
                                    "{resource} cache allocation for class {:?} (partition \
                                     {:?}), but the platform has no {resource} CAT; set \
                                     options.{}.optional: true to skip it",
                                    c.name,
                                    p.name,
                                    resource.to_string().to_lowercase()
                                ),
                            ));
                        }
                        warnings.push(self.warning(
                            &a.at,
                            format!("skipped: the platform has no {resource} CAT (optional)"),
                        ));
                    }
                }
                continue;
            };
            let grants = self.partition_grants(resource, level)?;
            let mut i = 0;
            for (pi, p) in self.partitions.iter().enumerate() {
                for c in &p.classes {
                    self.class_masks(resource, level, &grants, pi, c, &mut classes[i])?;
                    i += 1;
                }
            }
        }
        match &platform.mb {
            None => {
                self.percent_everywhere()?;
                for (p, c) in self.classes() {
                    if let Some(mb) = &c.mb {
                        if !self.optional.mb {
                            return Err(self.error(
                                ConfigErrorKind::Platform,
                                &mb.at,
                                format!(
                                    "memory bandwidth allocation for class {:?} (partition \
                                     {:?}), but the platform has no MBA in percent; set \
                                     options.mb.optional: true to skip it",
                                    c.name, p.name
                                ),
                            ));
                        }
                        warnings.push(
                            self.warning(&mb.at, "skipped: the platform has no MBA (optional)"),
                        );
                    }
                }
            }
            Some(mb) => {
                let mut i = 0;
                for p in &self.partitions {
                    let base = self.mb_values(p.mb.as_ref(), mb, true, &mut warnings)?;
                    for c in &p.classes {
                        let own = self.mb_values(c.mb.as_ref(), mb, false, &mut warnings)?;
                        for &d in &mb.domains {
                            let base = base.get(&d).copied();
                            let own = own.get(&d).copied();
                            let v = if mb.mbps {
                                own.unwrap_or(u32::MAX).min(base.unwrap_or(u32::MAX))
                            } else {
                                let pct = u64::from(own.unwrap_or(100));
                                let v = pct * u64::from(base.unwrap_or(100)) / 100;
                                u32::try_from(v).unwrap_or(100).max(mb.min_bandwidth)
                            };
                            classes[i].mb.insert(d, v);
                        }
                        i += 1;
                    }
                }
            }
        }
        Ok(Resolved { classes, warnings })
    }

    /// Without MBA (so without `mba_MBps`), as goresctrl's `parseMbAllocation` reads a list
    /// in percent mode: every entry of every `mbAllocation` needs a `%` value, also where
    /// the allocation is optional and skipped (goresctrl: "missing '%' value").
    fn percent_everywhere(&self) -> Result<(), ConfigError> {
        let allocations = self.partitions.iter().flat_map(|p| {
            p.mb.iter()
                .chain(p.classes.iter().filter_map(|c| c.mb.as_ref()))
        });
        for alloc in allocations {
            for (_, values, at) in &alloc.entries {
                if !values.iter().any(|v| matches!(v, MbValue::Percent(_))) {
                    return Err(self.error(
                        ConfigErrorKind::Platform,
                        at,
                        "no percentage value (goresctrl: missing '%' value): the platform has                          no MBA, so no mba_MBps, and goresctrl reads MBA in percent",
                    ));
                }
            }
        }
        Ok(())
    }

    fn classes(&self) -> impl Iterator<Item = (&Partition, &Class)> {
        self.partitions
            .iter()
            .flat_map(|p| p.classes.iter().map(move |c| (p, c)))
    }

    const fn cat_of<'a>(
        resource: CatResource,
        l2: Option<&'a CatAllocation>,
        l3: Option<&'a CatAllocation>,
    ) -> Option<&'a CatAllocation> {
        match resource {
            CatResource::L2 => l2,
            CatResource::L3 => l3,
        }
    }

    /// MBA values by domain of a partition's or class's `mbAllocation` (`None`: empty map,
    /// the default). A partition's percentages are raised to `min_bandwidth`.
    fn mb_values(
        &self,
        alloc: Option<&MbAllocation>,
        mb: &MbLevel,
        partition: bool,
        warnings: &mut Vec<ConfigWarning>,
    ) -> Result<BTreeMap<CacheDomain, u32>, ConfigError> {
        let mut out = BTreeMap::new();
        let Some(alloc) = alloc else { return Ok(out) };
        let mut value = |values: &[MbValue], at: &At| -> Result<u32, ConfigError> {
            let mut found = None;
            for v in values {
                match v {
                    MbValue::Percent(p) if !mb.mbps => {
                        found = Some(*p);
                        break;
                    }
                    MbValue::Mbps(v) if mb.mbps => {
                        found = Some(*v);
                        break;
                    }
                    MbValue::Other(o) => warnings.push(self.warning(
                        at,
                        format!(
                            "{:?} ignored: an MBA value is a percentage (`50%`) or MBps \
                             (`1000MBps`)",
                            node::Shortened(o)
                        ),
                    )),
                    _ => {}
                }
            }
            found.ok_or_else(|| {
                let (unit, why) = if mb.mbps {
                    ("MBps", "resctrl is mounted with mba_MBps")
                } else {
                    ("percentage", "MBA is in percent on this platform")
                };
                self.error(
                    ConfigErrorKind::Platform,
                    at,
                    format!("no {unit} value, which is needed because {why}"),
                )
            })
        };
        let default = match alloc
            .entries
            .iter()
            .find(|(ids, ..)| matches!(ids, CacheIds::All))
        {
            Some((_, values, at)) => value(values, at)?,
            None if mb.mbps => u32::MAX,
            None => 100,
        };
        // Every entry's value is checked, then each domain takes the last entry naming it
        // (ids are ranges: an entry is never expanded into one value per id).
        let mut specific = Vec::new();
        for (ids, values, at) in &alloc.entries {
            if matches!(ids, CacheIds::List(_)) {
                specific.push((ids, value(values, at)?));
            }
        }
        for &d in &mb.domains {
            let mut v = specific
                .iter()
                .rev()
                .find(|(ids, _)| ids.contains(d.get()))
                .map_or(default, |(_, v)| *v);
            if partition && !mb.mbps {
                v = v.max(mb.min_bandwidth);
            }
            out.insert(d, v);
        }
        Ok(out)
    }

    /// The partitions' masks of one cache level: per partition index, cache id and type.
    fn partition_grants(
        &self,
        resource: CatResource,
        level: &CatLevel,
    ) -> Result<Grants, ConfigError> {
        let mut grants = Grants::new();
        if self.partitions.is_empty() {
            return Ok(grants);
        }
        let allocs: Vec<Option<&CatAllocation>> = self
            .partitions
            .iter()
            .map(|p| Self::cat_of(resource, p.l2.as_ref(), p.l3.as_ref()))
            .collect();
        for &domain in &level.domains {
            let id = domain.get();
            for typ in CdpType::ALL {
                // Each partition's request: its entry for the id (default 100% unified).
                let requests: Vec<Option<(Proportion, At)>> = allocs
                    .iter()
                    .map(|a| {
                        a.and_then(|a| match a.for_id(id) {
                            Some(e) => match (typ, &e.cdp) {
                                (CdpType::Unified, _) | (_, Some(_)) => Some(e.get(typ).clone()),
                                _ => None,
                            },
                            None if typ == CdpType::Unified => {
                                Some((Proportion::Percent(100), a.at.clone()))
                            }
                            None => None,
                        })
                    })
                    .collect();
                let missing: Vec<&str> = self
                    .partitions
                    .iter()
                    .zip(&requests)
                    .filter(|(_, r)| r.is_none())
                    .map(|(p, _)| p.name.as_str())
                    .collect();
                if missing.len() == requests.len() {
                    continue;
                }
                if !missing.is_empty() {
                    let at = requests
                        .iter()
                        .flatten()
                        .map(|(_, at)| at)
                        .next()
                        .cloned()
                        .unwrap_or_default();
                    return Err(self.error(
                        ConfigErrorKind::Platform,
                        &at,
                        format!(
                            "partitions {} have no {resource} {:?} allocation for cache id \
                             {id}: all partitions or none allocate each level and type",
                            missing.join(", "),
                            typ.name()
                        ),
                    ));
                }
                let requests: Vec<(Proportion, At)> = requests.into_iter().flatten().collect();
                let masks = if matches!(requests[0].0, Proportion::Mask(_)) {
                    self.absolute(resource, level, id, &requests)?
                } else {
                    self.relative(resource, level, id, typ, &requests)?
                };
                for (pi, m) in masks.into_iter().enumerate() {
                    grants.insert((pi, id, typ), m);
                }
            }
        }
        Ok(grants)
    }

    fn absolute(
        &self,
        resource: CatResource,
        level: &CatLevel,
        id: u32,
        requests: &[(Proportion, At)],
    ) -> Result<Vec<u64>, ConfigError> {
        let mut taken = 0u64;
        let mut out = Vec::new();
        for (pi, (req, at)) in requests.iter().enumerate() {
            let Proportion::Mask(m) = *req else {
                return Err(self.error(
                    ConfigErrorKind::Platform,
                    at,
                    format!(
                        "{req}: partitions mix absolute masks and percentages for {resource} \
                         cache id {id}"
                    ),
                ));
            };
            self.check_mask(m, level, resource, at)?;
            if m & taken != 0 {
                let other = (0..pi)
                    .find(|&o| out.get(o).is_some_and(|&om: &u64| om & m != 0))
                    .map_or("", |o| self.partitions[o].name.as_str());
                return Err(self.error(
                    ConfigErrorKind::Platform,
                    at,
                    format!(
                        "{resource} mask {m:#x} overlaps partition {other:?}'s mask in cache id \
                         {id}: partitions are exclusive"
                    ),
                ));
            }
            taken |= m;
            out.push(m);
        }
        Ok(out)
    }

    fn check_mask(
        &self,
        m: u64,
        level: &CatLevel,
        resource: CatResource,
        at: &At,
    ) -> Result<(), ConfigError> {
        if m & !low(u64::from(level.cbm_len)) != 0 {
            return Err(self.error(
                ConfigErrorKind::Platform,
                at,
                format!(
                    "{resource} mask {m:#x} is wider than the {} bits of the CBM",
                    level.cbm_len
                ),
            ));
        }
        if m.count_ones() < level.min_cbm_bits {
            return Err(self.error(
                ConfigErrorKind::Platform,
                at,
                format!(
                    "{resource} mask {m:#x} has fewer than the {} bits min_cbm_bits asks for",
                    level.min_cbm_bits
                ),
            ));
        }
        Ok(())
    }

    fn relative(
        &self,
        resource: CatResource,
        level: &CatLevel,
        id: u32,
        typ: CdpType,
        requests: &[(Proportion, At)],
    ) -> Result<Vec<u64>, ConfigError> {
        let mut total = 0u64;
        let mut reqs = Vec::new();
        for (pi, (req, at)) in requests.iter().enumerate() {
            match *req {
                Proportion::Percent(p) => {
                    total += u64::from(p);
                    reqs.push((pi, u64::from(p)));
                }
                Proportion::Mask(_) => {
                    return Err(self.error(
                        ConfigErrorKind::Platform,
                        at,
                        format!(
                            "{req}: partitions mix percentages and absolute masks for \
                             {resource} cache id {id}"
                        ),
                    ));
                }
                Proportion::Range(..) => {
                    return Err(self.error(
                        ConfigErrorKind::Platform,
                        at,
                        format!("{req}: a partition cannot take a percentage range"),
                    ));
                }
            }
        }
        let last_at = &requests[requests.len() - 1].1;
        if total > 100 {
            let parts: Vec<String> = requests
                .iter()
                .zip(&self.partitions)
                .map(|((r, _), p)| format!("{} {r}", p.name))
                .collect();
            return Err(self.error(
                ConfigErrorKind::Platform,
                last_at,
                format!(
                    "{resource} {:?} partition allocations for cache id {id} add up to {total}%, \
                     over 100% ({})",
                    typ.name(),
                    parts.join(", ")
                ),
            ));
        }
        // Smallest first; equal requests keep name order.
        reqs.sort_by_key(|&(_, r)| r);
        let min = u64::from(level.min_cbm_bits);
        let bits_total = total * u64::from(level.cbm_len) / 100;
        let mut available = bits_total;
        let mut granted = vec![0u64; requests.len()];
        let short = || {
            self.error(
                ConfigErrorKind::Platform,
                last_at,
                format!(
                    "not enough {resource} ways for the partitions in cache id {id}: {total}% of \
                     {} ways, at least {min} each",
                    level.cbm_len
                ),
            )
        };
        for (n, &(pi, req)) in reqs.iter().enumerate() {
            if available < min {
                return Err(short());
            }
            // goresctrl divides by zero here (a panic); refused instead.
            let pct_available = available * total / bits_total.max(1);
            if pct_available == 0 {
                return Err(short());
            }
            let mut bits = req * available / pct_available;
            bits = bits.max(min);
            if bits > available || n == reqs.len() - 1 {
                bits = available;
            }
            granted[pi] = bits;
            available -= bits;
        }
        let mut lsb = 0u64;
        Ok(granted
            .into_iter()
            .map(|g| {
                let m = low(g) << lsb;
                lsb += g;
                m
            })
            .collect())
    }

    /// A class's masks in one cache level, relative to its partition's.
    fn class_masks(
        &self,
        resource: CatResource,
        level: &CatLevel,
        grants: &Grants,
        pi: usize,
        class: &Class,
        out: &mut ResolvedClass,
    ) -> Result<(), ConfigError> {
        let full = low(u64::from(level.cbm_len));
        let own = Self::cat_of(resource, class.l2.as_ref(), class.l3.as_ref());
        let scopes: &[(MaskScope, CdpType)] = if level.cdp {
            &[
                (MaskScope::Code, CdpType::Code),
                (MaskScope::Data, CdpType::Data),
            ]
        } else {
            &[(MaskScope::Both, CdpType::Unified)]
        };
        for &domain in &level.domains {
            let id = domain.get();
            for &(scope, typ) in scopes {
                // The partition's effective mask: the type's, else unified's, else all ways.
                let base = grants
                    .get(&(pi, id, typ))
                    .or_else(|| grants.get(&(pi, id, CdpType::Unified)))
                    .copied()
                    .unwrap_or(full);
                let mask = match own {
                    None => base,
                    Some(a) => {
                        let (req, at) = match a.for_id(id) {
                            Some(e) => e.get(typ).clone(),
                            None => (Proportion::Percent(100), a.at.clone()),
                        };
                        self.overlay(req, base, level, resource, &at)?
                    }
                };
                let mask = CacheBitmask::new(mask)
                    .map_err(|e| self.error(ConfigErrorKind::Platform, &class.at, e.to_string()))?;
                out.cat.insert((resource, domain, scope), mask);
            }
        }
        Ok(())
    }

    /// goresctrl's `Overlay`: a class's proportion within its partition's `base` mask.
    fn overlay(
        &self,
        req: Proportion,
        base: u64,
        level: &CatLevel,
        resource: CatResource,
        at: &At,
    ) -> Result<u64, ConfigError> {
        let min = u64::from(level.min_cbm_bits);
        let base_lsb = u64::from(base.trailing_zeros());
        let n = u64::from(base.count_ones());
        if n < min {
            return Err(self.error(
                ConfigErrorKind::Platform,
                at,
                format!(
                    "the partition's {resource} mask {base:#x} has fewer than the {min} bits \
                     min_cbm_bits asks for"
                ),
            ));
        }
        match req {
            Proportion::Mask(m) => {
                let shifted = m.checked_shl(u32::try_from(base_lsb).unwrap_or(64));
                match shifted {
                    Some(s) if s >> base_lsb == m && s | base == base => {
                        self.check_mask(s, level, resource, at)?;
                        Ok(s)
                    }
                    _ => Err(self.error(
                        ConfigErrorKind::Platform,
                        at,
                        format!(
                            "{resource} mask {m:#x} shifted to the partition's lowest bit \
                             ({:#x}) does not fit the partition's mask {base:#x}",
                            m.wrapping_shl(u32::try_from(base_lsb).unwrap_or(0))
                        ),
                    )),
                }
            }
            Proportion::Percent(_) | Proportion::Range(..) => {
                let (low_pct, high_pct) = match req {
                    Proportion::Percent(p) => (1, u64::from(p)),
                    Proportion::Range(l, h) => (u64::from(l).max(1), u64::from(h)),
                    Proportion::Mask(_) => unreachable!("handled above"),
                };
                if low_pct > high_pct {
                    return Err(self.error(
                        ConfigErrorKind::Platform,
                        at,
                        format!("{req}: an empty percentage range"),
                    ));
                }
                let mut lsb = (low_pct - 1) * n / 100;
                let mut msb = (high_pct - 1) * n / 100;
                let bits = msb - lsb + 1;
                if bits < min {
                    let mut gap = min - bits;
                    if gap <= lsb {
                        lsb -= gap;
                        gap = 0;
                    } else {
                        gap -= lsb;
                        lsb = 0;
                    }
                    let room = n - msb - 1;
                    if gap > room {
                        return Err(self.error(
                            ConfigErrorKind::Platform,
                            at,
                            format!(
                                "{req} of {resource} mask {base:#x} cannot have the {min} bits \
                                 min_cbm_bits asks for"
                            ),
                        ));
                    }
                    msb += gap;
                }
                Ok(low(msb - lsb + 1) << (lsb + base_lsb))
            }
        }
    }

    /// Resolves the file against `backend` ([`GoresctrlConfig::resolve`] on
    /// [`GoresctrlPlatform::of`] its capabilities and topology) and plans the writes that
    /// make the platform match it, leaving out those that change nothing. Writes nothing.
    ///
    /// Each class is [`BackendExt::class_named`] by its name (on the OS interface, the resctrl
    /// group of that name); the root's names are COS 0. A name not yet this library's is
    /// claimed by the plan, as for [`super::Config::plan`]. Masks are written per cache id
    /// and CDP type; MBA percentages are rounded to the granularity as the interface
    /// stores them ([`rdt_core::MbaCaps::stored_limit`]: up on the OS interface, as the
    /// kernel does; half up on MSR, as pqos does), with a warning when that changes them.
    ///
    /// # Errors
    /// [`ConfigPlanError::Config`] for what [`GoresctrlConfig::resolve`] refuses and what
    /// the transaction's planner refuses on this platform and state (no class left, a mask
    /// the CBM cannot hold, ...), naming the key; [`ConfigPlanError::Backend`] when the
    /// platform cannot be read.
    pub fn plan<B: Backend>(
        &self,
        backend: &mut B,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        self.plan_with(backend, &GroupOptions::default())
    }

    /// [`GoresctrlConfig::plan`] with goresctrl's group options: each class is the group
    /// [`GroupOptions::group_name`], and with [`GroupOptions::prune`] the plan first takes
    /// away the stale named classes (this library's, with the prefix, not in the file) as
    /// `--remove` does: masks and limits back to the defaults, CPUs back to COS 0, the group
    /// removed. All in one transaction.
    ///
    /// # Errors
    /// As [`GoresctrlConfig::plan`]; a prefix that makes a class name no group name can
    /// be; with `prune`, a stale group that holds tasks (goresctrl refuses to remove a
    /// non-empty group too), naming it and how many; a class whose group another tool made
    /// ([`rdt_core::RequestError::ForeignClass`]: use [`GoresctrlConfig::plan_adopting`]
    /// when migrating from that tool).
    pub fn plan_with<B: Backend>(
        &self,
        backend: &mut B,
        options: &GroupOptions,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        self.plan_adopting(backend, options, None)
    }

    /// [`GoresctrlConfig::plan_with`], migrating from `previous`, the tool that made the
    /// groups with [`GroupOptions::prefix`] before (goresctrl, in containerd or CRI-O):
    /// every existing control group with the prefix that another tool made is adopted
    /// first ([`Change::Adopt`]: recorded as this library's, nothing written to it), so
    /// that the file's classes take over their groups and, with [`GroupOptions::prune`],
    /// the groups the file no longer names are removed as this library's own stale ones
    /// are: refused, naming the group, while it holds tasks; the empty monitor groups the
    /// other tool left in it (goresctrl's pods' groups, of pods that are gone) removed with
    /// it, one that still holds tasks or CPUs refused, naming it
    /// ([`rdt_core::RequestError::ClassInUse`]). All in one transaction, undone whole (an
    /// adoption's undo leaves the group to the other tool again; removed empty monitor
    /// groups are not made again). Never done by
    /// [`GoresctrlConfig::plan_with`]: only on the operator's word (`pqos --apply FILE
    /// --group-prefix P --prune --adopt goresctrl`). `None` adopts nothing.
    ///
    /// # Errors
    /// As [`GoresctrlConfig::plan_with`]; an empty prefix with `previous` (every group of
    /// every tool would be adopted).
    #[allow(clippy::too_many_lines)] // the plan's changes in the order they are written
    pub fn plan_adopting<B: Backend>(
        &self,
        backend: &mut B,
        options: &GroupOptions,
        previous: Option<PreviousOwner>,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        if let Some(previous) = previous
            && options.prefix.is_empty()
        {
            return Err(ConfigPlanError::Config(self.error(
                ConfigErrorKind::Platform,
                &At::default(),
                format!(
                    "--adopt {previous}: give the prefix of {previous}'s groups \
                     (--group-prefix): without one every group of every tool would be adopted"
                ),
            )));
        }
        let platform = GoresctrlPlatform::of(backend.capabilities(), backend.topology());
        let resolved = self.resolve(&platform)?;
        let mut warnings: Vec<String> = resolved.warnings.iter().map(ToString::to_string).collect();
        let names: Vec<String> = resolved
            .classes
            .iter()
            .map(|c| options.group_name(&c.name))
            .collect();
        let ids = self.class_ids(backend, &resolved, &names)?;
        let mut changes = Vec::new();
        let mut origins: Vec<&At> = Vec::new();
        // the class of each change, for messages
        let mut owners: Vec<&str> = Vec::new();
        // a stale class is not in the file: line 0 names no line
        let nowhere = At::default();
        let adopted = match previous {
            Some(_) => self.foreign_with_prefix(backend, options)?,
            None => Vec::new(),
        };
        for (class, name) in &adopted {
            changes.push(Change::Adopt {
                class: *class,
                name: name.clone(),
            });
            origins.push(&nowhere);
            owners.push(name);
        }
        let stale = if options.prune {
            self.stale(backend, options, &names, &adopted)?
        } else {
            Vec::new()
        };
        let removals = adopted.len() + stale.iter().map(|s| s.changes.len()).sum::<usize>();
        for s in &stale {
            for change in &s.changes {
                changes.push(change.clone());
                origins.push(&nowhere);
                owners.push(&s.name);
            }
        }
        for (c, &class) in resolved.classes.iter().zip(&ids) {
            for (&(resource, domain, scope), &mask) in &c.cat {
                changes.push(Change::Cat {
                    resource,
                    domain,
                    class,
                    scope,
                    mask,
                });
                origins.push(&c.at);
                owners.push(&c.name);
            }
        }
        let interface = backend.interface();
        let mba = backend.capabilities().mba.get().cloned();
        for (c, &class) in resolved.classes.iter().zip(&ids) {
            let gran = platform.mb.as_ref().map_or(1, |m| m.granularity.max(1));
            for (&domain, &v) in &c.mb {
                let limit = if c.mbps {
                    MbaLimit::MibPerSec(v)
                } else {
                    let asked = MbaLimit::Percent(u8::try_from(v.min(100)).unwrap_or(100));
                    // as the interface stores it: one rounding for every form of file
                    let limit = mba
                        .as_ref()
                        .map_or(asked, |m| m.stored_limit(interface, asked));
                    if limit.value() != v {
                        warnings.push(
                            self.warning(
                                &c.at,
                                format!(
                                    "MBA {v}% in domain {domain} is {}%: the hardware's \
                                     granularity is {gran}%",
                                    limit.value()
                                ),
                            )
                            .to_string(),
                        );
                    }
                    limit
                };
                changes.push(Change::mba(domain, class, limit));
                origins.push(&c.at);
                owners.push(&c.name);
            }
        }
        let plan = Plan::new(backend, &changes).map_err(|e| match e {
            PlanError::Invalid { index, error } => ConfigPlanError::Config(self.error(
                ConfigErrorKind::Platform,
                origins[index],
                super::apply::naming(&error, owners[index]),
            )),
            PlanError::Read { error, .. } => ConfigPlanError::Backend(error),
        })?;
        warnings.extend(
            plan.warnings()
                .iter()
                // a pruned class goes back to all ways: that they are shareable is no news
                .filter(|w| !(w.index() < removals && matches!(w, PlanWarning::Shareable { .. })))
                .map(|w| self.warning(origins[w.index()], w.to_string()).to_string()),
        );
        // One remark per place, not one per cache id.
        let mut seen = std::collections::BTreeSet::new();
        warnings.retain(|w| seen.insert(w.clone()));
        Ok(ConfigPlan {
            classes: names
                .into_iter()
                .zip(ids)
                .chain(stale.into_iter().map(|s| (s.name, s.class)))
                .collect(),
            plan: plan.without_unchanged(),
            warnings,
        })
    }

    /// The class of service of each of `resolved`'s classes, whose groups are `names`:
    /// COS 0 for the root, else [`BackendExt::class_named`].
    fn class_ids<B: Backend>(
        &self,
        backend: &mut B,
        resolved: &Resolved,
        names: &[String],
    ) -> Result<Vec<ClassId>, ConfigPlanError<B::Error>> {
        let mut ids = Vec::new();
        for (c, name) in resolved.classes.iter().zip(names) {
            let id = if c.is_root() {
                ClassId::new(0)
            } else {
                backend.class_named(name).map_err(|e| match e.request() {
                    Some(r) => ConfigPlanError::Config(self.error(
                        ConfigErrorKind::Platform,
                        &c.at,
                        r.to_string(),
                    )),
                    None => ConfigPlanError::Backend(e),
                })?
            };
            ids.push(id);
        }
        Ok(ids)
    }

    /// The named classes [`GroupOptions::prune`] takes away: this library's own
    /// ([`BackendExt::own_class_names`]) whose names start with the prefix and are none of
    /// `names` (the file's groups), each with the changes that remove it.
    fn stale<B: Backend>(
        &self,
        backend: &mut B,
        options: &GroupOptions,
        names: &[String],
        adopted: &[(ClassId, String)],
    ) -> Result<Vec<Stale>, ConfigPlanError<B::Error>> {
        let mut own = backend.own_class_names();
        own.extend(adopted.iter().cloned());
        let cpus = backend.cpu_classes().map_err(ConfigPlanError::Backend)?;
        let mut out = Vec::new();
        for (class, name) in own {
            if !name.starts_with(&options.prefix) || names.contains(&name) {
                continue;
            }
            let removal = super::apply::removal_changes(backend, class, &name, &cpus)
                .map_err(ConfigPlanError::Backend)?;
            let tasks = removal
                .iter()
                .filter(|(c, _)| matches!(c, Change::Task { .. }))
                .count();
            if tasks > 0 {
                return Err(ConfigPlanError::Config(self.error(
                    ConfigErrorKind::Platform,
                    &At::default(),
                    format!(
                        "--prune: group {} (COS{class}) is not in the file but holds {tasks} \
                         task(s): move them out first (goresctrl refuses to remove a \
                         non-empty group too)",
                        rdt_core::Shown(&name)
                    ),
                )));
            }
            out.push(Stale {
                class,
                name,
                changes: removal.into_iter().map(|(c, _)| c).collect(),
            });
        }
        Ok(out)
    }
}

impl GoresctrlConfig {
    /// The control groups whose names start with `options.prefix` that another tool made
    /// (not this library's, [`BackendExt::own_class_names`]), each with the class its name
    /// stands for ([`BackendExt::class_named`]): what [`GoresctrlConfig::plan_adopting`]
    /// adopts.
    fn foreign_with_prefix<B: Backend>(
        &self,
        backend: &mut B,
        options: &GroupOptions,
    ) -> Result<Vec<(ClassId, String)>, ConfigPlanError<B::Error>> {
        let own: Vec<String> = backend
            .own_class_names()
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        let groups = backend.groups().map_err(ConfigPlanError::Backend)?;
        let mut out = Vec::new();
        for g in groups {
            if g.kind != rdt_core::GroupKind::Control
                || g.path.contains('/')
                || !g.path.starts_with(&options.prefix)
                || own.contains(&g.path)
            {
                continue;
            }
            let class = backend
                .class_named(&g.path)
                .map_err(|e| match e.request() {
                    Some(r) => ConfigPlanError::Config(self.error(
                        ConfigErrorKind::Platform,
                        &At::default(),
                        format!("adopting group {}: {r}", rdt_core::Shown(&g.path)),
                    )),
                    None => ConfigPlanError::Backend(e),
                })?;
            out.push((class, g.path));
        }
        Ok(out)
    }
}

/// The tool whose groups [`GoresctrlConfig::plan_adopting`] takes over when migrating
/// (`pqos --adopt OWNER`): only a tool whose groups' names are known (the prefix and
/// the class name) can be named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PreviousOwner {
    /// goresctrl (`github.com/intel/goresctrl`, in containerd and CRI-O): its groups are
    /// `<prefix><class>`, their pods' monitor groups below them.
    Goresctrl,
}

impl std::str::FromStr for PreviousOwner {
    type Err = String;

    /// `goresctrl`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "goresctrl" => Ok(Self::Goresctrl),
            other => Err(format!(
                "`{other}`: the only tool whose groups can be adopted is goresctrl"
            )),
        }
    }
}

impl fmt::Display for PreviousOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Goresctrl => f.write_str("goresctrl"),
        }
    }
}

impl GoresctrlConfig {
    /// The file's classes as named classes without settings (the root's names left out),
    /// named as [`GroupOptions::group_name`] makes their groups, for
    /// [`super::Config::remove`]: a class's line is its `at`.
    #[must_use]
    pub fn names(&self, options: &GroupOptions) -> super::Config {
        super::Config {
            file: self.file.clone(),
            classes: self
                .partitions
                .iter()
                .flat_map(|p| &p.classes)
                .filter(|c| !c.is_root())
                .map(|c| super::ClassSpec {
                    name: options.group_name(&c.name),
                    lines: super::KeyLines::new(c.at.line),
                    ..super::ClassSpec::default()
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
