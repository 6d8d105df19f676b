/* An echo client: sends argv[1] copies of a greeting, checks each echo,
 * then says "bye". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    warden_handle echo = warden_name_lookup("echo", -1);
    if (echo < 0) { printf("lookup: %s\n", warden_strerror(echo)); return 1; }
    char msg[64], reply[64];
    for (int i = 0; i < n; i++) {
        int len = snprintf(msg, sizeof msg, "%s says hello #%d", argv[0], i);
        int64_t r = warden_call(echo, msg, (size_t)len, NULL, 0, reply, sizeof reply, NULL, NULL);
        if (r != len || memcmp(msg, reply, (size_t)len) != 0) { printf("bad echo\n"); return 1; }
    }
    warden_call(echo, "bye", 3, NULL, 0, reply, sizeof reply, NULL, NULL);
    printf("%d echoes checked\n", n);
    return 0;
}
