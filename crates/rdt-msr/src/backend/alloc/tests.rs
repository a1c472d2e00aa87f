//! Register-level tests of allocation: CAT masks, CDP, MBA and SMBA limits, the allocation
//! reset ([`super::super::test_support`]).

use rdt_core::fake::fixtures;
use rdt_core::{
    AllocReset, Backend, BackendExt, Capabilities, CatClass, CatMask, CatResource, ClassId,
    Feature, FeatureSetting, LimitError, MbaClass, MbaLimit, MbaResource, MbaUnitMismatch,
    RequestError, Vendor,
};

use crate::MsrBackend;
use crate::backend::test_support::{
    PQR, Refused, Untouched, assert_refused, backend_with, caps, cpu, dom, fresh, l3, mask,
    with_cdp_on,
};
use crate::regs;
use crate::{FakeMsrs, MsrAddr, MsrError};

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

/// Sets the masks `(class, mask)` in L3 domain 0.
fn set_l3(b: &mut MsrBackend<FakeMsrs>, classes: &[(u32, CatMask)]) -> Result<(), MsrError> {
    let classes: Vec<CatClass> = classes
        .iter()
        .map(|&(class, mask)| CatClass {
            class: ClassId::new(class),
            mask,
        })
        .collect();
    b.set_cat_classes(CatResource::L3, dom(0), &classes)
}

fn cdp(data: u64, code: u64) -> CatMask {
    CatMask::Cdp {
        data: mask(data),
        code: mask(code),
    }
}

fn unified(bits: u64) -> CatMask {
    CatMask::Unified(mask(bits))
}

/// Every class and the domain are validated before the first write; a bad register is
/// an error, not a panic.
#[test]
fn cat_refusals_write_nothing() {
    assert_refused(&[
        Refused {
            case: "a_zero_mask_register_is_reported_not_unwrapped",
            backend: fresh,
            call: |b| b.cat_classes(CatResource::L3, dom(0)).map(drop),
            error: |e| matches!(e, MsrError::BadRegister { value: 0, addr, .. } if *addr == l3(0)),
            untouched: Untouched::Unchecked,
        },
        Refused {
            case: "masks_are_validated_for_every_class_before_any_write",
            backend: fresh,
            // class 2 is not contiguous
            call: |b| set_l3(b, &[(1, unified(0xf)), (2, unified(0x505))]),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::Limit(LimitError::NonContiguous { .. }))
                )
            },
            untouched: Untouched::Writes,
        },
        Refused {
            case: "a_mask_wider_than_the_cbm_is_rejected_before_any_write",
            backend: fresh,
            call: |b| set_l3(b, &[(0, unified(0x1f_ffff))]),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::Limit(LimitError::MaskTooWide {
                        cbm_len: 20,
                        ..
                    }))
                )
            },
            untouched: Untouched::Writes,
        },
        Refused {
            case: "a_class_beyond_the_usable_count_with_cdp_on_is_rejected_before_any_write",
            backend: with_cdp_on,
            call: |b| set_l3(b, &[(0, cdp(1, 1)), (8, cdp(1, 1))]),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::Limit(LimitError::ClassOutOfRange {
                        num_classes: 8,
                        ..
                    }))
                )
            },
            untouched: Untouched::Writes,
        },
        Refused {
            case: "mask_kind_must_match_the_cdp_state: a pair with CDP off",
            backend: fresh,
            call: |b| set_l3(b, &[(1, cdp(1, 1))]),
            error: |e| matches!(e, MsrError::Request(RequestError::CdpMismatch { .. })),
            untouched: Untouched::Writes,
        },
        Refused {
            case: "mask_kind_must_match_the_cdp_state: one mask with CDP on",
            backend: with_cdp_on,
            call: |b| set_l3(b, &[(1, unified(1))]),
            error: |e| {
                e.to_string() == "L3 COS1: CDP is on, so the class needs a data and a code mask"
            },
            untouched: Untouched::Writes,
        },
        Refused {
            case: "an_unknown_domain_is_rejected_without_access",
            backend: fresh,
            call: |b| b.cat_classes(CatResource::L3, dom(2)).map(drop),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::NoSuchDomain { resource: "L3", .. })
                )
            },
            untouched: Untouched::Accesses,
        },
        Refused {
            case: "an_unsupported_resource_is_a_limit_error",
            backend: || {
                let mut c = caps();
                c.l2_cat = Feature::DetailsUnknown;
                backend_with(FakeMsrs::new(), c)
            },
            call: |b| b.set_cat_classes(CatResource::L2, dom(0), &[]),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::Limit(LimitError::Unsupported("L2 CAT")))
                )
            },
            untouched: Untouched::Unchecked,
        },
    ]);
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

/// Sets the limits `(class, limit)` in L3 domain 0.
fn set_mba_limit(
    b: &mut MsrBackend<FakeMsrs>,
    classes: &[(u32, MbaLimit)],
) -> Result<(), MsrError> {
    let classes: Vec<MbaClass> = classes
        .iter()
        .map(|&(class, limit)| MbaClass {
            class: ClassId::new(class),
            limit,
        })
        .collect();
    b.set_mba_classes(dom(0), &classes).map(drop)
}

/// Every MBA class and value is validated before the first write.
#[test]
fn mba_refusals_write_nothing() {
    assert_refused(&[
        Refused {
            case: "mba_zero_or_above_100_percent_is_rejected_before_writing: 0%",
            backend: fresh,
            call: |b| set_mba(b, 1, 0).map(drop),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::Limit(LimitError::MbaOutOfRange {
                        value: 0,
                        ..
                    }))
                )
            },
            untouched: Untouched::Writes,
        },
        Refused {
            case: "mba_zero_or_above_100_percent_is_rejected_before_writing: 101%",
            backend: fresh,
            call: |b| set_mba(b, 1, 101).map(drop),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::Limit(LimitError::MbaOutOfRange {
                        value: 101,
                        ..
                    }))
                )
            },
            untouched: Untouched::Writes,
        },
        Refused {
            case: "mba_validates_every_class_before_writing",
            backend: fresh,
            call: |b| set_mba_limit(b, &[(1, MbaLimit::Percent(50)), (8, MbaLimit::Percent(50))]),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::Limit(LimitError::ClassOutOfRange {
                        resource: "MBA",
                        ..
                    }))
                )
            },
            untouched: Untouched::Writes,
        },
        Refused {
            case: "mba_in_mbps_is_unsupported_on_the_msr_interface",
            backend: fresh,
            call: |b| set_mba_limit(b, &[(1, MbaLimit::MibPerSec(6000))]),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::MbaUnit {
                        mismatch: MbaUnitMismatch::MibPerSecOnMsr,
                        ..
                    })
                )
            },
            untouched: Untouched::Writes,
        },
        Refused {
            case: "amd_mba_refuses_percentages",
            backend: || backend_with(FakeMsrs::new(), amd_caps()),
            call: |b| set_mba(b, 1, 50).map(drop),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::MbaUnit {
                        mismatch: MbaUnitMismatch::PercentOnAmd,
                        ..
                    })
                )
            },
            untouched: Untouched::Unchecked,
        },
    ]);
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

/// The test platform with an L3 CAT that enumerates I/O RDT allocation, its
/// IA32_L3_IO_QOS_CFG as `cfg` gives per socket (CPU 0 and CPU 4).
fn with_iordt(cfg: [u64; 2]) -> MsrBackend<FakeMsrs> {
    let mut caps = caps();
    caps.l3_cat.get_mut().unwrap().io_rdt = true;
    let mut io = FakeMsrs::new();
    io.set(cpu(0), regs::IA32_L3_IO_QOS_CFG, cfg[0]);
    io.set(cpu(4), regs::IA32_L3_IO_QOS_CFG, cfg[1]);
    let mut b = backend_with(io, caps);
    b.io_mut().reset_counts();
    b
}

#[test]
fn l3_iordt_is_read_from_every_socket_and_switched_by_the_reset_keeping_the_monitoring_bit() {
    // arrange: off, on, mixed (a reset half-done) and none (no CPUID bit)
    assert_eq!(with_iordt([0, 0]).capabilities().l3_iordt, Some(false));
    assert_eq!(with_iordt([1, 1]).capabilities().l3_iordt, Some(true));
    assert_eq!(with_iordt([1, 2]).capabilities().l3_iordt, Some(false));
    assert_eq!(fresh().capabilities().l3_iordt, None);
    let mut b = with_iordt([0, regs::L3_IO_QOS_MON_EN]);
    let on = AllocReset {
        l3_iordt: FeatureSetting::On,
        ..AllocReset::default()
    };
    // act
    b.reset_allocation(&on).unwrap();
    // assert: bit 0 set on one CPU per socket, bit 1 kept
    assert_eq!(b.io().get(cpu(0), regs::IA32_L3_IO_QOS_CFG), Some(1));
    assert_eq!(b.io().get(cpu(4), regs::IA32_L3_IO_QOS_CFG), Some(3));
    assert_eq!(b.capabilities().l3_iordt, Some(true));
    let off = AllocReset {
        l3_iordt: FeatureSetting::Off,
        ..AllocReset::default()
    };
    b.reset_allocation(&off).unwrap();
    assert_eq!(b.io().get(cpu(0), regs::IA32_L3_IO_QOS_CFG), Some(0));
    assert_eq!(b.io().get(cpu(4), regs::IA32_L3_IO_QOS_CFG), Some(2));
    assert_eq!(b.capabilities().l3_iordt, Some(false));
    // `any` leaves the register alone
    b.io_mut().reset_counts();
    b.reset_allocation(&AllocReset::default()).unwrap();
    assert_eq!(b.io().get(cpu(4), regs::IA32_L3_IO_QOS_CFG), Some(2));
}

#[test]
fn l3_iordt_on_is_refused_before_any_write_where_the_l3_cat_lacks_it() {
    assert_refused(&[Refused {
        case: "l3iordt-on without CPUID.(10H,1):ECX[1]",
        backend: fresh,
        call: |b| {
            b.reset_allocation(&AllocReset {
                l3_iordt: FeatureSetting::On,
                ..AllocReset::default()
            })
        },
        error: |e| matches!(e, MsrError::Request(RequestError::Unsupported(m)) if m.contains("L3 I/O RDT requested but not supported")),
        untouched: Untouched::Accesses,
    }]);
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

/// A reset the MSR interface cannot do is refused before any register access.
#[test]
fn reset_refusals_touch_no_register() {
    assert_refused(&[
        Refused {
            case: "cdp_on_where_unsupported_fails_before_any_write",
            backend: || {
                let mut c = caps();
                c.l2_cat.get_mut().unwrap().cdp_supported = false;
                let mut b = backend_with(FakeMsrs::new(), c);
                b.io_mut().reset_counts();
                b
            },
            call: |b| {
                b.reset_allocation(&AllocReset {
                    l2_cdp: FeatureSetting::On,
                    ..AllocReset::default()
                })
            },
            error: |e| matches!(e, MsrError::Request(RequestError::Unsupported(m)) if m.contains("L2 CDP requested")),
            untouched: Untouched::Accesses,
        },
        Refused {
            case: "mba_ctrl_on_is_unsupported_on_msr",
            backend: fresh,
            call: |b| {
                b.reset_allocation(&AllocReset {
                    mba_ctrl: FeatureSetting::On,
                    ..AllocReset::default()
                })
            },
            error: |e| matches!(e, MsrError::Request(RequestError::Unsupported(_))),
            untouched: Untouched::Accesses,
        },
    ]);
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
fn amd_reset_sets_mba_and_smba_to_pqos_0x800_whatever_the_width() {
    let mut b = backend_with(FakeMsrs::new(), amd_caps());
    b.reset_allocation(&AllocReset::default()).unwrap();
    assert_eq!(b.io().get(cpu(4), MsrAddr::new(0xC000_020F)), Some(2048));
    assert_eq!(b.io().get(cpu(0), MsrAddr::new(0xC000_0280)), Some(2048));
    // a 12-bit part (Turin: 2^12 = 4096 units) is left at 0x800 too, as pqos's
    // hw_alloc_reset leaves it (PQOS_MBA_MAX_AMD), not at 2^width
    let mut caps = amd_caps();
    for f in [&mut caps.mba, &mut caps.smba] {
        if let Some(m) = f.get_mut() {
            m.kind = rdt_core::MbaKind::AmdBandwidth { width: 12 };
        }
    }
    let mut b = backend_with(FakeMsrs::new(), caps);
    b.reset_allocation(&AllocReset::default()).unwrap();
    assert_eq!(b.io().get(cpu(4), MsrAddr::new(0xC000_020F)), Some(0x800));
    assert_eq!(b.io().get(cpu(0), MsrAddr::new(0xC000_0280)), Some(0x800));
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
