/* Allocates 64 KiB blocks until malloc returns NULL, touching each one, then
 * shows it is still alive by freeing everything and allocating again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK (64 * 1024)
static void *blocks[1 << 16];

int main(void) {
    int n = 0;
    while (n < (1 << 16)) {
        void *p = malloc(BLOCK);
        if (!p) break;
        memset(p, n & 0xff, BLOCK);
        blocks[n++] = p;
    }
    printf("allocated %d blocks before malloc returned NULL\n", n);
    long sum = 0;
    for (int i = 0; i < n; i++) { sum += ((unsigned char *)blocks[i])[7]; free(blocks[i]); }
    void *again = malloc(BLOCK);
    printf("still running: %s (checksum %ld)\n", again ? "malloc works again" : "malloc failed", sum);
    return again ? 0 : 3;
}
