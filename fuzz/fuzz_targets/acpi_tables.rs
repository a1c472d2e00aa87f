//! Bytes of any kind as an ERDT, an MRRM and an IRDT (the first byte chooses which header
//! signature is written over the input, so most inputs get past the signature check): parsed
//! to typed tables or to an error that points inside the bytes; no panic, no abort, no read
//! past the end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdt_mmio::{Erdt, Irdt, Mrrm};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let mut t = rest.to_vec();
    let sig: &[u8; 4] = match which % 3 {
        0 => b"ERDT",
        1 => b"MRRM",
        _ => b"IRDT",
    };
    if t.len() >= 8 {
        t[..4].copy_from_slice(sig);
        if which & 0x80 == 0 {
            // a true length most of the time, so the body is what gets fuzzed
            let len = u32::try_from(t.len()).unwrap_or(u32::MAX);
            t[4..8].copy_from_slice(&len.to_le_bytes());
        }
    }
    let err = match which % 3 {
        0 => Erdt::parse(&t).err(),
        1 => Mrrm::parse(&t).err(),
        _ => Irdt::parse(&t).err(),
    };
    if let Some(e) = err {
        assert!(e.offset <= t.len(), "{e}");
        let _ = e.to_string();
    }
});
