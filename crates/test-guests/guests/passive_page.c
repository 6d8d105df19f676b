/* page_servlet as a passive service: every request is answered with a CGI
 * response whose body is SIZE (environment) bytes of 'x', on the caller's
 * thread. With RAW set (environment), the reply is the body alone: the
 * servlet of web.c's forward mode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

static char page[(1 << 17) + 64];
static size_t page_len;

static int64_t serve(const void *req, size_t len, void *resp, size_t cap) {
    (void)req;
    (void)len;
    if (!page_len) {
        const char *s = getenv("SIZE");
        long size = s ? atol(s) : 100;
        if (size < 0 || size > (1 << 17)) size = 100;
        int head = getenv("RAW") ? 0 : snprintf(page, 64, "Content-Type: text/plain\r\n\r\n");
        memset(page + head, 'x', (size_t)size);
        page_len = (size_t)head + (size_t)size;
    }
    if (page_len > cap) return WARDEN_EQUOTA;
    memcpy(resp, page, page_len);
    return (int64_t)page_len;
}

WARDEN_PASSIVE_SERVICE(serve)
