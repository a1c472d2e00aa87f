//! The kernel's `info/` directory, parsed without I/O (procfs style): [`InfoFiles`] holds the
//! text of the files, [`ResctrlInfo::parse`] turns it into typed values, and
//! [`ResctrlInfo::capabilities`] overlays them on what CPUID says.
//!
//! Files read (`Documentation/arch/x86/resctrl.rst`, "Info directory"):
//!
//! | directory | files |
//! |---|---|
//! | `L3`, `L3CODE`, `L3DATA`, `L2`, `L2CODE`, `L2DATA` | `num_closids`, `cbm_mask` (hex), `min_cbm_bits`, `shareable_bits` (hex), `sparse_masks` (6.7+, optional) |
//! | `MB`, `SMBA` | `num_closids`, `min_bandwidth`, `bandwidth_gran`, `delay_linear`, `thread_throttle_mode` (Intel, optional) |
//! | `L3_MON` | `num_rmids`, `mon_features` (one event per line), `max_threshold_occupancy` |
//!
//! Other directories (`PERF_PKG_MON`, future resources) and files (`bit_usage`, BMEC and ABMC
//! files) are not read.

use std::collections::BTreeMap;

use rdt_core::{
    Capabilities, CatCaps, Feature, MbaCaps, MbaKind, MonEventSupport, MonitoringCaps, PmuCaps,
    Vendor,
};

use crate::schemata::Schemata;

/// The `info/` files a [`ResctrlInfo`] is parsed from: path relative to `info/` (`L3/cbm_mask`)
/// to contents. Files that do not exist are absent.
pub type InfoFiles = BTreeMap<String, String>;

/// The files read in each kind of `info/` subdirectory.
pub(crate) const CACHE_FILES: &[&str] = &[
    "num_closids",
    "cbm_mask",
    "min_cbm_bits",
    "shareable_bits",
    "sparse_masks",
];
/// The files read in `info/MB` and `info/SMBA`.
pub(crate) const BW_FILES: &[&str] = &[
    "num_closids",
    "min_bandwidth",
    "bandwidth_gran",
    "delay_linear",
    "thread_throttle_mode",
];
/// The files read in `info/L3_MON`.
pub(crate) const MON_FILES: &[&str] = &["num_rmids", "mon_features", "max_threshold_occupancy"];

/// The cache schemas resctrl may show, in the kernel's resource order.
pub(crate) const CACHE_SCHEMAS: &[&str] = &["L3", "L3CODE", "L3DATA", "L2", "L2CODE", "L2DATA"];

/// An `info/` file is missing or does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InfoError {
    /// A file the resource directory must have is absent.
    #[error("info/{0} is missing")]
    Missing(String),
    /// A file does not hold the number it should.
    #[error("info/{file}: cannot parse `{text}` as {expected}")]
    Parse {
        /// Path relative to `info/`.
        file: String,
        /// The contents, trimmed.
        text: String,
        /// What it should be.
        expected: &'static str,
    },
    /// `L3CODE` without `L3DATA` (or the L2 pair) — never written by a kernel.
    #[error("info/{0}CODE and info/{0}DATA must come together")]
    HalfCdp(&'static str),
}

/// One cache schema's `info/<schema>/` (L3, L3CODE, L3DATA, L2, L2CODE, L2DATA).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheInfo {
    /// `num_closids`: CLOSIDs of this schema (halved while CDP is on).
    pub num_closids: u32,
    /// `cbm_mask`: every way the schema may use (hex, `fffff`).
    pub cbm_mask: u64,
    /// `min_cbm_bits`: fewest set bits a mask may have (0 on AMD).
    pub min_cbm_bits: u32,
    /// `shareable_bits`: ways other agents (GPU, I/O) may use too (hex).
    pub shareable_bits: u64,
    /// `sparse_masks` (Linux 6.7+): non-contiguous masks accepted; `None` on older kernels.
    pub sparse_masks: Option<bool>,
}

impl CacheInfo {
    /// The CBM length in bits (the position of the highest bit of `cbm_mask`).
    #[must_use]
    pub const fn cbm_len(&self) -> u32 {
        64 - self.cbm_mask.leading_zeros()
    }
}

/// `info/MB/` or `info/SMBA/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BwInfo {
    /// `num_closids`.
    pub num_closids: u32,
    /// `min_bandwidth`: Intel percent (10), AMD 0.
    pub min_bandwidth: u32,
    /// `bandwidth_gran`: Intel percent step (10), AMD 1.
    pub bandwidth_gran: u32,
    /// `delay_linear`: 1 on Intel, 0 on AMD.
    pub delay_linear: bool,
    /// `thread_throttle_mode` (Intel): `max` or `per-thread`; absent on AMD.
    pub thread_throttle_mode: Option<String>,
}

/// `info/L3_MON/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonInfo {
    /// `num_rmids`.
    pub num_rmids: u32,
    /// `mon_features`: the event files each `mon_data/mon_L3_XX` holds (`llc_occupancy`,
    /// `mbm_total_bytes`, `mbm_local_bytes`), without the BMEC `*_config` lines.
    pub features: Vec<String>,
    /// `max_threshold_occupancy` in bytes, when present.
    pub max_threshold_occupancy: Option<u64>,
}

impl MonInfo {
    /// Whether `event` is one of the features.
    #[must_use]
    pub fn has(&self, event: &str) -> bool {
        self.features.iter().any(|f| f == event)
    }
}

/// What `info/` says about the platform, typed.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ResctrlInfo {
    /// Cache schemas by name (`L3`, or `L3CODE` and `L3DATA` while CDP is on; L2 alike).
    pub caches: BTreeMap<String, CacheInfo>,
    /// `info/MB`.
    pub mb: Option<BwInfo>,
    /// `info/SMBA` (AMD).
    pub smba: Option<BwInfo>,
    /// `info/L3_MON`.
    pub l3_mon: Option<MonInfo>,
}

/// The number in `file`, when present, if it lies in `range`. `expected` says what it should
/// be, range included, for the error.
fn number<T: TryFrom<u64>>(
    files: &InfoFiles,
    file: &str,
    radix_hex: bool,
    range: std::ops::RangeInclusive<u64>,
    expected: &'static str,
) -> Result<Option<T>, InfoError> {
    let Some(text) = files.get(file) else {
        return Ok(None);
    };
    let t = text.trim();
    let err = || InfoError::Parse {
        file: file.to_owned(),
        text: t.to_owned(),
        expected,
    };
    let v = if radix_hex {
        u64::from_str_radix(t.strip_prefix("0x").unwrap_or(t), 16)
    } else {
        t.parse::<u64>()
    }
    .map_err(|_| err())?;
    if !range.contains(&v) {
        return Err(err());
    }
    T::try_from(v).map(Some).map_err(|_| err())
}

/// `num_closids`: at least 1, at most [`Capabilities::MAX_PLAUSIBLE_CLASSES`].
const CLOSIDS: std::ops::RangeInclusive<u64> = 1..=Capabilities::MAX_PLAUSIBLE_CLASSES as u64;
const CLOSIDS_EXPECTED: &str = "a CLOSID count from 1 to 512";
/// `num_closids` of a CDP schema (`L3CODE`, `L2DATA`...): each CLOSID takes two classes of
/// service, so at most half of [`Capabilities::MAX_PLAUSIBLE_CLASSES`].
const CDP_CLOSIDS: std::ops::RangeInclusive<u64> =
    1..=Capabilities::MAX_PLAUSIBLE_CLASSES as u64 / 2;
const CDP_CLOSIDS_EXPECTED: &str = "a CLOSID count from 1 to 256 (CDP halves 512 classes)";
// The messages name the limits as numbers.
const _: () = assert!(Capabilities::MAX_PLAUSIBLE_CLASSES == 512);
const _: () = assert!(Capabilities::MAX_PLAUSIBLE_RMIDS == 65536);
/// Any 64-bit value.
const ANY: std::ops::RangeInclusive<u64> = 0..=u64::MAX;
/// `0` or `1`.
const FLAG: std::ops::RangeInclusive<u64> = 0..=1;

fn required<T>(v: Option<T>, file: &str) -> Result<T, InfoError> {
    v.ok_or_else(|| InfoError::Missing(file.to_owned()))
}

impl ResctrlInfo {
    /// Parses the files of `info/` (paths relative to it). A resource is present when its
    /// `num_closids` (`num_rmids` for `L3_MON`) is.
    ///
    /// # Errors
    /// [`InfoError::Missing`] when a present resource lacks a file every kernel writes
    /// (`cbm_mask`, `min_bandwidth`...), [`InfoError::Parse`] when a file is not the number
    /// it should be or the number is out of range (a `cbm_mask` of 0, `num_closids` of 0 or
    /// above [`Capabilities::MAX_PLAUSIBLE_CLASSES`], `num_rmids` of 0 or above
    /// [`Capabilities::MAX_PLAUSIBLE_RMIDS`], `min_cbm_bits` above 64, a flag other than 0
    /// or 1), [`InfoError::HalfCdp`] for `L3CODE` without `L3DATA`.
    ///
    /// # Examples
    /// ```
    /// use rdt_resctrl::{InfoFiles, ResctrlInfo};
    /// let files: InfoFiles = [
    ///     ("L3/num_closids", "16\n"), ("L3/cbm_mask", "7ff\n"), ("L3/min_cbm_bits", "1\n"),
    ///     ("L3/shareable_bits", "0\n"), ("L3_MON/num_rmids", "176\n"),
    ///     ("L3_MON/mon_features", "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n"),
    /// ].into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    /// let info = ResctrlInfo::parse(&files)?;
    /// assert_eq!(info.caches["L3"].cbm_len(), 11);
    /// assert!(info.l3_mon.unwrap().has("mbm_local_bytes"));
    /// # Ok::<(), rdt_resctrl::InfoError>(())
    /// ```
    pub fn parse(files: &InfoFiles) -> Result<Self, InfoError> {
        let mut info = Self::default();
        for &name in CACHE_SCHEMAS {
            let f = |n: &str| format!("{name}/{n}");
            let (closids, closids_expected) = if name.ends_with("CODE") || name.ends_with("DATA") {
                (CDP_CLOSIDS, CDP_CLOSIDS_EXPECTED)
            } else {
                (CLOSIDS, CLOSIDS_EXPECTED)
            };
            let Some(num_closids) =
                number(files, &f("num_closids"), false, closids, closids_expected)?
            else {
                continue;
            };
            let cbm_mask = required(
                number(
                    files,
                    &f("cbm_mask"),
                    true,
                    1..=u64::MAX,
                    "a non-zero hexadecimal mask",
                )?,
                &f("cbm_mask"),
            )?;
            let min_cbm_bits = number(
                files,
                &f("min_cbm_bits"),
                false,
                0..=64,
                "a bit count from 0 to 64",
            )?
            .unwrap_or(1);
            let shareable_bits =
                number(files, &f("shareable_bits"), true, ANY, "a hexadecimal mask")?.unwrap_or(0);
            let sparse_masks =
                number::<u64>(files, &f("sparse_masks"), false, FLAG, "0 or 1")?.map(|v| v != 0);
            info.caches.insert(
                name.to_owned(),
                CacheInfo {
                    num_closids,
                    cbm_mask,
                    min_cbm_bits,
                    shareable_bits,
                    sparse_masks,
                },
            );
        }
        for level in ["L3", "L2"] {
            let code = info.caches.contains_key(&format!("{level}CODE"));
            let data = info.caches.contains_key(&format!("{level}DATA"));
            if code != data {
                return Err(InfoError::HalfCdp(level));
            }
        }
        info.mb = bw(files, "MB")?;
        info.smba = bw(files, "SMBA")?;
        if let Some(num_rmids) = number(
            files,
            "L3_MON/num_rmids",
            false,
            1..=u64::from(Capabilities::MAX_PLAUSIBLE_RMIDS),
            "an RMID count from 1 to 65536",
        )? {
            let features = files
                .get("L3_MON/mon_features")
                .map(|t| {
                    t.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.ends_with("_config"))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            info.l3_mon = Some(MonInfo {
                num_rmids,
                features,
                max_threshold_occupancy: number(
                    files,
                    "L3_MON/max_threshold_occupancy",
                    false,
                    ANY,
                    "a byte count",
                )?,
            });
        }
        Ok(info)
    }

    /// Whether L3 CDP is on: `info/L3CODE` exists.
    #[must_use]
    pub fn l3_cdp(&self) -> bool {
        self.caches.contains_key("L3CODE")
    }

    /// Whether L2 CDP is on: `info/L2CODE` exists.
    #[must_use]
    pub fn l2_cdp(&self) -> bool {
        self.caches.contains_key("L2CODE")
    }

    /// The CLOSIDs a control group can get, the root's included: the smallest `num_closids`
    /// of all schemas (the kernel's `closids_supported()`); 0 without allocation.
    #[must_use]
    pub fn closids_supported(&self) -> u32 {
        self.caches
            .values()
            .map(|c| c.num_closids)
            .chain(self.mb.iter().map(|m| m.num_closids))
            .chain(self.smba.iter().map(|m| m.num_closids))
            .min()
            .unwrap_or(0)
    }

    /// Whether resctrl can allocate at all (some schema exists).
    #[must_use]
    pub fn has_allocation(&self) -> bool {
        !self.caches.is_empty() || self.mb.is_some() || self.smba.is_some()
    }

    /// The info of the schema serving `level` (`"L3"` or `"L2"`): the unified one, or the
    /// `DATA` one while CDP is on (both halves share every value).
    #[must_use]
    pub fn cache(&self, level: &str) -> Option<&CacheInfo> {
        self.caches
            .get(level)
            .or_else(|| self.caches.get(&format!("{level}DATA")))
    }

    /// The capabilities this resctrl offers: what `info/` says, over what CPUID said
    /// (`cpu`, when known). resctrl is authoritative for what it can program (a resource
    /// without an `info/` directory is reported unsupported even when CPUID has it); CPUID
    /// supplies what `info/` does not tell (vendor, brand, cache geometry, PMU, counter
    /// width and upscaling factor, CDP support while CDP is off, AMD's bandwidth field
    /// width).
    ///
    /// Every allocation resource's class count is the kernel's: [`Self::closids_supported`],
    /// the fewest `num_closids` of all schemas (the kernel's `closid_init` allocates CLOSIDs
    /// below `rdt_min_closid` only, since a control group's one CLOSID must be valid for every
    /// resource), so `caps.cat(L3).usable_classes()`, `caps.mba.num_classes` and
    /// `Capabilities::os_classes` agree (L3 CAT says 8, not its own 16, on a Skylake-SP whose
    /// MBA has 8). The count of each schema stays in [`Self::caches`], [`Self::mb`] and
    /// [`Self::smba`]. pqos v25.04 shows the same fewest count for every resource on this
    /// interface (`lib/os_cap.c` through `resctrl_alloc_get_num_closids`).
    ///
    /// Without CPUID: the vendor is AMD when `MB` is not linear or `SMBA` exists, else Intel;
    /// CDP support while off is read from the `schemata` name padding (`root_schemata`: the
    /// kernel widens names by 4 for a CDP-capable resource) when only one cache resource
    /// could explain it; non-contiguous masks are allowed on AMD or when `sparse_masks` says
    /// so; AMD's bandwidth field is taken as 11 bits (2048 units, 256 GB/s); the MBM counter
    /// width as 64 bits (resctrl's counts are 64-bit bytes).
    #[must_use]
    pub fn capabilities(
        &self,
        cpu: Option<&Capabilities>,
        root_schemata: &Schemata,
    ) -> Capabilities {
        let vendor = cpu.map_or_else(|| self.inferred_vendor(), |c| c.vendor.clone());
        let amd = vendor.is_amd_like();
        let padded_cdp = self.cdp_capable_from_padding(root_schemata);
        // the CLOSIDs a control group can get, whichever resources it uses
        let closids = self.closids_supported();
        let cat = |level: &str, cdp_on: bool, cpu_cat: Option<&CatCaps>| -> Feature<CatCaps> {
            let Some(c) = self.cache(level) else {
                return Feature::Unsupported;
            };
            Feature::Supported(CatCaps {
                cbm_len: c.cbm_len(),
                shareable_bits: c.shareable_bits,
                num_classes: if cdp_on { closids * 2 } else { closids },
                cdp_supported: cdp_on
                    || cpu_cat.map_or(padded_cdp.as_deref() == Some(level), |k| k.cdp_supported),
                cdp_enabled: cdp_on,
                non_contiguous_cbm: c
                    .sparse_masks
                    .or(cpu_cat.map(|k| k.non_contiguous_cbm))
                    .unwrap_or(amd),
                io_rdt: cpu_cat.is_some_and(|k| k.io_rdt),
                min_cbm_bits: c.min_cbm_bits,
            })
        };
        let bw = |b: Option<&BwInfo>, cpu_bw: Option<&MbaCaps>| -> Feature<MbaCaps> {
            let Some(b) = b else {
                return Feature::Unsupported;
            };
            let kind = match (cpu_bw.map(|m| m.kind), amd) {
                (Some(k @ MbaKind::AmdBandwidth { .. }), _) => k,
                (_, true) => MbaKind::AmdBandwidth { width: 11 },
                (cpu_kind, false) => MbaKind::IntelDelay {
                    max_delay: 100u32.saturating_sub(b.min_bandwidth),
                    linear: b.delay_linear,
                    per_thread: b.thread_throttle_mode.as_deref() == Some("per-thread")
                        || matches!(
                            cpu_kind,
                            Some(MbaKind::IntelDelay {
                                per_thread: true,
                                ..
                            })
                        ),
                },
            };
            Feature::Supported(MbaCaps {
                num_classes: closids,
                kind,
                // The controller is a mount option, not in info/: the backend sets it.
                ctrl_enabled: false,
            })
        };
        let monitoring = match &self.l3_mon {
            None => Feature::Unsupported,
            Some(m) => {
                let cpu_mon = cpu.and_then(|c| c.monitoring.get());
                Feature::Supported(MonitoringCaps {
                    max_rmid: cpu_mon.map_or(m.num_rmids.saturating_sub(1), |c| c.max_rmid),
                    num_rmids: m.num_rmids,
                    upscaling_factor: cpu_mon.map_or(1, |c| c.upscaling_factor),
                    counter_width: cpu_mon.map_or(64, |c| c.counter_width),
                    overflow_bit: cpu_mon.is_some_and(|c| c.overflow_bit),
                    io_rdt: cpu_mon.is_some_and(|c| c.io_rdt),
                    events: MonEventSupport {
                        llc_occupancy: m.has("llc_occupancy"),
                        mbm_total: m.has("mbm_total_bytes"),
                        mbm_local: m.has("mbm_local_bytes"),
                    },
                })
            }
        };
        Capabilities {
            vendor,
            brand: cpu.and_then(|c| c.brand.clone()),
            signature: cpu.and_then(|c| c.signature),
            monitoring,
            l3_cat: cat("L3", self.l3_cdp(), cpu.and_then(|c| c.l3_cat.get())),
            l2_cat: cat("L2", self.l2_cdp(), cpu.and_then(|c| c.l2_cat.get())),
            mba: bw(self.mb.as_ref(), cpu.and_then(|c| c.mba.get())),
            smba: bw(self.smba.as_ref(), cpu.and_then(|c| c.smba.get())),
            l3_cache: cpu.and_then(|c| c.l3_cache),
            l2_cache: cpu.and_then(|c| c.l2_cache),
            pmu: cpu.map_or_else(PmuCaps::default, |c| c.pmu),
            // pqos has no uncore monitoring on the OS interface (`lib/api.c`)
            uncore_pcie: false,
            // pqos v25.04 reports SNC on the MSR interface only
            snc: None,
            // pqos's OS interface never reports MBA 4.0 (lib/os_cap.c leaves `mba40` 0)
            mba40: None,
            l3_iordt: None,
            mon_iordt: None,
            amd_mbm: cpu.map_or_else(Default::default, |c| c.amd_mbm),
        }
    }

    fn inferred_vendor(&self) -> Vendor {
        let amd_bw = self.mb.as_ref().is_some_and(|m| !m.delay_linear) || self.smba.is_some();
        if amd_bw { Vendor::Amd } else { Vendor::Intel }
    }

    /// The cache level (`"L3"`/`"L2"`) whose CDP capability explains the schemata's name
    /// padding, if exactly one can: the kernel right-aligns names to the longest schema name,
    /// counting 4 more for a CDP-capable resource whose CDP is off.
    fn cdp_capable_from_padding(&self, root: &Schemata) -> Option<String> {
        let width = root.name_width()?;
        let longest = root.lines().iter().map(|l| l.name.len()).max()?;
        if width <= longest {
            return None;
        }
        let candidates: Vec<&str> = ["L3", "L2"]
            .into_iter()
            .filter(|l| self.caches.contains_key(*l) && l.len() + 4 == width)
            .collect();
        match candidates.as_slice() {
            [one] => Some((*one).to_owned()),
            _ => None,
        }
    }
}

fn bw(files: &InfoFiles, dir: &str) -> Result<Option<BwInfo>, InfoError> {
    let f = |n: &str| format!("{dir}/{n}");
    let Some(num_closids) = number(files, &f("num_closids"), false, CLOSIDS, CLOSIDS_EXPECTED)?
    else {
        return Ok(None);
    };
    let min_bandwidth = required(
        number(files, &f("min_bandwidth"), false, ANY, "a bandwidth")?,
        &f("min_bandwidth"),
    )?;
    let bandwidth_gran = required(
        number(files, &f("bandwidth_gran"), false, ANY, "a bandwidth step")?,
        &f("bandwidth_gran"),
    )?;
    let delay_linear =
        number::<u64>(files, &f("delay_linear"), false, FLAG, "0 or 1")?.is_none_or(|v| v != 0);
    Ok(Some(BwInfo {
        num_closids,
        min_bandwidth,
        bandwidth_gran,
        delay_linear,
        thread_throttle_mode: files
            .get(&f("thread_throttle_mode"))
            .map(|t| t.trim().to_owned()),
    }))
}

/// Whether resctrl is mounted with `mba_MBps`, judged from the tree alone (no mount
/// table): the root has an `mba_MBps_event` file (Linux 6.x), or MBA is linear (Intel) and
/// a root `MB` value is above 100 (a percentage cannot be).
pub(crate) fn mba_mbps_in_tree(
    has_mba_mbps_event: bool,
    mb: Option<&BwInfo>,
    root_schemata: &Schemata,
) -> bool {
    has_mba_mbps_event
        || mb.is_some_and(|mb| {
            mb.delay_linear
                && root_schemata.line("MB").is_some_and(|l| {
                    l.values
                        .iter()
                        .any(|(_, v)| v.parse::<u64>().is_ok_and(|n| n > 100))
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> InfoFiles {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn cdp_is_on_iff_l3code_exists_and_closids_are_the_minimum() {
        // arrange
        let f = files(&[
            ("L3CODE/num_closids", "8\n"),
            ("L3CODE/cbm_mask", "fffff\n"),
            ("L3DATA/num_closids", "8\n"),
            ("L3DATA/cbm_mask", "fffff\n"),
            ("MB/num_closids", "4\n"),
            ("MB/min_bandwidth", "10\n"),
            ("MB/bandwidth_gran", "10\n"),
            ("MB/delay_linear", "1\n"),
        ]);
        // act
        let info = ResctrlInfo::parse(&f).unwrap();
        // assert
        assert!(info.l3_cdp() && !info.l2_cdp());
        assert_eq!(info.closids_supported(), 4);
        let caps = info.capabilities(None, &Schemata::default());
        // every resource has the kernel's count: L3 the 4 of MB (4 code/data pairs)
        let l3 = caps.l3_cat.get().unwrap();
        assert_eq!((l3.num_classes, l3.usable_classes()), (8, 4));
        assert_eq!(caps.mba.get().unwrap().num_classes, 4);
        assert_eq!(caps.os_classes(), 4);
        assert!(l3.cdp_enabled && l3.cdp_supported);
        assert_eq!(caps.vendor, Vendor::Intel);
    }

    #[test]
    fn a_bad_number_names_the_file_and_text() {
        let f = files(&[("L3/num_closids", "sixteen\n"), ("L3/cbm_mask", "ff")]);
        let e = ResctrlInfo::parse(&f).unwrap_err();
        assert_eq!(
            e.to_string(),
            "info/L3/num_closids: cannot parse `sixteen` as a CLOSID count from 1 to 512"
        );
        let f = files(&[("L3/num_closids", "16\n")]);
        assert_eq!(
            ResctrlInfo::parse(&f).unwrap_err(),
            InfoError::Missing("L3/cbm_mask".into())
        );
        let f = files(&[("L2CODE/num_closids", "4"), ("L2CODE/cbm_mask", "f")]);
        assert_eq!(
            ResctrlInfo::parse(&f).unwrap_err(),
            InfoError::HalfCdp("L2")
        );
    }

    #[test]
    fn a_zero_cbm_mask_or_absurd_counts_are_errors_naming_file_and_value() {
        // arrange: a cbm_mask of 0 made cbm_len 0, and CacheBitmask::low_bits(0) panicked in
        // capabilities(); 2^31 CLOSIDs or RMIDs would size tables of gigabytes.
        let cache = |file: &'static str, text: &'static str| {
            let mut f = files(&[
                ("L3/num_closids", "16"),
                ("L3/cbm_mask", "7ff"),
                ("L3_MON/num_rmids", "176"),
            ]);
            f.insert(file.to_owned(), text.to_owned());
            ResctrlInfo::parse(&f).map(|i| i.capabilities(None, &Schemata::default()))
        };
        // act + assert
        let e = cache("L3/cbm_mask", "0\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "info/L3/cbm_mask: cannot parse `0` as a non-zero hexadecimal mask"
        );
        let e = cache("L3/num_closids", "2147483648\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "info/L3/num_closids: cannot parse `2147483648` as a CLOSID count from 1 to 512"
        );
        // found by the libFuzzer target resctrl_files: with CDP each CLOSID is two classes
        let mut f = files(&[
            ("L2CODE/num_closids", "500"),
            ("L2CODE/cbm_mask", "ff"),
            ("L2DATA/num_closids", "500"),
            ("L2DATA/cbm_mask", "ff"),
        ]);
        let e = ResctrlInfo::parse(&f).unwrap_err();
        assert!(
            e.to_string()
                .contains("`500` as a CLOSID count from 1 to 256"),
            "{e}"
        );
        f.insert("L2DATA/num_closids".into(), "256".into());
        f.insert("L2CODE/num_closids".into(), "256".into());
        let caps = ResctrlInfo::parse(&f)
            .unwrap()
            .capabilities(None, &Schemata::default());
        assert_eq!(caps.check_plausible(), Ok(()));
        let e = cache("L3/num_closids", "0").unwrap_err();
        assert!(e.to_string().contains("`0` as a CLOSID count"), "{e}");
        let e = cache("L3_MON/num_rmids", "4294967295").unwrap_err();
        assert!(
            e.to_string().contains("an RMID count from 1 to 65536"),
            "{e}"
        );
        let e = cache("L3/min_cbm_bits", "65").unwrap_err();
        assert!(e.to_string().contains("info/L3/min_cbm_bits"), "{e}");
        let e = cache("L3/sparse_masks", "2").unwrap_err();
        assert!(e.to_string().contains("`2` as 0 or 1"), "{e}");
        // a full 64-bit mask is the widest CBM there is, and works
        let caps = cache("L3/cbm_mask", "ffffffffffffffff").unwrap();
        assert_eq!(caps.l3_cat.get().unwrap().full_mask().bits(), u64::MAX);
    }

    #[test]
    fn amd_without_cpuid_gets_bandwidth_units_and_sparse_masks() {
        let f = files(&[
            ("L3/num_closids", "16"),
            ("L3/cbm_mask", "ffff"),
            ("L3/min_cbm_bits", "0"),
            ("MB/num_closids", "16"),
            ("MB/min_bandwidth", "0"),
            ("MB/bandwidth_gran", "1"),
            ("MB/delay_linear", "0"),
            ("SMBA/num_closids", "16"),
            ("SMBA/min_bandwidth", "0"),
            ("SMBA/bandwidth_gran", "1"),
            ("SMBA/delay_linear", "0"),
        ]);
        let caps = ResctrlInfo::parse(&f)
            .unwrap()
            .capabilities(None, &Schemata::default());
        assert_eq!(caps.vendor, Vendor::Amd);
        assert_eq!(
            caps.mba.get().unwrap().kind,
            MbaKind::AmdBandwidth { width: 11 }
        );
        assert!(caps.smba.is_present());
        let l3 = caps.l3_cat.get().unwrap();
        assert!(l3.non_contiguous_cbm);
        assert_eq!(l3.min_cbm_bits, 0);
    }

    #[test]
    fn name_padding_tells_cdp_capability_when_one_resource_explains_it() {
        let f = files(&[
            ("L3/num_closids", "16"),
            ("L3/cbm_mask", "7ff"),
            ("MB/num_closids", "8"),
            ("MB/min_bandwidth", "10"),
            ("MB/bandwidth_gran", "10"),
        ]);
        let info = ResctrlInfo::parse(&f).unwrap();
        let padded: Schemata = "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n".parse().unwrap();
        let plain: Schemata = "MB:0=100;1=100\nL3:0=7ff;1=7ff\n".parse().unwrap();
        let cdp = |s: &Schemata| {
            info.capabilities(None, s)
                .l3_cat
                .get()
                .unwrap()
                .cdp_supported
        };
        assert!(cdp(&padded));
        assert!(!cdp(&plain));
    }

    /// Every `info/` file with any text: the parse is an error naming the file and quoting
    /// the text, or capabilities that pass `check_plausible` and whose masks can be built.
    #[test]
    fn fuzz_every_info_file_never_panics_and_errors_name_file_and_text() {
        use proptest::prelude::*;
        use rdt_core::fake::fuzz::{fuzz, text};
        const WORDS: &[&str] = &[
            "0",
            "1",
            "16",
            "fffff",
            "0x",
            "ffffffffffffffff",
            "\n",
            " ",
            "-1",
            "per-thread",
            "max",
        ];
        const HOSTILE: &[&str] = &[
            "0",
            "",
            "ffffffffffffffff",
            "4294967296",
            "2147483648",
            "500",
            "-1",
            "é",
            "0x",
        ];
        let mut paths: Vec<String> = Vec::new();
        for dir in CACHE_SCHEMAS {
            paths.extend(CACHE_FILES.iter().map(|f| format!("{dir}/{f}")));
        }
        for dir in ["MB", "SMBA"] {
            paths.extend(BW_FILES.iter().map(|f| format!("{dir}/{f}")));
        }
        paths.extend(MON_FILES.iter().map(|f| format!("L3_MON/{f}")));
        let valid = |path: &str| -> &'static str {
            match path.rsplit('/').next().unwrap_or_default() {
                "cbm_mask" => "7ff",
                "num_rmids" => "176",
                "mon_features" => "llc_occupancy\nmbm_total_bytes\n",
                "thread_throttle_mode" => "max",
                "sparse_masks" | "delay_linear" => "1",
                "shareable_bits" | "min_bandwidth" | "max_threshold_occupancy" => "0",
                _ => "10",
            }
        };
        // Each file absent, valid or a hostile value; one of them any text.
        let choice = (
            proptest::collection::vec((0u8..3, proptest::sample::select(HOSTILE)), paths.len()),
            0..paths.len(),
            text(WORDS, 8),
        );
        fuzz("ResctrlInfo::parse", choice, |(choices, fuzzed, t)| {
            let files: InfoFiles = paths
                .iter()
                .zip(choices)
                .enumerate()
                .filter_map(|(i, (p, (c, hostile)))| match c {
                    _ if i == fuzzed => Some((p.clone(), t.clone())),
                    0 => None,
                    1 => Some((p.clone(), valid(p).to_owned())),
                    _ => Some((p.clone(), hostile.to_owned())),
                })
                .collect();
            match ResctrlInfo::parse(&files) {
                Err(InfoError::Parse { file, text, .. }) => {
                    prop_assert_eq!(files[&file].trim(), text.as_str());
                }
                Err(InfoError::Missing(file)) => prop_assert!(!files.contains_key(&file)),
                Err(e) => prop_assert!(e.to_string().starts_with("info/"), "{}", e),
                Ok(info) => {
                    let caps = info.capabilities(None, &Schemata::default());
                    prop_assert!(
                        caps.check_plausible().is_ok(),
                        "{:?}",
                        caps.check_plausible()
                    );
                    for cat in [caps.l3_cat.get(), caps.l2_cat.get()].into_iter().flatten() {
                        let _ = cat.full_mask();
                    }
                }
            }
            Ok(())
        });
    }
}
