/* The file-service protocol: how a client task reaches a file-system
 * task (such as services/ext2) over a portal. One request is one call;
 * every number is little-endian.
 *
 * A request is a warden_fs_req, then its name (name_len bytes, no NUL),
 * then its data (data_len bytes). A reply is a warden_fs_reply, then its
 * payload (len bytes). Files are named by inode number (WARDEN_FS_ROOT is
 * the root directory), as NFS names them by handle: a client walks a path
 * one LOOKUP at a time. `status` is 0 or a negative Linux errno (-ENOENT,
 * -EEXIST, -ENOTDIR, -EISDIR, -ENOTEMPTY, -ENOSPC, -EIO, ...).
 *
 *   op         ino        a          b          name  data      payload
 *   LOOKUP     dir        -          -          name  -         attr
 *   GETATTR    file       -          -          -     -         attr
 *   READ       file       offset     length     -     -         bytes (fewer at the end)
 *   WRITE      file       offset     -          -     bytes     attr (after)
 *   CREATE     dir        mode       -          name  -         attr (-EEXIST if it exists)
 *   MKDIR      dir        mode       -          name  -         attr
 *   UNLINK     dir        -          -          name  -         -
 *   RMDIR      dir        -          -          name  -         -
 *   RENAME     dir        -          new dir    name  new name  -
 *   SYMLINK    dir        -          -          name  target    attr
 *   READLINK   link       -          -          -     -         target
 *   READDIR    dir        cookie     max bytes  -     -         entries
 *   TRUNCATE   file       size       -          -     -         attr
 *   FSYNC      file       -          -          -     -         -        (everything reaches the device)
 *   STATFS     -          -          -          -     -         warden_fs_statfs
 *   LINK       file       -          dir        name  -         attr
 *   SETATTR    file       mode|-1    mtime|-1   -     [ns]      attr     (mode bits 07777; mtime in s,
 *                                                                          data: its nanoseconds, a u32)
 *
 * A READ may carry one handle: a writable permit (warden_permit_grant)
 * for the client's buffer of `length` bytes. A server that takes it
 * writes the bytes through it (warden_permit_write at offset 0 onwards)
 * and answers with their count as a positive `status` and no payload: the
 * bytes are copied once, from the server's memory to the client's. A
 * server that does not sends them as the payload, as without a permit;
 * either way, 0 bytes is status 0 and no payload. The client revokes the
 * permit once it has the reply (a server closes the handle). Warden's
 * own client and services/nfs lend one for reads of 16 KiB or more;
 * services/ext2 takes it.
 *
 * READDIR's entries are warden_fs_dirent records (each followed by its
 * name), as many as fit in `max bytes`; a record's `next` is the cookie
 * that continues after it, and a reply with no records is the end. The
 * first cookie is 0; "." and ".." are listed. */
#ifndef WARDEN_FS_H
#define WARDEN_FS_H

#include <stdint.h>

#define WARDEN_FS_ROOT 2u

enum {
    WARDEN_FS_LOOKUP = 1,
    WARDEN_FS_GETATTR,
    WARDEN_FS_READ,
    WARDEN_FS_WRITE,
    WARDEN_FS_CREATE,
    WARDEN_FS_MKDIR,
    WARDEN_FS_UNLINK,
    WARDEN_FS_RMDIR,
    WARDEN_FS_RENAME,
    WARDEN_FS_SYMLINK,
    WARDEN_FS_READLINK,
    WARDEN_FS_READDIR,
    WARDEN_FS_TRUNCATE,
    WARDEN_FS_FSYNC,
    WARDEN_FS_STATFS,
    WARDEN_FS_LINK,
    WARDEN_FS_SETATTR,
};

typedef struct {
    uint32_t op;
    uint32_t name_len;
    uint64_t ino;
    uint64_t a;
    uint64_t b;
    uint32_t data_len;
    uint32_t reserved;
} warden_fs_req;

typedef struct {
    int32_t status;
    uint32_t len;
} warden_fs_reply;

/* File types in `mode` (as POSIX's S_IF*). */
#define WARDEN_FS_S_IFMT  0170000u
#define WARDEN_FS_S_IFREG 0100000u
#define WARDEN_FS_S_IFDIR 0040000u
#define WARDEN_FS_S_IFLNK 0120000u

typedef struct {
    uint64_t ino;
    uint32_t mode;
    uint32_t nlink;
    uint32_t uid;
    uint32_t gid;
    uint64_t size;
    uint64_t blocks;     /* 512-byte units allocated */
    int64_t atime;       /* seconds since the epoch */
    int64_t mtime;
    int64_t ctime;
    uint32_t generation;
    uint32_t reserved;
    uint32_t atime_ns;   /* and nanoseconds (0 where the file system keeps none) */
    uint32_t mtime_ns;
    uint32_t ctime_ns;
    uint32_t reserved2;
} warden_fs_attr;

typedef struct {
    uint64_t ino;
    uint64_t next;       /* the cookie after this entry */
    uint8_t type;        /* 1 file, 2 directory, 7 symlink, 0 other */
    uint8_t name_len;
    uint16_t reserved;
    uint32_t reserved2;
} warden_fs_dirent;

typedef struct {
    uint32_t block_size;
    uint32_t reserved;
    uint64_t blocks;
    uint64_t free_blocks;
    uint64_t inodes;
    uint64_t free_inodes;
} warden_fs_statfs;

/* Most bytes a READ returns, or a WRITE takes, in one call. */
#define WARDEN_FS_MAX_IO (256u * 1024u)

#endif /* WARDEN_FS_H */
