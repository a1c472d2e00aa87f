//! [`Config::check`]: the configuration against one platform.

use super::error::Location;
use super::parse::show_mba;
use super::place::{PlaceRequest, place};
use super::{
    CacheSize, ClassSpec, Config, ConfigError, ConfigErrorKind, ConfigWarning, PlaceError,
};
use rdt_core::{
    CacheDomain, Capabilities, CatCaps, CatResource, ClassId, CpuSet, Feature, Interface, MbaLimit,
    MbaResource, RequestError, Topology,
};

/// The file key of a size: `ways`, `mask` or `percent`.
const fn size_key(size: &CacheSize) -> &'static str {
    match size {
        CacheSize::Ways(_) => "ways",
        CacheSize::Mask(_) => "mask",
        CacheSize::Percent(_) => "percent",
    }
}

/// The key of an MBA limit: `percent`, `mbps` or `units`.
const fn mba_key(limit: MbaLimit) -> &'static str {
    super::parse::unit(limit)
}

/// Builds the errors and warnings of one class.
struct At<'a> {
    config: &'a Config,
    index: usize,
    class: &'a ClassSpec,
}

impl At<'_> {
    fn location(&self, key: &str) -> Location {
        Location {
            line: Some(self.class.lines.line(key)),
            class_name: Some(self.class.name.clone()),
            class_index: Some(self.index),
            key: Some(key.to_owned()),
        }
    }

    fn error(&self, kind: ConfigErrorKind, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(kind, &self.config.file, self.location(key), message)
    }

    fn platform(&self, key: &str, message: impl Into<String>) -> ConfigError {
        self.error(ConfigErrorKind::Platform, key, message)
    }

    fn warning(&self, key: &str, message: impl Into<String>) -> ConfigWarning {
        ConfigWarning::new(&self.config.file, self.location(key), message)
    }
}

/// `0, 1` or a note that there are none.
fn domain_list(resource: &str, domains: &[CacheDomain]) -> String {
    if domains.is_empty() {
        format!("the topology has no {resource} domains")
    } else {
        let ids: Vec<String> = domains.iter().map(ToString::to_string).collect();
        format!("{resource} domains: {}", ids.join(", "))
    }
}

fn domains_of(topology: &Topology, resource: CatResource) -> Vec<CacheDomain> {
    match resource {
        CatResource::L3 => topology.l3_domains(),
        CatResource::L2 => topology.l2_domains(),
    }
}

/// Why `feature` cannot be used: absent, or enumerated without parameters.
fn unsupported<T>(feature: &Feature<T>, name: &str) -> String {
    if feature.is_present() {
        format!("{name} is enumerated but its parameters are unknown (a partial CPUID dump?)")
    } else {
        format!("this platform has no {name}")
    }
}

/// A way count or mask against the CBM.
fn size_problem(
    caps: &Capabilities,
    resource: CatResource,
    cat: &CatCaps,
    size: &CacheSize,
) -> Option<String> {
    match *size {
        CacheSize::Ways(n) if n > cat.cbm_len => Some(format!(
            "{n} ways, but the {resource} CBM has {}",
            cat.cbm_len
        )),
        CacheSize::Ways(n) if n < cat.min_cbm_bits => Some(format!(
            "{n} ways, but {resource} CAT needs at least {} (min_cbm_bits)",
            cat.min_cbm_bits
        )),
        CacheSize::Mask(m) => caps.check_mask(resource, m).err().map(|e| e.to_string()),
        _ => None,
    }
}

/// The cache allocation of one class at one level.
fn check_cache(
    at: &At<'_>,
    caps: &Capabilities,
    topology: &Topology,
    resource: CatResource,
) -> Result<(), ConfigError> {
    let Some(spec) = at.class.cache(resource) else {
        return Ok(());
    };
    let key = ClassSpec::cache_key(resource);
    let feature = match resource {
        CatResource::L3 => &caps.l3_cat,
        CatResource::L2 => &caps.l2_cat,
    };
    let Some(cat) = caps.cat(resource) else {
        return Err(at.platform(key, unsupported(feature, &format!("{resource} CAT"))));
    };
    let skey = format!("{key}.{}", size_key(&spec.size));
    if let Some(problem) = size_problem(caps, resource, cat, &spec.size) {
        return Err(at.platform(&skey, problem));
    }
    let domains = domains_of(topology, resource);
    for (domain, size) in &spec.domains {
        let dkey = format!("{key}.domains.{domain}");
        if !domains.contains(domain) {
            return Err(at.platform(
                &dkey,
                format!(
                    "{resource} domain {domain} does not exist ({})",
                    domain_list(&resource.to_string(), &domains)
                ),
            ));
        }
        if let Some(problem) = size_problem(caps, resource, cat, size) {
            return Err(at.platform(&format!("{dkey}.{}", size_key(size)), problem));
        }
    }
    if let Some(cos) = at.class.cos {
        caps.check_cat_class(resource, cos)
            .map_err(|e| at.platform("cos", e.to_string()))?;
    }
    Ok(())
}

/// The MBA or SMBA limits of one class (`key`: `mba`, `smba`).
fn check_bandwidth(
    at: &At<'_>,
    caps: &Capabilities,
    topology: &Topology,
    resource: MbaResource,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<(), ConfigError> {
    let (key0, spec) = match resource {
        MbaResource::Mba => ("mba", &at.class.mba),
        MbaResource::Smba => ("smba", &at.class.smba),
    };
    let Some(spec) = spec else {
        return Ok(());
    };
    let feature = caps.bandwidth(resource);
    let Some(mba) = feature.get() else {
        return Err(at.platform(key0, unsupported(feature, resource.name())));
    };
    // MBA and SMBA domains are L3 cache ids (resctrl's `MB:`/`SMBA:` lines, pqos's ids).
    let domains = topology.l3_domains();
    let limits = std::iter::once((key0.to_owned(), spec.limit)).chain(
        spec.domains
            .iter()
            .map(|(d, l)| (format!("{key0}.domains.{d}"), *l)),
    );
    for (path, limit) in limits {
        if let Some(domain) = path.strip_prefix(&format!("{key0}.domains."))
            && !domains.iter().any(|d| d.to_string() == domain)
        {
            return Err(at.platform(
                &path,
                format!(
                    "{} domain {domain} does not exist ({} domains are L3 domains; {})",
                    resource.name(),
                    resource.name(),
                    domain_list("L3", &domains)
                ),
            ));
        }
        let key = format!("{path}.{}", mba_key(limit));
        match limit {
            MbaLimit::MibPerSec(_) if !mba.ctrl_enabled => warnings.push(at.warning(
                &key,
                format!(
                    "{} needs resctrl mounted with mba_MBps (the OS interface), which these \
                     capabilities do not show",
                    show_mba(limit)
                ),
            )),
            _ => {
                // Units and range as the backends check them; the class is checked below.
                caps.check_bandwidth_limit(Interface::Os, resource, ClassId::new(0), limit)
                    .map_err(|e| {
                        let why = match e {
                            RequestError::MbaUnit { mismatch, .. } => mismatch.to_string(),
                            other => other.to_string(),
                        };
                        at.platform(&key, format!("{}: {why}", show_mba(limit)))
                    })?;
            }
        }
    }
    if let Some(cos) = at.class.cos {
        caps.check_bandwidth_class(resource, cos)
            .map_err(|e| at.platform("cos", e.to_string()))?;
    }
    Ok(())
}

/// The L3 domains a class's `regions` name exist (region MBA domains are L3 domains, as
/// MBA's; the regions, the window and the interface are checked when the file is planned,
/// against the backend's [`rdt_core::RegionOps`]).
fn check_region_domains(at: &At<'_>, topology: &Topology) -> Result<(), ConfigError> {
    let domains = topology.l3_domains();
    for (region, spec) in &at.class.regions {
        for domain in spec.domains.keys() {
            if !domains.contains(domain) {
                return Err(at.platform(
                    &format!("regions.{region}.domains.{domain}"),
                    format!(
                        "region MBA domain {domain} does not exist (region MBA domains are L3 \
                         domains; {})",
                        domain_list("L3", &domains)
                    ),
                ));
            }
        }
    }
    Ok(())
}

pub(super) fn check(
    config: &Config,
    caps: &Capabilities,
    topology: &Topology,
) -> Result<Vec<ConfigWarning>, ConfigError> {
    let mut warnings = Vec::new();
    let online = topology.all_cpus();
    for (index, class) in config.classes.iter().enumerate() {
        let at = At {
            config,
            index,
            class,
        };
        if let Some(cos) = class.cos {
            // pqos's MSR rule: below the largest class count of the allocation resources.
            caps.check_class(Interface::Msr, cos)
                .map_err(|e| at.platform("cos", e.to_string()))?;
        }
        check_cache(&at, caps, topology, CatResource::L3)?;
        check_cache(&at, caps, topology, CatResource::L2)?;
        check_bandwidth(&at, caps, topology, MbaResource::Mba, &mut warnings)?;
        check_bandwidth(&at, caps, topology, MbaResource::Smba, &mut warnings)?;
        check_region_domains(&at, topology)?;
        let missing: CpuSet = class
            .cpus
            .iter()
            .filter(|c| topology.get(*c).is_none())
            .collect();
        if !missing.is_empty() {
            let (s, verb) = if missing.len() == 1 {
                ("", "does")
            } else {
                ("s", "do")
            };
            return Err(at.platform(
                "cpus",
                format!("CPU{s} {missing} {verb} not exist (online CPUs: {online})"),
            ));
        }
        if class.cpus.is_empty() && class.tasks.is_empty() && class.processes.is_empty() {
            warnings.push(at.warning("name", crate::error::NOTHING_RUNS));
        }
    }
    for resource in [CatResource::L3, CatResource::L2] {
        check_placement(config, caps, topology, resource)?;
    }
    Ok(warnings)
}

/// Places every domain's sizes, with no ways taken by others.
fn check_placement(
    config: &Config,
    caps: &Capabilities,
    topology: &Topology,
    resource: CatResource,
) -> Result<(), ConfigError> {
    let Some(cat) = caps.cat(resource) else {
        return Ok(());
    };
    let classes: Vec<(usize, &ClassSpec)> = config
        .classes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.cache(resource).is_some())
        .collect();
    if classes.is_empty() {
        return Ok(());
    }
    let domains = domains_of(topology, resource);
    // Without domains in the topology, the classes' own sizes are placed once.
    let domains: Vec<Option<CacheDomain>> = if domains.is_empty() {
        vec![None]
    } else {
        domains.into_iter().map(Some).collect()
    };
    for domain in domains {
        let sized: Vec<(usize, &ClassSpec, &CacheSize, bool)> = classes
            .iter()
            .filter_map(|&(i, c)| {
                let spec = c.cache(resource)?;
                let size = domain.map_or(&spec.size, |d| spec.size_in(d));
                Some((i, c, size, spec.shared))
            })
            .collect();
        let requests: Vec<PlaceRequest<'_>> = sized
            .iter()
            .map(|(_, c, size, shared)| PlaceRequest {
                class: &c.name,
                size: **size,
                shared: *shared,
            })
            .collect();
        if let Err(e) = place(resource, cat, &requests, 0) {
            return Err(placement_error(config, &sized, resource, domain, &e));
        }
    }
    Ok(())
}

fn placement_error(
    config: &Config,
    sized: &[(usize, &ClassSpec, &CacheSize, bool)],
    resource: CatResource,
    domain: Option<CacheDomain>,
    e: &PlaceError,
) -> ConfigError {
    let found = sized.iter().find(|(_, c, _, _)| c.name == e.class());
    let Some(&(index, class, size, _)) = found else {
        // Not reached: every request carries a class's name.
        return ConfigError::new(
            ConfigErrorKind::Placement,
            &config.file,
            Location::default(),
            e.to_string(),
        );
    };
    let base = ClassSpec::cache_key(resource);
    let key = match domain {
        Some(d)
            if class
                .cache(resource)
                .is_some_and(|s| s.domains.contains_key(&d)) =>
        {
            format!("{base}.domains.{d}.{}", size_key(size))
        }
        _ => format!("{base}.{}", size_key(size)),
    };
    let at = At {
        config,
        index,
        class,
    };
    let mut message = e.reason();
    if let PlaceError::OverlappingExclusive { first, .. } = e
        && let Some(other) = config.class(first)
    {
        let line = other.lines.line(base);
        message.push_str(&format!(" (class {first:?} is on line {line})"));
    }
    let message = match domain {
        Some(d) => format!("in {resource} domain {d}: {message}"),
        None => message,
    };
    at.error(ConfigErrorKind::Placement, &key, message)
}

/// [`Config::normalized`]: every MBA and SMBA limit as `interface` stores it
/// ([`rdt_core::MbaCaps::stored_limit`]), one warning per limit that changes.
pub(super) fn normalize(
    config: &Config,
    caps: &Capabilities,
    interface: Interface,
) -> (Config, Vec<ConfigWarning>) {
    let mut out = config.clone();
    let mut warnings = Vec::new();
    for (index, class) in out.classes.iter_mut().enumerate() {
        let at = At {
            config,
            index,
            class: &config.classes[index],
        };
        for (resource, key0, spec) in [
            (MbaResource::Mba, "mba", class.mba.as_mut()),
            (MbaResource::Smba, "smba", class.smba.as_mut()),
        ] {
            let (Some(spec), Some(mba)) = (spec, caps.bandwidth(resource).get()) else {
                continue;
            };
            let limits = std::iter::once((key0.to_owned(), &mut spec.limit)).chain(
                spec.domains
                    .iter_mut()
                    .map(|(d, l)| (format!("{key0}.domains.{d}"), l)),
            );
            for (path, limit) in limits {
                let stored = mba.stored_limit(interface, *limit);
                if stored != *limit {
                    let how = match interface {
                        Interface::Msr | Interface::Mmio => "rounded half up, as pqos writes it",
                        Interface::Os => "rounded up, as the kernel stores it",
                    };
                    warnings.push(at.warning(
                        &format!("{path}.{}", mba_key(*limit)),
                        format!(
                            "{} is applied as {}: the {} granularity is {}% ({how})",
                            show_mba(*limit),
                            show_mba(stored),
                            resource.name(),
                            mba.granularity()
                        ),
                    ));
                    *limit = stored;
                }
            }
        }
    }
    (out, warnings)
}
