//! The file-service protocol (`sdk/c/warden_fs.h`) as the interposer
//! speaks it, and its answers as WASI sees them: errors as WASI errnos,
//! attributes as `filestat`, file types as WASI's.

/// Operations (`WARDEN_FS_*`).
pub(super) const LOOKUP: u32 = 1;
pub(super) const GETATTR: u32 = 2;
pub(super) const READ: u32 = 3;
pub(super) const WRITE: u32 = 4;
pub(super) const CREATE: u32 = 5;
pub(super) const MKDIR: u32 = 6;
pub(super) const UNLINK: u32 = 7;
pub(super) const RMDIR: u32 = 8;
pub(super) const RENAME: u32 = 9;
pub(super) const SYMLINK: u32 = 10;
pub(super) const READLINK: u32 = 11;
pub(super) const READDIR: u32 = 12;
pub(super) const TRUNCATE: u32 = 13;
pub(super) const FSYNC: u32 = 14;
pub(super) const LINK: u32 = 16;
pub(super) const SETATTR: u32 = 17;

/// The root directory's inode.
pub(super) const ROOT: u64 = 2;
/// Most bytes one READ returns or one WRITE carries.
pub(super) const MAX_IO: usize = 256 * 1024;
/// A request's fixed part, a reply's, an attribute record, a directory
/// entry's fixed part.
pub(super) const REQ: usize = 40;
pub(super) const REPLY: usize = 8;
pub(super) const ATTR: usize = 88;
pub(super) const DIRENT: usize = 24;

/// A request's fixed part; its name and data follow it.
pub(super) struct Req<'a> {
    pub(super) op: u32,
    pub(super) ino: u64,
    pub(super) a: u64,
    pub(super) b: u64,
    pub(super) name: &'a [u8],
}

impl Req<'_> {
    /// A request for `op` on `ino` with no arguments.
    pub(super) fn on(op: u32, ino: u64) -> Self {
        Req {
            op,
            ino,
            a: 0,
            b: 0,
            name: &[],
        }
    }

    /// Writes the fixed part and the name into `buf`, for `data_len`
    /// bytes of data after them.
    pub(super) fn encode(&self, buf: &mut [u8], data_len: usize) {
        buf[0..4].copy_from_slice(&self.op.to_le_bytes());
        buf[4..8].copy_from_slice(&(self.name.len() as u32).to_le_bytes());
        buf[8..16].copy_from_slice(&self.ino.to_le_bytes());
        buf[16..24].copy_from_slice(&self.a.to_le_bytes());
        buf[24..32].copy_from_slice(&self.b.to_le_bytes());
        buf[32..36].copy_from_slice(&(data_len as u32).to_le_bytes());
        buf[36..40].fill(0);
        buf[REQ..REQ + self.name.len()].copy_from_slice(self.name);
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A reply's status and payload length, if it holds a whole header whose
/// payload is there.
pub(super) fn reply_header(reply: &[u8]) -> Option<(i32, usize)> {
    if reply.len() < REPLY {
        return None;
    }
    let (status, len) = (u32_at(reply, 0) as i32, u32_at(reply, 4) as usize);
    (len <= reply.len() - REPLY).then_some((status, len))
}

/// A file's attributes, as far as WASI asks.
#[derive(Clone, Copy, Debug)]
pub(super) struct Attr {
    pub(super) ino: u64,
    pub(super) mode: u32,
    pub(super) nlink: u32,
    pub(super) size: u64,
    pub(super) atime: i64,
    pub(super) mtime: i64,
    pub(super) ctime: i64,
    /// The nanoseconds of atime, mtime, ctime.
    pub(super) ns: [u32; 3],
}

impl Attr {
    pub(super) fn decode(b: &[u8]) -> Option<Attr> {
        if b.len() < ATTR {
            return None;
        }
        Some(Attr {
            ino: u64_at(b, 0),
            mode: u32_at(b, 8),
            nlink: u32_at(b, 12),
            size: u64_at(b, 24),
            atime: u64_at(b, 40) as i64,
            mtime: u64_at(b, 48) as i64,
            ctime: u64_at(b, 56) as i64,
            ns: [u32_at(b, 72), u32_at(b, 76), u32_at(b, 80)].map(|n| n.min(999_999_999)),
        })
    }

    pub(super) fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }

    pub(super) fn is_symlink(&self) -> bool {
        self.mode & S_IFMT == S_IFLNK
    }

    pub(super) fn is_regular(&self) -> bool {
        self.mode & S_IFMT == S_IFREG
    }

    /// Its WASI file type.
    pub(super) fn filetype(&self) -> u8 {
        match self.mode & S_IFMT {
            S_IFREG => filetype::REGULAR,
            S_IFDIR => filetype::DIRECTORY,
            S_IFLNK => filetype::SYMLINK,
            0o020000 => filetype::CHAR,
            0o060000 => filetype::BLOCK,
            0o140000 => filetype::SOCKET_STREAM,
            _ => filetype::UNKNOWN,
        }
    }

    /// As WASI's 64-byte `filestat`, on device `dev`.
    pub(super) fn filestat(&self, dev: u64) -> [u8; 64] {
        let ns = |s: i64, n: u32| {
            (s.max(0) as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(n.into())
        };
        let mut out = [0u8; 64];
        out[0..8].copy_from_slice(&dev.to_le_bytes());
        out[8..16].copy_from_slice(&self.ino.to_le_bytes());
        out[16] = self.filetype();
        out[24..32].copy_from_slice(&u64::from(self.nlink).to_le_bytes());
        out[32..40].copy_from_slice(&self.size.to_le_bytes());
        out[40..48].copy_from_slice(&ns(self.atime, self.ns[0]).to_le_bytes());
        out[48..56].copy_from_slice(&ns(self.mtime, self.ns[1]).to_le_bytes());
        out[56..64].copy_from_slice(&ns(self.ctime, self.ns[2]).to_le_bytes());
        out
    }
}

const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;
const S_IFLNK: u32 = 0o120000;

/// WASI's file types.
pub(super) mod filetype {
    pub(in super::super) const UNKNOWN: u8 = 0;
    pub(in super::super) const BLOCK: u8 = 1;
    pub(in super::super) const CHAR: u8 = 2;
    pub(in super::super) const DIRECTORY: u8 = 3;
    pub(in super::super) const REGULAR: u8 = 4;
    pub(in super::super) const SOCKET_STREAM: u8 = 6;
    pub(in super::super) const SYMLINK: u8 = 7;
}

/// A directory entry's type (ext2's codes) as WASI's.
pub(super) fn dirent_type(t: u8) -> u8 {
    match t {
        1 => filetype::REGULAR,
        2 => filetype::DIRECTORY,
        3 => filetype::CHAR,
        4 => filetype::BLOCK,
        6 => filetype::SOCKET_STREAM,
        7 => filetype::SYMLINK,
        _ => filetype::UNKNOWN,
    }
}

/// One READDIR record at the start of `b`: inode, next cookie, type,
/// name, and the record's length; `None` if `b` holds no whole record.
pub(super) fn dirent(b: &[u8]) -> Option<(u64, u64, u8, &[u8], usize)> {
    if b.len() < DIRENT {
        return None;
    }
    let name_len = b[17] as usize;
    let name = b.get(DIRENT..DIRENT + name_len)?;
    Some((u64_at(b, 0), u64_at(b, 8), b[16], name, DIRENT + name_len))
}

/// WASI errnos the interposer returns itself.
pub(super) mod errno {
    pub(in super::super) const BADF: i32 = 8;
    pub(in super::super) const BUSY: i32 = 10;
    pub(in super::super) const EXIST: i32 = 20;
    pub(in super::super) const FAULT: i32 = 21;
    pub(in super::super) const FBIG: i32 = 22;
    pub(in super::super) const INVAL: i32 = 28;
    pub(in super::super) const IO: i32 = 29;
    pub(in super::super) const ISDIR: i32 = 31;
    pub(in super::super) const LOOP: i32 = 32;
    pub(in super::super) const ILSEQ: i32 = 25;
    pub(in super::super) const NAMETOOLONG: i32 = 37;
    pub(in super::super) const NOENT: i32 = 44;
    pub(in super::super) const NOMEM: i32 = 48;
    pub(in super::super) const NOTDIR: i32 = 54;
    pub(in super::super) const NOTSUP: i32 = 58;
    pub(in super::super) const OVERFLOW: i32 = 61;
    pub(in super::super) const PERM: i32 = 63;
    pub(in super::super) const XDEV: i32 = 75;
}

/// A server's status (a negative Linux errno) as a WASI errno; anything
/// not known here is `EIO`.
pub(super) fn wasi_errno(status: i32) -> i32 {
    const MAP: &[(i32, i32)] = &[
        (1, 63),   // EPERM
        (2, 44),   // ENOENT
        (5, 29),   // EIO
        (6, 60),   // ENXIO
        (9, 8),    // EBADF
        (11, 6),   // EAGAIN
        (12, 48),  // ENOMEM
        (13, 2),   // EACCES
        (14, 21),  // EFAULT
        (16, 10),  // EBUSY
        (17, 20),  // EEXIST
        (18, 75),  // EXDEV
        (20, 54),  // ENOTDIR
        (21, 31),  // EISDIR
        (22, 28),  // EINVAL
        (23, 41),  // ENFILE
        (24, 33),  // EMFILE
        (27, 22),  // EFBIG
        (28, 51),  // ENOSPC
        (29, 70),  // ESPIPE
        (30, 69),  // EROFS
        (31, 34),  // EMLINK
        (34, 68),  // ERANGE
        (36, 37),  // ENAMETOOLONG
        (38, 52),  // ENOSYS
        (39, 55),  // ENOTEMPTY
        (40, 32),  // ELOOP
        (75, 61),  // EOVERFLOW
        (95, 58),  // EOPNOTSUPP
        (116, 72), // ESTALE
        (122, 19), // EDQUOT
    ];
    let e = status.unsigned_abs() as i32;
    MAP.iter()
        .find(|(linux, _)| *linux == e)
        .map_or(errno::IO, |(_, wasi)| *wasi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_laid_out_as_the_header_says() {
        let mut buf = [0xffu8; REQ + 3];
        let q = Req {
            op: LOOKUP,
            ino: 2,
            a: 7,
            b: 9,
            name: b"abc",
        };
        q.encode(&mut buf, 5);
        assert_eq!(&buf[0..8], &[1, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(buf[8], 2);
        assert_eq!(buf[16], 7);
        assert_eq!(buf[24], 9);
        assert_eq!(&buf[32..40], &[5, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&buf[40..], b"abc");
    }

    #[test]
    fn replies_claiming_more_than_they_hold_are_refused() {
        assert_eq!(reply_header(&[0; 4]), None);
        let mut r = vec![0u8; 8];
        r[4] = 1;
        assert_eq!(reply_header(&r), None);
        r.push(0);
        assert_eq!(reply_header(&r), Some((0, 1)));
    }

    #[test]
    fn linux_errors_map_to_wasi_and_unknown_ones_to_eio() {
        assert_eq!(wasi_errno(-2), errno::NOENT);
        assert_eq!(wasi_errno(-39), 55); // ENOTEMPTY
        assert_eq!(wasi_errno(-4095), errno::IO);
        assert_eq!(wasi_errno(i32::MIN), errno::IO);
    }

    #[test]
    fn truncated_directory_records_are_not_read() {
        let mut rec = vec![0u8; DIRENT + 2];
        rec[17] = 3;
        assert!(dirent(&rec).is_none());
        rec[17] = 2;
        rec[DIRENT..].copy_from_slice(b"ab");
        assert_eq!(dirent(&rec).unwrap().3, b"ab");
    }
}
