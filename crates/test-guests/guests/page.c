/* A WAGI handler for the web benchmarks: a body of SIZE bytes of 'x',
 * SIZE from its first argument (default 100). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char body[1 << 17];

int main(int argc, char **argv) {
    long size = argc > 1 ? atol(argv[1]) : 100;
    if (size < 0 || size > (long)sizeof body) size = 100;
    memset(body, 'x', (size_t)size);
    fputs("Content-Type: text/plain\r\n\r\n", stdout);
    fwrite(body, 1, (size_t)size, stdout);
    return 0;
}
