/* A tenant's sender: connects to the meter (found through the name
 * service), names itself, and sends as fast as it is allowed for the
 * given seconds.
 *
 *   sender NAME SECONDS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "warden.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "tenant";
    double seconds = argc > 2 ? atof(argv[2]) : 3;
    warden_handle p = warden_name_lookup("meter", 10LL * 1000 * 1000 * 1000);
    if (p < 0) return printf("lookup: %s\n", warden_strerror(p)), 1;
    char addr[64] = {0};
    size_t nh = 0;
    if (warden_call(p, "where", 5, NULL, 0, addr, sizeof addr - 1, NULL, &nh) < 0) return 1;
    warden_handle c = warden_tcp_connect(addr, -1);
    if (c < 0) return printf("connect: %s\n", warden_strerror(c)), 1;
    char hello[32];
    memset(hello, ' ', sizeof hello);
    memcpy(hello, name, strlen(name) < sizeof hello ? strlen(name) : sizeof hello);
    warden_sock_send(c, hello, sizeof hello, -1);
    static char buf[65536];
    memset(buf, 'x', sizeof buf);
    long long sent = 0;
    double start = now();
    while (now() - start < seconds) {
        int64_t n = warden_sock_send(c, buf, sizeof buf, -1);
        if (n < 0) return printf("send: %s\n", warden_strerror((int32_t)n)), 1;
        sent += n;
    }
    printf("sent %.1f MB in %.1f s\n", sent / 1e6, now() - start);
    return 0;
}
