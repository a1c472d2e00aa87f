//! Installing the C library under a prefix (`cargo xtask capi --prefix DIR`, and the C tests):
//! `lib/libpqos.so.7` with its links `libpqos.so` (for `-lpqos`), `lib/libpqos.a`,
//! `include/pqos.h` and `lib/pkgconfig/libpqos.pc`.

use std::io;
use std::path::{Path, PathBuf};

/// The soname: intel-cmt-cat v26.03's `libpqos.so.7`.
pub const SONAME: &str = "libpqos.so.7";

/// The header, as checked in (generated from this crate by cbindgen).
pub const HEADER: &str = include_str!("../include/pqos.h");

/// The pkg-config file for `prefix`: `-I<prefix>/include`, `-L<prefix>/lib -lpqos`.
#[must_use]
pub fn pkg_config(prefix: &Path) -> String {
    format!(
        "prefix={}\nexec_prefix=${{prefix}}\nlibdir=${{prefix}}/lib\nincludedir=${{prefix}}/include\n\n\
         Name: libpqos\n\
         Description: Intel RDT / AMD PQoS library, libpqos's API (intel-cmt-cat v26.03) over the rdt-pqos Rust library\n\
         Version: 7.0.0\n\
         Libs: -L${{libdir}} -lpqos\n\
         Cflags: -I${{includedir}}\n",
        prefix.display()
    )
}

/// What [`install`] put where.
#[derive(Debug, Clone)]
pub struct Installed {
    /// `<prefix>/lib/libpqos.so.7`.
    pub library: PathBuf,
    /// `<prefix>/include/pqos.h`.
    pub header: PathBuf,
    /// `<prefix>/lib/pkgconfig/libpqos.pc`.
    pub pkg_config: PathBuf,
}

/// Installs the built `cdylib` (`libpqos.so` of the target directory) and, where it exists
/// beside it, the `staticlib` (`libpqos.a`) under `prefix`, with the header and the
/// pkg-config file. Files there are replaced.
///
/// # Errors
/// A file cannot be copied or written, a link made.
pub fn install(cdylib: &Path, prefix: &Path) -> io::Result<Installed> {
    let lib = prefix.join("lib");
    let include = prefix.join("include");
    let pc_dir = lib.join("pkgconfig");
    for d in [&lib, &include, &pc_dir] {
        std::fs::create_dir_all(d)?;
    }
    let library = lib.join(SONAME);
    replace_with(&library, |p| std::fs::copy(cdylib, p).map(drop))?;
    let link = lib.join("libpqos.so");
    replace_with(&link, |p| std::os::unix::fs::symlink(SONAME, p))?;
    let staticlib = cdylib.with_file_name("libpqos.a");
    if staticlib.is_file() {
        replace_with(&lib.join("libpqos.a"), |p| {
            std::fs::copy(&staticlib, p).map(drop)
        })?;
    }
    let header = include.join("pqos.h");
    replace_with(&header, |p| std::fs::write(p, HEADER))?;
    let pkg = pc_dir.join("libpqos.pc");
    replace_with(&pkg, |p| std::fs::write(p, pkg_config(prefix)))?;
    Ok(Installed {
        library,
        header,
        pkg_config: pkg,
    })
}

/// Makes `path` anew with `make` (a file or link of an earlier install removed first).
fn replace_with(path: &Path, make: impl FnOnce(&Path) -> io::Result<()>) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    make(path)
}
