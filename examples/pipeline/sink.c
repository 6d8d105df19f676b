/* Stage 3 of 3: serves "sink". For "work" it counts the words in the
 * memory object it was handed and keeps the handle; for "done" it shows
 * the handle no longer works, and exits. */
#include <stdio.h>
#include <string.h>
#include "warden.h"

int main(void) {
    warden_handle service = warden_service_create();
    warden_handle portal = warden_portal_create(service);
    warden_name_register("sink", portal);
    warden_close(portal);
    warden_handle kept = -1;
    for (;;) {
        char req[16], buf[4096];
        uint64_t call;
        warden_handle h[1];
        size_t nh = 1;
        int64_t n = warden_recv(service, &call, req, sizeof req, h, &nh);
        if (n < 0) return 1;
        if (n == 4 && memcmp(req, "work", 4) == 0 && nh == 1) {
            int64_t size = warden_mem_size(h[0]);
            if (size > (int64_t)sizeof buf - 1) size = sizeof buf - 1;
            warden_mem_read(h[0], 0, buf, (size_t)size);
            buf[size] = 0;
            int words = 0, in = 0;
            for (char *p = buf; *p; p++) {
                if (*p == ' ') in = 0;
                else if (!in) in = 1, words++;
            }
            printf("received %d words, starting \"%.20s\"\n", words, buf);
            kept = h[0];
            warden_reply(call, "ok", 2, NULL, 0);
        } else {
            printf("after the source revoked it, my handle: %s\n",
                   warden_strerror((int32_t)warden_mem_size(kept)));
            warden_reply(call, "ok", 2, NULL, 0);
            return 0;
        }
    }
}
