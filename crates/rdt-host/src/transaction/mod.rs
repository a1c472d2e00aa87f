//! The transaction's host side: a plan applied under the writers' lock with its intent
//! journal in the run directory ([`ApplyPlan::apply`], [`run`]), and the roll-back of the
//! transactions of processes killed half-way ([`recover`]).
//!
//! The transaction itself, what it checks and writes and how it undoes, is rdt-core's
//! ([`rdt_core::transaction`]: [`Plan`], [`Change`], [`Step`], [`Outcome`]); this module
//! adds the file it keeps while it runs. The facade shows both as one module
//! (`rdt_pqos::transaction`).
//!
//! # Examples
//! ```
//! use rdt_core::fake::FakeBackend;
//! use rdt_core::transaction::{Change, MaskScope, Outcome, Plan};
//! use rdt_core::{CacheBitmask, CacheDomain, CatResource, ClassId, LogicalCpu};
//! use rdt_host::transaction::ApplyPlan;
//!
//! let mut b = FakeBackend::broadwell_2s();
//! let class = ClassId::new(1);
//! let mut changes: Vec<Change> = [0, 1]
//!     .map(|d| Change::Cat {
//!         resource: CatResource::L3,
//!         domain: CacheDomain::new(d),
//!         class,
//!         scope: MaskScope::Both,
//!         mask: CacheBitmask::new(0xf).unwrap(),
//!     })
//!     .into();
//! changes.push(Change::Cpu { cpu: LogicalCpu::new(2), class });
//! b.fail_nth_write(3); // the association is refused...
//! let plan = Plan::new(&mut b, &changes).unwrap();
//! assert!(matches!(plan.apply(&mut b), Outcome::RolledBack { .. }));
//! assert_eq!(b.l3_mask(0, 1), b.l3_mask(0, 0)); // ...and the masks are back
//! ```

use std::path::Path;

use rdt_core::transaction::{Change, Outcome, Plan, PlanError, Step, with_writers};
use rdt_core::{Backend, BackendExt};

use journal::Journal;

mod journal;

pub use journal::recover;
#[cfg(test)]
mod tests;

/// A [`Plan`] applied as a program applies it: under the writers' lock, journaled.
pub trait ApplyPlan {
    /// Writes the steps in order under the writers' lock ([`BackendExt::hold_writers`]),
    /// with the journal recorded first where the backend has a run directory (module
    /// docs); on the first failure undoes that write and the ones before it, newest first,
    /// and reports which of [`Outcome`]'s cases happened. The journal goes after
    /// [`Outcome::Applied`] and [`Outcome::RolledBack`]; after
    /// [`Outcome::PartlyChanged`] it stays, so the next open tries the undo again. An empty
    /// plan takes no lock and writes nothing.
    fn apply<B: Backend>(self, backend: &mut B) -> Outcome<B::Error>;
}

impl ApplyPlan for Plan {
    fn apply<B: Backend>(self, backend: &mut B) -> Outcome<B::Error> {
        if self.is_empty() {
            return Outcome::Applied(Vec::new());
        }
        with_writers(backend, |backend| journaled(self, backend))
            .unwrap_or_else(Outcome::NotApplied)
    }
}

/// [`ApplyPlan::apply`] under the lock: the journal around the writes ([`Plan::write`]).
fn journaled<B: Backend>(plan: Plan, backend: &mut B) -> Outcome<B::Error> {
    let journal = match backend.run_dir().map(Path::to_owned) {
        None => None,
        Some(dir) => {
            let steps: Vec<Step> = plan.steps().iter().map(|(_, s)| s.clone()).collect();
            let begun = Journal::begin(
                &dir,
                backend.interface(),
                plan.new_groups(),
                plan.names(),
                &steps,
            );
            match begun {
                Ok(j) => Some(j),
                Err(e) => return Outcome::NotApplied(journal::journal_error(&dir, &e).into()),
            }
        }
    };
    let outcome = plan.write(backend);
    if let Some(j) = journal {
        if matches!(outcome, Outcome::PartlyChanged { .. }) {
            drop(j); // unlocked, kept: the next open undoes the rest
        } else if let Err(e) = j.end() {
            log::warn!("the transaction is over, but its journal stays: {e}");
        }
    }
    outcome
}

/// Plans `changes` and applies them as one transaction under the writers' lock, held from
/// the first read of the current state to the last write, so no other writer changes the
/// state in between: [`Plan::new`] then [`ApplyPlan::apply`].
///
/// # Errors
/// As [`Plan::new`] (nothing written). A lock that cannot be taken is
/// [`Outcome::NotApplied`].
pub fn run<B: Backend>(
    backend: &mut B,
    changes: &[Change],
) -> Result<Outcome<B::Error>, PlanError<B::Error>> {
    match with_writers(backend, |b| Plan::new(b, changes).map(|plan| plan.apply(b))) {
        Ok(outcome) => outcome,
        Err(e) => Ok(Outcome::NotApplied(e)),
    }
}
