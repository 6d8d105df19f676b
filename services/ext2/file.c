/* Reading, writing and truncating a file's bytes through its block map
 * and the buffer cache (holes read as zeros). A read goes into a buffer
 * of the task's, or straight into the client's through a permit it lent
 * (one copy from the cache, see warden_fs.h). */
#include <string.h>
#include "ext2.h"

/* Hands `n` bytes at `src` to the reader, at `at` of its buffer: `dst`,
 * or, when `to` is a permit (not negative), the client's memory through
 * it. A null `src` is `n` zeros (a hole). 0, or -EIO if the permit
 * refused the write (revoked, too short, or not a writable permit). */
static int put(void *dst, warden_handle to, size_t at, const uint8_t *src, size_t n) {
    static const uint8_t zeros[4096];
    if (to < 0) {
        if (src) memcpy((uint8_t *)dst + at, src, n);
        else memset((uint8_t *)dst + at, 0, n);
        return 0;
    }
    while (n > 0) {
        size_t k = src ? n : (n < sizeof zeros ? n : sizeof zeros);
        if (warden_permit_write(to, at, src ? src : zeros, k) != (int64_t)k) return -5;
        at += k, n -= k;
        if (src) src += k;
    }
    return 0;
}

/* Bytes lying one after another in the cache, not yet handed to the
 * reader: where they start, how many, where in the reader's buffer they
 * go, and the cache buffers held for them meanwhile (at most RUN_HELD,
 * so that a small cache still has buffers for the block map). */
#define RUN_HELD 8
typedef struct {
    const uint8_t *src;
    size_t n, at;
    buf *held[RUN_HELD];
    int nheld;
} run;

/* Hands the run over and releases its buffers; 0 or -EIO. */
static int flush(run *r, void *dst, warden_handle to) {
    int e = r->n ? put(dst, to, r->at, r->src, r->n) : 0;
    for (int i = 0; i < r->nheld; i++) brelse(r->held[i]);
    r->n = 0;
    r->nheld = 0;
    return e;
}

/* Adds `n` bytes at `p` (of the held buffer `b`), bound for `at`, to the
 * run, handing the run over first unless they continue it; 0 or -EIO. */
static int extend(run *r, buf *b, const uint8_t *p, size_t n, size_t at, void *dst,
                  warden_handle to) {
    int e = 0;
    if (!(r->n && r->src + r->n == p && r->nheld < RUN_HELD)) {
        e = flush(r, dst, to);
        r->src = p;
        r->at = at;
    }
    r->n += n;
    r->held[r->nheld++] = b;
    return e;
}

long file_read(uint32_t ino, uint64_t off, void *dst, warden_handle to, size_t len) {
    ext2_inode in;
    int r = inode_read(ino, &in);
    if (r) return r;
    uint64_t size = inode_size(&in);
    if (off >= size) return 0;
    if (len > size - off) len = (size_t)(size - off);
    size_t done = 0;
    run pending = {0};
    while (done < len && r == 0) {
        uint64_t at = off + done;
        uint32_t in_block = (uint32_t)(at % fs.block_size), block;
        size_t n = fs.block_size - in_block;
        if (n > len - done) n = len - done;
        if ((r = bmap(&in, ino, at / fs.block_size, 0, &block)) != 0) break;
        if (!block) {
            if ((r = flush(&pending, dst, to)) == 0) r = put(dst, to, done, 0, n);
        } else {
            buf *b = bread(block);
            if (!b) r = cache_error;
            else r = extend(&pending, b, bdata(b) + in_block, n, done, dst, to);
        }
        done += n;
    }
    int e = flush(&pending, dst, to);
    if (r || e) return r ? r : e;
    return (long)done;
}

long file_write(uint32_t ino, uint64_t off, const void *src, size_t len) {
    ext2_inode in;
    int r = inode_read(ino, &in);
    if (r) return r;
    size_t done = 0;
    while (done < len) {
        uint64_t at = off + done;
        uint32_t in_block = (uint32_t)(at % fs.block_size), block;
        size_t n = fs.block_size - in_block;
        if (n > len - done) n = len - done;
        if ((r = bmap(&in, ino, at / fs.block_size, 1, &block)) != 0) break;
        /* A block written whole need not be read first. */
        buf *b = n == fs.block_size ? bzero_get(block) : bread(block);
        if (!b) {
            r = cache_error;
            break;
        }
        memcpy(bdata(b) + in_block, (const uint8_t *)src + done, n);
        bdirty(b);
        brelse(b);
        done += n;
    }
    if (off + done > inode_size(&in)) inode_set_size(&in, off + done);
    in.mtime = in.ctime = now_seconds();
    int w = inode_write(ino, &in);
    if (done == 0) return r ? r : w;
    return w ? w : (long)done;
}

int file_truncate(uint32_t ino, uint64_t size) {
    ext2_inode in;
    int r = inode_read(ino, &in);
    if (r) return r;
    uint64_t old = inode_size(&in);
    if (size < old) {
        /* The kept part of the last block is what a later extension
         * would expose: zero it. */
        uint32_t tail = (uint32_t)(size % fs.block_size), block;
        if (tail && (r = bmap(&in, ino, size / fs.block_size, 0, &block)) == 0 && block) {
            buf *b = bread(block);
            if (!b) return cache_error;
            memset(bdata(b) + tail, 0, fs.block_size - tail);
            bdirty(b);
            brelse(b);
        }
        if ((r = truncate_blocks(&in, size)) != 0) return r;
    }
    inode_set_size(&in, size);
    in.mtime = in.ctime = now_seconds();
    return inode_write(ino, &in);
}
