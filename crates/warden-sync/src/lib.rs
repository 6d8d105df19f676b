//! Warden's lock-free protocols, each small enough to model-check:
//!
//! - [`state`]: a task's lifecycle word — who owns its future at any
//!   moment (a worker, its wakers, whoever finishes it);
//! - [`fifo`]: the fair lock a passive service's callers queue on.
//!
//! Both name their atomics, locks and cells through one facade
//! (`loom` inside this crate): `std`'s normally, loom's when the crate
//! is built with `RUSTFLAGS="--cfg loom"`, as the `warden-loom` crate's
//! models build it. This crate depends on nothing else, so the flag,
//! which other crates (tokio) read too, reaches only it.

mod loom;

pub mod fifo;
pub mod state;
