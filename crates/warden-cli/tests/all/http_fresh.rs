//! A fresh task per request means fresh state: nothing one request's
//! handler leaves behind reaches the next.

use crate::http::{get, site, start_web};

/// Nothing one request's task leaves behind reaches the next, though
/// freed slots keep their pages warm for the next task of the same
/// module: each handler finds its data-segment global at its initial
/// value, a 320 KiB BSS array (most of it past the pages kept warm) and
/// fresh heap zeroed, no environment variable an earlier one set and no
/// descriptor it opened, whether the requests come one after another or
/// many at once. The same check run twice in one task sees what the
/// first run left (but the heap's, whose second block is another).
#[test]
fn no_state_crosses_from_one_request_to_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let web = start_web(dir.path(), &site(dir.path(), ""));
    let r = get(&web, "/hello?residue2");
    assert_eq!(r.body, "residue 0 then 11\n", "{r:?}");
    for _ in 0..20 {
        assert_eq!(get(&web, "/hello?residue").body, "residue 0\n");
    }
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..15 {
                    assert_eq!(get(&web, "/hello?residue").body, "residue 0\n");
                }
            });
        }
    });
}
