/* A WAGI (CGI over WASI) handler for the web server's tests. What it does
 * is chosen by the query string:
 *   (none)      200 text/plain: method, path, query, X-Test header, body
 *   status      404 with a body
 *   fresh       how many requests this instance has seen (always 1)
 *   residue     what an earlier request left behind: a bit each for a
 *               data-segment global, a 320 KiB BSS array, fresh heap, an
 *               environment variable and descriptor 3 (0: nothing), then
 *               dirties all but the descriptor (a handler has no
 *               directory to open one in)
 *   residue2    the same twice in one request: "0 then 11" shows the
 *               check sees what a request leaves (not the heap bit: the
 *               second block in one instance is another block)
 *   big=N       a body of N bytes of 'x'
 *   stream=N    a body of N bytes of 'x', written 64 KiB at a time
 *   echo        the request's body as it arrives, each read written back
 *               at once (after a head)
 *   count       the number of bytes of the request's body it read
 *   half=N      a head and N bytes of 'x', then traps
 *   trap        traps                        -> 500
 *   exit3       exits with code 3            -> 500
 *   hog         allocates until refused, then aborts -> 500
 *   spin        computes for ever            -> 503 (CPU limit) or 504
 *   sleep       sleeps for ever              -> 504 (timeout)
 *   bad         writes no header block       -> 502
 *   headers=N   N header lines, then a body      -> 502 past the server's bound
 *   xff         the X-Forwarded-For it was given (HTTP_X_FORWARDED_FOR)
 *   fuzz=SEED   a random response: mostly CGI-shaped lines of random bytes,
 *               random statuses and names, long lines, no end of headers
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v ? v : "";
}

static int seen;

int marker = 7;                 /* in the data segment */
static char big[320 * 1024];    /* in BSS, most of it past the first 64 KiB */

/* What this instance's memory, environment and descriptors hold that a
 * fresh instance's do not, as bits; then leaves all of it behind. */
static int residue(void) {
    int dirty = 0;
    if (marker != 7) dirty |= 1;
    for (long i = 0; i < (long)sizeof big; i += 4096) {
        if (big[i]) { dirty |= 2; break; }
    }
    unsigned char *heap = malloc(64 * 1024);
    if (!heap) abort();
    for (long i = 1024; i < 64 * 1024; i += 512) {
        if (heap[i]) { dirty |= 4; break; }
    }
    if (getenv("WARDEN_RESIDUE")) dirty |= 8;
    if (fcntl(3, F_GETFL) != -1) dirty |= 16;
    marker = 8;
    for (long i = 0; i < (long)sizeof big; i += 4096) big[i] = 1;
    /* Not freed: a fresh instance's allocator hands out the same address
     * for its first such block, where this one's bytes would show. */
    memset(heap, 0xAA, 64 * 1024);
    setenv("WARDEN_RESIDUE", "1", 1);
    return dirty;
}

static unsigned long long rng;

static unsigned next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 11);
}

/* One random piece of a CGI response. */
static void fuzz_piece(void) {
    static const char *names[] = {"Status", "Content-Type", "Location", "X-A", "Content-Length",
                                  "Transfer-Encoding", "Connection", "Set-Cookie", "", "Bad Name",
                                  "X\x01", ":"};
    static const char *values[] = {"200 OK", "99", "1000 Big", "text/plain", "/x", "chunked",
                                   "-1", "close", "", "\x7f", "a\rb", "  spaced  "};
    switch (next() % 8) {
    case 0: printf("%s: %s\n", names[next() % 12], values[next() % 12]); break;
    case 1: printf("%s:%s\r\n", names[next() % 12], values[next() % 12]); break;
    case 2: printf("\n"); break;
    case 3: printf("\r\n"); break;
    case 4: { unsigned n = next() % 300; for (unsigned i = 0; i < n; i++) putchar(next() % 256); break; }
    case 5: { unsigned n = next() % 70000; printf("X-Long: "); for (unsigned i = 0; i < n; i++) putchar('a' + next() % 26); printf("\n"); break; }
    case 6: { unsigned n = next() % 3000; for (unsigned i = 0; i < n; i++) printf("X-%u: %u\n", i, next()); break; }
    default: printf("Status: %u %s\n", next() % 1200, names[next() % 12]); break;
    }
}

int main(void) {
    const char *q = env("QUERY_STRING");
    seen++;
    if (strcmp(q, "trap") == 0) __builtin_trap();
    if (strcmp(q, "exit3") == 0) return 3;
    if (strcmp(q, "spin") == 0) { volatile unsigned long n = 0; for (;;) n++; }
    if (strcmp(q, "sleep") == 0) { for (;;) sleep(3600); }
    if (strcmp(q, "bad") == 0) { printf("this is not a CGI response"); return 0; }
    if (strncmp(q, "headers=", 8) == 0) {
        long n = atol(q + 8);
        printf("Content-Type: text/plain\n");
        for (long i = 0; i < n; i++) printf("X-Line-%ld: %ld\n", i, i);
        printf("\nmany headers\n");
        return 0;
    }
    if (strcmp(q, "xff") == 0) {
        printf("Content-Type: text/plain\n\nxff=%s\n", env("HTTP_X_FORWARDED_FOR"));
        return 0;
    }
    if (strncmp(q, "fuzz=", 5) == 0) {
        rng = strtoull(q + 5, 0, 10) * 2654435761ULL + 1;
        unsigned pieces = 1 + next() % 12;
        for (unsigned i = 0; i < pieces; i++) fuzz_piece();
        return 0;
    }
    if (strcmp(q, "hog") == 0) {
        static char *keep[1 << 16];
        for (int i = 0; i < (1 << 16); i++) {
            keep[i] = malloc(1 << 20);
            if (!keep[i]) abort();
            memset(keep[i], 1, 1 << 20);
        }
        return 0;
    }
    if (strcmp(q, "status") == 0) {
        printf("Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nnothing here\n");
        return 0;
    }
    if (strcmp(q, "residue") == 0) {
        printf("Content-Type: text/plain\n\nresidue %d\n", residue());
        return 0;
    }
    if (strcmp(q, "residue2") == 0) {
        int first = residue();
        int second = residue();
        printf("Content-Type: text/plain\n\nresidue %d then %d\n", first, second);
        return 0;
    }
    if (strcmp(q, "fresh") == 0) {
        printf("Content-Type: text/plain\n\nseen %d\n", seen);
        return 0;
    }
    if (strncmp(q, "stream=", 7) == 0 || strncmp(q, "half=", 5) == 0) {
        static char block[64 * 1024];
        long long n = atoll(strchr(q, '=') + 1);
        memset(block, 'x', sizeof block);
        const char *head = "Content-Type: application/octet-stream\n\n";
        if (write(1, head, strlen(head)) < 0) return 1;
        while (n > 0) {
            long k = n < (long long)sizeof block ? (long)n : (long)sizeof block;
            ssize_t w = write(1, block, k);
            if (w <= 0) return 1;
            n -= w;
        }
        if (q[0] == 'h') __builtin_trap();
        return 0;
    }
    if (strcmp(q, "echo") == 0 || strcmp(q, "count") == 0) {
        static char block[64 * 1024];
        long long total = 0;
        ssize_t n;
        const char *head = "Content-Type: application/octet-stream\n\n";
        if (q[0] == 'e' && write(1, head, strlen(head)) < 0) return 1;
        while ((n = read(0, block, sizeof block)) > 0) {
            total += n;
            for (ssize_t at = 0; q[0] == 'e' && at < n;) {
                ssize_t w = write(1, block + at, n - at);
                if (w <= 0) return 1;
                at += w;
            }
        }
        if (n < 0) return 4;
        if (q[0] == 'c') printf("Content-Type: text/plain\n\ncount %lld\n", total);
        return 0;
    }
    if (strncmp(q, "big=", 4) == 0) {
        long n = atol(q + 4);
        printf("Content-Type: application/octet-stream\n\n");
        for (long i = 0; i < n; i++) putchar('x');
        return 0;
    }
    printf("Content-Type: text/plain\r\nX-Handler: wagi\r\n\r\n");
    printf("method=%s path=%s query=%s test=%s server=%s:%s length=%s\n", env("REQUEST_METHOD"),
           env("PATH_INFO"), q, env("HTTP_X_TEST"), env("SERVER_NAME"), env("SERVER_PORT"),
           env("CONTENT_LENGTH"));
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) fwrite(buf, 1, n, stdout);
    return 0;
}
