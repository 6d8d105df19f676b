/* Revoking one client's portal without closing the service.
 *
 *   portal_revoke server   serves "gate": "portal X" replies with a portal
 *                          of X's own (kept), "hold" is left unanswered,
 *                          "revoke X" revokes X's portal once a call is
 *                          held, then answers the held call (too late),
 *                          "ping" answers "pong", the second "quit" ends
 *   portal_revoke a        gets its portal, duplicates it, waits in "hold"
 *                          through it; prints what each path says after
 *   portal_revoke b        gets its portal, has a's revoked, checks its
 *                          own still works and that it cannot revoke */
#include <string.h>
#include "warden.h"
#include "checks.h"

static int server(void) {
    warden_handle s = warden_service_create();
    warden_name_register("gate", warden_portal_create(s));
    warden_handle kept[2] = {-1, -1};
    uint64_t held = 0, revoke = 0;
    int revoke_who = -1, quits = 0;
    for (;;) {
        char req[16];
        uint64_t call;
        size_t nh = 0;
        int64_t n = warden_recv(s, &call, req, sizeof req, NULL, &nh);
        if (n < 0) return 1;
        if (n == 8 && !memcmp(req, "portal ", 7)) {
            int who = req[7] == 'b';
            warden_handle p = warden_portal_create(s);
            kept[who] = warden_dup(p);
            warden_handle out[1] = {p | WARDEN_MOVE};
            warden_reply(call, "ok", 2, out, 1);
        } else if (n == 4 && !memcmp(req, "hold", 4)) {
            held = call;
        } else if (n == 8 && !memcmp(req, "revoke ", 7)) {
            revoke = call;
            revoke_who = req[7] == 'b';
        } else if (n == 4 && !memcmp(req, "ping", 4)) {
            warden_reply(call, "pong", 4, NULL, 0);
        } else if (n == 4 && !memcmp(req, "quit", 4)) {
            warden_reply(call, "bye", 3, NULL, 0);
            if (++quits == 2) return failures;
        }
        if (held && revoke) {
            int32_t r = warden_portal_revoke(kept[revoke_who]);
            int32_t late = warden_reply(held, "too late", 8, NULL, 0);
            printf("server: revoke %s; late reply: %s\n", warden_strerror(r), warden_strerror(late));
            fflush(stdout);
            warden_reply(revoke, "done", 4, NULL, 0);
            held = revoke = 0;
        }
    }
}

static warden_handle own_portal(warden_handle gate, const char *req) {
    warden_handle h[1];
    size_t nh = 1;
    char ok[4];
    if (warden_call(gate, req, strlen(req), NULL, 0, ok, sizeof ok, h, &nh) != 2 || nh != 1) return -1;
    return h[0];
}

static const char *ping(warden_handle p) {
    char out[8];
    size_t nh = 0;
    int64_t n = warden_call(p, "ping", 4, NULL, 0, out, sizeof out, NULL, &nh);
    return n == 4 ? "pong" : warden_strerror((int32_t)n);
}

static int client(int b) {
    warden_handle gate = warden_name_lookup("gate", 10LL * 1000 * 1000 * 1000);
    warden_handle mine = own_portal(gate, b ? "portal b" : "portal a");
    CHECK(mine >= 0, 1);
    if (!b) {
        warden_handle copy = warden_dup(mine);
        char out[16];
        size_t nh = 0;
        int64_t r = warden_call(mine, "hold", 4, NULL, 0, out, sizeof out, NULL, &nh);
        printf("a: held call: %s\n", warden_strerror((int32_t)r));
        printf("a: next call: %s\n", ping(mine));
        printf("a: duplicate: %s\n", ping(copy));
        printf("a: the gate: %s\n", ping(gate));
        warden_call(gate, "quit", 4, NULL, 0, out, sizeof out, NULL, &nh);
        return 0;
    }
    CHECK(warden_portal_revoke(mine), WARDEN_EDENIED);
    char out[8];
    size_t nh = 0;
    warden_call(mine, "revoke a", 8, NULL, 0, out, sizeof out, NULL, &nh);
    printf("b: own portal after: %s\n", ping(mine));
    warden_call(gate, "quit", 4, NULL, 0, out, sizeof out, NULL, &nh);
    return failures;
}

int main(int argc, char **argv) {
    const char *mode = argc >= 2 ? argv[1] : "";
    if (!strcmp(mode, "server")) return server();
    if (!strcmp(mode, "a")) return client(0);
    if (!strcmp(mode, "b")) return client(1);
    return 64;
}
