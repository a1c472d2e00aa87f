//! The library's errors as libpqos's return codes.

use std::ffi::c_int;

use rdt_pqos::{BackendError, Error, GroupStartError, OpenError, RequestError};

use crate::types::{
    PQOS_RETVAL_BUSY, PQOS_RETVAL_ERROR, PQOS_RETVAL_INTER, PQOS_RETVAL_PARAM, PQOS_RETVAL_RESOURCE,
};

/// The `PQOS_RETVAL_*` code libpqos gives for what `request` says (lib/*.c):
/// a bad value, core, domain, class, task or event is `PQOS_RETVAL_PARAM`; what the platform
/// lacks or has run out of (a feature, RMIDs, a core already monitored) is
/// `PQOS_RETVAL_RESOURCE`; work of the other interface is `PQOS_RETVAL_INTER`; another tool's
/// resctrl group in the way is `PQOS_RETVAL_BUSY`.
#[must_use]
pub fn request_code(request: &RequestError) -> c_int {
    match request {
        RequestError::Limit(_)
        | RequestError::NoSuchCpu(_)
        | RequestError::NoSuchDomain { .. }
        | RequestError::NoSuchTask(_)
        | RequestError::NoSuchGroup(_)
        | RequestError::UnsupportedEvent { .. }
        | RequestError::CdpMismatch { .. }
        | RequestError::MbaUnit { .. }
        | RequestError::EmptyGroup
        | RequestError::ExclusiveOverlap { .. } => PQOS_RETVAL_PARAM,
        RequestError::NeedsOsInterface { .. } | RequestError::NeedsMsrInterface { .. } => {
            PQOS_RETVAL_INTER
        }
        RequestError::ForeignGroup { .. } | RequestError::ClassInUse { .. } => PQOS_RETVAL_BUSY,
        RequestError::AlreadyMonitored { .. }
        | RequestError::OutOfRmids { .. }
        | RequestError::FeatureUnsupported { .. }
        | RequestError::Unsupported(_) => PQOS_RETVAL_RESOURCE,
        _ => PQOS_RETVAL_ERROR,
    }
}

/// The code of an operation's error, logged with its message (libpqos logs an `ERROR:` line
/// where it fails).
pub(crate) fn code(error: &Error) -> c_int {
    log::error!("{error}");
    error.request().map_or(PQOS_RETVAL_ERROR, request_code)
}

/// The code of a failed start of monitoring groups.
pub(crate) fn start_code(error: &GroupStartError<Error>) -> c_int {
    code(&error.error)
}

/// The code of a failed `pqos_init`: a platform that cannot be opened is
/// `PQOS_RETVAL_ERROR` in libpqos (`pqos_init: ... init failed`), a forced interface that
/// is not there `PQOS_RETVAL_INTER`, as is the MMIO interface on a platform whose firmware
/// does not describe it (no ACPI ERDT/MRRM).
pub(crate) fn open_code(error: &OpenError) -> c_int {
    log::error!("{error}");
    match error {
        OpenError::Iface(_) | OpenError::Mmio(rdt_pqos::mmio::MmioError::NotAvailable(_)) => {
            PQOS_RETVAL_INTER
        }
        _ => PQOS_RETVAL_ERROR,
    }
}

/// The code of a failed transaction (the library's `transaction::run`): an invalid change is
/// its [`RequestError`]'s code, a failed read or write `PQOS_RETVAL_ERROR` unless the
/// backend's error is a request.
pub(crate) fn transaction_code(
    result: Result<rdt_pqos::transaction::Outcome<Error>, rdt_pqos::transaction::PlanError<Error>>,
) -> Result<Vec<rdt_pqos::transaction::Done>, c_int> {
    use rdt_pqos::transaction::{ApplyError, PlanError};
    match result {
        Err(PlanError::Invalid { error, .. }) => {
            log::error!("{error}");
            Err(request_code(&error))
        }
        Err(PlanError::Read { error, .. }) => Err(code(&error)),
        Ok(outcome) => outcome.into_result().map_err(|e| match e {
            ApplyError::NotStarted(error) => code(&error),
            ApplyError::Write { failed, .. } => code(&failed.error),
        }),
    }
}
