/* The ext2 file-system task: mounts the ext2 image on a block device and
 * answers the file-service protocol (sdk/c/warden_fs.h) on a service
 * registered under a name, one call at a time.
 *
 *   ext2 NAME DEVICE [CACHE_KIB]
 *
 * NAME is the service's name (the task's manifest must provide it),
 * DEVICE the block device (its manifest's devices must grant it),
 * CACHE_KIB the most the buffer cache holds (default 4096; the task's
 * memory budget bounds it too). Prints "ext2: serving NAME" once
 * mounted. Writes stay in the cache until a FSYNC, a full cache, or the
 * task's end by its own exit; a task killed loses what was not synced,
 * as a machine losing power does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ext2.h"

extern uint32_t generation;
int serve(warden_handle service);


int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: ext2 NAME DEVICE [CACHE_KIB]\n");
        return 2;
    }
    size_t cache = (argc > 3 ? (size_t)atol(argv[3]) : 4096) * 1024;
    generation = now_seconds();
    warden_handle dev = warden_device_open(argv[2]);
    if (dev < 0) {
        fprintf(stderr, "ext2: device %s: %s\n", argv[2], warden_strerror(dev));
        return 1;
    }
    int r = fs_mount(dev, cache);
    if (r) {
        fprintf(stderr, "ext2: %s is not an ext2 file system this task can mount (%d)\n", argv[2], r);
        return 1;
    }
    warden_handle s = warden_service_create();
    if (warden_name_register(argv[1], warden_portal_create(s)) != 0) {
        fprintf(stderr, "ext2: cannot register %s\n", argv[1]);
        return 1;
    }
    printf("ext2: serving %s (%u-byte blocks, %u groups)\n", argv[1], fs.block_size, fs.groups);
    fflush(stdout);
    return serve(s);
}
