/* A TCP echo client task: asks "tcp-echo" where the server listens,
 * connects, and checks N round trips of growing messages.
 *
 *   client N
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "warden.h"

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100;
    warden_handle p = warden_name_lookup("tcp-echo", 10LL * 1000 * 1000 * 1000);
    if (p < 0) return printf("lookup: %s\n", warden_strerror(p)), 1;
    char addr[64] = {0};
    size_t nh = 0;
    int64_t alen = warden_call(p, "where", 5, NULL, 0, addr, sizeof addr - 1, NULL, &nh);
    if (alen < 0) return printf("call: %s\n", warden_strerror((int32_t)alen)), 1;
    warden_handle c = warden_tcp_connect(addr, 5LL * 1000 * 1000 * 1000);
    if (c < 0) return printf("connect %s: %s\n", addr, warden_strerror(c)), 1;
    static char out[4096], in[4096];
    for (long r = 0; r < rounds; r++) {
        size_t len = 1 + (r * 37) % sizeof out;
        for (size_t i = 0; i < len; i++) out[i] = (char)(r + i);
        for (size_t off = 0; off < len;) {
            int64_t w = warden_sock_send(c, out + off, len - off, -1);
            if (w < 0) return printf("send: %s\n", warden_strerror((int32_t)w)), 1;
            off += w;
        }
        for (size_t got = 0; got < len;) {
            int64_t n = warden_sock_recv(c, in + got, len - got, -1);
            if (n <= 0) return printf("recv: %lld\n", (long long)n), 1;
            got += n;
        }
        if (memcmp(out, in, len)) return printf("round %ld: mismatch\n", r), 1;
    }
    warden_close(c);
    printf("%ld round trips checked\n", rounds);
    return 0;
}
