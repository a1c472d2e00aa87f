//! Region-aware throttling (RDT 1.3, the MMIO interface): a best-effort workload whose
//! policy names `mba_regions` ([`rdt_config::policy::BestEffort::mba_regions`]) has the
//! engine's MBA steps applied to those memory regions only, as the maximum-bandwidth
//! control of its class in each region ([`rdt_core::RegionOps`]), its MBA and its other
//! regions left alone. So a best-effort stream whose traffic goes to a CXL region is
//! throttled there while its DDR traffic, and the protected workloads sharing the DDR, are
//! not touched by the action.
//!
//! The engine ([`crate::engine`]) stays in percent: a step to `p` % is `p` % of the control
//! window (the value of full bandwidth), rounded half up; a control read back is its share
//! of the window in percent, rounded half up (with a window of at least 100 units, as
//! RDT 1.3's 9-bit fields have, the round trip gives `p` back).
//!
//! # References
//! Intel RDT Architecture Specification rev 1.3, ch. 3 (MARC: optimal, minimum and maximum
//! bandwidth per class and region); pqos v26.03 `--alloc-mem-regions`, `--alloc-max-bw`.

use std::collections::BTreeMap;

use rdt_config::policy::Policy;
use rdt_core::transaction::Change;
use rdt_core::{Backend, BwControl, CacheDomain, ClassId, MemRegion, RegionBw};

/// Per best-effort workload, the memory regions it is throttled in (empty: MBA), and the
/// platform's control window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RegionThrottle {
    regions: Vec<Vec<MemRegion>>,
    window: u16,
}

impl RegionThrottle {
    /// The policy's `mba_regions` checked against `backend`: a platform with region MBA
    /// controls (the MMIO interface) and regions that its MRRM has.
    ///
    /// # Errors
    /// A message naming the policy file and the workload: no region controls (another
    /// interface, or an ERDT without MARC), or an unknown region (with those there are).
    pub(crate) fn check<B: Backend>(backend: &mut B, policy: &Policy) -> Result<Self, String> {
        let regions: Vec<Vec<MemRegion>> = policy
            .best_effort
            .iter()
            .map(|b| b.mba_regions.clone())
            .collect();
        let Some(first) = policy
            .best_effort
            .iter()
            .find(|b| !b.mba_regions.is_empty())
        else {
            return Ok(Self { regions, window: 0 });
        };
        let Some(r) = backend.regions() else {
            return Err(format!(
                "{}: best-effort workload {:?}: mba_regions needs region-aware MBA, the MMIO \
                 interface of an RDT 1.3 platform (--iface=mmio; ACPI ERDT and MRRM), which \
                 this platform or interface does not have",
                policy.file.display(),
                first.workload.name
            ));
        };
        let known: Vec<MemRegion> = r.memory_regions().iter().map(|i| i.region).collect();
        for b in &policy.best_effort {
            if let Some(missing) = b.mba_regions.iter().find(|m| !known.contains(m)) {
                let list: Vec<String> = known.iter().map(ToString::to_string).collect();
                return Err(format!(
                    "{}: best-effort workload {:?}: mba_regions: memory region {missing} does \
                     not exist (the platform's MRRM has regions {})",
                    policy.file.display(),
                    b.workload.name,
                    list.join(", ")
                ));
            }
        }
        Ok(Self {
            regions,
            window: r.bw_window(),
        })
    }

    /// Checks that each class throttled by region has region controls (below the ERDT's
    /// class count).
    ///
    /// # Errors
    /// A message naming the workload and its class.
    pub(crate) fn check_classes<B: Backend>(
        &self,
        backend: &mut B,
        policy: &Policy,
        classes: &[ClassId],
    ) -> Result<(), String> {
        let Some(r) = backend.regions() else {
            return Ok(());
        };
        let count = r.region_classes();
        for ((b, class), regions) in policy.best_effort.iter().zip(classes).zip(&self.regions) {
            if !regions.is_empty() && class.get() >= count {
                return Err(format!(
                    "{}: best-effort workload {:?}: its class COS{class} has no region MBA \
                     controls (the ERDT has {count} classes for them)",
                    policy.file.display(),
                    b.workload.name
                ));
            }
        }
        Ok(())
    }

    /// Whether best-effort workload `i` is throttled by region.
    pub(crate) fn by_region(&self, i: usize) -> bool {
        self.regions.get(i).is_some_and(|r| !r.is_empty())
    }

    /// `percent` of the window, rounded half up.
    fn value_of(&self, percent: u8) -> u16 {
        let v = (u32::from(percent.min(100)) * u32::from(self.window) + 50) / 100;
        u16::try_from(v).unwrap_or(self.window)
    }

    /// `value`'s share of the window in percent, rounded half up (100 for a window of 0).
    fn percent_of(&self, value: u16) -> u8 {
        if self.window == 0 {
            return 100;
        }
        let w = u32::from(self.window);
        let p = (u32::from(value) * 100 + w / 2) / w;
        u8::try_from(p.min(100)).unwrap_or(100)
    }

    /// Workload `i`'s throttle in each of `domains` for `class`: the lowest maximum of its
    /// regions there, in percent.
    ///
    /// # Errors
    /// A control could not be read.
    pub(crate) fn percent_now<B: Backend>(
        &self,
        backend: &mut B,
        i: usize,
        class: ClassId,
        domains: &[CacheDomain],
    ) -> Result<BTreeMap<CacheDomain, u8>, B::Error> {
        let mut out = BTreeMap::new();
        let regions = &self.regions[i];
        let Some(r) = backend.regions() else {
            return Ok(out);
        };
        for &domain in domains {
            let lowest = r
                .region_bandwidth(domain, class)?
                .into_iter()
                .filter(|b| b.control == BwControl::Max && regions.contains(&b.region))
                .map(|b| b.value)
                .min();
            if let Some(v) = lowest {
                out.insert(domain, self.percent_of(v));
            }
        }
        Ok(out)
    }

    /// The changes that throttle workload `i`'s `class` to `percent` in `domains`: the
    /// maximum control of each of its regions.
    pub(crate) fn changes(
        &self,
        i: usize,
        class: ClassId,
        domains: &[CacheDomain],
        percent: u8,
    ) -> Vec<Change> {
        let value = self.value_of(percent);
        domains
            .iter()
            .flat_map(|&domain| {
                self.regions[i]
                    .iter()
                    .map(move |&region| Change::RegionMba {
                        domain,
                        class,
                        bw: RegionBw {
                            region,
                            control: BwControl::Max,
                            value,
                        },
                    })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percent_is_a_share_of_the_window_and_back() {
        let t = RegionThrottle {
            regions: vec![vec![MemRegion(1)], Vec::new()],
            window: 0x1ff,
        };
        assert_eq!(t.value_of(100), 0x1ff);
        assert_eq!(t.value_of(60), 307, "511 x 0.6 = 306.6");
        assert_eq!(t.value_of(0), 0);
        for p in 0..=100 {
            assert_eq!(t.percent_of(t.value_of(p)), p, "{p} %");
        }
        assert!(t.by_region(0) && !t.by_region(1) && !t.by_region(7));
        let c = t.changes(0, ClassId::new(3), &[CacheDomain::new(1)], 50);
        assert_eq!(
            c,
            [Change::RegionMba {
                domain: CacheDomain::new(1),
                class: ClassId::new(3),
                bw: RegionBw {
                    region: MemRegion(1),
                    control: BwControl::Max,
                    value: 256,
                },
            }]
        );
    }
}
