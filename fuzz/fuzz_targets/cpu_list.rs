//! CPU lists, masks and pqos number lists of any text: no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdt_core::{CpuSet, ListLimits, parse_pqos_list};

fuzz_target!(|text: &str| {
    let _ = text.parse::<CpuSet>();
    let _ = CpuSet::from_mask_str(text);
    let _ = parse_pqos_list(text, &ListLimits::CPUS);
    let _ = parse_pqos_list(text, &ListLimits::TASKS);
});
