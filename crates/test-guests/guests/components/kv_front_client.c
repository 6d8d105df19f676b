/* A client of a typed relay (see kv.wit, world front-client): sets N keys
 * (argv[1], default 3) through warden-test:kv/front and prints
 * "front ok COUNT", COUNT being the store's last answer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((import_module("warden-test:kv/front@0.1.0"), import_name("set")))
uint32_t front_set(const char *, size_t, const char *, size_t);

/* A reactor with its own _start, as kv_client.c is (see there why). */
__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    return realloc(p, n ? n : 1);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    uint32_t count = 0;
    for (int i = 0; i < n; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "front-%d", i);
        count = front_set(key, (size_t)len, "v", 1);
    }
    printf("front ok %u\n", count);
    return count >= (uint32_t)n ? 0 : 1;
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
