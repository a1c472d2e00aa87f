//! Completing a model's per-CPU CPUID: the topology leaves a dump did not record, and the
//! blocks of the CPUs a single-CPU dump does not have.
//!
//! A tool that derives the topology from CPUID (the x2APIC id bit fields of leaf 0BH/1FH or
//! 8000_0026H, the extended APIC id of 8000_001EH, the sharing widths of leaf 4 /
//! 8000_001DH) must find the same packages, L2 and L3 instances as the model's sysfs. Two
//! gaps break that:
//!
//! - **Unrecorded leaf 0BH** ([`fill_leaf_0b`]). hwloc-gather-cpuid skips leaf 0BH when
//!   CPUID.1:ECX\[21\] (x2APIC) is clear, as on the EPYC 7763 machine of the `milan` model,
//!   though Zen 3 implements it (the EPYC 7713 InstLatx64 dump records it:
//!   `0b.0 = 1 2 0x100 id`, `0b.1 = 7 0x80 0x201 id`). On an AMD dump whose leaf 0 reaches 0BH,
//!   the leaf is synthesized per CPU from that CPU's own 8000_001EH (extended APIC id, threads
//!   per core) and 8000_0008H (ApicIdCoreIdSize, threads per package): subleaf 0 is the SMT
//!   level (shift `ceil_log2(threads per core)`, that many threads; with SMT off shift 0 and 1
//!   thread, as the SMT-off EPYC 9655 dump records), subleaf 1 the core level (shift =
//!   ApicIdCoreIdSize, threads per package), subleaf 2 the invalid level; EDX = the x2APIC id
//!   in each.
//! - **Single-CPU dumps** ([`expand`]). The `turin` and `turin-dump` models are built from
//!   an InstLatx64 dump of CPU 0 only. The other CPUs' blocks are CPU 0's with the per-CPU
//!   fields rewritten for a [`Layout`]: CPUID.1:EBX\[31:24\] (initial APIC id, low 8 bits),
//!   EDX of every subleaf of 0BH and 8000_0026H (x2APIC id), 8000_001EH EAX (extended APIC
//!   id), EBX\[7:0\] (core id in the package) and ECX\[7:0\] (node id = package, NPS1). The
//!   x2APIC id of package `s`, CCX `x`, core `c`, thread `t` is
//!   `s << pkg_shift | x << ccx_shift | c << smt_shift | t` with the shifts of the dump's own
//!   leaf 8000_0026H (or 0BH) and 8000_001DH. CPUs are numbered as Linux numbers them on the
//!   EPYC 9654 capture (the `genoa` model): the first thread of every core, package by package,
//!   then the second threads; within a package CCX by CCX in [`Layout::ccx_order`] (the
//!   firmware's order, [`SP5_CCD_ORDER`] on the 9654), core by core.
//! - **Stock parts dumped in another configuration** ([`restock`]). The EPYC 9655 dump was
//!   taken with 64 of its 96 cores and SMT off. For the stock part, CPU 0's topology
//!   enumeration (the counts and widths of leaves 1, 0BH, 8000_0008H, 8000_001DH, 8000_001EH
//!   and 8000_0026H) is first rewritten for the layout's cores and threads, then expanded as
//!   above.
//!
//! Everything synthesized is reported as a note ([`crate::SimPlatform::notes`], shown by
//! `pqos -v --sim`) and in `crates/rdt-sim/models/PROVENANCE.md`.

use rdt_core::topology::ceil_log2;
use rdt_core::{CpuidDump, CpuidRegs, CpuidSource, DumpCpu, LogicalCpu};

/// CPUID.0:EBX of AuthenticAMD and HygonGenuine.
const AMD_EBX: [u32; 2] = [0x6874_7541, 0x6f67_7948];

const fn regs(eax: u32, ebx: u32, ecx: u32, edx: u32) -> CpuidRegs {
    CpuidRegs { eax, ebx, ecx, edx }
}

const fn field(v: u32, hi: u32, lo: u32) -> u32 {
    (v >> lo) & ((1u32 << (hi - lo + 1)) - 1)
}

fn is_amd(src: &dyn CpuidSource) -> bool {
    src.cpuid(0, 0).is_some_and(|r| AMD_EBX.contains(&r.ebx))
}

/// Fills leaf 0BH (subleaves 0-2) in every CPU block of an AMD dump that does not record it
/// though CPUID.0:EAX (highest basic leaf) reaches 0BH (module docs). Returns the note to
/// report, `None` when nothing was filled.
pub(crate) fn fill_leaf_0b(dump: &CpuidDump) -> Option<(CpuidDump, String)> {
    let first = dump.cpus().first()?;
    if !is_amd(first) || first.cpuid(0, 0).is_none_or(|r| r.eax < 0xb) {
        return None;
    }
    if dump.cpus().iter().all(|c| c.cpuid(0xb, 0).is_some()) {
        return None;
    }
    let mut cpus = Vec::with_capacity(dump.cpus().len());
    for c in dump.cpus() {
        let mut c = c.clone();
        if c.cpuid(0xb, 0).is_none() {
            let ext = c.cpuid(0x8000_001e, 0)?;
            let size = c.cpuid(0x8000_0008, 0)?;
            let apic = ext.eax;
            // 8000_001EH:EBX[15:8]: threads per core - 1
            let threads = field(ext.ebx, 15, 8) + 1;
            // 8000_0008H:ECX[7:0]: threads per package - 1; ECX[15:12]: ApicIdCoreIdSize
            let per_pkg = field(size.ecx, 7, 0) + 1;
            let pkg_shift = match field(size.ecx, 15, 12) {
                0 => ceil_log2(per_pkg),
                s => s,
            };
            c.insert(0xb, 0, regs(ceil_log2(threads), threads, 0x100, apic));
            c.insert(0xb, 1, regs(pkg_shift, per_pkg, 0x201, apic));
            c.insert(0xb, 2, regs(0, 0, 0x2, apic));
        }
        cpus.push(c);
    }
    let out = CpuidDump::from_cpus(dump.processor().map(str::to_owned), cpus).ok()?;
    Some((
        out,
        "CPUID.0BH (x2APIC topology) not recorded (the capture skips it when CPUID.1:ECX[21] \
         is clear) though the CPU implements it: synthesized per CPU from its 8000_001EH and \
         8000_0008H, in the layout of the EPYC 7713 (SMT on) and EPYC 9655 (SMT off) dumps"
            .into(),
    ))
}

/// The order in which the firmware of the 2 x EPYC 9654 capture (`genoa`) numbers the CCDs of
/// a package: logical CPUs `8k..8k+7` of package 0 (and likewise of package 1 and of the
/// second threads) sit on CCD `SP5_CCD_ORDER[k]` (`cache/index3/id` 0, 4, 8, 2, ...).
pub(crate) const SP5_CCD_ORDER: &[u32] = &[0, 4, 8, 2, 6, 10, 3, 7, 11, 1, 5, 9];

/// The machine a single-CPU dump is expanded to ([`expand`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Packages (sockets).
    pub packages: u32,
    /// CCXs (L3 instances) per package.
    pub ccx_per_package: u32,
    /// Cores per CCX.
    pub cores_per_ccx: u32,
    /// The CCXs of a package in the order the firmware numbers their CPUs (a permutation of
    /// `0..ccx_per_package`); `None`: ascending.
    pub ccx_order: Option<&'static [u32]>,
    /// Threads per core of the stock part when the dump was taken in another configuration
    /// (fewer cores, SMT off): CPU 0's enumeration is rewritten for the layout first
    /// ([`restock`]). `None`: the dump's own enumeration.
    pub stock_threads: Option<u32>,
}

/// Sets bits `hi..=lo` of `v` to `x`.
const fn set_field(v: u32, hi: u32, lo: u32, x: u32) -> u32 {
    let mask = ((1u32 << (hi - lo + 1)) - 1) << lo;
    (v & !mask) | ((x << lo) & mask)
}

/// CPU 0's block with its topology enumeration rewritten for `layout` with `threads` threads
/// per core (module docs). The shifts: SMT `ceil_log2(threads)`; CCX the dump's own CCX
/// shift, or wider if the layout's cores and threads need it (Zen 4 and 5 keep 4 bits below
/// the CCX: 8 cores x 2 threads); package `ccx + ceil_log2(ccx_per_package)`. Rewritten:
/// CPUID.1:EBX\[23:16\] (threads per package) and EDX\[28\] (HTT); EAX\[4:0\] and
/// EBX\[15:0\] of 0BH and 8000_0026H per level type (SMT; core and complex: the CCX; die:
/// the package); 8000_0008H:ECX\[15:12\] (ApicIdCoreIdSize) and \[7:0\] (threads per
/// package - 1); 8000_001DH:EAX\[25:14\] (threads sharing the cache - 1: a core's for L1
/// and L2, a CCX's for L3); 8000_001EH:EBX\[15:8\] (threads per core - 1). `None` when CPU 0
/// lacks the leaves the shifts come from.
pub(crate) fn restock(base: &DumpCpu, layout: Layout, threads: u32) -> Option<DumpCpu> {
    let (_, dump_ccx, _) = shifts(base)?;
    let smt = ceil_log2(threads);
    let ccx = dump_ccx.max(smt + ceil_log2(layout.cores_per_ccx));
    let pkg = ccx + ceil_log2(layout.ccx_per_package);
    let per_ccx = threads * layout.cores_per_ccx;
    let per_pkg = per_ccx * layout.ccx_per_package;
    let mut c = DumpCpu::new(base.cpu);
    for (leaf, sub, mut r) in base.leaves() {
        // (shift, threads) of an x2APIC level by its type (ECX[15:8])
        let level = |ty: u32| match ty {
            1 => Some((smt, threads)),
            2 | 3 => Some((ccx, per_ccx)),
            4 => Some((pkg, per_pkg)),
            _ => None,
        };
        match leaf {
            1 => {
                r.ebx = set_field(r.ebx, 23, 16, per_pkg.min(0xff));
                r.edx |= 1 << 28;
            }
            // 0BH level types: 1 SMT, 2 core (the package's width on AMD)
            0xb => match field(r.ecx, 15, 8) {
                1 => (r.eax, r.ebx) = (smt, threads),
                2 => (r.eax, r.ebx) = (pkg, per_pkg),
                _ => {}
            },
            0x8000_0026 => {
                if let Some((shift, n)) = level(field(r.ecx, 15, 8)) {
                    r.eax = set_field(r.eax, 4, 0, shift);
                    r.ebx = set_field(r.ebx, 15, 0, n);
                }
            }
            0x8000_0008 => r.ecx = set_field(set_field(r.ecx, 15, 12, pkg), 7, 0, per_pkg - 1),
            0x8000_001d if field(r.eax, 4, 0) != 0 => {
                let sharing = if field(r.eax, 7, 5) == 3 {
                    per_ccx
                } else {
                    threads
                };
                r.eax = set_field(r.eax, 25, 14, sharing - 1);
            }
            0x8000_001e => r.ebx = set_field(r.ebx, 15, 8, threads - 1),
            _ => {}
        }
        c.insert(leaf, sub, r);
    }
    Some(c)
}

/// The x2APIC shifts of a dump's CPU 0: (SMT, CCX, package), from 8000_0026H (Zen 4 and
/// later: levels SMT 1, core 2, complex 3, die/socket 4) or else 0BH and the L3 sharing of
/// 8000_001DH.
fn shifts(c: &DumpCpu) -> Option<(u32, u32, u32)> {
    let level = |leaf: u32, ty: u32| {
        (0..8)
            .map_while(|s| c.cpuid(leaf, s))
            .take_while(|r| field(r.ecx, 15, 8) != 0)
            .filter(|r| field(r.ecx, 15, 8) == ty)
            .map(|r| field(r.eax, 4, 0))
            .last()
    };
    let last = |leaf: u32| {
        (0..8)
            .map_while(|s| c.cpuid(leaf, s))
            .take_while(|r| field(r.ecx, 15, 8) != 0)
            .map(|r| field(r.eax, 4, 0))
            .last()
    };
    let smt = level(0x8000_0026, 1).or_else(|| level(0xb, 1))?;
    let pkg = last(0x8000_0026).or_else(|| last(0xb))?;
    let ccx = level(0x8000_0026, 3).or_else(|| {
        (0..8)
            .map_while(|s| c.cpuid(0x8000_001d, s))
            .take_while(|r| field(r.eax, 4, 0) != 0)
            .find(|r| field(r.eax, 7, 5) == 3)
            .map(|r| ceil_log2(field(r.eax, 25, 14) + 1))
    })?;
    Some((smt, ccx, pkg))
}

/// Expands a single-CPU AMD dump to every CPU of `layout` (module docs). Returns the dump and
/// the note to report; `None` when CPU 0 lacks the topology leaves the layout needs or the
/// layout does not fit them.
pub(crate) fn expand(dump: &CpuidDump, layout: Layout) -> Option<(CpuidDump, String)> {
    let first = dump.cpus().first()?;
    let restocked = match layout.stock_threads {
        Some(t) => Some(restock(first, layout, t)?),
        None => None,
    };
    let base = restocked.as_ref().unwrap_or(first);
    let (smt_shift, ccx_shift, pkg_shift) = shifts(base)?;
    let threads = 1u32 << smt_shift;
    let threads = if base
        .cpuid(0x8000_001e, 0)
        .is_some_and(|r| field(r.ebx, 15, 8) == 0)
    {
        1 // SMT off: one thread per core even where the field is wider
    } else {
        threads
    };
    if layout.cores_per_ccx * (1 << smt_shift) > 1 << ccx_shift
        || layout.ccx_per_package << ccx_shift > 1 << pkg_shift
    {
        return None;
    }
    let ascending: Vec<u32> = (0..layout.ccx_per_package).collect();
    let order = layout.ccx_order.unwrap_or(&ascending);
    let mut sorted = order.to_vec();
    sorted.sort_unstable();
    if sorted != ascending {
        return None;
    }
    let cores = layout.packages * layout.ccx_per_package * layout.cores_per_ccx;
    let mut cpus = Vec::with_capacity((cores * threads) as usize);
    let mut n = 0;
    for t in 0..threads {
        for s in 0..layout.packages {
            for &x in order {
                for c in 0..layout.cores_per_ccx {
                    let apic = s << pkg_shift | x << ccx_shift | c << smt_shift | t;
                    let cpu = LogicalCpu::new(n);
                    cpus.push(place(base, cpu, apic, s, pkg_shift, smt_shift));
                    n += 1;
                }
            }
        }
    }
    let total = cpus.len();
    let out = CpuidDump::from_cpus(dump.processor().map(str::to_owned), cpus).ok()?;
    let mut note = format!(
        "the dump records CPU 0 only: the blocks of all {total} CPUs ({} packages x {} CCX x \
         {} cores x {threads} threads) are CPU 0's with the APIC ids of leaves 1, 0BH, \
         8000_001EH and 8000_0026H rewritten (x2APIC id = package << {pkg_shift} | CCX << \
         {ccx_shift} | core << {smt_shift} | thread)",
        layout.packages, layout.ccx_per_package, layout.cores_per_ccx
    );
    if layout.ccx_order.is_some() {
        note.push_str(&format!(
            ", CPUs numbered CCX by CCX in the firmware order {order:?} of the 2 x EPYC 9654 capture"
        ));
    }
    if restocked.is_some() {
        note.push_str(
            "; the dump was taken in another configuration: CPU 0's thread counts and APIC id \
             widths (leaves 1, 0BH, 8000_0008H, 8000_001DH, 8000_001EH, 8000_0026H) are \
             rewritten for the stock part",
        );
    }
    Some((out, note))
}

/// CPU 0's block with the per-CPU fields of the CPU with x2APIC id `apic` in package `pkg`.
fn place(
    base: &DumpCpu,
    cpu: LogicalCpu,
    apic: u32,
    pkg: u32,
    pkg_shift: u32,
    smt_shift: u32,
) -> DumpCpu {
    let mut c = DumpCpu::new(cpu);
    for (leaf, sub, mut r) in base.leaves() {
        match leaf {
            // EBX[31:24]: initial APIC id (8 bits)
            1 => r.ebx = (r.ebx & 0x00ff_ffff) | (apic & 0xff) << 24,
            // EDX: x2APIC id, in every subleaf
            0xb | 0x1f | 0x8000_0026 => r.edx = apic,
            0x8000_001e => {
                r.eax = apic;
                // EBX[7:0]: core id in the package; ECX[7:0]: node id (NPS1: the package)
                let core = (apic & ((1 << pkg_shift) - 1)) >> smt_shift;
                r.ebx = (r.ebx & !0xff) | (core & 0xff);
                r.ecx = (r.ecx & !0xff) | (pkg & 0xff);
            }
            _ => {}
        }
        c.insert(leaf, sub, r);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_0b_is_filled_from_each_cpus_extended_apic_id() {
        // arrange: two SMT-off AMD CPUs, 64 threads per package, ApicIdCoreIdSize 6
        let text = "# logical-cpu 0\n\
                    00000000 00000000 00000010 68747541 444d4163 69746e65\n\
                    80000008 00000000 00003030 91bef75f 0000603f 00010007\n\
                    8000001e 00000000 00000000 00000000 00000000 00000000\n\
                    # logical-cpu 1\n\
                    00000000 00000000 00000010 68747541 444d4163 69746e65\n\
                    80000008 00000000 00003030 91bef75f 0000603f 00010007\n\
                    8000001e 00000000 00000041 00000001 00000001 00000000\n";
        let dump = CpuidDump::parse(text).unwrap();
        // act
        let (filled, note) = fill_leaf_0b(&dump).unwrap();
        // assert
        let c1 = &filled.cpus()[1];
        assert_eq!(c1.cpuid(0xb, 0), Some(regs(0, 1, 0x100, 0x41)));
        assert_eq!(c1.cpuid(0xb, 1), Some(regs(6, 64, 0x201, 0x41)));
        assert_eq!(c1.cpuid(0xb, 2), Some(regs(0, 0, 2, 0x41)));
        assert!(note.contains("0BH"), "{note}");
        assert!(fill_leaf_0b(&filled).is_none(), "nothing left to fill");
    }

    #[test]
    fn expand_gives_every_cpu_its_own_apic_id() {
        // arrange: Genoa's topology leaves (SMT shift 1, CCX shift 4, package shift 8)
        let text = "00000000 00000000 00000010 68747541 444d4163 69746e65\n\
                    00000001 00000000 00a10f11 00c00800 7efa320b 178bfbff\n\
                    0000000b 00000000 00000001 00000002 00000100 00000000\n\
                    0000000b 00000001 00000008 000000c0 00000201 00000000\n\
                    8000001e 00000000 00000000 00000100 00000000 00000000\n\
                    80000026 00000000 00000001 00000002 00000100 00000000\n\
                    80000026 00000001 00000004 00000010 00000201 00000000\n\
                    80000026 00000002 00000004 00000010 00000302 00000000\n\
                    80000026 00000003 00000008 000000c0 00000403 00000000\n";
        let dump = CpuidDump::parse(text).unwrap();
        let layout = Layout {
            packages: 2,
            ccx_per_package: 12,
            cores_per_ccx: 8,
            ccx_order: None,
            stock_threads: None,
        };
        // act
        let (big, _) = expand(&dump, layout).unwrap();
        // assert: CPU 97 = package 1, CCX 0, core 1, thread 0; CPU 192 = thread 1 of CPU 0
        assert_eq!(big.cpus().len(), 384);
        let c97 = &big.cpus()[97];
        let apic = 1 << 8 | 1 << 1;
        assert_eq!(c97.cpuid(0xb, 1).map(|r| r.edx), Some(apic));
        assert_eq!(c97.cpuid(0x8000_0026, 3).map(|r| r.edx), Some(apic));
        assert_eq!(c97.cpuid(0x8000_001e, 0), Some(regs(apic, 0x101, 1, 0)));
        assert_eq!(c97.cpuid(1, 0).map(|r| r.ebx >> 24), Some(apic & 0xff));
        assert_eq!(big.cpus()[192].cpuid(0xb, 0).map(|r| r.edx), Some(1));
        // a layout that does not fit the id fields is refused
        let too_many = Layout {
            cores_per_ccx: 9,
            ..layout
        };
        assert!(expand(&dump, too_many).is_none());
    }

    /// What a tool that reads only CPUID finds on `cpu` (independent of rdt-core's
    /// `Topology::from_cpuid_dump`): (x2APIC id, package, L2 id, L3 id), from leaf 1FH (Intel,
    /// when valid) or 0BH, which must answer, cross-checked against 8000_001EH and 8000_0026H
    /// on AMD, and the sharing widths of leaf 4 (Intel) / 8000_001DH (AMD).
    fn cpuid_view(c: &crate::SimCpuid, cpu: LogicalCpu, amd: bool) -> (u32, u32, u32, u32) {
        let q = |leaf, sub| c.cpuid_on(cpu, leaf, sub);
        let max_basic = q(0, 0).unwrap().eax;
        let levels = |leaf: u32| -> Option<Vec<CpuidRegs>> {
            if leaf > max_basic && leaf < 0x8000_0000 {
                return None;
            }
            let v: Vec<CpuidRegs> = (0..8)
                .map_while(|s| q(leaf, s))
                .take_while(|r| field(r.ecx, 15, 8) != 0)
                .collect();
            (!v.is_empty() && field(v[0].ebx, 15, 0) != 0).then_some(v)
        };
        let topo = (!amd)
            .then(|| levels(0x1f))
            .flatten()
            .or_else(|| levels(0xb))
            .unwrap_or_else(|| panic!("CPU {cpu}: no x2APIC topology leaf answers"));
        let apic = topo[0].edx;
        assert!(topo.iter().all(|r| r.edx == apic), "CPU {cpu}: EDX differs");
        let pkg_shift = field(topo.last().unwrap().eax, 4, 0);
        assert_eq!(
            q(1, 0).map(|r| r.ebx >> 24),
            Some(apic & 0xff),
            "CPU {cpu}: initial APIC id"
        );
        if amd {
            assert_eq!(q(0x8000_001e, 0).map(|r| r.eax), Some(apic), "CPU {cpu}");
            if let Some(ext) = levels(0x8000_0026) {
                assert!(ext.iter().all(|r| r.edx == apic), "CPU {cpu}: 8000_0026H");
                assert_eq!(field(ext.last().unwrap().eax, 4, 0), pkg_shift, "CPU {cpu}");
            }
        }
        let cache_leaf = if amd { 0x8000_001d } else { 4 };
        let mut shift = [None; 4];
        for r in (0..16).map_while(|s| q(cache_leaf, s)) {
            // EAX[4:0]: type (0 none, 1 data, 2 code, 3 unified); EAX[7:5]: level
            let (ty, level) = (field(r.eax, 4, 0), field(r.eax, 7, 5) as usize);
            if ty == 0 {
                break;
            }
            if ty != 2 && level < 4 && shift[level].is_none() {
                shift[level] = Some(ceil_log2(field(r.eax, 25, 14) + 1));
            }
        }
        let (l2, l3) = (shift[2].expect("an L2"), shift[3].expect("an L3"));
        (apic, apic >> pkg_shift, apic >> l2, apic >> l3)
    }

    #[test]
    fn a_topology_from_cpuid_alone_equals_the_sysfs_topology_on_every_model() {
        for model in crate::BUILTIN_MODELS {
            // arrange
            let p = crate::SimPlatform::builtin(model).unwrap();
            let c = p.cpuid();
            let amd = is_amd(&c);
            let mut apics = std::collections::BTreeSet::new();
            for place in p.topology().cpus() {
                // act
                let (apic, pkg, l2, l3) = cpuid_view(&c, place.cpu, amd);
                // assert
                assert!(apics.insert(apic), "{model}: x2APIC id {apic} twice");
                assert_eq!(
                    (pkg, l2, l3),
                    (place.package, place.l2.get(), place.l3.unwrap().get()),
                    "{model} CPU {}",
                    place.cpu
                );
            }
        }
    }
}
