//! The outside systems Warden is measured against: native C programs built
//! with the host's C compiler, Java classes built with `javac`, an Erlang
//! module built with `erlc`, and the Wasmtime runner built beside this
//! binary. `scripts/bench` installs the toolchains; a peer whose toolchain
//! is missing is reported as missing, which fails the run's check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the peers' sources live.
fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers")
}

/// The native C peers, each built from `peers/<name>.c`, and the test
/// guests that are also built for Linux (from the guests' folder).
const NATIVE: [&str; 7] = [
    "hello",
    "spawn",
    "prims",
    "pipe_pingpong",
    "condvar_pingpong",
    "yield_switch",
    "epoll_echo",
];
const NATIVE_GUESTS: [&str; 1] = ["reread"];

/// Where the test guests' sources live.
fn guest_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/test-guests/guests")
}

pub struct Peers {
    dir: PathBuf,
    native: BTreeMap<&'static str, Result<PathBuf, String>>,
    java: Result<PathBuf, String>,
    erlang: Result<PathBuf, String>,
    runner: Result<PathBuf, String>,
}

impl Peers {
    /// Builds every peer into `dir`.
    pub fn build(dir: &Path) -> Peers {
        std::fs::create_dir_all(dir).expect("create the peers' build directory");
        let src = source_dir();
        let guests = guest_dir();
        let sources = NATIVE.iter().map(|n| (*n, &src));
        let native = sources
            .chain(NATIVE_GUESTS.iter().map(|n| (*n, &guests)))
            .map(|(name, from)| {
                let out = dir.join(name);
                let built = run_quiet(
                    Command::new("cc")
                        .args(["-O2", "-pthread", "-o"])
                        .arg(&out)
                        .arg(from.join(format!("{name}.c"))),
                )
                .map(|_| out);
                (name, built)
            })
            .collect();
        let java = build_java(dir, &src);
        let erl_dir = dir.join("erlang");
        std::fs::create_dir_all(&erl_dir).ok();
        let erlang = run_quiet(
            Command::new("erlc")
                .arg("-o")
                .arg(&erl_dir)
                .arg(src.join("ipc.erl"))
                .arg(src.join("dist.erl"))
                .arg(src.join("copies.erl"))
                .arg(src.join("restore.erl"))
                .arg(src.join("typed.erl")),
        )
        .map(|_| erl_dir)
        .map_err(|e| format!("{e} (install erlang-base)"));
        let runner = std::env::current_exe()
            .map_err(|e| e.to_string())
            .map(|exe| exe.with_file_name("warden-wasm-runner"))
            .and_then(|p| {
                if p.exists() {
                    Ok(p)
                } else {
                    Err(format!(
                        "{} missing: build with `cargo build --release -p warden-bench`",
                        p.display()
                    ))
                }
            });
        Peers {
            dir: dir.to_path_buf(),
            native,
            java,
            erlang,
            runner,
        }
    }

    /// Peers that could not be built, and why.
    pub fn missing(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .native
            .iter()
            .filter_map(|(n, r)| r.as_ref().err().map(|e| format!("native {n}: {e}")))
            .collect();
        for (name, r) in [
            ("JVM", &self.java),
            ("Erlang", &self.erlang),
            ("wasmtime runner", &self.runner),
        ] {
            if let Err(e) = r {
                out.push(format!("{name}: {e}"));
            }
        }
        out
    }

    /// The directory the peers were built in (scratch space for a run).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn native(&self, name: &str) -> Result<&Path, String> {
        match self.native.get(name) {
            Some(Ok(p)) => Ok(p),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!("no native peer {name}")),
        }
    }

    /// `java` with the peers' classes on its class path.
    pub fn java(&self) -> Result<Command, String> {
        let dir = self.java.as_ref().map_err(Clone::clone)?;
        let mut c = Command::new(find_in_path("java").ok_or("java not found")?);
        c.arg("-cp").arg(dir);
        Ok(c)
    }

    /// The absolute path of `java`, for the spawn driver.
    pub fn java_path(&self) -> Result<PathBuf, String> {
        self.java.as_ref().map_err(Clone::clone)?;
        find_in_path("java").ok_or_else(|| "java not found".into())
    }

    pub fn java_classes(&self) -> Result<&Path, String> {
        self.java.as_deref().map_err(Clone::clone)
    }

    /// `erl` set to run `ipc:main(Args)` and stop.
    pub fn erlang(&self, args: &[String]) -> Result<Command, String> {
        let dir = self.erlang.as_ref().map_err(Clone::clone)?;
        let mut c = Command::new("erl");
        c.args(["-noshell", "-pa"])
            .arg(dir)
            .args(["-run", "ipc", "main"]);
        c.args(args).args(["-s", "init", "stop"]);
        Ok(c)
    }

    /// `erl` set to start `n` idle processes (`copies:main`), print
    /// "ready" and wait; room for a million processes.
    pub fn erlang_copies(&self, n: usize) -> Result<Command, String> {
        let dir = self.erlang.as_ref().map_err(Clone::clone)?;
        let mut c = Command::new("erl");
        c.args(["-noshell", "+P", "1048576", "-pa"]).arg(dir).args([
            "-run",
            "copies",
            "main",
            &n.to_string(),
        ]);
        Ok(c)
    }

    /// `erl` set to run `MODULE:main(Args)` and stop.
    pub fn erlang_main(&self, module: &str, args: &[String]) -> Result<Command, String> {
        let dir = self.erlang.as_ref().map_err(Clone::clone)?;
        let mut c = Command::new("erl");
        c.args(["-noshell", "-pa"])
            .arg(dir)
            .args(["-run", module, "main"]);
        c.args(args).args(["-s", "init", "stop"]);
        Ok(c)
    }

    /// The directory holding the compiled Erlang peers.
    pub fn erlang_dir(&self) -> Result<&Path, String> {
        self.erlang.as_deref().map_err(Clone::clone)
    }

    pub fn runner(&self) -> Result<&Path, String> {
        self.runner.as_deref().map_err(Clone::clone)
    }

    /// `module` compiled ahead of time by the runner, so each runner process
    /// maps machine code instead of compiling it.
    pub fn cwasm(&self, module: &str) -> Result<PathBuf, String> {
        let stem = Path::new(module)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let out = self.dir.join(format!("{stem}.cwasm"));
        if !out.exists() {
            run_quiet(
                Command::new(self.runner()?)
                    .arg("precompile")
                    .arg(module)
                    .arg(&out),
            )?;
        }
        Ok(out)
    }
}

/// The Java peers' classes, compiled by javac into `dir/java`.
fn build_java(dir: &Path, src: &Path) -> Result<PathBuf, String> {
    let java_dir = dir.join("java");
    find_in_path("java")
        .ok_or_else(|| "java not found (install default-jdk-headless)".to_string())
        .and_then(|_| {
            run_quiet(
                Command::new("javac")
                    .arg("-d")
                    .arg(&java_dir)
                    .arg(src.join("Hello.java"))
                    .arg(src.join("Prims.java"))
                    // The Java guest's primitives, for HotSpot.
                    .arg(src.join("../../crates/test-guests/guests/java/JavaPrims.java")),
            )
        })
        .map(|_| java_dir)
}

/// Runs `cmd` to completion; its stdout on success, else an error naming it
/// and carrying what it printed.
pub fn run_quiet(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", cmd.get_program().to_string_lossy()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            cmd.get_program().to_string_lossy(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a peer that prints `<name> <number>` lines; the numbers by name.
pub fn figures(cmd: &mut Command) -> Result<BTreeMap<String, f64>, String> {
    let text = run_quiet(cmd)?;
    let map = parse_figures(&text);
    if map.is_empty() {
        return Err(format!(
            "{} printed no figures: {text}",
            cmd.get_program().to_string_lossy()
        ));
    }
    Ok(map)
}

/// The figure called `name` among `figures`, or an error naming what was there.
pub fn figure(figures: &BTreeMap<String, f64>, name: &str) -> Result<f64, String> {
    figures
        .get(name)
        .copied()
        .ok_or_else(|| format!("no {name} figure in {figures:?}"))
}

/// `<name> <number>` lines; other lines are ignored.
pub fn parse_figures(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

pub fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_parse() {
        let m = parse_figures("call 1.5\nhello\nalloc 2\nbad x\n");
        assert_eq!(m.len(), 2);
        assert_eq!(m["alloc"], 2.0);
    }

    #[test]
    fn failures_carry_output() {
        let e = run_quiet(Command::new("sh").args(["-c", "echo oops >&2; exit 3"])).unwrap_err();
        assert!(e.contains("oops"), "{e}");
        assert!(figures(Command::new("echo").arg("nothing")).is_err());
    }
}
