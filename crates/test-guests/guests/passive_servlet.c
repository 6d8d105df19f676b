/* A servlet as a passive service: each HTTP request is one call, handled
 * on the web server's thread. Replies "count N" (N kept across requests);
 * a path containing /crash traps (the route then answers 502, and 503
 * after: the service is gone). */
#include <stdio.h>
#include <string.h>
#include "warden.h"

static long count;

static int64_t serve(const void *req, size_t len, void *resp, size_t cap) {
    char head[256];
    size_t n = len < sizeof head - 1 ? len : sizeof head - 1;
    memcpy(head, req, n);
    head[n] = 0;
    char *eol = strstr(head, "\r\n");
    if (eol) *eol = 0;
    if (strstr(head, "/crash")) __builtin_trap();
    count++;
    int w = snprintf(resp, cap, "Content-Type: text/plain\r\n\r\ncount %ld\n", count);
    return w < 0 || (size_t)w > cap ? WARDEN_EQUOTA : w;
}

WARDEN_PASSIVE_SERVICE(serve)
