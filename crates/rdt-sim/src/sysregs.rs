//! Registers that are not RDT's but that RDT tools read on real silicon: the TSC, the local
//! APIC's base and x2APIC id, IA32_MISC_ENABLE, IA32_EFER, IA32_CORE_CAPABILITIES,
//! MBA_CFG, IA32_L3_IO_QOS_CFG and MSR_RMID_SNC_CONFIG. Without them a tool that reads one of them to learn where it runs (the x2APIC id)
//! or what the CPU does (core capabilities) cannot start on the model, though it would on the
//! machine the model copies.
//!
//! | MSR | exists when | value | writes |
//! |---|---|---|---|
//! | IA32_TIME_STAMP_COUNTER 0x10 | always | base-frequency cycles of the virtual clock ([`crate::SimPlatform::now`] × base frequency): monotonic, the same on every CPU (invariant TSC) | EIO (the model's clock is not the guest's to set) |
//! | IA32_APIC_BASE 0x1B | always | `0xFEE0_0000` (the architectural default base) \| bit 11 (APIC global enable) \| bit 10 (x2APIC mode, when CPUID.1:ECX\[21\] enumerates x2APIC: Linux enables it) \| bit 8 (BSP, logical CPU 0 only) | EIO |
//! | IA32_MISC_ENABLE 0x1A0 | Intel only (AMD: #GP, EIO) | `0x81_0089` (bits 0 fast strings, 3 automatic thermal control, 7 performance monitoring available, 16 Enhanced SpeedStep, 23 xTPR messages disabled) \| bit 18 (MONITOR/MWAIT enable, when CPUID.1:ECX\[3\]): `0x85_0089`, the value Linux hosts on Xeon servers show | EIO |
//! | IA32_EFER 0xC000_0080 | always | `0xD01`: SCE (0), LME (8), LMA (10), NXE (11), as a 64-bit Linux kernel runs | EIO |
//! | IA32_CORE_CAPABILITIES 0xCF | Intel, CPUID.(7,0):EDX\[30\] (`sapphire-rapids`) | `0x24`: bit 2 integrity capabilities (In-Field Scan, which Sapphire Rapids has: Linux `ifs` driver) and bit 5 split-lock detection (Linux `split_lock_setup`); bit 10 (MBA 4.0, pqos `is_mba40_supported`) only where [`SimPlatform::set_mba40`] models a part with it (no built-in model's part has it) | EIO (read-only) |
//! | MBA_CFG 0xC84 | Intel MBA 2.0 and later: linear MBA with more than 8 classes or per-thread controls, CPUID.(10H,3) (`sapphire-rapids`: 15 classes; pqos reads it there, `hw_cap_mba_discover`), or MBA 4.0 | per package, reset 0: bit 0 selects which delay a core applies when its two threads' classes differ, 0 the larger (max), 1 the smaller (min); bit 1 legacy mode (held, no effect); bit 2 MBA 4.0 extensions enabled, with MBA 4.0 (held: the model's throttling does not change) | other bits: EIO |
//! | IA32_L3_IO_QOS_CFG 0xC83 | Intel, the L3 CAT enumerates I/O RDT allocation (CPUID.(10H,1):ECX\[1\]; no captured part: [`SimPlatform::set_io_rdt`]) | per package, reset 0: bit 0 L3 I/O RDT allocation enabled, bit 1 L3 I/O RDT monitoring enabled (both held: the model's I/O agents do not change) | other bits: EIO |
//! | MSR_RMID_SNC_CONFIG 0xCA0 | Intel family 6 Ice Lake server and later (models 6AH, 8FH, CFH, ADH, AFH: the kernel's `snc_cpu_ids`; `sapphire-rapids*`) | per package; bit 0 set at power-on (legacy mode), clear on an SNC model (Linux clears it at boot, `arch_mon_domain_online`); while clear and SNC is on, a CPU on node k counts RMID r as r + k × (RMIDs / nodes), while set as r | bits other than 0: EIO |
//! | IA32_X2APIC_APICID 0x802 | x2APIC mode (CPUID.1:ECX\[21\]; xAPIC mode: #GP, EIO) | the CPU's x2APIC id: CPUID.(1FH or 0BH, 0):EDX of that CPU, else CPUID.8000_001EH:EAX (AMD), else CPUID.1:EBX\[31:24\] | EIO (read-only) |
//!
//! The model's dumps: `milan` clears CPUID.1:ECX\[21\] (its BIOS left the APIC in xAPIC
//! mode), so its 0x802 reads EIO as on that machine: a tool must then take the APIC id from
//! CPUID. The Intel dumps enumerate x2APIC.
//!
//! Where MBA is applied per core (Intel, CPUID.(10H,3):ECX\[0\] clear: every built-in Intel
//! model), the model throttles both threads of a core by the larger of their classes'
//! delays (`thread_throttle_mode` "max"), or the smaller where MBA_CFG bit 0 is set.
//! MBA_CFG is not part of the saved state (it starts at 0 in each process).
//!
//! # References
//! Intel SDM Vol. 4 "Model-Specific Registers" (table 2-2, architectural MSRs), Vol. 3A
//! 11.12 (x2APIC, IA32_APIC_BASE, the x2APIC ID register 802H); AMD APM Vol. 2 (EFER);
//! Linux `arch/x86/include/asm/msr-index.h`.

use rdt_core::{CpuidSource, LogicalCpu};

use crate::SimPlatform;

/// IA32_TIME_STAMP_COUNTER.
pub(crate) const IA32_TSC: u32 = 0x10;
/// IA32_APIC_BASE.
pub(crate) const IA32_APIC_BASE: u32 = 0x1B;
/// IA32_MISC_ENABLE.
pub(crate) const IA32_MISC_ENABLE: u32 = 0x1A0;
/// IA32_X2APIC_APICID.
pub(crate) const IA32_X2APIC_APICID: u32 = 0x802;
/// IA32_EFER.
pub(crate) const IA32_EFER: u32 = 0xC000_0080;
/// IA32_CORE_CAPABILITIES.
pub(crate) const IA32_CORE_CAPABILITIES: u32 = 0xCF;
/// IA32_L3_IO_QOS_CFG (pqos `PQOS_MSR_L3_IO_QOS_CFG`).
pub(crate) const L3_IO_QOS_CFG: u32 = rdt_msr::regs::IA32_L3_IO_QOS_CFG.get();
/// MBA_CFG (SDM: MSR_MBA_CFG; pqos `PQOS_MSR_MBA_CFG`).
pub(crate) const MBA_CFG: u32 = rdt_msr::regs::IA32_MBA_CFG.get();
/// MBA_CFG bit 0: the smaller of a core's thread delays applies.
pub(crate) const MBA_CFG_MIN: u64 = rdt_msr::regs::MBA_CFG_MIN_DELAY;
/// MBA_CFG bit 2: MBA 4.0 extensions enabled (held; the model throttles as before).
pub(crate) const MBA_CFG_MBA40: u64 = rdt_msr::regs::MBA_CFG_MBA40;
/// MSR_RMID_SNC_CONFIG.
pub(crate) const RMID_SNC_CONFIG: u32 = rdt_msr::regs::MSR_RMID_SNC_CONFIG.get();

/// A non-RDT register the model answers (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SysReg {
    Tsc,
    ApicBase,
    MiscEnable,
    Efer,
    X2ApicId,
    CoreCapabilities,
    MbaCfg,
    L3IoQosCfg,
    RmidSncConfig,
}

/// CPUID.0:EBX of AMD ("Auth") and Hygon ("Hygo").
fn is_amd(cpuid: &dyn CpuidSource) -> bool {
    matches!(
        cpuid.cpuid(0, 0).map(|r| r.ebx),
        Some(0x6874_7541 | 0x6f67_7948)
    )
}

/// CPUID.1:ECX\[21\]: x2APIC.
fn has_x2apic(cpuid: &dyn CpuidSource) -> bool {
    cpuid.cpuid(1, 0).is_some_and(|r| r.ecx >> 21 & 1 == 1)
}

impl SimPlatform {
    /// The non-RDT register at `addr`, if the model's CPU has it (module docs).
    pub(crate) fn decode_sys(&self, addr: u32) -> Option<SysReg> {
        match addr {
            IA32_TSC => Some(SysReg::Tsc),
            IA32_APIC_BASE => Some(SysReg::ApicBase),
            IA32_MISC_ENABLE if !is_amd(&self.cpuid) => Some(SysReg::MiscEnable),
            IA32_EFER => Some(SysReg::Efer),
            IA32_X2APIC_APICID if has_x2apic(&self.cpuid) => Some(SysReg::X2ApicId),
            IA32_CORE_CAPABILITIES if self.has_core_capabilities() => {
                Some(SysReg::CoreCapabilities)
            }
            MBA_CFG if self.has_mba_cfg() => Some(SysReg::MbaCfg),
            L3_IO_QOS_CFG if self.has_l3_io_qos_cfg() => Some(SysReg::L3IoQosCfg),
            RMID_SNC_CONFIG if self.has_rmid_snc_config() => Some(SysReg::RmidSncConfig),
            _ => None,
        }
    }

    /// RDMSR of a non-RDT register on the CPU at topology index `i`.
    pub(crate) fn read_sys(&self, i: usize, reg: SysReg) -> Option<u64> {
        let cpu = self.topology.cpus().get(i)?.cpu;
        Some(match reg {
            SysReg::Tsc => crate::num::f64_floor_u64(self.now.as_secs_f64() * self.freq_hz),
            SysReg::ApicBase => {
                let mut v = 0xFEE0_0000 | 1 << 11;
                if has_x2apic(&self.cpuid) {
                    v |= 1 << 10;
                }
                if cpu == LogicalCpu::new(0) {
                    v |= 1 << 8;
                }
                v
            }
            SysReg::MiscEnable => {
                let monitor = self.cpuid.cpuid(1, 0).is_some_and(|r| r.ecx >> 3 & 1 == 1);
                0x81_0089 | if monitor { 1 << 18 } else { 0 }
            }
            SysReg::Efer => 0xD01,
            SysReg::X2ApicId => u64::from(self.x2apic_id(cpu)?),
            SysReg::CoreCapabilities => {
                0x24 | if self.mba40 {
                    rdt_msr::regs::CORE_CAPABILITIES_MBA40
                } else {
                    0
                }
            }
            SysReg::MbaCfg => self.mba_cfg_of(i),
            SysReg::L3IoQosCfg => self.l3_io_qos_cfg_of(i),
            SysReg::RmidSncConfig => self.rmid_snc_config_of(i),
        })
    }

    /// WRMSR of a non-RDT register; `false` = #GP (module docs: only MBA_CFG bits 0-1).
    pub(crate) fn write_sys(&mut self, i: usize, reg: SysReg, v: u64) -> bool {
        match reg {
            SysReg::MbaCfg if v & !self.mba_cfg_bits() == 0 => {
                let Some(p) = self.topology.cpus().get(i) else {
                    return false;
                };
                self.mba_cfg.insert(p.package, v);
                self.recompute();
                true
            }
            SysReg::L3IoQosCfg if v & !0b11 == 0 => {
                let Some(p) = self.topology.cpus().get(i) else {
                    return false;
                };
                self.l3_io_qos_cfg.insert(p.package, v);
                true
            }
            SysReg::RmidSncConfig if v & !1 == 0 => {
                let Some(p) = self.topology.cpus().get(i) else {
                    return false;
                };
                self.rmid_snc_config.insert(p.package, v);
                self.recompute();
                true
            }
            _ => false,
        }
    }

    /// Whether the model has MBA_CFG (module docs): Intel linear MBA with more than 8
    /// classes (MBA 2.0) or per-thread controls, or MBA 4.0.
    fn has_mba_cfg(&self) -> bool {
        self.mba40
            || self.caps.mba.get().is_some_and(|m| match m.kind {
                rdt_core::MbaKind::IntelDelay { per_thread, .. } => per_thread || m.num_classes > 8,
                rdt_core::MbaKind::AmdBandwidth { .. } => false,
            })
    }

    /// The MBA_CFG bits a write may set: 0-1, and 2 with MBA 4.0.
    const fn mba_cfg_bits(&self) -> u64 {
        if self.mba40 { 0b111 } else { 0b11 }
    }

    /// Intel, CPUID.(7,0):EDX\[30\]: the CPU has IA32_CORE_CAPABILITIES.
    pub(crate) fn has_core_capabilities(&self) -> bool {
        !is_amd(&self.cpuid) && self.cpuid.cpuid(7, 0).is_some_and(|r| r.edx >> 30 & 1 == 1)
    }

    /// Intel's delay-based MBA.
    pub(crate) fn has_intel_mba(&self) -> bool {
        matches!(
            self.caps.mba.get().map(|m| m.kind),
            Some(rdt_core::MbaKind::IntelDelay { .. })
        )
    }

    /// Whether the model has MSR_RMID_SNC_CONFIG (module docs).
    pub(crate) fn has_rmid_snc_config(&self) -> bool {
        let Some(sig) = self.caps.signature else {
            return false;
        };
        let (family, model, _) = rdt_core::cpuid::fms(sig);
        !is_amd(&self.cpuid) && family == 6 && matches!(model, 0x6A | 0x8F | 0xCF | 0xAD | 0xAF)
    }

    /// MSR_RMID_SNC_CONFIG of the package of the CPU at topology index `i`: as written, else
    /// 0 on an SNC model (the kernel cleared it) and 1 (power-on) otherwise.
    pub(crate) fn rmid_snc_config_of(&self, i: usize) -> u64 {
        self.topology
            .cpus()
            .get(i)
            .and_then(|p| self.rmid_snc_config.get(&p.package))
            .copied()
            .unwrap_or(u64::from(self.snc <= 1))
    }

    /// Whether the model has IA32_L3_IO_QOS_CFG (module docs): an Intel L3 CAT that
    /// enumerates I/O RDT allocation.
    pub(crate) fn has_l3_io_qos_cfg(&self) -> bool {
        !is_amd(&self.cpuid)
            && self
                .cpuid
                .cpuid(0x10, 1)
                .is_some_and(|r| r.ecx >> 1 & 1 == 1)
    }

    /// IA32_L3_IO_QOS_CFG of the package of the CPU at topology index `i` (0 until written).
    pub(crate) fn l3_io_qos_cfg_of(&self, i: usize) -> u64 {
        self.topology
            .cpus()
            .get(i)
            .and_then(|p| self.l3_io_qos_cfg.get(&p.package))
            .copied()
            .unwrap_or(0)
    }

    /// MBA_CFG of the package of the CPU at topology index `i` (0 until written).
    pub(crate) fn mba_cfg_of(&self, i: usize) -> u64 {
        self.topology
            .cpus()
            .get(i)
            .and_then(|p| self.mba_cfg.get(&p.package))
            .copied()
            .unwrap_or(0)
    }

    /// The x2APIC id logical CPU `cpu` reports in CPUID (module docs): leaf 1FH or 0BH
    /// subleaf 0 EDX where the leaf is implemented (EBX\[15:0\] and ECX\[15:8\] non-zero, the
    /// leaf within CPUID.0:EAX), else CPUID.8000_001EH:EAX on AMD, else the initial APIC id
    /// CPUID.1:EBX\[31:24\]. `None` when the model has none of them for `cpu`.
    #[must_use]
    pub fn x2apic_id(&self, cpu: LogicalCpu) -> Option<u32> {
        let c = &self.cpuid;
        let max = c.cpuid_on(cpu, 0, 0).map_or(0, |r| r.eax);
        for leaf in [0x1F, 0xB] {
            if leaf > max {
                continue;
            }
            if let Some(r) = c
                .cpuid_on(cpu, leaf, 0)
                .filter(|r| r.ebx & 0xffff != 0 && r.ecx >> 8 & 0xff != 0)
            {
                return Some(r.edx);
            }
        }
        if is_amd(c) {
            let max_ext = c.cpuid_on(cpu, 0x8000_0000, 0).map_or(0, |r| r.eax);
            if max_ext >= 0x8000_001E
                && let Some(r) = c.cpuid_on(cpu, 0x8000_001E, 0)
            {
                return Some(r.eax);
            }
        }
        c.cpuid_on(cpu, 1, 0).map(|r| r.ebx >> 24)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rdt_msr::{MsrAddr, MsrIo};

    use super::*;

    fn cpu(n: u32) -> LogicalCpu {
        LogicalCpu::new(n)
    }

    fn rd(p: &mut SimPlatform, c: u32, addr: u32) -> Option<u64> {
        p.read(cpu(c), MsrAddr::new(addr)).ok()
    }

    /// SDM Vol. 3A 11.12.5: the x2APIC ID register (MSR 802H) holds the id CPUID.0BH:EDX
    /// reports; Linux `arch/x86/kernel/apic/x2apic_*.c` reads it as the APIC id.
    #[test]
    fn x2apic_id_msr_equals_cpuid_leaf_0b_edx_on_every_cpu() {
        for model in ["broadwell-ep", "skylake-sp", "sapphire-rapids"] {
            let mut p = SimPlatform::builtin(model).unwrap();
            let cpus: Vec<_> = p.topology().cpus().iter().map(|c| c.cpu).collect();
            let mut ids = Vec::new();
            for c in cpus {
                let leaf_b = p.cpuid().cpuid_on(c, 0xB, 0).unwrap().edx;
                let msr = p.read(c, MsrAddr::new(IA32_X2APIC_APICID)).unwrap();
                assert_eq!(msr, u64::from(leaf_b), "{model} cpu {c}");
                ids.push(msr);
            }
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), p.topology().cpus().len(), "{model}: ids unique");
        }
        // Broadwell-EP dump: CPU 1 is on socket 1 (x2APIC id 0x20).
        let mut p = SimPlatform::builtin("broadwell-ep").unwrap();
        assert_eq!(rd(&mut p, 1, IA32_X2APIC_APICID), Some(0x20));
    }

    /// The milan dump clears CPUID.1:ECX[21] (xAPIC mode): the x2APIC MSRs #GP there.
    #[test]
    fn x2apic_id_msr_faults_in_xapic_mode_and_apic_base_says_so() {
        let mut p = SimPlatform::builtin("milan").unwrap();
        assert_eq!(rd(&mut p, 0, IA32_X2APIC_APICID), None);
        assert_eq!(rd(&mut p, 0, IA32_APIC_BASE), Some(0xFEE0_0900));
        assert_eq!(rd(&mut p, 3, IA32_APIC_BASE), Some(0xFEE0_0800));
        // The id is still known from CPUID (8000_001EH:EAX on AMD).
        assert!(p.x2apic_id(cpu(127)).is_some_and(|id| id != 0));
        let mut q = SimPlatform::builtin("skylake-sp").unwrap();
        assert_eq!(rd(&mut q, 0, IA32_APIC_BASE), Some(0xFEE0_0D00));
        assert_eq!(rd(&mut q, 5, IA32_APIC_BASE), Some(0xFEE0_0C00));
    }

    /// SDM Vol. 4 (IA32_CORE_CAPABILITIES where CPUID.(7,0):EDX[30]; MBA_CFG on MBA 2.0
    /// parts); pqos `hw_cap_mba_discover` reads MBA_CFG on a 15-class part and fails MBA
    /// discovery when it cannot.
    #[test]
    fn sapphire_rapids_has_core_capabilities_and_mba_cfg_and_skylake_neither() {
        let mut p = SimPlatform::builtin("sapphire-rapids").unwrap();
        assert_eq!(rd(&mut p, 0, IA32_CORE_CAPABILITIES), Some(0x24));
        assert_eq!(rd(&mut p, 0, MBA_CFG), Some(0));
        p.write(cpu(0), MsrAddr::new(MBA_CFG), MBA_CFG_MIN).unwrap();
        assert_eq!(rd(&mut p, 0, MBA_CFG), Some(1));
        assert!(p.write(cpu(0), MsrAddr::new(MBA_CFG), 0x4).is_err());
        assert!(
            p.write(cpu(0), MsrAddr::new(IA32_CORE_CAPABILITIES), 0)
                .is_err()
        );
        let mut s = SimPlatform::builtin("skylake-sp").unwrap();
        assert_eq!(rd(&mut s, 0, IA32_CORE_CAPABILITIES), None);
        assert_eq!(rd(&mut s, 0, MBA_CFG), None, "MBA 1.0: 8 classes");
    }

    /// IA32_L3_IO_QOS_CFG exists only where the L3 CAT enumerates I/O RDT allocation
    /// (CPUID.(10H,1):ECX\[1\], which `set_io_rdt` patches in): per package, bits 0-1.
    #[test]
    fn l3_io_qos_cfg_follows_set_io_rdt_per_package() {
        let mut p = SimPlatform::builtin("sapphire-rapids").unwrap();
        assert_eq!(
            rd(&mut p, 0, L3_IO_QOS_CFG),
            None,
            "no captured part has it"
        );
        assert!(!p.capabilities().l3_cat.get().unwrap().io_rdt);
        assert!(p.set_io_rdt(true));
        assert!(p.capabilities().l3_cat.get().unwrap().io_rdt);
        assert_eq!(p.cpuid().cpuid(0x10, 1).map(|r| r.ecx & 2), Some(2));
        let cpus = p.topology().cpus().to_vec();
        let pkg0 = cpus.iter().find(|c| c.cpu == cpu(0)).unwrap().package;
        let same = cpus
            .iter()
            .find(|c| c.package == pkg0 && c.cpu != cpu(0))
            .unwrap()
            .cpu;
        let other = cpus.iter().find(|c| c.package != pkg0).unwrap().cpu;
        assert_eq!(rd(&mut p, 0, L3_IO_QOS_CFG), Some(0));
        p.write(cpu(0), MsrAddr::new(L3_IO_QOS_CFG), 3).unwrap();
        assert_eq!(
            rd(&mut p, same.get(), L3_IO_QOS_CFG),
            Some(3),
            "the package's"
        );
        assert_eq!(
            rd(&mut p, other.get(), L3_IO_QOS_CFG),
            Some(0),
            "the other package's"
        );
        assert!(p.write(cpu(0), MsrAddr::new(L3_IO_QOS_CFG), 4).is_err());
        assert!(!p.set_io_rdt(false));
        assert_eq!(rd(&mut p, 0, L3_IO_QOS_CFG), None);
        assert_eq!(p.cpuid().cpuid(0x10, 1).map(|r| r.ecx & 2), Some(0));
        let mut g = SimPlatform::builtin("genoa").unwrap();
        assert!(!g.set_io_rdt(true), "AMD");
        assert_eq!(rd(&mut g, 0, L3_IO_QOS_CFG), None);
    }

    /// SDM Vol. 3B 18.19 (MBA): with per-core MBA the core applies the larger of its
    /// threads' delays; MBA_CFG bit 0 makes it the smaller.
    #[test]
    fn a_cores_threads_share_the_larger_delay_unless_mba_cfg_says_min() {
        let mut p = SimPlatform::builtin("sapphire-rapids").unwrap();
        let me = p
            .topology()
            .cpus()
            .iter()
            .find(|c| c.cpu == cpu(2))
            .copied()
            .unwrap();
        let sib = p
            .topology()
            .cpus()
            .iter()
            .find(|c| c.cpu != me.cpu && c.package == me.package && c.core == me.core)
            .map(|c| c.cpu)
            .unwrap();
        let traffic = |p: &SimPlatform| p.activity(cpu(2)).unwrap().traffic_bytes_per_s;
        let free = traffic(&p);
        // COS1 = 50 % (delay 50) on CPU 2 only; its sibling stays in COS0 (delay 0)
        p.write(cpu(2), MsrAddr::new(0xD51), 50).unwrap();
        p.write(cpu(2), MsrAddr::new(0xC8F), 1 << 32).unwrap();
        let max_mode = traffic(&p);
        assert!(max_mode < free * 0.9, "{max_mode} vs {free}");
        p.write(cpu(2), MsrAddr::new(MBA_CFG), MBA_CFG_MIN).unwrap();
        assert!(
            (traffic(&p) - free).abs() < 1.0,
            "min of 50 and 0: unthrottled"
        );
        p.write(sib, MsrAddr::new(0xC8F), 1 << 32).unwrap();
        assert!((traffic(&p) - max_mode).abs() < 1.0, "both threads in COS1");
    }

    #[test]
    fn tsc_follows_the_virtual_clock_at_the_base_frequency() {
        let mut p = SimPlatform::builtin("skylake-sp").unwrap();
        let t0 = rd(&mut p, 0, IA32_TSC).unwrap();
        p.advance(Duration::from_millis(10));
        let t1 = rd(&mut p, 3, IA32_TSC).unwrap();
        // CPUID.16H:EAX = 2300 MHz: 10 ms = 23 million cycles.
        assert_eq!(t1 - t0, 23_000_000);
        assert!(p.write(cpu(0), MsrAddr::new(IA32_TSC), 0).is_err());
    }

    #[test]
    fn misc_enable_is_intel_only_and_efer_is_long_mode() {
        let mut p = SimPlatform::builtin("broadwell-ep").unwrap();
        // CPUID.1:ECX[3] (MONITOR) is set on the E5-2650L v4.
        assert_eq!(rd(&mut p, 0, IA32_MISC_ENABLE), Some(0x85_0089));
        assert_eq!(rd(&mut p, 0, IA32_EFER), Some(0xD01));
        let mut m = SimPlatform::builtin("milan").unwrap();
        assert_eq!(rd(&mut m, 0, IA32_MISC_ENABLE), None);
        assert_eq!(rd(&mut m, 0, IA32_EFER), Some(0xD01));
        assert!(m.write(cpu(0), MsrAddr::new(IA32_EFER), 0xD01).is_err());
    }

    /// MSR_RMID_SNC_CONFIG (`arch_mon_domain_online`): cleared on the SNC model as Linux
    /// leaves it, so a node-1 CPU counts RMID r as r + RMIDs/2, and the MSR backend sums the
    /// nodes' counters; set (legacy mode), RMID r counts as r and the backend does not split.
    #[test]
    fn rmid_snc_config_decides_where_a_node_1_cpu_counts_and_the_msr_backend_follows() {
        use rdt_core::{Backend, BackendExt, CpuSet, MonEvents};
        assert_eq!(
            rd(
                &mut SimPlatform::builtin("skylake-sp").unwrap(),
                0,
                RMID_SNC_CONFIG
            ),
            None
        );
        assert_eq!(
            rd(
                &mut SimPlatform::builtin("sapphire-rapids").unwrap(),
                0,
                RMID_SNC_CONFIG
            ),
            Some(1),
            "power-on legacy mode without SNC"
        );
        let mut p = SimPlatform::builtin("sapphire-rapids-snc2").unwrap();
        assert_eq!(rd(&mut p, 0, RMID_SNC_CONFIG), Some(0));
        // a busy CPU on the second node of package 0's L3
        let node1 = p
            .topology()
            .cpus()
            .iter()
            .find(|c| c.package == 0 && c.node == 1)
            .map(|c| c.cpu)
            .unwrap();
        let scenario = format!(
            r#"{{"workloads": [{{"cpus": "{node1}", "working_set_mib": 512, "traffic_mibps": 4000}}]}}"#
        );
        for legacy in [false, true] {
            let sim = crate::SimHandle::new(SimPlatform::builtin("sapphire-rapids-snc2").unwrap());
            sim.lock().set_scenario(&scenario.parse().unwrap()).unwrap();
            if legacy {
                for c in [0, 80] {
                    let mut h = sim.clone();
                    rdt_msr::MsrIo::write(&mut h, cpu(c), MsrAddr::new(RMID_SNC_CONFIG), 1)
                        .unwrap();
                }
            }
            let (caps, topo) = {
                let p = sim.lock();
                (p.capabilities().clone(), p.topology().clone())
            };
            let mut b = rdt_msr::MsrBackend::new(sim.clone(), caps, topo, rdt_core::NoPmu).unwrap();
            let g = b
                .start_monitoring(&CpuSet::from_iter([node1]), MonEvents::MBM_TOTAL)
                .unwrap();
            b.poll().unwrap();
            sim.lock().advance(Duration::from_secs(1));
            b.poll().unwrap();
            let bytes = b.values(g).unwrap().mbm_total_delta_bytes.unwrap();
            // reading RMID r alone (the node-0 counter) would give 0 in sharing mode
            assert!(bytes > 1 << 30, "legacy {legacy}: {bytes} bytes in 1 s");
        }
    }
}
