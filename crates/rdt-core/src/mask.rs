//! Cache capacity bitmasks.

use std::fmt;
use std::str::FromStr;

/// A capacity bitmask could not be parsed or is not a valid mask in itself.
///
/// Platform limits (CBM width, contiguity, minimum bits) are checked by
/// [`crate::Capabilities::check_mask`], not here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MaskError {
    /// The text is not a hexadecimal or decimal number.
    #[error("cache bitmask `{0}` is not a number (expected hexadecimal such as 0xffe00)")]
    NotHex(String),
    /// A zero mask selects no cache way; the hardware rejects it.
    #[error("cache bitmask `{0}` is zero: a class needs at least one cache way")]
    Zero(String),
}

/// Cache capacity bitmask (CBM): bit *n* set means the class may fill cache way *n*.
///
/// Displays as in resctrl `schemata` (`7ff`); `{:#x}` gives pqos's `0x7ff`. Parsing accepts
/// both, with or without `0x`. A zero mask cannot be represented.
///
/// # Examples
/// ```
/// use rdt_core::CacheBitmask;
/// let m: CacheBitmask = "0xffe00".parse().unwrap();
/// assert_eq!(m.to_string(), "ffe00");
/// assert_eq!(format!("{m:#x}"), "0xffe00");
/// assert_eq!(m.ways(), 11);
/// ```
///
/// # References
/// Intel SDM Vol. 3B, 18.19.4 "Cache Allocation Technology"; kernel
/// `Documentation/arch/x86/resctrl.rst`, "Cache resource allocation".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "u64", into = "u64"))]
pub struct CacheBitmask(u64);

impl CacheBitmask {
    /// Wraps raw bits.
    ///
    /// # Errors
    /// [`MaskError::Zero`] for 0.
    pub fn new(bits: u64) -> Result<Self, MaskError> {
        if bits == 0 {
            Err(MaskError::Zero("0".into()))
        } else {
            Ok(Self(bits))
        }
    }

    /// A mask of the low `ways` bits (the "all ways" mask of a CBM of that length).
    ///
    /// # Panics
    /// If `ways` is 0 or greater than 64.
    #[must_use]
    pub const fn low_bits(ways: u32) -> Self {
        assert!(ways > 0 && ways <= 64, "a CBM has 1..=64 bits");
        Self(u64::MAX >> (64 - ways))
    }

    /// The raw bits.
    #[must_use]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Number of cache ways selected (set bits).
    #[must_use]
    pub const fn ways(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set bits form one run (`0x0ff0` yes, `0x0f0f` no).
    #[must_use]
    pub const fn is_contiguous(self) -> bool {
        let shifted = self.0 >> self.0.trailing_zeros();
        shifted & (shifted.wrapping_add(1)) == 0
    }
}

impl TryFrom<u64> for CacheBitmask {
    type Error = MaskError;

    fn try_from(bits: u64) -> Result<Self, MaskError> {
        Self::new(bits)
    }
}

impl From<CacheBitmask> for u64 {
    fn from(mask: CacheBitmask) -> Self {
        mask.bits()
    }
}

impl fmt::Display for CacheBitmask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}", self.0)
    }
}

impl fmt::LowerHex for CacheBitmask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

impl FromStr for CacheBitmask {
    type Err = MaskError;

    /// Parses hexadecimal with or without `0x` (the kernel's and pqos's forms).
    fn from_str(s: &str) -> Result<Self, MaskError> {
        let t = s.trim();
        let hex = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        let bits = u64::from_str_radix(hex, 16).map_err(|_| MaskError::NotHex(s.into()))?;
        if bits == 0 {
            return Err(MaskError::Zero(s.into()));
        }
        Ok(Self(bits))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_kernel_and_pqos_forms() {
        assert_eq!("7ff".parse::<CacheBitmask>().unwrap().bits(), 0x7ff);
        assert_eq!("0x7ff".parse::<CacheBitmask>().unwrap().bits(), 0x7ff);
        assert_eq!(" 000ff\n".parse::<CacheBitmask>().unwrap().bits(), 0xff);
    }

    #[test]
    fn rejects_zero_and_garbage_naming_the_token() {
        assert_eq!(
            "0x0".parse::<CacheBitmask>(),
            Err(MaskError::Zero("0x0".into()))
        );
        let e = "0xzz".parse::<CacheBitmask>().unwrap_err();
        assert!(e.to_string().contains("`0xzz`"), "{e}");
    }

    #[test]
    fn contiguity() {
        assert!(CacheBitmask(0xffe00).is_contiguous());
        assert!(CacheBitmask(0x1).is_contiguous());
        assert!(CacheBitmask(u64::MAX).is_contiguous());
        assert!(!CacheBitmask(0xf0f).is_contiguous());
        assert!(!CacheBitmask(0x5).is_contiguous());
    }

    proptest! {
        #[test]
        fn display_round_trips(bits in 1u64..) {
            let m = CacheBitmask(bits);
            prop_assert_eq!(m.to_string().parse::<CacheBitmask>().unwrap(), m);
            prop_assert_eq!(format!("{m:#x}").parse::<CacheBitmask>().unwrap(), m);
        }
    }
}
