//! `-d` / `-D`: the capability report (pqos/cap.c `cap_print_features`, v25.04).
//!
//! v25.04 prints `Non-Contiguous CBM:` and the `I/O RDT:` lines (they came with I/O RDT in
//! v23.11; its `pqos/cap.c`, copyright 2017-2023, has them). Older releases (the 2020
//! sample of issue #143) did not; master renames `Num COS` to `Num CLOS`.

use std::io::Write;

use anyhow::{Result, bail};
use rdt_pqos::{
    Backend, CacheGeometry, Capabilities, CatCaps, Interface, MbaCaps, MbaCtrl, MbaKind,
    MonitoringCaps, PmuCaps, Vendor,
};

/// Prints the capabilities of `backend`'s platform.
///
/// # Errors
/// pqos's `No Platform QoS capability discovered` when there is nothing to show.
pub fn run_display<B: Backend>(
    backend: &mut B,
    verbose: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let ctrl = match backend.interface() {
        // pqos prints the MBA controller's state on the OS interface only.
        Interface::Os => Some(backend.mba_ctrl().unwrap_or(MbaCtrl::Unsupported)),
        Interface::Msr => None,
    };
    if json {
        return print_capabilities_json(backend.capabilities(), backend.interface(), ctrl, out);
    }
    print_capabilities(
        backend.capabilities(),
        backend.interface(),
        ctrl,
        verbose,
        out,
    )
}

/// Whether the platform has none of the features `-d` reports.
fn nothing_discovered(caps: &Capabilities) -> bool {
    caps.monitoring.get().is_none()
        && caps.l3_cat.get().is_none()
        && caps.l2_cat.get().is_none()
        && caps.mba.get().is_none()
        && caps.smba.get().is_none()
}

/// The running kernel's release (`/proc/sys/kernel/osrelease`), empty when unreadable.
fn kernel_release() -> String {
    rdt_pqos::file::read_text(
        std::path::Path::new("/proc/sys/kernel/osrelease"),
        rdt_pqos::file::MAX_KERNEL_TEXT_BYTES,
    )
    .map(|s| s.trim().to_owned())
    .unwrap_or_default()
}

fn line(out: &mut dyn Write, indent: usize, text: &str) -> std::io::Result<()> {
    writeln!(out, "{:indent$}{text}", "")
}

/// Writes pqos's `-d` (or with `verbose`, `-D`) report. `mba_ctrl` is the MBA software
/// controller's state, printed as `CTRL:` under MBA (and `unsupported` under SMBA) when given,
/// as pqos does on the OS interface.
///
/// # Errors
/// `No Platform QoS capability discovered`, or an output error.
pub fn print_capabilities(
    caps: &Capabilities,
    iface: Interface,
    mba_ctrl: Option<MbaCtrl>,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mon = caps.monitoring.get();
    let l3 = caps.l3_cat.get();
    let l2 = caps.l2_cat.get();
    let mba = caps.mba.get();
    let smba = caps.smba.get();
    if nothing_discovered(caps) {
        bail!("No Platform QoS capability discovered");
    }
    match iface {
        Interface::Msr => line(out, 0, "Hardware capabilities")?,
        Interface::Os => line(
            out,
            0,
            &format!("OS capabilities (Linux kernel {})", kernel_release()),
        )?,
    }
    if let Some(m) = mon {
        print_monitoring(out, m, caps.pmu, verbose)?;
    }
    if l3.is_some() || l2.is_some() || mba.is_some() {
        line(out, 4, "Allocation")?;
    }
    if l3.is_some() || l2.is_some() {
        line(out, 8, "Cache Allocation Technology (CAT)")?;
    }
    if let Some(c) = l3 {
        print_cat(out, "L3 CAT", c, caps.l3_cache.as_ref(), true, verbose)?;
    }
    if let Some(c) = l2 {
        print_cat(out, "L2 CAT", c, caps.l2_cache.as_ref(), false, verbose)?;
    }
    if let Some(m) = mba {
        print_mba(
            out,
            "Memory Bandwidth Allocation (MBA)",
            m,
            mba_ctrl,
            verbose,
            true,
        )?;
    }
    if let Some(m) = smba {
        print_mba(
            out,
            "Slow Memory Bandwidth Allocation (SMBA)",
            m,
            // The kernel's controller drives MBA only.
            mba_ctrl.map(|_| MbaCtrl::Unsupported),
            verbose,
            false,
        )?;
    }
    if verbose {
        line(out, 0, "Cache information")?;
        for (name, geometry) in [("L3 Cache", &caps.l3_cache), ("L2 Cache", &caps.l2_cache)] {
            if let Some(g) = geometry {
                line(out, 4, name)?;
                line(out, 8, &format!("Num ways: {}", g.ways))?;
                line(out, 8, &format!("Way size: {} bytes", g.way_size()))?;
                line(out, 8, &format!("Num sets: {}", g.sets))?;
                line(out, 8, &format!("Line size: {} bytes", g.line_size))?;
                line(out, 8, &format!("Total size: {} bytes", g.total_size()))?;
            }
        }
    }
    Ok(())
}

fn print_monitoring(
    out: &mut dyn Write,
    m: &MonitoringCaps,
    pmu_caps: PmuCaps,
    verbose: bool,
) -> Result<()> {
    line(out, 4, "Monitoring")?;
    // (name, per-RMID event) in pqos's MSR capability order
    let mut cache = Vec::new();
    let mut memory = Vec::new();
    let mut pmu = Vec::new();
    if m.events.llc_occupancy {
        cache.push("LLC Occupancy (LLC)");
    }
    if m.events.mbm_total {
        memory.push("Total Memory Bandwidth (TMEM)");
    }
    if m.events.mbm_local {
        memory.push("Local Memory Bandwidth (LMEM)");
    }
    if m.events.mbm_total && m.events.mbm_local {
        memory.push("Remote Memory Bandwidth (RMEM) (calculated)");
    }
    if pmu_caps.ipc {
        pmu.push("Instructions/Clock (IPC)");
    }
    if pmu_caps.llc_misses {
        pmu.push("LLC misses");
    }
    let io_rdt = if m.io_rdt { "disabled" } else { "unsupported" };
    for (title, events) in [
        ("Cache Monitoring Technology (CMT) events:", &cache),
        ("Memory Bandwidth Monitoring (MBM) events:", &memory),
    ] {
        if events.is_empty() {
            continue;
        }
        line(out, 8, title)?;
        for name in events {
            line(out, 12, name)?;
            line(out, 17, &format!("I/O RDT: {io_rdt}"))?;
            if verbose {
                if m.upscaling_factor != 0 {
                    line(out, 17, &format!("scale factor: {}", m.upscaling_factor))?;
                }
                if m.num_rmids != 0 {
                    line(out, 17, &format!("max rmid: {}", m.num_rmids))?;
                }
                if m.counter_width != 0 {
                    line(out, 17, &format!("counter length: {}b", m.counter_width))?;
                }
            }
        }
    }
    if !pmu.is_empty() {
        line(out, 8, "PMU events:")?;
        for name in pmu {
            line(out, 12, name)?;
        }
    }
    Ok(())
}

fn print_cat(
    out: &mut dyn Write,
    name: &str,
    c: &CatCaps,
    cache: Option<&CacheGeometry>,
    io_rdt_line: bool,
    verbose: bool,
) -> Result<()> {
    line(out, 12, name)?;
    line(out, 16, &format!("CDP: {}", cdp_state(c)))?;
    let nc = if c.non_contiguous_cbm {
        "supported"
    } else {
        "unsupported"
    };
    line(out, 16, &format!("Non-Contiguous CBM: {nc}"))?;
    if io_rdt_line {
        let io = if c.io_rdt { "disabled" } else { "unsupported" };
        line(out, 16, &format!("I/O RDT: {io}"))?;
    }
    line(out, 16, &format!("Num COS: {}", c.usable_classes()))?;
    if verbose {
        if let Some(g) = cache {
            line(out, 16, &format!("Way size: {} bytes", g.way_size()))?;
        }
        line(
            out,
            16,
            &format!("Ways contention bit-mask: {:#x}", c.shareable_bits),
        )?;
        line(out, 16, &format!("Min CBM bits: {}", c.min_cbm_bits))?;
        line(out, 16, &format!("Max CBM bits: {}", c.cbm_len))?;
    }
    Ok(())
}

fn print_mba(
    out: &mut dyn Write,
    title: &str,
    m: &MbaCaps,
    ctrl: Option<MbaCtrl>,
    verbose: bool,
    mba40: bool,
) -> Result<()> {
    line(out, 8, title)?;
    line(out, 12, &format!("Num COS: {}", m.num_classes))?;
    if let Some(ctrl) = ctrl {
        line(out, 12, &format!("CTRL: {}", ctrl_state(ctrl)))?;
    }
    if verbose {
        // pqos's throttle_max is 0 and is_linear 0 for AMD.
        let (max_delay, linear) = match m.kind {
            MbaKind::IntelDelay {
                max_delay, linear, ..
            } => (max_delay, linear),
            MbaKind::AmdBandwidth { .. } => (0, false),
        };
        line(out, 12, &format!("Granularity: {}", m.granularity()))?;
        line(
            out,
            12,
            &format!("Min B/W: {}", 100u32.saturating_sub(max_delay)),
        )?;
        line(
            out,
            12,
            &format!("Type: {}", if linear { "linear" } else { "nonlinear" }),
        )?;
        if mba40 {
            line(out, 12, "MBA 4.0 extensions: unsupported")?;
        }
    }
    Ok(())
}

/// `-d`/`-D` with `-u json`: the capabilities as one JSON document (schema:
/// `docs/json/capabilities.schema.json`, described in `docs/json.md`). The same fields as
/// `-D` prints, with units in the field names; resources the platform lacks are `null`.
#[derive(Debug, serde::Serialize)]
struct CapsDoc {
    interface: &'static str,
    /// The running kernel's release on the OS interface (pqos's `OS capabilities (Linux
    /// kernel X)`), `null` on MSR.
    kernel: Option<String>,
    vendor: String,
    monitoring: Option<MonDoc>,
    l3_cat: Option<CatDoc>,
    l2_cat: Option<CatDoc>,
    mba: Option<MbaDoc>,
    smba: Option<MbaDoc>,
    l3_cache: Option<CacheDoc>,
    l2_cache: Option<CacheDoc>,
}

#[derive(Debug, serde::Serialize)]
struct MonDoc {
    /// pqos's event names in `-m`'s grammar: `llc`, `mbl`, `mbt`, `mbr`, `ipc`, `llc_miss`.
    events: Vec<&'static str>,
    num_rmids: u32,
    upscaling_factor_bytes: u32,
    counter_width_bits: u32,
    io_rdt: bool,
}

#[derive(Debug, serde::Serialize)]
struct CatDoc {
    num_classes: u32,
    cdp: &'static str,
    non_contiguous_cbm: bool,
    io_rdt: bool,
    cbm_len_bits: u32,
    min_cbm_bits: u32,
    shareable_mask: String,
    way_size_bytes: Option<u64>,
}

#[derive(Debug, serde::Serialize)]
struct MbaDoc {
    num_classes: u32,
    /// `intel` (delay, percent steps) or `amd` (1/8 GB/s units).
    kind: &'static str,
    /// `enabled`/`disabled`/`unsupported` on the OS interface, `null` on MSR.
    ctrl: Option<&'static str>,
    granularity: u32,
    min_bandwidth_percent: Option<u32>,
    linear: Option<bool>,
}

#[derive(Debug, serde::Serialize)]
struct CacheDoc {
    ways: u32,
    way_size_bytes: u64,
    sets: u32,
    line_size_bytes: u32,
    total_size_bytes: u64,
}

const fn cdp_state(c: &CatCaps) -> &'static str {
    match (c.cdp_supported, c.cdp_enabled) {
        (false, _) => "unsupported",
        (true, true) => "enabled",
        (true, false) => "disabled",
    }
}

const fn ctrl_state(ctrl: MbaCtrl) -> &'static str {
    match ctrl {
        MbaCtrl::Unsupported => "unsupported",
        MbaCtrl::Disabled => "disabled",
        MbaCtrl::Enabled => "enabled",
    }
}

/// The events `-d` lists, by pqos's `-m` names, in `-d`'s order.
fn event_names(m: &MonitoringCaps, pmu: PmuCaps) -> Vec<&'static str> {
    let e = &m.events;
    [
        (e.llc_occupancy, "llc"),
        (e.mbm_total, "mbt"),
        (e.mbm_local, "mbl"),
        (e.mbm_total && e.mbm_local, "mbr"),
        (pmu.ipc, "ipc"),
        (pmu.llc_misses, "llc_miss"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect()
}

fn cat_doc(c: &CatCaps, cache: Option<&CacheGeometry>) -> CatDoc {
    CatDoc {
        num_classes: c.usable_classes(),
        cdp: cdp_state(c),
        non_contiguous_cbm: c.non_contiguous_cbm,
        io_rdt: c.io_rdt,
        cbm_len_bits: c.cbm_len,
        min_cbm_bits: c.min_cbm_bits,
        shareable_mask: format!("{:#x}", c.shareable_bits),
        way_size_bytes: cache.map(CacheGeometry::way_size),
    }
}

fn mba_doc(m: &MbaCaps, ctrl: Option<MbaCtrl>) -> MbaDoc {
    let (kind, min, linear) = match m.kind {
        MbaKind::IntelDelay {
            max_delay, linear, ..
        } => (
            "intel",
            Some(100u32.saturating_sub(max_delay)),
            Some(linear),
        ),
        MbaKind::AmdBandwidth { .. } => ("amd", None, None),
    };
    MbaDoc {
        num_classes: m.num_classes,
        kind,
        ctrl: ctrl.map(ctrl_state),
        granularity: m.granularity(),
        min_bandwidth_percent: min,
        linear,
    }
}

fn cache_doc(g: &CacheGeometry) -> CacheDoc {
    CacheDoc {
        ways: g.ways,
        way_size_bytes: g.way_size(),
        sets: g.sets,
        line_size_bytes: g.line_size,
        total_size_bytes: g.total_size(),
    }
}

/// Writes the capabilities as one JSON document and a newline (`-d`/`-D` with `-u json`;
/// both give every detail).
///
/// # Errors
/// `No Platform QoS capability discovered`, or an output error.
pub fn print_capabilities_json(
    caps: &Capabilities,
    iface: Interface,
    mba_ctrl: Option<MbaCtrl>,
    out: &mut dyn Write,
) -> Result<()> {
    if nothing_discovered(caps) {
        bail!("No Platform QoS capability discovered");
    }
    let doc = CapsDoc {
        interface: match iface {
            Interface::Msr => "msr",
            Interface::Os => "os",
        },
        kernel: (iface == Interface::Os).then(kernel_release),
        vendor: match &caps.vendor {
            Vendor::Intel => "intel".to_owned(),
            Vendor::Amd => "amd".to_owned(),
            Vendor::Hygon => "hygon".to_owned(),
            Vendor::Other(s) => s.clone(),
            _ => "unknown".to_owned(),
        },
        monitoring: caps.monitoring.get().map(|m| MonDoc {
            events: event_names(m, caps.pmu),
            num_rmids: m.num_rmids,
            upscaling_factor_bytes: m.upscaling_factor,
            counter_width_bits: m.counter_width,
            io_rdt: m.io_rdt,
        }),
        l3_cat: caps
            .l3_cat
            .get()
            .map(|c| cat_doc(c, caps.l3_cache.as_ref())),
        l2_cat: caps
            .l2_cat
            .get()
            .map(|c| cat_doc(c, caps.l2_cache.as_ref())),
        mba: caps.mba.get().map(|m| mba_doc(m, mba_ctrl)),
        smba: caps
            .smba
            .get()
            .map(|m| mba_doc(m, mba_ctrl.map(|_| MbaCtrl::Unsupported))),
        l3_cache: caps.l3_cache.as_ref().map(cache_doc),
        l2_cache: caps.l2_cache.as_ref().map(cache_doc),
    };
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use rdt_pqos::Feature;
    use rdt_pqos::fake::fixtures;

    use super::*;
    use rdt_pqos::fake::FakeBackend;

    fn display(b: &mut FakeBackend, verbose: bool) -> String {
        let mut out = Vec::new();
        run_display(b, verbose, false, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The `pqos -d` of issue #143 (MSR, L3 CAT 16 COS, MBA 8 COS) in v25.04's layout:
    /// the sample's lines plus the `I/O RDT` and `Non-Contiguous CBM` lines v25.04 adds.
    #[test]
    fn matches_real_pqos_d_in_the_v25_04_layout() {
        // arrange
        let mut b = FakeBackend::broadwell_2s();
        b.reconfigure(|c| {
            c.mba = Feature::Supported(fixtures::intel_mba(8));
        });
        let sample = crate::testdata::sample("intel_pqos-d_hw_issue143.txt");
        let legacy: String = sample
            .lines()
            .skip_while(|l| *l != "Hardware capabilities")
            .flat_map(|l| [l, "\n"])
            .collect();
        // act
        let got = display(&mut b, false);
        // assert: the same report once the v25.04-only lines are taken out
        let without_new_lines: String = got
            .lines()
            .filter(|l| !l.contains("I/O RDT:") && !l.contains("Non-Contiguous CBM:"))
            .flat_map(|l| [l, "\n"])
            .collect();
        assert_eq!(without_new_lines, legacy);
        assert_eq!(
            got,
            "Hardware capabilities
    Monitoring
        Cache Monitoring Technology (CMT) events:
            LLC Occupancy (LLC)
                 I/O RDT: unsupported
        Memory Bandwidth Monitoring (MBM) events:
            Total Memory Bandwidth (TMEM)
                 I/O RDT: unsupported
            Local Memory Bandwidth (LMEM)
                 I/O RDT: unsupported
            Remote Memory Bandwidth (RMEM) (calculated)
                 I/O RDT: unsupported
        PMU events:
            Instructions/Clock (IPC)
            LLC misses
    Allocation
        Cache Allocation Technology (CAT)
            L3 CAT
                CDP: disabled
                Non-Contiguous CBM: unsupported
                I/O RDT: unsupported
                Num COS: 16
        Memory Bandwidth Allocation (MBA)
            Num COS: 8
"
        );
    }

    #[test]
    fn verbose_adds_event_details_cat_details_and_cache_information() {
        let mut b = FakeBackend::broadwell_2s();
        let got = display(&mut b, true);
        assert!(
            got.contains(
                "            LLC Occupancy (LLC)
                 I/O RDT: unsupported
                 scale factor: 65536
                 max rmid: 176
                 counter length: 24b
"
            ),
            "{got}"
        );
        assert!(
            got.contains(
                "                Num COS: 16
                Way size: 1835008 bytes
                Ways contention bit-mask: 0x0
                Min CBM bits: 1
                Max CBM bits: 20
Cache information
    L3 Cache
        Num ways: 20
        Way size: 1835008 bytes
        Num sets: 28672
        Line size: 64 bytes
        Total size: 36700160 bytes
    L2 Cache
"
            ),
            "{got}"
        );
    }

    #[test]
    fn cdp_on_halves_the_classes_and_l2_has_no_io_rdt_line() {
        let mut b = FakeBackend::intel_1s();
        b.enable_l3_cdp();
        let got = display(&mut b, false);
        assert!(got.contains("                CDP: enabled\n                Non-Contiguous CBM: unsupported\n                I/O RDT: unsupported\n                Num COS: 8\n"), "{got}");
        assert!(got.contains("            L2 CAT\n                CDP: unsupported\n                Non-Contiguous CBM: unsupported\n                Num COS: 8\n"), "{got}");
    }

    #[test]
    fn nothing_to_show_is_pqos_error() {
        let mut b = FakeBackend::broadwell_2s();
        b.reconfigure(|c| {
            c.monitoring = Feature::Unsupported;
            c.l3_cat = Feature::Unsupported;
        });
        let e = run_display(&mut b, false, false, &mut Vec::new()).unwrap_err();
        assert_eq!(e.to_string(), "No Platform QoS capability discovered");
    }
}
