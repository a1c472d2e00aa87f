//! CPUID sources: the instruction, the per-CPU `cpuid` device, and canonical dump files.
//!
//! Every source implements [`CpuidSource`], which answers `None` for a (leaf, subleaf) it
//! does not know. Only dumps ever do that: a dump records what its tool recorded, and an
//! absent leaf means *unknown*, never zero. [`raw_cpuid()`] adapts any source to the
//! `raw-cpuid` crate's decoders; it reads unknown leaves as zeros, so callers check
//! [`CpuidSource::cpuid`]`.is_some()` before trusting a decoded field (detection does).
//!
//! | source | where the answers come from | unknown leaves |
//! |---|---|---|
//! | [`NativeCpuid`] | the CPUID instruction, on whatever CPU the thread runs | never (x86_64); always (other arches) |
//! | `rdt_host::cpuid::DevCpuid` | Linux `/dev/cpu/N/cpuid` (the `cpuid` module), on CPU N | only on a read error |
//! | [`CpuidDump`], [`DumpCpu`] | a canonical dump file (`# canonical-cpuid v1`) | every unrecorded leaf |
//! | `Fn(u32, u32) -> Option<CpuidRegs>` | a closure, for tests | as the closure says |
//!
//! # References
//! - Intel SDM Vol. 2A, "CPUID—CPU Identification".
//! - AMD64 Architecture Programmer's Manual Vol. 3, appendix E "Obtaining Processor
//!   Information Via the CPUID Instruction".
//! - Linux `arch/x86/kernel/cpuid.c` (the `/dev/cpu/N/cpuid` device).

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;

use raw_cpuid::{CpuId, CpuIdReader, CpuIdResult};

use crate::LogicalCpu;

/// The four registers one CPUID query returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpuidRegs {
    /// EAX.
    pub eax: u32,
    /// EBX.
    pub ebx: u32,
    /// ECX.
    pub ecx: u32,
    /// EDX.
    pub edx: u32,
}

impl From<CpuIdResult> for CpuidRegs {
    fn from(r: CpuIdResult) -> Self {
        Self {
            eax: r.eax,
            ebx: r.ebx,
            ecx: r.ecx,
            edx: r.edx,
        }
    }
}

impl From<CpuidRegs> for CpuIdResult {
    fn from(r: CpuidRegs) -> Self {
        Self {
            eax: r.eax,
            ebx: r.ebx,
            ecx: r.ecx,
            edx: r.edx,
        }
    }
}

/// Where CPUID answers come from.
///
/// `None` means the source did not record that (leaf, subleaf): a partial dump. The CPUID
/// instruction and the `cpuid` device always answer.
///
/// Closures `Fn(u32, u32) -> Option<CpuidRegs>` are sources too, for tests.
///
/// # Examples
/// ```
/// use rdt_core::{CpuidRegs, CpuidSource};
/// let src = |leaf: u32, _sub: u32| (leaf == 0).then(|| CpuidRegs { eax: 0x16, ..Default::default() });
/// assert_eq!(src.cpuid(0, 0).map(|r| r.eax), Some(0x16));
/// assert_eq!(src.cpuid(7, 0), None);
/// ```
pub trait CpuidSource {
    /// Answers CPUID with EAX = `leaf`, ECX = `subleaf`.
    fn cpuid(&self, leaf: u32, subleaf: u32) -> Option<CpuidRegs>;
}

impl<F> CpuidSource for F
where
    F: Fn(u32, u32) -> Option<CpuidRegs>,
{
    fn cpuid(&self, leaf: u32, subleaf: u32) -> Option<CpuidRegs> {
        self(leaf, subleaf)
    }
}

// ---------------------------------------------------------------------------------------------
// raw-cpuid adapter

/// A `raw_cpuid::CpuIdReader` over any [`CpuidSource`]; unknown leaves read as zeros.
///
/// Zeros are what raw-cpuid's decoders expect of "nothing here" (a cache-parameter type of 0
/// ends the cache list, a clear bit is an absent feature). They are **not** evidence that
/// the leaf is zero: check [`CpuidSource::cpuid`] first when the difference matters.
#[derive(Clone, Copy)]
pub struct RawCpuidReader<'a> {
    src: &'a dyn CpuidSource,
}

impl fmt::Debug for RawCpuidReader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawCpuidReader").finish_non_exhaustive()
    }
}

impl CpuIdReader for RawCpuidReader<'_> {
    fn cpuid2(&self, eax: u32, ecx: u32) -> CpuIdResult {
        self.src.cpuid(eax, ecx).unwrap_or_default().into()
    }
}

/// The `raw-cpuid` view of a source, for its decoders (vendor, brand string, feature bits,
/// `get_rdt_monitoring_info`, `get_rdt_allocation_info`, `get_pqos_extended_feature_info`,
/// cache parameters).
///
/// Leaves the source does not know read as zeros (see [`RawCpuidReader`]).
///
/// # Examples
/// ```
/// use rdt_core::cpuid::{raw_cpuid, CpuidRegs};
/// // Leaf 0 of a Xeon Gold 6140: max leaf 0x16, "GenuineIntel".
/// let src = |leaf: u32, _sub: u32| {
///     (leaf == 0).then_some(CpuidRegs { eax: 0x16, ebx: 0x756e_6547, ecx: 0x6c65_746e, edx: 0x4965_6e69 })
/// };
/// let id = raw_cpuid(&src);
/// assert_eq!(id.get_vendor_info().unwrap().as_str(), "GenuineIntel");
/// ```
#[must_use]
pub fn raw_cpuid(src: &dyn CpuidSource) -> CpuId<RawCpuidReader<'_>> {
    CpuId::with_cpuid_reader(RawCpuidReader { src })
}

// ---------------------------------------------------------------------------------------------
// The CPUID instruction

/// The CPUID instruction of the CPU the calling thread runs on
/// (`std::arch::x86_64::__cpuid_count`).
///
/// Pin the thread (or use `rdt_host::cpuid::DevCpuid`) to query a particular CPU: leaves 1, 4, 0xB, 0x1F and
/// 0x8000001E differ per logical CPU. On architectures other than x86_64 every answer is
/// `None`.
///
/// Note that the instruction answers every leaf: beyond the maximum leaf (CPUID.0:EAX) Intel
/// CPUs return the highest basic leaf's data, so decoders must check the maximum leaf first
/// (as [`crate::Capabilities::detect`] does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NativeCpuid;

impl CpuidSource for NativeCpuid {
    #[cfg(target_arch = "x86_64")]
    fn cpuid(&self, leaf: u32, subleaf: u32) -> Option<CpuidRegs> {
        let r = std::arch::x86_64::__cpuid_count(leaf, subleaf);
        Some(CpuidRegs {
            eax: r.eax,
            ebx: r.ebx,
            ecx: r.ecx,
            edx: r.edx,
        })
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn cpuid(&self, _leaf: u32, _subleaf: u32) -> Option<CpuidRegs> {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// /dev/cpu/N/cpuid

// ---------------------------------------------------------------------------------------------
// Canonical dumps

/// The largest CPUID dump file read, in bytes (16 MiB): a 1,024-CPU dump of 60 leaves is
/// about 4 MiB.
pub const MAX_DUMP_BYTES: u64 = 16 << 20;

/// A canonical CPUID dump could not be read or parsed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DumpError {
    /// A line is neither a comment nor six hexadecimal words.
    #[error("line {line}: {reason}: `{text}`")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// The line as written.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The same (leaf, subleaf) appears twice for one CPU.
    #[error(
        "line {line}: leaf {leaf:#x} subleaf {subleaf:#x} of logical CPU {cpu} was already recorded: `{text}`"
    )]
    DuplicateLeaf {
        /// 1-based line number of the second occurrence.
        line: usize,
        /// The line as written.
        text: String,
        /// The CPU block.
        cpu: LogicalCpu,
        /// Leaf (EAX).
        leaf: u32,
        /// Subleaf (ECX).
        subleaf: u32,
    },
    /// A `# logical-cpu N` block header names a CPU that already has a block.
    #[error("line {line}: logical CPU {cpu} already has a block: `{text}`")]
    DuplicateCpu {
        /// 1-based line number.
        line: usize,
        /// The line as written.
        text: String,
        /// The CPU.
        cpu: LogicalCpu,
    },
    /// The file declares a format version this parser does not know.
    #[error(
        "line {line}: unsupported dump format (this parser reads `# canonical-cpuid v1`): `{text}`"
    )]
    UnsupportedVersion {
        /// 1-based line number.
        line: usize,
        /// The line as written.
        text: String,
    },
    /// The dump holds no CPUID rows at all.
    #[error("the CPUID dump records no leaves")]
    Empty,
    /// Reading the file failed.
    #[error("failed to read CPUID dump {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A dump file did not parse; the source names the line.
    #[error("in CPUID dump {path}")]
    InFile {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: Box<DumpError>,
    },
}

/// The recorded CPUID leaves of one logical CPU of a [`CpuidDump`].
///
/// Implements [`CpuidSource`]: a (leaf, subleaf) that was not recorded answers `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpCpu {
    /// The CPU number of the block (`# logical-cpu N`; 0 for a single-CPU dump). For hwloc
    /// dumps this is the Linux CPU number, for AIDA64 dumps AIDA64's enumeration order.
    pub cpu: LogicalCpu,
    leaves: BTreeMap<(u32, u32), CpuidRegs>,
}

impl DumpCpu {
    /// An empty block for `cpu`.
    #[must_use]
    pub const fn new(cpu: LogicalCpu) -> Self {
        Self {
            cpu,
            leaves: BTreeMap::new(),
        }
    }

    /// Records (or replaces) the answer for (`leaf`, `subleaf`).
    pub fn insert(&mut self, leaf: u32, subleaf: u32, regs: CpuidRegs) {
        self.leaves.insert((leaf, subleaf), regs);
    }

    /// Forgets the answer for (`leaf`, `subleaf`), returning it.
    pub fn remove(&mut self, leaf: u32, subleaf: u32) -> Option<CpuidRegs> {
        self.leaves.remove(&(leaf, subleaf))
    }

    /// The recorded rows, sorted by (leaf, subleaf).
    pub fn leaves(&self) -> impl Iterator<Item = (u32, u32, CpuidRegs)> + '_ {
        self.leaves.iter().map(|(&(l, s), &r)| (l, s, r))
    }

    /// Number of recorded (leaf, subleaf) rows.
    #[must_use]
    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    /// Whether nothing was recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }
}

impl CpuidSource for DumpCpu {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> Option<CpuidRegs> {
        self.leaves.get(&(leaf, subleaf)).copied()
    }
}

/// A parsed canonical CPUID dump (`# canonical-cpuid v1`).
///
/// Format: `#` lines are comments, except `# processor: <brand>` (kept, see
/// [`Self::processor`]) and `# logical-cpu N`, which starts the block of logical CPU N. Every
/// other line is `leaf subleaf eax ebx ecx edx` in hexadecimal. Rows before the first block
/// header belong to CPU 0, so a plain single-CPU dump is one block. A (leaf, subleaf) that is
/// not listed is unknown, not zero.
///
/// As a [`CpuidSource`] the dump answers from its first CPU block; use [`Self::cpus`] for the
/// others. `Display` writes the canonical format back (header, processor line, rows), and
/// `FromStr` is [`Self::parse`].
///
/// # Examples
/// ```
/// use rdt_core::cpuid::CpuidDump;
/// use rdt_core::CpuidSource;
/// let text = "# canonical-cpuid v1\n# processor: Example CPU\n\
///             00000000 00000000 00000016 756e6547 6c65746e 49656e69\n";
/// let dump = CpuidDump::parse(text).unwrap();
/// assert_eq!(dump.processor(), Some("Example CPU"));
/// assert_eq!(dump.cpuid(0, 0).unwrap().eax, 0x16);
/// assert_eq!(dump.cpuid(7, 0), None); // not recorded: unknown
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuidDump {
    processor: Option<String>,
    cpus: Vec<DumpCpu>,
}

impl CpuidDump {
    /// Builds a dump from CPU blocks (at least one, in the order given).
    ///
    /// # Errors
    /// [`DumpError::Empty`] when no block records any leaf.
    pub fn from_cpus(processor: Option<String>, cpus: Vec<DumpCpu>) -> Result<Self, DumpError> {
        if cpus.iter().all(DumpCpu::is_empty) {
            return Err(DumpError::Empty);
        }
        Ok(Self { processor, cpus })
    }

    /// Parses the canonical text format.
    ///
    /// # Errors
    /// [`DumpError::BadLine`] for a line that is not six hex words (the error names the line
    /// number and its text), [`DumpError::DuplicateLeaf`], [`DumpError::DuplicateCpu`],
    /// [`DumpError::UnsupportedVersion`] for `# canonical-cpuid v2` and later, and
    /// [`DumpError::Empty`] when no row was found.
    pub fn parse(text: &str) -> Result<Self, DumpError> {
        let mut processor = None;
        let mut cpus: Vec<DumpCpu> = Vec::new();
        let mut current: Option<DumpCpu> = None;
        for (idx, raw) in text.lines().enumerate() {
            let line = idx + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() {
                continue;
            }
            if let Some(comment) = trimmed.strip_prefix('#') {
                let comment = comment.trim();
                if let Some(v) = comment.strip_prefix("canonical-cpuid ") {
                    if v.trim() != "v1" {
                        return Err(DumpError::UnsupportedVersion {
                            line,
                            text: raw.into(),
                        });
                    }
                } else if let Some(p) = comment.strip_prefix("processor:") {
                    processor = Some(p.trim().to_owned());
                } else if let Some(rest) = block_header(comment) {
                    let n: u32 = rest.parse().map_err(|_| DumpError::BadLine {
                        line,
                        text: raw.into(),
                        reason: "`# logical-cpu` is not followed by a decimal CPU number",
                    })?;
                    let cpu = LogicalCpu::new(n);
                    cpus.extend(current.take());
                    if cpus.iter().any(|c| c.cpu == cpu) {
                        return Err(DumpError::DuplicateCpu {
                            line,
                            text: raw.into(),
                            cpu,
                        });
                    }
                    current = Some(DumpCpu::new(cpu));
                }
                continue;
            }
            let (leaf, subleaf, regs) = parse_row(trimmed).ok_or_else(|| DumpError::BadLine {
                line,
                text: raw.into(),
                reason: "expected `leaf subleaf eax ebx ecx edx` as six hexadecimal 32-bit words",
            })?;
            // Rows before any `# logical-cpu` header are CPU 0's (a single-CPU dump).
            let block = current.get_or_insert_with(|| DumpCpu::new(LogicalCpu::new(0)));
            if block.leaves.insert((leaf, subleaf), regs).is_some() {
                return Err(DumpError::DuplicateLeaf {
                    line,
                    text: raw.into(),
                    cpu: block.cpu,
                    leaf,
                    subleaf,
                });
            }
        }
        cpus.extend(current);
        Self::from_cpus(processor, cpus)
    }

    /// The brand string of the `# processor:` header, if the dump has one.
    #[must_use]
    pub fn processor(&self) -> Option<&str> {
        self.processor.as_deref()
    }

    /// The CPU blocks, in file order (at least one).
    #[must_use]
    pub fn cpus(&self) -> &[DumpCpu] {
        &self.cpus
    }

    /// The block of logical CPU `cpu`, if the dump has one.
    #[must_use]
    pub fn cpu(&self, cpu: LogicalCpu) -> Option<&DumpCpu> {
        // Blocks are usually numbered 0, 1, 2, ... in file order: try the block at that index.
        let at = usize::try_from(cpu.get())
            .ok()
            .and_then(|i| self.cpus.get(i));
        at.filter(|c| c.cpu == cpu)
            .or_else(|| self.cpus.iter().find(|c| c.cpu == cpu))
    }
}

/// `logical-cpu N` -> `Some("N")`; `logical-cpus-in-dump: ...` and other comments -> `None`.
fn block_header(comment: &str) -> Option<&str> {
    let mut words = comment.split_whitespace();
    (words.next() == Some("logical-cpu")).then(|| words.next().unwrap_or(""))
}

fn parse_row(line: &str) -> Option<(u32, u32, CpuidRegs)> {
    // Written without iterator adapters: the simulator parses 23,000 rows of this per
    // 384-CPU model, in unoptimized test builds too.
    let mut w = [0u32; 6];
    let mut n = 0;
    for word in line.split_whitespace() {
        if n == w.len() || word.len() > 8 {
            return None;
        }
        let mut v = 0u32;
        for b in word.bytes() {
            v = v << 4 | char::from(b).to_digit(16)?;
        }
        w[n] = v;
        n += 1;
    }
    (n == w.len()).then_some((
        w[0],
        w[1],
        CpuidRegs {
            eax: w[2],
            ebx: w[3],
            ecx: w[4],
            edx: w[5],
        },
    ))
}

impl CpuidSource for CpuidDump {
    /// Answers from the first CPU block.
    fn cpuid(&self, leaf: u32, subleaf: u32) -> Option<CpuidRegs> {
        self.cpus.first()?.cpuid(leaf, subleaf)
    }
}

impl FromStr for CpuidDump {
    type Err = DumpError;

    fn from_str(s: &str) -> Result<Self, DumpError> {
        Self::parse(s)
    }
}

impl fmt::Display for CpuidDump {
    /// Writes the canonical v1 format. Block headers are written unless the dump is one block
    /// of CPU 0.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# canonical-cpuid v1")?;
        if let Some(p) = &self.processor {
            writeln!(f, "# processor: {p}")?;
        }
        writeln!(f, "# columns: leaf subleaf eax ebx ecx edx (hex)")?;
        let headers = self.cpus.len() > 1 || self.cpus.iter().any(|c| c.cpu.get() != 0);
        for block in &self.cpus {
            if headers {
                writeln!(f, "# logical-cpu {}", block.cpu)?;
            }
            for (leaf, sub, r) in block.leaves() {
                writeln!(
                    f,
                    "{leaf:08x} {sub:08x} {:08x} {:08x} {:08x} {:08x}",
                    r.eax, r.ebx, r.ecx, r.edx
                )?;
            }
        }
        Ok(())
    }
}

/// Family, model and stepping of CPUID.1:EAX (SDM Vol. 2A, CPUID leaf 1: the display family
/// adds the extended family when the family is 0FH, the display model the extended model when
/// the family is 06H or 0FH).
#[must_use]
pub const fn fms(signature: u32) -> (u32, u32, u32) {
    let family = signature >> 8 & 0xf;
    let ext_family = signature >> 20 & 0xff;
    let model = signature >> 4 & 0xf;
    let ext_model = signature >> 16 & 0xf;
    let stepping = signature & 0xf;
    let f = if family == 0xf {
        family + ext_family
    } else {
        family
    };
    let m = if family == 0x6 || family == 0xf {
        ext_model << 4 | model
    } else {
        model
    };
    (f, m, stepping)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GOLD_6140_HEAD: &str = "\
# canonical-cpuid v1
# processor: Intel(R) Xeon(R) Gold 6140 CPU @ 2.30GHz
# logical-cpus-in-dump: 72 (this file: logical CPU 0)
# columns: leaf subleaf eax ebx ecx edx (hex)
00000000 00000000 00000016 756e6547 6c65746e 49656e69
0000000f 00000001 00000000 00012000 0000008f 00000007
00000010 00000001 0000000a 00000600 00000004 0000000f
";

    #[test]
    fn parse_reads_rows_and_processor_and_leaves_the_rest_unknown() {
        // act
        let dump = CpuidDump::parse(GOLD_6140_HEAD).unwrap();
        // assert
        assert_eq!(
            dump.processor(),
            Some("Intel(R) Xeon(R) Gold 6140 CPU @ 2.30GHz")
        );
        assert_eq!(dump.cpus().len(), 1);
        assert_eq!(dump.cpus()[0].cpu, LogicalCpu::new(0));
        assert_eq!(
            dump.cpuid(0x10, 1),
            Some(CpuidRegs {
                eax: 0xa,
                ebx: 0x600,
                ecx: 0x4,
                edx: 0xf
            })
        );
        assert_eq!(dump.cpuid(0x10, 2), None);
        assert_eq!(dump.cpuid(7, 0), None);
    }

    #[test]
    fn parse_splits_logical_cpu_blocks_but_not_the_cpus_in_dump_comment() {
        // arrange
        let text = "# logical-cpus-in-dump: 2\n# logical-cpu 0\n\
                    0000000b 00000000 00000001 00000002 00000100 00000000\n\
                    # logical-cpu 5\n\
                    0000000b 00000000 00000001 00000002 00000100 00000024\n";
        // act
        let dump = CpuidDump::parse(text).unwrap();
        // assert
        let cpus: Vec<u32> = dump.cpus().iter().map(|c| c.cpu.get()).collect();
        assert_eq!(cpus, [0, 5]);
        assert_eq!(
            dump.cpu(LogicalCpu::new(5))
                .unwrap()
                .cpuid(0xb, 0)
                .unwrap()
                .edx,
            0x24
        );
        assert_eq!(
            dump.cpuid(0xb, 0).unwrap().edx,
            0,
            "the dump answers from its first block"
        );
    }

    #[test]
    fn malformed_row_error_names_line_number_and_text() {
        // arrange
        let text = "# canonical-cpuid v1\n00000000 00000000 00000016 756e6547 6c65746e 49656e69\n\
                    00000001 00000000 000zz654 00400800\n";
        // act
        let err = CpuidDump::parse(text).unwrap_err();
        // assert
        match &err {
            DumpError::BadLine { line, text, .. } => {
                assert_eq!(*line, 3);
                assert_eq!(text, "00000001 00000000 000zz654 00400800");
            }
            other => panic!("unexpected error {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.starts_with("line 3: "), "{msg}");
        assert!(
            msg.contains("`00000001 00000000 000zz654 00400800`"),
            "{msg}"
        );
    }

    #[test]
    fn row_with_a_seventh_word_or_a_too_long_word_is_rejected() {
        for bad in [
            "00000000 00000000 00000016 756e6547 6c65746e 49656e69 00000000",
            "00000000 00000000 100000016 756e6547 6c65746e 49656e69",
            "0x0 0 0 0 0 0",
        ] {
            let err = CpuidDump::parse(bad).unwrap_err();
            assert!(
                matches!(err, DumpError::BadLine { line: 1, .. }),
                "{bad}: {err:?}"
            );
        }
    }

    #[test]
    fn duplicate_rows_and_blocks_and_empty_dumps_are_errors() {
        let dup = "0 0 1 2 3 4\n0 0 1 2 3 4\n";
        assert!(matches!(
            CpuidDump::parse(dup),
            Err(DumpError::DuplicateLeaf {
                line: 2,
                leaf: 0,
                subleaf: 0,
                ..
            })
        ));
        let dup_cpu = "# logical-cpu 1\n0 0 1 2 3 4\n# logical-cpu 1\n";
        assert!(matches!(
            CpuidDump::parse(dup_cpu),
            Err(DumpError::DuplicateCpu { line: 3, .. })
        ));
        assert!(matches!(
            CpuidDump::parse("# only comments\n"),
            Err(DumpError::Empty)
        ));
        assert!(matches!(
            CpuidDump::parse("# canonical-cpuid v2\n0 0 0 0 0 0\n"),
            Err(DumpError::UnsupportedVersion { line: 1, .. })
        ));
    }

    #[test]
    fn display_writes_the_canonical_format() {
        let dump = CpuidDump::parse(GOLD_6140_HEAD).unwrap();
        let text = dump.to_string();
        assert!(text.starts_with("# canonical-cpuid v1\n# processor: Intel(R) Xeon(R) Gold 6140"));
        assert!(text.contains("\n00000010 00000001 0000000a 00000600 00000004 0000000f\n"));
        assert!(!text.contains("logical-cpu "));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn native_cpuid_answers_leaf_0() {
        let r = NativeCpuid.cpuid(0, 0).unwrap();
        assert_ne!(r.ebx, 0, "vendor string word");
    }

    #[test]
    fn raw_cpuid_reads_unknown_leaves_as_zeros() {
        let src = |leaf: u32, _sub: u32| {
            (leaf == 0).then_some(CpuidRegs {
                eax: 0x20,
                ..Default::default()
            })
        };
        let id = raw_cpuid(&src);
        assert!(id.get_feature_info().unwrap().family_id() == 0);
    }

    fn arb_block() -> impl Strategy<Value = BTreeMap<(u32, u32), CpuidRegs>> {
        prop::collection::btree_map(
            (any::<u32>(), 0u32..16),
            any::<(u32, u32, u32, u32)>().prop_map(|(eax, ebx, ecx, edx)| CpuidRegs {
                eax,
                ebx,
                ecx,
                edx,
            }),
            1..8,
        )
    }

    /// A CPUID dump of any text parses or is an error naming the line and quoting it; a
    /// dump that parses gives a topology or an error, and capabilities, without a panic.
    #[test]
    fn fuzz_cpuid_dump_text_never_panics_and_errors_name_the_line() {
        use crate::fake::fuzz::{fuzz, text};
        const WORDS: &[&str] = &[
            "# canonical-cpuid v1\n",
            "# canonical-cpuid v2\n",
            "# logical-cpu 0\n",
            "# logical-cpu 1\n",
            "# processor: Xeon\n",
            "#",
            "\n",
            " ",
            "00000000",
            "0000000f",
            "00000010",
            "00000001",
            "0000000b",
            "ffffffff",
            "7fffffff",
            "80000020",
        ];
        fuzz("CpuidDump::parse", text(WORDS, 30), |t| {
            match CpuidDump::parse(&t) {
                Ok(dump) => {
                    let _ = crate::Topology::from_cpuid_dump(&dump);
                    let _ = crate::Capabilities::detect(&dump).check_plausible();
                }
                Err(DumpError::Empty) => {}
                Err(e) => {
                    let m = e.to_string();
                    let line: usize = m
                        .strip_prefix("line ")
                        .and_then(|r| r.split(':').next())
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| panic!("no line in {m}"));
                    let text = t.lines().nth(line - 1).unwrap_or_default();
                    prop_assert!(m.ends_with(&format!("`{text}`")), "{m} for {t:?}");
                }
            }
            Ok(())
        });
    }

    proptest! {
        #[test]
        fn display_then_parse_round_trips(
            blocks in prop::collection::btree_map(0u32..512, arb_block(), 1..4),
            processor in prop::option::of("[A-Za-z0-9()@. -]{0,40}"),
        ) {
            let cpus = blocks
                .into_iter()
                .map(|(n, leaves)| DumpCpu { cpu: LogicalCpu::new(n), leaves })
                .collect();
            let processor = processor.map(|p| p.trim().to_owned());
            let dump = CpuidDump::from_cpus(processor, cpus).unwrap();
            prop_assert_eq!(CpuidDump::parse(&dump.to_string()).unwrap(), dump);
        }
    }
}
