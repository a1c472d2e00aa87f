//! A CPUID dump of any text: parsed, its topology derived, its capabilities detected and
//! a simulated platform built from it, or errors; no panic, no abort.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdt_core::{Capabilities, CpuidDump, Topology};

fuzz_target!(|text: &str| {
    if let Ok(dump) = CpuidDump::parse(text) {
        let _ = Topology::from_cpuid_dump(&dump);
        let _ = Capabilities::detect(&dump).check_plausible();
        let _ = rdt_sim::SimPlatform::from_dump(text);
    }
});
