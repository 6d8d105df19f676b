/* Reads PATH in records of RECORD bytes twice and prints what it read:
 *
 *   bytes N        the file's length, read front to back with read(2)
 *   fnv HEX        FNV-1a of those bytes
 *   pfnv HEX       FNV-1a of the bytes read back to front with pread(2)
 *
 * With COPY, then writes the bytes to COPY in records with write(2).
 *
 * A short read or write (POSIX allows them) is continued.
 *
 * Usage: sumfile PATH RECORD [COPY] */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* pread(2) until `want` bytes are read (a read may be short); 0 or -1. */
static int pread_all(int fd, unsigned char *p, size_t want, off_t at) {
    while (want > 0) {
        ssize_t n = pread(fd, p, want, at);
        if (n <= 0) return -1;
        p += n, want -= n, at += n;
    }
    return 0;
}

/* write(2) until `n` bytes are written; 0 or -1. */
static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return -1;
        p += w, n -= w;
    }
    return 0;
}

static uint64_t fnv(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: sumfile PATH RECORD [COPY]\n"); return 2; }
    size_t record = strtoull(argv[2], 0, 10);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0 || record == 0) { perror(argv[1]); return 1; }
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0 || lseek(fd, 0, SEEK_SET) != 0) { perror("lseek"); return 1; }
    unsigned char *all = malloc(size + 1), *back = malloc(size + 1);
    size_t done = 0;
    for (;;) {
        ssize_t n = read(fd, all + done, record < size + 1 - done ? record : size + 1 - done);
        if (n < 0) { perror("read"); return 1; }
        if (n == 0) break;
        done += n;
    }
    for (off_t at = (size - 1) / record * record; at >= 0 && size > 0; at -= record) {
        size_t want = size - at < (off_t)record ? size - at : record;
        if (pread_all(fd, back + at, want, at) != 0) { perror("pread"); return 1; }
    }
    printf("bytes %zu\nfnv %016llx\npfnv %016llx\n", done, (unsigned long long)fnv(all, done),
           (unsigned long long)fnv(back, size));
    close(fd);
    if (argc > 3) {
        int out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0) { perror(argv[3]); return 1; }
        for (size_t at = 0; at < done; at += record) {
            size_t n = done - at < record ? done - at : record;
            if (write_all(out, all + at, n) != 0) { perror("write"); return 1; }
        }
        close(out);
    }
    return 0;
}
