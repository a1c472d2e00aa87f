//! `include/pqos.h` is what cbindgen makes of this crate (`cbindgen.toml`): run with
//! `RDT_CAPI_BLESS=1` to write it after changing a type or an export.

use std::path::Path;

#[test]
fn checked_in_header_is_the_generated_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8");
    let path = dir.join("include/pqos.h");
    if std::env::var_os("RDT_CAPI_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/pqos.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).expect("include/pqos.h");
    assert!(
        checked_in == generated,
        "include/pqos.h is not what cbindgen generates from the crate: run \
         RDT_CAPI_BLESS=1 cargo test -p rdt-capi --test header, and review the diff"
    );
}
