//! Warden's policy layer: plain data structures that decide, driven by
//! explicit events and a clock passed in, with no Wasmtime, no threads
//! and no runtime in them, so that each is tested in microseconds.
//!
//! - [`sched`]: which runnable task runs next — round-robin, fixed
//!   priority, stride and lottery, composed as a tree of groups, with
//!   caps (GVM's CPU inheritance scheduling, JX's two-level scheduling);
//! - [`fair`]: hierarchical WF2Q+ over the outgoing link, with caps, and
//!   the token buckets of receive limits;
//! - [`grant`]: the addresses a task's grants cover;
//! - [`units`]: sizes, durations and rates as people write them;
//! - [`clock`]: the clocks policies are fed from (monotonic, thread CPU,
//!   the cheap tick counter);
//! - [`idmap`]: maps keyed by small integer ids;
//! - [`spelling`]: which known word a misspelt one meant;
//! - [`supervise`]: what a supervisor does when a member ends (OTP's
//!   restart policies, strategies and intensity).
//!
//! The `warden` crate builds its mechanism on these: the executor asks
//! [`sched::RunQueue`] who runs next, the link asks [`fair::FairTree`]
//! whose bytes go next.
//!
//! ```
//! use warden_policy::sched::{PolicyKind, RunQueue, TaskSched, Tree};
//!
//! let mut queue = Tree::new(PolicyKind::RoundRobin);
//! queue.add(1, &TaskSched::default());
//! queue.add(2, &TaskSched::default());
//! queue.push(1);
//! queue.push(2);
//! assert_eq!(queue.pop(0), Some(1));
//! assert_eq!(queue.pop(0), Some(2));
//! ```

pub mod clock;
pub mod fair;
pub mod grant;
pub mod idmap;
pub mod sched;
pub mod spelling;
pub mod supervise;
pub mod units;
