/* The superblock, the group descriptors, inodes, block maps and the
 * allocation of blocks and inodes (ext2's bitmaps and free counts, kept
 * exact in the group descriptors and the superblock). */
#include <stdlib.h>
#include <string.h>
#include "ext2.h"

ext2_fs fs;
static uint8_t superblock[1024];

uint32_t now_seconds(void) {
    extern int clock_gettime(int, void *);
    struct { int64_t s; long ns; } ts = {0, 0};
    clock_gettime(0, &ts);
    return (uint32_t)ts.s;
}

static uint32_t gd_block(void) { return fs.sb.first_data_block + 1; }

int fs_mount(warden_handle dev, size_t cache_bytes) {
    if (warden_device_read(dev, 2, 2, superblock, sizeof superblock) != 1024) return -5;
    memcpy(&fs.sb, superblock, sizeof fs.sb);
    ext2_super *s = &fs.sb;
    if (s->magic != EXT2_MAGIC || s->rev_level < 1 || s->log_block_size > 2) return -22;
    if ((s->feature_incompat & ~EXT2_INCOMPAT_FILETYPE) ||
        (s->feature_ro_compat & ~(EXT2_RO_COMPAT_SPARSE_SUPER | EXT2_RO_COMPAT_LARGE_FILE)))
        return -95; /* EOPNOTSUPP: a journal, extents, checksums … */
    fs.block_size = 1024u << s->log_block_size;
    fs.inode_size = s->inode_size;
    fs.groups = (s->blocks_count - s->first_data_block + s->blocks_per_group - 1) / s->blocks_per_group;
    uint64_t apb = fs.addr_per_block = fs.block_size / 4;
    uint64_t blocks = EXT2_NDIR + apb + apb * apb + apb * apb * apb;
    /* Below what the block map addresses, and what a 32-bit count of
     * 512-byte sectors (the inode's `blocks`) can hold: 2 TiB. */
    fs.max_file = blocks * fs.block_size;
    if (fs.max_file > (1ull << 41) - fs.block_size) fs.max_file = (1ull << 41) - fs.block_size;
    if (fs.groups == 0 || fs.inode_size < 128 || fs.inode_size > fs.block_size) return -22;
    cache_init(dev, fs.block_size, cache_bytes);
    size_t gd_bytes = (size_t)fs.groups * sizeof(ext2_group);
    fs.gd_blocks = (uint32_t)((gd_bytes + fs.block_size - 1) / fs.block_size);
    fs.gd = malloc((size_t)fs.gd_blocks * fs.block_size);
    if (!fs.gd) return -12;
    int r = cache_read_raw((uint64_t)gd_block() * fs.block_size, fs.gd, gd_bytes);
    if (r) return r;
    ext2_inode root;
    uint16_t extra = 0;
    if ((r = inode_read(EXT2_ROOT_INO, &root)) != 0) return r;
    if (fs.inode_size > 128) {
        uint32_t g = (EXT2_ROOT_INO - 1) / s->inodes_per_group, i = (EXT2_ROOT_INO - 1) % s->inodes_per_group;
        uint64_t at = (uint64_t)fs.gd[g].inode_table * fs.block_size + (uint64_t)i * fs.inode_size + 128;
        cache_read_raw(at, &extra, 2);
    }
    fs.new_extra_isize = extra;
    return 0;
}

/* Writes the superblock's and descriptors' changes, then every dirty
 * block, and flushes the device. */
int fs_sync(void) {
    if (fs.dirty_meta) {
        fs.sb.wtime = now_seconds();
        memcpy(superblock, &fs.sb, sizeof fs.sb);
        int r = cache_write_raw(1024, superblock, sizeof superblock);
        if (!r) r = cache_write_raw((uint64_t)gd_block() * fs.block_size, fs.gd,
                                    (size_t)fs.groups * sizeof(ext2_group));
        if (r) return r;
        fs.dirty_meta = 0;
    }
    return cache_sync();
}

static int inode_at(uint32_t ino, uint64_t *at) {
    if (ino == 0 || ino > fs.sb.inodes_count) return -22;
    uint32_t g = (ino - 1) / fs.sb.inodes_per_group, i = (ino - 1) % fs.sb.inodes_per_group;
    *at = (uint64_t)fs.gd[g].inode_table * fs.block_size + (uint64_t)i * fs.inode_size;
    return 0;
}

int inode_read(uint32_t ino, ext2_inode *in) {
    uint64_t at;
    int r = inode_at(ino, &at);
    return r ? r : cache_read_raw(at, in, sizeof *in);
}

/* A large inode's sub-second times (at byte 128 on: the extra size,
 * then ctime's, mtime's and atime's nanoseconds, each shifted left two
 * bits over two epoch bits), if its extra area reaches them. */
typedef struct {
    uint16_t extra_isize, checksum_hi;
    uint32_t ctime_extra, mtime_extra, atime_extra;
} inode_extra;

/* The inode's extra area as far as `inode_extra` goes; 0 if it has
 * none that holds all three times. */
static int extra_read(uint64_t at, inode_extra *x) {
    memset(x, 0, sizeof *x);
    if (fs.inode_size < 128 + sizeof *x) return 0;
    if (cache_read_raw(at + 128, x, sizeof *x) != 0) return 0;
    return x->extra_isize >= sizeof *x;
}

int inode_write(uint32_t ino, const ext2_inode *in) {
    uint64_t at;
    int r = inode_at(ino, &at);
    if (r) return r;
    inode_extra x;
    ext2_inode old;
    /* A time set in whole seconds drops the nanoseconds it had. */
    if (extra_read(at, &x) && cache_read_raw(at, &old, sizeof old) == 0) {
        int changed = 0;
        if (old.ctime != in->ctime && x.ctime_extra) x.ctime_extra = 0, changed = 1;
        if (old.mtime != in->mtime && x.mtime_extra) x.mtime_extra = 0, changed = 1;
        if (old.atime != in->atime && x.atime_extra) x.atime_extra = 0, changed = 1;
        if (changed && (r = cache_write_raw(at + 128, &x, sizeof x)) != 0) return r;
    }
    return cache_write_raw(at, in, sizeof *in);
}

/* The nanoseconds of inode `ino`'s atime, mtime and ctime (0 where it
 * keeps none). */
void inode_times_ns(uint32_t ino, uint32_t ns[3]) {
    uint64_t at;
    inode_extra x;
    ns[0] = ns[1] = ns[2] = 0;
    if (inode_at(ino, &at) == 0 && extra_read(at, &x)) {
        ns[0] = x.atime_extra >> 2;
        ns[1] = x.mtime_extra >> 2;
        ns[2] = x.ctime_extra >> 2;
    }
}

/* Sets inode `ino`'s mtime nanoseconds (`ns` below 10^9), if it keeps
 * them: 0, or -EOPNOTSUPP for an inode without room for them. */
int inode_set_mtime_ns(uint32_t ino, uint32_t ns) {
    uint64_t at;
    inode_extra x;
    int r = inode_at(ino, &at);
    if (r) return r;
    if (!extra_read(at, &x)) return ns ? -95 : 0;
    x.mtime_extra = ns << 2;
    return cache_write_raw(at + 128, &x, sizeof x);
}

uint64_t inode_size(const ext2_inode *in) {
    uint64_t high = (in->mode & 0xF000) == 0x8000 ? in->size_high : 0;
    return ((uint64_t)high << 32) | in->size;
}

void inode_set_size(ext2_inode *in, uint64_t size) {
    in->size = (uint32_t)size;
    if ((in->mode & 0xF000) == 0x8000) {
        in->size_high = (uint32_t)(size >> 32);
        if (size >> 31 && !(fs.sb.feature_ro_compat & EXT2_RO_COMPAT_LARGE_FILE)) {
            fs.sb.feature_ro_compat |= EXT2_RO_COMPAT_LARGE_FILE;
            fs.dirty_meta = 1;
        }
    }
}

void to_attr(uint32_t ino, const ext2_inode *in, warden_fs_attr *a) {
    memset(a, 0, sizeof *a);
    a->ino = ino;
    a->mode = in->mode;
    a->nlink = in->links_count;
    a->uid = in->uid | ((uint32_t)(in->osd2[4] | in->osd2[5] << 8) << 16);
    a->gid = in->gid | ((uint32_t)(in->osd2[6] | in->osd2[7] << 8) << 16);
    a->size = inode_size(in);
    a->blocks = in->blocks;
    a->atime = in->atime;
    a->mtime = in->mtime;
    a->ctime = in->ctime;
    a->generation = in->generation;
    uint32_t ns[3];
    inode_times_ns(ino, ns);
    a->atime_ns = ns[0];
    a->mtime_ns = ns[1];
    a->ctime_ns = ns[2];
}

/* ---- Bitmaps ---- */

/* Finds a clear bit below `n` in the bitmap block `block`, from `start`,
 * sets it: its index, or -1. */
static long take_bit(uint32_t block, uint32_t n, uint32_t start) {
    buf *b = bread(block);
    if (!b) return -1;
    uint8_t *map = bdata(b);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (start + k) % n;
        if (!(map[i / 8] & (1u << (i % 8)))) {
            map[i / 8] |= (uint8_t)(1u << (i % 8));
            bdirty(b);
            brelse(b);
            return (long)i;
        }
    }
    brelse(b);
    return -1;
}

static int clear_bit(uint32_t block, uint32_t i) {
    buf *b = bread(block);
    if (!b) return cache_error;
    uint8_t *map = bdata(b);
    int was = (map[i / 8] >> (i % 8)) & 1;
    map[i / 8] &= (uint8_t)~(1u << (i % 8));
    bdirty(b);
    brelse(b);
    return was ? 0 : -117; /* EUCLEAN: freeing what was free */
}

int block_alloc(uint32_t goal, uint32_t *block) {
    uint32_t per = fs.sb.blocks_per_group, first = fs.sb.first_data_block;
    uint32_t g0 = goal >= first ? (goal - first) / per : 0;
    for (uint32_t k = 0; k < fs.groups; k++) {
        uint32_t g = (g0 + k) % fs.groups;
        if (fs.gd[g].free_blocks_count == 0) continue;
        uint32_t n = g == fs.groups - 1 ? fs.sb.blocks_count - first - g * per : per;
        uint32_t start = k == 0 && goal >= first ? (goal - first) % per : 0;
        long i = take_bit(fs.gd[g].block_bitmap, n, start);
        if (i < 0) continue;
        fs.gd[g].free_blocks_count--;
        fs.sb.free_blocks_count--;
        fs.dirty_meta = 1;
        *block = first + g * per + (uint32_t)i;
        return 0;
    }
    return -28; /* ENOSPC */
}

int block_free(uint32_t block) {
    uint32_t per = fs.sb.blocks_per_group, first = fs.sb.first_data_block;
    if (block < first || block >= fs.sb.blocks_count) return -117;
    uint32_t g = (block - first) / per;
    int r = clear_bit(fs.gd[g].block_bitmap, (block - first) % per);
    if (r) return r;
    fs.gd[g].free_blocks_count++;
    fs.sb.free_blocks_count++;
    fs.dirty_meta = 1;
    return 0;
}

int inode_alloc(uint32_t parent, int dir, uint32_t *ino) {
    uint32_t per = fs.sb.inodes_per_group;
    uint32_t g0 = parent ? (parent - 1) / per : 0;
    for (uint32_t k = 0; k < fs.groups; k++) {
        uint32_t g = (g0 + k) % fs.groups;
        if (fs.gd[g].free_inodes_count == 0) continue;
        uint32_t start = g == 0 ? fs.sb.first_ino - 1 : 0;
        long i = take_bit(fs.gd[g].inode_bitmap, per, start);
        if (i < 0) continue;
        if (g == 0 && (uint32_t)i < fs.sb.first_ino - 1) {
            clear_bit(fs.gd[g].inode_bitmap, (uint32_t)i); /* reserved: wrapped past */
            continue;
        }
        fs.gd[g].free_inodes_count--;
        if (dir) fs.gd[g].used_dirs_count++;
        fs.sb.free_inodes_count--;
        fs.dirty_meta = 1;
        *ino = g * per + (uint32_t)i + 1;
        return 0;
    }
    return -28;
}

/* Frees inode `ino`, whose blocks are already freed: marks it deleted. */
int inode_free(uint32_t ino, int dir) {
    ext2_inode in;
    int r = inode_read(ino, &in);
    if (r) return r;
    in.links_count = 0;
    in.dtime = now_seconds();
    if ((r = inode_write(ino, &in)) != 0) return r;
    uint32_t g = (ino - 1) / fs.sb.inodes_per_group;
    if ((r = clear_bit(fs.gd[g].inode_bitmap, (ino - 1) % fs.sb.inodes_per_group)) != 0) return r;
    fs.gd[g].free_inodes_count++;
    if (dir) fs.gd[g].used_dirs_count--;
    fs.sb.free_inodes_count++;
    fs.dirty_meta = 1;
    return 0;
}
