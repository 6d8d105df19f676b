/* A supervisor: runs the module granted as "child" with the arguments it
 * was given, and starts it again whenever it ends, for ever. Prints
 * "started N" each time (a readiness marker for tests). */
#include <stdio.h>
#include "warden.h"

int main(int argc, char **argv) {
    warden_handle module = warden_module_lookup("child");
    if (module < 0) { printf("no child module: %s\n", warden_strerror(module)); return 1; }
    warden_budget budget = { 32 << 20, 0, 1 };
    for (int n = 1;; n++) {
        warden_handle child = warden_task_spawn(module, (const char *const *)argv + 1,
                                                (size_t)(argc - 1), &budget, NULL, 0);
        if (child < 0) { printf("spawn: %s\n", warden_strerror(child)); return 1; }
        printf("started %d\n", n);
        fflush(stdout);
        int32_t status;
        warden_task_wait(child, -1, &status);
        warden_close(child);
    }
}
