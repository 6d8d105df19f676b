/* A servlet serving argv[1] ("count N" for every request) whose live
 * upgrade hand-over is hostile, by argv[2]:
 *   wild   warden_upgrade_save returns a pointer past its memory
 *   huge   it returns 1 GiB of state
 *   trap   it traps
 * Its restore takes a count as servlet.c's does. */
#include <stdio.h>
#include <string.h>
#include "warden.h"

static char req[1 << 16], resp[1 << 12];
static long count;
static const char *mode = "wild";

__attribute__((export_name("warden_upgrade_save")))
uint64_t save(void) {
    if (!strcmp(mode, "trap")) __builtin_trap();
    if (!strcmp(mode, "huge")) return WARDEN_UPGRADE_STATE(&count, 1u << 30);
    return WARDEN_UPGRADE_STATE(0xfffffff0u, 64);
}

__attribute__((export_name("warden_upgrade_restore")))
void *restore(uint32_t len) { return len == sizeof count ? &count : 0; }

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    mode = argv[2];
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    if (warden_name_register(argv[1], portal) < 0) return 1;
    warden_close(portal);
    for (;;) {
        uint64_t call;
        int64_t n = warden_recv(service, &call, req, sizeof req, NULL, NULL);
        if (n < 0) return 1;
        count++;
        int len = snprintf(resp, sizeof resp, "Content-Type: text/plain\r\n\r\ncount %ld\n", count);
        warden_reply(call, resp, (size_t)len, NULL, 0);
    }
}
