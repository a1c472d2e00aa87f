//! The rules of the configuration file that need no platform: from a [`Node`] tree (either
//! format) to a [`Config`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::error::Location;
use super::node::{Entry, FirstSeen, Format, Node, Shortened, Value};
use super::{CacheSize, CacheSpec, ClassSpec, Config, ConfigError, ConfigErrorKind, KeyLines};
use super::{MbaSpec, RegionSpec};
use rdt_core::{
    BwControl, CacheBitmask, CacheDomain, ClassId, CpuSet, MAX_TASK_ID, MbaLimit, MemRegion,
    ParseNumberError, TaskId, parse_number,
};

/// The keys of a class.
const CLASS_KEYS: &[&str] = &[
    "name",
    "cos",
    "l3",
    "l2",
    "mba",
    "smba",
    "regions",
    "cpus",
    "tasks",
    "processes",
];
const CACHE_KEYS: &[&str] = &["ways", "mask", "percent", "shared", "domains"];
const CACHE_SIZE_KEYS: &[&str] = &["ways", "mask", "percent"];
const MBA_KEYS: &[&str] = &["percent", "mbps", "units", "domains"];
const MBA_LIMIT_KEYS: &[&str] = &["percent", "mbps", "units"];
const REGION_KEYS: &[&str] = &["opt", "min", "max", "domains"];
const REGION_CONTROL_KEYS: &[&str] = &["opt", "min", "max"];

/// The longest class name, in bytes.
pub(super) const MAX_NAME_BYTES: usize = 64;
/// The longest process name that can match: the kernel's `comm` is `TASK_COMM_LEN` (16)
/// bytes with its terminating NUL.
pub(super) const MAX_COMM_BYTES: usize = 15;

/// Builds [`ConfigError`]s for one file.
struct Cx<'a> {
    file: &'a Path,
    format: Format,
}

impl Cx<'_> {
    fn top_error(&self, line: usize, key: Option<&str>, message: String) -> ConfigError {
        ConfigError::new(
            ConfigErrorKind::Invalid,
            self.file,
            Location {
                line: Some(line),
                key: key.map(str::to_owned),
                ..Location::default()
            },
            message,
        )
    }

    const fn table_word(&self) -> &'static str {
        match self.format {
            Format::Toml => "a table",
            Format::Json => "an object",
            Format::Yaml => "a mapping",
        }
    }

    fn describe(&self, node: &Node) -> String {
        node.value.describe(self.format)
    }
}

/// `a.b`, or `b` when `a` is empty.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// `` `a`, `b` or `c` ``.
fn list(keys: &[&str]) -> String {
    match keys {
        [] => String::new(),
        [one] => format!("`{one}`"),
        [init @ .., last] => format!(
            "{} or `{last}`",
            init.iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Why `name` cannot name a class, if it cannot.
pub(super) fn name_problem(name: &str) -> Option<String> {
    let shown = Shortened(name);
    if name.is_empty() {
        return Some("the name is empty".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Some(format!(
            "name {shown:?} is {} bytes long, the limit is {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    if name.contains('/') {
        return Some(format!(
            "name {shown:?} contains `/`: names are resctrl directory names"
        ));
    }
    if name == "." || name == ".." {
        return Some(format!("name {shown:?} is not a usable directory name"));
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!(
            "name {shown:?} contains whitespace or a control character"
        ));
    }
    if matches!(name, "info" | "mon_groups" | "mon_data") || name.starts_with("mon_L3_") {
        return Some(format!(
            "name {shown:?} is reserved by resctrl (info, mon_groups, mon_data, mon_L3_*)"
        ));
    }
    let is_cos = name.len() > 3
        && name.as_bytes()[..3].eq_ignore_ascii_case(b"cos")
        && name.as_bytes()[3..].iter().all(u8::is_ascii_digit);
    if is_cos {
        return Some(format!(
            "name {shown:?} is reserved: COS<n> names are pqos's own classes (pqos -e/-a)"
        ));
    }
    None
}

/// The state of one class while it is parsed: its label for messages and its key lines.
struct ClassCx<'a> {
    cx: &'a Cx<'a>,
    index: usize,
    /// The name, once known to be valid (messages then say `class "name"`, else `class #n`).
    name: Option<String>,
    lines: KeyLines,
}

impl ClassCx<'_> {
    fn error(&self, line: usize, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(
            ConfigErrorKind::Invalid,
            self.cx.file,
            Location {
                line: Some(line),
                class_name: self.name.clone(),
                class_index: Some(self.index),
                key: (!key.is_empty()).then(|| key.to_owned()),
            },
            message,
        )
    }

    /// Checks that `node` is a table whose keys are all in `allowed` and none repeated (JSON
    /// allows repeats; TOML refuses them while parsing). `path` is the key of the table
    /// (`l3`, `l3.domains.0`), `""` for the class itself.
    fn table<'n>(
        &self,
        node: &'n Node,
        path: &str,
        allowed: &[&str],
    ) -> Result<&'n [Entry], ConfigError> {
        let Value::Table(entries) = &node.value else {
            return Err(self.wrong_type(node, path, self.cx.table_word()));
        };
        // A domains table may be large.
        let mut first_lines = FirstSeen::new();
        for e in entries {
            let key = join(path, &e.key);
            if !allowed.is_empty() && !allowed.contains(&e.key.as_str()) {
                let what = if path.is_empty() {
                    "a class".to_owned()
                } else {
                    format!("`{path}`")
                };
                return Err(self.error(
                    e.line,
                    &key,
                    format!(
                        "unknown key {:?}: {what} takes {}",
                        Shortened(&e.key),
                        list(allowed)
                    ),
                ));
            }
            if let Some(first) = first_lines.earlier(e.key.as_str(), e.line) {
                return Err(self.error(
                    e.line,
                    &key,
                    format!("key given twice (first on line {first})"),
                ));
            }
        }
        Ok(entries)
    }

    fn wrong_type(&self, node: &Node, key: &str, expected: &str) -> ConfigError {
        self.error(
            node.line,
            key,
            format!("expected {expected}, found {}", self.cx.describe(node)),
        )
    }

    fn integer(&self, node: &Node, key: &str) -> Result<i128, ConfigError> {
        match node.value {
            Value::Integer(i) => Ok(i),
            _ => Err(self.wrong_type(node, key, "an integer")),
        }
    }

    fn string<'n>(
        &self,
        node: &'n Node,
        key: &str,
        expected: &str,
    ) -> Result<&'n str, ConfigError> {
        match &node.value {
            Value::String(s) => Ok(s),
            _ => Err(self.wrong_type(node, key, expected)),
        }
    }

    fn array<'n>(
        &self,
        node: &'n Node,
        key: &str,
        expected: &str,
    ) -> Result<&'n [Node], ConfigError> {
        match &node.value {
            Value::Array(items) => Ok(items),
            _ => Err(self.wrong_type(node, key, expected)),
        }
    }

    /// An integer percentage, 1 to 100.
    fn percent(&self, node: &Node, key: &str) -> Result<u8, ConfigError> {
        let p = self.integer(node, key)?;
        u8::try_from(p)
            .ok()
            .filter(|p| (1..=100).contains(p))
            .ok_or_else(|| {
                self.error(
                    node.line,
                    key,
                    format!("percent {p} is out of range: a percentage is 1 to 100"),
                )
            })
    }

    /// `ways`, `mask` or `percent` (`which`) of a cache table.
    fn cache_size(&self, which: &str, node: &Node, key: &str) -> Result<CacheSize, ConfigError> {
        match which {
            "ways" => {
                let n = self.integer(node, key)?;
                match u32::try_from(n) {
                    Ok(0) => Err(self.error(
                        node.line,
                        key,
                        "0 ways: a class needs at least one cache way",
                    )),
                    Ok(n @ 1..=64) => Ok(CacheSize::Ways(n)),
                    _ if n < 0 => Err(self.error(
                        node.line,
                        key,
                        format!("{n} ways: a way count is a positive integer"),
                    )),
                    _ => Err(self.error(
                        node.line,
                        key,
                        format!("{n} ways: a capacity bitmask has at most 64 ways"),
                    )),
                }
            }
            "mask" => self.mask(node, key).map(CacheSize::Mask),
            _ => self.percent(node, key).map(CacheSize::Percent),
        }
    }

    /// A mask: a `0x` string or an integer, not zero.
    fn mask(&self, node: &Node, key: &str) -> Result<CacheBitmask, ConfigError> {
        let bits = match &node.value {
            Value::String(s) => {
                let t = s.trim();
                if !(t.starts_with("0x") || t.starts_with("0X")) {
                    let hint = if !t.is_empty()
                        && t.len() <= 16
                        && t.bytes().all(|b| b.is_ascii_hexdigit())
                    {
                        format!(" (\"0x{t}\" if hexadecimal)")
                    } else {
                        String::new()
                    };
                    return Err(self.error(
                        node.line,
                        key,
                        format!(
                            "mask {:?} is ambiguous: write a mask as hexadecimal with 0x{hint} \
                             or as an integer",
                            Shortened(s),
                        ),
                    ));
                }
                match parse_number(t) {
                    Ok(bits) => bits,
                    Err(ParseNumberError::TooLarge) => {
                        return Err(self.error(
                            node.line,
                            key,
                            format!(
                                "mask {:?} has more than 64 bits: a capacity bitmask has at most 64 ways",
                                Shortened(s)
                            ),
                        ));
                    }
                    Err(_) => {
                        return Err(self.error(
                            node.line,
                            key,
                            format!(
                                "mask {:?} is not a hexadecimal number such as \"0xffe00\"",
                                Shortened(s)
                            ),
                        ));
                    }
                }
            }
            Value::Integer(i) => {
                match u64::try_from(*i) {
                    Ok(bits) => bits,
                    Err(_) if *i < 0 => {
                        return Err(self.error(
                            node.line,
                            key,
                            format!("mask {i} is negative: a mask is a positive bitmask"),
                        ));
                    }
                    Err(_) => {
                        return Err(self.error(
                        node.line,
                        key,
                        format!("mask {i} has more than 64 bits: a capacity bitmask has at most 64 ways"),
                    ));
                    }
                }
            }
            _ => {
                return Err(self.wrong_type(
                    node,
                    key,
                    "a hexadecimal string such as \"0xffe00\" or an integer",
                ));
            }
        };
        CacheBitmask::new(bits).map_err(|_| {
            self.error(
                node.line,
                key,
                "mask 0x0 is zero: a class needs at least one cache way",
            )
        })
    }

    /// A domain key (`"0"`, `"1"`): a cache id.
    fn domain(&self, entry: &Entry, key: &str) -> Result<CacheDomain, ConfigError> {
        parse_number(&entry.key)
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .map(CacheDomain::new)
            .ok_or_else(|| {
                self.error(
                entry.line,
                key,
                format!(
                    "domain {:?} is not a cache domain id (a number as in schemata, such as \"0\")",
                    Shortened(&entry.key)
                ),
            )
            })
    }

    /// Finds exactly one of `keys` among `entries` (`path` is the table's key).
    fn exactly_one<'n>(
        &self,
        entries: &'n [Entry],
        node: &Node,
        path: &str,
        keys: &[&str],
    ) -> Result<&'n Entry, ConfigError> {
        let mut found = entries.iter().filter(|e| keys.contains(&e.key.as_str()));
        let first = found.next().ok_or_else(|| {
            let what = if keys == MBA_LIMIT_KEYS {
                "limit"
            } else {
                "size"
            };
            self.error(
                node.line,
                path,
                format!("no {what} given: give exactly one of {}", list(keys)),
            )
        })?;
        if let Some(second) = found.next() {
            return Err(self.error(
                second.line,
                &join(path, &second.key),
                format!(
                    "`{}` and `{}` both given: give exactly one of {}",
                    first.key,
                    second.key,
                    list(keys)
                ),
            ));
        }
        Ok(first)
    }

    fn record(&mut self, key: &str, line: usize) {
        self.lines.insert(key, line);
    }

    /// An `l3` or `l2` table.
    fn cache(&mut self, node: &Node, path: &str) -> Result<CacheSpec, ConfigError> {
        let entries = self.table(node, path, CACHE_KEYS)?;
        let size_entry = self.exactly_one(entries, node, path, CACHE_SIZE_KEYS)?;
        let mut spec = CacheSpec {
            size: self.cache_size(
                &size_entry.key,
                &size_entry.node,
                &join(path, &size_entry.key),
            )?,
            shared: false,
            domains: BTreeMap::new(),
        };
        for e in entries {
            let key = join(path, &e.key);
            self.record(&key, e.line);
            match e.key.as_str() {
                "shared" => match e.node.value {
                    Value::Bool(b) => spec.shared = b,
                    _ => return Err(self.wrong_type(&e.node, &key, "true or false")),
                },
                "domains" => {
                    for (domain, skey, s) in self.per_domain(&e.node, &key, CACHE_SIZE_KEYS)? {
                        let size = self.cache_size(&s.key, &s.node, &skey)?;
                        spec.domains.insert(domain, size);
                    }
                }
                _ => {} // the size, read above
            }
        }
        Ok(spec)
    }

    /// The per-domain values of a `domains` table at `key`: each domain id (given once), the
    /// key of its value and the entry with exactly one of `keys`; every key's line recorded.
    fn per_domain<'n>(
        &mut self,
        node: &'n Node,
        key: &str,
        keys: &[&str],
    ) -> Result<Vec<(CacheDomain, String, &'n Entry)>, ConfigError> {
        let mut out = Vec::new();
        let mut raw_keys: HashMap<CacheDomain, &str> = HashMap::new();
        for d in self.domains_table(node, key)? {
            let domain = self.domain(d, &join(key, &d.key))?;
            let dkey = format!("{key}.{domain}");
            self.record(&dkey, d.line);
            if let Some(first) = raw_keys.insert(domain, &d.key) {
                return Err(self.error(
                    d.line,
                    &dkey,
                    format!("domain {domain} given twice (also as {first:?})"),
                ));
            }
            let values = self.table(&d.node, &dkey, keys)?;
            let v = self.exactly_one(values, &d.node, &dkey, keys)?;
            let vkey = join(&dkey, &v.key);
            self.record(&vkey, v.line);
            out.push((domain, vkey, v));
        }
        Ok(out)
    }

    /// The entries of a `domains` table (any keys; each is checked as a domain id after).
    fn domains_table<'n>(&self, node: &'n Node, key: &str) -> Result<&'n [Entry], ConfigError> {
        if !matches!(node.value, Value::Table(_)) {
            return Err(self.wrong_type(
                node,
                key,
                &format!("{} of domain ids", self.cx.table_word()),
            ));
        }
        self.table(node, key, &[])
    }

    /// `percent`, `mbps` or `units` of an MBA or SMBA table.
    fn mba_limit(&self, which: &str, node: &Node, key: &str) -> Result<MbaLimit, ConfigError> {
        if which == "percent" {
            return self.percent(node, key).map(MbaLimit::Percent);
        }
        let v = self.integer(node, key)?;
        if which == "units" {
            // AMD's 1/8 GB/s units; the platform's range (1 to 2^width) is checked later
            return u32::try_from(v).map(MbaLimit::AmdUnits).map_err(|_| {
                self.error(
                    node.line,
                    key,
                    format!("units {v} is out of range: 1 to {} (1/8 GB/s)", u32::MAX),
                )
            });
        }
        match u32::try_from(v) {
            Ok(0) => Err(self.error(
                node.line,
                key,
                "mbps 0: a bandwidth limit is at least 1 MiB/s",
            )),
            Ok(v) => Ok(MbaLimit::MibPerSec(v)),
            Err(_) => Err(self.error(
                node.line,
                key,
                format!("mbps {v} is out of range: 1 to {} MiB/s", u32::MAX),
            )),
        }
    }

    /// The `mba` table.
    fn mba(&mut self, node: &Node, path: &str) -> Result<MbaSpec, ConfigError> {
        let entries = self.table(node, path, MBA_KEYS)?;
        let limit_entry = self.exactly_one(entries, node, path, MBA_LIMIT_KEYS)?;
        let limit = self.mba_limit(
            &limit_entry.key,
            &limit_entry.node,
            &join(path, &limit_entry.key),
        )?;
        let mut spec = MbaSpec {
            limit,
            domains: BTreeMap::new(),
        };
        for e in entries {
            let key = join(path, &e.key);
            self.record(&key, e.line);
            if e.key != "domains" {
                continue;
            }
            for (domain, lkey, l) in self.per_domain(&e.node, &key, MBA_LIMIT_KEYS)? {
                let value = self.mba_limit(&l.key, &l.node, &lkey)?;
                if unit(value) != unit(limit) {
                    return Err(self.error(
                        l.line,
                        &lkey,
                        format!(
                            "{} mixes units with the class's {}: the unit is platform-wide \
                             (percent or mbps on Intel, units on AMD)",
                            show_mba(value),
                            show_mba(limit)
                        ),
                    ));
                }
                spec.domains.insert(domain, value);
            }
        }
        Ok(spec)
    }
}

impl ClassCx<'_> {
    /// The `regions` table at `path`: per memory region id, its controls
    /// ([`RegionSpec`]). The ids, the window and the domains are the platform's, checked
    /// when the file is planned.
    fn regions(
        &mut self,
        node: &Node,
        path: &str,
    ) -> Result<BTreeMap<MemRegion, RegionSpec>, ConfigError> {
        if !matches!(node.value, Value::Table(_)) {
            return Err(self.wrong_type(
                node,
                path,
                &format!("{} of memory region ids", self.cx.table_word()),
            ));
        }
        let entries = self.table(node, path, &[])?;
        if entries.is_empty() {
            return Err(self.error(
                node.line,
                path,
                "no memory region given: name one, such as `regions = { \"1\" = { max = 64 } }`",
            ));
        }
        let mut out = BTreeMap::new();
        let mut raw_keys: HashMap<MemRegion, &str> = HashMap::new();
        for e in entries {
            let region = parse_number(&e.key)
                .ok()
                .and_then(|n| u8::try_from(n).ok())
                .map(MemRegion)
                .ok_or_else(|| {
                    self.error(
                        e.line,
                        &join(path, &e.key),
                        format!(
                            "region {:?} is not a memory region id (the MRRM's region number, \
                             0 to 255, such as \"1\"; pqos --print-mem-regions lists them)",
                            Shortened(&e.key)
                        ),
                    )
                })?;
            let rkey = format!("{path}.{region}");
            self.record(&rkey, e.line);
            if let Some(first) = raw_keys.insert(region, &e.key) {
                return Err(self.error(
                    e.line,
                    &rkey,
                    format!("region {region} given twice (also as {first:?})"),
                ));
            }
            let values = self.table(&e.node, &rkey, REGION_KEYS)?;
            let mut spec = RegionSpec::default();
            for v in values {
                let vkey = join(&rkey, &v.key);
                self.record(&vkey, v.line);
                if v.key == "domains" {
                    for d in self.domains_table(&v.node, &vkey)? {
                        let domain = self.domain(d, &join(&vkey, &d.key))?;
                        let dkey = format!("{vkey}.{domain}");
                        self.record(&dkey, d.line);
                        if spec.domains.contains_key(&domain) {
                            return Err(self.error(
                                d.line,
                                &dkey,
                                format!("domain {domain} given twice"),
                            ));
                        }
                        let controls = self.region_controls(&d.node, &dkey)?;
                        spec.domains.insert(domain, controls);
                    }
                } else {
                    let control = region_control(&v.key);
                    spec.controls
                        .insert(control, self.region_value(&v.node, &vkey, control)?);
                }
            }
            if spec.controls.is_empty() && spec.domains.is_empty() {
                return Err(self.error(
                    e.line,
                    &rkey,
                    format!(
                        "no control given: give one or more of {}",
                        list(REGION_CONTROL_KEYS)
                    ),
                ));
            }
            out.insert(region, spec);
        }
        Ok(out)
    }

    /// The controls of a `regions.N.domains.D` table at `key`: one or more.
    fn region_controls(
        &mut self,
        node: &Node,
        key: &str,
    ) -> Result<BTreeMap<BwControl, u16>, ConfigError> {
        let entries = self.table(node, key, REGION_CONTROL_KEYS)?;
        if entries.is_empty() {
            return Err(self.error(
                node.line,
                key,
                format!(
                    "no control given: give one or more of {}",
                    list(REGION_CONTROL_KEYS)
                ),
            ));
        }
        let mut out = BTreeMap::new();
        for c in entries {
            let ckey = join(key, &c.key);
            self.record(&ckey, c.line);
            let control = region_control(&c.key);
            out.insert(control, self.region_value(&c.node, &ckey, control)?);
        }
        Ok(out)
    }

    /// A region control's value: a non-negative integer of 16 bits at most (the platform's
    /// control window, which bounds it, is checked when the file is planned).
    fn region_value(&self, node: &Node, key: &str, control: BwControl) -> Result<u16, ConfigError> {
        let v = self.integer(node, key)?;
        u16::try_from(v).map_err(|_| {
            self.error(
                node.line,
                key,
                format!(
                    "{control} {v} is out of range: a region bandwidth control is 0 to the \
                     platform's control window (its value of full bandwidth)"
                ),
            )
        })
    }
}

/// The control a key of [`REGION_CONTROL_KEYS`] names: `opt`, `min` or `max`
/// ([`BwControl::name`]).
fn region_control(key: &str) -> BwControl {
    BwControl::ALL
        .into_iter()
        .find(|c| c.name() == key)
        .unwrap_or(BwControl::Max)
}

/// The file key of an MBA limit's unit.
pub(super) const fn unit(limit: MbaLimit) -> &'static str {
    match limit {
        MbaLimit::Percent(_) => "percent",
        MbaLimit::MibPerSec(_) => "mbps",
        MbaLimit::AmdUnits(_) => "units",
    }
}

/// `percent 20`, `mbps 3000`, `units 256`.
pub(super) fn show_mba(limit: MbaLimit) -> String {
    format!("{} {}", unit(limit), limit.value())
}

/// The keys of a class that a policy's workload takes ([`super::policy`]): what it is, not
/// what it gets.
pub(super) const WORKLOAD_KEYS: &[&str] = &["name", "cpus", "tasks", "processes"];

/// Parses the workloads of one file as classes ([`WORKLOAD_KEYS`]): names, CPUs, tasks
/// and processes each in one workload only, across every call.
pub(super) struct Workloads<'a> {
    cx: Cx<'a>,
    seen: Seen,
    index: usize,
}

impl<'a> Workloads<'a> {
    pub(super) fn new(file: &'a Path, format: Format) -> Self {
        Self {
            cx: Cx { file, format },
            seen: Seen::default(),
            index: 0,
        }
    }

    /// The workload `node`, a table whose keys other than [`WORKLOAD_KEYS`] the caller has
    /// read and left out (`node` holds only these).
    pub(super) fn parse(&mut self, node: &Node) -> Result<ClassSpec, ConfigError> {
        let spec = class(&self.cx, self.index, node, &mut self.seen, WORKLOAD_KEYS)?;
        self.index += 1;
        Ok(spec)
    }
}

/// Parses one class; `seen` holds what earlier classes claimed; `allowed` are its keys.
fn class(
    cx: &Cx<'_>,
    index: usize,
    node: &Node,
    seen: &mut Seen,
    allowed: &[&str],
) -> Result<ClassSpec, ConfigError> {
    let mut ccx = ClassCx {
        cx,
        index,
        name: None,
        lines: KeyLines::new(node.line),
    };
    let entries = ccx.table(node, "", allowed)?;
    // The name first, so that every other message can say which class.
    let name = ccx.name(node, entries, seen)?;
    ccx.name = Some(name.to_owned());
    let mut spec = ClassSpec {
        name: name.to_owned(),
        ..ClassSpec::default()
    };
    for e in entries {
        let key = e.key.as_str();
        ccx.record(key, e.line);
        match key {
            "cos" => spec.cos = Some(ccx.cos(e, seen)?),
            "l3" => spec.l3 = Some(ccx.cache(&e.node, key)?),
            "l2" => spec.l2 = Some(ccx.cache(&e.node, key)?),
            "mba" => spec.mba = Some(ccx.mba_class(e, seen)?),
            "smba" => spec.smba = Some(ccx.smba_class(e)?),
            "regions" => spec.regions = ccx.regions(&e.node, key)?,
            "cpus" => spec.cpus = ccx.cpus(e, seen)?,
            "tasks" => spec.tasks = ccx.tasks(e, seen)?,
            "processes" => spec.processes = ccx.processes(e, seen)?,
            _ => {} // `name`, read above
        }
    }
    spec.lines = ccx.lines;
    seen.add(index, &spec);
    Ok(spec)
}

impl ClassCx<'_> {
    /// The class's name: present, valid and not used before.
    fn name<'n>(
        &self,
        node: &Node,
        entries: &'n [Entry],
        seen: &Seen,
    ) -> Result<&'n str, ConfigError> {
        let entry = entries
            .iter()
            .find(|e| e.key == "name")
            .ok_or_else(|| self.error(node.line, "name", "missing: every class needs a name"))?;
        let name = self.string(&entry.node, "name", "a string")?;
        if let Some(problem) = name_problem(name) {
            return Err(self.error(entry.line, "name", problem));
        }
        if let Some(&(first, line)) = seen.names.get(name) {
            return Err(self.error(
                entry.line,
                "name",
                format!(
                    "name {name:?} is already the name of class #{} (line {line})",
                    first + 1
                ),
            ));
        }
        Ok(name)
    }

    fn cos(&self, e: &Entry, seen: &Seen) -> Result<ClassId, ConfigError> {
        let n = self.integer(&e.node, "cos")?;
        let cos = u32::try_from(n).map(ClassId::new).map_err(|_| {
            self.error(
                e.line,
                "cos",
                format!(
                    "cos {n} is out of range: a class of service is 0 to {}",
                    u32::MAX
                ),
            )
        })?;
        if let Some((other, line)) = seen.cos.get(&cos) {
            return Err(self.error(
                e.line,
                "cos",
                format!("cos {cos} is also the cos of class {other:?} (line {line})"),
            ));
        }
        Ok(cos)
    }

    /// The `mba` table, in the unit of the classes before.
    fn mba_class(&mut self, e: &Entry, seen: &Seen) -> Result<MbaSpec, ConfigError> {
        let mba = self.mba(&e.node, "mba")?;
        if let Some((unit0, other, line)) = &seen.mba_unit
            && unit(mba.limit) != *unit0
        {
            let key = join("mba", unit(mba.limit));
            return Err(self.error(
                self.lines.line(&key),
                &key,
                format!(
                    "{} mixes units with class {other:?}'s {unit0} (line {line}): the MBA \
                         unit is platform-wide (resctrl mounted with or without mba_MBps)",
                    show_mba(mba.limit)
                ),
            ));
        }
        Ok(mba)
    }

    /// The `smba` table: AMD units only (SMBA has no percent and no `mba_MBps`).
    fn smba_class(&mut self, e: &Entry) -> Result<MbaSpec, ConfigError> {
        let smba = self.mba(&e.node, "smba")?;
        if let MbaLimit::AmdUnits(_) = smba.limit {
            return Ok(smba);
        }
        let key = join("smba", unit(smba.limit));
        Err(self.error(
            self.lines.line(&key),
            &key,
            format!(
                "{}: SMBA limits are AMD units of 1/8 GB/s (`units = N`)",
                show_mba(smba.limit)
            ),
        ))
    }

    fn cpus(&self, e: &Entry, seen: &Seen) -> Result<CpuSet, ConfigError> {
        let text = self.string(&e.node, "cpus", "a CPU list string such as \"2-7,9\"")?;
        let cpus = text
            .parse::<CpuSet>()
            .map_err(|err| self.error(e.line, "cpus", err.to_string()))?;
        if !seen.all_cpus.intersects(&cpus) {
            return Ok(cpus);
        }
        for (other, (theirs, line)) in &seen.cpus {
            if theirs.intersects(&cpus) {
                let both: CpuSet = cpus.iter().filter(|c| theirs.contains(*c)).collect();
                let (s, are) = if both.len() == 1 {
                    ("", "is")
                } else {
                    ("s", "are")
                };
                return Err(self.error(
                    e.line,
                    "cpus",
                    format!(
                        "CPU{s} {both} {are} also in class {other:?} (line {line}): a CPU is in \
                         one class only"
                    ),
                ));
            }
        }
        Ok(cpus)
    }

    fn tasks(&mut self, e: &Entry, seen: &Seen) -> Result<Vec<TaskId>, ConfigError> {
        let items = self.array(&e.node, "tasks", "an array of task ids")?;
        let mut tasks: Vec<TaskId> = Vec::with_capacity(items.len());
        let mut index: HashMap<TaskId, usize> = HashMap::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let key = format!("tasks[{i}]");
            self.record(&key, item.line);
            let n = self.integer(item, &key)?;
            let task = u64::try_from(n)
                .ok()
                .filter(|n| (1..=MAX_TASK_ID).contains(n))
                .and_then(|n| u32::try_from(n).ok())
                .map(TaskId::new)
                .ok_or_else(|| {
                    self.error(
                        item.line,
                        &key,
                        format!(
                            "task id {n} is out of range: Linux task ids are 1 to {MAX_TASK_ID}"
                        ),
                    )
                })?;
            if let Some(j) = index.insert(task, i) {
                return Err(self.error(
                    item.line,
                    &key,
                    format!("task {task} is listed twice (also tasks[{j}])"),
                ));
            }
            if let Some((other, line)) = seen.tasks.get(&task) {
                return Err(self.error(
                    item.line,
                    &key,
                    format!(
                        "task {task} is also in class {other:?} (line {line}): a task is in one \
                         class only"
                    ),
                ));
            }
            tasks.push(task);
        }
        Ok(tasks)
    }

    fn processes(&mut self, e: &Entry, seen: &Seen) -> Result<Vec<String>, ConfigError> {
        let items = self.array(&e.node, "processes", "an array of process names")?;
        let mut names: Vec<String> = Vec::with_capacity(items.len());
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let key = format!("processes[{i}]");
            self.record(&key, item.line);
            let comm = self.string(item, &key, "a process name (string)")?;
            if comm.is_empty() {
                return Err(self.error(item.line, &key, "the process name is empty"));
            }
            if comm.len() > MAX_COMM_BYTES {
                return Err(self.error(
                    item.line,
                    &key,
                    format!(
                        "process name {:?} is {} bytes long: the kernel keeps {MAX_COMM_BYTES} \
                         bytes of a command name (comm), so it would never match",
                        Shortened(comm),
                        comm.len()
                    ),
                ));
            }
            if let Some(j) = index.insert(comm, i) {
                return Err(self.error(
                    item.line,
                    &key,
                    format!("process {comm:?} is listed twice (also processes[{j}])"),
                ));
            }
            if let Some((other, line)) = seen.processes.get(comm) {
                return Err(self.error(
                    item.line,
                    &key,
                    format!(
                        "process {comm:?} is also in class {other:?} (line {line}): a task is in \
                         one class only"
                    ),
                ));
            }
            names.push(comm.to_owned());
        }
        Ok(names)
    }
}

/// What earlier classes claimed, with the claiming class's name and the line.
#[derive(Default)]
struct Seen {
    names: HashMap<String, (usize, usize)>,
    cos: HashMap<ClassId, (String, usize)>,
    cpus: Vec<(String, (CpuSet, usize))>,
    /// The union of `cpus`.
    all_cpus: CpuSet,
    tasks: HashMap<TaskId, (String, usize)>,
    processes: HashMap<String, (String, usize)>,
    /// The MBA unit of the first class with MBA.
    mba_unit: Option<(&'static str, String, usize)>,
}

impl Seen {
    fn add(&mut self, index: usize, c: &ClassSpec) {
        let l = &c.lines;
        self.names.insert(c.name.clone(), (index, l.line("name")));
        if let Some(cos) = c.cos {
            self.cos.insert(cos, (c.name.clone(), l.line("cos")));
        }
        if !c.cpus.is_empty() {
            self.all_cpus.union_with(&c.cpus);
            self.cpus
                .push((c.name.clone(), (c.cpus.clone(), l.line("cpus"))));
        }
        for (i, t) in c.tasks.iter().enumerate() {
            self.tasks
                .insert(*t, (c.name.clone(), l.line(&format!("tasks[{i}]"))));
        }
        for (i, p) in c.processes.iter().enumerate() {
            self.processes.insert(
                p.clone(),
                (c.name.clone(), l.line(&format!("processes[{i}]"))),
            );
        }
        if let (Some(mba), None) = (&c.mba, &self.mba_unit) {
            let u = unit(mba.limit);
            self.mba_unit = Some((u, c.name.clone(), l.line(&format!("mba.{u}"))));
        }
    }
}

/// The whole document.
pub(super) fn config(root: &Node, file: &Path, format: Format) -> Result<Config, ConfigError> {
    let cx = Cx { file, format };
    let Value::Table(entries) = &root.value else {
        return Err(cx.top_error(
            root.line,
            None,
            format!(
                "expected {} at the top level, found {}",
                cx.table_word(),
                cx.describe(root)
            ),
        ));
    };
    for (i, e) in entries.iter().enumerate() {
        if e.key != "class" {
            return Err(cx.top_error(
                e.line,
                Some(&e.key),
                format!(
                    "unknown top-level key {:?}: the top level holds only `class`, the array of classes",
                    Shortened(&e.key)
                ),
            ));
        }
        if let Some(first) = entries[..i].iter().find(|f| f.key == e.key) {
            return Err(cx.top_error(
                e.line,
                Some(&e.key),
                format!("key given twice (first on line {})", first.line),
            ));
        }
    }
    let mut config = Config {
        file: file.to_owned(),
        classes: Vec::new(),
    };
    let Some(classes) = entries.first() else {
        return Ok(config);
    };
    let Value::Array(items) = &classes.node.value else {
        let expected = match format {
            Format::Toml => "an array of tables ([[class]])",
            Format::Json => "an array of objects",
            Format::Yaml => "a sequence of mappings",
        };
        return Err(cx.top_error(
            classes.line,
            Some("class"),
            format!("expected {expected}, found {}", cx.describe(&classes.node)),
        ));
    };
    let mut seen = Seen::default();
    for (index, item) in items.iter().enumerate() {
        config
            .classes
            .push(class(&cx, index, item, &mut seen, CLASS_KEYS)?);
    }
    Ok(config)
}
