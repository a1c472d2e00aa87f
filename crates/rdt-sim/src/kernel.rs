//! Which Linux release the simulated machine runs: it decides which resctrl files exist.
//!
//! The machine ([`crate::SimPlatform::kernel`]) holds the release it boots, as it holds the
//! `rdt=` boot parameter ([`crate::quirks`]); the kernel model ([`crate::resctrl`], which
//! re-exports [`KernelVersion`]) reads it when it mounts. It is a module of its own so that
//! the machine need not reach into the kernel model for it.

use std::fmt;
use std::str::FromStr;

/// The kernel release whose resctrl the simulator shows (`rdt-sim mount --kernel`,
/// [`crate::SimPlatform::set_kernel`]). Only the files that appeared in these releases
/// differ; everything else is v6.17's behaviour (module docs of [`crate::resctrl`]).
///
/// | release | adds (where the hardware has the feature) |
/// |---|---|
/// | 6.17 | — (BMEC's `mbm_total_bytes_config` / `mbm_local_bytes_config` exist since ~6.3) |
/// | 6.18 | ABMC: `info/L3_MON/{mbm_assign_mode,num_mbm_cntrs,available_mbm_cntrs,mbm_assign_on_mkdir,event_configs/*/event_filter}`, per-group `mbm_L3_assignments`, "Unassigned" reads (`mbm_assign_mode` on every monitoring system) |
/// | 6.19 | io_alloc (AMD SDCIAE): `io_alloc`, `io_alloc_cbm` in every cache `info/` directory |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum KernelVersion {
    /// Linux 6.17.
    V6_17,
    /// Linux 6.18 (ABMC).
    V6_18,
    /// Linux 6.19 (io_alloc); the default.
    #[default]
    V6_19,
}

impl KernelVersion {
    /// Every release modelled, oldest first.
    pub const ALL: [Self; 3] = [Self::V6_17, Self::V6_18, Self::V6_19];

    /// Whether this release has ABMC counter assignment (`mbm_assign_mode`, 6.18).
    #[must_use]
    pub fn has_abmc_files(self) -> bool {
        self >= Self::V6_18
    }

    /// Whether this release has `io_alloc` (6.19).
    #[must_use]
    pub fn has_io_alloc(self) -> bool {
        self >= Self::V6_19
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::V6_17 => "6.17",
            Self::V6_18 => "6.18",
            Self::V6_19 => "6.19",
        })
    }
}

/// A kernel release that is not one of [`KernelVersion::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown kernel release `{0}` (modelled: 6.17, 6.18, 6.19)")]
pub struct UnknownKernel(pub String);

impl FromStr for KernelVersion {
    type Err = UnknownKernel;

    /// `6.17`, `6.18`, `6.19`, with an optional leading `v`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        Self::ALL
            .into_iter()
            .find(|k| k.to_string() == t)
            .ok_or_else(|| UnknownKernel(s.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_print_and_order() {
        assert_eq!("6.18".parse(), Ok(KernelVersion::V6_18));
        assert_eq!("v6.17".parse(), Ok(KernelVersion::V6_17));
        assert!("6.20".parse::<KernelVersion>().is_err());
        assert_eq!(KernelVersion::default().to_string(), "6.19");
        assert!(!KernelVersion::V6_17.has_abmc_files());
        assert!(KernelVersion::V6_18.has_abmc_files() && !KernelVersion::V6_18.has_io_alloc());
    }
}
