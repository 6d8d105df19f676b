//! The IPC examples under `examples/` build and run as their manifests say.

use crate::util::*;
use std::path::Path;

/// The repository's root, after `scripts/build-examples` built the
/// examples (once per test run).
fn built_examples() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let built = std::process::Command::new(root.join("scripts/build-examples"))
                .output()
                .unwrap();
            assert!(
                built.status.success(),
                "{}",
                String::from_utf8_lossy(&built.stderr)
            );
            root
        })
        .clone()
}

/// Runs a manifest with `warden run`, which must exit 0; its stdout.
fn run(manifest: &Path) -> String {
    let out = warden()
        .args(["run", "--no-cache"])
        .arg(manifest)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: {stdout}{}",
        manifest.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn echo_kv_and_pipeline_examples() {
    let root = built_examples();
    let run = |name: &str| run(&root.join(format!("examples/{name}/{name}.toml")));
    let echo = run("echo");
    assert_eq!(echo.matches("1000 echoes checked").count(), 4, "{echo}");
    assert!(echo.contains("[server] served 4004 calls"), "{echo}");

    let kv = run("kv");
    assert_eq!(kv.matches("200 keys written, 100 left").count(), 8, "{kv}");
    assert!(
        kv.contains("[kv] 5608 operations, 800 entries left"),
        "{kv}"
    );

    let pipeline = run("pipeline");
    for want in [
        "[sink] received 22 words, starting \"MEMORY OBJECTS MOVE \"",
        "[source] revoked the object: old handle revoked, fresh handle works",
        "[filter] after the source revoked it, my handle: revoked",
        "[sink] after the source revoked it, my handle: revoked",
        "[source] result: MEMORY OBJECTS MOVE BETWEEN TASKS",
    ] {
        assert!(pipeline.contains(want), "{want:?} missing from {pipeline}");
    }
}

/// One echo server in C, and clients in Java (TeaVM), Zig, Rust and
/// AssemblyScript, built by their own toolchains with their SDKs, in one
/// system.
#[test]
fn polyglot_example() {
    let root = built_examples();
    let out = run(&root.join("examples/polyglot/polyglot.toml"));
    for lang in ["java", "zig", "rust", "assemblyscript"] {
        assert!(
            out.contains(&format!("[{lang}] {lang}: 500 echoes checked")),
            "{lang} missing from {out}"
        );
    }
    assert!(out.contains("[server] served 2004 calls"), "{out}");
}

/// Zero-copy sharing: readers in C and Rust map a 16 MiB object the C
/// producer filled, sum it in place, and find it revoked; the producer's
/// own data stays intact.
#[test]
fn sharing_example() {
    let root = built_examples();
    let out = run(&root.join("examples/sharing/sharing.toml"));
    for want in [
        "[rust] rust: 16 MiB summed in place, sum ok",
        "[c] c: 16 MiB summed in place, sum ok",
        "[producer] producer: revoked every view; its own data intact",
        "[rust] rust: after the revoke, my view: revoked",
        "[c] c: after the revoke, unmapped (success), reads 0",
    ] {
        assert!(out.contains(want), "{want:?} missing from {out}");
    }
}

/// Block devices from the Java, Zig, Rust and AssemblyScript SDKs: each
/// task writes, syncs, reads back and checks four sectors of its own
/// device, and the host file holds what it wrote.
#[test]
fn devices_example() {
    let root = built_examples();
    let dir = root.join("examples/devices");
    let out = run(&dir.join("devices.toml"));
    for lang in ["java", "zig", "rust", "assemblyscript"] {
        assert!(
            out.contains(&format!("[{lang}] {lang}: device checked, 128 sectors")),
            "{lang} missing from {out}"
        );
        let image = std::fs::read(dir.join(format!("build/{lang}.img"))).unwrap();
        assert_eq!(image.len(), 64 << 10, "{lang}");
        for sector in 2..6 {
            let line = format!("{lang} sector {sector}\n");
            let at = sector * 512;
            assert_eq!(&image[at..at + line.len()], line.as_bytes(), "{lang}");
        }
    }
}

/// The network examples: TCP echo, three tenants sharing a link, and the
/// WASI file server fetched with curl.
#[test]
fn network_examples() {
    let root = built_examples();
    let echo = run(&root.join("examples/tcp-echo/tcp-echo.toml"));
    assert_eq!(echo.matches("200 round trips checked").count(), 3, "{echo}");
    assert!(echo.contains("for 3 clients"), "{echo}");

    // The senders send for 10 s, not the example's 3: on a busy machine
    // the meter reads late, and what the first senders sent before the
    // last one connected, still in the sockets' buffers when the shares'
    // window opens, counts in it; over 10 s that is a small part.
    let bandwidth = root.join("examples/bandwidth");
    let text = std::fs::read_to_string(bandwidth.join("bandwidth.toml"))
        .unwrap()
        .replace("\"build/", &format!("\"{}/build/", bandwidth.display()))
        .replace(", \"3\"]", ", \"10\"]");
    let dir = tempfile::tempdir().unwrap();
    let shares = run(&manifest(dir.path(), &text));
    for (tenant, want) in [
        ("tenant-a", 100.0 / 6.0),
        ("tenant-b", 200.0 / 6.0),
        ("tenant-c", 50.0),
    ] {
        let line = shares
            .lines()
            .find(|l| l.contains(tenant) && l.contains("% of"))
            .unwrap();
        let pct: f64 = line
            .split_whitespace()
            .rev()
            .nth(3)
            .unwrap()
            .trim_end_matches('%')
            .parse()
            .unwrap();
        assert!(
            (pct - want).abs() < 3.0,
            "{tenant}: {pct}% (want {want:.1}%)\n{shares}"
        );
    }

    // The file server on port 0, fetched by curl.
    let dir = tempfile::tempdir().unwrap();
    let http = root.join("examples/http");
    let text = std::fs::read_to_string(http.join("http.toml"))
        .unwrap()
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("build/", &format!("{}/build/", http.display()))
        .replace("\"www\"", &format!("\"{}/www\"", http.display()))
        .replace("memory_limit", "args = [\"2\"]\nmemory_limit");
    let m = manifest(dir.path(), &text);
    let mut server = Launch::new(&m)
        .args(["--no-cache"])
        .with(|c| {
            c.stdout(std::process::Stdio::piped());
        })
        .start();
    let mut out = std::io::BufReader::new(server.child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(line.contains("serving /www on descriptor 4"), "{line}");
    // Its listener's port: the one `warden run` listens on besides its
    // control API's.
    let control: u16 = server
        .control()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ports = listening_ports(server.pid());
    let [port] = ports
        .iter()
        .copied()
        .filter(|&p| p != control)
        .collect::<Vec<_>>()[..]
    else {
        panic!("listening on {ports:?}, control {control}")
    };
    let curl = |path: &str| {
        let o = std::process::Command::new("curl")
            .args(["-s", "-i", "--max-time", "20"])
            .arg(format!("http://127.0.0.1:{port}{path}"))
            .output()
            .expect("curl is installed");
        String::from_utf8(o.stdout).unwrap()
    };
    let page = curl("/");
    assert!(page.starts_with("HTTP/1.0 200 OK"), "{page}");
    assert!(page.contains("Served by a WASI task"), "{page}");
    assert!(curl("/nothing.html").starts_with("HTTP/1.0 404"));
    let status = server.wait(std::time::Duration::from_secs(20));
    assert!(status.success());
}

/// The example site: a C handler, an AssemblyScript handler and a C
/// servlet answer a real HTTP client.
#[test]
fn site_example() {
    let root = built_examples();
    let site = root.join("examples/site");
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(site.join("site.toml"))
        .unwrap()
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("\"build/", &format!("\"{}/build/", site.display()));
    let site = Launch::new(&manifest(dir.path(), &text))
        .args(["--no-cache"])
        .control("off")
        .start();
    let base = site.base();
    let curl = |path: &str| {
        let o = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "30", &format!("{base}{path}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let page = curl("/");
    assert!(
        page.contains("Hello from a task") && page.contains("GET /"),
        "{page}"
    );
    let fortune = curl("/fortune?n=1");
    assert!(
        fortune.starts_with("Copy semantics") && fortune.contains("from AssemblyScript"),
        "{fortune}"
    );
    assert!(curl("/count").contains("/count has been visited 1 time;"));
    assert!(curl("/count").contains("/count has been visited 2 times;"));
}

/// The components example: its Python and C commands, and its Python
/// and JavaScript HTTP routes.
#[test]
fn components_example() {
    let root = built_examples();
    let example = root.join("examples/components");
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(example.join("components.toml"))
        .unwrap()
        .replace("127.0.0.1:8090", "127.0.0.1:0")
        .replace("\"build/", &format!("\"{}/build/", example.display()))
        .replace(
            "\"/data\" = \".\"",
            &format!("\"/data\" = \"{}\"", example.display()),
        );
    let path = manifest(dir.path(), &text);
    let served = Launch::new(&path)
        .control("off")
        .with(|c| {
            c.env("WARDEN_CACHE_DIR", crate::components::cache_dir())
                .stdout(std::process::Stdio::piped());
        })
        .start();
    let curl = |path: &str| {
        let o = std::process::Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "30",
                "-d",
                "abc",
                &format!("{}{path}", served.base()),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert_eq!(curl("/py/x?y=1"), "Python got /py/x?y=1 with 3 bytes\n");
    assert_eq!(curl("/js/z"), "JavaScript got /js/z\n");
    // The tasks' lines, read as they come (the commands end on their own).
    let mut served = served;
    let stdout = served.child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let count = text.lines().count();
    let mut wants = vec![
        "[hello] hello from Python, Alta, JX".to_string(),
        format!("[hello] /data/components.toml has {count} lines"),
        "[count] C component read 0 bytes".to_string(),
    ];
    while !wants.is_empty() {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("never printed {wants:?}"));
        wants.retain(|w| *w != line);
    }
}

/// The demo system runs as the README says: its site answers while its
/// batch tasks end (the hog and the spinner killed at their limits), and
/// Ctrl-C ends it with exit code 1.
#[test]
fn demo_system_runs() {
    let root = built_examples();
    let demo = root.join("examples/demo");
    let dir = tempfile::tempdir().unwrap();
    let mut text = std::fs::read_to_string(demo.join("demo.toml"))
        .unwrap()
        .replace("127.0.0.1:8080", "127.0.0.1:0");
    text = text.replace("module = \"", &format!("module = \"{}/", demo.display()));
    let path = manifest(dir.path(), &text);
    let report = dir.path().join("report.json");
    let report_arg = report.display().to_string();
    let mut demo = Launch::new(&path)
        .args(["--no-cache", "--report", &report_arg])
        .start();
    let (base, control) = (demo.base().to_string(), demo.control().to_string());
    let curl = |url: &str| {
        let o = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "30", "-w", "\n%{http_code}", url])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(curl(&format!("{base}/")).contains("Hello from a task"));
    assert!(curl(&format!("{base}/spin")).ends_with("\n503"));
    assert!(curl(&format!("{base}/count")).contains("visited 1 time"));
    let fortune = curl(&format!("{base}/fortune?n=1"));
    assert!(
        fortune.contains("from AssemblyScript") && fortune.ends_with("\n200"),
        "{fortune}"
    );
    // Wait until the batch tasks have ended (readiness, not a timer).
    let batch = [
        "greet", "primes.0", "primes.1", "primes.2", "nap", "hog", "spinner",
    ];
    let t = std::time::Instant::now();
    loop {
        let tasks: serde_json::Value = serde_json::from_str(
            curl(&format!("http://{control}/api/tasks"))
                .rsplit_once('\n')
                .unwrap()
                .0,
        )
        .unwrap();
        let ended = |n: &str| {
            tasks.as_array().unwrap().iter().any(|t| {
                t["name"] == n
                    && matches!(t["state"].as_str(), Some("exited" | "killed" | "trapped"))
            })
        };
        if batch.iter().all(|n| ended(n)) {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "batch tasks still running: {tasks}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(demo.pid() as i32, libc::SIGINT) };
    let status = demo.wait(std::time::Duration::from_secs(30));
    assert_eq!(status.code(), Some(1));
    let tasks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let task = |name: &str| {
        tasks
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no task {name}"))
            .clone()
    };
    assert!(task("hog")["reason"]
        .as_str()
        .unwrap()
        .contains("memory limit"));
    assert!(task("spinner")["reason"]
        .as_str()
        .unwrap()
        .contains("cpu limit"));
    assert!(task("counter")["reason"]
        .as_str()
        .unwrap()
        .contains("Ctrl-C"));
    for name in ["greet", "primes.0", "primes.1", "primes.2", "nap"] {
        assert_eq!(task(name)["exit_code"], 0, "{name}");
    }
}

/// The cluster example: a broker and three nodes, the key-value store on
/// one and a client on each of the others, run by its script.
#[test]
fn cluster_example() {
    let root = built_examples();
    let out = std::process::Command::new(root.join("examples/cluster/run"))
        .env("WARDEN", env!("CARGO_BIN_EXE_warden"))
        .env("XDG_RUNTIME_DIR", runtime_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for node in ["b", "c"] {
        let line = format!("[{node}] 200 keys written, 100 left after deleting every other one");
        assert!(stdout.contains(&line), "{stdout}");
    }
    assert!(
        stdout.contains("[a] 1402 operations, 200 entries left"),
        "{stdout}"
    );
}

/// The file server example: an ext2 image served over NFS by tasks, as
/// its README says, reached by libnfs's nfs-cat; its file-system task,
/// killed, comes back under its supervisor and the next read succeeds.
#[test]
fn fileserver_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    std::fs::write(dir.path().join("files/hello.txt"), "served\n").unwrap();
    let made = std::process::Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext2", "-d"])
        .arg(dir.path().join("files"))
        .arg(&img)
        .arg("64M")
        .status()
        .unwrap();
    assert!(made.success());
    // The script takes a port to print in its address (not port 0).
    let port = fixed_port().to_string();
    let mut child = Reaped(
        std::process::Command::new(root.join("examples/fileserver/run"))
            .arg(&img)
            .arg(&port)
            .args(["--control", "127.0.0.1:0"])
            .env("XDG_RUNTIME_DIR", crate::util::runtime_dir())
            // The warden under test, whatever else is on the PATH.
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    Path::new(env!("CARGO_BIN_EXE_warden"))
                        .parent()
                        .unwrap()
                        .display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let errors = std::io::BufReader::new(child.stderr.take().unwrap());
    let control = std::io::BufRead::lines(errors)
        .map_while(Result::ok)
        .find_map(|l| {
            let at = l.strip_prefix("warden: dashboard at http://")?;
            Some(at.split('/').next()?.to_string())
        })
        .expect("the dashboard line");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let url = lines.next().unwrap().unwrap();
    assert_eq!(
        url,
        format!("nfs://127.0.0.1/export?nfsport={port}&mountport={port}&version=3")
    );
    // Serving once its tasks have printed their lines.
    let served = lines.any(|l| l.is_ok_and(|l| l.contains("nfs: serving /export")));
    assert!(served);
    let cat = || {
        let out = std::process::Command::new("nfs-cat")
            .arg(url.replace("/export?", "/export/hello.txt?"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(cat(), "served\n");
    let killed = crate::control::cli(&control, &["kill", "fs"]);
    assert!(killed.status.success(), "{killed:?}");
    assert_eq!(
        cat(),
        "served\n",
        "not served after the file system's restart"
    );
}

/// Runs an example's own script, which must exit 0, with the warden
/// under test first on its PATH: its stdout.
fn run_script(script: &str) -> String {
    let root = built_examples();
    let bin = Path::new(env!("CARGO_BIN_EXE_warden")).parent().unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    let out = std::process::Command::new(root.join(script))
        .env("PATH", format!("{}:{path}", bin.display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script}: {stdout}{stderr}");
    stdout
}

/// A store in C serving a WIT interface, clients in Python and
/// JavaScript bound to it: every client's checks pass, and each ran in
/// its own task.
#[test]
fn typed_example() {
    let stdout = run_script("examples/typed/run");
    for lang in ["python", "javascript"] {
        let said = format!("[{lang}] {lang}: 12 checks passed");
        assert!(stdout.contains(&said), "{said:?} missing from {stdout}");
        assert!(stdout.contains(&format!("({lang}) exited 0")), "{stdout}");
    }
}

/// A Python component calls a C module's byte service and uses a memory
/// object through warden:kernel: its checks pass and both tasks exit 0.
#[test]
fn kernel_example() {
    let stdout = run_script("examples/kernel/run");
    assert!(
        stdout.contains("[python] python: 11 checks passed"),
        "{stdout}"
    );
    assert!(stdout.contains("(python) exited 0"), "{stdout}");
    assert!(stdout.contains("(echo) exited 0"), "{stdout}");
}

/// Five unmodified programs, in C, Rust, Zig, AssemblyScript and Java,
/// whose /data an ext2 task serves: what each wrote is on the image, as
/// debugfs reads it, and e2fsck finds the image clean.
#[test]
fn files_example() {
    let stdout = run_script("examples/files/run");
    for lang in ["c", "rust", "zig", "assemblyscript", "java"] {
        let said = format!("[{lang}] {lang}: wrote and read back /data/{lang}.txt");
        assert!(stdout.contains(&said), "{said:?} missing from {stdout}");
        let on_image = format!("{lang}.txt: written by {lang}\n");
        assert!(
            stdout.contains(&on_image),
            "{on_image:?} missing from {stdout}"
        );
    }
    assert!(stdout.ends_with("--- e2fsck -fn:\nclean\n"), "{stdout}");
}
