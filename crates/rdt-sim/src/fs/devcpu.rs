//! [`DevCpuTree`]: `dev/cpu/N/{msr,cpuid}` of the simulated platform, answering as the Linux
//! `msr` and `cpuid` drivers do.

use std::io;

use rdt_core::{CpuidRegs, LogicalCpu};
use rdt_msr::{MsrAddr, MsrError, MsrIo};

use crate::vfs::errno::{EACCES, EINVAL, EIO, EISDIR, ENOENT, ENOTDIR};
use crate::vfs::{NodeKind, Tree, err};
use crate::{SimCpuid, SimHandle};

/// `ENXIO`: what the drivers return for a CPU that is not online.
const ENXIO: i32 = 6;

/// The per-CPU device files of the model, `N/msr` and `N/cpuid` for every CPU of its
/// topology (regular files of size 0, mode 0600).
///
/// | file | read | write |
/// |---|---|---|
/// | `N/msr` | RDMSR of the register at the file offset on CPU N, 8 bytes little-endian per register (RDT registers and the common others, [`crate::sysregs`]); a count that is not a multiple of 8: EINVAL; #GP (a register the model lacks): EIO | WRMSR of each 8 bytes to the register at the offset; EINVAL and EIO as for reads, and EIO for a value the CPU refuses (reserved bits, a bad mask) |
/// | `N/cpuid` | CPUID with EAX = position bits 31:0, ECX = bits 63:32 on CPU N ([`SimCpuid::cpuid_on`]: CPU N's own answers where the dump has them), 16 bytes EAX EBX ECX EDX per record, the position moving by 1 per record (a 32-byte read at 0 gives leaves 0 and 1); a count not a multiple of 16: EINVAL; every leaf answers, as the instruction never faults ([`instruction_answer`]) | EINVAL (the driver has no write) |
///
/// The `msr` driver repeats the same register for each 8 bytes of a longer count.
///
/// What FUSE does not let the tree copy: the file position. The drivers never move it on
/// `read(2)` (`msr`) or move it by one per record (`cpuid`), and refuse `SEEK_END`; through
/// FUSE the kernel moves it by the bytes read and `SEEK_END` goes to 0 (the size). Tools
/// use `pread(2)` at the register's or leaf's offset, which is exact. Every access goes through
/// the model's [`MsrIo`], so it counts in [`SimHandle::msr_accesses`] and sees what the other
/// views (resctrl, an in-process backend) wrote.
///
/// # References
/// Linux `arch/x86/kernel/msr.c` (`msr_read`, `msr_write`), `arch/x86/kernel/cpuid.c`
/// (`cpuid_read`); msr(4), cpuid(4).
#[derive(Debug)]
pub struct DevCpuTree {
    sim: SimHandle,
    cpus: Vec<LogicalCpu>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dev {
    Msr,
    Cpuid,
}

enum Node {
    Root,
    Cpu,
    File(LogicalCpu, Dev),
}

impl DevCpuTree {
    /// The device files of the platform behind `sim`.
    #[must_use]
    pub fn new(sim: SimHandle) -> Self {
        let cpus = sim.lock().topology().cpus().iter().map(|c| c.cpu).collect();
        Self { sim, cpus }
    }

    fn cpu(&self, name: &str) -> Option<LogicalCpu> {
        if name.is_empty()
            || !name.bytes().all(|b| b.is_ascii_digit())
            || name.starts_with('0') && name.len() > 1
        {
            return None;
        }
        let cpu = LogicalCpu::new(name.parse().ok()?);
        self.cpus.binary_search(&cpu).ok().map(|_| cpu)
    }

    fn resolve(&self, path: &str) -> io::Result<Node> {
        if path.is_empty() {
            return Ok(Node::Root);
        }
        let (cpu, file) = match path.split_once('/') {
            Some((c, f)) => (c, Some(f)),
            None => (path, None),
        };
        let cpu = self.cpu(cpu).ok_or_else(|| err(ENOENT))?;
        match file {
            None => Ok(Node::Cpu),
            Some("msr") => Ok(Node::File(cpu, Dev::Msr)),
            Some("cpuid") => Ok(Node::File(cpu, Dev::Cpuid)),
            Some(_) => Err(err(ENOENT)),
        }
    }

    fn msr_errno(e: &MsrError) -> i32 {
        match e {
            MsrError::Request(rdt_core::RequestError::NoSuchCpu(_)) => ENXIO,
            _ => EIO,
        }
    }
}

const DEVICE: NodeKind = NodeKind::File { mode: 0o600 };

/// What the CPUID instruction returns on `cpu` for (`leaf`, `subleaf`): it never faults.
///
/// - A leaf within the basic range (up to CPUID.0:EAX) or the extended one (up to
///   CPUID.8000_0000H:EAX): the model's answer ([`SimCpuid::cpuid_on`]), zeros where the dump
///   recorded none (reserved leaves and subleaves past the last one read as zeros).
/// - Any other leaf: on Intel the answer of the highest basic leaf with the same subleaf
///   (SDM Vol. 2A, CPUID: "If a value entered for CPUID.EAX is higher than the maximum input
///   value for basic or extended function for that processor then the data for the highest
///   basic information leaf is returned"); on AMD zeros (APM Vol. 3, CPUID: reserved or
///   unimplemented functions return 0).
#[must_use]
pub fn instruction_answer(cpuid: &SimCpuid, cpu: LogicalCpu, leaf: u32, subleaf: u32) -> CpuidRegs {
    const EXT: u32 = 0x8000_0000;
    let max_basic = cpuid.cpuid_on(cpu, 0, 0).map_or(0, |r| r.eax);
    let max_ext = cpuid.cpuid_on(cpu, EXT, 0).map_or(0, |r| r.eax);
    let amd = matches!(
        cpuid.cpuid_on(cpu, 0, 0).map(|r| r.ebx),
        Some(0x6874_7541 | 0x6f67_7948)
    );
    let in_range = leaf <= max_basic || (EXT..=max_ext).contains(&leaf);
    let asked = if in_range {
        leaf
    } else if amd {
        return CpuidRegs::default();
    } else {
        max_basic
    };
    cpuid.cpuid_on(cpu, asked, subleaf).unwrap_or_default()
}

impl Tree for DevCpuTree {
    fn kind(&self, path: &str) -> io::Result<NodeKind> {
        Ok(match self.resolve(path)? {
            Node::Root | Node::Cpu => NodeKind::Dir,
            Node::File(..) => DEVICE,
        })
    }

    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>> {
        match self.resolve(path)? {
            Node::Root => Ok(self
                .cpus
                .iter()
                .map(|c| (c.to_string(), NodeKind::Dir))
                .collect()),
            Node::Cpu => Ok(vec![("cpuid".into(), DEVICE), ("msr".into(), DEVICE)]),
            Node::File(..) => Err(err(ENOTDIR)),
        }
    }

    fn read(&mut self, path: &str, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let Node::File(cpu, dev) = self.resolve(path)? else {
            return Err(err(EISDIR));
        };
        let unit = match dev {
            Dev::Msr => 8,
            Dev::Cpuid => 16,
        };
        if !size.is_multiple_of(unit) {
            return Err(err(EINVAL));
        }
        let mut out = Vec::with_capacity(size as usize);
        let mut pos = offset;
        // the model's CPUID as it is now (a patch such as SimPlatform::set_io_rdt shows at once)
        let cpuid = (dev == Dev::Cpuid).then(|| self.sim.lock().cpuid());
        for _ in 0..size / unit {
            match dev {
                Dev::Msr => {
                    // The msr driver: ECX = the low 32 bits of the offset.
                    #[allow(clippy::cast_possible_truncation)] // truncation is the driver's
                    let addr = MsrAddr::new(offset as u32);
                    let v = MsrIo::read(&mut self.sim, cpu, addr)
                        .map_err(|e| err(Self::msr_errno(&e)))?;
                    out.extend_from_slice(&v.to_le_bytes());
                }
                Dev::Cpuid => {
                    // The cpuid driver: EAX = position bits 31:0, ECX = bits 63:32, and
                    // the position moves by one per 16-byte record (`*ppos = ++pos`).
                    #[allow(clippy::cast_possible_truncation)]
                    let (leaf, sub) = (pos as u32, (pos >> 32) as u32);
                    let r = cpuid.as_ref().map_or_else(CpuidRegs::default, |c| {
                        instruction_answer(c, cpu, leaf, sub)
                    });
                    for w in [r.eax, r.ebx, r.ecx, r.edx] {
                        out.extend_from_slice(&w.to_le_bytes());
                    }
                    pos = pos.wrapping_add(1);
                }
            }
        }
        Ok(out)
    }

    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> io::Result<usize> {
        let Node::File(cpu, dev) = self.resolve(path)? else {
            return Err(err(EISDIR));
        };
        if dev == Dev::Cpuid || !data.len().is_multiple_of(8) {
            return Err(err(EINVAL));
        }
        #[allow(clippy::cast_possible_truncation)] // ECX = the low 32 bits of the offset
        let addr = MsrAddr::new(offset as u32);
        for chunk in data.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            self.sim
                .write(cpu, addr, u64::from_le_bytes(b))
                .map_err(|e| err(Self::msr_errno(&e)))?;
        }
        Ok(data.len())
    }

    fn mkdir(&mut self, _path: &str) -> io::Result<()> {
        Err(err(EACCES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimPlatform;

    fn tree() -> DevCpuTree {
        DevCpuTree::new(SimHandle::new(
            SimPlatform::builtin("broadwell-ep").unwrap(),
        ))
    }

    #[test]
    fn msr_write_then_read_round_trips_through_the_model() {
        // arrange
        let mut t = tree();
        // act
        t.write("0/msr", 0xc91, &0xff_u64.to_le_bytes()).unwrap();
        // assert: COS1's mask is per socket (even CPUs are socket 0 in this dump).
        assert_eq!(t.read("2/msr", 0xc91, 8).unwrap(), 0xff_u64.to_le_bytes());
        assert_eq!(
            t.read("1/msr", 0xc91, 8).unwrap(),
            0xfffff_u64.to_le_bytes()
        );
        let two = t.read("2/msr", 0xc91, 16).unwrap();
        assert_eq!(&two[8..], &two[..8], "the driver repeats the register");
    }

    #[test]
    fn msr_sizes_other_than_multiples_of_8_are_einval_and_gp_is_eio() {
        let mut t = tree();
        assert_eq!(
            t.read("0/msr", 0xc8f, 4).unwrap_err().raw_os_error(),
            Some(EINVAL)
        );
        assert_eq!(
            t.write("0/msr", 0xc8f, &[0; 7]).unwrap_err().raw_os_error(),
            Some(EINVAL)
        );
        assert_eq!(
            t.read("0/msr", 0x11, 8).unwrap_err().raw_os_error(),
            Some(EIO)
        );
        // A zero mask is refused by the CPU.
        assert_eq!(
            t.write("0/msr", 0xc91, &0u64.to_le_bytes())
                .unwrap_err()
                .raw_os_error(),
            Some(EIO)
        );
    }

    /// SDM Vol. 3A 11.12.5: `dev/cpu/N/msr` at 0x802 (x2APIC ID) answers CPU N's
    /// CPUID.0BH:EDX, so a backend can learn placement without CPUID; the TSC reads too.
    #[test]
    fn x2apic_id_and_tsc_read_through_the_device_file() {
        let mut t = tree();
        let cpuid = |t: &mut DevCpuTree, cpu: &str| {
            let b = t.read(&format!("{cpu}/cpuid"), 0xB, 16).unwrap();
            u64::from(u32::from_le_bytes(b[12..16].try_into().unwrap()))
        };
        for cpu in ["0", "1", "54"] {
            let msr = t.read(&format!("{cpu}/msr"), 0x802, 8).unwrap();
            assert_eq!(
                u64::from_le_bytes(msr.try_into().unwrap()),
                cpuid(&mut t, cpu)
            );
        }
        assert_eq!(t.read("1/msr", 0x802, 8).unwrap(), 0x20_u64.to_le_bytes());
        assert_eq!(t.read("0/msr", 0x10, 8).unwrap().len(), 8);
    }

    /// `arch/x86/kernel/cpuid.c` `cpuid_read`: record k of a read at position p is leaf
    /// p + k; the instruction answers every leaf (SDM: Intel repeats the highest basic leaf
    /// above the maximum; AMD returns zeros).
    #[test]
    fn cpuid_records_advance_one_leaf_each_and_every_leaf_answers() {
        let mut t = tree();
        let two = t.read("0/cpuid", 0, 32).unwrap();
        assert_eq!(&two[..16], t.read("0/cpuid", 0, 16).unwrap());
        assert_eq!(&two[16..], t.read("0/cpuid", 1, 16).unwrap(), "leaf 1");
        // broadwell-ep: max basic leaf 0x14; leaf 8 is reserved (not in the dump): zeros.
        assert_eq!(t.read("0/cpuid", 8, 16).unwrap(), [0; 16]);
        let max = t.read("0/cpuid", 0x14, 16).unwrap();
        assert_eq!(t.read("0/cpuid", 0x15, 16).unwrap(), max);
        assert_eq!(t.read("0/cpuid", 0x4000_0000, 16).unwrap(), max);
        assert_eq!(t.read("0/cpuid", 0xffff_ffff, 16).unwrap(), max);
        let mut amd = DevCpuTree::new(SimHandle::new(SimPlatform::builtin("milan").unwrap()));
        assert_eq!(amd.read("0/cpuid", 0x4000_0000, 16).unwrap(), [0; 16]);
        assert_eq!(amd.read("0/cpuid", 0x11, 16).unwrap(), [0; 16]);
    }

    #[test]
    fn cpuid_reads_16_bytes_per_leaf_and_is_not_writable() {
        let mut t = tree();
        let b = t.read("0/cpuid", 0, 16).unwrap();
        assert_eq!(&b[4..8], b"Genu");
        assert_eq!(
            t.read("0/cpuid", 0, 8).unwrap_err().raw_os_error(),
            Some(EINVAL)
        );
        assert_eq!(
            t.write("0/cpuid", 0, &[0; 16]).unwrap_err().raw_os_error(),
            Some(EINVAL)
        );
    }

    #[test]
    fn only_the_models_cpus_exist() {
        let t = tree();
        assert_eq!(t.list("").unwrap().len(), 56);
        assert!(t.kind("55/msr").is_ok());
        assert_eq!(t.kind("56").unwrap_err().raw_os_error(), Some(ENOENT));
        assert_eq!(t.kind("01").unwrap_err().raw_os_error(), Some(ENOENT));
        assert_eq!(t.kind("0/foo").unwrap_err().raw_os_error(), Some(ENOENT));
    }
}
