/* The typed-service tests' careful client (see kv.wit's careful): calls
 * each function its arguments name (seven, spin, crash) in turn and
 * prints what came back, a failure as warden:kernel's error by name.
 * Written against the canonical ABI by hand. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) \
    __attribute__((import_module("warden-test:kv/careful@0.1.0"), import_name(name)))

/* result<u32, error> and result<_, error>: the tag, then the payload. */
typedef struct { uint8_t tag; uint32_t val; } res_u32;
typedef struct { uint8_t tag; uint8_t err; } res_unit;

IMPORT("seven") void careful_seven(res_u32 *ret);
IMPORT("spin") void careful_spin(res_unit *ret);
IMPORT("crash") void careful_crash(res_u32 *ret);

static const char *const ERRORS[] = {
    "bad-handle", "revoked", "peer-died", "no-clients", "denied", "quota", "no-mem", "bad-ptr",
    "timeout", "inval", "exists", "deadlock", "range", "no-reply", "again", "busy", "io", "not-sup",
};
static const char *error(uint32_t e) { return e < 18 ? ERRORS[e] : "unknown"; }

/* A reactor with its own _start: see kv_client.c. */
__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    return realloc(p, n ? n : 1);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        res_u32 r = {0};
        res_unit u = {0};
        if (!strcmp(argv[i], "seven")) careful_seven(&r);
        else if (!strcmp(argv[i], "crash")) careful_crash(&r);
        else if (!strcmp(argv[i], "spin")) {
            careful_spin(&u);
            r.tag = u.tag;
            r.val = u.err;
        } else { printf("unknown call %s\n", argv[i]); return 2; }
        if (r.tag) printf("%s: error %s\n", argv[i], error(r.val & 0xff));
        else printf("%s: %u\n", argv[i], r.val);
        fflush(stdout);
    }
    return 0;
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
