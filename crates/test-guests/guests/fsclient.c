/* A client of a file-system task (sdk/c/warden_fs.h), for the ext2 tests:
 *
 *   fsclient NAME cat PATH            print the file at PATH
 *   fsclient NAME ls PATH             print the names in directory PATH
 *   fsclient NAME workload            create, write, grow past the
 *                                     indirect blocks, mkdir, rename,
 *                                     symlink, truncate, unlink, rmdir,
 *                                     fsync; print "workload ok" and what
 *                                     failed
 *   fsclient NAME hammer              write and fsync files for ever,
 *                                     printing "wrote N" (to be killed)
 *   fsclient NAME garbage N           N requests of random operations,
 *                                     inodes, arguments, names and
 *                                     lengths (some shorter or longer
 *                                     than their header says); then
 *                                     print "still serving" if the root
 *                                     still answers
 *
 * NAME is the service to look up (the task's manifest must use it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"
#include "warden_fs.h"
#include "checks.h"

static warden_handle fs;
static uint8_t req[sizeof(warden_fs_req) + 255 + 65536], rep[sizeof(warden_fs_reply) + 65536];

/* One request; the reply's status, its payload left in rep. */
static int call(uint32_t op, uint64_t ino, uint64_t a, uint64_t b, const char *name,
                const void *data, uint32_t data_len, uint32_t *len) {
    warden_fs_req q = {op, name ? (uint32_t)strlen(name) : 0, ino, a, b, data_len, 0};
    memcpy(req, &q, sizeof q);
    memcpy(req + sizeof q, name, q.name_len);
    memcpy(req + sizeof q + q.name_len, data, data_len);
    int64_t n = warden_call(fs, req, sizeof q + q.name_len + data_len, NULL, 0, rep, sizeof rep, NULL, NULL);
    if (n < (int64_t)sizeof(warden_fs_reply)) return n < 0 ? (int)n : -1000;
    warden_fs_reply r;
    memcpy(&r, rep, sizeof r);
    if (len) *len = r.len;
    return r.status;
}

static uint64_t ino_of(const warden_fs_attr *a) { return a->ino; }

static int attr(uint32_t op, uint64_t ino, uint64_t a, uint64_t b, const char *name,
                const void *data, uint32_t data_len, warden_fs_attr *out) {
    uint32_t len = 0;
    int r = call(op, ino, a, b, name, data, data_len, &len);
    if (r == 0 && out) memcpy(out, rep + sizeof(warden_fs_reply), sizeof *out);
    return r;
}

/* The inode at `path` (absolute), walked one LOOKUP at a time. */
static int walk(const char *path, uint64_t *ino) {
    char part[256];
    *ino = WARDEN_FS_ROOT;
    while (*path) {
        while (*path == '/') path++;
        size_t n = strcspn(path, "/");
        if (!n) break;
        memcpy(part, path, n);
        part[n] = 0;
        warden_fs_attr a;
        int r = attr(WARDEN_FS_LOOKUP, *ino, 0, 0, part, 0, 0, &a);
        if (r) return r;
        *ino = ino_of(&a);
        path += n;
    }
    return 0;
}

static int cat(const char *path) {
    uint64_t ino, off = 0;
    int r = walk(path, &ino);
    if (r) return printf("%s: error %d\n", path, r), 1;
    for (;;) {
        uint32_t len;
        if ((r = call(WARDEN_FS_READ, ino, off, 65536, 0, 0, 0, &len)) != 0) return printf("read: %d\n", r), 1;
        if (!len) return 0;
        fwrite(rep + sizeof(warden_fs_reply), 1, len, stdout);
        off += len;
    }
}

static int ls(const char *path) {
    uint64_t ino, cookie = 0;
    int r = walk(path, &ino);
    if (r) return printf("%s: error %d\n", path, r), 1;
    for (;;) {
        uint32_t len;
        if ((r = call(WARDEN_FS_READDIR, ino, cookie, 4096, 0, 0, 0, &len)) != 0) return printf("readdir: %d\n", r), 1;
        if (!len) return 0;
        for (uint32_t at = 0; at < len;) {
            warden_fs_dirent e;
            memcpy(&e, rep + sizeof(warden_fs_reply) + at, sizeof e);
            printf("%.*s\n", e.name_len, (char *)rep + sizeof(warden_fs_reply) + at + sizeof e);
            at += sizeof e + e.name_len;
            cookie = e.next;
        }
    }
}

static uint8_t big[300 * 1024];

static int workload(void) {
    warden_fs_attr a, dir, sub;
    uint32_t len;
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7 + i / 4096);
    CHECK(attr(WARDEN_FS_CREATE, WARDEN_FS_ROOT, 0644, 0, "hello.txt", 0, 0, &a), 0);
    CHECK(attr(WARDEN_FS_CREATE, WARDEN_FS_ROOT, 0644, 0, "hello.txt", 0, 0, NULL), -17);
    CHECK(attr(WARDEN_FS_WRITE, a.ino, 0, 0, 0, "written by a task\n", 18, &a), 0);
    CHECK(a.size, 18);
    /* 300 KiB, past the direct blocks and into the indirect ones. */
    warden_fs_attr f;
    CHECK(attr(WARDEN_FS_CREATE, WARDEN_FS_ROOT, 0600, 0, "big.bin", 0, 0, &f), 0);
    for (uint32_t off = 0; off < sizeof big; off += 65536) {
        uint32_t n = sizeof big - off < 65536 ? sizeof big - off : 65536;
        CHECK(attr(WARDEN_FS_WRITE, f.ino, off, 0, 0, big + off, n, &f), 0);
    }
    CHECK(f.size, sizeof big);
    CHECK(call(WARDEN_FS_READ, f.ino, 200000, 1000, 0, 0, 0, &len), 0);
    CHECK(len, 1000);
    CHECK(memcmp(rep + sizeof(warden_fs_reply), big + 200000, 1000), 0);
    CHECK(attr(WARDEN_FS_MKDIR, WARDEN_FS_ROOT, 0755, 0, "dir", 0, 0, &dir), 0);
    CHECK(attr(WARDEN_FS_MKDIR, dir.ino, 0755, 0, "sub", 0, 0, &sub), 0);
    for (int i = 0; i < 150; i++) { /* more entries than one block holds */
        char name[64];
        snprintf(name, sizeof name, "file-with-a-long-name-%03d", i);
        CHECK(attr(WARDEN_FS_CREATE, sub.ino, 0644, 0, name, name, (uint32_t)strlen(name), NULL), 0);
    }
    CHECK(attr(WARDEN_FS_CREATE, sub.ino, 0644, 0, "a/b", 0, 0, NULL), -22);
    CHECK(call(WARDEN_FS_RMDIR, WARDEN_FS_ROOT, 0, 0, "dir", 0, 0, NULL), -39);
    CHECK(call(WARDEN_FS_RENAME, WARDEN_FS_ROOT, 0, dir.ino, "hello.txt", "moved.txt", 9, NULL), 0);
    CHECK(call(WARDEN_FS_RENAME, dir.ino, 0, WARDEN_FS_ROOT, "sub", "sub2", 4, NULL), 0);
    warden_fs_attr inner;
    CHECK(attr(WARDEN_FS_MKDIR, dir.ino, 0755, 0, "inner", 0, 0, &inner), 0);
    CHECK(call(WARDEN_FS_RENAME, WARDEN_FS_ROOT, 0, inner.ino, "dir", "x", 1, NULL), -22);
    CHECK(attr(WARDEN_FS_SYMLINK, WARDEN_FS_ROOT, 0, 0, "short", "dir/moved.txt", 13, NULL), 0);
    char target[200];
    memset(target, 'x', sizeof target);
    CHECK(attr(WARDEN_FS_SYMLINK, WARDEN_FS_ROOT, 0, 0, "long", target, sizeof target, NULL), 0);
    uint64_t ino;
    CHECK(walk("/long", &ino), 0);
    CHECK(call(WARDEN_FS_READLINK, ino, 0, 0, 0, 0, 0, &len), 0);
    CHECK(len, sizeof target);
    CHECK(attr(WARDEN_FS_TRUNCATE, f.ino, 100000, 0, 0, 0, 0, &f), 0);
    CHECK(f.size, 100000);
    CHECK(attr(WARDEN_FS_CREATE, WARDEN_FS_ROOT, 0644, 0, "gone", 0, 0, &a), 0);
    CHECK(attr(WARDEN_FS_WRITE, a.ino, 0, 0, 0, big, 50000, NULL), 0);
    CHECK(call(WARDEN_FS_UNLINK, WARDEN_FS_ROOT, 0, 0, "gone", 0, 0, NULL), 0);
    CHECK(call(WARDEN_FS_UNLINK, WARDEN_FS_ROOT, 0, 0, "gone", 0, 0, NULL), -2);
    for (int i = 0; i < 150; i += 2) {
        char name[64];
        snprintf(name, sizeof name, "file-with-a-long-name-%03d", i);
        CHECK(call(WARDEN_FS_UNLINK, sub.ino, 0, 0, name, 0, 0, NULL), 0);
    }
    CHECK(attr(WARDEN_FS_MKDIR, WARDEN_FS_ROOT, 0755, 0, "empty", 0, 0, NULL), 0);
    CHECK(call(WARDEN_FS_RMDIR, WARDEN_FS_ROOT, 0, 0, "empty", 0, 0, NULL), 0);
    CHECK(call(WARDEN_FS_FSYNC, WARDEN_FS_ROOT, 0, 0, 0, 0, 0, NULL), 0);
    printf(failures ? "workload: %d failures\n" : "workload ok\n", failures);
    return failures;
}

static int hammer(void) {
    for (long n = 0;; n++) {
        char name[32];
        warden_fs_attr a;
        snprintf(name, sizeof name, "h%ld", n % 50);
        int r = attr(WARDEN_FS_CREATE, WARDEN_FS_ROOT, 0644, 0, name, 0, 0, &a);
        if (r == -17) r = attr(WARDEN_FS_LOOKUP, WARDEN_FS_ROOT, 0, 0, name, 0, 0, &a);
        if (r == 0) r = attr(WARDEN_FS_WRITE, a.ino, (uint64_t)(n % 7) * 40000, 0, 0, big, 40000, NULL);
        if (r == 0 && n % 10 == 0) r = call(WARDEN_FS_FSYNC, WARDEN_FS_ROOT, 0, 0, 0, 0, 0, NULL);
        if (r) return printf("error %d after %ld\n", r, n), 1;
        if (n % 20 == 0) printf("wrote %ld\n", n), fflush(stdout);
    }
}

static uint64_t seed = 88172645463325252ull;
static uint64_t rnd(void) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}

static int garbage(long n) {
    static uint8_t junk[70000];
    for (long i = 0; i < n; i++) {
        uint64_t inos[] = {0, 1, 2, 7, 11, 12, 13, 20, rnd() % 300, rnd()};
        warden_fs_req q = {(uint32_t)(rnd() % 20), (uint32_t)(rnd() % 300), inos[rnd() % 10],
                           rnd() % 3 ? rnd() % 100000 : rnd(), rnd() % 3 ? rnd() % 100000 : rnd(),
                           (uint32_t)(rnd() % 2000), 0};
        if (q.op == WARDEN_FS_RMDIR || q.op == WARDEN_FS_UNLINK || q.op == WARDEN_FS_RENAME) q.ino = 0;
        for (size_t k = 0; k < 2400; k++) junk[k] = (uint8_t)(rnd() % 4 ? 'a' + rnd() % 3 : rnd());
        size_t total = sizeof q + q.name_len + q.data_len;
        if (rnd() % 4 == 0) total = rnd() % (total + 64); /* lie about the lengths */
        memcpy(req, &q, sizeof q < total ? sizeof q : total);
        if (total > sizeof q) memcpy(req + sizeof q, junk, total - sizeof q);
        int64_t r = warden_call(fs, req, total, NULL, 0, rep, sizeof rep, NULL, NULL);
        if (r < 0) return printf("call %ld: %s\n", i, warden_strerror((int32_t)r)), 1;
    }
    warden_fs_attr root;
    int r = attr(WARDEN_FS_GETATTR, WARDEN_FS_ROOT, 0, 0, 0, 0, 0, &root);
    if (r == 0) r = call(WARDEN_FS_FSYNC, WARDEN_FS_ROOT, 0, 0, 0, 0, 0, NULL);
    printf(r == 0 && (root.mode & WARDEN_FS_S_IFMT) == WARDEN_FS_S_IFDIR ? "still serving\n" : "root: %d\n", r);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 3) return printf("usage: fsclient NAME cat|ls|workload|hammer [PATH]\n"), 2;
    fs = warden_name_lookup(argv[1], 10LL * 1000 * 1000 * 1000);
    if (fs < 0) return printf("lookup %s: %s\n", argv[1], warden_strerror(fs)), 1;
    if (!strcmp(argv[2], "cat") && argc > 3) return cat(argv[3]);
    if (!strcmp(argv[2], "ls") && argc > 3) return ls(argv[3]);
    if (!strcmp(argv[2], "workload")) return workload();
    if (!strcmp(argv[2], "hammer")) return hammer();
    if (!strcmp(argv[2], "garbage") && argc > 3) return garbage(atol(argv[3]));
    return printf("unknown command\n"), 2;
}
