/* An HTTP/1.0 file server written only against wasi-libc: no Warden API.
 *
 * It serves the files of its preopened directory /www on the listener the
 * manifest preopens for it (preopen_listeners), which it finds as the
 * first descriptor that is a socket, as a program run with
 * `wasmtime run --tcplisten` used to. One task serves many clients at
 * once with poll(); each request is answered and the connection closed.
 *
 *   fileserver [N]    exit after N responses (default: serve for ever)
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CLIENTS 64

struct client {
    int fd;
    size_t len;
    char req[2048];
};

static int find_listener(void) {
    for (int fd = 3; fd < 64; fd++) {
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) return fd;
    }
    return -1;
}

static void send_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = send(fd, buf, len, 0);
        if (n <= 0) return;
        buf += n;
        len -= n;
    }
}

static const char *type_of(const char *path) {
    const char *dot = strrchr(path, '.');
    if (dot && !strcmp(dot, ".html")) return "text/html";
    if (dot && !strcmp(dot, ".css")) return "text/css";
    return "text/plain";
}

static void respond(int fd, const char *req) {
    char path[1024], header[256];
    if (sscanf(req, "GET %1000s HTTP/", path + 4) != 1 || strstr(path + 4, "..")) {
        const char *bad = "HTTP/1.0 400 Bad Request\r\nContent-Length: 12\r\n\r\nbad request\n";
        send_all(fd, bad, strlen(bad));
        return;
    }
    memcpy(path, "/www", 4);
    if (path[strlen(path) - 1] == '/') strcat(path, "index.html");
    int file = open(path, O_RDONLY);
    struct stat st;
    if (file < 0 || fstat(file, &st) != 0 || !S_ISREG(st.st_mode)) {
        const char *nf = "HTTP/1.0 404 Not Found\r\nContent-Length: 10\r\n\r\nnot found\n";
        send_all(fd, nf, strlen(nf));
        if (file >= 0) close(file);
        return;
    }
    int n = snprintf(header, sizeof header,
                     "HTTP/1.0 200 OK\r\nContent-Type: %s\r\nContent-Length: %lld\r\n\r\n",
                     type_of(path), (long long)st.st_size);
    send_all(fd, header, n);
    static char body[16384];
    ssize_t got;
    while ((got = read(file, body, sizeof body)) > 0) send_all(fd, body, got);
    close(file);
}

int main(int argc, char **argv) {
    long limit = argc > 1 ? atol(argv[1]) : -1;
    int listener = find_listener();
    if (listener < 0) {
        fprintf(stderr, "no preopened listener\n");
        return 1;
    }
    printf("serving /www on descriptor %d\n", listener);
    fflush(stdout);
    static struct client clients[MAX_CLIENTS];
    struct pollfd fds[MAX_CLIENTS + 1];
    size_t n = 0;
    long served = 0;
    while (limit < 0 || served < limit) {
        fds[0] = (struct pollfd){.fd = listener, .events = POLLIN};
        for (size_t i = 0; i < n; i++) fds[i + 1] = (struct pollfd){.fd = clients[i].fd, .events = POLLIN};
        if (poll(fds, n + 1, -1) < 0) return perror("poll"), 1;
        if (fds[0].revents & POLLIN && n < MAX_CLIENTS) {
            int c = accept(listener, NULL, NULL);
            if (c >= 0) clients[n++] = (struct client){.fd = c};
        }
        for (size_t i = 0; i < n; i++) {
            if (!(fds[i + 1].revents & (POLLIN | POLLHUP))) continue;
            struct client *cl = &clients[i];
            ssize_t got = read(cl->fd, cl->req + cl->len, sizeof cl->req - 1 - cl->len);
            int done = got <= 0;
            if (got > 0) {
                cl->len += got;
                cl->req[cl->len] = 0;
                if (strstr(cl->req, "\r\n\r\n") || cl->len == sizeof cl->req - 1) {
                    respond(cl->fd, cl->req);
                    served++;
                    shutdown(cl->fd, SHUT_WR);
                    done = 1;
                }
            }
            if (done) {
                close(cl->fd);
                *cl = clients[--n];
                fds[i + 1] = fds[n + 1];
                i--;
            }
        }
    }
    printf("served %ld responses\n", served);
    return 0;
}
