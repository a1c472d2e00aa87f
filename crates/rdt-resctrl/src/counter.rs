//! One open `mon_data/mon_L3_XX/<event>` file, read with one positioned read per poll: the
//! counter reader of both the backend's monitoring groups ([`crate::backend`]) and the
//! read-only telemetry of every group ([`crate::telemetry`]).

use std::path::PathBuf;

use rdt_core::RmidEvent;

use crate::ResctrlError;
use crate::fs::Fs;
use crate::io::PositionedRead;

/// One open `mon_data/mon_L3_XX/<event>` file of one group directory.
#[derive(Debug)]
pub(crate) struct Counter {
    pub(crate) path: PathBuf,
    file: Box<dyn PositionedRead>,
    /// What the owner keys the reading by: the accumulator context (one per directory and L3
    /// domain) of a monitoring group, the series index of the telemetry.
    pub(crate) context: usize,
    pub(crate) event: RmidEvent,
    /// Reads that failed in a row ([`Counter::read_or_skip`]).
    failures: u32,
    /// `Unassigned` is [`ResctrlError::Unassigned`], not a blank: the counter belongs to a
    /// group this backend made and gave hardware counters ([`Counter::strict`]).
    strict: bool,
}

/// Failed reads in a row a monitoring group's counter tolerates ([`Counter::read_or_skip`]):
/// one EIO (an IA32_QM_CTR read that raced a CPU going offline, a kernfs hiccup) must not
/// end a run of hours, but a file that keeps failing (its group removed under us) must end
/// it, naming the file.
pub(crate) const MAX_FAILED_READS: u32 = 3;

impl Counter {
    /// Opens `rel` under `fs`'s root; it stays open until the counter is dropped.
    pub(crate) fn open(
        fs: &Fs,
        rel: &str,
        context: usize,
        event: RmidEvent,
    ) -> Result<Self, ResctrlError> {
        Ok(Self {
            path: fs.path(rel),
            file: fs.open_reader(rel)?,
            context,
            event,
            failures: 0,
            strict: false,
        })
    }

    /// Makes an `Unassigned` read an error ([`ResctrlError::Unassigned`]).
    pub(crate) const fn strict(mut self) -> Self {
        self.strict = true;
        self
    }

    /// One `pread(2)` at offset 0: the kernel regenerates the text for every read at 0.
    /// `Unavailable`, `Error` and `Unassigned` (spec §8.1) are `None`, except `Unassigned`
    /// on a [`Counter::strict`] counter.
    pub(crate) fn read(&self) -> Result<Option<u64>, ResctrlError> {
        let mut buf = [0u8; 64];
        let n = self
            .file
            .read_at(&mut buf, 0)
            .map_err(|e| ResctrlError::io("read", &self.path, e))?;
        parse_reading(&buf[..n], self.strict).map_err(|bad| match bad {
            BadReading::Unassigned => ResctrlError::Unassigned {
                path: self.path.clone(),
            },
            BadReading::Text(text) => ResctrlError::Parse {
                path: self.path.clone(),
                text,
                expected: "a byte count, Unavailable, Error or Unassigned".into(),
            },
        })
    }

    /// [`Counter::read`], except that a read failing with an I/O error gives no value this
    /// time (`None`, the same as `Unavailable`: the accumulator leaves the cell blank for
    /// this sample and loses nothing of the cumulative counts) until [`MAX_FAILED_READS`]
    /// reads in a row have failed; then the last one's error, which names the file. Text
    /// that is not a count fails at once.
    ///
    /// # Errors
    /// The read's error, the [`MAX_FAILED_READS`]th time in a row.
    pub(crate) fn read_or_skip(&mut self) -> Result<Option<u64>, ResctrlError> {
        match self.read() {
            Ok(v) => {
                self.failures = 0;
                Ok(v)
            }
            // Text that is not a count is no hiccup: the file is not what it should be.
            Err(e @ ResctrlError::Io { .. }) => {
                self.failures += 1;
                if self.failures >= MAX_FAILED_READS {
                    Err(e)
                } else {
                    Ok(None)
                }
            }
            Err(e) => Err(e),
        }
    }
}

/// Why a counter's text is no reading ([`parse_reading`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadReading {
    /// `Unassigned` on a strict counter.
    Unassigned,
    /// Text that is neither a count nor a status word (trimmed; lossy UTF-8).
    Text(String),
}

/// The text of one read of a `mon_data` counter file (spec §8.1): a byte count is
/// `Some`; `Unavailable`, `Error` and `Unassigned` are `None`, except `Unassigned` when
/// `strict`.
///
/// # Errors
/// [`BadReading`]: `Unassigned` when `strict`, any other text.
pub(crate) fn parse_reading(bytes: &[u8], strict: bool) -> Result<Option<u64>, BadReading> {
    let text = std::str::from_utf8(bytes).unwrap_or("").trim();
    if let Ok(v) = text.parse::<u64>() {
        return Ok(Some(v));
    }
    match text {
        "Unassigned" if strict => Err(BadReading::Unassigned),
        "Unavailable" | "Error" | "Unassigned" => Ok(None),
        _ => Err(BadReading::Text(text.to_owned())),
    }
}
