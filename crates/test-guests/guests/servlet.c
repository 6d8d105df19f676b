/* A servlet for the web server's tests: serves the name argv[1] (default
 * "counter"); every request is one portal call carrying the HTTP request
 * head and body, and the reply is a CGI response. The count of requests
 * lives in the servlet's own memory across requests. By path:
 *   .../crash   traps while holding the call          -> 502
 *   .../bad     replies with no header block          -> 502
 *   .../slow    sleeps 2 s first                       -> 504 (shorter timeout)
 *   .../head    echoes the request it received
 *   .../big/N   a body of N MiB of 'x'                 -> 502 over max_response
 *   .../burn    spins for 2 ms first, then as below
 *   .../stream/N      a body of N bytes streamed on the request's exchange
 *   .../unfinished/N  as /stream/N, but closes the exchange without a
 *                     shutdown after N bytes: the answer is cut short
 *   .../hold    passes its exchange back and keeps it, sending nothing:
 *               the answer ends cut short at the route's timeout
 *   .../upload  answers at once, then reads the body (the message's part,
 *               then the exchange's) and streams "got N sum S" after it
 *   otherwise   "count N"
 * A live upgrade hands the count over to the new code (warden_upgrade_save
 * and warden_upgrade_restore).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "warden.h"

static char req[1 << 17], resp[1 << 17];

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long count;

WARDEN_UPGRADE_EXPORTS(&count, sizeof count)

/* Streams `n` bytes of 'x' on `ex` after a reply passing it back;
 * shuts it down at the end unless `unfinished`. */
static void stream(uint64_t call, warden_handle ex, size_t n, int unfinished) {
    static const char head[] = "Content-Type: application/octet-stream\r\n\r\n";
    warden_reply(call, head, sizeof head - 1, &ex, 1);
    static char chunk[1 << 16];
    memset(chunk, 'x', sizeof chunk);
    while (n > 0) {
        size_t want = n < sizeof chunk ? n : sizeof chunk;
        int64_t sent = warden_sock_send(ex, chunk, want, -1);
        if (sent <= 0) break;
        n -= (size_t)sent;
    }
    if (!unfinished) warden_sock_shutdown(ex);
    warden_close(ex);
}

/* Answers at once, then reads the whole body: the `have` bytes the
 * message carried at `body`, then the exchange's (waiting in warden_poll);
 * reports their count and byte sum after the head. */
static void upload(uint64_t call, warden_handle ex, const char *body, size_t have) {
    static const char head[] = "Content-Type: text/plain\r\n\r\n";
    warden_reply(call, head, sizeof head - 1, &ex, 1);
    unsigned long long total = have, sum = 0;
    for (size_t i = 0; i < have; i++) sum += (unsigned char)body[i];
    static char buf[1 << 16];
    for (;;) {
        /* Waits in warden_poll, then takes what came without waiting. */
        warden_pollfd p = {ex, WARDEN_POLL_IN, 0};
        if (warden_poll(&p, 1, -1) < 0) break;
        int64_t n = warden_sock_recv(ex, buf, sizeof buf, 0);
        if (n == WARDEN_ETIMEOUT) continue;
        if (n <= 0) break;
        for (int64_t i = 0; i < n; i++) sum += (unsigned char)buf[i];
        total += (unsigned long long)n;
    }
    int len = snprintf(buf, sizeof buf, "got %llu sum %llu\n", total, sum);
    warden_sock_send(ex, buf, (size_t)len, -1);
    warden_sock_shutdown(ex);
    warden_close(ex);
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "counter";
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    if (warden_name_register(name, portal) < 0) return 1;
    warden_close(portal);
    for (;;) {
        uint64_t call;
        warden_handle ex = -1;
        size_t nh = 1;
        int64_t n = warden_recv(service, &call, req, sizeof req - 1, &ex, &nh);
        if (n < 0) return 1;
        if (n > (int64_t)sizeof req - 1) n = sizeof req - 1;
        req[n] = 0;
        if (nh == 0) ex = -1;
        char method[16] = "", path[1024] = "";
        sscanf(req, "%15s %1023s", method, path);
        int len;
        if (ex >= 0 && strstr(path, "/stream/")) {
            stream(call, ex, (size_t)atoll(strstr(path, "/stream/") + 8), 0);
            continue;
        }
        if (ex >= 0 && strstr(path, "/unfinished/")) {
            stream(call, ex, (size_t)atoll(strstr(path, "/unfinished/") + 12), 1);
            continue;
        }
        if (ex >= 0 && strstr(path, "/hold")) {
            static const char head[] = "Content-Type: text/plain\r\n\r\nheld";
            warden_reply(call, head, sizeof head - 1, &ex, 1);
            continue;
        }
        if (ex >= 0 && strstr(path, "/upload")) {
            char *body = strstr(req, "\r\n\r\n");
            size_t at = body ? (size_t)(body + 4 - req) : (size_t)n;
            upload(call, ex, req + at, (size_t)n - at);
            continue;
        }
        if (ex >= 0) warden_close(ex);
        if (strstr(path, "/crash")) __builtin_trap();
        if (strstr(path, "/slow")) sleep(2);
        if (strstr(path, "/burn")) {
            long long start = now_ns();
            while (now_ns() - start < 2000000LL) {}
        }
        if (strstr(path, "/big/")) {
            size_t mib = (size_t)atol(strstr(path, "/big/") + 5);
            static const char head[] = "Content-Type: application/octet-stream\r\n\r\n";
            size_t total = sizeof head - 1 + (mib << 20);
            char *big = malloc(total);
            if (!big) return 1;
            memcpy(big, head, sizeof head - 1);
            memset(big + sizeof head - 1, 'x', mib << 20);
            warden_reply(call, big, total, NULL, 0);
            free(big);
            continue;
        }
        if (strstr(path, "/bad")) {
            len = snprintf(resp, sizeof resp, "no headers here");
        } else if (strstr(path, "/head")) {
            len = snprintf(resp, sizeof resp, "Content-Type: text/plain\r\n\r\n%s", req);
        } else {
            count++;
            len = snprintf(resp, sizeof resp, "Content-Type: text/plain\r\nX-Servlet: %s\r\n\r\ncount %ld\n", name, count);
        }
        if (len > (int)sizeof resp) len = sizeof resp;
        warden_reply(call, resp, (size_t)len, NULL, 0);
    }
}
