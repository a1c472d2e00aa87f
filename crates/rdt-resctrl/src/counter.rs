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
}

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
        })
    }

    /// One `pread(2)` at offset 0: the kernel regenerates the text for every read at 0.
    /// `Unavailable`, `Error` and `Unassigned` (spec §8.1) are `None`.
    pub(crate) fn read(&self) -> Result<Option<u64>, ResctrlError> {
        let mut buf = [0u8; 64];
        let n = self
            .file
            .read_at(&mut buf, 0)
            .map_err(|e| ResctrlError::io("read", &self.path, e))?;
        let text = std::str::from_utf8(&buf[..n]).unwrap_or("").trim();
        if let Ok(v) = text.parse::<u64>() {
            return Ok(Some(v));
        }
        match text {
            "Unavailable" | "Error" | "Unassigned" => Ok(None),
            _ => Err(ResctrlError::Parse {
                path: self.path.clone(),
                text: text.to_owned(),
                expected: "a byte count, Unavailable, Error or Unassigned".into(),
            }),
        }
    }
}
