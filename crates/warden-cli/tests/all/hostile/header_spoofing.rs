//! A client's `X_Forwarded_For` (underscores) would become the same CGI
//! variable as a proxy's `X-Forwarded-For`: headers whose names hold `_`
//! are not passed to handlers.

use super::site::*;

#[test]
fn underscored_headers_cannot_pose_as_a_proxys() {
    let site = Site::start(&format!(
        "[[http]]\nlisten = \"127.0.0.1:0\"\n{}",
        bystander_route()
    ));
    let spoof = [
        ("X_Forwarded_For", "6.6.6.6"),
        ("X-Forwarded-For", "10.0.0.1"),
    ];
    let (status, body) = http1(site.addr(), "GET", "/hello?xff", &spoof, b"");
    assert_eq!((status, body.as_str()), (200, "xff=10.0.0.1\n"));
    let spoof = [("X_Forwarded_For", "6.6.6.6")];
    let (status, body) = http1(site.addr(), "GET", "/hello?xff", &spoof, b"");
    assert_eq!((status, body.as_str()), (200, "xff=\n"));
    site.bystander_answers();
}
