/* A typed relay (see kv.wit, world relay): serves warden-test:kv/front and
 * makes each call on to the store it imports, written against the
 * canonical ABI by hand. The arguments the caller's call lowered into
 * this component's memory are passed on as they lie, then freed. */
#include <stdint.h>
#include <stdlib.h>

__attribute__((import_module("warden-test:kv/store@0.1.0"), import_name("set")))
uint32_t kv_set(const char *, size_t, const char *, size_t);

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    return realloc(p, n ? n : 1);
}

__attribute__((export_name("warden-test:kv/front@0.1.0#set")))
uint32_t front_set(char *key, size_t key_len, char *value, size_t value_len) {
    uint32_t n = kv_set(key, key_len, value, value_len);
    free(key);
    free(value);
    return n;
}
