//! [`ConfigError`] and [`ConfigWarning`]: where in which file, and what is wrong.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// What kind of problem a [`ConfigError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The file could not be opened or read (see the error's `source`).
    Io,
    /// The path is not a regular file (a FIFO, device, directory or socket); it was not read.
    NotRegularFile,
    /// The file is larger than [`MAX_CONFIG_BYTES`](super::MAX_CONFIG_BYTES).
    TooLarge,
    /// The file is not UTF-8.
    NotUtf8,
    /// TOML or JSON syntax.
    Syntax,
    /// The document is well-formed but breaks a rule of the configuration: an unknown key, a
    /// wrong type, a value out of range, a duplicate name, a CPU or task in two classes.
    Invalid,
    /// The configuration asks for something this platform does not have or allow
    /// ([`Config::check`](super::Config::check)).
    Platform,
    /// The cache sizes cannot be placed ([`place`](super::place)) in a domain.
    Placement,
}

/// Where a problem is: the class (by name, or by position when it has no usable name) and
/// the key within it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub(super) struct Location {
    pub line: Option<usize>,
    pub class_name: Option<String>,
    pub class_index: Option<usize>,
    pub key: Option<String>,
}

/// `file:line: class "name": key: ` (the parts that are known).
fn prefix(file: &Path, at: &Location) -> String {
    let mut out = file.display().to_string();
    if let Some(line) = at.line {
        out.push_str(&format!(":{line}"));
    }
    out.push_str(": ");
    if let Some(name) = &at.class_name {
        out.push_str(&format!("class {name:?}: "));
    } else if let Some(index) = at.class_index {
        out.push_str(&format!("class #{}: ", index + 1));
    }
    if let Some(key) = &at.key {
        // Keys are the file's text: shown escaped, as names are.
        out.push_str(&format!("{}: ", rdt_core::Shown(key)));
    }
    out
}

/// A configuration file that cannot be read, parsed or applied to this platform.
///
/// Displays on one line as `file:line: class "name": key: message`, for example
/// `cfg.toml:4: class "pipeline": l3.ways: 30 ways, but the L3 CBM has 20`. Parts that do not
/// apply are left out (an I/O error has no line; an unknown top-level key has no class).
/// The message names the offending value and the rule it broke. For [`ConfigErrorKind::Io`]
/// the operating system's error is the [`source`](std::error::Error::source), not part of
/// the message.
///
/// The parts are read with the accessors ([`ConfigError::file`], [`ConfigError::line`],
/// [`ConfigError::key`], ...); the error is two words wide, so `Result<_, ConfigError>`
/// stays small.
#[derive(Debug, thiserror::Error)]
#[error("{}{}", prefix(&details.file, &details.at), details.message)]
pub struct ConfigError {
    details: Box<Details>,
    /// The I/O error, for [`ConfigErrorKind::Io`].
    source: Option<io::Error>,
}

#[derive(Debug)]
struct Details {
    kind: ConfigErrorKind,
    file: PathBuf,
    at: Location,
    message: String,
}

impl ConfigError {
    pub(super) fn new(
        kind: ConfigErrorKind,
        file: impl Into<PathBuf>,
        at: Location,
        message: impl Into<String>,
    ) -> Self {
        Self {
            details: Box::new(Details {
                kind,
                file: file.into(),
                at,
                message: tidy(&message.into()),
            }),
            source: None,
        }
    }

    pub(super) fn set_kind(&mut self, kind: ConfigErrorKind) {
        self.details.kind = kind;
    }

    pub(super) fn io(file: impl Into<PathBuf>, message: &str, source: io::Error) -> Self {
        let mut e = Self::new(ConfigErrorKind::Io, file, Location::default(), message);
        e.source = Some(source);
        e
    }

    /// What kind of problem this is.
    #[must_use]
    pub fn kind(&self) -> ConfigErrorKind {
        self.details.kind
    }

    /// The configuration file, as given.
    #[must_use]
    pub fn file(&self) -> &Path {
        &self.details.file
    }

    /// The 1-based line, when the problem has a place in the text. For JSON the line of a
    /// key is the line where its value starts.
    #[must_use]
    pub fn line(&self) -> Option<usize> {
        self.details.at.line
    }

    /// The name of the class the problem is in, when it has a valid one.
    #[must_use]
    pub fn class_name(&self) -> Option<&str> {
        self.details.at.class_name.as_deref()
    }

    /// The 0-based position of that class in the file (displayed 1-based, `class #2`, when
    /// the class has no valid name).
    #[must_use]
    pub fn class_index(&self) -> Option<usize> {
        self.details.at.class_index
    }

    /// The dotted key within the class (`l3.ways`, `l3.domains.1.mask`, `tasks[0]`), or the
    /// top-level key.
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        self.details.at.key.as_deref()
    }

    /// What is wrong, without the location.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.details.message
    }
}

/// Something [`Config::check`](super::Config::check) accepts but a user should know: a
/// class nothing runs in, an MBA percentage the hardware rounds, a MiB/s limit the
/// capabilities cannot confirm. Displays like [`ConfigError`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigWarning {
    /// The configuration file.
    pub file: PathBuf,
    /// 1-based line number.
    pub line: Option<usize>,
    /// The class.
    pub class_name: Option<String>,
    /// The dotted key within the class.
    pub key: Option<String>,
    /// What to know.
    pub message: String,
}

/// The message of the warning that a class has no CPUs, tasks or processes, so that nothing
/// will run in it: true for `pqos --apply`, not for a program that puts processes in the
/// class itself (the NRI plugin's containers), which leaves out the warnings that end with
/// it ([`ConfigPlan::warnings`](crate::ConfigPlan::warnings)).
pub const NOTHING_RUNS: &str = "the class has no cpus, tasks or processes: nothing will run in it";

impl ConfigWarning {
    pub(super) fn new(file: impl Into<PathBuf>, at: Location, message: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            line: at.line,
            class_name: at.class_name,
            key: at.key,
            message: tidy(&message.into()),
        }
    }

    fn location(&self) -> Location {
        Location {
            line: self.line,
            class_name: self.class_name.clone(),
            class_index: None,
            key: self.key.clone(),
        }
    }
}

/// The longest message kept, in characters: a hostile file must not make a megabyte-long
/// error line (a CPU list is quoted whole by its parser).
const MAX_MESSAGE_CHARS: usize = 400;

/// Makes a message one line (the lines of a parser's message joined with `; `) of at most
/// [`MAX_MESSAGE_CHARS`].
fn tidy(message: &str) -> String {
    let mut out = if message.contains(['\n', '\r']) {
        message
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    } else {
        message.to_owned()
    };
    if let Some((cut, _)) = out.char_indices().nth(MAX_MESSAGE_CHARS) {
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}",
            prefix(&self.file, &self.location()),
            self.message
        )
    }
}
