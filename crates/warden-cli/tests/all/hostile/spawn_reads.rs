//! `/api/spawn` (and any module path) naming a file that is not a module:
//! a 512 MiB sparse file, `/proc/self/pagemap` (256 GiB when read), a
//! device. Each is refused before it is read, with a reason; the host's
//! RSS does not move.

use super::site::*;
use crate::util::token_of;

#[test]
fn spawn_refuses_huge_and_endless_files_unread() {
    let site = Site::start(&format!(
        "[[http]]\nlisten = \"127.0.0.1:0\"\n{}",
        bystander_route()
    ));
    let sparse = site.dir.path().join("sparse.wasm");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(512 << 20)
        .unwrap();
    let auth = format!("Bearer {}", token_of(site.control()));
    let (before, hwm) = site.rss();
    for (module, why) in [
        (sparse.display().to_string(), "over the largest module size"),
        ("/proc/self/pagemap".to_string(), "size is unknown"),
        ("/proc/kcore".to_string(), ""),
        ("/dev/zero".to_string(), ""),
    ] {
        let body = serde_json::json!({ "module": module }).to_string();
        let (status, answer) = http1(
            site.control(),
            "POST",
            "/api/spawn",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        );
        assert_eq!(status, 400, "{module}: {answer}");
        assert!(answer.contains(why), "{module}: {answer}");
    }
    let (_, peak) = site.rss();
    assert!(
        peak <= hwm.max(before + (32 << 20)),
        "RSS {} -> peak {} MiB",
        before >> 20,
        peak >> 20
    );
    site.bystander_answers();
}
