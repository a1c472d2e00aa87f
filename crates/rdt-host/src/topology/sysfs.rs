//! Topology from a sysfs system directory (`/sys/devices/system`), read from the kernel's
//! aggregated CPU lists: one `topology/package_cpus_list` per package, one
//! `cache/indexK/shared_cpu_list` per cache instance, one `node/nodeM/cpulist` per node,
//! never a file per CPU. On the 160-CPU sapphire-rapids model that is ~90 files where a
//! per-CPU walk read ~2,300.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::file::{ReadError, read_attribute};
use rdt_core::{CacheDomain, CpuSet, LogicalCpu};
use rdt_core::{CpuPlacement, Topology, TopologyError};

/// Bound of one sysfs attribute. A CPU list of the largest `NR_CPUS` (8192) in its worst
/// form (every other CPU: `0,2,4,...`) is ~40 KiB; the kernel's own bound for `cpulist`
/// bin attributes is `CPULIST_FILE_MAX_BYTES` (`include/linux/cpumask.h`), about as large.
const MAX_ATTRIBUTE_BYTES: u64 = 64 << 10;

/// What every reading starts from: the online CPUs, which cache index is L2 and L3, and
/// each CPU's package.
struct Start {
    cpu_dir: PathBuf,
    online: CpuSet,
    layout: CacheLayout,
    packages: BTreeMap<LogicalCpu, u32>,
}

impl Start {
    fn read(system: &Path) -> Result<Self, TopologyError> {
        let cpu_dir = system.join("cpu");
        let online = online_cpus(&cpu_dir)?;
        let Some(first) = online.first() else {
            return Err(TopologyError::NoCpus { path: cpu_dir });
        };
        let layout = CacheLayout::read(&cpu_dir, first)?;
        let packages = packages(&cpu_dir, &online)?;
        Ok(Self {
            cpu_dir,
            online,
            layout,
            packages,
        })
    }

    /// The cache instance of each CPU of `cpus` at cache index `index` (none without one).
    fn domains(
        &self,
        cpus: &CpuSet,
        index: Option<u32>,
    ) -> Result<BTreeMap<LogicalCpu, CacheDomain>, TopologyError> {
        index.map_or_else(
            || Ok(BTreeMap::new()),
            |k| cache_domains(&self.cpu_dir, cpus, k),
        )
    }
}

pub(super) fn read(system: &Path) -> Result<Topology, TopologyError> {
    let start = Start::read(system)?;
    let online = &start.online;
    let l2 = start.domains(online, start.layout.l2)?;
    let l3 = start.domains(online, start.layout.l3)?;
    let nodes = node_lists(&system.join("node"))?;
    Ok(place(online, &start.packages, &l2, &l3, &nodes))
}

/// The topology of `cpus` from the per-CPU maps the aggregated lists gave.
fn place(
    cpus: &CpuSet,
    packages: &BTreeMap<LogicalCpu, u32>,
    l2: &BTreeMap<LogicalCpu, CacheDomain>,
    l3: &BTreeMap<LogicalCpu, CacheDomain>,
    nodes: &BTreeMap<LogicalCpu, u32>,
) -> Topology {
    let placements = cpus
        .iter()
        .map(|cpu| CpuPlacement {
            cpu,
            package: packages.get(&cpu).copied().unwrap_or(0),
            core: None,
            // A CPU without an L2 entry (some VMs) has a private one, named by its number.
            l2: l2.get(&cpu).copied().unwrap_or(CacheDomain::new(cpu.get())),
            l3: l3.get(&cpu).copied(),
            node: nodes.get(&cpu).copied().unwrap_or(0),
        })
        .collect();
    Topology::from_placements(placements)
}

/// The online CPUs (`cpu/online`, or a scan of `cpu/cpuN/online` without it).
pub(super) fn online(system: &Path) -> Result<CpuSet, TopologyError> {
    online_cpus(&system.join("cpu"))
}

/// The NUMA node of each CPU a `node/nodeM/cpulist` lists.
pub(super) fn nodes(system: &Path) -> Result<BTreeMap<LogicalCpu, u32>, TopologyError> {
    node_lists(&system.join("node"))
}

/// One CPU per L3 instance (per package where a CPU has no L3), placed fully; see
/// [`Topology::l3_representatives_from_sysfs`].
pub(super) fn read_l3_representatives(system: &Path) -> Result<Topology, TopologyError> {
    let start = Start::read(system)?;
    let (online, packages) = (&start.online, &start.packages);
    let l3 = start.domains(online, start.layout.l3)?;
    let nodes = node_lists(&system.join("node"))?;
    // The lowest CPU of each L3 instance in each NUMA node (one per L3 without Sub-NUMA
    // Clustering; with it, the nodes of an L3 show in the sample), and of each package for
    // CPUs without an L3.
    let mut seen_l3 = BTreeMap::new();
    let mut seen_pkg = BTreeMap::new();
    let mut chosen = CpuSet::new();
    for cpu in online.iter() {
        let fresh = match l3.get(&cpu) {
            Some(d) => seen_l3
                .insert((*d, nodes.get(&cpu).copied()), cpu)
                .is_none(),
            None => seen_pkg.insert(packages.get(&cpu).copied(), cpu).is_none(),
        };
        if fresh {
            chosen.insert(cpu);
        }
    }
    let l2 = start.domains(&chosen, start.layout.l2)?;
    Ok(place(&chosen, packages, &l2, &l3, &nodes))
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> TopologyError + '_ {
    move |source| TopologyError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads a sysfs attribute, `None` when it does not exist.
fn read_opt(path: &Path) -> Result<Option<String>, TopologyError> {
    match read_attribute(path, MAX_ATTRIBUTE_BYTES) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| parse_err(path, &String::from_utf8_lossy(e.as_bytes()), "text")),
        Err(ReadError::Open(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path)(io::Error::from(e))),
    }
}

fn read_file(path: &Path) -> Result<String, TopologyError> {
    read_opt(path)?.ok_or_else(|| io_err(path)(io::ErrorKind::NotFound.into()))
}

fn parse_err(path: &Path, text: &str, expected: &'static str) -> TopologyError {
    TopologyError::Parse {
        path: path.to_owned(),
        text: text.trim().to_owned(),
        expected,
    }
}

fn parse_u32(path: &Path, text: &str) -> Result<u32, TopologyError> {
    text.trim()
        .parse()
        .map_err(|_| parse_err(path, text, "a decimal number"))
}

/// A topology id; `-1` ("unknown" on some architectures) reads as 0.
fn parse_id(path: &Path, text: &str) -> Result<u32, TopologyError> {
    if text.trim() == "-1" {
        return Ok(0);
    }
    parse_u32(path, text)
}

fn parse_list(path: &Path, text: &str) -> Result<CpuSet, TopologyError> {
    text.parse()
        .map_err(|_| parse_err(path, text, "a CPU list such as `0-3,8`"))
}

/// `prefixN` -> `Some(N)`.
fn numbered(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

/// Names of the entries of `dir` that are `prefixN`, as (N, path), sorted by N; `None` when
/// `dir` does not exist (one listing, no `stat` before it).
fn numbered_entries(
    dir: &Path,
    prefix: &str,
) -> Result<Option<Vec<(u32, PathBuf)>>, TopologyError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err(dir))?;
        if let Some(n) = entry.file_name().to_str().and_then(|s| numbered(s, prefix)) {
            out.push((n, entry.path()));
        }
    }
    out.sort();
    Ok(Some(out))
}

fn online_cpus(cpu_dir: &Path) -> Result<CpuSet, TopologyError> {
    let online = cpu_dir.join("online");
    if let Some(text) = read_opt(&online)? {
        return parse_list(&online, &text);
    }
    let entries = numbered_entries(cpu_dir, "cpu")?
        .ok_or_else(|| io_err(cpu_dir)(io::Error::from(io::ErrorKind::NotFound)))?;
    let mut set = CpuSet::new();
    for (n, path) in entries {
        let flag = path.join("online");
        let is_online = match read_opt(&flag)? {
            None => true, // CPU 0 often has no `online` file: it cannot be taken offline.
            Some(t) => parse_u32(&flag, &t)? != 0,
        };
        if is_online {
            set.insert(LogicalCpu::new(n));
        }
    }
    Ok(set)
}

/// Which `cache/indexK` entries are the L2 and the L3.
///
/// Read once, from the first online CPU: on x86 the kernel makes entry K of every CPU from
/// subleaf K of CPUID leaf 4 (Intel) or 8000_001DH (AMD), whose order the architecture
/// fixes per processor (L1d, L1i, L2, L3; the same on the P- and E-cores of hybrid parts),
/// so the layout of one CPU is that of all. A CPU that lacks the entry (some VMs) is
/// handled where its list is read.
#[derive(Clone, Copy, Debug, Default)]
struct CacheLayout {
    /// The level-2 `Data` or `Unified` entry.
    l2: Option<u32>,
    /// The level-3 `Unified` entry.
    l3: Option<u32>,
}

impl CacheLayout {
    fn read(cpu_dir: &Path, cpu: LogicalCpu) -> Result<Self, TopologyError> {
        let cache_dir = cpu_dir.join(format!("cpu{cpu}/cache"));
        let mut layout = Self::default();
        for (k, index) in numbered_entries(&cache_dir, "index")?.unwrap_or_default() {
            let level_path = index.join("level");
            let level = parse_u32(&level_path, &read_file(&level_path)?)?;
            if !(2..=3).contains(&level) {
                continue;
            }
            let kind = read_file(&index.join("type"))?;
            let slot = match (level, kind.trim()) {
                (2, "Data" | "Unified") => &mut layout.l2,
                (3, "Unified") => &mut layout.l3,
                _ => continue,
            };
            slot.get_or_insert(k);
        }
        Ok(layout)
    }
}

/// Assigns each online CPU the value of the group it belongs to, reading one group per
/// lowest CPU not yet placed: `group(cpu)` gives the group's value and its CPUs (`None`: the
/// CPU has none, e.g. no such cache). CPUs a list names that are not online are skipped;
/// the CPU read always gets its group's value, even from a list that omits it.
fn by_group<T: Copy>(
    online: &CpuSet,
    mut group: impl FnMut(LogicalCpu) -> Result<Option<(T, CpuSet)>, TopologyError>,
) -> Result<BTreeMap<LogicalCpu, T>, TopologyError> {
    let mut placed = BTreeMap::new();
    let mut absent = CpuSet::new();
    for cpu in online.iter() {
        if placed.contains_key(&cpu) || absent.contains(cpu) {
            continue;
        }
        match group(cpu)? {
            Some((value, cpus)) => {
                for other in cpus.iter().filter(|c| online.contains(*c)) {
                    placed.entry(other).or_insert(value);
                }
                placed.insert(cpu, value);
            }
            None => {
                absent.insert(cpu);
            }
        }
    }
    Ok(placed)
}

/// CPU -> package: per package, `physical_package_id` and `package_cpus_list` (Linux 5.5+;
/// `core_siblings_list` before, the same list) of its lowest online CPU. A kernel with
/// neither list costs a `physical_package_id` per CPU.
fn packages(cpu_dir: &Path, online: &CpuSet) -> Result<BTreeMap<LogicalCpu, u32>, TopologyError> {
    by_group(online, |cpu| {
        let topo = cpu_dir.join(format!("cpu{cpu}/topology"));
        let id_path = topo.join("physical_package_id");
        let id = parse_id(&id_path, &read_file(&id_path)?)?;
        let mut cpus = CpuSet::new();
        for name in ["package_cpus_list", "core_siblings_list"] {
            let list = topo.join(name);
            if let Some(text) = read_opt(&list)? {
                cpus = parse_list(&list, &text)?;
                break;
            }
        }
        Ok(Some((id, cpus)))
    })
}

/// CPU -> cache instance of entry `index`: per instance, the `shared_cpu_list` and `id` of
/// its lowest online CPU. Kernels before 4.13 have no `id`: the instance is then named by
/// the lowest CPU of its list. A CPU without the entry has no such cache.
fn cache_domains(
    cpu_dir: &Path,
    online: &CpuSet,
    index: u32,
) -> Result<BTreeMap<LogicalCpu, CacheDomain>, TopologyError> {
    by_group(online, |cpu| {
        let dir = cpu_dir.join(format!("cpu{cpu}/cache/index{index}"));
        let list_path = dir.join("shared_cpu_list");
        let Some(text) = read_opt(&list_path)? else {
            return Ok(None);
        };
        let cpus = parse_list(&list_path, &text)?;
        let id_path = dir.join("id");
        let id = match read_opt(&id_path)? {
            Some(t) => parse_u32(&id_path, &t)?,
            None => cpus
                .first()
                .ok_or_else(|| parse_err(&list_path, &text, "a non-empty CPU list"))?
                .get(),
        };
        Ok(Some((CacheDomain::new(id), cpus)))
    })
}

/// CPU -> node from `node/nodeM/cpulist`; empty when there is no `node` directory (a
/// kernel without NUMA: everything is node 0).
fn node_lists(node_dir: &Path) -> Result<BTreeMap<LogicalCpu, u32>, TopologyError> {
    let mut map = BTreeMap::new();
    for (node, path) in numbered_entries(node_dir, "node")?.unwrap_or_default() {
        let list = path.join("cpulist");
        if let Some(text) = read_opt(&list)? {
            for cpu in parse_list(&list, &text)?.iter() {
                map.entry(cpu).or_insert(node);
            }
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologyFromSysfs;

    /// Writes `files` (relative path, contents) under a fresh temp dir.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    /// One CPU's topology and cache files as the kernel writes them: (cpu, package, its
    /// CPUs, L2 id, its CPUs, L3 id, its CPUs).
    fn cpu_files(
        cpu: u32,
        (pkg, pkg_cpus): (u32, &str),
        (l2, l2_cpus): (u32, &str),
        (l3, l3_cpus): (u32, &str),
    ) -> Vec<(String, String)> {
        let d = format!("cpu/cpu{cpu}");
        let mut files = vec![
            (
                format!("{d}/topology/physical_package_id"),
                format!("{pkg}\n"),
            ),
            (
                format!("{d}/topology/package_cpus_list"),
                format!("{pkg_cpus}\n"),
            ),
            (format!("{d}/topology/core_id"), "0\n".into()),
        ];
        for (k, level, kind, id, cpus) in [
            (0, 1, "Data", cpu, format!("{cpu}")),
            (1, 1, "Instruction", cpu, format!("{cpu}")),
            (2, 2, "Unified", l2, l2_cpus.to_owned()),
            (3, 3, "Unified", l3, l3_cpus.to_owned()),
        ] {
            let i = format!("{d}/cache/index{k}");
            files.push((format!("{i}/level"), format!("{level}\n")));
            files.push((format!("{i}/type"), format!("{kind}\n")));
            files.push((format!("{i}/id"), format!("{id}\n")));
            files.push((format!("{i}/shared_cpu_list"), format!("{cpus}\n")));
        }
        files
    }

    fn build(files: &[(String, String)]) -> tempfile::TempDir {
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        tree(&refs)
    }

    #[test]
    fn two_packages_with_online_list_and_node_cpulists() {
        // arrange: 4 CPUs, 2 packages, CPU 3 offline per cpu/online
        let mut files = vec![
            ("cpu/online".to_owned(), "0-2\n".to_owned()),
            ("node/node0/cpulist".into(), "0-1\n".into()),
            ("node/node1/cpulist".into(), "2-3\n".into()),
        ];
        files.extend(cpu_files(0, (0, "0-1"), (0, "0"), (0, "0-1")));
        files.extend(cpu_files(1, (0, "0-1"), (1, "1"), (0, "0-1")));
        files.extend(cpu_files(2, (1, "2-3"), (8, "2"), (1, "2-3")));
        files.extend(cpu_files(3, (1, "2-3"), (9, "3"), (1, "2-3")));
        let dir = build(&files);
        // act
        let topo = Topology::from_sysfs(dir.path()).unwrap();
        // assert
        assert_eq!(topo.all_cpus().to_string(), "0-2");
        assert_eq!(topo.packages(), [0, 1]);
        assert_eq!(
            topo.l3_domains(),
            [CacheDomain::new(0), CacheDomain::new(1)]
        );
        let c2 = topo.get(LogicalCpu::new(2)).unwrap();
        assert_eq!(
            (c2.package, c2.core, c2.l2, c2.l3, c2.node),
            (1, None, CacheDomain::new(8), Some(CacheDomain::new(1)), 1)
        );
        assert_eq!(topo.cpus_in_l3(CacheDomain::new(0)).to_string(), "0-1");
    }

    #[test]
    fn without_online_list_cpu_dirs_count_unless_their_online_is_0() {
        // arrange
        let mut files = vec![
            ("cpu/cpu1/online".to_owned(), "0\n".to_owned()),
            ("cpu/cpu2/online".into(), "1\n".into()),
        ];
        files.extend(cpu_files(0, (0, "0,2"), (0, "0"), (0, "0,2")));
        files.extend(cpu_files(1, (0, "0-2"), (1, "1"), (0, "0-2")));
        files.extend(cpu_files(2, (0, "0,2"), (2, "2"), (0, "0,2")));
        files.push(("cpu/cpufreq/x".into(), String::new())); // not a CPU directory
        let dir = build(&files);
        // act
        let topo = Topology::from_sysfs(dir.path()).unwrap();
        // assert
        assert_eq!(topo.all_cpus().to_string(), "0,2");
        assert_eq!(topo.nodes(), [0], "no node information: node 0");
    }

    #[test]
    fn missing_cache_id_falls_back_to_lowest_cpu_of_shared_cpu_list() {
        // arrange
        let mut files = cpu_files(5, (0, "5"), (0, "5"), (0, "4-7,12-15"));
        files.retain(|(p, _)| !p.ends_with("index3/id"));
        files.push(("cpu/online".into(), "5".into()));
        files.push(("node/node3/cpulist".into(), "4-7\n".into()));
        let dir = build(&files);
        // act
        let topo = Topology::from_sysfs(dir.path()).unwrap();
        // assert
        let c = topo.get(LogicalCpu::new(5)).unwrap();
        assert_eq!(c.l3, Some(CacheDomain::new(4)));
        assert_eq!(c.node, 3);
    }

    #[test]
    fn cpu_without_l3_has_none_and_without_l2_a_private_one() {
        let dir = build(&[
            ("cpu/online".into(), "3\n".into()),
            (
                "cpu/cpu3/topology/physical_package_id".into(),
                "-1\n".into(),
            ),
            ("cpu/cpu3/topology/core_id".into(), "3\n".into()),
        ]);
        let topo = Topology::from_sysfs(dir.path()).unwrap();
        let c = topo.get(LogicalCpu::new(3)).unwrap();
        assert_eq!((c.package, c.l2, c.l3), (0, CacheDomain::new(3), None));
    }

    /// Each list is read once per package, cache instance and node, on its lowest online
    /// CPU: the files of other CPUs are never opened (here they do not even exist), CPUs a
    /// list names that are offline are skipped, and numbering may be sparse.
    #[test]
    fn lists_are_read_once_per_group_on_its_lowest_online_cpu() {
        // arrange: CPUs 0,1,4,5 online (2,3 offline, 6,7 absent); SMT pairs (0,4), (1,5)
        // share an L2; one package and one L3. Only CPUs 0 and 1 have files.
        let mut files = vec![
            ("cpu/online".to_owned(), "0-1,4-5\n".to_owned()),
            ("node/node0/cpulist".into(), "0-1,4-5\n".into()),
            ("node/possible".into(), "0\n".into()), // not a node directory
        ];
        files.extend(cpu_files(0, (0, "0-5"), (4, "0,4"), (2, "0-5")));
        files.extend(cpu_files(1, (0, "0-5"), (6, "1,5"), (2, "0-5")));
        let dir = build(&files);
        // act
        let topo = Topology::from_sysfs(dir.path()).unwrap();
        // assert
        assert_eq!(topo.all_cpus().to_string(), "0-1,4-5");
        let l2: Vec<_> = topo.cpus().iter().map(|c| c.l2.get()).collect();
        assert_eq!(l2, [4, 6, 4, 6]);
        assert_eq!(topo.l3_domains(), [CacheDomain::new(2)]);
        assert_eq!(topo.cpus_in_package(0).to_string(), "0-1,4-5");
    }

    /// The representatives of the L3 instances: the lowest online CPU of each, fully
    /// placed, and no L2 list read for the other CPUs (here they have none).
    #[test]
    fn l3_representatives_are_the_lowest_cpu_of_each_l3_and_read_no_other_l2() {
        // arrange: 2 packages x 1 L3 each, CPUs 0-3 and 4-7; only CPUs 0 and 4 have L2 files
        let mut files = vec![
            ("cpu/online".to_owned(), "0-7\n".to_owned()),
            ("node/node0/cpulist".into(), "0-3\n".into()),
            ("node/node1/cpulist".into(), "4-7\n".into()),
        ];
        files.extend(cpu_files(0, (0, "0-3"), (10, "0-1"), (20, "0-3")));
        files.extend(cpu_files(4, (1, "4-7"), (12, "4-5"), (21, "4-7")));
        let dir = build(&files);
        // act
        let sample = Topology::l3_representatives_from_sysfs(dir.path()).unwrap();
        let online = Topology::online_from_sysfs(dir.path()).unwrap();
        // assert
        let got: Vec<_> = sample
            .cpus()
            .iter()
            .map(|c| {
                (
                    c.cpu.get(),
                    c.package,
                    c.l2.get(),
                    c.l3.map(CacheDomain::get),
                    c.node,
                )
            })
            .collect();
        assert_eq!(got, [(0, 0, 10, Some(20), 0), (4, 1, 12, Some(21), 1)]);
        assert_eq!(online.to_string(), "0-7");
        assert_eq!(
            sample.all_cpus().to_string(),
            "0,4",
            "a sample, not the machine"
        );
    }

    /// With Sub-NUMA Clustering an L3 spans several nodes: the sample has the lowest CPU of
    /// each node of each L3, so the MSR backend sees the nodes per L3 (`pqos -d`'s
    /// `Sub-NUMA Clustering:` line).
    #[test]
    fn l3_representatives_include_each_snc_node_of_an_l3() {
        // arrange: one package, one L3 of CPUs 0-3 in two nodes (0-1, 2-3)
        let mut files = vec![
            ("cpu/online".to_owned(), "0-3\n".to_owned()),
            ("node/node0/cpulist".into(), "0-1\n".into()),
            ("node/node1/cpulist".into(), "2-3\n".into()),
        ];
        files.extend(cpu_files(0, (0, "0-3"), (10, "0-1"), (20, "0-3")));
        files.extend(cpu_files(2, (0, "0-3"), (12, "2-3"), (20, "0-3")));
        let dir = build(&files);
        // act
        let sample = Topology::l3_representatives_from_sysfs(dir.path()).unwrap();
        // assert
        assert_eq!(sample.all_cpus().to_string(), "0,2");
        assert_eq!(sample.l3_domains(), [CacheDomain::new(20)]);
        assert_eq!(sample.nodes(), [0, 1]);
    }

    /// A kernel without `package_cpus_list` (before 5.5) has `core_siblings_list`; one
    /// with neither costs a `physical_package_id` per CPU.
    #[test]
    fn packages_from_core_siblings_list_or_per_cpu_ids() {
        let mut files = vec![("cpu/online".to_owned(), "0-3\n".to_owned())];
        for cpu in 0..4 {
            let pkg = cpu / 2;
            files.extend(cpu_files(cpu, (pkg, ""), (cpu, "0-3"), (0, "0-3")));
        }
        files.retain(|(p, _)| !p.ends_with("package_cpus_list"));
        let mut siblings = files.clone();
        siblings.push((
            "cpu/cpu0/topology/core_siblings_list".into(),
            "0-1\n".into(),
        ));
        siblings.push((
            "cpu/cpu2/topology/core_siblings_list".into(),
            "2-3\n".into(),
        ));
        for files in [files, siblings] {
            let dir = build(&files);
            let topo = Topology::from_sysfs(dir.path()).unwrap();
            let pkgs: Vec<_> = topo.cpus().iter().map(|c| c.package).collect();
            assert_eq!(pkgs, [0, 0, 1, 1]);
        }
    }

    /// AMD: one L3 per core complex, several per package.
    #[test]
    fn l3_per_ccx_within_one_package() {
        let mut files = vec![("cpu/online".to_owned(), "0-7\n".to_owned())];
        for cpu in [0, 4] {
            let ccx = cpu / 4;
            let l3 = format!("{}-{}", cpu, cpu + 3);
            files.extend(cpu_files(cpu, (0, "0-7"), (cpu, "0-7"), (ccx * 8, &l3)));
        }
        let dir = build(&files);
        let topo = Topology::from_sysfs(dir.path()).unwrap();
        assert_eq!(topo.packages(), [0]);
        assert_eq!(
            topo.l3_domains(),
            [CacheDomain::new(0), CacheDomain::new(8)]
        );
        assert_eq!(topo.cpus_in_l3(CacheDomain::new(8)).to_string(), "4-7");
        assert!(!topo.l3_is_per_package());
    }

    #[test]
    fn errors_name_the_path_and_the_text() {
        // arrange
        let mut files = cpu_files(0, (0, "0"), (0, "0"), (0, "0"));
        files.push(("cpu/online".into(), "0\n".into()));
        files.retain(|(p, _)| !p.ends_with("physical_package_id"));
        files.push((
            "cpu/cpu0/topology/physical_package_id".into(),
            "zero\n".into(),
        ));
        let dir = build(&files);
        // act
        let err = Topology::from_sysfs(dir.path()).unwrap_err();
        // assert
        let TopologyError::Parse { path, text, .. } = &err else {
            panic!("{err:?}")
        };
        assert!(path.ends_with("cpu0/topology/physical_package_id"));
        assert_eq!(text, "zero");
        assert!(err.to_string().contains("`zero`"));

        let empty = tempfile::tempdir().unwrap();
        let err = Topology::from_sysfs(empty.path()).unwrap_err();
        assert!(
            matches!(err, TopologyError::Io { ref path, .. } if path.ends_with("cpu")),
            "{err:?}"
        );

        let bad_list = build(&[("cpu/online".into(), "0-x\n".into())]);
        assert!(matches!(
            Topology::from_sysfs(bad_list.path()),
            Err(TopologyError::Parse { .. })
        ));

        let mut bad_shared = cpu_files(0, (0, "0"), (0, "0"), (0, "0"));
        bad_shared.push(("cpu/online".into(), "0\n".into()));
        bad_shared.retain(|(p, _)| !p.ends_with("index3/shared_cpu_list"));
        bad_shared.push((
            "cpu/cpu0/cache/index3/shared_cpu_list".into(),
            "0-\n".into(),
        ));
        let err = Topology::from_sysfs(build(&bad_shared).path()).unwrap_err();
        assert!(
            matches!(&err, TopologyError::Parse { path, .. } if path.ends_with("index3/shared_cpu_list")),
            "{err:?}"
        );

        let none = build(&[("cpu/online".into(), "\n".into())]);
        assert!(matches!(
            Topology::from_sysfs(none.path()),
            Err(TopologyError::NoCpus { .. })
        ));
    }

    /// A sysfs path that is a FIFO is refused, not waited on.
    #[test]
    fn a_fifo_in_place_of_an_attribute_is_an_error_not_a_hang() {
        let mut files = cpu_files(0, (0, "0"), (0, "0"), (0, "0"));
        files.retain(|(p, _)| !p.ends_with("package_cpus_list"));
        files.push(("cpu/online".into(), "0\n".into()));
        let dir = build(&files);
        let fifo = dir.path().join("cpu/cpu0/topology/package_cpus_list");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = Topology::from_sysfs(dir.path()).unwrap_err();
        assert!(
            matches!(&err, TopologyError::Io { path, .. } if *path == fifo),
            "{err:?}"
        );
    }
}
