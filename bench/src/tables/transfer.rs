//! Bulk transfer: 64 KiB from one task to another, copied in a request or
//! shared as a memory object (JX's alternative to copying), beside the same
//! 64 KiB through a pipe between processes and copied between threads.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::inproc;
use crate::model::{Samples, Table};
use crate::peers::{figure, figures};
use std::process::Command;

const WARDEN: &str = "Warden task, 1 worker";
const PIPES: &str = "Linux processes (pipes)";
const THREADS: &str = "Linux threads (condition variable, memcpy)";
const PIPES_PINNED: &str = "Linux processes (pipes), both on one core";
const THREADS_PINNED: &str = "Linux threads (condition variable, memcpy), both on one core";
const COPY: &str = "64 KiB by copy";
/// The memory-object kinds: the first does what the copying peers do
/// (all 64 KiB written and read every round trip); the others leave out
/// the write (the object is filled once, before the timed loop).
const MEM: [(&str, &str); 3] = [
    ("mem64k_rw", "64 KiB memory object, written and all read"),
    ("mem64k", "64 KiB memory object written once, 64 B read"),
    ("mem64k_read", "64 KiB memory object written once, all read"),
];

pub fn run(ctx: &Ctx) -> Table {
    let calls: u64 = ctx.pick(100_000, 10_000);
    let peer_calls: u64 = ctx.pick(5_000, 500);
    let mut t = Table::new(
        "transfer",
        "Moving 64 KiB to another task: round trip (µs)",
        "seed 001 (JX), memory objects vs copying portal parameters",
        &[
            (COPY, "µs"),
            (MEM[0].1, "µs"),
            (MEM[1].1, "µs"),
            (MEM[2].1, "µs"),
        ],
    );
    t.method = format!(
        "Round trips with a 64 KiB request and an empty reply. Warden: {calls} calls per sample \
         ({} for the kinds that move all 64 KiB): copied in the request; or a handle to a memory \
         object that the client writes all 64 KiB into before every call and the server reads all \
         of (the same work as the peers' copies), or that was filled once before the timed loop and \
         the server reads 64 bytes or all of. Peers: {peer_calls} round trips over a pair of \
         pipes, and between two threads copying into and out of a shared buffer, each once left to \
         the kernel's placement and once with both sides pinned to one core.",
        calls / 10 + 1
    );
    let no_mem = "no memory objects";
    let mem_columns = [MEM[0].1, MEM[1].1, MEM[2].1];
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN).runs(|s| warden(s, calls)),
            // Each pair's run takes the pinned pair's figure too.
            Contestant::peer(PIPES)
                .runs(|s| {
                    pair(
                        ctx,
                        s,
                        ("pipe_pingpong", "pipe"),
                        (PIPES, PIPES_PINNED),
                        peer_calls,
                    )
                })
                .absent(&mem_columns, no_mem),
            Contestant::peer(THREADS)
                .runs(|s| {
                    let names = ("condvar_pingpong", "condvar");
                    pair(ctx, s, names, (THREADS, THREADS_PINNED), peer_calls)
                })
                .absent(&mem_columns, no_mem),
            Contestant::peer(PIPES_PINNED).absent(&mem_columns, no_mem),
            Contestant::peer(THREADS_PINNED).absent(&mem_columns, no_mem),
        ],
    );
    m.finish(t)
}

/// Warden's row: 64 KiB by copy and by each memory-object kind.
fn warden(s: &mut Samples, calls: u64) -> Result<(), String> {
    let f = inproc::ipc(1, calls, &["copy64k", "mem64k_rw", "mem64k", "mem64k_read"])?;
    s.push(&format!("{WARDEN}/{COPY}"), figure(&f, "copy64k")? / 1e3);
    for (kind, col) in MEM {
        s.push(&format!("{WARDEN}/{col}"), figure(&f, kind)? / 1e3);
    }
    Ok(())
}

/// A native ping-pong (`program`, whose figure is `figure_name`): 64 KiB
/// round trips left to the kernel's placement for `rows.0`, then pinned
/// to one core for `rows.1`.
fn pair(
    ctx: &Ctx,
    s: &mut Samples,
    (program, figure_name): (&str, &str),
    rows: (&str, &str),
    peer_calls: u64,
) -> Result<(), String> {
    let f =
        figures(Command::new(ctx.peers.native(program)?).args([&peer_calls.to_string(), "65536"]))?;
    s.push(
        &format!("{}/{COPY}", rows.0),
        figure(&f, figure_name)? / 1e3,
    );
    let f = figures(Command::new(ctx.peers.native(program)?).args([
        &peer_calls.to_string(),
        "65536",
        "pin",
    ]))?;
    s.push(
        &format!("{}/{COPY}", rows.1),
        figure(&f, figure_name)? / 1e3,
    );
    Ok(())
}
