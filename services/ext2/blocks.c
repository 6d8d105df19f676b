/* Block maps: a file's blocks through its twelve direct pointers and its
 * single, double and triple indirect blocks, looked up, made on write
 * and freed on truncation. An inode's `blocks` counts every data and
 * indirect block it holds, in 512-byte units. */
#include <string.h>
#include "ext2.h"

static uint32_t sectors_per_block(void) { return fs.block_size / 512; }

/* A new block near `goal`, zeroed in the cache, charged to `in`. */
static int fresh(ext2_inode *in, uint32_t goal, uint32_t *block) {
    int r = block_alloc(goal, block);
    if (r) return r;
    buf *b = bzero_get(*block);
    if (!b) return cache_error;
    bdirty(b);
    brelse(b);
    in->blocks += sectors_per_block();
    return 0;
}

/* Entry `i` of indirect block `block`, made (and the block written) if
 * `create` and missing. */
static int slot(ext2_inode *in, uint32_t block, uint32_t i, int create, uint32_t *out) {
    buf *b = bread(block);
    if (!b) return cache_error;
    uint32_t *p = (uint32_t *)bdata(b);
    int r = 0;
    if (!p[i] && create) {
        r = fresh(in, block, &p[i]);
        if (!r) bdirty(b);
    }
    *out = p[i];
    brelse(b);
    return r;
}

int bmap(ext2_inode *in, uint32_t ino, uint64_t n, int create, uint32_t *block) {
    uint64_t apb = fs.addr_per_block;
    uint32_t goal = fs.gd[(ino - 1) / fs.sb.inodes_per_group].inode_table;
    int r;
    *block = 0;
    if (n < EXT2_NDIR) {
        if (!in->block[n] && create && (r = fresh(in, goal, &in->block[n])) != 0) return r;
        *block = in->block[n];
        return 0;
    }
    n -= EXT2_NDIR;
    int depth;
    uint64_t span;
    if (n < apb) depth = 1, span = 1;
    else if ((n -= apb) < apb * apb) depth = 2, span = apb;
    else if ((n -= apb * apb) < apb * apb * apb) depth = 3, span = apb * apb;
    else return -27; /* EFBIG */
    uint32_t *top = &in->block[EXT2_IND + depth - 1];
    if (!*top && create && (r = fresh(in, goal, top)) != 0) return r;
    uint32_t at = *top;
    for (; at && span; span /= apb) {
        if ((r = slot(in, at, (uint32_t)(n / span), create, &at)) != 0) return r;
        n %= span;
        if (span == 1) break;
    }
    *block = at;
    return 0;
}

/* Frees the blocks of the subtree under indirect block `block` (of
 * `depth` levels, whose first entry is file block `first`) from file
 * block `keep` on, and the indirect block itself if nothing below it is
 * kept: whether it was freed. */
static int free_tree(ext2_inode *in, uint32_t block, int depth, uint64_t first, uint64_t keep,
                     int *freed) {
    uint64_t apb = fs.addr_per_block, span = 1;
    for (int d = 1; d < depth; d++) span *= apb;
    buf *b = bread(block);
    if (!b) return cache_error;
    uint32_t *p = (uint32_t *)bdata(b);
    int r = 0, left = 0;
    for (uint64_t i = 0; i < apb && !r; i++) {
        uint64_t start = first + i * span;
        if (!p[i]) continue;
        if (start + span <= keep) {
            left = 1;
            continue;
        }
        int gone = 1;
        if (depth > 1) r = free_tree(in, p[i], depth - 1, start, keep, &gone);
        else r = block_free(p[i]), in->blocks -= sectors_per_block();
        if (gone && !r) p[i] = 0, bdirty(b);
        else left = 1;
    }
    brelse(b);
    *freed = 0;
    if (!r && !left) {
        r = block_free(block);
        in->blocks -= sectors_per_block();
        *freed = !r;
    }
    return r;
}

int truncate_blocks(ext2_inode *in, uint64_t size) {
    uint64_t keep = (size + fs.block_size - 1) / fs.block_size, apb = fs.addr_per_block;
    int r = 0;
    for (uint64_t i = keep; i < EXT2_NDIR && !r; i++) {
        if (!in->block[i]) continue;
        r = block_free(in->block[i]);
        in->block[i] = 0;
        in->blocks -= sectors_per_block();
    }
    uint64_t first = EXT2_NDIR, span = apb;
    for (int depth = 1; depth <= 3 && !r; depth++, first += span, span *= apb) {
        uint32_t *top = &in->block[EXT2_IND + depth - 1];
        if (!*top || first + span <= keep) continue;
        int gone = 0;
        r = free_tree(in, *top, depth, first, keep, &gone);
        if (gone) *top = 0;
    }
    return r;
}
