/* The producer of examples/sharing: makes a memory object of MIB MiB,
 * fills it through a writable mapping of its own, and serves "sharing":
 *   "get"   replies with the sum of the object's words and a read-only
 *           view of it (the reader maps it: no copy)
 *   "done"  a reader has summed; once READERS have, the producer revokes
 *           every view it gave out (the readers' mappings are gone when
 *           the revoke returns), answers them all and exits
 * usage: producer MIB READERS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

int main(int argc, char **argv) {
    size_t len = (size_t)(argc > 1 ? atoi(argv[1]) : 16) << 20;
    int readers = argc > 2 ? atoi(argv[2]) : 1;
    warden_handle obj = warden_mem_create(len);
    uint32_t *words = warden_map_area(len);
    if (obj < 0 || !words || warden_mem_map(obj, 0, len, words, WARDEN_MAP_READ | WARDEN_MAP_WRITE)) {
        printf("producer: cannot map its object\n");
        return 1;
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < len / 4; i++) sum += words[i] = (uint32_t)i * 2654435761u;
    warden_handle service = warden_service_create();
    warden_name_register("sharing", warden_portal_create(service));
    printf("producer: %zu MiB shared, sum %llu\n", len >> 20, (unsigned long long)sum);
    uint64_t done[16];
    int ndone = 0;
    while (ndone < readers && ndone < 16) {
        char req[8];
        size_t nh = 0;
        int64_t n = warden_recv(service, &done[ndone], req, sizeof req, NULL, &nh);
        if (n < 0) return 2;
        if (n == 3 && !memcmp(req, "get", 3)) {
            warden_handle view[1] = {warden_mem_view(obj, 0, len, 1) | WARDEN_MOVE};
            warden_reply(done[ndone], &sum, sizeof sum, view, 1);
        } else if (n == 4 && !memcmp(req, "done", 4)) {
            ndone++; /* answered after the revoke */
        }
    }
    /* Its own mapping goes too: take it down first, map again after. */
    warden_mem_unmap(words, len);
    obj = warden_mem_revoke(obj);
    int back = obj >= 0 && !warden_mem_map(obj, 0, len, words, WARDEN_MAP_READ);
    printf("producer: revoked every view; its own data %s\n", back && words[7] == 7 * 2654435761u ? "intact" : "LOST");
    fflush(stdout);
    for (int i = 0; i < ndone; i++) warden_reply(done[i], "revoked", 7, NULL, 0);
    return 0;
}
