//! Seed 003 (MVM), Figures 3 and 4: what N copies of one program cost in
//! memory and start-up when they are N tasks in one Warden process, N
//! wasmtime processes, or N JVM processes.
//!
//! The program prints "ready" and sleeps. Footprint is the proportional set
//! size (PSS: shared pages divided among their sharers) summed over every
//! process involved, read when all N copies are ready; time runs from the
//! first start to the last "ready". Warden runs in a child process of this
//! binary (`child-copies`), so its figure includes the whole runtime.
//! Process peers are started one after another; Warden's tasks are spawned
//! at once onto 2 workers.

use super::finish;
use crate::harness::{contestant, interleave, Ctx};
use crate::inproc::{self, quiet};
use crate::machine::{mem_available, pss_bytes};
use crate::model::{Kind, Plot, Samples, Table};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use warden_test_guests as guests;

const WARDEN: &str = "Warden: N tasks in one process";
const WASMTIME: &str = "wasmtime: N processes";
const JVM: &str = "JVM: N java processes";

pub fn run(ctx: &Ctx) -> Vec<Table> {
    let ns: Vec<usize> = ctx.pick(vec![1, 10, 100, 1000, 10_000], vec![1, 10, 100, 1000]);
    // What this machine can hold of each peer, before the memory check.
    let (wasmtime_cap, jvm_cap) = ctx.pick((1000, 100), (10, 3));
    let cols: Vec<(String, String)> = ns.iter().map(|n| (n.to_string(), String::new())).collect();
    let col_refs = |unit: &'static str| -> Vec<(&str, &str)> {
        cols.iter().map(|(n, _)| (n.as_str(), unit)).collect()
    };
    let mut foot = Table::new(
        "copies_footprint",
        "Footprint of N copies of a program (MiB, PSS summed)",
        "seed 003 (MVM), Figure 3",
        &col_refs("MiB"),
    );
    let mut time = Table::new(
        "copies_startup",
        "Time until N copies of a program are all running (ms)",
        "seed 003 (MVM), Figure 4",
        &col_refs("ms"),
    );
    foot.plot = Plot::Lines;
    time.plot = Plot::Lines;

    let exe = std::env::current_exe().expect("own path");
    let ready = guests::READY;
    let mut caps = vec![];
    let per_copy = [
        std::cell::Cell::new(None::<f64>),
        std::cell::Cell::new(None),
    ];
    let (samples, errors) = {
        let mut contestants = vec![];
        for &n in &ns {
            let exe = &exe;
            contestants.push(contestant(&format!("{WARDEN} {n}"), move |s| {
                let mut c = Command::new(exe);
                c.args(["child-copies", &n.to_string(), ready]);
                let (bytes, ms) = measure(vec![c])?;
                push(s, WARDEN, n, bytes, ms);
                Ok(())
            }));
        }
        let budget = mem_available() as f64 * 0.5;
        for (i, (system, cap)) in [(WASMTIME, wasmtime_cap), (JVM, jvm_cap)]
            .into_iter()
            .enumerate()
        {
            for &n in &ns {
                if n > cap {
                    caps.push(format!("{system}: N capped at {cap} in this mode"));
                    continue;
                }
                let per_copy = &per_copy[i];
                contestants.push(contestant(&format!("{system} {n}"), move |s| {
                    // Skip an N whose estimated footprint exceeds half the
                    // memory available.
                    if let Some(each) = per_copy.get() {
                        if each * n as f64 > budget {
                            return Ok(());
                        }
                    }
                    let cmds = (0..n)
                        .map(|_| -> Result<Command, String> {
                            if system == WASMTIME {
                                let mut c = Command::new(ctx.peers.runner()?);
                                c.arg(ctx.peers.cwasm(ready)?);
                                Ok(c)
                            } else {
                                let mut c = ctx.peers.java()?;
                                c.args(["Hello", "ready"]);
                                Ok(c)
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let (bytes, ms) = measure(cmds)?;
                    per_copy.set(Some(per_copy.get().unwrap_or(0.0).max(bytes / n as f64)));
                    push(s, system, n, bytes, ms);
                    Ok(())
                }));
            }
        }
        interleave(ctx.rounds, contestants)
    };
    caps.dedup();
    for (table, metric) in [(&mut foot, "MiB"), (&mut time, "ms")] {
        for (system, kind) in [
            (WARDEN, Kind::Warden),
            (WASMTIME, Kind::Peer),
            (JVM, Kind::Peer),
        ] {
            table.row_from(system, kind, &samples, &format!("{system}/{metric}/"));
            let missing: Vec<String> = ns
                .iter()
                .filter(|n| samples.cell(&format!("{system}/{metric}/{n}")).is_none())
                .map(|n| n.to_string())
                .collect();
            if !missing.is_empty() && kind == Kind::Peer {
                table.rows.last_mut().unwrap().note = Some(format!(
                    "not run for N = {} (capped: the machine cannot hold that many, or the mode is quick)",
                    missing.join(", ")
                ));
            }
        }
        table.notes.extend(caps.iter().cloned());
        table.notes.push(format!(
            "An N is also skipped when its estimated footprint passes half of the memory available ({} MiB at the start).",
            mem_available() >> 20
        ));
        table.method = "Each copy prints \"ready\" and sleeps. Footprint: PSS from /proc/PID/smaps_rollup \
                        summed over the processes once all N are ready. Time: from starting the first to \
                        reading the last \"ready\". The wasmtime processes run the module compiled ahead \
                        of time; the JVM runs with default settings."
            .into();
    }
    let errors = errors
        .into_iter()
        .map(|(k, v)| {
            (
                k.rsplit_once(' ').map_or(k.clone(), |(s, _)| s.to_string()),
                v,
            )
        })
        .collect();
    vec![finish(foot, &errors), finish(time, &errors)]
}

fn push(s: &mut Samples, system: &str, n: usize, bytes: f64, ms: f64) {
    s.push(&format!("{system}/MiB/{n}"), bytes / (1 << 20) as f64);
    s.push(&format!("{system}/ms/{n}"), ms);
}

/// Starts `cmds` one after another, each until it prints its first line;
/// then the summed PSS of all of them and the milliseconds taken. Every
/// process is killed before returning.
fn measure(cmds: Vec<Command>) -> Result<(f64, f64), String> {
    let mut children: Vec<Child> = vec![];
    let result = (|| {
        let t = Instant::now();
        for mut c in cmds {
            let mut child = c
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("start {}: {e}", c.get_program().to_string_lossy()))?;
            let mut line = String::new();
            let out = child.stdout.take().unwrap();
            children.push(child);
            BufReader::new(out)
                .read_line(&mut line)
                .map_err(|e| e.to_string())?;
            if !line.starts_with("ready") {
                return Err(format!(
                    "{} printed {line:?}, not ready",
                    c.get_program().to_string_lossy()
                ));
            }
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let mut bytes = 0.0;
        for c in &children {
            bytes += pss_bytes(c.id()).ok_or("cannot read smaps_rollup")? as f64;
        }
        Ok((bytes, ms))
    })();
    for mut c in children {
        drop(c.stdin.take());
        c.kill().ok();
        c.wait().ok();
    }
    result
}

/// The child side of the Warden measurement: `n` tasks from `module`,
/// "ready" once all have run into their sleep, then wait for stdin to close.
pub fn child_copies(n: usize, module: &str) -> Result<(), String> {
    let rt = inproc::runtime(2, n as u32 + 16);
    let spec = quiet("copy", module);
    rt.load_module(module.as_ref()).map_err(|e| e.to_string())?;
    for _ in 0..n {
        rt.spawn(&spec).map_err(|e| e.to_string())?;
    }
    // A task is asleep once it has been polled and is no longer queued.
    let deadline = Instant::now() + Duration::from_secs(300);
    while rt.stats().queued > 0 || rt.stats().polls < n as u64 {
        if Instant::now() > deadline {
            return Err("tasks did not all start in 300 s".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    println!("ready");
    std::io::stdout().flush().ok();
    let mut sink = vec![];
    std::io::stdin().read_to_end(&mut sink).ok();
    rt.kill_all("benchmark over");
    Ok(())
}
