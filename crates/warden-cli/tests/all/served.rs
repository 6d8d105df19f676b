//! Directories served by a file-system task (`dirs = { "/data" =
//! "service:fs" }`): unmodified programs read and write an ext2 image
//! made by mke2fs through the ext2 task, checked afterwards by e2fsck
//! and debugfs; the file tests of the official WASI test suite run
//! against a served directory; a file system that dies fails its
//! clients' calls with EIO, and a restarted one serves them again; a
//! served directory confines paths as a host one does.

use crate::util::{self, guests};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use warden::{Manifest, System, SystemSpec};

/// An ext2 image at `dir/NAME.img` made by mke2fs (1 KiB blocks) from
/// the directory `src`.
pub(crate) fn image(dir: &Path, name: &str, src: &Path, size: &str) -> PathBuf {
    let img = dir.join(format!("{name}.img"));
    let out = Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext2", "-b", "1024", "-d"])
        .arg(src)
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

/// A file-system task `NAME` on device `NAME` (the image `NAME.img`),
/// serving under the name `NAME`.
pub(crate) fn file_system(name: &str) -> String {
    format!(
        "[[device]]\nname = \"{name}\"\nfile = \"{name}.img\"\n\
         [[task]]\nname = \"{name}\"\nmodule = \"{}\"\nargs = [\"{name}\", \"{name}\"]\n\
         devices = [\"{name}\"]\nprovides = [\"{name}\"]\nmax_message_bytes = \"1MiB\"\n\
         memory_limit = \"16MiB\"\nstdout = \"{name}.out\"\n",
        guests::EXT2
    )
}

/// Starts the system `text` (in `dir`, control off) in this process.
pub(crate) fn start(dir: &Path, text: &str) -> System {
    start_with(dir, text, "off")
}

/// [`start`], the control API on `control`.
fn start_with(dir: &Path, text: &str, control: &str) -> System {
    let text = format!("[runtime]\ncontrol = \"{control}\"\ncache = false\n{text}");
    let m = Manifest::parse(&text, dir).unwrap_or_else(|e| panic!("{e}\n{text}"));
    System::start(SystemSpec::from_manifest(m)).expect("system starts")
}

/// Waits for the task `name` of `sys` to end: its exit code.
pub(crate) fn exit_code(sys: &System, name: &str) -> Option<i32> {
    let rt = sys.runtime();
    let id = rt.find(name).unwrap_or_else(|| panic!("no task {name}"));
    let report = util::wait(rt, id, Duration::from_secs(120));
    report.exit_code
}

#[test]
fn unmodified_programs_read_and_write_files_on_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("docs")).unwrap();
    std::fs::write(src.join("docs/readme.txt"), "made by mke2fs -d\n").unwrap();
    let img = image(dir.path(), "fs", &src, "8M");
    let text = file_system("fs")
        + &format!(
            "[[task]]\nname = \"files\"\nmodule = \"{}\"\nstdout = \"files.out\"\n\
             dirs = {{ \"/data\" = \"service:fs\" }}\n\
             args = [\"/data/docs/readme.txt\", \"write:/data/docs/new.txt:written through WASI\", \
             \"/data/docs/new.txt\", \"/data/missing.txt\", \"/data/../escape\", \"/etc/passwd\", \
             \"sync:/data/docs/new.txt\"]\n",
            guests::FILES
        );
    let sys = start_with(dir.path(), &text, "127.0.0.1:0");
    // The address the control API was bound to.
    let control = sys.control().expect("a control API").0.to_string();
    assert_eq!(exit_code(&sys, "files"), Some(0));
    // Operators see what the served directory carried.
    let services: serde_json::Value =
        serde_json::from_str(&util::get_body(&control, "/api/file-services")).unwrap();
    let fs = &services[0];
    assert_eq!(fs["name"], "fs", "{services}");
    assert!(fs["ops"].as_u64().unwrap() >= 6, "{services}");
    assert!(
        fs["errors"].as_u64().unwrap() >= 1,
        "the missing file: {services}"
    );
    assert_eq!(fs["written_bytes"], 20, "{services}");
    assert!(fs["read_bytes"].as_u64().unwrap() >= 38, "{services}");
    let metrics = util::get_body(&control, "/metrics");
    assert!(
        metrics.contains("warden_file_service_written_bytes_total{service=\"fs\"} 20"),
        "{metrics}"
    );
    // (The system runs in this process: its token file is not where the
    // tests' `warden` processes keep theirs, and a stale one there may
    // name the port; `ps` needs none.)
    let ps = util::warden()
        .env("XDG_RUNTIME_DIR", dir.path())
        .args(["ps", "--control", &control])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&ps.stderr).into_owned();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(ps.contains("FILE SERVICE"), "{ps}{err}");
    assert!(
        ps.lines()
            .any(|l| l.starts_with("fs ") && l.contains("20 B")),
        "{ps}"
    );
    sys.shutdown(Some("the test is over"));
    let out = util::stdout_of(dir.path(), "files");
    let want = "/data/docs/readme.txt: made by mke2fs -d\n\n\
                /data/docs/new.txt: written\n\
                /data/docs/new.txt: written through WASI\n\
                /data/missing.txt: error: No such file or directory\n";
    assert!(out.starts_with(want), "{out}");
    // Neither `..` above the served directory nor a path outside it
    // reaches anything: the host's files stay out of reach.
    for line in ["/data/../escape: error", "/etc/passwd: error"] {
        assert!(out.contains(line), "{out}");
    }
    assert!(!out.contains("root:"), "{out}");
    // What reached the device: everything, once the program synced.
    assert!(out.ends_with("/data/docs/new.txt: synced\n"), "{out}");
    let (code, report) = util::e2fsck(&img);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        util::debugfs(&img, "cat /docs/new.txt"),
        "written through WASI"
    );
}

#[test]
fn a_dead_file_system_fails_its_clients_with_eio_and_a_restarted_one_serves_them() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("note.txt"), "on the image\n").unwrap();
    image(dir.path(), "fs", &src, "8M");
    let text = file_system("fs")
        + &format!(
            "[[task]]\nname = \"reader\"\nmodule = \"{}\"\nstdout = \"reader.out\"\n\
             dirs = {{ \"/data\" = \"service:fs\" }}\nargs = [\"/data/note.txt\"]\n",
            guests::SERVED_LOOP
        );
    let m = Manifest::parse(
        &format!("[runtime]\ncontrol = \"off\"\ncache = false\n{text}"),
        dir.path(),
    )
    .unwrap();
    let fs_spec = m.tasks.iter().find(|t| t.name == "fs").unwrap().clone();
    let sys = System::start(SystemSpec::from_manifest(m)).expect("system starts");
    let rt = sys.runtime();
    util::wait_for_output(dir.path(), "reader", "read ok: on the image");
    let fs = rt.find("fs").unwrap();
    rt.kill(fs, "test").unwrap();
    util::wait(rt, fs, Duration::from_secs(20));
    // The reader's calls fail at once, never hang, while nobody serves.
    util::wait_for_output(dir.path(), "reader", "error: I/O error");
    rt.spawn(&fs_spec)
        .expect("a new file system starts on the device");
    assert_eq!(exit_code(&sys, "reader"), Some(0));
    let out = util::stdout_of(dir.path(), "reader");
    assert!(out.ends_with("read again: on the image\n"), "{out}");
    sys.shutdown(Some("the test is over"));
}

/// An attacker on a served directory: wild pointers, lying lengths,
/// descriptors it does not hold, paths and links that climb out, a link
/// loop, more files than it may open; each gets its errno, and the file
/// system and the image are unharmed.
#[test]
fn hostile_calls_on_a_served_directory_get_errors_and_harm_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let img = image(dir.path(), "fs", &src, "8M");
    let text = file_system("fs")
        + &format!(
            "[[task]]\nname = \"hostile\"\nmodule = \"{}\"\nstdout = \"hostile.out\"\n\
             dirs = {{ \"/data\" = \"service:fs\" }}\n\
             [[task]]\nname = \"after\"\nmodule = \"{}\"\nstdout = \"after.out\"\n\
             dirs = {{ \"/data\" = \"service:fs\" }}\n\
             args = [\"write:/data/after.txt:still serving\", \"/data/after.txt\", \"sync:/data/after.txt\"]\n",
            guests::SERVED_HOSTILE,
            guests::FILES
        );
    let sys = start(dir.path(), &text);
    assert_eq!(exit_code(&sys, "hostile"), Some(0));
    assert_eq!(exit_code(&sys, "after"), Some(0));
    sys.shutdown(Some("the test is over"));
    let out = util::stdout_of(dir.path(), "hostile");
    assert!(out.contains("checks, 0 wrong"), "{out}");
    let after = util::stdout_of(dir.path(), "after");
    assert!(after.contains("/data/after.txt: still serving"), "{after}");
    let (code, report) = util::e2fsck(&img);
    assert_eq!(code, 0, "{report}");
}

/// A file service that answers garbage (replies shorter than their
/// header, lengths past their end, attributes cut short, records whose
/// names run past the reply): its clients' calls fail, none hangs or
/// harms the host, and they see nothing of the garbage as data.
#[test]
fn a_lying_file_service_fails_its_clients_calls_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[task]]\nname = \"liar\"\nmodule = \"{}\"\nargs = [\"fs\"]\nprovides = [\"fs\"]\n\
         max_message_bytes = \"1MiB\"\n\
         [[task]]\nname = \"victim\"\nmodule = \"{}\"\nstdout = \"victim.out\"\n\
         dirs = {{ \"/data\" = \"service:fs\" }}\n\
         args = [{}]\n",
        guests::FS_LIAR,
        guests::FILES,
        (0..40)
            .map(|i| format!("\"/data/f{i}\", \"write:/data/w{i}:x\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let sys = start(dir.path(), &text);
    assert_eq!(exit_code(&sys, "victim"), Some(0));
    sys.shutdown(Some("the test is over"));
    let out = util::stdout_of(dir.path(), "victim");
    assert_eq!(out.lines().count(), 80, "{out}");
    // Every call failed: nothing the liar sent was taken for a file.
    assert!(out.lines().all(|l| l.contains(": error: ")), "{out}");
}

/// The tests of the WASI test suite (`tests/wasi-testsuite`) in `suite`.
pub(crate) fn suite_tests(suite: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/wasi-testsuite")
        .join(suite);
    let mut tests: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    tests.sort();
    tests
}

/// Tests the interposition cannot pass, and why.
const KNOWN_FAILURES: &[(&str, &str)] = &[];

/// Every file test of the official WASI test suite, each run as the
/// suite's adapters run them (its `fs-tests.dir` preopened as `/`), here
/// on an ext2 image made from that directory and served by an ext2 task:
/// all in one system, a file system and an image per test.
#[test]
fn the_wasi_test_suite_passes_on_a_served_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    let mut names = Vec::new();
    for suite in ["rust", "c"] {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/wasi-testsuite")
            .join(suite)
            .join("fs-tests.dir");
        for test in suite_tests(suite) {
            let name = format!("{suite}-{}", test.file_stem().unwrap().to_str().unwrap());
            let fs = format!("fs-{name}");
            image(dir.path(), &fs, &root, "4M");
            text += &file_system(&fs);
            text += &format!(
                "[[task]]\nname = \"{name}\"\nmodule = \"{}\"\nstdout = \"{name}.out\"\n\
                 stderr = \"{name}.err\"\ndirs = {{ \"/\" = \"service:{fs}\" }}\n",
                test.display()
            );
            names.push(name);
        }
    }
    assert!(names.len() >= 40, "the suite is vendored: {names:?}");
    let sys = start(dir.path(), &text);
    let mut failed = Vec::new();
    for name in &names {
        let code = exit_code(&sys, name);
        if code != Some(0) {
            let err =
                std::fs::read_to_string(dir.path().join(format!("{name}.err"))).unwrap_or_default();
            failed.push(format!("{name}: {code:?}: {}", err.trim()));
        }
    }
    sys.shutdown(Some("the test is over"));
    let unexpected: Vec<&String> = failed
        .iter()
        .filter(|f| {
            !KNOWN_FAILURES
                .iter()
                .any(|(n, _)| f.starts_with(&format!("{n}:")))
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "{} of {} failed:\n{}",
        failed.len(),
        names.len(),
        failed.join("\n")
    );
    for (known, why) in KNOWN_FAILURES {
        assert!(
            failed.iter().any(|f| f.starts_with(&format!("{known}:"))),
            "{known} passes now ({why}): take it off the list"
        );
    }
}
