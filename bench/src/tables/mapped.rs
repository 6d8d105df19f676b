//! Zero-copy sharing by mapping (seed 001 JX's memory objects, seed 004
//! Luna's remote pointers): moving 16 MiB to another task costs what
//! moving 64 KiB does, and a revoke's cost with 1, 10 and 100 tasks
//! mapping the object.
//!
//! The client fills a memory object through its own writable mapping; the
//! server maps a read-only view once; each round trip then reads 64 bytes
//! of the object in the server with plain loads. Nothing is copied, so
//! the round trip should not depend on the object's size, and should be
//! close to the null call measured beside it. The revoke is timed in the
//! owner from the call to its return, which is when every child's mapping
//! is gone.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::inproc::{self, quiet};
use crate::model::{Samples, Table};
use crate::peers::figure;
use warden::TaskSpec;
use warden_test_guests as guests;

const ROUND_TRIP: &str = "Warden: mapped, round trip (µs)";
const NULL: &str = "Warden: null portal call (µs)";
const REVOKE: &str = "Warden: revoke, every mapping gone (µs)";
const SIZES: [(&str, &str); 3] = [
    ("map64k", "64 KiB"),
    ("map1m", "1 MiB"),
    ("map16m", "16 MiB"),
];
const THREADS: &str = "Two threads, 64 B through a shared buffer (no isolation; µs)";
const MAPPERS: [(&str, &str); 3] = [
    ("revoke1", "1 mapping"),
    ("revoke10", "10 mappings"),
    ("revoke100", "100 mappings"),
];

pub fn run(ctx: &Ctx) -> Table {
    let calls: u64 = ctx.pick(100_000, 10_000);
    let revokes: u32 = ctx.pick(21, 5);
    let columns: Vec<(&str, &str)> = SIZES
        .iter()
        .chain(MAPPERS.iter())
        .map(|(_, c)| (*c, "µs"))
        .collect();
    let mut t = Table::new(
        "mapped",
        "Sharing by mapping: moving data and revoking it (µs)",
        "seeds 001 (JX) and 004 (Luna): memory objects and revocable remote access",
        &columns,
    );
    t.method = format!(
        "Round trips: {calls} calls per size, each reading 64 bytes of the object in the server \
         through its read-only mapping (made once, before the timed loop); the client filled \
         the object through its own writable mapping. The null call: {calls} empty round trips \
         between the same two tasks, its figure in every size column. Revoke: the owner spawns \
         1, 10 or 100 children, each mapping a read-only view of a 1 MiB object and waiting in \
         a call to the owner; the time from warden_mem_revoke's call to its return (every \
         mapping sealed), median of {revokes}."
    );
    let sizes = SIZES.map(|(_, c)| c);
    let mappers = MAPPERS.map(|(_, c)| c);
    let not_revoked = "round trips only";
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(ROUND_TRIP)
                .runs(|s| round_trips(s, calls))
                .absent(&mappers, not_revoked),
            Contestant::warden(NULL).absent(&mappers, not_revoked),
            Contestant::warden(REVOKE)
                .runs(|s| revokes_of(s, revokes))
                .absent(&sizes, "revocation only"),
            Contestant::peer(THREADS)
                .runs(|s| threads(ctx, s, calls))
                .absent(&mappers, "threads share everything: nothing to revoke"),
        ],
    );
    // Luna's permit revoke, 900 cycles at 800 MHz (seed 004, Figure 2).
    t.paper(
        "Luna: revoke a permit (paper, PIII 800 MHz; µs)",
        &[None, None, None, Some(900.0 / 800.0), None, None],
    );
    t.notes.push(
        "Luna (seed 004, Figure 2) revokes a permit in about 900 cycles on one CPU; a Warden \
         revoke seals each mapping with one system call and waits for none of the mapping tasks."
            .into(),
    );
    m.finish(t)
}

fn round_trips(s: &mut Samples, calls: u64) -> Result<(), String> {
    let rt = inproc::runtime(1, 16);
    let mut server = quiet("server", guests::MAP_BENCH);
    server.args = vec!["server".into()];
    server.ipc.provides = vec!["mapbench".into()];
    server.limits.memory_limit = Some(64 << 20);
    let id = rt.spawn(&server).map_err(|e| e.to_string())?;
    let mut client = TaskSpec::new("client", guests::MAP_BENCH);
    client.args = vec!["client".into(), calls.to_string()];
    client.ipc.uses = vec!["mapbench".into()];
    client.limits.memory_limit = Some(64 << 20);
    let f = inproc::guest_figures(&rt, client);
    rt.kill(id, "benchmark over").ok();
    let f = f?;
    let null = figure(&f, "null")? / 1e3;
    for (kind, col) in SIZES {
        s.push(&format!("{ROUND_TRIP}/{col}"), figure(&f, kind)? / 1e3);
        s.push(&format!("{NULL}/{col}"), null);
    }
    Ok(())
}

/// The floor without isolation: two threads of one process passing 64
/// bytes through a shared buffer, one round trip each (the peer of the
/// transfer table, with 64 B).
fn threads(ctx: &Ctx, s: &mut Samples, calls: u64) -> Result<(), String> {
    let mut cmd = std::process::Command::new(ctx.peers.native("condvar_pingpong")?);
    cmd.args([&(calls / 10).to_string(), "64"]);
    let f = crate::peers::figures(&mut cmd)?;
    let us = figure(&f, "condvar")? / 1e3;
    for (_, col) in SIZES {
        s.push(&format!("{THREADS}/{col}"), us);
    }
    Ok(())
}

fn revokes_of(s: &mut Samples, rounds: u32) -> Result<(), String> {
    let rt = inproc::runtime(1, 128);
    let mut spec = quiet("owner", guests::MAP_BENCH);
    spec.args = vec!["revoke".into(), rounds.to_string()];
    spec.ipc.modules = vec![("self".into(), guests::MAP_BENCH.into())];
    spec.limits.memory_limit = Some(1 << 30);
    let f = inproc::guest_figures(&rt, spec)?;
    for (kind, col) in MAPPERS {
        s.push(&format!("{REVOKE}/{col}"), figure(&f, kind)? / 1e3);
    }
    Ok(())
}
