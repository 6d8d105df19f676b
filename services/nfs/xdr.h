/* XDR (RFC 4506) reading and writing over byte buffers: big-endian
 * 32- and 64-bit numbers, and opaques and strings padded to 4 bytes. A
 * reader that runs past its end, or meets a length over its limit, is
 * marked bad and reads zeros from then on; a writer that runs past its
 * capacity is marked full and writes nothing more. */
#ifndef XDR_H
#define XDR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t len, at;
    int bad;
} xdr_in;

typedef struct {
    uint8_t *p;
    size_t cap, len;
    int full;
} xdr_out;

static inline uint32_t x_u32(xdr_in *x) {
    if (x->bad || x->len - x->at < 4) {
        x->bad = 1;
        return 0;
    }
    const uint8_t *b = x->p + x->at;
    x->at += 4;
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static inline uint64_t x_u64(xdr_in *x) {
    uint64_t high = x_u32(x);
    return high << 32 | x_u32(x);
}

/* An opaque or string of at most `max` bytes: its bytes (in the buffer)
 * and length; NULL and bad if longer or past the end. */
static inline const uint8_t *x_opaque(xdr_in *x, uint32_t max, uint32_t *len) {
    uint32_t n = x_u32(x);
    size_t padded = ((size_t)n + 3) & ~(size_t)3;
    if (x->bad || n > max || x->len - x->at < padded) {
        x->bad = 1;
        *len = 0;
        return NULL;
    }
    const uint8_t *p = x->p + x->at;
    x->at += padded;
    *len = n;
    return p;
}

/* A fixed-length opaque of `n` bytes. */
static inline const uint8_t *x_fixed(xdr_in *x, size_t n) {
    size_t padded = (n + 3) & ~(size_t)3;
    if (x->bad || x->len - x->at < padded) {
        x->bad = 1;
        return NULL;
    }
    const uint8_t *p = x->p + x->at;
    x->at += padded;
    return p;
}

static inline void o_bytes(xdr_out *o, const void *p, size_t n) {
    size_t padded = (n + 3) & ~(size_t)3;
    if (o->full || o->cap - o->len < padded) {
        o->full = 1;
        return;
    }
    memcpy(o->p + o->len, p, n);
    memset(o->p + o->len + n, 0, padded - n);
    o->len += padded;
}

static inline void o_u32(xdr_out *o, uint32_t v) {
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    o_bytes(o, b, 4);
}

static inline void o_u64(xdr_out *o, uint64_t v) {
    o_u32(o, (uint32_t)(v >> 32));
    o_u32(o, (uint32_t)v);
}

static inline void o_opaque(xdr_out *o, const void *p, uint32_t n) {
    o_u32(o, n);
    o_bytes(o, p, n);
}

#endif /* XDR_H */
