//! Memory goes back to the system: after 10,000 tasks die, the process's
//! resident set returns to within 64 MiB of what it was before they were
//! spawned (their pool slots, stacks and heap, not only their budgets).

use super::*;
use std::io::Write;

const TASKS: u64 = 10_000;
/// What the process may keep of the dead tasks' memory.
const KEPT: u64 = 64 << 20;
/// The bound is one second; a loaded machine gets longer to kill
/// and tear down 10,000 tasks (`scripts/bench` measures the time).
const WITHIN: Duration = Duration::from_secs(20);

#[test]
fn ten_thousand_dead_tasks_give_their_memory_back() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = task(
        "sleeper",
        guests::HOSTILE,
        &["sleep"],
        "memory_limit = '1MiB'",
    ) + &task(
        "bomb",
        guests::HOSTILE,
        &["spawn-wide", &TASKS.to_string()],
        &format!(
            "memory_limit = '12GiB'\nstdin = 'inherit'\nmodules = {{ self = '{}' }}",
            guests::HOSTILE
        ),
    );
    let m = manifest(
        dir.path(),
        &format!("[runtime]\nmax_tasks = {}\n{tasks}", TASKS + 10),
    );
    let mut child = crate::util::run_with_stdin(dir.path(), &m);
    let pid = child.id().to_string();
    wait_for_output(dir.path(), "bomb", "spawn-wide: ready");
    let before = rss_of(&pid);
    let stdin = child.0.stdin.as_mut().unwrap();
    writeln!(stdin, "go").unwrap();
    wait_for_output(dir.path(), "bomb", &format!("spawn-wide: {TASKS} spawned"));
    // Every child has started once the process holds their memories
    // (about 40 KiB each).
    let t = Instant::now();
    while rss_of(&pid) < before + TASKS * (24 << 10) {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the children never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let peak = rss_of(&pid);
    writeln!(stdin, "end").unwrap();
    let t = Instant::now();
    let mut now = rss_of(&pid);
    while now > before + KEPT {
        assert!(
            t.elapsed() < WITHIN,
            "RSS {} MiB before, {} MiB with the tasks, {} MiB {WITHIN:?} after they died",
            before >> 20,
            peak >> 20,
            now >> 20
        );
        std::thread::sleep(Duration::from_millis(10));
        now = rss_of(&pid);
    }
    eprintln!(
        "RSS {} MiB before, {} MiB with {TASKS} tasks, {} MiB {:?} after their parent ended",
        before >> 20,
        peak >> 20,
        now >> 20,
        t.elapsed()
    );
    let _ = child.0.kill();
}
