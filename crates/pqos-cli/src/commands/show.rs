//! `-s`: allocation classes per domain and the core-to-class association (pqos/alloc.c
//! `alloc_print_config`, v25.04 layout); on the OS interface also the task association
//! (`PID association information:`) and, as this tool's own additions, the resctrl groups
//! other tools made (`Other resctrl groups (not managed by pqos):`, after pqos's sections),
//! which pqos and this tool leave alone, and for a CPU in such a group a core line naming
//! the group instead of a class (`    Core 3, L2ID 3, L3ID 0 => kubepods (not managed by
//! pqos)`), where pqos has no class to print.

use std::io::Write;

use anyhow::{Result, anyhow};
use rdt_pqos::{
    Backend, BackendError, CatClass, CatMask, CatResource, GroupKind, GroupOwner, Interface,
    MbaLimit, RequestError,
};

use super::L3Domains;

fn cat_line(name: &str, c: &CatClass) -> String {
    match c.mask {
        CatMask::Unified(m) => format!("    {name} COS{} => MASK {m:#x}", c.class),
        CatMask::Cdp { data, code } => {
            format!(
                "    {name} COS{} => DATA {data:#x}, CODE {code:#x}",
                c.class
            )
        }
    }
}

fn mba_value(limit: MbaLimit) -> String {
    match limit {
        MbaLimit::Percent(p) => format!("{p}% available"),
        MbaLimit::AmdUnits(u) => format!("{u} available"),
        MbaLimit::MibPerSec(v) => format!("{v} MBps"),
    }
}

/// `Core information for socket N:` and one line per core.
fn print_core_info<B: Backend>(
    backend: &mut B,
    is_alloc: bool,
    note: &mut dyn FnMut(anyhow::Error),
    out: &mut dyn Write,
) -> Result<()> {
    let topo = backend.topology().clone();
    // The OS interface has no RMIDs to show (pqos prints `, RMID%u` on MSR/MMIO only).
    let is_mon =
        backend.capabilities().monitoring.is_present() && backend.interface() != Interface::Os;
    for package in topo.packages() {
        writeln!(out, "Core information for socket {package}:")?;
        for cpu in topo.cpus_in_package(package).iter() {
            let Some(place) = topo.get(cpu).copied() else {
                continue;
            };
            let class = if is_alloc {
                backend.class_of(cpu).map(Some)
            } else {
                Ok(None)
            };
            let rmid = if is_mon {
                backend.rmid_of(cpu)
            } else {
                Ok(None)
            };
            let mut line = match place.l3 {
                Some(l3) => format!("    Core {cpu}, L2ID {}, L3ID {l3} => ", place.l2),
                None => format!("    Core {cpu}, L2ID {} => ", place.l2),
            };
            let (class, rmid) = match (class, rmid) {
                (Ok(c), Ok(r)) => (c, r),
                (Err(e), Ok(_))
                    if matches!(e.request(), Some(RequestError::ForeignGroup { .. })) =>
                {
                    // This tool's extension: a CPU in another tool's resctrl group has no
                    // pqos class; say whose it is.
                    if let Some(RequestError::ForeignGroup { group, .. }) = e.request() {
                        writeln!(out, "{line}{group} (not managed by pqos)")?;
                    }
                    continue;
                }
                (Err(e), _) | (_, Err(e)) => {
                    writeln!(out, "    Core {cpu} => ERROR")?;
                    note(anyhow!(e).context(format!("reading the association of core {cpu}")));
                    continue;
                }
            };
            if let Some(c) = class {
                line.push_str(&format!("COS{c}"));
            }
            if let Some(r) = rmid {
                line.push_str(&format!("{}RMID{r}", if is_alloc { ", " } else { "" }));
            }
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// `PID association information:` (OS interface): the tasks of each class from COS1, or
/// from COS0 with `-v` (pqos/alloc.c; classes up to resctrl's CLOSID count).
fn print_task_info<B: Backend>(
    backend: &mut B,
    verbose: bool,
    note: &mut dyn FnMut(anyhow::Error),
    out: &mut dyn Write,
) -> Result<()> {
    let classes = backend.capabilities().os_classes();
    writeln!(out, "PID association information:")?;
    for class in u32::from(!verbose)..classes {
        let class = rdt_pqos::ClassId::new(class);
        match backend.tasks_of_class(class) {
            Ok(tasks) if tasks.is_empty() => writeln!(out, "    COS{class} => (none)")?,
            Ok(tasks) => {
                let list: Vec<String> = tasks.iter().map(ToString::to_string).collect();
                writeln!(out, "    COS{class} => {}", list.join(", "))?;
            }
            Err(e) => {
                writeln!(out, "Error retrieving PID information!")?;
                note(anyhow!(e).context(format!("reading the tasks of COS{class}")));
                return Ok(());
            }
        }
    }
    Ok(())
}

/// This tool's addition: the resctrl groups present that neither pqos nor this tool made
/// (goresctrl's, kubelet's, a user's), which `-e`, `-a`, `-r` and `-R` leave alone.
fn print_foreign_groups<B: Backend>(
    backend: &mut B,
    note: &mut dyn FnMut(anyhow::Error),
    out: &mut dyn Write,
) -> Result<()> {
    let groups = match backend.groups() {
        Ok(g) => g,
        Err(e) => {
            note(anyhow!(e).context("listing the resctrl groups"));
            return Ok(());
        }
    };
    let foreign: Vec<_> = groups
        .iter()
        .filter(|g| g.owner == GroupOwner::Foreign)
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    writeln!(out, "Other resctrl groups (not managed by pqos):")?;
    for g in foreign {
        let kind = match g.kind {
            GroupKind::Control => "control group",
            GroupKind::Monitor => "monitor group",
        };
        writeln!(out, "    {} ({kind})", g.path)?;
    }
    Ok(())
}

/// Prints pqos's `-s` report (`verbose`: `-v`, which lists COS0's tasks too). Like pqos,
/// a domain whose classes cannot be read gets a `Couldn't obtain info.` line and the report
/// goes on; the first such error is returned at the end.
///
/// # Errors
/// The first read that failed, or an output error.
pub fn run_show<B: Backend>(backend: &mut B, verbose: bool, out: &mut dyn Write) -> Result<()> {
    let caps = backend.capabilities().clone();
    let topo = backend.topology().clone();
    let mut first_err: Option<anyhow::Error> = None;
    let mut note = |e: anyhow::Error| {
        first_err.get_or_insert(e);
    };
    let l3ca = caps.l3_cat.get().is_some();
    let l2ca = caps.l2_cat.get().is_some();
    let mba = caps.mba.get().is_some();
    if l3ca || mba {
        let domains = L3Domains::new(&caps, &topo);
        for (id, domain) in &domains.list {
            writeln!(
                out,
                "{}{}{} COS definitions for {}:",
                if l3ca { "L3CA" } else { "" },
                if l3ca && mba { "/" } else { "" },
                if mba { "MBA" } else { "" },
                domains.show_label(*id)
            )?;
            if l3ca {
                match backend.cat_classes(CatResource::L3, *domain) {
                    Ok(classes) => {
                        for c in &classes {
                            writeln!(out, "{}", cat_line("L3CA", c))?;
                        }
                    }
                    Err(e) => {
                        writeln!(out, "L3CA: Couldn't obtain info.")?;
                        note(
                            anyhow!(e)
                                .context(format!("reading the L3 classes of domain {domain}")),
                        );
                    }
                }
            }
            if mba {
                match backend.mba_classes(*domain) {
                    Ok(classes) => {
                        for c in &classes {
                            writeln!(out, "    MBA COS{} => {}", c.class, mba_value(c.limit))?;
                        }
                    }
                    Err(e) => {
                        writeln!(out, "MBA: Couldn't obtain info.")?;
                        note(
                            anyhow!(e)
                                .context(format!("reading the MBA classes of domain {domain}")),
                        );
                    }
                }
            }
        }
    }
    if l2ca {
        for domain in topo.l2_domains() {
            match backend.cat_classes(CatResource::L2, domain) {
                Ok(classes) => {
                    writeln!(out, "L2CA COS definitions for L2ID {domain}:")?;
                    for c in &classes {
                        writeln!(out, "{}", cat_line("L2CA", c))?;
                    }
                }
                Err(e) => {
                    note(anyhow!(e).context(format!("reading the L2 classes of L2 id {domain}")));
                }
            }
        }
    }
    print_core_info(backend, l3ca || l2ca || mba, &mut note, out)?;
    if backend.interface() == Interface::Os {
        if l3ca || l2ca || mba {
            print_task_info(backend, verbose, &mut note, out)?;
        }
        print_foreign_groups(backend, &mut note, out)?;
    }
    first_err.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use rdt_pqos::fake::fixtures;
    use rdt_pqos::{Feature, GroupKind, GroupOwner};

    use super::*;
    use crate::command::AllocRequest;
    use crate::commands::alloc::run_alloc;
    use crate::testdata::{sample, without_note_banner};
    use rdt_pqos::fake::FakeBackend;

    fn show(b: &mut FakeBackend) -> String {
        show_v(b, false)
    }

    fn show_v(b: &mut FakeBackend, verbose: bool) -> String {
        let mut out = Vec::new();
        run_show(b, verbose, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn define(b: &mut FakeBackend, classdef: &str) {
        let req = AllocRequest {
            classes: classdef.parse::<crate::grammar::ClassDefs>().unwrap().0,
            ..AllocRequest::default()
        };
        run_alloc(b, &req, &rdt_pqos::proc::ProcFs::host(), &mut Vec::new()).unwrap();
    }

    #[test]
    fn matches_real_pqos_s_on_a_two_socket_20_bit_part() {
        // arrange: the OS interface prints no RMIDs; the sample is cut after core 4
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        let want = without_note_banner(&sample("intel_pqos-os-s_2socket_20bit_issue59.txt"));
        // act
        let got = show(&mut b);
        // assert
        assert!(got.starts_with(&want), "want:\n{want}\ngot:\n{got}");
    }

    #[test]
    fn matches_real_pqos_s_with_l3ca_and_mba() {
        let mut b = FakeBackend::intel_1s();
        define(&mut b, "llc:0=0x600");
        let want = without_note_banner(&sample("intel_pqos-s_l3ca_mba_2socket_issue246.txt"));
        let got = show(&mut b);
        assert!(got.starts_with(&want), "want:\n{want}\ngot:\n{got}");
    }

    #[test]
    fn matches_real_pqos_s_with_mba_only() {
        let mut b = FakeBackend::broadwell_2s();
        b.reconfigure(|c| {
            c.l3_cat = Feature::Unsupported;
            c.mba = Feature::Supported(fixtures::intel_mba(8));
        });
        define(&mut b, "mba:1=50;mba:2=70;mba:5=10");
        let sample = sample("intel_pqos-e_and_-s_mba_only_issue228.txt");
        let want = without_note_banner(sample.split_once("---\n").unwrap().1);
        let got = show(&mut b);
        assert!(got.starts_with(&want), "want:\n{want}\ngot:\n{got}");
    }

    #[test]
    fn msr_core_lines_carry_the_rmid_and_cdp_masks_have_a_space() {
        let mut b = FakeBackend::broadwell_2s();
        b.enable_l3_cdp();
        let got = show(&mut b);
        assert!(got.starts_with(
            "L3CA COS definitions for Socket 0:\n    L3CA COS0 => DATA 0xfffff, CODE 0xfffff\n"
        ));
        assert!(
            got.contains(
                "Core information for socket 1:\n    Core 12, L2ID 12, L3ID 1 => COS0, RMID0\n"
            ),
            "{got}"
        );
    }

    #[test]
    fn amd_labels_l3_clusters_and_prints_raw_units() {
        let mut b = FakeBackend::amd_2ccx();
        let got = show(&mut b);
        assert!(
            got.starts_with("L3CA/MBA COS definitions for L3 Cluster (or Core Complex) 0:\n"),
            "{got}"
        );
        assert!(got.contains("    MBA COS15 => 2048 available\nL3CA/MBA COS definitions for L3 Cluster (or Core Complex) 1:\n"), "{got}");
    }

    #[test]
    fn l2_classes_per_l2_id() {
        let mut b = FakeBackend::intel_1s();
        let got = show(&mut b);
        assert!(
            got.contains("L2CA COS definitions for L2ID 3:\n    L2CA COS0 => MASK 0xff\n"),
            "{got}"
        );
        assert!(
            got.ends_with("    Core 7, L2ID 3, L3ID 0 => COS0, RMID0\n"),
            "{got}"
        );
    }

    #[test]
    fn os_interface_lists_tasks_per_class_from_cos1_and_cos0_with_v() {
        // arrange: intel_1s on resctrl has 8 CLOSIDs (L2 CAT and MBA have 8)
        let mut b = FakeBackend::intel_1s();
        b.os_interface = true;
        b.add_process(123, &[124]);
        b.add_process(456, &[]);
        b.add_process(7, &[]);
        for pid in [123, 456] {
            b.associate_task(rdt_pqos::TaskId::new(pid), rdt_pqos::ClassId::new(1))
                .unwrap();
        }
        // act
        let got = show(&mut b);
        let got_v = show_v(&mut b, true);
        // assert
        let tail = "Core information for socket 0:\n";
        let cores = &got[got.find(tail).unwrap()..];
        assert!(
            cores.starts_with(
                "Core information for socket 0:\n    Core 0, L2ID 0, L3ID 0 => COS0\n"
            ),
            "no RMID on the OS interface: {cores}"
        );
        assert!(
            got.ends_with(
                "    Core 7, L2ID 3, L3ID 0 => COS0\nPID association information:\n    \
                 COS1 => 123, 124, 456\n    COS2 => (none)\n    COS3 => (none)\n    \
                 COS4 => (none)\n    COS5 => (none)\n    COS6 => (none)\n    COS7 => (none)\n"
            ),
            "{got}"
        );
        assert!(
            got_v.contains("PID association information:\n    COS0 => 7\n    COS1 => 123"),
            "{got_v}"
        );
    }

    #[test]
    fn foreign_groups_are_listed_after_pqos_sections() {
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        b.add_group("COS1", GroupKind::Control, GroupOwner::Pqos);
        b.add_group("kubepods", GroupKind::Control, GroupOwner::Foreign);
        b.add_group(
            "COS1/mon_groups/pqos-1-0",
            GroupKind::Monitor,
            GroupOwner::Pqos,
        );
        b.add_group(
            "COS1/mon_groups/mine",
            GroupKind::Monitor,
            GroupOwner::Foreign,
        );
        let got = show(&mut b);
        assert!(
            got.ends_with(
                "    COS15 => (none)\nOther resctrl groups (not managed by pqos):\n    \
                 kubepods (control group)\n    COS1/mon_groups/mine (monitor group)\n"
            ),
            "{got}"
        );
        // MSR: no task section, no groups, RMIDs shown
        b.os_interface = false;
        let got = show(&mut b);
        assert!(
            !got.contains("PID association") && !got.contains("Other resctrl"),
            "{got}"
        );
        assert!(got.ends_with(", RMID0\n"), "{got}");
    }

    #[test]
    fn unreadable_tasks_get_pqos_error_line() {
        let mut b = FakeBackend::broadwell_2s();
        b.os_interface = true;
        b.fail_reads(true);
        let mut out = Vec::new();
        let e = run_show(&mut b, false, &mut out).unwrap_err();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.ends_with("PID association information:\nError retrieving PID information!\n"),
            "{out}"
        );
        assert!(format!("{e:#}").contains("tasks of COS1"), "{e:#}");
    }
}
