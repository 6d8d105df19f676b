//! Kill to reclaim: a program spins while holding 64 MiB; it is killed,
//! and the clock runs until its memory is back with the system.
//!
//! For Warden (in this process) that is until this process's resident set
//! is back within [`SLACK`] of what it was before the task ran: all of the
//! task's memory returned, not most of it; for a process, until `waitpid` returns (Linux
//! unmaps a process's memory before its parent can reap it).

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::inproc::{self, quiet};
use crate::machine::self_rss_bytes;
use crate::model::Table;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use warden::Output;
use warden_test_guests as guests;

const WARDEN: &str = "Warden task";
const NATIVE: &str = "native process";
const WASMTIME: &str = "wasmtime process";
const JVM: &str = "JVM process";
const COLUMN: &str = "kill to memory returned";
const HELD: u64 = 64 << 20;
/// How far above its size before the task ran this process may stay when
/// the task's memory counts as returned (its store, stack and the
/// allocator's own slack).
const SLACK: u64 = 2 << 20;

pub fn run(ctx: &Ctx) -> Table {
    let mut t = Table::new(
        "reclaim",
        "Kill to reclaim: a spinning program holding 64 MiB",
        "issue: kill latency (all papers: termination reclaims everything)",
        &[(COLUMN, "ms")],
    );
    t.method =
        "The program touches 64 MiB and spins; once it says it is ready, it is killed. Warden: \
                Runtime::kill, then this process's RSS polled until it is back within 2 MiB of what \
                it was before the task ran. \
                Processes: SIGKILL, then waitpid."
            .into();
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN).prepared(
                || {
                    let rt = inproc::runtime(1, 16);
                    // The runtime's first task leaves a few MiB resident for
                    // good (code pages, pool bookkeeping): run one before any
                    // is measured, so the table's figures do not depend on
                    // what ran before it.
                    let _ = warden(&rt, false);
                    Ok(rt)
                },
                |rt, s| {
                    s.push(&format!("{WARDEN}/{COLUMN}"), warden(rt, true)?);
                    Ok(())
                },
            ),
            Contestant::peer(NATIVE).runs(|s| {
                let mut c = Command::new(ctx.peers.native("hello")?);
                c.args(["hold", "64"]);
                s.push(&format!("{NATIVE}/{COLUMN}"), process(c)?);
                Ok(())
            }),
            Contestant::peer(WASMTIME).runs(|s| {
                let mut c = Command::new(ctx.peers.runner()?);
                c.arg(ctx.peers.cwasm(guests::HOLD)?);
                s.push(&format!("{WASMTIME}/{COLUMN}"), process(c)?);
                Ok(())
            }),
            Contestant::peer(JVM).runs(|s| {
                let mut c = ctx.peers.java()?;
                c.args(["Hello", "hold", "64"]);
                s.push(&format!("{JVM}/{COLUMN}"), process(c)?);
                Ok(())
            }),
        ],
    );
    m.finish(t)
}

/// Milliseconds from `Runtime::kill` until the task's 64 MiB have left
/// this process's resident set (unless `measure` is false: then only the
/// kill and the wait for its report).
fn warden(rt: &warden::Runtime, measure: bool) -> Result<f64, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = dir.path().join("out");
    let mut spec = quiet("hold", guests::HOLD);
    spec.stdio.stdout = Output::File(out.clone());
    let before = self_rss_bytes();
    let id = rt.spawn(&spec).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&out)
        .unwrap_or_default()
        .starts_with("ready")
    {
        if Instant::now() > deadline {
            return Err("the task never became ready".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    if !measure {
        rt.kill(id, "warm-up").map_err(|e| e.to_string())?;
        rt.wait(id).map_err(|e| e.to_string())?;
        return Ok(0.0);
    }
    let held = self_rss_bytes();
    if held < before + HELD * 7 / 8 {
        return Err(format!(
            "RSS rose only {} MiB",
            (held.saturating_sub(before)) >> 20
        ));
    }
    let t = Instant::now();
    rt.kill(id, "benchmark").map_err(|e| e.to_string())?;
    let limit = before + SLACK;
    while self_rss_bytes() > limit {
        if t.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "the killed task's memory was still resident after 10 s (RSS {} MiB, was {} MiB before it ran)",
                self_rss_bytes() >> 20,
                before >> 20
            ));
        }
        std::hint::spin_loop();
    }
    let ms = t.elapsed().as_secs_f64() * 1e3;
    rt.wait(id).map_err(|e| e.to_string())?;
    Ok(ms)
}

/// Milliseconds from SIGKILL to `waitpid` for a process that printed "ready".
fn process(mut c: Command) -> Result<f64, String> {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    if !line.starts_with("ready") {
        child.kill().ok();
        child.wait().ok();
        return Err(format!("printed {line:?}, not ready"));
    }
    let t = Instant::now();
    child.kill().map_err(|e| e.to_string())?;
    child.wait().map_err(|e| e.to_string())?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}
