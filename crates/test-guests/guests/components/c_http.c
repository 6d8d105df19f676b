/* A wasi:http/proxy component in C, built with no libc and no bindings
 * generator: the canonical ABI's core functions are declared by hand (a
 * result comes back through a return area: its case in the first byte,
 * its value at offset 4). Every request gets 200 and a fixed body: the
 * component-route peer of the WAGI handler `page.c` in the web
 * benchmarks, and a handler whose answer the tests can check. */
#include <stdint.h>

#define TYPES "wasi:http/types@0.2.12"
#define STREAMS "wasi:io/streams@0.2.12"
#define IMPORT(m, n) __attribute__((import_module(m), import_name(n)))

IMPORT(TYPES, "[constructor]fields") int32_t fields_new(void);
IMPORT(TYPES, "[constructor]outgoing-response") int32_t response_new(int32_t headers);
IMPORT(TYPES, "[method]outgoing-response.body") void response_body(int32_t response, int32_t *ret);
IMPORT(TYPES, "[static]response-outparam.set")
void outparam_set(int32_t out, int32_t is_err, int32_t response, int32_t, int64_t, int32_t,
                  int32_t, int32_t, int32_t);
IMPORT(TYPES, "[method]outgoing-body.write") void body_write(int32_t body, int32_t *ret);
IMPORT(TYPES, "[static]outgoing-body.finish")
void body_finish(int32_t body, int32_t has_trailers, int32_t trailers, int32_t *ret);
IMPORT(TYPES, "[resource-drop]incoming-request") void request_drop(int32_t request);
IMPORT(STREAMS, "[method]output-stream.blocking-write-and-flush")
void stream_write(int32_t stream, const char *bytes, int32_t len, int32_t *ret);
IMPORT(STREAMS, "[resource-drop]output-stream") void stream_drop(int32_t stream);

static const char BODY[] = "Hello from a C component\n";

/* What the host asks the guest to allocate (a bump allocator: an
 * instance serves one request). */
static char arena[16384] __attribute__((aligned(16)));
static uint32_t used;

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *old, uint32_t old_size, uint32_t align, uint32_t new_size) {
    (void)old;
    (void)old_size;
    uint32_t at = (used + align - 1) & ~(align - 1);
    if (at + new_size > sizeof arena) __builtin_trap();
    used = at + new_size;
    return arena + at;
}

/* A result's return area. */
static int32_t ret[4] __attribute__((aligned(8)));

__attribute__((export_name("wasi:http/incoming-handler@0.2.12#handle")))
void handle(int32_t request, int32_t out) {
    int32_t response = response_new(fields_new());
    response_body(response, ret);
    int32_t body = ret[1];
    outparam_set(out, 0, response, 0, 0, 0, 0, 0, 0);
    body_write(body, ret);
    int32_t stream = ret[1];
    stream_write(stream, BODY, sizeof BODY - 1, ret);
    stream_drop(stream);
    body_finish(body, 0, 0, ret);
    request_drop(request);
}
