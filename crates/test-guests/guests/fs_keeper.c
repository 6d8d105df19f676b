/* A file service that abuses the buffers its clients lend: registered as
 * NAME (argv[1]), it serves one file, "f" in its root, of SIZE bytes
 * (argv[3]) whose byte at offset i is (i * 7 + 3) & 0xFF. How it treats
 * a READ that lends a permit for the client's buffer depends on MODE
 * (argv[2]):
 *
 *   keep      writes the bytes through the permit and answers their
 *             count, but keeps the permit; before each later request it
 *             writes garbage through every permit it kept, and prints
 *             "stale: N accepted, M refused" (accepted must stay 0);
 *   overrun   first writes past the end of the lent buffer, printing
 *             "overrun: accepted" or "overrun: refused", then serves the
 *             READ properly;
 *   overclaim answers a count one more than was asked, writing nothing.
 *
 * A READ without a permit gets its bytes as the payload. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"
#include "warden_fs.h"

#define KEPT 8

static uint8_t req[4096], rep[8 + WARDEN_FS_MAX_IO], bytes[WARDEN_FS_MAX_IO + 4096];
static warden_handle kept[KEPT];
static int nkept;
static uint64_t size;

/* The attributes of the root (2) or the file (5) into `out`. */
static uint32_t attr(uint64_t ino, uint8_t *out) {
    warden_fs_attr a;
    memset(&a, 0, sizeof a);
    a.ino = ino;
    a.mode = ino == WARDEN_FS_ROOT ? (WARDEN_FS_S_IFDIR | 0755) : (WARDEN_FS_S_IFREG | 0644);
    a.nlink = 1;
    a.size = ino == WARDEN_FS_ROOT ? 4096 : size;
    memcpy(out, &a, sizeof a);
    return sizeof a;
}

/* Writes garbage through every kept permit; prints what happened. */
static void stale_writes(void) {
    if (nkept == 0) return;
    int accepted = 0, refused = 0;
    memset(bytes, 0xEE, 4096);
    for (int i = 0; i < nkept; i++) {
        if (warden_permit_write(kept[i], 0, bytes, 4096) >= 0) accepted++;
        else refused++;
    }
    printf("stale: %d accepted, %d refused\n", accepted, refused);
    fflush(stdout);
}

static void keep(warden_handle h) {
    if (nkept == KEPT) {
        warden_close(kept[0]);
        memmove(kept, kept + 1, sizeof kept[0] * (KEPT - 1));
        nkept--;
    }
    kept[nkept++] = h;
}

/* A READ: its status; the payload (`*len` bytes) in `out` if no permit. */
static int32_t read_file(const warden_fs_req *q, warden_handle lent, const char *mode, uint8_t *out,
                         uint32_t *len, int *kept_it) {
    uint64_t n = q->a >= size ? 0 : size - q->a;
    if (n > q->b) n = q->b;
    if (n > WARDEN_FS_MAX_IO) n = WARDEN_FS_MAX_IO;
    for (uint64_t i = 0; i < n + 4096; i++) bytes[i] = (uint8_t)((q->a + i) * 7 + 3);
    if (lent < 0) {
        memcpy(out, bytes, n);
        *len = (uint32_t)n;
        return 0;
    }
    if (strcmp(mode, "overclaim") == 0) return (int32_t)q->b + 1;
    if (strcmp(mode, "overrun") == 0) {
        int64_t r = warden_permit_write(lent, 0, bytes, q->b + 4096);
        printf("overrun: %s\n", r >= 0 ? "accepted" : "refused");
        fflush(stdout);
    }
    if (n && warden_permit_write(lent, 0, bytes, n) != (int64_t)n) return -5;
    if (strcmp(mode, "keep") == 0) *kept_it = 1;
    return (int32_t)n;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    const char *mode = argv[2];
    size = strtoull(argv[3], 0, 10);
    warden_handle svc = warden_service_create();
    if (svc < 0 || warden_name_register(argv[1], warden_portal_create(svc)) != 0) return 1;
    for (;;) {
        uint64_t call;
        warden_handle got[1];
        size_t nh = 1;
        int64_t n = warden_recv(svc, &call, req, sizeof req, got, &nh);
        if (n < 0) continue;
        stale_writes();
        warden_fs_req q;
        int32_t status = -38; /* ENOSYS */
        uint32_t len = 0;
        int kept_it = 0;
        memcpy(&q, req, sizeof q);
        if ((uint64_t)n < sizeof q) status = -22;
        else if (q.op == WARDEN_FS_GETATTR && (q.ino == WARDEN_FS_ROOT || q.ino == 5))
            status = 0, len = attr(q.ino, rep + 8);
        else if (q.op == WARDEN_FS_LOOKUP && q.ino == WARDEN_FS_ROOT)
            status = q.name_len == 1 && req[sizeof q] == 'f' ? (len = attr(5, rep + 8), 0) : -2;
        else if (q.op == WARDEN_FS_READ && q.ino == 5)
            status = read_file(&q, nh ? got[0] : -1, mode, rep + 8, &len, &kept_it);
        memcpy(rep, &status, 4);
        memcpy(rep + 4, &len, 4);
        warden_reply(call, rep, 8 + len, NULL, 0);
        if (nh && kept_it) keep(got[0]);
        else if (nh) warden_close(got[0]);
    }
}
