/* @NAME@'s client: finds the service by name (the manifest grants it
 * with `uses`), calls it once per argument, then says "bye".
 */
#include <stdio.h>
#include <string.h>
#include "warden.h"

static int call(warden_handle portal, const char *message) {
    char reply[1100];
    int64_t n = warden_call(portal, message, strlen(message), NULL, 0, reply, sizeof reply - 1,
                            NULL, NULL);
    if (n < 0) {
        fprintf(stderr, "call: %s\n", warden_strerror((int32_t)n));
        return -1;
    }
    reply[n] = 0;
    printf("client: %s\n", reply);
    return 0;
}

int main(int argc, char **argv) {
    warden_handle portal = warden_name_lookup("@NAME@", -1); /* wait for it */
    if (portal < 0) {
        fprintf(stderr, "lookup: %s\n", warden_strerror(portal));
        return 1;
    }
    for (int i = 1; i < argc; i++)
        if (call(portal, argv[i]) < 0) return 1;
    return call(portal, "bye") < 0;
}
