/* The example's key-value store (wit/kv.wit): a reactor component with
 * no WASI import, written against the canonical ABI by hand. Everything
 * it stores lives in its own memory, paid for by its own budget; callers
 * reach it only through the four functions it exports. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define IFACE "example:kv/store@0.1.0"
#define EXPORT(name) __attribute__((export_name(IFACE "#" name)))
#define POST(name) __attribute__((export_name("cabi_post_" IFACE "#" name)))

typedef struct { char *ptr; size_t len; } str;
typedef struct { str key; str value; } entry;

static entry *table;
static size_t count, room;

/* Return areas: the canonical ABI's results past one flat value.
 * option<string>: tag at 0, the string at 4; result<string, error>: tag
 * at 0, the string (ok) or the enum (err) at 4; list: pointer, length. */
static struct { uint8_t tag; str value; } option_area;
static struct { uint8_t tag; union { str ok; uint8_t err; } u; } result_area;
static str list_area;
/* What the last call lent the caller, freed by its post-return. */
static void *lent;

__attribute__((export_name("cabi_realloc")))
void *cabi_realloc(void *p, size_t old, size_t align, size_t n) {
    (void)old; (void)align;
    return realloc(p, n ? n : 1);
}

static entry *find(const str *k) {
    for (size_t i = 0; i < count; i++)
        if (table[i].key.len == k->len && memcmp(table[i].key.ptr, k->ptr, k->len) == 0)
            return &table[i];
    return 0;
}

static str copy(str s) {
    char *p = malloc(s.len ? s.len : 1);
    memcpy(p, s.ptr, s.len);
    return (str){p, s.len};
}

EXPORT("set") uint32_t kv_set(char *kp, size_t kn, char *vp, size_t vn) {
    str k = {kp, kn};
    entry *e = find(&k);
    if (e) {
        free(kp);
        free(e->value.ptr);
        e->value = (str){vp, vn};
        return 0;
    }
    if (count == room) {
        room = room ? 2 * room : 8;
        table = realloc(table, room * sizeof(entry));
    }
    table[count++] = (entry){k, {vp, vn}};
    return 1;
}

EXPORT("get") void *kv_get(char *kp, size_t kn) {
    str k = {kp, kn};
    entry *e = find(&k);
    free(kp);
    option_area.tag = e != 0;
    if (e) option_area.value = copy(e->value);
    lent = e ? option_area.value.ptr : 0;
    return &option_area;
}

EXPORT("take") void *kv_take(char *kp, size_t kn) {
    str k = {kp, kn};
    entry *e = find(&k);
    free(kp);
    lent = 0;
    result_area.tag = e == 0;
    if (!e) {
        result_area.u.err = 0; /* missing */
        return &result_area;
    }
    /* The value goes to the caller (post-return frees this copy). */
    result_area.u.ok = e->value;
    lent = e->value.ptr;
    free(e->key.ptr);
    memmove(e, e + 1, (size_t)(table + count - e - 1) * sizeof(entry));
    count--;
    return &result_area;
}

EXPORT("entries") void *kv_entries(char *pp, size_t pn) {
    entry *out = malloc(count ? count * sizeof(entry) : 1);
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if (table[i].key.len >= pn && memcmp(table[i].key.ptr, pp, pn) == 0)
            out[n++] = table[i]; /* the store's own strings, read in place */
    free(pp);
    list_area = (str){(char *)out, n};
    lent = out;
    return &list_area;
}

/* After the caller has its copy of a result: free what was lent. */
static void release(void *area) {
    (void)area;
    free(lent);
    lent = 0;
}

POST("get") void kv_get_post(void *a) { release(a); }
POST("take") void kv_take_post(void *a) { release(a); }
POST("entries") void kv_entries_post(void *a) { release(a); }
