/* poll_oneoff on clocks alone, as the kernel answers it: one relative
 * sleep on either clock (its event, count and duration), a zero timeout,
 * and what Wasmtime still answers (an absolute time, another clock, two
 * clocks). Prints "sleeps ok" and returns 0, or prints each failed check
 * and returns their number. */
#include "checks.h"
#include <string.h>
#include <wasi/api.h>

#define MS 1000000ull

static __wasi_timestamp_t now(void) {
    __wasi_timestamp_t t = 0;
    if (__wasi_clock_time_get(__WASI_CLOCKID_MONOTONIC, 1, &t) != 0) failures++;
    return t;
}

static __wasi_subscription_t clock_sub(__wasi_userdata_t user, __wasi_clockid_t id,
                                       __wasi_timestamp_t timeout,
                                       __wasi_subclockflags_t flags) {
    __wasi_subscription_t s;
    memset(&s, 0, sizeof s);
    s.userdata = user;
    s.u.tag = __WASI_EVENTTYPE_CLOCK;
    s.u.u.clock.id = id;
    s.u.u.clock.timeout = timeout;
    s.u.u.clock.flags = flags;
    return s;
}

/* One relative sleep of `ms` on clock `id`: the event is the clock's,
 * and at least `ms` passed. */
static void relative(__wasi_clockid_t id, unsigned ms, __wasi_userdata_t user) {
    __wasi_subscription_t s = clock_sub(user, id, ms * MS, 0);
    __wasi_event_t e;
    memset(&e, 0xa5, sizeof e);
    __wasi_size_t n = 99;
    __wasi_timestamp_t t0 = now();
    CHECK(__wasi_poll_oneoff(&s, &e, 1, &n), 0);
    CHECK(now() - t0 >= ms * MS, 1);
    CHECK(n, 1);
    CHECK(e.userdata == user, 1);
    CHECK(e.error, 0);
    CHECK(e.type, __WASI_EVENTTYPE_CLOCK);
    CHECK(e.fd_readwrite.nbytes, 0);
    CHECK(e.fd_readwrite.flags, 0);
}

int main(void) {
    relative(__WASI_CLOCKID_MONOTONIC, 30, 0x1122334455667788ull);
    relative(__WASI_CLOCKID_REALTIME, 5, 7);
    relative(__WASI_CLOCKID_MONOTONIC, 0, 8);

    __wasi_event_t e[2];
    __wasi_size_t n = 0;
    /* Absolute, on the monotonic clock: until then. */
    __wasi_timestamp_t until = now() + 10 * MS;
    __wasi_subscription_t s[2] = {
        clock_sub(1, __WASI_CLOCKID_MONOTONIC, until, __WASI_SUBCLOCKFLAGS_SUBSCRIPTION_CLOCK_ABSTIME),
        clock_sub(2, __WASI_CLOCKID_MONOTONIC, 60000 * MS, 0),
    };
    CHECK(__wasi_poll_oneoff(s, e, 1, &n), 0);
    CHECK(now() >= until, 1);
    CHECK(n, 1);
    /* Two clocks: the sooner fires, alone. */
    s[0] = clock_sub(3, __WASI_CLOCKID_MONOTONIC, 1 * MS, 0);
    CHECK(__wasi_poll_oneoff(s, e, 2, &n), 0);
    CHECK(n, 1);
    CHECK(e[0].userdata, 3);
    /* A CPU-time clock cannot be slept on. */
    s[0] = clock_sub(4, __WASI_CLOCKID_PROCESS_CPUTIME_ID, 1 * MS, 0);
    CHECK(__wasi_poll_oneoff(s, e, 1, &n), __WASI_ERRNO_INVAL);

    if (failures == 0) printf("sleeps ok\n");
    return failures;
}
