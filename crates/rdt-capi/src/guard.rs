//! No Rust panic crosses into C: every export runs its body here.

use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::types::PQOS_RETVAL_ERROR;

/// Runs `body` of the export `name`; a panic is logged (`ERROR: <name>: internal error: ...`)
/// and answered with `PQOS_RETVAL_ERROR`.
pub(crate) fn guard(name: &str, body: impl FnOnce() -> c_int) -> c_int {
    guard_or(name, PQOS_RETVAL_ERROR, body)
}

/// As [`guard`], for an export whose failure value is `failed` (NULL, 0).
pub(crate) fn guard_or<T>(name: &str, failed: T, body: impl FnOnce() -> T) -> T {
    // The state a panic interrupted is either untouched (checks come first) or behind the
    // API lock, whose poisoning `state::lock` recovers from; no reference crosses the call.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            log::error!("{name}: internal error: {why}");
            failed
        }
    }
}
