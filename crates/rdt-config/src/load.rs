//! Reading a configuration file that may be hostile: a FIFO, a device, a huge file or bytes
//! that are not text.

use std::path::Path;

use super::error::Location;
use super::node::LineIndex;
use super::{ConfigError, ConfigErrorKind};
use rdt_host::file::{ReadError, kind_of, read_regular};

/// The largest configuration file read, in bytes (1 MiB). A file of named classes is a
/// few kilobytes.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads the whole file as UTF-8 text, refusing anything but a regular file of at most
/// [`MAX_CONFIG_BYTES`].
pub(super) fn read(path: &Path) -> Result<String, ConfigError> {
    let error = |kind, message: String| ConfigError::new(kind, path, Location::default(), message);
    let bytes = match read_regular(path, MAX_CONFIG_BYTES, false) {
        Ok(bytes) => bytes,
        Err(ReadError::Open(e)) => return Err(ConfigError::io(path, "cannot open the file", e)),
        Err(ReadError::Io(e)) => return Err(ConfigError::io(path, "cannot read the file", e)),
        Err(ReadError::NotRegular(ft)) => {
            return Err(error(
                ConfigErrorKind::NotRegularFile,
                format!(
                    "{} is not read: a configuration is a regular file",
                    kind_of(ft)
                ),
            ));
        }
        Err(ReadError::TooLarge { size, .. }) => {
            return Err(error(
                ConfigErrorKind::TooLarge,
                format!(
                    "the file is {size} bytes or more, more than the {MAX_CONFIG_BYTES} bytes \
                     (1 MiB) a configuration may have"
                ),
            ));
        }
        // `ReadError` is non-exhaustive outside rdt-host: a later kind is a read error.
        Err(e) => {
            return Err(ConfigError::io(
                path,
                "cannot read the file",
                std::io::Error::other(e),
            ));
        }
    };
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        // The valid prefix gives the line (the invalid byte cannot be a newline).
        let line = std::str::from_utf8(&bytes[..offset])
            .map_or(1, |prefix| LineIndex::new(prefix).line(offset));
        ConfigError::new(
            ConfigErrorKind::NotUtf8,
            path,
            Location {
                line: Some(line),
                ..Location::default()
            },
            format!(
                "not UTF-8: invalid byte {:#04x} at byte offset {offset}",
                bytes[offset]
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        // arrange
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("cfg.toml");
        // (mkfifo(3), not the program: a fork would hold other tests' run-file locks)
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let start = Instant::now();
        // act
        let e = read(&fifo).unwrap_err();
        // assert
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!(e.kind(), ConfigErrorKind::NotRegularFile);
        assert_eq!(e.file(), fifo);
        assert!(e.to_string().contains("a FIFO is not read"), "{e}");
    }

    #[test]
    fn devices_and_directories_are_refused() {
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::NotRegularFile);
        assert!(e.message().contains("character device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(e.message().contains("a directory"), "{e}");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_naming_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; 2 << 20]).unwrap();
        let start = Instant::now();
        let e = read(&big).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!(e.kind(), ConfigErrorKind::TooLarge);
        assert!(e.to_string().contains("1048576 bytes (1 MiB)"), "{e}");
        assert!(e.to_string().contains("2097152"), "{e}");
    }

    #[test]
    fn a_file_of_exactly_the_limit_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("max.toml");
        std::fs::write(&f, vec![b'\n'; 1 << 20]).unwrap();
        assert_eq!(read(&f).unwrap().len(), 1 << 20);
    }

    #[test]
    fn invalid_utf8_names_the_byte_offset_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("bad.toml");
        std::fs::write(&f, b"[[class]]\nname = \"a\xffb\"\n").unwrap();
        let e = read(&f).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::NotUtf8);
        assert_eq!(e.line(), Some(2));
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: not UTF-8: invalid byte 0xff at byte offset 19",
                f.display()
            )
        );
    }

    #[test]
    fn a_missing_file_is_an_io_error_with_the_os_error_as_source() {
        let e = read(Path::new("/nonexistent/cfg.toml")).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Io);
        assert_eq!(e.to_string(), "/nonexistent/cfg.toml: cannot open the file");
        assert!(std::error::Error::source(&e).is_some());
    }
}
