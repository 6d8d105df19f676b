/* The file-service client: one portal call per request to the file-system
 * task (sdk/c/warden_fs.h), and NFS file handles made of its inode
 * numbers and generations. */
#include <string.h>
#include "nfs.h"

static warden_handle fs = -1;
static const char *fs_name;
static uint8_t req[sizeof(warden_fs_req) + 255 + WARDEN_FS_MAX_IO];
static uint8_t rep[sizeof(warden_fs_reply) + WARDEN_FS_MAX_IO];

/* How long a request waits for the file-system task to be back after it
 * died (its supervisor restarting it) before it fails with EIO. */
#define RECONNECT_NS (10LL * 1000 * 1000 * 1000)

int fsc_init(const char *service) {
    fs_name = service;
    fs = warden_name_lookup(service, 30LL * 1000 * 1000 * 1000);
    return fs < 0 ? fs : 0;
}

/* One call of `len` request bytes. If the file-system task died, the
 * service is looked up again (waiting for its restart) and the request
 * made once more: handles are inode numbers and generations, which a
 * restarted task over the same image answers alike. */
static int64_t call_fs(size_t len, const warden_handle *h, size_t nh) {
    int64_t n = warden_call(fs, req, len, h, nh, rep, sizeof rep, NULL, NULL);
    if (n != WARDEN_EPEERDIED) return n;
    warden_handle again = warden_name_lookup(fs_name, RECONNECT_NS);
    if (again < 0) return n;
    warden_close(fs);
    fs = again;
    return warden_call(fs, req, len, h, nh, rep, sizeof rep, NULL, NULL);
}

/* One request, lending the handle `lent` unless it is negative: the
 * status, the payload in `*out` (`*len` bytes). */
static int request(uint32_t op, uint64_t ino, uint64_t a, uint64_t b, const void *name,
                   uint32_t name_len, const void *data, uint32_t data_len, warden_handle lent,
                   const uint8_t **out, uint32_t *len) {
    if (name_len > 255 || data_len > WARDEN_FS_MAX_IO) return -22;
    warden_fs_req q = {op, name_len, ino, a, b, data_len, 0};
    memcpy(req, &q, sizeof q);
    if (name_len) memcpy(req + sizeof q, name, name_len);
    if (data_len) memcpy(req + sizeof q + name_len, data, data_len);
    int64_t n = call_fs(sizeof q + name_len + data_len, &lent, lent < 0 ? 0 : 1);
    if (n < (int64_t)sizeof(warden_fs_reply)) return -5; /* the file system is gone: EIO */
    warden_fs_reply r;
    memcpy(&r, rep, sizeof r);
    if (r.len > n - sizeof r) return -5;
    if (out) *out = rep + sizeof r;
    if (len) *len = r.len;
    return r.status;
}

int fsc_call(uint32_t op, uint64_t ino, uint64_t a, uint64_t b, const void *name, uint32_t name_len,
             const void *data, uint32_t data_len, const uint8_t **out, uint32_t *len) {
    return request(op, ino, a, b, name, name_len, data, data_len, -1, out, len);
}

/* The READ lends the file system `dst` (a writable permit, revoked as
 * soon as the reply is in), so that a file system that takes it writes
 * the bytes there from its cache: one copy instead of three (see
 * warden_fs.h). One that does not, or a permit this task cannot grant,
 * gets the bytes as a payload, copied here. */
int fsc_read_into(uint64_t ino, uint64_t off, uint32_t count, uint8_t *dst, uint32_t *len) {
    warden_handle lent = warden_permit_grant(dst, count, 1);
    const uint8_t *p = 0;
    uint32_t n = 0;
    int s = request(WARDEN_FS_READ, ino, off, count, 0, 0, 0, 0, lent, &p, &n);
    if (lent >= 0) {
        warden_permit_revoke(lent);
        warden_close(lent);
    }
    if (s < 0) return s;
    if (s > 0 && (n || lent < 0 || (uint32_t)s > count)) return -5; /* a count it was not lent for */
    if (s == 0 && n > count) return -5;
    if (s == 0) memcpy(dst, p, n);
    *len = s > 0 ? (uint32_t)s : n;
    return 0;
}

int fsc_attr(uint32_t op, uint64_t ino, uint64_t a, uint64_t b, const void *name, uint32_t name_len,
             const void *data, uint32_t data_len, warden_fs_attr *attr) {
    const uint8_t *p;
    uint32_t len;
    int r = fsc_call(op, ino, a, b, name, name_len, data, data_len, &p, &len);
    if (r == 0 && attr) {
        if (len < sizeof *attr) return -5;
        memcpy(attr, p, sizeof *attr);
    }
    return r;
}

void put_fh(xdr_out *o, const warden_fs_attr *a) {
    uint8_t fh[FH_LEN];
    uint32_t ino = (uint32_t)a->ino, gen = a->generation;
    memcpy(fh, &ino, 4);
    memcpy(fh + 4, &gen, 4);
    o_opaque(o, fh, sizeof fh);
}

int get_fh(xdr_in *x, uint64_t *ino, warden_fs_attr *attr) {
    uint32_t len;
    const uint8_t *fh = x_opaque(x, 64, &len);
    if (!fh) return -1;
    if (len != FH_LEN) return NFS3ERR_BADHANDLE;
    uint32_t i, gen;
    memcpy(&i, fh, 4);
    memcpy(&gen, fh + 4, 4);
    if (fsc_attr(WARDEN_FS_GETATTR, i, 0, 0, 0, 0, 0, 0, attr) != 0 || attr->generation != gen)
        return NFS3ERR_STALE;
    *ino = i;
    return 0;
}

uint32_t nfs_status(int s) {
    switch (-s) {
    case 0: return NFS3_OK;
    case 1: return 1;   /* PERM */
    case 2: return 2;   /* NOENT */
    case 13: return 13; /* ACCES */
    case 17: return 17; /* EXIST */
    case 18: return 18; /* XDEV */
    case 20: return 20; /* NOTDIR */
    case 21: return 21; /* ISDIR */
    case 22: return 22; /* INVAL */
    case 27: return 27; /* FBIG */
    case 28: return 28; /* NOSPC */
    case 36: return 63; /* NAMETOOLONG */
    case 39: return 66; /* NOTEMPTY */
    case 116: return NFS3ERR_STALE;
    case 38: return NFS3ERR_NOTSUPP;
    default: return NFS3ERR_IO;
    }
}
