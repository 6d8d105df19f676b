/* A native epoll echo server, the peer of Warden's echo task: listens on
 * 127.0.0.1 (port from argv[1], 0 = any), prints "listening <port>", and
 * echoes every connection from one epoll loop in one thread. A write that
 * would block waits for the socket to drain (poll), as the Warden task's
 * send does. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[1 << 16];

static int send_all(int fd, const char *p, ssize_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pf = {fd, POLLOUT, 0};
            poll(&pf, 1, -1);
            continue;
        }
        if (w < 0) return -1;
        p += w;
        n -= w;
    }
    return 0;
}

int main(int argc, char **argv) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(argc > 1 ? atoi(argv[1]) : 0)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1024)) return perror("listen"), 1;
    socklen_t len = sizeof a;
    getsockname(l, (struct sockaddr *)&a, &len);
    printf("listening %d\n", ntohs(a.sin_port));
    fflush(stdout);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == l) {
                int c;
                while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
                continue;
            }
            ssize_t got = recv(fd, buf, sizeof buf, 0);
            if (got > 0 && send_all(fd, buf, got) == 0) continue;
            if (got < 0 && errno == EAGAIN) continue;
            epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
            close(fd);
        }
    }
}
