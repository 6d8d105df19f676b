/* A key-value client: writes argv[1] keys of its own (prefixed with
 * argv[2], its task name), reads them back, deletes every other one,
 * checks what is left, then says "bye". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

static warden_handle kv;

static const char *ask(const char *fmt, const char *key, int i) {
    static char req[160], reply[64];
    int len = snprintf(req, sizeof req, fmt, key, i, i * 7);
    int64_t n = warden_call(kv, req, (size_t)len, NULL, 0, reply, sizeof reply - 1, NULL, NULL);
    if (n < 0) { printf("call: %s\n", warden_strerror((int32_t)n)); exit(1); }
    reply[n] = 0;
    return reply;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    kv = warden_name_lookup("kv", -1);
    if (kv < 0) return 1;
    const char *me = argc > 2 ? argv[2] : "client";
    char want[32];
    for (int i = 0; i < n; i++)
        if (strcmp(ask("put %s-%d %d", me, i), "ok")) return 2;
    for (int i = 0; i < n; i++) {
        snprintf(want, sizeof want, "%d", i * 7);
        if (strcmp(ask("get %s-%d", me, i), want)) { printf("bad value for %d\n", i); return 3; }
    }
    for (int i = 0; i < n; i += 2) ask("del %s-%d", me, i);
    int left = 0;
    for (int i = 0; i < n; i++) left += ask("get %s-%d", me, i)[0] != 0;
    ask("bye", "", 0);
    printf("%d keys written, %d left after deleting every other one\n", n, left);
    return left == n / 2 ? 0 : 4;
}
