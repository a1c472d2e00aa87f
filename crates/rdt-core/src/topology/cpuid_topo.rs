//! Topology from the x2APIC ids of a per-CPU CPUID dump.

use raw_cpuid::CacheType;

use super::{ApicIdLayout, CpuPlacement, Topology, TopologyError};
use crate::cpuid::{CpuidDump, CpuidSource, DumpCpu, raw_cpuid};
use crate::detect::{Probe, bits, cache_leaf, ceil_log2, vendor_of};
use crate::{CacheDomain, LogicalCpu};

pub(super) fn from_dump(dump: &CpuidDump) -> Result<Topology, TopologyError> {
    let vendor = vendor_of(&raw_cpuid(dump));
    let amd = vendor.is_amd_like();
    let placements = dump
        .cpus()
        .iter()
        .map(|cpu| place(cpu, amd))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Topology::from_placements(placements))
}

/// x2APIC id and the SMT and package shifts of one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ApicLayout {
    apic: u32,
    smt_shift: u32,
    pkg_shift: u32,
}

fn place(cpu: &DumpCpu, amd: bool) -> Result<CpuPlacement, TopologyError> {
    let (apic, layout) = id_and_layout(cpu, amd).ok_or_else(|| TopologyError::Cpuid {
        cpu: cpu.cpu,
        reason: "no x2APIC id: neither leaf 0BH/1FH nor leaf 1 was recorded".into(),
    })?;
    // Dumps carry no NUMA information: one node per package.
    Ok(layout.place(cpu.cpu, apic, None))
}

/// The x2APIC id of the CPU whose CPUID `src` answers, and the bit layout of the ids.
fn id_and_layout(src: &dyn CpuidSource, amd: bool) -> Option<(u32, ApicIdLayout)> {
    let p = Probe::new(src);
    let ApicLayout {
        apic,
        smt_shift,
        pkg_shift,
    } = topology_leaf(&p, amd).or_else(|| legacy_layout(&p, amd))?;
    let (l2_shift, l3_shift) = match cache_shifts(&p, amd) {
        Some((l2, l3)) => (l2.unwrap_or(smt_shift), l3),
        // No cache leaf recorded: one L2 per core, one L3 per package (pqos's fallback).
        None => (smt_shift, Some(pkg_shift)),
    };
    Some((
        apic,
        ApicIdLayout {
            smt_shift,
            package_shift: pkg_shift,
            l2_shift,
            l3_shift,
        },
    ))
}

/// [`ApicIdLayout::from_cpuid`].
pub(super) fn layout_of(src: &dyn CpuidSource) -> Option<ApicIdLayout> {
    // CPUID.(07H,0):EDX[15] Hybrid: core types differ in cache sharing (leaf 04H).
    if Probe::new(src)
        .regs(7, 0)
        .is_some_and(|r| bits(r.edx, 15, 15) == 1)
    {
        return None;
    }
    id_and_layout(src, vendor_of(&raw_cpuid(src)).is_amd_like()).map(|(_, layout)| layout)
}

impl ApicIdLayout {
    /// Places `cpu`, whose x2APIC id is `apic`: package = id >> package shift, core = the
    /// id's bits between the SMT and package shifts, cache ids = id >> their shifts (the
    /// kernel's `cache/indexK/id`); NUMA node `node`, or the package where it is unknown.
    #[must_use]
    pub fn place(&self, cpu: LogicalCpu, apic: u32, node: Option<u32>) -> CpuPlacement {
        let core_bits = self.package_shift.saturating_sub(self.smt_shift);
        let core_mask = if core_bits >= 32 {
            u32::MAX
        } else {
            (1u32 << core_bits) - 1
        };
        let package = shr(apic, self.package_shift);
        CpuPlacement {
            cpu,
            package,
            core: Some(shr(apic, self.smt_shift) & core_mask),
            l2: CacheDomain::new(shr(apic, self.l2_shift)),
            l3: self.l3_shift.map(|s| CacheDomain::new(shr(apic, s))),
            node: node.unwrap_or(package),
        }
    }
}

const fn shr(v: u32, s: u32) -> u32 {
    if s >= 32 { 0 } else { v >> s }
}

/// The layout from leaf 1FH (Intel, preferred) or 0BH.
fn topology_leaf(p: &Probe<'_>, amd: bool) -> Option<ApicLayout> {
    let leaves: &[u32] = if amd { &[0xB] } else { &[0x1F, 0xB] };
    leaves.iter().find_map(|&leaf| {
        let first = p.regs(leaf, 0)?;
        // CPUID.(EAX=0BH/1FH,ECX=0):EBX[15:0]: logical processors at this level; 0 means the
        // leaf is not implemented. ECX[15:8]: level type, 0 = invalid.
        if bits(first.ebx, 15, 0) == 0 || bits(first.ecx, 15, 8) == 0 {
            return None;
        }
        let (mut smt_shift, mut pkg_shift) = (0, 0);
        for sub in 0..8 {
            let Some(r) = p.regs(leaf, sub) else { break };
            // ECX[15:8]: level type (1 SMT, 2 core, 3 module, 4 tile, 5 die)
            let level_type = bits(r.ecx, 15, 8);
            if level_type == 0 {
                break;
            }
            // EAX[4:0]: bits to shift the x2APIC id right to get the next level's id
            let shift = bits(r.eax, 4, 0);
            if level_type == 1 {
                smt_shift = shift;
            }
            pkg_shift = shift;
        }
        // EDX: x2APIC id of this logical processor
        Some(ApicLayout {
            apic: first.edx,
            smt_shift,
            pkg_shift,
        })
    })
}

/// The layout without leaf 0BH/1FH: AMD 8000_0008H/8000_001EH, Intel leaf 1 and 4.
fn legacy_layout(p: &Probe<'_>, amd: bool) -> Option<ApicLayout> {
    let l1 = p.regs(1, 0)?;
    // CPUID.1:EBX[31:24]: initial (8-bit) APIC id
    let initial = bits(l1.ebx, 31, 24);
    // CPUID.1:EBX[23:16]: maximum addressable logical processor ids per package
    let per_package = bits(l1.ebx, 23, 16);
    if amd {
        let ext = p.regs(0x8000_001E, 0);
        // CPUID.8000001EH:EAX: extended APIC id (the full id; leaf 1 has only 8 bits)
        let apic = ext.map_or(initial, |e| e.eax);
        let pkg_shift = match p.regs(0x8000_0008, 0) {
            // CPUID.80000008H:ECX[15:12]: ApicIdCoreIdSize (log2 of ids per package);
            // ECX[7:0]: number of threads per package - 1 (used when the size is 0)
            Some(r) if bits(r.ecx, 15, 12) != 0 => bits(r.ecx, 15, 12),
            Some(r) => ceil_log2(bits(r.ecx, 7, 0) + 1),
            None => ceil_log2(per_package),
        };
        // CPUID.8000001EH:EBX[15:8]: threads per core - 1 (family 17h and later)
        let smt_shift = ext.map_or(0, |e| ceil_log2(bits(e.ebx, 15, 8) + 1));
        return Some(ApicLayout {
            apic,
            smt_shift,
            pkg_shift,
        });
    }
    // CPUID.1:EDX[28]: HTT, the per-package count in EBX[23:16] is valid
    let htt = l1.edx >> 28 & 1 == 1;
    let ids = if htt { per_package.max(1) } else { 1 };
    // CPUID.(EAX=4,ECX=0):EAX[31:26]: maximum addressable core ids per package - 1
    let cores = p.regs(4, 0).map_or(1, |r| bits(r.eax, 31, 26) + 1);
    let pkg_shift = ceil_log2(ids);
    let smt_shift = ceil_log2(ids.div_ceil(cores).max(1));
    Some(ApicLayout {
        apic: initial,
        smt_shift,
        pkg_shift,
    })
}

/// (L2 shift, L3 shift) from the cache leaf; `None` when its subleaf 0 was not recorded.
/// A missing level is `None` inside.
fn cache_shifts(p: &Probe<'_>, amd: bool) -> Option<(Option<u32>, Option<u32>)> {
    p.regs(cache_leaf(amd), 0)?;
    let (mut l2, mut l3) = (None, None);
    // raw-cpuid stops at the first subleaf of type 0; unrecorded subleaves read as zeros.
    for cp in raw_cpuid(p.src)
        .get_cache_parameters()
        .into_iter()
        .flatten()
    {
        // EAX[25:14]: maximum number of logical processor ids sharing this cache - 1
        let sharing = u32::try_from(cp.max_cores_for_cache()).unwrap_or(u32::MAX);
        let shift = ceil_log2(sharing);
        // EAX[7:5]: level; EAX[4:0]: type
        match (cp.level(), cp.cache_type()) {
            (2, CacheType::Data | CacheType::Unified) if l2.is_none() => l2 = Some(shift),
            (3, CacheType::Unified) if l3.is_none() => l3 = Some(shift),
            _ => {}
        }
    }
    Some((l2, l3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuid::CpuidRegs;
    use crate::{LogicalCpu, Topology};

    fn regs(eax: u32, ebx: u32, ecx: u32, edx: u32) -> CpuidRegs {
        CpuidRegs { eax, ebx, ecx, edx }
    }

    /// An Intel CPU block: 2 threads per core (shift 1), 16 ids per package (shift 4), L2 per
    /// core (2 sharing ids), L3 per package (16 sharing ids).
    fn intel_cpu(n: u32, apic: u32) -> DumpCpu {
        let mut c = DumpCpu::new(LogicalCpu::new(n));
        c.insert(0, 0, regs(0xb, 0x756e_6547, 0x6c65_746e, 0x4965_6e69));
        c.insert(
            1,
            0,
            regs(0x406f1, (apic & 0xff) << 24 | 16 << 16, 0, 1 << 28),
        );
        c.insert(0xb, 0, regs(1, 2, 0x100, apic));
        c.insert(0xb, 1, regs(4, 16, 0x201, apic));
        c.insert(0xb, 2, regs(0, 0, 2, apic));
        // leaf 4: EAX[25:14] = sharing - 1, EAX[7:5] level, EAX[4:0] type
        c.insert(4, 0, regs(1 << 14 | 1 << 5 | 1, 0, 0, 0));
        c.insert(4, 1, regs(1 << 14 | 2 << 5 | 3, 0, 0, 0));
        c.insert(4, 2, regs(15 << 14 | 3 << 5 | 3, 0, 0, 0));
        c.insert(4, 3, regs(0, 0, 0, 0));
        c
    }

    #[test]
    fn x2apic_ids_give_packages_cores_and_cache_ids() {
        // arrange: package 0 apic 0,1 (core 0), 2 (core 1); package 1 apic 16
        let cpus = [(0, 0), (1, 1), (2, 2), (3, 16), (4, 19)]
            .map(|(n, apic)| intel_cpu(n, apic))
            .to_vec();
        let dump = CpuidDump::from_cpus(None, cpus).unwrap();
        // act
        let topo = Topology::from_cpuid_dump(&dump).unwrap();
        // assert
        let got: Vec<_> = topo
            .cpus()
            .iter()
            .map(|c| {
                (
                    c.package,
                    c.core.unwrap(),
                    c.l2.get(),
                    c.l3.map(CacheDomain::get),
                    c.node,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, 0, 0, Some(0), 0),
                (0, 0, 0, Some(0), 0),
                (0, 1, 1, Some(0), 0),
                (1, 0, 8, Some(1), 1),
                (1, 1, 9, Some(1), 1)
            ]
        );
        assert_eq!(topo.l3_domains().len(), 2);
    }

    #[test]
    fn without_a_cache_leaf_l3_is_per_package_and_l2_per_core() {
        let mut cpu = intel_cpu(0, 19);
        for sub in 0..4 {
            cpu.remove(4, sub);
        }
        let topo =
            Topology::from_cpuid_dump(&CpuidDump::from_cpus(None, vec![cpu]).unwrap()).unwrap();
        let c = topo.cpus()[0];
        assert_eq!((c.l2.get(), c.l3), (9, Some(CacheDomain::new(1))));
    }

    #[test]
    fn legacy_leaf_1_layout_when_leaf_0bh_is_missing() {
        // arrange: Intel, HTT, 16 ids per package, 8 cores per package -> SMT shift 1
        let mut cpu = intel_cpu(0, 0x13);
        for sub in 0..3 {
            cpu.remove(0xb, sub);
        }
        cpu.insert(4, 0, regs(7 << 26 | 1 << 14 | 1 << 5 | 1, 0, 0, 0));
        // act
        let topo =
            Topology::from_cpuid_dump(&CpuidDump::from_cpus(None, vec![cpu]).unwrap()).unwrap();
        // assert
        let c = topo.cpus()[0];
        assert_eq!((c.package, c.core), (1, Some(1)));
    }

    /// CPU 64 of hwloc's 2x EPYC 7763 capture (no leaf 0BH), without or with leaf 8000001EH.
    fn milan_cpu_64(with_ext: bool) -> DumpCpu {
        let mut c = DumpCpu::new(LogicalCpu::new(64));
        c.insert(0, 0, regs(0x10, 0x6874_7541, 0x444d_4163, 0x6974_6e65));
        c.insert(1, 0, regs(0x00a0_0f11, 0x4040_0800, 0, 0));
        c.insert(0x8000_0000, 0, regs(0x8000_0023, 0, 0, 0));
        c.insert(0x8000_0008, 0, regs(0x3030, 0, 0x603f, 0));
        c.insert(0x8000_001d, 0, regs(0x121, 0, 0, 0));
        c.insert(0x8000_001d, 1, regs(0x122, 0, 0, 0));
        c.insert(0x8000_001d, 2, regs(0x143, 0, 0, 0));
        c.insert(0x8000_001d, 3, regs(0x0001_c163, 0, 0, 0));
        c.insert(0x8000_001d, 4, regs(0, 0, 0, 0));
        if with_ext {
            // EAX extended APIC id 0x140 (as if a 9-bit id), EBX[15:8] = 1: two threads per core
            c.insert(0x8000_001e, 0, regs(0x140, 0x100, 1, 0));
        }
        c
    }

    #[test]
    fn amd_without_leaf_0bh_uses_8000_001eh_and_8000_0008h() {
        // act
        let one = |c| {
            Topology::from_cpuid_dump(&CpuidDump::from_cpus(None, vec![c]).unwrap())
                .unwrap()
                .cpus()[0]
        };
        let legacy = one(milan_cpu_64(false));
        let ext = one(milan_cpu_64(true));
        // assert: ApicIdCoreIdSize 6 -> package = apic >> 6; 8 ids share an L3 -> apic >> 3
        assert_eq!(
            (legacy.package, legacy.core, legacy.l3, legacy.l2),
            (
                1,
                Some(0),
                Some(CacheDomain::new(8)),
                CacheDomain::new(0x40)
            )
        );
        // 0x140 >> 6 = 5; SMT shift 1: core = (0x140 >> 1) & 31 = 0; L2 shared by 1 id
        assert_eq!(
            (ext.package, ext.core, ext.l3, ext.l2),
            (
                5,
                Some(0),
                Some(CacheDomain::new(0x28)),
                CacheDomain::new(0x140)
            )
        );
    }

    #[test]
    fn block_without_apic_information_is_an_error_naming_the_cpu() {
        let mut c = DumpCpu::new(LogicalCpu::new(7));
        c.insert(0, 0, regs(0xb, 0x756e_6547, 0x6c65_746e, 0x4965_6e69));
        let err =
            Topology::from_cpuid_dump(&CpuidDump::from_cpus(None, vec![c]).unwrap()).unwrap_err();
        assert!(matches!(err, TopologyError::Cpuid { cpu, .. } if cpu == LogicalCpu::new(7)));
        assert!(
            err.to_string()
                .starts_with("logical CPU 7 of the CPUID dump: ")
        );
    }

    #[test]
    fn x2apic_ids_and_one_cpus_layout_place_like_the_per_cpu_dump() {
        // arrange: five CPUs of two packages; sysfs lists them online and in two nodes
        let apics = [(0, 0), (1, 1), (2, 2), (3, 16), (4, 19)];
        let cpus = apics.map(|(n, apic)| intel_cpu(n, apic)).to_vec();
        let dump = CpuidDump::from_cpus(None, cpus.clone()).unwrap();
        let online: crate::CpuSet = "0-4".parse().unwrap();
        let nodes: std::collections::BTreeMap<LogicalCpu, u32> = (0..5)
            .map(|n| (LogicalCpu::new(n), u32::from(n >= 3)))
            .collect();
        let layout = ApicIdLayout::from_cpuid(&cpus[0]).expect("leaf 0BH and 04H");
        // act
        let topo = Topology::from_x2apic_ids_of(&online, &nodes, layout, |cpu| {
            apics
                .iter()
                .find(|(n, _)| *n == cpu.get())
                .map(|(_, apic)| *apic)
        })
        .expect("every id known");
        // assert: what the per-CPU CPUID gives (nodes there = packages, as here)
        assert_eq!(topo, Topology::from_cpuid_dump(&dump).unwrap());
        assert_eq!(
            layout,
            ApicIdLayout {
                smt_shift: 1,
                package_shift: 4,
                l2_shift: 1,
                l3_shift: Some(4)
            }
        );
        // one unknown id: the caller reads sysfs instead
        let none = Topology::from_x2apic_ids_of(&online, &nodes, layout, |cpu| {
            (cpu.get() != 3).then_some(0)
        });
        assert_eq!(none, None);
    }

    #[test]
    fn a_hybrid_part_has_no_single_layout() {
        let mut cpu = intel_cpu(0, 0);
        cpu.insert(7, 0, regs(0, 0, 0, 1 << 15));
        assert_eq!(ApicIdLayout::from_cpuid(&cpu), None);
        cpu.insert(7, 0, regs(0, 0, 0, 0));
        assert!(ApicIdLayout::from_cpuid(&cpu).is_some());
    }
}
