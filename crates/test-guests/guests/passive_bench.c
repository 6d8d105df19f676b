/* ipc_bench's server as a passive service (register it as "bench"): the
 * same replies, computed on the caller's thread. */
#include <string.h>
#include "warden.h"

static int64_t serve(const void *req, size_t len, void *resp, size_t cap) {
    if (cap < 4) return 0;
    if (len == 12) {
        int32_t v[3], sum;
        memcpy(v, req, 12);
        sum = v[0] + v[1] + v[2];
        memcpy(resp, &sum, 4);
        return 4;
    }
    if (len == 100) {
        int32_t n = (int32_t)strnlen(req, 100);
        memcpy(resp, &n, 4);
        return 4;
    }
    return 0;
}

WARDEN_PASSIVE_SERVICE(serve)
