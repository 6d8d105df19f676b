/* Sieve of Eratosthenes below 4,000,000, ten rounds, as clang -O2 compiles
 * it: the compute benchmark's "real compiled program" case. */
#include <stdio.h>
#include <string.h>

#define N 4000000
static unsigned char is_prime[N];

static int sieve(void) {
    memset(is_prime, 1, N);
    for (long i = 2; i * i < N; i++)
        if (is_prime[i])
            for (long j = i * i; j < N; j += i) is_prime[j] = 0;
    int count = 0;
    for (long i = 2; i < N; i++) count += is_prime[i];
    return count;
}

int main(void) {
    int count = 0;
    for (int r = 0; r < 10; r++) count = sieve();
    return count == 283146 ? 0 : 1;
}
