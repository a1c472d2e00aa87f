//! The register map: every MSR this backend touches, with its bit layout.
//!
//! # References
//! Intel SDM Vol. 3B, 18.18 (monitoring), 18.19 (allocation); Vol. 4, "Model-Specific
//! Registers", table 2-2 (architectural MSRs); AMD pub. 56375 (PQoS MSRs).

use crate::MsrAddr;

/// IA32_X2APIC_APICID (0x802): the CPU's x2APIC id in bits 31:0, readable while its local
/// APIC is in x2APIC mode (SDM Vol. 3A 11.12.1 "Detecting and Enabling x2APIC Mode",
/// table 11-6), equal to CPUID.(0BH/1FH,0):EDX on that CPU; a #GP (EIO from the msr device)
/// in xAPIC mode.
pub const IA32_X2APIC_APICID: MsrAddr = MsrAddr::new(0x802);
/// IA32_PQR_ASSOC (0xC8F): RMID in bits 9:0 (the field is architecturally up to 31:0; we
/// keep the 10 bits pqos uses plus what the CPU reports), COS in bits 63:32.
pub const IA32_PQR_ASSOC: MsrAddr = MsrAddr::new(0xC8F);
/// IA32_QM_EVTSEL (0xC8D): event id in bits 7:0, RMID in bits 41:32 (pqos writes
/// `rmid << 32 | event`).
pub const IA32_QM_EVTSEL: MsrAddr = MsrAddr::new(0xC8D);
/// IA32_QM_CTR (0xC8E): bit 63 Error, bit 62 Unavailable, bits 61:0 data (counts of the
/// upscaling factor).
pub const IA32_QM_CTR: MsrAddr = MsrAddr::new(0xC8E);
/// IA32_L3_QOS_CFG (0xC81): bit 0 enables L3 CDP.
pub const IA32_L3_QOS_CFG: MsrAddr = MsrAddr::new(0xC81);
/// IA32_L2_QOS_CFG (0xC82): bit 0 enables L2 CDP.
pub const IA32_L2_QOS_CFG: MsrAddr = MsrAddr::new(0xC82);
/// IA32_L3_IO_QOS_CFG (0xC83, pqos `PQOS_MSR_L3_IO_QOS_CFG`): present where the L3 CAT
/// or L3 monitoring enumerates non-CPU agents (I/O RDT: CPUID.(10H,1):ECX\[1\],
/// CPUID.(0FH,1):EAX\[9\]/\[10\]); bit 0 enables I/O RDT allocation in the L3
/// ([`L3_IO_QOS_CA_EN`]), bit 1 I/O RDT monitoring ([`L3_IO_QOS_MON_EN`]) (Intel RDT
/// architecture specification, I/O RDT; pqos lib/allocation.c `hw_alloc_reset_l3iordt`,
/// lib/hw_monitoring.c `hw_mon_reset_iordt`).
pub const IA32_L3_IO_QOS_CFG: MsrAddr = MsrAddr::new(0xC83);
/// IA32_L3_IO_QOS_CFG bit 0: L3 I/O RDT allocation enabled (pqos `PQOS_MSR_L3_IO_QOS_CA_EN`).
pub const L3_IO_QOS_CA_EN: u64 = 1;
/// IA32_L3_IO_QOS_CFG bit 1: L3 I/O RDT monitoring enabled (pqos `PQOS_MSR_L3_IO_QOS_MON_EN`).
pub const L3_IO_QOS_MON_EN: u64 = 1 << 1;
/// IA32_MBA_CFG (0xC84, pqos `PQOS_MSR_MBA_CFG`): on Intel MBA 2.0 and later (linear MBA
/// with more than 8 classes, or per-thread MBA) bit 0 selects which delay a core applies
/// when its threads' classes differ ([`MBA_CFG_MIN_DELAY`]), bit 1 legacy mode, bit 2 MBA
/// 4.0 (SDM Vol. 3B, 18.19.7).
pub const IA32_MBA_CFG: MsrAddr = MsrAddr::new(0xC84);
/// IA32_MBA_CFG bit 0: a core applies the smaller of its threads' delays (clear: the larger).
pub const MBA_CFG_MIN_DELAY: u64 = 1;
/// IA32_MBA_CFG bit 2: the MBA 4.0 extensions are enabled (pqos
/// `PQOS_MSR_MBA_CFG_MBA40_EN`, set and cleared by `hw_alloc_reset_mba40`).
pub const MBA_CFG_MBA40: u64 = 1 << 2;
/// IA32_CORE_CAPABILITIES (0xCF, pqos `PQOS_MSR_CORE_CAPABILITIES`): read-only; present where
/// CPUID.(7,0):EDX\[30\] is set.
pub const IA32_CORE_CAPABILITIES: MsrAddr = MsrAddr::new(0xCF);
/// IA32_CORE_CAPABILITIES bit 10: the core supports the MBA 4.0 extensions (pqos
/// `PQOS_MSR_CORE_CAPABILITIES_MBA40_EN`, `lib/hw_cap.c` `is_mba40_supported`).
pub const CORE_CAPABILITIES_MBA40: u64 = 1 << 10;
/// MSR_RMID_SNC_CONFIG (0xCA0, per package; Ice Lake server and later): bit 0 set (the
/// power-on value) is legacy mode, each RMID counting where it is used; clear is RMID
/// sharing mode, where Sub-NUMA Clustering divides the RMIDs between the nodes of an L3 and
/// a CPU on node k counts RMID r as r + k × (RMIDs / nodes). Linux clears it on SNC parts
/// (arch/x86/kernel/cpu/resctrl/monitor.c `arch_mon_domain_online`).
pub const MSR_RMID_SNC_CONFIG: MsrAddr = MsrAddr::new(0xCA0);
/// IA32_L3_QOS_MASK_0 (0xC90): L3 CBM of COS n at 0xC90 + n (CDP: data 2n, code 2n+1).
pub const IA32_L3_QOS_MASK_0: MsrAddr = MsrAddr::new(0xC90);
/// IA32_L2_QOS_MASK_0 (0xD10): L2 CBM of COS n at 0xD10 + n (CDP as for L3).
pub const IA32_L2_QOS_MASK_0: MsrAddr = MsrAddr::new(0xD10);
/// IA32_L2_QoS_Ext_BW_Thrtl_0 (0xD50): Intel MBA delay value of COS n at 0xD50 + n.
pub const IA32_MBA_THRTL_0: MsrAddr = MsrAddr::new(0xD50);
/// AMD L3 bandwidth limit of COS n at 0xC000_0200 + n, in 1/8 GB/s units.
pub const AMD_MBA_BW_0: MsrAddr = MsrAddr::new(0xC000_0200);
/// AMD slow-memory bandwidth limit of COS n at 0xC000_0280 + n.
pub const AMD_SMBA_BW_0: MsrAddr = MsrAddr::new(0xC000_0280);

/// IA32_QM_EVTSEL event id: L3 occupancy.
pub const EVT_LLC_OCCUPANCY: u64 = 1;
/// IA32_QM_EVTSEL event id: total memory bandwidth.
pub const EVT_MBM_TOTAL: u64 = 2;
/// IA32_QM_EVTSEL event id: local memory bandwidth.
pub const EVT_MBM_LOCAL: u64 = 3;

/// IA32_QM_CTR bit 63: the event or RMID is invalid.
pub const QM_CTR_ERROR: u64 = 1 << 63;
/// IA32_QM_CTR bit 62: no data for this RMID yet.
pub const QM_CTR_UNAVAILABLE: u64 = 1 << 62;
/// IA32_QM_CTR bits 61:0.
pub const QM_CTR_DATA: u64 = (1 << 62) - 1;

/// RMID field mask of IA32_PQR_ASSOC and IA32_QM_EVTSEL (bits 9:0 as pqos uses them).
pub const RMID_MASK: u64 = 0x3ff;

/// Builds an IA32_PQR_ASSOC value.
#[must_use]
pub const fn pqr_assoc(cos: u32, rmid: u32) -> u64 {
    ((cos as u64) << 32) | (rmid as u64 & RMID_MASK)
}

/// The COS field of an IA32_PQR_ASSOC value (bits 63:32).
#[must_use]
pub const fn pqr_cos(value: u64) -> u32 {
    (value >> 32) as u32
}

/// The RMID field of an IA32_PQR_ASSOC value (bits 9:0).
#[must_use]
#[allow(clippy::cast_possible_truncation)] // masked to 10 bits
pub const fn pqr_rmid(value: u64) -> u32 {
    (value & RMID_MASK) as u32
}

/// Builds an IA32_QM_EVTSEL value selecting `event` for `rmid`.
#[must_use]
pub const fn qm_evtsel(rmid: u32, event: u64) -> u64 {
    ((rmid as u64 & RMID_MASK) << 32) | (event & 0xff)
}

/// IA32_L3_QOS_CFG / IA32_L2_QOS_CFG bit 0: CDP enable (SDM Vol. 3B, 18.19.6.3).
pub const QOS_CFG_CDP_ENABLE: u64 = 1;

/// `value` (an IA32_PQR_ASSOC value) with the COS field, bits 63:32, set to `cos`; bits
/// 31:0 (RMID and reserved bits) kept. The read-modify-write of association.
#[must_use]
pub const fn pqr_with_cos(value: u64, cos: u32) -> u64 {
    (value & 0xffff_ffff) | ((cos as u64) << 32)
}

/// `value` (an IA32_PQR_ASSOC value) with the RMID field, bits 9:0, set to `rmid`; COS and
/// every other bit kept. The read-modify-write of monitoring start/stop.
#[must_use]
pub const fn pqr_with_rmid(value: u64, rmid: u32) -> u64 {
    (value & !RMID_MASK) | (rmid as u64 & RMID_MASK)
}

/// AMD L3_QOS_ABMC_CFG (0xC000_03FD, Linux `MSR_IA32_L3_QOS_ABMC_CFG`): configures one
/// assignable bandwidth monitoring counter (ABMC) of the L3 domain of the writing CPU; the
/// layout is [`AbmcCfg`]. A write with `cfg_en` applies the configuration and resets the
/// counter; every write selects the counter [`AMD_L3_QOS_ABMC_DSC`] describes.
/// Linux `resctrl_arch_config_cntr`, `resctrl_abmc_config_one_amd`
/// (arch/x86/kernel/cpu/resctrl/monitor.c); AMD pub. 56375 "ABMC".
pub const AMD_L3_QOS_ABMC_CFG: MsrAddr = MsrAddr::new(0xC000_03FD);
/// AMD L3_QOS_ABMC_DSC (0xC000_03FE, read-only): the configuration ([`AbmcCfg`]) of the
/// counter selected by the last write of [`AMD_L3_QOS_ABMC_CFG`] in the domain.
pub const AMD_L3_QOS_ABMC_DSC: MsrAddr = MsrAddr::new(0xC000_03FE);
/// AMD L3_QOS_EXT_CFG (0xC000_03FF, Linux `MSR_IA32_L3_QOS_EXT_CFG`): bit 0 enables ABMC
/// ([`EXT_CFG_ABMC`]), bit 1 SDCIAE ([`EXT_CFG_SDCIAE`], resctrl's `io_alloc`).
pub const AMD_L3_QOS_EXT_CFG: MsrAddr = MsrAddr::new(0xC000_03FF);
/// AMD QOS_EVT_CFG_0 (0xC000_0400, Linux `MSR_IA32_EVT_CFG_BASE`): BMEC, the memory
/// transactions (bits 6:0, [`rdt_core::mbm::MBM_TRANSACTIONS`]) the total-bandwidth event
/// counts in the L3 domain of the writing CPU; QOS_EVT_CFG_1 (0xC000_0401) those of the
/// local-bandwidth event (Linux `mon_event_config_index_get`: total 0, local 1).
pub const AMD_QOS_EVT_CFG_0: MsrAddr = MsrAddr::new(0xC000_0400);
/// L3_QOS_EXT_CFG bit 0: ABMC enable (Linux `ABMC_ENABLE_BIT`, `resctrl_abmc_set_one_amd`).
pub const EXT_CFG_ABMC: u64 = 1;
/// L3_QOS_EXT_CFG bit 1: SDCIAE enable (Linux `SDCIAE_ENABLE_BIT`, `_resctrl_sdciae_enable`).
pub const EXT_CFG_SDCIAE: u64 = 1 << 1;
/// IA32_QM_EVTSEL bit 31 (AMD ExtendedEvtID): with event id [`EVT_ABMC`] and a counter id in
/// bits 43:32 instead of an RMID, IA32_QM_CTR reads that ABMC counter (Linux
/// `ABMC_EXTENDED_EVT_ID`, `__cntr_id_read`).
pub const QM_EVTSEL_EXTENDED: u64 = 1 << 31;
/// IA32_QM_EVTSEL extended event id 1: L3CacheABMC (Linux `ABMC_EVT_ID`).
pub const EVT_ABMC: u64 = 1;

/// The IA32_QM_EVTSEL value that reads ABMC counter `cntr_id` (Linux `__cntr_id_read`:
/// `wrmsr(MSR_IA32_QM_EVTSEL, ABMC_EXTENDED_EVT_ID | ABMC_EVT_ID, cntr_id)`).
#[must_use]
pub const fn qm_evtsel_abmc(cntr_id: u32) -> u64 {
    ((cntr_id as u64 & 0xfff) << 32) | QM_EVTSEL_EXTENDED | EVT_ABMC
}

/// The fields of L3_QOS_ABMC_CFG and L3_QOS_ABMC_DSC (Linux `union l3_qos_abmc_cfg`,
/// arch/x86/kernel/cpu/resctrl/internal.h): `bw_type` bits 31:0, `bw_src` 43:32, `is_clos`
/// 47, `cntr_id` 52:48, `cntr_en` 62, `cfg_en` 63; bits 46:44 and 61:53 reserved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AbmcCfg {
    /// The memory transactions counted (a BMEC bitmask, bits 31:0).
    pub bw_type: u32,
    /// The RMID (or CLOSID with `is_clos`) whose traffic is counted (bits 43:32).
    pub bw_src: u32,
    /// `bw_src` is a CLOSID (bit 47).
    pub is_clos: bool,
    /// The counter (bits 52:48).
    pub cntr_id: u32,
    /// Counting enabled (bit 62).
    pub cntr_en: bool,
    /// Apply this configuration (bit 63); without it the write only selects `cntr_id` for
    /// L3_QOS_ABMC_DSC.
    pub cfg_en: bool,
}

impl AbmcCfg {
    /// The reserved bits (46:44 and 61:53): a write with any set faults.
    pub const RESERVED: u64 = (0b111 << 44) | (0x1ff << 53);

    /// The register value.
    #[must_use]
    pub const fn encode(self) -> u64 {
        self.bw_type as u64
            | ((self.bw_src as u64 & 0xfff) << 32)
            | ((self.is_clos as u64) << 47)
            | ((self.cntr_id as u64 & 0x1f) << 48)
            | ((self.cntr_en as u64) << 62)
            | ((self.cfg_en as u64) << 63)
    }

    /// The fields of a register value (reserved bits ignored).
    #[must_use]
    #[allow(clippy::cast_possible_truncation)] // each field masked to its width
    pub const fn decode(v: u64) -> Self {
        Self {
            bw_type: v as u32,
            bw_src: (v >> 32 & 0xfff) as u32,
            is_clos: v >> 47 & 1 == 1,
            cntr_id: (v >> 48 & 0x1f) as u32,
            cntr_en: v >> 62 & 1 == 1,
            cfg_en: v >> 63 & 1 == 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux `resctrl_arch_config_cntr` on counter 5, RMID 9, config 0x7f, assigned.
    #[test]
    fn abmc_cfg_fields_sit_where_the_kernel_union_puts_them() {
        let c = AbmcCfg {
            bw_type: 0x7f,
            bw_src: 9,
            is_clos: false,
            cntr_id: 5,
            cntr_en: true,
            cfg_en: true,
        };
        assert_eq!(c.encode(), 0xC005_0009_0000_007F);
        assert_eq!(AbmcCfg::decode(c.encode()), c);
        assert_eq!(qm_evtsel_abmc(5), 0x5_8000_0001);
    }

    #[test]
    fn pqr_read_modify_write_keeps_the_other_field() {
        let v = pqr_assoc(5, 17) | (1 << 20); // a reserved bit in 31:10 survives too
        assert_eq!(pqr_with_cos(v, 2), pqr_assoc(2, 17) | (1 << 20));
        assert_eq!(pqr_with_rmid(v, 3), pqr_assoc(5, 3) | (1 << 20));
        assert_eq!((pqr_cos(v), pqr_rmid(v)), (5, 17));
    }

    #[test]
    fn evtsel_puts_rmid_in_high_half_and_event_in_low_byte() {
        assert_eq!(qm_evtsel(7, EVT_MBM_LOCAL), 0x0000_0007_0000_0003);
    }
}

/// The uncore CHA performance monitors of Skylake-SP (CPU model 0x55), which pqos programs
/// for the PCIe LLC events (`lib/uncore_monitoring.c`; register layout in Intel's "Xeon
/// Processor Scalable Memory Family Uncore Performance Monitoring Reference Manual",
/// 2.2 "Caching/Home Agent (CHA) Performance Monitoring"). CHA `n` has a block of registers
/// at [`cha::CHA_PMON_BOX_CTL_0`] + [`cha::CHA_PMON_STRIDE`] × `n`; pqos uses CHA 0..3, one per
/// event.
pub mod cha {
    use crate::MsrAddr;

    /// CHA 0 unit (box) control, `C0_MSR_PMON_BOX_CTL` (0xE00; pqos
    /// `IAT_MSR_C_UNIT_CTRL`).
    pub const CHA_PMON_BOX_CTL_0: MsrAddr = MsrAddr::new(0xE00);
    /// Distance between the register blocks of two CHAs.
    pub const CHA_PMON_STRIDE: u32 = 0x10;
    /// Offset of counter control 0 (event select) in a CHA block (`Cn_MSR_PMON_CTL0`).
    pub const OFFSET_CTL0: u32 = 0x1;
    /// Offset of filter 1 in a CHA block (`Cn_MSR_PMON_BOX_FILTER1`).
    pub const OFFSET_FILTER1: u32 = 0x6;
    /// Offset of counter 0 in a CHA block (`Cn_MSR_PMON_CTR0`, 48 bits).
    pub const OFFSET_CTR0: u32 = 0x8;
    /// Number of counter registers (CTL0..3, CTR0..3) in a CHA block.
    pub const COUNTERS: u32 = 4;
    /// Counter width of `Cn_MSR_PMON_CTRx`, in bits.
    pub const COUNTER_WIDTH: u32 = 48;

    /// Box control: unfreeze the counters (bit 16 alone; pqos sets bit 16 in every box
    /// control value it writes, `UNIT_CTRL_UNFREEZE_COUNTER`).
    pub const BOX_CTL_UNFREEZE: u64 = 0x1_0000;
    /// Box control: freeze the counters (bit 8 `frz`; `UNIT_CTRL_FREEZE_COUNTER`).
    pub const BOX_CTL_FREEZE: u64 = 0x1_0100;
    /// Box control: reset the counters (bit 1 `rst_ctrs`) while frozen
    /// (`UNIT_CTRL_RESET_COUNTER`).
    pub const BOX_CTL_RESET_COUNTERS: u64 = 0x1_0102;
    /// Box control: reset the control registers (bit 0 `rst_ctrl`) while frozen; pqos's stop
    /// (`UNIT_CTRL_RESET_CONTROL`).
    pub const BOX_CTL_RESET_CONTROL: u64 = 0x1_0101;
    /// Box control bit 8: freeze the counters.
    pub const BOX_CTL_FRZ: u64 = 1 << 8;
    /// Box control bit 1: reset the counters.
    pub const BOX_CTL_RST_CTRS: u64 = 1 << 1;
    /// Box control bit 0: reset the control registers (event selects and filters).
    pub const BOX_CTL_RST_CTRL: u64 = 1;

    /// Event select bit 22: counter enable (pqos `LOCAL_COUNTER_ENABLE`).
    pub const CTL_ENABLE: u64 = 1 << 22;
    /// Event select code of `TOR_INSERTS` (table of requests inserts; pqos
    /// `IAT_EVENT_TOR_INSERTS`).
    pub const EVENT_TOR_INSERTS: u64 = 0x35;
    /// `TOR_INSERTS` unit mask pqos uses for its "LLC misses" events (0x24).
    pub const UMASK_MISS: u64 = 0x24;
    /// `TOR_INSERTS` unit mask pqos uses for its "LLC references" events (0x14).
    pub const UMASK_REF: u64 = 0x14;
    /// Filter 1 (opcode match) value pqos writes for the PCIe read events (0x43C33).
    pub const FILTER1_PCIE_READ: u64 = 0x4_3C33;
    /// Filter 1 (opcode match) value pqos writes for the PCIe write events (0x1004_9033).
    pub const FILTER1_PCIE_WRITE: u64 = 0x1004_9033;

    /// The box control register of CHA `cha`.
    #[must_use]
    pub const fn box_ctl(cha: u32) -> MsrAddr {
        CHA_PMON_BOX_CTL_0.offset(CHA_PMON_STRIDE * cha)
    }

    /// The event select value pqos writes: enable | umask << 8 | event (the `xtra` bits
    /// 63:32 are 0 for every event it uses).
    #[must_use]
    pub const fn event_select(umask: u64, event: u64) -> u64 {
        CTL_ENABLE | (umask & 0xff) << 8 | (event & 0xff)
    }
}
