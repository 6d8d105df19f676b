/* Socket guest for the network tests; the first argument picks a mode.
 *
 *   echo ADDR [N]        listen, print "listening <addr>", echo N connections (default: for ever)
 *   echo-poll ADDR       listen, print the marker, echo every connection from one
 *                        warden_poll loop (up to 2,000 at once), for ever
 *   client ADDR N SIZE   connect, N round trips of SIZE bytes, print "client ok"
 *   blast ADDR           connect and send as fast as possible, for ever
 *   sink ADDR            listen, print the marker, read and discard from every connection
 *   accept ADDR          listen, print the marker, block in accept
 *   recv ADDR            connect, print "connected", block in recv
 *   hold ADDR N          open N connections to ADDR, print "holding N", block
 *   pass ADDR            listen, accept one connection, spawn module "child"
 *                        with it (moved) and wait for the child
 *   child                echo on the connection granted at index 0
 *   grants               print what listen/connect answer for ungranted addresses
 *   reach ADDR...        connect to each, print "reach ADDR: ok" or the error
 *   reach-when-told ADDR... listen on a loopback port (printing the marker), wait for one
 *                        connection to it, then reach each ADDR
 *   listeners N          listen on N loopback ports, print "listeners K: <error of the
 *                        next>" (K opened), block
 *   bad ADDR             every bad argument gets its error code; prints "bad ok"
 *   pollmix ADDR         poll a service and a listener together; prints what woke it;
 *                        then each alone: the listener, a connection, the service,
 *                        printing "alone N" before each wait
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"
#include "checks.h"

static char buf[1 << 16];

static warden_handle listen_or_die(const char *addr) {
    warden_handle l = warden_tcp_listen(addr);
    if (l < 0) {
        printf("listen %s: %s\n", addr, warden_strerror(l));
        exit(2);
    }
    char a[64];
    int32_t n = warden_sock_addr(l, 0, a, sizeof a - 1);
    a[n > 0 ? n : 0] = 0;
    printf("listening %s\n", a);
    fflush(stdout);
    return l;
}

static int echo_conn(warden_handle c) {
    for (;;) {
        int64_t n = warden_sock_recv(c, buf, sizeof buf, -1);
        if (n <= 0) return n == 0 ? 0 : (int)n;
        for (int64_t off = 0; off < n;) {
            int64_t w = warden_sock_send(c, buf + off, n - off, -1);
            if (w < 0) return (int)w;
            off += w;
        }
    }
}

static warden_handle connect_or_die(const char *addr) {
    warden_handle c = warden_tcp_connect(addr, -1);
    if (c < 0) {
        printf("connect %s: %s\n", addr, warden_strerror(c));
        exit(2);
    }
    return c;
}

static int echo(const char *addr, long n) {
    warden_handle l = listen_or_die(addr);
    for (long i = 0; n < 0 || i < n; i++) {
        warden_handle c = warden_tcp_accept(l, -1);
        if (c < 0) return printf("accept: %s\n", warden_strerror(c)), 1;
        echo_conn(c);
        warden_close(c);
    }
    return 0;
}

static int echo_poll(const char *addr) {
    enum { MAX = 2048 };
    static warden_pollfd fds[MAX];
    warden_handle l = listen_or_die(addr);
    size_t n = 1;
    fds[0] = (warden_pollfd){l, WARDEN_POLL_IN, 0};
    for (;;) {
        if (warden_poll(fds, n, -1) < 0) return 1;
        if (fds[0].revents) {
            warden_handle c;
            while (n < MAX && (c = warden_tcp_accept(l, 0)) >= 0) fds[n++] = (warden_pollfd){c, WARDEN_POLL_IN, 0};
        }
        for (size_t i = 1; i < n; i++) {
            if (!fds[i].revents) continue;
            int64_t got = warden_sock_recv(fds[i].handle, buf, sizeof buf, 0);
            int64_t w = 0;
            for (int64_t off = 0; got > 0 && off < got && w >= 0; off += w)
                w = warden_sock_send(fds[i].handle, buf + off, got - off, -1);
            if (got == 0 || (got < 0 && got != WARDEN_ETIMEOUT) || w < 0) {
                warden_close(fds[i].handle);
                fds[i--] = fds[--n];
            }
        }
    }
}

static int client(const char *addr, long rounds, long size) {
    warden_handle c = connect_or_die(addr);
    if (size > (long)sizeof buf) size = sizeof buf;
    static char back[1 << 16];
    for (long r = 0; r < rounds; r++) {
        memset(buf, 'a' + r % 26, size);
        for (long off = 0; off < size;) {
            int64_t w = warden_sock_send(c, buf + off, size - off, -1);
            if (w < 0) return printf("send: %s\n", warden_strerror(w)), 1;
            off += w;
        }
        for (long got = 0; got < size;) {
            int64_t n = warden_sock_recv(c, back + got, size - got, -1);
            if (n <= 0) return printf("recv: %lld\n", (long long)n), 1;
            got += n;
        }
        if (memcmp(buf, back, size) != 0) return printf("mismatch\n"), 1;
    }
    warden_sock_shutdown(c);
    CHECK(warden_sock_recv(c, back, 1, -1), 0);
    printf("client ok\n");
    return failures;
}

static int blast(const char *addr) {
    warden_handle c = connect_or_die(addr);
    printf("connected\n");
    fflush(stdout);
    memset(buf, 'x', sizeof buf);
    for (;;) {
        int64_t w = warden_sock_send(c, buf, sizeof buf, -1);
        if (w < 0) return printf("send: %s\n", warden_strerror(w)), 1;
    }
}

/* Reads and drops what every client sends; prints "received N" (its own
 * count of bytes, from all clients) each time another 64 KiB arrive. */
static int sink(const char *addr) {
    warden_handle l = listen_or_die(addr);
    warden_pollfd fds[64];
    size_t n = 1;
    unsigned long long total = 0, reported = 0;
    fds[0] = (warden_pollfd){l, WARDEN_POLL_IN, 0};
    for (;;) {
        int32_t r = warden_poll(fds, n, -1);
        if (r < 0) return printf("poll: %s\n", warden_strerror(r)), 1;
        for (size_t i = 0; i < n; i++) {
            if (!fds[i].revents) continue;
            if (i == 0) {
                warden_handle c = warden_tcp_accept(l, 0);
                if (c >= 0 && n < 64) fds[n++] = (warden_pollfd){c, WARDEN_POLL_IN, 0};
            } else {
                int64_t got = warden_sock_recv(fds[i].handle, buf, sizeof buf, 0);
                if (got == 0) {
                    warden_close(fds[i].handle);
                    fds[i--] = fds[--n];
                } else if (got > 0 && (total += (unsigned long long)got) >= reported + (64 << 10)) {
                    reported = total;
                    printf("received %llu\n", total);
                    fflush(stdout);
                }
            }
        }
    }
}

static int pass(const char *addr) {
    warden_handle l = listen_or_die(addr);
    warden_handle c = warden_tcp_accept(l, -1);
    CHECK(c >= 0, 1);
    warden_handle m = warden_module_lookup("child");
    CHECK(m >= 0, 1);
    warden_budget b = {16 << 20, 0, 1};
    warden_handle g[1] = {c | WARDEN_MOVE};
    const char *argv[] = {"child"};
    warden_handle t = warden_task_spawn(m, argv, 1, &b, g, 1);
    CHECK(t >= 0, 1);
    CHECK(warden_sock_send(c, "x", 1, 0), WARDEN_EBADHANDLE); /* moved away */
    int32_t status = -99;
    CHECK(warden_task_wait(t, -1, &status), 0);
    printf("child exited %d\n", status);
    return failures;
}

static int child(void) {
    warden_handle c = warden_task_granted(0);
    char a[64];
    int32_t n = warden_sock_addr(c, 1, a, sizeof a - 1);
    CHECK(n > 0, 1);
    printf("child serving\n");
    fflush(stdout);
    return echo_conn(c);
}

static int grants(void) {
    printf("listen 127.0.0.1:1: %s\n", warden_strerror(warden_tcp_listen("127.0.0.1:1")));
    printf("listen [::1]:0: %s\n", warden_strerror(warden_tcp_listen("[::1]:0")));
    printf("connect 127.0.0.1:9: %s\n", warden_strerror(warden_tcp_connect("127.0.0.1:9", 0)));
    printf("connect 10.1.2.3:80: %s\n", warden_strerror(warden_tcp_connect("10.1.2.3:80", 0)));
    return 0;
}

static int bad(const char *addr) {
    static char big[1000001];
    memset(big, '1', sizeof big - 1);
    CHECK(warden_tcp_listen(big), WARDEN_EINVAL);
    CHECK(warden_tcp_listen("localhost:80"), WARDEN_EINVAL);
    CHECK(warden_tcp_listen("127.0.0.1:70000"), WARDEN_EINVAL);
    CHECK(warden_tcp_listen(""), WARDEN_EINVAL);
    CHECK(__warden_tcp_listen((const char *)0x7ffffff0, 64), WARDEN_EBADPTR);
    CHECK(__warden_tcp_connect("127.0.0.1:1", 0xffffffffu, 0), WARDEN_EBADPTR);
    warden_handle l = listen_or_die(addr);
    /* A listener is not a connection, nor a connection a listener. */
    CHECK(warden_sock_send(l, "x", 1, 0), WARDEN_EBADHANDLE);
    CHECK(warden_sock_recv(l, buf, 1, 0), WARDEN_EBADHANDLE);
    CHECK(warden_sock_shutdown(l), WARDEN_EBADHANDLE);
    CHECK(warden_sock_addr(l, 1, buf, 64), WARDEN_EINVAL);
    CHECK(warden_tcp_accept(l, 0), WARDEN_ETIMEOUT);
    char a[64];
    int32_t n = warden_sock_addr(l, 0, a, sizeof a - 1);
    a[n] = 0;
    warden_handle c = warden_tcp_connect(a, -1);
    CHECK(c >= 0, 1);
    CHECK(warden_tcp_accept(c, 0), WARDEN_EBADHANDLE);
    warden_handle s = warden_tcp_accept(l, -1);
    CHECK(s >= 0, 1);
    /* Wild pointers and huge lengths. */
    CHECK(__warden_sock_send(c, (void *)0xfffffff0u, 100, 0), WARDEN_EBADPTR);
    CHECK(__warden_sock_recv(c, buf, 0xffffffffu, 0), WARDEN_EBADPTR);
    CHECK(__warden_sock_addr(c, 0, (char *)0xfffffff0u, 64), WARDEN_EBADPTR);
    CHECK(warden_sock_recv(s, buf, 10, 0), WARDEN_ETIMEOUT);
    CHECK(__warden_poll((warden_pollfd *)0xfffffff0u, 10, 0), WARDEN_EBADPTR);
    CHECK(warden_poll(NULL, 5000, 0), WARDEN_EINVAL);
    /* A service with no portal is ready for recv (it would answer at once),
     * but asked only for POLL_OUT it can never be reported: poll must
     * still end at its deadline. */
    warden_pollfd never = {warden_service_create(), WARDEN_POLL_OUT, 0};
    CHECK(warden_poll(&never, 1, 1000 * 1000), 0);
    /* Stale and forged handles. */
    warden_handle d = warden_dup(c);
    CHECK(warden_close(d), 0);
    CHECK(warden_sock_send(d, "x", 1, 0), WARDEN_EBADHANDLE);
    CHECK(warden_sock_send(0x12345, "x", 1, 0), WARDEN_EBADHANDLE);
    CHECK(warden_sock_send(-7, "x", 1, 0), WARDEN_EBADHANDLE);
    /* After all that, the pair still works. */
    CHECK(warden_sock_send(c, "ping", 4, -1), 4);
    CHECK(warden_sock_recv(s, buf, sizeof buf, -1), 4);
    CHECK(warden_close(s), 0);
    CHECK(warden_sock_recv(c, buf, sizeof buf, -1), 0);
    int64_t r = 0;
    for (int i = 0; i < 100 && r >= 0; i++) r = warden_sock_send(c, buf, 1000, -1);
    CHECK(r, WARDEN_EPEERDIED);
    printf(failures ? "bad: %d failures\n" : "bad ok\n", failures);
    return failures;
}

/* Prints "alone N", then polls `h` alone until it is ready to read. */
static void poll_alone(int n, warden_handle h) {
    printf("alone %d\n", n);
    fflush(stdout);
    warden_pollfd one = {h, WARDEN_POLL_IN, 0};
    CHECK(warden_poll(&one, 1, -1), 1);
    CHECK(one.revents & WARDEN_POLL_IN, WARDEN_POLL_IN);
}

/* pollmix's second half: one handle polled at a time. */
static int pollmix_alone(warden_handle svc, warden_handle l) {
    poll_alone(1, l);
    warden_handle c = warden_tcp_accept(l, 0);
    CHECK(c >= 0, 1);
    poll_alone(2, c);
    CHECK(warden_sock_recv(c, buf, sizeof buf, 0) > 0, 1);
    CHECK(warden_sock_send(c, "ok", 2, -1), 2);
    poll_alone(3, svc);
    uint64_t call;
    size_t nh = 0;
    int64_t n = warden_recv(svc, &call, buf, sizeof buf, NULL, &nh);
    CHECK(warden_reply(call, buf, n, NULL, 0), 0);
    printf(failures ? "alone: %d failures\n" : "alone ok\n", failures);
    return failures;
}

static int pollmix(const char *addr) {
    warden_handle svc = warden_service_create();
    warden_handle p = warden_portal_create(svc);
    CHECK(warden_name_register("mix", p), 0);
    warden_handle l = warden_tcp_listen(addr);
    warden_pollfd fds[2] = {{svc, WARDEN_POLL_IN, 0}, {l, WARDEN_POLL_IN, 0}};
    CHECK(warden_poll(fds, 2, 0), 0); /* before anyone knows the address */
    char a[64];
    int32_t n = warden_sock_addr(l, 0, a, sizeof a - 1);
    printf("listening %.*s\n", n > 0 ? (int)n : 0, a);
    fflush(stdout);
    for (int woke = 0; woke < 2;) {
        int32_t r = warden_poll(fds, 2, -1);
        CHECK(r >= 1, 1);
        if (fds[0].revents & WARDEN_POLL_IN) {
            uint64_t call;
            size_t nh = 0;
            int64_t n = warden_recv(svc, &call, buf, sizeof buf, NULL, &nh);
            CHECK(warden_reply(call, buf, n, NULL, 0), 0);
            printf("woke: call\n");
            woke++;
        }
        if (fds[1].revents & WARDEN_POLL_IN) {
            warden_handle c = warden_tcp_accept(l, 0);
            CHECK(c >= 0, 1);
            CHECK(warden_sock_send(c, "hi", 2, -1), 2);
            warden_close(c);
            printf("woke: connection\n");
            woke++;
        }
        fflush(stdout);
    }
    return pollmix_alone(svc, l);
}

/* Blocks in recv on a service of its own (kept open by a portal), until
 * killed; 3 if it ever returns, 2 if the portal could not be made. */
static int wait_for_ever(void) {
    warden_handle s = warden_service_create();
    warden_handle keep = warden_portal_create(s);
    uint64_t call;
    warden_recv(s, &call, buf, 1, NULL, NULL);
    return keep < 0 ? 2 : 3;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const char *addr = argc > 2 ? argv[2] : "127.0.0.1:0";
    if (!strcmp(mode, "echo")) return echo(addr, argc > 3 ? atol(argv[3]) : -1);
    if (!strcmp(mode, "echo-poll")) return echo_poll(addr);
    if (!strcmp(mode, "client")) return client(addr, atol(argv[3]), atol(argv[4]));
    if (!strcmp(mode, "blast")) return blast(addr);
    if (!strcmp(mode, "sink")) return sink(addr);
    if (!strcmp(mode, "accept")) {
        warden_handle l = listen_or_die(addr);
        warden_tcp_accept(l, -1);
        return 3;
    }
    if (!strcmp(mode, "recv")) {
        warden_handle c = connect_or_die(addr);
        printf("connected\n");
        fflush(stdout);
        warden_sock_recv(c, buf, sizeof buf, -1);
        return 3;
    }
    if (!strcmp(mode, "reach") || !strcmp(mode, "reach-when-told")) {
        if (!strcmp(mode, "reach-when-told")) {
            warden_handle told = warden_tcp_accept(listen_or_die("127.0.0.1:0"), -1);
            if (told < 0) return 2;
        }
        for (int i = 2; i < argc; i++) {
            warden_handle c = warden_tcp_connect(argv[i], 5000000000LL);
            printf("reach %s: %s\n", argv[i], c < 0 ? warden_strerror(c) : "ok");
            fflush(stdout);
            if (c >= 0) warden_close(c);
        }
        return 0;
    }
    if (!strcmp(mode, "listeners")) {
        long n = atol(argv[2]), k = 0;
        warden_handle l = 0;
        for (; k < n; k++)
            if ((l = warden_tcp_listen("127.0.0.1:0")) < 0) break;
        printf("listeners %ld: %s\n", k, l < 0 ? warden_strerror(l) : "ok");
        fflush(stdout);
        return wait_for_ever();
    }
    if (!strcmp(mode, "hold")) {
        long n = atol(argv[3]);
        for (long i = 0; i < n; i++) {
            warden_handle c = warden_tcp_connect(addr, -1);
            if (c < 0) return printf("connect %ld: %s\n", i, warden_strerror(c)), 1;
        }
        printf("holding %ld\n", n);
        fflush(stdout);
        return wait_for_ever();
    }
    if (!strcmp(mode, "pass")) return pass(addr);
    if (!strcmp(mode, "child")) return child();
    if (!strcmp(mode, "grants")) return grants();
    if (!strcmp(mode, "bad")) return bad(addr);
    if (!strcmp(mode, "pollmix")) return pollmix(addr);
    printf("unknown mode %s\n", mode);
    return 2;
}
