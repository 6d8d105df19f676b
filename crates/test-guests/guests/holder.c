/* Holds one portal across a live upgrade of its server:
 *
 *   holder NAME REQ MARK   looks NAME up, prints "ready", then calls it
 *                          with REQ through that one portal, a call a
 *                          millisecond, until a reply contains MARK;
 *                          prints "calls N errors E" (exit 1 if E > 0) */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "warden.h"

static char resp[1 << 16];

int main(int argc, char **argv) {
    if (argc < 4) return 64;
    warden_handle p = warden_name_lookup(argv[1], 10LL * 1000 * 1000 * 1000);
    if (p < 0) return 2;
    printf("ready\n");
    fflush(stdout);
    long calls = 0, errors = 0;
    for (;;) {
        size_t nh = 0;
        int64_t r = warden_call(p, argv[2], strlen(argv[2]), NULL, 0, resp, sizeof resp - 1,
                                NULL, &nh);
        calls++;
        if (r < 0) {
            if (++errors > 100) break;
        } else {
            resp[r] = 0;
            if (strstr(resp, argv[3])) break;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    printf("calls %ld errors %ld\n", calls, errors);
    return errors > 0;
}
