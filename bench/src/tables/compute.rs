//! Compute: what running under Warden costs a CPU-bound program, against
//! the same module run by Wasmtime with nothing around it. Warden's
//! preemption relies on Wasmtime's epoch checks, compiled into every loop
//! header and function entry; a third row isolates their cost: Wasmtime
//! with the checks compiled in but never interrupting.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::inproc::{self, quiet, Raw, RawPre};
use crate::model::{Samples, Table};
use std::time::{Duration, Instant};
use warden::{GroupSpec, Runtime, RuntimeConfig};
use warden::{PolicyKind, SchedParams as Params};
use warden_test_guests as guests;

const WARDEN: &str = "Warden task";
const RAW: &str = "raw Wasmtime";
const EPOCH: &str = "raw Wasmtime with epoch checks";
const PROGRAMS: [(&str, &str); 3] = [
    ("sieve (WAT)", guests::SIEVE),
    ("sieve (C, clang -O2)", guests::SIEVE_C),
    ("fib(30)", guests::FIB),
];
const DEEP: &str = "C sieve, three groups deep";

pub fn run(ctx: &Ctx) -> Table {
    let mut cols: Vec<(&str, &str)> = PROGRAMS.iter().map(|(name, _)| (*name, "ms")).collect();
    cols.push((DEEP, "ms"));
    let mut t = Table::new(
        "compute",
        "Compute-bound programs: run time (ms)",
        "kernel issue (throughput under preemption; seed 000 Table 1's premise that processes cost the program nothing)",
        &cols,
    );
    t.method = "Each program runs once per sample, spawn to exit (Warden: one worker, 4 ms slices, \
                nothing else running; the deep variant sits in a stride group inside a priority group \
                inside a lottery group) or instantiate to return (Wasmtime)."
        .into();
    let deep = "scheduling groups are Warden's";
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN).prepared(
                || Ok((runtime(vec![]), runtime(groups()))),
                |(flat, deep), s| warden(s, flat, deep),
            ),
            Contestant::peer(RAW)
                .prepared(|| Ok(Compiled::new(Raw::new())), |raw, s| raw.run(s, RAW))
                .absent(&[DEEP], deep),
            Contestant::peer(EPOCH)
                .prepared(
                    || {
                        let mut config = wasmtime::Config::new();
                        config.epoch_interruption(true);
                        Ok(Compiled::new(Raw::with_config(&config)))
                    },
                    |epoch, s| epoch.run(s, EPOCH),
                )
                .absent(&[DEEP], deep),
        ],
    );
    notes(&mut t, &m.samples);
    m.finish(t)
}

/// Warden's row: every program on a runtime with no groups, then the C
/// sieve three groups deep.
fn warden(s: &mut Samples, flat: &Runtime, deep: &Runtime) -> Result<(), String> {
    for (name, module) in PROGRAMS {
        s.push(
            &format!("{WARDEN}/{name}"),
            timed(flat, quiet(name, module))?,
        );
    }
    let mut spec = quiet("deep", guests::SIEVE_C);
    spec.sched.group = Some("app".into());
    s.push(&format!("{WARDEN}/{DEEP}"), timed(deep, spec)?);
    Ok(())
}

/// A raw Wasmtime set-up and every program compiled for it.
struct Compiled {
    raw: Raw,
    pres: Vec<RawPre>,
}

impl Compiled {
    fn new(raw: Raw) -> Compiled {
        let pres = PROGRAMS.iter().map(|(_, m)| raw.pre(m)).collect();
        Compiled { raw, pres }
    }

    /// One instantiate-to-return run of each program (ms).
    fn run(&self, s: &mut Samples, system: &str) -> Result<(), String> {
        for ((name, _), pre) in PROGRAMS.iter().zip(&self.pres) {
            s.push(
                &format!("{system}/{name}"),
                self.raw.batch(pre, 1, false)? / 1e6,
            );
        }
        Ok(())
    }
}

/// The deep variant's groups: a lottery group inside a priority group
/// inside a stride group.
fn groups() -> Vec<GroupSpec> {
    let group = |name: &str, parent: Option<&str>, policy| GroupSpec {
        name: name.into(),
        parent: parent.map(Into::into),
        policy,
        params: Params::default(),
        cap: None,
        cpu_quota: None,
        bandwidth_share: 1,
        bandwidth_limit: None,
        memory_limit: None,
        memory_guarantee: 0,
    };
    vec![
        group("org", None, PolicyKind::Stride),
        group("tenant", Some("org"), PolicyKind::Priority),
        group("app", Some("tenant"), PolicyKind::Lottery),
    ]
}

fn notes(t: &mut Table, samples: &Samples) {
    if let (Some(w), Some(r)) = (
        samples.cell(&format!("{WARDEN}/{DEEP}")),
        samples.cell(&format!("{RAW}/{}", PROGRAMS[1].0)),
    ) {
        t.notes.push(format!(
            "Three groups deep, the C sieve runs at {:.0}% of raw Wasmtime's speed (medians).",
            100.0 * r.median / w.median
        ));
    }
    t.notes.push(
        "Throughput relative to raw Wasmtime is the inverse of the ratio below; the kernel issue \
         asks for 98% or more."
            .into(),
    );
    t.notes.extend(gap_notes(samples));
}

/// For each program, how much of Warden's time beyond raw Wasmtime's the
/// epoch checks account for (the third row) and how much is left to
/// Warden's own work, from the medians of this run.
fn gap_notes(samples: &Samples) -> Vec<String> {
    let median = |who: &str, name: &str| samples.cell(&format!("{who}/{name}")).map(|c| c.median);
    let mut notes = Vec::new();
    for (name, _) in PROGRAMS {
        let (Some(w), Some(r), Some(e)) =
            (median(WARDEN, name), median(RAW, name), median(EPOCH, name))
        else {
            continue;
        };
        let (extra, epochs) = (w - r, e - r);
        let note = if extra <= 0.0 {
            format!("{name}: Warden took no longer than raw Wasmtime ({w:.2} against {r:.2} ms).")
        } else {
            let share = (100.0 * epochs / extra).clamp(0.0, 100.0);
            format!(
                "{name}: Warden takes {:+.1}% over raw Wasmtime, raw Wasmtime with epoch checks \
                 {:+.1}%: the epoch checks account for {share:.0}% of Warden's extra time, \
                 Warden's own work (slices, accounting, its task set-up) for the rest.",
                100.0 * extra / r,
                100.0 * epochs / r
            )
        };
        notes.push(note);
    }
    notes
}

fn runtime(groups: Vec<GroupSpec>) -> Runtime {
    Runtime::new(RuntimeConfig {
        scheduler: PolicyKind::Stride,
        groups,
        ..inproc::config(1, 16)
    })
    .expect("start a Warden runtime")
}

/// Milliseconds from spawn to report of one task, which must exit 0.
fn timed(rt: &Runtime, spec: warden::TaskSpec) -> Result<f64, String> {
    rt.load_module(&spec.module).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let id = rt.spawn(&spec).map_err(|e| e.to_string())?;
    let r = rt
        .wait_timeout(id, Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?
        .ok_or("did not finish in 120 s")?;
    if r.exit_code != Some(0) {
        return Err(format!("{} ended {} {:?}", spec.name, r.status, r.reason));
    }
    Ok(t.elapsed().as_secs_f64() * 1e3)
}
