//! Where log messages go: pqos's `-l FILE` (`--log-file`) and `-v`/`-V` verbosity.
//!
//! Messages are `log` crate records from this program and the `rdt*` libraries, written as
//! pqos's library writes them: `WARN: ...`, `INFO: ...` (`-v`), `DEBUG: ...` (`-V`), one per
//! line, to stdout as pqos's library does (its default log file descriptor is
//! `STDOUT_FILENO`), after the `NOTE:` banner and before the report; to stderr under `-u json`,
//! which keeps stdout pure JSON; or appended to the `-l` file instead (opened like pqos:
//! created 0600, never truncated, a symbolic link refused). Errors that end the program are
//! not log messages: they stay on stderr even with `-l`.
//!
//! Other crates' records (fuser, ...) are left out.

use std::io::{BufWriter, Stdout, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex};

use log::{Level, LevelFilter, Log, Metadata, Record};

use super::safe_open::{SafeOpenError, open_append};

/// The level shown for pqos's verbosity: warnings always, `-v` info, `-V` debug.
#[must_use]
pub const fn level_for(verbosity: u8) -> LevelFilter {
    match verbosity {
        0 => LevelFilter::Warn,
        1 => LevelFilter::Info,
        _ => LevelFilter::Trace,
    }
}

/// The process's stdout as the report and the log lines share it: one 64 KiB buffer behind
/// a lock, so that log lines and report lines come out in the order they were written, and a
/// report with its log lines is one write(2) when it fits. [`Write::flush`] writes the
/// buffer out; after [`SharedStdout::unbuffer`] (a run that prints as it goes, monitoring)
/// every write goes out at once.
#[derive(Clone, Copy, Debug, Default)]
pub struct SharedStdout;

static SHARED_STDOUT: LazyLock<Mutex<BufWriter<Stdout>>> =
    LazyLock::new(|| Mutex::new(BufWriter::with_capacity(1 << 16, std::io::stdout())));

static UNBUFFERED: AtomicBool = AtomicBool::new(false);

impl SharedStdout {
    /// From now on every write is written out at once (what is buffered first).
    ///
    /// # Errors
    /// Writing out the buffer fails.
    pub fn unbuffer() -> std::io::Result<()> {
        UNBUFFERED.store(true, Ordering::Relaxed);
        Self.flush()
    }

    fn lock() -> std::sync::MutexGuard<'static, BufWriter<Stdout>> {
        // A panic while writing leaves bytes, not a broken invariant: keep going.
        SHARED_STDOUT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Write for SharedStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut out = Self::lock();
        let n = out.write(buf).map_err(stdout_error)?;
        if UNBUFFERED.load(Ordering::Relaxed) {
            out.flush().map_err(stdout_error)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Self::lock().flush().map_err(stdout_error)
    }
}

/// A failed write to stdout, saying so (`pqos -s > /dev/full`: "writing to stdout: No space
/// left on device"), of the same kind (a closed pipe stays
/// [`std::io::ErrorKind::BrokenPipe`]).
#[must_use]
pub fn stdout_error(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), StdoutWrite(e))
}

/// [`stdout_error`]'s error: the write error, with stdout named.
#[derive(Debug, thiserror::Error)]
#[error("writing to stdout: {0}")]
struct StdoutWrite(std::io::Error);

/// A log sink: records of the `pqos`/`rdt*` crates at or below a level, formatted as pqos
/// does, written to one writer.
pub struct Sink {
    level: LevelFilter,
    out: Mutex<Box<dyn Write + Send>>,
    /// Flush after each line (a file, stderr); not on [`SharedStdout`], flushed with the
    /// report.
    flush_lines: bool,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

impl Sink {
    /// A sink writing to `out` at `level`.
    #[must_use]
    pub fn new(level: LevelFilter, out: Box<dyn Write + Send>) -> Self {
        Self {
            level,
            out: Mutex::new(out),
            flush_lines: true,
        }
    }

    /// The sink `-l`/`-v`/`-V` ask for: the file (opened safely), else stdout
    /// ([`SharedStdout`], with the report), or stderr when stdout carries JSON (`json`).
    ///
    /// # Errors
    /// The log file is a symbolic link or cannot be opened.
    pub fn for_args(
        log_file: Option<&Path>,
        verbosity: u8,
        json: bool,
    ) -> Result<Self, SafeOpenError> {
        let out: Box<dyn Write + Send> = match log_file {
            Some(path) => Box::new(open_append(path)?),
            None if json => Box::new(std::io::stderr()),
            None => {
                return Ok(Self {
                    flush_lines: false,
                    ..Self::new(level_for(verbosity), Box::new(SharedStdout))
                });
            }
        };
        Ok(Self::new(level_for(verbosity), out))
    }

    /// Installs this sink as the process's logger; a second installation is ignored (the
    /// first one stays).
    pub fn install(self) {
        let level = self.level;
        if log::set_boxed_logger(Box::new(self)).is_ok() {
            log::set_max_level(level);
        }
    }
}

/// pqos's prefix for a level (pqos lib/log.h: `ERROR:`, `WARN:`, `INFO:`, `DEBUG:`).
const fn prefix(level: Level) -> &'static str {
    match level {
        Level::Error => "ERROR",
        Level::Warn => "WARN",
        Level::Info => "INFO",
        Level::Debug | Level::Trace => "DEBUG",
    }
}

impl Log for Sink {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        let target = metadata.target();
        metadata.level() <= self.level && (target.starts_with("pqos") || target.starts_with("rdt"))
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        if let Ok(mut out) = self.out.lock() {
            // A log line that cannot be written is dropped: logging never fails the run.
            let _ = writeln!(out, "{}: {}", prefix(record.level()), record.args());
            if self.flush_lines {
                let _ = out.flush();
            }
        }
    }

    fn flush(&self) {
        if let Ok(mut out) = self.out.lock() {
            let _ = out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn emit(sink: &Sink, level: Level, target: &str, msg: &str) {
        sink.log(
            &Record::builder()
                .level(level)
                .target(target)
                .args(format_args!("{msg}"))
                .build(),
        );
    }

    #[test]
    fn verbosity_selects_levels_and_lines_carry_pqos_prefixes() {
        for (verbosity, want) in [
            (0, "WARN: w\n"),
            (1, "WARN: w\nINFO: i\n"),
            (2, "WARN: w\nINFO: i\nDEBUG: d\n"),
        ] {
            let buf = Shared::default();
            let sink = Sink::new(level_for(verbosity), Box::new(buf.clone()));
            emit(&sink, Level::Warn, "pqos::x", "w");
            emit(&sink, Level::Info, "rdt_resctrl", "i");
            emit(&sink, Level::Debug, "rdt_pqos::y", "d");
            emit(&sink, Level::Warn, "fuser", "not ours");
            assert_eq!(
                String::from_utf8(buf.0.lock().unwrap().clone()).unwrap(),
                want
            );
        }
    }

    #[test]
    fn log_file_is_appended_and_symlink_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pqos.log");
        std::fs::write(&path, "old\n").unwrap();
        let sink = Sink::for_args(Some(&path), 1, false).unwrap();
        emit(&sink, Level::Info, "pqos", "hello");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "old\nINFO: hello\n"
        );
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let e = Sink::for_args(Some(&link), 0, false).unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
    }
}
