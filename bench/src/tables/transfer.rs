//! Bulk transfer: 64 KiB from one task to another, copied in a request or
//! shared as a memory object (JX's alternative to copying), beside the same
//! 64 KiB through a pipe between processes and copied between threads.

use super::finish;
use crate::harness::{contestant, interleave, Ctx};
use crate::inproc;
use crate::model::{Kind, Table};
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
    let (samples, errors) = interleave(
        ctx.rounds,
        vec![
            contestant(WARDEN, |s| {
                let f = inproc::ipc(1, calls, &["copy64k", "mem64k_rw", "mem64k", "mem64k_read"])?;
                s.push(&format!("{WARDEN}/{COPY}"), figure(&f, "copy64k")? / 1e3);
                for (kind, col) in MEM {
                    s.push(&format!("{WARDEN}/{col}"), figure(&f, kind)? / 1e3);
                }
                Ok(())
            }),
            contestant(PIPES, |s| {
                let f = figures(
                    Command::new(ctx.peers.native("pipe_pingpong")?)
                        .args([&peer_calls.to_string(), "65536"]),
                )?;
                s.push(&format!("{PIPES}/{COPY}"), figure(&f, "pipe")? / 1e3);
                let f = figures(Command::new(ctx.peers.native("pipe_pingpong")?).args([
                    &peer_calls.to_string(),
                    "65536",
                    "pin",
                ]))?;
                s.push(&format!("{PIPES_PINNED}/{COPY}"), figure(&f, "pipe")? / 1e3);
                Ok(())
            }),
            contestant(THREADS, |s| {
                let f = figures(
                    Command::new(ctx.peers.native("condvar_pingpong")?)
                        .args([&peer_calls.to_string(), "65536"]),
                )?;
                s.push(&format!("{THREADS}/{COPY}"), figure(&f, "condvar")? / 1e3);
                let f = figures(Command::new(ctx.peers.native("condvar_pingpong")?).args([
                    &peer_calls.to_string(),
                    "65536",
                    "pin",
                ]))?;
                s.push(
                    &format!("{THREADS_PINNED}/{COPY}"),
                    figure(&f, "condvar")? / 1e3,
                );
                Ok(())
            }),
        ],
    );
    t.row_from(WARDEN, Kind::Warden, &samples, &format!("{WARDEN}/"));
    t.row_from(PIPES, Kind::Peer, &samples, &format!("{PIPES}/"));
    t.row_from(THREADS, Kind::Peer, &samples, &format!("{THREADS}/"));
    t.row_from(
        PIPES_PINNED,
        Kind::Peer,
        &samples,
        &format!("{PIPES_PINNED}/"),
    );
    t.row_from(
        THREADS_PINNED,
        Kind::Peer,
        &samples,
        &format!("{THREADS_PINNED}/"),
    );
    for peer in [PIPES, THREADS, PIPES_PINNED, THREADS_PINNED] {
        t.absent(peer, &[MEM[0].1, MEM[1].1, MEM[2].1], "no memory objects");
    }
    finish(t, &errors)
}
