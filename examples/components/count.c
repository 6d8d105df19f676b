/* build: component
 * A C program made a WASI 0.2 command component: compiled for WASI
 * preview 1 by clang, then adapted with Wasmtime's preview-1 adapter
 * (`scripts/guest-build component`). It counts the bytes on its
 * standard input. */
#include <stdio.h>

int main(void) {
    char buf[4096];
    size_t total = 0, n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) total += n;
    printf("C component read %zu bytes\n", total);
    return 0;
}
