/* Block devices from a task, for the device tests:
 *
 *   device check NAME    open NAME, write a pattern to its first and last
 *                        sectors and to 64 KiB in the middle, sync, read
 *                        them back, try what must fail; print "device ok
 *                        <sectors>" and what failed
 *   device fill NAME C   write byte C over the whole device, sync
 *   device open NAME     print what opening NAME returns, then hold it
 *                        until killed (with "holding" printed) if it opened */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"
#include "checks.h"

static char block[64 * 1024], back[64 * 1024];

static void pattern(char *p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) p[i] = (char)((seed + i * 31) & 0xff);
}

static int check(const char *name) {
    warden_handle d = warden_device_open(name);
    CHECK(d >= 0, 1);
    CHECK(warden_device_open(name), WARDEN_EBUSY);
    CHECK(warden_dup(d), WARDEN_EINVAL);
    warden_device_info_t info = {0};
    CHECK(warden_device_info(d, &info), 0);
    CHECK(info.sector_size, 512);
    uint64_t last = info.sectors - 1, mid = info.sectors / 2;
    pattern(block, 512, 1);
    CHECK(warden_device_write(d, 0, 1, block, 512), 512);
    pattern(block, 512, 2);
    CHECK(warden_device_write(d, last, 1, block, 512), 512);
    pattern(block, sizeof block, 3);
    CHECK(warden_device_write(d, mid, sizeof block / 512, block, sizeof block), (int64_t)sizeof block);
    CHECK(warden_device_sync(d), 0);
    CHECK(warden_device_read(d, mid, sizeof back / 512, back, sizeof back), (int64_t)sizeof back);
    CHECK(memcmp(back, block, sizeof block), 0);
    CHECK(warden_device_read(d, last, 1, back, 512), 512);
    pattern(block, 512, 2);
    CHECK(memcmp(back, block, 512), 0);
    /* What must fail: past the end, a short buffer, a wild pointer, no
     * sectors, a negative sector. */
    CHECK(warden_device_read(d, last, 2, back, 1024), WARDEN_ERANGE);
    CHECK(warden_device_read(d, 0, 2, back, 512), WARDEN_EINVAL);
    CHECK(__warden_device_read(d, 0, 1, (void *)0xfffff000u, 512), WARDEN_EBADPTR);
    CHECK(warden_device_read(d, 0, 0, back, 512), WARDEN_ERANGE);
    CHECK(__warden_device_read(d, (uint64_t)-1, 1, back, 512), WARDEN_EINVAL);
    CHECK(__warden_device_info(d, (void *)0xfffffff8u), WARDEN_EBADPTR);
    printf("device ok %llu\n", (unsigned long long)info.sectors);
    return failures;
}

static int fill(const char *name, int c) {
    warden_handle d = warden_device_open(name);
    if (d < 0) return printf("open: %s\n", warden_strerror(d)), 1;
    warden_device_info_t info;
    warden_device_info(d, &info);
    memset(block, c, sizeof block);
    for (uint64_t s = 0; s < info.sectors; s += sizeof block / 512) {
        uint64_t n = info.sectors - s < sizeof block / 512 ? info.sectors - s : sizeof block / 512;
        if (warden_device_write(d, s, (uint32_t)n, block, n * 512) < 0) return 1;
    }
    warden_device_sync(d);
    printf("filled %llu sectors\n", (unsigned long long)info.sectors);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "check")) return check(argv[2]);
    if (argc > 3 && !strcmp(argv[1], "fill")) return fill(argv[2], atoi(argv[3]));
    if (argc > 2 && !strcmp(argv[1], "open")) {
        warden_handle d = warden_device_open(argv[2]);
        printf("open: %s\n", d >= 0 ? "ok" : warden_strerror(d));
        fflush(stdout);
        if (d < 0) return 1;
        printf("holding\n");
        fflush(stdout);
        /* A call that never comes: blocked until killed. */
        uint64_t call;
        char buf[8];
        warden_handle s = warden_service_create();
        for (;;) warden_recv(s, &call, buf, sizeof buf, NULL, NULL);
    }
    printf("usage: device check|fill|open NAME [C]\n");
    return 2;
}
