//! Memory after mass death: one program starts N sleeping children, then
//! they all die at once; how much the children held while alive, how long
//! until it is back with the system, and how much stays behind.
//!
//! Warden: the `warden` command (with its own allocator, as operators run
//! it) runs one task in `spawn-wide` mode; told to, it spawns N children
//! that print "asleep" and sleep, and told again it exits, so its
//! children are killed with it (a second task keeps the system running). Native: a C program forks N children that
//! print "asleep" and pause, and told to, SIGKILLs and reaps them all.
//! Both are measured from outside: the Warden process's resident set, the
//! native tree's PSS summed over every process in it.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::machine::pss_bytes;
use crate::model::Table;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};
use warden_test_guests as guests;

const WARDEN: &str = "Warden: N tasks in one process";
const NATIVE: &str = "native: a parent and N forked processes";
const ALIVE: &str = "held by the N while alive";
const LEFT: &str = "left 1 s after their death";
const BACK: &str = "death to memory returned";
/// How long anything the harness waits for may take.
const PATIENCE: Duration = Duration::from_secs(300);

pub fn run(ctx: &Ctx) -> Table {
    let n: usize = ctx.pick(10_000, 1_000);
    let mut t = Table::new(
        "mass_death",
        &format!("Memory after mass death: {n} sleeping programs end at once"),
        "issue: safe by default (MVM, seed 003: memory goes back when tasks end)",
        &[(ALIVE, "MiB"), (LEFT, "MiB"), (BACK, "ms")],
    );
    t.method = format!(
        "One program starts {n} children that each print \"asleep\" and sleep, then all of \
         them end at once. Warden: the warden command runs one task that spawns the {n} as its \
         children (1 MiB budget each) and then exits, which kills them; measured: the warden \
         process's RSS from /proc. Native: a C program forks {n} children, then SIGKILLs and \
         reaps them; measured: PSS summed over the parent and its children. Held while alive: \
         once all have printed \"asleep\", less the figure before the first was started. \
         Returned: for Warden until the RSS had come 90% of the way down to its figure one second \
         after the death began (polled every millisecond); for the native tree until the parent has reaped the last \
         child (a process's memory is unmapped before it can be reaped). Left: the figure one \
         second after the death began, less the figure before."
    );
    t.no_ratio.push(LEFT.into());
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN).runs(|s| {
                let f = warden(n)?;
                push(s, WARDEN, f);
                Ok(())
            }),
            Contestant::peer(NATIVE).runs(|s| {
                let f = native(&ctx.peers.native("hello")?.to_path_buf(), n)?;
                push(s, NATIVE, f);
                Ok(())
            }),
        ],
    );
    t.notes.push(
        "No ratio for what is left: the native tree leaves nothing by construction (its \
         children's memory goes with their processes); Warden's figure is what one process \
         keeps of N dead tasks (allocator caches, pool bookkeeping)."
            .into(),
    );
    m.finish(t)
}

/// One sample's figures: bytes held alive, bytes left, milliseconds.
struct Figures {
    alive: u64,
    left: u64,
    back_ms: f64,
}

fn push(s: &mut crate::model::Samples, system: &str, f: Figures) {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    s.push(&format!("{system}/{ALIVE}"), mib(f.alive));
    s.push(&format!("{system}/{LEFT}"), mib(f.left));
    s.push(&format!("{system}/{BACK}"), f.back_ms);
}

/// A child process whose stdout lines arrive on a channel (read on a
/// thread of its own, so that N children's lines never fill the pipe).
struct Watched {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Watched {
    fn start(mut c: Command) -> Result<Watched, String> {
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{c:?}: {e}"))?;
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                // Warden names the task a line came from: "[parent] …".
                let text = match line.strip_prefix('[').and_then(|l| l.split_once("] ")) {
                    Some((_, text)) => text.to_string(),
                    None => line,
                };
                if tx.send(text).is_err() {
                    break;
                }
            }
        });
        Ok(Watched {
            child,
            stdin,
            lines,
        })
    }

    /// Waits for a line starting with `want`; every line before it is
    /// handed to `seen`.
    fn until(&self, want: &str, mut seen: impl FnMut(&str)) -> Result<(), String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(want) => return Ok(()),
                Ok(l) => seen(&l),
                Err(_) => return Err(format!("never printed {want:?}")),
            }
        }
    }

    /// Waits for `n` lines starting with "asleep"; what follows "asleep "
    /// on each, parsed as a process id where there is one.
    fn asleep(&self, n: usize) -> Result<Vec<u32>, String> {
        let (mut count, mut pids) = (0, Vec::with_capacity(n));
        let deadline = Instant::now() + PATIENCE;
        while count < n {
            let left = deadline.saturating_duration_since(Instant::now());
            let l = self
                .lines
                .recv_timeout(left)
                .map_err(|_| format!("only {count} of {n} children said they were asleep"))?;
            if let Some(rest) = l.strip_prefix("asleep") {
                count += 1;
                pids.extend(rest.trim().parse::<u32>().ok());
            }
        }
        Ok(pids)
    }

    fn say(&mut self, line: &str) -> Result<(), String> {
        writeln!(self.stdin, "{line}").map_err(|e| e.to_string())
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn warden(n: usize) -> Result<Figures, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let manifest = dir.path().join("warden.toml");
    std::fs::write(
        &manifest,
        format!(
            "[runtime]\nmax_tasks = {}\n\n[[task]]\nname = 'keeper'\nmodule = '{m}'\n\
             args = ['sleep']\nmemory_limit = '1MiB'\n\n[[task]]\nname = 'parent'\nmodule = '{m}'\n\
             args = ['spawn-wide', '{n}']\nstdin = 'inherit'\nstdout = 'inherit'\n\
             memory_limit = '12GiB'\nmodules = {{ self = '{m}' }}\n",
            n + 16,
            m = guests::HOSTILE,
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut c = Command::new(warden_command()?);
    c.args(["run", "--control", "off"]).arg(&manifest);
    let mut p = Watched::start(c)?;
    let pid = p.child.id();
    p.until("spawn-wide: ready", |_| {})?;
    let before = rss(pid)?;
    p.say("go")?;
    p.asleep(n)?;
    let alive = rss(pid)?.saturating_sub(before);
    p.say("end")?;
    // RSS every millisecond for a second; "returned" is when it had come
    // 90% of the way down to where it ended.
    let t = Instant::now();
    let mut trace = vec![];
    while t.elapsed() < Duration::from_secs(1) {
        trace.push((t.elapsed(), rss(pid)?));
        std::thread::sleep(Duration::from_millis(1));
    }
    let end = rss(pid)?;
    let high = (before + alive).max(end);
    let back = trace
        .iter()
        .find(|&&(_, r)| r.saturating_sub(end) <= (high - end) / 10)
        .map_or(t.elapsed(), |&(at, _)| at);
    let (left, back_ms) = (end.saturating_sub(before), back.as_secs_f64() * 1e3);
    Ok(Figures {
        alive,
        left,
        back_ms,
    })
}

fn native(hello: &PathBuf, n: usize) -> Result<Figures, String> {
    let mut c = Command::new(hello);
    c.args(["tree", &n.to_string()]);
    let mut p = Watched::start(c)?;
    let pid = p.child.id();
    p.until("ready", |_| {})?;
    let before = pss(pid)?;
    p.say("go")?;
    let pids = p.asleep(n)?;
    let mut alive = pss(pid)?;
    for kid in pids {
        alive += pss(kid)?;
    }
    p.say("end")?;
    let t = Instant::now();
    p.until("reaped", |_| {})?;
    let back_ms = t.elapsed().as_secs_f64() * 1e3;
    std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
    let left = pss(pid)?.saturating_sub(before);
    Ok(Figures {
        alive: alive.saturating_sub(before),
        left,
        back_ms,
    })
}

/// The `warden` command beside this binary (scripts/bench builds it).
pub(super) fn warden_command() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let w = exe.with_file_name("warden");
    if w.is_file() {
        Ok(w)
    } else {
        Err(format!(
            "{} is missing: build it with cargo build --release -p warden-cli",
            w.display()
        ))
    }
}

fn rss(pid: u32) -> Result<u64, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib << 10)
        .ok_or_else(|| format!("process {pid} has no resident set (it ended)"))
}

fn pss(pid: u32) -> Result<u64, String> {
    pss_bytes(pid).ok_or_else(|| format!("no PSS for process {pid}"))
}
