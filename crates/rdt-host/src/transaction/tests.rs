//! Tests of the transaction: fault injection at every write, validation, idempotence.

use super::*;
use rdt_core::fake::{FakeBackend, FakeError};
use rdt_core::transaction::*;
use rdt_core::{
    AllocReset, Backend, CacheBitmask, CacheDomain, CatClass, CatResource, ClassId, LogicalCpu,
    MbaClass, MbaLimit, MbaResource, RequestError, TaskId,
};
use rdt_core::{CatMask, FeatureSetting, Reclaimed};

fn cat(domain: u32, class: u32, bits: u64) -> Change {
    Change::Cat {
        resource: CatResource::L3,
        domain: CacheDomain::new(domain),
        class: ClassId::new(class),
        scope: MaskScope::Both,
        mask: CacheBitmask::new(bits).unwrap(),
    }
}

fn mba(domain: u32, class: u32, percent: u8) -> Change {
    Change::mba(
        CacheDomain::new(domain),
        ClassId::new(class),
        MbaLimit::Percent(percent),
    )
}

fn cpu(n: u32, class: u32) -> Change {
    Change::Cpu {
        cpu: LogicalCpu::new(n),
        class: ClassId::new(class),
    }
}

/// Classes of every table and every CPU, to compare before and after.
fn snapshot(b: &mut FakeBackend) -> (Vec<CatClass>, Vec<MbaClass>, Vec<u32>) {
    let cat = b.cat_classes(CatResource::L3, CacheDomain::new(0)).unwrap();
    let mba = b.mba_classes(CacheDomain::new(0)).unwrap();
    let cpus = (0..8).map(|c| b.class_of_cpu(c)).collect();
    (cat, mba, cpus)
}

fn changes() -> Vec<Change> {
    vec![
        cat(0, 1, 0xf),
        cat(0, 2, 0xf0),
        mba(0, 1, 50),
        mba(0, 2, 20),
        cpu(1, 1),
        cpu(2, 2),
    ]
}

#[test]
fn a_failure_at_every_write_position_leaves_the_platform_as_before() {
    let n = changes().len();
    for position in 1..=n {
        // arrange
        let mut b = FakeBackend::intel_1s();
        b.associate(LogicalCpu::new(2), ClassId::new(3)).unwrap();
        let before = snapshot(&mut b);
        b.fail_nth_write(position);
        // act
        let plan = Plan::new(&mut b, &changes()).unwrap();
        let outcome = plan.apply(&mut b);
        // assert
        match outcome {
            Outcome::RolledBack { done, failed } => {
                assert_eq!(done.len(), position - 1);
                assert_eq!(failed.change, position - 1);
                assert!(matches!(failed.error, FakeError::Injected(_)));
            }
            other => panic!("position {position}: {other:?}"),
        }
        assert_eq!(snapshot(&mut b), before, "position {position}");
    }
}

#[test]
fn an_undo_that_fails_is_reported_exactly() {
    // arrange: the 2nd write fails, and so does every write after it (the undo)
    let mut b = FakeBackend::intel_1s();
    let plan = Plan::new(&mut b, &changes()).unwrap();
    b.fail_writes_from(2);
    // act
    let outcome = plan.apply(&mut b);
    // assert
    match outcome {
        Outcome::PartlyChanged {
            done,
            failed,
            not_undone,
        } => {
            assert_eq!(done.len(), 1);
            assert_eq!(failed.change, 1);
            // the failed write itself (it may have half-happened), then the one before it
            assert_eq!(not_undone.len(), 2);
            assert_eq!(not_undone[0].0, failed.step);
            assert_eq!(not_undone[1].0, done[0].step);
            let e = Outcome::PartlyChanged {
                done,
                failed,
                not_undone,
            }
            .into_result()
            .unwrap_err();
            assert!(e.to_string().contains("partly changed"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_invalid_change_is_refused_by_index_before_any_write() {
    let mut b = FakeBackend::broadwell_2s();
    let mut list = vec![cat(0, 1, 0xf), cat(0, 1, 0x1_fffff), cpu(99, 1)];
    let e = Plan::new(&mut b, &list).unwrap_err();
    assert_eq!(e.index(), 1, "{e}");
    list.remove(1);
    let e = Plan::new(&mut b, &list).unwrap_err();
    assert!(
        matches!(
            e,
            PlanError::Invalid {
                index: 1,
                error: RequestError::NoSuchCpu(_)
            }
        ),
        "{e}"
    );
    let e = Plan::new(&mut b, &[mba(0, 1, 50)]).unwrap_err();
    assert!(
        matches!(e, PlanError::Invalid { index: 0, .. }),
        "no MBA: {e}"
    );
    let e = Plan::new(&mut b, &[cat(7, 1, 0xf)]).unwrap_err();
    assert!(e.to_string().contains("L3 domain 7 does not exist"), "{e}");
    let task = Change::Task {
        task: TaskId::new(1),
        class: ClassId::new(1),
    };
    let e = Plan::new(&mut b, &[task]).unwrap_err();
    assert!(matches!(
        e,
        PlanError::Invalid {
            error: RequestError::NeedsOsInterface { .. },
            ..
        }
    ));
    assert!(b.writes.is_empty());
}

#[test]
fn changes_to_one_class_build_on_each_other_and_unchanged_steps_can_be_dropped() {
    let mut b = FakeBackend::broadwell_2s();
    b.enable_l3_cdp();
    let scoped = |scope, bits| Change::Cat {
        resource: CatResource::L3,
        domain: CacheDomain::new(0),
        class: ClassId::new(1),
        scope,
        mask: CacheBitmask::new(bits).unwrap(),
    };
    let (data, code) = (scoped(MaskScope::Data, 0xf), scoped(MaskScope::Code, 0xf0));
    let plan = Plan::new(&mut b, &[data.clone(), code.clone()]).unwrap();
    let Step::Cat { after, .. } = &plan.steps()[1].1 else {
        panic!()
    };
    assert_eq!(
        after.mask,
        CatMask::Cdp {
            data: CacheBitmask::new(0xf).unwrap(),
            code: CacheBitmask::new(0xf0).unwrap()
        }
    );
    let Outcome::Applied(done) = plan.apply(&mut b) else {
        panic!()
    };
    assert_eq!(done.len(), 2);
    let again = Plan::new(&mut b, &[data, code])
        .unwrap()
        .without_unchanged();
    assert!(again.is_empty(), "applied already: {:?}", again.steps());
    let writes = b.writes.len();
    let same = Plan::new(&mut b, &[cat(0, 2, 0xfffff)])
        .unwrap()
        .without_unchanged();
    assert!(same.is_empty());
    assert!(matches!(same.apply(&mut b), Outcome::Applied(d) if d.is_empty()));
    assert_eq!(b.writes.len(), writes, "nothing written");
}

#[test]
fn a_mask_over_shareable_ways_is_a_warning() {
    let mut b = FakeBackend::intel_1s(); // shareable 0x600
    let plan = Plan::new(&mut b, &[cat(0, 1, 0x700)]).unwrap();
    assert_eq!(
        plan.warnings(),
        [PlanWarning::Shareable {
            index: 0,
            resource: CatResource::L3,
            shared: 0x600
        }]
    );
}

#[test]
fn mba_records_the_applied_rounding() {
    let mut b = FakeBackend::intel_1s();
    let plan = Plan::new(&mut b, &[mba(0, 1, 15)]).unwrap();
    let Outcome::Applied(done) = plan.apply(&mut b) else {
        panic!()
    };
    assert_eq!(done[0].applied, Some(MbaLimit::Percent(20)));
}

/// A platform whose transactions journal to a temporary run directory, with CPU 2 in COS 3
/// and process 40 (threads 40, 41) in COS 2 (the OS interface).
fn journaled() -> (FakeBackend, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut b = FakeBackend::intel_1s().with_run_dir(dir.path().join("run"));
    b.os_interface = true;
    b.add_process(40, &[40, 41]);
    b.associate(LogicalCpu::new(2), ClassId::new(3)).unwrap();
    b.associate_task(TaskId::new(40), ClassId::new(2)).unwrap();
    (b, dir)
}

/// [`recover`] until it finds a journal (at most 1 s): a child another test forks holds
/// the journal's lock, copied with its descriptors, until it execs.
fn recover_soon(b: &mut FakeBackend) -> Vec<Reclaimed> {
    for _ in 0..100 {
        let r = recover(b).unwrap();
        if !r.is_empty() {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Vec::new()
}

fn journals(dir: &tempfile::TempDir) -> Vec<String> {
    std::fs::read_dir(dir.path().join("run"))
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn with_tasks(mut list: Vec<Change>) -> Vec<Change> {
    list.push(Change::Task {
        task: TaskId::new(40),
        class: ClassId::new(1),
    });
    list
}

#[test]
fn a_process_killed_at_any_write_is_rolled_back_by_the_next_open() {
    let plans: [(&str, Vec<Change>); 3] = [
        ("classes, CPUs and a task", with_tasks(changes())),
        ("runs of CPUs (one write each)", runs()),
        (
            "a reset turning CDP on",
            vec![Change::Reset(AllocReset {
                l3_cdp: FeatureSetting::On,
                ..AllocReset::default()
            })],
        ),
    ];
    let mut tried = 0;
    for (what, list) in plans {
        let writes = {
            let (mut b, _dir) = journaled();
            let n = b.writes.len();
            let plan = Plan::new(&mut b, &list).unwrap();
            assert!(matches!(plan.apply(&mut b), Outcome::Applied(_)));
            b.writes.len() - n
        };
        for position in 1..=writes {
            // arrange
            let (mut b, dir) = journaled();
            let before = AllocState::read(&mut b).unwrap();
            let plan = Plan::new(&mut b, &list).unwrap();
            b.panic_at_nth_write(position);
            // act: the process "dies" at the write; the next open recovers
            let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = plan.apply(&mut b);
            }));
            assert!(died.is_err(), "{what}, write {position}");
            assert_eq!(
                journals(&dir).len(),
                1,
                "{what}, write {position}: journal kept"
            );
            let recovered = recover_soon(&mut b);
            // assert
            assert!(
                matches!(&recovered[..], [Reclaimed::Transaction { failed, .. }] if failed.is_empty()),
                "{what}, write {position}: {recovered:?}"
            );
            assert_eq!(
                AllocState::read(&mut b).unwrap(),
                before,
                "{what}, write {position}"
            );
            assert!(
                journals(&dir).is_empty(),
                "{what}, write {position}: journal removed"
            );
            assert_eq!(recover(&mut b).unwrap(), [], "nothing twice");
            tried += 1;
        }
    }
    assert_eq!(
        tried, 12,
        "8 writes of the first plan (a write per thread), 3 of the runs, 1 of the reset"
    );
}

/// A mask, then two CPUs into COS 1 and three into COS 2: two runs.
fn runs() -> Vec<Change> {
    vec![
        cat(0, 1, 0xf),
        cpu(1, 1),
        cpu(2, 1),
        cpu(3, 2),
        cpu(4, 2),
        cpu(5, 2),
    ]
}

fn assoc_writes(b: &FakeBackend) -> Vec<&str> {
    b.writes
        .iter()
        .filter(|w| w.starts_with("assoc"))
        .map(String::as_str)
        .collect()
}

#[test]
fn a_run_of_cpus_into_one_class_is_one_write_with_a_step_per_cpu() {
    let mut b = FakeBackend::intel_1s();
    let done = run(&mut b, &runs()).unwrap().into_result().unwrap();
    assert_eq!(
        done.iter().map(|d| d.change).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5]
    );
    assert_eq!(assoc_writes(&b), ["assoc 1-2 COS1", "assoc 3-5 COS2"]);
    let classes: Vec<u32> = (0..7).map(|c| b.class_of_cpu(c)).collect();
    assert_eq!(classes, [0, 1, 1, 2, 2, 2, 0]);
}

#[test]
fn a_run_whose_write_fails_is_undone_whole_and_named_by_its_cpus() {
    for (position, failed_change, cpus) in [(2, 1, "1-2"), (3, 3, "3-5")] {
        let mut b = FakeBackend::intel_1s();
        let before = snapshot(&mut b);
        let plan = Plan::new(&mut b, &runs()).unwrap();
        b.fail_nth_write(position);
        match plan.apply(&mut b) {
            Outcome::RolledBack { failed, .. } => {
                assert_eq!(failed.change, failed_change, "position {position}");
                assert_eq!(failed.cpus, Some(cpus.parse().unwrap()));
                let e = Outcome::<FakeError>::RolledBack {
                    done: Vec::new(),
                    failed,
                }
                .into_result()
                .unwrap_err();
                assert!(
                    e.to_string().starts_with(&format!("CPUs {cpus} into COS")),
                    "{e}"
                );
            }
            other => panic!("position {position}: {other:?}"),
        }
        assert_eq!(snapshot(&mut b), before, "position {position}");
    }
}

#[test]
fn a_run_that_cannot_be_written_nor_undone_is_reported_step_by_step() {
    let mut b = FakeBackend::intel_1s();
    let plan = Plan::new(&mut b, &runs()).unwrap();
    b.fail_writes_from(2); // the first run, and every undo after it
    match plan.apply(&mut b) {
        Outcome::PartlyChanged {
            done,
            failed,
            not_undone,
        } => {
            assert_eq!(done.len(), 1, "the mask");
            assert_eq!(failed.change, 1);
            let cpus: Vec<Option<LogicalCpu>> =
                not_undone.iter().map(|(s, _)| s.moved_cpu()).collect();
            assert_eq!(
                cpus,
                [Some(LogicalCpu::new(2)), Some(LogicalCpu::new(1)), None],
                "the run newest first, then the mask"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_journal_lives_exactly_as_long_as_the_transaction() {
    let (mut b, dir) = journaled();
    let plan = Plan::new(&mut b, &changes()).unwrap();
    assert!(matches!(plan.apply(&mut b), Outcome::Applied(_)));
    assert!(journals(&dir).is_empty(), "applied: no journal");
    assert_eq!(b.writers_held(), 0, "lock released");
    b.fail_nth_write(3);
    let plan = Plan::new(&mut b, &[cat(0, 1, 0x3), cat(0, 2, 0xc), cpu(3, 1)]).unwrap();
    assert!(matches!(plan.apply(&mut b), Outcome::RolledBack { .. }));
    assert!(journals(&dir).is_empty(), "rolled back: no journal");
    // an undo that fails leaves the journal for the next open
    let plan = Plan::new(&mut b, &[cat(0, 1, 0x30), cat(0, 2, 0xc0)]).unwrap();
    b.fail_writes_from(2);
    assert!(matches!(plan.apply(&mut b), Outcome::PartlyChanged { .. }));
    assert_eq!(journals(&dir).len(), 1);
    b.fail_writes(false);
    b.fail_writes_from(0);
    let r = recover_soon(&mut b);
    assert_eq!(r.len(), 1);
    assert_eq!(
        b.l3_mask(0, 1),
        CatMask::Unified(CacheBitmask::new(0xf).unwrap())
    );
    // an empty plan takes no lock and writes nothing
    let writes = b.writes.len();
    let plan = Plan::new(&mut b, &[cat(0, 1, 0xf)])
        .unwrap()
        .without_unchanged();
    assert!(matches!(plan.apply(&mut b), Outcome::Applied(d) if d.is_empty()));
    assert_eq!(b.writes.len(), writes);
}

#[test]
fn a_reset_is_undone_whole_and_validated_first() {
    // arrange: CDP off, classes, CPUs and a task placed
    let (mut b, _dir) = journaled();
    let plan = Plan::new(&mut b, &with_tasks(changes())).unwrap();
    assert!(matches!(plan.apply(&mut b), Outcome::Applied(_)));
    let before = AllocState::read(&mut b).unwrap();
    let on = AllocReset {
        l3_cdp: FeatureSetting::On,
        ..AllocReset::default()
    };
    // act: the reset is written, then undone whole
    let plan = Plan::new(&mut b, &[Change::Reset(on)]).unwrap();
    let Step::Reset { before: read, .. } = &plan.steps()[0].1 else {
        panic!("{:?}", plan.steps())
    };
    assert_eq!(**read, before);
    assert!(matches!(plan.apply(&mut b), Outcome::Applied(_)));
    assert!(b.capabilities().l3_cat.get().unwrap().cdp_enabled);
    let restored = before.restore(&mut b).unwrap();
    // assert
    assert!(
        restored.reset && restored.classes == 4 && restored.associations == 3,
        "{restored:?}"
    );
    assert_eq!(AllocState::read(&mut b).unwrap(), before);
    assert_eq!(
        before.restore(&mut b).unwrap(),
        Restored::default(),
        "twice: nothing"
    );
    // a reset is validated before anything is written, and stands alone
    let writes = b.writes.len();
    let l2 = AllocReset {
        l2_cdp: FeatureSetting::On,
        ..AllocReset::default()
    };
    let e = Plan::new(&mut b, &[Change::Reset(l2)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "change 0: L2 CDP requested but not supported by the platform"
    );
    let e = Plan::new(&mut b, &[cat(0, 1, 0xf), Change::Reset(on)]).unwrap_err();
    assert_eq!(e.index(), 1, "{e}");
    assert_eq!(b.writes.len(), writes);
}

#[test]
fn an_l3_iordt_reset_is_validated_first_and_undone_by_the_journal_state() {
    // arrange: a part without I/O RDT refuses `l3iordt-on` before any write
    let (mut b, _dir) = journaled();
    let on = AllocReset {
        l3_iordt: FeatureSetting::On,
        ..AllocReset::default()
    };
    let writes = b.writes.len();
    let e = Plan::new(&mut b, &[Change::Reset(on)]).unwrap_err();
    assert!(
        e.to_string()
            .contains("L3 I/O RDT requested but not supported"),
        "{e}"
    );
    assert_eq!(b.writes.len(), writes);
    // a part with it, off
    b.reconfigure(|c| c.l3_iordt = Some(false));
    let before = AllocState::read(&mut b).unwrap();
    assert_eq!(before.l3_iordt, Some(false));
    // act: switched on by a reset, then the recorded state written back
    let plan = Plan::new(&mut b, &[Change::Reset(on)]).unwrap();
    assert!(matches!(plan.apply(&mut b), Outcome::Applied(_)));
    assert_eq!(b.capabilities().l3_iordt, Some(true));
    let restored = before.restore(&mut b).unwrap();
    // assert: the restore's reset turned it off again
    assert!(restored.reset, "{restored:?}");
    assert_eq!(b.capabilities().l3_iordt, Some(false));
    assert_eq!(AllocState::read(&mut b).unwrap(), before);
    // a journal written before I/O RDT was planned (`None`) leaves it as it is
    let plan = Plan::new(&mut b, &[Change::Reset(on)]).unwrap();
    assert!(matches!(plan.apply(&mut b), Outcome::Applied(_)));
    let old = AllocState {
        l3_iordt: None,
        ..AllocState::read(&mut b).unwrap()
    };
    assert_eq!(old.restore(&mut b).unwrap(), Restored::default());
    assert_eq!(b.capabilities().l3_iordt, Some(true));
}

#[test]
fn the_writers_lock_is_released_on_return_and_on_a_panic() {
    let mut b = FakeBackend::intel_1s();
    let depth = with_writers(&mut b, |b| b.writers_held()).unwrap();
    assert_eq!((depth, b.writers_held()), (1, 0));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_writers(&mut b, |_| panic!("a bug in the caller"))
    }));
    assert!(panicked.is_err());
    assert_eq!(b.writers_held(), 0, "released while unwinding");
}

/// The AMD fixture with SMBA (16 classes, 11-bit field, as genoa's CPUID.(8000_0020H,2)),
/// transactions journaled to a temporary run directory.
fn amd_smba() -> (FakeBackend, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut b = FakeBackend::amd_2ccx().with_run_dir(dir.path().join("run"));
    b.reconfigure(|c| c.smba = rdt_core::Feature::Supported(rdt_core::fake::fixtures::amd_mba(16)));
    (b, dir)
}

fn smba(domain: u32, class: u32, units: u32) -> Change {
    Change::smba(
        CacheDomain::new(domain),
        ClassId::new(class),
        MbaLimit::AmdUnits(units),
    )
}

fn limits(b: &mut FakeBackend, resource: MbaResource, domain: u32) -> Vec<u32> {
    b.bandwidth_classes(resource, CacheDomain::new(domain))
        .unwrap()
        .iter()
        .map(|c| c.limit.value())
        .collect()
}

#[test]
fn smba_changes_set_smba_only_and_are_checked_against_smba() {
    // arrange
    let (mut b, _dir) = amd_smba();
    let list = [
        smba(0, 1, 256),
        smba(1, 2, 16),
        Change::mba(CacheDomain::new(0), ClassId::new(3), MbaLimit::AmdUnits(64)),
    ];
    // act
    let plan = Plan::new(&mut b, &list).unwrap();
    let done = plan.apply(&mut b).into_result().unwrap();
    // assert
    assert_eq!(done[0].step.to_string(), "SMBA COS1 of domain 0");
    assert_eq!(done[0].applied, Some(MbaLimit::AmdUnits(256)));
    assert_eq!(
        limits(&mut b, MbaResource::Smba, 0)[..4],
        [2048, 256, 2048, 2048]
    );
    assert_eq!(
        limits(&mut b, MbaResource::Smba, 1)[..4],
        [2048, 2048, 16, 2048]
    );
    assert_eq!(
        limits(&mut b, MbaResource::Mba, 0)[..4],
        [2048, 2048, 2048, 64]
    );
    assert_eq!(limits(&mut b, MbaResource::Mba, 1)[..4], [2048; 4]);
    // SMBA's own range and unit; and no SMBA at all is refused by name
    let e = Plan::new(&mut b, &[smba(0, 1, 2049)]).unwrap_err();
    assert!(
        e.to_string().contains("out of range (from 1 to 2048)"),
        "{e}"
    );
    let pct = Change::smba(CacheDomain::new(0), ClassId::new(1), MbaLimit::Percent(50));
    assert!(Plan::new(&mut b, &[pct]).is_err());
    b.reconfigure(|c| c.smba = rdt_core::Feature::Unsupported);
    let e = Plan::new(&mut b, &[smba(0, 1, 8)]).unwrap_err();
    assert!(e.to_string().contains("SMBA is not supported"), "{e}");
}

#[test]
fn a_reset_restores_smba_and_its_undo_brings_smba_back() {
    // arrange: SMBA COS1 limited in domain 1
    let (mut b, _dir) = amd_smba();
    Plan::new(&mut b, &[smba(1, 1, 8)])
        .unwrap()
        .apply(&mut b)
        .into_result()
        .unwrap();
    let before = AllocState::read(&mut b).unwrap();
    assert_eq!(before.smba[1].1[1].limit, MbaLimit::AmdUnits(8));
    // act: a reset sets it back to 2^width; the state read before writes it back
    let reset = [Change::Reset(AllocReset::default())];
    Plan::new(&mut b, &reset)
        .unwrap()
        .apply(&mut b)
        .into_result()
        .unwrap();
    assert_eq!(limits(&mut b, MbaResource::Smba, 1)[1], 2048);
    before.restore(&mut b).unwrap();
    // assert
    assert_eq!(limits(&mut b, MbaResource::Smba, 1)[1], 8);
    assert_eq!(AllocState::read(&mut b).unwrap(), before);
}

#[test]
fn a_process_killed_during_an_smba_change_is_rolled_back_by_the_next_open() {
    let list = [smba(0, 1, 256), smba(1, 1, 256), cpu(5, 1)];
    for position in 1..=list.len() {
        // arrange
        let (mut b, dir) = amd_smba();
        let before = AllocState::read(&mut b).unwrap();
        let plan = Plan::new(&mut b, &list).unwrap();
        b.panic_at_nth_write(position);
        // act: the process "dies" at the write; the next open recovers
        let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = plan.apply(&mut b);
        }));
        assert!(died.is_err(), "write {position}");
        let recovered = recover_soon(&mut b);
        // assert
        let [Reclaimed::Transaction { undone, failed, .. }] = &recovered[..] else {
            panic!("write {position}: {recovered:?}");
        };
        assert!(failed.is_empty(), "write {position}: {failed:?}");
        assert!(
            undone
                .iter()
                .any(|u| u == "SMBA COS1 of domain 0 back to 2048"),
            "{undone:?}"
        );
        assert_eq!(
            AllocState::read(&mut b).unwrap(),
            before,
            "write {position}"
        );
        assert!(
            journals(&dir).is_empty(),
            "write {position}: journal removed"
        );
    }
}

#[test]
fn journals_written_before_smba_read_as_mba() {
    // A step and a state as version 1 journals recorded them, without `resource`/`smba`.
    let step: Step = serde_json::from_str(
        r#"{"Mba":{"domain":0,"before":{"class":1,"limit":{"Percent":100}},
            "after":{"class":1,"limit":{"Percent":50}}}}"#,
    )
    .unwrap();
    assert!(
        matches!(
            step,
            Step::Mba {
                resource: MbaResource::Mba,
                ..
            }
        ),
        "{step:?}"
    );
    let state: AllocState = serde_json::from_str(
        r#"{"l3_cdp":null,"l2_cdp":null,"mba_ctrl":null,"cat":[],"mba":[],"cpus":[],"tasks":[]}"#,
    )
    .unwrap();
    assert!(state.smba.is_empty());
}

/// `intel_1s`'s capabilities with CPUs n and n + 4 threads of core n (SMT), as the MSR
/// interface's x2APIC topology gives them.
fn smt_1s(per_thread: bool) -> FakeBackend {
    let (mut caps, _) = rdt_core::fake::fixtures::intel_1s();
    if let Some(rdt_core::MbaCaps {
        kind: rdt_core::MbaKind::IntelDelay { per_thread: p, .. },
        ..
    }) = caps.mba.get_mut()
    {
        *p = per_thread;
    }
    let topo = rdt_core::Topology::from_placements(
        (0..8)
            .map(|c| rdt_core::CpuPlacement {
                cpu: LogicalCpu::new(c),
                package: 0,
                core: Some(c % 4),
                l2: CacheDomain::new(c % 4),
                l3: Some(CacheDomain::new(0)),
                node: 0,
            })
            .collect(),
    );
    FakeBackend::new(caps, topo)
}

#[test]
fn threads_of_one_core_in_classes_with_different_mba_limits_are_a_warning() {
    let mut b = smt_1s(false);
    let plan = Plan::new(&mut b, &[mba(0, 1, 50), cpu(1, 1)]).unwrap();
    // CPU 1 in COS1 (50%), its sibling CPU 5 in COS0 (100%): the core runs at 50%
    assert_eq!(
        plan.warnings(),
        [PlanWarning::MbaSharedCore {
            index: 1,
            cpus: "1,5".parse().unwrap(),
            limits: vec![
                (ClassId::new(0), MbaLimit::Percent(100)),
                (ClassId::new(1), MbaLimit::Percent(50)),
            ],
            throttle: rdt_core::ThreadThrottle::Max,
            applied: MbaLimit::Percent(50),
        }]
    );
    assert_eq!(
        plan.warnings()[0].to_string(),
        "CPUs 1,5 are threads of cores that MBA throttles as one (max delay): COS0 100% and \
         COS1 50% on one core give 50% to each of its threads"
    );
    // several cores with the same limits: one warning naming them all
    let plan = Plan::new(&mut b, &[mba(0, 1, 50), cpu(1, 1), cpu(2, 1), cpu(3, 1)]).unwrap();
    assert!(
        matches!(plan.warnings(), [PlanWarning::MbaSharedCore { index: 1, cpus, .. }] if cpus.to_string() == "1-3,5-7"),
        "{:?}",
        plan.warnings()
    );
    // both threads in COS1: nothing to say; an MBA change alone is checked too
    let plan = Plan::new(&mut b, &[mba(0, 1, 50), cpu(1, 1), cpu(5, 1)]).unwrap();
    assert_eq!(plan.warnings(), []);
    b.associate(LogicalCpu::new(2), ClassId::new(2)).unwrap();
    let plan = Plan::new(&mut b, &[mba(0, 2, 30)]).unwrap();
    assert!(
        matches!(
            plan.warnings(),
            [PlanWarning::MbaSharedCore {
                index: 0,
                applied: MbaLimit::Percent(30),
                ..
            }]
        ),
        "{:?}",
        plan.warnings()
    );
    // MBA 3.0 throttles each thread by its own class
    let mut b = smt_1s(true);
    let plan = Plan::new(&mut b, &[mba(0, 1, 50), cpu(1, 1)]).unwrap();
    assert_eq!(plan.warnings(), []);
}

/// I/O RDT channel `c` of the fake's link into `class`.
fn channel(c: u8, class: u32) -> Change {
    Change::Channel {
        channel: rdt_core::ChannelId::new(0, 1, c),
        class: ClassId::new(class),
    }
}

/// Channel associations (issue 34) are steps like CPU associations: a failure at any write
/// rolls the channels back with the rest, a process killed at any write is rolled back by
/// the next open from its journal, and a reset that put the channels back to no class is
/// undone to their classes.
#[test]
fn channel_changes_roll_back_and_recover_at_every_write() {
    let list = vec![cat(0, 1, 0xf), channel(0, 1), cpu(1, 1), channel(1, 2)];
    let fresh = || {
        let dir = tempfile::tempdir().unwrap();
        let b = FakeBackend::intel_1s()
            .with_run_dir(dir.path().join("run"))
            .with_io_rdt(2);
        (b, dir)
    };
    let writes = {
        let (mut b, _dir) = fresh();
        let plan = Plan::new(&mut b, &list).unwrap();
        assert!(matches!(plan.apply(&mut b), Outcome::Applied(_)));
        let io = b.io_rdt().unwrap();
        assert_eq!(
            io.channel_class(rdt_core::ChannelId::new(0, 1, 1)).unwrap(),
            Some(ClassId::new(2))
        );
        assert!(b.writes.iter().any(|w| w == "channel 0x10100 COS1"));
        b.writes.len()
    };
    assert_eq!(writes, 4);
    for position in 1..=writes {
        // a failed write
        let (mut b, _dir) = fresh();
        let before = AllocState::read(&mut b).unwrap();
        assert_eq!(before.channels.len(), 2);
        let plan = Plan::new(&mut b, &list).unwrap();
        b.fail_nth_write(position);
        assert!(
            matches!(plan.apply(&mut b), Outcome::RolledBack { .. }),
            "write {position}"
        );
        assert_eq!(
            AllocState::read(&mut b).unwrap(),
            before,
            "write {position}"
        );
        // a killed process
        let (mut b, dir) = fresh();
        let plan = Plan::new(&mut b, &list).unwrap();
        b.panic_at_nth_write(position);
        let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = plan.apply(&mut b);
        }));
        assert!(died.is_err(), "write {position}");
        let recovered = recover_soon(&mut b);
        assert!(
            matches!(&recovered[..], [Reclaimed::Transaction { failed, .. }] if failed.is_empty()),
            "write {position}: {recovered:?}"
        );
        assert_eq!(
            AllocState::read(&mut b).unwrap(),
            before,
            "write {position}"
        );
        assert!(journals(&dir).is_empty(), "write {position}");
    }
    // a reset clears the channels' classes; undoing it gives them back
    let (mut b, _dir) = fresh();
    Plan::new(&mut b, &list)
        .unwrap()
        .apply(&mut b)
        .into_result()
        .unwrap();
    let before = AllocState::read(&mut b).unwrap();
    let done = Plan::new(&mut b, &[Change::Reset(AllocReset::default())])
        .unwrap()
        .apply(&mut b)
        .into_result()
        .unwrap();
    let ch = rdt_core::ChannelId::new(0, 1, 0);
    assert_eq!(b.io_rdt().unwrap().channel_class(ch).unwrap(), None);
    Plan::undoing(&mut b, &done)
        .apply(&mut b)
        .into_result()
        .unwrap();
    assert_eq!(AllocState::read(&mut b).unwrap(), before);
    // refused: a channel the platform lacks, a class beyond the platform's, no I/O RDT
    for (bad, what) in [
        (channel(5, 1), "not in the ACPI IRDT"),
        (channel(0, 99), "COS99"),
    ] {
        let e = Plan::new(&mut b, &[bad]).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
    }
    let mut plain = FakeBackend::intel_1s();
    let e = Plan::new(&mut plain, &[channel(0, 1)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs I/O RDT"), "{e}");
}
