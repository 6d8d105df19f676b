/* Calls every `warden` host function with random arguments: wild and
 * boundary pointers, huge lengths, forged, stale and wrong-kind handles,
 * alongside real objects. Nothing may trap or hang; prints the count.
 *
 *   fuzz SEED ITERATIONS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

static uint64_t state;
static uint32_t rnd(void) {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return (uint32_t)state;
}

#define SCRATCH 4096
static char scratch[SCRATCH];
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
        switch (rnd() % 19) {
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
        case 15: r = __warden_permit_grant(ptr(), n, (int32_t)rnd()); keep((int32_t)r); break;
        case 16: r = __warden_permit_read(handle(), off(), buf(&n), n); break;
        case 17: r = __warden_permit_write(handle(), off(), ptr(), n); break;
        case 18: r = __warden_permit_revoke(handle()); break;
        }
        if (r < 0) errors++;
    }
    printf("fuzz: %ld calls, %ld errors\n", iterations, errors);
    return 0;
}
