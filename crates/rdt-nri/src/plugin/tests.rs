use super::*;
use crate::api::{LinuxContainer, LinuxPodSandbox, SynchronizeRequest, SynchronizeResponse};

fn classes() -> Vec<Class> {
    ["gold", "silver", "bronze"]
        .iter()
        .map(|n| Class::new(*n, Some(format!("cri-{n}"))))
        .collect()
}

fn plugin(on_unknown: OnUnknown) -> Plugin {
    let qos = [
        (Qos::Guaranteed, "gold"),
        (Qos::Burstable, "silver"),
        (Qos::BestEffort, "bronze"),
    ]
    .into_iter()
    .map(|(q, c)| (q, c.to_owned()))
    .collect();
    Plugin::new(
        classes(),
        Options {
            qos,
            default: Some("bronze".to_owned()),
            on_unknown,
            monitoring: false,
        },
    )
    .unwrap()
}

fn pod(parent: &str, annotations: &[(&str, &str)]) -> PodSandbox {
    PodSandbox {
        id: "pod0".into(),
        name: "web".into(),
        namespace: "ns".into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        linux: Some(LinuxPodSandbox {
            cgroup_parent: parent.into(),
            ..LinuxPodSandbox::default()
        }),
        ..PodSandbox::default()
    }
}

fn container(name: &str, annotations: &[(&str, &str)]) -> Container {
    Container {
        id: format!("id-{name}"),
        pod_sandbox_id: "pod0".into(),
        name: name.into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Container::default()
    }
}

fn decided(p: &Plugin, pod: &PodSandbox, c: &Container) -> (String, Origin) {
    let (class, origin) = p.decide(pod, c).unwrap().unwrap();
    (class.name.clone(), origin)
}

#[test]
fn qos_class_comes_from_kubelets_cgroup_parent_in_both_layouts() {
    for (parent, qos) in [
        ("/kubepods/burstable/pod1234", Some(Qos::Burstable)),
        ("/kubepods/besteffort/pod1234", Some(Qos::BestEffort)),
        ("/kubepods/pod1234", Some(Qos::Guaranteed)),
        ("kubepods-burstable-pod12_34.slice", Some(Qos::Burstable)),
        ("kubepods-besteffort-pod12_34.slice", Some(Qos::BestEffort)),
        ("kubepods-pod12_34.slice", Some(Qos::Guaranteed)),
        ("/system.slice/foo", None),
    ] {
        assert_eq!(Qos::of_pod(&pod(parent, &[])), qos, "{parent}");
    }
    assert_eq!(Qos::of_pod(&PodSandbox::default()), None);
}

#[test]
fn annotations_win_in_goresctrls_order_then_qos_then_default() {
    let p = plugin(OnUnknown::Fail);
    let all = pod(
        "/kubepods/besteffort/pod1",
        &[
            ("rdt.resources.beta.kubernetes.io/container.app", "silver"),
            (POD_ANNOTATION, "bronze"),
        ],
    );
    let c = container("app", &[(CONTAINER_ANNOTATION, "gold")]);
    assert_eq!(
        decided(&p, &all, &c),
        (
            "gold".into(),
            Origin::Annotation(CONTAINER_ANNOTATION.into())
        )
    );
    let c = container("app", &[]);
    assert_eq!(
        decided(&p, &all, &c),
        (
            "silver".into(),
            Origin::Annotation("rdt.resources.beta.kubernetes.io/container.app".into())
        )
    );
    // the per-container annotation of another container does not apply
    let c = container("sidecar", &[]);
    assert_eq!(
        decided(&p, &all, &c),
        ("bronze".into(), Origin::Annotation(POD_ANNOTATION.into()))
    );
    let plain = pod("/kubepods/burstable/pod1", &[]);
    assert_eq!(
        decided(&p, &plain, &c),
        ("silver".into(), Origin::Qos(Qos::Burstable))
    );
    let outside = pod("/system.slice", &[]);
    assert_eq!(
        decided(&p, &outside, &c),
        ("bronze".into(), Origin::Default)
    );
}

#[test]
fn an_unknown_class_is_refused_naming_the_annotation_and_the_classes() {
    let p = plugin(OnUnknown::Fail);
    let c = container("app", &[]);
    let annotated = pod("/kubepods/pod1", &[(POD_ANNOTATION, "platinum")]);
    let err = p.decide(&annotated, &c).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("`platinum`"), "{msg}");
    assert!(msg.contains(POD_ANNOTATION), "{msg}");
    assert!(
        msg.contains("gold, silver, bronze, system/default"),
        "{msg}"
    );
    // the same through the protocol: FAILED_PRECONDITION with that message
    let mut p = plugin(OnUnknown::Fail);
    let req = ContainerRequest {
        pod: Some(annotated.clone()),
        container: Some(c.clone()),
    };
    let status = p
        .handle("CreateContainer", &req.encode_to_vec())
        .unwrap_err();
    assert_eq!(
        (status.code, status.message),
        (CODE_FAILED_PRECONDITION, msg)
    );
    // or placed by its QoS class
    let p = plugin(OnUnknown::Default);
    assert_eq!(
        decided(&p, &annotated, &c),
        ("gold".into(), Origin::Qos(Qos::Guaranteed))
    );
}

#[test]
fn creation_joins_the_class_group_by_closid_and_the_root_class_gets_nothing() {
    let mut p = plugin(OnUnknown::Fail);
    let c = container("app", &[(CONTAINER_ANNOTATION, "silver")]);
    let r = p.create(&pod("/kubepods/pod1", &[]), &c).unwrap();
    let rdt = r.adjust.unwrap().linux.unwrap().rdt.unwrap();
    assert_eq!(rdt.clos_id.unwrap().value, "cri-silver");
    assert_eq!(
        (rdt.schemata, rdt.enable_monitoring, rdt.remove),
        (None, None, false)
    );
    assert_eq!(p.placed("id-app"), Some("silver"));
    let c = container("root", &[(CONTAINER_ANNOTATION, "system/default")]);
    let r = p.create(&pod("/kubepods/pod1", &[]), &c).unwrap();
    assert_eq!(r.adjust, None);
    // monitoring: the plugin's per-pod group, not runc's per-container one
    p.options.monitoring = true;
    let c = container("mon", &[]);
    let r = p.create(&pod("/kubepods/pod1", &[]), &c).unwrap();
    let rdt = r.adjust.unwrap().linux.unwrap().rdt.unwrap();
    assert_eq!(rdt.enable_monitoring, None);
    let removed = ContainerRequest {
        pod: None,
        container: Some(c),
    };
    p.handle("RemoveContainer", &removed.encode_to_vec())
        .unwrap();
    assert_eq!(p.placed("id-mon"), None);
}

#[test]
fn an_option_naming_a_missing_class_is_refused_at_start() {
    let err = Plugin::new(
        classes(),
        Options {
            default: Some("lead".into()),
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("`lead`"), "{err}");
}

#[test]
fn synchronize_repairs_containers_outside_their_class_and_sends_no_update_split_or_not() {
    let mut p = plugin(OnUnknown::Fail);
    let in_class = |name: &str, clos: &str| Container {
        pid: 4242,
        linux: Some(LinuxContainer {
            rdt: Some(LinuxRdt {
                clos_id: Some(OptionalString { value: clos.into() }),
                ..LinuxRdt::default()
            }),
            cgroups_path: format!("/kubepods/burstable/pod1/{name}"),
            ..LinuxContainer::default()
        }),
        ..container(name, &[])
    };
    let pods = vec![pod("/kubepods/burstable/pod1", &[])];
    // burstable: silver's group is cri-silver
    let first = SynchronizeRequest {
        pods: pods.clone(),
        containers: vec![in_class("a", "cri-silver"), in_class("b", "cri-gold")],
        more: true,
    };
    let r =
        SynchronizeResponse::decode(&p.handle("Synchronize", &first.encode_to_vec()).unwrap()[..])
            .unwrap();
    assert_eq!((r.update.len(), r.more), (0, true));
    assert!(p.take_repairs().is_empty(), "nothing before the last part");
    let stopped = Container {
        state: api::CONTAINER_STOPPED,
        ..container("d", &[])
    };
    let last = SynchronizeRequest {
        pods: Vec::new(),
        containers: vec![container("c", &[]), stopped],
        more: false,
    };
    let r =
        SynchronizeResponse::decode(&p.handle("Synchronize", &last.encode_to_vec()).unwrap()[..])
            .unwrap();
    // no update: the runtime would drop it (CRI resources carry no RDT class)
    assert_eq!((r.update.len(), r.more), (0, false));
    let mut repairs = p.take_repairs();
    repairs.sort_by(|a, b| a.container.cmp(&b.container));
    let made: Vec<(&str, &str, Option<&str>, u32, &str)> = repairs
        .iter()
        .map(|r| {
            (
                r.container.as_str(),
                r.class.as_str(),
                r.group.as_deref(),
                r.pid,
                r.cgroups_path.as_str(),
            )
        })
        .collect();
    assert_eq!(
        made,
        [
            (
                "id-b",
                "silver",
                Some("cri-silver"),
                4242,
                "/kubepods/burstable/pod1/b"
            ),
            ("id-c", "silver", Some("cri-silver"), 0, ""),
        ]
    );
    assert_eq!(repairs[0].pod, "ns/web");
    assert!(p.take_repairs().is_empty(), "taken once");
    // placed: a, b, c; the stopped one is not
    assert_eq!(p.placed_count(), 3);
    assert_eq!(p.placed("id-d"), None);
    // b and c are re-checked while they run; b stops: no longer
    let mut rechecked: Vec<&str> = p.repaired().map(|r| r.container.as_str()).collect();
    rechecked.sort_unstable();
    assert_eq!(rechecked, ["id-b", "id-c"]);
    let stop = ContainerRequest {
        pod: None,
        container: Some(container("b", &[])),
    };
    p.handle("StopContainer", &stop.encode_to_vec()).unwrap();
    let rechecked: Vec<&str> = p.repaired().map(|r| r.container.as_str()).collect();
    assert_eq!(rechecked, ["id-c"]);
}

#[test]
fn a_container_synchronized_before_it_started_is_repaired_when_it_starts() {
    // arrange: created while the plugin was away, not started: no pid, no class
    let mut p = plugin(OnUnknown::Fail);
    let sync = SynchronizeRequest {
        pods: vec![pod("/kubepods/burstable/pod1", &[])],
        containers: vec![container("late", &[])],
        more: false,
    };
    p.handle("Synchronize", &sync.encode_to_vec()).unwrap();
    let first = p.take_repairs();
    assert_eq!(first.len(), 1);
    assert_eq!(
        (first[0].pid, first[0].group.as_deref()),
        (0, Some("cri-silver"))
    );
    // act: the runtime starts it (PostStartContainer, through StateChange)
    let started = api::StateChangeEvent {
        event: api::event::POST_START_CONTAINER,
        pod: None,
        container: Some(Container {
            pid: 777,
            linux: Some(LinuxContainer {
                cgroups_path: "/kubepods/burstable/pod1/late".into(),
                ..LinuxContainer::default()
            }),
            ..container("late", &[])
        }),
    };
    p.handle("StateChange", &started.encode_to_vec()).unwrap();
    // assert: its repair is due now, with the process to move
    let due = p.take_repairs();
    assert_eq!(due.len(), 1);
    assert_eq!(
        (
            due[0].container.as_str(),
            due[0].pid,
            due[0].cgroups_path.as_str()
        ),
        ("id-late", 777, "/kubepods/burstable/pod1/late")
    );
    // a container the plugin placed at creation (no repair) starts: nothing to do
    let other = api::StateChangeEvent {
        event: api::event::POST_START_CONTAINER,
        pod: None,
        container: Some(container("unknown", &[])),
    };
    p.handle("StateChange", &other.encode_to_vec()).unwrap();
    assert!(p.take_repairs().is_empty());
}

#[test]
fn a_synchronization_past_its_limits_is_refused_and_the_next_one_starts_afresh() {
    let mut p = plugin(OnUnknown::Fail);
    // parts of MAX_SYNC_CONTAINERS / 4 containers each: the fifth passes the limit
    let part: Vec<Container> = (0..MAX_SYNC_CONTAINERS / 4)
        .map(|i| Container {
            id: format!("c{i}"),
            ..Container::default()
        })
        .collect();
    let req = SynchronizeRequest {
        pods: Vec::new(),
        containers: part,
        more: true,
    }
    .encode_to_vec();
    for _ in 0..4 {
        p.handle("Synchronize", &req).unwrap();
    }
    let status = p.handle("Synchronize", &req).unwrap_err();
    assert_eq!(status.code, crate::ttrpc::CODE_RESOURCE_EXHAUSTED);
    assert!(
        status
            .message
            .contains(&format!("{} containers", MAX_SYNC_CONTAINERS / 4 * 5)),
        "{}",
        status.message
    );
    assert!(status.message.contains("refused"), "{}", status.message);
    // dropped: a small synchronization afterwards is whole on its own
    let small = SynchronizeRequest {
        pods: vec![pod("/kubepods/pod1", &[])],
        containers: vec![container("x", &[])],
        more: false,
    };
    p.handle("Synchronize", &small.encode_to_vec()).unwrap();
    assert_eq!(p.take_repairs().len(), 1);
    assert_eq!(p.placed_count(), 1);
    // bytes: one part of 17 MiB of labels, four times, passes MAX_SYNC_BYTES
    let mut p = plugin(OnUnknown::Fail);
    let fat = Container {
        labels: [("l".to_owned(), "v".repeat(17 << 20))]
            .into_iter()
            .collect(),
        ..container("fat", &[])
    };
    let req = SynchronizeRequest {
        pods: Vec::new(),
        containers: vec![fat],
        more: true,
    }
    .encode_to_vec();
    for _ in 0..3 {
        p.handle("Synchronize", &req).unwrap();
    }
    let status = p.handle("Synchronize", &req).unwrap_err();
    assert!(
        status.message.contains("bytes so far"),
        "{}",
        status.message
    );
    // a new connection drops a half-made synchronization
    p.handle("Synchronize", &req).unwrap();
    p.reset_connection();
    p.handle("Synchronize", &small.encode_to_vec()).unwrap();
    assert_eq!(p.take_repairs().len(), 1);
}

/// Issue 33's measure: 20,000 pods with 20,000 containers matched in one synchronization
/// (the time is printed; run with --release --nocapture for the report).
#[test]
fn synchronize_of_20k_pods_and_20k_containers_is_linear() {
    let mut p = plugin(OnUnknown::Fail);
    let n = 20_000;
    let pods: Vec<PodSandbox> = (0..n)
        .map(|i| PodSandbox {
            id: format!("pod-{i}"),
            ..pod("/kubepods/besteffort/podx", &[])
        })
        .collect();
    let containers: Vec<Container> = (0..n)
        .map(|i| Container {
            id: format!("c-{i}"),
            pod_sandbox_id: format!("pod-{}", n - 1 - i),
            ..container("app", &[])
        })
        .collect();
    let req = SynchronizeRequest {
        pods,
        containers,
        more: false,
    }
    .encode_to_vec();
    let t0 = std::time::Instant::now();
    p.handle("Synchronize", &req).unwrap();
    let took = t0.elapsed();
    eprintln!("Synchronize of {n} pods x {n} containers: {took:?}");
    let repairs = p.take_repairs();
    assert_eq!(repairs.len(), n);
    assert!(repairs.iter().all(|r| r.class == "bronze"));
    // the quadratic matching took seconds; a generous bound for debug builds
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
}

/// goresctrl's own test cases of `ContainerClassFromAnnotations`, in its order
/// (intel/goresctrl `pkg/rdt/kubernetes_test.go`, `TestContainerClassFromAnnotations`):
/// the container annotation first, then the pod's for the container, then the pod's; a
/// class that denies the annotation's kind refuses it (never falling back to a weaker
/// annotation); a name with `/` is refused; no annotation gives no class.
#[test]
fn deny_options_give_goresctrls_answers_to_its_own_test_cases() {
    let name = "test-container";
    let mut ctr_ann = vec![(CONTAINER_ANNOTATION.to_owned(), "class-1".to_owned())];
    let mut pod_ann = vec![
        (
            format!("{POD_CONTAINER_ANNOTATION_PREFIX}{name}"),
            "class-2".to_owned(),
        ),
        (POD_ANNOTATION.to_owned(), "class-3".to_owned()),
    ];
    let mut classes: Vec<Class> = ["class-1", "class-2", "class-3"]
        .iter()
        .map(|n| Class::new(*n, Some((*n).to_owned())))
        .collect();
    // no QoS mapping, no default: goresctrl answers "" without an annotation
    let case = |classes: &[Class], ctr: &[(String, String)], pod_ann: &[(String, String)]| {
        let p = Plugin::new(classes.to_vec(), Options::default()).unwrap();
        let c = Container {
            name: name.into(),
            annotations: ctr.iter().cloned().collect(),
            ..Container::default()
        };
        let pod = PodSandbox {
            annotations: pod_ann.iter().cloned().collect(),
            ..PodSandbox::default()
        };
        match p.decide(&pod, &c) {
            Ok(Some((class, _))) => Ok(class.name.clone()),
            Ok(None) => Ok(String::new()),
            Err(r) => Err(r.rule),
        }
    };
    // 1. the container annotation: with no classes configured, an error
    assert!(matches!(
        case(&[], &ctr_ann, &pod_ann),
        Err(Rule::UnknownClass { .. })
    ));
    // the class exists, default options: class-1
    assert_eq!(case(&classes, &ctr_ann, &pod_ann), Ok("class-1".into()));
    // container annotations denied by class-1: an error, not class-2 or class-3
    classes[0].deny_container_annotation = true;
    assert_eq!(
        case(&classes, &ctr_ann, &pod_ann),
        Err(Rule::Denied { pod: false })
    );
    // an invalid class name
    ctr_ann[0].1 = "foo/bar".into();
    assert_eq!(case(&classes, &ctr_ann, &pod_ann), Err(Rule::Unqualified));
    // 2. the per-container pod annotation
    ctr_ann.clear();
    assert_eq!(case(&classes, &ctr_ann, &pod_ann), Ok("class-2".into()));
    classes[1].deny_pod_annotation = true;
    assert_eq!(
        case(&classes, &ctr_ann, &pod_ann),
        Err(Rule::Denied { pod: true })
    );
    // 3. the pod-wide pod annotation
    pod_ann.remove(0);
    assert_eq!(case(&classes, &ctr_ann, &pod_ann), Ok("class-3".into()));
    classes[2].deny_pod_annotation = true;
    assert_eq!(
        case(&classes, &ctr_ann, &pod_ann),
        Err(Rule::Denied { pod: true })
    );
    // no annotation: no class, no error
    pod_ann.clear();
    assert_eq!(case(&classes, &ctr_ann, &pod_ann), Ok(String::new()));
    // a denied class stays the class of the QoS mapping (the rules are about annotations)
    let mut p = plugin(OnUnknown::Default);
    p.classes[0].deny_pod_annotation = true; // gold
    p.classes[0].deny_container_annotation = true;
    let (class, origin) = decided(&p, &pod("/kubepods/pod1", &[]), &container("x", &[]));
    assert_eq!(
        (class.as_str(), origin),
        ("gold", Origin::Qos(Qos::Guaranteed))
    );
    // and a denial is refused even with --on-unknown=default (it is a rule, not a typo)
    let annotated = pod("/kubepods/pod1", &[(POD_ANNOTATION, "gold")]);
    let msg = p
        .decide(&annotated, &container("x", &[]))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("not allowed from pod annotations"), "{msg}");
    assert!(is_qualified_class_name(ROOT_CLASS) && !is_qualified_class_name(".."));
}

#[test]
fn runtime_strings_in_a_refusal_are_escaped_and_capped() {
    let p = plugin(OnUnknown::Fail);
    let value = format!("x\n{}", "y".repeat(100_000));
    let annotated = pod("/kubepods/pod1", &[(POD_ANNOTATION, value.as_str())]);
    let c = Container {
        name: "evil\u{1b}[2J\0".into(),
        ..container("a", &[])
    };
    let msg = p.decide(&annotated, &c).unwrap_err().to_string();
    assert!(!msg.contains(['\n', '\u{1b}', '\0']), "{msg}");
    assert!(msg.contains("evil\\u{1b}[2J\\u{0}"), "{msg}");
    assert!(
        msg.len() < 1000 && msg.contains("…(100002 bytes)"),
        "{}",
        msg.len()
    );
}

#[test]
fn configure_subscribes_to_create_post_start_stop_and_remove_and_others_are_unimplemented() {
    let mut p = plugin(OnUnknown::Fail);
    let r = p
        .handle(
            "Configure",
            &api::ConfigureRequest::default().encode_to_vec(),
        )
        .unwrap();
    let r = api::ConfigureResponse::decode(&r[..]).unwrap();
    // CREATE_CONTAINER 4, POST_START_CONTAINER 7, STOP_CONTAINER 10, REMOVE_CONTAINER 11
    assert_eq!(
        r.events,
        (1 << 1) | (1 << 2) | (1 << 3) | (1 << 6) | (1 << 9) | (1 << 10)
    );
    assert_eq!(
        p.handle("RunPodSandbox", &[]).unwrap_err().code,
        CODE_UNIMPLEMENTED
    );
    assert_eq!(
        p.handle("CreateContainer", &[0xff]).unwrap_err().code,
        CODE_INVALID_ARGUMENT
    );
}

#[test]
fn reloaded_classes_replace_the_old_unless_an_option_loses_its_class() {
    let mut p = plugin(OnUnknown::Fail);
    let mut more = classes();
    more.push(Class::new("platinum", Some("cri-platinum".into())));
    p.set_classes(more).unwrap();
    let c = container("app", &[(CONTAINER_ANNOTATION, "platinum")]);
    assert_eq!(decided(&p, &pod("/kubepods/pod1", &[]), &c).0, "platinum");
    // bronze is the default and BestEffort's class: a file without it is refused
    let err = p.set_classes(classes()[..2].to_vec()).unwrap_err();
    assert!(err.to_string().contains("`bronze`"), "{err}");
    assert!(p.class("platinum").is_some());
}

const UID: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

fn monitored() -> Plugin {
    let mut p = plugin(OnUnknown::Fail);
    p.options.monitoring = true;
    p
}

fn uid_pod(uid: &str, parent: &str) -> PodSandbox {
    let mut pod = pod(parent, &[]);
    pod.uid = uid.to_owned();
    pod.labels = [("app".to_owned(), "db".to_owned())].into();
    pod
}

fn state_change(p: &mut Plugin, event: i32, pod: Option<PodSandbox>, c: Option<Container>) {
    let ev = api::StateChangeEvent {
        event,
        pod,
        container: c,
    };
    p.handle("StateChange", &ev.encode_to_vec()).unwrap();
}

#[test]
fn with_monitoring_a_started_containers_tasks_go_to_its_pods_group_removed_with_its_last_container()
{
    let mut p = monitored();
    let pod = uid_pod(UID, "/kubepods/pod1");
    let (mut a, mut b) = (container("a", &[]), container("b", &[]));
    p.create(&pod, &a).unwrap();
    p.create(&pod, &b).unwrap();
    // nothing before the containers have processes
    assert!(p.take_mon_work().is_empty());
    a.pid = 41;
    b.pid = 42;
    state_change(
        &mut p,
        api::event::POST_START_CONTAINER,
        None,
        Some(a.clone()),
    );
    state_change(
        &mut p,
        api::event::POST_START_CONTAINER,
        None,
        Some(b.clone()),
    );
    let work = p.take_mon_work();
    let places: Vec<(u32, Option<&str>, &str)> = work
        .iter()
        .map(|w| match w {
            MonWork::Place(m) => (m.pid, m.group.as_deref(), m.uid.as_str()),
            MonWork::Remove { .. } => panic!("{w:?}"),
        })
        .collect();
    assert_eq!(
        places,
        [(41, Some("cri-gold"), UID), (42, Some("cri-gold"), UID)]
    );
    // the record: the pod, its QoS class, labels and containers
    assert!(p.take_changed());
    let record = p.pods_record();
    assert_eq!(record.len(), 1);
    let r = &record[0];
    assert_eq!(
        (
            r.uid.as_str(),
            r.namespace.as_str(),
            r.name.as_str(),
            r.qos.as_deref()
        ),
        (UID, "ns", "web", Some("Guaranteed"))
    );
    assert_eq!(r.labels.get("app").map(String::as_str), Some("db"));
    assert_eq!(r.container_names(), "a,b");
    assert_eq!(r.containers[0].pid, 41);
    // the first removal keeps the group, the last removes it
    let req = |c: &Container| ContainerRequest {
        pod: None,
        container: Some(c.clone()),
    };
    p.handle("RemoveContainer", &req(&a).encode_to_vec())
        .unwrap();
    assert!(p.take_mon_work().is_empty());
    p.handle("RemoveContainer", &req(&b).encode_to_vec())
        .unwrap();
    assert_eq!(
        p.take_mon_work(),
        [MonWork::Remove {
            uid: UID.to_owned()
        }]
    );
    assert!(p.pods_record().is_empty());
    // a pod stopped or removed: its groups go too
    p.create(&pod, &a).unwrap();
    state_change(
        &mut p,
        api::event::STOP_POD_SANDBOX,
        Some(pod.clone()),
        None,
    );
    assert_eq!(p.take_mon_work().len(), 1);
    assert_eq!(
        p.pods_record().len(),
        1,
        "a stopped pod is still the node's"
    );
    state_change(&mut p, api::event::REMOVE_POD_SANDBOX, Some(pod), None);
    assert_eq!(p.take_mon_work().len(), 1);
    assert!(p.pods_record().is_empty() && p.placed_count() == 0);
}

#[test]
fn a_pod_uid_that_is_not_a_uuid_gets_no_monitor_group_and_nothing_without_monitoring() {
    for uid in ["../../x", "a/b", ".", "", "gold"] {
        let mut p = monitored();
        let pod = uid_pod(uid, "/kubepods/pod1");
        let mut c = container("a", &[]);
        p.create(&pod, &c).unwrap();
        c.pid = 7;
        state_change(
            &mut p,
            api::event::POST_START_CONTAINER,
            None,
            Some(c.clone()),
        );
        state_change(&mut p, api::event::REMOVE_POD_SANDBOX, Some(pod), None);
        assert!(p.take_mon_work().is_empty(), "{uid:?}");
    }
    let mut p = plugin(OnUnknown::Fail);
    let pod = uid_pod(UID, "/kubepods/pod1");
    let mut c = container("a", &[]);
    p.create(&pod, &c).unwrap();
    c.pid = 7;
    state_change(&mut p, api::event::POST_START_CONTAINER, None, Some(c));
    assert!(p.take_mon_work().is_empty());
    // the record is kept without monitoring too (the controller's selectors read it)
    assert_eq!(p.pods_record().len(), 1);
}

#[test]
fn a_synchronization_replaces_the_pods_and_puts_running_containers_in_their_pods_groups() {
    let mut p = monitored();
    let old = uid_pod(
        "00000000000000000000000000000001",
        "/kubepods/besteffort/pod9",
    );
    let mut gone = container("gone", &[]);
    gone.pod_sandbox_id = old.id.clone();
    p.create(&old, &gone).unwrap();
    let mut pod = uid_pod(UID, "/kubepods/burstable/pod1");
    pod.id = "pod1".into();
    let mut c = container("app", &[]);
    c.pod_sandbox_id = "pod1".into();
    c.state = 3; // CONTAINER_RUNNING
    c.pid = 99;
    p.take_mon_work();
    p.take_synced();
    p.synchronize(&[pod], &[c]);
    assert!(p.take_synced());
    assert_eq!(p.pod_uids().collect::<Vec<_>>(), [UID]);
    let work = p.take_mon_work();
    assert!(
        matches!(&work[..], [MonWork::Place(m)] if m.pid == 99 && m.group.as_deref() == Some("cri-silver")),
        "{work:?}"
    );
    assert_eq!(p.placed("id-gone"), None);
}
