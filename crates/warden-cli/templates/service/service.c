/* @NAME@'s service: registers the name "@NAME@" and answers each call
 * with a greeting built from the call's bytes. It stops after a client
 * says "bye" (so `warden run warden.toml` ends); a long-lived service
 * would loop for ever.
 */
#include <stdio.h>
#include <string.h>
#include "warden.h"

int main(void) {
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    int32_t rc = warden_name_register("@NAME@", portal);
    if (rc < 0) {
        fprintf(stderr, "register: %s\n", warden_strerror(rc));
        return 1;
    }
    warden_close(portal); /* the name service holds it now */
    static char request[1024], reply[1100];
    long calls = 0;
    for (;;) {
        uint64_t call;
        int64_t n = warden_recv(service, &call, request, sizeof request - 1, NULL, NULL);
        if (n < 0) {
            fprintf(stderr, "recv: %s\n", warden_strerror((int32_t)n));
            return 1;
        }
        request[n] = 0;
        calls++;
        int len = snprintf(reply, sizeof reply, "hello, %s (call %ld)", request, calls);
        warden_reply(call, reply, (size_t)len, NULL, 0);
        if (strcmp(request, "bye") == 0) break;
    }
    printf("service: answered %ld calls\n", calls);
    return 0;
}
