//! Register-level tests of RMID picking and the SNC split of RMIDs
//! ([`super::super::test_support`]).

use rdt_core::{Backend, BackendExt, Feature, MonEvents, MonGroupId, RequestError, Rmid, Topology};

use crate::MsrBackend;
use crate::backend::test_support::{
    PQR, Refused, SCALE, Untouched, assert_refused, backend_with, caps, cpu, cpus, ctr, dom, fresh,
};
use crate::regs::{self, EVT_MBM_TOTAL};
use crate::{FakeMsrs, MsrError};

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
fn running_out_of_rmids_is_an_error_naming_the_domain() {
    assert_refused(&[Refused {
        case: "running_out_of_rmids_is_an_error_naming_the_domain",
        // 4 RMIDs; CPUs 5-7 hold 1-3
        backend: || {
            let mut c = caps();
            c.monitoring.get_mut().unwrap().num_rmids = 4;
            let mut b = backend_with(FakeMsrs::new(), c);
            for (cpu_n, rmid) in [(5, 1), (6, 2), (7, 3)] {
                b.io_mut().set(cpu(cpu_n), PQR, regs::pqr_assoc(0, rmid));
            }
            b.io_mut().reset_counts();
            b
        },
        call: |b| {
            b.start_monitoring(&cpus("4"), MonEvents::LLC_OCCUPANCY)
                .map(drop)
        },
        error: |e| matches!(e, MsrError::Request(RequestError::OutOfRmids { scope, .. }) if *scope == format!("L3 domain {}", dom(1))),
        untouched: Untouched::Writes,
    }]);
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
    // the SNC state pqos -d reports (MSR_RMID_SNC_CONFIG reads 0 here: sharing mode)
    assert_eq!(
        b.capabilities().snc,
        Some(rdt_core::SncState {
            nodes_per_l3: 2,
            mode: rdt_core::SncMode::Total
        })
    );
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
fn snc_in_legacy_mode_is_reported_local_and_rmids_are_not_divided() {
    // arrange: one L3 of 4 CPUs in two SNC nodes, MSR_RMID_SNC_CONFIG bit 0 set (the
    // power-on value, each RMID counting on its own node: pqos's "local")
    let topo = Topology::from_placements(
        (0..4)
            .map(|c| rdt_core::CpuPlacement {
                cpu: cpu(c),
                package: 0,
                core: Some(c),
                l2: dom(c),
                l3: Some(dom(0)),
                node: c / 2,
            })
            .collect(),
    );
    let mut io = FakeMsrs::new();
    io.set(cpu(0), regs::MSR_RMID_SNC_CONFIG, 1);
    // act
    let b = MsrBackend::new(io, caps(), topo, rdt_core::NoPmu).unwrap();
    // assert
    assert_eq!(
        b.capabilities().snc.map(|s| (s.nodes_per_l3, s.mode)),
        Some((2, rdt_core::SncMode::Local))
    );
    assert_eq!(b.snc_split(), (1, 0), "legacy mode: one RMID space");
}

/// Two packages of one L3 each, 4 CPUs per package in two SNC nodes.
fn two_snc_packages() -> Topology {
    Topology::from_placements(
        (0..8)
            .map(|c| rdt_core::CpuPlacement {
                cpu: cpu(c),
                package: c / 4,
                core: Some(c),
                l2: dom(c),
                l3: Some(dom(c / 4)),
                node: c / 2,
            })
            .collect(),
    )
}

#[test]
fn mon_reset_snc_local_writes_bit_0_on_one_cpu_per_package_and_undivides_rmids() {
    // arrange: sharing mode (0xCA0 reads 0), a group holding RMID 1 on CPU 5
    let mut b =
        MsrBackend::new(FakeMsrs::new(), caps(), two_snc_packages(), rdt_core::NoPmu).unwrap();
    b.start_monitoring(&cpus("5"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    let cfg = rdt_core::MonReset {
        snc: Some(rdt_core::SncMode::Local),
        ..Default::default()
    };
    // act
    b.reset_monitoring_with(&cfg).unwrap();
    // assert: the RMIDs are reset first, then the lowest CPU of each package written
    assert_eq!(b.rmid_of(cpu(5)).unwrap(), Some(Rmid::new(0)));
    assert_eq!(b.io().get(cpu(0), regs::MSR_RMID_SNC_CONFIG), Some(1));
    assert_eq!(b.io().get(cpu(4), regs::MSR_RMID_SNC_CONFIG), Some(1));
    for c in [1, 2, 3, 5, 6, 7] {
        assert_eq!(
            b.io().get(cpu(c), regs::MSR_RMID_SNC_CONFIG),
            None,
            "CPU {c}"
        );
    }
    assert_eq!(
        b.capabilities().snc.map(|s| s.mode),
        Some(rdt_core::SncMode::Local)
    );
    assert_eq!(b.snc_split(), (1, 0), "local: one RMID space");
    // and back to total: bit 0 cleared, the RMIDs divided again
    let total = rdt_core::MonReset {
        snc: Some(rdt_core::SncMode::Total),
        ..Default::default()
    };
    b.reset_monitoring_with(&total).unwrap();
    assert_eq!(b.io().get(cpu(4), regs::MSR_RMID_SNC_CONFIG), Some(0));
    assert_eq!(b.snc_split().0, 2);
}

#[test]
fn mon_reset_l3iordt_sets_bit_1_per_package_keeping_bit_0() {
    // arrange: L3 monitoring enumerates I/O RDT; allocation (bit 0) already on
    let mut caps = caps();
    if let Feature::Supported(m) = &mut caps.monitoring {
        m.io_rdt = true;
    }
    let mut io = FakeMsrs::new();
    io.set(cpu(0), regs::IA32_L3_IO_QOS_CFG, 1);
    io.set(cpu(4), regs::IA32_L3_IO_QOS_CFG, 1);
    let mut b = MsrBackend::new(io, caps, two_snc_packages(), rdt_core::NoPmu).unwrap();
    assert_eq!(b.capabilities().mon_iordt, Some(false));
    let on = rdt_core::MonReset {
        l3_iordt: rdt_core::FeatureSetting::On,
        ..Default::default()
    };
    // act
    b.reset_monitoring_with(&on).unwrap();
    // assert
    assert_eq!(b.io().get(cpu(0), regs::IA32_L3_IO_QOS_CFG), Some(0b11));
    assert_eq!(b.io().get(cpu(4), regs::IA32_L3_IO_QOS_CFG), Some(0b11));
    assert_eq!(b.io().get(cpu(1), regs::IA32_L3_IO_QOS_CFG), None);
    assert_eq!(b.capabilities().mon_iordt, Some(true));
    let off = rdt_core::MonReset {
        l3_iordt: rdt_core::FeatureSetting::Off,
        ..Default::default()
    };
    b.reset_monitoring_with(&off).unwrap();
    assert_eq!(b.io().get(cpu(4), regs::IA32_L3_IO_QOS_CFG), Some(0b01));
    assert_eq!(b.capabilities().mon_iordt, Some(false));
}

#[test]
fn mon_reset_options_the_part_lacks_are_refused_before_any_write() {
    // arrange: no SNC (one node per L3), no I/O RDT monitoring; a group holding an RMID
    let mut b = fresh();
    b.start_monitoring(&cpus("1"), MonEvents::LLC_OCCUPANCY)
        .unwrap();
    b.io_mut().reset_counts();
    for (cfg, feature) in [
        (
            rdt_core::MonReset {
                snc: Some(rdt_core::SncMode::Local),
                ..Default::default()
            },
            "SNC",
        ),
        (
            rdt_core::MonReset {
                l3_iordt: rdt_core::FeatureSetting::On,
                ..Default::default()
            },
            "I/O RDT monitoring",
        ),
    ] {
        // act
        let e = b.reset_monitoring_with(&cfg).unwrap_err();
        // assert
        assert!(
            matches!(&e, MsrError::Request(RequestError::FeatureUnsupported { feature: f, .. }) if *f == feature),
            "{e}"
        );
        assert_eq!(b.io().writes(), 0, "{feature}: written");
        assert!(
            b.rmid_of(cpu(1)).unwrap().is_some(),
            "{feature}: RMIDs kept"
        );
    }
    // off where there is nothing to turn off: the plain reset, 0xC83 never touched
    let off = rdt_core::MonReset {
        l3_iordt: rdt_core::FeatureSetting::Off,
        ..Default::default()
    };
    b.reset_monitoring_with(&off).unwrap();
    assert_eq!(b.rmid_of(cpu(1)).unwrap(), Some(Rmid::new(0)));
    assert_eq!(b.io().get(cpu(0), regs::IA32_L3_IO_QOS_CFG), None);
}
