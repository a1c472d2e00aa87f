//! Monitoring (pqos.h "Monitoring"): groups of cores or tasks started, polled and stopped
//! through the library's [`Backend`], their values written into `struct pqos_mon_data` as
//! libpqos writes them (lib/monitoring.c, lib/hw_monitoring.c):
//!
//! - `llc`: the occupancy in bytes at the last poll;
//! - `mbm_*_delta`: the bytes counted since the group's previous `pqos_mon_poll`, and 0 at
//!   its first poll (libpqos's `valid_mbm_read`: "report zero memory bandwidth with first
//!   read"); `mbm_*`: the bytes counted since the group started (libpqos gives the raw
//!   counter, whose origin is arbitrary; both differ by a constant, deltas are equal);
//! - `ipc_retired`, `ipc_unhalted`, `llc_misses`, `llc_references` and their deltas: counts
//!   since the start and since the previous poll; `ipc` = retired / unhalted of the last
//!   interval, 0 without cycles.
//!
//! - `region_values.mbm_total[j]`, `mbm_total_delta[j]` (MMIO interface): the traffic to
//!   memory region `regions.region_num[j]` since the start and since the previous poll (0 at
//!   the first, as `mbm_*_delta`), summed over the group's L3 domains; the library's counts
//!   are upscaled and corrected with the ERDT's factors (libpqos `mmio_mon_read_counter`).
//!
//! The library polls every group at once; a group left out of a `pqos_mon_poll` keeps
//! adding up its deltas until it is polled, so each group's deltas cover exactly the time
//! between its own polls, as in libpqos.

use std::ffi::{c_int, c_uint, c_void};

use libc::pid_t;
use rdt_pqos::{Backend, BackendExt, CpuSet, LogicalCpu, MemRegion, MonEvents, MonGroupId, TaskId};

use crate::alloc::{MAX_ENTRIES, array};
use crate::error::{code, start_code};
use crate::groups::{Counts, Group, Members, PCIE_EVENTS};
use crate::guard::guard;
use crate::state::{Lib, with_lib};
use crate::types::{
    EnumMonEvent, PQOS_MAX_MEM_REGIONS, PQOS_RETVAL_INTER, PQOS_RETVAL_OK, PQOS_RETVAL_PARAM,
    PQOS_RETVAL_RESOURCE, pqos_channel_t, pqos_event_values, pqos_mon_config, pqos_mon_data,
    pqos_mon_data_internal, pqos_mon_event, pqos_mon_mem_region, pqos_region_aware_event_values,
    pqos_rmid_t,
};

/// libpqos's marker of a started group (`GROUP_VALID_MARKER`, lib/monitoring.c).
const GROUP_VALID_MARKER: c_int = 0x00DE_AD00;

/// The events of `event`: known bits, at least one, none of the I/O RDT or telemetry ones
/// (not built).
fn events(event: EnumMonEvent) -> Result<MonEvents, c_int> {
    let e = MonEvents::from_bits(event).filter(|e| !e.is_empty());
    e.ok_or_else(|| {
        log::error!("unsupported monitoring events {event:#x}");
        PQOS_RETVAL_PARAM
    })
}

/// Registers a started group at `data` (zeroed and filled here), reporting `regions`.
///
/// # Safety
/// `data` points to a writable `pqos_mon_data`.
#[allow(clippy::too_many_arguments)] // one per field of the group libpqos fills
unsafe fn register(
    lib: &mut Lib,
    data: *mut pqos_mon_data,
    id: MonGroupId,
    events: MonEvents,
    context: *mut c_void,
    members: Members,
    owned: bool,
    regions: Vec<MemRegion>,
) {
    let mut mem = pqos_mon_mem_region::default();
    for (slot, r) in mem.region_num.iter_mut().zip(&regions) {
        *slot = c_int::from(r.0);
    }
    mem.num_mem_regions = c_int::try_from(regions.len()).unwrap_or(0);
    let intl = Box::new(0u8);
    let (cores, num_cores, pids, num_pids) = match &members {
        Members::Cores(c) => (c.as_ptr().cast_mut(), c.len(), std::ptr::null_mut(), 0),
        Members::Tasks(t) => (std::ptr::null_mut(), 0, t.as_ptr().cast_mut(), t.len()),
        // libpqos keeps an uncore group's sockets in its internal data only
        Members::Sockets => (std::ptr::null_mut(), 0, std::ptr::null_mut(), 0),
    };
    let value = pqos_mon_data {
        valid: GROUP_VALID_MARKER,
        event: events.bits(),
        context,
        values: pqos_event_values::default(),
        num_pids: c_uint::try_from(num_pids).unwrap_or(0),
        pids,
        tid_nr: 0,
        tid_map: std::ptr::null_mut(),
        cores,
        num_cores: c_uint::try_from(num_cores).unwrap_or(0),
        channels: std::ptr::null_mut::<pqos_channel_t>(),
        num_channels: 0,
        intl: (&raw const *intl)
            .cast::<pqos_mon_data_internal>()
            .cast_mut(),
        region_values: pqos_region_aware_event_values::default(),
        regions: mem,
    };
    // SAFETY: per this function's contract.
    unsafe { data.write(value) };
    lib.groups.map.insert(
        data as usize,
        Group {
            id: Some(id),
            owned,
            members,
            valid_mbm_read: false,
            since_poll: Counts::default(),
            since_start: Counts::default(),
            pcie: [(0, 0); 4],
            regions,
            region_since_poll: [0; PQOS_MAX_MEM_REGIONS],
            region_since_start: [0; PQOS_MAX_MEM_REGIONS],
            _intl: intl,
        },
    );
}

/// A zeroed `pqos_mon_data` allocated for the program (freed by `pqos_mon_stop`).
fn new_data() -> *mut pqos_mon_data {
    // SAFETY: pqos_mon_data is plain data (integers, pointers, a double) for which all-zero
    // bytes are a valid value (NULL pointers, 0.0).
    Box::into_raw(Box::new(unsafe { std::mem::zeroed::<pqos_mon_data>() }))
}

/// Starts a group of cores and registers it at `data` (or a new structure).
fn start_cores(
    lib: &mut Lib,
    cores: &[c_uint],
    event: EnumMonEvent,
    context: *mut c_void,
    data: Option<*mut pqos_mon_data>,
    regions: Vec<MemRegion>,
) -> Result<*mut pqos_mon_data, c_int> {
    let events = events(event)?;
    if let Some(d) = data
        && lib.groups.map.contains_key(&(d as usize))
    {
        log::error!("the group is already started");
        return Err(PQOS_RETVAL_PARAM);
    }
    let set: CpuSet = cores.iter().map(|&c| LogicalCpu::new(c)).collect();
    if set.len() != cores.len() {
        log::error!("a core is listed twice");
        return Err(PQOS_RETVAL_PARAM);
    }
    let id = lib
        .rdt
        .start_monitoring_many(&[(set, events)])
        .map_err(|e| start_code(&e))?
        .remove(0);
    let (ptr, owned) = data.map_or_else(|| (new_data(), true), |d| (d, false));
    let members = Members::Cores(cores.to_vec().into_boxed_slice());
    // SAFETY: `ptr` is the program's group (pqos.h: a pqos_mon_data to fill) or new.
    unsafe { register(lib, ptr, id, events, context, members, owned, regions) };
    Ok(ptr)
}

/// Starts a group of tasks (OS interface) and registers it at `data` (or a new structure).
fn start_tasks(
    lib: &mut Lib,
    pids: &[pid_t],
    event: EnumMonEvent,
    context: *mut c_void,
    data: Option<*mut pqos_mon_data>,
) -> Result<*mut pqos_mon_data, c_int> {
    let events = events(event)?;
    if let Some(d) = data
        && lib.groups.map.contains_key(&(d as usize))
    {
        return Err(PQOS_RETVAL_PARAM);
    }
    let tasks = tasks(pids)?;
    let id = lib
        .rdt
        .start_monitoring_tasks_many(&[(tasks, events)])
        .map_err(|e| start_code(&e))?
        .remove(0);
    let (ptr, owned) = data.map_or_else(|| (new_data(), true), |d| (d, false));
    let members = Members::Tasks(pids.to_vec().into_boxed_slice());
    // SAFETY: as in start_cores.
    unsafe { register(lib, ptr, id, events, context, members, owned, Vec::new()) };
    Ok(ptr)
}

fn tasks(pids: &[pid_t]) -> Result<Vec<TaskId>, c_int> {
    pids.iter()
        .map(|&p| u32::try_from(p).ok().filter(|&p| p > 0).map(TaskId::new))
        .collect::<Option<Vec<_>>>()
        .ok_or(PQOS_RETVAL_PARAM)
}

/// Starts monitoring a group of cores into the program's structure (pqos.h
/// `pqos_mon_start`, deprecated).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_start(
    num_cores: c_uint,
    cores: *const c_uint,
    event: EnumMonEvent,
    context: *mut c_void,
    group: *mut pqos_mon_data,
) -> c_int {
    with_lib("pqos_mon_start", |lib| {
        // SAFETY: pqos.h: `cores` holds `num_cores` cores.
        let (Some(cores), false) = (unsafe { array(cores, num_cores) }, group.is_null()) else {
            return PQOS_RETVAL_PARAM;
        };
        start_cores(lib, cores, event, context, Some(group), Vec::new())
            .map_or_else(|c| c, |_| PQOS_RETVAL_OK)
    })
}

/// The memory regions of `mem_region` (NULL or none: no region values), checked: at most
/// `PQOS_MAX_MEM_REGIONS`, each a region of the platform's MRRM, none twice
/// (`PQOS_RETVAL_PARAM`, logged naming the region); regions on an interface without them
/// (not MMIO) are `PQOS_RETVAL_RESOURCE`.
fn mem_regions(
    lib: &mut Lib,
    mem_region: Option<&pqos_mon_mem_region>,
) -> Result<Vec<MemRegion>, c_int> {
    let Some(m) = mem_region.filter(|m| m.num_mem_regions != 0) else {
        return Ok(Vec::new());
    };
    let n = usize::try_from(m.num_mem_regions)
        .ok()
        .filter(|&n| n <= PQOS_MAX_MEM_REGIONS)
        .ok_or_else(|| {
            log::error!(
                "{} memory regions: 1 to {PQOS_MAX_MEM_REGIONS} can be monitored",
                m.num_mem_regions
            );
            PQOS_RETVAL_PARAM
        })?;
    let Some(ops) = lib.rdt.regions() else {
        log::error!("memory regions need the MMIO interface (PQOS_INTER_MMIO)");
        return Err(PQOS_RETVAL_RESOURCE);
    };
    let have: Vec<MemRegion> = ops.memory_regions().iter().map(|r| r.region).collect();
    let mut out = Vec::with_capacity(n);
    for &num in &m.region_num[..n] {
        let region = u8::try_from(num)
            .ok()
            .map(MemRegion)
            .filter(|r| have.contains(r));
        match region {
            Some(r) if !out.contains(&r) => out.push(r),
            Some(r) => {
                log::error!("memory region {r} is listed twice");
                return Err(PQOS_RETVAL_PARAM);
            }
            None => {
                let known: Vec<String> = have.iter().map(ToString::to_string).collect();
                log::error!(
                    "memory region {num} is not a region of this platform (MRRM regions: {})",
                    known.join(",")
                );
                return Err(PQOS_RETVAL_PARAM);
            }
        }
    }
    Ok(out)
}

/// Starts monitoring a group of cores (pqos.h `pqos_mon_start_cores`): `*group` is a new
/// structure `pqos_mon_stop` frees. `mem_region` (region-aware MBM of the MMIO interface,
/// NULL for none) names the memory regions whose traffic `pqos_mon_poll` writes into
/// `region_values`, slot `j` for `region_num[j]` (libpqos `mmio_mon_read_counter`);
/// at most `PQOS_MAX_MEM_REGIONS` regions of the platform's MRRM, none twice
/// (`PQOS_RETVAL_PARAM`); regions off the MMIO interface are `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_start_cores(
    num_cores: c_uint,
    cores: *const c_uint,
    event: EnumMonEvent,
    context: *mut c_void,
    mem_region: *mut pqos_mon_mem_region,
    group: *mut *mut pqos_mon_data,
) -> c_int {
    with_lib("pqos_mon_start_cores", |lib| {
        // SAFETY: pqos.h: `cores` holds `num_cores` cores; `group` points to a pointer.
        let (Some(cores), Some(out)) = (unsafe { array(cores, num_cores) }, unsafe {
            group.as_mut()
        }) else {
            return PQOS_RETVAL_PARAM;
        };
        // SAFETY: pqos.h: `mem_region` is NULL or a pqos_mon_mem_region.
        let regions = match mem_regions(lib, unsafe { mem_region.as_ref() }) {
            Ok(r) => r,
            Err(c) => return c,
        };
        match start_cores(lib, cores, event, context, None, regions) {
            Ok(p) => {
                *out = p;
                PQOS_RETVAL_OK
            }
            Err(c) => c,
        }
    })
}

/// Starts monitoring one process into the program's structure (pqos.h `pqos_mon_start_pid`,
/// deprecated; OS interface).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_start_pid(
    pid: pid_t,
    event: EnumMonEvent,
    context: *mut c_void,
    group: *mut pqos_mon_data,
) -> c_int {
    // SAFETY: one pid, and `group` as pqos.h says.
    unsafe { pqos_mon_start_pids(1, &raw const pid, event, context, group) }
}

/// Starts monitoring processes into the program's structure (pqos.h `pqos_mon_start_pids`,
/// deprecated; OS interface, else `PQOS_RETVAL_INTER`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_start_pids(
    num_pids: c_uint,
    pids: *const pid_t,
    event: EnumMonEvent,
    context: *mut c_void,
    group: *mut pqos_mon_data,
) -> c_int {
    with_lib("pqos_mon_start_pids", |lib| {
        // SAFETY: pqos.h: `pids` holds `num_pids` pids.
        let (Some(pids), false) = (unsafe { array(pids, num_pids) }, group.is_null()) else {
            return PQOS_RETVAL_PARAM;
        };
        start_tasks(lib, pids, event, context, Some(group)).map_or_else(|c| c, |_| PQOS_RETVAL_OK)
    })
}

/// Starts monitoring processes (pqos.h `pqos_mon_start_pids2`; OS interface): `*group` is a
/// new structure `pqos_mon_stop` frees. Threads a process starts later are counted with it
/// (resctrl puts a new thread in its creator's group).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_start_pids2(
    num_pids: c_uint,
    pids: *const pid_t,
    event: EnumMonEvent,
    context: *mut c_void,
    group: *mut *mut pqos_mon_data,
) -> c_int {
    with_lib("pqos_mon_start_pids2", |lib| {
        // SAFETY: pqos.h: `pids` holds `num_pids` pids; `group` points to a pointer.
        let (Some(pids), Some(out)) = (unsafe { array(pids, num_pids) }, unsafe { group.as_mut() })
        else {
            return PQOS_RETVAL_PARAM;
        };
        match start_tasks(lib, pids, event, context, None) {
            Ok(p) => {
                *out = p;
                PQOS_RETVAL_OK
            }
            Err(c) => c,
        }
    })
}

/// Starts uncore monitoring of sockets (pqos.h `pqos_mon_start_uncore`; MSR interface):
/// the PCIe LLC events of the CHA monitors, read by `pqos_mon_get_value`. `*group` is a new
/// structure `pqos_mon_stop` frees. As libpqos: no socket, NULL arguments or an event
/// without an uncore bit are `PQOS_RETVAL_PARAM` (the other bits are ignored); a platform
/// without the uncore events, and the OS interface (whose capabilities have none),
/// `PQOS_RETVAL_RESOURCE`, logged; a socket already in an uncore group
/// `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_start_uncore(
    num_sockets: c_uint,
    sockets: *const c_uint,
    event: EnumMonEvent,
    context: *mut c_void,
    group: *mut *mut pqos_mon_data,
) -> c_int {
    with_lib("pqos_mon_start_uncore", |lib| {
        // SAFETY: pqos.h: `sockets` holds `num_sockets` sockets; `group` points to a pointer.
        let (Some(sockets), Some(out)) = (unsafe { array(sockets, num_sockets) }, unsafe {
            group.as_mut()
        }) else {
            return PQOS_RETVAL_PARAM;
        };
        let events = MonEvents::from_bits_truncate(event).intersection(MonEvents::UNCORE);
        if events.is_empty() {
            log::error!("pqos_mon_start_uncore: {event:#x} holds no uncore event");
            return PQOS_RETVAL_PARAM;
        }
        if !lib.rdt.capabilities().uncore_pcie {
            log::error!("pqos_mon_start_uncore: this platform has no uncore PCIe events");
            return PQOS_RETVAL_RESOURCE;
        }
        let id = match lib.rdt.start_uncore_monitoring(sockets, events) {
            Ok(id) => id,
            Err(e) => return code(&e),
        };
        let ptr = new_data();
        // SAFETY: `ptr` is new.
        unsafe {
            register(
                lib,
                ptr,
                id,
                events,
                context,
                Members::Sockets,
                true,
                Vec::new(),
            );
        };
        *out = ptr;
        PQOS_RETVAL_OK
    })
}

/// Changes the processes of a task group in place, as libpqos does (it writes the new
/// tasks into the same monitor group, lib/os_monitoring.c): the library's
/// [`rdt_pqos::OsOps::change_monitoring_tasks`] moves the joining processes' threads into
/// the group's monitor group and the leaving ones out, so its counters, the pending deltas
/// and `valid_mbm_read` go on untouched.
fn retask(
    lib: &mut Lib,
    group: *mut pqos_mon_data,
    change: impl FnOnce(&[pid_t]) -> Result<Vec<pid_t>, c_int>,
) -> c_int {
    let key = group as usize;
    let Some(g) = lib.groups.map.get(&key) else {
        return PQOS_RETVAL_PARAM;
    };
    let (Members::Tasks(old), Some(id)) = (&g.members, g.id) else {
        return PQOS_RETVAL_PARAM;
    };
    let old = old.to_vec();
    let new = match change(&old) {
        Ok(n) if !n.is_empty() && n.len() <= MAX_ENTRIES as usize => n,
        Ok(_) => return PQOS_RETVAL_PARAM,
        Err(c) => return c,
    };
    let (Ok(add), Ok(remove)) = (
        tasks(
            &new.iter()
                .copied()
                .filter(|p| !old.contains(p))
                .collect::<Vec<_>>(),
        ),
        tasks(
            &old.iter()
                .copied()
                .filter(|p| !new.contains(p))
                .collect::<Vec<_>>(),
        ),
    ) else {
        return PQOS_RETVAL_PARAM;
    };
    let Some(os) = lib.rdt.os() else {
        return PQOS_RETVAL_INTER;
    };
    if let Err(e) = os.change_monitoring_tasks(id, &add, &remove) {
        return code(&e);
    }
    let members: Box<[pid_t]> = new.into_boxed_slice();
    let Some(g) = lib.groups.map.get_mut(&key) else {
        return PQOS_RETVAL_PARAM;
    };
    // SAFETY: `group` is the registered structure (pqos.h: the program's started group).
    unsafe {
        (*group).pids = members.as_ptr().cast_mut();
        (*group).num_pids = c_uint::try_from(members.len()).unwrap_or(0);
    }
    g.members = Members::Tasks(members);
    PQOS_RETVAL_OK
}

/// Adds processes to a task group (pqos.h `pqos_mon_add_pids`); ones already in it are
/// skipped.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_add_pids(
    num_pids: c_uint,
    pids: *const pid_t,
    group: *mut pqos_mon_data,
) -> c_int {
    with_lib("pqos_mon_add_pids", |lib| {
        // SAFETY: pqos.h: `pids` holds `num_pids` pids.
        let (Some(pids), false) = (unsafe { array(pids, num_pids) }, group.is_null()) else {
            return PQOS_RETVAL_PARAM;
        };
        retask(lib, group, |old| {
            let mut new = old.to_vec();
            for p in pids {
                if !new.contains(p) {
                    new.push(*p);
                }
            }
            Ok(new)
        })
    })
}

/// Removes processes from a task group (pqos.h `pqos_mon_remove_pids`); a pid not in it, or
/// removing every pid, is `PQOS_RETVAL_PARAM`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_remove_pids(
    num_pids: c_uint,
    pids: *const pid_t,
    group: *mut pqos_mon_data,
) -> c_int {
    with_lib("pqos_mon_remove_pids", |lib| {
        // SAFETY: pqos.h: `pids` holds `num_pids` pids.
        let (Some(pids), false) = (unsafe { array(pids, num_pids) }, group.is_null()) else {
            return PQOS_RETVAL_PARAM;
        };
        retask(lib, group, |old| {
            if pids.iter().any(|p| !old.contains(p)) {
                return Err(PQOS_RETVAL_PARAM);
            }
            Ok(old.iter().copied().filter(|p| !pids.contains(p)).collect())
        })
    })
}

/// Stops a group (pqos.h `pqos_mon_stop`): its RMIDs go back; a structure the library
/// allocated is freed, the program's is zeroed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_stop(group: *mut pqos_mon_data) -> c_int {
    with_lib("pqos_mon_stop", |lib| {
        let Some(g) = lib.groups.map.get(&(group as usize)) else {
            log::error!("pqos_mon_stop: not a started monitoring group");
            return PQOS_RETVAL_PARAM;
        };
        if let Some(id) = g.id
            && let Err(e) = lib.rdt.stop_monitoring(id)
        {
            return code(&e);
        }
        let Some(g) = lib.groups.map.remove(&(group as usize)) else {
            return PQOS_RETVAL_PARAM;
        };
        if g.owned {
            // SAFETY: allocated by `new_data` with Box::into_raw and registered once.
            drop(unsafe { Box::from_raw(group) });
        } else {
            // SAFETY: the program's structure; all-zero is a valid value (libpqos memsets it).
            unsafe { group.write(std::mem::zeroed()) };
        }
        drop(g);
        PQOS_RETVAL_OK
    })
}

/// Polls groups (pqos.h `pqos_mon_poll`): one read of every counter by the library, then each
/// given group's values (module docs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_poll(
    groups: *mut *mut pqos_mon_data,
    num_groups: c_uint,
) -> c_int {
    with_lib("pqos_mon_poll", |lib| {
        // SAFETY: pqos.h: `groups` holds `num_groups` group pointers.
        let Some(list) = (unsafe { array(groups.cast_const(), num_groups) }) else {
            return PQOS_RETVAL_PARAM;
        };
        if list.iter().any(|&g| {
            lib.groups
                .map
                .get(&(g as usize))
                .is_none_or(|g| g.id.is_none())
        }) {
            log::error!("pqos_mon_poll: not a started monitoring group");
            return PQOS_RETVAL_PARAM;
        }
        if let Err(e) = lib.groups.poll_library(&mut lib.rdt) {
            return code(&e);
        }
        for &ptr in list {
            let Some(g) = lib.groups.map.get_mut(&(ptr as usize)) else {
                continue;
            };
            let llc =
                g.id.and_then(|id| lib.rdt.values(id))
                    .and_then(|v| v.llc_occupancy_bytes)
                    .unwrap_or(0);
            let (d, t) = (g.since_poll, g.since_start);
            let mbm = |delta: u64| if g.valid_mbm_read { delta } else { 0 };
            #[allow(clippy::cast_precision_loss)] // counts far below 2^52 per interval
            let ipc = if d.cycles > 0 {
                d.instructions as f64 / d.cycles as f64
            } else {
                0.0
            };
            let values = pqos_event_values {
                llc,
                mbm_local: t.local,
                mbm_total: t.total,
                mbm_remote: t.remote,
                mbm_local_delta: mbm(d.local),
                mbm_total_delta: mbm(d.total),
                mbm_remote_delta: mbm(d.remote),
                ipc_retired: t.instructions,
                ipc_retired_delta: d.instructions,
                ipc_unhalted: t.cycles,
                ipc_unhalted_delta: d.cycles,
                ipc,
                llc_misses: t.misses,
                llc_misses_delta: d.misses,
                llc_references: t.references,
                llc_references_delta: d.references,
            };
            let mut region_values = pqos_region_aware_event_values::default();
            for slot in 0..g.regions.len() {
                region_values.mbm_total[slot] = g.region_since_start[slot];
                region_values.mbm_total_delta[slot] = mbm(g.region_since_poll[slot]);
            }
            g.region_since_poll = [0; PQOS_MAX_MEM_REGIONS];
            // SAFETY: `ptr` is a registered group: a live pqos_mon_data (pqos.h).
            unsafe {
                (*ptr).values = values;
                (*ptr).region_values = region_values;
            }
            for (i, v) in g.pcie.iter_mut().enumerate() {
                *v = (t.pcie[i], d.pcie[i]);
            }
            g.valid_mbm_read = true;
            g.since_poll = Counts::default();
        }
        PQOS_RETVAL_OK
    })
}

/// Resets monitoring (pqos.h `pqos_mon_reset`): every core back to RMID 0 (MSR), this
/// library's monitor groups removed (OS). Groups started here stop; `pqos_mon_stop` still
/// releases their structures.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_reset() -> c_int {
    with_lib("pqos_mon_reset", mon_reset)
}

fn mon_reset(lib: &mut Lib) -> c_int {
    lib.groups.stop_all(&mut lib.rdt);
    match lib.rdt.reset_monitoring() {
        Ok(()) => PQOS_RETVAL_OK,
        Err(e) => code(&e),
    }
}

/// Resets monitoring with a configuration (pqos.h `pqos_mon_reset_config`; NULL: as
/// `pqos_mon_reset`): besides every core back to RMID 0, L3 I/O RDT monitoring on or off
/// (`l3_iordt`) and the SNC mode (`snc`), as [`rdt_pqos::MonReset`] (lib/hw_monitoring.c
/// `hw_mon_reset`). A value out of its enum is `PQOS_RETVAL_PARAM`; what the platform or
/// interface lacks is refused before any write (`PQOS_RETVAL_RESOURCE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_reset_config(cfg: *const pqos_mon_config) -> c_int {
    with_lib("pqos_mon_reset_config", |lib| {
        // SAFETY: pqos.h: `cfg` is NULL or a pqos_mon_config.
        let Some(cfg) = (unsafe { cfg.as_ref() }) else {
            return mon_reset(lib);
        };
        let l3_iordt = match cfg.l3_iordt {
            0 => rdt_pqos::FeatureSetting::Any,
            1 => rdt_pqos::FeatureSetting::Off,
            2 => rdt_pqos::FeatureSetting::On,
            _ => return PQOS_RETVAL_PARAM,
        };
        let snc = match cfg.snc {
            0 => None,
            1 => Some(rdt_pqos::SncMode::Local),
            2 => Some(rdt_pqos::SncMode::Total),
            _ => return PQOS_RETVAL_PARAM,
        };
        let mon = rdt_pqos::MonReset { l3_iordt, snc };
        // checked before the groups are stopped: a refusal leaves them running
        let interface = lib.rdt.interface();
        if let Err(e) = lib.rdt.capabilities().check_mon_reset(interface, &mon) {
            log::error!("{e}");
            return PQOS_RETVAL_RESOURCE;
        }
        lib.groups.stop_all(&mut lib.rdt);
        match lib.rdt.reset_monitoring_with(&mon) {
            Ok(()) => PQOS_RETVAL_OK,
            Err(e) => code(&e),
        }
    })
}

/// The RMID of a core (pqos.h `pqos_mon_assoc_get`; MSR interface: the OS interface has no
/// RMIDs to show, `PQOS_RETVAL_INTER`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_assoc_get(lcore: c_uint, rmid: *mut pqos_rmid_t) -> c_int {
    with_lib("pqos_mon_assoc_get", |lib| {
        // SAFETY: pqos.h: `rmid` points to a pqos_rmid_t (NULL checked).
        let Some(out) = (unsafe { rmid.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        match lib.rdt.rmid_of(LogicalCpu::new(lcore)) {
            Ok(Some(r)) => {
                *out = r.get();
                PQOS_RETVAL_OK
            }
            Ok(None) => PQOS_RETVAL_INTER,
            Err(e) => code(&e),
        }
    })
}

/// A group's value and delta of one event (pqos.h `pqos_mon_get_value`): an event the group
/// does not monitor, or IPC (`pqos_mon_get_ipc`), is `PQOS_RETVAL_PARAM`; `value` and
/// `delta` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_get_value(
    group: *const pqos_mon_data,
    event_id: EnumMonEvent,
    value: *mut u64,
    delta: *mut u64,
) -> c_int {
    guard("pqos_mon_get_value", || {
        use pqos_mon_event as E;
        // SAFETY: pqos.h: `group` is a started group (NULL checked).
        let Some(g) = (unsafe { group.as_ref() }) else {
            return PQOS_RETVAL_PARAM;
        };
        if g.event & event_id == 0 || event_id.count_ones() != 1 {
            return PQOS_RETVAL_PARAM;
        }
        if let Some(i) = PCIE_EVENTS.iter().position(|e| e.bits() == event_id) {
            // kept beside the group, found by its address under the API lock
            return with_lib("pqos_mon_get_value", |lib| {
                let Some(&(val, del)) = lib.groups.map.get(&(group as usize)).map(|g| &g.pcie[i])
                else {
                    return PQOS_RETVAL_PARAM;
                };
                // SAFETY: pqos.h: each output is NULL or a uint64_t.
                unsafe {
                    if let Some(out) = value.as_mut() {
                        *out = val;
                    }
                    if let Some(out) = delta.as_mut() {
                        *out = del;
                    }
                }
                PQOS_RETVAL_OK
            });
        }
        let v = &g.values;
        let (val, del) = match event_id {
            x if x == E::PQOS_MON_EVENT_L3_OCCUP as c_uint => (v.llc, 0),
            x if x == E::PQOS_MON_EVENT_LMEM_BW as c_uint => (v.mbm_local, v.mbm_local_delta),
            x if x == E::PQOS_MON_EVENT_TMEM_BW as c_uint => (v.mbm_total, v.mbm_total_delta),
            x if x == E::PQOS_MON_EVENT_RMEM_BW as c_uint => (v.mbm_remote, v.mbm_remote_delta),
            x if x == E::PQOS_PERF_EVENT_LLC_MISS as c_uint => (v.llc_misses, v.llc_misses_delta),
            x if x == E::PQOS_PERF_EVENT_LLC_REF as c_uint => {
                (v.llc_references, v.llc_references_delta)
            }
            _ => return PQOS_RETVAL_PARAM,
        };
        // SAFETY: pqos.h: each output is NULL or a uint64_t.
        unsafe {
            if let Some(out) = value.as_mut() {
                *out = val;
            }
            if let Some(out) = delta.as_mut() {
                *out = del;
            }
        }
        PQOS_RETVAL_OK
    })
}

/// A group's value of one memory region (pqos.h `pqos_mon_get_region_value`), as the last
/// `pqos_mon_poll` left it: `PQOS_MON_EVENT_TMEM_BW` gives the region's bytes since the
/// start and since the previous poll (`region_values` of the region's slot);
/// `PQOS_MON_EVENT_L3_OCCUP` the group's occupancy in bytes (regions share the cache; no
/// delta), as pqos v26.03's `monitor_utils_get_region_value` reads it. A region the group was
/// not started with, an event it does not monitor or another event is `PQOS_RETVAL_PARAM`;
/// on an interface without memory regions (not MMIO) `PQOS_RETVAL_RESOURCE`. `value` and
/// `delta` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_get_region_value(
    group: *const pqos_mon_data,
    event_id: EnumMonEvent,
    region_num: c_int,
    value: *mut u64,
    delta: *mut u64,
) -> c_int {
    with_lib("pqos_mon_get_region_value", |lib| {
        use pqos_mon_event as E;
        // SAFETY: pqos.h: `group` is a started group (NULL checked).
        let Some(g) = (unsafe { group.as_ref() }) else {
            return PQOS_RETVAL_PARAM;
        };
        if lib.rdt.regions().is_none() {
            log::error!("memory regions need the MMIO interface (PQOS_INTER_MMIO)");
            return PQOS_RETVAL_RESOURCE;
        }
        if g.event & event_id == 0 || event_id.count_ones() != 1 {
            return PQOS_RETVAL_PARAM;
        }
        let n = usize::try_from(g.regions.num_mem_regions)
            .unwrap_or(0)
            .min(PQOS_MAX_MEM_REGIONS);
        let Some(slot) = g.regions.region_num[..n]
            .iter()
            .position(|&r| r == region_num)
        else {
            log::error!("the group does not monitor memory region {region_num}");
            return PQOS_RETVAL_PARAM;
        };
        let (val, del) = match event_id {
            x if x == E::PQOS_MON_EVENT_TMEM_BW as c_uint => (
                g.region_values.mbm_total[slot],
                g.region_values.mbm_total_delta[slot],
            ),
            x if x == E::PQOS_MON_EVENT_L3_OCCUP as c_uint => (g.values.llc, 0),
            _ => return PQOS_RETVAL_PARAM,
        };
        // SAFETY: pqos.h: each output is NULL or a uint64_t.
        unsafe {
            if let Some(out) = value.as_mut() {
                *out = val;
            }
            if let Some(out) = delta.as_mut() {
                *out = del;
            }
        }
        PQOS_RETVAL_OK
    })
}

/// A group's IPC (pqos.h `pqos_mon_get_ipc`): `PQOS_RETVAL_PARAM` when it does not monitor IPC.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_get_ipc(group: *const pqos_mon_data, value: *mut f64) -> c_int {
    guard("pqos_mon_get_ipc", || {
        // SAFETY: pqos.h: `group` a started group, `value` a double (NULL checked).
        let (Some(g), Some(out)) = (unsafe { group.as_ref() }, unsafe { value.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        if g.event & pqos_mon_event::PQOS_PERF_EVENT_IPC as c_uint == 0 {
            return PQOS_RETVAL_PARAM;
        }
        *out = g.values.ipc;
        PQOS_RETVAL_OK
    })
}

/// A telemetry value (pqos.h `pqos_mon_get_tel_value`): no group monitors telemetry events
/// here (they are refused at start), so `PQOS_RETVAL_PARAM` as for an unsupported event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_get_tel_value(
    _group: *const pqos_mon_data,
    _event: EnumMonEvent,
    _value: *mut f64,
) -> c_int {
    PQOS_RETVAL_PARAM
}
