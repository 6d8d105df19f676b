/* Allocates and touches N MiB (argv[1], default 4), then exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int mib = argc > 1 ? atoi(argv[1]) : 4;
    volatile unsigned char *p = malloc((size_t)mib << 20);
    if (!p) { puts("malloc failed"); return 1; }
    memset((void *)p, 1, (size_t)mib << 20);
    return p[12345] == 1 ? 0 : 2;
}
