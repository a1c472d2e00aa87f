//! OCI runtime-spec `linux.intelRdt` for container runtimes (runc, youki, crun): put a
//! container in its resctrl group with the spec's semantics, through the library's
//! transaction, and take it out again ([`apply`], [`remove`]; feature `oci`, types from the
//! `oci-spec` crate).
//!
//! The rules (runtime-spec `config-linux.md`, "IntelRdt"):
//! - the group is `closID`, or the container id when `closID` is absent;
//! - the schemata written are `schemata` (whole lines, v1.3) when given; otherwise the
//!   lines of `l3CacheSchema` (without its `MB:` lines when `memBwSchema` is given) and
//!   `memBwSchema`; with none of them nothing is written;
//! - `closID` with schemata: a missing group is made; an existing one is used only if its
//!   schemata hold the values asked for, else an error ([`OciError::Mismatch`]);
//! - `closID` without schemata: the group must exist ([`OciError::NoSuchGroup`]);
//! - the container's process joins the group.
//!
//! Everything is checked before anything is written, and the writes (the group's values,
//! the process) are one transaction: a failure leaves resctrl as it was. [`remove`] takes
//! the group away with the container when [`apply`] made it and no task is left in it
//! (another container sharing the `closID` keeps it), as runc removes the container's own
//! group and leaves pre-configured ones.
//!
//! `enableMonitoring` (and the deprecated `enableCMT`/`enableMBM`, which mean the same here)
//! gives the container its own counters, as runc does (`libcontainer/intelrdt`, `Apply`): a
//! monitor group `<group>/mon_groups/<container id>` is made and the process put in it,
//! also when the group is the container's own (no `closID`), so that a tool that reads
//! runc's layout finds it there.
//! [`stats`] reads them in the shape runtimes report ([`IntelRdtStats`], runc's
//! `intelrdt.Stats`); [`remove`] takes the monitor group away with the container.
//!
//! `SMBA` lines (AMD slow-memory bandwidth, in 1/8 GB/s units) set the class's SMBA limits
//! as `MB` lines set its MBA limits.
//!
//! # Example: a runtime's create and delete
//! ```no_run
//! # #[cfg(feature = "oci")] {
//! use oci_spec::runtime::LinuxIntelRdt;
//! use rdt_pqos::{Iface, OpenOptions, TaskId};
//!
//! let spec: LinuxIntelRdt = serde_json::from_str(
//!     r#"{"closID": "guaranteed_group", "l3CacheSchema": "L3:0=7f0;1=1f",
//!         "memBwSchema": "MB:0=20;1=70"}"#,
//! )?;
//! let mut rdt = OpenOptions::new(Iface::Os).open()?;
//! let placed = rdt_pqos::oci::apply(&mut rdt, &spec, "ctr-1", TaskId::new(4242))?;
//! // ... the container runs, then exits ...
//! rdt_pqos::oci::remove(&mut rdt, &placed)?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # References
//! opencontainers/runtime-spec `config-linux.md` (IntelRdt); runc `libcontainer/intelrdt`;
//! Linux `Documentation/filesystems/resctrl.rst` (`schemata`).

use oci_spec::runtime::LinuxIntelRdt;
use rdt_resctrl::Schemata;

use crate::transaction::{self, Change, MaskScope};
use crate::{
    Backend, BackendExt, CacheBitmask, CacheDomain, CatMask, CatResource, ClassId, Interface,
    MbaKind, MbaLimit, MbaResource, Rdt, TaskId,
};

/// Why a container's `intelRdt` was not applied (nothing was written) or not removed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OciError {
    /// The platform is not driven through resctrl (runtime-spec: no mounted `resctrl`
    /// is an error).
    #[error("intelRdt needs the resctrl filesystem (the OS interface), which is not in use")]
    NotResctrl,
    /// A schema line does not follow the kernel's `schemata` format, or names something
    /// this platform lacks.
    #[error("intelRdt schema `{line}`: {why}")]
    Schema {
        /// The line.
        line: String,
        /// Why.
        why: String,
    },
    /// `closID` names an existing group whose schemata differ from the ones asked for.
    #[error(
        "intelRdt: the existing resctrl group `{group}` has {schema} {have} in domain {domain}, \
         not {want} as asked: a closID is shared only with the same schemata"
    )]
    Mismatch {
        /// The group.
        group: String,
        /// The schema (`L3`, `MB`, ...).
        schema: String,
        /// The domain id.
        domain: u32,
        /// The value asked for.
        want: String,
        /// The group's value.
        have: String,
    },
    /// `closID` without schemata names a group that does not exist.
    #[error(
        "intelRdt: closID `{0}` has no schemata and no pre-configured resctrl group of that name"
    )]
    NoSuchGroup(String),
    /// A field this library does not implement yet.
    #[error("intelRdt: {0} is not supported yet")]
    Unsupported(&'static str),
    /// The platform refused, or a write failed (and was undone).
    #[error("intelRdt: {0}")]
    Platform(String),
}

/// A container placed by [`apply`]: what [`remove`] and [`stats`] need (a runtime keeps it
/// in its container state; it serializes with serde).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placed {
    /// The resctrl group.
    pub group: String,
    /// Whether [`apply`] made the group (then [`remove`] may take it away).
    pub created: bool,
    /// With `enableMonitoring`: the group whose counters are the container's, relative to
    /// the resctrl root: the monitor group `<group>/mon_groups/<container id>` [`apply`]
    /// made. (A state file of an earlier version may name [`Placed::group`] itself.)
    pub monitor: Option<String>,
}

/// runc's `intelrdt.Stats` (`libcontainer/intelrdt/stats.go`), with its JSON names: the
/// statistics a runtime reports for a container's `intelRdt` ([`stats`]). Empty strings
/// and `None`s are left out of the JSON, as Go's `omitempty` does.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IntelRdtStats {
    /// `info/L3`: the platform's L3 CAT, when it has one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub l3_cache_info: Option<L3CacheInfo>,
    /// The root group's L3 schema line (`L3:0=7ff;1=7ff`).
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub l3_cache_schema_root: String,
    /// The container's group's L3 schema line.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub l3_cache_schema: String,
    /// `info/MB`: the platform's MBA, when it has one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mem_bw_info: Option<MemBwInfo>,
    /// The root group's `MB:` line.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub mem_bw_schema_root: String,
    /// The container's group's `MB:` line.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub mem_bw_schema: String,
    /// Every line of the container's group's `schemata`, trimmed, in the file's order
    /// (runc v1.3+ `Stats.Schemata`: `["L3:0=7f0;1=1f", "MB:0=20;1=70"]`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub schemata: Vec<String>,
    /// MBM, one entry per L3 monitoring domain in domain order, when monitoring is on and
    /// the platform counts memory bandwidth.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mbm_stats: Option<Vec<MbmNumaNodeStats>>,
    /// CMT, one entry per L3 monitoring domain in domain order, when monitoring is on and
    /// the platform counts LLC occupancy.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cmt_stats: Option<Vec<CmtNumaNodeStats>>,
}

/// runc's `L3CacheInfo`: resctrl's `info/L3` files.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct L3CacheInfo {
    /// `cbm_mask`, as the file has it (hex without `0x`).
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub cbm_mask: String,
    /// `min_cbm_bits`.
    pub min_cbm_bits: u64,
    /// `num_closids`.
    pub num_closids: u64,
}

/// runc's `MemBwInfo`: resctrl's `info/MB` files.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemBwInfo {
    /// `bandwidth_gran`, in percent.
    pub bandwidth_gran: u64,
    /// `delay_linear` (1 linear, 0 not).
    pub delay_linear: u64,
    /// `min_bandwidth`, in percent.
    pub min_bandwidth: u64,
    /// `num_closids`.
    pub num_closids: u64,
}

/// runc's `MBMNumaNodeStats`: one L3 monitoring domain's memory traffic, in bytes since
/// the group was made (the kernel's `mbm_total_bytes`, `mbm_local_bytes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MbmNumaNodeStats {
    /// `mbm_total_bytes`.
    pub mbm_total_bytes: u64,
    /// `mbm_local_bytes`.
    pub mbm_local_bytes: u64,
}

/// runc's `CMTNumaNodeStats`: one L3 monitoring domain's occupancy now, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CmtNumaNodeStats {
    /// `llc_occupancy`.
    pub llc_occupancy: u64,
}

/// One value to write: a cache mask or a bandwidth limit in one domain.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Value {
    Cat {
        resource: CatResource,
        scope: MaskScope,
        domain: CacheDomain,
        mask: CacheBitmask,
    },
    Mba {
        resource: MbaResource,
        domain: CacheDomain,
        limit: MbaLimit,
    },
}

/// The schemata lines the spec asks to write (module docs), `None` for none.
fn requested_lines(spec: &LinuxIntelRdt) -> Result<Option<String>, OciError> {
    let newline = |s: &str| s.contains('\n');
    if let Some(lines) = spec.schemata().as_ref().filter(|l| !l.is_empty()) {
        if let Some(bad) = lines.iter().find(|l| newline(l)) {
            return Err(OciError::Schema {
                line: bad.clone(),
                why: "a schemata element is one line".into(),
            });
        }
        return Ok(Some(lines.join("\n")));
    }
    let mb = spec.mem_bw_schema().as_deref().filter(|s| !s.is_empty());
    if let Some(mb) = mb
        && (!mb.trim_start().starts_with("MB:") || newline(mb.trim_end()))
    {
        return Err(OciError::Schema {
            line: mb.to_owned(),
            why: "memBwSchema must be one line starting with `MB:`".into(),
        });
    }
    let l3 = spec.l3_cache_schema().as_deref().filter(|s| !s.is_empty());
    let mut out: Vec<&str> = Vec::new();
    if let Some(l3) = l3 {
        out.extend(
            l3.lines()
                .filter(|l| mb.is_none() || !l.trim_start().starts_with("MB:")),
        );
    }
    out.extend(mb);
    Ok((!out.is_empty()).then(|| out.join("\n")))
}

/// The values of `text` for `rdt`'s platform, every one checked for its form.
fn values(rdt: &Rdt, text: &str) -> Result<Vec<Value>, OciError> {
    let schemata: Schemata =
        text.parse()
            .map_err(|e: rdt_resctrl::SchemataError| OciError::Schema {
                line: text.to_owned(),
                why: e.to_string(),
            })?;
    let caps = rdt.capabilities();
    let mut out = Vec::new();
    for line in schemata.lines() {
        let text_of_line = || {
            let values: Vec<String> = line
                .values
                .iter()
                .map(|(d, v)| format!("{d}={v}"))
                .collect();
            format!("{}:{}", line.name, values.join(";"))
        };
        let bad = |why: String| OciError::Schema {
            line: text_of_line(),
            why,
        };
        let cat = match line.name.as_str() {
            "L3" => Some((CatResource::L3, MaskScope::Both)),
            "L3CODE" => Some((CatResource::L3, MaskScope::Code)),
            "L3DATA" => Some((CatResource::L3, MaskScope::Data)),
            "L2" => Some((CatResource::L2, MaskScope::Both)),
            "L2CODE" => Some((CatResource::L2, MaskScope::Code)),
            "L2DATA" => Some((CatResource::L2, MaskScope::Data)),
            "MB" | "SMBA" => None,
            other => return Err(bad(format!("unknown resource `{other}`"))),
        };
        for &(domain, _) in &line.values {
            let d = CacheDomain::new(domain);
            if let Some((resource, scope)) = cat {
                let bits = schemata
                    .cache_mask(&line.name, domain)
                    .map_err(|e| bad(e.to_string()))?
                    .unwrap_or(0);
                let mask = CacheBitmask::new(bits).map_err(|e| bad(e.to_string()))?;
                out.push(Value::Cat {
                    resource,
                    scope,
                    domain: d,
                    mask,
                });
            } else {
                let resource = if line.name == "SMBA" {
                    MbaResource::Smba
                } else {
                    MbaResource::Mba
                };
                let v = schemata
                    .bandwidth(&line.name, domain)
                    .map_err(|e| bad(e.to_string()))?
                    .unwrap_or(0);
                let mba = caps
                    .bandwidth(resource)
                    .get()
                    .ok_or_else(|| bad(format!("this platform has no {resource}")))?;
                let limit = if mba.ctrl_enabled {
                    MbaLimit::MibPerSec(v)
                } else if let MbaKind::AmdBandwidth { .. } = mba.kind {
                    MbaLimit::AmdUnits(v)
                } else {
                    MbaLimit::Percent(
                        u8::try_from(v).map_err(|_| bad(format!("{v}% is not a percentage")))?,
                    )
                };
                out.push(Value::Mba {
                    resource,
                    domain: d,
                    limit,
                });
            }
        }
    }
    Ok(out)
}

fn platform(e: impl std::fmt::Display) -> OciError {
    OciError::Platform(e.to_string())
}

/// The values of `values` that `class` does not hold now, as `(schema, domain, want, have)`.
fn first_difference(
    rdt: &mut Rdt,
    class: ClassId,
    values: &[Value],
) -> Result<Option<(String, u32, String, String)>, OciError> {
    for v in values {
        match *v {
            Value::Cat {
                resource,
                scope,
                domain,
                mask,
            } => {
                let have = rdt
                    .cat_classes(resource, domain)
                    .map_err(platform)?
                    .into_iter()
                    .find(|c| c.class == class)
                    .map(|c| c.mask);
                let held = match (have, scope) {
                    (Some(CatMask::Unified(m)), MaskScope::Both) => Some(m),
                    (Some(CatMask::Cdp { data, .. }), MaskScope::Data) => Some(data),
                    (Some(CatMask::Cdp { code, .. }), MaskScope::Code) => Some(code),
                    _ => None,
                };
                if held != Some(mask) {
                    let name = format!(
                        "{resource}{}",
                        match scope {
                            MaskScope::Both => "",
                            MaskScope::Code => "CODE",
                            MaskScope::Data => "DATA",
                        }
                    );
                    let have = held.map_or_else(|| "nothing".to_owned(), |m| format!("{m:x}"));
                    return Ok(Some((name, domain.get(), format!("{mask:x}"), have)));
                }
            }
            Value::Mba {
                resource,
                domain,
                limit,
            } => {
                let have = rdt
                    .bandwidth_classes(resource, domain)
                    .map_err(platform)?
                    .into_iter()
                    .find(|c| c.class == class)
                    .map(|c| c.limit);
                if have != Some(limit) {
                    let have = have.map_or_else(|| "nothing".to_owned(), |l| l.to_string());
                    let schema = resource.schema().to_owned();
                    return Ok(Some((schema, domain.get(), limit.to_string(), have)));
                }
            }
        }
    }
    Ok(None)
}

/// Puts the container's process `pid` in its resctrl group as `spec` says (module docs).
///
/// # Errors
/// [`OciError`]: every rule of the spec, checked before any write; a platform error after
/// which resctrl is as it was.
pub fn apply(
    rdt: &mut Rdt,
    spec: &LinuxIntelRdt,
    container_id: &str,
    pid: TaskId,
) -> Result<Placed, OciError> {
    #[allow(deprecated)] // the v1.2 flags mean the same as enableMonitoring
    let monitoring = spec.enable_monitoring().unwrap_or(false)
        || spec.enable_cmt().unwrap_or(false)
        || spec.enable_mbm().unwrap_or(false);
    if rdt.interface() != Interface::Os {
        return Err(OciError::NotResctrl);
    }
    if monitoring && !rdt.capabilities().monitoring.is_present() {
        return Err(OciError::Platform(
            "enableMonitoring: this platform has no CMT/MBM (resctrl has no info/L3_MON)".into(),
        ));
    }
    let group = spec
        .clos_id()
        .clone()
        .unwrap_or_else(|| container_id.to_owned());
    let wanted = match requested_lines(spec)? {
        Some(text) => Some(values(rdt, &text)?),
        None => None,
    };
    let exists = rdt
        .groups()
        .map_err(platform)?
        .iter()
        .any(|g| g.kind == crate::GroupKind::Control && g.path == group);
    if !exists && wanted.is_none() {
        return Err(OciError::NoSuchGroup(group));
    }
    let class = rdt.class_named(&group).map_err(platform)?;
    let mut changes = Vec::new();
    if let Some(wanted) = &wanted {
        if exists {
            if let Some((schema, domain, want, have)) = first_difference(rdt, class, wanted)? {
                return Err(OciError::Mismatch {
                    group,
                    schema,
                    domain,
                    want,
                    have,
                });
            }
        } else {
            changes.extend(wanted.iter().map(|v| match *v {
                Value::Cat {
                    resource,
                    scope,
                    domain,
                    mask,
                } => Change::Cat {
                    resource,
                    domain,
                    class,
                    scope,
                    mask,
                },
                Value::Mba {
                    resource,
                    domain,
                    limit,
                } => Change::bandwidth(resource, domain, class, limit),
            }));
        }
    }
    changes.push(Change::task(pid, class));
    transaction::run(rdt, &changes)
        .map_err(platform)?
        .into_result()
        .map_err(platform)?;
    let created = !exists;
    let monitor = if monitoring {
        let made = rdt
            .resctrl_mut()
            .ok_or(OciError::NotResctrl)?
            .place_in_mon_group(&group, container_id, pid);
        match made {
            Ok(path) => Some(path),
            Err(e) => {
                // Undo the placement: the process back to the root, a group made here away.
                let _ = transaction::run(rdt, &[Change::task(pid, ClassId::new(0))]);
                if created && let Some(r) = rdt.resctrl_mut() {
                    let _ = r.remove_named_group(&group);
                }
                return Err(platform(format!("enableMonitoring: {e}")));
            }
        }
    } else {
        None
    };
    Ok(Placed {
        group,
        created,
        monitor,
    })
}

/// The statistics of a container [`apply`] placed, as runc reports them
/// ([`IntelRdtStats`]): the platform's `info/L3` and `info/MB`, the root's and the
/// group's `L3` and `MB` schema lines, and with monitoring the counters of
/// [`Placed::monitor`] per L3 monitoring domain (read through the backend's counter
/// reader, the one its monitoring uses).
///
/// Like runc, the L3 lines are the last `schemata` line whose name starts with `L3`
/// (`L3DATA` with CDP on); the MB lines are the `MB:` line.
///
/// # Errors
/// [`OciError::NotResctrl`]; a platform error (a file cannot be read, the group is gone).
pub fn stats(rdt: &mut Rdt, placed: &Placed) -> Result<IntelRdtStats, OciError> {
    let resctrl = rdt.resctrl_mut().ok_or(OciError::NotResctrl)?;
    let info = resctrl.info();
    let l3_cache_info = info
        .caches
        .get("L3")
        .or_else(|| info.caches.get("L3CODE"))
        .map(|c| L3CacheInfo {
            cbm_mask: format!("{:x}", c.cbm_mask),
            min_cbm_bits: u64::from(c.min_cbm_bits),
            num_closids: u64::from(c.num_closids),
        });
    let mem_bw_info = info.mb.as_ref().map(|m| MemBwInfo {
        bandwidth_gran: u64::from(m.bandwidth_gran),
        delay_linear: u64::from(m.delay_linear),
        min_bandwidth: u64::from(m.min_bandwidth),
        num_closids: u64::from(m.num_closids),
    });
    let lines = |group: &str| -> Result<(String, String, Vec<String>), OciError> {
        let text = resctrl.group_schemata(group).map_err(platform)?.to_string();
        let all = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        let l3 = text
            .lines()
            .map(str::trim)
            .rfind(|l| l.starts_with("L3"))
            .unwrap_or_default()
            .to_owned();
        let mb = text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("MB:"))
            .unwrap_or_default()
            .to_owned();
        Ok((l3, mb, all))
    };
    let (l3_root, mb_root, _) = lines("")?;
    let (l3, mb, schemata) = lines(&placed.group)?;
    let mut out = IntelRdtStats {
        l3_cache_schema_root: if l3_cache_info.is_some() {
            l3_root
        } else {
            String::new()
        },
        l3_cache_schema: if l3_cache_info.is_some() {
            l3
        } else {
            String::new()
        },
        mem_bw_schema_root: if mem_bw_info.is_some() {
            mb_root
        } else {
            String::new()
        },
        mem_bw_schema: if mem_bw_info.is_some() {
            mb
        } else {
            String::new()
        },
        l3_cache_info,
        mem_bw_info,
        schemata,
        ..IntelRdtStats::default()
    };
    if let Some(group) = &placed.monitor {
        let counters = resctrl.read_group_counters(group).map_err(platform)?;
        let events = rdt_core_events(resctrl.capabilities());
        let domains = resctrl.mon_domains().to_vec();
        let value = |d: u32, e: crate::RmidEvent| {
            counters
                .iter()
                .find(|c| c.domain == d && c.event == e)
                .map_or(0, |c| c.bytes)
        };
        if events.1 {
            out.mbm_stats = Some(
                domains
                    .iter()
                    .map(|&d| MbmNumaNodeStats {
                        mbm_total_bytes: value(d, crate::RmidEvent::MbmTotal),
                        mbm_local_bytes: value(d, crate::RmidEvent::MbmLocal),
                    })
                    .collect(),
            );
        }
        if events.0 {
            out.cmt_stats = Some(
                domains
                    .iter()
                    .map(|&d| CmtNumaNodeStats {
                        llc_occupancy: value(d, crate::RmidEvent::LlcOccupancy),
                    })
                    .collect(),
            );
        }
    }
    Ok(out)
}

/// Whether the platform counts (LLC occupancy, memory bandwidth).
fn rdt_core_events(caps: &crate::Capabilities) -> (bool, bool) {
    let e = caps.supported_events();
    (
        e.contains(crate::MonEvents::LLC_OCCUPANCY),
        e.intersects(crate::MonEvents::MBM_TOTAL | crate::MonEvents::MBM_LOCAL),
    )
}

/// What [`remove`] did with the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removed {
    /// The group was taken away (its CLOSID is free again).
    Group,
    /// The group stays: [`apply`] did not make it (pre-configured), or tasks are still in
    /// it (another container shares the `closID`).
    Kept,
}

/// Takes the container's monitor group away (when [`apply`] made one and no task is left
/// in it), then its group when [`apply`] made it and no task is left in it (module docs).
/// Call it after the container's processes have exited.
///
/// # Errors
/// [`OciError::NotResctrl`]; a platform error.
pub fn remove(rdt: &mut Rdt, placed: &Placed) -> Result<Removed, OciError> {
    let resctrl = rdt.resctrl_mut().ok_or(OciError::NotResctrl)?;
    // The container's monitor group goes first (a control group with one is never removed).
    if let Some(mon) = placed
        .monitor
        .as_deref()
        .filter(|m| m.contains("mon_groups/"))
    {
        resctrl.remove_mon_group(mon).map_err(platform)?;
    }
    if !placed.created {
        return Ok(Removed::Kept);
    }
    if resctrl
        .remove_named_group(&placed.group)
        .map_err(platform)?
    {
        Ok(Removed::Group)
    } else {
        Ok(Removed::Kept)
    }
}
