/* An attacker on a served directory (DIR, argv[1]): calls WASI preview 1
 * itself with pointers outside its memory, lengths that lie, descriptors
 * it does not hold, paths and links that climb out, a link loop, and
 * more open files than it may hold. Prints one line per check that got
 * the wrong answer, then "hostile: N checks, M wrong". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <wasi/api.h>

#define IMPORT(name) __attribute__((__import_module__("wasi_snapshot_preview1"), __import_name__(name)))
IMPORT("path_open") int32_t raw_path_open(int32_t fd, int32_t dirflags, int32_t path, int32_t len,
                                          int32_t oflags, int64_t base, int64_t inh, int32_t fdflags,
                                          int32_t out);
IMPORT("fd_read") int32_t raw_fd_read(int32_t fd, int32_t iovs, int32_t n, int32_t out);
IMPORT("fd_write") int32_t raw_fd_write(int32_t fd, int32_t iovs, int32_t n, int32_t out);
IMPORT("fd_readdir") int32_t raw_fd_readdir(int32_t fd, int32_t buf, int32_t len, int64_t cookie,
                                            int32_t out);
IMPORT("path_filestat_get") int32_t raw_stat(int32_t fd, int32_t flags, int32_t path, int32_t len,
                                             int32_t out);

static int checks, wrong;
static void expect(const char *what, int got, int want) {
    checks++;
    if (got != want) { wrong++; printf("%s: errno %d, want %d\n", what, got, want); }
}

#define FAR 0x7ffffff0 /* far past the end of this module's memory */
#define RW (__WASI_RIGHTS_FD_READ | __WASI_RIGHTS_FD_WRITE)

int main(int argc, char **argv) {
    (void)argc;
    int dir = 3; /* the first preopened directory: the served one */
    uint32_t fd = 0, n = 0;
    const char *name = "victim.txt";
    expect("path beyond memory", raw_path_open(dir, 0, FAR, 8, 0, RW, 0, 0, (int32_t)&fd), 21);
    expect("path length wrapping", raw_path_open(dir, 0, (int32_t)name, -1, 0, RW, 0, 0, (int32_t)&fd), 37);
    expect("result beyond memory", raw_path_open(dir, 0, (int32_t)name, 10, 1, RW, 0, 0, FAR), 21);
    expect("climbing out", raw_path_open(dir, 0, (int32_t)"../x", 4, 0, RW, 0, 0, (int32_t)&fd), 63);
    expect("absolute path", raw_path_open(dir, 0, (int32_t)"/etc", 4, 0, RW, 0, 0, (int32_t)&fd), 63);
    expect("a descriptor never opened", raw_path_open(999, 0, (int32_t)name, 10, 0, RW, 0, 0, (int32_t)&fd), 8);
    expect("open", raw_path_open(dir, 0, (int32_t)name, 10, 1, RW, 0, 0, (int32_t)&fd), 0);
    uint32_t iov[2] = {FAR, 64};
    expect("write from beyond memory", raw_fd_write((int32_t)fd, (int32_t)iov, 1, (int32_t)&n), 21);
    expect("iovecs beyond memory", raw_fd_read((int32_t)fd, FAR, 4, (int32_t)&n), 21);
    expect("read into beyond memory", raw_fd_read((int32_t)fd, (int32_t)iov, 1, (int32_t)&n), 21);
    expect("readdir into beyond memory", raw_fd_readdir(dir, FAR, 4096, 0, (int32_t)&n), 21);
    expect("stat into beyond memory", raw_stat(dir, 0, (int32_t)name, 10, FAR), 21);
    expect("readdir of a file", raw_fd_readdir((int32_t)fd, (int32_t)iov, 8, 0, (int32_t)&n), 8);
    /* Links that climb out, and a loop. */
    expect("a link up", __wasi_path_symlink("../../..", dir, "up"), 0);
    expect("a link climbing out", raw_path_open(dir, 1, (int32_t)"up/etc", 6, 0, RW, 0, 0, (int32_t)&fd), 63);
    expect("a link to an absolute path", __wasi_path_symlink("/etc", dir, "abs"), 63);
    expect("a link to itself", __wasi_path_symlink("loop", dir, "loop"), 0);
    expect("a link loop", raw_path_open(dir, 1, (int32_t)"loop", 4, 0, RW, 0, 0, (int32_t)&fd), 32);
    /* More open files than a task may hold: refused, not grown. */
    int opened = 0, refused = 0;
    for (int i = 0; i < 400; i++) {
        int e = raw_path_open(dir, 0, (int32_t)name, 10, 0, __WASI_RIGHTS_FD_READ, 0, 0, (int32_t)&fd);
        if (e == 0) opened++;
        else if (e == 33) refused++;
    }
    expect("opens past the limit refused (EMFILE)", refused > 0 && opened < 400 ? 0 : 1, 0);
    printf("hostile: %d checks, %d wrong (%d opened, %d refused)\n", checks, wrong, opened, refused);
    return 0;
}
