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
/// IA32_MBA_CFG (0xC84, pqos `PQOS_MSR_MBA_CFG`): on Intel MBA 2.0 and later (linear MBA
/// with more than 8 classes, or per-thread MBA) bit 0 selects which delay a core applies
/// when its threads' classes differ ([`MBA_CFG_MIN_DELAY`]), bit 1 legacy mode, bit 2 MBA
/// 4.0 (SDM Vol. 3B, 18.19.7).
pub const IA32_MBA_CFG: MsrAddr = MsrAddr::new(0xC84);
/// IA32_MBA_CFG bit 0: a core applies the smaller of its threads' delays (clear: the larger).
pub const MBA_CFG_MIN_DELAY: u64 = 1;
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

#[cfg(test)]
mod tests {
    use super::*;

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
