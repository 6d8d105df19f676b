//! WASI file calls on host directories, which run on the task's worker
//! (see `runtime::disks`): what tasks read and write is exact when many
//! do it at once, and the official WASI suite's file tests pass.

use crate::util::*;
use std::path::Path;
use std::time::Duration;

/// FNV-1a, as `sumfile.c` computes it.
fn fnv(bytes: &[u8]) -> String {
    let h = bytes.iter().fold(1469598103934665603u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(1099511628211)
    });
    format!("{h:016x}")
}

/// Ten tasks on two workers read one file at once, front to back with
/// `read` and back to front with `pread`, in records from 7 bytes to
/// 1 MiB, and each writes what it read to a file of its own: every task
/// read every byte where it lies, and every copy equals the file.
#[test]
fn tasks_reading_and_writing_at_once_get_every_byte_right() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let bytes: Vec<u8> = (0..(1 << 20) + 123)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect();
    std::fs::write(data.join("in.dat"), &bytes).unwrap();
    let rt = runtime(2);
    let records = [7, 1000, 4096, 65536, 1 << 20];
    let ids: Vec<_> = (0..10)
        .map(|i| {
            let mut s = spec(dir.path(), &format!("t{i}"), guests::SUMFILE);
            s.dirs = vec![("/data".into(), data.clone())];
            s.args = vec![
                "/data/in.dat".into(),
                records[i % records.len()].to_string(),
                format!("/data/out-{i}.dat"),
            ];
            rt.spawn(&s).unwrap()
        })
        .collect();
    let want = format!(
        "bytes {}\nfnv {h}\npfnv {h}\n",
        bytes.len(),
        h = fnv(&bytes)
    );
    for (i, id) in ids.into_iter().enumerate() {
        let r = wait(&rt, id, Duration::from_secs(120));
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        assert_eq!(stdout_of(dir.path(), &format!("t{i}")), want, "task {i}");
        let copy = std::fs::read(data.join(format!("out-{i}.dat"))).unwrap();
        assert!(copy == bytes, "task {i}'s copy differs");
    }
}

/// Every file test of the official WASI test suite (preview 1, its Rust
/// and C halves), each run as the suite's adapters run them: a fresh copy
/// of its `fs-tests.dir` preopened as `/`, here a host directory.
#[test]
fn the_wasi_test_suite_passes_on_a_host_directory() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut runs = Vec::new();
    for suite in ["rust", "c"] {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/wasi-testsuite")
            .join(suite)
            .join("fs-tests.dir");
        for test in crate::served::suite_tests(suite) {
            let name = format!("{suite}-{}", test.file_stem().unwrap().to_str().unwrap());
            let copy = dir.path().join(format!("{name}.dir"));
            copy_dir(&root, &copy);
            let mut s = spec(dir.path(), &name, test.to_str().unwrap());
            s.dirs = vec![("/".into(), copy)];
            runs.push((name, rt.spawn(&s).unwrap()));
        }
    }
    assert!(runs.len() >= 40, "the suite is vendored");
    let failed: Vec<String> = runs
        .into_iter()
        .map(|(name, id)| (name, wait(&rt, id, Duration::from_secs(120))))
        .filter(|(_, r)| r.exit_code != Some(0))
        .map(|(name, r)| format!("{name}: {r:?}"))
        .collect();
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
}

/// Copies the directory tree `from` to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}
