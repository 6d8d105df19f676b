//! JX's NFS server (seed 002): files copied with Debian's `nfs-cp`
//! through Warden's NFS task on the ext2 task, beside nfs-ganesha (a
//! user-space NFS server) exporting a host directory, on loopback.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::model::{key, Samples, Table};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use warden::{Manifest, System, SystemSpec};
use warden_test_guests as guests;

const WARDEN: &str = "Warden: NFS task on an ext2 task";
const GANESHA: &str = "nfs-ganesha 4 (VFS, a host directory)";
const WRITE_SMALL: &str = "write 4 KiB files";
const READ_SMALL: &str = "read 4 KiB files";
const WRITE_BIG: &str = "write a 16 MiB file";
const READ_BIG: &str = "read a 16 MiB file";

pub fn run(ctx: &Ctx) -> Vec<Table> {
    let files: usize = ctx.pick(200, 20);
    let mut t = Table::new(
        "nfs",
        "An NFS server as a task: files copied with nfs-cp (higher is better)",
        "seed 002 (JX's NFS server on its ext2 file system)",
        &[
            (WRITE_SMALL, "files/s"),
            (READ_SMALL, "files/s"),
            (WRITE_BIG, "MB/s"),
            (READ_BIG, "MB/s"),
        ],
    );
    t.method = format!(
        "Debian's nfs-cp (libnfs 4, NFS version 3 over TCP on loopback, the ports in the URL so no \
         portmapper is asked) copies {files} files of 4 KiB to the server one process after \
         another, then back, then one file of 16 MiB each way; every copy is a new process that \
         mounts, opens, moves the bytes and exits, timed from the harness around the whole loop, \
         the same for both servers. Warden: services/nfs serving the tree of services/ext2 (an \
         image made by mke2fs, 4 KiB blocks, on a block device backed by a host file), one runtime \
         with 2 workers in the harness's process. nfs-ganesha: ganesha.nfsd with the VFS back end \
         exporting a host directory (Linux's page cache), NLM and RQUOTA off."
    );
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN)
                .prepared(WardenNfs::start, |w, s| copies(s, WARDEN, &w.base(), files)),
            Contestant::peer(GANESHA)
                .prepared(Ganesha::start, |g, s| copies(s, GANESHA, &g.base(), files)),
        ],
    );
    vec![m.finish(t)]
}

/// One round: small files each way, then the big file each way, on the
/// server whose URLs start with `base` (`nfs://127.0.0.1/EXPORT`) and
/// end with `?QUERY` (see [`url`]).
fn copies(
    s: &mut Samples,
    name: &str,
    base: &(String, String),
    files: usize,
) -> Result<(), String> {
    // nfs-cp creates only new files, on the server too: each round's
    // names are its own.
    static ROUND: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let r = ROUND.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let small = dir.path().join("small");
    std::fs::write(&small, vec![7u8; 4096]).map_err(|e| e.to_string())?;
    let back = |i: usize| dir.path().join(format!("back{i}"));
    let t = Instant::now();
    for i in 0..files {
        nfs_cp(&small, &url(base, &format!("r{r}-f{i}.bin")))?;
    }
    s.push(
        &key(name, WRITE_SMALL),
        files as f64 / t.elapsed().as_secs_f64(),
    );
    let t = Instant::now();
    for i in 0..files {
        nfs_cp(&url(base, &format!("r{r}-f{i}.bin")), back(i))?;
    }
    s.push(
        &key(name, READ_SMALL),
        files as f64 / t.elapsed().as_secs_f64(),
    );
    let big = dir.path().join("big");
    std::fs::write(&big, vec![9u8; 16 << 20]).map_err(|e| e.to_string())?;
    let t = Instant::now();
    nfs_cp(&big, &url(base, &format!("r{r}-big.bin")))?;
    s.push(
        &key(name, WRITE_BIG),
        16.0 * 1048576.0 / 1e6 / t.elapsed().as_secs_f64(),
    );
    let t = Instant::now();
    nfs_cp(&url(base, &format!("r{r}-big.bin")), back(files))?;
    s.push(
        &key(name, READ_BIG),
        16.0 * 1048576.0 / 1e6 / t.elapsed().as_secs_f64(),
    );
    match std::fs::metadata(back(files)).map(|m| m.len()) {
        Ok(n) if n == 16 << 20 => Ok(()),
        other => Err(format!("the 16 MiB file came back as {other:?}")),
    }
}

/// `base.0/FILE?base.1`.
fn url(base: &(String, String), file: &str) -> String {
    format!("{}/{file}?{}", base.0, base.1)
}

fn nfs_cp(
    from: impl AsRef<std::ffi::OsStr>,
    to: impl AsRef<std::ffi::OsStr>,
) -> Result<(), String> {
    let out = Command::new("nfs-cp")
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| format!("nfs-cp (libnfs-utils): {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "nfs-cp: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// Waits until `base`'s export answers a listing (20 s at most).
fn wait_ready(base: &(String, String)) -> Result<(), String> {
    let t = Instant::now();
    let probe = format!("{}/?{}", base.0, base.1);
    while t.elapsed() < Duration::from_secs(20) {
        let ok = Command::new("nfs-ls")
            .arg(&probe)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if ok.is_ok_and(|s| s.success()) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("no NFS server answered at {probe} within 20 s"))
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Warden's NFS task on the ext2 task, in this process.
struct WardenNfs {
    _system: System,
    _dir: tempfile::TempDir,
    port: u16,
}

impl WardenNfs {
    fn start() -> Result<WardenNfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext2", "-b", "4096"])
            .arg(dir.path().join("disk.img"))
            .arg("256M")
            .output()
            .map_err(|e| format!("mke2fs (e2fsprogs): {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let port = free_port()?;
        let text = format!(
            "[runtime]\ncontrol = \"off\"\nworkers = 2\n[[device]]\nname = \"disk0\"\nfile = \"disk.img\"\n\
             [[task]]\nname = \"fs\"\nmodule = \"{}\"\nargs = [\"fs\", \"disk0\", \"49152\"]\n\
             devices = [\"disk0\"]\nprovides = [\"fs\"]\nmax_message_bytes = \"1MiB\"\n\
             memory_limit = \"96MiB\"\nstdout = \"null\"\n\
             [[task]]\nname = \"nfs\"\nmodule = \"{}\"\nargs = [\"fs\", \"127.0.0.1:{port}\", \"/export\"]\n\
             uses = [\"fs\"]\nlisten = [\"127.0.0.1:{port}\"]\nmax_message_bytes = \"1MiB\"\n\
             memory_limit = \"96MiB\"\nstdout = \"null\"\n",
            guests::EXT2,
            guests::NFS
        );
        let m = Manifest::parse(&text, dir.path())?;
        let system = System::start(SystemSpec::from_manifest(m))?;
        let me = WardenNfs {
            _system: system,
            _dir: dir,
            port,
        };
        wait_ready(&me.base())?;
        Ok(me)
    }

    fn base(&self) -> (String, String) {
        let p = self.port;
        (
            "nfs://127.0.0.1/export".into(),
            format!("nfsport={p}&mountport={p}&version=3"),
        )
    }
}

/// nfs-ganesha exporting a host directory, as a child process.
struct Ganesha {
    child: Child,
    dir: tempfile::TempDir,
    ports: (u16, u16),
}

impl Ganesha {
    fn start() -> Result<Ganesha, String> {
        let daemon = which("ganesha.nfsd")
            .ok_or("nfs-ganesha is not installed (apt-get install nfs-ganesha nfs-ganesha-vfs)")?;
        rpcbind()?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let export = dir.path().join("export");
        std::fs::create_dir(&export).map_err(|e| e.to_string())?;
        let ports = (free_port()?, free_port()?);
        let conf = dir.path().join("ganesha.conf");
        let text = format!(
            "NFS_CORE_PARAM {{ NFS_Port = {}; MNT_Port = {}; Protocols = 3; Bind_addr = 127.0.0.1; \
             Enable_NLM = false; Enable_RQUOTA = false; }}\n\
             EXPORT {{ Export_Id = 1; Path = {}; Pseudo = /export; Access_Type = RW; \
             Squash = No_Root_Squash; Protocols = 3; Transports = TCP; FSAL {{ Name = VFS; }} }}\n",
            ports.0,
            ports.1,
            export.display()
        );
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        let child = Command::new(daemon)
            .arg("-F")
            .arg("-f")
            .arg(&conf)
            .arg("-L")
            .arg(dir.path().join("log"))
            .arg("-p")
            .arg(dir.path().join("pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("ganesha.nfsd: {e}"))?;
        let me = Ganesha { child, dir, ports };
        wait_ready(&me.base())?;
        Ok(me)
    }

    fn base(&self) -> (String, String) {
        (
            format!(
                "nfs://127.0.0.1{}",
                self.dir.path().join("export").display()
            ),
            format!(
                "nfsport={}&mountport={}&version=3",
                self.ports.0, self.ports.1
            ),
        )
    }
}

impl Drop for Ganesha {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The portmapper nfs-ganesha registers with, started if none runs.
fn rpcbind() -> Result<(), String> {
    let running = Command::new("pgrep").arg("-x").arg("rpcbind").status();
    if running.is_ok_and(|s| s.success()) {
        return Ok(());
    }
    let bin = which("rpcbind").ok_or("rpcbind is not installed (apt-get install rpcbind)")?;
    match Command::new(bin).arg("-w").status() {
        Ok(s) if s.success() => Ok(()),
        other => Err(format!("rpcbind -w: {other:?}")),
    }
}

/// `name` on the PATH or in the sbin directories.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}
