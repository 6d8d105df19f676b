/* The buffer cache: file-system blocks of the device, kept in the task's
 * own memory (so its memory budget bounds the cache), written back when
 * dirty. At most `max_bytes` of blocks are cached; a block is allocated
 * with malloc when the cache grows, and when malloc fails (the budget is
 * full) the least recently used clean block, or else the least recently
 * used dirty one once written, is reused instead. Blocks held by a caller
 * (between bread and brelse) are never reused. */
#include <stdlib.h>
#include <string.h>
#include "ext2.h"

struct buf {
    uint32_t block;
    uint32_t refs;
    int dirty;
    uint8_t *data;
    buf *hash_next;
    buf *lru_prev, *lru_next; /* most recently used at the head */
};

#define HASH 4096

static warden_handle device;
static uint32_t bsize;
static size_t max_blocks, nblocks;
static buf *table[HASH];
static buf lru = {0, 0, 0, 0, 0, &lru, &lru};
int cache_error;

int cache_init(warden_handle dev, uint32_t block_size, size_t max_bytes) {
    device = dev;
    bsize = block_size;
    max_blocks = max_bytes / block_size;
    if (max_blocks < 16) max_blocks = 16;
    return 0;
}

static void lru_unlink(buf *b) {
    b->lru_prev->lru_next = b->lru_next;
    b->lru_next->lru_prev = b->lru_prev;
}

static void lru_push(buf *b) {
    b->lru_next = lru.lru_next;
    b->lru_prev = &lru;
    lru.lru_next->lru_prev = b;
    lru.lru_next = b;
}

static int dev_io(int write, uint64_t offset, void *p, size_t len) {
    int64_t r = write ? warden_device_write(device, offset / 512, (uint32_t)(len / 512), p, len)
                      : warden_device_read(device, offset / 512, (uint32_t)(len / 512), p, len);
    if (r != (int64_t)len) {
        cache_error = -5; /* EIO */
        return -5;
    }
    return 0;
}

static int write_back(buf *b) {
    if (!b->dirty) return 0;
    int r = dev_io(1, (uint64_t)b->block * bsize, b->data, bsize);
    if (r == 0) b->dirty = 0;
    return r;
}

static void unhash(buf *b) {
    buf **p = &table[b->block % HASH];
    while (*p && *p != b) p = &(*p)->hash_next;
    if (*p) *p = b->hash_next;
}

/* Block buffers are carved from slabs of up to SLAB blocks, in order, so
 * that blocks read one after another usually lie one after another in
 * memory and a read spanning them is copied out in one piece (see
 * file.c). A buffer given up (its block failed to read) waits in
 * `spare` for the next block. */
#define SLAB 64
static uint8_t *slab, *spare[SLAB];
static size_t slab_left, nspare;

/* Memory for one more block, or NULL once the budget refuses it. */
static uint8_t *block_memory(void) {
    if (nspare) return spare[--nspare];
    if (!slab_left) {
        size_t n = max_blocks - nblocks < SLAB ? max_blocks - nblocks : SLAB;
        /* Aligned to a cache line, so that blocks are copied out in
         * whole lines; a single block when a whole slab is refused. */
        for (; n >= 1 && !(slab = aligned_alloc(64, n * bsize)); n = n > 1 ? 1 : 0) {}
        if (!slab) return 0;
        slab_left = n;
    }
    slab_left--;
    slab += bsize;
    return slab - bsize;
}

/* A buffer to hold a new block: a fresh one while the cache may grow and
 * memory allows, else the least recently used one no caller holds. */
static buf *victim(void) {
    if (nblocks < max_blocks) {
        buf *b = calloc(1, sizeof *b);
        uint8_t *data = b ? block_memory() : 0;
        if (data) {
            b->data = data;
            nblocks++;
            return b;
        }
        free(b);
    }
    for (buf *b = lru.lru_prev; b != &lru; b = b->lru_prev) {
        if (b->refs == 0 && write_back(b) == 0) {
            lru_unlink(b);
            unhash(b);
            return b;
        }
    }
    cache_error = -12; /* ENOMEM */
    return 0;
}

static buf *get(uint32_t block, int read) {
    for (buf *b = table[block % HASH]; b; b = b->hash_next) {
        if (b->block == block) {
            lru_unlink(b);
            lru_push(b);
            b->refs++;
            /* A block asked for zeroed is new to its owner (it may have
             * been freed with other contents still cached). */
            if (!read) memset(b->data, 0, bsize);
            return b;
        }
    }
    buf *b = victim();
    if (!b) return 0;
    b->block = block;
    b->dirty = 0;
    if (read && dev_io(0, (uint64_t)block * bsize, b->data, bsize) != 0) {
        if (nspare < SLAB) spare[nspare++] = b->data;
        free(b);
        nblocks--;
        return 0;
    }
    if (!read) memset(b->data, 0, bsize);
    b->refs = 1;
    b->hash_next = table[block % HASH];
    table[block % HASH] = b;
    lru_push(b);
    return b;
}

buf *bread(uint32_t block) { return get(block, 1); }
buf *bzero_get(uint32_t block) { return get(block, 0); }
uint8_t *bdata(buf *b) { return b->data; }
static int unsynced; /* a block was dirtied since the last cache_sync */

void bdirty(buf *b) {
    b->dirty = 1;
    unsynced = 1;
}

int cache_unsynced(void) { return unsynced; }
void brelse(buf *b) {
    if (b && b->refs) b->refs--;
}

int cache_sync(void) {
    int r = 0;
    for (buf *b = lru.lru_next; b != &lru; b = b->lru_next)
        if (write_back(b) != 0) r = -5;
    if (warden_device_sync(device) != 0) r = -5;
    if (r == 0) unsynced = 0;
    return r;
}

/* Byte ranges of the device outside the block cache (the superblock at
 * byte 1024 of a device with 1 KiB blocks is a block of its own; with
 * larger blocks it lies inside block 0). Through the cache either way. */
static int raw(int write, uint64_t offset, void *p, size_t len) {
    while (len) {
        uint32_t block = (uint32_t)(offset / bsize), at = (uint32_t)(offset % bsize);
        size_t n = bsize - at < len ? bsize - at : len;
        buf *b = bread(block);
        if (!b) return cache_error;
        if (write) {
            memcpy(b->data + at, p, n);
            bdirty(b);
        } else {
            memcpy(p, b->data + at, n);
        }
        brelse(b);
        offset += n;
        p = (uint8_t *)p + n;
        len -= n;
    }
    return 0;
}

int cache_read_raw(uint64_t offset, void *dst, size_t len) { return raw(0, offset, dst, len); }
int cache_write_raw(uint64_t offset, const void *src, size_t len) {
    return raw(1, offset, (void *)src, len);
}
