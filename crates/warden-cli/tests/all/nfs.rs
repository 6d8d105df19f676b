//! The NFS server task (`services/nfs`) on the ext2 task: real NFS clients
//! from Debian's libnfs-utils list, read, write and copy files through it
//! on loopback; the image stays e2fsck-clean and debugfs reads back what
//! they wrote; malformed calls, oversized records and clients that stall
//! harm neither the server task nor its other clients.

use crate::util::{self, guests, manifest};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

/// A served image: the `warden run` process, the directory and the NFS
/// task's port.
struct Export {
    system: util::Served,
    dir: tempfile::TempDir,
    port: u16,
}

impl Export {
    /// An ext2 image (mke2fs, with `/docs/readme.txt`) served by the file
    /// system and NFS tasks, on the port the NFS task was given (port 0:
    /// it prints the one it bound).
    fn start() -> Export {
        Export::start_with(&["64M"], "")
    }

    /// [`Export::start`] on an image mke2fs makes with these arguments
    /// after the image's path (its size last), the NFS task given `rule`
    /// (more of its arguments, as TOML strings: `, "--allow-uid", "1000"`).
    fn start_with(mke2fs: &[&str], rule: &str) -> Export {
        Export::start_keyed(mke2fs, rule, "")
    }

    /// [`Export::start_with`], the file-system task given more keys.
    fn start_keyed(mke2fs: &[&str], rule: &str, fs_keys: &str) -> Export {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src/docs");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("readme.txt"), "made by mke2fs -d\n").unwrap();
        let out = Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext2", "-d"])
            .arg(dir.path().join("src"))
            .arg(dir.path().join("disk.img"))
            .args(mke2fs)
            .output()
            .expect("mke2fs (e2fsprogs) is installed");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = format!(
            "[[device]]\nname = \"disk0\"\nfile = \"disk.img\"\n\
             [[task]]\nname = \"fs\"\nmodule = \"{}\"\nargs = [\"fs\", \"disk0\"]\ndevices = [\"disk0\"]\n\
             provides = [\"fs\"]\nmax_message_bytes = \"1MiB\"\nmemory_limit = \"32MiB\"\nstdout = \"fs.out\"\n{fs_keys}\n\
             [[task]]\nname = \"nfs\"\nmodule = \"{}\"\nargs = [\"fs\", \"127.0.0.1:0\", \"/export\"{rule}]\n\
             uses = [\"fs\"]\nlisten = [\"127.0.0.1:*\"]\nmax_message_bytes = \"1MiB\"\n\
             memory_limit = \"96MiB\"\nstdout = \"nfs.out\"\n",
            guests::EXT2,
            guests::NFS
        );
        let system = util::Launch::new(&manifest(dir.path(), &text))
            .with(|c| {
                c.current_dir(dir.path());
            })
            .start();
        let serving = "nfs: serving /export on 127.0.0.1:";
        let port = util::wait_for_line(dir.path(), "nfs", serving);
        let port = port.parse().unwrap();
        Export { system, dir, port }
    }

    /// The NFS URL of `path` under the export (libnfs: ports given, no
    /// portmapper).
    fn url(&self, path: &str) -> String {
        let p = self.port;
        format!("nfs://127.0.0.1/export{path}?nfsport={p}&mountport={p}&version=3")
    }

    /// Stops the system as Ctrl-C does; the image's path.
    fn stop(mut self) -> (tempfile::TempDir, std::path::PathBuf) {
        // SAFETY: a signal to the child this test started.
        unsafe { libc::kill(self.system.pid() as i32, libc::SIGINT) };
        self.system.wait(Duration::from_secs(60));
        let img = self.dir.path().join("disk.img");
        (self.dir, img)
    }
}

/// Runs a libnfs tool: its stdout, failing the test unless it exits 0.
fn nfs(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool} (libnfs-utils) is installed: {e}"));
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The file-system task, supervised, killed while an NFS client reads:
/// its supervisor starts it again over the same image, the NFS task
/// looks the service up again, and the client's reads succeed, before
/// and after, with the same bytes.
#[test]
fn the_nfs_task_reconnects_when_its_file_system_task_is_restarted() {
    let served = Export::start_keyed(&["64M"], "", "restart = \"permanent\"");
    let url = served.url("/docs/readme.txt");
    let control = served.system.control().to_string();
    let reader = {
        let url = url.clone();
        std::thread::spawn(move || {
            (0..40)
                .map(|_| nfs_try("nfs-cat", &[&url]))
                .collect::<Vec<_>>()
        })
    };
    for _ in 0..3 {
        let out = crate::control::cli(&control, &["kill", "fs"]);
        assert!(out.status.success(), "{out:?}");
        // The next read is served by the restarted task.
        assert_eq!(nfs("nfs-cat", &[&url]), "made by mke2fs -d\n");
    }
    let reads = reader.join().unwrap();
    let failed = reads
        .iter()
        .filter(|r| r.as_deref() != Some("made by mke2fs -d\n"))
        .count();
    assert_eq!(failed, 0, "{reads:?}");
    let tasks = crate::control::ps(&control);
    let fs = (tasks.as_array().unwrap().iter())
        .filter(|t| t["name"] == "fs")
        .max_by_key(|t| t["id"].as_u64())
        .unwrap();
    assert_eq!(fs["restarts"], 3, "{fs}");
    let (_dir, img) = served.stop();
    let (code, report) = util::e2fsck(&img);
    assert_eq!(code, 0, "{report}");
}

/// A libnfs tool's stdout if it exits 0.
fn nfs_try(tool: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(tool).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn libnfs_clients_list_read_write_and_copy_through_the_task() {
    let served = Export::start();
    let listing = nfs("nfs-ls", &[&served.url("")]);
    assert!(
        listing.contains(" docs") && listing.contains(" lost+found"),
        "{listing}"
    );
    assert_eq!(
        nfs("nfs-cat", &[&served.url("/docs/readme.txt")]),
        "made by mke2fs -d\n"
    );
    // A file of 3 MB up and back, and one to a subdirectory.
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761u32) >> 13) as u8)
        .collect();
    let up = served.dir.path().join("up.bin");
    std::fs::write(&up, &data).unwrap();
    nfs("nfs-cp", &[up.to_str().unwrap(), &served.url("/up.bin")]);
    nfs(
        "nfs-cp",
        &[up.to_str().unwrap(), &served.url("/docs/copy.bin")],
    );
    let down = served.dir.path().join("down.bin");
    nfs("nfs-cp", &[&served.url("/up.bin"), down.to_str().unwrap()]);
    assert!(
        std::fs::read(&down).unwrap() == data,
        "the copy back differs"
    );
    let listing = nfs("nfs-ls", &["-R", &served.url("")]);
    assert!(
        listing.contains("3000000 up.bin") && listing.contains("docs/copy.bin"),
        "{listing}"
    );
    let (_dir, img) = served.stop();
    let (code, report) = util::e2fsck(&img);
    assert_eq!(code, 0, "{report}");
    let dumped = img.with_file_name("dumped.bin");
    let out = Command::new("debugfs")
        .args(["-R", &format!("dump /docs/copy.bin {}", dumped.display())])
        .arg(&img)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        std::fs::read(&dumped).unwrap() == data,
        "debugfs reads back another file"
    );
}

/// An RPC record: the last-fragment header and `body`.
fn record(body: &[u8]) -> Vec<u8> {
    let mut r = (0x8000_0000u32 | body.len() as u32).to_be_bytes().to_vec();
    r.extend_from_slice(body);
    r
}

/// An RPC call's header (AUTH_NONE) for `prog`, `vers`, `proc`.
fn call(xid: u32, prog: u32, vers: u32, proc_: u32) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [xid, 0, 2, prog, vers, proc_, 0, 0, 0, 0] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b
}

/// The reply to one record (its body, after the record header), or
/// None if the server closed the connection.
fn reply(s: &mut TcpStream, rec: &[u8]) -> Option<Vec<u8>> {
    s.write_all(rec).ok()?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head).ok()?;
    let len = (u32::from_be_bytes(head) & 0x7fff_ffff) as usize;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// The XDR word at byte `at` of a reply.
fn word(body: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(body[at..at + 4].try_into().unwrap())
}

/// The reply to one record: its accept status (the word after the
/// verifier), or None if the server closed the connection.
fn answer(s: &mut TcpStream, rec: &[u8]) -> Option<u32> {
    Some(word(&reply(s, rec)?, 20))
}

/// `call` with an XDR opaque (a file handle, a path) as its arguments.
fn call_with(xid: u32, prog: u32, proc_: u32, opaque: &[u8]) -> Vec<u8> {
    let mut b = call(xid, prog, 3, proc_);
    b.extend_from_slice(&(opaque.len() as u32).to_be_bytes());
    b.extend_from_slice(opaque);
    b.resize(b.len().next_multiple_of(4), 0);
    b
}

const NFS3ERR_STALE: u32 = 70;
const NFS3ERR_BADHANDLE: u32 = 10001;

/// The NFS status (the first word of the results) of GETATTR on `handle`.
fn getattr(s: &mut TcpStream, xid: u32, handle: &[u8]) -> u32 {
    let body = reply(s, &record(&call_with(xid, 100_003, 1, handle))).expect("an answer");
    assert_eq!(word(&body, 20), 0, "GETATTR accepted");
    word(&body, 24)
}

/// Handles the server never gave, of every shape, are BADHANDLE or
/// STALE; the export's root handle (from MOUNT) works, and a copy of it
/// with another generation is stale.
fn forged_handles_are_refused(s: &mut TcpStream) {
    let mnt = reply(s, &record(&call_with(10, 100_005, 1, b"/export"))).unwrap();
    assert_eq!((word(&mnt, 20), word(&mnt, 24)), (0, 0), "MNT /export");
    let root = mnt[32..32 + word(&mnt, 28) as usize].to_vec();
    assert_eq!(getattr(s, 11, &root), 0, "GETATTR of the root");
    let mut old = root.clone();
    *old.last_mut().unwrap() ^= 0x55;
    // An inode no file uses.
    let unused = [100u32.to_le_bytes(), 0u32.to_le_bytes()].concat();
    let cases: [(&[u8], u32); 5] = [
        (&[0x41; 8], NFS3ERR_STALE),
        (&old, NFS3ERR_STALE),
        (&unused, NFS3ERR_STALE),
        (&root[..4], NFS3ERR_BADHANDLE),
        (&[0x41; 64], NFS3ERR_BADHANDLE),
    ];
    for (i, (handle, want)) in cases.into_iter().enumerate() {
        let status = getattr(s, 12 + i as u32, handle);
        assert_eq!(status, want, "handle {handle:02x?}");
    }
}

#[test]
fn malformed_calls_oversized_records_and_stalled_clients_harm_nobody() {
    let served = Export::start();
    let addr = format!("127.0.0.1:{}", served.port);
    let connect = || {
        let s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    };
    let mut s = connect();
    // Unknown program, other version, unknown procedure, garbage arguments.
    assert_eq!(answer(&mut s, &record(&call(1, 999_999, 1, 0))), Some(1));
    assert_eq!(answer(&mut s, &record(&call(2, 100_003, 2, 0))), Some(2));
    assert_eq!(answer(&mut s, &record(&call(3, 100_003, 3, 99))), Some(3));
    let mut garbage = call(4, 100_003, 3, 1);
    garbage.extend_from_slice(&[0xff; 7]);
    assert_eq!(answer(&mut s, &record(&garbage)), Some(4));
    // Handles the server never gave: BADHANDLE or STALE, not a crash
    // nor another file's attributes.
    forged_handles_are_refused(&mut s);
    // A record over the limit, and bytes that are no call: the server
    // closes those connections.
    let mut big = connect();
    let _ = big.write_all(&0x8100_0000u32.to_be_bytes());
    assert_eq!(answer(&mut big, &record(&call(6, 100_003, 3, 0))), None);
    let mut noise = connect();
    assert_eq!(answer(&mut noise, &record(&[0x13; 40])), None);
    // Clients that stall half way through a record hold only their
    // connections: others are served meanwhile.
    let stalled: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut c = connect();
            c.write_all(&0x8000_1000u32.to_be_bytes()).unwrap();
            c.write_all(&[0u8; 100]).unwrap();
            c
        })
        .collect();
    assert_eq!(
        nfs("nfs-cat", &[&served.url("/docs/readme.txt")]),
        "made by mke2fs -d\n"
    );
    assert_eq!(answer(&mut s, &record(&call(7, 100_005, 3, 0))), Some(0));
    drop(stalled);
    let (_dir, img) = served.stop();
    assert_eq!(util::e2fsck(&img).0, 0);
}

/// MNT of `/export` on `s`: the root's file handle.
fn mount_root(s: &mut TcpStream, xid: u32) -> Vec<u8> {
    let mnt = reply(s, &record(&call_with(xid, 100_005, 1, b"/export"))).unwrap();
    assert_eq!((word(&mnt, 20), word(&mnt, 24)), (0, 0), "MNT /export");
    mnt[32..32 + word(&mnt, 28) as usize].to_vec()
}

/// An XDR opaque: its length, its bytes, padding.
fn opaque(b: &mut Vec<u8>, bytes: &[u8]) {
    b.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    b.extend_from_slice(bytes);
    b.resize(b.len().next_multiple_of(4), 0);
}

/// LOOKUP of `name` in `dir`: its handle.
fn lookup(s: &mut TcpStream, xid: u32, dir: &[u8], name: &str) -> Vec<u8> {
    let mut b = call(xid, 100_003, 3, 3);
    opaque(&mut b, dir);
    opaque(&mut b, name.as_bytes());
    let r = reply(s, &record(&b)).unwrap();
    assert_eq!((word(&r, 20), word(&r, 24)), (0, 0), "LOOKUP {name}");
    r[32..32 + word(&r, 28) as usize].to_vec()
}

const NFS3ERR_FBIG: u32 = 27;

/// SETATTR asking for the largest size there is (2^64 - 1, which the
/// server once took for "no size given" and answered OK) is refused as
/// too big, and the file keeps its size.
#[test]
fn setattr_to_the_largest_size_is_too_big() {
    let served = Export::start();
    let mut s = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let root = mount_root(&mut s, 1);
    let docs = lookup(&mut s, 2, &root, "docs");
    let file = lookup(&mut s, 3, &docs, "readme.txt");
    let mut b = call(4, 100_003, 3, 2);
    opaque(&mut b, &file);
    // mode, uid, gid unset; size set; atime, mtime unchanged; no guard.
    for w in [0u32, 0, 0, 1] {
        b.extend_from_slice(&w.to_be_bytes());
    }
    b.extend_from_slice(&u64::MAX.to_be_bytes());
    for w in [0u32, 0, 0] {
        b.extend_from_slice(&w.to_be_bytes());
    }
    let r = reply(&mut s, &record(&b)).unwrap();
    assert_eq!(
        (word(&r, 20), word(&r, 24)),
        (0, NFS3ERR_FBIG),
        "SETATTR size 2^64-1"
    );
    assert_eq!(
        nfs("nfs-cat", &[&served.url("/docs/readme.txt")]),
        "made by mke2fs -d\n"
    );
    let (_dir, img) = served.stop();
    assert_eq!(util::e2fsck(&img).0, 0);
}

/// A credential or verifier over 400 bytes is answered as RFC 5531 says
/// (MSG_DENIED, AUTH_ERROR, AUTH_BADCRED or AUTH_BADVERF) on a
/// connection that stays open, not by closing it.
#[test]
fn oversized_credentials_are_an_auth_error() {
    let served = Export::start();
    let mut s = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for (xid, at, want) in [(1u32, 6usize, 1u32), (2, 8, 2)] {
        let mut b = call(xid, 100_003, 3, 0);
        // Replace the credential (word 6, 7) or the verifier (8, 9) with
        // an AUTH_UNIX one of 500 bytes.
        let mut body: Vec<u8> = b[..at * 4].to_vec();
        body.extend_from_slice(&1u32.to_be_bytes());
        opaque(&mut body, &[7u8; 500]);
        body.extend_from_slice(&b[(at + 2) * 4..]);
        b = body;
        let r = reply(&mut s, &record(&b)).expect("an answer, not a closed connection");
        let words: Vec<u32> = (0..5).map(|i| word(&r, 4 * i)).collect();
        assert_eq!(words, [xid, 1, 1, 1, want], "MSG_DENIED AUTH_ERROR");
    }
    assert_eq!(answer(&mut s, &record(&call(3, 100_003, 3, 0))), Some(0));
    served.stop();
}

/// 200 connections that never send a byte and 60 that trickle one byte
/// of a record every 100 ms do not lock a working client out: its calls
/// are answered and nfs-cat reads a file meanwhile.
#[test]
fn crowds_of_silent_and_trickling_connections_do_not_lock_a_client_out() {
    let served = Export::start();
    let addr = format!("127.0.0.1:{}", served.port);
    let silent: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let mut trickling: Vec<TcpStream> = (0..60)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    /// Stops the trickling however the test's body ends.
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    std::thread::scope(|scope| {
        let _stop = Stop(&stop);
        scope.spawn(|| {
            let mut header = 0x8000_1000u32.to_be_bytes().into_iter().cycle();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let byte = header.next().unwrap();
                for t in &mut trickling {
                    let _ = t.write_all(&[byte]);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        for xid in 0..5 {
            assert_eq!(answer(&mut s, &record(&call(xid, 100_003, 3, 0))), Some(0));
        }
        assert_eq!(
            nfs("nfs-cat", &[&served.url("/docs/readme.txt")]),
            "made by mke2fs -d\n"
        );
    });
    drop(silent);
    let (_dir, img) = served.stop();
    assert_eq!(util::e2fsck(&img).0, 0);
}

const NFS3ERR_NOSPC: u32 = 28;

/// Files created until the disk is full: the create that finds no room
/// for its directory entry is refused with NOSPC and leaves no inode
/// behind (e2fsck found "Unattached zero-length inode" before).
#[test]
fn creating_files_on_a_full_disk_leaks_nothing() {
    // Many inodes, few blocks: the directory runs out of blocks first.
    let served = Export::start_with(&["-b", "1024", "-N", "2048", "1M"], "");
    let mut s = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let root = mount_root(&mut s, 1);
    let mut status = 0;
    let mut made = 0u32;
    while status == 0 {
        assert!(made < 10_000, "the disk never filled");
        let mut b = call(10 + made, 100_003, 3, 8);
        opaque(&mut b, &root);
        opaque(&mut b, format!("{made:0>250}").as_bytes());
        // UNCHECKED, with nothing set.
        for w in [0u32, 0, 0, 0, 0, 0, 0] {
            b.extend_from_slice(&w.to_be_bytes());
        }
        let r = reply(&mut s, &record(&b)).unwrap();
        assert_eq!(word(&r, 20), 0, "CREATE accepted");
        status = word(&r, 24);
        made += 1;
    }
    assert_eq!(status, NFS3ERR_NOSPC, "after {made} files");
    // COMMIT: all the creates reach the image before the stop (which
    // loses what the file system has not synced, as a power cut does).
    let mut b = call(9, 100_003, 3, 21);
    opaque(&mut b, &root);
    b.extend_from_slice(&[0u8; 12]);
    let r = reply(&mut s, &record(&b)).unwrap();
    assert_eq!((word(&r, 20), word(&r, 24)), (0, 0), "COMMIT");
    let (_dir, img) = served.stop();
    let (code, text) = util::e2fsck(&img);
    assert_eq!(code, 0, "{text}");
    let files = util::debugfs(&img, "ls /")
        .matches(&"0".repeat(200))
        .count();
    assert_eq!(files as u32, made - 1, "the files made are on the image");
}

/// An RPC call's header with AUTH_UNIX credentials for `uid` (and
/// `groups` supplementary groups).
fn call_as(xid: u32, prog: u32, proc_: u32, uid: u32, groups: u32) -> Vec<u8> {
    let mut cred = Vec::new();
    for v in [7u32, 4] {
        cred.extend_from_slice(&v.to_be_bytes()); // stamp; name's length
    }
    cred.extend_from_slice(b"host");
    for v in [uid, uid, groups] {
        cred.extend_from_slice(&v.to_be_bytes());
    }
    for g in 0..groups {
        cred.extend_from_slice(&g.to_be_bytes());
    }
    let mut b = Vec::new();
    for v in [xid, 0, 2, prog, 3, proc_, 1] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    opaque(&mut b, &cred);
    b.extend_from_slice(&[0; 8]); // verifier: AUTH_NONE
    b
}

/// `--allow-uid 1000,2000-2999`: calls as those uids are served; as
/// root, another uid, or without AUTH_UNIX, they are denied AUTH_ERROR
/// AUTH_TOOWEAK (NULL aside), and credentials that do not decode
/// AUTH_BADCRED; libnfs as uid 1000 lists the export and as uid 0 cannot.
#[test]
fn an_export_rule_admits_only_its_uids() {
    let served = Export::start_with(&["64M"], r#", "--allow-uid", "1000,2000-2999""#);
    let mut s = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let denied = |r: Vec<u8>| (0..5).map(|i| word(&r, 4 * i)).collect::<Vec<u32>>();
    for (xid, uid) in [(1u32, 0u32), (2, 999), (3, 3000)] {
        let r = reply(&mut s, &record(&call_as(xid, 100_005, 0, uid, 0))).unwrap();
        assert_eq!(word(&r, 20), 0, "NULL is answered to anyone");
        let r = reply(&mut s, &record(&call_as(xid, 100_003, 1, uid, 0))).unwrap();
        assert_eq!(denied(r), [xid, 1, 1, 1, 5], "uid {uid}: AUTH_TOOWEAK");
    }
    let r = reply(&mut s, &record(&call(4, 100_003, 3, 1))).unwrap();
    assert_eq!(denied(r), [4, 1, 1, 1, 5], "AUTH_NONE: AUTH_TOOWEAK");
    let r = reply(&mut s, &record(&call_as(5, 100_003, 1, 1000, 17))).unwrap();
    assert_eq!(denied(r), [5, 1, 1, 1, 1], "17 groups: AUTH_BADCRED");
    for (xid, uid) in [(6u32, 1000u32), (7, 2500)] {
        let mut b = call_as(xid, 100_005, 1, uid, 2);
        opaque(&mut b, b"/export");
        let r = reply(&mut s, &record(&b)).unwrap();
        assert_eq!((word(&r, 20), word(&r, 24)), (0, 0), "uid {uid}: mounted");
    }
    let listed = nfs(
        "nfs-ls",
        &[&format!("{}&uid=1000&gid=1000", served.url("/docs"))],
    );
    assert!(listed.contains("readme.txt"), "{listed}");
    let root = Command::new("nfs-ls")
        .arg(format!("{}&uid=0&gid=0", served.url("/docs")))
        .output()
        .unwrap();
    assert!(
        !root.status.success(),
        "{}",
        String::from_utf8_lossy(&root.stdout)
    );
    served.stop();
}

/// COMMITs everything under `root`, stops the export, and checks the
/// image with e2fsck: what a full disk made the file system undo.
fn commit_stop_and_check(served: Export, s: &mut TcpStream, root: &[u8]) -> std::path::PathBuf {
    let mut b = call(9, 100_003, 3, 21);
    opaque(&mut b, root);
    b.extend_from_slice(&[0u8; 12]);
    let r = reply(s, &record(&b)).unwrap();
    assert_eq!((word(&r, 20), word(&r, 24)), (0, 0), "COMMIT");
    let (dir, img) = served.stop();
    let (code, text) = util::e2fsck(&img);
    assert_eq!(code, 0, "{text}");
    std::mem::forget(dir); // the image outlives the check's caller
    img
}

/// Directories made until the disk is full, then a file written until
/// it is: each refusal is NOSPC, and e2fsck finds the image clean (no
/// inode, block or directory entry left half made).
#[test]
fn directories_and_data_on_a_full_disk_leak_nothing() {
    let served = Export::start_with(&["-b", "1024", "-N", "2048", "1M"], "");
    let mut s = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let root = mount_root(&mut s, 1);
    let (mut status, mut made) = (0, 0u32);
    while status == 0 {
        assert!(made < 10_000, "the disk never filled");
        let mut b = call(10 + made, 100_003, 3, 9); // MKDIR
        opaque(&mut b, &root);
        opaque(&mut b, format!("d{made}").as_bytes());
        b.extend_from_slice(&[0u8; 24]); // sattr3: nothing set
        let r = reply(&mut s, &record(&b)).unwrap();
        assert_eq!(word(&r, 20), 0, "MKDIR accepted");
        status = word(&r, 24);
        made += 1;
    }
    assert_eq!(status, NFS3ERR_NOSPC, "after {made} directories");
    let img = commit_stop_and_check(served, &mut s, &root);
    let dirs = util::debugfs(&img, "ls /").matches(" d").count();
    assert!(
        dirs as u32 >= made - 1,
        "{dirs} of {made} directories on the image"
    );

    let served = Export::start_with(&["-b", "1024", "-N", "64", "1M"], "");
    let mut s = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let root = mount_root(&mut s, 1);
    let mut b = call(2, 100_003, 3, 8); // CREATE "data"
    opaque(&mut b, &root);
    opaque(&mut b, b"data");
    b.extend_from_slice(&[0u8; 28]);
    let r = reply(&mut s, &record(&b)).unwrap();
    assert_eq!(
        (word(&r, 20), word(&r, 24), word(&r, 28)),
        (0, 0, 1),
        "CREATE"
    );
    let len = word(&r, 32) as usize;
    let file = r[36..36 + len].to_vec();
    let chunk = vec![0x5au8; 32 << 10];
    let (mut status, mut at) = (0, 0u64);
    while status == 0 {
        assert!(at < 4 << 20, "the disk never filled");
        let mut b = call(3, 100_003, 3, 7); // WRITE, FILE_SYNC
        opaque(&mut b, &file);
        b.extend_from_slice(&at.to_be_bytes());
        b.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        b.extend_from_slice(&2u32.to_be_bytes());
        opaque(&mut b, &chunk);
        let r = reply(&mut s, &record(&b)).unwrap();
        assert_eq!(word(&r, 20), 0, "WRITE accepted");
        status = word(&r, 24);
        at += chunk.len() as u64;
    }
    assert_eq!(status, NFS3ERR_NOSPC, "after {at} bytes");
    commit_stop_and_check(served, &mut s, &root);
}

/// A TCP connection to `port` on loopback from `from` (another loopback
/// address stands for another client host).
fn connect_from(from: &str, port: u16) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: std::net::SocketAddr = format!("{from}:0").parse().unwrap();
    s.bind(&local.into()).unwrap();
    let to: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

/// One client host (127.0.0.2) opening 60 connections keeps at most 32
/// of them (its oldest silent ones give way), and a client on another
/// host (127.0.0.3) is served meanwhile.
#[test]
fn one_client_address_holds_at_most_half_the_connections() {
    let served = Export::start();
    let mut crowd: Vec<TcpStream> = (0..60)
        .map(|_| connect_from("127.0.0.2", served.port))
        .collect();
    let mut other = connect_from("127.0.0.3", served.port);
    other
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(
        answer(&mut other, &record(&call(1, 100_003, 3, 0))),
        Some(0)
    );
    // The other host's call was answered after all 60 were accepted
    // (in order): the closed ones read end-of-file now, the held ones
    // would block (they are well within their 10 s to send a call).
    let mut closed = 0;
    for s in &mut crowd {
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(0) => closed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => closed += 1,
            _ => {}
        }
    }
    assert_eq!(
        closed,
        60 - 32,
        "the host's connections past 32 were closed"
    );
    assert_eq!(
        answer(&mut other, &record(&call(2, 100_003, 3, 0))),
        Some(0)
    );
    served.stop();
}
