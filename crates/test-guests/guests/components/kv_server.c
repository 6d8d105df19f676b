/* The typed-service tests' server (see kv.wit): a key-value store kept
 * in its own memory, written against the canonical ABI by hand. Built as
 * a reactor with wasi-libc's allocator and no WASI import. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name("warden-test:kv/store@0.1.0#" name)))

typedef struct { char *ptr; size_t len; } str;
typedef struct { str key; str value; } entry;

static entry *table;
static size_t count, room;
/* Return areas: the canonical ABI's results past one flat value. */
static struct { uint8_t tag; str value; } option_area;
static str list_area;

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    return realloc(p, n ? n : 1);
}

static entry *find(const char *k, size_t n) {
    for (size_t i = 0; i < count; i++)
        if (table[i].key.len == n && memcmp(table[i].key.ptr, k, n) == 0) return &table[i];
    return 0;
}

EXPORT("set") uint32_t kv_set(char *k, size_t kn, char *v, size_t vn) {
    entry *e = find(k, kn);
    if (e) {
        free(k);
        free(e->value.ptr);
        e->value = (str){v, vn};
        return count;
    }
    if (count == room) {
        room = room ? 2 * room : 8;
        table = realloc(table, room * sizeof(entry));
    }
    table[count++] = (entry){{k, kn}, {v, vn}};
    return count;
}

EXPORT("get") void *kv_get(char *k, size_t kn) {
    entry *e = find(k, kn);
    free(k);
    option_area.tag = e != 0;
    if (e) {
        /* The caller's copy is made from this one, which post-return frees. */
        char *copy = malloc(e->value.len + 1);
        memcpy(copy, e->value.ptr, e->value.len);
        option_area.value = (str){copy, e->value.len};
    }
    return &option_area;
}

__attribute__((export_name("cabi_post_warden-test:kv/store@0.1.0#get")))
void kv_get_post(void *area) {
    (void)area;
    if (option_area.tag) free(option_area.value.ptr);
}

EXPORT("entries") void *kv_entries(void) {
    /* Borrowed: the store's own strings, read in place. */
    list_area = (str){(char *)table, count};
    return &list_area;
}

EXPORT("reverse") void *kv_reverse(str *words, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0, b = words[i].len; a + 1 < b; a++, b--) {
            char t = words[i].ptr[a];
            words[i].ptr[a] = words[i].ptr[b - 1];
            words[i].ptr[b - 1] = t;
        }
    list_area = (str){(char *)words, n};
    return &list_area;
}

__attribute__((export_name("cabi_post_warden-test:kv/store@0.1.0#reverse")))
void kv_reverse_post(void *area) {
    (void)area;
    str *words = (str *)list_area.ptr;
    for (size_t i = 0; i < list_area.len; i++) free(words[i].ptr);
    free(words);
}

EXPORT("bytes") void *kv_bytes(uint32_t n) {
    char *p = malloc(n ? n : 1);
    for (uint32_t i = 0; i < n; i++) p[i] = (char)(i % 251);
    list_area = (str){p, n};
    return &list_area;
}

__attribute__((export_name("cabi_post_warden-test:kv/store@0.1.0#bytes")))
void kv_bytes_post(void *area) {
    (void)area;
    free(list_area.ptr);
}

EXPORT("crash") void kv_crash(void) {
    __builtin_trap();
}

EXPORT("spin") void kv_spin(void) {
    for (volatile int i = 0;; i++) {
    }
}

EXPORT("lie") void *kv_lie(void) {
    list_area = (str){(char *)16, 0x7ffffff0};
    return &list_area;
}
