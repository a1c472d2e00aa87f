//! Declarative allocation: named classes of service in a TOML (or JSON) file.
//!
//! ```toml
//! [[class]]
//! name = "pipeline"
//! l3 = { ways = 11 }            # or mask = "0xffe00", or percent = 55
//! mba = { percent = 100 }
//! cpus = "2-7"
//!
//! [[class]]
//! name = "noisy"
//! l3 = { mask = "0x3", domains = { "1" = { ways = 4 } } }
//! mba = { percent = 20 }
//! cpus = "8-10"
//! tasks = [1234]                # or processes = ["stress-ng"]: all its threads
//! ```
//!
//! Three steps, none of which touches the hardware:
//! 1. [`Config::load`] (or [`Config::parse_toml`] / [`Config::parse_json`]) reads the file
//!    and applies every rule that needs no platform: known keys and types, sizes in range,
//!    names usable as resctrl group names, no CPU, task, process name or `cos` in two
//!    classes.
//! 2. [`Config::check`] compares it with a platform's [`Capabilities`] and [`Topology`]:
//!    cache levels and MBA present, way counts and masks the CBM accepts, domains and CPUs
//!    that exist, `cos` within the class count, and that the sizes can be placed.
//! 3. [`place`] (or [`Config::place`]) turns the sizes of one cache level in one domain
//!    into capacity bitmasks, avoiding the ways other classes hold.
//!
//! Every class keeps the line of each of its keys ([`ClassSpec::lines`]), so an error found
//! later (by a backend, at apply time) can still point into the file.
//!
//! # The file
//! The top level has one key, `class`: an array of tables (`[[class]]` in TOML, a JSON
//! array of objects under `"class"`). A file without it has no classes. A class has:
//!
//! | key | type | meaning |
//! |---|---|---|
//! | `name` | string, required | the class's name, also its resctrl group name: 1 to 64 bytes, no `/`, whitespace or control characters, not `.`, `..`, `info`, `mon_groups`, `mon_data`, `mon_L3_*`, nor `COS<n>` in any case (pqos's own classes) |
//! | `cos` | integer | a fixed class of service (for the MSR interface), unique |
//! | `l3`, `l2` | table | cache allocation: exactly one of `ways` (1 to 64), `mask` (a non-zero `"0x..."` string or an integer) or `percent` (1 to 100); `shared = true` lets it overlap other classes; `domains = { "1" = { ways = 4 } }` gives other sizes to some cache domains (ids as in `schemata`) |
//! | `mba` | table | memory bandwidth: exactly one of `percent` (1 to 100) or `mbps` (MiB/s, resctrl's `mba_MBps`) on Intel, `units` (AMD, 1/8 GB/s, 1 to 2^width: 2048 unlimited on most parts); `domains` as for caches (MBA domains are L3 domains). One unit for the whole file |
//! | `smba` | table | slow-memory bandwidth (AMD SMBA): `units` as for `mba`, and `domains` |
//! | `regions` | table | region-aware MBA (RDT 1.3, the MMIO interface): per memory region id (the MRRM's, `"1"`), one or more of `opt`, `min`, `max` (integers in units of the control window, which is full bandwidth: 0 to the window), and `domains = { "1" = { max = 64 } }` for particular L3 domains |
//! | `cpus` | string | CPUs in the kernel's list form (`"2-7,9"`) |
//! | `tasks` | array of integers | process or thread ids, 1 to 4194304 |
//! | `processes` | array of strings | process names (`comm`, at most 15 bytes): every thread of every such process |
//!
//! Unknown keys are errors everywhere. A JSON file (`.json`) has the same shape.
//!
//! # Applying
//! [`Config::plan`] converges: after the plan is applied, the classes of the file hold
//! exactly the CPUs it lists (a class without `cpus` none: CPUs no longer listed go back to
//! COS 0) and, on the OS interface, a class that lists `tasks` or `processes` holds exactly
//! the threads of those processes (other tasks of its group, such as children forked in
//! it, go back to the root group; a class that lists neither keeps its tasks, which a
//! runtime or inheritance put there). Its values are [normalised](Config::normalized) as
//! the hardware stores them, so applying the same file again writes nothing. A key the file
//! leaves out (`l3`, `mba`, ...) leaves that allocation as it is. Classes the file does not
//! name are never written.
//!
//! goresctrl's RDT configuration (YAML: partitions and classes, as containerd and CRI-O read
//! it) is the other form `pqos --apply` takes: [`goresctrl`], and [`ConfigFile`] to read
//! either.
//!
//! # References
//! - Linux `Documentation/arch/x86/resctrl.rst` (group names, `schemata`, `mba_MBps`,
//!   "Cache resource allocation", exclusive and shareable modes).
//! - Intel SDM Vol. 3B, 18.19.4 "Cache Allocation Technology" (capacity bitmasks).
//! - proc(5), `/proc/pid/comm` (15-byte command names).

mod apply;
mod check;
mod error;
pub mod goresctrl;
mod load;
mod node;
mod parse;
mod place;
pub mod policy;
#[cfg(test)]
mod tests;
mod yaml;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use apply::{ConfigPlan, ConfigPlanError};
pub use error::{ConfigError, ConfigErrorKind, ConfigWarning, NOTHING_RUNS};
pub use load::MAX_CONFIG_BYTES;
pub use place::{PlaceError, PlaceRequest, place};

use rdt_core::{
    BwControl, CacheBitmask, CacheDomain, Capabilities, CatCaps, CatResource, ClassId, CpuSet,
    MbaLimit, MemRegion, TaskId, Topology,
};

/// A configuration file of either form: named classes (TOML or JSON) or goresctrl's YAML.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigFile {
    /// Named classes ([`Config`]).
    Classes(Config),
    /// goresctrl's partitions and classes ([`goresctrl::GoresctrlConfig`]).
    Goresctrl(goresctrl::GoresctrlConfig),
}

impl ConfigFile {
    /// Reads a configuration file of either form. goresctrl's YAML is recognised by the
    /// name (`.yaml`, `.yml`, any case) or by a line that starts with `partitions:` or
    /// `options:` (no TOML or JSON document has one); anything else is [`Config::load`]'s.
    ///
    /// # Errors
    /// Those of [`Config::load`] or [`goresctrl::GoresctrlConfig::load`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = load::read(path)?;
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let yaml = matches!(ext.as_deref(), Some("yaml" | "yml"))
            || text.lines().any(|l| {
                l.strip_prefix("partitions")
                    .or_else(|| l.strip_prefix("options"))
                    .is_some_and(|rest| rest.trim_start().starts_with(':'))
            });
        if yaml {
            return goresctrl::GoresctrlConfig::parse_yaml(&text, path).map(Self::Goresctrl);
        }
        if ext.as_deref() == Some("json") {
            Config::parse_json(&text, path).map(Self::Classes)
        } else {
            Config::parse_toml(&text, path).map(Self::Classes)
        }
    }

    /// Plans the file on `backend` ([`Config::plan`] or
    /// [`goresctrl::GoresctrlConfig::plan`]); `proc` names processes for the TOML form.
    ///
    /// # Errors
    /// As those.
    pub fn plan<B: rdt_core::Backend>(
        &self,
        backend: &mut B,
        proc: &rdt_host::proc::ProcFs,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        self.plan_with(backend, proc, &goresctrl::GroupOptions::default())
    }

    /// [`ConfigFile::plan`] with goresctrl's group options
    /// ([`goresctrl::GoresctrlConfig::plan_with`]).
    ///
    /// # Errors
    /// As [`ConfigFile::plan`]; options other than the default for the TOML/JSON form,
    /// whose file names its groups itself.
    pub fn plan_with<B: rdt_core::Backend>(
        &self,
        backend: &mut B,
        proc: &rdt_host::proc::ProcFs,
        options: &goresctrl::GroupOptions,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        self.plan_adopting(backend, proc, options, None)
    }

    /// [`ConfigFile::plan_with`], adopting the groups with the prefix that `previous` made
    /// ([`goresctrl::GoresctrlConfig::plan_adopting`]; `pqos --apply FILE --adopt
    /// goresctrl`). `None` adopts nothing.
    ///
    /// # Errors
    /// As [`ConfigFile::plan_with`]; `previous` for the TOML/JSON form (a migration from
    /// goresctrl is goresctrl's YAML).
    pub fn plan_adopting<B: rdt_core::Backend>(
        &self,
        backend: &mut B,
        proc: &rdt_host::proc::ProcFs,
        options: &goresctrl::GroupOptions,
        previous: Option<goresctrl::PreviousOwner>,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        match self {
            Self::Classes(c) => {
                c.refuse_group_options(options)?;
                if let Some(previous) = previous {
                    return Err(ConfigPlanError::Config(ConfigError::new(
                        ConfigErrorKind::Platform,
                        &c.file,
                        error::Location::default(),
                        format!(
                            "--adopt {previous}: a migration from {previous} applies its YAML \
                             configuration (this file names its groups itself)"
                        ),
                    )));
                }
                c.plan(backend, proc)
            }
            Self::Goresctrl(g) => g.plan_adopting(backend, options, previous),
        }
    }

    /// Plans taking the file's named classes away ([`Config::remove`]; for goresctrl's
    /// YAML, its classes but the root, named with `options`' prefix:
    /// [`goresctrl::GoresctrlConfig::names`]).
    ///
    /// # Errors
    /// As [`Config::remove`]; options other than the default for the TOML/JSON form.
    pub fn remove<B: rdt_core::Backend>(
        &self,
        backend: &mut B,
        options: &goresctrl::GroupOptions,
    ) -> Result<ConfigPlan, ConfigPlanError<B::Error>> {
        match self {
            Self::Classes(c) => {
                c.refuse_group_options(options)?;
                c.remove(backend)
            }
            Self::Goresctrl(g) => g.names(options).remove(backend),
        }
    }
}

impl Config {
    /// Refuses goresctrl's group options for a file that names its groups itself.
    fn refuse_group_options<E: std::error::Error + 'static>(
        &self,
        options: &goresctrl::GroupOptions,
    ) -> Result<(), ConfigPlanError<E>> {
        if *options == goresctrl::GroupOptions::default() {
            return Ok(());
        }
        Err(ConfigPlanError::Config(ConfigError::new(
            ConfigErrorKind::Invalid,
            &self.file,
            error::Location::default(),
            "a group prefix and --prune are goresctrl's options, for its YAML: this file \
             names its classes' groups itself (and `--remove` takes them away)",
        )))
    }
}

/// A parsed configuration: the classes, in file order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Config {
    /// The file it came from (for messages; the text may have been given directly).
    pub file: PathBuf,
    /// The classes, in the order of the file.
    pub classes: Vec<ClassSpec>,
}

/// One named class.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ClassSpec {
    /// The name (also the resctrl group name), unique in the file.
    pub name: String,
    /// A fixed class of service, for the MSR interface.
    pub cos: Option<ClassId>,
    /// L3 cache allocation.
    pub l3: Option<CacheSpec>,
    /// L2 cache allocation.
    pub l2: Option<CacheSpec>,
    /// Memory bandwidth allocation.
    pub mba: Option<MbaSpec>,
    /// Slow-memory bandwidth allocation (AMD SMBA: CXL and other slow memory), in AMD units.
    pub smba: Option<MbaSpec>,
    /// Region-aware MBA (RDT 1.3, the MMIO interface): per memory region (MRRM id), its
    /// controls (empty when the key is absent).
    pub regions: BTreeMap<MemRegion, RegionSpec>,
    /// CPUs in the class (empty when the key is absent).
    pub cpus: CpuSet,
    /// Processes or threads in the class, in file order.
    pub tasks: Vec<TaskId>,
    /// Process names (`comm`) whose every thread is in the class, in file order.
    pub processes: Vec<String>,
    /// Where the class and each of its keys are in the file.
    pub lines: KeyLines,
}

/// How much of a cache a class gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheSize {
    /// This many contiguous ways, placed by [`place`].
    Ways(u32),
    /// Exactly this capacity bitmask.
    Mask(CacheBitmask),
    /// This share of the ways, 1 to 100 percent: `round(percent × cbm_len / 100)` ways, at
    /// least 1 and at least the CBM's minimum ([`CacheSize::ways`]).
    Percent(u8),
}

/// The cache allocation of a class at one level (`l3` or `l2`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheSpec {
    /// The size in every domain not in [`CacheSpec::domains`].
    pub size: CacheSize,
    /// The class may overlap other classes' ways (`shared = true`). Otherwise its ways are
    /// its own among the configuration's non-shared classes.
    pub shared: bool,
    /// Sizes for particular cache domains.
    pub domains: BTreeMap<CacheDomain, CacheSize>,
}

/// The memory bandwidth limit of a class.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MbaSpec {
    /// The limit in every domain not in [`MbaSpec::domains`]: [`MbaLimit::Percent`] (1 to
    /// 100) or [`MbaLimit::MibPerSec`] (resctrl's `mba_MBps` controller) on Intel,
    /// [`MbaLimit::AmdUnits`] (1/8 GB/s) on AMD and always for SMBA; all MBA limits of a
    /// configuration have one unit.
    pub limit: MbaLimit,
    /// Limits for particular MBA domains (L3 cache ids).
    pub domains: BTreeMap<CacheDomain, MbaLimit>,
}

/// A class's region-aware MBA controls for one memory region (an entry of its `regions`
/// table): RDT 1.3's optimal / minimum / maximum bandwidth, each in units of the platform's
/// control window ([`rdt_core::RegionOps::bw_window`]: the window is full bandwidth).
///
/// A control the entry does not name is left as it is. Source: Intel RDT Architecture
/// Specification rev 1.3, ch. 3 (MARC); pqos v26.03's `--alloc-mem-regions`,
/// `--alloc-{opt,min,max}-bw`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RegionSpec {
    /// The controls in every L3 domain, by control.
    pub controls: BTreeMap<BwControl, u16>,
    /// Controls for particular L3 domains (cache ids, as for `mba`): each replaces the
    /// region's value of that control there; the controls it does not name are
    /// [`RegionSpec::controls`]'.
    pub domains: BTreeMap<CacheDomain, BTreeMap<BwControl, u16>>,
}

impl RegionSpec {
    /// The controls in `domain`, by control: the domain's, else the region's.
    #[must_use]
    pub fn controls_in(&self, domain: CacheDomain) -> BTreeMap<BwControl, u16> {
        let mut out = self.controls.clone();
        if let Some(d) = self.domains.get(&domain) {
            out.extend(d.iter().map(|(c, v)| (*c, *v)));
        }
        out
    }
}

/// The 1-based lines of a class and of each key in it.
///
/// Keys are dotted paths within the class: `name`, `l3`, `l3.ways`, `l3.domains.1`,
/// `l3.domains.1.mask`, `mba.percent`, `cpus`, `tasks`, `tasks[0]`, `processes[1]`. Domain
/// ids are in decimal whatever the file wrote (`"0x1"` is recorded as `l3.domains.1`). For
/// JSON a key's line is the line where its value starts.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct KeyLines {
    class: usize,
    keys: BTreeMap<String, usize>,
}

impl KeyLines {
    /// Lines of a class that starts at `class` (the `[[class]]` header in TOML, the `{` in
    /// JSON).
    #[must_use]
    pub const fn new(class: usize) -> Self {
        Self {
            class,
            keys: BTreeMap::new(),
        }
    }

    /// Records the line of `key`.
    pub fn insert(&mut self, key: impl Into<String>, line: usize) {
        self.keys.insert(key.into(), line);
    }

    /// The line where the class starts.
    #[must_use]
    pub const fn class(&self) -> usize {
        self.class
    }

    /// The line of `key` exactly, if it is in the file.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<usize> {
        self.keys.get(key).copied()
    }

    /// The line of `key`, else of its nearest enclosing key (`l3.domains.1.ways`, then
    /// `l3.domains.1`, `l3.domains`, `l3`), else of the class.
    #[must_use]
    pub fn line(&self, key: &str) -> usize {
        let mut k = key;
        loop {
            if let Some(&line) = self.keys.get(k) {
                return line;
            }
            match k.rfind(['.', '[']) {
                Some(i) => k = &k[..i],
                None => return self.class,
            }
        }
    }

    /// Every recorded key and its line, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        self.keys.iter().map(|(k, &l)| (k.as_str(), l))
    }
}

impl CacheSize {
    /// The number of ways this size stands for on a CBM of `cat.cbm_len` ways: `Ways(n)` is
    /// `n`, `Mask(m)` its set bits, `Percent(p)` is `round(p × cbm_len / 100)` (halves up),
    /// at least 1 and at least `cat.min_cbm_bits`, at most `cbm_len`.
    #[must_use]
    pub fn ways(self, cat: &CatCaps) -> u32 {
        match self {
            Self::Ways(n) => n,
            Self::Mask(m) => m.ways(),
            Self::Percent(p) => {
                let ways = (u64::from(p) * u64::from(cat.cbm_len) + 50) / 100;
                u32::try_from(ways)
                    .unwrap_or(u32::MAX)
                    .max(cat.min_cbm_bits.max(1))
                    .min(cat.cbm_len.max(1))
            }
        }
    }
}

impl fmt::Display for CacheSize {
    /// `11 ways`, `mask 0xffe00`, `55%`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ways(1) => f.write_str("1 way"),
            Self::Ways(n) => write!(f, "{n} ways"),
            Self::Mask(m) => write!(f, "mask {m:#x}"),
            Self::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl CacheSpec {
    /// The size in `domain`: its entry in [`CacheSpec::domains`], else [`CacheSpec::size`].
    #[must_use]
    pub fn size_in(&self, domain: CacheDomain) -> &CacheSize {
        self.domains.get(&domain).unwrap_or(&self.size)
    }
}

impl MbaSpec {
    /// The limit in `domain`: its entry in [`MbaSpec::domains`], else [`MbaSpec::limit`].
    #[must_use]
    pub fn limit_in(&self, domain: CacheDomain) -> MbaLimit {
        self.domains.get(&domain).copied().unwrap_or(self.limit)
    }
}

impl ClassSpec {
    /// The class's allocation at cache level `resource`, if it has one.
    #[must_use]
    pub const fn cache(&self, resource: CatResource) -> Option<&CacheSpec> {
        match resource {
            CatResource::L3 => self.l3.as_ref(),
            CatResource::L2 => self.l2.as_ref(),
        }
    }

    /// The class's cache size for `resource` in `domain` (the domain's entry, else the
    /// class's size), if the class allocates that level. Run [`place`] per domain with these.
    #[must_use]
    pub fn cache_size(&self, resource: CatResource, domain: CacheDomain) -> Option<&CacheSize> {
        self.cache(resource).map(|c| c.size_in(domain))
    }

    /// The class's MBA limit in `domain`, if it has one.
    #[must_use]
    pub fn mba_limit(&self, domain: CacheDomain) -> Option<MbaLimit> {
        self.mba.as_ref().map(|m| m.limit_in(domain))
    }

    /// The key of `resource` in the file: `l3` or `l2`.
    const fn cache_key(resource: CatResource) -> &'static str {
        match resource {
            CatResource::L3 => "l3",
            CatResource::L2 => "l2",
        }
    }
}

impl Config {
    /// Parses TOML text. `file` names the source in errors and is kept in
    /// [`Config::file`]; nothing is read from it.
    ///
    /// # Errors
    /// [`ConfigErrorKind::Syntax`] for TOML syntax (with the parser's message and line);
    /// [`ConfigErrorKind::Invalid`] for any rule of the [module](self) broken: an unknown
    /// key, a wrong type, a class without a name, a name that is invalid or used twice, not
    /// exactly one of `ways`/`mask`/`percent` (or `percent`/`mbps`), a value out of range,
    /// a zero mask or way count, two MBA units, a CPU, task, process name or `cos` in two
    /// classes. The error names the file, line, class and key.
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use rdt_config::{CacheSize, Config};
    /// let cfg = Config::parse_toml(
    ///     "[[class]]\nname = \"db\"\nl3 = { ways = 4 }\ncpus = \"0-3\"\n",
    ///     Path::new("cfg.toml"),
    /// )?;
    /// assert_eq!(cfg.classes[0].l3.as_ref().unwrap().size, CacheSize::Ways(4));
    /// assert_eq!(cfg.classes[0].lines.line("l3.ways"), 3);
    ///
    /// let err = Config::parse_toml("[[class]]\nname = \"db\"\nl3 = { ways = 0 }\n", Path::new("cfg.toml"))
    ///     .unwrap_err();
    /// assert_eq!(err.to_string(), "cfg.toml:3: class \"db\": l3.ways: 0 ways: a class needs at least one cache way");
    /// # Ok::<(), rdt_config::ConfigError>(())
    /// ```
    pub fn parse_toml(text: &str, file: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let file = file.as_ref();
        let root = node::from_toml(text).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::Syntax,
                file,
                error::Location {
                    line: e.line,
                    ..error::Location::default()
                },
                format!("TOML syntax: {}", e.message),
            )
        })?;
        parse::config(&root, file, node::Format::Toml)
    }

    /// Parses JSON text of the same shape as the TOML form (`{"class": [{"name": ...}]}`).
    ///
    /// # Errors
    /// As [`Config::parse_toml`]; syntax errors carry serde_json's line and column. A JSON
    /// object may repeat a key, which is refused here.
    pub fn parse_json(text: &str, file: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let file = file.as_ref();
        let root = node::from_json(text).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::Syntax,
                file,
                error::Location {
                    line: (e.line > 0).then_some(e.line),
                    ..error::Location::default()
                },
                format!("JSON syntax: {} (column {})", e.message, e.column),
            )
        })?;
        parse::config(&root, file, node::Format::Json)
    }

    /// Reads and parses a configuration file: JSON when the name ends in `.json` (any
    /// case), TOML otherwise.
    ///
    /// The file is opened without blocking and checked with `fstat` before anything is
    /// read: only a regular file (or a symbolic link to one) is read, never a FIFO, device,
    /// socket or directory. At most [`MAX_CONFIG_BYTES`] are read.
    ///
    /// # Errors
    /// [`ConfigErrorKind::Io`] when the file cannot be opened or read (the OS error is the
    /// source), [`ConfigErrorKind::NotRegularFile`], [`ConfigErrorKind::TooLarge`],
    /// [`ConfigErrorKind::NotUtf8`] (naming the byte offset and line of the first invalid
    /// byte), then the errors of [`Config::parse_toml`] / [`Config::parse_json`].
    ///
    /// # Examples
    /// ```no_run
    /// use rdt_config::Config;
    /// let cfg = Config::load("classes.toml")?; // any path form: &str, String, PathBuf, &Path
    /// println!("{} classes", cfg.classes.len());
    /// # Ok::<(), rdt_config::ConfigError>(())
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = load::read(path)?;
        let json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if json {
            Self::parse_json(&text, path)
        } else {
            Self::parse_toml(&text, path)
        }
    }

    /// The class called `name`.
    #[must_use]
    pub fn class(&self, name: &str) -> Option<&ClassSpec> {
        self.classes.iter().find(|c| c.name == name)
    }

    /// Checks the configuration against a platform, and returns what it accepts with a
    /// remark ([`ConfigWarning`]: a class with no CPU, task or process; MiB/s limits the
    /// capabilities cannot confirm). An MBA percentage the hardware rounds is
    /// [`Config::normalized`]'s.
    ///
    /// Checked: the cache levels and MBA the classes use exist; way counts are within the
    /// CBM length and at least its minimum; masks pass [`Capabilities::check_mask`]; MBA
    /// limits pass [`Capabilities::check_mba_limit`]'s unit and range rules; `domains`
    /// name domains of `topology`; CPUs are in `topology`; `cos` is below the class count
    /// of every resource the class uses ([`Capabilities::check_cat_class`],
    /// [`Capabilities::check_mba_class`], [`Capabilities::check_class`] on MSR); and the
    /// sizes of each level can be [placed](place) in every domain, assuming no other
    /// class holds ways (the caller repeats the placement with the ways taken at apply
    /// time).
    ///
    /// # Errors
    /// The first problem found, as [`ConfigErrorKind::Platform`] or
    /// [`ConfigErrorKind::Placement`], naming the file, line, class and key.
    pub fn check(
        &self,
        caps: &Capabilities,
        topology: &Topology,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        check::check(self, caps, topology)
    }

    /// The configuration with every value as the platform stores it, and a warning (file,
    /// line, key) for each value that changed: MBA and SMBA limits as
    /// [`rdt_core::MbaCaps::stored_limit`] gives them for `interface` (Intel percentages
    /// rounded to the granularity: `percent = 95` is 100 % in 10 % steps). Cache sizes
    /// need none: ways, percentages and masks become exact masks when
    /// [placed](Config::place). [`Config::plan`] plans the normalised values, so that a
    /// value the hardware rounds is not written again by every apply. Run it after
    /// [`Config::check`] (an out-of-range value is left as it is here).
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use rdt_config::Config;
    /// use rdt_core::fake::FakeBackend;
    /// use rdt_core::{Backend, BackendExt, Interface, MbaLimit};
    /// let b = FakeBackend::intel_2s();
    /// let cfg = Config::parse_toml("[[class]]\nname = \"db\"\nmba = { percent = 95 }\n", Path::new("c.toml"))?;
    /// let (normal, warnings) = cfg.normalized(b.capabilities(), Interface::Os);
    /// assert_eq!(normal.classes[0].mba.as_ref().unwrap().limit, MbaLimit::Percent(100));
    /// assert_eq!(
    ///     warnings[0].to_string(),
    ///     "c.toml:3: class \"db\": mba.percent: percent 95 is applied as percent 100: the MBA \
    ///      granularity is 10% (rounded up, as the kernel stores it)"
    /// );
    /// # Ok::<(), rdt_config::ConfigError>(())
    /// ```
    #[must_use]
    pub fn normalized(
        &self,
        caps: &Capabilities,
        interface: rdt_core::Interface,
    ) -> (Self, Vec<ConfigWarning>) {
        check::normalize(self, caps, interface)
    }

    /// Places the classes' sizes for cache level `resource` in `domain` ([`place`], in file
    /// order), keeping out of the ways in `taken` (held by classes outside the
    /// configuration). Returns each class that allocates `resource` with its mask.
    ///
    /// # Errors
    /// [`PlaceError`] as [`place`] gives it.
    pub fn place(
        &self,
        resource: CatResource,
        cat: &CatCaps,
        domain: CacheDomain,
        taken: u64,
    ) -> Result<Vec<(&ClassSpec, CacheBitmask)>, PlaceError> {
        let classes: Vec<(&ClassSpec, &CacheSpec)> = self
            .classes
            .iter()
            .filter_map(|c| c.cache(resource).map(|s| (c, s)))
            .collect();
        let requests: Vec<PlaceRequest<'_>> = classes
            .iter()
            .map(|(c, s)| PlaceRequest {
                class: &c.name,
                size: *s.size_in(domain),
                shared: s.shared,
            })
            .collect();
        let masks = place(resource, cat, &requests, taken)?;
        Ok(classes.into_iter().map(|(c, _)| c).zip(masks).collect())
    }
}
