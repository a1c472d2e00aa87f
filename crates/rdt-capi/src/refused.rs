//! What is not built: I/O RDT (channels, devices), the MMIO interface's dumps; and
//! `pqos_get_available_interfaces`. Each function of what is not built
//! exists with libpqos's prototype and answers as libpqos does on a platform without the
//! feature: `PQOS_RETVAL_RESOURCE` (after `PQOS_RETVAL_INIT` before
//! `pqos_init` and `PQOS_RETVAL_PARAM` for NULL outputs), NULL or 0 where it returns a pointer
//! or a channel.

use std::ffi::{c_int, c_uint, c_void};

use crate::guard::guard;
use crate::state::with_lib;
use crate::types::{
    EnumInterface, EnumMonEvent, PQOS_RETVAL_OK, PQOS_RETVAL_PARAM, PQOS_RETVAL_RESOURCE,
    pqos_channel, pqos_channel_t, pqos_devinfo, pqos_interface, pqos_mmio_dump,
    pqos_mmio_dump_rmids, pqos_mon_data, pqos_pci_info, pqos_rmid_t,
};

fn absent(name: &str, outputs: &[bool]) -> c_int {
    with_lib(name, |_| {
        if outputs.iter().any(|null| *null) {
            return PQOS_RETVAL_PARAM;
        }
        log::error!(
            "{name}: not supported by this libpqos (I/O RDT channels and devices, MMIO dumps)"
        );
        PQOS_RETVAL_RESOURCE
    })
}

/// I/O RDT channel monitoring (pqos.h `pqos_mon_start_channels`): `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_start_channels(
    num_channels: c_uint,
    channels: *const pqos_channel_t,
    _event: EnumMonEvent,
    _context: *mut c_void,
    group: *mut *mut pqos_mon_data,
) -> c_int {
    absent(
        "pqos_mon_start_channels",
        &[num_channels == 0, channels.is_null(), group.is_null()],
    )
}

/// I/O RDT device monitoring (pqos.h `pqos_mon_start_dev`): `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_start_dev(
    _segment: u16,
    _bdf: u16,
    _channel: u8,
    _event: EnumMonEvent,
    _context: *mut c_void,
    group: *mut *mut pqos_mon_data,
) -> c_int {
    absent("pqos_mon_start_dev", &[group.is_null()])
}

/// RMID of a channel (pqos.h `pqos_mon_assoc_get_channel`): `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_assoc_get_channel(
    _channel_id: pqos_channel_t,
    rmid: *mut pqos_rmid_t,
) -> c_int {
    absent("pqos_mon_assoc_get_channel", &[rmid.is_null()])
}

/// RMID of a device channel (pqos.h `pqos_mon_assoc_get_dev`): `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_mon_assoc_get_dev(
    _segment: u16,
    _bdf: u16,
    _vc: c_uint,
    rmid: *mut pqos_rmid_t,
) -> c_int {
    absent("pqos_mon_assoc_get_dev", &[rmid.is_null()])
}

/// Class of a channel (pqos.h `pqos_alloc_assoc_get_channel`): `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assoc_get_channel(
    _channel: pqos_channel_t,
    class_id: *mut c_uint,
) -> c_int {
    absent("pqos_alloc_assoc_get_channel", &[class_id.is_null()])
}

/// Class of a device channel (pqos.h `pqos_alloc_assoc_get_dev`): `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assoc_get_dev(
    _segment: u16,
    _bdf: u16,
    _vc: c_uint,
    class_id: *mut c_uint,
) -> c_int {
    absent("pqos_alloc_assoc_get_dev", &[class_id.is_null()])
}

/// Associates a channel (pqos.h `pqos_alloc_assoc_set_channel`): `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assoc_set_channel(
    _channel: pqos_channel_t,
    _class_id: c_uint,
) -> c_int {
    absent("pqos_alloc_assoc_set_channel", &[])
}

/// Associates a device channel (pqos.h `pqos_alloc_assoc_set_dev`): `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_alloc_assoc_set_dev(
    _segment: u16,
    _bdf: u16,
    _vc: c_uint,
    _class_id: c_uint,
) -> c_int {
    absent("pqos_alloc_assoc_set_dev", &[])
}

/// Channel of a device's virtual channel (pqos.h `pqos_devinfo_get_channel_id`): 0 (error),
/// there are no devices (`pqos_sysconfig.dev` is NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_devinfo_get_channel_id(
    _devinfo: *const pqos_devinfo,
    _segment: u16,
    _bdf: u16,
    _vc: c_uint,
) -> pqos_channel_t {
    0
}

/// Channels of a device (pqos.h `pqos_devinfo_get_channel_ids`): NULL, no devices.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_devinfo_get_channel_ids(
    _devinfo: *const pqos_devinfo,
    _segment: u16,
    _bdf: u16,
    _num_channels: *mut c_uint,
) -> *mut pqos_channel_t {
    std::ptr::null_mut()
}

/// A channel's information (pqos.h `pqos_devinfo_get_channel`): NULL, no channels.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_devinfo_get_channel(
    _dev: *const pqos_devinfo,
    _channel_id: pqos_channel_t,
) -> *const pqos_channel {
    std::ptr::null()
}

/// MMIO dump (pqos.h `pqos_dump`): `PQOS_RETVAL_RESOURCE` (not built, also on the MMIO
/// interface; `pqos --dump` has them, over `rdt_mmio::dump`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_dump(dump_cfg: *const pqos_mmio_dump) -> c_int {
    absent("pqos_dump", &[dump_cfg.is_null()])
}

/// MMIO RMID dump (pqos.h `pqos_dump_rmids`): `PQOS_RETVAL_RESOURCE` (not built, also on
/// the MMIO interface).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_dump_rmids(dump_cfg: *const pqos_mmio_dump_rmids) -> c_int {
    absent("pqos_dump_rmids", &[dump_cfg.is_null()])
}

/// PCI information of an I/O device (pqos.h `pqos_io_devs_get`): `PQOS_RETVAL_RESOURCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_io_devs_get(
    pci_info: *mut pqos_pci_info,
    _segment: u16,
    _bdf: u16,
) -> c_int {
    absent("pqos_io_devs_get", &[pci_info.is_null()])
}

/// The interfaces this machine offers, in libpqos v26.03's priority order (pqos.h
/// `pqos_get_available_interfaces`, callable before `pqos_init`): MMIO where the firmware's
/// ACPI ERDT and MRRM tables parse (`sys/firmware/acpi/tables/` of the host or of
/// `RDT_SYSROOT`; an in-process simulated platform, `RDT_SIM`, is not probed: `pqos_init`
/// with `PQOS_INTER_MMIO` says whether its model has them), then MSR, then OS where the
/// kernel has resctrl (or the platform is simulated: its resctrl is served in-process or
/// under `RDT_SYSROOT`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_get_available_interfaces(
    interfaces: *mut EnumInterface,
    count: *mut c_uint,
) -> c_int {
    guard("pqos_get_available_interfaces", || {
        // SAFETY: pqos.h: `count` points to the capacity of `interfaces` (NULL checked).
        let Some(count) = (unsafe { count.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        if interfaces.is_null() || *count == 0 {
            return PQOS_RETVAL_PARAM;
        }
        let env = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty());
        let os = env("RDT_SIM").is_some()
            || env("RDT_SYSROOT").is_some()
            || std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| f.contains("resctrl"));
        let mmio = env("RDT_SIM").is_none() && {
            let root = env("RDT_SYSROOT").map_or_else(|| "/".into(), std::path::PathBuf::from);
            rdt_pqos::mmio::AcpiTables::read(&root).is_ok_and(|t| t.has_mmio())
        };
        let mut list = Vec::with_capacity(3);
        if mmio {
            list.push(pqos_interface::PQOS_INTER_MMIO as c_uint);
        }
        list.push(pqos_interface::PQOS_INTER_MSR as c_uint);
        if os {
            list.push(pqos_interface::PQOS_INTER_OS as c_uint);
        }
        let n = list.len().min(*count as usize);
        // SAFETY: pqos.h: `interfaces` has room for `*count` values; n <= *count.
        unsafe { std::ptr::copy_nonoverlapping(list.as_ptr(), interfaces, n) };
        *count = c_uint::try_from(n).unwrap_or(0);
        PQOS_RETVAL_OK
    })
}
