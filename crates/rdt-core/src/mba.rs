//! Memory bandwidth allocation limits.

use std::fmt;
use std::str::FromStr;

/// An MBA limit could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a memory bandwidth limit (expected a number, `N%`, `NMBps` or `Nu` for AMD units)"
)]
#[non_exhaustive]
pub struct ParseMbaLimitError(pub String);

/// A memory bandwidth limit of one class of service.
///
/// Which variant applies depends on the platform and mount, never on the number alone:
/// Intel MBA takes a percentage of peak bandwidth (the hardware stores a delay, `100 - %`,
/// rounded to the MBA granularity); the kernel's `mba_MBps` mount takes MiB/s (the kernel
/// doc calls them "MBps"); AMD takes raw units of 1/8 GB/s (`2048` = unlimited on a part with
/// an 11-bit bandwidth field).
///
/// `Display` is the kernel's `schemata` form, the bare number (`50`, `6000`, `2048`). The
/// alternate form `{:#}` adds the unit (`50%`, `6000MBps`, `2048u`); `FromStr` reads that
/// form, and a bare number as a percentage.
///
/// # References
/// Intel SDM Vol. 3B, 18.19.7 "Memory Bandwidth Allocation"; AMD64 PQoS Extensions
/// (pub. 56375), "L3 Memory Bandwidth Enforcement"; kernel `Documentation/arch/x86/resctrl.rst`,
/// "Memory bandwidth Allocation and monitoring".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum MbaLimit {
    /// Percent of peak bandwidth, 1..=100 (Intel MBA, kernel default mount).
    Percent(u8),
    /// MiB/s, for the kernel's `mba_MBps` software controller (pqos's `mba_max`).
    MibPerSec(u32),
    /// AMD bandwidth-limit units of 1/8 GB/s (MSR 0xC0000200 + COS).
    AmdUnits(u32),
}

/// Intel MBA's register value for a limit of `percent` of peak bandwidth: the delay
/// `100 − percent` that IA32_L2_QOS_Ext_BW_Thrtl_n (0xD50 + n) holds; 0 (no throttling) at
/// 100 % and above.
///
/// # References
/// Intel SDM Vol. 3B, 18.19.7.1 "Memory Bandwidth Allocation Enumeration"; the kernel's
/// `delay_bw_map()`.
#[must_use]
pub const fn intel_mba_delay(percent: u32) -> u32 {
    100u32.saturating_sub(percent)
}

/// The limit in percent an Intel MBA delay value stands for: `100 − delay`, 0 for a
/// delay of 100 or more (inverse of [`intel_mba_delay`]).
#[must_use]
pub fn intel_mba_percent(delay: u64) -> u32 {
    100 - u32::try_from(delay.min(100)).unwrap_or(100)
}

/// `percent` rounded half up to a multiple of `step` (pqos `lib/hw_allocation.c`: the MBA
/// rate rounded to `throttle_step`, e.g. 15 → 20 in 10 % steps).
#[must_use]
pub const fn round_to_step(percent: u32, step: u32) -> u32 {
    let step = if step == 0 { 1 } else { step };
    (percent + step / 2) / step * step
}

impl MbaLimit {
    /// The number as the kernel writes it in `schemata`.
    #[must_use]
    pub const fn value(self) -> u32 {
        match self {
            Self::Percent(p) => p as u32,
            Self::MibPerSec(v) | Self::AmdUnits(v) => v,
        }
    }
}

impl fmt::Display for MbaLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self {
            Self::Percent(_) => "%",
            Self::MibPerSec(_) => "MBps",
            Self::AmdUnits(_) => "u",
        };
        if f.alternate() {
            write!(f, "{}{unit}", self.value())
        } else {
            write!(f, "{}", self.value())
        }
    }
}

impl FromStr for MbaLimit {
    type Err = ParseMbaLimitError;

    fn from_str(s: &str) -> Result<Self, ParseMbaLimitError> {
        let t = s.trim();
        let err = || ParseMbaLimitError(s.to_owned());
        let (num, make): (&str, fn(u32) -> Option<Self>) = if let Some(n) = t.strip_suffix("MBps") {
            (n, |v| Some(Self::MibPerSec(v)))
        } else if let Some(n) = t.strip_suffix('u') {
            (n, |v| Some(Self::AmdUnits(v)))
        } else {
            (t.strip_suffix('%').unwrap_or(t), |v| {
                u8::try_from(v).ok().map(Self::Percent)
            })
        };
        let n = num.trim();
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        make(n.parse().map_err(|_| err())?).ok_or_else(err)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn display_is_the_kernel_number() {
        assert_eq!(MbaLimit::Percent(50).to_string(), "50");
        assert_eq!(MbaLimit::AmdUnits(2048).to_string(), "2048");
        assert_eq!(format!("{:#}", MbaLimit::MibPerSec(6000)), "6000MBps");
    }

    #[test]
    fn parses_bare_numbers_as_percent_and_rejects_garbage() {
        assert_eq!("70".parse(), Ok(MbaLimit::Percent(70)));
        assert_eq!("70%".parse(), Ok(MbaLimit::Percent(70)));
        assert_eq!("6000MBps".parse(), Ok(MbaLimit::MibPerSec(6000)));
        assert!("x".parse::<MbaLimit>().is_err());
        assert!("300%".parse::<MbaLimit>().is_err());
        assert!("-1".parse::<MbaLimit>().is_err());
    }

    fn any_limit() -> impl Strategy<Value = MbaLimit> {
        prop_oneof![
            any::<u8>().prop_map(MbaLimit::Percent),
            any::<u32>().prop_map(MbaLimit::MibPerSec),
            any::<u32>().prop_map(MbaLimit::AmdUnits),
        ]
    }

    proptest! {
        #[test]
        fn alternate_form_round_trips(l in any_limit()) {
            prop_assert_eq!(format!("{l:#}").parse::<MbaLimit>().unwrap(), l);
        }
    }
}

/// How the MBA limits of the threads of one core combine (Intel): each thread throttled by
/// its own class's delay, or the core by one delay chosen from its threads'.
///
/// MBA 3.0 parts (CPUID.(10H,3):ECX\[0\], Sapphire Rapids and later) throttle per thread.
/// Earlier parts apply one delay per core: the larger of the threads' delays (the kernel's
/// `info/MB/thread_throttle_mode` `max`), or, on MBA 2.0 parts whose IA32_MBA_CFG (0xC84)
/// bit 0 is set, the smaller.
///
/// # References
/// Intel SDM Vol. 3B, 18.19.7 "Memory Bandwidth Allocation" (MBA 2.0 min/max delay
/// selection, MBA 3.0 per-thread); kernel `Documentation/arch/x86/resctrl.rst`
/// (`thread_throttle_mode`); pqos `lib/hw_cap.c` `hw_cap_mba_discover` (`Min|Max MBA delay
/// enabled on socket N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadThrottle {
    /// Each thread has its own class's delay.
    PerThread,
    /// A core runs at the larger delay of its threads (the lowest percentage).
    Max,
    /// A core runs at the smaller delay of its threads (the highest percentage; MBA_CFG
    /// bit 0).
    Min,
}

impl ThreadThrottle {
    /// The limit a core whose threads have `limits` runs at, `None` when each thread keeps
    /// its own ([`ThreadThrottle::PerThread`]) or there is no percentage among them.
    #[must_use]
    pub fn core_limit(self, limits: &[MbaLimit]) -> Option<MbaLimit> {
        let percents = limits.iter().filter_map(|l| match l {
            MbaLimit::Percent(p) => Some(*p),
            _ => None,
        });
        match self {
            Self::PerThread => None,
            Self::Max => percents.min().map(MbaLimit::Percent),
            Self::Min => percents.max().map(MbaLimit::Percent),
        }
    }
}

impl fmt::Display for ThreadThrottle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::PerThread => "per-thread",
            Self::Max => "max",
            Self::Min => "min",
        })
    }
}
