//! Live upgrade under load: a servlet's code replaced while wrk keeps 64
//! connections busy, beside the same servlet with no upgrade.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::model::{Samples, Table};
use std::process::Command;
use std::time::Duration;
use warden_test_guests as guests;

const STEADY: &str = "reference: the same Warden servlet, steady state";
const SWAP: &str = "Warden: supervised servlet, one live upgrade in the second";
const RPS: &str = "requests/s";
const P99: &str = "p99";
const FAILED: &str = "failed requests";
const SWAP_MS: &str = "the upgrade's own time";

pub fn run(ctx: &Ctx) -> Table {
    let mut t = Table::new(
        "upgrade",
        "Live upgrade under load: a servlet's code replaced while it serves",
        "supervision issue (live upgrade)",
        &[
            (RPS, "req/s"),
            (P99, "ms"),
            (FAILED, "requests"),
            (SWAP_MS, "ms"),
        ],
    );
    t.method = "Each system runs in this process (2 workers): a C servlet with restart = \
         \"permanent\" behind a route of its [[http]] server. wrk (2 threads, 64 keep-alive \
         connections, --latency) loads the route for 1 s a round; in the upgrade row, 300 ms \
         into that second the servlet is upgraded (Runtime::upgrade, as `warden upgrade` \
         does) to the other of two servlets answering the same request, in turn. Requests/s \
         and p99 are wrk's; failed requests are wrk's non-2xx answers and socket errors; the \
         upgrade's own time runs from the call until the new servlet holds the name. Medians \
         over the rounds."
        .into();
    // A count below one failed request is none.
    t.resolution.push((FAILED.into(), 1.0));
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            // The reference the upgrade's second is compared with.
            Contestant::peer(STEADY)
                .prepared(Site::start, |site, s| site.second(s, STEADY, false))
                .absent(&[SWAP_MS], "no upgrade is made in this row"),
            Contestant::warden(SWAP).prepared(Site::start, |site, s| site.second(s, SWAP, true)),
        ],
    );
    t.notes.push(
        "Target: no failed request, and the upgrade's second within 2× of steady state's p99 \
         (the ratio row: the upgrade's second over the steady reference). Failed requests \
         \"below resolution\" means fewer than one: none failed."
            .into(),
    );
    m.finish(t)
}

/// One Warden system under test, and the module it runs now.
struct Site {
    system: warden::System,
    url: String,
    next: usize,
}

/// Two servlets answering `GET /count/x` 200, which upgrades alternate.
const SERVLETS: [&str; 2] = [guests::SERVLET, guests::PAGE_SERVLET];

impl Site {
    fn start() -> Result<Site, String> {
        let text = format!(
            "[runtime]\ncontrol = \"off\"\ncache = false\nworkers = 2\n\
             [[task]]\nname = \"counter\"\nmodule = \"{}\"\nargs = [\"counter\", \"100\"]\n\
             provides = [\"counter\"]\nrestart = \"permanent\"\nstdout = \"null\"\n\
             [[http]]\nlisten = \"127.0.0.1:0\"\n\
             [[http.route]]\npath = \"/count/*\"\nservice = \"counter\"\ntimeout = \"5s\"\n",
            SERVLETS[0]
        );
        let m = warden::Manifest::parse(&text, std::path::Path::new("/"))?;
        let system = warden::System::start(warden::SystemSpec::from_manifest(m))?;
        let url = format!("http://{}/count/x", system.servers()[0].addr());
        super::web::ready(&url)?;
        Ok(Site {
            system,
            url,
            next: 1,
        })
    }

    /// One second of wrk, with an upgrade 300 ms in if `swap`.
    fn second(&mut self, s: &mut Samples, row: &str, swap: bool) -> Result<(), String> {
        let url = self.url.clone();
        let load = std::thread::spawn(move || wrk_counting(&url));
        if swap {
            std::thread::sleep(Duration::from_millis(300));
            let module = std::path::Path::new(SERVLETS[self.next]);
            self.next = 1 - self.next;
            let t = std::time::Instant::now();
            self.system.runtime().upgrade("counter", Some(module))?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            s.push(&format!("{row}/{SWAP_MS}"), ms);
        }
        let (rps, p99, failed) = load.join().map_err(|_| "wrk thread")??;
        s.push(&format!("{row}/{RPS}"), rps);
        s.push(&format!("{row}/{P99}"), p99);
        s.push(&format!("{row}/{FAILED}"), failed);
        Ok(())
    }
}

/// wrk for 1 s at 64 connections: requests/s, p99 (ms) and the requests
/// that failed (non-2xx answers and socket errors).
fn wrk_counting(url: &str) -> Result<(f64, f64, f64), String> {
    let out = Command::new("wrk")
        .args(["-t2", "-c64", "-d1s", "--latency", url])
        .output()
        .map_err(|e| format!("wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let number = |prefix: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix)?.trim().parse().ok())
    };
    let rps = number("Requests/sec:").ok_or_else(|| format!("wrk said: {text}"))?;
    let p99 = text
        .lines()
        .find_map(|l| super::web::latency_ms(l.trim().strip_prefix("99%")?.trim()))
        .ok_or_else(|| format!("wrk said: {text}"))?;
    let non_2xx = number("Non-2xx or 3xx responses:").unwrap_or(0.0);
    let socket: f64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Socket errors:"))
        .map_or(0.0, |rest| {
            rest.split(',')
                .filter_map(|kv| kv.split_whitespace().last()?.parse::<f64>().ok())
                .sum()
        });
    Ok((rps, p99, non_2xx + socket))
}
