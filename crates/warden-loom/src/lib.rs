//! Model checks of Warden's lock-free protocols — the task lifecycle word
//! (`warden_sync::state`) and the fair lock of passive services
//! (`warden_sync::fifo`) — under every interleaving loom can find.
//!
//! `warden-sync` names its atomics and locks through one facade that is
//! loom's when built with `--cfg loom`; that crate depends on nothing
//! else, so the flag, which tokio reads too, reaches no other crate. Run
//! with `RUSTFLAGS="--cfg loom" cargo test -p warden-loom --release`
//! (`scripts/loom` does); without the flag this crate is empty.
#![cfg(loom)]

pub use warden_sync::{fifo, state};

#[cfg(test)]
mod models;

#[cfg(test)]
mod fifo_models;
