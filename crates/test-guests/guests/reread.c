/* JX's re-read benchmark (IOZone's re-read): writes a file of SIZE bytes
 * at DIR/reread.dat in records of RECORD bytes, reads it back once, then
 * reads it ROUNDS more times; prints each phase's throughput in MB/s
 * (10^6 bytes per second, timed with the monotonic clock in the guest):
 *
 *   write MBPS
 *   read MBPS
 *   reread MBPS      (the best of the ROUNDS re-reads)
 *
 * Usage: reread DIR SIZE RECORD ROUNDS */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double mbps(size_t bytes, double seconds) {
    return bytes / seconds / 1e6;
}

/* Reads the whole file in records; the seconds it took, or -1. */
static double read_all(int fd, char *buf, size_t size, size_t record) {
    double t = now();
    if (lseek(fd, 0, SEEK_SET) != 0) return -1;
    for (size_t done = 0; done < size; done += record) {
        if (read(fd, buf, record) != (ssize_t)record) return -1;
    }
    return now() - t;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: reread DIR SIZE RECORD ROUNDS\n"); return 2; }
    size_t size = strtoull(argv[2], 0, 10), record = strtoull(argv[3], 0, 10);
    int rounds = atoi(argv[4]);
    if (record == 0 || size % record != 0 || rounds < 1) { fprintf(stderr, "bad sizes\n"); return 2; }
    char path[512];
    snprintf(path, sizeof path, "%s/reread.dat", argv[1]);
    char *buf = malloc(record);
    memset(buf, 'x', record);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(path); return 1; }
    double t = now();
    for (size_t done = 0; done < size; done += record) {
        if (write(fd, buf, record) != (ssize_t)record) { perror("write"); return 1; }
    }
    printf("write %.1f\n", mbps(size, now() - t));
    double first = read_all(fd, buf, size, record);
    if (first < 0) { perror("read"); return 1; }
    printf("read %.1f\n", mbps(size, first));
    double best = 1e30;
    for (int i = 0; i < rounds; i++) {
        double s = read_all(fd, buf, size, record);
        if (s < 0) { perror("reread"); return 1; }
        if (s < best) best = s;
    }
    printf("reread %.1f\n", mbps(size, best));
    close(fd);
    unlink(path);
    return 0;
}
