/* Nested tasks.
 *
 *   nest budgets            spawn children with various budgets; check what
 *                           is refused; a child that spawns a grandchild
 *   nest child [spawn]      a child: optionally tries to spawn a grandchild
 *                           bigger than itself, prints, exits 7
 *   nest tree               spawn a child that spawns a grandchild, both
 *                           spinning; print "tree up" and spin
 *   nest spin               spin forever
 *   nest family             spawn a spinning child of weight 1, and spin
 *   nest respawn            spawn and wait for a big child, 2,000 times
 *   nest chain N            a chain of N descendants, each the only child
 *                           of the one before; the last sleeps
 *   nest chain-return N     the same; the root returns once it is built
 *   nest interpose          bind "kv" to its own service, spawn a child that
 *                           looks "kv" up, and serve the child's call
 *   nest lookup             look "kv" up and call it; print the reply
 *   nest granted            print what the granted handle 0 is
 *   nest suspend            spawn a spinning child, suspend, resume, kill
 *   nest overuse            children that hit their memory and CPU limits
 *                           and notify: raise one, kill the other
 *   nest grow               grow memory until refused, print the pages; do
 *                           it again after 200 ms */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "warden.h"
#include "checks.h"

static warden_handle spawn(const char *arg1, const char *arg2, uint64_t mem, uint32_t share,
                           const warden_handle *grant, size_t ngrant) {
    static warden_handle m = -1;
    if (m < 0) m = warden_module_lookup("self");
    const char *argv[] = {arg1, arg2};
    warden_budget b = {mem, 0, share};
    return warden_task_spawn(m, argv, arg2 ? 2 : 1, &b, grant, ngrant);
}

static void spin(void) { for (volatile int i = 0;; i++) {} }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "budgets")) {
        /* This task: memory limit 8 MiB, the default share. Memory is an
         * amount, carved; a share is a weight inside this task's own, so
         * any positive weight is fine, however many children there are. */
        CHECK(spawn("child", NULL, 0, 1, NULL, 0), WARDEN_EINVAL);
        CHECK(spawn("child", NULL, 1 << 20, 0, NULL, 0), WARDEN_EINVAL);
        CHECK(spawn("child", NULL, 64 << 20, 1, NULL, 0), WARDEN_ENOMEM);
        warden_handle a = spawn("child", NULL, 2 << 20, 1, NULL, 0);
        CHECK(a >= 0, 1);
        warden_handle heavy = spawn("child", NULL, 1 << 20, 1000, NULL, 0);
        CHECK(heavy >= 0, 1);
        int32_t status = 0;
        CHECK(spawn("child", NULL, 6 << 20, 1, NULL, 0), WARDEN_ENOMEM); /* under 5 MiB left */
        /* A failed spawn moves nothing; a successful one does. */
        warden_handle svc = warden_service_create();
        warden_handle moved[] = {warden_portal_create(svc) | WARDEN_MOVE};
        CHECK(spawn("child", NULL, 6 << 20, 1, moved, 1), WARDEN_ENOMEM);
        warden_handle copy = warden_dup(moved[0] & ~WARDEN_MOVE);
        CHECK(copy >= 0, 1);
        CHECK(warden_close(copy), 0);
        warden_handle mover = spawn("child", NULL, 1 << 20, 1, moved, 1);
        CHECK(mover >= 0, 1);
        CHECK(warden_close(moved[0] & ~WARDEN_MOVE), WARDEN_EBADHANDLE);
        CHECK(warden_task_wait(mover, -1, &status), 0);
        CHECK(warden_task_wait(a, -1, &status), 0);
        CHECK(status, 7);
        CHECK(warden_task_wait(heavy, -1, &status), 0);
        CHECK(status, 7);
        warden_handle b = spawn("child", "spawn", 2 << 20, 3, NULL, 0);
        CHECK(warden_task_wait(b, -1, &status), 0);
        CHECK(status, 7);
        printf(failures ? "budgets: %d failures\n" : "budgets: ok\n", failures);
        return failures;
    }
    if (!strcmp(mode, "child")) {
        if (argc > 2) {
            /* A grandchild cannot have more than this child was given. */
            CHECK(spawn("child", NULL, 4 << 20, 1, NULL, 0), WARDEN_ENOMEM);
            warden_handle g = spawn("child", NULL, 1 << 20, 1, NULL, 0);
            int32_t status = 0;
            CHECK(warden_task_wait(g, -1, &status), 0);
            CHECK(status, 7);
            printf(failures ? "grandchild checks: %d failures\n" : "grandchild checks: ok\n", failures);
        }
        return 7;
    }
    if (!strcmp(mode, "tree")) {
        warden_handle c = spawn("tree-child", NULL, 1 << 20, 2, NULL, 0);
        CHECK(c >= 0, 1);
        printf("tree up\n");
        fflush(stdout);
        spin();
    }
    if (!strcmp(mode, "tree-child")) {
        spawn("spin", NULL, 256 << 10, 1, NULL, 0);
        spin();
    }
    if (!strcmp(mode, "spin")) spin();
    if (!strcmp(mode, "chain") || !strcmp(mode, "chain-return")) {
        /* chain N: this task's budget is (N + 1) * 192 KiB; spawn a child
         * "chain N-1" with N * 192 KiB, wait for it; at N = 0, call the
         * portal granted down the chain (if any), then sleep.
         * chain-return N: the same chain under a root that returns as
         * soon as the bottom has called it (its end must end them all). */
        long n = argc > 2 ? atol(argv[2]) : 0;
        warden_handle up = warden_task_granted(0), s = -1;
        if (!strcmp(mode, "chain-return")) {
            s = warden_service_create();
            up = warden_portal_create(s);
        }
        if (n == 0) {
            char b[4];
            if (up >= 0) warden_call(up, "hi", 2, NULL, 0, b, sizeof b, NULL, NULL);
            for (;;) sleep(1000);
        }
        char next[24];
        snprintf(next, sizeof next, "%ld", n - 1);
        warden_handle c = spawn("chain", next, (uint64_t)n * (192 << 10), 1, &up, up >= 0);
        if (c < 0) {
            printf("chain %ld: spawn: %s\n", n, warden_strerror(c));
            return 1;
        }
        if (s >= 0) {
            uint64_t call;
            char b[4];
            int64_t r = warden_recv(s, &call, b, sizeof b, NULL, NULL);
            printf("chain-return: bottom reached (%s)\n", r >= 0 ? "called" : warden_strerror(r));
            return r < 0;
        }
        int32_t status = 0;
        warden_task_wait(c, -1, &status);
        return 0;
    }
    if (!strcmp(mode, "respawn")) {
        /* More than half this task's budget, again and again: each child's
         * budget must be back before its end wakes this task. */
        for (int i = 0; i < 2000; i++) {
            warden_handle c = spawn("child", NULL, 4 << 20, 1, NULL, 0);
            if (c < 0) {
                printf("respawn %d: %s\n", i, warden_strerror(c));
                return 1;
            }
            int32_t status = 0;
            CHECK(warden_task_wait(c, -1, &status), 0);
            CHECK(warden_close(c), 0);
        }
        printf(failures ? "respawn: %d failures\n" : "respawn: ok\n", failures);
        return failures;
    }
    if (!strcmp(mode, "family")) {
        /* A spinning child of weight 1 beside this spinning parent. */
        CHECK(spawn("spin", NULL, 256 << 10, 1, NULL, 0) >= 0, 1);
        spin();
    }
    if (!strcmp(mode, "interpose")) {
        warden_handle s = warden_service_create();
        warden_handle p = warden_portal_create(s);
        CHECK(warden_namespace_bind("kv", p), 0);
        CHECK(warden_namespace_bind("secret", -1), 0);
        warden_handle c = spawn("lookup", NULL, 1 << 20, 1, NULL, 0);
        char buf[64];
        uint64_t call;
        int64_t n = warden_recv(s, &call, buf, sizeof buf, NULL, NULL);
        printf("parent intercepted: %.*s\n", (int)(n > 0 ? n : 0), buf);
        warden_reply(call, "from the parent", 15, NULL, 0);
        int32_t status = 0;
        CHECK(warden_task_wait(c, -1, &status), 0);
        return failures + status;
    }
    if (!strcmp(mode, "lookup")) {
        CHECK(warden_name_lookup("secret", 0), WARDEN_EDENIED);
        warden_handle kv = warden_name_lookup("kv", 0);
        char out[64];
        int64_t n = warden_call(kv, "get x", 5, NULL, 0, out, sizeof out, NULL, NULL);
        printf("child got: %.*s\n", (int)(n > 0 ? n : 0), out);
        return failures;
    }
    if (!strcmp(mode, "suspend")) {
        warden_handle c = spawn("spin", NULL, 256 << 10, 1, NULL, 0);
        int32_t status = 0;
        CHECK(warden_task_suspend(c), 0);
        CHECK(warden_task_wait(c, 50 * 1000 * 1000, &status), WARDEN_ETIMEOUT);
        CHECK(warden_task_resume(c), 0);
        CHECK(warden_task_kill(c), 0);
        CHECK(warden_task_wait(c, -1, &status), 0);
        CHECK(status, WARDEN_STATUS_KILLED);
        CHECK(warden_task_kill(c), WARDEN_EPEERDIED);
        printf(failures ? "suspend: %d failures\n" : "suspend: ok\n", failures);
        return failures;
    }
    if (!strcmp(mode, "grow")) {
        for (int round = 0; round < 2; round++) {
            while (__builtin_wasm_memory_grow(0, 1) != (size_t)-1) {}
            printf("grow: %zu pages\n", __builtin_wasm_memory_size(0));
            fflush(stdout);
            usleep(200 * 1000);
        }
        return 0;
    }
    if (!strcmp(mode, "overuse")) {
        warden_event ev;
        int32_t status = 0;
        warden_handle g = spawn("grow", NULL, 1 << 20, 1, NULL, 0);
        CHECK(warden_task_event(g, 5LL * 1000 * 1000 * 1000, &ev), 0);
        CHECK(ev.kind, WARDEN_EVENT_MEMORY);
        CHECK(warden_task_raise(g, 2 << 20, 0), 0);
        CHECK(warden_task_raise(g, 1 << 20, 0), WARDEN_EINVAL); /* no lowering */
        CHECK(warden_task_wait(g, -1, &status), 0);
        CHECK(status, 0);
        while (warden_task_event(g, 0, &ev) == 0) {} /* its second denial, if any */
        CHECK(warden_task_event(g, 0, &ev), WARDEN_EPEERDIED);

        warden_handle m = warden_module_lookup("self");
        const char *argv[] = {"spin"};
        warden_budget b = {256 << 10, 100 * 1000 * 1000, 1};
        warden_handle s = warden_task_spawn(m, argv, 1, &b, NULL, 0);
        CHECK(warden_task_event(s, 5LL * 1000 * 1000 * 1000, &ev), 0);
        CHECK(ev.kind, WARDEN_EVENT_CPU);
        CHECK(ev.value >= 100 * 1000 * 1000, 1);
        CHECK(warden_task_wait(s, 100 * 1000 * 1000, &status), WARDEN_ETIMEOUT); /* suspended, alive */
        CHECK(warden_task_raise(s, 0, 200 * 1000 * 1000), 0);
        CHECK(warden_task_event(s, 5LL * 1000 * 1000 * 1000, &ev), 0);
        CHECK(ev.kind, WARDEN_EVENT_CPU);
        CHECK(ev.value >= 200 * 1000 * 1000, 1);
        CHECK(warden_task_kill(s), 0);
        CHECK(warden_task_wait(s, -1, &status), 0);
        CHECK(status, WARDEN_STATUS_KILLED);
        printf(failures ? "overuse: %d failures\n" : "overuse: ok\n", failures);
        return failures;
    }
    return 64;
}
