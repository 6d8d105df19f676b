/* IPC round-trip benchmark (the seeds' Table 2 and a 64 KiB transfer).
 *
 *   ipc_bench server           serve "bench"
 *   ipc_bench client N [KINDS [SERVICE [RUNS]]]
 *                              make N calls of each kind (or only those in
 *                              KINDS, a comma-separated list) to SERVICE
 *                              (default "bench") RUNS times (default 2),
 *                              timing the last; print "<kind> <ns per
 *                              round trip>" per line
 *
 * Kinds: null (empty request and reply), int3 (three ints in, their sum
 * out), str100 (a 100-byte string in, its length out), copy64k (64 KiB
 * copied in the request), mem64k (a 64 KiB memory object passed by handle;
 * the server reads 64 bytes of it), mem64k_read (the same, the server reads
 * all 64 KiB). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "warden.h"

#define BIG 65536
static char big[BIG];

static int server(void) {
    warden_handle s = warden_service_create();
    warden_handle p = warden_portal_create(s);
    warden_name_register("bench", p);
    warden_close(p);
    static char buf[BIG], scratch[BIG];
    for (;;) {
        uint64_t call;
        warden_handle h[1];
        size_t nh = 1;
        int64_t n = warden_recv(s, &call, buf, sizeof buf, h, &nh);
        if (n < 0) return 0;
        if (nh == 1) {
            warden_mem_read(h[0], 0, scratch, n == 1 ? BIG : 64);
            warden_close(h[0]);
            warden_reply(call, NULL, 0, NULL, 0);
        } else if (n == 12) {
            int32_t v[3], sum;
            memcpy(v, buf, 12);
            sum = v[0] + v[1] + v[2];
            warden_reply(call, &sum, 4, NULL, 0);
        } else if (n == 100) {
            int32_t len = (int32_t)strnlen(buf, 100);
            warden_reply(call, &len, 4, NULL, 0);
        } else {
            warden_reply(call, NULL, 0, NULL, 0);
        }
    }
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Whether `name` is one of the comma-separated names in `list`. */
static int listed(const char *list, const char *name) {
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && !strncmp(p, name, len)) return 1;
        p += n + (end != NULL);
    }
    return 0;
}

static int client(long n, const char *only, const char *service, int runs) {
    warden_handle p = warden_name_lookup(service, 10LL * 1000 * 1000 * 1000);
    if (p < 0) { printf("lookup: %s\n", warden_strerror(p)); return 1; }
    char resp[16];
    int32_t ints[3] = {1, 2, 3};
    char str[100];
    memset(str, 'x', sizeof str);
    str[99] = 0;
    memset(big, 7, BIG);
    warden_handle mem = warden_mem_create(BIG);
    warden_mem_write(mem, 0, big, BIG);
    /* write: the client writes all 64 KiB into the memory object before
     * each call, as a copying peer writes it every round trip. */
    struct { const char *name; const void *req; size_t len; int handle; int write; long iters; } kinds[] = {
        {"null", NULL, 0, 0, 0, n},
        {"int3", ints, 12, 0, 0, n},
        {"str100", str, 100, 0, 0, n},
        {"copy64k", big, BIG, 0, 0, n / 10 + 1},
        {"mem64k_rw", "a", 1, 1, 1, n / 10 + 1},
        {"mem64k", "h", 0, 1, 0, n},
        {"mem64k_read", "a", 1, 1, 0, n / 10 + 1},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (only && !listed(only, kinds[k].name)) continue;
        long iters = kinds[k].iters;
        /* By default each kind runs twice and the second run is timed,
         * as the Erlang peer does: the first warms caches, code and
         * buffers. */
        double t0 = 0;
        for (int run = 0; run < runs; run++) {
            t0 = now_ns();
            for (long i = 0; i < iters; i++) {
                if (kinds[k].write) warden_mem_write(mem, 0, big, BIG);
                size_t nh = 0;
                int64_t r = warden_call(p, kinds[k].req, kinds[k].len, &mem, kinds[k].handle,
                                        resp, sizeof resp, NULL, &nh);
                if (r < 0) {
                    printf("call %s: %s\n", kinds[k].name, warden_strerror((int32_t)r));
                    return 2;
                }
            }
        }
        printf("%s %.1f\n", kinds[k].name, (now_ns() - t0) / iters);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "server")) return server();
    if (argc >= 3 && !strcmp(argv[1], "client"))
        return client(atol(argv[2]), argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : "bench",
                      argc > 5 && atoi(argv[5]) > 0 ? atoi(argv[5]) : 2);
    return 64;
}
