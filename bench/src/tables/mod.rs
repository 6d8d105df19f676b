//! The report's tables, one module each, in report order. Each takes the
//! shared context and returns finished tables; later issues' benchmarks
//! (file service, servlets) add a module and a line in [`run_all`].

mod compute;
mod copies;
pub use copies::child_copies;
pub use cycles::child_ipc;
mod cycles;
mod primitives;
mod process;
mod reclaim;
mod remote;
mod sched;
mod transfer;

use crate::harness::Ctx;
use crate::model::Table;
use std::collections::BTreeMap;

/// Runs every table, printing each one's title as it starts.
pub fn run_all(ctx: &Ctx) -> Vec<Table> {
    let mut out = vec![];
    let step = |name: &str| eprintln!("== {name}");
    step("primitives (seed 000, Table 1)");
    out.push(primitives::run(ctx));
    step("process creation and IPC (seed 000, Table 2)");
    let (table, samples) = process::run(ctx);
    out.push(table);
    step("IPC round trip in cycles (seeds 001/002, Table 1)");
    out.push(cycles::run(ctx, &samples));
    step("footprint and start-up of N copies (seed 003, Figures 3-4)");
    out.extend(copies::run(ctx));
    step("cross-task vs local access (seed 004, Figure 2)");
    out.push(remote::run(ctx));
    step("compute under preemption");
    out.push(compute::run(ctx));
    step("bulk transfer: copy vs memory object");
    out.push(transfer::run(ctx));
    step("scheduling accuracy and overhead");
    out.extend(sched::run(ctx));
    step("kill to reclaim");
    out.push(reclaim::run(ctx));
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
