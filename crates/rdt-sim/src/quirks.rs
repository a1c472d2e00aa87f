//! What the Linux kernel makes of the model's RDT features at boot, beyond CPUID: the `rdt=`
//! boot parameter ([`RdtOptions`]) and the per-model quirks of
//! `arch/x86/kernel/cpu/resctrl/core.c` `__check_quirks_intel`. They decide what resctrl
//! shows ([`crate::resctrl`]); the MSR view (`dev/cpu/N/msr`, an MSR backend) keeps every
//! feature CPUID enumerates, as on the machine.
//!
//! | model (family 6) | quirk | effect on resctrl |
//! |---|---|---|
//! | Skylake-SP 55H, stepping ≤ 4 (`skylake-sp`: Xeon Gold 6140, stepping 4) | `set_rdt_options("!cmt,!mbmtotal,!mbmlocal,!l3cat")` | L3 CAT, CMT and MBM hidden: only `MB` in `schemata` and `info/`, no `L3_MON`, `mon_data`, `mon_groups` |
//! | Skylake-SP 55H, stepping > 4 (Cascade Lake) | `set_rdt_options("!l3cat")` | L3 CAT hidden |
//! | Skylake-SP 55H and Broadwell-X 4FH (`broadwell-ep`) | `intel_rdt_mbm_apply_quirk` | the kernel multiplies MBM counts of RMIDs above a threshold by a correction factor (`mbm_cf_table`, [`rdt_core::mbm::MbmCorrection`]); modelled: the hardware counters of those RMIDs count low by the factor, the simulated kernel corrects them |
//! | Haswell-X 3FH | `cache_alloc_hsw_probe` | no built-in model |
//!
//! A feature the `rdt=` parameter forces on (`rdt=l3cat`) comes back even where a quirk
//! forced it off: the kernel's `rdt_cpu_has` checks `force_off` first and `force_on` last. A
//! feature the CPU does not enumerate stays off whatever the parameter says.
//!
//! The boot parameter is part of the model's name where one is chosen
//! ([`split_model_spec`]): `skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal` is the Gold 6140
//! booted with `rdt=l3cat,cmt,mbmtotal,mbmlocal` (`pqos --sim=…`, `rdt-sim mount --model …`
//! or `--rdt …`, [`crate::SimPlatform::builtin`]).
//!
//! # References
//! Linux `arch/x86/kernel/cpu/resctrl/core.c` (`rdt_options`, `set_rdt_options`,
//! `rdt_cpu_has`, `__check_quirks_intel`), `monitor.c` (`mbm_cf_table`,
//! `intel_rdt_mbm_apply_quirk`); `Documentation/admin-guide/kernel-parameters.txt` (`rdt=`).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use rdt_core::Capabilities;

/// A feature the `rdt=` boot parameter names (`rdt_options[]` of the kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RdtFlag {
    /// `cmt`: LLC occupancy monitoring.
    Cmt,
    /// `mbmtotal`: total memory bandwidth monitoring.
    MbmTotal,
    /// `mbmlocal`: local memory bandwidth monitoring.
    MbmLocal,
    /// `l3cat`: L3 cache allocation.
    L3Cat,
    /// `l3cdp`: L3 code/data prioritization.
    L3Cdp,
    /// `l2cat`: L2 cache allocation.
    L2Cat,
    /// `l2cdp`: L2 code/data prioritization.
    L2Cdp,
    /// `mba`: memory bandwidth allocation.
    Mba,
    /// `smba`: AMD slow memory bandwidth allocation.
    Smba,
    /// `bmec`: AMD bandwidth monitoring event configuration.
    Bmec,
}

impl RdtFlag {
    /// Every flag, in the kernel's table order.
    pub const ALL: [Self; 10] = [
        Self::Cmt,
        Self::MbmTotal,
        Self::MbmLocal,
        Self::L3Cat,
        Self::L3Cdp,
        Self::L2Cat,
        Self::L2Cdp,
        Self::Mba,
        Self::Smba,
        Self::Bmec,
    ];

    /// The name in `rdt=`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Cmt => "cmt",
            Self::MbmTotal => "mbmtotal",
            Self::MbmLocal => "mbmlocal",
            Self::L3Cat => "l3cat",
            Self::L3Cdp => "l3cdp",
            Self::L2Cat => "l2cat",
            Self::L2Cdp => "l2cdp",
            Self::Mba => "mba",
            Self::Smba => "smba",
            Self::Bmec => "bmec",
        }
    }
}

/// A `rdt=` option list that names something else than the kernel's flags.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "rdt={list}: `{token}` is not one of cmt, mbmtotal, mbmlocal, l3cat, l3cdp, l2cat, l2cdp, \
     mba, smba, bmec (each optionally prefixed with `!`)"
)]
pub struct RdtOptionsError {
    /// The whole list.
    pub list: String,
    /// The token not understood.
    pub token: String,
}

/// The kernel's `rdt_options[]` table after `set_rdt_options`: for each flag, whether it was
/// forced on and whether it was forced off (both can hold: on wins, `rdt_cpu_has`).
///
/// Parsed from the text of the `rdt=` boot parameter: comma-separated flag names
/// ([`RdtFlag::name`]), `!name` forcing off. The kernel ignores a name it does not know;
/// this parser refuses it ([`RdtOptionsError`]) so that a typo in a test or a command line
/// does not silently boot the stock platform. Displayed back in canonical order (forced-on
/// names, then `!` forced-off ones), so `"cmt,l3cat"` and `"l3cat,cmt"` are one value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RdtOptions {
    on: BTreeSet<RdtFlag>,
    off: BTreeSet<RdtFlag>,
}

impl RdtOptions {
    /// No option: the stock boot.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no flag is forced either way.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.on.is_empty() && self.off.is_empty()
    }

    /// `set_rdt_options` of another list on top of this one (the kernel ORs the flags in).
    #[must_use]
    pub fn merged(&self, other: &Self) -> Self {
        Self {
            on: self.on.union(&other.on).copied().collect(),
            off: self.off.union(&other.off).copied().collect(),
        }
    }

    /// `rdt_cpu_has`: whether the kernel uses `flag`, given whether the CPU enumerates it.
    #[must_use]
    pub fn cpu_has(&self, flag: RdtFlag, cpu_has: bool) -> bool {
        cpu_has && (self.on.contains(&flag) || !self.off.contains(&flag))
    }
}

impl FromStr for RdtOptions {
    type Err = RdtOptionsError;

    /// Parses an `rdt=` value (type docs); the empty string is the stock boot.
    fn from_str(list: &str) -> Result<Self, Self::Err> {
        let mut o = Self::default();
        for token in list.split(',').filter(|t| !t.is_empty()) {
            let (off, name) = token
                .strip_prefix('!')
                .map_or((false, token), |n| (true, n));
            let flag = RdtFlag::ALL
                .into_iter()
                .find(|f| f.name() == name)
                .ok_or_else(|| RdtOptionsError {
                    list: list.to_owned(),
                    token: token.to_owned(),
                })?;
            if off {
                o.off.insert(flag);
            } else {
                o.on.insert(flag);
            }
        }
        Ok(o)
    }
}

impl fmt::Display for RdtOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = self
            .on
            .iter()
            .map(|x| x.name().to_owned())
            .chain(self.off.iter().map(|x| format!("!{}", x.name())));
        f.write_str(&names.collect::<Vec<_>>().join(","))
    }
}

/// The marker between a model name and its boot parameter in a model spec.
const RDT_MARKER: &str = ":rdt=";

/// Splits a model spec `NAME[:rdt=LIST]` (a built-in name or a dump path, and the `rdt=`
/// boot parameter the model boots with) into the name and the options.
///
/// # Errors
/// [`RdtOptionsError`] when `LIST` names an unknown flag.
///
/// # Examples
/// ```
/// use rdt_sim::quirks::{RdtFlag, split_model_spec};
/// let (name, o) = split_model_spec("skylake-sp:rdt=l3cat,cmt").unwrap();
/// assert_eq!(name, "skylake-sp");
/// assert!(o.cpu_has(RdtFlag::L3Cat, true));
/// assert_eq!(split_model_spec("milan").unwrap().1.to_string(), "");
/// ```
pub fn split_model_spec(spec: &str) -> Result<(&str, RdtOptions), RdtOptionsError> {
    match spec.split_once(RDT_MARKER) {
        Some((name, list)) => Ok((name, list.parse()?)),
        None => Ok((spec, RdtOptions::default())),
    }
}

/// The spec of `name` booted with `options` ([`split_model_spec`] reversed): `name` alone
/// when there is no option.
#[must_use]
pub fn model_spec(name: &str, options: &RdtOptions) -> String {
    if options.is_empty() {
        name.to_owned()
    } else {
        format!("{name}{RDT_MARKER}{options}")
    }
}

pub use rdt_core::cpuid::fms;

/// Intel Skylake-X / Skylake-SP / Cascade Lake (`INTEL_SKYLAKE_X`).
const INTEL_SKYLAKE_X: (u32, u32) = (6, 0x55);

/// The options `__check_quirks_intel` sets for a CPU with these capabilities (module docs);
/// empty for other vendors and models.
#[must_use]
pub fn quirk_options(caps: &Capabilities) -> RdtOptions {
    let (Some(sig), false) = (caps.signature, caps.vendor.is_amd_like()) else {
        return RdtOptions::default();
    };
    let (family, model, stepping) = fms(sig);
    if (family, model) != INTEL_SKYLAKE_X {
        return RdtOptions::default();
    }
    let list = if stepping <= 4 {
        "!cmt,!mbmtotal,!mbmlocal,!l3cat"
    } else {
        "!l3cat"
    };
    list.parse().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_display_and_refuse_unknown_flags() {
        let o: RdtOptions = "l3cat,!mba,cmt".parse().unwrap();
        assert_eq!(o.to_string(), "cmt,l3cat,!mba");
        assert!(o.cpu_has(RdtFlag::L3Cat, true));
        assert!(!o.cpu_has(RdtFlag::L3Cat, false), "the CPU must have it");
        assert!(!o.cpu_has(RdtFlag::Mba, true));
        assert!(o.cpu_has(RdtFlag::L2Cat, true));
        let e = "l3cat,l4cat".parse::<RdtOptions>().unwrap_err();
        assert_eq!(e.token, "l4cat");
        assert!("".parse::<RdtOptions>().unwrap().is_empty());
    }

    /// `rdt_cpu_has`: force_off is applied first, force_on last, so `rdt=l3cat` undoes the
    /// Skylake quirk's `!l3cat`.
    #[test]
    fn forced_on_wins_over_a_quirks_forced_off() {
        let boot: RdtOptions = "l3cat".parse().unwrap();
        let quirk: RdtOptions = "!cmt,!l3cat".parse().unwrap();
        let k = boot.merged(&quirk);
        assert!(k.cpu_has(RdtFlag::L3Cat, true));
        assert!(!k.cpu_has(RdtFlag::Cmt, true));
    }

    #[test]
    fn model_specs_round_trip() {
        let (n, o) = split_model_spec("skylake-sp:rdt=mbmlocal,l3cat").unwrap();
        assert_eq!(n, "skylake-sp");
        assert_eq!(model_spec(n, &o), "skylake-sp:rdt=mbmlocal,l3cat");
        assert_eq!(model_spec("milan", &RdtOptions::new()), "milan");
        assert!(split_model_spec("x:rdt=bogus").is_err());
    }

    /// `__check_quirks_intel`: stepping ≤ 4 hides CMT, MBM and L3 CAT; later steppings
    /// (Cascade Lake) only L3 CAT; other models nothing.
    #[test]
    fn skylake_quirk_depends_on_the_stepping() {
        assert_eq!(fms(0x0005_0654), (6, 0x55, 4));
        let mut caps = crate::SimPlatform::builtin("skylake-sp")
            .unwrap()
            .capabilities()
            .clone();
        assert_eq!(
            quirk_options(&caps).to_string(),
            "!cmt,!mbmtotal,!mbmlocal,!l3cat"
        );
        caps.signature = Some(0x0005_0657); // Cascade Lake-SP, stepping 7
        assert_eq!(quirk_options(&caps).to_string(), "!l3cat");
        caps.signature = Some(0x0004_06f1); // Broadwell-EP
        assert!(quirk_options(&caps).is_empty());
    }

    #[test]
    fn mbm_correction_factor_of_the_models() {
        use rdt_core::mbm::MbmCorrection;
        let of = |model: &str| {
            MbmCorrection::of(crate::SimPlatform::builtin(model).unwrap().capabilities())
        };
        assert_eq!(
            of("broadwell-ep"),
            Some(MbmCorrection {
                threshold: 95,
                factor: 1_198_372
            })
        );
        assert_eq!(of("skylake-sp").map(|c| c.threshold), Some(127));
        assert_eq!(of("sapphire-rapids"), None);
        assert_eq!(of("milan"), None);
    }
}
