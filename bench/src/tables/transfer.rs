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
const COPY: &str = "64 KiB by copy";
const MEM: [(&str, &str); 2] = [
    ("mem64k", "64 KiB memory object, 64 B read"),
    ("mem64k_read", "64 KiB memory object, all read"),
];

pub fn run(ctx: &Ctx) -> Table {
    let calls: u64 = ctx.pick(100_000, 10_000);
    let peer_calls: u64 = ctx.pick(5_000, 500);
    let mut t = Table::new(
        "transfer",
        "Moving 64 KiB to another task: round trip (µs)",
        "seed 001 (JX), memory objects vs copying portal parameters",
        &[(COPY, "µs"), (MEM[0].1, "µs"), (MEM[1].1, "µs")],
    );
    t.method = format!(
        "Round trips with a 64 KiB request and an empty reply. Warden: {calls} calls per sample \
         ({} for the kinds that move all 64 KiB): copied in the request, or a handle to a memory \
         object the server reads 64 bytes or all of. Peers: {peer_calls} round trips over a pair of \
         pipes, and between two threads copying into and out of a shared buffer.",
        calls / 10 + 1
    );
    let (samples, errors) = interleave(
        ctx.rounds,
        vec![
            contestant(WARDEN, |s| {
                let f = inproc::ipc(1, calls, &["copy64k", "mem64k", "mem64k_read"])?;
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
                Ok(())
            }),
            contestant(THREADS, |s| {
                let f = figures(
                    Command::new(ctx.peers.native("condvar_pingpong")?)
                        .args([&peer_calls.to_string(), "65536"]),
                )?;
                s.push(&format!("{THREADS}/{COPY}"), figure(&f, "condvar")? / 1e3);
                Ok(())
            }),
        ],
    );
    t.row_from(WARDEN, Kind::Warden, &samples, &format!("{WARDEN}/"));
    t.row_from(PIPES, Kind::Peer, &samples, &format!("{PIPES}/"));
    t.row_from(THREADS, Kind::Peer, &samples, &format!("{THREADS}/"));
    finish(t, &errors)
}
