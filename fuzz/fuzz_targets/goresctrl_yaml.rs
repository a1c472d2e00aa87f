//! goresctrl's RDT configuration of any text: parsed and resolved on a platform with L2,
//! L3 (CDP) and MB, or an error naming a line; no panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rdt_core::CacheDomain;
use rdt_config::goresctrl::{CatLevel, GoresctrlConfig, GoresctrlPlatform, MbLevel};

fuzz_target!(|text: &str| {
    let domains: Vec<CacheDomain> = (0..4).map(CacheDomain::new).collect();
    let level = |cbm_len, cdp| {
        Some(CatLevel {
            cbm_len,
            min_cbm_bits: 2,
            domains: domains.clone(),
            cdp,
        })
    };
    let platform = GoresctrlPlatform {
        l2: level(16, false),
        l3: level(20, true),
        mb: Some(MbLevel {
            domains: domains.clone(),
            mbps: false,
            min_bandwidth: 10,
            granularity: 10,
        }),
    };
    match GoresctrlConfig::parse_yaml(text, Path::new("f.yaml")) {
        Ok(c) => {
            if let Err(e) = c.resolve(&platform) {
                assert!(e.line().is_some() && e.key().is_some(), "{e}");
            }
        }
        Err(e) => assert!(e.to_string().starts_with("f.yaml"), "{e}"),
    }
});
