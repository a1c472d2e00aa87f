//! The numeric helpers of the models: conversions between the counters' integers and the
//! workload model's floating-point rates, and [`Accum`], a counter that integrates rates
//! without losing fractions. Shared by the hardware model ([`crate::SimPlatform`],
//! [`crate::sysregs`], [`crate::uncore`]) and the kernel model ([`crate::resctrl`]), which
//! therefore need not reach into each other for them.

/// A cumulative count kept as whole units plus a fraction, so that integrating small rates
/// over many short intervals loses nothing. `whole` wraps at 2^64.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Accum {
    pub whole: u64,
    pub frac: f64,
}

impl Accum {
    pub fn add(&mut self, units: f64) {
        if !(units.is_finite() && units > 0.0) {
            return;
        }
        let sum = self.frac + units;
        let w = sum.floor();
        self.frac = sum - w;
        self.whole = self.whole.wrapping_add(f64_to_u64_wrapping(w));
    }
}

/// `x mod 2^64` as u64, for a finite non-negative integral `x`.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // reduced below 2^64 first
fn f64_to_u64_wrapping(x: f64) -> u64 {
    const TWO64: f64 = 18_446_744_073_709_551_616.0;
    (x % TWO64) as u64
}

/// `floor(x)` as u64, saturating; 0 for negative or NaN.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // `as` saturates; checked
pub(crate) fn f64_floor_u64(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        x.floor() as u64
    }
}

/// `x` as f64 (exact below 2^53).
#[allow(clippy::cast_precision_loss)] // byte counts far below 2^53
pub(crate) const fn u64_to_f64(x: u64) -> f64 {
    x as f64
}
