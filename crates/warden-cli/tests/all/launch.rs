//! Starting a served system in a test: `warden run` on a manifest whose
//! listeners are on port 0 (its control API too, unless the test says
//! otherwise), the addresses it bound read back from its readiness lines
//! on stderr. No test picks a port and frees it for the system to bind.
//!
//! Once every listener is bound, and before any is answered, `warden run`
//! prints `warden: serving http://ADDR/` for each `[[http]]` server,
//! `warden: dashboard at http://ADDR/#token=TOKEN` for its control API,
//! and then `warden: Ctrl-C stops the system`.

use crate::util::{warden, Reaped};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a system may take to be ready: its modules are compiled
/// first (a Python component is 15 MB of code), and on a machine whose
/// every core is busy that took over a minute. A run that ends before it
/// is ready is seen at once (its stderr closes), so a long limit delays
/// no failure but a hang.
const READY: Duration = Duration::from_secs(600);

/// The line `warden run` ends its readiness lines with.
const READY_LINE: &str = "warden: Ctrl-C stops the system";

/// A `warden run` to start: `Launch::new(manifest)`, adjusted, then
/// [`Launch::start`].
pub struct Launch {
    cmd: Command,
    manifest: PathBuf,
    /// `--control`'s value, if given.
    control: Option<String>,
}

impl Launch {
    /// `warden run MANIFEST` with its control API on a free loopback port
    /// and its stdout discarded.
    pub fn new(manifest: &Path) -> Launch {
        let mut cmd = warden();
        cmd.arg("run").stdout(Stdio::null());
        Launch {
            cmd,
            manifest: manifest.to_path_buf(),
            control: Some("127.0.0.1:0".into()),
        }
    }

    /// More arguments for `warden run`, before the manifest.
    pub fn args<'a>(mut self, args: impl IntoIterator<Item = &'a str>) -> Launch {
        self.cmd.args(args);
        self
    }

    /// The control API's address: `"off"` for none (the system must then
    /// have an `[[http]]` server: it prints no address else), port 0 for
    /// any free one.
    pub fn control(mut self, addr: &str) -> Launch {
        self.control = Some(addr.into());
        self
    }

    /// No `--control`: the control API where the manifest says.
    pub fn control_from_manifest(mut self) -> Launch {
        self.control = None;
        self
    }

    /// Anything else about the command (environment, directory, stdout).
    pub fn with(mut self, f: impl FnOnce(&mut Command)) -> Launch {
        f(&mut self.cmd);
        self
    }

    /// Starts it and waits until it is ready, or has ended (a system
    /// refused at its start: see [`Served::wait`]).
    pub fn start(mut self) -> Served {
        if let Some(addr) = &self.control {
            let text = std::fs::read_to_string(&self.manifest).unwrap();
            assert!(
                addr != "off" || text.contains("[[http]]"),
                "a system without a control API or a web server says nowhere it is ready"
            );
            self.cmd.args(["--control", addr]);
        }
        self.cmd.arg(&self.manifest).stderr(Stdio::piped());
        let mut child = Reaped(self.cmd.spawn().unwrap());
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        let all = stderr.clone();
        let reader = std::thread::spawn(move || read_lines(pipe, &all, &tx));
        let mut served = Served {
            child,
            servers: Vec::new(),
            control: None,
            token: None,
            stderr,
            reader: Some(reader),
        };
        served.take_addresses(&rx);
        served
    }
}

/// Collects `pipe`'s lines into `all`, sending each readiness line on.
fn read_lines(pipe: impl std::io::Read, all: &Mutex<String>, ready: &Sender<String>) {
    for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
        {
            let mut s = all.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
        if line.starts_with("warden: serving http://")
            || line.starts_with("warden: serving https://")
            || line.starts_with("warden: dashboard at http://")
            || line.starts_with("warden: dashboard at https://")
            || line == READY_LINE
        {
            let _ = ready.send(line);
        }
    }
}

/// A started `warden run` and the addresses it bound; killed on drop.
pub struct Served {
    pub child: Reaped,
    /// `http://ADDR` of each `[[http]]` server, in the manifest's order.
    pub servers: Vec<String>,
    /// Its control API's address, if it serves one.
    control: Option<String>,
    /// Its control token, if it serves a control API.
    pub token: Option<String>,
    /// Everything it wrote on stderr so far.
    pub stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Reads the readiness lines, until the last or the end of stderr.
    fn take_addresses(&mut self, lines: &Receiver<String>) {
        let t = Instant::now();
        loop {
            let left = READY.saturating_sub(t.elapsed());
            let line = match lines.recv_timeout(left) {
                Ok(line) => line,
                // Stderr closed: the run ended before it was ready.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                Err(_) => panic!("not ready after {READY:?}: {}", self.stderr()),
            };
            if let Some(addr) = line.strip_prefix("warden: serving ") {
                // `https://ADDR/ (certificate SHA-256 …)` for HTTPS.
                let url = addr.split(' ').next().unwrap_or(addr);
                self.servers.push(url.trim_end_matches('/').to_string());
            } else if let Some(at) = line
                .strip_prefix("warden: dashboard at http://")
                .or_else(|| line.strip_prefix("warden: dashboard at https://"))
            {
                let (addr, token) = at.split_once("/#token=").unwrap();
                // `TOKEN (certificate SHA-256 …)` over TLS.
                let token = token.split(' ').next().unwrap_or(token);
                self.control = Some(addr.to_string());
                self.token = Some(token.to_string());
            } else {
                return;
            }
        }
    }

    /// `http://ADDR` of its first `[[http]]` server.
    pub fn base(&self) -> &str {
        self.servers
            .first()
            .unwrap_or_else(|| panic!("no server: {}", self.stderr()))
    }

    /// `ADDR` of its first `[[http]]` server.
    pub fn addr(&self) -> &str {
        let base = self.base();
        base.trim_start_matches("http://")
            .trim_start_matches("https://")
    }

    /// Its control API's address (`IP:PORT`).
    pub fn control(&self) -> &str {
        self.control
            .as_deref()
            .unwrap_or_else(|| panic!("no control API: {}", self.stderr()))
    }

    /// The `warden run` process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for it to end (failing the test after `limit`), and for the
    /// last of its stderr; how it ended.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let status = crate::util::wait_child(&mut self.child, limit, "warden run still running");
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        status
    }
}
