/* Counts the bytes on stdin until end of file. */
#include <stdio.h>

int main(void) {
    char buf[4096];
    size_t total = 0, n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) total += n;
    printf("read %zu bytes\n", total);
    return 0;
}
