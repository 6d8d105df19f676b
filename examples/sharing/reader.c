/* A reader of examples/sharing, in C: maps the producer's object
 * read-only and sums it in place. Once the producer has revoked it, a
 * load there would trap this task ("access to revoked memory object N");
 * it unmaps the revoked range instead, which reads as zero pages again. */
#include <stdio.h>
#include <string.h>
#include "warden.h"

int main(void) {
    warden_handle producer = warden_name_lookup("sharing", 10LL * 1000 * 1000 * 1000);
    uint64_t sum = 0, total = 0;
    warden_handle view[1];
    size_t nh = 1;
    if (warden_call(producer, "get", 3, NULL, 0, &sum, sizeof sum, view, &nh) != 8 || nh != 1) return 1;
    size_t len = (size_t)warden_mem_size(view[0]);
    const volatile uint32_t *words = warden_map_area(len);
    if (warden_mem_map(view[0], 0, len, (void *)words, WARDEN_MAP_READ)) return 2;
    for (size_t i = 0; i < len / 4; i++) total += words[i];
    printf("c: %zu MiB summed in place, sum %s\n", len >> 20, total == sum ? "ok" : "WRONG");
    char answer[8];
    nh = 0;
    warden_call(producer, "done", 4, NULL, 0, answer, sizeof answer, NULL, &nh);
    int unmapped = warden_mem_unmap((void *)words, len);
    printf("c: after the revoke, unmapped (%s), reads %u\n", warden_strerror(unmapped), words[7]);
    return 0;
}
