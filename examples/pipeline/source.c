/* Stage 1 of 3: writes a text into a memory object and passes the object
 * (not the text) down the pipeline. When the pipeline is done it revokes
 * the object: every handle the other stages kept fails from then on, and
 * the source keeps sole access through the fresh handle it gets back. */
#include <stdio.h>
#include <string.h>
#include "warden.h"

static const char text[] =
    "memory objects move between tasks by handle; the bytes stay in the kernel, "
    "and revocation takes them back from everyone at once.";

int main(void) {
    warden_handle filter = warden_name_lookup("filter", -1);
    warden_handle mem = warden_mem_create(sizeof text);
    if (filter < 0 || mem < 0) return 1;
    warden_mem_write(mem, 0, text, sizeof text);
    char reply[64];
    int64_t n = warden_call(filter, "work", 4, &mem, 1, reply, sizeof reply, NULL, NULL);
    if (n < 0) { printf("call: %s\n", warden_strerror((int32_t)n)); return 1; }
    warden_handle mine = warden_mem_revoke(mem);
    printf("revoked the object: old handle %s, fresh handle %s\n",
           warden_strerror((int32_t)warden_mem_size(mem)), mine >= 0 ? "works" : "fails");
    char out[sizeof text];
    warden_mem_read(mine, 0, out, sizeof out);
    printf("result: %s\n", out);
    warden_call(filter, "done", 4, NULL, 0, reply, sizeof reply, NULL, NULL);
    return 0;
}
