//! Register-level tests of [`MsrBackend`] against [`FakeMsrs`].
//!
//! Platform: 8 CPUs, 2 L3 domains of 4 CPUs (0-3, 4-7), L2 shared by CPU pairs; L3 CAT
//! 20-bit CBM, 16 COS, CDP supported; L2 CAT 8-bit CBM, 8 COS, CDP supported; Intel MBA
//! max delay 90 (granularity 10), 8 COS; CMT/MBM with 112 RMIDs, 24-bit counters, upscaling
//! factor 57344.

use std::collections::HashMap;

use rdt_core::{
    AllocReset, Backend, BackendExt, CacheBitmask, CacheDomain, Capabilities, CatClass, CatMask,
    CatResource, ClassId, CpuSet, Feature, FeatureSetting, LimitError, LogicalCpu, MbaClass,
    MbaLimit, MbaResource, MbaUnitMismatch, MonEvents, MonGroupId, PmuCounts, PmuSource,
    RequestError, Rmid, Topology, Vendor,
};

use rdt_core::fake::fixtures;

use super::MsrBackend;
use crate::regs::{self, EVT_LLC_OCCUPANCY, EVT_MBM_LOCAL, EVT_MBM_TOTAL};
use crate::{FakeMsrs, MsrAddr, MsrError};

const SCALE: u64 = 57344;
const PQR: MsrAddr = regs::IA32_PQR_ASSOC;

fn cpu(n: u32) -> LogicalCpu {
    LogicalCpu::new(n)
}

fn dom(n: u32) -> CacheDomain {
    CacheDomain::new(n)
}

fn mask(bits: u64) -> CacheBitmask {
    CacheBitmask::new(bits).unwrap()
}

fn l3(n: u32) -> MsrAddr {
    regs::IA32_L3_QOS_MASK_0.offset(n)
}

/// The platform of these tests: two sockets of 4 CPUs (L3 per socket, L2 per pair), L3
/// CAT 20 bits/16 COS, L2 CAT 8 bits/8 COS, both with CDP, MBA 8 COS, 112 RMIDs at 56 KiB
/// per count ([`fixtures::intel_2s`]).
fn caps() -> Capabilities {
    fixtures::intel_2s().0
}

fn topology() -> Topology {
    fixtures::intel_2s().1
}

fn backend_with(io: FakeMsrs, caps: Capabilities) -> MsrBackend<FakeMsrs> {
    MsrBackend::new(io, caps, topology(), rdt_core::NoPmu).unwrap()
}

fn backend(io: FakeMsrs) -> MsrBackend<FakeMsrs> {
    backend_with(io, caps())
}

/// A backend whose counters are zeroed after construction.
fn fresh() -> MsrBackend<FakeMsrs> {
    let mut b = backend(FakeMsrs::new());
    b.io_mut().reset_counts();
    b
}

fn accesses(b: &MsrBackend<FakeMsrs>) -> u64 {
    b.io().reads() + b.io().writes()
}

fn cpus(list: &str) -> CpuSet {
    list.parse().unwrap()
}

fn with_cdp_on() -> MsrBackend<FakeMsrs> {
    let mut io = FakeMsrs::new();
    io.set(cpu(0), regs::IA32_L3_QOS_CFG, 1);
    io.set(cpu(4), regs::IA32_L3_QOS_CFG, 1);
    let mut b = backend(io);
    b.io_mut().reset_counts();
    b
}

// ---- construction and CDP detection ----

#[test]
fn cdp_state_is_read_from_qos_cfg_on_the_lowest_cpu_of_each_domain() {
    // arrange
    let mut io = FakeMsrs::new();
    io.set(cpu(0), regs::IA32_L3_QOS_CFG, 1);
    io.set(cpu(4), regs::IA32_L3_QOS_CFG, 1);
    // act
    let b = backend(io);
    // assert
    let l3 = b.capabilities().l3_cat.get().unwrap();
    assert!(l3.cdp_enabled);
    assert_eq!(l3.usable_classes(), 8);
    assert!(!b.capabilities().l2_cat.get().unwrap().cdp_enabled);
    // one QOS_CFG read per L3 domain (2) and per L2 domain (4)
    assert_eq!((b.io().reads(), b.io().writes()), (6, 0));
}

#[test]
fn cdp_on_in_one_domain_only_opens_reads_refuses_writes_and_a_cdp_reset_repairs_it() {
    // arrange: a reset killed between the two L3 domains left CDP on in domain 1 only
    let mut io = FakeMsrs::new();
    io.set(cpu(4), regs::IA32_L3_QOS_CFG, 1);
    for n in 0..20 {
        io.set(cpu(0), l3(n), 0xfffff);
        io.set(cpu(4), l3(n), 0xfffff);
    }
    // act: it opens (no lock-out)
    let mut b = MsrBackend::new(io, caps(), topology(), rdt_core::NoPmu).expect("opens");
    // assert
    let why = b.cdp_inconsistency().expect("reported");
    assert!(
        why.contains("domains 1 but disabled in 0") && why.contains("-R l3cdp-on"),
        "{why}"
    );
    assert_eq!(b.cat_classes(CatResource::L3, dom(0)).unwrap().len(), 16);
    let cdp = b.cat_classes(CatResource::L3, dom(1)).unwrap();
    assert_eq!(cdp.len(), 8, "domain 1 has CDP's layout");
    assert!(matches!(cdp[1].mask, CatMask::Cdp { .. }));
    let one = CatClass {
        class: ClassId::new(1),
        mask: CatMask::Unified(mask(0xf)),
    };
    let writes = b.io().writes();
    assert!(matches!(
        b.set_cat_classes(CatResource::L3, dom(0), &[one]),
        Err(MsrError::Inconsistent(_))
    ));
    assert!(matches!(
        b.reset_allocation(&AllocReset::default()),
        Err(MsrError::Inconsistent(_))
    ));
    assert_eq!(b.io().writes(), writes, "refused before any write");
    // the repair
    let off = AllocReset {
        l3_cdp: FeatureSetting::Off,
        ..AllocReset::default()
    };
    b.reset_allocation(&off).unwrap();
    assert_eq!(b.cdp_inconsistency(), None);
    assert_eq!(b.io().get(cpu(4), regs::IA32_L3_QOS_CFG), Some(0));
    assert_eq!(b.cat_classes(CatResource::L3, dom(1)).unwrap().len(), 16);
    b.set_cat_classes(CatResource::L3, dom(0), &[one]).unwrap();
}

#[test]
fn cpuid_claiming_thousands_of_classes_is_refused_before_any_msr_access() {
    // arrange: a CPUID device (or hypervisor) claiming 65,536 L3 classes, which -s would
    // read one MSR per class and domain for
    let mut c = caps();
    c.l3_cat.get_mut().unwrap().num_classes = 65_536;
    // act
    let e = MsrBackend::new(FakeMsrs::new(), c, topology(), rdt_core::NoPmu).unwrap_err();
    // assert
    assert!(matches!(e, MsrError::Implausible(_)), "{e:?}");
    assert_eq!(
        rdt_core::error_chain(&e),
        "CPUID claims a capability no platform has: implausible L3 CAT classes of service, \
         CPUID.(10H,1):EDX[15:0] + 1: 65536 (at most 512 accepted; no known platform has more)"
    );
}

#[test]
fn qos_cfg_is_not_read_where_cdp_is_not_supported() {
    // arrange
    let mut c = caps();
    c.l3_cat.get_mut().unwrap().cdp_supported = false;
    c.l2_cat = Feature::Unsupported;
    // act
    let b = backend_with(FakeMsrs::failing_unknown(), c);
    // assert
    assert_eq!(b.io().reads(), 0);
}

// ---- association ----

#[test]
fn associate_keeps_rmid_and_sets_class_in_high_half() {
    // arrange
    let mut b = fresh();
    b.io_mut().set(cpu(2), PQR, regs::pqr_assoc(1, 7));
    // act
    b.associate(cpu(2), ClassId::new(5)).unwrap();
    // assert
    assert_eq!(b.io().get(cpu(2), PQR), Some(0x0000_0005_0000_0007));
    assert_eq!(b.class_of(cpu(2)).unwrap(), ClassId::new(5));
    assert_eq!(b.rmid_of(cpu(2)).unwrap(), Some(Rmid::new(7)));
}

#[test]
fn associate_rejects_a_class_beyond_the_largest_class_count_without_writing() {
    // arrange
    let mut b = fresh();
    // act
    let err = b.associate(cpu(1), ClassId::new(16)).unwrap_err();
    // assert
    assert!(
        matches!(
            err,
            MsrError::Request(RequestError::Limit(LimitError::ClassOutOfRange {
                num_classes: 16,
                ..
            }))
        ),
        "{err}"
    );
    assert_eq!(accesses(&b), 0);
}

#[test]
fn associate_rejects_an_offline_cpu_without_writing() {
    let mut b = fresh();
    let err = b.associate(cpu(8), ClassId::new(1)).unwrap_err();
    assert!(matches!(err, MsrError::Request(RequestError::NoSuchCpu(c)) if c == cpu(8)));
    assert!(matches!(
        b.class_of(cpu(9)),
        Err(MsrError::Request(RequestError::NoSuchCpu(_)))
    ));
    assert_eq!(accesses(&b), 0);
}

// ---- CAT ----

#[test]
fn set_cat_classes_writes_one_register_per_class_on_the_lowest_cpu_of_the_domain() {
    // arrange
    let mut b = fresh();
    let classes = [
        CatClass {
            class: ClassId::new(1),
            mask: CatMask::Unified(mask(0xffe00)),
        },
        CatClass {
            class: ClassId::new(2),
            mask: CatMask::Unified(mask(0x3)),
        },
    ];
    // act
    b.set_cat_classes(CatResource::L3, dom(1), &classes)
        .unwrap();
    // assert
    assert_eq!(b.io().get(cpu(4), l3(1)), Some(0xffe00));
    assert_eq!(b.io().get(cpu(4), l3(2)), Some(0x3));
    assert_eq!(b.io().get(cpu(0), l3(1)), None);
    assert_eq!(b.io().writes(), 2);
}

#[test]
fn cat_classes_reads_every_usable_class() {
    // arrange
    let mut b = fresh();
    for n in 0..16 {
        b.io_mut().set(cpu(0), l3(n), 0xfffff >> n);
    }
    // act
    let classes = b.cat_classes(CatResource::L3, dom(0)).unwrap();
    // assert
    assert_eq!(classes.len(), 16);
    assert_eq!(
        classes[3],
        CatClass {
            class: ClassId::new(3),
            mask: CatMask::Unified(mask(0x1ffff))
        }
    );
    assert_eq!(b.io().reads(), 16);
}

#[test]
fn a_zero_mask_register_is_reported_not_unwrapped() {
    let mut b = fresh();
    let err = b.cat_classes(CatResource::L3, dom(0)).unwrap_err();
    assert!(
        matches!(err, MsrError::BadRegister { value: 0, addr, .. } if addr == l3(0)),
        "{err}"
    );
}

#[test]
fn cdp_puts_data_at_2n_and_code_at_2n_plus_1() {
    // arrange
    let mut b = with_cdp_on();
    let classes = [CatClass {
        class: ClassId::new(3),
        mask: CatMask::Cdp {
            data: mask(0xff),
            code: mask(0xf00),
        },
    }];
    // act
    b.set_cat_classes(CatResource::L3, dom(0), &classes)
        .unwrap();
    // assert
    assert_eq!(b.io().get(cpu(0), MsrAddr::new(0xC96)), Some(0xff));
    assert_eq!(b.io().get(cpu(0), MsrAddr::new(0xC97)), Some(0xf00));
    assert_eq!(b.io().writes(), 2);
}

#[test]
fn cat_classes_with_cdp_on_reads_data_and_code_pairs() {
    // arrange
    let mut b = with_cdp_on();
    for n in 0..16 {
        b.io_mut().set(cpu(4), l3(n), 1 << n);
    }
    // act
    let classes = b.cat_classes(CatResource::L3, dom(1)).unwrap();
    // assert
    assert_eq!(classes.len(), 8);
    assert_eq!(
        classes[2].mask,
        CatMask::Cdp {
            data: mask(1 << 4),
            code: mask(1 << 5)
        }
    );
}

#[test]
fn masks_are_validated_for_every_class_before_any_write() {
    // arrange
    let mut b = fresh();
    let classes = [
        CatClass {
            class: ClassId::new(1),
            mask: CatMask::Unified(mask(0xf)),
        },
        CatClass {
            class: ClassId::new(2),
            mask: CatMask::Unified(mask(0x505)),
        }, // not contiguous
    ];
    // act
    let err = b
        .set_cat_classes(CatResource::L3, dom(0), &classes)
        .unwrap_err();
    // assert
    assert!(
        matches!(
            err,
            MsrError::Request(RequestError::Limit(LimitError::NonContiguous { .. }))
        ),
        "{err}"
    );
    assert_eq!(b.io().writes(), 0);
}

#[test]
fn a_mask_wider_than_the_cbm_is_rejected_before_any_write() {
    let mut b = fresh();
    let classes = [CatClass {
        class: ClassId::new(0),
        mask: CatMask::Unified(mask(0x1f_ffff)),
    }];
    let err = b
        .set_cat_classes(CatResource::L3, dom(0), &classes)
        .unwrap_err();
    assert!(
        matches!(
            err,
            MsrError::Request(RequestError::Limit(LimitError::MaskTooWide {
                cbm_len: 20,
                ..
            }))
        ),
        "{err}"
    );
    assert_eq!(b.io().writes(), 0);
}

#[test]
fn a_class_beyond_the_usable_count_with_cdp_on_is_rejected_before_any_write() {
    // arrange
    let mut b = with_cdp_on();
    let classes = [
        CatClass {
            class: ClassId::new(0),
            mask: CatMask::Cdp {
                data: mask(1),
                code: mask(1),
            },
        },
        CatClass {
            class: ClassId::new(8),
            mask: CatMask::Cdp {
                data: mask(1),
                code: mask(1),
            },
        },
    ];
    // act
    let err = b
        .set_cat_classes(CatResource::L3, dom(0), &classes)
        .unwrap_err();
    // assert
    assert!(
        matches!(
            err,
            MsrError::Request(RequestError::Limit(LimitError::ClassOutOfRange {
                num_classes: 8,
                ..
            }))
        ),
        "{err}"
    );
    assert_eq!(b.io().writes(), 0);
}

#[test]
fn mask_kind_must_match_the_cdp_state() {
    // arrange
    let mut off = fresh();
    let mut on = with_cdp_on();
    let pair = [CatClass {
        class: ClassId::new(1),
        mask: CatMask::Cdp {
            data: mask(1),
            code: mask(1),
        },
    }];
    let one = [CatClass {
        class: ClassId::new(1),
        mask: CatMask::Unified(mask(1)),
    }];
    // act
    let e_off = off
        .set_cat_classes(CatResource::L3, dom(0), &pair)
        .unwrap_err();
    let e_on = on
        .set_cat_classes(CatResource::L3, dom(0), &one)
        .unwrap_err();
    // assert
    assert!(matches!(
        e_off,
        MsrError::Request(RequestError::CdpMismatch { .. })
    ));
    assert_eq!(
        e_on.to_string(),
        "L3 COS1: CDP is on, so the class needs a data and a code mask"
    );
    assert_eq!(off.io().writes() + on.io().writes(), 0);
}

#[test]
fn an_unknown_domain_is_rejected_without_access() {
    let mut b = fresh();
    let err = b.cat_classes(CatResource::L3, dom(2)).unwrap_err();
    assert!(
        matches!(
            err,
            MsrError::Request(RequestError::NoSuchDomain { resource: "L3", .. })
        ),
        "{err}"
    );
    assert_eq!(accesses(&b), 0);
}

#[test]
fn l2_masks_go_to_0xd10_on_the_lowest_cpu_of_the_l2_domain() {
    let mut b = fresh();
    let classes = [CatClass {
        class: ClassId::new(2),
        mask: CatMask::Unified(mask(0x3c)),
    }];
    b.set_cat_classes(CatResource::L2, dom(3), &classes)
        .unwrap();
    assert_eq!(b.io().get(cpu(6), MsrAddr::new(0xD12)), Some(0x3c));
}

#[test]
fn an_unsupported_resource_is_a_limit_error() {
    let mut c = caps();
    c.l2_cat = Feature::DetailsUnknown;
    let mut b = backend_with(FakeMsrs::new(), c);
    let err = b.set_cat_classes(CatResource::L2, dom(0), &[]).unwrap_err();
    assert!(
        matches!(
            err,
            MsrError::Request(RequestError::Limit(LimitError::Unsupported("L2 CAT")))
        ),
        "{err}"
    );
}

// ---- MBA ----

fn set_mba(b: &mut MsrBackend<FakeMsrs>, class: u32, pct: u8) -> Result<MbaLimit, MsrError> {
    let out = b.set_mba_classes(
        dom(0),
        &[MbaClass {
            class: ClassId::new(class),
            limit: MbaLimit::Percent(pct),
        }],
    )?;
    Ok(out[0].limit)
}

#[test]
fn mba_percent_is_rounded_half_up_to_the_granularity_and_clipped_to_max_delay() {
    // arrange
    let mut b = fresh();
    let delay = |b: &MsrBackend<FakeMsrs>| b.io().get(cpu(0), regs::IA32_MBA_THRTL_0.offset(1));
    // act / assert: (requested %, delay written, % applied)
    for (pct, d, applied) in [
        (70, 30, 70),
        (75, 20, 80),
        (74, 30, 70),
        (5, 90, 10),
        (4, 90, 10),
        (100, 0, 100),
        (1, 90, 10),
    ] {
        assert_eq!(
            set_mba(&mut b, 1, pct).unwrap(),
            MbaLimit::Percent(applied),
            "{pct}%"
        );
        assert_eq!(delay(&b), Some(d), "{pct}%");
    }
}

#[test]
fn mba_zero_or_above_100_percent_is_rejected_before_writing() {
    let mut b = fresh();
    let e0 = set_mba(&mut b, 1, 0).unwrap_err();
    let e101 = set_mba(&mut b, 1, 101).unwrap_err();
    assert!(matches!(
        e0,
        MsrError::Request(RequestError::Limit(LimitError::MbaOutOfRange {
            value: 0,
            ..
        }))
    ));
    assert!(matches!(
        e101,
        MsrError::Request(RequestError::Limit(LimitError::MbaOutOfRange {
            value: 101,
            ..
        }))
    ));
    assert_eq!(b.io().writes(), 0);
}

#[test]
fn mba_validates_every_class_before_writing() {
    let mut b = fresh();
    let classes = [
        MbaClass {
            class: ClassId::new(1),
            limit: MbaLimit::Percent(50),
        },
        MbaClass {
            class: ClassId::new(8),
            limit: MbaLimit::Percent(50),
        },
    ];
    let err = b.set_mba_classes(dom(0), &classes).unwrap_err();
    assert!(
        matches!(
            err,
            MsrError::Request(RequestError::Limit(LimitError::ClassOutOfRange {
                resource: "MBA",
                ..
            }))
        ),
        "{err}"
    );
    assert_eq!(b.io().writes(), 0);
}

#[test]
fn mba_in_mbps_is_unsupported_on_the_msr_interface() {
    let mut b = fresh();
    let err = b
        .set_mba_classes(
            dom(0),
            &[MbaClass {
                class: ClassId::new(1),
                limit: MbaLimit::MibPerSec(6000),
            }],
        )
        .unwrap_err();
    assert!(
        matches!(
            &err,
            MsrError::Request(RequestError::MbaUnit {
                mismatch: MbaUnitMismatch::MibPerSecOnMsr,
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(b.io().writes(), 0);
}

#[test]
fn mba_classes_reports_100_minus_delay() {
    let mut b = fresh();
    b.io_mut().set(cpu(4), regs::IA32_MBA_THRTL_0.offset(2), 40);
    let classes = b.mba_classes(dom(1)).unwrap();
    assert_eq!(classes.len(), 8);
    assert_eq!(classes[2].limit, MbaLimit::Percent(60));
    assert_eq!(classes[0].limit, MbaLimit::Percent(100));
}

fn amd_caps() -> Capabilities {
    let mut c = caps();
    c.vendor = Vendor::Amd;
    c.l2_cat = Feature::Unsupported;
    c.mba = Feature::Supported(fixtures::amd_mba(16));
    c.smba = Feature::Supported(fixtures::amd_mba(16));
    c
}

#[test]
fn amd_mba_writes_raw_units_and_rejects_zero_or_above_2_pow_width() {
    // arrange
    let mut b = backend_with(FakeMsrs::new(), amd_caps());
    let set = |b: &mut MsrBackend<FakeMsrs>, u| {
        b.set_mba_classes(
            dom(1),
            &[MbaClass {
                class: ClassId::new(3),
                limit: MbaLimit::AmdUnits(u),
            }],
        )
    };
    // act
    let applied = set(&mut b, 100).unwrap();
    b.io_mut().reset_counts();
    let e0 = set(&mut b, 0).unwrap_err();
    let e_max = set(&mut b, 2049).unwrap_err();
    // assert
    assert_eq!(applied[0].limit, MbaLimit::AmdUnits(100));
    assert_eq!(b.io().get(cpu(4), MsrAddr::new(0xC000_0203)), Some(100));
    assert!(matches!(
        e0,
        MsrError::Request(RequestError::Limit(LimitError::MbaOutOfRange {
            value: 0,
            min: 1,
            max: 2048
        }))
    ));
    assert!(matches!(
        e_max,
        MsrError::Request(RequestError::Limit(LimitError::MbaOutOfRange {
            value: 2049,
            ..
        }))
    ));
    assert!(set(&mut b, 2048).is_ok());
    assert_eq!(b.io().writes(), 1);
}

#[test]
fn amd_mba_refuses_percentages() {
    let mut b = backend_with(FakeMsrs::new(), amd_caps());
    assert!(matches!(
        set_mba(&mut b, 1, 50),
        Err(MsrError::Request(RequestError::MbaUnit {
            mismatch: MbaUnitMismatch::PercentOnAmd,
            ..
        }))
    ));
}

// ---- reset_allocation ----

#[test]
fn reset_allocation_restores_full_masks_no_throttling_and_cos0_keeping_rmids() {
    // arrange
    let mut b = fresh();
    b.io_mut().set(cpu(5), PQR, regs::pqr_assoc(3, 9));
    b.io_mut().set(cpu(0), l3(4), 0x3);
    b.io_mut().set(cpu(4), regs::IA32_MBA_THRTL_0.offset(7), 50);
    // act
    b.reset_allocation(&AllocReset::default()).unwrap();
    // assert
    for c in [0, 4] {
        for n in 0..16 {
            assert_eq!(b.io().get(cpu(c), l3(n)), Some(0xfffff), "CPU {c} COS{n}");
        }
        for n in 0..8 {
            assert_eq!(
                b.io().get(cpu(c), regs::IA32_MBA_THRTL_0.offset(n)),
                Some(0)
            );
        }
    }
    for c in [0, 2, 4, 6] {
        for n in 0..8 {
            assert_eq!(
                b.io().get(cpu(c), regs::IA32_L2_QOS_MASK_0.offset(n)),
                Some(0xff)
            );
        }
    }
    assert_eq!(b.io().get(cpu(5), PQR), Some(regs::pqr_assoc(0, 9)));
    assert_eq!(b.io().get(cpu(0), regs::IA32_L3_QOS_CFG), None); // CDP left alone
}

#[test]
fn reset_with_l3cdp_on_doubles_the_mask_registers_and_sets_qos_cfg_bit_0() {
    // arrange
    let mut b = fresh();
    b.io_mut().set(cpu(4), regs::IA32_L3_QOS_CFG, 0x100); // another bit must survive
    let cfg = AllocReset {
        l3_cdp: FeatureSetting::On,
        ..AllocReset::default()
    };
    // act
    b.reset_allocation(&cfg).unwrap();
    // assert
    assert_eq!(b.io().get(cpu(0), regs::IA32_L3_QOS_CFG), Some(1));
    assert_eq!(b.io().get(cpu(4), regs::IA32_L3_QOS_CFG), Some(0x101));
    let l3cat = b.capabilities().l3_cat.get().unwrap();
    assert!(l3cat.cdp_enabled);
    assert_eq!(l3cat.usable_classes(), 8);
    let classes = b.cat_classes(CatResource::L3, dom(1)).unwrap();
    assert_eq!(classes.len(), 8);
    assert!(classes.iter().all(|c| c.mask
        == CatMask::Cdp {
            data: mask(0xfffff),
            code: mask(0xfffff)
        }));
}

#[test]
fn reset_with_l3cdp_off_clears_the_bit_and_restores_16_classes() {
    // arrange
    let mut b = with_cdp_on();
    let cfg = AllocReset {
        l3_cdp: FeatureSetting::Off,
        ..AllocReset::default()
    };
    // act
    b.reset_allocation(&cfg).unwrap();
    // assert
    assert_eq!(b.io().get(cpu(0), regs::IA32_L3_QOS_CFG), Some(0));
    assert_eq!(b.capabilities().l3_cat.get().unwrap().usable_classes(), 16);
    assert_eq!(b.cat_classes(CatResource::L3, dom(0)).unwrap().len(), 16);
}

#[test]
fn cdp_on_where_unsupported_fails_before_any_write() {
    // arrange
    let mut c = caps();
    c.l2_cat.get_mut().unwrap().cdp_supported = false;
    let mut b = backend_with(FakeMsrs::new(), c);
    b.io_mut().reset_counts();
    let cfg = AllocReset {
        l2_cdp: FeatureSetting::On,
        ..AllocReset::default()
    };
    // act
    let err = b.reset_allocation(&cfg).unwrap_err();
    // assert
    assert!(
        matches!(&err, MsrError::Request(RequestError::Unsupported(m)) if m.contains("L2 CDP requested")),
        "{err}"
    );
    assert_eq!(accesses(&b), 0);
}

#[test]
fn mba_ctrl_on_is_unsupported_on_msr() {
    let mut b = fresh();
    let cfg = AllocReset {
        mba_ctrl: FeatureSetting::On,
        ..AllocReset::default()
    };
    assert!(matches!(
        b.reset_allocation(&cfg),
        Err(MsrError::Request(RequestError::Unsupported(_)))
    ));
    assert_eq!(accesses(&b), 0);
}

#[test]
fn amd_smba_reads_and_writes_its_own_registers_from_0xc000_0280() {
    // arrange: MBA COS3 at 100 units in domain 1, SMBA untouched
    let mut b = backend_with(FakeMsrs::new(), amd_caps());
    b.reset_allocation(&AllocReset::default()).unwrap();
    b.set_mba_classes(
        dom(1),
        &[MbaClass {
            class: ClassId::new(3),
            limit: MbaLimit::AmdUnits(100),
        }],
    )
    .unwrap();
    // act
    let applied = b
        .set_bandwidth_classes(
            MbaResource::Smba,
            dom(1),
            &[MbaClass {
                class: ClassId::new(3),
                limit: MbaLimit::AmdUnits(16),
            }],
        )
        .unwrap();
    let too_big = b.set_bandwidth_classes(
        MbaResource::Smba,
        dom(1),
        &[MbaClass {
            class: ClassId::new(3),
            limit: MbaLimit::AmdUnits(2049),
        }],
    );
    // assert: SMBA_BW_BASE + 3 on a CPU of domain 1; MBA's register keeps its value
    assert_eq!(applied[0].limit, MbaLimit::AmdUnits(16));
    assert_eq!(b.io().get(cpu(4), MsrAddr::new(0xC000_0283)), Some(16));
    assert_eq!(b.io().get(cpu(4), MsrAddr::new(0xC000_0203)), Some(100));
    let smba = b.bandwidth_classes(MbaResource::Smba, dom(1)).unwrap();
    assert_eq!(smba[3].limit, MbaLimit::AmdUnits(16));
    assert_eq!(smba[2].limit, MbaLimit::AmdUnits(2048));
    assert_eq!(
        b.mba_classes(dom(1)).unwrap()[3].limit,
        MbaLimit::AmdUnits(100)
    );
    assert!(too_big.is_err());
    assert_eq!(b.io().get(cpu(4), MsrAddr::new(0xC000_0283)), Some(16));
}

#[test]
fn amd_reset_sets_mba_and_smba_to_2_pow_width() {
    let mut b = backend_with(FakeMsrs::new(), amd_caps());
    b.reset_allocation(&AllocReset::default()).unwrap();
    assert_eq!(b.io().get(cpu(4), MsrAddr::new(0xC000_020F)), Some(2048));
    assert_eq!(b.io().get(cpu(0), MsrAddr::new(0xC000_0280)), Some(2048));
}

// ---- monitoring: start / stop / reset ----

#[test]
fn rmid_allocation_picks_the_lowest_free_rmid_skipping_those_in_pqr_assoc() {
    // arrange: another tool holds RMIDs 1 and 2 in domain 0, RMID 1 in domain 1
    let mut b = fresh();
    b.io_mut().set(cpu(2), PQR, regs::pqr_assoc(0, 1));
    b.io_mut().set(cpu(3), PQR, regs::pqr_assoc(4, 2));
    b.io_mut().set(cpu(7), PQR, regs::pqr_assoc(0, 1));
    // act
    b.start_monitoring(&cpus("0-1"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    b.start_monitoring(&cpus("4"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    let g3 = b
        .start_monitoring(&cpus("5"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    // assert
    assert_eq!(b.rmid_of(cpu(0)).unwrap(), Some(Rmid::new(3)));
    assert_eq!(b.rmid_of(cpu(1)).unwrap(), Some(Rmid::new(3)));
    assert_eq!(b.rmid_of(cpu(4)).unwrap(), Some(Rmid::new(2)));
    assert_eq!(b.rmid_of(cpu(5)).unwrap(), Some(Rmid::new(3)));
    assert_eq!(g3, MonGroupId(2));
}

#[test]
fn start_keeps_the_class_of_service() {
    let mut b = fresh();
    b.io_mut().set(cpu(1), PQR, regs::pqr_assoc(6, 0));
    b.start_monitoring(&cpus("1"), MonEvents::PQOS_ALL).unwrap();
    assert_eq!(b.io().get(cpu(1), PQR), Some(regs::pqr_assoc(6, 1)));
}

#[test]
fn a_cpu_with_a_non_zero_rmid_refuses_start_and_nothing_is_written() {
    // arrange
    let mut b = fresh();
    b.io_mut().set(cpu(2), PQR, regs::pqr_assoc(0, 5));
    // act
    let err = b
        .start_monitoring(&cpus("1-3"), MonEvents::PQOS_ALL)
        .unwrap_err();
    // assert
    assert!(
        matches!(&err, MsrError::Request(RequestError::AlreadyMonitored { what, by: Some(by) }) if what == "CPU 2" && by.starts_with("RMID 5")),
        "{err}"
    );
    assert_eq!(b.io().writes(), 0);
}

#[test]
fn a_cpu_already_in_a_group_of_this_backend_refuses_start() {
    let mut b = fresh();
    b.start_monitoring(&cpus("1"), MonEvents::IPC).unwrap(); // PMU only: no RMID written
    let err = b
        .start_monitoring(&cpus("0-1"), MonEvents::IPC)
        .unwrap_err();
    assert!(
        matches!(&err, MsrError::Request(RequestError::AlreadyMonitored { what, .. }) if what == "CPU 1"),
        "{err}"
    );
}

#[test]
fn a_group_gets_one_rmid_per_l3_domain_it_spans() {
    // arrange
    let mut b = fresh();
    b.io_mut().set(cpu(6), PQR, regs::pqr_assoc(0, 1));
    // act
    b.start_monitoring(&cpus("2-5"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    // assert
    let rmids: Vec<_> = (2..6)
        .map(|c| b.rmid_of(cpu(c)).unwrap().unwrap().get())
        .collect();
    assert_eq!(rmids, [1, 1, 2, 2]);
}

#[test]
fn unsupported_events_are_refused_naming_the_event() {
    // arrange
    let mut c = caps();
    c.monitoring.get_mut().unwrap().events.mbm_total = false;
    let mut b = backend_with(FakeMsrs::new(), c);
    // act
    let err = b
        .start_monitoring(&cpus("0"), MonEvents::PQOS_ALL)
        .unwrap_err();
    // assert
    assert_eq!(
        err.to_string(),
        "monitoring of total memory bandwidth (needed for remote memory bandwidth) is not supported on \
         this platform"
    );
    assert!(
        b.start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL)
            .is_ok()
    );
}

#[test]
fn pmu_events_start_without_a_pmu() {
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("3"), MonEvents::IPC | MonEvents::LLC_MISSES)
        .unwrap();
    b.poll().unwrap();
    let v = b.values(g).unwrap();
    assert_eq!(
        (
            v.instructions_delta,
            v.llc_misses_delta,
            v.llc_occupancy_bytes
        ),
        (None, None, None)
    );
    assert_eq!(b.rmid_of(cpu(3)).unwrap(), Some(Rmid::new(0)));
}

#[test]
fn offline_cpus_and_empty_groups_are_refused() {
    let mut b = fresh();
    assert!(matches!(
        b.start_monitoring(&cpus("8"), MonEvents::PQOS_ALL),
        Err(MsrError::Request(RequestError::NoSuchCpu(_)))
    ));
    assert!(matches!(
        b.start_monitoring(&CpuSet::new(), MonEvents::PQOS_ALL),
        Err(MsrError::Request(RequestError::EmptyGroup))
    ));
    assert!(matches!(
        b.start_monitoring(&cpus("0"), MonEvents::empty()),
        Err(MsrError::Request(RequestError::EmptyGroup))
    ));
}

#[test]
fn running_out_of_rmids_is_an_error_naming_the_domain() {
    // arrange: 4 RMIDs; CPUs 5-7 hold 1-3
    let mut c = caps();
    c.monitoring.get_mut().unwrap().num_rmids = 4;
    let mut b = backend_with(FakeMsrs::new(), c);
    for (cpu_n, rmid) in [(5, 1), (6, 2), (7, 3)] {
        b.io_mut().set(cpu(cpu_n), PQR, regs::pqr_assoc(0, rmid));
    }
    b.io_mut().reset_counts();
    // act
    let err = b
        .start_monitoring(&cpus("4"), MonEvents::LLC_OCCUPANCY)
        .unwrap_err();
    // assert
    assert!(
        matches!(&err, MsrError::Request(RequestError::OutOfRmids { scope, .. }) if *scope == format!("L3 domain {}", dom(1))),
        "{err}"
    );
    assert_eq!(b.io().writes(), 0);
}

#[test]
fn stop_restores_rmid_0_keeping_cos_and_frees_the_rmid() {
    // arrange
    let mut b = fresh();
    b.io_mut().set(cpu(1), PQR, regs::pqr_assoc(2, 0));
    let g = b
        .start_monitoring(&cpus("0-1"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    // act
    b.stop_monitoring(g).unwrap();
    // assert
    assert_eq!(b.io().get(cpu(1), PQR), Some(regs::pqr_assoc(2, 0)));
    assert_eq!(b.io().get(cpu(0), PQR), Some(0));
    assert!(b.values(g).is_none());
    assert!(
        matches!(b.stop_monitoring(g), Err(MsrError::Request(RequestError::NoSuchGroup(id))) if id == g)
    );
    b.start_monitoring(&cpus("2"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    assert_eq!(b.rmid_of(cpu(2)).unwrap(), Some(Rmid::new(1)));
}

#[test]
fn reset_monitoring_zeroes_every_rmid_keeping_cos_and_forgets_groups() {
    // arrange
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    b.io_mut().set(cpu(7), PQR, regs::pqr_assoc(3, 44));
    // act
    b.reset_monitoring().unwrap();
    // assert
    assert_eq!(b.io().get(cpu(7), PQR), Some(regs::pqr_assoc(3, 0)));
    assert_eq!(b.io().get(cpu(0), PQR), Some(0));
    assert!(b.values(g).is_none());
}

// ---- monitoring: poll ----

/// Sets the raw IA32_QM_CTR value CPU `c` returns for (`rmid`, `event`).
fn ctr(b: &mut MsrBackend<FakeMsrs>, c: u32, rmid: u32, event: u64, value: u64) {
    b.io_mut().set_counter(cpu(c), rmid, event, value);
}

#[test]
fn poll_does_exactly_two_msr_accesses_per_event_per_context() {
    // arrange: a group over both L3 domains, occupancy + local + total (remote implies both)
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("2-5"), MonEvents::PQOS_ALL | MonEvents::MBM_TOTAL)
        .unwrap();
    b.io_mut().reset_counts();
    // act
    b.poll().unwrap();
    // assert: 3 events x 2 contexts x (1 WRMSR EVTSEL + 1 RDMSR QM_CTR)
    assert_eq!((b.io().writes(), b.io().reads()), (6, 6));
    assert!(b.values(g).is_some());
}

/// Starting a group reads its MBM counters once (one WRMSR IA32_QM_EVTSEL and one RDMSR
/// IA32_QM_CTR per MBM event per context), not its occupancy: what a start costs beyond
/// tagging the CPUs.
#[test]
fn start_reads_each_mbm_counter_once_and_not_the_occupancy() {
    // arrange: the same group with occupancy only, and with occupancy, local and total
    let cost = |events| {
        let mut b = fresh();
        b.start_monitoring(&cpus("2-5"), events).unwrap();
        (b.io().writes(), b.io().reads())
    };
    // act
    let occupancy = cost(MonEvents::LLC_OCCUPANCY);
    let all = cost(MonEvents::PQOS_ALL | MonEvents::MBM_TOTAL);
    // assert: 2 MBM events x 2 contexts more
    assert_eq!((all.0 - occupancy.0, all.1 - occupancy.1), (4, 4));
}

#[test]
fn first_poll_reports_the_traffic_since_start_and_scaled_occupancy_summed_over_domains() {
    // arrange: RMID 1 counted before this group (a previous user of the RMID)
    let mut b = fresh();
    ctr(&mut b, 3, 1, EVT_MBM_LOCAL, 400);
    ctr(&mut b, 3, 1, EVT_MBM_TOTAL, 500);
    let g = b
        .start_monitoring(&cpus("3-4"), MonEvents::PQOS_ALL)
        .unwrap();
    ctr(&mut b, 3, 1, EVT_LLC_OCCUPANCY, 10);
    ctr(&mut b, 4, 1, EVT_LLC_OCCUPANCY, 5);
    ctr(&mut b, 3, 1, EVT_MBM_LOCAL, 1000);
    ctr(&mut b, 3, 1, EVT_MBM_TOTAL, 2000);
    // act
    b.poll().unwrap();
    // assert: the counts since the reading at start, not a zero first sample
    let v = b.values(g).unwrap().clone();
    assert_eq!(v.llc_occupancy_bytes, Some(15 * SCALE));
    assert_eq!(v.mbm_local_delta_bytes, Some(600 * SCALE));
    assert_eq!(v.mbm_total_delta_bytes, Some(1500 * SCALE));
    assert_eq!(v.mbm_remote_delta_bytes, Some(900 * SCALE));
    assert_eq!(
        v.mbm_local_bytes,
        Some(600 * SCALE),
        "cumulative from the start"
    );
    assert!(v.interval > std::time::Duration::ZERO, "since the start");
    assert!(v.mbm_local_bytes_per_s().is_some_and(|r| r > 0.0));
}

#[test]
fn mbm_deltas_are_scaled_and_remote_is_total_minus_local() {
    // arrange
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::MBM_REMOTE)
        .unwrap();
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, 100);
    ctr(&mut b, 0, 1, EVT_MBM_TOTAL, 100);
    b.poll().unwrap();
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, 130);
    ctr(&mut b, 0, 1, EVT_MBM_TOTAL, 150);
    // act
    b.poll().unwrap();
    // assert
    let v = b.values(g).unwrap().clone();
    assert_eq!(v.mbm_local_delta_bytes, Some(30 * SCALE));
    assert_eq!(v.mbm_total_delta_bytes, Some(50 * SCALE));
    assert_eq!(v.mbm_remote_delta_bytes, Some(20 * SCALE));
    assert_eq!(v.llc_occupancy_bytes, None);
}

#[test]
fn remote_is_zero_when_local_exceeds_total() {
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::MBM_REMOTE)
        .unwrap();
    b.poll().unwrap();
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, 50);
    ctr(&mut b, 0, 1, EVT_MBM_TOTAL, 40);
    b.poll().unwrap();
    assert_eq!(b.values(g).unwrap().mbm_remote_delta_bytes, Some(0));
}

#[test]
fn a_counter_wrapping_at_24_bits_gives_the_right_delta() {
    // arrange
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("4"), MonEvents::MBM_LOCAL)
        .unwrap();
    ctr(&mut b, 4, 1, EVT_MBM_LOCAL, 0xff_fff0);
    b.poll().unwrap();
    ctr(&mut b, 4, 1, EVT_MBM_LOCAL, 0x10);
    // act
    b.poll().unwrap();
    // assert
    assert_eq!(
        b.values(g).unwrap().mbm_local_delta_bytes,
        Some(0x20 * SCALE)
    );
}

#[test]
fn data_bits_above_the_counter_width_are_ignored() {
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    ctr(&mut b, 0, 1, EVT_LLC_OCCUPANCY, (1 << 30) | 3);
    b.poll().unwrap();
    assert_eq!(b.values(g).unwrap().llc_occupancy_bytes, Some(3 * SCALE));
}

#[test]
fn the_error_bit_gives_none_after_four_attempts_reselecting_each_time() {
    // arrange
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    ctr(&mut b, 0, 1, EVT_LLC_OCCUPANCY, regs::QM_CTR_ERROR);
    b.io_mut().reset_counts();
    // act
    b.poll().unwrap();
    // assert
    assert_eq!(b.values(g).unwrap().llc_occupancy_bytes, None);
    assert_eq!((b.io().writes(), b.io().reads()), (4, 4));
}

#[test]
fn the_unavailable_bit_gives_none_after_four_reads() {
    // arrange
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::MBM_LOCAL)
        .unwrap();
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, regs::QM_CTR_UNAVAILABLE | 5);
    b.io_mut().reset_counts();
    // act
    b.poll().unwrap();
    // assert
    assert_eq!(b.values(g).unwrap().mbm_local_delta_bytes, None);
    assert_eq!((b.io().writes(), b.io().reads()), (1, 4));
}

#[test]
fn a_transient_unavailable_is_retried_and_the_value_used() {
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    ctr(&mut b, 0, 1, EVT_LLC_OCCUPANCY, regs::QM_CTR_UNAVAILABLE);
    b.io_mut().queue_counter(cpu(0), 1, EVT_LLC_OCCUPANCY, 2);
    b.io_mut().reset_counts();
    b.poll().unwrap();
    assert_eq!(b.values(g).unwrap().llc_occupancy_bytes, Some(2 * SCALE));
    assert_eq!((b.io().writes(), b.io().reads()), (1, 2));
}

#[test]
fn after_a_failed_read_the_next_delta_is_unknown_then_counting_resumes() {
    // arrange
    let mut b = fresh();
    let g = b
        .start_monitoring(&cpus("0"), MonEvents::MBM_LOCAL)
        .unwrap();
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, 10);
    b.poll().unwrap(); // first: 10 since the start
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, regs::QM_CTR_UNAVAILABLE);
    b.poll().unwrap(); // failed: None
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, 50);
    b.poll().unwrap(); // rebaseline: None
    let after_gap = b.values(g).unwrap().mbm_local_delta_bytes;
    ctr(&mut b, 0, 1, EVT_MBM_LOCAL, 53);
    // act
    b.poll().unwrap();
    // assert
    assert_eq!(after_gap, None);
    assert_eq!(b.values(g).unwrap().mbm_local_delta_bytes, Some(3 * SCALE));
}

/// PMU counts by CPU, advanced by the test.
#[derive(Default)]
struct TablePmu(HashMap<LogicalCpu, PmuCounts>);

impl PmuSource for TablePmu {
    fn read(&mut self, cpu: LogicalCpu) -> Option<PmuCounts> {
        self.0.get(&cpu).copied()
    }
}

#[test]
fn pmu_deltas_are_summed_over_the_group_cpus() {
    // arrange
    let mut pmu = TablePmu::default();
    for c in [1, 2] {
        pmu.0.insert(
            cpu(c),
            PmuCounts {
                instructions: 1000,
                cycles: 500,
                llc_misses: 7,
                llc_references: Some(70),
            },
        );
    }
    let mut b = MsrBackend::new(FakeMsrs::new(), caps(), topology(), pmu).unwrap();
    let g = b.start_monitoring(&cpus("1-2"), MonEvents::PMU).unwrap();
    b.poll().unwrap();
    b.pmu_mut().0.insert(
        cpu(1),
        PmuCounts {
            instructions: 3000,
            cycles: 1500,
            llc_misses: 10,
            llc_references: Some(100),
        },
    );
    b.pmu_mut().0.insert(
        cpu(2),
        PmuCounts {
            instructions: 1500,
            cycles: 1000,
            llc_misses: 8,
            llc_references: Some(90),
        },
    );
    // act
    b.poll().unwrap();
    // assert
    let v = b.values(g).unwrap().clone();
    assert_eq!(
        (v.instructions_delta, v.cycles_delta, v.llc_misses_delta),
        (Some(2500), Some(1500), Some(4))
    );
    assert_eq!(v.llc_references_delta, Some(30 + 20));
    assert!((v.ipc().unwrap() - 2500.0 / 1500.0).abs() < 1e-12);
}

#[test]
fn pmu_deltas_are_none_if_any_cpu_cannot_be_read() {
    let mut pmu = TablePmu::default();
    pmu.0.insert(cpu(1), PmuCounts::default());
    let mut b = MsrBackend::new(FakeMsrs::new(), caps(), topology(), pmu).unwrap();
    let g = b.start_monitoring(&cpus("1-2"), MonEvents::IPC).unwrap();
    b.poll().unwrap();
    assert_eq!(b.values(g).unwrap().instructions_delta, None);
    assert_eq!(b.values(g).unwrap().llc_misses_delta, None);
}

#[test]
fn poll_propagates_a_failing_register_access() {
    // arrange
    let mut b = fresh();
    b.start_monitoring(&cpus("0"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    let mut strict = FakeMsrs::failing_unknown();
    strict.set(cpu(0), regs::IA32_QM_EVTSEL, 0);
    *b.io_mut() = strict;
    // act
    let err = b.poll().unwrap_err();
    // assert
    assert!(
        matches!(err, MsrError::Read { addr, .. } if addr == regs::IA32_QM_CTR),
        "{err}"
    );
}

#[test]
fn association_is_one_read_of_pqr_assoc() {
    // arrange: CPU 5 in COS3 with RMID 7
    let mut io = FakeMsrs::new();
    io.set(cpu(5), crate::regs::IA32_PQR_ASSOC, 3 << 32 | 7);
    let mut b = backend(io);
    b.io_mut().reset_counts();
    // act
    let got = b.association(cpu(5)).unwrap();
    // assert
    assert_eq!(got, (ClassId::new(3), Some(Rmid::new(7))));
    assert_eq!(b.io().reads(), 1, "class and RMID from one RDMSR");
    assert_eq!(
        (b.class_of(cpu(5)).unwrap(), b.rmid_of(cpu(5)).unwrap()),
        (got.0, got.1),
        "the same as the two single calls"
    );
    assert!(b.association(cpu(99)).is_err(), "offline CPU");
}

/// The test platform with the uncore PCIe events (a Skylake-SP would report them).
fn uncore_backend() -> MsrBackend<FakeMsrs> {
    let mut c = caps();
    c.uncore_pcie = true;
    let mut b = backend_with(FakeMsrs::new(), c);
    b.io_mut().reset_counts();
    b
}

#[test]
fn uncore_group_programs_one_cpu_per_socket_and_sums_the_sockets() {
    // arrange: CHA 0 counter 0 (0xE08) of socket 0 (CPU 0) and socket 1 (CPU 4)
    let mut b = uncore_backend();
    let ctr = MsrAddr::new(0xE08);
    // act
    let g = b
        .start_uncore_monitoring(&[0, 1], MonEvents::UNCORE)
        .unwrap();
    // assert: 6 writes per event per socket, on the lowest CPU of each socket only
    assert_eq!(b.io().writes(), 2 * 4 * 6);
    for c in [0, 4] {
        assert_eq!(b.io().get(cpu(c), MsrAddr::new(0xE01)), Some(0x40_2435));
        assert_eq!(b.io().get(cpu(c), MsrAddr::new(0xE36)), Some(0x1004_9033));
        assert_eq!(b.io().get(cpu(c), MsrAddr::new(0xE30)), Some(0x1_0000));
    }
    assert_eq!(b.io().get(cpu(1), MsrAddr::new(0xE00)), None);
    b.io_mut().set(cpu(0), ctr, 1000);
    b.io_mut().set(cpu(4), ctr, 234);
    b.poll().unwrap();
    let v = b.values(g).unwrap().uncore.unwrap();
    assert_eq!(v.llc_miss_pcie_read, Some(1234));
    assert_eq!(v.llc_ref_pcie_write, Some(0));
    // stop: "reset control" in each CHA's box control
    b.stop_monitoring(g).unwrap();
    assert_eq!(b.io().get(cpu(4), MsrAddr::new(0xE20)), Some(0x1_0101));
    assert!(b.values(g).is_none());
}

#[test]
fn uncore_monitoring_is_refused_without_the_events_or_for_a_missing_socket() {
    let mut plain = fresh();
    let e = plain
        .start_uncore_monitoring(&[0], MonEvents::UNCORE)
        .unwrap_err();
    assert!(
        matches!(e, MsrError::Request(RequestError::UnsupportedEvent { .. })),
        "{e}"
    );
    let mut b = uncore_backend();
    let e = b
        .start_uncore_monitoring(&[7], MonEvents::UNCORE)
        .unwrap_err();
    assert!(
        e.to_string().contains("socket domain 7 does not exist"),
        "{e}"
    );
    let e = b
        .start_uncore_monitoring(&[0], MonEvents::LLC_OCCUPANCY)
        .unwrap_err();
    assert!(matches!(
        e,
        MsrError::Request(RequestError::UnsupportedEvent { .. })
    ));
    b.start_uncore_monitoring(&[1], MonEvents::UNCORE).unwrap();
    let e = b
        .start_uncore_monitoring(&[0, 1], MonEvents::UNCORE)
        .unwrap_err();
    assert!(
        e.to_string().contains("socket 1 is already monitored"),
        "{e}"
    );
    assert_eq!(
        b.io().writes(),
        4 * 6,
        "nothing written by the refused starts"
    );
}

#[test]
fn mbm_of_an_rmid_above_the_erratum_threshold_is_corrected_as_the_kernel_does() {
    // arrange: a Broadwell-X (family 6 model 4FH) with 24 RMIDs: the kernel's table entry
    // (15, 0.969650) corrects RMIDs 16..=23; 20 CPUs in one L3
    let mut caps = caps();
    caps.signature = Some(0x0004_06f1);
    if let Feature::Supported(m) = &mut caps.monitoring {
        m.num_rmids = 24;
        m.max_rmid = 23;
    }
    let topo = fixtures::topology((0..20).map(|c| (c, 0, c, 0)));
    let mut b = MsrBackend::new(FakeMsrs::new(), caps, topo, rdt_core::NoPmu).unwrap();
    let groups: Vec<MonGroupId> = (0..16)
        .map(|c| {
            b.start_monitoring(&cpus(&c.to_string()), MonEvents::MBM_TOTAL)
                .unwrap()
        })
        .collect();
    // RMIDs 1..=16 in CPU order: CPU 14 has RMID 15 (the threshold), CPU 15 RMID 16
    for (c, rmid) in [(14, 15), (15, 16)] {
        assert_eq!(b.rmid_of(cpu(c)).unwrap(), Some(Rmid::new(rmid)));
        ctr(&mut b, c, rmid, EVT_MBM_TOTAL, 1_000);
    }
    b.poll().unwrap();
    for (c, rmid) in [(14, 15), (15, 16)] {
        ctr(&mut b, c, rmid, EVT_MBM_TOTAL, 1_000 + 1_000_000);
    }
    // act
    b.poll().unwrap();
    // assert: 1,000,000 counts; the RMID above the threshold × 1016752 / 2^20
    let delta = |g: MonGroupId| b.values(g).unwrap().mbm_total_delta_bytes;
    assert_eq!(delta(groups[14]), Some(1_000_000 * SCALE));
    assert_eq!(
        delta(groups[15]),
        Some(((1_000_000 * 1_016_752) >> 20) * SCALE)
    );
}

#[test]
fn mba_thread_throttle_reads_mba_cfg_where_mba_2_0_has_it() {
    use rdt_core::{MbaCaps, MbaKind, ThreadThrottle};
    let with_mba = |classes: u32, per_thread: bool| {
        let mut caps = caps();
        caps.mba = Feature::Supported(MbaCaps {
            num_classes: classes,
            kind: MbaKind::IntelDelay {
                max_delay: 90,
                linear: true,
                per_thread,
            },
            ctrl_enabled: false,
        });
        caps
    };
    // MBA 1.0 (8 classes): the larger delay, nothing read
    let mut b = backend_with(FakeMsrs::new(), with_mba(8, false));
    b.io_mut().reset_counts();
    assert_eq!(
        b.mba_thread_throttle(dom(0)).unwrap(),
        Some(ThreadThrottle::Max)
    );
    assert_eq!(b.io().reads(), 0);
    // MBA 2.0 (15 classes): IA32_MBA_CFG bit 0 of the domain's lowest CPU
    let mut io = FakeMsrs::new();
    io.set(cpu(4), regs::IA32_MBA_CFG, regs::MBA_CFG_MIN_DELAY);
    let mut b = backend_with(io, with_mba(15, false));
    assert_eq!(
        b.mba_thread_throttle(dom(0)).unwrap(),
        Some(ThreadThrottle::Max)
    );
    assert_eq!(
        b.mba_thread_throttle(dom(1)).unwrap(),
        Some(ThreadThrottle::Min)
    );
    // MBA 3.0: per thread
    let mut b = backend_with(FakeMsrs::new(), with_mba(15, true));
    assert_eq!(
        b.mba_thread_throttle(dom(0)).unwrap(),
        Some(ThreadThrottle::PerThread)
    );
}

#[test]
fn with_snc_a_group_sums_the_counters_of_each_node_and_rmids_are_divided() {
    // arrange: one L3 of 8 CPUs in two SNC nodes (0-3, 4-7), 12 RMIDs: 6 per node, RMID r
    // counting on node 1 as r + 6 (the kernel's RMID sharing mode)
    let mut caps = caps();
    if let Feature::Supported(m) = &mut caps.monitoring {
        m.num_rmids = 12;
        m.max_rmid = 11;
    }
    let topo = Topology::from_placements(
        (0..8)
            .map(|c| rdt_core::CpuPlacement {
                cpu: cpu(c),
                package: 0,
                core: Some(c),
                l2: dom(c),
                l3: Some(dom(0)),
                node: c / 4,
            })
            .collect(),
    );
    let mut b = MsrBackend::new(FakeMsrs::new(), caps, topo, rdt_core::NoPmu).unwrap();
    let g = b
        .start_monitoring(&cpus("2,6"), MonEvents::MBM_TOTAL)
        .unwrap();
    assert_eq!(b.rmid_of(cpu(6)).unwrap(), Some(Rmid::new(1)));
    for (rmid, v) in [(1, 100), (7, 1_000)] {
        ctr(&mut b, 2, rmid, EVT_MBM_TOTAL, v);
    }
    b.poll().unwrap();
    for (rmid, v) in [(1, 100 + 5), (7, 1_000 + 7)] {
        ctr(&mut b, 2, rmid, EVT_MBM_TOTAL, v);
    }
    // act
    b.poll().unwrap();
    // assert: both nodes' traffic
    assert_eq!(b.values(g).unwrap().mbm_total_delta_bytes, Some(12 * SCALE));
    // RMIDs 2..=5 are left (6 per node, RMID 0 everyone's), not 2..=11
    for c in [0, 1, 3, 4] {
        b.start_monitoring(&cpus(&c.to_string()), MonEvents::MBM_TOTAL)
            .unwrap();
    }
    let e = b
        .start_monitoring(&cpus("5"), MonEvents::MBM_TOTAL)
        .unwrap_err();
    assert!(
        matches!(e, MsrError::Request(RequestError::OutOfRmids { .. })),
        "{e}"
    );
}

#[test]
fn a_named_class_is_recorded_when_claimed_read_by_the_next_backend_and_dropped_when_released() {
    // arrange
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut b = backend(FakeMsrs::new()).with_run_dir(&run);
    b.reset_allocation(&AllocReset::default()).unwrap(); // registers at their defaults
    // act: a name bound while planning is this process's only
    let db = b.class_named("db").unwrap();
    assert_eq!(db, ClassId::new(1));
    assert!(b.own_class_names().is_empty());
    assert!(
        !run.join("msr-classes").exists(),
        "planning records nothing"
    );
    b.claim_class(db, "db", false).unwrap();
    // assert: recorded, and known to the next process
    assert_eq!(b.own_class_names(), [(db, "db".to_owned())]);
    let next = backend(FakeMsrs::new()).with_run_dir(&run);
    assert_eq!(next.own_class_names(), [(db, "db".to_owned())]);
    assert_eq!(next.class_names(), [(db, "db".to_owned())]);
    b.release_class(db, "db").unwrap();
    assert!(b.own_class_names().is_empty() && b.class_names().is_empty());
    assert!(
        !run.join("msr-classes").exists(),
        "the last name takes the record"
    );
    let after = backend(FakeMsrs::new()).with_run_dir(&run);
    assert!(after.class_names().is_empty());
}

#[test]
fn a_damaged_record_of_names_is_taken_as_empty_or_for_what_parses() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    // classes beyond the 16 of L3 CAT, a second name for a class, lines that do not parse
    std::fs::write(
        run.join("msr-classes"),
        "3 db\n99 big\n3 other\nnonsense\n\u{1} x\n4 web\n",
    )
    .unwrap();
    let b = backend(FakeMsrs::new()).with_run_dir(run);
    assert_eq!(
        b.own_class_names(),
        [
            (ClassId::new(3), "db".to_owned()),
            (ClassId::new(4), "web".to_owned())
        ]
    );
    // not text at all, or a symlink: nothing is taken, nothing panics
    std::fs::write(run.join("msr-classes"), [0xff_u8, 0, 0xfe]).unwrap();
    let mut b = backend(FakeMsrs::new()).with_run_dir(run);
    assert!(b.own_class_names().is_empty());
    // a claim replaces the damaged record
    b.claim_class(ClassId::new(2), "db", false).unwrap();
    assert_eq!(
        std::fs::read_to_string(run.join("msr-classes"))
            .unwrap()
            .lines()
            .last(),
        Some("2 db")
    );
    std::fs::remove_file(run.join("msr-classes")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", run.join("msr-classes")).unwrap();
    let b = backend(FakeMsrs::new()).with_run_dir(run);
    assert!(b.own_class_names().is_empty());
}

#[test]
fn a_held_writers_lock_is_waited_for_once_in_all_and_the_error_names_that_timeout() {
    // arrange: another holder of msr.lock (another open file description)
    let dir = tempfile::tempdir().unwrap();
    let mut b = fresh().with_run_dir(dir.path());
    b.set_lock_timeout(std::time::Duration::from_millis(200));
    let other = std::fs::File::create(dir.path().join("msr.lock")).unwrap();
    other.lock().unwrap();
    // act: the holds of opening (reclaims) and of the command, one after another
    let errors: Vec<String> = (0..3)
        .map(|_| b.hold_writers().unwrap_err().to_string())
        .collect();
    // assert: each names the one timeout; the first used it all, the others wait no more
    for e in &errors {
        assert!(
            e.ends_with("msr.lock for the whole lock timeout of 0.2 s"),
            "{e}"
        );
    }
    assert_eq!(b.lock_waited, b.lock_timeout, "the wait is spent");
    // once the holder is gone the lock is taken, and a new wait starts
    other.unlock().unwrap();
    b.hold_writers().unwrap();
    assert_eq!(b.lock_waited, std::time::Duration::ZERO);
    b.release_writers();
}
