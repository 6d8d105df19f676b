/* A key-value store service, "kv". Requests are text:
 *   put KEY VALUE   ->  "ok"
 *   get KEY         ->  the value, or "" (empty) if absent
 *   del KEY         ->  "ok" or "absent"
 *   bye             ->  "ok"; the server exits after argv[1] byes
 * Keys and values are at most 63 bytes; the table holds 4096 entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

#define SLOTS 4096
static struct { char key[64], value[64]; int used; } table[SLOTS];

static unsigned hash(const char *s) {
    unsigned h = 2166136261u;
    while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

/* The slot holding `key`, or the empty slot where it would go. */
static int find(const char *key) {
    unsigned i = hash(key) % SLOTS;
    for (int probe = 0; probe < SLOTS; probe++, i = (i + 1) % SLOTS)
        if (!table[i].used || strcmp(table[i].key, key) == 0) return (int)i;
    return -1;
}

int main(int argc, char **argv) {
    int clients = argc > 1 ? atoi(argv[1]) : 1;
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    if (warden_name_register("kv", portal) < 0) return 1;
    warden_close(portal);
    char req[160], op[8], key[64], value[64];
    long ops = 0, entries = 0;
    while (clients > 0) {
        uint64_t call;
        int64_t n = warden_recv(service, &call, req, sizeof req - 1, NULL, NULL);
        if (n < 0) return 1;
        req[n < (int64_t)sizeof req ? n : (int64_t)sizeof req - 1] = 0;
        value[0] = 0;
        int fields = sscanf(req, "%7s %63s %63s", op, key, value);
        const char *reply = "error";
        int slot = fields >= 2 ? find(key) : -1;
        if (strcmp(op, "bye") == 0) {
            clients--;
            reply = "ok";
        } else if (strcmp(op, "put") == 0 && fields == 3 && slot >= 0) {
            entries += !table[slot].used;
            strcpy(table[slot].key, key);
            strcpy(table[slot].value, value);
            table[slot].used = 1;
            reply = "ok";
        } else if (strcmp(op, "get") == 0 && slot >= 0) {
            reply = table[slot].used ? table[slot].value : "";
        } else if (strcmp(op, "del") == 0 && slot >= 0) {
            /* Deleting from open addressing: mark empty and reinsert the rest of the run. */
            if (!table[slot].used) { reply = "absent"; }
            else {
                table[slot].used = 0;
                entries--;
                for (int i = (slot + 1) % SLOTS; table[i].used; i = (i + 1) % SLOTS) {
                    table[i].used = 0;
                    int to = find(table[i].key);
                    table[to] = table[i];
                    table[to].used = 1;
                }
                reply = "ok";
            }
        }
        ops++;
        warden_reply(call, reply, strlen(reply), NULL, 0);
    }
    printf("%ld operations, %ld entries left\n", ops, entries);
    return 0;
}
