//! What a per-request handler writes is the guest's to choose: here forty
//! thousand header lines (random responses are `fuzz::cgi_responses`). No
//! output may panic the server or go unanswered: a response past the
//! header bounds is 502, and the bystander is answered throughout.

use super::site::*;

fn cgi_site() -> Site {
    Site::start(&format!(
        r#"
[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/out"
name = "out"
module = "{wagi}"
memory_limit = "16MiB"
timeout = "20s"
max_response = "8MiB"

{bystander}
"#,
        wagi = guests::WAGI,
        bystander = bystander_route(),
    ))
}

#[test]
fn a_flood_of_header_lines_is_a_bad_gateway_not_a_panic() {
    let site = cgi_site();
    for n in [40_000, 101, 5_000] {
        let (status, body) = http1(site.addr(), "GET", &format!("/out?headers={n}"), &[], b"");
        assert_eq!(status, 502, "{n} header lines: {body}");
        assert!(body.contains("header lines"), "{body}");
    }
    let (status, body) = http1(site.addr(), "GET", "/out?headers=90", &[], b"");
    assert_eq!((status, body.as_str()), (200, "many headers\n"));
    site.bystander_answers();
}
