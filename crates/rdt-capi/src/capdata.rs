//! What `pqos_cap_get` and `pqos_sysconfig_get` hand out: the library's capabilities and topology as
//! libpqos's structures, built at `pqos_init` and kept (at the same addresses) until
//! `pqos_fini`; a reset that turns CDP or the MBA controller on or off updates them in place,
//! as libpqos does.
//!
//! The numbers are the library's account of what libpqos reports ([`rdt_pqos::pqos_caps`],
//! which `pqos -d`/`-D` prints too): this module only places them in libpqos's structures.

use std::ffi::{c_int, c_uint};

use rdt_pqos::pqos_caps::{self, EventSource};
use rdt_pqos::{
    Backend, BackendExt, CacheGeometry, Capabilities, Interface, MbaCaps, MbaCtrl, Rdt, SncMode,
    Vendor,
};

use crate::flex::Flex;
use crate::types::{
    PQOS_VERSION, pqos_cacheinfo, pqos_cap, pqos_cap_l2ca, pqos_cap_l3ca, pqos_cap_mba,
    pqos_cap_mon, pqos_cap_type, pqos_capability, pqos_capability_u, pqos_coreinfo, pqos_cpuinfo,
    pqos_monitor, pqos_snc_mode, pqos_sysconfig, pqos_vendor,
};

/// The structures `pqos_cap_get` hands out, owned until `pqos_fini`.
pub(crate) struct CapData {
    pub(crate) cap: Flex<pqos_cap, pqos_capability>,
    pub(crate) cpu: Flex<pqos_cpuinfo, pqos_coreinfo>,
    pub(crate) mon: Option<Flex<pqos_cap_mon, pqos_monitor>>,
    pub(crate) l3: Option<Box<pqos_cap_l3ca>>,
    pub(crate) l2: Option<Box<pqos_cap_l2ca>>,
    pub(crate) mba: Option<Box<pqos_cap_mba>>,
    pub(crate) smba: Option<Box<pqos_cap_mba>>,
    pub(crate) sysconfig: Box<pqos_sysconfig>,
}

/// What the capability structures hold, before they are placed.
struct Values {
    mon: Option<(pqos_cap_mon, Vec<pqos_monitor>)>,
    l3: Option<pqos_cap_l3ca>,
    l2: Option<pqos_cap_l2ca>,
    mba: Option<pqos_cap_mba>,
    smba: Option<pqos_cap_mba>,
}

fn uint(v: u64) -> c_uint {
    c_uint::try_from(v).unwrap_or(c_uint::MAX)
}

fn size_of_c<T>() -> c_uint {
    uint(size_of::<T>() as u64)
}

fn flag(b: bool) -> c_int {
    c_int::from(b)
}

fn values(rdt: &mut Rdt) -> Values {
    let iface = rdt.interface();
    let mba_ctrl = rdt.mba_ctrl();
    let caps = rdt.capabilities().clone();
    let l3_way = caps.l3_cache.as_ref().map_or(0, CacheGeometry::way_size);
    let l2_way = caps.l2_cache.as_ref().map_or(0, CacheGeometry::way_size);
    let cat_classes = |c| pqos_caps::cat_classes(&caps, c, iface);
    Values {
        mon: monitoring(&caps, iface),
        l3: caps.l3_cat.get().map(|c| pqos_cap_l3ca {
            mem_size: size_of_c::<pqos_cap_l3ca>(),
            num_classes: cat_classes(c),
            num_ways: c.cbm_len,
            way_size: uint(l3_way),
            way_contention: c.shareable_bits,
            cdp: flag(c.cdp_supported),
            cdp_on: flag(c.cdp_enabled),
            non_contiguous_cbm: c_uint::from(c.non_contiguous_cbm),
            iordt: flag(c.io_rdt),
            iordt_on: flag(caps.l3_iordt == Some(true)),
        }),
        l2: caps.l2_cat.get().map(|c| pqos_cap_l2ca {
            mem_size: size_of_c::<pqos_cap_l2ca>(),
            num_classes: cat_classes(c),
            num_ways: c.cbm_len,
            way_size: uint(l2_way),
            way_contention: c.shareable_bits,
            cdp: flag(c.cdp_supported),
            cdp_on: flag(c.cdp_enabled),
            non_contiguous_cbm: c_uint::from(c.non_contiguous_cbm),
        }),
        // MBA 4.0 (pqos_cap_mba.mba40/mba40_on): what the MSR backend found (caps.mba40).
        mba: caps.mba.get().map(|m| pqos_cap_mba {
            mba40: flag(caps.mba40.is_some()),
            mba40_on: flag(caps.mba40 == Some(true)),
            ..bandwidth(&caps, m, iface, mba_ctrl)
        }),
        smba: caps
            .smba
            .get()
            .map(|m| bandwidth(&caps, m, iface, pqos_caps::smba_ctrl(iface))),
    }
}

/// A bandwidth resource as libpqos describes it ([`pqos_caps::mba_numbers`]), `ctrl` -1
/// where the interface has no controller (MSR).
fn bandwidth(
    caps: &Capabilities,
    m: &MbaCaps,
    iface: Interface,
    ctrl: Option<MbaCtrl>,
) -> pqos_cap_mba {
    let n = pqos_caps::mba_numbers(m, iface);
    let (ctrl, ctrl_on) = match ctrl {
        None => (-1, 0),
        Some(MbaCtrl::Unsupported) => (0, 0),
        Some(MbaCtrl::Disabled) => (1, 0),
        Some(MbaCtrl::Enabled) => (1, 1),
    };
    pqos_cap_mba {
        mem_size: size_of_c::<pqos_cap_mba>(),
        num_classes: pqos_caps::mba_classes(caps, m, iface),
        throttle_max: n.throttle_max,
        throttle_step: n.throttle_step,
        is_linear: flag(n.linear),
        ctrl,
        ctrl_on,
        mba40: 0,
        mba40_on: 0,
    }
}

/// The monitoring capability with its events ([`pqos_caps::mon_events`]); the I/O RDT flag
/// on the RDT events where the platform has I/O RDT monitoring.
fn monitoring(caps: &Capabilities, iface: Interface) -> Option<(pqos_cap_mon, Vec<pqos_monitor>)> {
    let m = caps.monitoring.get();
    let iordt = flag(m.is_some_and(|m| m.io_rdt));
    let events: Vec<pqos_monitor> = pqos_caps::mon_events(caps, iface)?
        .into_iter()
        .map(|e| pqos_monitor {
            r#type: e.event.bits(),
            max_rmid: e.max_rmid,
            scale_factor: e.scale_factor,
            counter_length: e.counter_length,
            iordt: if e.source == EventSource::Rdt {
                iordt
            } else {
                0
            },
        })
        .collect();
    let snc = pqos_caps::snc(caps, iface);
    let header = pqos_cap_mon {
        mem_size: uint(
            (size_of::<pqos_cap_mon>() + events.len() * size_of::<pqos_monitor>()) as u64,
        ),
        max_rmid: pqos_caps::mon_max_rmid(m, iface),
        l3_size: uint(caps.l3_cache.as_ref().map_or(0, CacheGeometry::total_size)),
        num_events: uint(events.len() as u64),
        iordt,
        iordt_on: 0,
        snc_num: snc.map_or(1, |s| s.nodes_per_l3),
        snc_mode: match snc.map(|s| s.mode) {
            Some(SncMode::Local) => pqos_snc_mode::PQOS_SNC_LOCAL as c_uint,
            _ => pqos_snc_mode::PQOS_SNC_TOTAL as c_uint,
        },
        events: [],
    };
    Some((header, events))
}

fn cacheinfo(g: Option<&CacheGeometry>) -> pqos_cacheinfo {
    g.map_or_else(pqos_cacheinfo::default, |g| pqos_cacheinfo {
        detected: 1,
        num_ways: g.ways,
        num_sets: g.sets,
        num_partitions: g.partitions,
        line_size: g.line_size,
        total_size: uint(g.total_size()),
        way_size: uint(g.way_size()),
    })
}

/// The topology as `pqos_cpuinfo`: L3 CAT, MBA and SMBA ids are the L3 domain (the cache id
/// the library allocates by: the socket on Intel, the CCX on AMD), as libpqos's `l3cat_id`
/// and `mba_id` are.
fn cpuinfo(rdt: &Rdt) -> Flex<pqos_cpuinfo, pqos_coreinfo> {
    let caps = rdt.capabilities();
    let cores: Vec<pqos_coreinfo> = rdt
        .topology()
        .cpus()
        .iter()
        .map(|p| {
            let l3 = p.l3.map_or(p.package, rdt_pqos::CacheDomain::get);
            pqos_coreinfo {
                lcore: p.cpu.get(),
                socket: p.package,
                l3_id: l3,
                l2_id: p.l2.get(),
                l3cat_id: l3,
                mba_id: l3,
                numa: p.node,
                smba_id: l3,
            }
        })
        .collect();
    let vendor = match caps.vendor {
        Vendor::Intel => pqos_vendor::PQOS_VENDOR_INTEL,
        Vendor::Amd => pqos_vendor::PQOS_VENDOR_AMD,
        Vendor::Hygon => pqos_vendor::PQOS_VENDOR_HYGON,
        _ => pqos_vendor::PQOS_VENDOR_UNKNOWN,
    };
    let header = pqos_cpuinfo {
        mem_size: uint(
            (size_of::<pqos_cpuinfo>() + cores.len() * size_of::<pqos_coreinfo>()) as u64,
        ),
        l2: cacheinfo(caps.l2_cache.as_ref()),
        l3: cacheinfo(caps.l3_cache.as_ref()),
        vendor: vendor as c_uint,
        num_cores: uint(cores.len() as u64),
        cores: [],
    };
    Flex::new(header, &cores)
}

impl CapData {
    /// The structures of `rdt`'s capabilities and topology.
    pub(crate) fn build(rdt: &mut Rdt) -> Self {
        let v = values(rdt);
        let cpu = cpuinfo(rdt);
        let mon = v.mon.map(|(h, events)| Flex::new(h, &events));
        let l3 = v.l3.map(Box::new);
        let l2 = v.l2.map(Box::new);
        let mba = v.mba.map(Box::new);
        let smba = v.smba.map(Box::new);
        let mut list = Vec::new();
        if let Some(m) = &mon {
            list.push((
                pqos_cap_type::PQOS_CAP_TYPE_MON,
                pqos_capability_u { mon: m.as_ptr() },
            ));
        }
        if let Some(c) = &l3 {
            let p: *const pqos_cap_l3ca = &raw const **c;
            list.push((
                pqos_cap_type::PQOS_CAP_TYPE_L3CA,
                pqos_capability_u { l3ca: p.cast_mut() },
            ));
        }
        if let Some(c) = &l2 {
            let p: *const pqos_cap_l2ca = &raw const **c;
            list.push((
                pqos_cap_type::PQOS_CAP_TYPE_L2CA,
                pqos_capability_u { l2ca: p.cast_mut() },
            ));
        }
        if let Some(c) = &mba {
            let p: *const pqos_cap_mba = &raw const **c;
            list.push((
                pqos_cap_type::PQOS_CAP_TYPE_MBA,
                pqos_capability_u { mba: p.cast_mut() },
            ));
        }
        if let Some(c) = &smba {
            let p: *const pqos_cap_mba = &raw const **c;
            list.push((
                pqos_cap_type::PQOS_CAP_TYPE_SMBA,
                pqos_capability_u { smba: p.cast_mut() },
            ));
        }
        let items: Vec<pqos_capability> = list
            .into_iter()
            .map(|(t, u)| pqos_capability {
                r#type: t as c_uint,
                u,
            })
            .collect();
        let cap = Flex::new(
            pqos_cap {
                mem_size: uint(
                    (size_of::<pqos_cap>() + items.len() * size_of::<pqos_capability>()) as u64,
                ),
                version: PQOS_VERSION,
                num_cap: uint(items.len() as u64),
                capabilities: [],
            },
            &items,
        );
        let sysconfig = Box::new(pqos_sysconfig {
            cap: cap.as_ptr(),
            cpu: cpu.as_ptr(),
            dev: std::ptr::null_mut(),
            erdt: std::ptr::null_mut(),
            mrrm: std::ptr::null_mut(),
            cores_domains: std::ptr::null_mut(),
            channels_domains: std::ptr::null_mut(),
        });
        Self {
            cap,
            cpu,
            mon,
            l3,
            l2,
            mba,
            smba,
            sysconfig,
        }
    }

    /// Updates the structures in place after a change of state (CDP, the MBA controller), so
    /// that pointers the program holds see it, as libpqos's `_pqos_cap_l3cdp_change` does.
    /// The set of capabilities and events does not change with state.
    pub(crate) fn refresh(&mut self, rdt: &mut Rdt) {
        let v = values(rdt);
        if let (Some(slot), Some(new)) = (self.l3.as_deref_mut(), v.l3) {
            *slot = new;
        }
        if let (Some(slot), Some(new)) = (self.l2.as_deref_mut(), v.l2) {
            *slot = new;
        }
        if let (Some(slot), Some(new)) = (self.mba.as_deref_mut(), v.mba) {
            *slot = new;
        }
        if let (Some(slot), Some(new)) = (self.smba.as_deref_mut(), v.smba) {
            *slot = new;
        }
        // Monitoring capabilities do not depend on allocation state; `mon` stays.
        let _ = &self.mon;
    }
}
