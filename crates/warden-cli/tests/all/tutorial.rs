//! `doc/tutorial.md`, run as a reader would: its files written and its
//! commands run in order in one shell, in a `tour/` directory beside the
//! SDK, and each `text` block's lines found in what the commands before
//! it printed. The only change is the ports (8080 and 7474 become free
//! ones, which the commands name: [`fixed_port`]s, which no listener on
//! port 0 takes meanwhile), and a wait for the server after a command
//! that starts one in the background, as a reader waits for its
//! "serving" line.

use crate::util::*;
use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One fenced block of the tutorial.
enum Block {
    File { name: String, text: String },
    Commands(String),
    Expected(String),
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let body: String = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .map(|l| format!("{l}\n"))
            .collect();
        let file = info
            .split_whitespace()
            .find_map(|w| w.strip_prefix("file="));
        out.push(match (info.trim(), file) {
            (_, Some(name)) => Block::File {
                name: name.to_string(),
                text: body,
            },
            ("sh", None) => Block::Commands(body),
            ("text", None) => Block::Expected(body),
            (other, None) => panic!("a block the test does not know: ```{other}"),
        });
    }
    out
}

/// The shell script that does what the tutorial says, each command block
/// after a marker line `@@ N`.
fn script(blocks: &[Block], http: u16) -> String {
    let mut s = String::from("set -eu -o pipefail\n");
    for (i, b) in blocks.iter().enumerate() {
        match b {
            Block::File { name, text } => {
                write!(s, "cat > {name} <<'TUTORIAL_EOF'\n{text}TUTORIAL_EOF\n").unwrap()
            }
            Block::Commands(c) => {
                write!(s, "echo '@@ {i}'\n{c}").unwrap();
                if c.trim_end().ends_with('&') {
                    write!(
                        s,
                        "for _ in $(seq 600); do curl -s -o /dev/null http://127.0.0.1:{http}/ \
                         && warden ps >/dev/null 2>&1 && break; sleep 0.1; done\n"
                    )
                    .unwrap();
                }
            }
            Block::Expected(_) => {}
        }
    }
    s + "echo '@@ end'\n"
}

/// What command block `i` printed, from the script's whole output.
fn section(output: &str, i: usize) -> &str {
    let start = output
        .find(&format!("@@ {i}\n"))
        .unwrap_or_else(|| panic!("block {i} never ran:\n{output}"));
    let rest = &output[start..];
    let end = rest[3..].find("@@ ").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

#[test]
fn the_tutorial_runs_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (http, control) = (fixed_port(), fixed_port());
    let text = std::fs::read_to_string(root.join("doc/tutorial.md"))
        .unwrap()
        .replace("8080", &http.to_string())
        .replace("7474", &control.to_string());
    let blocks = blocks(&text);
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        root.join("sdk").canonicalize().unwrap(),
        dir.path().join("sdk"),
    )
    .unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_warden")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut shell = Command::new("bash");
    shell
        .arg("-c")
        .arg(script(&blocks, http))
        .current_dir(dir.path())
        .env("PATH", path)
        .env("XDG_RUNTIME_DIR", runtime_dir())
        .env("WARDEN_CONTROL", format!("127.0.0.1:{control}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let (status, output) = run_to_end(shell, Duration::from_secs(300));
    assert!(
        status.success(),
        "the tutorial's commands failed:\n{output}"
    );
    let mut last = None;
    let mut missing = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        match b {
            Block::Commands(_) => last = Some(i),
            Block::Expected(want) => {
                let i = last.expect("a text block after a command block");
                let got = section(&output, i);
                for line in want.lines().filter(|l| !l.trim().is_empty()) {
                    if !got.lines().any(|g| matches(line, g)) {
                        missing.push(format!("{line:?} is no line of block {i}'s output:\n{got}"));
                    }
                }
            }
            Block::File { .. } => {}
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Whether `got`, a whole line of output, is what the tutorial's line
/// `want` shows: the same text, where each `…` in `want` stands for any
/// text (a figure that differs from run to run).
fn matches(want: &str, got: &str) -> bool {
    let parts: Vec<&str> = want.trim_end().split('…').collect();
    let got = got.trim_end();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return got == first;
    }
    if !got.starts_with(first) || !got[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &got[first.len()..got.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[test]
fn tutorial_lines_match_whole_lines() {
    assert!(matches("exit status 1", "exit status 1"));
    assert!(!matches("exit status 1", "exit status 137"));
    assert!(matches(
        "warden: task 1 (x) killed: … peak …",
        "warden: task 1 (x) killed: cpu 2 ms, peak 4 MiB"
    ));
    assert!(!matches(
        "killed: memory limit exceeded",
        "warden: killed: memory limit exceeded; cpu 1 ms"
    ));
}

/// Runs `cmd` (in its own process group) with stderr merged into stdout
/// in order of arrival; kills the whole group once it ends or after
/// `limit`.
fn run_to_end(mut cmd: Command, limit: Duration) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let (reader, writer) = std::os::unix::net::UnixStream::pair().unwrap();
    let writer = std::os::fd::OwnedFd::from(writer);
    cmd.stdout(Stdio::from(writer.try_clone().unwrap()))
        .stderr(Stdio::from(writer));
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let pgid = child.id() as i32;
    let collector = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = (&reader).read_to_string(&mut out);
        out
    });
    let status = wait_child(&mut child, limit, "the tutorial still running");
    // SAFETY: signalling the process group this test started; whatever
    // the script left in the background ends with it.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    (status, collector.join().unwrap())
}
