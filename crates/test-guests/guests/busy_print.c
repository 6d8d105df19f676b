/* Burns CPU in a loop, printing progress: a C guest that gets preempted. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    unsigned long x = 1;
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < 20000000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
        printf("round %ld %lu\n", r, x & 0xff);
    }
    return 0;
}
