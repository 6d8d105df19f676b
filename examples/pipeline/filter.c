/* Stage 2 of 3: serves "filter". For "work" it upper-cases the memory
 * object it was handed, in place, passes it on to the sink and keeps a
 * handle of its own; for "done" it tells the sink and shows that its kept
 * handle was revoked. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "warden.h"

int main(void) {
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    warden_name_register("filter", portal);
    warden_close(portal);
    warden_handle sink = warden_name_lookup("sink", -1);
    warden_handle kept = -1;
    for (;;) {
        char req[16], reply[16], buf[4096];
        uint64_t call;
        warden_handle h[1];
        size_t nh = 1;
        int64_t n = warden_recv(service, &call, req, sizeof req, h, &nh);
        if (n < 0) return 1;
        if (n == 4 && memcmp(req, "work", 4) == 0 && nh == 1) {
            int64_t size = warden_mem_size(h[0]);
            if (size > (int64_t)sizeof buf) size = sizeof buf;
            warden_mem_read(h[0], 0, buf, (size_t)size);
            for (int64_t i = 0; i < size; i++) buf[i] = (char)toupper((unsigned char)buf[i]);
            warden_mem_write(h[0], 0, buf, (size_t)size);
            warden_call(sink, "work", 4, h, 1, reply, sizeof reply, NULL, NULL);
            kept = h[0];
            printf("upper-cased %lld bytes and passed them on\n", (long long)size);
            warden_reply(call, "ok", 2, NULL, 0);
        } else {
            printf("after the source revoked it, my handle: %s\n",
                   warden_strerror((int32_t)warden_mem_size(kept)));
            warden_call(sink, "done", 4, NULL, 0, reply, sizeof reply, NULL, NULL);
            warden_reply(call, "ok", 2, NULL, 0);
            return 0;
        }
    }
}
