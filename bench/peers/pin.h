/* Shared by the ping-pong peers: with "pin" as the third argument, both
 * sides run on core 0 (as Warden's one-worker hand-off does), so no
 * wake-up crosses cores. Call before forking or starting the thread. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

static void pin_if_asked(int argc, char **argv) {
    if (argc > 3 && !strcmp(argv[3], "pin")) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        if (sched_setaffinity(0, sizeof set, &set)) perror("sched_setaffinity");
    }
}
