/* Memory objects mapped into a task's memory (zero copy).
 *
 *   mapped self          one task: map, share both ways, every refusal;
 *                        prints "mapped: ok" or the failed checks
 *   mapped store-ro      stores into a read-only mapping (traps)
 *   mapped host-store    has a host call write into a read-only mapping
 *                        (the task ends with the object's name)
 *   mapped producer MiB  an object of MiB, filled through a writable
 *                        mapping; serves "producer": "get" replies with a
 *                        read-only view, "revoke" replies, then revokes the
 *                        object and checks its own data is intact, "quit"
 *   mapped consumer once|loop|hold|exit
 *                        maps the producer's view read-only and sums it
 *                        with plain loads; "once" unmaps and exits, "loop"
 *                        asks for the revoke and reads on (until it
 *                        traps), "hold" reads on, "exit" exits mapped
 *   mapped leave         maps an object of its own, writes into it, exits
 *                        with it mapped
 *   mapped peek KiB      grows by KiB as "leave" or a consumer did; prints
 *                        whether the pages there are zero
 *   mapped powner        maps a 1 MiB object of its own, fills it, grants a
 *                        read-only permit to that range and one to plain
 *                        memory; serves "powner": "get" replies with both,
 *                        "revoke" replies, revokes the first permit and
 *                        checks its own mapping
 *   mapped preader       maps the first permit (the second is refused),
 *                        sums, asks for the revoke, reads on (and traps)
 *   mapped cycles N      N map/unmap cycles and N/100 map/revoke cycles,
 *                        waiting for a line on stdin before and after */
#include <stdlib.h>
#include <string.h>
#include "warden.h"
#include "checks.h"

static uint32_t pattern(uint32_t i) { return i * 2654435761u; }

static uint64_t sum_of(const volatile uint32_t *p, size_t words) {
    uint64_t sum = 0;
    for (size_t i = 0; i < words; i++) sum += p[i];
    return sum;
}

static int self_checks(void) {
    warden_handle m = warden_mem_create(64 << 10);
    CHECK(m >= 0, 1);
    char *area = warden_map_area(256 << 10);
    CHECK(area != 0, 1);
    CHECK(warden_mem_map(m, 0, 64 << 10, area, WARDEN_MAP_READ | WARDEN_MAP_WRITE), 0);
    /* Both ways, without a copy. */
    memcpy(area + 100, "through the mapping", 19);
    char buf[32] = {0};
    CHECK(warden_mem_read(m, 100, buf, 19), 19);
    CHECK(memcmp(buf, "through the mapping", 19), 0);
    CHECK(warden_mem_write(m, 5000, "from the host", 13), 13);
    CHECK(memcmp(area + 5000, "from the host", 13), 0);
    /* Refusals. */
    CHECK(warden_mem_map(m, 0, 4096, area + 100, WARDEN_MAP_READ), WARDEN_EINVAL);
    CHECK(warden_mem_map(m, 100, 4096, area + (128 << 10), WARDEN_MAP_READ), WARDEN_EINVAL);
    CHECK(warden_mem_map(m, 0, 0, area + (128 << 10), WARDEN_MAP_READ), WARDEN_EINVAL);
    CHECK(warden_mem_map(m, 0, 4096, area + (128 << 10), 0), WARDEN_EINVAL);
    CHECK(warden_mem_map(m, 0, 4096, area + (128 << 10), 7), WARDEN_EINVAL);
    CHECK(warden_mem_map(m, 0, 128 << 10, area + (128 << 10), WARDEN_MAP_READ), WARDEN_ERANGE);
    CHECK(warden_mem_map(m, 0, 4096, area + (32 << 10), WARDEN_MAP_READ), WARDEN_EEXISTS);
    CHECK(warden_mem_map(m, 0, 4096, (void *)0xfffff000u, WARDEN_MAP_READ), WARDEN_EBADPTR);
    CHECK(warden_mem_map(m, 0, 4096, (void *)(((uintptr_t)buf) & ~4095u), WARDEN_MAP_READ), WARDEN_EDENIED);
    static char data_segment[8192] = "initialised data";
    CHECK(warden_mem_map(m, 0, 4096, (void *)(((uintptr_t)data_segment + 4095) & ~4095u), WARDEN_MAP_READ), WARDEN_EDENIED);
    CHECK(warden_mem_map(m, 0, 4096, (void *)0, WARDEN_MAP_READ), WARDEN_EDENIED);
    CHECK(warden_mem_map(9999, 0, 4096, area + (128 << 10), WARDEN_MAP_READ), WARDEN_EBADHANDLE);
    CHECK(warden_mem_map(m, 0, 1ULL << 40, area + (128 << 10), WARDEN_MAP_READ), WARDEN_ERANGE);
    CHECK(warden_mem_map(m, UINT64_MAX & ~4095ULL, 4096, area + (128 << 10), WARDEN_MAP_READ), WARDEN_ERANGE);
    CHECK(warden_mem_map(m, 0, UINT64_MAX, area + (128 << 10), WARDEN_MAP_READ), WARDEN_ERANGE);
    CHECK(warden_mem_unmap(area + (128 << 10), 0), WARDEN_EINVAL);
    CHECK(warden_mem_unmap((void *)0xfffff000u, 4096), WARDEN_EINVAL);
    warden_handle portal = warden_portal_create(warden_service_create());
    CHECK(warden_mem_map(portal, 0, 4096, area + (128 << 10), WARDEN_MAP_READ), WARDEN_EBADHANDLE);
    warden_handle small = warden_mem_create(100);
    CHECK(warden_mem_map(small, 0, 4096, area + (128 << 10), WARDEN_MAP_READ), WARDEN_ERANGE);
    warden_handle ro = warden_mem_view(m, 4096, 8192, 1);
    CHECK(warden_mem_map(ro, 0, 8192, area + (128 << 10), WARDEN_MAP_READ | WARDEN_MAP_WRITE), WARDEN_EDENIED);
    CHECK(warden_mem_map(ro, 0, 8192, area + (128 << 10), WARDEN_MAP_READ), 0);
    CHECK(memcmp(area + (128 << 10) + 904, "from the host", 13), 0);
    /* Unmap: exactly one mapping; the range reads as zeros again. */
    CHECK(warden_mem_unmap(area + (128 << 10), 4096), WARDEN_EINVAL);
    CHECK(warden_mem_unmap(area + (128 << 10), 8192), 0);
    CHECK(warden_mem_unmap(area + (128 << 10), 8192), WARDEN_EINVAL);
    CHECK(area[(128 << 10) + 904], 0);
    CHECK(warden_mem_unmap(area, 64 << 10), 0);
    CHECK(area[100], 0);
    CHECK(warden_mem_read(m, 100, buf, 19), 19);
    CHECK(memcmp(buf, "through the mapping", 19), 0);
    /* A revoked view cannot be mapped; the revoker's fresh one can. */
    warden_handle sub = warden_mem_view(m, 0, 4096, 0);
    warden_handle fresh = warden_mem_revoke(sub);
    CHECK(fresh >= 0, 1);
    CHECK(warden_mem_map(sub, 0, 4096, area, WARDEN_MAP_READ), WARDEN_EREVOKED);
    CHECK(warden_mem_map(fresh, 0, 4096, area, WARDEN_MAP_READ), 0);
    CHECK(memcmp(area + 100, "through the mapping", 19), 0);
    /* A revoke while mapped: unmapping the sealed range still works. */
    warden_handle fresher = warden_mem_revoke(fresh);
    CHECK(fresher >= 0, 1);
    CHECK(warden_mem_unmap(area, 4096), 0);
    CHECK(area[100], 0);
    /* malloc still works beside the mapped area. */
    char *heap = malloc(1 << 20);
    CHECK(heap != 0, 1);
    memset(heap, 1, 1 << 20);
    /* At most 256 mappings at once (the process's areas are shared). */
    warden_handle one = warden_mem_create(4096);
    char *many = warden_map_area(257 * 4096);
    int placed = 0;
    while (placed < 300 && !warden_mem_map(one, 0, 4096, many + placed * 4096, WARDEN_MAP_READ)) placed++;
    CHECK(placed, 256);
    CHECK(warden_mem_map(one, 0, 4096, many + placed * 4096, WARDEN_MAP_READ), WARDEN_EQUOTA);
    for (int i = 0; i < placed; i++) CHECK(warden_mem_unmap(many + i * 4096, 4096), 0);
    CHECK(warden_mem_map(one, 0, 4096, many, WARDEN_MAP_READ), 0);
    printf(failures ? "mapped: %d failures\n" : "mapped: ok\n", failures);
    return failures;
}

static warden_handle ro_mapping(volatile char **at) {
    warden_handle m = warden_mem_create(8192);
    warden_mem_write(m, 0, "read only", 9);
    warden_handle ro = warden_mem_view(m, 0, 8192, 1);
    char *area = warden_map_area(8192);
    if (warden_mem_map(ro, 0, 8192, area, WARDEN_MAP_READ) != 0) exit(3);
    *at = area;
    return m;
}

static int store_ro(void) {
    volatile char *at;
    ro_mapping(&at);
    printf("store-ro: mapped, reads \"%c\"\n", at[0]);
    fflush(stdout);
    at[1] = 'X';
    printf("store-ro: the store went through\n");
    return 1;
}

static int host_store(void) {
    volatile char *at;
    warden_handle m = ro_mapping(&at);
    printf("host-store: mapped\n");
    fflush(stdout);
    warden_mem_read(m, 0, (void *)at, 9);
    for (;;) (void)at[0];
}

static int producer(int mib) {
    size_t len = (size_t)mib << 20;
    warden_handle m = warden_mem_create(len);
    uint32_t *area = warden_map_area(len);
    if (m < 0 || !area || warden_mem_map(m, 0, len, area, WARDEN_MAP_READ | WARDEN_MAP_WRITE)) return 2;
    for (size_t i = 0; i < len / 4; i++) area[i] = pattern(i);
    uint64_t sum = sum_of(area, len / 4);
    warden_handle s = warden_service_create();
    warden_name_register("producer", warden_portal_create(s));
    printf("producer: serving %zu bytes, sum %llu\n", len, (unsigned long long)sum);
    fflush(stdout);
    for (;;) {
        char req[16];
        uint64_t call;
        warden_handle h[1];
        size_t nh = 1;
        int64_t n = warden_recv(s, &call, req, sizeof req, h, &nh);
        if (n < 0) return 4;
        if (n == 3 && !memcmp(req, "get", 3)) {
            warden_handle view = warden_mem_view(m, 0, len, 1);
            warden_handle out[1] = {view | WARDEN_MOVE};
            warden_reply(call, &sum, sizeof sum, out, 1);
        } else if (n == 6 && !memcmp(req, "revoke", 6)) {
            warden_reply(call, "ok", 2, NULL, 0);
            warden_mem_unmap(area, len);
            m = warden_mem_revoke(m);
            printf("producer: revoked\n");
            fflush(stdout);
            int ok = m >= 0 && warden_mem_map(m, 0, len, area, WARDEN_MAP_READ) == 0;
            printf("producer: own data %s\n", ok && sum_of(area, len / 4) == sum ? "intact" : "LOST");
            fflush(stdout);
        } else if (n == 4 && !memcmp(req, "quit", 4)) {
            warden_reply(call, "bye", 3, NULL, 0);
            return 0;
        }
    }
}

static int consumer(const char *mode) {
    warden_handle p = warden_name_lookup("producer", 10LL * 1000 * 1000 * 1000);
    uint64_t sum = 0;
    warden_handle h[1];
    size_t nh = 1;
    if (p < 0 || warden_call(p, "get", 3, NULL, 0, &sum, sizeof sum, h, &nh) != 8 || nh != 1) return 2;
    int64_t len = warden_mem_size(h[0]);
    uint32_t *area = warden_map_area((size_t)len);
    CHECK(warden_mem_map(h[0], 0, (uint64_t)len, area, WARDEN_MAP_READ), 0);
    CHECK(sum_of(area, (size_t)len / 4), sum);
    printf("consumer: sum %s\n", failures ? "WRONG" : "ok");
    fflush(stdout);
    if (!strcmp(mode, "exit")) return failures;
    if (!strcmp(mode, "once")) {
        CHECK(warden_mem_unmap(area, (size_t)len), 0);
        return failures;
    }
    char ok[4];
    nh = 0;
    if (!strcmp(mode, "loop")) warden_call(p, "revoke", 6, NULL, 0, ok, sizeof ok, NULL, &nh);
    printf("consumer: looping\n");
    fflush(stdout);
    for (;;) sum_of(area, (size_t)len / 4);
}

static int leave(void) {
    warden_handle m = warden_mem_create(64 << 10);
    char *area = warden_map_area(64 << 10);
    if (warden_mem_map(m, 0, 64 << 10, area, WARDEN_MAP_READ | WARDEN_MAP_WRITE)) return 2;
    memset(area, 'S', 64 << 10);
    printf("leave: %p\n", (void *)area);
    return 0;
}

static int peek(size_t kib) {
    char *area = warden_map_area(kib << 10);
    size_t dirty = 0;
    for (size_t i = 0; i < (kib << 10); i++) dirty += area[i] != 0;
    printf("peek: %p %s\n", (void *)area, dirty ? "LEAK" : "clean");
    return dirty != 0;
}

static char plain[8192] __attribute__((aligned(4096)));

static int powner(void) {
    size_t len = 1 << 20;
    warden_handle m = warden_mem_create(len);
    uint32_t *area = warden_map_area(len);
    if (warden_mem_map(m, 0, len, area, WARDEN_MAP_READ | WARDEN_MAP_WRITE)) return 2;
    for (size_t i = 0; i < len / 4; i++) area[i] = pattern(i);
    warden_handle permits[2] = {warden_permit_grant(area, len, 0), warden_permit_grant(plain, 4096, 1)};
    warden_handle s = warden_service_create();
    warden_name_register("powner", warden_portal_create(s));
    for (;;) {
        char req[8];
        uint64_t call;
        size_t nh = 0;
        int64_t n = warden_recv(s, &call, req, sizeof req, NULL, &nh);
        if (n < 0) return 0;
        if (n == 3 && !memcmp(req, "get", 3)) {
            warden_reply(call, "ok", 2, permits, 2);
        } else if (n == 6 && !memcmp(req, "revoke", 6)) {
            warden_reply(call, "ok", 2, NULL, 0);
            printf("powner: revoke %s\n", warden_strerror(warden_permit_revoke(permits[0])));
            printf("powner: own mapping %s\n", sum_of(area, len / 4) == sum_of(area, len / 4) && area[9] == pattern(9) ? "intact" : "LOST");
            fflush(stdout);
        }
    }
}

static int preader(void) {
    warden_handle o = warden_name_lookup("powner", 10LL * 1000 * 1000 * 1000);
    warden_handle h[2];
    size_t nh = 2;
    char ok[4];
    if (o < 0 || warden_call(o, "get", 3, NULL, 0, ok, sizeof ok, h, &nh) != 2 || nh != 2) return 2;
    size_t len = 1 << 20;
    uint32_t *area = warden_map_area(len);
    CHECK(warden_permit_map(h[1], 0, 4096, area, WARDEN_MAP_READ), WARDEN_ENOTSUP);
    CHECK(warden_permit_map(h[0], 0, len, area, WARDEN_MAP_READ | WARDEN_MAP_WRITE), WARDEN_EDENIED);
    CHECK(warden_permit_map(h[0], 100, 4096, area, WARDEN_MAP_READ), WARDEN_EINVAL);
    CHECK(warden_permit_map(h[0], 0, len + 4096, area, WARDEN_MAP_READ), WARDEN_ERANGE);
    CHECK(warden_permit_map(h[0], 0, len, area, WARDEN_MAP_READ), 0);
    uint64_t want = 0;
    for (size_t i = 0; i < len / 4; i++) want += pattern(i);
    CHECK(sum_of(area, len / 4), want);
    printf("preader: %s\n", failures ? "WRONG" : "sum ok");
    fflush(stdout);
    nh = 0;
    warden_call(o, "revoke", 6, NULL, 0, ok, sizeof ok, NULL, &nh);
    for (;;) sum_of(area, len / 4);
}

static void wait_line(const char *marker) {
    printf("%s\n", marker);
    fflush(stdout);
    char line[8];
    if (!fgets(line, sizeof line, stdin)) exit(5);
}

static int cycles(int n) {
    size_t len = 1 << 20;
    warden_handle m = warden_mem_create(len);
    char *area = warden_map_area(len);
    wait_line("cycles: warm");
    for (int i = 0; i < n; i++) {
        if (warden_mem_map(m, 0, len, area, WARDEN_MAP_READ | WARDEN_MAP_WRITE)) return 2;
        area[(size_t)i * 4096 % len] = 1;
        if (warden_mem_unmap(area, len)) return 3;
        if (i % 100 == 0) {
            /* A fresh object, every page written, then revoked while
             * mapped: an object or a page left behind would show. */
            warden_close(m);
            m = warden_mem_create(len);
            if (m < 0 || warden_mem_map(m, 0, len, area, WARDEN_MAP_READ | WARDEN_MAP_WRITE)) return 4;
            memset(area, i, len);
            warden_handle v = warden_mem_view(m, 0, len, 0);
            if (warden_mem_unmap(area, len) || warden_mem_map(v, 0, len, area, WARDEN_MAP_READ)) return 5;
            /* Revokes `m` too (same bytes): go on with the fresh handle. */
            warden_handle again = warden_mem_revoke(v);
            if (again < 0 || warden_mem_unmap(area, len)) return 6;
            warden_close(v);
            warden_close(m);
            m = again;
        }
    }
    wait_line("cycles: done");
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc >= 2 ? argv[1] : "";
    const char *arg = argc >= 3 ? argv[2] : "";
    if (!strcmp(mode, "self")) return self_checks();
    if (!strcmp(mode, "store-ro")) return store_ro();
    if (!strcmp(mode, "host-store")) return host_store();
    if (!strcmp(mode, "producer")) return producer(atoi(arg));
    if (!strcmp(mode, "consumer")) return consumer(arg);
    if (!strcmp(mode, "leave")) return leave();
    if (!strcmp(mode, "peek")) return peek((size_t)atoi(arg));
    if (!strcmp(mode, "powner")) return powner();
    if (!strcmp(mode, "preader")) return preader();
    if (!strcmp(mode, "cycles")) return cycles(atoi(arg));
    return 64;
}
