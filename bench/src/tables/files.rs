//! JX's file-server benchmark (seed 001, the IOZone re-read figure; seed
//! 002): one WASI program re-reading a file it has just read, through an
//! ext2 file system running as a task (its buffer cache hit), beside the
//! same program on a host directory preopen (Linux's page cache), for
//! files from 4 KiB to 16 MiB and records from 4 KiB up; and the first
//! write and read of the largest file.

use super::contestant::{self, Contestant, Measured};
use crate::harness::Ctx;
use crate::inproc::guest_figures;
use crate::model::{key, Table};
use crate::peers::{self, figure};
use std::path::{Path, PathBuf};
use std::process::Command;
use warden::{Manifest, System, SystemSpec, TaskSpec};
use warden_test_guests as guests;

const SERVED: &str = "Warden task, directory served by an ext2 task (its buffer cache)";
const HOST: &str = "Warden task, host directory preopen (Linux page cache)";
const NATIVE: &str = "the same C program compiled for Linux, host directory (page cache)";
const CLI: &str = "wasmtime run --dir, host directory (page cache)";

/// (file size, record size) in KiB, and the column each re-read fills.
const SIZES: [(u64, u64, &str); 7] = [
    (4, 4, "re-read 4 KiB file, 4 KiB records"),
    (64, 4, "re-read 64 KiB, 4 KiB records"),
    (1024, 4, "re-read 1 MiB, 4 KiB records"),
    (1024, 64, "re-read 1 MiB, 64 KiB records"),
    (16384, 4, "re-read 16 MiB, 4 KiB records"),
    (16384, 64, "re-read 16 MiB, 64 KiB records"),
    (16384, 1024, "re-read 16 MiB, 1 MiB records"),
];
const FIRST_WRITE: &str = "first write 16 MiB, 64 KiB records";
const FIRST_READ: &str = "first read 16 MiB, 64 KiB records";

pub fn run(ctx: &Ctx) -> Vec<Table> {
    let mut columns: Vec<(&str, &str)> = SIZES.iter().map(|s| (s.2, "MB/s")).collect();
    columns.push((FIRST_WRITE, "MB/s"));
    columns.push((FIRST_READ, "MB/s"));
    let mut t = Table::new(
        "files",
        "A file system as a task: re-read throughput (MB/s, higher is better)",
        "seeds 001/002 (JX), IOZone re-read: JX's ext2 task reached about half of Linux",
        &columns,
    );
    let rounds: u32 = ctx.pick(20, 3);
    t.method = format!(
        "One C program (crates/test-guests/guests/reread.c) writes a file in records with \
         write(2), reads it back once, then reads it {rounds} more times; it times each phase with \
         the monotonic clock inside the guest and reports the best re-read (MB/s = 10^6 bytes per \
         second). The same program runs as a Warden task twice per round, alternating: once on a \
         directory served by services/ext2 (an ext2 image made by mke2fs, 4 KiB blocks, on a block \
         device backed by a host file, the task's buffer cache 48 MiB so that the file stays \
         cached; every read is requests of the file-service protocol of at most 256 KiB, and \
         one of 16 KiB or more lends the ext2 task the program's buffer, which it writes \
         straight from its cache: see doc/services.md), once on \
         a host directory preopened through Wasmtime's WASI (reads served from Linux's page \
         cache; a task on a local disk makes its file calls on its worker thread, straight into \
         its memory: see crates/warden/src/runtime/disks.rs). Both tasks run on one runtime with \
         2 workers. The third row is \
         reread.c compiled for Linux by the host's C compiler (cc -O2) on the same host \
         directory; the fourth the same module under the `wasmtime` CLI ({cli}, `wasmtime run \
         --dir HOST::/data`), as its users run it. All four print the figures the program \
         measured itself, so start-up is outside them. The ext2 image is not also mounted by \
         the kernel: that needs root and a loop device, which the harness does not assume.",
        cli = super::components::cli_version()
    );
    let setup = Setup::new(ctx);
    let mut list = vec![
        Contestant::warden(SERVED).runs(|out| setup_ok(&setup)?.measure(SERVED, true, rounds, out)),
        Contestant::warden(HOST).runs(|out| setup_ok(&setup)?.measure(HOST, false, rounds, out)),
        Contestant::peer(NATIVE).runs(|out| setup_ok(&setup)?.measure(NATIVE, false, rounds, out)),
        Contestant::peer(CLI).runs(|out| setup_ok(&setup)?.measure(CLI, false, rounds, out)),
    ];
    let m = match &setup {
        Ok(_) => contestant::run(ctx.rounds, &mut list),
        Err(e) => Measured::failed(&list, e),
    };
    contestant::rows(&mut t, &list, &m.samples, "");
    let notes = [(HOST, NATIVE), (HOST, CLI), (SERVED, NATIVE)]
        .iter()
        .filter_map(|&(a, b)| ratio_note(&t, a, b))
        .collect::<Vec<_>>();
    t.notes.extend(notes);
    t.notes.push(
        "Targets: the host-directory row at least 0.5× native with 4 KiB records and 0.8× \
         with 64 KiB records and larger, and at least 1× `wasmtime run` at every size; the \
         ext2 task at least 0.8× native with 64 KiB records and larger."
            .into(),
    );
    vec![m.finish(t)]
}

/// "`a` / `b`:" and the ratio of their medians in each re-read column,
/// if both rows have figures.
fn ratio_note(t: &Table, a: &str, b: &str) -> Option<String> {
    let row = |name: &str| t.rows.iter().find(|r| r.system == name);
    let (ra, rb) = (row(a)?, row(b)?);
    let ratios: Vec<String> = SIZES
        .iter()
        .enumerate()
        .filter_map(|(i, (_, _, column))| {
            let (x, y) = (ra.cells.get(i)?.as_ref()?, rb.cells.get(i)?.as_ref()?);
            Some(format!("{column} {:.2}×", x.median / y.median))
        })
        .collect();
    (!ratios.is_empty()).then(|| format!("{a} / {b}: {}.", ratios.join(", ")))
}

/// The set-up, or its failure as every contestant's error.
fn setup_ok(setup: &Result<Setup, String>) -> Result<&Setup, String> {
    setup.as_ref().map_err(Clone::clone)
}

/// The system Warden's tasks run on (an ext2 task serving an image), the
/// host directory every contestant but the ext2 task reads, and the
/// other contestants' programs.
struct Setup {
    system: System,
    dir: tempfile::TempDir,
    /// The program built for Linux, and the `wasmtime` CLI: each
    /// missing fails only its own row.
    native: Result<PathBuf, String>,
    cli: Result<PathBuf, String>,
}

impl Setup {
    fn new(ctx: &Ctx) -> Result<Setup, String> {
        let native = ctx.peers.native("reread").map(Path::to_path_buf);
        let cli = super::components::wasmtime_cli();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        std::fs::create_dir_all(dir.path().join("src")).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(dir.path().join("host")).map_err(|e| e.to_string())?;
        mke2fs(dir.path())?;
        let text = format!(
            "[runtime]\ncontrol = \"off\"\nworkers = 2\n\
             [[device]]\nname = \"disk\"\nfile = \"disk.img\"\n\
             [[task]]\nname = \"fs\"\nmodule = \"{}\"\nargs = [\"fs\", \"disk\", \"49152\"]\n\
             devices = [\"disk\"]\nprovides = [\"fs\"]\nmax_message_bytes = \"1MiB\"\n\
             memory_limit = \"96MiB\"\nstdout = \"null\"\n",
            guests::EXT2
        );
        let m = Manifest::parse(&text, dir.path())?;
        let system = System::start(SystemSpec::from_manifest(m))?;
        Ok(Setup {
            system,
            dir,
            native,
            cli,
        })
    }

    /// One round of every size for the contestant `name`.
    fn measure(
        &self,
        name: &str,
        served: bool,
        rounds: u32,
        out: &mut crate::model::Samples,
    ) -> Result<(), String> {
        for (size, record, column) in SIZES {
            let args = args(size, record, rounds);
            let f = match name {
                NATIVE => self.run_native(&args)?,
                CLI => self.run_cli(&args)?,
                _ => self.run(served, args)?,
            };
            out.push(&key(name, column), figure(&f, "reread")?);
            if size == 16384 && record == 64 {
                out.push(&key(name, FIRST_WRITE), figure(&f, "write")?);
                out.push(&key(name, FIRST_READ), figure(&f, "read")?);
            }
        }
        Ok(())
    }

    fn run(&self, served: bool, args: Vec<String>) -> Result<Figures, String> {
        let mut spec = TaskSpec::new("reread", guests::REREAD);
        spec.args = args;
        spec.ipc.max_message_bytes = 1 << 20;
        spec.limits.memory_limit = Some(64 << 20);
        match served {
            true => spec.served_dirs = vec![("/data".into(), "fs".into())],
            false => spec.dirs = vec![("/data".into(), self.host())],
        }
        guest_figures(self.system.runtime(), spec)
    }

    /// The program compiled for Linux, on the host directory itself.
    fn run_native(&self, args: &[String]) -> Result<Figures, String> {
        let mut args = args.to_vec();
        args[0] = self.host().display().to_string();
        let native = self.native.as_ref().map_err(Clone::clone)?;
        peers::figures(Command::new(native).args(&args))
    }

    /// The module under the `wasmtime` CLI, the host directory as `/data`.
    fn run_cli(&self, args: &[String]) -> Result<Figures, String> {
        let dir = format!("{}::/data", self.host().display());
        let mut cmd = Command::new(self.cli.as_ref().map_err(Clone::clone)?);
        cmd.args(["run", "--dir", &dir, guests::REREAD]).args(args);
        peers::figures(&mut cmd)
    }

    fn host(&self) -> PathBuf {
        self.dir.path().join("host")
    }
}

type Figures = std::collections::BTreeMap<String, f64>;

/// The program's arguments: directory, file size, record size, rounds
/// (small files re-read more often, so that each is timed over ~16 MiB).
fn args(size_kib: u64, record_kib: u64, rounds: u32) -> Vec<String> {
    let rounds = rounds.max((16384 / size_kib).min(2000) as u32);
    vec![
        "/data".into(),
        (size_kib << 10).to_string(),
        (record_kib << 10).to_string(),
        rounds.to_string(),
    ]
}

/// An ext2 image of 64 MiB with 4 KiB blocks at `dir/disk.img`.
fn mke2fs(dir: &Path) -> Result<(), String> {
    let out = Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext2", "-b", "4096"])
        .arg(dir.join("disk.img"))
        .arg("64M")
        .output()
        .map_err(|e| format!("mke2fs (e2fsprogs): {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}
