//! [`DevMemTree`]: `dev/mem` of the simulated platform, the physical address space as the
//! Linux `mem` driver shows it, with the RDT 1.3 MMIO registers of the model
//! ([`crate::mmio`]) at the addresses its ERDT gives.

use std::io;

use crate::SimHandle;
use crate::vfs::errno::{EINVAL, ENOENT, ENOTDIR};
use crate::vfs::{NodeKind, Tree, err};

/// `dev/mem` (mounted at that path: the view's root is the file). A read or write at
/// offset = physical address moves whole 8-byte registers: an offset or a count that is not
/// a multiple of 8 is EINVAL (the registers are 64 bits wide; the real driver would split
/// the access), an address outside every register block EIO, a write to a counter or to
/// reserved bits EIO ([`crate::SimPlatform::mmio_write`]); only the tagging registers of the
/// IRDT's links, 2 or 4 bytes wide, take an access of their width
/// ([`crate::SimPlatform::mmio_takes_narrow`]). Every access goes through the one
/// model, so it sees what an in-process [`rdt_mmio::MmioIo`] on the [`SimHandle`] wrote.
///
/// # References
/// mem(4); Linux `drivers/char/mem.c`.
#[derive(Debug)]
pub struct DevMemTree {
    sim: SimHandle,
}

impl DevMemTree {
    /// `dev/mem` of the platform behind `sim`.
    #[must_use]
    pub const fn new(sim: SimHandle) -> Self {
        Self { sim }
    }
}

fn registers(offset: u64, len: usize) -> io::Result<impl Iterator<Item = u64>> {
    if !offset.is_multiple_of(8) || !len.is_multiple_of(8) {
        return Err(err(EINVAL));
    }
    let n = u64::try_from(len / 8).map_err(|_| err(EINVAL))?;
    offset.checked_add(n * 8).ok_or_else(|| err(EINVAL))?;
    Ok((0..n).map(move |k| offset + 8 * k))
}

/// A 2- or 4-byte access, aligned to its width, of a register that takes one: its byte
/// offset in the 8-byte word.
fn narrow(p: &crate::SimPlatform, offset: u64, len: usize) -> Option<usize> {
    let width = u64::try_from(len).ok().filter(|w| matches!(w, 2 | 4))?;
    (offset.is_multiple_of(width) && p.mmio_takes_narrow(offset))
        .then(|| usize::try_from(offset & 7).ok())
        .flatten()
}

impl Tree for DevMemTree {
    fn kind(&self, path: &str) -> io::Result<NodeKind> {
        if path.is_empty() {
            Ok(NodeKind::File { mode: 0o640 })
        } else {
            Err(err(ENOENT))
        }
    }

    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>> {
        self.kind(path)?;
        Err(err(ENOTDIR))
    }

    fn read(&mut self, path: &str, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        self.kind(path)?;
        let mut out = Vec::new();
        let mut p = self.sim.lock();
        if let Some(shift) = narrow(&p, offset, size as usize) {
            let word = p.mmio_read(offset & !7)?.to_le_bytes();
            return Ok(word[shift..shift + size as usize].to_vec());
        }
        for addr in registers(offset, size as usize)? {
            out.extend_from_slice(&p.mmio_read(addr)?.to_le_bytes());
        }
        Ok(out)
    }

    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> io::Result<usize> {
        self.kind(path)?;
        let mut p = self.sim.lock();
        if let Some(shift) = narrow(&p, offset, data.len()) {
            let mut word = p.mmio_read(offset & !7)?.to_le_bytes();
            word[shift..shift + data.len()].copy_from_slice(data);
            p.mmio_write(offset & !7, u64::from_le_bytes(word))?;
            return Ok(data.len());
        }
        for (addr, chunk) in registers(offset, data.len())?.zip(data.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            p.mmio_write(addr, u64::from_le_bytes(b))?;
        }
        Ok(data.len())
    }
}

#[cfg(test)]
mod tests {
    use rdt_mmio::MmioIo;

    use super::*;
    use crate::SimPlatform;

    /// A run of registers read in one `pread` of `dev/mem`, in one in-process
    /// [`MmioIo::read_range`], and one by one, gives the same values; a run that leaves the
    /// block fails as its register would.
    #[test]
    fn a_run_reads_as_its_registers_one_by_one() {
        let mut sim = SimHandle::new(SimPlatform::builtin("xeon-rdt13").unwrap());
        let (cmrc, marc) = {
            let p = sim.lock();
            let d = &p.mmio().unwrap().erdt().unwrap().domains[0];
            (
                d.cmrc.as_ref().unwrap().block,
                d.marc.as_ref().unwrap().clone(),
            )
        };
        // distinct values in the first registers of the MBA block, and RDT_CTRL untouched
        let mba = marc.block(rdt_mmio::MbaControl::Max);
        for k in 0..4u64 {
            MmioIo::write(&mut sim, mba.base + 8 * k, k + 1).unwrap();
        }
        let one: Vec<u64> = (0..4u64)
            .map(|k| MmioIo::read(&mut sim, mba.base + 8 * k).unwrap())
            .collect();
        assert_eq!(one, [1, 2, 3, 4]);
        let mut run = [0u64; 4];
        sim.read_range(mba.base, &mut run).unwrap();
        assert_eq!(run, [1, 2, 3, 4]);
        let mut tree = DevMemTree::new(sim.clone());
        let bytes = tree.read("", mba.base, 32).unwrap();
        let from_tree: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(from_tree, [1, 2, 3, 4]);
        // the whole CMRC block in one run; one register past its end: EIO, as alone
        let n = usize::try_from(cmrc.len() / 8).unwrap();
        let mut all = vec![0u64; n];
        sim.read_range(cmrc.base, &mut all).unwrap();
        let end = cmrc.base + cmrc.len();
        let alone = MmioIo::read(&mut sim, end).is_err();
        let mut past = vec![0u64; n + 1];
        assert_eq!(sim.read_range(cmrc.base, &mut past).is_err(), alone);
        assert_eq!(
            tree.read("", cmrc.base, u32::try_from(8 * (n + 1)).unwrap())
                .is_err(),
            alone
        );
        assert!(sim.read_range(u64::MAX - 7, &mut [0; 2]).is_err());
    }
}
