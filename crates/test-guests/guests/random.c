/* WASI's random_get as a program sees it: 1 MiB in one call, filled
 * (about one byte in 256 is zero, not the whole buffer), and two calls
 * that differ. Prints the first 16 bytes of the first small call in hex
 * (so that a test can compare two tasks' draws) and then "random ok".
 * With the argument "wild" it asks for 64 bytes past the end of its
 * memory, with "huge" for 4 GiB - 1 bytes: either traps the task.
 * With "fill N" it fills N MiB in one call and prints "filled". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wasi/api.h>

static unsigned char big[1 << 20];
static unsigned char a[64], b[64];

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "wild") == 0)
        return __wasi_random_get((unsigned char *)0xfffffff0, 64) + 100;
    if (argc > 1 && strcmp(argv[1], "huge") == 0)
        return __wasi_random_get(big, 0xffffffff) + 100;
    if (argc > 2 && strcmp(argv[1], "fill") == 0) {
        size_t n = (size_t)atol(argv[2]) << 20;
        unsigned char *p = malloc(n);
        if (!p || __wasi_random_get(p, n) != 0) return 15;
        printf("filled\n");
        return 0;
    }
    if (__wasi_random_get(big, sizeof big) != 0) return 10;
    size_t zeros = 0;
    for (size_t i = 0; i < sizeof big; i++) zeros += big[i] == 0;
    /* Expected 4096, standard deviation about 64. */
    if (zeros < 3500 || zeros > 4700) {
        printf("zeros: %zu of %zu\n", zeros, sizeof big);
        return 11;
    }
    if (__wasi_random_get(a, sizeof a) != 0 || __wasi_random_get(b, sizeof b) != 0) return 12;
    if (memcmp(a, b, sizeof a) == 0) return 13;
    for (int i = 0; i < 16; i++) printf("%02x", a[i]);
    printf("\nrandom ok\n");
    return 0;
}
