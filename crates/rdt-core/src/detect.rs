//! CPUID decoding into [`Capabilities`]. (Being written: see issue "pqos runs end to end".)

use crate::cpuid::CpuidSource;
use crate::{Capabilities, Feature, PmuCaps, Vendor};

pub(crate) fn detect(_src: &dyn CpuidSource) -> Capabilities {
    Capabilities {
        vendor: Vendor::Other(String::new()),
        brand: None,
        signature: None,
        monitoring: Feature::Unsupported,
        l3_cat: Feature::Unsupported,
        l2_cat: Feature::Unsupported,
        mba: Feature::Unsupported,
        smba: Feature::Unsupported,
        l3_cache: None,
        l2_cache: None,
        pmu: PmuCaps::default(),
    }
}
