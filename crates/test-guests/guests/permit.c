/* Permits across tasks.
 *
 *   permit reader           serve "reader": requests carry a permit; "read"
 *                           reads it and replies with the bytes (or the
 *                           error), "write" writes "CHANGED" through it,
 *                           "watch" replies, then reads every 10 ms until
 *                           the permit fails and prints why
 *   permit owner            grant, let the reader read and write, revoke,
 *                           check the reader is refused
 *   permit owner-dies       grant, send "watch", exit
 *   permit mem-owner-dies   create a memory object, send it with "watch", exit */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "warden.h"
#include "checks.h"

static char secret[32] = "owner's secret";

static int reader(void) {
    warden_handle s = warden_service_create();
    warden_handle p = warden_portal_create(s);
    warden_name_register("reader", p);
    for (;;) {
        char req[16], out[64];
        uint64_t call;
        warden_handle h[1];
        size_t nh = 1;
        int64_t n = warden_recv(s, &call, req, sizeof req, h, &nh);
        if (n < 0) return 0;
        if (n == 4 && !memcmp(req, "read", 4)) {
            int64_t r = warden_permit_read(h[0], 0, out, 14);
            if (r < 0) strcpy(out, warden_strerror((int32_t)r)), r = (int64_t)strlen(out);
            warden_reply(call, out, (size_t)r, NULL, 0);
        } else if (n == 5 && !memcmp(req, "write", 5)) {
            int64_t r = warden_permit_write(h[0], 0, "CHANGED", 7);
            const char *msg = r < 0 ? warden_strerror((int32_t)r) : "written";
            int64_t past = warden_permit_read(h[0], 30, out, 8);
            warden_reply(call, msg, strlen(msg), NULL, 0);
            printf("reader: read past the end: %s\n", warden_strerror((int32_t)past));
        } else if (n == 5 && !memcmp(req, "watch", 5)) {
            warden_handle keep = warden_dup(h[0]);
            warden_reply(call, "watching", 8, NULL, 0);
            for (int i = 0; i < 500; i++) {
                int64_t r = warden_permit_read(keep, 0, out, 4);
                if (r == WARDEN_EBADHANDLE) r = warden_mem_read(keep, 0, out, 4); /* a memory object */
                if (r < 0) { printf("reader: object now: %s\n", warden_strerror((int32_t)r)); fflush(stdout); break; }
                usleep(10 * 1000);
            }
        }
        if (nh) warden_close(h[0]);
    }
}

static int64_t ask(warden_handle reader, const char *what, warden_handle permit, char *out) {
    size_t nh = 0;
    int64_t n = warden_call(reader, what, strlen(what), &permit, 1, out, 63, NULL, &nh);
    if (n < 0) strcpy(out, warden_strerror((int32_t)n));
    else out[n] = 0;
    return n;
}

static int owner(int dies) {
    warden_handle reader = warden_name_lookup("reader", 10LL * 1000 * 1000 * 1000);
    CHECK(reader >= 0, 1);
    warden_handle permit = dies == 2 ? warden_mem_create(64) : warden_permit_grant(secret, sizeof secret, 1);
    CHECK(permit >= 0, 1);
    char out[64];
    if (dies) {
        ask(reader, "watch", permit, out);
        printf("owner: exiting with the permit out\n");
        return 0;
    }
    ask(reader, "read", permit, out);
    CHECK(strcmp(out, "owner's secret"), 0);
    ask(reader, "write", permit, out);
    CHECK(strcmp(out, "written"), 0);
    CHECK(memcmp(secret, "CHANGED", 7), 0);
    warden_handle ro = warden_permit_grant(secret, 8, 0);
    ask(reader, "write", ro, out);
    CHECK(strcmp(out, "denied"), 0);
    CHECK(warden_permit_revoke(permit), 0);
    ask(reader, "read", permit, out);
    CHECK(strcmp(out, "revoked"), 0);
    CHECK(warden_close(permit), 0);
    warden_handle again = warden_permit_grant(secret, sizeof secret, 0);
    warden_handle copy = warden_dup(again);
    CHECK(warden_permit_revoke(again), 0);
    ask(reader, "read", copy, out);
    CHECK(strcmp(out, "revoked"), 0);
    CHECK(warden_permit_grant((void *)0xfffffff0, 64, 0), WARDEN_EBADPTR);
    printf(failures ? "owner: %d failures\n" : "owner: ok\n", failures);
    return failures;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "reader")) return reader();
    if (argc >= 2 && !strcmp(argv[1], "owner")) return owner(0);
    if (argc >= 2 && !strcmp(argv[1], "owner-dies")) return owner(1);
    if (argc >= 2 && !strcmp(argv[1], "mem-owner-dies")) return owner(2);
    return 64;
}
