//! A process of three threads for the e2e tests of task association (`pqos -a pid:`, a
//! class that lists tasks): it starts two threads, prints `threaded child ready` once all
//! three run, and sleeps 30 s (the tests kill it sooner). Built only with the `test-helpers`
//! feature (`cargo test --all-features`), never installed.

use std::sync::{Arc, Barrier};
use std::time::Duration;

fn main() {
    let started = Arc::new(Barrier::new(3));
    for _ in 0..2 {
        let started = Arc::clone(&started);
        std::thread::spawn(move || {
            started.wait();
            std::thread::sleep(Duration::from_secs(30));
        });
    }
    started.wait();
    println!("threaded child ready");
    std::thread::sleep(Duration::from_secs(30));
}
