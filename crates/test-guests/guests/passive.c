/* A passive service (a reactor): its handler runs on its callers' threads.
 * Requests are text commands:
 *
 *   add N        add N to a counter; reply the counter
 *   work N       N rounds of busy work; reply "worked"
 *   slow N       print "passive: slow started", work N rounds; reply "slow done"
 *   check        reply "in_progress I done D": I is 1 if a slow call is half
 *                way through (it never should be), D the slow calls finished
 *   grow N       keep N more bytes (WARDEN_ENOMEM if the budget refuses)
 *   spin         never return
 *   trap         trap
 *   exit         exit with status 3
 *   nest NAME R  call the service NAME with request R; reply its reply
 *   echo X       reply X
 *
 * Every call first checks that no other is in progress (one call at a
 * time): an overlap replies WARDEN_EINVAL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

static long counter, done;
static int in_progress, in_slow;
static char *volatile kept[64];
static unsigned nkept;
static volatile unsigned long sink;

static void work(long n) {
    for (long i = 0; i < n; i++) sink = sink * 31 + (unsigned long)i;
}

static int64_t text(void *resp, size_t cap, const char *s) {
    size_t n = strlen(s);
    if (n > cap) n = cap;
    memcpy(resp, s, n);
    return (int64_t)n;
}

static int64_t nest(const char *rest, void *resp, size_t cap) {
    char name[64];
    const char *space = strchr(rest, ' ');
    size_t len = space ? (size_t)(space - rest) : strlen(rest);
    if (len >= sizeof name) return WARDEN_EINVAL;
    memcpy(name, rest, len);
    name[len] = 0;
    const char *req = space ? space + 1 : "";
    warden_handle p = warden_name_lookup(name, 0);
    if (p < 0) return p;
    size_t nh = 0;
    int64_t r = warden_call(p, req, strlen(req), NULL, 0, resp, cap, NULL, &nh);
    warden_close(p);
    return r;
}

static int64_t handle(const char *req, size_t len, void *resp, size_t cap) {
    char cmd[256];
    if (len >= sizeof cmd) return WARDEN_EINVAL;
    memcpy(cmd, req, len);
    cmd[len] = 0;
    char out[128];
    if (!strncmp(cmd, "add ", 4)) {
        counter += atol(cmd + 4);
        snprintf(out, sizeof out, "%ld", counter);
        return text(resp, cap, out);
    }
    if (!strncmp(cmd, "work ", 5)) {
        work(atol(cmd + 5));
        return text(resp, cap, "worked");
    }
    if (!strncmp(cmd, "slow ", 5)) {
        printf("passive: slow started\n");
        fflush(stdout);
        in_slow = 1;
        work(atol(cmd + 5));
        in_slow = 0;
        done++;
        return text(resp, cap, "slow done");
    }
    if (!strcmp(cmd, "check")) {
        snprintf(out, sizeof out, "in_progress %d done %ld", in_slow, done);
        return text(resp, cap, out);
    }
    if (!strncmp(cmd, "grow ", 5)) {
        size_t n = (size_t)atol(cmd + 5);
        char *p = malloc(n);
        if (!p) return WARDEN_ENOMEM;
        memset(p, 1, n);
        kept[nkept++ % 64] = p;
        return text(resp, cap, "grew");
    }
    if (!strcmp(cmd, "spin")) for (;;) work(1000);
    if (!strcmp(cmd, "trap")) __builtin_trap();
    if (!strcmp(cmd, "exit")) exit(3);
    if (!strncmp(cmd, "nest ", 5)) return nest(cmd + 5, resp, cap);
    if (!strncmp(cmd, "echo ", 5)) return text(resp, cap, cmd + 5);
    return text(resp, cap, "?");
}

static int64_t serve(const void *req, size_t len, void *resp, size_t cap) {
    if (in_progress) return WARDEN_EINVAL;
    in_progress = 1;
    int64_t r = handle(req, len, resp, cap);
    in_progress = 0;
    return r;
}

WARDEN_PASSIVE_SERVICE(serve)
