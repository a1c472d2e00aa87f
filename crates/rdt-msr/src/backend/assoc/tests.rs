//! Register-level tests of association through IA32_PQR_ASSOC
//! ([`super::super::test_support`]).

use rdt_core::{BackendExt, ClassId, LimitError, RequestError, Rmid};

use crate::backend::test_support::{PQR, Refused, Untouched, assert_refused, backend, cpu, fresh};
use crate::regs;
use crate::{FakeMsrs, MsrError};

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

/// A class or CPU out of range is refused before any register access.
#[test]
fn association_refusals_touch_no_register() {
    assert_refused(&[
        Refused {
            case: "associate_rejects_a_class_beyond_the_largest_class_count_without_writing",
            backend: fresh,
            call: |b| b.associate(cpu(1), ClassId::new(16)),
            error: |e| {
                matches!(
                    e,
                    MsrError::Request(RequestError::Limit(LimitError::ClassOutOfRange {
                        num_classes: 16,
                        ..
                    }))
                )
            },
            untouched: Untouched::Accesses,
        },
        Refused {
            case: "associate_rejects_an_offline_cpu_without_writing",
            backend: fresh,
            call: |b| b.associate(cpu(8), ClassId::new(1)),
            error: |e| matches!(e, MsrError::Request(RequestError::NoSuchCpu(c)) if *c == cpu(8)),
            untouched: Untouched::Accesses,
        },
        Refused {
            case: "associate_rejects_an_offline_cpu_without_writing: class_of",
            backend: fresh,
            call: |b| b.class_of(cpu(9)).map(drop),
            error: |e| matches!(e, MsrError::Request(RequestError::NoSuchCpu(_))),
            untouched: Untouched::Accesses,
        },
    ]);
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
