/* Native primitive costs (seed 000 Table 1's columns), one
 * "<name> <ns per op>" line each.
 *   prims N
 *   call       an indirect call to an empty function
 *   alloc      malloc(16) then free, in batches of 1,000
 *   thread     pthread_create + pthread_join of an empty thread
 *   thread_batch  the same, all created first, then all joined
 *   trap       a SIGSEGV from a null store, caught by a handler that
 *              siglongjmps back (trap creation and handling) */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) static void nop(void) { __asm__ volatile(""); }
static void (*volatile target)(void) = nop;
static sigjmp_buf back;
static int *volatile nowhere;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}
static void *empty(void *arg) { return arg; }
static void on_segv(int sig) { (void)sig; siglongjmp(back, 1); }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    if (n < 1000) n = 1000;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) target();
    printf("call %.2f\n", (now_ns() - t0) / n);

    static void *batch[1000];
    t0 = now_ns();
    for (long i = 0; i < n / 1000; i++) {
        for (int j = 0; j < 1000; j++) batch[j] = malloc(16);
        for (int j = 0; j < 1000; j++) free(batch[j]);
    }
    printf("alloc %.2f\n", (now_ns() - t0) / (n / 1000 * 1000));

    long threads = n / 1000;
    t0 = now_ns();
    for (long i = 0; i < threads; i++) {
        pthread_t t;
        pthread_create(&t, NULL, empty, NULL);
        pthread_join(t, NULL);
    }
    printf("thread %.1f\n", (now_ns() - t0) / threads);
    static pthread_t all[100000];
    long batch_n = threads < 100000 ? threads : 100000;
    t0 = now_ns();
    for (long i = 0; i < batch_n; i++) pthread_create(&all[i], NULL, empty, NULL);
    for (long i = 0; i < batch_n; i++) pthread_join(all[i], NULL);
    printf("thread_batch %.1f\n", (now_ns() - t0) / batch_n);

    struct sigaction sa = {0};
    sa.sa_handler = on_segv;
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    long traps = n / 100;
    t0 = now_ns();
    for (long i = 0; i < traps; i++) {
        if (!sigsetjmp(back, 1)) *nowhere = 1;
    }
    printf("trap %.1f\n", (now_ns() - t0) / traps);
    return 0;
}
