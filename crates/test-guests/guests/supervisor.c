/* Supervision in a guest (warden_supervisor_*).
 *
 *   supervisor STRATEGY    one_for_one | one_for_all | rest_for_one: spawn
 *                          permanent workers A, B, C; once each has said
 *                          hello (a call to this task), kill B, wait for
 *                          the supervisor's report (found by warden_poll),
 *                          and print "restarted member=1 status=-2
 *                          restarts=1" and "again: X Y" (the workers that
 *                          said hello again, sorted)
 *   supervisor crashloop   a permanent child that exits 1 at once, under a
 *                          supervisor allowing 3 restarts: print each
 *                          report, then check later waits are refused
 *   supervisor transient   a transient child exiting 0, and one exiting 1:
 *                          print their reports
 *   supervisor closed      close a supervisor with a sleeping child: print
 *                          how the child's run ended
 *   supervisor hostile     bad specs, handles, pointers and indices: each
 *                          refused with its error code; prints
 *                          "hostile: ok"
 *   worker NAME            say hello NAME to "hello", then sleep
 *   exit CODE              exit with CODE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "warden.h"
#include "checks.h"

static warden_handle module(void) {
    static warden_handle m = -1;
    if (m < 0) m = warden_module_lookup("self");
    return m;
}

static int32_t add(warden_handle sup, int32_t restart, const char *a, const char *b) {
    const char *argv[] = {a, b};
    /* Three of these fill most of the parent's 16 MiB: a restart of all
     * three fits only once the runs it stopped have ended. */
    warden_budget budget = {4 << 20, 0, 1};
    return warden_supervisor_spawn(sup, restart, module(), argv, 2, &budget, NULL, 0);
}

static warden_handle supervisor(uint32_t strategy, uint32_t max_restarts) {
    warden_supervisor_spec spec = {strategy, max_restarts, 10000000000ull, 1000000ull};
    return warden_supervisor_create(&spec);
}

static void report(const warden_supervisor_event *e) {
    const char *kind = e->kind == WARDEN_SUPERVISOR_RESTARTED ? "restarted"
                     : e->kind == WARDEN_SUPERVISOR_ENDED     ? "ended"
                     : e->kind == WARDEN_SUPERVISOR_GAVE_UP   ? "gave up"
                                                              : "?";
    printf("%s member=%d status=%d restarts=%u\n", kind, e->member, e->status, e->restarts);
}

/* Receives `n` hellos on `service`; their names, sorted, in `out`. */
static void hellos(warden_handle service, int n, char *out) {
    char names[8] = {0};
    for (int i = 0; i < n; i++) {
        uint64_t call;
        char name[8] = {0};
        if (warden_recv(service, &call, name, sizeof name - 1, NULL, NULL) < 0) exit(3);
        names[i] = name[0];
        warden_reply(call, "", 0, NULL, 0);
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (names[j] < names[i]) { char t = names[i]; names[i] = names[j]; names[j] = t; }
    for (int i = 0; i < n; i++) { out[2 * i] = names[i]; out[2 * i + 1] = ' '; }
    out[n ? 2 * n - 1 : 0] = 0;
}

static int strategy(const char *s) {
    uint32_t how = !strcmp(s, "one_for_all") ? WARDEN_ONE_FOR_ALL
                 : !strcmp(s, "rest_for_one") ? WARDEN_REST_FOR_ONE : WARDEN_ONE_FOR_ONE;
    int again = how == WARDEN_ONE_FOR_ALL ? 3 : how == WARDEN_REST_FOR_ONE ? 2 : 1;
    warden_handle service = warden_service_create();
    warden_namespace_bind("hello", warden_portal_create(service));
    warden_handle sup = supervisor(how, 5);
    CHECK(add(sup, WARDEN_PERMANENT, "worker", "A"), 0);
    CHECK(add(sup, WARDEN_PERMANENT, "worker", "B"), 1);
    CHECK(add(sup, WARDEN_PERMANENT, "worker", "C"), 2);
    char names[16];
    hellos(service, 3, names);
    CHECK(warden_task_kill(warden_supervisor_child(sup, 1)), 0);
    warden_pollfd fd = {sup, WARDEN_POLL_IN, 0};
    CHECK(warden_poll(&fd, 1, -1), 1);
    warden_supervisor_event e;
    CHECK(warden_supervisor_wait(sup, -1, &e), 0);
    report(&e);
    hellos(service, again, names);
    printf("again: %s\n", names);
    fflush(stdout);
    return failures;
}

static int crashloop(void) {
    warden_handle sup = supervisor(WARDEN_ONE_FOR_ONE, 3);
    CHECK(add(sup, WARDEN_PERMANENT, "exit", "1"), 0);
    warden_supervisor_event e = {0};
    while (e.kind != WARDEN_SUPERVISOR_GAVE_UP) {
        if (warden_supervisor_wait(sup, -1, &e) < 0) return 9;
        report(&e);
    }
    CHECK(warden_supervisor_wait(sup, 0, &e), WARDEN_EPEERDIED);
    CHECK(warden_supervisor_child(sup, 0), WARDEN_EPEERDIED);
    fflush(stdout);
    return failures;
}

static int transient(void) {
    warden_handle sup = supervisor(WARDEN_ONE_FOR_ONE, 1);
    CHECK(add(sup, WARDEN_TRANSIENT, "exit", "0"), 0);
    warden_supervisor_event e;
    CHECK(warden_supervisor_wait(sup, -1, &e), 0);
    report(&e);
    CHECK(warden_supervisor_wait(sup, 0, &e), WARDEN_ETIMEOUT);
    CHECK(add(sup, WARDEN_TEMPORARY, "exit", "1"), 1);
    CHECK(warden_supervisor_wait(sup, -1, &e), 0);
    report(&e);
    fflush(stdout);
    return failures;
}

static int closed(void) {
    warden_handle sup = supervisor(WARDEN_ONE_FOR_ONE, 1);
    CHECK(add(sup, WARDEN_PERMANENT, "exit", "sleep"), 0);
    warden_handle run = warden_supervisor_child(sup, 0);
    CHECK(warden_close(sup), 0);
    int32_t status = 0;
    CHECK(warden_task_wait(run, -1, &status), 0);
    printf("closed: child status %d\n", status);
    fflush(stdout);
    return failures;
}

static int hostile(void) {
    warden_supervisor_spec bad = {7, 1, 1000, 0};
    CHECK(warden_supervisor_create(&bad), WARDEN_EINVAL);
    bad.strategy = WARDEN_ONE_FOR_ONE;
    bad.within_ns = 0;
    CHECK(warden_supervisor_create(&bad), WARDEN_EINVAL);
    CHECK(warden_supervisor_create((const warden_supervisor_spec *)0xfffffff0u), WARDEN_EBADPTR);
    warden_handle sup = supervisor(WARDEN_ONE_FOR_ONE, 1);
    CHECK(add(sup, 9, "exit", "0"), WARDEN_EINVAL);
    CHECK(add(warden_service_create(), WARDEN_PERMANENT, "exit", "0"), WARDEN_EBADHANDLE);
    CHECK(add(12345, WARDEN_PERMANENT, "exit", "0"), WARDEN_EBADHANDLE);
    warden_budget huge = {1ull << 40, 0, 1};
    const char *argv[] = {"exit", "0"};
    CHECK(warden_supervisor_spawn(sup, WARDEN_PERMANENT, module(), argv, 2, &huge, NULL, 0), WARDEN_ENOMEM);
    CHECK(warden_supervisor_child(sup, 0), WARDEN_EINVAL);
    CHECK(warden_supervisor_child(sup, -1), WARDEN_EINVAL);
    CHECK(warden_supervisor_wait(sup, 0, (warden_supervisor_event *)0xfffffff8u), WARDEN_EBADPTR);
    warden_supervisor_event e;
    CHECK(warden_supervisor_wait(sup, 0, &e), WARDEN_ETIMEOUT);
    CHECK(warden_supervisor_wait(module(), 0, &e), WARDEN_EBADHANDLE);
    CHECK(warden_dup(sup), WARDEN_EINVAL);
    printf("hostile: %s\n", failures ? "FAILED" : "ok");
    fflush(stdout);
    return failures;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "worker")) {
        warden_handle hello = warden_name_lookup("hello", -1);
        char buf[1];
        warden_call(hello, argv[2], strlen(argv[2]), NULL, 0, buf, 0, NULL, NULL);
        for (;;) sleep(1000);
    }
    if (!strcmp(mode, "exit")) {
        if (!strcmp(argv[2], "sleep")) for (;;) sleep(1000);
        return atoi(argv[2]);
    }
    if (!strcmp(mode, "supervisor") && argc > 2) {
        if (!strcmp(argv[2], "crashloop")) return crashloop();
        if (!strcmp(argv[2], "transient")) return transient();
        if (!strcmp(argv[2], "closed")) return closed();
        if (!strcmp(argv[2], "hostile")) return hostile();
        return strategy(argv[2]);
    }
    return 2;
}
