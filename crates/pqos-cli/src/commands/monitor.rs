//! Monitoring (`-m`, `-t`, `-i`, `-T`, `-P`, `-o`, `-u`): start the groups once, then per
//! tick poll and print, and stop the groups at the end, on error, and on SIGINT/SIGTERM.
//!
//! Output formats follow pqos/monitor_text.c, monitor_csv.c and monitor_xml.c (v25.04;
//! spec §2.3-2.5). As in v25.04 the first sample is printed (its bandwidths are 0.0, there
//! is no previous reading yet). Unlike pqos, MB/s use the measured interval between two
//! polls, not the nominal one.

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use rdt_core::monitor::{MibPerSec, bytes_to_kib};
use rdt_core::{Backend, Capabilities, LogicalCpu, MonEvents, MonGroupId, MonValues};

use super::Context;
use crate::args::FileType;
use crate::command::MonitorRequest;
use crate::grammar::MonGroupSpec;

/// Where monitoring gets its time and waits.
pub trait Clock {
    /// Time since the clock started.
    fn elapsed(&self) -> Duration;
    /// Waits until [`Clock::elapsed`] reaches `t`, returning early once `stop` is set.
    fn wait_until(&mut self, t: Duration, stop: &AtomicBool);
    /// Local time now, for the `TIME` line.
    fn now(&self) -> jiff::Zoned;
}

/// The real clock: monotonic time, sleeping in steps of at most 100 ms.
#[derive(Debug)]
pub struct RealClock {
    start: Instant,
}

impl RealClock {
    /// Starts the clock.
    #[must_use]
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
        }
    }
}

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for RealClock {
    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    fn wait_until(&mut self, t: Duration, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let now = self.start.elapsed();
            if now >= t {
                break;
            }
            std::thread::sleep(t.saturating_sub(now).min(Duration::from_millis(100)));
        }
    }

    fn now(&self) -> jiff::Zoned {
        jiff::Zoned::now()
    }
}

/// A clock that does not sleep: waiting calls `advance` with the time to move on (the
/// simulated platform's virtual clock), and `TIME` is the start time plus virtual time.
#[allow(missing_debug_implementations)] // holds a closure
pub struct VirtualClock<F: FnMut(Duration)> {
    start: jiff::Zoned,
    t: Duration,
    advance: F,
}

impl<F: FnMut(Duration)> VirtualClock<F> {
    /// A virtual clock at 0 that calls `advance(dt)` whenever it waits.
    pub fn new(advance: F) -> Self {
        Self {
            start: jiff::Zoned::now(),
            t: Duration::ZERO,
            advance,
        }
    }
}

impl<F: FnMut(Duration)> Clock for VirtualClock<F> {
    fn elapsed(&self) -> Duration {
        self.t
    }

    fn wait_until(&mut self, t: Duration, _stop: &AtomicBool) {
        if t > self.t {
            (self.advance)(t.saturating_sub(self.t));
            self.t = t;
        }
    }

    fn now(&self) -> jiff::Zoned {
        let dt = jiff::SignedDuration::try_from(self.t).unwrap_or(jiff::SignedDuration::ZERO);
        self.start
            .checked_add(dt)
            .unwrap_or_else(|_| self.start.clone())
    }
}

/// A real-time clock for a simulated platform: waits for real, then moves the simulated
/// clock on by the real time that passed (`advance`). Elapsed time is the simulated time, so
/// rates are computed over exactly the time the counters saw.
#[allow(missing_debug_implementations)] // holds a closure
pub struct AdvancingClock<F: FnMut(Duration)> {
    real: RealClock,
    advanced: Duration,
    advance: F,
}

impl<F: FnMut(Duration)> AdvancingClock<F> {
    /// Starts the clock; `advance(dt)` moves the simulated platform on.
    pub fn new(advance: F) -> Self {
        Self {
            real: RealClock::new(),
            advanced: Duration::ZERO,
            advance,
        }
    }
}

impl<F: FnMut(Duration)> Clock for AdvancingClock<F> {
    fn elapsed(&self) -> Duration {
        self.advanced
    }

    fn wait_until(&mut self, t: Duration, stop: &AtomicBool) {
        self.real.wait_until(t, stop);
        let now = self.real.elapsed();
        if now > self.advanced {
            (self.advance)(now.saturating_sub(self.advanced));
            self.advanced = now;
        }
    }

    fn now(&self) -> jiff::Zoned {
        jiff::Zoned::now()
    }
}

/// The events this platform can count (pqos's `all_evts`).
#[must_use]
pub fn supported_events(caps: &Capabilities) -> MonEvents {
    let mut e = MonEvents::NONE;
    if let Some(m) = caps.monitoring.get() {
        if m.events.llc_occupancy {
            e = e | MonEvents::LLC_OCCUPANCY;
        }
        if m.events.mbm_local {
            e = e | MonEvents::MBM_LOCAL;
        }
        if m.events.mbm_total {
            e = e | MonEvents::MBM_TOTAL;
        }
        if m.events.mbm_local && m.events.mbm_total {
            e = e | MonEvents::MBM_REMOTE;
        }
    }
    if caps.pmu.ipc {
        e = e | MonEvents::IPC;
    }
    if caps.pmu.llc_misses {
        e = e | MonEvents::LLC_MISSES;
    }
    e
}

fn intersect(a: MonEvents, b: MonEvents) -> MonEvents {
    a.without(a.without(b))
}

/// pqos's `monitor_setup_events`: `all` becomes every supported event; any other selection
/// gets IPC and LLC misses added when available; `--disable-mon-*` removes those.
///
/// # Errors
/// An explicitly requested event the platform does not count, naming the group.
pub fn setup_events(
    group: &MonGroupSpec,
    supported: MonEvents,
    disable_ipc: bool,
    disable_misses: bool,
) -> Result<MonEvents> {
    let mut all = supported;
    if disable_ipc {
        all = all.without(MonEvents::IPC);
    }
    if disable_misses {
        all = all.without(MonEvents::LLC_MISSES);
    }
    if group.events.contains(MonEvents::ALL) {
        return Ok(intersect(group.events, all));
    }
    for (ev, name) in [
        (MonEvents::LLC_OCCUPANCY, "llc (LLC occupancy)"),
        (MonEvents::MBM_LOCAL, "mbl (local memory bandwidth)"),
        (MonEvents::MBM_REMOTE, "mbr (remote memory bandwidth)"),
        (MonEvents::MBM_TOTAL, "mbt (total memory bandwidth)"),
    ] {
        if group.events.contains(ev) && !supported.contains(ev) {
            bail!(
                "monitoring event {name} of group \"{}\" is not supported on this platform",
                group.desc
            );
        }
    }
    Ok(group.events | intersect(all, MonEvents::IPC | MonEvents::LLC_MISSES))
}

/// Which columns are printed: the union of the groups' events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Columns {
    events: MonEvents,
    /// `-P`: L3 size in bytes for the percentage.
    l3_total: Option<u64>,
}

/// One row of one sample.
#[derive(Clone, Debug)]
struct Row<'a> {
    desc: &'a str,
    first_cpu: LogicalCpu,
    events: MonEvents,
    values: MonValues,
}

/// The numbers of one row, `None` for an event the group does not monitor.
#[derive(Clone, Copy, Debug, Default)]
struct Numbers {
    ipc: Option<f64>,
    misses: Option<f64>,
    llc: Option<f64>,
    mbl: Option<f64>,
    mbr: Option<f64>,
    mbt: Option<f64>,
}

#[allow(clippy::cast_precision_loss)] // counts far below 2^52
fn numbers(row: &Row<'_>, cols: Columns, interval: Duration) -> Numbers {
    let v = &row.values;
    let has = |e| row.events.contains(e);
    let rate = |b: Option<u64>| MibPerSec::from_bytes(b.unwrap_or(0), interval).0;
    let occupancy = v.llc_occupancy_bytes.unwrap_or(0);
    Numbers {
        ipc: has(MonEvents::IPC).then(|| v.ipc().unwrap_or(0.0)),
        misses: has(MonEvents::LLC_MISSES).then(|| v.llc_misses_delta.unwrap_or(0) as f64),
        llc: has(MonEvents::LLC_OCCUPANCY).then(|| match cols.l3_total {
            Some(total) if total > 0 => occupancy as f64 * 100.0 / total as f64,
            _ => bytes_to_kib(occupancy),
        }),
        mbl: has(MonEvents::MBM_LOCAL).then(|| rate(v.mbm_local_delta_bytes)),
        mbr: has(MonEvents::MBM_REMOTE).then(|| rate(v.mbm_remote_delta_bytes)),
        mbt: has(MonEvents::MBM_TOTAL).then(|| rate(v.mbm_total_delta_bytes)),
    }
}

/// The columns in pqos's order: (event, text header, CSV header, XML node).
fn column_table(cols: Columns) -> Vec<(MonEvents, &'static str, &'static str, &'static str)> {
    let percent = cols.l3_total.is_some();
    let table = [
        (MonEvents::IPC, "         IPC", ",IPC", "ipc"),
        (
            MonEvents::LLC_MISSES,
            "      MISSES",
            ",LLC Misses",
            "llc_misses",
        ),
        (
            MonEvents::LLC_OCCUPANCY,
            if percent {
                "      LLC[%]"
            } else {
                "     LLC[KB]"
            },
            if percent { ",LLC[%]" } else { ",LLC[KB]" },
            if percent {
                "l3_occupancy_percent"
            } else {
                "l3_occupancy_kB"
            },
        ),
        (
            MonEvents::MBM_LOCAL,
            "   MBL[MB/s]",
            ",MBL[MB/s]",
            "mbm_local_MB",
        ),
        (
            MonEvents::MBM_REMOTE,
            "   MBR[MB/s]",
            ",MBR[MB/s]",
            "mbm_remote_MB",
        ),
        (
            MonEvents::MBM_TOTAL,
            "   MBT[MB/s]",
            ",MBT[MB/s]",
            "mbm_total_MB",
        ),
    ];
    table
        .into_iter()
        .filter(|(e, ..)| cols.events.contains(*e))
        .collect()
}

fn value_of(n: &Numbers, e: MonEvents) -> Option<f64> {
    if e == MonEvents::IPC {
        n.ipc
    } else if e == MonEvents::LLC_MISSES {
        n.misses
    } else if e == MonEvents::LLC_OCCUPANCY {
        n.llc
    } else if e == MonEvents::MBM_LOCAL {
        n.mbl
    } else if e == MonEvents::MBM_REMOTE {
        n.mbr
    } else {
        n.mbt
    }
}

/// Formats samples in one of pqos's output formats.
struct Formatter {
    format: FileType,
    tty: bool,
    cols: Columns,
}

impl Formatter {
    fn begin(&self, w: &mut dyn Write) -> std::io::Result<()> {
        match self.format {
            FileType::Text => Ok(()),
            FileType::Csv => {
                let mut header = String::from("Time,Core");
                for (_, _, csv, _) in column_table(self.cols) {
                    header.push_str(csv);
                }
                writeln!(w, "{header}")
            }
            FileType::Xml => write!(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<records>\n"),
        }
    }

    fn sample(
        &self,
        w: &mut dyn Write,
        time: &str,
        rows: &[(Row<'_>, Numbers)],
    ) -> std::io::Result<()> {
        let table = column_table(self.cols);
        let mut s = String::new();
        match self.format {
            FileType::Text => {
                if self.tty {
                    s.push_str("\x1b[2J\x1b[0;0H");
                }
                s.push_str(&format!("TIME {time}\n    CORE"));
                for (_, text, _, _) in &table {
                    s.push_str(text);
                }
                for (row, n) in rows {
                    s.push_str(&format!("\n{:>8.8}", row.desc));
                    for (e, ..) in &table {
                        match value_of(n, *e) {
                            None => s.push_str(&" ".repeat(12)),
                            Some(v) if *e == MonEvents::IPC => s.push_str(&format!(" {v:11.2}")),
                            Some(v) if *e == MonEvents::LLC_MISSES => {
                                s.push_str(&format!(" {:10.0}k", v / 1000.0));
                            }
                            Some(v) => s.push_str(&format!(" {v:11.1}")),
                        }
                    }
                }
                if !self.tty {
                    s.push('\n');
                }
            }
            FileType::Csv => {
                for (row, n) in rows {
                    s.push_str(&format!("{time},\"{}\"", row.desc));
                    for (e, ..) in &table {
                        match value_of(n, *e) {
                            None => s.push(','),
                            Some(v) if *e == MonEvents::IPC => s.push_str(&format!(",{v:.2}")),
                            Some(v) if *e == MonEvents::LLC_MISSES => {
                                s.push_str(&format!(",{v:.0}"));
                            }
                            Some(v) => s.push_str(&format!(",{v:.1}")),
                        }
                    }
                    s.push('\n');
                }
            }
            FileType::Xml => {
                for (row, n) in rows {
                    s.push_str(&format!(
                        "<record>\n\t<time>{time}</time>\n\t<core>{}</core>\n",
                        row.desc
                    ));
                    for (e, _, _, node) in &table {
                        let v = match value_of(n, *e) {
                            None => String::new(),
                            Some(v) if *e == MonEvents::IPC => format!("{v:.2}"),
                            Some(v) if *e == MonEvents::LLC_MISSES => format!("{v:.0}"),
                            Some(v) => format!("{v:.1}"),
                        };
                        s.push_str(&format!("\t<{node}>{v}</{node}>\n"));
                    }
                    s.push_str("</record>\n");
                }
            }
        }
        w.write_all(s.as_bytes())?;
        w.flush()
    }

    fn end(&self, w: &mut dyn Write) -> std::io::Result<()> {
        match self.format {
            FileType::Text if self.tty => w.write_all(b"\n\n"),
            FileType::Text | FileType::Csv => Ok(()),
            FileType::Xml => w.write_all(b"</records>\n"),
        }?;
        w.flush()
    }
}

/// Runs monitoring until `-t` has elapsed or a stop signal arrives.
///
/// # Errors
/// No monitoring capability, an unsupported event, a group that cannot start (groups
/// already started are stopped again), a failed poll, or an output error.
pub fn run_monitor<B: Backend>(
    backend: &mut B,
    req: &MonitorRequest,
    ctx: &mut Context<'_>,
    out: &mut dyn Write,
) -> Result<()> {
    let caps = backend.capabilities().clone();
    if !caps.monitoring.is_present() {
        bail!("Monitoring capability not detected!");
    }
    let supported = supported_events(&caps);
    let default_groups: Vec<MonGroupSpec>;
    let specs: &[MonGroupSpec] = if req.groups.is_empty() {
        default_groups = backend
            .topology()
            .cpus()
            .iter()
            .map(|c| MonGroupSpec {
                desc: c.cpu.to_string(),
                cpus: std::iter::once(c.cpu).collect(),
                events: MonEvents::ALL,
            })
            .collect();
        &default_groups
    } else {
        &req.groups
    };
    for g in specs {
        if let Some(cpu) = g.cpus.iter().find(|c| backend.topology().get(*c).is_none()) {
            bail!(
                "Monitoring start error on core(s) {}: core {cpu} is not present (cores on this platform: {})",
                g.desc,
                backend.topology().all_cpus()
            );
        }
    }
    let events: Vec<MonEvents> = specs
        .iter()
        .map(|g| setup_events(g, supported, req.disable_ipc, req.disable_llc_miss))
        .collect::<Result<_>>()?;
    let l3_total = if req.llc_percent {
        let total = caps.l3_cache.map(|g| g.total_size()).filter(|t| *t > 0);
        Some(total.ok_or_else(|| anyhow!("-P: the L3 cache size of this platform is unknown"))?)
    } else {
        None
    };
    let cols = Columns {
        events: events.iter().fold(MonEvents::NONE, |a, e| a | *e),
        l3_total,
    };

    let mut file;
    let w: &mut dyn Write = match &req.output {
        Some(path) => {
            let mut o = OpenOptions::new();
            match req.format {
                FileType::Text => o.append(true).create(true),
                FileType::Csv | FileType::Xml => o.write(true).create(true).truncate(true),
            };
            file = o
                .open(path)
                .with_context(|| format!("Error opening '{}' output file!", path.display()))?;
            &mut file
        }
        None => out,
    };
    let fmt = Formatter {
        format: req.format,
        tty: req.output.is_none() && ctx.stdout_is_tty,
        cols,
    };

    let mut started: Vec<(MonGroupId, &MonGroupSpec, MonEvents)> = Vec::new();
    for (g, ev) in specs.iter().zip(&events) {
        match backend.start_monitoring(&g.cpus, *ev) {
            Ok(id) => started.push((id, g, *ev)),
            Err(e) => {
                let _ = stop_all(backend, &started);
                return Err(
                    anyhow!(e).context(format!("Monitoring start error on core(s) {}", g.desc))
                );
            }
        }
    }
    let result = monitor_loop(backend, req, ctx, w, &fmt, &started);
    let stopped = stop_all(backend, &started);
    result.and(stopped)
}

fn stop_all<B: Backend>(
    backend: &mut B,
    started: &[(MonGroupId, &MonGroupSpec, MonEvents)],
) -> Result<()> {
    let mut first = Ok(());
    for (id, g, _) in started {
        if let Err(e) = backend.stop_monitoring(*id)
            && first.is_ok()
        {
            first = Err(anyhow!(e).context(format!("Monitoring stop error! (core(s) {})", g.desc)));
        }
    }
    first
}

fn monitor_loop<B: Backend>(
    backend: &mut B,
    req: &MonitorRequest,
    ctx: &mut Context<'_>,
    w: &mut dyn Write,
    fmt: &Formatter,
    started: &[(MonGroupId, &MonGroupSpec, MonEvents)],
) -> Result<()> {
    fmt.begin(w)?;
    let mut tick: u32 = 0;
    let mut last_poll: Option<Duration> = None;
    loop {
        backend
            .poll()
            .map_err(|e| anyhow!(e).context("polling the monitoring counters"))?;
        let now = ctx.clock.elapsed();
        let interval = last_poll.map_or(Duration::ZERO, |p| now.saturating_sub(p));
        last_poll = Some(now);
        let mut rows: Vec<(Row<'_>, Numbers)> = started
            .iter()
            .map(|(id, g, ev)| {
                let row = Row {
                    desc: &g.desc,
                    first_cpu: g.cpus.first().unwrap_or_default(),
                    events: *ev,
                    values: backend.values(*id).copied().unwrap_or_default(),
                };
                let n = numbers(&row, fmt.cols, interval);
                (row, n)
            })
            .collect();
        if req.top {
            rows.sort_by(|a, b| b.1.llc.unwrap_or(0.0).total_cmp(&a.1.llc.unwrap_or(0.0)));
        } else {
            rows.sort_by_key(|(r, _)| r.first_cpu);
        }
        let time = ctx.clock.now().strftime("%Y-%m-%d %H:%M:%S").to_string();
        fmt.sample(w, &time, &rows)?;
        let runtime = req.interval.saturating_mul(tick);
        if req.duration.is_some_and(|d| runtime >= d) || ctx.stop.load(Ordering::Relaxed) {
            break;
        }
        tick = tick.saturating_add(1);
        ctx.clock
            .wait_until(req.interval.saturating_mul(tick), ctx.stop);
        if ctx.stop.load(Ordering::Relaxed) {
            break;
        }
    }
    fmt.end(w)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::Args;
    use crate::command::{Command, Plan};
    use crate::commands::fake::FakeBackend;

    /// A virtual clock at a fixed local time, so `TIME` lines are exact.
    struct TestClock {
        t: Duration,
    }

    impl Clock for TestClock {
        fn elapsed(&self) -> Duration {
            self.t
        }
        fn wait_until(&mut self, t: Duration, _stop: &AtomicBool) {
            self.t = self.t.max(t);
        }
        fn now(&self) -> jiff::Zoned {
            let start: jiff::Zoned = "2024-09-23T10:00:00[UTC]".parse().unwrap();
            start
                .checked_add(jiff::SignedDuration::try_from(self.t).unwrap())
                .unwrap()
        }
    }

    fn request(argv: &[&str]) -> MonitorRequest {
        let parsed =
            Args::try_parse_from(std::iter::once("pqos").chain(argv.iter().copied())).unwrap();
        match Plan::from_args(parsed).unwrap().command {
            Command::Monitor(r) => r,
            c => panic!("{c:?}"),
        }
    }

    fn run(b: &mut FakeBackend, argv: &[&str], tty: bool) -> (Result<()>, String) {
        let mut clock = TestClock { t: Duration::ZERO };
        let stop = AtomicBool::new(false);
        let mut ctx = Context {
            clock: &mut clock,
            stop: &stop,
            stdout_is_tty: tty,
        };
        let mut out = Vec::new();
        let r = run_monitor(b, &request(argv), &mut ctx, &mut out);
        (r, String::from_utf8(out).unwrap())
    }

    #[test]
    fn text_output_matches_pqos_layout_and_first_sample_has_zero_bandwidth() {
        // arrange
        let mut b = FakeBackend::broadwell_2s();
        // act: -t 1 at 500 ms: samples at 0, 0.5 and 1 s
        let (r, out) = run(
            &mut b,
            &["-m", "all:[2-7];all:8", "-t", "1", "-i", "5"],
            false,
        );
        // assert
        r.unwrap();
        let header = "    CORE         IPC      MISSES     LLC[KB]   MBL[MB/s]   MBR[MB/s]";
        assert_eq!(
            out,
            format!(
                "TIME 2024-09-23 10:00:00\n{header}\n\
                 \x20    2-7        0.00          0k     33792.0         0.0         0.0\n\
                 \x20      8        0.00          0k      9216.0         0.0         0.0\n\
                 TIME 2024-09-23 10:00:00\n{header}\n\
                 \x20    2-7        2.00       6000k     33792.0      1200.0       600.0\n\
                 \x20      8        2.00       1000k      9216.0       200.0       100.0\n\
                 TIME 2024-09-23 10:00:01\n{header}\n\
                 \x20    2-7        2.00       6000k     33792.0      1200.0       600.0\n\
                 \x20      8        2.00       1000k      9216.0       200.0       100.0\n"
            )
        );
        assert_eq!(b.running_groups(), 0, "groups are stopped at the end");
        assert_eq!(b.rmid_of_cpu(2), 0);
    }

    #[test]
    fn row_layout_matches_a_real_pqos_row() {
        // intel_pqos_monitor_single_core_issue283.txt: `%8.8s`, ` %11.2f`, ` %10.0fk`, ` %11.1f`
        let sample = crate::testdata::sample("intel_pqos_monitor_single_core_issue283.txt");
        let real_row = sample.lines().nth(1).unwrap();
        let row = Row {
            desc: "3",
            first_cpu: LogicalCpu::new(3),
            events: MonEvents::ALL,
            values: MonValues::default(),
        };
        let n = Numbers {
            ipc: Some(0.34),
            misses: Some(55_601_000.0),
            llc: Some(22464.0),
            mbl: Some(0.0),
            mbr: Some(0.0),
            mbt: None,
        };
        let fmt = Formatter {
            format: FileType::Text,
            tty: false,
            cols: Columns {
                events: MonEvents::ALL,
                l3_total: None,
            },
        };
        let mut out = Vec::new();
        fmt.sample(&mut out, "2024-09-23 10:00:00", &[(row, n)])
            .unwrap();
        let out = String::from_utf8(out).unwrap();
        let got_row = out.lines().nth(2).unwrap();
        // The excerpt lost some leading spaces of its lines: compare from the end of
        // the first cell (`%8.8s`), which is where the value columns start.
        let after_first_cell = |l: &str| -> String {
            let t = l.trim_start();
            t[t.find(' ').unwrap()..].to_owned()
        };
        assert_eq!(after_first_cell(got_row), after_first_cell(real_row));
        assert_eq!(
            got_row.len(),
            8 + 5 * 12,
            "%8.8s then five 12-character cells"
        );
        let got_header = out.lines().nth(1).unwrap();
        assert_eq!(
            after_first_cell(got_header),
            after_first_cell(sample.lines().next().unwrap())
        );
    }

    #[test]
    fn explicit_events_get_ipc_and_misses_unless_disabled() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(&mut b, &["-m", "llc:0", "-t", "0"], false);
        r.unwrap();
        assert!(out.contains("    CORE         IPC      MISSES     LLC[KB]\n       0        0.00          0k      1024.0\n"), "{out}");
        let (r, out) = run(
            &mut b,
            &[
                "-m",
                "llc:0",
                "-t",
                "0",
                "--disable-mon-ipc",
                "--disable-mon-llc_miss",
            ],
            false,
        );
        r.unwrap();
        assert!(
            out.ends_with("    CORE     LLC[KB]\n       0      1024.0\n"),
            "{out}"
        );
    }

    #[test]
    fn events_missing_in_a_group_print_blank_cells() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(
            &mut b,
            &[
                "-m",
                "llc:0;mbt:1",
                "-t",
                "0",
                "--disable-mon-ipc",
                "--disable-mon-llc_miss",
            ],
            false,
        );
        r.unwrap();
        assert!(out.ends_with(
            "    CORE     LLC[KB]   MBT[MB/s]\n       0      1024.0            \n       1                     0.0\n"
        ), "{out}");
    }

    #[test]
    fn default_monitors_every_core_and_top_sorts_by_llc() {
        let mut b = FakeBackend::amd_2ccx();
        let (r, out) = run(&mut b, &["-t", "0", "-T"], false);
        r.unwrap();
        let rows: Vec<&str> = out
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(rows, ["7", "6", "5", "4", "3", "2", "1", "0"]);
        assert!(
            out.lines()
                .nth(1)
                .unwrap()
                .ends_with("     LLC[KB]   MBL[MB/s]   MBR[MB/s]"),
            "no PMU on this fake: {out}"
        );
    }

    #[test]
    fn percent_llc() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(
            &mut b,
            &[
                "-m",
                "llc:0",
                "-t",
                "0",
                "-P",
                "--disable-mon-ipc",
                "--disable-mon-llc_miss",
            ],
            false,
        );
        r.unwrap();
        assert!(
            out.ends_with("    CORE      LLC[%]\n       0         2.9\n"),
            "{out}"
        );
    }

    #[test]
    fn tty_clears_the_screen_and_ends_with_blank_lines() {
        let mut b = FakeBackend::broadwell_2s();
        let (r, out) = run(
            &mut b,
            &[
                "-m",
                "llc:0",
                "-t",
                "0",
                "--disable-mon-ipc",
                "--disable-mon-llc_miss",
            ],
            true,
        );
        r.unwrap();
        assert_eq!(
            out,
            "\x1b[2J\x1b[0;0HTIME 2024-09-23 10:00:00\n    CORE     LLC[KB]\n       0      1024.0\n\n"
        );
    }

    #[test]
    fn csv_output() {
        let mut b = FakeBackend::broadwell_2s();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.csv");
        let p = path.to_str().unwrap();
        let (r, out) = run(
            &mut b,
            &["-m", "all:0", "-t", "0", "-i", "5", "-u", "csv", "-o", p],
            false,
        );
        r.unwrap();
        assert!(out.is_empty());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "Time,Core,IPC,LLC Misses,LLC[KB],MBL[MB/s],MBR[MB/s]\n\
             2024-09-23 10:00:00,\"0\",0.00,0,1024.0,0.0,0.0\n"
        );
    }

    #[test]
    fn xml_output() {
        let mut b = FakeBackend::broadwell_2s();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.xml");
        let p = path.to_str().unwrap();
        let (r, _) = run(
            &mut b,
            &[
                "-m",
                "llc:0;mbl:1",
                "-t",
                "0",
                "-u",
                "xml",
                "-o",
                p,
                "--disable-mon-ipc",
            ],
            false,
        );
        r.unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<records>\n\
             <record>\n\t<time>2024-09-23 10:00:00</time>\n\t<core>0</core>\n\t<llc_misses>0</llc_misses>\n\
             \t<l3_occupancy_kB>1024.0</l3_occupancy_kB>\n\t<mbm_local_MB></mbm_local_MB>\n</record>\n\
             <record>\n\t<time>2024-09-23 10:00:00</time>\n\t<core>1</core>\n\t<llc_misses>0</llc_misses>\n\
             \t<l3_occupancy_kB></l3_occupancy_kB>\n\t<mbm_local_MB>0.0</mbm_local_MB>\n</record>\n\
             </records>\n"
        );
    }

    #[test]
    fn a_group_that_cannot_start_stops_the_others() {
        let mut b = FakeBackend::broadwell_2s();
        b.start_monitoring(&"5".parse().unwrap(), MonEvents::LLC_OCCUPANCY)
            .unwrap();
        let (r, out) = run(&mut b, &["-m", "all:[2-4];all:5"], false);
        let e = format!("{:#}", r.unwrap_err());
        assert!(
            e.starts_with(
                "Monitoring start error on core(s) 5: monitoring on CPU 5 is already started"
            ),
            "{e}"
        );
        assert!(out.is_empty());
        assert_eq!(b.rmid_of_cpu(2), 0, "group [2-4] was stopped again");
    }

    #[test]
    fn unsupported_event_and_absent_core_are_errors() {
        let mut b = FakeBackend::broadwell_2s();
        b.reconfigure(|c| {
            if let Some(m) = c.monitoring.get_mut() {
                m.events.mbm_local = false;
            }
        });
        let (r, _) = run(&mut b, &["-m", "mbl:0"], false);
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("mbl (local memory bandwidth) of group \"0\" is not supported"),
            "{e}"
        );
        let (r, _) = run(&mut b, &["-m", "all:99"], false);
        let e = r.unwrap_err().to_string();
        assert!(e.contains("core 99 is not present"), "{e}");
        assert!(b.writes.is_empty());
    }

    #[test]
    fn stop_flag_ends_infinite_monitoring() {
        let mut b = FakeBackend::broadwell_2s();
        let mut clock = TestClock { t: Duration::ZERO };
        let stop = AtomicBool::new(true);
        let mut ctx = Context {
            clock: &mut clock,
            stop: &stop,
            stdout_is_tty: false,
        };
        let mut out = Vec::new();
        run_monitor(&mut b, &request(&["-m", "llc:0"]), &mut ctx, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().matches("TIME").count(), 1);
        assert_eq!(b.running_groups(), 0);
    }
}
