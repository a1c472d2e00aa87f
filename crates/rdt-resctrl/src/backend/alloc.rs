//! Allocation: the `schemata` of `COS<n>` control groups (CAT and MBA values), the
//! groups made for them and given back, resets and the remounts CDP and `mba_MBps` need.

use std::collections::BTreeMap;

use rdt_core::{
    AllocReset, CacheBitmask, CacheDomain, CatClass, CatMask, CatResource, ClassId, FeatureSetting,
    GroupOwner, Interface, IoAlloc, LimitError, MbaClass, MbaCtrl, MbaKind, MbaLimit, MbaResource,
    PmuSource, RequestError,
};

use super::ResctrlBackend;
use crate::ResctrlError;
use crate::fs::{ENOSPC, cos_of_name, join};

/// The reserved names of the resctrl root a named class cannot take.
const RESERVED: [&str; 3] = ["info", "mon_groups", "mon_data"];
use crate::mount::MountOptions;
use crate::schemata::Schemata;

/// Which schemas hold a CAT resource's masks.
#[derive(Clone, Copy, Debug)]
pub(super) enum CatSchemas {
    Unified(&'static str),
    Cdp {
        data: &'static str,
        code: &'static str,
    },
}

/// What a multi-group change did, to put back if a later step fails.
#[derive(Debug, Default)]
pub(super) struct Undo {
    /// Groups whose `schemata` was written, with the text before.
    pub(super) written: Vec<(String, Schemata)>,
    /// Groups created by this change.
    pub(super) created: Vec<String>,
    /// Groups this backend made earlier that the change removed, with their `schemata`.
    pub(super) removed: Vec<(String, Schemata)>,
}

pub(super) fn cos_group(class: ClassId) -> String {
    if class.get() == 0 {
        String::new()
    } else {
        format!("COS{class}")
    }
}

/// Domain ids as a list: `0,1`.
fn list(v: &[u32]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl<P: PmuSource> ResctrlBackend<P> {
    pub(super) fn cat_schemas(&self, resource: CatResource) -> Result<CatSchemas, ResctrlError> {
        let (uni, data, code, name) = match resource {
            CatResource::L3 => ("L3", "L3DATA", "L3CODE", "L3 CAT"),
            CatResource::L2 => ("L2", "L2DATA", "L2CODE", "L2 CAT"),
        };
        if self.info.caches.contains_key(code) {
            Ok(CatSchemas::Cdp { data, code })
        } else if self.info.caches.contains_key(uni) {
            Ok(CatSchemas::Unified(uni))
        } else {
            Err(LimitError::Unsupported(name).into())
        }
    }

    pub(super) fn check_domain(
        &self,
        schema: &str,
        resource: &'static str,
        domain: CacheDomain,
    ) -> Result<(), ResctrlError> {
        let known = self.domains.get(schema).map_or(&[][..], Vec::as_slice);
        if known.contains(&domain.get()) {
            Ok(())
        } else {
            Err(RequestError::NoSuchDomain {
                resource,
                domain,
                known: Some(list(known)),
            }
            .into())
        }
    }

    /// The class must have a CLOSID: below the smallest `num_closids`.
    pub(super) fn check_closid(&self, class: ClassId) -> Result<(), ResctrlError> {
        Ok(self.caps.check_class(Interface::Os, class)?)
    }

    /// The value a freshly reset group has in `schema`, as text.
    pub(super) fn default_value(&self, schema: &str) -> Option<String> {
        if let Some(c) = self.info.caches.get(schema) {
            return Some(format!("{:x}", c.cbm_mask));
        }
        match schema {
            "MB" => Some(self.default_bw(MbaResource::Mba).to_string()),
            "SMBA" => Some(self.default_bw(MbaResource::Smba).to_string()),
            _ => None,
        }
    }

    /// The reset value of `resource`'s classes: `MBA_MAX_MBPS` for MB under `mba_MBps`
    /// (the software controller is MB's only: the kernel's `is_mba_sc()`), else the
    /// resource's `max_bw` (100 on Intel, `2^width` on AMD).
    pub(super) fn default_bw(&self, resource: MbaResource) -> u64 {
        if self.mba_mbps && resource == MbaResource::Mba {
            return u64::from(u32::MAX); // MBA_MAX_MBPS
        }
        match self.caps.bandwidth(resource).get().map(|m| m.kind) {
            Some(MbaKind::AmdBandwidth { width }) => 1u64 << width.min(32),
            _ => 100,
        }
    }

    /// A `schemata` value of `resource` as a limit in the unit in force.
    pub(super) fn mba_limit(&self, resource: MbaResource, v: u32) -> MbaLimit {
        if self.mba_mbps && resource == MbaResource::Mba {
            MbaLimit::MibPerSec(v)
        } else if matches!(
            self.caps.bandwidth(resource).get().map(|m| m.kind),
            Some(MbaKind::AmdBandwidth { .. })
        ) {
            MbaLimit::AmdUnits(v)
        } else {
            MbaLimit::Percent(u8::try_from(v).unwrap_or(u8::MAX))
        }
    }

    /// The control group of `class`, created when missing; `undo` records a creation.
    pub(super) fn ensure_group(
        &self,
        class: ClassId,
        undo: &mut Undo,
    ) -> Result<String, ResctrlError> {
        let g = self.group_of(class);
        if g.is_empty() || self.fs.exists(&g) {
            return Ok(g);
        }
        // a named class's group is recorded as ours before it exists (module `named`)
        self.record_group(&g, class)?;
        match self.fs.mkdir(&g) {
            Ok(()) => {
                undo.created.push(g.clone());
                Ok(g)
            }
            Err(e) => {
                self.unrecord_group(&g);
                Err(if e.raw_os_error() == Some(ENOSPC) {
                    ResctrlError::OutOfClosids {
                        group: self.fs.path(&g),
                        in_use: self.closid_holders(),
                        status: self.fs.last_cmd_status(),
                    }
                } else {
                    ResctrlError::io("create", self.fs.path(&g), e)
                })
            }
        }
    }

    pub(super) fn closid_holders(&self) -> Vec<String> {
        let mut v = vec!["(root)".to_owned()];
        for g in self.fs.ctrl_groups().unwrap_or_default() {
            let foreign = self.class_of_group(&g).is_none();
            v.push(if foreign { format!("{g} (foreign)") } else { g });
        }
        v
    }

    /// Puts back what `undo` recorded, newest first; best effort (the original error is
    /// what the caller reports).
    pub(super) fn rollback(&self, undo: Undo) {
        for (group, old) in undo.written.into_iter().rev() {
            let _ = self.write_schemata(&group, &old);
        }
        for g in undo.created.into_iter().rev() {
            if self.fs.rmdir(&g).is_ok() {
                self.unrecord_group(&g);
            }
        }
        for (group, old) in undo.removed.into_iter().rev() {
            let class = self.class_of_group(&group).map(ClassId::new);
            let recorded = class.is_none_or(|c| self.record_group(&group, c).is_ok());
            if recorded && self.fs.mkdir(&group).is_ok() {
                let _ = self.write_schemata(&group, &old);
            }
        }
    }

    /// Writes per class the `(schema, domain, value)` triples, one `schemata` write per
    /// group, undoing everything on the first failure. Holds: the exclusive lock.
    ///
    /// A class whose group does not exist and whose values are all the reset defaults needs
    /// no group (an absent group reads as the defaults), so none is made; a group this
    /// backend made that such a write brings back to the defaults, with no CPU, task or
    /// monitor group in it, is removed instead of written, giving its CLOSID back (an undone
    /// `pqos -e` leaves no group behind).
    pub(super) fn apply(
        &mut self,
        plan: &BTreeMap<ClassId, Vec<(&'static str, u32, String)>>,
    ) -> Result<(), ResctrlError> {
        let mut undo = Undo::default();
        for (&class, sets) in plan {
            if let Err(e) = self.apply_class(class, sets, &mut undo) {
                self.rollback(undo);
                return Err(e);
            }
        }
        for g in &undo.removed {
            self.created.remove(&g.0);
        }
        self.created.extend(undo.created);
        Ok(())
    }

    /// One class of [`ResctrlBackend::apply`].
    pub(super) fn apply_class(
        &self,
        class: ClassId,
        sets: &[(&'static str, u32, String)],
        undo: &mut Undo,
    ) -> Result<(), ResctrlError> {
        let g = self.group_of(class);
        if !g.is_empty()
            && !self.fs.exists(&g)
            && sets.iter().all(|(schema, _, v)| self.is_default(schema, v))
        {
            return Ok(());
        }
        let g = self.ensure_group(class, undo)?;
        let old = self.read_schemata(&g)?;
        let mut new = old.clone();
        for (schema, domain, value) in sets {
            new.set(schema, *domain, value.clone());
        }
        let made_here = undo.created.contains(&g);
        if (made_here || self.created.contains(&g)) && self.is_unused(&g, &new)? {
            self.fs.rmdir(&g)?;
            self.unrecord_group(&g);
            if made_here {
                undo.created.retain(|c| *c != g);
            } else {
                undo.removed.push((g, old));
            }
            return Ok(());
        }
        self.write_schemata(&g, &new)?;
        undo.written.push((g, old));
        Ok(())
    }

    /// Whether `value` of `schema` is what a reset group holds.
    pub(super) fn is_default(&self, schema: &str, value: &str) -> bool {
        let Some(default) = self.default_value(schema) else {
            return false;
        };
        let radix = if self.info.caches.contains_key(schema) {
            16
        } else {
            10
        };
        match (
            u64::from_str_radix(value.trim(), radix),
            u64::from_str_radix(&default, radix),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    /// Whether control group `group` with `schemata` holds nothing: every value the
    /// default, no CPU, no task, no monitor group. Holds: a lock.
    pub(super) fn is_unused(&self, group: &str, schemata: &Schemata) -> Result<bool, ResctrlError> {
        let defaults = schemata
            .lines()
            .iter()
            .all(|l| l.values.iter().all(|(_, v)| self.is_default(&l.name, v)));
        Ok(defaults
            && self.fs.cpus(group)?.is_empty()
            && self.fs.tasks(group)?.is_empty()
            && self.fs.subdirs(&join(group, "mon_groups"))?.is_empty())
    }

    /// Removes `group` when this backend made it and it now holds nothing (its last CPU or
    /// task moved out, its values the defaults), giving its CLOSID back; best effort.
    /// Holds: the exclusive lock.
    pub(super) fn release_if_unused(&mut self, group: &str) {
        if group.is_empty() || !self.created.contains(group) {
            return;
        }
        let unused = self
            .read_schemata(group)
            .and_then(|s| self.is_unused(group, &s));
        if matches!(unused, Ok(true)) && self.fs.rmdir(group).is_ok() {
            self.unrecord_group(group);
            self.created.remove(group);
        }
    }

    /// Whether `cdp`/`mba_ctrl` of a reset need a different mount, and the options then.
    pub(super) fn wanted_options(&self, cfg: AllocReset) -> Result<MountOptions, ResctrlError> {
        let mut want = self.mount_options();
        for (setting, resource, on) in [
            (cfg.l3_cdp, CatResource::L3, &mut want.cdp),
            (cfg.l2_cdp, CatResource::L2, &mut want.cdpl2),
        ] {
            match setting {
                FeatureSetting::Any => {}
                FeatureSetting::Off => *on = false,
                FeatureSetting::On => {
                    if !self.caps.cat(resource).is_some_and(|c| c.cdp_supported) {
                        return Err(RequestError::Unsupported(format!(
                            "{resource} CDP requested but not supported by the platform"
                        ))
                        .into());
                    }
                    *on = true;
                }
            }
        }
        match cfg.mba_ctrl {
            FeatureSetting::Any => {}
            FeatureSetting::Off => want.mba_mbps = false,
            FeatureSetting::On => {
                if self.mba_ctrl_state() == MbaCtrl::Unsupported {
                    return Err(RequestError::Unsupported(
                        "MBA CTRL requested but not supported by the platform: the kernel's \
                         mba_MBps needs MBM, linear (Intel) MBA and no Sub-NUMA Clustering"
                            .into(),
                    )
                    .into());
                }
                want.mba_mbps = true;
            }
        }
        Ok(want)
    }

    /// The full reset: remount with `want` when no other tool's group exists.
    pub(super) fn remount(&mut self, want: MountOptions) -> Result<(), ResctrlError> {
        let Some(mount) = &self.mount else {
            return Err(RequestError::Unsupported(format!(
                "changing the resctrl mount options to `{want}` needs a remount, and this \
                 platform was opened without a way to remount resctrl"
            ))
            .into());
        };
        {
            let _g = self.lock.exclusive()?;
            let foreign: Vec<String> = self
                .groups_unlocked()?
                .into_iter()
                .filter(|g| g.owner == GroupOwner::Foreign)
                .map(|g| g.path)
                .collect();
            if !foreign.is_empty() {
                return Err(ResctrlError::RemountBlocked {
                    wanted: want,
                    groups: foreign,
                });
            }
        }
        // Nothing may stay open under the mount, or umount2 fails with EBUSY: our counters
        // and the lock's directory handle go first (the lock is released for the remount).
        self.groups.clear();
        self.created.clear();
        {
            // the remount removes every group, named classes' too
            let _g = self.lock.exclusive()?;
            self.clear_record();
        }
        self.lock.close();
        let result = mount
            .remount(&want)
            .map_err(|source| ResctrlError::Remount {
                root: self.fs.root().to_owned(),
                wanted: want,
                source,
            });
        self.lock.reopen(&self.fs)?;
        result?;
        let _g = self.lock.shared()?;
        self.load()
    }

    /// The partial reset: our groups' schemata to defaults, their CPUs and tasks to the
    /// root. Holds: the exclusive lock.
    pub(super) fn reset_groups(&self) -> Result<(), ResctrlError> {
        let ours: Vec<String> = self
            .fs
            .ctrl_groups()?
            .into_iter()
            .filter(|g| self.class_of_group(g).is_some())
            .collect();
        for g in std::iter::once(String::new()).chain(ours.iter().cloned()) {
            let mut s = self.read_schemata(&g)?;
            let names: Vec<String> = s.lines().iter().map(|l| l.name.clone()).collect();
            for name in names {
                let Some(v) = self.default_value(&name) else {
                    continue;
                };
                for d in s.domains(&name) {
                    s.set(&name, d, v.clone());
                }
            }
            self.write_schemata(&g, &s)?;
        }
        for g in &ours {
            if !self.fs.cpus(g)?.is_empty() {
                self.fs.write(&join(g, "cpus_list"), "\n")?;
            }
            for t in self.fs.tasks(g)? {
                self.move_task("", t)?;
            }
        }
        Ok(())
    }

    /// [`Backend::cat_classes_in`] on resctrl: each class's `schemata` is read once for
    /// every domain.
    pub(super) fn read_cat_classes_in(
        &mut self,
        resource: CatResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<CatClass>>, ResctrlError> {
        let schemas = self.cat_schemas(resource)?;
        let first = match schemas {
            CatSchemas::Unified(s) | CatSchemas::Cdp { data: s, .. } => s,
        };
        let which = if resource == CatResource::L3 {
            "L3"
        } else {
            "L2"
        };
        for &domain in domains {
            self.check_domain(first, which, domain)?;
        }
        let n = self
            .caps
            .cat(resource)
            .map_or(0, rdt_core::CatCaps::usable_classes);
        let groups = self.class_schemata(n)?;
        let mut out = Vec::with_capacity(domains.len());
        for &domain in domains {
            let mut classes = Vec::with_capacity(groups.len());
            for (class, g, s) in &groups {
                let mask = |name: &str| -> Result<CacheBitmask, ResctrlError> {
                    let v = match s {
                        Some(s) => s
                            .cache_mask(name, domain.get())
                            .map_err(|e| self.bad_value(g, &e))?,
                        None => None,
                    };
                    let v =
                        v.unwrap_or_else(|| self.info.caches.get(name).map_or(0, |c| c.cbm_mask));
                    CacheBitmask::new(v).map_err(|_| ResctrlError::Parse {
                        path: self.fs.path(&join(g, "schemata")),
                        text: format!("{name}:{domain}=0"),
                        expected: "a non-empty mask (an empty CBM, legal on AMD, has no \
                                   CacheBitmask)"
                            .into(),
                    })
                };
                let m = match schemas {
                    CatSchemas::Unified(u) => CatMask::Unified(mask(u)?),
                    CatSchemas::Cdp { data, code } => CatMask::Cdp {
                        data: mask(data)?,
                        code: mask(code)?,
                    },
                };
                classes.push(CatClass {
                    class: *class,
                    mask: m,
                });
            }
            out.push(classes);
        }
        Ok(out)
    }

    /// The `schemata` of the root (COS 0) and of each `COS<n>` of the first `n` classes, read
    /// once under the shared lock: `None` for a class whose group does not exist (it holds
    /// the defaults).
    fn class_schemata(
        &mut self,
        n: u32,
    ) -> Result<Vec<(ClassId, String, Option<Schemata>)>, ResctrlError> {
        let _g = self.lock.shared()?;
        let mut out = Vec::with_capacity(n as usize);
        for class in (0..n).map(ClassId::new) {
            let g = self.group_of(class);
            let s = if g.is_empty() || self.fs.exists(&g) {
                Some(self.read_schemata(&g)?)
            } else {
                None
            };
            out.push((class, g, s));
        }
        Ok(out)
    }

    /// [`Backend::set_cat_masks`] on resctrl: every class, domain and mask checked
    /// ([`Capabilities::check_cat`](rdt_core::Capabilities::check_cat)), then one
    /// `schemata` write per class for all its domains.
    pub(super) fn write_cat_classes(
        &mut self,
        resource: CatResource,
        masks: &[(CacheDomain, CatClass)],
    ) -> Result<(), ResctrlError> {
        let schemas = self.cat_schemas(resource)?;
        let which = if resource == CatResource::L3 {
            "L3"
        } else {
            "L2"
        };
        let first = match schemas {
            CatSchemas::Unified(s) | CatSchemas::Cdp { data: s, .. } => s,
        };
        let mut plan: BTreeMap<ClassId, Vec<(&'static str, u32, String)>> = BTreeMap::new();
        for (domain, c) in masks {
            self.check_domain(first, which, *domain)?;
            self.caps.check_cat(resource, c)?;
            self.check_closid(c.class)?;
            let sets = plan.entry(c.class).or_default();
            match (c.mask, schemas) {
                (CatMask::Unified(m), CatSchemas::Unified(s)) => {
                    sets.push((s, domain.get(), m.to_string()));
                }
                (CatMask::Cdp { data, code }, CatSchemas::Cdp { data: ds, code: cs }) => {
                    sets.push((ds, domain.get(), data.to_string()));
                    sets.push((cs, domain.get(), code.to_string()));
                }
                // check_cat matched the mask kind to the capabilities' CDP state, which is
                // the mount's: a difference is a kernel that changed under us
                _ => {
                    return Err(RequestError::CdpMismatch {
                        resource,
                        class: c.class,
                        reason: "resctrl's schemata and the CDP state read at start differ",
                    }
                    .into());
                }
            }
        }
        let _g = self.lock.exclusive()?;
        self.apply(&plan)
    }

    /// [`Backend::bandwidth_classes_in`] on resctrl (the `MB` or `SMBA` schema): each
    /// class's `schemata` is read once for every domain.
    pub(super) fn read_mba_classes_in(
        &mut self,
        resource: MbaResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, ResctrlError> {
        let (name, schema) = (resource.name(), resource.schema());
        let mba = self
            .caps
            .bandwidth(resource)
            .get()
            .ok_or(LimitError::Unsupported(name))?;
        let (n, default) = (mba.num_classes, self.default_bw(resource));
        let default = u32::try_from(default).unwrap_or(u32::MAX);
        for &domain in domains {
            self.check_domain(schema, schema, domain)?;
        }
        let groups = self.class_schemata(n)?;
        let mut out = Vec::with_capacity(domains.len());
        for &domain in domains {
            let mut classes = Vec::with_capacity(groups.len());
            for (class, g, s) in &groups {
                let v = match s {
                    Some(s) => s
                        .bandwidth(schema, domain.get())
                        .map_err(|e| self.bad_value(g, &e))?,
                    None => None,
                };
                classes.push(MbaClass {
                    class: *class,
                    limit: self.mba_limit(resource, v.unwrap_or(default)),
                });
            }
            out.push(classes);
        }
        Ok(out)
    }

    /// [`BackendExt::set_bandwidth_classes`] on resctrl (the `MB` or `SMBA` schema).
    pub(super) fn write_mba_classes(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> Result<Vec<(CacheDomain, MbaClass)>, ResctrlError> {
        let (name, schema) = (resource.name(), resource.schema());
        self.caps
            .bandwidth(resource)
            .get()
            .ok_or(LimitError::Unsupported(name))?;
        let info = match resource {
            MbaResource::Mba => self.info.mb.as_ref(),
            MbaResource::Smba => self.info.smba.as_ref(),
        };
        let min = info.map_or(0, |m| m.min_bandwidth);
        let mut plan: BTreeMap<ClassId, Vec<(&'static str, u32, String)>> = BTreeMap::new();
        for (domain, c) in limits {
            self.check_domain(schema, schema, *domain)?;
            self.check_closid(c.class)?;
            self.caps
                .check_bandwidth_limit(Interface::Os, resource, c.class, c.limit)?;
            let v = c.limit.value();
            // resctrl's own floor: info/MB/min_bandwidth (percent MBA).
            if matches!(c.limit, MbaLimit::Percent(_)) && v < min {
                return Err(LimitError::MbaOutOfRange {
                    value: v,
                    min,
                    max: 100,
                }
                .into());
            }
            plan.entry(c.class)
                .or_default()
                .push((schema, domain.get(), v.to_string()));
        }
        let _g = self.lock.exclusive()?;
        self.apply(&plan)?;
        // What the kernel applied: each class's `schemata` read back once.
        let mut back: BTreeMap<ClassId, Option<Schemata>> = BTreeMap::new();
        for &class in plan.keys() {
            let g = self.group_of(class);
            // No group (the defaults were asked for, so none was made, or it was removed
            // as unused): it reads as the defaults, which is what was asked.
            let s = if !g.is_empty() && !self.fs.exists(&g) {
                None
            } else {
                Some(self.read_schemata(&g)?)
            };
            back.insert(class, s);
        }
        let mut applied = Vec::with_capacity(limits.len());
        for &(domain, c) in limits {
            let limit = match back.get(&c.class).and_then(Option::as_ref) {
                None => c.limit,
                Some(s) => {
                    let g = self.group_of(c.class);
                    let v = s
                        .bandwidth(schema, domain.get())
                        .map_err(|e| self.bad_value(&g, &e))?
                        .unwrap_or(0);
                    self.mba_limit(resource, v)
                }
            };
            applied.push((
                domain,
                MbaClass {
                    class: c.class,
                    limit,
                },
            ));
        }
        Ok(applied)
    }

    /// [`BackendExt::reset_allocation`] on resctrl.
    pub(super) fn reset_alloc(&mut self, cfg: AllocReset) -> Result<(), ResctrlError> {
        // pqos's OS interface never reports MBA 4.0 (lib/os_cap.c leaves `mba40` 0), so its
        // reset refuses `mba40-on` and has nothing to do for `mba40-off` (lib/os_allocation.c
        // as lib/allocation.c: "MBA 4.0 extensions requested but not supported by the
        // platform!", or without MBA "MBA 4.0 setting requested but no MBA present!")
        if cfg.mba40 != FeatureSetting::Any && !self.caps.mba.is_present() {
            return Err(RequestError::Unsupported(
                "MBA 4.0 setting requested but no MBA present!".into(),
            )
            .into());
        }
        if cfg.mba40 == FeatureSetting::On {
            return Err(RequestError::Unsupported(
                "MBA 4.0 extensions requested but not supported by the platform! (resctrl \
                 has no MBA 4.0 control; the MSR interface programs IA32_MBA_CFG)"
                    .into(),
            )
            .into());
        }
        // resctrl has no I/O RDT control (pqos's OS interface reports `iordt` 0, so
        // `l3iordt-on` fails as on a part without it; `l3iordt-off` has nothing to do)
        if cfg.l3_iordt != FeatureSetting::Any && !self.caps.l3_cat.is_present() {
            return Err(RequestError::Unsupported(
                "L3 I/O RDT setting requested but no L3 CAT present!".into(),
            )
            .into());
        }
        if cfg.l3_iordt == FeatureSetting::On {
            return Err(RequestError::Unsupported(
                "L3 I/O RDT requested but not supported by the platform! (resctrl has no I/O \
                 RDT control; the MSR interface programs IA32_L3_IO_QOS_CFG)"
                    .into(),
            )
            .into());
        }
        let want = self.wanted_options(cfg)?;
        let have = self.mount_options();
        if (want.cdp, want.cdpl2, want.mba_mbps) != (have.cdp, have.cdpl2, have.mba_mbps) {
            return self.remount(want);
        }
        let _g = self.lock.exclusive()?;
        self.reset_groups()
    }

    /// [`BackendExt::set_io_alloc`](rdt_core::BackendExt::set_io_alloc) on resctrl: `1` or `0`
    /// to the `io_alloc` file [`Self::read_io_alloc`] reads (the kernel's
    /// `resctrl_io_alloc_write` takes a boolean); nothing when it is already so.
    pub(super) fn write_io_alloc(&self, enabled: bool) -> Result<(), ResctrlError> {
        let Some(current) = self.read_io_alloc()? else {
            return Err(RequestError::Unsupported(
                "resctrl has no L3 I/O allocation here (info/L3/io_alloc: AMD SDCIAE, Linux \
                 6.19 and later)"
                    .to_owned(),
            )
            .into());
        };
        if current.enabled == enabled {
            return Ok(());
        }
        let schema = if self.info.caches.contains_key("L3") {
            "L3"
        } else {
            "L3CODE"
        };
        let _g = self.lock.exclusive()?;
        self.fs.write(
            &format!("info/{schema}/io_alloc"),
            if enabled { "1\n" } else { "0\n" },
        )
    }

    /// [`BackendExt::io_alloc`](rdt_core::BackendExt::io_alloc) on resctrl: `info/L3/io_alloc`
    /// (`info/L3CODE/io_alloc` while CDP is on; the kernel puts the files in every cache
    /// info directory) and, while enabled, `io_alloc_cbm`. The CLOSID is
    /// `resctrl_io_alloc_closid()`: the schema's `num_closids` (already halved under CDP)
    /// minus one. `None` without the file (before Linux 6.19, or no L3 CAT) or when it reads
    /// `not supported`.
    pub(super) fn read_io_alloc(&self) -> Result<Option<IoAlloc>, ResctrlError> {
        let Some((schema, info)) = ["L3", "L3CODE"]
            .into_iter()
            .find_map(|s| self.info.caches.get(s).map(|i| (s, i)))
        else {
            return Ok(None);
        };
        let _g = self.lock.shared()?;
        let rel = format!("info/{schema}/io_alloc");
        let Some(state) = self.fs.read_opt(&rel)? else {
            return Ok(None);
        };
        let enabled = match state.trim() {
            "enabled" => true,
            "disabled" => false,
            "not supported" => return Ok(None),
            other => {
                return Err(ResctrlError::Parse {
                    path: self.fs.path(&rel),
                    text: other.to_owned(),
                    expected: "enabled, disabled or not supported".to_owned(),
                });
            }
        };
        let class = ClassId::new(info.num_closids.saturating_sub(1));
        let mut masks = Vec::new();
        if enabled {
            let rel = format!("info/{schema}/io_alloc_cbm");
            let text = self.fs.read(&rel)?;
            let bad = |expected: String| ResctrlError::Parse {
                path: self.fs.path(&rel),
                text: text.trim().to_owned(),
                expected,
            };
            // `0=ffff;1=ffff`: a schemata line without its name.
            let line: crate::Schemata = format!("L3:{}", text.trim())
                .parse()
                .map_err(|e: crate::SchemataError| bad(e.to_string()))?;
            for d in line.domains("L3") {
                if let Some(m) = line.cache_mask("L3", d).map_err(|e| bad(e.to_string()))? {
                    let m = CacheBitmask::new(m).map_err(|e| bad(e.to_string()))?;
                    masks.push((CacheDomain::new(d), m));
                }
            }
        }
        Ok(Some(IoAlloc {
            enabled,
            class,
            masks,
        }))
    }

    /// [`BackendExt::mba_ctrl`] on resctrl.
    pub(super) fn mba_ctrl_state(&self) -> MbaCtrl {
        if self.mba_mbps {
            MbaCtrl::Enabled
        } else if self.caps.supports_mba_mbps(self.snc) {
            MbaCtrl::Disabled
        } else {
            MbaCtrl::Unsupported
        }
    }
}

impl<P: PmuSource> ResctrlBackend<P> {
    /// Removes the control group of the named class `name`
    /// ([`BackendExt::class_named`](rdt_core::BackendExt::class_named)) when it holds nothing any
    /// more: no task, no CPU, no monitor group (its `schemata` may be anything: the group
    /// goes with it, giving its CLOSID back). `false`, and nothing
    /// removed, when the group is absent or still holds something (another container's
    /// tasks, say); the name is forgotten when the group is gone.
    ///
    /// # Errors
    /// A name that cannot be a group; the root lock; a read or the `rmdir` fails.
    pub fn remove_named_group(&mut self, name: &str) -> Result<bool, ResctrlError> {
        Self::check_group_name(name)?;
        let removed = {
            let _g = self.lock.exclusive()?;
            let held = !self.fs.exists(name)
                || !self.fs.cpus(name)?.is_empty()
                || !self.fs.tasks(name)?.is_empty()
                || !self.fs.subdirs(&join(name, "mon_groups"))?.is_empty();
            if !held {
                self.fs.rmdir(name)?;
                self.unrecord_group(name);
            }
            !held
        };
        if removed || !self.fs.exists(name) {
            self.names.retain(|_, n| n != name);
            self.created.remove(name);
        }
        Ok(removed)
    }

    /// The control group of `class`: its name ([`BackendExt::class_named`]), `COS<n>`, or the
    /// root (`""`) for COS 0.
    pub(super) fn group_of(&self, class: ClassId) -> String {
        self.names
            .get(&class)
            .cloned()
            .unwrap_or_else(|| cos_group(class))
    }

    /// The class of control group `g`: `COS<n>` gives n, a named class its number; `None`
    /// for another tool's group.
    pub(super) fn class_of_group(&self, g: &str) -> Option<u32> {
        cos_of_name(g).or_else(|| {
            self.names
                .iter()
                .find(|(_, n)| *n == g)
                .map(|(c, _)| c.get())
        })
    }

    /// Refuses a name that cannot be a control group of ours.
    pub(super) fn check_group_name(name: &str) -> Result<(), ResctrlError> {
        let bad = name.is_empty()
            || name.contains('/')
            || name == "."
            || name == ".."
            || RESERVED.contains(&name)
            || cos_of_name(name).is_some();
        if bad {
            return Err(RequestError::Unsupported(format!(
                "`{name}` cannot name a class: a resctrl group name must not be empty, `.`, \
                 `..`, info, mon_groups, mon_data or COS<n>, nor contain `/`"
            ))
            .into());
        }
        Ok(())
    }
}
