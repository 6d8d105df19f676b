/* A service and its client for a cluster of nodes.
 *
 *   cluster serve NAME TAG     serve NAME: a request "origin" gets the
 *                              caller as warden_call_origin gives it,
 *                              "hang" is held for ever (after printing
 *                              "server: got hang"), "callback" with a
 *                              portal gets what a "ping" through that
 *                              portal got, "give" gets a portal to this
 *                              service, "slowgive" the same after
 *                              300 ms; anything else gets "TAG:" and
 *                              the request back
 *   cluster call NAME N MSG [LOOKUP_MS]
 *                              N calls of MSG; prints how many replies
 *                              came from each TAG ("client: from a 12"),
 *                              or the first error and how long its call
 *                              took ("client: call: peer died after 812 ms")
 *   cluster origin NAME        one "origin" call; prints the reply
 *   cluster callback NAME BACK a "callback" call to NAME carrying a portal
 *                              to BACK; prints "callback: REPLY"
 *   cluster give NAME [hold]   a "give" call, then a "hello" call through
 *                              the portal it returned; "given: REPLY"
 *                              (with "hold", then keeps the portal until
 *                              killed)
 *   cluster late NAME N        N "slowgive" calls, each given up after
 *                              100 ms; "late: N timed out"
 *
 * A lookup waits up to 10 s (or LOOKUP_MS); its failure prints
 * "client: lookup: ERROR". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "warden.h"

static char buf[65536], resp[65536];

static int serve(const char *name, const char *tag) {
    warden_handle s = warden_service_create();
    int32_t r = warden_name_register(name, warden_portal_create(s));
    if (r < 0) { printf("server: register: %s\n", warden_strerror(r)); return 1; }
    printf("server: ready\n");
    fflush(stdout);
    for (;;) {
        uint64_t call;
        warden_handle hs[4];
        size_t nh = 4;
        int64_t n = warden_recv(s, &call, buf, sizeof buf - 1, hs, &nh);
        if (n < 0) { printf("server: recv: %s\n", warden_strerror((int32_t)n)); return 0; }
        if (n == 8 && memcmp(buf, "callback", 8) == 0 && nh == 1) {
            int64_t r = warden_call(hs[0], "ping", 4, NULL, 0, resp, sizeof resp, NULL, NULL);
            if (r < 0) r = snprintf(resp, sizeof resp, "error %s", warden_strerror((int32_t)r));
            warden_close(hs[0]);
            warden_reply(call, resp, (size_t)r, NULL, 0);
            continue;
        }
        for (size_t i = 0; i < nh; i++) warden_close(hs[i]);
        if (n == 4 && memcmp(buf, "give", 4) == 0) {
            warden_handle mine = warden_portal_create(s);
            warden_handle moved = mine | WARDEN_MOVE;
            warden_reply(call, "here", 4, &moved, 1);
            continue;
        }
        if (n == 8 && memcmp(buf, "slowgive", 8) == 0) {
            usleep(300 * 1000);
            warden_handle moved = warden_portal_create(s) | WARDEN_MOVE;
            warden_reply(call, "late", 4, &moved, 1);
            continue;
        }
        if (n == 4 && memcmp(buf, "hang", 4) == 0) {
            printf("server: got hang\n");
            fflush(stdout);
            sleep(600);
        }
        int len;
        if (n == 6 && memcmp(buf, "origin", 6) == 0) {
            len = warden_call_origin(call, resp, sizeof resp);
        } else {
            len = snprintf(resp, sizeof resp, "%s:", tag);
            memcpy(resp + len, buf, (size_t)n);
            len += (int)n;
        }
        warden_reply(call, resp, (size_t)len, NULL, 0);
    }
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static warden_handle find(const char *name, long long ms) {
    warden_handle p = warden_name_lookup(name, ms * 1000 * 1000);
    if (p < 0) printf("client: lookup: %s\n", warden_strerror(p));
    return p;
}

static int call(const char *name, long n, const char *msg, long long lookup_ms) {
    warden_handle p = find(name, lookup_ms);
    if (p < 0) return 1;
    char tags[8][32] = {{0}};
    long counts[8] = {0};
    for (long i = 0; i < n; i++) {
        long long t0 = now_ms();
        int64_t r = warden_call(p, msg, strlen(msg), NULL, 0, resp, sizeof resp - 1, NULL, NULL);
        if (r < 0) {
            printf("client: call: %s after %lld ms\n", warden_strerror((int32_t)r), now_ms() - t0);
            return 2;
        }
        resp[r] = 0;
        char *colon = strchr(resp, ':');
        if (!colon || strcmp(colon + 1, msg) != 0) { printf("client: bad reply %s\n", resp); return 3; }
        *colon = 0;
        for (int k = 0; k < 8; k++) {
            if (tags[k][0] == 0) snprintf(tags[k], sizeof tags[k], "%s", resp);
            if (strcmp(tags[k], resp) == 0) { counts[k]++; break; }
        }
    }
    for (int k = 0; k < 8 && tags[k][0]; k++) printf("client: from %s %ld\n", tags[k], counts[k]);
    printf("client: ok %ld\n", n);
    return 0;
}

static int origin(const char *name) {
    warden_handle p = find(name, 10000);
    if (p < 0) return 1;
    int64_t r = warden_call(p, "origin", 6, NULL, 0, resp, sizeof resp - 1, NULL, NULL);
    if (r < 0) { printf("client: call: %s\n", warden_strerror((int32_t)r)); return 2; }
    resp[r] = 0;
    printf("origin: %s\n", resp);
    return 0;
}

static int callback(const char *name, const char *back) {
    warden_handle p = find(name, 10000), b = find(back, 10000);
    if (p < 0 || b < 0) return 1;
    int64_t r = warden_call(p, "callback", 8, &b, 1, resp, sizeof resp - 1, NULL, NULL);
    if (r < 0) { printf("client: call: %s\n", warden_strerror((int32_t)r)); return 2; }
    resp[r] = 0;
    printf("callback: %s\n", resp);
    return 0;
}

static int give(const char *name, int hold) {
    warden_handle p = find(name, 10000);
    if (p < 0) return 1;
    warden_handle got[1];
    size_t nh = 1;
    int64_t r = warden_call(p, "give", 4, NULL, 0, resp, sizeof resp - 1, got, &nh);
    if (r < 0 || nh != 1) { printf("client: give: %s\n", r < 0 ? warden_strerror((int32_t)r) : "no portal"); return 2; }
    r = warden_call(got[0], "hello", 5, NULL, 0, resp, sizeof resp - 1, NULL, NULL);
    if (r < 0) { printf("client: call: %s\n", warden_strerror((int32_t)r)); return 2; }
    resp[r] = 0;
    printf("given: %s\n", resp);
    fflush(stdout);
    while (hold) sleep(60);
    warden_close(got[0]);
    return 0;
}

static int late(const char *name, long n) {
    warden_handle p = find(name, 10000);
    if (p < 0) return 1;
    for (long i = 0; i < n; i++) {
        warden_handle got[1];
        size_t nh = 1;
        int64_t r = warden_call_timeout(p, "slowgive", 8, NULL, 0, resp, sizeof resp, got, &nh,
                                        100LL * 1000 * 1000);
        if (r != WARDEN_ETIMEOUT) { printf("client: late: %s\n", r < 0 ? warden_strerror((int32_t)r) : "answered"); return 2; }
    }
    printf("late: %ld timed out\n", n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "serve") == 0) return serve(argv[2], argv[3]);
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "call") == 0)
        return call(argv[2], atol(argv[3]), argv[4], argc == 6 ? atoll(argv[5]) : 10000);
    if (argc == 3 && strcmp(argv[1], "origin") == 0) return origin(argv[2]);
    if (argc == 4 && strcmp(argv[1], "callback") == 0) return callback(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "give") == 0) return give(argv[2], 0);
    if (argc == 4 && strcmp(argv[1], "give") == 0 && strcmp(argv[3], "hold") == 0)
        return give(argv[2], 1);
    if (argc == 4 && strcmp(argv[1], "late") == 0) return late(argv[2], atol(argv[3]));
    fprintf(stderr, "usage: cluster serve NAME TAG | call NAME N MSG | origin NAME\n");
    return 64;
}
