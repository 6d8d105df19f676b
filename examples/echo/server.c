/* An echo service: registers "echo", answers every request with its own
 * bytes, and exits once as many clients as argv[1] have said "bye". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

int main(int argc, char **argv) {
    int clients = argc > 1 ? atoi(argv[1]) : 1;
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    if (warden_name_register("echo", portal) < 0) return 1;
    warden_close(portal);
    static char buf[4096];
    long calls = 0;
    while (clients > 0) {
        uint64_t call;
        int64_t n = warden_recv(service, &call, buf, sizeof buf, NULL, NULL);
        if (n < 0) { printf("recv: %s\n", warden_strerror((int32_t)n)); return 1; }
        calls++;
        if (n == 3 && memcmp(buf, "bye", 3) == 0) clients--;
        warden_reply(call, buf, (size_t)n, NULL, 0);
    }
    printf("served %ld calls\n", calls);
    return 0;
}
