/* A whole web server in one task, for Luna's Figure 5 (seed 004):
 *
 *   self ADDR SIZE      listen on ADDR, print "listening"; answer every
 *                       request itself with a SIZE-byte body
 *   forward ADDR NAME   the same server, but each request's bytes go to
 *                       the service NAME by portal call, and the reply is
 *                       the body it sends
 *   page NAME SIZE      the servlet: register NAME, print "ready", reply
 *                       to every call with a SIZE-byte body
 *
 * HTTP/1.1 with keep-alive; requests are GETs (no body), parsed only as
 * far as the end of their head. Up to 1,024 connections from one
 * warden_poll loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

enum { MAX = 1024, CAP = 8192 };
static warden_pollfd fds[MAX];
static struct { char buf[CAP]; size_t len; } conns[MAX];
static char body[1 << 17], out[(1 << 17) + 256];
static long size;
static warden_handle portal = -1;

static int send_all(warden_handle c, const char *p, size_t n) {
    while (n > 0) {
        int64_t w = warden_sock_send(c, p, n, -1);
        if (w < 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Answers every complete request in slot i's buffer; -1 closes it. */
static int serve(size_t i) {
    char *end;
    while ((end = strstr(conns[i].buf, "\r\n\r\n")) != NULL) {
        size_t used = (size_t)(end + 4 - conns[i].buf);
        int64_t len = size;
        const char *page = body;
        if (portal >= 0) {
            len = warden_call(portal, conns[i].buf, used, NULL, 0, body, sizeof body, NULL, NULL);
            if (len < 0) return -1;
        }
        int head = snprintf(out, 256, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %lld\r\n\r\n",
                            (long long)len);
        memcpy(out + head, page, (size_t)len);
        if (send_all(fds[i].handle, out, (size_t)head + (size_t)len) < 0) return -1;
        memmove(conns[i].buf, conns[i].buf + used, conns[i].len - used + 1);
        conns[i].len -= used;
    }
    return conns[i].len + 1 >= CAP ? -1 : 0;
}

static int server(const char *addr) {
    warden_handle l = warden_tcp_listen(addr);
    if (l < 0) return printf("listen: %s\n", warden_strerror(l)), 1;
    printf("listening\n");
    fflush(stdout);
    size_t n = 1;
    fds[0] = (warden_pollfd){l, WARDEN_POLL_IN, 0};
    for (;;) {
        if (warden_poll(fds, n, -1) < 0) return 1;
        if (fds[0].revents) {
            warden_handle c;
            while (n < MAX && (c = warden_tcp_accept(l, 0)) >= 0) {
                conns[n].len = 0;
                conns[n].buf[0] = 0;
                fds[n++] = (warden_pollfd){c, WARDEN_POLL_IN, 0};
            }
        }
        for (size_t i = 1; i < n; i++) {
            if (!fds[i].revents) continue;
            int64_t got = warden_sock_recv(fds[i].handle, conns[i].buf + conns[i].len, CAP - 1 - conns[i].len, 0);
            if (got == WARDEN_ETIMEOUT) continue;
            if (got > 0) {
                conns[i].len += (size_t)got;
                conns[i].buf[conns[i].len] = 0;
            }
            if (got <= 0 || serve(i) < 0) {
                warden_close(fds[i].handle);
                fds[i] = fds[n - 1];
                conns[i] = conns[n - 1];
                n--;
                i--;
            }
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 4) return printf("usage: web self|forward|page ...\n"), 2;
    memset(body, 'x', sizeof body);
    if (strcmp(argv[1], "page") == 0) {
        size = atol(argv[3]);
        warden_handle service = warden_service_create();
        warden_handle p = warden_portal_create(service);
        if (warden_name_register(argv[2], p) < 0) return 1;
        warden_close(p);
        printf("ready\n");
        fflush(stdout);
        static char req[CAP];
        for (;;) {
            uint64_t call;
            if (warden_recv(service, &call, req, sizeof req, NULL, NULL) < 0) return 1;
            warden_reply(call, body, (size_t)size, NULL, 0);
        }
    }
    if (strcmp(argv[1], "forward") == 0) {
        portal = warden_name_lookup(argv[3], -1);
        if (portal < 0) return printf("lookup: %s\n", warden_strerror(portal)), 1;
    } else {
        size = atol(argv[3]);
    }
    return server(argv[2]);
}
