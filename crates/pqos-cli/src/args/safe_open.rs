//! Opening the files the user names (`-f`, `-l`) the way pqos's `safe_fopen` /
//! `safe_open` (pqos/common.c) do: a path that is a symbolic link is refused, so a link
//! planted where a root-run `pqos` writes its log cannot redirect the write elsewhere.
//!
//! The open itself uses `O_NOFOLLOW`, so a link swapped in after the `lstat` check fails the
//! open (`ELOOP`) instead of being followed; nothing is created or truncated through it.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A file could not be opened safely.
#[derive(Debug)]
pub enum SafeOpenError {
    /// The path is a symbolic link (pqos: `File %s is a symlink`).
    Symlink(PathBuf),
    /// Opening failed.
    Io(PathBuf, io::Error),
}

impl fmt::Display for SafeOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Symlink(p) => write!(
                f,
                "File {} is a symlink (refused, as pqos does: name the file itself)",
                p.display()
            ),
            Self::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for SafeOpenError {}

fn open_checked(path: &Path, options: &mut OpenOptions) -> Result<File, SafeOpenError> {
    let io = |e| SafeOpenError::Io(path.to_path_buf(), e);
    match path.symlink_metadata() {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(SafeOpenError::Symlink(path.to_path_buf()));
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    options
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                SafeOpenError::Symlink(path.to_path_buf())
            } else {
                io(e)
            }
        })
}

/// Opens `path` for reading (`-f`).
///
/// # Errors
/// [`SafeOpenError::Symlink`] for a symbolic link, [`SafeOpenError::Io`] otherwise.
pub fn open_read(path: &Path) -> Result<File, SafeOpenError> {
    open_checked(path, OpenOptions::new().read(true))
}

/// Opens `path` for appending, creating it with mode 0600 (pqos's `-l`: `O_WRONLY|O_CREAT`,
/// 0600, never truncated).
///
/// # Errors
/// [`SafeOpenError::Symlink`] for a symbolic link, [`SafeOpenError::Io`] otherwise.
pub fn open_append(path: &Path) -> Result<File, SafeOpenError> {
    open_checked(
        path,
        OpenOptions::new().append(true).create(true).mode(0o600),
    )
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn symlinks_are_refused_with_pqos_message_and_target_untouched() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // act
        let errors = [
            open_read(&link).unwrap_err(),
            open_append(&link).unwrap_err(),
        ];
        // assert
        for e in errors {
            assert!(matches!(e, SafeOpenError::Symlink(_)), "{e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("File {} is a symlink", link.display())),
                "{e}"
            );
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn dangling_symlink_is_refused_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("log");
        let target = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(open_append(&link), Err(SafeOpenError::Symlink(_))));
        assert!(!target.exists());
    }

    #[test]
    fn append_creates_with_0600_and_keeps_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        open_append(&path).unwrap().write_all(b"a\n").unwrap();
        open_append(&path).unwrap().write_all(b"b\n").unwrap();
        let mut text = String::new();
        open_read(&path).unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "a\nb\n");
        let mode = path.metadata().unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn missing_file_is_an_io_error_naming_the_path() {
        let e = open_read(Path::new("/nonexistent/pqos.cfg")).unwrap_err();
        assert!(matches!(e, SafeOpenError::Io(..)));
        assert!(e.to_string().starts_with("/nonexistent/pqos.cfg: "), "{e}");
    }
}
