//! A `-f` configuration file of any text: options or an error naming a line, no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pqos_cli::args::config_file::options_of;

fuzz_target!(|text: &str| {
    if let Err(e) = options_of(text, "f.cfg") {
        assert!(e.contains("f.cfg line "), "{e}");
    }
});
