//! Seeded, reproducible fuzzing of everything outsiders hand the host:
//! guests' `warden` and WASI calls (the `fuzz` guest), manifests,
//! control API requests, per-request handlers' CGI responses, and HTTP/2
//! frame sequences from clients. Each test runs for `WARDEN_FUZZ_SECONDS` (10 by
//! default) from seed `WARDEN_FUZZ_SEED` (1 by default); `scripts/fuzz`
//! runs them for as long as wanted. A failure names its seed; a seed that
//! once found a crash goes into `FOUND` below and runs every time.

use crate::util::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Seeds that once found a defect, replayed on every run.
const FOUND: &[u64] = &[];

fn budget() -> Duration {
    let secs = std::env::var("WARDEN_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok());
    Duration::from_secs(secs.unwrap_or(10))
}

fn first_seed() -> u64 {
    std::env::var("WARDEN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// The seeds to try: the found ones, the first seed, then the next ones
/// until the budget is spent.
fn seeds() -> impl Iterator<Item = u64> {
    let t = Instant::now();
    let limit = budget();
    let first = first_seed();
    FOUND
        .iter()
        .copied()
        .chain(std::iter::once(first))
        .chain((first + 1..).take_while(move |_| t.elapsed() < limit))
}

/// xorshift64: the same seed, the same inputs.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn below64(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Guests calling every host function and WASI call at random, two at a
/// time, beside an echo client that must be served throughout.
#[test]
fn guest_calls() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut srv = spec(dir.path(), "srv", guests::ECHO);
    srv.args = vec!["server".into(), "echo".into()];
    srv.ipc.provides = vec!["echo".into()];
    let srv = rt.spawn(&srv).unwrap();
    let mut client = spec(dir.path(), "client", guests::ECHO);
    client.args = ["client", "echo", "1000000", "steady"]
        .map(String::from)
        .to_vec();
    client.ipc.uses = vec!["echo".into()];
    let client = rt.spawn(&client).unwrap();
    let mut tried = 0;
    let mut next = seeds();
    loop {
        let batch: Vec<u64> = next.by_ref().take(2).collect();
        if batch.is_empty() {
            break;
        }
        let runs: Vec<_> = batch
            .iter()
            .map(|&seed| (seed, fuzzer(&rt, dir.path(), seed)))
            .collect();
        for (seed, id) in runs {
            let r = wait(&rt, id, Duration::from_secs(120));
            let out = stdout_of(dir.path(), &format!("fuzz{seed}"));
            let last = out.lines().last().unwrap_or("");
            assert!(
                r.status == "exited"
                    && r.exit_code == Some(0)
                    && last.starts_with("fuzz: 3000 calls"),
                "seed {seed} (reproduce: scripts/fuzz --seed {seed}): {r:?}\n{last}"
            );
            tried += 1;
        }
    }
    assert!(tried >= 1);
    let c = rt
        .task_views()
        .into_iter()
        .find(|v| v.id == client)
        .unwrap();
    assert!(
        c.ipc_calls > 0 && !["trapped", "killed"].contains(&c.state.as_str()),
        "{c:?}"
    );
    eprintln!("guest fuzzing: {tried} seeds from {}", first_seed());
    let _ = rt.kill(client, "done");
    rt.kill(srv, "done").unwrap();
}

fn fuzzer(rt: &warden::Runtime, dir: &std::path::Path, seed: u64) -> warden::TaskId {
    let root = dir.join(format!("fz{seed}"));
    std::fs::create_dir_all(&root).unwrap();
    let mut f = spec(dir, &format!("fuzz{seed}"), guests::FUZZ);
    f.args = vec![seed.to_string(), "3000".into()];
    f.ipc.provides = vec!["fz*".into()];
    f.ipc.uses = vec!["fz*".into()];
    f.dirs = vec![("/fz".into(), root)];
    f.limits.memory_limit = Some(64 << 20);
    f.limits.cpu_limit = Some(Duration::from_secs(60));
    // Loopback only: its own listeners, and connections to them.
    f.net.listen = vec!["127.0.0.1:0".into(), "[::1]:0".into()];
    f.net.connect = vec!["127.0.0.1:*".into(), "[::1]:*".into()];
    rt.spawn(&f).unwrap()
}

/// A manifest that uses every key.
const FULL: &str = r#"[runtime]
workers = 2
slice_ms = 4
max_tasks = 100
scheduler = "stride"
control = "off"
link_rate = "40MB/s"

[[group]]
name = "org"
policy = "priority"
share = 2
tickets = 200
priority = 1
cap = 0.5
cpu_quota = "10s"
bandwidth_share = 2
bandwidth_limit = "10MB/s"

[[task]]
name = "worker"
module = "MODULE"
args = ["--fast", "{name}", "{index}"]
env = { LANG = "C" }
memory_limit = "64MiB"
on_memory_limit = "deny"
cpu_limit = "2s"
on_cpu_limit = "kill"
count = 4
stdout = "null"
stderr = "inherit"
stdin = "null"
provides = ["kv", "log.*"]
uses = ["kv"]
max_handles = 1024
max_message_bytes = "64KiB"
max_message_handles = 16
group = "org"
share = 1
tickets = 100
priority = 0
cap = 0.25
inheritance = true
modules = { self = "MODULE" }
listen = ["127.0.0.1:8000-8099"]
connect = ["10.0.0.0/8:*"]
preopen_listeners = ["127.0.0.1:0"]
bandwidth_share = 1
bandwidth_limit = "5MB/s"
receive_limit = "5MB/s"
max_sockets = 256
socket_buffer = "64KiB"
"#;

/// What mutations insert: syntax, extremes, wrong types.
const TOKENS: &[&str] = &[
    "=",
    "[",
    "]]",
    "[[task]]",
    "\"",
    "'",
    "{",
    "}",
    ",",
    "\n",
    "-1",
    "0",
    "1e999",
    "nan",
    "18446744073709551616",
    "99999999999999999999PiB",
    "\"1 ZiB\"",
    "\"-5s\"",
    "\"\"",
    "true",
    "\u{0}",
    "\u{feff}",
    "count = 100000000",
    "name = \"\"",
    "max_tasks = 4294967295",
    "cap = -1.0",
    "slice_ms = 0",
    "\"../../etc/passwd\"",
    "\"{name}{name}{name}\"",
];

/// Mangled manifests: each is accepted or refused with a message, never
/// a panic.
#[test]
fn manifests() {
    let dir = tempfile::tempdir().unwrap();
    let base = FULL.replace("MODULE", guests::HELLO);
    assert!(
        warden::Manifest::parse(&base, dir.path()).is_ok(),
        "the base parses"
    );
    let mut tried = 0u64;
    for seed in seeds() {
        let mut rng = Rng::new(seed);
        for _ in 0..200 {
            let mut text = base.clone().into_bytes();
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut text);
            }
            let text = String::from_utf8_lossy(&text);
            let parsed = std::panic::catch_unwind(|| warden::Manifest::parse(&text, dir.path()));
            assert!(
                parsed.is_ok(),
                "seed {seed}: the parser panicked on:\n{text}"
            );
            tried += 1;
        }
    }
    eprintln!(
        "manifest fuzzing: {tried} manifests from seed {}",
        first_seed()
    );
}

fn mutate(rng: &mut Rng, text: &mut Vec<u8>) {
    let at = rng.below(text.len() + 1);
    match rng.below(4) {
        0 => {
            let end = (at + rng.below(40)).min(text.len());
            text.drain(at..end);
        }
        1 => {
            let token = rng.pick(TOKENS).as_bytes().to_vec();
            text.splice(at..at, token);
        }
        2 if at < text.len() => text[at] = rng.next() as u8,
        _ => {
            let end = (at + rng.below(80)).min(text.len());
            let copy = text[at..end].to_vec();
            let to = rng.below(text.len() + 1);
            text.splice(to..to, copy);
        }
    }
}

/// Random requests to a live control API: every one is answered or its
/// connection closed, within the server's own timeouts; afterwards the
/// API still answers and the task it serves is untouched.
#[test]
fn control_requests() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let sleeper = rt
        .spawn(&spec(dir.path(), "sleeper", guests::SLEEP))
        .unwrap();
    let server =
        warden::control::ControlServer::start(rt.clone(), "127.0.0.1:0", None, |_, _, _, _| {})
            .unwrap();
    let addr = server.addr.to_string();
    let token = server.token().as_str().to_string();
    let mut tried = 0u64;
    for seed in seeds() {
        let mut rng = Rng::new(seed);
        for _ in 0..20 {
            let request = random_request(&mut rng, &addr, &token);
            let answer = exchange(&addr, &request);
            assert!(
                answer.is_empty() || answer.starts_with(b"HTTP/1.1 "),
                "seed {seed}: not HTTP: {:?}",
                String::from_utf8_lossy(&answer[..answer.len().min(200)])
            );
            let ok = exchange(
                &addr,
                format!("GET /api/tasks HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
            );
            assert!(
                ok.starts_with(b"HTTP/1.1 200"),
                "seed {seed}: after {:?}:\n{}",
                String::from_utf8_lossy(&request[..request.len().min(300)]),
                String::from_utf8_lossy(&ok)
            );
            tried += 1;
        }
    }
    let ok = exchange(
        &addr,
        format!("GET /api/tasks HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    );
    assert!(
        ok.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&ok)
    );
    let v = rt
        .task_views()
        .into_iter()
        .find(|v| v.id == sleeper)
        .unwrap();
    assert_eq!(v.state, "blocked", "a random request reached the sleeper");
    eprintln!(
        "control fuzzing: {tried} requests from seed {}",
        first_seed()
    );
    drop(server);
    rt.kill(sleeper, "done").unwrap();
}

/// Sends `request`, half-closes, and reads the answer (10 s at most).
fn exchange(addr: &str, request: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut answer = Vec::new();
    match s.read_to_end(&mut answer) {
        Err(e)
            if e.kind() == std::io::ErrorKind::WouldBlock
                || e.kind() == std::io::ErrorKind::TimedOut =>
        {
            panic!(
                "no answer within 10 s to {:?}",
                String::from_utf8_lossy(request)
            )
        }
        _ => answer,
    }
}

fn random_request(rng: &mut Rng, addr: &str, token: &str) -> Vec<u8> {
    let method = *rng.pick(&[
        "GET",
        "POST",
        "PUT",
        "DELETE",
        "get",
        "GÉT",
        "",
        "POST POST",
    ]);
    let paths = [
        "/api/tasks",
        "/api/tasks/nobody/kill",
        "/api/tasks/999/suspend",
        "/api/tasks/sleeper/bogus",
        "/api/tasks/%ff%00/logs?from=18446744073709551615",
        "/api/spawn",
        "/metrics",
        "/api/history",
        "/",
        "/uplot.js",
        "//..//api/tasks",
        "/api/tasks/x/logs?from=-1",
        "*",
        "http://evil.example/api/tasks",
    ];
    let mut path = rng.pick(&paths).to_string();
    if rng.below(4) == 0 {
        path.push_str(&"%".repeat(rng.below(3)));
        path.push_str(&"a/".repeat(rng.below(2000)));
    }
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    let hosts = [
        addr.to_string(),
        "evil.example".into(),
        "".into(),
        "[::1]".into(),
        "localhost:1".into(),
    ];
    if rng.below(5) != 0 {
        head.push_str(&format!("Host: {}\r\n", rng.pick(&hosts)));
    }
    if rng.below(3) == 0 {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if rng.below(4) == 0 {
        let origins = [
            "Origin: http://evil.example\r\n",
            "Origin: null\r\n",
            "Origin: \r\n",
        ];
        let origin = *rng.pick(&origins);
        head.push_str(origin);
    }
    let body: Vec<u8> = match rng.below(5) {
        0 => Vec::new(),
        1 => br#"{"module": "/nonexistent.wasm", "args": ["a"], "memory_limit": "1ZiB"}"#.to_vec(),
        2 => br#"{"module": 5, "extra": true}"#.to_vec(),
        3 => (0..rng.below(100_000)).map(|_| rng.next() as u8).collect(),
        _ => b"{\"module\": \"".repeat(rng.below(1000)),
    };
    match rng.below(4) {
        0 => head.push_str(&format!("Content-Length: {}\r\n", body.len())),
        1 => head.push_str(&format!("Content-Length: {}\r\n", rng.next())),
        2 => head.push_str("Transfer-Encoding: chunked\r\n"),
        _ => {}
    }
    for _ in 0..rng.below(3) {
        head.push_str(&format!(
            "X-{}: {}\r\n",
            rng.next(),
            "v".repeat(rng.below(20_000))
        ));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// Per-request handlers writing random responses (the WAGI guest's
/// `fuzz=SEED`: CGI-shaped lines of random names, values and statuses,
/// random bytes, long lines, thousands of headers): every request is
/// answered with a status, and the bystander after.
#[test]
fn cgi_responses() {
    use crate::hostile::site::*;
    let site = Site::start(&format!(
        "[[http]]\nlisten = \"127.0.0.1:0\"\n{}\n[[http.route]]\npath = \"/out\"\n\
         module = \"{}\"\nmemory_limit = \"16MiB\"\ntimeout = \"20s\"\n",
        bystander_route(),
        guests::WAGI
    ));
    let mut seen = std::collections::BTreeMap::new();
    for seed in seeds() {
        let (status, body) = http1(site.addr(), "GET", &format!("/out?fuzz={seed}"), &[], b"");
        assert!(
            (200..600).contains(&status),
            "seed {seed}: no answer ({status}: {body})"
        );
        *seen.entry(status).or_insert(0) += 1;
    }
    eprintln!("CGI fuzzing: statuses {seen:?}");
    site.bystander_answers();
    let stderr = site.served.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Clients sending the HTTP/2 preface and then random frame sequences,
/// four connections at a time: real requests mixed with resets, window
/// updates, settings, pings, priority, GOAWAY, CONTINUATION without
/// HEADERS, frames on streams never opened, lengths that lie, unknown
/// types and garbage. The server may close any connection, but must not
/// panic, hang or grow, and the bystander is answered after.
#[test]
fn http2_frames() {
    use crate::hostile::site::*;
    let site = Site::start(&format!(
        "[[http]]\nlisten = \"127.0.0.1:0\"\n{}",
        bystander_route()
    ));
    let (before, hwm) = site.rss();
    let mut tried = 0;
    let mut seeds = seeds().peekable();
    while seeds.peek().is_some() {
        let batch: Vec<u64> = seeds.by_ref().take(4).collect();
        std::thread::scope(|s| {
            for &seed in &batch {
                let addr = site.addr().to_string();
                s.spawn(move || {
                    for i in 0..25 {
                        h2_attack(
                            &addr,
                            seed * 100 + i,
                            1 + (seed as usize * 7 + i as usize) % 60,
                        );
                    }
                });
            }
        });
        tried += batch.len() * 10;
        site.bystander_answers();
    }
    let (_, peak) = site.rss();
    eprintln!(
        "HTTP/2 fuzzing: {tried} connections; RSS {} -> peak {} MiB",
        before >> 20,
        peak >> 20
    );
    assert!(
        peak <= hwm.max(before + (64 << 20)),
        "RSS {} -> peak {} MiB",
        before >> 20,
        peak >> 20
    );
    let stderr = site.served.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// One connection: the preface, `frames` random frames, then whatever
/// the server answers until it closes or falls silent.
fn h2_attack(addr: &str, seed: u64, frames: usize) {
    let mut rng = Rng::new(seed);
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(4, 0, 0, &[]));
    let mut streams = 1;
    for _ in 0..frames {
        out.extend(random_frame(&mut rng, &mut streams));
    }
    if s.write_all(&out).is_err() {
        return;
    }
    let mut buf = [0u8; 65536];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
    }
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A HEADERS block (HPACK) for `GET /hello`, or `POST` with a body.
fn request_block(post: bool) -> Vec<u8> {
    let mut b = vec![if post { 0x83 } else { 0x82 }, 0x86, 0x44, 6];
    b.extend_from_slice(b"/hello");
    b.extend_from_slice(&[0x41, 1, b'x']);
    b
}

/// One random frame (or piece of garbage).
fn random_frame(rng: &mut Rng, streams: &mut u32) -> Vec<u8> {
    let stream = match rng.below64(4) {
        0 => 0,
        1 => *streams,
        2 => rng.below64(1 << 31) as u32,
        _ => (*streams).saturating_sub(2 * rng.below64(3) as u32),
    };
    let payload_len = match rng.below64(4) {
        0 => 0,
        1 => rng.below64(16) as usize,
        2 => rng.below64(1024) as usize,
        _ => rng.below64(20_000) as usize,
    };
    match rng.below64(14) {
        0 | 1 => {
            *streams += 2;
            let post = rng.below64(2) == 0;
            let flags = if post { 0x4 } else { 0x5 };
            frame(1, flags, *streams, &request_block(post))
        }
        2 => frame(0, rng.below64(2) as u8, stream, &rng.bytes(payload_len)),
        3 => frame(3, 0, stream, &(rng.below64(16) as u32).to_be_bytes()),
        4 => frame(8, 0, stream, &(rng.next() as u32).to_be_bytes()),
        5 => {
            let mut s = Vec::new();
            for _ in 0..rng.below64(8) {
                s.extend_from_slice(&(rng.below64(10) as u16).to_be_bytes());
                s.extend_from_slice(&(rng.next() as u32).to_be_bytes());
            }
            frame(4, rng.below64(2) as u8, 0, &s)
        }
        6 => frame(6, rng.below64(2) as u8, 0, &rng.bytes(8)),
        7 => frame(2, 0, stream, &rng.bytes(5)),
        8 => frame(9, rng.below64(2) as u8 * 4, stream, &rng.bytes(payload_len)),
        9 => {
            let n = 8 + rng.below64(16) as usize;
            frame(7, 0, 0, &rng.bytes(n))
        }
        10 => frame(1, rng.next() as u8, stream, &rng.bytes(payload_len)),
        11 => frame(
            rng.below64(256) as u8,
            rng.next() as u8,
            stream,
            &rng.bytes(payload_len),
        ),
        12 => {
            // A length that lies about what follows.
            let mut f = frame(0, 0, stream, &rng.bytes(payload_len));
            f[0] = rng.next() as u8;
            f
        }
        _ => rng.bytes(payload_len.min(64)),
    }
}
