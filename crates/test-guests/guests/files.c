/* For each path argument: print its contents, or why it cannot be read.
 * "write:PATH:TEXT" writes TEXT to PATH instead; "sync:PATH" opens PATH
 * and fsyncs it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "sync:", 5) == 0) {
            int fd = open(argv[i] + 5, O_RDONLY);
            if (fd < 0 || fsync(fd) != 0) printf("%s: error: %s\n", argv[i] + 5, strerror(errno));
            else printf("%s: synced\n", argv[i] + 5);
            if (fd >= 0) close(fd);
            continue;
        }
        if (strncmp(argv[i], "write:", 6) == 0) {
            char path[256];
            const char *text = strchr(argv[i] + 6, ':');
            if (!text) continue;
            snprintf(path, sizeof path, "%.*s", (int)(text - argv[i] - 6), argv[i] + 6);
            FILE *f = fopen(path, "w");
            if (!f) { printf("%s: error: %s\n", path, strerror(errno)); continue; }
            fputs(text + 1, f);
            fclose(f);
            printf("%s: written\n", path);
            continue;
        }
        FILE *f = fopen(argv[i], "r");
        if (!f) { printf("%s: error: %s\n", argv[i], strerror(errno)); continue; }
        char buf[256];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        printf("%s: %s\n", argv[i], buf);
    }
    return 0;
}
