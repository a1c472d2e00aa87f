//! A simulator scenario file of any text: parsed and installed, or an error; no panic.
#![no_main]

use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use rdt_sim::{Scenario, SimPlatform};

fn platform() -> &'static Mutex<SimPlatform> {
    static P: OnceLock<Mutex<SimPlatform>> = OnceLock::new();
    P.get_or_init(|| Mutex::new(SimPlatform::builtin("broadwell-ep").expect("built-in model")))
}

fuzz_target!(|text: &str| {
    if let Ok(s) = text.parse::<Scenario>() {
        let mut p = platform()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = p.set_scenario(&s);
    }
});
