//! The report's tables, one module each, in report order. Each takes the
//! shared context and returns finished tables; later issues' benchmarks
//! (file service, servlets) add a module and a line in [`run_all`]. A
//! table is a list of contestants ([`contestant::Contestant`]) that one
//! runner, [`contestant::measure`], takes through interleaved rounds.

mod cluster;
mod components;
mod compute;
mod contestant;
mod copies;
mod files;
mod mapped;
mod mass_death;
pub use copies::child_copies;
pub use cycles::child_ipc;
pub use primitives::child_spawn;
pub use web::child_hyper;
mod cycles;
mod network;
mod nfs;
mod primitives;
mod process;
mod reclaim;
mod remote;
mod restore;
mod sched;
mod spawn_steps;
mod startup;
mod streaming;
mod transfer;
mod typed;
mod upgrade;
mod web;

use crate::harness::Ctx;
use crate::model::Table;
use std::collections::BTreeMap;

/// Runs every table (or those whose step title contains `only`),
/// printing each one's title as it starts.
pub fn run_all(ctx: &Ctx, only: Option<&str>) -> Vec<Table> {
    type Step<'a> = (&'a str, Box<dyn Fn(&Ctx) -> Vec<Table> + 'a>);
    let steps: Vec<Step> = vec![
        ("primitives (seed 000, Table 1)", Box::new(|c| vec![primitives::run(c)])),
        ("spawn, step by step, beside raw Wasmtime", Box::new(|c| vec![spawn_steps::run(c)])),
        (
            "process creation and IPC (seed 000, Table 2); IPC round trip in cycles (seeds 001/002, Table 1)",
            Box::new(|c| {
                let (table, samples) = process::run(c);
                eprintln!("== IPC round trip in cycles (seeds 001/002, Table 1)");
                vec![table, cycles::run(c, &samples)]
            }),
        ),
        ("footprint and start-up of N copies (seed 003, Figures 3-4)", Box::new(copies::run)),
        ("a program's whole process: warden run beside wasmtime run", Box::new(|c| vec![startup::run(c)])),
        ("cross-task vs local access (seed 004, Figure 2)", Box::new(|c| vec![remote::run(c)])),
        ("compute under preemption", Box::new(|c| vec![compute::run(c)])),
        ("bulk transfer: copy vs memory object", Box::new(|c| vec![transfer::run(c)])),
        ("sharing by mapping: zero-copy moves and revocation", Box::new(|c| vec![mapped::run(c)])),
        ("scheduling accuracy and overhead", Box::new(sched::run)),
        ("kill to reclaim", Box::new(|c| vec![reclaim::run(c)])),
        ("memory after mass death", Box::new(|c| vec![mass_death::run(c)])),
        ("network: bandwidth shares and echo throughput", Box::new(network::run)),
        ("web server: one task, servlets, per-request tasks, native hyper (seed 004, Figure 5)", Box::new(web::run)),
        ("streamed answers: time to first byte and throughput beside hyper", Box::new(|c| vec![streaming::run(c)])),
        ("supervision: crash to service restored beside Erlang/OTP", Box::new(|c| vec![restore::run(c)])),
        ("supervision: live upgrade under load", Box::new(|c| vec![upgrade::run(c)])),
        ("cluster: remote calls through NATS beside Erlang distribution", Box::new(cluster::run)),
        ("components: spawn beside raw Wasmtime, HTTP handlers beside wasmtime serve", Box::new(components::run)),
        ("typed services: WIT calls between component tasks beside byte portals, a composed instance and Erlang", Box::new(|c| vec![typed::run(c)])),
        ("file system as a task: re-read through ext2 beside a host directory (seeds 001/002)", Box::new(files::run)),
        ("NFS server as a task: nfs-cp through it beside nfs-ganesha (seed 002)", Box::new(nfs::run)),
    ];
    let mut out = vec![];
    for (name, run) in steps {
        if only.is_some_and(|o| !name.contains(o)) {
            continue;
        }
        eprintln!("== {name}");
        let before = crate::machine::core_to_core_ns();
        let mut tables = run(ctx);
        let after = crate::machine::core_to_core_ns();
        if let (Some(before), Some(after)) = (before, after) {
            for t in &mut tables {
                t.notes.push(format!(
                    "A cache line's round trip between cores 0 and 1 (see the machine's \
                     description): {before:.0} ns before this table, {after:.0} ns after it."
                ));
            }
        }
        out.extend(tables);
    }
    out
}

/// Attaches each contestant's error to the row of the same name, and
/// computes the table's ratios.
fn finish(mut table: Table, errors: &BTreeMap<String, String>) -> Table {
    for row in &mut table.rows {
        if let Some(e) = errors.get(&row.system) {
            row.note = Some(format!("failed: {e}"));
        }
    }
    for (name, e) in errors {
        if !table.rows.iter().any(|r| &r.system == name) {
            table.notes.push(format!("{name} failed: {e}"));
        }
    }
    table.compute_ratios();
    table
}
