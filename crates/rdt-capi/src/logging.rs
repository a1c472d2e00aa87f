//! libpqos's log: `pqos_config.callback_log` (with `context_log`) or `fd_log`, filtered by
//! `verbose` (-1 silent, 0 warnings and errors, 1 with info, 2 with debug), each message a
//! line `LEVEL: text\n` as libpqos writes them (lib/log.c). The library's own records (the
//! interface chosen, what opening found) reach it through the `log` crate.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, Once};

use crate::types::pqos_log_callback;

/// Where messages go while the library is initialised.
#[derive(Clone, Copy)]
struct Sink {
    fd: c_int,
    callback: pqos_log_callback,
    context: *mut c_void,
}

// SAFETY: `context` is the application's pointer, handed back to its callback only; libpqos
// calls the callback from whichever thread logs, as this does.
unsafe impl Send for Sink {}

static SINK: Mutex<Option<Sink>> = Mutex::new(None);
static INSTALL: Once = Once::new();

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Error => "ERROR",
            log::Level::Warn => "WARN",
            log::Level::Info => "INFO",
            log::Level::Debug | log::Level::Trace => "DEBUG",
        };
        emit(&format!("{level}: {}\n", record.args()));
    }

    fn flush(&self) {}
}

/// Hands `line` to the sink, if any.
fn emit(line: &str) {
    let Some(sink) = *SINK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    else {
        return;
    };
    // A C string: NUL bytes of a message become spaces.
    let mut bytes: Vec<u8> = line
        .bytes()
        .map(|b| if b == 0 { b' ' } else { b })
        .collect();
    let len = bytes.len();
    bytes.push(0);
    if let Some(callback) = sink.callback {
        // SAFETY: the application's callback with its context, a NUL-terminated message and
        // its length without the NUL (lib/log.c); `bytes` outlives the call.
        unsafe { callback(sink.context, len, bytes.as_ptr().cast()) };
    } else if sink.fd >= 0 {
        // SAFETY: writing `len` initialised bytes from `bytes` to the application's
        // descriptor; a failed or short write loses the message, as in libpqos.
        let _ = unsafe { libc::write(sink.fd, bytes.as_ptr().cast(), len) };
    }
}

/// Starts logging to the configuration's destination at its verbosity.
pub(crate) fn start(fd: c_int, callback: pqos_log_callback, context: *mut c_void, verbose: c_int) {
    INSTALL.call_once(|| {
        // Another logger of the program wins; the library's records then go there.
        let _ = log::set_logger(&Logger);
    });
    *SINK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Sink {
        fd,
        callback,
        context,
    });
    log::set_max_level(match verbose {
        ..0 => log::LevelFilter::Off,
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        _ => log::LevelFilter::Debug,
    });
}

/// Stops logging (`pqos_fini`).
pub(crate) fn stop() {
    *SINK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
}
