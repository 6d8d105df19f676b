/* CHECK(expr, expected): print and count a mismatch; main returns failures. */
#include <stdio.h>
static int failures;
#define CHECK(expr, want)                                                          \
    do {                                                                           \
        long long got_ = (long long)(expr), want_ = (long long)(want);             \
        if (got_ != want_) {                                                       \
            printf("FAIL line %d: %s = %lld, want %lld\n", __LINE__, #expr, got_, want_); \
            failures++;                                                            \
        }                                                                          \
    } while (0)
