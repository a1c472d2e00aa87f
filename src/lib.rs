//! `rdt`: Intel RDT and AMD PQoS from Rust.
pub use rdt_core::*;
