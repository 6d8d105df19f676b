/* A program as `wasmtime run` users run one, for the command-line tests;
 * it uses only wasi-libc.
 *
 *   program read PATH NAME   print PATH's contents and the variable NAME
 *   program exit N           exit with status N
 *   program serve            answer one HTTP request on the first socket
 *                            descriptor (a listener the command line
 *                            opened), then exit 0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int serve(void) {
    int l = -1;
    for (int fd = 3; fd < 64 && l < 0; fd++) {
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) l = fd;
    }
    if (l < 0) return printf("no listener\n"), 1;
    printf("serving on descriptor %d\n", l);
    fflush(stdout);
    int c = accept(l, NULL, NULL);
    if (c < 0) return perror("accept"), 1;
    char req[4096];
    size_t n = 0;
    while (n < sizeof req - 1 && !strstr(req, "\r\n\r\n")) {
        ssize_t r = recv(c, req + n, sizeof req - 1 - n, 0);
        if (r <= 0) return 1;
        req[n += (size_t)r] = 0;
    }
    const char *reply = "HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\nserved once\n";
    send(c, reply, strlen(reply), 0);
    close(c);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 3 && !strcmp(argv[1], "read")) {
        FILE *f = fopen(argv[2], "r");
        if (!f) return perror(argv[2]), 1;
        char buf[256];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        const char *v = getenv(argv[3]);
        printf("%s: %s\n%s=%s\n", argv[2], buf, argv[3], v ? v : "(unset)");
        return 0;
    }
    if (argc > 2 && !strcmp(argv[1], "exit")) return atoi(argv[2]);
    if (argc > 1 && !strcmp(argv[1], "serve")) return serve();
    printf("usage: program read PATH NAME | exit N | serve\n");
    return 2;
}
