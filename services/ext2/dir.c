/* Directories: blocks of variable-length entries (inode, record length,
 * name length, file type, name), each block's records covering it whole.
 * A hashed directory (dir_index) is read linearly, as its index blocks
 * look like empty records; changing one drops its index flag, so that
 * e2fsck and Linux read it linearly too. */
#include <string.h>
#include "ext2.h"

typedef struct {
    uint32_t inode;
    uint16_t rec_len;
    uint8_t name_len, file_type;
} dirent_head;

static uint32_t rec_size(uint32_t name_len) { return (8 + name_len + 3) & ~3u; }

/* Calls `visit` with each record of directory `dir` (its block's buffer,
 * the record's offset in the block and in the directory) until it
 * returns non-zero: that value, or 0 after the last record. */
static int each(uint32_t dir, int (*visit)(buf *, uint32_t, uint64_t, void *), void *ctx) {
    ext2_inode in;
    int r = inode_read(dir, &in);
    if (r) return r;
    if ((in.mode & 0xF000) != 0x4000) return -20; /* ENOTDIR */
    uint64_t size = inode_size(&in);
    for (uint64_t n = 0; n * fs.block_size < size; n++) {
        uint32_t block;
        if ((r = bmap(&in, dir, n, 0, &block)) != 0) return r;
        if (!block) continue;
        buf *b = bread(block);
        if (!b) return cache_error;
        for (uint32_t at = 0; at + 8 <= fs.block_size;) {
            dirent_head h;
            memcpy(&h, bdata(b) + at, sizeof h);
            if (h.rec_len < 8 || at + h.rec_len > fs.block_size) break; /* corrupt: stop */
            if ((r = visit(b, at, n * fs.block_size + at, ctx)) != 0) {
                brelse(b);
                return r;
            }
            at += h.rec_len;
        }
        brelse(b);
    }
    return 0;
}

typedef struct {
    const char *name;
    size_t len;
    uint32_t ino;
} find;

static int match(buf *b, uint32_t at, uint64_t pos, void *ctx) {
    (void)pos;
    find *f = ctx;
    dirent_head h;
    memcpy(&h, bdata(b) + at, sizeof h);
    if (h.inode && h.name_len == f->len && !memcmp(bdata(b) + at + 8, f->name, f->len)) {
        f->ino = h.inode;
        return 1;
    }
    return 0;
}

int dir_lookup(uint32_t dir, const char *name, size_t len, uint32_t *ino) {
    find f = {name, len, 0};
    int r = each(dir, match, &f);
    if (r < 0) return r;
    if (!r) return -2; /* ENOENT */
    *ino = f.ino;
    return 0;
}

/* Marks directory `dir` changed: its times, and no hashed index. */
static int touched(uint32_t dir, uint64_t grow) {
    ext2_inode in;
    int r = inode_read(dir, &in);
    if (r) return r;
    in.flags &= ~EXT2_INDEX_FL;
    in.mtime = in.ctime = now_seconds();
    if (grow) inode_set_size(&in, inode_size(&in) + grow);
    return inode_write(dir, &in);
}

typedef struct {
    uint32_t need;
    int done;
    const char *name;
    size_t len;
    uint32_t ino;
    uint8_t type;
} add;

static void put(uint8_t *p, uint32_t ino, uint16_t rec_len, const char *name, size_t len, uint8_t type) {
    dirent_head h = {ino, rec_len, (uint8_t)len, type};
    memcpy(p, &h, sizeof h);
    memcpy(p + 8, name, len);
}

static int room(buf *b, uint32_t at, uint64_t pos, void *ctx) {
    (void)pos;
    add *a = ctx;
    dirent_head h;
    uint8_t *p = bdata(b) + at;
    memcpy(&h, p, sizeof h);
    uint32_t used = h.inode ? rec_size(h.name_len) : 0;
    if (h.rec_len < used + a->need) return 0;
    if (used) {
        uint16_t rest = (uint16_t)(h.rec_len - used);
        h.rec_len = (uint16_t)used;
        memcpy(p, &h, sizeof h);
        put(p + used, a->ino, rest, a->name, a->len, a->type);
    } else {
        put(p, a->ino, h.rec_len, a->name, a->len, a->type);
    }
    bdirty(b);
    return 1;
}

int dir_add(uint32_t dir, const char *name, size_t len, uint32_t ino, uint8_t type) {
    add a = {rec_size((uint32_t)len), 0, name, len, ino, type};
    int r = each(dir, room, &a);
    if (r < 0) return r;
    if (r > 0) return touched(dir, 0);
    /* No room: a new block at the end. */
    ext2_inode in;
    if ((r = inode_read(dir, &in)) != 0) return r;
    uint32_t block;
    uint64_t n = inode_size(&in) / fs.block_size;
    if ((r = bmap(&in, dir, n, 1, &block)) != 0) return r;
    if ((r = inode_write(dir, &in)) != 0) return r;
    buf *b = bread(block);
    if (!b) return cache_error;
    put(bdata(b), ino, (uint16_t)fs.block_size, name, len, type);
    bdirty(b);
    brelse(b);
    return touched(dir, fs.block_size);
}

typedef struct {
    find f;
    uint32_t prev;   /* offset of the previous record in the block, or ~0 */
    uint64_t block_base;
} del;

static int unlink_rec(buf *b, uint32_t at, uint64_t pos, void *ctx) {
    del *d = ctx;
    uint64_t base = pos - at;
    if (base != d->block_base) d->block_base = base, d->prev = ~0u;
    if (!match(b, at, pos, &d->f)) {
        d->prev = at;
        return 0;
    }
    dirent_head h;
    memcpy(&h, bdata(b) + at, sizeof h);
    if (d->prev == ~0u) {
        h.inode = 0;
        memcpy(bdata(b) + at, &h, sizeof h);
    } else {
        dirent_head p;
        memcpy(&p, bdata(b) + d->prev, sizeof p);
        p.rec_len = (uint16_t)(p.rec_len + h.rec_len);
        memcpy(bdata(b) + d->prev, &p, sizeof p);
    }
    bdirty(b);
    return 1;
}

int dir_remove(uint32_t dir, const char *name, size_t len, uint32_t *ino) {
    del d = {{name, len, 0}, ~0u, ~(uint64_t)0};
    int r = each(dir, unlink_rec, &d);
    if (r < 0) return r;
    if (!r) return -2;
    *ino = d.f.ino;
    return touched(dir, 0);
}

static int other(buf *b, uint32_t at, uint64_t pos, void *ctx) {
    (void)pos;
    (void)ctx;
    dirent_head h;
    memcpy(&h, bdata(b) + at, sizeof h);
    const char *name = (const char *)bdata(b) + at + 8;
    if (!h.inode) return 0;
    if (h.name_len == 1 && name[0] == '.') return 0;
    if (h.name_len == 2 && name[0] == '.' && name[1] == '.') return 0;
    return 1;
}

int dir_is_empty(uint32_t dir) {
    int r = each(dir, other, 0);
    return r < 0 ? r : !r;
}

static int reparent(buf *b, uint32_t at, uint64_t pos, void *ctx) {
    (void)pos;
    dirent_head h;
    memcpy(&h, bdata(b) + at, sizeof h);
    const char *name = (const char *)bdata(b) + at + 8;
    if (h.inode && h.name_len == 2 && name[0] == '.' && name[1] == '.') {
        h.inode = *(uint32_t *)ctx;
        memcpy(bdata(b) + at, &h, sizeof h);
        bdirty(b);
        return 1;
    }
    return 0;
}

int dir_set_parent(uint32_t dir, uint32_t parent) {
    int r = each(dir, reparent, &parent);
    return r < 0 ? r : (r ? touched(dir, 0) : -117);
}

typedef struct {
    uint64_t cookie;
    uint8_t *out;
    size_t cap, used;
    int full;
} list;

static int emit(buf *b, uint32_t at, uint64_t pos, void *ctx) {
    list *l = ctx;
    if (pos < l->cookie) return 0;
    dirent_head h;
    memcpy(&h, bdata(b) + at, sizeof h);
    if (!h.inode) return 0;
    size_t need = sizeof(warden_fs_dirent) + h.name_len;
    if (l->used + need > l->cap) return 1;
    warden_fs_dirent e = {h.inode, pos + h.rec_len, 0, h.name_len, 0, 0};
    e.type = h.file_type == EXT2_FT_REG ? 1 : h.file_type == EXT2_FT_DIR ? 2
           : h.file_type == EXT2_FT_SYMLINK ? 7 : 0;
    memcpy(l->out + l->used, &e, sizeof e);
    memcpy(l->out + l->used + sizeof e, bdata(b) + at + 8, h.name_len);
    l->used += need;
    return 0;
}

long dir_list(uint32_t dir, uint64_t cookie, uint8_t *out, size_t cap) {
    list l = {cookie, out, cap, 0, 0};
    int r = each(dir, emit, &l);
    return r < 0 ? r : (long)l.used;
}

int dir_init(uint32_t dir, uint32_t parent) {
    ext2_inode in;
    int r = inode_read(dir, &in);
    if (r) return r;
    uint32_t block;
    if ((r = bmap(&in, dir, 0, 1, &block)) != 0) return r;
    inode_set_size(&in, fs.block_size);
    if ((r = inode_write(dir, &in)) != 0) return r;
    buf *b = bread(block);
    if (!b) return cache_error;
    put(bdata(b), dir, 12, ".", 1, EXT2_FT_DIR);
    put(bdata(b) + 12, parent, (uint16_t)(fs.block_size - 12), "..", 2, EXT2_FT_DIR);
    bdirty(b);
    brelse(b);
    return 0;
}
