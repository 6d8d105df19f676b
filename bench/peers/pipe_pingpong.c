/* Two Linux processes ping-ponging a message over a pair of pipes.
 *   pipe_pingpong N BYTES [pin]  ->  prints "pipe <ns per round trip>" */
#define _GNU_SOURCE
#include "pin.h"
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

static void full(int fd, char *buf, size_t n, int writing) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = writing ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
        if (r <= 0) exit(1);
        done += (size_t)r;
    }
}


int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : 1;
    char *buf = calloc(1, bytes ? bytes : 1);
    int ping[2], pong[2];
    if (pipe(ping) || pipe(pong)) return 1;
    pin_if_asked(argc, argv);
    pid_t pid = fork();
    if (pid == 0) {
        for (long i = 0; i < n; i++) {
            full(ping[0], buf, bytes ? bytes : 1, 0);
            full(pong[1], buf, 1, 1);
        }
        _exit(0);
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        full(ping[1], buf, bytes ? bytes : 1, 1);
        full(pong[0], buf, 1, 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    waitpid(pid, NULL, 0);
    printf("pipe %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
