/* The file-service protocol's operations (sdk/c/warden_fs.h) over the
 * mounted file system, and the service loop that answers them. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "ext2.h"

#define REQ_MAX (sizeof(warden_fs_req) + 255 + WARDEN_FS_MAX_IO)
#define REPLY_MAX (sizeof(warden_fs_reply) + WARDEN_FS_MAX_IO)
static uint8_t req_buf[REQ_MAX], reply_buf[REPLY_MAX];
uint32_t generation;

static int valid_name(const char *name, size_t len) {
    if (len == 0 || len > 255) return 0;
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) return 0;
    return !memchr(name, '/', len) && !memchr(name, 0, len);
}

static int attr_of(uint32_t ino, uint8_t *out, uint32_t *len) {
    ext2_inode in;
    int r = inode_read(ino, &in);
    if (r) return r;
    if (!in.links_count || (in.mode & 0xF000) == 0) return -2;
    to_attr(ino, &in, (warden_fs_attr *)out);
    *len = sizeof(warden_fs_attr);
    return 0;
}

static int is_dir(uint32_t ino) {
    ext2_inode in;
    return inode_read(ino, &in) == 0 && (in.mode & 0xF000) == 0x4000 && in.links_count;
}

/* A new inode of `mode` in directory `dir`, its on-disk bytes zeroed
 * (the large-inode area too, with mke2fs's extra size). */
static int inode_make(uint32_t dir, uint16_t mode, uint32_t *ino) {
    int r = inode_alloc(dir, (mode & 0xF000) == 0x4000, ino);
    if (r) return r;
    ext2_inode in;
    memset(&in, 0, sizeof in);
    in.mode = mode;
    in.links_count = (mode & 0xF000) == 0x4000 ? 2 : 1;
    in.atime = in.ctime = in.mtime = now_seconds();
    in.generation = ++generation;
    if ((r = inode_write(*ino, &in)) != 0) return r;
    if (fs.inode_size > 128) {
        uint8_t extra[1024] = {0};
        memcpy(extra, &fs.new_extra_isize, 2);
        uint32_t g = (*ino - 1) / fs.sb.inodes_per_group, i = (*ino - 1) % fs.sb.inodes_per_group;
        uint64_t at = (uint64_t)fs.gd[g].inode_table * fs.block_size + (uint64_t)i * fs.inode_size + 128;
        r = cache_write_raw(at, extra, fs.inode_size - 128);
    }
    return r;
}

static int links(uint32_t ino, int delta) {
    ext2_inode in;
    int r = inode_read(ino, &in);
    if (r) return r;
    in.links_count = (uint16_t)(in.links_count + delta);
    in.ctime = now_seconds();
    return inode_write(ino, &in);
}

/* Drops one link of `ino` (a file or symlink); frees it at none. */
static int drop(uint32_t ino) {
    ext2_inode in;
    int r = inode_read(ino, &in);
    if (r) return r;
    if (in.links_count > 1) return links(ino, -1);
    /* A fast symbolic link keeps its target in the block map's place:
     * there are no blocks to free. */
    if ((in.mode & 0xF000) == 0xA000 && in.blocks == 0) memset(in.block, 0, sizeof in.block);
    else if ((r = truncate_blocks(&in, 0)) != 0) return r;
    inode_set_size(&in, 0);
    if ((r = inode_write(ino, &in)) != 0) return r;
    return inode_free(ino, 0);
}

static int remove_dir(uint32_t parent, const char *name, size_t len) {
    uint32_t ino;
    int r = dir_lookup(parent, name, len, &ino);
    if (r) return r;
    if (!is_dir(ino)) return -20;
    if ((r = dir_is_empty(ino)) <= 0) return r < 0 ? r : -39; /* ENOTEMPTY */
    if ((r = dir_remove(parent, name, len, &ino)) != 0) return r;
    ext2_inode in;
    if ((r = inode_read(ino, &in)) != 0) return r;
    if ((r = truncate_blocks(&in, 0)) != 0) return r;
    inode_set_size(&in, 0);
    if ((r = inode_write(ino, &in)) != 0) return r;
    if ((r = inode_free(ino, 1)) != 0) return r;
    return links(parent, -1);
}

static int remove_file(uint32_t parent, const char *name, size_t len) {
    uint32_t ino;
    int r = dir_lookup(parent, name, len, &ino);
    if (r) return r;
    if (is_dir(ino)) return -21; /* EISDIR */
    if ((r = dir_remove(parent, name, len, &ino)) != 0) return r;
    return drop(ino);
}

/* Undoes inode_make (and dir_init): frees what the inode holds, then the
 * inode, so that a create that fails (a full disk, a full directory)
 * leaves nothing allocated behind. */
static void unmake(uint32_t ino, int dir) {
    ext2_inode in;
    if (inode_read(ino, &in) != 0) return;
    if (truncate_blocks(&in, 0) != 0) return;
    inode_set_size(&in, 0);
    if (inode_write(ino, &in) == 0) inode_free(ino, dir);
}

static int create(uint32_t dir, const char *name, size_t len, uint16_t mode, uint8_t type,
                  uint32_t *ino) {
    if (!valid_name(name, len)) return -22;
    if (!is_dir(dir)) return -20;
    uint32_t found;
    int r = dir_lookup(dir, name, len, &found);
    if (r == 0) return -17; /* EEXIST */
    if (r != -2) return r;
    if ((r = inode_make(dir, mode, ino)) != 0) return r;
    int is_dir_type = type == EXT2_FT_DIR;
    if ((is_dir_type && (r = dir_init(*ino, dir)) != 0) ||
        (r = dir_add(dir, name, len, *ino, type)) != 0) {
        unmake(*ino, is_dir_type);
        return r;
    }
    return is_dir_type ? links(dir, 1) : 0;
}

/* Whether `ino` is `dir` or above it (walking `..` up to the root). */
static int is_ancestor(uint32_t ino, uint32_t dir) {
    for (int depth = 0; depth < 4096; depth++) {
        if (dir == ino) return 1;
        if (dir == EXT2_ROOT_INO) return 0;
        uint32_t up;
        if (dir_lookup(dir, "..", 2, &up) != 0) return 0;
        dir = up;
    }
    return 1;
}

static int do_rename(uint32_t from, const char *name, size_t len, uint32_t to, const char *to_name,
                     size_t to_len) {
    if (!valid_name(name, len) || !valid_name(to_name, to_len)) return -22;
    if (!is_dir(to)) return -20;
    uint32_t ino, there;
    int r = dir_lookup(from, name, len, &ino);
    if (r) return r;
    int moving_dir = is_dir(ino);
    if (moving_dir && from != to && is_ancestor(ino, to)) return -22;
    r = dir_lookup(to, to_name, to_len, &there);
    if (r == 0) {
        if (there == ino) return 0;
        if (is_dir(there) != moving_dir) return moving_dir ? -20 : -21;
        r = moving_dir ? remove_dir(to, to_name, to_len) : remove_file(to, to_name, to_len);
        if (r) return r;
    } else if (r != -2) {
        return r;
    }
    ext2_inode in;
    if ((r = inode_read(ino, &in)) != 0) return r;
    uint8_t type = moving_dir ? EXT2_FT_DIR : (in.mode & 0xF000) == 0xA000 ? EXT2_FT_SYMLINK : EXT2_FT_REG;
    if ((r = dir_add(to, to_name, to_len, ino, type)) != 0) return r;
    if ((r = dir_remove(from, name, len, &ino)) != 0) return r;
    if (moving_dir && from != to) {
        if ((r = dir_set_parent(ino, to)) != 0) return r;
        if ((r = links(from, -1)) != 0) return r;
        if ((r = links(to, 1)) != 0) return r;
    }
    return 0;
}

static int do_symlink(uint32_t dir, const char *name, size_t len, const char *target, size_t tlen,
                      uint32_t *ino) {
    if (tlen >= fs.block_size) return -36; /* ENAMETOOLONG */
    if (tlen == 0 || memchr(target, 0, tlen)) return -22;
    int r = create(dir, name, len, 0xA1FF, EXT2_FT_SYMLINK, ino);
    if (r) return r;
    if (tlen < 60) {
        ext2_inode in;
        if ((r = inode_read(*ino, &in)) != 0) return r;
        memcpy(in.block, target, tlen);
        inode_set_size(&in, tlen);
        return inode_write(*ino, &in);
    }
    long n = file_write(*ino, 0, target, tlen);
    if (n >= 0) return 0;
    /* No room for the target: no link left behind without one. */
    remove_file(dir, name, len);
    return (int)n;
}

static long do_readlink(uint32_t ino, uint8_t *out, size_t cap) {
    ext2_inode in;
    int r = inode_read(ino, &in);
    if (r) return r;
    if ((in.mode & 0xF000) != 0xA000) return -22;
    uint64_t size = inode_size(&in);
    if (size > cap) return -36;
    if (in.blocks == 0) {
        memcpy(out, in.block, (size_t)size);
        return (long)size;
    }
    return file_read(ino, 0, out, -1, (size_t)size);
}

/* Sets the mode bits (unless `mode` is all ones) and the mtime (unless
 * `mtime` is), with `ns` nanoseconds if `has_ns`. */
static int do_setattr(uint32_t ino, uint64_t mode, uint64_t mtime, int has_ns, uint32_t ns) {
    ext2_inode in;
    if (has_ns && ns >= 1000000000u) return -22;
    int r = inode_read(ino, &in);
    if (r) return r;
    if (mode != UINT64_MAX) in.mode = (uint16_t)((in.mode & 0xF000) | (mode & 07777));
    if (mtime != UINT64_MAX) in.mtime = (uint32_t)mtime;
    in.ctime = now_seconds();
    if ((r = inode_write(ino, &in)) != 0) return r;
    return mtime != UINT64_MAX && has_ns ? inode_set_mtime_ns(ino, ns) : 0;
}

static int do_statfs(uint8_t *out, uint32_t *len) {
    warden_fs_statfs s = {fs.block_size, 0, fs.sb.blocks_count, fs.sb.free_blocks_count,
                          fs.sb.inodes_count, fs.sb.free_inodes_count};
    memcpy(out, &s, sizeof s);
    *len = sizeof s;
    return 0;
}

/* The directory entry type of a file of `mode`. */
static uint8_t file_type(uint16_t mode) {
    switch (mode & 0xF000) {
    case 0x8000: return EXT2_FT_REG;
    case 0x4000: return EXT2_FT_DIR;
    case 0xA000: return EXT2_FT_SYMLINK;
    case 0x2000: return 3; /* character device */
    case 0x6000: return 4; /* block device */
    case 0x1000: return 5; /* FIFO */
    case 0xC000: return 6; /* socket */
    default: return 0;
    }
}

/* Whether `ino` is a file a client may name: in use, and the root or an
 * ordinary inode (not one of ext2's reserved ones: bad blocks, resize,
 * journal …). */
static int live(uint64_t ino, uint16_t *mode) {
    ext2_inode in;
    if (ino > UINT32_MAX || (ino != EXT2_ROOT_INO && ino < fs.sb.first_ino)) return 0;
    if (inode_read((uint32_t)ino, &in) != 0 || !in.links_count || !(in.mode & 0xF000)) return 0;
    *mode = in.mode;
    return 1;
}

/* One request: its status; its payload written to `out` (`*len` bytes).
 * A READ that lent a permit (`lent`) gets its bytes through it, and their
 * count as the status. */
static int handle(const warden_fs_req *q, const char *name, const uint8_t *data,
                  warden_handle lent, uint8_t *out, uint32_t *len) {
    uint32_t ino = (uint32_t)q->ino, made;
    long n;
    int r;
    uint16_t mode = 0;
    *len = 0;
    if (q->op != WARDEN_FS_STATFS && q->op != WARDEN_FS_FSYNC && !live(q->ino, &mode)) return -116; /* ESTALE */
    int regular = (mode & 0xF000) == 0x8000;
    if ((q->op == WARDEN_FS_READ || q->op == WARDEN_FS_WRITE || q->op == WARDEN_FS_TRUNCATE) && !regular)
        return (mode & 0xF000) == 0x4000 ? -21 : -22;
    switch (q->op) {
    case WARDEN_FS_LOOKUP:
        if (q->name_len == 0 || q->name_len > 255) return -22;
        if ((r = dir_lookup(ino, name, q->name_len, &made)) != 0) return r;
        return attr_of(made, out, len);
    case WARDEN_FS_GETATTR:
        return attr_of(ino, out, len);
    case WARDEN_FS_READ:
        if (is_dir(ino)) return -21;
        n = file_read(ino, q->a, out, lent, q->b < WARDEN_FS_MAX_IO ? (size_t)q->b : WARDEN_FS_MAX_IO);
        if (n < 0 || lent >= 0) return (int)n;
        *len = (uint32_t)n;
        return 0;
    case WARDEN_FS_WRITE:
        if (is_dir(ino)) return -21;
        if (q->a > fs.max_file || q->data_len > fs.max_file - q->a) return -27; /* EFBIG */
        n = file_write(ino, q->a, data, q->data_len);
        if (n < 0) return (int)n;
        return attr_of(ino, out, len);
    case WARDEN_FS_CREATE:
        if ((r = create(ino, name, q->name_len, (uint16_t)(0x8000 | (q->a & 07777)), EXT2_FT_REG, &made)) != 0) return r;
        return attr_of(made, out, len);
    case WARDEN_FS_MKDIR:
        if ((r = create(ino, name, q->name_len, (uint16_t)(0x4000 | (q->a & 07777)), EXT2_FT_DIR, &made)) != 0) return r;
        return attr_of(made, out, len);
    case WARDEN_FS_UNLINK:
        return valid_name(name, q->name_len) ? remove_file(ino, name, q->name_len) : -22;
    case WARDEN_FS_RMDIR:
        return valid_name(name, q->name_len) ? remove_dir(ino, name, q->name_len) : -22;
    case WARDEN_FS_RENAME:
        if (q->b > UINT32_MAX) return -22;
        return do_rename(ino, name, q->name_len, (uint32_t)q->b, (const char *)data, q->data_len);
    case WARDEN_FS_SYMLINK:
        if ((r = do_symlink(ino, name, q->name_len, (const char *)data, q->data_len, &made)) != 0) return r;
        return attr_of(made, out, len);
    case WARDEN_FS_READLINK:
        n = do_readlink(ino, out, WARDEN_FS_MAX_IO);
        if (n < 0) return (int)n;
        *len = (uint32_t)n;
        return 0;
    case WARDEN_FS_READDIR:
        n = dir_list(ino, q->a, out, q->b < WARDEN_FS_MAX_IO ? (size_t)q->b : WARDEN_FS_MAX_IO);
        if (n < 0) return (int)n;
        *len = (uint32_t)n;
        return 0;
    case WARDEN_FS_TRUNCATE:
        if (q->a > fs.max_file) return -27;
        if ((r = file_truncate(ino, q->a)) != 0) return r;
        return attr_of(ino, out, len);
    case WARDEN_FS_FSYNC:
        return fs_sync();
    case WARDEN_FS_STATFS:
        return do_statfs(out, len);
    case WARDEN_FS_LINK:
        if (q->b > UINT32_MAX || is_dir(ino)) return -1; /* EPERM */
        if (!valid_name(name, q->name_len)) return -22;
        if (!is_dir((uint32_t)q->b)) return -20;
        if ((r = dir_lookup((uint32_t)q->b, name, q->name_len, &made)) == 0) return -17;
        if ((r = dir_add((uint32_t)q->b, name, q->name_len, ino, file_type(mode))) != 0) return r;
        if ((r = links(ino, 1)) != 0) return r;
        return attr_of(ino, out, len);
    case WARDEN_FS_SETATTR: {
        uint32_t ns = 0;
        if (q->data_len >= 4) memcpy(&ns, data, 4);
        if ((r = do_setattr(ino, q->a, q->b, q->data_len >= 4, ns)) != 0) return r;
        return attr_of(ino, out, len);
    }
    default:
        return -38; /* ENOSYS */
    }
}

/* Write-back, as a kernel's flusher does it: what clients wrote reaches
 * the device once the service has had no request for WRITEBACK_IDLE_NS,
 * or at the latest WRITEBACK_MAX_NS after it was first left unsynced, so
 * that a program that never calls fsync loses at most that much. */
#define WRITEBACK_IDLE_NS 500000000LL
#define WRITEBACK_MAX_NS 5000000000LL

static int64_t monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void write_back(warden_handle service, int64_t *dirty_since) {
    if (!cache_unsynced() && !fs.dirty_meta) {
        *dirty_since = 0;
        return;
    }
    int64_t now = monotonic_ns();
    if (!*dirty_since) *dirty_since = now;
    warden_pollfd p = {service, WARDEN_POLL_IN, 0};
    int idle = warden_poll(&p, 1, WRITEBACK_IDLE_NS) == 0;
    if (idle || now - *dirty_since >= WRITEBACK_MAX_NS) {
        fs_sync();
        *dirty_since = 0;
    }
}

/* Answers requests for ever; returns when the service is gone. Whatever
 * a request holds, it is checked before use: a short or inconsistent
 * request is -EINVAL. */
int serve(warden_handle service) {
    int64_t dirty_since = 0;
    for (;;) {
        write_back(service, &dirty_since);
        uint64_t call;
        warden_handle got[1];
        size_t nh = 1;
        int64_t n = warden_recv(service, &call, req_buf, sizeof req_buf, got, &nh);
        if (n < 0) {
            if (n == WARDEN_ENOCLIENTS || n == WARDEN_EQUOTA) continue;
            fs_sync();
            return 0;
        }
        warden_fs_reply *reply = (warden_fs_reply *)reply_buf;
        uint8_t *out = reply_buf + sizeof *reply;
        warden_fs_req q;
        int status;
        uint32_t len = 0;
        if ((uint64_t)n < sizeof q) {
            status = -22;
        } else {
            memcpy(&q, req_buf, sizeof q);
            const char *name = (const char *)req_buf + sizeof q;
            const uint8_t *data = req_buf + sizeof q + q.name_len;
            if ((uint64_t)sizeof q + q.name_len + q.data_len != (uint64_t)n) status = -22;
            else status = handle(&q, name, data, nh ? got[0] : -1, out, &len);
        }
        if (status) len = 0;
        reply->status = status;
        reply->len = len;
        warden_reply(call, reply_buf, sizeof *reply + len, NULL, 0);
        if (nh) warden_close(got[0]); /* revoked by now, or useless to keep */
    }
}
