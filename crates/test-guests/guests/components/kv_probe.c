/* A client of a changed copy of kv.wit (kv_renamed.wit, kv_field.wit,
 * kv_param.wit): calls the one function PROBE names, so that its
 * component imports the changed interface. Its binding must be refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define IMPORT(name) \
    __attribute__((import_module("warden-test:kv/store@0.1.0"), import_name(name)))

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    return realloc(p, n ? n : 1);
}

#if defined(PROBE_FETCH)
IMPORT("fetch") void kv_fetch(const char *, size_t, void *ret);
static void probe(void) { char area[12]; kv_fetch("a", 1, area); }
#elif defined(PROBE_ENTRIES)
IMPORT("entries") void kv_entries(void *ret);
static void probe(void) { char area[8]; kv_entries(area); }
#else
IMPORT("set") uint32_t kv_set(const char *, size_t, const char *, size_t);
static void probe(void) { kv_set("a", 1, "b", 1); }
#endif

int main(void) {
    probe();
    printf("probe called\n");
    return 0;
}
