/* The smallest useful native program: prints one line and exits.
 *   hello          print "hello" and exit
 *   hello hold M   touch M MiB, print "ready", then spin (kill-to-reclaim)
 *   hello tree N   print "ready", read a line, fork N children that each
 *                  print "asleep PID" and sleep; read another line, then
 *                  SIGKILL and reap them all, print "reaped", and exit at
 *                  end of input (mass death, beside Warden's spawn-wide) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int tree(long n) {
    char line[16];
    pid_t *kids = calloc(n, sizeof *kids);
    if (!kids) return 1;
    puts("ready");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (long i = 0; i < n; i++) {
        kids[i] = fork();
        if (kids[i] < 0) return 1;
        if (kids[i] == 0) {
            printf("asleep %d\n", (int)getpid());
            fflush(stdout);
            for (;;) pause();
        }
    }
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (long i = 0; i < n; i++) kill(kids[i], SIGKILL);
    for (long i = 0; i < n; i++) waitpid(kids[i], NULL, 0);
    puts("reaped");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {}
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "tree")) return tree(atol(argv[2]));
    if (argc > 2 && !strcmp(argv[1], "hold")) {
        size_t bytes = (size_t)atol(argv[2]) << 20;
        volatile char *p = malloc(bytes);
        if (!p) return 1;
        memset((void *)p, 1, bytes);
        puts("ready");
        fflush(stdout);
        for (;;) p[0]++;
    }
    puts("hello");
    return 0;
}
