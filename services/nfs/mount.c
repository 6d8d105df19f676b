/* MOUNT version 3 (RFC 1813, appendix I): the export's root handle, or a
 * directory's under it. One export, named by the server's EXPORT
 * argument; every client may mount it. */
#include <string.h>
#include "nfs.h"

#define MNT3_OK 0u
#define MNT3ERR_NOENT 2u
#define AUTH_NONE 0u
#define AUTH_UNIX 1u

/* The directory `path` (len bytes) names: the export, or a directory
 * under it (walked one LOOKUP at a time): 0 and its attributes, or -1. */
static int find(const uint8_t *path, uint32_t len, warden_fs_attr *dir) {
    size_t want = strlen(export_path);
    while (want > 0 && export_path[want - 1] == '/') want--;
    if (len < want || memcmp(path, export_path, want) || (len > want && path[want] != '/')) return -1;
    if (fsc_attr(WARDEN_FS_GETATTR, WARDEN_FS_ROOT, 0, 0, 0, 0, 0, 0, dir) != 0) return -1;
    for (uint32_t at = (uint32_t)want; at < len;) {
        while (at < len && path[at] == '/') at++;
        uint32_t end = at;
        while (end < len && path[end] != '/') end++;
        if (end > at && fsc_attr(WARDEN_FS_LOOKUP, dir->ino, 0, 0, path + at, end - at, 0, 0, dir) != 0)
            return -1;
        at = end;
    }
    return (dir->mode & WARDEN_FS_S_IFMT) == WARDEN_FS_S_IFDIR ? 0 : -1;
}

int mount_proc(uint32_t proc, xdr_in *args, xdr_out *res) {
    uint32_t len;
    const uint8_t *path;
    warden_fs_attr root;
    switch (proc) {
    case 0: /* NULL */
        return 0;
    case 1: /* MNT */
        path = x_opaque(args, 1024, &len);
        if (!path) return 4;
        if (find(path, len, &root) != 0) {
            o_u32(res, MNT3ERR_NOENT);
            return 0;
        }
        o_u32(res, MNT3_OK);
        put_fh(res, &root);
        o_u32(res, 2);
        o_u32(res, AUTH_UNIX);
        o_u32(res, AUTH_NONE);
        return 0;
    case 3: /* UMNT */
        path = x_opaque(args, 1024, &len);
        return path ? 0 : 4;
    case 2: /* DUMP: nobody is remembered */
    case 4: /* UMNTALL */
        if (proc == 2) o_u32(res, 0);
        return 0;
    case 5: /* EXPORT: one, open to all groups */
        o_u32(res, 1);
        o_opaque(res, export_path, (uint32_t)strlen(export_path));
        o_u32(res, 0);
        o_u32(res, 0);
        return 0;
    default:
        return 3;
    }
}
