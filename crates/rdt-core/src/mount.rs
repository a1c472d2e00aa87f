//! resctrl's mount options, the one definition the OS backend (reading `/proc/mounts`,
//! remounting) and the simulated platform (accepting `mount -t resctrl -o ...`) share.

use std::fmt;
use std::str::FromStr;

use crate::{Capabilities, MbaKind, Vendor};

/// The resctrl mount options (`mount -t resctrl resctrl -o cdp,cdpl2,mba_MBps,debug DIR`).
///
/// `FromStr` reads an option string as the kernel's `fs_parse` does: options separated by
/// commas, empty elements skipped, an unknown option or a flag with a value refused.
/// [`MountOptions::from_mount_entry`] reads the options field of a `/proc/mounts` line,
/// which also holds the VFS's own options (`rw`, `relatime`). `Display` writes the resctrl
/// options in the order `/proc/mounts` shows them, `""` for none.
///
/// # Examples
/// ```
/// use rdt_core::MountOptions;
/// let o: MountOptions = "cdp,mba_MBps".parse().unwrap();
/// assert!(o.cdp && o.mba_mbps && !o.cdpl2);
/// assert_eq!(o.to_string(), "cdp,mba_MBps");
/// assert!("cdp=1".parse::<MountOptions>().is_err());
/// assert_eq!(MountOptions::from_mount_entry("rw,relatime,cdp"), "cdp".parse().unwrap());
/// ```
///
/// # References
/// Linux `Documentation/arch/x86/resctrl.rst`, "Mounting"; `fs/resctrl/rdtgroup.c`
/// (`rdt_parse_param`, `rdt_enable_ctx`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MountOptions {
    /// `cdp`: L3 code/data prioritization (`L3CODE`/`L3DATA` schemas; IA32_L3_QOS_CFG bit 0).
    pub cdp: bool,
    /// `cdpl2`: L2 code/data prioritization (`L2CODE`/`L2DATA`; IA32_L2_QOS_CFG bit 0).
    pub cdpl2: bool,
    /// `mba_MBps`: the MBA software controller; `MB` values are MiB/s targets.
    pub mba_mbps: bool,
    /// `debug`: the `ctrl_hw_id` and `mon_hw_id` files.
    pub debug: bool,
}

/// Options the kernel refuses, in its words (every case is `EINVAL` from `mount(2)`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MountOptionsError {
    /// An option resctrl does not know (fs_parse: "Unknown parameter").
    #[error("resctrl: Unknown parameter '{name}'")]
    UnknownParameter {
        /// The option as written.
        name: String,
    },
    /// A flag option written with a value (`cdp=1`).
    #[error("resctrl: Unexpected value for '{name}'")]
    UnexpectedValue {
        /// The option's name.
        name: String,
    },
    /// `cdp` or `cdpl2` on a platform whose L3 (L2) CAT is absent or not CDP-capable.
    #[error("resctrl: {option} needs a CDP-capable {level} cache allocation")]
    NoCdp {
        /// `cdp` or `cdpl2`.
        option: &'static str,
        /// `L3` or `L2`.
        level: &'static str,
    },
    /// `mba_MBps` where the kernel cannot run its controller.
    #[error("mba_MBps requires MBM and linear scale MBA at L3 scope")]
    NoMbaMbps,
}

impl FromStr for MountOptions {
    type Err = MountOptionsError;

    fn from_str(s: &str) -> Result<Self, MountOptionsError> {
        let mut o = Self::default();
        for opt in s
            .trim_end_matches('\n')
            .split(',')
            .filter(|t| !t.is_empty())
        {
            let (name, value) = match opt.split_once('=') {
                Some((n, _)) => (n, true),
                None => (opt, false),
            };
            let Some(flag) = o.flag(name) else {
                // `=x` has no name: the option itself is what is unknown.
                let name = if name.is_empty() { opt } else { name };
                return Err(MountOptionsError::UnknownParameter { name: name.into() });
            };
            if value {
                return Err(MountOptionsError::UnexpectedValue { name: name.into() });
            }
            *flag = true;
        }
        Ok(o)
    }
}

impl fmt::Display for MountOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<&str> = [
            (self.cdp, "cdp"),
            (self.cdpl2, "cdpl2"),
            (self.mba_mbps, "mba_MBps"),
            (self.debug, "debug"),
        ]
        .into_iter()
        .filter_map(|(b, n)| b.then_some(n))
        .collect();
        f.write_str(&on.join(","))
    }
}

impl MountOptions {
    fn flag(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "cdp" => &mut self.cdp,
            "cdpl2" => &mut self.cdpl2,
            "mba_MBps" => &mut self.mba_mbps,
            "debug" => &mut self.debug,
            _ => return None,
        })
    }

    /// The resctrl options of a `/proc/mounts` options field (`rw,relatime,cdp`): the VFS's
    /// own options and anything else resctrl does not define are skipped.
    #[must_use]
    pub fn from_mount_entry(field: &str) -> Self {
        let mut o = Self::default();
        for opt in field.trim().split(',') {
            if let Some(flag) = o.flag(opt) {
                *flag = true;
            }
        }
        o
    }

    /// Whether a platform with `caps` (and Sub-NUMA Clustering on or not: `snc`) can be
    /// mounted with these options, as the kernel checks (`rdt_enable_ctx`): `cdp`/`cdpl2`
    /// need a CDP-capable L3/L2 CAT; `mba_MBps` needs what
    /// [`Capabilities::supports_mba_mbps`] says.
    ///
    /// # Errors
    /// [`MountOptionsError::NoCdp`], [`MountOptionsError::NoMbaMbps`].
    pub fn check(&self, caps: &Capabilities, snc: bool) -> Result<(), MountOptionsError> {
        if self.cdp && !caps.l3_cat.get().is_some_and(|c| c.cdp_supported) {
            return Err(MountOptionsError::NoCdp {
                option: "cdp",
                level: "L3",
            });
        }
        if self.cdpl2 && !caps.l2_cat.get().is_some_and(|c| c.cdp_supported) {
            return Err(MountOptionsError::NoCdp {
                option: "cdpl2",
                level: "L2",
            });
        }
        if self.mba_mbps && !caps.supports_mba_mbps(snc) {
            return Err(MountOptionsError::NoMbaMbps);
        }
        Ok(())
    }
}

impl Capabilities {
    /// Whether the kernel's MBA software controller (`mba_MBps`) can run here: MBM (total or
    /// local), and linear Intel MBA (AMD's bandwidth units are not linear), and no Sub-NUMA
    /// Clustering (`snc`), as `supports_mba_mbps()` in `fs/resctrl/rdtgroup.c` requires.
    #[must_use]
    pub fn supports_mba_mbps(&self, snc: bool) -> bool {
        let mbm = self
            .monitoring
            .get()
            .is_some_and(|m| m.events.mbm_total || m.events.mbm_local);
        let linear = self.vendor == Vendor::Intel
            && self
                .mba
                .get()
                .is_some_and(|m| matches!(m.kind, MbaKind::IntelDelay { linear: true, .. }));
        mbm && linear && !snc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_the_kernel_flags_and_skip_empty_elements() {
        let o: MountOptions = ",cdp,,cdpl2,mba_MBps,debug".parse().unwrap();
        assert_eq!(
            o,
            MountOptions {
                cdp: true,
                cdpl2: true,
                mba_mbps: true,
                debug: true
            }
        );
        assert_eq!(o.to_string(), "cdp,cdpl2,mba_MBps,debug");
        assert_eq!("".parse::<MountOptions>(), Ok(MountOptions::default()));
    }

    #[test]
    fn unknown_or_valued_options_are_refused_with_the_kernels_words() {
        let e = "cdp,mba_mbps".parse::<MountOptions>().unwrap_err();
        assert_eq!(e.to_string(), "resctrl: Unknown parameter 'mba_mbps'");
        let e = "cdp=1".parse::<MountOptions>().unwrap_err();
        assert_eq!(e, MountOptionsError::UnexpectedValue { name: "cdp".into() });
        assert_eq!(
            MountOptions::from_mount_entry("rw,relatime,mba_MBps,nosuid\n"),
            MountOptions {
                mba_mbps: true,
                ..MountOptions::default()
            }
        );
    }

    #[test]
    fn display_round_trips_every_combination() {
        for bits in 0..16u8 {
            let o = MountOptions {
                cdp: bits & 1 != 0,
                cdpl2: bits & 2 != 0,
                mba_mbps: bits & 4 != 0,
                debug: bits & 8 != 0,
            };
            assert_eq!(o.to_string().parse::<MountOptions>(), Ok(o));
        }
    }

    #[test]
    fn the_controller_needs_mbm_linear_intel_mba_and_no_snc() {
        let (intel, _) = crate::fake::fixtures::intel_1s();
        assert!(intel.supports_mba_mbps(false));
        assert!(!intel.supports_mba_mbps(true), "SNC");
        let (amd, _) = crate::fake::fixtures::amd_2ccx();
        assert!(!amd.supports_mba_mbps(false));
        let mbps = MountOptions {
            mba_mbps: true,
            ..MountOptions::default()
        };
        assert_eq!(mbps.check(&amd, false), Err(MountOptionsError::NoMbaMbps));
        let (bdw, _) = crate::fake::fixtures::broadwell_2s();
        let cdpl2: MountOptions = "cdpl2".parse().unwrap();
        assert!(matches!(
            cdpl2.check(&bdw, false),
            Err(MountOptionsError::NoCdp { level: "L2", .. })
        ));
    }
}
