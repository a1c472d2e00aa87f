//! Plain numeric identifiers: classes of service, RMIDs, logical CPUs, cache domains and
//! tasks.
//!
//! Each id is a newtype over `u32` so that a CPU number can never be passed where a COS is
//! expected. `Display` and `FromStr` use the kernel's text form, which for all of these is
//! the bare decimal number (`COS1` is pqos's label, printed by the CLI, not by the type).

use std::fmt;
use std::num::ParseIntError;
use std::str::FromStr;

/// The text of an id was not a decimal number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a valid {what}: expected a decimal number")]
#[non_exhaustive]
pub struct ParseIdError {
    /// What was being parsed (`"class of service"`, `"RMID"`, ...).
    pub what: &'static str,
    /// The offending text.
    pub text: String,
    /// The integer parser's error.
    #[source]
    pub source: ParseIntError,
}

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident, $what:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[cfg_attr(feature = "serde", serde(transparent))]
        pub struct $name(u32);

        impl $name {
            /// Wraps a raw number.
            #[must_use]
            pub const fn new(raw: u32) -> Self {
                Self(raw)
            }

            /// The raw number.
            #[must_use]
            pub const fn get(self) -> u32 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl FromStr for $name {
            type Err = ParseIdError;

            fn from_str(s: &str) -> Result<Self, ParseIdError> {
                s.trim().parse::<u32>().map(Self).map_err(|source| ParseIdError {
                    what: $what,
                    text: s.to_owned(),
                    source,
                })
            }
        }

        impl From<u32> for $name {
            fn from(raw: u32) -> Self {
                Self(raw)
            }
        }
    };
}

id_type!(
    /// A class of service (Intel COS, kernel CLOSID, AMD COS): the index of a row of
    /// allocation masks/limits. COS 0 is the default class every CPU starts in.
    ///
    /// Range: `0..num_classes` of the resource (CPUID.(EAX=10H,ECX=ResID):EDX\[15:0\] + 1,
    /// halved while CDP is on).
    ///
    /// # References
    /// Intel SDM Vol. 3B, 18.19 "Intel Resource Director Technology Allocation Features".
    #[doc(alias = "cos")]
    #[doc(alias = "closid")]
    #[doc(alias = "clos")]
    ClassId,
    "class of service"
);

id_type!(
    /// A resource monitoring id: the tag under which the hardware counts LLC occupancy and
    /// memory bandwidth. RMID 0 is the default every CPU starts with.
    ///
    /// Range: `0..num_rmids` (CPUID.(EAX=0FH,ECX=1):ECX + 1).
    ///
    /// # References
    /// Intel SDM Vol. 3B, 18.18 "Intel Resource Director Technology Monitoring Features".
    Rmid,
    "RMID"
);

id_type!(
    /// A logical CPU number as Linux numbers them (`/dev/cpu/N`, `cpuN` in sysfs, pqos's
    /// "core"). Not to be confused with CPUID data.
    LogicalCpu,
    "CPU number"
);

id_type!(
    /// The id of one cache instance, as in `/sys/devices/system/cpu/cpuN/cache/indexK/id` and
    /// in the domain ids of resctrl's `schemata` (`L3:0=...;1=...`).
    ///
    /// Allocation and monitoring domains are cache instances, not sockets: on AMD Zen there is
    /// one L3 per CCX, so a socket holds several L3 domains.
    CacheDomain,
    "cache domain id"
);

id_type!(
    /// A Linux task: a thread id, or a process id (the id of its main thread), as in
    /// resctrl's `tasks` files and `/proc/<pid>/task/<tid>`. 0 is never a valid task here
    /// (resctrl reads `0` as "the writing task"); the kernel's limit is `pid_max`
    /// (at most 4194304).
    #[doc(alias = "pid")]
    #[doc(alias = "tid")]
    TaskId,
    "task id"
);

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_kernel_text_with_newline_and_names_bad_text() {
        assert_eq!("15\n".parse::<ClassId>().unwrap(), ClassId::new(15));
        assert_eq!(" 3".parse::<CacheDomain>().unwrap().get(), 3);
        let e = "COS1".parse::<ClassId>().unwrap_err();
        assert_eq!(e.text, "COS1");
        assert!(e.to_string().contains("class of service"), "{e}");
        assert!("-1".parse::<Rmid>().is_err());
    }

    proptest! {
        #[test]
        fn display_round_trips(n in any::<u32>()) {
            prop_assert_eq!(ClassId::new(n).to_string().parse::<ClassId>().unwrap(), ClassId::new(n));
            prop_assert_eq!(Rmid::new(n).to_string().parse::<Rmid>().unwrap(), Rmid::new(n));
            prop_assert_eq!(LogicalCpu::new(n).to_string().parse::<LogicalCpu>().unwrap(), LogicalCpu::new(n));
            prop_assert_eq!(CacheDomain::new(n).to_string().parse::<CacheDomain>().unwrap(), CacheDomain::new(n));
            prop_assert_eq!(TaskId::new(n).to_string().parse::<TaskId>().unwrap(), TaskId::new(n));
        }
    }
}
