/* Handle passing and "no clients".
 *
 *   broker keeper   serve "keeper": take the portal moved in with the first
 *                   request, reply, call through it once, then close it
 *   broker server   create a service, move its only portal to "keeper",
 *                   and serve until recv reports that no client is left */
#include <stdio.h>
#include <string.h>
#include "warden.h"

static int keeper(void) {
    warden_handle s = warden_service_create();
    warden_handle p = warden_portal_create(s);
    warden_name_register("keeper", p);
    warden_close(p);
    char buf[64];
    uint64_t call;
    warden_handle hs[4];
    size_t nh = 4;
    int64_t n = warden_recv(s, &call, buf, sizeof buf, hs, &nh);
    printf("keeper: got %lld bytes and %zu handles\n", (long long)n, nh);
    warden_reply(call, "thanks", 6, NULL, 0);
    char out[64];
    size_t rnh = 0;
    int64_t r = warden_call(hs[0], "hello server", 12, NULL, 0, out, sizeof out, NULL, &rnh);
    printf("keeper: call through passed portal: %.*s\n", (int)(r > 0 ? r : 0), out);
    warden_close(hs[0]);
    printf("keeper: closed the portal\n");
    fflush(stdout);
    return 0;
}

static int server(void) {
    warden_handle s = warden_service_create();
    warden_handle p = warden_portal_create(s);
    warden_handle keeper = warden_name_lookup("keeper", 10LL * 1000 * 1000 * 1000);
    if (keeper < 0) { printf("server: lookup: %s\n", warden_strerror(keeper)); return 1; }
    warden_handle moved = p | WARDEN_MOVE;
    char out[16];
    size_t rnh = 0;
    int64_t r = warden_call(keeper, "portal", 6, &moved, 1, out, sizeof out, NULL, &rnh);
    printf("server: gave away the portal: %s\n", r < 0 ? warden_strerror((int32_t)r) : "ok");
    printf("server: own portal now: %s\n", warden_strerror(warden_dup(p)));
    warden_close(keeper);
    for (;;) {
        char buf[64];
        uint64_t call;
        size_t nh = 0;
        int64_t n = warden_recv(s, &call, buf, sizeof buf, NULL, &nh);
        if (n < 0) { printf("server: recv: %s\n", warden_strerror((int32_t)n)); return 0; }
        printf("server: request %.*s\n", (int)n, buf);
        warden_reply(call, "hi", 2, NULL, 0);
    }
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "keeper") == 0) return keeper();
    if (argc >= 2 && strcmp(argv[1], "server") == 0) return server();
    return 64;
}
