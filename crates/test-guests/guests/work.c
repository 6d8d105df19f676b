/* CPU work for scheduling tests.
 *
 *   work server ITERS   serve "work": each request computes ITERS steps
 *   work client N [S]   make N calls to "work" (or S), then print "done N"
 *   work relay ITERS    serve "front": each request calls "work", then
 *                       computes ITERS steps
 *   work loop ITERS     compute ITERS steps, print the result, exit */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

static volatile uint64_t sink;

static void compute(long iters) {
    uint64_t x = sink;
    for (long i = 0; i < iters; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

int main(int argc, char **argv) {
    long n = argc > 2 ? atol(argv[2]) : 0;
    if (argc > 2 && !strcmp(argv[1], "server")) {
        warden_handle s = warden_service_create();
        warden_handle p = warden_portal_create(s);
        warden_name_register("work", p);
        warden_close(p);
        for (;;) {
            char buf[16];
            uint64_t call;
            if (warden_recv(s, &call, buf, sizeof buf, NULL, NULL) < 0) return 0;
            compute(n);
            warden_reply(call, "ok", 2, NULL, 0);
        }
    }
    if (argc > 2 && !strcmp(argv[1], "relay")) {
        warden_handle s = warden_service_create();
        warden_handle p = warden_portal_create(s);
        warden_name_register("front", p);
        warden_close(p);
        warden_handle back = warden_name_lookup("work", -1);
        for (;;) {
            char buf[16];
            uint64_t call;
            if (warden_recv(s, &call, buf, sizeof buf, NULL, NULL) < 0) return 0;
            if (warden_call(back, "w", 1, NULL, 0, buf, sizeof buf, NULL, NULL) < 0) return 1;
            compute(n);
            warden_reply(call, "ok", 2, NULL, 0);
        }
    }
    if (argc > 2 && !strcmp(argv[1], "client")) {
        warden_handle p = warden_name_lookup(argc > 3 ? argv[3] : "work", -1);
        char buf[16];
        for (long i = 0; i < n; i++)
            if (warden_call(p, "w", 1, NULL, 0, buf, sizeof buf, NULL, NULL) < 0) return 1;
        printf("done %ld\n", n);
        return 0;
    }
    if (argc > 2 && !strcmp(argv[1], "loop")) {
        compute(n);
        printf("%llu\n", (unsigned long long)(sink & 0xff));
        return 0;
    }
    return 64;
}
