//! Register-level tests of named classes and their record `msr-classes`
//! ([`super::super::test_support`]).

use rdt_core::{AllocReset, BackendExt, ClassId};

use crate::FakeMsrs;
use crate::backend::test_support::backend;

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
