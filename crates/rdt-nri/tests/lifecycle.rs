//! `Lifecycle::run` beside a runtime played by this test (a listening socket and the
//! crate's framing): started before the socket exists it waits, registers when it appears,
//! connects again after the runtime goes away (its socket removed and made again, as a
//! restarting containerd does), reports each state, and stops within 2 s of the stop flag
//! whatever it waits for.

#![allow(clippy::unwrap_used)] // the helpers below are the tests' own: a failure is the test's

use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;
use rdt_nri::ttrpc::{RUNTIME_CONN, Reader, Response, Status, TYPE_RESPONSE, encode};
use rdt_nri::{Lifecycle, NriError, Registration, Session, State};

#[derive(Default)]
struct Recorder {
    states: Arc<Mutex<Vec<State>>>,
    connections: usize,
}

impl Session for Recorder {
    fn handle(&mut self, _: &str, _: &[u8]) -> Result<Vec<u8>, Status> {
        Ok(Vec::new())
    }
    fn connected(&mut self) {
        self.connections += 1;
    }
    fn state_changed(&mut self, state: State) {
        let mut s = self.states.lock().unwrap();
        if s.last() != Some(&state) {
            s.push(state);
        }
    }
}

/// Accepts one plugin and answers its registration with `status` (None: accepted).
fn accept_registration(listener: &UnixListener, status: Option<Status>) -> UnixStream {
    let (mut s, _) = listener.accept().unwrap();
    let mut r = Reader::new(s.try_clone().unwrap());
    let m = r.next_message().unwrap().unwrap();
    assert_eq!((m.conn, m.stream), (RUNTIME_CONN, 1));
    let answer = Response {
        status,
        payload: Vec::new(),
    };
    s.write_all(&encode(RUNTIME_CONN, 1, TYPE_RESPONSE, &answer.encode_to_vec()).unwrap())
        .unwrap();
    s
}

fn wait_for(states: &Mutex<Vec<State>>, n: usize, what: &str) {
    let end = Instant::now() + Duration::from_secs(10);
    while states.lock().unwrap().len() < n {
        assert!(Instant::now() < end, "{what}: {:?}", states.lock().unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn bind(sock: &Path) -> UnixListener {
    let _ = std::fs::remove_file(sock);
    UnixListener::bind(sock).unwrap()
}

#[test]
fn the_plugin_waits_for_the_runtime_comes_back_after_each_restart_and_stops_on_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nri.sock");
    let stop = Arc::new(AtomicBool::new(false));
    let states = Arc::new(Mutex::new(Vec::new()));
    let plugin = {
        let (sock, stop, states) = (sock.clone(), Arc::clone(&stop), Arc::clone(&states));
        std::thread::spawn(move || {
            let mut session = Recorder {
                states,
                connections: 0,
            };
            let r = Lifecycle::new(sock, Registration::default()).run(&stop, &mut session);
            (r, session.connections)
        })
    };
    // the runtime starts late
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(*states.lock().unwrap(), [State::Connecting]);
    let listener = bind(&sock);
    let conn = accept_registration(&listener, None);
    wait_for(&states, 3, "first registration");
    // five restarts: the connection closes, the socket is made again a little later
    let mut reconnects = Vec::new();
    let mut conn = Some(conn);
    let mut listener = Some(listener);
    for i in 0..5 {
        drop(conn.take());
        drop(listener.take());
        std::thread::sleep(Duration::from_millis(300));
        let l = bind(&sock);
        let t0 = Instant::now();
        conn = Some(accept_registration(&l, None));
        wait_for(&states, 3 + 3 * (i + 1), "registration after a restart");
        reconnects.push(t0.elapsed());
        listener = Some(l);
    }
    eprintln!("reconnect after the socket came back (5 restarts): {reconnects:?}");
    // 300 ms away: the back-off (at most 2 s) brings it back well within 5 s
    assert!(
        reconnects.iter().all(|d| *d < Duration::from_secs(3)),
        "{reconnects:?}"
    );
    // connected and quiet: the flag stops it within 2 s
    let t0 = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let (r, connections) = plugin.join().unwrap();
    let took = t0.elapsed();
    eprintln!("stopped {took:?} after the flag");
    assert!(took < Duration::from_secs(2), "{took:?}");
    r.unwrap();
    assert_eq!(connections, 6);
    let s = states.lock().unwrap();
    assert_eq!(
        s[..4],
        [
            State::Connecting,
            State::Registering,
            State::Registered,
            State::Connecting
        ]
    );
    assert_eq!(s.last(), Some(&State::Stopped));
    drop(conn);
}

#[test]
fn waiting_for_a_socket_that_never_comes_stops_on_the_flag_within_2_s() {
    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let plugin = {
        let (sock, stop) = (dir.path().join("none.sock"), Arc::clone(&stop));
        std::thread::spawn(move || {
            Lifecycle::new(sock, Registration::default()).run(&stop, &mut Recorder::default())
        })
    };
    std::thread::sleep(Duration::from_secs(3)); // the back-off at its 2 s cap
    let t0 = Instant::now();
    stop.store(true, Ordering::Relaxed);
    plugin.join().unwrap().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}

#[test]
fn registrations_refused_in_a_row_end_the_run_with_the_runtimes_message() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nri.sock");
    let listener = bind(&sock);
    let stop = Arc::new(AtomicBool::new(false));
    let plugin = {
        let (sock, stop) = (sock.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut l = Lifecycle::new(sock, Registration::default());
            l.max_refusals = 3;
            l.run(&stop, &mut Recorder::default())
        })
    };
    for _ in 0..3 {
        let refused = Status {
            code: 3,
            message: "plugin index 10 taken".into(),
        };
        let _c = accept_registration(&listener, Some(refused));
    }
    let err = plugin.join().unwrap().unwrap_err();
    assert!(
        matches!(&err, NriError::Registration { code: 3, message } if message == "plugin index 10 taken"),
        "{err}"
    );
}
