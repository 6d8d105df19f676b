/* Burns CPU in a loop, printing progress: a C guest that gets preempted.
 * argv[1] rounds (default 10), argv[2] iterations per round (default
 * 20,000,000): the rounds printed count the work the task was given. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    long per_round = argc > 2 ? atol(argv[2]) : 20000000;
    unsigned long x = 1;
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < per_round; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
        printf("round %ld %lu\n", r, x & 0xff);
        fflush(stdout);
    }
    return 0;
}
