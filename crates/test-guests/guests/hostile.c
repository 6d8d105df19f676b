/* Attacks on the host, one per mode, and the bystander that runs beside
 * them. Each attack prints one line saying how far it got and how it was
 * stopped, and exits 0 if the host refused it with an error code.
 *
 *   hostile bystander ROUNDS   ROUNDS of work and 1 ms naps; prints
 *                              "bystander ok <checksum>"
 *   hostile stdout-flood MIB   MIB MiB to stdout with no newline
 *   hostile stderr-lines N     N short lines to stderr
 *   hostile bind-flood N       N namespace bindings with 256-byte names
 *   hostile register-flood N   N names "flood.<i>" registered
 *   hostile poll-flood N       one poll_oneoff with N subscriptions, then
 *                              a plain 1 ms sleep
 *   hostile malloc-bomb        malloc 1 MiB blocks until refused
 *   hostile portal-flood       portals until the handle table is full
 *   hostile memobj-bomb        huge memory objects, then 1 MiB ones until
 *                              refused
 *   hostile memobj-huge        memory objects of 1 TiB and 64 GiB, once each
 *   hostile grow-touch MIB     grow its memory a page at a time, touching
 *                              every 4 KiB of each, until refused or at
 *                              MIB MiB
 *   hostile hold MIB [NAME]    grow-touch to MIB MiB or until refused,
 *                              print "hold: N pages", register NAME (if
 *                              given), then sleep for ever
 *   hostile wait-grow MIB [NAME]  print "wait-grow: ready", read a line
 *                              from stdin (or look NAME up, waiting for
 *                              it), then grow-touch MIB
 *   hostile parent-of-hold MIB spawn a child holding MIB MiB; on its
 *                              memory event print "parent: memory event"
 *                              and kill it
 *   hostile spawn-bomb [root]  spawn copies of itself, each doing the same,
 *                              until refused; the root then returns, the
 *                              others sleep
 *   hostile spawn-wide N       print "spawn-wide: ready", read a line
 *                              from stdin, then spawn N children in
 *                              mode asleep (closing each handle),
 *                              print how many, read another line and
 *                              exit (the children die with it)
 *   hostile args-bomb          spawn a child with 64 MiB of arguments
 *   hostile fd-flood N         open /data/file N times, never closing
 *   hostile wild               every host function with wild pointers,
 *                              huge lengths and forged handles
 *   hostile call-self          call a portal to its own service (nobody
 *                              could ever answer), with a deadline
 *   hostile random-flood MIB   ask random_get for MIB MiB at address 16,
 *                              far more than its memory holds
 *   hostile sleep              sleep for ever
 *   hostile asleep             print "asleep" to stdout, then sleep for
 *                              ever */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wasi/api.h>
#include "warden.h"

static uint64_t checksum(long rounds) {
    uint64_t x = 88172645463325252ull;
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < 100000; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; }
        usleep(1000);
    }
    return x;
}

static long arg(int argc, char **argv, long dflt) { return argc > 2 ? atol(argv[2]) : dflt; }

static int done(const char *what, long count, int32_t err) {
    printf("%s: %ld, then %s\n", what, count, err < 0 ? warden_strerror(err) : "no error");
    return err < 0 ? 0 : 1;
}

static int stdout_flood(long mib) {
    static char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    for (long i = 0; i < mib * 16; i++) fwrite(chunk, 1, sizeof chunk, stdout);
    printf("\nstdout-flood: %ld MiB written\n", mib);
    return 0;
}

static int bind_flood(long n) {
    warden_handle p = warden_portal_create(warden_service_create());
    char name[257];
    memset(name, 'n', 256);
    name[256] = 0;
    long i = 0;
    int32_t r = 0;
    for (; i < n; i++) {
        snprintf(name, 16, "%015ld", i);
        name[15] = 'n';
        if ((r = warden_namespace_bind(name, p)) < 0) break;
    }
    return done("bind-flood", i, r);
}

static int register_flood(long n) {
    warden_handle p = warden_portal_create(warden_service_create());
    char name[64];
    long i = 0;
    int32_t r = 0;
    for (; i < n; i++) {
        snprintf(name, sizeof name, "flood.%ld", i);
        if ((r = warden_name_register(name, p)) < 0) break;
    }
    return done("register-flood", i, r);
}

static int poll_flood(long n) {
    __wasi_subscription_t *subs = calloc(n, sizeof *subs);
    __wasi_event_t *events = calloc(n, sizeof *events);
    if (!subs || !events) { printf("poll-flood: no memory for %ld\n", n); return 1; }
    for (long i = 0; i < n; i++) {
        subs[i].userdata = i;
        subs[i].u.tag = __WASI_EVENTTYPE_CLOCK;
        subs[i].u.u.clock.id = __WASI_CLOCKID_MONOTONIC;
        subs[i].u.u.clock.timeout = 1000;
    }
    __wasi_size_t got = 0;
    __wasi_errno_t big = __wasi_poll_oneoff(subs, events, n, &got);
    __wasi_errno_t small = __wasi_poll_oneoff(subs, events, 2, &got);
    printf("poll-flood: %ld subscriptions: errno %d; then 2: errno %d, %u events\n", n, big, small,
           (unsigned)got);
    return small != 0;
}

static int malloc_bomb(void) {
    long n = 0;
    for (char *volatile p; (p = malloc(1 << 20)); n++) p[n % (1 << 20)] = 1;
    printf("malloc-bomb: %ld MiB, then NULL\n", n);
    return 0;
}

static int portal_flood(void) {
    warden_handle s = warden_service_create();
    long i = 0;
    int32_t r;
    while ((r = warden_portal_create(s)) >= 0) i++;
    return done("portal-flood", i, r);
}

static int memobj_bomb(void) {
    int32_t huge = warden_mem_create(~0ull);
    int32_t big = warden_mem_create(1ull << 40);
    long i = 0;
    int32_t r;
    while ((r = warden_mem_create(1 << 20)) >= 0) i++;
    printf("memobj-bomb: 2^64-1: %s, 2^40: %s; ", warden_strerror(huge), warden_strerror(big));
    return done("1 MiB objects", i, r) || huge >= 0 || big >= 0;
}

static int memobj_huge(void) {
    int32_t tib = warden_mem_create(1ull << 40);
    int32_t big = warden_mem_create(64ull << 30);
    printf("memobj-huge: 1 TiB: %s, 64 GiB: %s\n", tib < 0 ? warden_strerror(tib) : "created",
           big < 0 ? warden_strerror(big) : "created");
    return 0;
}

static long grow_pages(long max_mib) {
    long pages = 0;
    while (pages < max_mib * 16) {
        size_t old = __builtin_wasm_memory_grow(0, 1);
        if (old == (size_t)-1) break;
        volatile unsigned char *p = (unsigned char *)(old * 65536);
        for (int off = 0; off < 65536; off += 4096) p[off] = 1;
        pages++;
    }
    return pages;
}

static int grow_touch(long max_mib) {
    long pages = grow_pages(max_mib);
    printf("grow-touch: %ld pages, %s\n", pages, pages < max_mib * 16 ? "then refused" : "all");
    return 0;
}

static int hold(long max_mib, const char *name) {
    printf("hold: %ld pages\n", grow_pages(max_mib));
    fflush(stdout);
    if (name) warden_name_register(name, warden_portal_create(warden_service_create()));
    for (;;) sleep(1000);
}

static int wait_grow(long max_mib, const char *name) {
    char line[16];
    printf("wait-grow: ready\n");
    fflush(stdout);
    if (name ? warden_name_lookup(name, -1) < 0 : !fgets(line, sizeof line, stdin)) return 1;
    return grow_touch(max_mib);
}

static int parent_of_hold(long mib) {
    char n[24];
    snprintf(n, sizeof n, "%ld", mib);
    const char *argv[] = {"hold", n};
    warden_budget b = {(uint64_t)(mib + 4) << 20, 0, 1};
    warden_handle child = warden_task_spawn(warden_module_lookup("self"), argv, 2, &b, NULL, 0);
    if (child < 0) return done("parent-of-hold", 0, child);
    warden_event ev;
    int32_t r = warden_task_event(child, -1, &ev);
    if (r < 0) return done("parent-of-hold: event", 0, r);
    printf("parent: %s event\n", ev.kind == WARDEN_EVENT_MEMORY ? "memory" : "other");
    fflush(stdout);
    warden_task_kill(child);
    for (;;) sleep(1000);
}

static int spawn_bomb(int root) {
    warden_handle m = warden_module_lookup("self");
    const char *argv[] = {"spawn-bomb"};
    warden_budget b = {1 << 20, 0, 1};
    long i = 0;
    int32_t r;
    while ((r = warden_task_spawn(m, argv, 1, &b, NULL, 0)) >= 0) i++;
    if (root) return done("spawn-bomb", i, r);
    for (;;) sleep(1000);
}

static int spawn_wide(long n) {
    char line[16];
    printf("spawn-wide: ready\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    warden_handle m = warden_module_lookup("self");
    const char *argv[] = {"asleep"};
    warden_budget b = {1 << 20, 0, 1};
    long i = 0;
    int32_t r = 0;
    for (; i < n && (r = warden_task_spawn(m, argv, 1, &b, NULL, 0)) >= 0; i++) warden_close(r);
    printf("spawn-wide: %ld spawned\n", i);
    fflush(stdout);
    /* Then until told: the children start meanwhile. */
    if (!fgets(line, sizeof line, stdin)) return 1;
    return i == n ? 0 : 1;
}

static int args_bomb(void) {
    enum { N = 16384, LEN = 4096 };
    static const char *argv[N];
    char *s = malloc(LEN);
    if (!s) return 1;
    memset(s, 'a', LEN - 1);
    s[LEN - 1] = 0;
    for (int i = 0; i < N; i++) argv[i] = s;
    warden_budget b = {4 << 20, 0, 1};
    int32_t r = warden_task_spawn(warden_module_lookup("self"), argv, N, &b, NULL, 0);
    printf("args-bomb: 64 MiB of arguments: %s\n", r < 0 ? warden_strerror(r) : "spawned");
    if (r >= 0) { int32_t st; warden_task_wait(r, -1, &st); }
    return 0;
}

static int fd_flood(long n) {
    long i = 0;
    while (i < n && open("/data/file", O_RDONLY) >= 0) i++;
    printf("fd-flood: %ld open\n", i);
    return 0;
}

/* Every `warden` function once with a wild pointer or a huge length and
 * once with a forged handle; each must fail with an error code. */
static int wild(void) {
    void *w = (void *)(uintptr_t)0xfffffff0u;
    char buf[64];
    uint32_t nh = 4;
    uint64_t id;
    const int32_t forged = 0x3ffffff;
    int64_t r[] = {
        __warden_close(forged), __warden_dup(forged), __warden_portal_create(forged),
        __warden_call(forged, buf, 1, NULL, 0, buf, 64, NULL, &nh),
        __warden_call(0, w, 0xffffffffu, w, 0xffffffffu, w, 0xffffffffu, w, w),
        __warden_call_timeout(forged, w, 16, NULL, 0, buf, 64, NULL, &nh, 1000),
        __warden_recv(forged, &id, buf, 64, NULL, &nh), __warden_recv(0, w, w, 0xffffffffu, w, w),
        __warden_reply(~0ull, w, 0xffffffffu, w, 0xffffffffu), __warden_reply(12345, buf, 1, NULL, 0),
        __warden_name_register(w, 0xffffffffu, forged), __warden_name_lookup(w, 0xffffffffu, 0),
        __warden_mem_create(~0ull), __warden_mem_view(forged, ~0ull, ~0ull, 0),
        __warden_mem_read(forged, 0, buf, 1), __warden_mem_write(forged, ~0ull, w, 0xffffffffu),
        __warden_mem_size(forged), __warden_mem_revoke(forged),
        __warden_permit_grant(w, 0xffffffffu, 1), __warden_permit_read(forged, 0, w, 16),
        __warden_permit_write(forged, ~0ull, buf, 1), __warden_permit_revoke(forged),
        __warden_module_lookup(w, 0xffffffffu), __warden_task_spawn(forged, w, 0xffffffffu, w, w, 0xffffffffu),
        __warden_task_kill(forged), __warden_task_wait(forged, 0, w), __warden_task_suspend(forged),
        __warden_task_resume(forged), __warden_task_event(forged, 0, w), __warden_task_raise(forged, ~0ull, ~0ull),
        __warden_task_granted(0xffffffffu), __warden_namespace_bind(w, 0xffffffffu, forged),
        __warden_tcp_listen(w, 0xffffffffu), __warden_tcp_accept(forged, 0),
        __warden_tcp_connect(w, 0xffffffffu, 0), __warden_sock_send(forged, w, 0xffffffffu, 0),
        __warden_sock_recv(forged, w, 0xffffffffu, 0), __warden_sock_shutdown(forged),
        __warden_sock_addr(forged, 1, w, 0xffffffffu), __warden_poll((warden_pollfd *)w, 0xffffffffu, 0),
        __warden_poll((warden_pollfd *)w, 4, 0),
    };
    int n = sizeof r / sizeof r[0], refused = 0;
    for (int i = 0; i < n; i++) {
        if (r[i] < 0) refused++;
        else printf("wild: call %d answered %lld\n", i, (long long)r[i]);
    }
    printf("wild: %d calls, %d refused\n", n, refused);
    return refused != n;
}

static int random_flood(long mib) {
    __wasi_errno_t e = __wasi_random_get((uint8_t *)16, (__wasi_size_t)(mib << 20));
    return done("random-flood", mib, e);
}

static int call_self(void) {
    warden_handle p = warden_portal_create(warden_service_create());
    char buf[8];
    int64_t r = warden_call_timeout(p, "hi", 2, NULL, 0, buf, sizeof buf, NULL, NULL, 50000000);
    printf("call-self: %s\n", warden_strerror((int32_t)r));
    return r != WARDEN_EDEADLOCK && r != WARDEN_ETIMEOUT;
}

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "";
    if (!strcmp(m, "bystander")) {
        printf("bystander ok %llu\n", (unsigned long long)checksum(arg(argc, argv, 200)));
        return 0;
    }
    if (!strcmp(m, "stdout-flood")) return stdout_flood(arg(argc, argv, 16));
    if (!strcmp(m, "stderr-lines")) {
        for (long i = 0, n = arg(argc, argv, 1000); i < n; i++) fprintf(stderr, "line %ld\n", i);
        printf("stderr-lines: done\n");
        return 0;
    }
    if (!strcmp(m, "bind-flood")) return bind_flood(arg(argc, argv, 1000));
    if (!strcmp(m, "register-flood")) return register_flood(arg(argc, argv, 1000));
    if (!strcmp(m, "poll-flood")) return poll_flood(arg(argc, argv, 1000));
    if (!strcmp(m, "malloc-bomb")) return malloc_bomb();
    if (!strcmp(m, "portal-flood")) return portal_flood();
    if (!strcmp(m, "memobj-bomb")) return memobj_bomb();
    if (!strcmp(m, "memobj-huge")) return memobj_huge();
    if (!strcmp(m, "grow-touch")) return grow_touch(arg(argc, argv, 4096));
    if (!strcmp(m, "hold")) return hold(arg(argc, argv, 4096), argc > 3 ? argv[3] : NULL);
    if (!strcmp(m, "wait-grow")) return wait_grow(arg(argc, argv, 64), argc > 3 ? argv[3] : NULL);
    if (!strcmp(m, "parent-of-hold")) return parent_of_hold(arg(argc, argv, 64));
    if (!strcmp(m, "spawn-bomb")) return spawn_bomb(argc > 2);
    if (!strcmp(m, "spawn-wide")) return spawn_wide(arg(argc, argv, 1000));
    if (!strcmp(m, "args-bomb")) return args_bomb();
    if (!strcmp(m, "fd-flood")) return fd_flood(arg(argc, argv, 100));
    if (!strcmp(m, "wild")) return wild();
    if (!strcmp(m, "call-self")) return call_self();
    if (!strcmp(m, "random-flood")) return random_flood(arg(argc, argv, 60));
    if (!strcmp(m, "sleep")) for (;;) sleep(1000);
    if (!strcmp(m, "asleep")) {
        printf("asleep\n");
        fflush(stdout);
        for (;;) sleep(1000);
    }
    fprintf(stderr, "hostile: unknown mode %s\n", m);
    return 2;
}
