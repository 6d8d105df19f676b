/* A servlet in C: one long-lived task serving "counter". Every request to
 * its route arrives as one portal call carrying the HTTP request (head and
 * body); the reply is a CGI response. Its state (visits per path) lives in
 * its own memory, within its own budget, across requests. */
#include <stdio.h>
#include <string.h>
#include "warden.h"

#define PATHS 64
static struct { char path[128]; long visits; } seen[PATHS];
static char req[16384], resp[4096];

static long *visits(const char *path) {
    for (int i = 0; i < PATHS; i++) {
        if (seen[i].path[0] == 0) snprintf(seen[i].path, sizeof seen[i].path, "%s", path);
        if (strcmp(seen[i].path, path) == 0) return &seen[i].visits;
    }
    return &seen[PATHS - 1].visits; /* table full: the last slot counts the rest */
}

int main(void) {
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    int32_t rc = warden_name_register("counter", portal);
    if (rc < 0) { printf("register: %s\n", warden_strerror(rc)); return 1; }
    warden_close(portal);
    printf("counter servlet ready\n");
    fflush(stdout);
    long total = 0;
    for (;;) {
        uint64_t call;
        int64_t n = warden_recv(service, &call, req, sizeof req - 1, NULL, NULL);
        if (n < 0) { printf("recv: %s\n", warden_strerror((int32_t)n)); return 1; }
        req[n] = 0;
        char method[16] = "", path[128] = "";
        sscanf(req, "%15s %127s", method, path);
        long *v = visits(path);
        ++*v;
        ++total;
        int len = snprintf(resp, sizeof resp,
                           "Content-Type: text/plain; charset=utf-8\r\n\r\n"
                           "%s has been visited %ld time%s; this servlet has answered %ld "
                           "request%s since it started.\n",
                           path, *v, *v == 1 ? "" : "s", total, total == 1 ? "" : "s");
        warden_reply(call, resp, (size_t)len, NULL, 0);
    }
}
