//! Paths of the guest programs compiled for Warden's tests and benchmarks.
//!
//! Each constant is the absolute path of one module built from
//! `guests/<name>.wat` or `guests/<name>.c` by this crate's build script.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));
