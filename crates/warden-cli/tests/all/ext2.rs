//! The ext2 file system as a task (`services/ext2`): images made by
//! Debian's mke2fs, served to a client task over the file-service
//! protocol, checked afterwards by the real e2fsck and debugfs; its
//! buffer cache bounded by its memory budget; a file-system task killed
//! mid-workload and another started on the same image.

use crate::util::{self, guests, manifest, warden, Launch};
use std::path::Path;
use std::process::Command;

/// An ext2 image at `dir/disk.img` made by mke2fs from `dir/src` (a
/// file `/docs/readme.txt`), with `block_size`-byte blocks.
fn image(dir: &Path, block_size: u32, size: &str) -> std::path::PathBuf {
    let src = dir.join("src/docs");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("readme.txt"), "made by mke2fs -d\n").unwrap();
    let img = dir.join("disk.img");
    let out = Command::new("mke2fs")
        .args([
            "-q",
            "-F",
            "-t",
            "ext2",
            "-b",
            &block_size.to_string(),
            "-d",
        ])
        .arg(dir.join("src"))
        .arg(&img)
        .arg(size)
        .output()
        .expect("mke2fs (e2fsprogs) is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    img
}

/// A system: the file system on `disk.img` with `fs_keys`, and clients.
fn system(fs_keys: &str, clients: &[(&str, &str)]) -> String {
    let mut text = format!(
        "[[device]]\nname = \"disk0\"\nfile = \"disk.img\"\n[[task]]\nname = \"fs\"\nmodule = \"{}\"\n\
         devices = [\"disk0\"]\nprovides = [\"fs\"]\nmax_message_bytes = \"1MiB\"\nstdout = \"fs.out\"\n{fs_keys}\n",
        guests::EXT2
    );
    for (name, args) in clients {
        text += &format!(
            "[[task]]\nname = \"{name}\"\nmodule = \"{}\"\nargs = [{args}]\nuses = [\"fs\"]\n\
             max_message_bytes = \"1MiB\"\nstdout = \"{name}.out\"\n",
            guests::FSCLIENT
        );
    }
    text
}

/// Runs `text` (in `dir`) until each task of `until` has printed its
/// marker (the file system serves on until it is stopped), then stops it
/// as Ctrl-C does.
fn run(dir: &Path, text: &str, until: &[(&str, &str)]) {
    let mut child = util::Reaped(
        warden()
            .args(["run", "--control", "off"])
            .arg(manifest(dir, text))
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    for (task, marker) in until {
        util::wait_for_output(dir, task, marker);
    }
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
}

#[test]
fn images_from_mke2fs_are_served_and_stay_clean() {
    for block_size in [1024, 4096] {
        let dir = tempfile::tempdir().unwrap();
        let img = image(dir.path(), block_size, "64M");
        let text = system(
            "args = [\"fs\", \"disk0\"]\nmemory_limit = \"16MiB\"",
            &[
                ("work", "\"fs\", \"workload\""),
                ("cat", "\"fs\", \"cat\", \"/docs/readme.txt\""),
            ],
        );
        run(dir.path(), &text, &[("work", "workload"), ("cat", "\n")]);
        let out = |n: &str| std::fs::read_to_string(dir.path().join(format!("{n}.out"))).unwrap();
        assert!(out("fs").starts_with(&format!("ext2: serving fs ({block_size}-byte blocks")));
        assert_eq!(out("work"), "workload ok\n", "{block_size}-byte blocks");
        assert_eq!(out("cat"), "made by mke2fs -d\n");
        let (code, report) = util::e2fsck(&img);
        assert_eq!(code, 0, "{block_size}-byte blocks: {report}");
        assert_eq!(
            util::debugfs(&img, "cat /dir/moved.txt"),
            "written by a task\n"
        );
        let listing = util::debugfs(&img, "ls -p /sub2");
        assert!(listing.contains("/file-with-a-long-name-149/"), "{listing}");
        assert!(
            !listing.contains("/file-with-a-long-name-148/"),
            "{listing}"
        );
        let link = util::debugfs(&img, "stat /short");
        assert!(link.contains("Fast link dest: \"dir/moved.txt\""), "{link}");
        assert!(util::debugfs(&img, "stat /big.bin").contains("Size: 100000"));
    }
}

#[test]
fn the_buffer_cache_is_bounded_by_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    image(dir.path(), 4096, "64M");
    // A cache of 64 MiB asked for, within a budget of 3 MiB, under a
    // client writing some 14 MiB of blocks over and over.
    let text = system(
        "args = [\"fs\", \"disk0\", \"65536\"]\nmemory_limit = \"3MiB\"",
        &[("hammer", "\"fs\", \"hammer\"")],
    );
    let report = dir.path().join("report.json");
    let mut child = util::Reaped(
        warden()
            .args(["run", "--control", "off", "--report"])
            .arg(&report)
            .arg(manifest(dir.path(), &text))
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    util::wait_for_output(dir.path(), "hammer", "wrote 400");
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    let hammer = std::fs::read_to_string(dir.path().join("hammer.out")).unwrap();
    assert!(!hammer.contains("error"), "{hammer}");
    let reports: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let fs = reports.iter().find(|r| r["name"] == "fs").unwrap();
    assert!(fs["peak_memory_bytes"].as_u64().unwrap() <= 3 << 20, "{fs}");
    assert!(
        fs["memory_denials"].as_u64().unwrap() > 0,
        "the cache stopped growing: {fs}"
    );
}

/// What e2fsck may find after a crash of the hammer (which creates files
/// `h0`…`h49` in the root and writes them, syncing now and then) that a
/// machine losing power would also leave on ext2: `{n}` is a number,
/// `{*}` anything. A corrupt directory, a block claimed twice, an illegal
/// block or a wrong file type is none of these.
const POWER_LOSS: &[&str] = &[
    "Inode {n}, i_size is {n}, should be {n}.",
    "Inode {n}, i_blocks is {n}, should be {n}.",
    "Inode {n} ref count is {n}, should be {n}.",
    "Entry 'h{n}' in / (2) has deleted/unused inode {n}.",
    "Unattached inode {n}",
    "Unattached zero-length inode {n}.",
    "Block bitmap differences: {*}",
    "Inode bitmap differences: {*}",
    "Free blocks count wrong for group #{n} ({n}, counted={n}).",
    "Free blocks count wrong ({n}, counted={n}).",
    "Free inodes count wrong for group #{n} ({n}, counted={n}).",
    "Free inodes count wrong ({n}, counted={n}).",
];

/// Whether `line` is `pattern` (see [`POWER_LOSS`]).
fn matches(line: &str, pattern: &str) -> bool {
    let (pattern, open_end) = match pattern.strip_suffix("{*}") {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let mut parts = pattern.split("{n}");
    let Some(mut rest) = line.strip_prefix(parts.next().unwrap_or("")) else {
        return false;
    };
    for text in parts {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let Some(after) = rest[digits..].strip_prefix(text).filter(|_| digits > 0) else {
            return false;
        };
        rest = after;
    }
    open_end || rest.is_empty()
}

/// Every line of an `e2fsck -fn` report is its frame (passes, summary,
/// the answer "no") or damage a power loss leaves.
fn only_power_loss_damage(report: &str) {
    for line in report.lines().map(str::trim) {
        let problem = ["Fix? no", "Clear? no", "Connect to /lost+found? no"]
            .iter()
            .fold(line, |l, answer| {
                l.strip_suffix(answer).unwrap_or(l).trim_end()
            });
        let frame = problem.is_empty()
            || problem.starts_with("e2fsck ")
            || problem.starts_with("Pass ")
            || problem.contains("disk.img: ");
        assert!(
            frame || POWER_LOSS.iter().any(|p| matches(problem, p)),
            "not what a power loss leaves: {line:?}\n{report}"
        );
    }
}

#[test]
fn a_killed_file_system_fails_its_clients_and_another_serves_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path(), 1024, "64M");
    let text = system(
        "args = [\"fs\", \"disk0\"]\nmemory_limit = \"16MiB\"",
        &[("hammer", "\"fs\", \"hammer\"")],
    );
    let mut running = Launch::new(&manifest(dir.path(), &text))
        .with(|c| {
            c.current_dir(dir.path());
        })
        .start();
    let control = running.control().to_string();
    util::wait_for_output(dir.path(), "hammer", "wrote 100");
    let kill = warden()
        .args(["kill", "fs", "--control", &control])
        .output()
        .unwrap();
    assert!(
        kill.status.success(),
        "{}",
        String::from_utf8_lossy(&kill.stderr)
    );
    // The client's next call fails with the peer's death, not a hang.
    util::wait_for_output(dir.path(), "hammer", "error -3 after");
    let _ = running.child.kill();
    let _ = running.child.wait();
    // What a crash of ext2 may leave (no journal): the writes since the
    // last fsync lost, and bitmaps, free counts, sizes, link counts and
    // directory entries of that window out of step. e2fsck, told to fix
    // nothing, reports them (exit 4) or finds nothing (exit 0).
    let (code, report) = util::e2fsck(&img);
    assert!(code == 0 || code == 4, "{report}");
    only_power_loss_damage(&report);
    // A file-system task started again serves the image.
    let text = system(
        "args = [\"fs\", \"disk0\"]",
        &[("cat", "\"fs\", \"cat\", \"/docs/readme.txt\"")],
    );
    run(dir.path(), &text, &[("cat", "\n")]);
    let cat = std::fs::read_to_string(dir.path().join("cat.out")).unwrap();
    assert_eq!(cat, "made by mke2fs -d\n");
}

#[test]
fn garbage_requests_are_refused_and_leave_the_image_clean() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path(), 1024, "16M");
    // Random operations, reserved and unused inodes, huge offsets and
    // sizes, names with slashes and NULs, lengths that lie.
    let text = system(
        "args = [\"fs\", \"disk0\"]\nmemory_limit = \"16MiB\"",
        &[("garbage", "\"fs\", \"garbage\", \"20000\"")],
    );
    run(dir.path(), &text, &[("garbage", "\n")]);
    let out = std::fs::read_to_string(dir.path().join("garbage.out")).unwrap();
    assert_eq!(out, "still serving\n");
    let (code, report) = util::e2fsck(&img);
    assert_eq!(code, 0, "{report}");
}
