//! [`MountOptions`]: the `-o` string of `mount -t resctrl`.

use std::fmt;
use std::io;
use std::str::FromStr;

use rdt_core::{Capabilities, MbaKind, Vendor};

use super::errno::{EBUSY, EINVAL};

/// The resctrl mount options (`mount -t resctrl resctrl -o cdp,cdpl2,mba_MBps,debug DIR`).
///
/// `FromStr` reads the kernel's comma-separated option string (`"cdp,mba_MBps"`; `""` is no
/// option; empty elements are skipped as the VFS does) and `Display` writes it back in the
/// order `/proc/mounts` shows the options.
///
/// # Examples
/// ```
/// use rdt_sim::resctrl::MountOptions;
/// let o: MountOptions = "cdp,mba_MBps".parse().unwrap();
/// assert!(o.cdp && o.mba_mbps && !o.cdpl2);
/// assert_eq!(o.to_string(), "cdp,mba_MBps");
/// assert!("cdp=1".parse::<MountOptions>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MountOptions {
    /// `cdp`: L3 code/data prioritization (`L3CODE`/`L3DATA` schemas; IA32_L3_QOS_CFG bit 0).
    pub cdp: bool,
    /// `cdpl2`: L2 code/data prioritization (`L2CODE`/`L2DATA`; IA32_L2_QOS_CFG bit 0).
    pub cdpl2: bool,
    /// `mba_MBps`: the MBA software controller; `MB` values are MBps targets.
    pub mba_mbps: bool,
    /// `debug`: the `ctrl_hw_id` and `mon_hw_id` files.
    pub debug: bool,
}

/// Mounting failed: the option string is not one the kernel accepts, or the platform cannot
/// do what an option asks. Every case is `EINVAL` except [`MountError::Busy`] (`EBUSY`);
/// [`MountError::errno`] gives it and `io::Error::from` carries it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
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
    /// `mba_MBps` without MBM, without linear MBA (AMD), or without MBA.
    #[error("mba_MBps requires MBM and linear scale MBA at L3 scope")]
    NoMbaMbps,
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
            _ => EINVAL,
        }
    }
}

impl From<MountError> for io::Error {
    fn from(e: MountError) -> Self {
        Self::from_raw_os_error(e.errno())
    }
}

impl FromStr for MountOptions {
    type Err = MountError;

    fn from_str(s: &str) -> Result<Self, MountError> {
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
            let flag = match name {
                "cdp" => &mut o.cdp,
                "cdpl2" => &mut o.cdpl2,
                "mba_MBps" => &mut o.mba_mbps,
                "debug" => &mut o.debug,
                _ => {
                    return Err(MountError::UnknownParameter { name: name.into() });
                }
            };
            if value {
                return Err(MountError::UnexpectedValue { name: name.into() });
            }
            *flag = true;
        }
        Ok(o)
    }
}

impl fmt::Display for MountOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (self.cdp, "cdp"),
            (self.cdpl2, "cdpl2"),
            (self.mba_mbps, "mba_MBps"),
            (self.debug, "debug"),
        ];
        let on: Vec<&str> = names.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect();
        f.write_str(&on.join(","))
    }
}

impl MountOptions {
    /// Whether `caps` allow these options, as `rdt_enable_ctx` checks them: `cdp`/`cdpl2`
    /// need a CDP-capable L3/L2 CAT; `mba_MBps` needs MBM (total or local), MBA, and linear
    /// MBA (Intel; AMD's is not linear). SNC, which also forbids it, is not modelled.
    ///
    /// # Errors
    /// [`MountError::NoCdp`], [`MountError::NoMbaMbps`].
    pub fn validate(&self, caps: &Capabilities) -> Result<(), MountError> {
        if self.cdp && !caps.l3_cat.get().is_some_and(|c| c.cdp_supported) {
            return Err(MountError::NoCdp {
                option: "cdp",
                level: "L3",
            });
        }
        if self.cdpl2 && !caps.l2_cat.get().is_some_and(|c| c.cdp_supported) {
            return Err(MountError::NoCdp {
                option: "cdpl2",
                level: "L2",
            });
        }
        if self.mba_mbps {
            let mbm = caps
                .monitoring
                .get()
                .is_some_and(|m| m.events.mbm_total || m.events.mbm_local);
            let linear = caps.vendor == Vendor::Intel
                && caps
                    .mba
                    .get()
                    .is_some_and(|m| matches!(m.kind, MbaKind::IntelDelay { linear: true, .. }));
            if !(mbm && linear) {
                return Err(MountError::NoMbaMbps);
            }
        }
        Ok(())
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
    fn unknown_or_valued_options_are_einval_with_the_kernels_words() {
        let e = "cdp,mba_mbps".parse::<MountOptions>().unwrap_err();
        assert_eq!(e.to_string(), "resctrl: Unknown parameter 'mba_mbps'");
        assert_eq!(e.errno(), EINVAL);
        let e = "cdp=1".parse::<MountOptions>().unwrap_err();
        assert_eq!(e, MountError::UnexpectedValue { name: "cdp".into() });
        assert_eq!(io::Error::from(e).raw_os_error(), Some(EINVAL));
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
}
