//! Typed services (seed 001, JX's typed portals; seed 000, J-Kernel's
//! copying stubs): what a call through a WIT interface costs between two
//! component tasks, beside the same work through a byte portal with the
//! marshalling written by hand, beside the same two components fused into
//! one instance by `wasm-tools compose` (no boundary: the floor), and
//! beside an Erlang message round trip.
//!
//! Two calls of `kv.wit`'s store: `set("key", "value") -> u32` (a small
//! record's worth) and `reverse` of 100 four-byte strings (a list of
//! strings each way, the answer freed by the client). Every Warden figure
//! is timed inside the client guest with the WASI monotonic clock.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::inproc::{self, quiet};
use crate::model::{Samples, Table};
use crate::peers::{figure, figures};
use warden::{Runtime, TaskSpec};
use warden_test_guests as guests;

const PASSIVE: &str = "Warden typed call, passive server (caller's thread)";
const ACTIVE: &str = "Warden typed call, active server (hand-off)";
const BYTES: &str = "Warden byte portal call, same work marshalled by hand (active)";
const COMPOSED: &str = "the two components composed into one instance (wasm-tools compose)";
const ERLANG: &str = "Erlang message round trip, same work";
const COLUMNS: [(&str, &str); 2] = [("small record", "ns"), ("100 strings", "ns")];
const IFACE: &str = "warden-test:kv/store";

pub fn run(ctx: &Ctx) -> Table {
    let calls: u64 = ctx.pick(100_000, 10_000);
    let mut t = Table::new(
        "typed",
        "Typed call round trip (ns)",
        "seed 001 (JX), typed portals; seed 000 (J-Kernel), copying stubs",
        &COLUMNS,
    );
    t.method = format!(
        "{calls} calls of each kind per sample, each kind run twice and the second run timed \
         inside the client with the monotonic clock (Erlang: erlang:monotonic_time, the same \
         two runs). small record: set(\"key\", \"value\") -> u32, the server keeping its own \
         copy; 100 strings: reverse of a list of 100 four-byte strings, answered reversed and \
         freed by the client. The typed rows and the composed row run the same client \
         component (C, the canonical ABI by hand, adapted to WASI 0.2) and server component; \
         the byte row is a C core-module client and server doing the same work over a byte \
         portal, marshalling each call and copying each answer word into an allocation of \
         its own as the component's lowering does. Warden runs with 1 worker (client and \
         server on one thread, as the byte portal rows of the IPC table)."
    );
    let rt = inproc::runtime(1, 16);
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(PASSIVE).runs(|s| typed(s, &rt, calls, true)),
            Contestant::warden(ACTIVE).runs(|s| typed(s, &rt, calls, false)),
            Contestant::peer(BYTES).runs(|s| bytes(s, &rt, calls)),
            Contestant::peer(COMPOSED).runs(|s| composed(s, &rt, calls)),
            Contestant::peer(ERLANG).runs(|s| {
                let f = figures(&mut ctx.peers.erlang_main("typed", &[calls.to_string()])?)?;
                push(s, ERLANG, &f)
            }),
        ],
    );
    t.ratio_from = vec![PASSIVE.into(), ACTIVE.into()];
    t.notes.extend(targets(&m.samples));
    m.finish(t)
}

/// Pushes a run's "small" and "list" figures into `row`'s columns.
fn push(
    s: &mut Samples,
    row: &str,
    f: &std::collections::BTreeMap<String, f64>,
) -> Result<(), String> {
    s.push(&format!("{row}/{}", COLUMNS[0].0), figure(f, "small")?);
    s.push(&format!("{row}/{}", COLUMNS[1].0), figure(f, "list")?);
    Ok(())
}

/// The client component against a fresh server task, bound by its spec.
fn typed(s: &mut Samples, rt: &Runtime, calls: u64, passive: bool) -> Result<(), String> {
    let mut server = quiet("kv", guests::KV_SERVER);
    server.serves = vec![IFACE.into()];
    server.ipc.provides = vec!["kv".into()];
    server.passive = passive;
    let id = rt.spawn(&server).map_err(|e| e.to_string())?;
    let mut client = TaskSpec::new("client", guests::KV_CLIENT);
    client.args = vec!["time".into(), calls.to_string()];
    client.ipc.uses = vec!["kv".into()];
    client.binds = vec![(IFACE.into(), "kv".into())];
    let f = inproc::guest_figures(rt, client);
    rt.kill(id, "sample over").ok();
    push(s, if passive { PASSIVE } else { ACTIVE }, &f?)
}

/// The byte-portal client and server doing the same work.
fn bytes(s: &mut Samples, rt: &Runtime, calls: u64) -> Result<(), String> {
    let mut server = quiet("kvb", guests::KV_BYTES);
    server.args = vec!["server".into()];
    server.ipc.provides = vec!["kvb".into()];
    let id = rt.spawn(&server).map_err(|e| e.to_string())?;
    let mut client = TaskSpec::new("client", guests::KV_BYTES);
    client.args = vec!["client".into(), calls.to_string()];
    client.ipc.uses = vec!["kvb".into()];
    let f = inproc::guest_figures(rt, client);
    rt.kill(id, "sample over").ok();
    push(s, BYTES, &f?)
}

/// The client and server fused into one component, run as one task.
fn composed(s: &mut Samples, rt: &Runtime, calls: u64) -> Result<(), String> {
    let mut task = TaskSpec::new("composed", guests::KV_COMPOSED);
    task.args = vec!["time".into(), calls.to_string()];
    push(s, COMPOSED, &inproc::guest_figures(rt, task)?)
}

/// The targets, from the medians: passive at most 2× the
/// composed floor and at most Erlang's round trip; active at most 1.5×
/// the byte portal call doing the same work.
fn targets(s: &Samples) -> Vec<String> {
    let median = |row: &str, col: &str| s.cell(&format!("{row}/{col}")).map(|c| c.median);
    let mut out = vec![
        "Targets: passive ≤ 2× the composed instance and ≤ Erlang's round trip; \
                        active ≤ 1.5× the byte portal call doing the same work."
            .to_string(),
    ];
    for (col, _) in COLUMNS {
        let ratio = |a: &str, b: &str| Some(median(a, col)? / median(b, col)?);
        let parts: Vec<String> = [
            ("passive / composed", ratio(PASSIVE, COMPOSED)),
            ("passive / Erlang", ratio(PASSIVE, ERLANG)),
            ("active / byte portal", ratio(ACTIVE, BYTES)),
        ]
        .into_iter()
        .filter_map(|(name, r)| Some(format!("{name} {:.2}×", r?)))
        .collect();
        if !parts.is_empty() {
            out.push(format!("{col}: {}.", parts.join(", ")));
        }
    }
    out
}
