/* @NAME@: a C program for Warden. It is plain WASI (wasi-libc): it reads
 * its arguments and environment, and writes to stdout, as it would under
 * any WASI runtime; Warden runs it as a task with its own budgets.
 *
 * Build: ./build      Run: warden run @NAME@.wasm --memory-limit 16MiB -- you
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    const char *who = argc > 1 ? argv[1] : "world";
    const char *greeting = getenv("GREETING");
    printf("%s, %s, from @NAME@\n", greeting ? greeting : "Hello", who);
    return 0;
}
