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

static char req[1 << 16], resp[1 << 17];

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long count;

WARDEN_UPGRADE_EXPORTS(&count, sizeof count)

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "counter";
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    if (warden_name_register(name, portal) < 0) return 1;
    warden_close(portal);
    for (;;) {
        uint64_t call;
        int64_t n = warden_recv(service, &call, req, sizeof req - 1, NULL, NULL);
        if (n < 0) return 1;
        req[n] = 0;
        char method[16] = "", path[1024] = "";
        sscanf(req, "%15s %1023s", method, path);
        int len;
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
