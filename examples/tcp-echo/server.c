/* A TCP echo server task. It listens on a port the system picks, tells
 * clients where through the name service ("tcp-echo" answers a call with
 * the address), and serves the calls and every connection from one
 * warden_poll loop.
 *
 *   server N     exit once N clients have said "bye"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

#define MAX 64

int main(int argc, char **argv) {
    long clients = argc > 1 ? atol(argv[1]) : 1;
    warden_handle l = warden_tcp_listen("127.0.0.1:0");
    if (l < 0) return printf("listen: %s\n", warden_strerror(l)), 1;
    char addr[64];
    int32_t alen = warden_sock_addr(l, 0, addr, sizeof addr);
    warden_handle svc = warden_service_create();
    warden_handle portal = warden_portal_create(svc);
    if (warden_name_register("tcp-echo", portal) < 0) return printf("register failed\n"), 1;
    printf("listening on %.*s\n", (int)alen, addr);
    fflush(stdout);
    warden_pollfd fds[MAX] = {{svc, WARDEN_POLL_IN, 0}, {l, WARDEN_POLL_IN, 0}};
    size_t n = 2;
    long byes = 0, bytes = 0;
    static char buf[65536];
    while (byes < clients) {
        if (warden_poll(fds, n, -1) < 0) return printf("poll failed\n"), 1;
        if (fds[0].revents) { /* where am I? */
            uint64_t call;
            size_t nh = 0;
            if (warden_recv(svc, &call, buf, sizeof buf, NULL, &nh) >= 0) warden_reply(call, addr, alen, NULL, 0);
        }
        if (fds[1].revents && n < MAX) {
            warden_handle c = warden_tcp_accept(l, 0);
            if (c >= 0) fds[n++] = (warden_pollfd){c, WARDEN_POLL_IN, 0};
        }
        for (size_t i = 2; i < n; i++) {
            if (!fds[i].revents) continue;
            int64_t got = warden_sock_recv(fds[i].handle, buf, sizeof buf, 0);
            if (got > 0) {
                bytes += got;
                for (int64_t off = 0; off < got;) {
                    int64_t w = warden_sock_send(fds[i].handle, buf + off, got - off, -1);
                    if (w < 0) break;
                    off += w;
                }
            } else if (got == 0 || got != WARDEN_ETIMEOUT) {
                byes++;
                warden_close(fds[i].handle);
                fds[i--] = fds[--n];
            }
        }
    }
    printf("echoed %ld bytes for %ld clients\n", bytes, clients);
    return 0;
}
