/* Process creation: fork + exec + wait of a program, N times.
 *   spawn N PROGRAM [ARGS...]  ->  prints "spawn <ns per process>" (one at
 *                                  a time) and "spawn_batch <ns>" (all N
 *                                  started, then all waited for)
 * The child's stdout goes to /dev/null. Timed from fork to the parent
 * seeing the child's exit. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

int main(int argc, char **argv) {
    if (argc < 3) return 64;
    long n = atol(argv[1]);
    int null = open("/dev/null", O_WRONLY);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            dup2(null, 1);
            execv(argv[2], argv + 2);
            _exit(127);
        }
        int status;
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "spawn: %s failed\n", argv[2]);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("spawn %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) {
            dup2(null, 1);
            execv(argv[2], argv + 2);
            _exit(127);
        }
    }
    for (long i = 0; i < n; i++) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "spawn: %s failed\n", argv[2]);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("spawn_batch %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
