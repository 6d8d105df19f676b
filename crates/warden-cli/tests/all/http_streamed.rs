//! Streamed bodies: a handler answers before its request body has all
//! arrived, and its answer goes out as it is written, whatever its
//! length, within the server's memory budgets.

use crate::hostile::site::Site;
use crate::util::{guests, http1_body};
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;

fn site(extra: &str) -> Site {
    Site::start(&format!(
        r#"
[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/dl"
name = "dl"
module = "{wagi}"
memory_limit = "8MiB"
timeout = "300s"
max_body = "64MiB"
max_response = "4GiB"
{extra}
"#,
        wagi = guests::WAGI,
    ))
}

/// curl's status, bytes received and exit status for `url`.
pub(crate) fn download(url: &str, args: &[&str]) -> (String, u64, bool) {
    let out = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download}",
        ])
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let (code, n) = said.split_once(' ').unwrap();
    (code.to_string(), n.parse().unwrap(), out.status.success())
}

/// A gigabyte goes out through a server whose resident set grows by
/// less than 64 MiB: the answer is never held whole.
#[test]
fn a_gigabyte_streams_within_a_small_resident_set() {
    let site = site("");
    // Warm: the route's module compiled and its first instance run.
    let url = format!("http://{}/dl?stream=1000", site.addr());
    assert_eq!(download(&url, &[]), ("200".into(), 1000, true));
    let (_, before) = site.rss();
    let url = format!("http://{}/dl?stream={GIB}", site.addr());
    let (code, got, ok) = download(&url, &[]);
    assert_eq!((code.as_str(), got, ok), ("200", GIB, true));
    let (_, peak) = site.rss();
    eprintln!(
        "RSS peak {} MiB before, {} MiB after",
        before >> 20,
        peak >> 20
    );
    assert!(
        peak < before + (64 << 20),
        "peak RSS grew by {} MiB",
        (peak - before) >> 20
    );
    // And over HTTP/2.
    let (code, got, ok) = download(
        &url.replace(GIB.to_string().as_str(), "67108864"),
        &["--http2-prior-knowledge"],
    );
    assert_eq!((code.as_str(), got, ok), ("200", 64 << 20, true));
}

/// A handler echoing its request body as it reads it: the client gets
/// the echo of what it sent so far while it still holds the rest back.
/// Were the request read whole first, or the answer held until the
/// handler ended, the client would wait for ever (and fail at its read
/// timeout).
#[test]
fn a_handler_answers_before_its_request_has_all_arrived() {
    let site = site("");
    let (first, second) = (200 << 10, 300 << 10);
    let mut s = std::net::TcpStream::connect(site.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /dl?echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        first + second
    )
    .unwrap();
    s.write_all(&vec![b'a'; first]).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let head = loop {
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "closed before the echo: {}",
            String::from_utf8_lossy(&raw)
        );
        raw.extend_from_slice(&buf[..n]);
        let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&raw[..at]).into_owned();
        if http1_body(&head, &raw[at + 4..]).0.len() >= first {
            break head;
        }
    };
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s.write_all(&vec![b'b'; second]).unwrap();
    let _ = s.read_to_end(&mut raw);
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let (body, whole) = http1_body(&head, &raw[at + 4..]);
    assert!(whole, "the echo ended properly");
    assert_eq!(body.len(), first + second);
    assert!(body[..first].iter().all(|&b| b == b'a'));
    assert!(body[first..].iter().all(|&b| b == b'b'));
}

/// A long upload reaches the handler as it arrives: 48 MiB counted by a
/// handler, with the server's resident set growing by much less.
#[test]
fn a_long_upload_is_read_as_it_arrives() {
    let site = site("");
    let url = format!("http://{}/dl?count", site.addr());
    let file = site.dir.path().join("upload");
    std::fs::write(&file, vec![b'u'; 48 << 20]).unwrap();
    let warm = download(&url, &["--data-binary", "x"]);
    assert_eq!(warm.0, "200");
    let (_, before) = site.rss();
    let out = Command::new("curl")
        .args(["-sS", "--data-binary"])
        .arg(format!("@{}", file.display()))
        .arg(&url)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(said.trim(), format!("count {}", 48 << 20));
    let (_, peak) = site.rss();
    assert!(
        peak < before + (24 << 20),
        "peak RSS grew by {} MiB",
        (peak - before) >> 20
    );
    // Past max_body, the handler's read fails: it never gets more.
    std::fs::write(&file, vec![b'u'; 65 << 20]).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "-H", "Transfer-Encoding: chunked", "--data-binary"])
        .arg(format!("@{}", file.display()))
        .arg(&url)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains(&format!("count {}", 65 << 20)), "{said}");
}

/// A handler that fails once its answer is under way ends the answer cut
/// short: the client never takes it for a complete one.
#[test]
fn a_handler_failing_mid_stream_cuts_its_answer_short() {
    let site = site("");
    let url = format!("http://{}/dl?half={}", site.addr(), 4 << 20);
    let (code, got, ok) = download(&url, &[]);
    assert_eq!(code, "200");
    assert!(!ok && got <= 4 << 20, "{got} bytes, curl {ok}");
    let (code, _, ok) = download(&url, &["--http2-prior-knowledge"]);
    assert!(code == "200" && !ok, "over HTTP/2: {code} {ok}");
    // Over the route's max_response, the same.
    let small = site_with_max_response();
    let url = format!("http://{}/dl?stream={}", small.addr(), 8 << 20);
    let (code, got, ok) = download(&url, &[]);
    assert!(code == "200" && !ok && got <= 1 << 20, "{code} {got} {ok}");
}

fn site_with_max_response() -> Site {
    Site::start(&format!(
        "[[http]]\nlisten = \"127.0.0.1:0\"\n\n[[http.route]]\npath = \"/dl\"\nmodule = \"{}\"\n\
         max_response = \"1MiB\"\n",
        guests::WAGI
    ))
}

/// A route's bandwidth limit paces a streamed answer: 4 MiB at 1 MB/s
/// takes about four seconds (at least two, whatever the burst).
#[test]
fn a_streamed_answer_is_paced_by_its_routes_bandwidth_limit() {
    let site = site("bandwidth_limit = \"1MB/s\"");
    let url = format!("http://{}/dl?stream={}", site.addr(), 4 << 20);
    let t = Instant::now();
    let (code, got, ok) = download(&url, &[]);
    assert_eq!((code.as_str(), got, ok), ("200", 4 << 20, true));
    assert!(t.elapsed() > Duration::from_secs(2), "{:?}", t.elapsed());
}
