//! libpqos's utility functions over the structures `pqos_cap_get` handed out (pqos.h
//! "Utility API", lib/utils.c): they read only what they are given, take no lock and need no
//! initialised library, as in libpqos. Arrays they return come from `malloc` and are the
//! caller's to `free()` (or `pqos_free`).

use std::ffi::{c_int, c_uint, c_void};

use crate::guard::guard_or;
use crate::types::{
    EnumCapType, EnumMonEvent, EnumVendor, PQOS_RETVAL_ERROR, PQOS_RETVAL_OK, PQOS_RETVAL_PARAM,
    PQOS_RETVAL_RESOURCE, pqos_cap, pqos_cap_l2ca, pqos_cap_l3ca, pqos_cap_mba, pqos_cap_mon,
    pqos_cap_type, pqos_capability, pqos_coreinfo, pqos_cpuinfo, pqos_monitor, pqos_vendor,
};

/// The capabilities of `cap`.
///
/// # Safety
/// `cap` is NULL or points to a `pqos_cap` followed by its `num_cap` entries.
unsafe fn capabilities<'a>(cap: *const pqos_cap) -> Option<&'a [pqos_capability]> {
    // SAFETY: per this function's contract.
    unsafe {
        let c = cap.as_ref()?;
        let first = (&raw const (*cap).capabilities).cast::<pqos_capability>();
        Some(std::slice::from_raw_parts(first, c.num_cap as usize))
    }
}

/// The cores of `cpu`.
///
/// # Safety
/// `cpu` is NULL or points to a `pqos_cpuinfo` followed by its `num_cores` entries.
pub(crate) unsafe fn cores<'a>(cpu: *const pqos_cpuinfo) -> Option<&'a [pqos_coreinfo]> {
    // SAFETY: per this function's contract.
    unsafe {
        let c = cpu.as_ref()?;
        let first = (&raw const (*cpu).cores).cast::<pqos_coreinfo>();
        Some(std::slice::from_raw_parts(first, c.num_cores as usize))
    }
}

/// `values` in a `malloc`ed array the caller frees, its length in `*count`; NULL (and
/// `*count` untouched) when empty or out of memory, as libpqos answers.
pub(crate) fn malloc_array<T: Copy>(values: &[T], count: *mut c_uint) -> *mut T {
    let Ok(n) = c_uint::try_from(values.len()) else {
        return std::ptr::null_mut();
    };
    if values.is_empty() || count.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: malloc of the array's size (non-zero); checked for NULL before use.
    let p = unsafe { libc::malloc(std::mem::size_of_val(values)) }.cast::<T>();
    if p.is_null() {
        return p;
    }
    // SAFETY: `p` has room for `values.len()` Ts and does not overlap `values`; `count` is
    // non-NULL and, per pqos.h, points to an unsigned.
    unsafe {
        std::ptr::copy_nonoverlapping(values.as_ptr(), p, values.len());
        *count = n;
    }
    p
}

/// The distinct values of `field` over the cores, in the cores' order (lib/utils.c).
fn unique(
    cpu: *const pqos_cpuinfo,
    count: *mut c_uint,
    field: fn(&pqos_coreinfo) -> c_uint,
) -> *mut c_uint {
    guard_or("pqos_cpu_get_*", std::ptr::null_mut(), || {
        // SAFETY: pqos.h: `cpu` is NULL or the structure from pqos_cap_get.
        let Some(cores) = (unsafe { cores(cpu) }) else {
            return std::ptr::null_mut();
        };
        let mut ids: Vec<c_uint> = Vec::new();
        for c in cores {
            let id = field(c);
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        malloc_array(&ids, count)
    })
}

/// The cores whose `field` is `id`, or NULL.
fn cores_where(
    cpu: *const pqos_cpuinfo,
    id: c_uint,
    count: *mut c_uint,
    field: fn(&pqos_coreinfo) -> c_uint,
) -> *mut c_uint {
    guard_or("pqos_cpu_get_cores", std::ptr::null_mut(), || {
        // SAFETY: as in `unique`.
        let Some(cores) = (unsafe { cores(cpu) }) else {
            return std::ptr::null_mut();
        };
        let ids: Vec<c_uint> = cores
            .iter()
            .filter(|c| field(c) == id)
            .map(|c| c.lcore)
            .collect();
        malloc_array(&ids, count)
    })
}

/// The first core whose `field` is `id` into `*lcore`: `PQOS_RETVAL_ERROR` when none.
fn one_where(
    cpu: *const pqos_cpuinfo,
    id: c_uint,
    lcore: *mut c_uint,
    field: fn(&pqos_coreinfo) -> c_uint,
) -> c_int {
    guard_or("pqos_cpu_get_one_*", PQOS_RETVAL_ERROR, || {
        // SAFETY: as in `unique`; `lcore` points to an unsigned (NULL checked).
        let (Some(cores), Some(out)) = (unsafe { cores(cpu) }, unsafe { lcore.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        match cores.iter().find(|c| field(c) == id) {
            Some(c) => {
                *out = c.lcore;
                PQOS_RETVAL_OK
            }
            None => PQOS_RETVAL_ERROR,
        }
    })
}

/// `field` of core `lcore` into `*out`: `PQOS_RETVAL_ERROR` when there is no such core.
fn of_core(
    cpu: *const pqos_cpuinfo,
    lcore: c_uint,
    out: *mut c_uint,
    field: fn(&pqos_coreinfo) -> c_uint,
) -> c_int {
    guard_or("pqos_cpu_get_*id", PQOS_RETVAL_ERROR, || {
        // SAFETY: as in `one_where`.
        let (Some(cores), Some(out)) = (unsafe { cores(cpu) }, unsafe { out.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        match cores.iter().find(|c| c.lcore == lcore) {
            Some(c) => {
                *out = field(c);
                PQOS_RETVAL_OK
            }
            None => PQOS_RETVAL_ERROR,
        }
    })
}

/// MBA ids (pqos.h `pqos_cpu_get_mba_ids`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_mba_ids(
    cpu: *const pqos_cpuinfo,
    count: *mut c_uint,
) -> *mut c_uint {
    unique(cpu, count, |c| c.mba_id)
}

/// SMBA ids (pqos.h `pqos_cpu_get_smba_ids`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_smba_ids(
    cpu: *const pqos_cpuinfo,
    count: *mut c_uint,
) -> *mut c_uint {
    unique(cpu, count, |c| c.smba_id)
}

/// L3 CAT ids (pqos.h `pqos_cpu_get_l3cat_ids`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_l3cat_ids(
    cpu: *const pqos_cpuinfo,
    count: *mut c_uint,
) -> *mut c_uint {
    unique(cpu, count, |c| c.l3cat_id)
}

/// Socket ids (pqos.h `pqos_cpu_get_sockets`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_sockets(
    cpu: *const pqos_cpuinfo,
    count: *mut c_uint,
) -> *mut c_uint {
    unique(cpu, count, |c| c.socket)
}

/// NUMA node ids (pqos.h `pqos_cpu_get_numa`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_numa(
    cpu: *const pqos_cpuinfo,
    count: *mut c_uint,
) -> *mut c_uint {
    unique(cpu, count, |c| c.numa)
}

/// L2 ids (pqos.h `pqos_cpu_get_l2ids`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_l2ids(
    cpu: *const pqos_cpuinfo,
    count: *mut c_uint,
) -> *mut c_uint {
    unique(cpu, count, |c| c.l2_id)
}

/// L3 cluster ids (pqos.h `pqos_cpu_get_l3_clusters`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_l3_clusters(
    cpu: *const pqos_cpuinfo,
    count: *mut c_uint,
) -> *mut c_uint {
    unique(cpu, count, |c| c.l3_id)
}

/// The cores of an L3 cluster (pqos.h `pqos_cpu_get_cores_l3id`); NULL when none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_cores_l3id(
    cpu: *const pqos_cpuinfo,
    l3_id: c_uint,
    count: *mut c_uint,
) -> *mut c_uint {
    cores_where(cpu, l3_id, count, |c| c.l3_id)
}

/// The cores of a socket (pqos.h `pqos_cpu_get_cores`); NULL when none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_cores(
    cpu: *const pqos_cpuinfo,
    socket: c_uint,
    count: *mut c_uint,
) -> *mut c_uint {
    cores_where(cpu, socket, count, |c| c.socket)
}

/// One core of an MBA id (pqos.h `pqos_cpu_get_one_by_mba_id`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_one_by_mba_id(
    cpu: *const pqos_cpuinfo,
    mba_id: c_uint,
    lcore: *mut c_uint,
) -> c_int {
    one_where(cpu, mba_id, lcore, |c| c.mba_id)
}

/// One core of an SMBA id (pqos.h `pqos_cpu_get_one_by_smba_id`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_one_by_smba_id(
    cpu: *const pqos_cpuinfo,
    smba_id: c_uint,
    lcore: *mut c_uint,
) -> c_int {
    one_where(cpu, smba_id, lcore, |c| c.smba_id)
}

/// One core of a socket (pqos.h `pqos_cpu_get_one_core`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_one_core(
    cpu: *const pqos_cpuinfo,
    socket: c_uint,
    lcore: *mut c_uint,
) -> c_int {
    one_where(cpu, socket, lcore, |c| c.socket)
}

/// One core of a NUMA node (pqos.h `pqos_cpu_get_one_by_numaid`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_one_by_numaid(
    cpu: *const pqos_cpuinfo,
    numaid: c_uint,
    lcore: *mut c_uint,
) -> c_int {
    one_where(cpu, numaid, lcore, |c| c.numa)
}

/// One core of an L3 CAT id (pqos.h `pqos_cpu_get_one_by_l3cat_id`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_one_by_l3cat_id(
    cpu: *const pqos_cpuinfo,
    l3cat_id: c_uint,
    lcore: *mut c_uint,
) -> c_int {
    one_where(cpu, l3cat_id, lcore, |c| c.l3cat_id)
}

/// One core of an L3 cluster (pqos.h `pqos_cpu_get_one_by_l3id`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_one_by_l3id(
    cpu: *const pqos_cpuinfo,
    l3id: c_uint,
    lcore: *mut c_uint,
) -> c_int {
    one_where(cpu, l3id, lcore, |c| c.l3_id)
}

/// One core of an L2 cluster (pqos.h `pqos_cpu_get_one_by_l2id`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_one_by_l2id(
    cpu: *const pqos_cpuinfo,
    l2id: c_uint,
    lcore: *mut c_uint,
) -> c_int {
    one_where(cpu, l2id, lcore, |c| c.l2_id)
}

/// The information of core `lcore` (pqos.h `pqos_cpu_get_core_info`), or NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_core_info(
    cpu: *const pqos_cpuinfo,
    lcore: c_uint,
) -> *const pqos_coreinfo {
    guard_or("pqos_cpu_get_core_info", std::ptr::null(), || {
        // SAFETY: pqos.h: `cpu` is NULL or the structure from pqos_cap_get.
        unsafe { cores(cpu) }
            .and_then(|cores| cores.iter().find(|c| c.lcore == lcore))
            .map_or(std::ptr::null(), std::ptr::from_ref)
    })
}

/// Whether `lcore` is a core of `cpu` (pqos.h `pqos_cpu_check_core`): `PQOS_RETVAL_OK`, else
/// `PQOS_RETVAL_ERROR`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_check_core(cpu: *const pqos_cpuinfo, lcore: c_uint) -> c_int {
    guard_or("pqos_cpu_check_core", PQOS_RETVAL_ERROR, || {
        // SAFETY: as in pqos_cpu_get_core_info.
        match unsafe { cores(cpu) } {
            None => PQOS_RETVAL_PARAM,
            Some(cores) if cores.iter().any(|c| c.lcore == lcore) => PQOS_RETVAL_OK,
            Some(_) => PQOS_RETVAL_ERROR,
        }
    })
}

/// The socket of a core (pqos.h `pqos_cpu_get_socketid`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_socketid(
    cpu: *const pqos_cpuinfo,
    lcore: c_uint,
    socket: *mut c_uint,
) -> c_int {
    of_core(cpu, lcore, socket, |c| c.socket)
}

/// The NUMA node of a core (pqos.h `pqos_cpu_get_numaid`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_numaid(
    cpu: *const pqos_cpuinfo,
    lcore: c_uint,
    numa: *mut c_uint,
) -> c_int {
    of_core(cpu, lcore, numa, |c| c.numa)
}

/// The L3 cluster of a core (pqos.h `pqos_cpu_get_clusterid`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cpu_get_clusterid(
    cpu: *const pqos_cpuinfo,
    lcore: c_uint,
    cluster: *mut c_uint,
) -> c_int {
    of_core(cpu, lcore, cluster, |c| c.l3_id)
}

/// The capability of `type` in `cap` (pqos.h `pqos_cap_get_type`): `PQOS_RETVAL_RESOURCE`
/// when the platform lacks it, `PQOS_RETVAL_PARAM` for NULLs or an unknown type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cap_get_type(
    cap: *const pqos_cap,
    r#type: EnumCapType,
    cap_item: *mut *const pqos_capability,
) -> c_int {
    guard_or("pqos_cap_get_type", PQOS_RETVAL_ERROR, || {
        // SAFETY: pqos.h: `cap` is NULL or the structure from pqos_cap_get; `cap_item`
        // points to a pointer to fill (NULL checked).
        let (Some(caps), Some(out)) = (unsafe { capabilities(cap) }, unsafe { cap_item.as_mut() })
        else {
            return PQOS_RETVAL_PARAM;
        };
        if r#type >= pqos_cap_type::PQOS_CAP_TYPE_NUMOF as c_uint {
            return PQOS_RETVAL_PARAM;
        }
        match caps.iter().find(|c| c.r#type == r#type) {
            Some(c) => {
                *out = c;
                PQOS_RETVAL_OK
            }
            None => PQOS_RETVAL_RESOURCE,
        }
    })
}

/// The capability `T` of `type`, through `pqos_cap_get_type`'s rules.
fn cap_item<T>(cap: *const pqos_cap, t: pqos_cap_type) -> Result<*const T, c_int> {
    let mut item: *const pqos_capability = std::ptr::null();
    // SAFETY: `cap` is the caller's (same contract); `item` is a local to fill.
    let ret = unsafe { pqos_cap_get_type(cap, t as c_uint, &raw mut item) };
    if ret != PQOS_RETVAL_OK {
        return Err(ret);
    }
    // SAFETY: `item` points into `cap`'s entries; every member of the union is a pointer.
    Ok(unsafe { (*item).u.generic_ptr }.cast::<T>())
}

/// The monitoring capability of `event` (pqos.h `pqos_cap_get_event`):
/// `PQOS_RETVAL_RESOURCE` without monitoring, `PQOS_RETVAL_ERROR` when the event is not
/// among its events.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cap_get_event(
    cap: *const pqos_cap,
    event: EnumMonEvent,
    p_mon: *mut *const pqos_monitor,
) -> c_int {
    guard_or("pqos_cap_get_event", PQOS_RETVAL_ERROR, || {
        if cap.is_null() || p_mon.is_null() {
            return PQOS_RETVAL_PARAM;
        }
        let mon = match cap_item::<pqos_cap_mon>(cap, pqos_cap_type::PQOS_CAP_TYPE_MON) {
            Ok(m) => m,
            Err(ret) => return ret,
        };
        // SAFETY: `mon` is the monitoring capability of `cap`, followed by its events;
        // `p_mon` is non-NULL and points to a pointer to fill.
        unsafe {
            let first = (&raw const (*mon).events).cast::<pqos_monitor>();
            let events = std::slice::from_raw_parts(first, (*mon).num_events as usize);
            match events.iter().find(|e| e.r#type == event) {
                Some(e) => {
                    *p_mon = e;
                    PQOS_RETVAL_OK
                }
                None => PQOS_RETVAL_ERROR,
            }
        }
    })
}

/// `num_classes` of a capability into `*out`.
fn classes<T>(
    cap: *const pqos_cap,
    out: *mut c_uint,
    t: pqos_cap_type,
    get: fn(&T) -> c_uint,
) -> c_int {
    guard_or("pqos_*_get_cos_num", PQOS_RETVAL_ERROR, || {
        if cap.is_null() || out.is_null() {
            return PQOS_RETVAL_PARAM;
        }
        match cap_item::<T>(cap, t) {
            // SAFETY: the capability of type `t` is a T; `out` is non-NULL.
            Ok(item) => unsafe {
                *out = get(&*item);
                PQOS_RETVAL_OK
            },
            Err(ret) => ret,
        }
    })
}

/// L3 CAT classes (pqos.h `pqos_l3ca_get_cos_num`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l3ca_get_cos_num(
    cap: *const pqos_cap,
    cos_num: *mut c_uint,
) -> c_int {
    classes::<pqos_cap_l3ca>(cap, cos_num, pqos_cap_type::PQOS_CAP_TYPE_L3CA, |c| {
        c.num_classes
    })
}

/// L2 CAT classes (pqos.h `pqos_l2ca_get_cos_num`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l2ca_get_cos_num(
    cap: *const pqos_cap,
    cos_num: *mut c_uint,
) -> c_int {
    classes::<pqos_cap_l2ca>(cap, cos_num, pqos_cap_type::PQOS_CAP_TYPE_L2CA, |c| {
        c.num_classes
    })
}

/// MBA classes (pqos.h `pqos_mba_get_cos_num`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mba_get_cos_num(cap: *const pqos_cap, cos_num: *mut c_uint) -> c_int {
    classes::<pqos_cap_mba>(cap, cos_num, pqos_cap_type::PQOS_CAP_TYPE_MBA, |c| {
        c.num_classes
    })
}

/// SMBA classes (pqos.h `pqos_smba_get_cos_num`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_smba_get_cos_num(
    cap: *const pqos_cap,
    cos_num: *mut c_uint,
) -> c_int {
    classes::<pqos_cap_mba>(cap, cos_num, pqos_cap_type::PQOS_CAP_TYPE_SMBA, |c| {
        c.num_classes
    })
}

/// `pqos_l3ca_get_cos_num` under the name intel-cmt-cat's header has from 7.1.0
/// (`pqos_l3ca_get_clos_num`), so programs written against either name link.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l3ca_get_clos_num(
    cap: *const pqos_cap,
    clos_num: *mut c_uint,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { pqos_l3ca_get_cos_num(cap, clos_num) }
}

/// `pqos_l2ca_get_cos_num` under its 7.1.0 name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l2ca_get_clos_num(
    cap: *const pqos_cap,
    clos_num: *mut c_uint,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { pqos_l2ca_get_cos_num(cap, clos_num) }
}

/// `pqos_mba_get_cos_num` under its 7.1.0 name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mba_get_clos_num(
    cap: *const pqos_cap,
    clos_num: *mut c_uint,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { pqos_mba_get_cos_num(cap, clos_num) }
}

/// `pqos_smba_get_cos_num` under its 7.1.0 name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_smba_get_clos_num(
    cap: *const pqos_cap,
    clos_num: *mut c_uint,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { pqos_smba_get_cos_num(cap, clos_num) }
}

/// A (supported, enabled) pair of a capability into the non-NULL outputs; both NULL is
/// `PQOS_RETVAL_PARAM`.
fn pair<T>(
    cap: *const pqos_cap,
    first: *mut c_int,
    second: *mut c_int,
    t: pqos_cap_type,
    get: fn(&T) -> (c_int, c_int),
) -> c_int {
    guard_or("pqos_*_enabled", PQOS_RETVAL_ERROR, || {
        if cap.is_null() || (first.is_null() && second.is_null()) {
            return PQOS_RETVAL_PARAM;
        }
        match cap_item::<T>(cap, t) {
            // SAFETY: the capability of type `t` is a T; each output is NULL or an int.
            Ok(item) => unsafe {
                let (x, y) = get(&*item);
                if let Some(out) = first.as_mut() {
                    *out = x;
                }
                if let Some(out) = second.as_mut() {
                    *out = y;
                }
                PQOS_RETVAL_OK
            },
            Err(ret) => ret,
        }
    })
}

/// L3 CDP support and state (pqos.h `pqos_l3ca_cdp_enabled`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l3ca_cdp_enabled(
    cap: *const pqos_cap,
    cdp_supported: *mut c_int,
    cdp_enabled: *mut c_int,
) -> c_int {
    pair::<pqos_cap_l3ca>(
        cap,
        cdp_supported,
        cdp_enabled,
        pqos_cap_type::PQOS_CAP_TYPE_L3CA,
        |c| (c.cdp, c.cdp_on),
    )
}

/// L3 I/O RDT support and state (pqos.h `pqos_l3ca_iordt_enabled`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l3ca_iordt_enabled(
    cap: *const pqos_cap,
    supported: *mut c_int,
    enabled: *mut c_int,
) -> c_int {
    pair::<pqos_cap_l3ca>(
        cap,
        supported,
        enabled,
        pqos_cap_type::PQOS_CAP_TYPE_L3CA,
        |c| (c.iordt, c.iordt_on),
    )
}

/// L2 CDP support and state (pqos.h `pqos_l2ca_cdp_enabled`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_l2ca_cdp_enabled(
    cap: *const pqos_cap,
    cdp_supported: *mut c_int,
    cdp_enabled: *mut c_int,
) -> c_int {
    pair::<pqos_cap_l2ca>(
        cap,
        cdp_supported,
        cdp_enabled,
        pqos_cap_type::PQOS_CAP_TYPE_L2CA,
        |c| (c.cdp, c.cdp_on),
    )
}

/// MBA controller support and state (pqos.h `pqos_mba_ctrl_enabled`); support is -1 on the
/// MSR interface (no controller there).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mba_ctrl_enabled(
    cap: *const pqos_cap,
    ctrl_supported: *mut c_int,
    ctrl_enabled: *mut c_int,
) -> c_int {
    pair::<pqos_cap_mba>(
        cap,
        ctrl_supported,
        ctrl_enabled,
        pqos_cap_type::PQOS_CAP_TYPE_MBA,
        |c| (c.ctrl, c.ctrl_on),
    )
}

/// The vendor (pqos.h `pqos_get_vendor`); `PQOS_VENDOR_UNKNOWN` for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_get_vendor(cpu: *const pqos_cpuinfo) -> EnumVendor {
    guard_or(
        "pqos_get_vendor",
        pqos_vendor::PQOS_VENDOR_UNKNOWN as c_uint,
        || {
            // SAFETY: pqos.h: `cpu` is NULL or the structure from pqos_cap_get.
            unsafe { cpu.as_ref() }.map_or(pqos_vendor::PQOS_VENDOR_UNKNOWN as c_uint, |c| c.vendor)
        },
    )
}

/// Frees memory the library returned (pqos.h `pqos_free`): `free()`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_free(ptr: *mut c_void) {
    // SAFETY: pqos.h: `ptr` is NULL or memory a pqos function returned, which came from
    // malloc (`malloc_array`).
    unsafe { libc::free(ptr) };
}
