//! Supervision: crash to service restored. A supervised servlet behind a
//! web route is killed, and the time until its route answers from the new
//! instance is taken, beside Erlang/OTP restoring a supervised
//! gen_server.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::model::{Samples, Table};
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use warden_test_guests as guests;

const WARDEN: &str = "Warden: supervised servlet, kill to its route's first 200";
const OTP: &str = "Erlang/OTP: supervised gen_server, kill to first call";
const RESTORED: &str = "crash to service restored";

pub fn run(ctx: &Ctx) -> Table {
    let kills: usize = ctx.pick(200, 40);
    let mut t = Table::new(
        "restore",
        "Supervision: crash to service restored",
        "supervision issue (restarts)",
        &[(RESTORED, "µs")],
    );
    t.method = format!(
        "Warden: a system in this process (2 workers) whose C servlet has restart = \
         \"permanent\" under a one_for_one supervisor with no backoff and an intensity it \
         never reaches, behind a route of its [[http]] server. Each kill is the kernel's \
         (Runtime::kill, as the control API's); the time runs from the kill until a request \
         to the route (one HTTP/1.1 connection each, on loopback) is answered 200 by the new \
         servlet (its count starts again at 1): the restart, the new instance, its name \
         registered again and one request through the server. Erlang/OTP: a one_for_one \
         supervisor with a registered gen_server child in one `erl` node; the time runs from \
         exit(Pid, kill) until gen_server:call through the registered name is answered by a \
         new process (calls finding none are retried at once). Each round takes {kills} kills \
         of each, in turn, and reports the median."
    );
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN).prepared(Site::start, move |site, s| {
                let v = site.restores(kills)?;
                s.push(&format!("{WARDEN}/{RESTORED}"), v);
                Ok(())
            }),
            Contestant::peer(OTP).runs(|s| otp(ctx, s, kills)),
        ],
    );
    t.notes.push(
        "Warden's figure holds a request through its web server (a connection, a portal call \
         and the answer) that OTP's in-node call does not; both restart at once (Warden's \
         default backoff, 10 ms, is set to 0 here as OTP has none)."
            .into(),
    );
    m.finish(t)
}

/// One round of OTP's figure: `erl` restoring its child `kills` times.
fn otp(ctx: &Ctx, s: &mut Samples, kills: usize) -> Result<(), String> {
    let out = ctx
        .peers
        .erlang_main("restore", &[kills.to_string()])?
        .output()
        .map_err(|e| format!("erl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let ns: f64 = (text.lines())
        .find_map(|l| l.strip_prefix("restore "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("erl said: {text}"))?;
    s.push(&format!("{OTP}/{RESTORED}"), ns / 1e3);
    Ok(())
}

/// The Warden system under test.
struct Site {
    system: warden::System,
    addr: String,
}

impl Site {
    fn start() -> Result<Site, String> {
        let text = format!(
            "[runtime]\ncontrol = \"off\"\ncache = false\nworkers = 2\n\
             [[task]]\nname = \"counter\"\nmodule = \"{}\"\nprovides = [\"counter\"]\n\
             restart = \"permanent\"\nstdout = \"null\"\n\
             [[supervisor]]\nname = \"s\"\nmax_restarts = 1000000\nwithin = \"1s\"\n\
             backoff = \"0s\"\nmembers = [\"counter\"]\n\
             [[http]]\nlisten = \"127.0.0.1:0\"\n\
             [[http.route]]\npath = \"/count/*\"\nservice = \"counter\"\ntimeout = \"5s\"\n",
            guests::SERVLET
        );
        let m = warden::Manifest::parse(&text, std::path::Path::new("/"))?;
        let system = warden::System::start(warden::SystemSpec::from_manifest(m))?;
        let addr = system.servers()[0].addr().to_string();
        super::web::ready(&format!("http://{addr}/count/x"))?;
        Ok(Site { system, addr })
    }

    /// The median time, µs, of `kills` kills to the first answer of the
    /// new servlet.
    fn restores(&self, kills: usize) -> Result<f64, String> {
        let rt = self.system.runtime();
        let mut times = Vec::with_capacity(kills);
        for _ in 0..kills {
            let id = (rt.live_tasks().into_iter())
                .find(|v| v.name == "counter")
                .ok_or("no servlet")?
                .id;
            let t = Instant::now();
            rt.kill(id, "killed by the benchmark")
                .map_err(|e| e.to_string())?;
            while get_count(&self.addr)?.as_deref() != Some("count 1") {
                if t.elapsed() > Duration::from_secs(10) {
                    return Err("the servlet never came back".into());
                }
            }
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        times.sort_by(|a, b| a.total_cmp(b));
        Ok(times[times.len() / 2])
    }
}

/// `GET /count/x` on a connection of its own: the body if answered 200.
fn get_count(addr: &str) -> Result<Option<String>, String> {
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.write_all(b"GET /count/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    let ok = text.starts_with("HTTP/1.1 200");
    Ok(ok
        .then(|| {
            text.split_once("\r\n\r\n")
                .map(|(_, b)| b.trim().to_string())
        })
        .flatten())
}
