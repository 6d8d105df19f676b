//! The network: TCP sockets as kernel objects, the grants that bound what
//! a task may reach, and the fair sharing of outgoing bandwidth.
//!
//! - [`grant`]: address grants (`listen`, `connect`), checked before any
//!   system call.
//! - [`own`]: Warden's own endpoints (control API, web servers, broker),
//!   which only a grant naming them exactly reaches.
//! - [`socket`]: listeners and connections on the runtime's reactor.
//! - [`fair`]: hierarchical WF2Q+ over groups and tasks, with caps — pure
//!   policy with an injected clock.
//! - [`link`]: the mechanism that paces sends by that policy.
//!
//! Bytes a task receives are counted and charged to it, and bounded by
//! its `receive_limit` (a [`fair::Bucket`]); the host functions in
//! `crate::host` apply all of this.

pub use warden_policy::{fair, grant};
pub mod link;
pub mod own;
pub mod socket;

pub use grant::Grant;
