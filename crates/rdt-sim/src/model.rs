//! The workload model: how cache capacity, memory traffic and IPC follow from the allocation.
//!
//! The model is a steady state: it depends only on the current registers and the scenario,
//! is recomputed whenever either changes, and is integrated over time by
//! [`crate::SimPlatform::advance`]. It is deterministic (no randomness, fixed iteration order).
//!
//! # Cache capacity (per L3 domain)
//! The domain's capacity `C` (ways × way size from CPUID leaf 4 / 8000_001DH) is cut into
//! `B` equal portions, one per capacity-bitmask bit (`B` = CBM length; on all built-in
//! models `B` equals the number of ways, so a portion is one way: 1.75 MiB on broadwell-ep).
//! Without L3 CAT, `B = 1`.
//!
//! Each CPU `c` of the domain has a portion mask `M_c` (the L3 CBM of its COS, from
//! IA32_PQR_ASSOC\[63:32\]; the data mask 0xC90 + 2·COS while CDP is on; every portion when
//! its COS has no mask register), a working set `W_c` (bytes) and a pressure `p_c`, its L3
//! access rate in bytes/s × utilization. Occupancies `O_c` come from water-filling:
//!
//! 1. every portion `b` with capacity left `R_b` offers each CPU still filling that may use it
//!    the share `R_b · p_c / Σ p` (sum over the CPUs still filling that may use `b`);
//! 2. a CPU whose offers add up to more than it still needs (`W_c - O_c`) takes only what it
//!    needs, proportionally from each portion, and stops filling;
//! 3. repeat until no CPU stopped in a round (then all capacity on offer was taken).
//!
//! So a CPU never holds more than its working set, capacity a full CPU does not take goes to
//! the others, and among CPUs that want more, capacity is split in proportion to pressure.
//!
//! # Misses, memory traffic and throttling (per CPU)
//! - miss fraction `m = max(MISS_FLOOR, 1 - O/W)` ([`MISS_FLOOR`] = 0.05; `m = MISS_FLOOR`
//!   for an empty working set);
//! - wanted memory traffic `T_w = p · m` (bytes/s);
//! - MBA throttle `θ`: Intel `θ = (100 - delay) / 100` with the delay of the CPU's COS in its
//!   domain (0xD50 + COS), `T = θ · T_w`; AMD `T = min(T_w, units · 1/8 GB/s)` with
//!   1/8 GB/s = 125 000 000 bytes/s (0xC000_0200 + COS; `2^width` units = no limit),
//!   `θ = T / T_w`. A COS without an MBA register is not throttled;
//! - achieved memory traffic `T`, of which `local_fraction · T` is local (MBM local) and all of
//!   it counts as total (MBM total);
//! - IPC `= ipc / (1 + K · m / θ)` with [`MISS_PENALTY`] `K` = 1: the memory-stall part of a
//!   cycle grows with the miss fraction and stretches when throttled;
//! - unhalted cycles/s `= f · utilization` with `f` the model's base frequency, instructions/s
//!   `= IPC · cycles/s`, LLC misses/s `= T / 64` (64-byte lines), LLC references/s `= p / 64`.
//!
//! # Host tasks
//! A host thread that resctrl placed in a group ([`crate::resctrl`], "Host tasks") runs the
//! [`host_task_workload`] for the share `u` of wall time it used a CPU over the last sample
//! (from its `utime + stime` in `/proc/<tid>/stat`): utilization `u`, so its cycles are
//! `f · u` per second (`f` per CPU-second), and, per CPU-second, [`HOST_TASK_TRAFFIC`] bytes of
//! L3 accesses. It does not take part in the water-filling of the CPUs' workloads: its
//! occupancy is `u · min(W, C)` with `W` = [`HOST_TASK_WORKING_SET`] and `C` the capacity of
//! its class's L3 mask in the domain (portions × portion size), so a busy task in a group
//! with 2 ways holds at most 2 ways; misses, memory traffic (after its class's MBA throttle)
//! and IPC then follow from the formulas above. A task busy the whole interval on
//! skylake-sp (11 ways of 2.25 MiB): occupancy 8 MiB, 5 % misses, ~100 MiB/s of
//! memory traffic, IPC 1.43; squeezed into one way: occupancy 2.25 MiB, 72 % misses,
//! ~1.4 GiB/s, IPC 0.87.
//!
//! # Monitoring
//! The occupancy of an RMID in a domain is the sum of `O_c` over the domain's CPUs whose
//! IA32_PQR_ASSOC\[9:0\] currently holds that RMID, in units of the upscaling factor (rounded
//! down). MBM counters accumulate `T · dt` (total) and `local_fraction · T · dt` (local) into
//! the counter of (the CPU's L3 domain, its current RMID), in upscaling-factor units, and wrap
//! at `2^counter_width`.
//!
//! # The seed paper's scenario on broadwell-ep
//! 2 × 35 MiB L3 (20 ways × 1.75 MiB); even CPUs on socket 0, odd on socket 1 (x2APIC ids
//! of the dump), so the pipeline (CPUs 2-7, 4 MiB and 400 MiB/s each) and the thrasher
//! (CPUs 8-10, 512 MiB and 12000 MiB/s each) meet in both L3 domains. With everything in
//! COS0 the thrasher takes nearly all of both caches (65.1 MiB of 70) and the pipeline's RMID
//! occupancy is 4.8 MiB of its 24 MiB working set (paper: 23 MB -> 4.5 MB); with COS1 =
//! 0xffe00 on 2-7 and COS2 = 0x3 on 8-10 the pipeline holds its whole 24 MiB (11 ways =
//! 19.25 MiB per domain ≥ its 12 MiB there) and the thrasher 6.9 MiB (2 ways per domain). The
//! pipeline's miss fraction goes from 0.86/0.74 (socket 0/1) to 0.05, its memory traffic from
//! ~320 to 20 MiB/s per CPU and its IPC from ~1.0 to 1.71. (The paper's CPU had 1.25 MB ways;
//! the E5-2650L v4 has 1.75 MiB ways, so 11 ways hold 19.25 MiB, not 13.75 MB.)

/// Lowest miss fraction: compulsory and conflict misses remain when the whole working set
/// fits.
pub const MISS_FLOOR: f64 = 0.05;

/// `K` in `IPC = ipc / (1 + K · m / θ)`: at `m = 1` a CPU runs at half its all-hit IPC.
/// Chosen so the paper's pipeline loses ~43% IPC when squeezed (paper: 16 -> 9.8 Mpps).
pub const MISS_PENALTY: f64 = 1.0;

/// Bytes per cache line (LLC misses = memory traffic / line size).
pub const LINE_BYTES: f64 = 64.0;

/// Bytes/s of one AMD bandwidth-limit unit (1/8 GB/s, decimal GB).
pub const AMD_UNIT_BYTES_PER_S: f64 = 125_000_000.0;

/// One CPU's claim on its L3 domain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Claim {
    /// Working set, bytes.
    pub working_set: f64,
    /// Pressure, bytes/s.
    pub pressure: f64,
    /// Portion mask (bit b = portion b).
    pub mask: u64,
}

/// Water-fills `portions` portions of `portion_bytes` each among `claims` (see module docs).
/// Returns the occupancy in bytes of each claim, in order.
pub(crate) fn water_fill(portion_bytes: f64, portions: u32, claims: &[Claim]) -> Vec<f64> {
    let nb = portions.min(64) as usize;
    let n = claims.len();
    let mut occ = vec![0.0; n];
    let mut need: Vec<f64> = claims.iter().map(|c| c.working_set.max(0.0)).collect();
    let mut cap = vec![portion_bytes; nb];
    let mut active: Vec<bool> = claims
        .iter()
        .map(|c| c.working_set > 0.0 && c.pressure > 0.0 && c.mask != 0)
        .collect();
    let bits = |mask: u64| (0..nb).filter(move |b| mask & (1 << b) != 0);
    for _ in 0..=n {
        let mut psum = vec![0.0; nb];
        for (c, _) in claims.iter().zip(&active).filter(|(_, a)| **a) {
            for b in bits(c.mask) {
                psum[b] += c.pressure;
            }
        }
        // Each active claim's total offer, and whether it must be scaled down to its need.
        let mut take = vec![0.0; n];
        let mut stopped = false;
        for i in (0..n).filter(|&i| active[i]) {
            let c = &claims[i];
            let offer: f64 = bits(c.mask)
                .filter(|&b| psum[b] > 0.0)
                .map(|b| cap[b] * c.pressure / psum[b])
                .sum();
            take[i] = if offer > need[i] {
                stopped = true;
                need[i] / offer
            } else {
                1.0
            };
        }
        let mut used = vec![0.0; nb];
        let filling: Vec<usize> = (0..n).filter(|&i| active[i]).collect();
        for i in filling {
            let c = &claims[i];
            let mut got = 0.0;
            for b in bits(c.mask).filter(|&b| psum[b] > 0.0) {
                let g = cap[b] * c.pressure / psum[b] * take[i];
                used[b] += g;
                got += g;
            }
            occ[i] += got;
            need[i] = (need[i] - got).max(0.0);
            if take[i] < 1.0 || need[i] <= 0.0 {
                active[i] = false;
            }
        }
        for (c, u) in cap.iter_mut().zip(&used) {
            *c = (*c - u).max(0.0);
        }
        if !stopped || !active.iter().any(|a| *a) {
            break;
        }
    }
    occ
}

/// How a CPU's memory traffic is limited.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Throttle {
    /// Not limited.
    None,
    /// Intel MBA: traffic scaled by this factor (0..=1).
    Scale(f64),
    /// AMD MBA: traffic capped at this many bytes/s.
    Cap(f64),
}

/// What one CPU is doing in the current steady state. Rates are per second of simulated time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuActivity {
    /// L3 bytes this CPU's data occupies.
    pub occupancy_bytes: f64,
    /// Share of L3 accesses that miss (0..=1).
    pub miss_fraction: f64,
    /// Achieved memory traffic, bytes/s (after MBA throttling).
    pub traffic_bytes_per_s: f64,
    /// Local part of [`Self::traffic_bytes_per_s`], bytes/s.
    pub local_bytes_per_s: f64,
    /// MBA throttle factor θ (achieved / wanted traffic, 1 when not throttled).
    pub throttle: f64,
    /// Instructions per unhalted cycle.
    pub ipc: f64,
    /// Unhalted cycles per second.
    pub cycles_per_s: f64,
    /// Instructions retired per second.
    pub instructions_per_s: f64,
    /// LLC misses per second.
    pub llc_misses_per_s: f64,
    /// LLC references (L3 accesses) per second.
    pub llc_references_per_s: f64,
}

/// Computes a CPU's activity from its workload, its occupancy and its throttle.
pub(crate) fn activity(
    w: &crate::Workload,
    occupancy: f64,
    throttle: Throttle,
    freq_hz: f64,
) -> CpuActivity {
    let pressure = w.traffic_bytes_per_s * w.utilization;
    let miss = if w.working_set_bytes > 0.0 {
        (1.0 - occupancy / w.working_set_bytes).clamp(MISS_FLOOR, 1.0)
    } else {
        MISS_FLOOR
    };
    let wanted = pressure * miss;
    let achieved = match throttle {
        Throttle::None => wanted,
        Throttle::Scale(s) => wanted * s.clamp(0.0, 1.0),
        Throttle::Cap(c) => wanted.min(c.max(0.0)),
    };
    let theta = if wanted > 0.0 { achieved / wanted } else { 1.0 };
    // θ = 0 (AMD limit 0) stalls the memory part completely; keep IPC finite and tiny.
    let ipc = w.ipc / (1.0 + MISS_PENALTY * miss / theta.max(1e-6));
    let cycles = freq_hz * w.utilization;
    CpuActivity {
        occupancy_bytes: occupancy,
        miss_fraction: miss,
        traffic_bytes_per_s: achieved,
        local_bytes_per_s: achieved * w.local_fraction,
        throttle: theta,
        ipc,
        cycles_per_s: cycles,
        instructions_per_s: cycles * ipc,
        llc_misses_per_s: achieved / LINE_BYTES,
        llc_references_per_s: pressure / LINE_BYTES,
    }
}

/// [`host_task_workload`]'s working set, bytes (8 MiB).
pub const HOST_TASK_WORKING_SET: f64 = 8.0 * 1024.0 * 1024.0;

/// [`host_task_workload`]'s L3 accesses per CPU-second, bytes (2 GiB).
pub const HOST_TASK_TRAFFIC: f64 = 2.0 * 1024.0 * 1024.0 * 1024.0;

/// The workload of a host task busy `cpu_share` (0..=1) of the time (module docs, "Host
/// tasks"): [`HOST_TASK_WORKING_SET`], [`HOST_TASK_TRAFFIC`] per CPU-second, all of it local,
/// IPC 1.5 when every access hits.
#[must_use]
pub fn host_task_workload(cpu_share: f64) -> crate::Workload {
    crate::Workload {
        name: Some("host task".into()),
        working_set_bytes: HOST_TASK_WORKING_SET,
        traffic_bytes_per_s: HOST_TASK_TRAFFIC,
        local_fraction: 1.0,
        ipc: 1.5,
        utilization: if cpu_share.is_finite() {
            cpu_share.clamp(0.0, 1.0)
        } else {
            0.0
        },
    }
}

/// What a host task busy `cpu_share` of the time does in a class whose L3 mask holds
/// `capacity` bytes in the domain (module docs, "Host tasks").
pub(crate) fn host_task_activity(
    cpu_share: f64,
    capacity: f64,
    throttle: Throttle,
    freq_hz: f64,
) -> CpuActivity {
    let w = host_task_workload(cpu_share);
    let occupancy = w.utilization * w.working_set_bytes.min(capacity.max(0.0));
    let mut a = activity(&w, occupancy / w.utilization.max(1e-9), throttle, freq_hz);
    a.occupancy_bytes = occupancy;
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1024.0 * 1024.0;

    fn claim(ws_mib: f64, p: f64, mask: u64) -> Claim {
        Claim {
            working_set: ws_mib * MIB,
            pressure: p,
            mask,
        }
    }

    #[test]
    fn capacity_is_split_by_pressure_when_nobody_fits() {
        let occ = water_fill(MIB, 4, &[claim(100.0, 1.0, 0xf), claim(100.0, 3.0, 0xf)]);
        assert!(
            (occ[0] - MIB).abs() < 1.0 && (occ[1] - 3.0 * MIB).abs() < 1.0,
            "{occ:?}"
        );
    }

    #[test]
    fn a_full_cpu_leaves_its_unused_share_to_the_others() {
        // 4 MiB: a small CPU with 10x the pressure needs only 0.5 MiB; the rest goes to the big one.
        let occ = water_fill(MIB, 4, &[claim(0.5, 10.0, 0xf), claim(100.0, 1.0, 0xf)]);
        assert!((occ[0] - 0.5 * MIB).abs() < 1.0);
        assert!((occ[1] - 3.5 * MIB).abs() < 1.0, "{occ:?}");
    }

    #[test]
    fn disjoint_masks_isolate_cpus() {
        let occ = water_fill(MIB, 4, &[claim(100.0, 1000.0, 0x3), claim(1.5, 1.0, 0xc)]);
        assert!((occ[0] - 2.0 * MIB).abs() < 1.0);
        assert!((occ[1] - 1.5 * MIB).abs() < 1.0, "{occ:?}");
    }

    #[test]
    fn total_occupancy_never_exceeds_capacity() {
        let claims: Vec<Claim> = (0..20)
            .map(|i| {
                claim(
                    f64::from(i % 5) + 0.25,
                    f64::from(i + 1),
                    (1u64 << (i % 7 + 1)) - 1,
                )
            })
            .collect();
        let occ = water_fill(MIB, 8, &claims);
        let sum: f64 = occ.iter().sum();
        assert!(sum <= 8.0 * MIB + 1.0, "{sum}");
        for (o, c) in occ.iter().zip(&claims) {
            assert!(*o <= c.working_set + 1e-6);
            assert!(*o <= f64::from(c.mask.count_ones()) * MIB + 1e-6);
        }
    }

    #[test]
    fn squeezed_cpu_misses_more_and_loses_ipc() {
        let w = crate::Workload::pipeline();
        let fits = activity(&w, w.working_set_bytes, Throttle::None, 1e9);
        let squeezed = activity(&w, w.working_set_bytes / 8.0, Throttle::None, 1e9);
        assert!((fits.miss_fraction - MISS_FLOOR).abs() < 1e-12);
        assert!(squeezed.traffic_bytes_per_s > 10.0 * fits.traffic_bytes_per_s);
        assert!(squeezed.ipc < 0.6 * fits.ipc);
    }

    #[test]
    fn throttling_scales_or_caps_traffic() {
        let w = crate::Workload::thrasher();
        let free = activity(&w, 0.0, Throttle::None, 1e9);
        let intel = activity(&w, 0.0, Throttle::Scale(0.3), 1e9);
        let amd = activity(&w, 0.0, Throttle::Cap(8.0 * AMD_UNIT_BYTES_PER_S), 1e9);
        assert!((intel.traffic_bytes_per_s - 0.3 * free.traffic_bytes_per_s).abs() < 1.0);
        assert!((amd.traffic_bytes_per_s - 1.0e9).abs() < 1.0);
        assert!(intel.ipc < free.ipc && amd.ipc < free.ipc);
    }
}
