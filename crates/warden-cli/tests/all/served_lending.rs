//! A READ on a served directory lends the file system the task's buffer
//! (a writable permit, see `warden_fs.h`), so that the bytes are copied
//! once: they land where they belong whatever the record size, holes
//! included, with many tasks reading at once; and a file system cannot
//! keep the buffer past the read, write beyond it, or claim more bytes
//! than were asked.

use crate::served::{exit_code, file_system, image, start};
use crate::util::{self, guests};

/// FNV-1a, as `sumfile.c` computes it.
fn fnv(bytes: &[u8]) -> String {
    let h = bytes.iter().fold(1469598103934665603u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(1099511628211)
    });
    format!("{h:016x}")
}

/// What `sumfile` prints for `bytes`.
fn sums(bytes: &[u8]) -> String {
    format!("bytes {}\nfnv {h}\npfnv {h}\n", bytes.len(), h = fnv(bytes))
}

/// Bytes from a xorshift generator.
fn noise(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

/// Eight tasks read a file of the image at once, front to back with
/// `read` and back to front with `pread`, in records from 7 bytes to
/// 1 MiB (those of 16 KiB and more lent to the ext2 task), and two read
/// a sparse file: every task read every byte where it lies.
#[test]
fn lent_reads_land_where_they_belong() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let bytes = noise((1 << 20) + 123, 0x9E37_79B9_7F4A_7C15);
    std::fs::write(src.join("in.dat"), &bytes).unwrap();
    // 300 KiB: a hole, 10,000 bytes of data at 100,000, a hole to the end.
    let mut sparse = vec![0u8; 300 << 10];
    sparse[100_000..110_000].copy_from_slice(&noise(10_000, 7));
    let f = std::fs::File::create(src.join("sparse.dat")).unwrap();
    f.set_len(sparse.len() as u64).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &sparse[100_000..110_000], 100_000).unwrap();
    image(dir.path(), "fs", &src, "8M");
    let records = [7, 4096, 16384, 65536, 100_000, 1 << 20, 65536, 1 << 18];
    let mut text = file_system("fs");
    for (i, record) in records.iter().enumerate() {
        let file = if i < 6 { "in.dat" } else { "sparse.dat" };
        text += &format!(
            "[[task]]\nname = \"t{i}\"\nmodule = \"{}\"\nstdout = \"t{i}.out\"\n\
             dirs = {{ \"/data\" = \"service:fs\" }}\nmax_message_bytes = \"1MiB\"\n\
             args = [\"/data/{file}\", \"{record}\"]\n",
            guests::SUMFILE
        );
    }
    let sys = start(dir.path(), &text);
    for i in 0..records.len() {
        assert_eq!(exit_code(&sys, &format!("t{i}")), Some(0), "task {i}");
        let want = sums(if i < 6 { &bytes } else { &sparse });
        assert_eq!(
            util::stdout_of(dir.path(), &format!("t{i}")),
            want,
            "task {i}"
        );
    }
    sys.shutdown(Some("the test is over"));
}

/// The file `fs_keeper.c` serves, of `n` bytes.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

/// A file system (`fs_keeper.c`) in MODE, and a task reading its file of
/// 300,000 bytes in 64 KiB records; the reader's exit code, and what
/// each printed.
fn abused(mode: &str) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[task]]\nname = \"fs\"\nmodule = \"{}\"\nargs = [\"fs\", \"{mode}\", \"300000\"]\n\
         provides = [\"fs\"]\nmax_message_bytes = \"1MiB\"\nstdout = \"fs.out\"\n\
         [[task]]\nname = \"reader\"\nmodule = \"{}\"\nstdout = \"reader.out\"\n\
         stderr = \"reader.out\"\ndirs = {{ \"/data\" = \"service:fs\" }}\n\
         max_message_bytes = \"1MiB\"\nargs = [\"/data/f\", \"65536\"]\n",
        guests::FS_KEEPER,
        guests::SUMFILE
    );
    let sys = start(dir.path(), &text);
    let code = exit_code(&sys, "reader");
    sys.shutdown(Some("the test is over"));
    let out = |name| util::stdout_of(dir.path(), name);
    (code, out("reader"), out("fs"))
}

/// A file system that keeps the permits it was lent and writes through
/// them later finds every one revoked; one that writes past the lent
/// buffer is refused (and its proper write lands); one that claims more
/// bytes than were asked fails the read with EIO.
#[test]
fn a_file_system_cannot_keep_overrun_or_overclaim_a_lent_buffer() {
    let want = sums(&pattern(300_000));
    let (code, reader, fs) = abused("keep");
    assert_eq!((code, reader.as_str()), (Some(0), want.as_str()));
    let stale: Vec<&str> = fs.lines().filter(|l| l.starts_with("stale:")).collect();
    assert!(!stale.is_empty(), "the keeper never tried: {fs}");
    assert!(
        stale.iter().all(|l| l.starts_with("stale: 0 accepted")),
        "{fs}"
    );

    let (code, reader, fs) = abused("overrun");
    assert_eq!((code, reader.as_str()), (Some(0), want.as_str()));
    assert!(fs.contains("overrun: refused"), "{fs}");
    assert!(!fs.contains("overrun: accepted"), "{fs}");

    let (code, reader, _) = abused("overclaim");
    assert_ne!(code, Some(0), "{reader}");
    assert!(reader.contains("I/O error"), "{reader}");
}
