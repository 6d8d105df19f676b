/* The typed-service tests' resource client (see kv.wit's counters): a
 * command holding counters the server keeps, by handle. Written against
 * the canonical ABI by hand.
 *
 *   counter_client check    make, add, borrow, give back, drop, many:
 *                           each checked against the server's live count
 *   counter_client hold N   takes N counters and ends holding them
 *   counter_client live     prints the server's live count
 *   counter_client wait     makes a counter, prints "made", then adds to
 *                           it until a call fails
 *   counter_client forged|reuse   a handle it never had; one it gave back
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) \
    __attribute__((import_module("warden-test:kv/counters@0.1.0"), import_name(name)))

IMPORT("[constructor]counter") int32_t counter_make(uint32_t start);
IMPORT("[method]counter.add") uint32_t counter_add(int32_t self, uint32_t n);
IMPORT("[resource-drop]counter") void counter_drop(int32_t handle);
IMPORT("sum") uint32_t counter_sum(int32_t a, int32_t b);
IMPORT("close") uint32_t counter_close(int32_t handle);
IMPORT("live") uint32_t counter_live(void);
IMPORT("many") void counter_many(uint32_t n, void *ret);

typedef struct { int32_t *ptr; size_t len; } handles;

/* A reactor with its own _start: see kv_client.c. */
__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    return realloc(p, n ? n : 1);
}

static int failed;
#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL: " __VA_ARGS__); printf("\n"); failed = 1; } } while (0)

static void check(void) {
    uint32_t base = counter_live();
    int32_t a = counter_make(5), b = counter_make(10);
    CHECK(counter_live() == base + 2, "two made");
    CHECK(counter_add(a, 2) == 7, "add");
    CHECK(counter_sum(a, b) == 17, "sum of two borrowed");
    CHECK(counter_close(b) == 10, "close gives the last value");
    CHECK(counter_live() == base + 1, "closed one gone");
    counter_drop(a);
    CHECK(counter_live() == base, "dropped one gone");
    handles hs;
    counter_many(3, &hs);
    CHECK(hs.len == 3 && counter_live() == base + 3, "many");
    for (size_t i = 0; i < hs.len; i++) CHECK(counter_add(hs.ptr[i], 1) == i + 1, "many[%zu]", i);
    for (size_t i = 0; i < hs.len; i++) counter_drop(hs.ptr[i]);
    CHECK(counter_live() == base, "many dropped");
    printf(failed ? "counter checks FAILED\n" : "counter checks passed\n");
}

static int run(const char *op, const char *arg) {
    if (!strcmp(op, "check")) check();
    else if (!strcmp(op, "hold")) {
        handles hs;
        counter_many(strtoul(arg, 0, 10), &hs);
        printf("holding %zu, live %u\n", hs.len, counter_live());
    } else if (!strcmp(op, "live")) printf("live %u\n", counter_live());
    else if (!strcmp(op, "wait")) {
        int32_t c = counter_make(0);
        printf("made\n");
        fflush(stdout);
        for (;;) counter_add(c, 1);
    } else if (!strcmp(op, "forged")) printf("forged gave %u\n", counter_add(12345, 1));
    else if (!strcmp(op, "reuse")) {
        int32_t c = counter_make(1);
        counter_close(c);
        printf("reuse gave %u\n", counter_add(c, 1));
    } else { printf("unknown operation %s\n", op); return 2; }
    return 0;
}

int main(int argc, char **argv) {
    printf("client ready\n");
    fflush(stdout);
    int code = run(argc > 1 ? argv[1] : "check", argc > 2 ? argv[2] : "0");
    return code ? code : failed;
}

extern void __wasm_call_ctors(void);
extern void __wasm_call_dtors(void);
extern int __main_void(void);

__attribute__((export_name("_start"))) void start(void) {
    static int started;
    if (started++) __builtin_trap();
    __wasm_call_ctors();
    int r = __main_void();
    __wasm_call_dtors();
    if (r) _Exit(r);
}
