/* Reads PATH over and over with stdio, as any program would: prints
 * "read ok: TEXT" at the first success, "error: MESSAGE" at the first
 * failure after that, and "read again: TEXT" at the first success after
 * a failure, then exits. Usage: served_loop PATH */
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int read_once(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return errno;
    size_t n = fread(buf, 1, cap - 1, f);
    int e = ferror(f) ? errno : 0;
    fclose(f);
    buf[n] = 0;
    return e;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char buf[256];
    int state = 0; /* 0: no read yet, 1: read ok, 2: failed since */
    for (;;) {
        int e = read_once(argv[1], buf, sizeof buf);
        if (e == 0 && state == 0) { printf("read ok: %s", buf); fflush(stdout); state = 1; }
        if (e != 0 && state == 1) { printf("error: %s\n", strerror(e)); fflush(stdout); state = 2; }
        if (e == 0 && state == 2) { printf("read again: %s", buf); fflush(stdout); return 0; }
    }
}
