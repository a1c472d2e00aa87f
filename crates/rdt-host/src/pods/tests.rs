use super::*;

const UID: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

#[test]
fn a_pod_uid_is_a_uuid_or_a_static_pods_md5_and_nothing_else() {
    assert!(is_pod_uid(UID));
    assert!(is_pod_uid("0123456789abcdef0123456789ABCDEF"));
    for bad in [
        "",
        ".",
        "..",
        "../../etc",
        "gold/mon_groups/x",
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f",
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0a",
        "0f1e2d3c+4b5a-6978-8796-a5b4c3d2e1f0",
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1g0",
        "0f1e2d3c/4b5a/6978/8796/a5b4c3d2e1f0",
        "0123456789abcdef0123456789abcde\n",
        "pqos-1-2",
    ] {
        assert!(!is_pod_uid(bad), "{bad:?}");
    }
    assert_eq!(
        mon_group_path(Some("gold"), UID),
        format!("gold/mon_groups/{UID}")
    );
    assert_eq!(mon_group_path(None, UID), format!("mon_groups/{UID}"));
    assert!(is_mon_group_path(&mon_group_path(Some("gold"), UID)));
    assert!(is_mon_group_path(&mon_group_path(None, UID)));
    for bad in [
        format!("../mon_groups/{UID}"),
        format!("info/mon_groups/{UID}"),
        format!("a/b/mon_groups/{UID}"),
        "gold/mon_groups/pqos-1-2".to_owned(),
        format!("gold/{UID}"),
    ] {
        assert!(!is_mon_group_path(&bad), "{bad}");
    }
}

#[test]
fn strings_from_the_runtime_are_capped() {
    let labels: BTreeMap<String, String> = (0..100)
        .map(|i| (format!("k{i:03}"), "é".repeat(400)))
        .collect();
    let p = PodRecord::capped(UID, &"n".repeat(10_000), "pod", Some("Guaranteed"), &labels);
    assert_eq!(p.namespace.len(), MAX_FIELD_BYTES);
    assert_eq!(p.labels.len(), MAX_POD_LABELS);
    assert!(p.labels.contains_key("k000") && !p.labels.contains_key("k099"));
    // cut at a character boundary: é is two bytes
    assert!(p.labels.values().all(|v| v.len() == MAX_FIELD_BYTES - 1));
    let c = ContainerRecord::capped("id", "c", "gold", None, 1, &"/x".repeat(5000));
    assert_eq!(c.cgroups_path.len(), MAX_PATH_BYTES);
}

fn record() -> PodsRecord {
    let mut labels = BTreeMap::new();
    labels.insert("app".to_owned(), "db".to_owned());
    let mut db = PodRecord::capped(UID, "prod", "db-0", Some("Guaranteed"), &labels);
    db.containers = vec![
        ContainerRecord::capped("c1", "db", "gold", Some("gold"), 11, ""),
        ContainerRecord::capped("c2", "sidecar", "gold", Some("gold"), 12, ""),
    ];
    db.mon_groups = vec![mon_group_path(Some("gold"), UID)];
    let uid2 = "00000000000000000000000000000002";
    let mut batch = PodRecord::capped(uid2, "batch", "job-1", Some("BestEffort"), &BTreeMap::new());
    batch.containers = vec![ContainerRecord::capped(
        "c3",
        "work",
        "bronze",
        Some("bronze"),
        13,
        "",
    )];
    batch.mon_groups = vec![mon_group_path(Some("bronze"), uid2)];
    PodsRecord {
        version: VERSION,
        pods: vec![db, batch],
    }
}

#[test]
fn the_record_goes_through_the_run_directory_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let r = record();
    r.write(&run).unwrap();
    assert_eq!(PodsRecord::read(&run).unwrap(), r);
    assert_eq!(
        r.pod_of_mon_group(&format!("gold/mon_groups/{UID}"))
            .map(|p| p.name.as_str()),
        Some("db-0")
    );
    assert_eq!(r.pods[0].container_names(), "db,sidecar");
    assert_eq!(r.by_mon_group().len(), 2);
    // another version, or not the record: refused, naming the file
    std::fs::write(run.join(PODS_FILE), "{\"version\":7,\"pods\":[]}").unwrap();
    let e = PodsRecord::read(&run).unwrap_err();
    assert!(e.to_string().contains("version 7"), "{e}");
    std::fs::write(run.join(PODS_FILE), "[1,2").unwrap();
    let e = PodsRecord::read(&run).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(e.to_string().contains(PODS_FILE), "{e}");
    // none: NotFound
    let e = PodsRecord::read(&dir.path().join("none")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
}

#[test]
fn a_selector_takes_containers_by_qos_class_namespace_and_label() {
    let r = record();
    let ids =
        |s: &PodSelector| -> Vec<String> { r.selected(s).map(|(_, c)| c.id.clone()).collect() };
    let guaranteed = PodSelector {
        qos: vec!["Guaranteed".into()],
        ..PodSelector::default()
    };
    assert_eq!(ids(&guaranteed), ["c1", "c2"]);
    let best = PodSelector {
        qos: vec!["BestEffort".into(), "Burstable".into()],
        ..PodSelector::default()
    };
    assert_eq!(ids(&best), ["c3"]);
    let labelled = PodSelector {
        labels: [("app".to_owned(), "db".to_owned())].into(),
        ..PodSelector::default()
    };
    assert_eq!(ids(&labelled), ["c1", "c2"]);
    let wrong_value = PodSelector {
        labels: [("app".to_owned(), "web".to_owned())].into(),
        ..PodSelector::default()
    };
    assert!(ids(&wrong_value).is_empty());
    let both = PodSelector {
        namespaces: vec!["prod".into()],
        classes: vec!["bronze".into()],
        ..PodSelector::default()
    };
    assert!(ids(&both).is_empty(), "every field must match");
    assert_eq!(ids(&PodSelector::default()).len(), 3);
}

/// A fake `/proc` with `pid`'s `cgroup` file, and a cgroup tree.
fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn on_cgroup_v1_every_process_of_the_containers_cgroup_is_its_task_not_only_its_init() {
    let dir = tempfile::tempdir().unwrap();
    let proc = ProcFs::at(dir.path().join("proc"));
    let cg = dir.path().join("cgroup");
    // a hybrid host: systemd's unified line says nothing of the container
    write(
        &dir.path().join("proc/100/cgroup"),
        "12:pids:/kubepods/podX/ctr\n4:cpu,cpuacct:/kubepods/podX/ctr\n1:name=systemd:/kubepods/podX/ctr\n0::/\n",
    );
    // its process exists: without the v1 hierarchies it alone would be moved
    write(&dir.path().join("proc/100/stat"), "100 (sh) S 1\n");
    write(
        &cg.join("cpu,cpuacct/kubepods/podX/ctr/cgroup.procs"),
        "100\n101\n102\n",
    );
    write(
        &cg.join("cpu,cpuacct/kubepods/podX/ctr/tasks"),
        "100\n101\n102\n103\n",
    );
    let tasks = container_tasks(&proc, &cg, 100, "").unwrap();
    assert_eq!(tasks, [100, 101, 102].map(TaskId::new));
    // the pids hierarchy when the CPU controller's is not mounted
    std::fs::remove_dir_all(cg.join("cpu,cpuacct")).unwrap();
    write(
        &cg.join("pids/kubepods/podX/ctr/cgroup.procs"),
        "100\n104\n",
    );
    assert_eq!(
        container_tasks(&proc, &cg, 100, "").unwrap(),
        [100, 104].map(TaskId::new)
    );
    // no process known: the runtime's cgroups path, in the v1 hierarchies
    assert_eq!(
        container_tasks(&proc, &cg, 0, "/kubepods/podX/ctr").unwrap(),
        [100, 104].map(TaskId::new)
    );
    // cgroup v2: the unified line
    write(
        &dir.path().join("proc/200/cgroup"),
        "0::/kubepods/podY/ctr\n",
    );
    write(&cg.join("kubepods/podY/ctr/cgroup.procs"), "200\n201\n");
    assert_eq!(
        container_tasks(&proc, &cg, 200, "").unwrap(),
        [200, 201].map(TaskId::new)
    );
    // nothing at all: gone
    let e = container_tasks(&proc, &cg, 0, "/kubepods/none").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
}

#[test]
fn a_selectors_tasks_are_its_containers_processes() {
    let dir = tempfile::tempdir().unwrap();
    let proc = ProcFs::at(dir.path().join("proc"));
    let cg = dir.path().join("cgroup");
    for (pid, procs) in [(11, "11\n21\n"), (12, "12\n"), (13, "13\n23\n")] {
        write(
            &dir.path().join(format!("proc/{pid}/cgroup")),
            &format!("0::/c{pid}\n"),
        );
        write(&cg.join(format!("c{pid}/cgroup.procs")), procs);
    }
    let r = record();
    let guaranteed = PodSelector {
        qos: vec!["Guaranteed".into()],
        ..PodSelector::default()
    };
    assert_eq!(
        r.selected_tasks(&guaranteed, &proc, &cg).unwrap(),
        [11, 12, 21].map(TaskId::new)
    );
    let best = PodSelector {
        qos: vec!["BestEffort".into()],
        ..PodSelector::default()
    };
    assert_eq!(
        r.selected_tasks(&best, &proc, &cg).unwrap(),
        [13, 23].map(TaskId::new)
    );
}
