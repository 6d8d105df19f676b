/* An NFSv3 server task (RFC 1813, with the MOUNT protocol of its
 * appendix I) exporting the tree of a file-system task, over TCP (RPC
 * record marking, RFC 5531), both programs on one port.
 *
 * Layers: xdr.h (encoding), fsc.c (the file-service client: calls to the
 * file-system task), rpc.c (connections, records, RPC headers and the
 * poll loop), mount.c and nfs3.c (the two programs' procedures). */
#ifndef NFS_H
#define NFS_H

#include "warden.h"
#include "warden_fs.h"
#include "xdr.h"

/* The file system. */
int fsc_init(const char *service);
/* One request: the status (0 or -errno), the payload in `*out`. */
int fsc_call(uint32_t op, uint64_t ino, uint64_t a, uint64_t b, const void *name, uint32_t name_len,
             const void *data, uint32_t data_len, const uint8_t **out, uint32_t *len);
int fsc_attr(uint32_t op, uint64_t ino, uint64_t a, uint64_t b, const void *name, uint32_t name_len,
             const void *data, uint32_t data_len, warden_fs_attr *attr);
/* A READ of at most `count` bytes straight into `dst`: 0 and the count in
 * `*len`, or -errno. */
int fsc_read_into(uint64_t ino, uint64_t off, uint32_t count, uint8_t *dst, uint32_t *len);

/* File handles: the inode number and its generation, 8 bytes. */
#define FH_LEN 8
void put_fh(xdr_out *o, const warden_fs_attr *a);
/* The inode a handle names, checked against its generation: 0, or an
 * NFS3 status (BADHANDLE, STALE). */
int get_fh(xdr_in *x, uint64_t *ino, warden_fs_attr *attr);

/* NFS3 status of a file-service status. */
uint32_t nfs_status(int fs_status);

/* The programs: each reads its procedure's arguments from `args` and
 * writes its results to `res`; returns an RPC accept status (0 SUCCESS,
 * 3 PROC_UNAVAIL, 4 GARBAGE_ARGS). */
int mount_proc(uint32_t proc, xdr_in *args, xdr_out *res);
int nfs3_proc(uint32_t proc, xdr_in *args, xdr_out *res);

extern const char *export_path;

#define NFS_PROGRAM 100003u
#define MOUNT_PROGRAM 100005u
#define NFS3_OK 0u
#define NFS3ERR_NOENT 2u
#define NFS3ERR_IO 5u
#define NFS3ERR_INVAL 22u
#define NFS3ERR_NOTSUPP 10004u
#define NFS3ERR_BADHANDLE 10001u
#define NFS3ERR_STALE 70u
#define NFS3ERR_SERVERFAULT 10006u

#endif /* NFS_H */
