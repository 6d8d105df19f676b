/* Guest-timed primitive costs, one "<name> <ns per op>" line each.
 *
 *   prims [N] [local]
 *                 N iterations per measure (default 1,000,000); with
 *                 "local", only the measures that use no Warden import (the
 *                 program then also runs under plain Wasmtime). The permit
 *                 measures run in a child spawned from the module granted
 *                 as "self", which is given the permit:
 *   prims user N  (that child) time the permit it was granted
 *
 *   call          an indirect call to an empty function through a function
 *                 pointer (seed 000's null method invocation: a dispatch)
 *   alloc         malloc(16) then free, in batches of 1,000 (object creation;
 *                 there is no collector, so the free is part of the cost)
 *   read, write   a 4-byte field in the task's own memory
 *   permit_read, permit_write
 *                 the same 4 bytes through a permit on that memory, by
 *                 another task holding it (handle, permit check, copy)
 *   mem_read, mem_write
 *                 4 bytes of a memory object
 *   mapped_read, mapped_write
 *                 4 bytes of a memory object the child mapped into its own
 *                 memory: a plain load and store
 *   permit_cycle  grant, revoke and close a permit (Luna: allocate, revoke
 *                 and collect a permit)
 * Loop overhead is included, as in the papers' tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "warden.h"

__attribute__((noinline)) static void nop(void) { __asm__ volatile(""); }
static void (*volatile target)(void) = nop;
static volatile int field;
static int cell[4];

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void report(const char *name, double t0, long n) {
    printf("%s %.2f\n", name, (now_ns() - t0) / n);
}

/* The child: reads and writes its parent's field through the permit, and
 * its parent's memory object through a mapping of it. */
static int user(long n) {
    warden_handle p = warden_task_granted(0), obj = warden_task_granted(1);
    volatile int *mapped = warden_map_area(4096);
    if (warden_mem_map(obj, 0, 4096, (void *)mapped, WARDEN_MAP_READ | WARDEN_MAP_WRITE)) return 2;
    int v = 0, sum = 0;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) sum += *mapped;
    report("mapped_read", t0, n);
    t0 = now_ns();
    for (long i = 0; i < n; i++) *mapped = (int)i;
    report("mapped_write", t0, n);
    t0 = now_ns();
    for (long i = 0; i < n; i++) warden_permit_read(p, 0, &v, 4);
    report("permit_read", t0, n);
    t0 = now_ns();
    for (long i = 0; i < n; i++) warden_permit_write(p, 0, &v, 4);
    report("permit_write", t0, n);
    return sum == 12345 ? 3 : 0;
}

/* Spawns the child that uses permit p and object m; its exit status. */
static int spawn_user(warden_handle p, warden_handle m, long n) {
    char arg[32];
    snprintf(arg, sizeof arg, "%ld", n);
    const char *args[] = {"user", arg};
    warden_budget b = {16 << 20, 0, 1};
    warden_handle module = warden_module_lookup("self");
    warden_handle grant[2] = {p, m};
    warden_handle t = module < 0 ? module : warden_task_spawn(module, args, 2, &b, grant, 2);
    int32_t status = -1;
    if (t < 0 || warden_task_wait(t, -1, &status) < 0) {
        printf("permit user: %s\n", warden_strerror(t < 0 ? t : status));
        return 1;
    }
    return status;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "user")) return user(atol(argv[2]));
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    if (n < 1000) n = 1000;
    double t0;

    t0 = now_ns();
    for (long i = 0; i < n; i++) target();
    report("call", t0, n);

    static void *batch[1000];
    t0 = now_ns();
    for (long i = 0; i < n / 1000; i++) {
        for (int j = 0; j < 1000; j++) batch[j] = malloc(16);
        for (int j = 0; j < 1000; j++) free(batch[j]);
    }
    report("alloc", t0, n / 1000 * 1000);

    int sum = 0;
    t0 = now_ns();
    for (long i = 0; i < n; i++) sum += field;
    report("read", t0, n);
    t0 = now_ns();
    for (long i = 0; i < n; i++) field = (int)i;
    report("write", t0, n);
    if (argc > 2 && !strcmp(argv[2], "local")) return sum == 12345 ? 3 : 0;

    warden_handle p = warden_permit_grant(cell, sizeof cell, 1);
    warden_handle m = warden_mem_create(4096);
    if (p < 0 || m < 0) { printf("setup failed: %d %d\n", p, m); return 1; }
    fflush(stdout);
    if (spawn_user(p, m, n) != 0) return 1;
    int v = 0;
    t0 = now_ns();
    for (long i = 0; i < n; i++) warden_mem_read(m, 0, &v, 4);
    report("mem_read", t0, n);
    t0 = now_ns();
    for (long i = 0; i < n; i++) warden_mem_write(m, 0, &v, 4);
    report("mem_write", t0, n);

    long cycles = n / 10;
    t0 = now_ns();
    for (long i = 0; i < cycles; i++) {
        warden_handle q = warden_permit_grant(cell, sizeof cell, 0);
        warden_permit_revoke(q);
        warden_close(q);
    }
    report("permit_cycle", t0, cycles);
    return sum == 12345 ? 3 : 0;
}
