/* An ext2 file system in a task: its on-disk structures (revision 1, as
 * Debian's mke2fs makes them: 1, 2 or 4 KiB blocks, 128- or 256-byte
 * inodes, sparse superblocks, large files, file types in directory
 * entries, hashed directories read linearly), its buffer cache over a
 * Warden block device, and the operations the service answers.
 *
 * Layers, lowest first: cache.c (blocks of the device, cached in the
 * task's own memory and budget), inode.c (the superblock, group
 * descriptors, inodes, block maps and allocation), file.c (reading,
 * writing and truncating), dir.c (directories), service.c (the
 * file-service protocol of warden_fs.h). No locks: a task is one
 * thread. */
#ifndef EXT2_H
#define EXT2_H

#include <stddef.h>
#include <stdint.h>
#include "warden.h"
#include "warden_fs.h"

#define EXT2_MAGIC 0xEF53
#define EXT2_ROOT_INO 2
#define EXT2_NDIR 12
#define EXT2_IND 12
#define EXT2_DIND 13
#define EXT2_TIND 14
#define EXT2_INDEX_FL 0x1000u
#define EXT2_FT_REG 1
#define EXT2_FT_DIR 2
#define EXT2_FT_SYMLINK 7

/* Features this implementation can write safely: any other incompatible
 * or read-only-compatible feature is refused at mount. */
#define EXT2_INCOMPAT_FILETYPE 0x0002u
#define EXT2_RO_COMPAT_SPARSE_SUPER 0x0001u
#define EXT2_RO_COMPAT_LARGE_FILE 0x0002u

typedef struct {
    uint32_t inodes_count, blocks_count, r_blocks_count, free_blocks_count;
    uint32_t free_inodes_count, first_data_block, log_block_size, log_frag_size;
    uint32_t blocks_per_group, frags_per_group, inodes_per_group, mtime, wtime;
    uint16_t mnt_count;
    int16_t max_mnt_count;
    uint16_t magic, state, errors, minor_rev_level;
    uint32_t lastcheck, checkinterval, creator_os, rev_level;
    uint16_t def_resuid, def_resgid;
    uint32_t first_ino;
    uint16_t inode_size, block_group_nr;
    uint32_t feature_compat, feature_incompat, feature_ro_compat;
} ext2_super;

typedef struct {
    uint32_t block_bitmap, inode_bitmap, inode_table;
    uint16_t free_blocks_count, free_inodes_count, used_dirs_count, flags;
    uint32_t reserved[3];
} ext2_group;

typedef struct {
    uint16_t mode, uid;
    uint32_t size, atime, ctime, mtime, dtime;
    uint16_t gid, links_count;
    uint32_t blocks, flags, osd1;
    uint32_t block[15];
    uint32_t generation, file_acl, size_high, faddr;
    uint8_t osd2[12];
} ext2_inode;

/* The cache (cache.c). */
typedef struct buf buf;
int cache_init(warden_handle dev, uint32_t block_size, size_t max_bytes);
buf *bread(uint32_t block);     /* NULL: the device failed, errno-style in cache_error */
buf *bzero_get(uint32_t block); /* a block that will be overwritten whole: not read */
uint8_t *bdata(buf *b);
void bdirty(buf *b);
void brelse(buf *b);
int cache_sync(void);           /* writes every dirty block, then syncs the device */
int cache_unsynced(void);       /* whether a block was dirtied since the last cache_sync */
int cache_read_raw(uint64_t offset, void *dst, size_t len);
int cache_write_raw(uint64_t offset, const void *src, size_t len);
extern int cache_error;

/* The mounted file system (inode.c). */
typedef struct {
    ext2_super sb;
    uint32_t block_size, groups, inode_size, addr_per_block;
    ext2_group *gd;
    uint32_t gd_blocks;
    uint16_t new_extra_isize;   /* what new large inodes carry, as mke2fs's root */
    uint64_t max_file;          /* the largest file size the block map can address */
    int dirty_meta;             /* superblock or descriptors changed since sync */
} ext2_fs;
extern ext2_fs fs;

int fs_mount(warden_handle dev, size_t cache_bytes);
int fs_sync(void);
int inode_read(uint32_t ino, ext2_inode *in);
int inode_write(uint32_t ino, const ext2_inode *in);
uint64_t inode_size(const ext2_inode *in);
void inode_times_ns(uint32_t ino, uint32_t ns[3]);
int inode_set_mtime_ns(uint32_t ino, uint32_t ns);
void inode_set_size(ext2_inode *in, uint64_t size);
int inode_alloc(uint32_t parent, int dir, uint32_t *ino);
int inode_free(uint32_t ino, int dir);
/* The device block holding file block `n` of `in` (0: a hole), made if
 * `create` (then `in` changes and must be written by the caller). */
int bmap(ext2_inode *in, uint32_t ino, uint64_t n, int create, uint32_t *block);
int block_alloc(uint32_t goal, uint32_t *block);
int block_free(uint32_t block);
int truncate_blocks(ext2_inode *in, uint64_t size);
void to_attr(uint32_t ino, const ext2_inode *in, warden_fs_attr *a);
uint32_t now_seconds(void);

/* Files (file.c). */
long file_read(uint32_t ino, uint64_t off, void *dst, warden_handle to, size_t len);
long file_write(uint32_t ino, uint64_t off, const void *src, size_t len);
int file_truncate(uint32_t ino, uint64_t size);

/* Directories (dir.c). */
int dir_lookup(uint32_t dir, const char *name, size_t len, uint32_t *ino);
int dir_add(uint32_t dir, const char *name, size_t len, uint32_t ino, uint8_t type);
int dir_remove(uint32_t dir, const char *name, size_t len, uint32_t *ino);
int dir_is_empty(uint32_t dir);
int dir_set_parent(uint32_t dir, uint32_t parent);
long dir_list(uint32_t dir, uint64_t cookie, uint8_t *out, size_t cap);
int dir_init(uint32_t dir, uint32_t parent);

#endif /* EXT2_H */
