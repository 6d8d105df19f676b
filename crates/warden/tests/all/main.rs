//! Warden's integration tests: one binary, one file per feature. Every test
//! runs real guests (compiled from `crates/test-guests/guests`) in a real
//! runtime or through the real `warden` binary.

mod blocking;
mod cli;
mod errors;
mod hello;
mod isolation;
mod kill;
mod limits_cpu;
mod limits_memory;
mod many;
mod reclaim;
mod traps;
mod util;
