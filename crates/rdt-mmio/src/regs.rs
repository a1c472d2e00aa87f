//! The MMIO registers of RDT 1.3 that the ERDT table locates: their bit layouts and how an
//! RMID, a memory region and a class of service select one register in a block
//! ("register indexing function" version 1, the only one defined). One place for the
//! simulator that serves these registers and the backend that reads them.
//!
//! Every register is 64 bits wide, little endian, at an 8-byte aligned address.
//!
//! # References
//! - Intel RDT Architecture Specification rev 1.3, ch. 3 (region-aware MBM/MBA registers) and
//!   ch. 4 (ERDT: CMRC, MMRC, MARC register indexing).
//! - Linux `arch/x86/kernel/cpu/resctrl/erdt.c` (`cmrc_index_function_1`,
//!   `mmrc_index_function_1`); intel-cmt-cat `lib/mmio.h`, `lib/mmio.c` (v26.03): the same
//!   formulas and bit masks, read for facts.

/// Size of one register block page, in bytes: ERDT gives register block sizes in 4 KiB pages.
pub const PAGE: u64 = 4096;

/// Width of every RDT MMIO register, in bytes.
pub const REG_BYTES: u64 = 8;

/// `RDT_CTRL` (at an RMDD's control register base): bit 2 selects the legacy "total" mode
/// of MBM/MBA (set: the MSR interface counts and throttles as before RDT 1.3; clear: region
/// mode through MMIO). intel-cmt-cat `RDT_CTRL_TME_*`.
pub const RDT_CTRL_TOTAL_MODE: u64 = 1 << 2;

/// Bit 63 of a counter register (`L3_CMT_RMID_n`, `MBM_REGION_m_RMID_n`, I/O counters): the
/// value is unavailable (RMID not tracked yet, or being reassigned).
pub const COUNTER_UNAVAILABLE: u64 = 1 << 63;

/// Bit 62 of a bandwidth counter register (`MBM_REGION_m_RMID_n`, `TOTAL_IO_BW_RMID_n`,
/// `IO_MISS_BW_RMID_n`): the counter overflowed (wrapped more than once since it was last
/// read, so the delta is not known).
pub const COUNTER_OVERFLOW: u64 = 1 << 62;

/// Bits 61:0 of a bandwidth counter: the count, in units of the MMRC/IBRD upscaling factor
/// (before the correction factor), wrapping at the table's counter width.
pub const BW_COUNT_MASK: u64 = (1 << 62) - 1;

/// Bits 62:0 of an occupancy counter: the count, in units of the CMRC upscaling factor.
pub const OCCUPANCY_COUNT_MASK: u64 = (1 << 63) - 1;

/// Width of one bandwidth field of an `MBA_{OPTIMAL,MIN,MAX}_BW_n` register, in bits: four
/// fields per register, one per memory region, at bits 8:0, 24:16, 40:32, 56:48.
pub const MBA_FIELD_BITS: u32 = 9;

/// The largest value of an MBA bandwidth field (`0x1ff`), in units of the MARC control
/// window.
pub const MBA_FIELD_MAX: u64 = (1 << MBA_FIELD_BITS) - 1;

/// Memory regions whose MBA fields share one register.
pub const MBA_REGIONS_PER_REG: u8 = 4;

/// Bit position of region `region`'s field within its `MBA_*_BW` register.
#[must_use]
pub const fn mba_field_shift(region: u8) -> u32 {
    (region % MBA_REGIONS_PER_REG) as u32 * 16
}

/// The bandwidth value of region `region` in an `MBA_*_BW` register value.
#[must_use]
pub const fn mba_field(reg: u64, region: u8) -> u16 {
    ((reg >> mba_field_shift(region)) & MBA_FIELD_MAX) as u16
}

/// `reg` with region `region`'s field replaced by `value` (masked to 9 bits), the other
/// regions' fields and reserved bits kept.
#[must_use]
pub const fn with_mba_field(reg: u64, region: u8, value: u16) -> u64 {
    let shift = mba_field_shift(region);
    (reg & !(MBA_FIELD_MAX << shift)) | ((value as u64 & MBA_FIELD_MAX) << shift)
}

/// Byte offset within an MBA register block of the register holding class `clos`'s field
/// for memory region `region`: 512 bytes per group of four regions, 8 bytes per class.
#[must_use]
pub const fn mba_offset(region: u8, clos: u32) -> u64 {
    (region / MBA_REGIONS_PER_REG) as u64 * 512 + clos as u64 * REG_BYTES
}

/// Byte offset within a CMRC block of the `L3_CMT_RMID_n` register of `rmid`: RMIDs come in
/// clumps of `clump_size` consecutive registers, clumps `clump_stride` bytes apart.
/// `None` when `clump_size` is 0 (the table parser refuses that).
#[must_use]
pub fn cmt_offset(rmid: u32, clump_size: u16, clump_stride: u16) -> Option<u64> {
    let size = u32::from(clump_size);
    if size == 0 {
        return None;
    }
    Some(u64::from(rmid / size) * u64::from(clump_stride) + u64::from(rmid % size) * REG_BYTES)
}

/// Byte offset within an MMRC block of the `MBM_REGION_m_RMID_n` register of `rmid` and
/// memory region `region`: RMIDs are spread over four 16 KiB blocks by bits 4:3 of the RMID,
/// eight consecutive RMIDs per 64 bytes, and each region's counters 2048 bytes apart.
#[must_use]
pub const fn mbm_offset(rmid: u32, region: u8) -> u64 {
    let block = ((rmid % 32) / 8) as u64 * 4 * PAGE;
    let within = ((rmid / 32) as u64 * 8 + (rmid % 8) as u64) * REG_BYTES + region as u64 * 2048;
    block + within
}

/// The RMID whose `L3_CMT_RMID_n` register is at byte `offset` of a CMRC block (the inverse
/// of [`cmt_offset`]), `None` for an offset between clumps or not on a register. `None`
/// also when clumps overlap (`clump_stride` below `clump_size` registers), where an offset
/// may belong to several RMIDs.
#[must_use]
pub fn cmt_rmid(offset: u64, clump_size: u16, clump_stride: u16) -> Option<u32> {
    let size = u64::from(clump_size);
    let stride = u64::from(clump_stride);
    if size == 0 || stride < size * REG_BYTES || !offset.is_multiple_of(REG_BYTES) {
        return None;
    }
    let (clump, within) = (offset / stride, (offset % stride) / REG_BYTES);
    if within >= size {
        return None;
    }
    u32::try_from(clump * size + within).ok()
}

/// The RMID and memory region whose `MBM_REGION_m_RMID_n` register is at byte `offset` of
/// an MMRC block (the inverse of [`mbm_offset`] for regions 0 to 7, the eight 2048-byte
/// sets of a 16 KiB block), `None` for an offset past the four blocks or not on a register.
#[must_use]
#[allow(clippy::cast_possible_truncation)] // region < 8 (within 16 KiB), RMID < 1024
pub const fn mbm_rmid_region(offset: u64) -> Option<(u32, u8)> {
    let block_bytes = 4 * PAGE;
    let block = offset / block_bytes;
    if block >= 4 || !offset.is_multiple_of(REG_BYTES) {
        return None;
    }
    let within = offset % block_bytes;
    let region = (within / 2048) as u8;
    let index = (within % 2048) / REG_BYTES;
    let rmid = (index / 8) * 32 + block * 8 + index % 8;
    Some((rmid as u32, region))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mba_fields_are_nine_bits_sixteen_apart() {
        let reg = with_mba_field(with_mba_field(u64::MAX, 1, 0x1ff), 2, 5);
        assert_eq!(mba_field(reg, 1), 0x1ff);
        assert_eq!(mba_field(reg, 2), 5);
        assert_eq!(reg & (0x1ff << 32), 5 << 32);
        // reserved bits and the other regions' fields are kept
        assert_eq!(reg | (0x1ff << 32), u64::MAX);
        assert_eq!(with_mba_field(0, 3, 0xffff), 0x1ff << 48);
        assert_eq!(mba_field(with_mba_field(0, 4, 7), 0), 7);
        assert_eq!(mba_offset(5, 3), 512 + 24);
    }

    #[test]
    fn counter_offsets_follow_the_index_functions() {
        // clumps of 4 RMIDs, 64 bytes apart: RMID 9 is the second of the third clump
        assert_eq!(cmt_offset(9, 4, 64), Some(2 * 64 + 8));
        assert_eq!(cmt_offset(1, 0, 64), None);
        // RMID 0..7 in the first block, 8..15 in the second, 32 back in the first
        assert_eq!(mbm_offset(0, 0), 0);
        assert_eq!(mbm_offset(7, 0), 56);
        assert_eq!(mbm_offset(8, 0), 4 * PAGE);
        assert_eq!(mbm_offset(32, 0), 64);
        assert_eq!(mbm_offset(33, 1), 72 + 2048);
        assert_eq!(mbm_offset(31, 3), 3 * 4 * PAGE + 56 + 3 * 2048);
    }

    #[test]
    fn counter_offsets_invert_to_their_rmid() {
        for rmid in 0..1024 {
            for region in 0..8 {
                assert_eq!(
                    mbm_rmid_region(mbm_offset(rmid, region)),
                    Some((rmid, region)),
                    "RMID {rmid} region {region}"
                );
            }
            assert_eq!(
                cmt_rmid(cmt_offset(rmid, 8, 64).unwrap(), 8, 64),
                Some(rmid)
            );
            assert_eq!(
                cmt_rmid(cmt_offset(rmid, 3, 64).unwrap(), 3, 64),
                Some(rmid)
            );
        }
        assert_eq!(mbm_rmid_region(4 * 4 * PAGE), None, "past the four blocks");
        assert_eq!(mbm_rmid_region(12), None, "not on a register");
        // clumps of 3 registers, 64 bytes apart: bytes 24..64 are between clumps
        assert_eq!(cmt_rmid(24, 3, 64), None);
        assert_eq!(cmt_rmid(64, 3, 64), Some(3));
        assert_eq!(cmt_rmid(4, 3, 64), None);
        assert_eq!(cmt_rmid(0, 0, 64), None);
        assert_eq!(cmt_rmid(8, 8, 32), None, "overlapping clumps");
    }
}
