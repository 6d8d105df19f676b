/* Mapping benchmark: moving data to another task by mapping, and
 * revocation's cost.
 *
 *   map_bench server         serve "mapbench": a call carrying a memory
 *                            object maps it read-only (into fresh memory);
 *                            "r" + a 4-byte offset reads 64 bytes there
 *                            with plain loads; "u" unmaps; "n" is a null
 *                            call
 *   map_bench client N       for objects of 64 KiB, 1 MiB and 16 MiB: the
 *                            client fills the object through its own
 *                            mapping, the server maps it once, then N
 *                            round trips each read 64 bytes of it in the
 *                            server (the data is not copied); and N null
 *                            calls. Prints "map64k", "map1m", "map16m",
 *                            "null": ns per round trip
 *   map_bench revoke ROUNDS  for 1, 10 and 100 children each mapping a
 *                            read-only view of a 1 MiB object: the time
 *                            warden_mem_revoke takes to return (every
 *                            mapping gone), median of ROUNDS; prints
 *                            "revoke1", "revoke10", "revoke100" (ns)
 *   map_bench holder         (a child of "revoke") maps its granted view,
 *                            says so through its granted portal */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "warden.h"

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int server(void) {
    warden_handle s = warden_service_create();
    warden_name_register("mapbench", warden_portal_create(s));
    volatile uint64_t *at = 0;
    size_t len = 0, cap = 0;
    char *area = 0;
    for (;;) {
        char req[8];
        uint64_t call;
        warden_handle h[1];
        size_t nh = 1;
        int64_t n = warden_recv(s, &call, req, sizeof req, h, &nh);
        if (n < 0) return 0;
        uint64_t sum = 0;
        if (nh == 1) {
            len = (size_t)warden_mem_size(h[0]);
            if (len > cap) area = warden_map_area(len), cap = len;
            if (warden_mem_map(h[0], 0, len, area, WARDEN_MAP_READ)) return 2;
            at = (volatile uint64_t *)area;
            warden_close(h[0]);
        } else if (n == 5 && req[0] == 'r') {
            uint32_t off;
            memcpy(&off, req + 1, 4);
            for (int i = 0; i < 8; i++) sum += at[off / 8 + i];
        } else if (n == 1 && req[0] == 'u') {
            warden_mem_unmap(area, len);
        }
        warden_reply(call, &sum, sizeof sum, NULL, 0);
    }
}

static int call(warden_handle p, const void *req, size_t len, warden_handle *h, size_t nh) {
    uint64_t sum;
    size_t rnh = 0;
    return warden_call(p, req, len, h, nh, &sum, sizeof sum, NULL, &rnh) == 8 ? 0 : 1;
}

static int client(long n) {
    warden_handle p = warden_name_lookup("mapbench", 10LL * 1000 * 1000 * 1000);
    static const struct { const char *name; size_t len; } sizes[] = {
        {"map64k", 64 << 10}, {"map1m", 1 << 20}, {"map16m", 16 << 20}};
    char *area = warden_map_area(16 << 20);
    for (size_t k = 0; k < 3; k++) {
        size_t len = sizes[k].len;
        warden_handle m = warden_mem_create(len);
        if (m < 0 || warden_mem_map(m, 0, len, area, WARDEN_MAP_READ | WARDEN_MAP_WRITE)) return 2;
        memset(area, (int)k + 1, len);
        warden_handle view = warden_mem_view(m, 0, len, 1);
        if (call(p, "m", 1, &view, 1)) return 3;
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            char req[5] = {'r'};
            uint32_t off = (uint32_t)((i * 4096) % len);
            memcpy(req + 1, &off, 4);
            if (call(p, req, 5, NULL, 0)) return 4;
        }
        printf("%s %.1f\n", sizes[k].name, (now_ns() - t0) / n);
        if (call(p, "u", 1, NULL, 0) || warden_mem_unmap(area, len)) return 5;
        warden_close(view);
        warden_close(m);
    }
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        if (call(p, "n", 1, NULL, 0)) return 6;
    printf("null %.1f\n", (now_ns() - t0) / n);
    return 0;
}

static int holder(void) {
    warden_handle view = warden_task_granted(0), parent = warden_task_granted(1);
    size_t len = (size_t)warden_mem_size(view);
    char *area = warden_map_area(len);
    if (warden_mem_map(view, 0, len, area, WARDEN_MAP_READ)) return 2;
    /* Waits in the call, mapped, until the parent has revoked. */
    return call(parent, "ready", 5, NULL, 0);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One revoke with `k` children mapping: its time, ns. */
static double revoke_once(warden_handle module, warden_handle s, warden_handle portal, int k) {
    static warden_handle kids[100];
    static uint64_t calls[100];
    warden_handle m = warden_mem_create(1 << 20);
    warden_budget budget = {8 << 20, 0, 1};
    const char *argv[] = {"holder"};
    for (int i = 0; i < k; i++) {
        warden_handle grant[2] = {warden_mem_view(m, 0, 1 << 20, 1) | WARDEN_MOVE, portal};
        kids[i] = warden_task_spawn(module, argv, 1, &budget, grant, 2);
        if (kids[i] < 0) {
            printf("error: holder %d of %d not spawned: %s\n", i, k, warden_strerror(kids[i]));
            return -1;
        }
    }
    for (int i = 0; i < k; i++) {
        char req[8];
        size_t nh = 0;
        /* A holder that ended without calling would leave this waiting
         * for ever: after a minute, say which did. */
        warden_pollfd p = {s, WARDEN_POLL_IN, 0};
        if (warden_poll(&p, 1, 60000000000LL) == 0) {
            printf("error: %d of %d holders called in 60 s\n", i, k);
            for (int j = 0; j < k; j++) {
                int32_t status;
                if (warden_task_wait(kids[j], 0, &status) == 0)
                    printf("error: holder %d ended with status %d\n", j, status);
            }
            return -1;
        }
        if (warden_recv(s, &calls[i], req, sizeof req, NULL, &nh) < 0) return -1;
    }
    double t0 = now_ns();
    warden_handle fresh = warden_mem_revoke(m);
    double took = now_ns() - t0;
    /* Every call answered before any child is waited for: the calls came
     * in whatever order the children ran, not the order they were
     * spawned in, and a child ends only once its own call is answered. */
    for (int i = 0; i < k; i++) {
        uint64_t none = 0;
        warden_reply(calls[i], &none, sizeof none, NULL, 0);
    }
    for (int i = 0; i < k; i++) {
        int32_t status;
        warden_task_wait(kids[i], -1, &status);
        warden_close(kids[i]);
    }
    warden_close(fresh);
    warden_close(m);
    return fresh < 0 ? -1 : took;
}

static int revoke(int rounds) {
    warden_handle module = warden_module_lookup("self");
    warden_handle s = warden_service_create();
    warden_handle portal = warden_portal_create(s);
    static const int counts[] = {1, 10, 100};
    double t[64];
    if (rounds > 64) rounds = 64;
    for (int c = 0; c < 3; c++) {
        for (int r = 0; r < rounds; r++)
            if ((t[r] = revoke_once(module, s, portal, counts[c])) < 0) return 2;
        qsort(t, (size_t)rounds, sizeof t[0], cmp);
        printf("revoke%d %.1f\n", counts[c], t[rounds / 2]);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc >= 2 ? argv[1] : "";
    if (!strcmp(mode, "server")) return server();
    if (!strcmp(mode, "client") && argc >= 3) return client(atol(argv[2]));
    if (!strcmp(mode, "revoke") && argc >= 3) return revoke(atoi(argv[2]));
    if (!strcmp(mode, "holder")) return holder();
    return 64;
}
