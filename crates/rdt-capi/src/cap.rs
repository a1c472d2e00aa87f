//! `pqos_cap_get` and `pqos_sysconfig_get` (the structures are [`crate::capdata`]'s).

use std::ffi::c_int;

use crate::state::with_lib;
use crate::types::{PQOS_RETVAL_OK, PQOS_RETVAL_PARAM, pqos_cap, pqos_cpuinfo, pqos_sysconfig};

/// The capabilities and the topology (pqos.h `pqos_cap_get`): pointers into the library's
/// structures, valid until `pqos_fini`; `cpu` may be NULL. `PQOS_RETVAL_PARAM` when both are
/// NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_cap_get(
    cap: *mut *const pqos_cap,
    cpu: *mut *const pqos_cpuinfo,
) -> c_int {
    with_lib("pqos_cap_get", |lib| {
        if cap.is_null() && cpu.is_null() {
            return PQOS_RETVAL_PARAM;
        }
        // SAFETY: pqos.h: each non-NULL argument points to a pointer to fill.
        unsafe {
            if let Some(out) = cap.as_mut() {
                *out = lib.caps.cap.as_ptr();
            }
            if let Some(out) = cpu.as_mut() {
                *out = lib.caps.cpu.as_ptr();
            }
        }
        PQOS_RETVAL_OK
    })
}

/// The system configuration (pqos.h `pqos_sysconfig_get`): the capabilities and topology of
/// `pqos_cap_get`; `dev`, `erdt`, `mrrm`, `cores_domains` and `channels_domains` are NULL,
/// also on the MMIO interface (their descriptions are not built here; `pqos_mba_get`
/// answers for the ERDT's CPU domain ids).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_sysconfig_get(sysconf: *mut *const pqos_sysconfig) -> c_int {
    with_lib("pqos_sysconfig_get", |lib| {
        // SAFETY: pqos.h: `sysconf` points to a pointer to fill (NULL checked).
        let Some(out) = (unsafe { sysconf.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        *out = &raw const *lib.caps.sysconfig;
        PQOS_RETVAL_OK
    })
}
