//! The monitoring output formats: pqos v25.04's text (pqos/monitor_text.c), CSV
//! (monitor_csv.c) and XML (monitor_xml.c), and a JSON Lines form of our own.
//!
//! Every format shows the union of the groups' events as its columns, in pqos's order (IPC,
//! LLC misses, LLC references, LLC occupancy, MBL, MBR, MBT, then the uncore PCIe events).
//! In uncore mode (`--mon-uncore`) the group column is the socket (`SOCKET`, `Socket`,
//! `<socket>`, `"socket"`). A cell is blank (text: 12 spaces; CSV: a bare
//! `,`; XML: `<x></x>`; JSON: `null`) when its group does not monitor that event or when
//! there is no value this time (no PMU, IA32_QM_CTR Unavailable).

use std::io::{self, Write};
use std::time::Duration;

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use rdt_pqos::MonValues;
use rdt_pqos::UncoreCounts;
use rdt_pqos::monitor::{MibPerSec, bytes_to_kib};
use rdt_pqos::{Interface, MonEvents};
use serde::Serialize;

/// How LLC occupancy is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LlcUnit {
    /// KiB (pqos's `LLC[KB]`, bytes / 1024).
    KiB,
    /// `-P`: percent of the L3 size, in whole percent as pqos computes it
    /// (`bytes * 100 / l3_bytes` in integers, monitor_utils.c).
    Percent {
        /// One L3 cache's size in bytes (pqos `cpu->l3.total_size`).
        l3_bytes: u64,
    },
}

/// What the columns are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Columns {
    /// The union of the groups' events.
    pub events: MonEvents,
    /// LLC in KiB or percent.
    pub llc: LlcUnit,
    /// PID mode (`-p`): the group column is `PID` and a `CORE` column follows.
    pub pid_mode: bool,
    /// Uncore mode (`--mon-uncore`): the group column is the socket.
    pub socket_mode: bool,
    /// Channel mode (`--mon-channel`): the group column is the I/O RDT channel, 16 wide
    /// (pqos v26.03 monitor_text.c `"         CHANNEL"`, rows `%16.16s`).
    pub channel_mode: bool,
    /// MMIO interface: the memory regions whose local bandwidth replaces `MBL[MB/s]`, one
    /// column each (pqos v26.03 `monitor_text_region_header`); empty elsewhere.
    pub regions: RegionColumns,
}

/// The most memory regions shown side by side.
pub const MAX_REGION_COLUMNS: usize = 8;

/// The memory regions of the MMIO interface's bandwidth columns, in display order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionColumns {
    len: u8,
    ids: [u8; MAX_REGION_COLUMNS],
}

impl RegionColumns {
    /// The regions `ids`, in that order; `None` for more than [`MAX_REGION_COLUMNS`].
    #[must_use]
    pub fn new(ids: &[u8]) -> Option<Self> {
        if ids.len() > MAX_REGION_COLUMNS {
            return None;
        }
        let mut out = Self::default();
        out.ids[..ids.len()].copy_from_slice(ids);
        out.len = u8::try_from(ids.len()).ok()?;
        Some(out)
    }

    /// The regions, in display order.
    #[must_use]
    pub fn ids(&self) -> &[u8] {
        &self.ids[..usize::from(self.len)]
    }

    /// Whether there are none (not the MMIO interface).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The numbers of one row; `None` is a blank cell.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cells {
    /// Instructions per cycle over the interval.
    pub ipc: Option<f64>,
    /// LLC misses over the interval (a count).
    pub llc_misses: Option<u64>,
    /// LLC references over the interval (a count).
    pub llc_references: Option<u64>,
    /// LLC occupancy now, in bytes.
    pub llc_occupancy_bytes: Option<u64>,
    /// Local memory bandwidth, MiB/s.
    pub mbm_local: Option<f64>,
    /// Remote memory bandwidth, MiB/s.
    pub mbm_remote: Option<f64>,
    /// Total memory bandwidth, MiB/s.
    pub mbm_total: Option<f64>,
    /// The uncore PCIe LLC counts over the interval (uncore mode).
    pub uncore: UncoreCounts,
    /// MMIO interface: local memory bandwidth per shown region ([`RegionColumns`]), MiB/s.
    pub regions: [Option<f64>; MAX_REGION_COLUMNS],
}

impl Cells {
    /// The cells of a group monitoring `events` with `values` polled `interval` after the
    /// previous poll, or for the first poll after the start (bandwidth = bytes over the
    /// measured interval; 0 for a zero interval).
    /// The first sample of a run is [`Cells::pqos_first_sample`] of these.
    #[must_use]
    pub fn new(values: &MonValues, events: MonEvents, interval: Duration) -> Self {
        let on = |e: MonEvents| events.contains(e);
        let rate = |b: Option<u64>| b.map(|b| MibPerSec::from_bytes(b, interval).0);
        Self {
            ipc: values.ipc().filter(|_| on(MonEvents::IPC)),
            llc_misses: values
                .llc_misses_delta
                .filter(|_| on(MonEvents::LLC_MISSES)),
            llc_references: values
                .llc_references_delta
                .filter(|_| on(MonEvents::LLC_REFERENCES)),
            llc_occupancy_bytes: values
                .llc_occupancy_bytes
                .filter(|_| on(MonEvents::LLC_OCCUPANCY)),
            mbm_local: rate(values.mbm_local_delta_bytes).filter(|_| on(MonEvents::MBM_LOCAL)),
            mbm_remote: rate(values.mbm_remote_delta_bytes).filter(|_| on(MonEvents::MBM_REMOTE)),
            mbm_total: rate(values.mbm_total_delta_bytes).filter(|_| on(MonEvents::MBM_TOTAL)),
            uncore: {
                let mut u = UncoreCounts::default();
                if let Some(v) = &values.uncore {
                    for e in MonEvents::UNCORE.intersection(events).iter() {
                        u.set(e, v.get(e));
                    }
                }
                u
            },
            regions: [None; MAX_REGION_COLUMNS],
        }
    }
}

impl Cells {
    /// The cells as pqos v25.04 prints the first sample of a run on `interface`: IPC 0.00,
    /// LLC misses and references 0, and on the MSR interface bandwidths 0.0 too (the first
    /// read of an MBM counter has no previous one: `valid_mbm_read`,
    /// `lib/hw_monitoring.c` `hw_mon_read_counter`). On the OS interface pqos's first
    /// sample has the traffic since its monitor group was made (`lib/resctrl_monitoring.c`
    /// `resctrl_mon_poll` takes the delta from 0, a new group's counts), so the bandwidth
    /// over the time since the start stays, as the library measures it (its first poll's
    /// deltas are since the start: `rdt_pqos::monitor`, "Start and first poll").
    /// Occupancy is a level and stays; the uncore counts stay too, as pqos's first uncore
    /// sample shows the counts since start. A blank cell (event not monitored or
    /// unreadable) stays blank.
    #[must_use]
    pub fn pqos_first_sample(self, interface: Interface) -> Self {
        // The MMIO interface's first sample: as the MSR interface's (pqos v26.03
        // `lib/mmio_monitoring.c` reads a first value to take deltas from; unconfirmed).
        let bandwidth = |v: Option<f64>| match interface {
            Interface::Msr | Interface::Mmio => v.map(|_| 0.0),
            Interface::Os => v,
        };
        Self {
            ipc: self.ipc.map(|_| 0.0),
            llc_misses: self.llc_misses.map(|_| 0),
            llc_references: self.llc_references.map(|_| 0),
            mbm_local: bandwidth(self.mbm_local),
            mbm_remote: bandwidth(self.mbm_remote),
            mbm_total: bandwidth(self.mbm_total),
            regions: self.regions.map(bandwidth),
            ..self
        }
    }
}

/// One row of a sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Row<'a> {
    /// The group's label: its core list (`0-3`, `5`) or, in PID mode, its process ids.
    pub desc: &'a str,
    /// PID mode: the CPUs the group's threads last ran on (`0,3`, or `err`).
    pub cores: Option<String>,
    /// The numbers.
    pub cells: Cells,
}

/// One sample: every row at one time.
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    /// Local time of the sample.
    pub time: &'a jiff::Zoned,
    /// The measured time since the previous sample (zero for the first).
    pub interval: Duration,
    /// The rows, in display order.
    pub rows: &'a [Row<'a>],
}

/// pqos's timestamp: `%Y-%m-%d %H:%M:%S`, local time.
fn pqos_time(t: &jiff::Zoned) -> String {
    t.strftime("%Y-%m-%d %H:%M:%S").to_string()
}

/// One column: its event, text header, CSV header and XML node.
struct Column {
    event: MonEvents,
    text: &'static str,
    csv: &'static str,
    xml: &'static str,
}

/// The columns shown, in pqos's order.
fn columns(cols: Columns) -> Vec<Column> {
    let percent = matches!(cols.llc, LlcUnit::Percent { .. });
    let all = [
        Column {
            event: MonEvents::IPC,
            text: "         IPC",
            csv: ",IPC",
            xml: "ipc",
        },
        Column {
            event: MonEvents::LLC_MISSES,
            text: "      MISSES",
            csv: ",LLC Misses",
            xml: "llc_misses",
        },
        Column {
            event: MonEvents::LLC_REFERENCES,
            text: "  REFERENCES",
            csv: ",LLC References",
            xml: "llc_references",
        },
        Column {
            event: MonEvents::LLC_OCCUPANCY,
            text: if percent {
                "      LLC[%]"
            } else {
                "     LLC[KB]"
            },
            csv: if percent { ",LLC[%]" } else { ",LLC[KB]" },
            xml: if percent {
                "l3_occupancy_percent"
            } else {
                "l3_occupancy_kB"
            },
        },
        Column {
            event: MonEvents::MBM_LOCAL,
            text: "   MBL[MB/s]",
            csv: ",MBL[MB/s]",
            xml: "mbm_local_MB",
        },
        Column {
            event: MonEvents::MBM_REMOTE,
            text: "   MBR[MB/s]",
            csv: ",MBR[MB/s]",
            xml: "mbm_remote_MB",
        },
        Column {
            event: MonEvents::MBM_TOTAL,
            text: "   MBT[MB/s]",
            csv: ",MBT[MB/s]",
            xml: "mbm_total_MB",
        },
        // uncore: text `" %11s"` of MISS_READ..., CSV `",%11s"` of the long names
        // (pqos/monitor_text.c, monitor_csv.c); pqos's XML has no uncore nodes, ours are
        // named as the JSON fields (docs/compat.md)
        Column {
            event: MonEvents::LLC_MISS_PCIE_READ,
            text: "   MISS_READ",
            csv: ",LLC Misses Read",
            xml: "llc_misses_pcie_read",
        },
        Column {
            event: MonEvents::LLC_MISS_PCIE_WRITE,
            text: "  MISS_WRITE",
            csv: ",LLC Misses Write",
            xml: "llc_misses_pcie_write",
        },
        Column {
            event: MonEvents::LLC_REF_PCIE_READ,
            text: "    REF_READ",
            csv: ",LLC References Read",
            xml: "llc_references_pcie_read",
        },
        Column {
            event: MonEvents::LLC_REF_PCIE_WRITE,
            text: "   REF_WRITE",
            csv: ",LLC References Write",
            xml: "llc_references_pcie_write",
        },
    ];
    all.into_iter()
        .filter(|c| cols.events.contains(c.event))
        .collect()
}

/// The columns that are event counts: pqos prints them as integers (text: thousands, `k`).
const COUNTS: MonEvents = MonEvents::LLC_MISSES
    .union(MonEvents::LLC_REFERENCES)
    .union(MonEvents::UNCORE);

/// The value of a cell as pqos prints it (before its width and precision), or `None`.
#[allow(clippy::cast_precision_loss)] // counts and byte values far below 2^52
fn value(cells: &Cells, event: MonEvents, llc: LlcUnit) -> Option<f64> {
    if event == MonEvents::IPC {
        cells.ipc
    } else if event == MonEvents::LLC_MISSES {
        cells.llc_misses.map(|m| m as f64)
    } else if event == MonEvents::LLC_REFERENCES {
        cells.llc_references.map(|m| m as f64)
    } else if event == MonEvents::LLC_OCCUPANCY {
        cells.llc_occupancy_bytes.map(|b| match llc {
            LlcUnit::KiB => bytes_to_kib(b),
            LlcUnit::Percent { l3_bytes } => {
                (u128::from(b) * 100 / u128::from(l3_bytes.max(1))) as f64
            }
        })
    } else if event == MonEvents::MBM_LOCAL {
        cells.mbm_local
    } else if event == MonEvents::MBM_REMOTE {
        cells.mbm_remote
    } else if event == MonEvents::MBM_TOTAL {
        cells.mbm_total
    } else {
        cells.uncore.get(event).map(|n| n as f64)
    }
}

/// The terminal's size in characters, `(columns, rows)`, when output goes to one.
pub type TermSize = Box<dyn FnMut() -> Option<(u16, u16)>>;

/// A writer for one output format.
pub trait Format {
    /// Before the first sample (CSV header, XML prologue).
    ///
    /// # Errors
    /// Writing failed.
    fn begin(&mut self, w: &mut dyn Write) -> io::Result<()>;
    /// One sample, flushed.
    ///
    /// # Errors
    /// Writing failed.
    fn sample(&mut self, w: &mut dyn Write, s: &Sample<'_>) -> io::Result<()>;
    /// After the last sample (XML `</records>`; blank lines on a terminal), flushed.
    ///
    /// # Errors
    /// Writing failed.
    fn end(&mut self, w: &mut dyn Write) -> io::Result<()>;
}

/// pqos's text table: per sample a `TIME` line, the header, and one row per group, 12
/// characters per cell (`%8.8s` group label). On a terminal the screen is cleared before
/// each sample, rows beyond the terminal's height and characters beyond its width are cut
/// off, and no newline ends the table (pqos's `isatty` branches); `-T` adds the LLC sort.
pub struct Text {
    cols: Columns,
    table: Vec<Column>,
    terminal: Option<TermSize>,
    buf: String,
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Text")
            .field("cols", &self.cols)
            .field("tty", &self.terminal.is_some())
            .finish_non_exhaustive()
    }
}

impl Text {
    /// A text table; `terminal` gives the size of the terminal output goes to, if it does.
    #[must_use]
    pub fn new(cols: Columns, terminal: Option<TermSize>) -> Self {
        Self {
            cols,
            table: columns(cols),
            terminal,
            buf: String::new(),
        }
    }

    fn header(&self) -> String {
        let mut h = String::from(if self.cols.pid_mode {
            "     PID     CORE"
        } else if self.cols.socket_mode {
            "  SOCKET"
        } else if self.cols.channel_mode {
            "         CHANNEL"
        } else {
            "    CORE"
        });
        for c in &self.table {
            if c.event == MonEvents::MBM_LOCAL && !self.cols.regions.is_empty() {
                // pqos v26.03 monitor_text_region_header: `    MBL-r%d[MB/s]` per region
                for r in self.cols.regions.ids() {
                    h.push_str(&format!("    MBL-r{r}[MB/s]"));
                }
                continue;
            }
            h.push_str(c.text);
        }
        h
    }

    fn row(&self, row: &Row<'_>, out: &mut String) {
        use std::fmt::Write as _;
        match &row.cores {
            Some(cores) if self.cols.pid_mode => {
                let _ = write!(out, "{:>8.8} {:>8.8}", row.desc, cores);
            }
            _ if self.cols.channel_mode => {
                let _ = write!(out, "{:>16.16}", row.desc);
            }
            _ => {
                let _ = write!(out, "{:>8.8}", row.desc);
            }
        }
        for c in &self.table {
            if c.event == MonEvents::MBM_LOCAL && !self.cols.regions.is_empty() {
                // pqos v26.03 monitor_text_region_row: REGION_FORMAT ` %15.1f` per region
                for v in &row.cells.regions[..self.cols.regions.ids().len()] {
                    match v {
                        Some(v) => {
                            let _ = write!(out, " {v:15.1}");
                        }
                        None => out.push_str("            "),
                    }
                }
                continue;
            }
            match value(&row.cells, c.event, self.cols.llc) {
                None => out.push_str("            "),
                Some(v) if c.event == MonEvents::IPC => {
                    let _ = write!(out, " {v:11.2}");
                }
                Some(v) if COUNTS.contains(c.event) => {
                    let _ = write!(out, " {:10.0}k", v / 1000.0);
                }
                Some(v) => {
                    let _ = write!(out, " {v:11.1}");
                }
            }
        }
    }
}

impl Format for Text {
    fn begin(&mut self, _w: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }

    fn sample(&mut self, w: &mut dyn Write, s: &Sample<'_>) -> io::Result<()> {
        let size = self.terminal.as_mut().map(|size| size());
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.push_str("TIME ");
        buf.push_str(&pqos_time(s.time));
        buf.push('\n');
        buf.push_str(&self.header());
        // pqos on a terminal: at most height - 2 rows (the TIME line and the header).
        let shown = match size {
            Some(Some((_, height))) => usize::from(height.max(3)) - 2,
            _ => usize::MAX,
        };
        for row in s.rows.iter().take(shown) {
            buf.push('\n');
            self.row(row, &mut buf);
        }
        let result = match size {
            None => {
                buf.push('\n');
                w.write_all(buf.as_bytes())
            }
            Some(size) => redraw(w, &buf, size.map(|(width, _)| width)),
        };
        self.buf = buf;
        result?;
        w.flush()
    }

    fn end(&mut self, w: &mut dyn Write) -> io::Result<()> {
        if self.terminal.is_some() {
            w.write_all(b"\n\n")?;
        }
        w.flush()
    }
}

/// Draws `text` over a cleared terminal from its top left corner, each line cut to `width`
/// characters (crossterm's clear and cursor commands).
fn redraw(mut w: &mut dyn Write, text: &str, width: Option<u16>) -> io::Result<()> {
    crossterm::queue!(
        &mut w,
        crossterm::terminal::Clear(crossterm::terminal::ClearType::All),
        crossterm::cursor::MoveTo(0, 0)
    )?;
    let width = width.map_or(usize::MAX, usize::from);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            w.write_all(b"\n")?;
        }
        let cut = line
            .char_indices()
            .nth(width)
            .map_or(line.len(), |(at, _)| at);
        w.write_all(&line.as_bytes()[..cut])?;
    }
    Ok(())
}

/// pqos's CSV: one header line, then per row `time,"group"` (PID mode:
/// `time,"pids","cores"`) and the cells: IPC `%.2f`, misses as a raw count, the rest `%.1f`;
/// a blank cell is a bare `,`.
pub struct Csv {
    cols: Columns,
    table: Vec<Column>,
    tty: bool,
    buf: String,
}

impl std::fmt::Debug for Csv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Csv")
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl Csv {
    /// CSV; `tty` when output goes to a terminal (pqos then ends with two newlines).
    #[must_use]
    pub fn new(cols: Columns, tty: bool) -> Self {
        Self {
            cols,
            table: columns(cols),
            tty,
            buf: String::new(),
        }
    }

    /// The header line, without its newline.
    #[must_use]
    pub fn header(&self) -> String {
        let mut h = String::from(if self.cols.pid_mode {
            "Time,PID,Core"
        } else if self.cols.socket_mode {
            "Time,Socket"
        } else if self.cols.channel_mode {
            "Time,Channel"
        } else {
            "Time,Core"
        });
        for c in &self.table {
            if c.event == MonEvents::MBM_LOCAL && !self.cols.regions.is_empty() {
                // one `MBL-r%d[MB/s]` column per region, named as the text header's (pqos
                // v26.03's monitor_csv.c prints one `MBL[MB/s]` header for them all;
                // docs/compat.md)
                for r in self.cols.regions.ids() {
                    let _ = std::fmt::Write::write_fmt(&mut h, format_args!(",MBL-r{r}[MB/s]"));
                }
                continue;
            }
            h.push_str(c.csv);
        }
        h
    }
}

impl Format for Csv {
    fn begin(&mut self, w: &mut dyn Write) -> io::Result<()> {
        let h = self.header();
        w.write_all(h.as_bytes())?;
        w.write_all(b"\n")
    }

    fn sample(&mut self, w: &mut dyn Write, s: &Sample<'_>) -> io::Result<()> {
        use std::fmt::Write as _;
        let table = &self.table;
        let time = pqos_time(s.time);
        let buf = &mut self.buf;
        buf.clear();
        for row in s.rows {
            let _ = write!(buf, "{time},\"{}\"", row.desc);
            if self.cols.pid_mode {
                let _ = write!(buf, ",\"{}\"", row.cores.as_deref().unwrap_or("err"));
            }
            for c in table {
                if c.event == MonEvents::MBM_LOCAL && !self.cols.regions.is_empty() {
                    // pqos v26.03 monitor_csv.c `monitor_csv_region_row`: `,%.1f` per
                    // region in MBL's place, a bare `,` where there is no value
                    for v in &row.cells.regions[..self.cols.regions.ids().len()] {
                        match v {
                            Some(v) => {
                                let _ = write!(buf, ",{v:.1}");
                            }
                            None => buf.push(','),
                        }
                    }
                    continue;
                }
                match value(&row.cells, c.event, self.cols.llc) {
                    None => buf.push(','),
                    Some(v) if c.event == MonEvents::IPC => {
                        let _ = write!(buf, ",{v:.2}");
                    }
                    Some(v) if COUNTS.contains(c.event) => {
                        let _ = write!(buf, ",{v:.0}");
                    }
                    Some(v) => {
                        let _ = write!(buf, ",{v:.1}");
                    }
                }
            }
            buf.push('\n');
        }
        w.write_all(buf.as_bytes())?;
        w.flush()
    }

    fn end(&mut self, w: &mut dyn Write) -> io::Result<()> {
        if self.tty {
            w.write_all(b"\n\n")?;
        }
        w.flush()
    }
}

/// pqos's XML: `<records>` holding one tab-indented `<record>` per row, written with
/// quick-xml (which escapes the text).
pub struct Xml {
    cols: Columns,
    table: Vec<Column>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Xml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Xml")
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl Xml {
    /// XML records.
    #[must_use]
    pub fn new(cols: Columns) -> Self {
        Self {
            cols,
            table: columns(cols),
            buf: Vec::new(),
        }
    }
}

/// `\t<name>text</name>\n`.
fn xml_node<W: Write>(x: &mut quick_xml::Writer<W>, name: &str, text: &str) -> io::Result<()> {
    x.write_event(Event::Text(BytesText::from_escaped("\t")))?;
    x.write_event(Event::Start(BytesStart::new(name)))?;
    if !text.is_empty() {
        x.write_event(Event::Text(BytesText::new(text)))?;
    }
    x.write_event(Event::End(BytesEnd::new(name)))?;
    x.write_event(Event::Text(BytesText::from_escaped("\n")))
}

impl Format for Xml {
    fn begin(&mut self, w: &mut dyn Write) -> io::Result<()> {
        let mut x = quick_xml::Writer::new(w);
        x.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
        x.write_event(Event::Text(BytesText::from_escaped("\n")))?;
        x.write_event(Event::Start(BytesStart::new("records")))?;
        x.write_event(Event::Text(BytesText::from_escaped("\n")))
    }

    fn sample(&mut self, w: &mut dyn Write, s: &Sample<'_>) -> io::Result<()> {
        let time = pqos_time(s.time);
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let mut x = quick_xml::Writer::new(&mut buf);
        for row in s.rows {
            x.write_event(Event::Start(BytesStart::new("record")))?;
            x.write_event(Event::Text(BytesText::from_escaped("\n")))?;
            xml_node(&mut x, "time", &time)?;
            if self.cols.pid_mode {
                xml_node(&mut x, "pid", row.desc)?;
                xml_node(&mut x, "core", row.cores.as_deref().unwrap_or("err"))?;
            } else if self.cols.socket_mode {
                xml_node(&mut x, "socket", row.desc)?;
            } else if self.cols.channel_mode {
                xml_node(&mut x, "channel", row.desc)?;
            } else {
                xml_node(&mut x, "core", row.desc)?;
            }
            for c in &self.table {
                if c.event == MonEvents::MBM_LOCAL && !self.cols.regions.is_empty() {
                    // `<mbm_local_region_N_MB>` per region in `<mbm_local_MB>`'s place
                    // (named after pqos's region nodes, monitor_xml.c; docs/compat.md)
                    let cells = &row.cells.regions[..self.cols.regions.ids().len()];
                    for (r, v) in self.cols.regions.ids().iter().zip(cells) {
                        let text = v.map(|v| format!("{v:.1}")).unwrap_or_default();
                        xml_node(&mut x, &format!("mbm_local_region_{r}_MB"), &text)?;
                    }
                    continue;
                }
                let text = match value(&row.cells, c.event, self.cols.llc) {
                    None => String::new(),
                    Some(v) if c.event == MonEvents::IPC => format!("{v:.2}"),
                    Some(v) if COUNTS.contains(c.event) => format!("{v:.0}"),
                    Some(v) => format!("{v:.1}"),
                };
                xml_node(&mut x, c.xml, &text)?;
            }
            x.write_event(Event::End(BytesEnd::new("record")))?;
            x.write_event(Event::Text(BytesText::from_escaped("\n")))?;
        }
        let written = w.write_all(&buf);
        self.buf = buf;
        written?;
        w.flush()
    }

    fn end(&mut self, w: &mut dyn Write) -> io::Result<()> {
        let mut x = quick_xml::Writer::new(&mut *w);
        x.write_event(Event::End(BytesEnd::new("records")))?;
        x.write_event(Event::Text(BytesText::from_escaped("\n")))?;
        w.flush()
    }
}

/// `-u json`: JSON Lines, one object per row (ours; documented in docs/compat.md).
///
/// Fields: `time` (RFC 3339 local time with its UTC offset, to the second), `pid` (PID mode),
/// `core`, `interval_s` (seconds since the previous sample, for the first since the groups
/// started), then one field
/// per column shown: `ipc`, `llc_misses` and `llc_references` (counts over the interval),
/// `llc_occupancy_kib` or
/// (`-P`) `llc_occupancy_percent`, `mbm_local_mib_per_s`, `mbm_remote_mib_per_s`,
/// `mbm_total_mib_per_s`; on the MMIO interface with region columns
/// `mbm_local_regions`, one `{"region": N, "mib_per_s": X}` per shown region in display
/// order (`mib_per_s` `null` where the text cell is blank); in uncore mode `socket` instead of `core`, and
/// `llc_misses_pcie_read`, `llc_misses_pcie_write`, `llc_references_pcie_read`,
/// `llc_references_pcie_write` (counts over the interval). A column's value is `null` where
/// a text cell would be blank.
/// Numbers are not rounded.
#[derive(Debug)]
pub struct Json {
    cols: Columns,
    buf: Vec<u8>,
}

impl Json {
    /// JSON Lines.
    #[must_use]
    pub fn new(cols: Columns) -> Self {
        Self {
            cols,
            buf: Vec::new(),
        }
    }
}

/// One JSON row. `Option<Option<_>>`: outer `None` = column not shown (field left out),
/// `Some(None)` = blank cell (`null`).
#[derive(Serialize)]
#[allow(clippy::option_option)] // serde's idiom for "field left out" vs "null"
struct JsonRow<'a> {
    time: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    core: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    socket: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel: Option<&'a str>,
    interval_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ipc: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llc_misses: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llc_references: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llc_occupancy_kib: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llc_occupancy_percent: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mbm_local_mib_per_s: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mbm_local_regions: Option<Vec<JsonRegion>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mbm_remote_mib_per_s: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mbm_total_mib_per_s: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llc_misses_pcie_read: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llc_misses_pcie_write: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llc_references_pcie_read: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llc_references_pcie_write: Option<Option<u64>>,
}

/// One memory region's local bandwidth in a JSON row (MMIO interface).
#[derive(Serialize)]
struct JsonRegion {
    region: u8,
    mib_per_s: Option<f64>,
}

impl Format for Json {
    fn begin(&mut self, _w: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }

    #[allow(clippy::cast_precision_loss)] // byte values far below 2^52
    fn sample(&mut self, w: &mut dyn Write, s: &Sample<'_>) -> io::Result<()> {
        let time = s.time.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string();
        let shown = |e: MonEvents| self.cols.events.contains(e);
        let (kib, percent) = match self.cols.llc {
            LlcUnit::KiB => (shown(MonEvents::LLC_OCCUPANCY), None),
            LlcUnit::Percent { l3_bytes } => (false, Some(l3_bytes)),
        };
        self.buf.clear();
        for row in s.rows {
            let c = &row.cells;
            let field = |e: MonEvents, v: Option<f64>| shown(e).then_some(v);
            let json = JsonRow {
                time: &time,
                pid: self.cols.pid_mode.then_some(row.desc),
                core: if self.cols.pid_mode {
                    Some(row.cores.as_deref().unwrap_or("err"))
                } else {
                    (!self.cols.socket_mode && !self.cols.channel_mode).then_some(row.desc)
                },
                socket: self.cols.socket_mode.then_some(row.desc),
                channel: self.cols.channel_mode.then_some(row.desc),
                interval_s: s.interval.as_secs_f64(),
                ipc: field(MonEvents::IPC, c.ipc),
                llc_misses: shown(MonEvents::LLC_MISSES).then_some(c.llc_misses),
                llc_references: shown(MonEvents::LLC_REFERENCES).then_some(c.llc_references),
                llc_occupancy_kib: kib.then(|| c.llc_occupancy_bytes.map(bytes_to_kib)),
                llc_occupancy_percent: percent.filter(|_| shown(MonEvents::LLC_OCCUPANCY)).map(
                    |total| {
                        c.llc_occupancy_bytes
                            .map(|b| b as f64 * 100.0 / total.max(1) as f64)
                    },
                ),
                mbm_local_mib_per_s: field(MonEvents::MBM_LOCAL, c.mbm_local),
                mbm_local_regions: (shown(MonEvents::MBM_LOCAL) && !self.cols.regions.is_empty())
                    .then(|| {
                        let ids = self.cols.regions.ids();
                        ids.iter()
                            .zip(&c.regions[..ids.len()])
                            .map(|(&region, &mib_per_s)| JsonRegion { region, mib_per_s })
                            .collect()
                    }),
                mbm_remote_mib_per_s: field(MonEvents::MBM_REMOTE, c.mbm_remote),
                mbm_total_mib_per_s: field(MonEvents::MBM_TOTAL, c.mbm_total),
                llc_misses_pcie_read: shown(MonEvents::LLC_MISS_PCIE_READ)
                    .then_some(c.uncore.llc_miss_pcie_read),
                llc_misses_pcie_write: shown(MonEvents::LLC_MISS_PCIE_WRITE)
                    .then_some(c.uncore.llc_miss_pcie_write),
                llc_references_pcie_read: shown(MonEvents::LLC_REF_PCIE_READ)
                    .then_some(c.uncore.llc_ref_pcie_read),
                llc_references_pcie_write: shown(MonEvents::LLC_REF_PCIE_WRITE)
                    .then_some(c.uncore.llc_ref_pcie_write),
            };
            serde_json::to_writer(&mut self.buf, &json)?;
            self.buf.push(b'\n');
        }
        w.write_all(&self.buf)?;
        w.flush()
    }

    fn end(&mut self, w: &mut dyn Write) -> io::Result<()> {
        w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> jiff::Zoned {
        t.parse().unwrap()
    }

    fn all_cols(pid_mode: bool) -> Columns {
        Columns {
            events: MonEvents::PQOS_ALL,
            llc: LlcUnit::KiB,
            pid_mode,
            socket_mode: false,
            channel_mode: false,
            regions: RegionColumns::default(),
        }
    }

    fn cells() -> Cells {
        Cells {
            ipc: Some(0.34),
            llc_misses: Some(55_601_000),
            llc_references: None,
            llc_occupancy_bytes: Some(22464 * 1024),
            mbm_local: Some(0.0),
            mbm_remote: Some(0.0),
            mbm_total: None,
            uncore: UncoreCounts::default(),
            regions: [None; MAX_REGION_COLUMNS],
        }
    }

    #[test]
    fn mmio_region_columns_replace_mbl_as_pqos_v26_03_prints_them() {
        let mut cells = cells();
        cells.regions[0] = Some(700.25);
        cells.regions[1] = Some(300.0);
        let rows = [Row {
            desc: "0-3",
            cores: None,
            cells,
        }];
        let cols = Columns {
            events: MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL,
            regions: RegionColumns::new(&[0, 1]).unwrap(),
            ..all_cols(false)
        };
        let text = render(&mut Text::new(cols, None), &rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1],
            "    CORE     LLC[KB]    MBL-r0[MB/s]    MBL-r1[MB/s]"
        );
        assert_eq!(
            lines[2],
            "     0-3     22464.0           700.2           300.0"
        );
        assert!(RegionColumns::new(&[0; MAX_REGION_COLUMNS + 1]).is_none());
    }

    /// Regions 3 then 1 (as `--mon-mem-regions=3,1` orders them), region 1 without a value.
    fn region_rows() -> (Columns, [Option<f64>; MAX_REGION_COLUMNS]) {
        let cols = Columns {
            events: MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL | MonEvents::MBM_REMOTE,
            regions: RegionColumns::new(&[3, 1]).unwrap(),
            ..all_cols(false)
        };
        let mut regions = [None; MAX_REGION_COLUMNS];
        regions[0] = Some(700.25);
        (cols, regions)
    }

    #[test]
    fn csv_xml_and_json_carry_one_region_cell_per_shown_region_in_order() {
        let (cols, regions) = region_rows();
        let rows = [Row {
            desc: "0-3",
            cores: None,
            cells: Cells {
                regions,
                mbm_remote: Some(5.0),
                ..cells()
            },
        }];
        // CSV: the region cells in MBL's place, a bare `,` for the blank one
        let csv = render(&mut Csv::new(cols, false), &rows);
        assert_eq!(
            csv,
            "Time,Core,LLC[KB],MBL-r3[MB/s],MBL-r1[MB/s],MBR[MB/s]\n\
             2024-09-23 10:00:00,\"0-3\",22464.0,700.2,,5.0\n"
        );
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0].split(',').count(),
            lines[1].replace("\"0-3\"", "x").split(',').count(),
            "as many header names as cells"
        );

        // XML: one node per region, parsed back
        let xml = render(&mut Xml::new(cols), &rows);
        let mut reader = quick_xml::Reader::from_str(&xml);
        let mut nodes: Vec<(String, String)> = Vec::new();
        loop {
            match reader.read_event().unwrap() {
                Event::Eof => break,
                Event::Start(e) => {
                    nodes.push((
                        String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
                        String::new(),
                    ));
                }
                Event::Text(t) => {
                    if let Some(last) = nodes.last_mut() {
                        last.1.push_str(t.decode().unwrap().trim());
                    }
                }
                _ => {}
            }
        }
        let got: Vec<(&str, &str)> = nodes
            .iter()
            .filter(|(n, _)| n.starts_with("mbm"))
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("mbm_local_region_3_MB", "700.2"),
                ("mbm_local_region_1_MB", ""),
                ("mbm_remote_MB", "5.0"),
            ]
        );

        // JSON: `mbm_local_regions` in display order, `null` for the blank one
        let json = render(&mut Json::new(cols), &rows);
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(
            v["mbm_local_regions"],
            serde_json::json!([
                {"region": 3, "mib_per_s": 700.25},
                {"region": 1, "mib_per_s": null}
            ])
        );
        // no regions (MSR, OS): no field
        let plain = Columns {
            regions: RegionColumns::default(),
            ..cols
        };
        let json = render(&mut Json::new(plain), &rows);
        assert!(!json.contains("regions"), "{json}");
    }

    fn render(f: &mut dyn Format, rows: &[Row<'_>]) -> String {
        let time = at("2024-09-23T10:00:00[UTC]");
        let mut out = Vec::new();
        f.begin(&mut out).unwrap();
        f.sample(
            &mut out,
            &Sample {
                time: &time,
                interval: Duration::from_secs(1),
                rows,
            },
        )
        .unwrap();
        f.end(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn text_row_matches_a_real_pqos_row() {
        // intel_pqos_monitor_single_core_issue283.txt: `%8.8s`, ` %11.2f`, ` %10.0fk`, ` %11.1f`
        let sample = crate::testdata::sample("intel_pqos_monitor_single_core_issue283.txt");
        let rows = [Row {
            desc: "3",
            cores: None,
            cells: cells(),
        }];
        let out = render(&mut Text::new(all_cols(false), None), &rows);
        let got: Vec<&str> = out.lines().collect();
        // The excerpt lost leading spaces of its lines: compare from the end.
        for (got, real) in got[1..].iter().zip(sample.lines()) {
            assert!(got.ends_with(real), "{got:?} vs {real:?}");
        }
        assert_eq!(
            got[2].len(),
            8 + 5 * 12,
            "%8.8s then five 12-character cells"
        );
    }

    #[test]
    fn on_a_terminal_rows_and_lines_are_cut_to_its_size() {
        let rows: Vec<Row<'_>> = ["0", "1", "2", "3"]
            .into_iter()
            .map(|desc| Row {
                desc,
                cores: None,
                cells: cells(),
            })
            .collect();
        // 30 columns, 4 lines: TIME, header and two rows.
        let size: TermSize = Box::new(|| Some((30, 4)));
        let out = render(&mut Text::new(all_cols(false), Some(size)), &rows);
        let body = out.strip_prefix("\x1b[2J\x1b[1;1H").expect("cleared first");
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.len(), 5, "{body:?}");
        assert_eq!(lines[0], "TIME 2024-09-23 10:00:00");
        assert_eq!(lines[1], "    CORE         IPC      MISS");
        assert_eq!(lines[3], "       1        0.34      5560");
        assert!(
            body.ends_with("5560\n\n"),
            "no newline after the last row until the end: {body:?}"
        );
    }

    #[test]
    fn references_follow_misses_in_every_format_as_pqos_orders_them() {
        // pqos/monitor_text.c, monitor_csv.c, monitor_xml.c: REFERENCES after MISSES, a count
        // (text: thousands with `k`; CSV and XML: the raw count)
        let rows = [Row {
            desc: "0",
            cores: None,
            cells: Cells {
                llc_references: Some(123_456),
                ..cells()
            },
        }];
        let cols = Columns {
            events: MonEvents::PMU | MonEvents::LLC_OCCUPANCY,
            ..all_cols(false)
        };
        let text = render(&mut Text::new(cols, None), &rows);
        assert_eq!(
            text.lines().nth(1),
            Some("    CORE         IPC      MISSES  REFERENCES     LLC[KB]")
        );
        assert_eq!(
            text.lines().nth(2),
            Some("       0        0.34      55601k        123k     22464.0")
        );
        let csv = render(&mut Csv::new(cols, false), &rows);
        assert_eq!(
            csv,
            "Time,Core,IPC,LLC Misses,LLC References,LLC[KB]\n\
             2024-09-23 10:00:00,\"0\",0.34,55601000,123456,22464.0\n"
        );
        let xml = render(&mut Xml::new(cols), &rows);
        assert!(
            xml.contains(
                "\t<llc_misses>55601000</llc_misses>\n\t<llc_references>123456</llc_references>\n"
            ),
            "{xml}"
        );
        let json = render(&mut Json::new(cols), &rows);
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(v["llc_references"], 123_456);
        // not selected: no column, no field
        let all = render(&mut Json::new(all_cols(false)), &rows);
        assert!(!all.contains("llc_references"), "{all}");
    }

    #[test]
    fn csv_pid_mode_quotes_pids_and_cores() {
        let rows = [Row {
            desc: "45417,29170",
            cores: Some("37,44".into()),
            cells: Cells {
                mbm_total: Some(0.0),
                ..cells()
            },
        }];
        let cols = Columns {
            events: MonEvents::PQOS_ALL | MonEvents::MBM_TOTAL,
            ..all_cols(true)
        };
        let out = render(&mut Csv::new(cols, false), &rows);
        assert_eq!(
            out,
            "Time,PID,Core,IPC,LLC Misses,LLC[KB],MBL[MB/s],MBR[MB/s],MBT[MB/s]\n\
             2024-09-23 10:00:00,\"45417,29170\",\"37,44\",0.34,55601000,22464.0,0.0,0.0,0.0\n"
        );
    }

    #[test]
    fn xml_text_is_escaped_and_parses() {
        let rows = [Row {
            desc: "a<&>\"b",
            cores: None,
            cells: Cells {
                ipc: None,
                ..cells()
            },
        }];
        let out = render(&mut Xml::new(all_cols(false)), &rows);
        assert!(
            out.contains("\t<core>a&lt;&amp;&gt;&quot;b</core>\n\t<ipc></ipc>\n"),
            "{out}"
        );
        let mut reader = quick_xml::Reader::from_str(&out);
        let mut core = String::new();
        let mut in_core = false;
        loop {
            match reader.read_event().unwrap() {
                Event::Eof => break,
                Event::Start(e) => in_core = e.name().as_ref() == b"core",
                Event::Text(t) if in_core => core.push_str(&t.decode().unwrap()),
                Event::GeneralRef(r) if in_core => {
                    let name: &[u8] = &r;
                    core.push_str(match name {
                        b"lt" => "<",
                        b"amp" => "&",
                        b"gt" => ">",
                        _ => "\"",
                    });
                }
                Event::End(_) => in_core = false,
                _ => {}
            }
        }
        assert_eq!(core, "a<&>\"b");
        assert!(out.ends_with("</record>\n</records>\n"), "{out}");
    }

    #[test]
    fn percent_is_whole_percent_of_one_l3_like_pqos() {
        let cols = Columns {
            events: MonEvents::LLC_OCCUPANCY,
            llc: LlcUnit::Percent { l3_bytes: 1000 },
            pid_mode: false,
            socket_mode: false,
            channel_mode: false,
            regions: RegionColumns::default(),
        };
        let rows = [Row {
            desc: "0",
            cores: None,
            cells: Cells {
                llc_occupancy_bytes: Some(2999), // 299.9 % -> 299 (integer division)
                ..Cells::default()
            },
        }];
        assert!(render(&mut Csv::new(cols, false), &rows).ends_with(",\"0\",299.0\n"));
        let json = render(&mut Json::new(cols), &rows);
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert!((v["llc_occupancy_percent"].as_f64().unwrap() - 299.9).abs() < 1e-9);
    }

    /// `--mon-uncore`: pqos/monitor_text.c's `  SOCKET` and `" %11s"` uncore headers with
    /// `" %10.0fk"` cells, monitor_csv.c's `Time,Socket` and `",%11s"` long names with raw
    /// counts; our XML and JSON name the socket and the counts as the JSON schema does.
    #[test]
    fn socket_mode_headers_and_cells_are_pqos_uncore_layout() {
        // arrange
        let cols = Columns {
            events: MonEvents::UNCORE,
            llc: LlcUnit::KiB,
            pid_mode: false,
            socket_mode: true,
            channel_mode: false,
            regions: RegionColumns::default(),
        };
        let rows = [Row {
            desc: "0",
            cores: None,
            cells: Cells {
                uncore: UncoreCounts {
                    llc_miss_pcie_read: Some(2_174_499),
                    llc_miss_pcie_write: Some(1_087_000),
                    llc_ref_pcie_read: Some(2_233_500),
                    llc_ref_pcie_write: None,
                },
                ..Cells::default()
            },
        }];
        // act
        let text = render(&mut Text::new(cols, None), &rows);
        let csv = render(&mut Csv::new(cols, false), &rows);
        let xml = render(&mut Xml::new(cols), &rows);
        let json = render(&mut Json::new(cols), &rows);
        // assert
        assert_eq!(
            text,
            "TIME 2024-09-23 10:00:00\n  SOCKET   MISS_READ  MISS_WRITE    REF_READ   REF_WRITE\n       0       2174k       1087k       2234k            \n"
        );
        assert_eq!(
            csv,
            "Time,Socket,LLC Misses Read,LLC Misses Write,LLC References Read,LLC References Write\n2024-09-23 10:00:00,\"0\",2174499,1087000,2233500,\n"
        );
        assert!(
            xml.contains(
                "<record>\n\t<time>2024-09-23 10:00:00</time>\n\t<socket>0</socket>\n\t<llc_misses_pcie_read>2174499</llc_misses_pcie_read>\n"
            ),
            "{xml}"
        );
        assert!(xml.contains("\t<llc_references_pcie_write></llc_references_pcie_write>\n"));
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(v["socket"], "0");
        assert!(v.get("core").is_none());
        assert_eq!(v["llc_references_pcie_read"], 2_233_500);
        assert!(v["llc_references_pcie_write"].is_null());
    }
}
