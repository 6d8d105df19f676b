/* The typed-call benchmark's byte peer: kv_server's `set` and `reverse`
 * (components/kv.wit) over a byte portal, marshalled by hand, so that
 * the same work is timed both ways.
 *
 *   kv_bytes server     serve "kvb"
 *   kv_bytes client N   N set calls, then N reverse calls of 100 words
 *                       (each kind run twice, the second timed); prints
 *                       "small NS" and "list NS", nanoseconds per call
 *
 * set: [1][u32 key length][key][value] -> u32, the keys stored; the store
 * keeps its own copy of each, as kv_server does. reverse: [2][u32 n] and
 * n times [u32 length][bytes] -> the same layout, each word reversed; the
 * client copies each answer word into its own allocation and frees them,
 * as a component's lowered list of strings is allocated and freed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "warden.h"

#define BUF 65536
typedef struct { char *ptr; size_t len; } str;
typedef struct { str key; str value; } entry;

static entry *table;
static size_t count, room;

static str copy(const char *p, size_t n) {
    char *c = malloc(n ? n : 1);
    memcpy(c, p, n);
    return (str){c, n};
}

static uint32_t set(const char *req, size_t n) {
    uint32_t kn;
    memcpy(&kn, req + 1, 4);
    const char *k = req + 5, *v = k + kn;
    size_t vn = n - 5 - kn;
    for (size_t i = 0; i < count; i++)
        if (table[i].key.len == kn && !memcmp(table[i].key.ptr, k, kn)) {
            free(table[i].value.ptr);
            table[i].value = copy(v, vn);
            return count;
        }
    if (count == room) {
        room = room ? 2 * room : 8;
        table = realloc(table, room * sizeof(entry));
    }
    table[count++] = (entry){copy(k, kn), copy(v, vn)};
    return count;
}

/* Reverses each word of a reverse request in place: the reply's length. */
static size_t reverse(char *req, size_t n) {
    uint32_t words;
    memcpy(&words, req + 1, 4);
    size_t at = 5;
    for (uint32_t w = 0; w < words && at + 4 <= n; w++) {
        uint32_t len;
        memcpy(&len, req + at, 4);
        char *p = req + at + 4;
        for (size_t a = 0, b = len; a + 1 < b; a++, b--) {
            char t = p[a];
            p[a] = p[b - 1];
            p[b - 1] = t;
        }
        at += 4 + len;
    }
    return at;
}

static int server(void) {
    warden_handle s = warden_service_create();
    warden_handle p = warden_portal_create(s);
    warden_name_register("kvb", p);
    warden_close(p);
    static char buf[BUF];
    for (;;) {
        uint64_t call;
        size_t nh = 0;
        int64_t n = warden_recv(s, &call, buf, sizeof buf, NULL, &nh);
        if (n < 0) return 0;
        if (n > 5 && buf[0] == 1) {
            uint32_t keys = set(buf, (size_t)n);
            warden_reply(call, &keys, 4, NULL, 0);
        } else if (n >= 5 && buf[0] == 2) {
            size_t len = reverse(buf, (size_t)n);
            warden_reply(call, buf + 1, len - 1, NULL, 0);
        } else {
            warden_reply(call, NULL, 0, NULL, 0);
        }
    }
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static char req[BUF], resp[BUF];

static int call(warden_handle p, size_t len) {
    size_t nh = 0;
    int64_t r = warden_call(p, req, len, NULL, 0, resp, sizeof resp, NULL, &nh);
    if (r < 0) printf("call: %s\n", warden_strerror((int32_t)r));
    return (int)r;
}

/* One set call, marshalled. */
static int set_call(warden_handle p) {
    uint32_t kn = 3;
    req[0] = 1;
    memcpy(req + 1, &kn, 4);
    memcpy(req + 5, "keyvalue", 8);
    return call(p, 13) < 0;
}

/* One reverse call of `words`, marshalled; the answer unmarshalled into
 * strings of the client's own, then freed. */
static int reverse_call(warden_handle p, const str *words, uint32_t n) {
    size_t at = 5;
    req[0] = 2;
    memcpy(req + 1, &n, 4);
    for (uint32_t w = 0; w < n; w++) {
        uint32_t len = (uint32_t)words[w].len;
        memcpy(req + at, &len, 4);
        memcpy(req + at + 4, words[w].ptr, len);
        at += 4 + len;
    }
    if (call(p, at) < 0) return 1;
    uint32_t got;
    memcpy(&got, resp, 4);
    str *back = malloc(got * sizeof(str));
    at = 4;
    for (uint32_t w = 0; w < got; w++) {
        uint32_t len;
        memcpy(&len, resp + at, 4);
        back[w] = copy(resp + at + 4, len);
        at += 4 + len;
    }
    for (uint32_t w = 0; w < got; w++) free(back[w].ptr);
    free(back);
    return 0;
}

static int client(long n) {
    warden_handle p = warden_name_lookup("kvb", 10LL * 1000 * 1000 * 1000);
    if (p < 0) { printf("lookup: %s\n", warden_strerror(p)); return 1; }
    static str words[100];
    for (int i = 0; i < 100; i++) words[i] = (str){"word", 4};
    double small = 0, list = 0;
    for (int run = 0; run < 2; run++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++)
            if (set_call(p)) return 2;
        double t1 = now_ns();
        for (long i = 0; i < n; i++)
            if (reverse_call(p, words, 100)) return 2;
        small = (t1 - t0) / n;
        list = (now_ns() - t1) / n;
    }
    printf("small %.1f\nlist %.1f\n", small, list);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "server")) return server();
    if (argc >= 3 && !strcmp(argv[1], "client")) return client(atol(argv[2]));
    return 64;
}
