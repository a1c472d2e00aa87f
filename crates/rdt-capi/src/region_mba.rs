//! Region-aware MBA of the MMIO interface (RDT 1.3) through `pqos_mba_set` and
//! `pqos_mba_get`, as libpqos v26.03 models it (`lib/mmio_allocation.c` `mmio_mba_set`,
//! `mmio_mba_get`, read for facts): on `PQOS_INTER_MMIO` an entry of `struct pqos_mba`
//! names an ERDT resource management domain (`domain_id`, pqos's `--alloc-domain-id`), a
//! class, and up to `PQOS_MAX_MEM_REGIONS` memory regions, each with its optimal, minimum
//! and maximum bandwidth controls (`bw_ctrl_val[PQOS_BW_CTRL_TYPE_*_IDX]`, in units of the
//! MARC control window, 0x1ff meaning no limit); `-1` marks a region or a control that is
//! not asked for. `mba_id`, `mb_max` and `ctrl` are not used there (libpqos ignores them).
//!
//! The library does the work: the domain is mapped to its L3 domain
//! ([`RegionOps::domain_ids`](rdt_pqos::RegionOps::domain_ids)) and every control becomes a
//! [`Change::RegionMba`] of one transaction (validated first, journaled, undone on a failed
//! write), so a bad entry leaves every register as it was.

use std::ffi::{c_int, c_uint};

use rdt_pqos::transaction::{self, Change};
use rdt_pqos::{Backend, BwControl, CacheDomain, ClassId, MemRegion, RegionBw};

use crate::error::{code, transaction_code};
use crate::state::Lib;
use crate::types::{
    PQOS_BW_CTRL_TYPE_COUNT, PQOS_MAX_MEM_REGIONS, PQOS_RETVAL_ERROR, PQOS_RETVAL_OK,
    PQOS_RETVAL_PARAM, PQOS_RETVAL_RESOURCE, pqos_mba, pqos_mba_mem_region,
};

/// What the platform's region controls are: its CPU domains (L3 domain, ERDT id), memory
/// regions in id order (at most `PQOS_MAX_MEM_REGIONS`), control window and classes.
struct Platform {
    domains: Vec<(CacheDomain, u16)>,
    regions: Vec<MemRegion>,
    window: u16,
    classes: u32,
}

impl Platform {
    /// `None` (`PQOS_RETVAL_RESOURCE`) off the MMIO interface.
    fn of(lib: &mut Lib) -> Option<Self> {
        let r = lib.rdt.regions()?;
        let mut regions: Vec<MemRegion> = r.memory_regions().iter().map(|m| m.region).collect();
        regions.sort_unstable();
        regions.truncate(PQOS_MAX_MEM_REGIONS);
        Some(Self {
            domains: r.domain_ids(),
            regions,
            window: r.bw_window(),
            classes: r.region_classes(),
        })
    }

    /// The L3 domain of ERDT domain `id`, or `PQOS_RETVAL_PARAM` logged with the domains
    /// there are.
    fn domain(&self, id: u16) -> Result<CacheDomain, c_int> {
        self.domains
            .iter()
            .find(|(_, d)| *d == id)
            .map(|(l3, _)| *l3)
            .ok_or_else(|| {
                let known: Vec<String> = self.domains.iter().map(|(_, d)| d.to_string()).collect();
                log::error!(
                    "domain id {id} has no region MBA registers (the ERDT's CPU domains: {})",
                    known.join(",")
                );
                PQOS_RETVAL_PARAM
            })
    }

    /// `num_mem_regions` of an entry: 0 ..= the regions there are.
    fn count(&self, n: c_int) -> Result<usize, c_int> {
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.regions.len())
            .ok_or_else(|| {
                log::error!(
                    "{n} memory regions: the platform has {}",
                    self.regions.len()
                );
                PQOS_RETVAL_PARAM
            })
    }

    /// The changes `m` asks for, every value checked.
    fn changes(&self, m: &pqos_mba) -> Result<Vec<Change>, c_int> {
        let domain = self.domain(m.domain_id)?;
        if m.class_id >= self.classes {
            log::error!(
                "MBA COS{} is not a class of the region controls (COS0-{})",
                m.class_id,
                self.classes.saturating_sub(1)
            );
            return Err(PQOS_RETVAL_PARAM);
        }
        let class = ClassId::new(m.class_id);
        let mut out = Vec::new();
        for r in &m.mem_regions[..self.count(m.num_mem_regions)?] {
            if r.region_num == -1 {
                continue;
            }
            let Some(region) = u8::try_from(r.region_num)
                .ok()
                .map(MemRegion)
                .filter(|g| self.regions.contains(g))
            else {
                log::error!(
                    "MBA COS{} memory region {} is not a region of this platform",
                    m.class_id,
                    r.region_num
                );
                return Err(PQOS_RETVAL_PARAM);
            };
            for (control, &value) in BwControl::ALL.iter().zip(&r.bw_ctrl_val) {
                if value == -1 {
                    continue;
                }
                let Some(value) = u16::try_from(value).ok().filter(|&v| v <= self.window) else {
                    log::error!(
                        "MBA COS{} memory region {region} {control} bandwidth {value:#x} is out \
                         of range (0x0-{:#x})",
                        m.class_id,
                        self.window
                    );
                    return Err(PQOS_RETVAL_PARAM);
                };
                out.push(Change::RegionMba {
                    domain,
                    class,
                    bw: RegionBw {
                        region,
                        control: *control,
                        value,
                    },
                });
            }
        }
        Ok(out)
    }
}

/// The three controls of `region` in `table` (a class's controls as the library reads
/// them), by pqos's index; -1 where the table has none.
fn controls(table: &[RegionBw], region: MemRegion) -> [c_int; PQOS_BW_CTRL_TYPE_COUNT] {
    BwControl::ALL.map(|control| {
        table
            .iter()
            .find(|b| b.region == region && b.control == control)
            .map_or(-1, |b| c_int::from(b.value))
    })
}

/// `pqos_mba_set` on the MMIO interface (module docs): every entry checked, then all
/// controls set by one transaction; `actual` (may be NULL) receives each entry with the
/// controls of its regions as read back.
pub(crate) fn set(lib: &mut Lib, requested: &[pqos_mba], actual: *mut pqos_mba) -> c_int {
    let Some(p) = Platform::of(lib) else {
        return PQOS_RETVAL_RESOURCE;
    };
    let mut changes = Vec::new();
    for m in requested {
        match p.changes(m) {
            Ok(c) => changes.extend(c),
            Err(c) => return c,
        }
    }
    if !changes.is_empty()
        && let Err(c) = transaction_code(transaction::run(&mut lib.rdt, &changes))
    {
        return c;
    }
    if actual.is_null() {
        return PQOS_RETVAL_OK;
    }
    let Some(ops) = lib.rdt.regions() else {
        return PQOS_RETVAL_RESOURCE;
    };
    for (i, m) in requested.iter().enumerate() {
        let mut got = *m;
        // checked by `changes`
        let (Ok(domain), Ok(n)) = (p.domain(m.domain_id), p.count(m.num_mem_regions)) else {
            return PQOS_RETVAL_PARAM;
        };
        if n > 0 {
            let table = match ops.region_bandwidth(domain, ClassId::new(m.class_id)) {
                Ok(t) => t,
                Err(e) => return code(&e),
            };
            for r in &mut got.mem_regions[..n] {
                if let Ok(region) = u8::try_from(r.region_num) {
                    r.bw_ctrl_val = controls(&table, MemRegion(region));
                }
            }
        }
        // SAFETY: pqos.h: `actual` has room for as many entries as `requested`.
        unsafe { actual.add(i).write(got) };
    }
    PQOS_RETVAL_OK
}

/// `pqos_mba_get` on the MMIO interface: `mba_tab[0].domain_id` names the domain and
/// `mba_tab[0].num_mem_regions` how many regions to read (0: all), as in libpqos; every
/// class of the region controls is written (`class_id` i, the first `num_mem_regions`
/// regions by id with their three controls, unused slots -1), `*num_cos` their count.
/// `PQOS_RETVAL_PARAM` for an unknown domain or too many regions, `PQOS_RETVAL_ERROR` when
/// `max_num_cos` cannot hold every class (libpqos's code).
///
/// # Safety
/// `mba_tab` points to `max_num_cos` writable entries (pqos.h).
pub(crate) unsafe fn get(
    lib: &mut Lib,
    max_num_cos: c_uint,
    num_cos: &mut c_uint,
    mba_tab: *mut pqos_mba,
) -> c_int {
    let Some(p) = Platform::of(lib) else {
        return PQOS_RETVAL_RESOURCE;
    };
    // SAFETY: per this function's contract (at least one entry: max_num_cos > 0).
    let first = unsafe { mba_tab.read() };
    let domain = match p.domain(first.domain_id) {
        Ok(d) => d,
        Err(c) => return c,
    };
    let n = match p.count(first.num_mem_regions) {
        Ok(0) => p.regions.len(),
        Ok(n) => n,
        Err(c) => return c,
    };
    if p.classes > max_num_cos {
        log::error!(
            "{} classes of region MBA do not fit in {max_num_cos} entries",
            p.classes
        );
        return PQOS_RETVAL_ERROR;
    }
    let Some(ops) = lib.rdt.regions() else {
        return PQOS_RETVAL_RESOURCE;
    };
    for class in 0..p.classes {
        let table = match ops.region_bandwidth(domain, ClassId::new(class)) {
            Ok(t) => t,
            Err(e) => return code(&e),
        };
        let unused = pqos_mba_mem_region {
            bw_ctrl_val: [-1; PQOS_BW_CTRL_TYPE_COUNT],
            region_num: -1,
        };
        let mut entry = pqos_mba {
            class_id: class,
            domain_id: first.domain_id,
            num_mem_regions: c_int::try_from(n).unwrap_or(0),
            mem_regions: [unused; PQOS_MAX_MEM_REGIONS],
            ..pqos_mba::default()
        };
        for (slot, &region) in entry.mem_regions.iter_mut().zip(&p.regions[..n]) {
            *slot = pqos_mba_mem_region {
                bw_ctrl_val: controls(&table, region),
                region_num: c_int::from(region.0),
            };
        }
        // SAFETY: class < classes <= max_num_cos entries (contract).
        unsafe { mba_tab.add(class as usize).write(entry) };
    }
    *num_cos = p.classes;
    PQOS_RETVAL_OK
}
