/* A file service that lies: registered as NAME (argv[1]), it answers
 * every request with garbage of another kind — a reply shorter than its
 * header, a payload length past its end, a positive status, attributes
 * cut short, a READ longer than asked, a directory record whose name
 * runs past the reply, an empty reply — for ever. */
#include <stdint.h>
#include <string.h>
#include "warden.h"

static uint8_t req[300000], rep[300000];

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    warden_handle svc = warden_service_create();
    if (svc < 0 || warden_name_register(argv[1], warden_portal_create(svc)) != 0) return 1;
    for (uint32_t k = 0;; k++) {
        uint64_t call;
        int64_t n = warden_recv(svc, &call, req, sizeof req, NULL, NULL);
        if (n < 0) continue;
        int32_t status = 0;
        uint32_t len = 0, send = 8;
        memset(rep, 0xA5, 4096);
        switch (k % 7) {
        case 0: send = 5; break;                    /* shorter than a header */
        case 1: len = 1u << 30; send = 64; break;   /* a length past the end */
        case 2: status = 7; break;                  /* a positive status */
        case 3: len = 20; send = 28; break;         /* attributes cut short */
        case 4: len = 4000; send = 4008; break;     /* more than any READ asked */
        case 5: len = 30; send = 38; rep[8 + 17] = 250; break; /* a name past the end */
        case 6: send = 0; break;                    /* nothing */
        }
        memcpy(rep, &status, 4);
        memcpy(rep + 4, &len, 4);
        warden_reply(call, rep, send, NULL, 0);
    }
}
