/* Echo service and client.
 *
 *   echo server NAME        serve NAME: reply with the request; requests
 *                           "crash" (trap while holding the call), "hang"
 *                           (print "server: got hang", sleep 600 s),
 *                           "slow" (print "server: got slow", sleep 2 s),
 *                           "bye" (reply, then exit)
 *   echo client NAME N MSG  N calls of MSG, each reply checked; MSG
 *                           "handles" also sends two memory objects
 *   echo relay NAME TARGET  serve NAME: pass each request on to the
 *                           service TARGET and reply with its reply
 *   echo stray NAME         starts a "slow" call with the raw call_fast
 *                           twice (the second while the first is under
 *                           way) and exits without waiting for either
 *
 * Both print one line per outcome; error codes are printed by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "warden.h"

static int server(const char *name) {
    warden_handle s = warden_service_create();
    warden_handle p = warden_portal_create(s);
    int32_t r = warden_name_register(name, p);
    if (r < 0) { printf("server: register: %s\n", warden_strerror(r)); return 1; }
    warden_close(p);
    printf("server: ready\n");
    fflush(stdout);
    static char buf[65536];
    for (long served = 0;; served++) {
        uint64_t call;
        warden_handle hs[16];
        size_t nh = 16;
        int64_t n = warden_recv(s, &call, buf, sizeof buf, hs, &nh);
        if (n < 0) {
            printf("server: recv: %s after %ld calls\n", warden_strerror((int32_t)n), served);
            return 0;
        }
        if (n == 5 && memcmp(buf, "crash", 5) == 0) __builtin_trap();
        int hang = n == 4 && memcmp(buf, "hang", 4) == 0;
        int slow = n == 4 && memcmp(buf, "slow", 4) == 0;
        if (hang || slow) { printf("server: got %s\n", hang ? "hang" : "slow"); fflush(stdout); }
        if (hang) sleep(600);
        if (slow) sleep(2);
        int32_t rr = warden_reply(call, buf, (size_t)n, hs, nh);
        for (size_t i = 0; i < nh; i++) warden_close(hs[i]);
        if (rr < 0) { printf("server: reply: %s\n", warden_strerror(rr)); fflush(stdout); }
        if (n == 3 && memcmp(buf, "bye", 3) == 0) { printf("server: bye\n"); return 0; }
    }
}

static int client(const char *name, long n, const char *msg) {
    warden_handle p = warden_name_lookup(name, 10LL * 1000 * 1000 * 1000);
    if (p < 0) { printf("client: lookup: %s\n", warden_strerror(p)); return 1; }
    size_t len = strlen(msg);
    static char resp[65536];
    for (long i = 0; i < n; i++) {
        /* "handles": each request carries two memory objects (echoed back). */
        warden_handle send[2], got[2];
        size_t ns = 0, nh = 2;
        if (strcmp(msg, "handles") == 0) {
            send[0] = warden_mem_create(16);
            send[1] = warden_mem_create(16);
            ns = 2;
        }
        int64_t r = warden_call(p, msg, len, send, ns, resp, sizeof resp, got, &nh);
        for (size_t k = 0; k < ns; k++) warden_close(send[k]);
        for (size_t k = 0; r >= 0 && k < nh; k++) warden_close(got[k]);
        if (r < 0) { printf("client: call: %s\n", warden_strerror((int32_t)r)); return 2; }
        if ((size_t)r != len || memcmp(resp, msg, len) != 0) { printf("client: bad echo\n"); return 3; }
    }
    printf("client: ok %ld\n", n);
    return 0;
}

static int relay(const char *name, const char *target) {
    warden_handle t = warden_name_lookup(target, 10LL * 1000 * 1000 * 1000);
    if (t < 0) { printf("relay: lookup: %s\n", warden_strerror(t)); return 1; }
    warden_handle s = warden_service_create();
    warden_handle p = warden_portal_create(s);
    int32_t r = warden_name_register(name, p);
    if (r < 0) { printf("relay: register: %s\n", warden_strerror(r)); return 1; }
    warden_close(p);
    static char buf[65536], resp[65536];
    for (;;) {
        uint64_t call;
        size_t nh = 0;
        int64_t n = warden_recv(s, &call, buf, sizeof buf, NULL, &nh);
        if (n < 0) return 0;
        size_t got = 0;
        int64_t m = warden_call(t, buf, (size_t)n, NULL, 0, resp, sizeof resp, NULL, &got);
        if (m < 0) { printf("relay: call: %s\n", warden_strerror((int32_t)m)); return 2; }
        warden_reply(call, resp, (size_t)m, NULL, 0);
    }
}

/* Not what the SDK does: a guest that leaves its call under way. */
static int stray(const char *name) {
    warden_handle p = warden_name_lookup(name, 10LL * 1000 * 1000 * 1000);
    if (p < 0) { printf("stray: lookup: %s\n", warden_strerror(p)); return 1; }
    static char resp[16];
    uint32_t nh = 0;
    int64_t a = __warden_call_fast(p, "slow", 4, NULL, 0, resp, sizeof resp, NULL, &nh);
    int64_t b = __warden_call_fast(p, "slow", 4, NULL, 0, resp, sizeof resp, NULL, &nh);
    printf("stray: %s, %s\n", warden_strerror((int32_t)a), warden_strerror((int32_t)b));
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "stray") == 0) return stray(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "server") == 0) return server(argv[2]);
    if (argc >= 4 && strcmp(argv[1], "relay") == 0) return relay(argv[2], argv[3]);
    if (argc >= 5 && strcmp(argv[1], "client") == 0) return client(argv[2], atol(argv[3]), argv[4]);
    fprintf(stderr, "usage: echo server NAME | echo client NAME N MSG\n");
    return 64;
}
