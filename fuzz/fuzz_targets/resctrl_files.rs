//! resctrl text: `schemata`, `/proc/mounts`, mount options, and `info/` files (the input
//! split at NUL bytes, one piece per file), no panic; parsed capabilities are usable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdt_resctrl::{InfoFiles, ResctrlInfo, Schemata};

const FILES: &[&str] = &[
    "L3/num_closids",
    "L3/cbm_mask",
    "L3/min_cbm_bits",
    "L3/shareable_bits",
    "L3/sparse_masks",
    "L2CODE/num_closids",
    "L2CODE/cbm_mask",
    "L2DATA/num_closids",
    "L2DATA/cbm_mask",
    "MB/num_closids",
    "MB/min_bandwidth",
    "MB/bandwidth_gran",
    "MB/delay_linear",
    "MB/thread_throttle_mode",
    "L3_MON/num_rmids",
    "L3_MON/mon_features",
    "L3_MON/max_threshold_occupancy",
];

fuzz_target!(|text: &str| {
    let schemata = text.parse::<Schemata>().unwrap_or_default();
    let _ = rdt_resctrl::parse_proc_mounts(text, std::path::Path::new("/sys/fs/resctrl"));
    let _ = text.parse::<rdt_core::MountOptions>();
    let files: InfoFiles = FILES
        .iter()
        .zip(text.split('\0'))
        .map(|(f, t)| ((*f).to_owned(), t.to_owned()))
        .collect();
    if let Ok(info) = ResctrlInfo::parse(&files) {
        let caps = info.capabilities(None, &schemata);
        assert!(caps.check_plausible().is_ok());
        if let Some(cat) = caps.l3_cat.get() {
            let _ = cat.full_mask();
        }
    }
});
