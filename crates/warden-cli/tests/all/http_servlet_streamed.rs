//! Streamed bodies on servlet routes: a servlet reads the rest of a long
//! request body from the request's exchange as it arrives, and streams an
//! answer of any length on it, within the server's budgets, ending it
//! complete only with a shutdown.

use crate::hostile::site::Site;
use crate::http_streamed::download;
use crate::util::{guests, http1_body};
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;

/// A site whose route `/s/*` calls the test servlet (`task_keys` added to
/// its task, `route_keys` to its route, in place of the defaults they
/// name), once the servlet answers.
fn site(task_keys: &str, route_keys: &str) -> Site {
    let defaults = ["timeout = \"300s\"", "max_response = \"4GiB\""];
    let mut route_keys = route_keys.to_string();
    for key in defaults {
        let name = key.split(' ').next().unwrap();
        if !route_keys.contains(name) {
            route_keys = format!("{route_keys}\n{key}");
        }
    }
    let site = Site::start(&format!(
        r#"
[[task]]
name = "counter"
module = "{servlet}"
provides = ["counter"]
memory_limit = "16MiB"
{task_keys}

[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/s/*"
service = "counter"
max_body = "64MiB"
{route_keys}
"#,
        servlet = guests::SERVLET,
    ));
    let url = format!("http://{}/s/x", site.addr());
    site.until("the servlet", Duration::from_secs(20), || {
        download(&url, &[]).0 == "200"
    });
    site
}

/// A gigabyte streamed by a servlet goes out through a server whose
/// resident set grows by less than 64 MiB; over HTTP/2 too.
#[test]
fn a_servlet_streams_a_gigabyte_within_a_small_resident_set() {
    let site = site("", "");
    let url = format!("http://{}/s/stream/1000", site.addr());
    assert_eq!(download(&url, &[]), ("200".into(), 1000, true));
    let (_, before) = site.rss();
    let url = format!("http://{}/s/stream/{GIB}", site.addr());
    assert_eq!(download(&url, &[]), ("200".into(), GIB, true));
    let (_, peak) = site.rss();
    assert!(
        peak < before + (64 << 20),
        "peak RSS grew by {} MiB",
        (peak - before) >> 20
    );
    let url = format!("http://{}/s/stream/{}", site.addr(), 64 << 20);
    let got = download(&url, &["--http2-prior-knowledge"]);
    assert_eq!(got, ("200".into(), 64 << 20, true));
}

/// A servlet answers at once and reads the body after: the client has the
/// answer's head while it still holds back most of its body, and the
/// servlet counts every byte once it comes (the message's part and the
/// exchange's).
#[test]
fn a_servlet_answers_before_its_request_has_all_arrived() {
    let site = site("", "");
    let (first, second) = (200usize << 10, 300usize << 10);
    let mut s = std::net::TcpStream::connect(site.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /s/upload HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        first + second
    )
    .unwrap();
    s.write_all(&vec![b'a'; first]).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let at = loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
    };
    let head = String::from_utf8_lossy(&raw[..at]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s.write_all(&vec![b'b'; second]).unwrap();
    let _ = s.read_to_end(&mut raw);
    let (body, whole) = http1_body(&head, &raw[at + 4..]);
    assert!(whole, "the answer ended properly");
    let sum = first * b'a' as usize + second * b'b' as usize;
    let want = format!("got {} sum {sum}\n", first + second);
    assert_eq!(String::from_utf8_lossy(&body), want);
}

/// A 48 MiB upload reaches the servlet as it arrives, every byte, with
/// the server's resident set growing by much less; past `max_body` the
/// servlet's read fails and it never gets more.
#[test]
fn a_long_upload_reaches_a_servlet_as_it_arrives() {
    let site = site("", "");
    let url = format!("http://{}/s/upload", site.addr());
    let file = site.dir.path().join("upload");
    let size = 48usize << 20;
    std::fs::write(&file, vec![b'u'; size]).unwrap();
    let (_, before) = site.rss();
    let said = curl_post(&url, &file, &[]);
    assert_eq!(said, format!("got {size} sum {}\n", size * b'u' as usize));
    let (_, peak) = site.rss();
    assert!(
        peak < before + (24 << 20),
        "peak RSS grew by {} MiB",
        (peak - before) >> 20
    );
    std::fs::write(&file, vec![b'u'; 65 << 20]).unwrap();
    let said = curl_post(&url, &file, &["-H", "Transfer-Encoding: chunked"]);
    assert!(!said.contains(&format!("got {} ", 65 << 20)), "{said}");
}

fn curl_post(url: &str, file: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--data-binary"])
        .arg(format!("@{}", file.display()))
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An answer whose servlet closes the exchange without a shutdown, or
/// passes `max_response`, ends cut short: never complete-looking.
#[test]
fn an_unfinished_or_oversized_streamed_answer_is_cut_short() {
    let site = site("", "");
    let url = format!("http://{}/s/unfinished/{}", site.addr(), 4 << 20);
    let (code, got, ok) = download(&url, &[]);
    assert!(code == "200" && !ok && got <= 4 << 20, "{code} {got} {ok}");
    let (code, _, ok) = download(&url, &["--http2-prior-knowledge"]);
    assert!(code == "200" && !ok, "over HTTP/2: {code} {ok}");
    let small = self::site("", "max_response = \"1MiB\"");
    let url = format!("http://{}/s/stream/{}", small.addr(), 8 << 20);
    let (code, got, ok) = download(&url, &[]);
    assert!(code == "200" && !ok && got <= 1 << 20, "{code} {got} {ok}");
}

/// The servlet's own `bandwidth_limit` paces what it streams: 4 MiB at
/// 1 MB/s takes about four seconds (at least two, whatever the burst).
#[test]
fn a_servlets_stream_is_paced_by_its_bandwidth_limit() {
    let site = site("bandwidth_limit = \"1MB/s\"", "");
    let url = format!("http://{}/s/stream/{}", site.addr(), 4 << 20);
    let t = Instant::now();
    assert_eq!(download(&url, &[]), ("200".into(), 4 << 20, true));
    assert!(t.elapsed() > Duration::from_secs(2), "{:?}", t.elapsed());
}

/// What a servlet or a client can do to a streamed answer harms only that
/// answer: a servlet that keeps its exchange and sends nothing holds its
/// client until the route's timeout, then the answer is cut short; a
/// client that leaves mid-stream makes the servlet's next send fail, so
/// the servlet serves the next request instead of streaming on for ever.
#[test]
fn a_held_exchange_or_a_departed_client_harms_only_its_answer() {
    let site = site("", "");
    let held = self::site("", "timeout = \"2s\"");
    let url = format!("http://{}/s/hold", held.addr());
    let t = Instant::now();
    let (code, _, ok) = download(&url, &[]);
    assert!(code == "200" && !ok, "{code} {ok}");
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    let count = format!("http://{}/s/x", held.addr());
    assert_eq!(download(&count, &[]).0, "200", "the servlet lives on");

    let mut s = std::net::TcpStream::connect(site.addr()).unwrap();
    write!(
        s,
        "GET /s/stream/{} HTTP/1.1\r\nHost: x\r\n\r\n",
        1u64 << 40
    )
    .unwrap();
    let mut buf = [0u8; 1024];
    assert!(s.read(&mut buf).unwrap() > 0, "the stream began");
    drop(s);
    let count = format!("http://{}/s/x", site.addr());
    let (code, _, _) = download(&count, &["--max-time", "60"]);
    assert_eq!(code, "200", "the servlet went on to the next request");
}

/// A servlet that gets its body whole (a passive one) gets it before its
/// request holds a handler slot: a client that sends half a long body and
/// stalls holds its connection, never the route's only slot, so another
/// client is answered meanwhile.
#[test]
fn a_stalled_body_to_a_passive_servlet_holds_no_slot() {
    let site = Site::start(&format!(
        r#"
[[task]]
name = "counter"
module = "{servlet}"
provides = ["counter"]
passive = true

[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/s/*"
service = "counter"
timeout = "60s"
max_concurrent = 1
max_queue = 0
"#,
        servlet = guests::PASSIVE_SERVLET,
    ));
    let url = format!("http://{}/s/x", site.addr());
    site.until("the servlet", Duration::from_secs(20), || {
        download(&url, &[]).0 == "200"
    });
    let mut stalled = std::net::TcpStream::connect(site.addr()).unwrap();
    let long = 256usize << 10;
    write!(
        stalled,
        "POST /s/x HTTP/1.1\r\nHost: x\r\nContent-Length: {long}\r\n\r\n"
    )
    .unwrap();
    stalled.write_all(&vec![b's'; long / 2]).unwrap();
    // The server has read what was sent (the client's socket buffer is
    // empty) before the next request comes.
    site.until("the half body is read", Duration::from_secs(20), || {
        let mut unsent = 0i32;
        // SAFETY: TIOCOUTQ writes one int for a connected TCP socket.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&stalled);
        unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut unsent) };
        unsent == 0
    });
    for _ in 0..3 {
        assert_eq!(download(&url, &["--max-time", "30"]).0, "200");
    }
    drop(stalled);
}
