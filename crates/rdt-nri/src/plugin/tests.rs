use super::*;
use crate::api::{LinuxContainer, LinuxPodSandbox, SynchronizeRequest, SynchronizeResponse};

fn classes() -> Vec<Class> {
    ["gold", "silver", "bronze"]
        .iter()
        .map(|n| Class {
            name: (*n).to_owned(),
            group: Some(format!("cri-{n}")),
        })
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
    assert_eq!(p.placed().get("id-app").map(String::as_str), Some("silver"));
    let c = container("root", &[(CONTAINER_ANNOTATION, "system/default")]);
    let r = p.create(&pod("/kubepods/pod1", &[]), &c).unwrap();
    assert_eq!(r.adjust, None);
    p.options.monitoring = true;
    let c = container("mon", &[]);
    let r = p.create(&pod("/kubepods/pod1", &[]), &c).unwrap();
    let rdt = r.adjust.unwrap().linux.unwrap().rdt.unwrap();
    assert_eq!(rdt.enable_monitoring, Some(OptionalBool { value: true }));
    let removed = ContainerRequest {
        pod: None,
        container: Some(c),
    };
    p.handle("RemoveContainer", &removed.encode_to_vec())
        .unwrap();
    assert!(!p.placed().contains_key("id-mon"));
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
fn synchronize_leaves_containers_in_their_class_and_moves_the_others_split_or_not() {
    let mut p = plugin(OnUnknown::Fail);
    let in_class = |name: &str, clos: &str| Container {
        linux: Some(LinuxContainer {
            rdt: Some(LinuxRdt {
                clos_id: Some(OptionalString { value: clos.into() }),
                ..LinuxRdt::default()
            }),
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
    let last = SynchronizeRequest {
        pods: Vec::new(),
        containers: vec![container("c", &[])],
        more: false,
    };
    let r =
        SynchronizeResponse::decode(&p.handle("Synchronize", &last.encode_to_vec()).unwrap()[..])
            .unwrap();
    let moved: Vec<(&str, &str)> = r
        .update
        .iter()
        .map(|u| {
            let class = u.linux.as_ref().unwrap().resources.as_ref().unwrap();
            (
                u.container_id.as_str(),
                class.rdt_class.as_ref().unwrap().value.as_str(),
            )
        })
        .collect();
    assert_eq!(moved, [("id-b", "silver"), ("id-c", "silver")]);
    assert_eq!(p.placed().len(), 3);
}

#[test]
fn configure_subscribes_to_create_stop_and_remove_and_others_are_unimplemented() {
    let mut p = plugin(OnUnknown::Fail);
    let r = p
        .handle(
            "Configure",
            &api::ConfigureRequest::default().encode_to_vec(),
        )
        .unwrap();
    let r = api::ConfigureResponse::decode(&r[..]).unwrap();
    assert_eq!(r.events, (1 << 3) | (1 << 9) | (1 << 10));
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
    more.push(Class {
        name: "platinum".into(),
        group: Some("cri-platinum".into()),
    });
    p.set_classes(more).unwrap();
    let c = container("app", &[(CONTAINER_ANNOTATION, "platinum")]);
    assert_eq!(decided(&p, &pod("/kubepods/pod1", &[]), &c).0, "platinum");
    // bronze is the default and BestEffort's class: a file without it is refused
    let err = p.set_classes(classes()[..2].to_vec()).unwrap_err();
    assert!(err.to_string().contains("`bronze`"), "{err}");
    assert!(p.class("platinum").is_some());
}
