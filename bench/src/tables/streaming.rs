//! Streamed answers: time to first byte and throughput of a long answer
//! from a per-request task (WAGI) and from a servlet streaming on its
//! request's exchange, beside plain hyper streaming the same bytes from
//! memory.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::model::{Samples, Table};
use std::process::Command;
use warden_test_guests as guests;

const WARDEN: &str = "Warden server, per-request task (WAGI) streaming";
const SERVLET: &str = "Warden server, servlet task streaming on the request's exchange";
const HYPER: &str = "native hyper streaming from memory";
const TTFB_SMALL: &str = "1 MiB: first byte";
const TTFB_LARGE: &str = "LARGE: first byte";
const RATE: &str = "LARGE: throughput";

pub fn run(ctx: &Ctx) -> Table {
    let large: u64 = ctx.pick(1 << 30, 256 << 20);
    let runs: usize = ctx.pick(5, 3);
    let name = |c: &str| c.replace("LARGE", &format!("{} MiB", large >> 20));
    let cols = [
        (name(TTFB_SMALL), "ms"),
        (name(TTFB_LARGE), "ms"),
        (name(RATE), "MB/s"),
    ];
    let cols: Vec<(&str, &str)> = cols.iter().map(|(c, u)| (c.as_str(), *u)).collect();
    let mut t = Table::new(
        "streaming",
        "Streamed answers: time to first byte and throughput",
        "production edges issue (streamed bodies)",
        &cols,
    );
    t.method = format!(
        "curl (one process per request, HTTP/1.1 on loopback, body discarded) fetches a 1 MiB \
         and a {} MiB answer from each server and reports when the first byte arrived \
         (time_starttransfer) and the download's rate (speed_download). Warden: its [[http]] \
         server in this process (2 workers) with a route running a fresh C task per request \
         that writes the answer to stdout 64 KiB at a time (a handler still writing after 10 \
         ms is streamed), and a route to a servlet task that replies with the head at once and \
         sends the body on the request's exchange 64 KiB at a time (`warden_sock_send`). Peer: hyper on a 2-worker tokio runtime in this process streaming \
         the same number of bytes from memory in 64 KiB frames. Each round fetches each answer \
         {runs} times from each server, in turn, and takes the median.",
        large >> 20
    );
    let warden = warden_site();
    let servlet = servlet_site();
    let hyper = hyper_site();
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN).runs(|s| {
                let site = warden.as_ref().map_err(Clone::clone)?;
                fetches(s, WARDEN, &site.0, large, runs, &name)
            }),
            Contestant::warden(SERVLET).runs(|s| {
                let site = servlet.as_ref().map_err(Clone::clone)?;
                fetches(s, SERVLET, &site.0, large, runs, &name)
            }),
            Contestant::peer(HYPER).runs(|s| {
                let site = hyper.as_ref().map_err(Clone::clone)?;
                fetches(s, HYPER, &site.0, large, runs, &name)
            }),
        ],
    );
    t.notes.push(
        "Target: the first byte of a long answer comes as soon as a short one's does, \
         whatever its length, and a streamed answer's rate is within a small factor of \
         hyper's."
            .into(),
    );
    m.finish(t)
}

/// One round of `system` at `base` (a URL to which the length is added).
fn fetches(
    s: &mut Samples,
    system: &str,
    base: &str,
    large: u64,
    runs: usize,
    name: &dyn Fn(&str) -> String,
) -> Result<(), String> {
    let mut small = Vec::new();
    let mut first = Vec::new();
    let mut rate = Vec::new();
    for _ in 0..runs {
        small.push(fetch(&format!("{base}{}", 1 << 20), 1 << 20)?.0);
        let (ttfb, mbps) = fetch(&format!("{base}{large}"), large)?;
        first.push(ttfb);
        rate.push(mbps);
    }
    s.push(&format!("{system}/{}", name(TTFB_SMALL)), median(small));
    s.push(&format!("{system}/{}", name(TTFB_LARGE)), median(first));
    s.push(&format!("{system}/{}", name(RATE)), median(rate));
    Ok(())
}

/// Fetches `url`, which must give `len` bytes: its time to first byte
/// (ms) and rate (MB/s).
fn fetch(url: &str, len: u64) -> Result<(f64, f64), String> {
    let out = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{time_starttransfer} %{speed_download} %{size_download}",
        ])
        .arg(url)
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: Vec<f64> = text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    match v[..] {
        [ttfb, rate, size] if out.status.success() && size as u64 == len => {
            Ok((ttfb * 1e3, rate / 1e6))
        }
        _ => Err(format!(
            "{url}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A server under test: the URL its lengths are added to, and what
/// keeps it serving.
struct Site(String, #[allow(dead_code)] Box<dyn std::any::Any>);

/// Warden's server with a WAGI route whose handler writes `stream=N`
/// bytes 64 KiB at a time.
fn warden_site() -> Result<Site, String> {
    let text = format!(
        "[[http]]\nlisten = \"127.0.0.1:0\"\n[[http.route]]\npath = \"/dl\"\nmodule = \"{}\"\n\
         memory_limit = \"8MiB\"\ntimeout = \"300s\"\nmax_response = \"4GiB\"\n",
        guests::WAGI
    );
    let (rt, server) = super::web::system(&text)?;
    let server = server.ok_or("no server")?;
    let base = format!("http://{}/dl?stream=", server.addr());
    super::web::ready(&format!("{base}1"))?;
    Ok(Site(base, Box::new((rt, server))))
}

/// Warden's server with a route to the test servlet, which streams
/// `/s/stream/N` bytes on the request's exchange 64 KiB at a time.
fn servlet_site() -> Result<Site, String> {
    let text = format!(
        "[[task]]\nname = \"counter\"\nmodule = \"{}\"\nprovides = [\"counter\"]\n\
         memory_limit = \"16MiB\"\n[[http]]\nlisten = \"127.0.0.1:0\"\n[[http.route]]\n\
         path = \"/s/*\"\nservice = \"counter\"\ntimeout = \"300s\"\nmax_response = \"4GiB\"\n",
        guests::SERVLET
    );
    let (rt, server) = super::web::system(&text)?;
    let server = server.ok_or("no server")?;
    let base = format!("http://{}/s/stream/", server.addr());
    super::web::ready(&format!("{base}1"))?;
    Ok(Site(base, Box::new((rt, server))))
}

/// hyper on a 2-worker tokio runtime answering `/?N` with N bytes, in
/// 64 KiB frames of one buffer.
fn hyper_site() -> Result<Site, String> {
    let (rt, listener, addr) = super::web::hyper_listener()?;
    rt.spawn(async move {
        let block = bytes::Bytes::from(vec![b'x'; 64 << 10]);
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let block = block.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let n: u64 = req.uri().query().and_then(|q| q.parse().ok()).unwrap_or(0);
                        let block = block.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(frames(
                                block, n,
                            )))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let base = format!("http://{addr}/?");
    super::web::ready(&format!("{base}1"))?;
    Ok(Site(base, Box::new(rt)))
}

/// A body of `n` bytes in frames cut from `block`.
fn frames(
    block: bytes::Bytes,
    n: u64,
) -> http_body_util::StreamBody<
    impl futures_util::Stream<Item = Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>>,
> {
    let pieces = futures_util::stream::unfold(n, move |left| {
        let block = block.clone();
        async move {
            (left > 0).then(|| {
                let k = left.min(block.len() as u64) as usize;
                (
                    Ok(hyper::body::Frame::data(block.slice(..k))),
                    left - k as u64,
                )
            })
        }
    });
    http_body_util::StreamBody::new(pieces)
}
