//! The controller's decisions, without I/O: each interval it is given the readings of every
//! workload and the allocation of every best-effort class, and answers with the changes to
//! make ([`Engine::observe`]). [`crate::Agent`] reads and writes the platform around it.
//!
//! # Health
//! A protected workload's health is its reading divided by its target
//! ([`rdt_config::policy::Target`]): IPC ÷ the IPC target, LLC occupancy ÷ the occupancy
//! target, the application's own metric ÷ (or, for a latency, into) its target, or, for
//! `alone`, IPC ÷ the best IPC it has shown (its LLC occupancy ÷ the most it has held where
//! there is no PMU). The learned best decays by [`BASELINE_DECAY_PER_S`] of itself per
//! second, so that a lasting change of the workload itself becomes its new normal within
//! minutes. A workload is *below target* when its health is below the policy's
//! `contended_below`. A baseline is only learned from what the workload shows: one that is
//! squeezed from the moment the controller starts looks healthy until it has been better.
//!
//! # Classification: which pressure, if any (rules 1 and 3)
//! Below target is not yet contention: the engine first looks for its signature in what the
//! platform measures, and names the numbers it used in the decision ([`Evidence`]):
//! - **cache pressure**: the workload holds less LLC than it needs (below
//!   [`OCCUPANCY_SHORT`] of its LLC target, or of the most it has held), and, where its
//!   memory traffic and IPC are both measured, its traffic per unit of IPC (proportional to
//!   its misses per instruction at a steady clock) is above [`MISS_RISE`] times what it was
//!   while every protected workload met its target: less cache that costs it misses. A
//!   workload whose occupancy fell but whose misses did not (a streaming workload) is not
//!   helped by ways.
//! - **memory-bandwidth pressure**: the memory traffic of the monitored workloads is at
//!   least [`LOADED_SHARE`] of the domain's capacity (the policy's `memory_peak_gbps`, else
//!   the highest total the controller has seen: a learned peak), and the best-effort
//!   classes' traffic rose above [`TRAFFIC_RISE`] times, and by at least [`TRAFFIC_MATTERS`]
//!   of the capacity over, what it was while every protected workload met its target.
//! - both, or **neither**: a workload below target without either signature (its IPC fell
//!   while its occupancy held and no one else's traffic rose: its own phase) is left alone,
//!   and nothing is done. Where neither occupancy nor traffic is measured, the engine cannot
//!   tell, and takes the levers in order as if both applied (`unmeasured`); a signal not
//!   measured (no CMT, no MBM, or no need known: a workload with an IPC or application
//!   target below it since the start has shown no occupancy it needs) cannot be ruled out
//!   and is taken as present.
//!
//! # Actions (one at a time, each judged before the next)
//! For the worst contended workload, and only the lever that can help:
//! 1. **Cache** (cache pressure, or both): the best-effort class holding the most LLC, whose
//!    ways are above its floor, is given the ways the protected workloads leave: all ways
//!    but those their LLC target (or, for `alone`, the most they have held) needs in one
//!    domain, never fewer than its floor nor as many as it has; without such a size, its
//!    floor. One step, as the seed paper's operator did (`llc:2=0x3`).
//! 2. **Memory bandwidth** (bandwidth pressure, or both once no class can give ways): the
//!    class with the most memory traffic that may be throttled is throttled by the least
//!    limit that restores the target, searched for (rule 5) in the unit the part counts
//!    its limits in ([`MbaScale`]: percent on Intel, eighths of a GB/s on AMD): the first
//!    step goes half way from its effective limit (its limit, or on parts whose limits are
//!    absolute bandwidth, AMD, the limit its traffic uses in its busiest domain,
//!    [`Reading::peak_domain_bytes_per_s`], if lower) to its floor; once a step has been
//!    judged, the next one is the secant: the health each unit bought so far, extrapolated
//!    to the threshold + [`SEARCH_MARGIN`] (above `contended_below`, at most half way to
//!    the floor: the gain flattens out there). A class not yet stepped in this contention
//!    starts from what another class's step taught: the health each byte/s of demand held
//!    back bought (the last MBA step judged, any class) times this class's demand (traffic
//!    ÷ its limit) is its health per unit. Where nothing judged tells the health a
//!    unit buys and the workload is below `contended_below`, a first step that could
//!    not end the pressure is not taken: when every class that may be throttled, each at
//!    its floor, would still leave the domain at [`LOADED_SHARE`] of its capacity or more
//!    (the rest is traffic no limit reaches: a class without an MBA floor, one on
//!    protected cores), no limit above the floor ends it, and the first step is the floor.
//!    Always a multiple of the part's step (Intel: its granularity, 10 %; AMD: 1/8 GB/s),
//!    never below the floor. A class whose MBA would throttle a core a protected workload
//!    shares ([`Facts::mba_shares_protected_core`]: Intel parts before MBA 3.0 throttle a
//!    core by its threads' strongest delay) is never throttled (rule 4).
//!
//! # Episodes (hysteresis)
//! A workload below `contended_below` with the signature of contention starts an episode;
//! in an episode the threshold is [`RESTORED`] (0.99, or `contended_below` if higher): the
//! engine goes on while a workload is below it and a lever helps, so that it ends near what
//! the best static allocation gives, not just above `contended_below`. The episode ends when
//! every workload is back above the threshold, or when a step taken above
//! `contended_below` did not help (the search passed the knee: the step is undone).
//!
//! After `verify_intervals`, an action is judged: if the health of the workload that
//! caused it did not rise by [`MIN_GAIN`] (and is not back at [`RESTORED`]), the action is
//! undone and that lever of that class is not used again until the contention ends; except
//! that where limits are absolute bandwidth (AMD) an MBA step that bought nothing is
//! followed once (per contention) by the class's MBA floor, judged against the health
//! before that step and undone to where it started if it does not help either: a limit
//! above what the class moves in a domain does nothing, so the first half-way steps can all
//! miss a part that responds only to deep throttles (and one that did not bind is no knee,
//! above `contended_below` too). Intel's MBA is a delay that always binds: there a half
//! step that bought nothing is undone and MBA is not tried again. A class is acted on at
//! most once every `dwell_intervals`.
//!
//! # Give-back by demand (rule 2)
//! When no protected workload is contended, a squeezed class gets back
//! - **ways** when its LLC occupancy is below [`SUBSIDED_SHARE`] of what its ways hold (it no
//!   longer fills them; a class squeezed in some domains only: in those,
//!   [`Reading::squeezed_llc`]), doubling them each step;
//! - **bandwidth** when its demand no longer saturates the domain: its traffic scaled to the
//!   next step's limit, with the others' traffic, stays below [`LOADED_SHARE`] of the
//!   capacity, or its demand (traffic ÷ its throttle) fell below [`SUBSIDED_SHARE`] of what
//!   it was when it was throttled, or, where limits are absolute bandwidth (AMD), its
//!   traffic in its busiest domain is below [`SUBSIDED_SHARE`] of its limit (it no longer
//!   presses against it). Each step goes half way to no throttling (at least one
//!   granule), all the way when less than [`GIVE_BACK_STEP`] would be left.
//!
//! A give-back is a probe: it is judged after `verify_intervals` like a squeeze. If a
//! protected workload is contended before then, the give-back caused it: it is undone
//! ([`Reason::GiveBackHurt`]) and that class's hold-off (the wait before its next
//! give-back, `dwell_intervals` × hold-off) doubles, up to [`MAX_HOLDOFF_FACTOR`]. A
//! give-back that held resets the hold-off to 1. Contention that comes back later (a
//! periodic aggressor) does not lengthen it: resources come back within a few dwells of
//! every pause.
//!
//! A class found below its floor (another program wrote it, or the policy was tightened)
//! is raised to it first ([`Reason::Floor`]).
//!
//! # What "the domain" is
//! The engine sees the workloads the policy names: the domain's traffic is the sum of their
//! memory traffic over the domains the controller acts in ([`crate::Agent`] acts in the L3
//! domains of the protected workloads' CPUs).

use std::time::Duration;

use rdt_config::policy::{AppGoal, Policy, Target};

/// Share of itself a learned baseline loses per second (0.05 % per second: about 3 % a
/// minute, a quarter in ten minutes).
pub const BASELINE_DECAY_PER_S: f64 = 0.0005;

/// The rise of health (share of the target) that counts as an action having helped.
pub const MIN_GAIN: f64 = 0.01;

/// A squeezed class gets ways back when its LLC occupancy is below this share of what its
/// ways hold; bandwidth back when its demand fell below this share of its demand when it
/// was throttled.
pub const SUBSIDED_SHARE: f64 = 0.5;

/// Cache pressure: a protected workload's occupancy below this share of what it needs.
pub const OCCUPANCY_SHORT: f64 = 0.9;

/// Cache pressure: its traffic per unit of IPC above this multiple of its calm value (more
/// misses per instruction).
pub const MISS_RISE: f64 = 1.5;

/// Bandwidth pressure: the domain's traffic at least this share of its capacity (loaded
/// latency rises well before the peak: Intel MLC `--loaded_latency` curves bend between 40
/// and 60 % of it).
pub const LOADED_SHARE: f64 = 0.5;

/// Bandwidth pressure: the best-effort classes' traffic above this multiple of its calm
/// value ...
pub const TRAFFIC_RISE: f64 = 1.5;

/// ... and above it by at least this share of the domain's capacity.
pub const TRAFFIC_MATTERS: f64 = 0.1;

/// The health above the threshold the MBA search aims at.
pub const SEARCH_MARGIN: f64 = 0.01;

/// Once contention is found (a protected workload below `contended_below`, with its
/// signature), the engine goes on until every protected workload is back at this share of
/// its target (or `contended_below`, if higher), or a step no longer helps: the episode's
/// end. `contended_below` only starts an episode (hysteresis): stopping there left the
/// protected workload 2 to 5 % under what the best static allocation gives it.
pub const RESTORED: f64 = 0.99;

/// The weight of a new interval in the calm baselines (an exponential average).
pub const CALM_WEIGHT: f64 = 0.2;

/// The least MBA give-back step, percent of no limit: a give-back that would leave less
/// than this between its limit and no throttling goes all the way. Intel's granularity
/// (10 %) makes this no change there; on AMD (1/8 GB/s units, 2^11 of them no limit on
/// Genoa: 204 units, 25.5 GB/s) halving the rest a unit at a time took seven dwells from
/// 2.5 GB/s (129, 193, 225, 241, 249, 253, 256 GB/s) for no measurable difference in the
/// last three.
pub const GIVE_BACK_STEP: u8 = 10;

/// Bytes per second of one AMD bandwidth-limit unit, 1/8 GB/s (AMD PQoS Versions 1.0 and
/// 2.0, "L3 external bandwidth enforcement"; the kernel's resctrl counts AMD's MBA in
/// these units too).
pub const AMD_UNIT_BYTES_PER_S: f64 = 125_000_000.0;

/// The longest hold-off before a give-back, in `dwell_intervals`.
pub const MAX_HOLDOFF_FACTOR: u32 = 64;

/// One workload's readings over the last interval; `None` where the platform does not
/// measure it (no PMU: no IPC; no MBM: no traffic).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Reading {
    /// LLC occupancy now, bytes, summed over its L3 domains (CMT).
    pub llc_bytes: Option<u64>,
    /// Memory traffic over the interval, bytes per second (MBM total).
    pub mem_bytes_per_s: Option<f64>,
    /// Instructions per unhalted cycle over the interval.
    pub ipc: Option<f64>,
    /// The application's own metric, for a protected workload whose target is what the
    /// application reports ([`Target::App`]), in its unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<f64>,
    /// A best-effort class's memory traffic in the domain where it throttles and where its
    /// traffic is highest, bytes per second (MBM per L3 domain): what one domain's MBA
    /// limit holds back where limits are absolute bandwidth (AMD). `None`: not measured per
    /// domain (then its traffic ÷ the domains it spans).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_domain_bytes_per_s: Option<f64>,
    /// A best-effort class squeezed in some of the L3 domains it spans only (per domain):
    /// its LLC occupancy in those, bytes, and how many they are. Its give-back of ways is
    /// judged by what it fills there (in its other domains, also those where no protected
    /// workload runs, it has every way). `None`: squeezed alike everywhere, or not measured
    /// per domain (then `llc_bytes` over the domains it spans).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub squeezed_llc: Option<(u64, u32)>,
}

/// The unit a part counts its MBA limits in: the unit of [`Setting::mba`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MbaUnit {
    /// Percent of the peak memory bandwidth (Intel's MBA: a delay, SDM vol. 3B 18.19.7);
    /// 100 is no throttling.
    #[default]
    Percent,
    /// Eighths of a GB/s per L3 domain ([`AMD_UNIT_BYTES_PER_S`]; AMD's MBA: an absolute
    /// limit, `2^width` units are none).
    EighthGbps,
}

/// How a part counts its MBA limits ([`Facts::mba`]): the unit, its step, and the limit
/// that is no throttling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbaScale {
    /// Percent, in steps of `granularity` (Intel: 10, `CPUID.(EAX=10H,ECX=3)`); 100 is no
    /// throttling.
    Percent {
        /// The step, percent (at least 1).
        granularity: u8,
    },
    /// Eighths of a GB/s, in steps of one (AMD); `no_limit` (`2^width`: 2048 on Genoa, 256
    /// GB/s; kernel `max_bw = 1 << width`) is no throttling.
    EighthGbps {
        /// The limit that is none, units.
        no_limit: u32,
    },
}

impl Default for MbaScale {
    fn default() -> Self {
        Self::Percent { granularity: 1 }
    }
}

impl MbaScale {
    /// The unit of its limits.
    #[must_use]
    pub const fn unit(self) -> MbaUnit {
        match self {
            Self::Percent { .. } => MbaUnit::Percent,
            Self::EighthGbps { .. } => MbaUnit::EighthGbps,
        }
    }

    /// The limit that is no throttling, in its unit (100 %, or `2^width` units).
    #[must_use]
    pub fn no_limit(self) -> u32 {
        match self {
            Self::Percent { .. } => 100,
            Self::EighthGbps { no_limit } => no_limit.max(1),
        }
    }

    /// The step of its limits, in its unit (at least 1).
    #[must_use]
    pub fn step(self) -> u32 {
        match self {
            Self::Percent { granularity } => u32::from(granularity.max(1)),
            Self::EighthGbps { .. } => 1,
        }
    }

    /// Whether its limits are absolute bandwidth (AMD): one above what a class moves in a
    /// domain does nothing. Intel's delay always binds.
    #[must_use]
    pub const fn absolute(self) -> bool {
        matches!(self, Self::EighthGbps { .. })
    }

    /// The bandwidth limit `mba` (in its unit) holds a class to in one domain, bytes/s:
    /// `None` for a percent (a delay, not a bandwidth).
    #[must_use]
    pub fn bytes_per_s(self, mba: u32) -> Option<f64> {
        self.absolute()
            .then(|| f64::from(mba.min(self.no_limit())) * AMD_UNIT_BYTES_PER_S)
    }

    /// An allocation of `ways` and MBA limit `mba` in its unit.
    #[must_use]
    pub const fn setting(self, ways: u32, mba: u32) -> Setting {
        Setting {
            ways,
            mba,
            mba_unit: self.unit(),
        }
    }
}

/// A best-effort class's allocation: the L3 ways it may fill (the fewest over the domains
/// acted on) and its MBA limit (the lowest over them) in the part's unit.
///
/// As JSON (events): `{"ways":2,"mba_percent":60}` where the part counts percent (Intel),
/// `{"ways":2,"mba_gbps":5.5}` where it counts eighths of a GB/s (AMD: the limit in GB/s,
/// 10^9 bytes/s, a multiple of 0.125; `2^width / 8`, 256 on Genoa, is no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    /// L3 ways, contiguous from way 0.
    pub ways: u32,
    /// MBA limit in [`Setting::mba_unit`]: percent of the memory bandwidth (100 = no
    /// throttling), or eighths of a GB/s per domain (`2^width` = no limit).
    pub mba: u32,
    /// The unit of `mba`.
    pub mba_unit: MbaUnit,
}

impl Setting {
    /// The MBA limit in GB/s (10^9 bytes/s), where it is counted in eighths of a GB/s.
    #[must_use]
    pub fn mba_gbps(self) -> Option<f64> {
        (self.mba_unit == MbaUnit::EighthGbps).then(|| f64::from(self.mba) / 8.0)
    }
}

impl serde::Serialize for Setting {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = serializer.serialize_struct("Setting", 2)?;
        st.serialize_field("ways", &self.ways)?;
        match self.mba_gbps() {
            Some(g) => st.serialize_field("mba_gbps", &g)?,
            None => st.serialize_field("mba_percent", &self.mba)?,
        }
        st.end()
    }
}

/// What an action does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Fewer L3 ways.
    ShrinkWays,
    /// More MBA throttling.
    ThrottleMba,
    /// An action undone: it did not help, or (a give-back) it caused contention.
    Revert,
    /// Ways and bandwidth given back.
    GiveBack,
    /// Raised to the policy's floor.
    RaiseToFloor,
}

impl ActionKind {
    /// The name in events and metrics (`shrink_ways`, ...).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::ShrinkWays => "shrink_ways",
            Self::ThrottleMba => "throttle_mba",
            Self::Revert => "revert",
            Self::GiveBack => "give_back",
            Self::RaiseToFloor => "raise_to_floor",
        }
    }
}

/// Which pressure a protected workload below its target is under ([module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pressure {
    /// It holds less LLC than it needs, and misses more for it.
    Cache,
    /// The memory domain is loaded, and best-effort traffic rose.
    MemoryBandwidth,
    /// Both.
    Both,
    /// Neither: its own phase, not contention.
    Neither,
    /// Neither occupancy nor traffic is measured: cannot tell.
    Unmeasured,
}

impl Pressure {
    const fn cache(self) -> bool {
        matches!(self, Self::Cache | Self::Both | Self::Unmeasured)
    }

    const fn bandwidth(self) -> bool {
        matches!(self, Self::MemoryBandwidth | Self::Both | Self::Unmeasured)
    }
}

/// Where the memory domain's capacity comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacitySource {
    /// The policy's `memory_peak_gbps`.
    Configured,
    /// The highest total traffic the controller has seen.
    LearnedPeak,
}

/// The numbers a classification used ([module docs](self)); `None` where not measured.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Evidence {
    /// The pressure found.
    pub pressure: Pressure,
    /// The protected workload's LLC occupancy, bytes.
    pub llc_bytes: Option<u64>,
    /// What it needs: its LLC target, or the most it has held, bytes.
    pub llc_needed_bytes: Option<f64>,
    /// Its memory traffic per unit of IPC now, bytes/s.
    pub traffic_per_ipc: Option<f64>,
    /// The same while every protected workload met its target.
    pub calm_traffic_per_ipc: Option<f64>,
    /// The memory traffic of every monitored workload, bytes/s.
    pub domain_bytes_per_s: Option<f64>,
    /// The domain's capacity, bytes/s.
    pub capacity_bytes_per_s: Option<f64>,
    /// Where the capacity comes from.
    pub capacity_source: CapacitySource,
    /// The best-effort classes' traffic, bytes/s.
    pub best_effort_bytes_per_s: Option<f64>,
    /// The same while every protected workload met its target.
    pub calm_best_effort_bytes_per_s: Option<f64>,
}

/// Why an action is taken.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    /// A protected workload is below `contended_below` of its target, with the signature
    /// of contention.
    Contended {
        /// The workload.
        workload: String,
        /// Its health, share of its target.
        health: f64,
        /// What the classification used.
        evidence: Evidence,
    },
    /// The action judged did not raise the workload's health by [`MIN_GAIN`].
    NoImprovement {
        /// The workload.
        workload: String,
        /// Its health when the action was taken.
        before: f64,
        /// Its health now.
        after: f64,
    },
    /// A give-back was followed, before it was judged, by contention: it is undone.
    GiveBackHurt {
        /// The workload contended.
        workload: String,
        /// Its health now.
        health: f64,
    },
    /// No protected workload is contended and the class's demand fell.
    Subsided {
        /// Its LLC occupancy, share of what its ways hold.
        occupancy_share: Option<f64>,
        /// Its memory traffic, bytes/s.
        traffic_bytes_per_s: Option<f64>,
        /// The domain's traffic with the class at the new limit, bytes/s (its traffic
        /// scaled to it).
        projected_domain_bytes_per_s: Option<f64>,
        /// The domain's capacity, bytes/s.
        capacity_bytes_per_s: Option<f64>,
    },
    /// The class was below the policy's floor.
    Floor,
}

impl Reason {
    /// The name in events and metrics (`contended`, ...).
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Contended { .. } => "contended",
            Self::NoImprovement { .. } => "no_improvement",
            Self::GiveBackHurt { .. } => "give_back_hurt",
            Self::Subsided { .. } => "subsided",
            Self::Floor => "floor",
        }
    }
}

/// A change of one best-effort class's allocation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Decision {
    /// The best-effort class (its index in the policy's `best_effort`).
    #[serde(skip)]
    pub class: usize,
    /// What it does.
    pub action: ActionKind,
    /// The allocation before.
    pub from: Setting,
    /// The allocation after.
    pub to: Setting,
    /// Why.
    #[serde(flatten)]
    pub reason: Reason,
}

/// The platform facts the decisions need, from its capabilities and topology.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facts {
    /// L3 CBM length: the ways of a domain.
    pub ways: u32,
    /// The fewest ways a mask may have (`min_cbm_bits`).
    pub min_ways: u32,
    /// Bytes of one way in one L3 domain.
    pub way_bytes: u64,
    /// The L3 domains acted on (the class's masks are changed in each).
    pub domains: u32,
    /// The L3 domains each protected workload's CPUs span, in policy order (at least 1;
    /// missing: [`Facts::domains`]): its LLC target or learned occupancy is spread over
    /// them.
    pub protected_spans: Vec<u32>,
    /// The L3 domains each best-effort workload's CPUs span, in policy order (as
    /// `protected_spans`): the capacity its ways give it is ways × way size × span.
    pub best_effort_spans: Vec<u32>,
    /// How the part counts its MBA limits: percent in steps of its granularity (Intel),
    /// or eighths of a GB/s (AMD). The unit of every [`Setting::mba`] the engine is given
    /// and makes.
    pub mba: MbaScale,
    /// The memory domain's capacity, bytes/s (the policy's `memory_peak_gbps`); `None`:
    /// learned, the highest total traffic seen.
    pub memory_capacity_bytes_per_s: Option<f64>,
    /// Per best-effort class, in policy order: throttling its MBA would throttle a core a
    /// protected workload runs on (an SMT sibling, on a part whose MBA applies per core).
    /// Such a class is never throttled. Missing: false.
    pub mba_shares_protected_core: Vec<bool>,
}

/// What was done and is waiting to be judged.
#[derive(Clone, Copy, Debug)]
struct Pending {
    at: Duration,
    from: Setting,
    to: Setting,
    kind: ActionKind,
    workload: usize,
    health: f64,
}

/// A best-effort class's state between intervals.
#[derive(Clone, Debug, Default)]
struct Class {
    last_action: Option<Duration>,
    pending: Option<Pending>,
    ways_blocked: bool,
    mba_blocked: bool,
    holdoff: u32,
    /// Health per MBA unit (percent, or eighth of a GB/s) of the last MBA step judged in
    /// this contention.
    mba_slope: Option<f64>,
    /// The effective limit its last MBA step started from ([`Engine::effective_mba`]): the
    /// cut the step's gain is divided by starts there (on AMD, from no limit, 256 GB/s, the
    /// slope came out a hundred times too flat and the secant was never taken).
    mba_base: Option<u32>,
    /// Its demand (traffic ÷ throttle) when last throttled, bytes/s.
    demand: Option<f64>,
    /// Its MBA floor has been tried in this contention (after a step that bought nothing).
    floor_tried: bool,
}

/// A protected workload's learned baselines.
#[derive(Clone, Copy, Debug, Default)]
struct Learned {
    ipc: f64,
    llc: f64,
    /// Traffic per unit of IPC while every protected workload met its target.
    calm_intensity: Option<f64>,
    /// It has met its target.
    calm_seen: bool,
}

/// The decisions of the controller ([module docs](self)).
#[derive(Clone, Debug)]
pub struct Engine {
    policy: Policy,
    facts: Facts,
    learned: Vec<Learned>,
    classes: Vec<Class>,
    last: Option<Duration>,
    health: Vec<Option<f64>>,
    /// The highest total traffic seen, bytes/s.
    peak: f64,
    /// The best-effort classes' traffic while every protected workload met its target.
    calm_best_effort: Option<f64>,
    /// In an episode of contention: the threshold is [`Engine::restored`], not
    /// `contended_below`.
    episode: bool,
    /// Health per byte/s of demand held back, of the last MBA step judged in this
    /// contention (any class).
    mba_slope_per_byte: Option<f64>,
}

/// The traffic of `readings` added up, `None` when none is measured.
fn traffic(readings: &[Reading]) -> Option<f64> {
    readings
        .iter()
        .filter_map(|r| r.mem_bytes_per_s)
        .fold(None, |acc, t| Some(acc.unwrap_or(0.0) + t))
}

/// An exponential average's next value.
fn ewma(old: Option<f64>, new: f64) -> f64 {
    old.map_or(new, |o| o + CALM_WEIGHT * (new - o))
}

impl Engine {
    /// An engine for `policy` on a platform with `facts`. The floors are raised to the
    /// platform's `min_cbm_bits` and capped at its ways.
    #[must_use]
    pub fn new(policy: Policy, facts: Facts) -> Self {
        let n = policy.best_effort.len();
        Self {
            learned: vec![Learned::default(); policy.protected.len()],
            classes: vec![
                Class {
                    holdoff: 1,
                    ..Class::default()
                };
                n
            ],
            policy,
            facts,
            last: None,
            health: Vec::new(),
            peak: 0.0,
            calm_best_effort: None,
            episode: false,
            mba_slope_per_byte: None,
        }
    }

    /// The health an episode of contention restores ([`RESTORED`], at least
    /// `contended_below`).
    fn restored(&self) -> f64 {
        RESTORED.max(self.policy.contended_below)
    }

    /// The health below which a workload (with the signature of contention) is acted for:
    /// `contended_below`, or in an episode [`Engine::restored`].
    fn threshold(&self) -> f64 {
        if self.episode {
            self.restored()
        } else {
            self.policy.contended_below
        }
    }

    /// The policy.
    #[must_use]
    pub const fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The platform facts.
    #[must_use]
    pub const fn facts(&self) -> &Facts {
        &self.facts
    }

    /// The floor of best-effort class `i`: its ways and its MBA limit in the part's unit
    /// ([`Facts::mba`]): `min_mba_percent` rounded up to the granularity on a part that
    /// counts percent, `min_mba_gbps` rounded up to an eighth of a GB/s on one that counts
    /// those. A floor in the other unit (refused when the agent starts,
    /// [`Policy::check_mba`](rdt_config::policy::Policy::check_mba)), or none, is no
    /// limit: the class's MBA is never lowered.
    #[must_use]
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped
    pub fn floor(&self, i: usize) -> Setting {
        let b = &self.policy.best_effort[i];
        let ways = b.min_ways.max(self.facts.min_ways).min(self.facts.ways);
        let full = self.full_mba();
        let mba = match (self.facts.mba, b.min_mba_percent, b.min_mba_gbps) {
            (MbaScale::Percent { .. }, Some(p), _) => {
                self.round_mba(u32::from(p)).max(u32::from(p).min(full))
            }
            (MbaScale::EighthGbps { .. }, _, Some(g)) => {
                (g * 8.0).ceil().clamp(1.0, f64::from(full)) as u32
            }
            _ => full,
        };
        self.facts.mba.setting(ways, mba)
    }

    /// The MBA limit that is no throttling, in the part's unit.
    fn full_mba(&self) -> u32 {
        self.facts.mba.no_limit()
    }

    /// The MBA step, in the part's unit (Intel: its granularity; AMD: one eighth of a
    /// GB/s).
    fn granule(&self) -> u32 {
        self.facts.mba.step()
    }

    /// `v` rounded up to the MBA step, at most no limit.
    fn round_mba(&self, v: u32) -> u32 {
        let g = self.granule();
        v.div_ceil(g).saturating_mul(g).min(self.full_mba())
    }

    /// The health of each protected workload now (share of its target), `None` where its
    /// reading is missing. Learns the `alone` baselines from `readings` first.
    fn health(&mut self, at: Duration, readings: &[Reading]) -> Vec<Option<f64>> {
        let dt = self
            .last
            .map_or(0.0, |l| at.saturating_sub(l).as_secs_f64());
        let keep = (1.0 - BASELINE_DECAY_PER_S * dt).max(0.0);
        #[allow(clippy::cast_precision_loss)] // bytes as a share
        self.policy
            .protected
            .iter()
            .zip(&mut self.learned)
            .zip(readings)
            .map(|((p, learned), r)| {
                learned.ipc *= keep;
                learned.llc *= keep;
                if let Some(ipc) = r.ipc {
                    learned.ipc = learned.ipc.max(ipc);
                }
                if let Some(b) = r.llc_bytes {
                    learned.llc = learned.llc.max(b as f64);
                }
                match &p.target {
                    Target::Ipc(t) => r.ipc.map(|ipc| ipc / t),
                    Target::LlcBytes(t) => r.llc_bytes.map(|b| b as f64 / *t as f64),
                    Target::App(a) => r.app.and_then(|v| match a.goal {
                        AppGoal::Throughput(x) => Some(v / x),
                        AppGoal::Latency(x) => (v > 0.0).then(|| x / v),
                    }),
                    Target::Alone => match (r.ipc, r.llc_bytes) {
                        (Some(ipc), _) if learned.ipc > 0.0 => Some(ipc / learned.ipc),
                        (None, Some(b)) if learned.llc > 0.0 => Some(b as f64 / learned.llc),
                        _ => None,
                    },
                }
            })
            .collect()
    }

    /// The LLC bytes protected workload `i` needs: its target, else the most it has held
    /// once it met its target (unknown for one below it since the start).
    #[allow(clippy::cast_precision_loss)] // bytes as a share
    fn needed_llc(&self, i: usize) -> Option<f64> {
        let l = &self.learned[i];
        match self.policy.protected[i].target {
            Target::LlcBytes(t) => Some(t as f64),
            _ => Some(l.llc).filter(|b| *b > 0.0 && l.calm_seen),
        }
    }

    /// The bytes of LLC per domain the protected workloads want, when their targets say.
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    fn wanted_ways(&self) -> Option<u32> {
        // each workload's bytes spread over the domains it spans, added up: the most any
        // one domain is asked for when the workloads share their domains
        let mut per_domain = 0.0;
        for i in 0..self.policy.protected.len() {
            let bytes = self.needed_llc(i)?;
            per_domain += bytes / f64::from(self.span(&self.facts.protected_spans, i));
        }
        let way = self.facts.way_bytes.max(1) as f64;
        Some((per_domain / way).ceil().min(f64::from(self.facts.ways)) as u32)
    }

    /// The domains workload `i` spans (`spans[i]`, else all), at least 1.
    fn span(&self, spans: &[u32], i: usize) -> u32 {
        spans.get(i).copied().unwrap_or(self.facts.domains).max(1)
    }

    fn dwell_passed(&self, c: &Class, at: Duration) -> bool {
        c.last_action
            .is_none_or(|l| at >= l + self.policy.interval * self.policy.dwell_intervals)
    }

    /// The domain's capacity and where it comes from.
    fn capacity(&self) -> (Option<f64>, CapacitySource) {
        match self.facts.memory_capacity_bytes_per_s {
            Some(c) => (Some(c), CapacitySource::Configured),
            None => (
                Some(self.peak).filter(|p| *p > 0.0),
                CapacitySource::LearnedPeak,
            ),
        }
    }

    /// Classifies the pressure on protected workload `w` ([module docs](self)).
    #[allow(clippy::many_single_char_names)] // the quantities of the module docs
    fn classify(&self, w: usize, r: Reading, protected: &[Reading], best: &[Reading]) -> Evidence {
        let (capacity, capacity_source) = self.capacity();
        let best_traffic = traffic(best);
        let domain = match (traffic(protected), best_traffic) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        let needed = self.needed_llc(w);
        let intensity = match (r.mem_bytes_per_s, r.ipc) {
            (Some(t), Some(ipc)) if ipc > 0.0 => Some(t / ipc),
            _ => None,
        };
        let calm_intensity = self.learned[w].calm_intensity;
        #[allow(clippy::cast_precision_loss)] // bytes as a share
        let short = match (r.llc_bytes, needed) {
            (Some(b), Some(n)) => Some((b as f64) < OCCUPANCY_SHORT * n),
            _ => None,
        };
        let by_llc_target = matches!(self.policy.protected[w].target, Target::LlcBytes(_));
        let misses_rose = match (intensity, calm_intensity) {
            (Some(i), Some(c)) => i > MISS_RISE * c,
            _ => true,
        };
        let cache = short.map(|s| s && (by_llc_target || misses_rose));
        let bandwidth = match (domain, best_traffic, capacity) {
            (Some(d), Some(b), Some(c)) => {
                let calm = self.calm_best_effort;
                let rose = calm
                    .is_none_or(|calm| b > TRAFFIC_RISE * calm && b - calm >= TRAFFIC_MATTERS * c);
                Some(d >= LOADED_SHARE * c && rose)
            }
            _ => None,
        };
        // a signal not measured cannot be ruled out
        let pressure = match (cache, bandwidth) {
            (None, None) => Pressure::Unmeasured,
            (Some(true), Some(true) | None) | (None, Some(true)) => Pressure::Both,
            (Some(true) | None, Some(false)) => Pressure::Cache,
            (Some(false), Some(true) | None) => Pressure::MemoryBandwidth,
            (Some(false), Some(false)) => Pressure::Neither,
        };
        Evidence {
            pressure,
            llc_bytes: r.llc_bytes,
            llc_needed_bytes: needed,
            traffic_per_ipc: intensity,
            calm_traffic_per_ipc: calm_intensity,
            domain_bytes_per_s: domain,
            capacity_bytes_per_s: capacity,
            capacity_source,
            best_effort_bytes_per_s: best_traffic,
            calm_best_effort_bytes_per_s: self.calm_best_effort,
        }
    }

    /// Learns the calm baselines (every protected workload meets its target).
    fn learn(&mut self, health: &[Option<f64>], protected: &[Reading], best: &[Reading]) {
        for (l, h) in self.learned.iter_mut().zip(health) {
            l.calm_seen |= h.is_some_and(|h| h >= self.policy.contended_below);
        }
        let calm = health
            .iter()
            .all(|h| h.is_none_or(|h| h >= self.policy.contended_below));
        if !calm || self.classes.iter().any(|c| c.pending.is_some()) {
            return;
        }
        for (l, r) in self.learned.iter_mut().zip(protected) {
            if let (Some(t), Some(ipc)) = (r.mem_bytes_per_s, r.ipc)
                && ipc > 0.0
            {
                l.calm_intensity = Some(ewma(l.calm_intensity, t / ipc));
            }
        }
        if let Some(b) = traffic(best) {
            self.calm_best_effort = Some(ewma(self.calm_best_effort, b));
        }
    }

    /// One interval: `protected[i]` and `best_effort[i]` are the readings of the policy's
    /// workloads in order, `settings[i]` the allocation of best-effort class `i` as read
    /// from the platform, `at` the time since the controller started. Returns at most one
    /// change per class; apply them, or report them in advisory mode. A change that could
    /// not be made should be told with [`Engine::not_made`].
    ///
    /// # Panics
    /// Never; slices shorter than the policy's lists leave the missing workloads out.
    pub fn observe(
        &mut self,
        at: Duration,
        protected: &[Reading],
        best_effort: &[Reading],
        settings: &[Setting],
    ) -> Vec<Decision> {
        let health = self.health(at, protected);
        self.health.clone_from(&health);
        self.last = Some(at);
        let mut out = Vec::new();
        // Floors first: the policy's state is the one the platform must be in.
        for (i, s) in settings.iter().enumerate().take(self.classes.len()) {
            let floor = self.floor(i);
            if s.ways < floor.ways || s.mba < floor.mba {
                let to = Setting {
                    ways: s.ways.max(floor.ways),
                    mba: s.mba.max(floor.mba),
                    ..*s
                };
                out.push(self.act(i, at, *s, to, ActionKind::RaiseToFloor, Reason::Floor, None));
            }
        }
        if !out.is_empty() {
            return out;
        }
        let total = traffic(protected).unwrap_or(0.0) + traffic(best_effort).unwrap_or(0.0);
        self.peak = self.peak.max(total);
        // The worst workload below target with the signature of contention: below
        // `contended_below` starts an episode, which goes on below `restored`.
        let threshold = self.threshold();
        let contended = health
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|h| (i, h)))
            .filter(|(_, h)| *h < threshold)
            .map(|(i, h)| {
                let r = protected.get(i).copied().unwrap_or_default();
                (i, h, self.classify(i, r, protected, best_effort))
            })
            .filter(|(_, _, e)| e.pressure != Pressure::Neither)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        self.episode = match &contended {
            Some((_, h, _)) => self.episode || *h < self.policy.contended_below,
            None => false,
        };
        let contended = contended.filter(|_| self.episode);
        self.learn(&health, protected, best_effort);
        self.judge(at, &health, contended.as_ref(), settings, &mut out);
        if !out.is_empty() {
            return out;
        }
        if self.classes.iter().any(|c| c.pending.is_some()) {
            return out;
        }
        if let Some((w, h, evidence)) = contended {
            if let Some(d) = self.squeeze(at, w, h, evidence, best_effort, settings) {
                out.push(d);
            }
            return out;
        }
        // No contention: the levers may be tried again, and what calmed down gets back.
        self.mba_slope_per_byte = None;
        for c in &mut self.classes {
            c.ways_blocked = false;
            c.mba_blocked = false;
            c.mba_slope = None;
            c.mba_base = None;
            c.floor_tried = false;
        }
        let (capacity, _) = self.capacity();
        let domain = traffic(protected).unwrap_or(0.0) + traffic(best_effort).unwrap_or(0.0);
        for i in 0..self
            .classes
            .len()
            .min(settings.len())
            .min(best_effort.len())
        {
            if let Some(d) = self.give_back(i, at, best_effort[i], settings[i], domain, capacity) {
                out.push(d);
            }
        }
        out
    }

    /// Judges the actions whose time has come (a give-back at once when contention
    /// follows it), pushing the reverts to `out`.
    fn judge(
        &mut self,
        at: Duration,
        health: &[Option<f64>],
        contended: Option<&(usize, f64, Evidence)>,
        settings: &[Setting],
        out: &mut Vec<Decision>,
    ) {
        let verify = self.policy.interval * self.policy.verify_intervals;
        for (i, &now) in settings.iter().enumerate().take(self.classes.len()) {
            let Some(p) = self.classes[i].pending else {
                continue;
            };
            if p.kind == ActionKind::GiveBack {
                if let Some((w, h, _)) = contended {
                    // the give-back caused it: undone, and the next one waits longer
                    let c = &mut self.classes[i];
                    c.pending = None;
                    c.holdoff = (c.holdoff * 2).min(MAX_HOLDOFF_FACTOR);
                    let reason = Reason::GiveBackHurt {
                        workload: self.policy.protected[*w].workload.name.clone(),
                        health: *h,
                    };
                    out.push(self.act(i, at, now, p.from, ActionKind::Revert, reason, None));
                } else if at >= p.at + verify {
                    let c = &mut self.classes[i];
                    c.pending = None;
                    c.holdoff = 1;
                }
                continue;
            }
            if at < p.at + verify {
                continue;
            }
            self.classes[i].pending = None;
            let after = health.get(p.workload).copied().flatten().unwrap_or(0.0);
            if after < p.health + MIN_GAIN && after < self.restored() {
                let reason = Reason::NoImprovement {
                    workload: self.policy.protected[p.workload].workload.name.clone(),
                    before: p.health,
                    after,
                };
                // a part whose limits are absolute bandwidth (AMD: one above what the class
                // moves does nothing) can show no gain half way and respond to a deep
                // throttle: before MBA is given up there, its floor is tried once, judged
                // against the health before the step (also above `contended_below`: a limit
                // that did not bind says nothing of a knee). Intel's delay always binds: a
                // half step that bought nothing means MBA does not help, and is undone.
                let floor = self.floor(i).mba;
                if p.kind == ActionKind::ThrottleMba
                    && self.facts.mba.absolute()
                    && !self.classes[i].floor_tried
                    && p.to.mba > floor
                {
                    self.classes[i].floor_tried = true;
                    let to = Setting { mba: floor, ..now };
                    let d = self.act(
                        i,
                        at,
                        now,
                        to,
                        ActionKind::ThrottleMba,
                        reason,
                        Some((p.workload, p.health)),
                    );
                    if let Some(q) = &mut self.classes[i].pending {
                        // judged as one step from where the search started
                        q.from = p.from;
                    }
                    out.push(d);
                    continue;
                }
                // a step that bought nothing measurable is undone; taken above
                // `contended_below`, it was the search past the knee: the episode ends
                if p.health >= self.policy.contended_below {
                    self.episode = false;
                }
                match p.kind {
                    ActionKind::ShrinkWays => self.classes[i].ways_blocked = true,
                    ActionKind::ThrottleMba => self.classes[i].mba_blocked = true,
                    _ => {}
                }
                out.push(self.act(i, at, now, p.from, ActionKind::Revert, reason, None));
            } else if p.kind == ActionKind::ThrottleMba {
                let base = self.classes[i].mba_base.take().unwrap_or(p.from.mba);
                let cut = f64::from(base.min(p.from.mba).saturating_sub(p.to.mba));
                if cut > 0.0 {
                    let slope = (after - p.health) / cut;
                    self.classes[i].mba_slope = Some(slope);
                    if let Some(d) = self.classes[i].demand.filter(|d| *d > 0.0) {
                        // health per byte/s: a unit of the limit holds back demand ÷ full
                        let full = f64::from(self.full_mba());
                        self.mba_slope_per_byte = Some(slope / (d / full));
                    }
                }
            }
        }
    }

    /// Records an action on class `i` and returns it.
    #[allow(clippy::too_many_arguments)]
    fn act(
        &mut self,
        i: usize,
        at: Duration,
        from: Setting,
        to: Setting,
        action: ActionKind,
        reason: Reason,
        pending: Option<(usize, f64)>,
    ) -> Decision {
        let c = &mut self.classes[i];
        c.last_action = Some(at);
        c.pending = pending.map(|(workload, health)| Pending {
            at,
            from,
            to,
            kind: action,
            workload,
            health,
        });
        Decision {
            class: i,
            action,
            from,
            to,
            reason,
        }
    }

    /// The squeeze for contended workload `w` (health `h`), if a class can give with the
    /// lever that can help.
    fn squeeze(
        &mut self,
        at: Duration,
        w: usize,
        h: f64,
        evidence: Evidence,
        best_effort: &[Reading],
        settings: &[Setting],
    ) -> Option<Decision> {
        let n = self.classes.len().min(settings.len());
        let reason = Reason::Contended {
            workload: self.policy.protected[w].workload.name.clone(),
            health: h,
            evidence,
        };
        let read = |i: usize| best_effort.get(i).copied().unwrap_or_default();
        // 1. ways, from the class holding the most LLC
        let ways = (0..n)
            .filter(|_| evidence.pressure.cache())
            .filter(|&i| !self.classes[i].ways_blocked && self.dwell_passed(&self.classes[i], at))
            .filter(|&i| settings[i].ways > self.floor(i).ways)
            .max_by_key(|&i| read(i).llc_bytes.unwrap_or(0));
        if let Some(i) = ways {
            let floor = self.floor(i).ways;
            let from = settings[i];
            let leave = self
                .wanted_ways()
                .map_or(floor, |want| self.facts.ways.saturating_sub(want));
            let to_ways = leave.clamp(floor, from.ways.saturating_sub(1).max(floor));
            let to = Setting {
                ways: to_ways,
                ..from
            };
            return Some(self.act(
                i,
                at,
                from,
                to,
                ActionKind::ShrinkWays,
                reason,
                Some((w, h)),
            ));
        }
        if !evidence.pressure.bandwidth() {
            return None;
        }
        // 2. MBA, from the class with the most memory traffic that may be throttled
        let mba = (0..n)
            .filter(|&i| self.may_throttle(i, settings[i]))
            .filter(|&i| self.dwell_passed(&self.classes[i], at))
            .max_by(|&a, &b| {
                let t = |i| read(i).mem_bytes_per_s.unwrap_or(0.0);
                t(a).total_cmp(&t(b))
            })?;
        let from = settings[mba];
        let limit = if self.beyond_every_limit(mba, h, &evidence, best_effort, settings) {
            self.floor(mba).mba
        } else {
            self.next_limit(mba, from.mba, h, read(mba))
        };
        let to = Setting { mba: limit, ..from };
        let full = f64::from(self.full_mba());
        let base = self.effective_mba(mba, from.mba, read(mba));
        let c = &mut self.classes[mba];
        c.mba_base = Some(base);
        c.demand = read(mba)
            .mem_bytes_per_s
            .map(|t| t * full / f64::from(from.mba.max(1)));
        Some(self.act(
            mba,
            at,
            from,
            to,
            ActionKind::ThrottleMba,
            reason,
            Some((w, h)),
        ))
    }

    /// Whether class `i` may be MBA-throttled further now: the policy gives it an MBA floor,
    /// its MBA throttles no core a protected workload runs on, MBA has not been given up on
    /// it in this contention, and its limit `s` is above its floor.
    fn may_throttle(&self, i: usize, s: Setting) -> bool {
        self.policy.best_effort[i].throttles_mba()
            && !self
                .facts
                .mba_shares_protected_core
                .get(i)
                .copied()
                .unwrap_or(false)
            && !self.classes[i].mba_blocked
            && s.mba > self.floor(i).mba
    }

    /// Whether class `i`'s first MBA step in this contention goes straight to its floor
    /// ([module docs](self)): nothing judged tells the health a percent buys (no MBA step
    /// judged, this class or another), the workload is below `contended_below` (health
    /// `h`), and even every class that may be throttled at its floor would leave the
    /// domain loaded: the domain's traffic (`evidence`) less what they would give up (each
    /// class's traffic × (1 − floor ÷ its limit), `best_effort` and `settings` in policy
    /// order) is still at least [`LOADED_SHARE`] of the capacity. No limit above the floor
    /// can then end the pressure (the rest is traffic no limit reaches: a class without an
    /// MBA floor, one on protected cores), so a half-way probe would only cost a step.
    /// False where a traffic or the capacity is not measured.
    fn beyond_every_limit(
        &self,
        i: usize,
        h: f64,
        evidence: &Evidence,
        best_effort: &[Reading],
        settings: &[Setting],
    ) -> bool {
        if self.classes[i].mba_slope.is_some()
            || self.mba_slope_per_byte.is_some()
            || h >= self.policy.contended_below
        {
            return false;
        }
        let (Some(domain), Some(capacity)) =
            (evidence.domain_bytes_per_s, evidence.capacity_bytes_per_s)
        else {
            return false;
        };
        let mut removable = 0.0;
        for (j, s) in settings.iter().enumerate().take(self.classes.len()) {
            if !self.may_throttle(j, *s) {
                continue;
            }
            let Some(t) = best_effort.get(j).and_then(|r| r.mem_bytes_per_s) else {
                return false;
            };
            let floor = f64::from(self.floor(j).mba);
            removable += t * (1.0 - floor / f64::from(s.mba.max(1)));
        }
        domain - removable >= LOADED_SHARE * capacity
    }

    /// The next MBA limit of class `i` in the search for the least that restores the
    /// target ([module docs](self)): from `now` (in the part's unit: percent, or eighths
    /// of a GB/s), the workload at health `h`.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        clippy::many_single_char_names
    )]
    fn next_limit(&self, i: usize, now: u32, h: f64, r: Reading) -> u32 {
        let floor = self.floor(i).mba;
        let full = f64::from(self.full_mba());
        let g = self.granule();
        let effective = self.effective_mba(i, now, r);
        let half = f64::midpoint(f64::from(effective), f64::from(floor));
        let own = self.classes[i].mba_slope;
        let demand = r.mem_bytes_per_s.map(|t| t * full / f64::from(now.max(1)));
        let shared = self
            .mba_slope_per_byte
            .zip(demand)
            .map(|(s, d)| s * d / full);
        let want = match own.or(shared) {
            Some(s) if s > 0.0 => {
                let need = (self.threshold() + SEARCH_MARGIN - h) / s;
                let cut = (need / f64::from(g)).ceil().max(1.0) * f64::from(g);
                let secant = f64::from(effective) - cut;
                // past `contended_below` the gain flattens out (the knee): no more than
                // half way to the floor, so that a step past it costs little
                if h >= self.policy.contended_below {
                    secant.max(half)
                } else {
                    secant
                }
            }
            _ => half,
        };
        let want = self.round_mba(want.clamp(0.0, full).ceil() as u32);
        want.max(floor).min(now.saturating_sub(g).max(floor))
    }

    /// The limit class `i` (at limit `now`, reading `r`) is effectively held to, in the
    /// part's unit: `now`, or where limits are absolute bandwidth (AMD: one above the
    /// traffic a domain carries does nothing) the limit its traffic in its busiest domain
    /// uses, in eighths of a GB/s, if lower.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped
    fn effective_mba(&self, i: usize, now: u32, r: Reading) -> u32 {
        let per_domain = r.peak_domain_bytes_per_s.or_else(|| {
            r.mem_bytes_per_s
                .map(|t| t / f64::from(self.span(&self.facts.best_effort_spans, i)))
        });
        match per_domain {
            Some(t) if self.facts.mba.absolute() => {
                let full = f64::from(self.full_mba());
                now.min((t / AMD_UNIT_BYTES_PER_S).ceil().clamp(1.0, full) as u32)
            }
            _ => now,
        }
    }

    /// Ways and bandwidth back for class `i` when its demand fell ([module docs](self)):
    /// `domain` is the traffic of every workload now, `capacity` the domain's.
    #[allow(clippy::cast_precision_loss, clippy::many_single_char_names)] // bytes as a share
    fn give_back(
        &mut self,
        i: usize,
        at: Duration,
        r: Reading,
        s: Setting,
        domain: f64,
        capacity: Option<f64>,
    ) -> Option<Decision> {
        let full = self.facts.ways;
        let no_limit = self.full_mba();
        if s.ways >= full && s.mba >= no_limit {
            return None;
        }
        let c = &self.classes[i];
        let wait = self.policy.interval * self.policy.dwell_intervals * c.holdoff;
        if c.last_action.is_some_and(|l| at < l + wait) {
            return None;
        }
        let (bytes, span) = match r.squeezed_llc {
            Some((b, n)) => (Some(b), n.max(1)),
            None => (r.llc_bytes, self.span(&self.facts.best_effort_spans, i)),
        };
        let held = u64::from(s.ways) * self.facts.way_bytes * u64::from(span);
        let share = bytes.map(|b| b as f64 / held.max(1) as f64);
        let ways = if s.ways < full && share.is_some_and(|sh| sh < SUBSIDED_SHARE) {
            (s.ways.max(1) * 2).min(full)
        } else {
            s.ways
        };
        let g = self.granule();
        let least = no_limit * u32::from(GIVE_BACK_STEP) / 100;
        let next = if s.mba >= no_limit {
            no_limit
        } else {
            let half = s.mba + (no_limit - s.mba).div_ceil(2);
            let step = self.round_mba(half.max(s.mba.saturating_add(g)));
            if no_limit - step.min(no_limit) < least {
                no_limit
            } else {
                step
            }
        };
        let mut projected = None;
        let mba = if next > s.mba {
            let t = r.mem_bytes_per_s;
            let scaled = t.map(|t| t * f64::from(next) / f64::from(s.mba.max(1)));
            projected = scaled.zip(t).map(|(sc, t)| domain - t + sc);
            let fits = projected
                .zip(capacity)
                .is_some_and(|(p, cap)| p < LOADED_SHARE * cap);
            let demand_fell = t.zip(c.demand).is_some_and(|(t, d)| {
                t * f64::from(no_limit) / f64::from(s.mba.max(1)) < SUBSIDED_SHARE * d
            });
            // where limits are absolute bandwidth, a class moving well under its limit in
            // its busiest domain no longer presses against it
            let per_domain = r
                .peak_domain_bytes_per_s
                .or_else(|| t.map(|t| t / f64::from(self.span(&self.facts.best_effort_spans, i))));
            let unbound = self
                .facts
                .mba
                .bytes_per_s(s.mba)
                .zip(per_domain)
                .is_some_and(|(limit, t)| t < SUBSIDED_SHARE * limit);
            if fits || demand_fell || unbound {
                next
            } else {
                s.mba
            }
        } else {
            s.mba
        };
        if ways == s.ways && mba == s.mba {
            return None;
        }
        let to = Setting { ways, mba, ..s };
        if mba >= no_limit {
            self.classes[i].demand = None;
        }
        let reason = Reason::Subsided {
            occupancy_share: share,
            traffic_bytes_per_s: r.mem_bytes_per_s,
            projected_domain_bytes_per_s: projected,
            capacity_bytes_per_s: capacity,
        };
        Some(self.act(i, at, s, to, ActionKind::GiveBack, reason, Some((0, 0.0))))
    }

    /// Each protected workload's health at the last [`Engine::observe`], in policy order.
    #[must_use]
    pub fn last_health(&self) -> &[Option<f64>] {
        &self.health
    }

    /// Tells the engine that `d` was not made (a write failed): nothing waits to be judged
    /// for its class, and its dwell starts again.
    pub fn not_made(&mut self, d: &Decision) {
        if let Some(c) = self.classes.get_mut(d.class) {
            c.pending = None;
        }
    }
}
