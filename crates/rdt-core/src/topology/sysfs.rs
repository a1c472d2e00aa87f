//! Topology from a sysfs system directory (`/sys/devices/system`).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{CpuPlacement, Topology, TopologyError};
use crate::{CacheDomain, CpuSet, LogicalCpu};

pub(super) fn read(system: &Path) -> Result<Topology, TopologyError> {
    let cpu_dir = system.join("cpu");
    let online = online_cpus(&cpu_dir)?;
    if online.is_empty() {
        return Err(TopologyError::NoCpus { path: cpu_dir });
    }
    let node_lists = node_lists(&system.join("node"))?;
    let mut placements = Vec::with_capacity(online.len());
    for cpu in online.iter() {
        let dir = cpu_dir.join(format!("cpu{cpu}"));
        let topo = dir.join("topology");
        let package = read_id(&topo.join("physical_package_id"))?;
        let core = read_id(&topo.join("core_id"))?;
        let (l2, l3) = caches(&dir, cpu)?;
        let node = match node_link(&dir)? {
            Some(n) => n,
            None => node_lists.get(&cpu).copied().unwrap_or(0),
        };
        placements.push(CpuPlacement {
            cpu,
            package,
            core,
            l2,
            l3,
            node,
        });
    }
    Ok(Topology::from_placements(placements))
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> TopologyError + '_ {
    move |source| TopologyError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads a small sysfs file, `None` when it does not exist. Bounded and regular files
/// only (`crate::file`): a FIFO or a link to `/dev/zero` under a `--sysroot` is an error.
fn read_opt(path: &Path) -> Result<Option<String>, TopologyError> {
    match crate::file::read_text(path, crate::file::MAX_KERNEL_TEXT_BYTES) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path)(e)),
    }
}

fn read_file(path: &Path) -> Result<String, TopologyError> {
    crate::file::read_text(path, crate::file::MAX_KERNEL_TEXT_BYTES).map_err(io_err(path))
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
fn read_id(path: &Path) -> Result<u32, TopologyError> {
    let text = read_file(path)?;
    if text.trim() == "-1" {
        return Ok(0);
    }
    parse_u32(path, &text)
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

/// Names of the entries of `dir` that are `prefixN`, as (N, path), sorted by N.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<(u32, PathBuf)>, TopologyError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        if let Some(n) = entry.file_name().to_str().and_then(|s| numbered(s, prefix)) {
            out.push((n, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn online_cpus(cpu_dir: &Path) -> Result<CpuSet, TopologyError> {
    let online = cpu_dir.join("online");
    if let Some(text) = read_opt(&online)? {
        return parse_list(&online, &text);
    }
    let mut set = CpuSet::new();
    for (n, path) in numbered_entries(cpu_dir, "cpu")? {
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

/// CPU -> node from `node/nodeM/cpulist`; empty when there is no `node` directory.
fn node_lists(node_dir: &Path) -> Result<BTreeMap<LogicalCpu, u32>, TopologyError> {
    let mut map = BTreeMap::new();
    if !node_dir.is_dir() {
        return Ok(map);
    }
    for (node, path) in numbered_entries(node_dir, "node")? {
        let list = path.join("cpulist");
        if let Some(text) = read_opt(&list)? {
            for cpu in parse_list(&list, &text)?.iter() {
                map.entry(cpu).or_insert(node);
            }
        }
    }
    Ok(map)
}

/// The `nodeM` entry (a symlink on real systems) inside `cpuN/`.
fn node_link(cpu_dir: &Path) -> Result<Option<u32>, TopologyError> {
    Ok(numbered_entries(cpu_dir, "node")?.first().map(|&(n, _)| n))
}

/// (L2 id, L3 id) from `cpuN/cache/indexK/`.
fn caches(
    cpu_dir: &Path,
    cpu: LogicalCpu,
) -> Result<(CacheDomain, Option<CacheDomain>), TopologyError> {
    let cache_dir = cpu_dir.join("cache");
    let (mut l2, mut l3) = (None, None);
    if cache_dir.is_dir() {
        for (_, index) in numbered_entries(&cache_dir, "index")? {
            let level_path = index.join("level");
            let level = parse_u32(&level_path, &read_file(&level_path)?)?;
            let kind = read_file(&index.join("type"))?;
            let kind = kind.trim();
            let slot = match (level, kind) {
                (2, "Data" | "Unified") => &mut l2,
                (3, "Unified") => &mut l3,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(cache_id(&index)?);
            }
        }
    }
    Ok((l2.unwrap_or(CacheDomain::new(cpu.get())), l3))
}

/// `indexK/id`, or the lowest CPU of `indexK/shared_cpu_list` on kernels without `id`.
fn cache_id(index: &Path) -> Result<CacheDomain, TopologyError> {
    let id_path = index.join("id");
    if let Some(text) = read_opt(&id_path)? {
        return parse_u32(&id_path, &text).map(CacheDomain::new);
    }
    let list_path = index.join("shared_cpu_list");
    let text = read_file(&list_path)?;
    let first = parse_list(&list_path, &text)?
        .first()
        .ok_or_else(|| parse_err(&list_path, &text, "a non-empty CPU list"))?;
    Ok(CacheDomain::new(first.get()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `files` (relative path, contents) under a fresh temp dir.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        dir
    }

    /// One CPU's topology and cache files: (cpu, package, core, l2 id, l3 id).
    fn cpu_files(cpu: u32, pkg: u32, core: u32, l2: u32, l3: u32) -> Vec<(String, String)> {
        let d = format!("cpu/cpu{cpu}");
        vec![
            (
                format!("{d}/topology/physical_package_id"),
                format!("{pkg}\n"),
            ),
            (format!("{d}/topology/core_id"), format!("{core}\n")),
            (format!("{d}/cache/index0/level"), "1\n".into()),
            (format!("{d}/cache/index0/type"), "Data\n".into()),
            (format!("{d}/cache/index0/id"), format!("{core}\n")),
            (format!("{d}/cache/index2/level"), "2\n".into()),
            (format!("{d}/cache/index2/type"), "Unified\n".into()),
            (format!("{d}/cache/index2/id"), format!("{l2}\n")),
            (format!("{d}/cache/index3/level"), "3\n".into()),
            (format!("{d}/cache/index3/type"), "Unified\n".into()),
            (format!("{d}/cache/index3/id"), format!("{l3}\n")),
        ]
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
        files.extend(cpu_files(0, 0, 0, 0, 0));
        files.extend(cpu_files(1, 0, 1, 1, 0));
        files.extend(cpu_files(2, 1, 0, 8, 1));
        files.extend(cpu_files(3, 1, 1, 9, 1));
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
            (1, 0, CacheDomain::new(8), Some(CacheDomain::new(1)), 1)
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
        files.extend(cpu_files(0, 0, 0, 0, 0));
        files.extend(cpu_files(1, 0, 1, 1, 0));
        files.extend(cpu_files(2, 0, 2, 2, 0));
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
        let mut files = cpu_files(5, 0, 0, 0, 0);
        files.retain(|(p, _)| !p.ends_with("index3/id"));
        files.push((
            "cpu/cpu5/cache/index3/shared_cpu_list".into(),
            "4-7,12-15\n".into(),
        ));
        files.push(("cpu/online".into(), "5".into()));
        files.push(("cpu/cpu5/node3/cpulist".into(), "5\n".into())); // the `nodeM` link
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

    #[test]
    fn errors_name_the_path_and_the_text() {
        // arrange
        let mut files = cpu_files(0, 0, 0, 0, 0);
        files.push(("cpu/online".into(), "0\n".into()));
        files.retain(|(p, _)| !p.ends_with("core_id"));
        files.push(("cpu/cpu0/topology/core_id".into(), "zero\n".into()));
        let dir = build(&files);
        // act
        let err = Topology::from_sysfs(dir.path()).unwrap_err();
        // assert
        let TopologyError::Parse { path, text, .. } = &err else {
            panic!("{err:?}")
        };
        assert!(path.ends_with("cpu0/topology/core_id"));
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

        let none = build(&[("cpu/online".into(), "\n".into())]);
        assert!(matches!(
            Topology::from_sysfs(none.path()),
            Err(TopologyError::NoCpus { .. })
        ));
    }
}
