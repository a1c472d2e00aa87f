//! Monitoring output that tools can rely on, end to end through the built `pqos` on the
//! simulated platform:
//!
//! - golden tests: each real pqos monitoring sample (`tests/data/pqos` of this crate,
//!   provenance in its SOURCES.md) gives the layout our output must have for the same kind
//!   of run: the header, the cell boundaries (from the header's right-aligned names), the
//!   number format of every column (derived from the sample's own cells), the `TIME` line
//!   and the row order; the preamble and CSV header are compared byte for byte;
//! - a CSV consumer reads every row of a simulated minute with three groups, and Telegraf's
//!   way of reading pqos CSV works on ours;
//! - the `-o` XML file parses after SIGINT, SIGTERM and SIGHUP stop a real-time run, and
//!   the run released its RMIDs; a closed stdout pipe ends a run quietly;
//! - 24 simulated hours at `-i 1` on a 24-bit-counter model: no negative or impossible
//!   bandwidth across the counter wraps, no growth in file descriptors or memory.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::eqnice;
use crate::util::{Machine, Sim, sample};

/// pqos v25.04's banner: the first two lines of the preamble sample.
fn note_banner() -> String {
    sample("telegraf_pqos_csv_preamble.txt")
        .lines()
        .take(2)
        .flat_map(|l| [l, "\n"])
        .collect()
}

/// The number format of one cell: the digits of the integer part become `N`, the
/// fraction keeps its number of digits (`0.34` -> `N.2`, `55601k` -> `Nk`, `22464.0` ->
/// `N.1`), other characters stay.
fn number_format(cell: &str) -> String {
    let cell = cell.trim();
    let (int, rest) = cell.split_at(
        cell.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(cell.len()),
    );
    let mut f = String::new();
    if !int.is_empty() {
        f.push('N');
    }
    match rest.strip_prefix('.') {
        Some(frac) => {
            let digits = frac.chars().take_while(char::is_ascii_digit).count();
            f.push_str(&format!(".{digits}"));
            f.push_str(&frac[digits..]);
        }
        None => f.push_str(rest),
    }
    f
}

/// Every digit as `D`: the shape of a timestamp.
fn digit_shape(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_digit() { 'D' } else { c })
        .collect()
}

/// The right edge of each right-aligned name of a table header.
fn right_edges(header: &str) -> Vec<usize> {
    let b = header.as_bytes();
    (0..b.len())
        .filter(|&i| b[i] != b' ' && (i + 1 == b.len() || b[i + 1] == b' '))
        .map(|i| i + 1)
        .collect()
}

/// Cuts a row at the header's right edges.
fn cells<'a>(row: &'a str, edges: &[usize]) -> Vec<&'a str> {
    let mut start = 0;
    edges
        .iter()
        .map(|&e| {
            let c = row
                .get(start..e)
                .unwrap_or_else(|| panic!("{row:?} shorter than {e}"));
            start = e;
            c
        })
        .collect()
}

/// How a sample orders its rows.
#[derive(Debug, PartialEq)]
enum Order {
    /// By group (first core), ascending: pqos's default.
    ByCore,
    /// By LLC occupancy, descending: `-T`.
    ByLlcDescending,
}

/// The layout of a pqos text table, taken from a real sample.
#[derive(Debug)]
struct TextLayout {
    time_shape: String,
    header: String,
    edges: Vec<usize>,
    names: Vec<String>,
    formats: Vec<String>,
    order: Order,
}

impl TextLayout {
    /// `starts_lost`: the excerpt lost the first characters of its lines (then rows are
    /// aligned on the header's right edge, as pqos's right-aligned cells are).
    fn from_sample(text: &str, starts_lost: bool) -> Self {
        let mut lines = text.lines();
        let mut first = lines.next().expect("a line");
        let mut time_shape = String::new();
        if first.starts_with("TIME ") {
            time_shape = digit_shape(first);
            first = lines.next().expect("a header");
        }
        let header = first.to_owned();
        let edges = right_edges(&header);
        let names: Vec<String> = header.split_whitespace().map(str::to_owned).collect();
        let rows: Vec<String> = lines
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                if starts_lost {
                    format!("{l:>width$}", width = header.len())
                } else {
                    l.to_owned()
                }
            })
            .collect();
        assert!(!rows.is_empty(), "sample has rows");
        // Every row of the sample has the header's length and one format per column.
        let mut formats: Vec<String> = Vec::new();
        for row in &rows {
            assert_eq!(row.len(), header.len(), "sample row {row:?}");
            let f: Vec<String> = cells(row, &edges)[1..]
                .iter()
                .map(|c| number_format(c))
                .collect();
            if formats.is_empty() {
                formats = f;
            } else {
                assert_eq!(formats, f, "one format per column in the sample: {row:?}");
            }
        }
        let groups: Vec<u32> = rows
            .iter()
            .map(|r| cells(r, &edges)[0].trim().parse().expect("core number"))
            .collect();
        let llc_col = names
            .iter()
            .position(|n| n.starts_with("LLC["))
            .expect("LLC");
        let llc: Vec<f64> = rows
            .iter()
            .map(|r| cells(r, &edges)[llc_col].trim().parse().expect("LLC value"))
            .collect();
        let order = if groups.is_sorted() {
            Order::ByCore
        } else {
            assert!(
                llc.is_sorted_by(|a, b| a >= b),
                "a sample is in core or LLC order: {groups:?} {llc:?}"
            );
            Order::ByLlcDescending
        };
        Self {
            time_shape,
            header,
            edges,
            names,
            formats,
            order,
        }
    }

    /// Whether this is pqos's v4.0+ layout (12-character cells), not the pre-v4.0 one
    /// (`    CORE   IPC   MISSES    LLC[KB]`, spec §2.3).
    fn is_v4(&self) -> bool {
        self.edges.windows(2).all(|w| w[1] - w[0] == 12)
    }
}

/// Our text output of one run: the preamble (before the first `TIME`) and the samples, each
/// the `TIME` line, the header and the rows.
struct Ours {
    preamble: String,
    samples: Vec<(String, String, Vec<String>)>,
}

fn split_text(stdout: &str) -> Ours {
    let at = stdout.find("TIME ").expect("a TIME line");
    let mut samples: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut lines = stdout[at..].lines().peekable();
    while let Some(time) = lines.next() {
        assert!(time.starts_with("TIME "), "{time:?}");
        let header = lines.next().expect("header").to_owned();
        let mut rows = Vec::new();
        while let Some(l) = lines.next_if(|l| !l.starts_with("TIME ")) {
            rows.push(l.to_owned());
        }
        samples.push((time.to_owned(), header, rows));
    }
    Ours {
        preamble: stdout[..at].to_owned(),
        samples,
    }
}

/// Runs `args` on a fresh simulated Broadwell-EP for a simulated second and checks every
/// sample against the layout of the sample file `name`. `starts_lost`: the sample's excerpt
/// lost the first characters of its lines (compared right-aligned then).
fn golden_text(name: &str, args: &[&str], groups: usize, starts_lost: bool) {
    let real = TextLayout::from_sample(&sample(name), starts_lost);
    let sim = Sim::new("broadwell-ep");
    let args: Vec<&str> = args.iter().chain(&["-t", "1"]).copied().collect();
    let ours = split_text(&sim.monitor(&args).ok().raw_stdout);

    eqnice!(note_banner(), ours.preamble);
    assert_eq!(
        ours.samples.len(),
        2,
        "-t 1 -i 10: the first sample and one more"
    );
    for (time, header, rows) in &ours.samples {
        if !real.time_shape.is_empty() {
            assert_eq!(digit_shape(time), real.time_shape, "{time:?}");
        }
        assert_eq!(rows.len(), groups, "{rows:?}");
        let names: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(names, real.names, "same columns in the same order");
        let edges = if real.is_v4() {
            let shift = header.len().saturating_sub(real.header.len());
            assert!(shift == 0 || starts_lost, "{header:?} vs {:?}", real.header);
            assert_eq!(&header[shift..], real.header, "the header, byte for byte");
            real.edges.iter().map(|e| e + shift).collect()
        } else {
            // A pre-v4.0 sample (narrower cells): v25.04 prints 12-character cells, so only
            // the names, formats, TIME line and order are compared.
            assert!(real.edges.windows(2).any(|w| w[1] - w[0] != 12));
            right_edges(header)
        };
        assert_eq!(Some(header.len()), edges.last().copied(), "{header:?}");
        let mut firsts = Vec::new();
        let mut llcs = Vec::new();
        for row in rows {
            assert_eq!(
                row.len(),
                header.len(),
                "row as wide as the header: {row:?}"
            );
            let c = cells(row, &edges);
            let formats: Vec<String> = c[1..].iter().map(|c| number_format(c)).collect();
            assert_eq!(formats, real.formats, "number formats of {row:?}");
            let group = c[0].trim();
            firsts.push(
                group
                    .split(['-', ','])
                    .next()
                    .and_then(|f| f.parse::<u32>().ok())
                    .expect("group label"),
            );
            let llc_col = real
                .names
                .iter()
                .position(|n| n.starts_with("LLC["))
                .expect("LLC");
            llcs.push(c[llc_col].trim().parse::<f64>().expect("LLC"));
        }
        match real.order {
            Order::ByCore => assert!(firsts.is_sorted(), "core order: {firsts:?}"),
            Order::ByLlcDescending => {
                assert!(llcs.is_sorted_by(|a, b| a >= b), "LLC order: {llcs:?}");
            }
        }
    }
}

#[test]
fn golden_top_view_issue161() {
    // `pqos -T` on every core: sorted by LLC, descending.
    golden_text("intel_pqos-T_monitor_text_issue161.txt", &["-T"], 56, false);
}

#[test]
fn golden_text_with_mbl_mbr_issue163() {
    // Rows in LLC order: a -T run too.
    golden_text("intel_pqos_monitor_text_issue163.txt", &["-T"], 56, false);
}

#[test]
fn golden_text_in_core_order_issue153() {
    // The sample's values come from a buggy build; its layout is v25.04's.
    golden_text(
        "intel_pqos_monitor_text_regression_issue153.txt",
        &["-m", "all:0-12"],
        13,
        false,
    );
}

#[test]
fn golden_single_core_issue283() {
    // The issue's excerpt lost the first characters of its lines.
    golden_text(
        "intel_pqos_monitor_single_core_issue283.txt",
        &["-m", "all:3"],
        1,
        true,
    );
}

#[test]
fn golden_llc_only_issue81() {
    // `pqos -m llc:63` (pre-v4.0 layout); the simulated Broadwell-EP's last core is 55.
    golden_text(
        "intel_pqos-m_llc_only_bdw_issue81.txt",
        &["-m", "llc:55"],
        1,
        false,
    );
}

#[test]
fn golden_every_core_issue59() {
    // `pqos-os` with no -m (pre-v4.0 layout): every core, in core order.
    golden_text("intel_pqos-os_monitor_text_issue59.txt", &[], 56, false);
}

/// Splits a CSV line on commas outside double quotes.
pub(crate) fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    for ch in line.chars() {
        match ch {
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            c => fields.last_mut().expect("a field").push(c),
        }
    }
    fields
}

#[test]
fn golden_csv_header_and_row_issue181() {
    let real = sample("intel_pqos_csv_issue181.txt");
    let mut real_lines = real.lines();
    let (real_header, real_row) = (
        real_lines.next().expect("header"),
        real_lines.next().expect("row"),
    );
    let sim = Sim::new("broadwell-ep");
    let out = sim
        .monitor(&["-m", "all:0", "-u", "csv", "-t", "1"])
        .ok()
        .raw_stdout;
    let body = out.strip_prefix(&note_banner()).expect("the banner first");
    let mut lines = body.lines();
    assert_eq!(lines.next(), Some(real_header), "the header, byte for byte");
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "{body}");
    let want = csv_fields(real_row);
    for row in rows {
        let got = csv_fields(row);
        assert_eq!(got.len(), want.len(), "{row}");
        assert_eq!(
            digit_shape(&got[0]),
            digit_shape(&want[0]),
            "timestamp: {row}"
        );
        assert!(
            row[got[0].len()..].starts_with(",\"0\","),
            "quoted group: {row}"
        );
        for (g, w) in got[2..].iter().zip(&want[2..]) {
            assert_eq!(number_format(g), number_format(w), "{row}");
        }
    }
}

/// `-m llc_ref:…` (pqos `parse_event`): references with IPC and misses added, in pqos's column
/// order, counted by the simulated PMU (a second general-purpose counter: CPUID.0AH).
#[test]
fn llc_references_are_monitored_when_asked_for() {
    let sim = Sim::new("broadwell-ep");
    let out = sim
        .monitor(&["-m", "llc_ref:1", "-u", "csv", "-t", "1"])
        .ok()
        .raw_stdout;
    let body = out.strip_prefix(&note_banner()).expect("the banner first");
    let mut lines = body.lines();
    assert_eq!(
        lines.next(),
        Some("Time,Core,IPC,LLC Misses,LLC References")
    );
    let last = csv_fields(lines.last().expect("a second sample"));
    let references: u64 = last[4].parse().expect("an integer count");
    assert!(references > 0, "{last:?}");
}

/// Telegraf's `intel_rdt` input: skip the four constant lines and one row per group (the
/// first, zero sample), then per line: the time, the last 6 fields as numbers.
fn telegraf_parse(stdout: &str, groups: usize) -> Vec<(String, Vec<f64>)> {
    stdout
        .lines()
        .skip(4 + groups)
        .filter(|l| !l.contains("err"))
        .map(|line| {
            let values: Vec<&str> = line.split(',').collect();
            assert!(values.len() >= 8, "not valid line format from pqos: {line}");
            assert_eq!(
                digit_shape(values[0]),
                "DDDD-DD-DD DD:DD:DD",
                "time.Parse: {line}"
            );
            let metrics = values[values.len() - 6..]
                .iter()
                .map(|v| v.parse().unwrap_or_else(|_| panic!("{v} in {line}")))
                .collect();
            (values[0].to_owned(), metrics)
        })
        .collect()
}

#[test]
fn telegrafs_pqos_command_gets_the_four_line_preamble_it_skips() {
    // arrange: Telegraf's arguments (intel_rdt.go createArgsAndStartPQOS), less --iface-os.
    let sim = Sim::new("broadwell-ep");
    let out = sim
        .monitor(&[
            "-r",
            "--mon-file-type=csv",
            "--mon-interval=10",
            "--mon-core=all:[0-3];mbt:[0-3];all:[8-10];mbt:[8-10];",
            "-t",
            "3",
        ])
        .ok()
        .raw_stdout;
    // assert
    let preamble: String = out.lines().take(4).flat_map(|l| [l, "\n"]).collect();
    eqnice!(sample("telegraf_pqos_csv_preamble.txt"), preamble);
    let rows = telegraf_parse(&out, 2);
    assert_eq!(rows.len(), 3 * 2, "three more samples of two groups");
    for (_, m) in &rows {
        assert!(m.iter().all(|v| *v >= 0.0), "{m:?}");
    }
    assert!(
        rows.iter().any(|(_, m)| m[3] > 0.0),
        "some MBL traffic: {rows:?}"
    );
}

#[test]
fn a_csv_consumer_reads_every_row_of_a_simulated_minute_with_three_groups() {
    // arrange
    let sim = Sim::new("broadwell-ep");
    let out = sim
        .monitor(&[
            "-m",
            "all:[2-7];all:[8-10];llc:[20-23]",
            "-u",
            "csv",
            "-t",
            "60",
        ])
        .ok()
        .stdout;
    // act: a consumer that knows nothing but the CSV (skips what precedes the header)
    let mut lines = out.lines().skip_while(|l| !l.starts_with("Time,"));
    let header: Vec<String> = csv_fields(lines.next().expect("header"));
    assert_eq!(
        header,
        [
            "Time",
            "Core",
            "IPC",
            "LLC Misses",
            "LLC[KB]",
            "MBL[MB/s]",
            "MBR[MB/s]"
        ]
    );
    let mut per_time: std::collections::BTreeMap<String, Vec<String>> =
        std::collections::BTreeMap::new();
    let mut rows = 0;
    for line in lines {
        let f = csv_fields(line);
        assert_eq!(f.len(), header.len(), "{line}");
        let numbers: Vec<Option<f64>> = f[2..]
            .iter()
            .map(|v| (!v.is_empty()).then(|| v.parse().unwrap_or_else(|_| panic!("{v:?}: {line}"))))
            .collect();
        if f[1] == "20-23" {
            assert!(
                numbers[3].is_none() && numbers[4].is_none(),
                "no MBM for an llc group: {line}"
            );
            assert!(numbers[2].is_some(), "{line}");
        } else {
            assert!(numbers.iter().all(Option::is_some), "{line}");
        }
        assert!(numbers.iter().flatten().all(|v| *v >= 0.0), "{line}");
        per_time.entry(f[0].clone()).or_default().push(f[1].clone());
        rows += 1;
    }
    // assert: 61 samples (0..=60 s) of three groups, each sample complete and in core order
    assert_eq!(rows, 61 * 3);
    assert_eq!(per_time.len(), 61);
    for groups in per_time.values() {
        assert_eq!(groups, &["2-7", "8-10", "20-23"]);
    }
}

/// Starts a real-time monitoring run writing XML to `file`; returns once it has written
/// two samples.
fn spawn_xml_run(sim: &Sim, file: &Path) -> Child {
    let child = sim.spawn(&[
        "-m",
        "all:0-3",
        "-i",
        "1",
        "-u",
        "xml",
        "-o",
        file.to_str().expect("utf-8 path"),
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(file).map_or(0, |t| t.matches("</record>").count()) < 8 {
        assert!(Instant::now() < deadline, "no samples written");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Parses the whole XML document; returns the number of `<record>`s and the fields of the
/// last one.
fn parse_xml(text: &str) -> (usize, Vec<String>) {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(text);
    let mut depth = 0usize;
    let mut records = 0;
    let mut last = Vec::new();
    let mut closed_root = false;
    loop {
        match reader
            .read_event()
            .unwrap_or_else(|e| panic!("XML error {e}:\n{text}"))
        {
            Event::Start(e) => {
                depth += 1;
                if e.name().as_ref() == b"record" {
                    records += 1;
                    last.clear();
                } else if depth == 3 {
                    last.push(String::from_utf8_lossy(e.name().as_ref()).into_owned());
                }
            }
            Event::End(e) => {
                depth -= 1;
                if depth == 0 {
                    assert_eq!(e.name().as_ref(), b"records");
                    closed_root = true;
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert!(closed_root, "</records> written:\n{text}");
    assert_eq!(depth, 0);
    (records, last)
}

fn stops_cleanly_on(signal: nix::sys::signal::Signal) {
    // arrange
    let sim = Sim::new("broadwell-ep");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("m.xml");
    let child = spawn_xml_run(&sim, &file);
    // act
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, signal).expect("kill");
    let out = child.wait_with_output().expect("wait");
    // assert
    assert!(
        out.status.success(),
        "{signal}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).expect("xml file");
    let (records, last) = parse_xml(&text);
    assert_eq!(records % 4, 0, "whole samples only: {records}");
    assert_eq!(
        last,
        [
            "time",
            "core",
            "ipc",
            "llc_misses",
            "l3_occupancy_kB",
            "mbm_local_MB",
            "mbm_remote_MB"
        ],
        "the last record is complete"
    );
    assert!(text.ends_with("</record>\n</records>\n"));
    // The groups were stopped: every core is back on RMID0.
    let s = sim.pqos(&["-s"]).ok().stdout;
    assert!(
        s.lines()
            .filter(|l| l.starts_with("    Core "))
            .all(|l| l.ends_with("RMID0")),
        "{s}"
    );
}

#[test]
fn sigint_closes_the_xml_file_and_releases_the_rmids() {
    stops_cleanly_on(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn sigterm_closes_the_xml_file_and_releases_the_rmids() {
    stops_cleanly_on(nix::sys::signal::Signal::SIGTERM);
}

#[test]
fn sighup_closes_the_xml_file_and_releases_the_rmids() {
    stops_cleanly_on(nix::sys::signal::Signal::SIGHUP);
}

#[test]
fn a_closed_stdout_pipe_ends_the_run_quietly_and_releases_the_rmids() {
    // arrange: `pqos ... | head -3`, in real time, no -t
    let sim = Sim::new("broadwell-ep");
    let mut child = sim.spawn(&["-m", "all:0-3", "-i", "1"]);
    // act: read three lines, then close the pipe
    let stdout = child.stdout.take().expect("stdout");
    let mut reader = BufReader::new(stdout);
    for _ in 0..3 {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a line");
    }
    drop(reader);
    let out = child.wait_with_output().expect("wait");
    // assert
    assert!(out.status.success(), "{:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("error"), "quiet: {stderr}");
    let s = sim.pqos(&["-s"]).ok().stdout;
    assert!(
        s.lines()
            .filter(|l| l.starts_with("    Core "))
            .all(|l| l.ends_with("RMID0")),
        "{s}"
    );
}

/// Open file descriptors and resident memory (KiB) of a running process.
fn fds_and_rss(pid: u32) -> Option<(usize, u64)> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some((fds, rss))
}

/// Two simulated hours (72,000 samples of two groups, about 5 s): long enough for some 240
/// wraps of the 24-bit MBM counters and for a leak of 60 bytes a sample to pass the 4 MiB
/// bound on resident memory. (A simulated day took 60 s, 28% of the suite's test time, for
/// no behaviour these hours do not reach.)
#[test]
fn two_simulated_hours_at_100_ms_survive_counter_wraps_without_leaks() {
    // arrange: broadwell-ep counts MBM in 24-bit counters (CPUID.0xF.1:EAX[7:0] = 0), so
    // the thrasher's 36000 MiB/s wraps them about every half minute.
    let sim = Sim::new("broadwell-ep");
    let d = sim.pqos(&["-D"]).ok().stdout;
    let mbm = &d[d.find("Memory Bandwidth Monitoring").expect("MBM")..];
    assert!(
        mbm.contains("counter length: 24b"),
        "a 24-bit-counter model:\n{d}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file: PathBuf = dir.path().join("day.csv");
    let mut cmd = sim.command(&[
        "-m",
        "all:[2-7];all:[8-10]",
        "-i",
        "1",
        "-t",
        "7200",
        "-u",
        "csv",
        "-o",
        file.to_str().expect("utf-8"),
        "--sim-virtual-clock",
    ]);
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // act: watch the process while it runs
    let mut seen: Vec<(u64, usize, u64)> = Vec::new();
    let started = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        let len = std::fs::metadata(&file).map_or(0, |m| m.len());
        if len > 0
            && let Some((fds, rss)) = fds_and_rss(child.id())
        {
            seen.push((len, fds, rss));
        }
        assert!(started.elapsed() < Duration::from_mins(10), "too slow");
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    // assert: every row there, bandwidth never negative nor above what the model's
    // workloads can move (pipeline 6 x 400 MiB/s, thrasher 3 x 12000 MiB/s).
    let text = std::fs::read_to_string(&file).expect("csv");
    let mut rows = 0usize;
    for line in text.lines().skip(1) {
        let f = csv_fields(line);
        let bound = if f[1] == "2-7" {
            6.0 * 400.0
        } else {
            3.0 * 12000.0
        };
        for v in &f[5..7] {
            let mbps: f64 = v.parse().unwrap_or_else(|_| panic!("{line}"));
            assert!((0.0..=bound * 1.01).contains(&mbps), "{line}");
        }
        rows += 1;
    }
    assert_eq!(rows, (72_000 + 1) * 2);
    // No growth in descriptors; memory bounded (observations from the first file write on).
    assert!(seen.len() >= 3, "observed the run: {seen:?}");
    let (_, fds0, rss0) = seen[0];
    let (_, fds_max, rss_max) = seen
        .iter()
        .fold((0, 0, 0), |a, s| (0, a.1.max(s.1), a.2.max(s.2)));
    assert_eq!(fds_max, fds0, "file descriptors: {seen:?}");
    assert!(
        rss_max <= rss0 + 4096,
        "VmRSS grew by more than 4 MiB: {seen:?}"
    );
}

/// `--mon-uncore` on Skylake-SP (pqos `lib/uncore_monitoring.c`, `pqos/monitor_text.c`,
/// `monitor_csv.c`): one row per socket, the four PCIe columns (text `" %11s"` headers,
/// `" %10.0fk"` cells; CSV long names and raw counts), counts of the simulated CHAs.
#[test]
fn uncore_monitoring_on_skylake_sp_counts_the_pcie_events_of_each_socket() {
    let sim = Sim::new("skylake-sp");
    let text = sim.monitor(&["--mon-uncore", "-t", "1"]).ok().raw_stdout;
    let body = text.strip_prefix(&note_banner()).expect("the banner first");
    let lines: Vec<&str> = body.lines().collect();
    let header = "  SOCKET   MISS_READ  MISS_WRITE    REF_READ   REF_WRITE";
    assert_eq!(lines[1], header, "{body}");
    let last: Vec<&str> = lines.iter().rev().take(2).rev().copied().collect();
    for (row, socket) in last.iter().zip(["       0", "       1"]) {
        assert_eq!(&row[..8], socket, "{body}");
        assert_eq!(row.len(), header.len(), "{row:?}");
        let cells = cells(row, &right_edges(header));
        assert!(
            cells[1..]
                .iter()
                .all(|c| c.ends_with('k')
                    && c.trim().trim_end_matches('k').parse::<u64>().unwrap() > 0),
            "{row:?}"
        );
    }
    let csv = sim
        .monitor(&["--mon-uncore=all:[0-1]", "-u", "csv", "-t", "1"])
        .ok()
        .raw_stdout;
    let mut csv_lines = csv.strip_prefix(&note_banner()).unwrap().lines();
    assert_eq!(
        csv_lines.next(),
        Some(
            "Time,Socket,LLC Misses Read,LLC Misses Write,LLC References Read,LLC References Write"
        )
    );
    let last = csv_fields(csv_lines.last().unwrap());
    assert_eq!(last[1], "0-1");
    let counts: Vec<u64> = last[2..].iter().map(|c| c.parse().unwrap()).collect();
    assert!(
        counts.iter().all(|&n| n > 0) && counts[2] >= counts[0],
        "{last:?}"
    );
}

/// pqos lists the uncore events on CPU model 0x55 only, and starts no uncore group
/// elsewhere (it reports `Uncore monitoring start error on socket 0, status 1`).
#[test]
fn uncore_monitoring_is_refused_where_pqos_has_no_uncore_events() {
    let run = Sim::new("broadwell-ep")
        .monitor(&["--mon-uncore", "-t", "1"])
        .failed();
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(
            "Uncore monitoring start error on socket 0: this CPU has no uncore PCIe events"
        ),
        "{}",
        run.stderr
    );
    let run = Sim::new("skylake-sp")
        .monitor(&["--mon-uncore=llc:0", "-t", "1"])
        .failed();
    assert!(
        run.stderr.contains("only the event 'all'"),
        "{}",
        run.stderr
    );
}
