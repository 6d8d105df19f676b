/* @NAME@: a servlet, one long-lived task answering every request to its
 * route. Each request arrives as one portal call carrying the HTTP request
 * (head, then body); the reply is a CGI response. State kept in the task's
 * memory (here a count) lasts across requests, within its budget.
 */
#include <stdio.h>
#include "warden.h"

int main(void) {
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    int32_t rc = warden_name_register("@NAME@", portal);
    if (rc < 0) {
        fprintf(stderr, "register: %s\n", warden_strerror(rc));
        return 1;
    }
    warden_close(portal);
    static char request[65536], reply[1024];
    long requests = 0;
    for (;;) {
        uint64_t call;
        int64_t n = warden_recv(service, &call, request, sizeof request - 1, NULL, NULL);
        if (n < 0) {
            fprintf(stderr, "recv: %s\n", warden_strerror((int32_t)n));
            return 1;
        }
        request[n] = 0;
        char method[16] = "", path[256] = "";
        sscanf(request, "%15s %255s", method, path);
        requests++;
        int len = snprintf(reply, sizeof reply,
                           "Content-Type: text/plain; charset=utf-8\r\n\r\n"
                           "Hello from @NAME@: %s %s, request %ld\n",
                           method, path, requests);
        warden_reply(call, reply, (size_t)len, NULL, 0);
    }
}
