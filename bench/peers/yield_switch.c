/* Linux thread switch cost: two threads pinned to one CPU take turns with
 * sched_yield.
 *   yield_switch N  ->  prints "switch <ns per switch>" */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long n;
static void pin(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    sched_setaffinity(0, sizeof set, &set);
}
static void *spin(void *arg) {
    (void)arg;
    pin();
    for (long i = 0; i < n; i++) sched_yield();
    return NULL;
}

int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 1000000;
    pin();
    pthread_t t;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_create(&t, NULL, spin, NULL);
    for (long i = 0; i < n; i++) sched_yield();
    pthread_join(t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    /* Two threads yielding n times each: about 2n switches. */
    printf("switch %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (2.0 * n));
    return 0;
}
