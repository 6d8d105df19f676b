//! Clients that ask for endless answers and stop reading: each stalled
//! answer holds at most its pipe's window and the protocol's buffers,
//! the handlers wait at their next write, the host's resident set stays
//! small, the bystander is answered, and when the clients leave their
//! handlers end.

use super::site::*;
use std::io::{Read, Write};
use std::time::Duration;

const CLIENTS: usize = 16;

#[test]
fn clients_that_stop_reading_hold_no_more_than_their_windows() {
    let site = Site::start(&format!(
        r#"
[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/dl"
name = "dl"
module = "{wagi}"
memory_limit = "8MiB"
timeout = "300s"
max_response = "1TiB"

{bystander}
"#,
        wagi = guests::WAGI,
        bystander = bystander_route(),
    ));
    let (before, _) = site.rss();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let mut s = std::net::TcpStream::connect(site.addr()).unwrap();
        write!(
            s,
            "GET /dl?stream=1099511627776 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        .unwrap();
        // The head, then nothing more is read.
        let mut byte = [0u8];
        let mut got = Vec::new();
        while !got.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte).unwrap();
            got.push(byte[0]);
        }
        clients.push(s);
    }
    // Every handler stalls: what they have written stops growing.
    let sent = || {
        let (_, text) = http1(site.control(), "GET", "/metrics", &[], b"");
        text.lines()
            .filter(|l| l.starts_with("warden_task_net_sent_bytes_total") && l.contains("dl#"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let mut last = -1.0;
    site.until("the handlers stall", Duration::from_secs(60), || {
        let now = sent();
        let stalled = now == last && now > 0.0;
        last = now;
        std::thread::sleep(Duration::from_millis(300));
        stalled
    });
    let (now, _) = site.rss();
    eprintln!(
        "{CLIENTS} stalled answers, {} MiB written: RSS {} MiB before, {} MiB now",
        last as u64 >> 20,
        before >> 20,
        now >> 20
    );
    assert!(
        now < before + (64 << 20),
        "RSS grew by {} MiB",
        (now - before) >> 20
    );
    assert_eq!(site.live("dl#"), CLIENTS, "each handler waits at its write");
    site.bystander_answers();
    drop(clients);
    site.until("the handlers end", Duration::from_secs(60), || {
        site.live("dl#") == 0
    });
    site.bystander_answers();
}
