//! Monitoring arithmetic: counter deltas with wrap-around, and unit conversions.
//!
//! pqos's "KB" and "MB/s" are binary units (`pqos/monitor_utils.c`: `bytes / 1024.0`,
//! `bytes / (1024.0 * 1024.0)`); they are named KiB and MiB here.

use std::time::Duration;

/// The increase of a counter `width` bits wide from `old` to `new`, assuming it wrapped at
/// most once (`2^width` is the wrap point; IA32_QM_CTR data is 24 + CPUID.(0FH,1):EAX\[7:0\]
/// bits wide).
///
/// Both values are masked to `width` bits first. `width` of 64 or more means a 64-bit counter.
///
/// # Examples
/// ```
/// use rdt_core::monitor::counter_delta;
/// assert_eq!(counter_delta(10, 25, 24), 15);
/// assert_eq!(counter_delta(0xff_fff0, 0x10, 24), 0x20); // wrapped at 2^24
/// ```
#[must_use]
pub const fn counter_delta(old: u64, new: u64, width: u32) -> u64 {
    let mask = if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    (new & mask).wrapping_sub(old & mask) & mask
}

/// Bytes to KiB (pqos's `LLC[KB]`).
#[must_use]
#[allow(clippy::cast_precision_loss)] // occupancy fits in f64 exactly below 2^53 bytes
pub fn bytes_to_kib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0
}

/// A memory bandwidth in MiB/s (pqos's `MB/s` columns, which are binary).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
pub struct MibPerSec(pub f64);

impl MibPerSec {
    /// The rate of `bytes` moved over `interval`; 0 for a zero interval.
    ///
    /// pqos computes this over the nominal `-i` interval; callers here pass the measured one,
    /// so a late timer tick does not inflate the rate.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn from_bytes(bytes: u64, interval: Duration) -> Self {
        let secs = interval.as_secs_f64();
        if secs <= 0.0 {
            return Self(0.0);
        }
        Self(bytes as f64 / (1024.0 * 1024.0) / secs)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn delta_handles_one_wrap_at_width() {
        assert_eq!(counter_delta(5, 5, 24), 0);
        assert_eq!(counter_delta((1 << 24) - 1, 0, 24), 1);
        assert_eq!(counter_delta(u64::MAX, 1, 64), 2);
        assert_eq!(counter_delta((1 << 44) - 2, 3, 44), 5);
    }

    #[test]
    fn mib_per_sec_uses_binary_megabytes() {
        let r = MibPerSec::from_bytes(3 * 1024 * 1024, Duration::from_millis(500));
        assert!((r.0 - 6.0).abs() < 1e-9);
        assert!((MibPerSec::from_bytes(1, Duration::ZERO).0).abs() < f64::EPSILON);
    }

    proptest! {
        #[test]
        fn delta_inverts_addition_modulo_width(old in any::<u64>(), inc in any::<u64>(), width in 24u32..=64) {
            let mask = if width == 64 { u64::MAX } else { (1 << width) - 1 };
            let inc = inc & mask;
            let new = (old & mask).wrapping_add(inc) & mask;
            prop_assert_eq!(counter_delta(old, new, width), inc);
        }
    }
}
