//! Allocation (pqos.h "Allocation Technology", "L3/L2 cache allocation", "Memory Bandwidth
//! Allocation"): every write is one transaction of the library
//! ([`rdt_pqos::transaction::run`]: all changes validated before any is written, journaled,
//! undone newest first on a failed write, under the writers' lock), every read the backend's.

use std::ffi::{c_int, c_uint};

use libc::pid_t;
use rdt_pqos::transaction::{self, Change, MaskScope};
use rdt_pqos::{
    AllocReset, Backend, BackendExt, CacheBitmask, CacheDomain, CatMask, CatResource, ClassId,
    FeatureSetting, Interface, LogicalCpu, MbaKind, MbaLimit, MbaResource, Rdt, TaskId,
};

use crate::error::{code, transaction_code};
use crate::state::{Lib, with_lib, with_lib_opt};
use crate::types::{
    EnumCdpConfig, EnumMbaConfig, PQOS_RETVAL_OK, PQOS_RETVAL_PARAM, PQOS_RETVAL_RESOURCE,
    pqos_alloc_config, pqos_ca_masks, pqos_ca_u, pqos_cap_type, pqos_l2ca, pqos_l3ca, pqos_mba,
};
use crate::util::malloc_array;

/// The most entries one call takes (classes, cores, tasks): far above any platform's 4096
/// CPUs, so that a wrong count from C is refused before anything is read through it.
pub(crate) const MAX_ENTRIES: c_uint = 1 << 16;

/// Applies `changes` as one transaction and refreshes the capabilities (a reset may have
/// turned CDP or the controller on or off).
fn apply(lib: &mut Lib, changes: &[Change]) -> c_int {
    let result = transaction_code(transaction::run(&mut lib.rdt, changes));
    if changes.iter().any(|c| matches!(c, Change::Reset(_))) {
        lib.caps.refresh(&mut lib.rdt);
    }
    match result {
        Ok(_) => PQOS_RETVAL_OK,
        Err(code) => code,
    }
}

/// A C array as a slice: NULL or a count of 0 or above [`MAX_ENTRIES`] is `None`.
///
/// # Safety
/// A non-NULL `ptr` points to `n` Ts (pqos.h's contract for the array arguments).
pub(crate) unsafe fn array<'a, T>(ptr: *const T, n: c_uint) -> Option<&'a [T]> {
    if ptr.is_null() || n == 0 || n > MAX_ENTRIES {
        return None;
    }
    // SAFETY: per this function's contract.
    Some(unsafe { std::slice::from_raw_parts(ptr, n as usize) })
}

fn task(pid: pid_t) -> Option<TaskId> {
    u32::try_from(pid).ok().filter(|&p| p > 0).map(TaskId::new)
}

/// Associates a core with a class (pqos.h `pqos_alloc_assoc_set`). A core or class the
/// platform does not have is `PQOS_RETVAL_PARAM`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assoc_set(lcore: c_uint, class_id: c_uint) -> c_int {
    with_lib("pqos_alloc_assoc_set", |lib| {
        let change = Change::Cpu {
            cpu: LogicalCpu::new(lcore),
            class: ClassId::new(class_id),
        };
        apply(lib, &[change])
    })
}

/// The class of a core (pqos.h `pqos_alloc_assoc_get`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assoc_get(lcore: c_uint, class_id: *mut c_uint) -> c_int {
    with_lib("pqos_alloc_assoc_get", |lib| {
        // SAFETY: pqos.h: `class_id` points to an unsigned (NULL checked).
        let Some(out) = (unsafe { class_id.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        match lib.rdt.class_of(LogicalCpu::new(lcore)) {
            Ok(c) => {
                *out = c.get();
                PQOS_RETVAL_OK
            }
            Err(e) => code(&e),
        }
    })
}

/// Associates a task with a class (pqos.h `pqos_alloc_assoc_set_pid`; OS interface, else
/// `PQOS_RETVAL_INTER`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assoc_set_pid(task_id: pid_t, class_id: c_uint) -> c_int {
    with_lib("pqos_alloc_assoc_set_pid", |lib| {
        let Some(task) = task(task_id) else {
            return PQOS_RETVAL_PARAM;
        };
        apply(
            lib,
            &[Change::Task {
                task,
                class: ClassId::new(class_id),
            }],
        )
    })
}

/// The class of a task (pqos.h `pqos_alloc_assoc_get_pid`; OS interface).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assoc_get_pid(task_id: pid_t, class_id: *mut c_uint) -> c_int {
    with_lib("pqos_alloc_assoc_get_pid", |lib| {
        // SAFETY: pqos.h: `class_id` points to an unsigned (NULL checked).
        let (Some(task), Some(out)) = (task(task_id), unsafe { class_id.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        match lib.rdt.class_of_task(task) {
            Ok(c) => {
                *out = c.get();
                PQOS_RETVAL_OK
            }
            Err(e) => code(&e),
        }
    })
}

/// The technologies `pqos_alloc_assign` accepts: L3 CAT, L2 CAT, MBA, SMBA bits.
fn technology_ok(lib: &Lib, technology: c_uint) -> bool {
    let known = [
        pqos_cap_type::PQOS_CAP_TYPE_L3CA,
        pqos_cap_type::PQOS_CAP_TYPE_L2CA,
        pqos_cap_type::PQOS_CAP_TYPE_MBA,
        pqos_cap_type::PQOS_CAP_TYPE_SMBA,
    ]
    .iter()
    .fold(0, |m, t| m | (1 << *t as c_uint));
    let caps = lib.rdt.capabilities();
    technology != 0
        && technology & !known == 0
        && (technology & (1 << pqos_cap_type::PQOS_CAP_TYPE_L3CA as c_uint) == 0
            || caps.l3_cat.is_present())
        && (technology & (1 << pqos_cap_type::PQOS_CAP_TYPE_L2CA as c_uint) == 0
            || caps.l2_cat.is_present())
        && (technology & (1 << pqos_cap_type::PQOS_CAP_TYPE_MBA as c_uint) == 0
            || caps.mba.is_present())
        && (technology & (1 << pqos_cap_type::PQOS_CAP_TYPE_SMBA as c_uint) == 0
            || caps.smba.is_present())
}

/// The highest free class ([`transaction::free_classes`]: no CPU, no task, default masks and
/// limits), or `PQOS_RETVAL_RESOURCE`.
fn free_class(rdt: &mut Rdt) -> Result<ClassId, c_int> {
    match transaction::free_classes(rdt, &[]) {
        Ok(free) => free.last().copied().ok_or_else(|| {
            log::error!("no free class of service");
            PQOS_RETVAL_RESOURCE
        }),
        Err(e) => Err(code(&e)),
    }
}

/// Puts the cores in the highest free class of service (pqos.h `pqos_alloc_assign`) and
/// tells which.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assign(
    technology: c_uint,
    core_array: *const c_uint,
    core_num: c_uint,
    class_id: *mut c_uint,
) -> c_int {
    with_lib("pqos_alloc_assign", |lib| {
        // SAFETY: pqos.h: `core_array` holds `core_num` cores; `class_id` an unsigned.
        let (Some(cores), false) = (unsafe { array(core_array, core_num) }, class_id.is_null())
        else {
            return PQOS_RETVAL_PARAM;
        };
        if !technology_ok(lib, technology) {
            return PQOS_RETVAL_PARAM;
        }
        let class = match free_class(&mut lib.rdt) {
            Ok(c) => c,
            Err(code) => return code,
        };
        let changes: Vec<Change> = cores
            .iter()
            .map(|&c| Change::Cpu {
                cpu: LogicalCpu::new(c),
                class,
            })
            .collect();
        let ret = apply(lib, &changes);
        if ret == PQOS_RETVAL_OK {
            // SAFETY: checked non-NULL above.
            unsafe { *class_id = class.get() };
        }
        ret
    })
}

/// Puts the cores back in COS 0 (pqos.h `pqos_alloc_release`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_release(core_array: *const c_uint, core_num: c_uint) -> c_int {
    with_lib("pqos_alloc_release", |lib| {
        // SAFETY: pqos.h: `core_array` holds `core_num` cores.
        let Some(cores) = (unsafe { array(core_array, core_num) }) else {
            return PQOS_RETVAL_PARAM;
        };
        let changes: Vec<Change> = cores
            .iter()
            .map(|&c| Change::Cpu {
                cpu: LogicalCpu::new(c),
                class: ClassId::new(0),
            })
            .collect();
        apply(lib, &changes)
    })
}

/// Puts the tasks in the highest free class of service (pqos.h `pqos_alloc_assign_pid`; OS
/// interface).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assign_pid(
    technology: c_uint,
    task_array: *const pid_t,
    task_num: c_uint,
    class_id: *mut c_uint,
) -> c_int {
    with_lib("pqos_alloc_assign_pid", |lib| {
        // SAFETY: pqos.h: `task_array` holds `task_num` tasks; `class_id` an unsigned.
        let (Some(tasks), false) = (unsafe { array(task_array, task_num) }, class_id.is_null())
        else {
            return PQOS_RETVAL_PARAM;
        };
        let Some(tasks) = tasks.iter().map(|&t| task(t)).collect::<Option<Vec<_>>>() else {
            return PQOS_RETVAL_PARAM;
        };
        if !technology_ok(lib, technology) {
            return PQOS_RETVAL_PARAM;
        }
        let class = match free_class(&mut lib.rdt) {
            Ok(c) => c,
            Err(code) => return code,
        };
        let changes: Vec<Change> = tasks
            .into_iter()
            .map(|task| Change::Task { task, class })
            .collect();
        let ret = apply(lib, &changes);
        if ret == PQOS_RETVAL_OK {
            // SAFETY: checked non-NULL above.
            unsafe { *class_id = class.get() };
        }
        ret
    })
}

/// Puts the tasks back in COS 0 (pqos.h `pqos_alloc_release_pid`; OS interface).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_release_pid(
    task_array: *const pid_t,
    task_num: c_uint,
) -> c_int {
    with_lib("pqos_alloc_release_pid", |lib| {
        // SAFETY: pqos.h: `task_array` holds `task_num` tasks.
        let Some(tasks) = (unsafe { array(task_array, task_num) }) else {
            return PQOS_RETVAL_PARAM;
        };
        let Some(changes) = tasks
            .iter()
            .map(|&t| {
                task(t).map(|task| Change::Task {
                    task,
                    class: ClassId::new(0),
                })
            })
            .collect::<Option<Vec<_>>>()
        else {
            return PQOS_RETVAL_PARAM;
        };
        apply(lib, &changes)
    })
}

fn cdp_setting(v: EnumCdpConfig) -> Option<FeatureSetting> {
    match v {
        0 => Some(FeatureSetting::Any),
        1 => Some(FeatureSetting::Off),
        2 => Some(FeatureSetting::On),
        _ => None,
    }
}

fn mba_setting(v: EnumMbaConfig) -> Option<FeatureSetting> {
    match v {
        0 => Some(FeatureSetting::Any),
        1 => Some(FeatureSetting::Off),
        2 => Some(FeatureSetting::On),
        _ => None,
    }
}

/// Resets allocation with `cfg` (NULL: every setting "any").
fn reset(lib: &mut Lib, cfg: Option<&pqos_alloc_config>) -> c_int {
    let cfg = cfg.copied().unwrap_or(pqos_alloc_config {
        l3_cdp: 0,
        l2_cdp: 0,
        mba: 0,
        mba40: 0,
        l3_iordt: 0,
        smba: 0,
        reserved: [0; 4],
    });
    // enum pqos_mba40_config has pqos_mba_config's values (ANY, OFF, ON)
    // enum pqos_iordt_config has pqos_cdp_config's values (ANY, OFF, ON)
    let (Some(l3_cdp), Some(l2_cdp), Some(mba_ctrl), Some(mba40), Some(l3_iordt), true) = (
        cdp_setting(cfg.l3_cdp),
        cdp_setting(cfg.l2_cdp),
        mba_setting(cfg.mba),
        mba_setting(cfg.mba40),
        cdp_setting(cfg.l3_iordt),
        cfg.smba <= 2,
    ) else {
        return PQOS_RETVAL_PARAM;
    };
    // SMBA has no controller: asking to turn it on is a missing resource, as in libpqos.
    // MBA 4.0 and L3 I/O RDT are the library's to refuse where the part lacks them.
    if cfg.smba == 2 {
        log::error!("the SMBA controller is not supported");
        return PQOS_RETVAL_RESOURCE;
    }
    apply(
        lib,
        &[Change::Reset(AllocReset {
            l3_cdp,
            l2_cdp,
            mba_ctrl,
            mba40,
            l3_iordt,
        })],
    )
}

/// Resets allocation (pqos.h `pqos_alloc_reset`, deprecated): every class to all ways and
/// no limit, every core to COS 0, CDP and the MBA controller as asked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_reset(
    l3_cdp_cfg: EnumCdpConfig,
    l2_cdp_cfg: EnumCdpConfig,
    mba_cfg: EnumMbaConfig,
) -> c_int {
    with_lib("pqos_alloc_reset", |lib| {
        let cfg = pqos_alloc_config {
            l3_cdp: l3_cdp_cfg,
            l2_cdp: l2_cdp_cfg,
            mba: mba_cfg,
            mba40: 0,
            l3_iordt: 0,
            smba: 0,
            reserved: [0; 4],
        };
        reset(lib, Some(&cfg))
    })
}

/// Resets allocation with a configuration (pqos.h `pqos_alloc_reset_config`; NULL: keep CDP
/// and the controller as they are).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_reset_config(cfg: *const pqos_alloc_config) -> c_int {
    with_lib("pqos_alloc_reset_config", |lib| {
        // SAFETY: pqos.h: `cfg` is NULL or a pqos_alloc_config.
        reset(lib, unsafe { cfg.as_ref() })
    })
}

/// The changes setting `classes` (class, cdp, ways or data/code masks) of `resource` in
/// `domain`; a class without CDP while CDP is on gets its mask as both (libpqos
/// `hw_l3ca_set`); CDP masks while CDP is off is `PQOS_RETVAL_PARAM`.
fn cat_changes(
    lib: &Lib,
    resource: CatResource,
    domain: c_uint,
    classes: impl Iterator<Item = (c_uint, c_int, pqos_ca_u)>,
) -> Result<Vec<Change>, c_int> {
    let cdp_on = lib
        .rdt
        .capabilities()
        .cat(resource)
        .is_some_and(|c| c.cdp_enabled);
    let domain = CacheDomain::new(domain);
    let mut changes = Vec::new();
    for (class_id, cdp, u) in classes {
        let class = ClassId::new(class_id);
        let mask = |bits: u64| CacheBitmask::new(bits).map_err(|_| PQOS_RETVAL_PARAM);
        if cdp != 0 {
            if !cdp_on {
                log::error!("attempting to set CDP masks of COS{class_id} while CDP is off");
                return Err(PQOS_RETVAL_PARAM);
            }
            // SAFETY: `cdp` says the union holds the data and code masks.
            let s = unsafe { u.s };
            for (scope, bits) in [
                (MaskScope::Data, s.data_mask),
                (MaskScope::Code, s.code_mask),
            ] {
                changes.push(Change::Cat {
                    resource,
                    domain,
                    class,
                    scope,
                    mask: mask(bits)?,
                });
            }
        } else {
            // SAFETY: without `cdp` the union holds the ways mask.
            let ways = unsafe { u.ways_mask };
            changes.push(Change::Cat {
                resource,
                domain,
                class,
                scope: MaskScope::Both,
                mask: mask(ways)?,
            });
        }
    }
    Ok(changes)
}

/// Sets L3 CAT classes in one L3 CAT domain (pqos.h `pqos_l3ca_set`), all or none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l3ca_set(
    l3cat_id: c_uint,
    num_cos: c_uint,
    ca: *const pqos_l3ca,
) -> c_int {
    with_lib("pqos_l3ca_set", |lib| {
        // SAFETY: pqos.h: `ca` holds `num_cos` classes.
        let Some(ca) = (unsafe { array(ca, num_cos) }) else {
            return PQOS_RETVAL_PARAM;
        };
        match cat_changes(
            lib,
            CatResource::L3,
            l3cat_id,
            ca.iter().map(|c| (c.class_id, c.cdp, c.u)),
        ) {
            Ok(changes) => apply(lib, &changes),
            Err(code) => code,
        }
    })
}

/// Sets L2 CAT classes in one L2 domain (pqos.h `pqos_l2ca_set`), all or none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l2ca_set(
    l2id: c_uint,
    num_cos: c_uint,
    ca: *const pqos_l2ca,
) -> c_int {
    with_lib("pqos_l2ca_set", |lib| {
        // SAFETY: pqos.h: `ca` holds `num_cos` classes.
        let Some(ca) = (unsafe { array(ca, num_cos) }) else {
            return PQOS_RETVAL_PARAM;
        };
        match cat_changes(
            lib,
            CatResource::L2,
            l2id,
            ca.iter().map(|c| (c.class_id, c.cdp, c.u)),
        ) {
            Ok(changes) => apply(lib, &changes),
            Err(code) => code,
        }
    })
}

/// The classes of `resource` in `domain` as (class, cdp, masks), at most `max`.
fn cat_get(
    lib: &mut Lib,
    resource: CatResource,
    domain: c_uint,
    max: c_uint,
) -> Result<Vec<(c_uint, c_int, pqos_ca_u)>, c_int> {
    let classes = lib
        .rdt
        .cat_classes(resource, CacheDomain::new(domain))
        .map_err(|e| code(&e))?;
    if classes.len() > max as usize {
        log::error!("{} classes do not fit in a table of {max}", classes.len());
        return Err(PQOS_RETVAL_PARAM);
    }
    Ok(classes
        .into_iter()
        .map(|c| match c.mask {
            CatMask::Unified(m) => (
                c.class.get(),
                0,
                pqos_ca_u {
                    ways_mask: m.bits(),
                },
            ),
            CatMask::Cdp { data, code } => (
                c.class.get(),
                1,
                pqos_ca_u {
                    s: pqos_ca_masks {
                        data_mask: data.bits(),
                        code_mask: code.bits(),
                    },
                },
            ),
        })
        .collect())
}

/// Reads the L3 CAT classes of one L3 CAT domain (pqos.h `pqos_l3ca_get`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l3ca_get(
    l3cat_id: c_uint,
    max_num_ca: c_uint,
    num_ca: *mut c_uint,
    ca: *mut pqos_l3ca,
) -> c_int {
    with_lib("pqos_l3ca_get", |lib| {
        if num_ca.is_null() || ca.is_null() || max_num_ca == 0 || max_num_ca > MAX_ENTRIES {
            return PQOS_RETVAL_PARAM;
        }
        match cat_get(lib, CatResource::L3, l3cat_id, max_num_ca) {
            Ok(list) => {
                for (i, (class_id, cdp, u)) in list.iter().enumerate() {
                    // SAFETY: pqos.h: `ca` has room for `max_num_ca` entries, and
                    // `list.len() <= max_num_ca`.
                    unsafe {
                        ca.add(i).write(pqos_l3ca {
                            domain_id: 0,
                            class_id: *class_id,
                            cdp: *cdp,
                            u: *u,
                        });
                    }
                }
                // SAFETY: non-NULL, per pqos.h an unsigned.
                unsafe { *num_ca = c_uint::try_from(list.len()).unwrap_or(0) };
                PQOS_RETVAL_OK
            }
            Err(code) => code,
        }
    })
}

/// Reads the L2 CAT classes of one L2 domain (pqos.h `pqos_l2ca_get`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l2ca_get(
    l2id: c_uint,
    max_num_ca: c_uint,
    num_ca: *mut c_uint,
    ca: *mut pqos_l2ca,
) -> c_int {
    with_lib("pqos_l2ca_get", |lib| {
        if num_ca.is_null() || ca.is_null() || max_num_ca == 0 || max_num_ca > MAX_ENTRIES {
            return PQOS_RETVAL_PARAM;
        }
        match cat_get(lib, CatResource::L2, l2id, max_num_ca) {
            Ok(list) => {
                for (i, (class_id, cdp, u)) in list.iter().enumerate() {
                    // SAFETY: as in pqos_l3ca_get.
                    unsafe {
                        ca.add(i).write(pqos_l2ca {
                            class_id: *class_id,
                            cdp: *cdp,
                            u: *u,
                        });
                    }
                }
                // SAFETY: non-NULL, per pqos.h an unsigned.
                unsafe { *num_ca = c_uint::try_from(list.len()).unwrap_or(0) };
                PQOS_RETVAL_OK
            }
            Err(code) => code,
        }
    })
}

/// The minimum bits of a mask of `resource` as libpqos reports it
/// ([`rdt_pqos::pqos_caps::min_cbm_bits`]).
fn min_bits(resource: CatResource, out: *mut c_uint, name: &str) -> c_int {
    with_lib(name, |lib| {
        // SAFETY: pqos.h: `out` points to an unsigned (NULL checked).
        let Some(out) = (unsafe { out.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        let iface = lib.rdt.interface();
        match lib.rdt.capabilities().cat(resource) {
            Some(c) => {
                *out = rdt_pqos::pqos_caps::min_cbm_bits(c, iface);
                PQOS_RETVAL_OK
            }
            None => PQOS_RETVAL_RESOURCE,
        }
    })
}

/// Minimum bits of an L3 mask (pqos.h `pqos_l3ca_get_min_cbm_bits`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l3ca_get_min_cbm_bits(min_cbm_bits: *mut c_uint) -> c_int {
    min_bits(CatResource::L3, min_cbm_bits, "pqos_l3ca_get_min_cbm_bits")
}

/// Minimum bits of an L2 mask (pqos.h `pqos_l2ca_get_min_cbm_bits`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l2ca_get_min_cbm_bits(min_cbm_bits: *mut c_uint) -> c_int {
    min_bits(CatResource::L2, min_cbm_bits, "pqos_l2ca_get_min_cbm_bits")
}

/// The limit of an entry: MiB/s with `ctrl`, else percent (Intel) or the AMD bandwidth units
/// libpqos writes as given (`hw_mba_set_amd`).
fn limit(lib: &Lib, resource: MbaResource, m: &pqos_mba) -> Option<MbaLimit> {
    if m.ctrl != 0 {
        return Some(MbaLimit::MibPerSec(m.mb_max));
    }
    match lib.rdt.capabilities().bandwidth(resource).get()?.kind {
        MbaKind::IntelDelay { .. } => u8::try_from(m.mb_max).ok().map(MbaLimit::Percent),
        MbaKind::AmdBandwidth { .. } => Some(MbaLimit::AmdUnits(m.mb_max)),
    }
}

fn entry(class: ClassId, limit: MbaLimit, smba: bool) -> pqos_mba {
    let (mb_max, ctrl) = match limit {
        MbaLimit::Percent(p) => (c_uint::from(p), 0),
        MbaLimit::MibPerSec(v) => (v, 1),
        MbaLimit::AmdUnits(v) => (v, 0),
    };
    pqos_mba {
        class_id: class.get(),
        mb_max,
        ctrl,
        smba: c_int::from(smba),
        ..pqos_mba::default()
    }
}

/// Sets MBA (or, for entries with `smba`, SMBA) classes in one MBA domain (pqos.h
/// `pqos_mba_set`), all or none; `actual` (may be NULL) receives what the platform stored
/// (Intel rounds to its granularity). On the MMIO interface: the region controls each entry
/// names (its `domain_id`, `mem_regions`; `mba_id` unused): region_mba.rs says how.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mba_set(
    mba_id: c_uint,
    num_cos: c_uint,
    requested: *const pqos_mba,
    actual: *mut pqos_mba,
) -> c_int {
    with_lib("pqos_mba_set", |lib| {
        // SAFETY: pqos.h: `requested` holds `num_cos` entries.
        let Some(requested) = (unsafe { array(requested, num_cos) }) else {
            return PQOS_RETVAL_PARAM;
        };
        if lib.rdt.interface() == Interface::Mmio {
            return crate::region_mba::set(lib, requested, actual);
        }
        let domain = CacheDomain::new(mba_id);
        let mut changes = Vec::new();
        for m in requested {
            let resource = if m.smba != 0 {
                MbaResource::Smba
            } else {
                MbaResource::Mba
            };
            let Some(limit) = limit(lib, resource, m) else {
                return if lib.rdt.capabilities().bandwidth(resource).is_present() {
                    PQOS_RETVAL_PARAM
                } else {
                    PQOS_RETVAL_RESOURCE
                };
            };
            changes.push(Change::Mba {
                resource,
                domain,
                class: ClassId::new(m.class_id),
                limit,
            });
        }
        let done = match transaction_code(transaction::run(&mut lib.rdt, &changes)) {
            Ok(done) => done,
            Err(code) => return code,
        };
        if !actual.is_null() {
            for (i, (m, change)) in requested.iter().zip(&changes).enumerate() {
                let Change::Mba { class, limit, .. } = change else {
                    continue;
                };
                let applied = done
                    .iter()
                    .filter(|d| d.change == i)
                    .find_map(|d| d.applied)
                    .unwrap_or(*limit);
                // SAFETY: pqos.h: `actual` has room for `num_cos` entries.
                unsafe { actual.add(i).write(entry(*class, applied, m.smba != 0)) };
            }
        }
        PQOS_RETVAL_OK
    })
}

/// Reads the MBA classes of one MBA domain (pqos.h `pqos_mba_get`); on a platform with SMBA
/// and no MBA, the SMBA classes (with `smba` set). On the MMIO interface: the region
/// controls of every class in the domain `mba_tab[0].domain_id` names (region_mba.rs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mba_get(
    mba_id: c_uint,
    max_num_cos: c_uint,
    num_cos: *mut c_uint,
    mba_tab: *mut pqos_mba,
) -> c_int {
    with_lib("pqos_mba_get", |lib| {
        if num_cos.is_null() || mba_tab.is_null() || max_num_cos == 0 || max_num_cos > MAX_ENTRIES {
            return PQOS_RETVAL_PARAM;
        }
        if lib.rdt.interface() == Interface::Mmio {
            // SAFETY: pqos.h: `mba_tab` has room for `max_num_cos` entries, `num_cos` is an
            // unsigned (both non-NULL, checked).
            return unsafe { crate::region_mba::get(lib, max_num_cos, &mut *num_cos, mba_tab) };
        }
        let caps = lib.rdt.capabilities();
        let resource = if caps.mba.is_present() {
            MbaResource::Mba
        } else if caps.smba.is_present() {
            MbaResource::Smba
        } else {
            return PQOS_RETVAL_RESOURCE;
        };
        let classes = match lib
            .rdt
            .bandwidth_classes(resource, CacheDomain::new(mba_id))
        {
            Ok(c) => c,
            Err(e) => return code(&e),
        };
        if classes.len() > max_num_cos as usize {
            return PQOS_RETVAL_PARAM;
        }
        for (i, c) in classes.iter().enumerate() {
            // SAFETY: pqos.h: `mba_tab` has room for `max_num_cos` entries.
            unsafe {
                mba_tab
                    .add(i)
                    .write(entry(c.class, c.limit, resource == MbaResource::Smba));
            };
        }
        // SAFETY: non-NULL, per pqos.h an unsigned.
        unsafe { *num_cos = c_uint::try_from(classes.len()).unwrap_or(0) };
        PQOS_RETVAL_OK
    })
}

/// The tasks of a class (pqos.h `pqos_pid_get_pid_assoc`; OS interface): a `malloc`ed array
/// the caller frees, or NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_pid_get_pid_assoc(
    class_id: c_uint,
    count: *mut c_uint,
) -> *mut c_uint {
    with_lib_opt("pqos_pid_get_pid_assoc", |lib| {
        if count.is_null() {
            return None;
        }
        match lib.rdt.tasks_of_class(ClassId::new(class_id)) {
            Ok(tasks) => {
                let ids: Vec<c_uint> = tasks.iter().map(|t| t.get()).collect();
                let p = malloc_array(&ids, count);
                if ids.is_empty() {
                    // SAFETY: non-NULL, per pqos.h an unsigned.
                    unsafe { *count = 0 };
                }
                (!p.is_null()).then_some(p)
            }
            Err(e) => {
                code(&e);
                None
            }
        }
    })
    .unwrap_or(std::ptr::null_mut())
}
