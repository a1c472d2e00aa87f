//! [`SysfsTree`]: `sys/devices/system` of the simulated platform, the files
//! [`rdt_host::topology::TopologyFromSysfs::from_sysfs`], pqos's OS mode and hwloc read.

use std::collections::BTreeMap;
use std::io;

use rdt_core::topology::ceil_log2;
use rdt_core::{CacheDomain, CpuPlacement, CpuSet, LogicalCpu, Topology};

use super::static_tree::StaticTree;
use crate::vfs::{NodeKind, Tree};
use crate::{SimCpuid, SimPlatform};

/// One cache entry of CPUID leaf 4 (Intel) or 8000_001DH (AMD, Hygon), which the kernel
/// turns into `cpuN/cache/indexK/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CacheLeaf {
    /// EAX\[7:5\].
    level: u32,
    /// EAX\[4:0\]: 1 data, 2 instruction, 3 unified.
    kind: u32,
    /// EAX\[25:14\] + 1: the most logical processor ids that share it.
    sharing: u32,
    /// EBX\[31:22\] + 1.
    ways: u32,
    /// EBX\[21:12\] + 1.
    partitions: u32,
    /// EBX\[11:0\] + 1, bytes.
    line: u32,
    /// ECX + 1.
    sets: u32,
}

impl CacheLeaf {
    fn type_name(self) -> &'static str {
        match self.kind {
            1 => "Data",
            2 => "Instruction",
            _ => "Unified",
        }
    }

    fn size_bytes(self) -> u64 {
        u64::from(self.ways)
            * u64::from(self.partitions)
            * u64::from(self.line)
            * u64::from(self.sets)
    }
}

/// The cache entries CPU `cpu` enumerates, in subleaf order (index0, index1, ...).
fn cache_leaves(cpuid: &SimCpuid, cpu: LogicalCpu, amd: bool) -> Vec<CacheLeaf> {
    let (leaf, max_leaf) = if amd {
        // AMD: 8000_001DH needs the extended maximum leaf and TopologyExtensions,
        // CPUID.8000_0001H:ECX[22].
        let max = cpuid.cpuid_on(cpu, 0x8000_0000, 0).map_or(0, |r| r.eax);
        let topoext = cpuid
            .cpuid_on(cpu, 0x8000_0001, 0)
            .is_some_and(|r| r.ecx & (1 << 22) != 0);
        (0x8000_001D, if topoext { max } else { 0 })
    } else {
        (4, cpuid.cpuid_on(cpu, 0, 0).map_or(0, |r| r.eax))
    };
    if max_leaf < leaf {
        return Vec::new();
    }
    let mut out = Vec::new();
    for sub in 0..16 {
        let Some(r) = cpuid.cpuid_on(cpu, leaf, sub) else {
            break;
        };
        let kind = r.eax & 0x1f; // EAX[4:0]: cache type, 0 = no more caches
        if kind == 0 {
            break;
        }
        out.push(CacheLeaf {
            level: (r.eax >> 5) & 0x7,
            kind,
            sharing: ((r.eax >> 14) & 0xfff) + 1,
            ways: (r.ebx >> 22) + 1,
            partitions: ((r.ebx >> 12) & 0x3ff) + 1,
            line: (r.ebx & 0xfff) + 1,
            sets: r.ecx.wrapping_add(1),
        });
    }
    out
}

/// The x2APIC id of `cpu` as the kernel reads it: CPUID.(1FH or 0BH, 0):EDX where the leaf
/// enumerates a level, else (AMD) CPUID.8000_001EH:EAX, else CPUID.1:EBX\[31:24\].
fn apic_id(cpuid: &SimCpuid, cpu: LogicalCpu, amd: bool) -> Option<u32> {
    let max = cpuid.cpuid_on(cpu, 0, 0)?.eax;
    for leaf in [0x1f, 0xb] {
        if max >= leaf
            && let Some(r) = cpuid.cpuid_on(cpu, leaf, 0).filter(|r| r.ebx & 0xffff != 0)
        {
            return Some(r.edx);
        }
    }
    if amd && let Some(r) = cpuid.cpuid_on(cpu, 0x8000_001e, 0) {
        return Some(r.eax);
    }
    cpuid.cpuid_on(cpu, 1, 0).map(|r| r.ebx >> 24)
}

/// The kernel's fixed-width bitmap form of a CPU set (`%*pb` with `nr_cpu_ids` bits):
/// `ceil(bits/4)` hex digits in comma-separated groups of 8 from the right
/// (`0000,00000100,00000001` for CPUs 0 and 40 of 80).
fn sysfs_mask(set: &CpuSet, bits: u32) -> String {
    let digits = bits.div_ceil(4).max(1) as usize;
    let mut nibbles = vec![0u8; digits];
    for cpu in set.iter() {
        let i = cpu.get() as usize / 4;
        if i < digits {
            nibbles[i] |= 1 << (cpu.get() % 4);
        }
    }
    let mut out = String::with_capacity(digits + digits / 8);
    for (pos, i) in (0..digits).rev().enumerate() {
        if pos > 0 && (i + 1) % 8 == 0 {
            out.push(',');
        }
        out.push(char::from_digit(u32::from(nibbles[i]), 16).unwrap_or('0'));
    }
    out
}

/// `sys/devices/system` of a [`SimPlatform`]: consistent with its [`Topology`] (what the
/// dump's x2APIC ids imply) and its CPUID cache leaves, so that
/// `Topology::from_sysfs(DIR/sys/devices/system)` equals [`SimPlatform::topology`].
///
/// | path | content |
/// |---|---|
/// | `cpu/{online,possible,present}` | every CPU of the model (list form); `cpu/offline` empty |
/// | `cpu/cpuN/online` | `1` (not for CPU 0, which the kernel cannot offline, as on real systems) |
/// | `cpu/cpuN/topology/` | `physical_package_id`, `core_id`, `die_id` (0: the dumps carry no die level the model uses), `cluster_id` (the L2 id), `thread_siblings[_list]` and `core_cpus[_list]` (same package and core), `core_siblings[_list]`, `package_cpus[_list]`, `die_cpus[_list]` (same package) |
/// | `cpu/cpuN/cache/indexK/` | one per entry of CPUID leaf 4 (Intel) / 8000_001DH (AMD) in subleaf order: `level`, `type`, `id`, `shared_cpu_list`, `shared_cpu_map`, `size` (`NK`), `ways_of_associativity`, `coherency_line_size`, `number_of_sets`, `physical_line_partition` |
/// | `cpu/cpuN/nodeM` | symlink to `../../node/nodeM` |
/// | `node/{online,possible,has_cpu}`, `node/nodeM/{cpulist,cpumap}` | NUMA nodes (one per package: dumps carry no NUMA information) |
///
/// Cache ids are the kernel's (`arch/x86/kernel/cpu/cacheinfo.c`): the x2APIC id shifted
/// right by `ceil(log2(EAX[25:14] + 1))`. The L2 and L3 entries take their id and CPU set
/// from the model's [`Topology`] (computed that way from the dump); the L1 entries from each
/// CPU's own APIC id, or, when the dump has none, the L2's id and the core's threads.
/// Without cache leaves, the CPUs get an L2 and (where the topology has one) an L3 entry
/// with the level, type, id and CPU files only.
///
/// # References
/// Linux `Documentation/ABI/testing/sysfs-devices-system-cpu`, `drivers/base/cacheinfo.c`,
/// `drivers/base/topology.c`, `drivers/base/node.c`.
#[derive(Debug)]
pub struct SysfsTree {
    tree: StaticTree,
}

impl SysfsTree {
    /// Builds the tree of `platform`.
    #[must_use]
    pub fn new(platform: &SimPlatform) -> Self {
        let topo = platform.topology();
        let cpuid = platform.cpuid();
        let amd = platform.capabilities().vendor.is_amd_like();
        let mut t = StaticTree::new();
        let all = topo.all_cpus();
        let bits = all.iter().last().map_or(1, |c| c.get() + 1);
        let list = |s: &CpuSet| format!("{s}\n");
        let mask = |s: &CpuSet| format!("{}\n", sysfs_mask(s, bits));

        t.file("cpu/online", list(&all));
        t.file("cpu/possible", list(&all));
        t.file("cpu/present", list(&all));
        t.file("cpu/offline", "\n");

        let caches = CacheLayout::new(topo, &cpuid, amd);
        for p in topo.cpus() {
            let dir = format!("cpu/cpu{}", p.cpu);
            if p.cpu.get() != 0 {
                t.file(&format!("{dir}/online"), "1\n");
            }
            let threads: CpuSet = topo
                .cpus()
                .iter()
                .filter(|q| q.package == p.package && q.core == p.core)
                .map(|q| q.cpu)
                .collect();
            let package = topo.cpus_in_package(p.package);
            let td = format!("{dir}/topology");
            t.file(
                &format!("{td}/physical_package_id"),
                format!("{}\n", p.package),
            );
            t.file(
                &format!("{td}/core_id"),
                format!("{}\n", p.core.unwrap_or(0)),
            );
            t.file(&format!("{td}/die_id"), "0\n");
            t.file(&format!("{td}/cluster_id"), format!("{}\n", p.l2));
            for name in ["thread_siblings", "core_cpus"] {
                t.file(&format!("{td}/{name}"), mask(&threads));
                t.file(&format!("{td}/{name}_list"), list(&threads));
            }
            for name in ["core_siblings", "package_cpus", "die_cpus"] {
                t.file(&format!("{td}/{name}"), mask(&package));
                t.file(&format!("{td}/{name}_list"), list(&package));
            }
            for (k, c) in caches.of(p).into_iter().enumerate() {
                let cd = format!("{dir}/cache/index{k}");
                t.file(&format!("{cd}/level"), format!("{}\n", c.level));
                t.file(&format!("{cd}/type"), format!("{}\n", c.type_name));
                t.file(&format!("{cd}/id"), format!("{}\n", c.id));
                t.file(&format!("{cd}/shared_cpu_list"), list(&c.cpus));
                t.file(&format!("{cd}/shared_cpu_map"), mask(&c.cpus));
                if let Some(g) = c.geometry {
                    t.file(
                        &format!("{cd}/size"),
                        format!("{}K\n", g.size_bytes() / 1024),
                    );
                    t.file(
                        &format!("{cd}/ways_of_associativity"),
                        format!("{}\n", g.ways),
                    );
                    t.file(
                        &format!("{cd}/coherency_line_size"),
                        format!("{}\n", g.line),
                    );
                    t.file(&format!("{cd}/number_of_sets"), format!("{}\n", g.sets));
                    t.file(
                        &format!("{cd}/physical_line_partition"),
                        format!("{}\n", g.partitions),
                    );
                }
            }
            t.link(
                &format!("{dir}/node{}", p.node),
                format!("../../node/node{}", p.node),
            );
        }

        let nodes: CpuSet = topo.nodes().into_iter().map(LogicalCpu::new).collect();
        for name in ["online", "possible", "has_cpu"] {
            t.file(&format!("node/{name}"), list(&nodes));
        }
        for node in topo.nodes() {
            let cpus: CpuSet = topo
                .cpus()
                .iter()
                .filter(|p| p.node == node)
                .map(|p| p.cpu)
                .collect();
            t.file(&format!("node/node{node}/cpulist"), list(&cpus));
            t.file(&format!("node/node{node}/cpumap"), mask(&cpus));
        }
        Self { tree: t }
    }
}

/// One `cpuN/cache/indexK` of one CPU.
struct CacheFiles {
    level: u32,
    type_name: &'static str,
    id: u32,
    cpus: CpuSet,
    geometry: Option<CacheLeaf>,
}

/// Cache ids and sharing sets of every CPU, worked out once.
struct CacheLayout<'a> {
    topo: &'a Topology,
    /// The entries of each CPU's cache leaf.
    leaves: BTreeMap<LogicalCpu, Vec<CacheLeaf>>,
    /// Every CPU's x2APIC id, when the dump gives one for each.
    apic: Option<BTreeMap<LogicalCpu, u32>>,
}

impl<'a> CacheLayout<'a> {
    fn new(topo: &'a Topology, cpuid: &SimCpuid, amd: bool) -> Self {
        let leaves = topo
            .cpus()
            .iter()
            .map(|p| (p.cpu, cache_leaves(cpuid, p.cpu, amd)))
            .collect();
        let apic = topo
            .cpus()
            .iter()
            .map(|p| apic_id(cpuid, p.cpu, amd).map(|a| (p.cpu, a)))
            .collect();
        Self { topo, leaves, apic }
    }

    /// The id of cache entry `k` of `cpu` from its APIC id, if known.
    fn apic_cache_id(&self, cpu: LogicalCpu, k: usize) -> Option<u32> {
        let leaf = self.leaves.get(&cpu)?.get(k)?;
        let apic = self.apic.as_ref()?.get(&cpu)?;
        Some(apic >> ceil_log2(leaf.sharing))
    }

    fn of(&self, p: &CpuPlacement) -> Vec<CacheFiles> {
        let leaves = self.leaves.get(&p.cpu).map_or(&[][..], Vec::as_slice);
        if leaves.is_empty() {
            return self.fallback(p);
        }
        let mut out = Vec::new();
        for (k, leaf) in leaves.iter().enumerate() {
            let (id, cpus) = match (leaf.level, leaf.kind) {
                (2, 1 | 3) => (p.l2.get(), self.topo.cpus_in_l2(p.l2)),
                (3, 3) => match p.l3 {
                    Some(d) => (d.get(), self.topo.cpus_in_l3(d)),
                    None => continue,
                },
                _ => match self.apic_cache_id(p.cpu, k) {
                    Some(id) => {
                        let cpus = self
                            .topo
                            .cpus()
                            .iter()
                            .filter(|q| self.apic_cache_id(q.cpu, k) == Some(id))
                            .map(|q| q.cpu)
                            .collect();
                        (id, cpus)
                    }
                    None => (
                        p.l2.get(),
                        self.topo
                            .cpus()
                            .iter()
                            .filter(|q| q.package == p.package && q.core == p.core)
                            .map(|q| q.cpu)
                            .collect(),
                    ),
                },
            };
            out.push(CacheFiles {
                level: leaf.level,
                type_name: leaf.type_name(),
                id,
                cpus,
                geometry: Some(*leaf),
            });
        }
        out
    }

    /// Without cache leaves: the L2 and L3 the topology knows.
    fn fallback(&self, p: &CpuPlacement) -> Vec<CacheFiles> {
        let mut out = vec![CacheFiles {
            level: 2,
            type_name: "Unified",
            id: p.l2.get(),
            cpus: self.topo.cpus_in_l2(p.l2),
            geometry: None,
        }];
        if let Some(d) = p.l3 {
            out.push(CacheFiles {
                level: 3,
                type_name: "Unified",
                id: CacheDomain::get(d),
                cpus: self.topo.cpus_in_l3(d),
                geometry: None,
            });
        }
        out
    }
}

impl Tree for SysfsTree {
    fn kind(&self, path: &str) -> io::Result<NodeKind> {
        self.tree.kind(path)
    }

    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>> {
        self.tree.list(path)
    }

    fn read(&mut self, path: &str, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        self.tree.read(path, offset, size)
    }

    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> io::Result<usize> {
        self.tree.write(path, offset, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(t: &mut SysfsTree, path: &str) -> String {
        String::from_utf8(t.read(path, 0, 65536).unwrap()).unwrap()
    }

    #[test]
    fn masks_are_fixed_width_in_groups_of_eight_digits() {
        let set: CpuSet = "0,40".parse().unwrap();
        assert_eq!(sysfs_mask(&set, 80), "0000,00000100,00000001");
        let set: CpuSet = "0-19,40-59".parse().unwrap();
        assert_eq!(sysfs_mask(&set, 80), "0000,0fffff00,000fffff");
        let set: CpuSet = "0-1".parse().unwrap();
        assert_eq!(sysfs_mask(&set, 8), "03");
        assert_eq!(sysfs_mask(&set, 32), "00000003");
    }

    #[test]
    fn broadwell_cpu0_has_the_kernels_four_caches_with_dump_geometry() {
        // arrange
        let sim = SimPlatform::builtin("broadwell-ep").unwrap();
        // act
        let mut t = SysfsTree::new(&sim);
        // assert: E5-2650L v4, 2 x 14 cores x 2 threads; siblings n / n+28.
        assert_eq!(read(&mut t, "cpu/online"), "0-55\n");
        assert_eq!(read(&mut t, "cpu/cpu0/cache/index0/type"), "Data\n");
        assert_eq!(read(&mut t, "cpu/cpu0/cache/index0/size"), "32K\n");
        assert_eq!(read(&mut t, "cpu/cpu0/cache/index1/type"), "Instruction\n");
        assert_eq!(read(&mut t, "cpu/cpu0/cache/index2/size"), "256K\n");
        assert_eq!(read(&mut t, "cpu/cpu0/cache/index3/size"), "35840K\n");
        assert_eq!(
            read(&mut t, "cpu/cpu0/cache/index3/ways_of_associativity"),
            "20\n"
        );
        let l1 = read(&mut t, "cpu/cpu0/cache/index0/shared_cpu_list");
        assert_eq!(l1, read(&mut t, "cpu/cpu0/topology/thread_siblings_list"));
        assert_eq!(l1, "0,28\n");
        assert_eq!(
            read(&mut t, "cpu/cpu0/cache/index0/shared_cpu_map"),
            "000000,10000001\n"
        );
        assert_eq!(read(&mut t, "node/online"), "0-1\n");
        assert!(
            t.kind("cpu/cpu0/online").is_err(),
            "CPU 0 cannot go offline"
        );
        assert_eq!(read(&mut t, "cpu/cpu1/online"), "1\n");
    }
}
