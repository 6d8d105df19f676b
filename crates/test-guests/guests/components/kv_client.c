/* The typed-service tests' client (see kv.wit): a command importing the
 * store, written against the canonical ABI by hand.
 *
 *   kv_client check      set, get, entries and reverse, each checked
 *   kv_client send N     stores an N-byte value; prints the key count
 *   kv_client bytes N    asks for N bytes; prints how many came, checked
 *   kv_client crash|spin|lie   calls that fail in the server
 *   kv_client wild|badutf8|huge|badrealloc|flood   a hostile client: a
 *                        key outside its memory, a key that is not UTF-8,
 *                        a list longer than its memory, an allocator
 *                        answering outside its memory, 100,000 words
 *   kv_client time N     N set calls, then N reverse calls of 100 words,
 *                        timed; prints "small NS" and "list NS", the
 *                        nanoseconds per call of each
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IMPORT(name) \
    __attribute__((import_module("warden-test:kv/store@0.1.0"), import_name(name)))

typedef struct { char *ptr; size_t len; } str;
typedef struct { str key; str value; } entry;

IMPORT("set") uint32_t kv_set(const char *, size_t, const char *, size_t);
IMPORT("get") void kv_get(const char *, size_t, void *ret);
IMPORT("entries") void kv_entries(void *ret);
IMPORT("reverse") void kv_reverse(const str *, size_t, void *ret);
IMPORT("bytes") void kv_bytes(uint32_t, void *ret);
IMPORT("crash") void kv_crash(void);
IMPORT("spin") void kv_spin(void);
IMPORT("lie") void kv_lie(void *ret);

/* Built as a reactor with its own _start (see the end): wasm-ld wraps
 * every other export of a command module in the C runtime's constructors
 * and destructors, so a command's cabi_realloc would flush stdio (a WASI
 * call, which the canonical ABI forbids inside realloc: the instance
 * traps with "cannot leave component instance") and re-run the
 * constructors on every allocation. */

/* Set by badrealloc: the allocator answers outside the memory. */
static int lying;

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    if (lying) return (void *)0xfffffff0u;
    return realloc(p, n ? n : 1);
}

static int failed;
#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL: " __VA_ARGS__); printf("\n"); failed = 1; } } while (0)

static int same(str s, const char *want) {
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static void check(void) {
    CHECK(kv_set("apple", 5, "red", 3) == 1, "set apple");
    CHECK(kv_set("plum", 4, "purple", 6) == 2, "set plum");
    CHECK(kv_set("apple", 5, "green", 5) == 2, "set apple again");
    struct { uint8_t tag; str value; } got;
    kv_get("apple", 5, &got);
    CHECK(got.tag == 1 && same(got.value, "green"), "get apple");
    kv_get("pear", 4, &got);
    CHECK(got.tag == 0, "get pear (none)");
    str list;
    kv_entries(&list);
    entry *es = (entry *)list.ptr;
    CHECK(list.len == 2 && same(es[0].key, "apple") && same(es[1].value, "purple"), "entries");
    str words[3] = {{"abc", 3}, {"", 0}, {"warden", 6}};
    kv_reverse(words, 3, &list);
    str *back = (str *)list.ptr;
    CHECK(list.len == 3 && same(back[0], "cba") && same(back[1], "") && same(back[2], "nedraw"),
          "reverse");
    CHECK(same(words[0], "abc"), "the caller's words unchanged");
    printf(failed ? "typed checks FAILED\n" : "typed checks passed\n");
}

static void bytes(uint32_t n) {
    str got;
    kv_bytes(n, &got);
    int ok = got.len == n;
    for (uint32_t i = 0; ok && i < n; i++) ok = (uint8_t)got.ptr[i] == i % 251;
    printf("got %zu bytes%s\n", got.len, ok ? ", checked" : ", WRONG");
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Round trips of a small record's worth (set) and of a 100-element list
 * of strings (reverse); the results are freed as a real client would.
 * Each kind runs twice, the second timed (the first warms up). */
static void time_calls(uint32_t n) {
    static str words[100];
    for (int i = 0; i < 100; i++) words[i] = (str){"word", 4};
    uint64_t small = 0, list = 0;
    for (int run = 0; run < 2; run++) {
        uint64_t t0 = now_ns();
        for (uint32_t i = 0; i < n; i++) kv_set("key", 3, "value", 5);
        uint64_t t1 = now_ns();
        for (uint32_t i = 0; i < n; i++) {
            str got;
            kv_reverse(words, 100, &got);
            str *back = (str *)got.ptr;
            for (size_t j = 0; j < got.len; j++) free(back[j].ptr);
            free(got.ptr);
        }
        small = (t1 - t0) / n;
        list = (now_ns() - t1) / n;
    }
    printf("small %llu\nlist %llu\n", (unsigned long long)small, (unsigned long long)list);
}

/* Calls that break the canonical ABI's rules from the caller's side:
 * each must end this client alone (or, flood, fail its call). */
static int hostile(const char *op) {
    str list;
    struct { uint8_t tag; str value; } got;
    if (!strcmp(op, "wild")) kv_set((const char *)0xfffffff0u, 100, "v", 1);
    else if (!strcmp(op, "badutf8")) kv_set("\xff\xfe", 2, "v", 1);
    else if (!strcmp(op, "huge")) kv_reverse((const str *)16, 0x10000000, &list);
    else if (!strcmp(op, "badrealloc")) {
        kv_set("k", 1, "v", 1);
        lying = 1;
        kv_get("k", 1, &got);
    } else if (!strcmp(op, "flood")) {
        size_t n = 100000;
        str *words = malloc(n * sizeof(str));
        for (size_t i = 0; i < n; i++) words[i] = (str){"word", 4};
        kv_reverse(words, n, &list);
    } else return 0;
    printf("%s: the call returned\n", op);
    return 1;
}

/* A canary the failed call must leave alone. */
static char canary[4096];

static int run(const char *op, const char *arg) {
    if (!strcmp(op, "check")) check();
    else if (!strcmp(op, "send")) {
        size_t n = strtoul(arg, 0, 10);
        char *v = calloc(n + 1, 1);
        printf("keys %u\n", kv_set("big", 3, v, n));
    } else if (!strcmp(op, "bytes")) bytes(strtoul(arg, 0, 10));
    else if (!strcmp(op, "time")) time_calls(strtoul(arg, 0, 10));
    else if (hostile(op)) return 0;
    else if (!strcmp(op, "crash")) kv_crash();
    else if (!strcmp(op, "spin")) kv_spin();
    else if (!strcmp(op, "lie")) { str l; kv_lie(&l); printf("lie gave %zu\n", l.len); }
    else { printf("unknown operation %s\n", op); return 2; }
    return 0;
}

int main(int argc, char **argv) {
    memset(canary, 0x5a, sizeof canary);
    printf("client ready\n");
    fflush(stdout);
    int code = run(argc > 1 ? argv[1] : "check", argc > 2 ? argv[2] : "0");
    for (size_t i = 0; i < sizeof canary; i++)
        if (canary[i] != 0x5a) { printf("canary changed\n"); return 3; }
    return code ? code : failed;
}

/* The command's entry, as wasi-libc's crt1-command.o has it, but in a
 * module linked without it (so cabi_realloc is exported unwrapped). */
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
