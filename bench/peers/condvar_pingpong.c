/* Two threads of one process handing a turn back and forth through a
 * mutex and condition variable.
 *   condvar_pingpong N [BYTES [pin]]  ->  prints "condvar <ns per round trip>"
 * With BYTES, each request copies that many bytes into a shared buffer and
 * the server copies them out (marshalling, as a request between tasks). */
#define _GNU_SOURCE
#include <pthread.h>
#include "pin.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn; /* 0: client's, 1: server's */
static long n;
static size_t bytes;
static char shared[65536], mine[65536], theirs[65536];

static void *serve(void *arg) {
    (void)arg;
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&m);
        while (turn != 1) pthread_cond_wait(&cv, &m);
        memcpy(theirs, shared, bytes);
        turn = 0;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 100000;
    bytes = argc > 2 ? (size_t)atol(argv[2]) : 0;
    if (bytes > sizeof shared) bytes = sizeof shared;
    pin_if_asked(argc, argv);
    pthread_t t;
    pthread_create(&t, NULL, serve, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&m);
        memcpy(shared, mine, bytes);
        turn = 1;
        pthread_cond_signal(&cv);
        while (turn != 0) pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    printf("condvar %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
