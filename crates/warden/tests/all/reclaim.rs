use crate::util::*;
use std::time::Duration;
use warden::Output;

/// 2,000 tasks in sequence, each touching 4 MiB: the memory of each returns
/// when it dies, so the process stays far below the 8 GiB they touched.
#[test]
fn memory_returns_after_death() {
    let rt = runtime(1);
    let mut s = warden::TaskSpec::new("touch", guests::TOUCH);
    s.stdout = Output::Null;
    s.args = vec!["4".into()];
    let before = rss_bytes();
    let mut max_rss = before;
    for i in 0..2000 {
        s.name = format!("touch.{i}");
        let r = run_one(&rt, &s, Duration::from_secs(20));
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        assert!(r.peak_memory_bytes >= 4 << 20);
        if i % 50 == 0 {
            max_rss = max_rss.max(rss_bytes());
        }
    }
    let grown = max_rss.saturating_sub(before);
    // Touched in total: 2,000 x 4 MiB = 8,000 MiB.
    assert!(grown < 512 << 20, "RSS grew by {} MiB", grown >> 20);
}
