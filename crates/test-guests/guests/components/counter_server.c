/* The typed-service tests' resource server (see kv.wit's counters, and
 * careful at the end): each
 * counter lives in this component's memory; a client holds only a
 * handle. Written against the canonical ABI by hand, built as a reactor
 * with wasi-libc's allocator and no WASI import. */
#include <stdint.h>
#include <stdlib.h>

#define IFACE "warden-test:kv/counters@0.1.0"
#define EXPORT(name) __attribute__((export_name(IFACE "#" name)))
#define OWN(name) __attribute__((import_module("[export]" IFACE), import_name(name)))

OWN("[resource-new]counter") int32_t counter_new(void *rep);
OWN("[resource-rep]counter") void *counter_rep(int32_t handle);
OWN("[resource-drop]counter") void counter_drop(int32_t handle);

typedef struct { uint32_t value; } counter;

static uint32_t alive;
static struct { int32_t *ptr; size_t len; } list_area;

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    return realloc(p, n ? n : 1);
}

EXPORT("[constructor]counter") int32_t make(uint32_t start) {
    counter *c = malloc(sizeof *c);
    if (!c) __builtin_trap();
    c->value = start;
    alive++;
    return counter_new(c);
}

/* A borrow of this component's own resource arrives as its rep. */
EXPORT("[method]counter.add") uint32_t add(counter *self, uint32_t n) {
    return self->value += n;
}

EXPORT("sum") uint32_t sum(counter *a, counter *b) { return a->value + b->value; }

/* An own handle arrives as a handle: its rep read, then dropped (which
 * runs the destructor below). */
EXPORT("close") uint32_t close_counter(int32_t handle) {
    uint32_t v = ((counter *)counter_rep(handle))->value;
    counter_drop(handle);
    return v;
}

EXPORT("[dtor]counter") void destroy(counter *c) {
    free(c);
    alive--;
}

EXPORT("live") uint32_t live(void) { return alive; }

EXPORT("many") void *many(uint32_t n) {
    list_area.ptr = malloc((size_t)n * sizeof(int32_t) + 1);
    if (!list_area.ptr) __builtin_trap();
    for (uint32_t i = 0; i < n; i++) list_area.ptr[i] = make(i);
    list_area.len = n;
    return &list_area;
}

__attribute__((export_name("cabi_post_" IFACE "#many")))
void many_post(void *area) {
    (void)area;
    free(list_area.ptr);
}

EXPORT("crash") void crash(void) { __builtin_trap(); }

/* kv.wit's careful: calls whose failures the caller gets as errors. */
#define CAREFUL(name) __attribute__((export_name("warden-test:kv/careful@0.1.0#" name)))

static struct { uint8_t tag; uint32_t value; } careful_area;

CAREFUL("seven") void *seven(void) {
    careful_area.tag = 0;
    careful_area.value = 7;
    return &careful_area;
}

CAREFUL("spin") void *spin(void) {
    for (;;) {}
}

CAREFUL("crash") void *careful_crash(void) { __builtin_trap(); }
