//! What platform discovery found, in the words pqos's library logs it at `INFO` level
//! (`-v`), so that a log read for pqos reads the same here.
//!
//! - [`cache_sharing_lines`]: one `CACHE: type T, level L, max id sharing this cache N (B bits)`
//!   per cache CPUID enumerates (pqos `lib/cpuinfo.c`, `detect_apic_cache_masks`: type 1
//!   data, 2 instruction, 3 unified; N = EAX\[25:14\] + 1 of leaf 04H, or 8000_001DH on AMD;
//!   B = [`pqos_sharing_bits`]: `ceil(log2(N))`, except that pqos's `nearest_pow2` returns
//!   N itself below 2, so a cache of one thread (an SMT-off EPYC's L1 and L2) logs `(1 bits)`).
//! - [`Capabilities::discovery_lines`]: the outcome per resource (pqos `lib/cap.c`,
//!   `discover_capabilities`): `Monitoring capability detected`, `L3CA capability detected`
//!   with its `L3 CAT details:` (CDP supported/on,
//!   classes usable now, ways, contention mask, cache and way size in bytes, I/O RDT), the
//!   same for L2, `MBA details: #COS=N, linear, max=M, step=S` (Intel: M = the maximum
//!   delay, S = 100 − M; AMD: `non-linear, max=100, step=1` on the OS interface, `non-linear,
//!   max=0, step=0` on MSR, as pqos derives them), SMBA likewise, or `... capability
//!   not detected`.
//! - On the MSR interface of an Intel part, pqos's per-probe lines before each outcome
//!   (`lib/hw_cap.c`): `CPUID.0x7.0: L3 CAT supported` and `L3 CDP is enabled|disabled`
//!   (`hw_cap_l3ca_discover`, `l3cdp_is_enabled`), `CPUID 0x10.0: L2 CAT not supported!`
//!   (`hw_cap_l2ca_discover`), `Detected MBA version N.0` and `Detected Per-Core|Thread MBA
//!   controls` (`hw_cap_mba_discover`: version 3 with per-thread MBA, CPUID.(10H,3):ECX\[0\];
//!   2 with more than 8 classes; else 1), and the `WARN:` of a part without monitoring or
//!   without enumerated CAT (`Cache allocation not supported on model name '...'!`). Whether
//!   CPUID.7.0:EBX\[15\] is set is read from the capabilities: any allocation feature
//!   enumerated. pqos's MBA 2.0 lines read from MBA_CFG per socket (`Min|Max MBA delay
//!   enabled on socket N`) need the register and are not derived here; nor are pqos's
//!   OS-interface probes (lib/os_cap.c) or AMD's.
//! - [`Capabilities::init_lines`]: the whole of pqos's library initialisation around the
//!   discovery lines: `resctrl detected`, `OS support for MBA CTRL ...`, the `DEBUG:` line
//!   `Max RMID per monitoring cluster is N` (MSR, `lib/hw_monitoring.c`, at `DEBUG` level as
//!   pqos logs it: issue 150's 4.1 log), `Detected perf monitoring support for ...` and
//!   `Detected resctrl support for ...` (`lib/perf_monitoring.c`,
//!   `lib/resctrl_monitoring.c`).

use crate::caps::{CatCaps, MbaCaps, MbaKind};
use crate::cpuid::{CpuidSource, raw_cpuid};
use crate::detect::ceil_log2;
use crate::{CacheGeometry, Capabilities, Feature, Interface, MbaCtrl, Vendor};
use log::Level;

/// pqos's `CACHE:` lines for the caches `src` enumerates (module docs).
#[must_use]
pub fn cache_sharing_lines(src: &dyn CpuidSource) -> Vec<String> {
    raw_cpuid(src)
        .get_cache_parameters()
        .into_iter()
        .flatten()
        .map(|cp| {
            let sharing = u32::try_from(cp.max_cores_for_cache()).unwrap_or(u32::MAX);
            let kind = match cp.cache_type() {
                raw_cpuid::CacheType::Data => 1,
                raw_cpuid::CacheType::Instruction => 2,
                _ => 3,
            };
            format!(
                "CACHE: type {kind}, level {}, max id sharing this cache {sharing} ({} bits)",
                cp.level(),
                pqos_sharing_bits(sharing)
            )
        })
        .collect()
}

/// The bits pqos logs for a cache shared by `n` ids: `lib/cpuinfo.c` `nearest_pow2`, which
/// returns `n` itself when `n < 2` and otherwise the bits of the nearest power of two not
/// below `n` (`ceil(log2(n))`). So 1 gives 1, as a real pqos prints it for an SMT-off
/// EPYC's L1 and L2 (`max id sharing this cache 1 (1 bits)`), and 2 gives 1, 16 gives 4.
#[must_use]
pub const fn pqos_sharing_bits(n: u32) -> u32 {
    if n < 2 { n } else { ceil_log2(n) }
}

fn cat_lines(name: &str, cat: &Feature<CatCaps>, cache: Option<&CacheGeometry>) -> Vec<String> {
    let Some(c) = cat.get() else {
        return vec![format!("{name}CA capability not detected")];
    };
    let way = cache.map_or(0, CacheGeometry::way_size);
    let mut lines = vec![
        format!("{name}CA capability detected"),
        format!(
            "{name} CAT details: CDP support={}, CDP on={}, #COS={}, #ways={}, ways contention \
             bit-mask {:#x}",
            u8::from(c.cdp_supported),
            u8::from(c.cdp_enabled),
            c.usable_classes(),
            c.cbm_len,
            c.shareable_bits
        ),
        format!(
            "{name} CAT details: cache size {} bytes, way size {way} bytes",
            way * u64::from(c.cbm_len)
        ),
    ];
    if name == "L3" {
        lines.push(format!(
            "L3 CAT details: I/O RDT support={}, I/O RDT on=0",
            u8::from(c.io_rdt)
        ));
    }
    lines
}

/// `MBA details:` / `SMBA details:` as pqos's `discover_capabilities` (lib/cap.c) logs its
/// `pqos_cap_mba`: `#COS=N, [non-]linear, max=throttle_max, step=throttle_step`. Intel: the
/// CPUID delay (`hw_cap_mba_discover`, or `os_cap_mba_discover` from `info/MB`, the same
/// numbers). AMD on MSR: `amd_cap_mba_discover` / `amd_cap_smba_discover` set
/// `throttle_max = 0`, `is_linear = 0` and leave the step 0. AMD on the OS interface:
/// `os_cap_mba_discover` reads `info/MB`: `throttle_max = 100 - min_bandwidth` (AMD's
/// `min_bandwidth` is 0: the kernel's `rdt_get_mem_config_amd`), `throttle_step =
/// bandwidth_gran` (1), linear iff `delay_linear` is 1 (it is 0 on AMD).
fn mba_lines(name: &str, mba: &Feature<MbaCaps>, interface: Interface) -> Vec<String> {
    let Some(m) = mba.get() else {
        return vec![format!("{name} capability not detected")];
    };
    let (linear, max, step) = match m.kind {
        MbaKind::IntelDelay {
            max_delay, linear, ..
        } => (linear, max_delay, m.granularity()),
        MbaKind::AmdBandwidth { .. } if interface == Interface::Os => (false, 100, 1),
        MbaKind::AmdBandwidth { .. } => (false, 0, 0),
    };
    vec![
        format!("{name} capability detected"),
        format!(
            "{name} details: #COS={}, {}linear, max={max}, step={step}",
            m.num_classes,
            if linear { "" } else { "non-" },
        ),
    ]
}

fn info(line: impl Into<String>) -> (Level, String) {
    (Level::Info, line.into())
}

fn enabled(on: bool) -> &'static str {
    if on { "enabled" } else { "disabled" }
}

impl Capabilities {
    /// pqos's log lines of capability discovery on `interface`, in its order, each with the
    /// level pqos logs it at (module docs): the outcome per resource at `INFO`, preceded on
    /// the MSR interface of an Intel part by the per-probe lines of `lib/hw_cap.c`.
    ///
    /// # Examples
    /// ```
    /// use rdt_core::Interface;
    /// let caps = rdt_core::fake::fixtures::intel_2s().0;
    /// let lines: Vec<String> = caps
    ///     .discovery_lines(Interface::Os)
    ///     .into_iter()
    ///     .map(|(_, line)| line)
    ///     .collect();
    /// assert_eq!(lines[0], "Monitoring capability detected");
    /// assert!(lines.contains(&"L3CA capability detected".to_owned()));
    /// ```
    #[must_use]
    pub fn discovery_lines(&self, interface: Interface) -> Vec<(Level, String)> {
        let probes = interface.uses_msrs() && self.vendor == Vendor::Intel;
        // CPUID.7.0:EBX[15], as far as the capabilities tell
        let alloc = self.l3_cat.is_present() || self.l2_cat.is_present() || self.mba.is_present();
        let mut lines = Vec::new();
        if self.monitoring.is_present() {
            lines.push(info("Monitoring capability detected"));
        } else {
            if probes && !self.monitoring.is_present() {
                lines.push((
                    Level::Warn,
                    "CPUID.0x7.0: Monitoring capability not supported!".to_owned(),
                ));
            }
            lines.push(info("Monitoring capability not detected"));
        }
        if probes {
            lines.extend(self.l3_probe(alloc));
        }
        lines.extend(
            cat_lines("L3", &self.l3_cat, self.l3_cache.as_ref())
                .into_iter()
                .map(info),
        );
        if probes {
            lines.extend(self.l2_probe(alloc));
        }
        lines.extend(
            cat_lines("L2", &self.l2_cat, self.l2_cache.as_ref())
                .into_iter()
                .map(info),
        );
        if probes {
            lines.extend(self.mba_probe(alloc));
        }
        lines.extend(mba_lines("MBA", &self.mba, interface).into_iter().map(info));
        lines.extend(
            mba_lines("SMBA", &self.smba, interface)
                .into_iter()
                .map(info),
        );
        lines
    }

    /// pqos's log lines of library initialisation on `interface` (`-v`, and `-V` for the
    /// `DEBUG` ones), in its order: on the OS interface `resctrl detected` (`lib/os_cap.c`
    /// `os_cap_init`); the [`Capabilities::discovery_lines`]; on the OS interface with MBA,
    /// `OS support for MBA CTRL detected|not detected|unknown` (`os_cap_get_mba_ctrl`,
    /// from [`Capabilities::pqos_mba_ctrl`] of `mba_ctrl`, the backend's state of the
    /// controller); then monitoring's initialisation (`lib/monitoring.c` `pqos_mon_init`):
    /// on MSR `DEBUG: Max RMID per monitoring cluster is N` (`hw_mon_init`), where a PMU
    /// counts, `Detected perf monitoring support for ...` per PMU event of
    /// `lib/perf_monitoring.c` (`perf_mon_init`: instructions, cycles, IPC, LLC misses, and
    /// LLC references where the PMU counts them), and on the OS interface `Detected resctrl
    /// support for ...` per resctrl event in the kernel's `mon_features` order
    /// (`lib/resctrl_monitoring.c` `resctrl_mon_init`: occupancy, total, local).
    ///
    /// Where pqos prints `CACHE:` lines (`lib/cpuinfo.c`) before these, the opener logs
    /// them from CPUID ([`cache_sharing_lines`]).
    ///
    /// # Examples
    /// ```
    /// use rdt_core::{Interface, MbaCtrl};
    /// let caps = rdt_core::fake::fixtures::intel_2s().0;
    /// let lines: Vec<String> = caps
    ///     .init_lines(Interface::Os, Some(MbaCtrl::Disabled))
    ///     .into_iter()
    ///     .map(|(_, line)| line)
    ///     .collect();
    /// assert_eq!(lines[0], "resctrl detected");
    /// assert!(lines.contains(&"OS support for MBA CTRL unknown".to_owned()));
    /// ```
    #[must_use]
    pub fn init_lines(
        &self,
        interface: Interface,
        mba_ctrl: Option<MbaCtrl>,
    ) -> Vec<(Level, String)> {
        let os = interface == Interface::Os;
        let mut lines = Vec::new();
        if os {
            lines.push(info("resctrl detected"));
        }
        lines.extend(self.discovery_lines(interface));
        if os && self.mba.is_present() {
            let support = match self.pqos_mba_ctrl(mba_ctrl) {
                Some(MbaCtrl::Enabled | MbaCtrl::Disabled) => "detected",
                Some(MbaCtrl::Unsupported) => "not detected",
                None => "unknown",
            };
            lines.push(info(format!("OS support for MBA CTRL {support}")));
        }
        let Some(m) = self.monitoring.get() else {
            return lines;
        };
        if !os {
            lines.push((
                Level::Debug,
                format!("Max RMID per monitoring cluster is {}", m.num_rmids),
            ));
        }
        if self.pmu.ipc {
            for event in [
                "Retired CPU Instructions",
                "Unhalted CPU Cycles",
                "Instructions/Cycle",
            ] {
                lines.push(info(format!(
                    "Detected perf monitoring support for {event}"
                )));
            }
        }
        if self.pmu.llc_misses {
            lines.push(info("Detected perf monitoring support for LLC Misses"));
        }
        if self.pmu.llc_references {
            lines.push(info("Detected perf monitoring support for LLC References"));
        }
        if os {
            let e = &m.events;
            for (on, name) in [
                (e.llc_occupancy, "LLC Occupancy"),
                (e.mbm_total, "Total Memory B/W"),
                (e.mbm_local, "Local Memory B/W"),
            ] {
                if on {
                    lines.push(info(format!("Detected resctrl support for {name}")));
                }
            }
        }
        lines
    }

    /// The state pqos v25.04 reports for the OS interface's MBA software controller
    /// (`mba_MBps`), `None` where it cannot tell (`-d` prints no `CTRL:` line then, `-v`
    /// logs `OS support for MBA CTRL unknown`); `state` is the backend's.
    ///
    /// resctrl is mounted when this is asked, so pqos's answer comes from `lib/os_cap.c`
    /// `os_cap_get_mba_ctrl`: `mba_MBps` among the mount options gives `enabled`; without it
    /// the state stays unknown unless the platform has no local-bandwidth monitoring, which
    /// gives `unsupported`. pqos's probe of writing `MB:0=2000` into a free group would
    /// call AMD's controller enabled (AMD takes bandwidth units up to 2048); this says
    /// `unsupported` there, which is the truth (the kernel has no `mba_MBps` on AMD) and what
    /// later pqos prints (issue #311's sample).
    #[must_use]
    pub fn pqos_mba_ctrl(&self, state: Option<MbaCtrl>) -> Option<MbaCtrl> {
        let mbl = self.monitoring.get().is_some_and(|m| m.events.mbm_local);
        match state.unwrap_or(MbaCtrl::Unsupported) {
            MbaCtrl::Enabled => Some(MbaCtrl::Enabled),
            MbaCtrl::Unsupported if !mbl || self.vendor.is_amd_like() => Some(MbaCtrl::Unsupported),
            MbaCtrl::Unsupported | MbaCtrl::Disabled => None,
        }
    }

    /// `hw_cap_l3ca_discover`: the CPUID method, or the brand-string check when
    /// CPUID.7.0:EBX\[15\] is clear.
    fn l3_probe(&self, alloc: bool) -> Vec<(Level, String)> {
        if self.l3_cat.is_present() {
            let mut v = vec![info("CPUID.0x7.0: L3 CAT supported")];
            if let Some(c) = self.l3_cat.get().filter(|c| c.cdp_supported) {
                v.push(info(format!("L3 CDP is {}", enabled(c.cdp_enabled))));
            }
            return v;
        }
        if alloc {
            return vec![info("CPUID.0x10.0: L3 CAT not detected.")];
        }
        let mut v = vec![info(
            "CPUID.0x7.0: L3 CAT not detected. Checking brand string...",
        )];
        if let Some(brand) = &self.brand {
            v.push((Level::Debug, format!("CPU brand string '{brand}'")));
            v.push((
                Level::Warn,
                format!("Cache allocation not supported on model name '{brand}'!"),
            ));
        }
        v
    }

    /// `hw_cap_l2ca_discover` and `l2cdp_is_enabled`.
    fn l2_probe(&self, alloc: bool) -> Vec<(Level, String)> {
        if !alloc {
            return vec![info("CPUID.0x7.0: L2 CAT not supported")];
        }
        if !self.l2_cat.is_present() {
            return vec![info("CPUID 0x10.0: L2 CAT not supported!")];
        }
        self.l2_cat
            .get()
            .filter(|c| c.cdp_supported)
            .map(|c| info(format!("L2 CDP is {}", enabled(c.cdp_enabled))))
            .into_iter()
            .collect()
    }

    /// `hw_cap_mba_discover`: the MBA version and whether delays are per core or per thread.
    fn mba_probe(&self, alloc: bool) -> Vec<(Level, String)> {
        if !alloc {
            return vec![info("CPUID.0x7.0: MBA not supported")];
        }
        if !self.mba.is_present() {
            return vec![info("CPUID 0x10.0: MBA not supported!")];
        }
        match self.mba.get() {
            Some(MbaCaps {
                num_classes,
                kind: MbaKind::IntelDelay { per_thread, .. },
                ..
            }) => {
                // lib/hw_cap.c hw_cap_mba_discover (v23.11+): MBA 4.0 first, which also
                // means per-thread controls
                let per_thread = &(*per_thread || self.mba40.is_some());
                let version = if self.mba40.is_some() {
                    4
                } else if *per_thread {
                    3
                } else if *num_classes > 8 {
                    2
                } else {
                    1
                };
                vec![
                    info(format!("Detected MBA version {version}.0")),
                    info(format!(
                        "Detected Per-{} MBA controls",
                        if *per_thread { "Thread" } else { "Core" }
                    )),
                ]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuid::{CpuidRegs, DumpCpu};
    use crate::{LogicalCpu, Vendor};

    fn lines(caps: &Capabilities, interface: Interface) -> Vec<String> {
        caps.discovery_lines(interface)
            .into_iter()
            .map(|(_, l)| l)
            .collect()
    }

    /// Issue 150's Xeon: L3 CAT 11 ways, 16 COS, CDP supported and off, contention 0x600,
    /// 24.75 MiB L3 (2,359,296-byte ways); MBA 8 COS, linear, max delay 90.
    fn skylake_sp() -> Capabilities {
        let mut caps = Capabilities::none(Vendor::Intel);
        caps.l3_cat = Feature::Supported(CatCaps {
            cbm_len: 11,
            shareable_bits: 0x600,
            num_classes: 16,
            cdp_supported: true,
            cdp_enabled: false,
            non_contiguous_cbm: false,
            io_rdt: false,
            min_cbm_bits: 1,
        });
        caps.l3_cache = Some(CacheGeometry {
            level: 3,
            ways: 11,
            partitions: 1,
            line_size: 64,
            sets: 36864,
            max_sharing_ids: 64,
        });
        caps.mba = Feature::Supported(MbaCaps {
            num_classes: 8,
            kind: MbaKind::IntelDelay {
                max_delay: 90,
                linear: true,
                per_thread: false,
            },
            ctrl_enabled: false,
        });
        caps
    }

    #[test]
    fn resources_are_described_as_pqos_logs_them() {
        let mut caps = skylake_sp();
        // the sample's lines (crates/pqos-cli/tests/data/pqos/intel_pqos-sv_info_issue150.txt)
        let want = [
            "Monitoring capability not detected",
            "L3CA capability detected",
            "L3 CAT details: CDP support=1, CDP on=0, #COS=16, #ways=11, ways contention bit-mask 0x600",
            "L3 CAT details: cache size 25952256 bytes, way size 2359296 bytes",
            "L3 CAT details: I/O RDT support=0, I/O RDT on=0",
            "L2CA capability not detected",
            "MBA capability detected",
            "MBA details: #COS=8, linear, max=90, step=10",
            "SMBA capability not detected",
        ];
        assert_eq!(lines(&caps, Interface::Os), want);
        // CDP on: the classes usable now are halved, as pqos reports them
        if let Feature::Supported(c) = &mut caps.l3_cat {
            c.cdp_enabled = true;
        }
        assert!(lines(&caps, Interface::Os)[2].contains("CDP on=1, #COS=8,"));
    }

    #[test]
    fn the_msr_interface_adds_pqos_probe_lines_before_each_outcome() {
        // a Xeon Gold 6151 (Skylake-SP, as issue 150's) logged by pqos -v on the MSR
        // interface: "CPUID.0x7.0: L3 CAT supported", "L3 CDP is disabled", "L3CA capability
        // detected", ..., "CPUID 0x10.0: L2 CAT not supported!", "L2CA capability not
        // detected", "Detected MBA version 1.0", "Detected Per-Core MBA controls", "MBA
        // capability detected"
        let caps = skylake_sp();
        let got = caps.discovery_lines(Interface::Msr);
        let text: Vec<&str> = got.iter().map(|(_, l)| l.as_str()).collect();
        let pos = |l: &str| {
            text.iter()
                .position(|t| *t == l)
                .unwrap_or_else(|| panic!("{l:?} not in {text:#?}"))
        };
        let order = [
            "Monitoring capability not detected",
            "CPUID.0x7.0: L3 CAT supported",
            "L3 CDP is disabled",
            "L3CA capability detected",
            "CPUID 0x10.0: L2 CAT not supported!",
            "L2CA capability not detected",
            "Detected MBA version 1.0",
            "Detected Per-Core MBA controls",
            "MBA capability detected",
        ];
        assert!(order.windows(2).all(|w| pos(w[0]) < pos(w[1])), "{text:#?}");
        assert_eq!(
            got[0],
            (
                Level::Warn,
                "CPUID.0x7.0: Monitoring capability not supported!".to_owned()
            ),
            "a WARN, printed without -v"
        );
        // not on the OS interface, nor on AMD
        assert!(
            !lines(&caps, Interface::Os)
                .iter()
                .any(|l| l.contains("CPUID"))
        );
        let mut amd = caps.clone();
        amd.vendor = Vendor::Amd;
        assert!(
            !lines(&amd, Interface::Msr)
                .iter()
                .any(|l| l.contains("CPUID"))
        );
    }

    #[test]
    fn probe_lines_follow_the_mba_version_and_a_part_without_allocation() {
        let mut caps = skylake_sp();
        if let Feature::Supported(m) = &mut caps.mba {
            m.num_classes = 15;
        }
        assert!(lines(&caps, Interface::Msr).contains(&"Detected MBA version 2.0".to_owned()));
        if let Feature::Supported(MbaCaps {
            kind: MbaKind::IntelDelay { per_thread, .. },
            ..
        }) = &mut caps.mba
        {
            *per_thread = true;
        }
        let l = lines(&caps, Interface::Msr);
        assert!(l.contains(&"Detected MBA version 3.0".to_owned()), "{l:#?}");
        assert!(l.contains(&"Detected Per-Thread MBA controls".to_owned()));
        // issue 107's Core i5: no CPUID.7.0:EBX[15], so pqos checks the brand string
        let mut none = Capabilities::none(Vendor::Intel);
        none.brand = Some("Intel(R) Core(TM) i5-6260U CPU @ 1.80GHz".to_owned());
        let got = none.discovery_lines(Interface::Msr);
        assert!(
            got.contains(&(
                Level::Warn,
                "Cache allocation not supported on model name 'Intel(R) Core(TM) i5-6260U CPU @ \
             1.80GHz'!"
                    .to_owned()
            ))
        );
        let text: Vec<&str> = got.iter().map(|(_, l)| l.as_str()).collect();
        assert!(text.contains(&"CPUID.0x7.0: L2 CAT not supported"));
        assert!(text.contains(&"CPUID.0x7.0: MBA not supported"));
    }

    #[test]
    fn init_lines_put_monitoring_initialisation_after_discovery() {
        // arrange: issue 150's Xeon with monitoring (144 RMIDs, every event) and a PMU
        let mut caps = skylake_sp();
        caps.monitoring = Feature::Supported(crate::MonitoringCaps {
            max_rmid: 143,
            num_rmids: 144,
            upscaling_factor: 65536,
            counter_width: 24,
            overflow_bit: false,
            io_rdt: false,
            events: crate::MonEventSupport {
                llc_occupancy: true,
                mbm_total: true,
                mbm_local: true,
            },
        });
        caps.pmu = crate::PmuCaps {
            ipc: true,
            llc_misses: true,
            llc_references: false,
        };
        // act
        let msr = caps.init_lines(Interface::Msr, None);
        let os = caps.init_lines(Interface::Os, Some(MbaCtrl::Enabled));
        // assert: MSR, as issue 150's 4.1 log has it: the discovery lines, then at DEBUG
        // the RMIDs, then the perf events (no resctrl, no MBA CTRL line)
        let n = caps.discovery_lines(Interface::Msr).len();
        assert_eq!(msr[..n], caps.discovery_lines(Interface::Msr)[..]);
        let tail: Vec<(Level, &str)> = msr[n..].iter().map(|(l, s)| (*l, s.as_str())).collect();
        assert_eq!(
            tail,
            [
                (Level::Debug, "Max RMID per monitoring cluster is 144"),
                (
                    Level::Info,
                    "Detected perf monitoring support for Retired CPU Instructions"
                ),
                (
                    Level::Info,
                    "Detected perf monitoring support for Unhalted CPU Cycles"
                ),
                (
                    Level::Info,
                    "Detected perf monitoring support for Instructions/Cycle"
                ),
                (
                    Level::Info,
                    "Detected perf monitoring support for LLC Misses"
                ),
            ]
        );
        // OS: resctrl first, the controller after the SMBA line, resctrl's events last
        let text: Vec<&str> = os.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(text[0], "resctrl detected");
        let smba = text
            .iter()
            .position(|l| *l == "SMBA capability not detected")
            .unwrap();
        assert_eq!(text[smba + 1], "OS support for MBA CTRL detected");
        assert!(!text.iter().any(|l| l.starts_with("Max RMID")));
        assert_eq!(
            text[text.len() - 3..],
            [
                "Detected resctrl support for LLC Occupancy",
                "Detected resctrl support for Total Memory B/W",
                "Detected resctrl support for Local Memory B/W",
            ]
        );
    }

    #[test]
    fn cache_lines_follow_leaf_4() {
        let r = |eax, ebx, ecx, edx| CpuidRegs { eax, ebx, ecx, edx };
        let mut c = DumpCpu::new(LogicalCpu::new(0));
        c.insert(0, 0, r(0xb, 0x756e_6547, 0x6c65_746e, 0x4965_6e69));
        c.insert(4, 0, r(1 << 14 | 1 << 5 | 1, 0, 0, 0));
        c.insert(4, 1, r(1 << 14 | 1 << 5 | 2, 0, 0, 0));
        c.insert(4, 2, r(1 << 14 | 2 << 5 | 3, 0, 0, 0));
        c.insert(4, 3, r(63 << 14 | 3 << 5 | 3, 0, 0, 0));
        c.insert(4, 4, r(0, 0, 0, 0));
        assert_eq!(
            cache_sharing_lines(&c),
            [
                "CACHE: type 1, level 1, max id sharing this cache 2 (1 bits)",
                "CACHE: type 2, level 1, max id sharing this cache 2 (1 bits)",
                "CACHE: type 3, level 2, max id sharing this cache 2 (1 bits)",
                "CACHE: type 3, level 3, max id sharing this cache 64 (6 bits)",
            ]
        );
    }

    /// pqos's `nearest_pow2` (lib/cpuinfo.c) returns a count below 2 as is: a cache of one
    /// thread logs `(1 bits)` (the SMT-off `milan` model's L1 and L2), 0 bits only for 0.
    #[test]
    fn a_cache_of_one_thread_logs_one_bit_as_pqos() {
        assert_eq!(pqos_sharing_bits(0), 0);
        assert_eq!(pqos_sharing_bits(1), 1);
        assert_eq!(pqos_sharing_bits(2), 1);
        assert_eq!(pqos_sharing_bits(3), 2);
        assert_eq!(pqos_sharing_bits(16), 4);
        let r = |eax, ebx, ecx, edx| CpuidRegs { eax, ebx, ecx, edx };
        let mut c = DumpCpu::new(LogicalCpu::new(0));
        c.insert(0, 0, r(0xb, 0x756e_6547, 0x6c65_746e, 0x4965_6e69));
        c.insert(4, 0, r(1 << 5 | 1, 0, 0, 0));
        c.insert(4, 1, r(0, 0, 0, 0));
        assert_eq!(
            cache_sharing_lines(&c),
            ["CACHE: type 1, level 1, max id sharing this cache 1 (1 bits)"]
        );
    }

    /// AMD's MBA and SMBA as pqos logs them: on the OS interface from `info/MB`
    /// (`non-linear, max=100, step=1`: `100 - min_bandwidth` with AMD's 0, `bandwidth_gran`
    /// 1, `delay_linear` 0), on MSR from `amd_cap_mba_discover` (`max=0`, `step=0`); never
    /// the bandwidth width.
    #[test]
    fn amd_bandwidth_limits_are_logged_as_pqos_derives_them() {
        let (caps, _) = crate::fake::fixtures::amd_2ccx();
        assert!(caps.mba.is_present());
        let os = lines(&caps, Interface::Os);
        let msr = lines(&caps, Interface::Msr);
        let n = caps.mba.get().unwrap().num_classes;
        assert!(
            os.contains(&format!(
                "MBA details: #COS={n}, non-linear, max=100, step=1"
            )),
            "{os:#?}"
        );
        assert!(
            msr.contains(&format!("MBA details: #COS={n}, non-linear, max=0, step=0")),
            "{msr:#?}"
        );
        assert!(!os.iter().chain(&msr).any(|l| l.contains("max=2048")));
    }
}
