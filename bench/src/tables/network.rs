//! The network: how exactly H-WF2Q+ divides a saturated link (seed 000's
//! bandwidth experiment), and what a Warden echo task costs beside a native
//! epoll echo server on the same loopback — streaming throughput, small
//! round trips, and memory per open connection.

use super::contestant::{measure, Contestant};
use crate::harness::{without_idle_spin, Ctx};
use crate::inproc::{self, quiet};
use crate::model::{Kind, Samples, Table};
use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use warden::{Runtime, RuntimeConfig, TaskId};
use warden_test_guests as guests;

const LINK: u64 = 200_000_000;
const CAP: u64 = 50_000_000;
const SHARES: [&str; 4] = ["share 1", "share 2", "share 3", "share 4"];
const CAPPED: &str = "capped task, of its cap";
const HANDOVER: &str = "idle share handed over";
const FAIR: &str = "Warden H-WF2Q+";

pub fn run(ctx: &Ctx) -> Vec<Table> {
    vec![shares(ctx), echo(ctx)]
}

/// A loopback listener that reads and discards every connection.
fn sink() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a sink");
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut b = vec![0u8; 1 << 16];
                while matches!(s.read(&mut b), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

fn runtime(link: Option<u64>) -> Runtime {
    Runtime::new(RuntimeConfig {
        link_rate: link,
        ..inproc::config(2, 16)
    })
    .expect("start a Warden runtime")
}

/// Spawns a task sending as fast as it may to `addr`.
fn blaster(rt: &Runtime, addr: &str, share: u32, cap: Option<u64>) -> Result<TaskId, String> {
    let mut s = quiet(&format!("blast{share}"), guests::NET);
    s.args = vec!["blast".into(), addr.into()];
    s.net.connect = vec!["127.0.0.1:*".into()];
    s.net.bandwidth_share = share;
    s.net.bandwidth_limit = cap;
    rt.spawn(&s).map_err(|e| e.to_string())
}

fn sent(rt: &Runtime, ids: &[TaskId]) -> Vec<u64> {
    let live = rt.live_tasks();
    ids.iter()
        .map(|id| {
            live.iter()
                .find(|t| t.id == *id)
                .map_or(0, |t| t.net_bytes_sent)
        })
        .collect()
}

/// Bytes each task sent over `secs`, after 200 ms of warm-up.
fn window(rt: &Runtime, ids: &[TaskId], secs: f64) -> (Vec<u64>, f64) {
    std::thread::sleep(Duration::from_millis(200));
    let a = sent(rt, ids);
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let b = sent(rt, ids);
    (
        b.iter().zip(a).map(|(b, a)| b - a).collect(),
        t.elapsed().as_secs_f64(),
    )
}

/// One round: the four shares (% of what they sent together), the capped
/// task's rate (% of its cap) and the hand-over time (ms).
fn share_round(secs: f64) -> Result<(Vec<f64>, f64, f64), String> {
    let addr = sink();
    let rt = runtime(Some(LINK));
    let ids: Vec<TaskId> = (1..=4)
        .map(|w| blaster(&rt, &addr, w, None))
        .collect::<Result<_, _>>()?;
    let (bytes, _) = window(&rt, &ids, secs);
    let total: u64 = bytes.iter().sum();
    if total == 0 {
        return Err("nothing was sent".into());
    }
    let fractions = bytes
        .iter()
        .map(|b| 100.0 * *b as f64 / total as f64)
        .collect();
    let handover = handover(&rt, &ids)?;
    rt.kill_all("benchmark over");
    let capped_rt = runtime(None);
    let id = blaster(&capped_rt, &addr, 1, Some(CAP))?;
    let (bytes, elapsed) = window(&capped_rt, &[id], secs);
    capped_rt.kill_all("benchmark over");
    Ok((
        fractions,
        100.0 * bytes[0] as f64 / elapsed / CAP as f64,
        handover,
    ))
}

/// Suspends the heaviest sender and samples the others every 0.5 ms: the
/// time from the suspension until a 10 ms window in which they carried at
/// least 95% of the link.
fn handover(rt: &Runtime, ids: &[TaskId]) -> Result<f64, String> {
    let others = &ids[..3];
    rt.suspend(ids[3]).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let mut points = vec![];
    while t0.elapsed() < Duration::from_millis(60) {
        let s: u64 = sent(rt, others).iter().sum();
        points.push((t0.elapsed().as_secs_f64() * 1e3, s));
        std::thread::sleep(Duration::from_micros(500));
    }
    // The end of the first window of HANDOVER_WINDOW in which the others
    // carried 95% of the link: by then the idle share was theirs.
    let need = 0.95 * LINK as f64 * HANDOVER_WINDOW / 1e3;
    for (i, (t, s)) in points.iter().enumerate() {
        if let Some((t2, s2)) = points[i..]
            .iter()
            .find(|(t2, _)| *t2 >= t + HANDOVER_WINDOW)
        {
            if (s2 - s) as f64 >= need {
                return Ok(*t2);
            }
        }
    }
    Err("the others never took the idle share".into())
}

fn shares(ctx: &Ctx) -> Table {
    let secs = ctx.pick(2.0, 0.5);
    let mut cols: Vec<(&str, &str)> = SHARES.iter().map(|c| (*c, "%")).collect();
    cols.push((CAPPED, "%"));
    cols.push((HANDOVER, "ms"));
    let mut t = Table::new(
        "net_shares",
        "Bandwidth: four senders weighted 1:2:3:4 on a 200 MB/s link (%), a cap, an idle share",
        "seed 000 (GVM's hierarchical packet fair queueing of outgoing bandwidth)",
        &cols,
    );
    t.method = format!(
        "Four tasks send 64 KiB at a time as fast as they may to a loopback sink through a \
         `link_rate` of 200 MB/s with bandwidth shares 1:2:3:4; after 200 ms of warm-up, each \
         one's bytes sent over {secs} s as a percentage of all four's. Capped: one task with \
         `bandwidth_limit` 50 MB/s alone on an unlimited link, its rate over {secs} s as a \
         percentage of the cap. Hand-over: the heaviest sender is suspended; the others' bytes \
         are sampled every 0.5 ms, and the figure is the time from the suspension to the end \
         of the first 5 ms window in which they carried 95% of the link (so it is at least \
         5 ms)."
    );
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![Contestant::warden(FAIR).runs(|s: &mut Samples| {
            let (f, capped, hand) = share_round(secs)?;
            for (c, v) in SHARES.iter().zip(f) {
                s.push(&format!("{FAIR}/{c}"), v);
            }
            s.push(&format!("{FAIR}/{CAPPED}"), capped);
            s.push(&format!("{FAIR}/{HANDOVER}"), hand);
            Ok(())
        })],
    );
    t.paper(
        "what was asked (targets: ±2 points, ±2%, ≤ 10 ms)",
        &[
            Some(10.0),
            Some(20.0),
            Some(30.0),
            Some(40.0),
            Some(100.0),
            Some(10.0),
        ],
    );
    if let Some(row) = t.rows.iter().find(|r| r.kind == Kind::Warden) {
        let worst = row.cells[..4]
            .iter()
            .zip([10.0, 20.0, 30.0, 40.0])
            .filter_map(|(c, want)| c.as_ref().map(|c| (c.median - want).abs()))
            .fold(0.0f64, f64::max);
        t.notes.push(format!(
            "Worst share deviation: {worst:.2} percentage points (medians)."
        ));
    }
    m.finish(t)
}

/// The window, ms, over which the hand-over's 95% of the link is judged.
const HANDOVER_WINDOW: f64 = 5.0;

const WARDEN_ECHO: &str = "Warden echo task, socket_buffer = 256 KiB";
const WARDEN_DEFAULT: &str = "Warden echo task, default 64 KiB socket buffers";
/// The 256 KiB row again with Warden's idle spin off.
const WARDEN_BLOCKING: &str = "Warden echo task, socket_buffer = 256 KiB, no idle spin";
const NATIVE_ECHO: &str = "native C epoll echo server";
const STREAM: &str = "64 KiB streaming";
const RTT: &str = "100 B round trip";
const PER_CONN: &str = "RSS per open connection";

/// A server under test: its address, and its process's RSS reader.
struct Server {
    addr: String,
    pid: String,
    _keep: Box<dyn std::any::Any>,
}

fn warden_server(buffer: usize) -> Result<Server, String> {
    warden_server_on(buffer).map(|(server, _)| server)
}

/// [`warden_server`], and the runtime it runs on.
fn warden_server_on(buffer: usize) -> Result<(Server, Runtime), String> {
    let rt = runtime(None);
    let dir = std::env::temp_dir().join(format!("warden-bench-echo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let out = dir.join("echo.out");
    let mut s = quiet("echo", guests::NET);
    s.stdio.stdout = warden::Output::File(out.clone());
    s.args = vec!["echo-poll".into(), "127.0.0.1:0".into()];
    s.net.listen = vec!["127.0.0.1:*".into()];
    s.net.max_sockets = 2100;
    s.net.socket_buffer = buffer;
    s.ipc.max_handles = 4096;
    rt.spawn(&s).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let addr = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if let Some(a) = text.lines().find_map(|l| l.strip_prefix("listening ")) {
            break a.trim().to_string();
        }
        if t.elapsed() > Duration::from_secs(10) {
            return Err("the echo task never listened".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let server = Server {
        addr,
        pid: "self".into(),
        _keep: Box::new(rt.clone()),
    };
    Ok((server, rt))
}

struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn native_server(ctx: &Ctx) -> Result<Server, String> {
    let mut child = Command::new(ctx.peers.native("epoll_echo")?)
        .arg("0")
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let port = line
        .trim()
        .strip_prefix("listening ")
        .ok_or("no port")?
        .to_string();
    let pid = child.id().to_string();
    Ok(Server {
        addr: format!("127.0.0.1:{port}"),
        pid,
        _keep: Box::new(Child(child)),
    })
}

/// MB/s echoed through one connection: a writer sends `total` bytes in
/// 64 KiB writes while a reader takes the echo.
fn stream(addr: &str, total: usize) -> Result<f64, String> {
    let c = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let mut w = c.try_clone().map_err(|e| e.to_string())?;
    let t = Instant::now();
    let writer = std::thread::spawn(move || {
        let b = vec![5u8; 64 * 1024];
        let mut sent = 0;
        while sent < total {
            if w.write_all(&b).is_err() {
                return;
            }
            sent += b.len();
        }
    });
    let mut r = c;
    let mut b = vec![0u8; 1 << 16];
    let mut got = 0;
    while got < total {
        match r.read(&mut b) {
            Ok(0) | Err(_) => return Err("the echo stopped".into()),
            Ok(n) => got += n,
        }
    }
    let secs = t.elapsed().as_secs_f64();
    writer.join().map_err(|_| "writer")?;
    Ok(total as f64 / secs / 1e6)
}

/// µs per round trip of a 100-byte message.
fn round_trips(addr: &str, n: usize) -> Result<f64, String> {
    let mut c = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    c.set_nodelay(true).map_err(|e| e.to_string())?;
    let msg = [9u8; 100];
    let mut back = [0u8; 100];
    for _ in 0..n / 10 {
        c.write_all(&msg).map_err(|e| e.to_string())?;
        c.read_exact(&mut back).map_err(|e| e.to_string())?;
    }
    let t = Instant::now();
    for _ in 0..n {
        c.write_all(&msg).map_err(|e| e.to_string())?;
        c.read_exact(&mut back).map_err(|e| e.to_string())?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

fn rss_kib(pid: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// KiB of server RSS per connection, with `n` connections open and each
/// echoed once (so that every one has been served).
fn per_connection(s: &Server, n: usize) -> Result<f64, String> {
    let before = rss_kib(&s.pid);
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = TcpStream::connect(&s.addr).map_err(|e| e.to_string())?;
        c.write_all(b"x").map_err(|e| e.to_string())?;
        conns.push(c);
    }
    for c in &mut conns {
        c.read_exact(&mut [0u8]).map_err(|e| e.to_string())?;
    }
    Ok((rss_kib(&s.pid) - before) / n as f64)
}

/// Connections [`per_connection`] opens for the memory figure.
const CONNECTIONS: usize = 1000;

fn echo_round(s: &mut Samples, system: &str, server: Server, ctx: &Ctx) -> Result<(), String> {
    let total = ctx.pick(512 << 20, 64 << 20);
    s.push(&format!("{system}/{STREAM}"), stream(&server.addr, total)?);
    s.push(
        &format!("{system}/{RTT}"),
        round_trips(&server.addr, ctx.pick(20_000, 2_000))?,
    );
    s.push(
        &format!("{system}/{PER_CONN}"),
        per_connection(&server, CONNECTIONS)?,
    );
    Ok(())
}

fn echo(ctx: &Ctx) -> Table {
    let mut t = Table::new(
        "net_echo",
        "TCP echo on loopback: Warden task vs native epoll server",
        "network issue (throughput ≥ 80% of native, round trip ≤ 1.5× native)",
        &[(STREAM, "MB/s"), (RTT, "µs"), (PER_CONN, "KiB")],
    );
    // RSS moves by whole 4 KiB pages: growth of less than one page over
    // all the connections cannot be told from none.
    t.resolution
        .push((PER_CONN.into(), 4.0 / CONNECTIONS as f64));
    t.method = echo_method(ctx);
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN_ECHO)
                .runs(|s| echo_round(s, WARDEN_ECHO, warden_server(256 << 10)?, ctx)),
            Contestant::warden(WARDEN_DEFAULT).runs(|s| {
                let server = warden_server(warden::DEFAULT_SOCKET_BUFFER)?;
                echo_round(s, WARDEN_DEFAULT, server, ctx)
            }),
            Contestant::warden(WARDEN_BLOCKING).runs(|s| {
                let (server, rt) = warden_server_on(256 << 10)?;
                without_idle_spin(&[&rt], || echo_round(s, WARDEN_BLOCKING, server, ctx))
            }),
            Contestant::peer(NATIVE_ECHO)
                .runs(|s| echo_round(s, NATIVE_ECHO, native_server(ctx)?, ctx)),
        ],
    );
    t.ratio_from = vec![WARDEN_ECHO.into(), WARDEN_BLOCKING.into()];
    t.notes.push(
        "Each Warden connection is also charged four times its socket_buffer to its task's \
         memory budget (1 MiB at 256 KiB, 256 KiB by default): the host kernel's send and \
         receive buffers it can fill, which Linux doubles and RSS does not show. The native \
         server's buffers grow as Linux tunes them, uncharged; the ratios are the 256 KiB rows'."
            .into(),
    );
    if let (Some(a), Some(b)) = (
        m.samples.cell(&format!("{WARDEN_DEFAULT}/{STREAM}")),
        m.samples.cell(&format!("{NATIVE_ECHO}/{STREAM}")),
    ) {
        t.notes.push(format!(
            "With the default 64 KiB buffers, streaming runs at {:.2}× native.",
            a.median / b.median
        ));
    }
    m.finish(t)
}

fn echo_method(ctx: &Ctx) -> String {
    format!(
        "The same Rust client drives both servers. Streaming: one connection, a writer thread \
         sends {} MiB in 64 KiB writes while the main thread reads the echo; MB/s of echo. Round \
         trip: one connection with TCP_NODELAY, 100-byte message written and its echo read, {} \
         times after a tenth as many for warm-up. Memory: 1,000 connections opened and each \
         echoed once; the server process's RSS growth per connection (Warden's server runs in \
         the harness's own process, so its figure includes the harness's client sockets' user \
         memory). The Warden task serves every connection from one warden_poll loop on a runtime \
         with 2 workers and no link rate, with socket_buffer 256 KiB and with the default; the \
         native server is one epoll thread with Linux's default, self-tuning buffers. Waiting \
         differs: Warden's idle workers look for work awake for up to 50 µs before they sleep \
         (warden::IDLE_SPIN, halved after each look that finds nothing), while epoll_wait blocks at once, so the round trip measures that \
         spin against a wake-up as well as the servers; the row \"{WARDEN_BLOCKING}\" is \
         Warden with the spin off for its rounds (its runtime's idle spin set to zero, Runtime::set_idle_spin), every waiting \
         thread blocking at once as epoll_wait does.",
        ctx.pick(512, 64),
        ctx.pick(20_000, 2_000)
    )
}
