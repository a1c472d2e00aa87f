//! libpqos's soname: programs linked with `-lpqos` record `libpqos.so.7` (intel-cmt-cat v26.03,
//! `lib/Makefile`: `SO_VERSION` 7), so they find ours where they found Intel's.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpqos.so.7");
    println!("cargo:rerun-if-changed=build.rs");
}
