//! What platform discovery found, in the words pqos's library logs it at `INFO` level
//! (`-v`), so that a log read for pqos reads the same here.
//!
//! - [`cache_sharing_lines`]: one `CACHE: type T, level L, max id sharing this cache N (B bits)`
//!   per cache CPUID enumerates (pqos `lib/cpuinfo.c`, `detect_apic_cache_masks`: type 1
//!   data, 2 instruction, 3 unified; N = EAX\[25:14\] + 1 of leaf 04H, or 8000_001DH on AMD;
//!   B = `ceil(log2(N))`, the bits of the x2APIC id below the cache's id).
//! - [`Capabilities::discovery_lines`]: the outcome per resource (pqos `lib/cap.c`,
//!   `discover_capabilities`): `Monitoring capability detected`, `Max RMID per monitoring
//!   cluster is N`, `L3CA capability detected` with its `L3 CAT details:` (CDP supported/on,
//!   classes usable now, ways, contention mask, cache and way size in bytes, I/O RDT), the
//!   same for L2, `MBA details: #COS=N, linear, max=M, step=S` (Intel: M = the maximum
//!   delay, S = 100 − M; AMD: M = 2^width units, S = 1), SMBA likewise, or `... capability
//!   not detected`.

use crate::caps::{CatCaps, MbaCaps, MbaKind};
use crate::cpuid::{CpuidSource, raw_cpuid};
use crate::detect::ceil_log2;
use crate::{CacheGeometry, Capabilities, Feature};

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
                ceil_log2(sharing)
            )
        })
        .collect()
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

fn mba_lines(name: &str, mba: &Feature<MbaCaps>) -> Vec<String> {
    let Some(m) = mba.get() else {
        return vec![format!("{name} capability not detected")];
    };
    let (linear, max) = match m.kind {
        MbaKind::IntelDelay {
            max_delay, linear, ..
        } => (linear, max_delay),
        MbaKind::AmdBandwidth { width } => (true, 1u32.checked_shl(width).unwrap_or(u32::MAX)),
    };
    vec![
        format!("{name} capability detected"),
        format!(
            "{name} details: #COS={}, {}linear, max={max}, step={}",
            m.num_classes,
            if linear { "" } else { "non-" },
            m.granularity()
        ),
    ]
}

impl Capabilities {
    /// pqos's `INFO:` lines of capability discovery, in its order (module docs).
    ///
    /// # Examples
    /// ```
    /// let caps = rdt_core::fake::fixtures::intel_2s().0;
    /// let lines = caps.discovery_lines();
    /// assert_eq!(lines[0], "Monitoring capability detected");
    /// assert!(lines.contains(&"L3CA capability detected".to_owned()));
    /// ```
    #[must_use]
    pub fn discovery_lines(&self) -> Vec<String> {
        let mut lines = match self.monitoring.get() {
            Some(m) => vec![
                "Monitoring capability detected".to_owned(),
                format!("Max RMID per monitoring cluster is {}", m.num_rmids),
            ],
            None => vec!["Monitoring capability not detected".to_owned()],
        };
        lines.extend(cat_lines("L3", &self.l3_cat, self.l3_cache.as_ref()));
        lines.extend(cat_lines("L2", &self.l2_cat, self.l2_cache.as_ref()));
        lines.extend(mba_lines("MBA", &self.mba));
        lines.extend(mba_lines("SMBA", &self.smba));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuid::{CpuidRegs, DumpCpu};
    use crate::{LogicalCpu, Vendor};

    #[test]
    fn resources_are_described_as_pqos_logs_them() {
        // issue 150's Xeon: L3 CAT 11 ways, 16 COS, CDP supported and off, contention 0x600,
        // 24.75 MiB L3 (2,359,296-byte ways); MBA 8 COS, linear, max delay 90
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
        assert_eq!(caps.discovery_lines(), want);
        // CDP on: the classes usable now are halved, as pqos reports them
        if let Feature::Supported(c) = &mut caps.l3_cat {
            c.cdp_enabled = true;
        }
        assert!(caps.discovery_lines()[2].contains("CDP on=1, #COS=8,"));
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
}
