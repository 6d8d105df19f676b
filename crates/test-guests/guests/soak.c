/* The soak test's tasks: workers that keep spawning children which call
 * a server and die, in every way a task can.
 *
 *   soak main SECONDS WORKERS CHILDREN CALLS
 *                                        spawn the server ("echo" module)
 *                                        and WORKERS workers; when they
 *                                        are done, kill the server, exit 0
 *   soak worker SECONDS CHILDREN CALLS   until SECONDS have passed: spawn
 *                                        CHILDREN children, kill every
 *                                        fifth at once, wait for all
 *   soak child CALLS INDEX               CALLS calls to "soak.echo", a nap
 *                                        of 400-580 ms, then exit 0 (one in
 *                                        ten traps instead)
 * Prints "worker: N generations, M children" at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "warden.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int child(long calls, long index) {
    warden_handle p = warden_name_lookup("soak.echo", 10LL * 1000 * 1000 * 1000);
    if (p < 0) { printf("child: lookup: %s\n", warden_strerror(p)); return 1; }
    char msg[64], resp[64];
    memset(msg, 'm', sizeof msg);
    char *scratch = malloc(64 << 10);
    if (scratch) memset(scratch, 1, 64 << 10);
    for (long i = 0; i < calls; i++) {
        int64_t r = warden_call(p, msg, sizeof msg, NULL, 0, resp, sizeof resp, NULL, NULL);
        if (r < 0) { printf("child: call: %s\n", warden_strerror((int32_t)r)); return 1; }
    }
    struct timespec nap = {0, (400 + index % 10 * 20) * 1000000L};
    nanosleep(&nap, NULL);
    if (index % 10 == 7) __builtin_trap();
    return 0;
}

static int coordinator(const char *seconds, long workers, const char *children, const char *calls) {
    const char *sargv[] = {"server", "soak.echo"};
    warden_budget sb = {4 << 20, 0, 1};
    warden_handle server = warden_task_spawn(warden_module_lookup("echo"), sargv, 2, &sb, NULL, 0);
    if (server < 0) { printf("main: server: %s\n", warden_strerror(server)); return 1; }
    warden_handle self = warden_module_lookup("self");
    const char *wargv[] = {"worker", seconds, children, calls};
    warden_budget wb = {(uint64_t)(atol(children) + 2) * (512 << 10), 0, 1};
    static warden_handle ws[4096];
    if (workers > 4096) workers = 4096;
    for (long i = 0; i < workers; i++) {
        ws[i] = warden_task_spawn(self, wargv, 4, &wb, NULL, 0);
        if (ws[i] < 0) { printf("main: worker %ld: %s\n", i, warden_strerror(ws[i])); return 1; }
    }
    int failed = 0;
    for (long i = 0; i < workers; i++) {
        int32_t status = 0;
        warden_task_wait(ws[i], -1, &status);
        failed |= status != 0;
    }
    warden_task_kill(server);
    printf("main: %ld workers done%s\n", workers, failed ? ", some failed" : "");
    return failed;
}

static int worker(double seconds, long children, const char *calls) {
    enum { MAX = 1024 };
    static warden_handle kids[MAX];
    if (children > MAX) children = MAX;
    warden_handle m = warden_module_lookup("self");
    double end = now() + seconds;
    long generations = 0, spawned = 0;
    while (now() < end) {
        for (long i = 0; i < children; i++) {
            char index[24];
            snprintf(index, sizeof index, "%ld", i);
            const char *argv[] = {"child", calls, index};
            warden_budget b = {512 << 10, 0, 1};
            kids[i] = warden_task_spawn(m, argv, 3, &b, NULL, 0);
            if (kids[i] >= 0) spawned++;
            if (kids[i] >= 0 && i % 5 == 4) warden_task_kill(kids[i]);
        }
        for (long i = 0; i < children; i++) {
            int32_t status;
            if (kids[i] >= 0) {
                warden_task_wait(kids[i], -1, &status);
                warden_close(kids[i]);
            }
        }
        generations++;
    }
    printf("worker: %ld generations, %ld children\n", generations, spawned);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 6 && !strcmp(argv[1], "main")) return coordinator(argv[2], atol(argv[3]), argv[4], argv[5]);
    if (argc >= 5 && !strcmp(argv[1], "worker")) return worker(atof(argv[2]), atol(argv[3]), argv[4]);
    if (argc >= 4 && !strcmp(argv[1], "child")) return child(atol(argv[2]), atol(argv[3]));
    fprintf(stderr, "usage: soak worker SECONDS CHILDREN CALLS | soak child CALLS INDEX\n");
    return 64;
}
