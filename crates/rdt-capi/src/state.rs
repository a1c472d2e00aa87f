//! The library's state between `pqos_init` and `pqos_fini`, behind the API lock.

use std::ffi::{CStr, c_char, c_int, c_uint};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rdt_pqos::{Backend, Iface, Interface, OpenOptions, Rdt};

use crate::capdata::CapData;
use crate::groups::Groups;
use crate::guard::{guard, guard_or};
use crate::types::{
    EnumInterface, PQOS_RETVAL_INIT, PQOS_RETVAL_OK, PQOS_RETVAL_PARAM, pqos_config, pqos_interface,
};

/// An initialised library.
pub(crate) struct Lib {
    /// The platform.
    pub rdt: Rdt,
    /// What `pqos_inter_get` answers.
    pub inter: pqos_interface,
    /// `pqos_cap_get`'s and `pqos_sysconfig_get`'s structures.
    pub caps: CapData,
    /// Monitoring groups started through this API.
    pub groups: Groups,
}

// SAFETY: the raw pointers a Lib holds point into memory it owns (the capability structures,
// the groups' arrays) or into groups the application gave it; they are used only under the
// API lock, from whichever thread holds it, as libpqos uses them.
unsafe impl Send for Lib {}

/// libpqos's API lock and the state it guards (`lib/lock.c`).
static STATE: Mutex<Option<Lib>> = Mutex::new(None);

/// Takes the API lock; a panic that poisoned it left the state consistent (every change is
/// made after the checks, and a group is registered only once started).
pub(crate) fn lock() -> MutexGuard<'static, Option<Lib>> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `body` on the initialised library under the API lock, in [`guard`]:
/// `PQOS_RETVAL_INIT` before `pqos_init` (libpqos `_pqos_check_init`).
pub(crate) fn with_lib(name: &str, body: impl FnOnce(&mut Lib) -> c_int) -> c_int {
    guard(name, || {
        if let Some(lib) = lock().as_mut() {
            body(lib)
        } else {
            log::error!("{name}: PQoS library not initialized");
            PQOS_RETVAL_INIT
        }
    })
}

/// As [`with_lib`] for an export that answers NULL on failure: `body`'s `None` and an
/// uninitialised library are NULL.
pub(crate) fn with_lib_opt<T>(name: &str, body: impl FnOnce(&mut Lib) -> Option<T>) -> Option<T> {
    guard_or(name, None, || {
        if let Some(lib) = lock().as_mut() {
            body(lib)
        } else {
            log::error!("{name}: PQoS library not initialized");
            None
        }
    })
}

/// Initializes the library (pqos.h `pqos_init`): opens the platform the environment names
/// (`RDT_SIM=MODEL`, `RDT_SYSROOT=DIR`, else the host) through `config->interface`, starts
/// the log (`fd_log` or `callback_log`, `verbose`) and discovers the capabilities.
///
/// `PQOS_RETVAL_PARAM` for a NULL `config` or an unknown interface, `PQOS_RETVAL_INIT` when
/// already initialized (one `pqos_init` per process until `pqos_fini`), `PQOS_RETVAL_INTER`
/// for an interface that cannot be used (`PQOS_INTER_MMIO` where the firmware has no ACPI
/// ERDT and MRRM tables), `PQOS_RETVAL_ERROR` when the platform cannot be opened (the log
/// says why).
///
/// `PQOS_INTER_MMIO` opens RDT 1.3's MMIO interface (the library's `Interface::Mmio`): cores and L3 CAT through MSRs as on
/// `PQOS_INTER_MSR`, region-aware MBM and MBA through the registers the ERDT locates.
/// `PQOS_INTER_AUTO` never chooses it, as libpqos v26.03's `discover_interface` (lib/cap.c:
/// resctrl when the kernel has it, else MSR) does not.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_init(config: *const pqos_config) -> c_int {
    guard("pqos_init", || {
        // SAFETY: pqos.h: `config` points to a pqos_config (NULL checked here).
        let Some(config) = (unsafe { config.as_ref() }) else {
            return PQOS_RETVAL_PARAM;
        };
        let mut state = lock();
        if state.is_some() {
            log::error!("PQoS library already initialized");
            return PQOS_RETVAL_INIT;
        }
        let (iface, requested) = match config.interface {
            0 => (Iface::Msr, pqos_interface::PQOS_INTER_MSR),
            1 => (Iface::Os, pqos_interface::PQOS_INTER_OS),
            2 => (Iface::Os, pqos_interface::PQOS_INTER_OS_RESCTRL_MON),
            3 => (Iface::Auto, pqos_interface::PQOS_INTER_AUTO),
            4 => (Iface::Mmio, pqos_interface::PQOS_INTER_MMIO),
            _ => return PQOS_RETVAL_PARAM,
        };
        crate::logging::start(
            config.fd_log,
            config.callback_log,
            config.context_log,
            config.verbose,
        );
        let rdt = match OpenOptions::new(iface).platform_from_env().open() {
            Ok(rdt) => rdt,
            Err(e) => {
                let code = crate::error::open_code(&e);
                crate::logging::stop();
                return code;
            }
        };
        let inter = match (rdt.interface(), requested) {
            (Interface::Msr, _) => pqos_interface::PQOS_INTER_MSR,
            (Interface::Mmio, _) => pqos_interface::PQOS_INTER_MMIO,
            (Interface::Os, pqos_interface::PQOS_INTER_OS_RESCTRL_MON) => {
                pqos_interface::PQOS_INTER_OS_RESCTRL_MON
            }
            (Interface::Os, _) => pqos_interface::PQOS_INTER_OS,
        };
        let mut rdt = rdt;
        let caps = CapData::build(&mut rdt);
        *state = Some(Lib {
            rdt,
            inter,
            caps,
            groups: Groups::default(),
        });
        PQOS_RETVAL_OK
    })
}

/// Shuts the library down (pqos.h `pqos_fini`): stops the monitoring groups still running
/// (their RMIDs go back), saves a simulated platform, stops the log.
/// `PQOS_RETVAL_INIT` when not initialized.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_fini() -> c_int {
    guard("pqos_fini", || {
        let mut state = lock();
        let Some(mut lib) = state.take() else {
            log::error!("PQoS library not initialized");
            return PQOS_RETVAL_INIT;
        };
        lib.groups.stop_all(&mut lib.rdt);
        drop(lib);
        crate::logging::stop();
        PQOS_RETVAL_OK
    })
}

/// The interface in use (pqos.h `pqos_inter_get`): `PQOS_INTER_MSR`, `PQOS_INTER_OS`,
/// `PQOS_INTER_MMIO`, or `PQOS_INTER_OS_RESCTRL_MON` when that was asked for.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pqos_inter_get(interface: *mut EnumInterface) -> c_int {
    with_lib("pqos_inter_get", |lib| {
        // SAFETY: pqos.h: `interface` points to an enum pqos_interface (NULL checked).
        let Some(out) = (unsafe { interface.as_mut() }) else {
            return PQOS_RETVAL_PARAM;
        };
        *out = lib.inter as c_uint;
        PQOS_RETVAL_OK
    })
}

/// libpqos's description of a return code (pqos.h `pqos_retval_to_string`); unknown codes
/// are "unknown error".
#[unsafe(no_mangle)]
pub extern "C" fn pqos_retval_to_string(retval: c_int) -> *const c_char {
    let s: &'static CStr = match retval {
        0 => c"success",
        1 => c"generic error",
        2 => c"invalid parameter",
        3 => c"resource error",
        4 => c"initialization error",
        5 => c"transport error",
        6 => c"performance counter error",
        7 => c"resource busy",
        8 => c"interface not supported",
        9 => c"data overflow",
        10 => c"data unavailable",
        _ => c"unknown error",
    };
    s.as_ptr()
}

/// Hooks for this crate's tests: the library's own view of what the C API reports.
pub mod testing {
    use rdt_pqos::{MonValues, RegionValues};

    use crate::types::pqos_mon_data;

    /// The library's values of the group behind `group` (a group this API started), as the
    /// last poll left them; `None` when not initialised or not a group of ours.
    #[must_use]
    pub fn library_values(group: *const pqos_mon_data) -> Option<MonValues> {
        let state = super::lock();
        let lib = state.as_ref()?;
        let id = lib.groups.library_id(group)?;
        rdt_pqos::Backend::values(&lib.rdt, id).cloned()
    }

    /// The library's region traffic of the group behind `group` (MMIO interface) from its
    /// last poll, by L3 domain then region; `None` when not initialised, not a group of ours
    /// or off the MMIO interface.
    #[must_use]
    pub fn library_region_values(group: *const pqos_mon_data) -> Option<Vec<RegionValues>> {
        let mut state = super::lock();
        let lib = state.as_mut()?;
        let id = lib.groups.library_id(group)?;
        let regions = rdt_pqos::Backend::regions(&mut lib.rdt)?;
        regions.region_values(id).map(<[_]>::to_vec)
    }
}
