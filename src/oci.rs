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
//! Not supported yet, and refused with [`OciError::Unsupported`]: `enableMonitoring` (and the
//! deprecated `enableCMT`/`enableMBM`), and `SMBA` lines.
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
    Backend, CacheBitmask, CacheDomain, CatMask, CatResource, ClassId, Interface, MbaKind,
    MbaLimit, Rdt, TaskId,
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

/// A container placed by [`apply`]: what [`remove`] needs (a runtime keeps it in its
/// container state).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The resctrl group.
    pub group: String,
    /// Whether [`apply`] made the group (then [`remove`] may take it away).
    pub created: bool,
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
            "MB" => None,
            "SMBA" => return Err(OciError::Unsupported("an SMBA schema line")),
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
                let v = schemata
                    .bandwidth("MB", domain)
                    .map_err(|e| bad(e.to_string()))?
                    .unwrap_or(0);
                let mba = caps
                    .mba
                    .get()
                    .ok_or_else(|| bad("this platform has no MBA".into()))?;
                let limit = if mba.ctrl_enabled {
                    MbaLimit::MibPerSec(v)
                } else if let MbaKind::AmdBandwidth { .. } = mba.kind {
                    MbaLimit::AmdUnits(v)
                } else {
                    MbaLimit::Percent(
                        u8::try_from(v).map_err(|_| bad(format!("{v}% is not a percentage")))?,
                    )
                };
                out.push(Value::Mba { domain: d, limit });
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
            Value::Mba { domain, limit } => {
                let have = rdt
                    .mba_classes(domain)
                    .map_err(platform)?
                    .into_iter()
                    .find(|c| c.class == class)
                    .map(|c| c.limit);
                if have != Some(limit) {
                    let have = have.map_or_else(|| "nothing".to_owned(), |l| l.to_string());
                    return Ok(Some(("MB".into(), domain.get(), limit.to_string(), have)));
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
    if spec.enable_monitoring().unwrap_or(false)
        || spec.enable_cmt().unwrap_or(false)
        || spec.enable_mbm().unwrap_or(false)
    {
        return Err(OciError::Unsupported("enableMonitoring"));
    }
    if rdt.interface() != Interface::Os {
        return Err(OciError::NotResctrl);
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
                Value::Mba { domain, limit } => Change::mba(domain, class, limit),
            }));
        }
    }
    changes.push(Change::task(pid, class));
    transaction::run(rdt, &changes)
        .map_err(platform)?
        .into_result()
        .map_err(platform)?;
    Ok(Placed {
        group,
        created: !exists,
    })
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

/// Takes the container's group away when [`apply`] made it and no task is left in it
/// (module docs). Call it after the container's processes have exited.
///
/// # Errors
/// [`OciError::NotResctrl`]; a platform error.
pub fn remove(rdt: &mut Rdt, placed: &Placed) -> Result<Removed, OciError> {
    if !placed.created {
        return Ok(Removed::Kept);
    }
    let resctrl = rdt.resctrl_mut().ok_or(OciError::NotResctrl)?;
    if resctrl
        .remove_named_group(&placed.group)
        .map_err(platform)?
    {
        Ok(Removed::Group)
    } else {
        Ok(Removed::Kept)
    }
}
