//! Wire compatibility with NRI's Go types: `golden/*.bin` are encoded by NRI v0.12.5's and
//! ttrpc v1.2.7's own Go code (golden/README.md says how). What the runtime sends decodes
//! into the plugin's messages (the fields it does not model skipped); what the plugin sends
//! encodes to the same bytes as Go's.

use prost::Message;
use rdt_nri::api::{
    self, ConfigureResponse, ContainerAdjustment, ContainerRequest, ContainerUpdate,
    CreateContainerResponse, LinuxContainerAdjustment, LinuxContainerUpdate, LinuxRdt,
    LinuxResources, OptionalBool, OptionalString, RegisterPluginRequest, SynchronizeResponse,
};
use rdt_nri::ttrpc::Request;

fn golden(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/golden/{name}.bin", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[allow(clippy::unnecessary_wraps)] // the fields are optional messages
fn s(v: &str) -> Option<OptionalString> {
    Some(OptionalString { value: v.into() })
}

#[test]
fn the_runtimes_create_request_decodes_skipping_what_the_plugin_does_not_model() {
    let req = ContainerRequest::decode(&golden("create_request")[..]).unwrap();
    let pod = req.pod.unwrap();
    assert_eq!(
        (&pod.id[..], &pod.name[..], &pod.uid[..], &pod.namespace[..]),
        ("sandbox-1", "web-0", "0a1b-2c3d", "shop")
    );
    assert_eq!(pod.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        pod.annotations
            .get(rdt_nri::POD_ANNOTATION)
            .map(String::as_str),
        Some("gold")
    );
    assert_eq!(pod.annotations.len(), 2);
    let linux = pod.linux.unwrap();
    assert_eq!(linux.cgroup_parent, "/kubepods/burstable/pod0a1b-2c3d");
    assert_eq!(
        linux.cgroups_path,
        "/kubepods/burstable/pod0a1b-2c3d/sandbox-1"
    );
    let c = req.container.unwrap();
    assert_eq!(
        (&c.id[..], &c.pod_sandbox_id[..], &c.name[..], c.state),
        ("ctr-1", "sandbox-1", "app", 1)
    );
    assert_eq!(
        c.annotations
            .get(rdt_nri::CONTAINER_ANNOTATION)
            .map(String::as_str),
        Some("silver")
    );
    let linux = c.linux.unwrap();
    assert_eq!(linux.cgroups_path, "kubepods-burstable.slice:cri:ctr-1");
    assert_eq!(linux.resources.unwrap().rdt_class, s("bronze"));
    assert_eq!(
        linux.rdt,
        Some(LinuxRdt {
            clos_id: s("cri-bronze"),
            schemata: None,
            enable_monitoring: Some(OptionalBool { value: true }),
            remove: false,
        })
    );
}

#[test]
fn what_the_plugin_sends_encodes_as_nris_go_types_do() {
    let adjust = CreateContainerResponse {
        adjust: Some(ContainerAdjustment {
            linux: Some(LinuxContainerAdjustment {
                rdt: Some(LinuxRdt {
                    clos_id: s("cri-gold"),
                    schemata: None,
                    enable_monitoring: Some(OptionalBool { value: true }),
                    remove: false,
                }),
            }),
        }),
        update: Vec::new(),
    };
    assert_eq!(adjust.encode_to_vec(), golden("create_response"));
    let sync = SynchronizeResponse {
        update: vec![ContainerUpdate {
            container_id: "ctr-2".into(),
            linux: Some(LinuxContainerUpdate {
                resources: Some(LinuxResources {
                    rdt_class: s("silver"),
                }),
            }),
            ignore_failure: true,
        }],
        more: false,
    };
    assert_eq!(sync.encode_to_vec(), golden("synchronize_response"));
    let configure = ConfigureResponse {
        events: api::event_mask(&[
            api::event::CREATE_CONTAINER,
            api::event::STOP_CONTAINER,
            api::event::REMOVE_CONTAINER,
        ]),
    };
    assert_eq!(configure.encode_to_vec(), golden("configure_response"));
    let register = RegisterPluginRequest {
        plugin_name: "rdt".into(),
        plugin_idx: "10".into(),
        nri_version: "v0.12.5".into(),
    };
    assert_eq!(register.encode_to_vec(), golden("register_request"));
    let envelope = Request {
        service: api::RUNTIME_SERVICE.into(),
        method: "RegisterPlugin".into(),
        payload: vec![1, 2, 3],
        timeout_nano: 5_000_000_000,
    };
    assert_eq!(envelope.encode_to_vec(), golden("ttrpc_request"));
    assert_eq!(
        Request::decode(&golden("ttrpc_request")[..]).unwrap(),
        envelope
    );
}
