//! Warden's integration tests: one binary, one file per feature. Every test
//! runs real guests (compiled from `crates/test-guests/guests`) in a real
//! runtime or through the real `warden` binary.

mod blocking;
mod cli;
mod cli_new;
mod cli_operators;
mod cli_program;
mod cli_tools;
mod cluster;
mod cluster_security;
mod control;
mod control_access;
mod dashboard;
mod docs;
mod errors;
mod examples;
mod fuzz;
mod guarantees;
mod hello;
mod hostile;
mod http;
mod inheritance_limits;
mod ipc_abi;
mod ipc_calls;
mod ipc_memory;
mod ipc_stress;
mod ipc_termination;
mod isolation;
mod java;
mod kill;
mod limits_cpu;
mod limits_memory;
mod manifest_keys;
mod many;
mod nested;
mod net;
mod net_bandwidth;
mod net_operators;
mod passive;
mod reclaim;
mod runtime_run;
mod sched;
mod traps;
mod tutorial;
mod util;
