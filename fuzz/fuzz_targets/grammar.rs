//! Every pqos value grammar (`-e -a -R -r -m -p -t -i`) on any UTF-8 text: no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pqos_cli::grammar::{
    AssocDefs, ClassDefs, EvtCores, EvtPids, Interval, MonResetCfg, MonTime, ResetCfg,
    parse_id_list,
};

fuzz_target!(|text: &str| {
    let _ = text.parse::<ClassDefs>();
    let _ = text.parse::<AssocDefs>();
    let _ = text.parse::<ResetCfg>();
    let _ = text.parse::<MonResetCfg>();
    let _ = text.parse::<EvtCores>();
    let _ = text.parse::<EvtPids>();
    let _ = text.parse::<MonTime>();
    let _ = text.parse::<Interval>();
    let _ = parse_id_list(text);
});
