/* The smallest useful native program: prints one line and exits.
 *   hello          print "hello" and exit
 *   hello hold M   touch M MiB, print "ready", then spin (kill-to-reclaim) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
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
