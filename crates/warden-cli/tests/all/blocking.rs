use crate::util::*;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

/// Sleeping tasks hold no worker: with one worker and several tasks asleep,
/// another task still runs to completion at once.
#[test]
fn sleeping_tasks_do_not_block_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let sleepers: Vec<_> = (0..5)
        .map(|i| {
            rt.spawn(&spec(dir.path(), &format!("s{i}"), guests::SLEEP))
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let r = run_one(
        &rt,
        &spec(dir.path(), "hello", guests::HELLO),
        Duration::from_secs(10),
    );
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(rt.live_tasks().len(), 5);
    for id in sleepers {
        rt.kill(id, "done").unwrap();
    }
}

/// A task waiting on stdin holds no worker: with one worker, a second task
/// runs and finishes while the first waits; then input arrives and the
/// first finishes too.
#[test]
fn stdin_read_does_not_block_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!(
            "[runtime]\nworkers = 1\n\
             [[task]]\nname = 'reader'\nmodule = '{}'\nstdin = 'inherit'\n\
             [[task]]\nname = 'busy'\nmodule = '{}'\nargs = ['2']\n",
            guests::STDIN_COUNT,
            guests::BUSY_PRINT
        ),
    );
    let mut child = warden()
        .args(["run", "--no-cache"])
        .arg(&m)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map(Reaped)
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    // The busy task prints both rounds while the reader is blocked.
    for want in ["[busy] round 0", "[busy] round 1"] {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("busy task ran");
        assert!(line.starts_with(want), "{line}");
    }
    stdin.write_all(b"12345").unwrap();
    drop(stdin);
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("reader finished");
    assert_eq!(line, "[reader] read 5 bytes");
    assert!(child.wait().unwrap().success());
}

/// `poll_oneoff` on clocks: a relative sleep (served by the kernel's own
/// timer) waits as long as asked and writes the clock's event, and what
/// is left to Wasmtime (absolute times, other clocks, two clocks)
/// answers as before; the guest checks each.
#[test]
fn clock_sleeps_wait_and_answer_as_wasi_says() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let r = run_one(
        &rt,
        &spec(dir.path(), "sleeps", guests::CLOCK_SLEEP),
        Duration::from_secs(60),
    );
    let out = stdout_of(dir.path(), "sleeps");
    assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?}\n{out}");
    assert!(out.contains("sleeps ok"), "{out}");
}

/// A task whose file call blocks its worker's thread stalls no other
/// task: file calls on a local disk run on the worker, so opening a FIFO
/// in a preopened directory holds the only worker until a writer comes.
/// Tasks spawned behind it still finish (a spare thread runs them), and
/// the reader's open returns when the writer comes. (What it reads then is
/// nothing: Wasmtime reads a file at its offset, which a FIFO lacks.)
#[test]
fn a_task_blocked_on_a_fifo_stalls_no_other_task() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let fifo = data.join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo");
    let rt = runtime(1);
    // Dropped before the runtime: should the test fail, a writer frees the
    // worker so that the runtime can end.
    let _release = Release(fifo.clone());
    let mut reader = spec(dir.path(), "reader", guests::FILES);
    reader.dirs = vec![("/data".into(), data.clone())];
    reader.args = vec!["/data/pipe".into()];
    let id = rt.spawn(&reader).unwrap();
    let others: Vec<_> = (0..4)
        .map(|i| {
            rt.spawn(&spec(dir.path(), &format!("h{i}"), guests::HELLO))
                .unwrap()
        })
        .collect();
    for other in others {
        let r = wait(&rt, other, Duration::from_secs(20));
        assert_eq!(r.exit_code, Some(0), "{r:?}");
    }
    assert!(
        rt.live_tasks().iter().any(|t| t.id == id),
        "the reader still waits"
    );
    // Opening for writing releases the reader's open; the reader may read
    // and close before anything is written (then the write meets a broken
    // pipe), which is no failure of what is tested.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let _ = std::io::Write::write_all(&mut writer, b"through the pipe");
    drop(writer);
    assert_eq!(wait(&rt, id, Duration::from_secs(20)).exit_code, Some(0));
    let out = stdout_of(dir.path(), "reader");
    assert!(out.starts_with("/data/pipe:"), "{out}");
}

/// Opens a FIFO for writing, without waiting, when dropped.
struct Release(std::path::PathBuf);

impl Drop for Release {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.0);
    }
}
