//! Seed 004 (Luna), Figure 2: what crossing a task boundary costs against
//! doing the same thing locally — a field read and write, a method
//! invocation, and making and revoking a permit — in cycles.
//!
//! Locally, a guest loads and stores a 4-byte field and calls an empty
//! function through a pointer. Across tasks, it reads and writes the field
//! through a permit (the host looks the permit up, checks it and copies),
//! timed in a second task the owner granted the permit to, and calls a server task through a portal (a round trip with
//! two task switches). Loop overhead is included, as in the paper.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::inproc::{self, quiet};
use crate::model::{Cell, Samples, Table};
use crate::peers::figure;
use warden_test_guests as guests;

const REMOTE: &str = "Warden, across tasks (permit; portal call)";
const LOCAL: &str = "Warden, local (same task)";
const MAPPED: &str = "Warden, across tasks (memory object mapped)";
const COLUMNS: [&str; 4] = [
    "field read",
    "field write",
    "method invocation",
    "allocate + revoke permit",
];

pub fn run(ctx: &Ctx) -> Table {
    let ops: u64 = ctx.pick(2_000_000, 200_000);
    let calls: u64 = ctx.pick(200_000, 20_000);
    let mut t = Table::new(
        "remote",
        "Cross-task vs local access (cycles)",
        "seed 004 (Luna), Figure 2",
        &COLUMNS.map(|c| (c, "cycles")),
    );
    t.method = format!(
        "{ops} operations per sample timed inside the guest ({calls} portal calls), converted to \
         cycles with the core clock, {:.0} MHz ({}). The permit is read and written by a second \
         task (a child the owner spawned and granted it to), as is the mapped memory object \
         (the child maps it into its own memory); the owner times allocate + revoke.",
        ctx.clock.hz / 1e6,
        ctx.clock.how
    );
    let rt = inproc::runtime(1, 16);
    let cyc = |ns: f64| ctx.clock.cycles(ns);
    let mut mem = (vec![], vec![]);
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            // Local access and the permit, timed in one program.
            Contestant::rowless("prims").runs(|s| prims(s, &rt, ops, &cyc, &mut mem)),
            Contestant::rowless("portal").runs(|s| {
                let f = inproc::ipc(1, calls, &["null"])?;
                s.push(
                    &format!("{REMOTE}/method invocation"),
                    cyc(figure(&f, "null")?),
                );
                Ok(())
            }),
            Contestant::warden(REMOTE),
            Contestant::warden(MAPPED).absent(
                &COLUMNS[2..],
                "a mapping is data, not a method; mapping is not a permit's allocation",
            ),
            Contestant::peer(LOCAL)
                .absent(&[COLUMNS[3]], "a task needs no permit for its own memory"),
        ],
    );
    papers_and_notes(&mut t, mem);
    m.finish(t)
}

/// The primitives' program: local access, and the permit timed in a
/// child the owner grants it to (cycles); the same 4 bytes through a
/// memory object go to `mem` (read, write), for the notes.
fn prims(
    s: &mut Samples,
    rt: &warden::Runtime,
    ops: u64,
    cyc: &dyn Fn(f64) -> f64,
    mem: &mut (Vec<f64>, Vec<f64>),
) -> Result<(), String> {
    let mut spec = quiet("prims", guests::PRIMS);
    spec.args = vec![ops.to_string()];
    spec.ipc.modules = vec![("self".into(), guests::PRIMS.into())];
    let f = inproc::guest_figures(rt, spec)?;
    let get = |k: &str| figure(&f, k);
    s.push(&format!("{LOCAL}/field read"), cyc(get("read")?));
    s.push(&format!("{LOCAL}/field write"), cyc(get("write")?));
    s.push(&format!("{LOCAL}/method invocation"), cyc(get("call")?));
    s.push(&format!("{MAPPED}/field read"), cyc(get("mapped_read")?));
    s.push(&format!("{MAPPED}/field write"), cyc(get("mapped_write")?));
    s.push(&format!("{REMOTE}/field read"), cyc(get("permit_read")?));
    s.push(&format!("{REMOTE}/field write"), cyc(get("permit_write")?));
    s.push(
        &format!("{REMOTE}/allocate + revoke permit"),
        cyc(get("permit_cycle")?),
    );
    mem.0.push(cyc(get("mem_read")?));
    mem.1.push(cyc(get("mem_write")?));
    Ok(())
}

/// The paper's rows, and the notes (the memory object's figures).
fn papers_and_notes(t: &mut Table, mem: (Vec<f64>, Vec<f64>)) {
    t.paper(
        "Luna local (paper, PIII 800 MHz)",
        &[Some(3.0), Some(3.0), Some(11.0), None],
    );
    t.paper(
        "Luna remote, uniprocessor (paper)",
        &[Some(5.0), Some(35.0), Some(115.0), Some(900.0)],
    );
    t.paper(
        "Luna remote, multiprocessor (paper)",
        &[Some(96.0), Some(96.0), Some(238.0), Some(900.0)],
    );
    if let (Some(r), Some(w)) = (Cell::of(mem.0), Cell::of(mem.1)) {
        t.notes.push(format!(
            "The same 4 bytes through a memory object (JX's form of sharing): read {:.0} cycles, \
             write {:.0} cycles (medians).",
            r.median, w.median
        ));
    }
    t.notes.push(
        "Ratios here are across tasks over local: the price of the boundary. Luna's remote method \
         invocation switches stacks, not threads; Warden's portal call switches to the server task \
         and back."
            .into(),
    );
}
