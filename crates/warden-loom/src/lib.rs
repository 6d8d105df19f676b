//! Model checks of the task lifecycle word (`crates/warden/src/task/state.rs`)
//! and the fair lock of passive services (`crates/warden/src/fifo.rs`)
//! under every interleaving loom can find.
//!
//! Those modules are compiled here on their own, against loom's atomics,
//! because `--cfg loom` cannot be given to Warden's whole dependency tree
//! (tokio, for one, reads the same flag). Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p warden-loom --release`
//! (`scripts/loom` does); without the flag this crate is empty.
#![cfg(loom)]

#[path = "../../warden/src/task/state.rs"]
#[allow(dead_code)]
pub mod state;

#[path = "../../warden/src/fifo.rs"]
pub mod fifo;

#[cfg(test)]
mod models;

#[cfg(test)]
mod fifo_models;
