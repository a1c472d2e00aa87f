//! Mounting resctrl on the simulated platform: rdt-core's [`MountOptions`] (the `-o`
//! string of `mount -t resctrl`) and the errors `mount(2)` gives.

use std::io;

pub use rdt_core::{MountOptions, MountOptionsError};

use super::errno::{EBUSY, EINVAL};

/// Mounting failed: the option string is not one the kernel accepts, or the platform cannot
/// do what an option asks ([`MountOptionsError`], `EINVAL`), or resctrl is already mounted
/// ([`MountError::Busy`], `EBUSY`). [`MountError::errno`] gives the errno and
/// `io::Error::from` carries it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// The options themselves.
    #[error(transparent)]
    Options(#[from] MountOptionsError),
    /// resctrl is already mounted on this platform.
    #[error("resctrl is already mounted on this platform")]
    Busy,
}

impl MountError {
    /// The errno `mount(2)` returns.
    #[must_use]
    pub const fn errno(&self) -> i32 {
        match self {
            Self::Busy => EBUSY,
            Self::Options(_) => EINVAL,
        }
    }
}

impl From<MountError> for io::Error {
    fn from(e: MountError) -> Self {
        Self::from_raw_os_error(e.errno())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_errors_are_einval_and_busy_is_ebusy() {
        let e = MountError::from("cdp=1".parse::<MountOptions>().unwrap_err());
        assert_eq!(e.errno(), EINVAL);
        assert_eq!(io::Error::from(e).raw_os_error(), Some(EINVAL));
        assert_eq!(MountError::Busy.errno(), EBUSY);
    }
}
