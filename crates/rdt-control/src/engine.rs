//! The controller's decisions, without I/O: each interval it is given the readings of every
//! workload and the allocation of every best-effort class, and answers with the changes to
//! make ([`Engine::observe`]). [`crate::Agent`] reads and writes the platform around it.
//!
//! # Health
//! A protected workload's health is its reading divided by its target
//! ([`rdt_config::policy::Target`]): IPC ÷ the IPC target, LLC occupancy ÷ the occupancy
//! target, or, for `alone`, IPC ÷ the best IPC it has shown (its LLC occupancy ÷ the most
//! it has held where there is no PMU). The learned best decays by [`BASELINE_DECAY_PER_S`]
//! of itself per second, so that a lasting change of the workload itself (a new phase,
//! less load) becomes its new normal within minutes, not at once. A workload is contended
//! when its health is below the policy's `contended_below`. A baseline is only learned
//! from what the workload shows: one that is squeezed from the moment the controller starts
//! looks healthy until it has been better.
//!
//! # Actions (one at a time, each judged before the next)
//! While a protected workload is contended and no action waits to be judged:
//! 1. The best-effort class holding the most LLC, whose ways are above its floor, is given
//!    the ways the protected workloads leave: all ways but those their LLC target (or,
//!    for `alone`, the most they have held) needs in one domain, never fewer than its
//!    floor nor as many as it has; without such a size, its floor. One step, as the
//!    seed paper's operator did (`llc:2=0x3`).
//! 2. Once every class is at its floor of ways (or that lever did not help), the class with
//!    the most memory traffic that may be throttled has its MBA halved, never below its
//!    floor (Intel's MBA granularity applies: [`Engine::new`]'s `mba_granularity`).
//!
//! After `verify_intervals`, an action is judged: if the health of the workload that
//! caused it did not rise by [`MIN_GAIN`], the action is undone and that lever of that
//! class is not used again until the contention ends. A class is acted on at most once
//! every `dwell_intervals`.
//!
//! When no protected workload is contended, a squeezed class whose LLC occupancy is below
//! half of what its ways hold ([`SUBSIDED_SHARE`]: it no longer fills them: the aggressor
//! stopped or shrank) gets ways and bandwidth back, doubling both each step (every
//! `dwell_intervals`) until it has every way and no throttling. If the contention comes
//! back soon after ([`FLAP_INTERVALS`]), the next give-back of that class waits twice as
//! long (up to [`MAX_HOLDOFF_FACTOR`] times `dwell_intervals`): hysteresis against a
//! workload that calms and flares.
//!
//! A class found below its floor (another program wrote it, or the policy was tightened)
//! is raised to it first ([`Reason::Floor`]).

use std::time::Duration;

use rdt_config::policy::{Policy, Target};

/// Share of itself a learned baseline loses per second (0.05 % per second: about 3 % a
/// minute, a quarter in ten minutes).
pub const BASELINE_DECAY_PER_S: f64 = 0.0005;

/// The rise of health (share of the target) that counts as an action having helped.
pub const MIN_GAIN: f64 = 0.01;

/// A squeezed class gives back when its LLC occupancy is below this share of what its
/// ways hold.
pub const SUBSIDED_SHARE: f64 = 0.5;

/// A contention within this many intervals of a give-back doubles the class's hold-off.
pub const FLAP_INTERVALS: u32 = 20;

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
}

/// A best-effort class's allocation: the L3 ways it may fill (the fewest over the domains
/// acted on) and its MBA in percent (100: not throttled).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Setting {
    /// L3 ways, contiguous from way 0.
    pub ways: u32,
    /// MBA, percent of the memory bandwidth (100 = no throttling).
    pub mba_percent: u8,
}

/// What an action does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Fewer L3 ways.
    ShrinkWays,
    /// More MBA throttling.
    ThrottleMba,
    /// An action undone: it did not help.
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

/// Why an action is taken.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    /// A protected workload is below `contended_below` of its target.
    Contended {
        /// The workload.
        workload: String,
        /// Its health, share of its target.
        health: f64,
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
    /// The class no longer fills its ways and no protected workload is contended.
    Subsided {
        /// Its LLC occupancy, share of what its ways hold.
        occupancy_share: f64,
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

/// The platform facts the decisions need, from its capabilities.
#[derive(Clone, Debug, PartialEq)]
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
    /// MBA granularity in percent (Intel: 10), when the platform has percent MBA.
    pub mba_granularity: Option<u8>,
}

/// What was done and is waiting to be judged.
#[derive(Clone, Copy, Debug)]
struct Pending {
    at: Duration,
    from: Setting,
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
    last_give_back: Option<Duration>,
    holdoff: u32,
}

/// A protected workload's learned baseline.
#[derive(Clone, Copy, Debug, Default)]
struct Learned {
    ipc: f64,
    llc: f64,
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
        }
    }

    /// The policy.
    #[must_use]
    pub const fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The floor of best-effort class `i`: its ways and its MBA percent.
    #[must_use]
    pub fn floor(&self, i: usize) -> Setting {
        let b = &self.policy.best_effort[i];
        let ways = b.min_ways.max(self.facts.min_ways).min(self.facts.ways);
        let mba = b.min_mba_percent.map_or(100, |p| self.round_mba(p).max(p));
        Setting {
            ways,
            mba_percent: mba,
        }
    }

    /// `p` rounded up to the MBA granularity, at most 100.
    fn round_mba(&self, p: u8) -> u8 {
        let g = self.facts.mba_granularity.unwrap_or(1).max(1);
        let up = u16::from(p).div_ceil(u16::from(g)) * u16::from(g);
        u8::try_from(up.min(100)).unwrap_or(100)
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
            .map(|((p, learned), r)| match p.target {
                Target::Ipc(t) => r.ipc.map(|ipc| ipc / t),
                Target::LlcBytes(t) => r.llc_bytes.map(|b| b as f64 / t as f64),
                Target::Alone => {
                    learned.ipc *= keep;
                    learned.llc *= keep;
                    if let Some(ipc) = r.ipc {
                        learned.ipc = learned.ipc.max(ipc);
                    }
                    if let Some(b) = r.llc_bytes {
                        learned.llc = learned.llc.max(b as f64);
                    }
                    match (r.ipc, r.llc_bytes) {
                        (Some(ipc), _) if learned.ipc > 0.0 => Some(ipc / learned.ipc),
                        (None, Some(b)) if learned.llc > 0.0 => Some(b as f64 / learned.llc),
                        _ => None,
                    }
                }
            })
            .collect()
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
        for (i, (p, l)) in self.policy.protected.iter().zip(&self.learned).enumerate() {
            let bytes = match p.target {
                Target::LlcBytes(t) => t as f64,
                Target::Alone if l.llc > 0.0 => l.llc,
                _ => return None,
            };
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
            if s.ways < floor.ways || s.mba_percent < floor.mba_percent {
                let to = Setting {
                    ways: s.ways.max(floor.ways),
                    mba_percent: s.mba_percent.max(floor.mba_percent),
                };
                out.push(self.act(i, at, *s, to, ActionKind::RaiseToFloor, Reason::Floor, None));
            }
        }
        if !out.is_empty() {
            return out;
        }
        let worst = health
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|h| (i, h)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let contended = worst.filter(|(_, h)| *h < self.policy.contended_below);
        // Judge what waits to be judged.
        let verify = self.policy.interval * self.policy.verify_intervals;
        for (i, &now) in settings.iter().enumerate().take(self.classes.len()) {
            let Some(p) = self.classes[i].pending else {
                continue;
            };
            if at < p.at + verify {
                continue;
            }
            self.classes[i].pending = None;
            let after = health.get(p.workload).copied().flatten().unwrap_or(0.0);
            if after < p.health + MIN_GAIN && after < self.policy.contended_below {
                match p.kind {
                    ActionKind::ShrinkWays => self.classes[i].ways_blocked = true,
                    ActionKind::ThrottleMba => self.classes[i].mba_blocked = true,
                    _ => {}
                }
                let reason = Reason::NoImprovement {
                    workload: self.policy.protected[p.workload].workload.name.clone(),
                    before: p.health,
                    after,
                };
                out.push(self.act(i, at, now, p.from, ActionKind::Revert, reason, None));
            }
        }
        if !out.is_empty() {
            return out;
        }
        if self.classes.iter().any(|c| c.pending.is_some()) {
            return out;
        }
        if let Some((w, h)) = contended {
            if let Some(d) = self.squeeze(at, w, h, best_effort, settings) {
                out.push(d);
            }
            return out;
        }
        // No contention: the levers may be tried again, and what calmed down gets back.
        for c in &mut self.classes {
            c.ways_blocked = false;
            c.mba_blocked = false;
        }
        for i in 0..self
            .classes
            .len()
            .min(settings.len())
            .min(best_effort.len())
        {
            if let Some(d) = self.give_back(i, at, best_effort[i], settings[i]) {
                out.push(d);
            }
        }
        out
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
            kind: action,
            workload,
            health,
        });
        if matches!(action, ActionKind::ShrinkWays | ActionKind::ThrottleMba) {
            // contention soon after a give-back: wait longer before the next one
            // (once per give-back: the steps of one squeeze are one flap)
            let flap = self.policy.interval * FLAP_INTERVALS;
            if c.last_give_back.take().is_some_and(|g| at < g + flap) {
                c.holdoff = (c.holdoff * 2).min(MAX_HOLDOFF_FACTOR);
            }
        }
        if action == ActionKind::GiveBack {
            c.last_give_back = Some(at);
        }
        Decision {
            class: i,
            action,
            from,
            to,
            reason,
        }
    }

    /// The squeeze for contended workload `w` (health `h`), if a class can give.
    fn squeeze(
        &mut self,
        at: Duration,
        w: usize,
        h: f64,
        best_effort: &[Reading],
        settings: &[Setting],
    ) -> Option<Decision> {
        let n = self.classes.len().min(settings.len());
        let reason = || Reason::Contended {
            workload: self.policy.protected[w].workload.name.clone(),
            health: h,
        };
        let read = |i: usize| best_effort.get(i).copied().unwrap_or_default();
        // 1. ways, from the class holding the most LLC
        let ways = (0..n)
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
            let r = reason();
            return Some(self.act(i, at, from, to, ActionKind::ShrinkWays, r, Some((w, h))));
        }
        // 2. MBA, from the class with the most memory traffic
        let mba = (0..n)
            .filter(|&i| self.policy.best_effort[i].min_mba_percent.is_some())
            .filter(|&i| !self.classes[i].mba_blocked && self.dwell_passed(&self.classes[i], at))
            .filter(|&i| settings[i].mba_percent > self.floor(i).mba_percent)
            .max_by(|&a, &b| {
                let t = |i| read(i).mem_bytes_per_s.unwrap_or(0.0);
                t(a).total_cmp(&t(b))
            })?;
        let from = settings[mba];
        let half = self.round_mba(from.mba_percent / 2);
        let to = Setting {
            mba_percent: half
                .max(self.floor(mba).mba_percent)
                .min(from.mba_percent.saturating_sub(1)),
            ..from
        };
        let r = reason();
        Some(self.act(mba, at, from, to, ActionKind::ThrottleMba, r, Some((w, h))))
    }

    /// Ways and bandwidth back for class `i`, when it no longer fills its ways.
    #[allow(clippy::cast_precision_loss)] // bytes as a share
    fn give_back(&mut self, i: usize, at: Duration, r: Reading, s: Setting) -> Option<Decision> {
        let full = Setting {
            ways: self.facts.ways,
            mba_percent: 100,
        };
        if s.ways >= full.ways && s.mba_percent >= 100 {
            return None;
        }
        let c = &self.classes[i];
        let wait = self.policy.interval * self.policy.dwell_intervals * c.holdoff;
        if c.last_action.is_some_and(|l| at < l + wait) {
            return None;
        }
        let span = self.span(&self.facts.best_effort_spans, i);
        let held = u64::from(s.ways) * self.facts.way_bytes * u64::from(span);
        let share = r.llc_bytes? as f64 / held.max(1) as f64;
        if share >= SUBSIDED_SHARE {
            return None;
        }
        let to = Setting {
            ways: (s.ways.max(1) * 2).min(full.ways),
            mba_percent: if s.mba_percent >= 100 {
                100
            } else {
                self.round_mba(u8::try_from((u16::from(s.mba_percent) * 2).min(100)).unwrap_or(100))
            },
        };
        let reason = Reason::Subsided {
            occupancy_share: share,
        };
        Some(self.act(i, at, s, to, ActionKind::GiveBack, reason, None))
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
