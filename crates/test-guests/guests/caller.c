/* Calls a service with each request given and prints what came back.
 *
 *   caller NAME REQ...   look NAME up (waiting up to 10 s), call it with
 *                        each REQ in turn and print "REQ -> REPLY" or
 *                        "REQ -> error CODE"; a REQ starting with "+h "
 *                        is sent (without the prefix) with a handle */
#include <stdio.h>
#include <string.h>
#include "warden.h"

int main(int argc, char **argv) {
    if (argc < 2) return 64;
    warden_handle p = warden_name_lookup(argv[1], 10LL * 1000 * 1000 * 1000);
    if (p < 0) {
        printf("lookup %s -> error %d\n", argv[1], p);
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        const char *req = argv[i];
        int with_handle = !strncmp(req, "+h ", 3);
        if (with_handle) req += 3;
        char resp[256];
        size_t nh = 0;
        int64_t r = warden_call(p, req, strlen(req), &p, with_handle, resp, sizeof resp - 1,
                                NULL, &nh);
        if (r < 0) {
            printf("%s -> error %lld\n", argv[i], (long long)r);
        } else {
            resp[r < (int64_t)sizeof resp - 1 ? r : (int64_t)sizeof resp - 1] = 0;
            printf("%s -> %s\n", argv[i], resp);
        }
        fflush(stdout);
    }
    return 0;
}
