/* Memory object semantics inside one task; prints "memobj: ok" or the
 * failed checks, and exits with the number of failures. */
#include <string.h>
#include "warden.h"
#include "checks.h"

int main(void) {
    warden_handle m = warden_mem_create(4096);
    CHECK(m >= 0, 1);
    CHECK(warden_mem_size(m), 4096);
    CHECK(warden_mem_write(m, 100, "hello", 5), 5);
    char buf[16] = {0};
    CHECK(warden_mem_read(m, 100, buf, 5), 5);
    CHECK(memcmp(buf, "hello", 5), 0);
    CHECK(warden_mem_read(m, 4095, buf, 2), WARDEN_ERANGE);
    CHECK(warden_mem_write(m, UINT64_MAX, "x", 1), WARDEN_ERANGE);
    CHECK(warden_mem_read(m, 0, (void *)0xfffffff0, 64), WARDEN_EBADPTR);

    /* A read-only sub-view: reads work, writes and revocation are denied. */
    warden_handle ro = warden_mem_view(m, 100, 5, 1);
    CHECK(ro >= 0, 1);
    CHECK(warden_mem_size(ro), 5);
    CHECK(warden_mem_read(ro, 0, buf, 5), 5);
    CHECK(warden_mem_write(ro, 0, "x", 1), WARDEN_EDENIED);
    CHECK(warden_mem_revoke(ro), WARDEN_EDENIED);
    CHECK(warden_mem_view(m, 4000, 200, 0), WARDEN_ERANGE);

    /* Revocation: every handle to the range fails; the revoker gets a new one. */
    warden_handle sub = warden_mem_view(m, 0, 1024, 0);
    warden_handle dup = warden_dup(sub);
    warden_handle fresh = warden_mem_revoke(sub);
    CHECK(fresh >= 0, 1);
    CHECK(warden_mem_size(sub), WARDEN_EREVOKED);
    CHECK(warden_mem_size(dup), WARDEN_EREVOKED);
    CHECK(warden_mem_size(m), WARDEN_EREVOKED);
    CHECK(warden_mem_size(ro), WARDEN_EREVOKED);
    CHECK(warden_mem_read(fresh, 100, buf, 5), 5);
    CHECK(memcmp(buf, "hello", 5), 0);

    /* Handles: closing makes them stale; garbage is rejected. */
    CHECK(warden_close(dup), 0);
    CHECK(warden_close(dup), WARDEN_EBADHANDLE);
    CHECK(warden_mem_size(12345), WARDEN_EBADHANDLE);
    CHECK(warden_mem_size(-1), WARDEN_EBADHANDLE);

    /* A call to one's own service would wait for oneself. */
    warden_handle s = warden_service_create();
    warden_handle p = warden_portal_create(s);
    size_t nh = 0;
    CHECK(warden_call(p, "x", 1, NULL, 0, buf, sizeof buf, NULL, &nh), WARDEN_EDEADLOCK);
    CHECK(warden_mem_size(s), WARDEN_EBADHANDLE);
    CHECK(warden_portal_create(p), WARDEN_EBADHANDLE);

    /* Larger than the task's budget. */
    CHECK(warden_mem_create(1ULL << 40), WARDEN_ENOMEM);
    printf(failures ? "memobj: %d failures\n" : "memobj: ok\n", failures);
    return failures;
}
