//! Register-level tests of [`MsrBackend`]'s construction (CDP detection, implausible
//! capabilities) and its writers' lock, against [`FakeMsrs`] ([`super::test_support`]).

use rdt_core::{
    AllocReset, Backend, BackendExt, CatClass, CatMask, CatResource, ClassId, Feature,
    FeatureSetting,
};

use super::MsrBackend;
use super::test_support::{backend, backend_with, caps, cpu, dom, fresh, l3, mask, topology};
use crate::regs;
use crate::{FakeMsrs, MsrError};

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
    // one QOS_CFG read per L3 domain (2) and per L2 domain (4), and the MBA 4.0 probe:
    // IA32_CORE_CAPABILITIES of one CPU per MBA domain (2; no bit 10: nothing more)
    assert_eq!((b.io().reads(), b.io().writes()), (8, 0));
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
    // assert: no QOS_CFG read, only the MBA 4.0 probe (IA32_CORE_CAPABILITIES of one CPU
    // per MBA domain: 2)
    assert_eq!(b.io().reads(), 2);
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
