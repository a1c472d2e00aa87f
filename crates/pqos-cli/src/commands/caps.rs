//! `-d` / `-D`: the capability report (pqos/cap.c `cap_print_features`, v25.04).
//!
//! v25.04 prints `Non-Contiguous CBM:` and the `I/O RDT:` lines (they came with I/O RDT in
//! v23.11; its `pqos/cap.c`, copyright 2017-2023, has them). Older releases (the 2020
//! sample of issue #143) did not; master renames `Num COS` to `Num CLOS`.

use std::io::Write;

use anyhow::{Result, bail};
use rdt_pqos::{
    Backend, CacheGeometry, Capabilities, CatCaps, Interface, MbaCaps, MbaCtrl, MbaKind,
    MonitoringCaps, PmuCaps,
};

/// Prints the capabilities of `backend`'s platform.
///
/// # Errors
/// pqos's `No Platform QoS capability discovered` when there is nothing to show.
pub fn run_display<B: Backend>(backend: &mut B, verbose: bool, out: &mut dyn Write) -> Result<()> {
    let ctrl = match backend.interface() {
        // pqos prints the MBA controller's state on the OS interface only.
        Interface::Os => Some(backend.mba_ctrl().unwrap_or(MbaCtrl::Unsupported)),
        Interface::Msr => None,
    };
    print_capabilities(
        backend.capabilities(),
        backend.interface(),
        ctrl,
        verbose,
        out,
    )
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
    if mon.is_none() && l3.is_none() && l2.is_none() && mba.is_none() && smba.is_none() {
        bail!("No Platform QoS capability discovered");
    }
    match iface {
        Interface::Msr => line(out, 0, "Hardware capabilities")?,
        Interface::Os => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            line(
                out,
                0,
                &format!("OS capabilities (Linux kernel {})", release.trim()),
            )?;
        }
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
    let cdp = match (c.cdp_supported, c.cdp_enabled) {
        (false, _) => "unsupported",
        (true, true) => "enabled",
        (true, false) => "disabled",
    };
    line(out, 12, name)?;
    line(out, 16, &format!("CDP: {cdp}"))?;
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
        let state = match ctrl {
            MbaCtrl::Unsupported => "unsupported",
            MbaCtrl::Disabled => "disabled",
            MbaCtrl::Enabled => "enabled",
        };
        line(out, 12, &format!("CTRL: {state}"))?;
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

#[cfg(test)]
mod tests {
    use rdt_pqos::Feature;
    use rdt_pqos::fake::fixtures;

    use super::*;
    use rdt_pqos::fake::FakeBackend;

    fn display(b: &mut FakeBackend, verbose: bool) -> String {
        let mut out = Vec::new();
        run_display(b, verbose, &mut out).unwrap();
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
        let e = run_display(&mut b, false, &mut Vec::new()).unwrap_err();
        assert_eq!(e.to_string(), "No Platform QoS capability discovered");
    }
}
