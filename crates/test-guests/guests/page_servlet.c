/* A servlet for the web benchmarks: serves NAME (argv[1]), answering
 * every request with a CGI response whose body is SIZE (argv[2]) bytes
 * of 'x'. Prints "ready" once registered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

static char req[1 << 16], resp[(1 << 17) + 64];

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    long size = atol(argv[2]);
    if (size < 0 || size > (1 << 17)) size = 100;
    int head = snprintf(resp, 64, "Content-Type: text/plain\r\n\r\n");
    memset(resp + head, 'x', (size_t)size);
    warden_handle service = warden_service_create();
    warden_handle p = warden_portal_create(service);
    if (warden_name_register(argv[1], p) < 0) return 1;
    warden_close(p);
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        uint64_t call;
        if (warden_recv(service, &call, req, sizeof req, NULL, NULL) < 0) return 1;
        warden_reply(call, resp, (size_t)head + (size_t)size, NULL, 0);
    }
}
