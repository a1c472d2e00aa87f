//! CPUID sources: the instruction, the per-CPU `cpuid` device, and canonical dump files.

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

/// Where CPUID answers come from.
///
/// `None` means the source did not record that (leaf, subleaf): a partial dump. The CPUID
/// instruction and the `cpuid` device always answer.
///
/// Closures `Fn(u32, u32) -> Option<CpuidRegs>` are sources too, for tests.
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
