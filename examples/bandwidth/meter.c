/* The meter: accepts one connection per tenant, reads everything, and
 * reports how the link was shared while all of them were sending.
 *
 *   meter N      N tenants
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "warden.h"

#define MAX 8

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    int tenants = argc > 1 ? atoi(argv[1]) : 3;
    if (tenants > MAX) tenants = MAX;
    warden_handle l = warden_tcp_listen("127.0.0.1:0");
    if (l < 0) return printf("listen: %s\n", warden_strerror(l)), 1;
    char addr[64];
    int32_t alen = warden_sock_addr(l, 0, addr, sizeof addr);
    warden_handle svc = warden_service_create();
    warden_name_register("meter", warden_portal_create(svc));
    warden_pollfd fds[MAX + 2] = {{svc, WARDEN_POLL_IN, 0}, {l, WARDEN_POLL_IN, 0}};
    char names[MAX][33];
    long long bytes[MAX] = {0}, during[MAX] = {0};
    int n = 0, open = 0;
    double all_since = 0;
    static char buf[65536];
    while (n < tenants || open > 0) {
        warden_poll(fds, 2 + n, -1);
        if (fds[0].revents) {
            uint64_t call;
            size_t nh = 0;
            if (warden_recv(svc, &call, buf, sizeof buf, NULL, &nh) >= 0) warden_reply(call, addr, alen, NULL, 0);
        }
        if (fds[1].revents && n < tenants) {
            warden_handle c = warden_tcp_accept(l, 0);
            if (c >= 0) {
                fds[2 + n] = (warden_pollfd){c, WARDEN_POLL_IN, 0};
                names[n][0] = 0;
                n++, open++;
                if (n == tenants) all_since = now();
            }
        }
        for (int i = 0; i < n; i++) {
            if (!fds[2 + i].revents || fds[2 + i].handle < 0) continue;
            int64_t got = warden_sock_recv(fds[2 + i].handle, buf, sizeof buf, 0);
            if (got > 0) {
                if (!names[i][0] && got >= 32) {
                    memcpy(names[i], buf, 32);
                    names[i][32] = 0;
                    *strchr(names[i], ' ') = 0;
                    got -= 32;
                }
                bytes[i] += got;
                /* Shares count while every tenant is connected and sending. */
                if (n == tenants && open == tenants) during[i] += got;
            } else if (got != WARDEN_ETIMEOUT) {
                warden_close(fds[2 + i].handle);
                fds[2 + i].handle = -1;
                fds[2 + i].events = 0;
                open--;
            }
        }
        /* A closed entry must not be polled: park it on the service. */
        for (int i = 0; i < n; i++)
            if (fds[2 + i].handle < 0) fds[2 + i] = (warden_pollfd){svc, 0, 0};
    }
    long long total = 0;
    for (int i = 0; i < n; i++) total += during[i];
    printf("while all %d sent (%.1f s):\n", n, now() - all_since);
    for (int i = 0; i < n; i++)
        printf("  %-10s %7.1f MB  %5.1f%% of the link\n", names[i], during[i] / 1e6,
               total ? 100.0 * during[i] / total : 0.0);
    return 0;
}
