//! RMIDs: picking a free one per L3 domain (pqos `hw_mon_assoc_unused`), the SNC split of
//! RMIDs between the nodes of an L3, giving them back, and reclaiming those of dead runs
//! ([`crate::claims`]).

use rdt_core::{CacheDomain, CpuSet, LogicalCpu, PmuSource, Reclaimed, RequestError};

use crate::claims;
use crate::regs::{self, IA32_PQR_ASSOC};
use crate::{MsrError, MsrIo};

use super::MsrBackend;
use super::monitoring::Context;

impl<M: MsrIo, P: PmuSource> MsrBackend<M, P> {
    /// Gives back the RMIDs of runs that ended without stopping their monitoring: for
    /// every claim file in the claims directory whose process is gone (its `flock` is
    /// free), each listed CPU whose IA32_PQR_ASSOC still holds the listed RMID is put back
    /// on RMID 0 (COS kept) and, on an ABMC part, the counters of its L3 domain that count
    /// that RMID are unassigned; a CPU tagged by someone else since is left alone. Returns what
    /// was given back; nothing without [`MsrBackend::with_run_dir`].
    ///
    /// # Errors
    /// [`MsrError::Claims`] when the directory cannot be listed; a register access error
    /// (the claim is kept for the next attempt).
    pub fn reclaim_dead_runs(&mut self) -> Result<Vec<Reclaimed>, MsrError> {
        let Some(dir) = self.claims.as_ref().map(|c| c.dir().to_owned()) else {
            return Ok(Vec::new());
        };
        let counters = self.caps.amd_mbm.abmc_counters.unwrap_or(0);
        claims::reclaim(&dir, &mut self.io, &mut |io, cpu, rmid| {
            super::abmc::unassign_rmid(io, cpu, rmid, counters)
        })
    }

    /// The SNC nodes per L3 and the RMIDs of each (`(1, 0)` without SNC): the kernel
    /// divides `num_rmids` between the nodes (`logical_rmid_to_physical_rmid`).
    pub(super) fn snc_split(&self) -> (u32, u32) {
        if self.snc <= 1 {
            return (1, 0);
        }
        let per_node = self.caps.monitoring.get().map_or(0, |m| m.num_rmids) / self.snc;
        (self.snc, per_node)
    }

    /// Puts every CPU of `cpus` back on RMID 0, keeping its COS, writing IA32_PQR_ASSOC only
    /// where the RMID is not already 0. Every CPU is attempted; the first error is returned.
    pub(super) fn release_rmids(
        &mut self,
        cpus: impl IntoIterator<Item = LogicalCpu>,
    ) -> Result<(), MsrError> {
        let mut first_err = None;
        for cpu in cpus {
            let res = self.io.read(cpu, IA32_PQR_ASSOC).and_then(|old| {
                if regs::pqr_rmid(old) == 0 {
                    Ok(())
                } else {
                    self.io
                        .write(cpu, IA32_PQR_ASSOC, regs::pqr_with_rmid(old, 0))
                }
            });
            if let Err(e) = res {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// RMIDs 0..num_rmids of an L3 (divided between the SNC nodes of an L3); IA32_PQR_ASSOC
    /// as pqos uses it holds 10 bits.
    fn rmid_limit(&self) -> u32 {
        let (nodes, _) = self.snc_split();
        self.caps.monitoring.get().map_or(0, |m| {
            (m.num_rmids / nodes).min(u32::try_from(regs::RMID_MASK + 1).unwrap_or(u32::MAX))
        })
    }

    /// Which RMIDs below [`Self::rmid_limit`] L3 domain `id` has in use: RMID 0 (everyone's
    /// default), those of IA32_PQR_ASSOC of its CPUs outside `cpus` (known to hold RMID 0)
    /// and those of this backend's groups there (pqos `hw_mon_assoc_unused`). Reads only.
    fn used_rmids(&mut self, id: CacheDomain, cpus: &CpuSet) -> Result<Vec<bool>, MsrError> {
        let dom = self.l3.binary_search_by_key(&id, |d| d.id).map_err(|_| {
            RequestError::NoSuchDomain {
                resource: "L3",
                domain: id,
                known: None,
            }
        })?;
        let mut used = vec![false; self.rmid_limit() as usize];
        if let Some(u) = used.get_mut(0) {
            *u = true; // RMID 0 is everyone's default, never allocated
        }
        for i in 0..self.l3[dom].cpus.len() {
            let cpu = self.l3[dom].cpus[i];
            if cpus.contains(cpu) {
                continue; // checked by the caller: RMID 0
            }
            let r = regs::pqr_rmid(self.io.read(cpu, IA32_PQR_ASSOC)?); // bits 9:0
            if let Some(u) = used.get_mut(r as usize) {
                *u = true;
            }
        }
        for ctx in self
            .groups
            .iter()
            .flat_map(|g| &g.contexts)
            .filter(|c| c.domain == id)
        {
            if let Some(u) = used.get_mut(ctx.rmid as usize) {
                *u = true;
            }
        }
        for &r in &self.reserved {
            if let Some(u) = used.get_mut(r as usize) {
                *u = true;
            }
        }
        Ok(used)
    }

    /// Makes `rmids` unavailable to the groups started from now on (until the next call):
    /// RMIDs that agents other than CPUs hold, which no IA32_PQR_ASSOC shows, such as the
    /// RMID tags of I/O RDT channels monitored by another run (pqos v26.03 checks the
    /// channels' tags too when it picks an RMID).
    pub fn reserve_rmids(&mut self, rmids: Vec<u32>) {
        self.reserved = rmids;
    }

    /// One context per L3 domain spanned by `members`, each with the lowest RMID >= 1 that
    /// no IA32_PQR_ASSOC of the domain (outside `cpus`, known to hold RMID 0) and no group of
    /// this backend uses (pqos `hw_mon_assoc_unused`). Reads only; writes nothing.
    pub(super) fn allocate_rmids(
        &mut self,
        cpus: &CpuSet,
        members: &[(LogicalCpu, Option<CacheDomain>)],
    ) -> Result<Vec<Context>, MsrError> {
        let mut spanned: Vec<CacheDomain> = members.iter().filter_map(|m| m.1).collect();
        spanned.sort_unstable();
        spanned.dedup();
        let mut contexts = Vec::with_capacity(spanned.len());
        for id in spanned {
            let used = self.used_rmids(id, cpus)?;
            let out_of_rmids = || RequestError::OutOfRmids {
                scope: format!("L3 domain {id}"),
                limbo: false,
                in_use: Vec::new(),
            };
            let rmid = used.iter().position(|u| !u).ok_or_else(out_of_rmids)?;
            let cpu = members
                .iter()
                .find(|m| m.1 == Some(id))
                .map(|m| m.0)
                .ok_or(RequestError::NoSuchDomain {
                    resource: "L3",
                    domain: id,
                    known: None,
                })?;
            contexts.push(Context {
                domain: id,
                rmid: u32::try_from(rmid).map_err(|_| out_of_rmids())?,
                cpu,
                counters: Vec::new(),
            });
        }
        Ok(contexts)
    }

    /// One context per L3 domain of the platform (read on its lowest CPU), all with the same
    /// RMID: the lowest >= 1 that no domain has in use ([`Self::used_rmids`]) and that is not
    /// in `taken`. For an agent that tags its traffic with one RMID wherever it lands (an
    /// I/O RDT channel's RMID tagging register). Reads only; writes nothing.
    pub(super) fn allocate_shared_rmid(&mut self, taken: &[u32]) -> Result<Vec<Context>, MsrError> {
        let domains: Vec<(CacheDomain, Option<LogicalCpu>)> = self
            .l3
            .iter()
            .map(|d| (d.id, d.cpus.first().copied()))
            .collect();
        let mut used = vec![false; self.rmid_limit() as usize];
        for &(id, _) in &domains {
            for (u, d) in used.iter_mut().zip(self.used_rmids(id, &CpuSet::new())?) {
                *u |= d;
            }
        }
        for &t in taken {
            if let Some(u) = used.get_mut(t as usize) {
                *u = true;
            }
        }
        let out_of_rmids = || RequestError::OutOfRmids {
            scope: "every L3 domain at once (an I/O RDT channel tags one RMID)".to_owned(),
            limbo: false,
            in_use: Vec::new(),
        };
        let rmid = used.iter().position(|u| !u).ok_or_else(out_of_rmids)?;
        let rmid = u32::try_from(rmid).map_err(|_| out_of_rmids())?;
        Ok(domains
            .into_iter()
            .filter_map(|(domain, cpu)| {
                Some(Context {
                    domain,
                    rmid,
                    cpu: cpu?,
                    counters: Vec::new(),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests;
