/* A server that never answers, and its clients.
 *
 *   stuck server         register "stuck", take one call, then spin
 *                        without replying (on the caller's lent CPU)
 *   stuck late           register "stuck", take one call, wait until the
 *                        client has given up (it registers "gave-up"),
 *                        then reply; print the reply's result and call
 *                        "gave-up" to let the client end
 *   stuck client         call "stuck" and wait for ever; print the result
 *   stuck client-timeout call "stuck" with a 50 ms deadline; print the
 *                        result, register "gave-up" and answer one call
 * Clients exit 0 when the call failed as expected. */
#include <string.h>
#include "warden.h"
#include "checks.h"

static void spin(void) { for (volatile int i = 0;; i++) {} }

static warden_handle serve(void) {
    warden_handle s = warden_service_create();
    CHECK(warden_name_register("stuck", warden_portal_create(s)), 0);
    return s;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    char buf[64];
    uint64_t call = 0;
    if (!strcmp(mode, "server") || !strcmp(mode, "late")) {
        warden_handle s = serve();
        CHECK(warden_recv(s, &call, buf, sizeof buf, NULL, NULL), 5);
        if (!strcmp(mode, "server")) spin();
        warden_handle gave_up = warden_name_lookup("gave-up", -1);
        CHECK(gave_up >= 0, 1);
        int32_t r = warden_reply(call, "late", 4, NULL, 0);
        printf("late reply: %s\n", warden_strerror(r));
        fflush(stdout);
        /* Let the client go. */
        CHECK(warden_call(gave_up, "bye", 3, NULL, 0, buf, sizeof buf, NULL, NULL), 0);
        return r == WARDEN_EPEERDIED ? failures : 1;
    }
    warden_handle p = warden_name_lookup("stuck", -1);
    CHECK(p >= 0, 1);
    if (!strcmp(mode, "client")) {
        int64_t r = warden_call(p, "hello", 5, NULL, 0, buf, sizeof buf, NULL, NULL);
        printf("call: %s\n", r < 0 ? warden_strerror((int32_t)r) : "answered");
        return r == WARDEN_EPEERDIED ? failures : 1;
    }
    if (!strcmp(mode, "client-timeout")) {
        int64_t r = warden_call_timeout(p, "hello", 5, NULL, 0, buf, sizeof buf, NULL, NULL,
                                        50 * 1000 * 1000);
        printf("call: %s\n", r < 0 ? warden_strerror((int32_t)r) : "answered");
        fflush(stdout);
        warden_handle s = warden_service_create();
        CHECK(warden_name_register("gave-up", warden_portal_create(s)), 0);
        /* Stay registered until the server has sent its late reply. */
        CHECK(warden_recv(s, &call, buf, sizeof buf, NULL, NULL), 3);
        CHECK(warden_reply(call, NULL, 0, NULL, 0), 0);
        return r == WARDEN_ETIMEOUT ? failures : 1;
    }
    return 64;
}
