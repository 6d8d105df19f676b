/* Calls every `warden` host function and the WASI calls a task can make
 * with random arguments: wild and boundary pointers, huge lengths and
 * counts, forged, stale and wrong-kind handles and descriptors, random
 * paths under the preopened directory /fz (if any), alongside real
 * objects. Nothing may trap or hang; prints the count.
 *
 *   fuzz SEED ITERATIONS
 *
 * The same seed makes the same sequence of calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wasi/api.h>
#include "warden.h"

static uint64_t state;
static uint32_t rnd(void) {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return (uint32_t)state;
}

#define SCRATCH 4096
static _Alignas(16) char scratch[SCRATCH];
static warden_handle live[64];
static int nlive;

static void keep(int32_t h) { if (h >= 0) live[nlive++ % 64] = h; }

/* A handle argument: real, stale, forged, flagged or negative. */
static int32_t handle(void) {
    switch (rnd() % 6) {
    case 0: case 1: case 2: return nlive ? live[rnd() % (nlive < 64 ? nlive : 64)] : 0;
    case 3: return (int32_t)rnd();
    case 4: return (nlive ? live[rnd() % (nlive < 64 ? nlive : 64)] : 0) | WARDEN_MOVE;
    default: return -(int32_t)(rnd() % 20);
    }
}

/* A pointer: inside the scratch buffer, at the end of memory, or wild. */
static void *ptr(void) {
    uint32_t top = (uint32_t)__builtin_wasm_memory_size(0) * 65536u;
    switch (rnd() % 4) {
    case 0: case 1: return scratch + rnd() % SCRATCH;
    case 2: return (void *)(uintptr_t)(top - rnd() % 64);
    default: return (void *)(uintptr_t)(0x80000000u + rnd());
    }
}

/* A length: fits the scratch buffer, or is huge. */
static uint32_t len(void) {
    switch (rnd() % 4) {
    case 0: case 1: return rnd() % 64;
    case 2: return rnd() % SCRATCH;
    default: return rnd();
    }
}

static uint64_t off(void) { return rnd() % 3 ? rnd() % 128 : ((uint64_t)rnd() << 32 | rnd()); }

/* Lengths that stay inside `scratch` when the pointer is in it, so the
 * fuzzer never scribbles over its own state. */
static void *buf(uint32_t *n) {
    char *p = ptr();
    if (p >= scratch && p < scratch + SCRATCH && *n > (uint32_t)(scratch + SCRATCH - p))
        *n = (uint32_t)(scratch + SCRATCH - p);
    return p;
}

/* Where the host writes `size` bytes, for WASI calls: inside scratch.
 * (Wasmtime's WASI traps a task that hands it a pointer outside its
 * memory, a misaligned one or an undefined enum value, so those would
 * only end the run early; WASI arguments stay in range, `warden` calls
 * get wild ones and must return WARDEN_EBADPTR.) */
static void *out(uint32_t size) { return scratch + ((rnd() % (SCRATCH - size)) & ~7u); }

/* A buffer of `*n` bytes inside scratch, for WASI calls. */
static void *inside(uint32_t *n) {
    *n %= 1024;
    return scratch + 3072 + rnd() % (SCRATCH - 3072 - *n + 1);
}

/* A descriptor: stdio (reading only), the preopen, a random small one or
 * a huge one. Never closes stdout, which the result is printed on. */
static int32_t fd(int writable) {
    switch (rnd() % 5) {
    case 0: return writable ? 3 + rnd() % 8 : (int32_t)(rnd() % 3);
    case 1: case 2: return 3 + rnd() % 8;
    case 3: return (int32_t)rnd();
    default: return 3;
    }
}

/* A path under the preopen: a few random names, dots and slashes. */
static char *path(uint32_t *n) {
    static const char *parts[] = {"a", "b", "..", ".", "", "/", "dir", "f.txt", "\xff"};
    char *p = scratch + 2048;
    uint32_t k = 0, count = 1 + rnd() % 4;
    for (uint32_t i = 0; i < count && k < 200; i++) {
        const char *part = parts[rnd() % 9];
        while (*part && k < 200) p[k++] = *part++;
        if (i + 1 < count) p[k++] = '/';
    }
    *n = k;
    return p;
}

/* I/O vectors in scratch whose buffers lie in scratch (or are wild). */
static void *iovs(uint32_t *count) {
    __wasi_iovec_t *v = (__wasi_iovec_t *)(scratch + 1024);
    *count = rnd() % 9 ? rnd() % 8 : rnd();
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t n = rnd() % 256;
        v[i].buf = (uint8_t *)(scratch + 3072 + rnd() % 768);
        v[i].buf_len = n % (uint32_t)(scratch + SCRATCH - (char *)v[i].buf + 1);
    }
    return v;
}

/* Subscriptions for poll_oneoff: short clocks and descriptors. */
static void *subscriptions(uint32_t *count) {
    __wasi_subscription_t *s = (__wasi_subscription_t *)scratch;
    *count = rnd() % 9 ? 1 + rnd() % 8 : rnd();
    for (uint32_t i = 0; i < 8; i++) {
        s[i].userdata = i;
        s[i].u.tag = rnd() % 3;
        if (s[i].u.tag == __WASI_EVENTTYPE_CLOCK) {
            s[i].u.u.clock.id = rnd() % 4;
            s[i].u.u.clock.timeout = rnd() % 100000;
            s[i].u.u.clock.precision = rnd();
            s[i].u.u.clock.flags = rnd() % 2;
        } else {
            s[i].u.u.fd_read.file_descriptor = fd(0);
        }
    }
    return s;
}

/* One WASI call chosen by `which`; its errno (0 for success). */
static int64_t wasi(uint32_t which) {
    uint32_t n, m, c;
    char *p, *q;
    switch (which) {
    case 0: c = 0; return __wasi_fd_write(fd(1), iovs(&c), c, (__wasi_size_t *)(scratch + 3000));
    case 1: c = 0; return __wasi_fd_read(fd(0), iovs(&c), c, (__wasi_size_t *)(scratch + 3000));
    case 2: c = 0; return __wasi_fd_pread(fd(1), iovs(&c), c, off(), (__wasi_size_t *)(scratch + 3000));
    case 3: c = 0; return __wasi_fd_pwrite(fd(1), (const __wasi_ciovec_t *)iovs(&c), c, off(), (__wasi_size_t *)(scratch + 3000));
    case 4: return __wasi_fd_seek(fd(1), (int64_t)off(), rnd() % 3, (__wasi_filesize_t *)(scratch + 3008));
    case 5: return __wasi_fd_fdstat_get(fd(0), (__wasi_fdstat_t *)out(24));
    case 6: return __wasi_fd_filestat_get(fd(0), (__wasi_filestat_t *)out(64));
    case 7: return __wasi_fd_prestat_get(fd(0), (__wasi_prestat_t *)out(8));
    case 8: n = len(); p = inside(&n); return __wasi_fd_prestat_dir_name(fd(0), (uint8_t *)p, n);
    case 9: n = len(); p = inside(&n); return __wasi_fd_readdir(fd(1), (uint8_t *)p, n, off(), (__wasi_size_t *)(scratch + 3000));
    case 10: return __wasi_fd_close(fd(1));
    case 11: return __wasi_fd_renumber(fd(1), fd(1));
    case 12: p = path(&n);
        return __wasi_path_open(fd(0), rnd() % 2, (const char *)p, rnd() % 16, rnd() & 0x1fffffff,
                                rnd() & 0x1fffffff, rnd() % 32, (__wasi_fd_t *)(scratch + 3016));
    case 13: p = path(&n); return __wasi_path_create_directory(fd(1), p);
    case 14: p = path(&n); return __wasi_path_unlink_file(fd(1), p);
    case 15: p = path(&n); return __wasi_path_remove_directory(fd(1), p);
    case 16: p = path(&n); return __wasi_path_filestat_get(fd(0), rnd() % 2, p, (__wasi_filestat_t *)(scratch + 2560));
    case 17: p = path(&n); q = scratch + 2304; memcpy(q, p, n + 1 < 200 ? n + 1 : 200);
        return __wasi_path_rename(fd(1), p, fd(1), q);
    case 18: p = path(&n); m = len(); return __wasi_path_readlink(fd(1), p, (uint8_t *)inside(&m), m, (__wasi_size_t *)(scratch + 3000));
    case 19: p = path(&n); q = scratch + 2304; memcpy(q, p, n + 1 < 200 ? n + 1 : 200);
        return __wasi_path_symlink(q, fd(1), p);
    case 20: n = len(); p = inside(&n); return __wasi_random_get((uint8_t *)p, n);
    case 21: return __wasi_clock_time_get(rnd() % 4, rnd(), (__wasi_timestamp_t *)out(8));
    case 22: return __wasi_clock_res_get(rnd() % 4, (__wasi_timestamp_t *)out(8));
    case 23: return __wasi_args_sizes_get((__wasi_size_t *)out(4), (__wasi_size_t *)out(4));
    case 24: return __wasi_environ_sizes_get((__wasi_size_t *)out(4), (__wasi_size_t *)out(4));
    case 25: return __wasi_args_get((uint8_t **)(scratch + 2048), (uint8_t *)(scratch + 2304));
    case 26: c = 0; p = subscriptions(&c);
        return __wasi_poll_oneoff((const __wasi_subscription_t *)p, (__wasi_event_t *)(scratch + 512), c, (__wasi_size_t *)(scratch + 3000));
    case 27: return __wasi_sched_yield();
    case 28: return __wasi_fd_filestat_set_size(fd(1), off());
    case 29: return __wasi_fd_advise(fd(1), off(), off(), rnd() % 6);
    default: return __wasi_fd_sync(fd(1));
    }
}

/* The `warden` calls fuzz.c's main switch does not reach: tasks, names
 * for children, deadlines; handles forged or real. */
static int64_t more(uint32_t which) {
    uint32_t n = len(), n2 = len();
    switch (which) {
    case 0: return __warden_module_lookup(buf(&n), n % 300);
    case 1: return __warden_task_spawn(handle(), (const char *const *)ptr(), rnd() % 4, (const warden_budget *)ptr(),
                                       (const int32_t *)scratch, rnd() % 3);
    case 2: return __warden_task_kill(handle());
    case 3: return __warden_task_wait(handle(), rnd() % 2 ? 0 : 1000, (int32_t *)out(4));
    case 4: return __warden_task_suspend(handle());
    case 5: return __warden_task_resume(handle());
    case 6: return __warden_task_event(handle(), 0, (warden_event *)out(16));
    case 7: return __warden_task_raise(handle(), off(), off());
    case 8: return __warden_task_granted(rnd() % 3 ? rnd() % 4 : rnd());
    case 9: return __warden_namespace_bind(buf(&n), n % 300, handle());
    case 10: {
        const char *a = rnd() % 2 ? "127.0.0.1:0" : "[::1]:0";
        int64_t h = rnd() % 3 ? __warden_tcp_listen(a, a[0] == '[' ? 7 : 11) : __warden_tcp_listen(buf(&n), n % 300);
        keep((int32_t)h);
        return h;
    }
    case 11: { int64_t h = __warden_tcp_accept(handle(), rnd() % 2 ? 0 : 1000); keep((int32_t)h); return h; }
    case 12: {
        char a[64];
        int32_t k = __warden_sock_addr(handle(), 0, a, sizeof a);
        int64_t h = k > 0 ? __warden_tcp_connect(a, k, rnd() % 2 ? 0 : 100000)
                          : __warden_tcp_connect(buf(&n), n % 300, 0);
        keep((int32_t)h);
        return h;
    }
    case 13: return __warden_sock_send(handle(), ptr(), n, rnd() % 2 ? 0 : 1000);
    case 14: return __warden_sock_recv(handle(), buf(&n), n, rnd() % 2 ? 0 : 1000);
    case 15: return __warden_sock_shutdown(handle());
    case 16: return __warden_sock_addr(handle(), (int32_t)rnd(), buf(&n), n);
    case 17: {
        warden_pollfd *f = (warden_pollfd *)(scratch + 256);
        uint32_t k = rnd() % 9 ? rnd() % 8 : rnd();
        for (uint32_t i = 0; i < 8; i++) f[i] = (warden_pollfd){handle(), rnd() % 8, 0};
        return __warden_poll(rnd() % 5 ? f : (warden_pollfd *)ptr(), k, rnd() % 2 ? 0 : 1000);
    }
    default:
        return __warden_call_timeout(handle(), buf(&n), n, (int32_t *)scratch, rnd() % 4, buf(&n2), n2,
                                     (int32_t *)(scratch + 64), (uint32_t *)(scratch + 128),
                                     rnd() % 2 ? 0 : (int64_t)(rnd() % 100000));
    }
}

int main(int argc, char **argv) {
    state = argc > 1 ? strtoull(argv[1], 0, 10) * 2654435761u + 1 : 1;
    long iterations = argc > 2 ? atol(argv[2]) : 10000;
    warden_handle svc = warden_service_create();
    keep(warden_portal_create(svc));
    keep(warden_mem_create(256));
    keep(warden_permit_grant(scratch, SCRATCH, 1));
    long errors = 0;
    for (long i = 0; i < iterations; i++) {
        int64_t r = 0;
        uint32_t n = len(), n2 = len();
        uint32_t which = rnd() % 68;
        if (which >= 19) {
            r = which < 38 ? more(which - 19) : -wasi(which - 38);
            if (r < 0) errors++;
            continue;
        }
        switch (which) {
        case 0: r = __warden_close(handle()); break;
        case 1: r = __warden_dup(handle()); keep((int32_t)r); break;
        case 2: r = __warden_service_create(); break; /* dropped: never received on */
        case 3: r = __warden_portal_create(handle()); keep((int32_t)r); break;
        case 4: { /* portals here lead to this task's own services: EDEADLOCK, never a wait */
            uint32_t hn = rnd() % 4;
            r = __warden_call(handle(), buf(&n), n, (int32_t *)scratch, hn, buf(&n2), n2,
                              (int32_t *)(scratch + 64), (uint32_t *)(scratch + 128));
            break;
        }
        case 5: { /* never a live service: a valid one would wait for a client */
            int32_t h = rnd() % 2 ? -(int32_t)(rnd() % 9) : (int32_t)(rnd() | 0x20000000);
            r = __warden_recv(h, (uint64_t *)ptr(), buf(&n), n, (int32_t *)ptr(), (uint32_t *)ptr());
            break;
        }
        case 6: r = __warden_reply(((uint64_t)rnd() << 32) | (uint32_t)handle(), buf(&n), n,
                                   (int32_t *)scratch, rnd() % 4); break;
        case 7: r = __warden_name_register(buf(&n), n % 300, handle()); break;
        case 8: r = __warden_name_lookup(buf(&n), n % 300, rnd() % 2 ? 0 : 1000); keep((int32_t)r); break;
        case 9: r = __warden_mem_create(rnd() % 3 ? rnd() % 4096 : ((uint64_t)rnd() << 32)); keep((int32_t)r); break;
        case 10: r = __warden_mem_view(handle(), off(), off(), (int32_t)rnd()); keep((int32_t)r); break;
        case 11: r = __warden_mem_read(handle(), off(), buf(&n), n); break;
        case 12: r = __warden_mem_write(handle(), off(), ptr(), n); break;
        case 13: r = __warden_mem_size(handle()); break;
        case 14: r = __warden_mem_revoke(handle()); keep((int32_t)r); break;
        case 15: { /* over scratch or outside memory: a permit over the fuzzer's own
                    * state would let permit_write scribble on it */
            void *p = buf(&n);
            r = __warden_permit_grant(p, n, (int32_t)rnd());
            keep((int32_t)r);
            break;
        }
        case 16: r = __warden_permit_read(handle(), off(), buf(&n), n); break;
        case 17: r = __warden_permit_write(handle(), off(), ptr(), n); break;
        case 18: r = __warden_permit_revoke(handle()); break;
        }
        if (r < 0) errors++;
    }
    printf("fuzz: %ld calls, %ld errors\n", iterations, errors);
    return 0;
}
