//! The workload model: how cache capacity, memory traffic and IPC follow from the allocation.
//!
//! The model is a steady state: it depends only on the current registers and the scenario
//! at the current simulated time, is recomputed whenever either changes (a register write,
//! a new scenario, a workload's start, phase or stop on the clock), and is integrated over
//! time by [`crate::SimPlatform::advance`], piecewise between those changes. It is
//! deterministic (no randomness, fixed iteration order).
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
//! - miss fraction `m = max(μ, (1 - O/W)^γ)` ([`miss_fraction`]), with the workload's miss
//!   floor `μ` (default [`MISS_FLOOR`] = 0.05: compulsory and streamed accesses no capacity
//!   removes) and miss-curve exponent `γ` (default 1); `m = μ` for an empty working set.
//!   `γ = 1` says every byte of the working set is reused alike, so each cached byte saves
//!   as many misses; `γ > 1` says reuse is skewed (access density over the working set,
//!   hottest first, `∝ (1-x)^(γ-1)`), so the first bytes cached save the most, as in a
//!   cache-sensitive packet pipeline that runs at full speed in half its footprint;
//! - wanted memory traffic `T_w = p · m` (bytes/s);
//! - MBA throttle `θ`: Intel `θ = (100 - delay) / 100` with the delay of the CPU's COS in its
//!   domain (0xD50 + COS), `T = θ · T_w`; AMD: the limit `units · 1/8 GB/s`
//!   (1/8 GB/s = 125 000 000 bytes/s; 0xC000_0200 + COS; `2^width` units = no limit) bounds
//!   the total of all CPUs of the COS in the L3 domain (AMD APM Vol. 2, §19.4.5.2 "Using
//!   L3BE": "a limit on the total L3 external bandwidth consumed by all threads running with
//!   COS=n within the L3 cache QOS Domain"), so each CPU gets the share
//!   `cap_c = units · 1/8 GB/s · T_w,c / Σ T_w` and `T = min(T_w, cap_c)`, `θ = T / T_w`
//!   (`SimPlatform::recompute`; a class over its limit moves exactly the limit before
//!   memory latency, its CPUs slowed alike). A COS without an MBA register is not throttled;
//! - achieved memory traffic `T`, of which `local_fraction · T` is local (MBM local) and all of
//!   it counts as total (MBM total);
//! - IPC `= ipc / (1 + K · m · L / θ)` with [`MISS_PENALTY`] `K` = 1: the memory-stall part
//!   of a cycle grows with the miss fraction, stretches when throttled and with the memory
//!   latency factor `L` (1 on an unloaded memory domain; "Memory bandwidth" below);
//! - unhalted cycles/s `= f · utilization` with `f` the model's base frequency, instructions/s
//!   `= IPC · cycles/s`, LLC misses/s `= T / 64` (64-byte lines), LLC references/s `= p / 64`.
//!
//! # Memory bandwidth (per memory domain)
//! A memory domain is a NUMA node of the topology: a package, or a Sub-NUMA cluster. Its
//! peak `P` (bytes/s) is the scenario's `memory_peak_gbps`, else the package's
//! [`MEMORY_PEAKS`] entry (DRAM channels × transfers/s × 8 bytes, from the vendor's
//! specification; [`DEFAULT_MEMORY_PEAK`] for a model not listed) divided among the
//! package's nodes. A CPU's achieved traffic `T` goes `local_fraction` to its own node and
//! the rest in equal parts to the other nodes (on two packages: the other package's memory;
//! everything to its own node where there is one), the same split MBM's local/total shows.
//! On a model with memory regions (RDT 1.3, [`crate::mmio`]) each node's regions (DDR, CXL)
//! are domains of their own, each with its own peak, and a CPU's share of a node is split
//! further by its region split.
//!
//! The domain's demand `D` is the sum of what it receives; at utilization `ρ = D/P` it
//! serves a miss in `L(ρ)` times its idle latency ([`latency_factor`]):
//! `L = 1` up to the knee `ρ_k` ([`LATENCY_KNEE`] = 0.4), then
//! `L = 1 + a · (ρ - ρ_k) / (1 - ρ)` ([`LATENCY_SLOPE`] `a` = 1), at most
//! [`MAX_LATENCY_FACTOR`] = 100: 1.2 at 50 %, 2 at 70 %, 3 at 80 %, 6 at 90 %. The shape is
//! that of published loaded-latency curves (Intel Memory Latency Checker
//! `--loaded_latency` sweeps: flat until a large share of the peak, then a queueing rise that
//! makes the theoretical peak unreachable); the numbers are this model's choice, stated
//! here, not a measurement of any one part. A CPU's misses see `L_cpu` = the mix of its
//! domains' `L` by its traffic shares.
//!
//! A slower miss slows the CPU and so its traffic: with `b = K · m / θ`, IPC falls from
//! `ipc/(1+b)` to `ipc/(1+b·L)`, and instructions, L3 accesses, misses and traffic all
//! scale by `(1+b)/(1+b·L)` (an unthrottled streaming CPU, `m ≈ 1`, moves `2/(1+L)` of its
//! unloaded traffic). `L` and the traffic are solved together (`solve_memory`): per
//! domain, `L_d` is the root of `x - L(ρ_d(x))`, which rises with `x` (regula falsi,
//! Illinois variant, bracketed in `[1, 100]`), the domains in turn with the others fixed
//! (Gauss-Seidel) for at most 64 rounds or until no `L` moves by 1e-9; deterministic. When
//! every domain is below the knee at `L = 1` nothing is solved and the model is exactly the
//! one without bandwidth. The fixed point has `ρ < 1`, so achieved traffic stays below the
//! peak; should a domain still exceed its peak at `L = 100` (enormous access rates with
//! few misses), every CPU loading it is slowed in proportion to exactly the peak. MBA acts
//! before all this: it lowers `θ` and so the CPU's demand, which lowers `ρ` and every other
//! CPU's `L`. Host tasks (below) do not load the memory domains.
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
//! # The seed paper's scenario on skylake-sp (built-in `dpdk-pipeline`)
//! The scenarios in `crates/rdt-sim/scenarios/` ([`crate::BUILTIN_SCENARIOS`]) stand in for
//! the paper's Xeon E5-2628L v3 with `skylake-sp` (24.75 MiB of 11 ways ≈ its 25 MB, and MBA)
//! and the paper's 59.7 GB/s of memory; every workload on package 0. Statically: alone,
//! the pipeline holds 91.8 % of the L3 at 16.0 Mpps; with the aggressor, all in COS0, it
//! runs at 61.6 % holding 17.9 % (paper 61 %/18 %) while memory runs at ρ ≈ 0.6, `L` ≈ 1.5;
//! with the aggressor in 1 way and the pipeline in 6 (the paper's 2 and 11 of 20), 93.6 %
//! holding 54.3 % (paper 94 %/55 %): the rest is memory latency, which MBA on the
//! aggressor (delay 80 or 90) removes (100 % of alone). The calibration is in
//! `crates/rdt-sim/scenarios/README.md`.
//!
//! # The seed paper's scenario on broadwell-ep (the default scenario)
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
    /// AMD MBA: this CPU's traffic capped at this many bytes/s, its share of its class's
    /// limit in its L3 domain (the limit bounds the class's total there; module docs).
    Cap(f64),
}

impl Throttle {
    /// This throttle with the traffic it lets through further scaled by `scale` (0..=1; 1
    /// leaves it as it is): region-aware MBA (RDT 1.3, [`crate::mmio`]) on top of the
    /// class's MBA. `Scale(s)` becomes `Scale(s × scale)`; a cap becomes the cap scaled
    /// (no built-in model has both an AMD cap and region MBA).
    #[must_use]
    pub(crate) fn scaled(self, scale: f64) -> Self {
        let scale = if scale.is_nan() {
            1.0
        } else {
            scale.clamp(0.0, 1.0)
        };
        if scale >= 1.0 {
            return self;
        }
        match self {
            Self::None => Self::Scale(scale),
            Self::Scale(s) => Self::Scale(s * scale),
            Self::Cap(c) => Self::Cap(c * scale),
        }
    }
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
    /// `L`: how many times the idle memory latency this CPU's misses take, from the load on
    /// the memory domains they go to (1 when unloaded; module docs, "Memory bandwidth").
    pub memory_latency_factor: f64,
}

/// The miss fraction of workload `w` holding `occupancy` bytes of the L3:
/// `max(miss_floor, (1 - O/W)^γ)`, at most 1; `miss_floor` for an empty working set
/// (module docs).
#[must_use]
pub fn miss_fraction(w: &crate::Workload, occupancy: f64) -> f64 {
    let floor = w.miss_floor.clamp(0.0, 1.0);
    if w.working_set_bytes <= 0.0 {
        return floor;
    }
    let uncached = (1.0 - occupancy / w.working_set_bytes).clamp(0.0, 1.0);
    #[allow(clippy::float_cmp)] // the exact default: the linear curve, bit for bit
    let curve = if w.miss_curve_exponent == 1.0 {
        uncached
    } else {
        uncached.powf(w.miss_curve_exponent.max(0.0))
    };
    curve.max(floor)
}

/// `T_w = p · m`: the memory traffic (bytes/s) workload `w` wants holding `occupancy` bytes
/// of the L3, before MBA and memory latency (module docs).
#[must_use]
pub(crate) fn wanted_traffic(w: &crate::Workload, occupancy: f64) -> f64 {
    w.traffic_bytes_per_s * w.utilization * miss_fraction(w, occupancy)
}

/// A CPU's activity before memory-bandwidth contention: its inputs to
/// [`solve_memory`] and to [`Unloaded::at`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unloaded {
    /// The activity at the idle memory latency (`L = 1`).
    pub base: CpuActivity,
    /// `K · m / θ`: the memory-stall part of a cycle at `L = 1` (`b` in the module docs).
    pub stall: f64,
}

impl Unloaded {
    /// The activity when the CPU's misses take `latency` (≥ 1) times the idle latency:
    /// IPC `= ipc / (1 + b·L)`, traffic and every per-instruction rate scaled by
    /// `(1 + b) / (1 + b·L)` (module docs, "Memory bandwidth").
    #[must_use]
    pub fn at(&self, latency: f64) -> CpuActivity {
        let mut a = self.base;
        a.memory_latency_factor = latency;
        if latency <= 1.0 || self.stall <= 0.0 {
            return a;
        }
        let slow = (1.0 + self.stall) / (1.0 + self.stall * latency);
        a.ipc *= slow;
        a.instructions_per_s *= slow;
        a.traffic_bytes_per_s *= slow;
        a.local_bytes_per_s *= slow;
        a.llc_misses_per_s *= slow;
        a.llc_references_per_s *= slow;
        a
    }
}

/// Computes a CPU's activity from its workload, its occupancy and its throttle, at the idle
/// memory latency.
pub(crate) fn activity(
    w: &crate::Workload,
    occupancy: f64,
    throttle: Throttle,
    freq_hz: f64,
) -> CpuActivity {
    unloaded(w, occupancy, throttle, freq_hz).base
}

/// [`activity`] with the stall share [`solve_memory`] needs.
pub(crate) fn unloaded(
    w: &crate::Workload,
    occupancy: f64,
    throttle: Throttle,
    freq_hz: f64,
) -> Unloaded {
    let pressure = w.traffic_bytes_per_s * w.utilization;
    let miss = miss_fraction(w, occupancy);
    let wanted = wanted_traffic(w, occupancy);
    let achieved = match throttle {
        Throttle::None => wanted,
        Throttle::Scale(s) => wanted * s.clamp(0.0, 1.0),
        Throttle::Cap(c) => wanted.min(c.max(0.0)),
    };
    let theta = if wanted > 0.0 { achieved / wanted } else { 1.0 };
    // θ = 0 (AMD limit 0) stalls the memory part completely; keep IPC finite and tiny.
    let stall = MISS_PENALTY * miss / theta.max(1e-6);
    let ipc = w.ipc / (1.0 + stall);
    let cycles = freq_hz * w.utilization;
    Unloaded {
        base: CpuActivity {
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
            memory_latency_factor: 1.0,
        },
        stall,
    }
}

/// `ρ_k` of the loaded-latency curve: below this share of its peak, a memory domain serves
/// misses at its idle latency (module docs, "Memory bandwidth").
pub const LATENCY_KNEE: f64 = 0.4;

/// `a` of the loaded-latency curve `L(ρ) = 1 + a·(ρ - ρ_k)/(1 - ρ)`: twice the idle latency
/// at 70 % of the peak, three times at 80 %, six times at 90 %.
pub const LATENCY_SLOPE: f64 = 1.0;

/// The largest latency factor `L` (the curve's value at ρ ≈ 0.994): the queue of a
/// saturated domain is finite.
pub const MAX_LATENCY_FACTOR: f64 = 100.0;

/// The loaded-latency curve: how many times its idle latency a memory domain takes to serve
/// a miss at utilization `rho` (demand ÷ peak): 1 up to [`LATENCY_KNEE`], then
/// `1 + a·(ρ - ρ_k)/(1 - ρ)` ([`LATENCY_SLOPE`]), at most [`MAX_LATENCY_FACTOR`].
#[must_use]
pub fn latency_factor(rho: f64) -> f64 {
    if rho.is_nan() || rho <= LATENCY_KNEE {
        1.0
    } else if rho >= 1.0 {
        MAX_LATENCY_FACTOR
    } else {
        (1.0 + LATENCY_SLOPE * (rho - LATENCY_KNEE) / (1.0 - rho)).min(MAX_LATENCY_FACTOR)
    }
}

/// Peak memory bandwidth of one package of each built-in model, bytes/s: DRAM channels ×
/// transfers/s × 8 bytes, from the vendor's specification of the part the dump comes from.
/// A model not listed (a user's dump) gets [`DEFAULT_MEMORY_PEAK`].
pub const MEMORY_PEAKS: &[(&str, f64, &str)] = &[
    (
        "broadwell-ep",
        76.8e9,
        "Xeon E5-2650L v4: 4 channels DDR4-2400 (Intel ARK: 76.8 GB/s)",
    ),
    (
        "skylake-sp",
        128.0e9,
        "Xeon Gold 6140: 6 channels DDR4-2666 (Intel ARK; 6 x 21.33 GB/s)",
    ),
    (
        "milan",
        204.8e9,
        "EPYC 7763: 8 channels DDR4-3200 (AMD: 204.8 GB/s per socket)",
    ),
    (
        "sapphire-rapids",
        307.2e9,
        "Xeon Max 9460: 8 channels DDR5-4800 (Intel ARK; the HBM is not modelled)",
    ),
    (
        "sapphire-rapids-snc2",
        307.2e9,
        "Xeon Max 9460: 8 channels DDR5-4800, half of them per SNC node",
    ),
    (
        "genoa",
        460.8e9,
        "EPYC 9654: 12 channels DDR5-4800 (AMD: 460.8 GB/s per socket)",
    ),
    (
        "turin",
        576.0e9,
        "EPYC 9655: 12 channels DDR5-6000 (AMD: 576 GB/s per socket)",
    ),
];

/// Peak memory bandwidth of a package of a model not in [`MEMORY_PEAKS`], bytes/s: 6 channels
/// of DDR4-2666 (a two-socket server of the first RDT generations).
pub const DEFAULT_MEMORY_PEAK: f64 = 128.0e9;

/// Fixed-point rounds of [`solve_memory`] at most (each solves every domain once).
const MEMORY_ROUNDS: usize = 64;

/// Root-finding steps per domain and round at most (the Illinois variant of regula falsi
/// on `[1, MAX_LATENCY_FACTOR]`, which keeps the root bracketed; it stops once the bracket
/// is narrower than 1e-12).
const ROOT_STEPS: usize = 100;

/// One CPU's load on the memory domains: the share of its misses each domain serves.
#[derive(Clone, Debug)]
pub(crate) struct CpuLoad {
    /// Its activity before contention.
    pub unloaded: Unloaded,
    /// Per memory domain (the order of the peaks given to [`solve_memory`]): the share of
    /// its misses that domain serves (shares sum to 1).
    pub shares: Vec<f64>,
}

impl CpuLoad {
    /// The shares of a CPU whose misses go `local` (0..=1) to its own domain `own` of `nd`
    /// and the rest in equal parts to each other domain (all to its own when there is
    /// one): the NUMA split (module docs, "Memory bandwidth").
    #[allow(clippy::cast_precision_loss)] // a handful of domains
    pub fn node_shares(own: usize, local: f64, nd: usize) -> Vec<f64> {
        if nd <= 1 {
            return vec![1.0; nd];
        }
        (0..nd)
            .map(|d| {
                if d == own {
                    local
                } else {
                    (1.0 - local) / (nd - 1) as f64
                }
            })
            .collect()
    }

    /// Its share of misses going to domain `d`.
    fn share(&self, d: usize) -> f64 {
        self.shares.get(d).copied().unwrap_or(0.0)
    }

    /// Its latency factor: its shares' mix of the domains' `L`.
    fn latency(&self, latency: &[f64]) -> f64 {
        if self.shares.is_empty() {
            return 1.0;
        }
        self.shares.iter().zip(latency).map(|(s, l)| s * l).sum()
    }
}

impl Unloaded {
    /// [`Unloaded::at`]'s traffic alone, bytes/s.
    fn traffic_at(&self, latency: f64) -> f64 {
        let t = self.base.traffic_bytes_per_s;
        if latency <= 1.0 || self.stall <= 0.0 {
            t
        } else {
            t * (1.0 + self.stall) / (1.0 + self.stall * latency)
        }
    }
}

/// The memory domains' steady state under contention.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MemorySolution {
    /// Per domain: `L`.
    pub latency: Vec<f64>,
    /// Per domain: achieved demand, bytes/s (at most the peak).
    pub demand: Vec<f64>,
    /// Per CPU, in the order given: its activity.
    pub activity: Vec<CpuActivity>,
}

/// The traffic domain `d` receives when the domains' latency factors are `latency`.
fn domain_demand(loads: &[CpuLoad], busy: &[usize], latency: &[f64], d: usize) -> f64 {
    busy.iter()
        .map(|&i| {
            let l = &loads[i];
            l.share(d) * l.unloaded.traffic_at(l.latency(latency))
        })
        .sum()
}

/// The root of the rising `h` on `[lo, hi]` with `h(lo) < 0 < h(hi)` (Illinois method).
fn rising_root(mut h: impl FnMut(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let (mut flo, mut fhi) = (h(lo), h(hi));
    let mut side = 0i8;
    for _ in 0..ROOT_STEPS {
        if hi - lo < 1e-12 {
            break;
        }
        let mut x = (lo * fhi - hi * flo) / (fhi - flo);
        if !(x > lo && x < hi) {
            x = 0.5 * (lo + hi);
        }
        let fx = h(x);
        if fx < 0.0 {
            lo = x;
            flo = fx;
            if side == -1 {
                fhi *= 0.5;
            }
            side = -1;
        } else if fx > 0.0 {
            hi = x;
            fhi = fx;
            if side == 1 {
                flo *= 0.5;
            }
            side = 1;
        } else {
            return x;
        }
    }
    if flo.abs() < fhi.abs() { lo } else { hi }
}

/// Solves the memory domains' latency factors and the CPUs' activities under contention
/// (module docs, "Memory bandwidth"): per domain `d`, `L_d = latency_factor(D_d(L) /
/// peak_d)`, solving each domain in turn with the others' `L` fixed (Gauss-Seidel) until
/// no `L` moves by more than 1e-9 or [`MEMORY_ROUNDS`] rounds; deterministic. Domains
/// with no peak (≤ 0) are not limited.
pub(crate) fn solve_memory(loads: &[CpuLoad], peaks: &[f64]) -> MemorySolution {
    let nd = peaks.len();
    let mut latency = vec![1.0; nd];
    // Only CPUs with memory traffic load a domain.
    let busy: Vec<usize> = (0..loads.len())
        .filter(|&i| loads[i].unloaded.base.traffic_bytes_per_s > 0.0)
        .collect();
    let rho = |demand: f64, d: usize| {
        if peaks[d] > 0.0 {
            demand / peaks[d]
        } else {
            0.0
        }
    };
    // The common case: every domain below the knee at the idle latency needs no solving.
    let congested =
        (0..nd).any(|d| latency_factor(rho(domain_demand(loads, &busy, &latency, d), d)) > 1.0);
    if congested {
        for _ in 0..MEMORY_ROUNDS {
            let mut moved: f64 = 0.0;
            for d in 0..nd {
                // h(x) = x - L(ρ_d(x)) rises with x: its root is the domain's fixed point.
                let mut at = latency.clone();
                let h = |x: f64| {
                    at[d] = x;
                    x - latency_factor(rho(domain_demand(loads, &busy, &at, d), d))
                };
                let x = solve_domain(h);
                moved = moved.max((x - latency[d]).abs());
                latency[d] = x;
            }
            if moved < 1e-9 {
                break;
            }
        }
    }
    let mut activity: Vec<CpuActivity> = loads
        .iter()
        .map(|l| l.unloaded.at(l.latency(&latency)))
        .collect();
    let demand_of = |activity: &[CpuActivity], d: usize| -> f64 {
        busy.iter()
            .map(|&i| loads[i].share(d) * activity[i].traffic_bytes_per_s)
            .sum()
    };
    // Saturation guard: a domain still above its peak at the largest L (huge access rates
    // with few misses) slows every CPU loading it in proportion, to at most its peak.
    let over: Vec<f64> = (0..nd)
        .map(|d| {
            let demand = demand_of(&activity, d);
            if peaks[d] > 0.0 && demand > peaks[d] {
                peaks[d] / demand
            } else {
                1.0
            }
        })
        .collect();
    if over.iter().any(|&s| s < 1.0) {
        for &i in &busy {
            let l = &loads[i];
            let s = (0..nd)
                .filter(|&d| l.share(d) > 0.0)
                .map(|d| over[d])
                .fold(1.0, f64::min);
            let a = &mut activity[i];
            a.ipc *= s;
            a.instructions_per_s *= s;
            a.traffic_bytes_per_s *= s;
            a.local_bytes_per_s *= s;
            a.llc_misses_per_s *= s;
            a.llc_references_per_s *= s;
        }
    }
    let demand = (0..nd).map(|d| demand_of(&activity, d)).collect();
    MemorySolution {
        latency,
        demand,
        activity,
    }
}

/// The fixed point `x = L(ρ(x))` of one domain, given `h(x) = x - L(ρ(x))`, which rises.
fn solve_domain(mut h: impl FnMut(f64) -> f64) -> f64 {
    if h(1.0) >= 0.0 {
        1.0
    } else if h(MAX_LATENCY_FACTOR) <= 0.0 {
        MAX_LATENCY_FACTOR
    } else {
        rising_root(h, 1.0, MAX_LATENCY_FACTOR)
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
        miss_floor: MISS_FLOOR,
        miss_curve_exponent: 1.0,
        instructions_per_op: None,
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
