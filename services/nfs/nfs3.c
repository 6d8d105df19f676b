/* NFS version 3's procedures (RFC 1813) over the file-service protocol.
 * Attributes are the file system's; writes asked UNSTABLE stay in its
 * cache until COMMIT (its FSYNC), the others are synced before the reply.
 * Arguments that do not decode are GARBAGE_ARGS; a handle that does not
 * name a live file is BADHANDLE or STALE. */
#include <string.h>
#include "nfs.h"

#define RTMAX (128u * 1024u)
#define WTMAX (128u * 1024u)
#define NAME_MAX 255u
static const uint8_t write_verf[8] = {'w', 'a', 'r', 'd', 'e', 'n', '0', '1'};

static uint32_t ftype(uint32_t mode) {
    switch (mode & WARDEN_FS_S_IFMT) {
    case WARDEN_FS_S_IFREG: return 1;
    case WARDEN_FS_S_IFDIR: return 2;
    case WARDEN_FS_S_IFLNK: return 5;
    default: return 1;
    }
}

static void put_fattr(xdr_out *o, const warden_fs_attr *a) {
    o_u32(o, ftype(a->mode));
    o_u32(o, a->mode & 07777);
    o_u32(o, a->nlink);
    o_u32(o, a->uid);
    o_u32(o, a->gid);
    o_u64(o, a->size);
    o_u64(o, a->blocks * 512);
    o_u32(o, 0); /* rdev */
    o_u32(o, 0);
    o_u64(o, 1); /* fsid */
    o_u64(o, a->ino);
    const int64_t times[3] = {a->atime, a->mtime, a->ctime};
    const uint32_t ns[3] = {a->atime_ns, a->mtime_ns, a->ctime_ns};
    for (int i = 0; i < 3; i++) {
        o_u32(o, (uint32_t)times[i]);
        o_u32(o, ns[i]);
    }
}

static void post_attr(xdr_out *o, const warden_fs_attr *a) {
    o_u32(o, a != NULL);
    if (a) put_fattr(o, a);
}

/* Post-operation attributes of `ino`, fetched afresh. */
static void post_attr_of(xdr_out *o, uint64_t ino) {
    warden_fs_attr a;
    post_attr(o, fsc_attr(WARDEN_FS_GETATTR, ino, 0, 0, 0, 0, 0, 0, &a) == 0 ? &a : NULL);
}

/* wcc_data: no pre-operation attributes, post-operation ones of `ino`. */
static void wcc(xdr_out *o, uint64_t ino) {
    o_u32(o, 0);
    post_attr_of(o, ino);
}

/* A handle and a name (diropargs3). */
typedef struct {
    uint64_t dir;
    warden_fs_attr dir_attr;
    const uint8_t *name;
    uint32_t len;
} dirop;

static int get_dirop(xdr_in *x, dirop *d, uint32_t *status) {
    int r = get_fh(x, &d->dir, &d->dir_attr);
    if (r < 0) return -1;
    d->name = x_opaque(x, 1024, &d->len);
    if (!d->name) return -1;
    *status = r ? (uint32_t)r : d->len > NAME_MAX ? 63 : 0;
    return 0;
}

/* sattr3: the mode and mtime asked to be set (-1: not asked), and the
 * size if `has_size` (any 64-bit size may be asked for). */
typedef struct {
    uint64_t mode, size, mtime;
    uint32_t mtime_ns;
    int has_size;
} sattr;

static int get_sattr(xdr_in *x, sattr *s) {
    s->mode = s->size = s->mtime = UINT64_MAX;
    s->mtime_ns = 0;
    s->has_size = 0;
    if (x_u32(x)) s->mode = x_u32(x);
    if (x_u32(x)) x_u32(x); /* uid */
    if (x_u32(x)) x_u32(x); /* gid */
    if (x_u32(x)) s->size = x_u64(x), s->has_size = 1;
    uint32_t how = x_u32(x); /* atime: 0 keep, 1 now, 2 the time given */
    if (how == 2) x_u64(x);
    how = x_u32(x);
    if (how == 1) s->mtime = 0; /* now: SETATTR's mtime 0 is "now" below */
    if (how == 2) s->mtime = x_u32(x), s->mtime_ns = x_u32(x);
    return x->bad ? -1 : 0;
}

/* Applies `s` to `ino`: 0 or a file-service status. */
static int apply(uint64_t ino, const sattr *s) {
    int r = 0;
    if (s->has_size) r = fsc_attr(WARDEN_FS_TRUNCATE, ino, s->size, 0, 0, 0, 0, 0, 0);
    if (!r && (s->mode != UINT64_MAX || s->mtime != UINT64_MAX)) {
        uint64_t mtime = s->mtime;
        if (mtime == 0) {
            extern int clock_gettime(int, void *);
            struct { int64_t s; long ns; } ts = {0, 0};
            clock_gettime(0, &ts);
            mtime = (uint64_t)ts.s;
        }
        uint32_t ns = mtime == s->mtime ? s->mtime_ns : 0;
        r = fsc_attr(WARDEN_FS_SETATTR, ino, s->mode, mtime, 0, 0, &ns, sizeof ns, 0);
    }
    return r;
}

static int getattr(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    if (r < 0) return 4;
    o_u32(o, (uint32_t)r);
    if (!r) put_fattr(o, &a);
    return 0;
}

static int setattr(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    sattr s;
    int r = get_fh(x, &ino, &a);
    if (r < 0 || get_sattr(x, &s) < 0) return 4;
    if (x_u32(x)) x_u64(x); /* guard: ctime (not checked) */
    if (x->bad) return 4;
    uint32_t status = r ? (uint32_t)r : nfs_status(apply(ino, &s));
    o_u32(o, status);
    o_u32(o, 0);
    if (r) post_attr(o, NULL);
    else post_attr_of(o, ino);
    return 0;
}

static int lookup(xdr_in *x, xdr_out *o) {
    dirop d;
    uint32_t status;
    if (get_dirop(x, &d, &status) < 0) return 4;
    warden_fs_attr a;
    if (!status) status = nfs_status(fsc_attr(WARDEN_FS_LOOKUP, d.dir, 0, 0, d.name, d.len, 0, 0, &a));
    o_u32(o, status);
    if (!status) {
        put_fh(o, &a);
        post_attr(o, &a);
    }
    post_attr(o, status == NFS3ERR_STALE || status == NFS3ERR_BADHANDLE ? NULL : &d.dir_attr);
    return 0;
}

static int access_(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    uint32_t want = x_u32(x);
    if (r < 0 || x->bad) return 4;
    o_u32(o, (uint32_t)r);
    post_attr(o, r ? NULL : &a);
    if (!r) o_u32(o, want & 0x3f); /* every access asked for */
    return 0;
}

static int readlink(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    if (r < 0) return 4;
    const uint8_t *p = 0;
    uint32_t len = 0;
    uint32_t status = r ? (uint32_t)r : nfs_status(fsc_call(WARDEN_FS_READLINK, ino, 0, 0, 0, 0, 0, 0, &p, &len));
    o_u32(o, status);
    post_attr(o, r ? NULL : &a);
    if (!status) o_opaque(o, p, len);
    return 0;
}

/* Reads of at least LEND_MIN bytes go straight into the reply. */
#define LEND_MIN (16u * 1024u)

/* A successful READ3 reply to a read of `count` bytes at `off`, its bytes
 * read straight into their place in `o` (see fsc_read_into); 0 with `o`
 * untouched if they do not fit in it, 1 once `o` holds the reply (an
 * error's too). */
static int read_in_place(xdr_out *o, uint64_t ino, uint64_t off, uint32_t count,
                         const warden_fs_attr *a) {
    size_t head = o->len;
    int full = o->full;
    o_u32(o, 0);
    post_attr(o, a);
    size_t fields = o->len;
    o_u32(o, 0); /* count, eof and the opaque's length, filled in below */
    o_u32(o, 0);
    o_u32(o, 0);
    size_t at = o->len, padded = ((size_t)count + 3) & ~(size_t)3;
    if (o->full || o->cap - at < padded) {
        o->len = head;
        o->full = full;
        return 0;
    }
    uint32_t len = 0;
    int s = fsc_read_into(ino, off, count, o->p + at, &len);
    if (s) {
        o->len = head;
        o_u32(o, nfs_status(s));
        post_attr(o, a);
        return 1;
    }
    o->len = fields;
    o_u32(o, len);
    o_u32(o, off + len >= a->size);
    o_u32(o, len);
    padded = ((size_t)len + 3) & ~(size_t)3;
    memset(o->p + at + len, 0, padded - len);
    o->len = at + padded;
    return 1;
}

static int read_(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    uint64_t off = x_u64(x);
    uint32_t count = x_u32(x);
    if (r < 0 || x->bad) return 4;
    if (count > RTMAX) count = RTMAX;
    if (r == 0 && count >= LEND_MIN && read_in_place(o, ino, off, count, &a)) return 0;
    const uint8_t *p = 0;
    uint32_t len = 0;
    uint32_t status = r ? (uint32_t)r : nfs_status(fsc_call(WARDEN_FS_READ, ino, off, count, 0, 0, 0, 0, &p, &len));
    o_u32(o, status);
    post_attr(o, r ? NULL : &a);
    if (!status) {
        o_u32(o, len);
        o_u32(o, off + len >= a.size);
        o_opaque(o, p, len);
    }
    return 0;
}

static int write_(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    uint64_t off = x_u64(x);
    uint32_t count = x_u32(x), stable = x_u32(x), len;
    const uint8_t *data = x_opaque(x, WTMAX, &len);
    if (r < 0 || !data || len != count) return 4;
    int s = r ? 0 : fsc_attr(WARDEN_FS_WRITE, ino, off, 0, 0, 0, data, len, 0);
    if (!r && !s && stable != 0) s = fsc_call(WARDEN_FS_FSYNC, ino, 0, 0, 0, 0, 0, 0, 0, 0);
    uint32_t status = r ? (uint32_t)r : nfs_status(s);
    o_u32(o, status);
    o_u32(o, 0);
    if (r) post_attr(o, NULL);
    else post_attr_of(o, ino);
    if (!status) {
        o_u32(o, len);
        o_u32(o, stable ? 2 : 0); /* FILE_SYNC, or UNSTABLE */
        o_bytes(o, write_verf, 8);
    }
    return 0;
}

/* The reply of CREATE, MKDIR and SYMLINK: the new file's handle and
 * attributes, and the directory's. */
static void made(xdr_out *o, uint32_t status, const warden_fs_attr *a, const dirop *d) {
    o_u32(o, status);
    if (!status) {
        o_u32(o, 1);
        put_fh(o, a);
        post_attr(o, a);
    }
    wcc(o, d->dir);
}

static int create(xdr_in *x, xdr_out *o) {
    dirop d;
    uint32_t status;
    sattr s = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
    if (get_dirop(x, &d, &status) < 0) return 4;
    uint32_t how = x_u32(x);
    if (how == 2) x_fixed(x, 8); /* EXCLUSIVE: a verifier, kept nowhere */
    else if (get_sattr(x, &s) < 0) return 4;
    if (x->bad || how > 2) return 4;
    warden_fs_attr a;
    uint64_t mode = s.mode == UINT64_MAX ? 0644 : s.mode;
    if (!status) {
        int r = fsc_attr(WARDEN_FS_CREATE, d.dir, mode, 0, d.name, d.len, 0, 0, &a);
        if (r == -17 && how == 0) r = fsc_attr(WARDEN_FS_LOOKUP, d.dir, 0, 0, d.name, d.len, 0, 0, &a);
        if (!r && s.has_size) r = apply(a.ino, &s);
        if (!r && s.has_size) r = fsc_attr(WARDEN_FS_GETATTR, a.ino, 0, 0, 0, 0, 0, 0, &a);
        status = nfs_status(r);
    }
    made(o, status, &a, &d);
    return 0;
}

static int mkdir_(xdr_in *x, xdr_out *o) {
    dirop d;
    uint32_t status;
    sattr s;
    if (get_dirop(x, &d, &status) < 0 || get_sattr(x, &s) < 0) return 4;
    warden_fs_attr a;
    uint64_t mode = s.mode == UINT64_MAX ? 0755 : s.mode;
    if (!status) status = nfs_status(fsc_attr(WARDEN_FS_MKDIR, d.dir, mode, 0, d.name, d.len, 0, 0, &a));
    made(o, status, &a, &d);
    return 0;
}

static int symlink_(xdr_in *x, xdr_out *o) {
    dirop d;
    uint32_t status, len;
    sattr s;
    if (get_dirop(x, &d, &status) < 0 || get_sattr(x, &s) < 0) return 4;
    const uint8_t *target = x_opaque(x, 4096, &len);
    if (!target) return 4;
    warden_fs_attr a;
    if (!status) status = nfs_status(fsc_attr(WARDEN_FS_SYMLINK, d.dir, 0, 0, d.name, d.len, target, len, &a));
    made(o, status, &a, &d);
    return 0;
}

static int remove_(xdr_in *x, xdr_out *o, uint32_t op) {
    dirop d;
    uint32_t status;
    if (get_dirop(x, &d, &status) < 0) return 4;
    if (!status) status = nfs_status(fsc_call(op, d.dir, 0, 0, d.name, d.len, 0, 0, 0, 0));
    o_u32(o, status);
    wcc(o, d.dir);
    return 0;
}

static int rename_(xdr_in *x, xdr_out *o) {
    dirop from, to;
    uint32_t s1, s2;
    if (get_dirop(x, &from, &s1) < 0 || get_dirop(x, &to, &s2) < 0) return 4;
    uint32_t status = s1 ? s1 : s2;
    if (!status)
        status = nfs_status(fsc_call(WARDEN_FS_RENAME, from.dir, 0, to.dir, from.name, from.len, to.name, to.len, 0, 0));
    o_u32(o, status);
    wcc(o, from.dir);
    wcc(o, to.dir);
    return 0;
}

static int link_(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    dirop d;
    uint32_t status;
    if (r < 0 || get_dirop(x, &d, &status) < 0) return 4;
    if (r) status = (uint32_t)r;
    if (!status) status = nfs_status(fsc_attr(WARDEN_FS_LINK, ino, 0, d.dir, d.name, d.len, 0, 0, &a));
    o_u32(o, status);
    post_attr_of(o, ino);
    wcc(o, d.dir);
    return 0;
}

/* READDIR and READDIRPLUS: the directory's entries from `cookie` on, as
 * many as fit in `max` bytes of reply. */
static int readdir_(xdr_in *x, xdr_out *o, int plus) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    uint64_t cookie = x_u64(x);
    x_fixed(x, 8);
    uint32_t max = x_u32(x);
    if (plus) max = x_u32(x); /* maxcount bounds the reply; dircount is a hint */
    if (r < 0 || x->bad) return 4;
    if (max > RTMAX) max = RTMAX;
    if (max < 512) max = 512;
    static uint8_t list[64 * 1024];
    const uint8_t *p;
    uint32_t len = 0;
    uint32_t status = r ? (uint32_t)r
                        : nfs_status(fsc_call(WARDEN_FS_READDIR, ino, cookie, (max / 2) < sizeof list ? max / 2 : sizeof list,
                                              0, 0, 0, 0, &p, &len));
    if (!status) memcpy(list, p, len);
    o_u32(o, status);
    post_attr(o, r ? NULL : &a);
    if (status) return 0;
    o_u64(o, 0); /* cookieverf */
    size_t limit = o->len + max - 64, at = 0;
    int eof = 1;
    while (at + sizeof(warden_fs_dirent) <= len) {
        warden_fs_dirent e;
        memcpy(&e, list + at, sizeof e);
        const uint8_t *name = list + at + sizeof e;
        size_t need = 24 + ((e.name_len + 3u) & ~3u) + (plus ? 8 + 84 + 4 + 4 + FH_LEN + 4 : 0);
        if (o->len + need > limit) {
            eof = 0;
            break;
        }
        o_u32(o, 1);
        o_u64(o, e.ino);
        o_opaque(o, name, e.name_len);
        o_u64(o, e.next);
        if (plus) {
            warden_fs_attr ea;
            int ok = fsc_attr(WARDEN_FS_LOOKUP, ino, 0, 0, name, e.name_len, 0, 0, &ea) == 0;
            if (e.name_len == 1 && name[0] == '.') ok = 1, ea = a;
            post_attr(o, ok ? &ea : NULL);
            o_u32(o, ok);
            if (ok) put_fh(o, &ea);
        }
        at += sizeof e + e.name_len;
    }
    /* A full listing from the file system may have stopped short. */
    if (eof && len) {
        uint32_t more;
        warden_fs_dirent last;
        size_t k = 0;
        while (k + sizeof last <= len) {
            memcpy(&last, list + k, sizeof last);
            k += sizeof last + last.name_len;
        }
        if (fsc_call(WARDEN_FS_READDIR, ino, last.next, 512, 0, 0, 0, 0, 0, &more) == 0 && more) eof = 0;
    }
    o_u32(o, 0);
    o_u32(o, eof);
    return 0;
}

static int fsstat(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    if (r < 0) return 4;
    warden_fs_statfs s;
    const uint8_t *p;
    uint32_t len;
    uint32_t status = r ? (uint32_t)r : nfs_status(fsc_call(WARDEN_FS_STATFS, 0, 0, 0, 0, 0, 0, 0, &p, &len));
    if (!status) memcpy(&s, p, sizeof s);
    o_u32(o, status);
    post_attr(o, r ? NULL : &a);
    if (status) return 0;
    o_u64(o, s.blocks * s.block_size);
    o_u64(o, s.free_blocks * s.block_size);
    o_u64(o, s.free_blocks * s.block_size);
    o_u64(o, s.inodes);
    o_u64(o, s.free_inodes);
    o_u64(o, s.free_inodes);
    o_u32(o, 0);
    return 0;
}

static int fsinfo(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    if (r < 0) return 4;
    o_u32(o, (uint32_t)r);
    post_attr(o, r ? NULL : &a);
    if (r) return 0;
    const uint32_t sizes[] = {RTMAX, RTMAX, 4096, WTMAX, WTMAX, 4096, 8192};
    for (int i = 0; i < 7; i++) o_u32(o, sizes[i]);
    o_u64(o, 1ull << 40); /* maxfilesize */
    o_u32(o, 1);          /* time_delta: a second */
    o_u32(o, 0);
    o_u32(o, 0x1 | 0x2 | 0x8 | 0x10); /* LINK, SYMLINK, HOMOGENEOUS, CANSETTIME */
    return 0;
}

static int pathconf(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    if (r < 0) return 4;
    o_u32(o, (uint32_t)r);
    post_attr(o, r ? NULL : &a);
    if (r) return 0;
    const uint32_t v[] = {65000, NAME_MAX, 1, 1, 0, 1};
    for (int i = 0; i < 6; i++) o_u32(o, v[i]);
    return 0;
}

static int commit(xdr_in *x, xdr_out *o) {
    uint64_t ino;
    warden_fs_attr a;
    int r = get_fh(x, &ino, &a);
    x_u64(x);
    x_u32(x);
    if (r < 0 || x->bad) return 4;
    uint32_t status = r ? (uint32_t)r : nfs_status(fsc_call(WARDEN_FS_FSYNC, ino, 0, 0, 0, 0, 0, 0, 0, 0));
    o_u32(o, status);
    wcc(o, ino);
    if (!status) o_bytes(o, write_verf, 8);
    return 0;
}

int nfs3_proc(uint32_t proc, xdr_in *x, xdr_out *o) {
    switch (proc) {
    case 0: return 0;
    case 1: return getattr(x, o);
    case 2: return setattr(x, o);
    case 3: return lookup(x, o);
    case 4: return access_(x, o);
    case 5: return readlink(x, o);
    case 6: return read_(x, o);
    case 7: return write_(x, o);
    case 8: return create(x, o);
    case 9: return mkdir_(x, o);
    case 10: return symlink_(x, o);
    case 11: /* MKNOD: devices, sockets and pipes have no place here */
        o_u32(o, NFS3ERR_NOTSUPP);
        o_u32(o, 0);
        o_u32(o, 0);
        return 0;
    case 12: return remove_(x, o, WARDEN_FS_UNLINK);
    case 13: return remove_(x, o, WARDEN_FS_RMDIR);
    case 14: return rename_(x, o);
    case 15: return link_(x, o);
    case 16: return readdir_(x, o, 0);
    case 17: return readdir_(x, o, 1);
    case 18: return fsstat(x, o);
    case 19: return fsinfo(x, o);
    case 20: return pathconf(x, o);
    case 21: return commit(x, o);
    default: return 3;
    }
}
