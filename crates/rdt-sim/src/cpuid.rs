//! The model's CPUID: the dump's answers, with the leaves a dump did not record filled in.
//!
//! Some dumps enumerate a feature but did not record the leaf with its parameters (the Gold
//! 6140 hwloc dump sets CPUID.(10H,0):EBX\[3\], MBA, but has no subleaf 3). Detection then
//! reports the feature as "details unknown", and a simulator cannot program what it cannot
//! size. [`SimCpuid`] overlays such leaves with values from sibling parts that did record
//! them. Every overlay is a [`CpuidPatch`] naming its source; [`crate::SimPlatform::cpuid_patches`]
//! lists those applied, and `pqos -d` in sim mode answers from the patched CPUID.
//!
//! | leaf | applied when | value (EAX EBX ECX EDX) | source |
//! |---|---|---|---|
//! | (10H, 2) L2 CAT | Intel, CPUID.(10H,0):EBX\[2\] set, subleaf 2 absent | `0xf 0 0x4 0x7`: 16-bit CBM, CDP, 8 COS | Xeon Max 9460 hwloc dump |
//! | (10H, 3) MBA | Intel, CPUID.(10H,0):EBX\[3\] set, subleaf 3 absent | `0x59 0 0x4 0x7`: max delay 90, linear, 8 COS | Skylake-SP / Cascade Lake-SP: Xeon Gold 6146 and Gold 6230 dumps |
//! | (8000_0020H, 1) AMD MBA | AMD, CPUID.(8000_0020H,0):EBX\[1\] set, subleaf 1 absent | `0xb 0 0 0xf`: 11-bit limit (2048 = unlimited), 16 COS | EPYC 7763 hwloc dump |
//! | (8000_0020H, 2) AMD SMBA | AMD, CPUID.(8000_0020H,0):EBX\[2\] set, subleaf 2 absent | `0xb 0 0 0xf` | EPYC 9654 dump (subleaf 2 equals subleaf 1) |
//! | (8000_0020H, 3) AMD BMEC | AMD, CPUID.(8000_0020H,0):EBX\[3\] set, subleaf 3 absent | `0 2 0x7f 0`: 2 configurable events, transaction types 0-6 | EPYC 9654 and EPYC 9655 InstLatx64 dumps |

use std::fmt;
use std::sync::Arc;

use rdt_core::{CpuidDump, CpuidRegs, CpuidSource, LogicalCpu};

/// One leaf the model answers in place of the dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuidPatch {
    /// CPUID leaf (EAX input).
    pub leaf: u32,
    /// Subleaf (ECX input).
    pub subleaf: u32,
    /// The answer.
    pub regs: CpuidRegs,
    /// Why and from where, in one sentence.
    pub reason: &'static str,
}

impl fmt::Display for CpuidPatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.regs;
        write!(
            f,
            "CPUID.({:#x},{}) := eax {:#x} ebx {:#x} ecx {:#x} edx {:#x}: {}",
            self.leaf, self.subleaf, r.eax, r.ebx, r.ecx, r.edx, self.reason
        )
    }
}

const fn regs(eax: u32, ebx: u32, ecx: u32, edx: u32) -> CpuidRegs {
    CpuidRegs { eax, ebx, ecx, edx }
}

/// The patch table (module docs): (vendor is AMD, enumeration leaf/subleaf, EBX bit, patch).
const PATCHES: &[(bool, u32, u32, CpuidPatch)] = &[
    (
        false,
        0x10,
        2,
        CpuidPatch {
            leaf: 0x10,
            subleaf: 2,
            regs: regs(0xf, 0, 0x4, 0x7),
            reason: "L2 CAT enumerated (CPUID.(10H,0):EBX[2]) but subleaf 2 not recorded; \
                     assumed 16-bit CBM, CDP, 8 COS as on the Xeon Max 9460",
        },
    ),
    (
        false,
        0x10,
        3,
        CpuidPatch {
            leaf: 0x10,
            subleaf: 3,
            regs: regs(0x59, 0, 0x4, 0x7),
            reason: "MBA enumerated (CPUID.(10H,0):EBX[3]) but subleaf 3 not recorded; \
                     assumed max delay 90, linear, 8 COS as on the Xeon Gold 6146 and 6230",
        },
    ),
    (
        true,
        0x8000_0020,
        1,
        CpuidPatch {
            leaf: 0x8000_0020,
            subleaf: 1,
            regs: regs(0xb, 0, 0, 0xf),
            reason: "AMD MBA enumerated (CPUID.(8000_0020H,0):EBX[1]) but subleaf 1 not \
                     recorded; assumed an 11-bit limit and 16 COS as on the EPYC 7763",
        },
    ),
    (
        true,
        0x8000_0020,
        2,
        CpuidPatch {
            leaf: 0x8000_0020,
            subleaf: 2,
            regs: regs(0xb, 0, 0, 0xf),
            reason: "AMD SMBA enumerated (CPUID.(8000_0020H,0):EBX[2]) but subleaf 2 not \
                     recorded; assumed the MBA values (11-bit limit, 16 COS) as on the EPYC 9654",
        },
    ),
    (
        true,
        0x8000_0020,
        3,
        CpuidPatch {
            leaf: 0x8000_0020,
            subleaf: 3,
            regs: regs(0, 2, 0x7f, 0),
            reason: "AMD BMEC enumerated (CPUID.(8000_0020H,0):EBX[3]) but subleaf 3 not \
                     recorded; assumed 2 configurable events over transaction types 0-6 as on \
                     the EPYC 9654 and 9655",
        },
    ),
];

/// The reason of the patch [`SimCpuid::set_l3_io_alloc`] makes.
const IO_RDT_REASON: &str = "L3 CAT non-CPU agent (I/O RDT) allocation, CPUID.(10H,1):ECX[1], set or \
     cleared by SimPlatform::set_io_rdt (no captured part enumerates it)";

/// The reason of the monitoring patch [`SimCpuid::set_l3_io_alloc`] makes.
const IO_RDT_MON_REASON: &str = "L3 monitoring of non-CPU agents (I/O RDT), CPUID.(0FH,1):EAX[9]/[10], \
     set or cleared with the allocation bit by SimPlatform::set_io_rdt";

/// The simulated platform's CPUID (as seen from CPU 0): the dump plus [`CpuidPatch`]es.
/// Built with [`SimCpuid::from_dump`], it also answers per CPU ([`SimCpuid::cpuid_on`]).
///
/// Cheap to clone (the dump is shared).
#[derive(Clone)]
pub struct SimCpuid {
    base: Arc<dyn CpuidSource + Send + Sync>,
    patches: Vec<CpuidPatch>,
    /// Every CPU's block, when the source is a per-CPU dump.
    per_cpu: Option<Arc<CpuidDump>>,
}

impl fmt::Debug for SimCpuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimCpuid")
            .field("patches", &self.patches)
            .finish_non_exhaustive()
    }
}

impl SimCpuid {
    /// Wraps a CPUID source and applies every patch of the table whose condition holds.
    #[must_use]
    pub fn new(base: Arc<dyn CpuidSource + Send + Sync>) -> Self {
        let vendor_ebx = base.cpuid(0, 0).map(|r| r.ebx);
        // CPUID.0:EBX "Auth" (AuthenticAMD) or "Hygo" (HygonGenuine); Intel "Genu".
        let amd = matches!(vendor_ebx, Some(0x6874_7541 | 0x6f67_7948));
        let intel = vendor_ebx == Some(0x756e_6547);
        let mut patches = Vec::new();
        for (for_amd, leaf, subleaf, patch) in PATCHES {
            if (*for_amd && !amd) || (!*for_amd && !intel) {
                continue;
            }
            let enumerated = base
                .cpuid(*leaf, 0)
                .is_some_and(|r| r.ebx & (1 << subleaf) != 0);
            if enumerated && base.cpuid(*leaf, *subleaf).is_none() {
                patches.push(*patch);
            }
        }
        Self {
            base,
            patches,
            per_cpu: None,
        }
    }

    /// [`SimCpuid::new`] over a dump, keeping every CPU's block for [`SimCpuid::cpuid_on`].
    #[must_use]
    pub fn from_dump(dump: Arc<CpuidDump>) -> Self {
        let mut s = Self::new(dump.clone());
        s.per_cpu = Some(dump);
        s
    }

    /// A source with no patches (the dump as recorded).
    #[must_use]
    pub fn unpatched(base: Arc<dyn CpuidSource + Send + Sync>) -> Self {
        Self {
            base,
            patches: Vec::new(),
            per_cpu: None,
        }
    }

    /// CPUID as logical CPU `cpu` answers it: the patches (feature leaves, the same on every
    /// CPU), else `cpu`'s own block of the dump (leaves 1, 4, 0BH, 1FH, 8000_001EH carry
    /// per-CPU APIC ids), else CPU 0's answer (for a leaf that block did not record, or when
    /// the source is not a per-CPU dump: a single-CPU dump describes a one-CPU platform).
    /// `None` for a (leaf, subleaf) the dump did not record.
    #[must_use]
    pub fn cpuid_on(&self, cpu: LogicalCpu, leaf: u32, subleaf: u32) -> Option<CpuidRegs> {
        if let Some(p) = self
            .patches
            .iter()
            .find(|p| p.leaf == leaf && p.subleaf == subleaf)
        {
            return Some(p.regs);
        }
        self.per_cpu
            .as_ref()
            .and_then(|d| d.cpu(cpu))
            .and_then(|block| block.cpuid(leaf, subleaf))
            .or_else(|| self.base.cpuid(leaf, subleaf))
    }

    /// The patches applied, in table order.
    #[must_use]
    pub fn patches(&self) -> &[CpuidPatch] {
        &self.patches
    }

    /// Sets CPUID.(10H,1):ECX\[1\], the L3 CAT's non-CPU agent (I/O RDT) allocation, and
    /// CPUID.(0FH,1):EAX\[9\]/\[10\], L3 monitoring of those agents, on or off on every CPU, as a patch over the dump ([`crate::SimPlatform::set_io_rdt`]).
    /// Returns `false` (nothing changed) where the dump has no leaf 10H subleaf 1.
    pub(crate) fn set_l3_io_alloc(&mut self, on: bool) -> bool {
        self.patches
            .retain(|p| p.reason != IO_RDT_REASON && p.reason != IO_RDT_MON_REASON);
        let Some(mut r) = self.cpuid(0x10, 1) else {
            return false;
        };
        if on {
            r.ecx |= 1 << 1;
        } else {
            r.ecx &= !(1 << 1);
        }
        self.patches.push(CpuidPatch {
            leaf: 0x10,
            subleaf: 1,
            regs: r,
            reason: IO_RDT_REASON,
        });
        // L3 monitoring of the same agents: CPUID.(0FH,1):EAX[9] (I/O occupancy) and [10]
        // (I/O bandwidth), which `-r l3iordt-on|off` needs
        if let Some(mut m) = self.cpuid(0xF, 1) {
            if on {
                m.eax |= 0b11 << 9;
            } else {
                m.eax &= !(0b11 << 9);
            }
            self.patches.push(CpuidPatch {
                leaf: 0xF,
                subleaf: 1,
                regs: m,
                reason: IO_RDT_MON_REASON,
            });
        }
        true
    }
}

impl CpuidSource for SimCpuid {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> Option<CpuidRegs> {
        self.patches
            .iter()
            .find(|p| p.leaf == leaf && p.subleaf == subleaf)
            .map(|p| p.regs)
            .or_else(|| self.base.cpuid(leaf, subleaf))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn source(rows: &[(u32, u32, CpuidRegs)]) -> Arc<dyn CpuidSource + Send + Sync> {
        let map: HashMap<(u32, u32), CpuidRegs> =
            rows.iter().map(|(l, s, r)| ((*l, *s), *r)).collect();
        Arc::new(move |l: u32, s: u32| map.get(&(l, s)).copied())
    }

    const INTEL: CpuidRegs = regs(0x16, 0x756e_6547, 0x6c65_746e, 0x4965_6e69);

    #[test]
    fn fills_mba_subleaf_when_enumerated_but_not_recorded() {
        // arrange: Gold 6140's leaf 0x10: L3 CAT + MBA enumerated, only subleaf 1 recorded.
        let src = source(&[
            (0, 0, INTEL),
            (0x10, 0, regs(0, 0xa, 0, 0)),
            (0x10, 1, regs(0xa, 0x600, 0x4, 0xf)),
        ]);
        // act
        let c = SimCpuid::new(src);
        // assert
        assert_eq!(c.patches().len(), 1);
        assert_eq!(c.cpuid(0x10, 3), Some(regs(0x59, 0, 0x4, 0x7)));
        assert_eq!(c.cpuid(0x10, 1), Some(regs(0xa, 0x600, 0x4, 0xf)));
        assert_eq!(c.cpuid(0x10, 2), None);
    }

    #[test]
    fn recorded_leaves_are_never_overridden() {
        let src = source(&[
            (0, 0, INTEL),
            (0x10, 0, regs(0, 0xe, 0, 0)),
            (0x10, 2, regs(0xf, 0, 0x4, 0x7)),
            (0x10, 3, regs(0x59, 0, 0x4, 0xe)),
        ]);
        let c = SimCpuid::new(src);
        assert!(c.patches().is_empty());
        assert_eq!(c.cpuid(0x10, 3).map(|r| r.edx), Some(0xe));
    }

    #[test]
    fn cpuid_on_answers_from_each_cpus_block_with_cpu_0_and_patches_as_fallback() {
        // arrange: two CPU blocks differing in their x2APIC id (leaf 0BH EDX); only CPU 0
        // recorded leaf 0x10.
        let text = "# logical-cpu 0\n\
                    00000000 00000000 00000016 756e6547 6c65746e 49656e69\n\
                    0000000b 00000000 00000001 00000002 00000100 00000000\n\
                    00000010 00000000 00000000 0000000a 00000000 00000000\n\
                    # logical-cpu 1\n\
                    00000000 00000000 00000016 756e6547 6c65746e 49656e69\n\
                    0000000b 00000000 00000001 00000002 00000100 00000011\n";
        let dump = Arc::new(CpuidDump::parse(text).unwrap());
        // act
        let c = SimCpuid::from_dump(dump);
        // assert
        let cpu1 = LogicalCpu::new(1);
        assert_eq!(c.cpuid_on(cpu1, 0xb, 0).map(|r| r.edx), Some(0x11));
        assert_eq!(
            c.cpuid_on(LogicalCpu::new(0), 0xb, 0).map(|r| r.edx),
            Some(0)
        );
        assert_eq!(c.cpuid_on(cpu1, 0x10, 0).map(|r| r.ebx), Some(0xa));
        assert_eq!(c.cpuid_on(cpu1, 0x10, 3), Some(regs(0x59, 0, 0x4, 0x7)));
        assert_eq!(c.cpuid_on(cpu1, 0x7, 0), None);
    }

    #[test]
    fn amd_mba_subleaf_is_filled_only_on_amd() {
        let amd = regs(0x10, 0x6874_7541, 0x444d_4163, 0x6974_6e65);
        let c = SimCpuid::new(source(&[(0, 0, amd), (0x8000_0020, 0, regs(0, 2, 0, 0))]));
        assert_eq!(c.cpuid(0x8000_0020, 1).map(|r| r.eax), Some(0xb));
        let i = SimCpuid::new(source(&[(0, 0, INTEL), (0x8000_0020, 0, regs(0, 2, 0, 0))]));
        assert!(i.patches().is_empty());
    }
}
