//! A hostile or broken runtime cannot hurt the node: frames and messages past the
//! protocol's limits are refused with an error (the connection dropped, the plugin goes
//! on), the frame reader is linear, an answer past ttrpc's 4 MiB is refused for that
//! request only, an error answer after the registration is not a refused registration.
//! The runtime's side is played by this test with the crate's own framing.

#![allow(clippy::unwrap_used)] // the helpers below are the tests' own: a failure is the test's

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use prost::Message;
use rdt_nri::api;
use rdt_nri::ttrpc::{
    self, MUX_MAX, PLUGIN_CONN, RUNTIME_CONN, Reader, Request, Response, Status, TTRPC_MAX,
    TYPE_REQUEST, TYPE_RESPONSE, encode,
};
use rdt_nri::{NriError, Registration};

type Handle = Box<dyn FnMut(&str, &[u8]) -> Result<Vec<u8>, Status> + Send>;

fn spawn(mut handle: Handle) -> (UnixStream, std::thread::JoinHandle<Result<(), NriError>>) {
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let h = std::thread::spawn(move || {
        rdt_nri::serve(theirs, &Registration::default(), |m, p| handle(m, p))
    });
    (ours, h)
}

fn registered(runtime: &mut UnixStream) -> Reader<UnixStream> {
    let mut reader = Reader::new(runtime.try_clone().unwrap());
    let m = reader.next_message().unwrap().unwrap();
    assert_eq!((m.conn, m.stream), (RUNTIME_CONN, 1));
    let ok = Response::default().encode_to_vec();
    runtime
        .write_all(&encode(RUNTIME_CONN, 1, TYPE_RESPONSE, &ok).unwrap())
        .unwrap();
    reader
}

fn request(method: &str, payload: Vec<u8>) -> Vec<u8> {
    Request {
        service: api::PLUGIN_SERVICE.into(),
        method: method.into(),
        payload,
        timeout_nano: 0,
    }
    .encode_to_vec()
}

#[test]
fn an_error_answer_after_the_registration_is_not_a_refused_registration() {
    let (mut runtime, plugin) = spawn(Box::new(|_, _| Ok(Vec::new())));
    let mut reader = registered(&mut runtime);
    // an error on another stream of the runtime's connection
    let err = Response {
        status: Some(Status {
            code: 2,
            message: "boom\nforged line".into(),
        }),
        payload: Vec::new(),
    };
    runtime
        .write_all(&encode(RUNTIME_CONN, 3, TYPE_RESPONSE, &err.encode_to_vec()).unwrap())
        .unwrap();
    // still serving
    runtime
        .write_all(
            &encode(
                PLUGIN_CONN,
                1,
                TYPE_REQUEST,
                &request("Shutdown", Vec::new()),
            )
            .unwrap(),
        )
        .unwrap();
    let m = reader.next_message().unwrap().unwrap();
    assert_eq!((m.conn, m.stream), (PLUGIN_CONN, 1));
    runtime.shutdown(std::net::Shutdown::Both).unwrap();
    plugin.join().unwrap().expect("not a refused registration");
}

#[test]
fn an_answer_past_ttrpcs_4_mib_is_refused_for_that_request_and_the_connection_goes_on() {
    let (mut runtime, plugin) = spawn(Box::new(|m, _| {
        if m == "Synchronize" {
            Ok(vec![7; TTRPC_MAX + 1])
        } else {
            Ok(vec![1, 2, 3])
        }
    }));
    let mut reader = registered(&mut runtime);
    for (stream, method) in [(1, "Synchronize"), (3, "Configure")] {
        runtime
            .write_all(
                &encode(
                    PLUGIN_CONN,
                    stream,
                    TYPE_REQUEST,
                    &request(method, Vec::new()),
                )
                .unwrap(),
            )
            .unwrap();
    }
    let m = reader.next_message().unwrap().unwrap();
    let r = Response::decode(&m.payload[..]).unwrap();
    let status = r.status.expect("an error status");
    assert_eq!(status.code, ttrpc::CODE_RESOURCE_EXHAUSTED);
    assert!(
        status.message.contains("more than ttrpc's"),
        "{}",
        status.message
    );
    let m = reader.next_message().unwrap().unwrap();
    assert_eq!(m.stream, 3);
    assert_eq!(Response::decode(&m.payload[..]).unwrap().payload, [1, 2, 3]);
    runtime.shutdown(std::net::Shutdown::Both).unwrap();
    plugin.join().unwrap().unwrap();
}

#[test]
fn frames_and_messages_at_ten_times_the_limits_are_refused_without_reading_them() {
    // a frame header announcing 10 x MUX_MAX: refused before any allocation
    let (mut runtime, plugin) = spawn(Box::new(|_, _| Ok(Vec::new())));
    let _reader = registered(&mut runtime);
    let mut f = PLUGIN_CONN.to_be_bytes().to_vec();
    f.extend_from_slice(&u32::try_from(MUX_MAX * 10).unwrap().to_be_bytes());
    runtime.write_all(&f).unwrap();
    let err = plugin.join().unwrap().unwrap_err();
    assert!(
        matches!(&err, NriError::Frame(m) if m.contains("the most is")),
        "{err}"
    );
    // a ttrpc message header announcing 10 x TTRPC_MAX
    let (mut runtime, plugin) = spawn(Box::new(|_, _| Ok(Vec::new())));
    let _reader = registered(&mut runtime);
    let mut m = u32::try_from(TTRPC_MAX * 10)
        .unwrap()
        .to_be_bytes()
        .to_vec();
    m.extend_from_slice(&[0, 0, 0, 1, 1, 0]);
    let mut f = PLUGIN_CONN.to_be_bytes().to_vec();
    f.extend_from_slice(&u32::try_from(m.len()).unwrap().to_be_bytes());
    f.extend_from_slice(&m);
    runtime.write_all(&f).unwrap();
    let err = plugin.join().unwrap().unwrap_err();
    assert!(
        matches!(&err, NriError::Frame(m) if m.contains("ttrpc message")),
        "{err}"
    );
}

/// One multiplexer frame of `bytes` holding ttrpc requests of 16-byte payloads.
fn frame_of_small_requests(bytes: usize) -> (Vec<u8>, usize) {
    let one = {
        let mut m = 16u32.to_be_bytes().to_vec();
        m.extend_from_slice(&[0, 0, 0, 1, TYPE_REQUEST, 0]);
        m.extend_from_slice(&[0xaa; 16]);
        m
    };
    let n = bytes / one.len();
    let mut payload = Vec::with_capacity(n * one.len());
    for _ in 0..n {
        payload.extend_from_slice(&one);
    }
    let mut f = PLUGIN_CONN.to_be_bytes().to_vec();
    f.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    f.extend_from_slice(&payload);
    (f, n)
}

/// The frame reader is linear: frames of 1, 2 and 4 MiB of small requests take time in
/// proportion (printed, for the report: `cargo test --release -p rdt-nri --test hostile --
/// --nocapture`); before, a 2 MiB frame took 6.7 s and a 4 MiB one did not end in 30 s.
#[test]
fn the_frame_reader_takes_time_in_proportion_to_the_frame() {
    let mut times = Vec::new();
    for mib in [1, 2, 4] {
        let (wire, n) = frame_of_small_requests(mib << 20);
        let t0 = Instant::now();
        let mut r = Reader::new(&wire[..]);
        let mut count = 0;
        while let Some(m) = r.next_message().unwrap() {
            assert_eq!(m.payload.len(), 16);
            count += 1;
        }
        let took = t0.elapsed();
        assert_eq!(count, n);
        eprintln!("frame of {mib} MiB, {n} requests: {took:?}");
        times.push(took);
    }
    // generous: a quadratic reader took minutes here
    assert!(times[2] < Duration::from_secs(20), "{times:?}");
}

/// The same through `serve` and a socket: every request of a 4 MiB frame is answered.
#[test]
fn a_4_mib_frame_of_small_requests_is_answered_whole() {
    let (mut runtime, plugin) = spawn(Box::new(|_, _| {
        Err(Status {
            code: ttrpc::CODE_UNIMPLEMENTED,
            message: String::new(),
        })
    }));
    let mut reader = registered(&mut runtime);
    let (wire, n) = frame_of_small_requests(4 << 20);
    let writer = {
        let mut w = runtime.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&wire).unwrap())
    };
    let t0 = Instant::now();
    for _ in 0..n {
        let m = reader.next_message().unwrap().unwrap();
        assert_eq!(m.kind, TYPE_RESPONSE);
    }
    eprintln!(
        "serve: {n} requests of one 4 MiB frame answered in {:?}",
        t0.elapsed()
    );
    writer.join().unwrap();
    runtime.shutdown(std::net::Shutdown::Both).unwrap();
    plugin.join().unwrap().unwrap();
}
