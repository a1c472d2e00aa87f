//! `serve` over a socket pair, the runtime's side played by this test with the crate's own
//! framing: the registration comes first on the runtime's connection, requests on the
//! plugin's connection are answered on their stream, a refused registration is an error
//! naming the runtime's message. (Against NRI's real runtime side:
//! crates/rdt-agent/tests/nri.rs.)

use std::io::Write;
use std::os::unix::net::UnixStream;

use prost::Message;
use rdt_nri::api::{self, Container, ContainerRequest, CreateContainerResponse, PodSandbox};
use rdt_nri::ttrpc::{
    self, PLUGIN_CONN, RUNTIME_CONN, Reader, Request, Response, Status, TYPE_REQUEST,
    TYPE_RESPONSE, encode,
};
use rdt_nri::{Class, NriError, Options, Plugin, Registration};

fn plugin() -> Plugin {
    let classes = vec![Class::new("gold", Some("cri-gold".into()))];
    let options = Options {
        default: Some("gold".into()),
        ..Options::default()
    };
    Plugin::new(classes, options).expect("options")
}

fn spawn(mut plugin: Plugin) -> (UnixStream, std::thread::JoinHandle<Result<(), NriError>>) {
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let handle = std::thread::spawn(move || {
        rdt_nri::serve(theirs, &Registration::default(), |m, p| plugin.handle(m, p))
    });
    (ours, handle)
}

fn request(service: &str, method: &str, payload: Vec<u8>) -> Vec<u8> {
    Request {
        service: service.into(),
        method: method.into(),
        payload,
        timeout_nano: 0,
    }
    .encode_to_vec()
}

#[test]
fn the_plugin_registers_then_answers_each_request_on_its_stream() {
    let (mut runtime, plugin) = spawn(plugin());
    let mut reader = Reader::new(runtime.try_clone().unwrap());
    let m = reader.next_message().unwrap().unwrap();
    assert_eq!((m.conn, m.stream, m.kind), (RUNTIME_CONN, 1, TYPE_REQUEST));
    let req = Request::decode(&m.payload[..]).unwrap();
    assert_eq!(
        (&req.service[..], &req.method[..]),
        (api::RUNTIME_SERVICE, "RegisterPlugin")
    );
    let reg = api::RegisterPluginRequest::decode(&req.payload[..]).unwrap();
    assert_eq!((&reg.plugin_name[..], &reg.plugin_idx[..]), ("rdt", "10"));
    let ok = Response::default().encode_to_vec();
    runtime
        .write_all(&encode(RUNTIME_CONN, 1, TYPE_RESPONSE, &ok).unwrap())
        .unwrap();

    let create = ContainerRequest {
        pod: Some(PodSandbox::default()),
        container: Some(Container {
            id: "c1".into(),
            ..Container::default()
        }),
    };
    let bytes = request(
        api::PLUGIN_SERVICE,
        "CreateContainer",
        create.encode_to_vec(),
    );
    runtime
        .write_all(&encode(PLUGIN_CONN, 7, TYPE_REQUEST, &bytes).unwrap())
        .unwrap();
    let other = request("some.Other", "CreateContainer", Vec::new());
    runtime
        .write_all(&encode(PLUGIN_CONN, 9, TYPE_REQUEST, &other).unwrap())
        .unwrap();

    let m = reader.next_message().unwrap().unwrap();
    assert_eq!((m.conn, m.stream, m.kind), (PLUGIN_CONN, 7, TYPE_RESPONSE));
    let r = Response::decode(&m.payload[..]).unwrap();
    assert_eq!(r.status, None);
    let adjust = CreateContainerResponse::decode(&r.payload[..]).unwrap();
    let rdt = adjust.adjust.unwrap().linux.unwrap().rdt.unwrap();
    assert_eq!(rdt.clos_id.unwrap().value, "cri-gold");
    let m = reader.next_message().unwrap().unwrap();
    assert_eq!(m.stream, 9);
    let status = Response::decode(&m.payload[..]).unwrap().status.unwrap();
    assert_eq!(status.code, ttrpc::CODE_UNIMPLEMENTED);
    assert!(status.message.contains("some.Other"), "{}", status.message);

    runtime.shutdown(std::net::Shutdown::Both).unwrap();
    plugin.join().unwrap().unwrap();
}

#[test]
fn a_refused_registration_ends_the_plugin_with_the_runtimes_message() {
    let (mut runtime, plugin) = spawn(plugin());
    let mut reader = Reader::new(runtime.try_clone().unwrap());
    reader.next_message().unwrap().unwrap();
    let refused = Response {
        status: Some(Status {
            code: 3,
            message: "invalid plugin index".into(),
        }),
        payload: Vec::new(),
    };
    let bytes = encode(RUNTIME_CONN, 1, TYPE_RESPONSE, &refused.encode_to_vec()).unwrap();
    runtime.write_all(&bytes).unwrap();
    let err = plugin.join().unwrap().unwrap_err();
    assert!(
        matches!(&err, NriError::Registration { code: 3, message } if message == "invalid plugin index"),
        "{err}"
    );
}
