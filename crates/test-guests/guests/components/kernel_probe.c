/* warden:kernel from a component (see sdk/wit/kernel.wit): a command
 * written against the canonical ABI by hand, calling byte services,
 * serving one and using memory objects through the same handle table a
 * module's warden.h calls use.
 *
 *   kernel_probe call NAME MSG...  looks NAME up, calls it with each MSG,
 *                                  prints "MSG -> REPLY" or the error
 *   kernel_probe serve NAME N      serves NAME: answers N calls with the
 *                                  request in capitals, prints "served N"
 *   kernel_probe mem               a memory object written, read, sized,
 *                                  and read out of range
 *   kernel_probe deadline NAME MSG sets its call timeout to 200 ms, then
 *                                  calls NAME with MSG waiting "for ever"
 *   kernel_probe hog               a memory object past its budget, then
 *                                  handles until the table is full
 *   kernel_probe errors            a forged handle, a name not granted, a
 *                                  name never registered, an oversized
 *                                  answer
 *   kernel_probe repeat NAME N SIZE calls NAME N times with SIZE bytes,
 *                                  each reply checked against its request
 *                                  and freed; prints "N calls echoed"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IPC(name) __attribute__((import_module("warden:kernel/ipc@0.1.0"), import_name(name)))
#define MEM(name) __attribute__((import_module("warden:kernel/memory@0.1.0"), import_name(name)))
#define TASK(name) __attribute__((import_module("warden:kernel/task@0.1.0"), import_name(name)))

/* result<u32, error>, result<list<u8>, error>, result<received, error>:
 * the tag, then the payload at offset 4. */
typedef struct { uint8_t tag; uint32_t val; } res_u32;
typedef struct { uint8_t tag; union { struct { uint8_t *ptr; size_t len; } ok; uint8_t err; }; } res_list;
typedef struct { uint8_t tag; union { struct { uint32_t call; uint8_t *ptr; size_t len; } ok; uint8_t err; }; } res_recv;
/* result<_, error>: the tag, then the error at offset 1. */
typedef struct { uint8_t tag; uint8_t err; } res_unit;
typedef struct { uint8_t tag; uint64_t val; } res_u64;

IPC("close") void k_close(uint32_t h, res_unit *ret);
IPC("dup") void k_dup(uint32_t h, res_u32 *ret);
IPC("service-create") void k_service_create(res_u32 *ret);
IPC("portal-create") void k_portal_create(uint32_t service, res_u32 *ret);
IPC("name-register") void k_name_register(const char *, size_t, uint32_t portal, res_unit *ret);
IPC("name-lookup") void k_name_lookup(const char *, size_t, int64_t timeout, res_u32 *ret);
IPC("call") void k_call(uint32_t portal, const void *, size_t, int64_t timeout, res_list *ret);
IPC("recv") void k_recv(uint32_t service, res_recv *ret);
IPC("reply") void k_reply(uint32_t call, const void *, size_t, res_unit *ret);
IPC("caller") void k_caller(uint32_t call, res_u64 *ret);
MEM("mem-create") void k_mem_create(uint64_t size, res_u32 *ret);
MEM("mem-read") void k_mem_read(uint32_t h, uint64_t off, uint32_t len, res_list *ret);
MEM("mem-write") void k_mem_write(uint32_t h, uint64_t off, const void *, size_t, res_unit *ret);
MEM("mem-size") void k_mem_size(uint32_t h, res_u64 *ret);
TASK("id") uint64_t k_id(void);
TASK("set-call-timeout") void k_set_call_timeout(int64_t ns);

static const char *const ERRORS[] = {
    "bad-handle", "revoked", "peer-died", "no-clients", "denied", "quota", "no-mem", "bad-ptr",
    "timeout", "inval", "exists", "deadlock", "range", "no-reply", "again", "busy", "io", "not-sup",
};
static const char *error(uint8_t e) { return e < 18 ? ERRORS[e] : "unknown"; }

/* A reactor with its own _start: see kv_client.c. */
__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    return realloc(p, n ? n : 1);
}

static int lookup(const char *name, int64_t timeout, uint32_t *portal) {
    res_u32 r;
    k_name_lookup(name, strlen(name), timeout, &r);
    if (r.tag) printf("lookup %s: error %s\n", name, error((uint8_t)r.val));
    *portal = r.val;
    return r.tag == 0;
}

static int call(int argc, char **argv) {
    uint32_t portal;
    if (!lookup(argv[2], 10000000000LL, &portal)) return 1;
    for (int i = 3; i < argc; i++) {
        res_list r;
        k_call(portal, argv[i], strlen(argv[i]), -1, &r);
        if (r.tag) printf("%s -> error %s\n", argv[i], error(r.err));
        else printf("%s -> %.*s\n", argv[i], (int)r.ok.len, (char *)r.ok.ptr);
    }
    return 0;
}

static int repeat(const char *name, int n, size_t size) {
    uint32_t portal;
    if (!lookup(name, 10000000000LL, &portal)) return 1;
    uint8_t *msg = malloc(size);
    if (!msg) return 1;
    for (int i = 0; i < n; i++) {
        for (size_t j = 0; j < size; j++) msg[j] = (uint8_t)(i + j);
        res_list r;
        k_call(portal, msg, size, -1, &r);
        if (r.tag) { printf("call %d: error %s\n", i, error(r.err)); return 1; }
        int same = r.ok.len == size && !memcmp(r.ok.ptr, msg, size);
        free(r.ok.ptr);
        if (!same) { printf("call %d: reply differs\n", i); return 1; }
    }
    printf("%d calls echoed\n", n);
    return 0;
}

static int serve(const char *name, int n) {
    res_u32 s, p;
    res_unit u;
    k_service_create(&s);
    k_portal_create(s.val, &p);
    k_name_register(name, strlen(name), p.val, &u);
    if (s.tag || p.tag || u.tag) { printf("cannot serve %s: error %s\n", name, error(u.err)); return 1; }
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        res_recv r;
        k_recv(s.val, &r);
        if (r.tag) { printf("recv: error %s\n", error(r.err)); return 1; }
        res_u64 who;
        k_caller(r.ok.call, &who);
        for (size_t j = 0; j < r.ok.len; j++)
            if (r.ok.ptr[j] >= 'a' && r.ok.ptr[j] <= 'z') r.ok.ptr[j] -= 32;
        k_reply(r.ok.call, r.ok.ptr, r.ok.len, &u);
        if (u.tag || who.tag || who.val == k_id()) { printf("reply: error %s\n", error(u.err)); return 1; }
        free(r.ok.ptr);
    }
    printf("served %d\n", n);
    return 0;
}

static int mem(void) {
    res_u32 m;
    res_unit u;
    res_list r;
    res_u64 size;
    k_mem_create(4096, &m);
    if (m.tag) { printf("mem-create: error %s\n", error((uint8_t)m.val)); return 1; }
    k_mem_write(m.val, 100, "warden", 6, &u);
    k_mem_read(m.val, 100, 6, &r);
    k_mem_size(m.val, &size);
    int ok = !u.tag && !r.tag && r.ok.len == 6 && !memcmp(r.ok.ptr, "warden", 6) && !size.tag &&
             size.val == 4096;
    k_mem_read(m.val, 4000, 200, &r);
    printf("read past the end: error %s\n", r.tag ? error(r.err) : "none");
    k_mem_read(m.val, 0, 0xffffffffu, &r);
    printf("read of 4 GiB: error %s\n", r.tag ? error(r.err) : "none");
    k_mem_write(m.val, UINT64_MAX - 2, "abc", 3, &u);
    printf("write past the end: error %s\n", u.tag ? error(u.err) : "none");
    k_close(m.val, &u);
    k_mem_size(m.val, &size);
    printf("closed: error %s\n", size.tag ? error((uint8_t)size.val) : "none");
    printf(ok ? "mem ok\n" : "mem WRONG\n");
    return 0;
}

static int hog(void) {
    res_u32 m;
    k_mem_create(1ULL << 40, &m);
    printf("1 TiB object: error %s\n", m.tag ? error((uint8_t)m.val) : "none");
    k_mem_create(4096, &m);
    if (m.tag) return 1;
    int n = 0;
    res_u32 d;
    for (;;) {
        k_dup(m.val, &d);
        if (d.tag) break;
        n++;
    }
    printf("%d more handles, then error %s\n", n, error((uint8_t)d.val));
    return 0;
}

static int errors(void) {
    res_list r;
    k_call(123456, "x", 1, -1, &r);
    printf("forged portal: error %s\n", r.tag ? error(r.err) : "none");
    k_call(0x80000001u, "x", 1, -1, &r);
    printf("handle past i32: error %s\n", r.tag ? error(r.err) : "none");
    uint32_t portal;
    lookup("secret", 0, &portal);
    lookup("never", 0, &portal);
    res_unit u;
    k_reply(7, "x", 1, &u);
    printf("reply to no call: error %s\n", u.tag ? error(u.err) : "none");
    k_name_register("", 0, 0, &u);
    printf("empty name: error %s\n", u.tag ? error(u.err) : "none");
    return 0;
}

int main(int argc, char **argv) {
    const char *op = argc > 1 ? argv[1] : "";
    if (!strcmp(op, "call") && argc > 2) return call(argc, argv);
    if (!strcmp(op, "deadline") && argc > 2) {
        k_set_call_timeout(200000000);
        return call(argc, argv);
    }
    if (!strcmp(op, "serve") && argc > 3) return serve(argv[2], atoi(argv[3]));
    if (!strcmp(op, "repeat") && argc > 4) return repeat(argv[2], atoi(argv[3]), (size_t)atol(argv[4]));
    if (!strcmp(op, "mem")) return mem();
    if (!strcmp(op, "errors")) return errors();
    if (!strcmp(op, "hog")) return hog();
    printf("unknown operation %s\n", op);
    return 2;
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
