//! Whether a task's file calls may run on the thread that makes them.
//!
//! A read of a file in the page cache takes a few hundred nanoseconds;
//! handing it to a blocking thread and waking the task when it is done
//! takes tens of microseconds, so WASI file calls run on the task's
//! worker when every host directory the task opens lies on a file system
//! whose calls end in the time of a disk or of memory: ext2/3/4, XFS,
//! Btrfs, tmpfs, overlayfs and the like. A directory on a network or
//! user-space file system (NFS, SMB, FUSE, 9p, …), whose calls can wait
//! for as long as a server likes, keeps the task's file calls on the
//! blocking pool, where a slow call stalls no worker and a kill ends the
//! task at once. A FIFO or device node placed in a local directory can
//! still block: see `executor::spare` for what bounds that.

use std::path::{Path, PathBuf};

/// `statfs` magic numbers (linux/magic.h) of file systems whose calls
/// end in disk or memory time.
const LOCAL: [i64; 15] = [
    0xEF53,      // ext2, ext3, ext4
    0x5846_5342, // XFS
    0x9123_683E, // Btrfs
    0x0102_1994, // tmpfs
    0x8584_58F6, // ramfs
    0x794C_7630, // overlayfs
    0xF2F5_2010, // F2FS
    0x2FC1_2FC1, // ZFS
    0xCA45_1A4E, // bcachefs
    0x3153_464A, // JFS
    0x5265_4973, // ReiserFS
    0x7371_7368, // SquashFS
    0xE0F5_E1E2, // EROFS
    0x4D44,      // FAT
    0x2011_BAB0, // exFAT
];

/// Whether every directory of `dirs` is on a local file system (see the
/// module's text); true when there are none.
pub(super) fn all_local(dirs: &[(String, PathBuf)]) -> bool {
    dirs.iter().all(|(_, host)| local(host))
}

/// Whether `path` is on a local file system; false if it cannot be told.
fn local(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path and `s` a statfs record the
    // call fills in; both live across the call.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return false;
    }
    LOCAL.contains(&(s.f_type as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_directory_is_local_and_proc_is_not() {
        let dir = tempfile::tempdir().unwrap();
        assert!(all_local(&[("/d".into(), dir.path().into())]));
        assert!(all_local(&[]));
        assert!(!all_local(&[("/p".into(), "/proc".into())]));
        assert!(!all_local(&[("/x".into(), "/no/such/dir".into())]));
    }
}
