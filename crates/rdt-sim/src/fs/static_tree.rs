//! [`StaticTree`]: a tree of directories, read-only text files and symlinks fixed at build
//! time (the sysfs topology does not change while a platform is mounted).

use std::collections::BTreeMap;
use std::io;

use crate::vfs::errno::{EACCES, EISDIR, ENOENT, ENOTDIR};
use crate::vfs::{NodeKind, Tree, err};

#[derive(Debug)]
enum Entry {
    /// Child names in insertion order.
    Dir(Vec<String>),
    File(Vec<u8>),
    Link(String),
}

/// Directories, read-only (`0444`) text files and relative symlinks, built once.
#[derive(Debug)]
pub(crate) struct StaticTree {
    nodes: BTreeMap<String, Entry>,
}

fn parent_and_name(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

impl StaticTree {
    pub(crate) fn new() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(String::new(), Entry::Dir(Vec::new()));
        Self { nodes }
    }

    /// Makes `path` and its missing parents directories.
    pub(crate) fn dir(&mut self, path: &str) {
        if path.is_empty() || self.nodes.contains_key(path) {
            return;
        }
        let (parent, name) = parent_and_name(path);
        self.dir(parent);
        if let Some(Entry::Dir(children)) = self.nodes.get_mut(parent) {
            children.push(name.to_owned());
        }
        self.nodes.insert(path.to_owned(), Entry::Dir(Vec::new()));
    }

    fn insert(&mut self, path: &str, entry: Entry) {
        let (parent, name) = parent_and_name(path);
        self.dir(parent);
        if self.nodes.insert(path.to_owned(), entry).is_none()
            && let Some(Entry::Dir(children)) = self.nodes.get_mut(parent)
        {
            children.push(name.to_owned());
        }
    }

    /// A read-only text file; its parents are made as needed.
    pub(crate) fn file(&mut self, path: &str, content: impl Into<String>) {
        self.insert(path, Entry::File(content.into().into_bytes()));
    }

    /// A read-only binary file (an ACPI table); its parents are made as needed.
    pub(crate) fn bin_file(&mut self, path: &str, content: Vec<u8>) {
        self.insert(path, Entry::File(content));
    }

    /// A symlink to `target` (relative, as sysfs writes them).
    pub(crate) fn link(&mut self, path: &str, target: impl Into<String>) {
        self.insert(path, Entry::Link(target.into()));
    }

    fn entry(&self, path: &str) -> io::Result<&Entry> {
        self.nodes.get(path).ok_or_else(|| err(ENOENT))
    }

    fn kind_of(entry: &Entry) -> NodeKind {
        match entry {
            Entry::Dir(_) => NodeKind::Dir,
            Entry::File(_) => NodeKind::File { mode: 0o444 },
            Entry::Link(t) => NodeKind::Symlink { target: t.clone() },
        }
    }
}

impl Tree for StaticTree {
    fn kind(&self, path: &str) -> io::Result<NodeKind> {
        self.entry(path).map(Self::kind_of)
    }

    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>> {
        let Entry::Dir(children) = self.entry(path)? else {
            return Err(err(ENOTDIR));
        };
        children
            .iter()
            .map(|name| {
                let child = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}/{name}")
                };
                Ok((name.clone(), self.kind(&child)?))
            })
            .collect()
    }

    fn read(&mut self, path: &str, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        match self.entry(path)? {
            Entry::File(bytes) => Ok(slice_at(bytes, offset, size)),
            Entry::Dir(_) => Err(err(EISDIR)),
            Entry::Link(_) => Err(err(ENOENT)),
        }
    }

    fn write(&mut self, path: &str, _offset: u64, _data: &[u8]) -> io::Result<usize> {
        match self.entry(path)? {
            Entry::Dir(_) => Err(err(EISDIR)),
            _ => Err(err(EACCES)),
        }
    }
}

/// Up to `size` bytes of `bytes` from `offset` (empty past the end), as a text file reads.
pub(crate) fn slice_at(bytes: &[u8], offset: u64, size: u32) -> Vec<u8> {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let end = start.saturating_add(size as usize).min(bytes.len());
    bytes[start..end].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_make_their_parents_and_list_in_insertion_order() {
        // arrange
        let mut t = StaticTree::new();
        // act
        t.file("cpu/cpu1/online", "1\n");
        t.file("cpu/online", "0-1\n");
        t.link("cpu/cpu1/node0", "../../node/node0");
        // assert
        let names: Vec<String> = t.list("cpu").unwrap().into_iter().map(|e| e.0).collect();
        assert_eq!(names, ["cpu1", "online"]);
        assert_eq!(t.kind("cpu/cpu1").unwrap(), NodeKind::Dir);
        assert_eq!(
            t.kind("cpu/cpu1/node0").unwrap(),
            NodeKind::Symlink {
                target: "../../node/node0".into()
            }
        );
        assert_eq!(t.read("cpu/online", 2, 100).unwrap(), b"1\n");
        assert_eq!(t.read("cpu/online", 9, 100).unwrap(), b"");
    }

    #[test]
    fn writes_are_refused_with_eacces_and_missing_paths_with_enoent() {
        let mut t = StaticTree::new();
        t.file("a/b", "x\n");
        assert_eq!(
            t.write("a/b", 0, b"y").unwrap_err().raw_os_error(),
            Some(EACCES)
        );
        assert_eq!(t.kind("a/c").unwrap_err().raw_os_error(), Some(ENOENT));
        assert_eq!(t.read("a", 0, 1).unwrap_err().raw_os_error(), Some(EISDIR));
        assert_eq!(t.list("a/b").unwrap_err().raw_os_error(), Some(ENOTDIR));
    }
}
